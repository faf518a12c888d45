/* Fake devices: identity, result shape (bench.h) for every catalog benchmark, the bandwidth
 * model and its scaling, limits, cancel, and determinism. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "catalog.h"
#include "fake.h"

#define GiB (1024ull * 1024 * 1024)
#define MiB (1024ull * 1024)

static uint64_t now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Normalized params, as umd would send them, with overrides from `extra` (may be NULL). */
static json_t *params_for(const char *benchmark, json_t *extra)
{
        struct catalog_limits lim = {.max_buffer_bytes = 4 * GiB};
        struct catalog_error err;
        json_t *out = NULL;
        const struct bench_def *b = catalog_find(benchmark);

        assert_non_null(b);
        assert_int_equal(catalog_validate(b, extra, &lim, true, &out, &err), 0);
        json_decref(extra);
        return out;
}

static json_t *run_ok(const char *benchmark, json_t *params)
{
        json_t *dev = fake_device_info(0), *res = NULL;
        char *error = NULL;
        int r;

        r = fake_run(dev, benchmark, params, NULL, &res, &error);
        if (r < 0)
                fail_msg("%s: %d %s", benchmark, r, error ? error : "");
        assert_null(error);
        json_decref(dev);
        json_decref(params);
        return res;
}

static void test_device_identity(void **state)
{
        json_t *d = fake_device_info(12), *list = fake_list_devices(3);
        static const char *const bools[] = {
            "concurrentManagedAccess",
            "pageableMemoryAccess",
            "pageableMemoryAccessUsesHostPageTables",
            "canMapHostMemory",
            "hostNativeAtomicSupported",
            "directManagedMemAccessFromHost",
            "fake",
        };

        assert_string_equal(json_string_value(json_object_get(d, "uuid")),
                            "GPU-fa4e0000-0000-4000-8000-00000000000c");
        assert_int_equal(json_integer_value(json_object_get(d, "index")), 12);
        assert_string_equal(json_string_value(json_object_get(d, "compute_capability")), "9.0");
        for (size_t i = 0; i < sizeof(bools) / sizeof(bools[0]); i++)
                assert_true(json_is_boolean(json_object_get(d, bools[i])));
        assert_true(json_is_true(json_object_get(d, "fake")));
        assert_true(json_is_true(json_object_get(d, "concurrentManagedAccess")));
        assert_true(json_is_false(json_object_get(d, "pageableMemoryAccess")));
        assert_int_equal(json_integer_value(json_object_get(json_object_get(d, "pcie"), "max_gen")),
                         5);
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(d, "pcie"), "current_width")), 16);
        assert_true(json_integer_value(json_object_get(d, "memory_free_bytes")) <
                    json_integer_value(json_object_get(d, "memory_total_bytes")));

        assert_int_equal(json_array_size(list), 3);
        assert_string_equal(json_string_value(json_object_get(json_array_get(list, 2), "uuid")),
                            "GPU-fa4e0000-0000-4000-8000-000000000002");
        json_decref(d);
        json_decref(list);
}

static void check_measurement(const json_t *m, int64_t iterations)
{
        static const char *const stat_keys[] = {"min_ms", "median_ms", "mean_ms",
                                                "max_ms", "stddev_ms", "cv"};
        const char *counted = json_string_value(json_object_get(m, "bytes_counted"));
        json_t *stats = json_object_get(m, "stats");
        json_t *samples = json_object_get(m, "samples_ms");
        double min, med, max;

        assert_true(json_is_string(json_object_get(m, "name")));
        assert_true(json_integer_value(json_object_get(m, "bytes")) > 0);
        assert_non_null(counted);
        assert_true(strcmp(counted, "one direction") == 0 ||
                    strcmp(counted, "both directions") == 0 || strcmp(counted, "read+write") == 0 ||
                    strcmp(counted, "one word touched per page") == 0 ||
                    strcmp(counted, "placed bytes") == 0);
        assert_true(json_is_array(samples));
        assert_int_equal(json_array_size(samples), iterations);
        for (size_t i = 0; i < sizeof(stat_keys) / sizeof(stat_keys[0]); i++)
                assert_true(json_is_number(json_object_get(stats, stat_keys[i])));
        min = json_number_value(json_object_get(stats, "min_ms"));
        med = json_number_value(json_object_get(stats, "median_ms"));
        max = json_number_value(json_object_get(stats, "max_ms"));
        assert_true(min > 0 && min <= med && med <= max);
        assert_true(json_number_value(json_object_get(m, "gbps")) > 0);
        assert_true(json_is_true(json_object_get(m, "verified")));
}

/* Every benchmark spanning GPUs, on two fake GPUs: bench.h's shape plus devices and links, each
 * measurement naming its GPUs; a GPU's worker (fake_run) refuses them. */
static void test_multi_gpu_benchmarks_have_the_result_shape(void **state)
{
        for (size_t i = 0; i < catalog_count(); i++) {
                const char *name = catalog_get(i)->name;
                json_t *devs = fake_list_devices(2), *res = NULL, *m, *one = fake_device_info(0);
                json_t *params =
                    json_pack("{s:i, s:I}", "iterations", 3, "size", (json_int_t)(4 << 20));
                char *error = NULL;
                size_t k;
                int r;

                if (!catalog_get(i)->multi_gpu) {
                        json_decref(devs);
                        json_decref(one);
                        json_decref(params);
                        continue;
                }
                assert_int_equal(fake_run(one, name, params, NULL, &res, &error), -ENOTSUP);
                assert_non_null(strstr(error, "runs on the node worker"));
                free(error);
                error = NULL;
                r = fake_run_multi(devs, name, params, NULL, &res, &error);
                if (r < 0)
                        fail_msg("%s: %s", name, error);
                assert_true(json_is_true(json_object_get(res, "fake")));
                assert_int_equal(json_array_size(json_object_get(res, "devices")), 2);
                assert_int_equal(json_array_size(json_object_get(res, "links")), 2);
                assert_true(json_array_size(json_object_get(res, "measurements")) > 0);
                json_array_foreach(json_object_get(res, "measurements"), k, m)
                {
                        check_measurement(m, 3);
                        assert_true(json_is_integer(json_object_get(m, "src")) ||
                                    strcmp(json_string_value(json_object_get(m, "name")), "all") ==
                                        0);
                }
                json_decref(res);
                json_decref(devs);
                json_decref(one);
                json_decref(params);
        }
}

static void test_multi_gpu_needs_two_gpus(void **state)
{
        json_t *devs = fake_list_devices(1), *res = NULL;
        char *error = NULL;

        assert_int_equal(fake_run_multi(devs, "peer", NULL, NULL, &res, &error), -ENOTSUP);
        assert_string_equal(error, "peer needs two GPUs: this node has 1");
        assert_null(res);
        free(error);
        json_decref(devs);
}

static void test_every_catalog_benchmark_has_the_result_shape(void **state)
{
        static const char *const ctx_keys[] = {"device_uuid", "driver_version", "runtime_version",
                                               "pcie",        "buffer_bytes",   "host_memory",
                                               "access",      "seed",           "buffer_reused",
                                               "warmup",      "iterations"};

        for (size_t i = 0; i < catalog_count(); i++) {
                const char *name = catalog_get(i)->name;
                if (catalog_get(i)->multi_gpu)
                        continue; /* the node worker's: test_multi_gpu_* */
                json_t *params = params_for(name, json_pack("{s:i}", "iterations", 3));
                json_t *dev = fake_device_info(0), *res = NULL, *m, *ctx;
                char *error = NULL;
                size_t k;
                int r;

                r = fake_run(dev, name, params, NULL, &res, &error);
                json_decref(params);
                json_decref(dev);
                if (strcmp(name, "system_memory") == 0) {
                        /* fake devices have no pageableMemoryAccess, like the H200 */
                        assert_int_equal(r, -ENOTSUP);
                        assert_string_equal(error,
                                            "unsupported on this device: no pageableMemoryAccess");
                        free(error);
                        continue;
                }
                if (r < 0)
                        fail_msg("%s: %s", name, error);
                assert_string_equal(json_string_value(json_object_get(res, "benchmark")), name);
                assert_true(json_is_true(json_object_get(res, "fake")));
                assert_true(json_array_size(json_object_get(res, "measurements")) > 0);
                json_array_foreach(json_object_get(res, "measurements"), k, m)
                    check_measurement(m, 3);
                ctx = json_object_get(res, "context");
                for (k = 0; k < sizeof(ctx_keys) / sizeof(ctx_keys[0]); k++)
                        if (!json_object_get(ctx, ctx_keys[k]))
                                fail_msg("%s: context has no %s", name, ctx_keys[k]);
                assert_string_equal(json_string_value(json_object_get(ctx, "device_uuid")),
                                    "GPU-fa4e0000-0000-4000-8000-000000000000");
                json_decref(res);
        }
}

static const json_t *first_measurement(const json_t *res)
{
        return json_array_get(json_object_get(res, "measurements"), 0);
}

static double gbps_of(const json_t *m)
{
        return json_number_value(json_object_get(m, "gbps"));
}

static void test_copy_names_and_model(void **state)
{
        json_t *res;
        const json_t *m;

        res = run_ok("copy", params_for("copy", json_pack("{s:I}", "size", (json_int_t)GiB)));
        m = first_measurement(res);
        assert_string_equal(json_string_value(json_object_get(m, "name")), "h2d");
        assert_true(fabs(gbps_of(m) - 55.5) < 55.5 * 0.02);
        json_decref(res);

        res = run_ok("copy",
                     params_for("copy", json_pack("{s:I, s:s, s:s}", "size", (json_int_t)GiB,
                                                  "direction", "d2h", "host_memory", "pageable")));
        m = first_measurement(res);
        assert_string_equal(json_string_value(json_object_get(m, "name")), "d2h");
        assert_true(fabs(gbps_of(m) - 17.5) < 17.5 * 0.02);
        json_decref(res);

        /* bidir counts both directions */
        res = run_ok("copy", params_for("copy", json_pack("{s:I, s:s}", "size", (json_int_t)GiB,
                                                          "direction", "bidir")));
        m = first_measurement(res);
        assert_string_equal(json_string_value(json_object_get(m, "name")), "bidir");
        assert_string_equal(json_string_value(json_object_get(m, "bytes_counted")),
                            "both directions");
        assert_int_equal(json_integer_value(json_object_get(m, "bytes")), 2 * GiB);
        assert_true(gbps_of(m) > 55.5 * 1.5);
        json_decref(res);

        /* the physical order the real suite checks holds in the model too */
        assert_true(fake_model_gbps("pinned_h2d") > fake_model_gbps("pageable_h2d"));
        assert_true(fake_model_gbps("managed_prefetch") > fake_model_gbps("managed_on_demand"));
        assert_true(fake_model_gbps("read_mostly.write") < 1.0);
}

static size_t measurements_named(const json_t *res, const char *prefix)
{
        size_t k, n = 0;
        json_t *m;
        json_array_foreach(json_object_get(res, "measurements"), k, m)
        {
                if (strncmp(json_string_value(json_object_get(m, "name")), prefix,
                            strlen(prefix)) == 0)
                        n++;
        }
        return n;
}

static void test_extended_health_plans_every_addition_without_a_budget(void **state)
{
        json_t *res =
            run_ok("health", params_for("health", json_pack("{s:s}", "tier", "extended")));
        json_t *plan = json_object_get(res, "plan");

        assert_string_equal(json_string_value(json_object_get(res, "tier")), "extended");
        assert_int_equal(json_array_size(json_object_get(plan, "ran")), 8);
        assert_int_equal(json_array_size(json_object_get(plan, "skipped")), 0);
        assert_int_equal(measurements_named(res, "knee_pinned_h2d@"), 6); /* 64 KiB .. 64 MiB */
        assert_int_equal(measurements_named(res, "knee_d2d@"), 8);        /* 64 KiB .. 1 GiB */
        assert_int_equal(measurements_named(res, "d2d_full"), 1);
        assert_int_equal(measurements_named(res, "latency_"), 5);
        json_decref(res);
}

static void test_extended_health_skips_what_its_budget_cannot_hold(void **state)
{
        /* 200 ms: the quick tier's own copies take about 150 of it, on-demand managed memory
         * would take another 100 */
        json_t *res = run_ok(
            "health",
            params_for("health", json_pack("{s:s, s:i}", "tier", "extended", "budget_ms", 200)));
        json_t *plan = json_object_get(res, "plan"), *s;
        size_t k;

        assert_true(json_array_size(json_object_get(plan, "skipped")) > 0);
        assert_true(json_number_value(json_object_get(plan, "estimated_ms")) <= 200);
        json_array_foreach(json_object_get(plan, "skipped"), k, s)
        {
                assert_non_null(strstr(json_string_value(json_object_get(s, "reason")),
                                       "of the 200 ms budget are left"));
        }
        assert_int_equal(measurements_named(res, "managed_on_demand"), 0);
        /* the quick tier's measurements are all there */
        assert_int_equal(measurements_named(res, "pinned_h2d"), 1);
        json_decref(res);
}

static void test_bandwidth_pct_scales_every_rate(void **state)
{
        const char *names[] = {"copy", "managed_prefetch", "zero_copy"};

        for (size_t i = 0; i < 3; i++) {
                json_t *full = run_ok(names[i], params_for(names[i], NULL));
                json_t *slow = run_ok(
                    names[i], params_for(names[i], json_pack("{s:i}", "fake_bandwidth_pct", 25)));
                size_t k;
                json_t *m;

                json_array_foreach(json_object_get(full, "measurements"), k, m)
                {
                        const json_t *s = json_array_get(json_object_get(slow, "measurements"), k);
                        double ratio = gbps_of(s) / gbps_of(m);

                        assert_true(fabs(ratio - 0.25) < 1e-9);
                }
                json_decref(full);
                json_decref(slow);
        }
}

static void test_deterministic_jitter(void **state)
{
        json_t *a = run_ok("copy", params_for("copy", NULL));
        json_t *b = run_ok("copy", params_for("copy", NULL));
        json_t *c = run_ok("copy", params_for("copy", json_pack("{s:i}", "seed", 7)));
        json_t *sa = json_object_get(first_measurement(a), "samples_ms");
        json_t *sc = json_object_get(first_measurement(c), "samples_ms");
        double cv = json_number_value(
            json_object_get(json_object_get(first_measurement(a), "stats"), "cv"));

        assert_true(json_equal(sa, json_object_get(first_measurement(b), "samples_ms")));
        assert_false(json_equal(sa, sc));
        assert_true(cv > 0 && cv < 0.02);
        json_decref(a);
        json_decref(b);
        json_decref(c);
}

static void test_errors(void **state)
{
        json_t *dev = fake_device_info(0), *res = NULL, *params;
        volatile sig_atomic_t cancel = 1;
        char *error = NULL;
        uint64_t t0;

        assert_int_equal(fake_run(dev, "warp_drive", NULL, NULL, &res, &error), -EINVAL);
        assert_non_null(strstr(error, "unknown benchmark"));
        assert_null(res);
        free(error);
        error = NULL;

        /* max_buffer_bytes is the worker's, checked once before any backend: test_backend.c */

        /* a long fake_delay_ms gives way to cancel at once */
        params = params_for("copy", json_pack("{s:i}", "fake_delay_ms", 60000));
        t0 = now_ms();
        assert_int_equal(fake_run(dev, "copy", params, &cancel, &res, &error), -ECANCELED);
        assert_true(now_ms() - t0 < 1000);
        assert_string_equal(error, "cancelled");
        free(error);
        json_decref(params);
        json_decref(dev);
}

static void test_real_sleep_is_capped(void **state)
{
        uint64_t t0 = now_ms();
        /* 1 GiB of on-demand faults at 8.5 GB/s, 20 samples: seconds if it really slept */
        json_t *res =
            run_ok("managed_on_demand",
                   params_for("managed_on_demand",
                              json_pack("{s:I, s:i}", "size", (json_int_t)GiB, "iterations", 20)));

        assert_true(now_ms() - t0 < 4 * FAKE_MAX_SLEEP_MS);
        assert_string_equal(json_string_value(json_object_get(first_measurement(res), "name")),
                            "gpu_on_demand");
        json_decref(res);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_device_identity),
            cmocka_unit_test(test_every_catalog_benchmark_has_the_result_shape),
            cmocka_unit_test(test_copy_names_and_model),
            cmocka_unit_test(test_bandwidth_pct_scales_every_rate),
            cmocka_unit_test(test_extended_health_plans_every_addition_without_a_budget),
            cmocka_unit_test(test_extended_health_skips_what_its_budget_cannot_hold),
            cmocka_unit_test(test_deterministic_jitter),
            cmocka_unit_test(test_multi_gpu_benchmarks_have_the_result_shape),
            cmocka_unit_test(test_multi_gpu_needs_two_gpus),
            cmocka_unit_test(test_errors),
            cmocka_unit_test(test_real_sleep_is_capped),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
