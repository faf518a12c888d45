/* health_action.c: names both ways and the order of severity. */
#include "health_action.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

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

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_names_round_trip),
            cmocka_unit_test(test_unknown_name_is_einval_and_untouched),
            cmocka_unit_test(test_max_is_most_severe),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
