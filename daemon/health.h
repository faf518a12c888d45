/* Health verdicts: turn a `health` suite result into pass | warn | fail with a reason per
 * check, against the PCIe link's theoretical rate, the link's own maximum, the GPU model's
 * figures (device memory, PCIe, NVLink), and this GPU's baseline (the median of its last passing
 * health results), and those baselines from the past results. Pure functions: no I/O, no locks, no
 * store. */
#pragma once

#include <jansson.h>

struct umd_config;

/* result: the health part's result; pcie: the device's "pcie" object (may be NULL);
 * expect: models.h's expectation for the GPU ({"device_name", "model": {...} or null}; NULL is an
 * unknown model): its PCIe link and nominal device memory bandwidth judge the link and the d2d
 * copy (health_memory_warn_fraction, health_memory_fail_fraction), and the verdict carries it as
 * "expectation"; every check says what it was judged against ("expectation": "link", "model",
 * "baseline" or "none"); baseline: {"pinned_h2d": median GB/s, ...} from past passing runs (may be
 * empty, NULL); baseline_runs: how many runs that median came from (the PCIe replay counter and
 * the NVLinks are health_links.h's, judged after). Returns a
 * new verdict object:
 * {"verdict": "pass"|"warn"|"fail", "checks": [{"name","verdict","reason",...}], "reasons": [..],
 *  "tier": ...}. A result of the extended tier ("tier": "extended") also has each of its additions
 * judged: the size at which each swept path reaches 90% of its peak (warns when only the largest
 * does), bidirectional copies against twice the link, device memory at full size against the
 * model and the quick size, pageable copies both ways and managed memory against the pinned copy,
 * and latency against fixed bounds; an addition the plan skipped is not judged. The result's
 * "gpu_errors" (the GPU's error state, read after the copies) is judged by health_errors.h into
 * one check a reading, and every check and the verdict get their "action" (health_action.h).
 */
json_t *health_verdict(const struct umd_config *cfg, const json_t *result, const json_t *pcie,
                       const json_t *expect, const json_t *baseline, size_t baseline_runs);

/* The tier that made a verdict, from the result it judged: "tier" ("quick" or "extended"); for
 * the extended tier also its "plan" (the result's: budget, what ran, what was skipped) and
 * "skipped", with a "plan" check and one check a skipped addition, all passing (a skip is the
 * budget's, not the GPU's). health_verdict and health_pair_verdict call it; on allocation
 * failure the verdict lacks some of these keys. */
void health_add_tier(json_t *verdict, const json_t *result);

/* A GPU's baseline from its past passing health parts: parts is an array of stored parts
 * ({"result": {"measurements": [...]}, ...}), newest first, of which the first
 * cfg->health_baseline_runs count. Returns a new {"pinned_h2d": median GB/s, ...} (a mode no
 * past part measured is absent; empty without parts or on allocation failure), *ret_runs the
 * parts it came from. parts may be NULL. */
json_t *health_baseline(const struct umd_config *cfg, const json_t *parts, size_t *ret_runs);

/* The GPU pairs' baseline from the node's past passing canonical parts (newest first, the first
 * cfg->health_baseline_runs count): {"gbps": {measurement: median GB/s}, "links": {measurement:
 * the link label of the newest part that measured it}}, health_pair_verdict's baseline. */
json_t *health_pair_baseline(const struct umd_config *cfg, const json_t *parts, size_t *ret_runs);

/* The measurements whose GB/s health judges (NULL-terminated). */
extern const char *const health_bandwidth_modes[];

/* The canonical check's part on the node worker (hosts with two GPUs or more): every ordered
 * pair's copy-engine peer copy (topology.h's shape) against its link's expected rate (warn and
 * fail fractions as above) and against its own baseline: baseline {"gbps": {measurement: median
 * GB/s}, "links": {measurement: "NV18"}} from past passing checks (may be NULL or empty; the rate
 * counts from health_baseline_min_runs runs, the link from one). A pair
 * without peer access (copies through host memory) fails, and so does a link that changed
 * from what the past passing checks saw. expects: models.h's expectation of each GPU, by the
 * result's device index (may be NULL): an NVLink pair whose two GPUs both have a model rate a link
 * is expected to carry links x the slower rate, else the rule by compute capability (topology.c).
 * Returns a new verdict object (as health_verdict's). */
json_t *health_pair_verdict(const struct umd_config *cfg, const json_t *result,
                            const json_t *expects, const json_t *baseline, size_t baseline_runs);
