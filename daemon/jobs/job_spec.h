/* Validation of a submitted job (POST /v1/jobs) and of a stored one: see job_spec.c. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "catalog.h"
#include "core.h"

struct umd_config;

#define SPEC_MAX_DEVICES 256

struct job_spec {
        const struct bench_def *bench;
        json_t *params; /* normalized (every parameter, sizes in bytes); owned */
        size_t devs[SPEC_MAX_DEVICES];
        size_t n_devs;
        int prio; /* 0 high, 1 normal, 2 low */
        unsigned timeout_s;
        bool canonical; /* the canonical health check: params from the configuration */
};

/* What needs nothing but the body: an object of known fields naming a known benchmark. */
int spec_check_body(const json_t *body, const struct bench_def **ret_bench, struct problem *p);
/* The rest: devices, params, priority, timeout_s, labels. Reads device states, so call with
 * core_lock held. 0 with *ret filled (release with spec_done), or negative with p filled. */
int spec_parse(const struct umd_config *cfg, const json_t *body, const struct bench_def *b,
               struct job_spec *ret, struct problem *p);
void spec_done(struct job_spec *s);

/* A health job submitted without params is the canonical check: the only one that makes a
 * verdict or feeds a baseline. */
bool spec_is_canonical_health(const json_t *body);

/* A job document read back from storage, checked by the rules a submission and job_index.c's own
 * writes follow (types of every field the daemon reads, label keys and values), so nothing
 * read from disk or a database reaches code that trusts its shape. 0, or -EINVAL with why set
 * (never quoting more than a bounded key). Needs no lock and no configuration. */
int spec_validate_stored(const json_t *doc, char *why, size_t whylen);

int spec_priority_from_string(const char *s); /* -1 when unknown */
const char *spec_priority_name(int prio);
