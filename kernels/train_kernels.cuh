/* train_step's elementwise kernels and its chain of GEMM shapes (issue 60), shared with the
 * plain reference program (tests/gpu/reference_train.cu) so both time the same work. No umd
 * code: CUDA only. The GEMMs themselves are cuBLAS's (row-major tensors, column-major calls). */
#pragma once

#include <stdint.h>

#define TRAIN_GEMMS_MAX 128 /* 32 transformer blocks of 4 */
#define TRAIN_LR        1e-3f
#define TRAIN_BETA1     0.9f
#define TRAIN_BETA2     0.999f
#define TRAIN_EPS       1e-8f
#define TRAIN_THREADS   256

/* The widths of the chain: gemms GEMMs, GEMM i maps dims[i] floats a row to dims[i + 1]. An
 * MLP layer is one hidden x hidden GEMM; a transformer block is QKV (h -> 3h), the output
 * projection (3h -> h: attention's own GEMMs are left out), FFN up (h -> 4h) and down. */
static inline int train_dims(bool transformer, int hidden, int layers, int *dims)
{
        static const int block[] = {3, 1, 4, 1};
        int n = 0;

        dims[0] = hidden;
        for (int l = 0; l < layers; l++) {
                if (!transformer) {
                        dims[++n] = hidden;
                        continue;
                }
                for (int k = 0; k < 4; k++)
                        dims[++n] = block[k] * hidden;
        }
        return n;
}

/* A float in [-scale, scale) from the element's index and a salt: the same on the host and the
 * GPU, whatever memory holds it. */
__host__ __device__ static inline float train_value(uint64_t i, uint32_t salt, float scale)
{
        uint32_t x = (uint32_t)i * 0x9E3779B1u ^ (uint32_t)(i >> 32) ^ salt * 0x85EBCA6Bu;
        x ^= x >> 16;
        x *= 0x7FEB352Du;
        x ^= x >> 15;
        x *= 0x846CA68Bu;
        x ^= x >> 16;
        return ((float)(x >> 8) * (1.0f / 16777216.0f) * 2.0f - 1.0f) * scale;
}

__global__ static void k_train_init(float *p, uint64_t n, uint32_t salt, float scale)
{
        for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
             i += (uint64_t)gridDim.x * blockDim.x)
                p[i] = scale == 0 ? 0.0f : train_value(i, salt, scale);
}

__global__ static void k_train_relu(float *p, uint64_t n)
{
        for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
             i += (uint64_t)gridDim.x * blockDim.x)
                p[i] = p[i] > 0 ? p[i] : 0.0f;
}

/* The mean squared error's gradient: (y - t) / rows. */
__global__ static void k_train_loss_grad(float *g, const float *y, const float *t, uint64_t n,
                                         float inv_rows)
{
        for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
             i += (uint64_t)gridDim.x * blockDim.x)
                g[i] = (y[i] - t[i]) * inv_rows;
}

/* ReLU's backward: the gradient passes where the activation was positive. */
__global__ static void k_train_relu_grad(float *g, const float *a, uint64_t n)
{
        for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
             i += (uint64_t)gridDim.x * blockDim.x)
                g[i] = a[i] > 0 ? g[i] : 0.0f;
}

/* Adam without bias correction: every weight, its gradient and both moments, read and written
 * once. */
__global__ static void k_train_adam(float *w, const float *g, float *m, float *v, uint64_t n)
{
        for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
             i += (uint64_t)gridDim.x * blockDim.x) {
                float gi = g[i];
                float mi = TRAIN_BETA1 * m[i] + (1 - TRAIN_BETA1) * gi;
                float vi = TRAIN_BETA2 * v[i] + (1 - TRAIN_BETA2) * gi * gi;
                m[i] = mi;
                v[i] = vi;
                w[i] -= TRAIN_LR * mi / (sqrtf(vi) + TRAIN_EPS);
        }
}

/* The tensors of one step. The weights, their gradients and both moments share one layout
 * (w[i] - w[0] == dw[i] - dw[0]), so the update is one kernel over all of them. */
struct train_net {
        int gemms, rows;
        int dims[TRAIN_GEMMS_MAX + 1];
        float *x, *t;               /* batch: input rows x dims[0], target rows x dims[gemms] */
        float *a[TRAIN_GEMMS_MAX];  /* activations: GEMM i's output, rows x dims[i + 1] */
        float *w[TRAIN_GEMMS_MAX];  /* weights: dims[i] x dims[i + 1], row-major */
        float *dw[TRAIN_GEMMS_MAX]; /* weight gradients, the same shapes */
        float *g0, *g1;             /* activation gradients, rows x the widest dim each */
        float *m, *v;               /* Adam's moments, the weights' layout */
        uint64_t nweights;          /* floats of every weight together */
};

/* Enqueues one step's compute on stream s: forward (GEMM, ReLU between GEMMs), the loss
 * gradient, backward (each GEMM's weight gradient, then its input's gradient through the ReLU)
 * and the update. gemm(transa, transb, m, n, k, A, lda, B, ldb, beta, C, ldc) is cuBLAS's Sgemm
 * with alpha 1, column-major: a row-major Y = X W is Y^T = W^T X^T. Returns gemm's first
 * non-zero status, or 0. */
template <class Gemm>
static int train_enqueue(const struct train_net *n, Gemm gemm, cudaStream_t s, unsigned grid)
{
        const int rows = n->rows, last = n->gemms - 1;
        float *g = n->g0, *gnext = n->g1;
        int r;

        for (int i = 0; i <= last; i++) {
                const float *in = i == 0 ? n->x : n->a[i - 1];
                r = gemm(0, 0, n->dims[i + 1], rows, n->dims[i], n->w[i], n->dims[i + 1], in,
                         n->dims[i], 0.0f, n->a[i], n->dims[i + 1]);
                if (r != 0)
                        return r;
                if (i < last)
                        k_train_relu<<<grid, TRAIN_THREADS, 0, s>>>(n->a[i], (uint64_t)rows *
                                                                                 n->dims[i + 1]);
        }
        k_train_loss_grad<<<grid, TRAIN_THREADS, 0, s>>>(
            g, n->a[last], n->t, (uint64_t)rows * n->dims[last + 1], 1.0f / rows);
        for (int i = last; i >= 0; i--) {
                const float *in = i == 0 ? n->x : n->a[i - 1];
                /* dW = X^T dY: column-major dW^T = dY^T X */
                r = gemm(0, 1, n->dims[i + 1], n->dims[i], rows, g, n->dims[i + 1], in, n->dims[i],
                         0.0f, n->dw[i], n->dims[i + 1]);
                if (r != 0 || i == 0)
                        break;
                /* dX = dY W^T: column-major dX^T = W dY^T */
                r = gemm(1, 0, n->dims[i], rows, n->dims[i + 1], n->w[i], n->dims[i + 1], g,
                         n->dims[i + 1], 0.0f, gnext, n->dims[i]);
                if (r != 0)
                        return r;
                k_train_relu_grad<<<grid, TRAIN_THREADS, 0, s>>>(gnext, n->a[i - 1],
                                                                 (uint64_t)rows * n->dims[i]);
                float *tmp = g;
                g = gnext;
                gnext = tmp;
        }
        if (r != 0)
                return r;
        k_train_adam<<<grid, TRAIN_THREADS, 0, s>>>(n->w[0], n->dw[0], n->m, n->v, n->nweights);
        return 0;
}
