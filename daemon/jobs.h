/* Jobs: the in-memory index of every job, the per-device queues, state transitions, and the
 * glue between the store (durability), the supervisor (execution) and the API (core.h).
 * One lock (core_lock) guards all of it and the device table. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct umd_config;
struct store;
struct supervisor;
struct supervisor_callbacks;

/* Before READY: load the store, mark running jobs interrupted, re-queue queued ones (in
 * submission order), apply retention. 0 or -errno (logged). */
int jobs_init(const struct umd_config *cfg, struct store *store);
/* The callbacks the supervisor should be started with. */
void jobs_supervisor_callbacks(struct supervisor_callbacks *ret);
/* Once the supervisor runs: dispatch becomes possible. */
void jobs_attach_supervisor(struct supervisor *s);
/* Periodic upkeep (retention by age). */
void jobs_tick(void);
/* At shutdown, before supervisor_stop: no more dispatches; running parts will be marked
 * interrupted by jobs_shutdown once the workers are gone. */
void jobs_quiesce(void);
void jobs_shutdown(void);

/* Counts for STATUS= and metrics. */
void jobs_counts(size_t *ret_queued, size_t *ret_running, size_t *ret_total);

void core_lock(void);
void core_unlock(void);

struct gpu_state;
/* What the last look at device dev's GPU found (coexist.c): other processes hold its queue
 * (busy_policy), mark a running part contended, and an EXCLUSIVE_PROCESS GPU gets no context
 * kept between parts. Takes core_lock. */
void jobs_gpu_observed(size_t dev, const struct gpu_state *st);
/* With core_lock held: start the next part of dev if it may run now (after a resume). */
void jobs_dispatch_locked(size_t dev);
/* With core_lock held, after dev was paused: cancel its running part, let its worker go. */
void jobs_device_paused_locked(size_t dev);
/* With core_lock held: the devices whose canonical health check is due by health_interval_s
 * (idle, not paused, not in use by others); their clocks restart. Returns how many. */
size_t jobs_health_due_locked(size_t *ret_devs, size_t max);

/* Parts queued for device dev. Call with core_lock held. */
size_t jobs_queued_on_locked(size_t dev);
