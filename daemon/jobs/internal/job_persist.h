/* Private to the job files: how a job reaches the store (job_persist.c). That file is the only
 * caller of the store's write API, the store's tickets included (tests/lint/store-writers), and
 * the one place that turns a job into what the store writes: it decides when a change is written
 * (now, or within JOB_PERSIST_DELAY_MS), what is written (the whole document, a part's row, a
 * part's own document), and keeps the final writes in flight until they commit, when the job may
 * leave memory. The state that says so (struct job_persist_state in each job, struct
 * jobs_persist in the object) is touched by job_persist.c alone; the other job files call the
 * functions below, named for what the job needs. Everything here is guarded by core_lock unless
 * a function says it runs without it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct job;
struct jobs;
struct job_doc_new;
struct store_ticket;

/* How long a change nobody waits for may wait for its write (job_persist_soon: a part's start
 * or its end while other parts of the job are not final): longer than the parts of a job on every
 * GPU take to end one after another, so that they meet in its final write (they run from separate
 * queues, which drift apart: at 100 ms nearly every job of a drain was written once more, at a
 * second about a third of them); short beside a real benchmark. What a crash within it loses
 * was told to no one (an answer showing the job writes it first): the next start finds that
 * part as it was stored, running, and says it was interrupted, as if the crash had come a
 * second earlier. */
#define JOB_PERSIST_DELAY_MS 1000

/* ---- the object ---- */

void job_persist_init(struct jobs *js);
/* What jobs_persist holds, freed (the jobs themselves are the index's). */
void job_persist_free(struct jobs *js);
/* At shutdown, with the lock held and nothing else left to take it: every pending change
 * queued, every row made whole, and every final write written until it commits (within
 * shutdown_timeout_s). */
void job_persist_shutdown_locked(struct jobs *js);
/* Waits for what was queued to commit (read-your-writes), without core_lock. */
void job_persist_sync(struct jobs *js);

/* ---- a job's life ---- */

/* j is being freed: its final write, if any, waited for. */
void job_persist_release(struct job *j);
/* j leaves the index: no longer among the finals or the rows behind. */
void job_persist_forget(struct jobs *js, struct job *j);
/* A new job's first write, made before core_lock while its tree is the caller's alone (under an
 * id that job_persist_submit replaces). 0 or -errno. */
int job_persist_prepare_new(struct job *j, struct job_doc_new **ret);
void job_persist_prepared_free(struct job_doc_new *prepared);
/* The submission's write queued under j's id (prepared is taken either way); *ret_ticket is
 * waited on with job_persist_submit_wait or job_persist_when_done. 0 or -errno. */
int job_persist_submit(struct jobs *js, struct job *j, struct job_doc_new *prepared,
                       struct store_ticket **ret_ticket);
/* Without core_lock: the submission's commit waited for; its outcome, with the bytes it wrote
 * (*ret_bytes, the caller's; NULL when none were kept). */
int job_persist_submit_wait(struct store_ticket *t, char **ret_bytes, size_t *ret_len);
/* The submission committed: j may run. */
void job_persist_set_committed(struct job *j);
bool job_persist_committed(const struct job *j);
/* Whether a write was queued after its submission's (its row may not be its document). */
bool job_persist_rewritten(const struct job *j);
/* Committed, no final write in flight or failed: nothing the store must still be told. */
bool job_persist_settled(const struct job *j);
/* Final, but that state not yet committed (its write failed, or is in flight). */
bool job_persist_final_pending(const struct job *j);

/* ---- changes ---- */

/* Queue the job's current document for the writer (the whole of it). A finished job keeps a
 * ticket, so that it leaves memory (job_persist_prune) only once the store has it; other
 * changes are fire and forget (the writer logs a failure). 0 or -errno. */
int job_persist(struct jobs *js, struct job *j);
/* Part i's object in the document changed (written with the job's next write). */
void job_persist_part_changed(struct job *j, size_t i);
/* A change nobody waits for and no answer has shown (a part finished while the job is not
 * final): written within JOB_PERSIST_DELAY_MS by jobs_unlock, or sooner by any job_persist of
 * the job, so that the parts' ends usually go to the store as one final document. Written when
 * due, a job not final writes only its parts that changed, each as its own document. */
void job_persist_soon(struct jobs *js, struct job *j);
/* Part i just started: its state row is queued now (a restart must find it running), the
 * rest of the change as job_persist_soon's. */
void job_persist_part_started(struct jobs *js, struct job *j, size_t i);
/* As job_persist_part_started, the row's commit awaited: 0 with *ret_ticket to wait on
 * (job_persist_when_done, job_persist_poll, job_persist_wait), or -errno when it could not be
 * queued, and the whole document was queued instead (the part is then sent at once). */
int job_persist_part_started_waited(struct jobs *js, struct job *j, size_t i,
                                    struct store_ticket **ret_ticket);
/* A part of j ended (and j's state was made again): written as the job's final write when j
 * is final now, else within JOB_PERSIST_DELAY_MS; then the prune. */
void job_persist_part_ended(struct jobs *js, struct job *j);
/* Before an answer shows the job: its pending change, if any, is queued now (an answer only
 * shows what is committed or queued ahead of its job_persist_sync). */
void job_persist_shown(struct jobs *js, struct job *j);
/* Queue every pending change (all) or those whose delay has passed. */
void job_persist_pending_locked(struct jobs *js, bool all);
/* Before a list (which reads the jobs' rows): every job whose row is behind its parts' own
 * documents is written whole. Returns how many writes were queued (the caller waits for their
 * commit with job_persist_sync), 0 when none was behind. A job that cannot be written (out of
 * memory, logged) stays behind and is listed as its row says. With core_lock held. */
size_t job_persist_rows_current_locked(struct jobs *js);

/* ---- a cancel ---- */

/* The cancel's change of j queued: its final write when j is final now (*ret_ticket NULL:
 * its final ticket carries it), else its document with *ret_ticket to wait on. 0 or -errno. */
int job_persist_cancel(struct jobs *js, struct job *j, struct store_ticket **ret_ticket);
/* Without core_lock: the cancel's write committed (its ticket, or every write queued when
 * ticket is NULL, then 0). */
int job_persist_cancel_wait(struct jobs *js, struct store_ticket *ticket);
/* The outcome of a final job's commit, once job_persist_cancel_wait has returned: its final
 * ticket's, or -EIO when that write already failed. */
int job_persist_final_outcome_locked(struct job *j);
/* A cancel undone: j's final write, failed, is forgotten (j is open again). */
void job_persist_final_drop(struct job *j);

/* Old jobs deleted as retention says (queued to the store's writer). */
void job_persist_retention(struct jobs *js);

/* ---- the finals ---- */

/* Finished jobs whose final write committed (or that a cancel saw commit) leave memory: from then
 * on the store answers for them. Looks only when a ticket finished since its last look. */
void job_persist_prune(struct jobs *js);

/* ---- tickets ---- */

/* fn(arg) once t is done, from the writer's thread with the store's lock held (so it must be
 * quick); > 0: done already, fn never called. Either way t stays the caller's, to poll or wait. */
int job_persist_when_done(struct store_ticket *t, void (*fn)(void *arg), void *arg);
/* > 0 with its outcome in *ret when t is done (t is then gone), 0 when not yet. */
int job_persist_poll(struct store_ticket *t, int *ret);
/* Without core_lock when it can be: t's outcome, once done (t is then gone). */
int job_persist_wait(struct store_ticket *t);
