/* Where the canonical health check's untimed time goes on a GPU (issue 23, part 6): the set-up
 * around the pageable copy and the managed prefetch, each step timed with the host clock after a
 * synchronize, three rounds in one warm process. Plain CUDA, nothing of umd's: a reference for
 * what the worker's own steps should cost (bench/results/health-setup-h200/).
 * Build: nvcc -O2 -gencode arch=compute_90,code=[sm_90,compute_90] \
 *          bench/health-setup-probe.cu -o health-setup-probe
 * Run:   ./health-setup-probe [MiB, default 64] */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static double now_ms(void)
{
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

#define CK(x)                                                                                      \
        do {                                                                                       \
                cudaError_t e_ = (x);                                                              \
                if (e_ != cudaSuccess) {                                                           \
                        fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                   \
                        exit(1);                                                                   \
                }                                                                                  \
        } while (0)

static void fill(void *p, size_t size, uint32_t seed)
{
        uint32_t *w = (uint32_t *)p;
        for (size_t i = 0; i < size / 4; i++)
                w[i] = (uint32_t)i * 2654435761u ^ seed;
}

__global__ void k_rw(uint32_t *p, size_t n)
{
        for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
             i += (size_t)gridDim.x * blockDim.x)
                p[i] ^= 0x5a5a5a5au;
}

__global__ void k_fill(uint32_t *p, size_t n, uint32_t seed)
{
        for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
             i += (size_t)gridDim.x * blockDim.x)
                p[i] = (uint32_t)i * 2654435761u ^ seed;
}

#define T(label, ...)                                                                              \
        do {                                                                                       \
                double t_ = now_ms();                                                              \
                __VA_ARGS__;                                                                       \
                printf(" %s %.1f", label, now_ms() - t_);                                          \
        } while (0)

int main(int argc, char **argv)
{
        size_t size = (size_t)(argc > 1 ? atoi(argv[1]) : 64) << 20;
        int dev = 0, samples = 6;
        cudaStream_t s;
        void *d;
        cudaMemLocation on_dev = {}, on_host = {};

        CK(cudaSetDevice(dev));
        CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        CK(cudaMalloc(&d, size));
        on_dev.type = cudaMemLocationTypeDevice;
        on_dev.id = dev;
        on_host.type = cudaMemLocationTypeHost;
        printf("size %zu MiB, %d samples a step\n", size >> 20, samples);
        for (int round = 0; round < 3; round++) {
                void *p;
                printf("round %d pageable:", round);
                T("alloc", p = aligned_alloc(4096, size));
                T("fill_first_touch", fill(p, size, 1));
                T("fill_again", fill(p, size, 2));
                T(
                    "copies", for (int i = 0; i < samples; i++) {
                            CK(cudaMemcpyAsync(d, p, size, cudaMemcpyHostToDevice, s));
                            CK(cudaStreamSynchronize(s));
                    });
                T("free", free(p));
                T("alloc_populate", p = aligned_alloc(4096, size);
                  madvise(p, size, MADV_POPULATE_WRITE));
                T("fill_populated", fill(p, size, 1));
                T(
                    "copies", for (int i = 0; i < samples; i++) {
                            CK(cudaMemcpyAsync(d, p, size, cudaMemcpyHostToDevice, s));
                            CK(cudaStreamSynchronize(s));
                    });
                T("free", free(p));
                printf("\n");

                printf("round %d managed:", round);
                T("alloc", CK(cudaMallocManaged(&p, size, cudaMemAttachGlobal)));
                T("cpu_fill_first_touch", fill(p, size, 1));
                T(
                    "samples", for (int i = 0; i < samples; i++) {
                            CK(cudaMemPrefetchAsync(p, size, on_host, 0, s));
                            CK(cudaStreamSynchronize(s));
                            CK(cudaMemPrefetchAsync(p, size, on_dev, 0, s));
                            k_rw<<<1024, 256, 0, s>>>((uint32_t *)p, size / 4);
                            CK(cudaStreamSynchronize(s));
                    });
                T("cpu_fill_after_samples", fill(p, size, 1));
                T("free", CK(cudaFree(p)));
                T("alloc", CK(cudaMallocManaged(&p, size, cudaMemAttachGlobal)));
                T("prefetch_host_unpopulated", CK(cudaMemPrefetchAsync(p, size, on_host, 0, s));
                  CK(cudaStreamSynchronize(s)));
                T("cpu_fill_prefetched", fill(p, size, 1));
                T("free", CK(cudaFree(p)));
                T("alloc", CK(cudaMallocManaged(&p, size, cudaMemAttachGlobal)));
                T("gpu_fill_then_to_host", CK(cudaMemPrefetchAsync(p, size, on_dev, 0, s));
                  k_fill<<<1024, 256, 0, s>>>((uint32_t *)p, size / 4, 1);
                  CK(cudaMemPrefetchAsync(p, size, on_host, 0, s)); CK(cudaStreamSynchronize(s)));
                T("free", CK(cudaFree(p)));
                printf("\n");
        }
        return 0;
}
