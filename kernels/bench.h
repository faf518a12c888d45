/* The benchmarks umd-worker runs, behind a plain C interface (the .cu files implement it; the
 * worker's main loop, IPC and fake devices never see CUDA types).
 *
 * Every benchmark returns one result object of this shape, which fake devices imitate:
 * {
 *   "benchmark": "copy", "fake": false,
 *   "measurements": [               one per variant measured (h2d, d2h, on_demand, ...)
 *     { "name": "h2d", "bytes": N,
 *       "bytes_counted": "one direction" | "both directions" | "read+write",
 *       "samples_ms": [...],         every timed sample, in order
 *       "stats": {"min_ms","median_ms","mean_ms","max_ms","stddev_ms","cv"},
 *       "gbps": X,                   decimal GB/s at the median sample
 *       "verified": true }
 *   ],
 *   "context": { "device_uuid", "driver_version", "runtime_version", "pcie": {...},
 *                "buffer_bytes", "host_memory", "access", "stride", "seed", "buffer_reused",
 *                "warmup", "iterations" },
 *   "notes": [ "..." ]               optional findings in words
 * }
 */
#pragma once

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

struct bench_ctx; /* one per worker: the CUDA context, its streams and buffer pool */

struct bench_limits {
        uint64_t max_buffer_bytes;
        uint64_t pool_bytes;            /* pinned + device buffers kept between jobs */
        uint64_t managed_reserve_bytes; /* free GPU memory never taken below this */
};

/* Create the context on CUDA device `ordinal` with its dedicated non-blocking streams.
 * device_info is the --list entry for this device (kept for result context).
 * 0, or negative with *ret_error (malloc'd) saying why. */
int bench_ctx_create(int ordinal, const json_t *device_info, const struct bench_limits *lim,
                     struct bench_ctx **ret, char **ret_error);
void bench_ctx_destroy(struct bench_ctx *ctx);
/* Give back the buffer pool (pinned host and device buffers); the context and its streams stay.
 * Returns the bytes freed. The next job allocates again. */
uint64_t bench_pool_release(struct bench_ctx *ctx);

/* Run one benchmark with normalized params (catalog_validate's output; limits are checked by
 * the worker, kernels/backend.c, before). cancel is polled
 * between samples. 0 with *ret_result, or negative with *ret_error: -ENOTSUP (unsupported on
 * this device), -ECANCELED, -ENOMEM (size beyond free memory / limits), -EIO (CUDA error or
 * verification mismatch). */
int bench_run(struct bench_ctx *ctx, const char *benchmark, const json_t *params,
              volatile sig_atomic_t *cancel, json_t **ret_result, char **ret_error);

/* Whether bench_run has code for catalog id `id` (its dispatch table). */
bool bench_implements(const char *id);

/* The device list for `umd-worker --list` (array; empty with *ret_why when no driver/GPU). */
json_t *bench_list_devices(char **ret_why);

/* The node worker (umd-worker --device all): one bench_ctx per GPU of the host, for the
 * benchmarks that span GPUs (catalog multi_gpu: peer, managed_peer, host_all, topology). Their
 * results add "devices" (index, uuid, name, pcie of each GPU) and "links" (one per ordered pair:
 * src, dst, type "nvlink" | "pcie" | "host", nvlink_links, peer_access, performance_rank,
 * source) to the shape above, and each measurement names its "src" and "dst" GPU indexes.
 * devices: the --list array. 0, or negative with *ret_error. */
struct bench_multi;
int bench_multi_create(const json_t *devices, const struct bench_limits *lim,
                       struct bench_multi **ret, char **ret_error);
void bench_multi_destroy(struct bench_multi *m);
uint64_t bench_multi_pool_release(struct bench_multi *m);
/* Whether bench_multi_run has code for catalog id `id`. */
bool bench_multi_implements(const char *id);
/* Like bench_run; -ENOTSUP with "needs two GPUs" on a host with fewer. */
int bench_multi_run(struct bench_multi *m, const char *benchmark, const json_t *params,
                    volatile sig_atomic_t *cancel, json_t **ret_result, char **ret_error);
