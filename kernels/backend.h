/* The one interface umd-worker drives a device through, whatever the device is: the real GPUs
 * (backend_cuda.c, or backend_nocuda.c where the worker was built without nvcc) and the fake
 * devices of the tests (backend_fake.c). Shaped like Redis's ae.c and its ae_epoll.c /
 * ae_kqueue.c: each backend file defines the same static functions and exports them in one
 * struct backend_ops; the real one is chosen at build time, fake or real at run time (--fake).
 * worker.c calls nothing else: never bench_* nor fake_*.
 *
 * The benchmarks themselves are named by the catalog (common/catalog.h), the one registry:
 * run() gets a catalog id and params normalised by backend_prepare() (every parameter present,
 * limits already checked), and implements() says which ids a backend has code for (the unit
 * test kernels_backend walks the catalog with it). */
#pragma once

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "bench.h" /* struct bench_limits */

struct backend; /* one opened device (or the node: every device), owned by its backend */

struct backend_args {
        const char *device_id;   /* "all": the node worker; else a uuid or an index */
        unsigned fake_n;         /* fake devices on this host (fake backend only) */
        const char *fake_state;  /* tests: the fake_gpu_state file (fake backend only), or NULL */
        struct bench_limits lim; /* from umd-worker's argv, fixed for the process */
};

struct backend_ops {
        const char *name; /* "cuda", "fake", "nocuda" */
        bool fake;        /* results say "fake": true; fake_* params are honoured */
        /* The device list for --list (an array; empty with *ret_why when there is none). */
        json_t *(*list)(const struct backend_args *a, char **ret_why);
        /* Open a.device_id. 0 with *ret and *ret_device (its --list entry; the node's is
         * {"index": "all", "uuid": "node", "devices": [...]}); or -EINVAL (no such device),
         * another -errno, with *ret_error. */
        int (*open)(const struct backend_args *a, struct backend **ret, json_t **ret_device,
                    char **ret_error);
        /* Run catalog benchmark `id` with backend_prepare()'s params. 0 with *ret_result, or
         * -ENOTSUP (not on this device, or "not modelled" by the fake), -ECANCELED, -ENOMEM,
         * -EIO with *ret_error (malloc'd). */
        int (*run)(struct backend *b, const char *id, const json_t *params,
                   volatile sig_atomic_t *cancel, json_t **ret_result, char **ret_error);
        /* The look right after a part, sent with its result (common/ipc.h, "look"): the other
         * compute processes on this GPU as {"pids": [...]} (every one NVML lists, this worker's
         * included: umd tells its own apart) or {"others": N} (a fake's fake_gpu_state says N).
         * NULL where it cannot say, and for the node worker: umd then looks itself. */
        json_t *(*look)(struct backend *b, const json_t *device);
        /* Give back the buffer pool; the bytes freed. */
        uint64_t (*pool_release)(struct backend *b);
        void (*close)(struct backend *b);
        /* Whether this backend has code (or a model) for catalog id `id`. */
        bool (*implements)(const char *id);
};

extern const struct backend_ops backend_fake;
/* backend_cuda.c, or backend_nocuda.c in a build without CUDA. */
extern const struct backend_ops backend_real;

/* The one check before a run, whatever the backend: id must be in the catalog; a real backend
 * refuses fake_* params set to anything but their default; params are normalised by the
 * catalog (defaults filled: no backend has defaults of its own); the largest size asked for
 * (size, or the largest of sizes) must be within max_buffer_bytes (0: no limit).
 * 0 with *ret_params (new), or -EINVAL / -ENOMEM with *ret_error. */
int backend_prepare(const struct backend_ops *ops, const char *id, const json_t *params,
                    uint64_t max_buffer_bytes, json_t **ret_params, char **ret_error);

/* The node worker's --list entry: {"index": "all", "uuid": "node", "name", "devices", "fake"}. */
json_t *backend_node_info(const json_t *devices, bool fake);

/* Sets *ret_error to the formatted message (NULL when out of memory) and returns r. */
int backend_fail(char **ret_error, int r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
