/* The HTTP server's workers: for each listener, server_worker_threads threads, each running a
 * libmicrohttpd daemon of its own on epoll, accepting connections itself while it is not too far
 * ahead of the least loaded, and stopping (quiesce, then stop) when api_stop asks. Why umd runs
 * the loop and accepts, and not libmicrohttpd, is said below. */
#include <errno.h>
#include <limits.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "server_internal.h"
#include "util.h"

/* Each connection's memory pool in libmicrohttpd: the request line and headers, and the
 * response's headers. libmicrohttpd 0.9.75 zeroes the whole pool between two requests on a
 * kept-alive connection (a 32 KiB memset by default, 13% of umd's CPU per GET); 16 KiB still
 * holds request headers of up to about 14 KiB (measured: 14,000 bytes in one header served, 20,000
 * answered 431), and halves what a connection that carried a request takes. */
#define HTTP_CONNECTION_MEMORY (16 * 1024)

/* ---- libmicrohttpd on epoll, each daemon run by a thread of umd's ----
 *
 * Why not libmicrohttpd's own threads: its internal polling thread (alone or in a pool) stalls
 * on epoll in 0.9.75. MHD_epoll (src/microhttpd/daemon.c) computes one timeout before its
 * loop "while (MAX_EVENTS == num_events)" and passes it to every epoll_wait in the loop: when
 * one call returns all 128 (MAX_EVENTS) events, the next blocks for that timeout (the
 * connection timeout, 30 s) although the connections just reported are on the ready list,
 * unserved; their clients wait for the answer and send nothing, so no event ends the wait. Any
 * thread with 128 connections ready at once can stall (bench/load/mhd_epoll_stall.c, one
 * thread, 256 wrk connections: about 670 requests in 10 s, then nothing; the same source with
 * 0 ms after the first call: 85k requests/s; a loop like the one below: 66k to 102k, never
 * stalled). libmicrohttpd's own thread always calls MHD_epoll with "wait as long as needed"
 * (-1); MHD_run calls it with 0, so every epoll_wait in that loop returns at once, and the
 * worker below waits in poll() instead, for as long as MHD_get_timeout says (0 while any
 * connection is ready). Edge-triggered epoll then costs each wake-up what is ready, not every
 * descriptor the thread holds, as poll() did.
 *
 * Each listener gets server_worker_threads workers, each with its own daemon
 * (MHD_USE_NO_LISTEN_SOCKET). The workers accept themselves and hand each connection to their
 * daemon (MHD_add_connection, which applies the same limits and server_conn_on_accept): on epoll,
 * 0.9.75 accepts up to ten connections a run (on poll one), so a burst of connections went 181 to
 * one thread and 75 to the other, and one core served 70% of the requests. A worker polls the
 * listening socket only while it holds at most ACCEPT_SLACK more than the least loaded worker, so
 * some worker always accepts: a connection past the limits (server_conn_on_accept) is closed at
 * once, never left in the backlog, where the node's own check would wait behind a flood (issue 57).
 * A split of max_connections among the workers, as libmicrohttpd's pool made, would refuse a
 * trusted peer at a full worker while another has room: each daemon's own limit is the listener's,
 * a backstop. Without an internal thread 0.9.75 keeps no inter-thread channel (MHD_USE_ITC is
 * dropped), so a connection resumed from another thread must wake its worker (server_conn_resume).
 */

/* How many connections a worker may hold beyond the least loaded one and still accept. */
#define ACCEPT_SLACK 8
/* After accept failed for want of descriptors or memory: how long the worker leaves the
 * listening socket alone (it stays readable; polling it would spin). */
#define ACCEPT_BACKOFF_MS 100

void server_worker_wake(struct http_worker *w)
{
        uint64_t one = 1;

        /* Fails only when the counter is full: the worker has a wake-up pending anyway. */
        (void)!write(w->wake_fd, &one, sizeof(one));
}

/* Connections the daemon holds, the count its limit is checked against. */
static unsigned worker_connections(struct http_worker *w)
{
        const union MHD_DaemonInfo *info =
            MHD_get_daemon_info(w->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);

        return info ? info->num_connections : 0;
}

/* Whether w should take the next connection: not ACCEPT_SLACK ahead of the least loaded worker
 * of its listener (that one always may). */
static bool worker_may_accept(const struct http_worker *w, unsigned held)
{
        unsigned least = held;

        for (unsigned i = 0; i < w->l->n_workers; i++) {
                unsigned h = atomic_load_explicit(&w->l->workers[i].held, memory_order_relaxed);
                if (w->l->workers[i].started && h < least)
                        least = h;
        }
        return held <= least + ACCEPT_SLACK;
}

/* Accept what is waiting while w may; false when accept ran out of descriptors or memory. */
static bool worker_accept(struct http_worker *w, unsigned *held)
{
        while (worker_may_accept(w, *held)) {
                struct sockaddr_storage ss;
                socklen_t len = sizeof(ss);
                int fd =
                    accept4(w->l->fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);

                if (fd < 0) {
                        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                            errno == ENOMEM) {
                                log_debug("http: cannot accept on %s: %m", w->l->name);
                                return false;
                        }
                        /* EAGAIN: another worker took it, or nothing more waits; a connection
                         * that failed before it was accepted (ECONNABORTED) is gone. */
                        if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
                                continue;
                        return true;
                }
                /* Closes fd itself when it refuses (a limit, server_conn_on_accept, no memory). */
                if (MHD_add_connection(w->daemon, fd, (struct sockaddr *)&ss, len) == MHD_YES)
                        (*held)++;
                atomic_store_explicit(&w->held, *held, memory_order_relaxed);
        }
        return true;
}

static void *worker_main(void *arg)
{
        struct http_worker *w = arg;
        struct pollfd p[3] = {{.fd = w->epoll_fd, .events = POLLIN},
                              {.fd = w->wake_fd, .events = POLLIN},
                              {.fd = w->l->fd, .events = POLLIN}};
        uint64_t backoff_until = 0;
        bool accepting = false;
        unsigned held = 0;

        for (;;) {
                int want = atomic_load(&w->want);
                bool was_accepting = accepting;
                MHD_UNSIGNED_LONG_LONG left;
                uint64_t now, n;
                int ms = -1;

                if (want == WORKER_STOP)
                        break;
                if (want == WORKER_QUIESCE && !atomic_load(&w->quiesced))
                        atomic_store(&w->quiesced, true);
                now = now_monotonic_ms();
                accepting =
                    want == WORKER_RUN && now >= backoff_until && worker_may_accept(w, held);
                /* The peers may have left the listening socket to this worker. */
                if (was_accepting && !accepting && want == WORKER_RUN)
                        for (unsigned i = 0; i < w->l->n_workers; i++)
                                if (&w->l->workers[i] != w && w->l->workers[i].started)
                                        server_worker_wake(&w->l->workers[i]);
                if (MHD_get_timeout(w->daemon, &left) == MHD_YES)
                        ms = left > INT_MAX ? INT_MAX : (int)left;
                if (now < backoff_until && (ms < 0 || (uint64_t)ms > backoff_until - now))
                        ms = (int)(backoff_until - now);
                if (poll(p, accepting ? 3 : 2, ms) < 0 && errno != EINTR) {
                        /* EINVAL and ENOMEM only; the worker stays, for api_stop's requests. */
                        struct timespec pause = {.tv_nsec = 100 * 1000 * 1000};
                        log_error_errno(-errno, "http: poll: %m");
                        nanosleep(&pause, NULL);
                        continue;
                }
                if (p[1].revents & POLLIN)
                        (void)!read(w->wake_fd, &n, sizeof(n));
                if (accepting && (p[2].revents & POLLIN) && !worker_accept(w, &held))
                        backoff_until = now_monotonic_ms() + ACCEPT_BACKOFF_MS;
                MHD_run(w->daemon);
                held = worker_connections(w);
                atomic_store_explicit(&w->held, held, memory_order_relaxed);
        }
        return NULL;
}

/* Asks w's thread to end and waits for it; the daemon stays, to be stopped. */
static void worker_join(struct http_worker *w)
{
        if (!w->started)
                return;
        atomic_store(&w->want, WORKER_STOP);
        server_worker_wake(w);
        pthread_join(w->thread, NULL);
        w->started = false;
}

void server_worker_free(struct http_worker *w)
{
        worker_join(w);
        if (w->daemon)
                MHD_stop_daemon(w->daemon);
        w->daemon = NULL;
        if (w->wake_fd >= 0)
                close(w->wake_fd);
        w->wake_fd = -1;
}

static int start_worker(struct api_server *s, struct listener *l, struct http_worker *w,
                        unsigned limit)
{
        const struct umd_config *cfg = s->cfg;
        unsigned flags =
            MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
        bool tls = s->tls_cert && !l->is_unix;
        /* libmicrohttpd copies neither string: both stay in s until the daemon stops. */
        struct MHD_OptionItem tls_opts[] = {
            {tls ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, s->tls_key},
            {MHD_OPTION_HTTPS_MEM_CERT, 0, s->tls_cert},
            {MHD_OPTION_END, 0, NULL},
        };
        const union MHD_DaemonInfo *info;
        int r;

        w->srv = s;
        w->l = l;
        w->limit = limit;
        atomic_init(&w->held, 0);
        atomic_init(&w->want, WORKER_RUN);
        atomic_init(&w->quiesced, false);
        w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (w->wake_fd < 0)
                return log_error_errno(-errno, "cannot start the HTTP server on %s: %m", l->name);
        if (tls)
                flags |= MHD_USE_TLS;

        /* libmicrohttpd's defaults are no timeout and no connection limits: set all three. Its
         * per-IP count is this daemon's alone, a backstop: server_conn_on_accept and
         * server_conn_on_notify count every worker's. Per-IP limits mean nothing on a unix socket
         * (no address). */
        w->daemon = MHD_start_daemon(
            flags, 0, server_conn_on_accept, w, server_on_request, s, MHD_OPTION_EXTERNAL_LOGGER,
            server_mhd_logger, s, MHD_OPTION_CONNECTION_LIMIT, limit,
            MHD_OPTION_PER_IP_CONNECTION_LIMIT,
            (unsigned)(l->is_unix ? 0 : cfg->max_connections_per_ip), MHD_OPTION_CONNECTION_TIMEOUT,
            (unsigned)cfg->connection_timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
            (size_t)HTTP_CONNECTION_MEMORY, MHD_OPTION_NOTIFY_COMPLETED, server_on_completed, s,
            MHD_OPTION_UNESCAPE_CALLBACK, server_on_unescape, NULL, MHD_OPTION_NOTIFY_CONNECTION,
            server_conn_on_notify, w, MHD_OPTION_ARRAY, tls_opts, MHD_OPTION_END);
        if (!w->daemon) {
                if (tls)
                        log_error("cannot start HTTPS on %s: tls_cert %s and tls_key %s are not a "
                                  "valid PEM certificate and its private key",
                                  l->name, s->cfg->tls_cert, s->cfg->tls_key);
                else
                        log_error("cannot start the HTTP server on %s", l->name);
                return -EIO;
        }
        info = MHD_get_daemon_info(w->daemon, MHD_DAEMON_INFO_EPOLL_FD);
        if (!info || info->epoll_fd < 0) {
                log_error("cannot start the HTTP server on %s: no epoll descriptor", l->name);
                return -EIO;
        }
        w->epoll_fd = info->epoll_fd;
        r = pthread_create(&w->thread, NULL, worker_main, w);
        if (r != 0)
                return log_error_errno(r, "cannot start an HTTP thread for %s: %m", l->name);
        w->started = true;
        pthread_setname_np(w->thread, "umd-http");
        return 0;
}

int server_worker_start_listener(struct api_server *s, struct listener *l)
{
        unsigned threads = server_worker_threads(s->cfg), max = s->cfg->max_connections;
        int r;

        /* Every worker takes at least one connection. */
        if (threads > max)
                threads = max;
        l->workers = calloc(threads, sizeof(*l->workers));
        if (!l->workers)
                return -ENOMEM;
        for (unsigned i = 0; i < threads; i++)
                l->workers[i].wake_fd = -1;
        l->n_workers = threads;
        for (unsigned i = 0; i < threads; i++) {
                r = start_worker(s, l, &l->workers[i], max);
                if (r < 0)
                        return r;
        }
        log_info("listening on %s", l->name);
        return 0;
}

/* The default follows the machine up to a cap (config_http_threads says why). */
unsigned server_worker_threads(const struct umd_config *cfg)
{
        return config_http_threads(cfg, sysconf(_SC_NPROCESSORS_ONLN));
}
