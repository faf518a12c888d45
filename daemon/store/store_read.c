/* The store's reads (store.h, store_internal.h): a pool of reader connections (WAL never makes
 * them wait for the writer), the cache of finished jobs' documents as blob references (their
 * bytes never change, so a GET copies nothing under a lock), and the queries: by id, by
 * idempotency key, health history and lists. Never writes. */
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
    /* A job's internal document (store_internal_from_row's columns). */
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

static void cache_key(const char *id, char key[UUID_STRING_MAX])
{
        size_t i;

        for (i = 0; id[i] && i + 1 < UUID_STRING_MAX; i++)
                key[i] = (char)((id[i] >= 'A' && id[i] <= 'Z') ? id[i] + 32 : id[i]);
        key[i] = '\0';
}

static struct cache_slot *cache_slot_of(struct store *s, const char *key)
{
        return &s->cache[fnv1a_str(FNV1A_INIT, key) % CACHE_SLOTS];
}

/* With cache_mu held. */
static void cache_drop_slot(struct store *s, struct cache_slot *c)
{
        s->cache_bytes -= c->blob->len;
        blob_unref(c->blob);
        *c = (struct cache_slot){0};
}

void store_cache_evict(struct store *s, const char *id)
{
        char key[UUID_STRING_MAX];
        struct cache_slot *c;

        if (!s->cache)
                return;
        cache_key(id, key);
        pthread_mutex_lock(&s->cache_mu);
        c = cache_slot_of(s, key);
        if (strcmp(c->id, key) == 0)
                cache_drop_slot(s, c);
        pthread_mutex_unlock(&s->cache_mu);
}

void store_cache_free(struct store *s)
{
        for (size_t i = 0; s->cache && i < CACHE_SLOTS; i++)
                blob_unref(s->cache[i].blob);
        free(s->cache);
        s->cache = NULL;
        s->cache_bytes = 0;
}

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

int store_reader_take(struct store *s, struct reader **ret)
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
                e = store_prepare(r->db, rsql[i], &r->st[i]);
        if (e < 0) {
                reader_free(r);
                return e;
        }
        *ret = r;
        return 0;
}

/* Keep at most READERS_MAX idle connections: more threads than that are a burst. */
void store_reader_give(struct store *s, struct reader *r)
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

json_t *store_parse_text(sqlite3_stmt *st, int col)
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

void store_readers_close(struct store *s)
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

        r = store_reader_take(s, &rd);
        if (r < 0)
                return r;
        st = rd->st[which];
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                j = parse(st);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        store_reader_give(s, rd);
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
        return store_parse_text(st, 0);
}

int store_get(struct store *s, const char *id, json_t **ret)
{
        return get_tree(s, R_GET, parse_doc_column, id, ret);
}

int store_get_internal(struct store *s, const char *id, json_t **ret)
{
        return get_tree(s, R_INTERNAL, store_internal_from_row, id, ret);
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
        r = store_reader_take(s, &rd);
        if (r < 0)
                return log_error_errno(r, "SQLite: no reader for %zu jobs: %m", n);
        /* One read transaction: each read of its own began and ended one, and found the
         * connection's pages dropped by whatever committed since; rows submitted together share
         * their pages. */
        if (step_alone(rd->st[R_BEGIN]) < 0) {
                r = log_error_errno(EIO, "SQLite: cannot begin a read: %s", sqlite3_errmsg(rd->db));
                store_reader_give(s, rd);
                return r;
        }
        st = rd->st[R_INTERNAL];
        for (size_t i = 0; i < n; i++) {
                int rc;

                sqlite3_bind_text(st, 1, ids[i], -1, SQLITE_STATIC);
                rc = sqlite3_step(st);
                if (rc == SQLITE_ROW && !(ret[i] = store_internal_from_row(st)))
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
                store_reader_give(s, rd);
        return 0;
}

int store_set_cache(struct store *s, uint64_t max_bytes)
{
        if (max_bytes == 0 || s->cache)
                return 0;
        s->cache = calloc(CACHE_SLOTS, sizeof(*s->cache));
        if (!s->cache)
                return -ENOMEM;
        s->cache_max = max_bytes;
        return 0;
}

int store_get_finished(struct store *s, const char *id, struct blob **ret)
{
        char key[UUID_STRING_MAX];
        struct cache_slot *c = NULL;
        struct blob *b = NULL;
        struct reader *rd;
        sqlite3_stmt *st;
        int rc, r;

        cache_key(id, key);
        if (s->cache) {
                /* A reference, not a copy: the lock covers a compare and an increment. */
                pthread_mutex_lock(&s->cache_mu);
                c = cache_slot_of(s, key);
                if (strcmp(c->id, key) == 0)
                        b = blob_ref(c->blob);
                pthread_mutex_unlock(&s->cache_mu);
                if (b) {
                        *ret = b;
                        return 0;
                }
        }
        r = store_reader_take(s, &rd);
        if (r < 0)
                return r;
        st = rd->st[R_GET];
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        r = 0;
        if (rc == SQLITE_ROW) {
                const char *t = (const char *)sqlite3_column_text(st, 0);

                r = t ? blob_new(t, (size_t)sqlite3_column_bytes(st, 0), &b) : -ENOMEM;
        }
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        store_reader_give(s, rd);
        if (rc == SQLITE_DONE)
                return -ENOENT;
        if (rc != SQLITE_ROW)
                return log_error_errno(EIO, "SQLite: cannot read job %s: %s", id,
                                       sqlite3_errstr(rc));
        if (r < 0)
                return r;
        /* A document over a sixteenth of the cache would push out too much for one job. */
        if (s->cache && b->len <= s->cache_max / 16) {
                pthread_mutex_lock(&s->cache_mu);
                if (c->id[0])
                        cache_drop_slot(s, c);
                if (s->cache_bytes + b->len <= s->cache_max) {
                        c->blob = blob_ref(b);
                        s->cache_bytes += b->len;
                        memcpy(c->id, key, sizeof(key));
                }
                pthread_mutex_unlock(&s->cache_mu);
        }
        *ret = b;
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

        r = store_reader_take(s, &rd);
        if (r < 0)
                return r;
        st = rd->st[R_IDEM];
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        store_bind_text_or_null(st, 2, client);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
                j = store_parse_text(st, 0);
                req = strdup((const char *)sqlite3_column_text(st, 1) ?: "");
        }
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        store_reader_give(s, rd);
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
        r = store_reader_take(s, &rd);
        if (r < 0) {
                json_decref(out);
                return r;
        }
        st = rd->st[passing_only ? R_HEALTH_PASS : R_HEALTH];
        sqlite3_bind_text(st, 1, uuid, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, exclude_id ?: "", -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, (sqlite3_int64)max);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                _cleanup_json_ json_t *j = store_parse_text(st, 0);
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
        store_reader_give(s, rd);
        if (rc != SQLITE_DONE) {
                json_decref(out);
                return log_error_errno(EIO, "SQLite: cannot read health history: %s",
                                       sqlite3_errstr(rc));
        }
        *ret_parts = out;
        return 0;
}

/* The smallest UUIDv7 created at ms: ids are time-ordered, so a time range is an id range. */
static void id_floor(uint64_t ms, char buf[UUID_STRING_MAX])
{
        snprintf(buf, UUID_STRING_MAX, "%08x-%04x-0000-0000-000000000000",
                 (unsigned)((ms >> 16) & 0xffffffffu), (unsigned)(ms & 0xffff));
}

static sqlite3_stmt *list_stmt(struct reader *rd, unsigned mask)
{
        char sql[1024];
        size_t at;

        if (rd->list[mask])
                return rd->list[mask];
        /* With a device, walk that device's parts (newest first) and join the job: a GPU's
         * history over months never scans other GPUs' jobs. */
        if (mask & Q_UUID)
                at = (size_t)snprintf(sql, sizeof(sql),
                                      "SELECT j.%s, j.id FROM parts p CROSS JOIN jobs j ON "
                                      "j.id = p.job_id WHERE p.uuid = ?3",
                                      (mask & Q_DOC) ? "doc" : "summary");
        else
                at = (size_t)snprintf(sql, sizeof(sql), "SELECT j.%s, j.id FROM jobs j WHERE 1",
                                      (mask & Q_DOC) ? "doc" : "summary");
#define ADD(bit, cond)                                                                             \
        if ((mask & (bit)) && at < sizeof(sql))                                                    \
                at += (size_t)snprintf(sql + at, sizeof(sql) - at, " AND %s", cond);
        ADD(Q_STATE, "j.state = ?1");
        /* Implied by the state, said so that the planner takes the partial index of its kind
         * (store.c: jobs_state_final, jobs_open_cols). */
        ADD(Q_STATE,
            (mask & Q_FINAL) ? "j.state NOT IN ('queued', 'running')" : "j.finished_ms IS NULL");
        ADD(Q_BENCH, "j.benchmark = ?2");
        ADD(Q_BEFORE, (mask & Q_UUID) ? "p.job_id < ?4" : "j.id < ?4");
        ADD(Q_SINCE, (mask & Q_UUID) ? "p.job_id >= ?5" : "j.id >= ?5");
        ADD(Q_UNTIL, (mask & Q_UUID) ? "p.job_id < ?6" : "j.id < ?6");
        ADD(Q_AFTER, (mask & Q_UUID) ? "p.job_id > ?8" : "j.id > ?8");
#undef ADD
        if (at < sizeof(sql))
                snprintf(sql + at, sizeof(sql) - at, " ORDER BY %s DESC LIMIT ?7",
                         (mask & Q_UUID) ? "p.job_id" : "j.id");
        if (store_prepare(rd->db, sql, &rd->list[mask]) < 0)
                return NULL;
        return rd->list[mask];
}

static bool label_matches(const json_t *job, const struct store_query *q)
{
        const char *k;
        json_t *v;

        json_object_foreach(json_object_get(job, "labels"), k, v)
        {
                if (strlen(k) == q->label_key_len &&
                    strncmp(k, q->label_key, q->label_key_len) == 0 && json_is_string(v) &&
                    strcmp(json_string_value(v), q->label_value) == 0)
                        return true;
        }
        return false;
}

/* The states jobs_state_final leaves out (store.c), named as its condition names them. */
static bool state_is_open(const char *state)
{
        return strcmp(state, "queued") == 0 || strcmp(state, "running") == 0;
}

int store_list_raw(struct store *s, const struct store_query *q, char **ret_text, size_t *ret_len,
                   size_t *ret_n, char ret_last[UUID_STRING_MAX], bool *ret_more)
{
        char since[UUID_STRING_MAX], until[UUID_STRING_MAX], last[UUID_STRING_MAX] = "";
        unsigned mask = (q->state ? Q_STATE : 0) | (q->benchmark ? Q_BENCH : 0) |
                        (q->uuid ? Q_UUID : 0) | (q->before ? Q_BEFORE : 0) |
                        (q->since_ms ? Q_SINCE : 0) | (q->until_ms ? Q_UNTIL : 0) |
                        (q->after ? Q_AFTER : 0) | (q->with_results ? Q_DOC : 0) |
                        (q->state && !state_is_open(q->state) ? Q_FINAL : 0);
        uint64_t bytes = 0;
        struct reader *rd;
        sqlite3_stmt *st;
        char *buf = NULL;
        size_t len = 0, n = 0;
        FILE *f;
        bool more = false;
        int rc, r;

        r = store_reader_take(s, &rd);
        if (r < 0)
                return r;
        st = list_stmt(rd, mask);
        f = st ? open_memstream(&buf, &len) : NULL;
        if (!f) {
                store_reader_give(s, rd);
                return st ? -ENOMEM : -EIO;
        }
        fputc('[', f);
        id_floor(q->since_ms, since);
        id_floor(q->until_ms, until);
        store_bind_text_or_null(st, 1, q->state);
        store_bind_text_or_null(st, 2, q->benchmark);
        store_bind_text_or_null(st, 3, q->uuid);
        store_bind_text_or_null(st, 4, q->before);
        store_bind_text_or_null(st, 8, q->after);
        sqlite3_bind_text(st, 5, since, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 6, until, -1, SQLITE_STATIC);
        /* A label is matched here, not in SQL: then rows are read until the page is full. */
        sqlite3_bind_int64(st, 7, q->label_key ? -1 : (sqlite3_int64)q->limit + 1);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                const char *text = (const char *)sqlite3_column_text(st, 0);
                const char *id = (const char *)sqlite3_column_text(st, 1);
                size_t size = (size_t)sqlite3_column_bytes(st, 0);

                if (!text || !id)
                        continue;
                /* With results a page ends at max_bytes (but holds one job at least): the
                 * next cursor then picks up where it stopped. */
                if (q->with_results && n > 0 && bytes + size > q->max_bytes) {
                        more = true;
                        break;
                }
                if (q->label_key) {
                        json_t *j = store_parse_text(st, 0);
                        bool match = j && label_matches(j, q);

                        json_decref(j);
                        if (!match)
                                continue;
                }
                if (n == q->limit) {
                        more = true;
                        break;
                }
                /* The stored text is the document as the API serves it (json_dump_compact):
                 * a page is those bytes joined, never parsed and dumped again. */
                if (n > 0)
                        fputc(',', f);
                fwrite(text, 1, size, f);
                snprintf(last, sizeof(last), "%s", id);
                n++;
                bytes += size;
        }
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        store_reader_give(s, rd);
        fputc(']', f);
        if (fclose(f) != 0) {
                free(buf);
                return -ENOMEM;
        }
        if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
                free(buf);
                return log_error_errno(EIO, "SQLite: cannot list jobs: %s", sqlite3_errstr(rc));
        }
        *ret_text = buf;
        *ret_len = len;
        *ret_n = n;
        memcpy(ret_last, last, sizeof(last));
        *ret_more = more;
        return 0;
}

int store_list(struct store *s, const struct store_query *q, json_t **ret_jobs, bool *ret_more)
{
        char last[UUID_STRING_MAX];
        _cleanup_free_ char *text = NULL;
        size_t len = 0, n = 0;
        json_error_t err;
        json_t *arr;
        int r;

        r = store_list_raw(s, q, &text, &len, &n, last, ret_more);
        if (r < 0)
                return r;
        arr = json_loadb(text, len, 0, &err);
        if (!json_is_array(arr)) {
                json_decref(arr);
                return log_error_errno(EBADMSG, "store: a listed job is not valid JSON");
        }
        *ret_jobs = arr;
        return 0;
}
