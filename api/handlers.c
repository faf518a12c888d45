/* One function per route: read the request, ask daemon/core.h, fill the reply. Handlers never
 * touch a socket, a device or the store; whatever the daemon says goes out as JSON, and
 * whatever it refuses goes out as problem+json. A read that may wait (?wait=) says so in the
 * reply; holding the connection is server_wait.c's business. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "http.h"
#include "jsonutil.h"
#include "text.h"

/* A benchmark's params schema: its name ("params_" and a catalog id), and its $ref. */
#define SCHEMA_NAME_MAX 96
#define SCHEMA_REF_MAX  128

unsigned api_wait_max_s = 60;

void handle_health(const struct api_request *req, struct api_reply *rep)
{
        json_t *body = NULL;
        int status = core_health(&body);

        if (status != 200 && status != 503) {
                json_decref(body);
                reply_errorf(rep, 500, NULL, "health check failed (%d)", status);
                return;
        }
        reply_json(rep, status, body);
}

void handle_devices(const struct api_request *req, struct api_reply *rep)
{
        reply_json(rep, 200, core_devices_json());
}

void handle_node(const struct api_request *req, struct api_reply *rep)
{
        json_t *node = core_node_json();

        if (!node) {
                reply_errorf(rep, 404, NULL,
                             "no node worker: it runs only on hosts with two GPUs or more");
                return;
        }
        reply_json(rep, 200, node);
}

void handle_version(const struct api_request *req, struct api_reply *rep)
{
        reply_json(rep, 200, core_version_json());
}

void handle_benchmarks(const struct api_request *req, struct api_reply *rep)
{
        reply_json(rep, 200, core_catalog_json());
}

/* The served document: the committed api/openapi.json, plus what the catalog generates (one
 * params schema a benchmark, and JobSpec's params tied to its benchmark), so the contract has
 * one source for each part: the file for routes and responses, the catalog for parameters. */
static char *openapi_doc;
static size_t openapi_len;
static pthread_once_t openapi_once = PTHREAD_ONCE_INIT;

static json_t *openapi_build(void)
{
        json_error_t err;
        json_t *doc = json_loadb(api_openapi_json, api_openapi_json_len, 0, &err);
        json_t *pairs = core_params_schemas(), *schemas, *spec, *names, *all_of, *pair;
        size_t i;

        schemas = json_object_get(json_object_get(doc, "components"), "schemas");
        spec = json_object_get(schemas, "JobSpec");
        names = json_array();
        all_of = json_array();
        if (!spec || !pairs || !names || !all_of)
                goto fail;
        json_array_foreach(pairs, i, pair)
        {
                const char *name = json_string_value(json_array_get(pair, 0));
                char key[SCHEMA_NAME_MAX], ref[SCHEMA_REF_MAX];

                snprintf(key, sizeof(key), "params_%s", name);
                snprintf(ref, sizeof(ref), "#/components/schemas/%s", key);
                json_object_set(schemas, key, json_array_get(pair, 1));
                json_array_append_new(names, json_string(name));
                json_array_append_new(all_of, json_pack("{s:{s:{s:{s:s}}, s:[s]}, s:{s:{s:{s:s}}}}",
                                                        "if", "properties", "benchmark", "const",
                                                        name, "required", "benchmark", "then",
                                                        "properties", "params", "$ref", ref));
        }
        json_object_set_new(json_object_get(json_object_get(spec, "properties"), "benchmark"),
                            "enum", names);
        json_object_set_new(spec, "allOf", all_of);
        json_decref(pairs);
        return doc;
fail:
        json_decref(names);
        json_decref(all_of);
        json_decref(pairs);
        json_decref(doc);
        return NULL;
}

static void openapi_init(void)
{
        json_t *doc = openapi_build();

        if (doc)
                openapi_doc = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (openapi_doc)
                openapi_len = strlen(openapi_doc);
        json_decref(doc);
}

const char *api_openapi_document(size_t *ret_len)
{
        pthread_once(&openapi_once, openapi_init);
        if (ret_len)
                *ret_len = openapi_len;
        return openapi_doc;
}

void handle_openapi(const struct api_request *req, struct api_reply *rep)
{
        size_t len = 0;
        const char *doc = api_openapi_document(&len);

        if (!doc) {
                reply_errorf(rep, 500, NULL, "the OpenAPI document could not be built");
                return;
        }
        reply_static(rep, 200, "application/json", doc, len);
}

void handle_metrics(const struct api_request *req, struct api_reply *rep)
{
        size_t len = 0;
        char *text = core_metrics_text(&len);

        if (!text) {
                reply_errorf(rep, 500, NULL, "metrics unavailable");
                return;
        }
        reply_text(rep, 200, "text/plain; version=0.0.4", text, len);
}

void handle_dashboard(const struct api_request *req, struct api_reply *rep)
{
        reply_static(rep, 200, "text/html; charset=utf-8", api_dashboard_html,
                     api_dashboard_html_len);
}

/* Location of a job the core returned; "" when it has no string id (then no header). */
static void set_location(struct api_reply *rep, const char *id)
{
        if (id && strlen(id) < sizeof(rep->location) - sizeof("/v1/jobs/"))
                snprintf(rep->location, sizeof(rep->location), "/v1/jobs/%s", id);
}

/* The answer to a submit: r and sub as core_job_submit or core_job_submit_end left them. */
static void submitted_reply(struct api_reply *rep, int r, struct core_submitted *sub,
                            const struct problem *p)
{
        if (r < 0) {
                reply_problem(rep, p);
                return;
        }
        /* 0: a new job, accepted for running later; 1: the job this key already made. */
        set_location(rep, sub->id);
        if (sub->body) {
                reply_json_bytes(rep, r == 0 ? 202 : 200, sub->body, sub->body_len);
                sub->body = NULL; /* the reply's */
        } else {
                reply_json(rep, r == 0 ? 202 : 200, sub->job);
                sub->job = NULL; /* likewise */
        }
        core_submitted_done(sub);
}

void handle_job_submit(const struct api_request *req, struct api_reply *rep)
{
        struct problem p = {0};
        struct core_submitted sub = {.bytes_ok = true, .may_wait = true};
        json_t *body = NULL;
        int r;

        if (request_check_idempotency_key(req->idempotency_key, &p) < 0 ||
            request_parse_json_object(req->body, req->body_len, &body, &p) < 0) {
                reply_problem(rep, &p);
                return;
        }
        r = core_job_submit(body, req->idempotency_key, req->client, &sub, &p);
        json_decref(body);
        if (r == 2) {
                rep->submit_wait = sub.wait;
                return;
        }
        submitted_reply(rep, r, &sub, &p);
}

void handle_job_submit_end(struct job_submit_wait *w, struct api_reply *rep)
{
        struct problem p = {0};
        struct core_submitted sub = {.bytes_ok = true};
        int r = core_job_submit_end(w, &sub, &p);

        submitted_reply(rep, r, &sub, &p);
}

static const char *arg_value(const struct api_request *req, const char *key)
{
        for (size_t i = 0; i < req->n_args; i++)
                if (strcmp(req->args[i].key, key) == 0)
                        return req->args[i].value;
        return NULL;
}

/* ?wait= in milliseconds (0: absent), or -1 with the reply filled. */
static int64_t wait_arg(const struct api_request *req, struct api_reply *rep)
{
        const char *v = arg_value(req, "wait");
        struct problem p = {0};
        uint64_t ms = 0;

        if (!v)
                return 0;
        if (request_parse_wait(v, api_wait_max_s, &ms, &p) < 0) {
                reply_problem(rep, &p);
                return -1;
        }
        return (int64_t)ms;
}

void handle_job_list(const struct api_request *req, struct api_reply *rep)
{
        struct job_list_query q = {0};
        struct job_filter f;
        struct problem p = {0};
        struct job_rows rows = {0};
        char *body = NULL, *next = NULL;
        size_t len = 0;
        uint64_t gen = core_jobs_generation();
        int64_t wait_ms = wait_arg(req, rep);

        if (wait_ms < 0)
                return;
        for (size_t i = 0; i < req->n_args; i++)
                if (strcmp(req->args[i].key, "wait") != 0 &&
                    job_list_query_set(&q, req->args[i].key, req->args[i].value, &p) < 0) {
                        reply_problem(rep, &p);
                        return;
                }
        /* "Anything newer than" needs a cursor to be newer than. */
        if (wait_ms > 0 && !q.after) {
                reply_errorf(rep, 400, "wait",
                             "a list waits for jobs newer than a cursor: give after=ID with wait");
                return;
        }
        if (job_list_query_parse(&q, &f, &p) < 0 || core_job_list(&f, &rows, &p) < 0) {
                reply_problem(rep, &p);
                return;
        }
        int r = job_list_page(&q, &rows, &body, &len, &next);
        free(rows.rows);
        if (r < 0) {
                problem_set(&p, 500, NULL, "out of memory building the page");
                reply_problem(rep, &p);
                return;
        }
        reply_text(rep, 200, "application/json", body, len);
        if (next && asprintf(&rep->link, "<%s>; rel=\"next\"", next) < 0)
                rep->link = NULL;
        free(next);
        if (wait_ms > 0 && rows.count == 0) {
                rep->wait_ms = (uint64_t)wait_ms;
                rep->wait_gen = gen;
                rep->wait_id[0] = '\0';
        }
}

/* ?format=text, or an Accept that names text/plain before (or without) JSON. */
static bool wants_text(const struct api_request *req)
{
        const char *f = arg_value(req, "format");

        if (f)
                return strcmp(f, "text") == 0;
        if (!req->accept)
                return false;
        const char *t = strstr(req->accept, "text/plain");
        const char *j = strstr(req->accept, "application/json");
        return t && (!j || t < j);
}

/* Whether an If-None-Match list names etag (weak comparison, RFC 9110 13.1.2) or is "*". */
static bool etag_matches(const char *if_none_match, const char *etag)
{
        const char *s = if_none_match;

        if (!s)
                return false;
        for (;;) {
                size_t n;

                s += strspn(s, " \t,");
                if (!*s)
                        return false;
                if (*s == '*')
                        return true;
                if (strncmp(s, "W/", 2) == 0)
                        s += 2;
                n = strcspn(s, ",");
                while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
                        n--;
                if (n == strlen(etag) && strncmp(s, etag, n) == 0)
                        return true;
                s += strcspn(s, ",");
        }
}

/* A final job's reply: its ETag, and 304 when the client holds it already. */
static void reply_final(const struct api_request *req, struct api_reply *rep)
{
        char etag[BLOB_ETAG_MAX];

        /* A finished job never changes, so its bytes name it; text and JSON differ in bytes
         * and so in tag. A stored document's tag was computed when it entered memory. */
        if (rep->blob)
                memcpy(etag, rep->blob->etag, sizeof(etag));
        else
                blob_etag(rep->body, rep->body_len, etag);
        if (etag_matches(req->if_none_match, etag))
                reply_static(rep, 304, NULL, "", 0);
        snprintf(rep->etag, sizeof(rep->etag), "%s", etag);
}

void handle_job_get(const struct api_request *req, struct api_reply *rep)
{
        struct problem p = {0};
        json_t *job = NULL;
        uint64_t gen = core_jobs_generation();
        int64_t wait_ms = wait_arg(req, rep);
        bool final;
        int r;

        if (wait_ms < 0)
                return;
        /* A finished job as stored: the bytes go out as they are, parsed by no one. */
        if (!wants_text(req)) {
                struct blob *body = NULL;

                r = core_job_get_finished(req->id, &body, &p);
                if (r < 0) {
                        reply_problem(rep, &p);
                        return;
                }
                if (r == 0) {
                        reply_blob(rep, 200, "application/json", body);
                        reply_final(req, rep);
                        return;
                }
        }
        if (core_job_get(req->id, &job, &p) < 0) {
                reply_problem(rep, &p);
                return;
        }
        final = core_job_state_final(json_string_value(json_object_get(job, "state")));
        if (wants_text(req)) {
                char *text = text_render_job(job);
                json_decref(job);
                if (!text) {
                        reply_errorf(rep, 500, NULL, "out of memory");
                        return;
                }
                reply_text(rep, 200, "text/plain; charset=utf-8", text, strlen(text));
        } else {
                reply_json(rep, 200, job);
        }
        if (rep->status != 200)
                return;
        if (!final) {
                if (wait_ms > 0) {
                        rep->wait_ms = (uint64_t)wait_ms;
                        rep->wait_gen = gen;
                        snprintf(rep->wait_id, sizeof(rep->wait_id), "%s", req->id);
                }
                return;
        }
        reply_final(req, rep);
}

void handle_job_cancel(const struct api_request *req, struct api_reply *rep)
{
        struct problem p = {0};
        json_t *job = NULL;

        if (core_job_cancel(req->id, req->client, req->admin, &job, &p) < 0) {
                reply_problem(rep, &p);
                return;
        }
        reply_json(rep, 200, job);
}

void handle_device_pause(const struct api_request *req, struct api_reply *rep)
{
        struct problem p = {0};
        json_t *body = NULL, *dev = NULL;

        if (req->body_len > 0 &&
            request_parse_json_object(req->body, req->body_len, &body, &p) < 0) {
                reply_problem(rep, &p);
                return;
        }
        if (core_device_pause(req->id, body, &dev, &p) < 0) {
                json_decref(body);
                reply_problem(rep, &p);
                return;
        }
        json_decref(body);
        reply_json(rep, 200, dev);
}

void handle_device_resume(const struct api_request *req, struct api_reply *rep)
{
        struct problem p = {0};
        json_t *dev = NULL;

        if (core_device_resume(req->id, &dev, &p) < 0) {
                reply_problem(rep, &p);
                return;
        }
        reply_json(rep, 200, dev);
}
