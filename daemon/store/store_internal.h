/* What the store's files share and nothing else may include: the store's struct, its tickets
 * and rows, its prepared statements' numbering, and the functions one file of the store offers
 * the others, each named for its file (store_writer_*, store_wal_*, ...). The store is one object
 * (struct store) split over daemon/store/ by concern:
 *   store_open.c       open and close, the state directory's lock, a corrupt file set aside
 *   store_db.c         SQLite connections, the NOCASE collation, result codes as -errno
 *   store_schema.c     the schema, its migrations, the writer's connection
 *   store_import.c     the one-time import of the old jobs/ files
 *   store_queue.c      the write API: changes queued as tickets, waited on, called back, polled
 *   store_prep.c       who makes a queued change's rows: the thread that queued it, or the writer
 *   store_rows.c       the writer's statements and what binds them
 *   store_writer.c     the writer thread and group commit
 *   store_wal.c        the WAL's bound, the checkpointer thread
 *   store_retention.c  background retention
 *   store_read.c       the reader connections and the reads by id
 *   store_cache.c      the finished jobs' cache
 *   store_list.c       lists
 *   store_recover.c    the unfinished jobs read back at start
 *   store_health.c     whether commits fail, the writer's rate-limited errors, the file's check
 *   store_repair.c     indexes that disagree with their tables, rebuilt at start
 *   store_vfs.c        the writer's VFS
 *   store_export.c     umd --export */
#pragma once

#include <pthread.h>
#include <semaphore.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "store.h"
#include "util.h"

#define DB_NAME            "umd.db"
#define STORE_REPAIRED_MAX 256 /* the names of the indexes start-up rebuilt, comma-separated */
#define LOCK_NAME          "umd.lock"
#define BUSY_TIMEOUT_MS    5000
#define RETENTION_BATCH    256
#define IMPORT_BATCH       1000
#define READERS_MAX        16
#define STORE_JSON_DEPTH   64
/* What the file's check found wrong, as SQLite's first message says it: one line for the log
 * and /v1/health, cut there. */
#define STORE_DAMAGE_MAX 256
/* WAL pages after which the checkpointer copies them into umd.db (SQLite's default). */
#define CHECKPOINT_PAGES 1000

/* How long the writer lets a change nobody waits for (a job's end, made by umd) wait for others
 * before it commits: a drain of short jobs then shares one commit among several, instead of
 * one commit (and one fdatasync) each. A store_ticket_wait or store_sync (an answer about to be
 * given) ends the wait at once, so no answer waits for it; what it risks is a crash within it
 * losing a change no client was told of, which comes back as it was last stored. */
#define STORE_LAZY_MS 20

/* How long a truncation waits for readers to leave older WAL pages. It holds the write lock
 * meanwhile, so the writer's commits wait too: short, and tried again if it is not enough. */
#define WAL_TRUNCATE_WAIT_MS 250

enum {
        W_BEGIN,
        W_COMMIT,
        W_ROLLBACK,
        W_UPSERT,
        W_UPDATE,
        W_DEL_PARTS,
        W_UPSERT_PART,
        W_PART_SAME,
        W_PART_DEVICE,
        W_PART_STATE,
        W_PART_DOC,
        W_STATS,
        W_OLD_BY_AGE,
        W_OLD_BY_ID,
        W_DELETE,
        W_EXISTS,
        W_COUNT
};

/* store_health.c: the kinds of the writer's errors, each logged once every
 * STORE_LOG_INTERVAL_MS at most, with a count of those left out. */
#define STORE_LOG_INTERVAL_MS 10000u
enum store_log_kind {
        STORE_LOG_STEP,       /* a statement failed (store_rows_step) */
        STORE_LOG_COMMIT,     /* a batch of several changes failed */
        STORE_LOG_CHANGE,     /* a change nobody waited for was not committed */
        STORE_LOG_CHECKPOINT, /* a checkpoint or WAL restart failed */
        STORE_LOG_KINDS,
};
struct store_log_limit {
        uint64_t last_ms; /* monotonic: when one was last logged */
        uint64_t left_out;
};
void store_health_log_limited(struct store *s, enum store_log_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* After each of the writer's batches: committed, something was; failed, the -errno of a failure
 * (0: none). Sets or clears store_commit_error. */
void store_health_note_batch(struct store *s, bool committed, int failed);

/* store_repair.c: compares each of umd's indexes with its table, rebuilds those that
 * disagree and names them in ret_repaired (a table that cannot be read whole leaves its indexes
 * unchecked). 0, -EBADMSG when the file is not a database, or another -errno. */
int store_repair_indexes(const char *path, char *ret_repaired, size_t len);

/* store_rows.c: the writer's statements, prepared on its connection by store_schema_open. */
extern const char *const store_rows_sql[W_COUNT];

enum {
        R_GET,
        R_IDEM,
        R_OPEN,
        R_OPEN_TEXT,
        R_OPEN_PARTS,
        R_INTERNAL,
        R_HEALTH,
        R_HEALTH_PASS,
        R_BEGIN,
        R_END,
        R_COUNT
};

/* List queries are built from which filters are present and kept per connection. Q_FINAL:
 * the state filter names a final state (else an open one). */
enum {
        Q_STATE = 1,
        Q_BENCH = 2,
        Q_UUID = 4,
        Q_BEFORE = 8,
        Q_SINCE = 16,
        Q_UNTIL = 32,
        Q_AFTER = 64,
        Q_DOC = 128,
        Q_FINAL = 256,
        Q_N = 512
};

struct reader {
        sqlite3 *db;
        sqlite3_stmt *st[R_COUNT];
        sqlite3_stmt *list[Q_N];
        struct reader *next;
};

/* Who makes a ticket's row from its snapshot (store_prep.c's store_prep_drain, on the thread that
 * queued it, or the writer), decided once by a compare-and-swap on ticket.prep. */
enum {
        PREP_NONE,  /* not made: either may take it */
        PREP_BUSY,  /* a drain makes it, outside mu */
        PREP_DONE,  /* made by a drain: prep_row holds it, snap is released */
        PREP_OWNED, /* the writer's: drains leave it alone */
};

struct store_ticket {
        struct store *store; /* whose queue it is on: a wait takes its lock */
        struct store_ticket *next;
        struct store_row row;
        /* A drain's work: it makes prep_row (all but the id, which row keeps: the
         * writer reads row.id under mu while this is made) from snap. The prep list (under
         * mu) holds the tickets no drain has looked at yet. */
        _Atomic int prep;
        struct store_row prep_row;
        struct store_ticket *prep_prev, *prep_next;
        bool superseded; /* a later ticket of the same batch writes the same job's document */
        /* store_put_part's: only part part_idx's state (a static string), no document, no
         * snapshot; prep is PREP_OWNED from the start, so no drain ever sees it. From
         * store_put_part with one, also the part's own document, in row.doc (made by the caller).
         */
        bool part_only;
        size_t part_idx;
        const char *part_state;
        bool waited; /* someone will store_ticket_wait/poll: the writer must not free it */
        /* store_put_row's: once committed, the document's bytes its own write carried
         * (row.doc) stay here for store_ticket_wait instead of being freed. */
        bool keep_doc;
        char *kept_doc;
        size_t kept_len;
        atomic_bool done; /* set (release) after r: store_ticket_poll reads it without the lock */
        int r;
        /* What store_put queued, until the writer or a drain makes the row from it with
         * maker (the job subsystem's: job_doc.c). Dropped (NULL) once the row is made; read
         * only by who holds prep. */
        void *src;
        const struct store_row_maker *maker;
        uint64_t queued_ms; /* monotonic: when store_put queued it */
        /* The semaphore of the thread blocked in store_ticket_wait, set under mu; NULL: nobody
         * blocks. The writer posts it once, after done, and touches t no more. */
        sem_t *waiter;
        /* store_ticket_when_done's: called instead, once, by the writer after done (under mu), when
         * no thread blocks; t is the caller's again from then on. */
        void (*ready)(void *arg);
        void *ready_arg;
};

struct store {
        char *dir, *db_path;
        int lock_fd;
        int dir_fd; /* the state directory, flocked: the lock no one can delete */
        /* The whole file's check (store_check_start): its thread, the connection it runs on
         * (for store_close to interrupt, under check_mu), what it found ("" when nothing) and
         * its state, published with release after damage is written. */
        pthread_t check_thread;
        bool check_started;
        pthread_mutex_t check_mu;
        sqlite3 *check_db;
        char damage[STORE_DAMAGE_MAX];
        _Atomic int check_state; /* enum store_check */
        /* Whether commits fail for the disk (store_health.c): 0 or the -errno, set and
         * cleared by the writer, read by anyone; the batches that failed so; since when
         * (monotonic, the writer's); and the writer's rate limits on its error lines. */
        _Atomic int commit_error;
        _Atomic uint64_t commit_failures;
        uint64_t failing_since_ms;
        pthread_mutex_t log_mu;
        struct store_log_limit log_limits[STORE_LOG_KINDS];
        /* The indexes start-up rebuilt (store_repair.c), "" when none; set before the store is
         * shared, never changed after. */
        char repaired[STORE_REPAIRED_MAX];

        sqlite3 *wdb;
        sqlite3_stmt *w[W_COUNT];

        pthread_mutex_t mu; /* guards everything below */
        pthread_cond_t work, done;
        struct store_ticket *head, *tail;
        uint64_t head_ms; /* monotonic: when the oldest queued ticket came */
        bool urgent;      /* someone waits for what is queued: commit it now */
        /* Gathering (store_set_commit_gather): threads in store_ticket_wait since the last batch
         * was taken, how many the last batch served, and until when (monotonic µs, 0: not
         * gathering) the writer waits for as many again. */
        unsigned waiting, last_waiting;
        uint64_t gather_us, gather_until_us;
        uint64_t queued;            /* tickets queued, for store_sync */
        _Atomic uint64_t committed; /* tickets finished (store_commits reads it unlocked) */
        bool stopping, thread_started;
        /* The changes queued whose rows nobody has claimed yet. The thread that queued one
         * makes its rows once it has let core_lock go (store_prep_drain), so that JSON is not the
         * one writer's work (it bounds the submit rate where CPUs are many); the list is how that
         * thread knows its ticket is still alive (the writer unlinks a ticket before freeing
         * it). prep_waiting: writers blocked on prep_done for a ticket a drain makes. */
        struct store_ticket *prep_head, *prep_tail;
        pthread_cond_t prep_done;
        unsigned prep_waiting;
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
        /* The WAL's bound (store_set_wal_max): past it, the writer restarts the WAL after
         * the batch (wal_restart asks for that); wal_dirty says a write came, which the
         * checkpointer truncates once the writer is idle; and
         * wal_limit_set tells the writer to apply journal_size_limit on its connection. */
        uint64_t wal_max_bytes;
        int page_size;
        bool wal_restart, wal_dirty, wal_limit_set;
        /* The WAL's length in pages at which wal_hook next asks for a passive checkpoint. */
        unsigned ckpt_next_pages;
        struct store_wal_stats wal;

        pthread_mutex_t readers_mu;
        struct reader *readers;
        unsigned n_readers;

        /* Finished jobs' documents as served, by id: they never change, so a read need not
         * ask SQLite again. Direct-mapped (a new entry takes its slot), bounded in bytes. */
        pthread_mutex_t cache_mu;
        struct cache_slot *cache; /* CACHE_SLOTS, NULL: no cache */
        uint64_t cache_bytes, cache_max;

        /* A store_sync waits (under mu): the next batch takes every ticket queued, leaving none
         * of the young unwaited ones for the one after (take_batch). */
        bool flush_all;
        /* store_sync calls blocked on done, under mu: a batch's end broadcasts only to them
         * (store_ticket_wait has a condition of its own, signalled with its ticket). */
        unsigned sync_waiters;
        /* The checkpointer's idle truncation: armed once a write came since the last one, due
         * WAL_IDLE_TRUNCATE_MS after the last commit (monotonic), which wal_hook moves without
         * waking the thread (a wake-up each commit cost a thread switch each). */
        bool ckpt_armed;
        uint64_t last_commit_ms;
};

#define CACHE_SLOTS 4096

struct cache_slot {
        char id[UUID_STRING_MAX]; /* lower case; "" when empty */
        struct blob *blob;        /* the cache's reference */
};

/* store_db.c: SQLite's result codes as -errno; a connection with the settings every one needs;
 * a persistent prepared statement. Each logs its failure. */
int store_db_errno(int rc);
bool store_db_is_corrupt(int rc);
int store_db_open(const char *path, bool writer, sqlite3 **ret);
/* The NOCASE collation each connection is given in place of SQLite's: the same order, faster on
 * strings that share a long prefix. An sqlite3 collating function. */
int store_db_nocase_compare(void *unused, int n1, const void *k1, int n2, const void *k2);
int store_db_prepare(sqlite3 *db, const char *sql, sqlite3_stmt **ret);

/* store_vfs.c: the VFS of the writer's connection (the unix VFS, with a WAL's appends written
 * once a commit, at its sync). Registered once, whoever calls first; 0 or -errno, logged. */
#define STORE_WAL_VFS "umd-wal"
int store_vfs_register(void);

/* store_schema.c: the writer's connection, with the schema created or migrated and the writer's
 * statements prepared (-EBADMSG when the file is damaged, -EPROTO when it is newer), and its
 * close (safe when not open). */
int store_schema_open(struct store *s);
void store_schema_close(struct store *s);

/* store_import.c: STATE_DIR/jobs into the database, once (0 when there is none), through
 * store_set_files' import. 0 or -errno, logged. The hooks set (for store_export.c). */
int store_import_files(struct store *s);
const struct store_files *store_import_files_hooks(void);

/* store_queue.c: a ticket's source dropped (NULL: nothing), under mu or not. */
void store_queue_src_drop(struct store_ticket *t);

/* store_rows.c, on the writer's connection: step st to its end and reset it (0 or -errno,
 * logged); a text parameter or NULL; one job's rows inside the open transaction; a part's state
 * alone (a part_only ticket's); the counts, from the stats table. */
int store_rows_step(struct store *s, sqlite3_stmt *st);
void store_rows_bind_text(sqlite3_stmt *st, int i, const char *v);
int store_rows_write(struct store *s, const struct store_row *row);
int store_rows_write_part_state(struct store *s, const struct store_ticket *t);
void store_rows_read_stats(struct store *s);

/* store_prep.c. Under mu: t on the prep list, for a drain to make its rows (store_queue.c, as
 * it queues a change with a snapshot). After the queue's mu is let go: t among this thread's, for
 * it to make once it lets core_lock go. Under mu: t out of the drains' reach, the caller's to
 * free (the writer, once t is committed). The writer's claim on t's rows: a drain's if it made
 * them, else made from the snapshot now; 0, or -errno (logged) for this ticket. */
void store_prep_list_locked(struct store *s, struct store_ticket *t);
void store_prep_mine(struct store *s, struct store_ticket *t);
void store_prep_release(struct store *s, struct store_ticket *t);
int store_prep_ticket_row(struct store *s, struct store_ticket *t);

/* store_writer.c. What a batch's commits wrote: whole rows, and parts' states alone. */
struct store_written {
        uint64_t documents, parts;
};
/* Under mu: take the tickets the next batch commits out of s's queue (the rest stay, in order;
 * head_ms follows the oldest), as a list in queue order; NULL when every one stays. */
struct store_ticket *store_writer_take_batch(struct store *s, uint64_t now);
/* Start the checkpointer and the writer (0 or -errno, logged); stop both after the writer has
 * committed what is queued, and close the checkpointer's connection (safe if never started). */
int store_writer_start(struct store *s);
void store_writer_stop(struct store *s);

/* store_wal.c: open the checkpointer's connection, start its thread and hook the writer's
 * commits (0 or -errno, logged); stop it and close its connection (safe if never started). On
 * the writer's thread, between batches: restart the WAL (wal_restart); with mu held, which it
 * lets go meanwhile: apply journal_size_limit (wal_limit_set). */
int store_wal_start(struct store *s);
void store_wal_stop(struct store *s);
void store_wal_restart(struct store *s);
void store_wal_apply_limit_locked(struct store *s);
/* One of the store's threads told to stop (stopping, its condition signalled) and joined. */
void store_writer_stop_thread(struct store *s, pthread_cond_t *wake, pthread_t thread,
                              bool *started);

/* store_retention.c, on the writer's thread: one small transaction of retention; true when there
 * may be more to delete. */
bool store_retention_step(struct store *s);

/* store_read.c: a reader connection from the pool (0 or -errno) and back; a column's text
 * free every idle reader (at close). */
int store_read_take(struct store *s, struct reader **ret);
void store_read_give(struct store *s, struct reader *r);
void store_read_close(struct store *s);

/* store_cache.c: drop a job's cached bytes; free the cache (at close). */
void store_cache_evict(struct store *s, const char *id);
void store_cache_free(struct store *s);
