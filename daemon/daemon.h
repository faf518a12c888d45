/* The daemon's state: what main.c creates, in the order it creates it, handed to each module's
 * init function. main.c owns every member and frees them in reverse order; modules keep the
 * pointer and read members only after main.c has set them (store and devices before jobs_init,
 * jobs before devctl_new and the listeners, the supervisor before job_dispatch_attach_supervisor
 * and coexist_start). */
#pragma once

struct umd_config;
struct store;
struct jobs;
struct devices;
struct supervisor;
struct api_server;
struct metrics;
struct devctl;
struct coexist;
struct xid_watch;
struct jobs_clock;

struct umd_daemon {
        struct umd_config *cfg;  /* parsed before anything else */
        struct store *store;     /* opened first: its lock keeps a second umd out */
        char *worker_path;       /* umd-worker, found before discovery */
        struct devices *devices; /* the GPUs, discovered once (devices_new) before metrics */
        struct metrics *metrics; /* after discovery: a queue gauge per device (metrics_new) */
        struct jobs *jobs;       /* recovered from the store after discovery (jobs_init) */
        struct devctl *devctl;   /* the paused devices, once jobs exist (devctl_new) */
        struct supervisor *sup;  /* started after the listeners (they take systemd's sockets) */
        struct api_server *api;  /* the HTTP listeners */
        struct xid_watch *xid;   /* the Xid watch: after the supervisor (its workers' pids) */
        struct coexist *coexist; /* the GPU looks and health schedule, once sup runs */
        int signal_fd;           /* SIGTERM, SIGINT, SIGHUP; -1 when not open */
        /* What the job subsystem reads the time from (jobs.h); NULL: the system's clocks. */
        const struct jobs_clock *jobs_clock;
};
/* Before anything answers: the configuration core.c's catalog and schema answers read (also
 * for --print-openapi, which starts nothing else). */
void core_init(const struct umd_daemon *d);

/* The devices discovered (devices.h, d->devices) change behind core_lock: discovery fills the
 * table once before jobs_init and nothing replaces it while umd runs. */
