/* Routing: which path reaches which handler, 404 for unknown paths, 405 with Allow for
 * methods a route does not take, and the {id} segment. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_helpers.h"
#include "util.h"

static int setup(void **state)
{
        core_double_reset();
        return 0;
}

static void assert_problem(const struct api_reply *rep, int status)
{
        json_t *j = reply_body(rep);

        assert_int_equal(rep->status, status);
        assert_string_equal(rep->content_type, "application/problem+json");
        assert_non_null(j);
        assert_int_equal(json_integer_value(json_object_get(j, "status")), status);
        assert_non_null(json_string_value(json_object_get(j, "title")));
        assert_non_null(json_string_value(json_object_get(j, "detail")));
        assert_non_null(
            strstr(json_string_value(json_object_get(j, "type")), "https://umd.dev/problems/"));
        json_decref(j);
}

static void test_every_route_reaches_its_handler(void **state)
{
        static const char *paths[] = {"/",           "/metrics",        "/v1/health",
                                      "/v1/devices", "/v1/version",     "/v1/benchmarks",
                                      "/v1/jobs",    "/v1/openapi.json"};
        struct api_reply rep;

        for (size_t i = 0; i < ELEMENTSOF(paths); i++) {
                run(&rep, HTTP_GET, paths[i], NULL, NULL, 0, NULL);
                assert_int_equal(rep.status, 200);
                assert_non_null(rep.content_type);
                reply_done(&rep);
        }
}

static void test_unknown_paths_are_404(void **state)
{
        static const char *paths[] = {"/v1",        "/v1/",         "/v1/health/",
                                      "/v1/jobs/",  "/v1/jobs/a/b", "/v2/health",
                                      "/v1/HEALTH", "/metricsx",    ""};
        struct api_reply rep;

        for (size_t i = 0; i < ELEMENTSOF(paths); i++) {
                run(&rep, HTTP_GET, paths[i], NULL, NULL, 0, NULL);
                assert_problem(&rep, 404);
                assert_string_equal(rep.allow, "");
                reply_done(&rep);
        }
        assert_int_equal(core_double.calls, 0);
}

static void test_wrong_method_is_405_with_allow(void **state)
{
        static const struct {
                enum http_method method;
                const char *path, *body, *allow;
        } cases[] = {
            {HTTP_POST, "/v1/health", "{}", "GET, HEAD"},
            {HTTP_DELETE, "/v1/jobs", NULL, "GET, HEAD, POST"},
            {HTTP_POST, "/v1/jobs/abc", "{}", "GET, HEAD, DELETE"},
            {HTTP_OTHER, "/metrics", NULL, "GET, HEAD"},
        };
        struct api_reply rep;

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                run(&rep, cases[i].method, cases[i].path, cases[i].body, NULL, 0, NULL);
                assert_problem(&rep, 405);
                assert_string_equal(rep.allow, cases[i].allow);
                reply_done(&rep);
        }
        assert_int_equal(core_double.calls, 0);
}

static void test_head_is_served_as_get(void **state)
{
        struct api_reply rep;

        run(&rep, HTTP_HEAD, "/v1/version", NULL, NULL, 0, NULL);
        assert_int_equal(rep.status, 200);
        reply_done(&rep);
}

static void test_id_segment_reaches_handler(void **state)
{
        struct api_reply rep;

        run(&rep, HTTP_GET, "/v1/jobs/0190a0b0-0000-7000-8000-00000000abcd", NULL, NULL, 0, NULL);
        assert_int_equal(rep.status, 200);
        assert_string_equal(core_double.last_id, "0190a0b0-0000-7000-8000-00000000abcd");
        reply_done(&rep);

        run(&rep, HTTP_DELETE, "/v1/jobs/xyz", NULL, NULL, 0, NULL);
        assert_int_equal(rep.status, 200);
        assert_string_equal(core_double.last_id, "xyz");
        reply_done(&rep);
}

static void test_router_match_spans(void **state)
{
        size_t off = 99, len = 99;
        const struct route *r = router_match("/v1/jobs/abc", &off, &len);

        assert_non_null(r);
        assert_string_equal(r->pattern, "/v1/jobs/{id}");
        assert_int_equal(off, 9);
        assert_int_equal(len, 3);
        r = router_match("/v1/jobs", &off, &len);
        assert_string_equal(r->pattern, "/v1/jobs");
        assert_int_equal(len, 0);
        assert_null(router_match(NULL, NULL, NULL));
        assert_string_equal(router_pattern_for("/v1/jobs/abc"), "/v1/jobs/{id}");
        assert_string_equal(router_pattern_for("/nope"), "other");
}

static void test_method_names(void **state)
{
        assert_int_equal(http_method_from_string("GET"), HTTP_GET);
        assert_int_equal(http_method_from_string("get"), HTTP_OTHER);
        assert_int_equal(http_method_from_string("PUT"), HTTP_OTHER);
        assert_int_equal(http_method_from_string(NULL), HTTP_OTHER);
        assert_string_equal(http_method_name(HTTP_DELETE), "DELETE");
        assert_string_equal(http_method_name(HTTP_OTHER), "OTHER");
}

static void test_core_problem_passes_through(void **state)
{
        struct api_reply rep;

        core_double.fail_status = 404;
        run(&rep, HTTP_GET, "/v1/jobs/nope", NULL, NULL, 0, NULL);
        assert_problem(&rep, 404);
        reply_done(&rep);
}

static void test_health_status_follows_core(void **state)
{
        struct api_reply rep;

        core_double.health = 503;
        run(&rep, HTTP_GET, "/v1/health", NULL, NULL, 0, NULL);
        assert_int_equal(rep.status, 503);
        assert_string_equal(rep.content_type, "application/json");
        reply_done(&rep);
}

static void test_metrics_content_type(void **state)
{
        struct api_reply rep;

        run(&rep, HTTP_GET, "/metrics", NULL, NULL, 0, NULL);
        assert_int_equal(rep.status, 200);
        assert_string_equal(rep.content_type, "text/plain; version=0.0.4");
        assert_memory_equal(rep.body, "umd_up 1\n", rep.body_len);
        reply_done(&rep);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup(test_every_route_reaches_its_handler, setup),
            cmocka_unit_test_setup(test_unknown_paths_are_404, setup),
            cmocka_unit_test_setup(test_wrong_method_is_405_with_allow, setup),
            cmocka_unit_test_setup(test_head_is_served_as_get, setup),
            cmocka_unit_test_setup(test_id_segment_reaches_handler, setup),
            cmocka_unit_test_setup(test_router_match_spans, setup),
            cmocka_unit_test_setup(test_method_names, setup),
            cmocka_unit_test_setup(test_core_problem_passes_through, setup),
            cmocka_unit_test_setup(test_health_status_follows_core, setup),
            cmocka_unit_test_setup(test_metrics_content_type, setup),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
