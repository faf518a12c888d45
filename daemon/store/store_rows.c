/* The writer's statements (store_internal.h) and what binds them: a job's rows written inside the
 * writer's open transaction from a struct store_row (binds only, no JSON), a part's state alone,
 * the step of a statement, and the counts the stats table keeps (store_count). */
#include "store_internal.h"

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

#include "log.h"

const char *const store_rows_sql[W_COUNT] = {
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
    /* A part's end before its job's (store_put_part with a document): its row and its own document,
     * no index touched either; the verdict column waits for the job's document, which R_HEALTH
     * reads. */
    [W_PART_DOC] = "UPDATE parts SET state = ?3, doc = ?4 WHERE job_id = ?1 AND idx = ?2",
    [W_STATS] = "SELECT jobs, finished, bytes FROM stats",
    [W_OLD_BY_AGE] = "SELECT id FROM jobs WHERE finished_ms IS NOT NULL AND finished_ms < ?1 "
                     "ORDER BY finished_ms LIMIT ?2",
    [W_OLD_BY_ID] = "SELECT id FROM jobs WHERE finished_ms IS NOT NULL ORDER BY id LIMIT ?1",
    [W_DELETE] = "DELETE FROM jobs WHERE id = ?1",
    [W_EXISTS] = "SELECT 1 FROM jobs WHERE id = ?1",
};

int store_rows_step(struct store *s, sqlite3_stmt *st)
{
        int rc = sqlite3_step(st);

        sqlite3_reset(st);
        if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
                store_health_log_limited(s, STORE_LOG_STEP, "SQLite: %s: %s", sqlite3_sql(st),
                                         sqlite3_errmsg(s->wdb));
                return store_db_errno(rc);
        }
        return 0;
}

void store_rows_bind_text(sqlite3_stmt *st, int i, const char *v)
{
        if (v)
                sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
        else
                sqlite3_bind_null(st, i);
}

/* Part i of row through st (W_UPSERT_PART, W_PART_SAME or W_PART_DEVICE, which bind alike). */
static int write_part(struct store *s, sqlite3_stmt *st, const struct store_row *row, size_t i)
{
        int r;

        sqlite3_bind_text(st, 1, row->id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)i);
        sqlite3_bind_text(st, 3, row->parts[i].uuid, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, row->parts[i].state, -1, SQLITE_STATIC);
        store_rows_bind_text(st, 5, row->parts[i].verdict);
        r = store_rows_step(s, st);
        sqlite3_clear_bindings(st);
        return r;
}

/* The job's own row through st (W_UPSERT or W_UPDATE, which bind alike). */
static int write_job(struct store *s, sqlite3_stmt *st, const struct store_row *row)
{
        int r;

        sqlite3_bind_text(st, 1, row->id, -1, SQLITE_STATIC);
        store_rows_bind_text(st, 2, row->state);
        store_rows_bind_text(st, 3, row->benchmark);
        store_rows_bind_text(st, 4, row->client);
        store_rows_bind_text(st, 5, row->idem);
        sqlite3_bind_int64(st, 6, row->created_ms);
        if (row->finished)
                sqlite3_bind_int64(st, 7, row->finished_ms);
        else
                sqlite3_bind_null(st, 7);
        sqlite3_bind_int64(st, 8,
                           (sqlite3_int64)(row->doc_len + row->sum_len +
                                           (row->request ? strlen(row->request) : 0)));
        store_rows_bind_text(st, 9, row->request);
        sqlite3_bind_text(st, 10, row->summary, (int)row->sum_len, SQLITE_STATIC);
        sqlite3_bind_text(st, 11, row->doc, (int)row->doc_len, SQLITE_STATIC);
        store_rows_bind_text(st, 12, row->priority);
        sqlite3_bind_int(st, 13, row->cancel_requested);
        r = store_rows_step(s, st);
        sqlite3_clear_bindings(st);
        return r;
}

/* Write one job's rows inside the open transaction: binds only, no JSON. */
int store_rows_write(struct store *s, const struct store_row *row)
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
        r = store_rows_step(s, st);
        sqlite3_clear_bindings(st);
        return r;
}

void store_rows_read_stats(struct store *s)
{
        sqlite3_stmt *st = s->w[W_STATS];

        if (sqlite3_step(st) == SQLITE_ROW) {
                pthread_mutex_lock(&s->mu);
                s->count = (size_t)sqlite3_column_int64(st, 0);
                pthread_mutex_unlock(&s->mu);
        }
        sqlite3_reset(st);
}

/* A part's state alone (store_put_part), or with its own document (store_put_part with a document).
 * Its row is there unless the job's first write failed or retention deleted the job: then nothing
 * changes, as nothing should. */
int store_rows_write_part_state(struct store *s, const struct store_ticket *t)
{
        sqlite3_stmt *st = s->w[t->row.doc ? W_PART_DOC : W_PART_STATE];
        int r;

        sqlite3_bind_text(st, 1, t->row.id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)t->part_idx);
        sqlite3_bind_text(st, 3, t->part_state, -1, SQLITE_STATIC);
        if (t->row.doc)
                sqlite3_bind_text(st, 4, t->row.doc, (int)t->row.doc_len, SQLITE_STATIC);
        r = store_rows_step(s, st);
        sqlite3_clear_bindings(st);
        return r;
}

size_t store_count(struct store *s)
{
        size_t n;

        pthread_mutex_lock(&s->mu);
        n = s->count;
        pthread_mutex_unlock(&s->mu);
        return n;
}
