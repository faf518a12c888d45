/* The training-step pipeline's shared parts (kernels/bench_pipeline.cu, the steps and their
 * timing; kernels/bench_pipeline_host.cu, the host's half of issue 60: the host writing each
 * batch, double-buffered, and CUDA 13's batched calls). Internal to the worker's CUDA build. */
#pragma once

#include <vector>

#include "bench_internal.h"

#define PIPE_PAGE       4096u
#define PIPE_VEC_A_PAGE (PIPE_PAGE / 16)

enum pipe_kind {
        K_SERIAL,
        K_OVERLAPPED,
        K_PAGEABLE,
        K_ON_DEMAND,
        K_PREFETCH,
        K_PREFETCH_CHUNKED,
        K_ZERO_COPY,
        K_GATHER,
        K_PREFETCH_BATCH,
        K_DISCARD_PREFETCH,
        K_COPY_ALONE,
        K_KERNEL_ALONE,
        K_PREFETCH_ALONE /* the batch prefetched whole, no kernel: the managed copy's rate */
};

/* How a chunked strategy issues its chunks: every copy (or prefetch) on stream 0 with the
 * kernels on the others after events, or chunk c's copy and kernel both on stream c % streams.
 * Pinned copies and managed prefetches each have their own (chunk_issue auto: the first for
 * copies, the second for prefetches). */
enum pipe_issue { ISSUE_COPY_STREAM, ISSUE_ROUND_ROBIN };

struct pipe {
        struct bench_job *j;
        size_t size, weights, writeback;
        uint64_t total_pages; /* whole pages of the batch */
        uint64_t pages;       /* touched pages */
        uint64_t spacing;     /* touched page t is page t * spacing */
        int intensity, steps, nchunks, nstreams;
        enum pipe_issue issue_copy, issue_prefetch;
        bool written;   /* batch host_written: the host writes each batch, double-buffered */
        int writers;    /* threads of the host's write */
        void *host;     /* pinned, mapped: the batch as the host has it */
        void *hwb;      /* pinned: where writeback lands */
        void *dev;      /* the batch on the GPU */
        void *dweights; /* resident weights (explicit strategies, zero-copy) */
        void *pageable;
        void *managed, *mweights;
        unsigned *d_sum;
        unsigned expect;
        std::vector<cudaEvent_t> ev; /* one a chunk: its copy (or prefetch) landed */
        /* batch host_written: the two buffers of each kind the host writes in turn (index 0 is
         * the one above), the three batches it copies from (a loader's finished batches; three,
         * so that no buffer ever holds the batch it held before), their sums, one sum a step,
         * and the stream that discards a buffer before the host writes it */
        void *hostbuf[2], *pagebuf[2], *manbuf[2];
        void *src[3];
        unsigned expects[3];
        unsigned *d_sums;
        cudaStream_t side;
        std::vector<cudaEvent_t> t0, t1; /* one pair a step: its start and its end on stream 0 */
};

static inline cudaStream_t st(struct pipe *p, int i)
{
        return p->j->ctx->streams[i];
}

static inline bool managed_kind(enum pipe_kind k)
{
        return k == K_ON_DEMAND || k == K_PREFETCH || k == K_PREFETCH_CHUNKED ||
               k == K_PREFETCH_BATCH || k == K_DISCARD_PREFETCH || k == K_PREFETCH_ALONE;
}

int pipe_step(struct pipe *p, enum pipe_kind kind);
double pipe_median_of(std::vector<double> v);
void *pipe_page_alloc(size_t size);
void pipe_host_copy(const struct pipe *p, void *dst, const void *src);
int pipe_discard_to_host(struct pipe *p, void *buf);
void pipe_use_buffer(struct pipe *p, int b);
int pipe_make_sources(struct pipe *p, int nsrc);
int pipe_run_written(struct pipe *p, enum pipe_kind kind, int steps, std::vector<double> &samples,
                     std::vector<double> &firsts, std::vector<double> &steadies,
                     std::vector<double> &writes);
int pipe_measure_host_write(struct pipe *p);
bool pipe_batch_api_works(struct pipe *p, enum pipe_kind kind);
