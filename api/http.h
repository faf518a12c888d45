/* The request layer between libmicrohttpd (server_request.c) and the handlers: a request as the
 * handlers see it, the reply they fill, the route table, and the pure checks on headers,
 * query strings and bodies. Nothing here touches a socket, so all of it is unit-tested. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "uuid.h"

/* A reply's Location: "/v1/jobs/" and a job id, with room to spare. */
#define REPLY_LOCATION_MAX 128
/* A reply's Allow: the methods a route takes, comma-separated. */
#define REPLY_ALLOW_MAX 64
/* A reply's ETag: a quoted hash of the body. */
#define REPLY_ETAG_MAX 64
/* A Content-Length value as sent: up to 20 digits, with room for what a client adds. */
#define FRAMING_LENGTH_MAX 32

/* Nesting allowed in request bodies; deeper is a 400 before anything else looks at it. */
#define API_JSON_MAX_DEPTH      32
#define API_IDEMPOTENCY_KEY_MAX 128
#define API_MAX_QUERY_ARGS      32

enum http_method {
        HTTP_GET = 1u << 0,
        HTTP_HEAD = 1u << 1,
        HTTP_POST = 1u << 2,
        HTTP_DELETE = 1u << 3,
        HTTP_OTHER = 1u << 4, /* PUT, PATCH, anything else: never routed */
};

/* The least role a route needs once a tokens_file is set (server_request.c checks it; without one
 * every caller is let through). Ordered: a higher role may do what a lower one may. */
enum api_role {
        ROLE_NONE,
        ROLE_READ,
        ROLE_SUBMIT,
        ROLE_ADMIN,
};

struct query_arg {
        const char *key;
        const char *value; /* "" when the argument had no '=' */
};

struct api_request {
        enum http_method method;
        const char *path;
        const char *id; /* the {id} path segment, NULL when the route has none */
        const struct query_arg *args;
        size_t n_args;
        const char *idempotency_key; /* the header, NULL when absent */
        const char *accept;          /* the Accept header, NULL when absent */
        const char *if_none_match;   /* the If-None-Match header, NULL when absent */
        const char *body;            /* NULL when none was sent */
        size_t body_len;
        const char *client; /* token name, NULL for anonymous (the auth seam) */
        bool admin;
};

struct api_reply {
        int status;
        const char *content_type;
        char *body; /* malloc'd unless body_static or blob */
        size_t body_len;
        bool body_static;
        struct blob *blob; /* when set, body is blob->data and the reply holds this reference */
        char location[REPLY_LOCATION_MAX]; /* "" = no Location header */
        char allow[REPLY_ALLOW_MAX];       /* "" = no Allow header */
        unsigned retry_after_s;
        char etag[REPLY_ETAG_MAX]; /* "" = no ETag header; with the quotes */
        char *link;                /* malloc'd Link header value, NULL = none */
        /* A read asked to ?wait= for something not there yet: the server may hold the
         * connection up to wait_ms and ask again when a job changes (wait_id: only that job;
         * "" any), unless the jobs' generation moved past wait_gen already. The reply filled
         * beside it is what to answer when the wait is over. */
        uint64_t wait_ms;
        uint64_t wait_gen;
        char wait_id[JOB_ID_MAX];
        /* A submit whose answer waits for its commit (core_job_submit returned 2): nothing else
         * is filled. The server holds the connection, no thread held, until the commit is in,
         * then has handle_job_submit_end make the reply. */
        struct job_submit_wait *submit_wait;
};

typedef void (*api_handler)(const struct api_request *req, struct api_reply *rep);

struct route_method {
        enum http_method method;
        api_handler handler;
        enum api_role role;
        bool takes_body;         /* application/json body required */
        const char *const *args; /* the query arguments it takes, NULL-terminated; NULL: none */
};

struct route {
        const char *pattern; /* "/v1/jobs/{id}": one {id} segment at most */
        struct route_method methods[3];
        size_t n_methods;
};

/* router.c */
enum http_method http_method_from_string(const char *s);
const char *http_method_name(enum http_method m); /* "OTHER" for anything unknown */
const struct route *router_table(size_t *ret_n);
/* The route whose pattern matches path, with the {id} segment's span; NULL for none. */
const struct route *router_match(const char *path, size_t *ret_id_off, size_t *ret_id_len);
/* The entry for method on r (HEAD served as GET), or NULL. */
const struct route_method *route_method_find(const struct route *r, enum http_method m);
/* "GET, HEAD" style list of what r accepts. */
void route_allow_header(const struct route *r, char *buf, size_t len);
/* Route, check method, run the handler: every path ends with rep filled. */
void api_dispatch(const struct api_request *req, struct api_reply *rep);
/* The pattern to report to metrics: the route's, or "other" when nothing matched. */
const char *router_pattern_for(const char *path);

/* request.c: checks made before and while a request is read. 0, or -errno with p filled. */
int request_check_content_type(const char *content_type, struct problem *p);
int request_check_content_length(const char *content_length, uint64_t max_body, struct problem *p);
int request_check_idempotency_key(const char *key, struct problem *p);
/* The message framing a request's header fields give (RFC 9112 section 6), gathered one field
 * at a time with request_framing_add and judged once with request_framing_check: 400 for a
 * Content-Length beside a Transfer-Encoding, two Content-Lengths that differ, a
 * Transfer-Encoding other than one "chunked" (what libmicrohttpd reads as chunked), or a field
 * name with white space in it. Such a request's end cannot be known the way every party on
 * the path reads it, so the connection must be closed after the answer. */
struct request_framing {
        unsigned n_content_length;
        unsigned n_transfer_encoding;
        bool content_length_differs;
        bool transfer_encoding_odd;
        bool name_has_space;
        char content_length[FRAMING_LENGTH_MAX]; /* the first value, to compare the others with */
};
void request_framing_add(struct request_framing *f, const char *key, const char *value);
int request_framing_check(const struct request_framing *f, struct problem *p);
/* The path of a request target: an origin-form target ("/v1/jobs") as it is, an absolute-form
 * one ("http://host:8470/v1/jobs", RFC 9112 section 3.2.2) from the first slash after its
 * authority, or "/" when it has none. The result points into target or is a literal. */
const char *request_target_path(const char *target);
/* GET /v1/jobs's query arguments as given: what job_list_query_parse checks, and what the next
 * page's link repeats (list.c), byte for byte. NULL: not given. */
struct job_list_query {
        const char *status;
        const char *benchmark;
        const char *device; /* index or uuid */
        const char *label;  /* "k:v" */
        const char *before; /* job id cursor: older than this */
        const char *after;  /* job id cursor: newer than this */
        const char *include;
        const char *since; /* RFC 3339 or Unix ms */
        const char *until;
        const char *limit;
};
/* One query argument into q: 400 when it is unknown or given twice. */
int job_list_query_set(struct job_list_query *q, const char *key, const char *value,
                       struct problem *p);
/* q checked and typed into *ret (core.h's struct job_filter; it points into q's strings): 0, or
 * 400 naming the first bad argument (*ret untouched). Asks the daemon only which device a
 * device argument names (core_device_index) and the limit's maximum. */
int job_list_query_parse(const struct job_list_query *q, struct job_filter *ret, struct problem *p);
/* list.c: the page GET /v1/jobs answers, {"jobs":rows,"next":link|null}, and its link, as
 * malloc'd text. *ret_next is the next page's path (q repeated, before=rows->last) or NULL on
 * the last page. 0, or -ENOMEM with nothing allocated. */
int job_list_page(const struct job_list_query *q, const struct job_rows *rows, char **ret_body,
                  size_t *ret_len, char **ret_next);
/* 0 when every argument is one the route method takes, once; else 400 naming the first that
 * is not. */
int request_check_args(const struct route_method *m, const struct query_arg *args, size_t n,
                       struct problem *p);
/* ?wait=: "30s", "500ms", "2m" or bare seconds, cut to max_s seconds. 0 or 400. */
int request_parse_wait(const char *v, unsigned max_s, uint64_t *ret_ms, struct problem *p);
/* Decode %XX in place, except %00, which is kept as the three characters (so nothing after it
 * is silently dropped). Returns the new length. libmicrohttpd calls it for paths and query
 * arguments. */
size_t url_unescape(char *s);
/* Parse a request body; 0 with *ret an object, or 400 with the parser's line/column. */
int request_parse_json_object(const char *body, size_t len, json_t **ret, struct problem *p);

/* reply.c: fill rep. The reply owns what it points to; reply_done frees it. */
void reply_json(struct api_reply *rep, int status, json_t *j); /* steals j; NULL = 500 */
/* A JSON document already dumped as reply_json would dump it (malloc'd, stolen). */
void reply_json_bytes(struct api_reply *rep, int status, char *body, size_t len);
void reply_static(struct api_reply *rep, int status, const char *content_type, const char *body,
                  size_t len);
void reply_text(struct api_reply *rep, int status, const char *content_type, char *body,
                size_t len);
/* Serve b's bytes (taking over the caller's reference to b). */
void reply_blob(struct api_reply *rep, int status, const char *content_type,
                struct blob *b); /* steals body */
void reply_problem(struct api_reply *rep, const struct problem *p);
void reply_errorf(struct api_reply *rep, int status, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void reply_done(struct api_reply *rep); /* the body only */
void reply_free(struct api_reply *rep); /* the body and the Link header */

/* handlers.c. api_wait_max_s: wait_max_s, set by server.c at start (the handlers read no
 * configuration of their own). */
extern unsigned api_wait_max_s;
void handle_health(const struct api_request *req, struct api_reply *rep);
void handle_devices(const struct api_request *req, struct api_reply *rep);
void handle_node(const struct api_request *req, struct api_reply *rep);
void handle_version(const struct api_request *req, struct api_reply *rep);
void handle_benchmarks(const struct api_request *req, struct api_reply *rep);
void handle_openapi(const struct api_request *req, struct api_reply *rep);
void handle_metrics(const struct api_request *req, struct api_reply *rep);
void handle_dashboard(const struct api_request *req, struct api_reply *rep);
void handle_job_submit(const struct api_request *req, struct api_reply *rep);
/* The reply to a submit that waited for its commit (api_reply.submit_wait); frees w. */
void handle_job_submit_end(struct job_submit_wait *w, struct api_reply *rep);
void handle_job_list(const struct api_request *req, struct api_reply *rep);
void handle_job_get(const struct api_request *req, struct api_reply *rep);
void handle_job_cancel(const struct api_request *req, struct api_reply *rep);
void handle_device_pause(const struct api_request *req, struct api_reply *rep);
void handle_device_resume(const struct api_request *req, struct api_reply *rep);

/* Generated at build time from api/openapi.json and api/dashboard.html (embed.py). */
extern const char api_openapi_json[];
extern const size_t api_openapi_json_len;
extern const char api_dashboard_html[];
extern const size_t api_dashboard_html_len;
