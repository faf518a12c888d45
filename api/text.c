/* Text rendering of jobs (see text.h). Column widths are fixed to what the numbers need, so
 * the output lines up in an 80-column terminal for every benchmark. */
#include "text.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "size.h"
#include "text_train.h"
#include "util.h"

static const char *str(const json_t *o, const char *k, const char *def)
{
        const char *s = json_string_value(json_object_get(o, k));
        return s ? s : def;
}

static double num(const json_t *o, const char *k)
{
        json_t *v = json_object_get(o, k);
        return json_is_number(v) ? json_number_value(v) : 0;
}

static void render_measurements(FILE *f, const json_t *result)
{
        size_t i;
        json_t *m;

        fprintf(f, "  %-42s %10s %9s %10s %10s %10s %6s %s\n", "measurement", "size", "GB/s",
                "median ms", "min ms", "max ms", "CV%", "verified");
        json_array_foreach(json_object_get(result, "measurements"), i, m)
        {
                const json_t *st = json_object_get(m, "stats");
                char sz[TEXT_CELL_MAX];
                size_format_approx((uint64_t)json_integer_value(json_object_get(m, "bytes")), sz,
                                   sizeof(sz));
                json_t *g = json_object_get(m, "gbps");
                char gb[TEXT_CELL_MAX] = "-";
                if (json_is_number(g))
                        snprintf(gb, sizeof(gb), "%.2f", json_number_value(g));
                json_t *ver = json_object_get(m, "verified");
                fprintf(f, "  %-42s %10s %9s %10.4f %10.4f %10.4f %6.2f %s\n", str(m, "name", "?"),
                        sz, gb, num(st, "median_ms"), num(st, "min_ms"), num(st, "max_ms"),
                        num(st, "cv") * 100,
                        json_is_true(ver)    ? "yes"
                        : json_is_false(ver) ? "NO"
                                             : "-");
        }
}

/* 262144 -> "262,144" */
static void thousands(json_int_t v, char *buf, size_t len)
{
        char digits[TEXT_CELL_MAX];
        size_t n = (size_t)snprintf(digits, sizeof(digits), "%lld", (long long)(v < 0 ? -v : v));
        size_t at = 0;
        if (v < 0 && at + 1 < len)
                buf[at++] = '-';
        for (size_t i = 0; i < n && at + 1 < len; i++) {
                if (i > 0 && (n - i) % 3 == 0 && at + 2 < len)
                        buf[at++] = ',';
                buf[at++] = digits[i];
        }
        buf[at] = '\0';
}

static json_int_t integer(const json_t *o, const char *k)
{
        json_t *v = json_object_get(o, k);
        return json_is_integer(v) ? json_integer_value(v) : 0;
}

/* The on-demand pass as the kernel's own clock saw it (issue 26): how long it waited, and how
 * the pages came. */
static void render_arrival(FILE *f, const char *name, const json_t *a, const char *fake)
{
        char burst[TEXT_CELL_MAX];

        if (!json_is_object(a))
                return;
        if (!json_is_true(json_object_get(a, "available"))) {
                fprintf(f, "  arrival %s: %s\n", name, str(a, "why", "unavailable"));
                return;
        }
        size_format_approx((uint64_t)num(a, "mean_burst_bytes"), burst, sizeof(burst));
        fprintf(f,
                "  arrival %s: the kernel waited for pages %.0f%% of its time; they arrived in "
                "%lld bursts of about %s, at %.1f GB/s while they moved, against %.0f for a "
                "pinned copy (the kernel's clock)%s.\n",
                name, 100.0 * num(a, "waited_share"), (long long)integer(a, "bursts"), burst,
                num(a, "rate_gbps"), num(a, "pinned_h2d_gbps"), fake);
}

/* The fault handling's share of what on-demand costs over prefetching (issue 26). */
static void render_fault_cost(FILE *f, const char *name, const json_t *c, const char *fake)
{
        if (!json_is_object(c))
                return;
        fprintf(f,
                "  fault cost %s: %lld fault batches (%s) at %.1f us a fault come to about "
                "%.1f ms",
                name, (long long)integer(c, "batches"), str(c, "batches_from", "?"),
                num(c, "fault_single_us"), num(c, "estimate_ms"));
        if (json_is_number(json_object_get(c, "explained_share")))
                fprintf(f, ", %.0f%% of the %.1f ms on-demand takes over prefetch + kernel",
                        100.0 * num(c, "explained_share"), num(c, "gap_ms"));
        fprintf(f, "%s.\n", fake);
}

/* The explain pass (issue 17) in one sentence per measurement: who faulted how often, what
 * moved in what pieces, and whether the driver thrashed or throttled. */
static void render_explain(FILE *f, const char *name, const json_t *x)
{
        char a[TEXT_CELL_MAX], b[TEXT_CELL_MAX], c[TEXT_CELL_MAX], d[TEXT_CELL_MAX];

        if (!json_is_true(json_object_get(x, "available"))) {
                fprintf(f, "  explain %s: %s\n", name,
                        str(x, "why", "explanation unavailable: unknown"));
                return;
        }
        fprintf(f, "  explain %s:", name);
        json_int_t faults = integer(x, "gpu_page_faults"), cpu = integer(x, "cpu_page_faults");
        const char *sep = " ";
        if (faults > 0) {
                thousands(faults, a, sizeof(a));
                fprintf(f, "%sthe kernel faulted %s times", sep, a);
                sep = "; ";
        } else {
                fprintf(f, "%sno GPU page faults", sep);
                sep = "; ";
        }
        if (cpu > 0) {
                thousands(cpu, a, sizeof(a));
                fprintf(f, "%sthe CPU faulted %s times", sep, a);
        }
        static const char *const dirs[][3] = {
            {"htod", "to the GPU", "mean_migration_htod_bytes"},
            {"dtoh", "to the host", "mean_migration_dtoh_bytes"},
        };
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                char kb[TEXT_CELL_MAX], kn[TEXT_CELL_MAX];
                snprintf(kb, sizeof(kb), "bytes_%s", dirs[i][0]);
                snprintf(kn, sizeof(kn), "migrations_%s", dirs[i][0]);
                json_int_t bytes = integer(x, kb), n = integer(x, kn);
                if (bytes <= 0)
                        continue;
                size_format_approx((uint64_t)bytes, b, sizeof(b));
                size_format_approx((uint64_t)num(x, dirs[i][2]), c, sizeof(c));
                thousands(n, d, sizeof(d));
                fprintf(f, ", migrating %s %s in %s pieces of %s on average", b, dirs[i][1], d, c);
        }
        if (integer(x, "bytes_htod") <= 0 && integer(x, "bytes_dtoh") <= 0)
                fprintf(f, ", migrating nothing");
        json_int_t thr = integer(x, "thrashing_events"), thl = integer(x, "throttling_events");
        json_int_t rm = integer(x, "remote_map_events");
        if (thr || thl) {
                thousands(thr, a, sizeof(a));
                thousands(thl, b, sizeof(b));
                fprintf(f, "; the driver saw %s thrashing events and throttled %s times", a, b);
        } else
                fprintf(f, "; no thrashing or throttling");
        if (rm) {
                thousands(rm, a, sizeof(a));
                fprintf(f, "; %s regions mapped remotely instead of migrated", a);
        }
        /* Counts short of the bytes the pass had to move are a lower bound: say so. */
        if (json_is_false(json_object_get(x, "complete"))) {
                size_format_approx((uint64_t)(integer(x, "bytes_htod") + integer(x, "bytes_dtoh")),
                                   a, sizeof(a));
                size_format_approx((uint64_t)(integer(x, "expected_bytes_htod") +
                                              integer(x, "expected_bytes_dtoh")),
                                   b, sizeof(b));
                fprintf(f,
                        " (incomplete: CUPTI reported %s of the %s that moved, so these are "
                        "lower bounds)",
                        a, b);
        }
        json_int_t pieces = integer(x, "pieces");
        if (pieces > 1) {
                size_format_approx((uint64_t)integer(x, "piece_bytes"), a, sizeof(a));
                fprintf(f, " (CUPTI, counted in %lld pieces of %s)", (long long)pieces, a);
        } else if (json_is_object(json_object_get(x, "arrival"))) {
                fprintf(f, " (CUPTI)"); /* beside the kernel clock's view, say whose count */
        }
        const char *fake =
            json_is_true(json_object_get(x, "fake")) ? " (fake device: modelled)" : "";
        fprintf(f, "%s.\n", fake);
        render_arrival(f, name, json_object_get(x, "arrival"), fake);
        render_fault_cost(f, name, json_object_get(x, "fault_cost"), fake);
}

static void render_explains(FILE *f, const json_t *result)
{
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(result, "measurements"), i, m)
        {
                const json_t *x = json_object_get(m, "explain");
                if (json_is_object(x))
                        render_explain(f, str(m, "name", "?"), x);
        }
}

static void render_um_summary(FILE *f, const json_t *s)
{
        size_t i;
        json_t *m;

        fprintf(f, "\n  %-42s %9s %10s %10s\n", "mode (same bytes, processed once)", "GB/s",
                "median ms", "x pinned");
        json_array_foreach(json_object_get(s, "modes"), i, m)
        {
                json_t *r = json_object_get(m, "ratio_to_pinned");
                char ratio[TEXT_CELL_MAX] = "-";
                if (json_is_number(r))
                        snprintf(ratio, sizeof(ratio), "%.2fx", json_number_value(r));
                fprintf(f, "  %-42s %9.2f %10.3f %10s%s\n", str(m, "mode", "?"), num(m, "gbps"),
                        num(m, "median_ms"), ratio,
                        json_is_true(json_object_get(m, "to_host")) ? "  (to host)" : "");
        }
        fprintf(f, "\n  %s\n", str(s, "conclusion", ""));
        if (json_is_string(json_object_get(s, "overlap_note")))
                fprintf(f, "  overlap: %s\n", str(s, "overlap_note", ""));
}

static void render_sweep_summary(FILE *f, const json_t *s)
{
        size_t i;
        json_t *c;

        fprintf(f, "\n  %-24s %10s %18s\n", "mode", "peak GB/s", "90% of peak from");
        json_array_foreach(json_object_get(s, "curves"), i, c)
        {
                char sz[TEXT_CELL_MAX] = "-";
                json_t *at = json_object_get(c, "size_at_90pct_peak");
                if (json_is_integer(at))
                        size_format_approx((uint64_t)json_integer_value(at), sz, sizeof(sz));
                fprintf(f, "  %-24s %10.2f %18s\n", str(c, "mode", "?"), num(c, "peak_gbps"), sz);
        }
}

/* pipeline (issue 21): one step's strategies against the limit and against serial; where the
 * host wrote each batch (issue 60), its write alone and each strategy's write; the managed
 * prefetch alone where one ran. */
static void render_pipeline_point(FILE *f, const json_t *s)
{
        size_t i;
        json_t *x;
        bool written = json_is_number(json_object_get(s, "host_write_ms"));

        fprintf(f,
                "\n  intensity %lld FMAs a float: copy alone %.3f ms, kernel alone %.3f ms, limit "
                "%.3f ms (%s-bound)\n",
                (long long)integer(s, "intensity"), num(s, "copy_ms"), num(s, "kernel_ms"),
                num(s, "limit_ms"), str(s, "bound", "?"));
        if (written)
                fprintf(f,
                        "  the host writes each batch: %.3f ms into pinned memory alone; "
                        "\"write ms\" is its write in each strategy's memory\n",
                        num(s, "host_write_ms"));
        /* What bounds every managed strategy (issue 60), where one prefetched. */
        if (json_is_number(json_object_get(s, "prefetch_alone_ms")))
                fprintf(f, "  managed prefetch alone, no kernel: %.3f ms (%.2fx the limit)\n",
                        num(s, "prefetch_alone_ms"),
                        num(s, "limit_ms") > 0 ? num(s, "prefetch_alone_ms") / num(s, "limit_ms")
                                               : 0.0);
        fprintf(f, "  %-26s %10s %8s %10s %11s %11s%s\n", "strategy", "step ms", "x limit",
                "vs serial", "first ms", "steady ms", written ? "    write ms" : "");
        json_array_foreach(json_object_get(s, "strategies"), i, x)
        {
                char vs[TEXT_CELL_MAX] = "-", steady[TEXT_CELL_MAX] = "-";
                json_t *v = json_object_get(x, "speedup_vs_serial");
                if (json_is_number(v))
                        snprintf(vs, sizeof(vs), "%.2fx", json_number_value(v));
                v = json_object_get(x, "steady_step_ms");
                if (json_is_number(v))
                        snprintf(steady, sizeof(steady), "%.3f", json_number_value(v));
                char write[TEXT_CELL_MAX] = "";
                if (written)
                        snprintf(write, sizeof(write), " %11.3f", num(x, "host_write_ms"));
                fprintf(f, "  %-26s %10.3f %7.2fx %10s %11.3f %11s%s%s\n", str(x, "strategy", "?"),
                        num(x, "median_ms"), num(x, "ratio_to_limit"), vs, num(x, "first_step_ms"),
                        steady, write,
                        json_is_true(json_object_get(x, "first_step_differs")) ? "  first differs"
                                                                               : "");
        }
        if (json_is_string(json_object_get(s, "note")))
                fprintf(f, "  note: %s\n", str(s, "note", ""));
}

static void render_pipeline_summary(FILE *f, const json_t *s, bool balanced)
{
        render_pipeline_point(f, s);
        if (balanced)
                fprintf(f,
                        "  (intensity balanced: chosen so the kernel takes as long as the copy)\n");
        fprintf(f, "\n  %s\n", str(s, "conclusion", ""));
}

/* pipeline_sweep: each strategy's step time over the limit at every intensity, where it comes
 * within 10%, the touched fractions, the sentence. */
static void render_pipeline_sweep(FILE *f, const json_t *s)
{
        const json_t *lim = json_object_get(s, "limit"), *t = json_object_get(s, "touched");
        size_t i, k;
        json_t *c, *p;

        fprintf(f, "\n  step time / limit by intensity (FMAs a float; balanced: %lld)\n  %-26s",
                (long long)integer(s, "balanced_intensity"), "strategy");
        json_array_foreach(lim, k, p)
        {
                fprintf(f, " %7lld", (long long)integer(p, "intensity"));
        }
        fprintf(f, " %10s\n  %-26s", "within 10%", "limit ms");
        json_array_foreach(lim, k, p)
        {
                fprintf(f, " %7.2f", num(p, "limit_ms"));
        }
        fprintf(f, "\n");
        json_array_foreach(json_object_get(s, "curves"), i, c)
        {
                const json_t *w = json_object_get(c, "within_10pct_from");
                char within[TEXT_CELL_MAX];
                fprintf(f, "  %-26s", str(c, "strategy", "?"));
                json_array_foreach(lim, k, p)
                {
                        const json_t *pt = NULL, *q;
                        size_t n;
                        json_array_foreach(json_object_get(c, "points"), n, q)
                        {
                                if (integer(q, "intensity") == integer(p, "intensity"))
                                        pt = q;
                        }
                        if (pt)
                                fprintf(f, " %6.2fx", num(pt, "ratio_to_limit"));
                        else
                                fprintf(f, " %7s", "-");
                }
                if (json_is_integer(w))
                        snprintf(within, sizeof(within), "%lld", (long long)json_integer_value(w));
                else
                        snprintf(within, sizeof(within), "%s",
                                 json_is_string(w) ? json_string_value(w) : "-");
                fprintf(f, " %10s\n", within);
        }
        if (json_is_object(t)) {
                fprintf(f, "\n  %-12s %9s %13s %13s %11s\n", "touched", "fraction", "explicit ms",
                        "on demand ms", "gather ms");
                json_array_foreach(json_object_get(t, "points"), i, p)
                {
                        char sz[TEXT_CELL_MAX], ga[TEXT_CELL_MAX] = "-";
                        size_format_approx((uint64_t)num(p, "touched_bytes"), sz, sizeof(sz));
                        if (json_is_number(json_object_get(p, "gather_ms")))
                                snprintf(ga, sizeof(ga), "%.3f", num(p, "gather_ms"));
                        fprintf(f, "  %-12s %8.3g%% %13.3f %13.3f %11s\n", sz,
                                100 * num(p, "fraction"), num(p, "explicit_ms"),
                                num(p, "on_demand_ms"), ga);
                }
        }
        fprintf(f, "\n  %s\n", str(s, "conclusion", ""));
}

/* nvbandwidth's layout: one matrix per method and direction, rows the source GPU, columns the
 * destination, N/A on the diagonal. */
static void render_matrix(FILE *f, const char *title, const json_t *rows, bool numbers)
{
        size_t n = json_array_size(rows), r, c;
        json_t *row, *v;

        fprintf(f, "\n  %s\n  %-8s", title, "src\\dst");
        for (c = 0; c < n; c++)
                fprintf(f, " %9zu", c);
        fputc('\n', f);
        json_array_foreach(rows, r, row)
        {
                fprintf(f, "  %-8zu", r);
                json_array_foreach(row, c, v)
                {
                        if (numbers && json_is_number(v))
                                fprintf(f, " %9.2f", json_number_value(v));
                        else if (json_is_string(v))
                                fprintf(f, " %9s", json_string_value(v));
                        else
                                fprintf(f, " %9s", "N/A");
                }
                fputc('\n', f);
        }
}

static void render_topology_summary(FILE *f, const json_t *s)
{
        size_t i;
        json_t *m, *g;

        render_matrix(f, "link (as the driver reports it)", json_object_get(s, "links"), false);
        json_array_foreach(json_object_get(s, "matrices"), i, m)
            render_matrix(f, str(m, "title", "GB/s"), json_object_get(m, "gbps"), true);
        render_matrix(f, "expected one direction, GB/s (by link type)",
                      json_object_get(s, "expected_gbps"), true);
        if (json_array_size(json_object_get(s, "d2d_gbps")) > 0) {
                bool any = false;
                json_array_foreach(json_object_get(s, "d2d_gbps"), i, g) any |= json_is_number(g);
                if (any) {
                        fprintf(f, "\n  within each GPU (d2d copy engine, read+write GB/s):");
                        json_array_foreach(json_object_get(s, "d2d_gbps"), i, g)
                        {
                                if (json_is_number(g))
                                        fprintf(f, "  %zu: %.1f", i, json_number_value(g));
                        }
                        fputc('\n', f);
                }
        }
        fprintf(f, "\n  %s\n", str(s, "conclusion", ""));
}

static void render_verdict(FILE *f, const json_t *v)
{
        size_t i;
        json_t *c;

        fprintf(f, "\n  health: %s\n", str(v, "verdict", "?"));
        json_array_foreach(json_object_get(v, "checks"), i, c)
            fprintf(f, "    %-5s %s\n", str(c, "verdict", "?"), str(c, "reason", ""));
}

char *text_render_job(const json_t *job)
{
        char *buf = NULL;
        size_t len = 0, i;
        json_t *p;
        FILE *f = open_memstream(&buf, &len);

        if (!f)
                return NULL;
        fprintf(f, "job %s  %s  %s%s\n", str(job, "id", "?"), str(job, "benchmark", "?"),
                str(job, "state", "?"),
                json_is_true(json_object_get(job, "fake")) ? "  (FAKE devices)" : "");
        fprintf(f, "created %s  started %s  finished %s\n", str(job, "created", "-"),
                str(job, "started", "-"), str(job, "finished", "-"));
        json_array_foreach(json_object_get(job, "parts"), i, p)
        {
                const json_t *res = json_object_get(p, "result");
                const json_t *dev = json_object_get(p, "device");
                char devname[TEXT_CELL_MAX];
                if (json_is_string(dev)) /* the node worker: every GPU */
                        snprintf(devname, sizeof(devname), "%s", json_string_value(dev));
                else
                        snprintf(devname, sizeof(devname), "%lld",
                                 (long long)json_integer_value(dev));
                fprintf(f, "\ndevice %s  %s  %s%s\n", devname, str(p, "uuid", "?"),
                        str(p, "state", "?"),
                        json_is_true(json_object_get(p, "fake")) ? "  (fake)" : "");
                if (json_is_string(json_object_get(p, "error")))
                        fprintf(f, "  error: %s\n", str(p, "error", ""));
                if (!json_is_object(res))
                        continue;
                render_measurements(f, res);
                render_explains(f, res);
                text_render_train(f, res);
                const json_t *s = json_object_get(res, "summary");
                const char *bench = str(job, "benchmark", "");
                if (!json_is_object(s))
                        ;
                else if (strcmp(bench, "pipeline") == 0)
                        render_pipeline_summary(
                            f, s,
                            json_is_string(
                                json_object_get(json_object_get(res, "intensity"), "requested")));
                else if (strcmp(bench, "pipeline_sweep") == 0)
                        render_pipeline_sweep(f, s);
                else if (strcmp(bench, "copy_overlap") == 0)
                        fprintf(f, "\n  %s\n", str(s, "conclusion", ""));
                else if (json_object_get(s, "matrices"))
                        render_topology_summary(f, s);
                else if (json_object_get(s, "pairs") || json_object_get(s, "alone_gbps"))
                        fprintf(f, "\n  %s\n", str(s, "conclusion", ""));
                else if (json_object_get(s, "conclusion"))
                        render_um_summary(f, s);
                else if (json_object_get(s, "curves"))
                        render_sweep_summary(f, s);
                if (json_is_object(json_object_get(p, "verdict")))
                        render_verdict(f, json_object_get(p, "verdict"));
                size_t k;
                json_t *n;
                json_array_foreach(json_object_get(res, "notes"), k, n)
                {
                        if (json_is_string(n))
                                fprintf(f, "  note: %s\n", json_string_value(n));
                }
        }
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}
