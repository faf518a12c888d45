/* umd-worker: lists the host's GPUs (--list), or owns one GPU (or one fake device) and serves
 * umd's protocol (common/ipc.h) on an inherited socket. Never HTTP, never a queue: one job at a
 * time, as umd sends them.
 *
 * The node worker (--device all) opens every GPU and runs only the benchmarks that span GPUs
 * (catalog multi_gpu); a per-GPU worker refuses those. Keeping them in their own process means
 * a cross-GPU job that crashes or hangs takes down only this process, never a GPU's own worker
 * (docs/design.md, "Work across GPUs").
 *
 * Threads: the main thread reads umd's messages; a runner thread runs jobs; a heartbeat thread
 * says "alive" every --heartbeat-ms, also while a job runs (so a hung GPU is found by its job's
 * deadline, not mistaken for a hung worker). Every write to the socket holds send_lock.
 *
 * Devices: only through backend.h, the one interface real GPUs (backend_cuda.c, or
 * backend_nocuda.c) and fake devices (backend_fake.c, --fake) implement; benchmarks are named by
 * their catalog id.
 *
 * Limits: --max-buffer-bytes, --pool-bytes and --managed-reserve-bytes (umd passes its
 * configuration) are fixed for the process, because the CUDA context and its buffer pool are
 * created once with them; they arrive this one way (a run message carries none), and a run's
 * params are normalised and checked against them once, by backend_prepare().
 *
 * Idle release: the runner gives back the buffer pool once idle for --pool-idle-ms (pinned host
 * memory belongs to the node's users). Exiting when idle is umd's decision (it sends shutdown),
 * so a job is never sent to a worker that is leaving. Every result says where the worker ran
 * (CPUs, NUMA policy, the GPU's node) and whether the pool had been given back. */
#include "backend.h"
#include "catalog.h"
#include "conditions.h"
#include "ipc.h"
#include "jsonutil.h"
#include "log.h"
#include "placement.h"
#include "size.h"
#include "util.h"
#include "uuid.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "umd-build.h"
#include "umd-vcs.h"

#define HEARTBEAT_MS_DEFAULT 1000u
#define SHUTDOWN_WAIT_MS     2000u

struct worker {
        int fd;
        bool fake;
        json_t *device; /* the --list entry, sent in hello (node: {"index":"all",...}) */
        const struct backend_ops *ops;
        struct backend *backend;
        bool multi; /* the node worker: --device all */
        struct backend_args args;
        unsigned heartbeat_ms;
        uint64_t pool_idle_ms;
        bool pool_held;     /* a job may have left buffers in the pool */
        bool pool_released; /* given back since the last job */

        pthread_mutex_t send_lock;

        pthread_mutex_t lock; /* everything below */
        pthread_cond_t cond;  /* CLOCK_MONOTONIC */
        json_t *pending;      /* accepted run message the runner has not taken yet */
        char job[JOB_ID_MAX]; /* accepted or running job, "" when none */
        bool busy;
        bool stopping;
        bool runner_done;
        volatile sig_atomic_t cancel;
};

static int send_msg(struct worker *w, json_t *msg)
{
        int r;

        if (!msg)
                return log_error_errno(ENOMEM, "Cannot build a message");
        pthread_mutex_lock(&w->send_lock);
        r = ipc_send(w->fd, msg);
        pthread_mutex_unlock(&w->send_lock);
        json_decref(msg);
        if (r < 0)
                log_warning_errno(r, "Cannot write to umd: %m");
        return r;
}

static void *heartbeat_main(void *arg)
{
        struct worker *w = arg;

        pthread_mutex_lock(&w->lock);
        while (!w->stopping) {
                struct timespec ts;
                bool busy;

                deadline_after_ms(CLOCK_MONOTONIC, w->heartbeat_ms, &ts);
                while (!w->stopping && pthread_cond_timedwait(&w->cond, &w->lock, &ts) == 0)
                        ;
                if (w->stopping)
                        break;
                busy = w->busy;
                pthread_mutex_unlock(&w->lock);
                send_msg(w, json_pack("{s:s, s:b}", "type", "heartbeat", "busy", busy));
                pthread_mutex_lock(&w->lock);
        }
        pthread_mutex_unlock(&w->lock);
        return NULL;
}

static int run_job(struct worker *w, const json_t *msg, json_t **ret_result, char **ret_error)
{
        const char *benchmark = json_string_value(json_object_get(msg, "benchmark"));
        const struct bench_def *b = catalog_find(benchmark);
        _cleanup_json_ json_t *params = NULL;
        int r;

        /* The canonical health check also sends "health" to the node worker: the GPU pairs. */
        bool for_node = (b && b->multi_gpu) || (w->multi && strcmp(benchmark, "health") == 0);

        if (b && w->multi != for_node)
                return backend_fail(ret_error, -ENOTSUP,
                                    w->multi
                                        ? "%s runs on one GPU's worker, not on the node worker"
                                        : "%s spans GPUs: it runs on the node worker, not on one "
                                          "GPU's",
                                    benchmark);
        r = backend_prepare(w->ops, benchmark, json_object_get(msg, "params"),
                            w->args.lim.max_buffer_bytes, &params, ret_error);
        if (r < 0)
                return r;
        return w->ops->run(w->backend, benchmark, params, &w->cancel, ret_result, ret_error);
}

/* Lock held. The CUDA calls are quick (frees), and no job runs meanwhile. */
static void release_pool(struct worker *w)
{
        uint64_t freed = w->ops->pool_release(w->backend);

        w->pool_held = false;
        w->pool_released = true;
        log_info("Idle for %llu ms: gave back the buffer pool (%llu bytes)",
                 (unsigned long long)w->pool_idle_ms, (unsigned long long)freed);
}

/* What every result says of the conditions it ran in, beside the benchmark's own context. */
static void stamp_result(struct worker *w, json_t *result)
{
        json_t *ctx = json_object_get(result, "context");
        const char *bus = json_string_value(json_object_get(w->device, "pci_bus_id"));

        if (!json_is_object(ctx)) {
                ctx = json_object();
                json_object_set_new(result, "context", ctx);
        }
        json_object_set_new(ctx, "placement",
                            placement_self_json(w->fake || w->multi ? NULL : bus));
        json_object_set_new(ctx, "pool_given_back_before", json_boolean(w->pool_released));
}

static void *runner_main(void *arg)
{
        struct worker *w = arg;

        pthread_mutex_lock(&w->lock);
        for (;;) {
                char job[JOB_ID_MAX], *error = NULL;
                json_t *msg, *result = NULL, *reply;
                int r;

                while (!w->pending && !w->stopping) {
                        struct timespec ts;

                        if (!w->pool_held) {
                                pthread_cond_wait(&w->cond, &w->lock);
                                continue;
                        }
                        deadline_after_ms(CLOCK_MONOTONIC, (unsigned)w->pool_idle_ms, &ts);
                        if (pthread_cond_timedwait(&w->cond, &w->lock, &ts) == ETIMEDOUT &&
                            !w->pending && !w->stopping)
                                release_pool(w);
                }
                if (w->stopping)
                        break;
                msg = w->pending;
                w->pending = NULL;
                snprintf(job, sizeof(job), "%s", w->job);
                pthread_mutex_unlock(&w->lock);

                /* The GPU's clocks and throttle reasons before and after (issue 17). */
                json_t *before = conditions_before(w->device, w->fake);
                if (w->cancel)
                        r = -ECANCELED;
                else
                        r = run_job(w, msg, &result, &error);
                if (r == -ECANCELED || (r < 0 && w->cancel)) {
                        free(error);
                        error = strdup("cancelled");
                }
                if (r >= 0 && !result)
                        r = -ENOMEM;
                if (r >= 0) {
                        stamp_result(w, result);
                        conditions_stamp(result, w->device, before, w->fake);
                } else
                        json_decref(before);
                w->pool_held = true;
                w->pool_released = false;
                /* umd's look after the part, taken here: the part is done on the GPU, and the
                 * result need not wait for umd's look thread (backend.h). */
                json_t *look = w->ops->look(w->backend, w->device);
                if (r >= 0) {
                        reply = json_pack("{s:s, s:s, s:b, s:o}", "type", "result", "job", job,
                                          "ok", 1, "result", result);
                        log_info("Job %s: done", job);
                } else {
                        const char *why = error ? error : strerror(-r);

                        reply = json_pack("{s:s, s:s, s:b, s:s}", "type", "result", "job", job,
                                          "ok", 0, "error", why);
                        log_info("Job %s: failed: %s", job, why);
                }
                if (reply && look)
                        json_object_set_new(reply, "look", look);
                else
                        json_decref(look);
                free(error);
                json_decref(msg);

                /* Idle again before the result leaves, so umd's next run is never refused. */
                pthread_mutex_lock(&w->lock);
                w->busy = false;
                w->job[0] = '\0';
                pthread_mutex_unlock(&w->lock);
                send_msg(w, reply);
                pthread_mutex_lock(&w->lock);
        }
        w->runner_done = true;
        pthread_cond_broadcast(&w->cond);
        pthread_mutex_unlock(&w->lock);
        return NULL;
}

static bool valid_job_id(const json_t *v)
{
        const char *s = json_string_value(v);
        size_t n = s ? strlen(s) : 0;

        if (n == 0 || n >= JOB_ID_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (s[i] <= ' ' || s[i] > '~')
                        return false;
        return true;
}

/* Handles one message from umd. Returns 1 to stop serving (shutdown). */
static int handle(struct worker *w, json_t *msg)
{
        const char *type = json_string_value(json_object_get(msg, "type"));
        json_t *job = json_object_get(msg, "job");

        if (strcmp(type, "run") == 0) {
                json_t *params = json_object_get(msg, "params");

                if (!valid_job_id(job) || !json_is_string(json_object_get(msg, "benchmark")) ||
                    (params && !json_is_object(params))) {
                        log_warning("Ignoring a malformed run message");
                        return 0;
                }
                pthread_mutex_lock(&w->lock);
                if (w->busy) {
                        log_warning("Ignoring run of job %s: job %s is running",
                                    json_string_value(job), w->job);
                        pthread_mutex_unlock(&w->lock);
                        return 0;
                }
                w->busy = true;
                w->cancel = 0;
                snprintf(w->job, sizeof(w->job), "%s", json_string_value(job));
                w->pending = json_incref(msg);
                pthread_cond_broadcast(&w->cond);
                pthread_mutex_unlock(&w->lock);
                log_info("Job %s: running %s", json_string_value(job),
                         json_string_value(json_object_get(msg, "benchmark")));
        } else if (strcmp(type, "cancel") == 0) {
                if (!valid_job_id(job)) {
                        log_warning("Ignoring a malformed cancel message");
                        return 0;
                }
                pthread_mutex_lock(&w->lock);
                if (w->busy && strcmp(w->job, json_string_value(job)) == 0)
                        w->cancel = 1;
                else
                        log_info("Ignoring cancel of job %s: not running here",
                                 json_string_value(job));
                pthread_mutex_unlock(&w->lock);
        } else if (strcmp(type, "shutdown") == 0) {
                return 1;
        } else {
                log_warning("Ignoring a message of unknown type '%s'", type);
        }
        return 0;
}

static int serve(struct worker *w)
{
        pthread_t runner, heartbeat;
        bool runner_finished;
        json_t *hello;
        int r, ret = 0;

        hello = json_pack("{s:s, s:i, s:I, s:O}", "type", "hello", "protocol", IPC_PROTOCOL_VERSION,
                          "pid", (json_int_t)getpid(), "device", w->device);
        r = send_msg(w, hello);
        if (r < 0)
                return r;
        r = -pthread_create(&runner, NULL, runner_main, w);
        if (r < 0)
                return log_error_errno(r, "Cannot start the runner thread: %m");
        r = -pthread_create(&heartbeat, NULL, heartbeat_main, w);
        if (r < 0) {
                log_error_errno(r, "Cannot start the heartbeat thread: %m");
                pthread_mutex_lock(&w->lock);
                w->stopping = true;
                pthread_cond_broadcast(&w->cond);
                pthread_mutex_unlock(&w->lock);
                pthread_join(runner, NULL);
                return r;
        }

        for (;;) {
                json_t *msg = NULL;

                r = ipc_recv(w->fd, IPC_FRAME_MAX, &msg);
                if (r == 0) {
                        log_info("umd closed the connection");
                        break;
                }
                if (r == -EBADMSG) {
                        /* The frame was read whole, so the stream is still in step. */
                        log_warning("Ignoring a frame that is not a JSON message");
                        continue;
                }
                if (r < 0) {
                        ret = log_error_errno(r, "Cannot read from umd: %m");
                        break;
                }
                r = handle(w, msg);
                json_decref(msg);
                if (r == 1) {
                        log_info("Shutting down");
                        break;
                }
        }

        pthread_mutex_lock(&w->lock);
        w->stopping = true;
        w->cancel = 1;
        pthread_cond_broadcast(&w->cond);
        {
                struct timespec ts;

                deadline_after_ms(CLOCK_MONOTONIC, SHUTDOWN_WAIT_MS, &ts);
                while (!w->runner_done && pthread_cond_timedwait(&w->cond, &w->lock, &ts) == 0)
                        ;
        }
        runner_finished = w->runner_done;
        pthread_mutex_unlock(&w->lock);
        pthread_join(heartbeat, NULL);
        if (!runner_finished) {
                /* A job that ignores cancel (a hung kernel): the process exit frees the GPU. */
                log_warning("Job %s did not stop within %u ms; exiting anyway", w->job,
                            SHUTDOWN_WAIT_MS);
                _exit(ret < 0 ? 1 : 0);
        }
        pthread_join(runner, NULL);
        return ret;
}

static void usage(FILE *f)
{
        fprintf(f,
                "Usage: umd-worker --list [--fake N]\n"
                "       umd-worker --implements [--fake N]\n"
                "       umd-worker [--fake N] --device ID --ipc-fd FD [options]\n"
                "\n"
                "  --list                     print the GPUs as JSON and exit\n"
                "  --implements               print the catalog ids this build (or --fake) runs,\n"
                "                             one a line; exit 77 when it runs none\n"
                "  --fake N                   emulate N fake devices (tests)\n"
                "  --device ID                GPU uuid or index (fake: index); \"all\": the node\n"
                "                             worker, for benchmarks spanning GPUs\n"
                "  --ipc-fd FD                socket to umd (inherited)\n"
                "  --heartbeat-ms MS          heartbeat interval (default %u)\n"
                "  --max-buffer-bytes SIZE    largest buffer a job may ask for (0: no limit)\n"
                "  --pool-bytes SIZE          pinned+device buffers kept between jobs\n"
                "  --managed-reserve-bytes SIZE  GPU memory never taken below this\n"
                "  --pool-idle-ms MS          give back the buffer pool after this long idle\n"
                "  --fake-state FILE          tests: fake GPU state (bandwidth_pct, delay_ms)\n"
                "  --log-level LEVEL          error, warning, notice, info, debug\n"
                "  --help, --version\n",
                HEARTBEAT_MS_DEFAULT);
}

/* An integer option within [min, max]; says which and why on stderr. */
static int parse_uint_arg(const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *ret)
{
        if (parse_uint64(s, min, max, ret) < 0) {
                fprintf(stderr, "umd-worker: %s: '%s' is not %llu..%llu\n", opt, s,
                        (unsigned long long)min, (unsigned long long)max);
                return -EINVAL;
        }
        return 0;
}

static int parse_size_arg(const char *opt, const char *s, uint64_t *ret)
{
        if (size_parse(s, ret) < 0) {
                fprintf(stderr, "umd-worker: %s: '%s' is not a size\n", opt, s);
                return -EINVAL;
        }
        return 0;
}

/* What the command line asks beyond the worker's own settings (struct worker). */
struct worker_opts {
        const char *device_id;
        bool list, implements, fake;
        uint64_t fake_n;
};

enum {
        OPT_LIST = 0x100,
        OPT_IMPLEMENTS,
        OPT_FAKE,
        OPT_DEVICE,
        OPT_IPC_FD,
        OPT_HEARTBEAT,
        OPT_MAX_BUFFER,
        OPT_POOL,
        OPT_RESERVE,
        OPT_POOL_IDLE,
        OPT_FAKE_STATE,
        OPT_LOG_LEVEL,
        OPT_HELP,
        OPT_VERSION,
};

/* One option c with its argument. 0, 1 when it was --help or --version (printed: exit 0), or
 * -EINVAL when it is bad (said on stderr: exit 2). */
static int parse_option(int c, const char *arg, struct worker *w, struct worker_opts *o)
{
        uint64_t v;
        int r;

        switch (c) {
        case OPT_LIST:
                o->list = true;
                return 0;
        case OPT_IMPLEMENTS:
                o->implements = true;
                return 0;
        case OPT_FAKE:
                o->fake = true;
                return parse_uint_arg("--fake", arg, 1, 1024, &o->fake_n);
        case OPT_DEVICE:
                o->device_id = arg;
                return 0;
        case OPT_IPC_FD:
                r = parse_uint_arg("--ipc-fd", arg, 0, 65535, &v);
                w->fd = r < 0 ? w->fd : (int)v;
                return r;
        case OPT_HEARTBEAT:
                r = parse_uint_arg("--heartbeat-ms", arg, 10, 3600000, &v);
                w->heartbeat_ms = r < 0 ? w->heartbeat_ms : (unsigned)v;
                return r;
        case OPT_MAX_BUFFER:
                return parse_size_arg("--max-buffer-bytes", arg, &w->args.lim.max_buffer_bytes);
        case OPT_POOL:
                return parse_size_arg("--pool-bytes", arg, &w->args.lim.pool_bytes);
        case OPT_RESERVE:
                return parse_size_arg("--managed-reserve-bytes", arg,
                                      &w->args.lim.managed_reserve_bytes);
        case OPT_POOL_IDLE:
                return parse_uint_arg("--pool-idle-ms", arg, 0, 86400000, &w->pool_idle_ms);
        case OPT_FAKE_STATE:
                w->args.fake_state = arg;
                return 0;
        case OPT_LOG_LEVEL:
                r = log_level_from_string(arg);
                if (r < 0) {
                        fprintf(stderr, "umd-worker: --log-level: unknown level '%s'\n", arg);
                        return -EINVAL;
                }
                log_set_level(r);
                return 0;
        case OPT_HELP:
                usage(stdout);
                return 1;
        case OPT_VERSION:
                printf("umd-worker %s (%s)\n", UMD_VERSION, UMD_BUILD);
                return 1;
        default:
                usage(stderr);
                return -EINVAL;
        }
}

/* The command line into w and o: 0, 1 (--help or --version printed: exit 0), or -EINVAL (said
 * on stderr: exit 2). */
static int parse_args(int argc, char **argv, struct worker *w, struct worker_opts *o)
{
        static const struct option options[] = {
            {"list", no_argument, NULL, OPT_LIST},
            {"implements", no_argument, NULL, OPT_IMPLEMENTS},
            {"fake", required_argument, NULL, OPT_FAKE},
            {"device", required_argument, NULL, OPT_DEVICE},
            {"ipc-fd", required_argument, NULL, OPT_IPC_FD},
            {"heartbeat-ms", required_argument, NULL, OPT_HEARTBEAT},
            {"max-buffer-bytes", required_argument, NULL, OPT_MAX_BUFFER},
            {"pool-bytes", required_argument, NULL, OPT_POOL},
            {"managed-reserve-bytes", required_argument, NULL, OPT_RESERVE},
            {"pool-idle-ms", required_argument, NULL, OPT_POOL_IDLE},
            {"fake-state", required_argument, NULL, OPT_FAKE_STATE},
            {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
            {"help", no_argument, NULL, OPT_HELP},
            {"version", no_argument, NULL, OPT_VERSION},
            {},
        };
        int c, r;

        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0) {
                r = parse_option(c, optarg, w, o);
                if (r != 0)
                        return r;
        }
        if (optind < argc) {
                fprintf(stderr, "umd-worker: unexpected argument '%s'\n", argv[optind]);
                return -EINVAL;
        }
        return 0;
}

/* --implements: the catalog ids ops runs, one a line; the exit status (77: none). */
static int print_implements(const struct backend_ops *ops)
{
        /* The registry test compares this with the catalog (tests/unit/kernels). */
        unsigned n = 0;

        for (size_t i = 0; i < catalog_count(); i++)
                if (ops->implements(catalog_get(i)->name)) {
                        printf("%s\n", catalog_get(i)->name);
                        n++;
                }
        if (fflush(stdout) != 0)
                return 1;
        return n > 0 ? 0 : 77;
}

/* --list: the devices as JSON; the exit status. */
static int print_list(struct worker *w)
{
        char *why = NULL;
        json_t *devices = w->ops->list(&w->args, &why);

        if (!devices) {
                fprintf(stderr, "umd-worker: out of memory\n");
                return 1;
        }
        if (json_array_size(devices) == 0 && why)
                fprintf(stderr, "umd-worker: no GPUs: %s\n", why);
        free(why);
        json_dumpf(devices, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
        json_decref(devices);
        return fflush(stdout) == 0 ? 0 : 1;
}

/* The log's name for this worker: "umd-worker[" and "fake " around a device id (a GPU's uuid is
 * 40 bytes, an index or "all" fewer), with room; a longer id is cut, never overflows. */
#define WORKER_IDENT_MAX 96

/* Names the process in the log, sets its signals and opens its device (or every GPU): 0, or the
 * exit status, the error logged. */
static int open_device(struct worker *w, const char *device_id, bool fake)
{
        static char ident[WORKER_IDENT_MAX]; /* log_set_ident keeps the pointer */
        char *why = NULL;
        int r;

        snprintf(ident, sizeof(ident), "umd-worker[%s%s]", fake ? "fake " : "", device_id);
        log_set_ident(ident);
        /* A dead umd is noticed as a write error, not a signal. */
        signal(SIGPIPE, SIG_IGN);
        /* umd stops its workers itself (shutdown message, then SIGKILL at its deadline): a
         * SIGTERM or SIGINT sent to the whole group (systemctl stop without KillMode=mixed,
         * Ctrl-C) must not kill a worker before umd knows it is stopping, or its part is
         * recorded as failed and counted as a crash instead of interrupted. */
        signal(SIGTERM, SIG_IGN);
        signal(SIGINT, SIG_IGN);

        w->multi = strcmp(device_id, "all") == 0;
        w->args.device_id = device_id;
        r = w->ops->open(&w->args, &w->backend, &w->device, &why);
        if (r < 0) {
                if (w->multi)
                        log_error("Node worker: cannot open the GPUs: %s",
                                  why ? why : strerror(-r));
                else
                        log_error("Device %s: %s", device_id, why ? why : strerror(-r));
                free(why);
                /* A fake index out of range is a usage error, as before. */
                return fake && r == -EINVAL ? 2 : 1;
        }
        if (!w->device) {
                log_error("Out of memory");
                return 1;
        }
        return 0;
}

int main(int argc, char **argv)
{
        struct worker w = {
            .fd = -1,
            .heartbeat_ms = HEARTBEAT_MS_DEFAULT,
            .pool_idle_ms = 10000,
        };
        struct worker_opts o = {0};
        int r;

        log_set_ident("umd-worker");
        r = parse_args(argc, argv, &w, &o);
        if (r != 0)
                return r > 0 ? 0 : 2;

        w.fake = o.fake;
        w.ops = o.fake ? &backend_fake : &backend_real;
        w.args.fake_n = (unsigned)o.fake_n;
        if (o.implements)
                return print_implements(w.ops);
        if (o.list)
                return print_list(&w);

        if (!o.device_id || w.fd < 0) {
                fprintf(stderr, "umd-worker: need --list, or --device ID and --ipc-fd FD\n");
                return 2;
        }
        r = open_device(&w, o.device_id, o.fake);
        if (r != 0)
                return r;

        pthread_mutex_init(&w.send_lock, NULL);
        pthread_mutex_init(&w.lock, NULL);
        cond_init_monotonic(&w.cond);

        r = serve(&w);

        w.ops->close(w.backend);
        json_decref(w.pending);
        json_decref(w.device);
        pthread_cond_destroy(&w.cond);
        pthread_mutex_destroy(&w.lock);
        pthread_mutex_destroy(&w.send_lock);
        return r < 0 ? 1 : 0;
}
