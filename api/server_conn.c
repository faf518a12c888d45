/* The HTTP server's connections: each peer's class (trusted: loopback and the unix socket's root
 * and umd's user; shared: everyone else), the counts per listener, per address and per uid and
 * the slots kept for trusted peers, the request deadline the reaper thread enforces (and the
 * ?wait= deadlines it expires), resuming a suspended connection, and the open-file limit the
 * connections get at start. */
#include <arpa/inet.h>
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "netaddr.h"
#include "server_internal.h"
#include "util.h"

/* The connection's entry (set by server_conn_on_notify), or NULL. */
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
 * socket, -1 where it is not known yet (server_conn_on_accept): a unix-socket peer is then taken as
 * trusted, and server_conn_on_notify looks again with its uid. */
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
 * The workers accept at the same time, so server_conn_on_notify counts again and cuts what got
 * past. */
enum MHD_Result server_conn_on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
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

void server_conn_on_notify(void *cls, struct MHD_Connection *c, void **socket_context,
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

int server_conn_reaper_start(struct api_server *s)
{
        int r = pthread_create(&s->reaper, NULL, reaper_main, s);

        if (r != 0)
                return log_error_errno(r, "cannot start the HTTP request reaper: %m");
        s->reaper_started = true;
        pthread_setname_np(s->reaper, "umd-reaper");
        return 0;
}

/* After every daemon is stopped: no connection is left to cut. */
void server_conn_reaper_stop(struct api_server *s)
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

void server_conn_resume(struct api_server *s, struct MHD_Connection *c)
{
        struct conn *k = conn_of(c);
        /* Read before resuming: once resumed, the connection may end on its worker at once. */
        struct http_worker *w = k ? k->worker : NULL;

        MHD_resume_connection(c);
        if (w) {
                server_worker_wake(w);
                return;
        }
        /* An untracked connection (no memory for its entry): wake them all. */
        for (size_t i = 0; i < s->n_listeners; i++)
                for (unsigned j = 0; j < s->listeners[i].n_workers; j++)
                        if (s->listeners[i].workers[j].started)
                                server_worker_wake(&s->listeners[i].workers[j]);
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
void server_conn_limits(struct api_server *s)
{
        const struct umd_config *cfg = s->cfg;
        size_t n = s->n_listeners;
        rlim_t want = (rlim_t)cfg->max_connections * n, own = 2 * server_worker_threads(cfg) * n;
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
