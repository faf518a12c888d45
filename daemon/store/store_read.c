/* The store's reads (store.h, store_internal.h): a pool of reader connections (WAL never makes
 * them wait for the writer) that every read takes one of, and the reads by id (public or internal
 * document, one or several), by idempotency key and of health history. The finished jobs' cache
 * is store_cache.c's, lists are store_list.c's, recovery's read store_recover.c's. Never
 * writes. */
#include "store.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "store_internal.h"
#include "util.h"

static const char *const rsql[R_COUNT] = {
    [R_GET] = "SELECT doc FROM jobs WHERE id = ?1",
    [R_IDEM] = "SELECT doc, request FROM jobs WHERE idempotency_key = ?1 AND client IS ?2 "
               "ORDER BY id DESC LIMIT 1",
    /* The unfinished jobs' columns, from the covering partial index jobs_open_cols alone (the
     * planner's choice for this query; not forced with INDEXED BY, which would make every reader
     * fail to open should the index be missing): start-up reads no table page, so no document,
     * for a queue of any length. Their parts come by a second statement rather than a join, so
     * that the job's row stays valid, uncopied, while its parts are read (and a join made the
     * planner walk every job by id). */
    [R_OPEN] = "SELECT id, state, priority, cancel_requested, client, idempotency_key, "
               "created_ms FROM jobs WHERE finished_ms IS NULL ORDER BY id",
    /* The text of one of them, for the jobs recovery must parse: the request comes escaped as a
     * JSON string (SQLite's json_quote), ready to be put into the text. */
    [R_OPEN_TEXT] = "SELECT doc, json_quote(request), created_ms FROM jobs WHERE id = ?1",
    /* A job's internal document (text_from_row's columns, with internal). */
    [R_INTERNAL] = "SELECT doc, request, created_ms, finished_ms FROM jobs WHERE id = ?1",
    /* Their parts, by one walk of the parts table from the first of them on, in the order of
     * its key (store_recover merges it with R_OPEN, seeking again past a run of finished jobs'
     * parts): a search for each job's was half of start-up. */
    [R_OPEN_PARTS] = "SELECT job_id, idx, uuid, state, doc FROM parts WHERE job_id >= ?1 ORDER BY "
                     "job_id, idx",
    [R_HEALTH] = "SELECT j.doc FROM parts p CROSS JOIN jobs j ON j.id = p.job_id WHERE p.uuid = "
                 "?1 AND p.verdict IS NOT NULL AND p.job_id <> ?2 AND j.benchmark = 'health' "
                 "ORDER BY p.job_id DESC LIMIT ?3",
    [R_HEALTH_PASS] = "SELECT j.doc FROM parts p CROSS JOIN jobs j ON j.id = p.job_id WHERE "
                      "p.uuid = ?1 AND p.verdict = 'pass' AND p.state = 'succeeded' AND "
                      "p.job_id <> ?2 AND j.benchmark = 'health' ORDER BY p.job_id DESC LIMIT ?3",
    /* Around several reads that belong together (store_get_internal_many). */
    [R_BEGIN] = "BEGIN",
    [R_END] = "COMMIT",
};

/* ---- readers ---- */

static void reader_free(struct reader *r)
{
        if (!r)
                return;
        for (size_t i = 0; i < R_COUNT; i++)
                sqlite3_finalize(r->st[i]);
        for (size_t i = 0; i < Q_N; i++)
                sqlite3_finalize(r->list[i]);
        sqlite3_close(r->db);
        free(r);
}

int store_read_take(struct store *s, struct reader **ret)
{
        struct reader *r;
        int e;

        pthread_mutex_lock(&s->readers_mu);
        r = s->readers;
        if (r) {
                s->readers = r->next;
                /* n_readers counts the idle ones: without this, after READERS_MAX reads every
                 * reader given back was closed and every read opened the database again (a
                 * list cost 1.4 ms, mostly sqlite3_open and statement preparation). */
                s->n_readers--;
        }
        pthread_mutex_unlock(&s->readers_mu);
        if (r) {
                *ret = r;
                return 0;
        }
        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        e = store_db_open(s->db_path, false, &r->db);
        for (size_t i = 0; e == 0 && i < R_COUNT; i++)
                e = store_db_prepare(r->db, rsql[i], &r->st[i]);
        if (e < 0) {
                reader_free(r);
                return e;
        }
        *ret = r;
        return 0;
}

/* Keep at most READERS_MAX idle connections: more threads than that are a burst. */
void store_read_give(struct store *s, struct reader *r)
{
        bool keep;

        pthread_mutex_lock(&s->readers_mu);
        keep = s->n_readers < READERS_MAX;
        if (keep) {
                r->next = s->readers;
                s->readers = r;
                s->n_readers++;
        }
        pthread_mutex_unlock(&s->readers_mu);
        if (!keep)
                reader_free(r);
}

void store_text_free(struct store_text *t)
{
        if (!t)
                return;
        free(t->doc);
        free(t->request);
        *t = (struct store_text){0};
}

/* Column col's bytes, copied (NUL-terminated). false: NULL, or out of memory. */
static bool column_bytes(sqlite3_stmt *st, int col, char **ret, size_t *ret_len)
{
        const char *t = (const char *)sqlite3_column_text(st, col);
        size_t len = (size_t)sqlite3_column_bytes(st, col);

        if (!t)
                return false;
        *ret = strndup(t, len);
        if (ret_len)
                *ret_len = len;
        return *ret != NULL;
}

/* A row of (doc) or, with internal, of (doc, request, created_ms, finished_ms) into *ret. 0,
 * -EBADMSG (no document) or -ENOMEM. */
static int text_from_row(sqlite3_stmt *st, bool internal, struct store_text *ret)
{
        struct store_text t = {0};

        if (!column_bytes(st, 0, &t.doc, &t.doc_len))
                return sqlite3_column_type(st, 0) == SQLITE_NULL ? -EBADMSG : -ENOMEM;
        if (internal) {
                if (sqlite3_column_type(st, 1) != SQLITE_NULL &&
                    !column_bytes(st, 1, &t.request, NULL)) {
                        store_text_free(&t);
                        return -ENOMEM;
                }
                t.created_ms = sqlite3_column_int64(st, 2);
                t.finished = sqlite3_column_type(st, 3) != SQLITE_NULL;
                t.finished_ms = sqlite3_column_int64(st, 3);
        }
        *ret = t;
        return 0;
}

void store_read_close(struct store *s)
{
        while (s->readers) {
                struct reader *r = s->readers;
                s->readers = r->next;
                reader_free(r);
        }
        s->n_readers = 0;
}

/* ---- reads ---- */

/* Job id's row by statement `which` (R_GET: its document; R_INTERNAL: with the extras). 0,
 * -ENOENT, -EBADMSG, -ENOMEM or -EIO. */
static int get_text(struct store *s, int which, const char *id, struct store_text *ret)
{
        struct store_text t = {0};
        struct reader *rd;
        sqlite3_stmt *st;
        int rc, r, made = 0;

        r = store_read_take(s, &rd);
        if (r < 0)
                return r;
        st = rd->st[which];
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                made = text_from_row(st, which == R_INTERNAL, &t);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        store_read_give(s, rd);
        if (rc == SQLITE_DONE)
                return -ENOENT;
        if (rc != SQLITE_ROW)
                return log_error_errno(EIO, "SQLite: cannot read job %s: %s", id,
                                       sqlite3_errstr(rc));
        if (made < 0)
                return log_error_errno(-made, "store: cannot read job %s: %m", id);
        *ret = t;
        return 0;
}

int store_get(struct store *s, const char *id, struct store_text *ret)
{
        return get_text(s, R_GET, id, ret);
}

int store_get_internal(struct store *s, const char *id, struct store_text *ret)
{
        return get_text(s, R_INTERNAL, id, ret);
}

static int step_alone(sqlite3_stmt *st)
{
        int rc = sqlite3_step(st);

        sqlite3_reset(st);
        return rc == SQLITE_DONE ? 0 : -EIO;
}

int store_get_internal_many(struct store *s, const char *const *ids, size_t n,
                            struct store_text *ret)
{
        struct reader *rd;
        sqlite3_stmt *st;
        int r;

        assert(ids || n == 0);
        for (size_t i = 0; i < n; i++)
                ret[i] = (struct store_text){0};
        r = store_read_take(s, &rd);
        if (r < 0)
                return log_error_errno(r, "SQLite: no reader for %zu jobs: %m", n);
        /* One read transaction: each read of its own began and ended one, and found the
         * connection's pages dropped by whatever committed since; rows submitted together share
         * their pages. */
        if (step_alone(rd->st[R_BEGIN]) < 0) {
                r = log_error_errno(EIO, "SQLite: cannot begin a read: %s", sqlite3_errmsg(rd->db));
                store_read_give(s, rd);
                return r;
        }
        st = rd->st[R_INTERNAL];
        for (size_t i = 0; i < n; i++) {
                int rc;

                sqlite3_bind_text(st, 1, ids[i], -1, SQLITE_STATIC);
                rc = sqlite3_step(st);
                if (rc == SQLITE_ROW && (r = text_from_row(st, true, &ret[i])) < 0)
                        log_error("store: cannot read job %s: %s", ids[i], strerror(-r));
                else if (rc != SQLITE_ROW && rc != SQLITE_DONE)
                        log_error("SQLite: cannot read job %s: %s", ids[i], sqlite3_errstr(rc));
                sqlite3_reset(st);
                sqlite3_clear_bindings(st);
        }
        if (step_alone(rd->st[R_END]) < 0)
                log_warning("SQLite: ending a read: %s", sqlite3_errmsg(rd->db));
        /* A connection still in its transaction would read that snapshot forever, and hold the
         * WAL from being reset: closed, never given back. */
        if (!sqlite3_get_autocommit(rd->db))
                reader_free(rd);
        else
                store_read_give(s, rd);
        return 0;
}

int store_find_idempotent(struct store *s, const char *key, const char *client,
                          struct store_text *ret)
{
        struct store_text t = {0};
        struct reader *rd;
        sqlite3_stmt *st;
        int rc, r, made = -EIO;

        r = store_read_take(s, &rd);
        if (r < 0)
                return r;
        st = rd->st[R_IDEM];
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        store_rows_bind_text(st, 2, client);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
                made = text_from_row(st, false, &t);
                if (made == 0 &&
                    !(t.request = strdup((const char *)sqlite3_column_text(st, 1) ?: "")))
                        made = -ENOMEM;
        }
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        store_read_give(s, rd);
        if (rc == SQLITE_DONE)
                return -ENOENT;
        if (rc != SQLITE_ROW || made < 0) {
                store_text_free(&t);
                return log_error_errno(EIO, "store: cannot look up an idempotency key");
        }
        *ret = t;
        return 0;
}

int store_health_docs(struct store *s, const char *uuid, const char *exclude_id, bool passing_only,
                      size_t max, int (*fn)(const char *doc, size_t len, void *arg), void *arg)
{
        struct reader *rd;
        sqlite3_stmt *st;
        int rc, r;

        r = store_read_take(s, &rd);
        if (r < 0)
                return r;
        st = rd->st[passing_only ? R_HEALTH_PASS : R_HEALTH];
        sqlite3_bind_text(st, 1, uuid, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, exclude_id ?: "", -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, (sqlite3_int64)max);
        r = 0;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                const char *doc = (const char *)sqlite3_column_text(st, 0);

                if (doc && (r = fn(doc, (size_t)sqlite3_column_bytes(st, 0), arg)) < 0)
                        break;
        }
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        store_read_give(s, rd);
        if (r < 0)
                return r;
        if (rc != SQLITE_DONE)
                return log_error_errno(EIO, "SQLite: cannot read health history: %s",
                                       sqlite3_errstr(rc));
        return 0;
}
