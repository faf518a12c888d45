/* Judging a GPU's error state (see health_errors.h). Each rule names its source in the check's
 * "threshold_source", and docs/design.md ("GPU error state") lists them all. A reading NVML could
 * not give passes with its why: umd never fails a GPU for what its driver cannot say. */
#include "health_errors.h"

#include <stdio.h>
#include <string.h>

#include "health_action.h"
#include "util.h"

enum verdict { V_PASS, V_WARN, V_FAIL };
static const char *const verdict_names[] = {"pass", "warn", "fail"};

#define SRC_MEMORY_NOTE                                                                            \
        "NVIDIA GPU Memory Error Management (docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt)"
#define REASON_MAX 400

struct limits {
        long long retired_pages_max, sram_uncorrected_max;
        bool ecc_off_warns;
};

/* The check being built: what each rule fills in before add() appends it. */
struct check {
        const char *name;
        enum verdict v;
        enum health_action action;
        const char *source; /* NULL: no documented rule (an unknown reading, a pass) */
        char reason[REASON_MAX];
        const json_t *figures;
};

static void add(json_t *verdict, const struct check *c)
{
        json_t *checks = json_object_get(verdict, "checks");
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:O?}", "name", c->name, "verdict",
                              verdict_names[c->v], "reason", c->reason, "expectation",
                              c->source ? "rule" : "none", "action", health_action_name(c->action),
                              "figures", c->figures);
        const char *was = json_string_value(json_object_get(verdict, "verdict"));

        if (!o)
                return;
        if (c->source)
                json_object_set_new(o, "threshold_source", json_string(c->source));
        json_array_append_new(checks, o);
        if (c->v == V_PASS)
                return;
        json_array_append_new(json_object_get(verdict, "reasons"), json_string(c->reason));
        if ((int)c->v > (streq_ptr(was, "fail")   ? V_FAIL
                         : streq_ptr(was, "warn") ? V_WARN
                                                  : V_PASS))
                json_object_set_new(verdict, "verdict", json_string(verdict_names[c->v]));
}

static long long count(const json_t *o, const char *k)
{
        json_t *v = json_object_get(o, k);
        return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

/* A reading NVML could not give: passes, saying why. */
static bool unknown(json_t *verdict, const char *name, const char *what, const json_t *reading)
{
        const char *why = json_string_value(json_object_get(reading, "unknown"));
        struct check c = {.name = name};

        if (json_is_object(reading) && !why)
                return false;
        snprintf(c.reason, sizeof(c.reason), "%s unknown: %s", what, why ? why : "not read");
        add(verdict, &c);
        return true;
}

static void judge_remapped(json_t *verdict, const json_t *r)
{
        struct check c = {.name = "remapped_rows", .figures = r};
        long long unc = count(r, "uncorrected"), corr = count(r, "corrected");

        if (unknown(verdict, c.name, "remapped rows", r))
                return;
        if (json_is_true(json_object_get(r, "failure"))) {
                c.v = V_FAIL;
                c.action = HEALTH_ACTION_SERVICE;
                c.source = SRC_MEMORY_NOTE ", RMA policy: the row-remapping failure flag";
                snprintf(c.reason, sizeof(c.reason),
                         "row remapping failed (%lld rows remapped for uncorrectable errors): the "
                         "memory has no spare row left for the next error; replace the GPU",
                         unc);
        } else if (json_is_true(json_object_get(r, "pending"))) {
                c.v = V_FAIL;
                c.action = HEALTH_ACTION_RESET_GPU;
                c.source = "DCGM health watch (memory) and Azure HPC health checks "
                           "(check_gpu_ecc): pending row remap; " SRC_MEMORY_NOTE
                           ": a remap takes effect at the next GPU reset";
                snprintf(c.reason, sizeof(c.reason),
                         "a row remap is pending (%lld uncorrectable, %lld correctable rows "
                         "remapped): it takes effect at the next GPU reset",
                         unc, corr);
        } else
                snprintf(c.reason, sizeof(c.reason),
                         "remapped rows: %lld for uncorrectable errors, %lld for correctable "
                         "ones, none pending, no failure",
                         unc, corr);
        add(verdict, &c);
}

static const json_t *ecc_at(const json_t *ecc, const char *counter, const char *place)
{
        return json_object_get(json_object_get(ecc, counter), place);
}

/* The uncorrected DRAM and SRAM counts of kind ("volatile", "aggregate") into *ret_dram and
 * *ret_sram (-1 unknown); false, with the check added passing and saying why, when neither could
 * be read. */
static bool uncorrected(json_t *verdict, struct check *c, const char *kind, const json_t *ecc,
                        long long *ret_dram, long long *ret_sram)
{
        const char *why = json_string_value(json_object_get(ecc, "unknown"));

        *ret_dram = count(ecc_at(ecc, kind, "dram"), "uncorrected");
        *ret_sram = count(ecc_at(ecc, kind, "sram"), "uncorrected");
        if (*ret_dram >= 0 || *ret_sram >= 0)
                return true;
        snprintf(c->reason, sizeof(c->reason), "%s ECC counts unknown: %s", kind,
                 why ? why : "not read");
        add(verdict, c);
        return false;
}

static void judge_ecc_volatile(json_t *verdict, const json_t *ecc)
{
        struct check c = {.name = "ecc_volatile", .figures = json_object_get(ecc, "volatile")};
        long long dram, sram;

        if (!uncorrected(verdict, &c, "volatile", ecc, &dram, &sram))
                return;
        if (dram > 0 || sram > 0) {
                c.v = V_FAIL;
                c.action = HEALTH_ACTION_RESET_GPU;
                c.source =
                    "DCGM health watch (memory): a volatile uncorrectable (double-bit) "
                    "error fails; " SRC_MEMORY_NOTE ": the GPU is reset to remap or clear it";
                snprintf(c.reason, sizeof(c.reason),
                         "uncorrectable ECC errors since the driver loaded: %lld in DRAM, %lld in "
                         "SRAM; reset the GPU",
                         dram > 0 ? dram : 0, sram > 0 ? sram : 0);
        } else
                snprintf(c.reason, sizeof(c.reason),
                         "no uncorrectable ECC error since the driver loaded (DRAM %lld, SRAM "
                         "%lld corrected)",
                         count(ecc_at(ecc, "volatile", "dram"), "corrected"),
                         count(ecc_at(ecc, "volatile", "sram"), "corrected"));
        add(verdict, &c);
}

static void judge_ecc_aggregate(json_t *verdict, const json_t *ecc, const struct limits *lim)
{
        struct check c = {.name = "ecc_aggregate", .figures = json_object_get(ecc, "aggregate")};
        long long dram, sram;

        if (!uncorrected(verdict, &c, "aggregate", ecc, &dram, &sram))
                return;
        if (sram > lim->sram_uncorrected_max) {
                c.v = V_FAIL;
                c.action = HEALTH_ACTION_SERVICE;
                c.source = SRC_MEMORY_NOTE ", SRAM RMA policy: more than 4 uncorrectable "
                                           "events in a bank; umd counts the GPU's lifetime total "
                                           "(sram_uncorrected_max; Azure HPC health checks' "
                                           "check_gpu_ecc fails on any: set 0)";
        }
        snprintf(c.reason, sizeof(c.reason),
                 "uncorrectable ECC errors over the GPU's life: %lld in SRAM (%s %lld), %lld in "
                 "DRAM (row remapping covers those)%s",
                 sram > 0 ? sram : 0, c.v == V_FAIL ? "over the limit of" : "limit",
                 lim->sram_uncorrected_max, dram > 0 ? dram : 0,
                 c.v == V_FAIL ? ": send the GPU for service" : "");
        add(verdict, &c);
}

static void judge_ecc_mode(json_t *verdict, const json_t *m, const struct limits *lim)
{
        struct check c = {.name = "ecc_mode", .figures = m};
        const char *cur = json_string_value(json_object_get(m, "current"));
        const char *pend = json_string_value(json_object_get(m, "pending"));

        if (unknown(verdict, c.name, "ECC mode", m))
                return;
        if (lim->ecc_off_warns && streq_ptr(cur, "off")) {
                c.v = V_WARN;
                c.source = "umd: NVML counts no memory error with ECC off (the memory note's "
                           "remapping and retirement act on ECC's counts)";
                snprintf(c.reason, sizeof(c.reason),
                         "ECC is off%s: memory errors go unseen and uncorrected",
                         streq_ptr(pend, "on") ? " (on at the next reset)" : "");
        } else if (cur && pend && strcmp(cur, pend) != 0) {
                c.v = V_WARN;
                c.source = "NVML: a changed ECC mode takes effect at the next GPU reset";
                snprintf(c.reason, sizeof(c.reason), "ECC is %s and turns %s at the next GPU reset",
                         cur, pend);
        } else
                snprintf(c.reason, sizeof(c.reason), "ECC is %s", cur ? cur : "?");
        add(verdict, &c);
}

static void judge_retired(json_t *verdict, const json_t *r, const struct limits *lim)
{
        struct check c = {.name = "retired_pages", .figures = r};
        long long sbe = count(r, "single_bit"), dbe = count(r, "double_bit");
        long long total = (sbe > 0 ? sbe : 0) + (dbe > 0 ? dbe : 0);

        if (unknown(verdict, c.name, "retired pages", r))
                return;
        if (total >= lim->retired_pages_max) {
                c.v = V_FAIL;
                c.action = HEALTH_ACTION_SERVICE;
                c.source =
                    "DCGM health watch (memory): retired pages at DCGM_LIMIT_MAX_RETIRED_PAGES "
                    "(63) or more (retired_pages_max)";
                snprintf(c.reason, sizeof(c.reason),
                         "%lld retired pages (%lld single-bit, %lld double-bit), at or over the "
                         "limit of %lld: send the GPU for service",
                         total, sbe, dbe, lim->retired_pages_max);
        } else if (json_is_true(json_object_get(r, "pending"))) {
                c.v = V_FAIL;
                c.action = HEALTH_ACTION_RESET_GPU;
                c.source = "NVML: a page marked for retirement is retired at the next GPU reset "
                           "(nvmlDeviceGetRetiredPagesPendingStatus)";
                snprintf(c.reason, sizeof(c.reason),
                         "a page retirement is pending (%lld retired): it takes effect at the next "
                         "GPU reset",
                         total);
        } else if (dbe > HEALTH_ERRORS_RETIRED_DBE_SOFT_MAX) {
                c.v = V_WARN;
                c.source = "DCGM health watch (memory): more than 15 double-bit retired pages "
                           "(DCGM_LIMIT_MAX_RETIRED_PAGES_SOFT_LIMIT)";
                snprintf(c.reason, sizeof(c.reason),
                         "%lld pages retired for double-bit errors, over DCGM's soft limit of %d",
                         dbe, HEALTH_ERRORS_RETIRED_DBE_SOFT_MAX);
        } else
                snprintf(c.reason, sizeof(c.reason),
                         "%lld retired pages (%lld single-bit, %lld double-bit), none pending",
                         total, sbe, dbe);
        add(verdict, &c);
}

/* NVML's recovery actions (nvmlDeviceGpuRecoveryAction_t) as umd's. */
static enum health_action recovery_action(long long value)
{
        switch (value) {
        case 0: /* NONE */
                return HEALTH_ACTION_NONE;
        case 2: /* NODE_REBOOT */
                return HEALTH_ACTION_REBOOT_NODE;
        case 3: /* DRAIN_P2P: stop the jobs' peer traffic, then ask again */
                return HEALTH_ACTION_RESTART_JOB;
        default: /* GPU_RESET, DRAIN_AND_RESET, and a value newer than this build */
                return HEALTH_ACTION_RESET_GPU;
        }
}

static void judge_recovery(json_t *verdict, const json_t *r)
{
        struct check c = {.name = "recovery_action", .figures = r};
        long long value = count(r, "value");
        const char *name = json_string_value(json_object_get(r, "name"));

        if (unknown(verdict, c.name, "NVML's recovery action", r))
                return;
        if (value != 0) {
                c.v = V_FAIL;
                c.action = recovery_action(value);
                c.source =
                    "NVML: NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (nvmlDeviceGpuRecoveryAction_t)";
                snprintf(c.reason, sizeof(c.reason), "NVML asks for a recovery action: %s (%lld)",
                         name ? name : "unknown to umd", value);
        } else
                snprintf(c.reason, sizeof(c.reason), "NVML asks for no recovery action");
        add(verdict, &c);
}

static void judge_inforom(json_t *verdict, const json_t *r)
{
        struct check c = {.name = "inforom", .figures = r};

        if (unknown(verdict, c.name, "the InfoROM's validity", r))
                return;
        if (json_is_false(json_object_get(r, "valid"))) {
                c.v = V_WARN;
                c.source = "DCGM diagnostic (software test): the InfoROM checksum "
                           "(nvmlDeviceValidateInforom)";
                snprintf(c.reason, sizeof(c.reason),
                         "the InfoROM is corrupt (its checksum fails): error counts kept there "
                         "may be wrong; have it reflashed");
        } else
                snprintf(c.reason, sizeof(c.reason), "the InfoROM is valid");
        add(verdict, &c);
}

/* The model's thresholds (models.h), else the defaults. */
static struct limits limits_of(const json_t *expect)
{
        const json_t *m = json_object_get(expect, "model");
        struct limits lim = {HEALTH_ERRORS_RETIRED_PAGES_MAX, HEALTH_ERRORS_SRAM_UNCORRECTED_MAX,
                             true};

        if (count(m, "retired_pages_max") >= 0)
                lim.retired_pages_max = count(m, "retired_pages_max");
        if (count(m, "sram_uncorrected_max") >= 0)
                lim.sram_uncorrected_max = count(m, "sram_uncorrected_max");
        if (streq_ptr(json_string_value(json_object_get(m, "ecc_off")), "pass"))
                lim.ecc_off_warns = false;
        return lim;
}

void health_errors_judge(json_t *verdict, const json_t *readings, const json_t *expect)
{
        const json_t *ecc = json_object_get(readings, "ecc");
        struct limits lim = limits_of(expect);

        if (!json_is_object(readings) || !json_is_array(json_object_get(verdict, "checks")))
                return;
        judge_remapped(verdict, json_object_get(readings, "remapped_rows"));
        judge_ecc_volatile(verdict, ecc);
        judge_ecc_aggregate(verdict, ecc, &lim);
        judge_ecc_mode(verdict, json_object_get(readings, "ecc_mode"), &lim);
        judge_retired(verdict, json_object_get(readings, "retired_pages"), &lim);
        judge_recovery(verdict, json_object_get(readings, "recovery_action"));
        judge_inforom(verdict, json_object_get(readings, "inforom"));
}

void health_actions_stamp(json_t *verdict)
{
        enum health_action worst = HEALTH_ACTION_NONE;
        json_t *c;
        size_t i;

        json_array_foreach(json_object_get(verdict, "checks"), i, c)
        {
                enum health_action a = HEALTH_ACTION_NONE;
                if (health_action_from_name(json_string_value(json_object_get(c, "action")), &a) <
                    0) {
                        a = streq_ptr(json_string_value(json_object_get(c, "verdict")), "fail")
                                ? HEALTH_ACTION_RESET_GPU
                                : HEALTH_ACTION_NONE;
                        json_object_set_new(c, "action", json_string(health_action_name(a)));
                }
                worst = health_action_max(worst, a);
        }
        json_object_set_new(verdict, "action", json_string(health_action_name(worst)));
}
