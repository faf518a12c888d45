/* suites.c: what umd concludes from a suite's measurements (the same for real and fake
 * results): um_vs_explicit's ratios, best mode and sentence; sweep's curves, peaks and the
 * smallest size reaching 90% of the peak. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "suites.h"

static json_t *m(const char *name, double gbps, const char *direction)
{
        return json_pack("{s:s, s:f, s:s, s:{s:f}}", "name", name, "gbps", gbps, "direction",
                         direction, "stats", "median_ms", 1.0);
}

static json_t *um_result(void)
{
        return json_pack(
            "{s:[o, o, o, o, o]}", "measurements", m("pinned_copy_kernel", 50.0, "to_gpu"),
            m("overlapped_copy_kernel", 55.0, "to_gpu"), m("managed_on_demand", 10.0, "to_gpu"),
            m("managed_prefetch", 45.0, "to_gpu"), m("managed_cpu_on_demand", 80.0, "to_host"));
}

static const json_t *mode(const json_t *summary, const char *name)
{
        size_t i;
        json_t *x;

        json_array_foreach(json_object_get(summary, "modes"), i, x)
        {
                if (strcmp(json_string_value(json_object_get(x, "mode")), name) == 0)
                        return x;
        }
        return NULL;
}

static void test_um_ratios_are_against_pinned_copy_and_kernel(void **state)
{
        json_t *r = um_result(), *s = suite_summary("um_vs_explicit", r);

        assert_non_null(s);
        assert_string_equal(json_string_value(json_object_get(s, "reference")), UM_REFERENCE_MODE);
        assert_true(
            fabs(json_real_value(json_object_get(mode(s, "managed_on_demand"), "ratio_to_pinned")) -
                 0.2) < 1e-9);
        assert_true(
            fabs(json_real_value(json_object_get(mode(s, UM_REFERENCE_MODE), "ratio_to_pinned")) -
                 1.0) < 1e-9);
        json_decref(s), json_decref(r);
}

static void test_um_best_mode_ignores_the_way_back_to_the_host(void **state)
{
        json_t *r = um_result(), *s = suite_summary("um_vs_explicit", r);

        /* managed_cpu_on_demand is faster, but it moves data the other way */
        assert_string_equal(json_string_value(json_object_get(s, "best")),
                            "overlapped_copy_kernel");
        assert_true(json_is_true(json_object_get(mode(s, "managed_cpu_on_demand"), "to_host")));
        json_decref(s), json_decref(r);
}

static void test_um_sentence_says_how_much_slower_on_demand_is(void **state)
{
        json_t *r = um_result(), *s = suite_summary("um_vs_explicit", r);
        const char *c = json_string_value(json_object_get(s, "conclusion"));

        assert_non_null(strstr(c, "on-demand managed memory is 5.0x slower than pinned copies"));
        assert_non_null(strstr(c, "prefetching recovers 0.90x of pinned"));
        json_decref(s), json_decref(r);
}

static void test_um_without_its_reference_says_so(void **state)
{
        json_t *r = json_pack("{s:[o]}", "measurements", m("managed_on_demand", 10, "to_gpu"));
        json_t *s = suite_summary("um_vs_explicit", r);

        assert_non_null(
            strstr(json_string_value(json_object_get(s, "conclusion")), "was not measured"));
        assert_true(json_is_null(json_object_get(mode(s, "managed_on_demand"), "ratio_to_pinned")));
        json_decref(s), json_decref(r);
}

static json_t *point(const char *mode_at_size, json_int_t bytes, double gbps)
{
        return json_pack("{s:s, s:I, s:f, s:{s:f}}", "name", mode_at_size, "bytes", bytes, "gbps",
                         gbps, "stats", "median_ms", 1.0);
}

static void test_sweep_curve_peak_and_size_at_90pct(void **state)
{
        json_t *r = json_pack("{s:[o, o, o, o]}", "measurements", point("pinned_h2d@4096", 4096, 5),
                              point("pinned_h2d@1048576", 1048576, 50),
                              point("pinned_h2d@65536", 65536, 46),
                              point("pinned_h2d@16777216", 16777216, 51));
        json_t *s = suite_summary("sweep", r);
        json_t *c = json_array_get(json_object_get(s, "curves"), 0);

        assert_string_equal(json_string_value(json_object_get(c, "mode")), "pinned_h2d");
        assert_int_equal(json_array_size(json_object_get(c, "points")), 4);
        assert_true(fabs(json_real_value(json_object_get(c, "peak_gbps")) - 51) < 1e-9);
        /* 46 >= 0.9 * 51: 64 KiB is the smallest size at 90% */
        assert_int_equal(json_integer_value(json_object_get(c, "size_at_90pct_peak")), 65536);
        json_decref(s), json_decref(r);
}

static void test_other_benchmarks_have_no_summary(void **state)
{
        json_t *r = um_result();

        assert_null(suite_summary("copy", r));
        assert_null(suite_summary("um_vs_explicit", NULL));
        assert_null(suite_summary(NULL, r));
        json_decref(r);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_um_ratios_are_against_pinned_copy_and_kernel),
            cmocka_unit_test(test_um_best_mode_ignores_the_way_back_to_the_host),
            cmocka_unit_test(test_um_sentence_says_how_much_slower_on_demand_is),
            cmocka_unit_test(test_um_without_its_reference_says_so),
            cmocka_unit_test(test_sweep_curve_peak_and_size_at_90pct),
            cmocka_unit_test(test_other_benchmarks_have_no_summary),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
