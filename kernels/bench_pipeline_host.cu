/* The host's half of the training-step pipeline (issue 60): with batch host_written the CPU
 * copies each step's batch into the strategy's own memory (pinned, pageable, or the managed buffer
 * itself, whose pages fault back from the GPU), double-buffered as a data loader does, the write
 * on the step's clock; and CUDA 13's batched prefetch and discard-and-prefetch, tried once before
 * use. Owns the loader's batches and the host-timed steps; kernels/bench_pipeline.cu owns the GPU
 * side of a step. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <thread>

#include "bench_pipeline.h"

/* The host copies src into dst with p->writers threads, each a contiguous part. */
void pipe_host_copy(const struct pipe *p, void *dst, const void *src)
{
        std::vector<std::thread> th;
        size_t part = (p->size / (size_t)p->writers + PIPE_PAGE - 1) / PIPE_PAGE * PIPE_PAGE;
        for (int w = 1; w < p->writers; w++) {
                size_t off = part * (size_t)w;
                if (off >= p->size)
                        break;
                th.emplace_back(memcpy, (char *)dst + off, (const char *)src + off,
                                std::min(part, p->size - off));
        }
        memcpy(dst, src, std::min(part, p->size));
        for (auto &t : th)
                t.join();
}

/* discard-and-prefetch: the GPU's copy of what buf held is dead, so its pages go to the host
 * without their data (CUDA 13) before the host writes them: the write then faults nothing back. */
int pipe_discard_to_host(struct pipe *p, void *buf)
{
        cudaMemLocation host = loc_host();
        size_t first_op = 0, len = p->size;
        CK(p->j,
           cudaMemDiscardAndPrefetchBatchAsync(&buf, &len, 1, &host, &first_op, 1, 0, p->side));
        CK(p->j, cudaStreamSynchronize(p->side));
        return 0;
}

/* Buffer b of each kind becomes the one the strategies read. */
void pipe_use_buffer(struct pipe *p, int b)
{
        p->host = p->hostbuf[b];
        p->pageable = p->pagebuf[b];
        p->managed = p->manbuf[b];
}

/* The host writes batch g (src[g % 3]) into buffer b of kind's memory: the write a data loader
 * makes, with its CPU faults where the buffer is managed (after a discard for
 * managed_discard_prefetch). Host time, ms. */
static int pipe_host_write(struct pipe *p, enum pipe_kind kind, int b, uint64_t g, double *ret_ms)
{
        void *dst = managed_kind(kind)   ? p->manbuf[b]
                    : kind == K_PAGEABLE ? p->pagebuf[b]
                                         : p->hostbuf[b];
        double t = now_ms();
        if (kind == K_DISCARD_PREFETCH) {
                int r = pipe_discard_to_host(p, dst);
                if (r < 0)
                        return r;
        }
        pipe_host_copy(p, dst, p->src[g % 3]);
        *ret_ms = now_ms() - t;
        return 0;
}

/* One sample of batch host_written: the host writes batch 0, then while the GPU runs step s on
 * one buffer the host writes step s+1's batch into the other, once the step that last read it
 * is done (the one wait a double-buffered loader has). Host time from the first write to the
 * last step's end; each step's sum checked after. ret: wall, the first step (its write and its
 * GPU time), the writes. */
static int pipe_written_sample(struct pipe *p, enum pipe_kind kind, int steps, uint64_t *g,
                               double *ret_wall, double *ret_first, std::vector<double> &writes)
{
        struct bench_job *j = p->j;
        double w0, w, t0;
        float ms0;
        int r;

        CK(j, cudaMemsetAsync(p->d_sums, 0, sizeof(*p->d_sums) * (size_t)steps, st(p, 0)));
        if (managed_kind(kind) && p->weights)
                CK(j, cudaMemPrefetchAsync(p->mweights, p->weights, loc_host(), 0, st(p, 0)));
        CK(j, cudaDeviceSynchronize());
        t0 = now_ms();
        r = pipe_host_write(p, kind, 0, *g, &w0);
        writes.push_back(w0);
        for (int s = 0; s < steps && r >= 0; s++) {
                pipe_use_buffer(p, s % 2);
                p->d_sum = p->d_sums + s;
                CK(j, cudaEventRecord(p->t0[s], st(p, 0)));
                /* The step's streams wait for its start (ev_start), as in a prepared step. */
                CK(j, cudaEventRecord(j->ctx->ev_start, st(p, 0)));
                r = pipe_step(p, kind);
                if (r < 0)
                        break;
                CK(j, cudaEventRecord(p->t1[s], st(p, 0)));
                if (s + 1 == steps)
                        break;
                if (s > 0)
                        CK(j, cudaEventSynchronize(p->t1[s - 1]));
                r = pipe_host_write(p, kind, (s + 1) % 2, *g + (uint64_t)s + 1, &w);
                writes.push_back(w);
        }
        if (r < 0)
                return r;
        CK(j, cudaEventSynchronize(p->t1[steps - 1]));
        *ret_wall = now_ms() - t0;
        CK(j, cudaEventElapsedTime(&ms0, p->t0[0], p->t1[0]));
        *ret_first = w0 + ms0;
        std::vector<unsigned> got((size_t)steps);
        CK(j, cudaMemcpy(got.data(), p->d_sums, sizeof(unsigned) * (size_t)steps,
                         cudaMemcpyDeviceToHost));
        for (int s = 0; s < steps; s++)
                if (got[(size_t)s] != p->expects[(*g + (uint64_t)s) % 3])
                        return job_fail(j, -EIO,
                                        "verification failed: step %d's kernel read data whose "
                                        "sum is %08x, not the batch the host wrote (%08x)",
                                        s, got[(size_t)s], p->expects[(*g + (uint64_t)s) % 3]);
        *g += (uint64_t)steps;
        pipe_use_buffer(p, 0);
        p->d_sum = p->d_sums;
        return 0;
}

/* warmup + iterations samples of written_sample: a sample is its wall time over its steps, the
 * first step its write and GPU time, the steady step the rest of the wall time over the rest. */
int pipe_run_written(struct pipe *p, enum pipe_kind kind, int steps, std::vector<double> &samples,
                     std::vector<double> &firsts, std::vector<double> &steadies,
                     std::vector<double> &writes)
{
        struct bench_job *j = p->j;
        uint64_t g = 0;

        for (int i = 0; i < j->warmup + j->iterations; i++) {
                double wall = 0, first = 0;
                std::vector<double> w;
                if (job_cancelled(j))
                        return job_fail(j, -ECANCELED, "cancelled");
                int r = pipe_written_sample(p, kind, steps, &g, &wall, &first, w);
                if (r < 0)
                        return r;
                if (i < j->warmup)
                        continue;
                writes.insert(writes.end(), w.begin(), w.end());
                samples.push_back(wall / steps);
                firsts.push_back(first);
                if (steps > 1)
                        steadies.push_back((wall - first) / (steps - 1));
        }
        return 0;
}

/* batch host_written: the host's write of one batch into pinned memory already its own, alone:
 * the third half of the limit. */
int pipe_measure_host_write(struct pipe *p)
{
        std::vector<double> samples;
        for (int i = 0; i < p->j->warmup + p->j->iterations; i++) {
                double t = now_ms();
                pipe_host_copy(p, p->hostbuf[i % 2], p->src[i % 3]);
                if (i >= p->j->warmup)
                        samples.push_back(now_ms() - t);
        }
        json_t *x = json_pack("{s:i}", "writers", p->writers);
        return add_measurement(p->j, MEAS_HOST_WRITE, (double)p->size, "one direction", samples,
                               false, x);
}

void *pipe_page_alloc(size_t size)
{
        return aligned_alloc(PIPE_PAGE, (size + PIPE_PAGE - 1) / PIPE_PAGE * PIPE_PAGE);
}

/* The batches the host copies from: nsrc of them, batch i the pattern of seed + i (filled on the
 * GPU, then brought back: a CPU fill of gigabytes takes seconds). */
int pipe_make_sources(struct pipe *p, int nsrc)
{
        struct bench_job *j = p->j;
        for (int i = 0; i < nsrc; i++) {
                p->src[i] = pipe_page_alloc(p->size);
                if (!p->src[i])
                        return job_fail(j, -ENOMEM, "cannot allocate %zu bytes of host memory",
                                        p->size);
                int r = dev_fill(j, p->dev, p->size, j->seed + (uint32_t)i, 0, st(p, 0));
                if (r < 0)
                        return r;
                CK(j, cudaStreamSynchronize(st(p, 0)));
                CK(j, cudaMemcpy(p->src[i], p->dev, p->size, cudaMemcpyDeviceToHost));
        }
        return 0;
}

/* CUDA 13's batched calls need a driver that has them: one page tried first, untimed, so a
 * driver without them skips the strategy with a note instead of failing the run. Page 0 is
 * written again after a discard. */
bool pipe_batch_api_works(struct pipe *p, enum pipe_kind kind)
{
        void *ptr = p->managed;
        size_t len = PIPE_PAGE, first_op = 0;
        cudaMemLocation loc = kind == K_DISCARD_PREFETCH ? loc_host() : loc_dev(p->j->ctx);
        cudaError_t e =
            kind == K_DISCARD_PREFETCH
                ? cudaMemDiscardAndPrefetchBatchAsync(&ptr, &len, 1, &loc, &first_op, 1, 0,
                                                      st(p, 0))
                : cudaMemPrefetchBatchAsync(&ptr, &len, 1, &loc, &first_op, 1, 0, st(p, 0));
        if (e == cudaSuccess)
                e = cudaStreamSynchronize(st(p, 0));
        if (e != cudaSuccess) {
                (void)cudaGetLastError();
                add_note(p->j, "%s skipped: the driver refused %s (%s)",
                         kind == K_DISCARD_PREFETCH ? MEAS_PIPE_DISCARD_PREFETCH
                                                    : MEAS_PIPE_PREFETCH_BATCH,
                         kind == K_DISCARD_PREFETCH ? "cudaMemDiscardAndPrefetchBatchAsync"
                                                    : "cudaMemPrefetchBatchAsync",
                         cudaGetErrorString(e));
                return false;
        }
        if (kind == K_DISCARD_PREFETCH)
                memcpy(p->managed, p->src[0], PIPE_PAGE);
        return true;
}
