/* The fake model's copies: between host and device (copy, copy_overlap, zero_copy,
 * system_memory, latency), within a device (d2d), and the sweep over sizes. Each plan names the
 * rate table's entries (fake_model.c) its measurements are modelled by. */
#include "fake_model.h"

#include "catalog.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>

int fake_copy_plan_copy(struct fake_job *j)
{
        const char *dir = fake_model_param_str(j->params, "direction");
        bool pageable = fake_model_pageable(j);

        if (streq_ptr(dir, MEAS_BIDIR))
                return fake_model_add(j, MEAS_BIDIR, pageable ? "pageable_bidir" : "bidir",
                                      j->size);
        if (streq_ptr(dir, MEAS_D2H))
                return fake_model_add(j, MEAS_D2H, pageable ? MEAS_PAGEABLE_D2H : MEAS_PINNED_D2H,
                                      j->size);
        return fake_model_add(j, MEAS_H2D, pageable ? MEAS_PAGEABLE_H2D : MEAS_PINNED_H2D, j->size);
}

int fake_copy_plan_overlap(struct fake_job *j)
{
        static const char *const pairs[][2] = {{MEAS_OVERLAPPED, MEAS_OVERLAPPED},
                                               {MEAS_SERIAL, MEAS_SERIAL},
                                               {MEAS_COPY_ALONE, MEAS_PINNED_H2D},
                                               {MEAS_KERNEL_ALONE, "kernel_xor"}};
        return fake_model_add_named(j, pairs, ELEMENTSOF(pairs));
}

int fake_copy_plan_zero_copy(struct fake_job *j)
{
        static const char *const pairs[][2] = {{MEAS_READ, "zero_copy_read"},
                                               {MEAS_READ_WRITE, "zero_copy"}};
        return fake_model_add_named(j, pairs, ELEMENTSOF(pairs));
}

int fake_copy_plan_system_memory(struct fake_job *j)
{
        if (!json_is_true(json_object_get(j->device, "pageableMemoryAccess"))) {
                snprintf(j->why, sizeof(j->why),
                         "unsupported on this device: no pageableMemoryAccess");
                return -ENOTSUP;
        }
        return fake_model_add(j, MEAS_READ_WRITE, "system_memory", j->size);
}

int fake_copy_plan_latency(struct fake_job *j)
{
        static const char *const copies[][2] = {{MEAS_PINNED_H2D, "latency.pinned"},
                                                {MEAS_PINNED_D2H, "latency.pinned"},
                                                {MEAS_PAGEABLE_H2D, "latency.pageable"},
                                                {MEAS_PAGEABLE_D2H, "latency.pageable"}};
        static const char *const faults[] = {MEAS_FAULT_SINGLE, MEAS_FAULT_BULK, MEAS_RESIDENT};
        int r = fake_model_add_named(j, copies, ELEMENTSOF(copies));

        for (size_t i = 0; r == 0 && i < ELEMENTSOF(faults); i++)
                r = fake_model_add(j, faults[i], faults[i], 4);
        for (size_t i = 0; i < j->n; i++)
                j->m[i].latency = true;
        return r;
}

int fake_copy_plan_d2d(struct fake_job *j)
{
        static const char *const pairs[][2] = {{MEAS_COPY_ENGINE, "d2d_ce"},
                                               {MEAS_SM_COPY, "d2d_sm"}};
        return fake_model_add_named(j, pairs, ELEMENTSOF(pairs));
}

/* One measurement per mode and size, named "mode@size" like the real sweep's, in mode order. */
int fake_copy_plan_sweep(struct fake_job *j)
{
        size_t k, i;
        json_t *m, *sz;
        int r = 0;

        json_array_foreach(json_object_get(j->params, "modes"), k, m)
        {
                json_array_foreach(json_object_get(j->params, "sizes"), i, sz)
                {
                        char name[FAKE_MEAS_NAME_MAX];
                        uint64_t size = (uint64_t)json_integer_value(sz);

                        snprintf(name, sizeof(name), "%s@%llu", json_string_value(m),
                                 (unsigned long long)size);
                        if (r == 0)
                                r = fake_model_add(j, name, json_string_value(m), size);
                }
        }
        return r;
}
