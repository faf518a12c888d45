/* The look at the GPUs (see coexist.h). Owns one thread; never holds core_lock while asking the
 * driver, because NVML may take long on a GPU in trouble and the API must stay up. Looks at
 * every GPU every busy_poll_ms, and at once at the GPU dispatch pokes it for: right before a
 * part starts and right after it ends, so a verdict never rests on a look up to busy_poll_ms
 * old. A poke looks at its own GPU alone: on a node of eight, a part's end asked the driver
 * about all eight, and under a steady stream of pokes that was the only look there was. The
 * thread is woken only once the poker lets go of core_lock, which a look ends by taking. */
#include "coexist.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "daemon.h"
#include "devices.h"
#include "gpustate.h"
#include "jobs.h"
#include "lock.h"
#include "log.h"
#include "supervisor.h"
#include "util.h"

/* The devices one round of the health schedule may find due: more than a host has GPUs. */
#define SCHEDULE_DUE_MAX 64

/* One per daemon (coexist_start), held by struct umd_daemon. */
struct coexist {
        pthread_t thread;
        bool stopping;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        const struct umd_config *cfg;
        struct supervisor *sup;
        struct jobs *jobs;       /* d->jobs: told what each look found */
        struct devices *devices; /* d->devices: the GPUs looked at */
        /* Under lock: a look was asked for (coexist_poke), at every GPU, or at those marked. */
        bool poked, poked_all;
        bool *poked_dev;
        size_t n_devs;
        bool *only; /* the thread's copy of poked_dev */
};

/* Looks at the GPUs marked in only, or at every one when only is NULL. */
static void look(struct coexist *cx, const bool *only)
{
        for (size_t i = 0; i < devices_size(cx->devices); i++) {
                char uuid[DEVICE_UUID_MAX];
                int fake_index;
                struct gpu_state st;
                uint64_t at = now_monotonic_ms();

                if (only && !only[i])
                        continue;
                /* Fixed once the devices are found (devices.h): read without core_lock, which
                 * every part's end and start would otherwise take once more. */
                struct device *d = devices_at(cx->devices, i);
                snprintf(uuid, sizeof(uuid), "%s", d->uuid);
                fake_index = d->fake_index;
                /* The node worker, when there is one, is the slot after the GPUs. */
                gpustate_query(uuid, fake_index, supervisor_worker_pid(cx->sup, i),
                               devices_has_node(cx->devices)
                                   ? supervisor_worker_pid(cx->sup, devices_node_slot(cx->devices))
                                   : 0,
                               &st);
                job_dispatch_gpu_observed(cx->jobs, i, &st, at);
        }
}

/* The built-in schedule: one canonical check per due device, submitted to the job subsystem as
 * a client's would be (job_submit, not the API's core_job_submit), or one over every GPU when
 * the GPU pairs are due too (the check then has the node's part). */
static void schedule(struct coexist *cx)
{
        size_t devs[SCHEDULE_DUE_MAX], n;
        bool all;

        core_lock();
        n = job_dispatch_health_due_locked(cx->jobs, devs, ELEMENTSOF(devs), &all);
        core_unlock();
        for (size_t k = 0; k < (all ? 1 : n); k++) {
                struct problem p = {0};
                struct core_submitted sub = {0};
                json_t *body =
                    all ? json_pack("{s:s, s:s, s:{s:s}}", "benchmark", "health", "devices", "all",
                                    "labels", "scheduled", "health_interval")
                        : json_pack("{s:s, s:I, s:{s:s}}", "benchmark", "health", "device",
                                    (json_int_t)devs[k], "labels", "scheduled", "health_interval");

                if (!body || job_submit(cx->jobs, body, NULL, NULL, &sub, &p) < 0) {
                        const char *why = body ? p.detail : "out of memory";
                        if (all)
                                log_warning("the scheduled health check of every GPU and the GPU "
                                            "pairs was not queued: %s",
                                            why);
                        else
                                log_warning("device %zu: scheduled health check not queued: %s",
                                            devs[k], why);
                }
                core_submitted_done(&sub);
                json_decref(body);
        }
}

static void *coexist_main(void *arg)
{
        struct coexist *cx = arg;
        bool *only = cx->only;
        uint64_t full_due = 0; /* when every GPU is looked at again */

        pthread_mutex_lock(&cx->lock);
        while (!cx->stopping) {
                struct timespec ts;
                uint64_t now = now_monotonic_ms();
                bool full = cx->poked_all || now >= full_due;

                /* The periodic look keeps its period under a stream of pokes. */
                if (full)
                        full_due = now + cx->cfg->busy_poll_ms;
                memcpy(only, cx->poked_dev, cx->n_devs * sizeof(*only));
                memset(cx->poked_dev, 0, cx->n_devs * sizeof(*cx->poked_dev));
                cx->poked = cx->poked_all = false;
                pthread_mutex_unlock(&cx->lock);
                look(cx, full ? NULL : only);
                schedule(cx);
                pthread_mutex_lock(&cx->lock);
                now = now_monotonic_ms();
                deadline_after_ms(CLOCK_MONOTONIC, full_due > now ? (unsigned)(full_due - now) : 0,
                                  &ts);
                while (!cx->stopping && !cx->poked &&
                       pthread_cond_timedwait(&cx->cond, &cx->lock, &ts) == 0)
                        ;
        }
        pthread_mutex_unlock(&cx->lock);
        return NULL;
}

/* Without this file's lock: the flags were set under it, and the thread tests them under it
 * before it waits, so a wake-up given after the unlock is not lost. */
static void coexist_wake(void *arg)
{
        struct coexist *cx = arg;

        pthread_cond_signal(&cx->cond);
}

/* Called with core_lock held (dispatch): takes only this file's lock, which the thread never
 * holds while it takes core_lock. The wake-up waits for core_lock's release: the look ends in
 * job_dispatch_gpu_observed, which takes it, and a thread woken under it would wait for it
 * (on a 2-CPU machine it would often preempt the poker first). */
static void coexist_poke(void *arg, ssize_t dev)
{
        struct coexist *cx = arg;

        pthread_mutex_lock(&cx->lock);
        if (dev >= 0 && (size_t)dev < cx->n_devs)
                cx->poked_dev[dev] = true;
        else
                cx->poked_all = true;
        cx->poked = true;
        pthread_mutex_unlock(&cx->lock);
        core_after_unlock_arg(coexist_wake, cx);
}

static void coexist_free(struct coexist *cx)
{
        pthread_cond_destroy(&cx->cond);
        pthread_mutex_destroy(&cx->lock);
        free(cx->poked_dev);
        free(cx->only);
        free(cx);
}

int coexist_start(const struct umd_daemon *d, struct coexist **ret)
{
        struct coexist *cx = calloc(1, sizeof(*cx));
        int r;

        if (!cx)
                return log_error_errno(ENOMEM, "cannot start the GPU watch thread: %m");
        cx->cfg = d->cfg;
        cx->sup = d->sup;
        cx->jobs = d->jobs;
        cx->devices = d->devices;
        pthread_mutex_init(&cx->lock, NULL);
        cond_init_monotonic(&cx->cond);
        cx->n_devs = devices_size(cx->devices);
        cx->poked_dev = calloc(cx->n_devs ?: 1, sizeof(*cx->poked_dev));
        cx->only = calloc(cx->n_devs ?: 1, sizeof(*cx->only));
        if (!cx->poked_dev || !cx->only) {
                coexist_free(cx);
                return log_error_errno(ENOMEM, "cannot start the GPU watch thread: %m");
        }
        /* One look before the first dispatch would be ideal, but READY must not wait on NVML:
         * parts dispatched before it run on a GPU whose state is still "unknown". */
        r = -pthread_create(&cx->thread, NULL, coexist_main, cx);
        if (r < 0) {
                coexist_free(cx);
                return log_error_errno(r, "cannot start the GPU watch thread: %m");
        }
        pthread_setname_np(cx->thread, "umd-look");
        job_dispatch_attach_looks(cx->jobs, coexist_poke, cx);
        *ret = cx;
        return 0;
}

void coexist_stop(struct coexist *cx)
{
        if (!cx)
                return;
        /* No look will come: parts held for one finish now. */
        job_dispatch_attach_looks(cx->jobs, NULL, NULL);
        pthread_mutex_lock(&cx->lock);
        cx->stopping = true;
        pthread_cond_broadcast(&cx->cond);
        pthread_mutex_unlock(&cx->lock);
        pthread_join(cx->thread, NULL);
        coexist_free(cx);
}
