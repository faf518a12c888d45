/* Kernels on memory the GPU reaches without explicit copies: zero_copy (mapped pinned host
 * memory), managed_on_demand, managed_prefetch, managed_advise (cudaMallocManaged) and
 * system_memory (plain malloc, where pageableMemoryAccess allows it). Owns where the data is put
 * back before each sample (outside the timed window) and how it is verified afterwards, the
 * managed kernels' second shape (a warp per 64 KiB chunk) and the explain passes (issue 17). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_internal.h"

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
        char words[400];
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
        char why[320];

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
                 "of %llu to the host: the driver dropped the other events, so every count is a "
                 "lower bound",
                 (unsigned long long)h, (unsigned long long)expect_htod, (unsigned long long)d,
                 (unsigned long long)expect_dtoh);
        json_object_set_new(x, "why_incomplete", json_string(why));
}

struct managed {
        struct bench_job *j;
        void *p;
        size_t size;
        uint64_t rw_runs;

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
        int kernel(enum process_op op)
        {
                if (op == OP_READ_WRITE)
                        rw_runs++;
                if (!j->warp_per_chunk)
                        return launch_process(j, p, size, op, true, j->ctx->streams[0]);
                unsigned g = chunk_grid(j->ctx, size);
                cudaStream_t s = j->ctx->streams[0];
                unsigned long long *sink = j->ctx->d_scratch + 1;
                if (op == OP_READ_WRITE)
                        k_warp_per_chunk<true><<<g, 256, 0, s>>>((uint8_t *)p, size, sink);
                else
                        k_warp_per_chunk<false><<<g, 256, 0, s>>>((uint8_t *)p, size, sink);
                CK(j, cudaGetLastError());
                return 0;
        }
        int verify(const char *what)
        {
                return dev_verify(j, p, size, j->seed, parity(rw_runs), what);
        }
};

/* Allocates managed memory within the free-memory limit and initialises it on the CPU, as an
 * application would. */
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
        host_fill(m->p, m->size, j->seed);
        json_object_set_new(j->context_extra, "host_memory", json_string("managed"));
        describe_kernel(j);
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
        r = sample_events(j, gpu, gpu_prep, gpu_work);
        if (r >= 0)
                r = explain_pass(j, gpu_prep, gpu_work, m.size, 0, &xg);
        /* The way back: pages resident on the GPU, read by the CPU one word per page. */
        if (r >= 0)
                r = sample_host(j, cpu, cpu_prep, cpu_work);
        if (r >= 0)
                r = explain_pass(j, cpu_prep, cpu_work, 0, m.size, &xc);
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
        bool take[3] = {bench_takes(j, MEAS_PREFETCH_KERNEL), bench_takes(j, MEAS_PREFETCH),
                        bench_takes(j, MEAS_PREFETCH_TO_HOST)};
        if (take[0]) {
                r = sample_events(j, pk, host_prep, pk_work);
                if (r >= 0)
                        r = explain_pass(j, host_prep, pk_work, m.size, 0, &x[0]);
        }
        if (r >= 0 && take[1]) {
                r = sample_events(j, pf, host_prep, pf_work);
                if (r >= 0)
                        r = explain_pass(j, host_prep, pf_work, m.size, 0, &x[1]);
        }
        if (r >= 0 && take[2]) {
                r = sample_events(j, back, dev_prep, back_work);
                if (r >= 0)
                        r = explain_pass(j, dev_prep, back_work, 0, m.size, &x[2]);
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
        r = sample_events(j, rd, reset, rd_work);
        if (r >= 0)
                r = explain_pass(j, reset, rd_work, must_move, 0, &xr);
        if (r >= 0)
                r = sample_events(j, wr, reset, wr_work);
        if (r >= 0)
                r = explain_pass(j, reset, wr_work, must_move, 0, &xw);
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
