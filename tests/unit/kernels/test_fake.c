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
#include "jsonutil.h"

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

/* pipeline (issue 60): the measurement named name in a fake pipeline result, or fail. */
static const json_t *pipe_meas(const json_t *res, const char *name)
{
        const json_t *m = json_array_find(json_object_get(res, "measurements"), "name", name);
        if (!m)
                fail_msg("no measurement %s", name);
        return m;
}

static double median_of_meas(const json_t *m)
{
        return json_number_value(json_object_get(json_object_get(m, "stats"), "median_ms"));
}

/* A strategy's modelled steady step: the model's own figure, without the samples' jitter. */
static double steady_of(const json_t *res, const char *name)
{
        return json_number_value(json_object_get(pipe_meas(res, name), "steady_step_ms"));
}

static json_t *pipe_run(const char *batch, int writers)
{
        return run_ok("pipeline",
                      params_for("pipeline", json_pack("{s:I, s:s, s:i, s:i, s:i}", "size",
                                                       (json_int_t)GiB, "batch", batch, "writers",
                                                       writers, "iterations", 1, "warmup", 0)));
}

static void test_pipeline_prepared_has_no_host_write(void **state)
{
        json_t *res = pipe_run("prepared", 1);

        assert_null(json_array_find(json_object_get(res, "measurements"), "name", "host_write"));
        assert_null(json_object_get(pipe_meas(res, "pinned_serial"), "host_write_ms"));
        json_decref(res);
}

/* The host's write: into managed memory its CPU faults on top of the copy, none after a discard;
 * double-buffered, a steady step is the longer of the write and the GPU's step, the first both. */
static void test_pipeline_host_written_costs_the_write(void **state)
{
        json_t *res = pipe_run("host_written", 1);
        const json_t *hw = pipe_meas(res, "host_write"), *pin = pipe_meas(res, "pinned_serial"),
                     *pc = pipe_meas(res, "managed_prefetch_chunked"),
                     *dp = pipe_meas(res, "managed_discard_prefetch");
        double size = (double)GiB, write = size / 10e9 * 1e3; /* one writer, 10 GB/s */

        assert_true(fabs(median_of_meas(hw) - write) < 0.05 * write); /* the median jitters */
        assert_true(fabs(json_number_value(json_object_get(pin, "host_write_ms")) - write) < 1e-9);
        assert_true(fabs(json_number_value(json_object_get(pc, "host_write_ms")) -
                         (write + size / 2.5e9 * 1e3)) < 1e-6);
        assert_true(fabs(json_number_value(json_object_get(dp, "host_write_ms")) - write) < 1e-9);
        /* one writer at 10 GB/s is slower than any GPU step here: the write bounds every step */
        assert_true(fabs(json_number_value(json_object_get(pin, "steady_step_ms")) - write) < 1e-6);
        assert_true(json_number_value(json_object_get(pin, "first_step_ms")) > write);
        json_decref(res);
}

static void test_pipeline_writers_speed_the_write_up_to_the_cap(void **state)
{
        json_t *one = pipe_run("host_written", 1), *four = pipe_run("host_written", 4),
               *many = pipe_run("host_written", 64);
        double w1 = median_of_meas(pipe_meas(one, "host_write")),
               w4 = median_of_meas(pipe_meas(four, "host_write")),
               w64 = median_of_meas(pipe_meas(many, "host_write"));

        assert_true(fabs(w1 / w4 - 4) < 0.2);
        assert_true(fabs(w64 - (double)GiB / 60e9 * 1e3) < 0.05 * w64); /* capped at 60 GB/s */
        json_decref(one), json_decref(four), json_decref(many);
}

/* The batched prefetch completes as a whole: prefetch then kernel, no overlap; discard-and-
 * prefetch's GPU step is the chunked one. */
static void test_pipeline_batch_and_discard_strategies(void **state)
{
        json_t *res = pipe_run("prepared", 1);
        double whole = steady_of(res, "managed_prefetch"),
               batch = steady_of(res, "managed_prefetch_batch"),
               chunked = steady_of(res, "managed_prefetch_chunked"),
               discard = steady_of(res, "managed_discard_prefetch");

        /* the model's own figures (each sample jitters by up to 1.5%) */
        assert_true(fabs(batch - whole) < 1e-9);
        assert_true(fabs(discard - chunked) < 1e-9);
        assert_true(chunked < 0.7 * batch);
        json_decref(res);
}

/* A prepared 1 GiB pipeline with more params (owned). */
static json_t *pipe_run_with(json_t *more)
{
        json_t *p =
            json_pack("{s:I, s:i, s:i}", "size", (json_int_t)GiB, "iterations", 1, "warmup", 0);
        json_object_update(p, more);
        json_decref(more);
        return run_ok("pipeline", params_for("pipeline", p));
}

/* issue 60: the prefetch alone, one step, at the managed copy's rate, where a strategy
 * prefetches; none where none does. */
static void test_pipeline_prefetch_alone_where_a_strategy_prefetches(void **state)
{
        json_t *res = pipe_run("prepared", 1),
               *none = pipe_run_with(
                   json_pack("{s:[s, s]}", "strategies", "pinned_serial", "managed_on_demand"));
        const json_t *pa = pipe_meas(res, "managed_prefetch_alone");
        double want = (double)GiB / 51e9 * 1e3;

        assert_true(fabs(median_of_meas(pa) - want) < 0.05 * want);
        assert_int_equal(json_integer_value(json_object_get(pa, "steps")), 1);
        assert_null(json_array_find(json_object_get(none, "measurements"), "name",
                                    "managed_prefetch_alone"));
        json_decref(res), json_decref(none);
}

/* chunk_issue auto (the default): pinned copies on the copy stream, managed prefetches round
 * robin; copy_stream charges each of 64 prefetches 0.2 ms in series, round robin nothing. */
static void test_pipeline_chunk_issue_auto_and_copy_streams_prefetches_in_series(void **state)
{
        json_t *aut = pipe_run("prepared", 1),
               *cs = pipe_run_with(json_pack("{s:s}", "chunk_issue", "copy_stream")),
               *rr = pipe_run_with(json_pack("{s:s}", "chunk_issue", "round_robin"));
        const struct {
                const json_t *res;
                const char *strategy, *issue;
        } want[] = {{aut, "pinned_overlapped", "copy_stream"},
                    {aut, "managed_prefetch_chunked", "round_robin"},
                    {rr, "pinned_overlapped", "round_robin"},
                    {cs, "managed_discard_prefetch", "copy_stream"}};

        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
                assert_string_equal(json_string_value(json_object_get(
                                        pipe_meas(want[i].res, want[i].strategy), "chunk_issue")),
                                    want[i].issue);
        double a = steady_of(aut, "managed_prefetch_chunked"),
               c = steady_of(cs, "managed_prefetch_chunked"),
               r = steady_of(rr, "managed_prefetch_chunked");
        assert_true(fabs(c - a - 64 * 0.2) < 1e-6);
        assert_true(fabs(r - a) < 1e-9);
        /* pinned copies are modelled the same either way */
        assert_true(fabs(steady_of(rr, "pinned_overlapped") - steady_of(cs, "pinned_overlapped")) <
                    1e-9);
        json_decref(aut), json_decref(cs), json_decref(rr);
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
            cmocka_unit_test(test_pipeline_prepared_has_no_host_write),
            cmocka_unit_test(test_pipeline_host_written_costs_the_write),
            cmocka_unit_test(test_pipeline_writers_speed_the_write_up_to_the_cap),
            cmocka_unit_test(test_pipeline_batch_and_discard_strategies),
            cmocka_unit_test(test_pipeline_prefetch_alone_where_a_strategy_prefetches),
            cmocka_unit_test(test_pipeline_chunk_issue_auto_and_copy_streams_prefetches_in_series),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
