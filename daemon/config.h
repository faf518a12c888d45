/* umd's configuration: one table of keys, read from the INI file (/etc/umd/umd.conf, section
 * [umd]) and from the command line (--key-name, underscores as dashes); flags win. The same
 * table prints --help and the documented sample config, so the three cannot disagree. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CONFIG_MAX_LISTEN 16

struct umd_config {
        /* where and how to serve */
        char *listen[CONFIG_MAX_LISTEN]; /* "127.0.0.1:8470", "[::1]:8470" */
        size_t n_listen;
        char *unix_socket; /* path or NULL */
        unsigned unix_socket_mode;
        char *unix_socket_group;
        char *tls_cert, *tls_key;
        char *tokens_file;
        bool auth_reads;
        bool require_auth_off_loopback;
        uint64_t max_body_bytes;
        unsigned max_connections;
        unsigned http_threads;
        unsigned max_connections_per_ip;
        unsigned connection_timeout_s;
        unsigned request_timeout_s;
        unsigned shutdown_timeout_s;

        /* state */
        char *state_dir;
        unsigned max_jobs;        /* finished jobs kept */
        unsigned retention_days;  /* finished jobs older than this are removed; 0 = never */
        uint64_t max_store_bytes; /* finished jobs removed while the store is larger; 0 = never */
        uint64_t max_result_bytes;
        unsigned store_retry_ms;   /* a failed final write is retried this often */
        bool start_commit_wait;    /* a part is sent once its start commits (job_start.c) */
        uint64_t wal_max_bytes;    /* the WAL is truncated once a commit leaves it larger */
        unsigned commit_gather_us; /* a waited commit waits this long for as many waiters */

        /* queue and jobs */
        unsigned queue_capacity;            /* queued parts, all devices */
        unsigned queue_capacity_per_device; /* queued parts per device */
        unsigned queue_trees_per_device;    /* waiting jobs near a queue's head keep a tree */
        unsigned jobs_per_token;            /* queued+running jobs per client token */
        unsigned job_timeout_default_s;
        unsigned job_timeout_max_s;
        unsigned job_estimate_factor; /* refuse a job estimated past this many times its timeout */
        unsigned cancel_grace_ms;
        unsigned list_limit_max;
        uint64_t list_results_max_bytes;
        uint64_t job_cache_bytes;
        unsigned wait_max_s;
        unsigned max_waiters;
        unsigned max_labels;
        unsigned max_label_key_len;
        unsigned max_label_value_len;

        /* workers */
        char *worker_path;
        char *devices; /* "all" or comma-separated indexes/uuids */
        unsigned fake_devices;
        unsigned heartbeat_interval_ms;
        unsigned heartbeat_timeout_ms;
        unsigned max_crashes;        /* crashes in a row before a device is faulted */
        unsigned respawn_backoff_ms; /* first delay, doubled per crash */
        unsigned respawn_backoff_max_ms;
        unsigned discovery_timeout_ms;

        /* GPU buffers */
        uint64_t max_buffer_bytes;      /* largest size a benchmark may ask for */
        uint64_t pool_bytes;            /* pinned+device buffers a worker keeps between jobs */
        uint64_t managed_reserve_bytes; /* never take the GPU's free memory below this */

        /* sharing the GPU with its owners */
        unsigned pool_idle_s;   /* give back the buffer pool after this long idle */
        unsigned worker_idle_s; /* exit the worker (and its context) after this long idle */
        unsigned busy_policy;   /* enum busy_policy */
        unsigned busy_poll_ms;
        unsigned busy_wait_max_s;
        bool placement;
        char *fake_gpu_state; /* tests: stands in for NVML on fake devices */

        /* health verdicts */
        double health_warn_fraction; /* of the link's theoretical rate */
        double health_fail_fraction;
        unsigned health_baseline_runs;
        unsigned health_baseline_min_runs;
        double health_baseline_tolerance; /* pinned copies (bound by the link) */
        double health_host_tolerance;     /* pageable and managed (bound by the host too) */
        uint64_t health_size;             /* the canonical check's parameters */
        unsigned health_iterations;
        unsigned health_interval_s;         /* built-in schedule, 0 = off */
        uint64_t health_d2d_size;           /* the canonical check's device-memory copy */
        double health_memory_warn_fraction; /* of the model's nominal memory bandwidth */
        double health_memory_fail_fraction;
        unsigned health_extended_budget_s; /* the extended tier's budget for the whole node */
        char *gpu_models_file; /* overrides and additions to the shipped GPU model table */

        /* links and inventory (issue 58) */
        unsigned expected_gpus; /* 0: not checked */
        double health_pcie_replay_floor_per_min;
        double health_pcie_replay_fail_factor;
        double health_nvlink_crc_fail_per_s;
        double health_nvlink_error_fail_per_min;
        /* the Xid watch (xid.h) */
        char *xid_source; /* auto, kmsg, journal, nvml, none, file:PATH */
        bool xid_nvml_events;
        char *xid_actions; /* "CODE:ACTION,..." overrides of the Xid table; NULL: none */
        unsigned xid_events_max;
        unsigned xid_dedup_ms;
        char *xid_boot_id_file;

        /* logging */
        int log_level;

        /* set by parsing, not keys */
        char *config_file;
        char *export_dir;   /* --export DIR: write the store out as JSON files and exit */
        bool print_openapi; /* --print-openapi: print the served OpenAPI document and exit */
        bool check_only; /* --check-config: parsed and valid (main still checks gpu_models_file) */
};

/* What to do with a part whose GPU has compute processes that are not umd's. */
enum busy_policy { BUSY_WAIT, BUSY_RUN, BUSY_FAIL };
int busy_policy_from_string(const char *s); /* enum busy_policy or -EINVAL */
const char *busy_policy_to_string(unsigned p);

/* Fill defaults. */
void config_init(struct umd_config *c);
void config_free(struct umd_config *c);

/* Parse argv (and the config file it names, or the default one if readable). Returns 0 to run,
 * 1 when --help/--version/--print-config printed and the program should exit 0, or -EINVAL
 * after printing one clear message to stderr (the caller exits 2). */
int config_parse_args(struct umd_config *c, int argc, char **argv);

/* Load one INI file into c (keys already set on the command line are kept by the caller).
 * 0 or -errno/-EINVAL after printing "FILE:LINE: ..." to stderr. */
int config_load_file(struct umd_config *c, const char *path);

/* The documented sample config (every key, its default, what it does). */
void config_print_sample(FILE *f);
/* The configuration c as a config file: keys at their default commented out, as in the sample;
 * keys the file or flags changed set. */
void config_print_effective(FILE *f, const struct umd_config *c);
void config_print_help(FILE *f, const char *prog);

/* The HTTP threads each listener gets: http_threads, or when it is 0 one per CPU online up to
 * HTTP_THREADS_DEFAULT_MAX. Past four, a submit load cost more CPU a job and went no faster (each
 * thread woke for fewer requests; the writer sets the pace): on a 16-CPU H100 host,
 * bench/store/run's 30 s load took 306 µs a job with 16 threads, 269 with 4 and 258 with 2, at
 * the same 12,000 submits a second (bench/store/RESULTS.md). */
#define HTTP_THREADS_DEFAULT_MAX 4
unsigned config_http_threads(const struct umd_config *c, long cpus_online);

#define UMD_DEFAULT_CONFIG_FILE "/etc/umd/umd.conf"
#define UMD_DEFAULT_STATE_DIR   "/var/lib/umd"
#define UMD_DEFAULT_LISTEN      "127.0.0.1:8470"
