/* NVLink link counts from NVML (see nvlink.h), through the one NVML loader, common/nvml.h. */
#include "nvlink.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "nvml.h"

/* "00000000:1A:00.0" -> domain, bus, device. */
static int parse_bus(const char *s, unsigned *dom, unsigned *bus, unsigned *dev)
{
        unsigned fn;
        return s && sscanf(s, "%x:%x:%x.%x", dom, bus, dev, &fn) == 4 ? 0 : -EINVAL;
}

int nvlink_between(const char *bus_a, const char *bus_b, int *ret_links, int *ret_other_links,
                   char *remote, size_t len, const char **ret_why)
{
        const struct nvml_api *nvml = NULL;
        const char *why = NULL;
        unsigned bd, bb, bv, ad, ab, av;
        nvml_device a;
        int links = 0, other = 0;

        if (len > 0)
                remote[0] = '\0';
        if (nvml_open(&nvml, &why) < 0) {
                *ret_why = why;
                return -ENOENT;
        }
        if (parse_bus(bus_a, &ad, &ab, &av) < 0 || parse_bus(bus_b, &bd, &bb, &bv) < 0) {
                *ret_why = "a PCI bus id is malformed";
                return -ENOENT;
        }
        if (nvml->by_bus(bus_a, &a) != NVML_SUCCESS) {
                *ret_why = "NVML does not know the GPU's PCI bus id";
                return -ENOENT;
        }
        for (unsigned l = 0; l < NVML_NVLINK_LINKS_MAX; l++) {
                int active = 0;
                struct nvml_pci_info pci;

                /* Links past the GPU's count answer an error: not active. */
                if (nvml->link_state(a, l, &active) != NVML_SUCCESS || active != NVML_FEATURE_ON)
                        continue;
                memset(&pci, 0, sizeof(pci));
                if (nvml->remote_pci(a, l, &pci) != NVML_SUCCESS)
                        continue;
                if (pci.domain == bd && pci.bus == bb && pci.device == bv) {
                        links++;
                } else {
                        if (other++ == 0 && len > 0)
                                snprintf(remote, len, "%.*s", (int)sizeof(pci.bus_id), pci.bus_id);
                }
        }
        *ret_links = links;
        *ret_other_links = other;
        return 0;
}
