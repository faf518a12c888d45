/* The suites (issue 5): um_vs_explicit, sweep and health, built from the benchmarks themselves
 * (each sub-run is a full bench_run: same timing, same verification) so a suite can never
 * measure differently from the benchmark it quotes. Owns the composition and the derived
 * numbers (effective GB/s from the median time, ratios, the conclusion sentence, 90%-of-peak
 * sizes); verdicts against configuration and history belong to the daemon, which has both. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_internal.h"

extern "C" {
#include "pcie.h"
}

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

static json_t *find_measurement(json_t *res, const char *name)
{
        json_t *arr = json_object_get(res, "measurements");
        for (size_t i = 0; i < json_array_size(arr); i++) {
                json_t *m = json_array_get(arr, i);
                if (strcmp(json_string_value(json_object_get(m, "name")), name) == 0)
                        return m;
        }
        return NULL;
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
        char key[160];
        snprintf(key, sizeof(key), "%s %s", md->bench, md->overrides);
        json_t *res = json_object_get(runs, key);
        if (!res) {
                int r = sub_run(j, md->bench, md->overrides, &res);
                if (r < 0)
                        return r;
                json_object_set_new(runs, key, res);
        }
        *ret = res;
        return 0;
}

/* ---------------------------------------------------------------- um_vs_explicit */

static const struct mode um_modes[] = {
    {"pinned_copy_kernel", "copy_overlap", "{}", "serial", "to_gpu"},
    {"overlapped_copy_kernel", "copy_overlap", "{}", "overlapped", "to_gpu"},
    {"pageable_copy_kernel", "copy_overlap", "{\"host_memory\": \"pageable\"}", "serial", "to_gpu"},
    {"zero_copy_kernel", "zero_copy", "{}", "read_write", "to_gpu"},
    {"managed_on_demand", "managed_on_demand", "{}", "gpu_on_demand", "to_gpu"},
    {"managed_prefetch", "managed_prefetch", "{}", "prefetch_kernel", "to_gpu"},
    {"managed_read_mostly", "managed_advise", "{\"advice\": \"read_mostly\"}", "write", "to_gpu"},
    {"managed_preferred_host", "managed_advise", "{\"advice\": \"preferred_location_host\"}",
     "write", "to_gpu"},
    {"managed_preferred_device", "managed_advise", "{\"advice\": \"preferred_location_device\"}",
     "write", "to_gpu"},
    {"managed_accessed_by", "managed_advise", "{\"advice\": \"accessed_by\"}", "write", "to_gpu"},
    {"pinned_copy_d2h", "copy", "{\"direction\": \"d2h\"}", "d2h", "to_host"},
    {"pageable_copy_d2h", "copy", "{\"direction\": \"d2h\", \"host_memory\": \"pageable\"}", "d2h",
     "to_host"},
    {"managed_prefetch_to_host", "managed_prefetch", "{}", "prefetch_to_host", "to_host"},
    {"managed_cpu_on_demand", "managed_on_demand", "{}", "cpu_on_demand", "to_host"},
};

int bench_um_vs_explicit(struct bench_job *j)
{
        const size_t n = sizeof(um_modes) / sizeof(um_modes[0]);
        json_t *runs = json_object();
        double base[2] = {0, 0}; /* effective GB/s of the baseline, to_gpu and to_host */
        int r = 0;

        for (size_t i = 0; i < n && r >= 0; i++) {
                const struct mode *md = &um_modes[i];
                json_t *res;
                r = run_cached(j, runs, md, &res);
                if (r < 0)
                        break;
                json_t *src = find_measurement(res, md->measurement);
                if (!src) {
                        r = job_fail(j, -EIO, "%s: no %s measurement", md->bench, md->measurement);
                        break;
                }
                json_t *m = json_deep_copy(src);
                double ms = median_ms(src);
                double eff = stats_gbps((double)j->size, ms);
                bool to_host = strcmp(md->direction, "to_host") == 0;
                if (i == 0 || (to_host && base[1] == 0))
                        base[to_host] = eff;
                char source[96];
                snprintf(source, sizeof(source), "%s.%s", md->bench, md->measurement);
                json_object_set_new(m, "name", json_string(md->name));
                json_object_set_new(m, "source", json_string(source));
                json_object_set_new(m, "direction", json_string(md->direction));
                json_object_set_new(m, "bytes", json_integer((json_int_t)j->size));
                json_object_set_new(m, "bytes_counted", json_string("one direction"));
                json_object_set_new(m, "gbps", json_real(eff));
                json_object_set_new(m, "time_ms", json_real(ms));
                json_object_set_new(
                    m, to_host ? "ratio_to_pinned_copy_d2h" : "ratio_to_pinned_copy_kernel",
                    json_real(base[to_host] > 0 ? eff / base[to_host] : 0));
                json_array_append_new(j->measurements, m);
        }
        json_decref(runs);
        if (r < 0)
                return r;

        /* The answer in numbers and one sentence. */
        json_t *best = NULL, *m;
        size_t i;
        double on_demand = 0, prefetch = 0;
        json_array_foreach(j->measurements, i, m)
        {
                const char *name = json_string_value(json_object_get(m, "name"));
                double g = json_real_value(json_object_get(m, "gbps"));
                if (strcmp(json_string_value(json_object_get(m, "direction")), "to_gpu") != 0)
                        continue;
                if (!best || g > json_real_value(json_object_get(best, "gbps")))
                        best = m;
                if (strcmp(name, "managed_on_demand") == 0)
                        on_demand = g;
                if (strcmp(name, "managed_prefetch") == 0)
                        prefetch = g;
        }
        char sentence[400];
        snprintf(sentence, sizeof(sentence),
                 "on this GPU, on-demand managed memory is %.1fx slower than pinned copies; "
                 "prefetching recovers %.2fx; the fastest way to the GPU is %s at %.1f GB/s",
                 on_demand > 0 ? base[0] / on_demand : 0, base[0] > 0 ? prefetch / base[0] : 0,
                 json_string_value(json_object_get(best, "name")),
                 json_real_value(json_object_get(best, "gbps")));
        json_object_set_new(j->extra_top, "summary",
                            json_pack("{s:s, s:f, s:s}", "best_mode",
                                      json_string_value(json_object_get(best, "name")),
                                      "baseline_gbps", base[0], "conclusion", sentence));
        return 0;
}

/* ---------------------------------------------------------------- sweep */

static const struct mode sweep_modes[] = {
    {"pinned_h2d", "copy", "{\"direction\": \"h2d\"}", "h2d", NULL},
    {"pinned_d2h", "copy", "{\"direction\": \"d2h\"}", "d2h", NULL},
    {"pageable_h2d", "copy", "{\"direction\": \"h2d\", \"host_memory\": \"pageable\"}", "h2d",
     NULL},
    {"pageable_d2h", "copy", "{\"direction\": \"d2h\", \"host_memory\": \"pageable\"}", "d2h",
     NULL},
    {"bidir", "copy", "{\"direction\": \"bidir\"}", "bidir", NULL},
    {"zero_copy", "zero_copy", "{}", "read_write", NULL},
    {"managed_on_demand", "managed_on_demand", "{}", "gpu_on_demand", NULL},
    {"managed_prefetch", "managed_prefetch", "{}", "prefetch_kernel", NULL},
};

int bench_sweep(struct bench_job *j)
{
        json_t *modes = json_object_get(j->params, "modes");
        json_t *sizes = json_object_get(j->params, "sizes");
        json_t *curves = json_object();
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
                if (!md) {
                        r = job_fail(j, -EINVAL, "unknown sweep mode %s", json_string_value(mv));
                        break;
                }
                json_t *points = json_array();
                double peak = 0;
                json_array_foreach(sizes, si, sv)
                {
                        char ov[256];
                        json_t *res = NULL;
                        json_t *o = json_loads(md->overrides, 0, NULL);
                        json_object_set(o, "size", sv);
                        char *ovs = json_dumps(o, JSON_COMPACT);
                        snprintf(ov, sizeof(ov), "%s", ovs ? ovs : "{}");
                        free(ovs);
                        json_decref(o);
                        r = sub_run(j, md->bench, ov, &res);
                        if (r < 0)
                                break;
                        json_t *src = find_measurement(res, md->measurement);
                        double g = json_real_value(json_object_get(src, "gbps"));
                        char name[96];
                        snprintf(name, sizeof(name), "%s@%lld", md->name,
                                 (long long)json_integer_value(sv));
                        json_t *m = json_deep_copy(src);
                        json_object_set_new(m, "name", json_string(name));
                        json_object_set_new(m, "mode", json_string(md->name));
                        json_object_set(m, "size", sv);
                        json_array_append_new(j->measurements, m);
                        json_array_append_new(points,
                                              json_pack("{s:O, s:f, s:f}", "size", sv, "gbps", g,
                                                        "median_ms", median_ms(src)));
                        if (g > peak)
                                peak = g;
                        json_decref(res);
                }
                if (r < 0) {
                        json_decref(points);
                        break;
                }
                json_t *at90 = json_null();
                for (size_t pi = 0; pi < json_array_size(points); pi++) {
                        json_t *p = json_array_get(points, pi);
                        if (json_real_value(json_object_get(p, "gbps")) >= 0.9 * peak) {
                                at90 = json_incref(json_object_get(p, "size"));
                                break;
                        }
                }
                json_object_set_new(curves, md->name,
                                    json_pack("{s:o, s:f, s:o}", "points", points, "peak_gbps",
                                              peak, "size_at_90pct_peak", at90));
        }
        if (r < 0) {
                json_decref(curves);
                return r;
        }
        json_object_set_new(j->extra_top, "curves", curves);
        return 0;
}

/* ---------------------------------------------------------------- health */

/* Theoretical one-direction rate of a PCIe link in GB/s, 0 when unknown. */
static double link_gbps(json_t *gen, json_t *width)
{
        static const double gts[] = {0, 2.5, 5, 8, 16, 32, 64, 128};
        json_int_t g = json_integer_value(gen), w = json_integer_value(width);
        if (g < 1 || g > 7 || w < 1)
                return 0;
        return gts[g] * (double)w * (g <= 2 ? 0.8 : 128.0 / 130.0) / 8;
}

int bench_health(struct bench_job *j)
{
        static const struct mode checks[] = {
            {"pinned_h2d", "copy", "{\"direction\": \"h2d\"}", "h2d", NULL},
            {"pinned_d2h", "copy", "{\"direction\": \"d2h\"}", "d2h", NULL},
            {"pageable_h2d", "copy", "{\"direction\": \"h2d\", \"host_memory\": \"pageable\"}",
             "h2d", NULL},
            {"managed_prefetch", "managed_prefetch", "{}", "prefetch_kernel", NULL},
            {"latency_pinned_h2d", "latency", "{\"size\": 4, \"repeats\": 20, \"pages\": 8}",
             "pinned_h2d", NULL},
        };
        json_t *runs = json_object();
        int r = 0;

        for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]) && r >= 0; i++) {
                json_t *res;
                r = run_cached(j, runs, &checks[i], &res);
                if (r < 0)
                        break;
                json_t *m = json_deep_copy(find_measurement(res, checks[i].measurement));
                if (!m) {
                        r = job_fail(j, -EIO, "health: no %s", checks[i].measurement);
                        break;
                }
                json_object_set_new(m, "name", json_string(checks[i].name));
                json_array_append_new(j->measurements, m);
        }
        json_decref(runs);
        if (r < 0)
                return r;
        /* Read live, right after the copies: a link that trained down since discovery shows. */
        json_t *pcie = pcie_link_json(
            PCIE_SYSFS_DEVICES, json_string_value(json_object_get(j->ctx->device_info, "pci_bus_id")));
        if (!pcie)
                pcie = json_incref(json_object_get(j->ctx->device_info, "pcie"));
        json_object_set_new(j->extra_top, "link",
                            json_pack("{s:O?, s:f, s:f}", "pcie", pcie, "theoretical_gbps_current",
                                      link_gbps(json_object_get(pcie, "current_gen"),
                                                json_object_get(pcie, "current_width")),
                                      "theoretical_gbps_max",
                                      link_gbps(json_object_get(pcie, "max_gen"),
                                                json_object_get(pcie, "max_width"))));
        json_decref(pcie);
        return 0;
}
