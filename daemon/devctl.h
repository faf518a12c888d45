/* Pause and resume of devices, and their record in the state directory (see devctl.c). The
 * HTTP side calls core_device_pause/resume (core.h), which core.c forwards here. */
#pragma once

#include <jansson.h>

struct devctl;
struct problem;
struct umd_daemon;

/* At start, once d->jobs exists and before the supervisor: mark the devices paused.json names
 * as paused. 0 with *ret (freed by devctl_free), or -errno (logged; *ret untouched); a malformed
 * file is logged and ignored (no device paused). */
int devctl_new(const struct umd_daemon *d, struct devctl **ret);
/* NULL is a no-op. */
void devctl_free(struct devctl *dc);
/* core_device_pause and core_device_resume (core.h): the same contracts. */
int devctl_pause(struct devctl *dc, const char *id, const json_t *body, json_t **ret_device,
                 struct problem *p);
int devctl_resume(struct devctl *dc, const char *id, json_t **ret_device, struct problem *p);
