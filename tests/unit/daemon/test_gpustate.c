/* gpustate.c: telling umd's worker apart from other processes on a GPU, and the fake GPU state
 * file that stands in for NVML in tests (a missing entry is an idle GPU; the link is unknown
 * unless the file sets it). */
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
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
