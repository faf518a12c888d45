/* Health verdicts from a health suite result, and for pairs of GPUs from the node worker's part
 * of the canonical check (see health.h). The thresholds come from the configuration and the
 * figures from the GPU's model entry (models.h, handed in as JSON); every check says in words what
 * it compared and names what it was judged against, so an operator reading a failed verdict knows
 * what to look at. */
#include "health.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "catalog.h"
#include "config.h"
#include "health_errors.h"
#include "jsonutil.h"
#include "pcie.h"
#include "topology.h"
#include "util.h"

/* A check's reason: one figure, what it is judged against, the warn (and fail) line. */
#define REASON_MAX 320
/* A reason that names two figures, what they are judged against (a link, a model or a baseline)
 * and both lines. */
#define REASON_LONG_MAX 640
/* A check's name: a measurement's name and a suffix (_vs_link, _vs_baseline), or a pair's. */
#define CHECK_NAME_MAX 64
/* A skipped check's name: "skipped: " and a measurement's name. */
#define SKIPPED_NAME_MAX 96
/* One figure as a reason prints it, with its unit. */
#define FIGURE_MAX 32

const char *const health_bandwidth_modes[] = {
    MEAS_PINNED_H2D, MEAS_PINNED_D2H, MEAS_PAGEABLE_H2D, MEAS_MANAGED_PREFETCH, MEAS_D2D, NULL};
/* Only pinned copies are bounded by the link alone; pageable and managed paths also depend on
 * the host's memory and CPU, so they are judged against the GPU's own history only. */
static const char *const link_bound_modes[] = {MEAS_PINNED_H2D, MEAS_PINNED_D2H, NULL};
/* Modes that repeat to a percent or two from run to run on one GPU, so that a drop from their
 * own baseline fails: the link-bound copies, and the device-memory copy (an H200's d2d: CV under
 * 1%, bench/results/multi-gpu/topology.txt). */
static const char *const tight_modes[] = {MEAS_PINNED_H2D, MEAS_PINNED_D2H, MEAS_D2D, NULL};

enum verdict { V_PASS, V_WARN, V_FAIL };
static const char *const verdict_names[] = {"pass", "warn", "fail"};

static int int_or(const json_t *o, const char *k)
{
        json_t *v = json_object_get(o, k);
        return json_is_integer(v) ? (int)json_integer_value(v) : -1;
}

/* expectation: what the measurement was judged against, in one word ("link", "model",
 * "baseline", "none"), so a consumer can tell a miss of the model's figure from one of history. */
/* The extended tier's bidirectional copies against the sum of the two directions alone: below
 * 45% the directions take turns (no faster than one alone), below 60% they barely overlap. */
#define HEALTH_BIDIR_WARN 0.60
#define HEALTH_BIDIR_FAIL 0.45
/* How a link's expected rate was found, after the reason's figures: a model name and two numbers.
 */
#define PAIR_BASIS_MAX 160

/* A measured share of what was expected, against the warn and fail lines below it. */
static enum verdict verdict_of_fraction(double frac, double warn, double fail)
{
        return frac < fail ? V_FAIL : frac < warn ? V_WARN : V_PASS;
}

static void add_check(json_t *checks, json_t *reasons, enum verdict *worst, const char *name,
                      enum verdict v, const char *reason, const char *expectation)
{
        json_array_append_new(checks, json_pack("{s:s, s:s, s:s, s:s}", "name", name, "verdict",
                                                verdict_names[v], "reason", reason, "expectation",
                                                expectation));
        if (v != V_PASS)
                json_array_append_new(reasons, json_string(reason));
        if (v > *worst)
                *worst = v;
}

static bool in_list(const char *const *list, const char *s)
{
        for (; *list; list++)
                if (strcmp(*list, s) == 0)
                        return true;
        return false;
}

static double num_or(const json_t *o, const char *k)
{
        json_t *v = json_object_get(o, k);
        return json_is_number(v) ? json_number_value(v) : -1;
}

/* The GPU model's checks: which entry the GPU matched (or that it matched none), its PCIe link
 * against the model's, and its device memory against the model's nominal bandwidth. The link
 * compared is the one the GPU says it can reach (its maximum; the current one where the maximum
 * is unknown): a link trained below its own maximum is the "link" check's to say, once. */
static void model_checks(const struct umd_config *cfg, const json_t *result, const json_t *expect,
                         int lg, int lw, json_t *checks, json_t *reasons, enum verdict *worst)
{
        const json_t *model = json_object_get(expect, "model");
        const char *dev = json_string_value(json_object_get(expect, "device_name"));
        const char *mname = json_string_value(json_object_get(model, "name"));
        const char *src = json_string_value(json_object_get(model, "source"));
        json_t *g = json_object_get(result_measurement(result, MEAS_D2D), "gbps");
        char why[REASON_LONG_MAX];

        if (!json_is_object(model) || !mname) {
                snprintf(why, sizeof(why),
                         "unknown GPU model '%s': no entry in the model table (gpu_models_file "
                         "can add one), so it is judged against its link and its own history only",
                         dev ? dev : "(no name)");
                add_check(checks, reasons, worst, "model", V_PASS, why, "none");
                if (json_is_number(g)) {
                        snprintf(why, sizeof(why),
                                 "d2d %.0f GB/s (device memory, read+write): no model "
                                 "expectation for '%s', judged against this GPU's history only",
                                 json_number_value(g), dev ? dev : "(no name)");
                        add_check(checks, reasons, worst, "d2d_vs_model", V_PASS, why, "none");
                }
                return;
        }
        snprintf(why, sizeof(why), "'%s' is the model %s (%s: %s)", dev ? dev : "(no name)", mname,
                 json_string_value(json_object_get(model, "from")), src ? src : "no source");
        add_check(checks, reasons, worst, "model", V_PASS, why, "model");

        int pg = int_or(model, "pcie_gen"), pw = int_or(model, "pcie_width");
        if (pg > 0 && pw > 0 && lg >= 0 && lw >= 0) {
                bool below = lg < pg || lw < pw;
                snprintf(why, sizeof(why),
                         "the PCIe link can reach Gen%d x%d, %s the Gen%d x%d of the %s", lg, lw,
                         below ? "below" : "as", pg, pw, mname);
                add_check(checks, reasons, worst, "link_vs_model", below ? V_WARN : V_PASS, why,
                          "model");
        }

        double nominal = num_or(model, "memory_gbps");
        if (nominal <= 0) {
                snprintf(why, sizeof(why),
                         "the model %s has no nominal memory bandwidth: device memory is judged "
                         "against this GPU's history only",
                         mname);
                add_check(checks, reasons, worst, "d2d_vs_model", V_PASS, why, "none");
                return;
        }
        if (!json_is_number(g))
                return; /* "d2d was not measured" is said once, by the caller */
        double frac = json_number_value(g) / nominal;
        enum verdict v = verdict_of_fraction(frac, cfg->health_memory_warn_fraction,
                                             cfg->health_memory_fail_fraction);
        snprintf(why, sizeof(why),
                 "d2d %.0f GB/s (device memory, read+write) is %.0f%% of the %.0f GB/s nominal "
                 "memory bandwidth of the %s (warn below %.0f%%, fail below %.0f%%)",
                 json_number_value(g), frac * 100, nominal, mname,
                 cfg->health_memory_warn_fraction * 100, cfg->health_memory_fail_fraction * 100);
        add_check(checks, reasons, worst, "d2d_vs_model", v, why, "model");
}

/* ---- the extended tier (issue 24): its additions, each judged ---- */

/* Fixed bounds for small-copy latency (microseconds): a pinned 4-byte copy takes 2-10 us on a
 * healthy PCIe GPU (an H200: 2.2), a pageable one adds a staging copy, a managed page fault
 * costs tens of microseconds; ten times that is a GPU, link or driver in trouble. */
#define LAT_PINNED_WARN_US   50.0
#define LAT_PAGEABLE_WARN_US 200.0
#define LAT_FAULT_WARN_US    1000.0
/* Host-dependent paths against the pinned copy of the same direction: below these fractions the
 * host's memory or the driver is in the way (an H200 node: pageable H2D 12-16% of pinned,
 * on-demand managed about 15%, prefetched managed about 90%). */
#define PAGEABLE_WARN_FRACTION  0.05
#define ON_DEMAND_WARN_FRACTION 0.05
#define PREFETCH_WARN_FRACTION  0.50
/* A knee: the size at which a path reaches this fraction of its peak. */
#define KNEE_FRACTION 0.90

static double gbps_of(const json_t *result, const char *name)
{
        json_t *g = json_object_get(result_measurement(result, name), "gbps");
        return json_is_number(g) ? json_number_value(g) : -1;
}

static double latency_us_of(const json_t *m)
{
        json_t *l = json_object_get(m, "latency_us");
        if (json_is_number(l))
                return json_number_value(l);
        json_t *ms = json_object_get(json_object_get(m, "stats"), "median_ms");
        return json_is_number(ms) ? json_number_value(ms) * 1e3 : -1;
}

static void size_words(double bytes, char *buf, size_t len)
{
        if (bytes >= 1024.0 * 1024 * 1024)
                snprintf(buf, len, "%.0f GiB", bytes / (1024.0 * 1024 * 1024));
        else if (bytes >= 1024.0 * 1024)
                snprintf(buf, len, "%.0f MiB", bytes / (1024.0 * 1024));
        else
                snprintf(buf, len, "%.0f KiB", bytes / 1024.0);
}

/* A short sweep's points ("knee@SIZE", each with "size"): the smallest size reaching 90% of the
 * peak. Reaching it only at the largest size swept warns: the path never levels off. */
static void knee_check(const json_t *result, const char *knee, const char *path, json_t *checks,
                       json_t *reasons, enum verdict *worst)
{
        size_t i, n = 0, len = strlen(knee);
        double peak = 0, at = -1, largest = 0, smallest = -1;
        json_t *m;
        char why[REASON_MAX], name[CHECK_NAME_MAX], s90[FIGURE_MAX], lo[FIGURE_MAX], hi[FIGURE_MAX];

        json_array_foreach(json_object_get(result, "measurements"), i, m)
        {
                const char *mn = json_string_value(json_object_get(m, "name"));
                double g = num_or(m, "gbps"), sz = num_or(m, "size");
                if (!mn || strncmp(mn, knee, len) != 0 || mn[len] != '@' || g < 0 || sz <= 0)
                        continue;
                n++;
                peak = g > peak ? g : peak;
                largest = sz > largest ? sz : largest;
                smallest = smallest < 0 || sz < smallest ? sz : smallest;
        }
        if (n == 0)
                return; /* skipped: the plan says so */
        json_array_foreach(json_object_get(result, "measurements"), i, m)
        {
                const char *mn = json_string_value(json_object_get(m, "name"));
                double g = num_or(m, "gbps"), sz = num_or(m, "size");
                if (!mn || strncmp(mn, knee, len) != 0 || mn[len] != '@' || sz <= 0)
                        continue;
                if (g >= KNEE_FRACTION * peak && (at < 0 || sz < at))
                        at = sz;
        }
        size_words(at, s90, sizeof(s90));
        size_words(smallest, lo, sizeof(lo));
        size_words(largest, hi, sizeof(hi));
        bool late = n >= 3 && at >= largest;
        snprintf(name, sizeof(name), "%s_90pct_size", path);
        snprintf(why, sizeof(why),
                 "%s reaches 90%% of its %.1f GB/s peak at %s (swept %s to %s in %zu sizes)%s",
                 path, peak, s90, lo, hi, n,
                 late ? ": only at the largest size, so it never levels off" : "");
        add_check(checks, reasons, worst, name, late ? V_WARN : V_PASS, why, "none");
}

/* Judges one figure against a floor that is a fraction of a reference figure (warn below). */
static void fraction_check(json_t *checks, json_t *reasons, enum verdict *worst, const char *name,
                           const char *what, double g, const char *ref_what, double ref,
                           double warn, const char *expectation)
{
        char why[REASON_MAX];

        if (g < 0 || ref <= 0)
                return;
        double frac = g / ref;
        snprintf(why, sizeof(why), "%s %.1f GB/s is %.0f%% of %s %.1f GB/s (warn below %.0f%%)",
                 what, g, frac * 100, ref_what, ref, warn * 100);
        add_check(checks, reasons, worst, name, frac < warn ? V_WARN : V_PASS, why, expectation);
}

static void extended_checks(const struct umd_config *cfg, const json_t *result,
                            const json_t *expect, double link, json_t *checks, json_t *reasons,
                            enum verdict *worst)
{
        double h2d = gbps_of(result, MEAS_PINNED_H2D), d2h = gbps_of(result, MEAS_PINNED_D2H);
        double bidir = gbps_of(result, MEAS_BIDIR), d2d = gbps_of(result, MEAS_D2D);
        double full = gbps_of(result, MEAS_D2D_FULL);
        char why[REASON_MAX];

        knee_check(result, MEAS_KNEE_PINNED_H2D, MEAS_PINNED_H2D, checks, reasons, worst);
        knee_check(result, MEAS_KNEE_PINNED_D2H, MEAS_PINNED_D2H, checks, reasons, worst);
        knee_check(result, MEAS_KNEE_D2D, MEAS_D2D, checks, reasons, worst);

        /* Both directions at once, against the two directions alone in the same check. Twice
         * the link's rate is no yardstick: a healthy H200 on Gen5 x16 carries 80-97 GB/s both
         * ways, 63-77% of twice 63 GB/s, varying run to run (bench/results/final-h200-r21/),
         * while one direction alone reaches 87%. What a duplex fault looks like is the two
         * directions taking turns: bidir no faster than one direction, half the sum. A GPU
         * uniformly slow both ways is the pinned checks' to find. */
        if (bidir >= 0 && h2d > 0 && d2h > 0) {
                double frac = bidir / (h2d + d2h);
                enum verdict v = verdict_of_fraction(frac, HEALTH_BIDIR_WARN, HEALTH_BIDIR_FAIL);
                snprintf(why, sizeof(why),
                         "bidir %.1f GB/s (both directions at once) is %.0f%% of the two "
                         "directions alone (%.1f + %.1f GB/s; warn below %.0f%%, fail below "
                         "%.0f%%)",
                         bidir, frac * 100, h2d, d2h, HEALTH_BIDIR_WARN * 100,
                         HEALTH_BIDIR_FAIL * 100);
                add_check(checks, reasons, worst, "bidir_vs_one_way", v, why, "link");
        }

        /* Device memory at full size: against the model, and against the quick tier's size (a
         * drop at full size is memory the small copy never touched). */
        const json_t *model = json_object_get(expect, "model");
        double nominal = num_or(model, "memory_gbps");
        const char *mname = json_string_value(json_object_get(model, "name"));
        if (full >= 0 && nominal > 0 && mname) {
                double frac = full / nominal;
                enum verdict v = verdict_of_fraction(frac, cfg->health_memory_warn_fraction,
                                                     cfg->health_memory_fail_fraction);
                snprintf(why, sizeof(why),
                         "d2d_full %.0f GB/s (device memory at full size) is %.0f%% of the %.0f "
                         "GB/s nominal memory bandwidth of the %s (warn below %.0f%%, fail below "
                         "%.0f%%)",
                         full, frac * 100, nominal, mname, cfg->health_memory_warn_fraction * 100,
                         cfg->health_memory_fail_fraction * 100);
                add_check(checks, reasons, worst, "d2d_full_vs_model", v, why, "model");
        }
        if (full >= 0 && d2d > 0) {
                double drop = 1.0 - full / d2d;
                enum verdict v = drop > cfg->health_baseline_tolerance ? V_FAIL : V_PASS;
                snprintf(why, sizeof(why),
                         "d2d_full %.0f GB/s against the quick tier's d2d %.0f GB/s: %+.0f%% "
                         "(fail beyond -%.0f%%)",
                         full, d2d, -drop * 100, cfg->health_baseline_tolerance * 100);
                add_check(checks, reasons, worst, "d2d_full_vs_d2d", v, why, "none");
        }

        /* Host-dependent paths, both ways, against the pinned copy of the same direction. */
        fraction_check(checks, reasons, worst, "pageable_h2d_vs_pinned", MEAS_PAGEABLE_H2D,
                       gbps_of(result, MEAS_PAGEABLE_H2D), MEAS_PINNED_H2D, h2d,
                       PAGEABLE_WARN_FRACTION, "none");
        fraction_check(checks, reasons, worst, "pageable_d2h_vs_pinned", MEAS_PAGEABLE_D2H,
                       gbps_of(result, MEAS_PAGEABLE_D2H), MEAS_PINNED_D2H, d2h,
                       PAGEABLE_WARN_FRACTION, "none");
        fraction_check(checks, reasons, worst, "managed_on_demand_vs_pinned",
                       MEAS_MANAGED_ON_DEMAND, gbps_of(result, MEAS_MANAGED_ON_DEMAND),
                       MEAS_PINNED_H2D, h2d, ON_DEMAND_WARN_FRACTION, "none");
        if (gbps_of(result, MEAS_MANAGED_ON_DEMAND) >= 0)
                fraction_check(checks, reasons, worst, "managed_prefetch_vs_pinned",
                               MEAS_MANAGED_PREFETCH, gbps_of(result, MEAS_MANAGED_PREFETCH),
                               MEAS_PINNED_H2D, h2d, PREFETCH_WARN_FRACTION, "none");

        static const struct {
                const char *name;
                double warn_us;
        } lats[] = {
            {MEAS_LATENCY_PINNED_H2D, LAT_PINNED_WARN_US},
            {MEAS_LATENCY_PINNED_D2H, LAT_PINNED_WARN_US},
            {MEAS_LATENCY_PAGEABLE_H2D, LAT_PAGEABLE_WARN_US},
            {MEAS_LATENCY_PAGEABLE_D2H, LAT_PAGEABLE_WARN_US},
            {MEAS_LATENCY_FAULT, LAT_FAULT_WARN_US},
        };
        if (!result_measurement(result, MEAS_LATENCY_PINNED_D2H))
                return; /* latency was skipped: the plan says so */
        for (size_t k = 0; k < sizeof(lats) / sizeof(lats[0]); k++) {
                double us = latency_us_of(result_measurement(result, lats[k].name));
                char name[CHECK_NAME_MAX];
                if (us < 0)
                        continue;
                snprintf(name, sizeof(name), "%s", lats[k].name);
                snprintf(why, sizeof(why), "%s %.1f us (warn above %.0f us)", lats[k].name, us,
                         lats[k].warn_us);
                add_check(checks, reasons, worst, name, us > lats[k].warn_us ? V_WARN : V_PASS, why,
                          "none");
        }
}

void health_add_tier(json_t *verdict, const json_t *result)
{
        const char *tier = json_string_value(json_object_get(result, "tier"));
        const json_t *plan = json_object_get(result, "plan");
        json_t *checks = json_object_get(verdict, "checks"),
               *reasons = json_object_get(verdict, "reasons"), *x;
        enum verdict worst = V_PASS; /* a plan's checks only ever pass */
        char why[REASON_LONG_MAX];
        size_t i, at = 0;

        json_object_set_new(verdict, "tier", json_string(tier ? tier : HEALTH_TIER_QUICK));
        if (!tier || strcmp(tier, HEALTH_TIER_EXTENDED) != 0 || !json_is_object(plan))
                return;
        const json_t *ran = json_object_get(plan, "ran"),
                     *skipped = json_object_get(plan, "skipped");
        double spent = num_or(plan, "elapsed_ms") >= 0 ? num_or(plan, "elapsed_ms")
                                                       : num_or(plan, "estimated_ms");
        long long budget = int_or(plan, "budget_ms");
        at += (size_t)snprintf(why, sizeof(why), "extended tier: %zu addition(s) ran (",
                               json_array_size(ran));
        json_array_foreach(ran, i, x)
        {
                if (at < sizeof(why))
                        at += (size_t)snprintf(why + at, sizeof(why) - at, "%s%s", i ? ", " : "",
                                               json_string_value(x));
        }
        if (at < sizeof(why)) {
                if (budget > 0)
                        snprintf(why + at, sizeof(why) - at,
                                 ") in about %.0f ms of its %lld ms budget, %zu skipped", spent,
                                 budget, json_array_size(skipped));
                else
                        snprintf(why + at, sizeof(why) - at, ") in about %.0f ms, no budget",
                                 spent);
        }
        add_check(checks, reasons, &worst, "plan", V_PASS, why, "none");
        json_array_foreach(skipped, i, x)
        {
                char name[SKIPPED_NAME_MAX];
                snprintf(name, sizeof(name), "skipped: %s",
                         json_string_value(json_object_get(x, "check")));
                add_check(checks, reasons, &worst, name, V_PASS,
                          json_string_value(json_object_get(x, "reason")), "none");
        }
        json_object_set(verdict, "plan", (json_t *)plan);
        json_object_set(verdict, "skipped",
                        json_is_array(skipped) ? (json_t *)skipped : json_array());
}

json_t *health_verdict(const struct umd_config *cfg, const json_t *result, const json_t *pcie,
                       const json_t *expect, const json_t *baseline, size_t baseline_runs)
{
        json_t *checks = json_array(), *reasons = json_array();
        enum verdict worst = V_PASS;
        char why[REASON_MAX];
        int cg = int_or(pcie, "current_gen"), cw = int_or(pcie, "current_width");
        int mg = int_or(pcie, "max_gen"), mw = int_or(pcie, "max_width");
        double link = pcie_link_gbps(cg, cw);

        if (cg < 0 || cw < 0) {
                add_check(checks, reasons, &worst, "link", V_WARN,
                          "the PCIe link could not be read (sysfs); bandwidth is not judged "
                          "against it",
                          "none");
        } else if ((mg > 0 && cg < mg) || (mw > 0 && cw < mw)) {
                snprintf(why, sizeof(why),
                         "the PCIe link runs at Gen%d x%d, below its maximum Gen%d x%d", cg, cw, mg,
                         mw);
                add_check(checks, reasons, &worst, "link", V_WARN, why, "link");
        } else {
                snprintf(why, sizeof(why), "the PCIe link runs at its maximum, Gen%d x%d", cg, cw);
                add_check(checks, reasons, &worst, "link", V_PASS, why, "link");
        }
        model_checks(cfg, result, expect, mg > 0 ? mg : cg, mw > 0 ? mw : cw, checks, reasons,
                     &worst);
        if (!json_is_number(json_object_get(result_measurement(result, MEAS_D2D), "gbps")))
                add_check(checks, reasons, &worst, "d2d", V_FAIL,
                          "d2d (device memory) was not measured", "none");

        for (const char *const *m = link_bound_modes; *m && link > 0; m++) {
                json_t *g = json_object_get(result_measurement(result, *m), "gbps");
                char name[CHECK_NAME_MAX];
                snprintf(name, sizeof(name), "%s_vs_link", *m);
                if (!json_is_number(g)) {
                        snprintf(why, sizeof(why), "%s was not measured", *m);
                        add_check(checks, reasons, &worst, name, V_FAIL, why, "link");
                        continue;
                }
                double frac = json_number_value(g) / link;
                enum verdict v =
                    verdict_of_fraction(frac, cfg->health_warn_fraction, cfg->health_fail_fraction);
                snprintf(why, sizeof(why),
                         "%s %.1f GB/s is %.0f%% of the link's %.1f GB/s (warn below %.0f%%, "
                         "fail below %.0f%%)",
                         *m, json_number_value(g), frac * 100, link,
                         cfg->health_warn_fraction * 100, cfg->health_fail_fraction * 100);
                add_check(checks, reasons, &worst, name, v, why, "link");
        }

        if (baseline_runs < cfg->health_baseline_min_runs) {
                snprintf(why, sizeof(why),
                         "baseline forming: %zu earlier passing run(s) of this GPU, %u needed "
                         "(health_baseline_min_runs) before it is judged against its history",
                         baseline_runs, cfg->health_baseline_min_runs);
                add_check(checks, reasons, &worst, "baseline", V_PASS, why, "none");
                baseline = NULL;
        }
        for (const char *const *m = health_bandwidth_modes; baseline && *m; m++) {
                json_t *g = json_object_get(result_measurement(result, *m), "gbps");
                json_t *b = json_object_get(baseline, *m);
                bool tight = in_list(tight_modes, *m);
                char name[CHECK_NAME_MAX];
                snprintf(name, sizeof(name), "%s_vs_baseline", *m);
                if (!json_is_number(g) || !json_is_number(b) || json_number_value(b) <= 0)
                        continue;
                /* Pinned copies are bound by the link and repeat to a fraction of a percent, and
                 * so does the device-memory copy, so a drop is the GPU's or the link's: fail.
                 * Pageable and managed paths swing by tens of percent with the host's state
                 * (seen on an H200: pageable H2D 6.9 to 9.1 GB/s between runs), so a drop there
                 * only warns. */
                double drop = 1.0 - json_number_value(g) / json_number_value(b);
                double tol = tight ? cfg->health_baseline_tolerance : cfg->health_host_tolerance;
                enum verdict v = drop <= tol ? V_PASS : tight ? V_FAIL : V_WARN;
                snprintf(why, sizeof(why),
                         "%s %.1f GB/s against this GPU's baseline %.1f GB/s (median of %zu "
                         "passing runs): %+.0f%% (%s beyond -%.0f%%)",
                         *m, json_number_value(g), json_number_value(b), baseline_runs, -drop * 100,
                         tight ? "fail" : "warn", tol * 100);
                add_check(checks, reasons, &worst, name, v, why, "baseline");
        }

        if (streq_ptr(json_string_value(json_object_get(result, "tier")), HEALTH_TIER_EXTENDED))
                extended_checks(cfg, result, expect, link, checks, reasons, &worst);

        json_t *v =
            json_pack("{s:s, s:o, s:o, s:f, s:O?}", "verdict", verdict_names[worst], "checks",
                      checks, "reasons", reasons, "link_gbps", link, "expectation", expect);
        if (v) {
                health_add_tier(v, result);
                health_errors_judge(v, json_object_get(result, "gpu_errors"), expect);
                health_actions_stamp(v);
        }
        return v;
}

/* ---- pairs of GPUs (the canonical check's part on the node worker) ---- */

/* A pair's NVLink rate a link from the two GPUs' model entries (the slower of the two), or 0
 * when either has none; *ret_model names the entry. */
static double model_nvlink_gbps(const json_t *expects, long long s, long long d,
                                const char **ret_model)
{
        const json_t *a = json_object_get(json_array_get(expects, (size_t)s), "model");
        const json_t *b = json_object_get(json_array_get(expects, (size_t)d), "model");
        double ra = num_or(a, "nvlink_gbps"), rb = num_or(b, "nvlink_gbps");

        if (s < 0 || d < 0 || ra <= 0 || rb <= 0)
                return 0;
        *ret_model = json_string_value(json_object_get(ra <= rb ? a : b, "name"));
        return ra <= rb ? ra : rb;
}

/* What the link from GPU s to GPU d should carry: the model table's rate a link where both GPUs
 * have one (*ret_kind "model"), else the rule by compute capability (topology.c; *ret_kind left
 * as it is); basis says which, for the reason. */
static double pair_expected(const json_t *link, const json_t *devices, const json_t *expects,
                            long long s, long long d, const char **ret_kind, char *basis,
                            size_t basis_len)
{
        const char *type = json_string_value(json_object_get(link, "type"));
        double expected = topology_link_expected_gbps(link, devices);
        const char *model = NULL;
        double per_link = model_nvlink_gbps(expects, s, d, &model);
        long long nvl = int_or(link, "nvlink_links");

        if (type && strcmp(type, "nvlink") == 0 && nvl > 0 && per_link > 0) {
                expected = (double)nvl * per_link;
                *ret_kind = "model";
                snprintf(basis, basis_len, "; %lld links x %.0f GB/s, the %s's rate", nvl, per_link,
                         model ? model : "model");
        } else if (type && strcmp(type, "nvlink") == 0)
                snprintf(basis, basis_len, "; by compute capability: no model rate");
        return expected;
}

json_t *health_pair_verdict(const struct umd_config *cfg, const json_t *result,
                            const json_t *expects, const json_t *baseline, size_t baseline_runs)
{
        const json_t *devices = json_object_get(result, "devices");
        json_t *checks = json_array(), *reasons = json_array(), *m;
        enum verdict worst = V_PASS;
        size_t i, pairs = 0;
        char why[REASON_LONG_MAX], label[TOPOLOGY_LABEL_MAX], name[CHECK_NAME_MAX];

        json_array_foreach(json_object_get(result, "measurements"), i, m)
        {
                const char *method = json_string_value(json_object_get(m, "method"));
                const char *dir = json_string_value(json_object_get(m, "direction"));
                const char *mname = json_string_value(json_object_get(m, "name"));
                long long s = int_or(m, "src"), d = int_or(m, "dst");
                json_t *g = json_object_get(m, "gbps");

                if (!method || !dir || !mname || strcmp(method, "ce") || strcmp(dir, "uni") ||
                    s < 0 || d < 0 || !json_is_number(g))
                        continue;
                pairs++;
                double gbps = json_number_value(g);
                const json_t *link = topology_link(result, s, d);
                const char *type = json_string_value(json_object_get(link, "type"));
                const char *exp_kind = "link";
                char basis[PAIR_BASIS_MAX] = "";
                double expected =
                    pair_expected(link, devices, expects, s, d, &exp_kind, basis, sizeof(basis));
                topology_link_label(link, label, sizeof(label));
                snprintf(name, sizeof(name), "peer %lld->%lld", s, d);

                if (!type || strcmp(type, "host") == 0) {
                        snprintf(why, sizeof(why),
                                 "GPU %lld -> GPU %lld has no peer access: its copies go through "
                                 "host memory (%.1f GB/s)",
                                 s, d, gbps);
                        add_check(checks, reasons, &worst, name, V_FAIL, why, "link");
                        continue;
                }
                if (expected <= 0) {
                        snprintf(why, sizeof(why),
                                 "GPU %lld -> GPU %lld %.1f GB/s: the link (%s) has no known "
                                 "expected rate",
                                 s, d, gbps, label);
                        add_check(checks, reasons, &worst, name, V_WARN, why, "none");
                } else {
                        double frac = gbps / expected;
                        enum verdict v = verdict_of_fraction(frac, cfg->health_warn_fraction,
                                                             cfg->health_fail_fraction);
                        snprintf(why, sizeof(why),
                                 "GPU %lld -> GPU %lld %.1f GB/s is %.0f%% of the %.0f GB/s its "
                                 "link (%s%s) should carry (warn below %.0f%%, fail below %.0f%%)",
                                 s, d, gbps, frac * 100, expected, label, basis,
                                 cfg->health_warn_fraction * 100, cfg->health_fail_fraction * 100);
                        add_check(checks, reasons, &worst, name, v, why, exp_kind);
                }

                /* Its own history: the link that the past passing checks saw, and their rate. */
                const char *was =
                    json_string_value(json_object_get(json_object_get(baseline, "links"), mname));
                json_t *b = json_object_get(json_object_get(baseline, "gbps"), mname);
                if (was && strcmp(was, label) != 0) {
                        snprintf(why, sizeof(why),
                                 "GPU %lld -> GPU %lld: the link is %s now, %s in past passing "
                                 "checks",
                                 s, d, label, was);
                        add_check(checks, reasons, &worst, name, V_FAIL, why, "baseline");
                }
                /* The rate's history counts once there is enough of it, as for each GPU. */
                if (json_is_number(b) && json_number_value(b) > 0 &&
                    baseline_runs >= cfg->health_baseline_min_runs) {
                        double base = json_number_value(b);
                        double tol = cfg->health_baseline_tolerance;
                        bool low = gbps < base * (1 - tol);
                        snprintf(why, sizeof(why),
                                 "GPU %lld -> GPU %lld %.1f GB/s against its baseline %.1f GB/s "
                                 "(median of %zu passing checks; fail below -%.0f%%)",
                                 s, d, gbps, base, baseline_runs, tol * 100);
                        add_check(checks, reasons, &worst, name, low ? V_FAIL : V_PASS, why,
                                  "baseline");
                }
        }
        if (pairs == 0)
                add_check(checks, reasons, &worst, "peer", V_FAIL,
                          "no copy between GPUs was measured", "none");
        json_t *v = json_pack("{s:s, s:o, s:o, s:I}", "verdict", verdict_names[worst], "checks",
                              checks, "reasons", reasons, "pairs", (json_int_t)pairs);
        if (v) {
                health_add_tier(v, result);
                health_actions_stamp(v);
        }
        return v;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return (x > y) - (x < y);
}

/* Sorts v in place. */
static double median(double *v, size_t n)
{
        qsort(v, n, sizeof(double), cmp_double);
        return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

json_t *health_baseline(const struct umd_config *cfg, const json_t *parts, size_t *ret_runs)
{
        size_t max = cfg->health_baseline_runs, runs = 0, k;
        const json_t **past = calloc(max, sizeof(*past)); /* their results, newest first */
        double *vals = calloc(max, sizeof(double));
        json_t *baseline = json_object(), *p;

        if (past && vals)
                json_array_foreach(parts, k, p)
                {
                        if (runs < max)
                                past[runs++] = json_object_get(p, "result");
                }
        for (const char *const *m = health_bandwidth_modes; past && vals && *m; m++) {
                size_t n = 0;
                for (size_t r = 0; r < runs; r++) {
                        const json_t *g = json_object_get(result_measurement(past[r], *m), "gbps");
                        if (json_is_number(g))
                                vals[n++] = json_number_value(g);
                }
                if (n > 0)
                        json_object_set_new(baseline, *m, json_real(median(vals, n)));
        }
        free(past);
        free(vals);
        *ret_runs = runs;
        return baseline;
}

json_t *health_pair_baseline(const struct umd_config *cfg, const json_t *parts, size_t *ret_runs)
{
        size_t max = cfg->health_baseline_runs, runs = 0, k, x;
        json_t *gbps = json_object(), *links = json_object(), *seen = json_object(), *p, *m;
        char label[TOPOLOGY_LABEL_MAX];

        json_array_foreach(parts, k, p)
        {
                const json_t *res = json_object_get(p, "result");
                if (runs >= max)
                        break;
                runs++;
                json_array_foreach(json_object_get(res, "measurements"), x, m)
                {
                        const char *name = json_string_value(json_object_get(m, "name"));
                        json_t *g = json_object_get(m, "gbps");
                        if (!name || !json_is_number(g))
                                continue;
                        json_t *l = json_object_get(seen, name);
                        if (!l) {
                                l = json_array();
                                json_object_set_new(seen, name, l);
                                /* newest first: the first part's link is the latest */
                                const json_t *link = topology_link(
                                    res, json_integer_value(json_object_get(m, "src")),
                                    json_integer_value(json_object_get(m, "dst")));
                                if (link)
                                        json_object_set_new(links, name,
                                                            json_string(topology_link_label(
                                                                link, label, sizeof(label))));
                        }
                        json_array_append(l, g);
                }
        }
        const char *name;
        json_t *l;
        json_object_foreach(seen, name, l)
        {
                size_t n = json_array_size(l);
                double *v = calloc(n, sizeof(double));
                if (!v)
                        continue;
                for (size_t i = 0; i < n; i++)
                        v[i] = json_number_value(json_array_get(l, i));
                json_object_set_new(gbps, name, json_real(median(v, n)));
                free(v);
        }
        json_decref(seen);
        *ret_runs = runs;
        return json_pack("{s:o, s:o}", "gbps", gbps, "links", links);
}
