/* umd's configuration table and its command line. Owns struct umd_config's keys, their
 * defaults and the checks across keys; a key's value from its text and the INI file are
 * config_read.c's, --help, the sample and --print-config config_print.c's. Nothing here opens
 * sockets or reads state. */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_internal.h"
#include "log.h"
#include "size.h"
#include "umd-build.h"
#include "umd-vcs.h"
#include "util.h"
#include "xid_table.h"

#define F(field) offsetof(struct umd_config, field)
#define GiB      (1024.0 * 1024.0 * 1024.0)

const struct key config_keys[] = {
    {"listen", K_LISTEN, F(listen), UMD_DEFAULT_LISTEN, 0, 0,
     "TCP address to serve HTTP on, ADDR:PORT or [V6ADDR]:PORT. Repeat the flag for several; "
     "in the file separate with spaces. Empty: none (unix socket or systemd sockets only)."},
    {"unix_socket", K_STR, F(unix_socket), "", 0, 0,
     "Also serve HTTP on this unix socket path (empty: none)."},
    {"unix_socket_mode", K_MODE, F(unix_socket_mode), "0660", 0, 0777,
     "Permissions of the unix socket (octal)."},
    {"unix_socket_group", K_STR, F(unix_socket_group), "", 0, 0,
     "Group owning the unix socket (empty: the daemon's)."},
    {"tls_cert", K_STR, F(tls_cert), "", 0, 0, "PEM certificate for HTTPS (with tls_key)."},
    {"tls_key", K_STR, F(tls_key), "", 0, 0, "PEM private key for HTTPS."},
    {"tokens_file", K_STR, F(tokens_file), "", 0, 0,
     "File of bearer tokens, one 'NAME ROLE TOKEN' per line (roles read, submit, admin); must "
     "not be readable or writable by group or others. Empty: no authentication."},
    {"auth_reads", K_BOOL, F(auth_reads), "false", 0, 0,
     "With tokens configured, require the read role for GET requests too."},
    {"require_auth_off_loopback", K_BOOL, F(require_auth_off_loopback), "false", 0, 0,
     "Refuse to start when listening beyond loopback without tokens (else warn)."},
    {"max_body_bytes", K_SIZE, F(max_body_bytes), "64KiB", 256, 16 * 1024 * 1024,
     "Largest request body accepted (413 beyond)."},
    {"max_connections", K_UINT, F(max_connections), "4096", 1, 65536,
     "Open HTTP connections at once on each listener, all clients together (umd raises its "
     "open-file limit to fit, and says at start what that limit allows). An eighth is kept for "
     "127.0.0.1, ::1 and, on the unix socket, root and umd's own user: the node's own checks."},
    {"http_threads", K_UINT, F(http_threads), "0", 0, 256,
     "Threads serving HTTP on each listener (one request is never slowed by another's); 0: "
     "one per CPU online, at most 4."},
    {"max_connections_per_ip", K_UINT, F(max_connections_per_ip), "64", 1, 65536,
     "Open HTTP connections at once from one address (each 127.x apart), or from one local "
     "user on the unix socket (root and umd's own user are not counted)."},
    {"connection_timeout_s", K_UINT, F(connection_timeout_s), "30", 1, 3600,
     "Seconds an idle or slow connection is kept."},
    {"request_timeout_s", K_UINT, F(request_timeout_s), "10", 1, 3600,
     "Seconds a request may take to arrive whole (headers and body), however steadily it "
     "trickles; the connection is closed after that."},
    {"wait_max_s", K_UINT, F(wait_max_s), "60", 0, 3600,
     "Longest ?wait= a job or list read may hold its connection (longer asks are cut to "
     "this; 0: ?wait= answers at once)."},
    {"max_waiters", K_UINT, F(max_waiters), "256", 0, 65536,
     "Reads waiting with ?wait= at once, all clients together (503 beyond)."},
    {"shutdown_timeout_s", K_UINT, F(shutdown_timeout_s), "10", 0, 600,
     "Seconds in-flight requests and workers get to finish at shutdown."},

    {"state_dir", K_STR, F(state_dir), UMD_DEFAULT_STATE_DIR, 0, 0,
     "Where job results are kept ($STATE_DIRECTORY wins over the default, not over this key "
     "when set)."},
    {"max_jobs", K_UINT, F(max_jobs), "10000", 1, 10000000,
     "Finished jobs kept; the oldest beyond this are deleted."},
    {"retention_days", K_UINT, F(retention_days), "90", 0, 36500,
     "Finished jobs older than this are deleted (0: kept by count only)."},
    {"max_store_bytes", K_SIZE, F(max_store_bytes), "4GiB", 0, 1024 * GiB,
     "Finished jobs are deleted, oldest first, while the stored documents take more than "
     "this (0: no limit)."},
    {"store_retry_ms", K_UINT, F(store_retry_ms), "1000", 10, 600000,
     "A finished job whose write failed (a full disk) is written again this often until it "
     "commits, and at shutdown for up to shutdown_timeout_s."},
    {"start_commit_wait", K_BOOL, F(start_commit_wait), "false", 0, 0,
     "Send a part's worker the part only once its start has committed. Off by default: it costs "
     "a commit a part (with sub-millisecond parts umd's CPU a job more than doubled, "
     "bench/store/RESULTS.md). Off, a part sent just before a disk goes read-only can run with "
     "nowhere to record it and run again after the repair (one part a GPU at most: no later part "
     "starts while the store cannot commit); on, none does."},
    {"wal_max_bytes", K_SIZE, F(wal_max_bytes), "64MiB", 64 * 1024, 64 * GiB,
     "The database's write-ahead log stays under this: it is cut back to nothing when a "
     "commit leaves it past three quarters of this, and whenever the writer has been idle "
     "for a second."},
    {"commit_gather_us", K_UINT, F(commit_gather_us), "0", 0, 100000,
     "A submit's commit may wait up to this long (microseconds) for as many others as the "
     "last commit carried, so that concurrent clients share one commit; a lone client's "
     "never waits. 0 (the default): commit as soon as anyone waits. Under a sustained load "
     "the writer is the bottleneck and such a wait only idles it."},
    {"job_cache_bytes", K_SIZE, F(job_cache_bytes), "16MiB", 0, 4 * GiB,
     "Finished jobs' documents kept in memory for GET /v1/jobs/{id} (they never change; "
     "0: read each from the database)."},
    {"max_result_bytes", K_SIZE, F(max_result_bytes), "4MiB", 4096, 16 * 1024 * 1024,
     "Largest result a worker may return for one device."},

    {"queue_capacity", K_UINT, F(queue_capacity), "1000", 1, 1000000,
     "Job parts waiting, all devices together (429 beyond)."},
    {"queue_capacity_per_device", K_UINT, F(queue_capacity_per_device), "256", 1, 1000000,
     "Job parts waiting for one device (429 beyond)."},
    {"queue_trees_per_device", K_UINT, F(queue_trees_per_device), "32", 0, 1000000,
     "Jobs near the head of a device's queue keep their document parsed in memory (about 6 "
     "KB each) while they wait, so that their dispatch reads nothing back; a job submitted "
     "behind more waiting parts than this keeps a few hundred bytes and is read back from "
     "the database when its turn comes, with the others that wait this near the head without "
     "a tree (one read for all)."},
    {"jobs_per_token", K_UINT, F(jobs_per_token), "100", 1, 1000000,
     "Queued or running jobs one client token may have."},
    {"job_timeout_default_s", K_UINT, F(job_timeout_default_s), "600", 1, 86400,
     "Deadline of a job that gives no timeout_s."},
    {"job_timeout_max_s", K_UINT, F(job_timeout_max_s), "3600", 1, 86400,
     "Largest timeout_s a job may ask for."},
    {"job_estimate_factor", K_UINT, F(job_estimate_factor), "10", 0, 1000000,
     "Refuse at submit a job whose estimated time is more than this many times its timeout_s. "
     "The estimate is a lower bound: the bytes it must move at its GPU's fastest nominal rate "
     "(PCIe link both ways, the model's memory bandwidth) and a pipeline's kernel work. 0: "
     "never refuse."},
    {"cancel_grace_ms", K_UINT, F(cancel_grace_ms), "2000", 0, 600000,
     "After asking a worker to stop a cancelled job, kill it after this long."},
    {"list_limit_max", K_UINT, F(list_limit_max), "500", 1, 100000,
     "Largest page GET /v1/jobs returns."},
    {"list_results_max_bytes", K_SIZE, F(list_results_max_bytes), "4MiB", 4096, 256 * 1024 * 1024,
     "Stored bytes one GET /v1/jobs?include=results page may carry (the page ends early, "
     "with a next link, beyond)."},
    {"max_labels", K_UINT, F(max_labels), "16", 0, 1024, "Labels one job may carry."},
    {"max_label_key_len", K_UINT, F(max_label_key_len), "64", 1, 4096,
     "Longest label key, in bytes."},
    {"max_label_value_len", K_UINT, F(max_label_value_len), "256", 0, 65536,
     "Longest label value, in bytes."},

    {"worker_path", K_STR, F(worker_path), "", 0, 0,
     "The umd-worker program (empty: the installed one, else the one beside umd)."},
    {"devices", K_STR, F(devices), "all", 0, 0,
     "GPUs to own: 'all' or a comma-separated list of indexes and UUIDs."},
    {"fake_devices", K_UINT, F(fake_devices), "0", 0, 64,
     "Emulate this many GPUs instead of using real ones (tests only; results say fake)."},
    {"heartbeat_interval_ms", K_UINT, F(heartbeat_interval_ms), "1000", 50, 60000,
     "How often workers report they are alive."},
    {"heartbeat_timeout_ms", K_UINT, F(heartbeat_timeout_ms), "10000", 100, 600000,
     "A worker silent this long is killed and respawned."},
    {"max_crashes", K_UINT, F(max_crashes), "3", 1, 1000,
     "Worker crashes in a row before its device is marked faulted."},
    {"respawn_backoff_ms", K_UINT, F(respawn_backoff_ms), "200", 0, 600000,
     "Delay before respawning a dead worker, doubled per crash in a row."},
    {"respawn_backoff_max_ms", K_UINT, F(respawn_backoff_max_ms), "30000", 0, 3600000,
     "Longest delay between respawns."},
    {"discovery_timeout_ms", K_UINT, F(discovery_timeout_ms), "30000", 100, 600000,
     "How long 'umd-worker --list' may take at start."},

    {"max_buffer_bytes", K_SIZE, F(max_buffer_bytes), "4GiB", 4096, 1024 * GiB,
     "Largest buffer a benchmark may ask for (400 beyond)."},
    {"pool_bytes", K_SIZE, F(pool_bytes), "2GiB", 0, 1024 * GiB,
     "Pinned host, pageable host and device buffers a worker keeps between jobs, at most "
     "(pinned host memory is taken from the node's users: keep it to what a node can spare)."},
    {"pool_idle_s", K_UINT, F(pool_idle_s), "10", 0, 86400,
     "A worker idle this long gives back its buffer pool (pinned host, pageable host and device "
     "memory); the next job allocates again. 0: right after each job."},
    {"worker_idle_s", K_UINT, F(worker_idle_s), "30", 0, 86400,
     "A worker idle this long exits, and its CUDA context with it: the GPU holds nothing of "
     "umd's. The next job starts it again (a cold start, recorded in the result). 0: right "
     "after each job. On a GPU in EXCLUSIVE_PROCESS mode it always exits after each job."},
    {"busy_policy", K_BUSY, F(busy_policy), "wait", 0, 0,
     "A GPU with compute processes that are not umd's: 'wait' queues the part until they are "
     "gone, 'run' runs it anyway (marked contended, never judged), 'fail' fails the part. A "
     "job may ask for another policy with its own busy_policy."},
    {"busy_poll_ms", K_UINT, F(busy_poll_ms), "500", 50, 60000,
     "How often the GPUs are looked at for other processes (NVML), also while a part runs. A "
     "GPU is also looked at right before each part, and by its worker right after each part."},
    {"busy_wait_max_s", K_UINT, F(busy_wait_max_s), "3600", 1, 604800,
     "A part waiting this long for a GPU in use by others fails."},
    {"placement", K_BOOL, F(placement), "true", 0, 0,
     "Run each worker on its GPU's local CPUs and prefer its NUMA node for host buffers."},
    {"fake_gpu_state", K_STR, F(fake_gpu_state), "", 0, 0,
     "Tests only: a JSON file that stands in for NVML on fake devices (other processes, "
     "compute mode, PCIe link, replay counter, bandwidth); re-read at every look."},
    {"managed_reserve_bytes", K_SIZE, F(managed_reserve_bytes), "2GiB", 0, 1024 * GiB,
     "Free GPU memory never taken by managed allocations (too much can hang a GPU)."},

    {"health_warn_fraction", K_DOUBLE, F(health_warn_fraction), "0.70", 0, 1,
     "Health: pinned copy bandwidth below this fraction of the link's rate warns."},
    {"health_fail_fraction", K_DOUBLE, F(health_fail_fraction), "0.40", 0, 1,
     "Health: below this fraction of the link's rate fails."},
    {"health_baseline_runs", K_UINT, F(health_baseline_runs), "5", 1, 1000,
     "Health: the baseline is the median of this many past passing results of the GPU."},
    {"health_baseline_min_runs", K_UINT, F(health_baseline_min_runs), "3", 1, 1000,
     "Health: the baseline is judged against only once this many passing runs exist (one "
     "run is too noisy a baseline)."},
    {"health_baseline_tolerance", K_DOUBLE, F(health_baseline_tolerance), "0.15", 0, 1,
     "Health: a drop below the baseline by more than this fraction fails for pinned copies "
     "(bound by the link) and warns for pageable and managed paths (which also depend on the "
     "host's memory and CPU, and vary more from run to run)."},
    {"health_host_tolerance", K_DOUBLE, F(health_host_tolerance), "0.30", 0, 1,
     "Health: pageable and managed copies warn only when they drop below the baseline by "
     "more than this fraction (on an H200 pageable H2D swung 8.4 to 10.4 GB/s between "
     "runs of an idle host)."},

    {"health_size", K_SIZE, F(health_size), "64MiB", 4096, 1024 * GiB,
     "The canonical health check's buffer size. Only the canonical check (a health job "
     "submitted without params) gives verdicts and feeds baselines."},
    {"health_iterations", K_UINT, F(health_iterations), "10", 1, 1000,
     "The canonical health check's timed samples per mode."},
    {"health_interval_s", K_UINT, F(health_interval_s), "0", 0, 31536000,
     "Run the canonical health check on every idle GPU this often (skipping busy and paused "
     "ones), and the GPU pairs with them when every GPU is idle at once. 0: never (a "
     "systemd timer running umd-healthcheck is the alternative)."},
    {"health_d2d_size", K_SIZE, F(health_d2d_size), "256MiB", 4096, 1024 * GiB,
     "The canonical health check's device-to-device copy (device memory bandwidth). Larger "
     "than the GPU's L2 cache, or the copy measures the cache (an H200 has 50 MB); at 256 MiB "
     "it adds a few milliseconds to the check."},
    {"health_memory_warn_fraction", K_DOUBLE, F(health_memory_warn_fraction), "0.70", 0, 1,
     "Health: a device-to-device copy below this fraction of the GPU model's nominal memory "
     "bandwidth warns (an H200 copies at 85% of its 4.8 TB/s)."},
    {"health_memory_fail_fraction", K_DOUBLE, F(health_memory_fail_fraction), "0.50", 0, 1,
     "Health: below this fraction of the model's nominal memory bandwidth fails."},
    {"health_extended_budget_s", K_UINT, F(health_extended_budget_s), "30", 1, 3600,
     "The extended health tier's time budget for the whole node (seconds): each GPU's part "
     "(run side by side) gets two thirds of it when the GPU pairs are checked too, the pairs "
     "the rest; what does not fit is skipped, and the verdict says what."},
    {"gpu_models_file", K_STR, F(gpu_models_file), "/etc/umd/gpu-models.conf", 0, 0,
     "GPU models that override or add to the shipped table of what each model should reach "
     "(INI: a [name] section per model; see gpu-models.conf). A missing file: the shipped "
     "table alone."},

    /* Links and inventory (issue 58, daemon/health_links.c). */
    {"expected_gpus", K_UINT, F(expected_gpus), "0", 0, 1024,
     "The GPUs this node should have; fewer fails the node in /v1/health (a GPU fallen off the "
     "bus, action reboot_node), naming the NVIDIA GPUs the PCI bus lists that umd does not "
     "own. 0: not checked."},
    {"health_pcie_replay_floor_per_min", K_DOUBLE, F(health_pcie_replay_floor_per_min), "8", 0, 1e9,
     "Health: PCIe replays a minute always allowed, whatever the link (DCGM's "
     "DCGM_LIMIT_MAX_PCIREPLAY_RATE); above it the limit is the link's spec, 1e-12 x line rate "
     "x lanes (Gen5 x16: 30.2 a minute). Faster warns."},
    {"health_pcie_replay_fail_factor", K_DOUBLE, F(health_pcie_replay_fail_factor), "10", 0, 1e9,
     "Health: PCIe replays this many times the limit fail the GPU (action service). 0: never "
     "fail, only warn."},
    {"health_nvlink_crc_fail_per_s", K_DOUBLE, F(health_nvlink_crc_fail_per_s), "100", 0, 1e12,
     "Health: NVLink CRC errors a second, on any link, that fail the GPU (DCGM's "
     "DCGM_LIMIT_MAX_NVLINK_CRC_ERROR; action reset_gpu)."},
    {"health_nvlink_error_fail_per_min", K_DOUBLE, F(health_nvlink_error_fail_per_min), "0", 0,
     1e12,
     "Health: NVLink replay or recovery errors a minute, on any link, above which the GPU fails "
     "(DCGM fails on any; action reset_gpu)."},
    {"xid_source", K_STR, F(xid_source), "auto", 0, 0,
     "Where the Xid watch reads the kernel's messages: 'kmsg' (/dev/kmsg: the unit gives "
     "CAP_SYSLOG), 'journal' (the journal's kernel transport: group systemd-journal), 'auto' "
     "(kmsg, else the journal), 'nvml' (NVML's Xid events alone), 'file:PATH' (a file or FIFO "
     "read from its end as it grows: tests' fixtures), 'kmsg:PATH' (a file of /dev/kmsg "
     "records read from its start, as the look back reads the kernel's ring: tests), "
     "'journal:DIR' (the journal files in DIR: tests), or 'none'."},
    {"xid_nvml_events", K_BOOL, F(xid_nvml_events), "true", 0, 0,
     "On real GPUs, also take NVML's Xid events beside the kernel source (one event said by "
     "both is counted once)."},
    {"xid_actions", K_STR, F(xid_actions), "", 0, 0,
     "Overrides of the Xid table's actions, CODE:ACTION separated by commas (e.g. "
     "'13:none,79:reboot_node'; actions none, restart_job, reset_gpu, reboot_node, service). "
     "An Xid whose action is reset_gpu or beyond fails its GPU."},
    {"xid_events_max", K_UINT, F(xid_events_max), "64", 0, 100000,
     "Recent Xid events kept for each GPU (and for the node) in /v1/devices and /v1/health."},
    {"xid_dedup_ms", K_UINT, F(xid_dedup_ms), "2000", 0, 600000,
     "Two reports of one Xid on one GPU from different sources (the kernel's line, NVML's "
     "event, a 'fallen off the bus' line beside Xid 79) within this many ms are one event."},
    {"xid_boot_id_file", K_STR, F(xid_boot_id_file), "/proc/sys/kernel/random/boot_id", 0, 0,
     "The boot's id: a failing Xid whose action a reboot or a GPU reset clears is cleared once "
     "this changes (tests point it elsewhere)."},

    {"log_level", K_LOGLEVEL, F(log_level), "info", 0, 0, "error, warning, notice, info or debug."},
};
const size_t config_n_keys = ELEMENTSOF(config_keys);

/* The Xid watch's keys: xid_source one of its forms, xid_actions a valid override list. */
static int xid_config_check(const struct umd_config *c, char *err, size_t errlen)
{
        static const char *const sources[] = {"auto", "kmsg", "journal", "nvml", "none"};
        struct xid_overrides ov;
        char why[CONFIG_ERR_MAX / 2];
        const char *colon = c->xid_source ? strchr(c->xid_source, ':') : NULL;
        /* file:PATH, kmsg:PATH, journal:DIR (tests and fixtures), each with a path */
        bool ok =
            colon && colon[1] &&
            (strncmp(c->xid_source, "file:", 5) == 0 || strncmp(c->xid_source, "kmsg:", 5) == 0 ||
             strncmp(c->xid_source, "journal:", 8) == 0);

        for (size_t i = 0; !ok && c->xid_source && i < ELEMENTSOF(sources); i++)
                ok = strcmp(c->xid_source, sources[i]) == 0;
        if (!ok) {
                snprintf(err, errlen,
                         "xid_source '%s': auto, kmsg, journal, nvml, none, file:PATH, "
                         "kmsg:PATH or journal:DIR",
                         c->xid_source ? c->xid_source : "");
                return -EINVAL;
        }
        if (!c->xid_boot_id_file) {
                snprintf(err, errlen, "xid_boot_id_file must not be empty");
                return -EINVAL;
        }
        if (xid_overrides_parse(c->xid_actions, &ov, why, sizeof(why)) < 0) {
                snprintf(err, errlen, "xid_actions: %s", why);
                return -EINVAL;
        }
        return 0;
}

void config_init(struct umd_config *c)
{
        char err[CONFIG_ERR_MAX];

        memset(c, 0, sizeof(*c));
        for (size_t i = 0; i < ELEMENTSOF(config_keys); i++) {
                int r = config_read_key(c, &config_keys[i], config_keys[i].def, false, err,
                                        sizeof(err));
                if (r < 0) { /* a bad default is a programming error */
                        fprintf(stderr, "umd: bad default for %s: %s\n", config_keys[i].name, err);
                        abort();
                }
        }
        const char *sd = getenv("STATE_DIRECTORY"); /* set by systemd's StateDirectory= */
        if (sd && sd[0] && !strchr(sd, ':')) {
                free(c->state_dir);
                c->state_dir = strdup(sd);
        }
}

void config_free(struct umd_config *c)
{
        for (size_t i = 0; i < ELEMENTSOF(config_keys); i++) {
                if (config_keys[i].type == K_STR) {
                        char **s = (char **)((char *)c + config_keys[i].off);
                        free(*s);
                        *s = NULL;
                }
        }
        config_read_listen_clear(c);
        free(c->config_file);
        c->config_file = NULL;
        free(c->export_dir);
        c->export_dir = NULL;
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fputs("umd: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputs(" (see umd --help)\n", stderr);
        va_end(ap);
        return -EINVAL;
}

/* Keys that, together, would refuse or cut every canonical health check: Slurm and NHC would
 * then read "unknown" forever and never drain a bad GPU. Said at start (and by --check-config),
 * naming both keys, rather than at every check. The extended tier's full_size is not among
 * them: its default is clamped to max_buffer_bytes (catalog.c). */
static int canonical_check_fits(const struct umd_config *c)
{
        char max[SIZE_STRING_MAX], size[SIZE_STRING_MAX];

        size_format(c->max_buffer_bytes, max, sizeof(max));
        if (c->health_size > c->max_buffer_bytes)
                return usage_error("health_size (%s) is above max_buffer_bytes (%s): every "
                                   "canonical health check would be refused",
                                   size_format(c->health_size, size, sizeof(size)), max);
        if (c->health_d2d_size > c->max_buffer_bytes)
                return usage_error("health_d2d_size (%s) is above max_buffer_bytes (%s): every "
                                   "canonical health check would be refused",
                                   size_format(c->health_d2d_size, size, sizeof(size)), max);
        /* The check runs under job_timeout_default_s; the extended tier may use its whole
         * budget, and the worker's start comes on top. */
        if (c->health_extended_budget_s >= c->job_timeout_default_s)
                return usage_error("health_extended_budget_s (%u) is not below "
                                   "job_timeout_default_s (%u): every extended health check "
                                   "would be cut by its deadline",
                                   c->health_extended_budget_s, c->job_timeout_default_s);
        return 0;
}

/* getopt_long's table: umd's own flags first, then every key of the table by its dashed name
 * (--max-jobs) and, where it differs, its underscored one (--max_jobs, as the file spells it),
 * and --worker, the short spelling of --worker-path that DESIGN.md and issues use. A bool key
 * takes an optional value: --auth-reads, --auth-reads=false, or "true"/"false" as the next
 * argument. */
enum {
        OPT_CHECK_CONFIG = 0x100, /* past every char, so no short option collides */
        OPT_PRINT_CONFIG,
        OPT_PRINT_OPENAPI,
        OPT_EXPORT,
        OPT_KEY, /* a key of the table: which, from the option's index */
};

static const struct option own_options[] = {
    {"config", required_argument, NULL, 'c'},
    {"check-config", no_argument, NULL, OPT_CHECK_CONFIG},
    {"print-config", no_argument, NULL, OPT_PRINT_CONFIG},
    {"export", required_argument, NULL, OPT_EXPORT},
    {"print-openapi", no_argument, NULL, OPT_PRINT_OPENAPI},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
};
/* "+": stop at the first operand (umd takes none: it is an error, not moved to the end);
 * ":": a missing value is told apart from an unknown option. */
#define OWN_SHORT_OPTIONS "+:c:hV"
/* own options, two spellings a key, --worker, the terminator */
#define OPTIONS_MAX (ELEMENTSOF(own_options) + 2 * ELEMENTSOF(config_keys) + 2)

struct options {
        struct option opt[OPTIONS_MAX];
        const struct key *key[OPTIONS_MAX]; /* the key of each OPT_KEY entry */
        char dashed[ELEMENTSOF(config_keys)][CONFIG_FLAG_MAX];
};

static void options_build(struct options *o)
{
        size_t n = 0;

        for (size_t i = 0; i < ELEMENTSOF(own_options); i++)
                o->opt[n++] = own_options[i];
        for (size_t i = 0; i < ELEMENTSOF(config_keys); i++) {
                int has_arg = config_keys[i].type == K_BOOL ? optional_argument : required_argument;

                config_print_flag_name(&config_keys[i], o->dashed[i], sizeof(o->dashed[i]));
                o->key[n] = &config_keys[i];
                o->opt[n++] = (struct option){o->dashed[i], has_arg, NULL, OPT_KEY};
                if (strcmp(o->dashed[i], config_keys[i].name) != 0) {
                        o->key[n] = &config_keys[i];
                        o->opt[n++] = (struct option){config_keys[i].name, has_arg, NULL, OPT_KEY};
                }
                if (strcmp(config_keys[i].name, "worker_path") == 0) {
                        o->key[n] = &config_keys[i];
                        o->opt[n++] = (struct option){"worker", has_arg, NULL, OPT_KEY};
                }
        }
        o->opt[n] = (struct option){0};
}

/* Whether arg names an option exactly: getopt_long also takes an unambiguous abbreviation
 * (--max-job) and short options run together (-hV, -cFILE), which umd has always refused. */
static bool options_exact(const struct options *o, const char *arg)
{
        if (arg[0] != '-')
                return false;
        if (arg[1] != '-')
                return arg[1] && !arg[2] && strchr("chV", arg[1]);
        size_t n = strcspn(arg + 2, "=");
        for (const struct option *p = o->opt; p->name; p++)
                if (strlen(p->name) == n && strncmp(p->name, arg + 2, n) == 0)
                        return true;
        return false;
}

/* A key given on the command line, applied after the file is read. */
struct flag_value {
        const struct key *key;
        const char *value;
        const char *flag; /* as typed, for the error: "--max-jobs" or "--max_jobs=0" */
};

/* The named config file, or else the default one when it is there. 0 or -EINVAL (said). */
static int load_file(struct umd_config *c, const char *config_file)
{
        int r;

        if (config_file) {
                r = config_load_file(c, config_file);
                if (r < 0)
                        return -EINVAL;
        } else if (access(UMD_DEFAULT_CONFIG_FILE, F_OK) == 0) {
                config_file = UMD_DEFAULT_CONFIG_FILE;
                r = config_load_file(c, config_file);
                if (r < 0)
                        return -EINVAL;
        }
        if (config_file) {
                free(c->config_file);
                c->config_file = strdup(config_file);
        }
        return 0;
}

/* The keys given as flags, over the file's. The first --listen replaces the file's list, later
 * ones add. */
static int flags_apply(struct umd_config *c, const struct flag_value *flags, size_t n_flags)
{
        char err[CONFIG_ERR_MAX];
        bool listen_seen = false;

        for (size_t i = 0; i < n_flags; i++) {
                const struct key *k = flags[i].key;
                const char *a = flags[i].flag;
                bool append = k->type == K_LISTEN && listen_seen;

                if (k->type == K_LISTEN)
                        listen_seen = true;
                int r = config_read_key(c, k, flags[i].value, append, err, sizeof(err));
                if (r < 0)
                        return usage_error("--%.*s: %s", (int)strcspn(a + 2, "="), a + 2, err);
        }
        return 0;
}

/* What no key checks alone: keys that contradict each other, or leave umd unable to work. */
static int keys_agree(const struct umd_config *c)
{
        char err[CONFIG_ERR_MAX];
        int r;

        if (c->job_timeout_default_s > c->job_timeout_max_s)
                return usage_error("job_timeout_default_s (%u) is above job_timeout_max_s (%u)",
                                   c->job_timeout_default_s, c->job_timeout_max_s);
        r = canonical_check_fits(c);
        if (r < 0)
                return r;
        if (c->health_baseline_min_runs > c->health_baseline_runs)
                return usage_error("health_baseline_min_runs (%u) is above health_baseline_runs "
                                   "(%u)",
                                   c->health_baseline_min_runs, c->health_baseline_runs);
        if (c->health_fail_fraction > c->health_warn_fraction)
                return usage_error("health_fail_fraction is above health_warn_fraction");
        if (c->health_memory_fail_fraction > c->health_memory_warn_fraction)
                return usage_error(
                    "health_memory_fail_fraction is above health_memory_warn_fraction");
        r = xid_config_check(c, err, sizeof(err));
        if (r < 0)
                return usage_error("%s", err);
        if ((c->tls_cert == NULL) != (c->tls_key == NULL))
                return usage_error("tls_cert and tls_key go together");
        if (!c->state_dir)
                return usage_error("state_dir must not be empty");
        return 0;
}

int config_parse_args(struct umd_config *c, int argc, char **argv)
{
        _cleanup_free_ struct options *o = calloc(1, sizeof(*o));
        _cleanup_free_ struct flag_value *flags = calloc(argc > 0 ? argc : 1, sizeof(*flags));
        const char *config_file = NULL;
        bool print_sample = false, check_only = false;
        size_t n_flags = 0;
        int r;

        if (!o || !flags)
                return -ENOMEM;
        options_build(o);

        /* Pass 1: the special flags, and reject unknown ones before reading any file. */
        opterr = 0;
        optind = 0; /* glibc: start over (the tests parse many command lines in one process) */
        for (;;) {
                int at = optind > 0 ? optind : 1, index = -1;
                int opt = getopt_long(argc, argv, OWN_SHORT_OPTIONS, o->opt, &index);
                const char *a = at < argc ? argv[at] : "";

                if (opt == -1) {
                        if (optind == at + 1 && strcmp(a, "--") == 0)
                                return usage_error("unknown option '--'");
                        if (optind < argc)
                                return usage_error("unknown option '%s'", argv[optind]);
                        break;
                }
                if (!options_exact(o, a))
                        return usage_error("unknown option '%s'", a);
                switch (opt) {
                case 'h':
                        config_print_help(stdout, argv[0]);
                        return 1;
                case 'V':
                        printf("umd %s (build %s, CUDA %s, malloc %s)\n", UMD_VERSION, UMD_BUILD,
                               UMD_HAVE_CUDA ? "enabled in the worker" : "disabled",
                               UMD_HAVE_JEMALLOC ? "jemalloc" : "glibc");
                        return 1;
                case ':':
                        return usage_error("%s needs %s", a,
                                           optopt == 'c'          ? "a file"
                                           : optopt == OPT_EXPORT ? "a directory"
                                                                  : "a value");
                case '?':
                        return usage_error("unknown option '%s'", a);
                case 'c':
                        config_file = optarg;
                        break;
                case OPT_CHECK_CONFIG:
                        check_only = true;
                        break;
                case OPT_PRINT_CONFIG:
                        print_sample = true;
                        break;
                case OPT_PRINT_OPENAPI:
                        c->print_openapi = true;
                        break;
                case OPT_EXPORT:
                        free(c->export_dir);
                        c->export_dir = strdup(optarg);
                        if (!c->export_dir)
                                return -ENOMEM;
                        break;
                case OPT_KEY: {
                        const struct key *k = o->key[index];
                        const char *v = optarg;

                        if (!v && k->type == K_BOOL)
                                v = optind < argc && (!strcmp(argv[optind], "true") ||
                                                      !strcmp(argv[optind], "false"))
                                        ? argv[optind++]
                                        : "true";
                        flags[n_flags++] = (struct flag_value){k, v, a};
                        break;
                }
                }
        }
        /* Pass 2: the file. The default one is optional; a named one must be readable. */
        r = load_file(c, config_file);
        if (r < 0)
                return r;
        /* Pass 3: flags win. */
        r = flags_apply(c, flags, n_flags);
        if (r < 0)
                return r;
        r = keys_agree(c);
        if (r < 0)
                return r;
        if (print_sample) {
                config_print_effective(stdout, c);
                return 1;
        }
        if (check_only) {
                c->check_only = true;
                return 1;
        }
        return 0;
}

unsigned config_http_threads(const struct umd_config *c, long cpus_online)
{
        assert(c);
        if (c->http_threads > 0)
                return c->http_threads;
        if (cpus_online < 1)
                return 1;
        return cpus_online > HTTP_THREADS_DEFAULT_MAX ? HTTP_THREADS_DEFAULT_MAX
                                                      : (unsigned)cpus_online;
}
