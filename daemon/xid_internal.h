/* Between the Xid watch (xid.c) and its sources (xid_source.c): what a source hands over. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "xid.h"

/* Where an event came from; two events of one GPU and code from different origins within
 * xid_dedup_ms are one event (the driver's Xid 79 line and its "GPU has fallen off the bus"
 * line; a kernel line and NVML's event for it). */
enum xid_origin {
        XID_ORIGIN_KERNEL,        /* an Xid or SXid line */
        XID_ORIGIN_KERNEL_FALLEN, /* "has fallen off the bus" said without an Xid */
        XID_ORIGIN_NVML,          /* nvmlEventSetWait_v2's Xid event */
};

/* A kernel message msg, with its time in µs since boot (0: now) and, for the kernel ring's
 * look back, whether it was already seen by an earlier umd of this boot (the watermark). */
void xid_watch_feed(struct xid_watch *w, const char *msg, uint64_t boot_usec);
/* NVML's Xid event code on the GPU at PCI address bus. */
void xid_watch_feed_nvml(struct xid_watch *w, const char *bus, unsigned code);
/* Whether the thread should stop (xid_watch_stop). */
bool xid_watch_stopping(struct xid_watch *w);
/* The devices the watch was started for (d->devices), fixed for its life. */
struct devices *xid_watch_devices(struct xid_watch *w);

/* The source loop: runs in the watch's thread until xid_watch_stopping; stop_fd turns readable
 * when it should. spec: xid_source's value. uuids/n: the devices (for NVML's events). Sets
 * *ret_name to the source in use ("kmsg", "journal", "file", "nvml", "none") and *ret_why to why
 * none, through xid_watch_source_set. */
void xid_source_run(struct xid_watch *w, const char *spec, int stop_fd);
void xid_watch_source_set(struct xid_watch *w, const char *name, const char *why);
/* The watermark: the last kernel record (µs since boot) an earlier umd of this boot handled. */
uint64_t xid_watch_watermark(struct xid_watch *w);
/* NVML's Xid events on real GPUs, beside a kernel source; its own loop until stopping. */
void xid_source_nvml_run(struct xid_watch *w);
