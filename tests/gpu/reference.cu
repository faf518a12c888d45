// reference: the plain loop umd's copy benchmark is checked against (nvbandwidth style, no
// umd code): cudaMemcpyAsync between cudaMallocHost and cudaMalloc buffers on one
// non-blocking stream, each copy between two events, warm-up first, median of N.
//   reference [--size BYTES] [--iterations N] [--warmup N]      prints one JSON line
//   reference --count                                            prints the GPU count
//   reference --hold SECONDS                  holds a context and 64 MiB on GPU 0, then exits
//                                             (another user of the GPU, for umd's busy tests)
// Exits 77 when there is no GPU.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <unistd.h>
#include <vector>

#include "reference_common.h"

int main(int argc, char **argv)
{
        size_t size = 1ull << 30;
        int iterations = 5, warmup = 2, count = 0, hold = 0;
        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--count"))
                        count = 1;
                else if (!strcmp(argv[i], "--size") && i + 1 < argc)
                        size = strtoull(argv[++i], NULL, 0);
                else if (!strcmp(argv[i], "--iterations") && i + 1 < argc)
                        iterations = atoi(argv[++i]);
                else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
                        warmup = atoi(argv[++i]);
                else if (!strcmp(argv[i], "--hold") && i + 1 < argc)
                        hold = atoi(argv[++i]);
                else {
                        fprintf(stderr, "usage: reference [--count] [--size BYTES] "
                                        "[--iterations N] [--warmup N] [--hold SECONDS]\n");
                        return 2;
                }
        }
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess)
                n = 0;
        if (count) {
                printf("%d\n", n);
                return n > 0 ? 0 : 77;
        }
        if (n == 0) {
                fprintf(stderr, "reference: no GPU\n");
                return 77;
        }
        if (hold > 0) {
                void *p;
                CK(cudaMalloc(&p, 64u << 20));
                CK(cudaMemset(p, 0, 64u << 20));
                CK(cudaDeviceSynchronize());
                printf("{\"holding\": %d}\n", hold);
                fflush(stdout);
                sleep((unsigned)hold);
                CK(cudaFree(p));
                return 0;
        }

        void *host, *dev;
        cudaStream_t s;
        cudaEvent_t a, b;
        CK(cudaMallocHost(&host, size));
        CK(cudaMalloc(&dev, size));
        CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
        memset(host, 0x5a, size);
        CK(cudaMemset(dev, 0xa5, size));

        printf("{\"size\": %zu, \"iterations\": %d", size, iterations);
        for (int d = 0; d < 2; d++) {
                std::vector<double> ms;
                for (int i = 0; i < warmup + iterations; i++) {
                        float t;
                        CK(cudaEventRecord(a, s));
                        if (d == 0)
                                CK(cudaMemcpyAsync(dev, host, size, cudaMemcpyHostToDevice, s));
                        else
                                CK(cudaMemcpyAsync(host, dev, size, cudaMemcpyDeviceToHost, s));
                        CK(cudaEventRecord(b, s));
                        CK(cudaEventSynchronize(b));
                        CK(cudaEventElapsedTime(&t, a, b));
                        if (i >= warmup)
                                ms.push_back(t);
                }
                double med = median(ms);
                printf(", \"%s_median_ms\": %.6f, \"%s_gbps\": %.4f", d ? "d2h" : "h2d", med,
                       d ? "d2h" : "h2d", (double)size / (med * 1e-3) / 1e9);
        }
        printf("}\n");
        return 0;
}
