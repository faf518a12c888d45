/* Lists (store.h's store_list_raw, store_list): a page of jobs, newest first, as the JSON
 * array's text made of the stored bytes; each combination of filters is its own statement, built
 * once per reader connection; a label is matched on the summary parsed. */
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

/* A list's statement: its SELECT and every filter's clause at once come to under 300 bytes;
 * the rest is room for filters to come. */
#define LIST_SQL_MAX 1024

/* The smallest UUIDv7 created at ms: ids are time-ordered, so a time range is an id range. */
static void id_floor(uint64_t ms, char buf[UUID_STRING_MAX])
{
        snprintf(buf, UUID_STRING_MAX, "%08x-%04x-0000-0000-000000000000",
                 (unsigned)((ms >> 16) & 0xffffffffu), (unsigned)(ms & 0xffff));
}

static sqlite3_stmt *list_stmt(struct reader *rd, unsigned mask)
{
        char sql[LIST_SQL_MAX];
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
         * (store_schema.c: jobs_state_final, jobs_open_cols). */
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
        if (store_db_prepare(rd->db, sql, &rd->list[mask]) < 0)
                return NULL;
        return rd->list[mask];
}

/* The states jobs_state_final leaves out (store_schema.c), named as its condition names them. */
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

        r = store_read_take(s, &rd);
        if (r < 0)
                return r;
        st = list_stmt(rd, mask);
        f = st ? open_memstream(&buf, &len) : NULL;
        if (!f) {
                store_read_give(s, rd);
                return st ? -ENOMEM : -EIO;
        }
        fputc('[', f);
        id_floor(q->since_ms, since);
        id_floor(q->until_ms, until);
        store_rows_bind_text(st, 1, q->state);
        store_rows_bind_text(st, 2, q->benchmark);
        store_rows_bind_text(st, 3, q->uuid);
        store_rows_bind_text(st, 4, q->before);
        store_rows_bind_text(st, 8, q->after);
        sqlite3_bind_text(st, 5, since, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 6, until, -1, SQLITE_STATIC);
        /* A label is matched by q->match (the job subsystem's), not in SQL: then rows are read
         * until the page is full. */
        sqlite3_bind_int64(st, 7, q->match ? -1 : (sqlite3_int64)q->limit + 1);
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
                if (q->match && !q->match(text, size, q->match_arg))
                        continue;
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
        store_read_give(s, rd);
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
