/* Per-thread reusable buffers (see tbuf.h). Each thread's are freed by a pthread key's
 * destructor when it exits, so that a thread's end leaves nothing behind. */
#include "tbuf.h"

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

struct tbufs {
        void *p[TBUF_COUNT];
        size_t cap[TBUF_COUNT];
};

static _Thread_local struct tbufs tbufs;
static _Thread_local bool registered;
static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static bool key_made;

static void tbufs_free(void *userdata)
{
        struct tbufs *b = userdata;

        for (size_t i = 0; i < TBUF_COUNT; i++) {
                free(b->p[i]);
                b->p[i] = NULL;
                b->cap[i] = 0;
        }
}

static void key_make(void)
{
        key_made = pthread_key_create(&key, tbufs_free) == 0;
}

void *tbuf_get(enum tbuf_slot slot, size_t n, size_t *ret_cap)
{
        struct tbufs *b = &tbufs;
        size_t cap;
        void *p;

        assert(slot < TBUF_COUNT);
        if (!registered) {
                /* Without a key (out of keys) the buffers of an ending thread leak: rare, and
                 * bounded by tbuf_trim's max. */
                pthread_once(&key_once, key_make);
                if (key_made)
                        (void)pthread_setspecific(key, b);
                registered = true;
        }
        if (n <= b->cap[slot] && b->p[slot]) {
                if (ret_cap)
                        *ret_cap = b->cap[slot];
                return b->p[slot];
        }
        cap = b->cap[slot] ? b->cap[slot] : 4096;
        while (cap < n)
                cap = cap > SIZE_MAX / 2 ? n : cap * 2;
        p = realloc(b->p[slot], cap);
        if (!p)
                return NULL;
        b->p[slot] = p;
        b->cap[slot] = cap;
        if (ret_cap)
                *ret_cap = cap;
        return p;
}

void tbuf_trim(enum tbuf_slot slot, size_t max)
{
        struct tbufs *b = &tbufs;

        assert(slot < TBUF_COUNT);
        if (b->cap[slot] <= max)
                return;
        free(b->p[slot]);
        b->p[slot] = NULL;
        b->cap[slot] = 0;
}
