/* The daemon's one lock (see lock.h), and which thread holds it. */
#include "lock.h"

#include <pthread.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* Per thread, so that asking needs no lock of its own: only the holder ever sets its flag, and
 * a thread that does not hold the lock reads its own false. */
static _Thread_local bool held_here;
/* What the holder asked to run once it lets go (core_after_unlock), in the order asked. Two
 * users today: the look's wake-up and the store's dump of the changes queued. */
#define AFTER_UNLOCK_MAX 4
static _Thread_local void (*after_unlock[AFTER_UNLOCK_MAX])(void);
static _Thread_local unsigned n_after_unlock;

void core_lock(void)
{
        pthread_mutex_lock(&lock);
        held_here = true;
}

void core_unlock(void)
{
        void (*fns[AFTER_UNLOCK_MAX])(void);
        unsigned n = n_after_unlock;

        assert_locked();
        for (unsigned i = 0; i < n; i++)
                fns[i] = after_unlock[i];
        n_after_unlock = 0;
        held_here = false;
        pthread_mutex_unlock(&lock);
        for (unsigned i = 0; i < n; i++)
                fns[i]();
}

void core_after_unlock(void (*fn)(void))
{
        assert(fn);
        if (!held_here) {
                fn();
                return;
        }
        for (unsigned i = 0; i < n_after_unlock; i++)
                if (after_unlock[i] == fn)
                        return;
        assert(n_after_unlock < AFTER_UNLOCK_MAX);
        after_unlock[n_after_unlock++] = fn;
}

bool core_lock_held(void)
{
        return held_here;
}
