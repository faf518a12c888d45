/* What the store's unit tests share (test_store*.c): a store opened in a scratch directory for
 * each case, and jobs made in umd's internal form. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
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
/* The job subsystem's writes, made as job_persist.c makes them (the store takes rows, which
 * daemon/jobs/job_doc.c makes from a job's JSON): j's whole row from a snapshot (fx_put) or from
 * j itself (fx_put_final, a reference kept until the row is made); part idx's state alone, or
 * with the part's own document; a new job's row under id (a stand-in replaced). Each returns what
 * the store (or job_doc, for a job without a valid id or parts) returns. */
int fx_put(struct store *s, const json_t *j, struct store_ticket **ret);
int fx_put_final(struct store *s, const json_t *j, struct store_ticket **ret);
int fx_put_part(struct store *s, const char *id, size_t idx, const char *state);
int fx_put_part_doc(struct store *s, const char *id, size_t idx, const char *state,
                    const json_t *part);
int fx_put_new(struct store *s, const json_t *j, const char *id, struct store_ticket **ret);
/* store_list_raw's page parsed: an array of the documents. 0 or -errno. */
int fx_list(struct store *s, const struct store_query *q, json_t **ret_jobs, bool *ret_more);
/* store_put and store_ticket_wait, each asserted to succeed. */
void put_sync(struct store *s, json_t *j);
