/* The store's own indexes checked against their tables at start, and rebuilt where they
 * disagree (issue 57). An index missing entries loses jobs silently: recovery reads the open
 * jobs through jobs_open_cols, so a queued job absent from it is never queued again, never
 * listed, and answers "queued" forever. An index whose pages are garbage made the whole file
 * look corrupt, and the store was set aside with every row in it intact. Neither is a reason to
 * lose a row: an index is derived data, rebuilt from its table.
 *
 * The check is a count: the entries reached through each index against the rows of its table
 * that the index should hold (its WHERE, for a partial one): for jobs first against the stats
 * row (jobs_agree_with_stats), the table itself scanned only when that disagrees; parts always
 * (one scan, every index's count in it). Before recovery, which needs the answer. An index that
 * disagrees is rebuilt with REINDEX; one that cannot even be read (REINDEX frees its pages and
 * fails on them too) is dropped from the schema by hand, made again from its own SQL, and the
 * file VACUUMed so that the pages it left are not found by the quick check as never used.
 *
 * A table that cannot be read whole is what this cannot repair: its indexes are left unchecked,
 * and the quick check after start finds the damage (umd runs degraded, store_health.c's
 * check_main). The file is set aside only when even its schema cannot be read (store_schema_open).
 */
#include "store_internal.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

/* An index's CREATE statement, or a statement made from its name. */
#define REPAIR_SQL_MAX 512
/* The one scan that counts a table's rows for each of its indexes: a FILTER clause an index
 * (about 60 bytes each, a handful of indexes a table). */
#define REPAIR_COUNTS_SQL_MAX 2048

/* umd's indexes and the rows each holds. The primary key of parts is its table (WITHOUT
 * ROWID): nothing to compare it with. */
enum by_stats {
        STATS_NONE,     /* no count in stats for it */
        STATS_ALL,      /* stats.jobs */
        STATS_OPEN,     /* stats.jobs - stats.finished */
        STATS_FINISHED, /* stats.finished */
};

struct index_def {
        const char *name, *table, *where;
        enum by_stats stats;
};

static const struct index_def index_defs[] = {
    {"sqlite_autoindex_jobs_1", "jobs", "id IS NOT NULL", STATS_ALL},
    {"jobs_open_cols", "jobs", "finished_ms IS NULL", STATS_OPEN},
    {"jobs_finished", "jobs", "finished_ms IS NOT NULL", STATS_FINISHED},
    {"jobs_state_final", "jobs", "state NOT IN ('queued', 'running')", STATS_NONE},
    {"jobs_benchmark", "jobs", "benchmark IS NOT NULL", STATS_ALL},
    {"jobs_idem", "jobs", "idempotency_key IS NOT NULL", STATS_NONE},
    {"parts_uuid", "parts", "uuid IS NOT NULL", STATS_NONE},
    {"parts_verdict", "parts", "verdict IS NOT NULL", STATS_NONE},
};

enum index_health {
        INDEX_ABSENT, /* an older schema's file: store_schema_open makes it */
        INDEX_OK,
        INDEX_DISAGREES,
        INDEX_UNREADABLE,
};

/* One int64 answer of sql; 0, -EBADMSG (damaged) or another -errno. */
static int count_one(sqlite3 *db, const char *sql, int64_t *ret)
{
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);

        if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
                *ret = sqlite3_column_int64(st, 0);
                rc = SQLITE_OK;
        }
        sqlite3_finalize(st);
        if (rc == SQLITE_OK)
                return 0;
        return store_db_is_corrupt(rc) ? -EBADMSG : store_db_errno(rc);
}

/* The index's SQL from the schema into sql ("" for an autoindex); 0, or -ENOENT when absent. */
static int index_sql(sqlite3 *db, const char *name, char sql[REPAIR_SQL_MAX])
{
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(
            db, "SELECT coalesce(sql, '') FROM sqlite_schema WHERE type = 'index' AND name = ?", -1,
            &st, NULL);

        if (rc == SQLITE_OK) {
                sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
                rc = sqlite3_step(st);
        }
        if (rc == SQLITE_ROW)
                snprintf(sql, REPAIR_SQL_MAX, "%s", (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
        if (rc == SQLITE_ROW)
                return 0;
        if (rc == SQLITE_DONE)
                return -ENOENT;
        return store_db_is_corrupt(rc) ? -EBADMSG : store_db_errno(rc);
}

static enum index_health index_check(sqlite3 *db, const struct index_def *d, int64_t rows)
{
        char sql[REPAIR_SQL_MAX];
        int64_t n = -1;
        int r = index_sql(db, d->name, sql);

        if (r == -ENOENT)
                return INDEX_ABSENT;
        snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s INDEXED BY %s WHERE %s", d->table,
                 d->name, d->where);
        r = count_one(db, sql, &n);
        if (r < 0) {
                log_warning("store: index %s cannot be read (%s)", d->name, strerror(-r));
                return INDEX_UNREADABLE;
        }
        if (n != rows) {
                log_warning("store: index %s has %" PRId64 " entries where table %s has %" PRId64
                            " rows for it",
                            d->name, n, d->table, rows);
                return INDEX_DISAGREES;
        }
        return INDEX_OK;
}

/* The fast path: the indexes of jobs that stats (kept by triggers, in the same transactions as
 * the rows) has a count for agree with it. Reading those indexes is a tenth of the file; the
 * table is the rest (its rows hold the documents), a second of start-up for 200 MB on a busy
 * VM. False sends start-up the slow way: every index of jobs against a scan of the table. */
static bool jobs_agree_with_stats(sqlite3 *db)
{
        int64_t all = -1, finished = -1;
        char sql[REPAIR_SQL_MAX];

        if (count_one(db, "SELECT jobs FROM stats WHERE k = 0", &all) < 0 ||
            count_one(db, "SELECT finished FROM stats WHERE k = 0", &finished) < 0)
                return false;
        for (size_t i = 0; i < ELEMENTSOF(index_defs); i++) {
                const struct index_def *d = &index_defs[i];
                int64_t n = -1, want = d->stats == STATS_ALL    ? all
                                       : d->stats == STATS_OPEN ? all - finished
                                                                : finished;

                if (d->stats == STATS_NONE || index_sql(db, d->name, sql) == -ENOENT)
                        continue;
                snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s INDEXED BY %s WHERE %s",
                         d->table, d->name, d->where);
                if (count_one(db, sql, &n) < 0 || n != want)
                        return false;
        }
        return true;
}

/* The rows of table that each of its indexes should hold, in one scan of the table alone. */
static int table_counts(sqlite3 *db, const char *table, int64_t counts[ELEMENTSOF(index_defs)])
{
        char sql[REPAIR_COUNTS_SQL_MAX];
        size_t len = (size_t)snprintf(sql, sizeof(sql), "SELECT 0");
        sqlite3_stmt *st = NULL;
        int rc;

        for (size_t i = 0; i < ELEMENTSOF(index_defs); i++)
                if (strcmp(index_defs[i].table, table) == 0)
                        len +=
                            (size_t)snprintf(sql + len, sizeof(sql) - len,
                                             ", count(*) FILTER (WHERE %s)", index_defs[i].where);
        snprintf(sql + len, sizeof(sql) - len, " FROM %s NOT INDEXED", table);
        rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
        if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
                int col = 1;

                for (size_t i = 0; i < ELEMENTSOF(index_defs); i++)
                        if (strcmp(index_defs[i].table, table) == 0)
                                counts[i] = sqlite3_column_int64(st, col++);
                rc = SQLITE_OK;
        }
        sqlite3_finalize(st);
        if (rc == SQLITE_OK)
                return 0;
        if ((rc & 0xff) == SQLITE_ERROR)
                return -ENOENT; /* no such table yet (an empty file): nothing to compare */
        /* Its indexes cannot be checked nor rebuilt from it; the file's quick check after
         * start says what is damaged, and umd runs degraded (store_health.c's check_main). */
        log_warning("store: table %s cannot be read whole (%s): its indexes are not checked", table,
                    sqlite3_errmsg(db));
        return store_db_is_corrupt(rc) ? -EBADMSG : store_db_errno(rc);
}

/* An index REINDEX cannot touch (its own pages are damaged): its schema row removed by hand, the
 * index made again from its SQL on a fresh connection, and the file rebuilt without the pages
 * the old one left behind. */
static int index_recreate(sqlite3 **db, const char *path, const char *name)
{
        char sql[REPAIR_SQL_MAX], del[REPAIR_SQL_MAX];
        int r = index_sql(*db, name, sql), rc;

        if (r < 0)
                return r;
        if (!*sql) /* an autoindex: its table's UNIQUE makes it; nothing to recreate from */
                return -EBADMSG;
        snprintf(del, sizeof(del),
                 "PRAGMA writable_schema = ON; DELETE FROM sqlite_schema WHERE type = 'index' "
                 "AND name = '%s'; PRAGMA writable_schema = OFF;",
                 name);
        rc = sqlite3_exec(*db, del, NULL, NULL, NULL);
        sqlite3_close(*db);
        *db = NULL;
        if (rc != SQLITE_OK)
                return store_db_errno(rc);
        r = store_db_open(path, true, db);
        if (r < 0)
                return r;
        rc = sqlite3_exec(*db, sql, NULL, NULL, NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_exec(*db, "VACUUM", NULL, NULL, NULL);
        if (rc != SQLITE_OK) {
                log_error("store: cannot make index %s again: %s", name, sqlite3_errmsg(*db));
                return store_db_is_corrupt(rc) ? -EBADMSG : store_db_errno(rc);
        }
        return 0;
}

static int index_rebuild(sqlite3 **db, const char *path, const struct index_def *d,
                         enum index_health h)
{
        char sql[REPAIR_SQL_MAX];
        int rc;

        if (h == INDEX_DISAGREES) {
                snprintf(sql, sizeof(sql), "REINDEX %s", d->name);
                rc = sqlite3_exec(*db, sql, NULL, NULL, NULL);
                if (rc == SQLITE_OK)
                        return 0;
                if (!store_db_is_corrupt(rc)) {
                        log_error("store: cannot rebuild index %s: %s", d->name,
                                  sqlite3_errmsg(*db));
                        return store_db_errno(rc);
                }
        }
        return index_recreate(db, path, d->name);
}

static void note_repair(char *ret_repaired, size_t len, const char *name)
{
        size_t at = strlen(ret_repaired);

        if (at + 2 + strlen(name) < len)
                snprintf(ret_repaired + at, len - at, "%s%s", at ? ", " : "", name);
}

int store_repair_indexes(const char *path, char *ret_repaired, size_t len)
{
        int64_t rows[ELEMENTSOF(index_defs)] = {0};
        bool jobs_read, parts_read;
        sqlite3 *db = NULL;
        int r;

        assert(ret_repaired && len > 0);
        *ret_repaired = '\0';
        r = store_db_open(path, true, &db);
        if (r < 0)
                return r;
        /* jobs_state_final and jobs_idem are checked only on the slow path: neither loses a
         * job (a list by a final state, an idempotent resubmission would miss one). */
        jobs_read = !jobs_agree_with_stats(db) && table_counts(db, "jobs", rows) == 0;
        parts_read = table_counts(db, "parts", rows) == 0;
        for (size_t i = 0; r == 0 && i < ELEMENTSOF(index_defs); i++) {
                bool of_jobs = strcmp(index_defs[i].table, "jobs") == 0;
                enum index_health h;

                if (!(of_jobs ? jobs_read : parts_read))
                        continue;
                h = index_check(db, &index_defs[i], rows[i]);
                if (h == INDEX_ABSENT || h == INDEX_OK)
                        continue;
                r = index_rebuild(&db, path, &index_defs[i], h);
                if (r == 0 && index_check(db, &index_defs[i], rows[i]) != INDEX_OK)
                        r = -EBADMSG;
                if (r < 0)
                        break;
                log_warning("store: index %s rebuilt from table %s (%" PRId64 " entries)",
                            index_defs[i].name, index_defs[i].table, rows[i]);
                note_repair(ret_repaired, len, index_defs[i].name);
        }
        sqlite3_close(db);
        return r;
}

const char *store_repaired(const struct store *s)
{
        return s && s->repaired[0] ? s->repaired : NULL;
}
