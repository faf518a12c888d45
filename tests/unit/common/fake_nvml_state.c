/* A libnvidia-ml stand-in driven by a JSON state file, for the tests of umd's NVML readers: the
 * real common/nvml.c loads it (built with NVML_SONAME naming it) and asks it what it would ask
 * the driver. UMD_FAKE_NVML_STATE names the file, re-read at each handle lookup, so one test
 * program can change a GPU between reads:
 *
 *   {"devices": {"GPU-...": {
 *      "remapped_rows": {"corrected", "uncorrected", "pending", "failure"},
 *      "ecc": {"volatile"|"aggregate": {"dram"|"sram": {"corrected", "uncorrected"}}},
 *      "ecc_mode": {"current": "on"|"off", "pending": "on"|"off"},
 *      "retired_pages": {"single_bit", "double_bit", "pending"},
 *      "recovery_action": N, "inforom_valid": bool,
 *      "not_supported": ["nvmlDeviceGetEccMode", ...]}}}
 *
 * (the shape of common/nvml_errors.h's readings, so a fault reads as it is written). What a GPU
 * does not say is a healthy GPU's: zero counts, ECC on, nothing pending, a valid InfoROM. A GPU
 * the file does not name is unknown (NVML_ERROR_NOT_FOUND). Built twice: whole, and with
 * FAKE_NVML_NO_REMAPPED_ROWS, an older driver that lacks nvmlDeviceGetRemappedRows. */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml.h"

#define FAKE_GPUS_MAX  8
#define FAKE_UUID_MAX  96
#define NVML_NOT_FOUND 6

struct nvml_device {
        char uuid[FAKE_UUID_MAX];
};

static struct nvml_device gpus[FAKE_GPUS_MAX];
static json_t *state; /* the file as last read */

#define EXPORT __attribute__((visibility("default")))
/* The driver's entry points, declared by NVIDIA's nvml.h, which umd does not include. */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"

/* The state of the GPU behind dev, or NULL. */
static const json_t *gpu(nvml_device dev)
{
        return json_object_get(json_object_get(state, "devices"), dev->uuid);
}

static bool unsupported(nvml_device dev, const char *fn)
{
        size_t i;
        json_t *s;
        json_array_foreach(json_object_get(gpu(dev), "not_supported"), i, s)
        {
                if (strcmp(json_string_value(s) ? json_string_value(s) : "", fn) == 0)
                        return true;
        }
        return false;
}

static unsigned long long num(const json_t *o, const char *k)
{
        json_t *v = json_object_get(o, k);
        return json_is_integer(v) ? (unsigned long long)json_integer_value(v) : 0;
}

EXPORT int nvmlInit_v2(void)
{
        return NVML_SUCCESS;
}

EXPORT int nvmlShutdown(void)
{
        json_decref(state);
        state = NULL;
        return NVML_SUCCESS;
}

EXPORT const char *nvmlErrorString(int r)
{
        return r == NVML_SUCCESS               ? "Success"
               : r == NVML_ERROR_NOT_SUPPORTED ? "Not Supported"
               : r == NVML_NOT_FOUND           ? "Not Found"
                                               : "Unknown Error";
}

EXPORT int nvmlDeviceGetHandleByUUID(const char *uuid, nvml_device *ret)
{
        const char *path = getenv("UMD_FAKE_NVML_STATE");
        json_t *next = path ? json_load_file(path, 0, NULL) : NULL;
        size_t i = 0;
        const char *k;
        json_t *v;

        json_decref(state);
        state = next;
        json_object_foreach(json_object_get(state, "devices"), k, v)
        {
                if (i >= FAKE_GPUS_MAX)
                        break;
                if (strcmp(k, uuid) == 0) {
                        snprintf(gpus[i].uuid, sizeof(gpus[i].uuid), "%s", k);
                        *ret = &gpus[i];
                        return NVML_SUCCESS;
                }
                i++;
        }
        return NVML_NOT_FOUND;
}

EXPORT int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, nvml_device *ret)
{
        return NVML_NOT_FOUND;
}

EXPORT int nvmlDeviceGetComputeRunningProcesses_v3(nvml_device dev, unsigned *n,
                                                   struct nvml_process_info *p)
{
        *n = 0;
        return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetNvLinkState(nvml_device dev, unsigned link, int *active)
{
        return NVML_ERROR_NOT_SUPPORTED;
}

EXPORT int nvmlDeviceGetNvLinkRemotePciInfo_v2(nvml_device dev, unsigned link,
                                               struct nvml_pci_info *pci)
{
        return NVML_ERROR_NOT_SUPPORTED;
}

#ifndef FAKE_NVML_NO_REMAPPED_ROWS
EXPORT int nvmlDeviceGetRemappedRows(nvml_device dev, unsigned *corr, unsigned *unc,
                                     unsigned *pending, unsigned *failure)
{
        const json_t *r = json_object_get(gpu(dev), "remapped_rows");

        if (unsupported(dev, "nvmlDeviceGetRemappedRows"))
                return NVML_ERROR_NOT_SUPPORTED;
        *corr = (unsigned)num(r, "corrected");
        *unc = (unsigned)num(r, "uncorrected");
        *pending = json_is_true(json_object_get(r, "pending"));
        *failure = json_is_true(json_object_get(r, "failure"));
        return NVML_SUCCESS;
}
#endif

EXPORT int nvmlDeviceGetMemoryErrorCounter(nvml_device dev, int type, int counter, int location,
                                           unsigned long long *ret)
{
        const json_t *ecc = json_object_get(gpu(dev), "ecc");
        const char *c = counter == NVML_AGGREGATE_ECC ? "aggregate" : "volatile";
        const char *l = location == NVML_MEMORY_LOCATION_SRAM ? "sram" : "dram";

        if (unsupported(dev, "nvmlDeviceGetMemoryErrorCounter"))
                return NVML_ERROR_NOT_SUPPORTED;
        *ret = num(json_object_get(json_object_get(ecc, c), l),
                   type == NVML_MEMORY_ERROR_TYPE_UNCORRECTED ? "uncorrected" : "corrected");
        return NVML_SUCCESS;
}

static int feature(const json_t *o, const char *k)
{
        const char *s = json_string_value(json_object_get(o, k));
        return s && strcmp(s, "off") == 0 ? 0 : NVML_FEATURE_ON;
}

EXPORT int nvmlDeviceGetEccMode(nvml_device dev, int *current, int *pending)
{
        const json_t *m = json_object_get(gpu(dev), "ecc_mode");

        if (unsupported(dev, "nvmlDeviceGetEccMode"))
                return NVML_ERROR_NOT_SUPPORTED;
        *current = feature(m, "current");
        *pending = feature(m, "pending");
        return NVML_SUCCESS;
}

/* As the driver: the count of retired pages of a cause, "insufficient size" when there is no
 * room for their addresses. */
EXPORT int nvmlDeviceGetRetiredPages(nvml_device dev, int cause, unsigned *count,
                                     unsigned long long *addresses)
{
        const json_t *r = json_object_get(gpu(dev), "retired_pages");
        unsigned n = (unsigned)num(r, cause == NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
                                          ? "double_bit"
                                          : "single_bit");
        unsigned room = *count;

        if (unsupported(dev, "nvmlDeviceGetRetiredPages"))
                return NVML_ERROR_NOT_SUPPORTED;
        *count = n;
        if (room < n)
                return NVML_ERROR_INSUFFICIENT_SIZE;
        for (unsigned i = 0; addresses && i < n; i++)
                addresses[i] = 0x1000ull * (i + 1);
        return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetRetiredPagesPendingStatus(nvml_device dev, int *pending)
{
        if (unsupported(dev, "nvmlDeviceGetRetiredPagesPendingStatus"))
                return NVML_ERROR_NOT_SUPPORTED;
        *pending =
            json_is_true(json_object_get(json_object_get(gpu(dev), "retired_pages"), "pending"))
                ? NVML_FEATURE_ON
                : 0;
        return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetFieldValues(nvml_device dev, int n, struct nvml_field_value *values)
{
        for (int i = 0; i < n; i++) {
                struct nvml_field_value *v = &values[i];
                if (v->field_id != NVML_FI_DEV_GET_GPU_RECOVERY_ACTION ||
                    unsupported(dev, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION")) {
                        v->status = NVML_ERROR_NOT_SUPPORTED;
                        continue;
                }
                v->status = NVML_SUCCESS;
                v->value_type = NVML_VALUE_TYPE_UNSIGNED_INT;
                v->value.ui = (unsigned)num(gpu(dev), "recovery_action");
        }
        return NVML_SUCCESS;
}

EXPORT int nvmlDeviceValidateInforom(nvml_device dev)
{
        if (unsupported(dev, "nvmlDeviceValidateInforom"))
                return NVML_ERROR_NOT_SUPPORTED;
        return json_is_false(json_object_get(gpu(dev), "inforom_valid"))
                   ? NVML_ERROR_CORRUPTED_INFOROM
                   : NVML_SUCCESS;
}
