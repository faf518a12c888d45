/* A job's cost, bounded from below at submit (issue 57): any submitter could hold a GPU for up
 * to job_timeout_max_s with valid params whose run would take months, and a sweep within every
 * bound ran whole, then failed for a result past max_result_bytes. The bound is the bytes each
 * timed and warm-up sample must move at the fastest nominal rate the GPU has for that path (its
 * PCIe link both ways at once, its model's memory bandwidth from models.c), plus a pipeline
 * kernel's work at more FMAs a second than any GPU does. Real runs are slower (latencies,
 * several measurements a sample), so a job refused here would have timed out whatever the GPU;
 * what the params do not bound (benchmarks spanning GPUs, latency, health) is not estimated.
 * Fake devices report a link (Gen5 x16) like real ones and are bounded the same way. */
#include "job_estimate.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "devices.h"
#include "jsonutil.h"
#include "models.h"
#include "pcie.h"
#include "problem.h"
#include "size.h"
#include "util.h"

/* Device memory no GPU model is known to pass (GB/s), for a GPU the model table does not know. */
#define ESTIMATE_MEMORY_GBPS_MAX 10000.0
/* FP32 FMAs a second beyond any GPU (an H200 does 3.4e13). */
#define ESTIMATE_FMA_PER_S_MAX 1e14
/* Bytes one timed sample takes in a result at the least: a measured time is written with all
 * its digits ("0.026820544594218523," is 21), never shorter than "0.0268," in practice. */
#define ESTIMATE_SAMPLE_BYTES_MIN 8
/* "123456 days (10666598400 s)" and more */
#define ESTIMATE_TEXT_MAX 64

static uint64_t num(const json_t *params, const char *key)
{
        const json_t *v = json_object_get(params, key);

        return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v)
                                                               : 0;
}

static double ms_at(double bytes, double gbps)
{
        return bytes / (gbps * 1e9) * 1e3;
}

/* The host link both ways at once, GB/s; 0 when the link's rate is unknown. */
static double link_gbps(const struct device *d)
{
        const json_t *pcie = json_object_get(d->info, "pcie");
        int gen = (int)num(pcie, "max_gen"), width = (int)num(pcie, "max_width");

        return 2 * pcie_link_gbps(gen, width);
}

static double memory_gbps(const struct device *d, const char **ret_from)
{
        const char *name = json_string_value(json_object_get(d->info, "name"));
        _cleanup_json_ json_t *e = name ? models_expectation(name) : NULL;
        const json_t *g = json_object_get(json_object_get(e, "model"), "memory_gbps");

        if (json_is_number(g) && json_number_value(g) > 0) {
                *ret_from = "the GPU model's nominal memory bandwidth";
                return json_number_value(g);
        }
        *ret_from = "more memory bandwidth than any GPU";
        return ESTIMATE_MEMORY_GBPS_MAX;
}

/* The touched-fraction points pipeline_sweep runs: min_touched, times 4, up to size. */
static uint64_t touched_points(uint64_t min_touched, uint64_t size)
{
        uint64_t n = 1;

        for (uint64_t t = min_touched ? min_touched : size; t < size; t *= 4)
                n++;
        return n;
}

/* Bytes one sample moves at the least, and the kernel work it does (ms); false for a benchmark
 * left unestimated. */
static bool sample_cost(const struct bench_def *b, const json_t *params, uint64_t *ret_bytes,
                        double *ret_kernel_ms, uint64_t *ret_measurements)
{
        uint64_t size = num(params, "size"), steps = num(params, "steps");
        const char *n = b->name;

        *ret_kernel_ms = 0;
        *ret_measurements = 0; /* not predictable */
        const char *access = json_string_value(json_object_get(params, "access"));

        if (b->multi_gpu || !strcmp(n, "health") || !strcmp(n, "latency"))
                return false;
        /* Strided or random access touches part of the buffer, as little as a page a stride. */
        if (access && strcmp(access, "sequential") != 0)
                return false;
        if (!strcmp(n, "sweep")) {
                const json_t *sizes = json_object_get(params, "sizes"), *v;
                uint64_t sum = 0;
                size_t i, modes = json_array_size(json_object_get(params, "modes"));
                json_array_foreach(sizes, i, v) sum +=
                    json_is_integer(v) ? (uint64_t)json_integer_value(v) : 0;
                *ret_bytes = sum * modes;
                *ret_measurements = json_array_size(sizes) * modes;
                return true;
        }
        if (!strcmp(n, "pipeline") || !strcmp(n, "pipeline_sweep")) {
                uint64_t touched = num(params, "touched") ?: size;
                uint64_t points = !strcmp(n, "pipeline")
                                      ? 1
                                      : 1 + touched_points(num(params, "min_touched"), size);
                *ret_bytes = size * (steps ?: 1) * points;
                /* "balanced" (a string) sizes the kernel to the copy: no more than that. */
                if (!strcmp(n, "pipeline") && num(params, "intensity"))
                        *ret_kernel_ms = (double)(steps ?: 1) * (double)num(params, "intensity") *
                                         (double)touched / 4 / ESTIMATE_FMA_PER_S_MAX * 1e3;
                return true;
        }
        *ret_bytes = size;
        if (!strcmp(n, "copy") || !strcmp(n, "d2d"))
                *ret_measurements = 1;
        return size > 0;
}

bool job_estimate(const struct bench_def *b, const json_t *params, const struct device *d,
                  struct job_estimate *ret)
{
        uint64_t bytes, measurements, iterations = num(params, "iterations");
        uint64_t samples = iterations + num(params, "warmup");
        double kernel_ms, gbps;
        const char *from = "its PCIe link both ways at once";

        if (!sample_cost(b, params, &bytes, &kernel_ms, &measurements))
                return false;
        gbps = !strcmp(b->name, "d2d") ? memory_gbps(d, &from) : link_gbps(d);
        if (gbps <= 0)
                return false;
        *ret = (struct job_estimate){
            .ms = (double)samples * (ms_at((double)bytes, gbps) + kernel_ms),
            .gbps = gbps,
            .rate_from = from,
            .samples = measurements * iterations,
            .result_bytes = measurements * iterations * ESTIMATE_SAMPLE_BYTES_MIN,
        };
        return true;
}

/* "3.2 s", "41 min", "316 days": a duration for people. */
static void duration_format(double ms, char *buf, size_t len)
{
        double s = ms / 1e3;

        if (s < 120)
                snprintf(buf, len, "%.1f s", s);
        else if (s < 2 * 3600)
                snprintf(buf, len, "%.0f min (%.0f s)", s / 60, s);
        else if (s < 2 * 86400)
                snprintf(buf, len, "%.0f h (%.0f s)", s / 3600, s);
        else
                snprintf(buf, len, "%.0f days (%.0f s)", s / 86400, s);
}

int job_estimate_check(const struct umd_config *cfg, const struct bench_def *b,
                       const json_t *params, const size_t *devs, size_t n_devs, unsigned timeout_s,
                       struct problem *p)
{
        for (size_t i = 0; i < n_devs; i++) {
                const struct device *d = devices_get(devs[i]);
                struct job_estimate e;
                char est[ESTIMATE_TEXT_MAX], max[SIZE_STRING_MAX];

                if (!job_estimate(b, params, d, &e))
                        continue;
                if (e.result_bytes > cfg->max_result_bytes)
                        return problem_set(p, 400, "params.iterations",
                                           "the result would hold %llu samples, at least %llu "
                                           "bytes: over max_result_bytes (%s); ask for fewer "
                                           "iterations or sizes",
                                           (unsigned long long)e.samples,
                                           (unsigned long long)e.result_bytes,
                                           size_format(cfg->max_result_bytes, max, sizeof(max)));
                if (cfg->job_estimate_factor == 0 ||
                    e.ms <= (double)cfg->job_estimate_factor * timeout_s * 1e3)
                        continue;
                duration_format(e.ms, est, sizeof(est));
                return problem_set(p, 400, "params",
                                   "estimated at least %s on device %zu (its bytes at %.0f GB/s, "
                                   "%s), over the limit of %llu s: %u times timeout_s (%u s; "
                                   "job_estimate_factor). Ask for less (size, iterations, steps, "
                                   "intensity) or a longer timeout_s (up to %u)",
                                   est, d->index, e.gbps, e.rate_from,
                                   (unsigned long long)cfg->job_estimate_factor * timeout_s,
                                   cfg->job_estimate_factor, timeout_s, cfg->job_timeout_max_s);
        }
        return 0;
}
