/* job_dispatch.c: a GPU runs one part at a time, the highest priority first and then in
 * submission order; a supervisor that cannot take a part leaves it queued; a faulted worker
 * fails what waits for it; a paused GPU holds its queue (and says why) until resumed; another
 * process on the GPU fails a busy_policy "fail" part; a result over max_result_bytes fails
 * its part; finished jobs leave memory once committed; with looks attached, a part ends on its
 * worker's look after it, or waits for umd's own. A real store, a fake supervisor
 * (jobs_fixture.h). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "blob.h"
#include "devices.h"
#include "gpustate.h"
#include "jobs_fixture.h"
#include "problem.h"
#include "store.h"
#include "util.h"

#define COPY0 "{\"benchmark\": \"copy\", \"device\": 0, \"params\": {\"size\": \"4MiB\"}}"
#define COPY0_PRIO(p)                                                                              \
        "{\"benchmark\": \"copy\", \"device\": 0, \"priority\": \"" p                              \
        "\", \"params\": {\"size\": \"4MiB\"}}"

static void test_the_highest_priority_runs_next_then_submission_order(void **state)
{
        char a[JOB_ID_MAX], low[JOB_ID_MAX], high[JOB_ID_MAX], high2[JOB_ID_MAX];

        (void)state;
        assert_int_equal(fx_submit(COPY0, NULL, NULL, a), 202);
        assert_int_equal(fx_submit(COPY0_PRIO("low"), NULL, NULL, low), 202);
        assert_int_equal(fx_submit(COPY0_PRIO("high"), NULL, NULL, high), 202);
        assert_int_equal(fx_submit(COPY0_PRIO("high"), NULL, NULL, high2), 202);
        assert_int_equal(fx->n_dispatched, 1); /* one part at a time on a GPU */
        fx_part_done(0, a, PART_SUCCEEDED);
        fx_part_done(0, high, PART_SUCCEEDED);
        fx_part_done(0, high2, PART_FAILED);
        assert_int_equal(fx->n_dispatched, 4);
        assert_string_equal(fx->dispatched[1].job, high);
        assert_string_equal(fx->dispatched[2].job, high2);
        assert_string_equal(fx->dispatched[3].job, low);
        assert_string_equal(fx_state(high2), "failed");
        assert_string_equal(json_string_value(json_object_get(fx_part(high2, 0), "error")),
                            "it failed");
}

static void test_a_part_the_supervisor_cannot_take_stays_queued(void **state)
{
        char a[JOB_ID_MAX];

        (void)state;
        fx->dispatch_errno = EBUSY;
        assert_int_equal(fx_submit(COPY0, NULL, NULL, a), 202);
        assert_string_equal(fx_state(a), "queued");
        fx->dispatch_errno = 0;
        fx_worker_state(0, WORKER_IDLE, NULL);
        assert_string_equal(fx_state(a), "running");
        assert_string_equal(fx->dispatched[0].job, a);
}

static void test_a_faulted_worker_fails_what_waits_for_it(void **state)
{
        char a[JOB_ID_MAX], b[JOB_ID_MAX];

        (void)state;
        assert_int_equal(fx_submit(COPY0, NULL, NULL, a), 202);
        assert_int_equal(fx_submit(COPY0, NULL, NULL, b), 202);
        fx_worker_state(0, WORKER_FAULTED, "it keeps crashing");
        assert_string_equal(fx_state(b), "failed");
        assert_non_null(strstr(json_string_value(json_object_get(fx_part(b, 0), "error")),
                               "is faulted: it keeps crashing"));
}

/* POST /v1/devices/{dev}/pause or /resume, as an admin would (devctl.c). */
static void set_paused(const char *dev, bool paused)
{
        json_t *body = json_pack("{s:s}", "reason", "maintenance"), *d = NULL;
        struct problem p = {0};

        if (paused)
                assert_int_equal(core_device_pause(dev, body, &d, &p), 0);
        else
                assert_int_equal(core_device_resume(dev, &d, &p), 0);
        json_decref(d);
        json_decref(body);
}

static void test_a_paused_gpu_holds_its_queue_until_resumed(void **state)
{
        char a[JOB_ID_MAX];

        (void)state;
        set_paused("0", true);
        assert_int_equal(fx_submit(COPY0, NULL, NULL, a), 202);
        assert_string_equal(fx_state(a), "queued");
        assert_string_equal(json_string_value(json_object_get(fx_part(a, 0), "waiting")),
                            "device paused: maintenance");
        assert_int_equal(fx->n_dispatched, 0);
        set_paused("0", false);
        assert_string_equal(fx_state(a), "running");
        assert_null(json_object_get(fx_part(a, 0), "waiting"));
}

static void test_another_process_fails_a_busy_policy_fail_part(void **state)
{
        struct gpu_state st = {.known = true, .other_processes = 1, .compute_mode = "default"};
        char a[JOB_ID_MAX], b[JOB_ID_MAX];

        (void)state;
        job_dispatch_gpu_observed(fx->d.jobs, 0, &st, fx_clock_monotonic_ms());
        assert_int_equal(fx_submit("{\"benchmark\": \"copy\", \"device\": 0, \"busy_policy\": "
                                   "\"fail\", \"params\": {\"size\": \"4MiB\"}}",
                                   NULL, NULL, a),
                         202);
        assert_string_equal(fx_state(a), "failed");
        assert_non_null(
            strstr(json_string_value(json_object_get(fx_part(a, 0), "error")), "busy_policy fail"));
        /* The default policy waits, and says why. */
        assert_int_equal(fx_submit(COPY0, NULL, NULL, b), 202);
        assert_string_equal(fx_state(b), "queued");
        assert_string_equal(json_string_value(json_object_get(fx_part(b, 0), "waiting")),
                            "GPU in use by 1 other process");
        st.other_processes = 0;
        job_dispatch_gpu_observed(fx->d.jobs, 0, &st, fx_clock_monotonic_ms());
        assert_string_equal(fx_state(b), "running");
}

static void test_a_result_over_max_result_bytes_fails_the_part(void **state)
{
        char a[JOB_ID_MAX];

        (void)state;
        assert_int_equal(fx_submit(COPY0, NULL, NULL, a), 202);
        /* Lowered after the submit: one this low is refused at submit (job_estimate.c) for a
         * result sure to pass it; here the worker's result is what is over. */
        fx->cfg.max_result_bytes = 4;
        fx_part_done(0, a, PART_SUCCEEDED);
        assert_string_equal(fx_state(a), "failed");
        assert_non_null(
            strstr(json_string_value(json_object_get(fx_part(a, 0), "error")), "max_result_bytes"));
}

#define COPY1 "{\"benchmark\": \"copy\", \"device\": 1, \"params\": {\"size\": \"4MiB\"}}"

/* 1: in memory; 0: gone from memory, the store answers with its final document. */
static int in_memory(const char *id)
{
        struct problem p = {0};
        struct blob *b = NULL;
        int r = job_query_get_finished(fx->d.jobs, id, &b, &p);

        blob_unref(b);
        return r;
}

/* Finished jobs leave memory once their final writes commit, wherever they stand among the
 * jobs that stay (prune_finished closes the gaps between them in one pass). */
static void test_finished_jobs_leave_memory_and_the_rest_stay_in_order(void **state)
{
        char a[JOB_ID_MAX], x[JOB_ID_MAX], b[JOB_ID_MAX], y[JOB_ID_MAX], c[JOB_ID_MAX];

        (void)state;
        assert_int_equal(fx_submit(COPY0, NULL, NULL, a), 202);
        assert_int_equal(fx_submit(COPY1, NULL, NULL, x), 202);
        assert_int_equal(fx_submit(COPY0, NULL, NULL, b), 202);
        assert_int_equal(fx_submit(COPY1, NULL, NULL, y), 202);
        assert_int_equal(fx_submit(COPY0, NULL, NULL, c), 202);
        fx_part_done(0, a, PART_SUCCEEDED);
        fx_part_done(0, b, PART_FAILED);
        store_sync(fx->d.store);
        jobs_tick(fx->d.jobs);
        assert_int_equal(in_memory(a), 0);
        assert_int_equal(in_memory(b), 0);
        assert_int_equal(in_memory(x), 1);
        assert_int_equal(in_memory(y), 1);
        assert_int_equal(in_memory(c), 1);
        /* What stays is still found (the index is searched by id, so its order must hold). */
        assert_string_equal(fx_state(x), "running");
        assert_string_equal(fx_state(y), "queued");
        assert_string_equal(fx_state(c), "running");
        assert_string_equal(fx_state(a), "succeeded");
        assert_string_equal(fx_state(b), "failed");
        fx_part_done(1, x, PART_SUCCEEDED);
        store_sync(fx->d.store);
        jobs_tick(fx->d.jobs);
        assert_int_equal(in_memory(x), 0);
        assert_string_equal(fx_state(y), "running");
        assert_int_equal(in_memory(y), 1);
        assert_int_equal(in_memory(c), 1);
}

/* The oldest jobs leave from the front of the index by moving it on, not by moving every job
 * after them; appends past the end then move it back or grow it. Every job that stays is still
 * found (by a binary search of the index: its order must hold). */
static void test_the_oldest_jobs_leave_and_the_index_stays_in_order_as_it_grows(void **state)
{
        /* Both GPUs in turn, so that each queue stays under queue_capacity_per_device. */
        enum { FIRST = 400, DONE = 300, MORE = 300 };
        static char ids[FIRST + MORE][JOB_ID_MAX];

        (void)state;
        for (size_t i = 0; i < FIRST + MORE; i++) {
                if (i == FIRST) { /* the oldest DONE finish and leave, a few at a time */
                        for (size_t k = 0; k < DONE; k++) {
                                fx->n_dispatched = 0; /* the fake keeps 32 dispatches */
                                fx_part_done(k % 2, ids[k], PART_SUCCEEDED);
                                if (k % 16 == 15 || k == DONE - 1) {
                                        store_sync(fx->d.store);
                                        jobs_tick(fx->d.jobs);
                                }
                        }
                }
                assert_int_equal(fx_submit(i % 2 ? COPY1 : COPY0, NULL, NULL, ids[i]), 202);
        }
        for (size_t i = 0; i < DONE; i++)
                assert_int_equal(in_memory(ids[i]), 0);
        for (size_t i = DONE; i < FIRST + MORE; i++) {
                assert_int_equal(in_memory(ids[i]), 1);
                assert_string_equal(fx_state(ids[i]), i < DONE + 2 ? "running" : "queued");
        }
}

/* With looks attached (coexist.c), a part's end waits for a look that began after it; the
 * worker's own look after the part (its result's "look") is that look. */
static void looks_attached_and_free(void)
{
        fx_attach_looks();
        fx_look(0, 0);
}

/* The other processes a part's "contended" says were seen (0: not contended). */
static json_int_t contended(const char *id)
{
        return json_integer_value(
            json_object_get(json_object_get(fx_part(id, 0), "contended"), "other_processes"));
}

static void test_a_part_ends_on_its_workers_look_and_the_ready_head_starts_on_it(void **state)
{
        char a[JOB_ID_MAX], b[JOB_ID_MAX];

        (void)state;
        looks_attached_and_free();
        assert_int_equal(fx_submit(COPY0, NULL, NULL, a), 202);
        fx_look(0, 0); /* the look a's start asked for */
        assert_string_equal(fx_state(a), "running");
        assert_int_equal(fx_submit(COPY0, NULL, NULL, b), 202);
        unsigned pokes = fx->pokes;
        fx_part_done_looked(0, a, PART_SUCCEEDED, "{\"others\": 0}");
        assert_string_equal(fx_state(a), "succeeded");
        assert_null(json_object_get(fx_part(a, 0), "contended"));
        /* b was submitted while a ran, after a's start: its start needs a look of its own. */
        assert_string_equal(fx_state(b), "queued");
        assert_int_equal(fx->pokes, pokes + 1);
        fx_look(0, 0);
        assert_string_equal(fx_state(b), "running");
}

static void test_a_head_ready_when_the_part_started_starts_on_the_workers_look(void **state)
{
        char a[JOB_ID_MAX], b[JOB_ID_MAX], c[JOB_ID_MAX];

        (void)state;
        looks_attached_and_free();
        assert_int_equal(fx_submit(COPY0, NULL, NULL, a), 202);
        assert_int_equal(fx_submit(COPY0, NULL, NULL, b), 202);
        assert_int_equal(fx_submit(COPY0, NULL, NULL, c), 202);
        fx_look(0, 0);
        assert_string_equal(fx_state(a), "running");
        unsigned pokes = fx->pokes;
        /* b was the ready head when a started: no look asked for between the two parts. */
        fx_part_done_looked(0, a, PART_SUCCEEDED, "{\"others\": 0}");
        assert_string_equal(fx_state(a), "succeeded");
        assert_string_equal(fx_state(b), "running");
        fx_part_done_looked(0, b, PART_FAILED, "{\"others\": 0}");
        assert_string_equal(fx_state(b), "failed");
        assert_string_equal(fx_state(c), "running");
        assert_int_equal(fx->pokes, pokes);
}

static void test_another_process_in_the_workers_look_marks_the_part_and_holds_the_next(void **state)
{
        char a[JOB_ID_MAX], b[JOB_ID_MAX];

        (void)state;
        looks_attached_and_free();
        fx->worker_pids[0] = getpid(); /* umd's own worker: never counted */
        assert_int_equal(fx_submit(COPY0, NULL, NULL, a), 202);
        assert_int_equal(fx_submit(COPY0, NULL, NULL, b), 202);
        fx_look(0, 0);
        assert_string_equal(fx_state(a), "running");
        char look[96];
        snprintf(look, sizeof(look), "{\"pids\": [%d, %d]}", (int)getpid(), (int)getppid());
        fx_part_done_looked(0, a, PART_SUCCEEDED, look);
        assert_string_equal(fx_state(a), "succeeded");
        assert_int_equal(contended(a), 1);
        assert_string_equal(fx_state(b), "queued");
        assert_string_equal(json_string_value(json_object_get(fx_part(b, 0), "waiting")),
                            "GPU in use by 1 other process");
}

static void test_without_the_workers_look_the_part_waits_for_umds_own(void **state)
{
        char a[JOB_ID_MAX];

        (void)state;
        looks_attached_and_free();
        assert_int_equal(fx_submit(COPY0, NULL, NULL, a), 202);
        fx_look(0, 0);
        unsigned pokes = fx->pokes;
        fx_part_done_looked(0, a, PART_SUCCEEDED, NULL);
        assert_string_equal(fx_state(a), "running"); /* held for the look */
        assert_int_equal(fx->pokes, pokes + 1);
        fx_look(0, 2);
        assert_string_equal(fx_state(a), "succeeded");
        assert_int_equal(contended(a), 2);
}

static void test_a_look_that_began_before_the_workers_says_nothing_of_other_processes(void **state)
{
        struct gpu_state st = {.known = true, .other_processes = 0, .compute_mode = "default"};
        char a[JOB_ID_MAX];

        (void)state;
        looks_attached_and_free();
        assert_int_equal(fx_submit(COPY0, NULL, NULL, a), 202);
        uint64_t began = fx_clock_monotonic_ms();
        fx_look(0, 0);
        fx_clock_advance(2);
        fx_part_done_looked(0, a, PART_SUCCEEDED, "{\"others\": 1}");
        job_dispatch_gpu_observed(fx->d.jobs, 0, &st, began);
        struct device *d = devices_at(fx->d.devices, 0);
        assert_int_equal(d->gpu.other_processes, 1);
}

/* start_commit_wait on and off (off is the default: a commit a part costs umd's CPU). */
static void start_commit_wait_on(struct umd_config *cfg)
{
        cfg->start_commit_wait = true;
}

static void start_commit_wait_off(struct umd_config *cfg)
{
        cfg->start_commit_wait = false;
}

static int setup_with(void **state, void (*configure)(struct umd_config *))
{
        fx_configure = configure;
        int r = fx_setup(state);
        fx_configure = NULL;
        return r;
}

static int setup_start_commit_wait_on(void **state)
{
        return setup_with(state, start_commit_wait_on);
}

static int setup_start_commit_wait_off(void **state)
{
        return setup_with(state, start_commit_wait_off);
}

/* A part's start is committed before its worker is sent the part (issue 57: a part sent first ran
 * where nothing of it could be recorded when the disk had gone, and ran again after a restart).
 * The previous part's end dispatches the next: it is running, not sent, until its start commits;
 * a cancel asked meanwhile is passed on once it is sent. */
static void test_a_part_is_sent_only_once_its_start_commits(void **state)
{
        char a[JOB_ID_MAX], b[JOB_ID_MAX];

        (void)state;
        assert_int_equal(fx_submit(COPY0, NULL, NULL, a), 202);
        assert_int_equal(fx_submit(COPY0, NULL, NULL, b), 202);
        assert_int_equal(fx->n_dispatched, 1);
        /* As fx_part_done, but without letting the starts go. */
        fx->cb.part_done(fx->cb.userdata, 0, a, PART_SUCCEEDED, NULL, NULL, NULL, NULL, -1);
        fx->cb.worker_state(fx->cb.userdata, 0, WORKER_IDLE, NULL);
        assert_int_equal(fx->n_dispatched, 1); /* b's start is queued, not yet committed */
        assert_int_equal(fx_cancel(b, NULL, true), 200);
        assert_int_equal(fx->n_dispatched, 2);
        assert_string_equal(fx->dispatched[1].job, b);
        /* Asked when the cancel came (the real supervisor answers ESRCH: it holds no such part)
         * and again once the part was sent. */
        assert_int_equal(fx->n_cancelled, 2);
        assert_string_equal(fx->cancelled[1].job, b);
}

/* A start that does not commit leaves the part queued, never sent: it started nowhere that a
 * restart could find. The next chance to dispatch starts it again. */
static void test_a_part_whose_start_does_not_commit_is_not_sent_and_waits_queued(void **state)
{
        char a[JOB_ID_MAX];

        (void)state;
        fx->fail_poll = 1; /* the start's commit reads back failed */
        assert_int_equal(fx_submit(COPY0, NULL, NULL, a), 202);
        assert_int_equal(fx->fail_poll, 0);
        assert_int_equal(fx->n_dispatched, 0);
        assert_string_equal(fx_state(a), "queued");
        assert_true(json_is_null(json_object_get(fx_part(a, 0), "started")));
        assert_true(json_is_null(fx_field(a, "started")));
        fx_worker_state(0, WORKER_IDLE, NULL);
        assert_int_equal(fx->n_dispatched, 1);
        assert_string_equal(fx_state(a), "running");
}

/* A job whose final write did not commit is shown as the store holds it (running), with why, not
 * as finished: a restart then would find it interrupted. Once a write of it commits, finished. */
static void test_a_final_state_not_committed_is_shown_running_until_it_is(void **state)
{
        char a[JOB_ID_MAX];

        (void)state;
        assert_int_equal(fx_submit(COPY0, NULL, NULL, a), 202);
        fx->fail_poll = 1; /* the final write reads back failed */
        fx_part_done(0, a, PART_SUCCEEDED);
        assert_string_equal(fx_state(a), "running");
        assert_int_equal(fx->fail_poll, 0);
        assert_non_null(strstr(json_string_value(fx_field(a, "not_stored")), "succeeded"));
        assert_true(json_is_null(fx_field(a, "finished")));
        jobs_retry_unsaved(fx->d.jobs);
        assert_string_equal(fx_state(a), "succeeded");
        assert_null(fx_field(a, "not_stored"));
}

/* start_commit_wait = false: the next part is sent as the previous one ends, its start queued
 * to the store with the rest, as before issue 57. */
static void test_without_start_commit_wait_a_part_is_sent_at_once(void **state)
{
        char a[JOB_ID_MAX], b[JOB_ID_MAX];

        (void)state;
        assert_int_equal(fx_submit(COPY0, NULL, NULL, a), 202);
        assert_int_equal(fx_submit(COPY0, NULL, NULL, b), 202);
        fx->cb.part_done(fx->cb.userdata, 0, a, PART_SUCCEEDED, NULL, NULL, NULL, NULL, -1);
        fx->cb.worker_state(fx->cb.userdata, 0, WORKER_IDLE, NULL);
        assert_int_equal(fx->n_dispatched, 2);
        assert_string_equal(fx->dispatched[1].job, b);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(
                test_the_highest_priority_runs_next_then_submission_order, fx_setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_a_part_the_supervisor_cannot_take_stays_queued,
                                            fx_setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_a_part_is_sent_only_once_its_start_commits,
                                            setup_start_commit_wait_on, fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_a_part_whose_start_does_not_commit_is_not_sent_and_waits_queued,
                setup_start_commit_wait_on, fx_teardown),
            cmocka_unit_test_setup_teardown(test_without_start_commit_wait_a_part_is_sent_at_once,
                                            setup_start_commit_wait_off, fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_a_final_state_not_committed_is_shown_running_until_it_is, fx_setup,
                fx_teardown),
            cmocka_unit_test_setup_teardown(test_a_faulted_worker_fails_what_waits_for_it, fx_setup,
                                            fx_teardown),
            cmocka_unit_test_setup_teardown(test_a_paused_gpu_holds_its_queue_until_resumed,
                                            fx_setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_another_process_fails_a_busy_policy_fail_part,
                                            fx_setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_a_result_over_max_result_bytes_fails_the_part,
                                            fx_setup, fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_finished_jobs_leave_memory_and_the_rest_stay_in_order, fx_setup, fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_the_oldest_jobs_leave_and_the_index_stays_in_order_as_it_grows, fx_setup,
                fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_a_part_ends_on_its_workers_look_and_the_ready_head_starts_on_it, fx_setup,
                fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_a_head_ready_when_the_part_started_starts_on_the_workers_look, fx_setup,
                fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_another_process_in_the_workers_look_marks_the_part_and_holds_the_next,
                fx_setup, fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_without_the_workers_look_the_part_waits_for_umds_own, fx_setup, fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_a_look_that_began_before_the_workers_says_nothing_of_other_processes, fx_setup,
                fx_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
