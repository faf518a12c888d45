/* Links and inventory in the health verdicts (issue 58): the PCIe replay counter and the NVLink
 * error counters judged as rates between two checks against documented limits, the NVLinks up
 * against the GPU model's count, the throttle reasons seen around the check's own copies
 * attached to the bandwidth checks they explain, and the node's GPU count against the one
 * configured. Pure functions on JSON: no I/O, no locks. Every check they add carries "action"
 * (health_action.h) and "threshold_source"; docs/design.md lists every threshold with its
 * source. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "gpustate.h"
#include "health_action.h"

struct umd_config;
struct devices;

/* "crc", "replay", "recovery": the metric label and the counters' JSON keys. */
const char *health_nvlink_kind_name(enum gpu_nvlink_kind k);

/* PCIe replays a minute that the link's spec allows: 1e-12 (the PCIe base spec's bit error
 * rate) x the data rate of one lane after line encoding x lanes x 60 (Gen5 x16: 30.2). 0 for a
 * generation or width that is not PCIe's (gen 1-6, width 1-32). */
double health_pcie_replay_limit_per_min(int gen, int width);

/* The counters a verdict keeps, so that the next check can judge their rates: {"time_ms",
 * "pcie_replays" (or null), "nvlinks_active" (or null), "nvlink": [{"link", "crc", "replay",
 * "recovery"}, ...] (only links with a counter read)}. NULL on allocation failure. */
json_t *health_links_counters(const struct gpu_state *st, long long now_ms);

/* Appends the link checks to verdict (health_verdict's) and settles its "verdict", "reasons"
 * and "action" again: now and before are health_links_counters' (before may be NULL: the first
 * check only reports); pcie is the link judged ({"current_gen", "current_width"}); expect is
 * models.h's expectation (its "nvlinks"); result is the health part's result, whose
 * context.conditions.gpu_before and gpu_after throttle reasons are judged and attached to the
 * bandwidth checks that did not pass. */
void health_links_judge(const struct umd_config *cfg, json_t *verdict, const json_t *now,
                        const json_t *before, const json_t *pcie, const json_t *expect,
                        const json_t *result);

/* The node's GPU count against cfg->expected_gpus (0: not checked, NULL): a check object
 * {"name": "gpu_count", "verdict", "reason", "action", "threshold_source", "expected",
 * "present", "missing": [bus ids]}. present_bus: the PCI bus ids of the GPUs umd owns; seen_bus:
 * the NVIDIA GPUs the PCI bus lists (may be NULL): those umd does not own are named missing. */
json_t *health_links_inventory(const struct umd_config *cfg, const json_t *present_bus,
                               const json_t *seen_bus);

/* The link and inventory metric families (health_links_metrics.c): umd_gpu_pcie_replays_total,
 * umd_gpu_nvlink_errors_total, umd_gpu_nvlinks_active, umd_node_gpus_expected and
 * umd_node_gpus_present, from each device's last look. Takes core_lock. */
void health_links_metrics(FILE *f, const struct umd_config *cfg, const struct devices *ds);
