/* tbuf.c: a thread's buffer keeps its bytes as it grows, is its own (not another thread's), is
 * given back past a size, and is freed when its thread ends (the ASan build's leak check would
 * fail this program otherwise). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "tbuf.h"

static void test_a_buffer_keeps_its_bytes_as_it_grows(void **state)
{
        char *p = tbuf_get(TBUF_DUMP, 16, NULL);

        (void)state;
        assert_non_null(p);
        memcpy(p, "0123456789abcdef", 16);
        size_t cap = 0;
        p = tbuf_get(TBUF_DUMP, 100000, &cap);
        assert_non_null(p);
        assert_true(cap >= 100000);
        assert_memory_equal(p, "0123456789abcdef", 16);
        p[99999] = 'z'; /* all of it is there */
}

static void test_slots_are_apart(void **state)
{
        char *a = tbuf_get(TBUF_DUMP, 8, NULL), *b = tbuf_get(TBUF_RAW, 8, NULL);

        (void)state;
        assert_non_null(a);
        assert_non_null(b);
        assert_ptr_not_equal(a, b);
}

static void test_trim_gives_back_only_past_max(void **state)
{
        (void)state;
        tbuf_trim(TBUF_RAW, 0);
        char *p = tbuf_get(TBUF_RAW, 4096, NULL);
        assert_non_null(p);
        tbuf_trim(TBUF_RAW, 4096);
        assert_ptr_equal(tbuf_get(TBUF_RAW, 4096, NULL), p); /* kept: not past max */
        p = tbuf_get(TBUF_RAW, 1 << 20, NULL);
        tbuf_trim(TBUF_RAW, 4096);
        /* Given back: the next one is a fresh 4 KiB buffer, usable at once. */
        p = tbuf_get(TBUF_RAW, 10, NULL);
        assert_non_null(p);
        memset(p, 1, 4096);
}

static void *use_buffers(void *userdata)
{
        char **ret = userdata;

        *ret = tbuf_get(TBUF_DUMP, 64 * 1024, NULL);
        if (*ret)
                memset(*ret, 7, 64 * 1024);
        (void)tbuf_get(TBUF_RAW, 8192, NULL);
        return NULL;
}

static void test_threads_have_their_own_and_leave_none_behind(void **state)
{
        char *mine = tbuf_get(TBUF_DUMP, 64, NULL), *theirs = NULL;
        pthread_t t;

        (void)state;
        assert_int_equal(pthread_create(&t, NULL, use_buffers, &theirs), 0);
        assert_int_equal(pthread_join(t, NULL), 0);
        assert_non_null(theirs);
        assert_ptr_not_equal(theirs, mine);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_a_buffer_keeps_its_bytes_as_it_grows),
            cmocka_unit_test(test_slots_are_apart),
            cmocka_unit_test(test_trim_gives_back_only_past_max),
            cmocka_unit_test(test_threads_have_their_own_and_leave_none_behind),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
