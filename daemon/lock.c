/* The daemon's one lock (see lock.h), which thread holds it, what a holder runs once it lets go
 * (core_after_unlock) and the work others left to its next holder (core_defer). */
#include "lock.h"

#include <pthread.h>
#include <stdatomic.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* Per thread, so that asking needs no lock of its own: only the holder ever sets its flag, and
 * a thread that does not hold the lock reads its own false. */
static _Thread_local bool held_here;
/* What the holder asked to run once it lets go (core_after_unlock), in the order asked. Two
 * users today: the look's wake-up and the store's dump of the changes queued. */
#define AFTER_UNLOCK_MAX 4
struct after_unlock {
        void (*fn)(void);          /* core_after_unlock's, or NULL */
        void (*fn_arg)(void *arg); /* core_after_unlock_arg's, with arg */
        void *arg;
};
static _Thread_local struct after_unlock after_unlock[AFTER_UNLOCK_MAX];
static _Thread_local unsigned n_after_unlock;

void core_lock(void)
{
        pthread_mutex_lock(&lock);
        held_here = true;
}

/* What core_defer queued: a stack, newest first, taken whole by whoever runs it. */
static _Atomic(struct core_deferred *) deferred;

/* The release and what the holder asked to run after it. */
static void unlock_once(void)
{
        struct after_unlock fns[AFTER_UNLOCK_MAX];
        unsigned n = n_after_unlock;

        assert_locked();
        for (unsigned i = 0; i < n; i++)
                fns[i] = after_unlock[i];
        n_after_unlock = 0;
        held_here = false;
        pthread_mutex_unlock(&lock);
        for (unsigned i = 0; i < n; i++)
                if (fns[i].fn)
                        fns[i].fn();
                else
                        fns[i].fn_arg(fns[i].arg);
}

void core_unlock(void)
{
        unlock_once();
        /* An asker that found the lock held left its work to us. The fence pairs with
         * core_defer's: of its push and our release, whichever came second sees the other. */
        for (;;) {
                atomic_thread_fence(memory_order_seq_cst);
                if (!atomic_load_explicit(&deferred, memory_order_relaxed) ||
                    pthread_mutex_trylock(&lock) != 0)
                        return; /* none, or the new holder looks when it lets go */
                held_here = true;
                core_run_deferred_locked();
                unlock_once();
        }
}

void core_run_deferred_locked(void)
{
        assert_locked();
        struct core_deferred *l = atomic_exchange(&deferred, NULL), *fifo = NULL;

        while (l) { /* newest first: turned round, so that work runs in the order asked */
                struct core_deferred *next = l->next;

                l->next = fifo;
                fifo = l;
                l = next;
        }
        while (fifo) {
                struct core_deferred *next = fifo->next;

                fifo->run(fifo); /* d is run's from here */
                fifo = next;
        }
}

void core_defer(struct core_deferred *d)
{
        struct core_deferred *head = atomic_load_explicit(&deferred, memory_order_relaxed);

        assert(d && d->run);
        do
                d->next = head;
        while (!atomic_compare_exchange_weak(&deferred, &head, d));
        if (held_here)
                return; /* runs when this thread lets go */
        atomic_thread_fence(memory_order_seq_cst);
        if (pthread_mutex_trylock(&lock) != 0)
                return; /* the holder runs it (core_unlock) */
        held_here = true;
        core_unlock();
}

/* Asks for e once in this hold (see lock.h); the lock is held. */
static void after_unlock_add(struct after_unlock e)
{
        for (unsigned i = 0; i < n_after_unlock; i++)
                if (after_unlock[i].fn == e.fn && after_unlock[i].fn_arg == e.fn_arg &&
                    after_unlock[i].arg == e.arg)
                        return;
        assert(n_after_unlock < AFTER_UNLOCK_MAX);
        after_unlock[n_after_unlock++] = e;
}

void core_after_unlock(void (*fn)(void))
{
        assert(fn);
        if (!held_here) {
                fn();
                return;
        }
        after_unlock_add((struct after_unlock){.fn = fn});
}

void core_after_unlock_arg(void (*fn)(void *arg), void *arg)
{
        assert(fn);
        if (!held_here) {
                fn(arg);
                return;
        }
        after_unlock_add((struct after_unlock){.fn_arg = fn, .arg = arg});
}

bool core_lock_held(void)
{
        return held_here;
}
