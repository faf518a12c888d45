/* Unit tests for the benchmark catalog: the rules catalog_validate enforces (each with the field
 * and detail a client sees), the defaults it fills, size strings, and the JSON of GET
 * /v1/benchmarks. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <string.h>

#include <cmocka.h>

#include "catalog.h"

#define GiB (1024ull * 1024 * 1024)
#define MiB (1024ull * 1024)

static const struct catalog_limits lim = {.max_buffer_bytes = 4 * GiB};

static json_t *validate_ok(const char *bench, const char *params_json, bool allow_fake)
{
        json_error_t jerr;
        json_t *params = params_json ? json_loads(params_json, 0, &jerr) : NULL;
        struct catalog_error err = {{0}};
        json_t *out = NULL;
        if (params_json)
                assert_non_null(params);
        int r = catalog_validate(catalog_find(bench), params, &lim, allow_fake, &out, &err);
        if (r != 0)
                fail_msg("%s %s: %d %s: %s", bench, params_json, r, err.field, err.detail);
        json_decref(params);
        assert_non_null(out);
        return out;
}

/* Expects -EINVAL with exactly this field and a detail containing `detail_part`. */
static void validate_bad(const char *bench, const char *params_json, bool allow_fake,
                         const char *field, const char *detail_part)
{
        json_error_t jerr;
        json_t *params = json_loads(params_json, JSON_DECODE_ANY, &jerr);
        struct catalog_error err = {{0}};
        json_t *out = (json_t *)0x1;
        assert_non_null(params);
        assert_int_equal(
            catalog_validate(catalog_find(bench), params, &lim, allow_fake, &out, &err), -EINVAL);
        assert_ptr_equal(out, (json_t *)0x1); /* untouched on failure */
        assert_string_equal(err.field, field);
        if (!strstr(err.detail, detail_part))
                fail_msg("detail \"%s\" lacks \"%s\"", err.detail, detail_part);
        json_decref(params);
}

static void test_every_benchmark_listed(void **state)
{
        static const char *const names[] = {"copy",
                                            "copy_overlap",
                                            "zero_copy",
                                            "managed_on_demand",
                                            "managed_prefetch",
                                            "managed_advise",
                                            "system_memory",
                                            "latency",
                                            "um_vs_explicit",
                                            "sweep",
                                            "health",
                                            "d2d",
                                            "peer",
                                            "managed_peer",
                                            "host_all",
                                            "topology",
                                            "pipeline",
                                            "pipeline_sweep",
                                            "train_step",
                                            "embedding_gather"};
        static const bool suite[] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0};
        static const bool multi[] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0};
        assert_int_equal(catalog_count(), 20);
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                const struct bench_def *b = catalog_find(names[i]);
                assert_non_null(b);
                assert_string_equal(b->kind, suite[i] ? "suite" : "benchmark");
                assert_int_equal(catalog_is_suite(b), suite[i]);
                /* spanning GPUs: the node worker runs it (daemon/jobs/job_dispatch.c,
                 * kernels/worker.c) */
                assert_int_equal(b->multi_gpu, multi[i]);
                /* every benchmark carries the fake-only fault injection params */
                bool has_fake = false;
                for (size_t j = 0; j < b->n_params; j++)
                        if (strcmp(b->params[j].name, "fake_hang") == 0)
                                has_fake = b->params[j].fake_only;
                assert_true(has_fake);
        }
        assert_null(catalog_find("nope"));
        assert_null(catalog_find(NULL));
        assert_null(catalog_get(catalog_count()));
        assert_ptr_equal(catalog_get(0), catalog_find("copy"));
}

/* Every entry names the measurements its result may contain; a sweep's are its modes. */
static void test_measurement_names(void **state)
{
        for (size_t i = 0; i < catalog_count(); i++) {
                const struct bench_def *b = catalog_get(i);
                assert_non_null(b->measurements);
                assert_non_null(b->measurements[0]);
        }
        const struct bench_def *sweep = catalog_find("sweep");
        const struct param_def *modes = catalog_param(sweep, "modes");
        assert_non_null(modes);
        for (size_t k = 0; modes->values[k]; k++)
                assert_true(catalog_has_measurement(sweep, modes->values[k]));
        assert_true(catalog_has_measurement(sweep, MEAS_PINNED_H2D "@4096"));
        assert_true(catalog_has_measurement(catalog_find("peer"), MEAS_CE_UNI "@0>1"));
        assert_true(catalog_has_measurement(catalog_find("copy"), MEAS_H2D));
        assert_false(catalog_has_measurement(catalog_find("copy"), "h2"));
        assert_false(catalog_has_measurement(catalog_find("copy"), "h2d_x"));
        assert_false(catalog_has_measurement(catalog_find("copy"), NULL));
        assert_false(catalog_has_measurement(NULL, MEAS_H2D));
        assert_true(
            catalog_has_measurement(catalog_find("um_vs_explicit"), MEAS_UM_PINNED_COPY_KERNEL));
        assert_null(catalog_param(catalog_find("copy"), "nope"));
        assert_null(catalog_param(NULL, "size"));
}

static void test_defaults_filled(void **state)
{
        json_t *p = validate_ok("copy", NULL, false);
        assert_int_equal(json_integer_value(json_object_get(p, "size")), 64 * MiB);
        assert_int_equal(json_integer_value(json_object_get(p, "iterations")), 20);
        assert_int_equal(json_integer_value(json_object_get(p, "warmup")), 3);
        assert_string_equal(json_string_value(json_object_get(p, "direction")), "h2d");
        assert_string_equal(json_string_value(json_object_get(p, "host_memory")), "pinned");
        /* fault injection is left out for real devices, filled for fake ones */
        assert_null(json_object_get(p, "fake_hang"));
        json_decref(p);
        p = validate_ok("copy", NULL, true);
        assert_true(json_is_false(json_object_get(p, "fake_hang")));
        assert_int_equal(json_integer_value(json_object_get(p, "fake_bandwidth_pct")), 100);
        json_decref(p);

        p = validate_ok("managed_advise", "{}", false);
        assert_string_equal(json_string_value(json_object_get(p, "access")), "sequential");
        assert_string_equal(json_string_value(json_object_get(p, "advice")), "read_mostly");
        assert_non_null(json_object_get(p, "stride"));
        assert_non_null(json_object_get(p, "seed"));
        json_decref(p);

        p = validate_ok("um_vs_explicit", "{}", false);
        assert_int_equal(json_integer_value(json_object_get(p, "size")), 1 * GiB);
        json_decref(p);
}

static void test_default_size_clamped_to_limit(void **state)
{
        struct catalog_limits small = {.max_buffer_bytes = 16 * MiB};
        struct catalog_error err;
        json_t *out = NULL;
        assert_int_equal(catalog_validate(catalog_find("copy"), NULL, &small, false, &out, &err),
                         0);
        assert_int_equal(json_integer_value(json_object_get(out, "size")), 16 * MiB);
        json_decref(out);
}

static void test_size_strings(void **state)
{
        json_t *p = validate_ok("copy", "{\"size\": \"1GiB\"}", false);
        assert_int_equal(json_integer_value(json_object_get(p, "size")), 1 * GiB);
        json_decref(p);
        p = validate_ok("copy", "{\"size\": \"4KiB\"}", false);
        assert_int_equal(json_integer_value(json_object_get(p, "size")), 4096);
        json_decref(p);
        p = validate_ok("copy", "{\"size\": 1048576}", false);
        assert_int_equal(json_integer_value(json_object_get(p, "size")), MiB);
        json_decref(p);
        validate_bad("copy", "{\"size\": \"lots\"}", false, "params.size", "like \"64MiB\"");
        validate_bad("copy", "{\"size\": 1.5}", false, "params.size", "integer number of bytes");
        validate_bad("copy", "{\"size\": true}", false, "params.size", "integer number of bytes");
}

static void test_size_bounds_name_the_limit(void **state)
{
        validate_bad("copy", "{\"size\": \"8GiB\"}", false, "params.size",
                     "must be at most 4 GiB (max_buffer_bytes)");
        validate_bad("copy", "{\"size\": 4294967297}", false, "params.size", "(max_buffer_bytes)");
        validate_bad("copy", "{\"size\": 100}", false, "params.size", "at least 4 KiB");
        validate_bad("copy", "{\"size\": -5}", false, "params.size", "at least 4 KiB");
        validate_bad("latency", "{\"size\": \"2MiB\"}", false, "params.size", "at most 1 MiB");
        /* exactly the limit is allowed */
        json_t *p = validate_ok("copy", "{\"size\": \"4GiB\"}", false);
        json_decref(p);
}

static void test_int_rules(void **state)
{
        validate_bad("copy", "{\"iterations\": 0}", false, "params.iterations",
                     "between 1 and 1000");
        validate_bad("copy", "{\"iterations\": 1001}", false, "params.iterations",
                     "between 1 and 1000");
        validate_bad("copy", "{\"iterations\": \"5\"}", false, "params.iterations",
                     "must be an integer");
        validate_bad("copy", "{\"warmup\": 101}", false, "params.warmup", "between 0 and 100");
        validate_bad("copy_overlap", "{\"streams\": 9}", false, "params.streams",
                     "between 1 and 8");
        json_t *p = validate_ok("copy", "{\"iterations\": 1000, \"warmup\": 0}", false);
        json_decref(p);
}

static void test_enum_rules(void **state)
{
        validate_bad("copy", "{\"direction\": \"sideways\"}", false, "params.direction",
                     "must be one of: h2d, d2h, bidir");
        validate_bad("copy", "{\"direction\": 1}", false, "params.direction", "one of");
        validate_bad("zero_copy", "{\"access\": \"zigzag\"}", false, "params.access",
                     "sequential, strided, random");
        validate_bad("managed_advise", "{\"advice\": \"none\"}", false, "params.advice",
                     "read_mostly");
        json_t *p =
            validate_ok("copy", "{\"direction\": \"bidir\", \"host_memory\": \"pageable\"}", false);
        assert_string_equal(json_string_value(json_object_get(p, "direction")), "bidir");
        json_decref(p);
}

static void test_unknown_and_wrong_shape(void **state)
{
        validate_bad("copy", "{\"sizee\": 4096}", false, "params.sizee", "unknown parameter");
        validate_bad("copy", "{\"advice\": \"read_mostly\"}", false, "params.advice",
                     "unknown parameter");
        validate_bad("copy", "[1,2]", false, "params", "must be an object");
        struct catalog_error err;
        json_t *out = NULL;
        assert_int_equal(catalog_validate(NULL, NULL, &lim, false, &out, &err), -EINVAL);
        assert_string_equal(err.field, "benchmark");
}

static void test_fake_params_only_for_fake(void **state)
{
        validate_bad("copy", "{\"fake_hang\": true}", false, "params.fake_hang", "fake devices");
        validate_bad("latency", "{\"fake_delay_ms\": 10}", false, "params.fake_delay_ms",
                     "fake devices");
        json_t *p = validate_ok("copy", "{\"fake_hang\": true, \"fake_delay_ms\": 5}", true);
        assert_true(json_is_true(json_object_get(p, "fake_hang")));
        assert_int_equal(json_integer_value(json_object_get(p, "fake_delay_ms")), 5);
        json_decref(p);
        validate_bad("copy", "{\"fake_bandwidth_pct\": 0}", true, "params.fake_bandwidth_pct",
                     "between 1 and 1000");
        validate_bad("copy", "{\"fake_crash\": 1}", true, "params.fake_crash", "true or false");
        validate_bad("copy", "{\"fake_delay_ms\": 3600001}", true, "params.fake_delay_ms",
                     "between 0 and 3600000");
}

static void test_cross_rules(void **state)
{
        validate_bad("copy_overlap", "{\"size\": \"1MiB\", \"chunk\": \"2MiB\"}", false,
                     "params.chunk", "at most size (1 MiB)");
        /* the default chunk is 0, "a sixteenth of size", whatever the size */
        json_t *p = validate_ok("copy_overlap", "{\"size\": \"64KiB\"}", false);
        assert_int_equal(json_integer_value(json_object_get(p, "chunk")), 0);
        json_decref(p);
        p = validate_ok("copy_overlap", "{\"size\": \"1MiB\", \"chunk\": \"64KiB\"}", false);
        assert_int_equal(json_integer_value(json_object_get(p, "chunk")), 64 * 1024);
        json_decref(p);
        validate_bad("zero_copy", "{\"size\": \"64KiB\", \"stride\": \"1MiB\"}", false,
                     "params.stride", "at most size");
}

/* pipeline's intensity: a number within bounds, or the one word "balanced" (the default). */
static void test_intensity_takes_a_number_or_balanced(void **state)
{
        json_t *p = validate_ok("pipeline", NULL, false);
        assert_string_equal(json_string_value(json_object_get(p, "intensity")), "balanced");
        json_decref(p);
        p = validate_ok("pipeline", "{\"intensity\": 64}", false);
        assert_int_equal(json_integer_value(json_object_get(p, "intensity")), 64);
        json_decref(p);
        validate_bad("pipeline", "{\"intensity\": \"heavy\"}", false, "params.intensity",
                     "an integer or \"balanced\"");
        validate_bad("pipeline", "{\"intensity\": 0}", false, "params.intensity",
                     "between 1 and 1048576");
        validate_bad("pipeline", "{\"intensity\": 1048577}", false, "params.intensity",
                     "between 1 and 1048576");
}

/* touched absent (or 0) is the whole batch, in bytes; more than size is refused, and so is a
 * writeback larger than the batch. */
/* issue 60: who writes the batch, with how many threads, and how chunks are issued. */
static void test_pipeline_batch_writers_and_chunk_issue(void **state)
{
        json_t *p = validate_ok("pipeline", NULL, false);
        assert_string_equal(json_string_value(json_object_get(p, "batch")), "prepared");
        assert_int_equal(json_integer_value(json_object_get(p, "writers")), 1);
        assert_string_equal(json_string_value(json_object_get(p, "chunk_issue")), "auto");
        json_decref(p);
        p = validate_ok("pipeline", "{\"chunk_issue\": \"copy_stream\"}", false);
        assert_string_equal(json_string_value(json_object_get(p, "chunk_issue")), "copy_stream");
        json_decref(p);
        p = validate_ok("pipeline_sweep",
                        "{\"batch\": \"host_written\", \"writers\": 64, \"chunk_issue\": "
                        "\"round_robin\", \"strategies\": [\"managed_prefetch_batch\", "
                        "\"managed_discard_prefetch\"]}",
                        false);
        assert_string_equal(json_string_value(json_object_get(p, "batch")), "host_written");
        json_decref(p);
        validate_bad("pipeline", "{\"batch\": \"loader\"}", false, "params.batch", "one of");
        validate_bad("pipeline", "{\"writers\": 0}", false, "params.writers", "between 1 and 64");
        validate_bad("pipeline", "{\"writers\": 65}", false, "params.writers", "between 1 and 64");
        validate_bad("pipeline", "{\"chunk_issue\": \"scatter\"}", false, "params.chunk_issue",
                     "one of");
}

static void test_pipeline_touched_and_writeback_within_size(void **state)
{
        json_t *p = validate_ok("pipeline", "{\"size\": \"64MiB\"}", false);
        assert_int_equal(json_integer_value(json_object_get(p, "touched")), 64 * MiB);
        json_decref(p);
        p = validate_ok("pipeline", "{\"size\": \"64MiB\", \"touched\": \"1MiB\"}", false);
        assert_int_equal(json_integer_value(json_object_get(p, "touched")), 1 * MiB);
        json_decref(p);
        validate_bad("pipeline", "{\"size\": \"64MiB\", \"touched\": \"65MiB\"}", false,
                     "params.touched", "at most size (64 MiB)");
        validate_bad("pipeline", "{\"size\": \"64MiB\", \"writeback\": \"128MiB\"}", false,
                     "params.writeback", "at most size (64 MiB)");
        validate_bad("pipeline", "{\"chunks\": 0}", false, "params.chunks", "between 1 and 1024");
        validate_bad("pipeline", "{\"streams\": 9}", false, "params.streams", "between 1 and 8");
        validate_bad("pipeline", "{\"steps\": 101}", false, "params.steps", "between 1 and 100");
        validate_bad("pipeline", "{\"strategies\": [\"magic\"]}", false, "params.strategies",
                     "one of");
        validate_bad("pipeline_sweep", "{\"max_factor\": 65}", false, "params.max_factor",
                     "between 1 and 64");
        validate_bad("pipeline_sweep", "{\"size\": \"64MiB\", \"min_touched\": \"1GiB\"}", false,
                     "params.min_touched", "at most size");
}

static void test_lists(void **state)
{
        json_t *p = validate_ok("sweep", "{\"max_size\": \"64KiB\"}", false);
        json_t *sizes = json_object_get(p, "sizes");
        assert_int_equal(json_array_size(sizes), 5); /* 4,8,16,32,64 KiB */
        assert_int_equal(json_integer_value(json_array_get(sizes, 4)), 64 * 1024);
        assert_int_equal(json_array_size(json_object_get(p, "modes")), 4);
        json_decref(p);

        p = validate_ok("sweep", "{\"sizes\": [\"4KiB\", 1048576], \"modes\": [\"bidir\"]}", false);
        assert_int_equal(json_integer_value(json_array_get(json_object_get(p, "sizes"), 0)), 4096);
        json_decref(p);

        validate_bad("sweep", "{\"sizes\": [4096, \"9GiB\"]}", false, "params.sizes[1]",
                     "at most 4 GiB");
        validate_bad("sweep", "{\"sizes\": []}", false, "params.sizes", "1 to 64");
        validate_bad("sweep", "{\"modes\": [\"bidir\", \"bidir\"]}", false, "params.modes",
                     "repeats");
        validate_bad("sweep", "{\"modes\": [\"warp\"]}", false, "params.modes", "one of");
        validate_bad("sweep", "{\"modes\": []}", false, "params.modes", "non-empty");
}

/* The worker and recovery validate the normalized params again: they must pass unchanged. */
static void test_normalized_is_fixed_point(void **state)
{
        const struct catalog_limits lims[] = {{.max_buffer_bytes = 4 * GiB},
                                              {.max_buffer_bytes = 64 * 1024}};
        for (size_t i = 0; i < catalog_count(); i++)
                for (size_t l = 0; l < 2; l++)
                        for (int fake = 0; fake < 2; fake++) {
                                struct catalog_error err = {{0}};
                                json_t *a = NULL, *b = NULL;
                                const struct bench_def *d = catalog_get(i);
                                if (catalog_validate(d, NULL, &lims[l], fake, &a, &err) != 0)
                                        fail_msg("%s: %s %s", d->name, err.field, err.detail);
                                if (catalog_validate(d, a, &lims[l], fake, &b, &err) != 0)
                                        fail_msg("%s again: %s %s", d->name, err.field, err.detail);
                                assert_true(json_equal(a, b));
                                json_decref(a);
                                json_decref(b);
                        }
}

static void test_catalog_json(void **state)
{
        json_t *j = catalog_to_json(&lim);
        assert_true(json_is_array(j));
        assert_int_equal(json_array_size(j), catalog_count());
        json_t *copy = json_array_get(j, 0);
        assert_string_equal(json_string_value(json_object_get(copy, "name")), "copy");
        assert_string_equal(json_string_value(json_object_get(copy, "kind")), "benchmark");
        json_t *params = json_object_get(copy, "params"), *size = NULL, *dir = NULL;
        size_t i;
        json_t *e;
        json_array_foreach(params, i, e)
        {
                const char *n = json_string_value(json_object_get(e, "name"));
                if (strcmp(n, "size") == 0)
                        size = e;
                if (strcmp(n, "direction") == 0)
                        dir = e;
        }
        assert_non_null(size);
        assert_string_equal(json_string_value(json_object_get(size, "type")), "size");
        assert_string_equal(json_string_value(json_object_get(size, "unit")), "bytes");
        assert_int_equal(json_integer_value(json_object_get(size, "max")), 4 * GiB);
        assert_int_equal(json_integer_value(json_object_get(size, "min")), 4096);
        assert_int_equal(json_integer_value(json_object_get(size, "default")), 64 * MiB);
        assert_non_null(dir);
        assert_int_equal(json_array_size(json_object_get(dir, "values")), 3);
        assert_string_equal(json_string_value(json_object_get(dir, "default")), "h2d");
        json_decref(j);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_every_benchmark_listed),
            cmocka_unit_test(test_measurement_names),
            cmocka_unit_test(test_defaults_filled),
            cmocka_unit_test(test_default_size_clamped_to_limit),
            cmocka_unit_test(test_size_strings),
            cmocka_unit_test(test_size_bounds_name_the_limit),
            cmocka_unit_test(test_int_rules),
            cmocka_unit_test(test_enum_rules),
            cmocka_unit_test(test_unknown_and_wrong_shape),
            cmocka_unit_test(test_fake_params_only_for_fake),
            cmocka_unit_test(test_cross_rules),
            cmocka_unit_test(test_lists),
            cmocka_unit_test(test_intensity_takes_a_number_or_balanced),
            cmocka_unit_test(test_pipeline_touched_and_writeback_within_size),
            cmocka_unit_test(test_pipeline_batch_writers_and_chunk_issue),
            cmocka_unit_test(test_normalized_is_fixed_point),
            cmocka_unit_test(test_catalog_json),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
