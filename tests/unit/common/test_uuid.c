/* UUIDv7 ids: format, version and variant bits, and strict ordering within a process. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "uuid.h"

static void test_format_is_36_lowercase_hex_with_dashes(void **state)
{
        char id[UUID_STRING_MAX];

        assert_int_equal(uuid7_generate(id), 0);
        assert_int_equal(strlen(id), 36);
        for (size_t i = 0; i < 36; i++) {
                if (i == 8 || i == 13 || i == 18 || i == 23)
                        assert_int_equal(id[i], '-');
                else
                        assert_non_null(strchr("0123456789abcdef", id[i]));
        }
        assert_true(uuid_is_valid(id));
}

static void test_version_and_variant_bits(void **state)
{
        for (int i = 0; i < 1000; i++) {
                char id[UUID_STRING_MAX];

                assert_int_equal(uuid7_generate(id), 0);
                assert_int_equal(id[14], '7');
                assert_non_null(strchr("89ab", id[19]));
        }
}

static void test_timestamp_in_first_48_bits(void **state)
{
        char id[UUID_STRING_MAX];

        assert_int_equal(uuid7_generate_at(0x0123456789abull, id), 0);
        assert_memory_equal(id, "01234567-89ab-7", 15);
        assert_int_equal(uuid7_generate_at(1ull << 48, id), -ERANGE);
}

static void test_increasing_across_many_calls_in_one_ms(void **state)
{
        enum { N = 20000 };
        char(*ids)[UUID_STRING_MAX] = calloc(N, UUID_STRING_MAX);
        int same_ms = 0;

        assert_non_null(ids);
        for (int i = 0; i < N; i++)
                assert_int_equal(uuid7_generate(ids[i]), 0);
        for (int i = 1; i < N; i++) {
                assert_true(strcmp(ids[i - 1], ids[i]) < 0);
                /* first 13 chars hold the 48-bit millisecond (with one dash) */
                if (memcmp(ids[i - 1], ids[i], 13) == 0)
                        same_ms++;
        }
        /* Otherwise this test did not exercise the same-millisecond path. */
        assert_true(same_ms > 100);
        free(ids);
}

enum { THREADS = 4, PER_THREAD = 5000 };
static char thread_ids[THREADS * PER_THREAD][UUID_STRING_MAX];

static void *gen_thread(void *arg)
{
        size_t base = (size_t)(uintptr_t)arg * PER_THREAD;

        for (size_t i = 0; i < PER_THREAD; i++)
                if (uuid7_generate(thread_ids[base + i]) < 0)
                        return (void *)1;
        return NULL;
}

static int cmp_ids(const void *a, const void *b)
{
        return strcmp(a, b);
}

static void test_unique_across_threads(void **state)
{
        pthread_t t[THREADS];

        for (uintptr_t i = 0; i < THREADS; i++)
                assert_int_equal(pthread_create(&t[i], NULL, gen_thread, (void *)i), 0);
        for (int i = 0; i < THREADS; i++) {
                void *res;

                assert_int_equal(pthread_join(t[i], &res), 0);
                assert_null(res);
        }
        /* each thread's own ids are increasing */
        for (int i = 0; i < THREADS; i++)
                for (int j = 1; j < PER_THREAD; j++)
                        assert_true(strcmp(thread_ids[i * PER_THREAD + j - 1],
                                           thread_ids[i * PER_THREAD + j]) < 0);
        qsort(thread_ids, THREADS * PER_THREAD, UUID_STRING_MAX, cmp_ids);
        for (int i = 1; i < THREADS * PER_THREAD; i++)
                assert_string_not_equal(thread_ids[i - 1], thread_ids[i]);
}

/* Random bytes come from a pool each thread fills; a forked child does not reuse its parent's:
 * the ids both make next, for the same millisecond, differ. */
static void test_a_forked_child_draws_its_own_random_bytes(void **state)
{
        char first[UUID_STRING_MAX], mine[UUID_STRING_MAX], theirs[UUID_STRING_MAX] = "";
        int fds[2];
        pid_t pid;
        int status;

        assert_int_equal(uuid7_generate_at(1000, first), 0); /* the pool is filled */
        assert_int_equal(pipe(fds), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                char id[UUID_STRING_MAX];

                close(fds[0]);
                _exit(uuid7_generate_at(1000, id) == 0 &&
                              write(fds[1], id, sizeof(id)) == (ssize_t)sizeof(id)
                          ? 0
                          : 1);
        }
        close(fds[1]);
        assert_int_equal(read(fds[0], theirs, sizeof(theirs)), (ssize_t)sizeof(theirs));
        close(fds[0]);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        assert_int_equal(uuid7_generate_at(1000, mine), 0);
        assert_true(uuid_is_valid(theirs));
        assert_string_not_equal(mine, theirs);
        assert_string_not_equal(mine, first);
}

static void test_is_valid_rejects_malformed(void **state)
{
        assert_true(uuid_is_valid("0190f5a2-7c3d-7abc-8def-0123456789ab"));
        assert_true(uuid_is_valid("0190F5A2-7C3D-7ABC-8DEF-0123456789AB"));
        assert_true(uuid_is_valid("00000000-0000-0000-0000-000000000000"));
        assert_false(uuid_is_valid(NULL));
        assert_false(uuid_is_valid(""));
        assert_false(uuid_is_valid("0190f5a2-7c3d-7abc-8def-0123456789a"));
        assert_false(uuid_is_valid("0190f5a2-7c3d-7abc-8def-0123456789abc"));
        assert_false(uuid_is_valid("0190f5a27c3d-7abc-8def-0123456789ab0"));
        assert_false(uuid_is_valid("0190f5a2-7c3d-7abc-8def-0123456789ag"));
        assert_false(uuid_is_valid("../../etc/passwd-0000-0000-00000000"));
        assert_false(uuid_is_valid("{190f5a2-7c3d-7abc-8def-0123456789a}"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_format_is_36_lowercase_hex_with_dashes),
            cmocka_unit_test(test_version_and_variant_bits),
            cmocka_unit_test(test_timestamp_in_first_48_bits),
            cmocka_unit_test(test_increasing_across_many_calls_in_one_ms),
            cmocka_unit_test(test_unique_across_threads),
            cmocka_unit_test(test_a_forked_child_draws_its_own_random_bytes),
            cmocka_unit_test(test_is_valid_rejects_malformed),
        };

        return cmocka_run_group_tests_name("uuid", tests, NULL, NULL);
}
