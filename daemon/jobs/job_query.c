/* Reading jobs: one job (from memory while it is open, else the store's committed bytes), a
 * page of the filtered list as rows and a cursor (api/ parses the filter and frames the page),
 * the counts for STATUS= and /v1/health, and the node worker's entry. Nothing here changes a queue
 * or a running count, so the lock is released with core_unlock (no metrics to publish). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "core.h"
#include "devices.h"
#include "job_doc.h"
#include "job_internal.h"
#include "job_persist.h"
#include "jobs.h"
#include "jsonutil.h"
#include "store.h"
#include "util.h"
#include "uuid.h"

/* show_unstored's reason: the final state's name and the store's error fit with room. */
#define JOB_UNSTORED_MAX 256

void job_query_counts(struct jobs *js, size_t *ret_queued, size_t *ret_running, size_t *ret_total)
{
        core_lock();
        *ret_queued = jobs_queued_total(js);
        *ret_running = jobs_running_locked(js);
        *ret_total = js->store ? store_count(js->store) : 0;
        core_unlock();
}

const char *job_query_store_damage(struct jobs *js)
{
        return store_damage(js->store);
}

int job_query_store_commit_error(struct jobs *js)
{
        return store_commit_error(js->store);
}

const char *job_query_store_repaired(struct jobs *js)
{
        return store_repaired(js->store);
}

const char *job_query_store_check(struct jobs *js)
{
        static const char *const names[] = {
            [STORE_CHECK_PENDING] = "pending",
            [STORE_CHECK_OK] = "ok",
            [STORE_CHECK_DAMAGED] = "damaged",
        };
        return names[store_check_state(js->store)];
}

/* A store read's outcome r for job id as the API says it: 0, or a 404 / 500 problem. */
int job_query_store_problem(int r, const char *id, struct problem *p)
{
        if (r == -ENOENT)
                return problem_set(p, 404, "id", "no job %s", id);
        if (r < 0)
                return problem_set(p, 500, "",
                                   "the job store cannot be read (see the daemon's log)");
        return 0;
}

/* What job_query_get shows of a final job whose final write did not commit (issue 57: a disk
 * gone read-only). A final state a client is shown is a promise that a restart reads it back,
 * and the store cannot keep it yet: a restart before the write commits finds the job as last
 * committed, running, and says it was interrupted. So the job is shown running, as the store
 * holds it, with why; its parts keep what the worker said. jobs_retry_unsaved writes it again
 * every store_retry_ms, and once that commits the job is shown final. */
static void show_unstored(struct jobs *js, json_t *pub, const char *final)
{
        char why[JOB_UNSTORED_MAX];
        int r = store_commit_error(js->store);

        snprintf(why, sizeof(why),
                 "the job ended (%s) but the job store could not keep it (%s): written again "
                 "every store_retry_ms; until then a restart finds it interrupted",
                 final, r ? strerror(-r) : "its write failed");
        json_object_set_new(pub, "state", json_string(job_state_names[JOB_RUNNING]));
        json_object_set_new(pub, "finished", json_null());
        json_object_set_new(pub, "not_stored", json_string(why));
}

/* After the commit a GET waited for: whether job id's final state is still not committed
 * (its write failed, or was queued again). A job committed has left memory (pruned). */
static void check_final_stored(struct jobs *js, const char *id, json_t *pub)
{
        core_lock();
        job_persist_prune(js);
        struct job *j = job_find(js, id);
        if (j && job_state_final(j->st) && job_persist_final_pending(j))
                show_unstored(js, pub, job_state_names[j->st]);
        core_unlock();
}

int job_query_get(struct jobs *js, const char *id, json_t **ret_job, struct problem *p)
{
        bool final = false;

        if (!uuid_is_valid(id))
                return problem_set(p, 400, "id", "'%.64s' is not a job id (a UUID)", id);
        core_lock();
        job_persist_prune(js);
        struct job *j = job_checked(js, job_find(js, id));
        if (j) {
                job_persist_shown(js, j);
                *ret_job = job_public_of(j);
                final = job_state_final(j->st);
        }
        core_unlock();
        if (j) {
                /* What a client reads is on disk: wait for the commit of what it shows. */
                job_persist_sync(js);
                if (final && *ret_job)
                        check_final_stored(js, id, *ret_job);
                return 0;
        }
        /* Not in memory: finished, and committed before it left memory. */
        return job_query_store_problem(job_doc_get(js->store, id, ret_job), id, p);
}

int job_query_get_finished(struct jobs *js, const char *id, struct blob **ret_body,
                           struct problem *p)
{
        bool in_memory;

        if (!uuid_is_valid(id))
                return problem_set(p, 400, "id", "'%.64s' is not a job id (a UUID)", id);
        /* No pruning here: it walks every job in memory on each GET, under the one lock the
         * supervisor and submits need too. jobs_retry_unsaved prunes every store_retry_ms;
         * until then a committed job is served from memory, the same bytes. */
        core_lock();
        in_memory = job_find(js, id) != NULL;
        core_unlock();
        if (in_memory)
                return 1;
        /* Not in memory: finished, and committed before it left memory. */
        return job_query_store_problem(store_get_finished(js->store, id, ret_body), id, p);
}

int job_query_list(struct jobs *js, const struct job_filter *f, struct job_rows *ret,
                   struct problem *p)
{
        char uuid[sizeof(((struct device *)0)->uuid)] = "";
        struct store_query q = {0};
        struct job_doc_label label = {f->label_key, f->label_key_len, f->label_value};
        struct job_rows rows = {0};

        if (f->device >= 0) {
                core_lock();
                snprintf(uuid, sizeof(uuid), "%s", devices_get((size_t)f->device)->uuid);
                core_unlock();
        }
        q.state = f->state >= 0 ? job_state_names[f->state] : NULL;
        q.benchmark = f->benchmark;
        q.uuid = f->device >= 0 ? uuid : NULL;
        if (f->label_key) {
                q.match = job_doc_label_matches;
                q.match_arg = &label;
        }
        q.before = f->before;
        q.after = f->after;
        q.since_ms = f->since_ms;
        q.until_ms = f->until_ms;
        q.limit = f->limit;
        q.with_results = f->with_results;
        q.max_bytes = js->cfg->list_results_max_bytes;
        /* A list is answered from the jobs' rows: a job whose parts' own documents are newer
         * than its row (a part ended while another waits) is written whole first, and that
         * commit waited for, so a job running is not listed as queued. Final jobs' rows are
         * their last documents: a list by a final state needs none of this. */
        if (f->state < 0 || !job_state_final((enum job_state)f->state)) {
                core_lock();
                size_t written = job_persist_rows_current_locked(js);
                core_unlock();
                if (written > 0)
                        job_persist_sync(js);
        }
        /* No job_persist_sync here, unlike a job's GET: every change a client was answered about is
         * committed before that answer (submit, cancel) or before a GET shows it, so waiting
         * for the writer would only add the commits in flight of changes nobody saw yet (and
         * under load that wait was most of a list's time: p99 1.4 s, bench/load/RESULTS.md). */
        if (store_list_raw(js->store, &q, &rows.rows, &rows.len, &rows.count, rows.last,
                           &rows.more) < 0)
                return problem_set(p, 500, "",
                                   "the job store cannot be read (see the daemon's log)");
        *ret = rows;
        return 0;
}

json_t *job_query_node_json_locked(struct jobs *js)
{
        assert_locked();
        if (!have_node())
                return NULL;
        bool warm = js->node_wstate == WORKER_IDLE || js->node_wstate == WORKER_BUSY;
        /* Its crashes and restarts are the supervisor's (the node is its slot after the GPUs). */
        return json_pack(
            "{s:s, s:s, s:I, s:s, s:b, s:b, s:I, s:I, s:O?, s:o}", "uuid", "node", "device", "all",
            "gpus", (json_int_t)devices_count(), "state",
            device_state_names[device_state_of_worker(js->node_wstate)], "warm", warm, "running",
            js->node_running, "restarts",
            (json_int_t)(js->sup ? supervisor_restarts(js->sup, node_index()) : 0), "crashes",
            (json_int_t)(js->sup ? supervisor_crashes(js->sup, node_index()) : 0), "last_health",
            js->node_last_verdict, "last_health_by_tier",
            js->node_verdict_by_tier ? json_incref(js->node_verdict_by_tier) : json_object());
}
