/* GPU and process placement facts from sysfs and the kernel (see placement.h). No libnuma: the
 * two syscalls needed (get_mempolicy here, set_mempolicy in the supervisor) are called directly,
 * so the daemon needs no extra package on a host without NUMA. */
#include "placement.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/mempolicy.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pcie.h"

/* A normalised bus id, "dddd:bb:dd.f" (12 bytes and the NUL), with room. */
#define PLACEMENT_BUS_ID_MAX 32
/* A sysfs attribute's path under a devices or nodes directory (a test's may be a temporary
 * one); a longer one is cut, its read fails, and the answer is "unknown". */
#define PLACEMENT_PATH_MAX 256
/* An attribute's text: a cpulist or node list in ranges ("0-63,128-191"), a few per NUMA node
 * even on the largest hosts; a longer list is cut at the room and then refused by the parser. */
#define PLACEMENT_ATTR_MAX 1024
/* The worker's own CPUs as a cpulist for its result; cpulist_format ends a longer one "...". */
#define PLACEMENT_CPUS_TEXT_MAX 512
/* get_mempolicy's node mask: 16 longs, 1024 nodes (Linux's MAX_NUMNODES at its largest). */
#define PLACEMENT_NODE_MASK_LONGS 16

int cpulist_parse(const char *s, cpu_set_t *ret)
{
        cpu_set_t set;

        CPU_ZERO(&set);
        if (!s)
                return -EINVAL;
        while (*s && *s != '\n') {
                char *end;
                unsigned long a, b;

                if (!isdigit((unsigned char)*s))
                        return -EINVAL;
                a = strtoul(s, &end, 10);
                b = a;
                if (*end == '-') {
                        s = end + 1;
                        if (!isdigit((unsigned char)*s))
                                return -EINVAL;
                        b = strtoul(s, &end, 10);
                }
                if (b < a || b >= CPU_SETSIZE)
                        return -EINVAL;
                for (unsigned long c = a; c <= b; c++)
                        CPU_SET(c, &set);
                s = end;
                if (*s == ',')
                        s++;
                else if (*s && *s != '\n')
                        return -EINVAL;
        }
        *ret = set;
        return 0;
}

void cpulist_format(const cpu_set_t *set, char *buf, size_t len)
{
        size_t at = 0;

        if (len == 0)
                return;
        buf[0] = '\0';
        for (int c = 0; c < CPU_SETSIZE; c++) {
                int e = c;
                int n;

                if (!CPU_ISSET(c, set))
                        continue;
                while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set))
                        e++;
                n = e > c ? snprintf(buf + at, len - at, "%s%d-%d", at ? "," : "", c, e)
                          : snprintf(buf + at, len - at, "%s%d", at ? "," : "", c);
                if (n < 0 || (size_t)n >= len - at) {
                        if (len > 4)
                                snprintf(buf + len - 4, 4, "...");
                        return;
                }
                at += (size_t)n;
                c = e;
        }
}

static int read_small(const char *path, char *buf, size_t len)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        ssize_t n;

        if (fd < 0)
                return -errno;
        n = read(fd, buf, len - 1);
        close(fd);
        if (n < 0)
                return -EIO;
        buf[n] = '\0';
        return 0;
}

void placement_gpu(const char *devices_dir, const char *pci_bus_id, int *ret_node,
                   cpu_set_t *ret_cpus, bool *ret_has_cpus)
{
        char bus[PLACEMENT_BUS_ID_MAX], path[PLACEMENT_PATH_MAX], buf[PLACEMENT_ATTR_MAX];

        *ret_node = -1;
        *ret_has_cpus = false;
        if (!pci_bus_id || pcie_normalize_bus_id(pci_bus_id, bus, sizeof(bus)) < 0)
                return;
        snprintf(path, sizeof(path), "%s/%s/numa_node", devices_dir, bus);
        if (read_small(path, buf, sizeof(buf)) == 0) {
                long n = strtol(buf, NULL, 10);

                *ret_node = n >= 0 && n < 1024 ? (int)n : -1;
        }
        snprintf(path, sizeof(path), "%s/%s/local_cpulist", devices_dir, bus);
        if (read_small(path, buf, sizeof(buf)) == 0 && cpulist_parse(buf, ret_cpus) == 0 &&
            CPU_COUNT(ret_cpus) > 0)
                *ret_has_cpus = true;
}

int placement_numa_nodes(const char *nodes_dir)
{
        char path[PLACEMENT_PATH_MAX], buf[PLACEMENT_ATTR_MAX];
        cpu_set_t nodes; /* a node list has the cpulist syntax */

        snprintf(path, sizeof(path), "%s/online", nodes_dir);
        if (read_small(path, buf, sizeof(buf)) < 0 || cpulist_parse(buf, &nodes) < 0 ||
            CPU_COUNT(&nodes) == 0)
                return 1;
        return CPU_COUNT(&nodes);
}

static const char *policy_name(int mode)
{
        switch (mode) {
        case MPOL_DEFAULT:
                return "default";
        case MPOL_PREFERRED:
                return "preferred";
        case MPOL_BIND:
                return "bind";
        case MPOL_INTERLEAVE:
                return "interleave";
        default:
                return "other";
        }
}

json_t *placement_self_json(const char *pci_bus_id)
{
        char cpus[PLACEMENT_CPUS_TEXT_MAX];
        cpu_set_t set;
        unsigned long mask[PLACEMENT_NODE_MASK_LONGS] = {0};
        int mode = -1, node = -1;
        json_t *o;

        cpus[0] = '\0';
        if (sched_getaffinity(0, sizeof(set), &set) == 0)
                cpulist_format(&set, cpus, sizeof(cpus));
        if (syscall(SYS_get_mempolicy, &mode, mask, sizeof(mask) * 8, NULL, 0) == 0) {
                for (int b = 0; b < (int)(sizeof(mask) * 8); b++)
                        if (mask[b / (8 * sizeof(long))] >> (b % (8 * sizeof(long))) & 1ul) {
                                node = b;
                                break;
                        }
        }
        o = json_pack("{s:s?, s:s?, s:o}", "cpus", cpus[0] ? cpus : NULL, "memory_policy",
                      mode >= 0 ? policy_name(mode) : NULL, "numa_node",
                      mode > MPOL_DEFAULT && node >= 0 ? json_integer(node) : json_null());
        if (o && pci_bus_id) {
                cpu_set_t g;
                bool has = false;
                int gnode;

                placement_gpu(PLACEMENT_SYSFS_DEVICES, pci_bus_id, &gnode, &g, &has);
                cpus[0] = '\0';
                if (has)
                        cpulist_format(&g, cpus, sizeof(cpus));
                json_object_set_new(o, "gpu_numa_node",
                                    gnode >= 0 ? json_integer(gnode) : json_null());
                json_object_set_new(o, "gpu_local_cpus", has ? json_string(cpus) : json_null());
        }
        return o;
}
