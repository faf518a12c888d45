/* A GPU's error state as NVML gives it, read in one pass and kept as the figures NVML answered:
 * remapped rows, ECC counts (volatile and aggregate, DRAM and SRAM, corrected and uncorrected),
 * ECC mode (current and pending), retired pages and pending retirement, NVML's GPU recovery
 * action and the InfoROM's validity. Every entry point is optional: a reading NVML cannot give
 * is {"unknown": "<why>"}, never a failure. It only reads; it judges nothing (daemon/
 * health_errors.c does) and resets or changes nothing. */
#pragma once

#include <jansson.h>

#include "nvml.h"

/* The readings' keys, one per check that judges them. */
#define NVML_ERRORS_REMAPPED_ROWS   "remapped_rows"
#define NVML_ERRORS_ECC             "ecc"
#define NVML_ERRORS_ECC_MODE        "ecc_mode"
#define NVML_ERRORS_RETIRED_PAGES   "retired_pages"
#define NVML_ERRORS_RECOVERY_ACTION "recovery_action"
#define NVML_ERRORS_INFOROM         "inforom"

/* Everything about dev:
 * {"remapped_rows": {"corrected", "uncorrected", "pending", "failure"},
 *  "ecc": {"volatile"|"aggregate": {"dram"|"sram": {"corrected", "uncorrected"}}},
 *  "ecc_mode": {"current": "on"|"off", "pending": "on"|"off"},
 *  "retired_pages": {"single_bit", "double_bit", "pending"},
 *  "recovery_action": {"value": N, "name": "none"|"gpu_reset"|...},
 *  "inforom": {"valid": bool}, "source": "nvml", "elapsed_us": N,
 *  "read_us": {reading: N, ...}}
 * where each reading NVML cannot give is {"unknown": why} (an ECC count alone is null, with
 * the first count's why in "ecc"'s "unknown"). NULL on allocation failure. inforom_kept (may be
 * NULL: read every time) keeps the first InfoROM reading that answered for the caller's life and
 * serves it again, marked "kept": true, with no NVML call: the InfoROM's checksum reads the whole
 * InfoROM (the whole read took 70 ms with it on an H100, driver 580: bench/results/nvml-errors/),
 * and it changes only with a firmware write. The caller owns *inforom_kept. */
json_t *nvml_errors_read(const struct nvml_api *api, nvml_device dev, json_t **inforom_kept);

/* Every reading {"unknown": why} (NVML absent, or the GPU unknown to it), "source": "none". */
json_t *nvml_errors_unknown(const char *why);

/* NVML's recovery action value in words ("none", "gpu_reset", "node_reboot", "drain_p2p",
 * "drain_and_reset"), or NULL for a value this build does not know. */
const char *nvml_recovery_action_name(long long value);
