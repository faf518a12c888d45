/* The store's unit tests' fixture (store_fixture.h). */
#include "store_fixture.h"

#include "job_doc.h"

#include "../common/testutil.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <string.h>
#include <cmocka.h>

#include "log.h"

/* As main.c's, but with the file's shape checked alone (no spec_validate_stored). */
static int import_files(const char *dir, int (*put)(struct store_row *row, void *ctx), void *ctx,
                        unsigned *ret_corrupt)
{
        return job_files_import(dir, NULL, put, ctx, ret_corrupt);
}

int setup(void **state)
{
        struct fx *f = calloc(1, sizeof(*f));

        if (!f)
                return -1;
        log_set_level(LOG_ERR);
        store_set_files(&(struct store_files){.import = import_files, .export = job_files_export});
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

        assert_int_equal(fx_put(s, j, &t), 0);
        assert_int_equal(store_ticket_wait(t, NULL, NULL), 0);
}

static int put_doc(struct store *s, const json_t *j, bool final, struct store_ticket **ret)
{
        const char *id = json_string_value(json_object_get(j, "id"));
        void *src;
        int r = job_doc_source(j, final, &src);

        return r < 0 ? r : store_put(s, id, &job_doc_maker, src, ret);
}

int fx_put(struct store *s, const json_t *j, struct store_ticket **ret)
{
        return put_doc(s, j, false, ret);
}

int fx_put_final(struct store *s, const json_t *j, struct store_ticket **ret)
{
        return put_doc(s, j, true, ret);
}

int fx_put_part(struct store *s, const char *id, size_t idx, const char *state)
{
        return store_put_part(s, id, idx, state, NULL, 0, NULL);
}

int fx_put_part_doc(struct store *s, const char *id, size_t idx, const char *state,
                    const json_t *part)
{
        char *text = NULL;
        size_t len = 0;

        if (part && !(text = job_doc_part_text(part, &len)))
                return -ENOMEM;
        return store_put_part(s, id, idx, state, text, len, NULL);
}

int fx_put_new(struct store *s, const json_t *j, const char *id, struct store_ticket **ret)
{
        struct job_doc_new *p = NULL;
        struct store_row row;
        int r = job_doc_new_prepare(j, &p);

        if (r == 0)
                r = job_doc_new_row(p, id, &row);
        return r < 0 ? r : store_put_row(s, &row, ret);
}

int fx_list(struct store *s, const struct store_query *q, json_t **ret_jobs, bool *ret_more)
{
        char last[UUID_STRING_MAX];
        char *text = NULL;
        size_t len = 0, n = 0;
        json_error_t err;
        json_t *arr;
        int r = store_list_raw(s, q, &text, &len, &n, last, ret_more);

        if (r < 0)
                return r;
        arr = json_loadb(text, len, 0, &err);
        free(text);
        if (!json_is_array(arr)) {
                json_decref(arr);
                return -EBADMSG;
        }
        *ret_jobs = arr;
        return 0;
}
