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
#include "problem.h"
#include "uuid.h"

/* GET /v1/jobs's filters, typed: api/request.c parses and checks the query string into one
 * (job_list_query_parse), so the daemon sees only valid values. */
struct job_filter {
        int state;             /* enum job_state (job_state.h); -1: any */
        const char *benchmark; /* a catalog name; NULL: any */
        ssize_t device;        /* a device index (core_device_index); -1: any */
        const char *label_key; /* with label_value: jobs labelled key:value; NULL: any */
        size_t label_key_len;  /* label_key is not NUL-terminated at this length */
        const char *label_value;
        const char *before; /* a job id (valid): older than this; NULL: none */
        const char *after;  /* a job id (valid): newer than this; NULL: none */
        uint64_t since_ms;  /* created at or after (Unix ms); 0: none */
        uint64_t until_ms;  /* created before; 0: none */
        unsigned limit;     /* rows on a page, 1 to core_list_limit_max() */
        bool with_results;  /* full documents, bounded by list_results_max_bytes */
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

/* A submitted job as the answer shows it: its public document (job), or, where the caller
 * allows it (bytes_ok) and the store's write of the new job is exactly what the answer shows,
 * that write's bytes (body): what json_dump_compact(job) would give, without making job or
 * dumping it (a third of a submit's JSON work). */
struct job_submit_wait;
struct core_submitted {
        bool bytes_ok; /* in: body may come instead of job */
        /* in: the caller can wait for the commit without a thread (core_job_submit returns 2) */
        bool may_wait;
        json_t *job;                  /* out: or NULL when body is set */
        struct job_submit_wait *wait; /* out: when 2 is returned, for core_job_submit_end */
        char *body;                   /* out: malloc'd, body_len bytes and a NUL */
        size_t body_len;
        char id[JOB_ID_MAX]; /* out: the job's id, either way */
};
/* Frees what ret holds (job, body); bytes_ok kept. */
static inline void core_submitted_done(struct core_submitted *ret)
{
        json_decref(ret->job);
        ret->job = NULL;
        free(ret->body);
        ret->body = NULL;
        ret->body_len = 0;
}

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
/* Called (with the daemon's lock held: it must not call back into core) after the generation
 * moved, with the job's id. One listener; NULL removes it. */
typedef void (*core_job_listener)(const char *id, void *userdata);
void core_set_job_listener(core_job_listener fn, void *userdata);
/* GET /v1/jobs: one page of rows, newest first. api/ frames it as {"jobs": rows, "next": link}
 * and builds the link from the query it was given and the cursor. */
struct job_rows {
        char *rows; /* the page's jobs as a JSON array's text, malloc'd */
        size_t len;
        size_t count;          /* jobs in rows */
        bool more;             /* another page follows: its cursor is last */
        char last[JOB_ID_MAX]; /* the id of the page's last (oldest) job */
};
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
