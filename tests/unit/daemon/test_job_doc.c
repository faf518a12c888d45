/* The job document's conversions (daemon/jobs/job_doc.c), without a store: a job's row (the
 * public document's bytes, its summary without results, the columns), a new job's row under the
 * id it is given, a part's own document with a worker's bytes spliced in, the internal form made
 * again from what the store reads back, and a list's label filter. */
#include "../common/testutil.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "job_doc.h"
#include "jsonraw.h"
#include "jsonutil.h"
#include "store.h"
#include "uuid.h"

#define RESULT_BYTES "{\"gbps\":12.5}"

/* A running job in the internal form, its one part's result kept as the worker's bytes. */
static json_t *job_new(char id[UUID_STRING_MAX])
{
        assert_int_equal(uuid7_generate_at(1000, id), 0);
        json_t *part = json_pack("{s:s, s:s, s:o}", "uuid", "GPU-a", "state", "succeeded", "result",
                                 json_raw_new(RESULT_BYTES, strlen(RESULT_BYTES)));
        return json_pack("{s:s, s:s, s:s, s:s, s:I, s:[o], s:{s:s}}", "id", id, "state", "running",
                         "benchmark", "copy", "request", "{\"x\":1}", "created_ms",
                         (json_int_t)1000, "parts", part, "labels", "team", "a");
}

static void test_a_row_is_the_public_dump_with_the_results_bytes(void **state)
{
        char id[UUID_STRING_MAX];
        json_t *j = job_new(id);
        struct store_row row = {0};

        (void)state;
        assert_int_equal(job_doc_row(j, &row), 0);
        json_t *pub = job_doc_public_copy(j, true);
        assert_int_equal(job_doc_public_expand(pub), 0);
        char *want = json_dump_compact(pub, NULL);
        assert_string_equal(row.doc, want);
        assert_int_equal(row.doc_len, strlen(want));
        assert_non_null(strstr(row.doc, RESULT_BYTES));
        assert_null(strstr(row.summary, "result"));
        assert_null(strstr(row.doc, "request")); /* internal only: a column */
        assert_string_equal(row.request, "{\"x\":1}");
        assert_string_equal(row.id, id);
        assert_string_equal(row.state, "running");
        assert_int_equal(row.created_ms, 1000);
        assert_false(row.finished);
        assert_int_equal(row.n_parts, 1);
        assert_string_equal(row.parts[0].uuid, "GPU-a");
        free(want);
        json_decref(pub);
        store_row_free(&row);
        json_decref(j);
}

static void test_a_new_row_takes_the_id_it_is_given(void **state)
{
        char stand_in[UUID_STRING_MAX], id[UUID_STRING_MAX];
        json_t *j = job_new(stand_in);
        struct job_doc_new *p = NULL;
        struct store_row row = {0};

        (void)state;
        assert_int_equal(uuid7_generate_at(2000, id), 0);
        assert_int_equal(job_doc_new_prepare(j, &p), 0);
        assert_int_equal(job_doc_new_row(p, id, &row), 0);
        assert_string_equal(row.id, id);
        assert_true(row.fresh);
        assert_non_null(strstr(row.doc, id));
        assert_non_null(strstr(row.summary, id));
        assert_null(strstr(row.doc, stand_in));
        store_row_free(&row);
        p = NULL;
        assert_int_equal(job_doc_new_prepare(j, &p), 0);
        assert_int_equal(job_doc_new_row(p, "not-a-uuid", &row), -EINVAL); /* p freed */
        json_decref(j);
}

static void test_a_parts_document_carries_the_workers_bytes(void **state)
{
        char id[UUID_STRING_MAX];
        json_t *j = job_new(id);
        size_t len = 0;
        char *text = job_doc_part_text(json_array_get(json_object_get(j, "parts"), 0), &len);

        (void)state;
        assert_non_null(text);
        assert_int_equal(len, strlen(text));
        json_t *back = json_loads(text, 0, NULL);
        assert_non_null(back);
        assert_string_equal(json_string_value(json_object_get(back, "uuid")), "GPU-a");
        assert_true(json_real_value(json_object_get(json_object_get(back, "result"), "gbps")) ==
                    12.5);
        json_decref(back);
        free(text);
        json_decref(j);
}

static void test_the_internal_form_comes_back_from_the_stored_bytes(void **state)
{
        struct store_text t = {.doc = "{\"id\":\"x\",\"parts\":[]}",
                               .request = "{}",
                               .created_ms = 5,
                               .finished = true,
                               .finished_ms = 7};
        json_t *j;

        (void)state;
        t.doc_len = strlen(t.doc);
        j = job_doc_internal(&t);
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "request")), "{}");
        assert_int_equal(json_integer_value(json_object_get(j, "created_ms")), 5);
        assert_int_equal(json_integer_value(json_object_get(j, "finished_ms")), 7);
        json_decref(j);
        t.doc = "{not json";
        t.doc_len = strlen(t.doc);
        assert_null(job_doc_internal(&t));
}

static void test_a_label_filter_matches_key_and_value(void **state)
{
        const char *doc = "{\"labels\":{\"team\":\"a\",\"teams\":\"b\"}}";
        struct job_doc_label l = {"team", 4, "a"};

        (void)state;
        assert_true(job_doc_label_matches(doc, strlen(doc), &l));
        l.value = "b";
        assert_false(job_doc_label_matches(doc, strlen(doc), &l));
        l = (struct job_doc_label){"teams", 5, "b"};
        assert_true(job_doc_label_matches(doc, strlen(doc), &l));
        l = (struct job_doc_label){"teamsx", 4, "a"}; /* a prefix as long as key_len says */
        assert_true(job_doc_label_matches(doc, strlen(doc), &l));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_a_row_is_the_public_dump_with_the_results_bytes),
            cmocka_unit_test(test_a_new_row_takes_the_id_it_is_given),
            cmocka_unit_test(test_a_parts_document_carries_the_workers_bytes),
            cmocka_unit_test(test_the_internal_form_comes_back_from_the_stored_bytes),
            cmocka_unit_test(test_a_label_filter_matches_key_and_value),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
