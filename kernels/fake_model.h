/* What the fake devices' model shares between its files (never outside kernels/fake*.c): the
 * rate table's entries, the measurements a plan fills, and one plan per catalog id, each in the
 * file of its benchmark family. fake.c runs a plan (fault injection, measuring, the result);
 * fake_model.c holds the rates and the helpers every plan adds measurements with. */
#pragma once

#include "fake_train.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FAKE_MEMORY_TOTAL 150754820096ull /* what an H200 reports */
#define FAKE_MEMORY_USED  (600ull << 20)  /* a context's worth */

/* A measurement's name: a catalog MEAS_* name (the longest is 24 bytes) with a suffix such as
 * "@17179869184" (a size), "@0>1" (a pair) or "@i=4096" (a sweep point). fake_train.h's points
 * are copied in whole, so it is their size; snprintf cuts a longer name rather than overflow. */
#define FAKE_MEAS_NAME_MAX FAKE_POINT_NAME_MAX

/* One entry of the rate table (fake_model.c), keyed by model name. */
struct fake_mode {
        const char *key;
        double gbps;         /* at 100% bandwidth */
        double overhead_us;  /* per sample, whatever the size */
        unsigned bytes_mult; /* bytes counted per buffer byte */
        const char *counted; /* bench.h's "bytes_counted" */
};

/* The explain pass's model of one managed measurement (fake_managed.c). */
struct fake_explain;

struct fake_meas {
        const struct fake_mode *mode;
        char name[FAKE_MEAS_NAME_MAX];
        uint64_t size; /* buffer bytes */
        bool latency;  /* also report "latency_us" */
        /* Multi-GPU measurements: the pair (or one GPU: src) and how, else src = -1. */
        int src, dst;
        const char *method, *direction;
        double scale; /* the pair's link against the model's NV18 (1 when not a pair) */
        const struct fake_explain *explain; /* explain: true on a managed measurement */
        double ms;     /* > 0: the modelled time of a sample (pipeline), instead of the rate */
        json_t *extra; /* merged into the measurement (owned) */
};

/* What a plan gets, and the measurements it fills. */
struct fake_job {
        const json_t *device; /* one GPU's --list entry (NULL on the node worker) */
        const json_t *params; /* normalised */
        unsigned n_gpus;      /* the node worker's GPUs */
        uint64_t size;        /* params' size */
        struct fake_meas *m;
        size_t n, cap;
        json_t *top;            /* keys added to the result (pipeline's "intensity"), owned */
        char why[FAKE_WHY_MAX]; /* why a plan failed (fake_train.h's models write it too) */
};

/* --- fake_model.c: the rates, the parameters, adding measurements --- */

/* NULL when the model has no rate for key. */
const struct fake_mode *fake_model_mode_find(const char *key);
/* params are normalised by the catalog, so every one is present: a missing one reads 0 (or
 * NULL for a parameter the benchmark does not take). */
uint64_t fake_model_param_u64(const json_t *params, const char *key);
const char *fake_model_param_str(const json_t *params, const char *key);
bool fake_model_list_has(const json_t *params, const char *key, const char *value);
/* Adds measurement `name` modelled by `key`. -ENOTSUP (with j->why) when the model has no such
 * key: a measurement without a model is refused, never guessed. -ENOMEM. */
int fake_model_add(struct fake_job *j, const char *name, const char *key, uint64_t size);
/* Measurements named like their model keys, at the job's size. */
int fake_model_add_same(struct fake_job *j, const char *const *keys, size_t n);
/* One model key per name, at the job's size. */
int fake_model_add_named(struct fake_job *j, const char *const (*pairs)[2], size_t n);
bool fake_model_pageable(const struct fake_job *j);

/* --- the plans: 0, or negative with j->why (an empty why with -ENOMEM: out of memory) --- */

/* fake_copy.c: copies between host and device, within the device, and their sweeps */
int fake_copy_plan_copy(struct fake_job *j);
int fake_copy_plan_overlap(struct fake_job *j);
int fake_copy_plan_zero_copy(struct fake_job *j);
int fake_copy_plan_system_memory(struct fake_job *j);
int fake_copy_plan_latency(struct fake_job *j);
int fake_copy_plan_d2d(struct fake_job *j);
int fake_copy_plan_sweep(struct fake_job *j);

/* fake_managed.c: managed memory, and the explain pass's modelled counters */
int fake_managed_plan_on_demand(struct fake_job *j);
int fake_managed_plan_prefetch(struct fake_job *j);
int fake_managed_plan_advise(struct fake_job *j);
/* explain: true gives every managed measurement of the plan its modelled counters. */
void fake_managed_plan_explain(struct fake_job *j);
/* The explain object of bench.h's real one (kernels/explain.h), marked fake. */
json_t *fake_managed_explain_json(const struct fake_explain *x, uint64_t size);

/* fake_pipeline.c: pipeline and pipeline_sweep, a step's time by the GPU's rules */
int fake_pipeline_plan(struct fake_job *j);
int fake_pipeline_plan_sweep(struct fake_job *j);

/* fake_train.c: train_step and embedding_gather */
int fake_train_plan_step(struct fake_job *j);
int fake_train_plan_embedding(struct fake_job *j);

/* fake_suite.c: the suites (health's tiers on a GPU and on the node, um_vs_explicit) */
int fake_suite_plan_um_vs_explicit(struct fake_job *j);
int fake_suite_plan_health(struct fake_job *j);
int fake_suite_plan_node_health(struct fake_job *j);

/* fake_multi.c: several GPUs on the node worker, and the links between them */
int fake_multi_plan_peer(struct fake_job *j);
int fake_multi_plan_topology(struct fake_job *j);
int fake_multi_plan_managed_peer(struct fake_job *j);
int fake_multi_plan_host_all(struct fake_job *j);
/* peer's measurements for the methods and directions params name (also the node's health). */
int fake_multi_plan_pairs(struct fake_job *j, const json_t *params);
/* The fake links between n devices (see fake_run_multi). */
json_t *fake_multi_links_json(unsigned n);
