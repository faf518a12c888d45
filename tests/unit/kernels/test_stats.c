/* Unit tests for sample statistics and the page orders of access=sequential|strided|random. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bench_access.h"
#include "stats.h"

static void test_stats_odd(void **state)
{
        const double s[] = {5, 1, 3};
        struct sample_stats st;
        assert_int_equal(stats_compute(s, 3, &st), 0);
        assert_float_equal(st.min, 1, 1e-12);
        assert_float_equal(st.max, 5, 1e-12);
        assert_float_equal(st.median, 3, 1e-12);
        assert_float_equal(st.mean, 3, 1e-12);
        assert_float_equal(st.stddev, 2, 1e-12); /* sample stddev: sqrt(8 / 2) */
        assert_float_equal(st.cv, 2.0 / 3.0, 1e-12);
        /* the caller's order is kept */
        assert_float_equal(s[0], 5, 0);
}

static void test_stats_even_and_single(void **state)
{
        const double s[] = {4, 1, 2, 3};
        struct sample_stats st;
        assert_int_equal(stats_compute(s, 4, &st), 0);
        assert_float_equal(st.median, 2.5, 1e-12);
        assert_int_equal(stats_compute(s, 1, &st), 0);
        assert_float_equal(st.median, 4, 0);
        assert_float_equal(st.stddev, 0, 0);
        assert_float_equal(st.cv, 0, 0);
}

static void test_stats_rejects(void **state)
{
        const double s[] = {1, NAN};
        struct sample_stats st = {.min = 42};
        assert_int_equal(stats_compute(s, 0, &st), -EINVAL);
        assert_int_equal(stats_compute(s, 2, &st), -EINVAL);
        assert_float_equal(st.min, 42, 0); /* untouched */
}

static void test_stats_json_and_gbps(void **state)
{
        struct sample_stats st = {1, 2, 3, 4, 5, 0.5};
        json_t *j = stats_to_json(&st);
        assert_float_equal(json_real_value(json_object_get(j, "median_ms")), 2, 0);
        assert_float_equal(json_real_value(json_object_get(j, "cv")), 0.5, 0);
        assert_int_equal(json_object_size(j), 6);
        json_decref(j);
        /* 1 GB in 20 ms is 50 GB/s, decimal */
        assert_float_equal(stats_gbps(1e9, 20), 50, 1e-9);
        assert_float_equal(stats_gbps(1e9, 0), 0, 0);
}

static void assert_permutation(const uint32_t *o, uint64_t n)
{
        uint8_t *seen = calloc(n, 1);
        assert_non_null(seen);
        for (uint64_t i = 0; i < n; i++) {
                assert_true(o[i] < n);
                assert_int_equal(seen[o[i]], 0);
                seen[o[i]] = 1;
        }
        free(seen);
}

static void test_access_sequential_and_strided(void **state)
{
        uint32_t o[10];
        assert_int_equal(bench_access_order(BENCH_ACCESS_SEQUENTIAL, 10, 0, 0, o), 0);
        for (uint32_t i = 0; i < 10; i++)
                assert_int_equal(o[i], i);
        /* 3 pages apart: 0 3 6 9 1 4 7 2 5 8 */
        assert_int_equal(bench_access_order(BENCH_ACCESS_STRIDED, 10, 3 * 4096, 0, o), 0);
        const uint32_t want[] = {0, 3, 6, 9, 1, 4, 7, 2, 5, 8};
        assert_memory_equal(o, want, sizeof(want));
        /* a stride under a page degrades to sequential, still a permutation */
        assert_int_equal(bench_access_order(BENCH_ACCESS_STRIDED, 10, 100, 0, o), 0);
        assert_int_equal(o[9], 9);
        /* a stride beyond the buffer visits every page anyway */
        assert_int_equal(bench_access_order(BENCH_ACCESS_STRIDED, 10, 1 << 30, 0, o), 0);
        assert_permutation(o, 10);
}

static void test_access_random_seeded(void **state)
{
        enum { N = 4096 };
        uint32_t *a = malloc(N * 4), *b = malloc(N * 4), *c = malloc(N * 4);
        assert_int_equal(bench_access_order(BENCH_ACCESS_RANDOM, N, 0, 7, a), 0);
        assert_int_equal(bench_access_order(BENCH_ACCESS_RANDOM, N, 0, 7, b), 0);
        assert_int_equal(bench_access_order(BENCH_ACCESS_RANDOM, N, 0, 8, c), 0);
        assert_permutation(a, N);
        assert_memory_equal(a, b, N * 4);
        assert_memory_not_equal(a, c, N * 4);
        size_t fixed = 0;
        for (uint32_t i = 0; i < N; i++)
                fixed += a[i] == i;
        assert_true(fixed < 20); /* a shuffle, not the identity (expected about 1) */
        free(a);
        free(b);
        free(c);
}

static void test_access_rejects(void **state)
{
        uint32_t o[1];
        assert_int_equal(bench_access_order(BENCH_ACCESS_RANDOM, 0, 0, 0, o), -EINVAL);
        assert_int_equal(bench_access_order((enum bench_access)9, 1, 0, 0, o), -EINVAL);
        assert_int_equal(bench_access_from_string("random"), BENCH_ACCESS_RANDOM);
        assert_int_equal(bench_access_from_string("zigzag"), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_stats_odd),
            cmocka_unit_test(test_stats_even_and_single),
            cmocka_unit_test(test_stats_rejects),
            cmocka_unit_test(test_stats_json_and_gbps),
            cmocka_unit_test(test_access_sequential_and_strided),
            cmocka_unit_test(test_access_random_seeded),
            cmocka_unit_test(test_access_rejects),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
