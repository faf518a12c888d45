/* The writer's VFS (store_vfs.c): a WAL's appends gathered and written once a commit, at its
 * sync, and still every commit whole, readable by other connections, and nothing of a
 * rolled-back transaction. */
#include "../common/testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <sqlite3.h>

#include "log.h"
#include "store_internal.h"

struct fx {
        char *dir;
        char path[512];
        sqlite3 *w; /* through umd-wal, as the store's writer */
        sqlite3 *r; /* the default VFS, as the store's readers */
};

static int setup(void **state)
{
        struct fx *f = calloc(1, sizeof(*f));

        if (!f)
                return -1;
        log_set_level(LOG_ERR);
        f->dir = scratch_dir_new();
        if (!f->dir)
                return -1;
        snprintf(f->path, sizeof(f->path), "%s/t.db", f->dir);
        if (store_db_open(f->path, true, &f->w) < 0 ||
            sqlite3_exec(f->w, "CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)", NULL, NULL,
                         NULL) != SQLITE_OK ||
            store_db_open(f->path, false, &f->r) < 0)
                return -1;
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fx *f = *state;

        sqlite3_close(f->r);
        sqlite3_close(f->w);
        scratch_dir_free(f->dir);
        free(f);
        return 0;
}

/* Rows k in [from, from + n), each a blob of size bytes of k's value, in one transaction. */
static int insert(sqlite3 *db, int from, int n, int size)
{
        sqlite3_stmt *st = NULL;
        unsigned char *blob = malloc((size_t)size);
        int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);

        assert_non_null(blob);
        if (rc == SQLITE_OK)
                rc = sqlite3_prepare_v2(db, "INSERT INTO t VALUES (?1, ?2)", -1, &st, NULL);
        for (int k = from; rc == SQLITE_OK && k < from + n; k++) {
                memset(blob, k & 0xff, (size_t)size);
                sqlite3_bind_int(st, 1, k);
                sqlite3_bind_blob(st, 2, blob, size, SQLITE_STATIC);
                rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
                sqlite3_reset(st);
        }
        sqlite3_finalize(st);
        free(blob);
        return rc;
}

/* insert's rows, committed. */
static void commit_rows(sqlite3 *db, int from, int n, int size)
{
        assert_int_equal(insert(db, from, n, size), SQLITE_OK);
        assert_int_equal(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
}

/* What the reader's connection sees: rows, and whether each blob holds its key's byte. */
static int rows_seen(sqlite3 *db, int size)
{
        sqlite3_stmt *st = NULL;
        int n = 0;

        assert_int_equal(sqlite3_prepare_v2(db, "SELECT k, v FROM t ORDER BY k", -1, &st, NULL),
                         SQLITE_OK);
        while (sqlite3_step(st) == SQLITE_ROW) {
                int k = sqlite3_column_int(st, 0);
                const unsigned char *v = sqlite3_column_blob(st, 1);

                assert_int_equal(sqlite3_column_bytes(st, 1), size);
                for (int i = 0; i < size; i++)
                        assert_int_equal(v[i], k & 0xff);
                n++;
        }
        sqlite3_finalize(st);
        return n;
}

/* Write system calls this process made so far (/proc/self/io's syscw). */
static unsigned long long write_calls(void)
{
        FILE *fp = fopen("/proc/self/io", "r");
        char line[128];
        unsigned long long n = 0;

        if (!fp)
                return 0;
        while (fgets(line, sizeof(line), fp))
                if (sscanf(line, "syscw: %llu", &n) == 1)
                        break;
        fclose(fp);
        return n;
}

static void test_a_commit_of_many_pages_is_written_in_few_calls(void **state)
{
        struct fx *f = *state;

        if (write_calls() == 0)
                skip();                /* no /proc/self/io here */
        commit_rows(f->w, 0, 1, 3000); /* the WAL's header, once */
        unsigned long long before = write_calls();
        /* Thirty pages of rows: sixty writes a commit from SQLite, two for each frame. */
        commit_rows(f->w, 1, 30, 3000);
        assert_in_range(write_calls() - before, 1, 4);
        assert_int_equal(rows_seen(f->r, 3000), 31);
}

static void test_a_commit_larger_than_one_write_commits_whole(void **state)
{
        struct fx *f = *state;

        /* 2 MiB of frames: the unix VFS writes at most 128 KiB a call. */
        commit_rows(f->w, 0, 512, 4000);
        assert_int_equal(rows_seen(f->r, 4000), 512);
}

static void test_a_transaction_past_the_gather_limit_commits_whole(void **state)
{
        struct fx *f = *state;

        /* 12 MiB, past the 4 MiB gathered at most: written as it goes, still one commit. */
        commit_rows(f->w, 0, 3000, 4000);
        assert_int_equal(rows_seen(f->r, 4000), 3000);
}

static void test_each_commit_is_seen_by_another_connection(void **state)
{
        struct fx *f = *state;

        for (int i = 0; i < 50; i++) {
                commit_rows(f->w, i * 3, 3, 700);
                assert_int_equal(rows_seen(f->r, 700), (i + 1) * 3);
        }
}

static void test_a_rolled_back_transaction_leaves_nothing(void **state)
{
        struct fx *f = *state;

        commit_rows(f->w, 0, 5, 2000);
        /* A cache of ten pages: the transaction spills frames into the WAL before it ends. */
        assert_int_equal(sqlite3_exec(f->w, "PRAGMA cache_size=10", NULL, NULL, NULL), SQLITE_OK);
        assert_int_equal(insert(f->w, 100, 400, 2000), SQLITE_OK);
        assert_int_equal(sqlite3_exec(f->w, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
        assert_int_equal(rows_seen(f->r, 2000), 5);
        /* The writer's own view, and the next commit's, are whole too. */
        assert_int_equal(rows_seen(f->w, 2000), 5);
        commit_rows(f->w, 5, 5, 2000);
        assert_int_equal(rows_seen(f->r, 2000), 10);
}

static void test_commits_survive_a_checkpoint_and_a_reopen(void **state)
{
        struct fx *f = *state;

        commit_rows(f->w, 0, 20, 3000);
        assert_int_equal(
            sqlite3_wal_checkpoint_v2(f->r, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL),
            SQLITE_OK);
        /* The WAL starts again from its beginning: the first write is not an append. */
        commit_rows(f->w, 20, 20, 3000);
        sqlite3_close(f->w);
        f->w = NULL;
        assert_int_equal(store_db_open(f->path, true, &f->w), 0);
        assert_int_equal(rows_seen(f->w, 3000), 40);
        assert_int_equal(rows_seen(f->r, 3000), 40);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_a_commit_of_many_pages_is_written_in_few_calls,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_a_commit_larger_than_one_write_commits_whole,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_a_transaction_past_the_gather_limit_commits_whole,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_each_commit_is_seen_by_another_connection, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_a_rolled_back_transaction_leaves_nothing, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_commits_survive_a_checkpoint_and_a_reopen, setup,
                                            teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
