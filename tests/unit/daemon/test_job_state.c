/* job_state.c: the job state table and how a job's state follows from its parts'. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "job_state.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static enum job_state derive(const enum job_state *parts, size_t n)
{
        return job_state_derive(parts, n, false);
}

static void test_every_state_has_a_name_that_reads_back(void **state)
{
        for (int s = 0; s < JOB_STATE_MAX; s++) {
                assert_non_null(job_state_names[s]);
                assert_int_equal(job_state_from_string(job_state_names[s]), s);
                assert_string_equal(job_state_to_string((enum job_state)s), job_state_names[s]);
        }
}

static void test_the_names_are_the_api_names(void **state)
{
        assert_string_equal(job_state_names[JOB_QUEUED], "queued");
        assert_string_equal(job_state_names[JOB_RUNNING], "running");
        assert_string_equal(job_state_names[JOB_SUCCEEDED], "succeeded");
        assert_string_equal(job_state_names[JOB_FAILED], "failed");
        assert_string_equal(job_state_names[JOB_CANCELLED], "cancelled");
        assert_string_equal(job_state_names[JOB_TIMED_OUT], "timed_out");
        assert_string_equal(job_state_names[JOB_INTERRUPTED], "interrupted");
}

static void test_the_names_list_names_every_state(void **state)
{
        for (int s = 0; s < JOB_STATE_MAX; s++)
                assert_non_null(strstr(job_state_names_list, job_state_names[s]));
}

static void test_unknown_names_are_refused(void **state)
{
        assert_int_equal(job_state_from_string(NULL), -EINVAL);
        assert_int_equal(job_state_from_string(""), -EINVAL);
        assert_int_equal(job_state_from_string("done"), -EINVAL);
        assert_int_equal(job_state_from_string("Succeeded"), -EINVAL);
        assert_string_equal(job_state_to_string(JOB_STATE_MAX), "?");
}

static void test_only_outcomes_are_final(void **state)
{
        assert_false(job_state_final(JOB_QUEUED));
        assert_false(job_state_final(JOB_RUNNING));
        assert_true(job_state_final(JOB_SUCCEEDED));
        assert_true(job_state_final(JOB_FAILED));
        assert_true(job_state_final(JOB_CANCELLED));
        assert_true(job_state_final(JOB_TIMED_OUT));
        assert_true(job_state_final(JOB_INTERRUPTED));
        assert_false(job_state_final(JOB_STATE_MAX));
}

static void test_all_parts_queued_is_queued(void **state)
{
        const enum job_state p[] = {JOB_QUEUED, JOB_QUEUED};
        assert_int_equal(derive(p, N(p)), JOB_QUEUED);
}

static void test_one_part_running_is_running(void **state)
{
        const enum job_state p[] = {JOB_QUEUED, JOB_RUNNING};
        assert_int_equal(derive(p, N(p)), JOB_RUNNING);
}

static void test_a_finished_part_beside_a_queued_one_is_running(void **state)
{
        const enum job_state p[] = {JOB_SUCCEEDED, JOB_QUEUED};
        assert_int_equal(derive(p, N(p)), JOB_RUNNING);
}

static void test_an_open_part_keeps_a_failed_job_open(void **state)
{
        const enum job_state p[] = {JOB_FAILED, JOB_RUNNING};
        assert_int_equal(derive(p, N(p)), JOB_RUNNING);
}

static void test_every_part_succeeded_is_succeeded(void **state)
{
        const enum job_state p[] = {JOB_SUCCEEDED, JOB_SUCCEEDED, JOB_SUCCEEDED};
        assert_int_equal(derive(p, N(p)), JOB_SUCCEEDED);
}

static void test_one_failed_part_fails_the_job(void **state)
{
        const enum job_state p[] = {JOB_SUCCEEDED, JOB_FAILED};
        assert_int_equal(derive(p, N(p)), JOB_FAILED);
}

static void test_a_timeout_outranks_a_failure(void **state)
{
        const enum job_state p[] = {JOB_FAILED, JOB_TIMED_OUT, JOB_SUCCEEDED};
        assert_int_equal(derive(p, N(p)), JOB_TIMED_OUT);
}

static void test_a_failure_outranks_an_interruption(void **state)
{
        const enum job_state p[] = {JOB_INTERRUPTED, JOB_FAILED};
        assert_int_equal(derive(p, N(p)), JOB_FAILED);
}

static void test_an_interrupted_part_interrupts_the_job(void **state)
{
        const enum job_state p[] = {JOB_SUCCEEDED, JOB_INTERRUPTED};
        assert_int_equal(derive(p, N(p)), JOB_INTERRUPTED);
}

static void test_a_cancelled_part_without_a_request_is_cancelled_last(void **state)
{
        const enum job_state p[] = {JOB_SUCCEEDED, JOB_CANCELLED};
        assert_int_equal(derive(p, N(p)), JOB_CANCELLED);
        const enum job_state q[] = {JOB_CANCELLED, JOB_FAILED};
        assert_int_equal(derive(q, N(q)), JOB_FAILED);
}

static void test_a_requested_cancel_outranks_every_outcome(void **state)
{
        const enum job_state p[] = {JOB_CANCELLED, JOB_TIMED_OUT, JOB_FAILED};
        assert_int_equal(job_state_derive(p, N(p), true), JOB_CANCELLED);
}

static void test_a_requested_cancel_without_a_cancelled_part_keeps_the_outcome(void **state)
{
        const enum job_state p[] = {JOB_SUCCEEDED, JOB_SUCCEEDED};
        assert_int_equal(job_state_derive(p, N(p), true), JOB_SUCCEEDED);
}

static void test_counts_give_what_the_parts_give(void **state)
{
        size_t count[JOB_STATE_MAX] = {0};

        count[JOB_SUCCEEDED] = 2;
        count[JOB_TIMED_OUT] = 1;
        assert_int_equal(job_state_from_counts(count, false), JOB_TIMED_OUT);
        count[JOB_QUEUED] = 1;
        assert_int_equal(job_state_from_counts(count, false), JOB_RUNNING);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_every_state_has_a_name_that_reads_back),
            cmocka_unit_test(test_the_names_are_the_api_names),
            cmocka_unit_test(test_the_names_list_names_every_state),
            cmocka_unit_test(test_unknown_names_are_refused),
            cmocka_unit_test(test_only_outcomes_are_final),
            cmocka_unit_test(test_all_parts_queued_is_queued),
            cmocka_unit_test(test_one_part_running_is_running),
            cmocka_unit_test(test_a_finished_part_beside_a_queued_one_is_running),
            cmocka_unit_test(test_an_open_part_keeps_a_failed_job_open),
            cmocka_unit_test(test_every_part_succeeded_is_succeeded),
            cmocka_unit_test(test_one_failed_part_fails_the_job),
            cmocka_unit_test(test_a_timeout_outranks_a_failure),
            cmocka_unit_test(test_a_failure_outranks_an_interruption),
            cmocka_unit_test(test_an_interrupted_part_interrupts_the_job),
            cmocka_unit_test(test_a_cancelled_part_without_a_request_is_cancelled_last),
            cmocka_unit_test(test_a_requested_cancel_outranks_every_outcome),
            cmocka_unit_test(test_a_requested_cancel_without_a_cancelled_part_keeps_the_outcome),
            cmocka_unit_test(test_counts_give_what_the_parts_give),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
