/* Submitting jobs: idempotency keys, queue capacity and per-client quotas, the new job's
 * document, and answering only once the change is committed (waited for without core_lock, and
 * by the HTTP server without a thread: job_submit_when_done, job_submit_end).
 * Submissions are validated by job_spec.c; a submission that cannot be committed is removed
 * again (job_unsubmit): it never existed. Once committed, a submission is answered with the
 * bytes its write carried, and what follows (the job marked committed, so that it may start)
 * is done by the next holder of core_lock (core_defer), not by a thread waiting for it. The
 * validation and the new document are made before core_lock is taken: they read only what is fixed
 * for the daemon's life (the configuration, the devices' identities), and under a load of submits
 * from many CPUs every thread waited for the lock while another built its tree inside it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "config.h"
#include "core.h"
#include "devices.h"
#include "job_doc.h"
#include "job_internal.h"
#include "job_persist.h"
#include "job_queue.h"
#include "job_spec.h"
#include "jobs.h"
#include "jsonutil.h"
#include "log.h"
#include "store.h"
#include "util.h"
#include "uuid.h"

/* Remove a job whose submission could not be committed: it never existed. */
static void job_unsubmit(struct jobs *js, struct job *j)
{
        jobs_remove(js, j);
}

static int check_capacity(struct jobs *js, const size_t *devs, size_t n, const char *client,
                          struct problem *p)
{
        size_t queued = jobs_queued_total(js);
        int r = 0;

        if (queued + n > js->cfg->queue_capacity)
                r = problem_set(p, 429, "",
                                "the queue is full (%zu parts queued, queue_capacity %u); retry "
                                "later",
                                queued, js->cfg->queue_capacity);
        for (size_t i = 0; r == 0 && i < n; i++) {
                size_t q = jobs_queued_on_locked(js, devs[i]);
                if (q + 1 > js->cfg->queue_capacity_per_device)
                        r = problem_set(p, 429, "devices",
                                        "the queue of device %zu is full (%zu parts, "
                                        "queue_capacity_per_device %u); retry later",
                                        devs[i], q, js->cfg->queue_capacity_per_device);
        }
        if (r == 0 && client && jobs_open_of(js, client) >= js->cfg->jobs_per_token)
                r = problem_set(p, 429, "",
                                "client '%s' has %u jobs queued or running (jobs_per_token); "
                                "retry later",
                                client, js->cfg->jobs_per_token);
        if (r < 0)
                p->retry_after_s = 5; /* queues drain: worth asking again soon */
        return r;
}

/* A member of a new job's tree whose key is a constant: set without jansson's check of the
 * key's UTF-8 and without json_pack's reading of a format (json_pack was a sixth of a submit's
 * instructions in its thread). false when memory ran out, v NULL included; v is taken either way.
 */
static bool put(json_t *o, const char *key, json_t *v)
{
        return v && json_object_set_new_nocheck(o, key, v) == 0;
}

/* A queued part on device dev, its keys in sorted order (the dump finds them so). */
static json_t *part_new(size_t dev, bool fake, const char *uuid)
{
        json_t *p = json_object();

        if (!p || !put(p, "device", json_integer((json_int_t)dev)) ||
            !put(p, "error", json_null()) || !put(p, "fake", json_boolean(fake)) ||
            !put(p, "finished", json_null()) || !put(p, "result", json_null()) ||
            !put(p, "started", json_null()) || !put(p, "state", json_string_nocheck("queued")) ||
            !put(p, "uuid", json_string_nocheck(uuid))) {
                json_decref(p);
                return NULL;
        }
        return p;
}

static struct job *job_new(const struct jobs *js, const json_t *body, const char *request,
                           const struct job_spec *spec, const char *idem, const char *client)
{
        const struct bench_def *b = spec->bench;
        const size_t *devs = spec->devs;
        size_t n = spec->n_devs;
        json_t *params = spec->params;
        int prio = spec->prio;
        unsigned timeout_s = spec->timeout_s;
        struct job *j = calloc(1, sizeof(*j));
        bool fake = false;

        /* One part more than devices: the canonical check's part on the node. The id comes
         * under core_lock (job_submit), so that ids follow the order jobs are queued in. */
        if (!j || !(j->parts = calloc(n + 1, sizeof(*j->parts))) ||
            job_cache_keys(j, client, idem) < 0) {
                job_free(j);
                return NULL;
        }
        j->prio = prio;
        j->n_parts = n;
        json_t *parts = json_array();
        if (b->multi_gpu) { /* one part, on the node worker, taking every GPU (job_spec.c) */
                json_t *uuids = json_array();
                for (size_t i = 0; i < n; i++) {
                        struct device *d = devices_get(devs[i]);
                        fake = fake || d->fake;
                        json_array_append_new(uuids, json_string(d->uuid));
                }
                j->n_parts = 1;
                j->parts[0] = (struct part){.device = (ssize_t)node_index(), .st = JOB_QUEUED};
                json_array_append_new(
                    parts, json_pack("{s:s, s:s, s:o, s:b, s:s, s:n, s:n, s:n, s:n}", "device",
                                     "all", "uuid", "node", "devices", uuids, "fake", fake, "state",
                                     "queued", "started", "finished", "result", "error"));
                n = 0;
        }
        for (size_t i = 0; i < n; i++) {
                struct device *d = devices_get(devs[i]);
                j->parts[i] = (struct part){.device = (ssize_t)devs[i], .st = JOB_QUEUED};
                fake = fake || d->fake;
                json_array_append_new(parts, part_new(devs[i], d->fake, d->uuid));
        }
        /* The canonical check over every GPU of a node with several also checks each pair of
         * GPUs, on the node worker (health.h's health_pair_verdict). */
        if (strcmp(b->name, "health") == 0 && spec->canonical && have_node() &&
            n == devices_count()) {
                json_t *uuids = json_array();
                for (size_t i = 0; i < n; i++)
                        json_array_append_new(uuids, json_string(devices_get(devs[i])->uuid));
                j->parts[n] = (struct part){.device = (ssize_t)node_index(), .st = JOB_QUEUED};
                j->n_parts = n + 1;
                json_array_append_new(
                    parts, json_pack("{s:s, s:s, s:o, s:b, s:s, s:s, s:n, s:n, s:n, s:n}", "device",
                                     "all", "uuid", "node", "devices", uuids, "fake", fake, "check",
                                     "GPU pairs: peer copies against each link", "state", "queued",
                                     "started", "finished", "result", "error"));
        }
        json_t *labels = json_object_get(body, "labels");
        /* Keys in the order the dump sorts them, so that it finds them sorted; the id's place
         * kept for the id taken later (job_take_id). */
        json_t *doc = json_object();
        /* client, idempotency_key and request come from the request: checked as UTF-8. */
        bool ok = doc && put(doc, "benchmark", json_string_nocheck(b->name)) &&
                  put(doc, "client", client ? json_string(client) : json_null()) &&
                  put(doc, "created", job_now_json(js)) &&
                  put(doc, "created_ms", json_integer((json_int_t)jobs_realtime_ms(js))) &&
                  put(doc, "fake", json_boolean(fake)) && put(doc, "finished", json_null()) &&
                  put(doc, "id", json_string_nocheck("")) &&
                  put(doc, "idempotency_key", idem ? json_string(idem) : json_null()) &&
                  put(doc, "kind", json_string_nocheck(b->kind)) &&
                  put(doc, "labels", labels ? json_incref(labels) : json_object()) &&
                  put(doc, "params", json_incref(params)) &&
                  put(doc, "parts", json_incref(parts)) &&
                  put(doc, "priority", json_string_nocheck(spec_priority_name(prio))) &&
                  put(doc, "request", json_string(request)) && put(doc, "started", json_null()) &&
                  put(doc, "state", json_string_nocheck("queued")) &&
                  put(doc, "timeout_s", json_integer((json_int_t)timeout_s));
        json_decref(parts);
        if (!ok) {
                json_decref(doc);
                job_free(j);
                return NULL;
        }
        j->doc = doc;
        if (strcmp(b->name, "health") == 0) {
                const char *tier = json_string_value(json_object_get(params, "tier"));
                json_object_set_new(j->doc, "canonical", json_boolean(spec->canonical));
                json_object_set_new(j->doc, "tier", json_string(tier ? tier : "quick"));
        }
        if (json_is_string(json_object_get(body, "busy_policy")))
                json_object_set(j->doc, "busy_policy", json_object_get(body, "busy_policy"));
        /* The node's spare slot given back when unused: the job may wait a long time. */
        struct part *fit = realloc(j->parts, j->n_parts * sizeof(*j->parts));
        if (fit)
                j->parts = fit;
        return j;
}

/* The job's id, taken now, in its document. 0 or -ENOMEM. */
static int job_take_id(struct job *j)
{
        json_t *id;

        if (uuid7_generate(j->id) < 0 || !(id = json_string(j->id)))
                return -ENOMEM;
        return json_object_set_new(j->doc, "id", id) < 0 ? -ENOMEM : 0;
}

/* The new job's first write, made before core_lock while its tree is this thread's alone, under
 * an id of its own that job_submit's job_persist_submit replaces with the one taken in queue
 * order. 0, or -errno (logged). */
static int job_prepare_write(struct job *j, struct job_doc_new **ret)
{
        int r = job_take_id(j);

        if (r < 0)
                return log_error_errno(r, "Cannot make a new job's write: %m");
        return job_persist_prepare_new(j, ret);
}

/* Whether j's document is still the one its submission's write carried. Every later change of
 * a document marks it rewritten (job_persist, job_persist_soon, a cancel), except a part failed
 * while queueing, which leaves the part not queued: job_compact rests on the same rules. */
static bool unchanged_since_submission(const struct job *j)
{
        if (job_persist_rewritten(j) || j->st != JOB_QUEUED || j->cancel_requested)
                return false;
        for (size_t i = 0; i < j->n_parts; i++)
                if (j->parts[i].st != JOB_QUEUED)
                        return false;
        return true;
}

/* What the answer to a new job shows: the bytes its submission's write carried (kept, which this
 * takes) when nothing changed the job since, else its document. */
static void submitted_answer(struct job *j, char **kept, size_t kept_len,
                             struct core_submitted *ret)
{
        if (ret->bytes_ok && *kept && unchanged_since_submission(j)) {
                ret->body = *kept;
                ret->body_len = kept_len;
                *kept = NULL;
        } else
                ret->job = job_public_of(j);
        snprintf(ret->id, sizeof(ret->id), "%s", j->id);
}

/* The rest of a submission once its commit is in (job_submit), done by whoever next holds
 * core_lock (core_defer): the job marked committed (it may start from then on), started where a
 * GPU is idle, its tree given up while it waits. */
struct commit_note {
        struct core_deferred d; /* first: run gets it back */
        struct jobs *js;
        char id[JOB_ID_MAX];
        const char *benchmark; /* the catalog's, which lives as long as umd */
        size_t n_devs, devs[SPEC_MAX_DEVICES];
};

static void committed_locked(struct jobs *js, struct job *j, const char *benchmark)
{
        assert_locked();
        job_persist_set_committed(j);
        job_changed(js, j);
        if (job_update_state(js, j)) { /* a part failed while queueing */
                job_finished(js, j);
                job_persist(js, j);
        }
        log_info("job %s (%s) queued on %zu device(s)", j->id, benchmark, j->n_parts);
}

static void start_committed_locked(struct jobs *js, struct job *j, const size_t *devs,
                                   size_t n_devs)
{
        assert_locked();
        for (size_t i = 0; i < n_devs; i++)
                job_dispatch_try(js, devs[i]);
        if (have_node())
                job_dispatch_try_node(js);
        /* Still waiting (a queue's head may have run at once): its bytes are enough, unless it
         * is about to run, when giving the tree up would only make the dispatch read it back. */
        if (!job_waits_near_head(js, j))
                job_compact(j);
}

static void commit_note_run(struct core_deferred *d)
{
        struct commit_note *n = (struct commit_note *)d;
        struct job *j = job_find(n->js, n->id);

        /* Gone: cancelled and its cancel committed meanwhile (prune_finished freed it). */
        if (j && !job_persist_committed(j)) {
                committed_locked(n->js, j, n->benchmark);
                start_committed_locked(n->js, j, n->devs, n->n_devs);
                job_persist_pending_locked(n->js, false);
                jobs_publish_locked(n->js);
        }
        free(n);
}

/* What a submission needs once its write is queued: job_submit's wait for the commit, and what
 * follows it (submit_end). */
struct job_submit_wait {
        struct jobs *js;
        struct store_ticket *ticket;
        const char *benchmark; /* the catalog's, which lives as long as umd */
        char id[JOB_ID_MAX];
        bool queued_all; /* no part failed while queueing */
        size_t n_devs, devs[SPEC_MAX_DEVICES];
};

/* The commit waited for (at once when it is in), then the answer. */
static int submit_end(struct job_submit_wait *sw, struct core_submitted *ret, struct problem *p)
{
        struct jobs *js = sw->js;
        char *kept = NULL; /* the bytes of the submission's write (job_persist_submit_wait) */
        size_t kept_len = 0;
        struct job *j;
        int r;

        int w = job_persist_submit_wait(sw->ticket, &kept, &kept_len);
        sw->ticket = NULL;

        /* Committed with every part queued: the answer is the bytes the commit carried, the job
         * as its submission was written, and the rest is left to the lock's next holder, so this
         * thread answers without waiting for it (a commit's waiters, woken together, took it one
         * after another). A part failed while queueing, or no bytes kept: as below. */
        struct commit_note *note =
            w == 0 && sw->queued_all && ret->bytes_ok && kept ? calloc(1, sizeof(*note)) : NULL;
        if (note) {
                note->d.run = commit_note_run;
                note->js = js;
                snprintf(note->id, sizeof(note->id), "%s", sw->id);
                note->benchmark = sw->benchmark;
                note->n_devs = sw->n_devs;
                memcpy(note->devs, sw->devs, sw->n_devs * sizeof(*sw->devs));
                ret->body = kept;
                ret->body_len = kept_len;
                snprintf(ret->id, sizeof(ret->id), "%s", sw->id);
                core_defer(&note->d);
                return 0;
        }

        core_lock();
        j = job_find(js, sw->id);
        if (!j) { /* cannot happen: only prune_finished removes committed jobs */
                r = problem_set(p, 500, "", "job %s vanished", sw->id);
                goto out;
        }
        if (w < 0) {
                job_unsubmit(js, j);
                r = problem_set(p, 507, "", "the job could not be stored (%s); nothing was queued",
                                strerror(-w));
                goto out;
        }
        committed_locked(js, j, sw->benchmark);
        submitted_answer(j, &kept, kept_len, ret);
        start_committed_locked(js, j, sw->devs, sw->n_devs);
        r = 0;
out:
        jobs_unlock(js);
        free(kept);
        return r;
}

/* A submission with an idempotency key: when the key names an earlier job of the client (in
 * memory, else in the store), 1 with *ret that job as it is, or a 409 when its body differs;
 * 0 when it names none. */
static int submit_replay_locked(struct jobs *js, const char *idem, const char *client,
                                const char *request, struct core_submitted *ret, struct problem *p)
{
        struct job *prev = job_checked(js, jobs_find_keyed(js, idem, client));
        _cleanup_json_ json_t *stored = NULL;
        _cleanup_free_ char *stored_req = NULL;
        const char *req = NULL, *prev_id = NULL;
        int r;

        assert_locked();
        if (prev) {
                req = json_string_value(json_object_get(job_doc(prev), "request"));
                prev_id = prev->id;
        } else if (job_doc_find_idempotent(js->store, idem, client, &stored, &stored_req) == 0) {
                req = stored_req;
                prev_id = json_string_value(json_object_get(stored, "id"));
        }
        if (!prev_id)
                return 0;
        if (!req || strcmp(req, request) != 0) {
                r = problem_set(p, 409, "Idempotency-Key",
                                "this Idempotency-Key was used for job %s with a different body",
                                prev_id);
        } else {
                if (prev)
                        job_persist_shown(js, prev);
                ret->job = prev ? job_public_of(prev) : json_incref(stored);
                snprintf(ret->id, sizeof(ret->id), "%s", prev_id);
                r = 1;
        }
        if (prev) /* req pointed into its tree: given up only now */
                job_compact(prev);
        return r;
}

int job_submit(struct jobs *js, const json_t *body, const char *idem, const char *client,
               struct core_submitted *ret, struct problem *p)
{
        struct job_spec spec = {0};
        struct problem parse_p = {0};
        const struct bench_def *b;
        struct job *fresh = NULL, *j;
        struct job_doc_new *prepared = NULL; /* fresh's write, made outside the lock */
        int r, parsed;

        r = spec_check_body(body, &b, p);
        if (r < 0)
                return r;
        _cleanup_free_ char *request = json_dump_compact(body, NULL);
        if (!request)
                return problem_set(p, 500, "", "out of memory");
        /* Outside the lock (see the top); what it finds wrong is said only once the key is known
         * not to name an earlier job, which is answered whatever this body would be now. */
        parsed = spec_parse(js->cfg, body, b, &spec, &parse_p);
        if (parsed >= 0 && (!(fresh = job_new(js, body, request, &spec, idem, client)) ||
                            job_prepare_write(fresh, &prepared) < 0)) {
                job_free(fresh);
                spec_done(&spec);
                return problem_set(p, 500, "", "out of memory");
        }

        core_lock();
        job_persist_prune(js);
        if (idem && (r = submit_replay_locked(js, idem, client, request, ret, p)) != 0)
                goto out;
        if (parsed < 0) {
                *p = parse_p;
                r = parsed;
                goto out;
        }
        r = check_capacity(js, spec.devs, spec.n_devs, client, p);
        if (r < 0)
                goto out;

        struct store_ticket *ticket = NULL;
        if (job_take_id(fresh) < 0 || jobs_append(js, fresh) < 0) {
                r = problem_set(p, 500, "", "out of memory");
                goto out;
        }
        j = fresh;
        fresh = NULL; /* the index has it */
        r = job_persist_submit(js, j, prepared, &ticket);
        prepared = NULL; /* taken */
        if (r < 0) {
                job_unsubmit(js, j);
                r = problem_set(p, 500, "", "out of memory");
                goto out;
        }
        /* Queued now, so capacity counts it, but not dispatched until committed. */
        bool queued_all = true;
        for (size_t i = 0; i < j->n_parts; i++)
                if (job_enqueue(js, j, i) < 0) { /* stored but not queued: fail it, not lose it */
                        job_set_part(js, j, i, JOB_FAILED, NULL, "out of memory while queueing");
                        queued_all = false;
                }
        struct job_submit_wait sw = {.js = js,
                                     .ticket = ticket,
                                     .benchmark = b->name,
                                     .queued_all = queued_all,
                                     .n_devs = spec.n_devs};
        snprintf(sw.id, sizeof(sw.id), "%s", j->id);
        memcpy(sw.devs, spec.devs, spec.n_devs * sizeof(*spec.devs));
        jobs_unlock(js);
        spec_done(&spec);

        /* The commit is waited for without the lock: concurrent submits share one commit. A
         * caller that can wait without a thread (the HTTP server, which suspends the connection)
         * gets the wait to finish when the commit is in; no memory for it: waited for here. */
        struct job_submit_wait *w = ret->may_wait ? malloc(sizeof(*w)) : NULL;
        if (w) {
                *w = sw;
                ret->wait = w;
                return 2;
        }
        return submit_end(&sw, ret, p);
out:
        jobs_unlock(js);
        job_free(fresh); /* made, never queued: a replay, a full queue, no memory */
        job_persist_prepared_free(prepared);
        spec_done(&spec);
        return r;
}

int job_submit_when_done(struct job_submit_wait *w, void (*ready)(void *arg), void *arg)
{
        return job_persist_when_done(w->ticket, ready, arg);
}

int job_submit_end(struct job_submit_wait *w, struct core_submitted *ret, struct problem *p)
{
        int r = submit_end(w, ret, p);

        free(w);
        return r;
}
