/* job_queue.c: a device's waiting parts run by priority, then in submission order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "job_queue.h"

static struct queue_entry entry(int prio, const char *id, size_t part)
{
        return (struct queue_entry){.prio = prio, .id = id, .job = (void *)id, .part = part};
}

static void push(struct queue *q, int prio, const char *id, size_t part)
{
        struct queue_entry e = entry(prio, id, part);
        assert_int_equal(queue_push(q, &e), 0);
}

static void test_empty_queue_has_nothing_to_run(void **state)
{
        struct queue q = {0};
        assert_null(queue_peek(&q));
        queue_pop(&q); /* harmless */
        assert_int_equal(queue_len(&q), 0);
}

static void test_same_priority_runs_in_submission_order(void **state)
{
        struct queue q = {0};
        push(&q, 1, "0190000000-b", 0);
        push(&q, 1, "0190000000-a", 0);
        push(&q, 1, "0190000000-c", 0);
        assert_string_equal(queue_peek(&q)->id, "0190000000-a");
        queue_pop(&q);
        assert_string_equal(queue_peek(&q)->id, "0190000000-b");
        queue_pop(&q);
        assert_string_equal(queue_peek(&q)->id, "0190000000-c");
        queue_free(&q);
}

static void test_higher_priority_jumps_ahead_of_older_jobs(void **state)
{
        struct queue q = {0};
        push(&q, 1, "01-a", 0);
        push(&q, 2, "01-b", 0);
        push(&q, 0, "01-z", 0);
        assert_string_equal(queue_peek(&q)->id, "01-z");
        queue_pop(&q);
        assert_string_equal(queue_peek(&q)->id, "01-a");
        queue_pop(&q);
        assert_string_equal(queue_peek(&q)->id, "01-b");
        queue_free(&q);
}

static void test_low_priority_waits_behind_newer_normal_jobs(void **state)
{
        struct queue q = {0};
        push(&q, 2, "01-a", 0);
        push(&q, 1, "01-b", 0);
        assert_string_equal(queue_peek(&q)->id, "01-b");
        queue_free(&q);
}

static void test_remove_takes_out_only_that_part(void **state)
{
        struct queue q = {0};
        push(&q, 1, "01-a", 0);
        push(&q, 1, "01-b", 0);
        push(&q, 1, "01-b", 1);
        assert_true(queue_remove(&q, "01-b", 0));
        assert_false(queue_remove(&q, "01-b", 0));
        assert_int_equal(queue_len(&q), 2);
        queue_pop(&q);
        assert_string_equal(queue_peek(&q)->id, "01-b");
        assert_int_equal(queue_peek(&q)->part, 1);
        queue_free(&q);
}

static void test_many_entries_stay_ordered(void **state)
{
        struct queue q = {0};
        static char ids[300][8];
        for (int i = 299; i >= 0; i--) {
                snprintf(ids[i], sizeof(ids[i]), "%04d", i);
                push(&q, i % 3, ids[i], 0);
        }
        int last_prio = -1;
        const char *last_id = "";
        while (queue_peek(&q)) {
                const struct queue_entry *e = queue_peek(&q);
                assert_true(e->prio >= last_prio);
                if (e->prio == last_prio)
                        assert_true(strcmp(e->id, last_id) > 0);
                last_prio = e->prio;
                last_id = e->id;
                queue_pop(&q);
        }
        queue_free(&q);
}

/* Pops move a head rather than the entries; pushes, pops and removes mixed must still give
 * the order a sorted list gives (a model of (prio, id) pairs, kept sorted by hand). */
static void test_pops_pushes_and_removes_mixed_keep_the_order(void **state)
{
        static char ids[400][8];
        int model_prio[400], model_id[400];
        size_t m = 0, next = 0;
        struct queue q = {0};
        unsigned seed = 7;

        (void)state;
        for (int step = 0; step < 2000; step++) {
                seed = seed * 1103515245u + 12345u;
                unsigned op = (seed >> 16) % 4;
                if ((op <= 1 && next < 400) || m == 0) {
                        if (next == 400)
                                break;
                        int prio = (int)((seed >> 8) % 3);
                        snprintf(ids[next], sizeof(ids[next]), "%05zu", next);
                        push(&q, prio, ids[next], 0);
                        size_t at = m;
                        while (at > 0 && (model_prio[at - 1] > prio))
                                at--;
                        memmove(&model_prio[at + 1], &model_prio[at], (m - at) * sizeof(int));
                        memmove(&model_id[at + 1], &model_id[at], (m - at) * sizeof(int));
                        model_prio[at] = prio;
                        model_id[at] = (int)next++;
                        m++;
                } else if (op == 2) {
                        assert_string_equal(queue_peek(&q)->id, ids[model_id[0]]);
                        queue_pop(&q);
                        memmove(&model_prio[0], &model_prio[1], (m - 1) * sizeof(int));
                        memmove(&model_id[0], &model_id[1], (m - 1) * sizeof(int));
                        m--;
                } else {
                        size_t k = (seed >> 4) % m;
                        assert_true(queue_remove(&q, ids[model_id[k]], 0));
                        memmove(&model_prio[k], &model_prio[k + 1], (m - k - 1) * sizeof(int));
                        memmove(&model_id[k], &model_id[k + 1], (m - k - 1) * sizeof(int));
                        m--;
                }
                assert_int_equal(queue_len(&q), m);
                if (m)
                        assert_string_equal(queue_peek(&q)->id, ids[model_id[0]]);
                else
                        assert_null(queue_peek(&q));
        }
        for (size_t k = 0; k < m; k++) {
                assert_string_equal(queue_peek(&q)->id, ids[model_id[k]]);
                queue_pop(&q);
        }
        assert_null(queue_peek(&q));
        queue_free(&q);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_empty_queue_has_nothing_to_run),
            cmocka_unit_test(test_pops_pushes_and_removes_mixed_keep_the_order),
            cmocka_unit_test(test_same_priority_runs_in_submission_order),
            cmocka_unit_test(test_higher_priority_jumps_ahead_of_older_jobs),
            cmocka_unit_test(test_low_priority_waits_behind_newer_normal_jobs),
            cmocka_unit_test(test_remove_takes_out_only_that_part),
            cmocka_unit_test(test_many_entries_stay_ordered),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
