/* Byte sizes as people write them, and back. Sizes end up in JSON, whose integers jansson keeps
 * as signed 64-bit, so anything above INT64_MAX is out of range even though it fits a uint64_t. */
#include "size.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define SIZE_MAX_BYTES ((uint64_t)INT64_MAX)
/* TB needs 12 fraction digits at most; 20 keeps frac * mult inside 128 bits. */
#define SIZE_MAX_FRAC_DIGITS 20

static const struct {
        const char *suffix;
        uint64_t mult;
} units[] = {
    {"", 1},
    {"B", 1},
    {"KiB", 1ull << 10},
    {"MiB", 1ull << 20},
    {"GiB", 1ull << 30},
    {"TiB", 1ull << 40},
    {"kB", 1000ull},
    {"KB", 1000ull},
    {"MB", 1000ull * 1000},
    {"GB", 1000ull * 1000 * 1000},
    {"TB", 1000ull * 1000 * 1000 * 1000},
};

int size_parse(const char *s, uint64_t *ret)
{
        unsigned __int128 whole = 0, frac = 0, frac_scale = 1, v;
        const char *p = s;
        bool have_digits = false, have_frac = false;
        uint64_t mult = 0;

        if (!s)
                return -EINVAL;

        for (; *p >= '0' && *p <= '9'; p++) {
                have_digits = true;
                whole = whole * 10u + (unsigned)(*p - '0');
                if (whole > SIZE_MAX_BYTES)
                        return -ERANGE;
        }
        if (*p == '.') {
                unsigned n = 0;

                have_frac = true;
                p++;
                for (; *p >= '0' && *p <= '9'; p++, n++) {
                        if (n >= SIZE_MAX_FRAC_DIGITS) {
                                /* Only trailing zeros could still give whole bytes. */
                                if (*p != '0')
                                        return -EINVAL;
                                continue;
                        }
                        frac = frac * 10u + (unsigned)(*p - '0');
                        frac_scale *= 10u;
                }
                if (n == 0)
                        return -EINVAL; /* "1." */
        }
        if (!have_digits)
                return -EINVAL; /* "", "-1", ".5", "MiB" */

        /* One optional space, so that size_format()'s "64 MiB" reads back. */
        if (*p == ' ' && p[1] != '\0')
                p++;

        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
                if (strcmp(p, units[i].suffix) == 0) {
                        mult = units[i].mult;
                        break;
                }
        if (mult == 0)
                return -EINVAL;
        if (have_frac && *p == '\0')
                return -EINVAL; /* a fraction needs a unit: "1.5" is not a byte count */

        v = whole * mult;
        if (v > SIZE_MAX_BYTES)
                return -ERANGE;
        if (have_frac) {
                unsigned __int128 f = frac * mult;

                if (f % frac_scale != 0)
                        return -EINVAL; /* not a whole number of bytes */
                v += f / frac_scale;
                if (v > SIZE_MAX_BYTES)
                        return -ERANGE;
        }
        if (ret)
                *ret = (uint64_t)v;
        return 0;
}

char *size_format(uint64_t bytes, char *buf, size_t len)
{
        static const char *const names[] = {"TiB", "GiB", "MiB", "KiB"};
        int r = -1;

        if (!buf || len == 0)
                return NULL;
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                uint64_t unit = 1ull << (10 * (4 - i));

                if (bytes >= unit && bytes % unit == 0) {
                        r = snprintf(buf, len, "%llu %s", (unsigned long long)(bytes / unit),
                                     names[i]);
                        break;
                }
        }
        if (r < 0)
                r = snprintf(buf, len, "%llu B", (unsigned long long)bytes);
        if (r < 0 || (size_t)r >= len)
                return NULL;
        return buf;
}

char *size_format_approx(uint64_t bytes, char *buf, size_t len)
{
        static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
        double v = (double)bytes;
        size_t u = 0;
        int r;

        if (!buf || len == 0)
                return NULL;
        while (v >= 1024 && u + 1 < sizeof(names) / sizeof(names[0])) {
                v /= 1024;
                u++;
        }
        r = snprintf(buf, len, v == (double)(uint64_t)v ? "%.0f %s" : "%.1f %s", v, names[u]);
        if (r < 0 || (size_t)r >= len)
                return NULL;
        return buf;
}
