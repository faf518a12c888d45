/* devices.c: its state names (one table, and which state a device shows for each worker state
 * and a pause: the API, the metrics and the logs all read it), and the device table as an object
 * made from the real `umd-worker --fake N --list`. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
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

/* The table from `umd-worker --fake n --list`, with cfg's devices selection (NULL: all). */
static struct devices *discover(unsigned n, const char *selection)
{
        const char *worker = getenv("UMD_WORKER");
        struct umd_config cfg;
        struct devices *ds = NULL;

        assert_non_null(worker);
        config_init(&cfg);
        cfg.fake_devices = n;
        free(cfg.devices);
        cfg.devices = selection ? strdup(selection) : NULL;
        assert_int_equal(devices_new(&cfg, worker, &ds), 0);
        config_free(&cfg);
        assert_non_null(ds);
        return ds;
}

static void test_a_table_holds_what_discovery_found(void **state)
{
        struct devices *ds = discover(3, NULL);

        assert_int_equal(devices_size(ds), 3);
        assert_int_equal(devices_at(ds, 2)->index, 2);
        assert_null(devices_at(ds, 3));
        assert_int_equal(devices_find(ds, "1"), 1);
        assert_int_equal(devices_find(ds, "3"), -1);
        assert_int_equal(devices_find_uuid(ds, devices_at(ds, 1)->uuid), 1);
        assert_int_equal(devices_find(ds, devices_at(ds, 2)->uuid), 2);
        assert_null(devices_why_empty(ds));
        assert_true(devices_has_node(ds));
        assert_int_equal(devices_node_slot(ds), 3);
        assert_null(devices_free(ds));
}

static void test_the_readers_without_a_handle_answer_from_the_last_table(void **state)
{
        struct devices *ds = discover(2, NULL);

        assert_int_equal(devices_count(), 2);
        assert_ptr_equal(devices_get(1), devices_at(ds, 1));
        assert_int_equal(devices_lookup_uuid(devices_at(ds, 0)->uuid), 0);
        assert_true(have_node());
        devices_free(ds);
        assert_int_equal(devices_count(), 0);
        assert_null(devices_get(0));
        assert_false(have_node());
}

static void test_a_selection_that_matches_nothing_says_why(void **state)
{
        struct devices *ds = discover(2, "7");

        assert_int_equal(devices_size(ds), 0);
        assert_string_equal(devices_why_empty(ds),
                            "no discovered GPU matches the 'devices' setting");
        assert_string_equal(devices_empty_reason(),
                            "no discovered GPU matches the 'devices' setting");
        assert_false(devices_has_node(ds));
        devices_free(ds);
}

static void test_no_table_is_an_empty_one(void **state)
{
        assert_int_equal(devices_size(NULL), 0);
        assert_null(devices_at(NULL, 0));
        assert_int_equal(devices_find(NULL, "0"), -1);
        assert_string_equal(devices_why_empty(NULL), "");
        assert_null(devices_free(NULL));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_every_state_has_a_name),
            cmocka_unit_test(test_a_worker_waiting_to_restart_is_restarting),
            cmocka_unit_test(test_a_cold_device_is_idle),
            cmocka_unit_test(test_a_pause_shows_over_all_but_a_fault),
            cmocka_unit_test(test_a_table_holds_what_discovery_found),
            cmocka_unit_test(test_the_readers_without_a_handle_answer_from_the_last_table),
            cmocka_unit_test(test_a_selection_that_matches_nothing_says_why),
            cmocka_unit_test(test_no_table_is_an_empty_one),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
