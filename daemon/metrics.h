/* Prometheus metrics: counters and gauges fed by the job files and the HTTP layer, rendered by
 * metrics_text() (core.c's core_metrics_text). Label sets are bounded (routes, states, benchmarks,
 * uuids, modes). Metrics depends on nothing of jobs: they push what it shows (no call back, no
 * include). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct metrics;
struct supervisor;
struct umd_daemon;

/* After discovery: the uptime clock starts, a queue gauge per device. d (its store: the job
 * count) must outlive metrics. 0 with *ret (freed by metrics_free), or -ENOMEM (logged). Every
 * function below takes the one it made (d->metrics; the job subsystem keeps a copy). */
int metrics_new(const struct umd_daemon *d, struct metrics **ret);
/* NULL is a no-op. */
void metrics_free(struct metrics *mt);
/* GET /metrics (core_metrics_text): Prometheus text, malloc'd; NULL on allocation failure. */
char *metrics_text(struct metrics *mt, size_t *ret_len);
/* A finished HTTP request (core_http_observe): route is the route pattern, never the path. */
void metrics_http_observe(struct metrics *mt, const char *route, const char *method, int status);
/* Pushed by the job files whenever core_lock is released (metrics never asks them): parts
 * queued on device dev, and parts running on every device and the node. */
void metrics_observe_queue(struct metrics *mt, size_t dev, size_t queued);
void metrics_observe_running(struct metrics *mt, size_t running);
/* The node worker (hosts with two GPUs or more): its state name, whether it holds contexts, the
 * GPU pairs' last verdict (NULL: none yet). Never called on a host with one GPU, which then
 * exports no node series. */
void metrics_observe_node(struct metrics *mt, const char *state, bool warm, const char *verdict);
/* A job reached a final state. duration_s: from start (or creation when never started). */
void metrics_job_finished(struct metrics *mt, const char *benchmark, const char *state,
                          double duration_s);
/* A part succeeded on device uuid: remember its measurements' GB/s. canonical: the part belongs
 * to the canonical health check (a health job without params); an ad-hoc health job's figures
 * are exported as benchmark="health_adhoc" so that they never pass for the canonical ones. */
void metrics_part_result(struct metrics *mt, const char *uuid, const json_t *result,
                         bool canonical);
/* All that metrics_part_result reads of a result, as json_raw_pick's paths (NULL-terminated):
 * a result kept as bytes is parsed only this far for it. */
extern const char *const metrics_result_paths[];
/* The canonical health check finished on GPU uuid. contended: another process used the GPU
 * while it ran; its figures then are not exported and umd_health_check_contended says so.
 * Otherwise its fleet figures (host copies each way, device memory) replace the GPU's last ones
 * in umd_health_bandwidth_bytes_per_second, labelled with link, the slot's capability
 * ("gen5x16"), since GPUs are compared with peers in slots like theirs. */
void metrics_health_result(struct metrics *mt, const char *uuid, const char *link,
                           const json_t *result, bool contended);
/* The node's canonical check of the GPU pairs: each GPU's slowest outgoing peer copy (copy
 * engine, one direction) becomes its figure "peer". */
void metrics_health_node_result(struct metrics *mt, const json_t *result);
void metrics_attach_supervisor(struct metrics *mt, struct supervisor *s);
