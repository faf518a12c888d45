/* Pause and resume of devices, and their record in the state directory (see devctl.c). The
 * HTTP side calls core_device_pause/resume (core.h), which core.c forwards here. */
#pragma once

#include <jansson.h>

struct problem;
struct umd_daemon;

/* At start, before the supervisor: mark the devices paused.json names as paused. 0 or -errno
 * (logged); a malformed file is logged and ignored (no device paused). */
int devctl_load(const struct umd_daemon *d);
/* core_device_pause and core_device_resume (core.h): the same contracts. */
int devctl_pause(const char *id, const json_t *body, json_t **ret_device, struct problem *p);
int devctl_resume(const char *id, json_t **ret_device, struct problem *p);
