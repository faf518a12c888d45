/* The jobs object's index (struct jobs, made by jobs.c's jobs_init): the in-memory index of the
 * jobs scheduling needs (queued and running ones, and finished ones until their final write is
 * committed; sorted by id, which is submission order, with what submits look up in it kept beside
 * it: a hash of the idempotency keys and each client's count of open jobs), the per-device queues,
 * the state machine of jobs and their parts (job_state.c derives a job's state from its parts'),
 * the forms a job's document is held in, and the generation waiters watch. The document each job is
 * stored as is the truth; struct job caches what the queue needs. History (finished jobs) lives
 * only in the store and is read from it. Every change happens under core_lock and is queued to
 * the store's writer before the lock is released (so writes keep their order): when and what is
 * written is job_persist.c's, the only caller of the store's writes. Who changes jobs:
 * job_dispatch.c (running them), job_submit.c and job_cancel.c, job_verdict.c (canonical health
 * checks), job_recover.c (at start); job_query.c reads them. */
#include "jobs.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "catalog.h"
#include "config.h"
#include "core.h"
#include "daemon.h"
#include "devices.h"
#include "job_doc.h"
#include "job_internal.h"
#include "job_persist.h"
#include "job_queue.h"
#include "job_spec.h"
#include "jsonutil.h"
#include "lock.h"
#include "log.h"
#include "metrics.h"
#include "store.h"
#include "util.h"
#include "uuid.h"

/* "2026-12-08T01:30:00.000Z" and its NUL, with room to spare. */
#define RFC3339_MS_MAX 40

void job_changed(struct jobs *js, const struct job *j)
{
        atomic_fetch_add(&js->generation, 1);
        if (js->listener)
                js->listener(j->id, js->listener_data);
}

uint64_t jobs_generation(struct jobs *js)
{
        return atomic_load(&js->generation);
}

void jobs_set_listener(struct jobs *js, core_job_listener fn, void *userdata)
{
        core_lock();
        js->listener = fn;
        js->listener_data = userdata;
        core_unlock();
}

size_t jobs_running_locked(struct jobs *js)
{
        assert_locked();
        size_t running = js->node_running;

        for (size_t i = 0; i < devices_count(); i++)
                running += devices_get(i)->running_jobs;
        return running;
}

void jobs_publish_locked(struct jobs *js)
{
        assert_locked();
        for (size_t i = 0; i < devices_count(); i++)
                metrics_observe_queue(js->metrics, i, jobs_queued_on_locked(js, i));
        metrics_observe_running(js->metrics, jobs_running_locked(js));
        if (have_node())
                metrics_observe_node(
                    js->metrics, device_state_names[device_state_of_worker(js->node_wstate)],
                    js->node_wstate == WORKER_IDLE || js->node_wstate == WORKER_BUSY,
                    json_string_value(json_object_get(js->node_last_verdict, "verdict")));
}

/* Every change to jobs happens under the lock, so telling metrics as it is released keeps what
 * /metrics shows as current as what the API shows. */
void jobs_unlock(struct jobs *js)
{
        /* Every change ends here (and a look at each GPU comes every busy_poll_ms), so a
         * pending change waits JOB_PERSIST_DELAY_MS, or little more, for its write. */
        job_persist_pending_locked(js, false);
        jobs_publish_locked(js);
        core_unlock();
}

void job_free(struct job *j)
{
        if (!j)
                return;
        job_persist_release(j);
        json_decref(j->doc);
        free(j->text);
        free(j->client);
        free(j->idempotency_key);
        free(j->parts);
        free(j);
}

/* Keys a waiting job's bytes leave out because struct job has their values (id, and a queued
 * job's state and priority): 100 bytes less a job is what brings it under a kilobyte. Each is
 * left out only when the document says exactly what is put back, so nothing changes. */
enum {
        STRIPPED_ID = 1 << 0,
        STRIPPED_STATE = 1 << 1,
        STRIPPED_PRIORITY = 1 << 2,
};

/* The tree of a compact job's bytes, with the keys they leave out put back (after the others:
 * every dump that leaves umd sorts the keys, so the order is not seen). NULL: out of memory. */
static json_t *job_parse_text(const struct job *j, json_error_t *e)
{
        /* Its own dump, so it parses; a real's 17 digits read back as the same double. */
        json_t *doc = json_loadb(j->text, j->text_len, 0, e);

        if (doc &&
            (((j->stripped & STRIPPED_ID) &&
              json_object_set_new(doc, "id", json_string(j->id)) < 0) ||
             ((j->stripped & STRIPPED_STATE) &&
              json_object_set_new(doc, "state", json_string(job_state_names[JOB_QUEUED])) < 0) ||
             ((j->stripped & STRIPPED_PRIORITY) &&
              json_object_set_new(doc, "priority", json_string(spec_priority_name(j->prio))) <
                  0))) {
                json_decref(doc);
                doc = NULL;
        }
        return doc;
}

json_t *job_doc(struct job *j)
{
        if (!j->doc && j->stored) {
                int r = job_doc_get_internal(j->store, j->id, &j->doc);

                if (r < 0) {
                        log_error_errno(r, "job %s: its document cannot be read back: %m", j->id);
                        return NULL;
                }
                j->stored = false;
        } else if (!j->doc && j->text) {
                json_error_t e = {.text = "out of memory"};

                j->doc = job_parse_text(j, &e);
                if (!j->doc) {
                        log_error("job %s: its document cannot be made again: %s", j->id, e.text);
                        return NULL;
                }
                free(j->text);
                j->text = NULL;
                j->text_len = 0;
                j->stripped = 0;
        }
        return j->doc;
}

void jobs_read_ahead(struct jobs *js, size_t q)
{
        const struct queue_entry *e = queue_peek(&js->queues[q]);
        const struct job *head = e ? e->job : NULL;
        size_t max = js->cfg->queue_trees_per_device, n = 0;

        assert_locked();
        if (!head || head->doc || !head->stored || head->unchecked)
                return;
        if (max > queue_len(&js->queues[q]))
                max = queue_len(&js->queues[q]);
        if (max < 2)
                return; /* only the head: job_doc reads it alone */
        _cleanup_free_ const char **ids = calloc(max, sizeof(*ids));
        _cleanup_free_ struct job **jobs = calloc(max, sizeof(*jobs));
        _cleanup_free_ json_t **trees = calloc(max, sizeof(*trees));
        if (!ids || !jobs || !trees)
                return;
        for (size_t i = 0; i < max && (e = queue_at(&js->queues[q], i)); i++) {
                struct job *j = e->job;

                /* One recovered and not yet checked is read by job_checked, as the disk's. */
                if (j->doc || !j->stored || j->unchecked)
                        continue;
                ids[n] = j->id;
                jobs[n++] = j;
        }
        if (job_doc_get_internal_many(js->store, ids, n, trees) < 0)
                return; /* logged; job_doc tries the head again alone */
        for (size_t i = 0; i < n; i++) {
                if (!trees[i])
                        continue; /* logged; its job_doc tries again */
                jobs[i]->doc = trees[i];
                jobs[i]->stored = false;
        }
}

void job_compact(struct job *j)
{
        /* Only a job nothing is about to change: queued and committed (submit waits for its
         * commit with the tree), not asked to cancel, no final write pending. */
        if (!j->doc || j->st != JOB_QUEUED || !job_persist_settled(j) || j->cancel_requested)
                return;
        /* Nor one recovered unchecked: job_checked reads its document as the disk's, whole. */
        if (j->unchecked)
                return;
        for (size_t i = 0; i < j->n_parts; i++)
                if (j->parts[i].st != JOB_QUEUED)
                        return;
        /* Written once, committed (job_persist_settled): the store's row is this tree. */
        if (!job_persist_rewritten(j)) {
                json_decref(j->doc);
                j->doc = NULL;
                j->stored = true;
                return;
        }
        /* The keys struct job can put back leave a shallow copy, so that a failure below
         * changes nothing. */
        _cleanup_json_ json_t *top = json_copy(j->doc);
        unsigned stripped = 0;
        if (!top)
                return; /* out of memory: it keeps its tree, which is as true */
        if (streq_ptr(json_string_value(json_object_get(top, "id")), j->id) &&
            json_object_del(top, "id") == 0)
                stripped |= STRIPPED_ID;
        if (streq_ptr(json_string_value(json_object_get(top, "state")),
                      job_state_names[JOB_QUEUED]) &&
            json_object_del(top, "state") == 0)
                stripped |= STRIPPED_STATE;
        if (streq_ptr(json_string_value(json_object_get(top, "priority")),
                      spec_priority_name(j->prio)) &&
            json_object_del(top, "priority") == 0)
                stripped |= STRIPPED_PRIORITY;
        /* Not json_dump_compact: sorting the keys would cost a third of the dump. */
        size_t len;
        char *text = json_dump_unsorted(top, &len);
        if (!text)
                return;
        json_decref(j->doc); /* the store's writer holds its own references to what it writes */
        j->doc = NULL;
        j->text = text;
        j->text_len = len;
        j->stripped = stripped;
}

int job_cache_keys(struct job *j, const char *client, const char *idempotency_key)
{
        char *c = NULL, *k = NULL;

        if ((client && !(c = strdup(client))) ||
            (idempotency_key && !(k = strdup(idempotency_key)))) {
                free(c);
                return -ENOMEM;
        }
        free(j->client);
        free(j->idempotency_key);
        j->client = c;
        j->idempotency_key = k;
        return 0;
}

json_t *job_public_of(struct job *j)
{
        if (!j->doc && j->stored) {
                /* The row's document is the public one. */
                json_t *doc = NULL;
                int r = job_doc_get(j->store, j->id, &doc);

                if (r < 0)
                        log_error_errno(r, "job %s: its document cannot be read back: %m", j->id);
                return doc;
        }
        if (j->doc || !j->text)
                return job_public(j->doc);
        /* A read leaves a waiting job compact: the tree is made for the copy and dropped (the
         * copy keeps what it shares of it). */
        _cleanup_json_ json_t *doc = job_parse_text(j, NULL);
        return doc ? job_public(doc) : NULL;
}

json_t *job_now_json(const struct jobs *js)
{
        char buf[RFC3339_MS_MAX];
        return json_string_nocheck(format_rfc3339_ms(jobs_realtime_ms(js), buf, sizeof(buf)));
}

json_t *job_part_doc(struct job *j, size_t i)
{
        return json_array_get(json_object_get(job_doc(j), "parts"), i);
}

const char *job_benchmark(struct job *j)
{
        return json_string_value(json_object_get(job_doc(j), "benchmark"));
}

/* The job's state follows from its parts' (job_state.c). */
enum job_state job_derive_state(const struct job *j)
{
        size_t count[JOB_STATE_MAX] = {0};

        for (size_t i = 0; i < j->n_parts; i++)
                count[j->parts[i].st]++;
        return job_state_from_counts(count, j->cancel_requested);
}

void job_set_part(struct jobs *js, struct job *j, size_t i, enum job_state st, json_t *result,
                  const char *error)
{
        json_t *p = job_part_doc(j, i);
        enum job_state old = j->parts[i].st;

        if (old == JOB_QUEUED && st != JOB_QUEUED && j->parts[i].device >= 0)
                queue_remove(&js->queues[j->parts[i].device], j, i);
        j->parts[i].st = st;
        job_persist_part_changed(j, i);
        /* Constant keys and state names: set without jansson's UTF-8 check of each (a part's
         * start and end, every job). The error's text is checked: it may be a worker's. */
        json_object_set_new_nocheck(p, "state", json_string_nocheck(job_state_names[st]));
        if (st == JOB_RUNNING)
                json_object_set_new_nocheck(p, "started", job_now_json(js));
        if (job_state_final(st)) {
                json_object_set_new_nocheck(p, "finished", job_now_json(js));
                if (result)
                        json_object_set_nocheck(p, "result", result);
                json_object_set_new_nocheck(p, "error", error ? json_string(error) : json_null());
        }
}

/* Recompute the job's state and times after its parts changed; true when it just finished. */
bool job_update_state(struct jobs *js, struct job *j)
{
        enum job_state old = j->st, st = job_derive_state(j);

        if (st == old)
                return false;
        job_state_set(js, j, st);
        job_changed(js, j);
        json_t *doc = job_doc(j);
        json_object_set_new_nocheck(doc, "state", json_string_nocheck(job_state_names[st]));
        if (st == JOB_RUNNING && json_is_null(json_object_get(doc, "started")))
                json_object_set_new_nocheck(doc, "started", job_now_json(js));
        if (!job_state_final(st))
                return false;
        j->finished_ms = jobs_realtime_ms(js);
        json_object_set_new_nocheck(doc, "finished", job_now_json(js));
        json_object_set_new_nocheck(doc, "finished_ms", json_integer((json_int_t)j->finished_ms));
        return true;
}

void job_finished(struct jobs *js, struct job *j)
{
        uint64_t start = (uint64_t)json_integer_value(json_object_get(job_doc(j), "created_ms"));
        double dur = j->finished_ms > start ? (double)(j->finished_ms - start) / 1000.0 : 0;
        metrics_job_finished(js->metrics, job_benchmark(j), job_state_names[j->st], dur);
}

ssize_t job_index(struct jobs *js, const char *id)
{
        size_t lo = 0, hi = js->n_jobs;
        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                int c = strcasecmp(js->jobs[mid]->id, id);
                if (c == 0)
                        return (ssize_t)mid;
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return -1;
}

struct job *job_find(struct jobs *js, const char *id)
{
        ssize_t i = job_index(js, id);
        return i < 0 ? NULL : js->jobs[i];
}

static size_t key_hash(const char *key, const char *client)
{
        /* 0xff is no byte of UTF-8: key and client stay apart. */
        uint64_t h = fnv1a_str(FNV1A_INIT, key);

        return (size_t)fnv1a_str((h ^ 0xff) * FNV1A_PRIME, client ? client : "");
}

static struct job **keyed_bucket(struct jobs *js, const char *key, const char *client)
{
        return &js->keyed[key_hash(key, client) & (js->n_keyed_buckets - 1)];
}

struct job *jobs_find_keyed(struct jobs *js, const char *key, const char *client)
{
        if (js->n_keyed == 0)
                return NULL;
        for (struct job *j = *keyed_bucket(js, key, client); j; j = j->key_next)
                if (strcmp(j->idempotency_key, key) == 0 && streq_ptr(j->client, client))
                        return j;
        return NULL;
}

/* Twice the buckets; left as it is without memory (the chains grow longer, nothing is lost). */
static void keyed_grow(struct jobs *js)
{
        size_t n = js->n_keyed_buckets ? js->n_keyed_buckets * 2 : 64;
        struct job **old = js->keyed, **b = calloc(n, sizeof(*b));
        size_t n_old = js->n_keyed_buckets;

        if (!b)
                return;
        js->keyed = b;
        js->n_keyed_buckets = n;
        for (size_t i = 0; i < n_old; i++)
                for (struct job *j = old[i], *next; j; j = next) {
                        struct job **at = keyed_bucket(js, j->idempotency_key, j->client);

                        next = j->key_next;
                        j->key_next = *at;
                        *at = j;
                }
        free(old);
}

/* 0, or -ENOMEM with j not added (no bucket could be had at all). */
static int keyed_add(struct jobs *js, struct job *j)
{
        if (!j->idempotency_key)
                return 0;
        if (js->n_keyed >= js->n_keyed_buckets)
                keyed_grow(js);
        if (js->n_keyed_buckets == 0)
                return -ENOMEM;
        struct job **at = keyed_bucket(js, j->idempotency_key, j->client);
        j->key_next = *at;
        *at = j;
        js->n_keyed++;
        return 0;
}

static void keyed_remove(struct jobs *js, struct job *j)
{
        if (!j->idempotency_key || js->n_keyed_buckets == 0)
                return;
        for (struct job **at = keyed_bucket(js, j->idempotency_key, j->client); *at;
             at = &(*at)->key_next)
                if (*at == j) {
                        *at = j->key_next;
                        j->key_next = NULL;
                        js->n_keyed--;
                        return;
                }
}

static struct client_open *client_find(const struct jobs *js, const char *client)
{
        for (size_t i = 0; i < js->n_clients; i++)
                if (strcmp(js->clients[i].client, client) == 0)
                        return &js->clients[i];
        return NULL;
}

size_t jobs_open_of(const struct jobs *js, const char *client)
{
        const struct client_open *c = client ? client_find(js, client) : NULL;

        return c ? c->open : 0;
}

/* j's client listed (before j enters the index, so that counting it cannot fail). 0 or
 * -ENOMEM. */
static int client_listed(struct jobs *js, const struct job *j)
{
        struct client_open *c;
        char *name;

        if (!j->client || client_find(js, j->client))
                return 0;
        c = realloc(js->clients, (js->n_clients + 1) * sizeof(*c));
        if (!c)
                return -ENOMEM;
        js->clients = c;
        if (!(name = strdup(j->client)))
                return -ENOMEM;
        js->clients[js->n_clients++] = (struct client_open){.client = name};
        return 0;
}

/* An indexed job of a client became open (+1) or stopped being so (-1). */
static void client_count(struct jobs *js, const struct job *j, int delta)
{
        struct client_open *c = j->client ? client_find(js, j->client) : NULL;

        if (!c) /* anonymous: no quota */
                return;
        if (delta < 0 && c->open == 0) { /* cannot happen: a slot never taken is not given back */
                log_error("client %s: its count of open jobs went below 0; kept at 0", c->client);
                return;
        }
        c->open += (size_t)(ssize_t)delta;
}

void job_state_set(struct jobs *js, struct job *j, enum job_state st)
{
        bool was_open = !job_state_final(j->st), open = !job_state_final(st);

        j->st = st;
        if (j->indexed && was_open != open)
                client_count(js, j, open ? 1 : -1);
}

static void clients_free(struct jobs *js)
{
        for (size_t i = 0; i < js->n_clients; i++)
                free(js->clients[i].client);
        free(js->clients);
        js->clients = NULL;
        js->n_clients = 0;
}

/* j leaves the index: no longer counted, hashed or listed there. */
static void index_forget(struct jobs *js, struct job *j)
{
        keyed_remove(js, j);
        if (j->indexed && !job_state_final(j->st))
                client_count(js, j, -1);
        j->indexed = false;
}

/* The allocation js->jobs lies in (NULL before the first append). */
static struct job **jobs_base(const struct jobs *js)
{
        return js->jobs ? js->jobs - js->jobs_skip : NULL;
}

int jobs_append(struct jobs *js, struct job *j)
{
        if (client_listed(js, j) < 0 || keyed_add(js, j) < 0)
                return -ENOMEM;
        if (js->jobs_skip + js->n_jobs == js->cap_jobs) {
                struct job **base = jobs_base(js);

                if (js->jobs_skip > 0 && js->jobs_skip >= js->cap_jobs / 2) {
                        /* Half the slots or more are before the first job: moved back to the
                         * start, once for as many appends as were freed, not grown. */
                        memmove(base, js->jobs, js->n_jobs * sizeof(*base));
                        js->jobs = base;
                        js->jobs_skip = 0;
                } else {
                        size_t nc = js->cap_jobs ? js->cap_jobs * 2 : 256;
                        struct job **n = realloc(base, nc * sizeof(*n));
                        if (!n) {
                                keyed_remove(js, j);
                                return -ENOMEM;
                        }
                        js->jobs = n + js->jobs_skip;
                        js->cap_jobs = nc;
                }
        }
        j->store = js->store;
        /* ids are time-ordered, so this is almost always the end. */
        size_t at = js->n_jobs;
        while (at > 0 && strcasecmp(js->jobs[at - 1]->id, j->id) > 0)
                at--;
        memmove(&js->jobs[at + 1], &js->jobs[at], (js->n_jobs - at) * sizeof(*js->jobs));
        js->jobs[at] = j;
        js->n_jobs++;
        j->indexed = true;
        if (!job_state_final(j->st))
                client_count(js, j, 1);
        return 0;
}

void jobs_remove(struct jobs *js, struct job *j)
{
        ssize_t k = job_index(js, j->id);

        for (size_t i = 0; i < j->n_parts; i++)
                if (j->parts[i].st == JOB_QUEUED && j->parts[i].device >= 0)
                        queue_remove(&js->queues[j->parts[i].device], j, i);
        if (k >= 0)
                jobs_remove_at(js, (size_t)k);
        else
                job_free(j);
}

void jobs_remove_at(struct jobs *js, size_t i)
{
        job_persist_forget(js, js->jobs[i]);
        index_forget(js, js->jobs[i]);
        job_free(js->jobs[i]);
        if (i < js->n_jobs / 2) { /* the jobs before it are fewer: they move on by one */
                memmove(&js->jobs[1], &js->jobs[0], i * sizeof(*js->jobs));
                js->jobs++;
                js->jobs_skip++;
        } else
                memmove(&js->jobs[i], &js->jobs[i + 1], (js->n_jobs - i - 1) * sizeof(*js->jobs));
        js->n_jobs--;
}

int job_enqueue(struct jobs *js, struct job *j, size_t i)
{
        struct queue_entry e = {.prio = j->prio, .id = j->id, .job = j, .part = i};
        return queue_push(&js->queues[j->parts[i].device], &e);
}

bool job_waits_near_head(struct jobs *js, const struct job *j)
{
        /* Asked right after the push: the part is at most this far from the head. */
        for (size_t i = 0; i < j->n_parts; i++)
                if (j->parts[i].st == JOB_QUEUED && j->parts[i].device >= 0 &&
                    queue_len(&js->queues[j->parts[i].device]) <= js->cfg->queue_trees_per_device)
                        return true;
        return false;
}

static int cmp_size(const void *a, const void *b)
{
        size_t x = *(const size_t *)a, y = *(const size_t *)b;

        return x < y ? -1 : x > y;
}

void jobs_sweep(struct jobs *js, bool (*drop)(struct jobs *js, struct job *j))
{
        size_t w = 0;

        for (size_t i = 0; i < js->n_jobs; i++) {
                struct job *j = js->jobs[i];

                if (drop(js, j)) {
                        index_forget(js, j);
                        job_free(j);
                        continue;
                }
                js->jobs[w++] = j;
        }
        js->n_jobs = w;
}

/* The jobs after the first gap move back, or those before the last move on, whichever are
 * fewer. Finished jobs are mostly the oldest, at the front: under a long queue (half a million
 * jobs in bench/store/run) moving every job after them was a copy of megabytes a prune, under
 * core_lock. */
void jobs_free_at(struct jobs *js, size_t *at, size_t n)
{
        qsort(at, n, sizeof(*at), cmp_size);
        for (size_t k = 0; k < n; k++) {
                index_forget(js, js->jobs[at[k]]);
                job_free(js->jobs[at[k]]);
        }
        if (js->n_jobs - at[0] - n <= at[n - 1] + 1 - n) {
                size_t w = at[0];

                for (size_t k = 0; k < n; k++) {
                        size_t from = at[k] + 1, to = k + 1 < n ? at[k + 1] : js->n_jobs;

                        memmove(&js->jobs[w], &js->jobs[from], (to - from) * sizeof(*js->jobs));
                        w += to - from;
                }
        } else {
                size_t end = at[n - 1]; /* the last slot still to fill */

                for (size_t k = n; k-- > 0;) {
                        size_t from = k > 0 ? at[k - 1] + 1 : 0, len = at[k] - from;

                        memmove(&js->jobs[end + 1 - len], &js->jobs[from], len * sizeof(*js->jobs));
                        end -= len;
                }
                js->jobs += n;
                js->jobs_skip += n;
        }
        js->n_jobs -= n;
}

void jobs_tick(struct jobs *js)
{
        core_lock();
        job_persist_prune(js);
        job_persist_retention(js);
        jobs_unlock(js);
}

/* Every job in the index freed and the index emptied: its array, the idempotency keys' hash
 * and the clients' counts (jobs.c's shutdown, and a half-built js). */
void jobs_index_free(struct jobs *js)
{
        for (size_t k = 0; k < js->n_jobs; k++)
                job_free(js->jobs[k]);
        free(jobs_base(js));
        js->jobs = NULL;
        js->n_jobs = js->cap_jobs = js->jobs_skip = 0;
        free(js->keyed);
        js->keyed = NULL;
        js->n_keyed = js->n_keyed_buckets = 0;
        clients_free(js);
}

/* ---- what clients see ---- */

/* What clients see: the stored document less the bookkeeping only umd needs. */
json_t *job_public(const json_t *doc)
{
        /* A copy to serialise after core_lock is released: only what job_index.c changes in place
         * (the document and its part objects) is copied; results are shared. */
        return job_doc_public_copy(doc, true);
}

size_t jobs_queued_on_locked(struct jobs *js, size_t dev)
{
        assert_locked();
        return js->queues && (dev < devices_count() || is_node(dev)) ? queue_len(&js->queues[dev])
                                                                     : 0;
}

/* Parts queued on every device and the node: the queues are the only record, so nothing can
 * drift. */
size_t jobs_queued_total(struct jobs *js)
{
        size_t n = have_node() ? jobs_queued_on_locked(js, node_index()) : 0;
        for (size_t i = 0; i < devices_count(); i++)
                n += jobs_queued_on_locked(js, i);
        return n;
}
