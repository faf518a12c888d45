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
 * The writer's errors go through store_log_limited: one line per kind every
 * STORE_LOG_INTERVAL_MS, saying how many like it were left out since the last. */
#include "store_internal.h"

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

void store_log_limited(struct store *s, enum store_log_kind kind, const char *fmt, ...)
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
