/* Jobs as the rest of the daemon drives them: start-up and shutdown, the supervisor's
 * callbacks, and what coexist.c and devctl.c tell dispatch. The API's side is core.h. The job
 * files behind it: jobs.c (the index, its state machine and persistence), dispatch.c, submit.c,
 * queries.c and verdicts.c; jobs_internal.h is what they share. One lock (core_lock, lock.h)
 * guards all of it and the device table. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lock.h"

struct umd_daemon;
struct supervisor;
struct supervisor_callbacks;

/* Before READY: load the store, mark running jobs interrupted, re-queue queued ones (in
 * submission order), apply retention. 0 or -errno (logged). */
int jobs_init(const struct umd_daemon *d);
/* The callbacks the supervisor should be started with. */
void jobs_supervisor_callbacks(struct supervisor_callbacks *ret);
/* Once the supervisor runs: dispatch becomes possible. */
void jobs_attach_supervisor(struct supervisor *s);
/* Periodic upkeep (retention by age). */
void jobs_tick(void);
/* Every store_retry_ms: write again each finished job whose final write failed. */
void jobs_retry_unsaved(void);
/* At shutdown, before supervisor_stop: no more dispatches; running parts will be marked
 * interrupted by jobs_shutdown once the workers are gone. */
void jobs_quiesce(void);
void jobs_shutdown(void);

/* With core_lock held: the node worker (benchmarks spanning GPUs, and the canonical check's GPU
 * pairs) as /v1/devices/node and /v1/health show it: {"uuid": "node", "device": "all", "gpus",
 * "state", "warm", "running", "restarts", "crashes", "last_health"} (last_health: the GPU pairs'
 * last canonical verdict or null). NULL on a host with fewer than two GPUs (no node worker) or
 * on allocation failure. */
json_t *jobs_node_json_locked(void);

/* Counts for STATUS= and /v1/health (metrics gets them pushed: jobs_publish_locked). */
void jobs_counts(size_t *ret_queued, size_t *ret_running, size_t *ret_total);
/* What is wrong with the job store's file (store_damage), or NULL. */
const char *jobs_store_damage(void);

struct gpu_state;
/* What the last look at device dev's GPU found (coexist.c): other processes hold its queue
 * (busy_policy), mark a running part contended, and an EXCLUSIVE_PROCESS GPU gets no context
 * kept between parts. Takes core_lock. */
void jobs_gpu_observed(size_t dev, const struct gpu_state *st, uint64_t looked_ms);
/* The looker (coexist.c) offers poke: a call asks it for a look at every GPU now, without
 * waiting for it. With one, a part starts only on a look at most LOOK_FRESH_MS old and finishes
 * only after a look that began once its worker was done; NULL (at stop, and in unit tests)
 * goes back to the last periodic look, and finishes any part still held. */
void jobs_attach_looks(void (*poke)(void));
/* With core_lock held: start the next part of dev if it may run now (after a resume). */
void jobs_dispatch_locked(size_t dev);
/* With core_lock held, after dev was paused: cancel its running part, let its worker go. */
void jobs_device_paused_locked(size_t dev);
/* With core_lock held: the devices whose canonical health check is due by health_interval_s
 * (idle, not paused, not in use by others); their clocks restart. Returns how many. *ret_all:
 * the GPU pairs are due too and every GPU is free at once, so the check is one job over every
 * GPU (which checks the pairs on the node worker); ret_devs then lists them all. */
size_t jobs_health_due_locked(size_t *ret_devs, size_t max, bool *ret_all);
