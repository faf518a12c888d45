/* health_errors.c: each reading of a GPU's error state judged into its check, verdict and
 * action, against the defaults and a model's overrides; and the action stamped on every check
 * and verdict. Readings are written as common/nvml_errors.c gives them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "health_errors.h"

/* A healthy GPU with zero counters, as NVML reads it. */
static const char *const healthy =
    "{\"source\": \"nvml\","
    " \"remapped_rows\": {\"corrected\": 0, \"uncorrected\": 0, \"pending\": false, "
    "\"failure\": false},"
    " \"ecc\": {\"volatile\": {\"dram\": {\"corrected\": 0, \"uncorrected\": 0},"
    "                        \"sram\": {\"corrected\": 0, \"uncorrected\": 0}},"
    "          \"aggregate\": {\"dram\": {\"corrected\": 0, \"uncorrected\": 0},"
    "                         \"sram\": {\"corrected\": 0, \"uncorrected\": 0}}},"
    " \"ecc_mode\": {\"current\": \"on\", \"pending\": \"on\"},"
    " \"retired_pages\": {\"unknown\": \"nvmlDeviceGetRetiredPages: Not Supported\"},"
    " \"recovery_action\": {\"value\": 0, \"name\": \"none\"},"
    " \"inforom\": {\"valid\": true}}";

static json_t *readings_with(const char *path, json_t *value)
{
        json_t *r = json_loads(healthy, 0, NULL);
        char buf[128], *key, *save = NULL;
        json_t *at = r;

        assert_non_null(r);
        snprintf(buf, sizeof(buf), "%s", path);
        key = strtok_r(buf, "/", &save);
        for (char *next; (next = strtok_r(NULL, "/", &save)); key = next)
                at = json_object_get(at, key);
        json_object_set_new(at, key, value);
        return r;
}

static json_t *judged(json_t *readings, const char *model)
{
        json_t *v = json_pack("{s:s, s:[], s:[]}", "verdict", "pass", "checks", "reasons");
        json_t *expect =
            model ? json_pack("{s:s, s:o}", "device_name", "X", "model", json_loads(model, 0, NULL))
                  : NULL;

        health_errors_judge(v, readings, expect);
        health_actions_stamp(v);
        json_decref(readings);
        json_decref(expect);
        return v;
}

static const json_t *check_named(const json_t *v, const char *name)
{
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(v, "checks"), i, c)
        {
                if (strcmp(json_string_value(json_object_get(c, "name")), name) == 0)
                        return c;
        }
        fail_msg("no check %s", name);
        return NULL;
}

static void assert_check(const json_t *v, const char *name, const char *verdict, const char *action)
{
        const json_t *c = check_named(v, name);
        assert_string_equal(json_string_value(json_object_get(c, "verdict")), verdict);
        assert_string_equal(json_string_value(json_object_get(c, "action")), action);
        if (strcmp(verdict, "pass") != 0)
                assert_non_null(json_string_value(json_object_get(c, "threshold_source")));
}

static void assert_verdict(const json_t *v, const char *verdict, const char *action)
{
        assert_string_equal(json_string_value(json_object_get(v, "verdict")), verdict);
        assert_string_equal(json_string_value(json_object_get(v, "action")), action);
}

static void test_healthy_gpu_with_zero_counters_passes_every_check(void **state)
{
        (void)state;
        json_t *v = judged(json_loads(healthy, 0, NULL), NULL);
        const char *names[] = {"remapped_rows", "ecc_volatile",    "ecc_aggregate", "ecc_mode",
                               "retired_pages", "recovery_action", "inforom"};

        assert_verdict(v, "pass", "none");
        assert_int_equal(json_array_size(json_object_get(v, "checks")), 7);
        assert_int_equal(json_array_size(json_object_get(v, "reasons")), 0);
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                assert_check(v, names[i], "pass", "none");
        assert_non_null(json_object_get(check_named(v, "remapped_rows"), "figures"));
        json_decref(v);
}

static void test_pending_remap_fails_with_reset(void **state)
{
        (void)state;
        json_t *v = judged(readings_with("remapped_rows/pending", json_true()), NULL);
        assert_check(v, "remapped_rows", "fail", "reset_gpu");
        assert_verdict(v, "fail", "reset_gpu");
        json_decref(v);
}

static void test_remap_failure_fails_for_service(void **state)
{
        (void)state;
        json_t *v = judged(readings_with("remapped_rows/failure", json_true()), NULL);
        assert_check(v, "remapped_rows", "fail", "service");
        assert_verdict(v, "fail", "service");
        json_decref(v);
}

static void test_uncorrectable_dram_error_fails_with_reset(void **state)
{
        (void)state;
        json_t *v = judged(readings_with("ecc/volatile/dram/uncorrected", json_integer(1)), NULL);
        assert_check(v, "ecc_volatile", "fail", "reset_gpu");
        assert_verdict(v, "fail", "reset_gpu");
        json_decref(v);
}

static void test_uncorrectable_sram_error_fails_with_reset(void **state)
{
        (void)state;
        json_t *v = judged(readings_with("ecc/volatile/sram/uncorrected", json_integer(2)), NULL);
        assert_check(v, "ecc_volatile", "fail", "reset_gpu");
        json_decref(v);
}

static void test_corrected_errors_alone_pass(void **state)
{
        (void)state;
        json_t *v = judged(readings_with("ecc/volatile/dram/corrected", json_integer(17700)), NULL);
        assert_verdict(v, "pass", "none");
        json_decref(v);
}

static void test_aggregate_sram_over_the_limit_fails_for_service(void **state)
{
        (void)state;
        json_t *at = judged(readings_with("ecc/aggregate/sram/uncorrected",
                                          json_integer(HEALTH_ERRORS_SRAM_UNCORRECTED_MAX)),
                            NULL);
        json_t *over = judged(readings_with("ecc/aggregate/sram/uncorrected",
                                            json_integer(HEALTH_ERRORS_SRAM_UNCORRECTED_MAX + 1)),
                              NULL);
        assert_check(at, "ecc_aggregate", "pass", "none");
        assert_check(over, "ecc_aggregate", "fail", "service");
        json_decref(at);
        json_decref(over);
}

static void test_a_model_raises_the_sram_limit(void **state)
{
        (void)state;
        json_t *v = judged(readings_with("ecc/aggregate/sram/uncorrected", json_integer(9)),
                           "{\"sram_uncorrected_max\": 10}");
        assert_check(v, "ecc_aggregate", "pass", "none");
        json_decref(v);
}

static void test_each_recovery_action_fails_with_its_action(void **state)
{
        (void)state;
        static const struct {
                int value;
                const char *action;
        } cases[] = {{1, "reset_gpu"},
                     {2, "reboot_node"},
                     {3, "restart_job"},
                     {4, "reset_gpu"},
                     {9, "reset_gpu"}};
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                json_t *v = judged(
                    readings_with("recovery_action/value", json_integer(cases[i].value)), NULL);
                assert_check(v, "recovery_action", "fail", cases[i].action);
                assert_verdict(v, "fail", cases[i].action);
                json_decref(v);
        }
}

static void test_ecc_off_warns_and_allowed_off_still_warns_of_a_pending_change(void **state)
{
        (void)state;
        json_t *off = judged(readings_with("ecc_mode/current", json_string("off")), NULL);
        json_t *allowed = judged(readings_with("ecc_mode/current", json_string("off")),
                                 "{\"ecc_off\": \"pass\"}");
        assert_check(off, "ecc_mode", "warn", "none");
        assert_verdict(off, "warn", "none");
        assert_check(allowed, "ecc_mode", "warn", "none"); /* pending "on" still differs */
        json_decref(off);
        json_decref(allowed);
}

static void test_ecc_off_allowed_by_the_model_passes(void **state)
{
        (void)state;
        json_t *r = readings_with("ecc_mode/current", json_string("off"));
        json_object_set_new(json_object_get(r, "ecc_mode"), "pending", json_string("off"));
        json_t *v = judged(r, "{\"ecc_off\": \"pass\"}");
        assert_check(v, "ecc_mode", "pass", "none");
        json_decref(v);
}

static void test_pending_ecc_change_warns(void **state)
{
        (void)state;
        json_t *v = judged(readings_with("ecc_mode/pending", json_string("off")), NULL);
        assert_check(v, "ecc_mode", "warn", "none");
        json_decref(v);
}

static void test_invalid_inforom_warns(void **state)
{
        (void)state;
        json_t *v = judged(readings_with("inforom/valid", json_false()), NULL);
        assert_check(v, "inforom", "warn", "none");
        assert_verdict(v, "warn", "none");
        json_decref(v);
}

static void test_retired_pages_at_the_limit_fail_for_service(void **state)
{
        (void)state;
        json_t *at =
            judged(readings_with("retired_pages", json_pack("{s:i, s:i, s:b}", "single_bit", 50,
                                                            "double_bit", 13, "pending", 0)),
                   NULL);
        json_t *below =
            judged(readings_with("retired_pages", json_pack("{s:i, s:i, s:b}", "single_bit", 50,
                                                            "double_bit", 12, "pending", 0)),
                   NULL);
        json_t *model =
            judged(readings_with("retired_pages", json_pack("{s:i, s:i, s:b}", "single_bit", 50,
                                                            "double_bit", 13, "pending", 0)),
                   "{\"retired_pages_max\": 100}");
        assert_check(at, "retired_pages", "fail", "service");
        assert_check(below, "retired_pages", "pass", "none");
        assert_check(model, "retired_pages", "pass", "none");
        json_decref(at);
        json_decref(below);
        json_decref(model);
}

static void test_pending_retirement_fails_with_reset(void **state)
{
        (void)state;
        json_t *v =
            judged(readings_with("retired_pages", json_pack("{s:i, s:i, s:b}", "single_bit", 1,
                                                            "double_bit", 0, "pending", 1)),
                   NULL);
        assert_check(v, "retired_pages", "fail", "reset_gpu");
        json_decref(v);
}

static void test_unknown_reading_passes_saying_why(void **state)
{
        (void)state;
        json_t *v = judged(
            readings_with("remapped_rows",
                          json_pack("{s:s}", "unknown", "NVML lacks nvmlDeviceGetRemappedRows")),
            NULL);
        const json_t *c = check_named(v, "remapped_rows");
        assert_check(v, "remapped_rows", "pass", "none");
        assert_non_null(strstr(json_string_value(json_object_get(c, "reason")),
                               "unknown: NVML lacks nvmlDeviceGetRemappedRows"));
        json_decref(v);
}

static void test_the_worst_action_wins(void **state)
{
        (void)state;
        json_t *r = readings_with("remapped_rows/pending", json_true());
        json_object_set_new(json_object_get(r, "remapped_rows"), "failure", json_true());
        json_object_set_new(json_object_get(r, "recovery_action"), "value", json_integer(2));
        json_t *v = judged(r, NULL);
        assert_verdict(v, "fail", "service");
        json_decref(v);
}

static void test_no_readings_judges_nothing(void **state)
{
        (void)state;
        json_t *v = judged(NULL, NULL);
        assert_int_equal(json_array_size(json_object_get(v, "checks")), 0);
        assert_verdict(v, "pass", "none");
        json_decref(v);
}

static void test_stamp_gives_a_failing_bandwidth_check_a_reset(void **state)
{
        (void)state;
        json_t *v =
            json_pack("{s:s, s:[{s:s, s:s}, {s:s, s:s}]}", "verdict", "fail", "checks", "name",
                      "d2d_vs_model", "verdict", "fail", "name", "link", "verdict", "warn");
        health_actions_stamp(v);
        assert_string_equal(
            json_string_value(json_object_get(check_named(v, "d2d_vs_model"), "action")),
            "reset_gpu");
        assert_string_equal(json_string_value(json_object_get(check_named(v, "link"), "action")),
                            "none");
        assert_string_equal(json_string_value(json_object_get(v, "action")), "reset_gpu");
        json_decref(v);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_healthy_gpu_with_zero_counters_passes_every_check),
            cmocka_unit_test(test_pending_remap_fails_with_reset),
            cmocka_unit_test(test_remap_failure_fails_for_service),
            cmocka_unit_test(test_uncorrectable_dram_error_fails_with_reset),
            cmocka_unit_test(test_uncorrectable_sram_error_fails_with_reset),
            cmocka_unit_test(test_corrected_errors_alone_pass),
            cmocka_unit_test(test_aggregate_sram_over_the_limit_fails_for_service),
            cmocka_unit_test(test_a_model_raises_the_sram_limit),
            cmocka_unit_test(test_each_recovery_action_fails_with_its_action),
            cmocka_unit_test(test_ecc_off_warns_and_allowed_off_still_warns_of_a_pending_change),
            cmocka_unit_test(test_ecc_off_allowed_by_the_model_passes),
            cmocka_unit_test(test_pending_ecc_change_warns),
            cmocka_unit_test(test_invalid_inforom_warns),
            cmocka_unit_test(test_retired_pages_at_the_limit_fail_for_service),
            cmocka_unit_test(test_pending_retirement_fails_with_reset),
            cmocka_unit_test(test_unknown_reading_passes_saying_why),
            cmocka_unit_test(test_the_worst_action_wins),
            cmocka_unit_test(test_no_readings_judges_nothing),
            cmocka_unit_test(test_stamp_gives_a_failing_bandwidth_check_a_reset),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
