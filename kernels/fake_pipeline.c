/* The fake model's pipeline and pipeline_sweep (issues 21 and 60): each strategy's step time by
 * the same rules the GPU follows (docs/design.md), measured by fake.c like any other rate. */
#include "fake_model.h"

#include "catalog.h"
#include "util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>

/* --- pipeline (issue 21): a step's time by the same rules the GPU follows --- */

#define PIPE_COPY_GBPS      55.5 /* pinned H2D */
#define PIPE_D2H_GBPS       55.3 /* writeback */
#define PIPE_PAGEABLE_GBPS  9.3
#define PIPE_ON_DEMAND_GBPS 8.5 /* managed pages faulted in by the kernel */
#define PIPE_PREFETCH_GBPS  51.0
/* chunk_issue copy_stream: what each managed prefetch adds when all of them wait their turn on
 * one stream (on the H100, copy_stream took 4-7 ms longer than round robin at 16 chunks of 1 GiB
 * and 11-13 ms at 64: bench/results/gpu-h100-1207); round robin overlaps it with the others */
#define PIPE_PREFETCH_CALL_MS 0.2
#define PIPE_ZERO_COPY_GBPS   52.0   /* a kernel reading mapped host memory */
#define PIPE_GATHER_GBPS      20.0   /* 4 KiB rows of a 2D copy */
#define PIPE_HBM_GBPS         3000.0 /* the kernel's own reads */
#define PIPE_FMA_PER_S        3.2e13 /* an H200's FP32 FMAs a second */
#define PIPE_PAGE             4096ull
/* A sweep point's suffix, "@i=N" or "@t=N": at most 23 bytes, with room. */
#define PIPE_SUFFIX_MAX 48
/* batch host_written (issue 60): the host's copy of a batch, a CPU thread's rate and the most
 * the threads together reach; into managed memory whose pages are on the GPU, each page faults
 * back first (a thread's rate; the driver's fault path serialises beyond PIPE_FAULT_MAX_GBPS) */
#define PIPE_WRITE_GBPS     10.0
#define PIPE_WRITE_MAX_GBPS 60.0
#define PIPE_FAULT_GBPS     2.5
#define PIPE_FAULT_MAX_GBPS 8.0

static double ms_at(double bytes, double gbps)
{
        return bytes / (gbps * 1e9) * 1e3;
}

/* The kernel alone: its reads, then intensity FMAs per float. */
static double pipe_kernel_ms(uint64_t intensity, uint64_t touched)
{
        return ms_at((double)touched, PIPE_HBM_GBPS) +
               (double)intensity * (double)touched / 4 / PIPE_FMA_PER_S * 1e3 + 0.005;
}

/* The intensity at which the kernel takes as long as the copy. */
static uint64_t pipe_balanced(uint64_t size)
{
        double copy = ms_at((double)size, PIPE_COPY_GBPS),
               per = pipe_kernel_ms(1, size) - pipe_kernel_ms(0, size);
        double k = (copy - pipe_kernel_ms(0, size)) / per;
        return k < 1 ? 1 : (uint64_t)(k + 0.5);
}

struct pipe_point {
        uint64_t size, touched, weights, writeback, intensity, chunks, streams, steps, writers;
        bool clustered, written;
        bool copy_rr, prefetch_rr; /* chunk_issue: pinned copies, managed prefetches round robin */
};

/* A chunked step of n chunks moving `move` ms and computing `kern` ms: the longer half plus one
 * chunk of the shorter; one stream overlaps nothing. Both chunk_issue shapes get this rule: round
 * robin adds each stream's own turns, (move + kern) / streams, which with two streams or more
 * never exceeds the longer half, so an ideal schedule cannot tell them apart. What the driver
 * adds is the caller's: managed prefetches issued on one stream (copy_stream, or a single stream)
 * pay PIPE_PREFETCH_CALL_MS each in series (docs/design.md, issue 60). */
static double pipe_chunked_ms(const struct pipe_point *p, double move, double kern, double n)
{
        if (p->streams < 2)
                return move + kern;
        return fmax(move, kern) + fmin(move, kern) / n;
}

static bool pipe_managed(const char *name)
{
        return streq_ptr(name, MEAS_PIPE_ON_DEMAND) || streq_ptr(name, MEAS_PIPE_PREFETCH) ||
               streq_ptr(name, MEAS_PIPE_PREFETCH_CHUNKED) ||
               streq_ptr(name, MEAS_PIPE_PREFETCH_BATCH) ||
               streq_ptr(name, MEAS_PIPE_DISCARD_PREFETCH);
}

/* The host's write of one batch into strategy name's memory (batch host_written), ms: a copy at
 * the writers' rate, and where the pages are managed and on the GPU (every managed strategy
 * but discard-and-prefetch, whose discard leaves them on the host without their data) the CPU's
 * faults as well. */
static double pipe_write_ms(const char *name, const struct pipe_point *p)
{
        double w = (double)p->writers, size = (double)p->size;
        double t = ms_at(size, fmin(PIPE_WRITE_GBPS * w, PIPE_WRITE_MAX_GBPS));
        if (pipe_managed(name) && !streq_ptr(name, MEAS_PIPE_DISCARD_PREFETCH))
                t += ms_at(size, fmin(PIPE_FAULT_GBPS * w, PIPE_FAULT_MAX_GBPS));
        return t;
}

/* First and steady step of one strategy (ms): serial is copy + kernel, overlapped the limit
 * plus one chunk of the shorter half, on demand the kernel plus the touched bytes at the fault
 * rate; managed weights are faulted (or prefetched) in the first step only. */
static void pipe_model(const char *name, const struct pipe_point *p, double *ret_first,
                       double *ret_steady)
{
        double size = (double)p->size, touched = (double)p->touched;
        double copy = ms_at(size, PIPE_COPY_GBPS), kern = pipe_kernel_ms(p->intensity, p->touched);
        double wb = ms_at((double)p->writeback, PIPE_D2H_GBPS);
        double weights = ms_at((double)p->weights, PIPE_HBM_GBPS), first_extra = 0, t;
        double n = (double)(p->chunks < p->size / PIPE_PAGE ? p->chunks : p->size / PIPE_PAGE);

        if (n < 1)
                n = 1;
        if (streq_ptr(name, MEAS_COPY_ALONE)) {
                t = copy;
                weights = wb = 0;
        } else if (streq_ptr(name, MEAS_KERNEL_ALONE)) {
                t = kern;
                wb = 0;
        } else if (streq_ptr(name, MEAS_PIPE_SERIAL)) {
                t = copy + kern;
        } else if (streq_ptr(name, MEAS_PIPE_OVERLAPPED)) {
                t = pipe_chunked_ms(p, copy, kern, n);
                wb /= p->streams > 1 ? n : 1;
        } else if (streq_ptr(name, MEAS_PIPE_PAGEABLE)) {
                t = ms_at(size, PIPE_PAGEABLE_GBPS) + kern;
        } else if (streq_ptr(name, MEAS_PIPE_ON_DEMAND)) {
                t = kern + ms_at(touched, PIPE_ON_DEMAND_GBPS);
                first_extra = ms_at((double)p->weights, PIPE_ON_DEMAND_GBPS);
        } else if (streq_ptr(name, MEAS_PIPE_PREFETCH)) {
                t = ms_at(size, PIPE_PREFETCH_GBPS) + kern;
                first_extra = ms_at((double)p->weights, PIPE_PREFETCH_GBPS);
        } else if (streq_ptr(name, MEAS_PIPE_PREFETCH_BATCH)) {
                /* one batched call completes as a whole: nothing overlaps within the step */
                t = ms_at(size, PIPE_PREFETCH_GBPS) + kern;
                first_extra = ms_at((double)p->weights, PIPE_PREFETCH_GBPS);
        } else if (streq_ptr(name, MEAS_PREFETCH_ALONE)) {
                t = ms_at(size, PIPE_PREFETCH_GBPS);
                weights = wb = 0;
        } else if (streq_ptr(name, MEAS_PIPE_PREFETCH_CHUNKED) ||
                   streq_ptr(name, MEAS_PIPE_DISCARD_PREFETCH)) {
                double pf = ms_at(size, PIPE_PREFETCH_GBPS);
                if (!p->prefetch_rr || p->streams < 2) /* one stream: in series either way */
                        pf += n * PIPE_PREFETCH_CALL_MS;
                t = pipe_chunked_ms(p, pf, kern, n);
                first_extra = ms_at((double)p->weights, PIPE_PREFETCH_GBPS);
        } else if (streq_ptr(name, MEAS_PIPE_ZERO_COPY)) {
                t = fmax(ms_at(touched, PIPE_ZERO_COPY_GBPS), kern);
        } else { /* MEAS_PIPE_GATHER */
                t = ms_at(touched, p->clustered ? PIPE_COPY_GBPS : PIPE_GATHER_GBPS) + kern;
        }
        *ret_steady = t + weights + wb;
        *ret_first = *ret_steady + first_extra;
        /* host_written, double-buffered: the first step waits for its write, each later one
         * for the longer of its write (made during the step before) and its GPU time. */
        if (p->written && !streq_ptr(name, MEAS_COPY_ALONE) &&
            !streq_ptr(name, MEAS_KERNEL_ALONE) && !streq_ptr(name, MEAS_PREFETCH_ALONE)) {
                double w = pipe_write_ms(name, p);
                *ret_first += w;
                *ret_steady = fmax(*ret_steady, w);
        }
}

/* What a strategy's measurement says beyond its times: its host write (host_written), the
 * writers of host_write, a chunked one's chunking and how its chunks were issued. */
static void pipe_extras(json_t *x, const char *s, const struct pipe_point *p, bool single)
{
        bool chunked = streq_ptr(s, MEAS_PIPE_OVERLAPPED) ||
                       streq_ptr(s, MEAS_PIPE_PREFETCH_CHUNKED) ||
                       streq_ptr(s, MEAS_PIPE_DISCARD_PREFETCH);
        bool rr = streq_ptr(s, MEAS_PIPE_OVERLAPPED) ? p->copy_rr : p->prefetch_rr;

        if (p->written && !single)
                json_object_set_new(x, "host_write_ms", json_real(pipe_write_ms(s, p)));
        if (streq_ptr(s, MEAS_HOST_WRITE))
                json_object_set_new(x, "writers", json_integer((json_int_t)p->writers));
        if (chunked || streq_ptr(s, MEAS_PIPE_PREFETCH_BATCH))
                json_object_update_new(x, json_pack("{s:I, s:I}", "chunks", (json_int_t)p->chunks,
                                                    "streams", (json_int_t)p->streams));
        if (chunked)
                json_object_set_new(
                    x, "chunk_issue",
                    json_string(rr ? PIPE_ISSUE_ROUND_ROBIN : PIPE_ISSUE_COPY_STREAM));
}

/* Whether a strategy of the list prefetches managed memory: then the run measures the prefetch
 * alone, as the real one does. */
static bool pipe_prefetching(const json_t *strategies)
{
        size_t i;
        json_t *v;
        json_array_foreach(strategies, i, v)
        {
                const char *s = json_string_value(v);
                if (pipe_managed(s) && !streq_ptr(s, MEAS_PIPE_ON_DEMAND))
                        return true;
        }
        return false;
}

/* One pipeline run's measurements, each named "strategy" + suffix ("@i=64" in a sweep): the
 * halves of the limit and the prefetch alone first, in the real run's order. */
static int plan_pipe_point(struct fake_job *j, const struct pipe_point *p, const json_t *strategies,
                           const char *suffix, const char *sweep)
{
        const char *alone[4] = {MEAS_COPY_ALONE, MEAS_KERNEL_ALONE};
        size_t nalone = 2, i, n;
        int r = 0;

        if (p->written)
                alone[nalone++] = MEAS_HOST_WRITE;
        if (pipe_prefetching(strategies))
                alone[nalone++] = MEAS_PREFETCH_ALONE;
        n = nalone + json_array_size(strategies);
        for (i = 0; r == 0 && i < n; i++) {
                const char *s = i < nalone
                                    ? alone[i]
                                    : json_string_value(json_array_get(strategies, i - nalone));
                bool single = i < nalone;
                uint64_t steps = single ? 1 : p->steps;
                double first, steady;
                char name[FAKE_MEAS_NAME_MAX];

                if (!s)
                        continue;
                if (streq_ptr(s, MEAS_PIPE_GATHER) && p->touched >= p->size)
                        continue; /* the real one notes it would be pinned_serial */
                if (streq_ptr(s, MEAS_HOST_WRITE))
                        first = steady = pipe_write_ms(MEAS_PIPE_SERIAL, p); /* into pinned */
                else
                        pipe_model(s, p, &first, &steady);
                snprintf(name, sizeof(name), "%s%s", s, suffix);
                r = fake_model_add(j, name, "pipeline", p->size);
                if (r < 0)
                        break;
                struct fake_meas *m = &j->m[j->n - 1];
                m->ms = (first + steady * (double)(steps - 1)) / (double)steps;
                m->extra = json_pack(
                    "{s:I, s:I, s:I, s:I, s:f, s:o}", "intensity", (json_int_t)p->intensity,
                    "touched_bytes", (json_int_t)p->touched, "weights_bytes",
                    (json_int_t)p->weights, "steps", (json_int_t)steps, "first_step_ms", first,
                    "steady_step_ms", steps > 1 ? json_real(steady) : json_null());
                if (m->extra && sweep)
                        json_object_update_new(
                            m->extra, json_pack("{s:s, s:s}", "strategy", s, "sweep", sweep));
                if (m->extra)
                        pipe_extras(m->extra, s, p, single);
                else
                        r = -ENOMEM;
        }
        return r;
}

static void pipe_point_from(const struct fake_job *j, struct pipe_point *p)
{
        *p = (struct pipe_point){
            .size = j->size,
            .touched = j->size,
            .weights = fake_model_param_u64(j->params, "weights"),
            .writeback = fake_model_param_u64(j->params, "writeback"),
            .chunks = fake_model_param_u64(j->params, "chunks"),
            .streams = fake_model_param_u64(j->params, "streams"),
            .steps = fake_model_param_u64(j->params, "steps"),
            .writers = fake_model_param_u64(j->params, "writers"),
            .written = streq_ptr(fake_model_param_str(j->params, "batch"), PIPE_BATCH_WRITTEN),
            .copy_rr =
                streq_ptr(fake_model_param_str(j->params, "chunk_issue"), PIPE_ISSUE_ROUND_ROBIN),
            .prefetch_rr =
                !streq_ptr(fake_model_param_str(j->params, "chunk_issue"), PIPE_ISSUE_COPY_STREAM),
            .clustered = streq_ptr(fake_model_param_str(j->params, "layout"), "clustered"),
        };
        if (fake_model_param_u64(j->params, "touched") > 0)
                p->touched = (fake_model_param_u64(j->params, "touched") + PIPE_PAGE - 1) /
                             PIPE_PAGE * PIPE_PAGE;
        if (p->touched > p->size)
                p->touched = p->size;
}

static json_t *pipe_intensity_json(json_t *requested, uint64_t chosen, uint64_t size)
{
        json_t *o = json_pack("{s:O, s:I}", "requested", requested, "chosen", (json_int_t)chosen);
        if (o && json_is_string(requested))
                json_object_update_new(o, json_pack("{s:f, s:f}", "copy_ms",
                                                    ms_at((double)size, PIPE_COPY_GBPS),
                                                    "kernel_ms", pipe_kernel_ms(chosen, size)));
        return o;
}

int fake_pipeline_plan(struct fake_job *j)
{
        struct pipe_point p;
        json_t *req = json_object_get(j->params, "intensity");

        pipe_point_from(j, &p);
        p.intensity =
            json_is_integer(req) ? (uint64_t)json_integer_value(req) : pipe_balanced(p.size);
        j->top = json_pack("{s:o}", "intensity", pipe_intensity_json(req, p.intensity, p.size));
        if (!j->top)
                return -ENOMEM;
        return plan_pipe_point(j, &p, json_object_get(j->params, "strategies"), "", NULL);
}

/* The same points as kernels/bench_suite.cu's pipeline_sweep, in the same order. */
int fake_pipeline_plan_sweep(struct fake_job *j)
{
        struct pipe_point p;
        char suffix[PIPE_SUFFIX_MAX];
        json_t *touched_strategies =
            json_pack("[s, s, s]", MEAS_PIPE_SERIAL, MEAS_PIPE_ON_DEMAND, MEAS_PIPE_GATHER);
        const json_t *strategies = json_object_get(j->params, "strategies");
        uint64_t kb, factor = fake_model_param_u64(j->params, "max_factor");
        int r;

        pipe_point_from(j, &p);
        kb = pipe_balanced(p.size);
        json_t *word = json_string(PIPE_BALANCED);
        j->top = json_pack("{s:o}", "balanced", pipe_intensity_json(word, kb, p.size));
        json_decref(word);
        if (!j->top || !touched_strategies) {
                json_decref(touched_strategies);
                return -ENOMEM;
        }
        p.intensity = kb;
        snprintf(suffix, sizeof(suffix), "@i=%llu", (unsigned long long)kb);
        r = plan_pipe_point(j, &p, strategies, suffix, "intensity");
        for (uint64_t k = fake_model_param_u64(j->params, "min_intensity");
             r == 0 && k <= kb * factor; k *= 4) {
                if (k == kb)
                        continue;
                p.intensity = k;
                snprintf(suffix, sizeof(suffix), "@i=%llu", (unsigned long long)k);
                r = plan_pipe_point(j, &p, strategies, suffix, "intensity");
        }
        p.intensity = fake_model_param_u64(j->params, "touched_intensity");
        for (uint64_t t = fake_model_param_u64(j->params, "min_touched"); r == 0; t *= 4) {
                bool last = t >= p.size;
                p.touched = last ? p.size : (t + PIPE_PAGE - 1) / PIPE_PAGE * PIPE_PAGE;
                snprintf(suffix, sizeof(suffix), "@t=%llu",
                         (unsigned long long)(last ? p.size : t));
                r = plan_pipe_point(j, &p, touched_strategies, suffix, "touched");
                if (last)
                        break;
        }
        json_decref(touched_strategies);
        return r;
}
