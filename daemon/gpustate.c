/* GPU state from NVML or, for fake devices, from a test file (see gpustate.h).
 *
 * Telling umd's worker apart from other processes: NVML lists the pids of every compute process
 * on the GPU. The worker's pid is excluded. In a container NVML may report pids of another pid
 * namespace, which match nothing here; then, while umd's worker runs, one unmatched process is
 * taken to be the worker (the count is never below what is certain). */
#include "gpustate.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fileio.h"
#include "jsonutil.h"
#include "log.h"
#include "nvml.h"
#include "util.h"

#include <fcntl.h>
#include <unistd.h>

#define NVML_PROCESSES_MAX   256
#define PCI_DEVICES_DIR      "/sys/bus/pci/devices"
#define PCI_VENDOR_NVIDIA    0x10de
#define PCI_ATTR_MAX         32 /* "0x030200\n" and room */
#define FAKE_STATE_MAX_BYTES (64u * 1024u)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const struct nvml_api *nvml; /* NULL until loaded, and after gpustate_shutdown */
static char nvml_why[GPU_STATE_WHY_MAX] = "NVML not loaded";
static char *fake_path;

static void nvml_load(void)
{
        const char *why = NULL;
        int r = nvml_open(&nvml, &why);

        if (r < 0) {
                snprintf(nvml_why, sizeof(nvml_why), "%s", why);
                if (r == -ENOENT)
                        log_warning("%s: other processes on the GPUs, compute mode and PCIe "
                                    "replays are unknown",
                                    nvml_why);
                else
                        log_warning("%s", nvml_why);
                return;
        }
        log_info("NVML loaded: umd keeps off GPUs that other processes use");
}

void gpustate_init(const struct umd_config *cfg)
{
        pthread_mutex_lock(&lock);
        if (cfg->fake_gpu_state && *cfg->fake_gpu_state)
                fake_path = strdup(cfg->fake_gpu_state);
        if (cfg->fake_devices == 0)
                nvml_load();
        pthread_mutex_unlock(&lock);
}

void gpustate_shutdown(void)
{
        pthread_mutex_lock(&lock);
        if (nvml)
                nvml_close();
        nvml = NULL;
        free(fake_path);
        fake_path = NULL;
        pthread_mutex_unlock(&lock);
}

const char *gpustate_backend(void)
{
        return fake_path ? "fake" : nvml ? "nvml" : "unavailable";
}

static void state_unknown(struct gpu_state *st, const char *why)
{
        *st = (struct gpu_state){.other_processes = -1,
                                 .current_gen = -1,
                                 .current_width = -1,
                                 .max_gen = -1,
                                 .max_width = -1,
                                 .replay_counter = -1,
                                 .nvlinks_active = -1};
        for (size_t l = 0; l < GPU_STATE_NVLINKS_MAX; l++)
                for (size_t k = 0; k < _GPU_NVLINK_KIND_MAX; k++)
                        st->nvlink_errors[l][k] = -1;
        snprintf(st->why, sizeof(st->why), "%s", why);
}

/* The links NVML says are up, and the error counters of each (issue 58). A GPU without NVLink
 * answers no link: nvlinks_active stays unknown. */
static void nvml_links(nvml_device dev, struct gpu_state *st)
{
        static const int counters[_GPU_NVLINK_KIND_MAX] = {
            [GPU_NVLINK_CRC] = NVML_NVLINK_ERROR_DL_CRC_FLIT,
            [GPU_NVLINK_REPLAY] = NVML_NVLINK_ERROR_DL_REPLAY,
            [GPU_NVLINK_RECOVERY] = NVML_NVLINK_ERROR_DL_RECOVERY,
        };
        unsigned long long v;
        int active;

        for (unsigned l = 0; l < GPU_STATE_NVLINKS_MAX; l++) {
                if (nvml->link_state(dev, l, &active) != NVML_SUCCESS)
                        continue;
                if (st->nvlinks_active < 0)
                        st->nvlinks_active = 0;
                if (active != NVML_FEATURE_ON)
                        continue;
                st->nvlinks_active++;
                for (size_t k = 0; nvml->nvlink_error && k < _GPU_NVLINK_KIND_MAX; k++)
                        if (nvml->nvlink_error(dev, l, counters[k], &v) == NVML_SUCCESS)
                                st->nvlink_errors[l][k] = (long long)v;
        }
}

static bool pid_here(unsigned pid)
{
        return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

int gpustate_count_others(const unsigned *pids, unsigned n, pid_t own_pid)
{
        unsigned others = 0, unmatched = 0;
        bool own_seen = false;

        for (unsigned i = 0; i < n; i++) {
                if (own_pid > 0 && pids[i] == (unsigned)own_pid) {
                        own_seen = true;
                        continue;
                }
                others++;
                if (!pid_here(pids[i]))
                        unmatched++;
        }
        if (own_pid > 0 && !own_seen && unmatched > 0)
                others--;
        return (int)others;
}

/* Others among the n processes pids[], umd's workers excluded: the GPU's own (own_pid) and the
 * node worker that spans GPUs (node_pid), each matched by pid or, from another pid namespace,
 * taken to be one unmatched process (see the top of the file). */
static int count_others(const unsigned *all, unsigned n, pid_t own_pid, pid_t node_pid)
{
        unsigned pids[NVML_PROCESSES_MAX] = {0}, m = 0;
        bool node_seen = false;
        int others;

        for (unsigned i = 0; i < n && i < NVML_PROCESSES_MAX; i++) {
                if (node_pid > 0 && all[i] == (unsigned)node_pid) {
                        node_seen = true;
                        continue;
                }
                pids[m++] = all[i];
        }
        others = gpustate_count_others(pids, m, own_pid);
        if (node_pid > 0 && !node_seen && others > 0)
                for (unsigned k = 0; k < m; k++)
                        if (pids[k] != (unsigned)own_pid && !pid_here(pids[k])) {
                                others--;
                                break;
                        }
        return others;
}

int gpustate_others_in_look(const json_t *look, pid_t own_pid, pid_t node_pid)
{
        unsigned pids[NVML_PROCESSES_MAX];
        const json_t *list = json_object_get(look, "pids"), *v;
        const json_t *others = json_object_get(look, "others");
        size_t i, n = json_array_size(list);

        if (json_is_integer(others))
                return json_integer_value(others) >= 0 && json_integer_value(others) <= INT_MAX
                           ? (int)json_integer_value(others)
                           : -1;
        if (!json_is_array(list) || n > NVML_PROCESSES_MAX)
                return -1;
        if (json_is_true(json_object_get(look, "truncated")))
                return NVML_PROCESSES_MAX; /* more than it lists: surely busy */
        json_array_foreach(list, i, v)
        {
                if (!json_is_integer(v) || json_integer_value(v) <= 0 ||
                    json_integer_value(v) > UINT_MAX)
                        return -1;
                pids[i] = (unsigned)json_integer_value(v);
        }
        return count_others(pids, (unsigned)n, own_pid, node_pid);
}

static void nvml_query(const char *uuid, pid_t own_pid, pid_t node_pid, struct gpu_state *st)
{
        struct nvml_process_info procs[NVML_PROCESSES_MAX];
        unsigned n = NVML_PROCESSES_MAX, v;
        nvml_device dev;
        int mode;
        nvml_return r;

        r = nvml->by_uuid(uuid, &dev);
        if (r != NVML_SUCCESS) {
                snprintf(st->why, sizeof(st->why), "NVML does not know %s: %s", uuid,
                         nvml_strerror(r));
                return;
        }
        st->known = true;
        r = nvml->processes(dev, &n, procs);
        if (r == NVML_SUCCESS) {
                unsigned pids[NVML_PROCESSES_MAX];

                for (unsigned i = 0; i < n && i < NVML_PROCESSES_MAX; i++)
                        pids[i] = procs[i].pid;
                st->other_processes = count_others(pids, n, own_pid, node_pid);
        } else if (r == NVML_ERROR_INSUFFICIENT_SIZE)
                st->other_processes = NVML_PROCESSES_MAX; /* more than we list: surely busy */
        else
                snprintf(st->why, sizeof(st->why), "NVML process list: %s", nvml_strerror(r));
        if (nvml->compute_mode && nvml->compute_mode(dev, &mode) == NVML_SUCCESS)
                snprintf(st->compute_mode, sizeof(st->compute_mode), "%s",
                         mode == 3   ? "exclusive_process"
                         : mode == 2 ? "prohibited"
                         : mode == 1 ? "exclusive_thread"
                                     : "default");
        if (nvml->cur_gen && nvml->cur_gen(dev, &v) == NVML_SUCCESS)
                st->current_gen = (int)v;
        if (nvml->cur_width && nvml->cur_width(dev, &v) == NVML_SUCCESS)
                st->current_width = (int)v;
        if (nvml->max_gen && nvml->max_gen(dev, &v) == NVML_SUCCESS)
                st->max_gen = (int)v;
        if (nvml->max_width && nvml->max_width(dev, &v) == NVML_SUCCESS)
                st->max_width = (int)v;
        if (nvml->replay && nvml->replay(dev, &v) == NVML_SUCCESS)
                st->replay_counter = v;
        nvml_links(dev, st);
}

static int int_or(const json_t *o, const char *k, int def)
{
        json_t *v = json_object_get(o, k);
        return json_is_integer(v) ? (int)json_integer_value(v) : def;
}

/* The entry's "nvlinks_active" (N links up) and "nvlink_errors" ([{"link": L, "crc": N,
 * "replay": N, "recovery": N}]; a counter not given is 0 on a link given). */
static void fake_links(const json_t *o, struct gpu_state *st)
{
        static const char *const keys[_GPU_NVLINK_KIND_MAX] = {"crc", "replay", "recovery"};
        const json_t *e;
        size_t i;

        st->nvlinks_active = int_or(o, "nvlinks_active", -1);
        json_array_foreach(json_object_get(o, "nvlink_errors"), i, e)
        {
                json_int_t l = json_integer_value(json_object_get(e, "link"));
                if (l < 0 || l >= GPU_STATE_NVLINKS_MAX)
                        continue;
                for (size_t k = 0; k < _GPU_NVLINK_KIND_MAX; k++) {
                        json_t *n = json_object_get(e, keys[k]);
                        st->nvlink_errors[l][k] = json_is_integer(n) ? json_integer_value(n) : 0;
                }
        }
}

/* {"0": {"other_processes": 1, "compute_mode": "exclusive_process", "pcie": {...},
 *        "replay_counter": 3}, ...}: a missing file or entry is an idle, healthy GPU. */
static void fake_query(int index, struct gpu_state *st)
{
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        char key[DECIMAL_STR_MAX(int)];
        json_error_t err;
        json_t *all, *o;
        int r;

        /* The link stays unknown unless the file sets it: the fake worker's own link
         * (UMD_FAKE_LINK) is then what a check is judged against. */
        st->known = true;
        st->other_processes = 0;
        snprintf(st->compute_mode, sizeof(st->compute_mode), "default");
        st->replay_counter = 0;
        if (!fake_path)
                return;
        r = read_file_at(AT_FDCWD, fake_path, FAKE_STATE_MAX_BYTES, &buf, &len);
        if (r < 0)
                return;
        all = json_parse_strict(buf, len, 8, &err);
        snprintf(key, sizeof(key), "%d", index);
        o = json_object_get(all, key);
        if (json_is_object(o)) {
                json_t *pcie = json_object_get(o, "pcie");
                const char *mode = json_string_value(json_object_get(o, "compute_mode"));

                st->other_processes = int_or(o, "other_processes", 0);
                if (mode)
                        snprintf(st->compute_mode, sizeof(st->compute_mode), "%s", mode);
                if (json_is_object(pcie)) {
                        st->current_gen = int_or(pcie, "current_gen", 5);
                        st->current_width = int_or(pcie, "current_width", 16);
                        st->max_gen = int_or(pcie, "max_gen", 5);
                        st->max_width = int_or(pcie, "max_width", 16);
                }
                st->replay_counter = int_or(o, "replay_counter", 0);
                fake_links(o, st);
        }
        json_decref(all);
}

void gpustate_query(const char *uuid, int fake_index, pid_t own_pid, pid_t node_pid,
                    struct gpu_state *ret)
{
        struct gpu_state st;

        pthread_mutex_lock(&lock);
        state_unknown(&st, nvml_why);
        if (fake_index >= 0) {
                st.why[0] = '\0';
                fake_query(fake_index, &st);
        } else if (nvml && uuid) {
                st.why[0] = '\0';
                nvml_query(uuid, own_pid, node_pid, &st);
        }
        pthread_mutex_unlock(&lock);
        *ret = st;
}

/* A sysfs attribute of one PCI device as a number; -1 when unreadable. */
static long pci_attr(const char *dev, const char *attr)
{
        char path[PATH_MAX];
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;

        snprintf(path, sizeof(path), "%s/%s/%s", PCI_DEVICES_DIR, dev, attr);
        if (read_file_at(AT_FDCWD, path, PCI_ATTR_MAX, &buf, &len) < 0)
                return -1;
        return strtol(buf, NULL, 16);
}

static json_t *fake_pci_gpus(void)
{
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        json_error_t err;
        json_t *all, *list;

        if (read_file_at(AT_FDCWD, fake_path, FAKE_STATE_MAX_BYTES, &buf, &len) < 0)
                return NULL;
        all = json_parse_strict(buf, len, 8, &err);
        list = json_object_get(all, "pci_gpus");
        list = json_is_array(list) ? json_incref(list) : NULL;
        json_decref(all);
        return list;
}

json_t *gpustate_pci_gpus(void)
{
        json_t *list;
        struct dirent *e;
        DIR *dir;

        pthread_mutex_lock(&lock);
        bool fake = fake_path != NULL;
        list = fake ? fake_pci_gpus() : NULL;
        pthread_mutex_unlock(&lock);
        if (fake || !(dir = opendir(PCI_DEVICES_DIR)))
                return list;
        list = json_array();
        while (list && (e = readdir(dir))) {
                long cls;
                if (e->d_name[0] == '.' || pci_attr(e->d_name, "vendor") != PCI_VENDOR_NVIDIA)
                        continue;
                cls = pci_attr(e->d_name, "class") >> 8; /* base class and subclass */
                if (cls == 0x0300 || cls == 0x0302)
                        json_array_append_new(list, json_string(e->d_name));
        }
        closedir(dir);
        return list;
}
