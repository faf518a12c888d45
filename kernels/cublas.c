/* The cuBLAS loader (cublas.h): one table, one pthread_once, one why. Owns the library's handle;
 * each job owns the cuBLAS handle it creates. */
#include "cublas.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "dlib.h"
#include "util.h"

/* Tests build this file with another name to see the absent-library answer. */
#ifndef CUBLAS_SONAMES
#define CUBLAS_SONAMES CUBLAS_SONAMES_DEFAULT
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct cublas_api api;
static int loaded = -ENOENT;
static char why[CUBLAS_WHY_MAX] = "cuBLAS not loaded";

static void load(void)
{
        struct cublas_api a = {0};
        const struct dlib_sym syms[] = {
            {"cublasCreate_v2", NULL, (void **)&a.create, false},
            {"cublasDestroy_v2", NULL, (void **)&a.destroy, false},
            {"cublasSetStream_v2", NULL, (void **)&a.set_stream, false},
            {"cublasSgemm_v2", NULL, (void **)&a.sgemm, false},
            {"cublasGetStatusString", NULL, (void **)&a.status_string, true},
        };
        const char *const names[] = {CUBLAS_SONAMES};
        char err[DLIB_WHY_MAX];
        void *h = NULL;
        int r;

        r = dlib_open(names, ELEMENTSOF(names), &h, err, sizeof(err));
        if (r < 0) {
                snprintf(why, sizeof(why), "cuBLAS unavailable: %s", err);
                loaded = r;
                return;
        }
        r = dlib_resolve(h, syms, ELEMENTSOF(syms), err, sizeof(err));
        if (r < 0) {
                snprintf(why, sizeof(why), "cuBLAS too old: %s", err);
                loaded = r;
                return;
        }
        api = a;
        loaded = 0;
}

int cublas_open(const struct cublas_api **ret_api, const char **ret_why)
{
        pthread_once(&once, load);
        if (loaded < 0) {
                *ret_why = why;
                return loaded;
        }
        *ret_api = &api;
        return 0;
}

const char *cublas_strerror(const struct cublas_api *a, cublas_status s, char *buf, size_t len)
{
        const char *t = a && a->status_string ? a->status_string(s) : NULL;

        if (t)
                return t;
        snprintf(buf, len, "cuBLAS error %d", s);
        return buf;
}
