/* The store's schema (store_internal.h): the tables and indexes of umd.db, the migrations from
 * every older schema, and the writer's connection that sets them up (store_schema_open) and its
 * prepared statements (store_rows.c's). A database from a newer umd is refused. */
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

/* Bumping this needs a migration; a database from a newer umd is refused. 2 added priority and
 * cancel_requested (add_recovery_columns), so that recovery queues a waiting job from its
 * columns without parsing its document; 3 replaced the index jobs_open with jobs_open_cols, which
 * holds those columns, so that it reads them without the table's pages either; 4 replaced
 * jobs_state with jobs_state_final, which leaves out the open jobs (jobs_open_cols has them); 5
 * added parts.doc (add_part_doc_column), a part's own document written without its job's. */
#define SCHEMA_VERSION     5
#define SCHEMA_SET_VERSION "PRAGMA user_version = 5; COMMIT"

/* In two parts: a table made by an older schema gets its new columns (add_recovery_columns)
 * between them, before an index names them. */
static const char schema_tables[] =
    "CREATE TABLE IF NOT EXISTS jobs ("
    " id TEXT NOT NULL UNIQUE COLLATE NOCASE," /* case-variant duplicates cannot exist */
    " state TEXT NOT NULL,"
    " benchmark TEXT NOT NULL,"
    " client TEXT,"
    " idempotency_key TEXT,"
    " created_ms INTEGER NOT NULL,"
    " finished_ms INTEGER,"
    " bytes INTEGER NOT NULL,"
    " request TEXT,"
    " summary TEXT NOT NULL," /* doc less results: what lists serve */
    " doc TEXT NOT NULL,"     /* what GET serves, byte for byte */
    " priority TEXT,"         /* the document's, for recovery; NULL: written by schema 1 */
    " cancel_requested INTEGER);"
    "CREATE TABLE IF NOT EXISTS parts ("
    " job_id TEXT NOT NULL COLLATE NOCASE,"
    " idx INTEGER NOT NULL,"
    " uuid TEXT NOT NULL COLLATE NOCASE,"
    " state TEXT NOT NULL,"
    " verdict TEXT,"
    /* The part's object as the job's document would hold it, newer than that document (a part
     * that ended while others of its job ran: store_put_part with a document); NULL once a document
     * of the job is written again, which carries it. */
    " doc TEXT,"
    " PRIMARY KEY (job_id, idx)) WITHOUT ROWID;";
static const char schema[] =
    "CREATE INDEX IF NOT EXISTS parts_uuid ON parts(uuid, job_id);"
    /* The verdicts restored at start (R_HEALTH): without it, every queued part of the GPU is
     * read to find the few with a verdict. */
    "CREATE INDEX IF NOT EXISTS parts_verdict ON parts(uuid, job_id) WHERE verdict IS NOT NULL;"
    /* Covering for R_OPEN (finished_ms included: SQLite counts a partial index's WHERE columns
     * as needed): start-up reads this index, a hundred bytes a job, instead of every open job's
     * row of kilobytes. */
    "CREATE INDEX IF NOT EXISTS jobs_open_cols ON jobs(id, state, priority, cancel_requested, "
    "client, idempotency_key, created_ms, finished_ms) WHERE finished_ms IS NULL;"
    "CREATE INDEX IF NOT EXISTS jobs_finished ON jobs(finished_ms) WHERE finished_ms IS NOT "
    "NULL;"
    /* Lists by a final state. Not the open jobs: a job's entry was inserted when it was
     * submitted and deleted when it finished, in two places of the index far apart, which was
     * a sixth of the pages each commit wrote. A list by an open state walks jobs_open_cols
     * (store_read.c says "finished_ms IS NULL" for it). The condition, not finished_ms: a final
     * job whose finished_ms was lost is still listed by its state. */
    "CREATE INDEX IF NOT EXISTS jobs_state_final ON jobs(state, id) WHERE state NOT IN "
    "('queued', 'running');"
    "CREATE INDEX IF NOT EXISTS jobs_benchmark ON jobs(benchmark, id);"
    "CREATE INDEX IF NOT EXISTS jobs_idem ON jobs(idempotency_key, client) WHERE "
    "idempotency_key IS NOT NULL;"
    /* Counts kept by triggers, so start-up and retention never count 100k rows. */
    "CREATE TABLE IF NOT EXISTS stats (k INTEGER PRIMARY KEY CHECK (k = 0), jobs INTEGER NOT "
    "NULL, finished INTEGER NOT NULL, bytes INTEGER NOT NULL);"
    "INSERT OR IGNORE INTO stats VALUES (0, 0, 0, 0);"
    "CREATE TRIGGER IF NOT EXISTS jobs_ins AFTER INSERT ON jobs BEGIN UPDATE stats SET jobs = "
    "jobs + 1, finished = finished + (NEW.finished_ms IS NOT NULL), bytes = bytes + NEW.bytes; "
    "END;"
    "CREATE TRIGGER IF NOT EXISTS jobs_del AFTER DELETE ON jobs BEGIN UPDATE stats SET jobs = "
    "jobs - 1, finished = finished - (OLD.finished_ms IS NOT NULL), bytes = bytes - OLD.bytes; "
    "DELETE FROM parts WHERE job_id = OLD.id; END;"
    "CREATE TRIGGER IF NOT EXISTS jobs_upd AFTER UPDATE ON jobs BEGIN UPDATE stats SET finished "
    "= finished - (OLD.finished_ms IS NOT NULL) + (NEW.finished_ms IS NOT NULL), bytes = bytes - "
    "OLD.bytes + NEW.bytes; END;";

void store_schema_close(struct store *s)
{
        for (size_t i = 0; i < W_COUNT; i++) {
                sqlite3_finalize(s->w[i]);
                s->w[i] = NULL;
        }
        sqlite3_close(s->wdb);
        s->wdb = NULL;
}

/* Schema 1 to 2, inside store_schema_open's transaction: the two columns recovery reads in place of
 * the document. Rows written before keep NULL there, which recovery takes as "parse the
 * document", so nothing is rewritten. A table schema 2 created has them already. */
static int add_recovery_columns(sqlite3 *db)
{
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(db, "SELECT priority, cancel_requested FROM jobs LIMIT 0", -1,
                                    &st, NULL);

        sqlite3_finalize(st);
        if (rc == SQLITE_OK)
                return SQLITE_OK;
        return sqlite3_exec(db,
                            "ALTER TABLE jobs ADD COLUMN priority TEXT;"
                            "ALTER TABLE jobs ADD COLUMN cancel_requested INTEGER;",
                            NULL, NULL, NULL);
}

/* Schema 4 to 5, inside store_schema_open's transaction: parts.doc, NULL in every row there is (no
 * part of those has a document of its own). A table schema 5 created has it already. */
static int add_part_doc_column(sqlite3 *db)
{
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(db, "SELECT doc FROM parts LIMIT 0", -1, &st, NULL);

        sqlite3_finalize(st);
        if (rc == SQLITE_OK)
                return SQLITE_OK;
        return sqlite3_exec(db, "ALTER TABLE parts ADD COLUMN doc TEXT;", NULL, NULL, NULL);
}

/* Open the writer connection, create or check the schema. -EBADMSG when the file is damaged. */
int store_schema_open(struct store *s)
{
        sqlite3_stmt *st = NULL;
        int rc, r, version = 0;

        r = store_db_open(s->db_path, true, &s->wdb);
        if (r < 0)
                return r;
        rc = sqlite3_prepare_v2(s->wdb, "PRAGMA user_version", -1, &st, NULL);
        if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
                version = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
        if (rc != SQLITE_ROW) {
                log_error("SQLite: cannot read %s: %s", s->db_path, sqlite3_errmsg(s->wdb));
                return store_db_is_corrupt(rc) ? -EBADMSG : store_db_errno(rc);
        }
        if (version > SCHEMA_VERSION)
                return log_error_errno(EPROTO,
                                       "%s was written by a newer umd (schema %d, this one knows "
                                       "%d): refusing to touch it",
                                       s->db_path, version, SCHEMA_VERSION);
        /* A file already at this schema is not written to at all: setting user_version writes a
         * page even when it does not change, and a umd restarted on a full disk must start. */
        rc = version == SCHEMA_VERSION ? SQLITE_DONE
                                       : sqlite3_exec(s->wdb, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_exec(s->wdb, schema_tables, NULL, NULL, NULL);
        if (rc == SQLITE_OK && version < 2)
                rc = add_recovery_columns(s->wdb);
        if (rc == SQLITE_OK && version < 5)
                rc = add_part_doc_column(s->wdb);
        /* Schema 2's index, which jobs_open_cols replaces. */
        if (rc == SQLITE_OK && version < 3)
                rc = sqlite3_exec(s->wdb, "DROP INDEX IF EXISTS jobs_open", NULL, NULL, NULL);
        /* Schema 3's, which jobs_state_final replaces. */
        if (rc == SQLITE_OK && version < 4)
                rc = sqlite3_exec(s->wdb, "DROP INDEX IF EXISTS jobs_state", NULL, NULL, NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_exec(s->wdb, schema, NULL, NULL, NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_exec(s->wdb, SCHEMA_SET_VERSION, NULL, NULL, NULL);
        if (rc == SQLITE_DONE)
                rc = SQLITE_OK;
        if (rc != SQLITE_OK) {
                log_error("SQLite: cannot set up %s: %s", s->db_path, sqlite3_errmsg(s->wdb));
                sqlite3_exec(s->wdb, "ROLLBACK", NULL, NULL, NULL);
                return store_db_is_corrupt(rc) ? -EBADMSG : store_db_errno(rc);
        }
        for (size_t i = 0; i < W_COUNT; i++) {
                r = store_db_prepare(s->wdb, store_rows_sql[i], &s->w[i]);
                if (r < 0)
                        return r;
        }
        /* A cheap look at the page structure where umd will read first: the open jobs. */
        rc = sqlite3_exec(s->wdb, "SELECT count(*) FROM jobs WHERE finished_ms IS NULL", NULL, NULL,
                          NULL);
        if (rc != SQLITE_OK) {
                log_error("SQLite: cannot read %s: %s", s->db_path, sqlite3_errmsg(s->wdb));
                return store_db_is_corrupt(rc) ? -EBADMSG : store_db_errno(rc);
        }
        store_rows_read_stats(s);
        return 0;
}
