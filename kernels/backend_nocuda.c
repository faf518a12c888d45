/* The real backend (backend.h) of a umd-worker built without CUDA (no nvcc at build time): it
 * can still serve fake devices (backend_fake.c), and says plainly that it cannot drive real
 * ones. It implements no benchmark: `umd-worker --implements` exits 77 (the test skips). */
#include "backend.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char why_no_cuda[] = "built without CUDA";

static json_t *nocuda_list(const struct backend_args *a, char **ret_why)
{
        if (ret_why)
                *ret_why = strdup(why_no_cuda);
        return json_array();
}

static int nocuda_open(const struct backend_args *a, struct backend **ret, json_t **ret_device,
                       char **ret_error)
{
        return backend_fail(ret_error, -ENOTSUP, "%s", why_no_cuda);
}

static int nocuda_run(struct backend *b, const char *id, const json_t *params,
                      volatile sig_atomic_t *cancel, json_t **ret_result, char **ret_error)
{
        return backend_fail(ret_error, -ENOTSUP, "%s", why_no_cuda);
}

static json_t *nocuda_look(struct backend *b, const json_t *device)
{
        return NULL;
}

static uint64_t nocuda_pool_release(struct backend *b)
{
        return 0;
}

static void nocuda_close(struct backend *b)
{
}

static bool nocuda_implements(const char *id)
{
        return false;
}

const struct backend_ops backend_real = {
    .name = "nocuda",
    .list = nocuda_list,
    .open = nocuda_open,
    .run = nocuda_run,
    .look = nocuda_look,
    .pool_release = nocuda_pool_release,
    .close = nocuda_close,
    .implements = nocuda_implements,
};
