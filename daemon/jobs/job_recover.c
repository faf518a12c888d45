/* Recovery: every unfinished job the store holds back into the index and the queues at start,
 * checked as strictly as a submission, and what a restart changes (running parts interrupted,
 * parts of a GPU no longer present failed). A job that is only waiting (queued in every part, on
 * devices that are present) is queued from its columns alone, its document left in the store: a
 * parse and a dump of each cost start-up ~30 µs a job, seconds with a long queue, and reading the
 * documents at all half of what was left. Its checks run once start-up is over
 * (jobs_check_recovered, from the main loop) or as soon as something needs it (job_checked);
 * until then it is a queued job like any other, whose document is what the disk holds. */
#include "jobs.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core.h"
#include "devices.h"
#include "job_doc.h"
#include "job_internal.h"
#include "job_persist.h"
#include "job_queue.h"
#include "job_spec.h"
#include "jsonutil.h"
#include "lock.h"
#include "log.h"
#include "store.h"
#include "util.h"
#include "uuid.h"

/* "its stored document is malformed: " and spec_validate_stored's complaint, cut there. */
#define MALFORMED_WHY_MAX 200

/* Why spec_validate_stored refused a stored job: one sentence, quoting at most a bounded key. */
#define STORED_WHY_MAX 160

static ssize_t device_of_uuid(const char *uuid)
{
        if (strcmp(uuid, "node") == 0)
                return have_node() ? (ssize_t)node_index() : -1;
        return devices_lookup_uuid(uuid);
}

static struct job *job_from_doc(json_t *doc)
{
        const char *id = json_string_value(json_object_get(doc, "id"));
        json_t *parts = json_object_get(doc, "parts");
        int st = job_state_from_string(json_string_value(json_object_get(doc, "state")));
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
        if (job_cache_keys(j, json_string_value(json_object_get(doc, "client")),
                           json_string_value(json_object_get(doc, "idempotency_key"))) < 0) {
                job_free(j);
                return NULL;
        }
        j->doc = json_incref(doc);
        j->st = (enum job_state)st;
        j->prio = 1;
        if (prio && spec_priority_from_string(prio) >= 0)
                j->prio = spec_priority_from_string(prio);
        j->cancel_requested = json_is_true(json_object_get(doc, "cancel_requested"));
        j->finished_ms = (uint64_t)json_integer_value(json_object_get(doc, "finished_ms"));
        j->n_parts = json_array_size(parts);
        for (size_t i = 0; i < j->n_parts; i++) {
                json_t *p = json_array_get(parts, i);
                const char *uuid = json_string_value(json_object_get(p, "uuid"));
                int ps = job_state_from_string(json_string_value(json_object_get(p, "state")));
                if (!uuid || ps < 0) {
                        job_free(j);
                        return NULL;
                }
                j->parts[i].device = device_of_uuid(uuid);
                j->parts[i].st = (enum job_state)ps;
        }
        return j;
}

/* A stored unfinished job is checked as strictly as a submission (job_spec.c), from what dispatch
 * will use: its benchmark, params, timeout and priority, on the devices of its parts. NULL when
 * it passes, else why not (valid until the next call). */
static const char *recover_check(struct jobs *js, const json_t *doc)
{
        struct job_recovery *rc = &js->rec;
        char *why = rc->last_why;
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
        if (rc->last_body && json_equal(body, rc->last_body))
                return rc->last_ok ? NULL : why;
        json_decref(rc->last_body);
        rc->last_body = json_incref(body);
        rc->last_ok =
            spec_check_body(body, &b, &p) == 0 && spec_parse(js->cfg, body, b, &spec, &p) == 0;
        spec_done(&spec);
        if (rc->last_ok)
                return NULL;
        snprintf(why, sizeof(rc->last_why), "it is no longer a valid job: %s%s%s", p.field,
                 p.field[0] ? ": " : "", p.detail);
        return why;
}

/* What a restart changes in a job read from its document (j, with doc its tree), and the checks
 * of its shape and its submission: running parts are interrupted, parts of a GPU gone and parts
 * of a job that is no longer valid are failed. malformed_why: spec_validate_stored's complaint,
 * or NULL. true when it changed the job (and wrote it). */
static bool recover_judge(struct jobs *js, struct job *j, const json_t *doc,
                          const char *malformed_why)
{
        char bad_buf[MALFORMED_WHY_MAX];
        const char *bad = NULL;
        bool dirty = false;

        if (malformed_why) {
                snprintf(bad_buf, sizeof(bad_buf), "its stored document is malformed: %s",
                         malformed_why);
                bad = bad_buf;
        } else if (j->st == JOB_QUEUED)
                bad = recover_check(js, doc);
        if (bad)
                log_warning("store: queued job %s is failed: %s", j->id, bad);
        for (size_t i = 0; i < j->n_parts; i++) {
                struct part *p = &j->parts[i];
                if (p->st == JOB_RUNNING || (p->st == JOB_QUEUED && j->st == JOB_RUNNING)) {
                        job_set_part(js, j, i, JOB_INTERRUPTED, NULL,
                                     "umd stopped while the job ran (interrupted)");
                        dirty = true;
                } else if (p->st == JOB_QUEUED && p->device < 0) {
                        job_set_part(js, j, i, JOB_FAILED, NULL,
                                     "the device this part was queued for is no longer present");
                        dirty = true;
                } else if (p->st == JOB_QUEUED && bad) {
                        job_set_part(js, j, i, JOB_FAILED, NULL, bad);
                        dirty = true;
                }
        }
        if (dirty) {
                if (job_update_state(js, j))
                        job_finished(js, j);
                js->rec.changed++;
                job_persist(js, j);
                job_changed(js, j);
        }
        return dirty;
}

/* A job whose document was parsed: into the index and its queues, judged. rewrite: the
 * document had parts' own documents laid over it, which its store row is to carry. */
static int recover_doc(struct jobs *js, json_t *doc, bool rewrite)
{
        struct job *j;
        char why[STORED_WHY_MAX] = "";

        /* What comes back from disk is trusted no more than a submission: the filters and
         * handlers assume the shapes job_index.c writes. A job that cannot even be read as one
         * is left alone; one that can is failed by recover_judge with the reason. */
        bool malformed = spec_validate_stored(doc, why, sizeof(why)) < 0;
        if (!(j = job_from_doc(doc))) {
                log_warning("store: job %.40s: %s; ignored",
                            json_string_value(json_object_get(doc, "id")) ?: "?",
                            why[0] ? why : "unexpected shape");
                return 0;
        }
        job_persist_set_committed(j);
        if (job_state_final(j->st)) { /* finished, but its finished_ms was lost: nothing to do */
                job_free(j);
                return 0;
        }
        if (!recover_judge(js, j, doc, malformed ? why : NULL) && rewrite)
                job_persist(js, j); /* logged */
        int r = jobs_append(js, j);
        if (r < 0) {
                job_persist_forget(js, j); /* recover_judge may have written it final */
                job_free(j);
                return r;
        }
        for (size_t i = 0; i < j->n_parts; i++)
                if (j->parts[i].st == JOB_QUEUED && (r = job_enqueue(js, j, i)) < 0)
                        return r;
        job_compact(j);
        return 0;
}

/* A job that is only waiting, from its columns (0: it is not one; recover_doc takes it). It is
 * held as job_compact leaves one committed and never written again: its document is the store's
 * row (stored), read when something needs it. */
static int recover_fast(struct jobs *js, struct store_open_job *o)
{
        int prio = o->priority ? spec_priority_from_string(o->priority) : -1;
        struct job *j;
        int r;

        if (!streq_ptr(o->state, job_state_names[JOB_QUEUED]) || prio < 0 ||
            o->cancel_requested != 0 || o->n_parts == 0 || !uuid_is_valid(o->id))
                return 0;
        for (size_t i = 0; i < o->n_parts; i++)
                if (!o->parts[i].uuid || o->parts[i].doc ||
                    !streq_ptr(o->parts[i].state, job_state_names[JOB_QUEUED]) ||
                    device_of_uuid(o->parts[i].uuid) < 0)
                        return 0;
        j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        j->parts = calloc(o->n_parts, sizeof(*j->parts));
        if (!j->parts || job_cache_keys(j, o->client, o->idempotency_key) < 0) {
                job_free(j);
                return -ENOMEM;
        }
        j->stored = true;
        snprintf(j->id, sizeof(j->id), "%s", o->id);
        j->st = JOB_QUEUED;
        j->prio = prio;
        job_persist_set_committed(j);
        j->unchecked = true;
        j->n_parts = o->n_parts;
        for (size_t i = 0; i < o->n_parts; i++) {
                j->parts[i].device = device_of_uuid(o->parts[i].uuid);
                j->parts[i].st = JOB_QUEUED;
        }
        r = jobs_append(js, j);
        if (r < 0) {
                job_free(j);
                return r;
        }
        js->rec.unchecked++;
        for (size_t i = 0; i < j->n_parts; i++)
                if ((r = job_enqueue(js, j, i)) < 0)
                        return r;
        return 1;
}

/* A part's own document (store_put_part with a document), parsed, if it is one of part p: an object
 * of a known state naming p's device. NULL otherwise (logged: the document's part stands). */
static json_t *part_doc_parse(const char *id, size_t i, const char *text, const json_t *p)
{
        json_error_t e;
        json_t *own = job_doc_parse(text, strlen(text), &e);

        if (json_is_object(own) &&
            job_state_from_string(json_string_value(json_object_get(own, "state"))) >= 0 &&
            json_equal(json_object_get(own, "uuid"), json_object_get(p, "uuid")))
                return own;
        json_decref(own);
        log_warning("store: job %s: part %zu's own document is not one of that part; its job's "
                    "document is taken for it",
                    id, i);
        return NULL;
}

/* What the parts' rows say beyond the document, laid over it. A part's start is written as its
 * row alone (store_put_part), and a part's change while others of its job ran as its own
 * document (store_put_part with a document), the job's document following later: a part whose row
 * holds a document is that document; one whose row says running while the document says queued was
 * started, and is recovered as running (so interrupted), its job with it. The job's state and
 * start, which its document had not caught up with, follow from its parts. true when a part's
 * own document was laid: the job's document is then to be written again. */
static bool overlay_parts(json_t *doc, const struct store_open_job *o)
{
        json_t *parts = json_object_get(doc, "parts"), *p;
        const char *queued = job_state_names[JOB_QUEUED], *running = job_state_names[JOB_RUNNING];
        const char *first_start = NULL;
        bool laid = false, moved = false;
        size_t i;

        for (i = 0; i < o->n_parts && i < json_array_size(parts); i++) {
                p = json_array_get(parts, i);
                if (!json_is_object(p))
                        continue;
                json_t *own = o->parts[i].doc ? part_doc_parse(o->id, i, o->parts[i].doc, p) : NULL;
                if (own && json_array_set_new(parts, i, own) == 0) {
                        p = own;
                        laid = true;
                }
                if (streq_ptr(o->parts[i].state, running) &&
                    streq_ptr(json_string_value(json_object_get(p, "state")), queued))
                        json_object_set_new(p, "state", json_string(running));
        }
        json_array_foreach(parts, i, p)
        {
                const char *started = json_string_value(json_object_get(p, "started"));

                if (!streq_ptr(json_string_value(json_object_get(p, "state")), queued))
                        moved = true;
                /* The stamps are job_now_json's, one format: their order is the bytes'. */
                if (started && (!first_start || strcmp(started, first_start) < 0))
                        first_start = started;
        }
        if (moved && streq_ptr(json_string_value(json_object_get(doc, "state")), queued))
                json_object_set_new(doc, "state", json_string(running));
        if (first_start && json_is_null(json_object_get(doc, "started")))
                json_object_set_new(doc, "started", json_string(first_start));
        return laid;
}

static int recover_one(struct store_open_job *o, void *userdata)
{
        struct jobs *js = userdata;
        json_error_t e;
        int r;

        if (!o->text) {
                r = recover_fast(js, o);
                if (r != 0)
                        return r < 0 ? r : 0;
                return STORE_OPEN_WANT_TEXT;
        }
        _cleanup_json_ json_t *doc = job_doc_parse(o->text, o->text_len, &e);
        if (!doc) {
                log_warning("store: unfinished job %s is not valid JSON; skipped", o->id);
                return 0;
        }
        bool laid = overlay_parts(doc, o);
        return recover_doc(js, doc, laid);
}

int job_recover_all(struct jobs *js)
{
        int r = store_recover(js->store, recover_one, js);

        js->rec.recovered_unchecked = js->rec.unchecked;
        return r;
}

/* Out of the queues and the index, freed. */
static void job_drop(struct jobs *js, struct job *j)
{
        if (j->unchecked)
                js->rec.unchecked--;
        jobs_remove(js, j);
}

/* What the columns said (j) against what job_from_doc makes of the document (d). */
static bool job_same(const struct job *j, const struct job *d)
{
        if (strcasecmp(j->id, d->id) != 0 || j->st != d->st || j->prio != d->prio ||
            j->cancel_requested != d->cancel_requested || j->n_parts != d->n_parts ||
            !streq_ptr(j->client, d->client) || !streq_ptr(j->idempotency_key, d->idempotency_key))
                return false;
        for (size_t i = 0; i < j->n_parts; i++)
                if (j->parts[i].device != d->parts[i].device || j->parts[i].st != d->parts[i].st)
                        return false;
        return true;
}

struct job *job_checked(struct jobs *js, struct job *j)
{
        char id[JOB_ID_MAX], why[STORED_WHY_MAX] = "";
        struct job *d;

        assert_locked();
        if (!j || !j->unchecked)
                return j;
        snprintf(id, sizeof(id), "%s", j->id);
        /* Its row, through job_doc (already read if a look at the queue's head needed it). */
        _cleanup_json_ json_t *doc = json_incref(job_doc(j));
        if (!doc) {
                /* Not valid JSON, gone or unreadable (job_doc said which): dropped from memory
                 * only, as recovery skips such a row; the store keeps it for a restart. */
                job_drop(js, j);
                return NULL;
        }
        d = job_from_doc(doc);
        if (!d || !job_same(j, d)) {
                /* The document says something else than its columns (written by hand, or
                 * damaged): it is the truth, as it is for every other recovered job. */
                log_warning("store: job %s: its stored document and its columns disagree; "
                            "recovered from the document",
                            id);
                job_free(d);
                job_drop(js, j);
                int r = recover_doc(js, doc, false);
                if (r < 0)
                        log_error_errno(r, "store: job %s cannot be recovered: %m", id);
                return job_find(js, id);
        }
        job_free(d);
        /* job_compact below gives its tree up again unless the judgement wrote it. */
        j->unchecked = false;
        js->rec.unchecked--;
        bool malformed = spec_validate_stored(doc, why, sizeof(why)) < 0;
        (void)recover_judge(js, j, doc, malformed ? why : NULL);
        job_compact(j);
        return j;
}

size_t jobs_check_recovered(struct jobs *js, size_t max)
{
        size_t left;

        core_lock();
        if (!js->rec.checks_started_ms)
                js->rec.checks_started_ms = jobs_monotonic_ms(js);
        /* The recovered jobs are among the first in the index (recovery appended them before
         * any submission), so the walk is short once they are checked. */
        for (size_t k = 0; k < js->n_jobs && max > 0 && js->rec.unchecked > 0;) {
                struct job *j = js->jobs[k];
                if (!j->unchecked) {
                        k++;
                        continue;
                }
                size_t n = js->n_jobs;
                job_checked(js, j);
                max--;
                /* A job dropped or recovered again moved the index: start over from here. */
                if (js->n_jobs == n)
                        k++;
        }
        left = js->rec.unchecked;
        if (left == 0 && js->rec.recovered_unchecked) {
                log_info("store: the %zu waiting jobs recovered unchecked are checked, in %" PRIu64
                         " ms after start-up (%u jobs changed by recovery in all)",
                         js->rec.recovered_unchecked,
                         jobs_monotonic_ms(js) - js->rec.checks_started_ms, js->rec.changed);
                js->rec.recovered_unchecked = 0;
        }
        jobs_unlock(js);
        return left;
}
