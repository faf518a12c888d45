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

/* Parts queued for device dev. Call with core_lock held. */
size_t jobs_queued_on_locked(size_t dev);
