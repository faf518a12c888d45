/* The HTTP server: opens every listener (systemd's sockets first, then TCP and the unix socket
 * from the configuration), serves TCP over TLS when a certificate is configured, loads the bearer
 * tokens once, refuses to start exposed beyond loopback when told to, and shuts down by
 * quiescing, answering every waiter and draining. Connections are server_conn.c's (counts,
 * the reserve for 127.0.0.1, ::1 and the unix socket's root, the request deadline), the threads
 * that serve them server_worker.c's (http_threads per socket, one per CPU up to 4 by default),
 * requests server_request.c's, ?wait= reads server_wait.c's. */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
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

/* An IPv4-mapped IPv6 address (::ffff:a.b.c.d, RFC 4291 2.5.5.2) holds its IPv4 address from this
 * byte on. */
#define V4MAPPED_V4_AT 12

/* Certificate chains are a few KiB; refuse to read anything absurd. */
#define TLS_FILE_MAX (1024 * 1024)

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

static void server_free(struct api_server *s)
{
        server_wait_stop(s);
        for (size_t i = 0; i < s->n_listeners; i++) {
                struct listener *l = &s->listeners[i];
                for (unsigned j = 0; j < l->n_workers; j++)
                        server_worker_free(&l->workers[j]);
                free(l->workers);
                if (l->fd >= 0)
                        close(l->fd);
        }
        server_conn_reaper_stop(s);
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
                       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[V4MAPPED_V4_AT] == 127);
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

/* systemd's sockets, or else the configured TCP addresses and unix socket, as s's listeners.
 * 0 or -errno (logged); what was opened is s's to close. */
static int open_listeners(struct api_server *s, int n_fds)
{
        const struct umd_config *cfg = s->cfg;
        int r;

        for (int i = 0; i < n_fds; i++) {
                int fd = SD_LISTEN_FDS_START + i;
                struct listener *l;

                r = take_activated(fd);
                if (r < 0)
                        return r;
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
                        return r;
                snprintf(listener_add(s, fd, false)->name, LISTEN_NAME_MAX, "%s://%s",
                         s->tls_cert ? "https" : "http", cfg->listen[i]);
        }
        if (n_fds == 0 && cfg->unix_socket && cfg->unix_socket[0]) {
                int fd = -1;

                r = open_unix(cfg, &fd);
                if (r < 0)
                        return r;
                s->unix_path = strdup(cfg->unix_socket);
                snprintf(listener_add(s, fd, true)->name, LISTEN_NAME_MAX, "unix:%s",
                         cfg->unix_socket);
                if (!s->unix_path)
                        return -ENOMEM;
        }
        if (s->n_listeners == 0) {
                log_error("nothing to listen on: no --listen, no unix socket, no sockets from "
                          "systemd");
                return -EINVAL;
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
        atomic_init(&s->submits_waiting, 0);
        atomic_init(&s->mhd_log_level, LOG_WARNING);
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
        r = open_listeners(s, n_fds);
        if (r < 0)
                goto fail;

        r = check_exposure(s);
        if (r < 0)
                goto fail;

        server_conn_limits(s);
        r = server_conn_reaper_start(s);
        if (r < 0)
                goto fail;
        atomic_store(&s->mhd_log_level, LOG_WARNING);
        for (size_t i = 0; i < s->n_listeners; i++) {
                r = server_worker_start_listener(s, &s->listeners[i]);
                if (r < 0)
                        goto fail;
        }
        atomic_store(&s->mhd_log_level, LOG_DEBUG);
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
                        server_worker_wake(w);
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
