/* Reproducer for the stall bench/load/run found: libmicrohttpd 0.9.75 (Debian 12) with
 * MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, an access handler in the usual two steps
 * (first call: set *con_cls and return; second call: queue the reply), and 256 keep-alive
 * connections at once: the polling thread sleeps in epoll_wait() for the connection timeout while
 * requests wait on most connections (wrk: a few hundred requests/s). The same program with
 * MHD_USE_POLL serves ~100k requests/s. From a thread pool of two (MHD_OPTION_THREAD_POOL_SIZE 2)
 * this program did not stall in three 10 s runs, but umd on epoll from a pool of two did in
 * bench/load/run (2026-12-02: all 256 connections waited over 5 s in one of two runs), so umd
 * stays on poll(). Not part of the build:
 *   cc -O2 mhd_epoll_stall.c -o /tmp/stall -lmicrohttpd
 *   /tmp/stall 18480 1 & wrk -t2 -c256 -d5s http://127.0.0.1:18480/   # epoll: stalls
 *   /tmp/stall 18481 0 & wrk -t2 -c256 -d5s http://127.0.0.1:18481/   # poll: fine */
#include <microhttpd.h>
#include <stdlib.h>
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

int main(int argc, char **argv)
{
        unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC;
        struct MHD_Daemon *d;

        if (argc < 3)
                return 2;
        flags |= atoi(argv[2]) ? MHD_USE_EPOLL : MHD_USE_POLL;
        d = MHD_start_daemon(flags, (unsigned short)atoi(argv[1]), NULL, NULL, handler, NULL,
                             MHD_OPTION_CONNECTION_LIMIT, 1024u, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                             1024u, MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_END);
        if (!d)
                return 1;
        pause();
        return 0;
}
