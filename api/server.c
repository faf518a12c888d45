/* The HTTP server's listeners and connections: opens every listener (systemd's sockets first,
 * then TCP and the unix socket from the configuration), serves TCP over TLS when a certificate
 * is configured, runs one libmicrohttpd daemon per socket, each polling with poll() from a
 * pool of http_threads threads (one per CPU by default), loads the bearer tokens once, keeps a
 * reserve of connection slots for loopback and the unix socket, cuts connections whose request does
 * not arrive in time, and shuts down by quiescing, answering every waiter and draining. Requests
 * are server_request.c's; ?wait= reads are server_wait.c's. */
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

/* http_threads, or one per CPU online when it is 0: the default follows the machine, since two
 * threads capped reads and group commit alike on larger nodes (issue 23). */
static unsigned http_threads(const struct umd_config *cfg)
{
        long n;

        if (cfg->http_threads > 0)
                return cfg->http_threads;
        n = sysconf(_SC_NPROCESSORS_ONLN);
        return n < 1 ? 1u : n > 256 ? 256u : (unsigned)n;
}

static int start_daemon(struct api_server *s, struct listener *l)
{
        const struct umd_config *cfg = s->cfg;
        unsigned threads = http_threads(cfg);
        /* poll(), not epoll. libmicrohttpd 0.9.75's epoll loop leaves waiting connections
         * unserved under load until other traffic wakes it: with one thread always
         * (bench/load/mhd_epoll_stall.c: a few hundred req/s against ~100k with poll), and from
         * a pool of two now and then (bench/load/run, 2026-12-02: every one of 256 connections
         * waited over 5 s, 13k req/s against 56k). poll() walks each thread's descriptors on
         * every wake-up, microseconds with thousands of connections, and has stalled in no
         * run. */
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
            flags, 0, on_accept, s, server_on_request, s, MHD_OPTION_EXTERNAL_LOGGER,
            server_mhd_logger, NULL, MHD_OPTION_LISTEN_SOCKET, l->fd, MHD_OPTION_CONNECTION_LIMIT,
            (unsigned)cfg->max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
            (unsigned)(l->is_unix ? 0 : cfg->max_connections_per_ip), MHD_OPTION_CONNECTION_TIMEOUT,
            (unsigned)cfg->connection_timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
            (size_t)HTTP_CONNECTION_MEMORY, MHD_OPTION_NOTIFY_COMPLETED, server_on_completed, s,
            MHD_OPTION_UNESCAPE_CALLBACK, server_on_unescape, NULL, MHD_OPTION_NOTIFY_CONNECTION,
            on_connection, s, MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_ARRAY, tls_opts,
            MHD_OPTION_END);
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

static void server_free(struct api_server *s)
{
        server_wait_stop(s);
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

/* Descriptors beside the connections: the store's database and readers, the workers' pipes,
 * the listeners, log and the rest. */
#define NOFILE_SLACK 256

/* Each connection is a descriptor, so max_connections on every listener needs as many open
 * files: raise the soft limit toward the hard one (systemd's default soft limit is 1024, kept
 * low for programs that use select(); nothing in umd does). A limit still too low is said once
 * here; libmicrohttpd would otherwise refuse connections with no word as to why. */
static void nofile_raise(const struct umd_config *cfg, size_t n_listeners)
{
        rlim_t need = (rlim_t)cfg->max_connections * n_listeners + NOFILE_SLACK;
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= need)
                return;
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < need)
                log_warning("open files are limited to %llu, below the %llu that max_connections "
                            "(%u on %zu listener(s)) needs: connections beyond it are refused "
                            "(raise LimitNOFILE= or lower max_connections)",
                            (unsigned long long)rl.rlim_cur, (unsigned long long)need,
                            cfg->max_connections, n_listeners);
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
        /* The reaper's deadlines are CLOCK_MONOTONIC (with CLOCK_REALTIME the reaper spun). */
        cond_init_monotonic(&s->reaper_cond);
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

        nofile_raise(cfg, s->n_listeners);
        r = reaper_start(s);
        if (r < 0)
                goto fail;
        atomic_store(&server_mhd_log_level, LOG_WARNING);
        for (size_t i = 0; i < s->n_listeners; i++) {
                r = start_daemon(s, &s->listeners[i]);
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
        server_wait_stop(s);
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
