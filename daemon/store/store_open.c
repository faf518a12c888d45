/* The durable job store on SQLite (store.h): STATE_DIR/umd.db in WAL mode, synchronous=FULL (a
 * 2xx means the job survives a power cut, not only a crash of umd). This file opens it: the lock
 * on the state directory, the schema, a corrupt file set aside, the quick check, the import of
 * the old jobs/ files, recovery of the unfinished jobs, export and close. The writer and its
 * checkpointer live in store_write.c, the readers and the cache in store_read.c. */
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
#include "store_internal.h"
#include "util.h"

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
     * that ended while others of its job ran: store_put_part_doc); NULL once a document of the
     * job is written again, which carries it. */
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

int store_errno_from_sqlite(int rc)
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

bool store_is_corrupt(int rc)
{
        return (rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB;
}

/* SQLite counts every allocation and free under one global mutex unless told not to: umd reads
 * none of those counts (sqlite3_memory_used and the heap limits), and that mutex was most of
 * the writer's mutex calls, 6% of its CPU on the H100 host. Only before SQLite is initialised; a
 * refusal (SQLITE_MISUSE, when another part of the process initialised it first) costs only that.
 */
static pthread_once_t sqlite_config_once = PTHREAD_ONCE_INIT;

static void sqlite_config(void)
{
        (void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

/* SQLite's NOCASE (ASCII A-Z folded to a-z, compared up to the shorter length or a NUL in
 * the left string, then the shorter first), with the equal bytes skipped eight at a time. The
 * job ids that every index seek compares are UUIDv7s sharing their first dozen characters (the
 * time), and the built-in folds each of those bytes at each of the two hundred compares a job's
 * seeks make: sqlite3_strnicmp was 5% of umd's instructions under a submit load. Its order is the
 * built-in's exactly (test_nocase_is_sqlites_own_order), so a database written by either, or by
 * the sqlite3 shell, is read right by the other. */
static inline unsigned char nocase_fold(unsigned char c)
{
        return c >= 'A' && c <= 'Z' ? (unsigned char)(c + ('a' - 'A')) : c;
}

/* The first of the eight bytes at a that differs from b's or is a NUL; 8: none. The NUL test
 * flags each NUL of a, and spuriously only a byte above a NUL: the lowest flag is exact. */
static inline int nocase_word_stop(const unsigned char *a, const unsigned char *b)
{
        uint64_t x, y, mark;

        memcpy(&x, a, sizeof(x));
        memcpy(&y, b, sizeof(y));
        mark = ((x - 0x0101010101010101u) & ~x & 0x8080808080808080u) | (x ^ y);
        if (mark == 0)
                return 8;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        return __builtin_ctzll(mark) >> 3;
#else
        return 0; /* the bytewise compare finds it */
#endif
}

int store_nocase_compare(void *unused, int n1, const void *k1, int n2, const void *k2)
{
        const unsigned char *a = k1, *b = k2;
        int n = n1 < n2 ? n1 : n2, i = 0, stop = 8;

        (void)unused;
        for (; i + 8 <= n; i += 8)
                if ((stop = nocase_word_stop(a + i, b + i)) < 8)
                        break;
        if (stop < 8)
                i += stop;
        else if (i < n && n >= 8 && nocase_word_stop(a + n - 8, b + n - 8) == 8)
                return n1 - n2; /* the rest, as the last eight bytes: equal, no NUL */
        for (; i < n; i++) {
                int d = nocase_fold(a[i]) - nocase_fold(b[i]);

                if (d != 0 || a[i] == 0)
                        return d != 0 ? d : n1 - n2;
        }
        return n1 - n2;
}

/* Open one connection with the settings every connection needs. */
int store_db_open(const char *path, bool writer, sqlite3 **ret)
{
        sqlite3 *db = NULL;
        int rc;

        pthread_once(&sqlite_config_once, sqlite_config);
        rc = writer ? store_vfs_register() : 0;

        if (rc < 0)
                return rc;
        /* NOFOLLOW: umd.db must be umd's own file, never another application's database
         * adopted through a link (check_not_links says so clearly; this closes the race).
         * The writer's VFS relies on synchronous=FULL, set below (store_vfs.c). */
        rc = sqlite3_open_v2(path, &db,
                             SQLITE_OPEN_READWRITE | (writer ? SQLITE_OPEN_CREATE : 0) |
                                 SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW,
                             writer ? STORE_WAL_VFS : NULL);
        if (rc != SQLITE_OK)
                goto fail;
        sqlite3_extended_result_codes(db, 1);
        sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);
        rc = sqlite3_create_collation_v2(db, "NOCASE", SQLITE_UTF8, NULL, store_nocase_compare,
                                         NULL);
        if (rc != SQLITE_OK)
                goto fail;
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
        return store_is_corrupt(rc) ? -EBADMSG : store_errno_from_sqlite(rc);
}

int store_prepare(sqlite3 *db, const char *sql, sqlite3_stmt **ret)
{
        int rc = sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, ret, NULL);

        if (rc != SQLITE_OK) {
                log_error("SQLite: cannot prepare \"%.60s\": %s", sql, sqlite3_errmsg(db));
                return store_is_corrupt(rc) ? -EBADMSG : store_errno_from_sqlite(rc);
        }
        return 0;
}

/* The internal form back from the row: the public document plus the bookkeeping columns. */
json_t *store_internal_from_row(sqlite3_stmt *st)
{
        json_t *j = store_parse_text(st, 0);

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

json_t *store_parse_doc(const char *text, size_t len, json_error_t *e)
{
        return json_parse_strict(text, len, STORE_JSON_DEPTH, e);
}

/* What store_recover keeps of a job's parts' rows while the callback runs: the strings are
 * copied into one buffer, reused from job to job (a row's pointers last only to its next
 * step). */
struct open_parts {
        struct store_open_part *parts;
        size_t cap;
        char *buf;
        size_t buf_len, buf_cap;
};

/* The internal document as text: the stored one (an object) with request (quoted by the query)
 * and created_ms appended, as store_internal_from_row adds them to the tree. Pieces copied, no
 * formatting: this runs once for each of thousands of queued jobs before READY. A stored document
 * that is not an object is handed on as it is, for whoever parses it to refuse. */
static char *internal_text(sqlite3_stmt *st, int doc_col, int req_col, int created_col,
                           size_t *ret_len)
{
        static const char req_key[] = "\"request\":", created_key[] = "\"created_ms\":";
        const char *doc = (const char *)sqlite3_column_text(st, doc_col);
        size_t len = (size_t)sqlite3_column_bytes(st, doc_col);
        const char *req = NULL;
        size_t req_len = 0, n = 0;
        char num[24], *out;
        int num_len;

        if (!doc)
                return NULL;
        if (len < 2 || doc[0] != '{' || doc[len - 1] != '}') {
                out = strndup(doc, len);
                *ret_len = out ? len : 0;
                return out;
        }
        if (sqlite3_column_type(st, req_col) != SQLITE_NULL) {
                req = (const char *)sqlite3_column_text(st, req_col);
                req_len = (size_t)sqlite3_column_bytes(st, req_col);
        }
        num_len =
            snprintf(num, sizeof(num), "%" PRId64, (int64_t)sqlite3_column_int64(st, created_col));
        /* "{...", ",\"request\":" req, ",\"created_ms\":" num, "}" */
        out = malloc(len + 1 + sizeof(req_key) + req_len + 1 + sizeof(created_key) +
                     (size_t)num_len + 1);
        if (!out)
                return NULL;
        memcpy(out, doc, len - 1);
        n = len - 1;
        if (req) {
                if (n > 1)
                        out[n++] = ',';
                memcpy(out + n, req_key, sizeof(req_key) - 1);
                n += sizeof(req_key) - 1;
                memcpy(out + n, req, req_len);
                n += req_len;
        }
        if (n > 1)
                out[n++] = ',';
        memcpy(out + n, created_key, sizeof(created_key) - 1);
        n += sizeof(created_key) - 1;
        memcpy(out + n, num, (size_t)num_len);
        n += (size_t)num_len;
        out[n++] = '}';
        *ret_len = n;
        return out;
}

/* Columns of R_OPEN. */
enum {
        O_ID,
        O_STATE,
        O_PRIORITY,
        O_CANCEL,
        O_CLIENT,
        O_IDEM,
        O_CREATED,
};

/* Parts store_recover hands on for a job: one a GPU (64 at most, as fake_devices) or one on the
 * node. A job with more would be handed on with fewer, which its check finds different from its
 * document, recovering it from that. */
#define OPEN_PARTS_MAX 64

/* Appends s (NUL included) to op's buffer; its offset, or -1 (out of memory). Offsets, not
 * pointers: the buffer moves as it grows. */
static ssize_t open_parts_keep(struct open_parts *op, const char *s)
{
        size_t n = strlen(s) + 1, at = op->buf_len;

        if (op->buf_len + n > op->buf_cap) {
                size_t cap = op->buf_cap ? op->buf_cap : 256;
                while (cap < op->buf_len + n)
                        cap *= 2;
                char *b = realloc(op->buf, cap);
                if (!b)
                        return -1;
                op->buf = b;
                op->buf_cap = cap;
        }
        memcpy(op->buf + at, s, n);
        op->buf_len += n;
        return (ssize_t)at;
}

/* R_OPEN_PARTS, walked beside R_OPEN: rc is its last step's result (SQLITE_ROW: on a row), 0
 * before the first. */
struct parts_walk {
        sqlite3_stmt *st;
        int rc;
};

/* A walk that meets more rows than this of jobs that are not open (finished jobs' parts lie
 * between the open ones) searches for the next open job instead: a long history then costs a
 * search a job, not a read of every row. */
#define PARTS_SKIP_MAX 16

static void parts_walk_seek(struct parts_walk *w, const char *id)
{
        sqlite3_reset(w->st);
        sqlite3_bind_text(w->st, 1, id, -1, SQLITE_TRANSIENT);
        w->rc = sqlite3_step(w->st);
}

/* The walk's row's job_id against id, in the key's collation (NOCASE: ASCII folded, as
 * strcasecmp does in the C locale). A row whose job_id cannot be read sorts first. */
static int parts_walk_cmp(struct parts_walk *w, const char *id)
{
        const char *at = (const char *)sqlite3_column_text(w->st, 0);
        return at ? strcasecmp(at, id) : -1;
}

/* Job id's parts' rows into op, by idx (a gap is left NULL; an index past what a job may have is
 * ignored: its rows were written from a document that had it). Called for ascending ids. 0,
 * -ENOMEM or -EIO. */
static int open_parts_read(struct open_parts *op, struct parts_walk *w, const char *id,
                           size_t *ret_n)
{
        ssize_t offs[3 * OPEN_PARTS_MAX];
        size_t n = 0, skipped = 0;

        op->buf_len = 0;
        if (w->rc == 0)
                parts_walk_seek(w, id);
        while (w->rc == SQLITE_ROW && parts_walk_cmp(w, id) < 0) {
                if (++skipped > PARTS_SKIP_MAX) {
                        parts_walk_seek(w, id);
                        skipped = 0;
                        continue;
                }
                w->rc = sqlite3_step(w->st);
        }
        for (; w->rc == SQLITE_ROW && parts_walk_cmp(w, id) == 0; w->rc = sqlite3_step(w->st)) {
                sqlite3_int64 idx = sqlite3_column_int64(w->st, 1);
                const char *uuid = (const char *)sqlite3_column_text(w->st, 2);
                const char *state = (const char *)sqlite3_column_text(w->st, 3);
                const char *doc = (const char *)sqlite3_column_text(w->st, 4);

                if (idx < 0 || idx >= OPEN_PARTS_MAX || !uuid || !state)
                        continue; /* the document's check will say: job_checked */
                while (n <= (size_t)idx) {
                        offs[3 * n] = offs[3 * n + 1] = offs[3 * n + 2] = -1;
                        n++;
                }
                offs[3 * idx] = open_parts_keep(op, uuid);
                offs[3 * idx + 1] = open_parts_keep(op, state);
                offs[3 * idx + 2] = doc ? open_parts_keep(op, doc) : -1;
                if (offs[3 * idx] < 0 || offs[3 * idx + 1] < 0 || (doc && offs[3 * idx + 2] < 0))
                        return -ENOMEM;
        }
        if (w->rc == SQLITE_NOMEM)
                return -ENOMEM;
        if (w->rc != SQLITE_ROW && w->rc != SQLITE_DONE)
                return log_error_errno(EIO, "SQLite: cannot read the parts of job %s: %s", id,
                                       sqlite3_errstr(w->rc));
        if (n > op->cap) {
                struct store_open_part *p = realloc(op->parts, n * sizeof(*p));
                if (!p)
                        return -ENOMEM;
                op->parts = p;
                op->cap = n;
        }
        for (size_t i = 0; i < n; i++) {
                op->parts[i].uuid = offs[3 * i] < 0 ? NULL : op->buf + offs[3 * i];
                op->parts[i].state = offs[3 * i + 1] < 0 ? NULL : op->buf + offs[3 * i + 1];
                op->parts[i].doc = offs[3 * i + 2] < 0 ? NULL : op->buf + offs[3 * i + 2];
        }
        *ret_n = n;
        return 0;
}

/* o's text by R_OPEN_TEXT (NULL, with 0, when the row has none). 0, -ENOMEM or -EIO. */
static int open_text_read(sqlite3_stmt *st, struct store_open_job *o)
{
        int rc, r = 0;

        sqlite3_bind_text(st, 1, o->id, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
                o->text = internal_text(st, 0, 1, 2, &o->text_len);
                if (!o->text && sqlite3_column_type(st, 0) != SQLITE_NULL)
                        r = -ENOMEM;
        } else if (rc != SQLITE_DONE)
                r = log_error_errno(EIO, "SQLite: cannot read job %s: %s", o->id,
                                    sqlite3_errstr(rc));
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        return r;
}

int store_recover(struct store *s, store_open_fn fn, void *userdata)
{
        struct open_parts op = {0};
        struct parts_walk w = {0};
        struct reader *rd;
        sqlite3_stmt *st;
        int rc, r;

        r = store_reader_take(s, &rd);
        if (r < 0)
                return r;
        st = rd->st[R_OPEN];
        w.st = rd->st[R_OPEN_PARTS];
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                struct store_open_job o = {
                    .id = (const char *)sqlite3_column_text(st, O_ID),
                    .state = (const char *)sqlite3_column_text(st, O_STATE),
                    .priority = (const char *)sqlite3_column_text(st, O_PRIORITY),
                    .client = (const char *)sqlite3_column_text(st, O_CLIENT),
                    .idempotency_key = (const char *)sqlite3_column_text(st, O_IDEM),
                    .cancel_requested = sqlite3_column_type(st, O_CANCEL) == SQLITE_NULL
                                            ? -1
                                            : sqlite3_column_int(st, O_CANCEL) != 0,
                    .created_ms = sqlite3_column_int64(st, O_CREATED),
                };

                if (!o.id) {
                        log_warning("store: an unfinished job has no id; skipped");
                        continue;
                }
                r = open_parts_read(&op, &w, o.id, &o.n_parts);
                if (r < 0)
                        break;
                o.parts = op.parts;
                r = fn(&o, userdata);
                if (r == STORE_OPEN_WANT_TEXT) {
                        r = open_text_read(rd->st[R_OPEN_TEXT], &o);
                        if (r == 0)
                                r = fn(&o, userdata);
                        free(o.text);
                }
                if (r < 0)
                        break;
        }
        sqlite3_reset(st);
        sqlite3_reset(w.st);
        sqlite3_clear_bindings(w.st);
        store_reader_give(s, rd);
        free(op.parts);
        free(op.buf);
        if (r == -ENOMEM)
                return log_error_errno(ENOMEM, "store: out of memory reading unfinished jobs");
        if (r < 0)
                return r;
        if (rc != SQLITE_DONE)
                return log_error_errno(EIO, "SQLite: cannot read unfinished jobs: %s",
                                       sqlite3_errstr(rc));
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
        log_error("store: %s is unusable (%s): moved to %s; 0 jobs saved from it, starting with "
                  "an empty store",
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

/* Schema 1 to 2, inside writer_open's transaction: the two columns recovery reads in place of
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

/* Schema 4 to 5, inside writer_open's transaction: parts.doc, NULL in every row there is (no
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
static int writer_open(struct store *s)
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
                return store_is_corrupt(rc) ? -EBADMSG : store_errno_from_sqlite(rc);
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
                return store_is_corrupt(rc) ? -EBADMSG : store_errno_from_sqlite(rc);
        }
        for (size_t i = 0; i < W_COUNT; i++) {
                r = store_prepare(s->wdb, store_wsql[i], &s->w[i]);
                if (r < 0)
                        return r;
        }
        /* A cheap look at the page structure where umd will read first: the open jobs. */
        rc = sqlite3_exec(s->wdb, "SELECT count(*) FROM jobs WHERE finished_ms IS NULL", NULL, NULL,
                          NULL);
        if (rc != SQLITE_OK) {
                log_error("SQLite: cannot read %s: %s", s->db_path, sqlite3_errmsg(s->wdb));
                return store_is_corrupt(rc) ? -EBADMSG : store_errno_from_sqlite(rc);
        }
        store_read_stats(s);
        return 0;
}

/* The whole file's structure, once after start (PRAGMA quick_check: every page, without the
 * index-against-table cross-check of integrity_check, so seconds even for a large store). Start-up
 * read only what it needs (the open jobs, by their index); a damaged page among finished jobs
 * would otherwise show only as lists answering 500 while /v1/health says 200. umd runs anyway,
 * degraded (store_damage): refusing would keep the GPUs from being checked and the queued jobs
 * from running, and setting the file aside would throw away the history that is still readable.
 * It runs on its own connection and thread, after READY: reading the whole file costs start-up
 * tens of milliseconds for each 50 MB, and nothing needs its answer first. */
static void *check_main(void *userdata)
{
        struct store *s = userdata;
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        uint64_t t0 = now_monotonic_ms();
        const char *what = NULL;
        int rc, r;

        r = store_db_open(s->db_path, false, &db);
        if (r < 0) {
                atomic_store_explicit(&s->check_state, STORE_CHECK_PENDING, memory_order_release);
                return NULL; /* logged; the check is left undone, not called damage */
        }
        pthread_mutex_lock(&s->check_mu);
        s->check_db = db;
        pthread_mutex_unlock(&s->check_mu);
        rc = sqlite3_prepare_v2(db, "PRAGMA quick_check(1)", -1, &st, NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
                what = (const char *)sqlite3_column_text(st, 0);
                if (what && strcmp(what, "ok") == 0)
                        what = NULL;
                else if (!what)
                        what = "quick_check gave no answer";
        } else if ((rc & 0xff) == SQLITE_INTERRUPT)
                goto out; /* store_close: not an answer */
        else
                what = sqlite3_errmsg(db);
        if (what) {
                snprintf(s->damage, sizeof(s->damage), "%s", what);
                atomic_store_explicit(&s->check_state, STORE_CHECK_DAMAGED, memory_order_release);
                log_error("store: %s is damaged (PRAGMA quick_check: %s): some finished jobs "
                          "cannot be read; umd runs degraded and /v1/health answers 503 until "
                          "the file is repaired or set aside",
                          s->db_path, s->damage);
        } else {
                atomic_store_explicit(&s->check_state, STORE_CHECK_OK, memory_order_release);
                log_debug("store: quick_check of %s passed in %" PRIu64 " ms", s->db_path,
                          now_monotonic_ms() - t0);
        }
out:
        sqlite3_finalize(st);
        pthread_mutex_lock(&s->check_mu);
        s->check_db = NULL;
        pthread_mutex_unlock(&s->check_mu);
        sqlite3_close(db);
        return NULL;
}

int store_check_start(struct store *s)
{
        int r;

        assert(s && !s->check_started);
        r = pthread_create(&s->check_thread, NULL, check_main, s);
        if (r != 0)
                return log_error_errno(r, "store: cannot start the file's check: %m");
        s->check_started = true;
        pthread_setname_np(s->check_thread, "umd-check");
        return 0;
}

enum store_check store_check_state(const struct store *s)
{
        return s ? (enum store_check)atomic_load_explicit(&s->check_state, memory_order_acquire)
                 : STORE_CHECK_PENDING;
}

const char *store_damage(const struct store *s)
{
        return store_check_state(s) == STORE_CHECK_DAMAGED ? s->damage : NULL;
}

const char *store_repaired(const struct store *s)
{
        return s && s->repaired[0] ? s->repaired : NULL;
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
        if (im->in_tx == 0 && (r = store_wstep(s, s->w[W_BEGIN])) < 0)
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
        {
                struct store_row row = {0};

                r = store_row_from_job(copy, &row);
                if (r == 0)
                        r = store_write_row(s, &row);
                store_row_free(&row);
        }
        im->in_tx++;
        im->n++;
        if (r == 0 && im->in_tx >= IMPORT_BATCH) {
                r = store_wstep(s, s->w[W_COMMIT]);
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
                r = store_wstep(s, s->w[W_COMMIT]);
        if (r < 0) {
                if (!sqlite3_get_autocommit(s->wdb))
                        (void)store_wstep(s, s->w[W_ROLLBACK]);
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
        store_read_stats(s);
        log_info("store: imported %zu jobs from %s into %s (%u files set aside, %zu duplicates "
                 "skipped); the files are kept in %s",
                 im.n, from, s->db_path, corrupt, im.dup, to);
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
        pthread_mutex_init(&s->check_mu, NULL);
        pthread_mutex_init(&s->log_mu, NULL);
        atomic_init(&s->check_state, STORE_CHECK_PENDING);
        cond_init_monotonic(&s->work); /* the writer's wait for more of the lazy changes */
        pthread_cond_init(&s->done, NULL);
        pthread_cond_init(&s->prep_done, NULL);
        cond_init_monotonic(&s->ckpt); /* the checkpointer's idle wait */
        s->max_jobs = UINT_MAX;
        s->wal_max_bytes = UINT64_MAX; /* unbounded until store_set_wal_max */
        s->page_size = 4096;
        s->ckpt_next_pages = CHECKPOINT_PAGES;
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
        /* Before anything reads through an index: recovery trusts jobs_open_cols. */
        r = access(s->db_path, F_OK) == 0
                ? store_repair_indexes(s->db_path, s->repaired, sizeof(s->repaired))
                : 0;
        if (r == 0)
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
        r = import_files(s);
        if (r < 0)
                goto fail;
        store_singleton = s;
        r = store_writer_start(s);
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
        if (s->check_started) {
                pthread_mutex_lock(&s->check_mu);
                if (s->check_db)
                        sqlite3_interrupt(s->check_db);
                pthread_mutex_unlock(&s->check_mu);
                pthread_join(s->check_thread, NULL);
        }
        store_writer_stop(s);
        store_readers_close(s);
        writer_close(s);
        if (s->lock_fd >= 0)
                close(s->lock_fd);
        if (s->dir_fd >= 0)
                close(s->dir_fd);
        if (store_singleton == s)
                store_singleton = NULL;
        pthread_cond_destroy(&s->work);
        pthread_cond_destroy(&s->done);
        pthread_cond_destroy(&s->prep_done);
        pthread_cond_destroy(&s->ckpt);
        pthread_mutex_destroy(&s->mu);
        pthread_mutex_destroy(&s->readers_mu);
        store_cache_free(s);
        pthread_mutex_destroy(&s->cache_mu);
        pthread_mutex_destroy(&s->check_mu);
        pthread_mutex_destroy(&s->log_mu);
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
        r = store_db_open(path, false, &db);
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
                _cleanup_json_ json_t *j = store_internal_from_row(st);

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
