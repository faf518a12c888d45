/* The cuBLAS loader's answers where cuBLAS cannot be used (issue 60): cublas.c is built into
 * this test with CUBLAS_SONAMES naming the library to load and EXPECT_WHY the message
 * cublas_open must give: an absent library, or a library without cuBLAS's entry points (the
 * fake NVML). A worker without libcublas answers train_step with this message, never a crash. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "cublas.h"

static void test_open_says_why_and_leaves_the_table(void **state)
{
        const struct cublas_api *api = NULL;
        const char *why = NULL;

        (void)state;
        assert_int_equal(cublas_open(&api, &why), EXPECT_ERRNO);
        assert_null(api);
        assert_non_null(why);
        assert_true(strncmp(why, EXPECT_WHY, strlen(EXPECT_WHY)) == 0);
}

static void test_open_answers_the_same_again(void **state)
{
        const struct cublas_api *api = NULL;
        const char *a = NULL, *b = NULL;

        (void)state;
        assert_int_equal(cublas_open(&api, &a), EXPECT_ERRNO);
        assert_int_equal(cublas_open(&api, &b), EXPECT_ERRNO);
        assert_string_equal(a, b);
}

static void test_strerror_without_the_library_names_the_number(void **state)
{
        char buf[32];

        (void)state;
        assert_string_equal(cublas_strerror(NULL, 7, buf, sizeof(buf)), "cuBLAS error 7");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_open_says_why_and_leaves_the_table),
            cmocka_unit_test(test_open_answers_the_same_again),
            cmocka_unit_test(test_strerror_without_the_library_names_the_number),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
