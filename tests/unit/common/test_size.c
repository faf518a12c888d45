/* size_parse / size_format: what people may write as a size, and what they may not. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "size.h"

static uint64_t parse_ok(const char *s)
{
        uint64_t v = 0;

        assert_int_equal(size_parse(s, &v), 0);
        return v;
}

static void assert_parse_fails(const char *s, int err)
{
        uint64_t v = 12345;

        assert_int_equal(size_parse(s, &v), err);
        assert_int_equal(v, 12345); /* untouched on failure */
}

static void test_plain_bytes(void **state)
{
        assert_int_equal(parse_ok("0"), 0);
        assert_int_equal(parse_ok("4096"), 4096);
        assert_int_equal(parse_ok("4096B"), 4096);
        assert_int_equal(parse_ok("4096 B"), 4096);
}

static void test_binary_suffixes(void **state)
{
        assert_int_equal(parse_ok("4KiB"), 4096);
        assert_int_equal(parse_ok("64MiB"), 64ull << 20);
        assert_int_equal(parse_ok("1GiB"), 1ull << 30);
        assert_int_equal(parse_ok("2TiB"), 2ull << 40);
        assert_int_equal(parse_ok("64 MiB"), 64ull << 20);
}

static void test_decimal_suffixes(void **state)
{
        assert_int_equal(parse_ok("1kB"), 1000);
        assert_int_equal(parse_ok("1KB"), 1000);
        assert_int_equal(parse_ok("64MB"), 64000000ull);
        assert_int_equal(parse_ok("3GB"), 3000000000ull);
        assert_int_equal(parse_ok("1TB"), 1000000000000ull);
}

static void test_fraction_with_unit(void **state)
{
        assert_int_equal(parse_ok("1.5GiB"), 1610612736ull);
        assert_int_equal(parse_ok("0.5KiB"), 512);
        assert_int_equal(parse_ok("1.25kB"), 1250);
        assert_int_equal(parse_ok("2.000MiB"), 2ull << 20);
}

static void test_fraction_rejected_when_not_whole_bytes(void **state)
{
        assert_parse_fails("1.5", -EINVAL);
        assert_parse_fails("1.5B", -EINVAL);
        assert_parse_fails("0.1KiB", -EINVAL);
        assert_parse_fails("1.0001kB", -EINVAL);
}

static void test_garbage_rejected(void **state)
{
        static const char *const bad[] = {
            "",     "abc", "12abc", "MiB",    " 12", "12 ", "12  MiB", "1..5MiB", "1.MiB",  ".5MiB",
            "0x10", "1e3", "12mib", "12 kib", "12K", "12M", "12iB",    "64MiBs",  "1,5MiB",
        };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_parse_fails(bad[i], -EINVAL);
        assert_int_equal(size_parse(NULL, NULL), -EINVAL);
}

static void test_negative_rejected(void **state)
{
        assert_parse_fails("-1", -EINVAL);
        assert_parse_fails("-1MiB", -EINVAL);
        assert_parse_fails("+1", -EINVAL);
}

static void test_overflow_is_erange(void **state)
{
        assert_int_equal(parse_ok("9223372036854775807"), (uint64_t)INT64_MAX);
        assert_parse_fails("9223372036854775808", -ERANGE);
        assert_parse_fails("18446744073709551616", -ERANGE);
        assert_parse_fails("99999999999999999999999999999999", -ERANGE);
        assert_int_equal(parse_ok("8388607TiB"), 8388607ull << 40);
        assert_parse_fails("8388608TiB", -ERANGE);
        assert_int_equal(parse_ok("9223372036854775.8kB"), 9223372036854775800ull);
        assert_parse_fails("9223372036854775.9kB", -ERANGE);
}

static void test_format_exact_units(void **state)
{
        char buf[32];

        assert_string_equal(size_format(64ull << 20, buf, sizeof(buf)), "64 MiB");
        assert_string_equal(size_format(4096, buf, sizeof(buf)), "4 KiB");
        assert_string_equal(size_format(3ull << 40, buf, sizeof(buf)), "3 TiB");
        assert_string_equal(size_format(1536, buf, sizeof(buf)), "1536 B");
        assert_string_equal(size_format(1000, buf, sizeof(buf)), "1000 B");
        assert_string_equal(size_format(0, buf, sizeof(buf)), "0 B");
}

static void test_format_reads_back(void **state)
{
        static const uint64_t v[] = {0, 1, 1000, 4096, 1536, 64ull << 20, 5ull << 40};
        char buf[32];

        for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
                assert_int_equal(parse_ok(size_format(v[i], buf, sizeof(buf))), v[i]);
}

static void test_format_buffer_too_small(void **state)
{
        char buf[4];

        assert_null(size_format(64ull << 20, buf, sizeof(buf)));
}

static void test_format_approx_for_reading(void **state)
{
        char buf[32];

        assert_string_equal(size_format_approx(100, buf, sizeof(buf)), "100 B");
        assert_string_equal(size_format_approx(64ull << 20, buf, sizeof(buf)), "64 MiB");
        assert_string_equal(size_format_approx(3ull << 29, buf, sizeof(buf)), "1.5 GiB");
        assert_string_equal(size_format_approx(1ull << 50, buf, sizeof(buf)), "1024 TiB");
        assert_null(size_format_approx(64ull << 20, buf, 4));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_plain_bytes),
            cmocka_unit_test(test_binary_suffixes),
            cmocka_unit_test(test_decimal_suffixes),
            cmocka_unit_test(test_fraction_with_unit),
            cmocka_unit_test(test_fraction_rejected_when_not_whole_bytes),
            cmocka_unit_test(test_garbage_rejected),
            cmocka_unit_test(test_negative_rejected),
            cmocka_unit_test(test_overflow_is_erange),
            cmocka_unit_test(test_format_exact_units),
            cmocka_unit_test(test_format_reads_back),
            cmocka_unit_test(test_format_buffer_too_small),
            cmocka_unit_test(test_format_approx_for_reading),
        };

        return cmocka_run_group_tests_name("size", tests, NULL, NULL);
}
