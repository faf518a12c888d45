/* Kernels on memory the GPU reaches without explicit copies: zero_copy (mapped pinned host
 * memory), managed_on_demand, managed_prefetch, managed_advise (cudaMallocManaged) and
 * system_memory (plain malloc, where pageableMemoryAccess allows it). Owns where the data is put
 * back before each sample (outside the timed window) and how it is verified afterwards. */
#include <errno.h>
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
                r = add_measurement(j, "read", (double)j->size, ONE_DIR, rd, false, NULL);
        if (r >= 0)
                r = add_measurement(j, "read_write", 2.0 * (double)j->size, "read+write", rw, false,
                                    NULL);
        return r;
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
                return launch_process(j, p, size, op, true, j->ctx->streams[0]);
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
        m->j = j;
        m->size = j->size;
        m->rw_runs = 0;
        int r = managed_alloc(j, m->size, &m->p);
        if (r < 0)
                return r;
        host_fill(m->p, m->size, j->seed);
        json_object_set_new(j->context_extra, "host_memory", json_string("managed"));
        return 0;
}

int bench_managed_on_demand(struct bench_job *j)
{
        struct managed m = {};
        std::vector<double> gpu, cpu;
        int r = managed_open(j, &m);
        if (r < 0)
                return r;

        r = sample_events(
            j, gpu, [&]() { return m.to_host(); }, [&]() { return m.kernel(OP_READ_WRITE); });
        /* The way back: pages resident on the GPU, read by the CPU one word per page. */
        if (r >= 0)
                r = sample_host(
                    j, cpu, [&]() { return m.to_dev(); },
                    [&]() { return cpu_touch_pages(m.p, m.size); });
        if (r >= 0)
                r = m.verify("managed memory after on-demand migrations");
        if (r >= 0)
                r = add_measurement(j, "gpu_on_demand", (double)j->size, ONE_DIR, gpu, false, NULL);
        if (r >= 0)
                r = add_measurement(j, "cpu_on_demand", (double)j->size, ONE_DIR, cpu, false,
                                    json_pack("{s:s}", "timer", "host clock"));
        cudaFree(m.p);
        return r;
}

int bench_managed_prefetch(struct bench_job *j)
{
        struct bench_ctx *c = j->ctx;
        struct managed m = {};
        std::vector<double> pk, pf, back;
        int r = managed_open(j, &m);
        if (r < 0)
                return r;

        r = sample_events(
            j, pk, [&]() { return m.to_host(); },
            [&]() -> int {
                    CK(j, cudaMemPrefetchAsync(m.p, m.size, loc_dev(c), 0, c->streams[0]));
                    return m.kernel(OP_READ_WRITE);
            });
        if (r >= 0)
                r = sample_events(
                    j, pf, [&]() { return m.to_host(); },
                    [&]() -> int {
                            CK(j, cudaMemPrefetchAsync(m.p, m.size, loc_dev(c), 0, c->streams[0]));
                            return 0;
                    });
        if (r >= 0)
                r = sample_events(
                    j, back, [&]() { return m.to_dev(); },
                    [&]() -> int {
                            CK(j, cudaMemPrefetchAsync(m.p, m.size, loc_host(), 0, c->streams[0]));
                            return 0;
                    });
        if (r >= 0)
                r = m.verify("managed memory after prefetches");
        if (r >= 0)
                r = add_measurement(j, "prefetch_kernel", (double)j->size, ONE_DIR, pk, false,
                                    NULL);
        if (r >= 0)
                r = add_measurement(j, "prefetch", (double)j->size, ONE_DIR, pf, false, NULL);
        if (r >= 0)
                r = add_measurement(j, "prefetch_to_host", (double)j->size, ONE_DIR, back, false,
                                    NULL);
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

        r = sample_events(j, rd, reset, [&]() { return m.kernel(OP_READ); });
        if (r >= 0)
                r = sample_events(j, wr, reset, [&]() { return m.kernel(OP_READ_WRITE); });
        if (r >= 0)
                r = m.verify("managed memory after advised kernels");
        if (r >= 0)
                r = add_measurement(j, "read", (double)j->size, ONE_DIR, rd, false, NULL);
        if (r >= 0)
                r = add_measurement(j, "write", (double)j->size, ONE_DIR, wr, false, NULL);
        if (r >= 0 && read_mostly && !wr.empty() && !rd.empty())
                add_note(j, "read_mostly then GPU writes: every write collapses the read "
                            "duplicates; compare write with read");
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
                r = add_measurement(j, "read_write", (double)j->size, ONE_DIR, rw, false, NULL);
        free(p);
        return r;
}
