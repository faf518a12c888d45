/* lock.c: what a holder of core_lock asks to run once it lets go (core_after_unlock) runs after
 * the release, once, in the order asked; asked without the lock, it runs at once. Work deferred
 * under the lock (core_defer) runs at once when the lock is free, else by its holder once it
 * lets go, never lost, each once, under the lock, in the order asked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

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

struct counted {
        struct core_deferred d;
        size_t seq;
};

static size_t deferred_runs, deferred_unheld;
static size_t deferred_seen[4];

static void counted_run(struct core_deferred *d)
{
        struct counted *c = (struct counted *)d;

        deferred_unheld += !core_lock_held();
        if (c->seq < 4)
                deferred_seen[deferred_runs] = c->seq;
        deferred_runs++;
        free(c);
}

static struct core_deferred *counted(size_t seq)
{
        struct counted *c = calloc(1, sizeof(*c));

        assert_non_null(c);
        c->d.run = counted_run;
        c->seq = seq;
        return &c->d;
}

static void test_work_deferred_with_the_lock_free_runs_at_once_under_it(void **state)
{
        (void)state;
        deferred_runs = deferred_unheld = 0;
        core_defer(counted(0));
        assert_int_equal(deferred_runs, 1);
        assert_int_equal(deferred_unheld, 0);
        assert_false(core_lock_held());
}

static void test_work_deferred_by_the_holder_runs_after_its_release_in_order(void **state)
{
        (void)state;
        deferred_runs = deferred_unheld = 0;
        core_lock();
        core_defer(counted(1));
        core_defer(counted(2));
        core_defer(counted(3));
        assert_int_equal(deferred_runs, 0);
        core_unlock();
        assert_int_equal(deferred_runs, 3);
        assert_int_equal(deferred_unheld, 0);
        assert_int_equal(deferred_seen[0], 1);
        assert_int_equal(deferred_seen[1], 2);
        assert_int_equal(deferred_seen[2], 3);
        assert_false(core_lock_held());
}

static atomic_bool holding, release;

static void *hold_main(void *arg)
{
        (void)arg;
        core_lock();
        atomic_store(&holding, true);
        while (!atomic_load(&release))
                ;
        core_unlock();
        return NULL;
}

/* Asked while another thread holds the lock: the asker goes on at once, and the holder runs it
 * when it lets go. */
static void test_work_deferred_while_another_holds_runs_in_that_holder_s_unlock(void **state)
{
        pthread_t th;

        (void)state;
        deferred_runs = deferred_unheld = 0;
        atomic_store(&holding, false);
        atomic_store(&release, false);
        assert_int_equal(pthread_create(&th, NULL, hold_main, NULL), 0);
        while (!atomic_load(&holding))
                ;
        core_defer(counted(0));
        assert_int_equal(deferred_runs, 0); /* not waited for */
        atomic_store(&release, true);
        assert_int_equal(pthread_join(th, NULL), 0);
        assert_int_equal(deferred_runs, 1);
        assert_int_equal(deferred_unheld, 0);
}

#define STRESS_THREADS 6
#define STRESS_EACH    20000

static void stress_run(struct core_deferred *d)
{
        deferred_unheld += !core_lock_held();
        deferred_runs++; /* under the lock: no race */
        free(d);
}

static void *stress_main(void *arg)
{
        bool defers = (uintptr_t)arg % 2 == 0;

        for (size_t i = 0; i < STRESS_EACH; i++) {
                if (defers) {
                        struct core_deferred *d = calloc(1, sizeof(*d));

                        assert_non_null(d);
                        d->run = stress_run;
                        core_defer(d);
                } else {
                        core_lock();
                        core_unlock();
                }
        }
        return NULL;
}

/* Askers and holders racing: every piece of work runs, once, under the lock, with none left
 * queued once they are all done. */
static void test_deferred_work_is_never_left_behind_by_racing_holders(void **state)
{
        pthread_t th[STRESS_THREADS];

        (void)state;
        deferred_runs = deferred_unheld = 0;
        for (uintptr_t k = 0; k < STRESS_THREADS; k++)
                assert_int_equal(pthread_create(&th[k], NULL, stress_main, (void *)k), 0);
        for (size_t k = 0; k < STRESS_THREADS; k++)
                assert_int_equal(pthread_join(th[k], NULL), 0);
        assert_int_equal(deferred_runs, (size_t)(STRESS_THREADS / 2) * STRESS_EACH);
        assert_int_equal(deferred_unheld, 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_a_wake_asked_under_the_lock_runs_after_its_release),
            cmocka_unit_test(test_a_wake_asked_twice_under_one_hold_runs_once),
            cmocka_unit_test(test_two_asked_under_one_hold_both_run_in_the_order_asked),
            cmocka_unit_test(test_a_wake_asked_without_the_lock_runs_at_once),
            cmocka_unit_test(test_work_deferred_with_the_lock_free_runs_at_once_under_it),
            cmocka_unit_test(test_work_deferred_by_the_holder_runs_after_its_release_in_order),
            cmocka_unit_test(test_work_deferred_while_another_holds_runs_in_that_holder_s_unlock),
            cmocka_unit_test(test_deferred_work_is_never_left_behind_by_racing_holders),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
