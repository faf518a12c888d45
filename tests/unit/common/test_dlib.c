/* dlib_open and dlib_resolve: the first name that loads, fallbacks, optional entry points, and a
 * failed resolve that names the entry point and writes nothing. FAKE_NVML is the path of
 * fake_nvml.c built as a library (nvmlInit_v2, nvmlShutdown, nvmlErrorString). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "dlib.h"
#include "util.h"

static void test_open_absent_says_why_and_leaves_handle(void **state)
{
        const char *const names[] = {"libumd-absent-a.so.1", "libumd-absent-b.so.1"};
        char why[DLIB_WHY_MAX] = "";
        void *h = (void *)names;

        assert_int_equal(dlib_open(names, ELEMENTSOF(names), &h, why, sizeof(why)), -ENOENT);
        assert_ptr_equal(h, (void *)names);
        /* the last name's dlerror(): the file and the reason */
        assert_non_null(strstr(why, "libumd-absent-b.so.1"));
        assert_non_null(strstr(why, "No such file"));
}

static void test_open_takes_first_that_loads(void **state)
{
        const char *const names[] = {"libumd-absent-a.so.1", FAKE_NVML};
        char why[DLIB_WHY_MAX] = "";
        void *h = NULL;

        assert_int_equal(dlib_open(names, ELEMENTSOF(names), &h, why, sizeof(why)), 0);
        assert_non_null(h);
        assert_string_equal(why, "");
}

static void test_resolve_fallback_and_optional(void **state)
{
        const char *const names[] = {FAKE_NVML};
        char why[DLIB_WHY_MAX] = "";
        void *h = NULL, *init = NULL, *err = NULL, *absent = (void *)names;
        const struct dlib_sym syms[] = {
            {"nvmlInit_v9", "nvmlInit_v2", &init, false},
            {"nvmlErrorString", NULL, &err, false},
            {"nvmlDeviceGetHandleByUUID", NULL, &absent, true},
        };

        assert_int_equal(dlib_open(names, 1, &h, why, sizeof(why)), 0);
        assert_int_equal(dlib_resolve(h, syms, ELEMENTSOF(syms), why, sizeof(why)), 0);
        assert_non_null(init);
        assert_non_null(err);
        assert_null(absent);
}

static void test_resolve_names_missing_symbol_and_writes_nothing(void **state)
{
        const char *const names[] = {FAKE_NVML};
        char why[DLIB_WHY_MAX] = "";
        void *h = NULL, *init = NULL, *uuid = NULL;
        const struct dlib_sym syms[] = {
            {"nvmlInit_v2", NULL, &init, false},
            {"nvmlDeviceGetHandleByUUID", NULL, &uuid, false},
        };

        assert_int_equal(dlib_open(names, 1, &h, why, sizeof(why)), 0);
        assert_int_equal(dlib_resolve(h, syms, ELEMENTSOF(syms), why, sizeof(why)), -ENOTSUP);
        assert_string_equal(why, "missing nvmlDeviceGetHandleByUUID");
        assert_null(init); /* found, but a table is whole or untouched */
        assert_null(uuid);
}

static void test_resolve_refuses_oversized_table(void **state)
{
        const char *const names[] = {FAKE_NVML};
        struct dlib_sym syms[DLIB_SYMS_MAX + 1];
        char why[DLIB_WHY_MAX] = "";
        void *h = NULL, *p = NULL;

        for (size_t i = 0; i < ELEMENTSOF(syms); i++)
                syms[i] = (struct dlib_sym){"nvmlInit_v2", NULL, &p, false};
        assert_int_equal(dlib_open(names, 1, &h, why, sizeof(why)), 0);
        assert_int_equal(dlib_resolve(h, syms, ELEMENTSOF(syms), why, sizeof(why)), -E2BIG);
        assert_null(p);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_open_absent_says_why_and_leaves_handle),
            cmocka_unit_test(test_open_takes_first_that_loads),
            cmocka_unit_test(test_resolve_fallback_and_optional),
            cmocka_unit_test(test_resolve_names_missing_symbol_and_writes_nothing),
            cmocka_unit_test(test_resolve_refuses_oversized_table),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
