/* The worker's CUDA side: the context with its dedicated streams and events (created once), the
 * pinned, pageable and device buffer pool kept between jobs, the data pattern and its
 * verification, the kernels every benchmark shares, and bench_run's dispatch and result. It never
 * talks to umd and never decides limits: those come in struct bench_limits and the validated
 * params.
 *
 * Measurement names each benchmark reports (fake devices should imitate these; "bytes" is per
 * operation and "bytes_counted" says which bytes):
 *   copy              direction=h2d: "h2d"; d2h: "d2h"            (one direction)
 *                     direction=bidir: "bidir"                    (both directions: 2 x size)
 *                     + "copies_per_sample", "gated" (small pinned copies behind a spin kernel)
 *   copy_overlap      "overlapped" (chunks on `streams` streams, copy + kernel each),
 *                     "serial" (one copy of everything, then the kernel) (one direction)
 *   zero_copy         "read" (one direction), "read_write" (read+write: 2 x size)
 *   managed_on_demand "gpu_on_demand" (CPU-resident pages faulted in by a GPU kernel),
 *                     "cpu_on_demand" (GPU-resident pages touched by the CPU, host clock)
 *   managed_prefetch  "prefetch_kernel" (prefetch to GPU + kernel), "prefetch" (alone),
 *                     "prefetch_to_host"                          (one direction)
 *   managed_advise    "read", "write" (kernel reading / read-modify-writing advised memory)
 *   system_memory     "read_write" (kernel on malloc memory; needs pageableMemoryAccess)
 *   latency           "pinned_h2d", "pinned_d2h", "pageable_h2d", "pageable_d2h" (round trip
 *                     of one small copy, host clock), "managed_fault_single" (one page faulted
 *                     per kernel), "managed_fault_bulk" (all pages in one kernel, per page),
 *                     "managed_resident" (the same single kernel on resident pages: the floor)
 *                     + "latency_us" (median, microseconds)
 *   d2d               "copy_engine" (cudaMemcpyAsync device to device), "sm_copy" (a copy
 *                     kernel)                                     (read+write: 2 x size)
 *   peer, managed_peer, host_all, topology: on the node worker, bench_multi.cu
 * Every measurement has name, bytes, bytes_counted, samples_ms, stats, gbps, verified. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "bench_internal.h"

int job_fail(struct bench_job *j, int r, const char *fmt, ...)
{
        if (!j->error) {
                va_list ap;
                va_start(ap, fmt);
                if (vasprintf(&j->error, fmt, ap) < 0)
                        j->error = NULL;
                va_end(ap);
        }
        return r;
}

int job_cuda_fail(struct bench_job *j, cudaError_t e, const char *what)
{
        int r = e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
        /* Leave no error pending for the next call (sticky errors stay anyway: the worker
         * must then exit, which -EIO tells it). */
        (void)cudaGetLastError();
        return job_fail(j, r, "%s: %s", what, cudaGetErrorString(e));
}

int64_t param_int(const struct bench_job *j, const char *name, int64_t def)
{
        json_t *v = json_object_get(j->params, name);
        return json_is_integer(v) ? (int64_t)json_integer_value(v) : def;
}

const char *param_str(const struct bench_job *j, const char *name, const char *def)
{
        json_t *v = json_object_get(j->params, name);
        return json_is_string(v) ? json_string_value(v) : def;
}

bool job_cancelled(struct bench_job *j)
{
        return j->cancel && *j->cancel;
}

double now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

cudaMemLocation loc_host(void)
{
        cudaMemLocation l = {};
        l.type = cudaMemLocationTypeHost;
        l.id = 0;
        return l;
}

cudaMemLocation loc_dev(const struct bench_ctx *c)
{
        cudaMemLocation l = {};
        l.type = cudaMemLocationTypeDevice;
        l.id = c->ordinal;
        return l;
}

/* ---------------------------------------------------------------- kernels */

__global__ void k_fill(uint8_t *p, size_t size, uint32_t seed, uint8_t xb)
{
        uint32_t xw = xb * 0x01010101u;
        size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
        size_t nthreads = (size_t)gridDim.x * blockDim.x;
        uint4 *v = (uint4 *)p;
        for (size_t i = tid; i < size / 16; i += nthreads) {
                uint64_t w = i * 4;
                v[i] = make_uint4(pattern_word(w, seed) ^ xw, pattern_word(w + 1, seed) ^ xw,
                                  pattern_word(w + 2, seed) ^ xw, pattern_word(w + 3, seed) ^ xw);
        }
        if (tid == 0) {
                for (size_t b = (size / 16) * 16; b < size; b++) {
                        uint32_t w = pattern_word(b / 4, seed);
                        p[b] = (uint8_t)(w >> (8 * (b % 4))) ^ xb;
                }
        }
}

__global__ void k_verify(const uint8_t *p, size_t size, uint32_t seed, uint8_t xb,
                         unsigned long long *bad)
{
        uint32_t xw = xb * 0x01010101u;
        size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
        size_t nthreads = (size_t)gridDim.x * blockDim.x;
        const uint4 *v = (const uint4 *)p;
        unsigned long long mine = 0;
        for (size_t i = tid; i < size / 16; i += nthreads) {
                uint4 x = v[i];
                uint64_t w = i * 4;
                mine += (x.x != (pattern_word(w, seed) ^ xw)) +
                        (x.y != (pattern_word(w + 1, seed) ^ xw)) +
                        (x.z != (pattern_word(w + 2, seed) ^ xw)) +
                        (x.w != (pattern_word(w + 3, seed) ^ xw));
        }
        if (tid == 0) {
                for (size_t b = (size / 16) * 16; b < size; b++) {
                        uint32_t w = pattern_word(b / 4, seed);
                        mine += p[b] != ((uint8_t)(w >> (8 * (b % 4))) ^ xb);
                }
        }
        if (mine)
                atomicAdd(bad, mine);
}

/* sink is written only if an impossible sum comes out, so reads are never optimised away. */
template <bool WRITE>
__global__ void k_process_seq(uint8_t *base, size_t size, unsigned long long *sink)
{
        size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
        size_t nthreads = (size_t)gridDim.x * blockDim.x;
        uint32_t acc = 0;
        for (size_t off = tid * 16; off < size; off += nthreads * 16)
                acc ^= process_at<WRITE>(base, off, size);
        if (!WRITE && acc == 0x12345678u && tid == 0x7fffffff)
                *sink = acc;
}

/* Block b takes pages order[b], order[b + grid], ...; 256 threads x 16 bytes = one page. */
template <bool WRITE>
__global__ void k_process_paged(uint8_t *base, size_t size, const uint32_t *order, uint64_t npages,
                                unsigned long long *sink)
{
        uint32_t acc = 0;
        for (uint64_t k = blockIdx.x; k < npages; k += gridDim.x) {
                size_t off = (size_t)order[k] * BENCH_PAGE_BYTES + threadIdx.x * 16;
                if (off < size)
                        acc ^= process_at<WRITE>(base, off, size);
        }
        if (!WRITE && acc == 0x12345678u && threadIdx.x == 0xffff)
                *sink = acc;
}

__global__ void k_copy(uint4 *dst, const uint4 *src, size_t n16, uint8_t *dst_b,
                       const uint8_t *src_b, size_t tail)
{
        size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
        size_t nthreads = (size_t)gridDim.x * blockDim.x;
        for (size_t i = tid; i < n16; i += nthreads)
                dst[i] = src[i];
        if (tid < tail)
                dst_b[tid] = src_b[tid];
}

__global__ void k_touch(uint32_t *p, uint64_t first, uint64_t count, uint64_t spacing_words)
{
        uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
        if (i < count)
                p[(first + i) * spacing_words] ^= BENCH_XOR_WORD;
}

__device__ __forceinline__ uint64_t globaltimer(void)
{
        uint64_t t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        return t;
}

/* nvbandwidth's trick: the stream sits here while the host enqueues the timed copies, so the
 * copies start back to back and launch cost stays outside the events. Bounded: a host that
 * never releases cannot hang the GPU. */
__global__ void k_spin(volatile uint32_t *gate, uint64_t timeout_ns)
{
        uint64_t t0 = globaltimer();
        while (gate[0] == 0) {
                if (globaltimer() - t0 > timeout_ns) {
                        gate[1] = 1;
                        break;
                }
                __nanosleep(1000);
        }
}

/* At least one block, at most 8 per SM: the kernels' loops stride over whatever is left. */
unsigned grid_cap(const struct bench_ctx *c, uint64_t blocks)
{
        uint64_t max = (uint64_t)c->sm_count * 8;
        if (blocks < 1)
                blocks = 1;
        return (unsigned)(blocks < max ? blocks : max);
}

/* One 256-thread block per 4 KiB (16 bytes a thread), capped. */
static unsigned grid_for(const struct bench_ctx *c, size_t size)
{
        return grid_cap(c, (size / 16 + 255) / 256);
}

int dev_fill(struct bench_job *j, void *p, size_t size, uint32_t seed, uint8_t xor_byte,
             cudaStream_t s)
{
        k_fill<<<grid_for(j->ctx, size), 256, 0, s>>>((uint8_t *)p, size, seed, xor_byte);
        CK(j, cudaGetLastError());
        CK(j, cudaStreamSynchronize(s));
        return 0;
}

int dev_verify(struct bench_job *j, const void *p, size_t size, uint32_t seed, uint8_t xor_byte,
               const char *what)
{
        struct bench_ctx *c = j->ctx;
        unsigned long long bad = 0;
        cudaStream_t s = c->streams[0];
        CK(j, cudaMemsetAsync(c->d_scratch, 0, sizeof(bad), s));
        k_verify<<<grid_for(c, size), 256, 0, s>>>((const uint8_t *)p, size, seed, xor_byte,
                                                   c->d_scratch);
        CK(j, cudaGetLastError());
        CK(j, cudaMemcpyAsync(&bad, c->d_scratch, sizeof(bad), cudaMemcpyDeviceToHost, s));
        CK(j, cudaStreamSynchronize(s));
        return verify_result(j, bad, what);
}

int verify_result(struct bench_job *j, unsigned long long bad, const char *what)
{
        if (bad)
                return job_fail(j, -EIO,
                                "verification failed: %s: %llu words differ from the "
                                "pattern written before",
                                what, bad);
        return 0;
}

void host_fill(void *p, size_t size, uint32_t seed)
{
        uint32_t *w = (uint32_t *)p;
        uint8_t *b = (uint8_t *)p;
        for (size_t i = 0; i < size / 4; i++)
                w[i] = pattern_word(i, seed);
        for (size_t i = (size / 4) * 4; i < size; i++)
                b[i] = (uint8_t)(pattern_word(i / 4, seed) >> (8 * (i % 4)));
}

int host_verify(struct bench_job *j, const void *p, size_t size, uint32_t seed, uint8_t xor_byte,
                const char *what)
{
        const uint32_t *w = (const uint32_t *)p;
        const uint8_t *b = (const uint8_t *)p;
        uint32_t xw = xor_byte * 0x01010101u;
        unsigned long long bad = 0;
        for (size_t i = 0; i < size / 4; i++)
                bad += w[i] != (pattern_word(i, seed) ^ xw);
        for (size_t i = (size / 4) * 4; i < size; i++)
                bad += b[i] != ((uint8_t)(pattern_word(i / 4, seed) >> (8 * (i % 4))) ^ xor_byte);
        return verify_result(j, bad, what);
}

template <bool WRITE>
static void launch_process_as(struct bench_job *j, uint8_t *base, size_t size, bool paged,
                              cudaStream_t s)
{
        struct bench_ctx *c = j->ctx;
        if (paged)
                k_process_paged<WRITE><<<grid_cap(c, j->npages), 256, 0, s>>>(
                    base, size, j->d_order, j->npages, c->d_scratch + 1);
        else
                k_process_seq<WRITE>
                    <<<grid_for(c, size), 256, 0, s>>>(base, size, c->d_scratch + 1);
}

int launch_process(struct bench_job *j, void *p, size_t size, enum process_op op, bool use_order,
                   cudaStream_t s)
{
        bool paged = use_order && j->d_order;
        if (op == OP_READ)
                launch_process_as<false>(j, (uint8_t *)p, size, paged, s);
        else
                launch_process_as<true>(j, (uint8_t *)p, size, paged, s);
        CK(j, cudaGetLastError());
        return 0;
}

int launch_copy(struct bench_job *j, void *dst, const void *src, size_t size, cudaStream_t s)
{
        size_t n16 = size / 16;
        k_copy<<<grid_for(j->ctx, size), 256, 0, s>>>(
            (uint4 *)dst, (const uint4 *)src, n16, (uint8_t *)dst + n16 * 16,
            (const uint8_t *)src + n16 * 16, size - n16 * 16);
        CK(j, cudaGetLastError());
        return 0;
}

int launch_touch(struct bench_job *j, void *p, uint64_t first, uint64_t count, uint64_t spacing,
                 cudaStream_t s)
{
        unsigned threads = count < 128 ? (unsigned)count : 128;
        unsigned blocks = (unsigned)((count + threads - 1) / threads);
        k_touch<<<blocks, threads, 0, s>>>((uint32_t *)p, first, count, spacing / 4);
        CK(j, cudaGetLastError());
        return 0;
}

int gate_hold(struct bench_job *j, cudaStream_t s)
{
        struct bench_ctx *c = j->ctx;
        c->gate[0] = 0;
        c->gate[1] = 0;
        __sync_synchronize();
        k_spin<<<1, 1, 0, s>>>(c->gate_dev, BENCH_GATE_TIMEOUT_NS);
        CK(j, cudaGetLastError());
        return 0;
}

void gate_release(struct bench_job *j)
{
        __sync_synchronize();
        j->ctx->gate[0] = 1;
        __sync_synchronize();
}

bool gate_timed_out(struct bench_job *j)
{
        return j->ctx->gate[1] != 0;
}

int gate_before_sample(struct bench_job *j, bool gated, bool *timeouts, cudaStream_t s)
{
        if (!gated)
                return 0;
        *timeouts |= gate_timed_out(j);
        return gate_hold(j, s);
}

int gate_open(struct bench_job *j, cudaEvent_t stop, cudaStream_t s)
{
        /* Release only once everything is queued, right after the stop event. */
        CK(j, cudaEventRecord(stop, s));
        gate_release(j);
        return 1;
}

void samples_per_copy(struct bench_job *j, std::vector<double> &samples, int reps, bool gated,
                      bool *timeouts)
{
        *timeouts |= gated && gate_timed_out(j);
        for (double &s : samples)
                s /= reps;
}

int job_prepare_order(struct bench_job *j)
{
        uint32_t *order;
        int r;
        j->npages = (j->size + BENCH_PAGE_BYTES - 1) / BENCH_PAGE_BYTES;
        if (j->access == BENCH_ACCESS_SEQUENTIAL)
                return 0;
        order = (uint32_t *)malloc(j->npages * sizeof(*order));
        if (!order)
                return job_fail(j, -ENOMEM, "out of memory for the page order");
        r = bench_access_order(j->access, j->npages, j->stride, j->seed, order);
        if (r < 0) {
                free(order);
                return job_fail(j, r, "cannot build the page order");
        }
        cudaError_t e = cudaMalloc(&j->d_order, j->npages * sizeof(*order));
        if (e == cudaSuccess)
                e = cudaMemcpy(j->d_order, order, j->npages * sizeof(*order),
                               cudaMemcpyHostToDevice);
        free(order);
        if (e != cudaSuccess)
                return job_cuda_fail(j, e, "page order upload");
        return 0;
}

/* ---------------------------------------------------------------- memory */

int check_free(struct bench_job *j, uint64_t bytes, const char *what)
{
        size_t free_b = 0, total_b = 0;
        uint64_t reserve = j->ctx->lim.managed_reserve_bytes;
        CK(j, cudaMemGetInfo(&free_b, &total_b));
        if (bytes + reserve > free_b) {
                uint64_t avail = free_b > reserve ? free_b - reserve : 0;
                return job_fail(j, -ENOMEM,
                                "%s of %llu bytes refused: the GPU has %llu bytes free and "
                                "managed_reserve_bytes keeps %llu of them, so at most %llu may "
                                "be used",
                                what, (unsigned long long)bytes, (unsigned long long)free_b,
                                (unsigned long long)reserve, (unsigned long long)avail);
        }
        return 0;
}

int managed_alloc(struct bench_job *j, size_t size, void **ret)
{
        int r = check_free(j, size, "managed memory");
        if (r < 0)
                return r;
        CK(j, cudaMallocManaged(ret, size, cudaMemAttachGlobal));
        return 0;
}

static uint64_t pool_total(const struct bench_ctx *c)
{
        uint64_t t = 0;
        for (int i = 0; i < BENCH_POOL_SLOTS; i++)
                t += c->host[i].cap + c->pageable[i].cap + c->dev[i].cap;
        return t;
}

enum pool_kind { POOL_PINNED, POOL_PAGEABLE, POOL_DEVICE };

/* Frees one pool buffer; the slot is empty after. */
static void pool_free(struct bench_buf *b, enum pool_kind kind)
{
        if (b->p) {
                if (kind == POOL_PINNED)
                        cudaFreeHost(b->p);
                else if (kind == POOL_PAGEABLE)
                        free(b->p);
                else
                        cudaFree(b->p);
        }
        b->p = NULL;
        b->cap = 0;
}

/* Every page of a new pageable buffer written once, so the kernel maps them here and not
 * inside a job's fill (MADV_POPULATE_WRITE where the kernel has it, 5.14 on). */
static void pageable_touch(void *p, size_t size)
{
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
        if (madvise(p, size, MADV_POPULATE_WRITE) == 0)
                return;
        for (size_t off = 0; off < size; off += 4096)
                ((volatile uint8_t *)p)[off] = 0;
}

/* Hands out slot b, first replacing it with a larger buffer when it holds less than size (the
 * old contents are not kept). Device buffers are held to the free-memory reserve. */
static int pool_get(struct bench_job *j, struct bench_buf *b, enum pool_kind kind, size_t size,
                    void **ret)
{
        j->used_pool = true;
        if (b->cap < size) {
                pool_free(b, kind);
                j->all_reused = false;
                if (kind == POOL_PINNED) {
                        CK(j,
                           cudaHostAlloc(&b->p, size, cudaHostAllocMapped | cudaHostAllocPortable));
                } else if (kind == POOL_PAGEABLE) {
                        size_t cap = (size + 4095) / 4096 * 4096;
                        b->p = aligned_alloc(4096, cap);
                        if (!b->p)
                                return job_fail(j, -ENOMEM,
                                                "cannot allocate %zu bytes of pageable memory",
                                                size);
                        pageable_touch(b->p, cap);
                } else {
                        int r = check_free(j, size, "device buffer");
                        if (r < 0)
                                return r;
                        CK(j, cudaMalloc(&b->p, size));
                }
                b->cap = size;
        }
        *ret = b->p;
        return 0;
}

int pool_host(struct bench_job *j, int slot, size_t size, void **ret)
{
        return pool_get(j, &j->ctx->host[slot], POOL_PINNED, size, ret);
}

int pool_pageable(struct bench_job *j, int slot, size_t size, void **ret)
{
        return pool_get(j, &j->ctx->pageable[slot], POOL_PAGEABLE, size, ret);
}

int pool_dev(struct bench_job *j, int slot, size_t size, void **ret)
{
        return pool_get(j, &j->ctx->dev[slot], POOL_DEVICE, size, ret);
}

uint64_t bench_pool_release(struct bench_ctx *c)
{
        uint64_t freed = pool_total(c);

        for (int i = 0; i < BENCH_POOL_SLOTS; i++) {
                pool_free(&c->host[i], POOL_PINNED);
                pool_free(&c->pageable[i], POOL_PAGEABLE);
                pool_free(&c->dev[i], POOL_DEVICE);
        }
        return freed;
}

/* Keep the pool within pool_bytes: drop the largest buffers first. */
void bench_pool_trim(struct bench_ctx *c)
{
        struct bench_buf *slots[3] = {c->host, c->pageable, c->dev};

        while (pool_total(c) > c->lim.pool_bytes) {
                struct bench_buf *big = NULL;
                enum pool_kind kind = POOL_PINNED;
                for (int k = 0; k < 3; k++)
                        for (int i = 0; i < BENCH_POOL_SLOTS; i++)
                                if (!big || slots[k][i].cap > big->cap) {
                                        big = &slots[k][i];
                                        kind = (enum pool_kind)k;
                                }
                if (!big || big->cap == 0)
                        break;
                pool_free(big, kind);
        }
}

/* ---------------------------------------------------------------- results */

int add_measurement(struct bench_job *j, const char *name, double bytes, const char *counted,
                    const std::vector<double> &samples, bool verified, json_t *extra)
{
        struct sample_stats st;
        int r = stats_compute(samples.data(), samples.size(), &st);
        if (r < 0) {
                json_decref(extra);
                return job_fail(j, -EIO, "%s: no valid samples", name);
        }
        json_t *m = stats_measurement_json(name, (uint64_t)bytes, counted, samples.data(),
                                           samples.size(), &st, verified);
        if (!m) {
                json_decref(extra);
                return job_fail(j, -ENOMEM, "out of memory");
        }
        if (extra) {
                json_object_update(m, extra);
                json_decref(extra);
        }
        json_array_append_new(j->measurements, m);
        return 0;
}

void mark_verified(struct bench_job *j)
{
        size_t i;
        json_t *m;
        json_array_foreach(j->measurements, i, m) json_object_set_new(m, "verified", json_true());
}

void add_note(struct bench_job *j, const char *fmt, ...)
{
        char buf[BENCH_NOTE_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        json_array_append_new(j->notes, json_string(buf));
}

/* ---------------------------------------------------------------- context */

int bench_ctx_create(int ordinal, const json_t *device_info, const struct bench_limits *lim,
                     struct bench_ctx **ret, char **ret_error)
{
        struct bench_ctx *c = (struct bench_ctx *)calloc(1, sizeof(*c));
        cudaDeviceProp p;
        cudaError_t e;
        const char *what = "";

        if (!c)
                return -ENOMEM;
        c->ordinal = ordinal;
        c->lim = *lim;
        c->device_info = device_info ? json_deep_copy(device_info) : json_object();

#define TRY(call)                                                                                  \
        do {                                                                                       \
                what = #call;                                                                      \
                e = (call);                                                                        \
                if (e != cudaSuccess)                                                              \
                        goto fail;                                                                 \
        } while (0)
        TRY(cudaSetDevice(ordinal));
        TRY(cudaFree(0)); /* creates the primary context now, not in the first job */
        TRY(cudaGetDeviceProperties(&p, ordinal));
        c->sm_count = p.multiProcessorCount;
        snprintf(c->name, sizeof(c->name), "%s", p.name);
        discover_format_uuid(p.uuid.bytes, c->uuid, sizeof(c->uuid));
        TRY(cudaDeviceGetAttribute(&c->pageable_access, cudaDevAttrPageableMemoryAccess, ordinal));
        TRY(cudaDeviceGetAttribute(&c->concurrent_managed, cudaDevAttrConcurrentManagedAccess,
                                   ordinal));
        TRY(cudaDriverGetVersion(&c->driver_version));
        TRY(cudaRuntimeGetVersion(&c->runtime_version));
        for (int i = 0; i < BENCH_STREAMS; i++) {
                TRY(cudaStreamCreateWithFlags(&c->streams[i], cudaStreamNonBlocking));
                TRY(cudaEventCreateWithFlags(&c->ev_join[i], cudaEventDisableTiming));
        }
        TRY(cudaEventCreate(&c->ev_start));
        TRY(cudaEventCreate(&c->ev_stop));
        TRY(cudaHostAlloc((void **)&c->gate, 64, cudaHostAllocMapped | cudaHostAllocPortable));
        TRY(cudaHostGetDevicePointer((void **)&c->gate_dev, (void *)c->gate, 0));
        c->gate[0] = 0;
        c->gate[1] = 0;
        TRY(cudaMalloc(&c->d_scratch, 2 * sizeof(*c->d_scratch)));
#undef TRY
        *ret = c;
        return 0;
fail:
        if (ret_error &&
            asprintf(ret_error, "CUDA device %d: %s: %s", ordinal, what, cudaGetErrorString(e)) < 0)
                *ret_error = NULL;
        bench_ctx_destroy(c);
        return e == cudaErrorNoDevice || e == cudaErrorInvalidDevice ? -ENODEV : -EIO;
}

void bench_ctx_destroy(struct bench_ctx *c)
{
        if (!c)
                return;
        for (int i = 0; i < BENCH_POOL_SLOTS; i++) {
                pool_free(&c->host[i], POOL_PINNED);
                pool_free(&c->pageable[i], POOL_PAGEABLE);
                pool_free(&c->dev[i], POOL_DEVICE);
        }
        for (int i = 0; i < BENCH_STREAMS; i++) {
                if (c->streams[i])
                        cudaStreamDestroy(c->streams[i]);
                if (c->ev_join[i])
                        cudaEventDestroy(c->ev_join[i]);
        }
        if (c->ev_start)
                cudaEventDestroy(c->ev_start);
        if (c->ev_stop)
                cudaEventDestroy(c->ev_stop);
        if (c->gate)
                cudaFreeHost((void *)c->gate);
        if (c->d_scratch)
                cudaFree(c->d_scratch);
        json_decref(c->device_info);
        json_decref(c->inforom);
        free(c);
}

static json_t *context_json(struct bench_job *j)
{
        struct bench_ctx *c = j->ctx;
        json_t *pcie = json_object_get(c->device_info, "pcie");
        json_t *o = json_pack(
            "{s:s, s:s, s:i, s:i, s:i, s:O?, s:I, s:s, s:I, s:I, s:b, s:i, s:i, s:b, s:b}",
            "device_uuid", c->uuid, "device_name", c->name, "device_index", c->ordinal,
            "driver_version", c->driver_version, "runtime_version", c->runtime_version, "pcie",
            pcie, "buffer_bytes", (json_int_t)j->size, "access",
            j->access == BENCH_ACCESS_RANDOM    ? "random"
            : j->access == BENCH_ACCESS_STRIDED ? "strided"
                                                : "sequential",
            "stride", (json_int_t)j->stride, "seed", (json_int_t)j->seed, "buffer_reused",
            j->used_pool && j->all_reused, "warmup", j->warmup, "iterations", j->iterations,
            "pageableMemoryAccess", c->pageable_access != 0, "concurrentManagedAccess",
            c->concurrent_managed != 0);
        if (o && j->context_extra)
                json_object_update(o, j->context_extra);
        return o;
}

static const bench_entry<int (*)(struct bench_job *)> benchmarks[] = {
    {"copy", bench_copy},
    {"copy_overlap", bench_copy_overlap},
    {"zero_copy", bench_zero_copy},
    {"managed_on_demand", bench_managed_on_demand},
    {"managed_prefetch", bench_managed_prefetch},
    {"managed_advise", bench_managed_advise},
    {"system_memory", bench_system_memory},
    {"latency", bench_latency},
    {"um_vs_explicit", bench_um_vs_explicit},
    {"sweep", bench_sweep},
    {"health", bench_health},
    {"d2d", bench_d2d},
    {"pipeline", bench_pipeline},
    {"pipeline_sweep", bench_pipeline_sweep},
    {"train_step", bench_train_step},
    {"embedding_gather", bench_embedding_gather},
};

static int (*bench_find(const char *id))(struct bench_job *)
{
        return bench_entry_find(benchmarks, id);
}

bool bench_implements(const char *id)
{
        return bench_find(id) != NULL;
}

int bench_run(struct bench_ctx *ctx, const char *benchmark, const json_t *params,
              volatile sig_atomic_t *cancel, json_t **ret_result, char **ret_error)
{
        struct bench_job job = {};
        struct bench_job *j = &job;
        int (*run)(struct bench_job *) = bench_find(benchmark);
        int r;

        if (!run)
                return job_unknown(benchmark, "this worker", ret_error);
        r = job_begin(j, ctx, params, cancel);
        if (r < 0)
                return job_end(j, r, ret_error);
        j->stride = (uint64_t)param_int(j, "stride", 64 * 1024);
        r = bench_access_from_string(param_str(j, "access", "sequential"));
        j->access = r < 0 ? BENCH_ACCESS_SEQUENTIAL : (enum bench_access)r;
        j->explain = json_is_true(json_object_get(params, "explain"));
        j->warp_per_chunk = strcmp(param_str(j, "kernel", "grid_stride"), "warp_per_chunk") == 0;

        if (cudaSetDevice(ctx->ordinal) != cudaSuccess) {
                r = job_fail(j, -EIO, "cannot select CUDA device %d", ctx->ordinal);
                goto out;
        }
        r = job_prepare_order(j);
        if (r < 0)
                goto out;
        r = run(j);
        if (r < 0)
                goto out;
        /* Each benchmark fails the job on a mismatch, so reaching here means the data it
         * moved checked out. */
        mark_verified(j);

        {
                json_t *res =
                    json_pack("{s:s, s:b, s:O, s:o}", "benchmark", benchmark, "fake", false,
                              "measurements", j->measurements, "context", context_json(j));
                if (!res) {
                        r = job_fail(j, -ENOMEM, "out of memory");
                        goto out;
                }
                if (json_array_size(j->notes) > 0)
                        json_object_set(res, "notes", j->notes);
                json_object_update(res, j->extra_top);
                *ret_result = res;
        }
out:
        if (j->d_order)
                cudaFree(j->d_order);
        /* A job that failed mid-way may leave work queued: drain before the next job reuses
         * the streams and buffers. */
        for (int i = 0; i < BENCH_STREAMS; i++)
                cudaStreamSynchronize(ctx->streams[i]);
        bench_pool_trim(ctx);
        return job_end(j, r, ret_error);
}

int job_unknown(const char *id, const char *who, char **ret_error)
{
        return backend_fail(ret_error, -ENOTSUP, "benchmark %s is not run by %s", id, who);
}

int job_begin(struct bench_job *j, struct bench_ctx *ctx, const json_t *params,
              volatile sig_atomic_t *cancel)
{
        j->ctx = ctx;
        j->params = params;
        j->cancel = cancel;
        j->measurements = json_array();
        j->notes = json_array();
        j->context_extra = json_object();
        j->extra_top = json_object();
        j->all_reused = true;
        /* The catalog's defaults are filled in before any backend runs (kernels/backend.c):
         * these fallbacks only keep a hand-made call (tests/gpu's driver) from reading 0. */
        j->size = (uint64_t)param_int(j, "size", 64ll << 20);
        j->iterations = (int)param_int(j, "iterations", 20);
        j->warmup = (int)param_int(j, "warmup", 3);
        j->seed = (uint32_t)param_int(j, "seed", 1);
        if (!j->measurements || !j->notes || !j->context_extra || !j->extra_top)
                return job_fail(j, -ENOMEM, "out of memory");
        return 0;
}

int job_end(struct bench_job *j, int r, char **ret_error)
{
        json_decref(j->measurements);
        json_decref(j->notes);
        json_decref(j->context_extra);
        json_decref(j->extra_top);
        if (r < 0) {
                if (ret_error)
                        *ret_error = j->error ? j->error : strdup("benchmark failed");
                else
                        free(j->error);
                return r;
        }
        free(j->error);
        return 0;
}
