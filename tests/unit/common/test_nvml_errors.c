/* The GPU error state read through the real NVML loader (common/nvml.c) from a fake
 * libnvidia-ml driven by a JSON state (tests/fake_nvml/fake_nvml.c), then judged
 * (daemon/health_errors.c): each fault the fake can hold reaches its check's verdict and action; a
 * healthy GPU with zero counters passes; what the driver does not support, or lacks (this program's
 * build without nvmlDeviceGetRemappedRows, FAKE_NVML_NO_REMAPPED_ROWS), reads "unknown" and never
 * fails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "health_errors.h"
#include "nvml.h"
#include "nvml_errors.h"

#define UUID "GPU-fa4e0000-0000-4000-8000-00000000e220"

static char path[] = "/tmp/umd-fake-nvml-XXXXXX";

/* The fake's state: this GPU with gpu_json as its entry. */
static void write_state(const char *gpu_json)
{
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fprintf(f, "{\"devices\": {\"%s\": %s}}", UUID, gpu_json);
        fclose(f);
}

/* The readings of the fake GPU through nvml.c, judged: a new verdict. */
static json_t *read_and_judge(const char *gpu_json)
{
        const struct nvml_api *api = NULL;
        const char *why = NULL;
        nvml_device dev;

        write_state(gpu_json);
        assert_int_equal(nvml_open(&api, &why), 0);
        assert_int_equal(api->by_uuid(UUID, &dev), NVML_SUCCESS);
        json_t *readings = nvml_errors_read(api, dev, NULL);
        assert_non_null(readings);
        json_t *v = json_pack("{s:s, s:[], s:[], s:O}", "verdict", "pass", "checks", "reasons",
                              "readings", readings);
        health_errors_judge(v, readings, NULL);
        health_actions_stamp(v);
        json_decref(readings);
        return v;
}

static const json_t *check_named(const json_t *v, const char *name)
{
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(v, "checks"), i, c)
        {
                if (strcmp(json_string_value(json_object_get(c, "name")), name) == 0)
                        return c;
        }
        fail_msg("no check %s", name);
        return NULL;
}

static void assert_judged(const char *gpu_json, const char *check, const char *verdict,
                          const char *action)
{
        json_t *v = read_and_judge(gpu_json);
        const json_t *c = check_named(v, check);
        assert_string_equal(json_string_value(json_object_get(c, "verdict")), verdict);
        assert_string_equal(json_string_value(json_object_get(c, "action")), action);
        assert_string_equal(json_string_value(json_object_get(v, "action")), action);
        json_decref(v);
}

static const char *reason_of(const json_t *v, const char *check)
{
        return json_string_value(json_object_get(check_named(v, check), "reason"));
}

static void test_healthy_gpu_with_zero_counters_passes(void **state)
{
        (void)state;
        json_t *v = read_and_judge("{}");
        const json_t *r = json_object_get(v, "readings");
        assert_string_equal(json_string_value(json_object_get(v, "verdict")), "pass");
        assert_string_equal(json_string_value(json_object_get(v, "action")), "none");
        assert_int_equal(json_array_size(json_object_get(v, "checks")), 7);
        assert_string_equal(json_string_value(json_object_get(r, "source")), "nvml");
        assert_true(json_is_integer(json_object_get(r, "elapsed_us")));
        assert_int_equal(
            json_integer_value(json_object_get(
                json_object_get(json_object_get(json_object_get(r, "ecc"), "aggregate"), "sram"),
                "uncorrected")),
            0);
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(r, "recovery_action"), "name")),
            "none");
        json_decref(v);
}

#ifndef FAKE_NVML_NO_REMAPPED_ROWS
static void test_pending_remap(void **state)
{
        (void)state;
        assert_judged("{\"remapped_rows\": {\"pending\": true, \"uncorrected\": 1}}",
                      "remapped_rows", "fail", "reset_gpu");
}

static void test_remap_failure(void **state)
{
        (void)state;
        assert_judged("{\"remapped_rows\": {\"failure\": true, \"uncorrected\": 8}}",
                      "remapped_rows", "fail", "service");
}
#else
static void test_a_missing_entry_point_reads_unknown_and_passes(void **state)
{
        (void)state;
        json_t *v = read_and_judge("{\"remapped_rows\": {\"failure\": true}}");
        assert_string_equal(json_string_value(json_object_get(v, "verdict")), "pass");
        assert_non_null(
            strstr(reason_of(v, "remapped_rows"), "unknown: NVML lacks nvmlDeviceGetRemappedRows"));
        json_decref(v);
}
#endif

static void test_uncorrectable_dram_error(void **state)
{
        (void)state;
        assert_judged("{\"ecc\": {\"volatile\": {\"dram\": {\"uncorrected\": 1}}}}", "ecc_volatile",
                      "fail", "reset_gpu");
}

static void test_uncorrectable_sram_error(void **state)
{
        (void)state;
        assert_judged("{\"ecc\": {\"volatile\": {\"sram\": {\"uncorrected\": 1}}}}", "ecc_volatile",
                      "fail", "reset_gpu");
        assert_judged("{\"ecc\": {\"aggregate\": {\"sram\": {\"uncorrected\": 5}}}}",
                      "ecc_aggregate", "fail", "service");
}

static void test_every_recovery_action(void **state)
{
        (void)state;
        static const char *const actions[] = {"none", "reset_gpu", "reboot_node", "restart_job",
                                              "reset_gpu"};
        for (int value = 0; value < 5; value++) {
                char gpu[64];
                snprintf(gpu, sizeof(gpu), "{\"recovery_action\": %d}", value);
                assert_judged(gpu, "recovery_action", value ? "fail" : "pass", actions[value]);
        }
}

static void test_ecc_turned_off_warns(void **state)
{
        (void)state;
        assert_judged("{\"ecc_mode\": {\"current\": \"off\", \"pending\": \"off\"}}", "ecc_mode",
                      "warn", "none");
}

static void test_retired_pages_counted_without_addresses(void **state)
{
        (void)state;
        json_t *v = read_and_judge("{\"retired_pages\": {\"single_bit\": 40, \"double_bit\": 23}}");
        const json_t *r = json_object_get(json_object_get(v, "readings"), "retired_pages");
        assert_int_equal(json_integer_value(json_object_get(r, "double_bit")), 23);
        assert_string_equal(
            json_string_value(json_object_get(check_named(v, "retired_pages"), "action")),
            "service");
        json_decref(v);
}

/* The InfoROM is read once and kept: a later read serves the kept reading, marked, even after
 * the GPU's answer changed (only a firmware write changes it), and times every other reading. */
static void test_inforom_read_once_and_kept(void **state)
{
        const struct nvml_api *api = NULL;
        const char *why = NULL;
        json_t *kept = NULL;
        nvml_device dev;

        write_state("{}");
        assert_int_equal(nvml_open(&api, &why), 0);
        assert_int_equal(api->by_uuid(UUID, &dev), NVML_SUCCESS);
        json_t *first = nvml_errors_read(api, dev, &kept);
        assert_non_null(kept);
        assert_true(json_is_true(json_object_get(json_object_get(first, "inforom"), "valid")));
        assert_null(json_object_get(json_object_get(first, "inforom"), "kept"));
        assert_non_null(json_object_get(json_object_get(first, "read_us"), "inforom"));

        write_state("{\"inforom_valid\": false}");
        json_t *second = nvml_errors_read(api, dev, &kept);
        json_t *inforom = json_object_get(second, "inforom");
        assert_true(json_is_true(json_object_get(inforom, "valid")));
        assert_true(json_is_true(json_object_get(inforom, "kept")));
        assert_null(json_object_get(json_object_get(second, "read_us"), "inforom"));
        assert_non_null(json_object_get(json_object_get(second, "read_us"), "remapped_rows"));
        json_decref(first);
        json_decref(second);
        json_decref(kept);
}

static void test_corrupt_inforom_warns(void **state)
{
        (void)state;
        assert_judged("{\"inforom_valid\": false}", "inforom", "warn", "none");
}

static void test_not_supported_reads_unknown_and_passes(void **state)
{
        (void)state;
        json_t *v = read_and_judge("{\"not_supported\": [\"nvmlDeviceGetRetiredPages\", "
                                   "\"nvmlDeviceGetEccMode\", \"nvmlDeviceGetMemoryErrorCounter\", "
                                   "\"NVML_FI_DEV_GET_GPU_RECOVERY_ACTION\"]}");
        assert_string_equal(json_string_value(json_object_get(v, "verdict")), "pass");
        assert_non_null(strstr(reason_of(v, "retired_pages"),
                               "unknown: nvmlDeviceGetRetiredPages: Not Supported"));
        assert_non_null(strstr(reason_of(v, "ecc_mode"), "unknown: nvmlDeviceGetEccMode"));
        assert_non_null(strstr(reason_of(v, "recovery_action"), "unknown: "));
        assert_non_null(strstr(reason_of(v, "ecc_volatile"),
                               "unknown: nvmlDeviceGetMemoryErrorCounter: Not Supported"));
        json_decref(v);
}

static int setup(void **state)
{
        int fd = mkstemp(path);
        (void)state;
        if (fd < 0)
                return -1;
        close(fd);
        setenv("UMD_FAKE_NVML_STATE", path, 1);
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        nvml_close();
        unlink(path);
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_healthy_gpu_with_zero_counters_passes),
#ifndef FAKE_NVML_NO_REMAPPED_ROWS
            cmocka_unit_test(test_pending_remap),
            cmocka_unit_test(test_remap_failure),
#else
            cmocka_unit_test(test_a_missing_entry_point_reads_unknown_and_passes),
#endif
            cmocka_unit_test(test_uncorrectable_dram_error),
            cmocka_unit_test(test_uncorrectable_sram_error),
            cmocka_unit_test(test_every_recovery_action),
            cmocka_unit_test(test_ecc_turned_off_warns),
            cmocka_unit_test(test_retired_pages_counted_without_addresses),
            cmocka_unit_test(test_corrupt_inforom_warns),
            cmocka_unit_test(test_inforom_read_once_and_kept),
            cmocka_unit_test(test_not_supported_reads_unknown_and_passes),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
