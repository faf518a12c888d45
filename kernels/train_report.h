/* What train_step's and embedding_gather's measurements add up to (issue 60), built the same
 * way from a real result and from the fake model's: train_step's placement matrix against all in
 * device memory, and embedding_gather's factors against HBM with the figures a sharding planner
 * assumes beside the measured ones. Plain C: jansson only. */
#pragma once

#include <jansson.h>

/* TorchRec's planner constants (torchrec/distributed/planner/constants.py at 0701f72): bytes/ms
 * as GiB/s / 1000, said here in decimal GB/s. A UVM lookup is DDR / 10; a UVM-caching one
 * (ratio * HBM + (1 - ratio) * DDR) / 10, ratio UVM_CACHING_RATIO. */
#define TORCHREC_HBM_GBPS          (897.0 * 1.073741824) /* HBM_MEM_BW: 897 GiB/s */
#define TORCHREC_DDR_GBPS          (51.0 * 1.073741824)  /* DDR_MEM_BW: 51 GiB/s */
#define TORCHREC_UVM_DIVISOR       10.0
#define TORCHREC_UVM_CACHING_RATIO 0.2

/* A managed cell is free when its steady step is within this of the all-device one. */
#define TRAIN_FREE_WITHIN 1.05

/* {"reference": {first_step_ms, steady_step_ms}, "classes": [...], "placements": [...],
 *  "rows": [{"class", "cells": {placement: {first_step_ms, steady_step_ms, first_vs_device,
 *  steady_vs_device}}}], "free": [cell names], "costs": [{name, first_vs_device,
 *  steady_vs_device}], "conclusion"} from train_step's measurements ("placement@class", each
 * with first_step_ms and its steady samples' stats). NULL without the "device@all" reference. */
json_t *train_matrix(const json_t *measurements);

/* {"factors": [{strategy, rows_per_s, gbps, factor_vs_device}], "planner": {"measured":
 *  {hbm_gbps, host_memory_gbps, pcie_gbps, uvm_lookup_gbps, uvm_factor}, "torchrec": {the same
 *  from its constants}, "off_by": {measured over TorchRec's, each}}, "conclusion"} from
 * embedding_gather's measurements (each "bytes" the rows gathered a step; whole_copy with
 * "copy_gbps", explicit_gather with "pack_gbps"). Figures a run did not measure are null. */
json_t *embed_report(const json_t *measurements, long long lookups);
