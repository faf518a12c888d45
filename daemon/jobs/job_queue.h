/* One device's waiting job parts, in the order they must run: priority first (0 high,
 * 1 normal, 2 low), then submission order (job ids are UUIDv7, so they sort by time).
 * Plain data, no locks: the job files hold core_lock around every call. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct queue_entry {
        int prio;
        const char *id; /* the job's id; owned by the job, which outlives its entries */
        void *job;
        size_t part;
};

struct queue {
        struct queue_entry *e; /* e[head] to e[n - 1] are queued, in order */
        size_t head, n, cap;
};

/* Insert in order; an entry equal in priority and id to others goes after them. 0 or -ENOMEM. */
int queue_push(struct queue *q, const struct queue_entry *e);
/* The entry to run next, or NULL. */
const struct queue_entry *queue_peek(const struct queue *q);
/* The entry i places behind the head (0: the head), or NULL past the last. */
const struct queue_entry *queue_at(const struct queue *q, size_t i);
/* Remove the first entry. */
void queue_pop(struct queue *q);
/* Remove the entry of (job, part) if queued; true if found. */
bool queue_remove(struct queue *q, const void *job, size_t part);
size_t queue_len(const struct queue *q);
void queue_free(struct queue *q);
