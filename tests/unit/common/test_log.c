/* Log lines: plain "ident: level: msg" on a terminal or file, "<N>msg" when stderr is the
 * journal stream named by JOURNAL_STREAM. Each case runs in a child, because the journal check
 * is made once per process. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "log.h"

enum mode { PLAIN, JOURNAL, JOURNAL_OTHER_STREAM };

/* Runs fn in a child whose stderr is a pipe; returns what it wrote (malloc'd). */
static char *capture(enum mode mode, void (*fn)(void))
{
        static char buf[8192];
        int p[2], status;
        size_t len = 0;
        pid_t pid;

        assert_int_equal(pipe(p), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                struct stat st;
                char env[64];

                close(p[0]);
                dup2(p[1], STDERR_FILENO);
                fstat(STDERR_FILENO, &st);
                snprintf(env, sizeof(env), "%llu:%llu", (unsigned long long)st.st_dev,
                         (unsigned long long)st.st_ino + (mode == JOURNAL_OTHER_STREAM));
                if (mode == PLAIN)
                        unsetenv("JOURNAL_STREAM");
                else
                        setenv("JOURNAL_STREAM", env, 1);
                fn();
                _exit(0);
        }
        close(p[1]);
        for (;;) {
                ssize_t n = read(p[0], buf + len, sizeof(buf) - 1 - len);

                if (n <= 0)
                        break;
                len += (size_t)n;
        }
        close(p[0]);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        buf[len] = '\0';
        return strdup(buf);
}

static void log_two_lines(void)
{
        log_set_ident("umd-test");
        log_set_level(LOG_INFO);
        log_info("hello %d", 42);
        log_debug("not shown");
        log_error("two\nlines");
}

static void test_plain_lines_have_ident_and_level(void **state)
{
        char *out = capture(PLAIN, log_two_lines);

        assert_string_equal(out, "umd-test: info: hello 42\numd-test: error: two lines\n");
        free(out);
}

static void test_journal_lines_have_priority_prefix(void **state)
{
        char *out = capture(JOURNAL, log_two_lines);

        assert_string_equal(out, "<6>hello 42\n<3>two lines\n");
        free(out);
}

static void test_journal_stream_of_another_fd_is_ignored(void **state)
{
        char *out = capture(JOURNAL_OTHER_STREAM, log_two_lines);

        assert_string_equal(out, "umd-test: info: hello 42\numd-test: error: two lines\n");
        free(out);
}

static void log_errno_line(void)
{
        int r;

        log_set_ident("t");
        r = log_error_errno(-ENOENT, "open %s: %m", "x");
        if (r != -ENOENT)
                _exit(1);
        r = log_warning_errno(EACCES, "again: %m");
        if (r != -EACCES)
                _exit(1);
}

static void test_log_errno_returns_negative_and_formats_m(void **state)
{
        char *out = capture(PLAIN, log_errno_line);

        assert_string_equal(out, "t: error: open x: No such file or directory\n"
                                 "t: warning: again: Permission denied\n");
        free(out);
}

static void log_long_line(void)
{
        char big[10000];

        memset(big, 'a', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        log_set_ident("t");
        log_info("%s", big);
}

static void test_long_message_truncated_to_one_line(void **state)
{
        char *out = capture(PLAIN, log_long_line);
        size_t n = strlen(out);

        assert_true(n > 1000 && n <= 4096);
        assert_int_equal(out[n - 1], '\n');
        assert_ptr_equal(strchr(out, '\n'), out + n - 1);
        free(out);
}

static void test_level_from_string(void **state)
{
        assert_int_equal(log_level_from_string("error"), LOG_ERR);
        assert_int_equal(log_level_from_string("warning"), LOG_WARNING);
        assert_int_equal(log_level_from_string("notice"), LOG_NOTICE);
        assert_int_equal(log_level_from_string("info"), LOG_INFO);
        assert_int_equal(log_level_from_string("debug"), LOG_DEBUG);
        assert_int_equal(log_level_from_string("verbose"), -EINVAL);
        assert_int_equal(log_level_from_string(""), -EINVAL);
        assert_int_equal(log_level_from_string(NULL), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_plain_lines_have_ident_and_level),
            cmocka_unit_test(test_journal_lines_have_priority_prefix),
            cmocka_unit_test(test_journal_stream_of_another_fd_is_ignored),
            cmocka_unit_test(test_log_errno_returns_negative_and_formats_m),
            cmocka_unit_test(test_long_message_truncated_to_one_line),
            cmocka_unit_test(test_level_from_string),
        };

        return cmocka_run_group_tests_name("log", tests, NULL, NULL);
}
