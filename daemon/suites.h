/* What a suite's numbers mean, computed by umd from the measurements a worker returned (real
 * or fake alike, so the two can never summarise differently):
 *   um_vs_explicit  per mode: effective GB/s, time, ratio to pinned copy + kernel; the best
 *                   mode; one sentence built from the numbers.
 *   sweep           per mode: the curve (size, GB/s, median time), its peak, and the smallest
 *                   size reaching 90% of the peak.
 *   peer, topology, managed_peer, host_all   topology.h's matrices and sentences.
 * Pure functions: no I/O, no locks. */
#pragma once

#include <jansson.h>

#include "catalog.h"

/* The reference every um_vs_explicit mode is compared with. */
#define UM_REFERENCE_MODE MEAS_UM_PINNED_COPY_KERNEL

/* A new "summary" object for result, or NULL when the benchmark has none. */
json_t *suite_summary(const char *benchmark, const json_t *result);
/* Whether suite_summary may summarise benchmark's results (false: it never reads them). */
bool suite_summarises(const char *benchmark);
