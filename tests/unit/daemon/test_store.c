/* The SQLite job store: writes and reads, recovery of unfinished jobs, the one-time import of
 * jobs/ (and what it sets aside), changes from several threads at once, the state directory lock, a
 * corrupt database, list filters, health history, retention, export and the WAL's checkpoint
 * policy. */
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
#include "store.h"
#include "store_internal.h"
#include "uuid.h"

#define DEV_A "GPU-aaaa"
#define DEV_B "GPU-bbbb"

struct fx {
        char *path;
        struct store *s;
};

static int setup(void **state)
{
        struct fx *f = calloc(1, sizeof(*f));

        if (!f)
                return -1;
        log_set_level(LOG_ERR);
        f->path = scratch_dir_new();
        if (!f->path || store_open(f->path, &f->s) < 0)
                return -1;
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fx *f = *state;

        store_close(f->s);
        scratch_dir_free(f->path);
        free(f);
        return 0;
}

/* A job in umd's internal form, created at ms, with one part per uuid. */
static json_t *job_at(char id[UUID_STRING_MAX], uint64_t ms, const char *state, const char *bench,
                      const char *const *uuids, size_t n)
{
        json_t *parts = json_array();

        assert_int_equal(uuid7_generate_at(ms, id), 0);
        for (size_t i = 0; i < n; i++)
                json_array_append_new(parts, json_pack("{s:s, s:s, s:{s:i}}", "uuid", uuids[i],
                                                       "state", state, "result", "gbps", 1));
        json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:I, s:o, s:{s:s}}", "id", id, "state", state,
                              "benchmark", bench, "request", "{}", "created_ms", (json_int_t)ms,
                              "parts", parts, "labels", "team", "a");
        if (strcmp(state, "queued") != 0 && strcmp(state, "running") != 0)
                json_object_set_new(j, "finished_ms", json_integer((json_int_t)ms + 1));
        return j;
}

static void put_sync(struct store *s, json_t *j)
{
        struct store_ticket *t = NULL;

        assert_int_equal(store_put(s, j, &t), 0);
        assert_int_equal(store_wait(t), 0);
}

/* SQLite's allocation counts (SQLITE_CONFIG_MEMSTATUS) are off: they cost a global mutex at every
 * allocation and umd reads none of them. With them on, a store's schema and a write leave
 * memory in use on the count. */
static void test_sqlite_keeps_no_allocation_counts(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A};
        char id[UUID_STRING_MAX];
        sqlite3_int64 cur = -1, hi = -1;
        json_t *j = job_at(id, 1700000000000, "succeeded", "copy", u, 1);

        put_sync(f->s, j);
        json_decref(j);
        assert_int_equal(sqlite3_status64(SQLITE_STATUS_MEMORY_USED, &cur, &hi, 0), SQLITE_OK);
        assert_int_equal(cur, 0);
        assert_int_equal(hi, 0);
}

/* umd's NOCASE orders every pair of strings as SQLite's built-in one does: ASCII letters of
 * either case, bytes past 0x7f, the characters beside the letters, NULs (where the built-in stops
 * comparing), and the long shared prefixes of real ids. Asked of SQLite itself through a
 * connection that keeps the built-in. */
static void test_nocase_is_sqlites_own_order(void **state)
{
        static const char alphabet[] = {'a', 'A',        'z',        'Z',       'q', 'Q',
                                        '0', '-',        '@',        '[',       '`', '{',
                                        0,   (char)0x80, (char)0xc3, (char)0xff};
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        char x[40], y[40];
        unsigned seed = 12345;

        (void)state;
        assert_int_equal(sqlite3_open(":memory:", &db), SQLITE_OK);
        assert_int_equal(sqlite3_prepare_v2(db,
                                            "SELECT ?1 < ?2 COLLATE NOCASE, ?1 = ?2 COLLATE NOCASE",
                                            -1, &st, NULL),
                         SQLITE_OK);
        for (int round = 0; round < 20000; round++) {
                int nx = (int)(rand_r(&seed) % sizeof(x)), ny = (int)(rand_r(&seed) % sizeof(y));
                int shared = (int)(rand_r(&seed) % (sizeof(x) + 1));

                for (int i = 0; i < nx; i++)
                        x[i] = alphabet[rand_r(&seed) % sizeof(alphabet)];
                for (int i = 0; i < ny; i++)
                        y[i] = i < shared && i < nx ? x[i]
                                                    : alphabet[rand_r(&seed) % sizeof(alphabet)];
                /* A copy in the other case, now and then: equal under NOCASE. */
                if (round % 5 == 0) {
                        ny = nx;
                        for (int i = 0; i < nx; i++)
                                y[i] = (char)(isalpha((unsigned char)x[i]) ? x[i] ^ 0x20 : x[i]);
                }
                sqlite3_bind_text(st, 1, x, nx, SQLITE_STATIC);
                sqlite3_bind_text(st, 2, y, ny, SQLITE_STATIC);
                assert_int_equal(sqlite3_step(st), SQLITE_ROW);
                int less = sqlite3_column_int(st, 0), equal = sqlite3_column_int(st, 1);
                int ours = store_db_nocase_compare(NULL, nx, x, ny, y);

                assert_int_equal(sqlite3_step(st), SQLITE_DONE);
                sqlite3_reset(st);
                if (equal != (ours == 0) || less != (ours < 0))
                        fail_msg("round %d: lengths %d and %d: built-in less %d equal %d, ours %d",
                                 round, nx, ny, less, equal, ours);
        }
        sqlite3_finalize(st);
        sqlite3_close(db);
}

static void test_put_get_public_form(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A};
        char id[UUID_STRING_MAX];
        json_t *j = job_at(id, 1000000, "succeeded", "copy", u, 1), *got = NULL;

        put_sync(f->s, j);
        assert_int_equal(store_get(f->s, id, &got), 0);
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
        assert_int_equal(store_get(f->s, upper, &got), 0);
        assert_string_equal(json_string_value(json_object_get(got, "state")), "failed");
        assert_int_equal(store_count(f->s), 1);
        json_decref(got);
        assert_int_equal(store_get(f->s, "01a22ea6-c294-7427-ba85-54940c685e37", &got), -ENOENT);
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
        json_t *pub = store_public_copy(raws, true);
        assert_true(json_raw_get(
            json_object_get(json_array_get(json_object_get(pub, "parts"), 0), "result"), NULL,
            NULL));
        assert_int_equal(store_public_expand(pub), 0);
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
                        assert_int_equal(store_put(f->s, j, &t), 0);
                } else
                        assert_int_equal(store_put(f->s, j, NULL), 0);
        }
        assert_int_equal(store_wait(t), 0);
        assert_int_equal(store_get(f->s, id, &got), 0);
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
        json_t *pub = store_public_copy(j, true);
        char *dump = json_dump_compact(pub, NULL);

        assert_string_equal(bytes, dump);
        free(dump);
        json_decref(pub);
}

/* A new job's write, made under a stand-in id and queued under its own. */
static int put_new(struct store *s, json_t *j, const char *id, struct store_ticket **ret)
{
        struct store_new *p = NULL;
        int r = store_new_prepare(j, &p);

        return r < 0 ? r : store_put_new(s, p, id, ret);
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
        assert_int_equal(store_wait_doc(t, &bytes, &len), 0);
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
        assert_int_equal(store_wait_doc(t, &bytes, &len), 0);
        assert_int_equal(store_get(f->s, stand_in, &got), -ENOENT);
        assert_int_equal(store_get(f->s, id, &got), 0);
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
        struct store_new *p = NULL;
        struct store_ticket *t = NULL;

        assert_int_equal(store_new_prepare(j, &p), 0);
        assert_int_equal(store_put_new(f->s, p, "not-a-uuid", &t), -EINVAL);
        assert_null(t);
        json_object_set_new(j, "id", json_string("nope"));
        p = NULL;
        assert_int_equal(store_new_prepare(j, &p), -EINVAL);
        assert_null(p);
        assert_int_equal(store_get(f->s, id, &j), -ENOENT);
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

        assert_int_equal(store_put_final(f->s, j, &t), 0);
        assert_int_equal(store_wait(t), 0);
        assert_int_equal(j->refcount, refs);
        assert_int_equal(store_get(f->s, id, &got), 0);
        json_t *pub = store_public_copy(j, true);
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

        assert_int_equal(store_put(f->s, j, &t), 0);
        assert_int_equal(store_wait_doc(t, &bytes, &len), 0);
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
                    store_wait_doc(t, &bytes, &len) < 0 || !bytes || !strstr(bytes, w->ids[i]))
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
                        p->r = store_put(p->s, p->docs[i][k], k == 2 ? &p->final[i] : NULL);
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
                        assert_int_equal(store_wait(p[k].final[i]), 0);
        assert_int_equal(store_count(f->s), PUTTERS * PUTS);
        for (size_t k = 0; k < PUTTERS; k++)
                for (size_t i = 0; i < PUTS; i++) {
                        json_t *got = NULL, *want = store_public_copy(p[k].docs[i][2], true);
                        char *a, *b;

                        assert_int_equal(store_get(f->s, ids[k][i], &got), 0);
                        assert_int_equal(store_public_expand(want), 0);
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
        assert_int_equal(store_list(f->s, &q, &arr, &more), 0);
        assert_int_equal(json_array_size(arr), 0);
        json_decref(arr);
        q.uuid = DEV_B;
        assert_int_equal(store_list(f->s, &q, &arr, &more), 0);
        assert_int_equal(json_array_size(arr), 1);
        assert_string_equal(json_string_value(json_object_get(json_array_get(arr, 0), "id")), id);
        json_decref(arr);
        q = (struct store_query){.limit = 10, .uuid = DEV_B, .state = "succeeded"};
        assert_int_equal(store_list(f->s, &q, &arr, &more), 0);
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

static uint64_t wal_bytes(const char *dir)
{
        char path[4096];
        struct stat st;

        snprintf(path, sizeof(path), "%s/umd.db-wal", dir);
        return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* While a reader keeps the WAL from being reset, commits past the checkpoint mark ask for a
 * passive checkpoint once per CHECKPOINT_PAGES of growth, not after each commit (which cost
 * two fdatasyncs for most commits); once the reader leaves and the writer is idle, the WAL is
 * truncated to nothing. */
static void test_checkpoints_follow_wal_growth_not_commits(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A};
        char path[4096], id[UUID_STRING_MAX], pad[3000];
        struct store_wal_stats w;
        sqlite3 *db = NULL;
        const size_t n = 400;

        snprintf(path, sizeof(path), "%s/umd.db", f->path);
        assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_exec(db, "BEGIN; SELECT count(*) FROM jobs", NULL, NULL, NULL),
                         SQLITE_OK);
        memset(pad, 'x', sizeof(pad) - 1);
        pad[sizeof(pad) - 1] = '\0';
        for (size_t i = 0; i < n; i++) {
                json_t *j = job_at(id, 1000000 + i, "queued", "copy", u, 1);

                json_object_set_new(json_object_get(j, "labels"), "pad", json_string(pad));
                put_sync(f->s, j);
                json_decref(j);
        }
        store_wal_stats(f->s, &w);
        assert_true(w.commits >= n);
        /* Each commit adds a few pages: 400 of them pass the 1000-page mark a few times. */
        assert_true(wal_bytes(f->path) > 1000 * 4096);
        assert_true(w.checkpoints >= 1);
        assert_true(w.checkpoints <= 6);

        assert_int_equal(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(db);
        /* The checkpointer counts its truncation once the checkpoint has returned, a moment
         * after the file is cut: wait for the count too. */
        store_wal_stats(f->s, &w);
        for (int i = 0; i < 100 && (wal_bytes(f->path) > 0 || w.idle_truncations == 0); i++) {
                usleep(100 * 1000);
                store_wal_stats(f->s, &w);
        }
        assert_int_equal(wal_bytes(f->path), 0);
        assert_true(w.idle_truncations >= 1);
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
                assert_int_equal(store_put(f->s, j, NULL), 0);
                json_decref(j);
        }
        store_sync(f->s);
        store_wal_stats(f->s, &after);
        assert_int_equal(after.changes - before.changes, n);
        /* One commit, or a few where the machine paused between puts; never one a change. */
        assert_in_range(after.commits - before.commits, 1, n / 2);
        assert_int_equal(store_count(f->s), n);
}

/* The counts /metrics shows: every change the writer committed, and apart the ones an answer
 * waited for; a change nobody waited for is still counted once it is synced. */
static void test_wal_stats_count_waited_and_lazy_changes(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A};
        char id[UUID_STRING_MAX];
        struct store_wal_stats before, after;

        store_wal_stats(f->s, &before);
        for (size_t i = 0; i < 3; i++) {
                json_t *j = job_at(id, 2000000 + i, "queued", "copy", u, 1);

                put_sync(f->s, j);
                json_decref(j);
        }
        for (size_t i = 0; i < 2; i++) {
                json_t *j = job_at(id, 3000000 + i, "queued", "copy", u, 1);

                assert_int_equal(store_put(f->s, j, NULL), 0);
                json_decref(j);
        }
        store_sync(f->s);
        store_wal_stats(f->s, &after);
        assert_int_equal(after.changes - before.changes, 5);
        assert_int_equal(after.waited_changes - before.waited_changes, 3);
        assert_true(after.commits - before.commits >= 2);
        assert_true(after.commits - before.commits <= 4);
}

/* What the commits wrote: a job's document each time it is put alone, a part's state alone,
 * and nothing for a change a later document of its job in the same batch replaced. */
static void test_wal_stats_count_the_rows_written(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A};
        char id[UUID_STRING_MAX];
        struct store_wal_stats before, mid, after;
        json_t *j = job_at(id, 4000000, "queued", "copy", u, 1);

        store_wal_stats(f->s, &before);
        put_sync(f->s, j);
        assert_int_equal(store_put_part(f->s, id, 0, "running"), 0);
        store_sync(f->s);
        store_wal_stats(f->s, &mid);
        assert_int_equal(mid.documents_written - before.documents_written, 1);
        assert_int_equal(mid.parts_written - before.parts_written, 1);
        /* Three changes of one job in one batch (a sync takes them together): one document.
         * Unless the writer's own STORE_LAZY_MS ran out between them (a stalled test). */
        assert_int_equal(store_put_part(f->s, id, 0, "running"), 0);
        assert_int_equal(store_put(f->s, j, NULL), 0);
        assert_int_equal(store_put(f->s, j, NULL), 0);
        store_sync(f->s);
        store_wal_stats(f->s, &after);
        assert_int_equal(after.changes - mid.changes, 3);
        if (after.commits - mid.commits == 1) {
                assert_int_equal(after.documents_written - mid.documents_written, 1);
                assert_int_equal(after.parts_written - mid.parts_written, 0);
        } else
                assert_true(after.documents_written - mid.documents_written <= 2);
        json_decref(j);
}

/* With wal_max_bytes set, the WAL is cut once a commit takes it past three quarters of the
 * bound, so no commit leaves it past the bound itself. */
static void test_the_wal_stays_under_wal_max_bytes(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A};
        char id[UUID_STRING_MAX], pad[3000];
        struct store_wal_stats w;
        const uint64_t max = 1024 * 1024;

        store_set_wal_max(f->s, max);
        memset(pad, 'x', sizeof(pad) - 1);
        pad[sizeof(pad) - 1] = '\0';
        for (size_t i = 0; i < 300; i++) {
                json_t *j = job_at(id, 3000000 + i, "queued", "copy", u, 1);

                json_object_set_new(json_object_get(j, "labels"), "pad", json_string(pad));
                put_sync(f->s, j);
                json_decref(j);
                assert_true(wal_bytes(f->path) <= max);
        }
        store_wal_stats(f->s, &w);
        assert_true(w.restarts >= 1);
}

static int collect(struct store_open_job *o, void *userdata)
{
        json_error_t e;
        json_t *job;

        if (!o->text)
                return STORE_OPEN_WANT_TEXT;
        job = store_parse_doc(o->text, o->text_len, &e);
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
        *ret = store_parse_doc(o->text, o->text_len, &e);
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
        assert_int_equal(store_put_part(f->s, id, 1, "running"), 0);
        store_sync(f->s);
        assert_int_equal(store_get(f->s, id, &got), 0);
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
        assert_int_equal(store_put(f->s, j, NULL), 0);
        assert_int_equal(store_put_part(f->s, id, 0, "running"), 0);
        store_sync(f->s);
        assert_int_equal(store_get(f->s, id, &got), 0);
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
        assert_int_equal(store_put_part(f->s, id, 0, "running"), 0);
        json_object_set_new(j, "state", json_string("succeeded"));
        json_object_set_new(json_array_get(json_object_get(j, "parts"), 0), "state",
                            json_string("succeeded"));
        json_object_set_new(j, "finished_ms", json_integer(7001));
        assert_int_equal(store_put(f->s, j, &t), 0);
        assert_int_equal(store_wait(t), 0);
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
        assert_int_equal(store_put_part(f->s, "not-a-uuid", 0, "running"), -EINVAL);
        assert_int_equal(store_put_part(f->s, id, 0, "running"), 0);
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
        assert_int_equal(store_put_part_doc(f->s, "not-a-uuid", 1, "succeeded", part), -EINVAL);
        assert_int_equal(store_put_part_doc(f->s, id, 1, "succeeded", part), 0);
        store_sync(f->s);
        part_row_state(f->path, id, 1, row);
        assert_string_equal(row, "succeeded");
        assert_int_equal(store_get(f->s, id, &got), 0);
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
        assert_int_equal(store_put_part_doc(f->s, id, 1, "running", part), 0);
        store_sync(f->s);
        assert_int_equal(store_recover(f->s, note_part_doc, &seen), 0);
        json_t *own = json_loads(seen.doc, 0, NULL);
        assert_true(json_equal(own, part));
        json_decref(own);
        json_decref(part);
        json_decref(j);
}

/* What a job held only in the store reads back: its internal document, request and created_ms
 * included, equal to what was put. */
static void test_get_internal_reads_back_what_was_put(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A, DEV_B};
        char a[UUID_STRING_MAX], upper[UUID_STRING_MAX];
        json_t *ja = job_at(a, 3000, "queued", "copy", u, 2), *got = NULL;

        json_object_set_new(ja, "request", json_string("{\"benchmark\":\"copy\"}"));
        put_sync(f->s, ja);
        for (size_t i = 0; i < sizeof(upper); i++)
                upper[i] = (char)((a[i] >= 'a' && a[i] <= 'f') ? a[i] - 32 : a[i]);
        assert_int_equal(store_get_internal(f->s, upper, &got), 0);
        assert_true(json_equal(got, ja));
        json_decref(got);
        got = NULL;
        assert_int_equal(store_get_internal(f->s, "00000000-0000-4000-8000-000000000000", &got),
                         -ENOENT);
        assert_null(got);
        json_decref(ja);
}

/* Several internal documents in one read: each as store_get_internal reads it, and NULL for an
 * id that is not stored, without failing the others. */
static void test_get_internal_many_reads_each_and_nothing_for_the_missing(void **state)
{
        struct fx *f = *state;
        const char *u[] = {DEV_A};
        char a[UUID_STRING_MAX], b[UUID_STRING_MAX];
        json_t *ja = job_at(a, 3000, "queued", "copy", u, 1),
               *jb = job_at(b, 3001, "queued", "copy", u, 1), *got[3];
        const char *ids[3] = {a, "00000000-0000-4000-8000-000000000000", b};

        json_object_set_new(jb, "request", json_string("{\"benchmark\":\"copy\"}"));
        put_sync(f->s, ja);
        put_sync(f->s, jb);
        assert_int_equal(store_get_internal_many(f->s, ids, 3, got), 0);
        assert_true(json_equal(got[0], ja));
        assert_null(got[1]);
        assert_true(json_equal(got[2], jb));
        json_decref(got[0]);
        json_decref(got[2]);
        json_decref(ja);
        json_decref(jb);
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

        store_put(f->s, ja, NULL);
        store_put(f->s, jb, NULL);
        store_put(f->s, jc, NULL);
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

static void test_list_filters_and_paging(void **state)
{
        struct fx *f = *state;
        const char *ua[] = {DEV_A}, *ub[] = {DEV_B}, *uab[] = {DEV_A, DEV_B};
        char ids[6][UUID_STRING_MAX];
        json_t *arr;
        bool more;

        json_decref((put_sync(f->s, arr = job_at(ids[0], 10000, "succeeded", "copy", ua, 1)), arr));
        json_decref((put_sync(f->s, arr = job_at(ids[1], 20000, "failed", "copy", ub, 1)), arr));
        json_decref(
            (put_sync(f->s, arr = job_at(ids[2], 30000, "succeeded", "health", uab, 2)), arr));
        json_decref((put_sync(f->s, arr = job_at(ids[3], 40000, "queued", "copy", ua, 1)), arr));
        json_decref(
            (put_sync(f->s, arr = job_at(ids[4], 50000, "succeeded", "health", ua, 1)), arr));
        json_decref((put_sync(f->s, arr = job_at(ids[5], 60000, "succeeded", "copy", ub, 1)), arr));

        struct store_query q = {.limit = 100};
        assert_int_equal(store_list(f->s, &q, &arr, &more), 0);
        assert_int_equal(json_array_size(arr), 6);
        assert_false(more);
        assert_string_equal(json_string_value(json_object_get(json_array_get(arr, 0), "id")),
                            ids[5]); /* newest first */
        assert_null(
            json_object_get(json_array_get(json_object_get(json_array_get(arr, 0), "parts"), 0),
                            "result")); /* summaries */
        json_decref(arr);

        q = (struct store_query){.limit = 100, .uuid = DEV_A, .benchmark = "health"};
        assert_int_equal(store_list(f->s, &q, &arr, &more), 0);
        assert_int_equal(json_array_size(arr), 2);
        assert_string_equal(json_string_value(json_object_get(json_array_get(arr, 1), "id")),
                            ids[2]);
        json_decref(arr);

        q = (struct store_query){
            .limit = 100, .state = "succeeded", .since_ms = 20000, .until_ms = 60000};
        assert_int_equal(store_list(f->s, &q, &arr, &more), 0);
        assert_int_equal(json_array_size(arr), 2); /* ids[4], ids[2] */
        json_decref(arr);

        q = (struct store_query){.limit = 2, .uuid = DEV_B};
        assert_int_equal(store_list(f->s, &q, &arr, &more), 0);
        assert_int_equal(json_array_size(arr), 2);
        assert_true(more);
        json_decref(arr);
        q.before = ids[2];
        assert_int_equal(store_list(f->s, &q, &arr, &more), 0);
        assert_int_equal(json_array_size(arr), 1);
        assert_false(more);
        assert_string_equal(json_string_value(json_object_get(json_array_get(arr, 0), "id")),
                            ids[1]);
        json_decref(arr);

        q = (struct store_query){
            .limit = 100, .label_key = "team", .label_key_len = 4, .label_value = "a"};
        assert_int_equal(store_list(f->s, &q, &arr, &more), 0);
        assert_int_equal(json_array_size(arr), 6);
        json_decref(arr);
        q.label_value = "b";
        assert_int_equal(store_list(f->s, &q, &arr, &more), 0);
        assert_int_equal(json_array_size(arr), 0);
        json_decref(arr);
}

static void test_health_parts_newest_first(void **state)
{
        struct fx *f = *state;
        const char *ua[] = {DEV_A};
        char a[UUID_STRING_MAX], b[UUID_STRING_MAX], c[UUID_STRING_MAX];
        json_t *ja = job_at(a, 1000, "succeeded", "health", ua, 1);
        json_t *jb = job_at(b, 2000, "succeeded", "health", ua, 1);
        json_t *jc = job_at(c, 3000, "succeeded", "health", ua, 1);
        json_t *parts = NULL;

        json_object_set_new(json_array_get(json_object_get(ja, "parts"), 0), "verdict",
                            json_pack("{s:s}", "verdict", "pass"));
        json_object_set_new(json_array_get(json_object_get(jb, "parts"), 0), "verdict",
                            json_pack("{s:s}", "verdict", "fail"));
        json_object_set_new(json_array_get(json_object_get(jc, "parts"), 0), "verdict",
                            json_pack("{s:s}", "verdict", "pass"));
        put_sync(f->s, ja);
        put_sync(f->s, jb);
        put_sync(f->s, jc);
        assert_int_equal(store_health_parts(f->s, DEV_A, NULL, false, 1, &parts), 0);
        assert_int_equal(json_array_size(parts), 1);
        json_decref(parts);
        assert_int_equal(store_health_parts(f->s, DEV_A, c, true, 10, &parts), 0);
        assert_int_equal(json_array_size(parts), 1); /* only a: b failed, c excluded */
        json_decref(parts);
        assert_int_equal(store_health_parts(f->s, DEV_B, NULL, false, 10, &parts), 0);
        assert_int_equal(json_array_size(parts), 0);
        json_decref(parts);
        json_decref(ja);
        json_decref(jb);
        json_decref(jc);
}

static void test_retention_by_count(void **state)
{
        struct fx *f = *state;
        const char *ua[] = {DEV_A};
        char id[UUID_STRING_MAX], keep[UUID_STRING_MAX];
        json_t *j;

        for (int i = 0; i < 10; i++) {
                j = job_at(id, 1000 + (uint64_t)i, "succeeded", "copy", ua, 1);
                store_put(f->s, j, NULL);
                json_decref(j);
        }
        j = job_at(keep, 500, "queued", "copy", ua, 1); /* unfinished: never deleted */
        put_sync(f->s, j);
        json_decref(j);
        store_retention(f->s, 3, 0, 0);
        for (int i = 0; i < 200 && store_count(f->s) != 4; i++)
                usleep(10000);
        assert_int_equal(store_count(f->s), 4);
        assert_int_equal(store_get(f->s, id, &j), 0); /* the newest stays */
        json_decref(j);
        assert_int_equal(store_get(f->s, keep, &j), 0);
        json_decref(j);
}

static void test_second_open_is_refused(void **state)
{
        struct fx *f = *state;
        struct store *other = NULL;

        assert_int_equal(store_open(f->path, &other), -EBUSY);
        assert_null(other);
}

static void write_at(int dfd, const char *name, const char *text)
{
        assert_int_equal(write_file_atomic(dfd, name, text, strlen(text)), 0);
}

static void test_import_once_sets_aside_and_skips_duplicates(void **state)
{
        char *dir = scratch_dir_new(), *jobs = NULL, a[UUID_STRING_MAX], name[300], upper[80];
        const char *ua[] = {DEV_A};
        struct store *s = NULL;
        json_t *ja = job_at(a, 1000, "succeeded", "copy", ua, 1), *got;
        char *text = json_dumps(ja, 0);
        int dfd;

        assert_true(asprintf(&jobs, "%s/jobs", dir) > 0);
        assert_int_equal(mkdir(jobs, 0750), 0);
        dfd = open(jobs, O_RDONLY | O_DIRECTORY);
        snprintf(name, sizeof(name), "%s.json", a);
        write_at(dfd, name, text);
        /* the same id in capitals: a duplicate */
        for (size_t i = 0; i < strlen(a); i++)
                upper[i] = (char)toupper((unsigned char)a[i]);
        upper[strlen(a)] = 0;
        json_object_set_new(ja, "id", json_string(upper));
        free(text);
        text = json_dumps(ja, 0);
        snprintf(name, sizeof(name), "%s.json", upper);
        write_at(dfd, name, text);
        /* odd names: garbage, a name too long to get a suffix, a directory named like a temp */
        write_at(dfd, "01a22ea6-c294-7427-ba85-54940c685e37.json", "{\"id\": \"tru");
        memset(name, 'x', 250);
        strcpy(name + 250, ".json");
        int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL, 0640);
        assert_true(fd >= 0);
        close(fd);
        assert_int_equal(mkdirat(dfd, ".x.json.tmp.abc", 0750), 0);

        assert_int_equal(store_open(dir, &s), 0);
        assert_int_equal(store_count(s), 1);
        assert_int_equal(store_get(s, a, &got), 0);
        json_decref(got);
        store_close(s);
        /* imported once: the directory is renamed */
        struct stat st;
        assert_int_equal(stat(jobs, &st), -1);
        free(jobs);
        assert_true(asprintf(&jobs, "%s/jobs.imported", dir) > 0);
        assert_int_equal(stat(jobs, &st), 0);
        assert_int_equal(store_open(dir, &s), 0);
        assert_int_equal(store_count(s), 1);
        store_close(s);

        close(dfd);
        free(text);
        free(jobs);
        json_decref(ja);
        scratch_dir_free(dir);
}

static void test_corrupt_database_is_set_aside(void **state)
{
        char *dir = scratch_dir_new(), *db = NULL;
        struct store *s = NULL;
        int dfd = open(dir, O_RDONLY | O_DIRECTORY);
        char junk[8192];

        memset(junk, 'z', sizeof(junk));
        assert_int_equal(write_file_atomic(dfd, "umd.db", junk, sizeof(junk)), 0);
        assert_int_equal(store_open(dir, &s), 0);
        assert_int_equal(store_count(s), 0);
        store_close(s);
        /* the damaged file is kept, renamed */
        DIR *d = fdopendir(dup(dfd));
        struct dirent *de;
        bool aside = false;
        while ((de = readdir(d)))
                aside = aside || strncmp(de->d_name, "umd.db.corrupt-", 15) == 0;
        closedir(d);
        assert_true(aside);
        close(dfd);
        free(db);
        scratch_dir_free(dir);
}

static void test_export_writes_every_job(void **state)
{
        struct fx *f = *state;
        const char *ua[] = {DEV_A};
        char a[UUID_STRING_MAX], b[UUID_STRING_MAX], *out = NULL;
        json_t *ja = job_at(a, 1000, "succeeded", "copy", ua, 1);
        json_t *jb = job_at(b, 2000, "queued", "copy", ua, 1);

        put_sync(f->s, ja);
        put_sync(f->s, jb);
        assert_true(asprintf(&out, "%s/export", f->path) > 0);
        assert_int_equal(store_export(f->path, out), 0);
        int dfd = open(out, O_RDONLY | O_DIRECTORY);
        assert_true(dfd >= 0);
        assert_int_equal(count_entries(dfd), 2);
        close(dfd);
        free(out);
        json_decref(ja);
        json_decref(jb);
}

/* store_writer_take_batch on a queue made by hand: tickets of jobs "a".."e" queued at the given
 * monotonic ms, waited where the name is upper case. */
struct queue {
        struct store s;
        struct store_ticket t[8];
        size_t n;
};

static void queue_add(struct queue *q, char job, uint64_t queued_ms)
{
        struct store_ticket *t = &q->t[q->n++];

        assert_true(q->n <= 8);
        snprintf(t->row.id, sizeof(t->row.id), "%c", (char)(job | 0x20));
        t->waited = job != (job | 0x20);
        t->queued_ms = queued_ms;
        if (q->s.tail)
                q->s.tail->next = t;
        else {
                q->s.head = t;
                q->s.head_ms = queued_ms;
        }
        q->s.tail = t;
}

/* The list as "a@70 b@95": what it holds, in order. */
static void list_is(const struct store_ticket *l, const char *want)
{
        char got[128] = "";
        size_t len = 0;

        for (; l; l = l->next)
                len += (size_t)snprintf(got + len, sizeof(got) - len, "%s%s@%llu", len ? " " : "",
                                        l->row.id, (unsigned long long)l->queued_ms);
        assert_string_equal(got, want);
}

static void test_a_batch_nobody_waits_for_takes_every_change(void **state)
{
        struct queue q = {0};

        (void)state;
        queue_add(&q, 'a', 95);
        queue_add(&q, 'b', 99);
        list_is(store_writer_take_batch(&q.s, 100), "a@95 b@99");
        assert_null(q.s.head);
        assert_null(q.s.tail);
}

static void test_a_waited_batch_keeps_a_jobs_changes_in_order(void **state)
{
        struct queue q = {0};

        (void)state;
        q.s.urgent = true;
        queue_add(&q, 'a', 70); /* due: goes, though its job's next change stays */
        queue_add(&q, 'a', 95);
        queue_add(&q, 'B', 99);
        list_is(store_writer_take_batch(&q.s, 100), "a@70 b@99");
        list_is(q.s.head, "a@95");
        assert_int_equal(q.s.head_ms, 95);
}

static void test_a_waited_change_takes_its_jobs_earlier_ones(void **state)
{
        struct queue q = {0};

        (void)state;
        q.s.urgent = true;
        queue_add(&q, 'a', 95);
        queue_add(&q, 'c', 96);
        queue_add(&q, 'A', 99);
        list_is(store_writer_take_batch(&q.s, 100), "a@95 a@99");
        list_is(q.s.head, "c@96");
}

static void test_a_waited_batch_leaves_changes_younger_than_lazy(void **state)
{
        const uint64_t now = 1000;
        struct queue q = {0};
        char want[64], left[32];

        (void)state;
        q.s.urgent = true;
        queue_add(&q, 'e', now - STORE_LAZY_MS);
        queue_add(&q, 'd', now - STORE_LAZY_MS + 1); /* a millisecond short of due */
        queue_add(&q, 'B', now - 1);
        snprintf(want, sizeof(want), "e@%d b@%d", (int)now - STORE_LAZY_MS, (int)now - 1);
        snprintf(left, sizeof(left), "d@%d", (int)now - STORE_LAZY_MS + 1);
        list_is(store_writer_take_batch(&q.s, now), want);
        list_is(q.s.head, left);
}

static void test_a_sync_takes_every_change(void **state)
{
        struct queue q = {0};

        (void)state;
        q.s.flush_all = true;
        queue_add(&q, 'a', 99);
        queue_add(&q, 'b', 100);
        list_is(store_writer_take_batch(&q.s, 100), "a@99 b@100");
        assert_null(q.s.head);
        assert_false(q.s.flush_all);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_a_batch_nobody_waits_for_takes_every_change),
            cmocka_unit_test(test_a_waited_batch_keeps_a_jobs_changes_in_order),
            cmocka_unit_test(test_a_waited_change_takes_its_jobs_earlier_ones),
            cmocka_unit_test(test_a_waited_batch_leaves_changes_younger_than_lazy),
            cmocka_unit_test(test_a_sync_takes_every_change),
            /* With a store open first: SQLite is initialised by the store's own settings. */
            cmocka_unit_test_setup_teardown(test_nocase_is_sqlites_own_order, setup, teardown),
            cmocka_unit_test_setup_teardown(test_put_get_public_form, setup, teardown),
            cmocka_unit_test_setup_teardown(test_sqlite_keeps_no_allocation_counts, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_a_result_deeper_than_the_dumper_is_stored_whole,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_wal_stats_count_waited_and_lazy_changes, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_wal_stats_count_the_rows_written, setup, teardown),
            cmocka_unit_test_setup_teardown(test_raw_results_store_the_same_bytes_as_trees, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_recover_reads_no_text_unless_asked, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(
                test_recover_finds_each_open_jobs_parts_past_finished_ones, setup, teardown),
            cmocka_unit_test_setup_teardown(
                test_get_internal_many_reads_each_and_nothing_for_the_missing, setup, teardown),
            cmocka_unit_test_setup_teardown(test_get_internal_reads_back_what_was_put, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_recover_only_unfinished_in_id_order, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_recover_gives_the_columns_and_the_internal_text,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_list_filters_and_paging, setup, teardown),
            cmocka_unit_test_setup_teardown(test_health_parts_newest_first, setup, teardown),
            cmocka_unit_test_setup_teardown(test_retention_by_count, setup, teardown),
            cmocka_unit_test_setup_teardown(test_second_open_is_refused, setup, teardown),
            cmocka_unit_test_setup_teardown(test_export_writes_every_job, setup, teardown),
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
            cmocka_unit_test_setup_teardown(test_concurrent_changes_are_stored_as_their_last, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(
                test_a_part_that_changes_device_is_listed_under_the_new_one, setup, teardown),
            cmocka_unit_test_setup_teardown(test_a_lone_waiter_does_not_wait_for_a_gathering_commit,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_the_wal_stays_under_wal_max_bytes, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_a_large_batch_commits_once, setup, teardown),
            cmocka_unit_test_setup_teardown(test_checkpoints_follow_wal_growth_not_commits, setup,
                                            teardown),
            cmocka_unit_test(test_import_once_sets_aside_and_skips_duplicates),
            cmocka_unit_test(test_corrupt_database_is_set_aside),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
