/* The benchmark catalog: every benchmark and suite umd runs, its parameters with types, units,
 * bounds, defaults and allowed values. GET /v1/benchmarks prints this table and job validation
 * reads the same table, so what is advertised is exactly what is accepted. The worker reads
 * the normalized params the validator produced (every parameter present, sizes in bytes). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum param_type {
        PARAM_SIZE, /* bytes: a JSON integer or a string "64MiB" */
        PARAM_INT,  /* JSON integer */
        PARAM_ENUM, /* one of values */
        PARAM_BOOL,
        PARAM_ENUM_LIST, /* array of distinct values, non-empty */
        PARAM_SIZE_LIST, /* array of sizes, non-empty, at most 64 */
};

struct param_def {
        const char *name;
        enum param_type type;
        const char *unit; /* "bytes", "samples", "ms", NULL */
        const char *description;
        int64_t min, max;          /* PARAM_INT / PARAM_SIZE(_LIST); max 0 for sizes = config max */
        int64_t def;               /* PARAM_INT, PARAM_SIZE, PARAM_BOOL */
        const char *def_str;       /* PARAM_ENUM; PARAM_ENUM_LIST as "a,b,c" */
        const char *const *values; /* PARAM_ENUM(_LIST), NULL-terminated */
        bool fake_only;            /* test-only fault injection, refused for real devices */
        /* PARAM_INT only: one word also accepted instead of a number ("balanced"); the
         * default is that word when def_str is set. */
        const char *int_word;
};

/* Measurement names: what a result's measurements[].name may be, the one spelling the CUDA
 * benchmarks, the fake model and the daemon's summaries share. A sweep point is "mode@size",
 * a measurement between GPUs "name@src>dst" (or "name@gpu"): the part before '@' is listed. */
#define MEAS_H2D              "h2d"
#define MEAS_D2H              "d2h"
#define MEAS_BIDIR            "bidir"
#define MEAS_OVERLAPPED       "overlapped"
#define MEAS_SERIAL           "serial"
#define MEAS_READ             "read"
#define MEAS_WRITE            "write"
#define MEAS_READ_WRITE       "read_write"
#define MEAS_GPU_ON_DEMAND    "gpu_on_demand"
#define MEAS_CPU_ON_DEMAND    "cpu_on_demand"
#define MEAS_PREFETCH_KERNEL  "prefetch_kernel"
#define MEAS_PREFETCH         "prefetch"
#define MEAS_PREFETCH_TO_HOST "prefetch_to_host"
#define MEAS_PINNED_H2D       "pinned_h2d"
#define MEAS_PINNED_D2H       "pinned_d2h"
#define MEAS_PAGEABLE_H2D     "pageable_h2d"
#define MEAS_PAGEABLE_D2H     "pageable_d2h"
#define MEAS_FAULT_SINGLE     "managed_fault_single"
#define MEAS_FAULT_BULK       "managed_fault_bulk"
#define MEAS_RESIDENT         "managed_resident"
#define MEAS_COPY_ENGINE      "copy_engine"
#define MEAS_SM_COPY          "sm_copy"
/* sweep modes (also catalog values of sweep's "modes") */
#define MEAS_ZERO_COPY         "zero_copy"
#define MEAS_MANAGED_ON_DEMAND "managed_on_demand"
#define MEAS_MANAGED_PREFETCH  "managed_prefetch"
/* um_vs_explicit modes; the first is the reference every mode is compared with */
#define MEAS_UM_PINNED_COPY_KERNEL     "pinned_copy_kernel"
#define MEAS_UM_OVERLAPPED_COPY_KERNEL "overlapped_copy_kernel"
#define MEAS_UM_PAGEABLE_COPY_KERNEL   "pageable_copy_kernel"
#define MEAS_UM_ZERO_COPY_KERNEL       "zero_copy_kernel"
#define MEAS_UM_ON_DEMAND              MEAS_MANAGED_ON_DEMAND
#define MEAS_UM_PREFETCH               MEAS_MANAGED_PREFETCH
#define MEAS_UM_READ_MOSTLY            "managed_read_mostly"
#define MEAS_UM_PREFERRED_HOST         "managed_preferred_host"
#define MEAS_UM_PREFERRED_DEVICE       "managed_preferred_device"
#define MEAS_UM_ACCESSED_BY            "managed_accessed_by"
#define MEAS_UM_PINNED_COPY_D2H        "pinned_copy_d2h"
#define MEAS_UM_PAGEABLE_COPY_D2H      "pageable_copy_d2h"
#define MEAS_UM_PREFETCH_TO_HOST       "managed_prefetch_to_host"
#define MEAS_UM_CPU_ON_DEMAND          "managed_cpu_on_demand"
/* pipeline (issue 21): one training step per strategy, and the two halves of its limit */
#define MEAS_PIPE_SERIAL           "pinned_serial"
#define MEAS_PIPE_OVERLAPPED       "pinned_overlapped"
#define MEAS_PIPE_PAGEABLE         "pageable_serial"
#define MEAS_PIPE_ON_DEMAND        MEAS_MANAGED_ON_DEMAND
#define MEAS_PIPE_PREFETCH         MEAS_MANAGED_PREFETCH
#define MEAS_PIPE_PREFETCH_CHUNKED "managed_prefetch_chunked"
#define MEAS_PIPE_ZERO_COPY        MEAS_ZERO_COPY
#define MEAS_PIPE_GATHER           "pinned_gather"
/* issue 60: CUDA 13's batched prefetch, and discard-and-prefetch before the host's write */
#define MEAS_PIPE_PREFETCH_BATCH   "managed_prefetch_batch"
#define MEAS_PIPE_DISCARD_PREFETCH "managed_discard_prefetch"
/* issue 60: the host's write of one batch alone (batch host_written): a third half of the limit */
#define MEAS_HOST_WRITE "host_write"
/* issue 60: the batch prefetched whole to the GPU alone, no kernel: the managed copy's own rate,
 * the bound of every managed strategy (measured where a prefetching strategy runs) */
#define MEAS_PREFETCH_ALONE "managed_prefetch_alone"
#define MEAS_COPY_ALONE     "copy_alone"
#define MEAS_KERNEL_ALONE   "kernel_alone"
/* The word pipeline's intensity takes for "as long as the copy". */
#define PIPE_BALANCED "balanced"
/* pipeline's batch (issue 60): already in host memory before each step (untimed), or written
 * by the host during the run, double-buffered, the write timed */
#define PIPE_BATCH_PREPARED "prepared"
#define PIPE_BATCH_WRITTEN  "host_written"
#define PIPE_MAX_STEPS      100
/* pipeline's chunk_issue (issue 60): how a chunked strategy issues its chunks. auto, the
 * default, is each kind's faster on the H100 (bench/results/gpu-h100-1207): pinned copies on one
 * copy stream, managed prefetches round robin. */
#define PIPE_ISSUE_AUTO        "auto"
#define PIPE_ISSUE_COPY_STREAM "copy_stream"
#define PIPE_ISSUE_ROUND_ROBIN "round_robin"
/* train_step (issue 60): a measurement "placement@class", "device@all" the reference */
#define MEAS_TRAIN_DEVICE           "device"
#define MEAS_TRAIN_MANAGED_RESIDENT "managed_resident"
#define MEAS_TRAIN_MANAGED_HOST     "managed_host"
#define MEAS_TRAIN_HOST_MAPPED      "host_mapped"
#define TRAIN_CLASS_BATCH           "batch"
#define TRAIN_CLASS_WEIGHTS         "weights"
#define TRAIN_CLASS_ACTIVATIONS     "activations"
#define TRAIN_CLASS_GRADIENTS       "gradients"
#define TRAIN_CLASS_OPTIMIZER       "optimizer"
#define TRAIN_CLASS_ALL             "all"
#define TRAIN_SHAPE_MLP             "mlp"
#define TRAIN_SHAPE_TRANSFORMER     "transformer_block"
/* embedding_gather (issue 60): one measurement per strategy, "device" the HBM reference */
#define MEAS_EMB_DEVICE          "device"
#define MEAS_EMB_MANAGED_UVM     "managed_uvm"
#define MEAS_EMB_ON_DEMAND       MEAS_MANAGED_ON_DEMAND
#define MEAS_EMB_HOST_MAPPED     "host_mapped"
#define MEAS_EMB_HBM_CACHE       "hbm_cache"
#define MEAS_EMB_EXPLICIT_GATHER "explicit_gather"
#define MEAS_EMB_WHOLE_COPY      "whole_copy"
/* health's small-copy latency */
#define MEAS_LATENCY_PINNED_H2D "latency_pinned_h2d"
/* health's extended tier (issue 24): what it adds to the quick tier's measurements. A knee is a
 * short sweep of one path, "@SIZE" follows; d2d_full is device memory at the tier's full_size. */
#define MEAS_LATENCY_PINNED_D2H   "latency_pinned_d2h"
#define MEAS_LATENCY_PAGEABLE_H2D "latency_pageable_h2d"
#define MEAS_LATENCY_PAGEABLE_D2H "latency_pageable_d2h"
#define MEAS_LATENCY_FAULT        "latency_managed_fault"
#define MEAS_D2D_FULL             "d2d_full"
#define MEAS_KNEE_PINNED_H2D      "knee_pinned_h2d"
#define MEAS_KNEE_PINNED_D2H      "knee_pinned_d2h"
#define MEAS_KNEE_D2D             "knee_d2d"
/* health's tiers: the canonical check is "quick"; "extended" adds the above inside a budget */
#define HEALTH_TIER_QUICK    "quick"
#define HEALTH_TIER_EXTENDED "extended"
/* between GPUs: "@src>dst" (or "@gpu") follows */
#define MEAS_CE_UNI    "ce_uni"
#define MEAS_CE_BIDIR  "ce_bidir"
#define MEAS_SM_UNI    "sm_uni"
#define MEAS_SM_BIDIR  "sm_bidir"
#define MEAS_ON_DEMAND "on_demand"
#define MEAS_PEER_COPY "peer_copy"
#define MEAS_ALONE     "alone"
#define MEAS_ALL       "all"
#define MEAS_D2D       "d2d"

struct bench_def {
        const char *name;
        const char *kind;        /* "benchmark" or "suite" (see catalog_is_suite) */
        const char *description; /* one line */
        const struct param_def *params;
        size_t n_params;
        /* Spans GPUs: runs on the node worker (every GPU of the host, none running anything
         * else meanwhile), never on one GPU's worker; needs at least two GPUs. */
        bool multi_gpu;
        /* The measurement names its result may contain (NULL-terminated; see MEAS_*). */
        const char *const *measurements;
};

/* Limits the validator enforces that come from configuration. */
struct catalog_limits {
        uint64_t max_buffer_bytes;
};

/* An error's field: "params." and a parameter's name (the catalog's are under 30 bytes), or a
 * size list's "params.NAME[i]"; a longer one is cut. */
#define CATALOG_ERROR_FIELD_MAX 96
/* An error's rule with what it got: two sizes, or the allowed values joined
 * (CATALOG_VALUES_TEXT_MAX) after "must be one of: "; a longer one is cut. */
#define CATALOG_ERROR_DETAIL_MAX 256

struct catalog_error {
        char field[CATALOG_ERROR_FIELD_MAX];   /* "params.size", "benchmark" */
        char detail[CATALOG_ERROR_DETAIL_MAX]; /* says the rule: "must be at most 4 GiB
                                                * (max_buffer_bytes)" */
};

const struct bench_def *catalog_find(const char *name);
/* A suite composes other benchmarks' runs; the daemon summarises it (daemon/suites.h). */
bool catalog_is_suite(const struct bench_def *b);
/* b's parameter called name, or NULL. */
const struct param_def *catalog_param(const struct bench_def *b, const char *name);
/* Whether name (or its part before '@') is one of b's measurement names. */
bool catalog_has_measurement(const struct bench_def *b, const char *name);
const struct bench_def *catalog_get(size_t i); /* NULL past the end */
size_t catalog_count(void);

/* The whole catalog as GET /v1/benchmarks shows it. */
json_t *catalog_to_json(const struct catalog_limits *lim);
/* A JSON Schema (2020-12) of b's params: every parameter with its type, bounds, default and
 * allowed values, nothing else. The OpenAPI document is given one per catalog entry, so a new
 * benchmark is described the day it is added. NULL when out of memory. */
json_t *catalog_params_schema(const struct bench_def *b, const struct catalog_limits *lim);

/* Validate params (an object or NULL) for benchmark b. On success *ret_params is a new object
 * with every parameter (defaults filled, sizes as integers in bytes) and 0 is returned. On bad
 * input -EINVAL with err filled; *ret_params untouched. allow_fake: fake_* params accepted. */
int catalog_validate(const struct bench_def *b, const json_t *params,
                     const struct catalog_limits *lim, bool allow_fake, json_t **ret_params,
                     struct catalog_error *err);
