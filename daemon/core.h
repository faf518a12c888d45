/* What the HTTP layer may ask of the daemon. api/ calls only these (and never CUDA); each
 * returns JSON the handler serialises, or fills a problem the handler turns into
 * application/problem+json. Thread-safe: handlers run on libmicrohttpd's thread while the
 * supervisor runs on its own. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>

#include "blob.h"
#include "job_types.h"
#include "problem.h"
#include "uuid.h"

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

/* POST /v1/jobs. 0 with ret filled (new, 202) or 1 (idempotent replay, 200: always a job);
 * negative with p filled and ret's outputs untouched otherwise (400, 409, 429, 503). client: the
 * token name or NULL. With ret->may_wait, 2 with only ret->wait set where the answer waits for
 * the submission's commit: hand it to core_job_submit_end, which answers as this would have. */
int core_job_submit(const json_t *body, const char *idempotency_key, const char *client,
                    struct core_submitted *ret, struct problem *p);
/* 1 when w's commit is in already; 0 when ready(arg) will be called once, from another thread,
 * when it is (it must be quick: it runs with the store's lock held). Either way w stays the
 * caller's, for core_job_submit_end. */
int core_job_submit_when_done(struct job_submit_wait *w, void (*ready)(void *arg), void *arg);
/* The rest of a submit that returned 2 (the commit waited for here if it is not in yet): returns
 * and fills ret and p as core_job_submit would have (0 or negative; 507 when the commit failed).
 * Frees w. Every w must end here, answered or not: the job starts only once it has. */
int core_job_submit_end(struct job_submit_wait *w, struct core_submitted *ret, struct problem *p);
/* GET /v1/jobs/{id} */
int core_job_get(const char *id, json_t **ret_job, struct problem *p);
/* GET /v1/jobs/{id} of a finished job, fast: 0 with a reference to the served bytes and their
 * ETag (drop it with blob_unref), 1 when the job is still in memory (ask core_job_get),
 * negative with p filled (400, 404, 500). */
int core_job_get_finished(const char *id, struct blob **ret_body, struct problem *p);
/* Whether a job state name is final (succeeded, failed, cancelled, timed_out, interrupted). */
bool core_job_state_final(const char *state);
/* A counter that moves whenever a job is submitted or changes state. Read it before reading
 * a job: if it has moved since, what was read may be stale. */
uint64_t core_jobs_generation(void);
/* One listener (job_types.h); NULL removes it. */
void core_set_job_listener(core_job_listener fn, void *userdata);
/* 0 with *ret filled, or 500 with p filled (the store cannot be read). */
int core_job_list(const struct job_filter *f, struct job_rows *ret, struct problem *p);
/* The largest limit a list takes (list_limit_max). */
unsigned core_list_limit_max(void);
/* The index of the device named id (an index or a uuid): 0 with *ret_index, -ENODEV when no
 * device has that name. */
int core_device_index(const char *id, size_t *ret_index);
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
