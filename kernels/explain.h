/* The explain pass (issue 17): CUPTI's Unified Memory counters around one untimed run of a
 * managed-memory benchmark, loaded at run time so a worker without CUPTI still runs every
 * benchmark and says why it cannot explain. Never on during timed samples: the counters halve
 * on-demand throughput. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

/* Loads CUPTI (once), then turns the Unified Memory counters on. Needs the CUDA context to exist
 * already (CUPTI answers NOT_READY before). 0, or -errno with *ret_why (static text, kept until
 * the next call) when no explanation can be had: CUPTI absent, too old, or refused. */
int explain_begin(const char **ret_why);

/* Flushes CUPTI until no new event came for quiet_ms (at most EXPLAIN_SETTLE_MAX_MS): what the
 * work synchronised so far did is counted. Returns whether it settled. Between explain_begin and
 * explain_end only. */
bool explain_drain(double quiet_ms);
/* The quiet that ends a drain between the pieces of one pass. */
#define EXPLAIN_PIECE_QUIET_MS 100.0

/* Drains, then forgets what was counted so far: the setup and prep before the explained work
 * are not part of its explanation. */
void explain_restart(void);

/* Turns the counters off, flushes CUPTI's buffers and returns what they counted since
 * explain_begin (new object; NULL on out of memory):
 *   {"available": true, "bytes_htod", "bytes_dtoh", "migrations_htod", "migrations_dtoh",
 *    "mean_migration_htod_bytes", "mean_migration_dtoh_bytes", "htod_bytes_by_cause": {...},
 *    "gpu_page_faults", "gpu_fault_records", "gpu_faults_by_access": {read, write, atomic,
 *    prefetch, unknown}, "cpu_page_faults", "thrashing_events", "thrashing_bytes",
 *    "throttling_events", "remote_map_events", "remote_map_bytes", "dropped_records"}
 * The caller must have synchronised the work it explains. */
json_t *explain_end(void);

/* What the result says when no explanation was had. */
json_t *explain_unavailable(const char *why);
