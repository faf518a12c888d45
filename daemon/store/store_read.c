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

#include "jsonraw.h"
#include "jsonutil.h"
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
    /* A job's internal document (store_read_internal_from_row's columns). */
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

json_t *store_read_parse_text(sqlite3_stmt *st, int col)
{
        const char *t = (const char *)sqlite3_column_text(st, col);
        size_t len = (size_t)sqlite3_column_bytes(st, col);
        json_error_t err;
        json_t *j;

        if (!t)
                return NULL;
        /* umd wrote it with json_dump_compact (results spliced in as the worker's canonical
         * bytes): built without jansson's parser, a third of a read-back job's dispatch. */
        j = json_canonical_load(t, len, STORE_JSON_DEPTH);
        if (j && (json_is_object(j) || json_is_array(j)))
                return j;
        json_decref(j);
        return json_parse_strict(t, len, STORE_JSON_DEPTH, &err);
}

/* The internal form back from the row: the public document plus the bookkeeping columns. */
json_t *store_read_internal_from_row(sqlite3_stmt *st)
{
        json_t *j = store_read_parse_text(st, 0);

        if (!j)
                return NULL;
        if (sqlite3_column_type(st, 1) != SQLITE_NULL)
                json_object_set_new(j, "request",
                                    json_string((const char *)sqlite3_column_text(st, 1)));
        json_object_set_new(j, "created_ms", json_integer(sqlite3_column_int64(st, 2)));
        if (sqlite3_column_type(st, 3) != SQLITE_NULL)
                json_object_set_new(j, "finished_ms", json_integer(sqlite3_column_int64(st, 3)));
        return j;
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

/* Job id's row by statement `which`, made a tree by `parse`. 0, -ENOENT, -EBADMSG or -EIO. */
static int get_tree(struct store *s, int which, json_t *(*parse)(sqlite3_stmt *st), const char *id,
                    json_t **ret)
{
        struct reader *rd;
        sqlite3_stmt *st;
        json_t *j = NULL;
        int rc, r;

        r = store_read_take(s, &rd);
        if (r < 0)
                return r;
        st = rd->st[which];
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                j = parse(st);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        store_read_give(s, rd);
        if (rc == SQLITE_DONE)
                return -ENOENT;
        if (rc != SQLITE_ROW)
                return log_error_errno(EIO, "SQLite: cannot read job %s: %s", id,
                                       sqlite3_errstr(rc));
        if (!j)
                return log_error_errno(EBADMSG, "store: job %s is not valid JSON", id);
        *ret = j;
        return 0;
}

static json_t *parse_doc_column(sqlite3_stmt *st)
{
        return store_read_parse_text(st, 0);
}

int store_get(struct store *s, const char *id, json_t **ret)
{
        return get_tree(s, R_GET, parse_doc_column, id, ret);
}

int store_get_internal(struct store *s, const char *id, json_t **ret)
{
        return get_tree(s, R_INTERNAL, store_read_internal_from_row, id, ret);
}

static int step_alone(sqlite3_stmt *st)
{
        int rc = sqlite3_step(st);

        sqlite3_reset(st);
        return rc == SQLITE_DONE ? 0 : -EIO;
}

int store_get_internal_many(struct store *s, const char *const *ids, size_t n, json_t **ret)
{
        struct reader *rd;
        sqlite3_stmt *st;
        int r;

        assert(ids || n == 0);
        for (size_t i = 0; i < n; i++)
                ret[i] = NULL;
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
                if (rc == SQLITE_ROW && !(ret[i] = store_read_internal_from_row(st)))
                        log_error("store: job %s is not valid JSON", ids[i]);
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

int store_find_idempotent(struct store *s, const char *key, const char *client, json_t **ret_job,
                          char **ret_request)
{
        struct reader *rd;
        sqlite3_stmt *st;
        json_t *j = NULL;
        char *req = NULL;
        int rc, r;

        r = store_read_take(s, &rd);
        if (r < 0)
                return r;
        st = rd->st[R_IDEM];
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        store_rows_bind_text(st, 2, client);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
                j = store_read_parse_text(st, 0);
                req = strdup((const char *)sqlite3_column_text(st, 1) ?: "");
        }
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        store_read_give(s, rd);
        if (rc == SQLITE_DONE)
                return -ENOENT;
        if (rc != SQLITE_ROW || !j || !req) {
                json_decref(j);
                free(req);
                return log_error_errno(EIO, "store: cannot look up an idempotency key");
        }
        *ret_job = j;
        *ret_request = req;
        return 0;
}

int store_health_parts(struct store *s, const char *uuid, const char *exclude_id, bool passing_only,
                       size_t max, json_t **ret_parts)
{
        struct reader *rd;
        sqlite3_stmt *st;
        json_t *out = json_array();
        int rc, r;

        if (!out)
                return -ENOMEM;
        r = store_read_take(s, &rd);
        if (r < 0) {
                json_decref(out);
                return r;
        }
        st = rd->st[passing_only ? R_HEALTH_PASS : R_HEALTH];
        sqlite3_bind_text(st, 1, uuid, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, exclude_id ?: "", -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, (sqlite3_int64)max);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                _cleanup_json_ json_t *j = store_read_parse_text(st, 0);
                size_t i;
                json_t *p;

                json_array_foreach(json_object_get(j, "parts"), i, p)
                {
                        const char *u = json_string_value(json_object_get(p, "uuid"));
                        if (u && strcasecmp(u, uuid) == 0 && json_object_get(p, "verdict")) {
                                json_array_append(out, p);
                                break;
                        }
                }
        }
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        store_read_give(s, rd);
        if (rc != SQLITE_DONE) {
                json_decref(out);
                return log_error_errno(EIO, "SQLite: cannot read health history: %s",
                                       sqlite3_errstr(rc));
        }
        *ret_parts = out;
        return 0;
}
