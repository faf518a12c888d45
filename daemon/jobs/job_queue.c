/* A device's queue as a sorted array: queues are short (bounded by queue_capacity_per_device)
 * and read far more often than written, so ordered insertion beats a heap for clarity. */
#include "job_queue.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int entry_cmp(const struct queue_entry *a, const struct queue_entry *b)
{
        if (a->prio != b->prio)
                return a->prio < b->prio ? -1 : 1;
        return strcasecmp(a->id, b->id);
}

int queue_push(struct queue *q, const struct queue_entry *e)
{
        if (q->n == q->cap && q->head > 0) {
                /* The room popped entries left at the front, before growing. */
                memmove(&q->e[0], &q->e[q->head], (q->n - q->head) * sizeof(*q->e));
                q->n -= q->head;
                q->head = 0;
        }
        if (q->n == q->cap) {
                size_t nc = q->cap ? q->cap * 2 : 16;
                struct queue_entry *n = realloc(q->e, nc * sizeof(*n));
                if (!n)
                        return -ENOMEM;
                q->e = n;
                q->cap = nc;
        }
        /* Binary search for the first entry that sorts after e; most go last (ids grow with
         * time, and recovery pushes thousands in order), so that is looked at first. */
        size_t lo = q->head, hi = q->n;
        if (q->n > q->head && entry_cmp(&q->e[q->n - 1], e) <= 0)
                lo = q->n;
        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (entry_cmp(&q->e[mid], e) <= 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        memmove(&q->e[lo + 1], &q->e[lo], (q->n - lo) * sizeof(*q->e));
        q->e[lo] = *e;
        q->n++;
        return 0;
}

const struct queue_entry *queue_peek(const struct queue *q)
{
        return q->head < q->n ? &q->e[q->head] : NULL;
}

const struct queue_entry *queue_at(const struct queue *q, size_t i)
{
        return i < q->n - q->head ? &q->e[q->head + i] : NULL;
}

/* The head moves instead of the entries: a dispatch from a queue thousands long would
 * otherwise move all of them. */
static void advance_head(struct queue *q)
{
        if (++q->head == q->n)
                q->head = q->n = 0;
}

void queue_pop(struct queue *q)
{
        if (q->head < q->n)
                advance_head(q);
}

bool queue_remove(struct queue *q, const void *job, size_t part)
{
        for (size_t i = q->head; i < q->n; i++)
                if (q->e[i].job == job && q->e[i].part == part) {
                        if (i == q->head) {
                                advance_head(q);
                                return true;
                        }
                        memmove(&q->e[i], &q->e[i + 1], (q->n - i - 1) * sizeof(*q->e));
                        q->n--;
                        return true;
                }
        return false;
}

size_t queue_len(const struct queue *q)
{
        return q->n - q->head;
}

void queue_free(struct queue *q)
{
        free(q->e);
        *q = (struct queue){0};
}
