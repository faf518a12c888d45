/* embedding_gather's gather kernel and its row choices (issue 60), shared with the plain
 * reference program (tests/gpu/reference_embed.cu). No umd code: CUDA and the C library. */
#pragma once

#include <math.h>
#include <stdint.h>
#include <vector>

#define EMB_THREADS      256
#define EMB_ROW_ALIGN    16
#define EMB_MULT_DEFAULT 2654435761ull /* Knuth's multiplicative hash: scatters hot rows */

/* One warp per gathered row, 16 bytes a lane at a time: out[i] = table[idx[i]]. With a cache,
 * a row whose slot (map[row] >= 0) is held comes from the cache instead. */
__global__ static void k_emb_gather(const uint8_t *table, const uint32_t *idx, uint8_t *out,
                                    uint32_t n, uint32_t row_bytes, const int32_t *map,
                                    const uint8_t *cache)
{
        uint64_t warp = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32;
        uint64_t warps = (uint64_t)gridDim.x * blockDim.x / 32;
        unsigned lane = threadIdx.x % 32;

        for (uint64_t i = warp; i < n; i += warps) {
                uint32_t row = idx[i];
                int32_t slot = map ? map[row] : -1;
                const uint8_t *src = slot >= 0 ? cache + (uint64_t)slot * row_bytes
                                               : table + (uint64_t)row * row_bytes;
                uint8_t *dst = out + i * row_bytes;
                for (uint32_t off = lane * 16; off < row_bytes; off += 32 * 16)
                        *(uint4 *)(dst + off) = *(const uint4 *)(src + off);
        }
}

static inline uint64_t emb_gcd(uint64_t a, uint64_t b)
{
        while (b) {
                uint64_t t = a % b;
                a = b;
                b = t;
        }
        return a;
}

/* The multiplier that maps popularity ranks to rows: a bijection on [0, rows). */
static inline uint64_t emb_mult(uint64_t rows)
{
        uint64_t m = EMB_MULT_DEFAULT % rows;
        if (m == 0)
                m = 1;
        while (emb_gcd(m, rows) != 1)
                m++;
        return m;
}

static inline uint32_t emb_row_of_rank(uint64_t rank, uint64_t rows, uint64_t mult)
{
        return (uint32_t)((unsigned __int128)rank * mult % rows);
}

/* n ranks drawn from seed: uniform (exponent 0) or Zipf's P(k) ~ 1 / (k + 1)^exponent over
 * [0, rows), by inverting its CDF. splitmix64 makes the draws. */
static inline void emb_ranks(uint64_t rows, double exponent, uint64_t seed, size_t n,
                             std::vector<uint32_t> &out)
{
        std::vector<double> cdf;
        uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;

        if (exponent > 0) {
                cdf.resize(rows);
                double sum = 0;
                for (uint64_t k = 0; k < rows; k++)
                        cdf[k] = sum += pow((double)(k + 1), -exponent);
                for (uint64_t k = 0; k < rows; k++)
                        cdf[k] /= sum;
        }
        out.resize(n);
        for (size_t i = 0; i < n; i++) {
                uint64_t z = (x += 0x9E3779B97F4A7C15ull);
                z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
                z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
                z ^= z >> 31;
                double u = (double)(z >> 11) / 9007199254740992.0;
                if (exponent <= 0) {
                        out[i] = (uint32_t)(u * (double)rows);
                        continue;
                }
                uint64_t lo = 0, hi = rows - 1;
                while (lo < hi) {
                        uint64_t mid = (lo + hi) / 2;
                        if (cdf[mid] < u)
                                lo = mid + 1;
                        else
                                hi = mid;
                }
                out[i] = (uint32_t)lo;
        }
}
