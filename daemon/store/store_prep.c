/* Who makes a queued change's rows (store_internal.h): the thread that queued it, once it has
 * let core_lock go (store_prep_drain, asked for with core_after_unlock_arg), or else the writer
 * when it reaches the change first (store_prep_ticket_row). The prep list (under the store's mu)
 * holds the tickets no drain has looked at yet; a compare-and-swap on ticket.prep decides who
 * makes each, so that neither waits for the other but for the one ticket in hand. */
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

#include "lock.h"
#include "log.h"

static void prep_unlink(struct store *s, struct store_ticket *t)
{
        if (!t->prep_prev && s->prep_head != t)
                return; /* not listed */
        if (t->prep_prev)
                t->prep_prev->prep_next = t->prep_next;
        else
                s->prep_head = t->prep_next;
        if (t->prep_next)
                t->prep_next->prep_prev = t->prep_prev;
        else
                s->prep_tail = t->prep_prev;
        t->prep_prev = t->prep_next = NULL;
}

/* Under mu: until the thread making t's row (store_prep_drain) has finished it, if one is. */
static void prep_wait_locked(struct store *s, struct store_ticket *t)
{
        if (atomic_load_explicit(&t->prep, memory_order_acquire) != PREP_BUSY)
                return;
        s->prep_waiting++;
        while (atomic_load_explicit(&t->prep, memory_order_acquire) == PREP_BUSY)
                pthread_cond_wait(&s->prep_done, &s->mu);
        s->prep_waiting--;
}

/* Under mu: t, out of store_prep_drain's reach, is the caller's to free. Its row, if a drain made
 * one that nobody took (a superseded change), freed. */
void store_prep_release(struct store *s, struct store_ticket *t)
{
        prep_unlink(s, t);
        prep_wait_locked(s, t);
        store_row_free(&t->prep_row);
}

/* The changes this thread queued since it last drained, for it to make the rows of
 * (store_prep_drain). Past PREP_MINE_MAX in one hold of core_lock (retention, a queue failed at
 * once) the rest are left to the writer. */
#define PREP_MINE_MAX 8
static _Thread_local struct store_ticket *prep_mine[PREP_MINE_MAX];
static _Thread_local unsigned prep_n_mine;

/* Under mu: whether t is still on the prep list. The writer unlinks a ticket (store_prep_release)
 * before it frees it, so a ticket found here is alive; one not found is never dereferenced. */
static bool prep_listed(const struct store *s, const struct store_ticket *t)
{
        for (const struct store_ticket *l = s->prep_tail; l; l = l->prep_prev)
                if (l == t)
                        return true;
        return false;
}

/* Make the rows of the changes this thread queued, once it has let core_lock go (store_put asks
 * for it with core_after_unlock_arg), with their makers (the job subsystem's dumps): they are then
 * neither under core_lock nor the one writer's work. They were a thread's of their own
 * (umd-store-prep), woken for every change: two context switches a change, which cost more than the
 * dump. A thread makes only its own, in one hold of mu before and one after, so that sixteen HTTP
 * threads do not queue on mu for each other's. A ticket the writer reaches first it makes itself
 * (PREP_OWNED), so neither ever waits for the other but for the one ticket in hand. */
static void store_prep_drain(void *arg)
{
        struct store *s = arg;
        struct store_ticket *todo[PREP_MINE_MAX];
        unsigned n = 0;

        if (prep_n_mine == 0)
                return;
        pthread_mutex_lock(&s->mu);
        for (unsigned i = 0; i < prep_n_mine; i++) {
                struct store_ticket *t = prep_mine[i];
                int st = PREP_NONE;

                if (s->stopping || !prep_listed(s, t))
                        continue;
                prep_unlink(s, t);
                if (atomic_compare_exchange_strong(&t->prep, &st, PREP_BUSY))
                        todo[n++] = t;
        }
        prep_n_mine = 0;
        pthread_mutex_unlock(&s->mu);
        if (n == 0)
                return;
        for (unsigned i = 0; i < n; i++) {
                struct store_ticket *t = todo[i];
                struct store_row row = {0};

                /* A failure (logged) leaves the source to the writer, which tries again. */
                if (t->maker->make(t->src, &row) == 0) {
                        store_queue_src_drop(t);
                        t->prep_row = row;
                        atomic_store_explicit(&t->prep, PREP_DONE, memory_order_release);
                } else
                        atomic_store_explicit(&t->prep, PREP_NONE, memory_order_release);
                /* The writer may take t from here on: its row is not touched again. */
        }
        pthread_mutex_lock(&s->mu);
        if (s->prep_waiting)
                pthread_cond_broadcast(&s->prep_done);
        pthread_mutex_unlock(&s->mu);
}

/* The ticket's rows: store_prep_drain's if it made them, else made here from its source, the
 * first time they are needed (a change that a later one of its batch writes again is never
 * made by the writer). 0, or -errno (logged) for this ticket. */
int store_prep_ticket_row(struct store *s, struct store_ticket *t)
{
        int st = PREP_NONE, r;

        while (!atomic_compare_exchange_strong(&t->prep, &st, PREP_OWNED)) {
                if (st == PREP_OWNED)
                        break; /* tried before: its row made, or its snapshot kept */
                if (st == PREP_DONE) {
                        char id[sizeof(t->row.id)];

                        memcpy(id, t->row.id, sizeof(id));
                        t->row = t->prep_row;
                        memcpy(t->row.id, id, sizeof(id));
                        memset(&t->prep_row, 0, sizeof(t->prep_row));
                        atomic_store_explicit(&t->prep, PREP_OWNED, memory_order_relaxed);
                        return 0;
                }
                /* PREP_BUSY: a drain is making it now; wait for that one dump. */
                pthread_mutex_lock(&s->mu);
                prep_wait_locked(s, t);
                pthread_mutex_unlock(&s->mu);
                st = PREP_NONE; /* PREP_DONE, or PREP_NONE when its dump failed */
        }
        if (!t->src)
                return 0;
        r = t->maker->make(t->src, &t->row);
        if (r < 0)
                return r; /* the source stays: the ticket is tried again alone */
        store_queue_src_drop(t);
        return 0;
}

void store_prep_list_locked(struct store *s, struct store_ticket *t)
{
        t->prep_prev = s->prep_tail;
        if (s->prep_tail)
                s->prep_tail->prep_next = t;
        else
                s->prep_head = t;
        s->prep_tail = t;
}

void store_prep_mine(struct store *s, struct store_ticket *t)
{
        if (prep_n_mine < PREP_MINE_MAX) {
                prep_mine[prep_n_mine++] = t;
                core_after_unlock_arg(store_prep_drain, s);
        }
}
