/* health.c: verdicts against the link's rate, the link's maximum, and the GPU's own baseline,
 * that baseline (and the GPU pairs') from past parts;
 * the GPU pairs' verdicts and topology.c's expected link rates and matrices. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "health.h"
#include "jsonutil.h"
#include "pcie.h"
#include "topology.h"

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

/* A health result with device memory (d2d) at d2d GB/s; d2d < 0: not measured. */
static json_t *result_d2d(double h2d, double d2h, double pageable, double prefetch, double d2d)
{
        json_t *r = json_pack("{s:s, s:[{s:s, s:f}, {s:s, s:f}, {s:s, s:f}, {s:s, s:f}]}",
                              "benchmark", "health", "measurements", "name", "pinned_h2d", "gbps",
                              h2d, "name", "pinned_d2h", "gbps", d2h, "name", "pageable_h2d",
                              "gbps", pageable, "name", "managed_prefetch", "gbps", prefetch);
        if (d2d >= 0)
                json_array_append_new(json_object_get(r, "measurements"),
                                      json_pack("{s:s, s:f}", "name", "d2d", "gbps", d2d));
        return r;
}

/* An H200's figures, d2d as the copy engine measured it (4.06 TB/s at 512 MiB). */
static json_t *result(double h2d, double d2h, double pageable, double prefetch)
{
        return result_d2d(h2d, d2h, pageable, prefetch, 4060);
}

/* models.h's expectation of a GPU, written out: the test needs only health.c. */
static json_t *expect_model(const char *name, int gen, int width, double memory, double nvlink)
{
        return json_pack("{s:s, s:{s:s, s:i, s:i, s:f, s:f, s:s, s:s}}", "device_name", name,
                         "model", "name", name, "pcie_gen", gen, "pcie_width", width, "memory_gbps",
                         memory, "nvlink_gbps", nvlink, "source", "a vendor datasheet", "from",
                         "shipped");
}

static const json_t *check_named(const json_t *v, const char *name)
{
        return json_array_find(json_object_get(v, "checks"), "name", name);
}

static const char *check_field(const json_t *v, const char *name, const char *field)
{
        return json_string_value(json_object_get(check_named(v, name), field));
}

static json_t *link(int cg, int cw, int mg, int mw)
{
        return json_pack("{s:i, s:i, s:i, s:i}", "current_gen", cg, "current_width", cw, "max_gen",
                         mg, "max_width", mw);
}

static const char *verdict_of(json_t *v)
{
        return json_string_value(json_object_get(v, "verdict"));
}

static void test_h200_figures_pass(void **state)
{
        json_t *r = result(55.5, 55.3, 9.3, 48.0), *l = link(5, 16, 5, 16);
        json_t *v = health_verdict(&cfg, r, l, NULL, NULL, 0);
        assert_string_equal(verdict_of(v), "pass");
        assert_int_equal(json_array_size(json_object_get(v, "reasons")), 0);
        json_decref(v), json_decref(r), json_decref(l);
}

static void test_link_below_its_maximum_warns(void **state)
{
        json_t *r = result(27.0, 27.0, 9.3, 25.0), *l = link(4, 16, 5, 16);
        json_t *v = health_verdict(&cfg, r, l, NULL, NULL, 0);
        assert_string_equal(verdict_of(v), "warn");
        const char *why = json_string_value(json_array_get(json_object_get(v, "reasons"), 0));
        assert_non_null(strstr(why, "Gen4 x16, below its maximum Gen5 x16"));
        json_decref(v), json_decref(r), json_decref(l);
}

static void test_pinned_bandwidth_far_below_link_fails(void **state)
{
        json_t *r = result(20.0, 55.0, 9.3, 48.0), *l = link(5, 16, 5, 16);
        json_t *v = health_verdict(&cfg, r, l, NULL, NULL, 0);
        assert_string_equal(verdict_of(v), "fail");
        json_decref(v), json_decref(r), json_decref(l);
}

static void test_pinned_bandwidth_somewhat_below_link_warns(void **state)
{
        json_t *r = result(38.0, 55.0, 9.3, 48.0), *l = link(5, 16, 5, 16);
        json_t *v = health_verdict(&cfg, r, l, NULL, NULL, 0);
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
        json_t *v = health_verdict(&cfg, r, l, NULL, b, 5);
        assert_string_equal(verdict_of(v), "fail");
        const char *why = json_string_value(json_array_get(json_object_get(v, "reasons"), 0));
        assert_non_null(strstr(why, "pinned_h2d"));
        assert_non_null(strstr(why, "baseline"));
        json_decref(v), json_decref(r), json_decref(l), json_decref(b);
}

static void test_pageable_drop_below_own_baseline_only_warns(void **state)
{
        json_t *r = result(55.0, 55.0, 6.0, 48.0), *l = link(5, 16, 5, 16), *b = h200_baseline();
        json_t *v = health_verdict(&cfg, r, l, NULL, b, 5);
        assert_string_equal(verdict_of(v), "warn");
        const char *why = json_string_value(json_array_get(json_object_get(v, "reasons"), 0));
        assert_non_null(strstr(why, "pageable_h2d"));
        json_decref(v), json_decref(r), json_decref(l), json_decref(b);
}

static void test_pageable_swing_within_host_tolerance_passes(void **state)
{
        /* -20%: beyond the pinned tolerance (15%), within the host one (30%) */
        json_t *r = result(55.0, 55.0, 7.44, 48.0), *l = link(5, 16, 5, 16), *b = h200_baseline();
        json_t *v = health_verdict(&cfg, r, l, NULL, b, 5);
        assert_string_equal(verdict_of(v), "pass");
        json_decref(v), json_decref(r), json_decref(l), json_decref(b);
}

static void test_baseline_of_too_few_runs_is_not_judged(void **state)
{
        json_t *r = result(46.0, 55.0, 6.0, 48.0), *l = link(5, 16, 5, 16), *b = h200_baseline();
        json_t *v = health_verdict(&cfg, r, l, NULL, b, cfg.health_baseline_min_runs - 1);
        assert_string_equal(verdict_of(v), "pass");
        json_decref(v), json_decref(r), json_decref(l), json_decref(b);
}

static void test_small_wobble_around_baseline_passes(void **state)
{
        json_t *r = result(54.0, 54.5, 9.0, 47.0), *l = link(5, 16, 5, 16);
        json_t *b = json_pack("{s:f, s:f, s:f, s:f}", "pinned_h2d", 55.4, "pinned_d2h", 55.2,
                              "pageable_h2d", 9.3, "managed_prefetch", 48.1);
        json_t *v = health_verdict(&cfg, r, l, NULL, b, 5);
        assert_string_equal(verdict_of(v), "pass");
        json_decref(v), json_decref(r), json_decref(l), json_decref(b);
}

static void test_unreadable_link_warns_and_says_so(void **state)
{
        json_t *r = result(55.0, 55.0, 9.0, 47.0);
        json_t *v = health_verdict(&cfg, r, NULL, NULL, NULL, 0);
        assert_string_equal(verdict_of(v), "warn");
        json_decref(v), json_decref(r);
}

/* Two H200s joined by NV18 (what the nvidia-h200-x2 machine reports), one pair's link given. */
static json_t *pair_result(const char *type, int links, double g01, double g10)
{
        return json_pack("{s:[{s:i, s:s, s:{s:i, s:i}}, {s:i, s:s, s:{s:i, s:i}}],"
                         " s:[{s:i, s:i, s:s, s:i}, {s:i, s:i, s:s, s:i}],"
                         " s:[{s:s, s:i, s:i, s:s, s:s, s:f}, {s:s, s:i, s:i, s:s, s:s, s:f}]}",
                         "devices", "index", 0, "compute_capability", "9.0", "pcie", "current_gen",
                         5, "current_width", 16, "index", 1, "compute_capability", "9.0", "pcie",
                         "current_gen", 5, "current_width", 16, "links", "src", 0, "dst", 1, "type",
                         type, "nvlink_links", links, "src", 1, "dst", 0, "type", type,
                         "nvlink_links", links, "measurements", "name", "ce_uni@0>1", "src", 0,
                         "dst", 1, "method", "ce", "direction", "uni", "gbps", g01, "name",
                         "ce_uni@1>0", "src", 1, "dst", 0, "method", "ce", "direction", "uni",
                         "gbps", g10);
}

static void test_link_expected_rates(void **state)
{
        json_t *r = pair_result("nvlink", 18, 393, 393);
        const json_t *devs = json_object_get(r, "devices");
        json_t *pcie = json_pack("{s:i, s:i, s:s}", "src", 0, "dst", 1, "type", "pcie");
        json_t *b200 = json_pack("[{s:i, s:s}]", "index", 0, "compute_capability", "10.0");
        json_t *nv18 = json_pack("{s:i, s:i, s:s, s:i}", "src", 0, "dst", 1, "type", "nvlink",
                                 "nvlink_links", 18);
        char buf[32];

        assert_true(fabs(topology_link_expected_gbps(topology_link(r, 0, 1), devs) - 450) < 1e-9);
        assert_true(fabs(topology_link_expected_gbps(pcie, devs) - pcie_link_gbps(5, 16)) < 1e-9);
        assert_true(fabs(topology_link_expected_gbps(nv18, b200) - 900) < 1e-9);
        assert_string_equal(topology_link_label(nv18, buf, sizeof(buf)), "NV18");
        json_decref(r);
        json_decref(pcie);
        json_decref(b200);
        json_decref(nv18);
}

static void test_peer_matrices_and_the_slowest_pair(void **state)
{
        json_t *r = pair_result("nvlink", 18, 393.5, 380.0);
        json_t *s = topology_summary("peer", r);
        const json_t *m = json_array_get(json_object_get(s, "matrices"), 0);
        const json_t *g = json_object_get(m, "gbps");

        assert_string_equal(json_string_value(json_object_get(m, "name")), "ce_uni");
        assert_true(json_is_null(json_array_get(json_array_get(g, 0), 0)));
        assert_true(fabs(json_real_value(json_array_get(json_array_get(g, 1), 0)) - 380) < 1e-9);
        assert_string_equal(
            json_string_value(json_array_get(json_array_get(json_object_get(s, "links"), 0), 1)),
            "NV18");
        assert_string_equal(json_string_value(json_object_get(s, "conclusion")),
                            "The slowest pair is GPU 1 -> GPU 0 at 380.0 GB/s (copy engine, one "
                            "direction): 84% of the 450 GB/s its link (NV18) should carry.");
        json_decref(s);
        json_decref(r);
}

static void test_pairs_on_nvlink_pass(void **state)
{
        json_t *r = pair_result("nvlink", 18, 393, 393);
        json_t *v = health_pair_verdict(&cfg, r, NULL, NULL, 0);

        assert_string_equal(json_string_value(json_object_get(v, "verdict")), "pass");
        assert_int_equal(json_integer_value(json_object_get(v, "pairs")), 2);
        json_decref(v);
        json_decref(r);
}

static void test_a_pair_through_the_host_fails(void **state)
{
        json_t *r = pair_result("host", 0, 24, 24);
        json_t *v = health_pair_verdict(&cfg, r, NULL, NULL, 0);

        assert_string_equal(json_string_value(json_object_get(v, "verdict")), "fail");
        assert_non_null(strstr(json_string_value(json_array_get(json_object_get(v, "reasons"), 0)),
                               "no peer access: its copies go through host memory"));
        json_decref(v);
        json_decref(r);
}

static void test_a_pair_below_its_baseline_or_on_another_link_fails(void **state)
{
        json_t *r = pair_result("nvlink", 18, 300, 393);
        json_t *b =
            json_pack("{s:{s:f, s:f}, s:{s:s, s:s}}", "gbps", "ce_uni@0>1", 393.0, "ce_uni@1>0",
                      393.0, "links", "ce_uni@0>1", "NV18", "ce_uni@1>0", "NV12");
        json_t *v = health_pair_verdict(&cfg, r, NULL, b, 5);
        const json_t *reasons = json_object_get(v, "reasons");

        /* 300 GB/s is 67% of NV18: a warning against the link, a failure against its past. */
        assert_string_equal(json_string_value(json_object_get(v, "verdict")), "fail");
        assert_int_equal(json_array_size(reasons), 3);
        assert_non_null(strstr(json_string_value(json_array_get(reasons, 1)), "baseline"));
        assert_non_null(strstr(json_string_value(json_array_get(reasons, 2)),
                               "the link is NV18 now, NV12 in past passing checks"));
        json_decref(v);
        json_decref(b);
        json_decref(r);
}

/* ---- baselines from past parts (health_baseline, health_pair_baseline) ---- */

/* A stored part as job_doc_health_parts returns it: {"result": {measurements}}. */
static json_t *past_part(double h2d, double d2h)
{
        return json_pack("{s:o}", "result", result(h2d, d2h, 9.3, 48.0));
}

static double baseline_of(const json_t *b, const char *mode)
{
        return json_number_value(json_object_get(b, mode));
}

static void test_baseline_without_past_parts_is_empty(void **state)
{
        size_t runs = 99;
        json_t *b = health_baseline(&cfg, NULL, &runs);

        assert_int_equal(json_object_size(b), 0);
        assert_int_equal(runs, 0);
        json_decref(b);
}

static void test_baseline_is_the_median_of_an_odd_count(void **state)
{
        json_t *parts =
            json_pack("[o, o, o]", past_part(50, 40), past_part(56, 41), past_part(53, 42));
        size_t runs = 0;
        json_t *b = health_baseline(&cfg, parts, &runs);

        assert_int_equal(runs, 3);
        assert_true(fabs(baseline_of(b, "pinned_h2d") - 53) < 1e-9);
        assert_true(fabs(baseline_of(b, "pinned_d2h") - 41) < 1e-9);
        json_decref(b), json_decref(parts);
}

static void test_baseline_of_an_even_count_averages_the_middle_two(void **state)
{
        json_t *parts = json_pack("[o, o]", past_part(50, 40), past_part(54, 40));
        size_t runs = 0;
        json_t *b = health_baseline(&cfg, parts, &runs);

        assert_true(fabs(baseline_of(b, "pinned_h2d") - 52) < 1e-9);
        json_decref(b), json_decref(parts);
}

static void test_baseline_counts_only_the_newest_baseline_runs(void **state)
{
        unsigned keep = cfg.health_baseline_runs;
        json_t *parts =
            json_pack("[o, o, o]", past_part(10, 10), past_part(20, 20), past_part(90, 90));
        size_t runs = 0;

        cfg.health_baseline_runs = 2; /* the oldest part (90) falls out */
        json_t *b = health_baseline(&cfg, parts, &runs);
        assert_int_equal(runs, 2);
        assert_true(fabs(baseline_of(b, "pinned_h2d") - 15) < 1e-9);
        cfg.health_baseline_runs = keep;
        json_decref(b), json_decref(parts);
}

static void test_baseline_leaves_out_modes_health_does_not_judge(void **state)
{
        json_t *parts =
            json_pack("[{s:{s:[{s:s, s:f}, {s:s, s:f}]}}]", "result", "measurements", "name",
                      "pinned_h2d", "gbps", 50.0, "name", "zero_copy_kernel", "gbps", 80.0);
        size_t runs = 0;
        json_t *b = health_baseline(&cfg, parts, &runs);

        assert_int_equal(json_object_size(b), 1);
        assert_null(json_object_get(b, "zero_copy_kernel"));
        assert_null(json_object_get(b, "pinned_d2h"));
        json_decref(b), json_decref(parts);
}

static void test_pair_baseline_takes_medians_and_the_newest_link(void **state)
{
        json_t *parts = json_pack(
            "[{s:o}, {s:o}, {s:o}]", "result", pair_result("nvlink", 18, 390, 380), "result",
            pair_result("nvlink", 12, 396, 382), "result", pair_result("nvlink", 12, 393, 384));
        size_t runs = 0;
        json_t *b = health_pair_baseline(&cfg, parts, &runs);
        const json_t *gbps = json_object_get(b, "gbps"), *links = json_object_get(b, "links");

        assert_int_equal(runs, 3);
        assert_true(fabs(json_number_value(json_object_get(gbps, "ce_uni@0>1")) - 393) < 1e-9);
        assert_true(fabs(json_number_value(json_object_get(gbps, "ce_uni@1>0")) - 382) < 1e-9);
        assert_string_equal(json_string_value(json_object_get(links, "ce_uni@0>1")), "NV18");
        json_decref(b), json_decref(parts);
}

static void test_pair_baseline_without_past_parts_judges_nothing(void **state)
{
        size_t runs = 99;
        json_t *b = health_pair_baseline(&cfg, NULL, &runs);

        assert_int_equal(runs, 0);
        assert_int_equal(json_object_size(json_object_get(b, "gbps")), 0);
        assert_int_equal(json_object_size(json_object_get(b, "links")), 0);
        json_decref(b);
}

static void test_h200_device_memory_at_its_model_passes(void **state)
{
        json_t *r = result(55.5, 55.3, 9.3, 48.0), *l = link(5, 16, 5, 16);
        json_t *e = expect_model("NVIDIA H200", 5, 16, 4800, 25);
        json_t *v = health_verdict(&cfg, r, l, e, NULL, 0);
        assert_string_equal(verdict_of(v), "pass");
        assert_string_equal(check_field(v, "d2d_vs_model", "verdict"), "pass");
        assert_string_equal(check_field(v, "d2d_vs_model", "expectation"), "model");
        assert_non_null(strstr(check_field(v, "d2d_vs_model", "reason"), "85% of the 4800 GB/s"));
        assert_non_null(json_object_get(v, "expectation"));
        json_decref(v), json_decref(r), json_decref(l), json_decref(e);
}

static void test_device_memory_below_model_warn_fraction_warns(void **state)
{
        json_t *r = result_d2d(55.5, 55.3, 9.3, 48.0, 3000), *l = link(5, 16, 5, 16);
        json_t *e = expect_model("NVIDIA H200", 5, 16, 4800, 25);
        json_t *v = health_verdict(&cfg, r, l, e, NULL, 0);
        assert_string_equal(verdict_of(v), "warn");
        const char *why = json_string_value(json_array_get(json_object_get(v, "reasons"), 0));
        assert_non_null(strstr(why, "62% of the 4800 GB/s nominal memory bandwidth of the "
                                    "NVIDIA H200 (warn below 70%, fail below 50%)"));
        json_decref(v), json_decref(r), json_decref(l), json_decref(e);
}

static void test_device_memory_far_below_model_fails(void **state)
{
        json_t *r = result_d2d(55.5, 55.3, 9.3, 48.0, 2000), *l = link(5, 16, 5, 16);
        json_t *e = expect_model("NVIDIA H200", 5, 16, 4800, 25);
        json_t *v = health_verdict(&cfg, r, l, e, NULL, 0);
        assert_string_equal(verdict_of(v), "fail");
        assert_string_equal(check_field(v, "d2d_vs_model", "verdict"), "fail");
        json_decref(v), json_decref(r), json_decref(l), json_decref(e);
}

static void test_memory_fractions_come_from_the_configuration(void **state)
{
        json_t *r = result_d2d(55.5, 55.3, 9.3, 48.0, 3000), *l = link(5, 16, 5, 16);
        json_t *e = expect_model("NVIDIA H200", 5, 16, 4800, 25);
        cfg.health_memory_warn_fraction = 0.60;
        json_t *v = health_verdict(&cfg, r, l, e, NULL, 0);
        assert_string_equal(verdict_of(v), "pass");
        cfg.health_memory_warn_fraction = 0.95;
        cfg.health_memory_fail_fraction = 0.90;
        json_t *v2 = health_verdict(&cfg, r, l, e, NULL, 0);
        assert_string_equal(verdict_of(v2), "fail");
        config_free(&cfg);
        config_init(&cfg);
        json_decref(v), json_decref(v2), json_decref(r), json_decref(l), json_decref(e);
}

static void test_device_memory_not_measured_fails(void **state)
{
        json_t *r = result_d2d(55.5, 55.3, 9.3, 48.0, -1), *l = link(5, 16, 5, 16);
        json_t *v = health_verdict(&cfg, r, l, NULL, NULL, 0);
        assert_string_equal(verdict_of(v), "fail");
        assert_string_equal(check_field(v, "d2d", "reason"),
                            "d2d (device memory) was not measured");
        json_decref(v), json_decref(r), json_decref(l);
}

static void test_unknown_model_says_so_and_is_not_judged_by_it(void **state)
{
        json_t *r = result_d2d(55.5, 55.3, 9.3, 48.0, 100), *l = link(5, 16, 5, 16);
        json_t *e = json_pack("{s:s, s:n}", "device_name", "NVIDIA Z999 (fake)", "model");
        json_t *v = health_verdict(&cfg, r, l, e, NULL, 0);
        assert_string_equal(verdict_of(v), "pass");
        assert_string_equal(check_field(v, "model", "expectation"), "none");
        assert_non_null(
            strstr(check_field(v, "model", "reason"), "unknown GPU model 'NVIDIA Z999 (fake)'"));
        assert_string_equal(check_field(v, "d2d_vs_model", "expectation"), "none");
        json_decref(v), json_decref(r), json_decref(l), json_decref(e);
}

static void test_device_memory_drop_below_own_baseline_fails(void **state)
{
        json_t *r = result_d2d(55.5, 55.3, 9.3, 48.0, 3300), *l = link(5, 16, 5, 16);
        json_t *b = json_pack("{s:f, s:f, s:f, s:f, s:f}", "pinned_h2d", 55.4, "pinned_d2h", 55.2,
                              "pageable_h2d", 9.3, "managed_prefetch", 48.1, "d2d", 4060.0);
        json_t *v = health_verdict(&cfg, r, l, NULL, b, 5);
        assert_string_equal(verdict_of(v), "fail");
        assert_string_equal(check_field(v, "d2d_vs_baseline", "verdict"), "fail");
        assert_string_equal(check_field(v, "d2d_vs_baseline", "expectation"), "baseline");
        json_decref(v), json_decref(r), json_decref(l), json_decref(b);
}

static void test_link_below_its_model_warns_naming_the_model(void **state)
{
        /* A Gen5 GPU that reads its own maximum as Gen4 x16 (so the link check passes). A link
         * trained below a maximum that is the model's is the link check's alone. */
        json_t *r = result(27.0, 27.0, 9.3, 25.0), *l = link(4, 16, 4, 16);
        json_t *e = expect_model("NVIDIA H100 SXM", 5, 16, 3350, 25);
        json_t *v = health_verdict(&cfg, r, l, e, NULL, 0);
        assert_string_equal(check_field(v, "link", "verdict"), "pass");
        assert_string_equal(check_field(v, "link_vs_model", "verdict"), "warn");
        json_t *l2 = link(4, 16, 5, 16), *v2 = health_verdict(&cfg, r, l2, e, NULL, 0);
        assert_string_equal(check_field(v2, "link_vs_model", "verdict"), "pass");
        assert_int_equal(json_array_size(json_object_get(v2, "reasons")), 1);
        json_decref(v2), json_decref(l2);
        assert_non_null(strstr(check_field(v, "link_vs_model", "reason"),
                               "can reach Gen4 x16, below the Gen5 x16 of the NVIDIA H100 SXM"));
        json_decref(v), json_decref(r), json_decref(l), json_decref(e);
}

static void test_pairs_use_the_model_rate_a_link_and_say_so(void **state)
{
        /* NV18 at 393 GB/s: 87% of an H200's 450, but 44% of a B200's 900 (warn). */
        json_t *r = pair_result("nvlink", 18, 393, 393);
        json_t *e = json_pack("[o, o]", expect_model("NVIDIA B200", 5, 16, 8000, 50),
                              expect_model("NVIDIA B200", 5, 16, 8000, 50));
        json_t *v = health_pair_verdict(&cfg, r, e, NULL, 0);
        assert_string_equal(verdict_of(v), "warn");
        assert_string_equal(check_field(v, "peer 0->1", "expectation"), "model");
        assert_non_null(strstr(check_field(v, "peer 0->1", "reason"),
                               "44% of the 900 GB/s its link (NV18; 18 links x 50 GB/s, the "
                               "NVIDIA B200's rate)"));
        json_t *v2 = health_pair_verdict(&cfg, r, NULL, NULL, 0);
        assert_string_equal(verdict_of(v2), "pass");
        assert_non_null(strstr(check_field(v2, "peer 0->1", "reason"), "by compute capability"));
        json_decref(v), json_decref(v2), json_decref(r), json_decref(e);
}

/* ---- the extended tier ---- */

static void add_meas(json_t *r, const char *name, double gbps)
{
        json_array_append_new(json_object_get(r, "measurements"),
                              json_pack("{s:s, s:f}", "name", name, "gbps", gbps));
}

/* A knee point: "knee@SIZE" with its size. */
static void add_knee(json_t *r, const char *knee, long long size, double gbps)
{
        char name[64];
        snprintf(name, sizeof(name), "%s@%lld", knee, size);
        json_array_append_new(
            json_object_get(r, "measurements"),
            json_pack("{s:s, s:f, s:I}", "name", name, "gbps", gbps, "size", (json_int_t)size));
}

/* An extended result of an H200's figures with plan skipped (a JSON array, stolen) */
static json_t *extended(json_t *skipped)
{
        json_t *r = result(55.5, 55.3, 9.3, 48.0);
        json_object_set_new(r, "tier", json_string("extended"));
        json_object_set_new(r, "plan",
                            json_pack("{s:I, s:f, s:[s], s:o}", "budget_ms", (json_int_t)20000,
                                      "estimated_ms", 350.0, "ran", "bidirectional copies",
                                      "skipped", skipped));
        return r;
}

static void test_a_verdict_says_the_quick_tier_made_it(void **state)
{
        json_t *r = result(55.5, 55.3, 9.3, 48.0), *l = link(5, 16, 5, 16);
        json_t *v = health_verdict(&cfg, r, l, NULL, NULL, 0);
        assert_string_equal(json_string_value(json_object_get(v, "tier")), "quick");
        assert_null(json_object_get(v, "skipped"));
        json_decref(v), json_decref(r), json_decref(l);
}

static void test_a_knee_is_the_smallest_size_at_90_percent_of_the_peak(void **state)
{
        json_t *r = extended(json_array()), *l = link(5, 16, 5, 16);
        add_knee(r, "knee_pinned_h2d", 65536, 20.0);
        add_knee(r, "knee_pinned_h2d", 1048576, 48.0);
        add_knee(r, "knee_pinned_h2d", 4194304, 52.0);
        add_knee(r, "knee_pinned_h2d", 16777216, 55.0);
        json_t *v = health_verdict(&cfg, r, l, NULL, NULL, 0);
        assert_string_equal(check_field(v, "pinned_h2d_90pct_size", "verdict"), "pass");
        assert_non_null(strstr(check_field(v, "pinned_h2d_90pct_size", "reason"),
                               "reaches 90% of its 55.0 GB/s peak at 4 MiB (swept 64 KiB to "
                               "16 MiB in 4 sizes)"));
        assert_string_equal(json_string_value(json_object_get(v, "tier")), "extended");
        json_decref(v), json_decref(r), json_decref(l);
}

static void test_a_path_reaching_90_percent_only_at_its_largest_size_warns(void **state)
{
        json_t *r = extended(json_array()), *l = link(5, 16, 5, 16);
        add_knee(r, "knee_d2d", 65536, 100.0);
        add_knee(r, "knee_d2d", 262144, 400.0);
        add_knee(r, "knee_d2d", 1048576, 4000.0);
        json_t *v = health_verdict(&cfg, r, l, NULL, NULL, 0);
        assert_string_equal(verdict_of(v), "warn");
        assert_string_equal(check_field(v, "d2d_90pct_size", "verdict"), "warn");
        assert_non_null(strstr(check_field(v, "d2d_90pct_size", "reason"), "never levels off"));
        json_decref(v), json_decref(r), json_decref(l);
}

static void test_bidirectional_copies_no_faster_than_one_way_fail(void **state)
{
        json_t *r = extended(json_array()), *l = link(5, 16, 5, 16);
        add_meas(r, "bidir", 40.0); /* slower than one direction alone: 36% of the sum */
        json_t *v = health_verdict(&cfg, r, l, NULL, NULL, 0);
        assert_string_equal(check_field(v, "bidir_vs_one_way", "verdict"), "fail");
        assert_non_null(
            strstr(check_field(v, "bidir_vs_one_way", "reason"), "of the two directions alone"));
        json_decref(v), json_decref(r), json_decref(l);
}

static void test_bidirectional_copies_at_a_healthy_h200s_rate_pass(void **state)
{
        json_t *r = extended(json_array()), *l = link(5, 16, 5, 16);
        add_meas(r, "bidir", 80.0); /* 63% of twice the link: what an H200 carries */
        json_t *v = health_verdict(&cfg, r, l, NULL, NULL, 0);
        assert_string_equal(check_field(v, "bidir_vs_one_way", "verdict"), "pass");
        json_decref(v), json_decref(r), json_decref(l);
}

static void test_device_memory_slower_at_full_size_than_at_the_quick_size_fails(void **state)
{
        json_t *r = extended(json_array()), *l = link(5, 16, 5, 16);
        json_t *e = expect_model("NVIDIA H200", 5, 16, 4800, 25);
        add_meas(r, "d2d_full", 3000.0); /* the quick tier's d2d: 4060 */
        json_t *v = health_verdict(&cfg, r, l, e, NULL, 0);
        assert_string_equal(verdict_of(v), "fail");
        assert_string_equal(check_field(v, "d2d_full_vs_d2d", "verdict"), "fail");
        assert_string_equal(check_field(v, "d2d_full_vs_model", "verdict"), "warn");
        assert_string_equal(check_field(v, "d2d_full_vs_model", "expectation"), "model");
        json_decref(v), json_decref(r), json_decref(l), json_decref(e);
}

static void test_pageable_copies_back_far_below_pinned_warn(void **state)
{
        json_t *r = extended(json_array()), *l = link(5, 16, 5, 16);
        add_meas(r, "pageable_d2h", 1.0); /* 2% of pinned D2H */
        json_t *v = health_verdict(&cfg, r, l, NULL, NULL, 0);
        assert_string_equal(verdict_of(v), "warn");
        assert_string_equal(check_field(v, "pageable_d2h_vs_pinned", "verdict"), "warn");
        assert_string_equal(check_field(v, "pageable_h2d_vs_pinned", "verdict"), "pass");
        json_decref(v), json_decref(r), json_decref(l);
}

static void test_a_slow_small_copy_warns_on_latency(void **state)
{
        json_t *r = extended(json_array()), *l = link(5, 16, 5, 16);
        json_array_append_new(
            json_object_get(r, "measurements"),
            json_pack("{s:s, s:f}", "name", "latency_pinned_d2h", "latency_us", 80.0));
        json_array_append_new(
            json_object_get(r, "measurements"),
            json_pack("{s:s, s:f}", "name", "latency_pinned_h2d", "latency_us", 2.2));
        json_t *v = health_verdict(&cfg, r, l, NULL, NULL, 0);
        assert_string_equal(check_field(v, "latency_pinned_d2h", "verdict"), "warn");
        assert_string_equal(check_field(v, "latency_pinned_h2d", "verdict"), "pass");
        assert_non_null(
            strstr(check_field(v, "latency_pinned_d2h", "reason"), "80.0 us (warn above 50 us)"));
        json_decref(v), json_decref(r), json_decref(l);
}

static void test_a_skipped_addition_is_said_and_not_judged(void **state)
{
        json_t *r = extended(json_pack("[{s:s, s:f, s:s}]", "check", "sweep of d2d", "estimate_ms",
                                       900.0, "reason", "skipped: sweep of d2d would take ..."));
        json_t *l = link(5, 16, 5, 16);
        json_t *v = health_verdict(&cfg, r, l, NULL, NULL, 0);
        assert_string_equal(verdict_of(v), "pass");
        assert_int_equal(json_array_size(json_object_get(v, "skipped")), 1);
        assert_string_equal(check_field(v, "skipped: sweep of d2d", "verdict"), "pass");
        assert_null(check_named(v, "d2d_90pct_size"));
        assert_non_null(strstr(check_field(v, "plan", "reason"),
                               "1 addition(s) ran (bidirectional copies) in about 350 ms of its "
                               "20000 ms budget, 1 skipped"));
        json_decref(v), json_decref(r), json_decref(l);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_baseline_without_past_parts_is_empty),
            cmocka_unit_test(test_baseline_is_the_median_of_an_odd_count),
            cmocka_unit_test(test_baseline_of_an_even_count_averages_the_middle_two),
            cmocka_unit_test(test_baseline_counts_only_the_newest_baseline_runs),
            cmocka_unit_test(test_baseline_leaves_out_modes_health_does_not_judge),
            cmocka_unit_test(test_pair_baseline_takes_medians_and_the_newest_link),
            cmocka_unit_test(test_pair_baseline_without_past_parts_judges_nothing),
            cmocka_unit_test(test_link_expected_rates),
            cmocka_unit_test(test_peer_matrices_and_the_slowest_pair),
            cmocka_unit_test(test_pairs_on_nvlink_pass),
            cmocka_unit_test(test_a_pair_through_the_host_fails),
            cmocka_unit_test(test_a_pair_below_its_baseline_or_on_another_link_fails),
            cmocka_unit_test(test_h200_figures_pass),
            cmocka_unit_test(test_a_verdict_says_the_quick_tier_made_it),
            cmocka_unit_test(test_a_knee_is_the_smallest_size_at_90_percent_of_the_peak),
            cmocka_unit_test(test_a_path_reaching_90_percent_only_at_its_largest_size_warns),
            cmocka_unit_test(test_bidirectional_copies_no_faster_than_one_way_fail),
            cmocka_unit_test(test_bidirectional_copies_at_a_healthy_h200s_rate_pass),
            cmocka_unit_test(test_device_memory_slower_at_full_size_than_at_the_quick_size_fails),
            cmocka_unit_test(test_pageable_copies_back_far_below_pinned_warn),
            cmocka_unit_test(test_a_slow_small_copy_warns_on_latency),
            cmocka_unit_test(test_a_skipped_addition_is_said_and_not_judged),
            cmocka_unit_test(test_link_below_its_maximum_warns),
            cmocka_unit_test(test_pinned_bandwidth_far_below_link_fails),
            cmocka_unit_test(test_pinned_bandwidth_somewhat_below_link_warns),
            cmocka_unit_test(test_pinned_drop_below_own_baseline_fails),
            cmocka_unit_test(test_pageable_drop_below_own_baseline_only_warns),
            cmocka_unit_test(test_pageable_swing_within_host_tolerance_passes),
            cmocka_unit_test(test_baseline_of_too_few_runs_is_not_judged),
            cmocka_unit_test(test_small_wobble_around_baseline_passes),
            cmocka_unit_test(test_unreadable_link_warns_and_says_so),
            cmocka_unit_test(test_h200_device_memory_at_its_model_passes),
            cmocka_unit_test(test_device_memory_below_model_warn_fraction_warns),
            cmocka_unit_test(test_device_memory_far_below_model_fails),
            cmocka_unit_test(test_memory_fractions_come_from_the_configuration),
            cmocka_unit_test(test_device_memory_not_measured_fails),
            cmocka_unit_test(test_unknown_model_says_so_and_is_not_judged_by_it),
            cmocka_unit_test(test_device_memory_drop_below_own_baseline_fails),
            cmocka_unit_test(test_link_below_its_model_warns_naming_the_model),
            cmocka_unit_test(test_pairs_use_the_model_rate_a_link_and_say_so),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
