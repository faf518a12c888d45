/* Jobs: the in-memory index (sorted by id, which is submission order), per-device queues
 * (priority, then FIFO), state transitions and their persistence, cancellation, recovery at
 * start, retention and health baselines. Submissions are validated by spec.c. The document each job
 * is stored as is the truth; struct job caches what the queue and filters need. Every change
 * happens under core_lock and is written to the store before the lock is released, so what a client
 * reads is always what is on disk. */
#include "jobs.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const struct umd_config *cfg;
static struct store *store;
static struct supervisor *sup;
static bool quiescing;
static struct job **jobs; /* ascending id */
static size_t n_jobs, cap_jobs;
static struct queue *queues; /* one per device */

static size_t queued_total(void);

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

/* store_put logs its own failure; the job then lives on in memory only until the next
 * successful write. */
static int job_persist(struct job *j)
{
        return store_put(store, j->doc);
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

static void try_dispatch(size_t dev)
{
        struct device *d = devices_get(dev);
        int contended;

        if (!sup || quiescing || !d || d->running_jobs > 0 ||
            (d->wstate != WORKER_IDLE && d->wstate != WORKER_COLD))
                return;
        const struct queue_entry *e = dispatchable(d, dev, &contended);
        if (!e)
                return;
        struct job *best = e->job;
        size_t best_part = e->part;

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
}

/* ---- retention ---- */

static void retention_apply(void)
{
        size_t finished = 0;
        uint64_t now = now_realtime_ms();
        uint64_t max_age = (uint64_t)cfg->retention_days * 86400000ull;

        for (size_t i = 0; i < n_jobs; i++)
                if (pstate_final(jobs[i]->st))
                        finished++;
        for (size_t i = 0; i < n_jobs;) {
                struct job *j = jobs[i];
                bool old = cfg->retention_days > 0 && j->finished_ms > 0 && now > j->finished_ms &&
                           now - j->finished_ms > max_age;
                if (pstate_final(j->st) && (finished > cfg->max_jobs || old)) {
                        int r = store_delete(store, j->id);
                        if (r < 0 && r != -ENOENT) {
                                log_warning("retention: cannot delete job %s: %s", j->id,
                                            strerror(-r));
                                i++;
                                continue;
                        }
                        jobs_remove_at(i);
                        finished--;
                        continue;
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

        for (size_t k = n_jobs; past && vals && k-- > 0 && runs < max;) {
                struct job *o = jobs[k];
                if (o == self || strcmp(job_benchmark(o), "health") != 0)
                        continue;
                for (size_t i = 0; i < o->n_parts && runs < max; i++) {
                        json_t *p = part_doc(o, i);
                        const char *v =
                            json_string_value(json_object_get(part_verdict(p), "verdict"));
                        if (o->parts[i].st == P_SUCCEEDED && v && strcmp(v, "pass") == 0 &&
                            strcasecmp(json_string_value(json_object_get(p, "uuid")), uuid) == 0)
                                past[runs++] =
                                    json_object_get(json_object_get(p, "result"), "measurements");
                }
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

/* Judges a canonical health part. A first "fail" is not trusted alone: the part goes back to
 * the queue to run once more, and only the second run's verdict counts (returns true then). */
static bool health_judge(struct job *j, size_t i, struct device *d, const json_t *result)
{
        size_t runs = 0;
        char ts[40];
        _cleanup_json_ json_t *baseline = health_baseline(d->uuid, j, &runs);
        _cleanup_json_ json_t *pcie = health_link(d, result);
        struct health_replays rp = {.now = d->gpu.known ? d->gpu.replay_counter : -1,
                                    .before = verdict_replays(d->last_verdict)};
        json_t *v = health_verdict(cfg, result, pcie, baseline, runs, &rp);

        if (!v)
                return false;
        json_object_set(v, "baseline", baseline);
        json_object_set(v, "pcie", pcie);
        json_object_set_new(v, "job", json_string(j->id));
        json_object_set_new(v, "uuid", json_string(d->uuid));
        json_object_set_new(v, "time",
                            json_string(format_rfc3339_ms(now_realtime_ms(), ts, sizeof(ts))));
        if (rp.now >= 0)
                json_object_set_new(v, "pcie_replay_counter", json_integer(rp.now));
        if (streq_ptr(json_string_value(json_object_get(v, "verdict")), "fail") &&
            j->parts[i].attempts < 2) {
                json_t *p = part_doc(j, i);

                json_object_set_new(p, "first_attempt",
                                    json_pack("{s:o, s:O}", "verdict", v, "result", result));
                j->parts[i].st = P_QUEUED;
                json_object_set_new(p, "state", json_string("queued"));
                json_object_set_new(p, "waiting",
                                    json_string("re-running a failed health check once before "
                                                "the GPU is marked fail"));
                if (enqueue(j, i) < 0) {
                        job_set_part(j, i, P_FAILED, NULL, "out of memory while re-queueing");
                        return false;
                }
                log_info("device %zu (%s): health check failed; running it once more", d->index,
                         d->uuid);
                return true;
        }
        json_object_set(part_doc(j, i), "verdict", v);
        json_decref(d->last_verdict);
        d->last_verdict = v;
        d->last_check_ms = now_realtime_ms();
        log_info("device %zu (%s): health %s", d->index, d->uuid,
                 json_string_value(json_object_get(v, "verdict")));
        return false;
}

/* After recovery: each device's newest verdict in the store. */
static void health_restore_last(void)
{
        for (size_t k = n_jobs; k-- > 0;)
                for (size_t i = 0; i < jobs[k]->n_parts; i++) {
                        json_t *v = part_verdict(part_doc(jobs[k], i));
                        struct device *d = devices_get((size_t)jobs[k]->parts[i].device);
                        if (v && jobs[k]->parts[i].device >= 0 && d && !d->last_verdict) {
                                d->last_verdict = json_incref(v);
                                d->last_check_ms = (uint64_t)json_integer_value(
                                    json_object_get(jobs[k]->doc, "finished_ms"));
                        }
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
out:
        if (d) {
                d->running_jobs = 0;
                d->contended_by = 0;
        }
        try_dispatch(dev);
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
                        if (j->parts[i].device == (ssize_t)dev && j->parts[i].st == P_RUNNING &&
                            sup)
                                supervisor_cancel(sup, dev, j->id);
        }
        if (sup)
                supervisor_retire(sup, dev);
        try_dispatch(dev); /* marks the queued head as waiting */
}

size_t jobs_health_due_locked(size_t *ret_devs, size_t max)
{
        uint64_t now = now_realtime_ms(), every = (uint64_t)cfg->health_interval_s * 1000;
        size_t n = 0;

        if (every == 0 || !sup || quiescing)
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
        *ret_queued = queued_total();
        *ret_running = running;
        *ret_total = n_jobs;
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
                j->parts[i].device = devices_lookup_uuid(uuid);
                j->parts[i].st = (enum pstate)ps;
        }
        return j;
}

static int recover_one(json_t *doc, void *userdata)
{
        unsigned *changed = userdata;
        struct job *j = job_from_doc(doc);
        bool dirty = false;

        if (!j) {
                log_warning("store: job %s has an unexpected shape; ignored",
                            json_string_value(json_object_get(doc, "id")) ?: "?");
                return 0;
        }
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
        unsigned corrupt = 0, changed = 0;
        int r;

        cfg = c;
        store = s;
        queues = calloc(devices_count() + 1, sizeof(*queues));
        if (!queues)
                return log_error_errno(ENOMEM, "out of memory");
        r = store_recover(s, recover_one, &changed, &corrupt);
        if (r < 0)
                return log_error_errno(r, "cannot recover jobs from the store: %m");
        retention_apply();
        health_restore_last();
        log_info("store: %zu jobs (%zu parts queued), %u interrupted or failed at recovery, %u "
                 "corrupt files set aside",
                 n_jobs, queued_total(), changed, corrupt);
        return 0;
}

/* ---- submission ---- */

/* A copy for a handler to serialise after core_lock is released. Only what jobs.c changes in
 * place (the document and its part objects) is copied; everything below them (params, labels,
 * results) is never modified once set, so it is shared (jansson's refcounts are atomic). This
 * keeps GET and list cheap: results can be large. */
static json_t *job_copy(const json_t *doc, bool with_results)
{
        json_t *j = json_copy((json_t *)doc), *parts = json_array();
        size_t i;
        json_t *p;

        if (!j || !parts) {
                json_decref(j);
                json_decref(parts);
                return NULL;
        }
        json_object_del(j, "request");
        json_object_del(j, "created_ms");
        json_object_del(j, "finished_ms");
        json_array_foreach(json_object_get(doc, "parts"), i, p)
        {
                json_t *c = json_copy(p);
                if (c && !with_results)
                        json_object_del(c, "result");
                json_array_append_new(parts, c);
        }
        json_object_set_new(j, "parts", parts);
        return j;
}

/* What clients see: the stored document less the bookkeeping only umd needs. */
static json_t *job_public(const json_t *doc)
{
        return job_copy(doc, true);
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
        const size_t *devs = spec->devs, n = spec->n_devs;
        json_t *params = spec->params;
        int prio = spec->prio;
        unsigned timeout_s = spec->timeout_s;
        struct job *j = calloc(1, sizeof(*j));
        bool fake = false;

        if (!j || !(j->parts = calloc(n, sizeof(*j->parts))) || uuid7_generate(j->id) < 0) {
                job_free(j);
                return NULL;
        }
        j->prio = prio;
        j->n_parts = n;
        json_t *parts = json_array();
        for (size_t i = 0; i < n; i++) {
                struct device *d = devices_get(devs[i]);
                j->parts[i] = (struct part){.device = (ssize_t)devs[i], .st = P_QUEUED};
                fake = fake || d->fake;
                json_array_append_new(parts, json_pack("{s:I, s:s, s:b, s:s, s:n, s:n, s:n, s:n}",
                                                       "device", (json_int_t)devs[i], "uuid",
                                                       d->uuid, "fake", d->fake, "state", "queued",
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
        if (idem) {
                struct job *prev = idempotent_find(idem, client);
                if (prev) {
                        const char *req = json_string_value(json_object_get(prev->doc, "request"));
                        if (!req || strcmp(req, request) != 0) {
                                r = problem_set(p, 409, "Idempotency-Key",
                                                "this Idempotency-Key was used for job %s with a "
                                                "different body",
                                                prev->id);
                                goto out;
                        }
                        *ret_job = job_public(prev->doc);
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
        if (!j) {
                r = problem_set(p, 500, "", "out of memory");
                goto out;
        }
        if (store_put(store, j->doc) < 0) {
                job_free(j);
                r = problem_set(p, 507, "", "the job could not be stored (see the daemon's log)");
                goto out;
        }
        if (jobs_append(j) < 0) {
                store_delete(store, j->id);
                job_free(j);
                r = problem_set(p, 500, "", "out of memory");
                goto out;
        }
        for (size_t i = 0; i < j->n_parts; i++)
                if (enqueue(j, i) < 0) /* stored but not queued: fail it rather than lose it */
                        job_set_part(j, i, P_FAILED, NULL, "out of memory while queueing");
        log_info("job %s (%s) queued on %zu device(s)", j->id, b->name, j->n_parts);
        for (size_t i = 0; i < spec.n_devs; i++)
                try_dispatch(spec.devs[i]);
        *ret_job = job_public(j->doc);
        r = 0;
out:
        core_unlock();
        spec_done(&spec);
        return r;
}

/* ---- reads and cancel ---- */

static json_t *job_summary(const json_t *doc)
{
        return job_copy(doc, false);
}

int core_job_get(const char *id, json_t **ret_job, struct problem *p)
{
        if (!uuid_is_valid(id))
                return problem_set(p, 400, "id", "'%.64s' is not a job id (a UUID)", id);
        core_lock();
        struct job *j = job_find(id);
        if (j)
                *ret_job = job_public(j->doc);
        core_unlock();
        if (!j)
                return problem_set(p, 404, "id", "no job %s", id);
        return 0;
}

int core_job_cancel(const char *id, const char *client, bool admin, json_t **ret_job,
                    struct problem *p)
{
        int r = 0;

        if (!uuid_is_valid(id))
                return problem_set(p, 400, "id", "'%.64s' is not a job id (a UUID)", id);
        core_lock();
        struct job *j = job_find(id);
        if (!j) {
                r = problem_set(p, 404, "id", "no job %s", id);
                goto out;
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
        j->cancel_requested = true;
        json_object_set_new(j->doc, "cancel_requested", json_true());
        for (size_t i = 0; i < j->n_parts; i++) {
                if (j->parts[i].st == P_QUEUED)
                        job_set_part(j, i, P_CANCELLED, NULL, "cancelled before it ran");
                else if (j->parts[i].st == P_RUNNING && sup)
                        supervisor_cancel(sup, (size_t)j->parts[i].device, j->id);
        }
        if (job_update_state(j))
                job_finished(j);
        job_persist(j);
        log_info("job %s: cancel requested (%s)", id, pstate_names[j->st]);
        *ret_job = job_public(j->doc);
out:
        core_unlock();
        return r;
}

static bool job_matches(const struct job *j, int status, const char *benchmark, ssize_t dev,
                        const char *lk, size_t lklen, const char *lv)
{
        if (status >= 0 && (int)j->st != status)
                return false;
        if (benchmark && strcmp(job_benchmark(j), benchmark) != 0)
                return false;
        if (dev >= 0) {
                bool on = false;
                for (size_t i = 0; i < j->n_parts; i++)
                        on = on || j->parts[i].device == dev;
                if (!on)
                        return false;
        }
        if (lk) {
                json_t *labels = json_object_get(j->doc, "labels");
                const char *k;
                json_t *v;
                bool hit = false;
                json_object_foreach(labels, k, v)
                {
                        if (strlen(k) == lklen && strncmp(k, lk, lklen) == 0 &&
                            strcmp(json_string_value(v), lv) == 0)
                                hit = true;
                }
                if (!hit)
                        return false;
        }
        return true;
}

static void url_append(char *buf, size_t len, const char *name, const char *v)
{
        size_t at = strlen(buf);
        static const char hex[] = "0123456789ABCDEF";
        if (!v || at + 1 >= len)
                return;
        at += (size_t)snprintf(buf + at, len - at, "%s%s=", strchr(buf, '?') ? "&" : "?", name);
        for (const unsigned char *c = (const unsigned char *)v; *c && at + 4 < len; c++) {
                if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                    (*c >= '0' && *c <= '9') || strchr("-_.~", *c))
                        buf[at++] = (char)*c;
                else {
                        buf[at++] = '%';
                        buf[at++] = hex[*c >> 4];
                        buf[at++] = hex[*c & 15];
                }
        }
        buf[at < len ? at : len - 1] = 0;
}

int core_job_list(const struct job_filter *f, json_t **ret_page, struct problem *p)
{
        int status = -1;
        ssize_t dev = -1;
        uint64_t limit = 50;
        const char *lk = NULL, *lv = NULL;
        size_t lklen = 0;

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

        core_lock();
        if (f->device && (dev = devices_lookup(f->device)) < 0) {
                core_unlock();
                return problem_set(p, 400, "device", "unknown device '%.64s'", f->device);
        }
        json_t *arr = json_array();
        const char *last = NULL;
        bool more = false;
        for (size_t k = n_jobs; k-- > 0;) {
                struct job *j = jobs[k];
                if (f->before && strcasecmp(j->id, f->before) >= 0)
                        continue;
                if (!job_matches(j, status, f->benchmark, dev, lk, lklen, lv))
                        continue;
                if (json_array_size(arr) == limit) {
                        more = true;
                        break;
                }
                json_array_append_new(arr, job_summary(j->doc));
                last = j->id;
        }
        char next[1024] = "/v1/jobs";
        if (more) {
                url_append(next, sizeof(next), "status", f->status);
                url_append(next, sizeof(next), "benchmark", f->benchmark);
                url_append(next, sizeof(next), "device", f->device);
                url_append(next, sizeof(next), "label", f->label);
                url_append(next, sizeof(next), "limit", f->limit);
                url_append(next, sizeof(next), "before", last);
        }
        core_unlock();
        *ret_page =
            json_pack("{s:o, s:o}", "jobs", arr, "next", more ? json_string(next) : json_null());
        return 0;
}

size_t jobs_queued_on_locked(size_t dev)
{
        return queues && dev < devices_count() ? queue_len(&queues[dev]) : 0;
}

/* Parts queued on every device: the queues are the only record, so nothing can drift. */
static size_t queued_total(void)
{
        size_t n = 0;
        for (size_t i = 0; i < devices_count(); i++)
                n += jobs_queued_on_locked(i);
        return n;
}
