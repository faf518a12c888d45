/* The store's reads (store_read.c, store_list.c, store_retention.c): a job's internal document by
 * id, alone or several in one read, lists with their filters and paging, health history, and
 * retention by count. */
#include "../common/testutil.h"

#include <ctype.h>
#include <pthread.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <cmocka.h>
#include <sqlite3.h>
#include <unistd.h>

#include "fileio.h"
#include "jsonraw.h"
#include "jsonutil.h"
#include "log.h"
#include "job_doc.h"
#include "store.h"
#include "store_internal.h"
#include "store_fixture.h"
#include "uuid.h"

/* What a job held only in the store reads back: its internal document, request and created_ms
 * included, equal to what was put. */
static void test_get_internal_reads_back_what_was_put(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A, DEV_B};
        char a[UUID_STRING_MAX], upper[UUID_STRING_MAX];
        json_t *ja = job_at(a, 3000, "queued", "copy", u, 2), *got = NULL;

        json_object_set_new(ja, "request", json_string("{\"benchmark\":\"copy\"}"));
        put_sync(f->s, ja);
        for (size_t i = 0; i < sizeof(upper); i++)
                upper[i] = (char)((a[i] >= 'a' && a[i] <= 'f') ? a[i] - 32 : a[i]);
        assert_int_equal(job_doc_get_internal(f->s, upper, &got), 0);
        assert_true(json_equal(got, ja));
        json_decref(got);
        got = NULL;
        assert_int_equal(job_doc_get_internal(f->s, "00000000-0000-4000-8000-000000000000", &got),
                         -ENOENT);
        assert_null(got);
        json_decref(ja);
}

/* Several internal documents in one read: each as store_get_internal reads it, and NULL for an
 * id that is not stored, without failing the others. */
static void test_get_internal_many_reads_each_and_nothing_for_the_missing(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A};
        char a[UUID_STRING_MAX], b[UUID_STRING_MAX];
        json_t *ja = job_at(a, 3000, "queued", "copy", u, 1),
               *jb = job_at(b, 3001, "queued", "copy", u, 1), *got[3];
        const char *ids[3] = {a, "00000000-0000-4000-8000-000000000000", b};

        json_object_set_new(jb, "request", json_string("{\"benchmark\":\"copy\"}"));
        put_sync(f->s, ja);
        put_sync(f->s, jb);
        assert_int_equal(job_doc_get_internal_many(f->s, ids, 3, got), 0);
        assert_true(json_equal(got[0], ja));
        assert_null(got[1]);
        assert_true(json_equal(got[2], jb));
        json_decref(got[0]);
        json_decref(got[2]);
        json_decref(ja);
        json_decref(jb);
}

static void test_list_filters_and_paging(void **state)
{
        struct job_doc_label team_a = {"team", 4, "a"};
        struct fx *f = *state;
        const char *ua[] = {DEV_A}, *ub[] = {DEV_B}, *uab[] = {DEV_A, DEV_B};
        char ids[6][UUID_STRING_MAX];
        json_t *arr;
        bool more;

        json_decref((put_sync(f->s, arr = job_at(ids[0], 10000, "succeeded", "copy", ua, 1)), arr));
        json_decref((put_sync(f->s, arr = job_at(ids[1], 20000, "failed", "copy", ub, 1)), arr));
        json_decref(
            (put_sync(f->s, arr = job_at(ids[2], 30000, "succeeded", "health", uab, 2)), arr));
        json_decref((put_sync(f->s, arr = job_at(ids[3], 40000, "queued", "copy", ua, 1)), arr));
        json_decref(
            (put_sync(f->s, arr = job_at(ids[4], 50000, "succeeded", "health", ua, 1)), arr));
        json_decref((put_sync(f->s, arr = job_at(ids[5], 60000, "succeeded", "copy", ub, 1)), arr));

        struct store_query q = {.limit = 100};
        assert_int_equal(fx_list(f->s, &q, &arr, &more), 0);
        assert_int_equal(json_array_size(arr), 6);
        assert_false(more);
        assert_string_equal(json_string_value(json_object_get(json_array_get(arr, 0), "id")),
                            ids[5]); /* newest first */
        assert_null(
            json_object_get(json_array_get(json_object_get(json_array_get(arr, 0), "parts"), 0),
                            "result")); /* summaries */
        json_decref(arr);

        q = (struct store_query){.limit = 100, .uuid = DEV_A, .benchmark = "health"};
        assert_int_equal(fx_list(f->s, &q, &arr, &more), 0);
        assert_int_equal(json_array_size(arr), 2);
        assert_string_equal(json_string_value(json_object_get(json_array_get(arr, 1), "id")),
                            ids[2]);
        json_decref(arr);

        q = (struct store_query){
            .limit = 100, .state = "succeeded", .since_ms = 20000, .until_ms = 60000};
        assert_int_equal(fx_list(f->s, &q, &arr, &more), 0);
        assert_int_equal(json_array_size(arr), 2); /* ids[4], ids[2] */
        json_decref(arr);

        q = (struct store_query){.limit = 2, .uuid = DEV_B};
        assert_int_equal(fx_list(f->s, &q, &arr, &more), 0);
        assert_int_equal(json_array_size(arr), 2);
        assert_true(more);
        json_decref(arr);
        q.before = ids[2];
        assert_int_equal(fx_list(f->s, &q, &arr, &more), 0);
        assert_int_equal(json_array_size(arr), 1);
        assert_false(more);
        assert_string_equal(json_string_value(json_object_get(json_array_get(arr, 0), "id")),
                            ids[1]);
        json_decref(arr);

        q = (struct store_query){
            .limit = 100, .match = job_doc_label_matches, .match_arg = &team_a};
        assert_int_equal(fx_list(f->s, &q, &arr, &more), 0);
        assert_int_equal(json_array_size(arr), 6);
        json_decref(arr);
        team_a.value = "b";
        assert_int_equal(fx_list(f->s, &q, &arr, &more), 0);
        assert_int_equal(json_array_size(arr), 0);
        json_decref(arr);
}

static void test_health_parts_newest_first(void **state)
{
        struct fx *f = *state;
        const char *ua[] = {DEV_A};
        char a[UUID_STRING_MAX], b[UUID_STRING_MAX], c[UUID_STRING_MAX];
        json_t *ja = job_at(a, 1000, "succeeded", "health", ua, 1);
        json_t *jb = job_at(b, 2000, "succeeded", "health", ua, 1);
        json_t *jc = job_at(c, 3000, "succeeded", "health", ua, 1);
        json_t *parts = NULL;

        json_object_set_new(json_array_get(json_object_get(ja, "parts"), 0), "verdict",
                            json_pack("{s:s}", "verdict", "pass"));
        json_object_set_new(json_array_get(json_object_get(jb, "parts"), 0), "verdict",
                            json_pack("{s:s}", "verdict", "fail"));
        json_object_set_new(json_array_get(json_object_get(jc, "parts"), 0), "verdict",
                            json_pack("{s:s}", "verdict", "pass"));
        put_sync(f->s, ja);
        put_sync(f->s, jb);
        put_sync(f->s, jc);
        assert_int_equal(job_doc_health_parts(f->s, DEV_A, NULL, false, 1, &parts), 0);
        assert_int_equal(json_array_size(parts), 1);
        json_decref(parts);
        assert_int_equal(job_doc_health_parts(f->s, DEV_A, c, true, 10, &parts), 0);
        assert_int_equal(json_array_size(parts), 1); /* only a: b failed, c excluded */
        json_decref(parts);
        assert_int_equal(job_doc_health_parts(f->s, DEV_B, NULL, false, 10, &parts), 0);
        assert_int_equal(json_array_size(parts), 0);
        json_decref(parts);
        json_decref(ja);
        json_decref(jb);
        json_decref(jc);
}

static void test_retention_by_count(void **state)
{
        struct fx *f = *state;
        const char *ua[] = {DEV_A};
        char id[UUID_STRING_MAX], keep[UUID_STRING_MAX];
        json_t *j;

        for (int i = 0; i < 10; i++) {
                j = job_at(id, 1000 + (uint64_t)i, "succeeded", "copy", ua, 1);
                fx_put(f->s, j, NULL);
                json_decref(j);
        }
        j = job_at(keep, 500, "queued", "copy", ua, 1); /* unfinished: never deleted */
        put_sync(f->s, j);
        json_decref(j);
        store_retention(f->s, 3, 0, 0);
        for (int i = 0; i < 200 && store_count(f->s) != 4; i++)
                usleep(10000);
        assert_int_equal(store_count(f->s), 4);
        assert_int_equal(job_doc_get(f->s, id, &j), 0); /* the newest stays */
        json_decref(j);
        assert_int_equal(job_doc_get(f->s, keep, &j), 0);
        json_decref(j);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(
                test_get_internal_many_reads_each_and_nothing_for_the_missing, setup, teardown),
            cmocka_unit_test_setup_teardown(test_get_internal_reads_back_what_was_put, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_list_filters_and_paging, setup, teardown),
            cmocka_unit_test_setup_teardown(test_health_parts_newest_first, setup, teardown),
            cmocka_unit_test_setup_teardown(test_retention_by_count, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
