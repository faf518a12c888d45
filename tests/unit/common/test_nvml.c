/* The NVML shim's answers where NVML cannot be used, the only ones a machine without a GPU can
 * give. nvml.c is built into this test with NVML_SONAME naming the library to load and
 * EXPECT_WHY the one message nvml_open must give for it: an absent library, or fake_nvml.c's
 * library (init, but no device lookups: a table that cannot resolve). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "nvml.h"

static void test_open_says_why_and_leaves_outputs(void **state)
{
        const struct nvml_api *api = (const struct nvml_api *)state;
        const char *why = NULL;

        assert_int_equal(nvml_open(&api, &why), EXPECT_ERRNO);
        assert_ptr_equal(api, (const struct nvml_api *)state);
        assert_non_null(why);
        assert_true(strncmp(why, EXPECT_WHY, strlen(EXPECT_WHY)) == 0);
}

static void test_open_answers_the_same_again(void **state)
{
        const struct nvml_api *api = NULL;
        const char *a = NULL, *b = NULL;

        assert_int_equal(nvml_open(&api, &a), EXPECT_ERRNO);
        assert_int_equal(nvml_open(&api, &b), EXPECT_ERRNO);
        assert_string_equal(a, b);
        assert_null(api);
}

static void test_close_without_load_is_harmless(void **state)
{
        const struct nvml_api *api = NULL;
        const char *why = NULL;

        nvml_close();
        assert_int_equal(nvml_open(&api, &why), EXPECT_ERRNO);
        assert_true(strncmp(why, EXPECT_WHY, strlen(EXPECT_WHY)) == 0);
        assert_string_equal(nvml_strerror(NVML_SUCCESS), "error");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_open_says_why_and_leaves_outputs),
            cmocka_unit_test(test_open_answers_the_same_again),
            cmocka_unit_test(test_close_without_load_is_harmless),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
