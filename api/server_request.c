/* libmicrohttpd's request callbacks: check each request's framing, route and bearer token on
 * its headers, read its body across callbacks up to max_body_bytes, hand it whole to the router
 * and turn the handler's reply into a response (or park a ?wait= read with server_wait.c), and
 * report each finished request to the daemon's metrics. It never interprets a request itself:
 * that is router.c and handlers.c. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "api.h"
#include "auth.h"
#include "config.h"
#include "http.h"
#include "log.h"
#include "server_internal.h"
#include "util.h"

/* One libmicrohttpd message, cut: its messages are a line each. */
#define MHD_MESSAGE_MAX 512
/* Retry-After's seconds, as a header value. */
#define RETRY_AFTER_MAX 16

/* How often a ?wait= read asks again when a job changed between its read and its suspend. */
#define WAIT_ROUNDS_MAX 4

/* libmicrohttpd reports client misbehaviour through this logger too; only start-up problems
 * are worth more than a debug line (cls: the server, whose mhd_log_level says which). */
void server_mhd_logger(void *cls, const char *fmt, va_list ap)
{
        struct api_server *s = cls;
        char buf[MHD_MESSAGE_MAX];
        size_t n;

        vsnprintf(buf, sizeof(buf), fmt, ap);
        n = strlen(buf);
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
                buf[--n] = '\0';
        log_msg(atomic_load(&s->mhd_log_level), "http: %s", buf);
}

/* ---- replies ---- */

/* libmicrohttpd's free callback for a body that is a blob: the response's reference goes. */
static void blob_release(void *cls)
{
        blob_unref(cls);
}

static enum MHD_Result queue_reply(struct MHD_Connection *c, struct request_ctx *r,
                                   struct api_reply *rep)
{
        struct MHD_Response *resp;
        enum MHD_Result ok;
        char retry[RETRY_AFTER_MAX] = "";

        if (rep->retry_after_s > 0)
                snprintf(retry, sizeof(retry), "%u", rep->retry_after_s);
        if (rep->blob)
                resp = MHD_create_response_from_buffer_with_free_callback_cls(
                    rep->body_len, rep->body, blob_release, rep->blob);
        else if (rep->body_static)
                resp = MHD_create_response_from_buffer(rep->body_len, rep->body,
                                                       MHD_RESPMEM_PERSISTENT);
        else
                resp = MHD_create_response_from_buffer_with_free_callback(rep->body_len, rep->body,
                                                                          free);
        if (!resp) {
                reply_free(rep);
                return MHD_NO;
        }
        /* The response owns the body (or the blob's reference) now. */
        rep->blob = NULL;
        rep->body = NULL;
        rep->body_len = 0;

        if ((rep->content_type && MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                                          rep->content_type) == MHD_NO) ||
            (rep->location[0] &&
             MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, rep->location) == MHD_NO) ||
            (rep->allow[0] &&
             MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, rep->allow) == MHD_NO) ||
            (retry[0] &&
             MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, retry) == MHD_NO) ||
            (r->www_authenticate && MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                                            r->www_authenticate) == MHD_NO) ||
            (rep->etag[0] &&
             MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, rep->etag) == MHD_NO) ||
            (rep->link && MHD_add_response_header(resp, "Link", rep->link) == MHD_NO) ||
            (r->close &&
             MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close") == MHD_NO)) {
                reply_free(rep);
                MHD_destroy_response(resp);
                return MHD_NO;
        }
        reply_free(rep);
        ok = MHD_queue_response(c, (unsigned)rep->status, resp);
        MHD_destroy_response(resp);
        if (ok == MHD_YES) {
                r->replied = true;
                r->status = rep->status;
        }
        return ok;
}

static enum MHD_Result queue_problem(struct MHD_Connection *c, struct request_ctx *r,
                                     const struct problem *p)
{
        struct api_reply rep = {0};

        reply_problem(&rep, p);
        return queue_reply(c, r, &rep);
}

/* ---- the access handler ---- */

struct header_walk {
        const char *value;      /* the header whose line we want the end of */
        const char *prev_value; /* the value of the header before it, if any */
        const char *next_key;   /* the key of the header after it, if any */
        const char *last_value;
        bool found, done;
};

static enum MHD_Result walk_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
        struct header_walk *w = cls;

        if (w->found) {
                w->next_key = key;
                w->done = true;
                return MHD_NO;
        }
        w->found = value == w->value;
        if (w->found)
                w->prev_value = w->last_value;
        w->last_value = value;
        return MHD_YES;
}

/* Whether the client sent more of a header's line than its value. libmicrohttpd 0.9.75
 * measures header values with strlen(), so "Bearer TOKEN\0junk" arrives as "Bearer TOKEN"
 * whatever API reads it. It keeps the headers in its read buffer in the order they came, each
 * line end (CR LF or LF) overwritten with NULs: a header's line ends exactly where the next
 * header's key starts, 1 or 2 bytes after its value; the last header's value is followed by
 * its line end and the blank line's, 4 NULs with CR LF. Anything else means bytes the string
 * hid. (The last header with 4 or more NULs and then junk cannot be told from one followed by
 * a body; every other form is caught.) */
static bool header_hides_bytes(struct MHD_Connection *c, const char *value, size_t len)
{
        struct header_walk w = {.value = value};
        bool crlf = true;

        MHD_get_connection_values(c, MHD_HEADER_KIND, walk_header, &w);
        if (!w.found)
                return true;
        if (w.done)
                return w.next_key != value + len + 1 && w.next_key != value + len + 2;
        /* The client's line ends, from the header before: "value\0\0Key" is CR LF. */
        if (w.prev_value) {
                const char *p = w.prev_value + strlen(w.prev_value);
                crlf = p[1] == '\0';
        }
        if (value[len + 1] != '\0')
                return true;
        return crlf && (value[len + 2] != '\0' || value[len + 3] != '\0');
}

/* Resolve the caller from its bearer token and check the route's role. Without a tokens file
 * there is no one to refuse, so every caller is an anonymous administrator. Reads need a token
 * only with auth_reads. Who owns a job is the core's question: cancelling is let through here
 * with the caller's name and whether it is admin. */
static int request_authorize(struct MHD_Connection *c, struct request_ctx *r,
                             const struct route_method *m, struct problem *p)
{
        const struct api_server *s = r->srv;
        enum api_role need = m->role, role = ROLE_NONE;
        const char *name = NULL, *hv = NULL;
        size_t hv_len = 0;
        int k;

        r->client = NULL;
        r->admin = !s->tokens;
        if (!s->tokens)
                return 0;
        if (need == ROLE_READ && !s->cfg->auth_reads)
                need = ROLE_NONE;
        if (need == ROLE_NONE)
                return 0;
        /* By length, not as a C string: a NUL in the header must not hide what follows it. */
        if (MHD_lookup_connection_value_n(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION,
                                          strlen(MHD_HTTP_HEADER_AUTHORIZATION), &hv,
                                          &hv_len) != MHD_YES)
                hv = NULL;
        k = auth_tokens_check_n(s->tokens, hv, hv ? hv_len : 0, &name, &role);
        if (k == 0 && header_hides_bytes(c, hv, hv_len))
                k = -EACCES;
        if (k == -ENOKEY) {
                r->www_authenticate = "Bearer realm=\"umd\"";
                return problem_set(p, 401, NULL,
                                   "%s %s needs a bearer token with the %s role "
                                   "(Authorization: Bearer TOKEN)",
                                   http_method_name(r->method), r->pattern, auth_role_name(need));
        }
        if (k < 0) {
                r->www_authenticate = "Bearer realm=\"umd\", error=\"invalid_token\"";
                return problem_set(p, 401, NULL, "the bearer token is not one umd knows");
        }
        if (role < need)
                return problem_set(p, 403, NULL, "token '%s' has the %s role; %s %s needs %s", name,
                                   auth_role_name(role), http_method_name(r->method), r->pattern,
                                   auth_role_name(need));
        r->client = name;
        r->admin = role >= ROLE_ADMIN;
        return 0;
}

static enum MHD_Result add_framing(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
        request_framing_add(cls, key, value);
        return MHD_YES;
}

static enum MHD_Result on_headers(struct MHD_Connection *c, struct request_ctx *r, const char *url)
{
        const struct route *route = r->route;
        const struct route_method *m = route ? route_method_find(route, r->method) : NULL;
        struct request_framing f = {0};
        struct problem p = {0};

        /* First, before anything is read past the headers: with framing that two parsers may
         * read two ways, the bytes after this request's headers could be answered as a second
         * request (smuggled past whatever stands in front of umd). Answer 400 and close, so
         * nothing after the headers is ever read as a request. */
        MHD_get_connection_values(c, MHD_HEADER_KIND, add_framing, &f);
        if (request_framing_check(&f, &p) < 0) {
                r->close = true;
                return queue_problem(c, r, &p);
        }
        if (!m) {
                /* 404 or 405 before any body is read: let the router say which. */
                struct api_request req = {.method = r->method, .path = url};
                struct api_reply rep = {0};

                api_dispatch(&req, &rep);
                return queue_reply(c, r, &rep);
        }
        if (request_authorize(c, r, m, &p) < 0)
                return queue_problem(c, r, &p);
        if (m->takes_body &&
            request_check_content_type(
                MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE), &p) <
                0)
                return queue_problem(c, r, &p);
        if (request_check_content_length(
                MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH),
                r->srv->cfg->max_body_bytes, &p) < 0)
                return queue_problem(c, r, &p);
        return MHD_YES;
}

/* An answer's status line and headers, before its problem+json body. */
#define RAW_HEAD_MAX 256

/* Answer p on c's socket now, mid-body, with Connection: close, then stop writing. For a body
 * that goes on past twice max_body_bytes: libmicrohttpd 0.9.75 queues a response only once the
 * body has ended (MHD_queue_response refuses it before), and a chunk that declares 2^64-1 bytes
 * never ends (issue 57: it was cut unanswered, where libmicrohttpd answers a larger size, which
 * overflows its parser, with 413). Nothing else writes to the socket before the body ends, so
 * the answer goes out whole; the rest of the body is read and dropped (closing with it unread
 * would reset the connection, and the client could lose the answer) until the client closes
 * or request_timeout_s cuts it. Not over TLS, whose records are libmicrohttpd's to write:
 * false, and the caller cuts the connection as before. */
static bool answer_mid_body(struct MHD_Connection *c, struct request_ctx *r,
                            const struct problem *p)
{
        const union MHD_ConnectionInfo *tls =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        const union MHD_ConnectionInfo *fd =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        json_t *doc;
        _cleanup_free_ char *body = NULL;
        char head[RAW_HEAD_MAX];
        int n;

        if ((tls && tls->tls_session) || !fd)
                return false;
        doc = problem_to_json(p);
        body = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
        json_decref(doc);
        if (!body)
                return false;
        n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d %s\r\nContent-Type: application/problem+json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                     p->status, MHD_get_reason_phrase_for((unsigned)p->status), strlen(body));
        struct iovec iov[2] = {{head, (size_t)n}, {body, strlen(body)}};
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
        if (n <= 0 || (size_t)n >= sizeof(head) ||
            sendmsg(fd->connect_fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)(n + strlen(body)))
                return false;
        (void)shutdown(fd->connect_fd, SHUT_WR);
        r->answered_mid_body = true;
        r->status = p->status;
        return true;
}

static enum MHD_Result on_body(struct MHD_Connection *c, struct request_ctx *r, const char *data,
                               size_t *size)
{
        uint64_t max = r->srv->cfg->max_body_bytes;
        size_t n = *size;

        *size = 0;
        if (r->answered_mid_body)
                return MHD_YES;
        if (r->too_large) {
                /* libmicrohttpd cannot answer mid-body, so the rest is read and dropped to
                 * send the 413 at the end; a client that keeps going past twice the cap is
                 * answered on the socket (or cut off, over TLS). */
                struct problem p = {0};

                r->discarded += n;
                if (r->discarded <= max)
                        return MHD_YES;
                problem_set(&p, 413, NULL,
                            "body is over the limit of %" PRIu64 " bytes (max_body_bytes)", max);
                return answer_mid_body(c, r, &p) ? MHD_YES : MHD_NO;
        }
        if ((uint64_t)r->len + n > max) {
                r->too_large = true;
                r->discarded = n;
                free(r->body);
                r->body = NULL;
                r->len = r->cap = 0;
                return MHD_YES;
        }
        if (r->len + n > r->cap) {
                size_t cap = r->cap ? r->cap : 4096;
                char *b;

                while (cap < r->len + n)
                        cap *= 2;
                if (cap > max)
                        cap = (size_t)max;
                b = realloc(r->body, cap);
                if (!b)
                        return MHD_NO;
                r->body = b;
                r->cap = cap;
        }
        memcpy(r->body + r->len, data, n);
        r->len += n;
        return MHD_YES;
}

struct args_state {
        struct query_arg args[API_MAX_QUERY_ARGS];
        size_t n;
        bool overflow;
};

static enum MHD_Result collect_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
        struct args_state *st = cls;

        if (st->n >= ELEMENTSOF(st->args)) {
                st->overflow = true;
                return MHD_NO;
        }
        st->args[st->n].key = key;
        st->args[st->n].value = value ? value : "";
        st->n++;
        return MHD_YES;
}

/* The reply to r's suspended submit, now that its commit is in; r waits no more. */
static void submit_end(struct request_ctx *r, struct api_reply *rep)
{
        struct job_submit_wait *w = r->submit_wait;

        r->submit_wait = NULL;
        handle_job_submit_end(w, rep);
        atomic_fetch_sub(&r->srv->submits_waiting, 1);
}

/* The writer, with its lock held, once a suspended submit's commit is in. */
static void submit_ready(void *arg)
{
        struct request_ctx *r = arg;

        server_conn_resume(r->srv, r->conn);
}

/* Hold the connection of a submit until its commit is in, without holding this thread: a thread
 * that blocked for each commit let only as many submits share one as there are HTTP threads
 * (one per CPU, at most 4, by default). Called again by libmicrohttpd once resumed
 * (on_complete). */
static enum MHD_Result submit_suspend(struct MHD_Connection *c, struct request_ctx *r,
                                      struct job_submit_wait *w)
{
        r->submit_wait = w;
        r->conn = c;
        atomic_fetch_add(&r->srv->submits_waiting, 1);
        /* Before the wait is armed: the writer may resume c at once. */
        MHD_suspend_connection(c);
        if (core_job_submit_when_done(w, submit_ready, r) == 1)
                server_conn_resume(r->srv, c); /* committed already */
        return MHD_YES;
}

static enum MHD_Result on_complete(struct MHD_Connection *c, struct request_ctx *r, const char *url)
{
        struct api_request req = {
            .method = r->method,
            .path = url,
            .body = r->body,
            .body_len = r->len,
            .client = r->client,
            .admin = r->admin,
        };
        struct api_reply rep = {0};
        struct args_state st = {0};
        struct problem p = {0};

        if (r->submit_wait) { /* resumed: its commit is in */
                submit_end(r, &rep);
                return queue_reply(c, r, &rep);
        }
        /* The request is whole: answering it (a ?wait= long poll too) has no deadline. */
        server_conn_set_deadline(r->srv, c, 0);
        if (r->too_large) {
                problem_set(&p, 413, NULL,
                            "body is over the limit of %" PRIu64 " bytes (max_body_bytes)",
                            r->srv->cfg->max_body_bytes);
                return queue_problem(c, r, &p);
        }
        MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_arg, &st);
        if (st.overflow) {
                problem_set(&p, 400, NULL, "more than %d query arguments", API_MAX_QUERY_ARGS);
                return queue_problem(c, r, &p);
        }
        req.args = st.args;
        req.n_args = st.n;
        req.idempotency_key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Idempotency-Key");
        req.accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
        req.if_none_match =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH);

        /* Asked again after a change that came between the handler's read and the suspend:
         * a few rounds at most, then the answer is what the handler last saw. The last
         * round's reply is kept, never cleared: a waiter that keeps seeing changes is
         * answered with its last read, never with nothing (status 0, which libmicrohttpd
         * refuses by closing the connection). */
        for (int round = 0;; round++) {
                int w;

                api_dispatch(&req, &rep);
                if (rep.submit_wait)
                        return submit_suspend(c, r, rep.submit_wait);
                if (rep.wait_ms == 0)
                        break;
                w = server_wait_suspend(c, r, &rep);
                if (w == 0) {
                        /* Asked again when resumed: this answer is stale by then. */
                        reply_free(&rep);
                        return MHD_YES;
                }
                if (w == -EBUSY) {
                        reply_free(&rep);
                        problem_set(&p, 503, "wait",
                                    "%u reads are waiting already (max_waiters); ask again "
                                    "without wait or later",
                                    r->srv->cfg->max_waiters);
                        p.retry_after_s = 1;
                        return queue_problem(c, r, &p);
                }
                if (w != -EAGAIN || round == WAIT_ROUNDS_MAX - 1)
                        break; /* the deadline passed, or it keeps changing: answer this */
                reply_free(&rep);
                memset(&rep, 0, sizeof(rep));
        }
        assert(rep.status > 0);
        return queue_reply(c, r, &rep);
}

enum MHD_Result server_on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
        struct api_server *s = cls;
        struct request_ctx *r = *con_cls;

        /* An absolute-form target is served as its path (RFC 9112 section 3.2.2: a server
         * must accept it); umd has one host, so the authority in it changes nothing. */
        url = request_target_path(url);
        if (!r) {
                r = calloc(1, sizeof(*r));
                if (!r)
                        return MHD_NO;
                r->srv = s;
                r->method = http_method_from_string(method);
                /* Matched once: the headers' checks and the metrics both need it. */
                r->route = router_match(url, NULL, NULL);
                r->pattern = r->route ? r->route->pattern : "other";
                atomic_fetch_add(&s->inflight, 1);
                *con_cls = r;
                return on_headers(c, r, url);
        }
        if (r->replied) {
                *upload_data_size = 0;
                return MHD_YES;
        }
        if (*upload_data_size > 0)
                return on_body(c, r, upload_data, upload_data_size);
        if (r->answered_mid_body)
                return MHD_NO; /* the body ended after its answer: close */
        return on_complete(c, r, url);
}

void server_on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
        struct api_server *s = cls;
        struct request_ctx *r = *con_cls;

        if (!r)
                return;
        /* A resumed submit whose connection ended before it was answered (the client went
         * away meanwhile): its job must still be marked committed, or it would never start. */
        if (r->submit_wait) {
                struct api_reply rep = {0};

                submit_end(r, &rep);
                reply_free(&rep);
        }
        /* status 0: the client went away or timed out before any response was queued. */
        core_http_observe(r->pattern, http_method_name(r->method), r->status);
        /* Kept alive, the next request may start at any moment the idle timeout allows, and
         * must then arrive within request_timeout_s. */
        server_conn_set_deadline(s, c,
                                 now_monotonic_ms() + 1000ull * (s->cfg->connection_timeout_s +
                                                                 s->cfg->request_timeout_s));
        free(r->body);
        free(r);
        *con_cls = NULL;
        atomic_fetch_sub(&s->inflight, 1);
}

size_t server_on_unescape(void *cls, struct MHD_Connection *c, char *s)
{
        return url_unescape(s);
}
