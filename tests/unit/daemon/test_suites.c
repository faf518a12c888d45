/* suites.c: what umd concludes from a suite's measurements (the same for real and fake
 * results): um_vs_explicit's ratios, best mode and sentence; sweep's curves, peaks and the
 * smallest size reaching 90% of the peak. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "jsonutil.h"
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
        return json_array_find(json_object_get(summary, "modes"), "mode", name);
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

/* A pipeline measurement: name, median, and the fields the benchmark adds. */
static json_t *pm(const char *name, double ms, double first, double steady)
{
        return json_pack("{s:s, s:I, s:{s:f, s:f}, s:f, s:f, s:i, s:I, s:s}", "name", name, "bytes",
                         (json_int_t)1 << 30, "stats", "median_ms", ms, "cv", 0.01, "first_step_ms",
                         first, "steady_step_ms", steady, "intensity", 2500, "touched_bytes",
                         (json_int_t)1 << 30, "sweep", "intensity");
}

static json_t *pipe_result(void)
{
        return json_pack("{s:{s:i}, s:[o, o, o, o, o]}", "intensity", "chosen", 2500,
                         "measurements", pm("copy_alone", 20, 20, 20),
                         pm("kernel_alone", 21, 21, 21), pm("pinned_serial", 41, 41, 41),
                         pm("pinned_overlapped", 21.5, 21.5, 21.5),
                         pm("managed_on_demand", 150, 180, 140));
}

static const json_t *strategy(const json_t *summary, const char *name)
{
        return json_array_find(json_object_get(summary, "strategies"), "strategy", name);
}

static double numf(const json_t *o, const char *k)
{
        return json_number_value(json_object_get(o, k));
}

static void test_pipeline_ratio_is_to_the_longer_of_copy_and_kernel(void **state)
{
        json_t *r = pipe_result(), *s = suite_summary("pipeline", r);
        const json_t *ov = strategy(s, "pinned_overlapped");

        assert_non_null(ov);
        assert_true(fabs(numf(s, "limit_ms") - 21) < 1e-9);
        assert_string_equal(json_string_value(json_object_get(s, "bound")), "kernel");
        assert_true(fabs(numf(ov, "ratio_to_limit") - 21.5 / 21) < 1e-9);
        assert_true(fabs(numf(ov, "speedup_vs_serial") - 41 / 21.5) < 1e-9);
        assert_string_equal(json_string_value(json_object_get(s, "best")), "pinned_overlapped");
        assert_non_null(
            strstr(json_string_value(json_object_get(s, "conclusion")), "1.02x the limit"));
        assert_null(json_object_get(s, "note")); /* a balanced kernel hides the copy */
        json_decref(s), json_decref(r);
}

static void test_pipeline_first_step_apart_only_where_it_differs(void **state)
{
        json_t *r = pipe_result(), *s = suite_summary("pipeline", r);

        assert_true(
            json_is_true(json_object_get(strategy(s, "managed_on_demand"), "first_step_differs")));
        assert_true(
            json_is_false(json_object_get(strategy(s, "pinned_serial"), "first_step_differs")));
        json_decref(s), json_decref(r);
}

/* batch host_written (issue 60): the host's write alone joins the limit, each strategy says what
 * its own write cost, and the sentence names them. */
static json_t *written_result(double host_ms)
{
        json_t *pc = pm("managed_prefetch_chunked", 150, 170, 150),
               *dp = pm("managed_discard_prefetch", 110, 130, 110),
               *se = pm("pinned_serial", 105, 120, 105);
        json_object_set_new(pc, "host_write_ms", json_real(150));
        json_object_set_new(dp, "host_write_ms", json_real(104));
        json_object_set_new(se, "host_write_ms", json_real(host_ms));
        return json_pack("{s:{s:i}, s:[o, o, o, o, o, o]}", "intensity", "chosen", 2500,
                         "measurements", pm("copy_alone", 20, 20, 20),
                         pm("kernel_alone", 21, 21, 21),
                         pm("host_write", host_ms, host_ms, host_ms), se, pc, dp);
}

static void test_pipeline_host_write_longer_than_both_halves_is_the_limit(void **state)
{
        json_t *r = written_result(100), *s = suite_summary("pipeline", r);
        const char *c = json_string_value(json_object_get(s, "conclusion"));

        assert_true(fabs(numf(s, "limit_ms") - 100) < 1e-9);
        assert_true(fabs(numf(s, "host_write_ms") - 100) < 1e-9);
        assert_string_equal(json_string_value(json_object_get(s, "bound")), "host_write");
        assert_true(fabs(numf(strategy(s, "managed_prefetch_chunked"), "host_write_ms") - 150) <
                    1e-9);
        assert_non_null(strstr(c, "The host writes each batch into pinned memory in 100.00 ms, "
                                  "longer than the copy and the kernel: it is the limit"));
        assert_non_null(strstr(c, "into managed memory 150.00 ms, its CPU faults included"));
        assert_non_null(strstr(c, "104.00 ms after a discard (the step 1.10x the limit)"));
        json_decref(s), json_decref(r);
}

static void test_pipeline_host_write_within_the_limit_leaves_it_alone(void **state)
{
        json_t *r = written_result(5), *s = suite_summary("pipeline", r);

        assert_true(fabs(numf(s, "limit_ms") - 21) < 1e-9);
        assert_string_equal(json_string_value(json_object_get(s, "bound")), "kernel");
        assert_non_null(strstr(json_string_value(json_object_get(s, "conclusion")),
                               "in 5.00 ms, within the limit"));
        json_decref(s), json_decref(r);
}

static void test_pipeline_prepared_says_nothing_of_a_write(void **state)
{
        json_t *r = pipe_result(), *s = suite_summary("pipeline", r);

        assert_true(json_is_null(json_object_get(s, "host_write_ms")));
        assert_null(strstr(json_string_value(json_object_get(s, "conclusion")), "host writes"));
        json_decref(s), json_decref(r);
}

/* Issue 60's goal for managed memory prefetched in chunks (1.10x the limit), and what stops it:
 * the H100's figures (bench/results/gpu-h100-1207) as a prepared run. chunked_ms's strategy was
 * issued `issue`; pf_ms <= 0 leaves the prefetch alone out. */
static json_t *managed_result(double chunked_ms, const char *issue, double pf_ms)
{
        json_t *pc = pm("managed_prefetch_chunked", chunked_ms, chunked_ms, chunked_ms);
        json_object_set_new(pc, "chunk_issue", json_string(issue));
        json_t *r = json_pack("{s:{s:i}, s:[o, o, o, o]}", "intensity", "chosen", 2180,
                              "measurements", pm("copy_alone", 19.34, 19.34, 19.34),
                              pm("kernel_alone", 19.35, 19.35, 19.35),
                              pm("pinned_overlapped", 20.65, 20.65, 20.65), pc);
        if (pf_ms > 0)
                json_array_append_new(json_object_get(r, "measurements"),
                                      pm("managed_prefetch_alone", pf_ms, pf_ms, pf_ms));
        return r;
}

static const char *conclusion(const json_t *s)
{
        return json_string_value(json_object_get(s, "conclusion"));
}

static void test_pipeline_managed_over_the_goal_is_bound_by_the_prefetch_rate(void **state)
{
        json_t *r = managed_result(23.11, "round_robin", 21.60), *s = suite_summary("pipeline", r);
        const char *c = conclusion(s);

        assert_true(fabs(numf(s, "prefetch_alone_ms") - 21.60) < 1e-9);
        assert_string_equal(json_string_value(json_object_get(
                                strategy(s, "managed_prefetch_chunked"), "chunk_issue")),
                            "round_robin");
        assert_non_null(strstr(c, "Managed memory prefetched in chunks (managed_prefetch_chunked) "
                                  "takes 1.19x the limit, over the 1.10x goal: managed prefetch "
                                  "alone, no kernel, moves the batch in 21.60 ms (49.7 GB/s "
                                  "against the pinned copy's 55.5 GB/s), 1.12x the limit, and no "
                                  "managed strategy moves it faster: the bound is the prefetch "
                                  "rate, not the order umd issues them in."));
        json_decref(s), json_decref(r);
}

static void test_pipeline_managed_copy_stream_says_the_prefetches_wait_in_turn(void **state)
{
        json_t *r = managed_result(30.15, "copy_stream", 20.50), *s = suite_summary("pipeline", r);
        const char *c = conclusion(s);

        assert_non_null(strstr(c, "takes 1.56x the limit, over the 1.10x goal"));
        assert_non_null(strstr(c, "1.06x the limit, within the goal: what the chunks add stops it; "
                                  "issued copy_stream, every prefetch also waits its turn on one "
                                  "stream (chunk_issue auto or round_robin overlaps them)."));
        json_decref(s), json_decref(r);
}

static void test_pipeline_managed_within_the_goal_says_nothing_of_it(void **state)
{
        json_t *r = managed_result(21.00, "round_robin", 20.50), *s = suite_summary("pipeline", r);

        assert_null(strstr(conclusion(s), "goal"));
        json_decref(s), json_decref(r);
}

static void test_pipeline_managed_over_the_goal_without_the_prefetch_alone_says_so(void **state)
{
        json_t *r = managed_result(23.11, "round_robin", 0), *s = suite_summary("pipeline", r);

        assert_true(json_is_null(json_object_get(s, "prefetch_alone_ms")));
        assert_non_null(strstr(conclusion(s), "over the 1.10x goal: this run has no "
                                              "managed_prefetch_alone to say what stops it."));
        json_decref(s), json_decref(r);
}

static void test_pipeline_managed_host_write_over_the_goal_is_what_stops_it(void **state)
{
        json_t *r = written_result(100), *s = suite_summary("pipeline", r);
        const json_t *dp =
            json_array_find(json_object_get(r, "measurements"), "name", "managed_discard_prefetch");

        /* discard-and-prefetch, the better of the two, past the goal by its write */
        json_object_set_new((json_t *)json_object_get(dp, "stats"), "median_ms", json_real(120));
        json_object_set_new((json_t *)dp, "host_write_ms", json_real(118));
        json_decref(s);
        s = suite_summary("pipeline", r);
        assert_non_null(strstr(conclusion(s), "(managed_discard_prefetch) takes 1.20x the limit, "
                                              "over the 1.10x goal: the host's write into managed "
                                              "memory takes 118.00 ms (1.18x the limit, its CPU "
                                              "faults included), so the write, not the prefetch, "
                                              "stops it."));
        json_decref(s), json_decref(r);
}

static void test_pipeline_without_serial_claims_no_speedup(void **state)
{
        json_t *r = managed_result(21.00, "round_robin", 20.50), *s = suite_summary("pipeline", r);

        assert_non_null(strstr(conclusion(s), "Overlapped pinned copies take 1.07x the limit."));
        assert_null(strstr(conclusion(s), "faster than copy then kernel"));
        json_decref(s), json_decref(r);
}

static void test_copy_overlap_short_kernel_says_so_with_both_times(void **state)
{
        json_t *r = json_pack("{s:[o, o, o, o]}", "measurements", pm("copy_alone", 19.3, 0, 0),
                              pm("kernel_alone", 1.0, 0, 0), pm("serial", 20.3, 0, 0),
                              pm("overlapped", 19.6, 0, 0));
        json_t *s = suite_summary("copy_overlap", r);
        const char *note = json_string_value(json_object_get(s, "note"));

        assert_non_null(note);
        assert_non_null(
            strstr(note, "the kernel (1.00 ms) is too short to hide the copy (19.30 ms)"));
        assert_non_null(strstr(json_string_value(json_object_get(s, "conclusion")), "19.60 ms"));
        json_decref(s), json_decref(r);
}

static void test_copy_overlap_long_kernel_is_ranked_against_the_limit(void **state)
{
        json_t *r = json_pack("{s:[o, o, o, o]}", "measurements", pm("copy_alone", 20, 0, 0),
                              pm("kernel_alone", 20, 0, 0), pm("serial", 40, 0, 0),
                              pm("overlapped", 21, 0, 0));
        json_t *s = suite_summary("copy_overlap", r);

        assert_null(json_object_get(s, "note"));
        assert_true(fabs(numf(s, "speedup_vs_serial") - 40.0 / 21) < 1e-9);
        json_decref(s), json_decref(r);
}

/* One sweep point's measurements, named "strategy@i=K". */
static void sweep_point(json_t *ms, int k, double copy, double kern, double serial, double over,
                        double od)
{
        const char *names[] = {"copy_alone", "kernel_alone", "pinned_serial", "pinned_overlapped",
                               "managed_on_demand"};
        double v[] = {copy, kern, serial, over, od};
        for (size_t i = 0; i < 5; i++) {
                char n[64];
                snprintf(n, sizeof(n), "%s@i=%d", names[i], k);
                json_t *m = pm(n, v[i], v[i], v[i]);
                json_object_set_new(m, "intensity", json_integer(k));
                json_array_append_new(ms, m);
        }
}

static void touched_point(json_t *ms, long long t, double serial, double od)
{
        char n[64];
        snprintf(n, sizeof(n), "pinned_serial@t=%lld", t);
        json_t *a = pm(n, serial, serial, serial);
        snprintf(n, sizeof(n), "managed_on_demand@t=%lld", t);
        json_t *b = pm(n, od, od, od);
        json_object_set_new(a, "touched_bytes", json_integer(t));
        json_object_set_new(b, "touched_bytes", json_integer(t));
        json_object_set_new(a, "sweep", json_string("touched"));
        json_object_set_new(b, "sweep", json_string("touched"));
        json_array_append_new(ms, a);
        json_array_append_new(ms, b);
}

static json_t *sweep_result(void)
{
        json_t *ms = json_array();
        sweep_point(ms, 64, 20, 21, 41, 21.5, 150); /* the balanced point, run first */
        sweep_point(ms, 2, 20, 0.5, 20.5, 20.2, 128);
        sweep_point(ms, 8, 20, 2, 22, 20.3, 130);
        sweep_point(ms, 256, 20, 84, 104, 85, 215);
        touched_point(ms, 1 << 20, 20, 0.2);
        touched_point(ms, 16 << 20, 20, 2.5);
        touched_point(ms, 256 << 20, 20, 33);
        touched_point(ms, 1 << 30, 20, 130);
        return json_pack("{s:{s:i}, s:o}", "balanced", "chosen", 64, "measurements", ms);
}

static const json_t *curve(const json_t *s, const char *name)
{
        return json_array_find(json_object_get(s, "curves"), "strategy", name);
}

static void test_sweep_within_10pct_of_the_limit_or_never(void **state)
{
        json_t *r = sweep_result(), *s = suite_summary("pipeline_sweep", r);
        const json_t *ov = curve(s, "pinned_overlapped"), *se = curve(s, "pinned_serial"),
                     *od = curve(s, "managed_on_demand");

        assert_non_null(ov);
        /* points sorted by intensity: 2, 8, 64, 256 */
        assert_int_equal(json_array_size(json_object_get(ov, "points")), 4);
        assert_int_equal(json_integer_value(json_object_get(
                             json_array_get(json_object_get(ov, "points"), 0), "intensity")),
                         2);
        assert_int_equal(json_integer_value(json_object_get(ov, "within_10pct_from")), 2);
        /* serial: 20.5/20 at 2 is within 10% (the kernel hides nothing there) */
        assert_int_equal(json_integer_value(json_object_get(se, "within_10pct_from")), 2);
        assert_string_equal(json_string_value(json_object_get(od, "within_10pct_from")), "never");
        json_decref(s), json_decref(r);
}

static void test_sweep_sentence_names_the_touched_fraction_where_um_wins(void **state)
{
        json_t *r = sweep_result(), *s = suite_summary("pipeline_sweep", r);
        const char *c = json_string_value(json_object_get(s, "conclusion"));
        const json_t *t = json_object_get(s, "touched");

        assert_non_null(c);
        assert_non_null(strstr(c, "With a kernel as long as the copy (64 FMAs a float"));
        assert_non_null(strstr(c, "1.02x the limit"));
        /* on demand wins at 1/1024 and 1/64 of the batch, loses from 1/4 */
        assert_true(fabs(numf(t, "um_wins_up_to_fraction") - 1.0 / 64) < 1e-9);
        assert_true(fabs(numf(t, "um_loses_from_fraction") - 0.25) < 1e-9);
        /* linear between them: -17.5 ms at 1/64, +13 ms at 1/4 -> 0 at 0.150 */
        assert_true(fabs(numf(t, "um_wins_below_fraction") -
                         (1.0 / 64 + (0.25 - 1.0 / 64) * 17.5 / 30.5)) < 1e-9);
        assert_non_null(strstr(c, "UM wins below about 15% of the buffer touched on this GPU"));
        json_decref(s), json_decref(r);
}

static void test_um_overlap_note_gives_both_times_when_the_kernel_is_short(void **state)
{
        json_t *r = um_result();
        json_t *ov = json_array_get(json_object_get(r, "measurements"), 1);
        json_object_set_new(ov, "copy_alone_ms", json_real(19.3));
        json_object_set_new(ov, "kernel_alone_ms", json_real(0.7));
        json_t *s = suite_summary("um_vs_explicit", r);
        const char *n = json_string_value(json_object_get(s, "overlap_note"));

        assert_non_null(n);
        assert_non_null(strstr(n, "the kernel (0.70 ms) is too short to hide the copy (19.30 ms)"));
        json_decref(s);
        /* a kernel as long as the copy: no note */
        json_object_set_new(ov, "kernel_alone_ms", json_real(19.3));
        s = suite_summary("um_vs_explicit", r);
        assert_null(json_object_get(s, "overlap_note"));
        json_decref(s), json_decref(r);
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
            cmocka_unit_test(test_um_overlap_note_gives_both_times_when_the_kernel_is_short),
            cmocka_unit_test(test_pipeline_ratio_is_to_the_longer_of_copy_and_kernel),
            cmocka_unit_test(test_pipeline_first_step_apart_only_where_it_differs),
            cmocka_unit_test(test_pipeline_host_write_longer_than_both_halves_is_the_limit),
            cmocka_unit_test(test_pipeline_host_write_within_the_limit_leaves_it_alone),
            cmocka_unit_test(test_pipeline_prepared_says_nothing_of_a_write),
            cmocka_unit_test(test_pipeline_managed_over_the_goal_is_bound_by_the_prefetch_rate),
            cmocka_unit_test(test_pipeline_managed_copy_stream_says_the_prefetches_wait_in_turn),
            cmocka_unit_test(test_pipeline_managed_within_the_goal_says_nothing_of_it),
            cmocka_unit_test(
                test_pipeline_managed_over_the_goal_without_the_prefetch_alone_says_so),
            cmocka_unit_test(test_pipeline_managed_host_write_over_the_goal_is_what_stops_it),
            cmocka_unit_test(test_pipeline_without_serial_claims_no_speedup),
            cmocka_unit_test(test_copy_overlap_short_kernel_says_so_with_both_times),
            cmocka_unit_test(test_copy_overlap_long_kernel_is_ranked_against_the_limit),
            cmocka_unit_test(test_sweep_within_10pct_of_the_limit_or_never),
            cmocka_unit_test(test_sweep_sentence_names_the_touched_fraction_where_um_wins),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
