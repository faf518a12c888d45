/* Kernel lines about a GPU's errors (see xid_parse.h). The forms, each with a real line in
 * tests/unit/daemon/xid_fixtures.txt and where it was seen:
 *   NVRM: Xid (PCI:0000:01:00): 31, pid=13705, name=UnrealEditor, channel 0x0000000c, ...
 *   NVRM: Xid (PCI:0000:c1:00): 31, pid=12890, Ch 0000003b, intr 00000000. MMU Fault: ...
 *   NVRM: Xid (PCI:0000:b1:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off ...
 *   NVRM: Xid (0000:01:00): 3, C 00000005 SC 00000007 M 00001ffc Data ffffffff
 *   nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 Minion Link ...
 *   NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus.
 *   NVRM: GPU at 0000:01:00.0 has fallen off the bus. */
#include "xid_parse.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The longest PCI address spelling worth reading: "PCI:00000000:3B:00.0" and a little more. */
#define XID_ADDR_SPAN 32

int xid_normalise_bus(const char *s, char ret[XID_BUS_MAX])
{
        char buf[XID_ADDR_SPAN];
        unsigned dom = 0, bus, dev, fn = 0;
        size_t n = 0;

        if (!s)
                return -EINVAL;
        if (strncmp(s, "PCI:", 4) == 0)
                s += 4;
        while (n + 1 < sizeof(buf) && (isxdigit((unsigned char)s[n]) || s[n] == ':' || s[n] == '.'))
                n++;
        while (n > 0 && (s[n - 1] == ':' || s[n - 1] == '.'))
                n--; /* "GPU 0000:2b:00.0: GPU has fallen off the bus" */
        memcpy(buf, s, n);
        buf[n] = '\0';
        unsigned colons = 0;
        for (size_t i = 0; i < n; i++)
                colons += buf[i] == ':';
        char *dot = strchr(buf, '.');
        if (dot) {
                char *end;
                fn = (unsigned)strtoul(dot + 1, &end, 16);
                if (end == dot + 1 || *end || fn > 7)
                        return -EINVAL;
                *dot = '\0';
        }
        int got = colons == 2   ? sscanf(buf, "%x:%x:%x", &dom, &bus, &dev)
                  : colons == 1 ? sscanf(buf, "%x:%x", &bus, &dev) + 1
                                : 0;
        if (got != 3 || dom > 0xffff || bus > 0xff || dev > 0x1f)
                return -EINVAL;
        snprintf(ret, XID_BUS_MAX, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
        return 0;
}

static void copy_text(char *dst, size_t len, const char *src)
{
        size_t n = strcspn(src, "\r\n");
        if (n >= len)
                n = len - 1;
        memcpy(dst, src, n);
        dst[n] = '\0';
}

/* "pid=1234, name=python3, " after the code (either, both or none; "pid='<unknown>'" too). */
static void parse_process(const char *p, struct xid_line *x)
{
        x->pid = -1;
        x->process[0] = '\0';
        while (*p == ' ')
                p++;
        if (strncmp(p, "pid=", 4) == 0) {
                char *end;
                long v = strtol(p + 4, &end, 10);
                if (end != p + 4 && v > 0 && v <= INT32_MAX)
                        x->pid = (int)v;
                p += 4 + strcspn(p + 4, ",");
                if (*p == ',')
                        p++;
                while (*p == ' ')
                        p++;
        }
        if (strncmp(p, "name=", 5) == 0) {
                size_t n = strcspn(p + 5, ",");
                if (n >= sizeof(x->process))
                        n = sizeof(x->process) - 1;
                memcpy(x->process, p + 5, n);
                x->process[n] = '\0';
                if (strcmp(x->process, "<unknown>") == 0)
                        x->process[0] = '\0';
        }
}

/* "<tag> (ADDR): CODE, rest" at tag (an Xid or SXid line). */
static int parse_coded(const char *tag, size_t taglen, const char *from, enum xid_kind kind,
                       struct xid_line *ret)
{
        struct xid_line x = {.kind = kind};
        const char *p = tag + taglen;
        char *end;

        if (xid_normalise_bus(p, x.bus) < 0)
                return 0;
        p = strchr(p, ')');
        if (!p || p[1] != ':')
                return 0;
        p += 2;
        unsigned long code = strtoul(p, &end, 10);
        if (end == p || code == 0 || code > 99999)
                return 0;
        x.code = (unsigned)code;
        parse_process(*end == ',' ? end + 1 : end, &x);
        copy_text(x.text, sizeof(x.text), from);
        *ret = x;
        return 1;
}

/* "NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus." or "NVRM: GPU at 0000:01:00.0 has
 * fallen off the bus.": the first PCI address after "GPU ". */
static int parse_fallen(const char *nvrm, struct xid_line *ret)
{
        struct xid_line x = {.kind = XID_KIND_FALLEN_OFF_BUS, .code = 79, .pid = -1};
        const char *p = strstr(nvrm, "GPU ");

        if (!p)
                return 0;
        p += 4;
        if (strncmp(p, "at ", 3) == 0)
                p += 3;
        if (xid_normalise_bus(p, x.bus) < 0)
                return 0;
        copy_text(x.text, sizeof(x.text), nvrm);
        *ret = x;
        return 1;
}

int xid_parse_line(const char *line, struct xid_line *ret)
{
        const char *nvrm = strstr(line, "NVRM: ");
        const char *tag;

        if (nvrm && (tag = strstr(nvrm, "Xid (")) && tag == nvrm + 6)
                return parse_coded(tag, 5, nvrm, XID_KIND_XID, ret);
        if (nvrm && strstr(nvrm, "has fallen off the bus"))
                return parse_fallen(nvrm, ret);
        tag = strstr(line, "SXid (");
        if (tag) {
                /* the switch's name ("nvidia-nvswitch3: ") starts the text where there is one */
                const char *sw = strstr(line, "nvidia-nvswitch");
                const char *from = sw && sw < tag ? sw : tag;
                return parse_coded(tag, 6, from, XID_KIND_SXID, ret);
        }
        return 0;
}

int xid_parse_kmsg(const char *rec, uint64_t *ret_seq, uint64_t *ret_usec, const char **ret_msg)
{
        unsigned long long seq, usec;
        int pri, n = 0;
        const char *semi = strchr(rec, ';');

        if (!semi || !isdigit((unsigned char)rec[0]) ||
            sscanf(rec, "%d,%llu,%llu,%n", &pri, &seq, &usec, &n) != 3 || n == 0 ||
            rec + n > semi + 1)
                return -EINVAL;
        *ret_seq = seq;
        *ret_usec = usec;
        *ret_msg = semi + 1;
        return 0;
}

int xid_recovery_action(const char *text)
{
        const char *p = strstr(text, "recovery action changed from ");
        const char *to;

        if (!p || !(to = strstr(p, " to 0x")))
                return -1;
        char *end;
        long v = strtol(to + 6, &end, 16);
        return end == to + 6 || v < 0 || v > 255 ? -1 : (int)v;
}
