/* Page visiting orders for the kernel benchmarks. Owns the permutation only; it never touches
 * GPU memory. */
#include <errno.h>
#include <string.h>

#include "bench_access.h"

int bench_access_from_string(const char *s)
{
        if (!s)
                return -EINVAL;
        if (strcmp(s, "sequential") == 0)
                return BENCH_ACCESS_SEQUENTIAL;
        if (strcmp(s, "strided") == 0)
                return BENCH_ACCESS_STRIDED;
        if (strcmp(s, "random") == 0)
                return BENCH_ACCESS_RANDOM;
        return -EINVAL;
}

/* splitmix64: small, seedable, and the same on every platform (rand() is not). */
static uint64_t splitmix64(uint64_t *state)
{
        uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
}

int bench_access_order(enum bench_access access, uint64_t npages, uint64_t stride_bytes,
                       uint64_t seed, uint32_t *order)
{
        if (npages == 0 || npages > UINT32_MAX || !order)
                return -EINVAL;

        switch (access) {
        case BENCH_ACCESS_SEQUENTIAL:
                for (uint64_t i = 0; i < npages; i++)
                        order[i] = (uint32_t)i;
                return 0;
        case BENCH_ACCESS_STRIDED: {
                uint64_t k = stride_bytes / BENCH_PAGE_BYTES, n = 0;
                if (k == 0)
                        k = 1;
                for (uint64_t start = 0; start < k && start < npages; start++)
                        for (uint64_t p = start; p < npages; p += k)
                                order[n++] = (uint32_t)p;
                return 0;
        }
        case BENCH_ACCESS_RANDOM: {
                uint64_t state = seed;
                for (uint64_t i = 0; i < npages; i++)
                        order[i] = (uint32_t)i;
                for (uint64_t i = npages - 1; i > 0; i--) {
                        /* Multiply-shift instead of modulo: no bias worth measuring at 2^32. */
                        uint64_t j =
                            (uint64_t)(((unsigned __int128)splitmix64(&state) * (i + 1)) >> 64);
                        uint32_t t = order[i];
                        order[i] = order[j];
                        order[j] = t;
                }
                return 0;
        }
        }
        return -EINVAL;
}
