/* Retention (store.h's store_retention): finished jobs beyond max_jobs, older than
 * retention_days or beyond max_store_bytes deleted oldest first, RETENTION_BATCH a transaction,
 * by the writer when it has nothing else to write, so that no submit waits behind a long
 * delete. */
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

/* One small transaction of retention; true when there may be more to delete. */
bool store_retention_step(struct store *s)
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
        r = store_rows_step(s, s->w[W_BEGIN]);
        for (size_t i = 0; r == 0 && i < n; i++) {
                sqlite3_bind_text(s->w[W_DELETE], 1, ids[i], -1, SQLITE_STATIC);
                r = store_rows_step(s, s->w[W_DELETE]);
        }
        if (r == 0)
                r = store_rows_step(s, s->w[W_COMMIT]);
        if (r < 0) {
                if (!sqlite3_get_autocommit(s->wdb))
                        (void)store_rows_step(s, s->w[W_ROLLBACK]);
                log_warning("retention: cannot delete %zu jobs: %s", n, strerror(-r));
                return false;
        }
        for (size_t i = 0; i < n; i++)
                store_cache_evict(s, ids[i]);
        log_debug("retention: deleted %zu finished jobs", n);
        store_rows_read_stats(s);
        return true;
}

void store_retention(struct store *s, unsigned max_jobs, unsigned retention_days,
                     uint64_t max_bytes)
{
        pthread_mutex_lock(&s->mu);
        /* Called at every job's end. The writer waits without a deadline only when it has no
         * change queued and no retention pending; otherwise it comes back to retention by
         * itself once its queue is empty, and a wake-up would only cut its wait for more
         * changes short (a job's final write is queued right before this). */
        bool wake = !s->head && !s->retention_pending;
        s->max_jobs = max_jobs;
        s->retention_days = retention_days;
        s->max_bytes = max_bytes;
        s->retention_pending = true;
        if (wake)
                pthread_cond_signal(&s->work);
        pthread_mutex_unlock(&s->mu);
}
