/* The store's writes (store_queue.c, store_writer.c, with rows made by daemon/jobs/job_doc.c): a
 * job put and read back in its public form, the bytes its rows are made of, new jobs' writes under
 * the id they are given, tickets and the waits on them, changes from several threads at once, and
 * group commit. Which queued changes a batch takes is test_store_batch.c's. */
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

static void test_put_get_public_form(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A};
        char id[UUID_STRING_MAX];
        json_t *j = job_at(id, 1000000, "succeeded", "copy", u, 1), *got = NULL;

        put_sync(f->s, j);
        assert_int_equal(job_doc_get(f->s, id, &got), 0);
        assert_string_equal(json_string_value(json_object_get(got, "id")), id);
        assert_null(json_object_get(got, "request")); /* bookkeeping is not public */
        assert_null(json_object_get(got, "created_ms"));
        assert_non_null(
            json_object_get(json_array_get(json_object_get(got, "parts"), 0), "result"));
        assert_int_equal(store_count(f->s), 1);
        json_decref(got);

        /* any case finds it; a change replaces it */
        char upper[UUID_STRING_MAX];
        for (size_t i = 0; i < sizeof(upper); i++)
                upper[i] = (char)toupper((unsigned char)id[i]);
        json_object_set_new(j, "state", json_string("failed"));
        put_sync(f->s, j);
        assert_int_equal(job_doc_get(f->s, upper, &got), 0);
        assert_string_equal(json_string_value(json_object_get(got, "state")), "failed");
        assert_int_equal(store_count(f->s), 1);
        json_decref(got);
        assert_int_equal(job_doc_get(f->s, "01a22ea6-c294-7427-ba85-54940c685e37", &got), -ENOENT);
        json_decref(j);
}

/* The stored document and summary of job j (finished), as bytes. */
static void stored_bytes(struct store *s, const char *id, char **ret_doc, char **ret_summary)
{
        struct store_query q = {.limit = 10};
        char last[UUID_STRING_MAX];
        struct blob *b = NULL;
        size_t len, n;
        bool more;

        assert_int_equal(store_get_finished(s, id, &b), 0);
        *ret_doc = strndup(b->data, b->len);
        blob_unref(b);
        assert_int_equal(store_list_raw(s, &q, ret_summary, &len, &n, last, &more), 0);
        assert_int_equal(n, 1);
}

/* A result deeper than umd's own dumper goes is still stored, as jansson dumps the document: the
 * document is dumped with a mark in its place, the result alone (by jansson) and spliced in. */
static void test_a_result_deeper_than_the_dumper_is_stored_whole(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A};
        char id[UUID_STRING_MAX];
        json_t *j = job_at(id, 1000000, "succeeded", "copy", u, 1), *deep = json_array(), *a = deep;
        char *doc, *sum, *want;

        for (int i = 0; i < 2100; i++) {
                json_t *b = json_array();
                json_array_append_new(a, b);
                a = b;
        }
        json_object_set_new(json_array_get(json_object_get(j, "parts"), 0), "result", deep);
        put_sync(f->s, j);
        stored_bytes(f->s, id, &doc, &sum);
        json_object_del(j, "request");
        json_object_del(j, "created_ms");
        json_object_del(j, "finished_ms");
        want = json_dump_compact(j, NULL);
        assert_string_equal(doc, want);
        assert_null(strstr(sum, "\"result\""));
        free(want);
        free(doc);
        free(sum);
        json_decref(j);
}

/* A result kept as the worker's bytes (a raw node) is stored exactly as its tree would have
 * been: the same document (results spliced in at their places), the same summary (no result),
 * for parts with and without one, a null result, and results with escapes, reals and nesting. */
static void test_raw_results_store_the_same_bytes_as_trees(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A, DEV_B, DEV_A};
        char id[UUID_STRING_MAX];
        json_t *trees = job_at(id, 1000000, "succeeded", "copy", u, 3);
        json_t *res = json_pack("{s:s, s:[{s:f, s:s, s:[f, f]}], s:{s:s, s:n, s:b}, s:i}",
                                "benchmark", "copy", "measurements", "gbps", 0.50869532089046843,
                                "name", "h2d", "samples_ms", 1e-5, 2.5, "context", "why",
                                "quote \" slash / tab \t \xc3\xa9 \x01", "n", "ok", 1, "z", 7);
        json_t *parts = json_object_get(trees, "parts"), *raws;
        char *doc1, *sum1, *doc2, *sum2, *text;
        size_t len;

        json_object_set(json_array_get(parts, 0), "result", res);
        json_object_set_new(json_array_get(parts, 1), "result", json_null());
        json_object_del(json_array_get(parts, 2), "result");
        json_object_set_new(json_array_get(parts, 0), "device", json_integer(0));
        json_object_set_new(json_array_get(parts, 0), "finished", json_string("x"));
        put_sync(f->s, trees);
        stored_bytes(f->s, id, &doc1, &sum1);

        raws = json_deep_copy(trees);
        text = json_dump_compact(res, &len);
        assert_true(json_canonical(text, len, 64, NULL, NULL));
        json_object_set_new(json_array_get(json_object_get(raws, "parts"), 0), "result",
                            json_raw_new(text, len));
        free(text);
        put_sync(f->s, raws);
        stored_bytes(f->s, id, &doc2, &sum2);

        assert_string_equal(doc2, doc1);
        assert_string_equal(sum2, sum1);
        assert_null(strstr(sum1, "\"result\""));
        assert_non_null(strstr(doc1, "\"result\":{\"benchmark\":\"copy\""));
        assert_non_null(strstr(doc1, "\"result\":null"));

        /* An answer from memory: the copy keeps the bytes (made under core_lock), expanded
         * afterwards into the tree, which dumps as the stored document. */
        json_t *pub = job_doc_public_copy(raws, true);
        assert_true(json_raw_get(
            json_object_get(json_array_get(json_object_get(pub, "parts"), 0), "result"), NULL,
            NULL));
        assert_int_equal(job_doc_public_expand(pub), 0);
        text = json_dump_compact(pub, NULL);
        json_t *back = json_loads(doc1, 0, NULL);
        char *want = json_dump_compact(back, NULL);
        assert_string_equal(text, want);
        free(text);
        free(want);
        json_decref(back);
        json_decref(pub);

        free(doc1);
        free(sum1);
        free(doc2);
        free(sum2);
        json_decref(res);
        json_decref(raws);
        json_decref(trees);
}

/* Changes of one job queued back to back (often one batch, where only the last is written):
 * what is stored is the last, parts included. */
static void test_changes_of_one_job_keep_the_last(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A, DEV_B};
        const char *states[] = {"queued", "running", "succeeded"};
        char id[UUID_STRING_MAX];
        json_t *j = job_at(id, 2000000, "queued", "copy", u, 2), *got = NULL;
        struct store_ticket *t = NULL;

        for (size_t k = 0; k < 3; k++) {
                json_object_set_new(j, "state", json_string(states[k]));
                json_object_set_new(json_array_get(json_object_get(j, "parts"), 1), "state",
                                    json_string(states[k]));
                if (k == 2) {
                        json_object_set_new(j, "finished_ms", json_integer(2000001));
                        assert_int_equal(fx_put(f->s, j, &t), 0);
                } else
                        assert_int_equal(fx_put(f->s, j, NULL), 0);
        }
        assert_int_equal(store_ticket_wait(t, NULL, NULL), 0);
        assert_int_equal(job_doc_get(f->s, id, &got), 0);
        assert_string_equal(json_string_value(json_object_get(got, "state")), "succeeded");
        assert_string_equal(json_string_value(json_object_get(
                                json_array_get(json_object_get(got, "parts"), 1), "state")),
                            "succeeded");
        assert_int_equal(store_count(f->s), 1);
        json_decref(got);
        json_decref(j);
}

/* bytes are the compact dump of j's public copy, what a new job's answer and row hold. */
static void assert_public_dump(const char *bytes, const json_t *j)
{
        json_t *pub = job_doc_public_copy(j, true);
        char *dump = json_dump_compact(pub, NULL);

        assert_string_equal(bytes, dump);
        free(dump);
        json_decref(pub);
}

/* A new job's write, made under a stand-in id and queued under its own. */
static int put_new(struct store *s, json_t *j, const char *id, struct store_ticket **ret)
{
        return fx_put_new(s, j, id, ret);
}

/* A submit's write (store_put_new) hands its document's bytes back with its commit:
 * the bytes stored, which are the compact dump of the job's public copy. */
static void test_an_answered_put_hands_back_the_bytes_it_wrote(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A, DEV_B};
        char id[UUID_STRING_MAX], *bytes = NULL, *doc, *sum;
        json_t *j = job_at(id, 3000000, "succeeded", "copy", u, 2); /* stored_bytes reads it */
        struct store_ticket *t = NULL;
        size_t len = 0;

        json_object_set_new(json_array_get(json_object_get(j, "parts"), 0), "result", json_null());
        assert_int_equal(put_new(f->s, j, id, &t), 0);
        assert_int_equal(store_ticket_wait(t, &bytes, &len), 0);
        assert_non_null(bytes);
        assert_int_equal(len, strlen(bytes));
        stored_bytes(f->s, id, &doc, &sum);
        assert_string_equal(bytes, doc);
        assert_public_dump(bytes, j);
        free(bytes);
        free(doc);
        free(sum);
        json_decref(j);
}

/* The id a new job's write is queued under replaces its stand-in everywhere it was written:
 * the row's key, the document and the summary (a buffer of its own here: a null result), and
 * nothing else, even where a label holds the stand-in's pattern. */
static void test_a_new_write_is_stored_under_the_id_it_is_given(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A, DEV_B};
        char stand_in[UUID_STRING_MAX], id[UUID_STRING_MAX], *bytes = NULL, *doc, *sum;
        json_t *j = job_at(stand_in, 5000000, "queued", "copy", u, 2), *got = NULL;
        struct store_ticket *t = NULL;
        size_t len = 0;
        char label[128];

        json_array_foreach(json_object_get(j, "parts"), len, got)
            json_object_set_new(got, "result", json_null());
        snprintf(label, sizeof(label), "\"id\":\"%s\"", stand_in);
        json_object_set_new(json_object_get(j, "labels"), "zz", json_string(label));
        assert_int_equal(uuid7_generate_at(5000001, id), 0);
        assert_int_equal(put_new(f->s, j, id, &t), 0);
        assert_int_equal(store_ticket_wait(t, &bytes, &len), 0);
        assert_int_equal(job_doc_get(f->s, stand_in, &got), -ENOENT);
        assert_int_equal(job_doc_get(f->s, id, &got), 0);
        assert_string_equal(json_string_value(json_object_get(got, "id")), id);
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(got, "labels"), "zz")), label);
        json_decref(got);
        stored_bytes(f->s, id, &doc, &sum);
        assert_string_equal(bytes, doc);
        assert_string_not_equal(doc, sum); /* the null results: in the document only */
        assert_non_null(strstr(sum, id));
        json_object_set_new(j, "id", json_string(id));
        assert_public_dump(doc, j);
        free(bytes);
        free(doc);
        free(sum);
        json_decref(j);
}

/* A stand-in is a UUID and so is the id that replaces it: anything else is refused, and the
 * prepared write is freed all the same (no leak under the sanitizers). */
static void test_a_new_write_refuses_a_bad_id(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A};
        char id[UUID_STRING_MAX];
        json_t *j = job_at(id, 6000000, "queued", "copy", u, 1);
        struct job_doc_new *p = NULL;
        struct store_ticket *t = NULL;

        assert_int_equal(fx_put_new(f->s, j, "not-a-uuid", &t), -EINVAL);
        assert_null(t);
        json_object_set_new(j, "id", json_string("nope"));
        assert_int_equal(job_doc_new_prepare(j, &p), -EINVAL);
        assert_null(p);
        assert_int_equal(job_doc_get(f->s, id, &j), -ENOENT);
        json_decref(j);
}

/* A final job's write takes a reference to the job instead of a copy: the job stored is the
 * job as put, and once the write is done the reference is given back (nothing leaks, nothing is
 * freed under the caller). */
static void test_a_final_put_writes_the_job_and_gives_its_reference_back(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A, DEV_B};
        char id[UUID_STRING_MAX];
        json_t *j = job_at(id, 7000000, "succeeded", "copy", u, 2), *got = NULL;
        struct store_ticket *t = NULL;
        size_t refs = j->refcount;

        assert_int_equal(fx_put_final(f->s, j, &t), 0);
        assert_int_equal(store_ticket_wait(t, NULL, NULL), 0);
        assert_int_equal(j->refcount, refs);
        assert_int_equal(job_doc_get(f->s, id, &got), 0);
        json_t *pub = job_doc_public_copy(j, true);
        assert_true(json_equal(got, pub));
        json_decref(pub);
        json_decref(got);
        json_decref(j);
}

/* Any other write's bytes are the writer's: a wait gets none. */
static void test_a_plain_put_hands_back_no_bytes(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A};
        char id[UUID_STRING_MAX], *bytes = NULL;
        json_t *j = job_at(id, 3000000, "queued", "copy", u, 1);
        struct store_ticket *t = NULL;
        size_t len = 7;

        assert_int_equal(fx_put(f->s, j, &t), 0);
        assert_int_equal(store_ticket_wait(t, &bytes, &len), 0);
        assert_null(bytes);
        assert_int_equal(len, 7);
        json_decref(j);
}

#define WAITERS        8
#define WAITS_A_WAITER 60

struct waiter {
        struct store *s;
        json_t *docs[WAITS_A_WAITER];
        char ids[WAITS_A_WAITER][UUID_STRING_MAX];
        int failed; /* how many waits were woken without their own job's bytes */
};

static void *waiter_main(void *userdata)
{
        struct waiter *w = userdata;

        for (size_t i = 0; i < WAITS_A_WAITER; i++) {
                struct store_ticket *t = NULL;
                char *bytes = NULL;
                size_t len = 0;

                if (put_new(w->s, w->docs[i], w->ids[i], &t) < 0 ||
                    store_ticket_wait(t, &bytes, &len) < 0 || !bytes || !strstr(bytes, w->ids[i]))
                        w->failed++;
                free(bytes);
        }
        return NULL;
}

/* Submits from several threads at once, each waiting for its commit again and again (a batch's
 * waiters are woken together, each on its own thread's semaphore): every wait returns once its
 * own change is committed, with that change's bytes, never on a wake-up meant for another. */
static void test_waits_of_one_batch_each_wake_for_their_own_commit(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A};
        static struct waiter w[WAITERS];
        pthread_t th[WAITERS];

        for (size_t k = 0; k < WAITERS; k++) {
                w[k] = (struct waiter){.s = f->s};
                for (size_t i = 0; i < WAITS_A_WAITER; i++)
                        w[k].docs[i] = job_at(w[k].ids[i], 4000000 + k * WAITS_A_WAITER + i,
                                              "queued", "copy", u, 1);
        }
        for (size_t k = 0; k < WAITERS; k++)
                assert_int_equal(pthread_create(&th[k], NULL, waiter_main, &w[k]), 0);
        for (size_t k = 0; k < WAITERS; k++) {
                assert_int_equal(pthread_join(th[k], NULL), 0);
                assert_int_equal(w[k].failed, 0);
                for (size_t i = 0; i < WAITS_A_WAITER; i++)
                        json_decref(w[k].docs[i]);
        }
        assert_int_equal(store_count(f->s), WAITERS * WAITS_A_WAITER);
}

#define PUTTERS 4
#define PUTS    150

/* One thread's changes: each of its jobs queued, running, then final (that one with a ticket). */
struct putter {
        struct store *s;
        json_t *docs[PUTS][3];
        struct store_ticket *final[PUTS];
        int r;
};

static void *putter_main(void *userdata)
{
        struct putter *p = userdata;

        for (size_t i = 0; i < PUTS && p->r == 0; i++)
                for (size_t k = 0; k < 3 && p->r == 0; k++)
                        p->r = fx_put(p->s, p->docs[i][k], k == 2 ? &p->final[i] : NULL);
        return NULL;
}

/* Changes from several threads at once, whoever makes each one's rows (a putting thread's drain
 * or the writer, whichever reaches it first): every job reads back as its last change, and none is
 * lost or counted twice. */
static void test_concurrent_changes_are_stored_as_their_last(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A, DEV_B};
        const char *states[] = {"queued", "running", "succeeded"};
        static struct putter p[PUTTERS];
        static char ids[PUTTERS][PUTS][UUID_STRING_MAX];
        pthread_t th[PUTTERS];

        for (size_t k = 0; k < PUTTERS; k++) {
                p[k] = (struct putter){.s = f->s};
                for (size_t i = 0; i < PUTS; i++) {
                        json_t *j =
                            job_at(ids[k][i], 3000000 + k * PUTS + i, "queued", "copy", u, 2);

                        for (size_t c = 0; c < 3; c++) {
                                json_t *d = p[k].docs[i][c] = json_deep_copy(j);

                                json_object_set_new(d, "state", json_string(states[c]));
                                json_object_set_new(json_array_get(json_object_get(d, "parts"), 0),
                                                    "state", json_string(states[c]));
                        }
                        json_object_set_new(p[k].docs[i][2], "finished_ms", json_integer(3000001));
                        json_decref(j);
                }
        }
        for (size_t k = 0; k < PUTTERS; k++)
                assert_int_equal(pthread_create(&th[k], NULL, putter_main, &p[k]), 0);
        for (size_t k = 0; k < PUTTERS; k++) {
                assert_int_equal(pthread_join(th[k], NULL), 0);
                assert_int_equal(p[k].r, 0);
        }
        for (size_t k = 0; k < PUTTERS; k++)
                for (size_t i = 0; i < PUTS; i++)
                        assert_int_equal(store_ticket_wait(p[k].final[i], NULL, NULL), 0);
        assert_int_equal(store_count(f->s), PUTTERS * PUTS);
        for (size_t k = 0; k < PUTTERS; k++)
                for (size_t i = 0; i < PUTS; i++) {
                        json_t *got = NULL, *want = job_doc_public_copy(p[k].docs[i][2], true);
                        char *a, *b;

                        assert_int_equal(job_doc_get(f->s, ids[k][i], &got), 0);
                        assert_int_equal(job_doc_public_expand(want), 0);
                        a = json_dumps(got, JSON_SORT_KEYS | JSON_COMPACT);
                        b = json_dumps(want, JSON_SORT_KEYS | JSON_COMPACT);
                        assert_string_equal(a, b);
                        free(a);
                        free(b);
                        json_decref(got);
                        json_decref(want);
                        for (size_t c = 0; c < 3; c++)
                                json_decref(p[k].docs[i][c]);
                }
}

/* A part's row is updated without naming its device when the device is the same; a document
 * whose part moved to another device still moves the row (a list by device finds it there). */
static void test_a_part_that_changes_device_is_listed_under_the_new_one(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A};
        char id[UUID_STRING_MAX];
        json_t *j = job_at(id, 3000000, "queued", "copy", u, 1), *arr;
        json_t *part = json_array_get(json_object_get(j, "parts"), 0);
        bool more;

        put_sync(f->s, j);
        json_object_set_new(part, "state", json_string("running"));
        put_sync(f->s, j); /* the same device: state only */
        json_object_set_new(part, "uuid", json_string(DEV_B));
        json_object_set_new(part, "state", json_string("succeeded"));
        json_object_set_new(j, "state", json_string("succeeded"));
        json_object_set_new(j, "finished_ms", json_integer(3000001));
        put_sync(f->s, j);

        struct store_query q = {.limit = 10, .uuid = DEV_A};
        assert_int_equal(fx_list(f->s, &q, &arr, &more), 0);
        assert_int_equal(json_array_size(arr), 0);
        json_decref(arr);
        q.uuid = DEV_B;
        assert_int_equal(fx_list(f->s, &q, &arr, &more), 0);
        assert_int_equal(json_array_size(arr), 1);
        assert_string_equal(json_string_value(json_object_get(json_array_get(arr, 0), "id")), id);
        json_decref(arr);
        q = (struct store_query){.limit = 10, .uuid = DEV_B, .state = "succeeded"};
        assert_int_equal(fx_list(f->s, &q, &arr, &more), 0);
        assert_int_equal(json_array_size(arr), 1);
        json_decref(arr);
        json_decref(j);
}

/* A commit gathers waiters only while it expects more than it has: a lone client, whose
 * commits each serve one waiter, never waits out commit_gather_us (2 s here: five submits one
 * after another would take 10 s). */
static void test_a_lone_waiter_does_not_wait_for_a_gathering_commit(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A};
        struct timespec t0, t1;

        store_set_commit_gather(f->s, 2000000);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int k = 0; k < 5; k++) {
                char id[UUID_STRING_MAX];
                json_t *j = job_at(id, 4000000 + (uint64_t)k, "queued", "copy", u, 1);
                put_sync(f->s, j);
                json_decref(j);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        assert_true(secs < 1.5);
        assert_int_equal(store_count(f->s), 5);
}

/* Changes queued together commit together, however many bytes they are: a batch whose commit
 * failed was committed again one change at a time, which hid a batch past 128 KiB failing in
 * the writer's VFS (store_vfs.c) behind a commit a change. */
static void test_a_large_batch_commits_once(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A};
        char id[UUID_STRING_MAX], pad[40000];
        struct store_wal_stats before, after;
        const size_t n = 12;

        memset(pad, 'x', sizeof(pad) - 1);
        pad[sizeof(pad) - 1] = '\0';
        store_wal_stats(f->s, &before);
        for (size_t i = 0; i < n; i++) {
                json_t *j = job_at(id, 1000000 + i, "queued", "copy", u, 1);

                json_object_set_new(json_object_get(j, "labels"), "pad", json_string(pad));
                assert_int_equal(fx_put(f->s, j, NULL), 0);
                json_decref(j);
        }
        store_sync(f->s);
        store_wal_stats(f->s, &after);
        assert_int_equal(after.changes - before.changes, n);
        /* One commit, or a few where the machine paused between puts; never one a change. */
        assert_in_range(after.commits - before.commits, 1, n / 2);
        assert_int_equal(store_count(f->s), n);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_put_get_public_form, setup, teardown),
            cmocka_unit_test_setup_teardown(test_a_result_deeper_than_the_dumper_is_stored_whole,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_raw_results_store_the_same_bytes_as_trees, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_changes_of_one_job_keep_the_last, setup, teardown),
            cmocka_unit_test_setup_teardown(test_a_new_write_is_stored_under_the_id_it_is_given,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_a_new_write_refuses_a_bad_id, setup, teardown),
            cmocka_unit_test_setup_teardown(
                test_a_final_put_writes_the_job_and_gives_its_reference_back, setup, teardown),
            cmocka_unit_test_setup_teardown(test_an_answered_put_hands_back_the_bytes_it_wrote,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_a_plain_put_hands_back_no_bytes, setup, teardown),
            cmocka_unit_test_setup_teardown(test_waits_of_one_batch_each_wake_for_their_own_commit,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_concurrent_changes_are_stored_as_their_last, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(
                test_a_part_that_changes_device_is_listed_under_the_new_one, setup, teardown),
            cmocka_unit_test_setup_teardown(test_a_lone_waiter_does_not_wait_for_a_gathering_commit,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_a_large_batch_commits_once, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
