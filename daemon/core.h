/* What the HTTP layer may ask of the daemon. api/ calls only these (and never CUDA); each
 * returns JSON the handler serialises, or fills a problem the handler turns into
 * application/problem+json. Thread-safe: handlers run on libmicrohttpd's thread while the
 * supervisor runs on its own. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "problem.h"

struct job_filter {
        const char *status; /* NULL = any */
        const char *benchmark;
        const char *device;  /* index or uuid */
        const char *label;   /* "k:v" */
        const char *before;  /* job id cursor: older than this */
        const char *after;   /* job id cursor: newer than this */
        const char *include; /* "results": full documents, bounded by list_results_max_bytes */
        const char *since;   /* created at or after: RFC 3339 or Unix ms */
        const char *until;   /* created before */
        const char *limit;   /* as given, validated by core */
};

/* GET /v1/devices: array of devices with state and last verdict. */
json_t *core_devices_json(void);
/* GET /v1/devices/node: the node worker (jobs.h's job_query_node_json_locked), NULL on a host with
 * fewer than two GPUs. */
json_t *core_node_json(void);
/* GET /v1/health: returns 200 or 503, *ret_body the explanation (with "node": the node worker and
 * the GPU pairs' last verdict, null on a host with one GPU). */
int core_health(json_t **ret_body);
/* GET /v1/version */
json_t *core_version_json(void);
/* GET /v1/benchmarks */
json_t *core_catalog_json(void);
/* {"<benchmark>": JSON Schema of its params, ...} for every catalog entry, in catalog order
 * (an array of [name, schema] pairs). */
json_t *core_params_schemas(void);

/* POST /v1/jobs. 0 with *ret_job (new, 202) or 1 with *ret_job (idempotent replay, 200);
 * negative with p filled otherwise (400, 409, 429, 503). client: the token name or NULL. */
int core_job_submit(const json_t *body, const char *idempotency_key, const char *client,
                    json_t **ret_job, struct problem *p);
/* GET /v1/jobs/{id} */
int core_job_get(const char *id, json_t **ret_job, struct problem *p);
/* GET /v1/jobs/{id} of a finished job, fast: 0 with the served bytes (malloc'd), 1 when the
 * job is still in memory (ask core_job_get), negative with p filled (400, 404, 500). */
int core_job_get_finished(const char *id, char **ret_body, size_t *ret_len, struct problem *p);
/* Whether a job state name is final (succeeded, failed, cancelled, timed_out, interrupted). */
bool core_job_state_final(const char *state);
/* A counter that moves whenever a job is submitted or changes state. Read it before reading
 * a job: if it has moved since, what was read may be stale. */
uint64_t core_jobs_generation(void);
/* Called (with the daemon's lock held: it must not call back into core) after the generation
 * moved, with the job's id. One listener; NULL removes it. */
typedef void (*core_job_listener)(const char *id, void *userdata);
void core_set_job_listener(core_job_listener fn, void *userdata);
/* GET /v1/jobs: {"jobs":[...], "next": "/v1/jobs?...&before=ID" | null} */
struct job_page {
        char *body; /* the page's JSON text, malloc'd */
        size_t len;
        char *next;   /* the next page's path, malloc'd; NULL on the last page */
        size_t count; /* jobs on this page */
};
int core_job_list(const struct job_filter *f, struct job_page *ret_page, struct problem *p);
/* DELETE /v1/jobs/{id}: 0 with the job as it now is; 409 when already finished. */
int core_job_cancel(const char *id, const char *client, bool admin, json_t **ret_job,
                    struct problem *p);

/* POST /v1/devices/{id}/pause (body: NULL or {"reason": "..."}) and /resume, admin: 0 with
 * the device as it now is; 400 bad body, 404 unknown device, 507 not recorded. */
int core_device_pause(const char *id, const json_t *body, json_t **ret_device, struct problem *p);
int core_device_resume(const char *id, json_t **ret_device, struct problem *p);

/* GET /metrics: Prometheus text; caller frees. */
char *core_metrics_text(size_t *ret_len);
/* Called by the HTTP layer once per finished request, for metrics. route is the route
 * pattern ("/v1/jobs/{id}"), never the raw path. */
void core_http_observe(const char *route, const char *method, int status);
