/* The fake model's managed memory: managed_on_demand, managed_prefetch, managed_advise, and
 * the explain pass's counters (issue 17) each managed measurement gets with explain: true. */
#include "fake_model.h"

#include "catalog.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* A model key: an advice and ".read" or ".write" (the longest, preferred_location_device.write,
 * 31 bytes), or a managed key and ".warp_per_chunk"; a longer one is cut and found in no table. */
#define FAKE_MANAGED_KEY_MAX 64

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
json_t *fake_managed_explain_json(const struct fake_explain *x, uint64_t size)
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

int fake_managed_plan_on_demand(struct fake_job *j)
{
        static const char *const pairs[][2] = {{MEAS_GPU_ON_DEMAND, "managed_on_demand"},
                                               {MEAS_CPU_ON_DEMAND, "cpu_on_demand"}};
        return fake_model_add_named(j, pairs, ELEMENTSOF(pairs));
}

int fake_managed_plan_prefetch(struct fake_job *j)
{
        static const char *const pairs[][2] = {{MEAS_PREFETCH_KERNEL, "managed_prefetch"},
                                               {MEAS_PREFETCH, "prefetch"},
                                               {MEAS_PREFETCH_TO_HOST, "prefetch_to_host"}};
        return fake_model_add_named(j, pairs, ELEMENTSOF(pairs));
}

int fake_managed_plan_advise(struct fake_job *j)
{
        const char *advice = fake_model_param_str(j->params, "advice");
        char key[FAKE_MANAGED_KEY_MAX];
        int r;

        snprintf(key, sizeof(key), "%s.read", advice ? advice : "");
        r = fake_model_add(j, MEAS_READ, key, j->size);
        snprintf(key, sizeof(key), "%s.write", advice ? advice : "");
        return r < 0 ? r : fake_model_add(j, MEAS_WRITE, key, j->size);
}

/* explain: true adds the modelled counters to every managed measurement. */
void fake_managed_plan_explain(struct fake_job *j)
{
        bool chunks = streq_ptr(fake_model_param_str(j->params, "kernel"), "warp_per_chunk");
        char key[FAKE_MANAGED_KEY_MAX];

        for (size_t i = 0; fake_model_param_u64(j->params, "explain") && i < j->n; i++) {
                snprintf(key, sizeof(key), "%s%s", j->m[i].mode->key,
                         chunks ? ".warp_per_chunk" : "");
                j->m[i].explain = explain_find(key);
                if (!j->m[i].explain)
                        j->m[i].explain = explain_find(j->m[i].mode->key);
        }
}
