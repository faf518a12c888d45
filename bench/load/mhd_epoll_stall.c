/* Reproducer for the stall bench/load/run found on epoll with libmicrohttpd 0.9.75 (Debian 12),
 * and the configuration umd runs instead. Not part of the build:
 *   cc -O2 mhd_epoll_stall.c -o /tmp/stall -lmicrohttpd -lpthread
 *   /tmp/stall PORT MODE [THREADS]  &  wrk -t2 -c256 -d10s http://127.0.0.1:PORT/
 * MODE 0: MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, libmicrohttpd's threads on poll();
 * MODE 1: MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, libmicrohttpd's threads on epoll;
 * MODE 2: api/server.c's loop: THREADS daemons with MHD_USE_EPOLL and no internal thread,
 *         each on a dup of one listening socket, each run by a thread of ours that waits in
 *         poll() on the daemon's epoll fd for MHD_get_timeout and then calls MHD_run (umd
 *         also accepts itself, to spread connections evenly; the stall does not need that).
 * THREADS (default 1) is MHD_OPTION_THREAD_POOL_SIZE in modes 0 and 1. The handler answers in
 * the usual two steps (first call: set *con_cls and return; second: queue the reply).
 *
 * The cause (libmicrohttpd 0.9.75, src/microhttpd/daemon.c, MHD_epoll): the timeout is computed
 * once, before the loop "while (MAX_EVENTS == num_events)", and every epoll_wait in that loop
 * gets it. When one call returns all MAX_EVENTS (128) events, the loop calls epoll_wait again
 * with the same timeout; the connections just reported are on the ready list (eready), not yet
 * served, their clients wait for answers and send nothing, so that call sleeps for the whole
 * timeout (the earliest connection timeout, 30 s here). libmicrohttpd's own thread calls
 * MHD_epoll(daemon, -1) (MHD_polling_thread), so modes 1 and any pool size can stall; MHD_run
 * calls MHD_epoll(daemon, 0), so mode 2 cannot. Seen in gdb on a stalled mode 1 (0.9.75 built
 * from Debian's source): the thread in epoll_wait(timeout=29992) with all 256 connections on
 * eready, READ_READY, in MHD_CONNECTION_INIT with a request unread. The same source with
 * "timeout_ms = 0;" after that epoll_wait served 85k and 92k requests/s in mode 1. The
 * releases after 0.9.75 (0.9.76, 0.9.77, 1.0.x) do not name such a fix in NEWS.
 *
 * Measured 2026-12-02 on 2 cores shared with another engineer's builds, Debian's 0.9.75,
 * wrk -t2 -c256 -d10s --timeout 5s, one run after another, req/s:
 *   mode 2, 1 thread:  101607, 66442, 85835, 96121, 96424 (5 runs, none stalled)
 *   mode 2, 2 threads: 120054, 114286, 109826, 113265, 79722 (5 runs, none stalled)
 *   mode 1, 1 thread:  67, 66 (672 and 666 requests in 10 s: both stalled)
 *   mode 1, 2 threads: 52 (stalled), 83728, 66370
 *   mode 0, 1 thread:  43063, 74355;  2 threads: 82528, 71127
 * Mode 1 with 1 thread stalled in every run here, within the first second (wrk -d5s the same
 * day: 1,130 requests, then none); from a pool of two it stalls now and then, as umd did in
 * bench/load/run before api/server.c ran the loop itself. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_size, void **con_cls)
{
        static const char body[] = "{\"status\":\"ok\"}";
        static int seen;
        struct MHD_Response *r;
        enum MHD_Result ok;

        if (*con_cls == NULL) {
                *con_cls = &seen;
                return MHD_YES;
        }
        r = MHD_create_response_from_buffer(sizeof(body) - 1, (void *)body, MHD_RESPMEM_PERSISTENT);
        ok = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return ok;
}

static void *loop(void *arg)
{
        struct MHD_Daemon *d = arg;
        struct pollfd p = {.fd = MHD_get_daemon_info(d, MHD_DAEMON_INFO_EPOLL_FD)->epoll_fd,
                           .events = POLLIN};

        for (;;) {
                MHD_UNSIGNED_LONG_LONG left;
                int ms = 1000;

                if (MHD_get_timeout(d, &left) == MHD_YES && left < 1000)
                        ms = (int)left;
                (void)poll(&p, 1, ms);
                MHD_run(d);
        }
        return NULL;
}

static int listen_on(unsigned short port)
{
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons(port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;

        if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
            bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, SOMAXCONN) < 0)
                return -1;
        return fd;
}

int main(int argc, char **argv)
{
        unsigned threads = argc > 3 ? (unsigned)atoi(argv[3]) : 1;
        int mode, fd;

        if (argc < 3 || threads < 1)
                return 2;
        mode = atoi(argv[2]);
        fd = listen_on((unsigned short)atoi(argv[1]));
        if (fd < 0)
                return 1;
        if (mode == 0 || mode == 1) {
                unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC |
                                 (mode ? MHD_USE_EPOLL : MHD_USE_POLL);
                struct MHD_Daemon *d = MHD_start_daemon(
                    flags, 0, NULL, NULL, handler, NULL, MHD_OPTION_LISTEN_SOCKET, fd,
                    MHD_OPTION_CONNECTION_LIMIT, 1024u, MHD_OPTION_PER_IP_CONNECTION_LIMIT, 1024u,
                    MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_THREAD_POOL_SIZE,
                    threads > 1 ? threads : 0u, MHD_OPTION_END);
                if (!d)
                        return 1;
                pause();
                return 0;
        }
        for (unsigned i = 0; i < threads; i++) {
                struct MHD_Daemon *d = MHD_start_daemon(
                    MHD_USE_EPOLL, 0, NULL, NULL, handler, NULL, MHD_OPTION_LISTEN_SOCKET,
                    fcntl(fd, F_DUPFD_CLOEXEC, 0), MHD_OPTION_CONNECTION_LIMIT, 1025u,
                    MHD_OPTION_PER_IP_CONNECTION_LIMIT, 1024u, MHD_OPTION_CONNECTION_TIMEOUT, 30u,
                    MHD_OPTION_END);
                pthread_t t;

                if (!d || pthread_create(&t, NULL, loop, d) != 0)
                        return 1;
        }
        pause();
        return 0;
}
