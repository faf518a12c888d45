/* A job's persistence (job_persist.h): the only caller of the store's write API and of its
 * tickets (tests/lint/store-writers), and the one place that turns a job into what the store
 * writes (its document, a part's row, a part's own document, a new job's prepared write). It owns
 * when each change is written: a change an answer shows or waits for at once, a change nobody
 * waits for within JOB_PERSIST_DELAY_MS (the pending ring), so that the parts' ends of a job
 * usually meet in its final write; the final writes in flight (the finals), which keep a finished
 * job in memory until they commit (job_persist_prune) and are written again while they fail
 * (jobs_retry_unsaved, and until shutdown_timeout_s at shutdown); and the rows a list reads,
 * made whole before it (job_persist_rows_current_locked). Every write is queued under core_lock,
 * so writes keep the order of the changes. */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "job_doc.h"
#include "job_internal.h"
#include "job_persist.h"
#include "jobs.h"
#include "lock.h"
#include "log.h"
#include "store.h"

/* The first allocation of jobs_persist.finals and of the pending ring, in entries (each then
 * doubles): a burst of submits' ends fills the first ones within a second. */
#define FINALS_FIRST_CAP  64
#define PENDING_FIRST_CAP 256

/* ---- the object ---- */

void job_persist_init(struct jobs *js)
{
        js->persist.prune_seen_commits = UINT64_MAX;
}

void job_persist_free(struct jobs *js)
{
        struct jobs_persist *p = &js->persist;

        free(p->finals);
        p->finals = NULL;
        p->n_finals = p->cap_finals = 0;
        free(p->pending);
        p->pending = NULL;
        p->n_pending = p->cap_pending = p->pending_head = 0;
}

void job_persist_sync(struct jobs *js)
{
        store_sync(js->store);
}

/* ---- a job's life ---- */

void job_persist_release(struct job *j)
{
        if (j->persist.final_ticket)
                (void)store_ticket_wait(j->persist.final_ticket, NULL, NULL);
        j->persist.final_ticket = NULL;
}

/* j has a final write in flight: the prune is to look at it. */
static void finals_add(struct jobs *js, struct job *j)
{
        struct jobs_persist *p = &js->persist;

        if (j->persist.in_finals)
                return;
        if (p->n_finals == p->cap_finals) {
                size_t nc = p->cap_finals ? p->cap_finals * 2 : FINALS_FIRST_CAP;
                struct job **n = realloc(p->finals, nc * sizeof(*n));

                if (!n) {
                        p->finals_lost = true; /* the next prune walks every job */
                        return;
                }
                p->finals = n;
                p->cap_finals = nc;
        }
        p->finals[p->n_finals++] = j;
        j->persist.in_finals = true;
}

static void finals_forget(struct jobs *js, struct job *j)
{
        struct jobs_persist *p = &js->persist;

        if (!j->persist.in_finals)
                return;
        for (size_t k = 0; k < p->n_finals; k++)
                if (p->finals[k] == j) {
                        p->finals[k] = p->finals[--p->n_finals];
                        break;
                }
        j->persist.in_finals = false;
}

/* A whole write of j was queued: its row is its document again (row_behind cleared). */
static void row_current(struct jobs *js, struct job *j)
{
        if (!j->persist.row_behind)
                return;
        j->persist.row_behind = false;
        assert(js->persist.n_rows_behind > 0);
        js->persist.n_rows_behind--;
}

void job_persist_forget(struct jobs *js, struct job *j)
{
        finals_forget(js, j);
        row_current(js, j);
}

int job_persist_prepare_new(struct job *j, struct job_doc_new **ret)
{
        return job_doc_new_prepare(j->doc, ret);
}

void job_persist_prepared_free(struct job_doc_new *prepared)
{
        job_doc_new_free(prepared);
}

int job_persist_submit(struct jobs *js, struct job *j, struct job_doc_new *prepared,
                       struct store_ticket **ret_ticket)
{
        struct store_row row;
        int r = job_doc_new_row(prepared, j->id, &row);

        return r < 0 ? r : store_put_row(js->store, &row, ret_ticket);
}

int job_persist_submit_wait(struct store_ticket *t, char **ret_bytes, size_t *ret_len)
{
        return store_ticket_wait(t, ret_bytes, ret_len);
}

void job_persist_set_committed(struct job *j)
{
        j->persist.committed = true;
}

bool job_persist_committed(const struct job *j)
{
        return j->persist.committed;
}

bool job_persist_rewritten(const struct job *j)
{
        return j->persist.rewritten;
}

bool job_persist_settled(const struct job *j)
{
        return j->persist.committed && !j->persist.final_ticket && !j->persist.final_unsaved;
}

bool job_persist_final_pending(const struct job *j)
{
        return j->persist.final_unsaved || j->persist.final_ticket;
}

/* ---- changes ---- */

/* The job's whole row queued, made later from doc by job_doc.c's maker, outside core_lock: from a
 * snapshot of doc, or with final from doc itself, which changes no more (job_doc_source). 0 or
 * -errno, logged. */
static int put_doc(struct jobs *js, struct job *j, json_t *doc, bool final,
                   struct store_ticket **ret_ticket)
{
        void *src;
        int r = job_doc_source(doc, final, &src);

        return r < 0 ? r : store_put(js->store, j->id, &job_doc_maker, src, ret_ticket);
}

int job_persist(struct jobs *js, struct job *j)
{
        json_t *doc = job_doc(j);
        int r;

        j->persist.rewritten = true;
        if (!doc)
                return -ENOMEM;
        /* A final job's document changes no more (job_cancel.c puts a cancel back only once
         * its final write failed), so the writer may dump it as it is. */
        if (job_state_final(j->st) && !j->persist.final_ticket) {
                j->persist.final_committed = false; /* a newer final write: its ticket says */
                r = put_doc(js, j, doc, true, &j->persist.final_ticket);
                if (r == 0)
                        finals_add(js, j);
        } else
                r = put_doc(js, j, doc, job_state_final(j->st), NULL);
        if (r == 0) {
                j->persist.due_ms = 0; /* the whole document: the pending change with it */
                for (size_t i = 0; i < j->n_parts; i++)
                        j->parts[i].persist.unsaved = false;
                row_current(js, j);
        }
        return r;
}

void job_persist_part_changed(struct job *j, size_t i)
{
        j->parts[i].persist.unsaved = true;
}

size_t job_persist_rows_current_locked(struct jobs *js)
{
        size_t written = 0, left = 0;

        assert_locked();
        if (js->persist.n_rows_behind == 0)
                return 0;
        for (size_t k = 0; k < js->n_jobs; k++) {
                struct job *j = js->jobs[k];

                if (!j->persist.row_behind)
                        continue;
                if (job_persist(js, j) == 0)
                        written++;
                else
                        left++; /* logged; listed as its row says, tried again next list */
        }
        /* What the walk found is the truth should the count have drifted. */
        js->persist.n_rows_behind = left;
        return written;
}

/* Part i's own document with its state (job_doc_part_text), beside the job's row. 0 or -errno,
 * logged. */
static int put_part_doc(struct jobs *js, struct job *j, size_t i)
{
        const json_t *part = job_part_doc(j, i);
        char *text = NULL;
        size_t len = 0;

        if (part && !(text = job_doc_part_text(part, &len)))
                return log_error_errno(ENOMEM, "Cannot dump part %zu of job %s", i, j->id);
        return store_put_part(js->store, j->id, i, job_state_names[j->parts[i].st], text, len,
                              NULL);
}

/* A pending change fallen due (job_persist_soon): for a job not final, its parts that changed
 * since its last write, each as its own document, not the job's whole row. The change is mostly
 * a part's end while the job's other parts run (their queues drift apart): under a submit load a
 * third or more of the jobs were written whole once more for it, a dump of the job and its row
 * with its indexes each time (issue 23, "write what changed"). What the document holds above
 * the parts that changed meanwhile is the job's state and start, which recovery makes again
 * from the parts (job_recover.c). The whole document, as before, when it is final, when no part
 * says it changed, or when a part's write cannot be queued. */
static int persist_due(struct jobs *js, struct job *j)
{
        size_t n = 0;

        if (job_state_final(j->st) || !job_doc(j))
                return job_persist(js, j);
        for (size_t i = 0; i < j->n_parts; i++)
                n += j->parts[i].persist.unsaved;
        if (n == 0)
                return job_persist(js, j);
        for (size_t i = 0; i < j->n_parts; i++) {
                if (!j->parts[i].persist.unsaved)
                        continue;
                if (put_part_doc(js, j, i) < 0)
                        return job_persist(js, j); /* logged; the whole carries every part */
                j->parts[i].persist.unsaved = false;
        }
        j->persist.rewritten = true;
        j->persist.due_ms = 0;
        if (!j->persist.row_behind) {
                j->persist.row_behind = true;
                js->persist.n_rows_behind++;
        }
        return 0;
}

/* The part's row now (store_put_part), the document as a part's end's is (job_persist_soon):
 * mostly within its job's final write. A start's whole document was nearly half of the
 * documents a job's changes wrote under a submit load (issue 23); a restart still finds the
 * part running, since recovery lays the part's row over the document. */
void job_persist_part_started(struct jobs *js, struct job *j, size_t i)
{
        if (store_put_part(js->store, j->id, i, job_state_names[j->parts[i].st], NULL, 0, NULL) ==
            0)
                job_persist_soon(js, j);
        else
                (void)job_persist(js, j); /* out of memory (logged): the whole document */
}

int job_persist_part_started_waited(struct jobs *js, struct job *j, size_t i,
                                    struct store_ticket **ret_ticket)
{
        int r =
            store_put_part(js->store, j->id, i, job_state_names[JOB_RUNNING], NULL, 0, ret_ticket);

        if (r == 0) {
                job_persist_soon(js, j);
                return 0;
        }
        (void)job_persist(js, j); /* out of memory (logged): the whole document */
        return r;
}

/* At the ring's end (jobs_persist.pending); false: out of memory. */
static bool pending_push(struct jobs_persist *p, const struct job *j)
{
        if (p->n_pending == p->cap_pending) {
                size_t nc = p->cap_pending ? p->cap_pending * 2 : PENDING_FIRST_CAP;
                struct job_pending *n = malloc(nc * sizeof(*n));

                if (!n)
                        return false;
                /* Unrolled from the head, so that the ring starts at 0 again. */
                for (size_t k = 0; k < p->n_pending; k++)
                        n[k] = p->pending[(p->pending_head + k) % p->cap_pending];
                free(p->pending);
                p->pending = n;
                p->pending_head = 0;
                p->cap_pending = nc;
        }
        struct job_pending *e = &p->pending[(p->pending_head + p->n_pending) % p->cap_pending];
        memcpy(e->id, j->id, sizeof(e->id));
        e->due_ms = j->persist.due_ms;
        p->n_pending++;
        return true;
}

void job_persist_soon(struct jobs *js, struct job *j)
{
        struct jobs_persist *p = &js->persist;

        j->persist.rewritten = true;
        if (j->persist.due_ms)
                return; /* its first pending change sets when it is written */
        j->persist.due_ms = jobs_monotonic_ms(js) + JOB_PERSIST_DELAY_MS;
        if (!pending_push(p, j))
                p->pending_lost = true; /* the passes walk every job until none is pending */
        if (!p->due_ms || j->persist.due_ms < p->due_ms)
                p->due_ms = j->persist.due_ms;
}

void job_persist_shown(struct jobs *js, struct job *j)
{
        if (j->persist.due_ms)
                (void)job_persist(js, j); /* logged; it stays pending and is tried again */
}

/* A part's end before the job's (its result: the bulk of the document) waits, for
 * JOB_PERSIST_DELAY_MS at most, for the write of the job's final document, which carries it
 * (another part's start writes only that part's row). A final job's write may make room for
 * retention, and a final write that committed meanwhile lets its job leave memory. */
void job_persist_part_ended(struct jobs *js, struct job *j)
{
        if (job_state_final(j->st)) {
                job_persist(js, j);
                job_persist_retention(js);
        } else
                job_persist_soon(js, j);
        job_persist_prune(js);
}

/* Every job in memory looked at: after a job could not be listed, or written (out of memory). */
static void pending_walk(struct jobs *js, uint64_t upto)
{
        struct jobs_persist *p = &js->persist;

        for (size_t k = 0; k < js->n_jobs; k++) {
                struct job *j = js->jobs[k];
                uint64_t due = j->persist.due_ms;

                if (!due)
                        continue;
                if (due <= upto && persist_due(js, j) == 0)
                        continue;
                /* Not due yet, or out of memory (logged): the next pass. */
                if (!p->due_ms || due < p->due_ms)
                        p->due_ms = due;
        }
        if (!p->due_ms) { /* none pending: the ring is whole again (empty) */
                p->n_pending = 0;
                p->pending_head = 0;
                p->pending_lost = false;
        }
}

void job_persist_pending_locked(struct jobs *js, bool all)
{
        struct jobs_persist *p = &js->persist;

        assert_locked();
        uint64_t now = jobs_monotonic_ms(js);

        if (!p->due_ms || (!all && now < p->due_ms))
                return;
        p->due_ms = 0;
        /* What falls due within a quarter of the delay is written now too, so that a pass comes
         * four times per delay at most, not once per pending job. */
        uint64_t upto = all ? UINT64_MAX : now + JOB_PERSIST_DELAY_MS / 4;
        if (p->pending_lost) {
                pending_walk(js, upto);
                return;
        }
        while (p->n_pending > 0) {
                const struct job_pending *e = &p->pending[p->pending_head];

                if (e->due_ms > upto) {
                        p->due_ms = e->due_ms;
                        break;
                }
                struct job *j = job_find(js, e->id);
                p->pending_head = (p->pending_head + 1) % p->cap_pending;
                p->n_pending--;
                /* Gone, written since, or pending again since (a later entry has it). */
                if (!j || !j->persist.due_ms || j->persist.due_ms > upto)
                        continue;
                if (persist_due(js, j) < 0) {
                        /* Out of memory (logged): it stays pending, out of the ring's order. */
                        p->pending_lost = true;
                        p->due_ms = j->persist.due_ms;
                        return;
                }
        }
}

/* ---- a cancel ---- */

int job_persist_cancel(struct jobs *js, struct job *j, struct store_ticket **ret_ticket)
{
        json_t *doc = job_doc(j);
        int r;

        j->persist.rewritten = true; /* its own store_put below, not job_persist's */
        if (job_state_final(j->st))
                r = job_persist(js, j);
        else
                r = doc ? put_doc(js, j, doc, false, ret_ticket) : -ENOMEM;
        if (r == 0)
                row_current(js, j);
        return r;
}

int job_persist_cancel_wait(struct jobs *js, struct store_ticket *ticket)
{
        if (ticket)
                return store_ticket_wait(ticket, NULL, NULL);
        store_sync(js->store);
        return 0;
}

int job_persist_final_outcome_locked(struct job *j)
{
        int w = 0;

        assert_locked();
        if (!j->persist.final_ticket && j->persist.final_unsaved)
                w = -EIO;
        if (j->persist.final_ticket && store_ticket_poll(j->persist.final_ticket, &w) > 0) {
                j->persist.final_ticket = NULL;
                if (w < 0)
                        j->persist.final_unsaved = true;
                else
                        j->persist.final_committed = true; /* the ticket the prune polls is gone */
        }
        return w;
}

void job_persist_final_drop(struct job *j)
{
        j->persist.final_unsaved = false;
        if (j->persist.final_ticket) { /* the failed final write: nothing to wait for any more */
                (void)store_ticket_wait(j->persist.final_ticket, NULL, NULL);
                j->persist.final_ticket = NULL;
        }
}

/* ---- tickets ---- */

int job_persist_when_done(struct store_ticket *t, void (*fn)(void *arg), void *arg)
{
        return store_ticket_when_done(t, fn, arg);
}

int job_persist_poll(struct store_ticket *t, int *ret)
{
        return store_ticket_poll(t, ret);
}

int job_persist_wait(struct store_ticket *t)
{
        return store_ticket_wait(t, NULL, NULL);
}

/* Retention (max_jobs, retention_days, max_store_bytes) runs on the store's writer, in small
 * transactions, between writes. */
void job_persist_retention(struct jobs *js)
{
        store_retention(js->store, js->cfg->max_jobs, js->cfg->retention_days,
                        js->cfg->max_store_bytes);
}

/* ---- the finals: a finished job leaves memory once its final write commits ---- */

/* From then on the store answers for it. A failed write keeps the job here and is retried by
 * jobs_retry_unsaved (every store_retry_ms) and at shutdown. What the prune does with a final
 * job: free it (its final write committed, or a cancel saw it commit), keep it listed (its write
 * is still in flight), or drop it from the list (its write failed, final_unsaved, and
 * retry_unsaved writes it again; or a cancel was undone). */
enum prune_verdict { PRUNE_FREE, PRUNE_KEEP, PRUNE_DROP };

static enum prune_verdict prune_judge(struct job *j)
{
        int r;

        if (!job_state_final(j->st))
                return PRUNE_DROP;
        if (j->persist.final_ticket && store_ticket_poll(j->persist.final_ticket, &r) > 0) {
                j->persist.final_ticket = NULL;
                if (r == 0)
                        return PRUNE_FREE;
                j->persist.final_unsaved = true;
        }
        /* Its ticket polled by a cancel's answer, which waits for the commit: left here, every
         * job cancelled before it ran stayed in memory until a restart. */
        if (j->persist.final_committed && !j->persist.final_ticket)
                return PRUNE_FREE;
        return j->persist.final_ticket ? PRUNE_KEEP : PRUNE_DROP;
}

/* For jobs_sweep: whether j leaves memory, finals listed again from what stays. */
static bool prune_sweep_one(struct jobs *js, struct job *j)
{
        j->persist.in_finals = false;
        enum prune_verdict v = prune_judge(j);
        if (v == PRUNE_KEEP)
                finals_add(js, j);
        return v == PRUNE_FREE;
}

/* The old way, when a job could not be listed in finals: one pass over every job, and finals
 * made again from what stays. */
static void prune_walk_all(struct jobs *js)
{
        js->persist.n_finals = 0;
        js->persist.finals_lost = false;
        jobs_sweep(js, prune_sweep_one);
}

void job_persist_prune(struct jobs *js)
{
        struct jobs_persist *p = &js->persist;
        uint64_t commits = store_commits(js->store);
        size_t keep = 0, n_at = 0, *at;

        /* No ticket finished since the last look: nothing to prune. */
        if (commits == p->prune_seen_commits && !p->finals_lost)
                return;
        p->prune_seen_commits = commits;
        if (p->finals_lost || !(at = malloc((p->n_finals ?: 1) * sizeof(*at)))) {
                prune_walk_all(js);
                return;
        }
        /* Where each job to free stands in the index (a binary search: no walk of every job),
         * then one pass over the pointers from the first of them closes the gaps. */
        for (size_t k = 0; k < p->n_finals; k++) {
                struct job *j = p->finals[k];
                enum prune_verdict v = prune_judge(j);
                ssize_t i;

                if (v == PRUNE_KEEP) {
                        p->finals[keep++] = j;
                        continue;
                }
                j->persist.in_finals = false;
                if (v == PRUNE_DROP)
                        continue;
                i = job_index(js, j->id);
                if (i >= 0 && js->jobs[i] == j)
                        at[n_at++] = (size_t)i;
                else /* cannot happen: whatever frees an indexed job forgets it */
                        log_error("job %s: final but not in the index; left in memory", j->id);
        }
        p->n_finals = keep;
        if (n_at > 0)
                jobs_free_at(js, at, n_at);
        free(at);
}

/* With the lock held: queue again every final write that failed. The number of jobs still
 * waiting for a final commit (written again or still in flight). */
static size_t retry_unsaved_locked(struct jobs *js)
{
        assert_locked();
        size_t waiting = 0;

        job_persist_prune(js);
        for (size_t k = 0; k < js->n_jobs; k++) {
                struct job *j = js->jobs[k];

                if (j->persist.final_unsaved && !j->persist.final_ticket) {
                        j->persist.final_unsaved = false;
                        if (job_persist(js, j) < 0)
                                j->persist.final_unsaved = true;
                }
                if (j->persist.final_unsaved || j->persist.final_ticket)
                        waiting++;
        }
        return waiting;
}

void jobs_retry_unsaved(struct jobs *js)
{
        core_lock();
        (void)retry_unsaved_locked(js);
        jobs_unlock(js);
}

/* At shutdown, with the lock held and nothing else left to take it: a job that ended while its
 * final write failed (shown running, with not_stored, until a write of it commits: job_query.c)
 * loses its end to the restart, which reads it back interrupted. Writing it until it commits
 * keeps the end the worker reported; the wait is bounded by shutdown_timeout_s because systemd's
 * own stop timeout will not wait forever. */
static void flush_unsaved_locked(struct jobs *js)
{
        assert_locked();
        uint64_t deadline = jobs_monotonic_ms(js) + 1000ull * js->cfg->shutdown_timeout_s;
        struct timespec pause = {.tv_sec = js->cfg->store_retry_ms / 1000,
                                 .tv_nsec = (long)(js->cfg->store_retry_ms % 1000) * 1000000};
        size_t left;

        for (;;) {
                /* Wait for what is in flight, so each round knows what failed. */
                for (size_t k = 0; k < js->n_jobs; k++) {
                        struct job *j = js->jobs[k];

                        if (j->persist.final_ticket) {
                                if (store_ticket_wait(j->persist.final_ticket, NULL, NULL) < 0)
                                        j->persist.final_unsaved = true;
                                j->persist.final_ticket = NULL;
                        }
                }
                left = 0;
                for (size_t k = 0; k < js->n_jobs; k++)
                        left += js->jobs[k]->persist.final_unsaved;
                if (left == 0 || jobs_monotonic_ms(js) >= deadline)
                        break;
                nanosleep(&pause, NULL);
                (void)retry_unsaved_locked(js);
        }
        for (size_t k = 0; k < js->n_jobs; k++)
                if (js->jobs[k]->persist.final_unsaved)
                        log_error("job %s: its final state (%s) could not be written before "
                                  "shutdown_timeout_s (%us); the next start reads it as it was "
                                  "last stored",
                                  js->jobs[k]->id, job_state_names[js->jobs[k]->st],
                                  js->cfg->shutdown_timeout_s);
}

void job_persist_shutdown_locked(struct jobs *js)
{
        assert_locked();
        job_persist_pending_locked(js, true); /* what the next start should read back */
        /* And whole: a stopped store is read by more than recovery (umd --export). */
        job_persist_rows_current_locked(js);
        flush_unsaved_locked(js);
}
