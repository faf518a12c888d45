/* The HTTP server: opens every listener (systemd's sockets first, then TCP and the unix
 * socket from the configuration), serves TCP over TLS when a certificate is configured, runs
 * one libmicrohttpd daemon per socket, each polling with poll() from a pool of http_threads
 * threads, checks each request's bearer token against the role its route needs (tokens from
 * auth.c, loaded once here), reads request bodies across callbacks up to max_body_bytes, turns
 * handler replies into responses, holds the connections of reads that ?wait= (suspended, no
 * thread held, max_waiters at most) until a job changes or their deadline, reports each finished
 * request to the daemon's metrics, and shuts down by quiescing, answering every waiter and
 * draining. It never interprets a request itself: that is
 * router.c and handlers.c. */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <grp.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "auth.h"
#include "config.h"
#include "fileio.h"
#include "http.h"
#include "log.h"
#include "netaddr.h"
#include "util.h"

#define LISTEN_NAME_MAX 128
/* How often a ?wait= read asks again when a job changed between its read and its suspend. */
#define WAIT_ROUNDS_MAX 4
/* Certificate chains are a few KiB; refuse to read anything absurd. */
#define TLS_FILE_MAX (1024 * 1024)

struct listener {
        struct MHD_Daemon *daemon;
        int fd;
        int quiesced_fd;
        bool is_unix;
        char name[LISTEN_NAME_MAX];
};

/* One open connection, for the request deadline and the local reserve. libmicrohttpd's
 * connection_timeout is an idle timeout: a client sending a header line every few seconds
 * keeps a slot forever. The reaper thread shuts down the socket of a connection whose request
 * has not arrived whole by its deadline; libmicrohttpd then reads EOF and closes it. The fd
 * stays valid while the entry is listed: libmicrohttpd calls the CLOSED notification, which
 * unlists it under conns_lock, before it closes the socket. */
struct conn {
        struct conn *prev, *next;
        int fd;
        bool remote;
        bool cut;
        uint64_t deadline_ms; /* 0: none (the request is whole and being answered) */
};

struct api_server {
        const struct umd_config *cfg;
        pthread_mutex_t conns_lock;
        pthread_cond_t reaper_cond;
        struct conn *conns;
        unsigned remote_conns; /* connections from beyond loopback, all listeners */
        unsigned remote_max;   /* max_connections less the slots kept for local clients */
        bool reaper_started, reaper_stop;
        pthread_t reaper;
        struct listener *listeners;
        size_t n_listeners;
        char *unix_path;            /* the socket file we created, removed at stop */
        struct auth_tokens *tokens; /* NULL: no tokens_file, everyone is an anonymous admin */
        char *tls_cert, *tls_key;   /* PEM text, NULL without TLS */
        atomic_uint inflight;
        /* Suspended ?wait= reads. wait_lock is taken before libmicrohttpd's own locks (suspend,
         * resume) and never from its callbacks, so the order is always core_lock, wait_lock,
         * libmicrohttpd. */
        pthread_mutex_t wait_lock;
        struct request_ctx *waiters;
        unsigned n_waiters;
        bool stopping; /* answer every wait now */
};

struct request_ctx {
        struct api_server *srv;
        enum http_method method;
        const char *pattern; /* for metrics: the route, never the raw path */
        char *body;
        size_t len, cap;
        uint64_t discarded; /* bytes dropped after the body passed the cap */
        bool too_large;
        bool replied;
        bool close; /* answer with Connection: close (the framing could not be trusted) */
        int status;
        const char *client; /* a token's name, owned by srv->tokens */
        bool admin;
        const char *www_authenticate; /* set with a 401 */
        /* While suspended in a ?wait=: listed in srv->waiters (under wait_lock). */
        struct request_ctx *wprev, *wnext;
        struct MHD_Connection *conn;
        bool waiting;
        uint64_t wait_deadline_ms; /* 0: not waited yet */
        char wait_id[48];          /* the job waited for; "": any job (a list) */
};

/* libmicrohttpd reports client misbehaviour through this logger too; only start-up problems
 * are worth more than a debug line. */
static atomic_int mhd_log_level = LOG_WARNING;

static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
        char buf[512];
        size_t n;

        vsnprintf(buf, sizeof(buf), fmt, ap);
        n = strlen(buf);
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
                buf[--n] = '\0';
        log_msg(atomic_load(&mhd_log_level), "http: %s", buf);
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
        char retry[16] = "";

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
        const struct route *route = router_match(url, NULL, NULL);
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

static enum MHD_Result on_body(struct request_ctx *r, const char *data, size_t *size)
{
        uint64_t max = r->srv->cfg->max_body_bytes;
        size_t n = *size;

        *size = 0;
        if (r->too_large) {
                /* libmicrohttpd cannot answer mid-body, so the rest is read and dropped to
                 * send the 413 at the end; a client that keeps going past twice the cap is
                 * cut off instead. */
                r->discarded += n;
                return r->discarded > max ? MHD_NO : MHD_YES;
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

/* The connection's entry (set by on_connection), or NULL. */
static struct conn *conn_of(struct MHD_Connection *c)
{
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

        return ci ? ci->socket_context : NULL;
}

static void conn_set_deadline(struct api_server *s, struct MHD_Connection *c, uint64_t deadline)
{
        struct conn *k = conn_of(c);

        if (!k)
                return;
        pthread_mutex_lock(&s->conns_lock);
        k->deadline_ms = deadline;
        pthread_mutex_unlock(&s->conns_lock);
}

/* ---- ?wait=: suspended connections ---- */

/* With wait_lock held: unlist r and let libmicrohttpd call on_request for it again. */
static void waiter_resume_locked(struct api_server *s, struct request_ctx *r)
{
        if (!r->waiting)
                return;
        if (r->wprev)
                r->wprev->wnext = r->wnext;
        else
                s->waiters = r->wnext;
        if (r->wnext)
                r->wnext->wprev = r->wprev;
        r->wprev = r->wnext = NULL;
        r->waiting = false;
        s->n_waiters--;
        MHD_resume_connection(r->conn);
}

/* Hold the connection of a read that asked to wait. 0: suspended (libmicrohttpd calls
 * on_request again when it is resumed); -EAGAIN: a job changed since the handler read it, ask
 * again now; -ETIME: the deadline passed or umd is stopping, answer now; -EBUSY: max_waiters
 * are waiting already. */
static int wait_suspend(struct MHD_Connection *c, struct request_ctx *r,
                        const struct api_reply *rep)
{
        struct api_server *s = r->srv;
        uint64_t now = now_monotonic_ms();
        int ret = 0;

        /* The deadline counts from the first ask, not from each wake-up. */
        if (r->wait_deadline_ms == 0)
                r->wait_deadline_ms = now + rep->wait_ms;
        if (now >= r->wait_deadline_ms)
                return -ETIME;
        pthread_mutex_lock(&s->wait_lock);
        if (s->stopping)
                ret = -ETIME;
        else if (core_jobs_generation() != rep->wait_gen)
                ret = -EAGAIN;
        else if (s->n_waiters >= s->cfg->max_waiters)
                ret = -EBUSY;
        if (ret == 0) {
                snprintf(r->wait_id, sizeof(r->wait_id), "%s", rep->wait_id);
                r->conn = c;
                r->waiting = true;
                r->wprev = NULL;
                r->wnext = s->waiters;
                if (s->waiters)
                        s->waiters->wprev = r;
                s->waiters = r;
                s->n_waiters++;
                /* Under wait_lock: no wake-up can come between listing and suspending. */
                MHD_suspend_connection(c);
        }
        pthread_mutex_unlock(&s->wait_lock);
        if (ret == 0) {
                /* The reaper keeps the deadline; it may be sooner than its next round. */
                pthread_mutex_lock(&s->conns_lock);
                pthread_cond_signal(&s->reaper_cond);
                pthread_mutex_unlock(&s->conns_lock);
        }
        return ret;
}

/* The jobs' listener, called with core_lock held: wake who waits for this job, and every list
 * waiting for something new (each asks again and goes back to waiting if nothing it wants
 * came). */
static void wait_job_changed(const char *id, void *userdata)
{
        struct api_server *s = userdata;

        pthread_mutex_lock(&s->wait_lock);
        for (struct request_ctx *r = s->waiters, *next; r; r = next) {
                next = r->wnext;
                if (!r->wait_id[0] || strcasecmp(r->wait_id, id) == 0)
                        waiter_resume_locked(s, r);
        }
        pthread_mutex_unlock(&s->wait_lock);
}

/* Resume waiters whose deadline passed (all of them when stopping); the earliest deadline
 * left, 0 when none. */
static uint64_t wait_expire(struct api_server *s, uint64_t now)
{
        uint64_t next = 0;

        pthread_mutex_lock(&s->wait_lock);
        for (struct request_ctx *r = s->waiters, *n; r; r = n) {
                n = r->wnext;
                if (s->stopping || now >= r->wait_deadline_ms)
                        waiter_resume_locked(s, r);
                else if (!next || r->wait_deadline_ms < next)
                        next = r->wait_deadline_ms;
        }
        pthread_mutex_unlock(&s->wait_lock);
        return next;
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

        /* The request is whole: answering it (a ?wait= long poll too) has no deadline. */
        conn_set_deadline(r->srv, c, 0);
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
                if (rep.wait_ms == 0)
                        break;
                w = wait_suspend(c, r, &rep);
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

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
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
                r->pattern = router_pattern_for(url);
                atomic_fetch_add(&s->inflight, 1);
                *con_cls = r;
                return on_headers(c, r, url);
        }
        if (r->replied) {
                *upload_data_size = 0;
                return MHD_YES;
        }
        if (*upload_data_size > 0)
                return on_body(r, upload_data, upload_data_size);
        return on_complete(c, r, url);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
        struct api_server *s = cls;
        struct request_ctx *r = *con_cls;

        if (!r)
                return;
        /* status 0: the client went away or timed out before any response was queued. */
        core_http_observe(r->pattern, http_method_name(r->method), r->status);
        /* Kept alive, the next request may start at any moment the idle timeout allows, and
         * must then arrive within request_timeout_s. */
        conn_set_deadline(s, c,
                          now_monotonic_ms() +
                              1000ull * (s->cfg->connection_timeout_s + s->cfg->request_timeout_s));
        free(r->body);
        free(r);
        *con_cls = NULL;
        atomic_fetch_sub(&s->inflight, 1);
}

/* ---- connections: request deadline, slots kept for local clients ---- */

/* Loopback and unix-socket peers: the node's own health checks and tools. */
static bool addr_is_local(const struct sockaddr *sa, socklen_t len)
{
        if (!sa || len < (socklen_t)sizeof(sa_family_t))
                return true;
        if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in))
                return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
        if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
                const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
                return IN6_IS_ADDR_LOOPBACK(a) ||
                       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
        }
        return sa->sa_family == AF_UNIX;
}

/* Remote clients get max_connections less a reserve; the reserve is for loopback and the unix
 * socket, so remote clients filling every slot cannot lock out the node's own health checks. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
        struct api_server *s = cls;
        bool ok;

        if (addr_is_local(addr, addrlen))
                return MHD_YES;
        pthread_mutex_lock(&s->conns_lock);
        ok = s->remote_conns < s->remote_max;
        pthread_mutex_unlock(&s->conns_lock);
        return ok ? MHD_YES : MHD_NO;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
        struct api_server *s = cls;
        struct conn *k = *socket_context;

        if (code == MHD_CONNECTION_NOTIFY_STARTED) {
                const union MHD_ConnectionInfo *fd_info =
                    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
                const union MHD_ConnectionInfo *addr_info =
                    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);

                k = calloc(1, sizeof(*k));
                if (!k || !fd_info) {
                        /* Untracked, the idle timeout still bounds it. */
                        free(k);
                        return;
                }
                k->fd = fd_info->connect_fd;
                k->remote = addr_info && addr_info->client_addr &&
                            !addr_is_local(addr_info->client_addr, sizeof(struct sockaddr_in6));
                k->deadline_ms = now_monotonic_ms() + 1000ull * s->cfg->request_timeout_s;
                pthread_mutex_lock(&s->conns_lock);
                k->next = s->conns;
                if (s->conns)
                        s->conns->prev = k;
                s->conns = k;
                if (k->remote)
                        s->remote_conns++;
                pthread_mutex_unlock(&s->conns_lock);
                *socket_context = k;
                return;
        }
        if (!k)
                return;
        pthread_mutex_lock(&s->conns_lock);
        if (k->prev)
                k->prev->next = k->next;
        else
                s->conns = k->next;
        if (k->next)
                k->next->prev = k->prev;
        if (k->remote)
                s->remote_conns--;
        pthread_mutex_unlock(&s->conns_lock);
        free(k);
        *socket_context = NULL;
}

static void *reaper_main(void *arg)
{
        struct api_server *s = arg;

        pthread_mutex_lock(&s->conns_lock);
        while (!s->reaper_stop) {
                uint64_t now = now_monotonic_ms();
                struct timespec until;
                unsigned cut = 0;

                for (struct conn *k = s->conns; k; k = k->next)
                        if (!k->cut && k->deadline_ms && now >= k->deadline_ms) {
                                /* shutdown, not close: the fd is libmicrohttpd's to close. */
                                (void)shutdown(k->fd, SHUT_RDWR);
                                k->cut = true;
                                cut++;
                        }
                if (cut)
                        log_debug("http: closed %u connection(s) whose request did not arrive "
                                  "within request_timeout_s (%us)",
                                  cut, s->cfg->request_timeout_s);
                /* Waits end on time to the tick: their deadline, or 250 ms, whichever is
                 * first. wait_lock is never taken with conns_lock held. */
                pthread_mutex_unlock(&s->conns_lock);
                uint64_t next = wait_expire(s, now), step = 250;
                pthread_mutex_lock(&s->conns_lock);
                now = now_monotonic_ms();
                if (next && next <= now)
                        step = 1;
                else if (next && next - now < step)
                        step = next - now;
                clock_gettime(CLOCK_MONOTONIC, &until);
                until.tv_nsec += (long)step * 1000 * 1000;
                if (until.tv_nsec >= 1000 * 1000 * 1000) {
                        until.tv_sec++;
                        until.tv_nsec -= 1000 * 1000 * 1000;
                }
                pthread_cond_timedwait(&s->reaper_cond, &s->conns_lock, &until);
        }
        pthread_mutex_unlock(&s->conns_lock);
        return NULL;
}

static int reaper_start(struct api_server *s)
{
        int r = pthread_create(&s->reaper, NULL, reaper_main, s);

        if (r != 0)
                return log_error_errno(r, "cannot start the HTTP request reaper: %m");
        s->reaper_started = true;
        return 0;
}

/* After every daemon is stopped: no connection is left to cut. */
static void reaper_stop(struct api_server *s)
{
        if (!s->reaper_started)
                return;
        pthread_mutex_lock(&s->conns_lock);
        s->reaper_stop = true;
        pthread_cond_signal(&s->reaper_cond);
        pthread_mutex_unlock(&s->conns_lock);
        pthread_join(s->reaper, NULL);
        s->reaper_started = false;
}

/* ---- listeners ---- */

static size_t on_unescape(void *cls, struct MHD_Connection *c, char *s)
{
        return url_unescape(s);
}

static int open_tcp(const char *addr, int *ret_fd)
{
        struct sockaddr_storage ss;
        socklen_t len;
        int fd, one = 1, r;

        r = netaddr_parse(addr, &ss, &len);
        if (r < 0) {
                log_error("listen address '%s' is not IPV4:PORT or [IPV6]:PORT", addr);
                return r;
        }
        fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
                r = -errno;
                log_error("cannot listen on %s: socket: %s", addr, strerror(-r));
                return r;
        }
        /* A restart must not wait for TIME_WAIT; v6 sockets stay v6 so [::] and 0.0.0.0 can
         * both be listed. */
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
            (ss.ss_family == AF_INET6 &&
             setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0) ||
            bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, SOMAXCONN) < 0) {
                r = -errno;
                log_error("cannot listen on %s: %s", addr, strerror(-r));
                close(fd);
                return r;
        }
        *ret_fd = fd;
        return 0;
}

/* 1 when something accepts connections at sa, 0 when nothing does (a stale file). */
static int unix_socket_in_use(const struct sockaddr_un *sa)
{
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

        if (fd < 0)
                return -errno;
        if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0)
                return 1;
        /* A full backlog still means a live listener. */
        if (errno == EAGAIN)
                return 1;
        return 0;
}

static int open_unix(const struct umd_config *cfg, int *ret_fd)
{
        const char *path = cfg->unix_socket;
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        struct stat st;
        int fd, r;

        if (strlen(path) >= sizeof(sa.sun_path)) {
                log_error("unix socket path %s is longer than %zu bytes", path,
                          sizeof(sa.sun_path) - 1);
                return -ENAMETOOLONG;
        }
        memcpy(sa.sun_path, path, strlen(path) + 1);
        /* A socket file left by an earlier run would make bind fail; anything else at that
         * path is not ours to remove, nor is a socket someone still answers on. */
        if (lstat(path, &st) == 0) {
                if (!S_ISSOCK(st.st_mode)) {
                        log_error("cannot listen on %s: exists and is not a socket", path);
                        return -EEXIST;
                }
                r = unix_socket_in_use(&sa);
                if (r != 0) {
                        log_error("cannot listen on %s: %s", path,
                                  r > 0 ? "another process is serving on it" : strerror(-r));
                        return r > 0 ? -EADDRINUSE : r;
                }
                (void)unlink(path);
        }
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
                r = -errno;
                log_error("cannot listen on %s: socket: %s", path, strerror(-r));
                return r;
        }
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                r = -errno;
                log_error("cannot listen on %s: %s", path, strerror(-r));
                close(fd);
                return r;
        }
        r = 0;
        if (cfg->unix_socket_mode != 0 && chmod(path, cfg->unix_socket_mode) < 0)
                r = -errno;
        if (r == 0 && cfg->unix_socket_group && cfg->unix_socket_group[0]) {
                struct group *g = getgrnam(cfg->unix_socket_group);
                if (!g)
                        r = -ENOENT;
                else if (chown(path, (uid_t)-1, g->gr_gid) < 0)
                        r = -errno;
        }
        if (r == 0 && listen(fd, SOMAXCONN) < 0)
                r = -errno;
        if (r < 0) {
                log_error("cannot listen on %s: %s (mode %o, group %s)", path, strerror(-r),
                          cfg->unix_socket_mode,
                          cfg->unix_socket_group ? cfg->unix_socket_group : "unchanged");
                close(fd);
                (void)unlink(path);
                return r;
        }
        *ret_fd = fd;
        return 0;
}

static int take_activated(int fd)
{
        int r = sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1);
        int flags;

        if (r <= 0) {
                log_error("fd %d passed by systemd is not a listening stream socket", fd);
                return r < 0 ? r : -EINVAL;
        }
        /* systemd hands the sockets over inheritable and blocking: workers must not inherit
         * them, and the poll threads must never block on accept. */
        flags = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 ||
            fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
                r = -errno;
                log_error("fd %d passed by systemd: %s", fd, strerror(-r));
                return r;
        }
        return 0;
}

static int start_daemon(struct api_server *s, struct listener *l)
{
        const struct umd_config *cfg = s->cfg;
        /* poll(), not epoll: libmicrohttpd 0.9.75's epoll loop leaves waiting connections
         * unserved under load until other traffic wakes it (bench/load/mhd_epoll_stall.c
         * reproduces it: 160-1,750 req/s with epoll against 83k-119k with poll). */
        unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC |
                         MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
        bool tls = s->tls_cert && !l->is_unix;
        /* libmicrohttpd copies neither string: both stay in s until the daemon stops. */
        struct MHD_OptionItem tls_opts[] = {
            {tls ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, s->tls_key},
            {MHD_OPTION_HTTPS_MEM_CERT, 0, s->tls_cert},
            {MHD_OPTION_END, 0, NULL},
        };

        if (tls)
                flags |= MHD_USE_TLS;

        /* libmicrohttpd's defaults are no timeout and no connection limits: set all three.
         * Per-IP limits mean nothing on a unix socket, where every peer has no address. */
        l->daemon = MHD_start_daemon(
            flags, 0, on_accept, s, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, NULL,
            MHD_OPTION_LISTEN_SOCKET, l->fd, MHD_OPTION_CONNECTION_LIMIT,
            (unsigned)cfg->max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
            (unsigned)(l->is_unix ? 0 : cfg->max_connections_per_ip), MHD_OPTION_CONNECTION_TIMEOUT,
            (unsigned)cfg->connection_timeout_s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
            MHD_OPTION_UNESCAPE_CALLBACK, on_unescape, NULL, MHD_OPTION_NOTIFY_CONNECTION,
            on_connection, s, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)cfg->http_threads,
            MHD_OPTION_ARRAY, tls_opts, MHD_OPTION_END);
        if (!l->daemon) {
                if (tls)
                        log_error("cannot start HTTPS on %s: tls_cert %s and tls_key %s are not a "
                                  "valid PEM certificate and its private key",
                                  l->name, s->cfg->tls_cert, s->cfg->tls_key);
                else
                        log_error("cannot start the HTTP server on %s", l->name);
                return -EIO;
        }
        log_info("listening on %s", l->name);
        return 0;
}

/* Answer every ?wait= now; none may stay suspended when a daemon stops. */
static void wait_stop(struct api_server *s)
{
        pthread_mutex_lock(&s->wait_lock);
        s->stopping = true;
        pthread_mutex_unlock(&s->wait_lock);
        core_set_job_listener(NULL, NULL);
        (void)wait_expire(s, now_monotonic_ms());
}

static void server_free(struct api_server *s)
{
        wait_stop(s);
        for (size_t i = 0; i < s->n_listeners; i++) {
                struct listener *l = &s->listeners[i];
                if (l->daemon)
                        MHD_stop_daemon(l->daemon); /* closes l->fd too */
                else if (l->fd >= 0)
                        close(l->fd);
        }
        reaper_stop(s);
        pthread_cond_destroy(&s->reaper_cond);
        pthread_mutex_destroy(&s->conns_lock);
        pthread_mutex_destroy(&s->wait_lock);
        if (s->unix_path)
                (void)unlink(s->unix_path);
        free(s->unix_path);
        auth_tokens_free(s->tokens);
        if (s->tls_key)
                explicit_bzero(s->tls_key, strlen(s->tls_key));
        free(s->tls_key);
        free(s->tls_cert);
        free(s->listeners);
        free(s);
}

static struct listener *listener_add(struct api_server *s, int fd, bool is_unix)
{
        struct listener *l = &s->listeners[s->n_listeners++];

        l->fd = fd;
        l->quiesced_fd = MHD_INVALID_SOCKET;
        l->is_unix = is_unix;
        return l;
}

/* Read a PEM file whole, NUL-terminated (libmicrohttpd takes C strings). */
static int read_pem(const char *key, const char *path, char **ret)
{
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        int r;

        r = read_file_at(AT_FDCWD, path, TLS_FILE_MAX, &buf, &len);
        if (r == -EFBIG || r == -EISDIR || r == -EBADFD) {
                log_error("%s %s: not a regular file of at most %d bytes", key, path, TLS_FILE_MAX);
                return -EINVAL;
        }
        if (r < 0)
                return log_error_errno(r, "%s %s: %m", key, path);
        /* GnuTLS would only say "bad key pair" later; say which file is wrong now. */
        if (strlen(buf) != len || !strstr(buf, "-----BEGIN ")) {
                explicit_bzero(buf, len);
                log_error("%s %s: not a PEM file (no -----BEGIN line)", key, path);
                return -EINVAL;
        }
        *ret = buf;
        buf = NULL;
        return 0;
}

static int tls_load(struct api_server *s)
{
        const struct umd_config *cfg = s->cfg;
        int r;

        if (!cfg->tls_cert || !cfg->tls_cert[0])
                return 0;
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
                log_error("tls_cert is set but this libmicrohttpd was built without TLS");
                return -EOPNOTSUPP;
        }
        r = read_pem("tls_cert", cfg->tls_cert, &s->tls_cert);
        if (r < 0)
                return r;
        return read_pem("tls_key", cfg->tls_key, &s->tls_key);
}

/* Unix sockets and loopback addresses are out of the network's reach; anything else is
 * not. */
static bool listener_is_local(const struct listener *l)
{
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);

        if (l->is_unix || getsockname(l->fd, (struct sockaddr *)&ss, &len) < 0)
                return true;
        if (ss.ss_family == AF_INET) {
                const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
                return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
        }
        if (ss.ss_family == AF_INET6) {
                const struct in6_addr *a = &((const struct sockaddr_in6 *)&ss)->sin6_addr;
                return IN6_IS_ADDR_LOOPBACK(a) ||
                       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
        }
        return true;
}

/* Without tokens whoever reaches the port is an administrator of the GPUs. */
static int check_exposure(const struct api_server *s)
{
        if (s->tokens)
                return 0;
        for (size_t i = 0; i < s->n_listeners; i++) {
                const struct listener *l = &s->listeners[i];

                if (listener_is_local(l))
                        continue;
                if (s->cfg->require_auth_off_loopback) {
                        log_error("refusing to start: %s is beyond loopback and no tokens_file is "
                                  "set (require_auth_off_loopback=true)",
                                  l->name);
                        return -EPERM;
                }
                log_warning("WARNING: %s is beyond loopback and no tokens_file is set: ANYONE "
                            "WHO CAN REACH IT CAN RUN AND CANCEL JOBS ON THESE GPUS. Set "
                            "tokens_file, or require_auth_off_loopback=true to refuse this.",
                            l->name);
        }
        return 0;
}

int api_start(const struct umd_config *cfg, struct api_server **ret)
{
        struct api_server *s;
        int n_fds, r;

        /* Unsets LISTEN_FDS so the workers we spawn never see it. */
        n_fds = sd_listen_fds(1);
        if (n_fds < 0) {
                log_error("cannot read the sockets systemd passed: %s", strerror(-n_fds));
                return n_fds;
        }

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->cfg = cfg;
        atomic_init(&s->inflight, 0);
        pthread_mutex_init(&s->conns_lock, NULL);
        pthread_mutex_init(&s->wait_lock, NULL);
        /* The reaper's deadlines are CLOCK_MONOTONIC: so must its condition's clock be (the
         * default, CLOCK_REALTIME, made every timed wait return at once: the reaper spun). */
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&s->reaper_cond, &ca);
        pthread_condattr_destroy(&ca);
        api_wait_max_s = cfg->wait_max_s;
        /* An eighth of the slots (at least one) are kept for loopback and the unix socket. */
        s->remote_max = cfg->max_connections -
                        (cfg->max_connections >= 2 ? (cfg->max_connections / 8 ?: 1) : 0);
        s->listeners = calloc((size_t)n_fds + cfg->n_listen + 1, sizeof(*s->listeners));
        if (!s->listeners) {
                free(s);
                return -ENOMEM;
        }
        /* Read once: a changed file takes a restart, like the rest of the configuration. */
        if (cfg->tokens_file && cfg->tokens_file[0]) {
                r = auth_tokens_load(cfg->tokens_file, &s->tokens);
                if (r < 0)
                        goto fail;
                log_info("%zu bearer token(s) from %s; reads %s a token",
                         auth_tokens_count(s->tokens), cfg->tokens_file,
                         cfg->auth_reads ? "need" : "do not need");
        }
        r = tls_load(s);
        if (r < 0)
                goto fail;

        /* Open every socket first so a port in use fails before any thread starts. */
        for (int i = 0; i < n_fds; i++) {
                int fd = SD_LISTEN_FDS_START + i;
                struct listener *l;

                r = take_activated(fd);
                if (r < 0)
                        goto fail;
                l = listener_add(s, fd, sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) > 0);
                snprintf(l->name, sizeof(l->name), "fd %d from systemd", fd);
        }
        /* With socket activation the .socket unit says where to listen: the configured
         * addresses (by default the same loopback port) would only collide with it. */
        if (n_fds > 0 && (cfg->n_listen > 0 || cfg->unix_socket))
                log_info("using the %d socket(s) systemd passed; listen and unix_socket are "
                         "ignored",
                         n_fds);
        for (size_t i = 0; n_fds == 0 && i < cfg->n_listen; i++) {
                int fd = -1;

                r = open_tcp(cfg->listen[i], &fd);
                if (r < 0)
                        goto fail;
                snprintf(listener_add(s, fd, false)->name, LISTEN_NAME_MAX, "%s://%s",
                         s->tls_cert ? "https" : "http", cfg->listen[i]);
        }
        if (n_fds == 0 && cfg->unix_socket && cfg->unix_socket[0]) {
                int fd = -1;

                r = open_unix(cfg, &fd);
                if (r < 0)
                        goto fail;
                s->unix_path = strdup(cfg->unix_socket);
                snprintf(listener_add(s, fd, true)->name, LISTEN_NAME_MAX, "unix:%s",
                         cfg->unix_socket);
                if (!s->unix_path) {
                        r = -ENOMEM;
                        goto fail;
                }
        }
        if (s->n_listeners == 0) {
                log_error("nothing to listen on: no --listen, no unix socket, no sockets from "
                          "systemd");
                r = -EINVAL;
                goto fail;
        }

        r = check_exposure(s);
        if (r < 0)
                goto fail;

        r = reaper_start(s);
        if (r < 0)
                goto fail;
        atomic_store(&mhd_log_level, LOG_WARNING);
        for (size_t i = 0; i < s->n_listeners; i++) {
                r = start_daemon(s, &s->listeners[i]);
                if (r < 0)
                        goto fail;
        }
        atomic_store(&mhd_log_level, LOG_DEBUG);
        core_set_job_listener(wait_job_changed, s);
        *ret = s;
        return 0;

fail:
        server_free(s);
        return r;
}

void api_stop(struct api_server *s, unsigned timeout_ms)
{
        struct timespec pause = {.tv_nsec = 10 * 1000 * 1000};
        uint64_t deadline;
        unsigned left;

        if (!s)
                return;
        /* Stop accepting everywhere first, then drain: the quiesced socket stays ours to
         * close, after the daemon's thread is gone. */
        for (size_t i = 0; i < s->n_listeners; i++) {
                struct listener *l = &s->listeners[i];
                if (!l->daemon)
                        continue;
                l->quiesced_fd = MHD_quiesce_daemon(l->daemon);
                if (l->quiesced_fd == MHD_INVALID_SOCKET)
                        log_warning("cannot stop accepting on %s", l->name);
        }
        /* Waiting reads are answered with what there is, then drain like any request. */
        wait_stop(s);
        deadline = now_monotonic_ms() + timeout_ms;
        while ((left = atomic_load(&s->inflight)) > 0 && now_monotonic_ms() < deadline)
                nanosleep(&pause, NULL);
        if (left > 0)
                log_warning("stopping the HTTP server with %u request(s) unfinished", left);
        for (size_t i = 0; i < s->n_listeners; i++) {
                struct listener *l = &s->listeners[i];
                if (!l->daemon)
                        continue;
                MHD_stop_daemon(l->daemon);
                l->daemon = NULL;
                /* Quiesced, libmicrohttpd handed the socket back; else it closed it. */
                if (l->quiesced_fd != MHD_INVALID_SOCKET)
                        close(l->quiesced_fd);
                l->fd = -1;
        }
        server_free(s);
}

size_t api_listener_count(const struct api_server *s)
{
        return s ? s->n_listeners : 0;
}
