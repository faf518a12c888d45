/* Which of the queued changes the store's next batch takes (store_writer_take_batch, in
 * store_writer.c), on queues made by hand: no store is opened, no thread runs. */
#include "../common/testutil.h"

#include <ctype.h>
#include <pthread.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <cmocka.h>
#include <sqlite3.h>
#include <unistd.h>

#include "fileio.h"
#include "jsonraw.h"
#include "jsonutil.h"
#include "log.h"
#include "store.h"
#include "store_internal.h"
#include "store_fixture.h"
#include "uuid.h"

/* store_writer_take_batch on a queue made by hand: tickets of jobs "a".."e" queued at the given
 * monotonic ms, waited where the name is upper case. */
struct queue {
        struct store s;
        struct store_ticket t[8];
        size_t n;
};

static void queue_add(struct queue *q, char job, uint64_t queued_ms)
{
        struct store_ticket *t = &q->t[q->n++];

        assert_true(q->n <= 8);
        snprintf(t->row.id, sizeof(t->row.id), "%c", (char)(job | 0x20));
        t->waited = job != (job | 0x20);
        t->queued_ms = queued_ms;
        if (q->s.tail)
                q->s.tail->next = t;
        else {
                q->s.head = t;
                q->s.head_ms = queued_ms;
        }
        q->s.tail = t;
}

/* The list as "a@70 b@95": what it holds, in order. */
static void list_is(const struct store_ticket *l, const char *want)
{
        char got[128] = "";
        size_t len = 0;

        for (; l; l = l->next)
                len += (size_t)snprintf(got + len, sizeof(got) - len, "%s%s@%llu", len ? " " : "",
                                        l->row.id, (unsigned long long)l->queued_ms);
        assert_string_equal(got, want);
}

static void test_a_batch_nobody_waits_for_takes_every_change(void **state)
{
        struct queue q = {0};

        (void)state;
        queue_add(&q, 'a', 95);
        queue_add(&q, 'b', 99);
        list_is(store_writer_take_batch(&q.s, 100), "a@95 b@99");
        assert_null(q.s.head);
        assert_null(q.s.tail);
}

static void test_a_waited_batch_keeps_a_jobs_changes_in_order(void **state)
{
        struct queue q = {0};

        (void)state;
        q.s.urgent = true;
        queue_add(&q, 'a', 70); /* due: goes, though its job's next change stays */
        queue_add(&q, 'a', 95);
        queue_add(&q, 'B', 99);
        list_is(store_writer_take_batch(&q.s, 100), "a@70 b@99");
        list_is(q.s.head, "a@95");
        assert_int_equal(q.s.head_ms, 95);
}

static void test_a_waited_change_takes_its_jobs_earlier_ones(void **state)
{
        struct queue q = {0};

        (void)state;
        q.s.urgent = true;
        queue_add(&q, 'a', 95);
        queue_add(&q, 'c', 96);
        queue_add(&q, 'A', 99);
        list_is(store_writer_take_batch(&q.s, 100), "a@95 a@99");
        list_is(q.s.head, "c@96");
}

static void test_a_waited_batch_leaves_changes_younger_than_lazy(void **state)
{
        const uint64_t now = 1000;
        struct queue q = {0};
        char want[64], left[32];

        (void)state;
        q.s.urgent = true;
        queue_add(&q, 'e', now - STORE_LAZY_MS);
        queue_add(&q, 'd', now - STORE_LAZY_MS + 1); /* a millisecond short of due */
        queue_add(&q, 'B', now - 1);
        snprintf(want, sizeof(want), "e@%d b@%d", (int)now - STORE_LAZY_MS, (int)now - 1);
        snprintf(left, sizeof(left), "d@%d", (int)now - STORE_LAZY_MS + 1);
        list_is(store_writer_take_batch(&q.s, now), want);
        list_is(q.s.head, left);
}

static void test_a_sync_takes_every_change(void **state)
{
        struct queue q = {0};

        (void)state;
        q.s.flush_all = true;
        queue_add(&q, 'a', 99);
        queue_add(&q, 'b', 100);
        list_is(store_writer_take_batch(&q.s, 100), "a@99 b@100");
        assert_null(q.s.head);
        assert_false(q.s.flush_all);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_a_batch_nobody_waits_for_takes_every_change),
            cmocka_unit_test(test_a_waited_batch_keeps_a_jobs_changes_in_order),
            cmocka_unit_test(test_a_waited_change_takes_its_jobs_earlier_ones),
            cmocka_unit_test(test_a_waited_batch_leaves_changes_younger_than_lazy),
            cmocka_unit_test(test_a_sync_takes_every_change),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
