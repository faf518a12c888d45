/* Device discovery and identity: runs `umd-worker --list` once at start and keeps what it
 * printed. Never initialises CUDA itself (the worker does, in its own process). */
#include "devices.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "jsonutil.h"
#include "log.h"
#include "umd-build.h"
#include "util.h"

/* A place the worker may be: a directory (at most PATH_MAX) and "/kernels/umd-worker". */
#define CANDIDATE_PATH_MAX (PATH_MAX + 32)
/* fake_devices as a decimal argument. */
#define COUNT_ARG_MAX 16

#define LIST_OUTPUT_MAX (4u * 1024u * 1024u)

/* Why no GPU is there to own: one of two sentences. */
#define EMPTY_REASON_MAX 512

struct devices {
        struct device *dev;
        size_t n;
        char empty_reason[EMPTY_REASON_MAX];
};

/* The table the handle-less readers (devices_count, devices_get, ...) answer from: the one
 * devices_new made last, until it is freed. The job files call those readers; the rest of umd
 * holds the handle (d->devices). */
static struct devices *devices;

static bool is_executable(const char *p)
{
        struct stat st;
        return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

int devices_find_worker(const struct umd_config *cfg, char **ret)
{
        char self[PATH_MAX], cand[CANDIDATE_PATH_MAX];

        if (cfg->worker_path) {
                if (!is_executable(cfg->worker_path)) {
                        log_error("worker program %s is not an executable file", cfg->worker_path);
                        return -ENOENT;
                }
                *ret = strdup(cfg->worker_path);
                return *ret ? 0 : -ENOMEM;
        }
        /* In a build tree umd sits at the top and the worker in kernels/; prefer it there so
         * a developer's build never runs an older installed worker. */
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n > 0) {
                self[n] = 0;
                char *dir = dirname(self);
                const char *rel[] = {"kernels/umd-worker", "umd-worker"};
                for (size_t i = 0; i < ELEMENTSOF(rel); i++) {
                        snprintf(cand, sizeof(cand), "%s/%s", dir, rel[i]);
                        if (is_executable(cand)) {
                                *ret = strdup(cand);
                                return *ret ? 0 : -ENOMEM;
                        }
                }
        }
        snprintf(cand, sizeof(cand), "%s/umd-worker", UMD_LIBEXECDIR);
        if (is_executable(cand)) {
                *ret = strdup(cand);
                return *ret ? 0 : -ENOMEM;
        }
        log_error("cannot find umd-worker (looked beside umd and in %s); set worker_path",
                  UMD_LIBEXECDIR);
        return -ENOENT;
}

/* Run argv, collect stdout (bounded) within timeout_ms. 0 with *ret or -errno. */
static int run_capture(char *const argv[], unsigned timeout_ms, char **ret, int *ret_status)
{
        int pipefd[2];
        posix_spawn_file_actions_t fa;
        pid_t pid;
        int r;

        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
        r = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(pipefd[1]);
        if (r != 0) {
                close(pipefd[0]);
                return -r;
        }

        size_t len = 0, cap = 65536;
        char *buf = malloc(cap);
        uint64_t deadline = now_monotonic_ms() + timeout_ms;
        r = 0;
        while (buf) {
                uint64_t now = now_monotonic_ms();
                if (now >= deadline) {
                        r = -ETIMEDOUT;
                        break;
                }
                struct pollfd pfd = {.fd = pipefd[0], .events = POLLIN};
                int pr = poll(&pfd, 1, (int)(deadline - now));
                if (pr < 0 && errno == EINTR)
                        continue;
                if (pr == 0)
                        continue;
                if (len + 1 >= cap) {
                        if (cap >= LIST_OUTPUT_MAX) {
                                r = -EFBIG;
                                break;
                        }
                        char *nb = realloc(buf, cap * 2);
                        if (!nb) {
                                r = -ENOMEM;
                                break;
                        }
                        buf = nb;
                        cap *= 2;
                }
                ssize_t n = read(pipefd[0], buf + len, cap - len - 1);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t)n;
        }
        close(pipefd[0]);
        if (!buf)
                r = -ENOMEM;
        if (r < 0)
                kill(pid, SIGKILL);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (r < 0) {
                free(buf);
                return r;
        }
        buf[len] = 0;
        *ret = buf;
        *ret_status = status;
        return 0;
}

static bool selected(const struct umd_config *cfg, const json_t *dev)
{
        if (!cfg->devices || strcmp(cfg->devices, "all") == 0)
                return true;
        _cleanup_free_ char *copy = strdup(cfg->devices);
        char *save = NULL;
        bool hit = false;
        const char *uuid = json_string_value(json_object_get(dev, "uuid"));
        json_int_t idx = json_integer_value(json_object_get(dev, "index"));
        if (!copy)
                return false;
        for (char *w = strtok_r(copy, ", ", &save); w && !hit; w = strtok_r(NULL, ", ", &save)) {
                uint64_t n;
                if (parse_uint64(w, 0, 1024, &n) == 0)
                        hit = (json_int_t)n == idx;
                else
                        hit = uuid && strcasecmp(w, uuid) == 0;
        }
        return hit;
}

/* Discovery's devices that cfg selects, in ds. */
static int devices_discover(struct devices *ds, const struct umd_config *cfg,
                            const char *worker_path)
{
        char nbuf[COUNT_ARG_MAX];
        char *argv[6];
        size_t a = 0;
        _cleanup_free_ char *out = NULL;
        int status, r;

        argv[a++] = (char *)worker_path;
        if (cfg->fake_devices > 0) {
                snprintf(nbuf, sizeof(nbuf), "%u", cfg->fake_devices);
                argv[a++] = (char *)"--fake";
                argv[a++] = nbuf;
        }
        argv[a++] = (char *)"--list";
        argv[a] = NULL;

        r = run_capture(argv, cfg->discovery_timeout_ms, &out, &status);
        if (r < 0)
                return log_error_errno(r, "device discovery (%s --list) failed: %m", worker_path);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                log_error("device discovery (%s --list) exited with status %d", worker_path,
                          WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
                return -EIO;
        }
        json_error_t jerr;
        _cleanup_json_ json_t *list = json_loads(out, 0, &jerr);
        if (!json_is_array(list)) {
                log_error("device discovery printed no JSON array: %s", jerr.text);
                return -EBADMSG;
        }

        ds->dev = calloc(json_array_size(list) + 1, sizeof(*ds->dev));
        if (!ds->dev)
                return -ENOMEM;
        size_t i;
        json_t *d;
        json_array_foreach(list, i, d)
        {
                const char *uuid = json_string_value(json_object_get(d, "uuid"));
                if (!json_is_object(d) || !uuid || strlen(uuid) >= sizeof(ds->dev[0].uuid)) {
                        log_warning("discovery: skipping an entry without a uuid");
                        continue;
                }
                if (!selected(cfg, d))
                        continue;
                struct device *dev = &ds->dev[ds->n];
                dev->index = ds->n;
                snprintf(dev->uuid, sizeof(dev->uuid), "%s", uuid);
                dev->fake = json_is_true(json_object_get(d, "fake"));
                dev->info = json_incref(d);
                /* Nothing runs on a GPU until a part needs it (supervisor.h). */
                dev->wstate = WORKER_COLD;
                dev->fake_index =
                    dev->fake ? (int)json_integer_value(json_object_get(d, "index")) : -1;
                dev->gpu = (struct gpu_state){.other_processes = -1,
                                              .current_gen = -1,
                                              .current_width = -1,
                                              .max_gen = -1,
                                              .max_width = -1,
                                              .replay_counter = -1};
                ds->n++;
                log_info("device %zu: %s %s%s", dev->index,
                         json_string_value(json_object_get(d, "name")) ?: "?", dev->uuid,
                         dev->fake ? " (fake)" : "");
        }
        if (ds->n == 0) {
                snprintf(ds->empty_reason, sizeof(ds->empty_reason), "%s",
                         json_array_size(list) == 0
                             ? "no GPU found (umd-worker --list found none; see the log)"
                             : "no discovered GPU matches the 'devices' setting");
                log_warning("%s", ds->empty_reason);
        }
        return 0;
}

int devices_new(const struct umd_config *cfg, const char *worker_path, struct devices **ret)
{
        struct devices *ds = calloc(1, sizeof(*ds));
        int r;

        if (!ds)
                return -ENOMEM;
        r = devices_discover(ds, cfg, worker_path);
        if (r < 0) {
                devices_free(ds);
                return r;
        }
        devices = ds;
        *ret = ds;
        return 0;
}

struct devices *devices_free(struct devices *ds)
{
        if (!ds)
                return NULL;
        for (size_t i = 0; i < ds->n; i++) {
                json_decref(ds->dev[i].info);
                json_decref(ds->dev[i].last_verdict);
                json_decref(ds->dev[i].verdict_by_tier);
        }
        free(ds->dev);
        if (devices == ds)
                devices = NULL;
        free(ds);
        return NULL;
}

size_t devices_size(const struct devices *ds)
{
        return ds ? ds->n : 0;
}

struct device *devices_at(const struct devices *ds, size_t i)
{
        return ds && i < ds->n ? &ds->dev[i] : NULL;
}

ssize_t devices_find_uuid(const struct devices *ds, const char *uuid)
{
        for (size_t i = 0; i < devices_size(ds); i++)
                if (strcasecmp(ds->dev[i].uuid, uuid) == 0)
                        return (ssize_t)i;
        return -1;
}

ssize_t devices_find(const struct devices *ds, const char *spec)
{
        uint64_t n;
        if (parse_uint64(spec, 0, 1 << 20, &n) == 0)
                return n < devices_size(ds) ? (ssize_t)n : -1;
        return devices_find_uuid(ds, spec);
}

const char *devices_why_empty(const struct devices *ds)
{
        /* Before discovery there is no reason to give yet, as there was none to keep. */
        return ds && ds->n == 0 ? ds->empty_reason : devices_size(ds) == 0 ? "" : NULL;
}

size_t devices_count(void)
{
        return devices_size(devices);
}

struct device *devices_get(size_t i)
{
        return devices_at(devices, i);
}

ssize_t devices_lookup_uuid(const char *uuid)
{
        return devices_find_uuid(devices, uuid);
}

const char *devices_empty_reason(void)
{
        return devices_why_empty(devices);
}

const char *const device_state_names[DEVICE_STATE_MAX] = {
    [DEVICE_IDLE] = "idle",         [DEVICE_BUSY] = "busy",
    [DEVICE_STARTING] = "starting", [DEVICE_RESTARTING] = "restarting",
    [DEVICE_FAULTED] = "faulted",   [DEVICE_STOPPED] = "stopped",
    [DEVICE_PAUSED] = "paused",
};

enum device_state device_state_of_worker(enum worker_state ws)
{
        /* A worker state per device state. */
        static const enum device_state of_worker[] = {
            [WORKER_STARTING] = DEVICE_STARTING, [WORKER_IDLE] = DEVICE_IDLE,
            [WORKER_BUSY] = DEVICE_BUSY,         [WORKER_BACKOFF] = DEVICE_RESTARTING,
            [WORKER_FAULTED] = DEVICE_FAULTED,   [WORKER_STOPPED] = DEVICE_STOPPED,
            [WORKER_COLD] = DEVICE_IDLE,
        };
        if ((size_t)ws >= ELEMENTSOF(of_worker))
                return DEVICE_FAULTED;
        return of_worker[ws];
}

enum device_state device_state(const struct device *d)
{
        /* A pause shows over all but a fault. */
        if (d->paused && d->wstate != WORKER_FAULTED)
                return DEVICE_PAUSED;
        return device_state_of_worker(d->wstate);
}

const char *device_state_string(const struct device *d)
{
        return device_state_names[device_state(d)];
}

json_t *device_to_json(const struct device *d)
{
        json_t *j = json_deep_copy(d->info);
        if (!j)
                return NULL;
        /* The worker's index is the CUDA ordinal; umd's index counts only the devices it owns. */
        json_object_set(j, "host_index", json_object_get(d->info, "index"));
        json_object_set_new(j, "index", json_integer((json_int_t)d->index));
        json_object_set_new(j, "state", json_string(device_state_string(d)));
        json_object_set_new(j, "state_reason", d->reason[0] ? json_string(d->reason) : json_null());
        json_object_set(j, "last_health", d->last_verdict ? d->last_verdict : json_null());
        json_object_set_new(j, "last_health_by_tier",
                            d->verdict_by_tier ? json_incref(d->verdict_by_tier) : json_object());
        /* A worker that said hello holds a CUDA context (and maybe its pool) on the GPU. */
        json_object_set_new(j, "warm",
                            json_boolean(d->wstate == WORKER_IDLE || d->wstate == WORKER_BUSY));
        json_object_set_new(j, "paused", json_boolean(d->paused));
        json_object_set_new(j, "pause_reason",
                            d->paused ? json_string(d->pause_reason) : json_null());
        json_object_set_new(j, "paused_at",
                            d->paused && d->paused_at[0] ? json_string(d->paused_at) : json_null());
        json_object_set_new(j, "other_processes",
                            d->gpu.known && d->gpu.other_processes >= 0
                                ? json_integer(d->gpu.other_processes)
                                : json_null());
        json_object_set_new(j, "compute_mode",
                            d->gpu.compute_mode[0] ? json_string(d->gpu.compute_mode)
                                                   : json_null());
        json_object_set_new(j, "gpu_state",
                            json_pack("{s:s, s:s?}", "source", gpustate_backend(), "unknown",
                                      d->gpu.why[0] ? d->gpu.why : NULL));
        return j;
}
