/* The daemon's one lock (see lock.h), and which thread holds it. */
#include "lock.h"

#include <pthread.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* Per thread, so that asking needs no lock of its own: only the holder ever sets its flag, and
 * a thread that does not hold the lock reads its own false. */
static _Thread_local bool held_here;

void core_lock(void)
{
        pthread_mutex_lock(&lock);
        held_here = true;
}

void core_unlock(void)
{
        assert_locked();
        held_here = false;
        pthread_mutex_unlock(&lock);
}

bool core_lock_held(void)
{
        return held_here;
}
