/* The HTTP server's listeners and connections: opens every listener (systemd's sockets first,
 * then TCP and the unix socket from the configuration), serves TCP over TLS when a certificate
 * is configured, runs http_threads workers per socket (one per CPU up to 4 by default), each a
 * libmicrohttpd daemon on epoll run by a thread of umd's (why not libmicrohttpd's: see "workers"
 * below), loads the bearer tokens once, counts connections per listener, per address and per
 * unix-socket uid and keeps a reserve of slots and descriptors for 127.0.0.1, ::1 and the unix
 * socket's root, cuts connections whose request does not arrive in time, and shuts down by
 * quiescing, answering every waiter and draining. Requests are server_request.c's; ?wait= reads are
 * server_wait.c's. */
#include <arpa/inet.h>
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <limits.h>
#include <grp.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
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
#include "server_internal.h"
#include "util.h"

/* Each connection's memory pool in libmicrohttpd: the request line and headers, and the
 * response's headers. libmicrohttpd 0.9.75 zeroes the whole pool between two requests on a
 * kept-alive connection (a 32 KiB memset by default, 13% of umd's CPU per GET); 16 KiB still
 * holds request headers of up to about 14 KiB (measured: 14,000 bytes in one header served, 20,000
 * answered 431), and halves what a connection that carried a request takes. */
#define HTTP_CONNECTION_MEMORY (16 * 1024)
/* Certificate chains are a few KiB; refuse to read anything absurd. */
#define TLS_FILE_MAX (1024 * 1024)

/* The connection's entry (set by on_connection), or NULL. */
static struct conn *conn_of(struct MHD_Connection *c)
{
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

        return ci ? ci->socket_context : NULL;
}

void server_conn_set_deadline(struct api_server *s, struct MHD_Connection *c, uint64_t deadline)
{
        struct conn *k = conn_of(c);

        if (k)
                atomic_store_explicit(&k->deadline_ms, deadline, memory_order_relaxed);
}

/* ---- connections: request deadline, slots kept for the node's own checks ----
 *
 * Peers come in two classes. Trusted: 127.0.0.1, ::1 (the addresses umd-healthcheck, NHC and
 * umdctl use) and, on the unix socket, root and umd's own user (SO_PEERCRED). Shared: every
 * other peer, other 127.x addresses and other local users among them, since any local user can
 * connect from 127.0.0.2 or open the unix socket. Shared peers get at most max_connections less
 * a reserve on each listener, and at most the open-file room less a reserve over all of them;
 * trusted peers may take the reserves. Each address, and each uid on the unix socket, gets
 * max_connections_per_ip (a trusted uid is not counted: it could stop umd anyway); 127.0.0.1 is
 * one address like any other, so the unix socket is the path no other local user can block. */

enum peer_class { PEER_TRUSTED, PEER_SHARED };

/* 127.0.0.1, ::1 or ::ffff:127.0.0.1. */
static bool addr_is_own_loopback(const struct sockaddr *sa)
{
        if (sa->sa_family == AF_INET)
                return ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) == INADDR_LOOPBACK;
        if (sa->sa_family == AF_INET6) {
                const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
                static const unsigned char v4_loopback[4] = {127, 0, 0, 1};
                return IN6_IS_ADDR_LOOPBACK(a) ||
                       (IN6_IS_ADDR_V4MAPPED(a) && memcmp(a->s6_addr + 12, v4_loopback, 4) == 0);
        }
        return false;
}

/* The peer's class and the key it is counted under (false: not counted). fd: the connection's
 * socket, -1 where it is not known yet (on_accept): a unix-socket peer is then taken as
 * trusted, and on_connection looks again with its uid. */
static enum peer_class peer_classify(const struct sockaddr *sa, socklen_t len, int fd,
                                     unsigned char key[ADDR_KEY_LEN], bool *ret_keyed)
{
        struct ucred cred;
        socklen_t clen = sizeof(cred);

        memset(key, 0, ADDR_KEY_LEN);
        *ret_keyed = false;
        if (sa && sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
                key[0] = 4;
                memcpy(key + 1, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        } else if (sa && sa->sa_family == AF_INET6 &&
                   len >= (socklen_t)sizeof(struct sockaddr_in6)) {
                key[0] = 6;
                memcpy(key + 1, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        }
        if (key[0]) {
                *ret_keyed = true;
                return addr_is_own_loopback(sa) ? PEER_TRUSTED : PEER_SHARED;
        }
        /* A unix-socket peer (or none): its uid. */
        if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0)
                return PEER_TRUSTED;
        if (cred.uid == 0 || cred.uid == geteuid())
                return PEER_TRUSTED;
        key[0] = 1;
        memcpy(key + 1, &cred.uid, sizeof(cred.uid));
        *ret_keyed = true;
        return PEER_SHARED;
}

static size_t addr_bucket(const unsigned char key[ADDR_KEY_LEN])
{
        uint32_t h = 2166136261u; /* FNV-1a */

        for (int i = 0; i < ADDR_KEY_LEN; i++)
                h = (h ^ key[i]) * 16777619u;
        return h % ADDR_BUCKETS;
}

/* With conns_lock held: the entry of key, created (n 0) when create is set; NULL when there is
 * none, or no memory for it. */
static struct addr_count *addr_find_locked(struct api_server *s,
                                           const unsigned char key[ADDR_KEY_LEN], bool create)
{
        struct addr_count **head = &s->addrs[addr_bucket(key)];

        for (struct addr_count *a = *head; a; a = a->next)
                if (memcmp(a->key, key, ADDR_KEY_LEN) == 0)
                        return a;
        if (!create)
                return NULL;
        struct addr_count *a = calloc(1, sizeof(*a));
        if (!a)
                return NULL;
        memcpy(a->key, key, ADDR_KEY_LEN);
        a->next = *head;
        *head = a;
        return a;
}

/* With conns_lock held: one connection fewer from a, freed at none. */
static void addr_put_locked(struct api_server *s, struct addr_count *a)
{
        if (--a->n > 0)
                return;
        for (struct addr_count **p = &s->addrs[addr_bucket(a->key)]; *p; p = &(*p)->next)
                if (*p == a) {
                        *p = a->next;
                        break;
                }
        free(a);
}

/* With conns_lock held: whether one more connection of this class (and from a, NULL when not
 * counted by address) fits on l. */
static bool conn_fits_locked(const struct api_server *s, const struct listener *l,
                             enum peer_class class, const struct addr_count *a)
{
        if (l->held >= s->cfg->max_connections || s->held >= s->held_max)
                return false;
        if (class == PEER_SHARED && (l->shared >= s->shared_max_each || s->shared >= s->shared_max))
                return false;
        return !a || a->n < s->cfg->max_connections_per_ip;
}

/* A first look, before libmicrohttpd allocates anything: what it refuses, it closes at once.
 * The workers accept at the same time, so on_connection counts again and cuts what got past. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
        struct http_worker *w = cls;
        struct api_server *s = w->srv;
        unsigned char key[ADDR_KEY_LEN];
        bool keyed, ok;
        enum peer_class class = peer_classify(addr, addrlen, -1, key, &keyed);

        pthread_mutex_lock(&s->conns_lock);
        ok = conn_fits_locked(s, w->l, class, keyed ? addr_find_locked(s, key, false) : NULL);
        pthread_mutex_unlock(&s->conns_lock);
        return ok ? MHD_YES : MHD_NO;
}

/* With conns_lock held: count k in, or cut it (closed, unanswered, as libmicrohttpd does past
 * its limits) when it does not fit. */
static void conn_admit_locked(struct api_server *s, struct conn *k, enum peer_class class,
                              const unsigned char *key)
{
        struct listener *l = k->worker->l;
        struct addr_count *a = key ? addr_find_locked(s, key, true) : NULL;

        if ((key && !a) || !conn_fits_locked(s, l, class, a)) {
                if (a && a->n == 0) { /* just made for k: unmade */
                        a->n = 1;
                        addr_put_locked(s, a);
                }
                /* shutdown, not close: the fd is libmicrohttpd's to close. */
                (void)shutdown(k->fd, SHUT_RDWR);
                k->cut = true;
                return;
        }
        k->counted = true;
        k->shared = class == PEER_SHARED;
        k->addr = a;
        if (a)
                a->n++;
        l->held++;
        s->held++;
        if (k->shared) {
                l->shared++;
                s->shared++;
        }
}

/* With conns_lock held: what conn_admit_locked counted, given back. */
static void conn_release_locked(struct api_server *s, struct conn *k)
{
        struct listener *l = k->worker->l;

        if (!k->counted)
                return;
        l->held--;
        s->held--;
        if (k->shared) {
                l->shared--;
                s->shared--;
        }
        if (k->addr)
                addr_put_locked(s, k->addr);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
        struct http_worker *w = cls;
        struct api_server *s = w->srv;
        struct conn *k = *socket_context;

        if (code == MHD_CONNECTION_NOTIFY_STARTED) {
                const union MHD_ConnectionInfo *fd_info =
                    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
                const union MHD_ConnectionInfo *addr_info =
                    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
                const struct sockaddr *sa = addr_info ? addr_info->client_addr : NULL;
                unsigned char key[ADDR_KEY_LEN];
                bool keyed;

                k = calloc(1, sizeof(*k));
                if (!k || !fd_info) {
                        /* Untracked, the idle timeout still bounds it. */
                        free(k);
                        return;
                }
                k->worker = w;
                k->fd = fd_info->connect_fd;
                /* libmicrohttpd keeps the address accept gave, of its true length. */
                enum peer_class class =
                    peer_classify(sa, sizeof(struct sockaddr_storage), k->fd, key, &keyed);
                k->deadline_ms = now_monotonic_ms() + 1000ull * s->cfg->request_timeout_s;
                pthread_mutex_lock(&s->conns_lock);
                k->next = s->conns;
                if (s->conns)
                        s->conns->prev = k;
                s->conns = k;
                conn_admit_locked(s, k, class, keyed ? key : NULL);
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
        conn_release_locked(s, k);
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

                for (struct conn *k = s->conns; k; k = k->next) {
                        uint64_t deadline =
                            atomic_load_explicit(&k->deadline_ms, memory_order_relaxed);

                        if (!k->cut && deadline && now >= deadline) {
                                /* shutdown, not close: the fd is libmicrohttpd's to close. */
                                (void)shutdown(k->fd, SHUT_RDWR);
                                k->cut = true;
                                cut++;
                        }
                }
                if (cut)
                        log_debug("http: closed %u connection(s) whose request did not arrive "
                                  "within request_timeout_s (%us)",
                                  cut, s->cfg->request_timeout_s);
                /* Waits end on time to the tick: their deadline, or 250 ms, whichever is
                 * first. wait_lock is never taken with conns_lock held. */
                pthread_mutex_unlock(&s->conns_lock);
                uint64_t next = server_wait_expire(s, now), step = 250;
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
        pthread_setname_np(s->reaper, "umd-reaper");
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

/* The default follows the machine up to a cap (config_http_threads says why). */
static unsigned http_threads(const struct umd_config *cfg)
{
        return config_http_threads(cfg, sysconf(_SC_NPROCESSORS_ONLN));
}

/* ---- workers: libmicrohttpd on epoll, each daemon run by a thread of umd's ----
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
 * Each listener gets http_threads workers, each with its own daemon (MHD_USE_NO_LISTEN_SOCKET).
 * The workers accept themselves and hand each connection to their daemon (MHD_add_connection, which
 * applies the same limits and on_accept): on epoll, 0.9.75 accepts up to ten connections a run
 * (on poll one), so a burst of connections went 181 to one thread and 75 to the other, and one
 * core served 70% of the requests. A worker polls the listening socket only while it holds at
 * most ACCEPT_SLACK more than the least loaded worker, so some worker always accepts: a
 * connection past the limits (on_accept) is closed at once, never left in the backlog, where
 * the node's own check would wait behind a flood (issue 57). A split of max_connections among
 * the workers, as libmicrohttpd's pool made, would refuse a trusted peer at a full worker while
 * another has room: each daemon's own limit is the listener's, a backstop. Without an internal
 * thread 0.9.75 keeps no inter-thread channel (MHD_USE_ITC is dropped), so a connection resumed
 * from another thread must wake its worker (server_conn_resume). */

enum { WORKER_RUN, WORKER_QUIESCE, WORKER_STOP };

/* How many connections a worker may hold beyond the least loaded one and still accept. */
#define ACCEPT_SLACK 8
/* After accept failed for want of descriptors or memory: how long the worker leaves the
 * listening socket alone (it stays readable; polling it would spin). */
#define ACCEPT_BACKOFF_MS 100

static void worker_wake(struct http_worker *w)
{
        uint64_t one = 1;

        /* Fails only when the counter is full: the worker has a wake-up pending anyway. */
        (void)!write(w->wake_fd, &one, sizeof(one));
}

void server_conn_resume(struct api_server *s, struct MHD_Connection *c)
{
        struct conn *k = conn_of(c);
        /* Read before resuming: once resumed, the connection may end on its worker at once. */
        struct http_worker *w = k ? k->worker : NULL;

        MHD_resume_connection(c);
        if (w) {
                worker_wake(w);
                return;
        }
        /* An untracked connection (no memory for its entry): wake them all. */
        for (size_t i = 0; i < s->n_listeners; i++)
                for (unsigned j = 0; j < s->listeners[i].n_workers; j++)
                        if (s->listeners[i].workers[j].started)
                                worker_wake(&s->listeners[i].workers[j]);
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
                /* Closes fd itself when it refuses (a limit, on_accept, no memory). */
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
                                        worker_wake(&w->l->workers[i]);
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
        worker_wake(w);
        pthread_join(w->thread, NULL);
        w->started = false;
}

static void worker_free(struct http_worker *w)
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
         * per-IP count is this daemon's alone, a backstop: on_accept and on_connection count
         * every worker's. Per-IP limits mean nothing on a unix socket (no address). */
        w->daemon = MHD_start_daemon(
            flags, 0, on_accept, w, server_on_request, s, MHD_OPTION_EXTERNAL_LOGGER,
            server_mhd_logger, NULL, MHD_OPTION_CONNECTION_LIMIT, limit,
            MHD_OPTION_PER_IP_CONNECTION_LIMIT,
            (unsigned)(l->is_unix ? 0 : cfg->max_connections_per_ip), MHD_OPTION_CONNECTION_TIMEOUT,
            (unsigned)cfg->connection_timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
            (size_t)HTTP_CONNECTION_MEMORY, MHD_OPTION_NOTIFY_COMPLETED, server_on_completed, s,
            MHD_OPTION_UNESCAPE_CALLBACK, server_on_unescape, NULL, MHD_OPTION_NOTIFY_CONNECTION,
            on_connection, w, MHD_OPTION_ARRAY, tls_opts, MHD_OPTION_END);
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

static int start_listener(struct api_server *s, struct listener *l)
{
        unsigned threads = http_threads(s->cfg), max = s->cfg->max_connections;
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

static void server_free(struct api_server *s)
{
        server_wait_stop(s);
        for (size_t i = 0; i < s->n_listeners; i++) {
                struct listener *l = &s->listeners[i];
                for (unsigned j = 0; j < l->n_workers; j++)
                        worker_free(&l->workers[j]);
                free(l->workers);
                if (l->fd >= 0)
                        close(l->fd);
        }
        reaper_stop(s);
        for (size_t i = 0; i < ADDR_BUCKETS; i++)
                for (struct addr_count *a = s->addrs[i], *n; a; a = n) {
                        n = a->next;
                        free(a);
                }
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

/* Descriptors beside the connections that umd may open after start-up (workers' pipes, the
 * store's pooled readers, a core dump of a worker's log): held back from the connections. A
 * low limit holds back a quarter of itself instead. */
#define NOFILE_SLACK 256

/* The slots of n kept for trusted peers: an eighth, at least one (none of one). */
static unsigned conn_reserve(unsigned n)
{
        return n >= 2 ? (n / 8 ?: 1) : 0;
}

/* Descriptors open now, 0 when /proc cannot say. */
static unsigned fds_open(void)
{
        DIR *d = opendir("/proc/self/fd");
        unsigned n = 0;

        if (!d)
                return 0;
        while (readdir(d))
                n++;
        closedir(d);
        /* ".", ".." and the directory's own descriptor */
        return n > 3 ? n - 3 : 0;
}

/* Each connection is a descriptor, so max_connections on every listener needs as many open
 * files: raise the soft limit toward the hard one (systemd's default soft limit is 1024, kept
 * low for programs that use select(); nothing in umd does). Then the connections get what the
 * limit leaves, less what umd opens later: past that, accept would fail with EMFILE for every
 * peer alike, the unix socket's too, and the connections would wait in the backlog. Said at
 * start, with a warning when max_connections cannot be reached. */
static void conn_limits(struct api_server *s)
{
        const struct umd_config *cfg = s->cfg;
        size_t n = s->n_listeners;
        rlim_t want = (rlim_t)cfg->max_connections * n, own = 2 * http_threads(cfg) * n;
        rlim_t in_use = fds_open(), held_back, room;
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                rl.rlim_cur = rl.rlim_max = RLIM_INFINITY;
        if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want + own + in_use + NOFILE_SLACK) {
                rlim_t need = want + own + in_use + NOFILE_SLACK;
                struct rlimit up = rl;
                up.rlim_cur =
                    rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
                if (setrlimit(RLIMIT_NOFILE, &up) == 0)
                        rl = up;
        }
        held_back = rl.rlim_cur == RLIM_INFINITY     ? 0
                    : rl.rlim_cur / 4 < NOFILE_SLACK ? rl.rlim_cur / 4
                                                     : NOFILE_SLACK;
        room = rl.rlim_cur == RLIM_INFINITY             ? want
               : rl.rlim_cur > in_use + own + held_back ? rl.rlim_cur - in_use - own - held_back
                                                        : 1;
        s->held_max = (unsigned)(want < room ? want : room);
        s->shared_max = s->held_max - conn_reserve(s->held_max);
        s->shared_max_each = cfg->max_connections - conn_reserve(cfg->max_connections);
        log_info("open files: at most %llu (hard limit %llu), %llu open: %u connection(s) over "
                 "%zu listener(s), %u of them kept for 127.0.0.1, ::1 and the unix socket",
                 (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max,
                 (unsigned long long)in_use, s->held_max, n, s->held_max - s->shared_max);
        if (s->held_max < want)
                log_warning("open files are limited to %llu: at most %u connections, below the "
                            "%llu that max_connections (%u on %zu listener(s)) allows; connections "
                            "beyond are refused (raise LimitNOFILE= or lower max_connections)",
                            (unsigned long long)rl.rlim_cur, s->held_max, (unsigned long long)want,
                            cfg->max_connections, n);
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
        atomic_init(&s->submits_waiting, 0);
        pthread_mutex_init(&s->conns_lock, NULL);
        pthread_mutex_init(&s->wait_lock, NULL);
        /* The reaper's deadlines are CLOCK_MONOTONIC (with CLOCK_REALTIME the reaper spun). */
        cond_init_monotonic(&s->reaper_cond);
        api_wait_max_s = cfg->wait_max_s;
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

        conn_limits(s);
        r = reaper_start(s);
        if (r < 0)
                goto fail;
        atomic_store(&server_mhd_log_level, LOG_WARNING);
        for (size_t i = 0; i < s->n_listeners; i++) {
                r = start_listener(s, &s->listeners[i]);
                if (r < 0)
                        goto fail;
        }
        atomic_store(&server_mhd_log_level, LOG_DEBUG);
        core_set_job_listener(server_wait_job_changed, s);
        *ret = s;
        return 0;

fail:
        server_free(s);
        return r;
}

void api_stop(struct api_server *s, unsigned timeout_ms)
{
        struct timespec pause = {.tv_nsec = 10 * 1000 * 1000};
        struct timespec tick = {.tv_nsec = 1000 * 1000};
        uint64_t deadline;
        unsigned left;

        if (!s)
                return;
        /* Stop accepting everywhere first, then drain: each worker stops polling its listener's
         * socket (umd's to close, in server_free), and says so. */
        for (size_t i = 0; i < s->n_listeners; i++)
                for (unsigned j = 0; j < s->listeners[i].n_workers; j++) {
                        struct http_worker *w = &s->listeners[i].workers[j];
                        if (!w->started)
                                continue;
                        atomic_store(&w->want, WORKER_QUIESCE);
                        worker_wake(w);
                }
        for (size_t i = 0; i < s->n_listeners; i++)
                for (unsigned j = 0; j < s->listeners[i].n_workers; j++) {
                        struct http_worker *w = &s->listeners[i].workers[j];
                        while (w->started && !atomic_load(&w->quiesced))
                                nanosleep(&tick, NULL);
                }
        /* Waiting reads are answered with what there is, then drain like any request. */
        server_wait_stop(s);
        deadline = now_monotonic_ms() + timeout_ms;
        /* A submit waiting for its commit is answered when the writer commits: it is waited
         * for whatever the timeout, as a thread blocked in that wait was before. */
        while ((left = atomic_load(&s->inflight)) > 0 &&
               (now_monotonic_ms() < deadline || atomic_load(&s->submits_waiting) > 0))
                nanosleep(&pause, NULL);
        if (left > 0)
                log_warning("stopping the HTTP server with %u request(s) unfinished", left);
        /* server_free joins the workers, stops the daemons and closes the sockets. */
        server_free(s);
}

size_t api_listener_count(const struct api_server *s)
{
        return s ? s->n_listeners : 0;
}
