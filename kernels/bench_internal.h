/* Shared between the benchmark .cu files only (never included by C): the worker's CUDA context,
 * its buffer pool, one running job, the data pattern, and the helpers every benchmark uses to
 * time samples, verify data and build its result. */
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>
#include <vector>

extern "C" {
#include "backend.h" /* backend_fail */
#include "bench.h"
#include "bench_access.h"
#include "catalog.h" /* MEAS_*: the measurement names */
#include "discover.h"
#include "explain.h"
#include "stats.h"
}

#define BENCH_STREAMS         8 /* dedicated non-blocking streams, created once */
#define BENCH_POOL_SLOTS      2 /* pinned, pageable and device buffers each: bidir needs two */
#define BENCH_XOR_BYTE        0x5Au
#define BENCH_XOR_WORD        0x5A5A5A5Au
#define BENCH_GATE_BELOW      (16ull << 20) /* pinned copies under this are held behind a gate */
#define BENCH_GATE_TIMEOUT_NS 2000000000ull
/* The device's uuid, "GPU-" and 36 characters (41 bytes with the NUL), with room. */
#define BENCH_UUID_MAX 64
/* The device's name: cudaDeviceProp's name field is 256 bytes, so it is kept whole. */
#define BENCH_DEVICE_NAME_MAX 256
/* One note of a result (add_note): a sentence or two; vsnprintf cuts a longer one. */
#define BENCH_NOTE_MAX 512

struct bench_buf {
        void *p;
        size_t cap;
};

struct bench_ctx {
        int ordinal;
        json_t *device_info;
        struct bench_limits lim;
        cudaStream_t streams[BENCH_STREAMS];
        cudaEvent_t ev_start, ev_stop, ev_join[BENCH_STREAMS];
        struct bench_buf host[BENCH_POOL_SLOTS];     /* pinned, mapped */
        struct bench_buf pageable[BENCH_POOL_SLOTS]; /* the application's own malloc */
        struct bench_buf dev[BENCH_POOL_SLOTS];
        volatile uint32_t *gate;       /* mapped pinned: [0] release flag, [1] timed out */
        uint32_t *gate_dev;            /* the device's view of gate */
        unsigned long long *d_scratch; /* mismatch counter and read-kernel sink */
        int sm_count;
        int pageable_access;
        int concurrent_managed;
        int driver_version, runtime_version;
        char uuid[BENCH_UUID_MAX];
        char name[BENCH_DEVICE_NAME_MAX];
        json_t *inforom; /* the GPU's InfoROM reading, kept for the worker's life (nvml_errors.h) */
};

/* One bench_run call: its parameters and what it has gathered so far. */
struct bench_job {
        struct bench_ctx *ctx;
        const json_t *params;
        volatile sig_atomic_t *cancel;
        json_t *measurements;
        json_t *notes;
        json_t *context_extra; /* benchmark-specific context keys (host_memory, ...) */
        json_t *extra_top;     /* top-level result keys (health: link) */
        char *error;
        bool all_reused;
        bool used_pool;
        uint64_t size;
        int iterations, warmup;
        uint32_t seed;
        enum bench_access access;
        uint64_t stride;
        uint32_t *d_order; /* page order on the device (strided/random), NULL for sequential */
        uint64_t npages;
        bool explain;        /* issue 17: one untimed pass with the UM counters after the samples */
        bool warp_per_chunk; /* managed kernels: one warp per 64 KiB chunk, not a grid stride */
};

/* ---- errors ---- */
/* Records the first error of the job (malloc'd message) and returns r. */
int job_fail(struct bench_job *j, int r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int job_cuda_fail(struct bench_job *j, cudaError_t e, const char *what);
#define CK(j, call)                                                                                \
        do {                                                                                       \
                cudaError_t e_ = (call);                                                           \
                if (e_ != cudaSuccess)                                                             \
                        return job_cuda_fail((j), e_, #call);                                      \
        } while (0)

/* ---- params ---- */
int64_t param_int(const struct bench_job *j, const char *name, int64_t def);
const char *param_str(const struct bench_job *j, const char *name, const char *def);
/* Whether the job takes measurement name: its "only" parameter is unset, "all" or name. */
static inline bool bench_takes(const struct bench_job *j, const char *name)
{
        const char *only = param_str(j, "only", "all");
        return strcmp(only, "all") == 0 || strcmp(only, name) == 0;
}

/* ---- memory ---- */
/* Pooled pinned (mapped) host buffer / device buffer of at least size bytes. */
int pool_host(struct bench_job *j, int slot, size_t size, void **ret);
/* Pooled pageable host buffer (plain aligned_alloc, never pinned nor registered) of at least
 * size bytes: the CPU has touched all of it before any job gets it, so neither the first-touch
 * faults nor the munmap of 64 MiB are paid again by every job (issue 23: they were a third of
 * the canonical check's pageable phase on the H200). */
int pool_pageable(struct bench_job *j, int slot, size_t size, void **ret);
int pool_dev(struct bench_job *j, int slot, size_t size, void **ret);
/* Refuses (-ENOMEM, naming the limit) when bytes would take the GPU's free memory below
 * managed_reserve_bytes. */
int check_free(struct bench_job *j, uint64_t bytes, const char *what);
int managed_alloc(struct bench_job *j, size_t size, void **ret);
cudaMemLocation loc_host(void);
cudaMemLocation loc_dev(const struct bench_ctx *c);

/* ---- the data pattern: byte i of a buffer is byte i%4 of pattern_word(i/4) ---- */
__host__ __device__ static inline uint32_t pattern_word(uint64_t w, uint32_t seed)
{
        uint32_t x = (uint32_t)w ^ ((uint32_t)(w >> 32) * 0x85EBCA6Bu) ^ (seed * 0x9E3779B1u);
        x ^= x >> 16;
        x *= 0x7FEB352Du;
        x ^= x >> 15;
        x *= 0x846CA68Bu;
        x ^= x >> 16;
        return x;
}
/* xor_byte: 0, or BENCH_XOR_BYTE when an odd number of read-write kernels ran over the data. */
int dev_fill(struct bench_job *j, void *p, size_t size, uint32_t seed, uint8_t xor_byte,
             cudaStream_t s);
int dev_verify(struct bench_job *j, const void *p, size_t size, uint32_t seed, uint8_t xor_byte,
               const char *what);
void host_fill(void *p, size_t size, uint32_t seed);
int host_verify(struct bench_job *j, const void *p, size_t size, uint32_t seed, uint8_t xor_byte,
                const char *what);

/* ---- kernels ---- */
/* Process the 16 bytes at off of base, or the ragged tail [off, size) byte by byte: read them
 * (returning their XOR) or XOR them with BENCH_XOR_WORD when WRITE. Every kernel that reads or
 * writes a buffer does it this one way. */
template <bool WRITE>
__device__ __forceinline__ uint32_t process_at(uint8_t *base, size_t off, size_t size)
{
        if (off + 16 <= size) {
                uint4 *v = (uint4 *)(base + off);
                uint4 x = *v;
                if (WRITE) {
                        x.x ^= BENCH_XOR_WORD;
                        x.y ^= BENCH_XOR_WORD;
                        x.z ^= BENCH_XOR_WORD;
                        x.w ^= BENCH_XOR_WORD;
                        *v = x;
                        return 0;
                }
                return x.x ^ x.y ^ x.z ^ x.w;
        }
        uint32_t acc = 0;
        for (size_t b = off; b < size; b++) {
                if (WRITE)
                        base[b] ^= BENCH_XOR_BYTE;
                else
                        acc ^= base[b];
        }
        return acc;
}

enum process_op { OP_READ, OP_READ_WRITE };
/* Reads (or XORs with BENCH_XOR_WORD) every byte of p, visiting pages in the job's access order
 * when p spans the job's whole buffer (order != NULL), else sequentially. */
int launch_process(struct bench_job *j, void *p, size_t size, enum process_op op, bool use_order,
                   cudaStream_t s);
/* Copies size bytes from src to dst with a kernel on stream s (either may be a peer GPU's
 * memory when peer access is enabled): the SM-driven copy. */
int launch_copy(struct bench_job *j, void *dst, const void *src, size_t size, cudaStream_t s);
/* One thread per page touches (XORs) the first word of pages [first, first+count) spaced by
 * spacing bytes. */
int launch_touch(struct bench_job *j, void *p, uint64_t first, uint64_t count, uint64_t spacing,
                 cudaStream_t s);
/* Holds stream s until gate_release (the copies enqueued after it start together). */
int gate_hold(struct bench_job *j, cudaStream_t s);
void gate_release(struct bench_job *j);
bool gate_timed_out(struct bench_job *j);
/* Gated sampling, the steps every gated benchmark takes in the same order. Before a sample:
 * note whether the previous gate timed out, and hold stream s again (0 when !gated). */
int gate_before_sample(struct bench_job *j, bool gated, bool *timeouts, cudaStream_t s);
/* Once every copy of the sample is queued: the stop event on s, then the gate opens. Returns 1,
 * so that sample_events records no stop event of its own. */
int gate_open(struct bench_job *j, cudaEvent_t stop, cudaStream_t s);
/* After the samples: the last gate's timeout noted, and each sample divided by the reps copies
 * it timed. */
void samples_per_copy(struct bench_job *j, std::vector<double> &samples, int reps, bool gated,
                      bool *timeouts);
/* Sets up the job's page order on the device (access strided/random). */
int job_prepare_order(struct bench_job *j);

/* The start and end of one run, shared by bench_run and bench_multi_run: the job's arrays and
 * its common params (normalised: every one present); then the arrays freed and the error (or
 * "benchmark failed") handed over. job_end returns r. */
int job_begin(struct bench_job *j, struct bench_ctx *ctx, const json_t *params,
              volatile sig_atomic_t *cancel);
int job_end(struct bench_job *j, int r, char **ret_error);
/* -ENOTSUP: "benchmark <id> is not run by <who>". */
int job_unknown(const char *id, const char *who, char **ret_error);
/* Marks every measurement verified once the data checked out after all of them ran. */
void mark_verified(struct bench_job *j);
/* blocks, at least one and at most 8 per SM: the grid a kernel is launched with. */
unsigned grid_cap(const struct bench_ctx *c, uint64_t blocks);
/* A verification result: 0, or -EIO saying how many words of what differ. */
int verify_result(struct bench_job *j, unsigned long long bad, const char *what);

/* A dispatch table entry (bench.cu's benchmarks[], bench_multi.cu's multi_benchmarks[]): a
 * catalog id and the function that runs it. */
template <class Fn> struct bench_entry {
        const char *name;
        Fn run;
};
/* The function for catalog id `id` in table t, or NULL. */
template <class Fn, size_t N> Fn bench_entry_find(const bench_entry<Fn> (&t)[N], const char *id)
{
        for (size_t i = 0; id && i < N; i++)
                if (strcmp(t[i].name, id) == 0)
                        return t[i].run;
        return NULL;
}

/* Keeps the context's pool within pool_bytes (bench_run does it after each job). */
void bench_pool_trim(struct bench_ctx *c);

/* ---- timing ---- */
bool job_cancelled(struct bench_job *j);
double now_ms(void);
/* warmup + iterations runs; prep (untimed) then work between events on stream 0. Work that
 * uses other streams joins them to stream 0 itself. Work returns 1 when it recorded the stop
 * event itself (gated copies: before releasing the gate). Timed samples (ms) go to out. */
template <class Prep, class Work>
int sample_events(struct bench_job *j, std::vector<double> &out, Prep prep, Work work)
{
        struct bench_ctx *c = j->ctx;
        for (int i = 0; i < j->warmup + j->iterations; i++) {
                int r;
                float ms;
                if (job_cancelled(j))
                        return job_fail(j, -ECANCELED, "cancelled");
                r = prep();
                if (r < 0)
                        return r;
                CK(j, cudaEventRecord(c->ev_start, c->streams[0]));
                r = work();
                if (r < 0)
                        return r;
                if (r == 0)
                        CK(j, cudaEventRecord(c->ev_stop, c->streams[0]));
                CK(j, cudaEventSynchronize(c->ev_stop));
                CK(j, cudaEventElapsedTime(&ms, c->ev_start, c->ev_stop));
                if (i >= j->warmup)
                        out.push_back(ms);
        }
        return 0;
}
/* Same with the host clock around work, which must be synchronous (CPU touches). */
template <class Prep, class Work>
int sample_host(struct bench_job *j, std::vector<double> &out, Prep prep, Work work)
{
        for (int i = 0; i < j->warmup + j->iterations; i++) {
                int r;
                if (job_cancelled(j))
                        return job_fail(j, -ECANCELED, "cancelled");
                r = prep();
                if (r < 0)
                        return r;
                double t0 = now_ms();
                r = work();
                if (r < 0)
                        return r;
                double ms = now_ms() - t0;
                if (i >= j->warmup)
                        out.push_back(ms);
        }
        return 0;
}

/* ---- the explain pass (issue 17) ---- */
/* Says whether CUPTI counted at least the bytes the pass had to move (expect_*: 0 when the mode
 * need not migrate anything, e.g. remote mapping). The driver's event queue can drop events in
 * a burst of faults, and nothing else says so: counts short of what had to move are marked a
 * lower bound instead of passing for the truth. */
void explain_check(json_t *x, uint64_t expect_htod, uint64_t expect_dtoh);

/* Bytes a piece of an explain pass covers first: CUPTI counted every event of a 64 MiB on-demand
 * pass on the H200, and 33-47% of a 1 GiB one, saying nothing was dropped
 * (bench/results/explain-h200/issue26/). A pass whose count still falls short is run again in
 * pieces a quarter the size, down to EXPLAIN_PIECE_MIN_BYTES: ReadMostly pages written by the
 * GPU make far more events a byte. */
#define EXPLAIN_PIECE_BYTES     (64ull << 20)
#define EXPLAIN_PIECE_MIN_BYTES (4ull << 20)

/* One counted run of an explain pass in pieces of step bytes (explain_pass below). */
template <class Setup, class Prep, class Piece>
int explain_pass_once(struct bench_job *j, Setup &setup, Prep &prep, Piece &piece, uint64_t size,
                      uint64_t step, json_t **ret)
{
        const char *why = NULL;
        unsigned pieces = 0;
        double ms = 0;
        cudaError_t e = cudaSuccess;

        *ret = NULL;
        if (explain_begin(&why) < 0) {
                *ret = explain_unavailable(why);
                return 0;
        }
        int r = setup();
        if (r >= 0)
                r = prep();
        if (r >= 0)
                e = cudaDeviceSynchronize();
        if (r >= 0 && e == cudaSuccess)
                explain_restart();
        for (uint64_t off = 0; r >= 0 && e == cudaSuccess && off < size; off += step) {
                uint64_t len = size - off < step ? size - off : step;
                double t0 = now_ms();
                r = piece(off, len);
                e = cudaDeviceSynchronize();
                ms += now_ms() - t0;
                pieces++;
                if (off + len < size)
                        explain_drain(EXPLAIN_PIECE_QUIET_MS);
        }
        json_t *x = explain_end();
        if (r < 0 || e != cudaSuccess) {
                json_decref(x);
                return r < 0 ? r : job_cuda_fail(j, e, "explain pass");
        }
        if (!x)
                return job_fail(j, -ENOMEM, "out of memory");
        /* The pass ran with the counters on: its time says what they cost, never a result. */
        json_object_set_new(x, "pass_ms", json_real(ms));
        json_object_set_new(x, "pieces", json_integer(pieces));
        json_object_set_new(x, "piece_bytes",
                            json_integer((json_int_t)(step < size ? step : size)));
        json_object_set_new(x, "fake", json_false());
        *ret = x;
        return 0;
}

/* When the job asked for it (explain: true): one more run of a managed-memory measurement after
 * the timed samples, with CUPTI's Unified Memory counters on only for it, so no timed sample
 * ever runs with them. On the H200 the counters report nothing for a managed range allocated
 * before they were turned on, so setup() allocates the pass's own buffer (and sets its advice)
 * once they are; prep() puts its pages where a sample starts, uncounted; piece(off, len) is the
 * work on [off, off + len), run in pieces (the whole buffer at once where the job's access order
 * is not sequential: the order spans the buffer), CUPTI drained after each. expect_htod/dtoh:
 * bytes the pass must move each way (explain_check); a count short of them is taken again in
 * smaller pieces, and the pieces tried are listed. 0 with *ret the explanation (NULL when not
 * asked; {"available": false, "why"} when CUPTI cannot count here), or negative when the pass
 * itself failed (a CUDA error). */
template <class Setup, class Prep, class Piece>
int explain_pass(struct bench_job *j, Setup setup, Prep prep, Piece piece, uint64_t size,
                 uint64_t expect_htod, uint64_t expect_dtoh, json_t **ret)
{
        bool in_order = j->access == BENCH_ACCESS_SEQUENTIAL;
        uint64_t step = in_order ? EXPLAIN_PIECE_BYTES : size;
        json_t *tried = json_array(), *x = NULL;

        *ret = NULL;
        if (!j->explain) {
                json_decref(tried);
                return 0;
        }
        if (!tried)
                return job_fail(j, -ENOMEM, "out of memory");
        for (;;) {
                int r = explain_pass_once(j, setup, prep, piece, size, step, &x);
                if (r < 0 || !json_is_true(json_object_get(x, "available"))) {
                        json_decref(tried);
                        *ret = x;
                        return r;
                }
                json_array_append_new(tried, json_integer((json_int_t)(step < size ? step : size)));
                explain_check(x, expect_htod, expect_dtoh);
                if (json_is_true(json_object_get(x, "complete")) ||
                    json_is_null(json_object_get(x, "complete")) || !in_order ||
                    step / 4 < EXPLAIN_PIECE_MIN_BYTES || step >= size * 4)
                        break;
                json_decref(x);
                x = NULL;
                step = (step < size ? step : size) / 4;
        }
        json_object_set_new(x, "piece_bytes_tried", tried);
        *ret = x;
        return 0;
}
/* {"explain": x} to merge into a measurement (NULL when x is NULL); steals x. */
static inline json_t *explain_extra(json_t *x, json_t *more)
{
        if (!x)
                return more;
        if (!more)
                more = json_object();
        json_object_set_new(more, "explain", x);
        return more;
}

/* ---- results ---- */
/* Appends one measurement. samples are per-operation times (ms); bytes per operation. extra
 * (may be NULL, reference stolen) is merged into the measurement. */
int add_measurement(struct bench_job *j, const char *name, double bytes, const char *counted,
                    const std::vector<double> &samples, bool verified, json_t *extra);
void add_note(struct bench_job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- the benchmarks ---- */
int bench_copy(struct bench_job *j);
int bench_copy_overlap(struct bench_job *j);
int bench_latency(struct bench_job *j);
int bench_zero_copy(struct bench_job *j);
int bench_managed_on_demand(struct bench_job *j);
int bench_managed_prefetch(struct bench_job *j);
int bench_managed_advise(struct bench_job *j);
int bench_system_memory(struct bench_job *j);
int bench_um_vs_explicit(struct bench_job *j);
int bench_sweep(struct bench_job *j);
int bench_health(struct bench_job *j);
int bench_d2d(struct bench_job *j);
int bench_pipeline(struct bench_job *j);
int bench_pipeline_sweep(struct bench_job *j);
int bench_train_step(struct bench_job *j);       /* bench_train.cu (issue 60) */
int bench_embedding_gather(struct bench_job *j); /* bench_embed.cu (issue 60) */
/* d2d's measurements under other names (topology's "d2d@G"); sm_name NULL: copy engine only.
 * extra (may be NULL, borrowed) is added to each measurement. */
int d2d_measure(struct bench_job *j, const char *ce_name, const char *sm_name, const json_t *extra);
/* Copies per sample of a size (small copies are repeated behind the gate). */
int copies_per_sample(uint64_t size);
