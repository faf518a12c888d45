/* Owns fake devices: their identity and a bandwidth model that answers the catalog benchmarks
 * it has a plan for (gpu_plans, node_plans: one per catalog id, checked by the kernels_backend
 * test) with a result of the real shape, quickly (real sleeping is capped at FAKE_MAX_SLEEP_MS),
 * with small deterministic jitter, and with the test-only fault injection the supervisor tests
 * use. Anything it lacks a model for is refused as "not modelled", never guessed. Parameters and
 * their defaults are the catalog's (it takes as many samples as a GPU would), measurement names
 * are catalog.h's MEAS_*. Rates follow the H200 facts in DESIGN.md; they are a model, never a
 * measurement. */
#include "fake.h"
#include "fake_train.h"
#include "train_report.h"

#include "backend.h"
#include "catalog.h"
#include "stats.h"
#include "util.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FAKE_MEMORY_TOTAL 150754820096ull /* what an H200 reports */
#define FAKE_MEMORY_USED  (600ull << 20)  /* a context's worth */
#define FAKE_DRIVER       13000
#define FAKE_RUNTIME      13000
#define FAKE_JITTER       0.015 /* +-1.5% */

/* One rate per thing measured, keyed by model name (a sweep mode where one exists). The
 * measurement a result shows carries the real benchmark's name (kernels/bench.cu's list). */
static const struct fake_mode {
        const char *key;
        double gbps;         /* at 100% bandwidth */
        double overhead_us;  /* per sample, whatever the size */
        unsigned bytes_mult; /* bytes counted per buffer byte */
        const char *counted; /* bench.h's "bytes_counted" */
} modes[] = {
    {"pinned_h2d", 55.5, 8, 1, "one direction"},
    {"pinned_d2h", 55.3, 8, 1, "one direction"},
    {"bidir", 101.5, 10, 2, "both directions"},
    {"pageable_h2d", 9.3, 15, 1, "one direction"},
    {"pageable_d2h", 17.5, 15, 1, "one direction"},
    {"pageable_bidir", 24.0, 20, 2, "both directions"},
    /* copy_overlap's light XOR kernel takes ~2% of the copy: serial is copy + kernel, the
     * overlapped copies on one stream hide all but the last chunk's kernel (issue 21). */
    {"overlapped", 55.0, 20, 1, "one direction"},
    {"serial", 54.0, 20, 1, "one direction"},
    {"kernel_xor", 3000.0, 5, 2, "read+write"},
    /* pipeline: every strategy's step time comes from pipe_model(), these name the rate of the
     * part the model has no better number for */
    {"pipeline", 1.0, 0, 1, "one direction"},
    {"train_step", 1.0, 0, 1, "placed bytes"}, /* fake_train.c's model gives each time */
    {"zero_copy_read", 52.0, 6, 1, "one direction"},
    {"zero_copy", 84.6, 6, 2, "read+write"},
    {"managed_on_demand", 8.5, 30, 1, "one direction"},
    {"cpu_on_demand", 6.2, 30, 1, "one direction"},
    {"managed_prefetch", 48.0, 15, 1, "one direction"},
    {"prefetch", 51.0, 12, 1, "one direction"},
    {"prefetch_to_host", 49.5, 12, 1, "one direction"},
    {"read_mostly.read", 45.0, 30, 1, "one direction"},
    {"read_mostly.write", 0.33, 30, 1, "one direction"},
    {"preferred_location_host.read", 40.0, 15, 1, "one direction"},
    {"preferred_location_host.write", 38.0, 15, 1, "one direction"},
    {"preferred_location_device.read", 46.0, 30, 1, "one direction"},
    {"preferred_location_device.write", 46.0, 30, 1, "one direction"},
    {"accessed_by.read", 40.0, 15, 1, "one direction"},
    {"accessed_by.write", 38.0, 15, 1, "one direction"},
    {"system_memory", 30.0, 30, 2, "read+write"},
    /* latency: tiny sizes, so the overhead is what is measured */
    {"latency.pinned", 55.5, 2.2, 1, "one direction"},
    {"latency.pageable", 9.3, 5.5, 1, "one direction"},
    {"managed_fault_single", 1e-4, 25, 1, "one word touched per page"},
    {"managed_fault_bulk", 1e-3, 4, 1, "one word touched per page"},
    {"managed_resident", 1e-2, 2, 1, "one word touched per page"},
    /* Between GPUs and within one (H200 pairs joined by NV18: 18 links x 25 GB/s a direction). */
    {"d2d_ce", 3900.0, 2, 2, "read+write"},
    {"d2d_sm", 4100.0, 2, 2, "read+write"},
    {"peer_ce_uni", 389.0, 2, 1, "one direction"},
    {"peer_ce_bidir", 770.0, 2, 2, "both directions"},
    {"peer_sm_uni", 395.0, 2, 1, "one direction"},
    {"peer_sm_bidir", 720.0, 2, 2, "both directions"},
    {"managed_peer_on_demand", 30.0, 40, 1, "one direction"},
    {"managed_peer_prefetch", 280.0, 20, 1, "one direction"},
    {"managed_peer_copy", 389.0, 2, 1, "one direction"},
    {"host_all_h2d", 110.0, 10, 1, "one direction"},
    {"host_all_d2h", 109.0, 10, 1, "one direction"},
};

/* Issue 17's explain pass, modelled per managed measurement (model key): what CUPTI's Unified
 * Memory counters would say for a buffer of `size` bytes. Shapes, not measurements: on-demand
 * faults migrate 64 KiB on average and fault every 4 KiB page; prefetches move 2 MiB blocks
 * without faults; ReadMostly writes fault twice a page (read, then write) and thrash. */
static const struct fake_explain {
        const char *key;
        unsigned htod_per_mib, dtoh_per_mib; /* migrated MiB per buffer MiB (x100) */
        unsigned migration_kib;              /* mean migration size */
        unsigned gpu_faults_per_mib, cpu_faults_per_mib, thrashing_per_mib, throttling_per_mib;
        unsigned remote_map_per_mib;
} explains[] = {
    {"managed_on_demand", 100, 0, 64, 256, 0, 0, 0, 0},
    {"managed_on_demand.warp_per_chunk", 100, 0, 512, 16, 0, 0, 0, 0},
    {"cpu_on_demand", 0, 100, 4, 0, 256, 0, 0, 0},
    {"managed_prefetch", 100, 0, 2048, 0, 0, 0, 0, 0},
    {"prefetch", 100, 0, 2048, 0, 0, 0, 0, 0},
    {"prefetch_to_host", 0, 100, 2048, 0, 0, 0, 0, 0},
    {"read_mostly.read", 100, 0, 64, 256, 0, 0, 0, 0},
    {"read_mostly.write", 100, 0, 4, 512, 0, 16, 16, 0},
    {"preferred_location_host.read", 0, 0, 0, 16, 0, 0, 0, 1},
    {"preferred_location_host.write", 0, 0, 0, 16, 0, 0, 0, 1},
    {"preferred_location_device.read", 100, 0, 64, 256, 0, 0, 0, 0},
    {"preferred_location_device.write", 100, 0, 64, 256, 0, 0, 0, 0},
    {"accessed_by.read", 0, 0, 0, 16, 0, 0, 0, 1},
    {"accessed_by.write", 0, 0, 0, 16, 0, 0, 0, 1},
};

static const struct fake_explain *explain_find(const char *key)
{
        for (size_t i = 0; i < ELEMENTSOF(explains); i++)
                if (strcmp(explains[i].key, key) == 0)
                        return &explains[i];
        return NULL;
}

/* The on-demand pass's second view and fault cost (kernels/bench_managed.cu), modelled on the
 * H200's 1 GiB run: a 2 MiB burst every 0.3 ms, the kernel waiting 97% of its time, 7.2 GB/s
 * while pages moved against 55 for a pinned copy, 43.5 us a single fault, prefetch + kernel at
 * 42 GB/s. */
static void fake_explain_on_demand(json_t *x, uint64_t size, bool chunks)
{
        double bytes = (double)size, rate = 7.2, pinned = 55.0, fault_us = 43.5;
        json_int_t bursts = (json_int_t)((size + (2u << 20) - 1) / (2u << 20));
        double kernel_ms = bytes / (rate * 1e6), pk_ms = bytes / (42.0 * 1e6);
        double est = (double)bursts * fault_us / 1e3, gap = kernel_ms - pk_ms;

        if (bursts < 1)
                bursts = 1;
        json_object_set_new(
            x, "arrival",
            json_pack("{s:b, s:s, s:I, s:f, s:f, s:f, s:f, s:I, s:I, s:f, s:f, s:f}", "available",
                      1, "source", "model", "bytes", (json_int_t)size, "kernel_ms", kernel_ms,
                      "span_ms", kernel_ms, "waited_ms", 0.97 * kernel_ms, "waited_share", 0.97,
                      "bursts", bursts, "burst_gap_ns", (json_int_t)10000, "mean_burst_bytes",
                      bytes / (double)bursts, "rate_gbps", chunks ? rate * 1.1 : rate,
                      "pinned_h2d_gbps", pinned));
        json_object_set_new(x, "fault_cost",
                            json_pack("{s:f, s:I, s:s, s:f, s:f, s:f, s:f, s:f}", "fault_single_us",
                                      fault_us, "batches", bursts, "batches_from", "arrival bursts",
                                      "estimate_ms", est, "on_demand_ms", kernel_ms,
                                      "prefetch_kernel_ms", pk_ms, "gap_ms", gap, "explained_share",
                                      gap > 0 ? est / gap : 0.0));
        json_object_set_new(x, "views_agree", json_true());
}

/* The explain object of bench.h's real one (kernels/explain.h), marked fake. */
static json_t *fake_explain_json(const struct fake_explain *x, uint64_t size)
{
        double mib = (double)size / (1 << 20);
        json_int_t htod = (json_int_t)((double)size * x->htod_per_mib / 100);
        json_int_t dtoh = (json_int_t)((double)size * x->dtoh_per_mib / 100);
        json_int_t mig = (json_int_t)x->migration_kib << 10;
        json_int_t n_htod = htod && mig ? (htod + mig - 1) / mig : 0;
        json_int_t n_dtoh = dtoh && mig ? (dtoh + mig - 1) / mig : 0;
        json_int_t faults = (json_int_t)(mib * x->gpu_faults_per_mib);

        /* 19 keys: 2 flags, 4 byte and migration counts, 2 means, 9 event counts, the pass time,
         * completeness; then the pieces, and the on-demand views. */
        json_t *o = json_pack(
            "{s:b, s:b, s:I, s:I, s:I, s:I, s:f, s:f, s:I, s:I, s:I, s:I, s:I, s:I,"
            " s:I, s:I, s:I, s:f, s:b}",
            "available", 1, "fake", 1, "bytes_htod", htod, "bytes_dtoh", dtoh, "migrations_htod",
            n_htod, "migrations_dtoh", n_dtoh, "mean_migration_htod_bytes",
            n_htod ? (double)htod / n_htod : 0.0, "mean_migration_dtoh_bytes",
            n_dtoh ? (double)dtoh / n_dtoh : 0.0, "gpu_page_faults", faults, "gpu_fault_records",
            faults, "cpu_page_faults", (json_int_t)(mib * x->cpu_faults_per_mib),
            "thrashing_events", (json_int_t)(mib * x->thrashing_per_mib), "thrashing_bytes",
            (json_int_t)(mib * x->thrashing_per_mib) * 4096, "throttling_events",
            (json_int_t)(mib * x->throttling_per_mib), "remote_map_events",
            (json_int_t)(mib * x->remote_map_per_mib), "remote_map_bytes",
            (json_int_t)(mib * x->remote_map_per_mib) * 65536, "dropped_records", (json_int_t)0,
            "pass_ms", 0.0, "complete", 1);
        uint64_t piece = size < (64u << 20) ? size : (64u << 20);
        if (o) {
                json_object_set_new(
                    o, "pieces",
                    json_integer(piece ? (json_int_t)((size + piece - 1) / piece) : 0));
                json_object_set_new(o, "piece_bytes", json_integer((json_int_t)piece));
                json_object_set_new(o, "piece_bytes_tried", json_pack("[I]", (json_int_t)piece));
                if (strncmp(x->key, "managed_on_demand", 17) == 0)
                        fake_explain_on_demand(o, size, strstr(x->key, "warp_per_chunk") != NULL);
        }
        return o;
}

static const struct fake_mode *mode_find(const char *key)
{
        for (size_t i = 0; i < ELEMENTSOF(modes); i++)
                if (strcmp(modes[i].key, key) == 0)
                        return &modes[i];
        return NULL;
}

double fake_model_gbps(const char *key)
{
        const struct fake_mode *m = key ? mode_find(key) : NULL;

        return m ? m->gbps : 0;
}

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
                        char given[64];
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
        char uuid[48], bus[24], name[96];
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

static uint64_t param_u64(const json_t *params, const char *key)
{
        json_t *v = json_object_get(params, key);

        if (json_is_integer(v) && json_integer_value(v) >= 0)
                return (uint64_t)json_integer_value(v);
        return json_is_true(v);
}

/* NULL for a parameter the benchmark does not take. */
static const char *param_str(const json_t *params, const char *key)
{
        return json_string_value(json_object_get(params, key));
}

static bool list_has(const json_t *params, const char *key, const char *value)
{
        size_t i;
        json_t *v;

        json_array_foreach(json_object_get(params, key), i, v)
        {
                if (streq_ptr(json_string_value(v), value))
                        return true;
        }
        return false;
}

/* --- the run --- */

struct fake_meas {
        const struct fake_mode *mode;
        char name[64];
        uint64_t size; /* buffer bytes */
        bool latency;  /* also report "latency_us" */
        /* Multi-GPU measurements: the pair (or one GPU: src) and how, else src = -1. */
        int src, dst;
        const char *method, *direction;
        double scale; /* the pair's link against the model's NV18 (1 when not a pair) */
        const struct fake_explain *explain; /* explain: true on a managed measurement */
        double ms;     /* > 0: the modelled time of a sample (pipeline), instead of the rate */
        json_t *extra; /* merged into the measurement (owned) */
};

/* What a plan gets, and the measurements it fills. */
struct fake_job {
        const json_t *device; /* one GPU's --list entry (NULL on the node worker) */
        const json_t *params; /* normalised */
        unsigned n_gpus;      /* the node worker's GPUs */
        uint64_t size;        /* params' size */
        struct fake_meas *m;
        size_t n, cap;
        json_t *top;   /* keys added to the result (pipeline's "intensity"), owned */
        char why[160]; /* why a plan failed */
};

/* Adds measurement `name` modelled by `key`. -ENOTSUP when the model has no such key: a
 * measurement without a model is refused, never guessed. */
static int add(struct fake_job *j, const char *name, const char *key, uint64_t size)
{
        const struct fake_mode *mode = mode_find(key);

        if (!mode) {
                snprintf(j->why, sizeof(j->why), "not modelled: fake devices have no model of %s",
                         key);
                return -ENOTSUP;
        }
        if (j->n == j->cap) {
                size_t ncap = j->cap ? j->cap * 2 : 8;
                struct fake_meas *nm = realloc(j->m, ncap * sizeof(*nm));

                if (!nm)
                        return -ENOMEM;
                j->m = nm;
                j->cap = ncap;
        }
        j->m[j->n] =
            (struct fake_meas){.mode = mode, .size = size, .src = -1, .dst = -1, .scale = 1};
        snprintf(j->m[j->n].name, sizeof(j->m[j->n].name), "%s", name);
        j->n++;
        return 0;
}

/* Measurements named like their model keys, at the job's size. */
static int add_same(struct fake_job *j, const char *const *keys, size_t n)
{
        int r = 0;

        for (size_t i = 0; r == 0 && i < n; i++)
                r = add(j, keys[i], keys[i], j->size);
        return r;
}

/* One model key per name, at the job's size. */
static int add_named(struct fake_job *j, const char *const (*pairs)[2], size_t n)
{
        int r = 0;

        for (size_t i = 0; r == 0 && i < n; i++)
                r = add(j, pairs[i][0], pairs[i][1], j->size);
        return r;
}

static bool pageable(const struct fake_job *j)
{
        return streq_ptr(param_str(j->params, "host_memory"), "pageable");
}

static int plan_copy(struct fake_job *j)
{
        const char *dir = param_str(j->params, "direction");

        if (streq_ptr(dir, MEAS_BIDIR))
                return add(j, MEAS_BIDIR, pageable(j) ? "pageable_bidir" : "bidir", j->size);
        if (streq_ptr(dir, MEAS_D2H))
                return add(j, MEAS_D2H, pageable(j) ? MEAS_PAGEABLE_D2H : MEAS_PINNED_D2H, j->size);
        return add(j, MEAS_H2D, pageable(j) ? MEAS_PAGEABLE_H2D : MEAS_PINNED_H2D, j->size);
}

static int plan_copy_overlap(struct fake_job *j)
{
        static const char *const pairs[][2] = {{MEAS_OVERLAPPED, MEAS_OVERLAPPED},
                                               {MEAS_SERIAL, MEAS_SERIAL},
                                               {MEAS_COPY_ALONE, MEAS_PINNED_H2D},
                                               {MEAS_KERNEL_ALONE, "kernel_xor"}};
        return add_named(j, pairs, ELEMENTSOF(pairs));
}

/* --- pipeline (issue 21): a step's time by the same rules the GPU follows --- */

#define PIPE_COPY_GBPS      55.5 /* pinned H2D */
#define PIPE_D2H_GBPS       55.3 /* writeback */
#define PIPE_PAGEABLE_GBPS  9.3
#define PIPE_ON_DEMAND_GBPS 8.5 /* managed pages faulted in by the kernel */
#define PIPE_PREFETCH_GBPS  51.0
/* chunk_issue copy_stream: what each managed prefetch adds when all of them wait their turn on
 * one stream (on the H100, copy_stream took 4-7 ms longer than round robin at 16 chunks of 1 GiB
 * and 11-13 ms at 64: bench/results/gpu-h100-1207); round robin overlaps it with the others */
#define PIPE_PREFETCH_CALL_MS 0.2
#define PIPE_ZERO_COPY_GBPS   52.0   /* a kernel reading mapped host memory */
#define PIPE_GATHER_GBPS      20.0   /* 4 KiB rows of a 2D copy */
#define PIPE_HBM_GBPS         3000.0 /* the kernel's own reads */
#define PIPE_FMA_PER_S        3.2e13 /* an H200's FP32 FMAs a second */
#define PIPE_PAGE             4096ull
/* batch host_written (issue 60): the host's copy of a batch, a CPU thread's rate and the most
 * the threads together reach; into managed memory whose pages are on the GPU, each page faults
 * back first (a thread's rate; the driver's fault path serialises beyond PIPE_FAULT_MAX_GBPS) */
#define PIPE_WRITE_GBPS     10.0
#define PIPE_WRITE_MAX_GBPS 60.0
#define PIPE_FAULT_GBPS     2.5
#define PIPE_FAULT_MAX_GBPS 8.0

static double ms_at(double bytes, double gbps)
{
        return bytes / (gbps * 1e9) * 1e3;
}

/* The kernel alone: its reads, then intensity FMAs per float. */
static double pipe_kernel_ms(uint64_t intensity, uint64_t touched)
{
        return ms_at((double)touched, PIPE_HBM_GBPS) +
               (double)intensity * (double)touched / 4 / PIPE_FMA_PER_S * 1e3 + 0.005;
}

/* The intensity at which the kernel takes as long as the copy. */
static uint64_t pipe_balanced(uint64_t size)
{
        double copy = ms_at((double)size, PIPE_COPY_GBPS),
               per = pipe_kernel_ms(1, size) - pipe_kernel_ms(0, size);
        double k = (copy - pipe_kernel_ms(0, size)) / per;
        return k < 1 ? 1 : (uint64_t)(k + 0.5);
}

struct pipe_point {
        uint64_t size, touched, weights, writeback, intensity, chunks, streams, steps, writers;
        bool clustered, written;
        bool copy_rr, prefetch_rr; /* chunk_issue: pinned copies, managed prefetches round robin */
};

/* A chunked step of n chunks moving `move` ms and computing `kern` ms: the longer half plus one
 * chunk of the shorter; one stream overlaps nothing. Both chunk_issue shapes get this rule: round
 * robin adds each stream's own turns, (move + kern) / streams, which with two streams or more
 * never exceeds the longer half, so an ideal schedule cannot tell them apart. What the driver
 * adds is the caller's: managed prefetches issued on one stream (copy_stream, or a single stream)
 * pay PIPE_PREFETCH_CALL_MS each in series (docs/design.md, issue 60). */
static double pipe_chunked_ms(const struct pipe_point *p, double move, double kern, double n)
{
        if (p->streams < 2)
                return move + kern;
        return fmax(move, kern) + fmin(move, kern) / n;
}

static bool pipe_managed(const char *name)
{
        return streq_ptr(name, MEAS_PIPE_ON_DEMAND) || streq_ptr(name, MEAS_PIPE_PREFETCH) ||
               streq_ptr(name, MEAS_PIPE_PREFETCH_CHUNKED) ||
               streq_ptr(name, MEAS_PIPE_PREFETCH_BATCH) ||
               streq_ptr(name, MEAS_PIPE_DISCARD_PREFETCH);
}

/* The host's write of one batch into strategy name's memory (batch host_written), ms: a copy at
 * the writers' rate, and where the pages are managed and on the GPU (every managed strategy
 * but discard-and-prefetch, whose discard leaves them on the host without their data) the CPU's
 * faults as well. */
static double pipe_write_ms(const char *name, const struct pipe_point *p)
{
        double w = (double)p->writers, size = (double)p->size;
        double t = ms_at(size, fmin(PIPE_WRITE_GBPS * w, PIPE_WRITE_MAX_GBPS));
        if (pipe_managed(name) && !streq_ptr(name, MEAS_PIPE_DISCARD_PREFETCH))
                t += ms_at(size, fmin(PIPE_FAULT_GBPS * w, PIPE_FAULT_MAX_GBPS));
        return t;
}

/* First and steady step of one strategy (ms): serial is copy + kernel, overlapped the limit
 * plus one chunk of the shorter half, on demand the kernel plus the touched bytes at the fault
 * rate; managed weights are faulted (or prefetched) in the first step only. */
static void pipe_model(const char *name, const struct pipe_point *p, double *ret_first,
                       double *ret_steady)
{
        double size = (double)p->size, touched = (double)p->touched;
        double copy = ms_at(size, PIPE_COPY_GBPS), kern = pipe_kernel_ms(p->intensity, p->touched);
        double wb = ms_at((double)p->writeback, PIPE_D2H_GBPS);
        double weights = ms_at((double)p->weights, PIPE_HBM_GBPS), first_extra = 0, t;
        double n = (double)(p->chunks < p->size / PIPE_PAGE ? p->chunks : p->size / PIPE_PAGE);

        if (n < 1)
                n = 1;
        if (streq_ptr(name, MEAS_COPY_ALONE)) {
                t = copy;
                weights = wb = 0;
        } else if (streq_ptr(name, MEAS_KERNEL_ALONE)) {
                t = kern;
                wb = 0;
        } else if (streq_ptr(name, MEAS_PIPE_SERIAL)) {
                t = copy + kern;
        } else if (streq_ptr(name, MEAS_PIPE_OVERLAPPED)) {
                t = pipe_chunked_ms(p, copy, kern, n);
                wb /= p->streams > 1 ? n : 1;
        } else if (streq_ptr(name, MEAS_PIPE_PAGEABLE)) {
                t = ms_at(size, PIPE_PAGEABLE_GBPS) + kern;
        } else if (streq_ptr(name, MEAS_PIPE_ON_DEMAND)) {
                t = kern + ms_at(touched, PIPE_ON_DEMAND_GBPS);
                first_extra = ms_at((double)p->weights, PIPE_ON_DEMAND_GBPS);
        } else if (streq_ptr(name, MEAS_PIPE_PREFETCH)) {
                t = ms_at(size, PIPE_PREFETCH_GBPS) + kern;
                first_extra = ms_at((double)p->weights, PIPE_PREFETCH_GBPS);
        } else if (streq_ptr(name, MEAS_PIPE_PREFETCH_BATCH)) {
                /* one batched call completes as a whole: nothing overlaps within the step */
                t = ms_at(size, PIPE_PREFETCH_GBPS) + kern;
                first_extra = ms_at((double)p->weights, PIPE_PREFETCH_GBPS);
        } else if (streq_ptr(name, MEAS_PREFETCH_ALONE)) {
                t = ms_at(size, PIPE_PREFETCH_GBPS);
                weights = wb = 0;
        } else if (streq_ptr(name, MEAS_PIPE_PREFETCH_CHUNKED) ||
                   streq_ptr(name, MEAS_PIPE_DISCARD_PREFETCH)) {
                double pf = ms_at(size, PIPE_PREFETCH_GBPS);
                if (!p->prefetch_rr || p->streams < 2) /* one stream: in series either way */
                        pf += n * PIPE_PREFETCH_CALL_MS;
                t = pipe_chunked_ms(p, pf, kern, n);
                first_extra = ms_at((double)p->weights, PIPE_PREFETCH_GBPS);
        } else if (streq_ptr(name, MEAS_PIPE_ZERO_COPY)) {
                t = fmax(ms_at(touched, PIPE_ZERO_COPY_GBPS), kern);
        } else { /* MEAS_PIPE_GATHER */
                t = ms_at(touched, p->clustered ? PIPE_COPY_GBPS : PIPE_GATHER_GBPS) + kern;
        }
        *ret_steady = t + weights + wb;
        *ret_first = *ret_steady + first_extra;
        /* host_written, double-buffered: the first step waits for its write, each later one
         * for the longer of its write (made during the step before) and its GPU time. */
        if (p->written && !streq_ptr(name, MEAS_COPY_ALONE) &&
            !streq_ptr(name, MEAS_KERNEL_ALONE) && !streq_ptr(name, MEAS_PREFETCH_ALONE)) {
                double w = pipe_write_ms(name, p);
                *ret_first += w;
                *ret_steady = fmax(*ret_steady, w);
        }
}

/* What a strategy's measurement says beyond its times: its host write (host_written), the
 * writers of host_write, a chunked one's chunking and how its chunks were issued. */
static void pipe_extras(json_t *x, const char *s, const struct pipe_point *p, bool single)
{
        bool chunked = streq_ptr(s, MEAS_PIPE_OVERLAPPED) ||
                       streq_ptr(s, MEAS_PIPE_PREFETCH_CHUNKED) ||
                       streq_ptr(s, MEAS_PIPE_DISCARD_PREFETCH);
        bool rr = streq_ptr(s, MEAS_PIPE_OVERLAPPED) ? p->copy_rr : p->prefetch_rr;

        if (p->written && !single)
                json_object_set_new(x, "host_write_ms", json_real(pipe_write_ms(s, p)));
        if (streq_ptr(s, MEAS_HOST_WRITE))
                json_object_set_new(x, "writers", json_integer((json_int_t)p->writers));
        if (chunked || streq_ptr(s, MEAS_PIPE_PREFETCH_BATCH))
                json_object_update_new(x, json_pack("{s:I, s:I}", "chunks", (json_int_t)p->chunks,
                                                    "streams", (json_int_t)p->streams));
        if (chunked)
                json_object_set_new(
                    x, "chunk_issue",
                    json_string(rr ? PIPE_ISSUE_ROUND_ROBIN : PIPE_ISSUE_COPY_STREAM));
}

/* Whether a strategy of the list prefetches managed memory: then the run measures the prefetch
 * alone, as the real one does. */
static bool pipe_prefetching(const json_t *strategies)
{
        size_t i;
        json_t *v;
        json_array_foreach(strategies, i, v)
        {
                const char *s = json_string_value(v);
                if (pipe_managed(s) && !streq_ptr(s, MEAS_PIPE_ON_DEMAND))
                        return true;
        }
        return false;
}

/* One pipeline run's measurements, each named "strategy" + suffix ("@i=64" in a sweep): the
 * halves of the limit and the prefetch alone first, in the real run's order. */
static int plan_pipe_point(struct fake_job *j, const struct pipe_point *p, const json_t *strategies,
                           const char *suffix, const char *sweep)
{
        const char *alone[4] = {MEAS_COPY_ALONE, MEAS_KERNEL_ALONE};
        size_t nalone = 2, i, n;
        int r = 0;

        if (p->written)
                alone[nalone++] = MEAS_HOST_WRITE;
        if (pipe_prefetching(strategies))
                alone[nalone++] = MEAS_PREFETCH_ALONE;
        n = nalone + json_array_size(strategies);
        for (i = 0; r == 0 && i < n; i++) {
                const char *s = i < nalone
                                    ? alone[i]
                                    : json_string_value(json_array_get(strategies, i - nalone));
                bool single = i < nalone;
                uint64_t steps = single ? 1 : p->steps;
                double first, steady;
                char name[64];

                if (!s)
                        continue;
                if (streq_ptr(s, MEAS_PIPE_GATHER) && p->touched >= p->size)
                        continue; /* the real one notes it would be pinned_serial */
                if (streq_ptr(s, MEAS_HOST_WRITE))
                        first = steady = pipe_write_ms(MEAS_PIPE_SERIAL, p); /* into pinned */
                else
                        pipe_model(s, p, &first, &steady);
                snprintf(name, sizeof(name), "%s%s", s, suffix);
                r = add(j, name, "pipeline", p->size);
                if (r < 0)
                        break;
                struct fake_meas *m = &j->m[j->n - 1];
                m->ms = (first + steady * (double)(steps - 1)) / (double)steps;
                m->extra = json_pack(
                    "{s:I, s:I, s:I, s:I, s:f, s:o}", "intensity", (json_int_t)p->intensity,
                    "touched_bytes", (json_int_t)p->touched, "weights_bytes",
                    (json_int_t)p->weights, "steps", (json_int_t)steps, "first_step_ms", first,
                    "steady_step_ms", steps > 1 ? json_real(steady) : json_null());
                if (m->extra && sweep)
                        json_object_update_new(
                            m->extra, json_pack("{s:s, s:s}", "strategy", s, "sweep", sweep));
                if (m->extra)
                        pipe_extras(m->extra, s, p, single);
                else
                        r = -ENOMEM;
        }
        return r;
}

static void pipe_point_from(const struct fake_job *j, struct pipe_point *p)
{
        *p = (struct pipe_point){
            .size = j->size,
            .touched = j->size,
            .weights = param_u64(j->params, "weights"),
            .writeback = param_u64(j->params, "writeback"),
            .chunks = param_u64(j->params, "chunks"),
            .streams = param_u64(j->params, "streams"),
            .steps = param_u64(j->params, "steps"),
            .writers = param_u64(j->params, "writers"),
            .written = streq_ptr(param_str(j->params, "batch"), PIPE_BATCH_WRITTEN),
            .copy_rr = streq_ptr(param_str(j->params, "chunk_issue"), PIPE_ISSUE_ROUND_ROBIN),
            .prefetch_rr = !streq_ptr(param_str(j->params, "chunk_issue"), PIPE_ISSUE_COPY_STREAM),
            .clustered = streq_ptr(param_str(j->params, "layout"), "clustered"),
        };
        if (param_u64(j->params, "touched") > 0)
                p->touched =
                    (param_u64(j->params, "touched") + PIPE_PAGE - 1) / PIPE_PAGE * PIPE_PAGE;
        if (p->touched > p->size)
                p->touched = p->size;
}

static json_t *pipe_intensity_json(json_t *requested, uint64_t chosen, uint64_t size)
{
        json_t *o = json_pack("{s:O, s:I}", "requested", requested, "chosen", (json_int_t)chosen);
        if (o && json_is_string(requested))
                json_object_update_new(o, json_pack("{s:f, s:f}", "copy_ms",
                                                    ms_at((double)size, PIPE_COPY_GBPS),
                                                    "kernel_ms", pipe_kernel_ms(chosen, size)));
        return o;
}

static int plan_pipeline(struct fake_job *j)
{
        struct pipe_point p;
        json_t *req = json_object_get(j->params, "intensity");

        pipe_point_from(j, &p);
        p.intensity =
            json_is_integer(req) ? (uint64_t)json_integer_value(req) : pipe_balanced(p.size);
        j->top = json_pack("{s:o}", "intensity", pipe_intensity_json(req, p.intensity, p.size));
        if (!j->top)
                return -ENOMEM;
        return plan_pipe_point(j, &p, json_object_get(j->params, "strategies"), "", NULL);
}

/* train_step and embedding_gather (issue 60): fake_train.c's model gives each measurement's
 * time and keys; key names the rate table's entry that says which bytes are counted. */
static int plan_points(struct fake_job *j,
                       int (*model)(const json_t *, uint64_t, struct fake_points *, char *, size_t),
                       const char *key)
{
        struct fake_points pts = {0};
        int r =
            model(j->params, FAKE_MEMORY_TOTAL - FAKE_MEMORY_USED, &pts, j->why, sizeof(j->why));

        for (size_t i = 0; r == 0 && i < pts.n; i++) {
                r = add(j, pts.p[i].name, key, pts.p[i].bytes);
                if (r < 0)
                        break;
                j->m[j->n - 1].ms = pts.p[i].ms;
                j->m[j->n - 1].extra = pts.p[i].extra;
                pts.p[i].extra = NULL;
        }
        fake_points_free(&pts);
        return r;
}

static int plan_train_step(struct fake_job *j)
{
        return plan_points(j, fake_train_step, "train_step");
}

static int plan_embedding_gather(struct fake_job *j)
{
        return plan_points(j, fake_embedding_gather, "pipeline");
}

/* The same points as kernels/bench_suite.cu's pipeline_sweep, in the same order. */
static int plan_pipeline_sweep(struct fake_job *j)
{
        struct pipe_point p;
        char suffix[48];
        json_t *touched_strategies =
            json_pack("[s, s, s]", MEAS_PIPE_SERIAL, MEAS_PIPE_ON_DEMAND, MEAS_PIPE_GATHER);
        const json_t *strategies = json_object_get(j->params, "strategies");
        uint64_t kb, factor = param_u64(j->params, "max_factor");
        int r;

        pipe_point_from(j, &p);
        kb = pipe_balanced(p.size);
        json_t *word = json_string(PIPE_BALANCED);
        j->top = json_pack("{s:o}", "balanced", pipe_intensity_json(word, kb, p.size));
        json_decref(word);
        if (!j->top || !touched_strategies) {
                json_decref(touched_strategies);
                return -ENOMEM;
        }
        p.intensity = kb;
        snprintf(suffix, sizeof(suffix), "@i=%llu", (unsigned long long)kb);
        r = plan_pipe_point(j, &p, strategies, suffix, "intensity");
        for (uint64_t k = param_u64(j->params, "min_intensity"); r == 0 && k <= kb * factor;
             k *= 4) {
                if (k == kb)
                        continue;
                p.intensity = k;
                snprintf(suffix, sizeof(suffix), "@i=%llu", (unsigned long long)k);
                r = plan_pipe_point(j, &p, strategies, suffix, "intensity");
        }
        p.intensity = param_u64(j->params, "touched_intensity");
        for (uint64_t t = param_u64(j->params, "min_touched"); r == 0; t *= 4) {
                bool last = t >= p.size;
                p.touched = last ? p.size : (t + PIPE_PAGE - 1) / PIPE_PAGE * PIPE_PAGE;
                snprintf(suffix, sizeof(suffix), "@t=%llu",
                         (unsigned long long)(last ? p.size : t));
                r = plan_pipe_point(j, &p, touched_strategies, suffix, "touched");
                if (last)
                        break;
        }
        json_decref(touched_strategies);
        return r;
}

static int plan_zero_copy(struct fake_job *j)
{
        static const char *const pairs[][2] = {{MEAS_READ, "zero_copy_read"},
                                               {MEAS_READ_WRITE, "zero_copy"}};
        return add_named(j, pairs, ELEMENTSOF(pairs));
}

static int plan_managed_on_demand(struct fake_job *j)
{
        static const char *const pairs[][2] = {{MEAS_GPU_ON_DEMAND, "managed_on_demand"},
                                               {MEAS_CPU_ON_DEMAND, "cpu_on_demand"}};
        return add_named(j, pairs, ELEMENTSOF(pairs));
}

static int plan_managed_prefetch(struct fake_job *j)
{
        static const char *const pairs[][2] = {{MEAS_PREFETCH_KERNEL, "managed_prefetch"},
                                               {MEAS_PREFETCH, "prefetch"},
                                               {MEAS_PREFETCH_TO_HOST, "prefetch_to_host"}};
        return add_named(j, pairs, ELEMENTSOF(pairs));
}

static int plan_managed_advise(struct fake_job *j)
{
        const char *advice = param_str(j->params, "advice");
        char key[64];
        int r;

        snprintf(key, sizeof(key), "%s.read", advice ? advice : "");
        r = add(j, MEAS_READ, key, j->size);
        snprintf(key, sizeof(key), "%s.write", advice ? advice : "");
        return r < 0 ? r : add(j, MEAS_WRITE, key, j->size);
}

static int plan_system_memory(struct fake_job *j)
{
        if (!json_is_true(json_object_get(j->device, "pageableMemoryAccess"))) {
                snprintf(j->why, sizeof(j->why),
                         "unsupported on this device: no pageableMemoryAccess");
                return -ENOTSUP;
        }
        return add(j, MEAS_READ_WRITE, "system_memory", j->size);
}

static int plan_latency(struct fake_job *j)
{
        static const char *const copies[][2] = {{MEAS_PINNED_H2D, "latency.pinned"},
                                                {MEAS_PINNED_D2H, "latency.pinned"},
                                                {MEAS_PAGEABLE_H2D, "latency.pageable"},
                                                {MEAS_PAGEABLE_D2H, "latency.pageable"}};
        static const char *const faults[] = {MEAS_FAULT_SINGLE, MEAS_FAULT_BULK, MEAS_RESIDENT};
        int r = add_named(j, copies, ELEMENTSOF(copies));

        for (size_t i = 0; r == 0 && i < ELEMENTSOF(faults); i++)
                r = add(j, faults[i], faults[i], 4);
        for (size_t i = 0; i < j->n; i++)
                j->m[i].latency = true;
        return r;
}

static int plan_um_vs_explicit(struct fake_job *j)
{
        /* The modes kernels/bench_suite.cu reports; daemon/suites.c summarises them. */
        static const char *const pairs[][2] = {
            {MEAS_UM_PINNED_COPY_KERNEL, MEAS_SERIAL}, /* copy_overlap's serial, as on a GPU */
            {MEAS_UM_PAGEABLE_COPY_KERNEL, "pageable_h2d"},
            {MEAS_UM_OVERLAPPED_COPY_KERNEL, "overlapped"},
            {MEAS_UM_ZERO_COPY_KERNEL, "zero_copy_read"},
            {MEAS_UM_ON_DEMAND, "managed_on_demand"},
            {MEAS_UM_PREFETCH, "managed_prefetch"},
            {MEAS_UM_READ_MOSTLY, "read_mostly.write"},
            {MEAS_UM_PREFERRED_DEVICE, "preferred_location_device.write"},
            {MEAS_UM_PREFERRED_HOST, "preferred_location_host.write"},
            {MEAS_UM_ACCESSED_BY, "accessed_by.write"},
            {MEAS_UM_PINNED_COPY_D2H, "pinned_d2h"},
            {MEAS_UM_PAGEABLE_COPY_D2H, "pageable_d2h"},
            {MEAS_UM_CPU_ON_DEMAND, "cpu_on_demand"},
            {MEAS_UM_PREFETCH_TO_HOST, "prefetch_to_host"},
        };
        int r = add_named(j, pairs, ELEMENTSOF(pairs));

        /* copy_overlap's copy and kernel alone, as the real suite copies them over */
        for (size_t i = 0; r == 0 && i < j->n; i++)
                if (streq_ptr(j->m[i].name, MEAS_UM_OVERLAPPED_COPY_KERNEL)) {
                        const struct fake_mode *copy = mode_find(MEAS_PINNED_H2D),
                                               *kern = mode_find("kernel_xor");
                        double size = (double)j->size;
                        j->m[i].extra = json_pack(
                            "{s:f, s:f}", "copy_alone_ms",
                            size / (copy->gbps * 1e9) * 1e3 + copy->overhead_us / 1e3,
                            "kernel_alone_ms",
                            2 * size / (kern->gbps * 1e9) * 1e3 + kern->overhead_us / 1e3);
                        r = j->m[i].extra ? 0 : -ENOMEM;
                }
        return r;
}

/* --- health's extended tier: the budget is planned on the model's own times --- */

/* The modelled time of measurement i with its warm-up (as measure_all spends it), ms. */
static double est_ms(const struct fake_job *j, size_t i)
{
        const struct fake_meas *m = &j->m[i];
        uint64_t pct = param_u64(j->params, "fake_bandwidth_pct");
        double samples =
            (double)(param_u64(j->params, "iterations") + param_u64(j->params, "warmup"));
        double one =
            (double)(m->size * m->mode->bytes_mult) / (m->mode->gbps * m->scale * 1e9) * 1e3 +
            m->mode->overhead_us / 1e3;

        return samples * one * 100.0 / (double)(pct ? pct : 100);
}

static double est_from(const struct fake_job *j, size_t from)
{
        double t = 0;

        for (size_t i = from; i < j->n; i++)
                t += est_ms(j, i);
        return t;
}

/* The part's budget: a GPU's, or the pairs' on the node worker. */
static uint64_t plan_budget(const struct fake_job *j)
{
        return param_u64(j->params, j->device ? "budget_ms" : "pairs_budget_ms");
}

/* The plan's record, as kernels/bench_suite.cu writes it: {"tier", "plan": {"budget_ms",
 * "estimated_ms", "ran": [addition], "skipped": [{"check", "estimate_ms", "reason"}]}}. */
static int plan_record(struct fake_job *j, json_t *ran, json_t *skipped, double spent)
{
        uint64_t budget = plan_budget(j);

        json_decref(j->top);
        j->top = json_pack("{s:s, s:{s:I, s:f, s:o, s:o}}", "tier", HEALTH_TIER_EXTENDED, "plan",
                           "budget_ms", (json_int_t)budget, "estimated_ms", spent, "ran", ran,
                           "skipped", skipped);
        return j->top ? 0 : -ENOMEM;
}

/* Keeps the measurements added since `from` when they fit what is left of the budget, else
 * takes them back and says so in skipped. */
static void plan_fit(struct fake_job *j, size_t from, const char *addition, double *spent,
                     json_t *ran, json_t *skipped)
{
        uint64_t budget = plan_budget(j);
        double t = est_from(j, from);
        char why[160];

        if (budget == 0 || *spent + t <= (double)budget) {
                *spent += t;
                json_array_append_new(ran, json_string(addition));
                return;
        }
        for (size_t i = from; i < j->n; i++)
                json_decref(j->m[i].extra);
        j->n = from;
        snprintf(why, sizeof(why),
                 "skipped: %s would take about %.0f ms, and %.0f ms of the %llu ms budget are left",
                 addition, t, (double)budget - *spent > 0 ? (double)budget - *spent : 0.0,
                 (unsigned long long)budget);
        json_array_append_new(skipped, json_pack("{s:s, s:f, s:s}", "check", addition,
                                                 "estimate_ms", t, "reason", why));
}

/* A short sweep of one path: every 4x from 64 KiB up to `top`, each measurement named
 * "knee@SIZE" and told its size. */
static int add_knee(struct fake_job *j, const char *name, const char *key, uint64_t top)
{
        int r = 0;

        for (uint64_t sz = 64 * 1024; r == 0 && sz <= top; sz *= 4) {
                char n[64];

                snprintf(n, sizeof(n), "%s@%llu", name, (unsigned long long)sz);
                r = add(j, n, key, sz);
                if (r == 0 && !(j->m[j->n - 1].extra = json_pack("{s:I}", "size", (json_int_t)sz)))
                        r = -ENOMEM;
        }
        return r;
}

/* The plan being made: what is spent of the budget, what ran, what was skipped. */
struct ext_plan {
        double spent;
        json_t *ran, *skipped;
};

/* One addition of one measurement, kept when it fits (plan_fit). */
static int ext_one(struct fake_job *j, struct ext_plan *pl, const char *addition, const char *name,
                   const char *key, uint64_t size)
{
        size_t from = j->n;
        int r = add(j, name, key, size);

        if (r == 0)
                plan_fit(j, from, addition, &pl->spent, pl->ran, pl->skipped);
        return r;
}

/* A short sweep of one path as one addition. */
static int ext_knee(struct fake_job *j, struct ext_plan *pl, const char *addition, const char *name,
                    const char *key, uint64_t top)
{
        size_t from = j->n;
        int r = add_knee(j, name, key, top);

        if (r == 0)
                plan_fit(j, from, addition, &pl->spent, pl->ran, pl->skipped);
        return r;
}

/* The extended tier's additions, in kernels/bench_suite.cu's order: each fits what is left of
 * budget_ms (the quick tier's measurements already planned count first) or is skipped. */
static int plan_health_extended(struct fake_job *j)
{
        static const char *const latencies[][2] = {{MEAS_LATENCY_PINNED_D2H, "latency.pinned"},
                                                   {MEAS_LATENCY_PAGEABLE_H2D, "latency.pageable"},
                                                   {MEAS_LATENCY_PAGEABLE_D2H, "latency.pageable"},
                                                   {MEAS_LATENCY_FAULT, "managed_fault_single"}};
        uint64_t full = param_u64(j->params, "full_size");
        struct ext_plan pl = {est_from(j, 0), json_array(), json_array()};
        int r = pl.ran && pl.skipped ? 0 : -ENOMEM;

        if (r == 0)
                r = ext_one(j, &pl, "device memory at full size", MEAS_D2D_FULL, "d2d_ce", full);
        if (r == 0)
                r = ext_one(j, &pl, "bidirectional copies", MEAS_BIDIR, "bidir", j->size);
        if (r == 0)
                r = ext_one(j, &pl, "pageable copies back to the host", MEAS_PAGEABLE_D2H,
                            MEAS_PAGEABLE_D2H, j->size);
        if (r == 0) {
                size_t from = j->n;
                for (size_t i = 0; r == 0 && i < ELEMENTSOF(latencies); i++) {
                        r = add(j, latencies[i][0], latencies[i][1], 4);
                        if (r == 0)
                                j->m[j->n - 1].latency = true;
                }
                if (r == 0)
                        plan_fit(j, from, "latency", &pl.spent, pl.ran, pl.skipped);
        }
        if (r == 0)
                r = ext_one(j, &pl, "managed memory on demand", MEAS_MANAGED_ON_DEMAND,
                            "managed_on_demand", j->size);
        if (r == 0)
                r = ext_knee(j, &pl, "sweep of pinned_h2d", MEAS_KNEE_PINNED_H2D, MEAS_PINNED_H2D,
                             j->size);
        if (r == 0)
                r = ext_knee(j, &pl, "sweep of pinned_d2h", MEAS_KNEE_PINNED_D2H, MEAS_PINNED_D2H,
                             j->size);
        if (r == 0)
                r = ext_knee(j, &pl, "sweep of d2d", MEAS_KNEE_D2D, "d2d_ce", full);
        if (r < 0) {
                json_decref(pl.ran);
                json_decref(pl.skipped);
                return r;
        }
        return plan_record(j, pl.ran, pl.skipped, pl.spent);
}

static int plan_health(struct fake_job *j)
{
        /* The measurements kernels/bench_suite.cu's health reports. */
        static const char *const keys[] = {MEAS_PINNED_H2D, MEAS_PINNED_D2H, MEAS_PAGEABLE_H2D,
                                           MEAS_MANAGED_PREFETCH};
        int r = add_same(j, keys, ELEMENTSOF(keys));

        if (r == 0)
                r = add(j, MEAS_LATENCY_PINNED_H2D, "latency.pinned", 4);
        if (r == 0)
                j->m[j->n - 1].latency = true;
        /* Device memory: the copy engine's device-to-device copy at the check's own size. */
        if (r == 0)
                r = add(j, MEAS_D2D, "d2d_ce", param_u64(j->params, "d2d_size"));
        if (r == 0 && streq_ptr(param_str(j->params, "tier"), HEALTH_TIER_EXTENDED))
                r = plan_health_extended(j);
        return r;
}

static int plan_d2d(struct fake_job *j)
{
        static const char *const pairs[][2] = {{MEAS_COPY_ENGINE, "d2d_ce"},
                                               {MEAS_SM_COPY, "d2d_sm"}};
        return add_named(j, pairs, ELEMENTSOF(pairs));
}

/* One measurement per mode and size, named "mode@size" like the real sweep's, in mode order. */
static int plan_sweep(struct fake_job *j)
{
        size_t k, i;
        json_t *m, *sz;
        int r = 0;

        json_array_foreach(json_object_get(j->params, "modes"), k, m)
        {
                json_array_foreach(json_object_get(j->params, "sizes"), i, sz)
                {
                        char name[64];
                        uint64_t size = (uint64_t)json_integer_value(sz);

                        snprintf(name, sizeof(name), "%s@%llu", json_string_value(m),
                                 (unsigned long long)size);
                        if (r == 0)
                                r = add(j, name, json_string_value(m), size);
                }
        }
        return r;
}

/* --- several GPUs: the node worker's benchmarks --- */

#define FAKE_NVLINKS 18 /* an H200 pair as nvidia-smi topo -m shows it: NV18 */

/* The link between fake devices a and b. Tests degrade one with
 * UMD_FAKE_P2P="A-B=host,C-D=nvlink:12,E-F=pcie" (unordered pairs): "host" stands for a pair
 * whose peer access is gone, so its copies go through host memory. */
static void fake_pair_link(unsigned a, unsigned b, const char **ret_type, unsigned *ret_links)
{
        const char *env = getenv("UMD_FAKE_P2P");
        unsigned x, y, links;
        char type[16];
        int n;

        *ret_type = "nvlink";
        *ret_links = FAKE_NVLINKS;
        for (const char *p = env; p && *p;) {
                if (sscanf(p, "%u-%u=%15[a-z]%n", &x, &y, type, &n) == 3 &&
                    ((x == a && y == b) || (x == b && y == a))) {
                        if (strcmp(type, "host") == 0) {
                                *ret_type = "host";
                                *ret_links = 0;
                        } else if (strcmp(type, "pcie") == 0) {
                                *ret_type = "pcie";
                                *ret_links = 0;
                        } else if (strcmp(type, "nvlink") == 0 &&
                                   sscanf(p + n, ":%u", &links) == 1 && links >= 1 && links <= 64) {
                                *ret_links = links;
                        }
                }
                p = strchr(p, ',');
                if (p)
                        p++;
        }
}

/* What a pair's copies reach against the model's NV18 rates. */
static double fake_pair_scale(unsigned a, unsigned b)
{
        const char *type;
        unsigned links;

        fake_pair_link(a, b, &type, &links);
        if (strcmp(type, "host") == 0)
                return 24.0 / 389.0; /* staged through host memory: two PCIe hops */
        if (strcmp(type, "pcie") == 0)
                return 50.0 / 389.0;
        return (double)links / FAKE_NVLINKS;
}

/* The fake links between n devices (see fake_run_multi). */
static json_t *fake_links_json(unsigned n)
{
        json_t *links = json_array();

        for (unsigned a = 0; links && a < n; a++)
                for (unsigned b = 0; b < n; b++) {
                        const char *type;
                        unsigned count;

                        if (a == b)
                                continue;
                        fake_pair_link(a, b, &type, &count);
                        json_array_append_new(
                            links, json_pack("{s:i, s:i, s:s, s:i, s:b, s:s}", "src", (int)a, "dst",
                                             (int)b, "type", type, "nvlink_links", (int)count,
                                             "peer_access", strcmp(type, "host") != 0, "source",
                                             "fake: UMD_FAKE_P2P, else NV18"));
                }
        return links;
}

static int add_pair(struct fake_job *j, const char *prefix, const char *key, uint64_t size, int src,
                    int dst, const char *method, const char *direction)
{
        char name[64];
        int r;

        if (dst < 0 || dst == src)
                snprintf(name, sizeof(name), "%s@%d", prefix, src);
        else
                snprintf(name, sizeof(name), "%s@%d>%d", prefix, src, dst);
        r = add(j, name, key, size);
        if (r < 0)
                return r;
        j->m[j->n - 1].src = src;
        j->m[j->n - 1].dst = dst;
        j->m[j->n - 1].method = method;
        j->m[j->n - 1].direction = direction;
        if (dst >= 0 && dst != src)
                j->m[j->n - 1].scale = fake_pair_scale((unsigned)src, (unsigned)dst);
        return 0;
}

/* peer's measurements (also topology's and the node's health): every ordered pair one way,
 * every pair both ways, for the methods and directions params name. */
static int plan_pairs(struct fake_job *j, const json_t *params)
{
        static const char *const methods[] = {"ce", "sm"};
        int r = 0;

        for (size_t m = 0; m < ELEMENTSOF(methods); m++) {
                char key[32], prefix[32];

                if (!list_has(params, "methods", methods[m]))
                        continue;
                if (list_has(params, "directions", "uni")) {
                        snprintf(key, sizeof(key), "peer_%s_uni", methods[m]);
                        snprintf(prefix, sizeof(prefix), "%s_uni", methods[m]);
                        for (unsigned a = 0; r == 0 && a < j->n_gpus; a++)
                                for (unsigned b = 0; r == 0 && b < j->n_gpus; b++)
                                        if (a != b)
                                                r = add_pair(j, prefix, key, j->size, (int)a,
                                                             (int)b, methods[m], "uni");
                }
                if (list_has(params, "directions", "bidir")) {
                        snprintf(key, sizeof(key), "peer_%s_bidir", methods[m]);
                        snprintf(prefix, sizeof(prefix), "%s_bidir", methods[m]);
                        for (unsigned a = 0; r == 0 && a < j->n_gpus; a++)
                                for (unsigned b = a + 1; r == 0 && b < j->n_gpus; b++)
                                        r = add_pair(j, prefix, key, j->size, (int)a, (int)b,
                                                     methods[m], "bidir");
                }
        }
        return r;
}

static int plan_peer(struct fake_job *j)
{
        return plan_pairs(j, j->params);
}

/* The canonical check's GPU pairs: copy engine, one direction, every pair; the extended tier's
 * at full_size when that fits budget_ms, else at size, saying so. */
static int plan_node_health(struct fake_job *j)
{
        json_t *p = json_pack("{s:[s], s:[s]}", "methods", "ce", "directions", "uni");
        bool extended = streq_ptr(param_str(j->params, "tier"), HEALTH_TIER_EXTENDED);
        json_t *ran = json_array(), *skipped = json_array();
        uint64_t quick_size = j->size;
        double spent = 0;
        int r = p && ran && skipped ? 0 : -ENOMEM;

        if (r == 0 && extended)
                j->size = param_u64(j->params, "full_size");
        if (r == 0)
                r = plan_pairs(j, p);
        if (r == 0 && extended) {
                plan_fit(j, 0, "every GPU pair at full size", &spent, ran, skipped);
                if (j->n == 0) { /* did not fit: the quick tier's pairs */
                        j->size = quick_size;
                        r = plan_pairs(j, p);
                        spent = est_from(j, 0);
                }
                if (r == 0) {
                        r = plan_record(j, ran, skipped, spent);
                        ran = skipped = NULL;
                }
        }
        json_decref(ran);
        json_decref(skipped);
        json_decref(p);
        return r;
}

static int plan_topology(struct fake_job *j)
{
        int r = 0;

        for (unsigned g = 0; r == 0 && g < j->n_gpus; g++)
                r = add_pair(j, MEAS_D2D, "d2d_ce", j->size, (int)g, (int)g, "ce", "d2d");
        /* topology takes no directions: both, as the real suite measures */
        if (r == 0) {
                json_t *p = json_deep_copy(j->params);

                r = p ? 0 : -ENOMEM;
                if (p)
                        json_object_set_new(p, "directions", json_pack("[s, s]", "uni", "bidir"));
                if (r == 0)
                        r = plan_pairs(j, p);
                json_decref(p);
        }
        return r;
}

static int plan_managed_peer(struct fake_job *j)
{
        int r = 0;

        for (unsigned a = 0; r == 0 && a < j->n_gpus; a++)
                for (unsigned b = 0; r == 0 && b < j->n_gpus; b++) {
                        if (a == b)
                                continue;
                        r = add_pair(j, MEAS_ON_DEMAND, "managed_peer_on_demand", j->size, (int)a,
                                     (int)b, "on_demand", "uni");
                        if (r == 0)
                                r = add_pair(j, MEAS_PREFETCH, "managed_peer_prefetch", j->size,
                                             (int)a, (int)b, "prefetch", "uni");
                        if (r == 0)
                                r = add_pair(j, MEAS_PEER_COPY, "managed_peer_copy", j->size,
                                             (int)a, (int)b, "ce", "uni");
                }
        return r;
}

static int plan_host_all(struct fake_job *j)
{
        bool d2h = streq_ptr(param_str(j->params, "direction"), "d2h");
        int r = 0;

        for (unsigned g = 0; r == 0 && g < j->n_gpus; g++)
                r = add_pair(j, MEAS_ALONE, d2h ? MEAS_PINNED_D2H : MEAS_PINNED_H2D, j->size,
                             (int)g, -1, NULL, d2h ? "d2h" : "h2d");
        /* Two H200s behind separate PCIe Gen5 switches: each keeps its own rate. */
        if (r == 0)
                r = add(j, MEAS_ALL, d2h ? "host_all_d2h" : "host_all_h2d", j->size * j->n_gpus);
        return r;
}

/* The models, by catalog id: what a GPU's worker runs, and what the node worker runs. A catalog
 * entry missing here is answered "not modelled" (and fails the kernels_backend test). */
struct fake_plan {
        const char *id;
        int (*plan)(struct fake_job *j);
};

static const struct fake_plan gpu_plans[] = {
    {"copy", plan_copy},
    {"copy_overlap", plan_copy_overlap},
    {"zero_copy", plan_zero_copy},
    {"managed_on_demand", plan_managed_on_demand},
    {"managed_prefetch", plan_managed_prefetch},
    {"managed_advise", plan_managed_advise},
    {"system_memory", plan_system_memory},
    {"latency", plan_latency},
    {"um_vs_explicit", plan_um_vs_explicit},
    {"sweep", plan_sweep},
    {"health", plan_health},
    {"d2d", plan_d2d},
    {"pipeline", plan_pipeline},
    {"pipeline_sweep", plan_pipeline_sweep},
    {"train_step", plan_train_step},
    {"embedding_gather", plan_embedding_gather},
};

static const struct fake_plan node_plans[] = {
    {"peer", plan_peer},         {"managed_peer", plan_managed_peer}, {"host_all", plan_host_all},
    {"topology", plan_topology}, {"health", plan_node_health},
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
        const char *only = param_str(j->params, "only");
        size_t n = 0;

        if (!only || strcmp(only, "all") == 0)
                return;
        for (size_t i = 0; i < j->n; i++)
                if (strcmp(j->m[i].name, only) == 0)
                        j->m[n++] = j->m[i];
        j->n = n;
}

/* explain: true adds the modelled counters to every managed measurement. */
static void plan_explain(struct fake_job *j)
{
        bool chunks = streq_ptr(param_str(j->params, "kernel"), "warp_per_chunk");
        char key[64];

        for (size_t i = 0; param_u64(j->params, "explain") && i < j->n; i++) {
                snprintf(key, sizeof(key), "%s%s", j->m[i].mode->key,
                         chunks ? ".warp_per_chunk" : "");
                j->m[i].explain = explain_find(key);
                if (!j->m[i].explain)
                        j->m[i].explain = explain_find(j->m[i].mode->key);
        }
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
                json_object_set_new(o, "explain", fake_explain_json(m->explain, m->size));
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
        if (param_u64(norm, "fake_crash"))
                abort();
        if (param_u64(norm, "fake_hang"))
                for (;;)
                        pause(); /* cancel is ignored on purpose: only SIGKILL ends this */
        delay = param_u64(norm, "fake_delay_ms");
        if (delay > 0 && nap(delay * 1000, cancel) < 0) {
                r = backend_fail(ret_error, -ECANCELED, "cancelled");
                goto out;
        }

        job.params = norm;
        job.size = param_u64(norm, "size");
        r = plan->plan(&job);
        if (r < 0) {
                r = backend_fail(ret_error, r, "%s",
                                 r == -ENOMEM && !job.why[0] ? "out of memory" : job.why);
                goto out;
        }
        plan_only(&job);
        plan_explain(&job);
        for (size_t i = 0; i < job.n; i++)
                if (job.m[i].size > biggest)
                        biggest = job.m[i].size;
        pct = param_u64(norm, "fake_bandwidth_pct");
        r = measure_all(&job, benchmark, param_u64(norm, "seed"),
                        (unsigned)param_u64(norm, "iterations"),
                        (unsigned)param_u64(norm, "warmup"), (double)pct, cancel, &list);
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
        ctx = json_pack("{s:O?, s:O?, s:O?, s:O?, s:I, s:s?, s:s?, s:I, s:I, s:b, s:i, s:i, s:I}",
                        "device_uuid", json_object_get(device, "uuid"), "driver_version",
                        json_object_get(device, "driver_version"), "runtime_version",
                        json_object_get(device, "runtime_version"), "pcie",
                        json_object_get(device, "pcie"), "buffer_bytes", (json_int_t)biggest,
                        /* what the real benchmarks report where the param does not apply */
                        "host_memory",
                        param_str(p, "host_memory") ? param_str(p, "host_memory") : "pinned",
                        "access", param_str(p, "access") ? param_str(p, "access") : "sequential",
                        "stride", (json_int_t)param_u64(p, "stride"), "seed",
                        (json_int_t)param_u64(p, "seed"), "buffer_reused", 0, "warmup",
                        (int)param_u64(p, "warmup"), "iterations", (int)param_u64(p, "iterations"),
                        "fake_bandwidth_pct", (json_int_t)param_u64(p, "fake_bandwidth_pct"));
        result = json_pack("{s:s, s:b, s:o, s:o, s:[s]}", "benchmark", benchmark, "fake", 1,
                           "measurements", list, "context", ctx, "notes",
                           "fake device: numbers come from a bandwidth model, not a GPU");
        if (result && strcmp(benchmark, "train_step") == 0)
                json_object_set_new(result, "placement_matrix",
                                    train_matrix(json_object_get(result, "measurements")));
        if (result && strcmp(benchmark, "embedding_gather") == 0)
                json_object_set_new(result, "embedding",
                                    embed_report(json_object_get(result, "measurements"),
                                                 (long long)param_u64(p, "lookups")));
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
        result = json_pack(
            "{s:s, s:b, s:o, s:O, s:o, s:{s:I, s:I, s:i, s:i, s:I}, s:[s]}", "benchmark", benchmark,
            "fake", 1, "measurements", list, "devices", devices, "links", fake_links_json(n),
            "context", "buffer_bytes",
            /* the extended health tier's pairs may run at full_size */
            (json_int_t)(strcmp(benchmark, "health") == 0 ? biggest : param_u64(p, "size")), "seed",
            (json_int_t)param_u64(p, "seed"), "warmup", (int)param_u64(p, "warmup"), "iterations",
            (int)param_u64(p, "iterations"), "fake_bandwidth_pct",
            (json_int_t)param_u64(p, "fake_bandwidth_pct"), "notes",
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
