/* Prometheus metrics: counters fed by jobs.c and the HTTP layer, rendered by
 * core_metrics_text(). Label sets are bounded (routes, states, benchmarks, uuids, modes). */
#pragma once

#include <jansson.h>

struct supervisor;

void metrics_init(void);
/* A job reached a final state. duration_s: from start (or creation when never started). */
void metrics_job_finished(const char *benchmark, const char *state, double duration_s);
/* A part succeeded on device uuid: remember its measurements' GB/s. */
void metrics_part_result(const char *uuid, const json_t *result);
void metrics_attach_supervisor(struct supervisor *s);
