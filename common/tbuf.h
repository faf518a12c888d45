/* Buffers each thread keeps for work it repeats at a high rate (a job's dump, a result's bytes),
 * so that the allocator is not asked for a fresh one each time; given back when the thread
 * exits. */
#pragma once

#include <stddef.h>

enum tbuf_slot {
        TBUF_DUMP, /* jsonutil.c's dumps */
        TBUF_RAW,  /* jsonraw.c's raw nodes */
        TBUF_COUNT,
};

/* The calling thread's buffer of slot, at least n bytes (its size in *ret_cap, if not NULL), its
 * contents kept when it grows; NULL when out of memory (the old buffer stays). Valid until the
 * next call for the slot on this thread. */
void *tbuf_get(enum tbuf_slot slot, size_t n, size_t *ret_cap);
/* Give the slot's buffer back if it has grown past max bytes: one large dump does not stay with
 * its thread. */
void tbuf_trim(enum tbuf_slot slot, size_t max);
