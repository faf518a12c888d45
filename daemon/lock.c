/* The daemon's one lock (see lock.h). */
#include "lock.h"

#include <pthread.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void core_lock(void)
{
        pthread_mutex_lock(&lock);
}

void core_unlock(void)
{
        pthread_mutex_unlock(&lock);
}
