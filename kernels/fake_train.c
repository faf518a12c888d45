/* train_step's and embedding_gather's fake model (fake_train.h). Rates follow the H200 figures
 * fake.c models with (pinned copies 55.5 GB/s, faults 8.5 GB/s, mapped reads 52 GB/s); the
 * GEMMs run at FAKE_FP32_FLOPS. */
#include "fake_train.h"
#include "fake_model.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"

#define FAKE_FP32_FLOPS   4.0e13 /* cuBLAS Sgemm, sustained */
#define FAKE_HBM_GBPS     3000.0
#define FAKE_COPY_GBPS    55.5
#define FAKE_FAULT_GBPS   8.5
#define FAKE_MAPPED_GBPS  52.0
#define FAKE_GATHER_GBPS  2000.0 /* rows gathered from HBM */
#define FAKE_REMOTE_GBPS  20.0   /* rows read in place over PCIe */
#define FAKE_PACK_GBPS    10.0   /* the CPU packing rows */
#define FAKE_FAULT_CHUNK  65536.0
#define FAKE_ALIGN_FLOATS 64
#define FAKE_GEMMS_MAX    128
#define FAKE_EULER_GAMMA  0.5772156649

enum { C_BATCH, C_WEIGHTS, C_ACTS, C_GRADS, C_OPT, C_N };
static const char *const class_names[C_N] = {TRAIN_CLASS_BATCH, TRAIN_CLASS_WEIGHTS,
                                             TRAIN_CLASS_ACTIVATIONS, TRAIN_CLASS_GRADIENTS,
                                             TRAIN_CLASS_OPTIMIZER};
/* Times a step reads or writes each class's bytes: the batch twice (forward, weight gradient),
 * weights in three GEMMs and the update, activations written and read twice, gradients written
 * and read by the update, both moments read and written. */
static const double class_passes[C_N] = {2, 4, 3, 3, 2};

static int64_t num(const json_t *params, const char *key)
{
        return json_integer_value(json_object_get(params, key));
}

static uint64_t aligned(uint64_t floats)
{
        return (floats + FAKE_ALIGN_FLOATS - 1) / FAKE_ALIGN_FLOATS * FAKE_ALIGN_FLOATS;
}

void fake_points_free(struct fake_points *pts)
{
        for (size_t i = 0; i < pts->n; i++)
                json_decref(pts->p[i].extra);
        free(pts->p);
        pts->p = NULL;
        pts->n = 0;
}

static struct fake_point *push(struct fake_points *pts, const char *name)
{
        struct fake_point *np = realloc(pts->p, (pts->n + 1) * sizeof(*np));
        if (!np)
                return NULL;
        pts->p = np;
        np = &pts->p[pts->n++];
        memset(np, 0, sizeof(*np));
        snprintf(np->name, sizeof(np->name), "%s", name);
        return np;
}

/* bench_train.cu's layout: each class's bytes and the FLOPs of a step. */
static double train_sizes(const json_t *params, uint64_t bytes[C_N])
{
        bool tf = strcmp(json_string_value(json_object_get(params, "shape")), TRAIN_SHAPE_MLP) != 0;
        uint64_t rows = (uint64_t)num(params, "batch"), h = (uint64_t)num(params, "hidden");
        uint64_t f[C_N] = {0}, dims[FAKE_GEMMS_MAX + 1], wide = 0;
        static const uint64_t block[] = {3, 1, 4, 1};
        int n = 0;
        double flops = 0;

        dims[0] = h;
        for (int64_t l = 0; l < num(params, "layers"); l++)
                for (int k = 0; k < (tf ? 4 : 1); k++)
                        dims[++n] = tf ? block[k] * h : h;
        f[C_BATCH] = aligned(rows * dims[0]) + aligned(rows * dims[n]);
        for (int i = 0; i < n; i++) {
                f[C_WEIGHTS] += aligned(dims[i] * dims[i + 1]);
                f[C_ACTS] += aligned(rows * dims[i + 1]);
                flops += 2.0 * rows * dims[i] * dims[i + 1] * (i == 0 ? 2 : 3);
                wide = dims[i + 1] > wide ? dims[i + 1] : wide;
        }
        f[C_GRADS] = f[C_WEIGHTS] + 2 * aligned(rows * wide);
        f[C_OPT] = 2 * f[C_WEIGHTS];
        for (int c = 0; c < C_N; c++)
                bytes[c] = f[c] * 4;
        return flops;
}

static double ms_at(double bytes, double gbps)
{
        return bytes / (gbps * 1e9) * 1e3;
}

/* One cell's first and steady step: the all-device step plus what the placement adds. */
static void train_cell(const uint64_t bytes[C_N], double device_ms, const char *cls, const char *pl,
                       double *ret_first, double *ret_steady)
{
        double first = device_ms, steady = device_ms;

        for (int c = 0; c < C_N; c++) {
                if (strcmp(cls, TRAIN_CLASS_ALL) != 0 && strcmp(cls, class_names[c]) != 0)
                        continue;
                double b = (double)bytes[c];
                if (strcmp(pl, MEAS_TRAIN_HOST_MAPPED) == 0) {
                        first += ms_at(b * class_passes[c], FAKE_MAPPED_GBPS);
                        steady += ms_at(b * class_passes[c], FAKE_MAPPED_GBPS);
                } else if (strcmp(pl, MEAS_TRAIN_MANAGED_HOST) == 0) {
                        first += ms_at(b, FAKE_FAULT_GBPS);
                        /* the host writes each batch: its pages fault in every step */
                        if (c == C_BATCH)
                                steady += ms_at(b, FAKE_FAULT_GBPS) - ms_at(b, FAKE_COPY_GBPS);
                }
        }
        *ret_first = first;
        *ret_steady = steady;
}

static int train_point(struct fake_points *out, const uint64_t bytes[C_N], double device_ms,
                       double flops, const char *cls, const char *pl)
{
        char name[FAKE_POINT_NAME_MAX];
        uint64_t placed = 0;
        double first, steady;

        for (int c = 0; c < C_N; c++)
                if (strcmp(cls, TRAIN_CLASS_ALL) == 0 || strcmp(cls, class_names[c]) == 0)
                        placed += bytes[c];
        train_cell(bytes, device_ms, cls, pl, &first, &steady);
        snprintf(name, sizeof(name), "%s@%s", pl, cls);
        struct fake_point *p = push(out, name);
        if (!p)
                return -ENOMEM;
        p->bytes = placed;
        p->ms = steady;
        p->extra = json_pack("{s:s, s:s, s:I, s:f, s:f, s:f}", "placement", pl, "class", cls,
                             "placed_bytes", (json_int_t)placed, "first_step_ms", first,
                             "flops_per_step", flops, "max_rel_diff_vs_device", 0.0);
        return p->extra ? 0 : -ENOMEM;
}

int fake_train_step(const json_t *params, uint64_t free_bytes, struct fake_points *out, char *why,
                    size_t why_len)
{
        uint64_t bytes[C_N], total = 0;
        double flops = train_sizes(params, bytes);
        size_t ci, pi;
        json_t *cv, *pv;

        for (int c = 0; c < C_N; c++)
                total += bytes[c];
        if (total > free_bytes) {
                snprintf(why, why_len,
                         "train_step's tensors of %llu bytes refused: the GPU has %llu bytes free",
                         (unsigned long long)total, (unsigned long long)free_bytes);
                return -ENOMEM;
        }
        double device_ms = flops / FAKE_FP32_FLOPS * 1e3 +
                           ms_at((double)bytes[C_BATCH], FAKE_COPY_GBPS) +
                           ms_at(4.0 * bytes[C_WEIGHTS] * 2, FAKE_HBM_GBPS);
        int r = train_point(out, bytes, device_ms, flops, TRAIN_CLASS_ALL, MEAS_TRAIN_DEVICE);
        json_array_foreach(json_object_get(params, "classes"), ci, cv)
        {
                json_array_foreach(json_object_get(params, "placements"), pi, pv)
                {
                        if (r == 0)
                                r = train_point(out, bytes, device_ms, flops, json_string_value(cv),
                                                json_string_value(pv));
                }
        }
        return r;
}

/* The share of lookups the hottest held rows of rows take: C/R when uniform, else the ratio of
 * the generalised harmonic numbers, by their integral approximation. */
static double zipf_hit(double held, double rows, double s)
{
        if (s <= 0)
                return held / rows;
        double hc = fabs(s - 1) < 1e-9
                        ? log(held) + FAKE_EULER_GAMMA
                        : (pow(held, 1 - s) - 1) / (1 - s) + 0.5 + 0.5 * pow(held, -s);
        double hr = fabs(s - 1) < 1e-9
                        ? log(rows) + FAKE_EULER_GAMMA
                        : (pow(rows, 1 - s) - 1) / (1 - s) + 0.5 + 0.5 * pow(rows, -s);
        double h = hc / hr;
        return h < 0 ? 0 : h > 1 ? 1 : h;
}

struct emb_shape {
        double size, row, lookups, gathered, rows, hit;
        int64_t held;
};

static int emb_point(struct fake_points *out, const struct emb_shape *e, const char *s)
{
        double gather_ms = ms_at(e->gathered, FAKE_GATHER_GBPS), ms;
        json_t *extra = NULL;

        if (strcmp(s, MEAS_EMB_DEVICE) == 0)
                ms = gather_ms;
        else if (strcmp(s, MEAS_EMB_MANAGED_UVM) == 0 || strcmp(s, MEAS_EMB_HOST_MAPPED) == 0)
                ms = ms_at(e->lookups * fmax(e->row, 64), FAKE_REMOTE_GBPS);
        else if (strcmp(s, MEAS_EMB_ON_DEMAND) == 0)
                ms = ms_at(fmin(e->size, e->lookups * FAKE_FAULT_CHUNK), FAKE_FAULT_GBPS);
        else if (strcmp(s, MEAS_EMB_HBM_CACHE) == 0) {
                ms = e->hit * gather_ms +
                     ms_at((1 - e->hit) * e->lookups * fmax(e->row, 64), FAKE_REMOTE_GBPS);
                extra = json_pack("{s:I, s:f, s:s}", "cache_rows", (json_int_t)e->held, "hit_rate",
                                  e->hit, "cache_fill",
                                  "static: the distribution's hottest rows, before timing");
        } else if (strcmp(s, MEAS_EMB_EXPLICIT_GATHER) == 0) {
                double pack = ms_at(e->gathered, FAKE_PACK_GBPS);
                ms = ms_at(e->lookups * 4, FAKE_COPY_GBPS) + pack +
                     ms_at(e->gathered, FAKE_COPY_GBPS) + 0.02;
                extra = json_pack("{s:f, s:f}", "pack_ms", pack, "pack_gbps", FAKE_PACK_GBPS);
        } else {
                ms = ms_at(e->size, FAKE_COPY_GBPS) + gather_ms;
                extra = json_pack("{s:f}", "copy_gbps", FAKE_COPY_GBPS);
        }
        struct fake_point *p = push(out, s);
        if (!p) {
                json_decref(extra);
                return -ENOMEM;
        }
        p->bytes = (uint64_t)e->gathered;
        p->ms = ms + 0.005;
        p->extra = extra;
        return 0;
}

int fake_embedding_gather(const json_t *params, uint64_t free_bytes, struct fake_points *out,
                          char *why, size_t why_len)
{
        struct emb_shape e = {.size = (double)num(params, "size"),
                              .row = (double)num(params, "row_bytes"),
                              .lookups = (double)num(params, "lookups")};
        size_t i;
        json_t *s;
        int r = 0;

        if (num(params, "row_bytes") % 16) {
                snprintf(why, why_len, "row_bytes must be a multiple of 16");
                return -EINVAL;
        }
        e.rows = floor(e.size / e.row);
        if (e.rows < 1 || e.rows > INT32_MAX) {
                snprintf(why, why_len, "the table must hold 1 to %d rows", INT32_MAX);
                return -EINVAL;
        }
        if (e.size > (double)free_bytes) {
                snprintf(why, why_len,
                         "embedding_gather's HBM table of %.0f bytes refused: the GPU has %llu "
                         "bytes free",
                         e.size, (unsigned long long)free_bytes);
                return -ENOMEM;
        }
        e.size = e.rows * e.row;
        e.gathered = e.lookups * e.row;
        e.held = (int64_t)(e.rows * num(params, "cache_load_factor") / 100);
        e.held = e.held ? e.held : 1;
        e.hit = zipf_hit((double)e.held, e.rows, num(params, "zipf_x100") / 100.0);
        json_array_foreach(json_object_get(params, "strategies"), i, s)
        {
                if (r == 0)
                        r = emb_point(out, &e, json_string_value(s));
        }
        return r;
}

/* train_step and embedding_gather (issue 60): fake_train.c's model gives each measurement's
 * time and keys; key names the rate table's entry that says which bytes are counted. */
static int plan_points(struct fake_job *j,
                       int (*model)(const json_t *, uint64_t, struct fake_points *, char *, size_t),
                       const char *key)
{
        struct fake_points pts = {0};
        int r =
            model(j->params, FAKE_MEMORY_TOTAL - FAKE_MEMORY_USED, &pts, j->why, sizeof(j->why));

        for (size_t i = 0; r == 0 && i < pts.n; i++) {
                r = fake_model_add(j, pts.p[i].name, key, pts.p[i].bytes);
                if (r < 0)
                        break;
                j->m[j->n - 1].ms = pts.p[i].ms;
                j->m[j->n - 1].extra = pts.p[i].extra;
                pts.p[i].extra = NULL;
        }
        fake_points_free(&pts);
        return r;
}

int fake_train_plan_step(struct fake_job *j)
{
        return plan_points(j, fake_train_step, "train_step");
}

int fake_train_plan_embedding(struct fake_job *j)
{
        return plan_points(j, fake_embedding_gather, "pipeline");
}
