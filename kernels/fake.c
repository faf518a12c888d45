/* Owns fake devices: their identity and the run of the bandwidth model that answers the catalog
 * benchmarks it has a plan for (gpu_plans, node_plans: one per catalog id, checked by the
 * kernels_backend test) with a result of the real shape, quickly (real sleeping is capped at
 * FAKE_MAX_SLEEP_MS), with small deterministic jitter, and with the test-only fault injection the
 * supervisor tests use. Anything it lacks a model for is refused as "not modelled", never
 * guessed. Parameters and their defaults are the catalog's (it takes as many samples as a GPU
 * would), measurement names are catalog.h's MEAS_*. The rates (fake_model.c) follow the H200
 * facts in docs/design.md; they are a model, never a measurement. Each plan lives in the file of
 * its benchmark family (fake_model.h lists them). */
#include "fake.h"
#include "fake_model.h"
#include "train_report.h"

#include "backend.h"
#include "catalog.h"
#include "stats.h"
#include "util.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FAKE_DRIVER  13000
#define FAKE_RUNTIME 13000
#define FAKE_JITTER  0.015 /* +-1.5% */
/* A fake device's identity: "GPU-fa4e0000-0000-4000-8000-" and 12 hex digits (40 bytes and the
 * NUL) with room; "00000000:BB:00.0" (16 and the NUL) with room; a name a test gives
 * (UMD_FAKE_NAME, cut to FAKE_GIVEN_NAME_MAX) and " (fake)". */
#define FAKE_UUID_MAX       48
#define FAKE_BUS_ID_MAX     24
#define FAKE_NAME_MAX       96
#define FAKE_GIVEN_NAME_MAX 64

/* Tests degrade a fake device's link with UMD_FAKE_LINK="INDEX=GENxWIDTH,..." (for example
 * "1=4x8": fake device 1 trained at Gen4 x8 of its Gen5 x16), so the health verdict's link
 * check can be exercised without hardware. */
static void fake_link(unsigned index, int *gen, int *width)
{
        const char *env = getenv("UMD_FAKE_LINK");
        unsigned i, g, w;
        int n;

        *gen = 5;
        *width = 16;
        for (const char *p = env; p && *p;) {
                if (sscanf(p, "%u=%ux%u%n", &i, &g, &w, &n) == 3 && i == index && g >= 1 &&
                    g <= 6 && w >= 1 && w <= 32) {
                        *gen = (int)g;
                        *width = (int)w;
                }
                p = strchr(p, ',');
                if (p)
                        p++;
        }
}

/* Tests name a fake device another model with UMD_FAKE_NAME="INDEX=NAME,..." (for example
 * "1=NVIDIA Z999 (fake)"), so the model table's lookup, and a model nobody knows, can be
 * exercised; the name keeps saying that it is fake. */
static void fake_name(unsigned index, char *buf, size_t len)
{
        const char *env = getenv("UMD_FAKE_NAME");

        snprintf(buf, len, "NVIDIA H200 (fake)");
        for (const char *p = env; p && *p;) {
                unsigned i;
                int n = 0;

                if (sscanf(p, "%u=%n", &i, &n) == 1 && n > 0 && i == index) {
                        char given[FAKE_GIVEN_NAME_MAX];
                        size_t w = strcspn(p + n, ",");

                        if (w > 0 && w < sizeof(given)) {
                                snprintf(given, sizeof(given), "%.*s", (int)w, p + n);
                                snprintf(buf, len, "%s%s", given,
                                         strstr(given, "(fake)") ? "" : " (fake)");
                        }
                }
                p = strchr(p, ',');
                if (p)
                        p++;
        }
}

json_t *fake_device_info(unsigned index)
{
        char uuid[FAKE_UUID_MAX], bus[FAKE_BUS_ID_MAX], name[FAKE_NAME_MAX];
        int gen, width;

        fake_link(index, &gen, &width);
        fake_name(index, name, sizeof(name));

        snprintf(uuid, sizeof(uuid), "GPU-fa4e0000-0000-4000-8000-%012x", index);
        snprintf(bus, sizeof(bus), "00000000:%02X:00.0", (0x18 + index) & 0xff);
        return json_pack(
            "{s:s, s:I, s:s, s:s, s:s, s:I, s:I, s:i, s:i, s:i, s:i,"
            " s:b, s:b, s:b, s:b, s:b, s:b,"
            " s:{s:i, s:i, s:i, s:i}, s:b}",
            "uuid", uuid, "index", (json_int_t)index, "name", name, "pci_bus_id", bus,
            "compute_capability", "9.0", "memory_total_bytes", (json_int_t)FAKE_MEMORY_TOTAL,
            "memory_free_bytes", (json_int_t)(FAKE_MEMORY_TOTAL - FAKE_MEMORY_USED), "sm_count",
            132, "async_engine_count", 3, "driver_version", FAKE_DRIVER, "runtime_version",
            FAKE_RUNTIME, "concurrentManagedAccess", 1, "pageableMemoryAccess", 0,
            "pageableMemoryAccessUsesHostPageTables", 0, "canMapHostMemory", 1,
            "hostNativeAtomicSupported", 0, "directManagedMemAccessFromHost", 0, "pcie",
            "current_gen", gen, "current_width", width, "max_gen", 5, "max_width", 16, "fake", 1);
}

json_t *fake_list_devices(unsigned n)
{
        json_t *list = json_array();

        for (unsigned i = 0; list && i < n; i++)
                if (json_array_append_new(list, fake_device_info(i)) < 0) {
                        json_decref(list);
                        return NULL;
                }
        return list;
}

/* --- params: normalised by the catalog, so every one is present --- */

/* params with every parameter of b present (the catalog's defaults, never the model's own): the
 * worker sends them normalised already (backend_prepare), tests may not. NULL when invalid. */
static json_t *normalise(const struct bench_def *b, const json_t *params, char **ret_error)
{
        struct catalog_limits unlimited = {.max_buffer_bytes = UINT64_MAX};
        struct catalog_error err;
        json_t *norm = NULL;
        int r = catalog_validate(b, params, &unlimited, true, &norm, &err);

        if (r == -EINVAL)
                backend_fail(ret_error, r, "%s: %s", err.field, err.detail);
        else if (r < 0)
                backend_fail(ret_error, r, "out of memory");
        return r < 0 ? NULL : norm;
}

/* The models, by catalog id: what a GPU's worker runs, and what the node worker runs. A catalog
 * entry missing here is answered "not modelled" (and fails the kernels_backend test). */
struct fake_plan {
        const char *id;
        int (*plan)(struct fake_job *j);
};

static const struct fake_plan gpu_plans[] = {
    {"copy", fake_copy_plan_copy},
    {"copy_overlap", fake_copy_plan_overlap},
    {"zero_copy", fake_copy_plan_zero_copy},
    {"managed_on_demand", fake_managed_plan_on_demand},
    {"managed_prefetch", fake_managed_plan_prefetch},
    {"managed_advise", fake_managed_plan_advise},
    {"system_memory", fake_copy_plan_system_memory},
    {"latency", fake_copy_plan_latency},
    {"um_vs_explicit", fake_suite_plan_um_vs_explicit},
    {"sweep", fake_copy_plan_sweep},
    {"health", fake_suite_plan_health},
    {"d2d", fake_copy_plan_d2d},
    {"pipeline", fake_pipeline_plan},
    {"pipeline_sweep", fake_pipeline_plan_sweep},
    {"train_step", fake_train_plan_step},
    {"embedding_gather", fake_train_plan_embedding},
};

static const struct fake_plan node_plans[] = {
    {"peer", fake_multi_plan_peer},          {"managed_peer", fake_multi_plan_managed_peer},
    {"host_all", fake_multi_plan_host_all},  {"topology", fake_multi_plan_topology},
    {"health", fake_suite_plan_node_health},
};

static const struct fake_plan *plan_find(const struct fake_plan *plans, size_t n, const char *id)
{
        for (size_t i = 0; id && i < n; i++)
                if (strcmp(plans[i].id, id) == 0)
                        return &plans[i];
        return NULL;
}

bool fake_models(const char *id)
{
        return plan_find(gpu_plans, ELEMENTSOF(gpu_plans), id) ||
               plan_find(node_plans, ELEMENTSOF(node_plans), id);
}

/* only: one measurement of several (catalog.c's P_ONLY); the real benchmark skips the rest. */
static void plan_only(struct fake_job *j)
{
        const char *only = fake_model_param_str(j->params, "only");
        size_t n = 0;

        if (!only || strcmp(only, "all") == 0)
                return;
        for (size_t i = 0; i < j->n; i++)
                if (strcmp(j->m[i].name, only) == 0)
                        j->m[n++] = j->m[i];
        j->n = n;
}

static uint64_t splitmix64(uint64_t x)
{
        x += 0x9e3779b97f4a7c15ull;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        return x ^ (x >> 31);
}

static uint64_t hash_str(const char *s)
{
        uint64_t h = 1469598103934665603ull;

        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 1099511628211ull;
        return h;
}

/* Sleeps ms in short slices. -ECANCELED when *cancel is set. */
static int nap(uint64_t ms_x1000, volatile sig_atomic_t *cancel)
{
        uint64_t left = ms_x1000; /* microseconds */

        while (left > 0) {
                uint64_t step = left < 5000 ? left : 5000;
                struct timespec ts = {0, (long)step * 1000};

                if (cancel && *cancel)
                        return -ECANCELED;
                nanosleep(&ts, NULL);
                left -= step;
        }
        return cancel && *cancel ? -ECANCELED : 0;
}

static json_t *measure(const struct fake_meas *m, uint64_t seed, uint64_t salt, unsigned iterations,
                       double pct, double *ret_sim_ms)
{
        struct sample_stats st;
        double base_ms, *samples, sim = 0;
        uint64_t bytes = m->size * m->mode->bytes_mult;
        json_t *o = NULL;

        /* Rate scaled as a whole, overhead included, so gbps scales exactly with pct. */
        base_ms =
            ((double)bytes / (m->mode->gbps * m->scale * 1e9) * 1e3 + m->mode->overhead_us / 1e3) *
            100.0 / pct;
        if (m->ms > 0)
                base_ms = m->ms * 100.0 / pct;
        samples = calloc(iterations, sizeof(*samples));
        if (!samples)
                return NULL;
        for (unsigned i = 0; i < iterations; i++) {
                uint64_t h = splitmix64(seed ^ salt ^ ((uint64_t)i << 40));
                double u = (double)(h >> 11) / 9007199254740992.0; /* [0,1) */

                samples[i] = base_ms * (1.0 + FAKE_JITTER * (2 * u - 1));
                sim += samples[i];
        }
        if (stats_compute(samples, iterations, &st) == 0)
                o = stats_measurement_json(m->name, bytes, m->mode->counted, samples, iterations,
                                           &st, true);
        if (o && m->latency)
                json_object_set_new(o, "latency_us", json_real(st.median * 1e3));
        if (o && m->src >= 0)
                json_object_set_new(o, "src", json_integer(m->src));
        if (o && m->dst >= 0)
                json_object_set_new(o, "dst", json_integer(m->dst));
        if (o && m->method)
                json_object_set_new(o, "method", json_string(m->method));
        if (o && m->direction)
                json_object_set_new(o, "direction", json_string(m->direction));
        if (o && m->explain)
                json_object_set_new(o, "explain", fake_managed_explain_json(m->explain, m->size));
        if (o && m->extra)
                json_object_update(o, m->extra);
        free(samples);
        *ret_sim_ms = sim;
        return o;
}

/* Measures every planned measurement into a new array *ret_list, then spends a little real
 * time, proportional to the simulated time, so a job is observable as running, and stays
 * cancellable while doing it. 0, -ENOMEM, or -ECANCELED (*ret_list untouched on failure). */
static int measure_all(const struct fake_job *job, const char *benchmark, uint64_t seed,
                       unsigned iterations, unsigned warmup, double pct,
                       volatile sig_atomic_t *cancel, json_t **ret_list)
{
        double sim_total = 0, sim_ms, real_ms;
        json_t *list = json_array();

        if (!list)
                return -ENOMEM;
        for (size_t i = 0; i < job->n; i++) {
                json_t *m = measure(&job->m[i], seed, hash_str(benchmark) ^ splitmix64(i),
                                    iterations, pct, &sim_ms);

                if (!m || json_array_append_new(list, m) < 0) {
                        json_decref(list);
                        return -ENOMEM;
                }
                /* Warm-up samples are simulated too, only never reported. */
                sim_total += sim_ms * (iterations + warmup) / iterations;
        }
        real_ms = sim_total < FAKE_MAX_SLEEP_MS ? sim_total : FAKE_MAX_SLEEP_MS;
        if (nap((uint64_t)(real_ms * 1000), cancel) < 0) {
                json_decref(list);
                return -ECANCELED;
        }
        *ret_list = list;
        return 0;
}

/* One fake run, on a GPU (device) or on the node (devices): fault injection, the plan, the
 * measurements. The context and the result's other keys are the caller's. 0 with *ret_list,
 * *ret_params (normalised) and *ret_biggest, or negative with *ret_error. */
static int run_plan(const struct fake_plan *plans, size_t n_plans, const json_t *device,
                    unsigned n_gpus, const char *benchmark, const json_t *params,
                    volatile sig_atomic_t *cancel, json_t **ret_list, json_t **ret_params,
                    uint64_t *ret_biggest, json_t **ret_top, char **ret_error)
{
        const struct bench_def *b = catalog_find(benchmark);
        const struct fake_plan *plan = plan_find(plans, n_plans, benchmark);
        struct fake_job job = {.device = device, .n_gpus = n_gpus};
        json_t *norm, *list = NULL;
        uint64_t delay, pct, biggest = 0;
        int r;

        if (!plan)
                return backend_fail(ret_error, -ENOTSUP,
                                    "not modelled: fake devices have no model of %s here",
                                    benchmark);
        norm = normalise(b, params, ret_error);
        if (!norm)
                return -EINVAL;

        /* Fault injection first: these stand for a GPU that misbehaves whatever it was asked. */
        if (fake_model_param_u64(norm, "fake_crash"))
                abort();
        if (fake_model_param_u64(norm, "fake_hang"))
                for (;;)
                        pause(); /* cancel is ignored on purpose: only SIGKILL ends this */
        delay = fake_model_param_u64(norm, "fake_delay_ms");
        if (delay > 0 && nap(delay * 1000, cancel) < 0) {
                r = backend_fail(ret_error, -ECANCELED, "cancelled");
                goto out;
        }

        job.params = norm;
        job.size = fake_model_param_u64(norm, "size");
        r = plan->plan(&job);
        if (r < 0) {
                r = backend_fail(ret_error, r, "%s",
                                 r == -ENOMEM && !job.why[0] ? "out of memory" : job.why);
                goto out;
        }
        plan_only(&job);
        fake_managed_plan_explain(&job);
        for (size_t i = 0; i < job.n; i++)
                if (job.m[i].size > biggest)
                        biggest = job.m[i].size;
        pct = fake_model_param_u64(norm, "fake_bandwidth_pct");
        r = measure_all(&job, benchmark, fake_model_param_u64(norm, "seed"),
                        (unsigned)fake_model_param_u64(norm, "iterations"),
                        (unsigned)fake_model_param_u64(norm, "warmup"), (double)pct, cancel, &list);
        if (r < 0) {
                r = backend_fail(ret_error, r, r == -ECANCELED ? "cancelled" : "out of memory");
                goto out;
        }
        *ret_list = list;
        *ret_params = norm;
        norm = NULL;
        *ret_biggest = biggest;
        *ret_top = job.top;
        job.top = NULL;
out:
        for (size_t i = 0; i < job.n; i++)
                json_decref(job.m[i].extra);
        free(job.m);
        json_decref(job.top);
        json_decref(norm);
        return r;
}

int fake_run(const json_t *device, const char *benchmark, const json_t *params,
             volatile sig_atomic_t *cancel, json_t **ret_result, char **ret_error)
{
        const struct bench_def *b = benchmark ? catalog_find(benchmark) : NULL;
        json_t *list = NULL, *p = NULL, *ctx, *result, *top = NULL;
        uint64_t biggest = 0;
        int r;

        if (!b)
                return backend_fail(ret_error, -EINVAL, "unknown benchmark '%s'",
                                    benchmark ? benchmark : "(null)");
        if (b->multi_gpu)
                return backend_fail(ret_error, -ENOTSUP,
                                    "%s spans GPUs: it runs on the node worker, not on one GPU's",
                                    benchmark);
        r = run_plan(gpu_plans, ELEMENTSOF(gpu_plans), device, 1, benchmark, params, cancel, &list,
                     &p, &biggest, &top, ret_error);
        if (r < 0)
                return r;
        ctx = json_pack(
            "{s:O?, s:O?, s:O?, s:O?, s:I, s:s?, s:s?, s:I, s:I, s:b, s:i, s:i, s:I}",
            "device_uuid", json_object_get(device, "uuid"), "driver_version",
            json_object_get(device, "driver_version"), "runtime_version",
            json_object_get(device, "runtime_version"), "pcie", json_object_get(device, "pcie"),
            "buffer_bytes", (json_int_t)biggest,
            /* what the real benchmarks report where the param does not apply */
            "host_memory",
            fake_model_param_str(p, "host_memory") ? fake_model_param_str(p, "host_memory")
                                                   : "pinned",
            "access",
            fake_model_param_str(p, "access") ? fake_model_param_str(p, "access") : "sequential",
            "stride", (json_int_t)fake_model_param_u64(p, "stride"), "seed",
            (json_int_t)fake_model_param_u64(p, "seed"), "buffer_reused", 0, "warmup",
            (int)fake_model_param_u64(p, "warmup"), "iterations",
            (int)fake_model_param_u64(p, "iterations"), "fake_bandwidth_pct",
            (json_int_t)fake_model_param_u64(p, "fake_bandwidth_pct"));
        result = json_pack("{s:s, s:b, s:o, s:o, s:[s]}", "benchmark", benchmark, "fake", 1,
                           "measurements", list, "context", ctx, "notes",
                           "fake device: numbers come from a bandwidth model, not a GPU");
        if (result && strcmp(benchmark, "train_step") == 0)
                json_object_set_new(result, "placement_matrix",
                                    train_matrix(json_object_get(result, "measurements")));
        if (result && strcmp(benchmark, "embedding_gather") == 0)
                json_object_set_new(result, "embedding",
                                    embed_report(json_object_get(result, "measurements"),
                                                 (long long)fake_model_param_u64(p, "lookups")));
        json_decref(p);
        if (result && top)
                json_object_update(result, top);
        json_decref(top);
        if (!result)
                return backend_fail(ret_error, -ENOMEM, "out of memory");
        *ret_result = result;
        return 0;
}

int fake_run_multi(const json_t *devices, const char *benchmark, const json_t *params,
                   volatile sig_atomic_t *cancel, json_t **ret_result, char **ret_error)
{
        const struct bench_def *b = benchmark ? catalog_find(benchmark) : NULL;
        unsigned n = (unsigned)json_array_size(devices);
        json_t *list = NULL, *p = NULL, *result, *top = NULL;
        uint64_t biggest = 0;
        int r;

        if (!b || (!b->multi_gpu && strcmp(benchmark, "health") != 0))
                return backend_fail(ret_error, -EINVAL,
                                    "%s does not span GPUs: it runs on one GPU's worker",
                                    benchmark ? benchmark : "(null)");
        if (n < 2)
                return backend_fail(ret_error, -ENOTSUP, "%s needs two GPUs: this node has %u",
                                    benchmark, n);
        r = run_plan(node_plans, ELEMENTSOF(node_plans), NULL, n, benchmark, params, cancel, &list,
                     &p, &biggest, &top, ret_error);
        if (r < 0)
                return r;
        result = json_pack("{s:s, s:b, s:o, s:O, s:o, s:{s:I, s:I, s:i, s:i, s:I}, s:[s]}",
                           "benchmark", benchmark, "fake", 1, "measurements", list, "devices",
                           devices, "links", fake_multi_links_json(n), "context", "buffer_bytes",
                           /* the extended health tier's pairs may run at full_size */
                           (json_int_t)(strcmp(benchmark, "health") == 0
                                            ? biggest
                                            : fake_model_param_u64(p, "size")),
                           "seed", (json_int_t)fake_model_param_u64(p, "seed"), "warmup",
                           (int)fake_model_param_u64(p, "warmup"), "iterations",
                           (int)fake_model_param_u64(p, "iterations"), "fake_bandwidth_pct",
                           (json_int_t)fake_model_param_u64(p, "fake_bandwidth_pct"), "notes",
                           "fake devices: numbers come from a bandwidth model, not a GPU");
        json_decref(p);
        if (result && top) /* the extended health tier's plan */
                json_object_update(result, top);
        json_decref(top);
        if (!result)
                return backend_fail(ret_error, -ENOMEM, "out of memory");
        *ret_result = result;
        return 0;
}
