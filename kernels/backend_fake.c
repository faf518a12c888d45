/* The fake backend (backend.h): fake devices answered by fake.c's bandwidth model, for tests
 * where no GPU exists. Owns what is fake-only in the worker: the device index among --fake N,
 * and the fake_gpu_state file that may slow a fake GPU down. A benchmark the model does not
 * cover is answered "not modelled" (fake.c), never with a guess. */
#include "backend.h"
#include "conditions.h"
#include "fake.h"

#include "fileio.h"
#include "jsonutil.h"
#include "nvml_errors.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A device's key in the fake_gpu_state file: "node", or a device index as a decimal number (20
 * digits at most, with its sign and the NUL). */
#define FAKE_STATE_KEY_MAX 24

struct backend {
        json_t *device;  /* the --list entry (the node's for "all") */
        json_t *devices; /* the node worker: every fake device */
        const char *fake_state;
};

static json_t *fake_list(const struct backend_args *a, char **ret_why)
{
        return fake_list_devices(a->fake_n);
}

static int fake_open(const struct backend_args *a, struct backend **ret, json_t **ret_device,
                     char **ret_error)
{
        struct backend *b = calloc(1, sizeof(*b));
        uint64_t index;

        if (!b)
                return backend_fail(ret_error, -ENOMEM, "out of memory");
        b->fake_state = a->fake_state;
        if (strcmp(a->device_id, "all") == 0) {
                b->devices = fake_list_devices(a->fake_n);
                b->device = b->devices ? backend_node_info(b->devices, true) : NULL;
        } else if (a->fake_n == 0 || parse_uint64(a->device_id, 0, a->fake_n - 1, &index) < 0) {
                free(b);
                return backend_fail(ret_error, -EINVAL, "'%s' is not a fake index < %u",
                                    a->device_id, a->fake_n);
        } else {
                b->device = fake_device_info((unsigned)index);
        }
        if (!b->device) {
                json_decref(b->devices);
                free(b);
                return backend_fail(ret_error, -ENOMEM, "out of memory");
        }
        *ret_device = json_incref(b->device);
        *ret = b;
        return 0;
}

/* This device's entry of the fake_gpu_state file (the node worker's is "node"), a new
 * reference, or NULL when there is no file, no entry or no memory. */
static json_t *state_entry(const struct backend *b)
{
        _cleanup_free_ char *buf = NULL;
        _cleanup_json_ json_t *all = NULL;
        json_error_t err;
        char key[FAKE_STATE_KEY_MAX];
        size_t len = 0;

        if (!b->fake_state || read_file_at(AT_FDCWD, b->fake_state, 65536, &buf, &len) < 0)
                return NULL;
        all = json_parse_strict(buf, len, 8, &err);
        if (b->devices)
                snprintf(key, sizeof(key), "node");
        else
                snprintf(key, sizeof(key), "%lld",
                         (long long)json_integer_value(json_object_get(b->device, "index")));
        return json_incref(json_object_get(all, key));
}

/* Tests: the fake_gpu_state file may slow this fake GPU down ("bandwidth_pct"), standing for a
 * GPU that turned slow, so that the canonical health check (which takes no params) can fail;
 * and may make its runs last ("delay_ms", as fake_delay_ms would), so that a test can act while
 * a canonical check's part runs (a pause in the middle of the node's part). */
static json_t *with_state(const struct backend *b, const json_t *params)
{
        _cleanup_json_ json_t *entry = state_entry(b);
        json_t *pct = json_object_get(entry, "bandwidth_pct");
        json_t *delay = json_object_get(entry, "delay_ms");
        json_t *copy;

        if ((!json_is_integer(pct) && !json_is_integer(delay)) || !(copy = json_deep_copy(params)))
                return json_incref((json_t *)params);
        if (json_is_integer(pct))
                json_object_set(copy, "fake_bandwidth_pct", pct);
        if (json_is_integer(delay))
                json_object_set(copy, "fake_delay_ms", delay);
        return copy;
}

/* What NVML would read of a healthy fake GPU: zero counters, ECC on, nothing pending. */
#define FAKE_HEALTHY_ERRORS                                                                        \
        "{\"source\": \"fake\", \"elapsed_us\": 0,"                                                \
        " \"remapped_rows\": {\"corrected\": 0, \"uncorrected\": 0, \"pending\": false,"           \
        " \"failure\": false},"                                                                    \
        " \"ecc\": {\"volatile\": {\"dram\": {\"corrected\": 0, \"uncorrected\": 0},"              \
        " \"sram\": {\"corrected\": 0, \"uncorrected\": 0}},"                                      \
        " \"aggregate\": {\"dram\": {\"corrected\": 0, \"uncorrected\": 0},"                       \
        " \"sram\": {\"corrected\": 0, \"uncorrected\": 0}}},"                                     \
        " \"ecc_mode\": {\"current\": \"on\", \"pending\": \"on\"},"                               \
        " \"retired_pages\": {\"single_bit\": 0, \"double_bit\": 0, \"pending\": false},"          \
        " \"recovery_action\": {\"value\": 0, \"name\": \"none\"},"                                \
        " \"inforom\": {\"valid\": true}}"

/* over's keys into base, objects merged key by key; an object with "unknown" (a reading NVML
 * could not give) replaces what it lands on whole. */
static void merge_into(json_t *base, const json_t *over)
{
        const char *k;
        json_t *v;

        json_object_foreach((json_t *)over, k, v)
        {
                json_t *at = json_object_get(base, k);
                if (json_is_object(v) && json_is_object(at) && !json_object_get(v, "unknown"))
                        merge_into(at, v);
                else
                        json_object_set(base, k, v);
        }
}

/* Tests: the fake GPU's error state, as NVML would read it, for the canonical health check:
 * a healthy GPU's, with the fake_gpu_state entry's "gpu_errors" over it (docs/design.md). */
static json_t *fake_errors(const struct backend *b)
{
        _cleanup_json_ json_t *entry = state_entry(b);
        const json_t *over = json_object_get(entry, "gpu_errors");
        json_t *e = json_loads(FAKE_HEALTHY_ERRORS, 0, NULL), *ra;

        if (!e)
                return NULL;
        if (json_is_object(over))
                merge_into(e, over);
        ra = json_object_get(e, "recovery_action");
        if (json_is_integer(json_object_get(ra, "value"))) {
                const char *name =
                    nvml_recovery_action_name(json_integer_value(json_object_get(ra, "value")));
                json_object_set_new(ra, "name", name ? json_string(name) : json_null());
        }
        return e;
}

static int fake_backend_run(struct backend *b, const char *id, const json_t *params,
                            volatile sig_atomic_t *cancel, json_t **ret_result, char **ret_error)
{
        _cleanup_json_ json_t *p = with_state(b, params);
        int r;

        if (!p)
                return backend_fail(ret_error, -ENOMEM, "out of memory");
        if (b->devices)
                return fake_run_multi(b->devices, id, p, cancel, ret_result, ret_error);
        r = fake_run(b->device, id, p, cancel, ret_result, ret_error);
        if (r >= 0 && streq_ptr(id, "health"))
                json_object_set_new(*ret_result, "gpu_errors", fake_errors(b));
        /* Tests: the file's "throttle_reasons" (NVML's words) stand for the clock event reasons
         * the GPU had around the copies; conditions_stamp takes them from the result. */
        _cleanup_json_ json_t *entry = r >= 0 ? state_entry(b) : NULL;
        json_t *reasons = json_object_get(entry, "throttle_reasons");
        if (json_is_array(reasons) && *ret_result)
                json_object_set(*ret_result, CONDITIONS_FAKE_THROTTLE, reasons);
        return r;
}

/* What umd's own look reads for a fake GPU (daemon/gpustate.c): the file's "other_processes"
 * for this index, none when the file or the entry is missing. Read again at every part's end,
 * like every look of umd's. */
static json_t *fake_look(struct backend *b, const json_t *device)
{
        if (b->devices)
                return NULL;
        _cleanup_json_ json_t *entry = state_entry(b);
        json_t *n = json_object_get(entry, "other_processes");

        return json_pack("{s:I}", "others", json_is_integer(n) ? json_integer_value(n) : 0);
}

static uint64_t fake_pool_release(struct backend *b)
{
        return 0; /* a fake device holds no buffers */
}

static void fake_close(struct backend *b)
{
        if (!b)
                return;
        json_decref(b->device);
        json_decref(b->devices);
        free(b);
}

const struct backend_ops backend_fake = {
    .name = "fake",
    .fake = true,
    .list = fake_list,
    .open = fake_open,
    .run = fake_backend_run,
    .look = fake_look,
    .pool_release = fake_pool_release,
    .close = fake_close,
    .implements = fake_models,
};
