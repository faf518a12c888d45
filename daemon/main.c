/* umd's entry point and lifecycle: configuration, discovery, recovery, listening, READY=1,
 * the watchdog and STATUS= updates, and an orderly stop on SIGTERM/SIGINT. Never touches CUDA:
 * GPUs are reached only through umd-worker processes (supervisor.c). */
#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "api.h"
#include "coexist.h"
#include "config.h"
#include "models.h"
#include "daemon.h"
#include "devctl.h"
#include "devices.h"
#include "fileio.h"
#include "gpustate.h"
#include "job_spec.h"
#include "jobs.h"
#include "log.h"
#include "metrics.h"
#include "placement.h"
#include "store.h"
#include "supervisor.h"
#include "umd-build.h"
#include "util.h"
#include "xid.h"

#define TICK_MS 1000
/* Jobs recovered unchecked that one turn of the main loop checks (jobs_check_recovered). */
#define CHECK_BATCH 64

static void notify_status(const struct umd_daemon *d, const char *phase)
{
        size_t queued, running, total, faulted = 0;
        job_query_counts(d->jobs, &queued, &running, &total);
        core_lock();
        for (size_t i = 0; i < devices_size(d->devices); i++)
                faulted += devices_at(d->devices, i)->wstate == WORKER_FAULTED;
        core_unlock();
        sd_notifyf(0,
                   "STATUS=%s: %zu devices (%zu faulted), %zu parts queued, %zu running, %zu jobs",
                   phase, devices_size(d->devices), faulted, queued, running, total);
}

static int start_supervisor(const struct umd_daemon *dm, struct supervisor **ret)
{
        const struct umd_config *cfg = dm->cfg;
        size_t n = devices_size(dm->devices);
        struct supervised_device *devs = calloc(n + 1, sizeof(*devs));
        struct supervisor_callbacks cb;
        int r;

        if (!devs)
                return -ENOMEM;
        int nodes = placement_numa_nodes(PLACEMENT_SYSFS_NODES);
        for (size_t i = 0; i < n; i++) {
                struct device *d = devices_at(dm->devices, i);
                devs[i].fake = d->fake;
                devs[i].numa_node = -1;
                /* Beside its GPU, as nvbandwidth runs: host buffers on the far socket cost
                 * bandwidth and make verdicts flap. A host with one node needs no policy. */
                if (cfg->placement && !d->fake) {
                        int node;

                        placement_gpu(PLACEMENT_SYSFS_DEVICES,
                                      json_string_value(json_object_get(d->info, "pci_bus_id")),
                                      &node, &devs[i].cpus, &devs[i].has_cpus);
                        if (nodes > 1)
                                devs[i].numa_node = node;
                }
                /* Real workers are told the uuid (stable); fake ones their fake index. */
                if (d->fake)
                        snprintf(devs[i].id, sizeof(devs[i].id), "%lld",
                                 (long long)json_integer_value(json_object_get(d->info, "index")));
                else
                        snprintf(devs[i].id, sizeof(devs[i].id), "%s", d->uuid);
        }
        /* The node worker, for benchmarks spanning GPUs, is one more slot after the GPUs:
         * its own process, so that it never shares a fate with one GPU's worker. */
        if (devices_has_node(dm->devices)) {
                struct supervised_device *node = &devs[devices_node_slot(dm->devices)];
                node->fake = devices_at(dm->devices, 0)->fake;
                node->numa_node = -1;
                snprintf(node->id, sizeof(node->id), "all");
        }
        job_dispatch_callbacks(dm->jobs, &cb);
        r = supervisor_start(cfg, devs, devices_has_node(dm->devices) ? n + 1 : n, &cb, ret);
        free(devs);
        return r;
}

/* Builds d's members in dependency order, up to READY's eve. 0, or -errno (logged) with what
 * was built left for take_down. */
static int build(struct umd_daemon *d)
{
        struct umd_config *cfg = d->cfg;
        int r;

        /* The store first: its lock keeps a second umd on this state directory from going any
         * further (not even discovery). */
        r = mkdir_p(cfg->state_dir, 0750);
        if (r < 0) {
                log_error_errno(r, "cannot create state directory %s: %m", cfg->state_dir);
                return r;
        }
        r = store_open(cfg->state_dir, &d->store);
        if (r < 0)
                return r;
        store_set_wal_max(d->store, cfg->wal_max_bytes);
        store_set_commit_gather(d->store, cfg->commit_gather_us);
        r = store_set_cache(d->store, cfg->job_cache_bytes);
        if (r < 0) {
                log_error_errno(r, "cannot set up the job cache (job_cache_bytes): %m");
                return r;
        }

        r = devices_find_worker(cfg, &d->worker_path);
        if (r < 0)
                return r;
        r = devices_new(cfg, d->worker_path, &d->devices);
        if (r < 0)
                return r;
        free(cfg->worker_path);
        cfg->worker_path = strdup(d->worker_path);
        r = metrics_new(d, &d->metrics);
        if (r < 0)
                return r;

        r = jobs_init(d, &d->jobs);
        if (r < 0)
                return r;
        job_verdict_restore(d->jobs);
        r = devctl_new(d, &d->devctl);
        if (r < 0)
                return r;
        gpustate_init(cfg);
        /* Before the listeners, which compose its answers from the first request on. */
        r = xid_watch_start(d, &d->xid);
        if (r < 0)
                return r;
        job_verdict_attach_xid(d->jobs, d->xid);

        /* api_start takes systemd's sockets (sd_listen_fds) before any thread exists. */
        r = api_start(cfg, &d->api);
        if (r < 0)
                return r;
        r = start_supervisor(d, &d->sup);
        if (r < 0)
                return r;
        job_dispatch_attach_supervisor(d->jobs, d->sup);
        metrics_attach_supervisor(d->metrics, d->sup);
        xid_watch_attach_supervisor(d->xid, d->sup);
        r = coexist_start(d, &d->coexist);
        if (r < 0)
                return r;
        return 0;
}

/* READY, then the main loop until a signal (0) or a failed poll (-errno, logged). */
static int serve(struct umd_daemon *d)
{
        struct umd_config *cfg = d->cfg;
        uint64_t watchdog_usec = 0, last_pet = 0, last_status = 0, last_tick = 0, last_retry = 0;
        int r = 0;

        if (sd_watchdog_enabled(0, &watchdog_usec) <= 0)
                watchdog_usec = 0;
        sd_notify(0, "READY=1");
        size_t unchecked = SIZE_MAX;       /* jobs_check_recovered says how many there are */
        (void)store_check_start(d->store); /* logged; the store runs unchecked */
        notify_status(d, "ready");
        log_info("umd %s ready: %zu devices, state in %s", UMD_VERSION, devices_size(d->devices),
                 cfg->state_dir);

        for (;;) {
                struct pollfd pfd[] = {{.fd = d->signal_fd, .events = POLLIN},
                                       {.fd = jobs_start_fd(d->jobs), .events = POLLIN}};
                /* The jobs recovered unchecked are checked in batches between looks at the
                 * signals: 64 hold core_lock about a millisecond, and the millisecond after each
                 * lets the HTTP threads take it (a lock taken again at once would starve them). */
                bool checking =
                    unchecked > 0 && (unchecked = jobs_check_recovered(d->jobs, CHECK_BATCH)) > 0;
                /* Woken often enough for the retry of failed writes (store_retry_ms). */
                int pr =
                    poll(pfd, ELEMENTSOF(pfd),
                         checking ? 1
                                  : (int)(cfg->store_retry_ms < TICK_MS / 4 ? cfg->store_retry_ms
                                                                            : TICK_MS / 4));
                if (pr < 0 && errno != EINTR) {
                        r = log_error_errno(errno, "poll: %m");
                        break;
                }
                /* A part's start committed (or failed): its worker is sent it now. */
                if (pr > 0 && pfd[1].revents)
                        jobs_starts_committed(d->jobs);
                if (pr > 0 && pfd[0].revents) {
                        struct signalfd_siginfo si;
                        if (read(d->signal_fd, &si, sizeof(si)) == sizeof(si)) {
                                if (si.ssi_signo == SIGHUP) {
                                        log_info("SIGHUP: configuration is read at start only; "
                                                 "restart umd to apply changes");
                                        continue;
                                }
                                log_info("%s: stopping", strsignal((int)si.ssi_signo));
                                r = 0;
                                break;
                        }
                }
                uint64_t now = now_monotonic_ms();
                /* Pet the watchdog only while every worker answers: a wedged GPU should get
                 * the unit restarted rather than hide behind a healthy-looking HTTP thread. */
                if (watchdog_usec && now - last_pet >= watchdog_usec / 2000 &&
                    supervisor_all_alive(d->sup)) {
                        sd_notify(0, "WATCHDOG=1");
                        last_pet = now;
                }
                if (now - last_status >= 5000) {
                        notify_status(d, "running");
                        last_status = now;
                }
                if (now - last_retry >= cfg->store_retry_ms) {
                        jobs_retry_unsaved(d->jobs);
                        job_dispatch_store_watch(d->jobs);
                        last_retry = now;
                }
                if (now - last_tick >= 60000) {
                        jobs_tick(d->jobs);
                        last_tick = now;
                }
        }

        sd_notify(0, "STOPPING=1");
        notify_status(d, "stopping");
        return r;
}

/* Frees what build made, in reverse: every member NULL (or -1) after. */
static void take_down(struct umd_daemon *d)
{
        struct umd_config *cfg = d->cfg;

        coexist_stop(d->coexist);
        d->coexist = NULL;
        jobs_quiesce(d->jobs);
        if (d->api)
                api_stop(d->api, cfg->shutdown_timeout_s * 1000);
        d->api = NULL;
        xid_watch_stop(d->xid); /* after the listeners, which compose its answers */
        d->xid = NULL;
        devctl_free(d->devctl);
        d->devctl = NULL;
        if (d->sup)
                supervisor_stop(d->sup, cfg->shutdown_timeout_s * 1000);
        d->sup = NULL;
        jobs_shutdown(d->jobs);
        d->jobs = NULL;
        if (d->store)
                store_close(d->store);
        d->store = NULL;
        metrics_free(d->metrics);
        d->metrics = NULL;
        gpustate_shutdown();
        d->devices = devices_free(d->devices);
        models_free();
        free(d->worker_path);
        d->worker_path = NULL;
        if (d->signal_fd >= 0)
                close(d->signal_fd);
        d->signal_fd = -1;
}

/* Builds d (main() set d->cfg) in dependency order, serves until a signal, and takes it down in
 * reverse; d's members are NULL or -1 until created and again once freed. */
static int run(struct umd_daemon *d)
{
        sigset_t mask;
        int r;

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        /* Blocked before any thread starts, so every thread inherits the mask and only the
         * signalfd below sees them. */
        pthread_sigmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);
        d->signal_fd = signalfd(-1, &mask, SFD_CLOEXEC);
        if (d->signal_fd < 0)
                return log_error_errno(errno, "signalfd: %m");

        /* Sockets systemd passed must not leak into the discovery child: sd_listen_fds()
         * marks them close-on-exec (api_start takes them over later). */
        (void)sd_listen_fds(0);

        r = build(d);
        if (r >= 0)
                r = serve(d);
        take_down(d);
        return r;
}

/* The store's one-time import of STATE_DIR/jobs: each file read back as strictly as a
 * submission (spec_validate_stored), nothing downstream trusting a stored shape. */
static int import_files(const char *dir, int (*put)(struct store_row *row, void *ctx), void *ctx,
                        unsigned *ret_corrupt)
{
        return job_files_import(dir, spec_validate_stored, put, ctx, ret_corrupt);
}

int main(int argc, char **argv)
{
        struct umd_config cfg;
        struct umd_daemon d = {.cfg = &cfg, .signal_fd = -1};
        int r;

#if !UMD_HAVE_JEMALLOC
        /* glibc's malloc, one arena: with an arena per HTTP thread, resident memory crept up
         * ~20% over a minute of load from fragmentation alone (no leak: LSan is clean); with one
         * it stays flat, but every thread takes its lock (meson.build: jemalloc does neither). */
        mallopt(M_ARENA_MAX, 1);
#endif
        log_set_ident("umd");
        config_init(&cfg);
        r = config_parse_args(&cfg, argc, argv);
        if (r != 0 && !cfg.check_only) {
                config_free(&cfg);
                return r > 0 ? EXIT_SUCCESS : 2;
        }
        log_set_level(cfg.log_level);
        /* Before any thread: the model table is read-only from here on. A bad file is a bad
         * configuration (exit 2, the line said on stderr), also for --check-config. */
        r = models_load(cfg.gpu_models_file);
        if (r < 0 || cfg.check_only) {
                config_free(&cfg);
                models_free();
                return r == -EINVAL ? 2 : r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
        }
        core_init(&d);
        /* The old store's files (the import, --export) are the job subsystem's to read and
         * write. */
        store_set_files(&(struct store_files){.import = import_files, .export = job_files_export});
        if (cfg.print_openapi) {
                size_t len = 0;
                const char *doc = api_openapi_document(&len);

                r = doc && fwrite(doc, 1, len, stdout) == len && fflush(stdout) == 0 ? 0 : -EIO;
                config_free(&cfg);
                return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
        }
        if (cfg.export_dir) {
                r = store_export(cfg.state_dir, cfg.export_dir);
                config_free(&cfg);
                return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
        }
        r = run(&d);
        config_free(&cfg);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
