/* devices.c's state names: one table, and which state a device shows for each worker state and
 * a pause (the API, the metrics and the logs all read it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "devices.h"

static const char *state_of(enum worker_state ws, bool paused)
{
        struct device d = {.wstate = ws, .paused = paused};
        return device_state_string(&d);
}

static void test_every_state_has_a_name(void **state)
{
        for (size_t i = 0; i < DEVICE_STATE_MAX; i++) {
                assert_non_null(device_state_names[i]);
                for (size_t k = 0; k < i; k++)
                        assert_string_not_equal(device_state_names[i], device_state_names[k]);
        }
}

static void test_a_worker_waiting_to_restart_is_restarting(void **state)
{
        assert_string_equal(state_of(WORKER_BACKOFF, false), "restarting");
}

static void test_a_cold_device_is_idle(void **state)
{
        assert_string_equal(state_of(WORKER_COLD, false), "idle");
        assert_string_equal(state_of(WORKER_IDLE, false), "idle");
        assert_string_equal(state_of(WORKER_BUSY, false), "busy");
        assert_string_equal(state_of(WORKER_STARTING, false), "starting");
        assert_string_equal(state_of(WORKER_STOPPED, false), "stopped");
}

static void test_a_pause_shows_over_all_but_a_fault(void **state)
{
        assert_string_equal(state_of(WORKER_BUSY, true), "paused");
        assert_string_equal(state_of(WORKER_BACKOFF, true), "paused");
        assert_string_equal(state_of(WORKER_FAULTED, true), "faulted");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_every_state_has_a_name),
            cmocka_unit_test(test_a_worker_waiting_to_restart_is_restarting),
            cmocka_unit_test(test_a_cold_device_is_idle),
            cmocka_unit_test(test_a_pause_shows_over_all_but_a_fault),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
