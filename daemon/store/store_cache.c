/* The finished jobs' cache (store.h's store_set_cache, store_get_finished): their documents as
 * served, as blob references by id, direct-mapped and bounded in bytes. Their bytes never change,
 * so a GET copies nothing under a lock; any write of a job drops its entry (store_cache_evict). */
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

static void cache_key(const char *id, char key[UUID_STRING_MAX])
{
        size_t i;

        for (i = 0; id[i] && i + 1 < UUID_STRING_MAX; i++)
                key[i] = (char)((id[i] >= 'A' && id[i] <= 'Z') ? id[i] + 32 : id[i]);
        key[i] = '\0';
}

static struct cache_slot *cache_slot_of(struct store *s, const char *key)
{
        return &s->cache[fnv1a_str(FNV1A_INIT, key) % CACHE_SLOTS];
}

/* With cache_mu held. */
static void cache_drop_slot(struct store *s, struct cache_slot *c)
{
        s->cache_bytes -= c->blob->len;
        blob_unref(c->blob);
        *c = (struct cache_slot){0};
}

void store_cache_evict(struct store *s, const char *id)
{
        char key[UUID_STRING_MAX];
        struct cache_slot *c;

        if (!s->cache)
                return;
        cache_key(id, key);
        pthread_mutex_lock(&s->cache_mu);
        c = cache_slot_of(s, key);
        if (strcmp(c->id, key) == 0)
                cache_drop_slot(s, c);
        pthread_mutex_unlock(&s->cache_mu);
}

void store_cache_free(struct store *s)
{
        for (size_t i = 0; s->cache && i < CACHE_SLOTS; i++)
                blob_unref(s->cache[i].blob);
        free(s->cache);
        s->cache = NULL;
        s->cache_bytes = 0;
}

int store_set_cache(struct store *s, uint64_t max_bytes)
{
        if (max_bytes == 0 || s->cache)
                return 0;
        s->cache = calloc(CACHE_SLOTS, sizeof(*s->cache));
        if (!s->cache)
                return -ENOMEM;
        s->cache_max = max_bytes;
        return 0;
}

int store_get_finished(struct store *s, const char *id, struct blob **ret)
{
        char key[UUID_STRING_MAX];
        struct cache_slot *c = NULL;
        struct blob *b = NULL;
        struct reader *rd;
        sqlite3_stmt *st;
        int rc, r;

        cache_key(id, key);
        if (s->cache) {
                /* A reference, not a copy: the lock covers a compare and an increment. */
                pthread_mutex_lock(&s->cache_mu);
                c = cache_slot_of(s, key);
                if (strcmp(c->id, key) == 0)
                        b = blob_ref(c->blob);
                pthread_mutex_unlock(&s->cache_mu);
                if (b) {
                        *ret = b;
                        return 0;
                }
        }
        r = store_read_take(s, &rd);
        if (r < 0)
                return r;
        st = rd->st[R_GET];
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        r = 0;
        if (rc == SQLITE_ROW) {
                const char *t = (const char *)sqlite3_column_text(st, 0);

                r = t ? blob_new(t, (size_t)sqlite3_column_bytes(st, 0), &b) : -ENOMEM;
        }
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        store_read_give(s, rd);
        if (rc == SQLITE_DONE)
                return -ENOENT;
        if (rc != SQLITE_ROW)
                return log_error_errno(EIO, "SQLite: cannot read job %s: %s", id,
                                       sqlite3_errstr(rc));
        if (r < 0)
                return r;
        /* A document over a sixteenth of the cache would push out too much for one job. */
        if (s->cache && b->len <= s->cache_max / 16) {
                pthread_mutex_lock(&s->cache_mu);
                if (c->id[0])
                        cache_drop_slot(s, c);
                if (s->cache_bytes + b->len <= s->cache_max) {
                        c->blob = blob_ref(b);
                        s->cache_bytes += b->len;
                        memcpy(c->id, key, sizeof(key));
                }
                pthread_mutex_unlock(&s->cache_mu);
        }
        *ret = b;
        return 0;
}
