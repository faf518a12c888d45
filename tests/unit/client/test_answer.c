/* client/answer.c: which answers umdctl takes for umd's documents, and the cleaning of the
 * strings it prints. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "answer.h"

static json_t *parse(const char *s)
{
        json_t *j = json_loads(s, 0, NULL);
        assert_non_null(j);
        return j;
}

static bool job_ok(const char *s, const char *id)
{
        json_t *j = parse(s);
        bool ok = answer_is_job(j, id);
        json_decref(j);
        return ok;
}

#define PART0 "{\"device\": 0, \"uuid\": \"GPU-0\", \"state\": \"succeeded\"}"
#define NODE  "{\"device\": \"all\", \"uuid\": \"node\", \"state\": \"cancelled\"}"

static void test_a_job_needs_id_state_and_parts_of_umds_shape(void **state)
{
        assert_true(job_ok("{\"id\": \"a\", \"state\": \"running\", \"parts\": [" PART0 ", " NODE
                           "], \"extra\": 1}",
                           "a"));
        assert_false(job_ok("{\"id\": \"a\", \"state\": \"running\", \"parts\": []}", "b"));
        assert_false(job_ok("{\"state\": \"running\", \"parts\": []}", NULL));
        assert_false(job_ok("{\"id\": \"a\", \"state\": 3, \"parts\": []}", NULL));
        assert_false(job_ok("{\"id\": \"a\", \"state\": \"queued\"}", NULL));
        assert_false(job_ok("{\"id\": \"a\", \"state\": \"queued\", \"parts\": [1]}", NULL));
        assert_false(job_ok("{\"id\": \"a\", \"state\": \"queued\", \"parts\": [{\"device\": "
                            "\"some\", \"uuid\": \"x\", \"state\": \"queued\"}]}",
                            NULL));
        assert_false(job_ok("{\"id\": \"a\", \"state\": \"queued\", \"parts\": [{\"device\": 0, "
                            "\"uuid\": \"x FAIL: y\", \"state\": \"queued\"}]}",
                            NULL));
        assert_false(job_ok("[]", NULL));
        assert_false(answer_is_job(NULL, NULL));
}

static void test_a_page_holds_jobs_and_a_next_that_is_a_string_or_null(void **state)
{
        const char *good[] = {"{\"jobs\": [], \"next\": null}",
                              "{\"jobs\": [{\"id\": \"a\", \"state\": \"queued\", \"parts\": "
                              "[" PART0 "]}], \"next\": \"/v1/jobs?before=a\"}"};
        const char *bad[] = {"{\"jobs\": {}}", "{\"jobs\": [1]}", "{\"jobs\": [], \"next\": 5}",
                             "[]"};
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                json_t *j = parse(good[i]);
                assert_true(answer_is_job_page(j));
                json_decref(j);
        }
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                json_t *j = parse(bad[i]);
                assert_false(answer_is_job_page(j));
                json_decref(j);
        }
}

#define DEV(extra)                                                                                 \
        "{\"uuid\": \"GPU-1\", \"index\": 1, \"state\": \"idle\", \"paused\": false" extra "}"

static void test_a_device_list_is_an_array_of_devices(void **state)
{
        const char *good[] = {"[]", "[" DEV("") "]", "[" DEV(", \"last_health\": null") "]",
                              "[" DEV(", \"last_health\": {\"verdict\": \"warn\", \"reasons\": "
                                      "[\"slow\"]}") "]"};
        const char *bad[] = {"{}",
                             "{\"devices\": []}",
                             "[\"GPU-1\"]",
                             "[{\"uuid\": \"GPU-1\", \"index\": \"1\", \"state\": \"idle\", "
                             "\"paused\": false}]",
                             "[" DEV(", \"last_health\": {\"verdict\": \"bad\"}") "]",
                             "[" DEV(", \"last_health\": {\"verdict\": \"fail\", \"reasons\": "
                                     "[1]}") "]",
                             "[{\"uuid\": \"GPU-1\", \"index\": 1, \"state\": \"idle\"}]"};
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                json_t *j = parse(good[i]);
                assert_true(answer_is_device_list(j));
                json_decref(j);
        }
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                json_t *j = parse(bad[i]);
                assert_false(answer_is_device_list(j));
                json_decref(j);
        }
}

static void test_only_umds_three_verdict_words_are_verdicts(void **state)
{
        const char *words[] = {"pass", "warn", "fail"};
        for (size_t i = 0; i < 3; i++) {
                json_t *j = json_pack("{s:s}", "verdict", words[i]);
                assert_true(answer_is_verdict(j));
                json_decref(j);
        }
        json_t *j = json_pack("{s:s}", "verdict", "FAIL");
        assert_false(answer_is_verdict(j));
        json_decref(j);
        j = json_pack("{s:i}", "verdict", 0);
        assert_false(answer_is_verdict(j));
        json_decref(j);
        assert_false(answer_is_verdict(NULL));
}

static void test_the_text_view_is_plain_text_naming_the_job(void **state)
{
        assert_true(answer_is_job_text("text/plain; charset=utf-8", "job abc  copy  ok\n", "abc"));
        assert_true(answer_is_job_text("TEXT/PLAIN", "job abc\n", "abc"));
        assert_false(answer_is_job_text("text/html", "job abc  copy\n", "abc"));
        assert_false(answer_is_job_text("text/plainly", "job abc  copy\n", "abc"));
        assert_false(answer_is_job_text(NULL, "job abc  copy\n", "abc"));
        assert_false(answer_is_job_text("text/plain", "job abcd  copy\n", "abc"));
        assert_false(answer_is_job_text("text/plain", "<html>", "abc"));
        assert_false(answer_is_job_text("text/plain", "", "abc"));
}

static void test_a_umd_problem_has_umds_type_and_the_same_status(void **state)
{
        const char *ct = "application/problem+json";
        const char *good = "{\"type\": \"https://umd.dev/problems/unavailable\", \"title\": \"S\", "
                           "\"status\": 503, \"detail\": \"d\"}";
        const char *other = "{\"type\": \"about:blank\", \"title\": \"S\", \"status\": 503, "
                            "\"detail\": \"d\"}";
        assert_true(answer_is_umd_problem(503, ct, good, strlen(good)));
        assert_false(answer_is_umd_problem(502, ct, good, strlen(good)));
        assert_false(answer_is_umd_problem(503, "text/html", good, strlen(good)));
        assert_false(answer_is_umd_problem(503, ct, other, strlen(other)));
        assert_false(answer_is_umd_problem(503, ct, "<html>", 6));
        assert_false(answer_is_umd_problem(503, ct, "", 0));
}

static void test_clean_keeps_a_field_on_its_line_and_drops_controls(void **state)
{
        char s[] = "a\tb\r\nc\x1b[31md\x07\x7f"
                   "e\xc2\x9b"
                   "1m\xc3\xa9";
        assert_int_equal(text_clean(s, false), strlen("a b  c[31mde1m\xc3\xa9"));
        assert_string_equal(s, "a b  c[31mde1m\xc3\xa9");
        char t[] = "job x\r\n\tGPU 0\x1b[2J\n";
        text_clean(t, true);
        assert_string_equal(t, "job x\n\tGPU 0[2J\n");
        assert_int_equal(text_clean(NULL, false), 0);
}

static void test_json_clean_strings_walks_the_whole_document(void **state)
{
        json_t *j = json_pack("{s:[s, {s:s}], s:i, s:s}", "reasons", "one\ntwo", "name",
                              "x\x1b]0;t\x07", "n", 5, "ok", "plain");
        assert_int_equal(json_clean_strings(j), 0);
        assert_string_equal(json_string_value(json_array_get(json_object_get(j, "reasons"), 0)),
                            "one two");
        assert_string_equal(json_string_value(json_object_get(
                                json_array_get(json_object_get(j, "reasons"), 1), "name")),
                            "x]0;t");
        assert_string_equal(json_string_value(json_object_get(j, "ok")), "plain");
        assert_int_equal(json_integer_value(json_object_get(j, "n")), 5);
        json_decref(j);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_a_job_needs_id_state_and_parts_of_umds_shape),
            cmocka_unit_test(test_a_page_holds_jobs_and_a_next_that_is_a_string_or_null),
            cmocka_unit_test(test_a_device_list_is_an_array_of_devices),
            cmocka_unit_test(test_only_umds_three_verdict_words_are_verdicts),
            cmocka_unit_test(test_the_text_view_is_plain_text_naming_the_job),
            cmocka_unit_test(test_a_umd_problem_has_umds_type_and_the_same_status),
            cmocka_unit_test(test_clean_keeps_a_field_on_its_line_and_drops_controls),
            cmocka_unit_test(test_json_clean_strings_walks_the_whole_document),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
