/* Whether the store can commit, as its writer's commits show it, and how loudly it says it
 * cannot (issue 57). A disk gone read-only (ext4 errors=remount-ro), failing or full makes every
 * commit fail: umd then must not start parts whose end it cannot record (a part that ran
 * uncommitted runs again after a restart), must say so where NHC, Slurm and Prometheus look
 * (/v1/health, /metrics: job_dispatch.c and core.c ask store_commit_error), and must not bury
 * the journal: the same failure came back as tens of thousands of lines a minute.
 *
 * The state is set by the writer from each batch: a batch that committed nothing and failed for
 * the disk (read-only, I/O, full) makes the store failing; a batch that commits a job's change
 * clears it. The changes that failed are what tries again: a final state is written again every
 * store_retry_ms (jobs_retry_unsaved). A probe of its own (one small transaction) was tried and
 * left out: on an ext4 remounted read-only by an error, rewriting one page in place succeeded
 * while every real commit failed, so the store looked back every 200 ms and dispatched again.
 *
 * The writer's errors go through store_health_log_limited: one line per kind every
 * STORE_LOG_INTERVAL_MS, saying how many like it were left out since the last.
 *
 * The file's own health is here too: the whole file's quick check, once after READY on a thread
 * of its own (store_check_start), and what it found (store_damage). */
#include "store_internal.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

/* A line of the store's log, formatted before the count of those left out is added. */
#define STORE_LOG_LINE_MAX 512

static bool is_disk_error(int r)
{
        return r == -EROFS || r == -EIO || r == -ENOSPC;
}

void store_health_note_batch(struct store *s, bool committed, int failed)
{
        int was = atomic_load_explicit(&s->commit_error, memory_order_relaxed);

        if (committed) {
                if (was == 0)
                        return;
                atomic_store_explicit(&s->commit_error, 0, memory_order_release);
                log_notice("store: %s commits again after %" PRIu64 " ms; parts are dispatched "
                           "again",
                           s->db_path, now_monotonic_ms() - s->failing_since_ms);
                return;
        }
        if (!is_disk_error(failed))
                return;
        atomic_fetch_add_explicit(&s->commit_failures, 1, memory_order_relaxed);
        if (was != 0)
                return;
        s->failing_since_ms = now_monotonic_ms();
        atomic_store_explicit(&s->commit_error, failed, memory_order_release);
        log_error("store: %s cannot commit (%s): no part is dispatched until it can; /v1/health "
                  "answers 503",
                  s->db_path, strerror(-failed));
}

int store_commit_error(const struct store *s)
{
        return s ? atomic_load_explicit(&s->commit_error, memory_order_acquire) : 0;
}

uint64_t store_commit_failures(const struct store *s)
{
        return s ? atomic_load_explicit(&s->commit_failures, memory_order_relaxed) : 0;
}

void store_health_log_limited(struct store *s, enum store_log_kind kind, const char *fmt, ...)
{
        char line[STORE_LOG_LINE_MAX];
        uint64_t now = now_monotonic_ms(), left_out;
        struct store_log_limit *l = &s->log_limits[kind];
        va_list ap;

        pthread_mutex_lock(&s->log_mu);
        if (l->last_ms && now - l->last_ms < STORE_LOG_INTERVAL_MS) {
                l->left_out++;
                pthread_mutex_unlock(&s->log_mu);
                return;
        }
        left_out = l->left_out;
        l->left_out = 0;
        l->last_ms = now;
        pthread_mutex_unlock(&s->log_mu);
        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        if (left_out)
                log_error("%s (and %" PRIu64 " more like it in the last %u s)", line, left_out,
                          STORE_LOG_INTERVAL_MS / 1000);
        else
                log_error("%s", line);
}

/* ---- the whole file's check ---- */

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
