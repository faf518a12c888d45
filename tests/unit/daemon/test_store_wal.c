/* The store's WAL (store_wal.c): checkpoints that follow its growth rather than commits, the
 * bound wal_max_bytes keeps, and the counts the writer keeps of its commits and rows. */
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

                assert_int_equal(fx_put(f->s, j, NULL), 0);
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
        assert_int_equal(fx_put_part(f->s, id, 0, "running"), 0);
        store_sync(f->s);
        store_wal_stats(f->s, &mid);
        assert_int_equal(mid.documents_written - before.documents_written, 1);
        assert_int_equal(mid.parts_written - before.parts_written, 1);
        /* Three changes of one job in one batch (a sync takes them together): one document.
         * Unless the writer's own STORE_LAZY_MS ran out between them (a stalled test). */
        assert_int_equal(fx_put_part(f->s, id, 0, "running"), 0);
        assert_int_equal(fx_put(f->s, j, NULL), 0);
        assert_int_equal(fx_put(f->s, j, NULL), 0);
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

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_wal_stats_count_waited_and_lazy_changes, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_wal_stats_count_the_rows_written, setup, teardown),
            cmocka_unit_test_setup_teardown(test_the_wal_stays_under_wal_max_bytes, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_checkpoints_follow_wal_growth_not_commits, setup,
                                            teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
