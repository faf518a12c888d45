/* NVLink link counts from NVML (see nvlink.h). NVML is dlopen'ed once and never unloaded; its
 * ABI for these calls is stable, so the few types used are declared here (nvml.h is not part
 * of every toolkit install). */
#include "nvlink.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define NVML_SUCCESS    0
#define NVML_LINKS_MAX  18 /* NVML_NVLINK_MAX_LINKS */
#define NVML_FEATURE_ON 1

typedef int nvml_return;
typedef struct nvml_device *nvml_device;
struct nvml_pci_info { /* nvmlPciInfo_t */
        char bus_id_legacy[16];
        unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
        char bus_id[32];
};

static struct {
        nvml_return (*init)(void);
        nvml_return (*by_bus)(const char *, nvml_device *);
        nvml_return (*link_state)(nvml_device, unsigned, int *);
        nvml_return (*remote_pci)(nvml_device, unsigned, struct nvml_pci_info *);
} nvml;
static const char *nvml_why;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void)
{
        void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);

        if (!h) {
                nvml_why = "NVML (libnvidia-ml.so.1) is not installed";
                return;
        }
        nvml.init = (nvml_return(*)(void))dlsym(h, "nvmlInit_v2");
        nvml.by_bus = (nvml_return(*)(const char *, nvml_device *))dlsym(
            h, "nvmlDeviceGetHandleByPciBusId_v2");
        nvml.link_state =
            (nvml_return(*)(nvml_device, unsigned, int *))dlsym(h, "nvmlDeviceGetNvLinkState");
        nvml.remote_pci = (nvml_return(*)(nvml_device, unsigned, struct nvml_pci_info *))dlsym(
            h, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
        if (!nvml.init || !nvml.by_bus || !nvml.link_state || !nvml.remote_pci) {
                nvml_why = "NVML lacks the NVLink calls";
                nvml.init = NULL;
                return;
        }
        if (nvml.init() != NVML_SUCCESS) {
                nvml_why = "nvmlInit failed";
                nvml.init = NULL;
        }
}

/* "00000000:1A:00.0" -> domain, bus, device. */
static int parse_bus(const char *s, unsigned *dom, unsigned *bus, unsigned *dev)
{
        unsigned fn;
        return s && sscanf(s, "%x:%x:%x.%x", dom, bus, dev, &fn) == 4 ? 0 : -EINVAL;
}

int nvlink_between(const char *bus_a, const char *bus_b, int *ret_links, int *ret_other_links,
                   char *remote, size_t len, const char **ret_why)
{
        unsigned bd, bb, bv, ad, ab, av;
        nvml_device a;
        int links = 0, other = 0;

        if (len > 0)
                remote[0] = '\0';
        pthread_once(&once, load);
        if (!nvml.init) {
                *ret_why = nvml_why;
                return -ENOENT;
        }
        if (parse_bus(bus_a, &ad, &ab, &av) < 0 || parse_bus(bus_b, &bd, &bb, &bv) < 0) {
                *ret_why = "a PCI bus id is malformed";
                return -ENOENT;
        }
        if (nvml.by_bus(bus_a, &a) != NVML_SUCCESS) {
                *ret_why = "NVML does not know the GPU's PCI bus id";
                return -ENOENT;
        }
        for (unsigned l = 0; l < NVML_LINKS_MAX; l++) {
                int active = 0;
                struct nvml_pci_info pci;

                /* Links past the GPU's count answer an error: not active. */
                if (nvml.link_state(a, l, &active) != NVML_SUCCESS || active != NVML_FEATURE_ON)
                        continue;
                memset(&pci, 0, sizeof(pci));
                if (nvml.remote_pci(a, l, &pci) != NVML_SUCCESS)
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
