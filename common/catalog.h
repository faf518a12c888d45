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
        PARAM_SIZE,      /* bytes: a JSON integer or a string "64MiB" */
        PARAM_INT,       /* JSON integer */
        PARAM_ENUM,      /* one of values */
        PARAM_BOOL,
        PARAM_ENUM_LIST, /* array of distinct values, non-empty */
        PARAM_SIZE_LIST, /* array of sizes, non-empty, at most 64 */
};

struct param_def {
        const char *name;
        enum param_type type;
        const char *unit;        /* "bytes", "samples", "ms", NULL */
        const char *description;
        int64_t min, max;        /* PARAM_INT / PARAM_SIZE(_LIST); max 0 for sizes = config max */
        int64_t def;             /* PARAM_INT, PARAM_SIZE, PARAM_BOOL */
        const char *def_str;     /* PARAM_ENUM; PARAM_ENUM_LIST as "a,b,c" */
        const char *const *values; /* PARAM_ENUM(_LIST), NULL-terminated */
        bool fake_only;          /* test-only fault injection, refused for real devices */
};

struct bench_def {
        const char *name;
        const char *kind;        /* "benchmark" or "suite" */
        const char *description; /* one line */
        const struct param_def *params;
        size_t n_params;
        /* Spans GPUs: runs on the node worker (every GPU of the host, none running anything
         * else meanwhile), never on one GPU's worker; needs at least two GPUs. */
        bool multi_gpu;
};

/* Limits the validator enforces that come from configuration. */
struct catalog_limits {
        uint64_t max_buffer_bytes;
};

struct catalog_error {
        char field[96];   /* "params.size", "benchmark" */
        char detail[256]; /* says the rule: "must be at most 4 GiB (max_buffer_bytes)" */
};

const struct bench_def *catalog_find(const char *name);
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
