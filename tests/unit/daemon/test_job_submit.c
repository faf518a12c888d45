/* job_submit.c through core_job_submit: a job is answered once committed and only then
 * dispatched, with the tree it was submitted with when it waited near its queue's head, else
 * read back from the store; an Idempotency-Key replays its job or refuses another body; capacity
 * and a client's quota refuse with 429 and a Retry-After; a commit that fails answers 507 and
 * leaves nothing queued. A real store, a fake supervisor (jobs_fixture.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>

#include "jobs_fixture.h"
#include "jsonutil.h"
#include "store.h"

#define COPY0 "{\"benchmark\": \"copy\", \"device\": 0, \"params\": {\"size\": \"4MiB\"}}"
#define COPY1 "{\"benchmark\": \"copy\", \"device\": 1, \"params\": {\"size\": \"4MiB\"}}"

static void test_a_committed_job_is_dispatched_and_runs(void **state)
{
        char id[JOB_ID_MAX];

        (void)state;
        assert_int_equal(fx_submit(COPY0, NULL, NULL, id), 202);
        assert_int_equal(fx->n_dispatched, 1);
        assert_string_equal(fx->dispatched[0].job, id);
        assert_int_equal(fx->dispatched[0].device, 0);
        assert_string_equal(fx_state(id), "running");
        fx_part_done(0, id, PART_SUCCEEDED);
        assert_string_equal(fx_state(id), "succeeded");
        assert_true(json_is_object(json_object_get(fx_part(id, 0), "result")));
}

/* A job that waits near the head of its queue (queue_trees_per_device) keeps its tree, so its
 * dispatch reads nothing back from the store. */
static void test_a_job_near_its_queue_head_is_dispatched_without_a_read_back(void **state)
{
        char a[JOB_ID_MAX], b[JOB_ID_MAX];

        (void)state;
        assert_int_equal(fx_submit(COPY0, NULL, NULL, a), 202);
        assert_int_equal(fx_submit(COPY0, NULL, NULL, b), 202);
        assert_string_equal(fx_state(b), "queued");
        fx->read_backs = 0;
        fx_part_done(0, a, PART_SUCCEEDED);
        assert_int_equal(fx->n_dispatched, 2);
        assert_string_equal(fx->dispatched[1].job, b);
        assert_int_equal(fx->read_backs, 0);
        fx_part_done(0, b, PART_SUCCEEDED);
        assert_string_equal(fx_state(b), "succeeded");
}

/* When the head must be read back, so are the other tree-less jobs among the first
 * queue_trees_per_device of its queue, in one read: their dispatches read nothing more, and
 * each runs the document that was stored. */
static void test_the_jobs_behind_a_head_read_back_come_in_the_same_read(void **state)
{
        char a[JOB_ID_MAX], near[3][JOB_ID_MAX], far[4][JOB_ID_MAX];
        const char *body = "{\"benchmark\": \"copy\", \"device\": 0, \"labels\": {\"k\": \"v\"}, "
                           "\"params\": {\"size\": \"4MiB\"}}";

        (void)state;
        fx->cfg.queue_trees_per_device = 3;
        assert_int_equal(fx_submit(COPY0, NULL, NULL, a), 202); /* runs */
        for (int i = 0; i < 3; i++)                             /* keep their trees */
                assert_int_equal(fx_submit(COPY0, NULL, NULL, near[i]), 202);
        for (int i = 0; i < 4; i++) /* give them up */
                assert_int_equal(fx_submit(body, NULL, NULL, far[i]), 202);
        fx->read_backs = fx->batch_reads = fx->batch_jobs = 0;
        fx_part_done(0, a, PART_SUCCEEDED);
        for (int i = 0; i < 3; i++)
                fx_part_done(0, near[i], PART_SUCCEEDED);
        assert_int_equal(fx->batch_reads, 1); /* at far[0]'s dispatch: far[0..2], not far[3] */
        assert_int_equal(fx->batch_jobs, 3);
        for (int i = 0; i < 3; i++) {
                assert_string_equal(fx_state(far[i]), "running");
                assert_string_equal(
                    json_string_value(json_object_get(fx_field(far[i], "labels"), "k")), "v");
                fx_part_done(0, far[i], PART_SUCCEEDED);
                assert_string_equal(fx_state(far[i]), "succeeded");
        }
        assert_int_equal(fx->batch_reads, 1);
        /* far[3], alone at the head: read by itself. */
        assert_string_equal(fx_state(far[3]), "running");
        assert_int_equal(fx->read_backs, 1);
        assert_int_equal(fx->batch_reads, 1);
        assert_string_equal(json_string_value(json_object_get(fx_field(far[3], "labels"), "k")),
                            "v");
        assert_int_equal(fx->read_backs, 0 + 1);
}

/* Behind more waiting parts than queue_trees_per_device, a job gives its tree up; its dispatch
 * reads it back and runs the document that was stored. */
static void test_a_job_far_from_its_queue_head_is_read_back_at_dispatch(void **state)
{
        char a[JOB_ID_MAX], b[JOB_ID_MAX], c[JOB_ID_MAX];
        const char *body = "{\"benchmark\": \"copy\", \"device\": 0, \"labels\": {\"k\": \"v\"}, "
                           "\"params\": {\"size\": \"4MiB\"}}";

        (void)state;
        fx->cfg.queue_trees_per_device = 1;
        assert_int_equal(fx_submit(COPY0, NULL, NULL, a), 202);
        assert_int_equal(fx_submit(COPY0, NULL, NULL, b), 202); /* first in the queue */
        assert_int_equal(fx_submit(body, NULL, NULL, c), 202);  /* second: past the limit */
        fx->read_backs = 0;
        fx_part_done(0, a, PART_SUCCEEDED);
        assert_string_equal(fx->dispatched[1].job, b);
        assert_int_equal(fx->read_backs, 0);
        fx_part_done(0, b, PART_SUCCEEDED);
        assert_int_equal(fx->n_dispatched, 3);
        assert_string_equal(fx->dispatched[2].job, c);
        assert_int_equal(fx->read_backs, 1);
        assert_string_equal(fx_state(c), "running");
        assert_string_equal(json_string_value(json_object_get(fx_field(c, "labels"), "k")), "v");
        fx_part_done(0, c, PART_SUCCEEDED);
        assert_string_equal(fx_state(c), "succeeded");
}

static void submit_body(const char *body, const char *idem, bool bytes_ok,
                        struct core_submitted *ret)
{
        json_t *b = json_loads(body, 0, NULL);
        struct problem p = {0};
        int r;

        assert_non_null(b);
        *ret = (struct core_submitted){.bytes_ok = bytes_ok};
        r = core_job_submit(b, idem, NULL, ret, &p);
        json_decref(b);
        assert_true(r >= 0);
}

/* The job as a GET answers it now, dumped as an answer is. */
static char *get_dump(const char *id)
{
        struct problem p = {0};
        json_t *job = NULL;
        char *text;

        assert_int_equal(core_job_get(id, &job, &p), 0);
        text = json_dump_compact(job, NULL);
        json_decref(job);
        assert_non_null(text);
        return text;
}

/* A new job nothing changed since its write is answered with that write's bytes, which are what
 * a dump of its document gives. */
static void test_a_new_job_is_answered_with_the_bytes_of_its_write(void **state)
{
        struct core_submitted sub;
        char first[JOB_ID_MAX];

        (void)state;
        assert_int_equal(fx_submit(COPY0, NULL, NULL, first), 202); /* runs: the next waits */
        submit_body(COPY0, NULL, true, &sub);
        assert_null(sub.job);
        assert_non_null(sub.body);
        assert_int_equal(sub.body_len, strlen(sub.body));
        char *now = get_dump(sub.id);
        assert_string_equal(sub.body, now);
        free(now);
        json_t *back = json_loads(sub.body, 0, NULL);
        assert_string_equal(json_string_value(json_object_get(back, "id")), sub.id);
        assert_string_equal(json_string_value(json_object_get(back, "state")), "queued");
        assert_null(json_object_get(back, "request")); /* bookkeeping stays out, as in a GET */
        json_decref(back);
        core_submitted_done(&sub);
}

static atomic_bool holder_holds, holder_release;
static pthread_t holder;

static void *holder_main(void *arg)
{
        (void)arg;
        core_lock();
        atomic_store(&holder_holds, true);
        while (!atomic_load(&holder_release))
                ;
        core_unlock();
        return NULL;
}

/* Right after the commit: another thread takes core_lock and keeps it. */
static void take_the_lock_elsewhere(void)
{
        atomic_store(&holder_holds, false);
        atomic_store(&holder_release, false);
        assert_int_equal(pthread_create(&holder, NULL, holder_main, NULL), 0);
        while (!atomic_load(&holder_holds))
                ;
}

/* A submit whose commit is in while another thread holds core_lock is answered without waiting
 * for it; the job starts once that holder lets go (the rest of the submit is left to it). */
static void test_a_committed_submit_is_answered_without_waiting_for_the_lock(void **state)
{
        struct core_submitted sub;

        (void)state;
        fx->after_commit = take_the_lock_elsewhere;
        submit_body(COPY0, NULL, true, &sub);
        fx->after_commit = NULL;
        assert_non_null(sub.body); /* answered while the other thread still holds the lock */
        assert_int_equal(fx->n_dispatched, 0);
        atomic_store(&holder_release, true);
        assert_int_equal(pthread_join(holder, NULL), 0);
        fx_settle_starts(); /* its start committed: sent */
        assert_int_equal(fx->n_dispatched, 1);
        assert_string_equal(fx->dispatched[0].job, sub.id);
        assert_string_equal(fx_state(sub.id), "running");
        core_submitted_done(&sub);
}

/* A caller that asks for a document (the daemon's own scheduled checks) gets one. */
static void test_a_caller_without_bytes_ok_gets_the_document(void **state)
{
        struct core_submitted sub;

        (void)state;
        submit_body(COPY0, NULL, false, &sub);
        assert_null(sub.body);
        assert_non_null(sub.job);
        assert_string_equal(json_string_value(json_object_get(sub.job, "id")), sub.id);
        core_submitted_done(&sub);
}

/* A replay answers the job as it is now, which its first write no longer is. */
static void test_a_replay_is_answered_with_the_job_as_it_is_now(void **state)
{
        struct core_submitted sub;
        char id[JOB_ID_MAX];

        (void)state;
        assert_int_equal(fx_submit(COPY0, "key-2", NULL, id), 202);
        assert_string_equal(fx_state(id), "running");
        submit_body(COPY0, "key-2", true, &sub);
        assert_null(sub.body);
        assert_string_equal(sub.id, id);
        assert_string_equal(json_string_value(json_object_get(sub.job, "state")), "running");
        core_submitted_done(&sub);
}

static void test_an_idempotency_key_replays_its_job_and_refuses_another_body(void **state)
{
        char a[JOB_ID_MAX], b[JOB_ID_MAX];

        (void)state;
        assert_int_equal(fx_submit(COPY1, "key-1", "alice", a), 202);
        assert_int_equal(fx_submit(COPY1, "key-1", "alice", b), 200);
        assert_string_equal(a, b);
        assert_int_equal(fx_submit(COPY0, "key-1", "alice", NULL), 409);
        /* The key is the client's own: another client's is another job. */
        assert_int_equal(fx_submit(COPY1, "key-1", "bob", b), 202);
        assert_string_not_equal(a, b);
        /* A replay once the job finished and left memory comes from the store. */
        fx_part_done(1, a, PART_SUCCEEDED);
        fx_part_done(1, b, PART_SUCCEEDED);
        assert_int_equal(fx_submit(COPY1, "key-1", "alice", b), 200);
        assert_string_equal(a, b);
}

/* Keys are found by a hash of key and client, not by a walk of every job: hundreds of them,
 * each replayed while its job is in memory and after it left, the table grown and shrunk. */
static void test_many_keys_each_replay_their_own_job_before_and_after_it_leaves(void **state)
{
        enum { N = 300, DONE = 100 };
        static char ids[N][JOB_ID_MAX];
        /* Anonymous and three clients, each under jobs_per_token (100). */
        static const char *const client[] = {NULL, "alice", "bob", "carol"};
        char key[32], again[JOB_ID_MAX];

        (void)state;
        for (size_t i = 0; i < N; i++) {
                snprintf(key, sizeof(key), "k-%zu", i);
                assert_int_equal(fx_submit(i % 2 ? COPY1 : COPY0, key, client[i % 4], ids[i]), 202);
        }
        for (size_t i = 0; i < DONE; i++) { /* the oldest leave memory */
                fx->n_dispatched = 0;       /* the fake keeps 32 dispatches */
                fx_part_done(i % 2, ids[i], PART_SUCCEEDED);
        }
        store_sync(fx->d.store);
        jobs_tick(fx->d.jobs);
        for (size_t i = 0; i < N; i++) {
                snprintf(key, sizeof(key), "k-%zu", i);
                assert_int_equal(fx_submit(i % 2 ? COPY1 : COPY0, key, client[i % 4], again), 200);
                assert_string_equal(again, ids[i]);
                assert_int_equal(fx_submit(i % 2 ? COPY0 : COPY1, key, client[i % 4], NULL), 409);
        }
        /* One in memory is answered as it is now (running), not as its row was stored. */
        struct core_submitted sub;
        submit_body(COPY0, "k-100", true, &sub);
        assert_string_equal(sub.id, ids[100]);
        assert_string_equal(json_string_value(json_object_get(sub.job, "state")), "running");
        core_submitted_done(&sub);
        /* Another client's key of the same name is another job. */
        assert_int_equal(fx_submit(COPY0, "k-250", "dave", again), 202);
        assert_string_not_equal(again, ids[250]);
}

static void test_a_full_queue_is_429_with_retry_after(void **state)
{
        json_t *body = json_loads(COPY0, 0, NULL);
        struct core_submitted sub = {.bytes_ok = true};
        struct problem p = {0};
        unsigned cap = fx->cfg.queue_capacity;

        (void)state;
        assert_int_equal(fx_submit(COPY0, NULL, NULL, NULL), 202); /* runs: leaves the queue */
        fx->cfg.queue_capacity = 1;
        assert_int_equal(fx_submit(COPY0, NULL, NULL, NULL), 202); /* queued behind it */
        assert_true(core_job_submit(body, NULL, NULL, &sub, &p) < 0);
        assert_int_equal(p.status, 429);
        assert_int_equal(p.retry_after_s, 5);
        assert_null(sub.job);
        assert_null(sub.body);
        fx->cfg.queue_capacity = cap;
        json_decref(body);
}

static void test_a_client_over_its_quota_is_429(void **state)
{
        unsigned quota = fx->cfg.jobs_per_token;

        (void)state;
        fx->cfg.jobs_per_token = 1;
        assert_int_equal(fx_submit(COPY1, NULL, "carol", NULL), 202);
        assert_int_equal(fx_submit(COPY1, NULL, "carol", NULL), 429);
        assert_int_equal(fx_submit(COPY1, NULL, "dave", NULL), 202);
        fx->cfg.jobs_per_token = quota;
}

/* A client's finished job frees its slot, and leaving memory (final already) frees none. */
static void test_a_client_s_finished_job_frees_its_quota_once(void **state)
{
        char a[JOB_ID_MAX];

        (void)state;
        fx->cfg.jobs_per_token = 2;
        assert_int_equal(fx_submit(COPY1, NULL, "carol", a), 202);
        assert_int_equal(fx_submit(COPY1, NULL, "carol", NULL), 202);
        assert_int_equal(fx_submit(COPY1, NULL, "carol", NULL), 429);
        fx_part_done(1, a, PART_SUCCEEDED);
        assert_int_equal(fx_submit(COPY1, NULL, "carol", NULL), 202);
        store_sync(fx->d.store);
        jobs_tick(fx->d.jobs); /* a leaves memory */
        assert_int_equal(fx_submit(COPY1, NULL, "carol", NULL), 429);
}

static void test_a_commit_that_fails_is_507_and_queues_nothing(void **state)
{
        size_t queued, running, total, before = fx->n_dispatched;

        (void)state;
        job_query_counts(fx->d.jobs, &queued, &running, &total);
        fx->fail_wait = 1;
        assert_int_equal(fx_submit(COPY0, NULL, NULL, NULL), 507);
        assert_int_equal(fx->fail_wait, 0);
        size_t queued2, running2;
        job_query_counts(fx->d.jobs, &queued2, &running2, &total);
        assert_int_equal(queued2, queued);
        assert_int_equal(running2, running);
        assert_int_equal(fx->n_dispatched, before);
}

static void test_a_write_that_cannot_be_queued_is_500(void **state)
{
        (void)state;
        fx->fail_put = 1;
        assert_int_equal(fx_submit(COPY0, NULL, NULL, NULL), 500);
        assert_int_equal(fx->fail_put, 0);
}

static void test_a_bad_body_is_400_and_touches_nothing(void **state)
{
        size_t before = fx->n_dispatched;

        (void)state;
        assert_int_equal(fx_submit("{\"benchmark\": \"nope\"}", NULL, NULL, NULL), 400);
        assert_int_equal(fx_submit("{\"benchmark\": \"copy\", \"device\": 7}", NULL, NULL, NULL),
                         400);
        assert_int_equal(fx->n_dispatched, before);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_a_committed_job_is_dispatched_and_runs, fx_setup,
                                            fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_a_job_near_its_queue_head_is_dispatched_without_a_read_back, fx_setup,
                fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_a_job_far_from_its_queue_head_is_read_back_at_dispatch, fx_setup, fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_the_jobs_behind_a_head_read_back_come_in_the_same_read, fx_setup, fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_an_idempotency_key_replays_its_job_and_refuses_another_body, fx_setup,
                fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_many_keys_each_replay_their_own_job_before_and_after_it_leaves, fx_setup,
                fx_teardown),
            cmocka_unit_test_setup_teardown(test_a_new_job_is_answered_with_the_bytes_of_its_write,
                                            fx_setup, fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_a_committed_submit_is_answered_without_waiting_for_the_lock, fx_setup,
                fx_teardown),
            cmocka_unit_test_setup_teardown(test_a_caller_without_bytes_ok_gets_the_document,
                                            fx_setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_a_replay_is_answered_with_the_job_as_it_is_now,
                                            fx_setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_a_full_queue_is_429_with_retry_after, fx_setup,
                                            fx_teardown),
            cmocka_unit_test_setup_teardown(test_a_client_over_its_quota_is_429, fx_setup,
                                            fx_teardown),
            cmocka_unit_test_setup_teardown(test_a_client_s_finished_job_frees_its_quota_once,
                                            fx_setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_a_commit_that_fails_is_507_and_queues_nothing,
                                            fx_setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_a_write_that_cannot_be_queued_is_500, fx_setup,
                                            fx_teardown),
            cmocka_unit_test_setup_teardown(test_a_bad_body_is_400_and_touches_nothing, fx_setup,
                                            fx_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
