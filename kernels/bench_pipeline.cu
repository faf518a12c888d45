/* The training-step pipeline (issue 21): each step brings a batch of `size` bytes from the host to
 * the GPU and runs a kernel of `intensity` FMAs per 4-byte element on it, optionally reading
 * resident `weights` again and copying `writeback` bytes back, by every strategy a program can
 * choose (pinned copy then kernel, pinned chunks overlapped with the kernels, pageable, managed
 * on demand, managed prefetched whole or chunk by chunk, zero-copy, and a gather of only the
 * touched pages), all on the same data, each step verified. Also the copy alone and the kernel
 * alone, whose longer is the limit no strategy can beat; the ratios are the daemon's
 * (daemon/suites.c). Owns how a step is timed and verified; buffers come from bench.cu's pool,
 * managed ones from managed_alloc (never more than the GPU has free). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <functional>

#include "bench_pipeline.h"

/* One pass over pages [first, first + count) of the touched set; touched page t lies at page
 * t * spacing of base. Reads every 16 bytes once and runs `intensity` dependent FMAs on each of
 * its four floats (four chains a thread, so the FMA units stay busy), and XORs the words it read
 * into *sum: the step's check that the kernel saw the batch, and saw it after it arrived. EXPECT:
 * the same walk over the data pattern instead of memory, the sum a correct step must give. */
template <bool EXPECT>
__global__ void k_step(const uint4 *base, uint64_t first, uint64_t count, uint64_t spacing,
                       int intensity, uint32_t seed, unsigned *sum)
{
        uint64_t tid = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
        uint64_t nthreads = (uint64_t)gridDim.x * blockDim.x;
        uint64_t nvec = count * PIPE_VEC_A_PAGE;
        unsigned acc = 0;

        for (uint64_t v = tid; v < nvec; v += nthreads) {
                uint64_t page = (first + v / PIPE_VEC_A_PAGE) * spacing;
                uint64_t vec = page * PIPE_VEC_A_PAGE + v % PIPE_VEC_A_PAGE;
                uint4 x;
                if (EXPECT) {
                        x.x = pattern_word(vec * 4, seed);
                        x.y = pattern_word(vec * 4 + 1, seed);
                        x.z = pattern_word(vec * 4 + 2, seed);
                        x.w = pattern_word(vec * 4 + 3, seed);
                } else {
                        x = base[vec];
                }
                float f0 = (float)(x.x & 0xffff) * (1.0f / 65536), f1 = (float)(x.y & 0xffff),
                      f2 = (float)(x.z & 0xffff), f3 = (float)(x.w & 0xffff);
                for (int k = 0; k < intensity; k++) {
                        f0 = fmaf(f0, 0.999f, 0.001f);
                        f1 = fmaf(f1, 0.999f, 0.001f);
                        f2 = fmaf(f2, 0.999f, 0.001f);
                        f3 = fmaf(f3, 0.999f, 0.001f);
                }
                /* Never true (the chains stay finite), but the compiler cannot know: the FMAs
                 * are done. */
                if (__float_as_uint(f0 + f1 + f2 + f3) == 0xffffffffu)
                        acc ^= 1;
                acc ^= x.x ^ x.y ^ x.z ^ x.w;
        }
        acc = __reduce_xor_sync(0xffffffffu, acc);
        if ((threadIdx.x & 31) == 0 && acc)
                atomicXor(sum, acc);
}

static const struct {
        const char *name;
        enum pipe_kind kind;
} pipe_strategies[] = {
    {MEAS_PIPE_SERIAL, K_SERIAL},
    {MEAS_PIPE_OVERLAPPED, K_OVERLAPPED},
    {MEAS_PIPE_PAGEABLE, K_PAGEABLE},
    {MEAS_PIPE_ON_DEMAND, K_ON_DEMAND},
    {MEAS_PIPE_PREFETCH, K_PREFETCH},
    {MEAS_PIPE_PREFETCH_CHUNKED, K_PREFETCH_CHUNKED},
    {MEAS_PIPE_ZERO_COPY, K_ZERO_COPY},
    {MEAS_PIPE_GATHER, K_GATHER},
    {MEAS_PIPE_PREFETCH_BATCH, K_PREFETCH_BATCH},
    {MEAS_PIPE_DISCARD_PREFETCH, K_DISCARD_PREFETCH},
};

static int launch_step(struct pipe *p, const void *base, uint64_t first, uint64_t count,
                       uint64_t spacing, int intensity, cudaStream_t s)
{
        uint64_t blocks = (count * PIPE_VEC_A_PAGE + 255) / 256;
        if (count == 0)
                return 0;
        k_step<false><<<grid_cap(p->j->ctx, blocks), 256, 0, s>>>((const uint4 *)base, first, count,
                                                                  spacing, intensity, 0, p->d_sum);
        CK(p->j, cudaGetLastError());
        return 0;
}

/* The touched pages whose page of the batch lies in [q0, q1). */
static void touched_in(const struct pipe *p, uint64_t q0, uint64_t q1, uint64_t *ret_first,
                       uint64_t *ret_count)
{
        uint64_t t0 = (q0 + p->spacing - 1) / p->spacing, t1 = (q1 + p->spacing - 1) / p->spacing;
        t0 = std::min(t0, p->pages);
        t1 = std::min(t1, p->pages);
        *ret_first = t0;
        *ret_count = t1 - t0;
}

/* Chunk k of n: bytes [*off, *off + *len) of the batch, on page boundaries (the last takes the
 * tail). */
static void chunk_of(const struct pipe *p, int k, int n, uint64_t *q0, uint64_t *q1, size_t *off,
                     size_t *len)
{
        *q0 = p->total_pages * (uint64_t)k / (uint64_t)n;
        *q1 = p->total_pages * (uint64_t)(k + 1) / (uint64_t)n;
        *off = (size_t)*q0 * PIPE_PAGE;
        size_t end = k == n - 1 ? p->size : (size_t)*q1 * PIPE_PAGE;
        *len = end - *off;
}

/* The writeback bytes within [off, off + len), copied back on s. */
static int writeback_part(struct pipe *p, const void *from, size_t off, size_t len, cudaStream_t s)
{
        size_t end = std::min(off + len, p->writeback);
        if (off >= end)
                return 0;
        CK(p->j, cudaMemcpyAsync((char *)p->hwb + off, (const char *)from + off, end - off,
                                 cudaMemcpyDefault, s));
        return 0;
}

/* One step by a chunked strategy issued round robin: chunk k's copy (or prefetch) and its kernel
 * both on stream k % streams, every stream first waiting for the step's start. The weights go
 * first, on stream 0. */
static int step_round_robin(struct pipe *p, bool prefetch, void *data, const void *weights, int n)
{
        struct bench_job *j = p->j;
        struct bench_ctx *c = j->ctx;
        int r;

        if (weights && p->weights) {
                if (prefetch)
                        CK(j, cudaMemPrefetchAsync(weights, p->weights, loc_dev(c), 0, st(p, 0)));
                r = launch_process(j, (void *)weights, p->weights, OP_READ, false, st(p, 0));
                if (r < 0)
                        return r;
        }
        for (int s = 1; s < p->nstreams; s++)
                CK(j, cudaStreamWaitEvent(st(p, s), c->ev_start, 0));
        for (int k = 0; k < n; k++) {
                uint64_t q0, q1, first, count;
                size_t off, len;
                cudaStream_t cs = st(p, k % p->nstreams);
                chunk_of(p, k, n, &q0, &q1, &off, &len);
                touched_in(p, q0, q1, &first, &count);
                if (prefetch)
                        CK(j, cudaMemPrefetchAsync((char *)data + off, len, loc_dev(c), 0, cs));
                else
                        CK(j, cudaMemcpyAsync((char *)data + off, (char *)p->host + off, len,
                                              cudaMemcpyHostToDevice, cs));
                r = launch_step(p, data, first, count, p->spacing, p->intensity, cs);
                if (r >= 0)
                        r = writeback_part(p, data, off, len, cs);
                if (r < 0)
                        return r;
        }
        for (int s = 1; s < p->nstreams; s++) {
                CK(j, cudaEventRecord(c->ev_join[s], st(p, s)));
                CK(j, cudaStreamWaitEvent(st(p, 0), c->ev_join[s], 0));
        }
        return 0;
}

/* One step of managed_prefetch_batch: the batch's chunks and the weights in one
 * cudaMemPrefetchBatchAsync (CUDA 13), then the kernels. The batch completes as a whole, so
 * nothing of it overlaps within the step. */
static int step_batch(struct pipe *p)
{
        struct bench_job *j = p->j;
        int n =
            (int)std::min<uint64_t>((uint64_t)p->nchunks, std::max<uint64_t>(p->total_pages, 1));
        std::vector<void *> ptrs;
        std::vector<size_t> lens;
        cudaMemLocation loc = loc_dev(j->ctx);
        size_t first_op = 0;
        int r;

        for (int k = 0; k < n; k++) {
                uint64_t q0, q1;
                size_t off, len;
                chunk_of(p, k, n, &q0, &q1, &off, &len);
                ptrs.push_back((char *)p->managed + off);
                lens.push_back(len);
        }
        if (p->weights) {
                ptrs.push_back(p->mweights);
                lens.push_back(p->weights);
        }
        CK(j, cudaMemPrefetchBatchAsync(ptrs.data(), lens.data(), ptrs.size(), &loc, &first_op, 1,
                                        0, st(p, 0)));
        if (p->weights) {
                r = launch_process(j, p->mweights, p->weights, OP_READ, false, st(p, 0));
                if (r < 0)
                        return r;
        }
        r = launch_step(p, p->managed, 0, p->pages, p->spacing, p->intensity, st(p, 0));
        return r < 0 ? r : writeback_part(p, p->managed, 0, p->size, st(p, 0));
}

/* One step by a chunked strategy: the copies (or prefetches) back to back on stream 0, each
 * followed by an event; each chunk's kernel on one of the other streams, after its event. One
 * stream for every copy keeps them on one copy engine in order, so they run at the rate of one
 * copy of the whole batch; the kernels of the chunks already there run meanwhile. Managed
 * prefetches lose that way: each one's own cost is paid in series on the one stream (on an
 * H100, 1.40-1.88x the limit against 1.18-1.20x round robin; docs/design.md), so chunk_issue
 * auto issues them round robin. */
static int step_chunked(struct pipe *p, bool prefetch)
{
        struct bench_job *j = p->j;
        struct bench_ctx *c = j->ctx;
        void *data = prefetch ? p->managed : p->dev;
        const void *weights = prefetch ? p->mweights : p->dweights;
        int n =
            (int)std::min<uint64_t>((uint64_t)p->nchunks, std::max<uint64_t>(p->total_pages, 1));
        int ncompute = p->nstreams - 1;
        int r;

        if ((prefetch ? p->issue_prefetch : p->issue_copy) == ISSUE_ROUND_ROBIN)
                return step_round_robin(p, prefetch, data, weights, n);

        if (weights && p->weights) {
                /* On the first compute stream, beside the first copies. */
                cudaStream_t ws = ncompute ? st(p, 1) : st(p, 0);
                if (ncompute)
                        CK(j, cudaStreamWaitEvent(ws, c->ev_start, 0));
                if (prefetch)
                        CK(j, cudaMemPrefetchAsync(weights, p->weights, loc_dev(c), 0, ws));
                r = launch_process(j, (void *)weights, p->weights, OP_READ, false, ws);
                if (r < 0)
                        return r;
        }
        for (int k = 0; k < n; k++) {
                uint64_t q0, q1, first, count;
                size_t off, len;
                chunk_of(p, k, n, &q0, &q1, &off, &len);
                touched_in(p, q0, q1, &first, &count);
                if (prefetch)
                        CK(j,
                           cudaMemPrefetchAsync((char *)data + off, len, loc_dev(c), 0, st(p, 0)));
                else
                        CK(j, cudaMemcpyAsync((char *)data + off, (char *)p->host + off, len,
                                              cudaMemcpyHostToDevice, st(p, 0)));
                cudaStream_t cs = st(p, 0);
                if (ncompute) {
                        cs = st(p, 1 + k % ncompute);
                        CK(j, cudaEventRecord(p->ev[k], st(p, 0)));
                        CK(j, cudaStreamWaitEvent(cs, p->ev[k], 0));
                }
                r = launch_step(p, data, first, count, p->spacing, p->intensity, cs);
                if (r >= 0)
                        r = writeback_part(p, data, off, len, cs);
                if (r < 0)
                        return r;
        }
        for (int s = 1; s <= ncompute; s++) {
                CK(j, cudaEventRecord(c->ev_join[s], st(p, s)));
                CK(j, cudaStreamWaitEvent(st(p, 0), c->ev_join[s], 0));
        }
        return 0;
}

/* One step of strategy kind, enqueued on stream 0 (chunked ones join their streams to it). */
int pipe_step(struct pipe *p, enum pipe_kind kind)
{
        struct bench_job *j = p->j;
        struct bench_ctx *c = j->ctx;
        cudaStream_t s0 = st(p, 0);
        const void *data = p->dev, *weights = p->dweights;
        int r = 0;

        switch (kind) {
        case K_OVERLAPPED:
                return step_chunked(p, false);
        case K_PREFETCH_CHUNKED:
        case K_DISCARD_PREFETCH:
                return step_chunked(p, true);
        case K_PREFETCH_BATCH:
                return step_batch(p);
        case K_COPY_ALONE:
                CK(j, cudaMemcpyAsync(p->dev, p->host, p->size, cudaMemcpyHostToDevice, s0));
                return 0;
        case K_PREFETCH_ALONE:
                CK(j, cudaMemPrefetchAsync(p->managed, p->size, loc_dev(c), 0, s0));
                return 0;
        case K_KERNEL_ALONE:
                break;
        case K_SERIAL:
                CK(j, cudaMemcpyAsync(p->dev, p->host, p->size, cudaMemcpyHostToDevice, s0));
                break;
        case K_PAGEABLE:
                CK(j, cudaMemcpyAsync(p->dev, p->pageable, p->size, cudaMemcpyHostToDevice, s0));
                break;
        case K_GATHER:
                /* Only the touched pages cross the link, packed at the start of the device
                 * buffer; the kernel reads them there in order. */
                CK(j, cudaMemcpy2DAsync(p->dev, PIPE_PAGE, p->host, p->spacing * PIPE_PAGE,
                                        PIPE_PAGE, p->pages, cudaMemcpyHostToDevice, s0));
                if (p->weights) {
                        r = launch_process(j, p->dweights, p->weights, OP_READ, false, s0);
                        if (r < 0)
                                return r;
                }
                r = launch_step(p, p->dev, 0, p->pages, 1, p->intensity, s0);
                return r < 0 ? r : writeback_part(p, p->dev, 0, p->size, s0);
        case K_ON_DEMAND:
                data = p->managed;
                weights = p->mweights;
                break;
        case K_PREFETCH:
                data = p->managed;
                weights = p->mweights;
                CK(j, cudaMemPrefetchAsync(p->managed, p->size, loc_dev(c), 0, s0));
                if (p->weights)
                        CK(j, cudaMemPrefetchAsync(p->mweights, p->weights, loc_dev(c), 0, s0));
                break;
        case K_ZERO_COPY:
                data = p->host; /* mapped: the kernel reads it over the link */
                break;
        }
        if (p->weights && kind != K_KERNEL_ALONE) {
                r = launch_process(j, (void *)weights, p->weights, OP_READ, false, s0);
                if (r < 0)
                        return r;
        }
        r = launch_step(p, data, 0, p->pages, p->spacing, p->intensity, s0);
        if (r >= 0 && kind != K_KERNEL_ALONE)
                r = writeback_part(p, kind == K_ZERO_COPY ? p->dev : data, 0, p->size, s0);
        return r;
}

/* Untimed, before each step: the data back where a new batch would be (managed pages on the
 * host, the device copy cleared so a kernel reading before its copy landed fails the check),
 * the sum zeroed. Before the first step of a sample the managed weights go to the host too:
 * the first step faults them in, the next ones find them. */
static int before_step(struct pipe *p, enum pipe_kind kind, bool first)
{
        struct bench_job *j = p->j;
        cudaStream_t s0 = st(p, 0);

        if (kind == K_DISCARD_PREFETCH) {
                int r = pipe_discard_to_host(p, p->managed);
                if (r < 0)
                        return r;
                pipe_host_copy(p, p->managed, p->src[0]);
        } else if (managed_kind(kind)) {
                CK(j, cudaMemPrefetchAsync(p->managed, p->size, loc_host(), 0, s0));
        }
        if (managed_kind(kind)) {
                if (first && p->weights)
                        CK(j, cudaMemPrefetchAsync(p->mweights, p->weights, loc_host(), 0, s0));
        } else if (kind != K_KERNEL_ALONE && kind != K_ZERO_COPY) {
                CK(j, cudaMemsetAsync(p->dev, 0, p->size, s0));
        }
        CK(j, cudaMemsetAsync(p->d_sum, 0, sizeof(*p->d_sum), s0));
        CK(j, cudaDeviceSynchronize());
        return 0;
}

double pipe_median_of(std::vector<double> v)
{
        struct sample_stats s;
        if (v.empty() || stats_compute(v.data(), v.size(), &s) < 0)
                return 0;
        return s.median;
}

/* warmup + iterations samples of `steps` steps each, every step timed with events on stream 0
 * and its sum checked after it (outside the window). A sample is the mean of its steps;
 * first/steady are step 1 and the mean of the rest. */
static int run_steps(struct pipe *p, enum pipe_kind kind, int steps, std::vector<double> &samples,
                     std::vector<double> &firsts, std::vector<double> &steadies)
{
        struct bench_job *j = p->j;
        struct bench_ctx *c = j->ctx;
        bool check = kind != K_COPY_ALONE && kind != K_PREFETCH_ALONE; /* no kernel, no sum */

        for (int i = 0; i < j->warmup + j->iterations; i++) {
                double sum = 0, first = 0;
                for (int s = 0; s < steps; s++) {
                        float ms;
                        unsigned got = 0;
                        int r;
                        if (job_cancelled(j))
                                return job_fail(j, -ECANCELED, "cancelled");
                        r = before_step(p, kind, s == 0);
                        if (r < 0)
                                return r;
                        CK(j, cudaEventRecord(c->ev_start, st(p, 0)));
                        r = pipe_step(p, kind);
                        if (r < 0)
                                return r;
                        CK(j, cudaEventRecord(c->ev_stop, st(p, 0)));
                        CK(j, cudaEventSynchronize(c->ev_stop));
                        CK(j, cudaEventElapsedTime(&ms, c->ev_start, c->ev_stop));
                        CK(j, cudaMemcpy(&got, p->d_sum, sizeof(got), cudaMemcpyDeviceToHost));
                        if (check && got != p->expect)
                                return job_fail(j, -EIO,
                                                "verification failed: the kernel of a step read "
                                                "data whose sum is %08x, not %08x",
                                                got, p->expect);
                        sum += ms;
                        if (s == 0)
                                first = ms;
                }
                if (i < j->warmup)
                        continue;
                samples.push_back(sum / steps);
                firsts.push_back(first);
                if (steps > 1)
                        steadies.push_back((sum - first) / (steps - 1));
        }
        return 0;
}

static bool alone_kind(enum pipe_kind k)
{
        return k == K_COPY_ALONE || k == K_KERNEL_ALONE || k == K_PREFETCH_ALONE;
}

static int measure(struct pipe *p, enum pipe_kind kind, const char *name)
{
        std::vector<double> samples, firsts, steadies, writes;
        int steps = alone_kind(kind) ? 1 : p->steps;
        bool written = p->written && !alone_kind(kind);
        int r = written ? pipe_run_written(p, kind, steps, samples, firsts, steadies, writes)
                        : run_steps(p, kind, steps, samples, firsts, steadies);
        if (r < 0)
                return r;
        json_t *x =
            json_pack("{s:i, s:I, s:I, s:i, s:f}", "intensity", p->intensity, "touched_bytes",
                      (json_int_t)(p->pages * PIPE_PAGE), "weights_bytes", (json_int_t)p->weights,
                      "steps", steps, "first_step_ms", pipe_median_of(firsts));
        if (x)
                json_object_set_new(x, "steady_step_ms",
                                    steadies.empty() ? json_null()
                                                     : json_real(pipe_median_of(steadies)));
        if (x && (kind == K_OVERLAPPED || kind == K_PREFETCH_CHUNKED ||
                  kind == K_DISCARD_PREFETCH || kind == K_PREFETCH_BATCH))
                json_object_update_new(
                    x, json_pack("{s:i, s:i}", "chunks",
                                 (int)std::min<uint64_t>((uint64_t)p->nchunks, p->total_pages),
                                 "streams", p->nstreams));
        /* How its chunks were issued (the batched call issues none of its own). */
        if (x && (kind == K_OVERLAPPED || kind == K_PREFETCH_CHUNKED || kind == K_DISCARD_PREFETCH))
                json_object_set_new(
                    x, "chunk_issue",
                    json_string((kind == K_OVERLAPPED ? p->issue_copy : p->issue_prefetch) ==
                                        ISSUE_ROUND_ROBIN
                                    ? PIPE_ISSUE_ROUND_ROBIN
                                    : PIPE_ISSUE_COPY_STREAM));
        /* What the host's write of one batch cost in this strategy's memory (host time; for
         * managed memory, its CPU faults included). */
        if (x && written)
                json_object_set_new(x, "host_write_ms", json_real(pipe_median_of(writes)));
        return add_measurement(p->j, name, (double)p->size, "one direction", samples, false, x);
}

/* The kernel alone at intensity k: the median of a few runs (ms). */
static int time_kernel(struct pipe *p, int k, double *ret_ms)
{
        std::vector<double> v;
        for (int i = 0; i < 4; i++) {
                struct bench_ctx *c = p->j->ctx;
                float ms;
                CK(p->j, cudaEventRecord(c->ev_start, st(p, 0)));
                int r = launch_step(p, p->dev, 0, p->pages, p->spacing, k, st(p, 0));
                if (r < 0)
                        return r;
                CK(p->j, cudaEventRecord(c->ev_stop, st(p, 0)));
                CK(p->j, cudaEventSynchronize(c->ev_stop));
                CK(p->j, cudaEventElapsedTime(&ms, c->ev_start, c->ev_stop));
                if (i > 0)
                        v.push_back(ms);
        }
        *ret_ms = pipe_median_of(v);
        return 0;
}

/* intensity "balanced": time the copy alone, then find the intensity at which the kernel takes
 * as long. The kernel's time is close to a + b * k (launch and memory, then FMAs), so
 * k <- k * copy / t(k) converges to the balanced point at the rate a / copy: a few rounds. */
static int balance(struct pipe *p, json_t *info)
{
        struct bench_job *j = p->j;
        std::vector<double> copies;
        double copy_ms, t = 0;
        int k = 256;
        json_t *cal = json_array();

        /* Owned by info at once, so an early return leaks nothing. */
        if (!cal || json_object_set_new(info, "calibration", cal) < 0)
                return job_fail(j, -ENOMEM, "out of memory");

        for (int i = 0; i < 5; i++) {
                struct bench_ctx *c = j->ctx;
                float ms;
                CK(j, cudaEventRecord(c->ev_start, st(p, 0)));
                CK(j, cudaMemcpyAsync(p->dev, p->host, p->size, cudaMemcpyHostToDevice, st(p, 0)));
                CK(j, cudaEventRecord(c->ev_stop, st(p, 0)));
                CK(j, cudaEventSynchronize(c->ev_stop));
                CK(j, cudaEventElapsedTime(&ms, c->ev_start, c->ev_stop));
                if (i > 0)
                        copies.push_back(ms);
        }
        copy_ms = pipe_median_of(copies);
        /* Six rounds at most; the last one measures the intensity it settles on, so kernel_ms
         * is the chosen intensity's own time. */
        for (int round = 0;; round++) {
                int r = time_kernel(p, k, &t);
                if (r < 0)
                        return r;
                json_array_append_new(cal, json_pack("[i, f]", k, t));
                double next = t > 0 ? (double)k * copy_ms / t : k;
                int nk = (int)std::max(1.0, std::min(next + 0.5, (double)(1 << 20)));
                if (abs(nk - k) <= std::max(1, k / 200) || round == 5)
                        break;
                k = nk;
        }
        p->intensity = k;
        json_object_update_new(info, json_pack("{s:f, s:f}", "copy_ms", copy_ms, "kernel_ms", t));
        return 0;
}

static bool wants(const struct bench_job *j, const char *name)
{
        size_t i;
        json_t *v;
        json_array_foreach(json_object_get(j->params, "strategies"), i, v)
        {
                if (strcmp(json_string_value(v), name) == 0)
                        return true;
        }
        return false;
}

/* Everything a run holds beyond the pool, given back whatever happened (CK returns early). */
static void pipe_free(struct pipe *p)
{
        for (auto *v : {&p->ev, &p->t0, &p->t1}) {
                for (cudaEvent_t e : *v)
                        if (e)
                                cudaEventDestroy(e);
                v->clear();
        }
        if (p->d_sums)
                cudaFree(p->d_sums);
        if (p->manbuf[0])
                cudaFree(p->manbuf[0]); /* manbuf[1] lies in the same allocation */
        if (p->mweights)
                cudaFree(p->mweights);
        if (p->hostbuf[1])
                cudaFreeHost(p->hostbuf[1]);
        if (p->side)
                cudaStreamDestroy(p->side);
        for (void *b : {p->pagebuf[0], p->pagebuf[1], p->src[0], p->src[1], p->src[2]})
                free(b);
        *p = (struct pipe){};
}

/* The sums a correct step over batch seed + i must give (expects[i]), by the kernel's walk over
 * the pattern itself. */
static int expected_sums(struct pipe *p, int n)
{
        struct bench_job *j = p->j;
        cudaStream_t s0 = st(p, 0);
        for (int i = 0; i < n; i++) {
                CK(j, cudaMemsetAsync(p->d_sums, 0, sizeof(*p->d_sums), s0));
                k_step<true>
                    <<<grid_cap(j->ctx, (p->pages * PIPE_VEC_A_PAGE + 255) / 256), 256, 0, s0>>>(
                        NULL, 0, p->pages, p->spacing, 1, j->seed + (uint32_t)i, p->d_sums);
                CK(j, cudaGetLastError());
                /* The job's streams are non-blocking: a plain cudaMemcpy does not wait for them. */
                CK(j, cudaStreamSynchronize(s0));
                CK(j,
                   cudaMemcpy(&p->expects[i], p->d_sums, sizeof(unsigned), cudaMemcpyDeviceToHost));
        }
        p->expect = p->expects[0];
        return 0;
}

/* Buffers beyond the pool's: pageable and managed ones, and for batch host_written the second
 * buffer of each kind and the loader's batches. Managed buffers of host_written are one
 * allocation of twice the size, so the free-memory check counts both. */
static int pipe_buffers(struct pipe *p, bool need_managed, bool need_pageable, bool need_discard)
{
        struct bench_job *j = p->j;
        int nb = p->written ? 2 : 1, r = 0;
        size_t msize = (p->size + PIPE_PAGE - 1) / PIPE_PAGE * PIPE_PAGE;

        p->hostbuf[0] = p->host;
        if (p->written)
                CK(j, cudaMallocHost(&p->hostbuf[1], p->size));
        for (int b = 0; need_pageable && b < nb; b++) {
                p->pagebuf[b] = pipe_page_alloc(p->size);
                if (!p->pagebuf[b])
                        return job_fail(j, -ENOMEM, "cannot allocate %zu bytes of pageable memory",
                                        p->size);
                host_fill(p->pagebuf[b], p->size, j->seed);
        }
        if (need_managed) {
                r = managed_alloc(j, msize * (size_t)nb, &p->manbuf[0]);
                if (r >= 0 && p->weights)
                        r = managed_alloc(j, p->weights, &p->mweights);
                if (r >= 0)
                        r = dev_fill(j, p->manbuf[0], p->size, j->seed, 0, st(p, 0));
                if (r >= 0 && p->weights)
                        r = dev_fill(j, p->mweights, p->weights, j->seed + 1, 0, st(p, 0));
                if (r < 0)
                        return r;
                if (p->written)
                        p->manbuf[1] = (char *)p->manbuf[0] + msize;
        }
        if (p->written || need_discard)
                r = pipe_make_sources(p, p->written ? 3 : 1);
        if (r >= 0 && need_discard)
                CK(j, cudaStreamCreateWithFlags(&p->side, cudaStreamNonBlocking));
        pipe_use_buffer(p, 0);
        return r;
}

static int pipe_run(struct pipe *p)
{
        struct bench_job *j = p->j;
        cudaStream_t s0 = st(p, 0);
        bool need_managed = false, need_pageable = false, need_discard = false;
        bool need_prefetch = false;
        json_t *intensity = json_object_get(j->params, "intensity");
        json_t *info = json_object();
        int r;

        /* Owned by the result from here on: what is added below is borrowed. */
        if (!info || json_object_set_new(j->extra_top, "intensity", info) < 0)
                return job_fail(j, -ENOMEM, "out of memory");
        for (auto &s : pipe_strategies) {
                if (!wants(j, s.name))
                        continue;
                need_managed |= managed_kind(s.kind);
                need_pageable |= s.kind == K_PAGEABLE;
                need_discard |= s.kind == K_DISCARD_PREFETCH;
                need_prefetch |= managed_kind(s.kind) && s.kind != K_ON_DEMAND;
        }
        r = pool_host(j, 0, p->size, &p->host);
        if (r >= 0)
                r = pool_dev(j, 0, p->size, &p->dev);
        if (r >= 0 && p->writeback)
                r = pool_host(j, 1, p->writeback, &p->hwb);
        if (r >= 0 && p->weights)
                r = pool_dev(j, 1, p->weights, &p->dweights);
        if (r >= 0)
                r = dev_fill(j, p->host, p->size, j->seed, 0, s0);
        if (r >= 0 && p->weights)
                r = dev_fill(j, p->dweights, p->weights, j->seed + 1, 0, s0);
        if (r < 0)
                return r;
        CK(j, cudaMalloc(&p->d_sums, sizeof(*p->d_sums) * PIPE_MAX_STEPS));
        p->d_sum = p->d_sums;
        r = expected_sums(p, p->written ? 3 : 1);
        if (r < 0)
                return r;
        p->ev.assign((size_t)p->nchunks, NULL);
        for (auto &e : p->ev)
                CK(j, cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        p->t0.assign((size_t)p->steps, NULL);
        p->t1.assign((size_t)p->steps, NULL);
        for (size_t i = 0; i < p->t0.size(); i++) {
                CK(j, cudaEventCreate(&p->t0[i]));
                CK(j, cudaEventCreate(&p->t1[i]));
        }
        /* The kernel alone reads the batch where it lies: on the device. */
        CK(j, cudaMemcpy(p->dev, p->host, p->size, cudaMemcpyHostToDevice));

        if (json_is_string(intensity)) {
                r = balance(p, info);
                if (r < 0)
                        return r;
        } else {
                p->intensity = (int)json_integer_value(intensity);
        }
        json_object_set(info, "requested", intensity);
        json_object_set_new(info, "chosen", json_integer(p->intensity));

        r = measure(p, K_COPY_ALONE, MEAS_COPY_ALONE);
        if (r < 0)
                return r;
        CK(j, cudaMemcpy(p->dev, p->host, p->size, cudaMemcpyHostToDevice));
        r = measure(p, K_KERNEL_ALONE, MEAS_KERNEL_ALONE);
        if (r >= 0)
                r = pipe_buffers(p, need_managed, need_pageable, need_discard);
        if (r >= 0 && p->written)
                r = pipe_measure_host_write(p);
        /* What bounds every prefetching strategy, from the same run (the summary cites it). */
        if (r >= 0 && need_prefetch)
                r = measure(p, K_PREFETCH_ALONE, MEAS_PREFETCH_ALONE);
        for (auto &s : pipe_strategies) {
                if (r < 0)
                        break;
                if (!wants(j, s.name))
                        continue;
                if (s.kind == K_GATHER && p->pages >= p->total_pages) {
                        add_note(j, "%s skipped: every page is touched, so it would be %s",
                                 MEAS_PIPE_GATHER, MEAS_PIPE_SERIAL);
                        continue;
                }
                if ((s.kind == K_PREFETCH_BATCH || s.kind == K_DISCARD_PREFETCH) &&
                    !pipe_batch_api_works(p, s.kind))
                        continue;
                r = measure(p, s.kind, s.name);
        }
        return r;
}

/* chunk_issue's words: how pinned copies, and how managed prefetches, are issued. */
static const struct {
        const char *word;
        enum pipe_issue copy, prefetch;
} pipe_issues[] = {{PIPE_ISSUE_AUTO, ISSUE_COPY_STREAM, ISSUE_ROUND_ROBIN},
                   {PIPE_ISSUE_COPY_STREAM, ISSUE_COPY_STREAM, ISSUE_COPY_STREAM},
                   {PIPE_ISSUE_ROUND_ROBIN, ISSUE_ROUND_ROBIN, ISSUE_ROUND_ROBIN}};

int bench_pipeline(struct bench_job *j)
{
        struct pipe p = {};
        const char *layout = param_str(j, "layout", "spread");
        const char *issue = param_str(j, "chunk_issue", PIPE_ISSUE_AUTO);
        uint64_t touched = (uint64_t)param_int(j, "touched", 0);

        p.j = j;
        p.size = j->size;
        p.weights = (size_t)param_int(j, "weights", 0);
        p.writeback = std::min((size_t)param_int(j, "writeback", 0), p.size);
        p.steps = (int)param_int(j, "steps", 3);
        p.nchunks = (int)param_int(j, "chunks", 64);
        p.nstreams = (int)param_int(j, "streams", 3);
        p.written = strcmp(param_str(j, "batch", PIPE_BATCH_PREPARED), PIPE_BATCH_WRITTEN) == 0;
        p.writers = (int)param_int(j, "writers", 1);
        p.issue_prefetch = ISSUE_ROUND_ROBIN; /* auto, unless named otherwise */
        for (auto &x : pipe_issues) {
                if (strcmp(issue, x.word) == 0) {
                        p.issue_copy = x.copy;
                        p.issue_prefetch = x.prefetch;
                }
        }
        p.total_pages = p.size / PIPE_PAGE;
        if (p.total_pages == 0)
                return job_fail(j, -EINVAL, "size must be at least one 4 KiB page");
        if (p.nstreams < 1 || p.nstreams > BENCH_STREAMS)
                return job_fail(j, -EINVAL, "streams must be between 1 and %d", BENCH_STREAMS);
        if (p.steps < 1 || p.steps > PIPE_MAX_STEPS || p.writers < 1)
                return job_fail(j, -EINVAL, "steps must be between 1 and %d, writers at least 1",
                                PIPE_MAX_STEPS);
        if (touched == 0 || touched > p.size)
                touched = p.size;
        p.pages =
            std::max<uint64_t>(1, std::min(p.total_pages, (touched + PIPE_PAGE - 1) / PIPE_PAGE));
        p.spacing = strcmp(layout, "clustered") == 0 ? 1 : p.total_pages / p.pages;
        json_object_set_new(j->context_extra, "host_memory", json_string("pinned"));
        json_object_set_new(
            j->context_extra, "pipeline",
            json_pack("{s:I, s:I, s:I, s:s, s:I, s:i, s:i, s:i, s:s, s:i, s:s}", "touched_bytes",
                      (json_int_t)(p.pages * PIPE_PAGE), "weights_bytes", (json_int_t)p.weights,
                      "writeback_bytes", (json_int_t)p.writeback, "layout", layout, "page_spacing",
                      (json_int_t)p.spacing, "steps", p.steps, "chunks", p.nchunks, "streams",
                      p.nstreams, "batch", p.written ? PIPE_BATCH_WRITTEN : PIPE_BATCH_PREPARED,
                      "writers", p.writers, "chunk_issue", issue));
        int r = pipe_run(&p);
        pipe_free(&p);
        return r;
}
