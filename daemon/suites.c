/* Suite summaries (see suites.h). The conclusion sentence names the modes in words people use,
 * so the dictionary below is the one place a mode gets its human name. */
#include "suites.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonutil.h"
#include "topology.h"
#include "util.h"

/* A summary's conclusion: a few sentences of figures, each bounded by what is left. */
#define SENTENCE_MAX      512
#define SENTENCE_LONG_MAX 768
/* The pipeline summaries' conclusions, which add the host's write and managed memory's goal. */
#define PIPELINE_SENTENCE_MAX 1536
#define SWEEP_SENTENCE_MAX    1792
/* A note on a short kernel, or the words on the buffer touched: one sentence. */
#define NOTE_MAX 400
/* A measurement's name without its point, or with a suffix. */
#define MEAS_NAME_MAX 96
/* A ratio in words (relation(): "2.1x faster"), or a point's suffix ("@i=1024"). */
#define WORD_MAX   64
#define SUFFIX_MAX 32

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

static const char *short_kernel_note(double copy_ms, double kernel_ms, char *buf, size_t len);

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

        char sentence[SENTENCE_LONG_MAX], rel[WORD_MAX];
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
        /* Overlap against copy then kernel means something only where the kernel can hide
         * part of the copy (issue 21): otherwise say so, with both times. */
        const json_t *ov = result_measurement(result, MEAS_UM_OVERLAPPED_COPY_KERNEL);
        char note[NOTE_MAX];
        const char *n =
            ov ? short_kernel_note(json_number_value(json_object_get(ov, "copy_alone_ms")),
                                   json_number_value(json_object_get(ov, "kernel_alone_ms")), note,
                                   sizeof(note))
               : NULL;
        return json_pack("{s:s, s:f, s:s?, s:o, s:s, s:s*}", "reference", UM_REFERENCE_MODE,
                         "reference_gbps", ref_gbps, "best", best, "modes", modes, "conclusion",
                         sentence, "overlap_note", n);
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
                char name[MEAS_NAME_MAX];
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

/* ---- copy_overlap and pipeline (issue 21) ---- */

/* Overlap can hide at most the shorter half of a step. Below this fraction of the copy, the
 * kernel leaves too little to hide for overlap to show, and the result says so instead of
 * ranking the ways against each other. */
#define HIDE_MIN_FRACTION 0.2

static const struct {
        const char *strategy, *words;
} strategy_words[] = {
    {MEAS_PIPE_SERIAL, "pinned copy, then kernel"},
    {MEAS_PIPE_OVERLAPPED, "overlapped pinned copies"},
    {MEAS_PIPE_PAGEABLE, "pageable copy, then kernel"},
    {MEAS_PIPE_ON_DEMAND, "managed memory faulted in on demand"},
    {MEAS_PIPE_PREFETCH, "managed memory prefetched whole"},
    {MEAS_PIPE_PREFETCH_CHUNKED, "managed memory prefetched chunk by chunk"},
    {MEAS_PIPE_ZERO_COPY, "zero-copy (the kernel reads mapped host memory)"},
    {MEAS_PIPE_GATHER, "a gather of the touched pages"},
    {MEAS_PIPE_PREFETCH_BATCH, "managed memory prefetched in one batched call"},
    {MEAS_PIPE_DISCARD_PREFETCH, "managed memory discarded before the host's write, then "
                                 "prefetched chunk by chunk"},
};
static const char *const pipe_order[] = {
    MEAS_PIPE_SERIAL,         MEAS_PIPE_OVERLAPPED,       MEAS_PIPE_PAGEABLE,  MEAS_PIPE_ON_DEMAND,
    MEAS_PIPE_PREFETCH,       MEAS_PIPE_PREFETCH_CHUNKED, MEAS_PIPE_ZERO_COPY, MEAS_PIPE_GATHER,
    MEAS_PIPE_PREFETCH_BATCH, MEAS_PIPE_DISCARD_PREFETCH};

static const char *strategy_label(const char *s)
{
        for (size_t i = 0; i < ELEMENTSOF(strategy_words); i++)
                if (strcmp(strategy_words[i].strategy, s) == 0)
                        return strategy_words[i].words;
        return s;
}

static double num(const json_t *o, const char *key)
{
        json_t *v = json_object_get(o, key);
        return json_is_number(v) ? json_number_value(v) : 0;
}

/* The note for a kernel too short to hide the copy, or NULL (then buf is untouched). */
static const char *short_kernel_note(double copy_ms, double kernel_ms, char *buf, size_t len)
{
        if (copy_ms <= 0 || kernel_ms <= 0 || kernel_ms >= HIDE_MIN_FRACTION * copy_ms)
                return NULL;
        snprintf(buf, len,
                 "the kernel (%.2f ms) is too short to hide the copy (%.2f ms): overlapping can "
                 "save at most %.2f ms, %.0f%% of copy then kernel, so the two ways measure the "
                 "same thing here; a heavier kernel (pipeline) shows what overlap is worth",
                 kernel_ms, copy_ms, kernel_ms, 100 * kernel_ms / (copy_ms + kernel_ms));
        return buf;
}

static json_t *copy_overlap_summary(const json_t *result)
{
        double copy = median_ms(result_measurement(result, MEAS_COPY_ALONE));
        double kern = median_ms(result_measurement(result, MEAS_KERNEL_ALONE));
        double over = median_ms(result_measurement(result, MEAS_OVERLAPPED));
        double ser = median_ms(result_measurement(result, MEAS_SERIAL));
        double limit = copy > kern ? copy : kern;
        char note[NOTE_MAX], sentence[SENTENCE_MAX];
        const char *n = short_kernel_note(copy, kern, note, sizeof(note));

        if (copy <= 0 || over <= 0 || ser <= 0)
                return NULL;
        if (n)
                snprintf(sentence, sizeof(sentence), "Overlapped %.2f ms, serial %.2f ms: %s.",
                         over, ser, n);
        else
                snprintf(sentence, sizeof(sentence),
                         "Overlapped copies take %.2f ms, %.2fx the limit (%.2f ms, the longer of "
                         "the copy and the kernel alone) and %.2fx faster than copy then kernel "
                         "(%.2f ms).",
                         over, over / limit, limit, ser / over, ser);
        return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:s*, s:s}", "copy_ms", copy,
                         "kernel_ms", kern, "limit_ms", limit, "overlapped_ms", over, "serial_ms",
                         ser, "ratio_to_limit", over / limit, "speedup_vs_serial", ser / over,
                         "note", n, "conclusion", sentence);
}

/* The measurement of strategy s at point suffix ("" for a pipeline job, "@i=64" in a sweep). */
static const json_t *at_point(const json_t *result, const char *s, const char *suffix)
{
        char name[MEAS_NAME_MAX];
        snprintf(name, sizeof(name), "%s%s", s, suffix);
        return result_measurement(result, name);
}

/* What bounds a step: the copy, the kernel, or (batch host_written) the host's write. */
static const char *pipe_bound(double copy, double kern, double host)
{
        if (host > copy && host > kern)
                return "host_write";
        return copy >= kern ? "copy" : "kernel";
}

/* One pipeline run's summary: the limit and each strategy against it and against serial. Where
 * the host writes each batch (a host_write measurement), its write alone is a third half of the
 * limit, and each strategy says what its own write cost. Where a strategy prefetched managed
 * memory, the prefetch alone: what bounds them all. */
static json_t *pipe_point_summary(const json_t *result, const char *suffix, json_int_t intensity)
{
        double copy = median_ms(at_point(result, MEAS_COPY_ALONE, suffix));
        double kern = median_ms(at_point(result, MEAS_KERNEL_ALONE, suffix));
        double host = median_ms(at_point(result, MEAS_HOST_WRITE, suffix));
        double serial = median_ms(at_point(result, MEAS_PIPE_SERIAL, suffix));
        double pf = median_ms(at_point(result, MEAS_PREFETCH_ALONE, suffix));
        double limit = copy > kern ? copy : kern, best_ms = 0;
        json_t *list = json_array();
        const char *best = NULL;
        char note[NOTE_MAX];
        const char *n = short_kernel_note(copy, kern, note, sizeof(note));

        if (host > limit)
                limit = host;
        if (limit <= 0 || !list) {
                json_decref(list);
                return NULL;
        }
        for (size_t i = 0; i < ELEMENTSOF(pipe_order); i++) {
                const json_t *m = at_point(result, pipe_order[i], suffix);
                double ms = median_ms(m), first = num(m, "first_step_ms");
                json_t *steady = json_object_get(m, "steady_step_ms");
                if (!m || ms <= 0)
                        continue;
                /* Reported apart only where the first step costs 10% more than the rest. */
                bool differs = json_is_number(steady) && first > 1.1 * json_number_value(steady);
                json_array_append_new(
                    list,
                    json_pack("{s:s, s:s, s:f, s:f, s:f, s:o, s:f, s:O?, s:b, s:O?, s:O*}",
                              "strategy", pipe_order[i], "label", strategy_label(pipe_order[i]),
                              "median_ms", ms, "cv", num(json_object_get(m, "stats"), "cv"),
                              "ratio_to_limit", ms / limit, "speedup_vs_serial",
                              serial > 0 ? json_real(serial / ms) : json_null(), "first_step_ms",
                              first, "steady_step_ms", steady, "first_step_differs", differs,
                              "host_write_ms", json_object_get(m, "host_write_ms"), "chunk_issue",
                              json_object_get(m, "chunk_issue")));
                if (!best || ms < best_ms) {
                        best = pipe_order[i];
                        best_ms = ms;
                }
        }
        return json_pack("{s:I, s:f, s:f, s:o, s:f, s:s, s:s?, s:f, s:o, s:o, s:s*}", "intensity",
                         intensity, "copy_ms", copy, "kernel_ms", kern, "host_write_ms",
                         host > 0 ? json_real(host) : json_null(), "limit_ms", limit, "bound",
                         pipe_bound(copy, kern, host), "best", best, "best_ms", best_ms,
                         "prefetch_alone_ms", pf > 0 ? json_real(pf) : json_null(), "strategies",
                         list, "note", n);
}

static const json_t *strategy_in(const json_t *point, const char *s)
{
        return json_array_find(json_object_get(point, "strategies"), "strategy", s);
}

/* batch host_written: the clause on the host's write at one point (the write into pinned memory
 * against the limit, into managed memory with its CPU faults, and after a discard), appended at
 * buf + *at; nothing where the host did not write. */
static void host_write_words(const json_t *point, char *buf, size_t len, size_t *at)
{
        double host = num(point, "host_write_ms"), limit = num(point, "limit_ms");
        const json_t *pc = strategy_in(point, MEAS_PIPE_PREFETCH_CHUNKED),
                     *dp = strategy_in(point, MEAS_PIPE_DISCARD_PREFETCH);
        if (host <= 0 || *at >= len)
                return;
        *at += (size_t)snprintf(
            buf + *at, len - *at, " The host writes each batch into pinned memory in %.2f ms%s",
            host,
            streq_ptr(json_string_value(json_object_get(point, "bound")), "host_write")
                ? ", longer than the copy and the kernel: it is the limit"
                : ", within the limit");
        if (pc && num(pc, "host_write_ms") > 0 && *at < len)
                *at += (size_t)snprintf(buf + *at, len - *at,
                                        "; into managed memory %.2f ms, its CPU faults included "
                                        "(%.2fx the limit a step)",
                                        num(pc, "host_write_ms"), num(pc, "host_write_ms") / limit);
        if (dp && num(dp, "host_write_ms") > 0 && *at < len)
                *at += (size_t)snprintf(buf + *at, len - *at,
                                        "; %.2f ms after a discard (the step %.2fx the limit)",
                                        num(dp, "host_write_ms"), num(dp, "ratio_to_limit"));
        if (*at < len)
                *at += (size_t)snprintf(buf + *at, len - *at, ".");
}

/* Issue 60's goal: managed memory prefetched in chunks within this factor of the limit. Past
 * it the sentence says what stops it. */
#define MANAGED_GOAL 1.10

/* The best managed chunked strategy at a point (prefetched chunk by chunk, or after a discard),
 * or NULL. */
static const json_t *best_managed_chunked(const json_t *point)
{
        const json_t *pc = strategy_in(point, MEAS_PIPE_PREFETCH_CHUNKED),
                     *dp = strategy_in(point, MEAS_PIPE_DISCARD_PREFETCH);
        if (!pc || (dp && num(dp, "ratio_to_limit") < num(pc, "ratio_to_limit")))
                return dp;
        return pc;
}

/* What stops the best managed chunked strategy at a point short of MANAGED_GOAL, from the same
 * run's measurements, appended at buf + *at; nothing where it is within the goal. In order: the
 * host's write into managed memory (host_written: the CPU faults the pages back), the prefetch
 * alone (no managed strategy can move the batch faster than it), and what the chunks add
 * beyond it (copy_stream: every prefetch in series on one stream). */
static void managed_goal_words(const json_t *result, const char *suffix, const json_t *point,
                               char *buf, size_t len, size_t *at)
{
        const json_t *b = best_managed_chunked(point);
        const json_t *pa = at_point(result, MEAS_PREFETCH_ALONE, suffix),
                     *ca = at_point(result, MEAS_COPY_ALONE, suffix);
        double limit = num(point, "limit_ms"), x = num(b, "ratio_to_limit");
        double pf = num(point, "prefetch_alone_ms"), hw = num(b, "host_write_ms");
        bool one_stream =
            streq_ptr(json_string_value(json_object_get(b, "chunk_issue")), PIPE_ISSUE_COPY_STREAM);

        if (!b || limit <= 0 || x <= MANAGED_GOAL || *at >= len)
                return;
        *at += (size_t)snprintf(buf + *at, len - *at,
                                " Managed memory prefetched in chunks (%s) takes %.2fx the limit, "
                                "over the %.2fx goal: ",
                                json_string_value(json_object_get(b, "strategy")), x, MANAGED_GOAL);
        if (*at >= len)
                return;
        if (hw > MANAGED_GOAL * limit)
                *at += (size_t)snprintf(buf + *at, len - *at,
                                        "the host's write into managed memory takes %.2f ms "
                                        "(%.2fx the limit, its CPU faults included), so the "
                                        "write, not the prefetch, stops it.",
                                        hw, hw / limit);
        else if (pf <= 0)
                *at += (size_t)snprintf(buf + *at, len - *at,
                                        "this run has no %s to say what stops it.",
                                        MEAS_PREFETCH_ALONE);
        else
                *at += (size_t)snprintf(
                    buf + *at, len - *at,
                    "managed prefetch alone, no kernel, moves the batch in %.2f ms (%.1f GB/s "
                    "against the pinned copy's %.1f GB/s), %.2fx the limit, %s%s",
                    pf, num(pa, "bytes") / pf / 1e6, num(ca, "bytes") / num(point, "copy_ms") / 1e6,
                    pf / limit,
                    pf / limit > MANAGED_GOAL
                        ? "and no managed strategy moves it faster: the bound is the prefetch "
                          "rate"
                        : "within the goal: what the chunks add stops it",
                    one_stream ? "; issued copy_stream, every prefetch also waits its turn on one "
                                 "stream (chunk_issue auto or round_robin overlaps them)."
                    : pf / limit > MANAGED_GOAL ? ", not the order umd issues them in."
                                                : ".");
}

static json_t *pipeline_summary(const json_t *result)
{
        json_int_t k =
            json_integer_value(json_object_get(json_object_get(result, "intensity"), "chosen"));
        json_t *s = pipe_point_summary(result, "", k);
        char sentence[PIPELINE_SENTENCE_MAX];
        size_t at = 0;

        if (!s)
                return NULL;
        const json_t *ov = strategy_in(s, MEAS_PIPE_OVERLAPPED),
                     *od = strategy_in(s, MEAS_PIPE_ON_DEMAND),
                     *pc = strategy_in(s, MEAS_PIPE_PREFETCH_CHUNKED);
        at += (size_t)snprintf(sentence, sizeof(sentence),
                               "At %lld FMAs a float the copy takes %.2f ms and the kernel %.2f ms "
                               "(the limit: %.2f ms).",
                               (long long)k, num(s, "copy_ms"), num(s, "kernel_ms"),
                               num(s, "limit_ms"));
        if (ov && at < sizeof(sentence))
                at += (size_t)snprintf(sentence + at, sizeof(sentence) - at,
                                       " Overlapped pinned copies take %.2fx the limit",
                                       num(ov, "ratio_to_limit"));
        /* Against serial only where serial ran. */
        if (ov && num(ov, "speedup_vs_serial") > 0 && at < sizeof(sentence))
                at += (size_t)snprintf(sentence + at, sizeof(sentence) - at,
                                       ", %.2fx faster than copy then kernel",
                                       num(ov, "speedup_vs_serial"));
        if (ov && at < sizeof(sentence))
                at += (size_t)snprintf(sentence + at, sizeof(sentence) - at, ".");
        if (od && at < sizeof(sentence))
                at += (size_t)snprintf(sentence + at, sizeof(sentence) - at,
                                       " Managed memory faulted in on demand takes %.2fx.",
                                       num(od, "ratio_to_limit"));
        if (pc && at < sizeof(sentence))
                at += (size_t)snprintf(sentence + at, sizeof(sentence) - at,
                                       " Prefetched chunk by chunk: %.2fx.",
                                       num(pc, "ratio_to_limit"));
        host_write_words(s, sentence, sizeof(sentence), &at);
        managed_goal_words(result, "", s, sentence, sizeof(sentence), &at);
        if (json_is_string(json_object_get(s, "note")) && at < sizeof(sentence))
                snprintf(sentence + at, sizeof(sentence) - at, " Note: %s.",
                         json_string_value(json_object_get(s, "note")));
        json_object_set_new(s, "conclusion", json_string(sentence));
        return s;
}

/* The sweep's points, in the order measured: each distinct "@..." suffix of a kind. */
static json_t *sweep_points(const json_t *result, const char *kind)
{
        json_t *pts = json_array(), *seen = json_object();
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(result, "measurements"), i, m)
        {
                const char *name = json_string_value(json_object_get(m, "name"));
                const char *at = name ? strchr(name, '@') : NULL;
                if (!at || !streq_ptr(json_string_value(json_object_get(m, "sweep")), kind) ||
                    json_object_get(seen, at))
                        continue;
                json_object_set_new(seen, at, json_true());
                json_array_append_new(pts, json_string(at));
        }
        json_decref(seen);
        return pts;
}

static int cmp_intensity(const void *a, const void *b)
{
        json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "intensity"));
        json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "intensity"));
        return x < y ? -1 : x > y;
}

/* The touched part of the sweep: where on-demand managed memory beats copying all of it. */
static json_t *touched_summary(const json_t *result, uint64_t size, char *words, size_t len)
{
        json_t *suffixes = sweep_points(result, "touched"), *pts = json_array(), *v;
        double wins_upto = -1, loses_from = -1, d_win = 0, d_lose = 0;
        size_t i;

        words[0] = '\0';
        json_array_foreach(suffixes, i, v)
        {
                const char *suf = json_string_value(v);
                const json_t *ser = at_point(result, MEAS_PIPE_SERIAL, suf),
                             *od = at_point(result, MEAS_PIPE_ON_DEMAND, suf),
                             *ga = at_point(result, MEAS_PIPE_GATHER, suf);
                double t = num(ser ? ser : od, "touched_bytes");
                double f = size ? t / (double)size : 0;
                if (!ser || !od)
                        continue;
                json_array_append_new(
                    pts, json_pack("{s:f, s:f, s:f, s:f, s:o}", "touched_bytes", t, "fraction", f,
                                   "explicit_ms", median_ms(ser), "on_demand_ms", median_ms(od),
                                   "gather_ms", ga ? json_real(median_ms(ga)) : json_null()));
                double dt = median_ms(od) - median_ms(ser);
                if (dt < 0) {
                        if (loses_from < 0 && f > wins_upto) {
                                wins_upto = f;
                                d_win = dt;
                        }
                } else if (loses_from < 0) {
                        loses_from = f;
                        d_lose = dt;
                }
        }
        json_decref(suffixes);
        if (json_array_size(pts) == 0) {
                json_decref(pts);
                return NULL;
        }
        if (wins_upto < 0)
                snprintf(words, len,
                         "Managed memory faulted in on demand never beat copying the whole batch, "
                         "even at %.2g%% of it touched.",
                         100 * num(json_array_get(pts, 0), "fraction"));
        else if (loses_from < 0)
                snprintf(words, len,
                         "Managed memory faulted in on demand beat copying the whole batch at "
                         "every touched fraction measured, up to %.3g%%.",
                         100 * wins_upto);
        /* On-demand time grows with the pages touched, the whole copy does not: between the
         * last point it won and the first it lost, the crossing is where the difference is 0. */
        double below = -1;
        if (wins_upto >= 0 && loses_from >= 0)
                below = wins_upto + (loses_from - wins_upto) * -d_win / (d_lose - d_win);
        if (below >= 0)
                snprintf(words, len,
                         "UM wins below about %.2g%% of the buffer touched on this GPU (on-demand "
                         "faults beat copying all of it at %.3g%% and lose at %.3g%%).",
                         100 * below, 100 * wins_upto, 100 * loses_from);
        return json_pack("{s:o, s:o, s:o, s:o}", "points", pts, "um_wins_up_to_fraction",
                         wins_upto < 0 ? json_null() : json_real(wins_upto),
                         "um_loses_from_fraction",
                         loses_from < 0 ? json_null() : json_real(loses_from),
                         "um_wins_below_fraction", below < 0 ? json_null() : json_real(below));
}

/* Each strategy's curve over the sorted points (n, in order of intensity): its time against
 * the limit at each intensity, and the first intensity where it comes within 10% of the limit. */
static void pipe_curves(json_t *curves, json_t *const *sorted, size_t n)
{
        for (size_t s = 0; s < ELEMENTSOF(pipe_order); s++) {
                json_t *pts = json_array(), *within = NULL;
                for (size_t i = 0; i < n; i++) {
                        const json_t *x = strategy_in(sorted[i], pipe_order[s]);
                        if (!x)
                                continue;
                        json_array_append_new(
                            pts,
                            json_pack("{s:O, s:f, s:f, s:f}", "intensity",
                                      json_object_get(sorted[i], "intensity"), "median_ms",
                                      num(x, "median_ms"), "limit_ms", num(sorted[i], "limit_ms"),
                                      "ratio_to_limit", num(x, "ratio_to_limit")));
                        if (!within && num(x, "ratio_to_limit") <= 1.10)
                                within = json_incref(json_object_get(sorted[i], "intensity"));
                }
                if (json_array_size(pts) == 0) {
                        json_decref(pts);
                        continue;
                }
                json_array_append_new(
                    curves, json_pack("{s:s, s:s, s:o, s:o}", "strategy", pipe_order[s], "label",
                                      strategy_label(pipe_order[s]), "points", pts,
                                      "within_10pct_from", within ? within : json_string("never")));
        }
}

static json_t *pipeline_sweep_summary(const json_t *result)
{
        json_t *suffixes = sweep_points(result, "intensity"), *points = json_array(), *v;
        json_int_t kb =
            json_integer_value(json_object_get(json_object_get(result, "balanced"), "chosen"));
        const json_t *first = json_array_get(json_object_get(result, "measurements"), 0);
        uint64_t size = (uint64_t)json_integer_value(json_object_get(first, "bytes"));
        size_t i;

        json_array_foreach(suffixes, i, v)
        {
                const char *suf = json_string_value(v);
                json_int_t k = json_integer_value(
                    json_object_get(at_point(result, MEAS_COPY_ALONE, suf), "intensity"));
                json_t *p = pipe_point_summary(result, suf, k);
                if (p)
                        json_array_append_new(points, p);
        }
        json_decref(suffixes);
        if (json_array_size(points) == 0) {
                json_decref(points);
                return NULL;
        }
        /* Curves in order of intensity, whatever order the points ran in. */
        size_t n = json_array_size(points);
        json_t **sorted = calloc(n, sizeof(*sorted));
        if (!sorted) {
                json_decref(points);
                return NULL;
        }
        for (i = 0; i < n; i++)
                sorted[i] = json_array_get(points, i);
        qsort(sorted, n, sizeof(*sorted), cmp_intensity);

        json_t *curves = json_array(), *limit = json_array();
        const json_t *bal = NULL;
        double od_extra = 0;
        size_t od_n = 0;
        for (i = 0; i < n; i++) {
                json_array_append_new(limit,
                                      json_pack("{s:O, s:O}", "intensity",
                                                json_object_get(sorted[i], "intensity"), "limit_ms",
                                                json_object_get(sorted[i], "limit_ms")));
                if (json_integer_value(json_object_get(sorted[i], "intensity")) == kb)
                        bal = sorted[i];
                const json_t *od = strategy_in(sorted[i], MEAS_PIPE_ON_DEMAND);
                if (od) {
                        od_extra += num(od, "median_ms") - num(sorted[i], "kernel_ms");
                        od_n++;
                }
        }
        pipe_curves(curves, sorted, n);
        free(sorted);

        char sentence[SWEEP_SENTENCE_MAX], touched_words[NOTE_MAX];
        size_t at = 0;
        json_t *touched = touched_summary(result, size, touched_words, sizeof(touched_words));
        const json_t *ov = bal ? strategy_in(bal, MEAS_PIPE_OVERLAPPED) : NULL,
                     *od = bal ? strategy_in(bal, MEAS_PIPE_ON_DEMAND) : NULL,
                     *pc = bal ? strategy_in(bal, MEAS_PIPE_PREFETCH_CHUNKED) : NULL;
        double gib = (double)size / (1024.0 * 1024 * 1024);
        sentence[0] = '\0';
        if (bal)
                at += (size_t)snprintf(sentence, sizeof(sentence),
                                       "With a kernel as long as the copy (%lld FMAs a float, "
                                       "%.1f ms for the batch)",
                                       (long long)kb, num(bal, "limit_ms"));
        if (ov && at < sizeof(sentence))
                at += (size_t)snprintf(sentence + at, sizeof(sentence) - at,
                                       ", overlapped pinned copies take %.2fx the limit (%.2fx "
                                       "faster than copy then kernel)",
                                       num(ov, "ratio_to_limit"), num(ov, "speedup_vs_serial"));
        if (od && at < sizeof(sentence))
                at += (size_t)snprintf(sentence + at, sizeof(sentence) - at,
                                       "; managed memory faulted in on demand takes %.1fx, about "
                                       "%.0f ms a GiB over the kernel whatever the kernel does",
                                       num(od, "ratio_to_limit"),
                                       gib > 0 && od_n ? od_extra / (double)od_n / gib : 0.0);
        if (pc && at < sizeof(sentence))
                at += (size_t)snprintf(sentence + at, sizeof(sentence) - at,
                                       "; prefetched chunk by chunk, %.2fx",
                                       num(pc, "ratio_to_limit"));
        if (at > 0 && at < sizeof(sentence))
                at += (size_t)snprintf(sentence + at, sizeof(sentence) - at, ".");
        if (bal) {
                char suf[SUFFIX_MAX];
                snprintf(suf, sizeof(suf), "@i=%lld", (long long)kb);
                host_write_words(bal, sentence, sizeof(sentence), &at);
                managed_goal_words(result, suf, bal, sentence, sizeof(sentence), &at);
        }
        if (at > 0 && at < sizeof(sentence))
                at += (size_t)snprintf(sentence + at, sizeof(sentence) - at, " ");
        if (touched && at < sizeof(sentence))
                snprintf(sentence + at, sizeof(sentence) - at, "%s", touched_words);
        return json_pack("{s:I, s:o, s:o, s:o, s:o, s:s}", "balanced_intensity", kb, "curves",
                         curves, "limit", limit, "points", points, "touched",
                         touched ? touched : json_null(), "conclusion", sentence);
}

static const char *const suite_names[] = {"um_vs_explicit", "sweep", "copy_overlap", "pipeline",
                                          "pipeline_sweep"};

bool suite_summarises(const char *benchmark)
{
        for (size_t i = 0; benchmark && i < sizeof(suite_names) / sizeof(suite_names[0]); i++)
                if (strcmp(benchmark, suite_names[i]) == 0)
                        return true;
        return topology_summarises(benchmark);
}

json_t *suite_summary(const char *benchmark, const json_t *result)
{
        if (!suite_summarises(benchmark) || !json_is_array(json_object_get(result, "measurements")))
                return NULL;
        if (strcmp(benchmark, "um_vs_explicit") == 0)
                return um_summary(result);
        if (strcmp(benchmark, "sweep") == 0)
                return sweep_summary(result);
        if (strcmp(benchmark, "copy_overlap") == 0)
                return copy_overlap_summary(result);
        if (strcmp(benchmark, "pipeline") == 0)
                return pipeline_summary(result);
        if (strcmp(benchmark, "pipeline_sweep") == 0)
                return pipeline_sweep_summary(result);
        return topology_summary(benchmark, result);
}
