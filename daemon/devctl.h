/* Pause and resume of devices, and their record in the state directory (see devctl.c). The
 * HTTP side calls core_device_pause/resume (declared in core.h). */
#pragma once

struct umd_daemon;

/* At start, before the supervisor: mark the devices paused.json names as paused. 0 or -errno
 * (logged); a malformed file is logged and ignored (no device paused). */
int devctl_load(const struct umd_daemon *d);
