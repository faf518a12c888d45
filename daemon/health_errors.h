/* GPU error-state verdicts: NVML's readings of a GPU's error state (common/nvml_errors.h's shape,
 * carried by the canonical check's result as "gpu_errors") judged into one check each, against
 * documented practice (NVIDIA's memory error management note, DCGM's health watch and limits),
 * with the action each calls for; and the action of every check and every verdict
 * (health_action.h). Pure functions: no I/O, no locks. */
#pragma once

#include <jansson.h>
#include <stdio.h>

struct devices;

/* Defaults a model entry may override (models.h: retired_pages_max, sram_uncorrected_max,
 * ecc_off). */
#define HEALTH_ERRORS_RETIRED_PAGES_MAX    63 /* DCGM_LIMIT_MAX_RETIRED_PAGES */
#define HEALTH_ERRORS_RETIRED_DBE_SOFT_MAX 15 /* DCGM_LIMIT_MAX_RETIRED_PAGES_SOFT_LIMIT */
#define HEALTH_ERRORS_SRAM_UNCORRECTED_MAX 4  /* NVIDIA's SRAM RMA threshold, per bank */

/* Appends to verdict's "checks" one check per reading of readings (remapped_rows, ecc_volatile,
 * ecc_aggregate, ecc_mode, retired_pages, recovery_action, inforom), each with "figures",
 * "action" and "threshold_source", adds the reasons of those that do not pass and raises
 * verdict's "verdict" to the worst. expect: models.h's expectation (its model's thresholds
 * override the defaults), may be NULL. readings NULL or not an object: nothing is judged (a
 * result from before umd read them). */
void health_errors_judge(json_t *verdict, const json_t *readings, const json_t *expect);

/* Gives every check of verdict its "action" where it has none (a failing bandwidth or link
 * check: reset_gpu, the least disruptive remedy that can restore a GPU's speed; any other:
 * none) and the verdict its "action": the most severe of its checks'. */
void health_actions_stamp(json_t *verdict);

/* /metrics' families of the GPUs' last canonical verdicts (health_metrics.c):
 * umd_gpu_health_action, umd_gpu_ecc_errors_total, umd_gpu_remapped_rows, umd_gpu_row_remap_pending
 * and _failure. Takes core_lock. */
void health_errors_metrics(FILE *f, const struct devices *ds);
