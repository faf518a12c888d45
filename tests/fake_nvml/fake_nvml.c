/* umd's one fake NVML (issue 58): a libnvidia-ml stand-in driven by a JSON state file, for every
 * test of umd's NVML readers. The real common/nvml.c loads it (built with NVML_SONAME naming it:
 * the unit tests; or as libnvidia-ml.so.1 through LD_LIBRARY_PATH: the integration tests' Xid
 * events) and asks it what it would ask the driver. UMD_FAKE_NVML_STATE names the file, re-read
 * at each handle lookup, so one test program can change a GPU between reads:
 *
 *   {"devices": {"GPU-...": {
 *      "remapped_rows": {"corrected", "uncorrected", "pending", "failure"},
 *      "ecc": {"volatile"|"aggregate": {"dram"|"sram": {"corrected", "uncorrected"}}},
 *      "ecc_mode": {"current": "on"|"off", "pending": "on"|"off"},
 *      "retired_pages": {"single_bit", "double_bit", "pending"},
 *      "recovery_action": N, "inforom_valid": bool,
 *      "nvlinks": {"present": N, "up": N}, "nvlink_errors": [[N, ...] a link, by NVML's
 *      counter number], "replay_counter": N,
 *      "not_supported": ["nvmlDeviceGetEccMode", ...]}}}
 *
 * (the shape of common/nvml_errors.h's readings, so a fault reads as it is written). What a GPU
 * does not say is a healthy GPU's: zero counts, ECC on, nothing pending, a valid InfoROM; links
 * and the replay counter not said are "not supported". A GPU the file does not name is unknown
 * (NVML_ERROR_NOT_FOUND), except umd's fake devices (uuids GPU-fa4e0000-0000-4000-8000-<index>,
 * kernels/fake.c), which are healthy GPUs whose Xid events are the "INDEX CODE" lines appended
 * to $FAKE_NVML_XID_FILE, handed out by nvmlEventSetWait_v2. Built whole, without
 * nvmlDeviceGetRemappedRows (FAKE_NVML_NO_REMAPPED_ROWS) and without
 * nvmlDeviceGetNvLinkErrorCounter (FAKE_NVML_NO_ERROR_COUNTER): older drivers. */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nvml.h"

#define FAKE_GPUS_MAX    8
#define FAKE_UUID_MAX    96
#define NVML_NOT_FOUND   6
#define FAKE_UUID_PREFIX "GPU-fa4e0000-0000-4000-8000-"
#define FAKE_POLL_NS     10000000L /* how often an event wait looks at the file: 10 ms */
#define FAKE_LINE_MAX    64

struct nvml_device {
        char uuid[FAKE_UUID_MAX];
};

static struct nvml_device gpus[FAKE_GPUS_MAX];      /* the file's GPUs, in its order */
static struct nvml_device fake_gpus[FAKE_GPUS_MAX]; /* umd's fake devices, by index */
static json_t *state;                               /* the file as last read */
static long consumed;                               /* bytes of the Xid file handed out */

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

/* One of umd's fake devices (kernels/fake.c's uuids), a healthy GPU the file need not name. */
static int fake_device(const char *uuid, nvml_device *ret)
{
        size_t n = strlen(FAKE_UUID_PREFIX);
        unsigned long idx;

        if (strncmp(uuid, FAKE_UUID_PREFIX, n) != 0)
                return NVML_NOT_FOUND;
        idx = strtoul(uuid + n, NULL, 16);
        if (idx >= FAKE_GPUS_MAX)
                return NVML_NOT_FOUND;
        snprintf(fake_gpus[idx].uuid, sizeof(fake_gpus[idx].uuid), "%s", uuid);
        *ret = &fake_gpus[idx];
        return NVML_SUCCESS;
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
        return fake_device(uuid, ret);
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

/* The links up and present ("nvlinks"), or false: the GPU says nothing of its links. */
static bool links(nvml_device dev, unsigned *up, unsigned *present)
{
        const json_t *l = json_object_get(gpu(dev), "nvlinks");

        if (!json_is_object(l))
                return false;
        *up = (unsigned)num(l, "up");
        *present = (unsigned)num(l, "present");
        return true;
}

EXPORT int nvmlDeviceGetNvLinkState(nvml_device dev, unsigned link, int *active)
{
        unsigned up, present;

        if (!links(dev, &up, &present) || link >= present)
                return NVML_ERROR_NOT_SUPPORTED;
        *active = link < up ? NVML_FEATURE_ON : 0;
        return NVML_SUCCESS;
}

#ifndef FAKE_NVML_NO_ERROR_COUNTER
/* An up link's counter from "nvlink_errors"; a link down, or not in the list, has none. */
EXPORT int nvmlDeviceGetNvLinkErrorCounter(nvml_device dev, unsigned link, int counter,
                                           unsigned long long *value)
{
        const json_t *counts = json_array_get(json_object_get(gpu(dev), "nvlink_errors"), link);
        unsigned up, present;

        if (!links(dev, &up, &present) || link >= up || !json_is_array(counts))
                return NVML_ERROR_NOT_SUPPORTED;
        json_t *v = json_array_get(counts, (size_t)counter);
        *value = json_is_integer(v) ? (unsigned long long)json_integer_value(v) : 0;
        return NVML_SUCCESS;
}
#endif

EXPORT int nvmlDeviceGetPcieReplayCounter(nvml_device dev, unsigned *value)
{
        if (!json_is_integer(json_object_get(gpu(dev), "replay_counter")))
                return NVML_ERROR_NOT_SUPPORTED;
        *value = (unsigned)num(gpu(dev), "replay_counter");
        return NVML_SUCCESS;
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

/* Xid events of umd's fake devices: the unread "INDEX CODE" lines of $FAKE_NVML_XID_FILE. */
EXPORT int nvmlEventSetCreate(void **ret)
{
        *ret = &consumed;
        return NVML_SUCCESS;
}

EXPORT int nvmlDeviceRegisterEvents(nvml_device dev, unsigned long long types, void *set)
{
        return NVML_SUCCESS;
}

EXPORT int nvmlEventSetFree(void *set)
{
        return NVML_SUCCESS;
}

/* The next unread line of the file, if there is one. */
static int next_event(struct nvml_event_data *ret)
{
        const char *path = getenv("FAKE_NVML_XID_FILE");
        FILE *f = path ? fopen(path, "r") : NULL;
        char line[FAKE_LINE_MAX];
        unsigned idx, code;
        int r = 0;

        if (!f)
                return 0;
        if (fseek(f, consumed, SEEK_SET) == 0 && fgets(line, sizeof(line), f) &&
            strchr(line, '\n') && sscanf(line, "%u %u", &idx, &code) == 2 && idx < FAKE_GPUS_MAX) {
                consumed += (long)strlen(line);
                *ret = (struct nvml_event_data){.device = &fake_gpus[idx],
                                                .event_type = NVML_EVENT_TYPE_XID,
                                                .event_data = code};
                r = 1;
        }
        fclose(f);
        return r;
}

EXPORT int nvmlEventSetWait_v2(void *set, struct nvml_event_data *ret, unsigned timeout_ms)
{
        struct timespec step = {0, FAKE_POLL_NS};

        for (unsigned waited = 0; waited <= timeout_ms; waited += FAKE_POLL_NS / 1000000) {
                if (next_event(ret))
                        return NVML_SUCCESS;
                nanosleep(&step, NULL);
        }
        return NVML_ERROR_TIMEOUT;
}
