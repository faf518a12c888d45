/* write_file_atomic, read_file_at, mkdir_p: durable writes leave the old file or the whole new
 * one, never a temp; reads are bounded. */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "fileio.h"

struct fx {
        char *path;
        int dirfd;
};

static int setup(void **state)
{
        struct fx *f = calloc(1, sizeof(*f));

        if (!f)
                return -1;
        f->path = scratch_dir_new();
        if (!f->path)
                return -1;
        f->dirfd = open(f->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (f->dirfd < 0)
                return -1;
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fx *f = *state;

        close(f->dirfd);
        scratch_dir_free(f->path);
        free(f);
        return 0;
}

static void assert_content(int dirfd, const char *name, const char *want)
{
        char *data = NULL;
        size_t len = 0;

        assert_int_equal(read_file_at(dirfd, name, 1 << 20, &data, &len), 0);
        assert_int_equal(len, strlen(want));
        assert_string_equal(data, want);
        free(data);
}

static void test_write_atomic_writes_content(void **state)
{
        struct fx *f = *state;

        assert_int_equal(write_file_atomic(f->dirfd, "a.json", "{\"x\":1}\n", 8), 0);
        assert_content(f->dirfd, "a.json", "{\"x\":1}\n");
}

static void test_write_atomic_replaces_old_file(void **state)
{
        struct fx *f = *state;

        assert_int_equal(write_file_atomic(f->dirfd, "a", "old", 3), 0);
        assert_int_equal(write_file_atomic(f->dirfd, "a", "new!", 4), 0);
        assert_content(f->dirfd, "a", "new!");
}

static void test_write_atomic_leaves_no_temp(void **state)
{
        struct fx *f = *state;

        for (int i = 0; i < 5; i++)
                assert_int_equal(write_file_atomic(f->dirfd, "a", "data", 4), 0);
        assert_int_equal(count_entries(f->dirfd), 1);
}

static void test_write_atomic_empty_file(void **state)
{
        struct fx *f = *state;

        assert_int_equal(write_file_atomic(f->dirfd, "empty", "", 0), 0);
        assert_content(f->dirfd, "empty", "");
}

static void test_write_atomic_bad_fd_fails(void **state)
{
        assert_int_equal(write_file_atomic(-1, "a", "x", 1), -EBADF);
}

static void test_write_atomic_rejects_name_with_slash(void **state)
{
        struct fx *f = *state;

        assert_int_equal(write_file_atomic(f->dirfd, "sub/a", "x", 1), -EINVAL);
        assert_int_equal(write_file_atomic(f->dirfd, "", "x", 1), -EINVAL);
        assert_int_equal(count_entries(f->dirfd), 0);
}

/* A write that fails half-way (file size limit, as a full disk would) keeps the old file and
 * removes the temp. Works as root too, unlike a read-only directory. */
static void test_write_atomic_failed_write_keeps_old_file(void **state)
{
        struct fx *f = *state;
        char big[4096];
        struct rlimit old, lim;
        void (*old_handler)(int);
        int r;

        memset(big, 'x', sizeof(big));
        assert_int_equal(write_file_atomic(f->dirfd, "a", "old", 3), 0);

        assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
        lim = old;
        lim.rlim_cur = 100;
        old_handler = signal(SIGXFSZ, SIG_IGN);
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
        r = write_file_atomic(f->dirfd, "a", big, sizeof(big));
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
        signal(SIGXFSZ, old_handler);

        assert_int_equal(r, -EFBIG);
        assert_content(f->dirfd, "a", "old");
        assert_int_equal(count_entries(f->dirfd), 1);
}

static void test_write_atomic_read_only_dir_keeps_old_file(void **state)
{
        struct fx *f = *state;
        int r;

        if (geteuid() == 0)
                skip(); /* root writes into read-only directories */
        assert_int_equal(write_file_atomic(f->dirfd, "a", "old", 3), 0);
        assert_int_equal(chmod(f->path, 0500), 0);
        r = write_file_atomic(f->dirfd, "a", "new", 3);
        assert_int_equal(chmod(f->path, 0700), 0);
        assert_int_equal(r, -EACCES);
        assert_content(f->dirfd, "a", "old");
        assert_int_equal(count_entries(f->dirfd), 1);
}

static void test_read_file_at_up_to_limit(void **state)
{
        struct fx *f = *state;
        char *data = NULL;
        size_t len = 0;

        assert_int_equal(write_file_atomic(f->dirfd, "a", "0123456789", 10), 0);
        assert_int_equal(read_file_at(f->dirfd, "a", 10, &data, &len), 0);
        assert_int_equal(len, 10);
        assert_int_equal(data[10], '\0');
        free(data);
}

static void test_read_file_at_over_limit_is_efbig(void **state)
{
        struct fx *f = *state;
        char *data = (char *)"untouched";
        size_t len = 77;

        assert_int_equal(write_file_atomic(f->dirfd, "a", "0123456789", 10), 0);
        assert_int_equal(read_file_at(f->dirfd, "a", 9, &data, &len), -EFBIG);
        assert_string_equal(data, "untouched");
        assert_int_equal(len, 77);
        assert_int_equal(read_file_at(f->dirfd, "a", 0, &data, &len), -EFBIG);
}

/* /proc files report size 0: the limit must hold while reading, not only from fstat. */
static void test_read_file_at_limit_holds_without_size(void **state)
{
        int proc = open("/proc/self", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char *data = NULL;
        size_t len = 0;

        if (proc < 0)
                skip();
        assert_int_equal(read_file_at(proc, "maps", 16, &data, &len), -EFBIG);
        assert_int_equal(read_file_at(proc, "maps", 1 << 24, &data, &len), 0);
        assert_true(len > 16);
        assert_int_equal(strlen(data), len);
        free(data);
        close(proc);
}

/* A FIFO must be refused at once: a blocking open waits for a writer forever (issue 14). */
static void test_read_file_at_refuses_fifo_without_blocking(void **state)
{
        struct fx *f = *state;
        char *data = NULL;

        assert_int_equal(mkfifoat(f->dirfd, "fifo", 0600), 0);
        alarm(5);
        assert_int_equal(read_file_at(f->dirfd, "fifo", 100, &data, NULL), -EBADFD);
        alarm(0);
        assert_null(data);
        assert_int_equal(unlinkat(f->dirfd, "fifo", 0), 0);
}

static void test_read_file_at_flags_nofollow(void **state)
{
        struct fx *f = *state;
        char *data = NULL;

        assert_int_equal(write_file_atomic(f->dirfd, "a", "x", 1), 0);
        assert_int_equal(symlinkat("a", f->dirfd, "link"), 0);
        assert_int_equal(read_file_at_flags(f->dirfd, "link", O_NOFOLLOW, 100, &data, NULL),
                         -ELOOP);
        assert_null(data);
        assert_int_equal(read_file_at(f->dirfd, "link", 100, &data, NULL), 0);
        free(data);
        assert_int_equal(unlinkat(f->dirfd, "link", 0), 0);
}

static void test_read_file_at_missing_and_directory(void **state)
{
        struct fx *f = *state;
        char *data = NULL;

        assert_int_equal(read_file_at(f->dirfd, "nope", 100, &data, NULL), -ENOENT);
        assert_int_equal(mkdirat(f->dirfd, "d", 0700), 0);
        assert_int_equal(read_file_at(f->dirfd, "d", 100, &data, NULL), -EISDIR);
        assert_null(data);
}

/* The stream config.c and models.c parse: a regular file, and nothing else, without blocking. */
static void test_fopen_regular_takes_only_regular_files(void **state)
{
        struct fx *f = *state;
        FILE *keep = (FILE *)f, *in = keep;
        char *path = NULL, buf[8] = "";

        assert_int_equal(write_file_atomic(f->dirfd, "a", "x=1\n", 4), 0);
        assert_true(asprintf(&path, "%s/a", f->path) > 0);
        assert_int_equal(fopen_regular(path, &in), 0);
        assert_non_null(fgets(buf, sizeof(buf), in));
        assert_string_equal(buf, "x=1\n");
        fclose(in);
        free(path);

        in = keep;
        assert_int_equal(mkdirat(f->dirfd, "d", 0700), 0);
        assert_int_equal(mkfifoat(f->dirfd, "fifo", 0600), 0);
        assert_true(asprintf(&path, "%s/d", f->path) > 0);
        assert_int_equal(fopen_regular(path, &in), -EISDIR);
        free(path);
        assert_true(asprintf(&path, "%s/fifo", f->path) > 0);
        alarm(5);
        assert_int_equal(fopen_regular(path, &in), -EBADFD);
        alarm(0);
        free(path);
        assert_true(asprintf(&path, "%s/nope", f->path) > 0);
        assert_int_equal(fopen_regular(path, &in), -ENOENT);
        free(path);
        assert_ptr_equal(in, keep);
        assert_int_equal(unlinkat(f->dirfd, "fifo", 0), 0);
}

static void test_mkdir_p_creates_nested_and_accepts_existing(void **state)
{
        struct fx *f = *state;
        char *p;
        struct stat st;

        assert_true(asprintf(&p, "%s/a/b//c/", f->path) > 0);
        assert_int_equal(mkdir_p(p, 0750), 0);
        assert_int_equal(mkdir_p(p, 0750), 0);
        assert_int_equal(stat(p, &st), 0);
        assert_true(S_ISDIR(st.st_mode));
        free(p);
}

static void test_mkdir_p_file_in_the_way_is_enotdir(void **state)
{
        struct fx *f = *state;
        char *p;

        assert_int_equal(write_file_atomic(f->dirfd, "file", "x", 1), 0);
        assert_true(asprintf(&p, "%s/file/sub", f->path) > 0);
        assert_int_equal(mkdir_p(p, 0750), -ENOTDIR);
        free(p);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        const struct CMUnitTest tests[] = {
            T(test_write_atomic_writes_content),
            T(test_write_atomic_replaces_old_file),
            T(test_write_atomic_leaves_no_temp),
            T(test_write_atomic_empty_file),
            T(test_write_atomic_bad_fd_fails),
            T(test_write_atomic_rejects_name_with_slash),
            T(test_write_atomic_failed_write_keeps_old_file),
            T(test_write_atomic_read_only_dir_keeps_old_file),
            T(test_read_file_at_up_to_limit),
            T(test_read_file_at_over_limit_is_efbig),
            T(test_read_file_at_limit_holds_without_size),
            T(test_read_file_at_missing_and_directory),
            T(test_read_file_at_refuses_fifo_without_blocking),
            T(test_read_file_at_flags_nofollow),
            T(test_fopen_regular_takes_only_regular_files),
            T(test_mkdir_p_creates_nested_and_accepts_existing),
            T(test_mkdir_p_file_in_the_way_is_enotdir),
        };

        return cmocka_run_group_tests_name("fileio", tests, NULL, NULL);
}
