/* One function per route: read the request, ask daemon/core.h, fill the reply. Handlers never
 * touch a socket, a device or the store; whatever the daemon says goes out as JSON, and
 * whatever it refuses goes out as problem+json. */
#include <stdio.h>
#include <string.h>

#include "http.h"
#include "text.h"

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

void handle_version(const struct api_request *req, struct api_reply *rep)
{
        reply_json(rep, 200, core_version_json());
}

void handle_benchmarks(const struct api_request *req, struct api_reply *rep)
{
        reply_json(rep, 200, core_catalog_json());
}

void handle_openapi(const struct api_request *req, struct api_reply *rep)
{
        reply_static(rep, 200, "application/json", api_openapi_json, api_openapi_json_len);
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
static void set_location(struct api_reply *rep, const json_t *job)
{
        const char *id = json_string_value(json_object_get(job, "id"));

        if (id && strlen(id) < sizeof(rep->location) - sizeof("/v1/jobs/"))
                snprintf(rep->location, sizeof(rep->location), "/v1/jobs/%s", id);
}

void handle_job_submit(const struct api_request *req, struct api_reply *rep)
{
        struct problem p = {0};
        json_t *body = NULL, *job = NULL;
        int r;

        if (request_check_idempotency_key(req->idempotency_key, &p) < 0 ||
            request_parse_json_object(req->body, req->body_len, &body, &p) < 0) {
                reply_problem(rep, &p);
                return;
        }
        r = core_job_submit(body, req->idempotency_key, req->client, &job, &p);
        json_decref(body);
        if (r < 0) {
                reply_problem(rep, &p);
                return;
        }
        /* 0: a new job, accepted for running later; 1: the job this key already made. */
        set_location(rep, job);
        reply_json(rep, r == 0 ? 202 : 200, job);
}

void handle_job_list(const struct api_request *req, struct api_reply *rep)
{
        struct job_filter f = {0};
        struct problem p = {0};
        json_t *page = NULL;

        for (size_t i = 0; i < req->n_args; i++)
                if (job_filter_set(&f, req->args[i].key, req->args[i].value, &p) < 0) {
                        reply_problem(rep, &p);
                        return;
                }
        if (core_job_list(&f, &page, &p) < 0) {
                reply_problem(rep, &p);
                return;
        }
        reply_json(rep, 200, page);
}

/* ?format=text, or an Accept that names text/plain before (or without) JSON. */
static bool wants_text(const struct api_request *req)
{
        for (size_t i = 0; i < req->n_args; i++)
                if (strcmp(req->args[i].key, "format") == 0)
                        return strcmp(req->args[i].value, "text") == 0;
        if (!req->accept)
                return false;
        const char *t = strstr(req->accept, "text/plain");
        const char *j = strstr(req->accept, "application/json");
        return t && (!j || t < j);
}

void handle_job_get(const struct api_request *req, struct api_reply *rep)
{
        struct problem p = {0};
        json_t *job = NULL;

        if (core_job_get(req->id, &job, &p) < 0) {
                reply_problem(rep, &p);
                return;
        }
        if (wants_text(req)) {
                char *text = text_render_job(job);
                json_decref(job);
                if (!text) {
                        reply_errorf(rep, 500, NULL, "out of memory");
                        return;
                }
                reply_text(rep, 200, "text/plain; charset=utf-8", text, strlen(text));
                return;
        }
        reply_json(rep, 200, job);
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
