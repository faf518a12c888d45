/* cuBLAS, loaded at run time (issue 60): the few entry points train_step calls, declared as
 * cublas_api.h declares them, so a worker on a machine without libcublas still runs every other
 * benchmark and says "cuBLAS unavailable: ..." for this one. Plain C: no CUDA types (a stream is
 * passed as the pointer cudaStream_t is). */
#pragma once

#include <stddef.h>

#define CUBLAS_SONAMES_DEFAULT "libcublas.so.13", "libcublas.so.12", "libcublas.so"

#define CUBLAS_OK      0 /* CUBLAS_STATUS_SUCCESS */
#define CUBLAS_NO_T    0 /* CUBLAS_OP_N */
#define CUBLAS_T       1 /* CUBLAS_OP_T */
#define CUBLAS_WHY_MAX 320

typedef int cublas_status;                    /* cublasStatus_t */
typedef struct cublas_context *cublas_handle; /* cublasHandle_t */

struct cublas_api {
        cublas_status (*create)(cublas_handle *h);                  /* cublasCreate_v2 */
        cublas_status (*destroy)(cublas_handle h);                  /* cublasDestroy_v2 */
        cublas_status (*set_stream)(cublas_handle h, void *stream); /* cublasSetStream_v2 */
        /* cublasSgemm_v2: column-major C = alpha op(A) op(B) + beta C; op 0 (N) or 1 (T) */
        cublas_status (*sgemm)(cublas_handle h, int transa, int transb, int m, int n, int k,
                               const float *alpha, const float *a, int lda, const float *b, int ldb,
                               const float *beta, float *c, int ldc);
        const char *(*status_string)(cublas_status s); /* cublasGetStatusString, optional */
};

/* Loads the library once for the process. 0 with *ret_api, or -ENOENT / -ENOTSUP with *ret_why
 * (static): "cuBLAS unavailable: <soname>: <dlerror>" or "cuBLAS too old: missing <name>". */
int cublas_open(const struct cublas_api **ret_api, const char **ret_why);

/* s in words ("CUBLAS_STATUS_NOT_INITIALIZED"), or "cuBLAS error N". */
const char *cublas_strerror(const struct cublas_api *api, cublas_status s, char *buf, size_t len);
