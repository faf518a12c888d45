/* The daemon's one lock (see lock.h), and which thread holds it. */
#include "lock.h"

#include <pthread.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* Per thread, so that asking needs no lock of its own: only the holder ever sets its flag, and
 * a thread that does not hold the lock reads its own false. */
static _Thread_local bool held_here;
/* What the holder asked to run once it lets go (core_after_unlock). */
static _Thread_local void (*after_unlock)(void);

void core_lock(void)
{
        pthread_mutex_lock(&lock);
        held_here = true;
}

void core_unlock(void)
{
        void (*fn)(void) = after_unlock;

        assert_locked();
        after_unlock = NULL;
        held_here = false;
        pthread_mutex_unlock(&lock);
        if (fn)
                fn();
}

void core_after_unlock(void (*fn)(void))
{
        assert(fn);
        if (!held_here) {
                fn();
                return;
        }
        assert(!after_unlock || after_unlock == fn);
        after_unlock = fn;
}

bool core_lock_held(void)
{
        return held_here;
}
