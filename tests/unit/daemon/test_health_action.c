/* health_action.c: names both ways, the order of severity, and a verdict settled from its checks.
 */
#include "health_action.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <jansson.h>

static void test_names_round_trip(void **state)
{
        (void)state;
        for (int a = HEALTH_ACTION_NONE; a < _HEALTH_ACTION_MAX; a++) {
                enum health_action back = _HEALTH_ACTION_MAX;
                assert_int_equal(health_action_from_name(health_action_name(a), &back), 0);
                assert_int_equal(back, a);
        }
        assert_string_equal(health_action_name(HEALTH_ACTION_RESET_GPU), "reset_gpu");
}

static void test_unknown_name_is_einval_and_untouched(void **state)
{
        (void)state;
        enum health_action a = HEALTH_ACTION_SERVICE;
        assert_int_equal(health_action_from_name("replace", &a), -EINVAL);
        assert_int_equal(health_action_from_name(NULL, &a), -EINVAL);
        assert_int_equal(a, HEALTH_ACTION_SERVICE);
}

static void test_max_is_most_severe(void **state)
{
        (void)state;
        assert_int_equal(health_action_max(HEALTH_ACTION_NONE, HEALTH_ACTION_RESTART_JOB),
                         HEALTH_ACTION_RESTART_JOB);
        assert_int_equal(health_action_max(HEALTH_ACTION_SERVICE, HEALTH_ACTION_REBOOT_NODE),
                         HEALTH_ACTION_SERVICE);
        assert_int_equal(health_action_max(HEALTH_ACTION_RESET_GPU, HEALTH_ACTION_REBOOT_NODE),
                         HEALTH_ACTION_REBOOT_NODE);
}

/* A verdict settled from its checks: the worst word, the reasons of what did not pass in order,
 * the most severe action. */
static void test_settle_takes_the_worst_check(void **state)
{
        (void)state;
        json_t *v = json_pack("{s:s, s:[{s:s, s:s, s:s}, {s:s, s:s, s:s}, {s:s, s:s, s:s}]}",
                              "verdict", "pass", "checks", "verdict", "warn", "reason", "slow",
                              "action", "none", "verdict", "pass", "reason", "ok", "action", "none",
                              "verdict", "fail", "reason", "xid 79", "action", "reboot_node");
        health_settle(v);
        assert_string_equal(json_string_value(json_object_get(v, "verdict")), "fail");
        assert_string_equal(json_string_value(json_object_get(v, "action")), "reboot_node");
        json_t *reasons = json_object_get(v, "reasons");
        assert_int_equal(json_array_size(reasons), 2);
        assert_string_equal(json_string_value(json_array_get(reasons, 0)), "slow");
        assert_string_equal(json_string_value(json_array_get(reasons, 1)), "xid 79");
        json_decref(v);
}

/* A word no check gives (unknown) stands while every check passes, and yields to a worse one. */
static void test_settle_keeps_unknown_unless_a_check_is_worse(void **state)
{
        (void)state;
        json_t *v = json_pack("{s:s, s:[{s:s, s:s}]}", "verdict", "unknown", "checks", "verdict",
                              "pass", "action", "none");
        health_settle(v);
        assert_string_equal(json_string_value(json_object_get(v, "verdict")), "unknown");
        json_array_append_new(
            json_object_get(v, "checks"),
            json_pack("{s:s, s:s, s:s}", "verdict", "warn", "reason", "x", "action", "none"));
        health_settle(v);
        assert_string_equal(json_string_value(json_object_get(v, "verdict")), "warn");
        json_decref(v);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_names_round_trip),
            cmocka_unit_test(test_unknown_name_is_einval_and_untouched),
            cmocka_unit_test(test_max_is_most_severe),
            cmocka_unit_test(test_settle_takes_the_worst_check),
            cmocka_unit_test(test_settle_keeps_unknown_unless_a_check_is_worse),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
