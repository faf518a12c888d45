/* The suites (issue 5): um_vs_explicit, sweep and health, built from the benchmarks themselves
 * (each sub-run is a full bench_run: same timing, same verification) so a suite can never
 * measure differently from the benchmark it quotes. Owns the composition only: which runs, and
 * each mode's measurement under its catalog name (MEAS_*), with the effective GB/s of the bytes
 * the suite moved. Everything derived from those (ratios, the best mode, the sentence, curves,
 * verdicts) is the daemon's (daemon/suites.c, daemon/health.c), for real and fake alike. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_internal.h"
extern "C" {
#include "conditions.h"
}

extern "C" {
#include "jsonutil.h"
#include "pcie.h"
}

/* A measurement's name under the suite: a MEAS_* name (24 bytes at most) with "@" and a size or
 * a sweep point, or a source's "bench.measurement"; snprintf cuts a longer one. */
#define SUITE_NAME_MAX 96
/* A sub-run's overrides as JSON text written here: a size, or the canonical check's fixed
 * params (the longest, host_dep's, under 100 bytes). */
#define SUITE_OVERRIDES_MAX 160
/* Overrides that are one or two short members ("{\"size\": N}"). */
#define SUITE_SHORT_OVERRIDES_MAX 96
/* A sweep point's overrides: a mode's own and its size, or pipeline's three strategies named. */
#define SUITE_SWEEP_OVERRIDES_MAX 256
/* A run's key among the runs a suite shares: a catalog id, a space and its overrides. */
#define SUITE_RUN_KEY_MAX SUITE_OVERRIDES_MAX
/* A skipped addition's reason: its name and three numbers in one sentence. */
#define SUITE_WHY_MAX 160
/* A pipeline_sweep point, "i=N" (an intensity) or "t=N" (touched bytes): at most 22 bytes. */
#define SUITE_POINT_MAX         32
#define SUITE_TOUCHED_POINT_MAX 48

/* One sub-benchmark with the suite's params, overridden by `overrides` (JSON text). */
static int sub_run(struct bench_job *j, const char *bench, const char *overrides, json_t **ret)
{
        json_t *p = json_deep_copy(j->params);
        json_t *o = json_loads(overrides, 0, NULL);
        char *err = NULL;
        int r;

        if (!p || !o) {
                json_decref(p);
                json_decref(o);
                return job_fail(j, -ENOMEM, "out of memory");
        }
        json_object_update(p, o);
        r = bench_run(j->ctx, bench, p, j->cancel, ret, &err);
        if (r < 0)
                job_fail(j, r, "%s %s: %s", bench, overrides, err ? err : "failed");
        else {
                json_t *ctx = json_object_get(*ret, "context");
                j->used_pool = true;
                if (!json_is_true(json_object_get(ctx, "buffer_reused")))
                        j->all_reused = false;
        }
        free(err);
        json_decref(p);
        json_decref(o);
        return r;
}

static double median_ms(json_t *m)
{
        return json_real_value(json_object_get(json_object_get(m, "stats"), "median_ms"));
}

struct mode {
        const char *name;
        const char *bench;
        const char *overrides;
        const char *measurement;
        const char *direction; /* "to_gpu" (moved and processed once) or "to_host" */
};

/* The result of md's benchmark with its overrides, run once per suite: modes that quote the same
 * run share it through runs ("bench overrides" -> result, owned by runs). */
static int run_cached(struct bench_job *j, json_t *runs, const struct mode *md, json_t **ret)
{
        char key[SUITE_RUN_KEY_MAX];
        snprintf(key, sizeof(key), "%s %s", md->bench, md->overrides);
        json_t *res = json_object_get(runs, key);
        if (!res) {
                double t0 = now_ms();
                int r = sub_run(j, md->bench, md->overrides, &res);
                if (r < 0)
                        return r;
                json_object_set_new(runs, key, res);
                /* Where a suite's time goes, run by run: what a time goal is checked against. */
                json_t *ph = json_object_get(j->extra_top, "phases");
                if (!ph) {
                        ph = json_array();
                        json_object_set_new(j->extra_top, "phases", ph);
                }
                json_array_append_new(ph, json_pack("{s:s, s:s, s:f}", "benchmark", md->bench,
                                                    "overrides", md->overrides, "elapsed_ms",
                                                    now_ms() - t0));
        }
        *ret = res;
        return 0;
}

/* ---------------------------------------------------------------- um_vs_explicit */

static const struct mode um_modes[] = {
    {MEAS_UM_PINNED_COPY_KERNEL, "copy_overlap", "{}", MEAS_SERIAL, "to_gpu"},
    {MEAS_UM_OVERLAPPED_COPY_KERNEL, "copy_overlap", "{}", MEAS_OVERLAPPED, "to_gpu"},
    {MEAS_UM_PAGEABLE_COPY_KERNEL, "copy_overlap", "{\"host_memory\": \"pageable\"}", MEAS_SERIAL,
     "to_gpu"},
    {MEAS_UM_ZERO_COPY_KERNEL, "zero_copy", "{}", MEAS_READ_WRITE, "to_gpu"},
    {MEAS_UM_ON_DEMAND, "managed_on_demand", "{}", MEAS_GPU_ON_DEMAND, "to_gpu"},
    {MEAS_UM_PREFETCH, "managed_prefetch", "{}", MEAS_PREFETCH_KERNEL, "to_gpu"},
    {MEAS_UM_READ_MOSTLY, "managed_advise", "{\"advice\": \"read_mostly\"}", MEAS_WRITE, "to_gpu"},
    {MEAS_UM_PREFERRED_HOST, "managed_advise", "{\"advice\": \"preferred_location_host\"}",
     MEAS_WRITE, "to_gpu"},
    {MEAS_UM_PREFERRED_DEVICE, "managed_advise", "{\"advice\": \"preferred_location_device\"}",
     MEAS_WRITE, "to_gpu"},
    {MEAS_UM_ACCESSED_BY, "managed_advise", "{\"advice\": \"accessed_by\"}", MEAS_WRITE, "to_gpu"},
    {MEAS_UM_PINNED_COPY_D2H, "copy", "{\"direction\": \"d2h\"}", MEAS_D2H, "to_host"},
    {MEAS_UM_PAGEABLE_COPY_D2H, "copy", "{\"direction\": \"d2h\", \"host_memory\": \"pageable\"}",
     MEAS_D2H, "to_host"},
    {MEAS_UM_PREFETCH_TO_HOST, "managed_prefetch", "{}", MEAS_PREFETCH_TO_HOST, "to_host"},
    {MEAS_UM_CPU_ON_DEMAND, "managed_on_demand", "{}", MEAS_CPU_ON_DEMAND, "to_host"},
};

int bench_um_vs_explicit(struct bench_job *j)
{
        const size_t n = sizeof(um_modes) / sizeof(um_modes[0]);
        json_t *runs = json_object();
        int r = 0;

        for (size_t i = 0; i < n && r >= 0; i++) {
                const struct mode *md = &um_modes[i];
                json_t *res;
                r = run_cached(j, runs, md, &res);
                if (r < 0)
                        break;
                json_t *src = result_measurement(res, md->measurement);
                if (!src) {
                        r = job_fail(j, -EIO, "%s: no %s measurement", md->bench, md->measurement);
                        break;
                }
                json_t *m = json_deep_copy(src);
                double ms = median_ms(src);
                double eff = stats_gbps((double)j->size, ms);
                char source[SUITE_NAME_MAX];
                snprintf(source, sizeof(source), "%s.%s", md->bench, md->measurement);
                json_object_set_new(m, "name", json_string(md->name));
                json_object_set_new(m, "source", json_string(source));
                json_object_set_new(m, "direction", json_string(md->direction));
                json_object_set_new(m, "bytes", json_integer((json_int_t)j->size));
                json_object_set_new(m, "bytes_counted", json_string("one direction"));
                json_object_set_new(m, "gbps", json_real(eff));
                json_object_set_new(m, "time_ms", json_real(ms));
                if (strcmp(md->name, MEAS_UM_OVERLAPPED_COPY_KERNEL) == 0) {
                        /* What overlap had to hide (issue 21): the daemon says when the kernel
                         * is too short for it to matter, with both times. */
                        json_object_set_new(
                            m, "copy_alone_ms",
                            json_real(median_ms(result_measurement(res, MEAS_COPY_ALONE))));
                        json_object_set_new(
                            m, "kernel_alone_ms",
                            json_real(median_ms(result_measurement(res, MEAS_KERNEL_ALONE))));
                }
                json_array_append_new(j->measurements, m);
        }
        json_decref(runs);
        /* The ratios, the best mode and the sentence are the daemon's (daemon/suites.c). */
        return r < 0 ? r : 0;
}

/* ---------------------------------------------------------------- sweep */

/* One per catalog sweep mode (its "modes" values). */
static const struct mode sweep_modes[] = {
    {MEAS_PINNED_H2D, "copy", "{\"direction\": \"h2d\"}", MEAS_H2D, NULL},
    {MEAS_PINNED_D2H, "copy", "{\"direction\": \"d2h\"}", MEAS_D2H, NULL},
    {MEAS_PAGEABLE_H2D, "copy", "{\"direction\": \"h2d\", \"host_memory\": \"pageable\"}", MEAS_H2D,
     NULL},
    {MEAS_PAGEABLE_D2H, "copy", "{\"direction\": \"d2h\", \"host_memory\": \"pageable\"}", MEAS_D2H,
     NULL},
    {MEAS_BIDIR, "copy", "{\"direction\": \"bidir\"}", MEAS_BIDIR, NULL},
    {MEAS_ZERO_COPY, "zero_copy", "{}", MEAS_READ_WRITE, NULL},
    {MEAS_MANAGED_ON_DEMAND, "managed_on_demand", "{}", MEAS_GPU_ON_DEMAND, NULL},
    {MEAS_MANAGED_PREFETCH, "managed_prefetch", "{}", MEAS_PREFETCH_KERNEL, NULL},
};

int bench_sweep(struct bench_job *j)
{
        json_t *modes = json_object_get(j->params, "modes");
        json_t *sizes = json_object_get(j->params, "sizes");
        size_t mi, si;
        json_t *mv, *sv;
        int r = 0;

        if (!json_is_array(modes) || !json_is_array(sizes))
                return job_fail(j, -EINVAL, "sweep needs modes and sizes");
        json_array_foreach(modes, mi, mv)
        {
                const struct mode *md = NULL;
                for (size_t k = 0; k < sizeof(sweep_modes) / sizeof(sweep_modes[0]); k++)
                        if (strcmp(sweep_modes[k].name, json_string_value(mv)) == 0)
                                md = &sweep_modes[k];
                if (!md)
                        return job_fail(j, -EINVAL, "unknown sweep mode %s", json_string_value(mv));
                json_array_foreach(sizes, si, sv)
                {
                        char ov[SUITE_SWEEP_OVERRIDES_MAX];
                        json_t *res = NULL;
                        json_t *o = json_loads(md->overrides, 0, NULL);
                        json_object_set(o, "size", sv);
                        char *ovs = json_dumps(o, JSON_COMPACT);
                        snprintf(ov, sizeof(ov), "%s", ovs ? ovs : "{}");
                        free(ovs);
                        json_decref(o);
                        r = sub_run(j, md->bench, ov, &res);
                        if (r < 0)
                                return r;
                        char name[SUITE_NAME_MAX];
                        snprintf(name, sizeof(name), "%s@%lld", md->name,
                                 (long long)json_integer_value(sv));
                        json_t *m = json_deep_copy(result_measurement(res, md->measurement));
                        json_decref(res);
                        if (!m)
                                return job_fail(j, -EIO, "%s: no %s measurement", md->bench,
                                                md->measurement);
                        json_object_set_new(m, "name", json_string(name));
                        json_object_set_new(m, "mode", json_string(md->name));
                        json_object_set(m, "size", sv);
                        json_array_append_new(j->measurements, m);
                }
        }
        /* The curves, peaks and 90%-of-peak sizes are the daemon's (daemon/suites.c). */
        return 0;
}

/* ---------------------------------------------------------------- health */

/* ---- the extended tier (issue 24): its additions inside budget_ms ---- */

/* GB/s of the measurement the part has taken so far under name, or 0. */
static double taken_gbps(const struct bench_job *j, const char *name)
{
        size_t i;
        json_t *m;
        json_array_foreach(j->measurements, i, m)
        {
                const char *n = json_string_value(json_object_get(m, "name"));
                if (n && strcmp(n, name) == 0)
                        return json_number_value(json_object_get(m, "gbps"));
        }
        return 0;
}

/* The time of `samples` copies of `bytes` at gbps (a slow guess where the rate is unknown), plus
 * a launch's worth each, ms. */
static double est_copy_ms(double samples, double bytes, double gbps)
{
        return samples * (bytes / ((gbps > 0 ? gbps : 1.0) * 1e6) + 0.02);
}

struct ext_plan {
        double t0, budget_ms; /* budget 0: none */
        json_t *ran, *skipped;
};

/* True when an addition estimated at est ms fits what is left of the budget; else says in
 * skipped that it was left out, and why. */
static bool ext_fits(struct ext_plan *pl, const char *addition, double est)
{
        double left = pl->budget_ms - (now_ms() - pl->t0);
        char why[SUITE_WHY_MAX];

        if (pl->budget_ms <= 0 || est <= left) {
                json_array_append_new(pl->ran, json_string(addition));
                return true;
        }
        snprintf(why, sizeof(why),
                 "skipped: %s would take about %.0f ms, and %.0f ms of the %.0f ms budget are left",
                 addition, est, left > 0 ? left : 0.0, pl->budget_ms);
        json_array_append_new(pl->skipped, json_pack("{s:s, s:f, s:s}", "check", addition,
                                                     "estimate_ms", est, "reason", why));
        return false;
}

/* One measurement of a (cached) sub-run, renamed; size > 0 also records it (a knee's point). */
static int ext_take(struct bench_job *j, json_t *runs, const struct mode *md, uint64_t size)
{
        json_t *res;
        int r = run_cached(j, runs, md, &res);
        if (r < 0)
                return r;
        json_t *m = json_deep_copy(result_measurement(res, md->measurement));
        if (!m)
                return job_fail(j, -EIO, "health: no %s in %s", md->measurement, md->bench);
        json_object_set_new(m, "name", json_string(md->name));
        if (size > 0)
                json_object_set_new(m, "size", json_integer((json_int_t)size));
        json_array_append_new(j->measurements, m);
        return 0;
}

/* A short sweep of one path: every 4x from 64 KiB up to top, each point "name@SIZE". */
static int ext_knee(struct bench_job *j, json_t *runs, struct ext_plan *pl, const char *addition,
                    const char *name, const char *bench, const char *extra, const char *meas,
                    uint64_t top, double gbps, double mult)
{
        double samples = j->iterations + j->warmup, est = 0;
        int r = 0;

        for (uint64_t sz = 64 * 1024; sz <= top; sz *= 4)
                est += est_copy_ms(samples, (double)sz * mult, gbps);
        if (!ext_fits(pl, addition, est))
                return 0;
        for (uint64_t sz = 64 * 1024; r >= 0 && sz <= top; sz *= 4) {
                char n[SUITE_NAME_MAX], ov[SUITE_OVERRIDES_MAX];
                snprintf(n, sizeof(n), "%s@%llu", name, (unsigned long long)sz);
                snprintf(ov, sizeof(ov), "{%s\"size\": %llu}", extra, (unsigned long long)sz);
                const struct mode md = {n, bench, ov, meas, NULL};
                r = ext_take(j, runs, &md, sz);
        }
        return r;
}

/* The extended tier's additions, cheapest and most telling first, each when it fits what is left
 * of budget_ms (estimated from the rates the quick tier just measured): device memory at
 * full_size, bidirectional copies, pageable copies back to the host, latency (the quick tier's
 * latency run already has every figure), managed memory on demand, and short sweeps of the
 * pinned copies and of device memory. The plan goes to the result's "plan". */
static int health_extended(struct bench_job *j, json_t *runs, double t0)
{
        uint64_t full = (uint64_t)param_int(j, "full_size", 1ll << 30);
        double samples = j->iterations + j->warmup, size = (double)j->size;
        double h2d = taken_gbps(j, MEAS_PINNED_H2D), d2h = taken_gbps(j, MEAS_PINNED_D2H);
        double pageable = taken_gbps(j, MEAS_PAGEABLE_H2D), d2d = taken_gbps(j, MEAS_D2D);
        struct ext_plan pl = {t0, (double)param_int(j, "budget_ms", 0), json_array(), json_array()};
        char ov[SUITE_OVERRIDES_MAX];
        int r = 0;

        if (!pl.ran || !pl.skipped) {
                json_decref(pl.ran);
                json_decref(pl.skipped);
                return job_fail(j, -ENOMEM, "out of memory");
        }
        snprintf(ov, sizeof(ov), "{\"size\": %llu}", (unsigned long long)full);
        const struct mode d2d_full = {MEAS_D2D_FULL, "d2d", ov, MEAS_COPY_ENGINE, NULL};
        if (ext_fits(&pl, "device memory at full size", est_copy_ms(samples, 2.0 * full, d2d)))
                r = ext_take(j, runs, &d2d_full, 0);
        const struct mode bidir = {MEAS_BIDIR, "copy", "{\"direction\": \"bidir\"}", MEAS_BIDIR,
                                   NULL};
        if (r >= 0 &&
            ext_fits(&pl, "bidirectional copies", est_copy_ms(samples, 2 * size, h2d + d2h)))
                r = ext_take(j, runs, &bidir, 0);
        const struct mode pd2h = {MEAS_PAGEABLE_D2H, "copy",
                                  "{\"direction\": \"d2h\", \"host_memory\": \"pageable\"}",
                                  MEAS_D2H, NULL};
        if (r >= 0 &&
            ext_fits(&pl, "pageable copies back to the host", est_copy_ms(samples, size, pageable)))
                r = ext_take(j, runs, &pd2h, 0);
        const char *lat = "{\"size\": 4, \"repeats\": 10, \"pages\": 8}";
        const struct mode lats[] = {
            {MEAS_LATENCY_PINNED_D2H, "latency", lat, MEAS_PINNED_D2H, NULL},
            {MEAS_LATENCY_PAGEABLE_H2D, "latency", lat, MEAS_PAGEABLE_H2D, NULL},
            {MEAS_LATENCY_PAGEABLE_D2H, "latency", lat, MEAS_PAGEABLE_D2H, NULL},
            {MEAS_LATENCY_FAULT, "latency", lat, MEAS_FAULT_SINGLE, NULL},
        };
        if (r >= 0 && ext_fits(&pl, "latency", 0))
                for (size_t i = 0; r >= 0 && i < sizeof(lats) / sizeof(lats[0]); i++)
                        r = ext_take(j, runs, &lats[i], 0);
        const struct mode od = {MEAS_MANAGED_ON_DEMAND, "managed_on_demand", "{}",
                                MEAS_GPU_ON_DEMAND, NULL};
        if (r >= 0 &&
            ext_fits(&pl, "managed memory on demand", est_copy_ms(samples, 2 * size, pageable)))
                r = ext_take(j, runs, &od, 0);
        if (r >= 0)
                r = ext_knee(j, runs, &pl, "sweep of pinned_h2d", MEAS_KNEE_PINNED_H2D, "copy",
                             "\"direction\": \"h2d\", ", MEAS_H2D, j->size, h2d, 1);
        if (r >= 0)
                r = ext_knee(j, runs, &pl, "sweep of pinned_d2h", MEAS_KNEE_PINNED_D2H, "copy",
                             "\"direction\": \"d2h\", ", MEAS_D2H, j->size, d2h, 1);
        if (r >= 0)
                r = ext_knee(j, runs, &pl, "sweep of d2d", MEAS_KNEE_D2D, "d2d", "",
                             MEAS_COPY_ENGINE, full, d2d, 2);
        json_object_set_new(j->extra_top, "tier", json_string(HEALTH_TIER_EXTENDED));
        json_object_set_new(j->extra_top, "plan",
                            json_pack("{s:I, s:f, s:o, s:o}", "budget_ms", (json_int_t)pl.budget_ms,
                                      "elapsed_ms", now_ms() - t0, "ran", pl.ran, "skipped",
                                      pl.skipped));
        return r < 0 ? r : 0;
}

/* The samples go where the verdict needs them: pinned copies are judged against the link (and
 * fail), so they get every iteration asked for; pageable and managed copies are judged only
 * against this GPU's own baseline (and warn), so half as many, one warm-up. Of the managed and
 * latency benchmarks only the one measurement judged is taken ("only"): on the H200 the other
 * two prefetch loops and the pageable and fault latencies were 140-200 of the check's
 * 315-440 ms (bench/results/health-warm-h200/). On an H200 at 64 MiB
 * that took the check from 0.48 s to about 0.25 s (bench/results/coexist-h200.txt). Device
 * memory is the copy engine's device-to-device copy at its own size (d2d_size, above the L2
 * cache): at 4 TB/s its every iteration costs about 0.13 ms at 256 MiB. */
int bench_health(struct bench_job *j)
{
        double t0 = now_ms();
        char host_dep[SUITE_OVERRIDES_MAX], managed[SUITE_SHORT_OVERRIDES_MAX],
            d2d[SUITE_SHORT_OVERRIDES_MAX];
        int half = j->iterations / 2 < 3 ? 3 : j->iterations / 2;
        json_t *d2d_size = json_object_get(j->params, "d2d_size");

        snprintf(host_dep, sizeof(host_dep),
                 "{\"direction\": \"h2d\", \"host_memory\": \"pageable\", \"iterations\": %d, "
                 "\"warmup\": 1}",
                 half);
        snprintf(managed, sizeof(managed),
                 "{\"iterations\": %d, \"warmup\": 1, \"only\": \"prefetch_kernel\"}", half);
        snprintf(d2d, sizeof(d2d), "{\"size\": %lld}",
                 json_is_integer(d2d_size) ? (long long)json_integer_value(d2d_size)
                                           : (long long)j->size);
        const struct mode checks[] = {
            {MEAS_PINNED_H2D, "copy", "{\"direction\": \"h2d\"}", MEAS_H2D, NULL},
            {MEAS_PINNED_D2H, "copy", "{\"direction\": \"d2h\"}", MEAS_D2H, NULL},
            {MEAS_PAGEABLE_H2D, "copy", host_dep, MEAS_H2D, NULL},
            {MEAS_MANAGED_PREFETCH, "managed_prefetch", managed, MEAS_PREFETCH_KERNEL, NULL},
            {MEAS_LATENCY_PINNED_H2D, "latency",
             "{\"size\": 4, \"repeats\": 10, \"pages\": 8, \"only\": \"pinned_h2d\"}",
             MEAS_PINNED_H2D, NULL},
            {MEAS_D2D, "d2d", d2d, MEAS_COPY_ENGINE, NULL},
        };
        json_t *runs = json_object();
        int r = 0;

        for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]) && r >= 0; i++) {
                json_t *res;
                r = run_cached(j, runs, &checks[i], &res);
                if (r < 0)
                        break;
                json_t *m = json_deep_copy(result_measurement(res, checks[i].measurement));
                if (!m) {
                        r = job_fail(j, -EIO, "health: no %s", checks[i].measurement);
                        break;
                }
                json_object_set_new(m, "name", json_string(checks[i].name));
                json_array_append_new(j->measurements, m);
        }
        if (r >= 0 && strcmp(param_str(j, "tier", HEALTH_TIER_QUICK), HEALTH_TIER_EXTENDED) == 0)
                r = health_extended(j, runs, t0);
        json_decref(runs);
        if (r < 0)
                return r;
        /* Read live, right after the copies: a link that trained down since discovery shows. */
        json_t *pcie =
            pcie_link_json(PCIE_SYSFS_DEVICES,
                           json_string_value(json_object_get(j->ctx->device_info, "pci_bus_id")));
        if (!pcie)
                pcie = json_incref(json_object_get(j->ctx->device_info, "pcie"));
        json_object_set_new(
            j->extra_top, "link",
            json_pack(
                "{s:O?, s:f, s:f}", "pcie", pcie, "theoretical_gbps_current",
                pcie_link_gbps((int)json_integer_value(json_object_get(pcie, "current_gen")),
                               (int)json_integer_value(json_object_get(pcie, "current_width"))),
                "theoretical_gbps_max",
                pcie_link_gbps((int)json_integer_value(json_object_get(pcie, "max_gen")),
                               (int)json_integer_value(json_object_get(pcie, "max_width")))));
        json_decref(pcie);
        /* The GPU's error state, right after its copies: health_errors.c judges it. */
        json_object_set_new(
            j->extra_top, "gpu_errors",
            conditions_gpu_errors(json_string_value(json_object_get(j->ctx->device_info, "uuid")),
                                  &j->ctx->inforom));
        return 0;
}

/* ---------------------------------------------------------------- pipeline_sweep */

/* One pipeline run's measurements, each renamed "name@point" and told its point. */
static int sweep_take(struct bench_job *j, json_t *res, const char *point, const char *kind)
{
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(res, "measurements"), i, m)
        {
                char name[SUITE_NAME_MAX];
                json_t *c = json_deep_copy(m);
                snprintf(name, sizeof(name), "%s@%s", json_string_value(json_object_get(m, "name")),
                         point);
                json_object_set_new(c, "name", json_string(name));
                json_object_set_new(c, "strategy",
                                    json_object_get(m, "name")
                                        ? json_incref(json_object_get(m, "name"))
                                        : json_null());
                json_object_set_new(c, "sweep", json_string(kind));
                json_array_append_new(j->measurements, c);
        }
        return 0;
}

/* pipeline at the balanced point, then from min_intensity up by 4x to max_factor times the
 * balanced intensity, then a light kernel over a growing touched part of the batch (explicit
 * copies of all of it, on-demand faults of the touched pages, a gather of them). Each point is a
 * full pipeline run; the curves, the 10%-of-limit points and the sentence are the daemon's. */
int bench_pipeline_sweep(struct bench_job *j)
{
        char ov[SUITE_SWEEP_OVERRIDES_MAX];
        json_t *res = NULL;
        int r = sub_run(j, "pipeline", "{\"intensity\": \"balanced\"}", &res);
        if (r < 0)
                return r;
        json_int_t kb =
            json_integer_value(json_object_get(json_object_get(res, "intensity"), "chosen"));
        json_object_set(j->extra_top, "balanced", json_object_get(res, "intensity"));
        snprintf(ov, sizeof(ov), "i=%lld", (long long)kb);
        sweep_take(j, res, ov, "intensity");
        json_decref(res);

        int64_t lo = param_int(j, "min_intensity", 2), factor = param_int(j, "max_factor", 4);
        for (int64_t k = lo; r >= 0 && k <= kb * factor; k *= 4) {
                char point[SUITE_POINT_MAX];
                if (k == kb)
                        continue;
                snprintf(ov, sizeof(ov), "{\"intensity\": %lld}", (long long)k);
                r = sub_run(j, "pipeline", ov, &res);
                if (r < 0)
                        return r;
                snprintf(point, sizeof(point), "i=%lld", (long long)k);
                sweep_take(j, res, point, "intensity");
                json_decref(res);
        }
        uint64_t t = (uint64_t)param_int(j, "min_touched", 1 << 20);
        int64_t ti = param_int(j, "touched_intensity", 16);
        for (bool last = false; !last; t *= 4) {
                char point[SUITE_TOUCHED_POINT_MAX];
                if (t >= j->size) {
                        t = j->size;
                        last = true;
                }
                snprintf(ov, sizeof(ov),
                         "{\"intensity\": %lld, \"touched\": %llu, \"strategies\": [\"%s\", "
                         "\"%s\", \"%s\"]}",
                         (long long)ti, (unsigned long long)t, MEAS_PIPE_SERIAL,
                         MEAS_PIPE_ON_DEMAND, MEAS_PIPE_GATHER);
                r = sub_run(j, "pipeline", ov, &res);
                if (r < 0)
                        return r;
                snprintf(point, sizeof(point), "t=%llu", (unsigned long long)t);
                sweep_take(j, res, point, "touched");
                json_decref(res);
        }
        return 0;
}
