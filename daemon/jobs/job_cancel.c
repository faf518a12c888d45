/* Cancelling a job: who may, the queued parts it cancels at once, the running ones the
 * supervisor is told to stop, and answering only once the change is committed (waited for
 * without core_lock); a write that fails puts the job back as it was (cancel_undo). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core.h"
#include "job_doc.h"
#include "job_internal.h"
#include "job_persist.h"
#include "job_spec.h"
#include "jobs.h"
#include "jsonutil.h"
#include "log.h"
#include "store.h"
#include "util.h"
#include "uuid.h"

/* What a cancel changed in a job, so that it can be put back. */
struct cancel_undo {
        bool was_queued[SPEC_MAX_DEVICES];
        bool was_requested;
};

/* Where job_cancel found the job, and so where its answer comes from. */
enum cancel_where {
        CANCEL_IN_MEMORY,          /* open: cancelled here */
        CANCEL_GONE,               /* not in memory at the start: finished (or unknown) */
        CANCEL_FINISHED_MEANWHILE, /* finished and left memory while the cancel was committed */
};

/* Only the client that submitted a job (owner, NULL: none), or an admin, may cancel it. */
static int check_owner(const char *owner, const char *id, const char *client, bool admin,
                       struct problem *p)
{
        if (client && !admin && !streq_ptr(owner, client))
                return problem_set(p, 403, "",
                                   "job %s was submitted by another client; cancelling it needs "
                                   "the admin role",
                                   id);
        return 0;
}

/* The decision, changing nothing: CANCEL_IN_MEMORY with *ret_j when id is an open job its
 * caller may cancel, CANCEL_GONE when it is not in memory, or a 403/409 problem. */
static int cancel_check_locked(struct jobs *js, const char *id, const char *client, bool admin,
                               struct job **ret_j, struct problem *p)
{
        struct job *j;
        int r;

        assert_locked();
        job_persist_prune(js);
        j = job_checked(js, job_find(js, id));
        if (!j)
                return CANCEL_GONE;
        r = check_owner(j->client, id, client, admin, p); /* cached: a refusal makes no tree */
        if (r < 0)
                return r;
        if (job_state_final(j->st))
                return problem_set(p, 409, "id", "job %s already finished (%s)", id,
                                   job_state_names[j->st]);
        *ret_j = j;
        return CANCEL_IN_MEMORY;
}

/* Puts j back as it was before cancel_start_locked: its write was refused or not committed. */
static void cancel_undo_locked(struct jobs *js, struct job *j, const struct cancel_undo *u)
{
        assert_locked();
        j->cancel_requested = u->was_requested;
        json_t *doc = job_doc(j);
        if (u->was_requested)
                json_object_set_new(doc, "cancel_requested", json_true());
        else
                json_object_del(doc, "cancel_requested");
        for (size_t i = 0; i < j->n_parts; i++) {
                json_t *pd = job_part_doc(j, i);
                if (i >= SPEC_MAX_DEVICES || !u->was_queued[i] || j->parts[i].st != JOB_CANCELLED)
                        continue;
                j->parts[i].st = JOB_QUEUED;
                job_persist_part_changed(j, i);
                json_object_set_new(pd, "state", json_string(job_state_names[JOB_QUEUED]));
                json_object_set_new(pd, "finished", json_null());
                json_object_set_new(pd, "error", json_null());
                if (j->parts[i].device >= 0 && job_enqueue(js, j, i) < 0)
                        job_set_part(js, j, i, JOB_FAILED, NULL, "out of memory while queueing");
        }
        if (job_state_final(j->st)) {
                j->finished_ms = 0;
                json_object_set_new(doc, "finished", json_null());
                json_object_del(doc, "finished_ms");
        }
        job_state_set(js, j, job_derive_state(j));
        json_object_set_new(doc, "state", json_string(job_state_names[j->st]));
        job_persist_final_drop(j); /* its final write failed: nothing to wait for any more */
        job_compact(j);            /* waiting again, as before the cancel */
}

/* The effect: j's queued parts are cancelled at once (its running ones once the supervisor has
 * stopped them, cancel_finish_locked) and the change is queued for the writer: *ret_ticket for
 * an open job, NULL for one that is final now (its final_ticket carries the write, the one
 * prune_finished polls). When the write cannot be queued, j is put back and 500 returned. */
static int cancel_start_locked(struct jobs *js, struct job *j, struct cancel_undo *u,
                               struct store_ticket **ret_ticket, struct problem *p)
{
        int r;

        assert_locked();
        json_t *doc = job_doc(j);

        if (!doc)
                return problem_set(p, 500, "", "out of memory");
        u->was_requested = j->cancel_requested;
        j->cancel_requested = true;
        json_object_set_new(doc, "cancel_requested", json_true());
        for (size_t i = 0; i < j->n_parts; i++) {
                if (j->parts[i].st == JOB_QUEUED && i < SPEC_MAX_DEVICES) {
                        u->was_queued[i] = true;
                        job_set_part(js, j, i, JOB_CANCELLED, NULL, "cancelled before it ran");
                }
        }
        if (job_update_state(js, j))
                job_finished(js, j);
        r = job_persist_cancel(js, j, ret_ticket);
        if (r < 0) {
                cancel_undo_locked(js, j, u);
                return problem_set(p, 500, "", "out of memory");
        }
        return 0;
}

/* After the commit (w its outcome): the running parts are handed to the supervisor to stop
 * and *ret_job is the job as it now is; or, when the commit failed, j is put back and 507
 * returned. */
static int cancel_finish_locked(struct jobs *js, struct job *j, int w, const struct cancel_undo *u,
                                json_t **ret_job, struct problem *p)
{
        assert_locked();
        if (w < 0) {
                cancel_undo_locked(js, j, u);
                return problem_set(p, 507, "",
                                   "the cancellation could not be stored (%s); the job "
                                   "is unchanged",
                                   strerror(-w));
        }
        for (size_t i = 0; i < j->n_parts; i++)
                if (j->parts[i].st == JOB_RUNNING && js->sup)
                        supervisor_cancel(js->sup, (size_t)j->parts[i].device, j->id);
        log_info("job %s: cancel requested (%s)", j->id, job_state_names[j->st]);
        job_persist_shown(js, j);
        *ret_job = job_public_of(j);
        return 0;
}

/* The answer for a job that is not in memory, read from the store without the lock: where is
 * CANCEL_GONE (404, 403, or 409: it finished before the cancel) or CANCEL_FINISHED_MEANWHILE
 * (the cancel took effect: the stored job). */
static int cancel_answer_stored(struct jobs *js, enum cancel_where where, const char *id,
                                const char *client, bool admin, json_t **ret_job, struct problem *p)
{
        _cleanup_json_ json_t *doc = NULL;
        int r = job_doc_get(js->store, id, &doc);

        if (where == CANCEL_FINISHED_MEANWHILE) {
                if (r < 0)
                        return problem_set(p, 500, "", "job %s vanished", id);
                *ret_job = json_incref(doc);
                return 0;
        }
        r = job_query_store_problem(r, id, p);
        if (r < 0)
                return r;
        r = check_owner(json_string_value(json_object_get(doc, "client")), id, client, admin, p);
        if (r < 0)
                return r;
        return problem_set(p, 409, "id", "job %s already finished (%s)", id,
                           json_string_value(json_object_get(doc, "state")) ?: "?");
}

/* The decision and the change are made under the lock; the commit is waited for without it,
 * and a failed one undone once it is taken again. */
int job_cancel(struct jobs *js, const char *id, const char *client, bool admin, json_t **ret_job,
               struct problem *p)
{
        struct cancel_undo u = {0};
        struct store_ticket *ticket = NULL;
        struct job *j = NULL;
        char jid[JOB_ID_MAX];
        bool final;
        int r, w;

        if (!uuid_is_valid(id))
                return problem_set(p, 400, "id", "'%.64s' is not a job id (a UUID)", id);
        snprintf(jid, sizeof(jid), "%s", id);
        core_lock();
        r = cancel_check_locked(js, id, client, admin, &j, p);
        if (r == CANCEL_IN_MEMORY)
                r = cancel_start_locked(js, j, &u, &ticket, p);
        if (r == CANCEL_IN_MEMORY) {
                snprintf(jid, sizeof(jid), "%s", j->id);
                final = job_state_final(j->st);
                jobs_unlock(js);
                /* Answered only once committed; the lock is not held meanwhile. */
                w = job_persist_cancel_wait(js, ticket);
                core_lock();
                j = job_find(js, jid);
                if (j && final)
                        w = job_persist_final_outcome_locked(j);
                r = j ? cancel_finish_locked(js, j, w, &u, ret_job, p) : CANCEL_FINISHED_MEANWHILE;
        }
        jobs_unlock(js);
        if (r == CANCEL_GONE || r == CANCEL_FINISHED_MEANWHILE)
                r = cancel_answer_stored(js, (enum cancel_where)r, jid, client, admin, ret_job, p);
        return r;
}
