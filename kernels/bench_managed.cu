/* Kernels on memory the GPU reaches without explicit copies: zero_copy (mapped pinned host
 * memory), managed_on_demand, managed_prefetch, managed_advise (cudaMallocManaged) and
 * system_memory (plain malloc, where pageableMemoryAccess allows it). Owns where the data is put
 * back before each sample (outside the timed window) and how it is verified afterwards, the
 * managed kernels' second shape (a warp per 64 KiB chunk) and the explain passes (issue 17). */
#include <algorithm>
#include <math.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_internal.h"

/* The kernel's shape in words for the result's context: the longest, grid_stride's, is about
 * 250 bytes with its numbers; snprintf cuts a longer one. */
#define MANAGED_KERNEL_WORDS_MAX 400
/* Why an explain pass's counts are incomplete: a 230-byte sentence with four numbers. */
#define MANAGED_WHY_MAX 320

static const char *const ONE_DIR = "one direction";

static int none(void)
{
        return 0;
}

static uint8_t parity(uint64_t rw_runs)
{
        return rw_runs % 2 ? BENCH_XOR_BYTE : 0;
}

/* The CPU reads one word per page of p, which brings every page the GPU holds (or its block)
 * back. The impossible check keeps the reads from being optimised away. */
static int cpu_touch_pages(const void *p, size_t size)
{
        volatile const uint32_t *w = (volatile const uint32_t *)p;
        uint32_t acc = 0;
        for (size_t off = 0; off < size; off += BENCH_PAGE_BYTES)
                acc ^= w[off / 4];
        return acc == 0x12345678u && size == 1 ? -EIO : 0;
}

int bench_zero_copy(struct bench_job *j)
{
        struct bench_ctx *c = j->ctx;
        cudaStream_t s0 = c->streams[0];
        std::vector<double> rd, rw;
        void *host = NULL;
        uint64_t rw_runs = 0;
        int r;

        json_object_set_new(j->context_extra, "host_memory", json_string("pinned mapped"));
        r = pool_host(j, 0, j->size, &host);
        if (r >= 0)
                r = dev_fill(j, host, j->size, j->seed, 0, s0);
        if (r >= 0)
                r = sample_events(j, rd, none, [&]() -> int {
                        return launch_process(j, host, j->size, OP_READ, true, s0);
                });
        if (r >= 0)
                r = sample_events(j, rw, none, [&]() -> int {
                        rw_runs++;
                        return launch_process(j, host, j->size, OP_READ_WRITE, true, s0);
                });
        if (r >= 0)
                r = dev_verify(j, host, j->size, j->seed, parity(rw_runs),
                               "mapped host memory after the kernels");
        if (r >= 0)
                r = add_measurement(j, MEAS_READ, (double)j->size, ONE_DIR, rd, false, NULL);
        if (r >= 0)
                r = add_measurement(j, MEAS_READ_WRITE, 2.0 * (double)j->size, "read+write", rw,
                                    false, NULL);
        return r;
}

#define CHUNK_BYTES (64u << 10)

/* One warp per 64 KiB chunk, walked in order 512 bytes (32 lanes x 16) at a time: a chunk's
 * first touch faults it in whole, and no other warp touches it meanwhile. The grid-stride loop
 * instead spreads every chunk over 16 warps of different blocks. Same work: each 16 bytes read
 * (and XORed with BENCH_XOR_WORD when WRITE), the ragged tail byte by byte. */
template <bool WRITE>
__global__ void k_warp_per_chunk(uint8_t *base, size_t size, unsigned long long *sink)
{
        size_t warp = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32;
        size_t nwarps = (size_t)gridDim.x * blockDim.x / 32;
        unsigned lane = threadIdx.x % 32;
        uint32_t acc = 0;
        for (size_t c = warp * CHUNK_BYTES; c < size; c += nwarps * CHUNK_BYTES) {
                size_t end = c + CHUNK_BYTES < size ? c + CHUNK_BYTES : size;
                for (size_t off = c + lane * 16; off < end; off += 32 * 16)
                        acc ^= process_at<WRITE>(base, off, end);
        }
        if (!WRITE && acc == 0x12345678u && threadIdx.x == 0xffff)
                *sink = acc;
}

/* Blocks of 256 threads (8 warps), one warp per chunk, at most 8 blocks per SM. */
static unsigned chunk_grid(const struct bench_ctx *c, size_t size)
{
        uint64_t chunks = (size + CHUNK_BYTES - 1) / CHUNK_BYTES;
        return grid_cap(c, (chunks + 7) / 8); /* 8 warps a block, one chunk a warp */
}

/* The kernel a managed benchmark runs, in words, for the result's context: what the fault
 * handler sees depends on it (issue 17's ReadMostly figure came from this shape). */
static void describe_kernel(struct bench_job *j)
{
        struct bench_ctx *c = j->ctx;
        char words[MANAGED_KERNEL_WORDS_MAX];
        if (j->warp_per_chunk) {
                unsigned blocks = chunk_grid(c, j->size);
                snprintf(words, sizeof(words),
                         "warp_per_chunk: %u blocks x 256 threads; each warp reads (and, for "
                         "writes, XORs) one 64 KiB chunk in order, 512 bytes a step, then the "
                         "chunk %u warps further on",
                         blocks, blocks * 8);
        } else if (j->d_order) {
                snprintf(words, sizeof(words),
                         "grid_stride over pages in the access order: block b reads (and, for "
                         "writes, XORs back) page order[b], then order[b + grid], 16 bytes a "
                         "thread");
        } else {
                uint64_t blocks = (uint64_t)c->sm_count * 8, pages = (j->size + 4095) / 4096;
                if (pages < blocks)
                        blocks = pages;
                snprintf(words, sizeof(words),
                         "grid_stride: %llu blocks x 256 threads; each thread reads (and, for "
                         "writes, XORs back) 16 bytes, then the 16 bytes %llu KiB further on; a "
                         "block covers 4 KiB per step, so each 64 KiB chunk is worked by 16 "
                         "blocks at once",
                         (unsigned long long)blocks, (unsigned long long)(blocks * 4));
        }
        json_object_set_new(j->context_extra, "kernel",
                            json_string(j->warp_per_chunk ? "warp_per_chunk" : "grid_stride"));
        json_object_set_new(j->context_extra, "kernel_pattern", json_string(words));
}

void explain_check(json_t *x, uint64_t expect_htod, uint64_t expect_dtoh)
{
        uint64_t h = (uint64_t)json_integer_value(json_object_get(x, "bytes_htod"));
        uint64_t d = (uint64_t)json_integer_value(json_object_get(x, "bytes_dtoh"));
        char why[MANAGED_WHY_MAX];

        json_object_set_new(x, "expected_bytes_htod", json_integer((json_int_t)expect_htod));
        json_object_set_new(x, "expected_bytes_dtoh", json_integer((json_int_t)expect_dtoh));
        if (!expect_htod && !expect_dtoh) {
                json_object_set_new(x, "complete", json_null()); /* nothing to check against */
                return;
        }
        bool complete = h >= expect_htod && d >= expect_dtoh;
        json_object_set_new(x, "complete", json_boolean(complete));
        if (complete)
                return;
        snprintf(why, sizeof(why),
                 "CUPTI reported %llu of the %llu bytes this pass had to move to the GPU and %llu "
                 "of %llu to the host, in pieces as small as it tried: the driver's event queue "
                 "overran without counting what it lost, so every count is a lower bound",
                 (unsigned long long)h, (unsigned long long)expect_htod, (unsigned long long)d,
                 (unsigned long long)expect_dtoh);
        json_object_set_new(x, "why_incomplete", json_string(why));
}

struct managed {
        struct bench_job *j;
        void *p;
        size_t size;
        uint64_t rw_runs;

        int prefetch_range(size_t off, size_t len, cudaMemLocation loc)
        {
                CK(j, cudaMemPrefetchAsync((uint8_t *)p + off, len, loc, 0, j->ctx->streams[0]));
                return 0;
        }
        int to_host()
        {
                CK(j, cudaMemPrefetchAsync(p, size, loc_host(), 0, j->ctx->streams[0]));
                CK(j, cudaStreamSynchronize(j->ctx->streams[0]));
                return 0;
        }
        int to_dev()
        {
                CK(j, cudaMemPrefetchAsync(p, size, loc_dev(j->ctx), 0, j->ctx->streams[0]));
                CK(j, cudaStreamSynchronize(j->ctx->streams[0]));
                return 0;
        }
        /* The kernel on [off, off + len): the whole buffer in the job's access order, a piece in
         * order. A read-write pass counts once its last piece is queued (the data's parity). */
        int kernel_range(enum process_op op, size_t off, size_t len)
        {
                cudaStream_t s = j->ctx->streams[0];
                uint8_t *q = (uint8_t *)p + off;
                if (op == OP_READ_WRITE && off + len == size)
                        rw_runs++;
                if (!j->warp_per_chunk)
                        return launch_process(j, q, len, op, off == 0 && len == size, s);
                unsigned g = chunk_grid(j->ctx, len);
                unsigned long long *sink = j->ctx->d_scratch + 1;
                if (op == OP_READ_WRITE)
                        k_warp_per_chunk<true><<<g, 256, 0, s>>>(q, len, sink);
                else
                        k_warp_per_chunk<false><<<g, 256, 0, s>>>(q, len, sink);
                CK(j, cudaGetLastError());
                return 0;
        }
        int kernel(enum process_op op)
        {
                return kernel_range(op, 0, size);
        }
        /* A new buffer of the same size, filled on the CPU: the explain pass's, made once the
         * counters are on (explain_pass in bench_internal.h says why). */
        int reopen()
        {
                cudaFree(p);
                p = NULL;
                rw_runs = 0;
                int r = managed_alloc(j, size, &p);
                if (r < 0)
                        return r;
                host_fill(p, size, j->seed);
                return 0;
        }
        int verify(const char *what)
        {
                return dev_verify(j, p, size, j->seed, parity(rw_runs), what);
        }
};

/* Allocates managed memory within the free-memory limit and leaves it written with the pattern
 * and resident on the host, as an application's CPU-initialised buffer is. The pages are made
 * on the GPU and moved to the host in one prefetch: 3.6 ms for 64 MiB on the H200 where the CPU's
 * first touch of managed pages, one fault each, took 15 ms (bench/results/health-setup-h200/).
 * No sample sees the difference: each starts from host-resident pages (its prep moves them). */
static int managed_open(struct bench_job *j, struct managed *m)
{
        if (!j->ctx->concurrent_managed)
                return job_fail(j, -ENOTSUP,
                                "unsupported on this device: no concurrentManagedAccess");
        if (j->warp_per_chunk && j->access != BENCH_ACCESS_SEQUENTIAL)
                return job_fail(j, -EINVAL,
                                "kernel warp_per_chunk walks the buffer in order: it takes "
                                "access sequential only");
        m->j = j;
        m->size = j->size;
        m->rw_runs = 0;
        int r = managed_alloc(j, m->size, &m->p);
        if (r < 0)
                return r;
        r = m->prefetch_range(0, m->size, loc_dev(j->ctx));
        if (r >= 0)
                r = dev_fill(j, m->p, m->size, j->seed, 0, j->ctx->streams[0]);
        if (r >= 0)
                r = m->to_host();
        if (r < 0) {
                cudaFree(m->p);
                m->p = NULL;
                return r;
        }
        json_object_set_new(j->context_extra, "host_memory", json_string("managed"));
        describe_kernel(j);
        return 0;
}

/* ---- the arrival view and the fault cost (issue 26) ---- */

/* A gap this long between two pages' first accesses ends a burst. The H200's gaps are bimodal:
 * within a burst 32 ns or less (p90), between bursts about 0.3 ms; at 2, 5, 10, 20 and 50 us a
 * 1 GiB pass counted 609, 518, 498, 496 and 495 bursts (bench/results/explain-h200/). */
#define ARRIVAL_BURST_GAP_NS 10000ull

__device__ __forceinline__ uint64_t global_ns(void)
{
        uint64_t t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        return t;
}

/* Thread 0 of each block notes when it starts, and when its first access to each page has
 * returned: the value loaded feeds an empty asm before the clock is read, so the stamp cannot
 * be taken early. */
__device__ __forceinline__ void arrival_entry(unsigned long long *entry)
{
        if (threadIdx.x % 32 == 0)
                atomicMin(entry, (unsigned long long)global_ns());
}

__device__ __forceinline__ void arrival_rw(uint8_t *base, size_t off, size_t size, bool stamp,
                                           uint64_t *stamps)
{
        if (off + 16 > size) {
                process_at<true>(base, off, size);
                return;
        }
        uint4 *v = (uint4 *)(base + off);
        uint4 x = *v;
        if (stamp) {
                asm volatile("" ::"r"(x.x));
                stamps[off / BENCH_PAGE_BYTES] = global_ns();
        }
        x.x ^= BENCH_XOR_WORD;
        x.y ^= BENCH_XOR_WORD;
        x.z ^= BENCH_XOR_WORD;
        x.w ^= BENCH_XOR_WORD;
        *v = x;
}

/* k_process_seq's read-write pass (bench.cu), stamped: a block's 256 threads cover one page a
 * step, and thread 0 holds its first 16 bytes. */
__global__ void k_arrival_seq(uint8_t *base, size_t size, uint64_t *stamps,
                              unsigned long long *entry)
{
        size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
        size_t nthreads = (size_t)gridDim.x * blockDim.x;
        arrival_entry(entry);
        for (size_t off = tid * 16; off < size; off += nthreads * 16)
                arrival_rw(base, off, size, threadIdx.x == 0, stamps);
}

/* k_warp_per_chunk's read-write pass, stamped by lane 0 as its warp enters each page. */
__global__ void k_arrival_chunk(uint8_t *base, size_t size, uint64_t *stamps,
                                unsigned long long *entry)
{
        size_t warp = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32;
        size_t nwarps = (size_t)gridDim.x * blockDim.x / 32;
        unsigned lane = threadIdx.x % 32;
        arrival_entry(entry);
        for (size_t c = warp * CHUNK_BYTES; c < size; c += nwarps * CHUNK_BYTES) {
                size_t end = c + CHUNK_BYTES < size ? c + CHUNK_BYTES : size;
                for (size_t off = c + lane * 16; off < end; off += 32 * 16)
                        arrival_rw(base, off, end, off % BENCH_PAGE_BYTES == 0, stamps);
        }
}

/* The median of a pinned host-to-device copy of up to 16 MiB on stream 0, GB/s: the rate the
 * arrival view is set against, measured beside it. */
static int pinned_h2d_gbps(struct bench_job *j, size_t size, double *ret)
{
        size_t n = size < (16u << 20) ? size : (16u << 20);
        cudaStream_t s = j->ctx->streams[0];
        void *h = NULL, *d = NULL;
        std::vector<double> ms;
        cudaError_t e = cudaMallocHost(&h, n);
        if (e == cudaSuccess)
                e = cudaMalloc(&d, n);
        for (int i = 0; e == cudaSuccess && i < 6; i++) {
                float t = 0;
                e = cudaEventRecord(j->ctx->ev_start, s);
                if (e == cudaSuccess)
                        e = cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s);
                if (e == cudaSuccess)
                        e = cudaEventRecord(j->ctx->ev_stop, s);
                if (e == cudaSuccess)
                        e = cudaEventSynchronize(j->ctx->ev_stop);
                if (e == cudaSuccess)
                        e = cudaEventElapsedTime(&t, j->ctx->ev_start, j->ctx->ev_stop);
                if (i > 0) /* the first is a warm-up */
                        ms.push_back(t);
        }
        cudaFree(d);
        cudaFreeHost(h);
        if (e != cudaSuccess)
                return job_cuda_fail(j, e, "explain: pinned reference copy");
        std::sort(ms.begin(), ms.end());
        *ret = stats_gbps((double)n, ms[ms.size() / 2]);
        return 0;
}

/* When the pages reached the GPU, as the kernel saw them: one more untimed on-demand pass of the
 * same kernel shape, counters off, its pages on the host first. */
static int arrival_view(struct bench_job *j, struct managed *m, json_t **ret)
{
        struct bench_ctx *c = j->ctx;
        size_t pages = (m->size + BENCH_PAGE_BYTES - 1) / BENCH_PAGE_BYTES;
        uint64_t *d_stamps = NULL;
        unsigned long long *d_entry = NULL, entry = ~0ull;
        cudaStream_t s = c->streams[0];
        float kernel_ms = 0;
        double pinned = 0;

        if (j->access != BENCH_ACCESS_SEQUENTIAL) {
                *ret = json_pack("{s:b, s:s}", "available", 0, "why",
                                 "the arrival view walks the buffer in order; this job's access "
                                 "order is not sequential");
                return 0;
        }
        int r = m->to_host();
        if (r < 0)
                return r;
        CK(j, cudaMalloc(&d_stamps, pages * sizeof(uint64_t)));
        cudaError_t e = cudaMalloc(&d_entry, sizeof(*d_entry));
        if (e == cudaSuccess)
                e = cudaMemsetAsync(d_stamps, 0, pages * sizeof(uint64_t), s);
        if (e == cudaSuccess)
                e = cudaMemcpyAsync(d_entry, &entry, sizeof(entry), cudaMemcpyHostToDevice, s);
        if (e == cudaSuccess)
                e = cudaEventRecord(c->ev_start, s);
        if (e == cudaSuccess) {
                if (j->warp_per_chunk)
                        k_arrival_chunk<<<chunk_grid(c, m->size), 256, 0, s>>>(
                            (uint8_t *)m->p, m->size, d_stamps, d_entry);
                else
                        k_arrival_seq<<<grid_cap(c, (m->size / 16 + 255) / 256), 256, 0, s>>>(
                            (uint8_t *)m->p, m->size, d_stamps, d_entry);
                e = cudaGetLastError();
        }
        m->rw_runs++;
        if (e == cudaSuccess)
                e = cudaEventRecord(c->ev_stop, s);
        if (e == cudaSuccess)
                e = cudaEventSynchronize(c->ev_stop);
        if (e == cudaSuccess)
                e = cudaEventElapsedTime(&kernel_ms, c->ev_start, c->ev_stop);
        std::vector<uint64_t> t(pages);
        if (e == cudaSuccess)
                e = cudaMemcpy(t.data(), d_stamps, pages * sizeof(uint64_t),
                               cudaMemcpyDeviceToHost);
        if (e == cudaSuccess)
                e = cudaMemcpy(&entry, d_entry, sizeof(entry), cudaMemcpyDeviceToHost);
        cudaFree(d_stamps);
        cudaFree(d_entry);
        if (e != cudaSuccess)
                return job_cuda_fail(j, e, "explain: arrival pass");
        r = pinned_h2d_gbps(j, m->size, &pinned);
        if (r < 0)
                return r;

        /* Idle: before the first page and in every gap that ends a burst. */
        std::sort(t.begin(), t.end());
        uint64_t first = t.front(), last = t.back(), idle = first > entry ? first - entry : 0;
        size_t bursts = 1;
        for (size_t i = 1; i < pages; i++)
                if (t[i] - t[i - 1] > ARRIVAL_BURST_GAP_NS) {
                        bursts++;
                        idle += t[i] - t[i - 1];
                }
        double span_ns = last > entry ? (double)(last - entry) : 0;
        double moving_ns = (double)(last - first);
        double bytes = (double)pages * BENCH_PAGE_BYTES;
        *ret =
            json_pack("{s:b, s:s, s:I, s:f, s:f, s:f, s:f, s:I, s:I, s:f, s:f, s:f}", "available",
                      1, "source", "kernel timer", "bytes", (json_int_t)bytes, "kernel_ms",
                      (double)kernel_ms, "span_ms", span_ns / 1e6, "waited_ms", (double)idle / 1e6,
                      "waited_share", span_ns > 0 ? (double)idle / span_ns : 0.0, "bursts",
                      (json_int_t)bursts, "burst_gap_ns", (json_int_t)ARRIVAL_BURST_GAP_NS,
                      "mean_burst_bytes", bytes / (double)bursts, "rate_gbps",
                      moving_ns > 0 ? bytes / moving_ns : 0.0, "pinned_h2d_gbps", pinned);
        return *ret ? 0 : job_fail(j, -ENOMEM, "out of memory");
}

/* The single fault's cost (as latency's managed_fault_single: one kernel per page, pages 2 MiB
 * apart, host-resident) and prefetch + kernel on the same buffer, each median of a few: what the
 * fault cost estimate is built from. Each page touched is touched again (resident) so the
 * buffer's data stays as the pass found it. */
static int fault_view(struct bench_job *j, struct managed *m, double on_demand_ms, json_t *xg,
                      json_t **ret)
{
        struct bench_ctx *c = j->ctx;
        cudaStream_t s = c->streams[0];
        const uint64_t spacing = 2ull << 20;
        uint64_t pages = m->size / spacing < 8 ? m->size / spacing : 8;
        std::vector<double> single, pk;

        if (pages == 0)
                pages = 1;
        for (int rep = 0; rep < 3; rep++) {
                int r = m->to_host();
                if (r < 0)
                        return r;
                double sum = 0;
                for (uint64_t p = 0; p < pages; p++) {
                        float ms = 0;
                        CK(j, cudaEventRecord(c->ev_start, s));
                        r = launch_touch(j, m->p, p, 1, spacing, s);
                        if (r < 0)
                                return r;
                        CK(j, cudaEventRecord(c->ev_stop, s));
                        CK(j, cudaEventSynchronize(c->ev_stop));
                        CK(j, cudaEventElapsedTime(&ms, c->ev_start, c->ev_stop));
                        sum += ms;
                        r = launch_touch(j, m->p, p, 1, spacing, s);
                        if (r < 0)
                                return r;
                }
                single.push_back(sum / (double)pages);
        }
        for (int rep = 0; rep < 3; rep++) {
                float ms = 0;
                int r = m->to_host();
                if (r < 0)
                        return r;
                CK(j, cudaEventRecord(c->ev_start, s));
                r = m->prefetch_range(0, m->size, loc_dev(c));
                if (r >= 0)
                        r = m->kernel(OP_READ_WRITE);
                if (r < 0)
                        return r;
                CK(j, cudaEventRecord(c->ev_stop, s));
                CK(j, cudaEventSynchronize(c->ev_stop));
                CK(j, cudaEventElapsedTime(&ms, c->ev_start, c->ev_stop));
                pk.push_back(ms);
        }
        std::sort(single.begin(), single.end());
        std::sort(pk.begin(), pk.end());
        double fault_us = single[1] * 1e3, pk_ms = pk[1], gap = on_demand_ms - pk_ms;
        /* The batches the driver served: the arrival view's bursts, else CUPTI's fault records. */
        json_t *arr = json_object_get(xg, "arrival");
        const char *from = "arrival bursts";
        json_int_t batches = json_integer_value(json_object_get(arr, "bursts"));
        if (!json_is_true(json_object_get(arr, "available"))) {
                batches = json_integer_value(json_object_get(xg, "gpu_fault_records"));
                from = "CUPTI fault records";
        }
        double est = (double)batches * fault_us / 1e3;
        *ret = json_pack("{s:f, s:I, s:s, s:f, s:f, s:f, s:f, s:o}", "fault_single_us", fault_us,
                         "batches", batches, "batches_from", from, "estimate_ms", est,
                         "on_demand_ms", on_demand_ms, "prefetch_kernel_ms", pk_ms, "gap_ms", gap,
                         "explained_share", gap > 0 ? json_real(est / gap) : json_null());
        return *ret ? 0 : job_fail(j, -ENOMEM, "out of memory");
}

/* The on-demand explanation beyond CUPTI's counts: the arrival view, whether the two views
 * agree on the bytes (where CUPTI's count is complete), and the fault cost. */
static int explain_on_demand(struct bench_job *j, struct managed *m,
                             const std::vector<double> &samples, json_t *xg)
{
        json_t *arr = NULL, *cost = NULL;
        std::vector<double> sorted(samples);
        std::sort(sorted.begin(), sorted.end());
        double median = sorted.empty() ? 0 : sorted[sorted.size() / 2];

        int r = arrival_view(j, m, &arr);
        if (r < 0)
                return r;
        json_object_set_new(xg, "arrival", arr);
        r = fault_view(j, m, median, xg, &cost);
        if (r < 0)
                return r;
        json_object_set_new(xg, "fault_cost", cost);
        json_t *agree = json_null();
        if (json_is_true(json_object_get(xg, "complete")) &&
            json_is_true(json_object_get(arr, "available"))) {
                double a = (double)json_integer_value(json_object_get(arr, "bytes"));
                double b = (double)json_integer_value(json_object_get(xg, "bytes_htod"));
                agree = json_boolean(a > 0 && fabs(a - b) <= 0.01 * a);
        }
        json_object_set_new(xg, "views_agree", agree);
        return 0;
}

int bench_managed_on_demand(struct bench_job *j)
{
        struct managed m = {};
        std::vector<double> gpu, cpu;
        json_t *xg = NULL, *xc = NULL;
        int r = managed_open(j, &m);
        if (r < 0)
                return r;

        auto gpu_prep = [&]() { return m.to_host(); };
        auto gpu_work = [&]() { return m.kernel(OP_READ_WRITE); };
        auto cpu_prep = [&]() { return m.to_dev(); };
        auto cpu_work = [&]() { return cpu_touch_pages(m.p, m.size); };
        auto reopen = [&]() { return m.reopen(); };
        auto gpu_piece = [&](size_t off, size_t len) {
                return m.kernel_range(OP_READ_WRITE, off, len);
        };
        auto cpu_piece = [&](size_t off, size_t len) {
                return cpu_touch_pages((uint8_t *)m.p + off, len);
        };
        r = sample_events(j, gpu, gpu_prep, gpu_work);
        if (r >= 0)
                r = explain_pass(j, reopen, gpu_prep, gpu_piece, m.size, m.size, 0, &xg);
        if (r >= 0 && xg && json_is_true(json_object_get(xg, "available")))
                r = explain_on_demand(j, &m, gpu, xg);
        /* The way back: pages resident on the GPU, read by the CPU one word per page. */
        if (r >= 0)
                r = sample_host(j, cpu, cpu_prep, cpu_work);
        if (r >= 0)
                r = explain_pass(j, reopen, cpu_prep, cpu_piece, m.size, 0, m.size, &xc);
        if (r >= 0)
                r = m.verify("managed memory after on-demand migrations");
        if (r >= 0) {
                r = add_measurement(j, MEAS_GPU_ON_DEMAND, (double)j->size, ONE_DIR, gpu, false,
                                    explain_extra(xg, NULL));
                xg = NULL;
        }
        if (r >= 0) {
                r = add_measurement(j, MEAS_CPU_ON_DEMAND, (double)j->size, ONE_DIR, cpu, false,
                                    explain_extra(xc, json_pack("{s:s}", "timer", "host clock")));
                xc = NULL;
        }
        json_decref(xg);
        json_decref(xc);
        cudaFree(m.p);
        return r;
}

int bench_managed_prefetch(struct bench_job *j)
{
        struct bench_ctx *c = j->ctx;
        struct managed m = {};
        std::vector<double> pk, pf, back;
        json_t *x[3] = {NULL, NULL, NULL};
        int r = managed_open(j, &m);
        if (r < 0)
                return r;

        auto host_prep = [&]() { return m.to_host(); };
        auto dev_prep = [&]() { return m.to_dev(); };
        auto pk_work = [&]() -> int {
                CK(j, cudaMemPrefetchAsync(m.p, m.size, loc_dev(c), 0, c->streams[0]));
                return m.kernel(OP_READ_WRITE);
        };
        auto pf_work = [&]() -> int {
                CK(j, cudaMemPrefetchAsync(m.p, m.size, loc_dev(c), 0, c->streams[0]));
                return 0;
        };
        auto back_work = [&]() -> int {
                CK(j, cudaMemPrefetchAsync(m.p, m.size, loc_host(), 0, c->streams[0]));
                return 0;
        };
        auto reopen = [&]() { return m.reopen(); };
        auto pk_piece = [&](size_t off, size_t len) -> int {
                int rr = m.prefetch_range(off, len, loc_dev(c));
                return rr < 0 ? rr : m.kernel_range(OP_READ_WRITE, off, len);
        };
        auto pf_piece = [&](size_t off, size_t len) {
                return m.prefetch_range(off, len, loc_dev(c));
        };
        auto back_piece = [&](size_t off, size_t len) {
                return m.prefetch_range(off, len, loc_host());
        };
        bool take[3] = {bench_takes(j, MEAS_PREFETCH_KERNEL), bench_takes(j, MEAS_PREFETCH),
                        bench_takes(j, MEAS_PREFETCH_TO_HOST)};
        if (take[0]) {
                r = sample_events(j, pk, host_prep, pk_work);
                if (r >= 0)
                        r = explain_pass(j, reopen, host_prep, pk_piece, m.size, m.size, 0, &x[0]);
        }
        if (r >= 0 && take[1]) {
                r = sample_events(j, pf, host_prep, pf_work);
                if (r >= 0)
                        r = explain_pass(j, reopen, host_prep, pf_piece, m.size, m.size, 0, &x[1]);
        }
        if (r >= 0 && take[2]) {
                r = sample_events(j, back, dev_prep, back_work);
                if (r >= 0)
                        r = explain_pass(j, reopen, dev_prep, back_piece, m.size, 0, m.size, &x[2]);
        }
        if (r >= 0)
                r = m.verify("managed memory after prefetches");
        /* add_measurement takes each explain object; what a failure leaves is freed below. */
        if (r >= 0 && take[0]) {
                r = add_measurement(j, MEAS_PREFETCH_KERNEL, (double)j->size, ONE_DIR, pk, false,
                                    explain_extra(x[0], NULL));
                x[0] = NULL;
        }
        if (r >= 0 && take[1]) {
                r = add_measurement(j, MEAS_PREFETCH, (double)j->size, ONE_DIR, pf, false,
                                    explain_extra(x[1], NULL));
                x[1] = NULL;
        }
        if (r >= 0 && take[2]) {
                r = add_measurement(j, MEAS_PREFETCH_TO_HOST, (double)j->size, ONE_DIR, back, false,
                                    explain_extra(x[2], NULL));
                x[2] = NULL;
        }
        for (int i = 0; i < 3; i++)
                json_decref(x[i]);
        cudaFree(m.p);
        return r;
}

int bench_managed_advise(struct bench_job *j)
{
        struct bench_ctx *c = j->ctx;
        const char *advice = param_str(j, "advice", "read_mostly");
        bool read_mostly = strcmp(advice, "read_mostly") == 0;
        struct managed m = {};
        std::vector<double> rd, wr;
        cudaMemoryAdvise adv;
        cudaMemLocation loc = loc_dev(c);

        if (read_mostly)
                adv = cudaMemAdviseSetReadMostly;
        else if (strcmp(advice, "preferred_location_host") == 0) {
                adv = cudaMemAdviseSetPreferredLocation;
                loc = loc_host();
        } else if (strcmp(advice, "preferred_location_device") == 0)
                adv = cudaMemAdviseSetPreferredLocation;
        else if (strcmp(advice, "accessed_by") == 0)
                adv = cudaMemAdviseSetAccessedBy;
        else
                return job_fail(j, -EINVAL, "unknown advice %s", advice);

        int r = managed_open(j, &m);
        if (r < 0)
                return r;
        json_object_set_new(j->context_extra, "advice", json_string(advice));
        /* Start each sample from host-resident pages. Read-mostly duplicates survive a prefetch,
         * so the advice is dropped and set again around it. */
        auto reset = [&]() -> int {
                if (read_mostly)
                        CK(j, cudaMemAdvise(m.p, m.size, cudaMemAdviseUnsetReadMostly, loc));
                int rr = m.to_host();
                if (rr < 0)
                        return rr;
                CK(j, cudaMemAdvise(m.p, m.size, adv, loc));
                return 0;
        };

        json_t *xr = NULL, *xw = NULL;
        /* Host-preferred and accessed-by pages may be mapped remotely instead of migrated:
         * only read-mostly and device-preferred pages must all come to the GPU. */
        uint64_t must_move =
            read_mostly || strcmp(advice, "preferred_location_device") == 0 ? (uint64_t)m.size : 0;
        auto rd_work = [&]() { return m.kernel(OP_READ); };
        auto wr_work = [&]() { return m.kernel(OP_READ_WRITE); };
        auto reopen = [&]() { return m.reopen(); };
        auto rd_piece = [&](size_t off, size_t len) { return m.kernel_range(OP_READ, off, len); };
        auto wr_piece = [&](size_t off, size_t len) {
                return m.kernel_range(OP_READ_WRITE, off, len);
        };
        r = sample_events(j, rd, reset, rd_work);
        if (r >= 0)
                r = explain_pass(j, reopen, reset, rd_piece, m.size, must_move, 0, &xr);
        if (r >= 0)
                r = sample_events(j, wr, reset, wr_work);
        if (r >= 0)
                r = explain_pass(j, reopen, reset, wr_piece, m.size, must_move, 0, &xw);
        if (r >= 0)
                r = m.verify("managed memory after advised kernels");
        if (r >= 0) {
                r = add_measurement(j, MEAS_READ, (double)j->size, ONE_DIR, rd, false,
                                    explain_extra(xr, NULL));
                xr = NULL;
        }
        if (r >= 0) {
                r = add_measurement(j, MEAS_WRITE, (double)j->size, ONE_DIR, wr, false,
                                    explain_extra(xw, NULL));
                xw = NULL;
        }
        json_decref(xr);
        json_decref(xw);
        if (r >= 0 && read_mostly && !wr.empty() && !rd.empty())
                add_note(j, "read_mostly then GPU writes: every write collapses the read "
                            "duplicates; compare write with read. The figure depends on the "
                            "kernel's access pattern (context.kernel_pattern): each write fault "
                            "revokes the CPU's copy of its block, and how many such faults a "
                            "pattern makes at once decides the rate");
        cudaFree(m.p);
        return r;
}

int bench_system_memory(struct bench_job *j)
{
        struct bench_ctx *c = j->ctx;
        std::vector<double> rw;
        uint64_t rw_runs = 0;
        void *p;
        int r;

        if (!c->pageable_access)
                return job_fail(j, -ENOTSUP, "unsupported on this device: no pageableMemoryAccess");
        p = aligned_alloc(4096, (j->size + 4095) / 4096 * 4096);
        if (!p)
                return job_fail(j, -ENOMEM, "cannot allocate %llu bytes of system memory",
                                (unsigned long long)j->size);
        host_fill(p, j->size, j->seed);
        json_object_set_new(j->context_extra, "host_memory", json_string("malloc"));
        r = sample_events(
            j, rw,
            /* Bring pages the GPU may have migrated back to the CPU. */
            [&]() { return cpu_touch_pages(p, j->size); },
            [&]() -> int {
                    rw_runs++;
                    return launch_process(j, p, j->size, OP_READ_WRITE, true, c->streams[0]);
            });
        if (r >= 0) {
                CK(j, cudaDeviceSynchronize());
                r = host_verify(j, p, j->size, j->seed, parity(rw_runs),
                                "system memory after the kernels");
        }
        if (r >= 0)
                r = add_measurement(j, MEAS_READ_WRITE, (double)j->size, ONE_DIR, rw, false, NULL);
        free(p);
        return r;
}
