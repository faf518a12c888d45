/* Small shared helpers: clocks, RFC 3339 timestamps, strict integer parsing, bounded copies. */
#include "util.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static uint64_t clock_ms(clockid_t id)
{
        struct timespec ts;

        /* Cannot fail for the clocks used here. */
        (void)clock_gettime(id, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t now_realtime_ms(void)
{
        return clock_ms(CLOCK_REALTIME);
}

uint64_t now_monotonic_ms(void)
{
        return clock_ms(CLOCK_MONOTONIC);
}

void cond_init_monotonic(pthread_cond_t *c)
{
        pthread_condattr_t ca;

        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(c, &ca);
        pthread_condattr_destroy(&ca);
}

void deadline_after_ms(clockid_t id, unsigned ms, struct timespec *ret)
{
        struct timespec ts;

        (void)clock_gettime(id, &ts);
        ts.tv_sec += ms / 1000;
        ts.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
        }
        *ret = ts;
}

/* n in [0, 10^width) as width digits. */
static char *put_digits(char *o, unsigned n, unsigned width)
{
        for (unsigned i = width; i > 0; i--) {
                o[i - 1] = (char)('0' + n % 10);
                n /= 10;
        }
        return o + width;
}

void str_copy_cut(char *dst, size_t size, const char *src)
{
        assert(dst && size > 0);
        size_t n = src ? strnlen(src, size - 1) : 0;

        memcpy(dst, src ? src : "", n);
        dst[n] = '\0';
}

char *format_rfc3339_ms(uint64_t realtime_ms, char *buf, size_t len)
{
        /* The civil date of a day count (Howard Hinnant's days-to-civil, in eras of 400
         * years): not gmtime_r and snprintf, which took glibc's time-zone lock and a format
         * parse for each of a job's seven timestamps, several under core_lock. */
        uint64_t days = realtime_ms / 86400000u, in_day = realtime_ms % 86400000u;
        uint64_t z = days + 719468u, era = z / 146097u, doe = z - era * 146097u;
        uint64_t yoe = (doe - doe / 1460u + doe / 36524u - doe / 146096u) / 365u;
        uint64_t doy = doe - (365u * yoe + yoe / 4u - yoe / 100u), mp = (5u * doy + 2u) / 153u;
        unsigned day = (unsigned)(doy - (153u * mp + 2u) / 5u + 1u);
        unsigned month = (unsigned)(mp < 10u ? mp + 3u : mp - 9u);
        uint64_t year = yoe + era * 400u + (month <= 2u);

        if (!buf || len == 0)
                return NULL;
        /* "YYYY-MM-DDTHH:MM:SS.mmmZ" and its NUL; RFC 3339 has four-digit years only. */
        if (len < 25 || year > 9999) {
                buf[0] = '\0';
                return NULL;
        }
        char *o = put_digits(buf, (unsigned)year, 4);
        *o++ = '-';
        o = put_digits(o, month, 2);
        *o++ = '-';
        o = put_digits(o, day, 2);
        *o++ = 'T';
        o = put_digits(o, (unsigned)(in_day / 3600000u), 2);
        *o++ = ':';
        o = put_digits(o, (unsigned)(in_day / 60000u % 60u), 2);
        *o++ = ':';
        o = put_digits(o, (unsigned)(in_day / 1000u % 60u), 2);
        *o++ = '.';
        o = put_digits(o, (unsigned)(in_day % 1000u), 3);
        *o++ = 'Z';
        *o = '\0';
        return buf;
}

int parse_uint64(const char *s, uint64_t min, uint64_t max, uint64_t *ret)
{
        uint64_t v = 0;

        /* Digits only: strtoull would accept leading blanks, a sign and "-1" as UINT64_MAX. */
        if (!s || !*s)
                return -EINVAL;
        for (const char *p = s; *p; p++) {
                unsigned d;

                if (*p < '0' || *p > '9')
                        return -EINVAL;
                d = (unsigned)(*p - '0');
                if (v > (UINT64_MAX - d) / 10u)
                        return -ERANGE;
                v = v * 10u + d;
        }
        if (v < min || v > max)
                return -ERANGE;
        if (ret)
                *ret = v;
        return 0;
}

bool streq_ptr(const char *a, const char *b)
{
        if (!a || !b)
                return a == b;
        return strcmp(a, b) == 0;
}
