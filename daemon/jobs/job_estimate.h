/* What a job will at least cost, from its normalized params and its GPU's nominal rates, judged
 * at submit: see job_estimate.c. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "catalog.h"

struct umd_config;
struct device;
struct problem;

/* A lower bound on one part's run. */
struct job_estimate {
        double ms;             /* time: bytes at the fastest rate, and the kernels' work */
        double gbps;           /* the rate the bytes were counted at */
        const char *rate_from; /* where that rate comes from, for the answer */
        uint64_t result_bytes; /* the result's size, 0 where it is not predictable */
        uint64_t samples;      /* timed samples the result holds (result_bytes' basis) */
};

/* The lower bound for benchmark b with params on device d. false when there is none (a link of
 * unknown rate, a benchmark whose cost the params do not say). */
bool job_estimate(const struct bench_def *b, const json_t *params, const struct device *d,
                  struct job_estimate *ret);

/* Refuse (400, p filled, negative) a job whose lower bound on one of its devices is more than
 * job_estimate_factor times timeout_s, or whose result is sure to pass max_result_bytes; 0 to
 * let it run. */
int job_estimate_check(const struct umd_config *cfg, const struct bench_def *b,
                       const json_t *params, const size_t *devs, size_t n_devs, unsigned timeout_s,
                       struct problem *p);
