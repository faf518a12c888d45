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

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_empty_queue_has_nothing_to_run),
            cmocka_unit_test(test_same_priority_runs_in_submission_order),
            cmocka_unit_test(test_higher_priority_jumps_ahead_of_older_jobs),
            cmocka_unit_test(test_low_priority_waits_behind_newer_normal_jobs),
            cmocka_unit_test(test_remove_takes_out_only_that_part),
            cmocka_unit_test(test_many_entries_stay_ordered),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
