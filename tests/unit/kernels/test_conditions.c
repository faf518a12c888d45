/* Conditions of a run (issue 17): nvidia_uvm's parameters read from a directory like sysfs, the
 * HMM verdict from them and the device's attributes, throttle reasons in words. NVML itself is
 * not here (no GPU): conditions_gpu must still answer with a reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "conditions.h"

static char dir[] = "/tmp/umd-test-uvm-XXXXXX";

static void put(const char *name, const char *text)
{
        char path[256];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
}

static int setup(void **state)
{
        (void)state;
        if (!mkdtemp(dir))
                return -1;
        put("uvm_perf_fault_batch_count", "256\n");
        put("uvm_disable_hmm", "N\n");
        put("uvm_channel_pushbuffer_loc", "auto\n");
        return 0;
}

static int teardown(void **state)
{
        char cmd[128];
        (void)state;
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        return system(cmd) == 0 ? 0 : -1;
}

static void test_uvm_params_keep_integers_and_text(void **state)
{
        const char *why = NULL;
        (void)state;
        json_t *o = conditions_uvm_params(dir, &why);
        assert_non_null(o);
        assert_int_equal(json_integer_value(json_object_get(o, "uvm_perf_fault_batch_count")), 256);
        assert_string_equal(json_string_value(json_object_get(o, "uvm_channel_pushbuffer_loc")),
                            "auto");
        assert_string_equal(json_string_value(json_object_get(o, "uvm_disable_hmm")), "N");
        json_decref(o);
}

static void test_missing_module_is_null_with_a_reason(void **state)
{
        (void)state;
        json_t *dev = json_pack("{s:b}", "pageableMemoryAccess", 0);
        json_t *c = conditions_host("/nonexistent/nvidia_uvm/parameters", dev);
        assert_true(json_is_null(json_object_get(c, "nvidia_uvm")));
        assert_non_null(
            strstr(json_string_value(json_object_get(c, "nvidia_uvm_why")), "not loaded"));
        json_t *hmm = json_object_get(c, "hmm");
        assert_true(json_is_false(json_object_get(hmm, "could_use_hmm")));
        assert_true(json_is_null(json_object_get(hmm, "uvm_disable_hmm")));
        json_decref(c);
        json_decref(dev);
}

static void test_hmm_needs_pageable_access_and_hmm_left_on(void **state)
{
        (void)state;
        json_t *dev = json_pack("{s:b}", "pageableMemoryAccess", 1);
        json_t *c = conditions_host(dir, dev);
        assert_true(json_is_true(json_object_get(json_object_get(c, "hmm"), "could_use_hmm")));
        json_decref(c);
        put("uvm_disable_hmm", "Y\n");
        c = conditions_host(dir, dev);
        json_t *hmm = json_object_get(c, "hmm");
        assert_true(json_is_false(json_object_get(hmm, "could_use_hmm")));
        assert_non_null(strstr(json_string_value(json_object_get(hmm, "why")), "uvm_disable_hmm"));
        json_decref(c);
        json_decref(dev);
        put("uvm_disable_hmm", "N\n");
}

static void test_throttle_reasons_in_words(void **state)
{
        (void)state;
        json_t *a = conditions_throttle_words(0x1 | 0x4 | 0x40 | (1ull << 40));
        assert_int_equal(json_array_size(a), 4);
        assert_string_equal(json_string_value(json_array_get(a, 0)), "gpu_idle");
        assert_string_equal(json_string_value(json_array_get(a, 1)), "sw_power_cap");
        assert_string_equal(json_string_value(json_array_get(a, 2)), "hw_thermal_slowdown");
        assert_string_equal(json_string_value(json_array_get(a, 3)), "other");
        json_decref(a);
}

static void test_gpu_state_without_nvml_or_gpu_says_why(void **state)
{
        (void)state;
        json_t *g = conditions_gpu("GPU-00000000-0000-0000-0000-000000000000");
        assert_non_null(g);
        assert_true(json_is_string(json_object_get(g, "unavailable")));
        json_decref(g);
}

static void test_stamp_on_a_fake_device_reads_nothing_real(void **state)
{
        (void)state;
        json_t *res = json_pack("{s:{}}", "context");
        json_t *dev = json_pack("{s:s}", "uuid", "GPU-fa4e");
        conditions_stamp(res, dev, conditions_before(dev, true), true);
        json_t *c = json_object_get(json_object_get(res, "context"), "conditions");
        assert_non_null(c);
        assert_true(json_is_null(json_object_get(c, "nvidia_uvm")));
        assert_non_null(strstr(
            json_string_value(json_object_get(json_object_get(c, "gpu_after"), "unavailable")),
            "fake"));
        json_decref(res);
        json_decref(dev);
}

/* Issue 60: every blocker is named, and a node with none says system_memory runs. */
static const char OPEN_MODULE[] = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95";
static const char CLOSED_MODULE[] = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95";

static json_t *hmm_for(bool pageable, const char *version, const char *release, int cuda)
{
        json_t *dev =
            json_pack("{s:b, s:b, s:i}", "pageableMemoryAccess", pageable,
                      "pageableMemoryAccessUsesHostPageTables", 0, "driver_version", cuda);
        json_t *uvm = json_pack("{s:s}", "uvm_disable_hmm", "N");
        json_t *h = conditions_hmm(uvm, dev, version, release);
        json_decref(dev);
        json_decref(uvm);
        assert_non_null(h);
        return h;
}

static const char *why_of(const json_t *h)
{
        return json_string_value(json_object_get(h, "why"));
}

static void test_hmm_usable_says_system_memory_runs(void **state)
{
        json_t *h = hmm_for(true, OPEN_MODULE, "6.8.0-45-generic", 13000);
        assert_true(json_is_true(json_object_get(h, "could_use_hmm")));
        assert_string_equal(json_string_value(json_object_get(h, "kernel_module")), "open");
        assert_string_equal(json_string_value(json_object_get(h, "kernel_release")),
                            "6.8.0-45-generic");
        assert_int_equal(json_integer_value(json_object_get(h, "cuda_driver_version")), 13000);
        assert_non_null(strstr(why_of(h), "system_memory runs"));
        json_decref(h);
}

static void test_hmm_names_every_blocker(void **state)
{
        json_t *h = hmm_for(false, CLOSED_MODULE, "5.15.0-100-generic", 12010);
        const char *why = why_of(h);
        assert_true(json_is_false(json_object_get(h, "could_use_hmm")));
        assert_string_equal(json_string_value(json_object_get(h, "kernel_module")), "proprietary");
        assert_non_null(strstr(why, "no pageableMemoryAccess"));
        assert_non_null(strstr(why, "proprietary kernel module"));
        assert_non_null(strstr(why, "Linux is older than 6.1.24"));
        assert_non_null(strstr(why, "older than 12.2"));
        json_decref(h);
}

static void test_hmm_linux_6_1_needs_patch_24(void **state)
{
        json_t *h = hmm_for(false, OPEN_MODULE, "6.1.23", 13000);
        assert_non_null(strstr(why_of(h), "older than 6.1.24"));
        json_decref(h);
        h = hmm_for(false, OPEN_MODULE, "6.1.24", 13000);
        assert_null(strstr(why_of(h), "Linux"));
        json_decref(h);
}

static void test_hmm_unread_module_is_null_not_a_guess(void **state)
{
        json_t *h = hmm_for(true, NULL, NULL, 13000);
        assert_true(json_is_null(json_object_get(h, "kernel_module")));
        assert_true(json_is_null(json_object_get(h, "kernel_release")));
        json_decref(h);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_uvm_params_keep_integers_and_text),
            cmocka_unit_test(test_missing_module_is_null_with_a_reason),
            cmocka_unit_test(test_hmm_needs_pageable_access_and_hmm_left_on),
            cmocka_unit_test(test_throttle_reasons_in_words),
            cmocka_unit_test(test_gpu_state_without_nvml_or_gpu_says_why),
            cmocka_unit_test(test_stamp_on_a_fake_device_reads_nothing_real),
            cmocka_unit_test(test_hmm_usable_says_system_memory_runs),
            cmocka_unit_test(test_hmm_names_every_blocker),
            cmocka_unit_test(test_hmm_linux_6_1_needs_patch_24),
            cmocka_unit_test(test_hmm_unread_module_is_null_not_a_guess),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
