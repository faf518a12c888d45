/* The WAL and its checkpoints (store.h's store_set_wal_max, store_wal_stats): the hook that
 * counts each commit's WAL pages and asks for a passive checkpoint or a restart, the
 * checkpointer thread and its connection (so that no submit waits for umd.db's fsync), the
 * restart the writer runs between batches past three quarters of wal_max_bytes, and the
 * truncation once the writer is idle. */
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
 * (store_wal_restart): from this thread the checkpoint would have to win the write lock from a
 * writer that takes it back between every batch, and under steady submits it never did. */
#define WAL_IDLE_TRUNCATE_MS 1000

/* "PRAGMA journal_size_limit=" and a uint64_t in decimal (20 digits), with room to spare. */
#define WAL_LIMIT_SQL_MAX 64

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
                        store_health_log_limited(s, STORE_LOG_CHECKPOINT,
                                                 "SQLite: checkpoint of %s: %s", s->db_path,
                                                 sqlite3_errmsg(s->cdb));
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
void store_wal_restart(struct store *s)
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
                store_health_log_limited(s, STORE_LOG_CHECKPOINT,
                                         "SQLite: restarting the WAL of %s: %s", s->db_path,
                                         sqlite3_errmsg(s->wdb));
}

/* Under mu, which it lets go meanwhile: what a WAL reset (the first write after a whole
 * checkpoint) leaves of the file, at most the bound, set on the writer's own connection. */
void store_wal_apply_limit_locked(struct store *s)
{
        char sql[WAL_LIMIT_SQL_MAX];

        snprintf(sql, sizeof(sql), "PRAGMA journal_size_limit=%" PRIu64, s->wal_max_bytes);
        s->wal_limit_set = false;
        pthread_mutex_unlock(&s->mu);
        if (sqlite3_exec(s->wdb, sql, NULL, NULL, NULL) != SQLITE_OK)
                log_warning("SQLite: %s: %s", sql, sqlite3_errmsg(s->wdb));
        pthread_mutex_lock(&s->mu);
}

/* The database's page size, which the WAL's length in pages is counted in (4096 when it cannot
 * be read). */
static int wal_page_size(sqlite3 *db)
{
        sqlite3_stmt *st = NULL;
        int size = 0;

        if (sqlite3_prepare_v2(db, "PRAGMA page_size", -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
                size = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
        return size > 0 ? size : 4096;
}

int store_wal_start(struct store *s)
{
        int r = store_db_open(s->db_path, false, &s->cdb);

        if (r < 0)
                return r;
        sqlite3_exec(s->cdb, "PRAGMA query_only=0", NULL, NULL, NULL);
        /* The checkpointer's passive checkpoints never wait; its truncations wait briefly. */
        sqlite3_busy_timeout(s->cdb, WAL_TRUNCATE_WAIT_MS);
        s->page_size = wal_page_size(s->cdb);
        r = pthread_create(&s->ckpt_thread, NULL, checkpoint_main, s);
        if (r != 0)
                return log_error_errno(r, "Cannot start the store's checkpoint thread: %m");
        s->ckpt_started = true;
        pthread_setname_np(s->ckpt_thread, "umd-checkpoint");
        if (sqlite3_exec(s->wdb, "PRAGMA wal_autocheckpoint=0", NULL, NULL, NULL) == SQLITE_OK)
                sqlite3_wal_hook(s->wdb, wal_hook, s);
        return 0;
}

void store_wal_stop(struct store *s)
{
        store_writer_stop_thread(s, &s->ckpt, s->ckpt_thread, &s->ckpt_started);
        sqlite3_close(s->cdb);
        s->cdb = NULL;
}
