/* The order in which kernels visit the pages of a buffer (access = sequential | strided |
 * random). Plain C so the CPU unit tests check it; the .cu files upload the result. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define BENCH_PAGE_BYTES 4096u

enum bench_access {
        BENCH_ACCESS_SEQUENTIAL,
        BENCH_ACCESS_STRIDED,
        BENCH_ACCESS_RANDOM,
};

/* "sequential" | "strided" | "random" → enum, or -EINVAL. */
int bench_access_from_string(const char *s);

/* Fill order[0..npages) with a permutation of 0..npages-1:
 *  sequential: 0, 1, 2, ...
 *  strided:    0, k, 2k, ..., then 1, 1+k, ... with k = stride_bytes / page (at least 1), so
 *              consecutive pages are stride_bytes apart and every page is still visited once;
 *  random:     a Fisher-Yates shuffle seeded by seed (same seed, same order).
 * 0, or -EINVAL (npages 0 or above UINT32_MAX, unknown access). */
int bench_access_order(enum bench_access access, uint64_t npages, uint64_t stride_bytes,
                       uint64_t seed, uint32_t *order);
