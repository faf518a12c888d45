/* parse_uint64, str_copy_cut, format_rfc3339_ms, streq_ptr, deadline_after_ms, DECIMAL_STR_MAX. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util.h"

static void test_parse_uint64_accepts_digits_in_range(void **state)
{
        uint64_t v = 0;

        assert_int_equal(parse_uint64("0", 0, 10, &v), 0);
        assert_int_equal(v, 0);
        assert_int_equal(parse_uint64("18446744073709551615", 0, UINT64_MAX, &v), 0);
        assert_int_equal(v, UINT64_MAX);
}

static void test_parse_uint64_rejects_sign_space_and_junk(void **state)
{
        static const char *const bad[] = {"", "-1", "+1", " 1", "1 ", "1x", "0x1", "1.0"};
        uint64_t v = 7;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(parse_uint64(bad[i], 0, UINT64_MAX, &v), -EINVAL);
        assert_int_equal(parse_uint64(NULL, 0, 1, &v), -EINVAL);
        assert_int_equal(v, 7);
}

static void test_parse_uint64_range_and_overflow(void **state)
{
        uint64_t v = 7;

        assert_int_equal(parse_uint64("11", 0, 10, &v), -ERANGE);
        assert_int_equal(parse_uint64("0", 1, 10, &v), -ERANGE);
        assert_int_equal(parse_uint64("18446744073709551616", 0, UINT64_MAX, &v), -ERANGE);
        assert_int_equal(v, 7);
}

/* str_copy_cut writes what snprintf(dst, size, "%s", src) writes, at every length around the
 * size, and "" for NULL. */
static void test_str_copy_cut_is_snprintf_of_percent_s(void **state)
{
        const char *src = "0123456789abcdef";

        for (size_t size = 1; size <= 20; size++)
                for (size_t len = 0; len <= 16; len++) {
                        char want[24], got[24], part[17];

                        memcpy(part, src, len);
                        part[len] = '\0';
                        memset(want, 'x', sizeof(want));
                        memset(got, 'x', sizeof(got));
                        snprintf(want, size, "%s", part);
                        str_copy_cut(got, size, part);
                        assert_memory_equal(got, want, sizeof(got)); /* nothing past the NUL */
                }
        char one[4] = "abc";
        str_copy_cut(one, sizeof(one), NULL);
        assert_string_equal(one, "");
}

static void test_rfc3339_ms(void **state)
{
        char buf[32];

        assert_string_equal(format_rfc3339_ms(0, buf, sizeof(buf)), "1970-01-01T00:00:00.000Z");
        assert_string_equal(format_rfc3339_ms(1796080791123ull, buf, sizeof(buf)),
                            "2026-11-30T23:19:51.123Z");
        assert_null(format_rfc3339_ms(0, buf, 10));
        assert_null(format_rfc3339_ms(0, buf, 24)); /* one short of the NUL */
        assert_string_equal(format_rfc3339_ms(0, buf, 25), "1970-01-01T00:00:00.000Z");
        /* Past 9999-12-31T23:59:59.999Z a year has five digits, which RFC 3339 has not. */
        assert_string_equal(format_rfc3339_ms(253402300799999ull, buf, sizeof(buf)),
                            "9999-12-31T23:59:59.999Z");
        assert_null(format_rfc3339_ms(253402300800000ull, buf, sizeof(buf)));
        assert_string_equal(buf, "");
}

/* The same text as gmtime_r and strftime give, over leap days, century years and every hour of
 * a spread of days from 1970 to 9999. */
static void test_rfc3339_ms_agrees_with_gmtime(void **state)
{
        char buf[32], want[64];

        for (uint64_t s = 0; s < 253402300800ull; s += 86400ull * 397 + 3607) {
                for (uint64_t at = s; at < s + 86400ull * 2; at += 3599) {
                        uint64_t ms = at * 1000 + at % 1000;
                        time_t t = (time_t)at;
                        struct tm tm;

                        assert_non_null(gmtime_r(&t, &tm));
                        size_t n = strftime(want, sizeof(want), "%Y-%m-%dT%H:%M:%S", &tm);
                        snprintf(want + n, sizeof(want) - n, ".%03uZ", (unsigned)(ms % 1000));
                        assert_string_equal(format_rfc3339_ms(ms, buf, sizeof(buf)), want);
                }
        }
        /* Leap days and the century rules by name. */
        assert_string_equal(format_rfc3339_ms(951782400000ull, buf, sizeof(buf)),
                            "2000-02-29T00:00:00.000Z");
        assert_string_equal(format_rfc3339_ms(4107542400000ull, buf, sizeof(buf)),
                            "2100-03-01T00:00:00.000Z");
}

static void test_clocks_move_forward(void **state)
{
        uint64_t a = now_monotonic_ms(), b = now_monotonic_ms();

        assert_true(b >= a);
        assert_true(now_realtime_ms() > 1700000000000ull);
}

static void test_streq_ptr(void **state)
{
        assert_true(streq_ptr(NULL, NULL));
        assert_false(streq_ptr("a", NULL));
        assert_false(streq_ptr(NULL, "a"));
        assert_true(streq_ptr("a", "a"));
        assert_false(streq_ptr("a", "b"));
}

static void test_deadline_after_ms_is_ahead_and_normalised(void **state)
{
        for (unsigned ms = 0; ms < 3000; ms += 333) {
                struct timespec before, at;

                clock_gettime(CLOCK_MONOTONIC, &before);
                deadline_after_ms(CLOCK_MONOTONIC, ms, &at);
                assert_true(at.tv_nsec >= 0 && at.tv_nsec < 1000000000L);
                int64_t d = (int64_t)(at.tv_sec - before.tv_sec) * 1000000000LL +
                            (at.tv_nsec - before.tv_nsec);
                assert_true(d >= (int64_t)ms * 1000000LL);
                assert_true(d < (int64_t)ms * 1000000LL + 1000000000LL);
        }
}

static void test_decimal_str_max_holds_the_extremes(void **state)
{
        char i[DECIMAL_STR_MAX(int)], ll[DECIMAL_STR_MAX(long long)];
        char u[DECIMAL_STR_MAX(uint64_t)];

        assert_int_equal(snprintf(i, sizeof(i), "%d", INT_MIN), (int)sizeof(i) - 1);
        assert_true(snprintf(ll, sizeof(ll), "%lld", LLONG_MIN) < (int)sizeof(ll));
        assert_true(snprintf(u, sizeof(u), "%llu", (unsigned long long)UINT64_MAX) <
                    (int)sizeof(u));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_parse_uint64_accepts_digits_in_range),
            cmocka_unit_test(test_parse_uint64_rejects_sign_space_and_junk),
            cmocka_unit_test(test_parse_uint64_range_and_overflow),
            cmocka_unit_test(test_str_copy_cut_is_snprintf_of_percent_s),
            cmocka_unit_test(test_rfc3339_ms),
            cmocka_unit_test(test_rfc3339_ms_agrees_with_gmtime),
            cmocka_unit_test(test_clocks_move_forward),
            cmocka_unit_test(test_streq_ptr),
            cmocka_unit_test(test_deadline_after_ms_is_ahead_and_normalised),
            cmocka_unit_test(test_decimal_str_max_holds_the_extremes),
        };

        return cmocka_run_group_tests_name("util", tests, NULL, NULL);
}
