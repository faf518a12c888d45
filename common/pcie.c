/* Owns reading a GPU's PCIe link generation and width from sysfs. Never fails the caller for a
 * missing or odd file: what cannot be read is reported as null. */
#include "pcie.h"

#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A sysfs attribute's path: a devices directory (PCIE_SYSFS_DEVICES, or a test's temporary one),
 * a bus id and an attribute name; room for a long temporary directory, and a longer path is
 * refused (-ENAMETOOLONG), never cut. */
#define PCIE_PATH_MAX 512
/* A device's directory: PCIE_PATH_MAX less room for the attribute's name. */
#define PCIE_DIR_MAX 384
/* A normalised bus id, "dddd:bb:dd.f": 12 bytes and the NUL. */
#define PCIE_BUS_ID_MAX 16
/* A link attribute's text ("32.0 GT/s PCIe", "16"): far shorter; read() stops at the room. */
#define PCIE_ATTR_MAX 128

int pcie_parse_speed_gen(const char *s)
{
        /* Per-lane transfer rate of each generation, in GT/s. */
        static const struct {
                double gts;
                int gen;
        } table[] = {
            {2.5, 1}, {5.0, 2}, {8.0, 3}, {16.0, 4}, {32.0, 5}, {64.0, 6}, {128.0, 7},
        };
        char *end;
        double v;

        if (!s)
                return -EINVAL;
        while (isspace((unsigned char)*s))
                s++;
        if (!isdigit((unsigned char)*s))
                return -EINVAL; /* "Unknown speed" */
        errno = 0;
        v = strtod(s, &end);
        if (errno != 0 || end == s)
                return -EINVAL;
        while (*end == ' ')
                end++;
        if (strncmp(end, "GT/s", 4) != 0)
                return -EINVAL;
        for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
                if (v > table[i].gts - 0.05 && v < table[i].gts + 0.05)
                        return table[i].gen;
        return -EINVAL;
}

int pcie_parse_width(const char *s)
{
        char *end;
        long v;

        if (!s)
                return -EINVAL;
        while (isspace((unsigned char)*s))
                s++;
        if (!isdigit((unsigned char)*s))
                return -EINVAL;
        errno = 0;
        v = strtol(s, &end, 10);
        if (errno != 0)
                return -EINVAL;
        while (isspace((unsigned char)*end))
                end++;
        if (*end != '\0' || v < 1 || v > 32)
                return -EINVAL;
        return (int)v;
}

static int parse_hex(const char *s, size_t n, unsigned long max, unsigned long *ret)
{
        unsigned long v = 0;

        if (n == 0 || n > 8)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (!isxdigit((unsigned char)s[i]))
                        return -EINVAL;
                v = v * 16 + (unsigned long)(isdigit((unsigned char)s[i])
                                                 ? s[i] - '0'
                                                 : tolower((unsigned char)s[i]) - 'a' + 10);
        }
        if (v > max)
                return -EINVAL;
        *ret = v;
        return 0;
}

int pcie_normalize_bus_id(const char *bus_id, char *buf, size_t len)
{
        unsigned long domain = 0, bus, dev, fn;
        const char *c1, *c2, *dot, *p;

        if (!bus_id || !buf)
                return -EINVAL;
        c1 = strchr(bus_id, ':');
        if (!c1)
                return -EINVAL;
        c2 = strchr(c1 + 1, ':');
        p = bus_id;
        if (c2) {
                if (parse_hex(bus_id, (size_t)(c1 - bus_id), 0xffff, &domain) < 0)
                        return -EINVAL;
                p = c1 + 1;
                c1 = c2;
        }
        dot = strchr(c1 + 1, '.');
        if (!dot || parse_hex(p, (size_t)(c1 - p), 0xff, &bus) < 0 ||
            parse_hex(c1 + 1, (size_t)(dot - c1 - 1), 0x1f, &dev) < 0 ||
            parse_hex(dot + 1, strlen(dot + 1), 0x7, &fn) < 0)
                return -EINVAL;
        if (snprintf(buf, len, "%04lx:%02lx:%02lx.%lx", domain, bus, dev, fn) >= (int)len)
                return -EINVAL;
        return 0;
}

/* Reads a small sysfs attribute into buf. 0 or -errno. */
static int read_attr(const char *dir, const char *name, char *buf, size_t len)
{
        char path[PCIE_PATH_MAX];
        ssize_t n;
        int fd, r = 0;

        if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
                return -ENAMETOOLONG;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        do
                n = read(fd, buf, len - 1);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                r = -errno;
        else
                buf[n] = '\0';
        close(fd);
        return r;
}

static int set_value(json_t *o, const char *key, int v)
{
        return json_object_set_new(o, key, v > 0 ? json_integer(v) : json_null());
}

json_t *pcie_link_json(const char *devices_dir, const char *bus_id)
{
        static const struct {
                const char *key, *file;
                int (*parse)(const char *);
        } attrs[] = {
            {"current_gen", "current_link_speed", pcie_parse_speed_gen},
            {"current_width", "current_link_width", pcie_parse_width},
            {"max_gen", "max_link_speed", pcie_parse_speed_gen},
            {"max_width", "max_link_width", pcie_parse_width},
        };
        char id[PCIE_BUS_ID_MAX], dir[PCIE_DIR_MAX], text[PCIE_ATTR_MAX];
        bool have_dir;
        json_t *o;

        o = json_object();
        if (!o)
                return NULL;
        have_dir = devices_dir && pcie_normalize_bus_id(bus_id, id, sizeof(id)) == 0 &&
                   snprintf(dir, sizeof(dir), "%s/%s", devices_dir, id) < (int)sizeof(dir);
        for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
                int v = -EINVAL;

                if (have_dir && read_attr(dir, attrs[i].file, text, sizeof(text)) == 0)
                        v = attrs[i].parse(text);
                if (set_value(o, attrs[i].key, v) < 0) {
                        json_decref(o);
                        return NULL;
                }
        }
        return o;
}

double pcie_link_gbps(int gen, int width)
{
        static const double gts[] = {0, 2.5, 5, 8, 16, 32, 64};
        if (gen < 1 || gen > 6 || width < 1)
                return 0;
        /* Gen1-2 use 8b/10b, Gen3-5 128b/130b; Gen6 FLIT mode carries 242 of 256 bytes. */
        double enc = gen <= 2 ? 0.8 : gen <= 5 ? 128.0 / 130.0 : 242.0 / 256.0;
        return gts[gen] * width * enc / 8.0;
}
