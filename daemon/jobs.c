/* Jobs: the in-memory index of the jobs scheduling needs (queued and running ones, and finished
 * ones until their final write is committed; sorted by id, which is submission order), per-device
 * queues (priority, then FIFO), state transitions and their persistence, cancellation, recovery
 * at start, retention and health baselines. Submissions are validated by spec.c. The document
 * each job is stored as is the truth; struct job caches what the queue needs. History (finished
 * jobs) lives only in the store and is read from it. Every change happens under core_lock and is
 * queued to the store's writer before the lock is released (so writes keep their order); a
 * client's submit or cancel is answered only after its commit, waited for without the lock.
 *
 * Benchmarks spanning GPUs (catalog multi_gpu) have one part, on the node: the supervisor's slot
 * after the GPUs (index devices_count(), on hosts with two GPUs or more), whose worker opens
 * every GPU. It runs only while no GPU runs a part, and GPUs start none while it runs or waits
 * at the head of its queue (so it is not starved and nothing disturbs its measurement). */
#include "jobs.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "catalog.h"
#include "config.h"
#include "core.h"
#include "devices.h"
#include "health.h"
#include "jsonutil.h"
#include "log.h"
#include "metrics.h"
#include "queue.h"
#include "spec.h"
#include "store.h"
#include "suites.h"
#include "supervisor.h"
#include "topology.h"
#include "util.h"
#include "uuid.h"

enum pstate { P_QUEUED, P_RUNNING, P_SUCCEEDED, P_FAILED, P_CANCELLED, P_TIMED_OUT, P_INTERRUPTED };
static const char *const pstate_names[] = {"queued",    "running",   "succeeded",  "failed",
                                           "cancelled", "timed_out", "interrupted"};

struct part {
        ssize_t device; /* -1: device gone */
        enum pstate st;
        uint64_t waiting_since_ms; /* first refused for a busy GPU, 0 when not waiting */
        unsigned attempts;         /* runs started (a failing canonical check runs twice) */
};

struct job {
        char id[UUID_STRING_MAX];
        json_t *doc;
        enum pstate st;
        int prio;
        size_t n_parts;
        struct part *parts;
        bool cancel_requested;
        uint64_t finished_ms;
        bool committed;                    /* its submission is durable: it may run */
        struct store_ticket *final_ticket; /* its final write; pruned from memory once done */
        bool final_unsaved;                /* that write failed: written again at the next tick */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const struct umd_config *cfg;
static struct store *store;
static struct supervisor *sup;
static bool quiescing;
static struct job **jobs; /* ascending id */
static size_t n_jobs, cap_jobs;
static struct queue *queues; /* one per device, then the node's */
static enum worker_state node_wstate = WORKER_COLD;
static bool node_running;         /* a part runs on the node worker: every GPU is taken */
static json_t *node_last_verdict; /* the canonical check's last verdict on the GPU pairs */

static bool have_node(void)
{
        return devices_count() >= 2;
}

/* The node's index among parts, queues and supervisor slots. */
static size_t node_index(void)
{
        return devices_count();
}

static bool is_node(size_t dev)
{
        return have_node() && dev == node_index();
}

static size_t queued_total(void);
static bool pstate_final(enum pstate s);
static int pstate_from_string(const char *s);

/* Waiters (GET ?wait=) learn of changes through this: the generation moves first, then the
 * listener is told, both under the lock (so a reader that saw the old generation is woken). */
static _Atomic uint64_t generation = 1;
static core_job_listener listener;
static void *listener_data;

static void job_changed(const struct job *j)
{
        atomic_fetch_add(&generation, 1);
        if (listener)
                listener(j->id, listener_data);
}

uint64_t core_jobs_generation(void)
{
        return atomic_load(&generation);
}

void core_set_job_listener(core_job_listener fn, void *userdata)
{
        core_lock();
        listener = fn;
        listener_data = userdata;
        core_unlock();
}

bool core_job_state_final(const char *state)
{
        int s = state ? pstate_from_string(state) : -1;
        return s >= 0 && pstate_final((enum pstate)s);
}

void core_lock(void)
{
        pthread_mutex_lock(&lock);
}

void core_unlock(void)
{
        pthread_mutex_unlock(&lock);
}

static bool pstate_final(enum pstate s)
{
        return s >= P_SUCCEEDED;
}

static int pstate_from_string(const char *s)
{
        for (size_t i = 0; s && i < ELEMENTSOF(pstate_names); i++)
                if (strcmp(s, pstate_names[i]) == 0)
                        return (int)i;
        return -1;
}

static void job_free(struct job *j)
{
        if (!j)
                return;
        if (j->final_ticket)
                (void)store_wait(j->final_ticket);
        json_decref(j->doc);
        free(j->parts);
        free(j);
}

static json_t *now_json(void)
{
        char buf[40];
        return json_string(format_rfc3339_ms(now_realtime_ms(), buf, sizeof(buf)));
}

static json_t *part_doc(struct job *j, size_t i)
{
        return json_array_get(json_object_get(j->doc, "parts"), i);
}

static const char *job_benchmark(const struct job *j)
{
        return json_string_value(json_object_get(j->doc, "benchmark"));
}

/* The job's state follows from its parts'. */
static enum pstate job_derive_state(const struct job *j)
{
        bool any_open = false, any_started = false;
        unsigned count[ELEMENTSOF(pstate_names)] = {0};

        for (size_t i = 0; i < j->n_parts; i++) {
                count[j->parts[i].st]++;
                if (!pstate_final(j->parts[i].st))
                        any_open = true;
                if (j->parts[i].st != P_QUEUED)
                        any_started = true;
        }
        if (any_open)
                return any_started ? P_RUNNING : P_QUEUED;
        if (j->cancel_requested && count[P_CANCELLED])
                return P_CANCELLED;
        if (count[P_SUCCEEDED] == j->n_parts)
                return P_SUCCEEDED;
        if (count[P_TIMED_OUT])
                return P_TIMED_OUT;
        if (count[P_FAILED])
                return P_FAILED;
        if (count[P_INTERRUPTED])
                return P_INTERRUPTED;
        return P_CANCELLED;
}

static void job_set_part(struct job *j, size_t i, enum pstate st, json_t *result, const char *error)
{
        json_t *p = part_doc(j, i);
        enum pstate old = j->parts[i].st;

        if (old == P_QUEUED && st != P_QUEUED && j->parts[i].device >= 0)
                queue_remove(&queues[j->parts[i].device], j, i);
        j->parts[i].st = st;
        json_object_set_new(p, "state", json_string(pstate_names[st]));
        if (st == P_RUNNING)
                json_object_set_new(p, "started", now_json());
        if (pstate_final(st)) {
                json_object_set_new(p, "finished", now_json());
                if (result)
                        json_object_set(p, "result", result);
                json_object_set_new(p, "error", error ? json_string(error) : json_null());
        }
}

/* Recompute the job's state and times after its parts changed; true when it just finished. */
static bool job_update_state(struct job *j)
{
        enum pstate old = j->st, st = job_derive_state(j);

        if (st == old)
                return false;
        j->st = st;
        job_changed(j);
        json_object_set_new(j->doc, "state", json_string(pstate_names[st]));
        if (st == P_RUNNING && json_is_null(json_object_get(j->doc, "started")))
                json_object_set_new(j->doc, "started", now_json());
        if (!pstate_final(st))
                return false;
        j->finished_ms = now_realtime_ms();
        json_object_set_new(j->doc, "finished", now_json());
        json_object_set_new(j->doc, "finished_ms", json_integer((json_int_t)j->finished_ms));
        return true;
}

static void job_finished(struct job *j)
{
        uint64_t start = (uint64_t)json_integer_value(json_object_get(j->doc, "created_ms"));
        double dur = j->finished_ms > start ? (double)(j->finished_ms - start) / 1000.0 : 0;
        metrics_job_finished(job_benchmark(j), pstate_names[j->st], dur);
}

/* Queue the job's current document for the writer. A finished job keeps a ticket, so that it
 * leaves memory (prune_finished) only once the store has it; other changes are fire and forget
 * (the writer logs a failure). */
static int job_persist(struct job *j)
{
        if (pstate_final(j->st) && !j->final_ticket)
                return store_put(store, j->doc, &j->final_ticket);
        return store_put(store, j->doc, NULL);
}

static ssize_t job_index(const char *id)
{
        size_t lo = 0, hi = n_jobs;
        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                int c = strcasecmp(jobs[mid]->id, id);
                if (c == 0)
                        return (ssize_t)mid;
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return -1;
}

static struct job *job_find(const char *id)
{
        ssize_t i = job_index(id);
        return i < 0 ? NULL : jobs[i];
}

static int jobs_append(struct job *j)
{
        if (n_jobs == cap_jobs) {
                size_t nc = cap_jobs ? cap_jobs * 2 : 256;
                struct job **n = realloc(jobs, nc * sizeof(*n));
                if (!n)
                        return -ENOMEM;
                jobs = n;
                cap_jobs = nc;
        }
        /* ids are time-ordered, so this is almost always the end. */
        size_t at = n_jobs;
        while (at > 0 && strcasecmp(jobs[at - 1]->id, j->id) > 0)
                at--;
        memmove(&jobs[at + 1], &jobs[at], (n_jobs - at) * sizeof(*jobs));
        jobs[at] = j;
        n_jobs++;
        return 0;
}

static void jobs_remove_at(size_t i)
{
        job_free(jobs[i]);
        memmove(&jobs[i], &jobs[i + 1], (n_jobs - i - 1) * sizeof(*jobs));
        n_jobs--;
}

/* ---- dispatch ---- */

static int enqueue(struct job *j, size_t i)
{
        struct queue_entry e = {.prio = j->prio, .id = j->id, .job = j, .part = i};
        return queue_push(&queues[j->parts[i].device], &e);
}

/* Says in the part why it is not running yet; persisted only when the reason changes. */
static void part_set_waiting(struct job *j, size_t i, const char *why)
{
        json_t *p = part_doc(j, i);
        const char *old = json_string_value(json_object_get(p, "waiting"));

        if (!j->parts[i].waiting_since_ms)
                j->parts[i].waiting_since_ms = now_realtime_ms();
        if (streq_ptr(old, why))
                return;
        json_object_set_new(p, "waiting", json_string(why));
        job_persist(j);
}

static unsigned job_busy_policy(const struct job *j)
{
        int r = busy_policy_from_string(json_string_value(json_object_get(j->doc, "busy_policy")));
        return r >= 0 ? (unsigned)r : cfg->busy_policy;
}

static void part_fail_queued(struct job *j, size_t i, const char *why)
{
        job_set_part(j, i, P_FAILED, NULL, why);
        if (job_update_state(j))
                job_finished(j);
        job_persist(j);
}

/* The head of dev's queue, if the GPU is free for it: not paused, and no other process on it
 * unless busy_policy says to run anyway. Returns the entry to run or NULL; *ret_contended is
 * set when it runs beside others. Parts that may never run (busy_policy fail, waited too long)
 * are failed here. */
static const struct queue_entry *dispatchable(struct device *d, size_t dev, int *ret_contended)
{
        const struct queue_entry *e;
        char why[320];

        *ret_contended = 0;
        while ((e = queue_peek(&queues[dev]))) {
                struct job *j = e->job;
                size_t i = e->part;
                int others = d->gpu.other_processes;
                unsigned policy = job_busy_policy(j);
                uint64_t since = j->parts[i].waiting_since_ms, now = now_realtime_ms();

                if (d->paused) {
                        snprintf(why, sizeof(why), "device paused%s%s",
                                 d->pause_reason[0] ? ": " : "", d->pause_reason);
                        part_set_waiting(j, i, why);
                        return NULL;
                }
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
                        part_fail_queued(j, i, why);
                        continue;
                }
                if (since && now > since && now - since >= (uint64_t)cfg->busy_wait_max_s * 1000) {
                        snprintf(why, sizeof(why),
                                 "GPU in use by %d other process%s for longer than "
                                 "busy_wait_max_s (%u s)",
                                 others, others == 1 ? "" : "es", cfg->busy_wait_max_s);
                        part_fail_queued(j, i, why);
                        continue;
                }
                snprintf(why, sizeof(why), "GPU in use by %d other process%s", others,
                         others == 1 ? "" : "es");
                part_set_waiting(j, i, why);
                return NULL;
        }
        return NULL;
}

/* The node's queued head, when it may take the GPUs as soon as their parts end: committed, and
 * no GPU paused or used by another process (either would make it wait, and it must not hold
 * every other GPU meanwhile). */
static const struct queue_entry *node_head(void)
{
        const struct queue_entry *e = have_node() ? queue_peek(&queues[node_index()]) : NULL;

        if (!e || !((const struct job *)e->job)->committed)
                return NULL;
        for (size_t i = 0; i < devices_count(); i++) {
                const struct device *d = devices_get(i);
                if (d->paused ||
                    (d->gpu.other_processes > 0 && job_busy_policy(e->job) != BUSY_RUN))
                        return NULL;
        }
        return e;
}

/* Starts the node's head once every GPU is free: no part running, its worker idle or cold
 * (a GPU's own worker may stay warm beside the node worker), no other process on it unless
 * the job says to run anyway. A faulted GPU fails the part: it would never run. */
static void try_dispatch_node(void)
{
        const struct queue_entry *e;
        char why[400];

        if (!sup || quiescing || node_running ||
            (node_wstate != WORKER_IDLE && node_wstate != WORKER_COLD))
                return;
        while ((e = queue_peek(&queues[node_index()]))) {
                struct job *j = e->job;
                size_t i = e->part;
                bool ok = true;

                if (!j->committed)
                        return;
                for (size_t g = 0; ok && g < devices_count(); g++) {
                        struct device *d = devices_get(g);

                        if (d->paused) {
                                snprintf(why, sizeof(why), "device %zu paused%s%s", g,
                                         d->pause_reason[0] ? ": " : "", d->pause_reason);
                                part_set_waiting(j, i, why);
                                return;
                        }
                        if (d->wstate == WORKER_FAULTED) {
                                snprintf(why, sizeof(why), "device %zu (%.64s) is faulted: %.255s",
                                         g, d->uuid, d->reason);
                                part_fail_queued(j, i, why);
                                ok = false;
                                break;
                        }
                        if (d->running_jobs > 0 ||
                            (d->wstate != WORKER_IDLE && d->wstate != WORKER_COLD))
                                return;
                        if (d->gpu.other_processes > 0 && job_busy_policy(j) != BUSY_RUN) {
                                snprintf(why, sizeof(why),
                                         "device %zu in use by %d other process%s", g,
                                         d->gpu.other_processes,
                                         d->gpu.other_processes == 1 ? "" : "es");
                                part_set_waiting(j, i, why);
                                return;
                        }
                }
                if (!ok)
                        continue;
                json_int_t timeout_s = json_integer_value(json_object_get(j->doc, "timeout_s"));
                int r = supervisor_dispatch(sup, node_index(), j->id, job_benchmark(j),
                                            json_object_get(j->doc, "params"),
                                            (uint64_t)timeout_s * 1000);
                if (r < 0) {
                        log_debug("node: dispatch of %s deferred: %s", j->id, strerror(-r));
                        return;
                }
                node_running = true;
                node_wstate = WORKER_BUSY;
                j->parts[i].waiting_since_ms = 0;
                j->parts[i].attempts++;
                json_object_del(part_doc(j, i), "waiting");
                job_set_part(j, i, P_RUNNING, NULL, NULL);
                job_update_state(j);
                job_persist(j);
                return;
        }
}

static void try_dispatch(size_t dev)
{
        struct device *d = devices_get(dev);
        int contended;

        if (is_node(dev)) {
                try_dispatch_node();
                return;
        }
        if (!sup || quiescing || !d || d->running_jobs > 0 || node_running ||
            (d->wstate != WORKER_IDLE && d->wstate != WORKER_COLD))
                return;
        if (node_head()) { /* the GPUs go to the node's job first */
                try_dispatch_node();
                return;
        }
        const struct queue_entry *e = dispatchable(d, dev, &contended);
        if (!e)
                return;
        struct job *best = e->job;
        size_t best_part = e->part;

        if (!best->committed) /* dispatched once its submission commits */
                return;

        json_int_t timeout_s = json_integer_value(json_object_get(best->doc, "timeout_s"));
        int r =
            supervisor_dispatch(sup, dev, best->id, job_benchmark(best),
                                json_object_get(best->doc, "params"), (uint64_t)timeout_s * 1000);
        if (r < 0) {
                log_debug("device %zu: dispatch of %s deferred: %s", dev, best->id, strerror(-r));
                return;
        }
        d->running_jobs = 1;
        d->contended_by = contended;
        d->wstate = WORKER_BUSY;
        best->parts[best_part].waiting_since_ms = 0;
        best->parts[best_part].attempts++;
        json_object_del(part_doc(best, best_part), "waiting");
        job_set_part(best, best_part, P_RUNNING, NULL, NULL);
        job_update_state(best);
        job_persist(best);
}

static void dispatch_all(void)
{
        for (size_t i = 0; i < devices_count(); i++)
                try_dispatch(i);
        if (have_node())
                try_dispatch_node();
}

/* ---- retention ---- */

/* Retention runs on the store's writer, in small transactions, between writes. */
static void retention_apply(void)
{
        store_retention(store, cfg->max_jobs, cfg->retention_days, cfg->max_store_bytes);
}

/* Finished jobs leave memory once their final write is committed: from then on the store
 * answers for them. A failed write keeps the job here and is retried by jobs_tick. */
static void prune_finished(void)
{
        for (size_t i = 0; i < n_jobs;) {
                struct job *j = jobs[i];
                int r;

                if (pstate_final(j->st) && j->final_ticket && store_poll(j->final_ticket, &r) > 0) {
                        j->final_ticket = NULL;
                        if (r == 0) {
                                jobs_remove_at(i);
                                continue;
                        }
                        j->final_unsaved = true;
                }
                i++;
        }
}

/* ---- health verdicts ---- */

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return (x > y) - (x < y);
}

static json_t *part_verdict(const json_t *part)
{
        return json_object_get(part, "verdict");
}

/* The baseline of device uuid: per mode, the median GB/s of its last passing health parts
 * (newest first, at most health_baseline_runs), excluding job `self`. */
static json_t *health_baseline(const char *uuid, const struct job *self, size_t *ret_runs)
{
        size_t max = cfg->health_baseline_runs, runs = 0;
        const json_t **past = calloc(max, sizeof(*past)); /* their measurements, newest first */
        double *vals = calloc(max, sizeof(double));
        json_t *baseline = json_object();

        _cleanup_json_ json_t *parts = NULL;
        size_t k;
        json_t *p;

        /* Read-your-writes: parts that finished a moment ago are still being committed. */
        store_sync(store);
        if (past && vals && store_health_parts(store, uuid, self->id, true, max, &parts) == 0)
                json_array_foreach(parts, k, p)
                {
                        if (runs < max)
                                past[runs++] =
                                    json_object_get(json_object_get(p, "result"), "measurements");
                }
        for (const char *const *m = health_bandwidth_modes; vals && *m; m++) {
                size_t n = 0;
                for (size_t r = 0; r < runs; r++) {
                        size_t x;
                        json_t *mm;
                        json_array_foreach(past[r], x, mm)
                        {
                                const char *name = json_string_value(json_object_get(mm, "name"));
                                json_t *g = json_object_get(mm, "gbps");
                                if (name && strcmp(name, *m) == 0 && json_is_number(g) && n < max)
                                        vals[n++] = json_number_value(g);
                        }
                }
                if (n == 0)
                        continue;
                qsort(vals, n, sizeof(double), cmp_double);
                double med = n % 2 ? vals[n / 2] : (vals[n / 2 - 1] + vals[n / 2]) / 2;
                json_object_set_new(baseline, *m, json_real(med));
        }
        free(past);
        free(vals);
        *ret_runs = runs;
        return baseline;
}

/* The link to judge against: a fake device's test state, else what the worker read during the
 * check (live), else what NVML says now, else what discovery saw. */
static json_t *health_link(const struct device *d, const json_t *result)
{
        const json_t *pcie = json_object_get(json_object_get(result, "link"), "pcie");

        if ((d->fake || !json_is_integer(json_object_get(pcie, "current_gen"))) && d->gpu.known &&
            d->gpu.current_gen > 0)
                return json_pack("{s:i, s:i, s:i, s:i}", "current_gen", d->gpu.current_gen,
                                 "current_width", d->gpu.current_width, "max_gen", d->gpu.max_gen,
                                 "max_width", d->gpu.max_width);
        if (json_is_integer(json_object_get(pcie, "current_gen")))
                return json_deep_copy(pcie);
        return json_deep_copy(json_object_get(d->info, "pcie"));
}

static long long verdict_replays(const json_t *v)
{
        json_t *r = json_object_get(v, "pcie_replay_counter");
        return json_is_integer(r) ? (long long)json_integer_value(r) : -1;
}

/* The fields every verdict carries, then the rule every canonical check follows: a first
 * "fail" is not trusted alone, so the part goes back to the queue (with why) to run once more,
 * and only that run counts. Returns 1 when re-queued (v is kept in first_attempt), 0 when v is
 * the verdict to record, -1 when re-queueing failed (the part is failed, v dropped). */
static int verdict_stamp_or_retry(struct job *j, size_t i, json_t *v, const json_t *baseline,
                                  const char *uuid, const json_t *result, const char *waiting)
{
        char ts[40];
        json_t *p = part_doc(j, i);

        json_object_set(v, "baseline", (json_t *)baseline);
        json_object_set_new(v, "job", json_string(j->id));
        json_object_set_new(v, "uuid", json_string(uuid));
        json_object_set_new(v, "time",
                            json_string(format_rfc3339_ms(now_realtime_ms(), ts, sizeof(ts))));
        if (!streq_ptr(json_string_value(json_object_get(v, "verdict")), "fail") ||
            j->parts[i].attempts >= 2)
                return 0;
        json_object_set_new(p, "first_attempt",
                            json_pack("{s:o, s:O}", "verdict", v, "result", result));
        j->parts[i].st = P_QUEUED;
        json_object_set_new(p, "state", json_string("queued"));
        json_object_set_new(p, "waiting", json_string(waiting));
        if (enqueue(j, i) < 0) {
                job_set_part(j, i, P_FAILED, NULL, "out of memory while re-queueing");
                return -1;
        }
        return 1;
}

/* Judges a canonical health part. A first "fail" is not trusted alone: the part goes back to
 * the queue to run once more, and only the second run's verdict counts (returns true then). */
static bool health_judge(struct job *j, size_t i, struct device *d, const json_t *result)
{
        size_t runs = 0;
        _cleanup_json_ json_t *baseline = health_baseline(d->uuid, j, &runs);
        _cleanup_json_ json_t *pcie = health_link(d, result);
        struct health_replays rp = {.now = d->gpu.known ? d->gpu.replay_counter : -1,
                                    .before = verdict_replays(d->last_verdict)};
        json_t *v = health_verdict(cfg, result, pcie, baseline, runs, &rp);

        if (!v)
                return false;
        json_object_set(v, "pcie", pcie);
        if (rp.now >= 0)
                json_object_set_new(v, "pcie_replay_counter", json_integer(rp.now));
        int r = verdict_stamp_or_retry(j, i, v, baseline, d->uuid, result,
                                       "re-running a failed health check once before the GPU "
                                       "is marked fail");
        if (r != 0) {
                if (r > 0)
                        log_info("device %zu (%s): health check failed; running it once more",
                                 d->index, d->uuid);
                return r > 0;
        }
        json_object_set(part_doc(j, i), "verdict", v);
        json_decref(d->last_verdict);
        d->last_verdict = v;
        d->last_check_ms = now_realtime_ms();
        log_info("device %zu (%s): health %s", d->index, d->uuid,
                 json_string_value(json_object_get(v, "verdict")));
        return false;
}

/* The pairs' baseline: per copy-engine peer measurement, the median GB/s of the node's last
 * passing canonical checks (excluding job self), and the link each pair had in the newest. */
static json_t *node_baseline(const struct job *self, size_t *ret_runs)
{
        size_t max = cfg->health_baseline_runs, runs = 0, k, x;
        json_t *gbps = json_object(), *links = json_object(), *p, *m;
        _cleanup_json_ json_t *parts = NULL, *seen = json_object();
        char label[32];

        store_sync(store);
        if (store_health_parts(store, "node", self->id, true, max, &parts) == 0)
                json_array_foreach(parts, k, p)
                {
                        const json_t *res = json_object_get(p, "result");
                        runs++;
                        json_array_foreach(json_object_get(res, "measurements"), x, m)
                        {
                                const char *name = json_string_value(json_object_get(m, "name"));
                                json_t *g = json_object_get(m, "gbps");
                                if (!name || !json_is_number(g))
                                        continue;
                                json_t *l = json_object_get(seen, name);
                                if (!l) {
                                        l = json_array();
                                        json_object_set_new(seen, name, l);
                                        /* newest first: the first part's link is the latest */
                                        const json_t *link = topology_link(
                                            res, json_integer_value(json_object_get(m, "src")),
                                            json_integer_value(json_object_get(m, "dst")));
                                        if (link)
                                                json_object_set_new(
                                                    links, name,
                                                    json_string(topology_link_label(
                                                        link, label, sizeof(label))));
                                }
                                json_array_append(l, g);
                        }
                }
        const char *name;
        json_t *l;
        json_object_foreach(seen, name, l)
        {
                size_t n = json_array_size(l);
                double *v = calloc(n, sizeof(double));
                if (!v)
                        continue;
                for (size_t i = 0; i < n; i++)
                        v[i] = json_number_value(json_array_get(l, i));
                qsort(v, n, sizeof(double), cmp_double);
                json_object_set_new(gbps, name,
                                    json_real(n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2));
                free(v);
        }
        *ret_runs = runs;
        return json_pack("{s:o, s:o}", "gbps", gbps, "links", links);
}

/* health_judge for the node's part: every pair of GPUs. Same retry of a first fail. */
static bool health_judge_node(struct job *j, size_t i, const json_t *result)
{
        size_t runs = 0;
        _cleanup_json_ json_t *baseline = node_baseline(j, &runs);
        json_t *v = health_pair_verdict(cfg, result, baseline, runs);

        if (!v)
                return false;
        int r = verdict_stamp_or_retry(j, i, v, baseline, "node", result,
                                       "re-running a failed check of the GPU pairs once before "
                                       "the node is marked fail");
        if (r != 0) {
                if (r > 0)
                        log_info("node: the check of the GPU pairs failed; running it once more");
                return r > 0;
        }
        json_object_set(part_doc(j, i), "verdict", v);
        json_decref(node_last_verdict);
        node_last_verdict = v;
        log_info("node: GPU pairs health %s", json_string_value(json_object_get(v, "verdict")));
        return false;
}

/* After recovery: each device's newest verdict in the store. */
static void health_restore_last(void)
{
        for (size_t i = 0; i < devices_count(); i++) {
                struct device *d = devices_get(i);
                _cleanup_json_ json_t *parts = NULL;

                if (d && !d->last_verdict &&
                    store_health_parts(store, d->uuid, NULL, false, 1, &parts) == 0 &&
                    json_array_size(parts) > 0)
                        d->last_verdict = json_incref(part_verdict(json_array_get(parts, 0)));
        }
}

/* ---- supervisor callbacks (supervisor thread) ---- */

static bool job_canonical(const struct job *j)
{
        return json_is_true(json_object_get(j->doc, "canonical"));
}

/* What the part records of how it ran: a cold start, and other processes beside it. */
static void part_note_conditions(struct job *j, size_t i, const struct device *d,
                                 double cold_start_ms)
{
        json_t *p = part_doc(j, i);

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

static void on_part_done(void *userdata, size_t dev, const char *job_id, enum part_outcome outcome,
                         json_t *result, const char *error, double cold_start_ms)
{
        static const enum pstate map[] = {
            [PART_SUCCEEDED] = P_SUCCEEDED,
            [PART_FAILED] = P_FAILED,
            [PART_TIMED_OUT] = P_TIMED_OUT,
            [PART_CANCELLED] = P_CANCELLED,
        };
        char why[400];

        core_lock();
        struct device *d = devices_get(dev);
        struct job *j = job_find(job_id);
        if (!j) {
                log_warning("device %zu: result for unknown job %s dropped", dev, job_id);
                goto out;
        }
        for (size_t i = 0; i < j->n_parts; i++) {
                if (j->parts[i].device != (ssize_t)dev || j->parts[i].st != P_RUNNING)
                        continue;
                enum pstate st = map[outcome];
                if (d)
                        part_note_conditions(j, i, d, cold_start_ms);
                if (st == P_CANCELLED && d && d->paused && !j->cancel_requested) {
                        snprintf(why, sizeof(why), "cancelled: device paused%s%s",
                                 d->pause_reason[0] ? ": " : "", d->pause_reason);
                        error = why;
                }
                if (st == P_SUCCEEDED && result) {
                        _cleanup_free_ char *dump = json_dump_compact(result, NULL);
                        if (!dump || strlen(dump) > cfg->max_result_bytes) {
                                snprintf(why, sizeof(why),
                                         "result larger than max_result_bytes (%llu bytes)",
                                         (unsigned long long)cfg->max_result_bytes);
                                st = P_FAILED;
                                result = NULL;
                                error = why;
                        }
                }
                if (st == P_TIMED_OUT && !error)
                        error = "deadline passed (timeout_s); the worker was killed";
                json_t *summary =
                    st == P_SUCCEEDED ? suite_summary(job_benchmark(j), result) : NULL;
                if (summary) /* the worker's object is borrowed: summarise a copy */
                        result = json_deep_copy(result);
                if (summary && result)
                        json_object_set_new(result, "summary", summary);
                else
                        json_decref(summary);
                bool contended = d && d->contended_by > 0, again = false;
                if (st == P_SUCCEEDED && d && !contended && job_canonical(j))
                        again = health_judge(j, i, d, result);
                else if (st == P_SUCCEEDED && is_node(dev) && job_canonical(j))
                        again = health_judge_node(j, i, result);
                if (!again)
                        job_set_part(j, i, st, result, error);
                if (st == P_SUCCEEDED && d && !contended && !again)
                        metrics_part_result(d->uuid, result);
                if (summary && result)
                        json_decref(result);
                if (st != P_SUCCEEDED)
                        log_info("job %s on device %zu: %s%s%s", j->id, dev, pstate_names[st],
                                 error ? ": " : "", error ? error : "");
                break;
        }
        if (job_update_state(j)) {
                job_finished(j);
                log_info("job %s (%s) %s", j->id, job_benchmark(j), pstate_names[j->st]);
        }
        job_persist(j);
        if (pstate_final(j->st))
                retention_apply();
        prune_finished();
out:
        if (d) {
                d->running_jobs = 0;
                d->contended_by = 0;
        }
        if (is_node(dev)) {
                node_running = false;
                dispatch_all(); /* the GPUs it held are free */
        } else {
                try_dispatch(dev);
        }
        core_unlock();
}

static void fail_queued_on(size_t dev, const char *why)
{
        const struct queue_entry *e;

        while ((e = queue_peek(&queues[dev]))) {
                struct job *j = e->job;
                job_set_part(j, e->part, P_FAILED, NULL, why); /* removes e */
                if (job_update_state(j))
                        job_finished(j);
                job_persist(j);
        }
}

static void on_worker_state(void *userdata, size_t dev, enum worker_state st, const char *reason)
{
        char why[400];

        core_lock();
        struct device *d = devices_get(dev);
        if (is_node(dev)) {
                if (st != node_wstate)
                        log_info("node worker %s%s%s", worker_state_to_string(st),
                                 reason ? ": " : "", reason ? reason : "");
                node_wstate = st;
                if (st == WORKER_FAULTED) {
                        snprintf(why, sizeof(why), "the node worker is faulted: %s",
                                 reason ? reason : "it keeps crashing");
                        fail_queued_on(dev, why);
                }
                try_dispatch_node();
                goto out;
        }
        if (!d)
                goto out;
        enum worker_state old = d->wstate;
        d->wstate = st;
        snprintf(d->reason, sizeof(d->reason), "%s", reason ? reason : "");
        if (st != old)
                log_info("device %zu (%s): worker %s%s%s", dev, d->uuid, worker_state_to_string(st),
                         reason ? ": " : "", reason ? reason : "");
        if (st == WORKER_FAULTED) {
                snprintf(why, sizeof(why), "device %zu (%s) is faulted: %s", dev, d->uuid,
                         reason ? reason : "its worker keeps crashing");
                fail_queued_on(dev, why);
        }
        if (st == WORKER_IDLE || st == WORKER_COLD)
                d->reason[0] = 0;
        try_dispatch(dev);
out:
        core_unlock();
}

/* ---- sharing the GPU (coexist.c looks, devctl.c pauses) ---- */

void jobs_gpu_observed(size_t dev, const struct gpu_state *st)
{
        core_lock();
        struct device *d = devices_get(dev);
        if (!d)
                goto out;
        if (d->gpu.other_processes != st->other_processes)
                log_info("device %zu (%s): %d other process(es) on the GPU", dev, d->uuid,
                         st->other_processes);
        d->gpu = *st;
        if (d->running_jobs > 0 && st->other_processes > d->contended_by)
                d->contended_by = st->other_processes;
        /* On an EXCLUSIVE_PROCESS GPU a context umd keeps would make its owners' programs fail. */
        if (sup)
                supervisor_exit_after_each_part(sup, dev,
                                                strcmp(st->compute_mode, "exclusive_process") == 0);
        try_dispatch(dev);
out:
        core_unlock();
}

void jobs_dispatch_locked(size_t dev)
{
        try_dispatch(dev);
}

void jobs_device_paused_locked(size_t dev)
{
        for (size_t k = 0; k < n_jobs; k++) {
                struct job *j = jobs[k];

                for (size_t i = 0; i < j->n_parts; i++)
                        if ((j->parts[i].device == (ssize_t)dev ||
                             (have_node() && j->parts[i].device == (ssize_t)node_index())) &&
                            j->parts[i].st == P_RUNNING && sup)
                                supervisor_cancel(sup, (size_t)j->parts[i].device, j->id);
        }
        if (sup)
                supervisor_retire(sup, dev);
        try_dispatch(dev); /* marks the queued head as waiting */
}

size_t jobs_health_due_locked(size_t *ret_devs, size_t max)
{
        uint64_t now = now_realtime_ms(), every = (uint64_t)cfg->health_interval_s * 1000;
        size_t n = 0;

        if (every == 0 || !sup || quiescing || node_running)
                return 0;
        for (size_t i = 0; i < devices_count() && n < max; i++) {
                struct device *d = devices_get(i);

                if (d->last_check_ms == 0)
                        d->last_check_ms = now; /* the first check comes one interval in */
                if (d->paused || d->gpu.other_processes > 0 || d->running_jobs > 0 ||
                    queue_len(&queues[i]) > 0 || now - d->last_check_ms < every ||
                    (d->wstate != WORKER_IDLE && d->wstate != WORKER_COLD))
                        continue;
                d->last_check_ms = now;
                ret_devs[n++] = i;
        }
        return n;
}

void jobs_supervisor_callbacks(struct supervisor_callbacks *ret)
{
        *ret = (struct supervisor_callbacks){
            .part_done = on_part_done,
            .worker_state = on_worker_state,
        };
}

void jobs_attach_supervisor(struct supervisor *s)
{
        core_lock();
        sup = s;
        dispatch_all();
        core_unlock();
}

void jobs_tick(void)
{
        core_lock();
        prune_finished();
        for (size_t k = 0; k < n_jobs; k++)
                if (jobs[k]->final_unsaved && !jobs[k]->final_ticket) {
                        jobs[k]->final_unsaved = false;
                        job_persist(jobs[k]);
                }
        retention_apply();
        core_unlock();
}

void jobs_quiesce(void)
{
        core_lock();
        quiescing = true;
        core_unlock();
}

void jobs_shutdown(void)
{
        core_lock();
        /* Parts still running lost their worker with the daemon: they did not finish. Queued
         * parts stay queued and run after the next start. */
        for (size_t k = 0; k < n_jobs; k++) {
                struct job *j = jobs[k];
                bool changed = false;
                for (size_t i = 0; i < j->n_parts; i++)
                        if (j->parts[i].st == P_RUNNING) {
                                job_set_part(j, i, P_INTERRUPTED, NULL,
                                             "umd stopped while the part ran");
                                changed = true;
                        }
                if (changed) {
                        job_update_state(j);
                        job_persist(j);
                }
        }
        for (size_t k = 0; k < n_jobs; k++)
                job_free(jobs[k]);
        free(jobs);
        jobs = NULL;
        n_jobs = cap_jobs = 0;
        for (size_t i = 0; queues && i < devices_count(); i++)
                queue_free(&queues[i]);
        free(queues);
        queues = NULL;
        sup = NULL;
        core_unlock();
}

void jobs_counts(size_t *ret_queued, size_t *ret_running, size_t *ret_total)
{
        size_t running = 0;
        core_lock();
        for (size_t i = 0; i < devices_count(); i++)
                running += devices_get(i)->running_jobs;
        running += node_running;
        *ret_queued = queued_total();
        *ret_running = running;
        *ret_total = store ? store_count(store) : 0;
        core_unlock();
}

/* ---- recovery ---- */

static struct job *job_from_doc(json_t *doc)
{
        const char *id = json_string_value(json_object_get(doc, "id"));
        json_t *parts = json_object_get(doc, "parts");
        int st = pstate_from_string(json_string_value(json_object_get(doc, "state")));
        const char *prio = json_string_value(json_object_get(doc, "priority"));

        if (!id || !uuid_is_valid(id) || !json_is_array(parts) || st < 0 ||
            json_array_size(parts) == 0 || !json_is_string(json_object_get(doc, "benchmark")))
                return NULL;
        struct job *j = calloc(1, sizeof(*j));
        if (!j)
                return NULL;
        j->parts = calloc(json_array_size(parts), sizeof(*j->parts));
        if (!j->parts) {
                free(j);
                return NULL;
        }
        snprintf(j->id, sizeof(j->id), "%s", id);
        j->doc = json_incref(doc);
        j->st = (enum pstate)st;
        j->prio = 1;
        if (prio && spec_priority_from_string(prio) >= 0)
                j->prio = spec_priority_from_string(prio);
        j->cancel_requested = json_is_true(json_object_get(doc, "cancel_requested"));
        j->finished_ms = (uint64_t)json_integer_value(json_object_get(doc, "finished_ms"));
        j->n_parts = json_array_size(parts);
        for (size_t i = 0; i < j->n_parts; i++) {
                json_t *p = json_array_get(parts, i);
                const char *uuid = json_string_value(json_object_get(p, "uuid"));
                int ps = pstate_from_string(json_string_value(json_object_get(p, "state")));
                if (!uuid || ps < 0) {
                        job_free(j);
                        return NULL;
                }
                j->parts[i].device = strcmp(uuid, "node") == 0
                                         ? (have_node() ? (ssize_t)node_index() : -1)
                                         : devices_lookup_uuid(uuid);
                j->parts[i].st = (enum pstate)ps;
        }
        return j;
}

/* A stored unfinished job is checked as strictly as a submission (spec.c), from what dispatch
 * will use: its benchmark, params, timeout and priority, on the devices of its parts. NULL when
 * it passes, else why not (static). */
static const char *recover_check(const json_t *doc, const struct job *j)
{
        static char why[800];
        struct problem p = {0};
        struct job_spec spec = {0};
        const struct bench_def *b;
        json_t *devs = json_array(), *part;
        size_t i;

        /* A part on the node (a benchmark spanning GPUs) names every GPU: "all". */
        json_array_foreach(json_object_get(doc, "parts"), i, part)
        {
                if (streq_ptr(json_string_value(json_object_get(part, "uuid")), "node")) {
                        json_decref(devs);
                        devs = json_string("all");
                        break;
                }
                json_array_append(devs, json_object_get(part, "uuid"));
        }
        _cleanup_json_ json_t *body = json_pack(
            "{s:O?, s:O?, s:O?, s:O?, s:O?, s:o}", "benchmark", json_object_get(doc, "benchmark"),
            "params", json_object_get(doc, "params"), "timeout_s",
            json_object_get(doc, "timeout_s"), "priority", json_object_get(doc, "priority"),
            "labels", json_object_get(doc, "labels"), "devices", devs);
        if (!body)
                return "its document cannot be checked (out of memory or malformed)";
        if (!json_is_integer(json_object_get(doc, "timeout_s")))
                return "its stored timeout_s is not a whole number";
        if (spec_check_body(body, &b, &p) < 0 || spec_parse(cfg, body, b, &spec, &p) < 0) {
                snprintf(why, sizeof(why), "it is no longer a valid job: %s%s%s", p.field,
                         p.field[0] ? ": " : "", p.detail);
                spec_done(&spec);
                return why;
        }
        spec_done(&spec);
        (void)j;
        return NULL;
}

static int recover_one(json_t *doc, void *userdata)
{
        unsigned *changed = userdata;
        struct job *j = NULL;
        bool dirty = false;
        const char *bad;
        char why[160] = "";

        /* What comes back from disk is trusted no more than a submission: the filters and
         * handlers below assume the shapes jobs.c writes. A job that cannot even be read as
         * one is left alone; one that can is failed below with the reason. */
        bool malformed = spec_validate_stored(doc, why, sizeof(why)) < 0;
        if (!(j = job_from_doc(doc))) {
                log_warning("store: job %.40s: %s; ignored",
                            json_string_value(json_object_get(doc, "id")) ?: "?",
                            why[0] ? why : "unexpected shape");
                return 0;
        }
        j->committed = true;
        if (pstate_final(j->st)) { /* finished, but its finished_ms was lost: nothing to do */
                job_free(j);
                return 0;
        }
        static char malformed_why[200];
        snprintf(malformed_why, sizeof(malformed_why), "its stored document is malformed: %s", why);
        bad = malformed ? malformed_why : j->st == P_QUEUED ? recover_check(doc, j) : NULL;
        if (bad)
                log_warning("store: queued job %s is failed: %s", j->id, bad);
        for (size_t i = 0; i < j->n_parts; i++) {
                struct part *p = &j->parts[i];
                if (p->st == P_RUNNING || (p->st == P_QUEUED && j->st == P_RUNNING)) {
                        job_set_part(j, i, P_INTERRUPTED, NULL,
                                     "umd stopped while the job ran (interrupted)");
                        dirty = true;
                } else if (p->st == P_QUEUED && p->device < 0) {
                        job_set_part(j, i, P_FAILED, NULL,
                                     "the device this part was queued for is no longer present");
                        dirty = true;
                } else if (p->st == P_QUEUED && bad) {
                        job_set_part(j, i, P_FAILED, NULL, bad);
                        dirty = true;
                }
        }
        if (dirty) {
                if (job_update_state(j))
                        job_finished(j);
                (*changed)++;
                job_persist(j);
        }
        int r = jobs_append(j);
        if (r < 0) {
                job_free(j);
                return r;
        }
        for (size_t i = 0; i < j->n_parts; i++)
                if (j->parts[i].st == P_QUEUED && (r = enqueue(j, i)) < 0)
                        return r;
        return 0;
}

int jobs_init(const struct umd_config *c, struct store *s)
{
        unsigned changed = 0;
        int r;

        cfg = c;
        store = s;
        queues = calloc(devices_count() + 1, sizeof(*queues));
        if (!queues)
                return log_error_errno(ENOMEM, "out of memory");
        r = store_recover(s, recover_one, &changed);
        if (r < 0)
                return log_error_errno(r, "cannot recover jobs from the store: %m");
        /* Before READY: what recovery changed is durable. */
        store_sync(s);
        prune_finished();
        retention_apply();
        health_restore_last();
        log_info("store: %zu jobs (%zu parts queued), %u interrupted or failed at recovery",
                 store_count(s), queued_total(), changed);
        return 0;
}

/* ---- submission ---- */

/* What clients see: the stored document less the bookkeeping only umd needs. */
static json_t *job_public(const json_t *doc)
{
        /* A copy to serialise after core_lock is released: only what jobs.c changes in place
         * (the document and its part objects) is copied; results are shared. */
        return store_public_copy(doc, true);
}

static struct job *idempotent_find(const char *key, const char *client)
{
        for (size_t k = n_jobs; k-- > 0;) {
                json_t *d = jobs[k]->doc;
                const char *jk = json_string_value(json_object_get(d, "idempotency_key"));
                const char *jc = json_string_value(json_object_get(d, "client"));
                if (jk && strcmp(jk, key) == 0 && streq_ptr(jc, client))
                        return jobs[k];
        }
        return NULL;
}

/* Remove a job whose submission could not be committed: it never existed. */
static void job_unsubmit(struct job *j)
{
        ssize_t k = job_index(j->id);

        for (size_t i = 0; i < j->n_parts; i++)
                if (j->parts[i].st == P_QUEUED && j->parts[i].device >= 0)
                        queue_remove(&queues[j->parts[i].device], j, i);
        if (k >= 0)
                jobs_remove_at((size_t)k);
}

static size_t active_jobs_of(const char *client)
{
        size_t n = 0;
        for (size_t k = 0; k < n_jobs; k++)
                if (!pstate_final(jobs[k]->st) &&
                    streq_ptr(json_string_value(json_object_get(jobs[k]->doc, "client")), client))
                        n++;
        return n;
}

static int check_capacity(const size_t *devs, size_t n, const char *client, struct problem *p)
{
        int r;

        size_t queued = queued_total();

        if (queued + n > cfg->queue_capacity) {
                r = problem_set(p, 429, "",
                                "the queue is full (%zu parts queued, queue_capacity %u); retry "
                                "later",
                                queued, cfg->queue_capacity);
                p->retry_after_s = 5;
                return r;
        }
        for (size_t i = 0; i < n; i++) {
                size_t q = jobs_queued_on_locked(devs[i]);
                if (q + 1 > cfg->queue_capacity_per_device) {
                        r = problem_set(p, 429, "devices",
                                        "the queue of device %zu is full (%zu parts, "
                                        "queue_capacity_per_device %u); retry later",
                                        devs[i], q, cfg->queue_capacity_per_device);
                        p->retry_after_s = 5;
                        return r;
                }
        }
        if (client && active_jobs_of(client) >= cfg->jobs_per_token) {
                r = problem_set(p, 429, "",
                                "client '%s' has %u jobs queued or running (jobs_per_token); "
                                "retry later",
                                client, cfg->jobs_per_token);
                p->retry_after_s = 5;
                return r;
        }
        return 0;
}

static struct job *job_new(const json_t *body, const char *request, const struct job_spec *spec,
                           const char *idem, const char *client)
{
        const struct bench_def *b = spec->bench;
        const size_t *devs = spec->devs;
        size_t n = spec->n_devs;
        json_t *params = spec->params;
        int prio = spec->prio;
        unsigned timeout_s = spec->timeout_s;
        struct job *j = calloc(1, sizeof(*j));
        bool fake = false;

        /* One part more than devices: the canonical check's part on the node. */
        if (!j || !(j->parts = calloc(n + 1, sizeof(*j->parts))) || uuid7_generate(j->id) < 0) {
                job_free(j);
                return NULL;
        }
        j->prio = prio;
        j->n_parts = n;
        json_t *parts = json_array();
        if (b->multi_gpu) { /* one part, on the node worker, taking every GPU (spec.c) */
                json_t *uuids = json_array();
                for (size_t i = 0; i < n; i++) {
                        struct device *d = devices_get(devs[i]);
                        fake = fake || d->fake;
                        json_array_append_new(uuids, json_string(d->uuid));
                }
                j->n_parts = 1;
                j->parts[0] = (struct part){.device = (ssize_t)node_index(), .st = P_QUEUED};
                json_array_append_new(
                    parts, json_pack("{s:s, s:s, s:o, s:b, s:s, s:n, s:n, s:n, s:n}", "device",
                                     "all", "uuid", "node", "devices", uuids, "fake", fake, "state",
                                     "queued", "started", "finished", "result", "error"));
                n = 0;
        }
        for (size_t i = 0; i < n; i++) {
                struct device *d = devices_get(devs[i]);
                j->parts[i] = (struct part){.device = (ssize_t)devs[i], .st = P_QUEUED};
                fake = fake || d->fake;
                json_array_append_new(parts, json_pack("{s:I, s:s, s:b, s:s, s:n, s:n, s:n, s:n}",
                                                       "device", (json_int_t)devs[i], "uuid",
                                                       d->uuid, "fake", d->fake, "state", "queued",
                                                       "started", "finished", "result", "error"));
        }
        /* The canonical check over every GPU of a node with several also checks each pair of
         * GPUs, on the node worker (health.h's health_pair_verdict). */
        if (strcmp(b->name, "health") == 0 && spec->canonical && have_node() &&
            n == devices_count()) {
                json_t *uuids = json_array();
                for (size_t i = 0; i < n; i++)
                        json_array_append_new(uuids, json_string(devices_get(devs[i])->uuid));
                j->parts[n] = (struct part){.device = (ssize_t)node_index(), .st = P_QUEUED};
                j->n_parts = n + 1;
                json_array_append_new(
                    parts, json_pack("{s:s, s:s, s:o, s:b, s:s, s:s, s:n, s:n, s:n, s:n}", "device",
                                     "all", "uuid", "node", "devices", uuids, "fake", fake, "check",
                                     "GPU pairs: peer copies against each link", "state", "queued",
                                     "started", "finished", "result", "error"));
        }
        json_t *labels = json_object_get(body, "labels");
        j->doc = json_pack("{s:s, s:s, s:s, s:O, s:s, s:I, s:o, s:s?, s:s?, s:s, s:o, s:I, s:n, "
                           "s:n, s:b, s:o, s:s}",
                           "id", j->id, "benchmark", b->name, "kind", b->kind, "params", params,
                           "priority", spec_priority_name(prio), "timeout_s", (json_int_t)timeout_s,
                           "labels", labels ? json_incref(labels) : json_object(),
                           "idempotency_key", idem, "client", client, "state", "queued", "created",
                           now_json(), "created_ms", (json_int_t)now_realtime_ms(), "started",
                           "finished", "fake", fake, "parts", parts, "request", request);
        if (!j->doc) {
                job_free(j);
                return NULL;
        }
        if (strcmp(b->name, "health") == 0)
                json_object_set_new(j->doc, "canonical", json_boolean(spec->canonical));
        if (json_is_string(json_object_get(body, "busy_policy")))
                json_object_set(j->doc, "busy_policy", json_object_get(body, "busy_policy"));
        return j;
}

int core_job_submit(const json_t *body, const char *idem, const char *client, json_t **ret_job,
                    struct problem *p)
{
        struct job_spec spec = {0};
        const struct bench_def *b;
        int r;

        r = spec_check_body(body, &b, p);
        if (r < 0)
                return r;
        _cleanup_free_ char *request = json_dump_compact(body, NULL);
        if (!request)
                return problem_set(p, 500, "", "out of memory");

        core_lock();
        prune_finished();
        if (idem) {
                struct job *prev = idempotent_find(idem, client);
                _cleanup_json_ json_t *stored = NULL;
                _cleanup_free_ char *stored_req = NULL;
                const char *req = NULL, *prev_id = NULL;

                if (prev) {
                        req = json_string_value(json_object_get(prev->doc, "request"));
                        prev_id = prev->id;
                } else if (store_find_idempotent(store, idem, client, &stored, &stored_req) == 0) {
                        req = stored_req;
                        prev_id = json_string_value(json_object_get(stored, "id"));
                }
                if (prev_id) {
                        if (!req || strcmp(req, request) != 0) {
                                r = problem_set(p, 409, "Idempotency-Key",
                                                "this Idempotency-Key was used for job %s with a "
                                                "different body",
                                                prev_id);
                                goto out;
                        }
                        *ret_job = prev ? job_public(prev->doc) : json_incref(stored);
                        r = 1;
                        goto out;
                }
        }
        r = spec_parse(cfg, body, b, &spec, p);
        if (r < 0)
                goto out;
        r = check_capacity(spec.devs, spec.n_devs, client, p);
        if (r < 0)
                goto out;

        struct job *j = job_new(body, request, &spec, idem, client);
        struct store_ticket *ticket = NULL;
        if (!j) {
                r = problem_set(p, 500, "", "out of memory");
                goto out;
        }
        if (jobs_append(j) < 0) {
                job_free(j);
                r = problem_set(p, 500, "", "out of memory");
                goto out;
        }
        if (store_put(store, j->doc, &ticket) < 0) {
                job_unsubmit(j);
                r = problem_set(p, 500, "", "out of memory");
                goto out;
        }
        /* Queued now, so capacity counts it, but not dispatched until committed. */
        for (size_t i = 0; i < j->n_parts; i++)
                if (enqueue(j, i) < 0) /* stored but not queued: fail it rather than lose it */
                        job_set_part(j, i, P_FAILED, NULL, "out of memory while queueing");
        char id[UUID_STRING_MAX];
        snprintf(id, sizeof(id), "%s", j->id);
        core_unlock();

        /* The commit is waited for without the lock: concurrent submits share one commit. */
        int w = store_wait(ticket);

        core_lock();
        j = job_find(id);
        if (!j) { /* cannot happen: only prune_finished removes committed jobs */
                r = problem_set(p, 500, "", "job %s vanished", id);
                goto out;
        }
        if (w < 0) {
                job_unsubmit(j);
                r = problem_set(p, 507, "", "the job could not be stored (%s); nothing was queued",
                                strerror(-w));
                goto out;
        }
        j->committed = true;
        job_changed(j);
        if (job_update_state(j)) { /* a part failed while queueing */
                job_finished(j);
                job_persist(j);
        }
        log_info("job %s (%s) queued on %zu device(s)", j->id, b->name, j->n_parts);
        *ret_job = job_public(j->doc);
        for (size_t i = 0; i < spec.n_devs; i++)
                try_dispatch(spec.devs[i]);
        if (have_node())
                try_dispatch_node();
        r = 0;
out:
        core_unlock();
        spec_done(&spec);
        return r;
}

/* ---- reads and cancel ---- */

int core_job_get(const char *id, json_t **ret_job, struct problem *p)
{
        if (!uuid_is_valid(id))
                return problem_set(p, 400, "id", "'%.64s' is not a job id (a UUID)", id);
        core_lock();
        prune_finished();
        struct job *j = job_find(id);
        if (j)
                *ret_job = job_public(j->doc);
        core_unlock();
        if (j) {
                /* What a client reads is on disk: wait for the commit of what it shows. */
                store_sync(store);
                return 0;
        }
        /* Not in memory: finished, and committed before it left memory. */
        int r = store_get(store, id, ret_job);
        if (r == -ENOENT)
                return problem_set(p, 404, "id", "no job %s", id);
        if (r < 0)
                return problem_set(p, 500, "",
                                   "the job store cannot be read (see the daemon's log)");
        return 0;
}

int core_job_get_finished(const char *id, char **ret_body, size_t *ret_len, struct problem *p)
{
        bool in_memory;
        int r;

        if (!uuid_is_valid(id))
                return problem_set(p, 400, "id", "'%.64s' is not a job id (a UUID)", id);
        core_lock();
        prune_finished();
        in_memory = job_find(id) != NULL;
        core_unlock();
        if (in_memory)
                return 1;
        /* Not in memory: finished, and committed before it left memory. */
        r = store_get_finished_raw(store, id, ret_body, ret_len);
        if (r == -ENOENT)
                return problem_set(p, 404, "id", "no job %s", id);
        if (r < 0)
                return problem_set(p, 500, "",
                                   "the job store cannot be read (see the daemon's log)");
        return 0;
}

/* Undo what core_job_cancel did to j's queued parts when its write was not committed. */
static void cancel_undo(struct job *j, const bool *was_queued)
{
        j->cancel_requested = false;
        json_object_del(j->doc, "cancel_requested");
        for (size_t i = 0; i < j->n_parts; i++) {
                json_t *pd = part_doc(j, i);
                if (i >= SPEC_MAX_DEVICES || !was_queued[i] || j->parts[i].st != P_CANCELLED)
                        continue;
                j->parts[i].st = P_QUEUED;
                json_object_set_new(pd, "state", json_string(pstate_names[P_QUEUED]));
                json_object_set_new(pd, "finished", json_null());
                json_object_set_new(pd, "error", json_null());
                if (j->parts[i].device >= 0 && enqueue(j, i) < 0)
                        job_set_part(j, i, P_FAILED, NULL, "out of memory while queueing");
        }
        if (pstate_final(j->st)) {
                j->finished_ms = 0;
                json_object_set_new(j->doc, "finished", json_null());
                json_object_del(j->doc, "finished_ms");
        }
        j->st = job_derive_state(j);
        json_object_set_new(j->doc, "state", json_string(pstate_names[j->st]));
        if (j->final_ticket) { /* the failed final write: nothing to wait for any more */
                (void)store_wait(j->final_ticket);
                j->final_ticket = NULL;
        }
}

int core_job_cancel(const char *id, const char *client, bool admin, json_t **ret_job,
                    struct problem *p)
{
        int r = 0;

        if (!uuid_is_valid(id))
                return problem_set(p, 400, "id", "'%.64s' is not a job id (a UUID)", id);
        core_lock();
        prune_finished();
        struct job *j = job_find(id);
        if (!j) {
                core_unlock();
                /* Not in memory: finished (or unknown). */
                _cleanup_json_ json_t *doc = NULL;
                r = store_get(store, id, &doc);
                if (r == -ENOENT)
                        return problem_set(p, 404, "id", "no job %s", id);
                if (r < 0)
                        return problem_set(p, 500, "",
                                           "the job store cannot be read (see the daemon's log)");
                const char *owner = json_string_value(json_object_get(doc, "client"));
                if (client && !admin && !streq_ptr(owner, client))
                        return problem_set(p, 403, "",
                                           "job %s was submitted by another client; cancelling "
                                           "it needs the admin role",
                                           id);
                return problem_set(p, 409, "id", "job %s already finished (%s)", id,
                                   json_string_value(json_object_get(doc, "state")) ?: "?");
        }
        const char *owner = json_string_value(json_object_get(j->doc, "client"));
        if (client && !admin && !streq_ptr(owner, client)) {
                r = problem_set(p, 403, "",
                                "job %s was submitted by another client; cancelling "
                                "it needs the admin role",
                                id);
                goto out;
        }
        if (pstate_final(j->st)) {
                r = problem_set(p, 409, "id", "job %s already finished (%s)", id,
                                pstate_names[j->st]);
                goto out;
        }
        bool was_queued[SPEC_MAX_DEVICES] = {false};
        bool was_requested = j->cancel_requested;
        struct store_ticket *ticket = NULL;
        char jid[UUID_STRING_MAX];

        j->cancel_requested = true;
        json_object_set_new(j->doc, "cancel_requested", json_true());
        for (size_t i = 0; i < j->n_parts; i++) {
                if (j->parts[i].st == P_QUEUED && i < SPEC_MAX_DEVICES) {
                        was_queued[i] = true;
                        job_set_part(j, i, P_CANCELLED, NULL, "cancelled before it ran");
                }
        }
        if (job_update_state(j))
                job_finished(j);
        /* A finished job's ticket is the one prune_finished polls; ours is for an open one. */
        if (pstate_final(j->st))
                r = job_persist(j);
        else
                r = store_put(store, j->doc, &ticket);
        if (r < 0) {
                cancel_undo(j, was_queued);
                j->cancel_requested = was_requested;
                r = problem_set(p, 500, "", "out of memory");
                goto out;
        }
        snprintf(jid, sizeof(jid), "%s", j->id);
        bool final = pstate_final(j->st);
        core_unlock();

        /* Answered only once committed; the lock is not held meanwhile. */
        int w;
        if (final) {
                store_sync(store);
                core_lock();
                j = job_find(jid);
                w = 0;
                if (j && !j->final_ticket && j->final_unsaved)
                        w = -EIO;
                if (j && j->final_ticket && store_poll(j->final_ticket, &w) > 0) {
                        j->final_ticket = NULL;
                        if (w < 0)
                                j->final_unsaved = true;
                }
        } else {
                w = store_wait(ticket);
                core_lock();
                j = job_find(jid);
        }
        if (!j) { /* finished and committed meanwhile: the cancel took effect */
                _cleanup_json_ json_t *doc = NULL;
                core_unlock();
                if (store_get(store, jid, &doc) == 0) {
                        *ret_job = json_incref(doc);
                        return 0;
                }
                return problem_set(p, 500, "", "job %s vanished", jid);
        }
        if (w < 0) {
                j->final_unsaved = false;
                cancel_undo(j, was_queued);
                j->cancel_requested = was_requested;
                if (was_requested)
                        json_object_set_new(j->doc, "cancel_requested", json_true());
                r = problem_set(p, 507, "",
                                "the cancellation could not be stored (%s); the job "
                                "is unchanged",
                                strerror(-w));
                goto out;
        }
        for (size_t i = 0; i < j->n_parts; i++)
                if (j->parts[i].st == P_RUNNING && sup)
                        supervisor_cancel(sup, (size_t)j->parts[i].device, j->id);
        log_info("job %s: cancel requested (%s)", id, pstate_names[j->st]);
        *ret_job = job_public(j->doc);
        r = 0;
out:
        core_unlock();
        return r;
}

/* Append "?name=v" or "&name=v" to f, percent-encoding v. A stream rather than a fixed
 * buffer: the filter values are bounded only by the request's length, and a cut link would
 * send the client a query that no longer parses. */
static void url_append(FILE *f, bool *first, const char *name, const char *v)
{
        static const char hex[] = "0123456789ABCDEF";

        if (!v)
                return;
        fprintf(f, "%s%s=", *first ? "?" : "&", name);
        *first = false;
        for (const unsigned char *c = (const unsigned char *)v; *c; c++) {
                if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                    (*c >= '0' && *c <= '9') || strchr("-_.~", *c))
                        fputc(*c, f);
                else
                        fprintf(f, "%%%c%c", hex[*c >> 4], hex[*c & 15]);
        }
}

/* A list's since/until: Unix milliseconds, or RFC 3339 with a Z or numeric offset. */
static int parse_time_ms(const char *s, uint64_t *ret)
{
        struct tm tm = {0};
        unsigned frac_ms = 0, digits = 0;
        int off = 0, oh, om, n = 0;
        uint64_t v;

        if (parse_uint64(s, 1, UINT64_C(253402300799999), &v) == 0) {
                *ret = v;
                return 0;
        }
        if (sscanf(s, "%4d-%2d-%2d%*[Tt ]%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                   &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6 ||
            n != 19)
                return -EINVAL;
        s += n;
        if (*s == '.') {
                for (s++; *s >= '0' && *s <= '9'; s++, digits++)
                        if (digits < 3)
                                frac_ms = frac_ms * 10 + (unsigned)(*s - '0');
                if (digits == 0)
                        return -EINVAL;
                for (; digits < 3; digits++)
                        frac_ms *= 10;
        }
        if (*s == 'Z' || *s == 'z') {
                s++;
        } else if ((*s == '+' || *s == '-') && sscanf(s + 1, "%2d:%2d%n", &oh, &om, &n) == 2 &&
                   n == 5 && oh < 24 && om < 60) {
                off = (*s == '-' ? -1 : 1) * (oh * 60 + om) * 60;
                s += 6;
        } else {
                return -EINVAL;
        }
        if (*s || tm.tm_year < 1970 || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 ||
            tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60)
                return -EINVAL;
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        time_t t = timegm(&tm);
        if (t == (time_t)-1 || (int64_t)t - off < 0)
                return -EINVAL;
        *ret = (uint64_t)((int64_t)t - off) * 1000u + frac_ms;
        return 0;
}

int core_job_list(const struct job_filter *f, struct job_page *ret_page, struct problem *p)
{
        int status = -1;
        ssize_t dev = -1;
        uint64_t limit = 50;
        const char *lk = NULL, *lv = NULL;
        size_t lklen = 0;
        struct store_query q = {0};

        if (f->status && (status = pstate_from_string(f->status)) < 0)
                return problem_set(p, 400, "status",
                                   "unknown status '%.32s' (queued, running, succeeded, failed, "
                                   "cancelled, timed_out, interrupted)",
                                   f->status);
        if (f->limit && parse_uint64(f->limit, 1, cfg->list_limit_max, &limit) < 0)
                return problem_set(p, 400, "limit",
                                   "must be a whole number from 1 to %u "
                                   "(list_limit_max)",
                                   cfg->list_limit_max);
        if (f->before && !uuid_is_valid(f->before))
                return problem_set(p, 400, "before", "must be a job id (a UUID)");
        if (f->after && !uuid_is_valid(f->after))
                return problem_set(p, 400, "after", "must be a job id (a UUID)");
        if (f->include && strcmp(f->include, "results") != 0)
                return problem_set(p, 400, "include", "the one value is 'results'");
        if (f->benchmark && !catalog_find(f->benchmark))
                return problem_set(p, 400, "benchmark",
                                   "unknown benchmark '%.64s' (see GET /v1/benchmarks)",
                                   f->benchmark);
        if (f->label) {
                const char *colon = strchr(f->label, ':');
                if (!colon || colon == f->label)
                        return problem_set(p, 400, "label", "must be KEY:VALUE");
                lk = f->label;
                lklen = (size_t)(colon - f->label);
                lv = colon + 1;
        }

        if (f->since && parse_time_ms(f->since, &q.since_ms) < 0)
                return problem_set(p, 400, "since",
                                   "must be a time in RFC 3339 (2026-01-31T12:00:00Z) or Unix "
                                   "milliseconds");
        if (f->until && parse_time_ms(f->until, &q.until_ms) < 0)
                return problem_set(p, 400, "until",
                                   "must be a time in RFC 3339 (2026-01-31T12:00:00Z) or Unix "
                                   "milliseconds");

        char uuid[UUID_STRING_MAX + 64] = "";
        core_lock();
        if (f->device && (dev = devices_lookup(f->device)) < 0) {
                core_unlock();
                return problem_set(p, 400, "device", "unknown device '%.64s'", f->device);
        }
        if (dev >= 0)
                snprintf(uuid, sizeof(uuid), "%s", devices_get((size_t)dev)->uuid);
        core_unlock();

        q.state = status >= 0 ? pstate_names[status] : NULL;
        q.benchmark = f->benchmark;
        q.uuid = dev >= 0 ? uuid : NULL;
        q.label_key = lk;
        q.label_key_len = lklen;
        q.label_value = lv;
        q.before = f->before;
        q.after = f->after;
        q.limit = (size_t)limit;
        q.with_results = f->include != NULL;
        q.max_bytes = cfg->list_results_max_bytes;
        /* No store_sync here, unlike a job's GET: every change a client was answered about is
         * committed before that answer (submit, cancel) or before a GET shows it, so waiting
         * for the writer would only add the commits in flight of changes nobody saw yet (and
         * under load that wait was most of a list's time: p99 1.4 s, bench/load/RESULTS.md). */
        char *arr = NULL, last[UUID_STRING_MAX];
        size_t arr_len = 0, n = 0;
        bool more = false;
        if (store_list_raw(store, &q, &arr, &arr_len, &n, last, &more) < 0)
                return problem_set(p, 500, "",
                                   "the job store cannot be read (see the daemon's log)");
        char *next = NULL;
        size_t next_len = 0;
        if (more) {
                FILE *nf = open_memstream(&next, &next_len);
                bool first = true;

                if (nf) {
                        fputs("/v1/jobs", nf);
                        url_append(nf, &first, "status", f->status);
                        url_append(nf, &first, "benchmark", f->benchmark);
                        url_append(nf, &first, "device", f->device);
                        url_append(nf, &first, "label", f->label);
                        url_append(nf, &first, "since", f->since);
                        url_append(nf, &first, "until", f->until);
                        url_append(nf, &first, "after", f->after);
                        url_append(nf, &first, "limit", f->limit);
                        url_append(nf, &first, "include", f->include);
                        url_append(nf, &first, "before", last);
                        if (fclose(nf) != 0) {
                                free(next);
                                next = NULL;
                        }
                }
        }
        /* {"jobs":[...],"next":...}: the keys in json_dump_compact's (sorted) order, so the
         * page reads exactly as a dumped object would. */
        char *page = NULL;
        size_t page_len = 0;
        FILE *pf = (!more || next) ? open_memstream(&page, &page_len) : NULL;
        if (pf) {
                fputs("{\"jobs\":", pf);
                fwrite(arr, 1, arr_len, pf);
                fputs(",\"next\":", pf);
                /* The link holds only percent-encoded query values: no quote, no backslash. */
                if (next)
                        fprintf(pf, "\"%s\"", next);
                else
                        fputs("null", pf);
                fputc('}', pf);
                if (fclose(pf) != 0) {
                        free(page);
                        page = NULL;
                }
        }
        free(arr);
        if (!page) {
                free(next);
                return problem_set(p, 500, NULL, "out of memory building the page");
        }
        ret_page->body = page;
        ret_page->len = page_len;
        ret_page->next = next;
        ret_page->count = n;
        return 0;
}

size_t jobs_queued_on_locked(size_t dev)
{
        return queues && (dev < devices_count() || is_node(dev)) ? queue_len(&queues[dev]) : 0;
}

/* Parts queued on every device and the node: the queues are the only record, so nothing can
 * drift. */
static size_t queued_total(void)
{
        size_t n = have_node() ? jobs_queued_on_locked(node_index()) : 0;
        for (size_t i = 0; i < devices_count(); i++)
                n += jobs_queued_on_locked(i);
        return n;
}
