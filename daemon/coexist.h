/* Living beside the GPUs' owners: a thread that looks at every GPU (gpustate) every
 * busy_poll_ms, so that parts wait for GPUs in use by others and numbers measured beside them
 * are marked, and that runs the canonical health check every health_interval_s on idle GPUs. */
#pragma once

struct umd_daemon;

/* Once d->sup runs. 0 or -errno (logged). */
int coexist_start(const struct umd_daemon *d);
/* Joins the thread; safe when never started. */
void coexist_stop(void);
