/* The Xid watch: reads the kernel's messages (and NVML's Xid events) all the time, attributes
 * each Xid to its GPU by PCI address, classifies it by the Xid table's action (xid_table.h), and
 * holds each GPU's evidence: its recent events, its counters, and a failing state that lasts
 * until what the action asks for has been observed (a new boot). The failing state survives a
 * restart of umd (state_dir/xid-state.json). Answers are composed when asked: a GPU's verdict
 * worsens the moment its line is read, without waiting for a check. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct supervisor;
struct umd_daemon;
struct xid_watch;

/* Starts the watch of d (after discovery: it needs the devices' PCI addresses). A source that
 * cannot be opened is logged and reported in every answer, never fatal; -errno only for allocation
 * failure or an unreadable state file. */
int xid_watch_start(const struct umd_daemon *d, struct xid_watch **ret);
/* The supervisor started after the watch: from now on a pid of its workers marks an event
 * own_worker. */
void xid_watch_attach_supervisor(struct xid_watch *w, struct supervisor *sup);
/* Stops the thread and frees w (NULL: nothing). */
void xid_watch_stop(struct xid_watch *w);

/* Device index's verdict with the Xid check in it: a new verdict (the "xid" check replaced or
 * added, "verdict" the worst of the checks, "action" the most severe), or NULL where verdict is
 * NULL and nothing fails. verdict is not changed. w may be NULL (a new reference to verdict). */
json_t *xid_compose_verdict(struct xid_watch *w, size_t index, const json_t *verdict);
/* Adds "xid" (the watch's source, the GPU's failing state, counts and recent events) to dev,
 * device index's /v1/devices entry, and composes its "last_health". */
void xid_decorate_device(struct xid_watch *w, size_t index, json_t *dev);
/* The watch as /v1/health reports it: its source, and the events on no GPU of umd's (SXids of
 * the NVSwitches, Xids of GPUs umd does not own). */
json_t *xid_watch_json(struct xid_watch *w);
/* umd_gpu_xid_total and umd_xid_other_total, in Prometheus' text format. */
void xid_metrics(struct xid_watch *w, FILE *f);
