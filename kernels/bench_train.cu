/* train_step (issue 60): a GEMM training step (cuBLAS, loaded at run time: kernels/cublas.h)
 * with each tensor class placed in device memory, managed memory prefetched to the GPU, managed
 * memory first on the host, or host-mapped pinned memory. Owns the classes' arenas, where each
 * is put before a sample, the host's write of each step's batch, and the check of every row's
 * outputs against the all-device run. The step itself is kernels/train_kernels.cuh's, shared
 * with tests/gpu/reference_train.cu; the matrix the rows make is kernels/train_report.c's. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_internal.h"
#include "train_kernels.cuh"

extern "C" {
#include "cublas.h"
#include "train_report.h"
}

enum tclass { TC_BATCH, TC_WEIGHTS, TC_ACTS, TC_GRADS, TC_OPT, TC_N };
enum tplace { TP_DEVICE, TP_RESIDENT, TP_HOST_FIRST, TP_MAPPED };

static const char *const class_names[TC_N] = {TRAIN_CLASS_BATCH, TRAIN_CLASS_WEIGHTS,
                                              TRAIN_CLASS_ACTIVATIONS, TRAIN_CLASS_GRADIENTS,
                                              TRAIN_CLASS_OPTIMIZER};
static const char *const place_names[] = {MEAS_TRAIN_DEVICE, MEAS_TRAIN_MANAGED_RESIDENT,
                                          MEAS_TRAIN_MANAGED_HOST, MEAS_TRAIN_HOST_MAPPED};

#define ALIGN_FLOATS 64 /* every tensor starts 256 bytes in */
/* A row's measurement name, "placement@class": two of this file's names, under 40 bytes. */
#define TRAIN_NAME_MAX 64
/* cuBLAS's words for a status (cublas_strerror), or its number. */
#define TRAIN_BLAS_WHY_MAX 64

struct train_run {
        struct bench_job *j;
        const struct cublas_api *blas;
        cublas_handle h;
        struct train_net net;
        uint64_t floats[TC_N]; /* each class's arena */
        float *arena[TC_N];
        enum tplace place[TC_N];
        float *staging; /* pinned: the batch as the host writes it */
        uint64_t off_x, off_t, off_a[TRAIN_GEMMS_MAX], off_w[TRAIN_GEMMS_MAX], off_g0, off_g1;
        double flops;
        std::vector<float> ref_out, ref_w; /* the all-device run's outputs */
};

static uint64_t carve(uint64_t *end, uint64_t floats)
{
        uint64_t at = *end;
        *end += (floats + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS;
        return at;
}

/* Offsets of every tensor in its class's arena, and the FLOPs of a step. */
static void train_layout(struct train_run *t, bool transformer, int hidden, int layers, int rows)
{
        struct train_net *n = &t->net;
        uint64_t wide = 0;

        n->gemms = train_dims(transformer, hidden, layers, n->dims);
        n->rows = rows;
        t->off_x = carve(&t->floats[TC_BATCH], (uint64_t)rows * n->dims[0]);
        t->off_t = carve(&t->floats[TC_BATCH], (uint64_t)rows * n->dims[n->gemms]);
        t->flops = 0;
        for (int i = 0; i < n->gemms; i++) {
                double mac = (double)rows * n->dims[i] * n->dims[i + 1];
                t->off_w[i] = carve(&t->floats[TC_WEIGHTS], (uint64_t)n->dims[i] * n->dims[i + 1]);
                t->off_a[i] = carve(&t->floats[TC_ACTS], (uint64_t)rows * n->dims[i + 1]);
                t->flops += 2 * mac * (i == 0 ? 2 : 3);
                if ((uint64_t)n->dims[i + 1] > wide)
                        wide = (uint64_t)n->dims[i + 1];
        }
        n->nweights = t->floats[TC_WEIGHTS];
        t->floats[TC_GRADS] = n->nweights;
        t->off_g0 = carve(&t->floats[TC_GRADS], (uint64_t)rows * wide);
        t->off_g1 = carve(&t->floats[TC_GRADS], (uint64_t)rows * wide);
        t->floats[TC_OPT] = 2 * n->nweights;
}

static void train_point(struct train_run *t)
{
        struct train_net *n = &t->net;
        float *const *a = t->arena;

        n->x = a[TC_BATCH] + t->off_x;
        n->t = a[TC_BATCH] + t->off_t;
        for (int i = 0; i < n->gemms; i++) {
                n->w[i] = a[TC_WEIGHTS] + t->off_w[i];
                n->dw[i] = a[TC_GRADS] + t->off_w[i];
                n->a[i] = a[TC_ACTS] + t->off_a[i];
        }
        n->g0 = a[TC_GRADS] + t->off_g0;
        n->g1 = a[TC_GRADS] + t->off_g1;
        n->m = a[TC_OPT];
        n->v = a[TC_OPT] + n->nweights;
}

static uint64_t class_bytes(const struct train_run *t, int c)
{
        return t->floats[c] * sizeof(float);
}

static void train_free(struct train_run *t)
{
        for (int c = 0; c < TC_N; c++) {
                if (t->arena[c] && t->place[c] == TP_MAPPED)
                        cudaFreeHost(t->arena[c]);
                else if (t->arena[c])
                        cudaFree(t->arena[c]);
                t->arena[c] = NULL;
        }
}

/* Allocates every arena where the row puts it; what lives on the GPU (device and managed
 * memory) is first checked against its free memory less managed_reserve_bytes. */
static int train_alloc(struct train_run *t)
{
        struct bench_job *j = t->j;
        uint64_t on_gpu = 0;

        for (int c = 0; c < TC_N; c++) {
                if (t->place[c] != TP_MAPPED)
                        on_gpu += class_bytes(t, c);
                else if (class_bytes(t, c) > j->ctx->lim.max_buffer_bytes)
                        return job_fail(j, -ENOMEM,
                                        "train_step's %s take %llu bytes of host-mapped memory: "
                                        "over max_buffer_bytes (%llu)",
                                        class_names[c], (unsigned long long)class_bytes(t, c),
                                        (unsigned long long)j->ctx->lim.max_buffer_bytes);
        }
        int r = check_free(j, on_gpu, "train_step's tensors");
        if (r < 0)
                return r;
        for (int c = 0; c < TC_N; c++) {
                void *p = NULL;
                size_t b = class_bytes(t, c);
                if (t->place[c] == TP_MAPPED)
                        CK(j, cudaHostAlloc(&p, b, cudaHostAllocMapped | cudaHostAllocPortable));
                else if (t->place[c] == TP_DEVICE)
                        CK(j, cudaMalloc(&p, b));
                else
                        CK(j, cudaMallocManaged(&p, b, cudaMemAttachGlobal));
                t->arena[c] = (float *)p;
        }
        train_point(t);
        return 0;
}

/* Every value as a fresh run starts: weights drawn (scale 1/sqrt(fan-in) in variance), the
 * rest zero; then each managed arena where its placement starts it. The batch arena is the
 * host's (train_batch). */
static int train_reset(struct train_run *t)
{
        struct bench_job *j = t->j;
        cudaStream_t s = j->ctx->streams[0];
        struct train_net *n = &t->net;
        unsigned grid = grid_cap(j->ctx, 4096);

        for (int c = TC_WEIGHTS; c < TC_N; c++)
                CK(j, cudaMemsetAsync(t->arena[c], 0, class_bytes(t, c), s));
        for (int i = 0; i < n->gemms; i++)
                k_train_init<<<grid, TRAIN_THREADS, 0, s>>>(n->w[i],
                                                            (uint64_t)n->dims[i] * n->dims[i + 1],
                                                            100 + i, sqrtf(3.0f / n->dims[i]));
        CK(j, cudaGetLastError());
        for (int c = 0; c < TC_N; c++) {
                if (t->place[c] == TP_RESIDENT)
                        CK(j, cudaMemPrefetchAsync(t->arena[c], class_bytes(t, c), loc_dev(j->ctx),
                                                   0, s));
                else if (t->place[c] == TP_HOST_FIRST)
                        CK(j,
                           cudaMemPrefetchAsync(t->arena[c], class_bytes(t, c), loc_host(), 0, s));
        }
        CK(j, cudaStreamSynchronize(s));
        return 0;
}

static int gemm_call(struct train_run *t, int ta, int tb, int m, int n, int k, const float *a,
                     int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
        const float one = 1.0f;
        return t->blas->sgemm(t->h, ta, tb, m, n, k, &one, a, lda, b, ldb, &beta, c, ldc);
}

/* One step, timed from the batch's arrival to the update's end. Untimed before it, the host
 * writes the batch where it lives (pinned staging for device memory, the arena itself else),
 * as a data loader does. */
static int train_one_step(struct train_run *t, float *ret_ms)
{
        struct bench_job *j = t->j;
        struct bench_ctx *c = j->ctx;
        cudaStream_t s = c->streams[0];
        size_t b = class_bytes(t, TC_BATCH);
        int r;

        if (t->place[TC_BATCH] != TP_DEVICE)
                memcpy(t->arena[TC_BATCH], t->staging, b);
        CK(j, cudaEventRecord(c->ev_start, s));
        if (t->place[TC_BATCH] == TP_DEVICE)
                CK(j,
                   cudaMemcpyAsync(t->arena[TC_BATCH], t->staging, b, cudaMemcpyHostToDevice, s));
        else if (t->place[TC_BATCH] == TP_RESIDENT)
                CK(j, cudaMemPrefetchAsync(t->arena[TC_BATCH], b, loc_dev(c), 0, s));
        r = train_enqueue(
            &t->net,
            [&](int ta, int tb, int m, int n, int k, const float *a, int lda, const float *bb,
                int ldb, float beta, float *cc,
                int ldc) { return gemm_call(t, ta, tb, m, n, k, a, lda, bb, ldb, beta, cc, ldc); },
            s, grid_cap(c, 4096));
        if (r != 0) {
                char buf[TRAIN_BLAS_WHY_MAX];
                return job_fail(j, -EIO, "cublasSgemm_v2: %s",
                                cublas_strerror(t->blas, r, buf, sizeof(buf)));
        }
        CK(j, cudaGetLastError());
        CK(j, cudaEventRecord(c->ev_stop, s));
        CK(j, cudaEventSynchronize(c->ev_stop));
        CK(j, cudaEventElapsedTime(ret_ms, c->ev_start, c->ev_stop));
        return 0;
}

/* The last activation and the updated weights, copied out after the row's last sample. */
static int train_outputs(struct train_run *t, std::vector<float> &out, std::vector<float> &w)
{
        struct train_net *n = &t->net;
        size_t no = (size_t)n->rows * n->dims[n->gemms];

        out.resize(no);
        w.resize(n->nweights);
        CK(t->j, cudaDeviceSynchronize());
        CK(t->j, cudaMemcpy(out.data(), n->a[n->gemms - 1], no * 4, cudaMemcpyDefault));
        CK(t->j, cudaMemcpy(w.data(), n->w[0], n->nweights * 4, cudaMemcpyDefault));
        return 0;
}

/* The largest difference from the all-device run, relative to its largest value. */
static double rel_diff(const std::vector<float> &a, const std::vector<float> &ref)
{
        double d = 0, top = 1e-30;
        for (size_t i = 0; i < a.size() && i < ref.size(); i++) {
                d = fmax(d, fabs((double)a[i] - ref[i]));
                top = fmax(top, fabs((double)ref[i]));
        }
        return d / top;
}

/* A row differs from the all-device run when its outputs do by more than this: the same GEMMs
 * on the same values give the same bits, whatever memory holds them. */
#define TRAIN_TOLERANCE 1e-5

/* One row of the matrix: warmup + iterations samples, each from a fresh placement, each steps
 * steps; the first step of each apart from the steady ones. */
static int train_row(struct train_run *t, const char *cls, enum tplace pl)
{
        struct bench_job *j = t->j;
        int steps = (int)param_int(j, "steps", 5);
        std::vector<double> first, steady;
        std::vector<float> out, w;
        uint64_t placed = 0;
        char name[TRAIN_NAME_MAX];
        int r;

        for (int c = 0; c < TC_N; c++) {
                bool all = strcmp(cls, TRAIN_CLASS_ALL) == 0;
                t->place[c] = all || strcmp(cls, class_names[c]) == 0 ? pl : TP_DEVICE;
                placed += all || t->place[c] != TP_DEVICE ? class_bytes(t, c) : 0;
        }
        r = train_alloc(t);
        for (int i = 0; r >= 0 && i < j->warmup + j->iterations; i++) {
                if (job_cancelled(j))
                        r = job_fail(j, -ECANCELED, "cancelled");
                if (r >= 0)
                        r = train_reset(t);
                for (int s = 0; r >= 0 && s < steps; s++) {
                        float ms = 0;
                        r = train_one_step(t, &ms);
                        if (r >= 0 && i >= j->warmup)
                                (s == 0 ? first : steady).push_back(ms);
                }
        }
        if (r >= 0)
                r = train_outputs(t, out, w);
        train_free(t);
        if (r < 0)
                return r;
        double diff = 0;
        if (pl == TP_DEVICE) {
                t->ref_out.swap(out);
                t->ref_w.swap(w);
        } else {
                diff = fmax(rel_diff(out, t->ref_out), rel_diff(w, t->ref_w));
                if (diff > TRAIN_TOLERANCE)
                        return job_fail(j, -EIO,
                                        "train_step %s@%s: outputs differ from the all-device "
                                        "run by %.3g of their largest value",
                                        place_names[pl], cls, diff);
        }
        snprintf(name, sizeof(name), "%s@%s", place_names[pl], cls);
        std::vector<double> fs = first;
        struct sample_stats st;
        stats_compute(fs.data(), fs.size(), &st);
        json_t *extra = json_pack("{s:s, s:s, s:I, s:f, s:o, s:f, s:f}", "placement",
                                  place_names[pl], "class", cls, "placed_bytes", (json_int_t)placed,
                                  "first_step_ms", st.median, "first_samples_ms", json_array(),
                                  "flops_per_step", t->flops, "max_rel_diff_vs_device", diff);
        for (size_t i = 0; extra && i < first.size(); i++)
                json_array_append_new(json_object_get(extra, "first_samples_ms"),
                                      json_real(first[i]));
        return add_measurement(j, name, (double)placed, "placed bytes", steady, false, extra);
}

static int train_rows(struct train_run *t)
{
        static const enum tplace by_name[] = {TP_RESIDENT, TP_HOST_FIRST, TP_MAPPED};
        json_t *classes = json_object_get(t->j->params, "classes");
        json_t *places = json_object_get(t->j->params, "placements");
        size_t ci, pi;
        json_t *cv, *pv;
        int r = train_row(t, TRAIN_CLASS_ALL, TP_DEVICE);

        json_array_foreach(classes, ci, cv)
        {
                json_array_foreach(places, pi, pv)
                {
                        for (size_t k = 0; r >= 0 && k < sizeof(by_name) / sizeof(by_name[0]); k++)
                                if (strcmp(json_string_value(pv), place_names[by_name[k]]) == 0)
                                        r = train_row(t, json_string_value(cv), by_name[k]);
                }
        }
        return r;
}

int bench_train_step(struct bench_job *j)
{
        struct train_run t = {};
        bool transformer = strcmp(param_str(j, "shape", TRAIN_SHAPE_MLP), TRAIN_SHAPE_MLP) != 0;
        const char *why = NULL;
        void *staging = NULL;
        int r;

        t.j = j;
        if (cublas_open(&t.blas, &why) < 0)
                return job_fail(j, -ENOTSUP, "%s", why);
        if (!j->ctx->concurrent_managed)
                return job_fail(j, -ENOTSUP,
                                "unsupported on this device: no concurrentManagedAccess");
        train_layout(&t, transformer, (int)param_int(j, "hidden", 2048),
                     (int)param_int(j, "layers", 4), (int)param_int(j, "batch", 2048));
        r = pool_host(j, 0, class_bytes(&t, TC_BATCH), &staging);
        if (r < 0)
                return r;
        t.staging = (float *)staging;
        for (uint64_t i = 0; i < t.floats[TC_BATCH]; i++)
                t.staging[i] = train_value(i, 7, 1.0f);
        if (t.blas->create(&t.h) != CUBLAS_OK)
                return job_fail(j, -EIO, "cublasCreate_v2 failed");
        if (t.blas->set_stream(t.h, j->ctx->streams[0]) != CUBLAS_OK)
                r = job_fail(j, -EIO, "cublasSetStream_v2 failed");
        if (r >= 0)
                r = train_rows(&t);
        t.blas->destroy(t.h);
        if (r < 0)
                return r;
        json_t *ctx =
            json_pack("{s:s, s:i, s:i, s:i, s:i, s:f, s:{s:I, s:I, s:I, s:I, s:I}}", "shape",
                      transformer ? TRAIN_SHAPE_TRANSFORMER : TRAIN_SHAPE_MLP, "batch", t.net.rows,
                      "hidden", t.net.dims[0], "layers", (int)param_int(j, "layers", 4), "gemms",
                      t.net.gemms, "flops_per_step", t.flops, "class_bytes", TRAIN_CLASS_BATCH,
                      (json_int_t)class_bytes(&t, TC_BATCH), TRAIN_CLASS_WEIGHTS,
                      (json_int_t)class_bytes(&t, TC_WEIGHTS), TRAIN_CLASS_ACTIVATIONS,
                      (json_int_t)class_bytes(&t, TC_ACTS), TRAIN_CLASS_GRADIENTS,
                      (json_int_t)class_bytes(&t, TC_GRADS), TRAIN_CLASS_OPTIMIZER,
                      (json_int_t)class_bytes(&t, TC_OPT));
        json_object_update_new(j->context_extra, ctx);
        json_object_set_new(j->context_extra, "host_memory", json_string("per tensor class"));
        json_object_set_new(j->extra_top, "placement_matrix", train_matrix(j->measurements));
        return 0;
}
