/* The store's writer (store_internal.h): one connection on its own thread that commits every
 * waiting change in one transaction (group commit), the choice of what a batch takes (a change
 * nobody waits for keeps STORE_LAZY_MS for others to share its commit), a batch's changes
 * superseded by a later document of their job, the wait for more waiters (commit_gather_us), and
 * a batch's outcome handed to its tickets. Between batches it restarts the WAL (store_wal.c) or
 * runs a step of retention (store_retention.c). Never reads for a client: store_read.c does. */
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

/* One transaction for the tickets in list; 0 or -errno for all of them. What it wrote is
 * added to *written once committed. */
static int commit_list(struct store *s, struct store_ticket *list, size_t max,
                       struct store_written *written)
{
        int r = store_rows_step(s, s->w[W_BEGIN]);
        struct store_written w = {0};
        size_t n = 0;

        for (struct store_ticket *t = list; r == 0 && t && n < max; t = t->next, n++) {
                if (max != 1 && t->superseded)
                        continue;
                if (t->part_only) {
                        r = store_rows_write_part_state(s, t);
                        w.parts++;
                        continue;
                }
                r = store_prep_ticket_row(s, t);
                if (r == 0)
                        r = store_rows_write(s, &t->row);
                w.documents++;
        }
        if (r == 0)
                r = store_rows_step(s, s->w[W_COMMIT]);
        if (r < 0 && !sqlite3_get_autocommit(s->wdb))
                (void)store_rows_step(s, s->w[W_ROLLBACK]);
        if (r == 0) {
                written->documents += w.documents;
                written->parts += w.parts;
        }
        return r;
}

/* The tickets of list in order, as an array of *ret_n (so that a batch can be walked from its
 * newest), and the size of an open-addressing table by job id for them: a power of two, at
 * least twice as many. NULL when out of memory (*ret_n is still set). */
static struct store_ticket **tickets_array(struct store_ticket *list, size_t *ret_n,
                                           size_t *ret_size)
{
        size_t n = 0, size = 16;
        struct store_ticket **arr;

        for (struct store_ticket *t = list; t; t = t->next)
                n++;
        while (size < 2 * n)
                size *= 2;
        *ret_n = n;
        *ret_size = size;
        arr = malloc((n ?: 1) * sizeof(*arr));
        n = 0;
        for (struct store_ticket *t = list; arr && t; t = t->next)
                arr[n++] = t;
        return arr;
}

/* Where a job id's probe starts in a table of size slots (a power of two): ids in any case. */
static size_t id_slot(const char *id, size_t size)
{
        uint64_t h = UINT64_C(14695981039346656037);

        for (const char *c = id; *c; c++)
                h = (h ^ (unsigned char)(*c | 0x20)) * UINT64_C(1099511628211);
        return h & (size - 1);
}

/* Mark each ticket whose rows a later document of the same job in batch writes again: they
 * would be replaced inside the same transaction, so writing them is work for nothing. A job's
 * running and final changes often meet in one batch. A part's state alone (part_only) is
 * superseded by a later document like any change, but supersedes nothing: the document before
 * it must still be written. Without memory for the tables nothing is marked. */
static void mark_superseded(struct store_ticket *batch)
{
        size_t n, size;
        struct store_ticket **arr, **tab = NULL;

        if (!batch || !batch->next)
                return;
        arr = tickets_array(batch, &n, &size);
        tab = calloc(size, sizeof(*tab)); /* per job: its latest document of those seen */
        if (!arr || !tab)
                goto out;
        for (size_t i = n; i-- > 0;) { /* from the newest: is a document of t's job later? */
                struct store_ticket *t = arr[i];
                size_t k;

                for (k = id_slot(t->row.id, size); tab[k]; k = (k + 1) & (size - 1))
                        if (strcasecmp(tab[k]->row.id, t->row.id) == 0)
                                break;
                if (tab[k])
                        t->superseded = true;
                else if (!t->part_only)
                        tab[k] = t;
        }
out:
        free(arr);
        free(tab);
}

/* Group commit: every ticket waiting goes into one transaction. Should it fail, each is tried
 * alone, so one job that cannot be written does not take the others down with it. */
static void commit_batch(struct store *s, struct store_ticket *batch, struct store_written *written)
{
        int r;

        mark_superseded(batch);
        r = commit_list(s, batch, SIZE_MAX, written);

        for (struct store_ticket *t = batch; t; t = t->next)
                t->r = r;
        if (r < 0 && batch->next) {
                /* Said, because a batch that fails every time still commits this way, a
                 * commit a change, and would otherwise be seen only as a slower writer. */
                store_health_log_limited(
                    s, STORE_LOG_COMMIT,
                    "store: a commit of several changes failed (%s); committing "
                    "them one at a time",
                    strerror(-r));
                for (struct store_ticket *t = batch; t; t = t->next)
                        t->r = commit_list(s, t, 1, written);
        }
        store_rows_read_stats(s);
}

void store_set_commit_gather(struct store *s, uint64_t us)
{
        pthread_mutex_lock(&s->mu);
        s->gather_us = us;
        pthread_mutex_unlock(&s->mu);
}

static uint64_t now_monotonic_us(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* Under mu, with a waited commit due: whether to wait for more to share it. A commit costs
 * about the same pages and fdatasync for one submit as for sixteen, and on a busy machine the
 * writer, committing the moment the first waiter arrives, took a few submits a commit while
 * sixteen clients were submitting (bench/store/phases: 0.25-0.54 fdatasyncs a job). So it
 * may wait, at most gather_us, for as many waiters as the last batch served: a lone client's
 * commit (one waiter, as before) never waits, and concurrent clients share more of each. A
 * sync (an answer about to be given) and a stop never wait. Off by default: under a
 * sustained load the writer is the bottleneck and the wait only idled it (bench/store/ratio,
 * bench/store/RESULTS.md). */
static bool gather_more(struct store *s, struct timespec *ret_until)
{
        if (!s->gather_us || s->flush_all || s->stopping || s->waiting >= s->last_waiting) {
                s->gather_until_us = 0;
                return false;
        }
        uint64_t now = now_monotonic_us();
        if (!s->gather_until_us)
                s->gather_until_us = now + s->gather_us;
        if (now >= s->gather_until_us) {
                s->gather_until_us = 0;
                return false;
        }
        ret_until->tv_sec = (time_t)(s->gather_until_us / 1000000);
        ret_until->tv_nsec = (long)(s->gather_until_us % 1000000) * 1000;
        return true;
}

/* The tickets the next batch commits, taken from the queue under mu. A commit that someone
 * waits for (a submit, a cancel) would otherwise carry every change queued a moment before it,
 * and under a load of submits a part's start was committed within a millisecond or two,
 * before its end came to make it worthless. So a change nobody waits for keeps its
 * STORE_LAZY_MS for the next batch, whatever commits meanwhile; its durability is what it was
 * (committed within that window), and what a client was told rides no kept ticket: waited
 * tickets always go, and a store_sync (an answer showing what is queued) takes everything.
 * A job's tickets keep their order: one is kept only when every later ticket of its job is
 * too. Without memory for the tables, everything goes, as before. */
struct store_ticket *store_writer_take_batch(struct store *s, uint64_t now)
{
        struct store_ticket *all = s->head, *batch = NULL, *keep = NULL, **bt = &batch,
                            **kt = &keep, *keep_tail = NULL;
        struct slot {
                const char *id;
                bool keep;
        } *tab = NULL;
        struct store_ticket **arr = NULL;
        bool *kept = NULL;
        size_t n, size;

        s->head = s->tail = NULL;
        if (!s->urgent || s->flush_all || s->stopping)
                goto all;
        arr = tickets_array(all, &n, &size);
        kept = malloc((n ?: 1) * sizeof(*kept));
        tab = calloc(size, sizeof(*tab));
        if (!arr || !kept || !tab)
                goto all;
        for (size_t i = n; i-- > 0;) {
                struct store_ticket *t = arr[i];
                size_t k;

                for (k = id_slot(t->row.id, size); tab[k].id; k = (k + 1) & (size - 1))
                        if (strcasecmp(tab[k].id, t->row.id) == 0)
                                break;
                /* tab[k]: the nearest later ticket of the same job, if any. */
                kept[i] =
                    !t->waited && now < t->queued_ms + STORE_LAZY_MS && (!tab[k].id || tab[k].keep);
                tab[k].id = t->row.id;
                tab[k].keep = kept[i];
        }
        for (size_t i = 0; i < n; i++) {
                arr[i]->next = NULL;
                if (kept[i]) {
                        *kt = keep_tail = arr[i];
                        kt = &arr[i]->next;
                } else {
                        *bt = arr[i];
                        bt = &arr[i]->next;
                }
        }
        free(arr);
        free(kept);
        free(tab);
        s->head = keep;
        s->tail = keep_tail;
        if (keep)
                s->head_ms = keep->queued_ms;
        return batch;
all:
        free(arr);
        free(kept);
        free(tab);
        s->flush_all = false;
        return all;
}

/* t's own write carried the document (it was not superseded): its bytes move from the row to
 * t for store_ticket_wait, and the summary, when it was the same buffer, goes with the row. */
static void ticket_keep_doc(struct store_ticket *t)
{
        t->kept_doc = t->row.doc;
        t->kept_len = t->row.doc_len;
        if (t->row.summary == t->row.doc)
                t->row.summary = NULL;
        t->row.doc = NULL;
}

/* What the batch's outcome says of the disk (store_health.c). */
static void note_batch(struct store *s, const struct store_ticket *batch)
{
        bool committed = false;
        int failed = 0;

        for (const struct store_ticket *t = batch; t; t = t->next) {
                if (t->r == 0)
                        committed = true;
                else if (!failed)
                        failed = t->r;
        }
        store_health_note_batch(s, committed, failed);
}

/* Under mu, a committed or failed t of a batch: counted, out of the drains' reach, its rows
 * freed, and handed to whoever waits (store_ticket_wait's semaphore, store_ticket_when_done's call)
 * or, when nobody does, freed. */
static void writer_finish_locked(struct store *s, struct store_ticket *t)
{
        if (t->r == 0) { /* what /metrics counts: committed */
                s->wal.changes++;
                s->wal.waited_changes += t->waited;
        }
        store_prep_release(s, t);
        if (t->keep_doc && t->r == 0 && t->row.doc)
                ticket_keep_doc(t);
        store_row_free(&t->row);
        store_queue_src_drop(t); /* superseded: never made into rows */
        if (t->waited) {
                sem_t *waiter = t->waiter;
                void (*ready)(void *) = t->ready;
                void *ready_arg = t->ready_arg;

                /* From here the waiter may free t: it is read first. */
                atomic_store_explicit(&t->done, true, memory_order_release);
                if (waiter)
                        sem_post(waiter);
                else if (ready)
                        ready(ready_arg);
        } else {
                if (t->r < 0)
                        store_health_log_limited(s, STORE_LOG_CHANGE,
                                                 "store: a job's change was not committed: %s",
                                                 strerror(-t->r));
                free(t);
        }
}

/* Under mu, with changes queued and none of them to wait for longer: one batch taken, committed
 * without mu, and its tickets finished; then the WAL restarted if the batch took it past its
 * bound. */
static void writer_batch_locked(struct store *s)
{
        struct store_ticket *batch = store_writer_take_batch(s, now_monotonic_ms()), *next;
        struct store_written written = {0};
        uint64_t n = 0;

        s->urgent = false; /* those who wait, wait for this batch */
        s->last_waiting = s->waiting;
        s->waiting = 0;
        if (!batch)
                return; /* all kept: whoever was urgent is answered already */
        pthread_mutex_unlock(&s->mu);
        commit_batch(s, batch, &written);
        note_batch(s, batch);
        pthread_mutex_lock(&s->mu);
        s->wal.documents_written += written.documents;
        s->wal.parts_written += written.parts;
        for (struct store_ticket *t = batch; t; t = next) {
                next = t->next;
                n++;
                writer_finish_locked(s, t);
        }
        s->committed += n;
        /* Not every store_ticket_wait: one woken for a ticket of a later batch costs a switch to
         * sleep again, and sixteen submits wait at once. */
        if (s->sync_waiters)
                pthread_cond_broadcast(&s->done);
        if (s->wal_restart) {
                s->wal_restart = false;
                pthread_mutex_unlock(&s->mu);
                store_wal_restart(s);
                pthread_mutex_lock(&s->mu);
        }
}

/* Under mu, with changes queued: whether to wait for more before a batch (a timed wait on work
 * done, so the caller looks again). Nobody waits yet: the oldest change's STORE_LAZY_MS, for
 * more to share its commit; someone does: commit_gather_us (gather_more). */
static bool writer_wait_for_more_locked(struct store *s)
{
        struct timespec at;

        if (!s->urgent && !s->stopping) {
                uint64_t now = now_monotonic_ms();

                if (now < s->head_ms + STORE_LAZY_MS) {
                        deadline_after_ms(CLOCK_MONOTONIC,
                                          (unsigned)(s->head_ms + STORE_LAZY_MS - now), &at);
                        (void)pthread_cond_timedwait(&s->work, &s->mu, &at);
                        return true;
                }
        }
        if (gather_more(s, &at)) {
                (void)pthread_cond_timedwait(&s->work, &s->mu, &at);
                return true;
        }
        return false;
}

static void *writer_main(void *userdata)
{
        struct store *s = userdata;

        pthread_mutex_lock(&s->mu);
        for (;;) {
                while (!s->head && !s->stopping && !s->retention_pending && !s->wal_limit_set)
                        pthread_cond_wait(&s->work, &s->mu);
                if (s->wal_limit_set) {
                        store_wal_apply_limit_locked(s);
                        continue;
                }
                if (s->head) {
                        if (!writer_wait_for_more_locked(s))
                                writer_batch_locked(s);
                        continue;
                }
                if (s->stopping)
                        break;
                /* Nothing to write: one batch of retention, then look for writes again, so
                 * submits never wait behind a long delete. */
                pthread_mutex_unlock(&s->mu);
                bool more = store_retention_step(s);
                pthread_mutex_lock(&s->mu);
                if (!more)
                        s->retention_pending = false;
        }
        pthread_mutex_unlock(&s->mu);
        return NULL;
}

int store_writer_start(struct store *s)
{
        int r = store_wal_start(s);

        if (r < 0)
                return r;
        r = pthread_create(&s->thread, NULL, writer_main, s);
        if (r != 0)
                return log_error_errno(r, "Cannot start the store's writer thread: %m");
        s->thread_started = true;
        pthread_setname_np(s->thread, "umd-store");
        return 0;
}

void store_writer_stop_thread(struct store *s, pthread_cond_t *wake, pthread_t thread,
                              bool *started)
{
        if (!*started)
                return;
        pthread_mutex_lock(&s->mu);
        s->stopping = true;
        pthread_cond_signal(wake);
        pthread_mutex_unlock(&s->mu);
        pthread_join(thread, NULL);
        *started = false;
}

void store_writer_stop(struct store *s)
{
        /* The writer first: it drains what is queued, making the rows no caller has made. */
        store_writer_stop_thread(s, &s->work, s->thread, &s->thread_started);
        store_wal_stop(s);
}
