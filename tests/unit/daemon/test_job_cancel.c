/* job_cancel.c through core_job_cancel: a queued job is cancelled at once and stored so; a
 * running one is handed to the supervisor to stop and is cancelled when its part ends; only its
 * client or an admin may; a finished one is 409; and a cancel that cannot be written or
 * committed is undone: the job is as it was and still runs. A real store, a fake supervisor
 * (jobs_fixture.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "blob.h"
#include "jobs_fixture.h"
#include "problem.h"
#include "store.h"

#define COPY0 "{\"benchmark\": \"copy\", \"device\": 0, \"params\": {\"size\": \"4MiB\"}}"

static char running[JOB_ID_MAX], queued[JOB_ID_MAX];

/* Device 0 runs one job of alice's and has a second queued behind it. */
static int two_jobs(void **state)
{
        if (fx_setup(state) < 0)
                return -1;
        assert_int_equal(fx_submit(COPY0, NULL, "alice", running), 202);
        assert_int_equal(fx_submit(COPY0, NULL, "alice", queued), 202);
        assert_string_equal(fx_state(running), "running");
        assert_string_equal(fx_state(queued), "queued");
        return 0;
}

/* The state the store holds for id (after a commit). */
static const char *stored_state(const char *id)
{
        static char buf[32];
        json_t *doc = NULL;

        store_sync(fx->d.store);
        if (fx_stored(fx->d.store, id, &doc) < 0)
                return "?";
        snprintf(buf, sizeof(buf), "%s", json_string_value(json_object_get(doc, "state")));
        json_decref(doc);
        return buf;
}

static void test_a_queued_job_is_cancelled_at_once_and_stored(void **state)
{
        (void)state;
        assert_int_equal(fx_cancel(queued, "alice", false), 200);
        assert_string_equal(fx_state(queued), "cancelled");
        assert_string_equal(stored_state(queued), "cancelled");
        assert_int_equal(fx->n_cancelled, 0); /* nothing ran: nothing to stop */
        assert_int_equal(fx_cancel(queued, "alice", false), 409);
}

/* Once its cancel is committed it leaves memory like every finished job, the store answering
 * for it: the cancel's answer polled its final ticket, which is how prune_finished used to tell. */
static void test_a_cancelled_queued_job_leaves_memory(void **state)
{
        struct problem p = {0};
        struct blob *b = NULL;

        (void)state;
        assert_int_equal(fx_cancel(queued, "alice", false), 200);
        store_sync(fx->d.store);
        jobs_tick(fx->d.jobs);
        assert_int_equal(job_query_get_finished(fx->d.jobs, queued, &b, &p), 0);
        assert_non_null(b);
        blob_unref(b);
        assert_string_equal(fx_state(queued), "cancelled");
}

static void test_a_running_job_is_stopped_by_the_supervisor(void **state)
{
        (void)state;
        assert_int_equal(fx_cancel(running, "alice", false), 200);
        assert_int_equal(fx->n_cancelled, 1);
        assert_string_equal(fx->cancelled[0].job, running);
        assert_string_equal(fx_state(running), "running");
        assert_true(json_is_true(fx_field(running, "cancel_requested")));
        fx_part_done(0, running, PART_CANCELLED);
        assert_string_equal(fx_state(running), "cancelled");
        /* The device takes the next. */
        assert_int_equal(fx->n_dispatched, 2);
        assert_string_equal(fx->dispatched[1].job, queued);
}

static void test_only_its_client_or_an_admin_may_cancel(void **state)
{
        (void)state;
        assert_int_equal(fx_cancel(queued, "mallory", false), 403);
        assert_string_equal(fx_state(queued), "queued");
        assert_int_equal(fx_cancel(queued, "root", true), 200);
        assert_int_equal(fx_cancel("not-a-uuid", NULL, true), 400);
        assert_int_equal(fx_cancel("01890000-0000-7000-8000-000000000000", NULL, true), 404);
}

static void test_a_cancel_that_cannot_be_written_is_undone(void **state)
{
        (void)state;
        fx->fail_put = 1;
        assert_int_equal(fx_cancel(queued, "alice", false), 500);
        assert_string_equal(fx_state(queued), "queued");
        assert_null(fx_field(queued, "cancel_requested"));
        assert_true(json_is_null(json_object_get(fx_part(queued, 0), "error")));
        /* Back in its queue: it runs once the device is free. */
        fx_part_done(0, running, PART_SUCCEEDED);
        assert_int_equal(fx->n_dispatched, 2);
        assert_string_equal(fx->dispatched[1].job, queued);
}

/* The refused cancel's row may reach the disk all the same (here only its poll fails): the
 * job, waiting again, answers from what it holds, never from that row (a job written again since
 * its submission does not give its document up to the store: job_compact). */
static void test_a_cancel_of_a_queued_job_that_does_not_commit_is_undone(void **state)
{
        (void)state;
        fx->fail_poll = 1;
        assert_int_equal(fx_cancel(queued, "alice", false), 507);
        assert_int_equal(fx->fail_poll, 0);
        store_sync(fx->d.store);
        assert_string_equal(fx_state(queued), "queued");
        assert_null(fx_field(queued, "cancel_requested"));
        assert_true(json_is_null(fx_field(queued, "finished")));
        fx_part_done(0, running, PART_SUCCEEDED);
        assert_string_equal(fx->dispatched[1].job, queued);
}

static void test_a_cancel_of_a_running_job_that_does_not_commit_is_undone(void **state)
{
        (void)state;
        fx->fail_wait = 1;
        assert_int_equal(fx_cancel(running, "alice", false), 507);
        assert_int_equal(fx->n_cancelled, 0); /* the worker was never told */
        assert_null(fx_field(running, "cancel_requested"));
        /* The queued part behind it was cancelled and put back. */
        assert_string_equal(fx_state(queued), "queued");
        fx_part_done(0, running, PART_SUCCEEDED);
        assert_string_equal(fx_state(running), "succeeded");
}

static void test_a_second_cancel_that_cannot_be_written_keeps_the_first(void **state)
{
        (void)state;
        assert_int_equal(fx_cancel(running, "alice", false), 200);
        fx->fail_put = 1;
        assert_int_equal(fx_cancel(running, "alice", false), 500);
        assert_true(json_is_true(fx_field(running, "cancel_requested")));
        fx_part_done(0, running, PART_CANCELLED);
        assert_string_equal(fx_state(running), "cancelled");
}

/* jobs_per_token counts a client's jobs that are not final: a cancel frees a slot, a cancel
 * undone takes it back. */
static void test_a_cancel_undone_counts_against_its_client_s_quota_again(void **state)
{
        (void)state;
        fx->cfg.jobs_per_token = 2; /* alice's two are open */
        assert_int_equal(fx_submit(COPY0, NULL, "alice", NULL), 429);
        fx->fail_poll = 1;
        assert_int_equal(fx_cancel(queued, "alice", false), 507);
        store_sync(fx->d.store);
        assert_int_equal(fx_submit(COPY0, NULL, "alice", NULL), 429);
        assert_int_equal(fx_cancel(queued, "alice", false), 200);
        assert_int_equal(fx_submit(COPY0, NULL, "alice", NULL), 202);
        assert_int_equal(fx_submit(COPY0, NULL, "alice", NULL), 429);
        /* Another client's count is its own. */
        assert_int_equal(fx_submit(COPY0, NULL, "bob", NULL), 202);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_a_queued_job_is_cancelled_at_once_and_stored,
                                            two_jobs, fx_teardown),
            cmocka_unit_test_setup_teardown(test_a_cancelled_queued_job_leaves_memory, two_jobs,
                                            fx_teardown),
            cmocka_unit_test_setup_teardown(test_a_running_job_is_stopped_by_the_supervisor,
                                            two_jobs, fx_teardown),
            cmocka_unit_test_setup_teardown(test_only_its_client_or_an_admin_may_cancel, two_jobs,
                                            fx_teardown),
            cmocka_unit_test_setup_teardown(test_a_cancel_that_cannot_be_written_is_undone,
                                            two_jobs, fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_a_cancel_of_a_queued_job_that_does_not_commit_is_undone, two_jobs,
                fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_a_cancel_of_a_running_job_that_does_not_commit_is_undone, two_jobs,
                fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_a_second_cancel_that_cannot_be_written_keeps_the_first, two_jobs, fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_a_cancel_undone_counts_against_its_client_s_quota_again, two_jobs,
                fx_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
