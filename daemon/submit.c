/* Submitting and cancelling jobs: idempotency keys, queue capacity and per-client quotas, the
 * new job's document, and answering only once the change is committed (waited for without
 * core_lock). Submissions are validated by spec.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "catalog.h"
#include "config.h"
#include "core.h"
#include "devices.h"
#include "jobs.h"
#include "jobs_internal.h"
#include "jsonutil.h"
#include "log.h"
#include "queue.h"
#include "spec.h"
#include "store.h"
#include "util.h"
#include "uuid.h"

static struct job *idempotent_find(const char *key, const char *client)
{
        for (size_t k = js.n_jobs; k-- > 0;) {
                json_t *d = js.jobs[k]->doc;
                const char *jk = json_string_value(json_object_get(d, "idempotency_key"));
                const char *jc = json_string_value(json_object_get(d, "client"));
                if (jk && strcmp(jk, key) == 0 && streq_ptr(jc, client))
                        return js.jobs[k];
        }
        return NULL;
}

/* Remove a job whose submission could not be committed: it never existed. */
static void job_unsubmit(struct job *j)
{
        ssize_t k = job_index(j->id);

        for (size_t i = 0; i < j->n_parts; i++)
                if (j->parts[i].st == JOB_QUEUED && j->parts[i].device >= 0)
                        queue_remove(&js.queues[j->parts[i].device], j, i);
        if (k >= 0)
                jobs_remove_at((size_t)k);
}

static size_t active_jobs_of(const char *client)
{
        size_t n = 0;
        for (size_t k = 0; k < js.n_jobs; k++)
                if (!job_state_final(js.jobs[k]->st) &&
                    streq_ptr(json_string_value(json_object_get(js.jobs[k]->doc, "client")),
                              client))
                        n++;
        return n;
}

static int check_capacity(const size_t *devs, size_t n, const char *client, struct problem *p)
{
        size_t queued = jobs_queued_total();
        int r = 0;

        if (queued + n > js.cfg->queue_capacity)
                r = problem_set(p, 429, "",
                                "the queue is full (%zu parts queued, queue_capacity %u); retry "
                                "later",
                                queued, js.cfg->queue_capacity);
        for (size_t i = 0; r == 0 && i < n; i++) {
                size_t q = jobs_queued_on_locked(devs[i]);
                if (q + 1 > js.cfg->queue_capacity_per_device)
                        r = problem_set(p, 429, "devices",
                                        "the queue of device %zu is full (%zu parts, "
                                        "queue_capacity_per_device %u); retry later",
                                        devs[i], q, js.cfg->queue_capacity_per_device);
        }
        if (r == 0 && client && active_jobs_of(client) >= js.cfg->jobs_per_token)
                r = problem_set(p, 429, "",
                                "client '%s' has %u jobs queued or running (jobs_per_token); "
                                "retry later",
                                client, js.cfg->jobs_per_token);
        if (r < 0)
                p->retry_after_s = 5; /* queues drain: worth asking again soon */
        return r;
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
                j->parts[n] = (struct part){.device = (ssize_t)node_index(), .st = JOB_QUEUED};
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
                           job_now_json(), "created_ms", (json_int_t)now_realtime_ms(), "started",
                           "finished", "fake", fake, "parts", parts, "request", request);
        if (!j->doc) {
                job_free(j);
                return NULL;
        }
        if (strcmp(b->name, "health") == 0) {
                const char *tier = json_string_value(json_object_get(params, "tier"));
                json_object_set_new(j->doc, "canonical", json_boolean(spec->canonical));
                json_object_set_new(j->doc, "tier", json_string(tier ? tier : "quick"));
        }
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
        jobs_prune_finished();
        if (idem) {
                struct job *prev = idempotent_find(idem, client);
                _cleanup_json_ json_t *stored = NULL;
                _cleanup_free_ char *stored_req = NULL;
                const char *req = NULL, *prev_id = NULL;

                if (prev) {
                        req = json_string_value(json_object_get(prev->doc, "request"));
                        prev_id = prev->id;
                } else if (store_find_idempotent(js.store, idem, client, &stored, &stored_req) ==
                           0) {
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
        r = spec_parse(js.cfg, body, b, &spec, p);
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
        if (store_put(js.store, j->doc, &ticket) < 0) {
                job_unsubmit(j);
                r = problem_set(p, 500, "", "out of memory");
                goto out;
        }
        /* Queued now, so capacity counts it, but not dispatched until committed. */
        for (size_t i = 0; i < j->n_parts; i++)
                if (job_enqueue(j, i) < 0) /* stored but not queued: fail it rather than lose it */
                        job_set_part(j, i, JOB_FAILED, NULL, "out of memory while queueing");
        char id[UUID_STRING_MAX];
        snprintf(id, sizeof(id), "%s", j->id);
        jobs_unlock();

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
                dispatch_try(spec.devs[i]);
        if (have_node())
                dispatch_try_node();
        r = 0;
out:
        jobs_unlock();
        spec_done(&spec);
        return r;
}

/* Undo what core_job_cancel did to j's queued parts when its write was not committed. */
static void cancel_undo(struct job *j, const bool *was_queued)
{
        j->cancel_requested = false;
        json_object_del(j->doc, "cancel_requested");
        for (size_t i = 0; i < j->n_parts; i++) {
                json_t *pd = job_part_doc(j, i);
                if (i >= SPEC_MAX_DEVICES || !was_queued[i] || j->parts[i].st != JOB_CANCELLED)
                        continue;
                j->parts[i].st = JOB_QUEUED;
                json_object_set_new(pd, "state", json_string(job_state_names[JOB_QUEUED]));
                json_object_set_new(pd, "finished", json_null());
                json_object_set_new(pd, "error", json_null());
                if (j->parts[i].device >= 0 && job_enqueue(j, i) < 0)
                        job_set_part(j, i, JOB_FAILED, NULL, "out of memory while queueing");
        }
        if (job_state_final(j->st)) {
                j->finished_ms = 0;
                json_object_set_new(j->doc, "finished", json_null());
                json_object_del(j->doc, "finished_ms");
        }
        j->st = job_derive_state(j);
        json_object_set_new(j->doc, "state", json_string(job_state_names[j->st]));
        if (j->final_ticket) { /* the failed final write: nothing to wait for any more */
                (void)store_wait(j->final_ticket);
                j->final_ticket = NULL;
        }
}

/* Only the client that submitted a job, or an admin, may cancel it. */
static int check_owner(const json_t *doc, const char *id, const char *client, bool admin,
                       struct problem *p)
{
        const char *owner = json_string_value(json_object_get(doc, "client"));

        if (client && !admin && !streq_ptr(owner, client))
                return problem_set(p, 403, "",
                                   "job %s was submitted by another client; cancelling it needs "
                                   "the admin role",
                                   id);
        return 0;
}

int core_job_cancel(const char *id, const char *client, bool admin, json_t **ret_job,
                    struct problem *p)
{
        int r = 0;

        if (!uuid_is_valid(id))
                return problem_set(p, 400, "id", "'%.64s' is not a job id (a UUID)", id);
        core_lock();
        jobs_prune_finished();
        struct job *j = job_find(id);
        if (!j) {
                core_unlock();
                /* Not in memory: finished (or unknown). */
                _cleanup_json_ json_t *doc = NULL;
                r = store_read_problem(store_get(js.store, id, &doc), id, p);
                if (r < 0)
                        return r;
                r = check_owner(doc, id, client, admin, p);
                if (r < 0)
                        return r;
                return problem_set(p, 409, "id", "job %s already finished (%s)", id,
                                   json_string_value(json_object_get(doc, "state")) ?: "?");
        }
        r = check_owner(j->doc, id, client, admin, p);
        if (r < 0)
                goto out;
        if (job_state_final(j->st)) {
                r = problem_set(p, 409, "id", "job %s already finished (%s)", id,
                                job_state_names[j->st]);
                goto out;
        }
        bool was_queued[SPEC_MAX_DEVICES] = {false};
        bool was_requested = j->cancel_requested;
        struct store_ticket *ticket = NULL;
        char jid[UUID_STRING_MAX];

        j->cancel_requested = true;
        json_object_set_new(j->doc, "cancel_requested", json_true());
        for (size_t i = 0; i < j->n_parts; i++) {
                if (j->parts[i].st == JOB_QUEUED && i < SPEC_MAX_DEVICES) {
                        was_queued[i] = true;
                        job_set_part(j, i, JOB_CANCELLED, NULL, "cancelled before it ran");
                }
        }
        if (job_update_state(j))
                job_finished(j);
        /* A finished job's ticket is the one prune_finished polls; ours is for an open one. */
        if (job_state_final(j->st))
                r = job_persist(j);
        else
                r = store_put(js.store, j->doc, &ticket);
        if (r < 0) {
                cancel_undo(j, was_queued);
                j->cancel_requested = was_requested;
                r = problem_set(p, 500, "", "out of memory");
                goto out;
        }
        snprintf(jid, sizeof(jid), "%s", j->id);
        bool final = job_state_final(j->st);
        jobs_unlock();

        /* Answered only once committed; the lock is not held meanwhile. */
        int w;
        if (final) {
                store_sync(js.store);
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
                jobs_unlock();
                if (store_get(js.store, jid, &doc) == 0) {
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
                if (j->parts[i].st == JOB_RUNNING && js.sup)
                        supervisor_cancel(js.sup, (size_t)j->parts[i].device, j->id);
        log_info("job %s: cancel requested (%s)", id, job_state_names[j->st]);
        *ret_job = job_public(j->doc);
        r = 0;
out:
        jobs_unlock();
        return r;
}
