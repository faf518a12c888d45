/* The job subsystem's life (jobs.h): jobs_init makes the one struct jobs (its index, queues,
 * persistence and start thread, then the unfinished jobs recovered from the store), and
 * jobs_quiesce and jobs_shutdown end it. Kept apart from the index (job_index.c) so that
 * neither the index nor recovery (job_recover.c) needs the other to exist: this file is the only
 * one that calls both. */
#include "jobs.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "config.h"
#include "core.h"
#include "daemon.h"
#include "devices.h"
#include "job_internal.h"
#include "job_persist.h"
#include "job_queue.h"
#include "lock.h"
#include "log.h"
#include "store.h"
#include "util.h"

/* The jobs, their persistence's state and the queues freed, js left empty (again safe). */
static void jobs_empty(struct jobs *js)
{
        jobs_index_free(js);
        job_persist_free(js);
        /* One queue per device and one for the node (allocated whether or not it is used). */
        for (size_t i = 0; js->queues && i <= devices_count(); i++)
                queue_free(&js->queues[i]);
        free(js->queues);
        js->queues = NULL;
}

/* What a half-built or stopped js holds, freed; NULL is a no-op. */
static void jobs_free(struct jobs *js)
{
        if (!js)
                return;
        job_start_free(js);
        jobs_empty(js);
        json_decref(js->node_last_verdict);
        json_decref(js->node_verdict_by_tier);
        json_decref(js->rec.last_body);
        free(js);
}

void jobs_quiesce(struct jobs *js)
{
        if (!js)
                return;
        core_lock();
        js->quiescing = true;
        jobs_unlock(js);
}

void jobs_shutdown(struct jobs *js)
{
        if (!js)
                return;
        core_lock();
        core_run_deferred_locked(); /* submissions' rests (job_submit.c) point into js */
        job_start_abandon_locked(js);
        /* Parts still running lost their worker with the daemon: they did not finish. Queued
         * parts stay queued and run after the next start. */
        for (size_t k = 0; k < js->n_jobs; k++) {
                struct job *j = js->jobs[k];
                bool changed = false;
                for (size_t i = 0; i < j->n_parts; i++)
                        if (j->parts[i].st == JOB_RUNNING) {
                                job_set_part(js, j, i, JOB_INTERRUPTED, NULL,
                                             "umd stopped while the part ran");
                                changed = true;
                        }
                if (changed) {
                        job_update_state(js, j);
                        job_persist(js, j);
                }
        }
        job_persist_shutdown_locked(js);
        jobs_empty(js);
        js->sup = NULL;
        jobs_unlock(js); /* metrics see the queues empty */
        jobs_free(js);
}

static uint64_t system_monotonic_ms(void *data)
{
        (void)data;
        return now_monotonic_ms();
}

static uint64_t system_realtime_ms(void *data)
{
        (void)data;
        return now_realtime_ms();
}

static const struct jobs_clock system_clock = {.monotonic_ms = system_monotonic_ms,
                                               .realtime_ms = system_realtime_ms};

int jobs_init(const struct umd_daemon *d, struct jobs **ret)
{
        struct jobs *js;
        size_t queued;
        int r;

        js = calloc(1, sizeof(*js));
        if (!js)
                return log_error_errno(ENOMEM, "out of memory");
        js->start_fd = -1;
        r = job_start_init(js);
        if (r < 0) {
                jobs_free(js);
                return r;
        }
        js->node_wstate = WORKER_COLD;
        job_persist_init(js);
        atomic_init(&js->generation, 1);
        js->cfg = d->cfg;
        js->store = d->store;
        js->clock = d->jobs_clock ? *d->jobs_clock : system_clock;
        js->metrics = d->metrics;
        js->queues = calloc(devices_count() + 1, sizeof(*js->queues));
        if (!js->queues) {
                jobs_free(js);
                return log_error_errno(ENOMEM, "out of memory");
        }
        r = job_recover_all(js);
        if (r < 0) {
                jobs_free(js);
                return log_error_errno(r, "cannot recover jobs from the store: %m");
        }
        /* Before READY: what recovery changed is durable. */
        job_persist_sync(js);
        /* No other thread runs yet; the lock is taken for what asserts it. */
        core_lock();
        job_persist_prune(js);
        job_persist_retention(js);
        queued = jobs_queued_total(js);
        core_unlock();
        log_info("store: %zu jobs (%zu parts queued, %zu of them to be checked after start), %u "
                 "interrupted or failed at recovery",
                 store_count(js->store), queued, js->rec.unchecked, js->rec.changed);
        *ret = js;
        return 0;
}
