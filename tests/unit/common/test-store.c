/* The durable job store: writes, recovery order, and what recovery sets aside. */
#include "testutil.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "fileio.h"
#include "log.h"
#include "store.h"
#include "uuid.h"

struct fx {
        char *path;
        char *jobs_path;
        int jobs_fd;
        struct store *s;
};

static int setup(void **state)
{
        struct fx *f = calloc(1, sizeof(*f));

        if (!f)
                return -1;
        log_set_level(LOG_WARNING);
        f->path = scratch_dir_new();
        if (!f->path || store_open(f->path, &f->s) < 0)
                return -1;
        if (asprintf(&f->jobs_path, "%s/jobs", f->path) < 0)
                return -1;
        f->jobs_fd = open(f->jobs_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (f->jobs_fd < 0)
                return -1;
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fx *f = *state;

        store_close(f->s);
        close(f->jobs_fd);
        free(f->jobs_path);
        scratch_dir_free(f->path);
        free(f);
        return 0;
}

struct seen {
        json_t *ids; /* array of id strings in callback order */
        int fail_after;
};

static int collect(json_t *job, void *userdata)
{
        struct seen *seen = userdata;

        if (seen->fail_after >= 0 && json_array_size(seen->ids) == (size_t)seen->fail_after)
                return -ECANCELED;
        json_array_append(seen->ids, json_object_get(job, "id"));
        return 0;
}

static json_t *recover_ids(struct store *s, unsigned *corrupt)
{
        struct seen seen = {.ids = json_array(), .fail_after = -1};

        assert_int_equal(store_recover(s, collect, &seen, corrupt), 0);
        return seen.ids;
}

static json_t *job(const char *id, const char *state)
{
        return json_pack("{s:s, s:s, s:s}", "id", id, "state", state, "benchmark", "copy");
}

static bool exists(int dirfd, const char *name)
{
        struct stat st;

        return fstatat(dirfd, name, &st, 0) == 0;
}

static void test_open_creates_jobs_dir(void **state)
{
        struct fx *f = *state;
        struct stat st;

        assert_int_equal(stat(f->jobs_path, &st), 0);
        assert_true(S_ISDIR(st.st_mode));
        assert_int_equal(st.st_mode & 07777, 0750);
}

static void test_put_writes_job_file(void **state)
{
        struct fx *f = *state;
        char id[UUID_STRING_MAX], name[64];
        json_t *j, *back;
        json_error_t err;
        char *data = NULL;
        size_t len = 0;

        assert_int_equal(uuid7_generate(id), 0);
        j = job(id, "queued");
        assert_int_equal(store_put(f->s, j), 0);
        snprintf(name, sizeof(name), "%s.json", id);
        assert_int_equal(read_file_at(f->jobs_fd, name, 1 << 20, &data, &len), 0);
        back = json_loads(data, 0, &err);
        free(data);
        assert_true(json_equal(j, back));
        assert_int_equal(count_entries(f->jobs_fd), 1);
        json_decref(back);
        json_decref(j);
}

static void test_put_rejects_missing_or_bad_id(void **state)
{
        struct fx *f = *state;
        json_t *j = json_pack("{s:s}", "state", "queued");

        assert_int_equal(store_put(f->s, j), -EINVAL);
        json_object_set_new(j, "id", json_string("../../etc/passwd"));
        assert_int_equal(store_put(f->s, j), -EINVAL);
        json_object_set_new(j, "id", json_integer(7));
        assert_int_equal(store_put(f->s, j), -EINVAL);
        assert_int_equal(count_entries(f->jobs_fd), 0);
        json_decref(j);
}

static void test_put_twice_keeps_latest(void **state)
{
        struct fx *f = *state;
        char id[UUID_STRING_MAX];
        json_t *a, *b, *ids;

        assert_int_equal(uuid7_generate(id), 0);
        a = job(id, "queued");
        b = job(id, "succeeded");
        assert_int_equal(store_put(f->s, a), 0);
        assert_int_equal(store_put(f->s, b), 0);
        assert_int_equal(count_entries(f->jobs_fd), 1);
        ids = recover_ids(f->s, NULL);
        assert_int_equal(json_array_size(ids), 1);
        json_decref(ids);
        json_decref(a);
        json_decref(b);
}

static void test_recover_in_ascending_id_order(void **state)
{
        struct fx *f = *state;
        enum { N = 50 };
        char ids[N][UUID_STRING_MAX];
        json_t *got;

        for (int i = 0; i < N; i++)
                assert_int_equal(uuid7_generate(ids[i]), 0);
        /* written out of order: newest first, then odd, then even */
        for (int i = N - 1; i >= 0; i -= 2) {
                json_t *j = job(ids[i], "queued");

                assert_int_equal(store_put(f->s, j), 0);
                json_decref(j);
        }
        for (int i = N - 2; i >= 0; i -= 2) {
                json_t *j = job(ids[i], "running");

                assert_int_equal(store_put(f->s, j), 0);
                json_decref(j);
        }
        got = recover_ids(f->s, NULL);
        assert_int_equal(json_array_size(got), N);
        for (int i = 0; i < N; i++)
                assert_string_equal(json_string_value(json_array_get(got, (size_t)i)), ids[i]);
        json_decref(got);
}

static void test_recover_empty_store(void **state)
{
        struct fx *f = *state;
        unsigned corrupt = 99;
        json_t *got = recover_ids(f->s, &corrupt);

        assert_int_equal(json_array_size(got), 0);
        assert_int_equal(corrupt, 0);
        json_decref(got);
}

static void test_recover_removes_stale_temp(void **state)
{
        struct fx *f = *state;
        char id[UUID_STRING_MAX], tmp[128];
        json_t *j, *got;

        assert_int_equal(uuid7_generate(id), 0);
        j = job(id, "queued");
        assert_int_equal(store_put(f->s, j), 0);
        /* as a crash between open and rename would leave it */
        snprintf(tmp, sizeof(tmp), ".%s.json.tmp.abc123", id);
        assert_int_equal(write_file_atomic(f->jobs_fd, tmp, "{\"id\":", 6), 0);

        got = recover_ids(f->s, NULL);
        assert_false(exists(f->jobs_fd, tmp));
        assert_int_equal(json_array_size(got), 1);
        assert_int_equal(count_entries(f->jobs_fd), 1);
        json_decref(got);
        json_decref(j);
}

static void test_recover_sets_aside_corrupt_file(void **state)
{
        struct fx *f = *state;
        char good[UUID_STRING_MAX], bad[UUID_STRING_MAX], name[64], aside[80];
        unsigned corrupt = 0;
        json_t *j, *got;

        assert_int_equal(uuid7_generate(good), 0);
        assert_int_equal(uuid7_generate(bad), 0);
        j = job(good, "succeeded");
        assert_int_equal(store_put(f->s, j), 0);
        snprintf(name, sizeof(name), "%s.json", bad);
        snprintf(aside, sizeof(aside), "%s.json.corrupt", bad);
        assert_int_equal(write_file_atomic(f->jobs_fd, name, "{\"id\": \"trunc", 13), 0);

        got = recover_ids(f->s, &corrupt);
        assert_int_equal(corrupt, 1);
        assert_int_equal(json_array_size(got), 1);
        assert_string_equal(json_string_value(json_array_get(got, 0)), good);
        assert_false(exists(f->jobs_fd, name));
        assert_true(exists(f->jobs_fd, aside));
        json_decref(got);

        /* a second recovery leaves the set-aside file alone */
        got = recover_ids(f->s, &corrupt);
        assert_int_equal(corrupt, 0);
        assert_true(exists(f->jobs_fd, aside));
        json_decref(got);
        json_decref(j);
}

static void test_recover_sets_aside_id_mismatch(void **state)
{
        struct fx *f = *state;
        char a[UUID_STRING_MAX], b[UUID_STRING_MAX], name[64], aside[80];
        unsigned corrupt = 0;
        json_t *j, *got;
        char *data;
        size_t len;

        assert_int_equal(uuid7_generate(a), 0);
        assert_int_equal(uuid7_generate(b), 0);
        j = job(b, "queued"); /* b's document under a's name */
        data = json_dumps(j, 0);
        len = strlen(data);
        snprintf(name, sizeof(name), "%s.json", a);
        snprintf(aside, sizeof(aside), "%s.json.corrupt", a);
        assert_int_equal(write_file_atomic(f->jobs_fd, name, data, len), 0);

        got = recover_ids(f->s, &corrupt);
        assert_int_equal(corrupt, 1);
        assert_int_equal(json_array_size(got), 0);
        assert_true(exists(f->jobs_fd, aside));
        json_decref(got);
        json_decref(j);
        free(data);
}

static void test_recover_sets_aside_non_object_and_bad_name(void **state)
{
        struct fx *f = *state;
        char a[UUID_STRING_MAX], name[64];
        unsigned corrupt = 0;
        json_t *got;

        assert_int_equal(uuid7_generate(a), 0);
        snprintf(name, sizeof(name), "%s.json", a);
        assert_int_equal(write_file_atomic(f->jobs_fd, name, "[1,2]", 5), 0);
        assert_int_equal(write_file_atomic(f->jobs_fd, "notanid.json", "{\"id\":\"x\"}", 10), 0);
        assert_int_equal(write_file_atomic(f->jobs_fd, "README", "not a job", 9), 0);

        got = recover_ids(f->s, &corrupt);
        assert_int_equal(corrupt, 2);
        assert_int_equal(json_array_size(got), 0);
        assert_true(exists(f->jobs_fd, "notanid.json.corrupt"));
        assert_true(exists(f->jobs_fd, "README")); /* not ours: left alone */
        json_decref(got);
}

static void test_recover_never_replaces_older_corrupt_copy(void **state)
{
        struct fx *f = *state;
        char a[UUID_STRING_MAX], name[64], aside[80], aside1[80];
        unsigned corrupt = 0;
        json_t *got;

        assert_int_equal(uuid7_generate(a), 0);
        snprintf(name, sizeof(name), "%s.json", a);
        snprintf(aside, sizeof(aside), "%s.json.corrupt", a);
        snprintf(aside1, sizeof(aside1), "%s.json.corrupt.1", a);
        assert_int_equal(write_file_atomic(f->jobs_fd, aside, "first", 5), 0);
        assert_int_equal(write_file_atomic(f->jobs_fd, name, "second", 6), 0);
        got = recover_ids(f->s, &corrupt);
        assert_int_equal(corrupt, 1);
        assert_true(exists(f->jobs_fd, aside));
        assert_true(exists(f->jobs_fd, aside1));
        json_decref(got);
}

static void test_recover_callback_error_aborts(void **state)
{
        struct fx *f = *state;
        struct seen seen = {.ids = json_array(), .fail_after = 2};

        for (int i = 0; i < 5; i++) {
                char id[UUID_STRING_MAX];
                json_t *j;

                assert_int_equal(uuid7_generate(id), 0);
                j = job(id, "queued");
                assert_int_equal(store_put(f->s, j), 0);
                json_decref(j);
        }
        assert_int_equal(store_recover(f->s, collect, &seen, NULL), -ECANCELED);
        assert_int_equal(json_array_size(seen.ids), 2);
        json_decref(seen.ids);
}

static void test_delete_removes_file(void **state)
{
        struct fx *f = *state;
        char id[UUID_STRING_MAX];
        json_t *j;

        assert_int_equal(uuid7_generate(id), 0);
        j = job(id, "succeeded");
        assert_int_equal(store_put(f->s, j), 0);
        assert_int_equal(store_delete(f->s, id), 0);
        assert_int_equal(count_entries(f->jobs_fd), 0);
        assert_int_equal(store_delete(f->s, id), -ENOENT);
        assert_int_equal(store_delete(f->s, "../x"), -EINVAL);
        json_decref(j);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        const struct CMUnitTest tests[] = {
            T(test_open_creates_jobs_dir),
            T(test_put_writes_job_file),
            T(test_put_rejects_missing_or_bad_id),
            T(test_put_twice_keeps_latest),
            T(test_recover_in_ascending_id_order),
            T(test_recover_empty_store),
            T(test_recover_removes_stale_temp),
            T(test_recover_sets_aside_corrupt_file),
            T(test_recover_sets_aside_id_mismatch),
            T(test_recover_sets_aside_non_object_and_bad_name),
            T(test_recover_never_replaces_older_corrupt_copy),
            T(test_recover_callback_error_aborts),
            T(test_delete_removes_file),
        };

        return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}
