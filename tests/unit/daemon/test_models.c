/* models.c: the shipped GPU model table, its lookup by CUDA's device name, and gpu_models_file's
 * overrides, additions and refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "models.h"

static char dir[] = "/tmp/umd-test-models-XXXXXX";
static char path[256];

static int setup(void **state)
{
        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/gpu-models.conf", dir);
        return 0;
}

static int teardown(void **state)
{
        models_free();
        unlink(path);
        rmdir(dir);
        return 0;
}

static void write_models(const char *text)
{
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
}

/* The entry name a device name matches, or NULL; the string lives until the next call. */
static const char *model_of(const char *device_name)
{
        static char buf[64];
        json_t *e = models_expectation(device_name);
        const char *n = json_string_value(json_object_get(json_object_get(e, "model"), "name"));
        snprintf(buf, sizeof(buf), "%s", n ? n : "");
        json_decref(e);
        return n ? buf : NULL;
}

static double memory_of(const char *device_name)
{
        json_t *e = models_expectation(device_name);
        double g = json_number_value(json_object_get(json_object_get(e, "model"), "memory_gbps"));
        json_decref(e);
        return g;
}

static void test_cuda_names_find_their_shipped_model(void **state)
{
        assert_int_equal(models_load(NULL), 0);
        assert_string_equal(model_of("NVIDIA H200"), "NVIDIA H200");
        assert_string_equal(model_of("NVIDIA H200 NVL"), "NVIDIA H200 NVL");
        assert_string_equal(model_of("NVIDIA H100 80GB HBM3"), "NVIDIA H100 SXM");
        assert_string_equal(model_of("NVIDIA H100 PCIe"), "NVIDIA H100 PCIe");
        assert_string_equal(model_of("NVIDIA A100-SXM4-80GB"), "NVIDIA A100 SXM4 80GB");
        assert_string_equal(model_of("NVIDIA L40S"), "NVIDIA L40S");
        assert_string_equal(model_of("NVIDIA B200"), "NVIDIA B200");
        assert_string_equal(model_of("NVIDIA GH200 480GB"), "NVIDIA GH200 480GB");
        assert_string_equal(model_of("NVIDIA GH200 144G HBM3e"), "NVIDIA GH200 144GB HBM3e");
        /* The fake devices stand for H200s and are judged as such. */
        assert_string_equal(model_of("NVIDIA H200 (fake)"), "NVIDIA H200");
        assert_true(memory_of("NVIDIA H100 PCIe") == 2000);
}

static void test_an_unknown_name_has_no_model(void **state)
{
        json_t *e;
        assert_int_equal(models_load(NULL), 0);
        e = models_expectation("NVIDIA Z999 (fake)");
        assert_true(json_is_null(json_object_get(e, "model")));
        assert_string_equal(json_string_value(json_object_get(e, "device_name")),
                            "NVIDIA Z999 (fake)");
        json_decref(e);
}

static void test_every_shipped_model_names_its_source_and_memory(void **state)
{
        json_t *t, *m;
        size_t i;
        assert_int_equal(models_load(NULL), 0);
        t = models_table();
        assert_true(json_array_size(t) >= 8);
        json_array_foreach(t, i, m)
        {
                const char *src = json_string_value(json_object_get(m, "source"));
                assert_non_null(src);
                assert_non_null(strstr(src, "datasheet"));
                assert_true(json_number_value(json_object_get(m, "memory_gbps")) > 0);
                assert_string_equal(json_string_value(json_object_get(m, "from")), "shipped");
        }
        json_decref(t);
}

static void test_the_file_overrides_a_shipped_model_and_adds_one(void **state)
{
        write_models("[NVIDIA H200]\nmemory_gbps = 8000\n\n"
                     "[NVIDIA Z999]\nmatch = NVIDIA Z999*\nmemory_gbps = 1000\nnvlinks = 4\n"
                     "source = our acceptance tests\n");
        assert_int_equal(models_load(path), 0);
        assert_true(memory_of("NVIDIA H200 (fake)") == 8000);
        assert_string_equal(model_of("NVIDIA Z999 (fake)"), "NVIDIA Z999");
        json_t *e = models_expectation("NVIDIA H200");
        const json_t *m = json_object_get(e, "model");
        assert_string_equal(json_string_value(json_object_get(m, "from")), "gpu_models_file");
        /* what the file did not say stays the shipped entry's */
        assert_int_equal(json_integer_value(json_object_get(m, "pcie_gen")), 5);
        json_decref(e);
        e = models_expectation("NVIDIA Z999 (fake)");
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(e, "model"), "source")),
            "our acceptance tests");
        json_decref(e);
}

static void test_a_missing_file_leaves_the_shipped_table(void **state)
{
        unlink(path);
        assert_int_equal(models_load(path), 0);
        assert_string_equal(model_of("NVIDIA H200"), "NVIDIA H200");
}

static void test_a_bad_file_is_refused_and_the_table_kept(void **state)
{
        write_models("[NVIDIA H200]\nmemory_gbps = 8000\n");
        assert_int_equal(models_load(path), 0);
        write_models("[NVIDIA H200]\nmemory_gbps = fast\n");
        assert_int_equal(models_load(path), -EINVAL);
        assert_true(memory_of("NVIDIA H200") == 8000);
        write_models("[NVIDIA H200]\ncolour = green\n");
        assert_int_equal(models_load(path), -EINVAL);
        write_models("memory_gbps = 100\n");
        assert_int_equal(models_load(path), -EINVAL);
        assert_int_equal(models_load(dir), -EINVAL); /* a directory: not a regular file */
}

static void test_the_file_sets_error_thresholds_and_the_shipped_table_none(void **state)
{
        write_models("[NVIDIA H200]\nretired_pages_max = 100\nsram_uncorrected_max = 8\n"
                     "ecc_off = pass\n");
        assert_int_equal(models_load(path), 0);
        json_t *e = models_expectation("NVIDIA H200");
        const json_t *m = json_object_get(e, "model");
        assert_int_equal(json_integer_value(json_object_get(m, "retired_pages_max")), 100);
        assert_int_equal(json_integer_value(json_object_get(m, "sram_uncorrected_max")), 8);
        assert_string_equal(json_string_value(json_object_get(m, "ecc_off")), "pass");
        json_decref(e);
        e = models_expectation("NVIDIA H100 80GB HBM3");
        m = json_object_get(e, "model");
        assert_true(json_is_null(json_object_get(m, "retired_pages_max")));
        assert_true(json_is_null(json_object_get(m, "ecc_off")));
        json_decref(e);
        write_models("[NVIDIA H200]\necc_off = maybe\n");
        assert_int_equal(models_load(path), -EINVAL);
        write_models("[NVIDIA H200]\nretired_pages_max = -1\n");
        assert_int_equal(models_load(path), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_cuda_names_find_their_shipped_model),
            cmocka_unit_test(test_an_unknown_name_has_no_model),
            cmocka_unit_test(test_every_shipped_model_names_its_source_and_memory),
            cmocka_unit_test(test_the_file_overrides_a_shipped_model_and_adds_one),
            cmocka_unit_test(test_a_missing_file_leaves_the_shipped_table),
            cmocka_unit_test(test_a_bad_file_is_refused_and_the_table_kept),
            cmocka_unit_test(test_the_file_sets_error_thresholds_and_the_shipped_table_none),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
