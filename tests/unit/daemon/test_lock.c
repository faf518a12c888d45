/* lock.c: what a holder of core_lock asks to run once it lets go (core_after_unlock) runs after
 * the release, once, in the order asked; asked without the lock, it runs at once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "lock.h"

static unsigned runs;
static bool held_when_run;

static void note_run(void)
{
        runs++;
        held_when_run = core_lock_held();
}

static void test_a_wake_asked_under_the_lock_runs_after_its_release(void **state)
{
        (void)state;
        runs = 0;
        core_lock();
        core_after_unlock(note_run);
        assert_int_equal(runs, 0);
        core_unlock();
        assert_int_equal(runs, 1);
        assert_false(held_when_run);
}

static void test_a_wake_asked_twice_under_one_hold_runs_once(void **state)
{
        (void)state;
        runs = 0;
        core_lock();
        core_after_unlock(note_run);
        core_after_unlock(note_run);
        core_unlock();
        assert_int_equal(runs, 1);
        /* And not again at the next release. */
        core_lock();
        core_unlock();
        assert_int_equal(runs, 1);
}

static char order[8];
static size_t n_order;

static void note_a(void)
{
        order[n_order++] = 'a';
}

static void note_b(void)
{
        order[n_order++] = 'b';
}

static void test_two_asked_under_one_hold_both_run_in_the_order_asked(void **state)
{
        (void)state;
        n_order = 0;
        core_lock();
        core_after_unlock(note_b);
        core_after_unlock(note_a);
        core_after_unlock(note_b);
        core_unlock();
        assert_int_equal(n_order, 2);
        assert_memory_equal(order, "ba", 2);
}

static void test_a_wake_asked_without_the_lock_runs_at_once(void **state)
{
        (void)state;
        runs = 0;
        core_after_unlock(note_run);
        assert_int_equal(runs, 1);
        assert_false(held_when_run);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_a_wake_asked_under_the_lock_runs_after_its_release),
            cmocka_unit_test(test_a_wake_asked_twice_under_one_hold_runs_once),
            cmocka_unit_test(test_two_asked_under_one_hold_both_run_in_the_order_asked),
            cmocka_unit_test(test_a_wake_asked_without_the_lock_runs_at_once),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
