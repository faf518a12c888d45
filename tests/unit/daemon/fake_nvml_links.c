/* A libnvidia-ml stand-in for gpustate.c's link reads (issue 58): one GPU, "GPU-links", whose
 * links 0-11 are up, 12-15 are down and 16-17 do not exist (NOT_SUPPORTED); each up link's error
 * counter reads link * 100 + the counter's NVML number; the PCIe replay counter reads 42. Built
 * twice: whole, and with FAKE_NO_ERROR_COUNTER, a driver without nvmlDeviceGetNvLinkErrorCounter.
 * Only the entry points nvml.c requires and those the link reads ask. */
#include <string.h>

#include "nvml.h"

#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NOT_FOUND     6
#define LINKS_UP                 12
#define LINKS_PRESENT            16

struct nvml_device {
        int unused;
};

static struct nvml_device the_gpu;

#define EXPORT __attribute__((visibility("default")))
/* The driver's entry points, declared by NVIDIA's nvml.h, which umd does not include. */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"

EXPORT int nvmlInit_v2(void)
{
        return NVML_SUCCESS;
}

EXPORT int nvmlShutdown(void)
{
        return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetHandleByUUID(const char *uuid, nvml_device *ret)
{
        if (strcmp(uuid, "GPU-links") != 0)
                return NVML_ERROR_NOT_FOUND;
        *ret = &the_gpu;
        return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, nvml_device *ret)
{
        return NVML_ERROR_NOT_FOUND;
}

EXPORT int nvmlDeviceGetComputeRunningProcesses_v3(nvml_device d, unsigned *n,
                                                   struct nvml_process_info *p)
{
        *n = 0;
        return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetNvLinkState(nvml_device d, unsigned link, int *active)
{
        if (link >= LINKS_PRESENT)
                return NVML_ERROR_NOT_SUPPORTED;
        *active = link < LINKS_UP ? NVML_FEATURE_ON : 0;
        return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetNvLinkRemotePciInfo_v2(nvml_device d, unsigned link,
                                               struct nvml_pci_info *pci)
{
        return NVML_ERROR_NOT_SUPPORTED;
}

EXPORT int nvmlDeviceGetPcieReplayCounter(nvml_device d, unsigned *value)
{
        *value = 42;
        return NVML_SUCCESS;
}

#ifndef FAKE_NO_ERROR_COUNTER
EXPORT int nvmlDeviceGetNvLinkErrorCounter(nvml_device d, unsigned link, int counter,
                                           unsigned long long *value)
{
        if (link >= LINKS_UP)
                return NVML_ERROR_NOT_SUPPORTED;
        *value = link * 100ull + (unsigned long long)counter;
        return NVML_SUCCESS;
}
#endif
