/* Dispatch: which queued part runs next on each GPU and on the node (busy GPUs, pauses, the
 * node worker taking every GPU), handing it to the supervisor, and the supervisor's callbacks
 * (a part done, a worker's state) that move jobs on; what the GPU look (coexist.c) and pauses
 * (devctl.c) change for dispatch. Benchmarks spanning GPUs (catalog multi_gpu) have one part,
 * on the node: the supervisor's slot after the GPUs (index devices_count(), on hosts with two
 * GPUs or more), whose worker opens every GPU. It runs only while no GPU runs a part, and GPUs
 * start none while it runs or waits at the head of its queue (so it is not starved and nothing
 * disturbs its measurement). A part starts only on a look at the GPU taken after it was ready,
 * and finishes only after a look taken once its worker was done (coexist.c looks at once when
 * asked): either, or any periodic look between them, seeing another process marks it
 * contended. Runs under core_lock, like everything in the job files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "devices.h"
#include "gpustate.h"
#include "job_internal.h"
#include "job_persist.h"
#include "job_queue.h"
#include "jobs.h"
#include "jsonraw.h"
#include "jsonutil.h"
#include "log.h"
#include "metrics.h"
#include "store.h"
#include "suites.h"
#include "supervisor.h"
#include "util.h"

/* A PCIe link's label for the fleet's metrics, "gen5x16": two integers and four letters. */
#define LINK_LABEL_MAX 32
/* Why a part waits for the store: a sentence and an errno's name. */
#define STORE_HOLD_WHY_MAX 160
/* Why a part waits or fails at dispatch: a sentence naming a device, a count of other
 * processes or a pause's reason; a longer one is cut. */
#define DISPATCH_WHY_MAX 320

/* A part's waiting or error text made here: a device's pause or fault reason (256 bytes at most,
 * devices.h) inside a sentence of its own. */
#define PART_WHY_MAX 400

static void part_set_waiting(struct jobs *js, struct job *j, size_t i, const char *why)
{
        json_t *p = job_part_doc(j, i);
        const char *old = json_string_value(json_object_get(p, "waiting"));

        if (!j->parts[i].waiting_since_ms)
                j->parts[i].waiting_since_ms = jobs_realtime_ms(js);
        if (streq_ptr(old, why))
                return;
        json_object_set_new(p, "waiting", json_string(why));
        job_persist(js, j);
}

/* No part starts while the store cannot commit (store_commit_error): its start and its end
 * could not be recorded, so after a restart it would run again, and what a client was told of it
 * would be lost. The part says why it waits. True when it must wait. */
static bool store_holds(struct jobs *js, struct job *j, size_t i)
{
        char why[STORE_HOLD_WHY_MAX];
        int r = store_commit_error(js->store);

        if (r == 0)
                return false;
        snprintf(why, sizeof(why), "the job store cannot commit (%s): no part starts until it can",
                 strerror(-r));
        part_set_waiting(js, j, i, why);
        return true;
}

static unsigned job_busy_policy(struct jobs *js, struct job *j)
{
        int r =
            busy_policy_from_string(json_string_value(json_object_get(job_doc(j), "busy_policy")));
        return r >= 0 ? (unsigned)r : js->cfg->busy_policy;
}

static void part_fail_queued(struct jobs *js, struct job *j, size_t i, const char *why)
{
        job_set_part(js, j, i, JOB_FAILED, NULL, why);
        if (job_update_state(js, j))
                job_finished(js, j);
        job_persist(js, j);
}

/* The head of dev's queue, if the GPU is free for it: not paused, and no other process on it
 * unless busy_policy says to run anyway. Returns the entry to run or NULL; *ret_contended is
 * set when it runs beside others. Parts that may never run (busy_policy fail, waited too long)
 * are failed here. */
static const struct queue_entry *dispatchable(struct jobs *js, struct device *d, size_t dev,
                                              int *ret_contended)
{
        const struct queue_entry *e;
        char why[DISPATCH_WHY_MAX];

        *ret_contended = 0;
        while ((e = queue_peek(&js->queues[dev]))) {
                struct job *j = e->job;
                size_t i = e->part;
                int others = d->gpu.other_processes;

                if (j->unchecked) { /* may fail or drop it: the head is looked at again */
                        job_checked(js, j);
                        continue;
                }
                jobs_read_ahead(js, dev);
                unsigned policy = job_busy_policy(js, j);
                uint64_t since = j->parts[i].waiting_since_ms, now = jobs_realtime_ms(js);

                if (d->paused) {
                        snprintf(why, sizeof(why), "device paused%s%s",
                                 d->pause_reason[0] ? ": " : "", d->pause_reason);
                        part_set_waiting(js, j, i, why);
                        return NULL;
                }
                if (store_holds(js, j, i))
                        return NULL;
                if (others <= 0)
                        return e;
                if (policy == BUSY_RUN) {
                        *ret_contended = others;
                        return e;
                }
                if (policy == BUSY_FAIL) {
                        snprintf(why, sizeof(why),
                                 "GPU in use by %d other process%s (busy_policy fail)", others,
                                 others == 1 ? "" : "es");
                        part_fail_queued(js, j, i, why);
                        continue;
                }
                if (since && now > since &&
                    now - since >= (uint64_t)js->cfg->busy_wait_max_s * 1000) {
                        snprintf(why, sizeof(why),
                                 "GPU in use by %d other process%s for longer than "
                                 "busy_wait_max_s (%u s)",
                                 others, others == 1 ? "" : "es", js->cfg->busy_wait_max_s);
                        part_fail_queued(js, j, i, why);
                        continue;
                }
                snprintf(why, sizeof(why), "GPU in use by %d other process%s", others,
                         others == 1 ? "" : "es");
                part_set_waiting(js, j, i, why);
                return NULL;
        }
        return NULL;
}

/* The node's queued head, when it may take the GPUs as soon as their parts end: committed, and
 * no GPU paused or used by another process (either would make it wait, and it must not hold
 * every other GPU meanwhile). */
static const struct queue_entry *node_head(struct jobs *js)
{
        const struct queue_entry *e = have_node() ? queue_peek(&js->queues[node_index()]) : NULL;

        if (!e || !job_persist_committed(e->job))
                return NULL;
        for (size_t i = 0; i < devices_count(); i++) {
                const struct device *d = devices_get(i);
                if (d->paused ||
                    (d->gpu.other_processes > 0 && job_busy_policy(js, e->job) != BUSY_RUN))
                        return NULL;
        }
        return e;
}

/* A look that began at or after `since` (0: none asked for) is a look right before a start. */
static bool looked_since(const struct device *d, uint64_t since)
{
        return since && d->looked_ms >= since;
}

/* Ask for a look at once at GPU dev (-1: every GPU), unless one is asked for already. */
static void want_look(struct jobs *js, uint64_t *wanted, ssize_t dev)
{
        if (*wanted)
                return;
        *wanted = jobs_monotonic_ms(js);
        js->poke(js->poke_arg, dev);
}

/* Starts the node's head once every GPU is free: no part running, its worker idle or cold
 * (a GPU's own worker may stay warm beside the node worker), no other process on it unless
 * the job says to run anyway. A faulted GPU fails the part: it would never run. fresh: every GPU
 * was looked at since the head was ready. */
static void node_try(struct jobs *js, bool fresh)
{
        const struct queue_entry *e;
        char why[PART_WHY_MAX];

        if (!js->sup || js->quiescing || js->node_running ||
            (js->node_wstate != WORKER_IDLE && js->node_wstate != WORKER_COLD))
                return;
        while ((e = queue_peek(&js->queues[node_index()]))) {
                struct job *j = e->job;
                size_t i = e->part;
                bool ok = true;

                if (j->unchecked) {
                        job_checked(js, j);
                        continue;
                }
                if (!job_persist_committed(j) || store_holds(js, j, i))
                        return;
                for (size_t g = 0; ok && g < devices_count(); g++) {
                        struct device *d = devices_get(g);

                        if (d->paused) {
                                snprintf(why, sizeof(why), "device %zu paused%s%s", g,
                                         d->pause_reason[0] ? ": " : "", d->pause_reason);
                                part_set_waiting(js, j, i, why);
                                return;
                        }
                        if (d->wstate == WORKER_FAULTED) {
                                snprintf(why, sizeof(why), "device %zu (%.64s) is faulted: %.255s",
                                         g, d->uuid, d->reason);
                                part_fail_queued(js, j, i, why);
                                ok = false;
                                break;
                        }
                        if (d->running_jobs > 0 ||
                            (d->wstate != WORKER_IDLE && d->wstate != WORKER_COLD))
                                return;
                        if (d->gpu.other_processes > 0 && job_busy_policy(js, j) != BUSY_RUN) {
                                snprintf(why, sizeof(why),
                                         "device %zu in use by %d other process%s", g,
                                         d->gpu.other_processes,
                                         d->gpu.other_processes == 1 ? "" : "es");
                                part_set_waiting(js, j, i, why);
                                return;
                        }
                }
                if (!ok)
                        continue;
                /* Every GPU looked free, but the look may be busy_poll_ms old: start only on a
                 * look of each taken since the node's head was ready. */
                if (js->poke && !fresh) {
                        want_look(js, &js->node_look_wanted_ms, -1);
                        return;
                }
                enum worker_state was = js->node_wstate;
                js->node_running = true;
                js->node_wstate = WORKER_BUSY;
                job_start_part(js, j, i, node_index(), was);
                return;
        }
}

void job_dispatch_try_node(struct jobs *js)
{
        bool fresh = js->node_look_wanted_ms != 0;

        for (size_t g = 0; fresh && g < devices_count(); g++)
                fresh = looked_since(devices_get(g), js->node_look_wanted_ms);
        node_try(js, fresh);
        /* That look has decided (run, or wait); the next decision asks for its own. */
        if (fresh)
                js->node_look_wanted_ms = 0;
}

static void gpu_try(struct jobs *js, struct device *d, size_t dev, bool fresh);

/* The queue's head, if it is ready to start (committed and checked): its id in ret_id ("" when
 * there is none) and its part. What a look taken later may serve as the look before its start
 * for (held_done, devices.h's ready_at_start). */
static void ready_head(struct jobs *js, size_t dev, char ret_id[JOB_ID_MAX], size_t *ret_part)
{
        const struct queue_entry *e = queue_peek(&js->queues[dev]);
        const struct job *next = e ? e->job : NULL;

        ret_id[0] = '\0';
        if (next && job_persist_committed(next) && !next->unchecked) {
                str_copy_cut(ret_id, JOB_ID_MAX, next->id);
                *ret_part = e->part;
        }
}

/* Whether the queue's head is (still) the one ready_head found. */
static bool head_is(struct jobs *js, size_t dev, const char *id, size_t part)
{
        const struct queue_entry *e = queue_peek(&js->queues[dev]);

        return id[0] && e && e->part == part && strcmp(((const struct job *)e->job)->id, id) == 0;
}

/* A device's count of other processes, from a look of umd's or its worker's. */
static void set_other_processes(size_t dev, struct device *d, int others)
{
        if (d->gpu.other_processes != others)
                log_info("device %zu (%s): %d other process(es) on the GPU", dev, d->uuid, others);
        d->gpu.other_processes = others;
}

void job_dispatch_try(struct jobs *js, size_t dev)
{
        struct device *d = devices_get(dev);
        bool fresh;

        if (is_node(dev)) {
                job_dispatch_try_node(js);
                return;
        }
        if (!d)
                return;
        fresh = looked_since(d, d->look_wanted_ms);
        gpu_try(js, d, dev, fresh);
        if (fresh)
                d->look_wanted_ms = 0;
}

static void gpu_try(struct jobs *js, struct device *d, size_t dev, bool fresh)
{
        int contended;

        if (!js->sup || js->quiescing || d->running_jobs > 0 || js->node_running ||
            (d->wstate != WORKER_IDLE && d->wstate != WORKER_COLD))
                return;
        if (node_head(js)) { /* the GPUs go to the node's job first */
                job_dispatch_try_node(js);
                return;
        }
        const struct queue_entry *e = dispatchable(js, d, dev, &contended);
        if (!e)
                return;
        struct job *best = e->job;
        size_t best_part = e->part;

        if (!job_persist_committed(best)) /* dispatched once its submission commits */
                return;
        /* The decision above read the last look, which may be busy_poll_ms old: a part starts
         * only on a look that began after it was ready (coexist.c looks at once when asked). */
        if (js->poke && !fresh) {
                want_look(js, &d->look_wanted_ms, (ssize_t)dev);
                return;
        }

        enum worker_state was = d->wstate;
        d->running_jobs = 1;
        d->contended_by = contended;
        d->wstate = WORKER_BUSY;
        job_start_part(js, best, best_part, dev, was);
        ready_head(js, dev, d->ready_at_start, &d->ready_at_start_part);
}

static void dispatch_all(struct jobs *js)
{
        for (size_t i = 0; i < devices_count(); i++)
                job_dispatch_try(js, i);
        if (have_node())
                job_dispatch_try_node(js);
}

/* ---- supervisor callbacks (supervisor thread) ---- */

static bool job_canonical(struct job *j)
{
        return json_is_true(json_object_get(job_doc(j), "canonical"));
}

/* The canonical check's figures for the fleet's comparison of peers (metrics.c): a GPU's part
 * with the capability of its slot, or the node's pairs. */
static void part_fleet_figures(struct jobs *js, const struct device *d, size_t dev,
                               const json_t *result, bool contended)
{
        if (d) {
                const json_t *pcie = json_object_get(d->info, "pcie");
                json_t *gen = json_object_get(pcie, "max_gen");
                json_t *width = json_object_get(pcie, "max_width");
                char link[LINK_LABEL_MAX] = "unknown";

                if (json_is_integer(gen) && json_is_integer(width))
                        snprintf(link, sizeof(link), "gen%lldx%lld",
                                 (long long)json_integer_value(gen),
                                 (long long)json_integer_value(width));
                metrics_health_result(js->metrics, d->uuid, link, result, contended);
        } else if (is_node(dev)) {
                metrics_health_node_result(js->metrics, result);
        }
}

/* What the part records of how it ran: a cold start, and other processes beside it. */
static void part_note_conditions(struct job *j, size_t i, const struct device *d,
                                 double cold_start_ms)
{
        json_t *p = job_part_doc(j, i);

        json_object_set_new(p, "cold_start",
                            json_pack("{s:b, s:o}", "cold", cold_start_ms >= 0, "ms",
                                      cold_start_ms >= 0 ? json_real(cold_start_ms) : json_null()));
        if (d->contended_by > 0)
                json_object_set_new(p, "contended",
                                    json_pack("{s:i, s:s}", "other_processes", d->contended_by,
                                              "note",
                                              "measured while other processes used the GPU: "
                                              "never judged, never part of a baseline"));
}

/* Why a part that no client cancelled was cancelled: its GPU's pause, or, for the node's part
 * (it holds every GPU, and its own slot is never paused), the pause of the first paused GPU,
 * named. Fills buf and returns true, or returns false when no pause explains it. */
static bool pause_explains_cancel(size_t dev, char *buf, size_t len)
{
        const struct device *d = devices_get(dev);

        if (d) {
                if (!d->paused)
                        return false;
                snprintf(buf, len, "cancelled: device paused%s%s", d->pause_reason[0] ? ": " : "",
                         d->pause_reason);
                return true;
        }
        for (size_t i = 0; is_node(dev) && i < devices_count(); i++) {
                d = devices_get(i);
                if (!d->paused)
                        continue;
                snprintf(buf, len, "cancelled: device paused: GPU %zu (%s)%s%s", d->index, d->uuid,
                         d->pause_reason[0] ? ": " : "", d->pause_reason);
                return true;
        }
        return false;
}

/* A finished part waiting for the look after it (job_dispatch_gpu_observed). */
struct held_done {
        char job_id[JOB_ID_MAX];
        enum part_outcome outcome;
        json_t *result;
        char *error;
        double cold_start_ms;
        json_t *seen;     /* what metrics read of the result (on_part_done), or NULL */
        uint64_t done_ms; /* monotonic: a look that began at or after this is "after" */
        /* The queue's head when the worker was done, if it was ready to start then (committed
         * and checked): the GPU became free for it at done_ms, so the look after the part is
         * also a look taken since that head was ready. "" when there was none. */
        char next_id[JOB_ID_MAX];
        size_t next_part;
};

static void part_done_locked(struct jobs *js, size_t dev, const char *job_id,
                             enum part_outcome outcome, json_t *result, const char *error,
                             double cold_start_ms, json_t *seen);

/* Finish the part held on d, with what the looks since have added to d->contended_by. */
static void release_held(struct jobs *js, size_t dev, struct device *d)
{
        struct held_done *h = d->held;

        d->held = NULL;
        /* The look that releases the part began after its worker was done: for the head that
         * was ready then, it is the look before its start as well, so the next part starts
         * on it instead of asking for another (one look a part, not two). */
        if (!d->look_wanted_ms && d->looked_ms >= h->done_ms &&
            head_is(js, dev, h->next_id, h->next_part))
                d->look_wanted_ms = h->done_ms;
        part_done_locked(js, dev, h->job_id, h->outcome, h->result, h->error, h->cold_start_ms,
                         h->seen);
        json_decref(h->result);
        json_decref(h->seen);
        free(h->error);
        free(h);
}

/* The other processes a GPU's worker saw on it right after its part (its look, supervisor.h),
 * umd's own workers left out; -1 when it sent none that counts. */
static int others_after(struct jobs *js, size_t dev, const json_t *look)
{
        if (!look || !js->sup || is_node(dev))
                return -1;
        return gpustate_others_in_look(look, supervisor_worker_pid(js->sup, dev),
                                       have_node() ? supervisor_worker_pid(js->sup, node_index())
                                                   : 0);
}

/* The worker's look after its part, taken as a look of umd's own that began now. It began a
 * little earlier (once the part was done, before its result left), but no start can rest on
 * that difference: no look is asked for at a GPU while its part runs (gpu_try and node_try wait
 * for the part first). Only its count of other processes: the rest of d->gpu is the look
 * thread's. */
static void worker_looked(const struct jobs *js, size_t dev, struct device *d, int others)
{
        set_other_processes(dev, d, others);
        d->looked_ms = jobs_monotonic_ms(js);
        if (d->running_jobs > 0 && others > d->contended_by)
                d->contended_by = others;
}

/* Once the part has ended on the worker's look: the head that was ready when that part
 * started was ready before the look, so the look serves as the one before the head's start
 * too (one look a part). Asked after part_done_locked, whose dispatch finds the worker still
 * busy and would take the look as spent; the worker's idle state, which follows, starts it. */
static void worker_look_serves_head(struct jobs *js, size_t dev, struct device *d)
{
        if (!d->look_wanted_ms && head_is(js, dev, d->ready_at_start, d->ready_at_start_part))
                d->look_wanted_ms = d->looked_ms;
}

/* A GPU's part is finished only after a look that began once its worker was done: another
 * process that came during the part and is still there marks it contended, even when no
 * periodic look fell inside the part. The worker's own look after the part is that look where
 * it sent one and umd can look at the GPU too; else the result waits here (milliseconds:
 * coexist.c looks at once). Where it cannot be held, it is finished now, as before. */
static void on_part_done(void *userdata, size_t dev, const char *job_id, enum part_outcome outcome,
                         json_t *result, const json_t *picked, const json_t *look,
                         const char *error, double cold_start_ms)
{
        struct jobs *js = userdata;
        struct held_done *h = NULL;
        struct device *d;
        /* What metrics read of a result kept as bytes: picked by the supervisor as the worker's
         * frame was checked (result_paths), else found here, before core_lock is taken (the
         * walk through the bytes was a tenth of what a part's end held the lock for). */
        bool raw = outcome == PART_SUCCEEDED && json_raw_get(result, NULL, NULL);
        _cleanup_json_ json_t *seen = !raw     ? NULL
                                      : picked ? json_incref((json_t *)picked)
                                               : json_raw_pick(result, metrics_result_paths);
        int others = others_after(js, dev, look);

        core_lock();
        d = devices_get(dev);
        /* Where umd cannot look at the GPU (d->gpu.known false: no NVML), the worker's look does
         * not stand in for its own: one source of truth for a device. */
        bool by_worker = d && js->poke && !d->held && others >= 0 && d->gpu.known;
        if (by_worker)
                worker_looked(js, dev, d, others);
        else if (d && js->poke && !d->held && (h = calloc(1, sizeof(*h)))) {
                str_copy_cut(h->job_id, sizeof(h->job_id), job_id);
                h->outcome = outcome;
                h->result = json_incref(result);
                h->error = error ? strdup(error) : NULL;
                h->cold_start_ms = cold_start_ms;
                h->seen = json_incref(seen);
                h->done_ms = jobs_monotonic_ms(js);
                ready_head(js, dev, h->next_id, &h->next_part);
                if (error && !h->error) {
                        json_decref(h->result);
                        json_decref(h->seen);
                        free(h);
                        h = NULL;
                }
        }
        if (h) {
                d->held = h;
                js->poke(js->poke_arg, (ssize_t)dev);
        } else {
                part_done_locked(js, dev, job_id, outcome, result, error, cold_start_ms, seen);
                if (by_worker)
                        worker_look_serves_head(js, dev, d);
        }
        jobs_unlock(js);
}

/* Whether a successful part's result (kept as the worker's bytes when raw, raw_len long) is
 * over max_result_bytes. Kept as bytes, its size is their length (they are its compact dump);
 * else the dump only when the bound cannot tell: a result a thousandth of the limit was dumped
 * once more here only to be measured. */
static bool result_too_big(struct jobs *js, const json_t *result, bool raw, size_t raw_len)
{
        if (raw)
                return raw_len > js->cfg->max_result_bytes;
        if (!result || json_dump_compact_fits(result, js->cfg->max_result_bytes))
                return false;
        _cleanup_free_ char *dump = json_dump_compact(result, NULL);
        return !dump || strlen(dump) > js->cfg->max_result_bytes;
}

/* What a part that succeeded (and runs no more) tells: its metrics, read from read (what
 * metrics read of it), on a GPU no other process shared, and the fleet's figures of a
 * canonical check. */
static void part_figures(struct jobs *js, struct job *j, struct device *d, size_t dev, json_t *read,
                         json_t *result, bool contended)
{
        bool canonical = job_canonical(j);

        if (d && !contended) {
                _cleanup_json_ json_t *r = json_incref(read);
                if (r)
                        metrics_part_result(js->metrics, d->uuid, r, canonical);
                else
                        log_error("job %s on device %zu: out of memory reading its "
                                  "result for metrics",
                                  j->id, dev);
        }
        if (canonical)
                part_fleet_figures(js, d, dev, result, contended);
}

/* seen: what metrics read of a result kept as bytes, picked by on_part_done (NULL: none, or no
 * memory for it). */
static void part_done_locked(struct jobs *js, size_t dev, const char *job_id,
                             enum part_outcome outcome, json_t *result, const char *error,
                             double cold_start_ms, json_t *seen)
{
        assert_locked();
        static const enum job_state map[] = {
            [PART_SUCCEEDED] = JOB_SUCCEEDED,
            [PART_FAILED] = JOB_FAILED,
            [PART_TIMED_OUT] = JOB_TIMED_OUT,
            [PART_CANCELLED] = JOB_CANCELLED,
        };
        char why[PART_WHY_MAX];

        struct device *d = devices_get(dev);
        struct job *j = job_find(js, job_id);
        if (!j) {
                log_warning("device %zu: result for unknown job %s dropped", dev, job_id);
                goto out;
        }
        for (size_t i = 0; i < j->n_parts; i++) {
                if (j->parts[i].device != (ssize_t)dev || j->parts[i].st != JOB_RUNNING)
                        continue;
                enum job_state st = map[outcome];
                if (d)
                        part_note_conditions(j, i, d, cold_start_ms);
                if (st == JOB_CANCELLED && !j->cancel_requested &&
                    pause_explains_cancel(dev, why, sizeof(why)))
                        error = why;
                bool canonical = job_canonical(j);
                size_t raw_len = 0;
                bool raw = st == JOB_SUCCEEDED && json_raw_get(result, NULL, &raw_len);
                _cleanup_json_ json_t *tree = NULL;
                if (st == JOB_SUCCEEDED && result_too_big(js, result, raw, raw_len)) {
                        snprintf(why, sizeof(why),
                                 "result larger than max_result_bytes (%llu bytes)",
                                 (unsigned long long)js->cfg->max_result_bytes);
                        st = JOB_FAILED;
                        result = NULL;
                        error = why;
                        raw = false;
                }
                /* The worker's bytes go to the store as they came (store_write.c splices them
                 * in), parsed only for what reads more than metrics do: a suite's summary, and
                 * the canonical check's verdict and fleet figures. */
                if (raw && (canonical || suite_summarises(job_benchmark(j)))) {
                        result = tree = json_raw_tree(result);
                        raw = false;
                        if (!tree) {
                                st = JOB_FAILED;
                                error = "out of memory reading the worker's result";
                        }
                }
                if (st == JOB_TIMED_OUT && !error)
                        error = "deadline passed (timeout_s); the worker was killed";
                json_t *summary =
                    st == JOB_SUCCEEDED && !raw ? suite_summary(job_benchmark(j), result) : NULL;
                /* The worker's object is borrowed: summarise a copy (a tree of its bytes is
                 * ours already). */
                if (summary && !tree)
                        result = tree = json_deep_copy(result);
                if (summary && result)
                        json_object_set_new(result, "summary", summary);
                else
                        json_decref(summary);
                bool contended = d && d->contended_by > 0, again = false;
                if (st == JOB_SUCCEEDED && d && !contended && canonical)
                        again = job_verdict_judge(js, j, i, d, result);
                else if (st == JOB_SUCCEEDED && is_node(dev) && canonical)
                        again = job_verdict_judge_node(js, j, i, result);
                if (!again)
                        job_set_part(js, j, i, st, result, error);
                if (st == JOB_SUCCEEDED && !again)
                        part_figures(js, j, d, dev, raw ? seen : result, result, contended);
                if (st != JOB_SUCCEEDED)
                        log_info("job %s on device %zu: %s%s%s", j->id, dev, job_state_names[st],
                                 error ? ": " : "", error ? error : "");
                break;
        }
        if (job_update_state(js, j)) {
                job_finished(js, j);
                log_info("job %s (%s) %s", j->id, job_benchmark(j), job_state_names[j->st]);
        }
        job_persist_part_ended(js, j);
out:
        if (d) {
                d->running_jobs = 0;
                d->contended_by = 0;
        }
        if (is_node(dev)) {
                js->node_running = false;
                dispatch_all(js); /* the GPUs it held are free */
        } else {
                job_dispatch_try(js, dev);
        }
}

static void fail_queued_on(struct jobs *js, size_t dev, const char *why)
{
        const struct queue_entry *e;

        while ((e = queue_peek(&js->queues[dev]))) {
                struct job *j = e->job;
                job_set_part(js, j, e->part, JOB_FAILED, NULL, why); /* removes e */
                if (job_update_state(js, j))
                        job_finished(js, j);
                job_persist(js, j);
        }
}

static void on_worker_state(void *userdata, size_t dev, enum worker_state st, const char *reason)
{
        struct jobs *js = userdata;
        char why[PART_WHY_MAX];

        core_lock();
        struct device *d = devices_get(dev);
        if (is_node(dev)) {
                if (st != js->node_wstate)
                        log_info("node worker %s%s%s", worker_state_to_string(st),
                                 reason ? ": " : "", reason ? reason : "");
                js->node_wstate = st;
                if (st == WORKER_FAULTED) {
                        snprintf(why, sizeof(why), "the node worker is faulted: %s",
                                 reason ? reason : "it keeps crashing");
                        fail_queued_on(js, dev, why);
                }
                job_dispatch_try_node(js);
                goto out;
        }
        if (!d)
                goto out;
        enum worker_state old = d->wstate;
        d->wstate = st;
        str_copy_cut(d->reason, sizeof(d->reason), reason);
        if (st != old)
                log_info("device %zu (%s): worker %s%s%s", dev, d->uuid, worker_state_to_string(st),
                         reason ? ": " : "", reason ? reason : "");
        if (st == WORKER_FAULTED) {
                snprintf(why, sizeof(why), "device %zu (%s) is faulted: %s", dev, d->uuid,
                         reason ? reason : "its worker keeps crashing");
                fail_queued_on(js, dev, why);
        }
        if (st == WORKER_IDLE || st == WORKER_COLD)
                d->reason[0] = 0;
        job_dispatch_try(js, dev);
out:
        jobs_unlock(js);
}

/* ---- sharing the GPU (coexist.c looks, devctl.c pauses) ---- */

void job_dispatch_attach_looks(struct jobs *js, void (*poke)(void *arg, ssize_t dev), void *arg)
{
        core_lock();
        js->poke = poke;
        js->poke_arg = arg;
        js->node_look_wanted_ms = 0;
        for (size_t i = 0; i < devices_count(); i++) {
                struct device *d = devices_get(i);

                d->look_wanted_ms = 0;
                if (!poke && d->held)
                        release_held(js, i, d); /* no look will come: the last one stands */
        }
        if (poke)
                dispatch_all(js);
        jobs_unlock(js);
}

void job_dispatch_gpu_observed(struct jobs *js, size_t dev, const struct gpu_state *st,
                               uint64_t looked_ms)
{
        core_lock();
        struct device *d = devices_get(dev);
        if (!d)
                goto out;
        /* A look that began before the last one taken (a worker's look after its part, taken
         * while this one asked NVML) says nothing newer of other processes. */
        int others = looked_ms >= d->looked_ms ? st->other_processes : d->gpu.other_processes;
        set_other_processes(dev, d, others);
        d->gpu = *st;
        d->gpu.other_processes = others;
        if (looked_ms > d->looked_ms)
                d->looked_ms = looked_ms;
        /* A look during the part, or the one right after it (the part is still running_jobs
         * while held), marks it. */
        if (d->running_jobs > 0 && st->other_processes > d->contended_by)
                d->contended_by = st->other_processes;
        if (d->held && looked_ms >= d->held->done_ms)
                release_held(js, dev, d);
        /* On an EXCLUSIVE_PROCESS GPU a context umd keeps would make its owners' programs fail. */
        if (js->sup)
                supervisor_exit_after_each_part(js->sup, dev,
                                                strcmp(st->compute_mode, "exclusive_process") == 0);
        job_dispatch_try(js, dev);
out:
        jobs_unlock(js);
}

void job_dispatch_locked(struct jobs *js, size_t dev)
{
        assert_locked();
        job_dispatch_try(js, dev);
        jobs_publish_locked(js);
}

void job_dispatch_store_watch(struct jobs *js)
{
        if (store_commit_error(js->store) != 0) {
                js->store_was_failing = true;
                return;
        }
        if (!js->store_was_failing)
                return;
        js->store_was_failing = false;
        core_lock();
        for (size_t dev = 0; dev < devices_count(); dev++)
                job_dispatch_try(js, dev);
        if (have_node())
                job_dispatch_try_node(js);
        jobs_publish_locked(js);
        jobs_unlock(js);
}

void job_dispatch_device_paused_locked(struct jobs *js, size_t dev)
{
        assert_locked();
        for (size_t k = 0; k < js->n_jobs; k++) {
                struct job *j = js->jobs[k];

                for (size_t i = 0; i < j->n_parts; i++)
                        if ((j->parts[i].device == (ssize_t)dev ||
                             (have_node() && j->parts[i].device == (ssize_t)node_index())) &&
                            j->parts[i].st == JOB_RUNNING && js->sup)
                                supervisor_cancel(js->sup, (size_t)j->parts[i].device, j->id);
        }
        if (js->sup)
                supervisor_retire(js->sup, dev);
        job_dispatch_try(js, dev); /* marks the queued head as waiting */
        jobs_publish_locked(js);
}

/* A GPU the schedule may check now: idle and nobody else's. */
static bool schedule_free(struct jobs *js, size_t i)
{
        struct device *d = devices_get(i);

        return !d->paused && d->gpu.other_processes <= 0 && d->running_jobs == 0 &&
               queue_len(&js->queues[i]) == 0 &&
               (d->wstate == WORKER_IDLE || d->wstate == WORKER_COLD);
}

size_t job_dispatch_health_due_locked(struct jobs *js, size_t *ret_devs, size_t max, bool *ret_all)
{
        assert_locked();
        uint64_t now = jobs_realtime_ms(js), every = (uint64_t)js->cfg->health_interval_s * 1000;
        size_t n = 0;
        bool all = have_node() && devices_count() <= max;

        *ret_all = false;
        if (every == 0 || !js->sup || js->quiescing || js->node_running)
                return 0;
        /* The pairs need every GPU at once: when they are due and every GPU is free, one job
         * checks every GPU and the pairs, and every clock restarts. Until then each GPU is
         * checked alone when due, and the pairs wait for a moment when all are free. */
        if (js->node_last_check_ms == 0)
                js->node_last_check_ms = now;
        all = all && now - js->node_last_check_ms >= every &&
              queue_len(&js->queues[node_index()]) == 0 &&
              (js->node_wstate == WORKER_IDLE || js->node_wstate == WORKER_COLD);
        for (size_t i = 0; all && i < devices_count(); i++)
                all = schedule_free(js, i);
        if (all) {
                js->node_last_check_ms = now;
                for (size_t i = 0; i < devices_count(); i++) {
                        devices_get(i)->last_check_ms = now;
                        ret_devs[n++] = i;
                }
                *ret_all = true;
                return n;
        }
        for (size_t i = 0; i < devices_count() && n < max; i++) {
                struct device *d = devices_get(i);

                if (d->last_check_ms == 0)
                        d->last_check_ms = now; /* the first check comes one interval in */
                if (!schedule_free(js, i) || now - d->last_check_ms < every)
                        continue;
                d->last_check_ms = now;
                ret_devs[n++] = i;
        }
        return n;
}

void job_dispatch_callbacks(struct jobs *js, struct supervisor_callbacks *ret)
{
        *ret = (struct supervisor_callbacks){
            .part_done = on_part_done,
            .worker_state = on_worker_state,
            .userdata = js,
            .result_paths = metrics_result_paths,
        };
}

void job_dispatch_attach_supervisor(struct jobs *js, struct supervisor *s)
{
        core_lock();
        js->sup = s;
        dispatch_all(js);
        jobs_unlock(js);
}
