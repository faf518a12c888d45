/* embedding_gather (issue 60): rows of a table in host memory gathered by the GPU each step, by
 * every strategy recommender training uses, against the same rows gathered from HBM. Owns the
 * table in each kind of memory, the row cache in HBM, the CPU gather, the row choices drawn on
 * the host and the check of every gathered row. The gather kernel and the row choices are
 * kernels/embed_kernels.cuh's, shared with tests/gpu/reference_embed.cu; the factors and the
 * planner's block are kernels/train_report.c's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_internal.h"
#include "embed_kernels.cuh"

extern "C" {
#include "train_report.h"
}

static const char *const ONE_DIR = "one direction";

struct emb_run {
        struct bench_job *j;
        uint64_t rows, row_bytes, mult;
        uint32_t lookups;
        std::vector<uint32_t> ranks; /* every sample's lookups, as popularity ranks */
        std::vector<uint32_t> idx;   /* the same as rows */
        uint8_t *pinned;             /* the table in mapped pinned memory */
        uint32_t *d_idx;             /* one sample's rows on the device */
        uint8_t *d_out;              /* the gathered rows */
        int sample;                  /* the sample prep set up */
};

static uint32_t *sample_idx(struct emb_run *e, int i)
{
        return e->idx.data() + (size_t)i * e->lookups;
}

static int emb_prep(struct emb_run *e)
{
        int i = e->sample++;
        CK(e->j, cudaMemcpyAsync(e->d_idx, sample_idx(e, i), e->lookups * 4ull,
                                 cudaMemcpyHostToDevice, e->j->ctx->streams[0]));
        return 0;
}

static int emb_launch(struct emb_run *e, const uint8_t *table, const int32_t *map,
                      const uint8_t *cache)
{
        struct bench_ctx *c = e->j->ctx;
        k_emb_gather<<<grid_cap(c, ((uint64_t)e->lookups * 32 + EMB_THREADS - 1) / EMB_THREADS),
                       EMB_THREADS, 0, c->streams[0]>>>(table, e->d_idx, e->d_out, e->lookups,
                                                        (uint32_t)e->row_bytes, map, cache);
        CK(e->j, cudaGetLastError());
        return 0;
}

/* Every gathered row of the last sample against the pattern the table was written with. */
static int emb_verify(struct emb_run *e, const char *what)
{
        struct bench_job *j = e->j;
        std::vector<uint32_t> out((size_t)e->lookups * e->row_bytes / 4);
        const uint32_t *rows = sample_idx(e, e->sample - 1);
        unsigned long long bad = 0;
        uint64_t words = e->row_bytes / 4;

        CK(j, cudaDeviceSynchronize());
        CK(j, cudaMemcpy(out.data(), e->d_out, out.size() * 4, cudaMemcpyDeviceToHost));
        for (uint32_t i = 0; i < e->lookups; i++)
                for (uint64_t w = 0; w < words; w++)
                        bad += out[i * words + w] != pattern_word(rows[i] * words + w, j->seed);
        return verify_result(j, bad, what);
}

/* GPU strategies: prep puts the sample's rows on the device (and undo() what the last sample
 * moved), work gathers, timed between events. */
template <class Undo, class Work>
static int emb_gpu(struct emb_run *e, const char *name, Undo undo, Work work, json_t *extra)
{
        std::vector<double> t;
        e->sample = 0;
        int r = sample_events(
            e->j, t,
            [&]() {
                    int u = undo();
                    return u < 0 ? u : emb_prep(e);
            },
            work);
        if (r >= 0)
                r = emb_verify(e, name);
        if (r >= 0)
                return add_measurement(e->j, name, (double)e->lookups * e->row_bytes, ONE_DIR, t,
                                       false, extra);
        json_decref(extra);
        return r;
}

static int nothing(void)
{
        return 0;
}

static int emb_device(struct emb_run *e)
{
        struct bench_job *j = e->j;
        void *d = NULL;
        int r = check_free(j, e->rows * e->row_bytes, "embedding_gather's HBM table");
        if (r < 0)
                return r;
        CK(j, cudaMalloc(&d, e->rows * e->row_bytes));
        r = dev_fill(j, d, e->rows * e->row_bytes, j->seed, 0, j->ctx->streams[0]);
        if (r >= 0)
                r = emb_gpu(
                    e, MEAS_EMB_DEVICE, nothing,
                    [&]() { return emb_launch(e, (uint8_t *)d, NULL, NULL); }, NULL);
        cudaFree(d);
        return r;
}

/* FBGEMM's EmbeddingLocation.MANAGED (fbgemm_gpu/src/memory_utils/memory_utils.cu): managed
 * memory preferring the CPU and accessed by the GPU, so the GPU reads host rows in place. Without
 * advice (on_demand), each sample starts with the table on the host and faults pages in. */
static int emb_managed(struct emb_run *e, bool advised)
{
        struct bench_job *j = e->j;
        uint64_t size = e->rows * e->row_bytes;
        cudaStream_t s = j->ctx->streams[0];
        void *p = NULL;
        int r = managed_alloc(j, size, &p);
        if (r < 0)
                return r;
        if (advised) {
                cudaError_t a =
                    cudaMemAdvise(p, size, cudaMemAdviseSetPreferredLocation, loc_host());
                if (a == cudaSuccess)
                        a = cudaMemAdvise(p, size, cudaMemAdviseSetAccessedBy, loc_dev(j->ctx));
                if (a != cudaSuccess) {
                        cudaFree(p);
                        return job_cuda_fail(j, a, "cudaMemAdvise");
                }
        }
        host_fill(p, size, j->seed);
        auto undo = [&]() -> int {
                if (!advised)
                        CK(j, cudaMemPrefetchAsync(p, size, loc_host(), 0, s));
                return 0;
        };
        r = emb_gpu(
            e, advised ? MEAS_EMB_MANAGED_UVM : MEAS_EMB_ON_DEMAND, undo,
            [&]() { return emb_launch(e, (uint8_t *)p, NULL, NULL); }, NULL);
        cudaFree(p);
        return r;
}

static int emb_mapped(struct emb_run *e)
{
        uint8_t *dev_view = NULL;
        CK(e->j, cudaHostGetDevicePointer((void **)&dev_view, e->pinned, 0));
        return emb_gpu(
            e, MEAS_EMB_HOST_MAPPED, nothing, [&]() { return emb_launch(e, dev_view, NULL, NULL); },
            NULL);
}

/* A row cache in HBM in front of the host table: the hottest cache_load_factor percent of the
 * rows, chosen from the row distribution and filled before timing (a static cache of the rows
 * the distribution favours, not FBGEMM's LRU, which fills as it misses), and a map of every
 * row's slot (-1: not held) so a lookup never probes. Misses read the host table in place. */
static int emb_cache(struct emb_run *e)
{
        struct bench_job *j = e->j;
        uint64_t held = e->rows * (uint64_t)param_int(j, "cache_load_factor", 20) / 100;
        std::vector<int32_t> map(e->rows, -1);
        std::vector<uint32_t> fill;
        uint8_t *dev_view = NULL, *cache = NULL;
        int32_t *d_map = NULL;
        uint64_t hits = 0, looked = 0;
        int r;

        held = held ? held : 1;
        for (uint64_t k = 0; k < held; k++) {
                uint32_t row = emb_row_of_rank(k, e->rows, e->mult);
                map[row] = (int32_t)k;
                fill.push_back(row);
        }
        for (size_t i = (size_t)j->warmup * e->lookups; i < e->ranks.size(); i++, looked++)
                hits += e->ranks[i] < held;
        r = check_free(j, held * e->row_bytes + e->rows * 4 + held * 4, "embedding_gather's cache");
        if (r < 0)
                return r;
        CK(j, cudaHostGetDevicePointer((void **)&dev_view, e->pinned, 0));
        CK(j, cudaMalloc(&cache, held * e->row_bytes));
        uint32_t *d_fill = NULL;
        cudaError_t ce = cudaMalloc(&d_map, e->rows * 4);
        if (ce == cudaSuccess)
                ce = cudaMalloc(&d_fill, held * 4);
        if (ce == cudaSuccess)
                ce = cudaMemcpy(d_map, map.data(), e->rows * 4, cudaMemcpyHostToDevice);
        if (ce == cudaSuccess)
                ce = cudaMemcpy(d_fill, fill.data(), held * 4, cudaMemcpyHostToDevice);
        if (ce == cudaSuccess) {
                k_emb_gather<<<grid_cap(j->ctx, (held * 32 + EMB_THREADS - 1) / EMB_THREADS),
                               EMB_THREADS, 0, j->ctx->streams[0]>>>(
                    dev_view, d_fill, cache, (uint32_t)held, (uint32_t)e->row_bytes, NULL, NULL);
                ce = cudaStreamSynchronize(j->ctx->streams[0]);
        }
        cudaFree(d_fill);
        r = ce != cudaSuccess ? job_cuda_fail(j, ce, "filling the HBM row cache") : 0;
        if (r >= 0)
                r = emb_gpu(
                    e, MEAS_EMB_HBM_CACHE, nothing,
                    [&]() { return emb_launch(e, dev_view, d_map, cache); },
                    json_pack("{s:I, s:f, s:s}", "cache_rows", (json_int_t)held, "hit_rate",
                              looked ? (double)hits / looked : 0.0, "cache_fill",
                              "static: the distribution's hottest rows, before timing"));
        cudaFree(cache);
        cudaFree(d_map);
        return r;
}

/* The CPU gathers: the step's row indices come to the host, the CPU packs the rows into pinned
 * memory, one copy takes them to the GPU. Host clock; the packing alone is reported apart. */
static int emb_explicit(struct emb_run *e)
{
        struct bench_job *j = e->j;
        cudaStream_t s = j->ctx->streams[0];
        uint64_t bytes = (uint64_t)e->lookups * e->row_bytes;
        std::vector<uint32_t> host_idx(e->lookups);
        std::vector<double> t, pack;
        void *staging = NULL;
        int r = pool_host(j, 1, bytes, &staging);

        e->sample = 0;
        if (r >= 0)
                r = sample_host(
                    j, t,
                    [&]() -> int {
                            int p = emb_prep(e);
                            CK(j, cudaStreamSynchronize(s));
                            return p;
                    },
                    [&]() -> int {
                            CK(j, cudaMemcpy(host_idx.data(), e->d_idx, e->lookups * 4ull,
                                             cudaMemcpyDeviceToHost));
                            double t0 = now_ms();
                            for (uint32_t i = 0; i < e->lookups; i++)
                                    memcpy((uint8_t *)staging + (uint64_t)i * e->row_bytes,
                                           e->pinned + (uint64_t)host_idx[i] * e->row_bytes,
                                           e->row_bytes);
                            pack.push_back(now_ms() - t0);
                            CK(j, cudaMemcpyAsync(e->d_out, staging, bytes, cudaMemcpyHostToDevice,
                                                  s));
                            CK(j, cudaStreamSynchronize(s));
                            return 0;
                    });
        if (r >= 0)
                r = emb_verify(e, MEAS_EMB_EXPLICIT_GATHER);
        if (r < 0)
                return r;
        std::vector<double> timed(pack.begin() + j->warmup, pack.end());
        struct sample_stats st;
        stats_compute(timed.data(), timed.size(), &st);
        return add_measurement(j, MEAS_EMB_EXPLICIT_GATHER, (double)bytes, ONE_DIR, t, false,
                               json_pack("{s:f, s:f}", "pack_ms", st.median, "pack_gbps",
                                         st.median > 0 ? bytes / (st.median * 1e6) : 0.0));
}

/* The whole table copied to HBM each step, then gathered there; the copy's own rate is the
 * PCIe figure the planner block quotes. */
static int emb_whole(struct emb_run *e)
{
        struct bench_job *j = e->j;
        struct bench_ctx *c = j->ctx;
        uint64_t size = e->rows * e->row_bytes;
        std::vector<double> copy;
        cudaEvent_t a = NULL, b = NULL;
        void *d = NULL;
        int r = check_free(j, size, "embedding_gather's copied table");

        if (r < 0)
                return r;
        CK(j, cudaMalloc(&d, size));
        if (cudaEventCreate(&a) != cudaSuccess || cudaEventCreate(&b) != cudaSuccess)
                r = job_fail(j, -EIO, "cudaEventCreate failed");
        if (r >= 0)
                r = emb_gpu(
                    e, MEAS_EMB_WHOLE_COPY,
                    [&]() -> int {
                            float ms = 0;
                            if (e->sample > 0 && cudaEventElapsedTime(&ms, a, b) == cudaSuccess)
                                    copy.push_back(ms);
                            return 0;
                    },
                    [&]() -> int {
                            CK(j, cudaEventRecord(a, c->streams[0]));
                            CK(j, cudaMemcpyAsync(d, e->pinned, size, cudaMemcpyHostToDevice,
                                                  c->streams[0]));
                            CK(j, cudaEventRecord(b, c->streams[0]));
                            return emb_launch(e, (uint8_t *)d, NULL, NULL);
                    },
                    NULL);
        float last = 0;
        if (r >= 0 && cudaEventElapsedTime(&last, a, b) == cudaSuccess)
                copy.push_back(last);
        if (r >= 0 && !copy.empty()) {
                struct sample_stats st;
                stats_compute(copy.data(), copy.size(), &st);
                json_object_set_new(
                    json_array_get(j->measurements, json_array_size(j->measurements) - 1),
                    "copy_gbps", json_real(size / (st.median * 1e6)));
        }
        if (a)
                cudaEventDestroy(a);
        if (b)
                cudaEventDestroy(b);
        cudaFree(d);
        return r;
}

static int emb_strategy(struct emb_run *e, const char *s)
{
        if (strcmp(s, MEAS_EMB_DEVICE) == 0)
                return emb_device(e);
        if (strcmp(s, MEAS_EMB_MANAGED_UVM) == 0 || strcmp(s, MEAS_EMB_ON_DEMAND) == 0)
                return emb_managed(e, strcmp(s, MEAS_EMB_MANAGED_UVM) == 0);
        if (strcmp(s, MEAS_EMB_HOST_MAPPED) == 0)
                return emb_mapped(e);
        if (strcmp(s, MEAS_EMB_HBM_CACHE) == 0)
                return emb_cache(e);
        if (strcmp(s, MEAS_EMB_EXPLICIT_GATHER) == 0)
                return emb_explicit(e);
        return emb_whole(e);
}

static int emb_setup(struct emb_run *e)
{
        struct bench_job *j = e->j;
        int zipf = (int)param_int(j, "zipf_x100", 0);
        size_t n = (size_t)(j->warmup + j->iterations) * e->lookups;

        if (e->row_bytes % EMB_ROW_ALIGN)
                return job_fail(j, -EINVAL, "row_bytes must be a multiple of %d", EMB_ROW_ALIGN);
        if (e->rows == 0 || e->rows > INT32_MAX)
                return job_fail(j, -EINVAL, "the table must hold 1 to %d rows", INT32_MAX);
        if (!j->ctx->concurrent_managed)
                return job_fail(j, -ENOTSUP,
                                "unsupported on this device: no concurrentManagedAccess");
        e->mult = emb_mult(e->rows);
        emb_ranks(e->rows, zipf / 100.0, j->seed, n, e->ranks);
        e->idx.resize(n);
        for (size_t i = 0; i < n; i++)
                e->idx[i] = emb_row_of_rank(e->ranks[i], e->rows, e->mult);
        int r = check_free(j, (uint64_t)e->lookups * (4 + e->row_bytes), "embedding_gather's rows");
        if (r < 0)
                return r;
        CK(j, cudaMalloc(&e->d_idx, e->lookups * 4ull));
        CK(j, cudaMalloc(&e->d_out, (uint64_t)e->lookups * e->row_bytes));
        CK(j, cudaHostAlloc(&e->pinned, e->rows * e->row_bytes,
                            cudaHostAllocMapped | cudaHostAllocPortable));
        host_fill(e->pinned, e->rows * e->row_bytes, j->seed);
        json_object_update_new(
            j->context_extra,
            json_pack("{s:I, s:I, s:i, s:f, s:i, s:s}", "rows", (json_int_t)e->rows, "row_bytes",
                      (json_int_t)e->row_bytes, "lookups", (int)e->lookups, "zipf_exponent",
                      zipf / 100.0, "cache_load_factor", (int)param_int(j, "cache_load_factor", 20),
                      "host_memory", "per strategy"));
        return 0;
}

int bench_embedding_gather(struct bench_job *j)
{
        struct emb_run e = {};
        size_t i;
        json_t *s;

        e.j = j;
        e.row_bytes = (uint64_t)param_int(j, "row_bytes", 128);
        e.rows = e.row_bytes ? j->size / e.row_bytes : 0;
        e.lookups = (uint32_t)param_int(j, "lookups", 65536);
        int r = emb_setup(&e);
        json_array_foreach(json_object_get(j->params, "strategies"), i, s)
        {
                if (r >= 0)
                        r = emb_strategy(&e, json_string_value(s));
        }
        if (e.pinned)
                cudaFreeHost(e.pinned);
        cudaFree(e.d_idx);
        cudaFree(e.d_out);
        if (r >= 0)
                json_object_set_new(j->extra_top, "embedding",
                                    embed_report(j->measurements, e.lookups));
        return r;
}
