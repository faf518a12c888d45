/* The store's recovery reads (store_recover.c): the unfinished jobs' columns, their parts' rows
 * and, when asked, their internal text; a part's state or own document written alone, and what
 * recovery is handed of it. */
#include "../common/testutil.h"

#include <ctype.h>
#include <pthread.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <cmocka.h>
#include <sqlite3.h>
#include <unistd.h>

#include "fileio.h"
#include "jsonraw.h"
#include "jsonutil.h"
#include "log.h"
#include "job_doc.h"
#include "store.h"
#include "store_internal.h"
#include "store_fixture.h"
#include "uuid.h"

static int collect(struct store_open_job *o, void *userdata)
{
        json_error_t e;
        json_t *job;

        if (!o->text)
                return STORE_OPEN_WANT_TEXT;
        job = job_doc_parse(o->text, o->text_len, &e);
        assert_non_null(job);
        assert_string_equal(json_string_value(json_object_get(job, "id")), o->id);
        json_array_append(userdata, json_object_get(job, "id"));
        /* internal form: the request and created_ms are put back beside the stored document */
        assert_int_equal(json_integer_value(json_object_get(job, "created_ms")), o->created_ms);
        assert_string_equal(json_string_value(json_object_get(job, "request")), "{}");
        assert_string_equal(json_string_value(json_object_get(job, "state")), o->state);
        assert_int_equal(o->n_parts, 1);
        assert_string_equal(o->parts[0].uuid, DEV_A);
        assert_string_equal(o->parts[0].state, o->state);
        json_decref(job);
        return 0;
}

/* The columns recovery reads without parsing the document: priority and cancel_requested as
 * the document says, and the parts in index order; the text is the internal document, a
 * request needing escapes included. */
static int keep_first(struct store_open_job *o, void *userdata)
{
        json_error_t e;
        json_t **ret = userdata;

        assert_null(*ret);
        assert_string_equal(o->priority, "high");
        assert_int_equal(o->cancel_requested, 1);
        assert_int_equal(o->n_parts, 2);
        assert_string_equal(o->parts[0].uuid, DEV_A);
        assert_string_equal(o->parts[1].uuid, DEV_B);
        if (!o->text)
                return STORE_OPEN_WANT_TEXT;
        *ret = job_doc_parse(o->text, o->text_len, &e);
        assert_non_null(*ret);
        return 0;
}

static void test_recover_gives_the_columns_and_the_internal_text(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A, DEV_B};
        char a[UUID_STRING_MAX];
        json_t *ja = job_at(a, 3000, "queued", "copy", u, 2), *got = NULL;

        json_object_set_new(ja, "priority", json_string("high"));
        json_object_set_new(ja, "cancel_requested", json_true());
        json_object_set_new(ja, "request",
                            json_string("{\"labels\":{\"n\":\"\u00e9 \\\" \\\\\"}}"));
        put_sync(f->s, ja);
        assert_int_equal(store_recover(f->s, keep_first, &got), 0);
        assert_true(json_equal(got, ja));
        json_decref(got);
        json_decref(ja);
}

/* A callback that asks for nothing gets no text: start-up reads no document it does not
 * parse. */
static int count_without_text(struct store_open_job *o, void *userdata)
{
        size_t *n = userdata;

        assert_null(o->text);
        assert_string_equal(o->state, "queued");
        (*n)++;
        return 0;
}

static void test_recover_reads_no_text_unless_asked(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A};
        char a[UUID_STRING_MAX], b[UUID_STRING_MAX];
        json_t *ja = job_at(a, 3000, "queued", "copy", u, 1);
        json_t *jb = job_at(b, 4000, "queued", "copy", u, 1);
        size_t n = 0;

        put_sync(f->s, ja);
        put_sync(f->s, jb);
        assert_int_equal(store_recover(f->s, count_without_text, &n), 0);
        assert_int_equal(n, 2);
        json_decref(ja);
        json_decref(jb);
}

/* Each open job's parts, as recovery's walk of the parts table finds them: its own, in index
 * order, whether a few finished jobs' parts lie between it and the previous open job or more
 * than the walk steps over before it searches again. */
struct seen_parts {
        char ids[3][UUID_STRING_MAX];
        char uuids[3][2][64];
        size_t n_parts[3], n;
};

static int note_parts(struct store_open_job *o, void *userdata)
{
        struct seen_parts *seen = userdata;

        assert_true(seen->n < 3);
        snprintf(seen->ids[seen->n], UUID_STRING_MAX, "%s", o->id);
        seen->n_parts[seen->n] = o->n_parts;
        for (size_t i = 0; i < o->n_parts && i < 2; i++)
                snprintf(seen->uuids[seen->n][i], 64, "%s", o->parts[i].uuid);
        seen->n++;
        return 0;
}

static void test_recover_finds_each_open_jobs_parts_past_finished_ones(void **state)
{
        struct fx *f = *state;
        const char *ab[] = {DEV_A, DEV_B}, *b[] = {DEV_B}, *a[] = {DEV_A};
        char open[3][UUID_STRING_MAX], done[UUID_STRING_MAX];
        struct seen_parts seen = {0};
        json_t *j;

        put_sync(f->s, j = job_at(open[0], 1000, "queued", "copy", ab, 2));
        json_decref(j);
        for (size_t i = 0; i < 40; i++) { /* more than the walk steps over */
                put_sync(f->s, j = job_at(done, 1001 + i, "succeeded", "copy", ab, 2));
                json_decref(j);
        }
        put_sync(f->s, j = job_at(open[1], 2000, "queued", "copy", b, 1));
        json_decref(j);
        for (size_t i = 0; i < 3; i++) { /* fewer */
                put_sync(f->s, j = job_at(done, 2001 + i, "failed", "copy", a, 1));
                json_decref(j);
        }
        put_sync(f->s, j = job_at(open[2], 3000, "running", "copy", a, 1));
        json_decref(j);
        assert_int_equal(store_recover(f->s, note_parts, &seen), 0);
        assert_int_equal(seen.n, 3);
        for (size_t i = 0; i < 3; i++)
                assert_string_equal(seen.ids[i], open[i]);
        assert_int_equal(seen.n_parts[0], 2);
        assert_string_equal(seen.uuids[0][0], DEV_A);
        assert_string_equal(seen.uuids[0][1], DEV_B);
        assert_int_equal(seen.n_parts[1], 1);
        assert_string_equal(seen.uuids[1][0], DEV_B);
        assert_int_equal(seen.n_parts[2], 1);
        assert_string_equal(seen.uuids[2][0], DEV_A);
}

/* Part idx's state in the parts table ("" when it has no row), read on a connection of its own. */
static void part_row_state(const char *dir, const char *id, int idx, char ret[32])
{
        char *path = NULL;
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;

        assert_true(asprintf(&path, "%s/umd.db", dir) > 0);
        assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        assert_int_equal(
            sqlite3_prepare_v2(db, "SELECT state FROM parts WHERE job_id = ?1 AND idx = ?2", -1,
                               &st, NULL),
            SQLITE_OK);
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 2, idx);
        ret[0] = '\0';
        if (sqlite3_step(st) == SQLITE_ROW)
                snprintf(ret, 32, "%s", (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
        sqlite3_close(db);
        free(path);
}

/* What store_recover handed on of the one open job: its state column, its parts' row states. */
struct open_states {
        char state[32], parts[2][32];
        size_t n;
};

static int note_states(struct store_open_job *o, void *userdata)
{
        struct open_states *seen = userdata;

        seen->n++;
        snprintf(seen->state, sizeof(seen->state), "%s", o->state);
        for (size_t i = 0; i < o->n_parts && i < 2; i++)
                snprintf(seen->parts[i], sizeof(seen->parts[i]), "%s", o->parts[i].state);
        return 0;
}

static void test_a_part_state_alone_changes_its_row_and_not_the_document(void **state)
{
        struct fx *f = *state;
        const char *ab[] = {DEV_A, DEV_B};
        char id[UUID_STRING_MAX];
        struct open_states seen = {0};
        json_t *j = job_at(id, 5000, "queued", "copy", ab, 2), *got = NULL;

        put_sync(f->s, j);
        assert_int_equal(fx_put_part(f->s, id, 1, "running"), 0);
        store_sync(f->s);
        assert_int_equal(job_doc_get(f->s, id, &got), 0);
        assert_string_equal(json_string_value(json_object_get(got, "state")), "queued");
        assert_string_equal(json_string_value(json_object_get(
                                json_array_get(json_object_get(got, "parts"), 1), "state")),
                            "queued");
        /* recovery is handed the part's row beside the document's columns */
        assert_int_equal(store_recover(f->s, note_states, &seen), 0);
        assert_int_equal(seen.n, 1);
        assert_string_equal(seen.state, "queued");
        assert_string_equal(seen.parts[0], "queued");
        assert_string_equal(seen.parts[1], "running");
        json_decref(got);
        json_decref(j);
}

static void test_a_part_state_keeps_the_document_queued_before_it(void **state)
{
        struct fx *f = *state;
        const char *a[] = {DEV_A};
        char id[UUID_STRING_MAX], row[32];
        json_t *j = job_at(id, 6000, "queued", "copy", a, 1), *got = NULL;

        put_sync(f->s, j);
        /* A document, then a part's state, then the sync: one batch, in which the part's state
         * must not count as a later write of the job's document. */
        json_object_set_new(j, "labels", json_pack("{s:s}", "team", "b"));
        assert_int_equal(fx_put(f->s, j, NULL), 0);
        assert_int_equal(fx_put_part(f->s, id, 0, "running"), 0);
        store_sync(f->s);
        assert_int_equal(job_doc_get(f->s, id, &got), 0);
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(got, "labels"), "team")), "b");
        part_row_state(f->path, id, 0, row);
        assert_string_equal(row, "running");
        json_decref(got);
        json_decref(j);
}

static void test_a_later_document_replaces_a_part_state_queued_before_it(void **state)
{
        struct fx *f = *state;
        const char *a[] = {DEV_A};
        char id[UUID_STRING_MAX], row[32];
        json_t *j = job_at(id, 7000, "queued", "copy", a, 1);
        struct store_ticket *t = NULL;

        put_sync(f->s, j);
        assert_int_equal(fx_put_part(f->s, id, 0, "running"), 0);
        json_object_set_new(j, "state", json_string("succeeded"));
        json_object_set_new(json_array_get(json_object_get(j, "parts"), 0), "state",
                            json_string("succeeded"));
        json_object_set_new(j, "finished_ms", json_integer(7001));
        assert_int_equal(fx_put(f->s, j, &t), 0);
        assert_int_equal(store_ticket_wait(t, NULL, NULL), 0);
        part_row_state(f->path, id, 0, row);
        assert_string_equal(row, "succeeded");
        json_decref(j);
}

static void test_a_part_state_of_an_unknown_job_changes_nothing(void **state)
{
        struct fx *f = *state;
        char id[UUID_STRING_MAX], row[32];
        struct open_states seen = {0};

        assert_int_equal(uuid7_generate_at(8000, id), 0);
        assert_int_equal(fx_put_part(f->s, "not-a-uuid", 0, "running"), -EINVAL);
        assert_int_equal(fx_put_part(f->s, id, 0, "running"), 0);
        store_sync(f->s);
        part_row_state(f->path, id, 0, row);
        assert_string_equal(row, "");
        assert_int_equal(store_count(f->s), 0);
        assert_int_equal(store_recover(f->s, note_states, &seen), 0);
        assert_int_equal(seen.n, 0);
}

/* What store_recover handed on of the one open job's second part: its own document ("" for
 * none). */
struct open_part_doc {
        char doc[512];
        size_t n;
};

static int note_part_doc(struct store_open_job *o, void *userdata)
{
        struct open_part_doc *seen = userdata;

        seen->n++;
        seen->doc[0] = '\0';
        if (o->n_parts > 1 && o->parts[1].doc)
                snprintf(seen->doc, sizeof(seen->doc), "%s", o->parts[1].doc);
        return 0;
}

/* A part's own document goes to its row, the job's document left as it was, and recovery is
 * handed it, a worker's raw result spliced in as its bytes; the job's next document clears it. */
static void test_a_part_s_own_document_reaches_recovery_until_its_job_is_written(void **state)
{
        struct fx *f = *state;
        const char *ab[] = {DEV_A, DEV_B};
        char id[UUID_STRING_MAX], row[32];
        struct open_part_doc seen = {0};
        json_t *j = job_at(id, 9000, "running", "copy", ab, 2), *got = NULL;
        json_t *part = json_deep_copy(json_array_get(json_object_get(j, "parts"), 1));
        static const char raw[] = "{\"gbps\":1.5,\"note\":\"a \\\"q\\\"\"}";

        put_sync(f->s, j);
        json_object_set_new(part, "state", json_string("succeeded"));
        json_object_set_new(part, "result", json_raw_new(raw, strlen(raw)));
        assert_int_equal(fx_put_part_doc(f->s, "not-a-uuid", 1, "succeeded", part), -EINVAL);
        assert_int_equal(fx_put_part_doc(f->s, id, 1, "succeeded", part), 0);
        store_sync(f->s);
        part_row_state(f->path, id, 1, row);
        assert_string_equal(row, "succeeded");
        assert_int_equal(job_doc_get(f->s, id, &got), 0);
        assert_string_equal(json_string_value(json_object_get(
                                json_array_get(json_object_get(got, "parts"), 1), "state")),
                            "running");
        assert_int_equal(store_recover(f->s, note_part_doc, &seen), 0);
        assert_int_equal(seen.n, 1);
        json_t *own = json_loads(seen.doc, 0, NULL);
        json_t *want = json_deep_copy(part);
        json_object_set_new(want, "result", json_loads(raw, 0, NULL));
        assert_non_null(own);
        assert_true(json_equal(own, want));
        /* The job's next document carries the part: its own is gone. */
        put_sync(f->s, j);
        assert_int_equal(store_recover(f->s, note_part_doc, &seen), 0);
        assert_string_equal(seen.doc, "");
        json_decref(own);
        json_decref(want);
        json_decref(got);
        json_decref(part);
        json_decref(j);
}

/* A part without a result (a start) is its object's dump as it is. */
static void test_a_part_s_own_document_without_a_result_is_its_dump(void **state)
{
        struct fx *f = *state;
        const char *ab[] = {DEV_A, DEV_B};
        char id[UUID_STRING_MAX];
        struct open_part_doc seen = {0};
        json_t *j = job_at(id, 9100, "queued", "copy", ab, 2);
        json_t *part = json_pack("{s:s, s:s, s:s}", "uuid", DEV_B, "state", "running", "started",
                                 "2026-12-05T22:00:00.000Z");

        put_sync(f->s, j);
        assert_int_equal(fx_put_part_doc(f->s, id, 1, "running", part), 0);
        store_sync(f->s);
        assert_int_equal(store_recover(f->s, note_part_doc, &seen), 0);
        json_t *own = json_loads(seen.doc, 0, NULL);
        assert_true(json_equal(own, part));
        json_decref(own);
        json_decref(part);
        json_decref(j);
}

static void test_recover_only_unfinished_in_id_order(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A};
        char a[UUID_STRING_MAX], b[UUID_STRING_MAX], c[UUID_STRING_MAX];
        json_t *ja = job_at(a, 3000, "queued", "copy", u, 1);
        json_t *jb = job_at(b, 1000, "running", "copy", u, 1);
        json_t *jc = job_at(c, 2000, "succeeded", "copy", u, 1);
        json_t *ids = json_array();

        fx_put(f->s, ja, NULL);
        fx_put(f->s, jb, NULL);
        fx_put(f->s, jc, NULL);
        store_sync(f->s);
        assert_int_equal(store_recover(f->s, collect, ids), 0);
        assert_int_equal(json_array_size(ids), 2);
        assert_string_equal(json_string_value(json_array_get(ids, 0)), b);
        assert_string_equal(json_string_value(json_array_get(ids, 1)), a);
        json_decref(ids);
        json_decref(ja);
        json_decref(jb);
        json_decref(jc);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_recover_reads_no_text_unless_asked, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(
                test_recover_finds_each_open_jobs_parts_past_finished_ones, setup, teardown),
            cmocka_unit_test_setup_teardown(test_recover_only_unfinished_in_id_order, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_recover_gives_the_columns_and_the_internal_text,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(
                test_a_part_state_alone_changes_its_row_and_not_the_document, setup, teardown),
            cmocka_unit_test_setup_teardown(test_a_part_state_keeps_the_document_queued_before_it,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(
                test_a_later_document_replaces_a_part_state_queued_before_it, setup, teardown),
            cmocka_unit_test_setup_teardown(test_a_part_state_of_an_unknown_job_changes_nothing,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(
                test_a_part_s_own_document_reaches_recovery_until_its_job_is_written, setup,
                teardown),
            cmocka_unit_test_setup_teardown(test_a_part_s_own_document_without_a_result_is_its_dump,
                                            setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
