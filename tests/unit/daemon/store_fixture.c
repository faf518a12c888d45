/* The store's unit tests' fixture (store_fixture.h). */
#include "store_fixture.h"

#include "../common/testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "log.h"

int setup(void **state)
{
        struct fx *f = calloc(1, sizeof(*f));

        if (!f)
                return -1;
        log_set_level(LOG_ERR);
        f->path = scratch_dir_new();
        if (!f->path || store_open(f->path, &f->s) < 0)
                return -1;
        *state = f;
        return 0;
}

int teardown(void **state)
{
        struct fx *f = *state;

        store_close(f->s);
        scratch_dir_free(f->path);
        free(f);
        return 0;
}

/* A job in umd's internal form, created at ms, with one part per uuid. */
json_t *job_at(char id[UUID_STRING_MAX], uint64_t ms, const char *state, const char *bench,
               const char *const *uuids, size_t n)
{
        json_t *parts = json_array();

        assert_int_equal(uuid7_generate_at(ms, id), 0);
        for (size_t i = 0; i < n; i++)
                json_array_append_new(parts, json_pack("{s:s, s:s, s:{s:i}}", "uuid", uuids[i],
                                                       "state", state, "result", "gbps", 1));
        json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:I, s:o, s:{s:s}}", "id", id, "state", state,
                              "benchmark", bench, "request", "{}", "created_ms", (json_int_t)ms,
                              "parts", parts, "labels", "team", "a");
        if (strcmp(state, "queued") != 0 && strcmp(state, "running") != 0)
                json_object_set_new(j, "finished_ms", json_integer((json_int_t)ms + 1));
        return j;
}

void put_sync(struct store *s, json_t *j)
{
        struct store_ticket *t = NULL;

        assert_int_equal(store_put(s, j, &t), 0);
        assert_int_equal(store_wait(t), 0);
}
