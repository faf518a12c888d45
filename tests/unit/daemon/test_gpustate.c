/* gpustate.c: telling umd's worker apart from other processes on a GPU, and the fake GPU state
 * file that stands in for NVML in tests (a missing entry is an idle GPU; the link is unknown
 * unless the file sets it); a worker's look after its part counted as umd's own look counts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "gpustate.h"

static void test_own_worker_is_not_another_process(void **state)
{
        unsigned pids[] = {(unsigned)getpid()};

        assert_int_equal(gpustate_count_others(pids, 1, getpid()), 0);
        assert_int_equal(gpustate_count_others(pids, 1, 0), 1);
}

static void test_processes_of_this_namespace_all_count(void **state)
{
        unsigned pids[] = {(unsigned)getpid(), (unsigned)getppid()};

        /* the worker (another pid) is not listed: both listed processes are others */
        assert_int_equal(gpustate_count_others(pids, 2, 999999), 2);
}

static void test_an_unmatched_pid_is_taken_for_the_worker_seen_from_another_namespace(void **state)
{
        /* 4194304 is above pid_max: no such process here */
        unsigned pids[] = {4194304u, (unsigned)getppid()};

        assert_int_equal(gpustate_count_others(pids, 2, 999999), 1);
        /* without a worker running, nothing is taken for it */
        assert_int_equal(gpustate_count_others(pids, 2, 0), 2);
}

static void test_nothing_listed_is_nobody(void **state)
{
        assert_int_equal(gpustate_count_others(NULL, 0, 1234), 0);
}

static void with_fake_file(const char *text, int index, struct gpu_state *st)
{
        char path[] = "/tmp/umd-gpustate-XXXXXX";
        int fd = mkstemp(path);
        struct umd_config cfg;

        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
        config_init(&cfg);
        cfg.fake_devices = 2;
        cfg.fake_gpu_state = strdup(path);
        gpustate_init(&cfg);
        gpustate_query(NULL, index, 0, 0, st);
        gpustate_shutdown();
        config_free(&cfg);
        unlink(path);
}

static void test_fake_state_file_gives_processes_mode_and_link(void **state)
{
        struct gpu_state st;

        with_fake_file("{\"1\": {\"other_processes\": 2, \"compute_mode\": \"exclusive_process\", "
                       "\"pcie\": {\"current_gen\": 3}, \"replay_counter\": 7}}",
                       1, &st);
        assert_true(st.known);
        assert_int_equal(st.other_processes, 2);
        assert_string_equal(st.compute_mode, "exclusive_process");
        assert_int_equal(st.current_gen, 3);
        assert_int_equal(st.max_gen, 5);
        assert_int_equal(st.replay_counter, 7);
        assert_string_equal(gpustate_backend(), "unavailable"); /* after shutdown */
}

static void test_fake_device_missing_from_the_file_is_idle_with_an_unknown_link(void **state)
{
        struct gpu_state st;

        with_fake_file("{\"1\": {\"other_processes\": 2}}", 0, &st);
        assert_true(st.known);
        assert_int_equal(st.other_processes, 0);
        assert_string_equal(st.compute_mode, "default");
        assert_int_equal(st.current_gen, -1);
}

static void test_a_malformed_fake_file_is_an_idle_gpu(void **state)
{
        struct gpu_state st;

        with_fake_file("{\"0\": ", 0, &st);
        assert_true(st.known);
        assert_int_equal(st.other_processes, 0);
}

static int others_in(const char *look_json, pid_t own, pid_t node)
{
        json_t *look = json_loads(look_json, 0, NULL);
        int n;

        assert_non_null(look);
        n = gpustate_others_in_look(look, own, node);
        json_decref(look);
        return n;
}

static void test_a_workers_look_counts_all_but_umds_workers(void **state)
{
        char look[128];

        (void)state;
        snprintf(look, sizeof(look), "{\"pids\": [%d, %d, 1]}", (int)getpid(), (int)getppid());
        assert_int_equal(others_in(look, getpid(), getppid()), 1);
        assert_int_equal(others_in(look, getpid(), 0), 2);
        assert_int_equal(others_in("{\"pids\": []}", getpid(), 0), 0);
        assert_int_equal(others_in("{\"others\": 3}", getpid(), 0), 3);
        assert_int_equal(others_in("{\"pids\": [], \"truncated\": true}", getpid(), 0), 256);
}

static void test_a_look_that_cannot_be_counted_is_unknown(void **state)
{
        (void)state;
        assert_int_equal(gpustate_others_in_look(NULL, 1, 0), -1);
        assert_int_equal(others_in("{}", 1, 0), -1);
        assert_int_equal(others_in("{\"others\": -1}", 1, 0), -1);
        assert_int_equal(others_in("{\"others\": \"2\"}", 1, 0), -1);
        assert_int_equal(others_in("{\"pids\": [0]}", 1, 0), -1);
        assert_int_equal(others_in("{\"pids\": [\"7\"]}", 1, 0), -1);
        assert_int_equal(others_in("{\"pids\": [4294967296]}", 1, 0), -1);
        assert_int_equal(others_in("{\"pids\": 7}", 1, 0), -1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_own_worker_is_not_another_process),
            cmocka_unit_test(test_processes_of_this_namespace_all_count),
            cmocka_unit_test(
                test_an_unmatched_pid_is_taken_for_the_worker_seen_from_another_namespace),
            cmocka_unit_test(test_nothing_listed_is_nobody),
            cmocka_unit_test(test_fake_state_file_gives_processes_mode_and_link),
            cmocka_unit_test(test_fake_device_missing_from_the_file_is_idle_with_an_unknown_link),
            cmocka_unit_test(test_a_malformed_fake_file_is_an_idle_gpu),
            cmocka_unit_test(test_a_workers_look_counts_all_but_umds_workers),
            cmocka_unit_test(test_a_look_that_cannot_be_counted_is_unknown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
