/* The store's writer (store.h, store_internal.h): one connection on its own thread that commits
 * every waiting change in one transaction (group commit), the checkpointer that keeps the WAL
 * bounded without making a submit wait for umd.db's fsync, tickets that say when a change is
 * durable, and background retention. Never reads for a client: store_read.c does. */
#include "store.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "jsonraw.h"
#include "jsonutil.h"
#include "lock.h"
#include "log.h"
#include "store_internal.h"
#include "util.h"

const char *const store_wsql[W_COUNT] = {
    [W_BEGIN] = "BEGIN IMMEDIATE",
    [W_COMMIT] = "COMMIT",
    [W_ROLLBACK] = "ROLLBACK",
    [W_UPSERT] = "INSERT INTO jobs (id, state, benchmark, client, idempotency_key, created_ms, "
                 "finished_ms, bytes, request, summary, doc, priority, cancel_requested) VALUES "
                 "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) ON CONFLICT (id) DO "
                 "UPDATE SET state = ?2, finished_ms = ?7, bytes = ?8, summary = ?10, doc = ?11, "
                 "priority = ?12, cancel_requested = ?13",
    /* The same change for a job whose row is there (all but its first write): the UPSERT
     * first tries the insert, building the whole record and searching the id's index for the
     * conflict, before it updates. Binds as W_UPSERT (?3-?6 and ?9 unused). */
    [W_UPDATE] = "UPDATE jobs SET state = ?2, finished_ms = ?7, bytes = ?8, summary = ?10, doc = "
                 "?11, priority = ?12, cancel_requested = ?13 WHERE id = ?1",
    [W_DEL_PARTS] = "DELETE FROM parts WHERE job_id = ?1 AND idx >= ?2",
    /* uuid is not SET when it is the same: an UPDATE that names an indexed column rewrites
     * the row's entry in that index whatever the value (parts_uuid was 4 of every commit's 23
     * pages), so a device that changed takes W_PART_DEVICE. */
    /* A document of the job carries each part: a part's own (doc) is no longer newer. */
    [W_UPSERT_PART] = "INSERT INTO parts (job_id, idx, uuid, state, verdict) VALUES (?1, ?2, ?3, "
                      "?4, ?5) ON CONFLICT (job_id, idx) DO UPDATE SET state = ?4, verdict = ?5, "
                      "doc = NULL WHERE uuid = ?3",
    /* A part of a job written before, on the device it had: one search of its key. */
    [W_PART_SAME] = "UPDATE parts SET state = ?4, verdict = ?5, doc = NULL WHERE job_id = ?1 AND "
                    "idx = ?2 AND uuid = ?3",
    [W_PART_DEVICE] = "UPDATE parts SET uuid = ?3, state = ?4, verdict = ?5, doc = NULL WHERE "
                      "job_id = ?1 AND idx = ?2",
    /* A part's start (store_put_part): one small row, no index touched (state is in none). */
    [W_PART_STATE] = "UPDATE parts SET state = ?3 WHERE job_id = ?1 AND idx = ?2",
    /* A part's end before its job's (store_put_part_doc): its row and its own document, no
     * index touched either; the verdict column waits for the job's document, which R_HEALTH
     * reads. */
    [W_PART_DOC] = "UPDATE parts SET state = ?3, doc = ?4 WHERE job_id = ?1 AND idx = ?2",
    [W_STATS] = "SELECT jobs, finished, bytes FROM stats",
    [W_OLD_BY_AGE] = "SELECT id FROM jobs WHERE finished_ms IS NOT NULL AND finished_ms < ?1 "
                     "ORDER BY finished_ms LIMIT ?2",
    [W_OLD_BY_ID] = "SELECT id FROM jobs WHERE finished_ms IS NOT NULL ORDER BY id LIMIT ?1",
    [W_DELETE] = "DELETE FROM jobs WHERE id = ?1",
    [W_EXISTS] = "SELECT 1 FROM jobs WHERE id = ?1",
};

/* ---- the public form of a job ---- */

/* What clients see: the internal document less the bookkeeping only umd needs; without results
 * for lists. Shallow: what lies below the top level and the part objects is shared, results kept
 * as the worker's bytes included (store_public_expand parses those, outside the caller's lock). */
json_t *store_public_copy(const json_t *doc, bool with_results)
{
        json_t *j = json_copy((json_t *)doc), *parts = json_array();
        size_t i;
        json_t *p;

        if (!j || !parts) {
                json_decref(j);
                json_decref(parts);
                return NULL;
        }
        json_object_del(j, "request");
        json_object_del(j, "created_ms");
        json_object_del(j, "finished_ms");
        json_array_foreach(json_object_get(doc, "parts"), i, p)
        {
                json_t *c = json_copy(p);
                if (c && !with_results)
                        json_object_del(c, "result");
                if (!c || json_array_append_new(parts, c) < 0) {
                        json_decref(j);
                        json_decref(parts);
                        return NULL;
                }
        }
        if (json_object_set_new(j, "parts", parts) < 0) {
                json_decref(j);
                return NULL;
        }
        return j;
}

int store_public_expand(json_t *pub)
{
        size_t i;
        json_t *p;

        json_array_foreach(json_object_get(pub, "parts"), i, p)
        {
                json_t *res = json_object_get(p, "result");

                if (json_raw_get(res, NULL, NULL) &&
                    json_object_set_new(p, "result", json_raw_tree(res)) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* ---- the writer ---- */

int store_wstep(struct store *s, sqlite3_stmt *st)
{
        int rc = sqlite3_step(st);

        sqlite3_reset(st);
        if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
                store_log_limited(s, STORE_LOG_STEP, "SQLite: %s: %s", sqlite3_sql(st),
                                  sqlite3_errmsg(s->wdb));
                return store_errno_from_sqlite(rc);
        }
        return 0;
}

void store_bind_text_or_null(sqlite3_stmt *st, int i, const char *v)
{
        if (v)
                sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
        else
                sqlite3_bind_null(st, i);
}

void store_row_free(struct store_row *row)
{
        if (!row)
                return;
        if (row->summary != row->doc)
                free(row->summary);
        free(row->doc);
        free(row->state);
        free(row->benchmark);
        free(row->client);
        free(row->idem);
        free(row->request);
        free(row->priority);
        for (size_t i = 0; i < row->n_parts; i++) {
                free(row->parts[i].uuid);
                free(row->parts[i].state);
                free(row->parts[i].verdict);
        }
        free(row->parts);
        *row = (struct store_row){0};
}

/* strdup that keeps NULL, setting *oom when a copy fails. */
static char *dup_or_null(const char *v, bool *oom)
{
        char *c;

        if (!v)
                return NULL;
        c = strdup(v);
        if (!c)
                *oom = true;
        return c;
}

/* What a part's result is dumped as before its bytes are spliced in: a string no parsed
 * document holds (it starts with NUL), which jansson writes as RESULT_MARK. */
#define RESULT_MARK_VALUE "\0result"
#define RESULT_MARK       "\"\\u0000result\""
#define RESULT_KEY        "\"result\":"

/* The bytes of a part's result: a raw node's own (the worker's compact dump), else its dump,
 * left in *ret_dump for the caller to free. 0 or -ENOMEM. */
static int result_bytes(const json_t *res, const char **ret, size_t *ret_len, char **ret_dump)
{
        if (json_raw_get(res, ret, ret_len))
                return 0;
        /* Every part of a job not yet final has one: a dump would cost more than the row's
         * other work for it. */
        if (json_is_null(res)) {
                *ret = "null";
                *ret_len = strlen("null");
                return 0;
        }
        *ret_dump = json_dump_compact(res, ret_len);
        if (!*ret_dump)
                return -ENOMEM;
        *ret = *ret_dump;
        return 0;
}

/* The row's document and summary from text, the public document dumped with each of its
 * n_results parts' result a mark: the document with the results' bytes in place of the marks,
 * the summary without the member at all (a dump of the parts without "result" is those bytes).
 * So a result is never parsed nor dumped again for the row, and the job is dumped once.
 * 0, -ENOMEM or -EINVAL (a mark not found: cannot be). */
static int splice_results(const char *text, size_t len, const json_t *parts, size_t n_results,
                          struct store_row *row)
{
        const size_t mark = strlen(RESULT_MARK), key = strlen(RESULT_KEY);
        size_t cap = len + 1, dpos = 0, spos = 0, dcur = 0, scur = 0, i, k = 0;
        char **dumps = calloc(n_results, sizeof(*dumps));
        const char **bytes = calloc(n_results, sizeof(*bytes));
        size_t *lens = calloc(n_results, sizeof(*lens));
        int r = -ENOMEM;
        json_t *p;

        if (!dumps || !bytes || !lens)
                goto out;
        json_array_foreach(parts, i, p)
        {
                const json_t *res = json_object_get(p, "result");

                if (!res)
                        continue;
                if (k == n_results || result_bytes(res, &bytes[k], &lens[k], &dumps[k]) < 0)
                        goto out;
                cap += lens[k++];
        }
        row->doc = malloc(cap);
        row->summary = malloc(len + 1);
        if (!row->doc || !row->summary)
                goto out;
        r = -EINVAL;
        for (k = 0; k < n_results; k++) {
                const char *at = memmem(text + dcur, len - dcur, RESULT_MARK, mark);
                size_t off, cut_from, cut_to;

                if (!at)
                        goto out;
                off = (size_t)(at - text);
                /* Never a part's first member ("device" sorts before it), but cut it right if
                 * it were: with the comma after it instead of the one before. */
                if (off >= key + 1 && memcmp(text + off - key, RESULT_KEY, key) == 0 &&
                    text[off - key - 1] == ',') {
                        cut_from = off - key - 1;
                        cut_to = off + mark;
                } else if (off >= key + 1 && memcmp(text + off - key, RESULT_KEY, key) == 0) {
                        cut_from = off - key;
                        cut_to = off + mark + (off + mark < len && text[off + mark] == ',');
                } else
                        goto out;
                memcpy(row->doc + dpos, text + dcur, off - dcur);
                dpos += off - dcur;
                memcpy(row->doc + dpos, bytes[k], lens[k]);
                dpos += lens[k];
                dcur = off + mark;
                memcpy(row->summary + spos, text + scur, cut_from - scur);
                spos += cut_from - scur;
                scur = cut_to;
        }
        memcpy(row->doc + dpos, text + dcur, len - dcur);
        row->doc_len = dpos + len - dcur;
        row->doc[row->doc_len] = '\0';
        memcpy(row->summary + spos, text + scur, len - scur);
        row->sum_len = spos + len - scur;
        row->summary[row->sum_len] = '\0';
        r = 0;
out:
        for (k = 0; dumps && k < n_results; k++)
                free(dumps[k]);
        free(dumps);
        free(bytes);
        free(lens);
        return r;
}

int store_row_from_job(const json_t *job, struct store_row *ret)
{
        const char *id = json_string_value(json_object_get(job, "id"));
        json_t *parts = json_object_get(job, "parts"), *fin = json_object_get(job, "finished_ms");
        _cleanup_json_ json_t *mark = NULL;
        _cleanup_free_ char *text = NULL;
        struct store_row row = {0};
        bool oom = false;
        size_t n_results = 0, len;
        json_t *p;
        size_t i;
        int r;

        if (!id || !uuid_is_valid(id) || !json_is_array(parts))
                return log_error_errno(EINVAL, "Refusing to store a job without id or parts");
        /* The public document is the internal one less three keys, dumped once as if it had
         * none of them (no new top level is built). The summary (what lists serve) is the same
         * bytes unless some part has a result, which is all a queued or running job ever has. */
        struct json_override ov[] = {
            {"request", NULL}, {"created_ms", NULL}, {"finished_ms", NULL}, {"parts", NULL}};
        size_t n_ov = 3; /* the fourth, the parts' results as marks, where some part has one */
        json_array_foreach(parts, i, p) n_results += json_object_get(p, "result") != NULL;
        if (n_results > 0) {
                /* Each part dumped as if its result were a mark: no part is copied for it. */
                mark = json_stringn_nocheck(RESULT_MARK_VALUE, sizeof(RESULT_MARK_VALUE) - 1);
                if (!mark)
                        goto oom;
                ov[n_ov++] = (struct json_override){"parts", NULL, "result", mark};
        }
        /* No result is in this dump (each is a mark, its bytes spliced in after), so nothing in
         * it is deeper than umd's dumper goes or other than UTF-8 (what jansson made): NULL is
         * out of memory. */
        text = json_dump_compact_with(job, ov, n_ov, &len);
        if (!text)
                goto oom;
        if (n_results == 0) {
                row.doc = text;
                text = NULL;
                row.doc_len = len;
                row.summary = row.doc;
                row.sum_len = row.doc_len;
        } else {
                r = splice_results(text, len, parts, n_results, &row);
                if (r == -EINVAL) {
                        store_row_free(&row);
                        return log_error_errno(EIO,
                                               "Job %s: a result's place not found in its "
                                               "dump",
                                               id);
                }
                if (r < 0)
                        goto oom;
        }

        str_copy_cut(row.id, sizeof(row.id), id);
        row.state = dup_or_null(json_string_value(json_object_get(job, "state")), &oom);
        row.benchmark = dup_or_null(json_string_value(json_object_get(job, "benchmark")), &oom);
        row.client = dup_or_null(json_string_value(json_object_get(job, "client")), &oom);
        row.idem = dup_or_null(json_string_value(json_object_get(job, "idempotency_key")), &oom);
        row.request = dup_or_null(json_string_value(json_object_get(job, "request")), &oom);
        row.priority = dup_or_null(json_string_value(json_object_get(job, "priority")), &oom);
        row.cancel_requested = json_is_true(json_object_get(job, "cancel_requested"));
        row.created_ms = json_integer_value(json_object_get(job, "created_ms"));
        row.finished = json_is_integer(fin);
        row.finished_ms = json_integer_value(fin);
        row.parts = calloc(json_array_size(parts) ?: 1, sizeof(*row.parts));
        if (!row.parts)
                goto oom;
        json_array_foreach(parts, i, p)
        {
                struct store_part_row *pr = &row.parts[row.n_parts++];

                pr->uuid = dup_or_null(json_string_value(json_object_get(p, "uuid")) ?: "", &oom);
                pr->state = dup_or_null(json_string_value(json_object_get(p, "state")) ?: "", &oom);
                pr->verdict = dup_or_null(
                    json_string_value(json_object_get(json_object_get(p, "verdict"), "verdict")),
                    &oom);
        }
        if (oom)
                goto oom;
        *ret = row;
        return 0;
oom:
        store_row_free(&row);
        return log_error_errno(ENOMEM, "Cannot serialise job %s", id);
}

/* Part i of row through st (W_UPSERT_PART, W_PART_SAME or W_PART_DEVICE, which bind alike). */
static int write_part(struct store *s, sqlite3_stmt *st, const struct store_row *row, size_t i)
{
        int r;

        sqlite3_bind_text(st, 1, row->id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)i);
        sqlite3_bind_text(st, 3, row->parts[i].uuid, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, row->parts[i].state, -1, SQLITE_STATIC);
        store_bind_text_or_null(st, 5, row->parts[i].verdict);
        r = store_wstep(s, st);
        sqlite3_clear_bindings(st);
        return r;
}

/* The job's own row through st (W_UPSERT or W_UPDATE, which bind alike). */
static int write_job(struct store *s, sqlite3_stmt *st, const struct store_row *row)
{
        int r;

        sqlite3_bind_text(st, 1, row->id, -1, SQLITE_STATIC);
        store_bind_text_or_null(st, 2, row->state);
        store_bind_text_or_null(st, 3, row->benchmark);
        store_bind_text_or_null(st, 4, row->client);
        store_bind_text_or_null(st, 5, row->idem);
        sqlite3_bind_int64(st, 6, row->created_ms);
        if (row->finished)
                sqlite3_bind_int64(st, 7, row->finished_ms);
        else
                sqlite3_bind_null(st, 7);
        sqlite3_bind_int64(st, 8,
                           (sqlite3_int64)(row->doc_len + row->sum_len +
                                           (row->request ? strlen(row->request) : 0)));
        store_bind_text_or_null(st, 9, row->request);
        sqlite3_bind_text(st, 10, row->summary, (int)row->sum_len, SQLITE_STATIC);
        sqlite3_bind_text(st, 11, row->doc, (int)row->doc_len, SQLITE_STATIC);
        store_bind_text_or_null(st, 12, row->priority);
        sqlite3_bind_int(st, 13, row->cancel_requested);
        r = store_wstep(s, st);
        sqlite3_clear_bindings(st);
        return r;
}

/* Write one job's rows inside the open transaction: binds only, no JSON. */
int store_write_row(struct store *s, const struct store_row *row)
{
        sqlite3_stmt *st;
        int r;

        /* A job written before is updated in place; should its row be gone all the same, the
         * UPSERT puts it back, as it always did. */
        r = write_job(s, s->w[row->fresh ? W_UPSERT : W_UPDATE], row);
        if (r == 0 && !row->fresh && sqlite3_changes(s->wdb) == 0)
                r = write_job(s, s->w[W_UPSERT], row);
        if (r < 0)
                return r;

        /* A part's row is updated in place (its key and, but for a document that says
         * otherwise, its device never change), so a state change rewrites one small row and
         * leaves the device index alone. */
        for (size_t i = 0; i < row->n_parts; i++) {
                if (!row->fresh) {
                        r = write_part(s, s->w[W_PART_SAME], row, i);
                        if (r < 0)
                                return r;
                        if (sqlite3_changes(s->wdb) > 0)
                                continue;
                }
                r = write_part(s, s->w[W_UPSERT_PART], row, i);
                if (r < 0)
                        return r;
                if (sqlite3_changes(s->wdb) == 0) { /* the row is there, on another device */
                        r = write_part(s, s->w[W_PART_DEVICE], row, i);
                        if (r < 0)
                                return r;
                }
        }
        /* Parts beyond the job's (none, unless a document shrank): gone. A new job's id is
         * new, so no row of it was there to go. */
        if (row->fresh)
                return 0;
        st = s->w[W_DEL_PARTS];
        sqlite3_bind_text(st, 1, row->id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)row->n_parts);
        r = store_wstep(s, st);
        sqlite3_clear_bindings(st);
        return r;
}

void store_read_stats(struct store *s)
{
        sqlite3_stmt *st = s->w[W_STATS];

        if (sqlite3_step(st) == SQLITE_ROW) {
                pthread_mutex_lock(&s->mu);
                s->count = (size_t)sqlite3_column_int64(st, 0);
                pthread_mutex_unlock(&s->mu);
        }
        sqlite3_reset(st);
}

/* ---- the prep list: rows made by the threads that queue changes ---- */

static void prep_unlink(struct store *s, struct store_ticket *t)
{
        if (!t->prep_prev && s->prep_head != t)
                return; /* not listed */
        if (t->prep_prev)
                t->prep_prev->prep_next = t->prep_next;
        else
                s->prep_head = t->prep_next;
        if (t->prep_next)
                t->prep_next->prep_prev = t->prep_prev;
        else
                s->prep_tail = t->prep_prev;
        t->prep_prev = t->prep_next = NULL;
}

/* Under mu: until the thread making t's row (prep_drain) has finished it, if one is. */
static void prep_wait_locked(struct store *s, struct store_ticket *t)
{
        if (atomic_load_explicit(&t->prep, memory_order_acquire) != PREP_BUSY)
                return;
        s->prep_waiting++;
        while (atomic_load_explicit(&t->prep, memory_order_acquire) == PREP_BUSY)
                pthread_cond_wait(&s->prep_done, &s->mu);
        s->prep_waiting--;
}

/* Under mu: t, out of prep_drain's reach, is the caller's to free. Its row, if a drain made
 * one that nobody took (a superseded change), freed. */
static void prep_release(struct store *s, struct store_ticket *t)
{
        prep_unlink(s, t);
        prep_wait_locked(s, t);
        store_row_free(&t->prep_row);
}

/* The changes this thread queued since it last drained, for it to make the rows of (prep_drain).
 * Past PREP_MINE_MAX in one hold of core_lock (retention, a queue failed at once) the rest are
 * left to the writer. */
#define PREP_MINE_MAX 8
static _Thread_local struct store_ticket *prep_mine[PREP_MINE_MAX];
static _Thread_local unsigned prep_n_mine;

/* Under mu: whether t is still on the prep list. The writer unlinks a ticket (prep_release)
 * before it frees it, so a ticket found here is alive; one not found is never dereferenced. */
static bool prep_listed(const struct store *s, const struct store_ticket *t)
{
        for (const struct store_ticket *l = s->prep_tail; l; l = l->prep_prev)
                if (l == t)
                        return true;
        return false;
}

/* Make the rows of the changes this thread queued, once it has let core_lock go (store_put asks
 * for it with core_after_unlock): the dumps are then neither under core_lock nor the one
 * writer's work. They were a thread's of their own (umd-store-prep), woken for every change:
 * two context switches a change, which cost more than the dump. A thread makes only its own, in
 * one hold of mu before and one after, so that sixteen HTTP threads do not queue on mu for
 * each other's. A ticket the writer reaches first it makes itself (PREP_OWNED), so neither
 * ever waits for the other but for the one ticket in hand. */
static void prep_drain(void)
{
        struct store *s = store_singleton;
        struct store_ticket *todo[PREP_MINE_MAX];
        unsigned n = 0;

        if (!s || prep_n_mine == 0)
                return;
        pthread_mutex_lock(&s->mu);
        for (unsigned i = 0; i < prep_n_mine; i++) {
                struct store_ticket *t = prep_mine[i];
                int st = PREP_NONE;

                if (s->stopping || !prep_listed(s, t))
                        continue;
                prep_unlink(s, t);
                if (atomic_compare_exchange_strong(&t->prep, &st, PREP_BUSY))
                        todo[n++] = t;
        }
        prep_n_mine = 0;
        pthread_mutex_unlock(&s->mu);
        if (n == 0)
                return;
        for (unsigned i = 0; i < n; i++) {
                struct store_ticket *t = todo[i];
                struct store_row row = {0};

                /* A failure (logged) leaves the snapshot to the writer, which tries again. */
                if (store_row_from_job(t->snap, &row) == 0) {
                        json_decref(t->snap);
                        t->snap = NULL;
                        t->prep_row = row;
                        atomic_store_explicit(&t->prep, PREP_DONE, memory_order_release);
                } else
                        atomic_store_explicit(&t->prep, PREP_NONE, memory_order_release);
                /* The writer may take t from here on: its row is not touched again. */
        }
        pthread_mutex_lock(&s->mu);
        if (s->prep_waiting)
                pthread_cond_broadcast(&s->prep_done);
        pthread_mutex_unlock(&s->mu);
}

/* The ticket's rows: prep_drain's if it made them, else made here from the snapshot, the
 * first time they are needed (a change that a later one of its batch writes again is never
 * dumped by the writer). 0, or -errno (logged) for this ticket. */
static int ticket_row(struct store *s, struct store_ticket *t)
{
        int st = PREP_NONE, r;

        while (!atomic_compare_exchange_strong(&t->prep, &st, PREP_OWNED)) {
                if (st == PREP_OWNED)
                        break; /* tried before: its row made, or its snapshot kept */
                if (st == PREP_DONE) {
                        char id[sizeof(t->row.id)];

                        memcpy(id, t->row.id, sizeof(id));
                        t->row = t->prep_row;
                        memcpy(t->row.id, id, sizeof(id));
                        memset(&t->prep_row, 0, sizeof(t->prep_row));
                        atomic_store_explicit(&t->prep, PREP_OWNED, memory_order_relaxed);
                        return 0;
                }
                /* PREP_BUSY: a drain is making it now; wait for that one dump. */
                pthread_mutex_lock(&s->mu);
                prep_wait_locked(s, t);
                pthread_mutex_unlock(&s->mu);
                st = PREP_NONE; /* PREP_DONE, or PREP_NONE when its dump failed */
        }
        if (!t->snap)
                return 0;
        r = store_row_from_job(t->snap, &t->row);
        if (r < 0)
                return r; /* the snapshot stays: the ticket is tried again alone */
        json_decref(t->snap);
        t->snap = NULL;
        return 0;
}

/* A part's state alone (store_put_part), or with its own document (store_put_part_doc). Its
 * row is there unless the job's first write failed or retention deleted the job: then nothing
 * changes, as nothing should. */
static int write_part_state(struct store *s, const struct store_ticket *t)
{
        sqlite3_stmt *st = s->w[t->row.doc ? W_PART_DOC : W_PART_STATE];
        int r;

        sqlite3_bind_text(st, 1, t->row.id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)t->part_idx);
        sqlite3_bind_text(st, 3, t->part_state, -1, SQLITE_STATIC);
        if (t->row.doc)
                sqlite3_bind_text(st, 4, t->row.doc, (int)t->row.doc_len, SQLITE_STATIC);
        r = store_wstep(s, st);
        sqlite3_clear_bindings(st);
        return r;
}

/* One transaction for the tickets in list; 0 or -errno for all of them. What it wrote is
 * added to *written once committed. */
static int commit_list(struct store *s, struct store_ticket *list, size_t max,
                       struct store_written *written)
{
        int r = store_wstep(s, s->w[W_BEGIN]);
        struct store_written w = {0};
        size_t n = 0;

        for (struct store_ticket *t = list; r == 0 && t && n < max; t = t->next, n++) {
                if (max != 1 && t->superseded)
                        continue;
                if (t->part_only) {
                        r = write_part_state(s, t);
                        w.parts++;
                        continue;
                }
                r = ticket_row(s, t);
                if (r == 0)
                        r = store_write_row(s, &t->row);
                w.documents++;
        }
        if (r == 0)
                r = store_wstep(s, s->w[W_COMMIT]);
        if (r < 0 && !sqlite3_get_autocommit(s->wdb))
                (void)store_wstep(s, s->w[W_ROLLBACK]);
        if (r == 0) {
                written->documents += w.documents;
                written->parts += w.parts;
        }
        return r;
}

/* The tickets of list in order, as an array of *ret_n (so that a batch can be walked from its
 * newest), and the size of an open-addressing table by job id for them: a power of two, at
 * least twice as many. NULL when out of memory (*ret_n is still set). */
static struct store_ticket **tickets_array(struct store_ticket *list, size_t *ret_n,
                                           size_t *ret_size)
{
        size_t n = 0, size = 16;
        struct store_ticket **arr;

        for (struct store_ticket *t = list; t; t = t->next)
                n++;
        while (size < 2 * n)
                size *= 2;
        *ret_n = n;
        *ret_size = size;
        arr = malloc((n ?: 1) * sizeof(*arr));
        n = 0;
        for (struct store_ticket *t = list; arr && t; t = t->next)
                arr[n++] = t;
        return arr;
}

/* Where a job id's probe starts in a table of size slots (a power of two): ids in any case. */
static size_t id_slot(const char *id, size_t size)
{
        uint64_t h = UINT64_C(14695981039346656037);

        for (const char *c = id; *c; c++)
                h = (h ^ (unsigned char)(*c | 0x20)) * UINT64_C(1099511628211);
        return h & (size - 1);
}

/* Mark each ticket whose rows a later document of the same job in batch writes again: they
 * would be replaced inside the same transaction, so writing them is work for nothing. A job's
 * running and final changes often meet in one batch. A part's state alone (part_only) is
 * superseded by a later document like any change, but supersedes nothing: the document before
 * it must still be written. Without memory for the tables nothing is marked. */
static void mark_superseded(struct store_ticket *batch)
{
        size_t n, size;
        struct store_ticket **arr, **tab = NULL;

        if (!batch || !batch->next)
                return;
        arr = tickets_array(batch, &n, &size);
        tab = calloc(size, sizeof(*tab)); /* per job: its latest document of those seen */
        if (!arr || !tab)
                goto out;
        for (size_t i = n; i-- > 0;) { /* from the newest: is a document of t's job later? */
                struct store_ticket *t = arr[i];
                size_t k;

                for (k = id_slot(t->row.id, size); tab[k]; k = (k + 1) & (size - 1))
                        if (strcasecmp(tab[k]->row.id, t->row.id) == 0)
                                break;
                if (tab[k])
                        t->superseded = true;
                else if (!t->part_only)
                        tab[k] = t;
        }
out:
        free(arr);
        free(tab);
}

/* Group commit: every ticket waiting goes into one transaction. Should it fail, each is tried
 * alone, so one job that cannot be written does not take the others down with it. */
static void commit_batch(struct store *s, struct store_ticket *batch, struct store_written *written)
{
        int r;

        mark_superseded(batch);
        r = commit_list(s, batch, SIZE_MAX, written);

        for (struct store_ticket *t = batch; t; t = t->next)
                t->r = r;
        if (r < 0 && batch->next) {
                /* Said, because a batch that fails every time still commits this way, a
                 * commit a change, and would otherwise be seen only as a slower writer. */
                store_log_limited(s, STORE_LOG_COMMIT,
                                  "store: a commit of several changes failed (%s); committing "
                                  "them one at a time",
                                  strerror(-r));
                for (struct store_ticket *t = batch; t; t = t->next)
                        t->r = commit_list(s, t, 1, written);
        }
        store_read_stats(s);
}

/* One small transaction of retention; true when there may be more to delete. */
static bool retention_step(struct store *s)
{
        unsigned max_jobs, days;
        uint64_t max_bytes;
        sqlite3_int64 finished = 0, bytes = 0;
        sqlite3_stmt *st = s->w[W_STATS], *sel = NULL;
        char ids[RETENTION_BATCH][UUID_STRING_MAX];
        size_t n = 0;
        int r;

        pthread_mutex_lock(&s->mu);
        max_jobs = s->max_jobs;
        days = s->retention_days;
        max_bytes = s->max_bytes;
        pthread_mutex_unlock(&s->mu);

        if (sqlite3_step(st) == SQLITE_ROW) {
                finished = sqlite3_column_int64(st, 1);
                bytes = sqlite3_column_int64(st, 2);
        }
        sqlite3_reset(st);

        if (days > 0) {
                sel = s->w[W_OLD_BY_AGE];
                sqlite3_bind_int64(
                    sel, 1, (sqlite3_int64)(now_realtime_ms() - (uint64_t)days * 86400000ull));
                sqlite3_bind_int64(sel, 2, RETENTION_BATCH);
                while (n < RETENTION_BATCH && sqlite3_step(sel) == SQLITE_ROW)
                        snprintf(ids[n++], UUID_STRING_MAX, "%s", sqlite3_column_text(sel, 0));
                sqlite3_reset(sel);
        }
        if (n == 0 && (finished > (sqlite3_int64)max_jobs ||
                       (max_bytes > 0 && bytes > (sqlite3_int64)max_bytes))) {
                sqlite3_int64 want = finished > (sqlite3_int64)max_jobs
                                         ? finished - (sqlite3_int64)max_jobs
                                         : 16; /* by bytes: a few at a time, then look again */
                sel = s->w[W_OLD_BY_ID];
                sqlite3_bind_int64(sel, 1, want < RETENTION_BATCH ? want : RETENTION_BATCH);
                while (n < RETENTION_BATCH && sqlite3_step(sel) == SQLITE_ROW)
                        snprintf(ids[n++], UUID_STRING_MAX, "%s", sqlite3_column_text(sel, 0));
                sqlite3_reset(sel);
        }
        if (n == 0)
                return false;
        r = store_wstep(s, s->w[W_BEGIN]);
        for (size_t i = 0; r == 0 && i < n; i++) {
                sqlite3_bind_text(s->w[W_DELETE], 1, ids[i], -1, SQLITE_STATIC);
                r = store_wstep(s, s->w[W_DELETE]);
        }
        if (r == 0)
                r = store_wstep(s, s->w[W_COMMIT]);
        if (r < 0) {
                if (!sqlite3_get_autocommit(s->wdb))
                        (void)store_wstep(s, s->w[W_ROLLBACK]);
                log_warning("retention: cannot delete %zu jobs: %s", n, strerror(-r));
                return false;
        }
        for (size_t i = 0; i < n; i++)
                store_cache_evict(s, ids[i]);
        log_debug("retention: deleted %zu finished jobs", n);
        store_read_stats(s);
        return true;
}

/* After each commit, on the writer's thread: pages is the WAL's length in pages. */
static int wal_hook(void *userdata, sqlite3 *db, const char *name, int pages)
{
        struct store *s = userdata;

        pthread_mutex_lock(&s->mu);
        s->wal_dirty = true;
        s->wal.commits++;
        /* A WAL shorter than at the last look was reset (a checkpoint had copied all of it and
         * no reader held it): count growth from its start again. */
        if ((unsigned)pages < s->ckpt_next_pages - CHECKPOINT_PAGES)
                s->ckpt_next_pages = CHECKPOINT_PAGES;
        /* Past three quarters of the bound, not past the bound: the restart runs after
         * this batch, and what commits meanwhile must still fit under wal_max_bytes (cut at
         * the bound itself, a 64 MiB WAL peaked at 64.3-65.5 MiB under a 60 s load). */
        if ((uint64_t)pages * (uint64_t)s->page_size > s->wal_max_bytes / 4 * 3) {
                s->wal_restart = true; /* the writer does it, after this batch */
        } else if ((unsigned)pages >= s->ckpt_next_pages) {
                /* Once per CHECKPOINT_PAGES of growth, not after every commit past the mark:
                 * while a reader keeps the WAL from being reset, a passive checkpoint cannot
                 * shorten it, and asking after each commit cost two fdatasyncs for 70-77% of
                 * commits (issue 23) to copy a few pages each. */
                s->ckpt_pending = true;
                s->ckpt_next_pages = (unsigned)pages + CHECKPOINT_PAGES;
                s->wal.checkpoints++;
        }
        /* The checkpointer times the writer's idleness from the last commit: it is woken to
         * arm that timer or to checkpoint, and reads the time itself when its wait ends. */
        s->last_commit_ms = now_monotonic_ms();
        if (s->ckpt_pending || !s->ckpt_armed)
                pthread_cond_signal(&s->ckpt);
        pthread_mutex_unlock(&s->mu);
        return SQLITE_OK;
}

/* Passive checkpoints never wait for anyone, but they only copy pages back into umd.db: the
 * WAL file itself stays at its peak (hundreds of MiB after a heavy hour) until umd stops.
 * So any WAL, once the writer has been idle for WAL_IDLE_TRUNCATE_MS, gets a TRUNCATE
 * checkpoint here, which waits (busy_timeout) for readers to leave the WAL's pages and then
 * cuts the file to nothing. A WAL past wal_max_bytes under load is restarted by the writer itself
 * (wal_restart_now): from this thread the checkpoint would have to win the write lock from a
 * writer that takes it back between every batch, and under steady submits it never did. */
#define WAL_IDLE_TRUNCATE_MS 1000

static void *checkpoint_main(void *userdata)
{
        struct store *s = userdata;

        pthread_mutex_lock(&s->mu);
        for (;;) {
                bool idle = false;

                while (!s->ckpt_pending && !s->stopping) {
                        if (s->wal_dirty) {
                                /* A write came: truncate once none has come for a while. */
                                s->wal_dirty = false;
                                s->ckpt_armed = true;
                        }
                        if (!s->ckpt_armed) {
                                pthread_cond_wait(&s->ckpt, &s->mu);
                                continue;
                        }
                        uint64_t now = now_monotonic_ms(),
                                 due = s->last_commit_ms + WAL_IDLE_TRUNCATE_MS;
                        if (now >= due) {
                                idle = true;
                                break;
                        }
                        struct timespec at;
                        deadline_after_ms(CLOCK_MONOTONIC, (unsigned)(due - now), &at);
                        (void)pthread_cond_timedwait(&s->ckpt, &s->mu, &at);
                }
                if (s->stopping)
                        break;
                bool truncate = idle;
                s->ckpt_pending = false;
                if (truncate)
                        s->ckpt_armed = false;
                pthread_mutex_unlock(&s->mu);
                int rc = sqlite3_wal_checkpoint_v2(
                    s->cdb, NULL, truncate ? SQLITE_CHECKPOINT_TRUNCATE : SQLITE_CHECKPOINT_PASSIVE,
                    NULL, NULL);
                pthread_mutex_lock(&s->mu);
                if (truncate)
                        s->wal.idle_truncations++;
                if (rc == SQLITE_OK && truncate)
                        s->ckpt_next_pages = CHECKPOINT_PAGES;
                if (rc == SQLITE_BUSY && truncate) {
                        /* A reader held on past WAL_TRUNCATE_WAIT_MS: another idle second. */
                        log_debug("SQLite: truncating the WAL of %s: busy", s->db_path);
                        s->wal_dirty = true;
                        s->last_commit_ms = now_monotonic_ms();
                } else if (rc != SQLITE_OK)
                        store_log_limited(s, STORE_LOG_CHECKPOINT, "SQLite: checkpoint of %s: %s",
                                          s->db_path, sqlite3_errmsg(s->cdb));
        }
        pthread_mutex_unlock(&s->mu);
        return NULL;
}

void store_wal_stats(struct store *s, struct store_wal_stats *ret)
{
        pthread_mutex_lock(&s->mu);
        *ret = s->wal;
        pthread_mutex_unlock(&s->mu);
}

void store_set_commit_gather(struct store *s, uint64_t us)
{
        pthread_mutex_lock(&s->mu);
        s->gather_us = us;
        pthread_mutex_unlock(&s->mu);
}

static uint64_t now_monotonic_us(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* Under mu, with a waited commit due: whether to wait for more to share it. A commit costs
 * about the same pages and fdatasync for one submit as for sixteen, and on a busy machine the
 * writer, committing the moment the first waiter arrives, took a few submits a commit while
 * sixteen clients were submitting (bench/store/phases: 0.25-0.54 fdatasyncs a job). So it
 * may wait, at most gather_us, for as many waiters as the last batch served: a lone client's
 * commit (one waiter, as before) never waits, and concurrent clients share more of each. A
 * sync (an answer about to be given) and a stop never wait. Off by default: under a
 * sustained load the writer is the bottleneck and the wait only idled it (bench/store/ratio,
 * bench/store/RESULTS.md). */
static bool gather_more(struct store *s, struct timespec *ret_until)
{
        if (!s->gather_us || s->flush_all || s->stopping || s->waiting >= s->last_waiting) {
                s->gather_until_us = 0;
                return false;
        }
        uint64_t now = now_monotonic_us();
        if (!s->gather_until_us)
                s->gather_until_us = now + s->gather_us;
        if (now >= s->gather_until_us) {
                s->gather_until_us = 0;
                return false;
        }
        ret_until->tv_sec = (time_t)(s->gather_until_us / 1000000);
        ret_until->tv_nsec = (long)(s->gather_until_us % 1000000) * 1000;
        return true;
}

void store_set_wal_max(struct store *s, uint64_t bytes)
{
        assert(s);
        assert(bytes > 0);
        pthread_mutex_lock(&s->mu);
        s->wal_max_bytes = bytes;
        s->wal_limit_set = true;
        /* Wake the writer: it applies journal_size_limit on its own connection. */
        pthread_cond_signal(&s->work);
        pthread_mutex_unlock(&s->mu);
}

/* On the writer's thread, between batches: the one writer needs no lock from anyone, so the
 * checkpoint waits only for readers still on older WAL pages (each a short query). Writes
 * queue meanwhile and go out as the next group commit. A RESTART, not a TRUNCATE: the next
 * commit writes the WAL again from its start, over blocks the file already has, where after a
 * truncation every commit until the next one grew the file, and each fdatasync then also wrote
 * the inode (the size) and the new blocks' metadata: a fifth of the writer's CPU a job on the
 * VM (bench/store/RESULTS.md). The file so keeps its peak, at most the bound
 * (journal_size_limit), until the writer is idle and the checkpointer truncates it. */
static void wal_restart_now(struct store *s)
{
        int rc;

        /* Commits wait while it runs: wait for readers a little, not busy_timeout's seconds. */
        sqlite3_busy_timeout(s->wdb, WAL_TRUNCATE_WAIT_MS);
        rc = sqlite3_wal_checkpoint_v2(s->wdb, NULL, SQLITE_CHECKPOINT_RESTART, NULL, NULL);
        sqlite3_busy_timeout(s->wdb, BUSY_TIMEOUT_MS);
        pthread_mutex_lock(&s->mu);
        s->wal.restarts++;
        if (rc == SQLITE_OK)
                s->ckpt_next_pages = CHECKPOINT_PAGES;
        pthread_mutex_unlock(&s->mu);

        if (rc == SQLITE_BUSY)
                log_debug("SQLite: restarting the WAL of %s: busy; tried again after the next "
                          "commit",
                          s->db_path);
        else if (rc != SQLITE_OK)
                store_log_limited(s, STORE_LOG_CHECKPOINT, "SQLite: restarting the WAL of %s: %s",
                                  s->db_path, sqlite3_errmsg(s->wdb));
}

/* The tickets the next batch commits, taken from the queue under mu. A commit that someone
 * waits for (a submit, a cancel) would otherwise carry every change queued a moment before it,
 * and under a load of submits a part's start was committed within a millisecond or two,
 * before its end came to make it worthless. So a change nobody waits for keeps its
 * STORE_LAZY_MS for the next batch, whatever commits meanwhile; its durability is what it was
 * (committed within that window), and what a client was told rides no kept ticket: waited
 * tickets always go, and a store_sync (an answer showing what is queued) takes everything.
 * A job's tickets keep their order: one is kept only when every later ticket of its job is
 * too. Without memory for the tables, everything goes, as before. */
struct store_ticket *store_take_batch(struct store *s, uint64_t now)
{
        struct store_ticket *all = s->head, *batch = NULL, *keep = NULL, **bt = &batch,
                            **kt = &keep, *keep_tail = NULL;
        struct slot {
                const char *id;
                bool keep;
        } *tab = NULL;
        struct store_ticket **arr = NULL;
        bool *kept = NULL;
        size_t n, size;

        s->head = s->tail = NULL;
        if (!s->urgent || s->flush_all || s->stopping)
                goto all;
        arr = tickets_array(all, &n, &size);
        kept = malloc((n ?: 1) * sizeof(*kept));
        tab = calloc(size, sizeof(*tab));
        if (!arr || !kept || !tab)
                goto all;
        for (size_t i = n; i-- > 0;) {
                struct store_ticket *t = arr[i];
                size_t k;

                for (k = id_slot(t->row.id, size); tab[k].id; k = (k + 1) & (size - 1))
                        if (strcasecmp(tab[k].id, t->row.id) == 0)
                                break;
                /* tab[k]: the nearest later ticket of the same job, if any. */
                kept[i] =
                    !t->waited && now < t->queued_ms + STORE_LAZY_MS && (!tab[k].id || tab[k].keep);
                tab[k].id = t->row.id;
                tab[k].keep = kept[i];
        }
        for (size_t i = 0; i < n; i++) {
                arr[i]->next = NULL;
                if (kept[i]) {
                        *kt = keep_tail = arr[i];
                        kt = &arr[i]->next;
                } else {
                        *bt = arr[i];
                        bt = &arr[i]->next;
                }
        }
        free(arr);
        free(kept);
        free(tab);
        s->head = keep;
        s->tail = keep_tail;
        if (keep)
                s->head_ms = keep->queued_ms;
        return batch;
all:
        free(arr);
        free(kept);
        free(tab);
        s->flush_all = false;
        return all;
}

/* t's own write carried the document (it was not superseded): its bytes move from the row to
 * t for store_wait_doc, and the summary, when it was the same buffer, goes with the row. */
static void ticket_keep_doc(struct store_ticket *t)
{
        t->kept_doc = t->row.doc;
        t->kept_len = t->row.doc_len;
        if (t->row.summary == t->row.doc)
                t->row.summary = NULL;
        t->row.doc = NULL;
}

/* What the batch's outcome says of the disk (store_health.c). */
static void note_batch(struct store *s, const struct store_ticket *batch)
{
        bool committed = false;
        int failed = 0;

        for (const struct store_ticket *t = batch; t; t = t->next) {
                if (t->r == 0)
                        committed = true;
                else if (!failed)
                        failed = t->r;
        }
        store_health_note_batch(s, committed, failed);
}

static void *writer_main(void *userdata)
{
        struct store *s = userdata;

        pthread_mutex_lock(&s->mu);
        for (;;) {
                while (!s->head && !s->stopping && !s->retention_pending && !s->wal_limit_set)
                        pthread_cond_wait(&s->work, &s->mu);
                if (s->wal_limit_set) {
                        char sql[64];

                        /* What a WAL reset (the first write after a whole checkpoint) leaves
                         * of the file: at most the bound. */
                        snprintf(sql, sizeof(sql), "PRAGMA journal_size_limit=%" PRIu64,
                                 s->wal_max_bytes);
                        s->wal_limit_set = false;
                        pthread_mutex_unlock(&s->mu);
                        if (sqlite3_exec(s->wdb, sql, NULL, NULL, NULL) != SQLITE_OK)
                                log_warning("SQLite: %s: %s", sql, sqlite3_errmsg(s->wdb));
                        pthread_mutex_lock(&s->mu);
                        continue;
                }
                if (s->head && !s->urgent && !s->stopping) {
                        uint64_t now = now_monotonic_ms();

                        /* Nobody waits yet: let more changes come for one commit. */
                        if (now < s->head_ms + STORE_LAZY_MS) {
                                struct timespec at;

                                deadline_after_ms(CLOCK_MONOTONIC,
                                                  (unsigned)(s->head_ms + STORE_LAZY_MS - now),
                                                  &at);
                                (void)pthread_cond_timedwait(&s->work, &s->mu, &at);
                                continue;
                        }
                }
                if (s->head) {
                        struct timespec until;

                        if (gather_more(s, &until)) {
                                (void)pthread_cond_timedwait(&s->work, &s->mu, &until);
                                continue;
                        }
                        struct store_ticket *batch = store_take_batch(s, now_monotonic_ms()), *next;
                        uint64_t n = 0;

                        s->urgent = false; /* those who wait, wait for this batch */
                        s->last_waiting = s->waiting;
                        s->waiting = 0;
                        if (!batch)
                                continue; /* all kept: whoever was urgent is answered already */
                        struct store_written written = {0};

                        pthread_mutex_unlock(&s->mu);
                        commit_batch(s, batch, &written);
                        note_batch(s, batch);
                        pthread_mutex_lock(&s->mu);
                        s->wal.documents_written += written.documents;
                        s->wal.parts_written += written.parts;
                        for (struct store_ticket *t = batch; t; t = next) {
                                next = t->next;
                                n++;
                                if (t->r == 0) { /* what /metrics counts: committed */
                                        s->wal.changes++;
                                        s->wal.waited_changes += t->waited;
                                }
                                prep_release(s, t);
                                if (t->keep_doc && t->r == 0 && t->row.doc)
                                        ticket_keep_doc(t);
                                store_row_free(&t->row);
                                json_decref(t->snap); /* superseded: never made into rows */
                                t->snap = NULL;
                                if (t->waited) {
                                        sem_t *waiter = t->waiter;
                                        void (*ready)(void *) = t->ready;
                                        void *ready_arg = t->ready_arg;

                                        /* From here the waiter may free t: it is read first. */
                                        atomic_store_explicit(&t->done, true, memory_order_release);
                                        if (waiter)
                                                sem_post(waiter);
                                        else if (ready)
                                                ready(ready_arg);
                                } else {
                                        if (t->r < 0)
                                                store_log_limited(s, STORE_LOG_CHANGE,
                                                                  "store: a job's change was not "
                                                                  "committed: %s",
                                                                  strerror(-t->r));
                                        free(t);
                                }
                        }
                        s->committed += n;
                        /* Not every store_wait: one woken for a ticket of a later batch costs
                         * a switch to sleep again, and sixteen submits wait at once. */
                        if (s->sync_waiters)
                                pthread_cond_broadcast(&s->done);
                        if (s->wal_restart) {
                                s->wal_restart = false;
                                pthread_mutex_unlock(&s->mu);
                                wal_restart_now(s);
                                pthread_mutex_lock(&s->mu);
                        }
                        continue;
                }
                if (s->stopping)
                        break;
                /* Nothing to write: one batch of retention, then look for writes again, so
                 * submits never wait behind a long delete. */
                pthread_mutex_unlock(&s->mu);
                bool more = retention_step(s);
                pthread_mutex_lock(&s->mu);
                if (!more)
                        s->retention_pending = false;
        }
        pthread_mutex_unlock(&s->mu);
        return NULL;
}

/* What the writer will dump of job: a new top level and new part objects, the rest shared. The
 * callers change a job only at those two levels (a key set to a new value), and leave what lies
 * below alone once it is in the document, so the writer can dump the copy without their lock
 * while they go on; jansson's reference counts are atomic. NULL: out of memory. */
static json_t *job_snapshot(const json_t *job)
{
        json_t *snap = json_copy((json_t *)job), *parts = json_array(), *p;
        size_t i;

        if (!snap || !parts)
                goto oom;
        json_array_foreach(json_object_get(job, "parts"), i, p)
        {
                if (json_array_append_new(parts, json_copy(p)) < 0)
                        goto oom;
        }
        if (json_object_set_new(snap, "parts", parts) < 0) {
                parts = NULL; /* taken, and freed, by the failed set */
                goto oom;
        }
        return snap;
oom:
        json_decref(parts);
        json_decref(snap);
        return NULL;
}

/* Under mu: t at the end of the writer's queue (and, unless part_only, of the prep list). */
static void ticket_queue_locked(struct store *s, struct store_ticket *t)
{
        if (s->tail)
                s->tail->next = t;
        else {
                s->head = t;
                s->head_ms = t->queued_ms;
                /* Only the first wakes the writer: it then waits STORE_LAZY_MS for more, or
                 * less when someone waits (store_wait, store_sync). */
                pthread_cond_signal(&s->work);
        }
        s->tail = t;
        s->queued++;
        if (!t->snap)
                return; /* a part's state, or a row made already: nothing for a drain */
        t->prep_prev = s->prep_tail;
        if (s->prep_tail)
                s->prep_tail->prep_next = t;
        else
                s->prep_head = t;
        s->prep_tail = t;
}

/* t to the writer's queue; with ret_ticket the caller keeps it (waits for or polls it). */
static void ticket_put(struct store *s, struct store_ticket *t, struct store_ticket **ret_ticket)
{
        t->waited = ret_ticket != NULL;
        t->queued_ms = now_monotonic_ms();
        pthread_mutex_lock(&s->mu);
        ticket_queue_locked(s, t);
        pthread_mutex_unlock(&s->mu);
        if (ret_ticket)
                *ret_ticket = t;
}

static int put(struct store *s, const json_t *job, bool shared, struct store_ticket **ret_ticket)
{
        const char *id = json_string_value(json_object_get(job, "id"));
        struct store_ticket *t;

        if (!id || !uuid_is_valid(id) || !json_is_array(json_object_get(job, "parts")))
                return log_error_errno(EINVAL, "Refusing to store a job without id or parts");
        t = calloc(1, sizeof(*t));
        if (!t)
                return log_error_errno(ENOMEM, "Cannot queue a job's change");
        /* The dumps (one, two when results must leave the summary) are made after the caller
         * has let core_lock go: by the caller's thread (prep_drain), or by the writer when it
         * reaches the change first (then only for a change no later one of its batch writes
         * again). Under the lock the caller pays a shallow copy, or a reference to a job that
         * no one changes again (store_put_final). */
        t->snap = shared ? json_incref((json_t *)job) : job_snapshot(job);
        if (!t->snap) {
                free(t);
                return log_error_errno(ENOMEM, "Cannot queue job %s's change", id);
        }
        str_copy_cut(t->row.id, sizeof(t->row.id), id);
        /* Only finished jobs are cached, and nothing writes those again; a write says the
         * cached bytes (if any) are no longer the truth all the same. */
        store_cache_evict(s, t->row.id);
        ticket_put(s, t, ret_ticket);
        if (prep_n_mine < PREP_MINE_MAX) {
                prep_mine[prep_n_mine++] = t;
                core_after_unlock(prep_drain);
        }
        return 0;
}

int store_put(struct store *s, const json_t *job, struct store_ticket **ret_ticket)
{
        return put(s, job, false, ret_ticket);
}

int store_put_final(struct store *s, const json_t *job, struct store_ticket **ret_ticket)
{
        return put(s, job, true, ret_ticket);
}

struct store_new {
        struct store_row row;
        /* Where the stand-in id's characters are in row.doc and in row.summary (a buffer of its
         * own when some part has a result, even a null one). */
        size_t id_at_doc, id_at_sum;
};

/* The offset of the top level's id in a document's bytes, just past its opening quote: keys
 * come sorted and those before "id" hold scalars only, so its first appearance as a key is the
 * top level's (a string holding the pattern has its quotes escaped). false: not there. */
static bool find_id(const char *doc, size_t len, const char *id, size_t *ret)
{
        char key[sizeof("\"id\":\"\"") + UUID_STRING_MAX];
        int n = snprintf(key, sizeof(key), "\"id\":\"%s\"", id);
        const char *at = memmem(doc, len, key, (size_t)n);

        if (!at)
                return false;
        *ret = (size_t)(at - doc) + strlen("\"id\":\"");
        return true;
}

int store_new_prepare(const json_t *job, struct store_new **ret)
{
        const char *id = json_string_value(json_object_get(job, "id"));
        struct store_new *p;
        int r;

        assert(ret);
        if (!id || !uuid_is_valid(id))
                return log_error_errno(EINVAL, "Refusing to store a job without id or parts");
        p = calloc(1, sizeof(*p));
        if (!p)
                return log_error_errno(ENOMEM, "Cannot queue a new job's write");
        r = store_row_from_job(job, &p->row);
        if (r < 0) {
                free(p);
                return r;
        }
        if (!find_id(p->row.doc, p->row.doc_len, id, &p->id_at_doc) ||
            !find_id(p->row.summary, p->row.sum_len, id, &p->id_at_sum)) {
                store_new_free(p);
                return log_error_errno(EINVAL, "Job %s: its id not found in its document", id);
        }
        *ret = p;
        return 0;
}

void store_new_free(struct store_new *p)
{
        if (!p)
                return;
        store_row_free(&p->row);
        free(p);
}

int store_put_new(struct store *s, struct store_new *p, const char *id,
                  struct store_ticket **ret_ticket)
{
        struct store_ticket *t;

        assert(p && ret_ticket);
        if (!id || !uuid_is_valid(id) || strlen(id) != strlen(p->row.id)) {
                store_new_free(p);
                return log_error_errno(EINVAL, "Refusing to store a new job under '%s': not an id",
                                       id ? id : "(none)");
        }
        t = calloc(1, sizeof(*t));
        if (!t) {
                store_new_free(p);
                return log_error_errno(ENOMEM, "Cannot queue job %s's change", id);
        }
        memcpy(p->row.doc + p->id_at_doc, id, strlen(id));
        if (p->row.summary != p->row.doc)
                memcpy(p->row.summary + p->id_at_sum, id, strlen(id));
        str_copy_cut(p->row.id, sizeof(p->row.id), id);
        p->row.fresh = true;
        t->row = p->row;
        free(p);
        /* Made already: no drain is asked for it, and the writer takes the row as it is. */
        atomic_init(&t->prep, PREP_OWNED);
        store_cache_evict(s, t->row.id);
        t->waited = true;
        t->keep_doc = true;
        t->queued_ms = now_monotonic_ms();
        pthread_mutex_lock(&s->mu);
        ticket_queue_locked(s, t);
        pthread_mutex_unlock(&s->mu);
        *ret_ticket = t;
        return 0;
}

/* The part's own document: its object compact, the result spliced in as its bytes (a worker's
 * raw node is dumped by no one). Member order is no matter: recovery parses it. NULL when out of
 * memory or the part cannot be dumped (nothing in it is deeper than umd's dumper goes, but a
 * caller that gets NULL writes the whole document instead, which says why). */
static char *part_doc_text(const json_t *part, size_t *ret_len)
{
        static const char key[] = "{\"result\":";
        const json_t *res = json_object_get(part, "result");
        struct json_override ov = {"result", NULL};
        _cleanup_free_ char *rest = NULL, *dump = NULL;
        const char *bytes;
        size_t rest_len, len;
        char *out;

        rest = res ? json_dump_compact_with(part, &ov, 1, &rest_len)
                   : json_dump_compact(part, &rest_len);
        if (!rest || rest_len < 2 || rest[0] != '{')
                return NULL;
        if (!res) {
                char *whole = rest;

                rest = NULL;
                *ret_len = rest_len;
                return whole;
        }
        if (result_bytes(res, &bytes, &len, &dump) < 0)
                return NULL;
        /* {"result":BYTES then, after a comma unless the rest is {}, the rest less its { */
        out = malloc(sizeof(key) - 1 + len + rest_len + 1);
        if (!out)
                return NULL;
        size_t n = sizeof(key) - 1;
        memcpy(out, key, n);
        memcpy(out + n, bytes, len);
        n += len;
        if (rest_len > 2)
                out[n++] = ',';
        memcpy(out + n, rest + 1, rest_len - 1);
        n += rest_len - 1;
        out[n] = '\0';
        *ret_len = n;
        return out;
}

int store_put_part(struct store *s, const char *job_id, size_t idx, const char *state)
{
        return store_put_part_doc(s, job_id, idx, state, NULL);
}

static int put_part(struct store *s, const char *job_id, size_t idx, const char *state,
                    const json_t *part, struct store_ticket **ret_ticket);

int store_put_part_doc(struct store *s, const char *job_id, size_t idx, const char *state,
                       const json_t *part)
{
        return put_part(s, job_id, idx, state, part, NULL);
}

int store_put_part_waited(struct store *s, const char *job_id, size_t idx, const char *state,
                          struct store_ticket **ret_ticket)
{
        assert(ret_ticket);
        return put_part(s, job_id, idx, state, NULL, ret_ticket);
}

static int put_part(struct store *s, const char *job_id, size_t idx, const char *state,
                    const json_t *part, struct store_ticket **ret_ticket)
{
        struct store_ticket *t;

        assert(state);
        assert(!part || json_is_object(part));
        if (!job_id || !uuid_is_valid(job_id))
                return log_error_errno(EINVAL, "Refusing to store a part of a job without id");
        t = calloc(1, sizeof(*t));
        if (!t)
                return log_error_errno(ENOMEM, "Cannot queue job %s's part change", job_id);
        if (part && !(t->row.doc = part_doc_text(part, &t->row.doc_len))) {
                free(t);
                return log_error_errno(ENOMEM, "Cannot dump part %zu of job %s", idx, job_id);
        }
        snprintf(t->row.id, sizeof(t->row.id), "%s", job_id);
        t->part_only = true;
        t->part_idx = idx;
        t->part_state = state;
        atomic_init(&t->prep, PREP_OWNED);
        ticket_put(s, t, ret_ticket);
        return 0;
}

/* store_internal.h: the store a ticket belongs to is needed to wait on its condition; tickets
 * keep none, so
 * there is one store per process and this points at it. */
struct store *store_singleton;

int store_wait(struct store_ticket *t)
{
        return store_wait_doc(t, NULL, NULL);
}

/* Each thread's own, for store_wait_doc: posted once per wait by the writer, so its count is
 * back to zero whenever the thread is not waiting. */
static _Thread_local sem_t wait_sem;
static _Thread_local bool wait_sem_ready;

/* Under mu, t not done: a commit is awaited, so the writer stops gathering more for it. */
static void awaited_locked(struct store *s)
{
        s->urgent = true; /* the writer stops waiting for more */
        s->waiting++;
        /* A gathering writer needs waking only once it has as many as it waits for. */
        if (!s->gather_until_us || s->waiting >= s->last_waiting)
                pthread_cond_signal(&s->work);
}

int store_when_done(struct store_ticket *t, void (*ready)(void *arg), void *arg)
{
        struct store *s = store_singleton;
        int r = 1;

        assert(t && ready);
        pthread_mutex_lock(&s->mu);
        if (!t->done) {
                t->ready = ready;
                t->ready_arg = arg;
                awaited_locked(s);
                r = 0;
        }
        pthread_mutex_unlock(&s->mu);
        return r;
}

int store_wait_doc(struct store_ticket *t, char **ret_doc, size_t *ret_len)
{
        struct store *s = store_singleton;
        bool blocked = false;
        int r;

        if (!wait_sem_ready) {
                /* Cannot fail: not shared between processes, and 0 is a valid count. */
                (void)sem_init(&wait_sem, 0, 0);
                wait_sem_ready = true;
        }
        /* Woken by a semaphore of its own, not by a condition on mu: a batch's waiters, all
         * woken at once, had each to take mu back in turn (the writer still held it while it
         * woke the next), and each let the next in with a futex wake of its own. */
        if (!atomic_load_explicit(&t->done, memory_order_acquire)) {
                pthread_mutex_lock(&s->mu);
                if (!t->done) {
                        /* Takes precedence over a store_when_done's ready, which then is not
                         * called. */
                        t->waiter = &wait_sem;
                        blocked = true;
                        awaited_locked(s);
                }
                pthread_mutex_unlock(&s->mu);
        }
        if (blocked)
                while (sem_wait(&wait_sem) < 0)
                        assert(errno == EINTR);
        /* done, set before the post (or seen under mu), orders what the writer wrote in t. */
        assert(atomic_load_explicit(&t->done, memory_order_acquire));
        r = t->r;
        if (ret_doc && r == 0 && t->kept_doc) {
                *ret_doc = t->kept_doc;
                *ret_len = t->kept_len;
        } else
                free(t->kept_doc);
        free(t);
        return r;
}

int store_poll(struct store_ticket *t, int *ret_r)
{
        /* Without the store's lock: the job files poll every finished job's ticket under its own
         * lock, and taking the writer's mutex for each made them wait on each other. */
        if (!atomic_load_explicit(&t->done, memory_order_acquire))
                return 0;
        *ret_r = t->r;
        free(t->kept_doc);
        free(t);
        return 1;
}

uint64_t store_commits(struct store *s)
{
        return s ? atomic_load_explicit(&s->committed, memory_order_acquire) : 0;
}

void store_sync(struct store *s)
{
        pthread_mutex_lock(&s->mu);
        uint64_t want = s->queued;
        if (s->committed < want) {
                s->urgent = true;
                s->flush_all = true; /* the young unwaited changes too */
                pthread_cond_signal(&s->work);
        }
        s->sync_waiters++;
        while (s->committed < want)
                pthread_cond_wait(&s->done, &s->mu);
        s->sync_waiters--;
        pthread_mutex_unlock(&s->mu);
}

void store_retention(struct store *s, unsigned max_jobs, unsigned retention_days,
                     uint64_t max_bytes)
{
        pthread_mutex_lock(&s->mu);
        /* Called at every job's end. The writer waits without a deadline only when it has no
         * change queued and no retention pending; otherwise it comes back to retention by
         * itself once its queue is empty, and a wake-up would only cut its wait for more
         * changes short (a job's final write is queued right before this). */
        bool wake = !s->head && !s->retention_pending;
        s->max_jobs = max_jobs;
        s->retention_days = retention_days;
        s->max_bytes = max_bytes;
        s->retention_pending = true;
        if (wake)
                pthread_cond_signal(&s->work);
        pthread_mutex_unlock(&s->mu);
}

size_t store_count(struct store *s)
{
        size_t n;

        pthread_mutex_lock(&s->mu);
        n = s->count;
        pthread_mutex_unlock(&s->mu);
        return n;
}

int store_writer_start(struct store *s)
{
        int r = store_db_open(s->db_path, false, &s->cdb);

        if (r < 0)
                return r;
        sqlite3_exec(s->cdb, "PRAGMA query_only=0", NULL, NULL, NULL);
        /* The checkpointer's passive checkpoints never wait; its truncations wait briefly. */
        sqlite3_busy_timeout(s->cdb, WAL_TRUNCATE_WAIT_MS);
        {
                sqlite3_stmt *st = NULL;

                if (sqlite3_prepare_v2(s->cdb, "PRAGMA page_size", -1, &st, NULL) == SQLITE_OK &&
                    sqlite3_step(st) == SQLITE_ROW)
                        s->page_size = sqlite3_column_int(st, 0);
                sqlite3_finalize(st);
                if (s->page_size <= 0)
                        s->page_size = 4096;
        }
        r = pthread_create(&s->ckpt_thread, NULL, checkpoint_main, s);
        if (r != 0)
                return log_error_errno(r, "Cannot start the store's checkpoint thread: %m");
        s->ckpt_started = true;
        pthread_setname_np(s->ckpt_thread, "umd-checkpoint");
        if (sqlite3_exec(s->wdb, "PRAGMA wal_autocheckpoint=0", NULL, NULL, NULL) == SQLITE_OK)
                sqlite3_wal_hook(s->wdb, wal_hook, s);
        r = pthread_create(&s->thread, NULL, writer_main, s);
        if (r != 0)
                return log_error_errno(r, "Cannot start the store's writer thread: %m");
        s->thread_started = true;
        pthread_setname_np(s->thread, "umd-store");
        return 0;
}

/* One of the store's threads told to stop (stopping, its condition signalled) and joined. */
static void stop_thread(struct store *s, pthread_cond_t *wake, pthread_t thread, bool *started)
{
        if (!*started)
                return;
        pthread_mutex_lock(&s->mu);
        s->stopping = true;
        pthread_cond_signal(wake);
        pthread_mutex_unlock(&s->mu);
        pthread_join(thread, NULL);
        *started = false;
}

void store_writer_stop(struct store *s)
{
        /* The writer first: it drains what is queued, making the rows no caller has made. */
        stop_thread(s, &s->work, s->thread, &s->thread_started);
        stop_thread(s, &s->ckpt, s->ckpt_thread, &s->ckpt_started);
        sqlite3_close(s->cdb);
        s->cdb = NULL;
}
