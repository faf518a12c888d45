/* The fake devices' rates: one per thing measured (a model, never a measurement: the H200
 * facts in docs/design.md), the normalised parameters every plan reads, and the measurements a
 * plan adds (fake_model.h). Never runs or sleeps: fake.c does. */
#include "fake.h"
#include "fake_model.h"

#include "catalog.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One rate per thing measured, keyed by model name (a sweep mode where one exists). The
 * measurement a result shows carries the real benchmark's name (kernels/bench.cu's list). */
static const struct fake_mode modes[] = {
    {"pinned_h2d", 55.5, 8, 1, "one direction"},
    {"pinned_d2h", 55.3, 8, 1, "one direction"},
    {"bidir", 101.5, 10, 2, "both directions"},
    {"pageable_h2d", 9.3, 15, 1, "one direction"},
    {"pageable_d2h", 17.5, 15, 1, "one direction"},
    {"pageable_bidir", 24.0, 20, 2, "both directions"},
    /* copy_overlap's light XOR kernel takes ~2% of the copy: serial is copy + kernel, the
     * overlapped copies on one stream hide all but the last chunk's kernel (issue 21). */
    {"overlapped", 55.0, 20, 1, "one direction"},
    {"serial", 54.0, 20, 1, "one direction"},
    {"kernel_xor", 3000.0, 5, 2, "read+write"},
    /* pipeline: every strategy's step time comes from pipe_model(), these name the rate of the
     * part the model has no better number for */
    {"pipeline", 1.0, 0, 1, "one direction"},
    {"train_step", 1.0, 0, 1, "placed bytes"}, /* fake_train.c's model gives each time */
    {"zero_copy_read", 52.0, 6, 1, "one direction"},
    {"zero_copy", 84.6, 6, 2, "read+write"},
    {"managed_on_demand", 8.5, 30, 1, "one direction"},
    {"cpu_on_demand", 6.2, 30, 1, "one direction"},
    {"managed_prefetch", 48.0, 15, 1, "one direction"},
    {"prefetch", 51.0, 12, 1, "one direction"},
    {"prefetch_to_host", 49.5, 12, 1, "one direction"},
    {"read_mostly.read", 45.0, 30, 1, "one direction"},
    {"read_mostly.write", 0.33, 30, 1, "one direction"},
    {"preferred_location_host.read", 40.0, 15, 1, "one direction"},
    {"preferred_location_host.write", 38.0, 15, 1, "one direction"},
    {"preferred_location_device.read", 46.0, 30, 1, "one direction"},
    {"preferred_location_device.write", 46.0, 30, 1, "one direction"},
    {"accessed_by.read", 40.0, 15, 1, "one direction"},
    {"accessed_by.write", 38.0, 15, 1, "one direction"},
    {"system_memory", 30.0, 30, 2, "read+write"},
    /* latency: tiny sizes, so the overhead is what is measured */
    {"latency.pinned", 55.5, 2.2, 1, "one direction"},
    {"latency.pageable", 9.3, 5.5, 1, "one direction"},
    {"managed_fault_single", 1e-4, 25, 1, "one word touched per page"},
    {"managed_fault_bulk", 1e-3, 4, 1, "one word touched per page"},
    {"managed_resident", 1e-2, 2, 1, "one word touched per page"},
    /* Between GPUs and within one (H200 pairs joined by NV18: 18 links x 25 GB/s a direction). */
    {"d2d_ce", 3900.0, 2, 2, "read+write"},
    {"d2d_sm", 4100.0, 2, 2, "read+write"},
    {"peer_ce_uni", 389.0, 2, 1, "one direction"},
    {"peer_ce_bidir", 770.0, 2, 2, "both directions"},
    {"peer_sm_uni", 395.0, 2, 1, "one direction"},
    {"peer_sm_bidir", 720.0, 2, 2, "both directions"},
    {"managed_peer_on_demand", 30.0, 40, 1, "one direction"},
    {"managed_peer_prefetch", 280.0, 20, 1, "one direction"},
    {"managed_peer_copy", 389.0, 2, 1, "one direction"},
    {"host_all_h2d", 110.0, 10, 1, "one direction"},
    {"host_all_d2h", 109.0, 10, 1, "one direction"},
};

const struct fake_mode *fake_model_mode_find(const char *key)
{
        for (size_t i = 0; i < ELEMENTSOF(modes); i++)
                if (strcmp(modes[i].key, key) == 0)
                        return &modes[i];
        return NULL;
}

double fake_model_gbps(const char *key)
{
        const struct fake_mode *m = key ? fake_model_mode_find(key) : NULL;

        return m ? m->gbps : 0;
}

uint64_t fake_model_param_u64(const json_t *params, const char *key)
{
        json_t *v = json_object_get(params, key);

        if (json_is_integer(v) && json_integer_value(v) >= 0)
                return (uint64_t)json_integer_value(v);
        return json_is_true(v);
}

/* NULL for a parameter the benchmark does not take. */
const char *fake_model_param_str(const json_t *params, const char *key)
{
        return json_string_value(json_object_get(params, key));
}

bool fake_model_list_has(const json_t *params, const char *key, const char *value)
{
        size_t i;
        json_t *v;

        json_array_foreach(json_object_get(params, key), i, v)
        {
                if (streq_ptr(json_string_value(v), value))
                        return true;
        }
        return false;
}

/* Adds measurement `name` modelled by `key`. -ENOTSUP when the model has no such key: a
 * measurement without a model is refused, never guessed. */
int fake_model_add(struct fake_job *j, const char *name, const char *key, uint64_t size)
{
        const struct fake_mode *mode = fake_model_mode_find(key);

        if (!mode) {
                snprintf(j->why, sizeof(j->why), "not modelled: fake devices have no model of %s",
                         key);
                return -ENOTSUP;
        }
        if (j->n == j->cap) {
                size_t ncap = j->cap ? j->cap * 2 : 8;
                struct fake_meas *nm = realloc(j->m, ncap * sizeof(*nm));

                if (!nm)
                        return -ENOMEM;
                j->m = nm;
                j->cap = ncap;
        }
        j->m[j->n] =
            (struct fake_meas){.mode = mode, .size = size, .src = -1, .dst = -1, .scale = 1};
        snprintf(j->m[j->n].name, sizeof(j->m[j->n].name), "%s", name);
        j->n++;
        return 0;
}

/* Measurements named like their model keys, at the job's size. */
int fake_model_add_same(struct fake_job *j, const char *const *keys, size_t n)
{
        int r = 0;

        for (size_t i = 0; r == 0 && i < n; i++)
                r = fake_model_add(j, keys[i], keys[i], j->size);
        return r;
}

/* One model key per name, at the job's size. */
int fake_model_add_named(struct fake_job *j, const char *const (*pairs)[2], size_t n)
{
        int r = 0;

        for (size_t i = 0; r == 0 && i < n; i++)
                r = fake_model_add(j, pairs[i][0], pairs[i][1], j->size);
        return r;
}

bool fake_model_pageable(const struct fake_job *j)
{
        return streq_ptr(fake_model_param_str(j->params, "host_memory"), "pageable");
}
