/* job_index.c's recovery at start: after a crash a running job is interrupted and the jobs
 * queued behind it run again in their order; after an orderly stop the same, with shutdown's
 * own reason; a queued part whose GPU is gone is failed; finished jobs are read from the
 * store; a waiting job, held as bytes, answers as it is stored; waiting jobs recovered from
 * their columns are checked after start (job_recover.c). A real store, a fake supervisor
 * (jobs_fixture.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <sqlite3.h>
#include <stdio.h>

#include "jobs_fixture.h"
#include "store.h"
#include "job_state.h"
#include "util.h"

#define COPY(dev)                                                                                  \
        "{\"benchmark\": \"copy\", \"device\": " #dev ", \"params\": {\"size\": \"4MiB\"}}"

static const char *part_error(const char *id)
{
        return json_string_value(json_object_get(fx_part(id, 0), "error"));
}

static void test_after_a_crash_running_is_interrupted_and_the_queue_runs_in_order(void **state)
{
        char a[JOB_ID_MAX], b[3][JOB_ID_MAX];

        (void)state;
        assert_int_equal(fx_submit(COPY(0), NULL, NULL, a), 202);
        for (size_t i = 0; i < 3; i++)
                assert_int_equal(fx_submit(COPY(0), NULL, NULL, b[i]), 202);
        fx_restart(2, true);
        assert_string_equal(fx_state(a), "interrupted");
        assert_string_equal(part_error(a), "umd stopped while the job ran (interrupted)");
        assert_int_equal(fx->n_dispatched, 1);
        assert_string_equal(fx->dispatched[0].job, b[0]);
        fx_part_done(0, b[0], PART_SUCCEEDED);
        fx_part_done(0, b[1], PART_SUCCEEDED);
        assert_int_equal(fx->n_dispatched, 3);
        assert_string_equal(fx->dispatched[1].job, b[1]);
        assert_string_equal(fx->dispatched[2].job, b[2]);
}

static void test_an_orderly_stop_interrupts_what_runs_and_keeps_what_waits(void **state)
{
        char a[JOB_ID_MAX], b[JOB_ID_MAX];

        (void)state;
        assert_int_equal(fx_submit(COPY(1), NULL, NULL, a), 202);
        assert_int_equal(fx_submit(COPY(1), NULL, NULL, b), 202);
        fx_restart(2, false);
        assert_string_equal(fx_state(a), "interrupted");
        assert_string_equal(part_error(a), "umd stopped while the part ran");
        assert_string_equal(fx_state(b), "running");
        assert_string_equal(fx->dispatched[0].job, b);
}

static void test_a_part_queued_for_a_gpu_that_is_gone_is_failed(void **state)
{
        char a[JOB_ID_MAX], b[JOB_ID_MAX], c[JOB_ID_MAX];

        (void)state;
        assert_int_equal(fx_submit(COPY(1), NULL, NULL, a), 202);
        assert_int_equal(fx_submit(COPY(1), NULL, NULL, b), 202);
        assert_int_equal(fx_submit(COPY(0), NULL, NULL, c), 202);
        fx_restart(1, true);
        assert_string_equal(fx_state(b), "failed");
        assert_string_equal(part_error(b),
                            "the device this part was queued for is no longer present");
        assert_string_equal(fx_state(c), "interrupted");
}

static void test_finished_jobs_are_read_from_the_store_after_a_restart(void **state)
{
        char a[JOB_ID_MAX], b[JOB_ID_MAX];

        (void)state;
        assert_int_equal(fx_submit(COPY(0), NULL, NULL, a), 202);
        fx_part_done(0, a, PART_SUCCEEDED);
        assert_int_equal(fx_submit(COPY(0), NULL, NULL, b), 202);
        assert_int_equal(fx_cancel(b, NULL, true), 200);
        fx_restart(2, true);
        assert_string_equal(fx_state(a), "succeeded");
        assert_true(json_is_object(json_object_get(fx_part(a, 0), "result")));
        assert_int_equal(fx->n_dispatched, 0);
        size_t queued, running, total;
        job_query_counts(fx->d.jobs, &queued, &running, &total);
        assert_int_equal(queued, 0);
        assert_int_equal(running, 0);
        assert_int_equal(total, 2);
}

/* A job that only waits holds its document as bytes (job_compact) less the keys struct job
 * can put back: it answers as it is stored, and after a restart runs with the same document.
 * (queue_trees_per_device 0: no job keeps its tree for being near its queue's head.) */
static void test_a_waiting_job_answers_as_it_is_stored_before_and_after_a_restart(void **state)
{
        char a[JOB_ID_MAX], b[JOB_ID_MAX], again[JOB_ID_MAX];
        const char *body = "{\"benchmark\": \"copy\", \"device\": 0, \"priority\": \"low\", "
                           "\"labels\": {\"k\": \"v\"}, \"params\": {\"size\": \"4MiB\"}}";
        json_t *stored = NULL;

        (void)state;
        fx->cfg.queue_trees_per_device = 0;
        assert_int_equal(fx_submit(COPY(0), NULL, NULL, a), 202);
        assert_int_equal(fx_submit(body, "key-1", NULL, b), 202);
        assert_string_equal(fx_state(b), "queued");
        assert_string_equal(json_string_value(fx_field(b, "id")), b);
        assert_string_equal(json_string_value(fx_field(b, "priority")), "low");
        assert_int_equal(fx_stored(fx->d.store, b, &stored), 0);
        const char *key;
        json_t *value;
        json_object_foreach(stored, key, value)
        {
                assert_true(json_equal(fx_field(b, key), value));
        }
        json_decref(stored);
        /* The cached idempotency key finds it without its tree. */
        assert_int_equal(fx_submit(body, "key-1", NULL, again), 200);
        assert_string_equal(again, b);

        fx_restart(2, true);
        assert_string_equal(fx_state(a), "interrupted");
        assert_int_equal(fx->n_dispatched, 1);
        assert_string_equal(fx->dispatched[0].job, b);
        assert_string_equal(fx_state(b), "running");
        assert_string_equal(json_string_value(fx_field(b, "priority")), "low");
        assert_string_equal(json_string_value(json_object_get(fx_field(b, "labels"), "k")), "v");
        fx_part_done(0, b, PART_SUCCEEDED);
        assert_string_equal(fx_state(b), "succeeded");
        assert_string_equal(json_string_value(fx_field(b, "id")), b);
}

/* One statement on the fixture's database through a connection of its own, as a hand or a
 * damaged disk would change it while umd is down. */
static void db_exec(const char *sql, const char *id)
{
        char path[4096];
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;

        snprintf(path, sizeof(path), "%s/umd.db", fx->dir);
        assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
        sqlite3_busy_timeout(db, 5000);
        assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        assert_int_equal(sqlite3_step(st), SQLITE_DONE);
        assert_int_equal(sqlite3_changes(db), 1);
        sqlite3_finalize(st);
        sqlite3_close(db);
}

/* One text the fixture's database answers for id ("" when no row), on a connection of its own. */
static void db_text(const char *sql, const char *id, char *ret, size_t size)
{
        char path[4096];
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;

        snprintf(path, sizeof(path), "%s/umd.db", fx->dir);
        assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        ret[0] = '\0';
        if (sqlite3_step(st) == SQLITE_ROW)
                snprintf(ret, size, "%s", (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
        sqlite3_close(db);
}

static void test_a_start_is_stored_as_its_part_row_and_the_document_follows_when_shown(void **state)
{
        char a[JOB_ID_MAX], txt[64];

        (void)state;
        assert_int_equal(fx_submit(COPY(0), NULL, NULL, a), 202);
        assert_int_equal(fx->n_dispatched, 1);
        store_sync(fx->d.store);
        /* The part's row says it runs (a crash now recovers it interrupted); the document, not
         * yet written again, still says queued. */
        db_text("SELECT state FROM parts WHERE job_id = ?1 AND idx = 0", a, txt, sizeof(txt));
        assert_string_equal(txt, "running");
        db_text("SELECT state FROM jobs WHERE id = ?1", a, txt, sizeof(txt));
        assert_string_equal(txt, "queued");
        /* An answer that shows the job writes its document first. */
        assert_string_equal(fx_state(a), "running");
        db_text("SELECT state FROM jobs WHERE id = ?1", a, txt, sizeof(txt));
        assert_string_equal(txt, "running");
        db_text("SELECT json_extract(doc, '$.parts[0].state') FROM jobs WHERE id = ?1", a, txt,
                sizeof(txt));
        assert_string_equal(txt, "running");
}

static void test_a_start_whose_part_row_cannot_be_queued_writes_the_whole_document(void **state)
{
        char a[JOB_ID_MAX], txt[64];

        (void)state;
        fx->fail_put_part = 1;
        assert_int_equal(fx_submit(COPY(0), NULL, NULL, a), 202);
        assert_int_equal(fx->n_dispatched, 1);
        assert_int_equal(fx->fail_put_part, 0);
        store_sync(fx->d.store);
        /* No answer showed the job: the document was queued at once all the same. */
        db_text("SELECT state FROM jobs WHERE id = ?1", a, txt, sizeof(txt));
        assert_string_equal(txt, "running");
        db_text("SELECT state FROM parts WHERE job_id = ?1 AND idx = 0", a, txt, sizeof(txt));
        assert_string_equal(txt, "running");
}

#define COPY_BOTH "{\"benchmark\": \"copy\", \"devices\": [0, 1], \"params\": {\"size\": \"4MiB\"}}"

/* Past JOB_PERSIST_DELAY_MS (a second; private to the job files): the jobs' clock is moved on
 * this far (fx_clock_advance), nothing sleeps. */
#define PAST_DELAY_MS 1200

/* Past JOB_PERSIST_DELAY_MS (a second), the next hold of the lock writes a started part as its
 * own document, though no answer showed the job: when it started is stored, and the job's
 * document is not written again for it. */
static void
test_a_start_is_written_as_the_part_s_own_document_once_its_delay_has_passed(void **state)
{
        char a[JOB_ID_MAX], b[JOB_ID_MAX], txt[64];
        struct store_wal_stats before, after;

        (void)state;
        assert_int_equal(fx_submit(COPY(0), NULL, NULL, a), 202);
        assert_int_equal(fx->n_dispatched, 1);
        store_sync(fx->d.store);
        db_text("SELECT doc IS NULL FROM parts WHERE job_id = ?1 AND idx = 0", a, txt, sizeof(txt));
        assert_string_equal(txt, "1");
        store_wal_stats(fx->d.store, &before);
        fx_clock_advance(PAST_DELAY_MS);
        assert_int_equal(fx_submit(COPY(1), NULL, NULL, b), 202); /* a hold of the lock */
        store_sync(fx->d.store);
        store_wal_stats(fx->d.store, &after);
        db_text("SELECT json_extract(doc, '$.state') FROM parts WHERE job_id = ?1 AND idx = 0", a,
                txt, sizeof(txt));
        assert_string_equal(txt, "running");
        db_text("SELECT json_extract(doc, '$.started') IS NOT NULL FROM parts WHERE job_id = ?1", a,
                txt, sizeof(txt));
        assert_string_equal(txt, "1");
        /* The second job's submission is the only document written. */
        assert_int_equal(after.documents_written - before.documents_written, 1);
        db_text("SELECT state FROM jobs WHERE id = ?1", a, txt, sizeof(txt));
        assert_string_equal(txt, "queued");
        /* The second job started a moment ago: not yet due. */
        db_text("SELECT doc IS NULL FROM parts WHERE job_id = ?1 AND idx = 0", b, txt, sizeof(txt));
        assert_string_equal(txt, "1");
}

/* A part that ends while another of its job runs is written as its own document once its delay
 * has passed, result and all; a crash then loses neither it nor its result, and recovery writes
 * the job's document, which carries it. */
static void test_a_part_that_ends_before_its_job_survives_a_crash_with_its_result(void **state)
{
        char a[JOB_ID_MAX], b[JOB_ID_MAX], txt[64];

        (void)state;
        assert_int_equal(fx_submit(COPY_BOTH, NULL, NULL, a), 202);
        assert_int_equal(fx->n_dispatched, 2);
        fx_part_done(0, a, PART_SUCCEEDED);
        fx_clock_advance(PAST_DELAY_MS);
        assert_int_equal(fx_submit(COPY(0), NULL, NULL, b), 202); /* a hold of the lock */
        store_sync(fx->d.store);
        assert_true(fx->part_docs >= 1);
        db_text("SELECT json_extract(doc, '$.result.gbps') FROM parts WHERE job_id = ?1 AND "
                "idx = 0",
                a, txt, sizeof(txt));
        assert_string_equal(txt, "10.0");
        db_text("SELECT state FROM jobs WHERE id = ?1", a, txt, sizeof(txt));
        assert_string_equal(txt, "queued");
        fx_restart(2, true);
        assert_string_equal(json_string_value(json_object_get(fx_part(a, 0), "state")),
                            "succeeded");
        assert_true(json_real_value(
                        json_object_get(json_object_get(fx_part(a, 0), "result"), "gbps")) == 10.0);
        assert_string_equal(json_string_value(json_object_get(fx_part(a, 1), "state")),
                            "interrupted");
        assert_non_null(json_string_value(fx_field(a, "started")));
        store_sync(fx->d.store);
        db_text("SELECT count(*) FROM parts WHERE job_id = ?1 AND doc IS NOT NULL", a, txt,
                sizeof(txt));
        assert_string_equal(txt, "0");
        db_text("SELECT json_extract(doc, '$.parts[0].result.gbps') FROM jobs WHERE id = ?1", a,
                txt, sizeof(txt));
        assert_string_equal(txt, "10.0");
}

/* Job a, on both GPUs, with its first part ended and written as that part's own document: past
 * the delay, another submit's hold of the lock writes what fell due, and its commit is waited
 * for. */
static void job_between_parts(char a[JOB_ID_MAX])
{
        char b[JOB_ID_MAX];

        assert_int_equal(fx_submit(COPY_BOTH, NULL, NULL, a), 202);
        fx_part_done(0, a, PART_SUCCEEDED);
        fx_clock_advance(PAST_DELAY_MS);
        assert_int_equal(fx_submit(COPY(0), NULL, NULL, b), 202);
        store_sync(fx->d.store);
}

/* The job's final document carries every part: their own documents are cleared with it. */
static void test_a_job_s_final_document_clears_its_parts_own(void **state)
{
        char a[JOB_ID_MAX], txt[64];

        (void)state;
        job_between_parts(a);
        db_text("SELECT count(*) FROM parts WHERE job_id = ?1 AND doc IS NOT NULL", a, txt,
                sizeof(txt));
        assert_string_equal(txt, "2"); /* the end of one, the start of the other */
        fx_part_done(1, a, PART_SUCCEEDED);
        store_sync(fx->d.store);
        db_text("SELECT count(*) FROM parts WHERE job_id = ?1 AND doc IS NOT NULL", a, txt,
                sizeof(txt));
        assert_string_equal(txt, "0");
        db_text("SELECT state FROM jobs WHERE id = ?1", a, txt, sizeof(txt));
        assert_string_equal(txt, "succeeded");
}

/* The page of a list by job_query_list, as text, for filter state (-1: any). */
static char *list_text(int st)
{
        struct job_filter f = {.state = st, .device = -1, .limit = 50};
        struct job_rows rows = {0};
        struct problem p = {0};

        assert_int_equal(job_query_list(fx->d.jobs, &f, &rows, &p), 0);
        assert_non_null(rows.rows);
        return rows.rows;
}

/* A list is answered from the jobs' rows: a job whose part ended while the other waits, written
 * as that part's own document, is written whole before the list reads, so it is listed as
 * running with that part's end; once current, another list writes nothing. */
static void test_a_list_writes_whole_a_job_whose_row_is_behind_its_parts(void **state)
{
        char a[JOB_ID_MAX], txt[64];
        struct store_wal_stats before, after;

        (void)state;
        job_between_parts(a);
        db_text("SELECT state FROM jobs WHERE id = ?1", a, txt, sizeof(txt));
        assert_string_equal(txt, "queued"); /* behind: the parts' own documents hold the rest */

        _cleanup_free_ char *running = list_text(JOB_RUNNING);
        assert_non_null(strstr(running, a));
        db_text("SELECT state FROM jobs WHERE id = ?1", a, txt, sizeof(txt));
        assert_string_equal(txt, "running");
        db_text("SELECT json_extract(summary, '$.parts[0].state') FROM jobs WHERE id = ?1", a, txt,
                sizeof(txt));
        assert_string_equal(txt, "succeeded");

        store_wal_stats(fx->d.store, &before);
        _cleanup_free_ char *again = list_text(-1);
        assert_non_null(strstr(again, a));
        store_sync(fx->d.store);
        store_wal_stats(fx->d.store, &after);
        assert_int_equal(after.documents_written, before.documents_written);
}

/* A list by a final state reads final jobs' rows alone: a job behind is left to its own next
 * write (no document is written for that list). */
static void test_a_list_by_a_final_state_writes_no_job(void **state)
{
        char a[JOB_ID_MAX], txt[64];
        struct store_wal_stats before, after;

        (void)state;
        job_between_parts(a);
        store_wal_stats(fx->d.store, &before);
        _cleanup_free_ char *done = list_text(JOB_SUCCEEDED);
        assert_null(strstr(done, a));
        store_sync(fx->d.store);
        store_wal_stats(fx->d.store, &after);
        assert_int_equal(after.documents_written, before.documents_written);
        db_text("SELECT state FROM jobs WHERE id = ?1", a, txt, sizeof(txt));
        assert_string_equal(txt, "queued");
}

/* A part's own document that cannot be queued: the job's whole document is, as before. */
static void test_a_part_s_own_document_that_cannot_be_queued_writes_the_whole_job(void **state)
{
        char a[JOB_ID_MAX], b[JOB_ID_MAX], txt[64];

        (void)state;
        assert_int_equal(fx_submit(COPY(0), NULL, NULL, a), 202);
        store_sync(fx->d.store);
        fx->fail_put_part = 1;
        fx_clock_advance(PAST_DELAY_MS);
        assert_int_equal(fx_submit(COPY(1), NULL, NULL, b), 202);
        assert_int_equal(fx->fail_put_part, 0);
        store_sync(fx->d.store);
        db_text("SELECT state FROM jobs WHERE id = ?1", a, txt, sizeof(txt));
        assert_string_equal(txt, "running");
        db_text("SELECT doc IS NULL FROM parts WHERE job_id = ?1 AND idx = 0", a, txt, sizeof(txt));
        assert_string_equal(txt, "1");
}

/* A part's own document that is not one of that part (another device's, here) is not taken:
 * the job's document stands for the part, which ran, and so was interrupted. */
static void test_a_part_s_own_document_of_another_device_is_not_taken(void **state)
{
        char a[JOB_ID_MAX];

        (void)state;
        assert_int_equal(fx_submit(COPY(0), NULL, NULL, a), 202);
        store_sync(fx->d.store);
        db_exec("UPDATE parts SET doc = '{\"state\":\"succeeded\",\"uuid\":\"GPU-other\","
                "\"result\":{}}' WHERE job_id = ?1 AND idx = 0",
                a);
        fx_restart(2, true);
        assert_string_equal(fx_state(a), "interrupted");
        assert_false(json_is_object(json_object_get(fx_part(a, 0), "result")));
}

/* A job whose whole document was written before its pending change fell due (here its end) is
 * not written again when it would have been. */
static void test_a_job_written_before_its_delay_is_not_written_again(void **state)
{
        char a[JOB_ID_MAX], b[JOB_ID_MAX];
        struct store_wal_stats before, after;

        (void)state;
        assert_int_equal(fx_submit(COPY(0), NULL, NULL, a), 202);
        fx_part_done(0, a, PART_SUCCEEDED);
        assert_string_equal(fx_state(a), "succeeded");
        store_sync(fx->d.store);
        store_wal_stats(fx->d.store, &before);
        fx_clock_advance(PAST_DELAY_MS);
        assert_int_equal(fx_submit(COPY(1), NULL, NULL, b), 202);
        store_sync(fx->d.store);
        store_wal_stats(fx->d.store, &after);
        /* The second job's submission, nothing of the first's. */
        assert_int_equal(after.documents_written - before.documents_written, 1);
}

static void test_waiting_jobs_are_recovered_unchecked_and_checked_after_start(void **state)
{
        char a[JOB_ID_MAX], b[JOB_ID_MAX], c[JOB_ID_MAX];

        (void)state;
        assert_int_equal(fx_submit(COPY(0), NULL, NULL, a), 202); /* runs */
        assert_int_equal(fx_submit(COPY(0), NULL, NULL, b), 202);
        assert_int_equal(fx_submit(COPY(0), NULL, NULL, c), 202);
        /* c's document no longer passes a submission's checks. */
        db_exec("UPDATE jobs SET doc = json_set(doc, '$.params.iterations', -3) WHERE id = ?1", c);
        fx_restart(2, true);
        /* Dispatch checked the head (b) as it reached it; c waits unchecked behind it. */
        assert_string_equal(fx->dispatched[0].job, b);
        assert_int_equal(jobs_check_recovered(fx->d.jobs, 100), 0);
        assert_string_equal(fx_state(c), "failed");
        assert_non_null(strstr(part_error(c), "no longer a valid job"));
        assert_non_null(strstr(part_error(c), "iterations"));
        assert_string_equal(fx_state(b), "running");
        assert_int_equal(jobs_check_recovered(fx->d.jobs, 100), 0);
}

static void test_a_job_whose_columns_disagree_with_its_document_follows_the_document(void **state)
{
        char a[JOB_ID_MAX], b[JOB_ID_MAX], c[JOB_ID_MAX], d[JOB_ID_MAX];
        const char *high = "{\"benchmark\": \"copy\", \"device\": 0, \"priority\": \"high\", "
                           "\"params\": {\"size\": \"4MiB\"}}";

        (void)state;
        assert_int_equal(fx_submit(COPY(0), NULL, NULL, a), 202); /* runs */
        assert_int_equal(fx_submit(COPY(0), NULL, NULL, b), 202);
        assert_int_equal(fx_submit(high, NULL, NULL, c), 202);
        assert_int_equal(fx_submit(COPY(0), NULL, NULL, d), 202);
        /* c says high in its document, low in its column. */
        db_exec("UPDATE jobs SET priority = 'low' WHERE id = ?1", c);
        fx_restart(2, true);
        /* Queued by its column, c came last; its check puts it where its document says. */
        assert_string_equal(fx->dispatched[0].job, b);
        assert_int_equal(jobs_check_recovered(fx->d.jobs, 100), 0);
        assert_string_equal(json_string_value(fx_field(c, "priority")), "high");
        fx_part_done(0, b, PART_SUCCEEDED);
        assert_string_equal(fx->dispatched[1].job, c);
        fx_part_done(0, c, PART_SUCCEEDED);
        assert_string_equal(fx->dispatched[2].job, d);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(
                test_after_a_crash_running_is_interrupted_and_the_queue_runs_in_order, fx_setup,
                fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_an_orderly_stop_interrupts_what_runs_and_keeps_what_waits, fx_setup,
                fx_teardown),
            cmocka_unit_test_setup_teardown(test_a_part_queued_for_a_gpu_that_is_gone_is_failed,
                                            fx_setup, fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_finished_jobs_are_read_from_the_store_after_a_restart, fx_setup, fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_a_waiting_job_answers_as_it_is_stored_before_and_after_a_restart, fx_setup,
                fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_a_start_is_written_as_the_part_s_own_document_once_its_delay_has_passed,
                fx_setup, fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_a_part_that_ends_before_its_job_survives_a_crash_with_its_result, fx_setup,
                fx_teardown),
            cmocka_unit_test_setup_teardown(test_a_job_s_final_document_clears_its_parts_own,
                                            fx_setup, fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_a_list_writes_whole_a_job_whose_row_is_behind_its_parts, fx_setup,
                fx_teardown),
            cmocka_unit_test_setup_teardown(test_a_list_by_a_final_state_writes_no_job, fx_setup,
                                            fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_a_part_s_own_document_that_cannot_be_queued_writes_the_whole_job, fx_setup,
                fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_a_part_s_own_document_of_another_device_is_not_taken, fx_setup, fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_a_job_written_before_its_delay_is_not_written_again, fx_setup, fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_waiting_jobs_are_recovered_unchecked_and_checked_after_start, fx_setup,
                fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_a_job_whose_columns_disagree_with_its_document_follows_the_document, fx_setup,
                fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_a_start_is_stored_as_its_part_row_and_the_document_follows_when_shown,
                fx_setup, fx_teardown),
            cmocka_unit_test_setup_teardown(
                test_a_start_whose_part_row_cannot_be_queued_writes_the_whole_document, fx_setup,
                fx_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
