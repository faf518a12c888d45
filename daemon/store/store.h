/* The durable job store: STATE_DIR/umd.db, SQLite in WAL mode with synchronous commits. Owns
 * the database, its writer thread (which groups concurrent writes into one transaction), the
 * pool of reader connections, the lock that keeps a second umd off the state directory, the
 * one-time import of the old jobs/<id>.json files and background retention. Keeps no job in
 * memory and never decides about a job's state: the job subsystem (daemon/jobs/) does both.
 *
 * The store never parses a job: a job is handed over as its row (struct store_row), made by the
 * job subsystem (daemon/jobs/job_doc.c): the public document's bytes, exactly as the API serves
 * them, beside indexed columns and the internal extras (request, created_ms, finished_ms); reads
 * hand those bytes back (struct store_text) for job_doc to parse. Even the old store's JSON files
 * (the one-time import, `umd --export`) are read and written by the job subsystem
 * (store_set_files). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blob.h"
#include "uuid.h"

struct store;
struct store_ticket;

/* Lock STATE_DIR/umd.lock (refusing a second instance), open or create STATE_DIR/umd.db (a
 * corrupt one is renamed to umd.db.corrupt-<time> and replaced), import STATE_DIR/jobs once,
 * start the writer. 0 or -errno, logged (-EBUSY: another umd holds the state directory). */
int store_open(const char *state_dir, struct store **ret);
/* Bound the write-ahead log (wal_max_bytes): a WAL past three quarters of bytes after a commit
 * is truncated by a TRUNCATE checkpoint (the quarter left is for what commits meanwhile), any WAL
 * once the writer has been idle a second, and journal_size_limit caps what a WAL reset leaves.
 * Without a call the WAL is checkpointed passively only. */
void store_set_wal_max(struct store *s, uint64_t bytes);
/* A commit someone waits for waits up to us microseconds for as many waiters as the last one
 * served (0: never waits; the default until this is called). */
void store_set_commit_gather(struct store *s, uint64_t us);
/* What the WAL's policy did since store_open: commits seen, passive checkpoints asked for (one
 * per CHECKPOINT_PAGES of WAL growth at most), restarts past wal_max_bytes (the next commit
 * writes the WAL from its start; the file keeps its length) and truncations (to nothing) when
 * the writer was idle. For tests, benchmarks and /metrics. */
struct store_wal_stats {
        uint64_t commits, checkpoints, restarts, idle_truncations;
        /* Job changes the writer's batches committed, and of those the ones an answer waited
         * for (a submit, a cancel, a read of a change not yet written): with commits, how
         * much each commit shared. */
        uint64_t changes, waited_changes;
        /* Of those changes, the ones written: a job's whole row (a document) or a part's state
         * alone. A change that a later one of its job in the same batch replaces is written
         * by neither (changes less both). */
        uint64_t documents_written, parts_written;
};
void store_wal_stats(struct store *s, struct store_wal_stats *ret);
/* Commit what is queued, stop the writer, close everything. */
void store_close(struct store *s);

/* ---- writes: the store takes prepared row bytes, never a job's JSON ----
 *
 * A job's row as the writer binds it, made by the job subsystem (daemon/jobs/job_doc.c): the
 * public document's bytes (doc: exactly what the API serves), its summary (what lists serve: the
 * same bytes less the parts' results; summary == doc when no part has one), the indexed columns
 * and the internal extras (request, created_ms, finished_ms). Every pointer is malloc'd and
 * freed by store_row_free (a zeroed row is fine). */
struct store_part_row {
        char *uuid, *state, *verdict;
};
struct store_row {
        char id[UUID_STRING_MAX];
        char *state, *benchmark, *client, *idem, *request, *priority;
        int64_t created_ms, finished_ms;
        bool finished, cancel_requested;
        bool fresh; /* a new job's first write (store_put_row): none of its parts' rows exist */
        char *doc, *summary;
        size_t doc_len, sum_len;
        struct store_part_row *parts;
        size_t n_parts;
};
void store_row_free(struct store_row *row);

/* How a queued write's row is made, later, from what its caller queued (src, opaque to the
 * store): by the thread that queued it once it lets core_lock go, or by the writer when it
 * reaches the change first, and never for a change that a later one of its job in the same batch
 * writes again. make fills *ret (all but id, which the store sets) and returns 0, or -errno
 * (logged; src is kept and make tried again once alone); it runs on any thread, without
 * core_lock, so src must not change at the levels make reads while it is queued. drop releases
 * src, once, after a make succeeded or when the change is dropped. */
struct store_row_maker {
        int (*make)(void *src, struct store_row *ret);
        void (*drop)(void *src);
};

/* Queue a write of job id's whole row, made by maker from src (taken, whatever the outcome).
 * With ret_ticket, the caller must wait for, call back or poll it; without, a failure is only
 * logged. 0, -EINVAL (id not a UUID) or -ENOMEM, logged; nothing is queued on failure. */
int store_put(struct store *s, const char *id, const struct store_row_maker *maker, void *src,
              struct store_ticket **ret_ticket);
/* Queue a write of a row made already (*row taken, whatever the outcome, and zeroed): a new
 * job's first (a submit: fresh set, so the writer knows its parts' rows are not there). Once
 * committed, the ticket (required) keeps the bytes of the public document its write carried, for
 * store_ticket_wait, so that the answer needs no dump of its own. 0, -EINVAL (no valid id) or
 * -ENOMEM, logged; nothing queued on failure. */
int store_put_row(struct store *s, struct store_row *row, struct store_ticket **ret_ticket);
/* Queue a write of part idx's state alone (state must live as long as the program: a
 * job_state_names string), the job's document left as it is: a part's start, which a restart
 * must find (to say the part was interrupted rather than run it again), costs a small row
 * instead of the job's whole one. With doc (taken, whatever the outcome; doc_len long) also the
 * part's own document, newer than the job's: a part's end while other parts of its job run
 * (issue 23: "write what changed"). The job's columns and lists show its last whole row until
 * the next store_put, which clears the part's document; store_recover hands both on
 * (store_open_job.parts) for recovery to lay over the document. With ret_ticket (a part's start
 * that its worker is sent only once committed, job_start.c) the caller waits for, calls back or
 * polls it; without, a failure to commit is logged. 0, -EINVAL (no valid id) or -ENOMEM,
 * logged; nothing is queued on failure. */
int store_put_part(struct store *s, const char *job_id, size_t idx, const char *state, char *doc,
                   size_t doc_len, struct store_ticket **ret_ticket);
/* ---- tickets: a write's outcome, learnt one way each ----
 *
 * Waited on: block until the ticket's commit and free it (a wait makes the writer commit what
 * is queued now, rather than after STORE_LAZY_MS): 0, or -errno when it was not committed
 * (-ENOSPC: disk full, -EIO: anything else). With ret_doc, for a ticket of store_put_row whose
 * commit carried its document (not superseded by a later change of the same job in its batch),
 * those bytes too: *ret_doc (malloc'd, *ret_len long, the row's doc as put) is set only when 0 is
 * returned and they were kept; otherwise it is left untouched. */
int store_ticket_wait(struct store_ticket *t, char **ret_doc, size_t *ret_len);
/* Called back, without blocking a thread: 1 when t is committed (or failed) already; 0 when
 * ready(arg) will be called once, from the writer's thread with the store's lock held (so it must
 * be quick and take no lock of the store's), when it is. Like a wait, it makes the writer commit
 * what is queued now. Either way t stays the caller's, for store_ticket_wait, which then returns
 * at once; a store_ticket_wait before ready came takes its place (ready is then never called). */
int store_ticket_when_done(struct store_ticket *t, void (*ready)(void *arg), void *arg);
/* Polled: 1 with *ret_r set and the ticket freed when committed (or failed); 0 while pending. A
 * ticket only polled is committed within STORE_LAZY_MS, with whatever else came meanwhile. */
int store_ticket_poll(struct store_ticket *t, int *ret_r);
/* How many tickets have finished (committed or failed) since store_open; it only grows, and
 * reading it takes no lock (0 for NULL). A caller that polls tickets can skip looking while it
 * stands still: no ticket finished meanwhile. */
uint64_t store_commits(struct store *s);
/* Wait until everything queued so far is committed (read-your-writes for queries); like
 * store_ticket_wait, it ends the writer's wait for more changes. */
void store_sync(struct store *s);

/* One unfinished job as store_recover reads it: its columns and its parts' rows, from indexes
 * alone, so that recovery can queue a waiting job without reading its document; and, when the
 * callback asks for it, its internal document as JSON text (the stored document with request and
 * created_ms added to it as bytes). Nothing of it is checked: it is what the disk holds. Valid
 * during the callback only, but for text: the callback may take it (setting text to NULL), and
 * then frees it. */
struct store_open_part {
        const char *uuid, *state; /* NULL where the parts table has no row for this index */
        const char *doc; /* the part's own document (store_put_part with a document), or NULL */
};
struct store_open_job {
        const char *id, *state, *client, *idempotency_key;
        const char *priority; /* NULL: the row predates the column (schema 1) */
        int cancel_requested; /* 0 or 1; -1: the row predates the column */
        int64_t created_ms;
        char *text; /* NULL until the callback returns STORE_OPEN_WANT_TEXT */
        size_t text_len;
        const struct store_open_part *parts;
        size_t n_parts; /* the highest idx in the parts table, plus one */
};
/* A callback's answer: call me again with text (NULL then only when the row has no document). */
#define STORE_OPEN_WANT_TEXT 1
/* Unfinished jobs (no finished_ms), in id order. The callback returns 0, STORE_OPEN_WANT_TEXT,
 * or <0 to abort. 0 or -errno. */
typedef int (*store_open_fn)(struct store_open_job *job, void *userdata);
int store_recover(struct store *s, store_open_fn fn, void *userdata);

/* ---- reads: bytes and columns, which the job subsystem parses (job_doc.c) ----
 *
 * A job's row as read back: its public document's bytes (doc, doc_len long, NUL-terminated), and
 * from the internal reads its extras (request NULL when the row has none). Freed by
 * store_text_free (a zeroed one is fine). */
struct store_text {
        char *doc;
        size_t doc_len;
        char *request;
        int64_t created_ms;
        bool finished; /* finished_ms is set */
        int64_t finished_ms;
};
void store_text_free(struct store_text *t);
/* The public document of job id (any case): doc alone. 0, -ENOENT or -errno; *ret untouched on
 * failure. */
int store_get(struct store *s, const char *id, struct store_text *ret);
/* Its document with the extras (request, created_ms, finished_ms): what a job held only in the
 * store reads back. 0, -ENOENT, -EIO or -ENOMEM. */
int store_get_internal(struct store *s, const char *id, struct store_text *ret);
/* store_get_internal of each of ids[0, n) in one read transaction: ret[i] its row, or zeroed
 * (doc NULL) when it is not there or cannot be read (logged). 0, or -errno (logged) when nothing
 * could be read (every ret[i] zeroed). */
int store_get_internal_many(struct store *s, const char *const *ids, size_t n,
                            struct store_text *ret);
/* Keep up to max_bytes of finished jobs' documents in memory for store_get_finished (0: no
 * cache). Once, before reads start. 0 or -ENOMEM. */
int store_set_cache(struct store *s, uint64_t max_bytes);
/* The stored bytes of job id (the document the API serves) and their ETag, as a reference the
 * caller drops with blob_unref. Only for a job that is finished and out of the jobs' memory: its
 * bytes never change again, so they are cached (retention and any later write drop them).
 * 0, -ENOENT or -errno. */
int store_get_finished(struct store *s, const char *id, struct blob **ret);
/* The newest job with this idempotency key and client (NULL matches NULL): its public document
 * and the request body it was submitted with (request "" when it has none). 0, -ENOENT or
 * -errno. */
int store_find_idempotent(struct store *s, const char *key, const char *client,
                          struct store_text *ret);

struct store_query {
        const char *state;     /* NULL: any */
        const char *benchmark; /* NULL: any */
        const char *uuid;      /* a part on this device; NULL: any */
        /* Whether a job's public document (doc, len long) is listed; NULL: every one. What
         * the columns cannot filter (a label), matched by the job subsystem, which parses. */
        bool (*match)(const char *doc, size_t len, void *arg);
        void *match_arg;
        const char *before; /* id cursor, exclusive; NULL: none */
        const char *after;  /* id cursor, exclusive: newer than this; NULL: none */
        uint64_t since_ms;  /* created at or after; 0: none */
        uint64_t until_ms;  /* created before; 0: none */
        size_t limit;
        bool with_results; /* whole public documents, up to max_bytes of them (one at least) */
        uint64_t max_bytes;
};
/* Summaries (public documents without results), or whole documents with with_results, newest
 * first, as a JSON array's text made of the stored bytes: *ret_text (malloc'd), its length, how
 * many jobs, the last one's id ("" for none); *ret_more when more match. 0 or -errno. */
int store_list_raw(struct store *s, const struct store_query *q, char **ret_text, size_t *ret_len,
                   size_t *ret_n, char ret_last[UUID_STRING_MAX], bool *ret_more);
/* The public documents of finished health jobs with a part on device uuid that carries a verdict,
 * newest first, at most max, skipping job exclude_id; passing_only: that part's verdict "pass"
 * and its state succeeded. Each is handed to fn (doc, len long, valid during the call), which
 * returns 0, or <0 to stop (then returned). 0 or -errno. */
int store_health_docs(struct store *s, const char *uuid, const char *exclude_id, bool passing_only,
                      size_t max, int (*fn)(const char *doc, size_t len, void *arg), void *arg);

/* Ask the writer to delete finished jobs beyond max_jobs, older than retention_days (0: no age
 * limit), or beyond max_bytes in total (0: no limit), oldest first, in small transactions when
 * it has nothing else to do. Returns at once. */
void store_retention(struct store *s, unsigned max_jobs, unsigned retention_days,
                     uint64_t max_bytes);
/* Jobs stored (committed). */
size_t store_count(struct store *s);
/* PRAGMA quick_check over the whole file, on a thread of its own (once, after READY: start-up
 * does not wait for it). 0 or -errno, logged. store_close interrupts it. */
int store_check_start(struct store *s);
enum store_check {
        STORE_CHECK_PENDING, /* not started, running, or could not run (logged) */
        STORE_CHECK_OK,
        STORE_CHECK_DAMAGED,
};
enum store_check store_check_state(const struct store *s);
/* What the check found wrong with the file, or NULL (also while it runs): the store then runs,
 * but some finished jobs cannot be read. Never changes once set. */
const char *store_damage(const struct store *s);
/* The indexes start-up found disagreeing with their tables and rebuilt (store_repair.c),
 * comma-separated, or NULL when none. */
const char *store_repaired(const struct store *s);
/* 0 while the store commits; the -errno (-EROFS, -EIO, -ENOSPC) of its last commit while
 * every commit fails for the disk (store_health.c). No part is dispatched meanwhile. */
int store_commit_error(const struct store *s);
/* The writer's batches that failed for the disk since store_open. */
uint64_t store_commit_failures(const struct store *s);

/* The old store's job files (STATE_DIR/jobs/<id>.json, before SQLite) are the job subsystem's
 * format (daemon/jobs/job_files.c), which the store reaches through these, set once by main.c
 * before store_open or store_export: import reads every job file in dir and hands each good one's
 * row, in id order, to put (the row lent for the call; put returns 0 or <0 to stop), counting
 * the files set aside in *ret_corrupt (0 or -errno); export writes a stored row as dirfd/<id>.json
 * (0, -EBADMSG: not JSON, skipped, or -errno). Unset (a unit test), an import or export fails
 * with -ENOTSUP. */
struct store_files {
        int (*import)(const char *dir, int (*put)(struct store_row *row, void *ctx), void *ctx,
                      unsigned *ret_corrupt);
        int (*export)(int dirfd, const struct store_text *t);
};
void store_set_files(const struct store_files *f);

/* `umd --export DIR`: write every job in STATE_DIR/umd.db to DIR/<id>.json (internal form, the
 * old store's format). Reads a live database safely. 0 or -errno, logged. */
int store_export(const char *state_dir, const char *dir);
