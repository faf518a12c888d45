/* train_step's matrix and embedding_gather's factors (train_report.h): read from the
 * measurements alone, so a stored result, real or fake, says the same thing. */
#include "train_report.h"

#include <stdio.h>
#include <string.h>

#include "catalog.h"

/* The matrix's conclusion: two or three sentences naming the worst cells and their times. */
#define CONCLUSION_MAX 512

static double median_ms(const json_t *m)
{
        return json_number_value(json_object_get(json_object_get(m, "stats"), "median_ms"));
}

static const json_t *find(const json_t *list, const char *name)
{
        size_t i;
        json_t *m;
        json_array_foreach(list, i, m)
        {
                const char *n = json_string_value(json_object_get(m, "name"));
                if (n && strcmp(n, name) == 0)
                        return m;
        }
        return NULL;
}

/* Appends s to the array a unless already there. */
static void add_once(json_t *a, const char *s)
{
        size_t i;
        json_t *v;
        json_array_foreach(a, i, v) if (strcmp(json_string_value(v), s) == 0) return;
        json_array_append_new(a, json_string(s));
}

static json_t *row_for(json_t *rows, const char *cls)
{
        size_t i;
        json_t *r;
        json_array_foreach(rows, i, r) if (strcmp(json_string_value(json_object_get(r, "class")),
                                                  cls) == 0) return r;
        r = json_pack("{s:s, s:{}}", "class", cls, "cells");
        json_array_append_new(rows, r);
        return r;
}

static void train_conclude(json_t *o, const json_t *worst_first, const json_t *worst_steady,
                           size_t n_free, size_t n_managed)
{
        char buf[CONCLUSION_MAX];
        int len = snprintf(buf, sizeof(buf),
                           "managed memory is free in the steady state in %zu of %zu managed "
                           "cells (their pages stay on the GPU after the first step)",
                           n_free, n_managed);
        if (worst_first && len < (int)sizeof(buf))
                len += snprintf(buf + len, sizeof(buf) - len,
                                "; the dearest first step is %s at %.2fx all-device",
                                json_string_value(json_object_get(worst_first, "name")),
                                json_number_value(json_object_get(worst_first, "first_vs_device")));
        /* A steady step within the free margin is no cost: naming it "dearest" would mislead. */
        if (worst_steady &&
            json_number_value(json_object_get(worst_steady, "steady_vs_device")) >
                TRAIN_FREE_WITHIN &&
            len < (int)sizeof(buf))
                snprintf(buf + len, sizeof(buf) - len,
                         "; the dearest steady step is %s at %.2fx, paid every step",
                         json_string_value(json_object_get(worst_steady, "name")),
                         json_number_value(json_object_get(worst_steady, "steady_vs_device")));
        json_object_set_new(o, "conclusion", json_string(buf));
}

json_t *train_matrix(const json_t *measurements)
{
        const json_t *ref = find(measurements, MEAS_TRAIN_DEVICE "@" TRAIN_CLASS_ALL);
        const json_t *worst_first = NULL, *worst_steady = NULL;
        size_t i, n_free = 0, n_managed = 0;
        json_t *m;

        if (!ref)
                return NULL;
        double ref_first = json_number_value(json_object_get(ref, "first_step_ms"));
        double ref_steady = median_ms(ref);
        json_t *o = json_pack("{s:{s:f, s:f}, s:[], s:[], s:[], s:[], s:[]}", "reference",
                              "first_step_ms", ref_first, "steady_step_ms", ref_steady, "classes",
                              "placements", "rows", "free", "costs");
        if (!o || ref_first <= 0 || ref_steady <= 0)
                return o;
        json_array_foreach(measurements, i, m)
        {
                const char *pl = json_string_value(json_object_get(m, "placement"));
                const char *cls = json_string_value(json_object_get(m, "class"));
                const char *name = json_string_value(json_object_get(m, "name"));
                if (!pl || !cls || !name || m == ref)
                        continue;
                double f = json_number_value(json_object_get(m, "first_step_ms"));
                double s = median_ms(m);
                json_t *cell = json_pack("{s:s, s:f, s:f, s:f, s:f}", "name", name, "first_step_ms",
                                         f, "steady_step_ms", s, "first_vs_device", f / ref_first,
                                         "steady_vs_device", s / ref_steady);
                add_once(json_object_get(o, "classes"), cls);
                add_once(json_object_get(o, "placements"), pl);
                json_object_set(json_object_get(row_for(json_object_get(o, "rows"), cls), "cells"),
                                pl, cell);
                bool managed = strncmp(pl, "managed_", 8) == 0;
                n_managed += managed;
                if (managed && s / ref_steady <= TRAIN_FREE_WITHIN) {
                        n_free++;
                        json_array_append_new(json_object_get(o, "free"), json_string(name));
                }
                if (s / ref_steady > TRAIN_FREE_WITHIN || f / ref_first > TRAIN_FREE_WITHIN)
                        json_array_append(json_object_get(o, "costs"), cell);
                if (!worst_first || f / ref_first > json_number_value(json_object_get(
                                                        worst_first, "first_vs_device")))
                        worst_first = cell;
                if (!worst_steady || s / ref_steady > json_number_value(json_object_get(
                                                          worst_steady, "steady_vs_device")))
                        worst_steady = cell;
                json_decref(cell); /* the row and costs hold it */
        }
        train_conclude(o, worst_first, worst_steady, n_free, n_managed);
        return o;
}

static json_t *rate_or_null(double gbps)
{
        return gbps > 0 ? json_real(gbps) : json_null();
}

static json_t *ratio_or_null(double a, double b)
{
        return a > 0 && b > 0 ? json_real(a / b) : json_null();
}

static json_t *embed_planner(const json_t *measurements, double hbm)
{
        const json_t *whole = find(measurements, MEAS_EMB_WHOLE_COPY);
        const json_t *gather = find(measurements, MEAS_EMB_EXPLICIT_GATHER);
        const json_t *uvm = find(measurements, MEAS_EMB_MANAGED_UVM);
        double pcie = json_number_value(json_object_get(whole, "copy_gbps"));
        double host = json_number_value(json_object_get(gather, "pack_gbps"));
        double lookup = json_number_value(json_object_get(uvm, "gbps"));
        double tr_uvm = TORCHREC_DDR_GBPS / TORCHREC_UVM_DIVISOR;

        return json_pack(
            "{s:{s:o, s:o, s:o, s:o, s:o}, s:{s:f, s:f, s:n, s:f, s:f, s:f, s:s}, s:{s:o, s:o, "
            "s:o, s:o}}",
            "measured", "hbm_gbps", rate_or_null(hbm), "host_memory_gbps", rate_or_null(host),
            "pcie_gbps", rate_or_null(pcie), "uvm_lookup_gbps", rate_or_null(lookup), "uvm_factor",
            ratio_or_null(lookup, hbm), "torchrec", "hbm_gbps", TORCHREC_HBM_GBPS,
            "host_memory_gbps", TORCHREC_DDR_GBPS, "pcie_gbps", "uvm_lookup_gbps", tr_uvm,
            "uvm_factor", tr_uvm / TORCHREC_HBM_GBPS, "uvm_caching_gbps",
            (TORCHREC_UVM_CACHING_RATIO * TORCHREC_HBM_GBPS +
             (1 - TORCHREC_UVM_CACHING_RATIO) * TORCHREC_DDR_GBPS) /
                TORCHREC_UVM_DIVISOR,
            "source",
            "torchrec/distributed/planner/constants.py: HBM_MEM_BW 897 GiB/s, DDR_MEM_BW 51 GiB/s, "
            "FUSED_UVM = DDR_MEM_BW / 10, UVM_CACHING_RATIO 0.2; it has no PCIe constant",
            "off_by", "hbm", ratio_or_null(hbm, TORCHREC_HBM_GBPS), "host_memory",
            ratio_or_null(host, TORCHREC_DDR_GBPS), "uvm_lookup", ratio_or_null(lookup, tr_uvm),
            "uvm_factor", ratio_or_null(lookup / (hbm > 0 ? hbm : 1), tr_uvm / TORCHREC_HBM_GBPS));
}

json_t *embed_report(const json_t *measurements, long long lookups)
{
        const json_t *dev = find(measurements, MEAS_EMB_DEVICE);
        double dev_ms = dev ? median_ms(dev) : 0;
        json_t *factors = json_array(), *m;
        char buf[CONCLUSION_MAX];
        const char *worst = NULL;
        double worst_f = 0;
        size_t i;

        json_array_foreach(measurements, i, m)
        {
                const char *name = json_string_value(json_object_get(m, "name"));
                double ms = median_ms(m);
                if (!name || ms <= 0)
                        continue;
                json_array_append_new(factors,
                                      json_pack("{s:s, s:f, s:f, s:o}", "strategy", name,
                                                "rows_per_s", (double)lookups / (ms / 1e3), "gbps",
                                                json_number_value(json_object_get(m, "gbps")),
                                                "factor_vs_device", ratio_or_null(ms, dev_ms)));
                if (dev_ms > 0 && ms / dev_ms > worst_f) {
                        worst_f = ms / dev_ms;
                        worst = name;
                }
        }
        json_t *o = json_pack(
            "{s:o, s:o}", "factors", factors, "planner",
            embed_planner(measurements, dev ? json_number_value(json_object_get(dev, "gbps")) : 0));
        if (o && worst) {
                snprintf(buf, sizeof(buf),
                         "every strategy against rows gathered from HBM; the slowest, %s, takes "
                         "%.1fx as long",
                         worst, worst_f);
                json_object_set_new(o, "conclusion", json_string(buf));
        }
        return o;
}
