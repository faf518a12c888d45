/* The GPUs umd owns: a table (struct devices, one per daemon, made by devices_new in main.c's
 * order and held as d->devices) discovered once at start by running `umd-worker --list`, then
 * fixed for the daemon's life. Holds each device's identity and its current worker state; the
 * callers serialise access with the core lock. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "gpustate.h"
#include "supervisor.h"
#include "uuid.h"

/* A GPU's uuid as NVML and CUDA print it: "GPU-" and 36 characters, with room to spare. */
#define DEVICE_UUID_MAX 64
/* Why a device is faulted or restarting, or why it is paused: a sentence, with a worker's exit
 * status or an admin's reason (at most REASON_MAX, devctl.c). */
#define DEVICE_REASON_MAX 256
/* When a pause began: an RFC 3339 time with milliseconds ("2026-12-08T00:00:00.000Z"). */
#define DEVICE_TIME_MAX 40

struct umd_config;

struct device {
        size_t index; /* umd's index: position in the device list */
        /* index, uuid, fake and fake_index are fixed once devices_new returns, before any
         * thread starts: they may be read without core_lock. */
        char uuid[DEVICE_UUID_MAX];
        bool fake;
        json_t *info; /* the --list entry */
        enum worker_state wstate;
        char reason[DEVICE_REASON_MAX]; /* why faulted / restarting */
        json_t *last_verdict;           /* last health verdict (of any tier) or NULL */
        json_t *verdict_by_tier; /* {"quick": verdict, "extended": verdict}: each tier's last */
        unsigned running_jobs;   /* 0 or 1 */

        /* Sharing the GPU with its owners (job_index.c and devctl.c keep these). */
        int fake_index;          /* for gpustate: -1 for a real GPU (fixed, see uuid) */
        struct gpu_state gpu;    /* the last look (gpustate_query) */
        uint64_t looked_ms;      /* when that look began (monotonic); 0: never */
        uint64_t look_wanted_ms; /* a part may start once a look began after this; 0: none */
        int contended_by;        /* most other processes seen during the running part */
        /* A part its worker finished, held until a look that began after it (job_dispatch.c): a
         * verdict needs the GPU seen undisturbed right after the part too. */
        struct held_done *held;
        /* The queue's head right after this GPU's part started, when it was ready then
         * (committed and checked); "" else. The worker's look after that part began later, so
         * it may serve as the look before that head's start (job_dispatch.c). */
        char ready_at_start[JOB_ID_MAX];
        size_t ready_at_start_part;
        bool paused; /* admin: run nothing, hold nothing */
        char pause_reason[DEVICE_REASON_MAX];
        char paused_at[DEVICE_TIME_MAX];
        uint64_t last_check_ms; /* last canonical health check (realtime), for the schedule */
};

/* Resolve the worker program: cfg->worker_path, else the installed one, else the one in the
 * build tree beside umd. *ret malloc'd. 0 or -ENOENT (logged). */
int devices_find_worker(const struct umd_config *cfg, char **ret);

/* The device table: one per daemon (devices_new), held by struct umd_daemon. */
struct devices;
/* Run the worker's --list (with a timeout), keep the devices cfg->devices selects. 0 with *ret
 * (possibly with zero devices, the reason kept for /v1/health) or -errno (logged). The table is
 * also the one the handle-less readers below answer from, until devices_free. */
int devices_new(const struct umd_config *cfg, const char *worker_path, struct devices **ret);
/* NULL-safe; returns NULL. */
struct devices *devices_free(struct devices *ds);
/* A NULL table is an empty one (nothing discovered yet). */
size_t devices_size(const struct devices *ds);
struct device *devices_at(const struct devices *ds, size_t i);
/* By index ("0") or uuid; -1 when unknown. */
ssize_t devices_find(const struct devices *ds, const char *spec);
ssize_t devices_find_uuid(const struct devices *ds, const char *uuid);
/* Why the table is empty, or NULL. */
const char *devices_why_empty(const struct devices *ds);
/* The node (the worker for benchmarks spanning GPUs) is one more slot after the GPUs, on
 * hosts with two or more. */
static inline bool devices_has_node(const struct devices *ds)
{
        return devices_size(ds) >= 2;
}

static inline size_t devices_node_slot(const struct devices *ds)
{
        return devices_size(ds);
}

/* The same, without a handle, on the table devices_new made last: what the job files
 * (daemon/jobs/) call until they reach the table as js->devices. Nothing else calls them. */
size_t devices_count(void);
struct device *devices_get(size_t i);
ssize_t devices_lookup_uuid(const char *uuid);
const char *devices_empty_reason(void);
static inline bool have_node(void)
{
        return devices_count() >= 2;
}

static inline size_t node_index(void)
{
        return devices_count();
}

/* A device's state as the API, the metrics and the logs name it. */
enum device_state {
        DEVICE_IDLE, /* also cold: idle without a worker (see "warm") */
        DEVICE_BUSY,
        DEVICE_STARTING,
        DEVICE_RESTARTING, /* its worker died and is about to be started again */
        DEVICE_FAULTED,
        DEVICE_STOPPED,
        DEVICE_PAUSED,
        DEVICE_STATE_MAX,
};
/* The one table of device state names, indexed by enum device_state. */
extern const char *const device_state_names[DEVICE_STATE_MAX];
enum device_state device_state(const struct device *d);
/* The state a worker in ws shows (the node worker's, which has no struct device). */
enum device_state device_state_of_worker(enum worker_state ws);
const char *device_state_string(const struct device *d);
json_t *device_to_json(const struct device *d);
