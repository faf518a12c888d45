/* config.c: defaults, the INI file, flags and their precedence, and every kind of bad input. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

static char *write_tmp(const char *text)
{
        char *path = strdup("/tmp/umd-config-test-XXXXXX");
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
        return path;
}

static int parse(struct umd_config *c, int argc, const char **argv)
{
        config_init(c);
        return config_parse_args(c, argc, (char **)argv);
}

static void test_defaults_listen_on_loopback_only(void **state)
{
        struct umd_config c;
        const char *argv[] = {"umd"};
        assert_int_equal(parse(&c, 1, argv), 0);
        assert_int_equal(c.n_listen, 1);
        assert_string_equal(c.listen[0], "127.0.0.1:8470");
        assert_int_equal(c.max_body_bytes, 64 * 1024);
        assert_true(c.job_timeout_default_s <= c.job_timeout_max_s);
        config_free(&c);
}

static void test_flag_sets_key_with_dashes(void **state)
{
        struct umd_config c;
        const char *argv[] = {"umd", "--max-jobs", "7", "--max-body-bytes=1MiB", "--auth-reads"};
        assert_int_equal(parse(&c, 5, argv), 0);
        assert_int_equal(c.max_jobs, 7);
        assert_int_equal(c.max_body_bytes, 1024 * 1024);
        assert_true(c.auth_reads);
        config_free(&c);
}

static void test_repeated_listen_accumulates_and_accepts_ipv6(void **state)
{
        struct umd_config c;
        const char *argv[] = {"umd", "--listen", "127.0.0.1:1", "--listen", "[::1]:2"};
        assert_int_equal(parse(&c, 5, argv), 0);
        assert_int_equal(c.n_listen, 2);
        assert_string_equal(c.listen[1], "[::1]:2");
        config_free(&c);
}

static void test_flags_win_over_file(void **state)
{
        struct umd_config c;
        char *path = write_tmp("[umd]\nmax_jobs = 11\nqueue_capacity = 12\n");
        const char *argv[] = {"umd", "--config", path, "--max-jobs", "99"};
        assert_int_equal(parse(&c, 5, argv), 0);
        assert_int_equal(c.max_jobs, 99);
        assert_int_equal(c.queue_capacity, 12);
        config_free(&c);
        unlink(path);
        free(path);
}

static void test_worker_is_short_for_worker_path(void **state)
{
        struct umd_config c;
        const char *argv[] = {"umd", "--worker", "/opt/umd-worker"};
        assert_int_equal(parse(&c, 3, argv), 0);
        assert_string_equal(c.worker_path, "/opt/umd-worker");
        config_free(&c);
}

static void test_unknown_flag_is_rejected(void **state)
{
        struct umd_config c;
        const char *argv[] = {"umd", "--no-such-thing", "1"};
        assert_int_equal(parse(&c, 3, argv), -EINVAL);
        config_free(&c);
}

/* getopt_long would take these; umd never did, and says "unknown option" instead. */
static void test_abbreviations_operands_and_run_together_flags_are_rejected(void **state)
{
        const char *bad[][2] = {{"--max-job", "3"}, {"-hV", NULL},  {"-c/etc/umd.conf", NULL},
                                {"stray", NULL},    {"--", NULL},   {"--help=1", NULL},
                                {"-", NULL},        {"--wor", "/x"}};
        struct umd_config c;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                const char *argv[] = {"umd", bad[i][0], bad[i][1]};
                assert_int_equal(parse(&c, bad[i][1] ? 3 : 2, argv), -EINVAL);
                config_free(&c);
        }
}

/* The file's spelling works as a flag too; a bool takes no value, an inline one, or a literal
 * true/false as the next argument (anything else there is not its value). */
static void test_underscores_and_bool_forms(void **state)
{
        struct umd_config c;
        const char *argv[] = {"umd",   "--max_jobs=5", "--auth-reads",
                              "false", "--placement",  "--require-auth-off-loopback=true"};

        assert_int_equal(parse(&c, 6, argv), 0);
        assert_int_equal(c.max_jobs, 5);
        assert_false(c.auth_reads);
        assert_true(c.placement);
        assert_true(c.require_auth_off_loopback);
        config_free(&c);

        const char *operand[] = {"umd", "--auth-reads", "yes"};
        assert_int_equal(parse(&c, 3, operand), -EINVAL);
        config_free(&c);
}

static void test_out_of_range_number_is_rejected(void **state)
{
        struct umd_config c;
        const char *argv[] = {"umd", "--max-connections", "0"};
        assert_int_equal(parse(&c, 3, argv), -EINVAL);
        config_free(&c);
}

/* The store's and the queues' newer limits are bounded like the others. */
static void test_commit_gather_and_queue_trees_are_bounded(void **state)
{
        struct umd_config c;
        const char *bad[][2] = {{"--commit-gather-us", "100001"},
                                {"--commit-gather-us", "-1"},
                                {"--queue-trees-per-device", "1000001"},
                                {"--queue-trees-per-device", "many"}};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                const char *argv[] = {"umd", bad[i][0], bad[i][1]};
                assert_int_equal(parse(&c, 3, argv), -EINVAL);
                config_free(&c);
        }
        const char *ok[] = {"umd", "--commit-gather-us", "1500", "--queue-trees-per-device", "0"};
        assert_int_equal(parse(&c, 5, ok), 0);
        assert_int_equal(c.commit_gather_us, 1500);
        assert_int_equal(c.queue_trees_per_device, 0);
        config_free(&c);
        config_init(&c);
        assert_int_equal(c.commit_gather_us, 0);
        assert_int_equal(c.queue_trees_per_device, 32);
        config_free(&c);
}

static void test_bad_listen_address_is_rejected(void **state)
{
        struct umd_config c;
        const char *bad[] = {"localhost:80", "127.0.0.1", "127.0.0.1:99999", "[::1:80", "::1:80"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                const char *argv[] = {"umd", "--listen", bad[i]};
                assert_int_equal(parse(&c, 3, argv), -EINVAL);
                config_free(&c);
        }
}

static void test_missing_value_is_rejected(void **state)
{
        struct umd_config c;
        const char *argv[] = {"umd", "--state-dir"};
        assert_int_equal(parse(&c, 2, argv), -EINVAL);
        config_free(&c);
}

static void test_unreadable_config_file_is_rejected(void **state)
{
        struct umd_config c;
        const char *argv[] = {"umd", "--config", "/nonexistent/umd.conf"};
        assert_int_equal(parse(&c, 3, argv), -EINVAL);
        config_free(&c);
}

static void test_unknown_key_in_file_is_rejected(void **state)
{
        struct umd_config c;
        char *path = write_tmp("[umd]\nmax_jobs = 3\nbogus = 1\n");
        const char *argv[] = {"umd", "--config", path};
        assert_int_equal(parse(&c, 3, argv), -EINVAL);
        config_free(&c);
        unlink(path);
        free(path);
}

static void test_wrong_section_is_rejected(void **state)
{
        struct umd_config c;
        char *path = write_tmp("[other]\nmax_jobs = 3\n");
        const char *argv[] = {"umd", "--config", path};
        assert_int_equal(parse(&c, 3, argv), -EINVAL);
        config_free(&c);
        unlink(path);
        free(path);
}

static void test_inconsistent_timeouts_are_rejected(void **state)
{
        struct umd_config c;
        const char *argv[] = {"umd", "--job-timeout-default-s", "100", "--job-timeout-max-s", "10"};
        assert_int_equal(parse(&c, 5, argv), -EINVAL);
        config_free(&c);
}

static void test_memory_fail_fraction_above_warn_is_rejected(void **state)
{
        struct umd_config c;
        const char *bad[] = {"umd", "--health-memory-warn-fraction", "0.5",
                             "--health-memory-fail-fraction", "0.6"};
        const char *good[] = {"umd", "--health-memory-warn-fraction",
                              "0.6", "--health-memory-fail-fraction",
                              "0.5", "--health-d2d-size",
                              "1GiB"};
        assert_int_equal(parse(&c, 5, bad), -EINVAL);
        config_free(&c);
        assert_int_equal(parse(&c, 7, good), 0);
        assert_true(c.health_memory_fail_fraction == 0.5);
        assert_int_equal(c.health_d2d_size, 1ull << 30);
        config_free(&c);
}

/* Runs argv through config_parse_args with stderr captured; the message, or "" on success. */
static int parse_capturing(const char **argv, int argc, char *msg, size_t len)
{
        struct umd_config c;
        FILE *tmp = tmpfile();
        int saved = dup(STDERR_FILENO), r;
        size_t n;

        assert_non_null(tmp);
        fflush(stderr);
        dup2(fileno(tmp), STDERR_FILENO);
        r = parse(&c, argc, argv);
        fflush(stderr);
        dup2(saved, STDERR_FILENO);
        close(saved);
        rewind(tmp);
        n = fread(msg, 1, len - 1, tmp);
        msg[n] = '\0';
        fclose(tmp);
        config_free(&c);
        return r;
}

static void test_health_size_above_max_buffer_bytes_is_rejected_naming_both(void **state)
{
        const char *bad[] = {"umd", "--health-size", "512MiB", "--max-buffer-bytes", "256MiB"};
        const char *good[] = {"umd",    "--health-size",     "256MiB", "--max-buffer-bytes",
                              "256MiB", "--health-d2d-size", "256MiB"};
        char msg[512];

        assert_int_equal(parse_capturing(bad, 5, msg, sizeof(msg)), -EINVAL);
        assert_non_null(strstr(msg, "health_size"));
        assert_non_null(strstr(msg, "max_buffer_bytes"));
        assert_int_equal(parse_capturing(good, 7, msg, sizeof(msg)), 0);
}

/* The default health_d2d_size (256 MiB) over a lowered max_buffer_bytes counts too. */
static void test_health_d2d_size_above_max_buffer_bytes_is_rejected_naming_both(void **state)
{
        const char *bad[] = {"umd", "--health-size", "1MiB", "--max-buffer-bytes", "128MiB"};
        char msg[512];

        assert_int_equal(parse_capturing(bad, 5, msg, sizeof(msg)), -EINVAL);
        assert_non_null(strstr(msg, "health_d2d_size"));
        assert_non_null(strstr(msg, "max_buffer_bytes"));
}

static void test_extended_budget_not_below_job_timeout_is_rejected_naming_both(void **state)
{
        const char *bad[] = {"umd", "--health-extended-budget-s", "60", "--job-timeout-default-s",
                             "60"};
        const char *good[] = {"umd", "--health-extended-budget-s", "59", "--job-timeout-default-s",
                              "60"};
        char msg[512];

        assert_int_equal(parse_capturing(bad, 5, msg, sizeof(msg)), -EINVAL);
        assert_non_null(strstr(msg, "health_extended_budget_s"));
        assert_non_null(strstr(msg, "job_timeout_default_s"));
        assert_int_equal(parse_capturing(good, 5, msg, sizeof(msg)), 0);
}

/* --check-config answers as start-up does: the same checks, exit status 2 from main. */
static void test_check_config_rejects_a_canonical_check_that_cannot_run(void **state)
{
        const char *bad[] = {"umd", "--check-config", "--health-size", "8GiB"};
        char msg[512];

        assert_int_equal(parse_capturing(bad, 4, msg, sizeof(msg)), -EINVAL);
        assert_non_null(strstr(msg, "health_size"));
}

/* 0 (the default) follows the machine up to four threads; a number set is taken as it is. */
static void test_http_threads_default_is_one_per_cpu_up_to_four(void **state)
{
        struct umd_config c;

        (void)state;
        config_init(&c);
        assert_int_equal(config_http_threads(&c, 1), 1);
        assert_int_equal(config_http_threads(&c, 2), 2);
        assert_int_equal(config_http_threads(&c, 4), 4);
        assert_int_equal(config_http_threads(&c, 16), 4);
        assert_int_equal(config_http_threads(&c, 0), 1);  /* unknown */
        assert_int_equal(config_http_threads(&c, -1), 1); /* sysconf failed */
        c.http_threads = 16;
        assert_int_equal(config_http_threads(&c, 2), 16);
        config_free(&c);
}

static void test_sample_config_parses_back(void **state)
{
        struct umd_config c;
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        config_print_sample(f);
        fclose(f);
        char *path = write_tmp(buf);
        const char *argv[] = {"umd", "--config", path};
        assert_int_equal(parse(&c, 3, argv), 0);
        config_free(&c);
        unlink(path);
        free(path);
        free(buf);
}

static char *effective(const struct umd_config *c)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        config_print_effective(f, c);
        fclose(f);
        return buf;
}

static void test_effective_config_of_defaults_is_the_sample(void **state)
{
        struct umd_config c;
        char *sample = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&sample, &len);
        config_print_sample(f);
        fclose(f);
        config_init(&c);
        char *eff = effective(&c);
        assert_string_equal(eff, sample);
        config_free(&c);
        free(eff);
        free(sample);
}

static void test_effective_config_shows_file_and_flags(void **state)
{
        struct umd_config c;
        char *path = write_tmp("[umd]\nmax_jobs = 7\nlog_level = debug\n");
        const char *argv[] = {"umd",
                              "--config",
                              path,
                              "--listen",
                              "127.0.0.1:9001",
                              "--max-jobs",
                              "9",
                              "--health-warn-fraction",
                              "0.5"};
        assert_int_equal(parse(&c, 9, argv), 0);
        char *eff = effective(&c);
        assert_non_null(strstr(eff, "\nlisten = 127.0.0.1:9001\n"));
        assert_non_null(strstr(eff, "\nmax_jobs = 9\n"));
        assert_non_null(strstr(eff, "\nlog_level = debug\n"));
        assert_non_null(strstr(eff, "\nhealth_warn_fraction = 0.5\n"));
        assert_non_null(strstr(eff, "\n#max_body_bytes = 64KiB\n"));
        /* and it parses back to the same configuration */
        char *again = write_tmp(eff);
        struct umd_config d;
        const char *argv2[] = {"umd", "--config", again};
        assert_int_equal(parse(&d, 3, argv2), 0);
        assert_int_equal(d.max_jobs, 9);
        assert_string_equal(d.listen[0], "127.0.0.1:9001");
        config_free(&d);
        config_free(&c);
        unlink(path);
        unlink(again);
        free(path);
        free(again);
        free(eff);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_defaults_listen_on_loopback_only),
            cmocka_unit_test(test_flag_sets_key_with_dashes),
            cmocka_unit_test(test_repeated_listen_accumulates_and_accepts_ipv6),
            cmocka_unit_test(test_flags_win_over_file),
            cmocka_unit_test(test_worker_is_short_for_worker_path),
            cmocka_unit_test(test_unknown_flag_is_rejected),
            cmocka_unit_test(test_abbreviations_operands_and_run_together_flags_are_rejected),
            cmocka_unit_test(test_underscores_and_bool_forms),
            cmocka_unit_test(test_out_of_range_number_is_rejected),
            cmocka_unit_test(test_commit_gather_and_queue_trees_are_bounded),
            cmocka_unit_test(test_bad_listen_address_is_rejected),
            cmocka_unit_test(test_missing_value_is_rejected),
            cmocka_unit_test(test_unreadable_config_file_is_rejected),
            cmocka_unit_test(test_unknown_key_in_file_is_rejected),
            cmocka_unit_test(test_wrong_section_is_rejected),
            cmocka_unit_test(test_inconsistent_timeouts_are_rejected),
            cmocka_unit_test(test_memory_fail_fraction_above_warn_is_rejected),
            cmocka_unit_test(test_health_size_above_max_buffer_bytes_is_rejected_naming_both),
            cmocka_unit_test(test_health_d2d_size_above_max_buffer_bytes_is_rejected_naming_both),
            cmocka_unit_test(test_extended_budget_not_below_job_timeout_is_rejected_naming_both),
            cmocka_unit_test(test_check_config_rejects_a_canonical_check_that_cannot_run),
            cmocka_unit_test(test_http_threads_default_is_one_per_cpu_up_to_four),
            cmocka_unit_test(test_sample_config_parses_back),
            cmocka_unit_test(test_effective_config_of_defaults_is_the_sample),
            cmocka_unit_test(test_effective_config_shows_file_and_flags),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
