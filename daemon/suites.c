/* Suite summaries (see suites.h). The conclusion sentence names the modes in words people use,
 * so the dictionary below is the one place a mode gets its human name. */
#include "suites.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonutil.h"
#include "topology.h"
#include "util.h"

static const struct {
        const char *mode, *words;
} mode_words[] = {
    {MEAS_UM_PINNED_COPY_KERNEL, "pinned copies"},
    {MEAS_UM_PAGEABLE_COPY_KERNEL, "pageable copies"},
    {MEAS_UM_OVERLAPPED_COPY_KERNEL, "chunked async copies overlapped with the kernel"},
    {MEAS_UM_ZERO_COPY_KERNEL, "zero-copy (mapped pinned memory)"},
    {MEAS_UM_ON_DEMAND, "on-demand managed memory"},
    {MEAS_UM_PREFETCH, "managed memory with prefetching"},
    {MEAS_UM_READ_MOSTLY, "managed memory advised ReadMostly"},
    {MEAS_UM_PREFERRED_DEVICE, "managed memory preferring the device"},
    {MEAS_UM_PREFERRED_HOST, "managed memory preferring the host"},
    {MEAS_UM_ACCESSED_BY, "managed memory advised AccessedBy"},
    {MEAS_UM_PINNED_COPY_D2H, "pinned copies back to the host"},
    {MEAS_UM_PAGEABLE_COPY_D2H, "pageable copies back to the host"},
    {MEAS_UM_PREFETCH_TO_HOST, "managed memory prefetched back to the host"},
    {MEAS_UM_CPU_ON_DEMAND, "GPU-resident managed pages touched by the CPU"},
};

static const char *words(const char *mode)
{
        for (size_t i = 0; i < ELEMENTSOF(mode_words); i++)
                if (strcmp(mode_words[i].mode, mode) == 0)
                        return mode_words[i].words;
        return mode;
}

static double gbps(const json_t *m)
{
        json_t *g = json_object_get(m, "gbps");
        return json_is_number(g) ? json_number_value(g) : 0;
}

static double median_ms(const json_t *m)
{
        json_t *v = json_object_get(json_object_get(m, "stats"), "median_ms");
        return json_is_number(v) ? json_number_value(v) : 0;
}

/* "6.5x slower" / "1.6x faster" / "as fast" relative to the reference. */
static void relation(double ratio, char *buf, size_t len)
{
        if (ratio <= 0)
                snprintf(buf, len, "not measured");
        else if (ratio < 0.95)
                snprintf(buf, len, "%.1fx slower than", 1.0 / ratio);
        else if (ratio > 1.05)
                snprintf(buf, len, "%.1fx faster than", ratio);
        else
                snprintf(buf, len, "as fast as");
}

static json_t *um_summary(const json_t *result)
{
        const json_t *ms = json_object_get(result, "measurements");
        const json_t *ref = result_measurement(result, UM_REFERENCE_MODE);
        double ref_gbps = gbps(ref);
        json_t *modes = json_array();
        const char *best = NULL;
        double best_gbps = 0;
        size_t i;
        json_t *m;

        json_array_foreach(ms, i, m)
        {
                const char *name = json_string_value(json_object_get(m, "name"));
                if (!name)
                        continue;
                double g = gbps(m);
                const char *dir = json_string_value(json_object_get(m, "direction"));
                bool back = dir ? strcmp(dir, "to_host") == 0
                                : strstr(name, "_d2h") || strstr(name, "to_host") ||
                                      strstr(name, "cpu_on_demand");
                json_array_append_new(
                    modes,
                    json_pack("{s:s, s:s, s:f, s:f, s:o, s:b}", "mode", name, "label", words(name),
                              "gbps", g, "median_ms", median_ms(m), "ratio_to_pinned",
                              ref_gbps > 0 ? json_real(g / ref_gbps) : json_null(), "to_host",
                              back));
                if (!back && g > best_gbps) {
                        best_gbps = g;
                        best = name;
                }
        }

        char sentence[768], rel[64];
        const json_t *od = result_measurement(result, MEAS_UM_ON_DEMAND),
                     *pf = result_measurement(result, MEAS_UM_PREFETCH);
        if (ref_gbps <= 0) {
                snprintf(
                    sentence, sizeof(sentence),
                    "Pinned copy + kernel was not measured, so no mode can be compared with it.");
        } else {
                size_t at = 0;
                if (od) {
                        relation(gbps(od) / ref_gbps, rel, sizeof(rel));
                        at += (size_t)snprintf(sentence + at, sizeof(sentence) - at,
                                               "On this GPU, on-demand managed memory is %s pinned "
                                               "copies (%.1f against %.1f GB/s)",
                                               rel, gbps(od), ref_gbps);
                        if (pf && at < sizeof(sentence))
                                at += (size_t)snprintf(sentence + at, sizeof(sentence) - at,
                                                       "; prefetching recovers %.2fx of pinned",
                                                       gbps(pf) / ref_gbps);
                        if (at < sizeof(sentence))
                                at += (size_t)snprintf(sentence + at, sizeof(sentence) - at, ". ");
                }
                if (best && at < sizeof(sentence))
                        snprintf(sentence + at, sizeof(sentence) - at,
                                 "The fastest way to get the data to the GPU and process it is %s "
                                 "at %.1f GB/s (%.2fx pinned copies).",
                                 words(best), best_gbps, best_gbps / ref_gbps);
        }
        return json_pack("{s:s, s:f, s:s?, s:o, s:s}", "reference", UM_REFERENCE_MODE,
                         "reference_gbps", ref_gbps, "best", best, "modes", modes, "conclusion",
                         sentence);
}

static json_t *sweep_summary(const json_t *result)
{
        const json_t *ms = json_object_get(result, "measurements");
        json_t *curves = json_object();
        size_t i;
        json_t *m;

        json_array_foreach(ms, i, m)
        {
                /* Each point is named "mode@size". */
                const char *full = json_string_value(json_object_get(m, "name"));
                if (!full)
                        continue;
                char name[96];
                snprintf(name, sizeof(name), "%.*s", (int)strcspn(full, "@"), full);
                json_t *c = json_object_get(curves, name);
                if (!c) {
                        c = json_pack("{s:s, s:[], s:f, s:n}", "mode", name, "points", "peak_gbps",
                                      0.0, "size_at_90pct_peak");
                        json_object_set_new(curves, name, c);
                }
                double g = gbps(m);
                json_array_append_new(json_object_get(c, "points"),
                                      json_pack("{s:O, s:f, s:f}", "size",
                                                json_object_get(m, "bytes"), "gbps", g, "median_ms",
                                                median_ms(m)));
                if (g > json_real_value(json_object_get(c, "peak_gbps")))
                        json_object_set_new(c, "peak_gbps", json_real(g));
        }

        json_t *arr = json_array();
        const char *k;
        json_t *c;
        json_object_foreach(curves, k, c)
        {
                double peak = json_real_value(json_object_get(c, "peak_gbps"));
                json_t *best = NULL;
                size_t x;
                json_t *p;
                /* The smallest size at which the mode reaches 90% of its peak. */
                json_array_foreach(json_object_get(c, "points"), x, p)
                {
                        if (json_real_value(json_object_get(p, "gbps")) < 0.9 * peak)
                                continue;
                        if (!best || json_integer_value(json_object_get(p, "size")) <
                                         json_integer_value(best))
                                best = json_object_get(p, "size");
                }
                if (best)
                        json_object_set(c, "size_at_90pct_peak", best);
                json_array_append(arr, c);
        }
        json_decref(curves);
        return json_pack("{s:o}", "curves", arr);
}

json_t *suite_summary(const char *benchmark, const json_t *result)
{
        if (!benchmark || !json_is_array(json_object_get(result, "measurements")))
                return NULL;
        if (strcmp(benchmark, "um_vs_explicit") == 0)
                return um_summary(result);
        if (strcmp(benchmark, "sweep") == 0)
                return sweep_summary(result);
        return topology_summary(benchmark, result);
}
