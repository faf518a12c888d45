/* Conditions of a run (see conditions.h). NVML comes through common/nvml.h, loaded at run time:
 * a worker on a machine without it still runs and says what it could not read. */
#include "conditions.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "nvml.h"
#include "nvml_errors.h"
#include "util.h"

#include <fcntl.h>
#include <sys/utsname.h>

/* nvidia_uvm's module parameters kept at most: it has about 40; the rest would be a new driver's
 * and are left out rather than grow the result without bound. */
#define UVM_PARAMS_MAX 64
/* One parameter's value as text: a number or a short word; a longer one is cut. */
#define UVM_VALUE_MAX  256
#define SYSFS_ATTR_MAX 4096 /* sysfs says 4096 bytes for every attribute, whatever it holds */
/* Why NVML cannot read a GPU's errors: "NVML does not know UUID: " and NVML's own words. */
#define CONDITIONS_UNKNOWN_MAX 160

json_t *conditions_throttle_words(unsigned long long mask)
{
        static const struct {
                unsigned long long bit;
                const char *name;
        } bits[] = {
            {0x1ull, "gpu_idle"},
            {0x2ull, "applications_clocks_setting"},
            {0x4ull, "sw_power_cap"},
            {0x8ull, "hw_slowdown"},
            {0x10ull, "sync_boost"},
            {0x20ull, "sw_thermal_slowdown"},
            {0x40ull, "hw_thermal_slowdown"},
            {0x80ull, "hw_power_brake_slowdown"},
            {0x100ull, "display_clock_setting"},
        };
        json_t *a = json_array();
        unsigned long long known = 0;
        for (size_t i = 0; a && i < ELEMENTSOF(bits); i++) {
                known |= bits[i].bit;
                if (mask & bits[i].bit)
                        json_array_append_new(a, json_string(bits[i].name));
        }
        if (a && (mask & ~known))
                json_array_append_new(a, json_string("other"));
        return a;
}

/* value, or null when NVML did not answer */
static json_t *uint_or_null(nvml_return r, unsigned v)
{
        return r == NVML_SUCCESS ? json_integer(v) : json_null();
}

json_t *conditions_gpu(const char *uuid)
{
        const struct nvml_api *nvml = NULL;
        const char *why = NULL;
        nvml_device d;
        unsigned v = 0;
        unsigned long long mask = 0;
        nvml_return r;

        if (nvml_open(&nvml, &why) < 0)
                return json_pack("{s:s}", "unavailable", why);
        if (!uuid || nvml->by_uuid(uuid, &d) != NVML_SUCCESS)
                return json_pack("{s:s}", "unavailable", "NVML does not know this GPU's UUID");
        json_t *o = json_object();
        if (!o)
                return NULL;
#define FIELD(key, fn, ...)                                                                        \
        do {                                                                                       \
                r = nvml->fn ? nvml->fn(d, __VA_ARGS__) : -1;                                      \
                json_object_set_new(o, key, uint_or_null(r, v));                                   \
        } while (0)
        FIELD("sm_clock_mhz", clock, NVML_CLOCK_SM, &v);
        FIELD("memory_clock_mhz", clock, NVML_CLOCK_MEM, &v);
        FIELD("graphics_clock_mhz", clock, NVML_CLOCK_GRAPH, &v);
        FIELD("max_sm_clock_mhz", max_clock, NVML_CLOCK_SM, &v);
        FIELD("temperature_c", temperature, NVML_TEMPERATURE_GPU, &v);
        r = nvml->power ? nvml->power(d, &v) : -1;
        json_object_set_new(o, "power_w", r == NVML_SUCCESS ? json_real(v / 1000.0) : json_null());
#undef FIELD
        r = nvml->reasons ? nvml->reasons(d, &mask) : -1;
        if (r == NVML_SUCCESS) {
                json_object_set_new(o, "throttle_reasons", conditions_throttle_words(mask));
                json_object_set_new(o, "throttle_mask", json_integer((json_int_t)mask));
        } else {
                json_object_set_new(o, "throttle_reasons", json_null());
                json_object_set_new(o, "throttle_mask", json_null());
        }
        return o;
}

json_t *conditions_processes(const char *uuid)
{
        struct nvml_process_info procs[CONDITIONS_PIDS_MAX];
        const struct nvml_api *nvml = NULL;
        const char *why = NULL;
        unsigned n = CONDITIONS_PIDS_MAX;
        nvml_device d;
        nvml_return r;

        if (!uuid || nvml_open(&nvml, &why) < 0 || nvml->by_uuid(uuid, &d) != NVML_SUCCESS)
                return NULL;
        r = nvml->processes(d, &n, procs);
        if (r == NVML_ERROR_INSUFFICIENT_SIZE)
                return json_pack("{s:[], s:b}", "pids", "truncated", 1);
        if (r != NVML_SUCCESS)
                return NULL;
        json_t *pids = json_array();
        for (unsigned i = 0; pids && i < n && i < CONDITIONS_PIDS_MAX; i++)
                json_array_append_new(pids, json_integer(procs[i].pid));
        return pids ? json_pack("{s:o}", "pids", pids) : NULL;
}

/* "1\n" -> 1, "Y\n" -> "Y": integers stay integers. */
static json_t *param_value(const char *text)
{
        char buf[UVM_VALUE_MAX], *end;
        snprintf(buf, sizeof(buf), "%s", text);
        buf[strcspn(buf, "\n")] = '\0';
        errno = 0;
        long long v = strtoll(buf, &end, 0);
        if (*buf && !*end && errno == 0)
                return json_integer(v);
        return json_string(buf);
}

json_t *conditions_uvm_params(const char *dir, const char **ret_why)
{
        DIR *d = opendir(dir);
        struct dirent *e;
        json_t *o;
        size_t n = 0;

        if (!d) {
                *ret_why = errno == ENOENT ? "nvidia_uvm is not loaded (no module parameters)"
                                           : "cannot read nvidia_uvm's module parameters";
                return NULL;
        }
        o = json_object();
        while (o && (e = readdir(d)) && n < UVM_PARAMS_MAX) {
                char path[PATH_MAX], *buf = NULL;
                size_t len = 0;
                if (e->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
                /* Some parameters are write-only or root-only: null says so. */
                if (read_file_at(AT_FDCWD, path, SYSFS_ATTR_MAX, &buf, &len) < 0)
                        json_object_set_new(o, e->d_name, json_null());
                else
                        json_object_set_new(o, e->d_name, param_value(buf));
                free(buf);
                n++;
        }
        closedir(d);
        return o;
}

/* A module parameter as a flag: 1 or "Y" is set; 0, "N" or anything unread is not. */
static bool flag_set(const json_t *v)
{
        const char *s = json_string_value(v);
        if (json_is_integer(v))
                return json_integer_value(v) != 0;
        return s && (s[0] == 'Y' || s[0] == 'y');
}

/* HMM's needs (NVIDIA's open-gpu-kernel-modules README and the CUDA programming guide's
 * "Heterogeneous Memory Management"): the open kernel modules, Linux 6.1.24 or later, CUDA 12.2
 * or later, nvidia_uvm's HMM left on, and the device then reports pageableMemoryAccess. */
#define HMM_LINUX_MAJOR 6
#define HMM_LINUX_MINOR 1
#define HMM_LINUX_PATCH 24
#define HMM_CUDA_MIN    12020
/* Every blocker's sentence joined by "; " (the five together are under 350 bytes). */
#define HMM_WHY_MAX 512

static bool linux_new_enough(const char *release)
{
        int a = 0, b = 0, c = 0;
        if (!release || sscanf(release, "%d.%d.%d", &a, &b, &c) < 2)
                return false;
        if (a != HMM_LINUX_MAJOR)
                return a > HMM_LINUX_MAJOR;
        return b != HMM_LINUX_MINOR ? b > HMM_LINUX_MINOR : c >= HMM_LINUX_PATCH;
}

/* "open" when /proc/driver/nvidia/version says "Open Kernel Module", "proprietary" otherwise,
 * null when it could not be read. */
static json_t *module_kind(const char *version_text)
{
        if (!version_text)
                return json_null();
        return json_string(strstr(version_text, "Open Kernel Module") ? "open" : "proprietary");
}

json_t *conditions_hmm(const json_t *uvm, const json_t *device, const char *version_text,
                       const char *release)
{
        json_t *pma = json_object_get(device, "pageableMemoryAccess");
        json_t *hpt = json_object_get(device, "pageableMemoryAccessUsesHostPageTables");
        json_t *dis = uvm ? json_object_get(uvm, "uvm_disable_hmm") : NULL;
        json_t *module = module_kind(version_text);
        json_int_t cuda = json_integer_value(json_object_get(device, "driver_version"));
        bool pageable = json_is_true(pma) || (json_is_integer(pma) && json_integer_value(pma));
        bool disabled = dis && flag_set(dis);
        char why[HMM_WHY_MAX] = "";
        size_t len = 0;

#define BLOCKER(cond, text)                                                                        \
        do {                                                                                       \
                if ((cond) && len < sizeof(why))                                                   \
                        len += snprintf(why + len, sizeof(why) - len, "%s%s", len ? "; " : "",     \
                                        (text));                                                   \
        } while (0)
        BLOCKER(!pageable, "the device reports no pageableMemoryAccess: kernels cannot use "
                           "malloc memory");
        BLOCKER(disabled, "nvidia_uvm's uvm_disable_hmm is set");
        BLOCKER(json_is_string(module) && strcmp(json_string_value(module), "open") != 0,
                "the proprietary kernel module is loaded (HMM needs the open one)");
        BLOCKER(release && !linux_new_enough(release), "Linux is older than 6.1.24");
        BLOCKER(cuda > 0 && cuda < HMM_CUDA_MIN, "the driver's CUDA is older than 12.2");
#undef BLOCKER
        if (!len)
                snprintf(why, sizeof(why), "%s",
                         json_is_true(hpt) ? "the device reports pageableMemoryAccess through "
                                             "the host's page tables (ATS): system_memory runs"
                                           : "the device reports pageableMemoryAccess: "
                                             "system_memory runs");
        return json_pack("{s:b, s:O?, s:O?, s:b, s:s, s:o, s:s?, s:I}", "pageableMemoryAccess",
                         pageable, "pageableMemoryAccessUsesHostPageTables", hpt, "uvm_disable_hmm",
                         dis, "could_use_hmm", pageable && !disabled, "why", why, "kernel_module",
                         module, "kernel_release", release, "cuda_driver_version", cuda);
}

json_t *conditions_host(const char *uvm_dir, const json_t *device)
{
        const char *why = NULL;
        json_t *uvm = conditions_uvm_params(uvm_dir, &why);
        char *version = NULL;
        size_t vlen = 0;
        struct utsname u;

        if (read_file_at(AT_FDCWD, CONDITIONS_NVIDIA_VERSION, SYSFS_ATTR_MAX, &version, &vlen) < 0)
                version = NULL;
        json_t *hmm = conditions_hmm(uvm, device, version, uname(&u) == 0 ? u.release : NULL);
        free(version);
        json_t *o = json_pack("{s:o, s:o}", "nvidia_uvm", uvm ? uvm : json_null(), "hmm", hmm);
        if (o && !uvm)
                json_object_set_new(o, "nvidia_uvm_why", json_string(why));
        return o;
}

static json_t *fake_gpu(const json_t *throttle)
{
        json_t *o = json_pack("{s:s}", "unavailable", "fake device: no NVML");
        if (o && throttle)
                json_object_set(o, "throttle_reasons", (json_t *)throttle);
        return o;
}

json_t *conditions_before(const json_t *device, bool fake)
{
        return fake ? fake_gpu(NULL)
                    : conditions_gpu(json_string_value(json_object_get(device, "uuid")));
}

void conditions_stamp(json_t *result, const json_t *device, json_t *gpu_before, bool fake)
{
        json_t *ctx = json_object_get(result, "context");
        json_t *c =
            fake ? json_pack("{s:n, s:s, s:o}", "nvidia_uvm", "nvidia_uvm_why",
                             "fake device: no driver", "hmm",
                             json_pack("{s:b, s:n, s:b, s:s}", "pageableMemoryAccess", 0,
                                       "uvm_disable_hmm", "could_use_hmm", 0, "why", "fake device"))
                 : conditions_host(CONDITIONS_UVM_PARAMS, device);

        if (!c || !json_is_object(ctx)) {
                json_decref(c);
                json_decref(gpu_before);
                json_object_del(result, CONDITIONS_FAKE_THROTTLE);
                return;
        }
        json_t *throttle = json_object_get(result, CONDITIONS_FAKE_THROTTLE);
        if (fake && throttle) { /* the fake GPU was throttled throughout */
                json_decref(gpu_before);
                gpu_before = fake_gpu(throttle);
        }
        json_object_set_new(c, "gpu_before", gpu_before ? gpu_before : json_null());
        json_object_set_new(c, "gpu_after",
                            fake && throttle ? fake_gpu(throttle)
                                             : conditions_before(device, fake));
        json_object_set_new(ctx, "conditions", c);
        json_object_del(result, CONDITIONS_FAKE_THROTTLE);
}

json_t *conditions_gpu_errors(const char *uuid, json_t **inforom_kept)
{
        const struct nvml_api *nvml = NULL;
        const char *why = NULL;
        char unknown[CONDITIONS_UNKNOWN_MAX];
        nvml_device d;
        nvml_return r;

        if (nvml_open(&nvml, &why) < 0)
                return nvml_errors_unknown(why);
        if (!uuid)
                return nvml_errors_unknown("the GPU's UUID is unknown");
        r = nvml->by_uuid(uuid, &d);
        if (r != NVML_SUCCESS) {
                snprintf(unknown, sizeof(unknown), "NVML does not know %s: %s", uuid,
                         nvml_strerror(r));
                return nvml_errors_unknown(unknown);
        }
        return nvml_errors_read(nvml, d, inforom_kept);
}
