/* The SQLite job store's opening and closing: SQLite's settings and the NOCASE collation, the
 * state directory lock, the one-time import of jobs/ (and what it sets aside), a corrupt database
 * set aside, and export. The writer, the WAL, recovery and reads each have a file of their own
 * beside it (test_store_*.c), on one fixture (store_fixture.c). */
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
        assert_int_equal(job_doc_get(s, a, &got), 0);
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

int main(void)
{
        const struct CMUnitTest tests[] = {
            /* With a store open first: SQLite is initialised by the store's own settings. */
            cmocka_unit_test_setup_teardown(test_nocase_is_sqlites_own_order, setup, teardown),
            cmocka_unit_test_setup_teardown(test_sqlite_keeps_no_allocation_counts, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_second_open_is_refused, setup, teardown),
            cmocka_unit_test_setup_teardown(test_export_writes_every_job, setup, teardown),
            cmocka_unit_test(test_import_once_sets_aside_and_skips_duplicates),
            cmocka_unit_test(test_corrupt_database_is_set_aside),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
