/* What the five parts of the HTTP server share: the server object, a request's context and a
 * connection's entry, and the calls between them. server.c opens the listeners and starts and
 * stops the server, server_conn.c counts and cuts connections, server_worker.c runs the threads
 * that serve them, server_wait.c holds the ?wait= reads, server_request.c is libmicrohttpd's
 * request callbacks. Nothing outside api/server*.c includes this. */
#pragma once

#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "http.h"

/* The job a ?wait= waits for: a job id (36 characters) with room to spare. */
#define WAIT_ID_MAX 48

#define LISTEN_NAME_MAX 128

struct api_reply;
struct umd_config;

struct api_server;

/* One libmicrohttpd daemon on epoll and the thread that runs it (server.c says why umd runs
 * the loop and accepts, and not libmicrohttpd). */
struct http_worker {
        struct api_server *srv;
        struct listener *l;
        struct MHD_Daemon *daemon;
        int epoll_fd;   /* the daemon's, for poll() */
        int wake_fd;    /* eventfd: a resumed connection, a peer that stopped accepting, api_stop */
        unsigned limit; /* the daemon's connection limit, a backstop: server.c counts */
        pthread_t thread;
        bool started;
        atomic_uint held;     /* connections the daemon holds, for the other workers */
        atomic_int want;      /* WORKER_RUN, WORKER_QUIESCE, WORKER_STOP */
        atomic_bool quiesced; /* set by the worker once it stopped accepting for good */
};

struct listener {
        struct http_worker *workers;
        unsigned n_workers;
        int fd;
        bool is_unix;
        char name[LISTEN_NAME_MAX];
        unsigned held, shared; /* connections counted in, of them from shared peers (conns_lock) */
};

/* A peer's key: 4 or 6 then the IP address, or 1 then the uid of a unix-socket peer. */
#define ADDR_KEY_LEN 17

/* Connections from one IP address (or one uid on the unix socket), over every listener and
 * worker (libmicrohttpd counts per daemon only). */
struct addr_count {
        struct addr_count *next;
        unsigned char key[ADDR_KEY_LEN];
        unsigned n;
};
#define ADDR_BUCKETS 1024

/* One open connection, for the request deadline and the local reserve. libmicrohttpd's
 * connection_timeout is an idle timeout: a client sending a header line every few seconds
 * keeps a slot forever. The reaper thread shuts down the socket of a connection whose request
 * has not arrived whole by its deadline; libmicrohttpd then reads EOF and closes it. The fd
 * stays valid while the entry is listed: libmicrohttpd calls the CLOSED notification, which
 * unlists it under conns_lock, before it closes the socket. */
struct conn {
        struct conn *prev, *next;
        struct http_worker *worker;
        struct addr_count *addr; /* NULL: not counted by address (a trusted unix-socket peer) */
        int fd;
        bool counted; /* in the listener's and the server's counts */
        bool shared;  /* a shared peer's (server.c), not a trusted one's */
        bool cut;
        /* 0: none (the request is whole and being answered). Atomic: the connection's own
         * thread sets it twice a request, and a lock for that would be taken by every request
         * on every thread; the reaper reads it with conns_lock held, for the list. */
        _Atomic uint64_t deadline_ms;
};

struct api_server {
        const struct umd_config *cfg;
        pthread_mutex_t conns_lock;
        pthread_cond_t reaper_cond;
        struct conn *conns;
        /* Connections counted in over every listener, and of them from shared peers; what the
         * open-file limit leaves room for, and of that what shared peers may take. On each
         * listener, shared peers may take shared_max_each of max_connections. */
        unsigned held, held_max, shared, shared_max, shared_max_each;
        struct addr_count *addrs[ADDR_BUCKETS]; /* under conns_lock */
        bool reaper_started, reaper_stop;
        pthread_t reaper;
        struct listener *listeners;
        size_t n_listeners;
        char *unix_path;            /* the socket file we created, removed at stop */
        struct auth_tokens *tokens; /* NULL: no tokens_file, everyone is an anonymous admin */
        char *tls_cert, *tls_key;   /* PEM text, NULL without TLS */
        atomic_uint inflight;
        /* Of those, submits suspended until their commit (server_request.c): api_stop waits for
         * them past its timeout, since libmicrohttpd may not stop with a connection suspended. */
        atomic_uint submits_waiting;
        /* Suspended ?wait= reads. wait_lock is taken before libmicrohttpd's own locks (suspend,
         * resume) and never from its callbacks, so the order is always core_lock, wait_lock,
         * libmicrohttpd. */
        pthread_mutex_t wait_lock;
        struct request_ctx *waiters;
        unsigned n_waiters;
        bool stopping; /* answer every wait now */
        /* The level libmicrohttpd's messages are logged at (server_mhd_logger): warnings while
         * starting, debug after. */
        atomic_int mhd_log_level;
};

struct request_ctx {
        struct api_server *srv;
        enum http_method method;
        const struct route *route; /* NULL: no route matches the path */
        const char *pattern;       /* for metrics: the route, never the raw path */
        char *body;
        size_t len, cap;
        uint64_t discarded; /* bytes dropped after the body passed the cap */
        bool too_large;
        /* Answered on the socket itself, mid-body (server_request.c, answer_mid_body): the rest
         * is read and dropped, and the connection closed at the body's end. */
        bool answered_mid_body;
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
        char wait_id[WAIT_ID_MAX]; /* the job waited for; "": any job (a list) */
        /* A submit suspended until its commit is in (api_reply.submit_wait): answered by
         * handle_job_submit_end once resumed, or ended unanswered if the connection ends. */
        struct job_submit_wait *submit_wait;
};

/* server_conn.c */
/* Set the request deadline of c's connection (0: none). */
void server_conn_set_deadline(struct api_server *s, struct MHD_Connection *c, uint64_t deadline);
/* MHD_resume_connection, from any thread, and wake the thread that runs c's daemon
 * (libmicrohttpd 0.9.75 wakes no one when it runs no thread of its own). */
void server_conn_resume(struct api_server *s, struct MHD_Connection *c);
/* libmicrohttpd's accept policy and connection notification (cls: the struct http_worker). */
enum MHD_Result server_conn_on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen);
void server_conn_on_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                           enum MHD_ConnectionNotificationCode code);
/* The thread that cuts late requests and expires waits; stopped after every daemon is. */
int server_conn_reaper_start(struct api_server *s);
void server_conn_reaper_stop(struct api_server *s);
/* Raise the open-file limit for the listeners' connections and set s's connection counts. */
void server_conn_limits(struct api_server *s);

/* server_worker.c */
/* What api_stop asks of a worker (http_worker.want). */
enum { WORKER_RUN, WORKER_QUIESCE, WORKER_STOP };
/* Workers per listener: the configured http_threads, or the machine's CPUs up to a cap. */
unsigned server_worker_threads(const struct umd_config *cfg);
/* Start l's workers, each a daemon and its thread. 0 or -errno (logged). */
int server_worker_start_listener(struct api_server *s, struct listener *l);
void server_worker_wake(struct http_worker *w);
/* Join w's thread and stop its daemon. */
void server_worker_free(struct http_worker *w);

/* server_wait.c */
/* Hold the connection of a read that asked to wait. 0: suspended (libmicrohttpd calls
 * on_request again when it is resumed); -EAGAIN: a job changed since the handler read it, ask
 * again now; -ETIME: the deadline passed or umd is stopping, answer now; -EBUSY: max_waiters
 * are waiting already. */
int server_wait_suspend(struct MHD_Connection *c, struct request_ctx *r,
                        const struct api_reply *rep);
/* The jobs' listener (core_set_job_listener), called with core_lock held. */
void server_wait_job_changed(const char *id, void *userdata);
/* Resume waiters whose deadline passed (all of them when stopping); the earliest deadline
 * left, 0 when none. */
uint64_t server_wait_expire(struct api_server *s, uint64_t now);
/* Answer every ?wait= now; none may stay suspended when a daemon stops. */
void server_wait_stop(struct api_server *s);

/* server_request.c: libmicrohttpd's callbacks for requests. */
void server_mhd_logger(void *cls, const char *fmt, va_list ap);
enum MHD_Result server_on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls);
void server_on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe);
size_t server_on_unescape(void *cls, struct MHD_Connection *c, char *s);
