/* The store's write API (store.h): a change queued for the writer as a ticket (store_put, a
 * job's row made later by its maker; store_put_row, one made already; store_put_part), the rows'
 * memory, and the one way each to learn its
 * outcome: waited on (store_ticket_wait), called back (store_ticket_when_done) or polled
 * (store_ticket_poll); store_sync for everything queued. A ticket names its store. */
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
#include <semaphore.h>
#include <time.h>

#include "log.h"

void store_row_free(struct store_row *row)
{
        if (!row)
                return;
        if (row->summary != row->doc)
                free(row->summary);
        free(row->doc);
        free(row->state);
        free(row->benchmark);
        free(row->client);
        free(row->idem);
        free(row->request);
        free(row->priority);
        for (size_t i = 0; i < row->n_parts; i++) {
                free(row->parts[i].uuid);
                free(row->parts[i].state);
                free(row->parts[i].verdict);
        }
        free(row->parts);
        *row = (struct store_row){0};
}

void store_queue_src_drop(struct store_ticket *t)
{
        if (t->src)
                t->maker->drop(t->src);
        t->src = NULL;
}

/* Under mu: t at the end of the writer's queue (and, unless part_only, of the prep list). */
static void ticket_queue_locked(struct store *s, struct store_ticket *t)
{
        if (s->tail)
                s->tail->next = t;
        else {
                s->head = t;
                s->head_ms = t->queued_ms;
                /* Only the first wakes the writer: it then waits STORE_LAZY_MS for more, or
                 * less when someone waits (store_ticket_wait, store_sync). */
                pthread_cond_signal(&s->work);
        }
        s->tail = t;
        s->queued++;
        if (t->src) /* else a part's state, or a row made already: nothing for a drain */
                store_prep_list_locked(s, t);
}

/* t to the writer's queue; with ret_ticket the caller keeps it (waits for or polls it). */
static void ticket_put(struct store *s, struct store_ticket *t, struct store_ticket **ret_ticket)
{
        t->store = s;
        t->waited = ret_ticket != NULL;
        t->queued_ms = now_monotonic_ms();
        pthread_mutex_lock(&s->mu);
        ticket_queue_locked(s, t);
        pthread_mutex_unlock(&s->mu);
        if (ret_ticket)
                *ret_ticket = t;
}

int store_put(struct store *s, const char *id, const struct store_row_maker *maker, void *src,
              struct store_ticket **ret_ticket)
{
        struct store_ticket *t;

        assert(maker && src);
        if (!id || !uuid_is_valid(id)) {
                maker->drop(src);
                return log_error_errno(EINVAL, "Refusing to store a job without id");
        }
        t = calloc(1, sizeof(*t));
        if (!t) {
                maker->drop(src);
                return log_error_errno(ENOMEM, "Cannot queue job %s's change", id);
        }
        /* The row is made after the caller has let core_lock go: by the caller's thread
         * (store_prep_drain), or by the writer when it reaches the change first (then only for
         * a change no later one of its batch writes again). */
        t->src = src;
        t->maker = maker;
        str_copy_cut(t->row.id, sizeof(t->row.id), id);
        /* Only finished jobs are cached, and nothing writes those again; a write says the
         * cached bytes (if any) are no longer the truth all the same. */
        store_cache_evict(s, t->row.id);
        ticket_put(s, t, ret_ticket);
        store_prep_mine(s, t);
        return 0;
}

int store_put_row(struct store *s, struct store_row *row, struct store_ticket **ret_ticket)
{
        struct store_ticket *t;

        assert(row && ret_ticket);
        if (!uuid_is_valid(row->id) || !row->doc) {
                store_row_free(row);
                return log_error_errno(EINVAL, "Refusing to store a row without id or document");
        }
        t = calloc(1, sizeof(*t));
        if (!t) {
                log_error("Cannot queue job %s's change: %s", row->id, strerror(ENOMEM));
                store_row_free(row);
                return -ENOMEM;
        }
        t->row = *row;
        *row = (struct store_row){0};
        /* Made already: no drain is asked for it, and the writer takes the row as it is. */
        atomic_init(&t->prep, PREP_OWNED);
        store_cache_evict(s, t->row.id);
        t->keep_doc = true;
        ticket_put(s, t, ret_ticket);
        return 0;
}

int store_put_part(struct store *s, const char *job_id, size_t idx, const char *state, char *doc,
                   size_t doc_len, struct store_ticket **ret_ticket)
{
        struct store_ticket *t;

        assert(state);
        if (!job_id || !uuid_is_valid(job_id)) {
                free(doc);
                return log_error_errno(EINVAL, "Refusing to store a part of a job without id");
        }
        t = calloc(1, sizeof(*t));
        if (!t) {
                free(doc);
                return log_error_errno(ENOMEM, "Cannot queue job %s's part change", job_id);
        }
        t->row.doc = doc;
        t->row.doc_len = doc_len;
        snprintf(t->row.id, sizeof(t->row.id), "%s", job_id);
        t->part_only = true;
        t->part_idx = idx;
        t->part_state = state;
        atomic_init(&t->prep, PREP_OWNED);
        ticket_put(s, t, ret_ticket);
        return 0;
}

/* Each thread's own, for store_ticket_wait: posted once per wait by the writer, so its count is
 * back to zero whenever the thread is not waiting. */
static _Thread_local sem_t wait_sem;
static _Thread_local bool wait_sem_ready;

/* Under mu, t not done: a commit is awaited, so the writer stops gathering more for it. */
static void awaited_locked(struct store *s)
{
        s->urgent = true; /* the writer stops waiting for more */
        s->waiting++;
        /* A gathering writer needs waking only once it has as many as it waits for. */
        if (!s->gather_until_us || s->waiting >= s->last_waiting)
                pthread_cond_signal(&s->work);
}

int store_ticket_when_done(struct store_ticket *t, void (*ready)(void *arg), void *arg)
{
        struct store *s = t->store;
        int r = 1;

        assert(t && ready);
        pthread_mutex_lock(&s->mu);
        if (!t->done) {
                t->ready = ready;
                t->ready_arg = arg;
                awaited_locked(s);
                r = 0;
        }
        pthread_mutex_unlock(&s->mu);
        return r;
}

int store_ticket_wait(struct store_ticket *t, char **ret_doc, size_t *ret_len)
{
        struct store *s = t->store;
        bool blocked = false;
        int r;

        if (!wait_sem_ready) {
                /* Cannot fail: not shared between processes, and 0 is a valid count. */
                (void)sem_init(&wait_sem, 0, 0);
                wait_sem_ready = true;
        }
        /* Woken by a semaphore of its own, not by a condition on mu: a batch's waiters, all
         * woken at once, had each to take mu back in turn (the writer still held it while it
         * woke the next), and each let the next in with a futex wake of its own. */
        if (!atomic_load_explicit(&t->done, memory_order_acquire)) {
                pthread_mutex_lock(&s->mu);
                if (!t->done) {
                        /* Takes precedence over a store_ticket_when_done's ready, which then is not
                         * called. */
                        t->waiter = &wait_sem;
                        blocked = true;
                        awaited_locked(s);
                }
                pthread_mutex_unlock(&s->mu);
        }
        if (blocked)
                while (sem_wait(&wait_sem) < 0)
                        assert(errno == EINTR);
        /* done, set before the post (or seen under mu), orders what the writer wrote in t. */
        assert(atomic_load_explicit(&t->done, memory_order_acquire));
        r = t->r;
        if (ret_doc && r == 0 && t->kept_doc) {
                *ret_doc = t->kept_doc;
                *ret_len = t->kept_len;
        } else
                free(t->kept_doc);
        free(t);
        return r;
}

int store_ticket_poll(struct store_ticket *t, int *ret_r)
{
        /* Without the store's lock: the job files poll every finished job's ticket under its own
         * lock, and taking the writer's mutex for each made them wait on each other. */
        if (!atomic_load_explicit(&t->done, memory_order_acquire))
                return 0;
        *ret_r = t->r;
        free(t->kept_doc);
        free(t);
        return 1;
}

uint64_t store_commits(struct store *s)
{
        return s ? atomic_load_explicit(&s->committed, memory_order_acquire) : 0;
}

void store_sync(struct store *s)
{
        pthread_mutex_lock(&s->mu);
        uint64_t want = s->queued;
        if (s->committed < want) {
                s->urgent = true;
                s->flush_all = true; /* the young unwaited changes too */
                pthread_cond_signal(&s->work);
        }
        s->sync_waiters++;
        while (s->committed < want)
                pthread_cond_wait(&s->done, &s->mu);
        s->sync_waiters--;
        pthread_mutex_unlock(&s->mu);
}
