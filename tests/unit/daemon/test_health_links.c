/* health_links.c: the PCIe replay limit by generation and width, replays, NVLink errors and
 * links up judged between two checks, throttle reasons attached to the copies they explain,
 * and the node's GPU count. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "health_links.h"
#include "jsonutil.h"

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

static json_t *empty_verdict(void)
{
        return json_pack("{s:s, s:[], s:[]}", "verdict", "pass", "checks", "reasons");
}

/* Counters as health_links_counters keeps them: replays, links up, one link's crc/replay. */
static json_t *counters(long long t_ms, long long replays, int up, long long crc, long long replay)
{
        return json_pack("{s:I, s:I, s:i, s:[{s:i, s:I, s:I, s:i}]}", "time_ms", (json_int_t)t_ms,
                         "pcie_replays", (json_int_t)replays, "nvlinks_active", up, "nvlink",
                         "link", 3, "crc", (json_int_t)crc, "replay", (json_int_t)replay,
                         "recovery", 0);
}

static json_t *gen5x16(void)
{
        return json_pack("{s:i, s:i}", "current_gen", 5, "current_width", 16);
}

static json_t *model(int nvlinks)
{
        return json_pack("{s:s, s:{s:s, s:i}}", "device_name", "NVIDIA H100 80GB HBM3", "model",
                         "name", "NVIDIA H100 SXM", "nvlinks", nvlinks);
}

static const json_t *check(const json_t *v, const char *name)
{
        return json_array_find(json_object_get(v, "checks"), "name", name);
}

static const char *field(const json_t *v, const char *name, const char *key)
{
        return json_string_value(json_object_get(check(v, name), key));
}

static const char *str(const json_t *v, const char *key)
{
        return json_string_value(json_object_get(v, key));
}

/* Judges now against before (either may be NULL) on a Gen5 x16 H100 SXM of 18 links. */
static json_t *judge(const json_t *now, const json_t *before, const json_t *result)
{
        json_t *v = empty_verdict(), *p = gen5x16(), *e = model(18);
        health_links_judge(&cfg, v, now, before, p, e, result);
        json_decref(p), json_decref(e);
        return v;
}

static void test_replay_limit_by_generation_and_width(void **state)
{
        /* 1e-12 x GT/s x encoding x lanes x 60 s */
        assert_true(fabs(health_pcie_replay_limit_per_min(5, 16) - 30.24) < 0.01);
        assert_true(fabs(health_pcie_replay_limit_per_min(4, 16) - 15.12) < 0.01);
        assert_true(fabs(health_pcie_replay_limit_per_min(3, 16) - 7.56) < 0.01);
        assert_true(fabs(health_pcie_replay_limit_per_min(4, 8) - 7.56) < 0.01);
        assert_true(fabs(health_pcie_replay_limit_per_min(2, 16) - 3.84) < 0.01);
        assert_true(fabs(health_pcie_replay_limit_per_min(1, 1) - 0.12) < 0.001);
        assert_true(fabs(health_pcie_replay_limit_per_min(6, 16) - 61.44) < 0.01);
        assert_true(health_pcie_replay_limit_per_min(0, 16) == 0);
        assert_true(health_pcie_replay_limit_per_min(7, 16) == 0);
        assert_true(health_pcie_replay_limit_per_min(5, 0) == 0);
        assert_true(health_pcie_replay_limit_per_min(5, 64) == 0);
}

static void test_one_replay_passes_even_seconds_apart(void **state)
{
        json_t *b = counters(1000, 7, 18, 0, 0), *n = counters(6000, 8, 18, 0, 0);
        json_t *v = judge(n, b, NULL);
        assert_string_equal(str(v, "verdict"), "pass");
        assert_string_equal(field(v, "pcie_replays", "verdict"), "pass");
        assert_non_null(strstr(field(v, "pcie_replays", "reason"), "grew by 1 in 5 s"));
        json_decref(v), json_decref(b), json_decref(n);
}

static void test_replay_storm_warns_then_fails(void **state)
{
        json_t *b = counters(0 + 1, 0, 18, 0, 0), *warn = counters(60001, 100, 18, 0, 0);
        json_t *fail = counters(60001, 1000, 18, 0, 0);
        json_t *v = judge(warn, b, NULL);
        assert_string_equal(str(v, "verdict"), "warn");
        assert_string_equal(str(v, "action"), "none");
        assert_non_null(strstr(field(v, "pcie_replays", "reason"), "above the limit of 30.2"));
        assert_non_null(field(v, "pcie_replays", "threshold_source"));
        json_decref(v);
        v = judge(fail, b, NULL);
        assert_string_equal(str(v, "verdict"), "fail");
        assert_string_equal(str(v, "action"), "service");
        json_decref(v);
        cfg.health_pcie_replay_fail_factor = 0; /* never fail */
        v = judge(fail, b, NULL);
        assert_string_equal(str(v, "verdict"), "warn");
        cfg.health_pcie_replay_fail_factor = 10;
        json_decref(v), json_decref(b), json_decref(warn), json_decref(fail);
}

static void test_replay_floor_holds_for_slow_links(void **state)
{
        /* Gen3 x4 allows 1.9 a minute by its BER; the floor (8) lets 5 pass. */
        json_t *b = counters(1, 0, 18, 0, 0), *n = counters(60001, 5, 18, 0, 0);
        json_t *v = empty_verdict(),
               *p = json_pack("{s:i, s:i}", "current_gen", 3, "current_width", 4);
        health_links_judge(&cfg, v, n, b, p, NULL, NULL);
        assert_string_equal(field(v, "pcie_replays", "verdict"), "pass");
        json_decref(v);
        cfg.health_pcie_replay_floor_per_min = 1;
        v = empty_verdict();
        health_links_judge(&cfg, v, n, b, p, NULL, NULL);
        assert_string_equal(field(v, "pcie_replays", "verdict"), "warn");
        cfg.health_pcie_replay_floor_per_min = 8;
        json_decref(v), json_decref(b), json_decref(n), json_decref(p);
}

static void test_first_check_and_reset_counter_only_report(void **state)
{
        json_t *b = counters(1, 500, 18, 9, 9), *n = counters(60001, 3, 18, 0, 0);
        json_t *v = judge(n, NULL, NULL);
        assert_string_equal(str(v, "verdict"), "pass");
        assert_non_null(strstr(field(v, "pcie_replays", "reason"), "judged from the next check"));
        assert_non_null(strstr(field(v, "nvlink_errors", "reason"), "judged from the next check"));
        json_decref(v);
        v = judge(n, b, NULL); /* every counter went down: a reboot or a driver reload */
        assert_string_equal(str(v, "verdict"), "pass");
        assert_non_null(strstr(field(v, "pcie_replays", "reason"), "reset"));
        json_decref(v), json_decref(b), json_decref(n);
}

static void test_links_down_against_the_model_fail(void **state)
{
        json_t *twelve = counters(1, 0, 12, 0, 0), *all = counters(1, 0, 18, 0, 0);
        json_t *none = counters(1, 0, 0, 0, 0);
        json_t *v = judge(twelve, NULL, NULL);
        assert_string_equal(str(v, "verdict"), "fail");
        assert_string_equal(str(v, "action"), "reset_gpu");
        assert_non_null(
            strstr(field(v, "nvlinks_active", "reason"), "12 of the NVIDIA H100 SXM's 18"));
        json_decref(v);
        v = judge(all, NULL, NULL);
        assert_string_equal(field(v, "nvlinks_active", "verdict"), "pass");
        json_decref(v);
        v = judge(none, NULL, NULL); /* no NVLink at all: how the card was built */
        assert_string_equal(field(v, "nvlinks_active", "verdict"), "pass");
        assert_non_null(strstr(field(v, "nvlinks_active", "reason"), "not judged"));
        json_decref(v);
        v = empty_verdict(); /* no model: nothing to judge against */
        health_links_judge(&cfg, v, twelve, NULL, NULL, NULL, NULL);
        assert_null(check(v, "nvlinks_active"));
        json_decref(v), json_decref(twelve), json_decref(all), json_decref(none);
}

static void test_nvlink_crc_is_judged_per_second(void **state)
{
        json_t *b = counters(1000, 0, 18, 100, 0);
        json_t *slow = counters(11000, 0, 18, 600, 0);   /* 50/s */
        json_t *storm = counters(11000, 0, 18, 5000, 0); /* 490/s */
        json_t *v = judge(slow, b, NULL);
        assert_string_equal(field(v, "nvlink_errors", "verdict"), "pass");
        assert_non_null(strstr(field(v, "nvlink_errors", "reason"), "500 NVLink errors"));
        json_decref(v);
        v = judge(storm, b, NULL);
        assert_string_equal(str(v, "verdict"), "fail");
        assert_string_equal(field(v, "nvlink_errors", "action"), "reset_gpu");
        assert_non_null(
            strstr(field(v, "nvlink_errors", "reason"), "NVLink 3: 4900 CRC errors in 10.0 s"));
        json_decref(v);
        cfg.health_nvlink_crc_fail_per_s = 1000; /* a site that allows more */
        v = judge(storm, b, NULL);
        assert_string_equal(field(v, "nvlink_errors", "verdict"), "pass");
        cfg.health_nvlink_crc_fail_per_s = 100;
        json_decref(v), json_decref(b), json_decref(slow), json_decref(storm);
}

static void test_nvlink_replay_fails_unless_allowed(void **state)
{
        json_t *b = counters(1, 0, 18, 0, 4), *n = counters(60001, 0, 18, 0, 6);
        json_t *v = judge(n, b, NULL);
        assert_string_equal(str(v, "verdict"), "fail");
        assert_non_null(strstr(field(v, "nvlink_errors", "reason"), "NVLink 3: 2 replay errors"));
        json_decref(v);
        cfg.health_nvlink_error_fail_per_min = 5;
        v = judge(n, b, NULL);
        assert_string_equal(str(v, "verdict"), "pass");
        cfg.health_nvlink_error_fail_per_min = 0;
        json_decref(v), json_decref(b), json_decref(n);
}

static json_t *throttled(const char *after)
{
        return json_pack("{s:{s:{s:{s:[s]}, s:{s:[s]}}}}", "context", "conditions", "gpu_before",
                         "throttle_reasons", "sw_power_cap", "gpu_after", "throttle_reasons",
                         after);
}

static void test_throttle_warns_and_explains_slow_copies(void **state)
{
        json_t *r = throttled("hw_power_brake_slowdown");
        json_t *v = empty_verdict(), *p = gen5x16();
        json_array_append_new(json_object_get(v, "checks"),
                              json_pack("{s:s, s:s, s:s}", "name", "d2d_vs_model", "verdict",
                                        "fail", "reason", "device memory at 61% of the model"));
        json_array_append_new(json_object_get(v, "checks"),
                              json_pack("{s:s, s:s, s:s}", "name", "pinned_h2d_vs_link", "verdict",
                                        "pass", "reason", "fine"));
        health_links_judge(&cfg, v, NULL, NULL, p, NULL, r);
        assert_string_equal(field(v, "d2d_vs_model", "reason"),
                            "device memory at 61% of the model while HW_POWER_BRAKE_SLOWDOWN "
                            "was active");
        assert_string_equal(field(v, "pinned_h2d_vs_link", "reason"), "fine");
        assert_string_equal(field(v, "throttle", "verdict"), "warn");
        assert_string_equal(field(v, "throttle", "action"), "none");
        assert_string_equal(str(v, "verdict"), "fail"); /* the failing copy still fails */
        assert_int_equal(json_array_size(json_object_get(v, "reasons")), 2);
        json_decref(v), json_decref(r);

        r = throttled("sw_power_cap"); /* power capping is how a loaded GPU runs */
        v = empty_verdict();
        health_links_judge(&cfg, v, NULL, NULL, p, NULL, r);
        assert_null(check(v, "throttle"));
        json_decref(v), json_decref(r), json_decref(p);
}

static void test_each_judged_throttle_reason_warns(void **state)
{
        const char *const names[] = {"hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown",
                                     "hw_power_brake_slowdown"};
        for (size_t i = 0; i < 4; i++) {
                json_t *r = throttled(names[i]), *v = empty_verdict();
                health_links_judge(&cfg, v, NULL, NULL, NULL, NULL, r);
                assert_string_equal(str(v, "verdict"), "warn");
                json_decref(v), json_decref(r);
        }
}

static void test_settle_keeps_the_worse_action_already_there(void **state)
{
        json_t *v = empty_verdict(), *n = counters(1, 0, 12, 0, 0);
        json_object_set_new(v, "action", json_string("service"));
        json_array_append_new(json_object_get(v, "checks"),
                              json_pack("{s:s, s:s, s:s, s:s}", "name", "ecc", "verdict", "fail",
                                        "reason", "uncorrectable", "action", "service"));
        health_links_judge(&cfg, v, n, NULL, NULL, NULL, NULL);
        assert_string_equal(str(v, "action"), "service");
        assert_string_equal(str(v, "verdict"), "fail");
        json_decref(v), json_decref(n);
}

static void test_counters_from_gpu_state(void **state)
{
        struct gpu_state st = {.replay_counter = 4, .nvlinks_active = 2};
        for (size_t l = 0; l < GPU_STATE_NVLINKS_MAX; l++)
                for (size_t k = 0; k < _GPU_NVLINK_KIND_MAX; k++)
                        st.nvlink_errors[l][k] = -1;
        st.nvlink_errors[1][GPU_NVLINK_CRC] = 7;
        st.nvlink_errors[1][GPU_NVLINK_REPLAY] = 0;
        json_t *c = health_links_counters(&st, 1234);
        assert_int_equal(json_integer_value(json_object_get(c, "pcie_replays")), 4);
        assert_int_equal(json_integer_value(json_object_get(c, "nvlinks_active")), 2);
        assert_int_equal(json_array_size(json_object_get(c, "nvlink")), 1);
        json_t *l = json_array_get(json_object_get(c, "nvlink"), 0);
        assert_int_equal(json_integer_value(json_object_get(l, "link")), 1);
        assert_int_equal(json_integer_value(json_object_get(l, "crc")), 7);
        assert_null(json_object_get(l, "recovery"));
        assert_string_equal(health_nvlink_kind_name(GPU_NVLINK_RECOVERY), "recovery");
        json_decref(c);
}

static void test_inventory_names_the_missing_gpu(void **state)
{
        json_t *present = json_pack("[s, s]", "00000000:18:00.0", "00000000:19:00.0");
        json_t *seen = json_pack("[s, s, s]", "0000:18:00.0", "0000:19:00.0", "0000:5a:00.0");
        assert_null(health_links_inventory(&cfg, present, seen)); /* not configured */
        cfg.expected_gpus = 3;
        json_t *c = health_links_inventory(&cfg, present, seen);
        assert_string_equal(str(c, "verdict"), "fail");
        assert_string_equal(str(c, "action"), "reboot_node");
        assert_non_null(strstr(str(c, "reason"), "expected 3 GPUs, found 2: 0000:5a:00.0"));
        json_decref(c);
        c = health_links_inventory(&cfg, present, NULL); /* gone from the bus too */
        assert_non_null(strstr(str(c, "reason"), "expected 3 GPUs, found 2: 1 missing"));
        json_decref(c);
        cfg.expected_gpus = 2;
        c = health_links_inventory(&cfg, present, seen);
        assert_string_equal(str(c, "verdict"), "pass");
        assert_string_equal(str(c, "reason"), "expected 2 GPUs, found 2");
        cfg.expected_gpus = 0;
        json_decref(c), json_decref(present), json_decref(seen);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_replay_limit_by_generation_and_width),
            cmocka_unit_test(test_one_replay_passes_even_seconds_apart),
            cmocka_unit_test(test_replay_storm_warns_then_fails),
            cmocka_unit_test(test_replay_floor_holds_for_slow_links),
            cmocka_unit_test(test_first_check_and_reset_counter_only_report),
            cmocka_unit_test(test_links_down_against_the_model_fail),
            cmocka_unit_test(test_nvlink_crc_is_judged_per_second),
            cmocka_unit_test(test_nvlink_replay_fails_unless_allowed),
            cmocka_unit_test(test_throttle_warns_and_explains_slow_copies),
            cmocka_unit_test(test_each_judged_throttle_reason_warns),
            cmocka_unit_test(test_settle_keeps_the_worse_action_already_there),
            cmocka_unit_test(test_counters_from_gpu_state),
            cmocka_unit_test(test_inventory_names_the_missing_gpu),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
