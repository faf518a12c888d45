/* The request layer's checks: problem JSON, Content-Type and Content-Length, the
 * Idempotency-Key header, GET /v1/jobs query arguments, JSON bodies, and POST /v1/jobs'
 * 202/200/429 answers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "job_state.h"
#include "test_helpers.h"

static int setup(void **state)
{
        core_double_reset();
        return 0;
}

static void test_problem_set_fills_everything(void **state)
{
        struct problem p;
        int r = problem_set(&p, 400, "params.size", "must be at most %d", 7);

        assert_true(r < 0);
        assert_int_equal(p.status, 400);
        assert_string_equal(p.slug, "bad-request");
        assert_string_equal(p.title, "Bad Request");
        assert_string_equal(p.detail, "must be at most 7");
        assert_string_equal(p.field, "params.size");
        assert_int_equal(p.retry_after_s, 0);

        problem_set(&p, 404, NULL, "x");
        assert_string_equal(p.field, "");
        assert_string_equal(problem_slug(429), "queue-full");
        assert_string_equal(problem_title(413), "Content Too Large");
        assert_string_equal(problem_title(418), "Client Error");
}

static void test_problem_json_shape(void **state)
{
        struct problem p;
        json_t *j;

        problem_set(&p, 409, "Idempotency-Key", "used with another body");
        j = problem_to_json(&p);
        assert_string_equal(json_string_value(json_object_get(j, "type")),
                            "https://umd.dev/problems/conflict");
        assert_string_equal(json_string_value(json_object_get(j, "title")), "Conflict");
        assert_int_equal(json_integer_value(json_object_get(j, "status")), 409);
        assert_string_equal(json_string_value(json_object_get(j, "detail")),
                            "used with another body");
        assert_string_equal(json_string_value(json_object_get(j, "field")), "Idempotency-Key");
        assert_int_equal(json_object_size(j), 5);
        json_decref(j);

        /* No field: the member is left out, not empty. */
        problem_set(&p, 404, NULL, "gone");
        j = problem_to_json(&p);
        assert_null(json_object_get(j, "field"));
        assert_int_equal(json_object_size(j), 4);
        json_decref(j);
}

static void test_reply_problem_retry_after_and_bad_status(void **state)
{
        struct api_reply rep = {0};
        struct problem p;
        json_t *j;

        problem_set(&p, 429, NULL, "queue is full");
        p.retry_after_s = 5;
        reply_problem(&rep, &p);
        assert_int_equal(rep.status, 429);
        assert_int_equal(rep.retry_after_s, 5);
        assert_string_equal(rep.content_type, "application/problem+json");
        reply_done(&rep);

        /* A status that is not an error is the daemon's bug: 500, never a 200 problem. */
        memset(&p, 0, sizeof(p));
        reply_problem(&rep, &p);
        assert_int_equal(rep.status, 500);
        j = reply_body(&rep);
        assert_int_equal(json_integer_value(json_object_get(j, "status")), 500);
        json_decref(j);
        reply_done(&rep);
}

static void test_problem_json_with_invalid_utf8(void **state)
{
        struct problem p;
        json_t *j;

        problem_set(&p, 400, "\xff\xfekey", "unknown '%s' and caf\xc3\xa9 and \xc0\xaf end",
                    "\xed\xa0\x80");
        j = problem_to_json(&p);
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "field")), "??key");
        assert_string_equal(json_string_value(json_object_get(j, "detail")),
                            "unknown '\?\?\?' and caf\xc3\xa9 and ?? end");
        json_decref(j);
}

static void test_url_unescape_keeps_nul_escaped(void **state)
{
        char a[] = "/v1/jobs/abc%00.json", b[] = "%41%62%2f%zz%4", c[] = "x%ff%FEy";

        assert_int_equal(url_unescape(a), strlen("/v1/jobs/abc%00.json"));
        assert_string_equal(a, "/v1/jobs/abc%00.json");
        url_unescape(b);
        assert_string_equal(b, "Ab/%zz%4");
        assert_int_equal(url_unescape(c), 4);
        assert_string_equal(c, "x\xff\xfey");
}

static void test_content_type(void **state)
{
        struct problem p;

        assert_int_equal(request_check_content_type("application/json", &p), 0);
        assert_int_equal(request_check_content_type("Application/JSON; charset=utf-8", &p), 0);
        assert_int_equal(request_check_content_type("application/json ;charset=utf-8", &p), 0);
        assert_true(request_check_content_type(NULL, &p) < 0);
        assert_int_equal(p.status, 415);
        assert_true(request_check_content_type("text/plain", &p) < 0);
        assert_int_equal(p.status, 415);
        assert_true(request_check_content_type("application/jsonx", &p) < 0);
        assert_true(request_check_content_type("application/x-www-form-urlencoded", &p) < 0);
        assert_string_equal(p.field, "Content-Type");
}

static void test_content_length(void **state)
{
        struct problem p;

        assert_int_equal(request_check_content_length(NULL, 10, &p), 0);
        assert_int_equal(request_check_content_length("10", 10, &p), 0);
        assert_true(request_check_content_length("11", 10, &p) < 0);
        assert_int_equal(p.status, 413);
        assert_non_null(strstr(p.detail, "max_body_bytes"));
        assert_true(request_check_content_length("99999999999999999999999", 10, &p) < 0);
}

static void test_idempotency_key(void **state)
{
        struct problem p;
        char key[API_IDEMPOTENCY_KEY_MAX + 2];

        assert_int_equal(request_check_idempotency_key(NULL, &p), 0);
        assert_int_equal(request_check_idempotency_key("retry-7 of job #3", &p), 0);
        memset(key, 'k', API_IDEMPOTENCY_KEY_MAX);
        key[API_IDEMPOTENCY_KEY_MAX] = '\0';
        assert_int_equal(request_check_idempotency_key(key, &p), 0);
        key[API_IDEMPOTENCY_KEY_MAX] = 'k';
        key[API_IDEMPOTENCY_KEY_MAX + 1] = '\0';
        assert_true(request_check_idempotency_key(key, &p) < 0);
        assert_int_equal(p.status, 400);
        assert_string_equal(p.field, "Idempotency-Key");
        assert_true(request_check_idempotency_key("", &p) < 0);
        assert_true(request_check_idempotency_key("tab\there", &p) < 0);
        assert_true(request_check_idempotency_key("caf\xc3\xa9", &p) < 0);
        assert_true(request_check_idempotency_key("del\x7f", &p) < 0);
}

static void test_job_list_query(void **state)
{
        struct job_list_query f = {0};
        struct problem p;

        assert_int_equal(job_list_query_set(&f, "status", "queued", &p), 0);
        assert_int_equal(job_list_query_set(&f, "benchmark", "copy", &p), 0);
        assert_int_equal(job_list_query_set(&f, "device", "0", &p), 0);
        assert_int_equal(job_list_query_set(&f, "label", "team:a", &p), 0);
        assert_int_equal(job_list_query_set(&f, "before", "abc", &p), 0);
        assert_int_equal(job_list_query_set(&f, "limit", "10", &p), 0);
        assert_string_equal(f.status, "queued");
        assert_string_equal(f.benchmark, "copy");
        assert_string_equal(f.device, "0");
        assert_string_equal(f.label, "team:a");
        assert_string_equal(f.before, "abc");
        assert_string_equal(f.limit, "10");

        assert_true(job_list_query_set(&f, "status", "running", &p) < 0);
        assert_int_equal(p.status, 400);
        assert_string_equal(p.field, "status");

        memset(&f, 0, sizeof(f));
        assert_true(job_list_query_set(&f, "sort", "asc", &p) < 0);
        assert_int_equal(p.status, 400);
        assert_string_equal(p.field, "sort");
        assert_non_null(strstr(p.detail, "unknown query argument"));
        assert_int_equal(job_list_query_set(&f, "limit", NULL, &p), 0);
        assert_string_equal(f.limit, "");
}

/* The filters are typed before the daemon sees them, in the order they were always checked,
 * and the page's next link repeats the query as given (percent-encoded) with the cursor. */
static void test_list_filters_are_typed_and_the_next_link_repeats_the_query(void **state)
{
        const struct query_arg args[] = {{"label", "a b:c/d"},
                                         {"limit", "02"},
                                         {"device", "GPU-1"},
                                         {"since", "1970-01-01T00:00:01.5Z"}};
        const struct query_arg bad[] = {{"device", "7"}, {"since", "soon"}};
        struct api_reply rep;

        core_double.list_more = true;
        run(&rep, HTTP_GET, "/v1/jobs", NULL, args, 4, NULL);
        assert_int_equal(rep.status, 200);
        assert_int_equal(core_double.last_filter.limit, 2);
        assert_int_equal(core_double.last_filter.device, 1);
        assert_int_equal(core_double.last_filter.since_ms, 1500);
        assert_int_equal(core_double.last_filter.label_key_len, 3);
        assert_string_equal(core_double.last_filter.label_value, "c/d");
        assert_int_equal(core_double.last_filter.state, -1);
        assert_memory_equal(
            rep.body,
            "{\"jobs\":[],\"next\":\"/v1/jobs?device=GPU-1&label=a%20b%3Ac%2Fd&since="
            "1970-01-01T00%3A00%3A01.5Z&limit=02&before=01890000-0000-7000-8000-"
            "000000000001\"}",
            rep.body_len);
        assert_non_null(strstr(rep.link, "rel=\"next\""));
        reply_free(&rep);

        /* since is checked before device: the first bad one named is since. */
        core_double.calls = 0;
        run(&rep, HTTP_GET, "/v1/jobs", NULL, bad, 2, NULL);
        assert_int_equal(rep.status, 400);
        assert_non_null(strstr(rep.body, "\"field\":\"since\""));
        assert_int_equal(core_double.calls, 0);
        reply_free(&rep);
}

static void test_wait_durations(void **state)
{
        struct problem p;
        uint64_t ms = 1;

        assert_int_equal(request_parse_wait("30", 60, &ms, &p), 0);
        assert_int_equal(ms, 30000);
        assert_int_equal(request_parse_wait("30s", 60, &ms, &p), 0);
        assert_int_equal(ms, 30000);
        assert_int_equal(request_parse_wait("500ms", 60, &ms, &p), 0);
        assert_int_equal(ms, 500);
        assert_int_equal(request_parse_wait("2m", 600, &ms, &p), 0);
        assert_int_equal(ms, 120000);
        assert_int_equal(request_parse_wait("0", 60, &ms, &p), 0);
        assert_int_equal(ms, 0);
        /* Cut to the configured bound, not refused. */
        assert_int_equal(request_parse_wait("3600s", 60, &ms, &p), 0);
        assert_int_equal(ms, 60000);
        assert_int_equal(request_parse_wait("99999999999999999999", 60, &ms, &p) < 0, 1);
        const char *bad[] = {"", "s", "-1", "1.5s", "10h", "1 s", "ms", "1sec", "0x10"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
                memset(&p, 0, sizeof(p));
                assert_true(request_parse_wait(bad[i], 60, &ms, &p) < 0);
                assert_int_equal(p.status, 400);
                assert_string_equal(p.field, "wait");
        }
}

static void test_route_arguments(void **state)
{
        static const char *const takes[] = {"format", "wait", NULL};
        const struct route_method m = {HTTP_GET, NULL, ROLE_READ, false, takes};
        const struct route_method none = {HTTP_GET, NULL, ROLE_READ, false, NULL};
        const struct query_arg ok[] = {{"wait", "1s"}, {"format", "text"}};
        const struct query_arg unknown[] = {{"wait", "1s"}, {"colour", "blue"}};
        const struct query_arg twice[] = {{"wait", "1s"}, {"wait", "2s"}};
        struct problem p;

        assert_int_equal(request_check_args(&m, ok, 2, &p), 0);
        assert_int_equal(request_check_args(&none, ok, 0, &p), 0);
        assert_true(request_check_args(&m, unknown, 2, &p) < 0);
        assert_string_equal(p.field, "colour");
        assert_true(request_check_args(&none, ok, 1, &p) < 0);
        assert_string_equal(p.field, "wait");
        assert_true(request_check_args(&m, twice, 2, &p) < 0);
        assert_non_null(strstr(p.detail, "twice"));
}

static void test_list_passes_filter_and_refuses_unknown(void **state)
{
        const struct query_arg good[] = {{"status", "succeeded"}, {"limit", "5"}};
        const struct query_arg bad[] = {{"status", "queued"}, {"colour", "blue"}};
        struct api_reply rep;

        run(&rep, HTTP_GET, "/v1/jobs", NULL, good, 2, NULL);
        assert_int_equal(rep.status, 200);
        assert_int_equal(core_double.last_filter.state, JOB_SUCCEEDED);
        assert_int_equal(core_double.last_filter.limit, 5);
        assert_int_equal(core_double.last_filter.device, -1);
        reply_done(&rep);

        core_double.calls = 0;
        run(&rep, HTTP_GET, "/v1/jobs", NULL, bad, 2, NULL);
        assert_int_equal(rep.status, 400);
        assert_int_equal(core_double.calls, 0);
        reply_done(&rep);
}

/* Parses body; the problem, which must be a 400. */
static struct problem json_refused(const char *body)
{
        struct problem p = {0};
        json_t *j = NULL;

        assert_true(request_parse_json_object(body, strlen(body), &j, &p) < 0);
        assert_null(j);
        assert_int_equal(p.status, 400);
        return p;
}

/* Valid JSON beyond what umd holds names the field, not "invalid JSON" (issue 57). */
static void test_json_numbers_beyond_range_name_the_field(void **state)
{
        struct problem p = json_refused("{\"params\": {\"size\": 9223372036854775808}}");

        assert_string_equal(p.field, "params.size");
        assert_non_null(strstr(p.detail, "2^63-1"));
        assert_null(strstr(p.detail, "invalid JSON"));
        p = json_refused("{\"benchmark\":\"copy\", \"devices\": [0, -9223372036854775809]}");
        assert_string_equal(p.field, "devices[1]");
        p = json_refused("{\"timeout_s\": 1e999}");
        assert_string_equal(p.field, "timeout_s");
}

static void test_json_string_with_nul_escape_names_the_field(void **state)
{
        struct problem p = json_refused("{\"labels\": {\"team\": \"a\\u0000b\"}}");
        json_t *j = NULL;

        assert_string_equal(p.field, "labels.team");
        assert_non_null(strstr(p.detail, "\\u0000"));
        /* A raw NUL byte is no JSON at all. */
        assert_true(request_parse_json_object("{\"a\":\"\0\"}", 7, &j, &p) < 0);
        assert_non_null(strstr(p.detail, "invalid JSON"));
}

static void test_json_body(void **state)
{
        struct problem p;
        json_t *j = NULL;
        char deep[80];

        assert_int_equal(request_parse_json_object("{\"a\":1}", 7, &j, &p), 0);
        assert_true(json_is_object(j));
        json_decref(j);
        j = NULL;

        assert_true(request_parse_json_object("{\"a\":", 5, &j, &p) < 0);
        assert_int_equal(p.status, 400);
        assert_non_null(strstr(p.detail, "invalid JSON at line 1"));
        assert_null(j);
        assert_true(request_parse_json_object("[1,2]", 5, &j, &p) < 0);
        assert_non_null(strstr(p.detail, "JSON object"));
        assert_true(request_parse_json_object(NULL, 0, &j, &p) < 0);
        assert_true(request_parse_json_object("{\"a\":1,\"a\":2}", 13, &j, &p) < 0);
        assert_true(request_parse_json_object("{\"a\":1}\0x", 9, &j, &p) < 0);

        /* 33 levels: over the limit of 32. */
        memset(deep, 0, sizeof(deep));
        deep[0] = '{';
        strcat(deep, "\"a\":");
        for (int i = 0; i < 32; i++)
                strcat(deep, "[");
        for (int i = 0; i < 32; i++)
                strcat(deep, "]");
        strcat(deep, "}");
        assert_true(request_parse_json_object(deep, strlen(deep), &j, &p) < 0);
        assert_int_equal(p.status, 400);
}

static void test_submit_new_replay_and_full(void **state)
{
        struct api_reply rep;
        json_t *j;

        run(&rep, HTTP_POST, "/v1/jobs", "{\"benchmark\":\"copy\"}", NULL, 0, "key-1");
        assert_int_equal(rep.status, 202);
        assert_string_equal(rep.location, "/v1/jobs/0190a0b0-0000-7000-8000-000000000001");
        assert_string_equal(rep.content_type, "application/json");
        assert_string_equal(core_double.last_key, "key-1");
        j = reply_body(&rep);
        assert_string_equal(json_string_value(json_object_get(j, "state")), "queued");
        json_decref(j);
        reply_done(&rep);

        core_double.result = 1;
        run(&rep, HTTP_POST, "/v1/jobs", "{\"benchmark\":\"copy\"}", NULL, 0, "key-1");
        assert_int_equal(rep.status, 200);
        reply_done(&rep);

        core_double.fail_status = 429;
        core_double.fail_retry_after = 3;
        run(&rep, HTTP_POST, "/v1/jobs", "{\"benchmark\":\"copy\"}", NULL, 0, NULL);
        assert_int_equal(rep.status, 429);
        assert_int_equal(rep.retry_after_s, 3);
        assert_string_equal(rep.location, "");
        reply_done(&rep);
}

/* A submit the double makes wait for its commit: the handler's wait, nothing answered yet. */
static struct job_submit_wait *submit_that_waits(void)
{
        struct api_reply rep;

        core_double.submit_waits = true;
        run(&rep, HTTP_POST, "/v1/jobs", "{\"benchmark\":\"copy\"}", NULL, 0, NULL);
        assert_int_equal(rep.status, 0); /* nothing to send yet */
        assert_non_null(rep.submit_wait);
        assert_int_equal(core_double.submit_ends, 0);
        return rep.submit_wait;
}

static void test_submit_waiting_for_its_commit_is_answered_at_its_end(void **state)
{
        struct job_submit_wait *w = submit_that_waits();
        struct api_reply rep = {0};

        handle_job_submit_end(w, &rep);
        assert_int_equal(core_double.submit_ends, 1);
        assert_int_equal(rep.status, 202);
        assert_string_equal(rep.location, "/v1/jobs/0190a0b0-0000-7000-8000-000000000001");
        reply_done(&rep);
}

static void test_submit_whose_commit_failed_is_answered_with_the_problem(void **state)
{
        struct job_submit_wait *w = submit_that_waits();
        struct api_reply rep = {0};

        core_double.fail_status = 507;
        handle_job_submit_end(w, &rep);
        assert_int_equal(rep.status, 507);
        assert_string_equal(rep.location, "");
        reply_done(&rep);
}

static void test_submit_refuses_before_core(void **state)
{
        struct api_reply rep;
        json_t *j;

        run(&rep, HTTP_POST, "/v1/jobs", "{\"benchmark\":", NULL, 0, NULL);
        assert_int_equal(rep.status, 400);
        j = reply_body(&rep);
        assert_non_null(strstr(json_string_value(json_object_get(j, "detail")), "invalid JSON"));
        json_decref(j);
        reply_done(&rep);

        run(&rep, HTTP_POST, "/v1/jobs", "{}", NULL, 0, "bad\nkey");
        assert_int_equal(rep.status, 400);
        j = reply_body(&rep);
        assert_string_equal(json_string_value(json_object_get(j, "field")), "Idempotency-Key");
        json_decref(j);
        reply_done(&rep);
        assert_int_equal(core_double.calls, 0);
}

static int framing_of(const char *const *kv, size_t n)
{
        struct request_framing f = {0};
        struct problem p;

        for (size_t i = 0; i + 1 < n; i += 2)
                request_framing_add(&f, kv[i], kv[i + 1]);
        return request_framing_check(&f, &p) < 0 ? p.status : 0;
}

static void test_framing_refuses_what_two_parsers_may_read_two_ways(void **state)
{
        const char *plain[] = {"Host", "x", "Content-Length", "12"};
        const char *same[] = {"Content-Length", "12", "content-length", " 12 "};
        const char *chunked[] = {"Transfer-Encoding", "Chunked"};
        const char *both[] = {"Content-Length", "5", "transfer-encoding", "chunked"};
        const char *differ[] = {"Content-Length", "5", "Content-Length", "05"};
        const char *odd_te[] = {"Transfer-Encoding", "gzip, chunked"};
        const char *two_te[] = {"Transfer-Encoding", "chunked", "Transfer-Encoding", "chunked"};
        const char *spaced[] = {"Transfer-Encoding ", "chunked"};

        assert_int_equal(framing_of(plain, 4), 0);
        assert_int_equal(framing_of(same, 4), 0);
        assert_int_equal(framing_of(chunked, 2), 0);
        assert_int_equal(framing_of(both, 4), 400);
        assert_int_equal(framing_of(differ, 4), 400);
        assert_int_equal(framing_of(odd_te, 2), 400);
        assert_int_equal(framing_of(two_te, 4), 400);
        assert_int_equal(framing_of(spaced, 2), 400);
}

static void test_target_path_of_origin_and_absolute_forms(void **state)
{
        assert_string_equal(request_target_path("/v1/jobs"), "/v1/jobs");
        assert_string_equal(request_target_path("http://h:8470/v1/jobs"), "/v1/jobs");
        assert_string_equal(request_target_path("HTTPS://h/v1/version"), "/v1/version");
        assert_string_equal(request_target_path("http://h"), "/");
        /* Not a scheme umd knows: left as it is, so it is a 404 like any unknown path. */
        assert_string_equal(request_target_path("ftp://h/v1/jobs"), "ftp://h/v1/jobs");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup(test_problem_set_fills_everything, setup),
            cmocka_unit_test_setup(test_problem_json_shape, setup),
            cmocka_unit_test_setup(test_reply_problem_retry_after_and_bad_status, setup),
            cmocka_unit_test_setup(test_problem_json_with_invalid_utf8, setup),
            cmocka_unit_test_setup(test_url_unescape_keeps_nul_escaped, setup),
            cmocka_unit_test_setup(test_content_type, setup),
            cmocka_unit_test_setup(test_content_length, setup),
            cmocka_unit_test_setup(test_idempotency_key, setup),
            cmocka_unit_test_setup(test_job_list_query, setup),
            cmocka_unit_test_setup(test_list_passes_filter_and_refuses_unknown, setup),
            cmocka_unit_test_setup(test_list_filters_are_typed_and_the_next_link_repeats_the_query,
                                   setup),
            cmocka_unit_test_setup(test_json_body, setup),
            cmocka_unit_test_setup(test_json_numbers_beyond_range_name_the_field, setup),
            cmocka_unit_test_setup(test_json_string_with_nul_escape_names_the_field, setup),
            cmocka_unit_test(test_wait_durations),
            cmocka_unit_test(test_route_arguments),
            cmocka_unit_test(test_framing_refuses_what_two_parsers_may_read_two_ways),
            cmocka_unit_test(test_target_path_of_origin_and_absolute_forms),
            cmocka_unit_test_setup(test_submit_new_replay_and_full, setup),
            cmocka_unit_test_setup(test_submit_waiting_for_its_commit_is_answered_at_its_end,
                                   setup),
            cmocka_unit_test_setup(test_submit_whose_commit_failed_is_answered_with_the_problem,
                                   setup),
            cmocka_unit_test_setup(test_submit_refuses_before_core, setup),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
