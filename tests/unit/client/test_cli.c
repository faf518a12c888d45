/* client/cli.c: umdctl's durations, key=value pairs, device lists and command lines, good and
 * bad. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static uint64_t dur(const char *s)
{
        uint64_t ms = 12345;
        assert_int_equal(parse_duration_ms(s, &ms), 0);
        return ms;
}

static void test_durations_take_units_and_plain_seconds(void **state)
{
        assert_int_equal(dur("30s"), 30000);
        assert_int_equal(dur("30"), 30000);
        assert_int_equal(dur("500ms"), 500);
        assert_int_equal(dur("5m"), 300000);
        assert_int_equal(dur("1h30m"), 5400000);
        assert_int_equal(dur("2d"), 2 * 86400000ull);
        assert_int_equal(dur("1.5s"), 1500);
}

static void test_bad_durations_are_rejected_and_leave_the_output(void **state)
{
        const char *bad[] = {"", "s", "-1s", "10x", "1h30", "ms", "5 m", "1e400s"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                uint64_t ms = 7;
                assert_int_equal(parse_duration_ms(bad[i], &ms), -EINVAL);
                assert_int_equal(ms, 7);
        }
        uint64_t ms = 7;
        assert_int_equal(parse_duration_ms(NULL, &ms), -EINVAL);
}

static void test_params_are_typed_labels_are_strings(void **state)
{
        json_t *o = json_object();
        assert_int_equal(parse_kv_into(o, "size=1GiB", true), 0);
        assert_int_equal(parse_kv_into(o, "iterations=20", true), 0);
        assert_int_equal(parse_kv_into(o, "fraction=0.5", true), 0);
        assert_int_equal(parse_kv_into(o, "explain=true", true), 0);
        assert_int_equal(parse_kv_into(o, "note=a=b", true), 0);
        assert_string_equal(json_string_value(json_object_get(o, "size")), "1GiB");
        assert_int_equal(json_integer_value(json_object_get(o, "iterations")), 20);
        assert_true(json_is_real(json_object_get(o, "fraction")));
        assert_true(json_is_true(json_object_get(o, "explain")));
        assert_string_equal(json_string_value(json_object_get(o, "note")), "a=b");
        assert_int_equal(parse_kv_into(o, "n=7", false), 0);
        assert_string_equal(json_string_value(json_object_get(o, "n")), "7");
        assert_int_equal(parse_kv_into(o, "novalue", true), -EINVAL);
        assert_int_equal(parse_kv_into(o, "=x", true), -EINVAL);
        json_decref(o);
}

static void test_devices_one_several_or_all(void **state)
{
        json_t *d = NULL;
        assert_int_equal(parse_devices("1", false, &d), 0);
        assert_int_equal(json_integer_value(d), 1);
        json_decref(d);
        assert_int_equal(parse_devices("GPU-abc", false, &d), 0);
        assert_string_equal(json_string_value(d), "GPU-abc");
        json_decref(d);
        assert_int_equal(parse_devices("0,GPU-abc,3", true, &d), 0);
        assert_int_equal(json_array_size(d), 3);
        assert_int_equal(json_integer_value(json_array_get(d, 2)), 3);
        json_decref(d);
        assert_int_equal(parse_devices("all", true, &d), 0);
        assert_string_equal(json_string_value(d), "all");
        json_decref(d);
        assert_int_equal(parse_devices("all", false, &d), -EINVAL);
        assert_int_equal(parse_devices("0,,1", true, &d), -EINVAL);
        assert_int_equal(parse_devices("12x", false, &d), -EINVAL);
}

static int parse(struct umdctl_args *a, const char **argv, int argc)
{
        memset(a, 0, sizeof(*a));
        return umdctl_parse_args(a, argc, (char **)argv, NULL, NULL);
}

#define PARSE(a, ...)                                                                              \
        ({                                                                                         \
                const char *argv_[] = {"umdctl", __VA_ARGS__};                                     \
                parse(a, argv_, (int)(sizeof(argv_) / sizeof(argv_[0])));                          \
        })

static void test_submit_with_options_anywhere(void **state)
{
        struct umdctl_args a;
        assert_int_equal(PARSE(&a, "--url", "http://h:1", "submit", "copy", "--param", "size=1GiB",
                               "--devices=0,1", "--wait", "--timeout", "2m", "--label", "who=me"),
                         0);
        assert_int_equal(a.command, CMD_SUBMIT);
        assert_string_equal(a.target, "copy");
        assert_string_equal(a.url, "http://h:1");
        assert_true(a.wait && a.devices_plural);
        assert_int_equal(a.timeout_ms, 120000);
        assert_string_equal(json_string_value(json_object_get(a.params, "size")), "1GiB");
        assert_string_equal(json_string_value(json_object_get(a.labels, "who")), "me");
        umdctl_args_free(&a);
}

static void test_url_and_token_from_environment_unless_given(void **state)
{
        struct umdctl_args a;
        const char *argv[] = {"umdctl", "devices"};
        memset(&a, 0, sizeof(a));
        assert_int_equal(umdctl_parse_args(&a, 2, (char **)argv, "http://env:2", "/tok"), 0);
        assert_string_equal(a.url, "http://env:2");
        assert_string_equal(a.token_file, "/tok");
        umdctl_args_free(&a);
        assert_int_equal(PARSE(&a, "devices"), 0);
        assert_string_equal(a.url, "http://127.0.0.1:8470");
        assert_null(a.token_file);
        umdctl_args_free(&a);
}

static void test_health_cached_with_max_age(void **state)
{
        struct umdctl_args a;
        assert_int_equal(PARSE(&a, "health", "--cached", "--max-age", "10m"), 0);
        assert_true(a.cached);
        assert_int_equal(a.max_age_ms, 600000);
        umdctl_args_free(&a);
        assert_int_equal(PARSE(&a, "health", "--max-age", "10m"), -EINVAL);
        umdctl_args_free(&a);
}

static void test_usage_errors(void **state)
{
        struct umdctl_args a;
        assert_int_equal(PARSE(&a, "frobnicate"), -EINVAL);
        umdctl_args_free(&a);
        assert_int_equal(PARSE(&a, "--url", "x"), -EINVAL); /* no command */
        umdctl_args_free(&a);
        assert_int_equal(PARSE(&a, "submit"), -EINVAL); /* no benchmark */
        umdctl_args_free(&a);
        assert_int_equal(PARSE(&a, "show", "a", "b"), -EINVAL);
        umdctl_args_free(&a);
        assert_int_equal(PARSE(&a, "devices", "--wait"), -EINVAL); /* not devices' option */
        umdctl_args_free(&a);
        assert_int_equal(PARSE(&a, "submit", "copy", "--timeout", "5s"), -EINVAL); /* no --wait */
        umdctl_args_free(&a);
        assert_int_equal(PARSE(&a, "submit", "copy", "--param", "x"), -EINVAL);
        umdctl_args_free(&a);
        assert_int_equal(PARSE(&a, "ls", "--limit", "0"), -EINVAL);
        umdctl_args_free(&a);
        assert_int_equal(PARSE(&a, "pause"), -EINVAL);
        umdctl_args_free(&a);
        assert_int_equal(PARSE(&a, "submit", "copy", "--device"), -EINVAL);
        umdctl_args_free(&a);
}

/* getopt_long reads the line now; what it would guess at (abbreviations, a value given to a
 * flag, run-together short options) is refused as before, and one dash is an operand. */
static void test_getopt_guesses_are_refused(void **state)
{
        struct umdctl_args a;
        assert_int_equal(PARSE(&a, "ls", "--lim", "3"), -EINVAL); /* abbreviation */
        umdctl_args_free(&a);
        assert_int_equal(PARSE(&a, "ls", "--json=1"), -EINVAL); /* takes no value */
        umdctl_args_free(&a);
        assert_int_equal(PARSE(&a, "ls", "--help=1"), -EINVAL);
        umdctl_args_free(&a);
        assert_int_equal(PARSE(&a, "-hV"), -EINVAL); /* an unknown command, not help */
        umdctl_args_free(&a);
        assert_int_equal(PARSE(&a, "ls", "--"), 0);
        umdctl_args_free(&a);
        assert_int_equal(PARSE(&a, "--", "ls"), -EINVAL); /* the command comes before -- */
        umdctl_args_free(&a);
        assert_int_equal(PARSE(&a, "show", "-x"), 0);
        assert_string_equal(a.target, "-x");
        umdctl_args_free(&a);
        assert_int_equal(PARSE(&a, "show", "--", "--wait"), 0);
        assert_string_equal(a.target, "--wait");
        assert_false(a.wait);
        umdctl_args_free(&a);
        assert_int_equal(PARSE(&a, "--url", "--help", "ls"), 0); /* a value, whatever it says */
        assert_string_equal(a.url, "--help");
        umdctl_args_free(&a);
}

static void test_ls_filters(void **state)
{
        struct umdctl_args a;
        assert_int_equal(PARSE(&a, "ls", "--status", "failed", "--device", "GPU-x", "--label",
                               "k=v", "--since", "1h", "--limit", "5", "--cursor", "c"),
                         0);
        assert_string_equal(a.status, "failed");
        assert_string_equal(a.device, "GPU-x");
        assert_string_equal(a.label, "k=v");
        assert_string_equal(a.since, "1h");
        assert_int_equal(a.limit, 5);
        assert_string_equal(a.cursor, "c");
        umdctl_args_free(&a);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_durations_take_units_and_plain_seconds),
            cmocka_unit_test(test_getopt_guesses_are_refused),
            cmocka_unit_test(test_bad_durations_are_rejected_and_leave_the_output),
            cmocka_unit_test(test_params_are_typed_labels_are_strings),
            cmocka_unit_test(test_devices_one_several_or_all),
            cmocka_unit_test(test_submit_with_options_anywhere),
            cmocka_unit_test(test_url_and_token_from_environment_unless_given),
            cmocka_unit_test(test_health_cached_with_max_age),
            cmocka_unit_test(test_usage_errors),
            cmocka_unit_test(test_ls_filters),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
