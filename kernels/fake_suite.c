/* The fake model's suites, as kernels/bench_suite.cu runs them: um_vs_explicit, health's quick
 * and extended tiers on a GPU, and the node's health over its GPU pairs. The extended tier is
 * planned against budget_ms on the model's own times, and says what it skipped. */
#include "fake_model.h"

#include "catalog.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>

int fake_suite_plan_um_vs_explicit(struct fake_job *j)
{
        /* The modes kernels/bench_suite.cu reports; daemon/suites.c summarises them. */
        static const char *const pairs[][2] = {
            {MEAS_UM_PINNED_COPY_KERNEL, MEAS_SERIAL}, /* copy_overlap's serial, as on a GPU */
            {MEAS_UM_PAGEABLE_COPY_KERNEL, "pageable_h2d"},
            {MEAS_UM_OVERLAPPED_COPY_KERNEL, "overlapped"},
            {MEAS_UM_ZERO_COPY_KERNEL, "zero_copy_read"},
            {MEAS_UM_ON_DEMAND, "managed_on_demand"},
            {MEAS_UM_PREFETCH, "managed_prefetch"},
            {MEAS_UM_READ_MOSTLY, "read_mostly.write"},
            {MEAS_UM_PREFERRED_DEVICE, "preferred_location_device.write"},
            {MEAS_UM_PREFERRED_HOST, "preferred_location_host.write"},
            {MEAS_UM_ACCESSED_BY, "accessed_by.write"},
            {MEAS_UM_PINNED_COPY_D2H, "pinned_d2h"},
            {MEAS_UM_PAGEABLE_COPY_D2H, "pageable_d2h"},
            {MEAS_UM_CPU_ON_DEMAND, "cpu_on_demand"},
            {MEAS_UM_PREFETCH_TO_HOST, "prefetch_to_host"},
        };
        int r = fake_model_add_named(j, pairs, ELEMENTSOF(pairs));

        /* copy_overlap's copy and kernel alone, as the real suite copies them over */
        for (size_t i = 0; r == 0 && i < j->n; i++)
                if (streq_ptr(j->m[i].name, MEAS_UM_OVERLAPPED_COPY_KERNEL)) {
                        const struct fake_mode *copy = fake_model_mode_find(MEAS_PINNED_H2D),
                                               *kern = fake_model_mode_find("kernel_xor");
                        double size = (double)j->size;
                        j->m[i].extra = json_pack(
                            "{s:f, s:f}", "copy_alone_ms",
                            size / (copy->gbps * 1e9) * 1e3 + copy->overhead_us / 1e3,
                            "kernel_alone_ms",
                            2 * size / (kern->gbps * 1e9) * 1e3 + kern->overhead_us / 1e3);
                        r = j->m[i].extra ? 0 : -ENOMEM;
                }
        return r;
}

/* --- health's extended tier: the budget is planned on the model's own times --- */

/* The modelled time of measurement i with its warm-up (as measure_all spends it), ms. */
static double est_ms(const struct fake_job *j, size_t i)
{
        const struct fake_meas *m = &j->m[i];
        uint64_t pct = fake_model_param_u64(j->params, "fake_bandwidth_pct");
        double samples = (double)(fake_model_param_u64(j->params, "iterations") +
                                  fake_model_param_u64(j->params, "warmup"));
        double one =
            (double)(m->size * m->mode->bytes_mult) / (m->mode->gbps * m->scale * 1e9) * 1e3 +
            m->mode->overhead_us / 1e3;

        return samples * one * 100.0 / (double)(pct ? pct : 100);
}

static double est_from(const struct fake_job *j, size_t from)
{
        double t = 0;

        for (size_t i = from; i < j->n; i++)
                t += est_ms(j, i);
        return t;
}

/* The part's budget: a GPU's, or the pairs' on the node worker. */
static uint64_t plan_budget(const struct fake_job *j)
{
        return fake_model_param_u64(j->params, j->device ? "budget_ms" : "pairs_budget_ms");
}

/* The plan's record, as kernels/bench_suite.cu writes it: {"tier", "plan": {"budget_ms",
 * "estimated_ms", "ran": [addition], "skipped": [{"check", "estimate_ms", "reason"}]}}. */
static int plan_record(struct fake_job *j, json_t *ran, json_t *skipped, double spent)
{
        uint64_t budget = plan_budget(j);

        json_decref(j->top);
        j->top = json_pack("{s:s, s:{s:I, s:f, s:o, s:o}}", "tier", HEALTH_TIER_EXTENDED, "plan",
                           "budget_ms", (json_int_t)budget, "estimated_ms", spent, "ran", ran,
                           "skipped", skipped);
        return j->top ? 0 : -ENOMEM;
}

/* Keeps the measurements added since `from` when they fit what is left of the budget, else
 * takes them back and says so in skipped. */
static void plan_fit(struct fake_job *j, size_t from, const char *addition, double *spent,
                     json_t *ran, json_t *skipped)
{
        uint64_t budget = plan_budget(j);
        double t = est_from(j, from);
        char why[FAKE_WHY_MAX];

        if (budget == 0 || *spent + t <= (double)budget) {
                *spent += t;
                json_array_append_new(ran, json_string(addition));
                return;
        }
        for (size_t i = from; i < j->n; i++)
                json_decref(j->m[i].extra);
        j->n = from;
        snprintf(why, sizeof(why),
                 "skipped: %s would take about %.0f ms, and %.0f ms of the %llu ms budget are left",
                 addition, t, (double)budget - *spent > 0 ? (double)budget - *spent : 0.0,
                 (unsigned long long)budget);
        json_array_append_new(skipped, json_pack("{s:s, s:f, s:s}", "check", addition,
                                                 "estimate_ms", t, "reason", why));
}

/* A short sweep of one path: every 4x from 64 KiB up to `top`, each measurement named
 * "knee@SIZE" and told its size. */
static int add_knee(struct fake_job *j, const char *name, const char *key, uint64_t top)
{
        int r = 0;

        for (uint64_t sz = 64 * 1024; r == 0 && sz <= top; sz *= 4) {
                char n[FAKE_MEAS_NAME_MAX];

                snprintf(n, sizeof(n), "%s@%llu", name, (unsigned long long)sz);
                r = fake_model_add(j, n, key, sz);
                if (r == 0 && !(j->m[j->n - 1].extra = json_pack("{s:I}", "size", (json_int_t)sz)))
                        r = -ENOMEM;
        }
        return r;
}

/* The plan being made: what is spent of the budget, what ran, what was skipped. */
struct ext_plan {
        double spent;
        json_t *ran, *skipped;
};

/* One addition, kept when it fits (plan_fit): one measurement at size, or with knee a short
 * sweep of one path up to size (add_knee). */
static int ext_add(struct fake_job *j, struct ext_plan *pl, const char *addition, const char *name,
                   const char *key, uint64_t size, bool knee)
{
        size_t from = j->n;
        int r = knee ? add_knee(j, name, key, size) : fake_model_add(j, name, key, size);

        if (r == 0)
                plan_fit(j, from, addition, &pl->spent, pl->ran, pl->skipped);
        return r;
}

/* The extended tier's additions, in kernels/bench_suite.cu's order: each fits what is left of
 * budget_ms (the quick tier's measurements already planned count first) or is skipped. */
static int plan_health_extended(struct fake_job *j)
{
        static const char *const latencies[][2] = {{MEAS_LATENCY_PINNED_D2H, "latency.pinned"},
                                                   {MEAS_LATENCY_PAGEABLE_H2D, "latency.pageable"},
                                                   {MEAS_LATENCY_PAGEABLE_D2H, "latency.pageable"},
                                                   {MEAS_LATENCY_FAULT, "managed_fault_single"}};
        uint64_t full = fake_model_param_u64(j->params, "full_size");
        struct ext_plan pl = {est_from(j, 0), json_array(), json_array()};
        int r = pl.ran && pl.skipped ? 0 : -ENOMEM;

        if (r == 0)
                r = ext_add(j, &pl, "device memory at full size", MEAS_D2D_FULL, "d2d_ce", full,
                            false);
        if (r == 0)
                r = ext_add(j, &pl, "bidirectional copies", MEAS_BIDIR, "bidir", j->size, false);
        if (r == 0)
                r = ext_add(j, &pl, "pageable copies back to the host", MEAS_PAGEABLE_D2H,
                            MEAS_PAGEABLE_D2H, j->size, false);
        if (r == 0) {
                size_t from = j->n;
                for (size_t i = 0; r == 0 && i < ELEMENTSOF(latencies); i++) {
                        r = fake_model_add(j, latencies[i][0], latencies[i][1], 4);
                        if (r == 0)
                                j->m[j->n - 1].latency = true;
                }
                if (r == 0)
                        plan_fit(j, from, "latency", &pl.spent, pl.ran, pl.skipped);
        }
        if (r == 0)
                r = ext_add(j, &pl, "managed memory on demand", MEAS_MANAGED_ON_DEMAND,
                            "managed_on_demand", j->size, false);
        if (r == 0)
                r = ext_add(j, &pl, "sweep of pinned_h2d", MEAS_KNEE_PINNED_H2D, MEAS_PINNED_H2D,
                            j->size, true);
        if (r == 0)
                r = ext_add(j, &pl, "sweep of pinned_d2h", MEAS_KNEE_PINNED_D2H, MEAS_PINNED_D2H,
                            j->size, true);
        if (r == 0)
                r = ext_add(j, &pl, "sweep of d2d", MEAS_KNEE_D2D, "d2d_ce", full, true);
        if (r < 0) {
                json_decref(pl.ran);
                json_decref(pl.skipped);
                return r;
        }
        return plan_record(j, pl.ran, pl.skipped, pl.spent);
}

int fake_suite_plan_health(struct fake_job *j)
{
        /* The measurements kernels/bench_suite.cu's health reports. */
        static const char *const keys[] = {MEAS_PINNED_H2D, MEAS_PINNED_D2H, MEAS_PAGEABLE_H2D,
                                           MEAS_MANAGED_PREFETCH};
        int r = fake_model_add_same(j, keys, ELEMENTSOF(keys));

        if (r == 0)
                r = fake_model_add(j, MEAS_LATENCY_PINNED_H2D, "latency.pinned", 4);
        if (r == 0)
                j->m[j->n - 1].latency = true;
        /* Device memory: the copy engine's device-to-device copy at the check's own size. */
        if (r == 0)
                r = fake_model_add(j, MEAS_D2D, "d2d_ce",
                                   fake_model_param_u64(j->params, "d2d_size"));
        if (r == 0 && streq_ptr(fake_model_param_str(j->params, "tier"), HEALTH_TIER_EXTENDED))
                r = plan_health_extended(j);
        return r;
}

/* The canonical check's GPU pairs: copy engine, one direction, every pair; the extended tier's
 * at full_size when that fits budget_ms, else at size, saying so. */
int fake_suite_plan_node_health(struct fake_job *j)
{
        json_t *p = json_pack("{s:[s], s:[s]}", "methods", "ce", "directions", "uni");
        bool extended = streq_ptr(fake_model_param_str(j->params, "tier"), HEALTH_TIER_EXTENDED);
        json_t *ran = json_array(), *skipped = json_array();
        uint64_t quick_size = j->size;
        double spent = 0;
        int r = p && ran && skipped ? 0 : -ENOMEM;

        if (r == 0 && extended)
                j->size = fake_model_param_u64(j->params, "full_size");
        if (r == 0)
                r = fake_multi_plan_pairs(j, p);
        if (r == 0 && extended) {
                plan_fit(j, 0, "every GPU pair at full size", &spent, ran, skipped);
                if (j->n == 0) { /* did not fit: the quick tier's pairs */
                        j->size = quick_size;
                        r = fake_multi_plan_pairs(j, p);
                        spent = est_from(j, 0);
                }
                if (r == 0) {
                        r = plan_record(j, ran, skipped, spent);
                        ran = skipped = NULL;
                }
        }
        json_decref(ran);
        json_decref(skipped);
        json_decref(p);
        return r;
}
