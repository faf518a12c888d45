/* health.c: verdicts against the link's rate, the link's maximum, and the GPU's own baseline. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "config.h"
#include "health.h"

static struct umd_config cfg;

static int setup(void **state)
{
        config_init(&cfg);
        return 0;
}

static int teardown(void **state)
{
        config_free(&cfg);
        return 0;
}

static json_t *result(double h2d, double d2h, double pageable, double prefetch)
{
        return json_pack("{s:s, s:[{s:s, s:f}, {s:s, s:f}, {s:s, s:f}, {s:s, s:f}]}", "benchmark",
                         "health", "measurements", "name", "pinned_h2d", "gbps", h2d, "name",
                         "pinned_d2h", "gbps", d2h, "name", "pageable_h2d", "gbps", pageable,
                         "name", "managed_prefetch", "gbps", prefetch);
}

static json_t *link(int cg, int cw, int mg, int mw)
{
        return json_pack("{s:i, s:i, s:i, s:i}", "current_gen", cg, "current_width", cw,
                         "max_gen", mg, "max_width", mw);
}

static const char *verdict_of(json_t *v)
{
        return json_string_value(json_object_get(v, "verdict"));
}

static void test_gen5_x16_rate_is_63_gbps(void **state)
{
        assert_true(fabs(pcie_link_gbps(5, 16) - 63.015) < 0.01);
        assert_true(fabs(pcie_link_gbps(4, 16) - 31.5) < 0.01);
        assert_true(pcie_link_gbps(0, 16) == 0);
}

static void test_h200_figures_pass(void **state)
{
        json_t *r = result(55.5, 55.3, 9.3, 48.0), *l = link(5, 16, 5, 16);
        json_t *v = health_verdict(&cfg, r, l, NULL, 0, NULL);
        assert_string_equal(verdict_of(v), "pass");
        assert_int_equal(json_array_size(json_object_get(v, "reasons")), 0);
        json_decref(v), json_decref(r), json_decref(l);
}

static void test_link_below_its_maximum_warns(void **state)
{
        json_t *r = result(27.0, 27.0, 9.3, 25.0), *l = link(4, 16, 5, 16);
        json_t *v = health_verdict(&cfg, r, l, NULL, 0, NULL);
        assert_string_equal(verdict_of(v), "warn");
        const char *why = json_string_value(json_array_get(json_object_get(v, "reasons"), 0));
        assert_non_null(strstr(why, "Gen4 x16, below its maximum Gen5 x16"));
        json_decref(v), json_decref(r), json_decref(l);
}

static void test_pinned_bandwidth_far_below_link_fails(void **state)
{
        json_t *r = result(20.0, 55.0, 9.3, 48.0), *l = link(5, 16, 5, 16);
        json_t *v = health_verdict(&cfg, r, l, NULL, 0, NULL);
        assert_string_equal(verdict_of(v), "fail");
        json_decref(v), json_decref(r), json_decref(l);
}

static void test_pinned_bandwidth_somewhat_below_link_warns(void **state)
{
        json_t *r = result(38.0, 55.0, 9.3, 48.0), *l = link(5, 16, 5, 16);
        json_t *v = health_verdict(&cfg, r, l, NULL, 0, NULL);
        assert_string_equal(verdict_of(v), "warn");
        json_decref(v), json_decref(r), json_decref(l);
}

static json_t *h200_baseline(void)
{
        return json_pack("{s:f, s:f, s:f, s:f}", "pinned_h2d", 55.4, "pinned_d2h", 55.2,
                         "pageable_h2d", 9.3, "managed_prefetch", 48.1);
}

static void test_pinned_drop_below_own_baseline_fails(void **state)
{
        json_t *r = result(45.0, 55.0, 9.3, 48.0), *l = link(5, 16, 5, 16), *b = h200_baseline();
        json_t *v = health_verdict(&cfg, r, l, b, 5, NULL);
        assert_string_equal(verdict_of(v), "fail");
        const char *why = json_string_value(json_array_get(json_object_get(v, "reasons"), 0));
        assert_non_null(strstr(why, "pinned_h2d"));
        assert_non_null(strstr(why, "baseline"));
        json_decref(v), json_decref(r), json_decref(l), json_decref(b);
}

static void test_pageable_drop_below_own_baseline_only_warns(void **state)
{
        json_t *r = result(55.0, 55.0, 6.0, 48.0), *l = link(5, 16, 5, 16), *b = h200_baseline();
        json_t *v = health_verdict(&cfg, r, l, b, 5, NULL);
        assert_string_equal(verdict_of(v), "warn");
        const char *why = json_string_value(json_array_get(json_object_get(v, "reasons"), 0));
        assert_non_null(strstr(why, "pageable_h2d"));
        json_decref(v), json_decref(r), json_decref(l), json_decref(b);
}

static void test_baseline_of_too_few_runs_is_not_judged(void **state)
{
        json_t *r = result(46.0, 55.0, 6.0, 48.0), *l = link(5, 16, 5, 16), *b = h200_baseline();
        json_t *v = health_verdict(&cfg, r, l, b, cfg.health_baseline_min_runs - 1, NULL);
        assert_string_equal(verdict_of(v), "pass");
        json_decref(v), json_decref(r), json_decref(l), json_decref(b);
}

static void test_small_wobble_around_baseline_passes(void **state)
{
        json_t *r = result(54.0, 54.5, 9.0, 47.0), *l = link(5, 16, 5, 16);
        json_t *b = json_pack("{s:f, s:f, s:f, s:f}", "pinned_h2d", 55.4, "pinned_d2h", 55.2,
                              "pageable_h2d", 9.3, "managed_prefetch", 48.1);
        json_t *v = health_verdict(&cfg, r, l, b, 5, NULL);
        assert_string_equal(verdict_of(v), "pass");
        json_decref(v), json_decref(r), json_decref(l), json_decref(b);
}

static void test_unreadable_link_warns_and_says_so(void **state)
{
        json_t *r = result(55.0, 55.0, 9.0, 47.0);
        json_t *v = health_verdict(&cfg, r, NULL, NULL, 0, NULL);
        assert_string_equal(verdict_of(v), "warn");
        json_decref(v), json_decref(r);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_gen5_x16_rate_is_63_gbps),
                cmocka_unit_test(test_h200_figures_pass),
                cmocka_unit_test(test_link_below_its_maximum_warns),
                cmocka_unit_test(test_pinned_bandwidth_far_below_link_fails),
                cmocka_unit_test(test_pinned_bandwidth_somewhat_below_link_warns),
                cmocka_unit_test(test_pinned_drop_below_own_baseline_fails),
                cmocka_unit_test(test_pageable_drop_below_own_baseline_only_warns),
                cmocka_unit_test(test_baseline_of_too_few_runs_is_not_judged),
                cmocka_unit_test(test_small_wobble_around_baseline_passes),
                cmocka_unit_test(test_unreadable_link_warns_and_says_so),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
