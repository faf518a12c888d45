// reference_embed: the plain program umd's embedding_gather is checked against (no umd code
// but the gather kernel and the row choices, kernels/embed_kernels.cuh). The table in device
// memory (hbm) and in mapped pinned host memory (host_mapped); each sample copies its row
// indices to the GPU, then gathers, timed between two events.
//   reference_embed [--size BYTES] [--row-bytes N] [--lookups N] [--zipf-x100 N]
//                   [--iterations N] [--warmup N] [--seed N]          prints one JSON line
// Exits 77 when there is no GPU.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <vector>

#include "../../kernels/embed_kernels.cuh"

#include "reference_common.h"

int main(int argc, char **argv)
{
        unsigned long long size = 1ull << 30, seed = 1;
        int row = 128, lookups = 65536, zipf = 0, iters = 10, warm = 3, ndev = 0;
        for (int i = 1; i + 1 < argc; i += 2) {
                if (!strcmp(argv[i], "--size"))
                        size = strtoull(argv[i + 1], NULL, 0);
                else if (!strcmp(argv[i], "--row-bytes"))
                        row = atoi(argv[i + 1]);
                else if (!strcmp(argv[i], "--lookups"))
                        lookups = atoi(argv[i + 1]);
                else if (!strcmp(argv[i], "--zipf-x100"))
                        zipf = atoi(argv[i + 1]);
                else if (!strcmp(argv[i], "--iterations"))
                        iters = atoi(argv[i + 1]);
                else if (!strcmp(argv[i], "--warmup"))
                        warm = atoi(argv[i + 1]);
                else if (!strcmp(argv[i], "--seed"))
                        seed = strtoull(argv[i + 1], NULL, 0);
        }
        if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)
                return 77;
        cudaDeviceProp prop;
        CK(cudaGetDeviceProperties(&prop, 0));
        uint64_t rows = size / row, mult = emb_mult(rows);
        size_t n = (size_t)(warm + iters) * lookups;
        std::vector<uint32_t> ranks, idx(n);
        emb_ranks(rows, zipf / 100.0, seed, n, ranks);
        for (size_t i = 0; i < n; i++)
                idx[i] = emb_row_of_rank(ranks[i], rows, mult);
        uint8_t *table_dev, *table_host, *host_view, *out;
        uint32_t *d_idx;
        CK(cudaMalloc(&table_dev, rows * row));
        CK(cudaMemset(table_dev, 1, rows * row));
        CK(cudaHostAlloc((void **)&table_host, rows * row, cudaHostAllocMapped));
        memset(table_host, 1, rows * row);
        CK(cudaHostGetDevicePointer((void **)&host_view, table_host, 0));
        CK(cudaMalloc(&out, (size_t)lookups * row));
        CK(cudaMalloc(&d_idx, (size_t)lookups * 4));
        cudaStream_t s;
        cudaEvent_t a, b;
        CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
        uint64_t blocks = ((uint64_t)lookups * 32 + EMB_THREADS - 1) / EMB_THREADS;
        unsigned grid =
            (unsigned)std::min<uint64_t>(blocks, (uint64_t)prop.multiProcessorCount * 8);
        const uint8_t *tables[2] = {table_dev, host_view};
        double med[2];
        for (int t = 0; t < 2; t++) {
                std::vector<double> v;
                for (int it = 0; it < warm + iters; it++) {
                        float ms;
                        CK(cudaMemcpyAsync(d_idx, idx.data() + (size_t)it * lookups,
                                           (size_t)lookups * 4, cudaMemcpyHostToDevice, s));
                        CK(cudaEventRecord(a, s));
                        k_emb_gather<<<grid, EMB_THREADS, 0, s>>>(tables[t], d_idx, out, lookups,
                                                                  row, NULL, NULL);
                        CK(cudaEventRecord(b, s));
                        CK(cudaEventSynchronize(b));
                        CK(cudaEventElapsedTime(&ms, a, b));
                        if (it >= warm)
                                v.push_back(ms);
                }
                med[t] = median(v);
        }
        printf("{\"size\": %llu, \"row_bytes\": %d, \"lookups\": %d, \"zipf_x100\": %d, "
               "\"device_ms\": %.5f, \"host_mapped_ms\": %.5f}\n",
               size, row, lookups, zipf, med[0], med[1]);
        return 0;
}
