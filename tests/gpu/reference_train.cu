// reference_train: the plain program umd's train_step is checked against (no umd code but the
// step's kernels, kernels/train_kernels.cuh). Every tensor in device memory, cuBLAS linked as
// usual; each step copies the batch from pinned memory and runs forward, backward and Adam,
// timed between two events. Each sample starts from fresh weights, as umd's do.
//   reference_train [--shape mlp|transformer_block] [--batch N] [--hidden N] [--layers N]
//                   [--steps N] [--iterations N] [--warmup N]       prints one JSON line
// Exits 77 when there is no GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <vector>

#include "../../kernels/train_kernels.cuh"

#include "reference_common.h"

static float *dev(size_t floats)
{
        float *p;
        CK(cudaMalloc(&p, floats * 4));
        CK(cudaMemset(p, 0, floats * 4));
        return p;
}

int main(int argc, char **argv)
{
        bool tf = false;
        int batch = 2048, hidden = 2048, layers = 4, steps = 5, iters = 3, warm = 1, ndev = 0;
        for (int i = 1; i + 1 < argc; i += 2) {
                if (!strcmp(argv[i], "--shape"))
                        tf = strcmp(argv[i + 1], "mlp") != 0;
                else if (!strcmp(argv[i], "--batch"))
                        batch = atoi(argv[i + 1]);
                else if (!strcmp(argv[i], "--hidden"))
                        hidden = atoi(argv[i + 1]);
                else if (!strcmp(argv[i], "--layers"))
                        layers = atoi(argv[i + 1]);
                else if (!strcmp(argv[i], "--steps"))
                        steps = atoi(argv[i + 1]);
                else if (!strcmp(argv[i], "--iterations"))
                        iters = atoi(argv[i + 1]);
                else if (!strcmp(argv[i], "--warmup"))
                        warm = atoi(argv[i + 1]);
        }
        if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)
                return 77;
        cudaDeviceProp prop;
        CK(cudaGetDeviceProperties(&prop, 0));
        unsigned grid = (unsigned)std::min(4096, prop.multiProcessorCount * 8); /* umd's grid_cap */
        struct train_net n = {};
        n.gemms = train_dims(tf, hidden, layers, n.dims);
        n.rows = batch;
        int wide = 0;
        std::vector<size_t> woff;
        size_t nw = 0;
        for (int i = 0; i < n.gemms; i++) {
                woff.push_back(nw);
                nw += ((size_t)n.dims[i] * n.dims[i + 1] + 63) / 64 * 64;
                wide = std::max(wide, n.dims[i + 1]);
        }
        n.nweights = nw;
        float *w = dev(nw), *dw = dev(nw), *mv = dev(2 * nw);
        size_t xb = (size_t)batch * n.dims[0], tb = (size_t)batch * n.dims[n.gemms];
        size_t xoff = (xb + 63) / 64 * 64;
        float *batch_dev = dev(xoff + tb), *staging;
        CK(cudaMallocHost(&staging, (xoff + tb) * 4));
        for (size_t i = 0; i < xoff + tb; i++)
                staging[i] = train_value(i, 7, 1.0f);
        n.x = batch_dev;
        n.t = batch_dev + xoff;
        for (int i = 0; i < n.gemms; i++) {
                n.w[i] = w + woff[i];
                n.dw[i] = dw + woff[i];
                n.a[i] = dev((size_t)batch * n.dims[i + 1]);
        }
        n.g0 = dev((size_t)batch * wide);
        n.g1 = dev((size_t)batch * wide);
        n.m = mv;
        n.v = mv + nw;
        cublasHandle_t h;
        cudaStream_t s;
        cudaEvent_t a, b;
        CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
        if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS ||
            cublasSetStream(h, s) != CUBLAS_STATUS_SUCCESS)
                return 1;
        auto gemm = [&](int ta, int tb2, int m, int nn, int k, const float *A, int lda,
                        const float *B, int ldb, float beta, float *C, int ldc) {
                const float one = 1.0f;
                return (int)cublasSgemm(h, (cublasOperation_t)ta, (cublasOperation_t)tb2, m, nn, k,
                                        &one, A, lda, B, ldb, &beta, C, ldc);
        };
        std::vector<double> first, steady;
        for (int it = 0; it < warm + iters; it++) {
                CK(cudaMemsetAsync(w, 0, nw * 4, s));
                CK(cudaMemsetAsync(mv, 0, 2 * nw * 4, s));
                for (int i = 0; i < n.gemms; i++)
                        k_train_init<<<1024, TRAIN_THREADS, 0, s>>>(
                            n.w[i], (uint64_t)n.dims[i] * n.dims[i + 1], 100 + i,
                            sqrtf(3.0f / n.dims[i]));
                CK(cudaStreamSynchronize(s));
                for (int st = 0; st < steps; st++) {
                        float ms;
                        CK(cudaEventRecord(a, s));
                        CK(cudaMemcpyAsync(batch_dev, staging, (xoff + tb) * 4,
                                           cudaMemcpyHostToDevice, s));
                        if (train_enqueue(&n, gemm, s, grid) != 0)
                                return 1;
                        CK(cudaEventRecord(b, s));
                        CK(cudaEventSynchronize(b));
                        CK(cudaEventElapsedTime(&ms, a, b));
                        if (it >= warm)
                                (st == 0 ? first : steady).push_back(ms);
                }
        }
        printf("{\"shape\": \"%s\", \"batch\": %d, \"hidden\": %d, \"layers\": %d, "
               "\"first_step_ms\": %.4f, \"steady_step_ms\": %.4f}\n",
               tf ? "transformer_block" : "mlp", batch, hidden, layers, median(first),
               median(steady));
        return 0;
}
