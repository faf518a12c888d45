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
        return devices_discover(&cfg, worker) == 0 && devices_count() == 2 ? 0 : -1;
}

static int teardown(void **state)
{
        devices_free();
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
        };

        return cmocka_run_group_tests(tests, setup, teardown);
}
