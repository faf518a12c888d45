/* Bearer tokens: the tokens file parser (good lines, comments, each way a line can be wrong and
 * the FILE:LINE it is reported at), the permission check on the file, the constant-time
 * comparison and resolving an Authorization header. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"
#include "util.h"

#define TOK_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define TOK_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define TOK_C "Zm9vYmFyLWJhei4xMjM0NTY3ODkw+/=~"

static struct auth_tokens *parse_ok(const char *text)
{
        struct auth_tokens *t = NULL;
        char err[256] = "";
        int r = auth_tokens_parse(text, strlen(text), "tokens", &t, err, sizeof(err));

        if (r != 0)
                fail_msg("parse failed: %d %s", r, err);
        assert_non_null(t);
        return t;
}

/* The error for text, which must be refused; the caller checks it names the line. */
static void parse_bad(const char *text, const char *want_prefix, const char *want_part)
{
        struct auth_tokens *t = NULL;
        char err[256] = "";
        int r = auth_tokens_parse(text, strlen(text), "tokens", &t, err, sizeof(err));

        assert_int_equal(r, -EINVAL);
        assert_null(t);
        if (strncmp(err, want_prefix, strlen(want_prefix)) != 0 || !strstr(err, want_part))
                fail_msg("error '%s' lacks '%s' ... '%s'", err, want_prefix, want_part);
}

static void test_parse_lines_comments_and_blanks(void **state)
{
        struct auth_tokens *t = parse_ok("# who may do what\n"
                                         "\n"
                                         "   \t\n"
                                         "alice read " TOK_A "\n"
                                         "  # indented comment\n"
                                         "bob\tsubmit\t" TOK_B "\r\n"
                                         "root admin " TOK_C); /* no final newline */
        const char *name = NULL;
        enum api_role role = ROLE_NONE;

        assert_int_equal(auth_tokens_count(t), 3);
        assert_int_equal(auth_tokens_check(t, "Bearer " TOK_A, &name, &role), 0);
        assert_string_equal(name, "alice");
        assert_int_equal(role, ROLE_READ);
        assert_int_equal(auth_tokens_check(t, "Bearer " TOK_B, &name, &role), 0);
        assert_string_equal(name, "bob");
        assert_int_equal(role, ROLE_SUBMIT);
        assert_int_equal(auth_tokens_check(t, "Bearer " TOK_C, &name, &role), 0);
        assert_string_equal(name, "root");
        assert_int_equal(role, ROLE_ADMIN);
        auth_tokens_free(t);
}

static void test_parse_empty_file_has_no_tokens(void **state)
{
        struct auth_tokens *t = parse_ok("# nothing yet\n\n");

        assert_int_equal(auth_tokens_count(t), 0);
        auth_tokens_free(t);
}

static void test_parse_bad_lines_name_the_line(void **state)
{
        parse_bad("alice read\n", "tokens:1: ", "found 2 fields");
        parse_bad("# ok\nalice read " TOK_A " extra\n", "tokens:2: ", "found 4 fields");
        parse_bad("alice write " TOK_A "\n", "tokens:1: ", "role must be read, submit or admin");
        parse_bad("alice Read " TOK_A "\n", "tokens:1: ", "role must be");
        parse_bad("alice administrator " TOK_A "\n", "tokens:1: ", "role must be");
        parse_bad("\n\nalice read short\n", "tokens:3: ", "16 to 256 characters");
        parse_bad("al/ce read " TOK_A "\n", "tokens:1: ", "name may hold only");
        parse_bad("alice read aaaaaaaaaaaaaaaa\"aaaaa\n", "tokens:1: ", "token may hold only");
        parse_bad("alice read " TOK_A "\nbob submit " TOK_A "\n",
                  "tokens:2: ", "same token as 'alice'");
}

static void test_parse_never_quotes_the_token(void **state)
{
        static const char text[] = "alice read " TOK_A ",\n";
        struct auth_tokens *t = NULL;
        char err[256] = "";

        assert_int_equal(auth_tokens_parse(text, strlen(text), "f", &t, err, sizeof(err)), -EINVAL);
        assert_null(strstr(err, "aaaaaaaaaaaaaaaa"));
}

static void test_parse_rejects_nul_and_long_tokens(void **state)
{
        static const char nul[] = "alice read aaaaaaaaaaaaaaaa\0aaaa\n";
        char long_line[400];
        struct auth_tokens *t = NULL;
        char err[256] = "";

        assert_int_equal(auth_tokens_parse(nul, sizeof(nul) - 1, "f", &t, err, sizeof(err)),
                         -EINVAL);
        assert_non_null(strstr(err, "f:1: NUL"));

        snprintf(long_line, sizeof(long_line), "alice read %0300d\n", 7);
        parse_bad(long_line, "tokens:1: ", "it has 300");
}

static void test_check_header_forms(void **state)
{
        struct auth_tokens *t = parse_ok("alice submit " TOK_A "\n");
        const char *name = NULL;
        enum api_role role = ROLE_NONE;

        assert_int_equal(auth_tokens_check(t, NULL, &name, &role), -ENOKEY);
        assert_int_equal(auth_tokens_check(t, "Basic YWxpY2U6eA==", &name, &role), -ENOKEY);
        assert_int_equal(auth_tokens_check(t, "Bearer", &name, &role), -ENOKEY);
        assert_int_equal(auth_tokens_check(t, "BearerX " TOK_A, &name, &role), -ENOKEY);
        assert_int_equal(auth_tokens_check(t, "Bearer ", &name, &role), -EACCES);
        assert_null(name);
        assert_int_equal(auth_tokens_check(t, "Bearer " TOK_B, &name, &role), -EACCES);
        /* One character off at either end, a prefix, and the token with a tail. */
        assert_int_equal(
            auth_tokens_check(t, "Bearer baaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", &name, &role), -EACCES);
        assert_int_equal(
            auth_tokens_check(t, "Bearer aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", &name, &role), -EACCES);
        assert_int_equal(auth_tokens_check(t, "Bearer aaaaaaaaaaaaaaaa", &name, &role), -EACCES);
        assert_int_equal(auth_tokens_check(t, "Bearer " TOK_A "a", &name, &role), -EACCES);
        assert_null(name);
        assert_int_equal(role, ROLE_NONE);

        /* The scheme is case-insensitive; blanks around the token do not count. */
        assert_int_equal(auth_tokens_check(t, "bearer  " TOK_A " \t", &name, &role), 0);
        assert_string_equal(name, "alice");
        assert_int_equal(role, ROLE_SUBMIT);
        auth_tokens_free(t);
}

static void test_check_over_long_token(void **state)
{
        struct auth_tokens *t = parse_ok("alice admin " TOK_A "\n");
        char hdr[AUTH_TOKEN_MAX + 64];
        const char *name = NULL;
        enum api_role role = ROLE_NONE;

        /* Starts with the real token, goes past the longest a token may be. */
        memset(hdr, 'a', sizeof(hdr) - 1);
        hdr[sizeof(hdr) - 1] = '\0';
        memcpy(hdr, "Bearer ", 7);
        assert_int_equal(auth_tokens_check(t, hdr, &name, &role), -EACCES);
        auth_tokens_free(t);
}

static void test_equal_ct(void **state)
{
        char a[AUTH_TOKEN_MAX + 8], b[AUTH_TOKEN_MAX + 8];

        assert_true(auth_equal_ct("abc", 3, "abc", 3));
        assert_true(auth_equal_ct("", 0, "", 0));
        assert_false(auth_equal_ct("abc", 3, "abd", 3));
        assert_false(auth_equal_ct("abc", 3, "xbc", 3));
        assert_false(auth_equal_ct("abc", 3, "abcd", 4));
        assert_false(auth_equal_ct("abc", 3, "ab", 2));
        /* Zero padding must not make "ab" equal "ab\0". */
        assert_false(auth_equal_ct("ab\0", 3, "ab", 2));

        memset(a, 'x', sizeof(a));
        memset(b, 'x', sizeof(b));
        assert_true(auth_equal_ct(a, AUTH_TOKEN_MAX, b, AUTH_TOKEN_MAX));
        b[AUTH_TOKEN_MAX - 1] = 'y';
        assert_false(auth_equal_ct(a, AUTH_TOKEN_MAX, b, AUTH_TOKEN_MAX));
        /* Past the longest token nothing is equal, not even to itself. */
        assert_false(auth_equal_ct(a, sizeof(a), a, sizeof(a)));
}

static void test_check_finds_every_position(void **state)
{
        /* The match is picked without branching on it: the first, middle and last token must
         * each come back as themselves. */
        struct auth_tokens *t = parse_ok("one read " TOK_A "\n"
                                         "two submit " TOK_B "\n"
                                         "three admin " TOK_C "\n");
        const char *name = NULL;
        enum api_role role = ROLE_NONE;

        assert_int_equal(auth_tokens_check(t, "Bearer " TOK_C, &name, &role), 0);
        assert_string_equal(name, "three");
        assert_int_equal(auth_tokens_check(t, "Bearer " TOK_B, &name, &role), 0);
        assert_string_equal(name, "two");
        assert_int_equal(auth_tokens_check(t, "Bearer " TOK_A, &name, &role), 0);
        assert_string_equal(name, "one");
        auth_tokens_free(t);
}

static char *write_temp(const char *text, mode_t mode)
{
        char *path = strdup("/tmp/umd-test-tokens-XXXXXX");
        int fd;

        assert_non_null(path);
        fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        assert_int_equal(fchmod(fd, mode), 0);
        close(fd);
        return path;
}

static void remove_temp(char *path)
{
        unlink(path);
        free(path);
}

static void test_load_checks_mode(void **state)
{
        static const char text[] = "alice read " TOK_A "\n";
        static const mode_t bad[] = {0640, 0604, 0620, 0660, 0644};
        struct auth_tokens *t = NULL;
        char *path;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                path = write_temp(text, bad[i]);
                assert_int_equal(auth_tokens_load(path, &t), -EPERM);
                assert_null(t);
                remove_temp(path);
        }
        path = write_temp(text, 0600);
        assert_int_equal(auth_tokens_load(path, &t), 0);
        assert_int_equal(auth_tokens_count(t), 1);
        t = auth_tokens_free(t);
        remove_temp(path);

        path = write_temp(text, 0400);
        assert_int_equal(auth_tokens_load(path, &t), 0);
        t = auth_tokens_free(t);
        remove_temp(path);
}

static void test_load_refuses_bad_and_empty_files(void **state)
{
        struct auth_tokens *t = NULL;
        char *path = write_temp("# only a comment\n", 0600);

        assert_int_equal(auth_tokens_load(path, &t), -EINVAL);
        remove_temp(path);

        path = write_temp("alice reader " TOK_A "\n", 0600);
        assert_int_equal(auth_tokens_load(path, &t), -EINVAL);
        remove_temp(path);

        assert_int_equal(auth_tokens_load("/nonexistent/umd-tokens", &t), -ENOENT);
        assert_int_equal(auth_tokens_load("/tmp", &t), -EINVAL);
        assert_null(t);
}

/* Whoever owns the file can chmod it and make themselves admin: only root or umd's user. */
static void test_load_checks_owner(void **state)
{
        static const char text[] = "alice read " TOK_A "\n";
        struct auth_tokens *t = NULL;
        char *path = write_temp(text, 0600);

        if (geteuid() != 0) {
                remove_temp(path);
                skip(); /* only root can give a file away */
        }
        assert_int_equal(chown(path, 65534, 65534), 0);
        assert_int_equal(auth_tokens_load(path, &t), -EPERM);
        assert_null(t);
        assert_int_equal(chown(path, 0, 0), 0);
        assert_int_equal(auth_tokens_load(path, &t), 0);
        t = auth_tokens_free(t);
        remove_temp(path);
}

/* A FIFO must be refused at once, not block start-up until a writer comes. */
static void test_load_refuses_fifo_without_blocking(void **state)
{
        char dir[] = "/tmp/umd-test-tokens-fifo-XXXXXX", path[sizeof(dir) + 2];
        struct auth_tokens *t = NULL;

        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/f", dir);
        assert_int_equal(mkfifo(path, 0600), 0);
        alarm(5); /* before the fix this open blocked forever */
        assert_int_equal(auth_tokens_load(path, &t), -EINVAL);
        alarm(0);
        assert_null(t);
        unlink(path);
        rmdir(dir);
}

/* A header is its whole value: "Bearer TOKEN\0junk" is not TOKEN. */
static void test_check_n_counts_bytes_after_nul(void **state)
{
        static const char hdr[] = "Bearer " TOK_A "\0junk";
        struct auth_tokens *t = parse_ok("alice read " TOK_A "\n");
        const char *name = NULL;
        enum api_role role = ROLE_NONE;

        assert_int_equal(auth_tokens_check_n(t, hdr, sizeof(hdr) - 1, &name, &role), -EACCES);
        assert_int_equal(auth_tokens_check_n(t, hdr, strlen(hdr), &name, &role), 0);
        assert_string_equal(name, "alice");
        assert_int_equal(auth_tokens_check_n(t, "Bearer", 6, &name, &role), -ENOKEY);
        assert_int_equal(auth_tokens_check_n(t, NULL, 0, &name, &role), -ENOKEY);
        auth_tokens_free(t);
}

static void test_roles(void **state)
{
        assert_int_equal(auth_role_from_string("read"), ROLE_READ);
        assert_int_equal(auth_role_from_string("submit"), ROLE_SUBMIT);
        assert_int_equal(auth_role_from_string("admin"), ROLE_ADMIN);
        assert_int_equal(auth_role_from_string("root"), ROLE_NONE);
        assert_int_equal(auth_role_from_string(NULL), ROLE_NONE);
        /* Ordered: a higher role passes every check a lower one does. */
        assert_true(ROLE_READ < ROLE_SUBMIT && ROLE_SUBMIT < ROLE_ADMIN);
        assert_string_equal(auth_role_name(ROLE_SUBMIT), "submit");
        assert_null(auth_tokens_free(NULL));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_parse_lines_comments_and_blanks),
            cmocka_unit_test(test_parse_empty_file_has_no_tokens),
            cmocka_unit_test(test_parse_bad_lines_name_the_line),
            cmocka_unit_test(test_parse_never_quotes_the_token),
            cmocka_unit_test(test_parse_rejects_nul_and_long_tokens),
            cmocka_unit_test(test_check_header_forms),
            cmocka_unit_test(test_check_over_long_token),
            cmocka_unit_test(test_equal_ct),
            cmocka_unit_test(test_check_finds_every_position),
            cmocka_unit_test(test_load_checks_mode),
            cmocka_unit_test(test_load_refuses_bad_and_empty_files),
            cmocka_unit_test(test_load_checks_owner),
            cmocka_unit_test(test_load_refuses_fifo_without_blocking),
            cmocka_unit_test(test_check_n_counts_bytes_after_nul),
            cmocka_unit_test(test_roles),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
