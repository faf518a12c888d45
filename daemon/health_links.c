/* Links and inventory in the health verdicts (see health_links.h). Counters are judged as rates
 * between two checks, never as totals: a counter that grew once in a GPU's life says nothing,
 * one that grows faster than the link's spec allows does. Each threshold names its source in the
 * check ("threshold_source") and in docs/design.md. */
#include "health_links.h"

#include <stdio.h>
#include <string.h>

#include "config.h"
#include "gpustate.h"
#include "util.h"

/* A link's generation and width in words ("Gen5 x16"), or why they are unknown. */
#define LINK_WORDS_MAX 48
/* The throttle reasons NVML gave, in words, comma-separated. */
#define THROTTLE_WORDS_MAX 256
/* A PCI bus id in the normal form ("0000:65:00.0"), with room to spare. */
#define BUS_ID_MAX 32

enum verdict { V_PASS, V_WARN, V_FAIL };
static const char *const verdict_names[] = {"pass", "warn", "fail"};
static const char *const kind_names[_GPU_NVLINK_KIND_MAX] = {"crc", "replay", "recovery"};

/* A reason long enough for every offending link of a GPU, each in a few words. */
#define LINKS_WHY_MAX 1024
/* Rates per minute are taken over a minute at least, as DCGM's health watch does: one event
 * between two checks a second apart is not sixty a minute. */
#define RATE_WINDOW_MIN_S 60.0

#define SRC_PCIE_BER                                                                               \
        "PCIe base spec bit error rate 1e-12 x line rate x lanes; DCGM health watch "              \
        "(DCGM_FR_PCI_REPLAY_RATE) warns on replays, floor DCGM_LIMIT_MAX_PCIREPLAY_RATE 8/min"
#define SRC_NVLINK_DOWN "DCGM health watch: an NVLink down fails (DCGM_FR_NVLINK_DOWN)"
#define SRC_NVLINK_ERRORS                                                                          \
        "DCGM health watch: NVLink CRC errors fail at 100/s (DCGM_LIMIT_MAX_NVLINK_CRC_ERROR), "   \
        "replay and recovery errors fail when they grow (DCGM_FR_NVLINK_ERROR_CRITICAL)"
#define SRC_THROTTLE                                                                               \
        "DCGM health watch: thermal and power violations warn "                                    \
        "(DCGM_FR_CLOCK_THROTTLE_THERMAL, DCGM_FR_CLOCK_THROTTLE_POWER)"
#define SRC_INVENTORY                                                                              \
        "expected_gpus; NVIDIA Xid catalog: Xid 79 (fallen off the bus) needs a reboot"

/* Clock event reasons that slow a copy down for the GPU's own health, not by policy: power
 * capping (sw_power_cap) and idle clocks are how a healthy GPU runs. */
static const char *const judged_throttles[] = {
    "hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown", "hw_power_brake_slowdown", NULL};

const char *health_nvlink_kind_name(enum gpu_nvlink_kind k)
{
        return kind_names[k];
}

double health_pcie_replay_limit_per_min(int gen, int width)
{
        /* Each generation's transfer rate (GT/s a lane) and its line encoding's payload share:
         * 8b/10b up to Gen2, 128b/130b for Gen3 to Gen5, FLIT mode (1b/1b) for Gen6. */
        static const struct {
                double gts, payload;
        } gens[] = {
            {2.5, 0.8},          {5.0, 0.8},          {8.0, 128.0 / 130},
            {16.0, 128.0 / 130}, {32.0, 128.0 / 130}, {64.0, 1.0},
        };
        if (gen < 1 || gen > (int)ELEMENTSOF(gens) || width < 1 || width > 32)
                return 0;
        return 1e-12 * gens[gen - 1].gts * 1e9 * gens[gen - 1].payload * width * 60;
}

static long long ll_or(const json_t *o, const char *k)
{
        json_t *v = json_object_get(o, k);
        return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

json_t *health_links_counters(const struct gpu_state *st, long long now_ms)
{
        json_t *links = json_array();
        json_t *o =
            json_pack("{s:I, s:o, s:o}", "time_ms", (json_int_t)now_ms, "pcie_replays",
                      st->replay_counter >= 0 ? json_integer(st->replay_counter) : json_null(),
                      "nvlinks_active",
                      st->nvlinks_active >= 0 ? json_integer(st->nvlinks_active) : json_null());

        for (size_t l = 0; o && links && l < GPU_STATE_NVLINKS_MAX; l++) {
                json_t *e = NULL;
                for (size_t k = 0; k < _GPU_NVLINK_KIND_MAX; k++) {
                        if (st->nvlink_errors[l][k] < 0)
                                continue;
                        if (!e && !(e = json_pack("{s:I}", "link", (json_int_t)l)))
                                break;
                        json_object_set_new(e, kind_names[k],
                                            json_integer(st->nvlink_errors[l][k]));
                }
                if (e)
                        json_array_append_new(links, e);
        }
        if (!o || !links) {
                json_decref(o);
                json_decref(links);
                return NULL;
        }
        json_object_set_new(o, "nvlink", links);
        return o;
}

static void add_check(json_t *verdict, const char *name, enum verdict v, enum health_action a,
                      const char *reason, const char *source)
{
        json_t *c = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "name", name, "verdict",
                              verdict_names[v], "reason", reason, "expectation", "none", "action",
                              health_action_name(a), "threshold_source", source);
        json_array_append_new(json_object_get(verdict, "checks"), c);
}

/* Seconds between two counter sets; -1 when either has no time or they go backwards. */
static double interval_s(const json_t *now, const json_t *before)
{
        long long t1 = ll_or(now, "time_ms"), t0 = ll_or(before, "time_ms");
        return t0 > 0 && t1 >= t0 ? (double)(t1 - t0) / 1000.0 : -1;
}

static void pcie_check(const struct umd_config *cfg, json_t *verdict, const json_t *now,
                       const json_t *before, const json_t *pcie)
{
        long long n = ll_or(now, "pcie_replays"), b = ll_or(before, "pcie_replays");
        int gen = (int)ll_or(pcie, "current_gen"), width = (int)ll_or(pcie, "current_width");
        double secs = interval_s(now, before);
        double ber = health_pcie_replay_limit_per_min(gen, width);
        double limit = ber > cfg->health_pcie_replay_floor_per_min
                           ? ber
                           : cfg->health_pcie_replay_floor_per_min;
        double fail = limit * cfg->health_pcie_replay_fail_factor;
        char why[LINKS_WHY_MAX], link[LINK_WORDS_MAX] = "the link's generation and width unknown";

        if (n < 0)
                return;
        if (b < 0 || secs < 0 || n < b) {
                snprintf(why, sizeof(why),
                         "the PCIe replay counter is %lld%s; its rate is judged from the next "
                         "check",
                         n, n < b ? " (reset since the last check)" : "");
                add_check(verdict, "pcie_replays", V_PASS, HEALTH_ACTION_NONE, why, SRC_PCIE_BER);
                return;
        }
        if (ber > 0)
                snprintf(link, sizeof(link), "Gen%d x%d's %.1f a minute", gen, width, ber);
        double rate =
            (double)(n - b) / ((secs > RATE_WINDOW_MIN_S ? secs : RATE_WINDOW_MIN_S) / 60);
        enum verdict v = fail > 0 && rate > fail ? V_FAIL : rate > limit ? V_WARN : V_PASS;
        snprintf(why, sizeof(why),
                 "the PCIe replay counter grew by %lld in %.0f s (%lld to %lld): %.1f a minute, "
                 "%s the limit of %.1f a minute (%s; fail above %.0f times)",
                 n - b, secs, b, n, rate, rate > limit ? "above" : "within", limit, link,
                 cfg->health_pcie_replay_fail_factor);
        add_check(verdict, "pcie_replays", v,
                  v == V_FAIL ? HEALTH_ACTION_SERVICE : HEALTH_ACTION_NONE, why, SRC_PCIE_BER);
}

static void nvlinks_active_check(json_t *verdict, const json_t *now, const json_t *expect)
{
        const json_t *model = json_object_get(expect, "model");
        const char *mname = json_string_value(json_object_get(model, "name"));
        long long want = ll_or(model, "nvlinks"), up = ll_or(now, "nvlinks_active");
        char why[LINKS_WHY_MAX];

        if (up < 0 || want <= 0 || !mname)
                return;
        if (up == 0) {
                /* A PCIe card without its bridge, or a VM given no NVLink, has every link off;
                 * that is how it was built, not a link that went down. */
                snprintf(why, sizeof(why),
                         "no NVLink is up (the %s has %lld): a card without a bridge or a VM "
                         "without NVLink, not judged",
                         mname, want);
                add_check(verdict, "nvlinks_active", V_PASS, HEALTH_ACTION_NONE, why,
                          SRC_NVLINK_DOWN);
                return;
        }
        snprintf(why, sizeof(why), "%lld of the %s's %lld NVLinks are up%s", up, mname, want,
                 up < want ? ": links are down" : "");
        add_check(verdict, "nvlinks_active", up < want ? V_FAIL : V_PASS,
                  up < want ? HEALTH_ACTION_RESET_GPU : HEALTH_ACTION_NONE, why, SRC_NVLINK_DOWN);
}

static const json_t *link_entry(const json_t *counters, long long link)
{
        const json_t *e;
        size_t i;

        json_array_foreach(json_object_get(counters, "nvlink"), i, e)
        {
                if (ll_or(e, "link") == link)
                        return e;
        }
        return NULL;
}

/* One kind of one link: appends "NVLink L: N KIND errors ..." to why when it is over its limit
 * and returns its verdict. */
static enum verdict nvlink_rate(const struct umd_config *cfg, long long link, size_t kind,
                                long long grew, double secs, char *why, size_t *at)
{
        double per_s = (double)grew / (secs > 1 ? secs : 1);
        double per_min =
            (double)grew / ((secs > RATE_WINDOW_MIN_S ? secs : RATE_WINDOW_MIN_S) / 60);
        bool over = kind == GPU_NVLINK_CRC ? per_s >= cfg->health_nvlink_crc_fail_per_s
                                           : per_min > cfg->health_nvlink_error_fail_per_min;

        if (!over || *at >= LINKS_WHY_MAX)
                return V_PASS;
        if (kind == GPU_NVLINK_CRC)
                *at += (size_t)snprintf(why + *at, LINKS_WHY_MAX - *at,
                                        "%sNVLink %lld: %lld CRC errors in %.1f s (%.0f/s, fail "
                                        "at %.0f/s)",
                                        *at ? "; " : "", link, grew, secs, per_s,
                                        cfg->health_nvlink_crc_fail_per_s);
        else
                *at += (size_t)snprintf(why + *at, LINKS_WHY_MAX - *at,
                                        "%sNVLink %lld: %lld %s errors in %.1f s (%.1f a minute, "
                                        "fail above %.1f)",
                                        *at ? "; " : "", link, grew, kind_names[kind], secs,
                                        per_min, cfg->health_nvlink_error_fail_per_min);
        return V_FAIL;
}

static void nvlink_errors_check(const struct umd_config *cfg, json_t *verdict, const json_t *now,
                                const json_t *before)
{
        size_t links = json_array_size(json_object_get(now, "nvlink")), i, at = 0;
        double secs = interval_s(now, before);
        long long grown = 0;
        enum verdict worst = V_PASS;
        char why[LINKS_WHY_MAX] = "";
        const json_t *e;

        if (links == 0)
                return;
        if (!before || secs < 0) {
                snprintf(why, sizeof(why),
                         "the error counters of %zu NVLinks are read; their rates are judged from "
                         "the next check",
                         links);
                add_check(verdict, "nvlink_errors", V_PASS, HEALTH_ACTION_NONE, why,
                          SRC_NVLINK_ERRORS);
                return;
        }
        json_array_foreach(json_object_get(now, "nvlink"), i, e)
        {
                long long l = ll_or(e, "link");
                const json_t *was = link_entry(before, l);
                for (size_t k = 0; was && k < _GPU_NVLINK_KIND_MAX; k++) {
                        long long n = ll_or(e, kind_names[k]), b = ll_or(was, kind_names[k]);
                        if (n < 0 || b < 0 || n <= b) /* unknown, unchanged, or reset */
                                continue;
                        grown += n - b;
                        enum verdict v = nvlink_rate(cfg, l, k, n - b, secs, why, &at);
                        worst = v > worst ? v : worst;
                }
        }
        if (worst == V_PASS)
                snprintf(why, sizeof(why),
                         "%lld NVLink errors over %zu links in %.0f s, within the limits (CRC "
                         "below %.0f/s, replay and recovery at most %.1f a minute)",
                         grown, links, secs, cfg->health_nvlink_crc_fail_per_s,
                         cfg->health_nvlink_error_fail_per_min);
        add_check(verdict, "nvlink_errors", worst,
                  worst == V_FAIL ? HEALTH_ACTION_RESET_GPU : HEALTH_ACTION_NONE, why,
                  SRC_NVLINK_ERRORS);
}

/* The judged throttle reasons read right before and right after the copies, without repeats,
 * in NVML's words upper-cased ("HW_POWER_BRAKE_SLOWDOWN"), joined by " and " into words. Returns
 * how many. */
static size_t throttles_seen(const json_t *result, json_t *names, char *words, size_t len)
{
        const json_t *c = json_object_get(json_object_get(result, "context"), "conditions");
        const char *const sides[] = {"gpu_before", "gpu_after"};
        size_t n = 0, at = 0, i;
        const json_t *r;

        words[0] = '\0';
        for (size_t s = 0; s < ELEMENTSOF(sides); s++)
                json_array_foreach(
                    json_object_get(json_object_get(c, sides[s]), "throttle_reasons"), i, r)
                {
                        const char *w = json_string_value(r);
                        bool judged = false, seen = false;
                        for (const char *const *j = judged_throttles; w && *j; j++)
                                judged = judged || strcmp(*j, w) == 0;
                        for (size_t k = 0; k < json_array_size(names); k++)
                                seen = seen ||
                                       streq_ptr(json_string_value(json_array_get(names, k)), w);
                        if (!judged || seen)
                                continue;
                        json_array_append_new(names, json_string(w));
                        n++;
                        if (at < len)
                                at += (size_t)snprintf(words + at, len - at, "%s",
                                                       n > 1 ? " and " : "");
                        for (; *w && at + 1 < len; w++)
                                words[at++] = (char)(*w >= 'a' && *w <= 'z' ? *w - 32 : *w);
                        words[at < len ? at : len - 1] = '\0';
                }
        return n;
}

/* Throttling seen around the copies warns, and is named in every bandwidth check that did not
 * pass: the copy was slow while the GPU held its clocks down. */
static void throttle_check(json_t *verdict, const json_t *result)
{
        json_t *names = json_array(), *c;
        char words[THROTTLE_WORDS_MAX], why[LINKS_WHY_MAX];
        size_t i;

        if (!names || throttles_seen(result, names, words, sizeof(words)) == 0) {
                json_decref(names);
                return;
        }
        json_array_foreach(json_object_get(verdict, "checks"), i, c)
        {
                const char *name = json_string_value(json_object_get(c, "name"));
                const char *reason = json_string_value(json_object_get(c, "reason"));
                if (!name || !reason || !strstr(name, "_vs_") ||
                    streq_ptr(json_string_value(json_object_get(c, "verdict")), "pass"))
                        continue;
                snprintf(why, sizeof(why), "%s while %s was active", reason, words);
                json_object_set_new(c, "reason", json_string(why));
                json_object_set(c, "throttle_reasons", names);
        }
        snprintf(why, sizeof(why),
                 "the GPU slowed its clocks around the check's copies: %s was active", words);
        add_check(verdict, "throttle", V_WARN, HEALTH_ACTION_NONE, why, SRC_THROTTLE);
        json_object_set(json_array_get(json_object_get(verdict, "checks"),
                                       json_array_size(json_object_get(verdict, "checks")) - 1),
                        "throttle_reasons", names);
        json_decref(names);
}

void health_links_judge(const struct umd_config *cfg, json_t *verdict, const json_t *now,
                        const json_t *before, const json_t *pcie, const json_t *expect,
                        const json_t *result)
{
        if (!json_is_array(json_object_get(verdict, "checks")))
                return;
        pcie_check(cfg, verdict, now, before, pcie);
        nvlinks_active_check(verdict, now, expect);
        nvlink_errors_check(cfg, verdict, now, before);
        throttle_check(verdict, result);
        health_settle(verdict);
}

/* "00000000:5A:00.0" and "0000:5a:00.0" alike as "0000:5a:00.0"; false when s is no bus id. */
static bool bus_norm(const char *s, char *buf, size_t len)
{
        unsigned dom, bus, dev, fn;

        if (!s || sscanf(s, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4)
                return false;
        snprintf(buf, len, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
        return true;
}

static bool bus_in(const json_t *list, const char *norm)
{
        char b[BUS_ID_MAX];
        size_t i;
        const json_t *x;

        json_array_foreach(list, i, x)
        {
                if (bus_norm(json_string_value(x), b, sizeof(b)) && strcmp(b, norm) == 0)
                        return true;
        }
        return false;
}

json_t *health_links_inventory(const struct umd_config *cfg, const json_t *present_bus,
                               const json_t *seen_bus)
{
        size_t present = json_array_size(present_bus), i, at = 0;
        unsigned want = cfg->expected_gpus;
        json_t *missing = json_array(), *x;
        char why[LINKS_WHY_MAX], b[BUS_ID_MAX];

        if (want == 0 || !missing) {
                json_decref(missing);
                return NULL;
        }
        json_array_foreach(seen_bus, i, x)
        {
                if (bus_norm(json_string_value(x), b, sizeof(b)) && !bus_in(present_bus, b))
                        json_array_append_new(missing, json_string(b));
        }
        bool short_of = present < want;
        at = (size_t)snprintf(why, sizeof(why), "expected %u GPUs, found %zu", want, present);
        json_array_foreach(missing, i, x)
        {
                if (short_of && at < sizeof(why))
                        at += (size_t)snprintf(why + at, sizeof(why) - at, "%s%s", i ? ", " : ": ",
                                               json_string_value(x));
        }
        if (short_of && json_array_size(missing) > 0 && at < sizeof(why))
                snprintf(why + at, sizeof(why) - at, " missing (on the PCI bus, not usable)");
        else if (short_of && at < sizeof(why))
                snprintf(why + at, sizeof(why) - at, ": %zu missing (not on the PCI bus either)",
                         want - present);
        return json_pack(
            "{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:o}", "name", "gpu_count", "verdict",
            short_of ? "fail" : "pass", "reason", why, "action",
            health_action_name(short_of ? HEALTH_ACTION_REBOOT_NODE : HEALTH_ACTION_NONE),
            "threshold_source", SRC_INVENTORY, "expected", (json_int_t)want, "present",
            (json_int_t)present, "missing", missing);
}
