/* What every plain reference program in tests/gpu shares, and nothing of umd's (the references
 * are the independent yardstick): CK, a CUDA call that must succeed or the program exits 1
 * naming it, and the median of a run's samples. */
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <vector>

#define CK(call)                                                                                   \
        do {                                                                                       \
                cudaError_t e_ = (call);                                                           \
                if (e_ != cudaSuccess) {                                                           \
                        fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, #call,      \
                                cudaGetErrorString(e_));                                           \
                        exit(1);                                                                   \
                }                                                                                  \
        } while (0)

static inline double median(std::vector<double> v)
{
        std::sort(v.begin(), v.end());
        size_t n = v.size();
        return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
