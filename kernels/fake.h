/* Fake devices for tests: an H200-like identity and benchmarks answered by a bandwidth model
 * instead of a GPU. Results have the shape documented in bench.h and always say "fake": true.
 *
 * Test-only params (refused on real devices): fake_delay_ms (sleep that long first,
 * cancellable), fake_hang (block forever, ignoring cancel), fake_crash (abort()),
 * fake_bandwidth_pct (scale every rate; 100 = the model as is). */
#pragma once

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

/* Real time a fake benchmark sleeps at most, whatever it simulates (fake_delay_ms aside). */
#define FAKE_MAX_SLEEP_MS 50

/* "GPU-fa4e0000-0000-4000-8000-00000000000K" style identity of fake device `index`. */
json_t *fake_device_info(unsigned index);
json_t *fake_list_devices(unsigned n);

/* Run `benchmark` (a catalog id) on fake device `device` (its --list entry). params as
 * normalized by the catalog (a missing one takes the catalog's default: the model has none of
 * its own). Limits are the worker's (backend_prepare), not the model's. Returns like bench_run:
 * 0 with *ret_result, or -EINVAL (unknown benchmark or bad parameter), -ENOTSUP (unsupported
 * on the device, or "not modelled": a benchmark or mode the model lacks is refused, never
 * guessed), -ECANCELED with *ret_error. */
int fake_run(const json_t *device, const char *benchmark, const json_t *params,
             volatile sig_atomic_t *cancel, json_t **ret_result, char **ret_error);

/* Whether the model covers catalog id `id` (on a GPU's worker or on the node worker). */
bool fake_models(const char *id);

/* The model's rate for a measurement name at 100%, in GB/s (0 when it has none): tests use it
 * to check scaling without copying the table. */
double fake_model_gbps(const char *measurement);

/* A benchmark spanning GPUs (catalog multi_gpu) on the node worker's fake devices (the --list
 * entries). The result has bench.h's shape plus "devices" and "links" (one per ordered pair:
 * src, dst, type "nvlink" | "pcie" | "host", nvlink_links, peer_access), and each measurement
 * names its src/dst GPU indexes. -ENOTSUP ("needs two GPUs") with fewer than two devices. */
int fake_run_multi(const json_t *devices, const char *benchmark, const json_t *params,
                   volatile sig_atomic_t *cancel, json_t **ret_result, char **ret_error);
