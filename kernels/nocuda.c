/* bench.h for a umd-worker built without CUDA (no nvcc at build time): it can still serve fake
 * devices, and says plainly that it cannot drive real ones. */
#include "bench.h"
#include "discover.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char why_no_cuda[] = "built without CUDA";

static int fail(char **ret_error)
{
        if (ret_error)
                *ret_error = strdup(why_no_cuda);
        return -ENOTSUP;
}

int bench_ctx_create(int ordinal, const json_t *device_info, const struct bench_limits *lim,
                     struct bench_ctx **ret, char **ret_error)
{
        return fail(ret_error);
}

void bench_ctx_destroy(struct bench_ctx *ctx)
{
}

uint64_t bench_pool_release(struct bench_ctx *ctx)
{
        return 0;
}

int bench_run(struct bench_ctx *ctx, const char *benchmark, const json_t *params,
              volatile sig_atomic_t *cancel, json_t **ret_result, char **ret_error)
{
        return fail(ret_error);
}

int bench_multi_create(const json_t *devices, const struct bench_limits *lim,
                       struct bench_multi **ret, char **ret_error)
{
        return fail(ret_error);
}

void bench_multi_destroy(struct bench_multi *m)
{
}

uint64_t bench_multi_pool_release(struct bench_multi *m)
{
        return 0;
}

int bench_multi_run(struct bench_multi *m, const char *benchmark, const json_t *params,
                    volatile sig_atomic_t *cancel, json_t **ret_result, char **ret_error)
{
        return fail(ret_error);
}

json_t *bench_list_devices(char **ret_why)
{
        if (ret_why)
                *ret_why = strdup(why_no_cuda);
        return json_array();
}

int discover_device(const char *id, int *ret_ordinal, json_t **ret_info, char **ret_why)
{
        return fail(ret_why);
}
