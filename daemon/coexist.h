/* Living beside the GPUs' owners: a thread that looks at every GPU (gpustate) every
 * busy_poll_ms, so that parts wait for GPUs in use by others and numbers measured beside them
 * are marked, and that runs the canonical health check every health_interval_s on idle GPUs. */
#pragma once

struct coexist;
struct umd_daemon;

/* Once d->sup runs: 0 with *ret, or -errno (logged; *ret untouched). */
int coexist_start(const struct umd_daemon *d, struct coexist **ret);
/* Joins the thread and frees cx; NULL is a no-op. */
void coexist_stop(struct coexist *cx);
