/* The real backend (backend.h): the GPUs through CUDA (bench.h's benchmarks, discover.h's
 * device lookup). A GPU's worker holds one bench_ctx; the node worker (--device all) one
 * bench_multi over every GPU. Built only with nvcc; backend_nocuda.c stands in otherwise. */
#include "backend.h"
#include "bench.h"
#include "conditions.h"
#include "discover.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct backend {
        struct bench_ctx *ctx;    /* a GPU's worker */
        struct bench_multi *node; /* the node worker */
};

static json_t *cuda_list(const struct backend_args *a, char **ret_why)
{
        return bench_list_devices(ret_why);
}

static int cuda_open(const struct backend_args *a, struct backend **ret, json_t **ret_device,
                     char **ret_error)
{
        struct backend *b = calloc(1, sizeof(*b));
        json_t *device = NULL;
        int r;

        if (!b)
                return backend_fail(ret_error, -ENOMEM, "out of memory");
        if (strcmp(a->device_id, "all") == 0) {
                /* With fewer than two GPUs the node worker still starts, so that a job sent to
                 * it is answered "needs two GPUs" rather than lost. */
                char *why = NULL;
                json_t *devices = bench_list_devices(&why);

                free(why);
                if (!devices) {
                        free(b);
                        return backend_fail(ret_error, -ENOMEM, "out of memory");
                }
                r = bench_multi_create(devices, &a->lim, &b->node, ret_error);
                if (r >= 0 && !(device = backend_node_info(devices, false)))
                        r = backend_fail(ret_error, -ENOMEM, "out of memory");
                json_decref(devices);
        } else {
                int ordinal = -1;

                r = discover_device(a->device_id, &ordinal, &device, ret_error);
                if (r >= 0)
                        r = bench_ctx_create(ordinal, device, &a->lim, &b->ctx, ret_error);
        }
        if (r < 0) {
                if (b->node)
                        bench_multi_destroy(b->node);
                json_decref(device);
                free(b);
                return r;
        }
        *ret_device = device;
        *ret = b;
        return 0;
}

static int cuda_run(struct backend *b, const char *id, const json_t *params,
                    volatile sig_atomic_t *cancel, json_t **ret_result, char **ret_error)
{
        if (b->node)
                return bench_multi_run(b->node, id, params, cancel, ret_result, ret_error);
        return bench_run(b->ctx, id, params, cancel, ret_result, ret_error);
}

static json_t *cuda_look(struct backend *b, const json_t *device)
{
        return b->node ? NULL
                       : conditions_processes(json_string_value(json_object_get(device, "uuid")));
}

static uint64_t cuda_pool_release(struct backend *b)
{
        return b->node ? bench_multi_pool_release(b->node) : bench_pool_release(b->ctx);
}

static void cuda_close(struct backend *b)
{
        if (!b)
                return;
        if (b->ctx)
                bench_ctx_destroy(b->ctx);
        if (b->node)
                bench_multi_destroy(b->node);
        free(b);
}

static bool cuda_implements(const char *id)
{
        return bench_implements(id) || bench_multi_implements(id);
}

const struct backend_ops backend_real = {
    .name = "cuda",
    .list = cuda_list,
    .open = cuda_open,
    .run = cuda_run,
    .look = cuda_look,
    .pool_release = cuda_pool_release,
    .close = cuda_close,
    .implements = cuda_implements,
};
