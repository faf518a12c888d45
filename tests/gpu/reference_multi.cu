// reference_multi: the plain CUDA loops umd's benchmarks across GPUs are checked against (no umd
// code): each copy between two events on one non-blocking stream, warm-up first, median of N,
// decimal GB/s of the bytes umd counts for the same measurement.
//   reference_multi [--size BYTES] [--iterations N] [--warmup N]   prints one JSON object
//   reference_multi --count                                         prints the GPU count
// Keys, as umd names the measurements: "d2d@G" (cudaMemcpyAsync within GPU G, read+write
// bytes), "ce_uni@A>B" (cudaMemcpyPeerAsync on A's stream), "ce_bidir@A>B" (both at once, both
// directions' bytes), "sm_uni@A>B" / "sm_bidir@A>B" (a copy kernel on the source GPU writing
// peer memory), "on_demand@A>B" / "prefetch@A>B" (managed memory written on A, read by a
// kernel on B, pages moved back to A before each sample), "alone@G" / "all" (pinned H2D, one
// GPU, then every GPU at once: the longest GPU's span).
// Exits 77 with fewer than two GPUs.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <string>
#include <vector>

#include "reference_common.h"

#define MAXG 8

static size_t size = 256ull << 20;
static int iterations = 10, warmup = 3, n;
static cudaStream_t st[MAXG];
static cudaEvent_t ev0[MAXG], ev1[MAXG];
static void *src[MAXG], *dst[MAXG], *host[MAXG];
static int sms[MAXG];
static bool first = true;

static void emit(const std::string &key, double bytes, double ms)
{
        printf("%s\"%s\": %.4f", first ? "" : ", ", key.c_str(), bytes / (ms * 1e-3) / 1e9);
        first = false;
        fflush(stdout);
}

__global__ void k_copy(uint4 *d, const uint4 *s, size_t n16)
{
        size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
        size_t stride = (size_t)gridDim.x * blockDim.x;
        for (size_t i = t; i < n16; i += stride)
                d[i] = s[i];
}

__global__ void k_read(const uint4 *p, size_t n16, unsigned *sink)
{
        size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
        size_t stride = (size_t)gridDim.x * blockDim.x;
        unsigned acc = 0;
        for (size_t i = t; i < n16; i += stride) {
                uint4 x = p[i];
                acc ^= x.x ^ x.y ^ x.z ^ x.w;
        }
        if (acc == 0x12345678u && t == 0x7fffffff)
                *sink = acc;
}

static unsigned blocks(int g)
{
        size_t want = (size / 16 + 255) / 256, cap = (size_t)sms[g] * 8;
        return (unsigned)(want < cap ? want : cap);
}

// Times fn (which enqueues on stream of GPU g, and may join others into it) between events.
template <class F> static double timed(int g, F fn)
{
        std::vector<double> ms;
        for (int i = 0; i < warmup + iterations; i++) {
                float t;
                CK(cudaSetDevice(g));
                CK(cudaEventRecord(ev0[g], st[g]));
                fn();
                CK(cudaSetDevice(g));
                CK(cudaEventRecord(ev1[g], st[g]));
                CK(cudaEventSynchronize(ev1[g]));
                CK(cudaEventElapsedTime(&t, ev0[g], ev1[g]));
                if (i >= warmup)
                        ms.push_back(t);
        }
        return median(ms);
}

static void copy(bool sm, int a, int b)
{
        if (sm) {
                CK(cudaSetDevice(a));
                k_copy<<<blocks(a), 256, 0, st[a]>>>((uint4 *)dst[b], (const uint4 *)src[a],
                                                     size / 16);
        } else {
                CK(cudaMemcpyPeerAsync(dst[b], b, src[a], a, size, st[a]));
        }
}

int main(int argc, char **argv)
{
        bool count = false;
        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--count"))
                        count = true;
                else if (!strcmp(argv[i], "--size") && i + 1 < argc)
                        size = strtoull(argv[++i], NULL, 0);
                else if (!strcmp(argv[i], "--iterations") && i + 1 < argc)
                        iterations = atoi(argv[++i]);
                else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
                        warmup = atoi(argv[++i]);
                else {
                        fprintf(stderr, "usage: reference_multi [--count] [--size BYTES] "
                                        "[--iterations N] [--warmup N]\n");
                        return 2;
                }
        }
        if (cudaGetDeviceCount(&n) != cudaSuccess)
                n = 0;
        if (count) {
                printf("%d\n", n);
                return 0;
        }
        if (n < 2) {
                fprintf(stderr, "reference_multi: needs two GPUs, found %d\n", n);
                return 77;
        }
        n = n > MAXG ? MAXG : n;
        for (int g = 0; g < n; g++) {
                CK(cudaSetDevice(g));
                CK(cudaDeviceGetAttribute(&sms[g], cudaDevAttrMultiProcessorCount, g));
                CK(cudaStreamCreateWithFlags(&st[g], cudaStreamNonBlocking));
                CK(cudaEventCreate(&ev0[g]));
                CK(cudaEventCreate(&ev1[g]));
                CK(cudaMalloc(&src[g], size));
                CK(cudaMalloc(&dst[g], size));
                CK(cudaMallocHost(&host[g], size));
                CK(cudaMemset(src[g], 0x11 * (g + 1), size));
                memset(host[g], 0x5a, size);
                for (int p = 0; p < n; p++) {
                        int can = 0;
                        if (p != g && cudaDeviceCanAccessPeer(&can, g, p) == cudaSuccess && can)
                                CK(cudaDeviceEnablePeerAccess(p, 0));
                }
        }
        char key[64];
        printf("{\"size\": %zu, \"iterations\": %d, \"gbps\": {", size, iterations);
        for (int g = 0; g < n; g++) {
                double ms = timed(g, [&] {
                        CK(cudaMemcpyAsync(dst[g], src[g], size, cudaMemcpyDeviceToDevice, st[g]));
                });
                snprintf(key, sizeof(key), "d2d@%d", g);
                emit(key, 2.0 * size, ms);
        }
        for (int sm = 0; sm < 2; sm++) {
                for (int a = 0; a < n; a++)
                        for (int b = 0; b < n; b++) {
                                if (a == b)
                                        continue;
                                double ms = timed(a, [&] { copy(sm, a, b); });
                                snprintf(key, sizeof(key), "%s_uni@%d>%d", sm ? "sm" : "ce", a, b);
                                emit(key, (double)size, ms);
                        }
                for (int a = 0; a < n; a++)
                        for (int b = a + 1; b < n; b++) {
                                double ms = timed(a, [&] {
                                        CK(cudaSetDevice(b));
                                        CK(cudaStreamWaitEvent(st[b], ev0[a], 0));
                                        copy(sm, a, b);
                                        copy(sm, b, a);
                                        CK(cudaSetDevice(b));
                                        CK(cudaEventRecord(ev1[b], st[b]));
                                        CK(cudaSetDevice(a));
                                        CK(cudaStreamWaitEvent(st[a], ev1[b], 0));
                                });
                                snprintf(key, sizeof(key), "%s_bidir@%d>%d", sm ? "sm" : "ce", a,
                                         b);
                                emit(key, 2.0 * size, ms);
                        }
        }
        unsigned *sink;
        for (int g = 0; g < n; g++) {
                CK(cudaSetDevice(g));
                if (g == 0)
                        CK(cudaMalloc(&sink, sizeof(*sink)));
        }
        for (int a = 0; a < n; a++)
                for (int b = 0; b < n; b++) {
                        if (a == b)
                                continue;
                        void *p;
                        cudaMemLocation la = {}, lb = {};
                        la.type = lb.type = cudaMemLocationTypeDevice;
                        la.id = a;
                        lb.id = b;
                        CK(cudaSetDevice(a));
                        CK(cudaMallocManaged(&p, size, cudaMemAttachGlobal));
                        CK(cudaMemsetAsync(p, 0x3c, size, st[a])); // first touch on A
                        CK(cudaStreamSynchronize(st[a]));
                        for (int pf = 0; pf < 2; pf++) {
                                std::vector<double> ms;
                                for (int i = 0; i < warmup + iterations; i++) {
                                        float t;
                                        CK(cudaSetDevice(a));
                                        CK(cudaMemPrefetchAsync(p, size, la, 0, st[a]));
                                        CK(cudaStreamSynchronize(st[a]));
                                        CK(cudaSetDevice(b));
                                        CK(cudaEventRecord(ev0[b], st[b]));
                                        if (pf)
                                                CK(cudaMemPrefetchAsync(p, size, lb, 0, st[b]));
                                        k_read<<<blocks(b), 256, 0, st[b]>>>((const uint4 *)p,
                                                                             size / 16, NULL);
                                        CK(cudaEventRecord(ev1[b], st[b]));
                                        CK(cudaEventSynchronize(ev1[b]));
                                        CK(cudaEventElapsedTime(&t, ev0[b], ev1[b]));
                                        if (i >= warmup)
                                                ms.push_back(t);
                                }
                                snprintf(key, sizeof(key), "%s@%d>%d",
                                         pf ? "prefetch" : "on_demand", a, b);
                                emit(key, (double)size, median(ms));
                        }
                        CK(cudaFree(p));
                }
        for (int g = 0; g < n; g++) {
                double ms = timed(g, [&] {
                        CK(cudaMemcpyAsync(src[g], host[g], size, cudaMemcpyHostToDevice, st[g]));
                });
                snprintf(key, sizeof(key), "alone@%d", g);
                emit(key, (double)size, ms);
        }
        {
                std::vector<double> ms;
                for (int i = 0; i < warmup + iterations; i++) {
                        double longest = 0;
                        for (int g = 0; g < n; g++) {
                                CK(cudaSetDevice(g));
                                CK(cudaEventRecord(ev0[g], st[g]));
                                CK(cudaMemcpyAsync(src[g], host[g], size, cudaMemcpyHostToDevice,
                                                   st[g]));
                                CK(cudaEventRecord(ev1[g], st[g]));
                        }
                        for (int g = 0; g < n; g++) {
                                float t;
                                CK(cudaSetDevice(g));
                                CK(cudaEventSynchronize(ev1[g]));
                                CK(cudaEventElapsedTime(&t, ev0[g], ev1[g]));
                                longest = t > longest ? t : longest;
                        }
                        if (i >= warmup)
                                ms.push_back(longest);
                }
                emit("all", (double)size * n, median(ms));
        }
        printf("}}\n");
        (void)sink;
        return 0;
}
