/* The durable job store on SQLite (store.h): STATE_DIR/umd.db in WAL mode, synchronous=FULL (a
 * 2xx means the job survives a power cut, not only a crash of umd), one writer connection on
 * its own thread that commits every waiting change in one transaction (group commit), and a
 * pool of reader connections for GETs, which WAL never makes wait for the writer. Owns the lock
 * on the state directory, the import of the old jobs/ files and background retention. */
#include "store.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "job_state.h"
#include "jsonutil.h"
#include "log.h"
#include "store_files.h"
#include "util.h"

#define DB_NAME          "umd.db"
#define LOCK_NAME        "umd.lock"
#define BUSY_TIMEOUT_MS  5000
#define RETENTION_BATCH  256
#define IMPORT_BATCH     1000
#define READERS_MAX      16
#define STORE_JSON_DEPTH 64
/* WAL pages after which the checkpointer copies them into umd.db (SQLite's default). */
#define CHECKPOINT_PAGES 1000

/* Bumping this needs a migration; a database from a newer umd is refused. */
#define SCHEMA_VERSION 1

static const char schema[] =
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
    " doc TEXT NOT NULL);"    /* what GET serves, byte for byte */
    "CREATE TABLE IF NOT EXISTS parts ("
    " job_id TEXT NOT NULL COLLATE NOCASE,"
    " idx INTEGER NOT NULL,"
    " uuid TEXT NOT NULL COLLATE NOCASE,"
    " state TEXT NOT NULL,"
    " verdict TEXT,"
    " PRIMARY KEY (job_id, idx)) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS parts_uuid ON parts(uuid, job_id);"
    "CREATE INDEX IF NOT EXISTS jobs_open ON jobs(id) WHERE finished_ms IS NULL;"
    "CREATE INDEX IF NOT EXISTS jobs_finished ON jobs(finished_ms) WHERE finished_ms IS NOT "
    "NULL;"
    "CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state, id);"
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

enum {
        W_BEGIN,
        W_COMMIT,
        W_ROLLBACK,
        W_UPSERT,
        W_DEL_PARTS,
        W_INS_PART,
        W_STATS,
        W_OLD_BY_AGE,
        W_OLD_BY_ID,
        W_DELETE,
        W_EXISTS,
        W_COUNT
};

static const char *const wsql[W_COUNT] = {
    [W_BEGIN] = "BEGIN IMMEDIATE",
    [W_COMMIT] = "COMMIT",
    [W_ROLLBACK] = "ROLLBACK",
    [W_UPSERT] = "INSERT INTO jobs (id, state, benchmark, client, idempotency_key, created_ms, "
                 "finished_ms, bytes, request, summary, doc) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
                 "?8, ?9, ?10, ?11) ON CONFLICT (id) DO UPDATE SET state = ?2, finished_ms = ?7, "
                 "bytes = ?8, summary = ?10, doc = ?11",
    [W_DEL_PARTS] = "DELETE FROM parts WHERE job_id = ?1",
    [W_INS_PART] = "INSERT OR REPLACE INTO parts (job_id, idx, uuid, state, verdict) VALUES (?1, "
                   "?2, ?3, ?4, ?5)",
    [W_STATS] = "SELECT jobs, finished, bytes FROM stats",
    [W_OLD_BY_AGE] = "SELECT id FROM jobs WHERE finished_ms IS NOT NULL AND finished_ms < ?1 "
                     "ORDER BY finished_ms LIMIT ?2",
    [W_OLD_BY_ID] = "SELECT id FROM jobs WHERE finished_ms IS NOT NULL ORDER BY id LIMIT ?1",
    [W_DELETE] = "DELETE FROM jobs WHERE id = ?1",
    [W_EXISTS] = "SELECT 1 FROM jobs WHERE id = ?1",
};

enum { R_GET, R_IDEM, R_OPEN, R_HEALTH, R_HEALTH_PASS, R_COUNT };

static const char *const rsql[R_COUNT] = {
    [R_GET] = "SELECT doc FROM jobs WHERE id = ?1",
    [R_IDEM] = "SELECT doc, request FROM jobs WHERE idempotency_key = ?1 AND client IS ?2 "
               "ORDER BY id DESC LIMIT 1",
    [R_OPEN] = "SELECT doc, request, created_ms, finished_ms FROM jobs WHERE finished_ms IS NULL "
               "ORDER BY id",
    [R_HEALTH] = "SELECT j.doc FROM parts p CROSS JOIN jobs j ON j.id = p.job_id WHERE p.uuid = "
                 "?1 AND p.verdict IS NOT NULL AND p.job_id <> ?2 AND j.benchmark = 'health' "
                 "ORDER BY p.job_id DESC LIMIT ?3",
    [R_HEALTH_PASS] = "SELECT j.doc FROM parts p CROSS JOIN jobs j ON j.id = p.job_id WHERE "
                      "p.uuid = ?1 AND p.verdict = 'pass' AND p.state = 'succeeded' AND "
                      "p.job_id <> ?2 AND j.benchmark = 'health' ORDER BY p.job_id DESC LIMIT ?3",
};

/* List queries are built from which filters are present (6 bits) and kept per connection. */
enum {
        Q_STATE = 1,
        Q_BENCH = 2,
        Q_UUID = 4,
        Q_BEFORE = 8,
        Q_SINCE = 16,
        Q_UNTIL = 32,
        Q_AFTER = 64,
        Q_DOC = 128,
        Q_N = 256
};

struct reader {
        sqlite3 *db;
        sqlite3_stmt *st[R_COUNT];
        sqlite3_stmt *list[Q_N];
        struct reader *next;
};

struct store_ticket {
        struct store_ticket *next;
        json_t *snap;
        bool waited; /* someone will store_wait/poll: the writer must not free it */
        bool done;
        int r;
};

struct store {
        char *dir, *db_path;
        int lock_fd;
        int dir_fd;       /* the state directory, flocked: the lock no one can delete */
        char damage[256]; /* what PRAGMA quick_check found at open; "" when nothing; set once */

        sqlite3 *wdb;
        sqlite3_stmt *w[W_COUNT];

        pthread_mutex_t mu; /* guards everything below */
        pthread_cond_t work, done;
        struct store_ticket *head, *tail;
        uint64_t queued, committed; /* tickets queued and finished, for store_sync */
        bool stopping, thread_started;
        bool retention_pending;
        unsigned max_jobs, retention_days;
        uint64_t max_bytes;
        size_t count;
        pthread_t thread;

        /* Checkpoints run on their own thread and connection (PASSIVE: never blocking the
         * writer), not inside a commit, so no submit waits for umd.db's fsync. */
        sqlite3 *cdb;
        pthread_t ckpt_thread;
        bool ckpt_started, ckpt_pending;
        pthread_cond_t ckpt;
        /* The WAL's bound (store_set_wal_max): past it, the writer truncates the WAL after
         * the batch (wal_truncate asks for that); wal_dirty says a write came, which the
         * checkpointer truncates once the writer is idle; and
         * wal_limit_set tells the writer to apply journal_size_limit on its connection. */
        uint64_t wal_max_bytes;
        int page_size;
        bool wal_truncate, wal_dirty, wal_limit_set;

        pthread_mutex_t readers_mu;
        struct reader *readers;
        unsigned n_readers;

        /* Finished jobs' documents as served, by id: they never change, so a read need not
         * ask SQLite again. Direct-mapped (a new entry takes its slot), bounded in bytes. */
        pthread_mutex_t cache_mu;
        struct cache_slot *cache; /* CACHE_SLOTS, NULL: no cache */
        uint64_t cache_bytes, cache_max;
};

#define CACHE_SLOTS 4096

struct cache_slot {
        char id[UUID_STRING_MAX]; /* lower case; "" when empty */
        struct blob *blob;        /* the cache's reference */
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
        uint64_t h = UINT64_C(14695981039346656037);

        for (const char *c = key; *c; c++)
                h = (h ^ (unsigned char)*c) * UINT64_C(1099511628211);
        return &s->cache[h % CACHE_SLOTS];
}

/* With cache_mu held. */
static void cache_drop_slot(struct store *s, struct cache_slot *c)
{
        s->cache_bytes -= c->blob->len;
        blob_unref(c->blob);
        *c = (struct cache_slot){0};
}

static void cache_evict(struct store *s, const char *id)
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

static int errno_from_sqlite(int rc)
{
        switch (rc & 0xff) {
        case SQLITE_FULL:
                return -ENOSPC;
        case SQLITE_NOMEM:
                return -ENOMEM;
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
                return -EBUSY;
        case SQLITE_READONLY:
                return -EROFS;
        case SQLITE_CANTOPEN:
                return -ENOENT;
        default:
                return -EIO;
        }
}

static bool is_corrupt(int rc)
{
        return (rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB;
}

/* Open one connection with the settings every connection needs. */
static int db_open(const char *path, bool writer, sqlite3 **ret)
{
        sqlite3 *db = NULL;
        int rc;

        /* NOFOLLOW: umd.db must be umd's own file, never another application's database
         * adopted through a link (check_not_links says so clearly; this closes the race). */
        rc = sqlite3_open_v2(path, &db,
                             SQLITE_OPEN_READWRITE | (writer ? SQLITE_OPEN_CREATE : 0) |
                                 SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW,
                             NULL);
        if (rc != SQLITE_OK)
                goto fail;
        sqlite3_extended_result_codes(db, 1);
        sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);
        rc = sqlite3_exec(db,
                          writer ? "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                                   " PRAGMA foreign_keys=OFF;"
                                 : "PRAGMA query_only=1; PRAGMA synchronous=FULL;",
                          NULL, NULL, NULL);
        if (rc != SQLITE_OK)
                goto fail;
        *ret = db;
        return 0;
fail:
        if (db)
                log_error("SQLite: cannot open %s: %s", path, sqlite3_errmsg(db));
        else
                log_error("SQLite: cannot open %s: %s", path, sqlite3_errstr(rc));
        sqlite3_close(db);
        return is_corrupt(rc) ? -EBADMSG : errno_from_sqlite(rc);
}

static int prepare(sqlite3 *db, const char *sql, sqlite3_stmt **ret)
{
        int rc = sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, ret, NULL);

        if (rc != SQLITE_OK) {
                log_error("SQLite: cannot prepare \"%.60s\": %s", sql, sqlite3_errmsg(db));
                return is_corrupt(rc) ? -EBADMSG : errno_from_sqlite(rc);
        }
        return 0;
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

static int reader_take(struct store *s, struct reader **ret)
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
        e = db_open(s->db_path, false, &r->db);
        for (size_t i = 0; e == 0 && i < R_COUNT; i++)
                e = prepare(r->db, rsql[i], &r->st[i]);
        if (e < 0) {
                reader_free(r);
                return e;
        }
        *ret = r;
        return 0;
}

/* Keep at most READERS_MAX idle connections: more threads than that are a burst. */
static void reader_give(struct store *s, struct reader *r)
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

static json_t *parse_text(sqlite3_stmt *st, int col)
{
        const char *t = (const char *)sqlite3_column_text(st, col);
        json_error_t err;

        if (!t)
                return NULL;
        return json_parse_strict(t, (size_t)sqlite3_column_bytes(st, col), STORE_JSON_DEPTH, &err);
}

/* ---- the public form of a job ---- */

/* What clients see: the internal document less the bookkeeping only umd needs; without results
 * for lists. Shallow: what lies below the top level and the part objects is shared. */
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
                json_array_append_new(parts, c);
        }
        json_object_set_new(j, "parts", parts);
        return j;
}

/* ---- the writer ---- */

static int wstep_done(struct store *s, sqlite3_stmt *st)
{
        int rc = sqlite3_step(st);

        sqlite3_reset(st);
        if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
                log_error("SQLite: %s: %s", sqlite3_sql(st), sqlite3_errmsg(s->wdb));
                return errno_from_sqlite(rc);
        }
        return 0;
}

static void bind_text_or_null(sqlite3_stmt *st, int i, const char *v)
{
        if (v)
                sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
        else
                sqlite3_bind_null(st, i);
}

/* Write one job's rows inside the open transaction. */
static int write_job(struct store *s, const json_t *snap)
{
        const char *id = json_string_value(json_object_get(snap, "id"));
        const char *request = json_string_value(json_object_get(snap, "request"));
        json_t *fin = json_object_get(snap, "finished_ms"), *parts = json_object_get(snap, "parts");
        _cleanup_json_ json_t *pub = store_public_copy(snap, true);
        _cleanup_json_ json_t *sum = store_public_copy(snap, false);
        _cleanup_free_ char *doc = NULL, *summary = NULL;
        size_t doc_len = 0, sum_len = 0;
        sqlite3_stmt *st = s->w[W_UPSERT];
        json_t *p;
        size_t i;
        int r;

        if (!id || !uuid_is_valid(id) || !json_is_array(parts))
                return log_error_errno(EINVAL, "Refusing to store a job without id or parts");
        if (!pub || !sum || !(doc = json_dump_compact(pub, &doc_len)) ||
            !(summary = json_dump_compact(sum, &sum_len)))
                return log_error_errno(ENOMEM, "Cannot serialise job %s", id);

        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        bind_text_or_null(st, 2, json_string_value(json_object_get(snap, "state")));
        bind_text_or_null(st, 3, json_string_value(json_object_get(snap, "benchmark")));
        bind_text_or_null(st, 4, json_string_value(json_object_get(snap, "client")));
        bind_text_or_null(st, 5, json_string_value(json_object_get(snap, "idempotency_key")));
        sqlite3_bind_int64(st, 6, json_integer_value(json_object_get(snap, "created_ms")));
        if (json_is_integer(fin))
                sqlite3_bind_int64(st, 7, json_integer_value(fin));
        else
                sqlite3_bind_null(st, 7);
        sqlite3_bind_int64(st, 8,
                           (sqlite3_int64)(doc_len + sum_len + (request ? strlen(request) : 0)));
        bind_text_or_null(st, 9, request);
        sqlite3_bind_text(st, 10, summary, (int)sum_len, SQLITE_STATIC);
        sqlite3_bind_text(st, 11, doc, (int)doc_len, SQLITE_STATIC);
        r = wstep_done(s, st);
        sqlite3_clear_bindings(st);
        if (r < 0)
                return r;

        sqlite3_bind_text(s->w[W_DEL_PARTS], 1, id, -1, SQLITE_STATIC);
        r = wstep_done(s, s->w[W_DEL_PARTS]);
        if (r < 0)
                return r;
        json_array_foreach(parts, i, p)
        {
                st = s->w[W_INS_PART];
                sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
                sqlite3_bind_int64(st, 2, (sqlite3_int64)i);
                sqlite3_bind_text(st, 3, json_string_value(json_object_get(p, "uuid")) ?: "", -1,
                                  SQLITE_STATIC);
                sqlite3_bind_text(st, 4, json_string_value(json_object_get(p, "state")) ?: "", -1,
                                  SQLITE_STATIC);
                bind_text_or_null(
                    st, 5,
                    json_string_value(json_object_get(json_object_get(p, "verdict"), "verdict")));
                r = wstep_done(s, st);
                sqlite3_clear_bindings(st);
                if (r < 0)
                        return r;
        }
        return 0;
}

static void read_stats(struct store *s)
{
        sqlite3_stmt *st = s->w[W_STATS];

        if (sqlite3_step(st) == SQLITE_ROW) {
                pthread_mutex_lock(&s->mu);
                s->count = (size_t)sqlite3_column_int64(st, 0);
                pthread_mutex_unlock(&s->mu);
        }
        sqlite3_reset(st);
}

/* One transaction for the tickets in list; 0 or -errno for all of them. */
static int commit_list(struct store *s, struct store_ticket *list, size_t max)
{
        int r = wstep_done(s, s->w[W_BEGIN]);
        size_t n = 0;

        for (struct store_ticket *t = list; r == 0 && t && n < max; t = t->next, n++)
                r = write_job(s, t->snap);
        if (r == 0)
                r = wstep_done(s, s->w[W_COMMIT]);
        if (r < 0 && !sqlite3_get_autocommit(s->wdb))
                (void)wstep_done(s, s->w[W_ROLLBACK]);
        return r;
}

/* Group commit: every ticket waiting goes into one transaction. Should it fail, each is tried
 * alone, so one job that cannot be written does not take the others down with it. */
static void commit_batch(struct store *s, struct store_ticket *batch)
{
        int r = commit_list(s, batch, SIZE_MAX);

        for (struct store_ticket *t = batch; t; t = t->next)
                t->r = r;
        if (r < 0 && batch->next)
                for (struct store_ticket *t = batch; t; t = t->next)
                        t->r = commit_list(s, t, 1);
        read_stats(s);
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
        r = wstep_done(s, s->w[W_BEGIN]);
        for (size_t i = 0; r == 0 && i < n; i++) {
                sqlite3_bind_text(s->w[W_DELETE], 1, ids[i], -1, SQLITE_STATIC);
                r = wstep_done(s, s->w[W_DELETE]);
        }
        if (r == 0)
                r = wstep_done(s, s->w[W_COMMIT]);
        if (r < 0) {
                if (!sqlite3_get_autocommit(s->wdb))
                        (void)wstep_done(s, s->w[W_ROLLBACK]);
                log_warning("retention: cannot delete %zu jobs: %s", n, strerror(-r));
                return false;
        }
        for (size_t i = 0; i < n; i++)
                cache_evict(s, ids[i]);
        log_debug("retention: deleted %zu finished jobs", n);
        read_stats(s);
        return true;
}

/* After each commit, on the writer's thread: pages is the WAL's length in pages. */
static int wal_hook(void *userdata, sqlite3 *db, const char *name, int pages)
{
        struct store *s = userdata;

        pthread_mutex_lock(&s->mu);
        s->wal_dirty = true;
        if ((uint64_t)pages * (uint64_t)s->page_size > s->wal_max_bytes)
                s->wal_truncate = true; /* the writer does it, after this batch */
        else if (pages >= CHECKPOINT_PAGES)
                s->ckpt_pending = true;
        /* Always: the checkpointer times the writer's idleness from the last commit. */
        pthread_cond_signal(&s->ckpt);
        pthread_mutex_unlock(&s->mu);
        return SQLITE_OK;
}

/* Passive checkpoints never wait for anyone, but they only copy pages back into umd.db: the
 * WAL file itself stays at its peak (hundreds of MiB after a heavy hour) until umd stops.
 * So any WAL, once the writer has been idle for WAL_IDLE_TRUNCATE_MS, gets a TRUNCATE
 * checkpoint here, which waits (busy_timeout) for readers to leave the WAL's pages and then
 * cuts the file to nothing. A WAL past wal_max_bytes under load is cut by the writer itself
 * (wal_truncate_now): from this thread the checkpoint would have to win the write lock from a
 * writer that takes it back between every batch, and under steady submits it never did. */
#define WAL_IDLE_TRUNCATE_MS 1000
/* How long a truncation waits for readers to leave older WAL pages. It holds the write lock
 * meanwhile, so the writer's commits wait too: short, and tried again if it is not enough. */
#define WAL_TRUNCATE_WAIT_MS 250

static void *checkpoint_main(void *userdata)
{
        struct store *s = userdata;
        bool armed = false; /* a write came since the WAL was last truncated */
        struct timespec idle_at = {0};

        pthread_mutex_lock(&s->mu);
        for (;;) {
                bool idle = false;

                while (!s->ckpt_pending && !s->stopping) {
                        if (s->wal_dirty) {
                                /* A write came: truncate once none has come for a while. */
                                s->wal_dirty = false;
                                armed = true;
                                clock_gettime(CLOCK_MONOTONIC, &idle_at);
                                idle_at.tv_sec += WAL_IDLE_TRUNCATE_MS / 1000;
                                idle_at.tv_nsec += (long)(WAL_IDLE_TRUNCATE_MS % 1000) * 1000000;
                                if (idle_at.tv_nsec >= 1000000000) {
                                        idle_at.tv_sec++;
                                        idle_at.tv_nsec -= 1000000000;
                                }
                        }
                        if (!armed) {
                                pthread_cond_wait(&s->ckpt, &s->mu);
                                continue;
                        }
                        if (pthread_cond_timedwait(&s->ckpt, &s->mu, &idle_at) == ETIMEDOUT &&
                            !s->wal_dirty && !s->ckpt_pending) {
                                idle = true;
                                break;
                        }
                }
                if (s->stopping)
                        break;
                bool truncate = idle;
                s->ckpt_pending = false;
                if (truncate)
                        armed = false;
                pthread_mutex_unlock(&s->mu);
                int rc = sqlite3_wal_checkpoint_v2(
                    s->cdb, NULL, truncate ? SQLITE_CHECKPOINT_TRUNCATE : SQLITE_CHECKPOINT_PASSIVE,
                    NULL, NULL);
                pthread_mutex_lock(&s->mu);
                if (rc == SQLITE_BUSY && truncate) {
                        /* A reader held on past WAL_TRUNCATE_WAIT_MS: another idle second. */
                        log_debug("SQLite: truncating the WAL of %s: busy", s->db_path);
                        s->wal_dirty = true;
                } else if (rc != SQLITE_OK)
                        log_warning("SQLite: checkpoint of %s: %s", s->db_path,
                                    sqlite3_errmsg(s->cdb));
        }
        pthread_mutex_unlock(&s->mu);
        return NULL;
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
 * queue meanwhile and go out as the next group commit. */
static void wal_truncate_now(struct store *s)
{
        int rc;

        /* Commits wait while it runs: wait for readers a little, not busy_timeout's seconds. */
        sqlite3_busy_timeout(s->wdb, WAL_TRUNCATE_WAIT_MS);
        rc = sqlite3_wal_checkpoint_v2(s->wdb, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
        sqlite3_busy_timeout(s->wdb, BUSY_TIMEOUT_MS);

        if (rc == SQLITE_BUSY)
                log_debug("SQLite: truncating the WAL of %s: busy; tried again after the next "
                          "commit",
                          s->db_path);
        else if (rc != SQLITE_OK)
                log_warning("SQLite: truncating the WAL of %s: %s", s->db_path,
                            sqlite3_errmsg(s->wdb));
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
                if (s->head) {
                        struct store_ticket *batch = s->head, *next;
                        uint64_t n = 0;

                        s->head = s->tail = NULL;
                        pthread_mutex_unlock(&s->mu);
                        commit_batch(s, batch);
                        pthread_mutex_lock(&s->mu);
                        for (struct store_ticket *t = batch; t; t = next) {
                                next = t->next;
                                n++;
                                json_decref(t->snap);
                                t->snap = NULL;
                                if (t->waited) {
                                        t->done = true;
                                } else {
                                        if (t->r < 0)
                                                log_error("store: a job's change was not "
                                                          "committed: %s",
                                                          strerror(-t->r));
                                        free(t);
                                }
                        }
                        s->committed += n;
                        pthread_cond_broadcast(&s->done);
                        if (s->wal_truncate) {
                                s->wal_truncate = false;
                                pthread_mutex_unlock(&s->mu);
                                wal_truncate_now(s);
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

int store_put(struct store *s, const json_t *job, struct store_ticket **ret_ticket)
{
        struct store_ticket *t = calloc(1, sizeof(*t));
        json_t *parts = json_array();
        size_t i;
        json_t *p;

        if (!t || !parts || !(t->snap = json_copy((json_t *)job)))
                goto oom;
        /* Only finished jobs are cached, and nothing writes those again; a write says the
         * cached bytes (if any) are no longer the truth all the same. */
        if (json_is_string(json_object_get(job, "id")))
                cache_evict(s, json_string_value(json_object_get(job, "id")));
        json_array_foreach(json_object_get(job, "parts"), i, p)
        {
                if (json_array_append_new(parts, json_copy(p)) < 0)
                        goto oom;
        }
        if (json_object_set_new(t->snap, "parts", parts) < 0) {
                parts = NULL;
                goto oom;
        }
        t->waited = ret_ticket != NULL;
        pthread_mutex_lock(&s->mu);
        if (s->tail)
                s->tail->next = t;
        else
                s->head = t;
        s->tail = t;
        s->queued++;
        pthread_cond_signal(&s->work);
        pthread_mutex_unlock(&s->mu);
        if (ret_ticket)
                *ret_ticket = t;
        return 0;
oom:
        json_decref(parts);
        if (t)
                json_decref(t->snap);
        free(t);
        return log_error_errno(ENOMEM, "Cannot queue a job's change");
}

/* The store a ticket belongs to is needed to wait on its condition: tickets keep none, so
 * there is one store per process and this points at it. */
static struct store *the_store;

int store_wait(struct store_ticket *t)
{
        struct store *s = the_store;
        int r;

        pthread_mutex_lock(&s->mu);
        while (!t->done)
                pthread_cond_wait(&s->done, &s->mu);
        pthread_mutex_unlock(&s->mu);
        r = t->r;
        free(t);
        return r;
}

int store_poll(struct store_ticket *t, int *ret_r)
{
        struct store *s = the_store;
        bool done;

        pthread_mutex_lock(&s->mu);
        done = t->done;
        pthread_mutex_unlock(&s->mu);
        if (!done)
                return 0;
        *ret_r = t->r;
        free(t);
        return 1;
}

void store_sync(struct store *s)
{
        pthread_mutex_lock(&s->mu);
        uint64_t want = s->queued;
        while (s->committed < want)
                pthread_cond_wait(&s->done, &s->mu);
        pthread_mutex_unlock(&s->mu);
}

void store_retention(struct store *s, unsigned max_jobs, unsigned retention_days,
                     uint64_t max_bytes)
{
        pthread_mutex_lock(&s->mu);
        s->max_jobs = max_jobs;
        s->retention_days = retention_days;
        s->max_bytes = max_bytes;
        s->retention_pending = true;
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

/* ---- reads ---- */

int store_get(struct store *s, const char *id, json_t **ret)
{
        struct reader *rd;
        sqlite3_stmt *st;
        json_t *j = NULL;
        int rc, r;

        r = reader_take(s, &rd);
        if (r < 0)
                return r;
        st = rd->st[R_GET];
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                j = parse_text(st, 0);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        reader_give(s, rd);
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
        r = reader_take(s, &rd);
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
        reader_give(s, rd);
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

        r = reader_take(s, &rd);
        if (r < 0)
                return r;
        st = rd->st[R_IDEM];
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        bind_text_or_null(st, 2, client);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
                j = parse_text(st, 0);
                req = strdup((const char *)sqlite3_column_text(st, 1) ?: "");
        }
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        reader_give(s, rd);
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

/* The internal form back from the row: the public document plus the bookkeeping columns. */
static json_t *internal_from_row(sqlite3_stmt *st)
{
        json_t *j = parse_text(st, 0);

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

int store_recover(struct store *s, store_job_fn fn, void *userdata)
{
        struct reader *rd;
        sqlite3_stmt *st;
        int rc, r;

        r = reader_take(s, &rd);
        if (r < 0)
                return r;
        st = rd->st[R_OPEN];
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                json_t *j = internal_from_row(st);

                if (!j) {
                        log_warning("store: an unfinished job is not valid JSON; skipped");
                        continue;
                }
                r = fn(j, userdata);
                json_decref(j);
                if (r < 0)
                        break;
        }
        sqlite3_reset(st);
        reader_give(s, rd);
        if (r < 0)
                return r;
        if (rc != SQLITE_DONE)
                return log_error_errno(EIO, "SQLite: cannot read unfinished jobs: %s",
                                       sqlite3_errstr(rc));
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
        r = reader_take(s, &rd);
        if (r < 0) {
                json_decref(out);
                return r;
        }
        st = rd->st[passing_only ? R_HEALTH_PASS : R_HEALTH];
        sqlite3_bind_text(st, 1, uuid, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, exclude_id ?: "", -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, (sqlite3_int64)max);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                _cleanup_json_ json_t *j = parse_text(st, 0);
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
        reader_give(s, rd);
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
        ADD(Q_BENCH, "j.benchmark = ?2");
        ADD(Q_BEFORE, (mask & Q_UUID) ? "p.job_id < ?4" : "j.id < ?4");
        ADD(Q_SINCE, (mask & Q_UUID) ? "p.job_id >= ?5" : "j.id >= ?5");
        ADD(Q_UNTIL, (mask & Q_UUID) ? "p.job_id < ?6" : "j.id < ?6");
        ADD(Q_AFTER, (mask & Q_UUID) ? "p.job_id > ?8" : "j.id > ?8");
#undef ADD
        if (at < sizeof(sql))
                snprintf(sql + at, sizeof(sql) - at, " ORDER BY %s DESC LIMIT ?7",
                         (mask & Q_UUID) ? "p.job_id" : "j.id");
        if (prepare(rd->db, sql, &rd->list[mask]) < 0)
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

int store_list_raw(struct store *s, const struct store_query *q, char **ret_text, size_t *ret_len,
                   size_t *ret_n, char ret_last[UUID_STRING_MAX], bool *ret_more)
{
        char since[UUID_STRING_MAX], until[UUID_STRING_MAX], last[UUID_STRING_MAX] = "";
        unsigned mask = (q->state ? Q_STATE : 0) | (q->benchmark ? Q_BENCH : 0) |
                        (q->uuid ? Q_UUID : 0) | (q->before ? Q_BEFORE : 0) |
                        (q->since_ms ? Q_SINCE : 0) | (q->until_ms ? Q_UNTIL : 0) |
                        (q->after ? Q_AFTER : 0) | (q->with_results ? Q_DOC : 0);
        uint64_t bytes = 0;
        struct reader *rd;
        sqlite3_stmt *st;
        char *buf = NULL;
        size_t len = 0, n = 0;
        FILE *f;
        bool more = false;
        int rc, r;

        r = reader_take(s, &rd);
        if (r < 0)
                return r;
        st = list_stmt(rd, mask);
        f = st ? open_memstream(&buf, &len) : NULL;
        if (!f) {
                reader_give(s, rd);
                return st ? -ENOMEM : -EIO;
        }
        fputc('[', f);
        id_floor(q->since_ms, since);
        id_floor(q->until_ms, until);
        bind_text_or_null(st, 1, q->state);
        bind_text_or_null(st, 2, q->benchmark);
        bind_text_or_null(st, 3, q->uuid);
        bind_text_or_null(st, 4, q->before);
        bind_text_or_null(st, 8, q->after);
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
                        json_t *j = parse_text(st, 0);
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
        reader_give(s, rd);
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

/* ---- opening ---- */

/* The lock that keeps a second umd off the store is on the state directory itself: a file
 * (umd.lock) can be deleted from under its holder, and a second umd would then lock a new file
 * of that name and open the same database; a directory holding umd.db cannot be removed.
 * umd.lock is still taken too (an older umd locks only that, and its pid is in it). */
static int take_dir_lock(struct store *s)
{
        s->dir_fd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (s->dir_fd < 0)
                return log_error_errno(errno, "Cannot open state directory %s: %m", s->dir);
        if (flock(s->dir_fd, LOCK_EX | LOCK_NB) < 0) {
                if (errno == EWOULDBLOCK) {
                        /* Its pid, if umd.lock is still there to say it. */
                        char pid[32] = "", path[PATH_MAX];
                        _cleanup_close_ int fd = -1;
                        ssize_t got;

                        snprintf(path, sizeof(path), "%s/" LOCK_NAME, s->dir);
                        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
                        got = fd >= 0 ? pread(fd, pid, sizeof(pid) - 1, 0) : -1;
                        pid[got > 0 ? got : 0] = '\0';
                        pid[strcspn(pid, "\n")] = '\0';
                        return log_error_errno(EBUSY,
                                               "Another umd (pid %s) already uses state directory "
                                               "%s (it holds the directory's lock): refusing to "
                                               "start a second one",
                                               pid[0] ? pid : "unknown", s->dir);
                }
                return log_error_errno(errno, "Cannot lock state directory %s: %m", s->dir);
        }
        return 0;
}

static int take_lock(struct store *s)
{
        _cleanup_free_ char *path = NULL;
        char pid[32];
        int n, r;

        r = take_dir_lock(s);
        if (r < 0)
                return r;
        if (asprintf(&path, "%s/" LOCK_NAME, s->dir) < 0)
                return -ENOMEM;
        s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
        if (s->lock_fd < 0)
                return log_error_errno(errno, "Cannot open %s: %m", path);
        if (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0) {
                int e = errno;
                ssize_t got = pread(s->lock_fd, pid, sizeof(pid) - 1, 0);

                pid[got > 0 ? got : 0] = '\0';
                pid[strcspn(pid, "\n")] = '\0';
                if (e == EWOULDBLOCK)
                        return log_error_errno(EBUSY,
                                               "Another umd (pid %s) already uses state directory "
                                               "%s (it holds %s): refusing to start a second one",
                                               pid[0] ? pid : "unknown", s->dir, path);
                return log_error_errno(e, "Cannot lock %s: %m", path);
        }
        n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
        if (ftruncate(s->lock_fd, 0) < 0 || pwrite(s->lock_fd, pid, (size_t)n, 0) != n)
                log_warning("Cannot write the pid to %s: %m", path);
        return 0;
}

/* umd.db, its WAL and its shared-memory file must be files of their own: through a symbolic
 * link umd would add its tables to (and switch to WAL) whatever the link points at. Refused,
 * with what it points at, rather than set aside: the link is someone's deliberate choice. */
static int check_not_links(const struct store *s)
{
        static const char *const suffixes[] = {"", "-wal", "-shm"};

        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++) {
                char path[PATH_MAX], target[PATH_MAX];
                struct stat st;
                ssize_t n;

                snprintf(path, sizeof(path), "%s%s", s->db_path, suffixes[i]);
                if (lstat(path, &st) < 0) {
                        if (errno == ENOENT)
                                continue;
                        return log_error_errno(errno, "Cannot look at %s: %m", path);
                }
                if (!S_ISLNK(st.st_mode))
                        continue;
                n = readlink(path, target, sizeof(target) - 1);
                target[n > 0 ? n : 0] = '\0';
                return log_error_errno(ELOOP,
                                       "%s is a symbolic link (to %s): refusing to open it; the "
                                       "job store must be a file of umd's own",
                                       path, target[0] ? target : "?");
        }
        return 0;
}

/* Move umd.db and its WAL aside; the next open starts an empty database. */
static int set_aside_db(struct store *s, const char *why)
{
        char ts[40], target[PATH_MAX];
        static const char *const suffixes[] = {"", "-wal", "-shm"};

        snprintf(ts, sizeof(ts), "%llu", (unsigned long long)now_realtime_ms());
        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++) {
                char from[PATH_MAX];

                snprintf(from, sizeof(from), "%s%s", s->db_path, suffixes[i]);
                snprintf(target, sizeof(target), "%s.corrupt-%s%s", s->db_path, ts, suffixes[i]);
                if (rename(from, target) < 0 && errno != ENOENT)
                        return log_error_errno(errno, "Cannot set aside %s: %m", from);
        }
        snprintf(target, sizeof(target), "%s.corrupt-%s", s->db_path, ts);
        log_error("store: %s is unusable (%s): moved to %s; starting with an empty store",
                  s->db_path, why, target);
        return 0;
}

static void writer_close(struct store *s)
{
        for (size_t i = 0; i < W_COUNT; i++) {
                sqlite3_finalize(s->w[i]);
                s->w[i] = NULL;
        }
        sqlite3_close(s->wdb);
        s->wdb = NULL;
}

/* Open the writer connection, create or check the schema. -EBADMSG when the file is damaged. */
static int writer_open(struct store *s)
{
        sqlite3_stmt *st = NULL;
        int rc, r, version = 0;

        r = db_open(s->db_path, true, &s->wdb);
        if (r < 0)
                return r;
        rc = sqlite3_prepare_v2(s->wdb, "PRAGMA user_version", -1, &st, NULL);
        if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
                version = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
        if (rc != SQLITE_ROW) {
                log_error("SQLite: cannot read %s: %s", s->db_path, sqlite3_errmsg(s->wdb));
                return is_corrupt(rc) ? -EBADMSG : errno_from_sqlite(rc);
        }
        if (version > SCHEMA_VERSION)
                return log_error_errno(EPROTO,
                                       "%s was written by a newer umd (schema %d, this one knows "
                                       "%d): refusing to touch it",
                                       s->db_path, version, SCHEMA_VERSION);
        rc = sqlite3_exec(s->wdb, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_exec(s->wdb, schema, NULL, NULL, NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_exec(s->wdb, "PRAGMA user_version = 1; COMMIT", NULL, NULL, NULL);
        if (rc != SQLITE_OK) {
                log_error("SQLite: cannot set up %s: %s", s->db_path, sqlite3_errmsg(s->wdb));
                sqlite3_exec(s->wdb, "ROLLBACK", NULL, NULL, NULL);
                return is_corrupt(rc) ? -EBADMSG : errno_from_sqlite(rc);
        }
        for (size_t i = 0; i < W_COUNT; i++) {
                r = prepare(s->wdb, wsql[i], &s->w[i]);
                if (r < 0)
                        return r;
        }
        /* A cheap look at the page structure where umd will read first: the open jobs. */
        rc = sqlite3_exec(s->wdb, "SELECT count(*) FROM jobs WHERE finished_ms IS NULL", NULL, NULL,
                          NULL);
        if (rc != SQLITE_OK) {
                log_error("SQLite: cannot read %s: %s", s->db_path, sqlite3_errmsg(s->wdb));
                return is_corrupt(rc) ? -EBADMSG : errno_from_sqlite(rc);
        }
        read_stats(s);
        return 0;
}

/* The whole file's structure, once at open (PRAGMA quick_check: every page, without the
 * index-against-table cross-check of integrity_check, so seconds even for a large store).
 * writer_open read only what start-up needs (the open jobs, by their index); a damaged page
 * among finished jobs would otherwise show only as lists answering 500 while /v1/health says
 * 200. umd starts anyway, degraded (store_damage): refusing would keep the GPUs from being
 * checked and the queued jobs from running, and setting the file aside would throw away the
 * history that is still readable. */
static void quick_check(struct store *s)
{
        sqlite3_stmt *st = NULL;
        uint64_t t0 = now_monotonic_ms();
        const char *what = NULL;
        int rc;

        rc = sqlite3_prepare_v2(s->wdb, "PRAGMA quick_check(1)", -1, &st, NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
                what = (const char *)sqlite3_column_text(st, 0);
                if (what && strcmp(what, "ok") == 0)
                        what = NULL;
                else if (!what)
                        what = "quick_check gave no answer";
        } else
                what = sqlite3_errmsg(s->wdb);
        if (what) {
                snprintf(s->damage, sizeof(s->damage), "%s", what);
                log_error("store: %s is damaged (PRAGMA quick_check: %s): some finished jobs "
                          "cannot be read; umd runs degraded and /v1/health answers 503 until "
                          "the file is repaired or set aside",
                          s->db_path, s->damage);
        } else
                log_debug("store: quick_check of %s passed in %" PRIu64 " ms", s->db_path,
                          now_monotonic_ms() - t0);
        sqlite3_finalize(st);
}

const char *store_damage(const struct store *s)
{
        return s && s->damage[0] ? s->damage : NULL;
}

struct import {
        struct store *s;
        size_t n, in_tx, dup;
        int r;
};

static int import_one(json_t *job, void *userdata)
{
        struct import *im = userdata;
        struct store *s = im->s;
        const char *id = json_string_value(json_object_get(job, "id"));
        json_t *copy = json_copy(job);
        int r;

        if (!copy)
                return -ENOMEM;
        /* The old store kept finished_ms only once final; a final job without it would look
         * unfinished here. */
        int st = job_state_from_string(json_string_value(json_object_get(copy, "state")));
        if (!json_is_integer(json_object_get(copy, "finished_ms")) && st != JOB_QUEUED &&
            st != JOB_RUNNING) {
                json_t *c = json_object_get(copy, "created_ms");
                json_object_set_new(copy, "finished_ms",
                                    json_is_integer(c)
                                        ? json_incref(c)
                                        : json_integer((json_int_t)now_realtime_ms()));
        }
        if (im->in_tx == 0 && (r = wstep_done(s, s->w[W_BEGIN])) < 0)
                goto out;
        /* A case variant of an id already imported is a duplicate: keep the first. */
        sqlite3_bind_text(s->w[W_EXISTS], 1, id, -1, SQLITE_STATIC);
        bool dup = sqlite3_step(s->w[W_EXISTS]) == SQLITE_ROW;
        sqlite3_reset(s->w[W_EXISTS]);
        if (dup) {
                log_warning("store: job file %s duplicates a job already imported (ids differ "
                            "only in case); skipped",
                            id);
                im->dup++;
                r = 0;
                goto out;
        }
        r = write_job(s, copy);
        im->in_tx++;
        im->n++;
        if (r == 0 && im->in_tx >= IMPORT_BATCH) {
                r = wstep_done(s, s->w[W_COMMIT]);
                im->in_tx = 0;
        }
out:
        json_decref(copy);
        if (r < 0)
                log_error("store: cannot import job %s: %s", id ?: "?", strerror(-r));
        return r;
}

/* STATE_DIR/jobs from the store before SQLite: imported in id order, then renamed to
 * jobs.imported so it is never imported twice (and nothing is deleted). */
static int import_files(struct store *s)
{
        _cleanup_free_ char *from = NULL, *to = NULL;
        struct import im = {.s = s};
        unsigned corrupt = 0;
        struct stat st;
        int r;

        if (asprintf(&from, "%s/jobs", s->dir) < 0)
                return -ENOMEM;
        if (stat(from, &st) < 0 || !S_ISDIR(st.st_mode))
                return 0;
        r = store_files_load(from, import_one, &im, &corrupt);
        if (r == 0 && im.in_tx > 0)
                r = wstep_done(s, s->w[W_COMMIT]);
        if (r < 0) {
                if (!sqlite3_get_autocommit(s->wdb))
                        (void)wstep_done(s, s->w[W_ROLLBACK]);
                return log_error_errno(r, "store: cannot import %s: %m", from);
        }
        for (unsigned i = 0; i < 100; i++) {
                free(to);
                to = NULL;
                if ((i == 0 ? asprintf(&to, "%s/jobs.imported", s->dir)
                            : asprintf(&to, "%s/jobs.imported.%u", s->dir, i)) < 0)
                        return -ENOMEM;
                if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
                        break;
                if (errno != EEXIST)
                        return log_error_errno(errno, "Cannot rename %s: %m", from);
        }
        read_stats(s);
        log_info("store: imported %zu jobs from %s into %s (%u files set aside, %zu duplicates "
                 "skipped); the files are kept in %s",
                 im.n, from, s->db_path, corrupt, im.dup, to);
        return 0;
}

static int start_writer(struct store *s)
{
        int r = db_open(s->db_path, false, &s->cdb);

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
        if (sqlite3_exec(s->wdb, "PRAGMA wal_autocheckpoint=0", NULL, NULL, NULL) == SQLITE_OK)
                sqlite3_wal_hook(s->wdb, wal_hook, s);
        r = pthread_create(&s->thread, NULL, writer_main, s);
        if (r != 0)
                return log_error_errno(r, "Cannot start the store's writer thread: %m");
        s->thread_started = true;
        return 0;
}

int store_open(const char *state_dir, struct store **ret)
{
        struct store *s;
        int r;

        if (!state_dir || !ret)
                return -EINVAL;
        s = calloc(1, sizeof(*s));
        if (!s)
                return log_error_errno(ENOMEM, "Cannot allocate the job store");
        s->lock_fd = -1;
        s->dir_fd = -1;
        pthread_mutex_init(&s->mu, NULL);
        pthread_mutex_init(&s->readers_mu, NULL);
        pthread_mutex_init(&s->cache_mu, NULL);
        pthread_cond_init(&s->work, NULL);
        pthread_cond_init(&s->done, NULL);
        {
                /* The checkpointer's idle wait is timed on CLOCK_MONOTONIC. */
                pthread_condattr_t ca;

                pthread_condattr_init(&ca);
                pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
                pthread_cond_init(&s->ckpt, &ca);
                pthread_condattr_destroy(&ca);
        }
        s->max_jobs = UINT_MAX;
        s->wal_max_bytes = UINT64_MAX; /* unbounded until store_set_wal_max */
        s->page_size = 4096;
        s->dir = strdup(state_dir);
        if (!s->dir || asprintf(&s->db_path, "%s/" DB_NAME, state_dir) < 0) {
                s->db_path = NULL;
                r = log_error_errno(ENOMEM, "Cannot allocate the job store");
                goto fail;
        }
        r = take_lock(s);
        if (r < 0)
                goto fail;
        r = check_not_links(s);
        if (r < 0)
                goto fail;
        r = writer_open(s);
        if (r == -EBADMSG) {
                /* Damage is not repaired in place: keep the file for whoever investigates and
                 * start empty, rather than fail every start (a restart loop). */
                writer_close(s);
                r = set_aside_db(s, "the database is corrupt or not a database");
                if (r == 0)
                        r = writer_open(s);
        }
        if (r < 0)
                goto fail;
        quick_check(s);
        r = import_files(s);
        if (r < 0)
                goto fail;
        the_store = s;
        r = start_writer(s);
        if (r < 0)
                goto fail;
        log_info("store: %s open, %zu jobs", s->db_path, store_count(s));
        *ret = s;
        return 0;
fail:
        store_close(s);
        return r;
}

void store_close(struct store *s)
{
        if (!s)
                return;
        if (s->thread_started) {
                pthread_mutex_lock(&s->mu);
                s->stopping = true;
                pthread_cond_signal(&s->work);
                pthread_mutex_unlock(&s->mu);
                pthread_join(s->thread, NULL);
        }
        if (s->ckpt_started) {
                pthread_mutex_lock(&s->mu);
                s->stopping = true;
                pthread_cond_signal(&s->ckpt);
                pthread_mutex_unlock(&s->mu);
                pthread_join(s->ckpt_thread, NULL);
        }
        sqlite3_close(s->cdb);
        while (s->readers) {
                struct reader *r = s->readers;
                s->readers = r->next;
                reader_free(r);
        }
        writer_close(s);
        if (s->lock_fd >= 0)
                close(s->lock_fd);
        if (s->dir_fd >= 0)
                close(s->dir_fd);
        if (the_store == s)
                the_store = NULL;
        pthread_cond_destroy(&s->work);
        pthread_cond_destroy(&s->done);
        pthread_cond_destroy(&s->ckpt);
        pthread_mutex_destroy(&s->mu);
        pthread_mutex_destroy(&s->readers_mu);
        for (size_t i = 0; s->cache && i < CACHE_SLOTS; i++)
                blob_unref(s->cache[i].blob);
        free(s->cache);
        pthread_mutex_destroy(&s->cache_mu);
        free(s->dir);
        free(s->db_path);
        free(s);
}

/* ---- export ---- */

int store_export(const char *state_dir, const char *dir)
{
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int dfd = -1;
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        size_t n = 0;
        int rc, r = 0;

        if (asprintf(&path, "%s/" DB_NAME, state_dir) < 0)
                return -ENOMEM;
        r = mkdir_p(dir, 0750);
        if (r < 0)
                return log_error_errno(r, "Cannot create %s: %m", dir);
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return log_error_errno(errno, "Cannot open %s: %m", dir);
        r = db_open(path, false, &db);
        if (r < 0)
                return r;
        /* One read transaction: a consistent snapshot even while umd writes. */
        rc = sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_prepare_v2(db,
                                        "SELECT doc, request, created_ms, finished_ms FROM jobs "
                                        "ORDER BY id",
                                        -1, &st, NULL);
        while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
                _cleanup_json_ json_t *j = internal_from_row(st);

                if (!j) {
                        log_warning("export: a job is not valid JSON; skipped");
                        rc = SQLITE_OK;
                        continue;
                }
                r = store_files_write(dfd, j);
                if (r < 0)
                        break;
                n++;
                rc = SQLITE_OK;
        }
        if (r == 0 && rc != SQLITE_DONE)
                r = log_error_errno(EIO, "export: cannot read %s: %s", path, sqlite3_errmsg(db));
        sqlite3_finalize(st);
        sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
        sqlite3_close(db);
        if (r == 0)
                log_info("export: wrote %zu jobs from %s to %s", n, path, dir);
        return r;
}
