/* The route table and the dispatch from (method, path) to a handler: 404 for paths no route
 * matches, 405 with Allow for methods a route does not take. Owns no state; the table below
 * is the single list of what umd serves (the OpenAPI test checks it against openapi.json). */
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#include "http.h"
#include "util.h"

static const char *const job_list_args[] = {"status", "benchmark", "device", "label",
                                            "before", "after",     "since",  "until",
                                            "limit",  "include",   "wait",   NULL};
static const char *const job_get_args[] = {"format", "wait", NULL};

static const struct route routes[] = {
    /* The page is static and holds no data (it fetches the API with the user's token), so a
     * browser can load it even with auth_reads on. */
    {"/", {{HTTP_GET, handle_dashboard, ROLE_NONE, false}}, 1},
    {"/metrics", {{HTTP_GET, handle_metrics, ROLE_READ, false}}, 1},
    /* Health and metrics are reads like any other: with auth_reads they need a token too, and
     * an operator who wants them open leaves auth_reads off. */
    {"/v1/health", {{HTTP_GET, handle_health, ROLE_READ, false}}, 1},
    {"/v1/devices", {{HTTP_GET, handle_devices, ROLE_READ, false}}, 1},
    /* The node worker, beside the GPUs: its state, warmth, crashes and the GPU pairs' verdict. */
    {"/v1/devices/node", {{HTTP_GET, handle_node, ROLE_READ, false}}, 1},
    /* The scheduler's prolog and epilog: keep umd off a GPU while a job owns it. The body
     * ({"reason": "..."}) is optional, so a bare curl -X POST works. */
    {"/v1/devices/{id}/pause", {{HTTP_POST, handle_device_pause, ROLE_ADMIN, false}}, 1},
    {"/v1/devices/{id}/resume", {{HTTP_POST, handle_device_resume, ROLE_ADMIN, false}}, 1},
    {"/v1/version", {{HTTP_GET, handle_version, ROLE_READ, false}}, 1},
    {"/v1/benchmarks", {{HTTP_GET, handle_benchmarks, ROLE_READ, false}}, 1},
    {"/v1/openapi.json", {{HTTP_GET, handle_openapi, ROLE_NONE, false}}, 1},
    {"/v1/jobs",
     {{HTTP_GET, handle_job_list, ROLE_READ, false, job_list_args},
      {HTTP_POST, handle_job_submit, ROLE_SUBMIT, true}},
     2},
    {"/v1/jobs/{id}",
     {{HTTP_GET, handle_job_get, ROLE_READ, false, job_get_args},
      {HTTP_DELETE, handle_job_cancel, ROLE_SUBMIT, false}},
     2},
};

enum http_method http_method_from_string(const char *s)
{
        if (!s)
                return HTTP_OTHER;
        /* Methods are case-sensitive (RFC 9110 9.1). */
        if (strcmp(s, "GET") == 0)
                return HTTP_GET;
        if (strcmp(s, "HEAD") == 0)
                return HTTP_HEAD;
        if (strcmp(s, "POST") == 0)
                return HTTP_POST;
        if (strcmp(s, "DELETE") == 0)
                return HTTP_DELETE;
        return HTTP_OTHER;
}

const char *http_method_name(enum http_method m)
{
        switch (m) {
        case HTTP_GET:
                return "GET";
        case HTTP_HEAD:
                return "HEAD";
        case HTTP_POST:
                return "POST";
        case HTTP_DELETE:
                return "DELETE";
        default:
                return "OTHER";
        }
}

const struct route *router_table(size_t *ret_n)
{
        *ret_n = ELEMENTSOF(routes);
        return routes;
}

/* Literal segments compare exactly; "{id}" takes one non-empty segment. */
static bool pattern_match(const char *pattern, const char *path, size_t *ret_off, size_t *ret_len)
{
        const char *p = pattern, *s = path;
        size_t off = 0, len = 0;

        while (*p) {
                /* The first byte first: this runs for every byte of every pattern tried. */
                if (*p == '{' && strncmp(p, "{id}", 4) == 0) {
                        size_t n = strcspn(s, "/");
                        if (n == 0)
                                return false;
                        off = (size_t)(s - path);
                        len = n;
                        s += n;
                        p += 4;
                        continue;
                }
                if (*p != *s)
                        return false;
                p++;
                s++;
        }
        if (*s != '\0')
                return false;
        *ret_off = off;
        *ret_len = len;
        return true;
}

const struct route *router_match(const char *path, size_t *ret_id_off, size_t *ret_id_len)
{
        if (!path)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(routes); i++) {
                size_t off, len;
                if (pattern_match(routes[i].pattern, path, &off, &len)) {
                        if (ret_id_off)
                                *ret_id_off = off;
                        if (ret_id_len)
                                *ret_id_len = len;
                        return &routes[i];
                }
        }
        return NULL;
}

const struct route_method *route_method_find(const struct route *r, enum http_method m)
{
        /* HEAD is GET without the body; libmicrohttpd drops the body itself. */
        if (m == HTTP_HEAD)
                m = HTTP_GET;
        for (size_t i = 0; i < r->n_methods; i++)
                if (r->methods[i].method == m)
                        return &r->methods[i];
        return NULL;
}

void route_allow_header(const struct route *r, char *buf, size_t len)
{
        size_t used = 0;

        if (len == 0)
                return;
        buf[0] = '\0';
        for (size_t i = 0; i < r->n_methods; i++) {
                const char *name = http_method_name(r->methods[i].method);
                int n = snprintf(buf + used, len - used, "%s%s%s", used ? ", " : "", name,
                                 r->methods[i].method == HTTP_GET ? ", HEAD" : "");
                if (n < 0 || (size_t)n >= len - used)
                        return;
                used += (size_t)n;
        }
}

const char *router_pattern_for(const char *path)
{
        const struct route *r = router_match(path, NULL, NULL);
        return r ? r->pattern : "other";
}

void api_dispatch(const struct api_request *req, struct api_reply *rep)
{
        size_t off = 0, len = 0;
        const struct route *r = router_match(req->path, &off, &len);
        const struct route_method *m;
        struct api_request routed;
        struct problem p = {0};
        _cleanup_free_ char *id = NULL;

        if (!r) {
                reply_errorf(rep, 404, NULL, "no resource at %s", req->path);
                return;
        }
        m = route_method_find(r, req->method);
        if (!m) {
                reply_errorf(rep, 405, NULL, "%s does not accept %s", r->pattern,
                             req->method == HTTP_OTHER ? "this method"
                                                       : http_method_name(req->method));
                route_allow_header(r, rep->allow, sizeof(rep->allow));
                return;
        }
        if (request_check_args(m, req->args, req->n_args, &p) < 0) {
                reply_problem(rep, &p);
                return;
        }
        routed = *req;
        if (len > 0) {
                id = strndup(req->path + off, len);
                if (!id) {
                        reply_errorf(rep, 500, NULL, "out of memory");
                        return;
                }
                routed.id = id;
        }
        m->handler(&routed, rep);
}
