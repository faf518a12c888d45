/* What the store's unit tests share (test_store*.c): a store opened in a scratch directory for
 * each case, and jobs made in umd's internal form. */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "uuid.h"

#define DEV_A "GPU-aaaa"
#define DEV_B "GPU-bbbb"

struct fx {
        char *path;
        struct store *s;
};

/* cmocka's setup and teardown: a scratch directory and the store open in it (a struct fx). */
int setup(void **state);
int teardown(void **state);
/* A job in umd's internal form, created at ms, with one part per uuid; id is set to its id. */
json_t *job_at(char id[UUID_STRING_MAX], uint64_t ms, const char *state, const char *bench,
               const char *const *uuids, size_t n);
/* store_put and store_wait, each asserted to succeed. */
void put_sync(struct store *s, json_t *j);
