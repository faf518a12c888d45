/* train_step's matrix as a table (rows the tensor classes, columns the placements, each cell
 * first step / steady step against all in device memory) and embedding_gather's factors as a
 * table with the planner's figures beside TorchRec's. */
#include "text_train.h"

#include <string.h>

static double num(const json_t *o, const char *k)
{
        json_t *v = json_object_get(o, k);
        return json_is_number(v) ? json_number_value(v) : 0;
}

static void render_matrix(FILE *f, const json_t *pm)
{
        const json_t *pl = json_object_get(pm, "placements"), *row, *p;
        const json_t *ref = json_object_get(pm, "reference");
        size_t i, k;

        fprintf(f,
                "\n  placement matrix: first step / steady step, x all-device (%.3f / %.3f ms)\n",
                num(ref, "first_step_ms"), num(ref, "steady_step_ms"));
        fprintf(f, "  %-12s", "class");
        json_array_foreach(pl, k, p) fprintf(f, " %20s", json_string_value(p));
        fprintf(f, "\n");
        json_array_foreach(json_object_get(pm, "rows"), i, row)
        {
                const json_t *cells = json_object_get(row, "cells");
                fprintf(f, "  %-12s", json_string_value(json_object_get(row, "class")));
                json_array_foreach(pl, k, p)
                {
                        const json_t *c = json_object_get(cells, json_string_value(p));
                        char cell[TEXT_CELL_MAX] = "-";
                        if (c)
                                snprintf(cell, sizeof(cell), "%.2fx / %.2fx",
                                         num(c, "first_vs_device"), num(c, "steady_vs_device"));
                        fprintf(f, " %20s", cell);
                }
                fprintf(f, "\n");
        }
        if (json_is_string(json_object_get(pm, "conclusion")))
                fprintf(f, "  %s\n", json_string_value(json_object_get(pm, "conclusion")));
}

static void render_rate(FILE *f, const char *what, const json_t *measured, const json_t *torchrec,
                        const char *key)
{
        json_t *m = json_object_get(measured, key), *t = json_object_get(torchrec, key);
        char a[TEXT_CELL_MAX] = "-", b[TEXT_CELL_MAX] = "-";
        if (json_is_number(m))
                snprintf(a, sizeof(a), "%.4g", json_number_value(m));
        if (json_is_number(t))
                snprintf(b, sizeof(b), "%.4g", json_number_value(t));
        fprintf(f, "  %-28s %14s %14s\n", what, a, b);
}

static void render_embedding(FILE *f, const json_t *e)
{
        const json_t *pl = json_object_get(e, "planner"), *x;
        const json_t *m = json_object_get(pl, "measured"), *t = json_object_get(pl, "torchrec");
        size_t i;

        fprintf(f, "\n  %-18s %14s %10s %12s\n", "strategy", "rows/s", "GB/s", "x HBM time");
        json_array_foreach(json_object_get(e, "factors"), i, x)
        {
                char fac[TEXT_CELL_MAX] = "-";
                if (json_is_number(json_object_get(x, "factor_vs_device")))
                        snprintf(fac, sizeof(fac), "%.2f", num(x, "factor_vs_device"));
                fprintf(f, "  %-18s %14.4g %10.2f %12s\n",
                        json_string_value(json_object_get(x, "strategy")), num(x, "rows_per_s"),
                        num(x, "gbps"), fac);
        }
        fprintf(f, "\n  planner (GB/s)               %14s %14s\n", "measured", "TorchRec");
        render_rate(f, "HBM", m, t, "hbm_gbps");
        render_rate(f, "host memory", m, t, "host_memory_gbps");
        render_rate(f, "PCIe", m, t, "pcie_gbps");
        render_rate(f, "UVM lookup", m, t, "uvm_lookup_gbps");
        render_rate(f, "UVM lookup / HBM", m, t, "uvm_factor");
        if (json_is_string(json_object_get(e, "conclusion")))
                fprintf(f, "  %s\n", json_string_value(json_object_get(e, "conclusion")));
}

void text_render_train(FILE *f, const json_t *result)
{
        if (json_is_object(json_object_get(result, "placement_matrix")))
                render_matrix(f, json_object_get(result, "placement_matrix"));
        if (json_is_object(json_object_get(result, "embedding")))
                render_embedding(f, json_object_get(result, "embedding"));
}
