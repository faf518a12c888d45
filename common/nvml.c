/* The NVML loader (see nvml.h): one table, one pthread_once, one why. Owns the library's
 * handle and its init/shutdown; callers own what they ask of it.
 *
 * Which entry points are required: every one that a caller cannot do without (init, the two
 * handle lookups, the process list, the NVLink pair). All of them are older than the oldest
 * driver umd runs on (the process list's _v2, the newest, came with R470), so requiring them
 * for every caller refuses no driver that any caller accepted on its own. */
#include "nvml.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "dlib.h"
#include "util.h"

/* Tests build this file with another name to see the absent-library answer. */
#ifndef NVML_SONAME
#define NVML_SONAME NVML_SONAME_DEFAULT
#endif

/* "NVML unavailable (", the soname, and dlerror()'s text (which repeats the soname). */
#define NVML_WHY_MAX (2 * DLIB_WHY_MAX)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct nvml_api api;
static int loaded = -ENOENT; /* 0 once the table is whole and nvmlInit succeeded */
static char why[NVML_WHY_MAX] = "NVML not loaded";

/* Writes api, loaded and why under lock: nvml_close reads them without pthread_once, so as not
 * to load a library nobody asked for. */
static void load_locked(void)
{
        struct nvml_api a = {0};
        const struct dlib_sym syms[] = {
            {"nvmlInit_v2", "nvmlInit", (void **)&a.init, false},
            {"nvmlShutdown", NULL, (void **)&a.shutdown, true},
            {"nvmlErrorString", NULL, (void **)&a.error_string, true},
            {"nvmlDeviceGetHandleByUUID", NULL, (void **)&a.by_uuid, false},
            {"nvmlDeviceGetHandleByPciBusId_v2", NULL, (void **)&a.by_bus, false},
            {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
             (void **)&a.processes, false},
            {"nvmlDeviceGetComputeMode", NULL, (void **)&a.compute_mode, true},
            {"nvmlDeviceGetCurrPcieLinkGeneration", NULL, (void **)&a.cur_gen, true},
            {"nvmlDeviceGetCurrPcieLinkWidth", NULL, (void **)&a.cur_width, true},
            {"nvmlDeviceGetMaxPcieLinkGeneration", NULL, (void **)&a.max_gen, true},
            {"nvmlDeviceGetMaxPcieLinkWidth", NULL, (void **)&a.max_width, true},
            {"nvmlDeviceGetPcieReplayCounter", NULL, (void **)&a.replay, true},
            {"nvmlDeviceGetClockInfo", NULL, (void **)&a.clock, true},
            {"nvmlDeviceGetMaxClockInfo", NULL, (void **)&a.max_clock, true},
            /* Renamed "clocks event reasons" in newer drivers; the old name stays as an alias. */
            {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons",
             (void **)&a.reasons, true},
            {"nvmlDeviceGetTemperature", NULL, (void **)&a.temperature, true},
            {"nvmlDeviceGetPowerUsage", NULL, (void **)&a.power, true},
            {"nvmlDeviceGetNvLinkState", NULL, (void **)&a.link_state, false},
            {"nvmlDeviceGetNvLinkRemotePciInfo_v2", NULL, (void **)&a.remote_pci, false},
            {"nvmlDeviceGetRemappedRows", NULL, (void **)&a.remapped_rows, true},
            {"nvmlDeviceGetMemoryErrorCounter", NULL, (void **)&a.memory_errors, true},
            {"nvmlDeviceGetEccMode", NULL, (void **)&a.ecc_mode, true},
            /* v1 takes (device, cause, count, addresses): the first four of v2's arguments, so
             * one pointer type serves both, called with no room for addresses. */
            {"nvmlDeviceGetRetiredPages", NULL, (void **)&a.retired_pages, true},
            {"nvmlDeviceGetRetiredPagesPendingStatus", NULL, (void **)&a.retired_pending, true},
            {"nvmlDeviceGetFieldValues", NULL, (void **)&a.field_values, true},
            {"nvmlDeviceValidateInforom", NULL, (void **)&a.validate_inforom, true},
            /* Links (issue 58). */
            {"nvmlDeviceGetNvLinkErrorCounter", NULL, (void **)&a.nvlink_error, true},
            /* the Xid watch's events */
            {"nvmlEventSetCreate", NULL, (void **)&a.event_set_create, true},
            {"nvmlDeviceRegisterEvents", NULL, (void **)&a.register_events, true},
            {"nvmlEventSetWait_v2", NULL, (void **)&a.event_set_wait, true},
            {"nvmlEventSetFree", NULL, (void **)&a.event_set_free, true},
        };
        const char *const names[] = {NVML_SONAME};
        char err[DLIB_WHY_MAX];
        void *h = NULL;
        nvml_return nr;
        int r;

        r = dlib_open(names, ELEMENTSOF(names), &h, err, sizeof(err));
        if (r < 0) {
                snprintf(why, sizeof(why), "NVML unavailable (%s: %s)", NVML_SONAME, err);
                loaded = r;
                return;
        }
        r = dlib_resolve(h, syms, ELEMENTSOF(syms), err, sizeof(err));
        if (r < 0) {
                snprintf(why, sizeof(why), "NVML too old (%s)", err);
                loaded = r;
                return;
        }
        nr = a.init();
        if (nr != NVML_SUCCESS) {
                snprintf(why, sizeof(why), "NVML init failed: %s",
                         a.error_string ? a.error_string(nr) : "error");
                loaded = -EIO;
                return;
        }
        api = a;
        loaded = 0;
}

static void load(void)
{
        pthread_mutex_lock(&lock);
        load_locked();
        pthread_mutex_unlock(&lock);
}

int nvml_open(const struct nvml_api **ret_api, const char **ret_why)
{
        int r;

        pthread_once(&once, load);
        pthread_mutex_lock(&lock);
        r = loaded;
        pthread_mutex_unlock(&lock);
        if (r < 0) {
                *ret_why = why;
                return r;
        }
        *ret_api = &api;
        return 0;
}

void nvml_close(void)
{
        pthread_mutex_lock(&lock);
        if (loaded == 0) {
                if (api.shutdown)
                        api.shutdown();
                snprintf(why, sizeof(why), "NVML shut down");
                loaded = -ESHUTDOWN;
        }
        pthread_mutex_unlock(&lock);
}

const char *nvml_strerror(nvml_return r)
{
        /* Only callers that nvml_open answered ask, after its pthread_once: api is settled. */
        const char *s = api.error_string ? api.error_string(r) : NULL;
        return s ? s : "error";
}
