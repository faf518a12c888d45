/* job_spec.c: what a submission may be, against two fake devices discovered by the real
 * `umd-worker --list --fake 2` (path in $UMD_WORKER): known fields only, the canonical health
 * check (a health job without params) takes its parameters from the configuration, busy_policy
 * is one of three words, devices and params are checked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "core.h"
#include "devices.h"
#include "job_spec.h"

static struct umd_config cfg;
/* The table job_spec.c reads through the handle-less readers (devices.h). */
static struct devices *devs;

static int setup(void **state)
{
        const char *worker = getenv("UMD_WORKER");

        if (!worker || access(worker, X_OK) < 0) {
                fprintf(stderr, "UMD_WORKER must name the umd-worker binary\n");
                return -1;
        }
        config_init(&cfg);
        cfg.fake_devices = 2;
        cfg.health_size = 8u << 20;
        cfg.health_iterations = 4;
        return devices_new(&cfg, worker, &devs) == 0 && devices_count() == 2 ? 0 : -1;
}

static int teardown(void **state)
{
        devs = devices_free(devs);
        config_free(&cfg);
        return 0;
}

/* Parses body as a submission: 0 with *spec filled, or the problem's status. */
static int parse(const char *text, struct job_spec *spec, struct problem *p)
{
        json_t *body = json_loads(text, 0, NULL);
        const struct bench_def *b;
        int r;

        assert_non_null(body);
        memset(p, 0, sizeof(*p));
        r = spec_check_body(body, &b, p);
        if (r >= 0)
                r = spec_parse(&cfg, body, b, spec, p);
        json_decref(body);
        return r < 0 ? p->status : 0;
}

static void test_unknown_field_is_400_naming_it(void **state)
{
        struct job_spec s = {0};
        struct problem p;

        assert_int_equal(parse("{\"benchmark\": \"copy\", \"colour\": 1}", &s, &p), 400);
        assert_string_equal(p.field, "colour");
}

static void test_health_without_params_is_the_canonical_check(void **state)
{
        struct job_spec s = {0};
        struct problem p;

        assert_int_equal(parse("{\"benchmark\": \"health\", \"device\": 0}", &s, &p), 0);
        assert_true(s.canonical);
        assert_int_equal(json_integer_value(json_object_get(s.params, "size")), 8 << 20);
        assert_int_equal(json_integer_value(json_object_get(s.params, "iterations")), 4);
        spec_done(&s);
        assert_int_equal(parse("{\"benchmark\": \"health\", \"params\": {}}", &s, &p), 0);
        assert_true(s.canonical);
        spec_done(&s);
}

static void test_health_with_params_is_an_ordinary_run(void **state)
{
        struct job_spec s = {0};
        struct problem p;

        assert_int_equal(
            parse("{\"benchmark\": \"health\", \"params\": {\"size\": \"64KiB\"}}", &s, &p), 0);
        assert_false(s.canonical);
        assert_int_equal(json_integer_value(json_object_get(s.params, "size")), 65536);
        spec_done(&s);
}

static void test_busy_policy_is_one_of_three_words(void **state)
{
        struct job_spec s = {0};
        struct problem p;

        assert_int_equal(parse("{\"benchmark\": \"copy\", \"busy_policy\": \"run\"}", &s, &p), 0);
        spec_done(&s);
        assert_int_equal(parse("{\"benchmark\": \"copy\", \"busy_policy\": \"later\"}", &s, &p),
                         400);
        assert_string_equal(p.field, "busy_policy");
        assert_int_equal(parse("{\"benchmark\": \"copy\", \"busy_policy\": 1}", &s, &p), 400);
}

static void test_devices_must_exist(void **state)
{
        struct job_spec s = {0};
        struct problem p;

        assert_int_equal(parse("{\"benchmark\": \"copy\", \"devices\": \"all\"}", &s, &p), 0);
        assert_int_equal(s.n_devs, 2);
        spec_done(&s);
        assert_int_equal(parse("{\"benchmark\": \"copy\", \"device\": 2}", &s, &p), 400);
        assert_int_equal(parse("{\"benchmark\": \"copy\", \"device\": \"GPU-nope\"}", &s, &p), 400);
}

static void test_the_extended_tier_is_canonical_with_the_configured_budget(void **state)
{
        struct job_spec s = {0};
        struct problem p;

        /* one GPU of two: no pairs part, so the GPU gets the whole 30 s */
        assert_int_equal(parse("{\"benchmark\": \"health\", \"device\": 0, \"params\": "
                               "{\"tier\": \"extended\"}}",
                               &s, &p),
                         0);
        assert_true(s.canonical);
        assert_string_equal(json_string_value(json_object_get(s.params, "tier")), "extended");
        assert_int_equal(json_integer_value(json_object_get(s.params, "budget_ms")), 30000);
        assert_int_equal(json_integer_value(json_object_get(s.params, "pairs_budget_ms")), 0);
        assert_int_equal(json_integer_value(json_object_get(s.params, "size")), 8 << 20);
        spec_done(&s);
}

static void test_an_unknown_tier_is_400_naming_the_tier(void **state)
{
        struct job_spec s = {0};
        struct problem p;

        assert_int_equal(
            parse("{\"benchmark\": \"health\", \"params\": {\"tier\": \"deep\"}}", &s, &p), 400);
        assert_string_equal(p.field, "params.tier");
}

static void test_canonical_health_is_told_apart_from_the_body_alone(void **state)
{
        json_t *a = json_pack("{s:s}", "benchmark", "health");
        json_t *b = json_pack("{s:s, s:{s:i}}", "benchmark", "health", "params", "iterations", 3);
        json_t *c = json_pack("{s:s}", "benchmark", "copy");

        assert_true(spec_is_canonical_health(a));
        assert_false(spec_is_canonical_health(b));
        assert_false(spec_is_canonical_health(c));
        json_decref(a), json_decref(b), json_decref(c);
}

/* Issue 57: a job whose lower-bound estimate is far over its timeout_s is refused at submit,
 * with the estimate and the limit; job_estimate_factor sets how far, 0 never. */
static void test_a_job_estimated_far_over_its_timeout_is_400_with_the_estimate(void **state)
{
        const char *huge =
            "{\"benchmark\": \"pipeline\", \"device\": 0, \"params\": {\"size\": "
            "\"4GiB\", \"iterations\": 1000, \"intensity\": 1048576, \"steps\": 100}}";
        struct job_spec s = {0};
        struct problem p;

        assert_int_equal(parse(huge, &s, &p), 400);
        assert_string_equal(p.field, "params");
        assert_non_null(strstr(p.detail, "estimated at least "));
        assert_non_null(strstr(p.detail, " days"));
        assert_non_null(strstr(p.detail, "limit of 6000 s"));
        cfg.job_estimate_factor = 0;
        assert_int_equal(parse(huge, &s, &p), 0);
        spec_done(&s);
        cfg.job_estimate_factor = 10;
}

/* 4 GiB x 1003 samples is at least 34 s over a Gen5 x16 link both ways: refused under 1 s, let
 * run under 600 s (the bound is 10x, and a lower one). */
static void test_the_estimate_is_against_the_jobs_own_timeout(void **state)
{
        struct job_spec s = {0};
        struct problem p;

        assert_int_equal(parse("{\"benchmark\": \"copy\", \"device\": 0, \"timeout_s\": 1, "
                               "\"params\": {\"size\": \"4GiB\", \"iterations\": 1000}}",
                               &s, &p),
                         400);
        assert_non_null(strstr(p.detail, "limit of 10 s"));
        assert_int_equal(parse("{\"benchmark\": \"copy\", \"device\": 0, \"timeout_s\": 600, "
                               "\"params\": {\"size\": \"4GiB\", \"iterations\": 1000}}",
                               &s, &p),
                         0);
        spec_done(&s);
        /* Strided access touches a page a stride: the buffer's size bounds nothing. */
        assert_int_equal(parse("{\"benchmark\": \"managed_on_demand\", \"device\": 0, "
                               "\"timeout_s\": 1, \"params\": {\"size\": \"4GiB\", "
                               "\"iterations\": 1000, \"access\": \"strided\", \"stride\": "
                               "\"1GiB\"}}",
                               &s, &p),
                         0);
        spec_done(&s);
}

/* A result sure to pass max_result_bytes is refused before the run: 1000 samples take more than
 * 4096 bytes; 100 may fit, and are left to the run's own check. */
static void test_a_result_sure_to_pass_max_result_bytes_is_400_before_the_run(void **state)
{
        struct job_spec s = {0};
        struct problem p;

        cfg.max_result_bytes = 4096;
        assert_int_equal(parse("{\"benchmark\": \"copy\", \"device\": 0, \"params\": "
                               "{\"size\": \"4KiB\", \"iterations\": 1000}}",
                               &s, &p),
                         400);
        assert_string_equal(p.field, "params.iterations");
        assert_non_null(strstr(p.detail, "max_result_bytes"));
        assert_int_equal(parse("{\"benchmark\": \"sweep\", \"device\": 0, \"params\": "
                               "{\"iterations\": 100}}",
                               &s, &p),
                         400);
        assert_int_equal(parse("{\"benchmark\": \"copy\", \"device\": 0, \"params\": "
                               "{\"size\": \"4KiB\", \"iterations\": 100}}",
                               &s, &p),
                         0);
        spec_done(&s);
        cfg.max_result_bytes = 4u << 20;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_unknown_field_is_400_naming_it),
            cmocka_unit_test(test_health_without_params_is_the_canonical_check),
            cmocka_unit_test(test_health_with_params_is_an_ordinary_run),
            cmocka_unit_test(test_the_extended_tier_is_canonical_with_the_configured_budget),
            cmocka_unit_test(test_an_unknown_tier_is_400_naming_the_tier),
            cmocka_unit_test(test_busy_policy_is_one_of_three_words),
            cmocka_unit_test(test_devices_must_exist),
            cmocka_unit_test(test_canonical_health_is_told_apart_from_the_body_alone),
            cmocka_unit_test(test_a_job_estimated_far_over_its_timeout_is_400_with_the_estimate),
            cmocka_unit_test(test_the_estimate_is_against_the_jobs_own_timeout),
            cmocka_unit_test(test_a_result_sure_to_pass_max_result_bytes_is_400_before_the_run),
        };

        return cmocka_run_group_tests(tests, setup, teardown);
}
