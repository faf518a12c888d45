/* Cancelling a job: who may, the queued parts it cancels at once, the running ones the
 * supervisor is told to stop, and answering only once the change is committed (waited for
 * without core_lock); a write that fails puts the job back as it was (cancel_undo). */
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
#include "job_internal.h"
#include "jsonutil.h"
#include "log.h"
#include "job_queue.h"
#include "job_spec.h"
#include "store.h"
#include "util.h"
#include "uuid.h"

/* Undo what job_cancel did to j's queued parts when its write was not committed. */
static void cancel_undo(struct jobs *js, struct job *j, const bool *was_queued)
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
                if (j->parts[i].device >= 0 && job_enqueue(js, j, i) < 0)
                        job_set_part(js, j, i, JOB_FAILED, NULL, "out of memory while queueing");
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

int job_cancel(struct jobs *js, const char *id, const char *client, bool admin, json_t **ret_job,
               struct problem *p)
{
        int r = 0;

        if (!uuid_is_valid(id))
                return problem_set(p, 400, "id", "'%.64s' is not a job id (a UUID)", id);
        core_lock();
        jobs_prune_finished(js);
        struct job *j = job_find(js, id);
        if (!j) {
                core_unlock();
                /* Not in memory: finished (or unknown). */
                _cleanup_json_ json_t *doc = NULL;
                r = job_query_store_problem(store_get(js->store, id, &doc), id, p);
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
        char jid[JOB_ID_MAX];

        j->cancel_requested = true;
        json_object_set_new(j->doc, "cancel_requested", json_true());
        for (size_t i = 0; i < j->n_parts; i++) {
                if (j->parts[i].st == JOB_QUEUED && i < SPEC_MAX_DEVICES) {
                        was_queued[i] = true;
                        job_set_part(js, j, i, JOB_CANCELLED, NULL, "cancelled before it ran");
                }
        }
        if (job_update_state(js, j))
                job_finished(j);
        /* A finished job's ticket is the one prune_finished polls; ours is for an open one. */
        if (job_state_final(j->st))
                r = job_persist(js, j);
        else
                r = store_put(js->store, j->doc, &ticket);
        if (r < 0) {
                cancel_undo(js, j, was_queued);
                j->cancel_requested = was_requested;
                r = problem_set(p, 500, "", "out of memory");
                goto out;
        }
        snprintf(jid, sizeof(jid), "%s", j->id);
        bool final = job_state_final(j->st);
        jobs_unlock(js);

        /* Answered only once committed; the lock is not held meanwhile. */
        int w;
        if (final) {
                store_sync(js->store);
                core_lock();
                j = job_find(js, jid);
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
                j = job_find(js, jid);
        }
        if (!j) { /* finished and committed meanwhile: the cancel took effect */
                _cleanup_json_ json_t *doc = NULL;
                jobs_unlock(js);
                if (store_get(js->store, jid, &doc) == 0) {
                        *ret_job = json_incref(doc);
                        return 0;
                }
                return problem_set(p, 500, "", "job %s vanished", jid);
        }
        if (w < 0) {
                j->final_unsaved = false;
                cancel_undo(js, j, was_queued);
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
                if (j->parts[i].st == JOB_RUNNING && js->sup)
                        supervisor_cancel(js->sup, (size_t)j->parts[i].device, j->id);
        log_info("job %s: cancel requested (%s)", id, job_state_names[j->st]);
        *ret_job = job_public(j->doc);
        r = 0;
out:
        jobs_unlock(js);
        return r;
}
