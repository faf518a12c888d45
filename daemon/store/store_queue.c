/* The store's write API (store.h): a change queued for the writer as a ticket (store_put,
 * store_put_final, store_put_new, store_put_part and its kin), and the one way each to learn its
 * outcome: waited on (store_wait, store_wait_doc), called back (store_when_done) or polled
 * (store_poll); store_sync for everything queued. A ticket names its store. */
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

/* Under mu: t at the end of the writer's queue (and, unless part_only, of the prep list). */
static void ticket_queue_locked(struct store *s, struct store_ticket *t)
{
        if (s->tail)
                s->tail->next = t;
        else {
                s->head = t;
                s->head_ms = t->queued_ms;
                /* Only the first wakes the writer: it then waits STORE_LAZY_MS for more, or
                 * less when someone waits (store_wait, store_sync). */
                pthread_cond_signal(&s->work);
        }
        s->tail = t;
        s->queued++;
        if (t->snap) /* else a part's state, or a row made already: nothing for a drain */
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

static int put(struct store *s, const json_t *job, bool shared, struct store_ticket **ret_ticket)
{
        const char *id = json_string_value(json_object_get(job, "id"));
        struct store_ticket *t;

        if (!id || !uuid_is_valid(id) || !json_is_array(json_object_get(job, "parts")))
                return log_error_errno(EINVAL, "Refusing to store a job without id or parts");
        t = calloc(1, sizeof(*t));
        if (!t)
                return log_error_errno(ENOMEM, "Cannot queue a job's change");
        /* The dumps (one, two when results must leave the summary) are made after the caller
         * has let core_lock go: by the caller's thread (store_prep_drain), or by the writer when it
         * reaches the change first (then only for a change no later one of its batch writes
         * again). Under the lock the caller pays a shallow copy, or a reference to a job that
         * no one changes again (store_put_final). */
        t->snap = shared ? json_incref((json_t *)job) : store_doc_snapshot(job);
        if (!t->snap) {
                free(t);
                return log_error_errno(ENOMEM, "Cannot queue job %s's change", id);
        }
        str_copy_cut(t->row.id, sizeof(t->row.id), id);
        /* Only finished jobs are cached, and nothing writes those again; a write says the
         * cached bytes (if any) are no longer the truth all the same. */
        store_cache_evict(s, t->row.id);
        ticket_put(s, t, ret_ticket);
        store_prep_mine(s, t);
        return 0;
}

int store_put(struct store *s, const json_t *job, struct store_ticket **ret_ticket)
{
        return put(s, job, false, ret_ticket);
}

int store_put_final(struct store *s, const json_t *job, struct store_ticket **ret_ticket)
{
        return put(s, job, true, ret_ticket);
}

int store_put_new(struct store *s, struct store_new *p, const char *id,
                  struct store_ticket **ret_ticket)
{
        struct store_ticket *t;

        assert(p && ret_ticket);
        if (!id || !uuid_is_valid(id) || strlen(id) != strlen(p->row.id)) {
                store_new_free(p);
                return log_error_errno(EINVAL, "Refusing to store a new job under '%s': not an id",
                                       id ? id : "(none)");
        }
        t = calloc(1, sizeof(*t));
        if (!t) {
                store_new_free(p);
                return log_error_errno(ENOMEM, "Cannot queue job %s's change", id);
        }
        memcpy(p->row.doc + p->id_at_doc, id, strlen(id));
        if (p->row.summary != p->row.doc)
                memcpy(p->row.summary + p->id_at_sum, id, strlen(id));
        str_copy_cut(p->row.id, sizeof(p->row.id), id);
        p->row.fresh = true;
        t->row = p->row;
        free(p);
        /* Made already: no drain is asked for it, and the writer takes the row as it is. */
        atomic_init(&t->prep, PREP_OWNED);
        store_cache_evict(s, t->row.id);
        t->store = s;
        t->waited = true;
        t->keep_doc = true;
        t->queued_ms = now_monotonic_ms();
        pthread_mutex_lock(&s->mu);
        ticket_queue_locked(s, t);
        pthread_mutex_unlock(&s->mu);
        *ret_ticket = t;
        return 0;
}

int store_put_part(struct store *s, const char *job_id, size_t idx, const char *state)
{
        return store_put_part_doc(s, job_id, idx, state, NULL);
}

static int put_part(struct store *s, const char *job_id, size_t idx, const char *state,
                    const json_t *part, struct store_ticket **ret_ticket);

int store_put_part_doc(struct store *s, const char *job_id, size_t idx, const char *state,
                       const json_t *part)
{
        return put_part(s, job_id, idx, state, part, NULL);
}

int store_put_part_waited(struct store *s, const char *job_id, size_t idx, const char *state,
                          struct store_ticket **ret_ticket)
{
        assert(ret_ticket);
        return put_part(s, job_id, idx, state, NULL, ret_ticket);
}

static int put_part(struct store *s, const char *job_id, size_t idx, const char *state,
                    const json_t *part, struct store_ticket **ret_ticket)
{
        struct store_ticket *t;

        assert(state);
        assert(!part || json_is_object(part));
        if (!job_id || !uuid_is_valid(job_id))
                return log_error_errno(EINVAL, "Refusing to store a part of a job without id");
        t = calloc(1, sizeof(*t));
        if (!t)
                return log_error_errno(ENOMEM, "Cannot queue job %s's part change", job_id);
        if (part && !(t->row.doc = store_doc_part_text(part, &t->row.doc_len))) {
                free(t);
                return log_error_errno(ENOMEM, "Cannot dump part %zu of job %s", idx, job_id);
        }
        snprintf(t->row.id, sizeof(t->row.id), "%s", job_id);
        t->part_only = true;
        t->part_idx = idx;
        t->part_state = state;
        atomic_init(&t->prep, PREP_OWNED);
        ticket_put(s, t, ret_ticket);
        return 0;
}

int store_wait(struct store_ticket *t)
{
        return store_wait_doc(t, NULL, NULL);
}

/* Each thread's own, for store_wait_doc: posted once per wait by the writer, so its count is
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

int store_when_done(struct store_ticket *t, void (*ready)(void *arg), void *arg)
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

int store_wait_doc(struct store_ticket *t, char **ret_doc, size_t *ret_len)
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
                        /* Takes precedence over a store_when_done's ready, which then is not
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

int store_poll(struct store_ticket *t, int *ret_r)
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
