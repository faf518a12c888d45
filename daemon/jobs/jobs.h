/* Jobs as the rest of the daemon drives them: one object (struct jobs) made by jobs_init and
 * freed by jobs_shutdown, passed to each function, as the store and the supervisor are. Its
 * files, all in daemon/jobs/ and each exporting names of its own prefix:
 *   job_index.c    jobs_*, job_*: the object, the index of open jobs, their state machine,
 *                  persistence, recovery at start, retention, and the generation waiters watch;
 *   job_dispatch.c job_dispatch_*: which part runs next where, the supervisor's callbacks, and
 *                  what the GPU looks (coexist.c) and pauses (devctl.c) change;
 *   job_submit.c   job_submit: a new job; job_cancel.c job_cancel: cancelling one;
 *   job_query.c    job_query_*: reading jobs (one, a page of rows, counts, the node's entry);
 *   job_verdict.c  job_verdict_*: the canonical health check's verdicts;
 *   job_state.c, job_queue.c, job_spec.c: the pure parts (states, queues, a job's spec).
 * internal/job_internal.h is what those files share; only they have it on their include path
 * (daemon/jobs/meson.build). The API's side is core.h, whose job functions core.c forwards to
 * the ones below. One lock (core_lock, lock.h) guards all of it and the device table. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "job_types.h"
#include "lock.h"

struct jobs;
struct store_row;
struct store_text;
struct umd_daemon;
struct supervisor;
struct supervisor_callbacks;

/* The job subsystem's clock, in milliseconds: monotonic for its delays and deadlines (a
 * pending write's JOB_PERSIST_DELAY_MS, a look after a part), realtime for the times a job's
 * document shows and the health interval. umd_daemon.jobs_clock NULL is the system's
 * (common/util.h's now_monotonic_ms and now_realtime_ms); a unit test passes its own, which
 * moves time past a delay at once instead of sleeping through it (tests/unit/daemon/
 * jobs_fixture.h's fx_clock_advance). */
struct jobs_clock {
        uint64_t (*monotonic_ms)(void *data);
        uint64_t (*realtime_ms)(void *data);
        void *data;
};

/* job_files.c: the old store's job files (STATE_DIR/jobs/<id>.json), the store's one-time import
 * and `umd --export` (main.c hands these to the store: store_set_files). job_files_import reads
 * every job file in dir, checking each with validate (spec_validate_stored; NULL: its shape
 * alone) and handing each good one's row, in id order, to put (which the row is lent to); bad
 * ones are set aside (renamed .corrupt, counted in *ret_corrupt), stale temporary files removed.
 * 0, or -errno (the directory, out of memory, or put's). job_files_export writes a stored row
 * to dirfd/<id>.json in the internal form: 0, -EBADMSG (not JSON: skipped) or -errno. */
typedef int (*job_files_validate_fn)(const json_t *job, char *why, size_t whylen);
int job_files_import(const char *dir, job_files_validate_fn validate,
                     int (*put)(struct store_row *row, void *ctx), void *ctx,
                     unsigned *ret_corrupt);
int job_files_export(int dirfd, const struct store_text *t);

/* job_doc.c: each part's result in pub (a public copy, its part objects its own) that is a raw node
 * (jsonraw.h: the worker's bytes) becomes its tree: an answer's parse, done once core_lock is
 * released. 0 or -ENOMEM. */
int job_doc_public_expand(json_t *pub);

/* Before READY: load the store, mark running jobs interrupted, re-queue queued ones (in
 * submission order), apply retention. 0 with *ret, or -errno (logged; *ret untouched). The
 * devices' last verdicts are restored by the caller (job_verdict_restore), once this returns. */
int jobs_init(const struct umd_daemon *d, struct jobs **ret);
/* After jobs_init: each device's newest verdict in the store, and the GPU pairs', so that
 * /v1/health serves them from the first request after a restart. */
void job_verdict_restore(struct jobs *js);
/* The Xid watch whose check every canonical verdict carries from now on (xid.h; NULL: none).
 * Before the supervisor starts. */
struct xid_watch;
void job_verdict_attach_xid(struct jobs *js, struct xid_watch *w);
/* The callbacks the supervisor should be started with (their userdata is js). */
void job_dispatch_callbacks(struct jobs *js, struct supervisor_callbacks *ret);
/* Once the supervisor runs: dispatch becomes possible. */
void job_dispatch_attach_supervisor(struct jobs *js, struct supervisor *s);
/* Periodic upkeep (retention by age). */
void jobs_tick(struct jobs *js);
/* Checks up to max of the jobs recovered without their documents parsed (job_checked), under
 * core_lock, and returns how many are left: the main loop calls it until 0, so that start-up
 * does not wait for it. */
size_t jobs_check_recovered(struct jobs *js, size_t max);
/* Every store_retry_ms: write again each finished job whose final write failed. */
void jobs_retry_unsaved(struct jobs *js);
/* The main loop polls jobs_start_fd (readable: a part's start committed or failed) and then
 * calls jobs_starts_committed, which sends each part whose start committed to its worker and
 * queues again each whose start failed (job_start.c). */
int jobs_start_fd(struct jobs *js);
void jobs_starts_committed(struct jobs *js);
/* At shutdown, before supervisor_stop: no more dispatches; running parts will be marked
 * interrupted by jobs_shutdown once the workers are gone. */
void jobs_quiesce(struct jobs *js);
/* After supervisor_stop: running parts are marked interrupted, final writes that failed are
 * retried (bounded by shutdown_timeout_s), and js is freed. NULL is a no-op. */
void jobs_shutdown(struct jobs *js);

/* With core_lock held: the node worker (benchmarks spanning GPUs, and the canonical check's GPU
 * pairs) as /v1/devices/node and /v1/health show it: {"uuid": "node", "device": "all", "gpus",
 * "state", "warm", "running", "restarts", "crashes", "last_health"} (last_health: the GPU pairs'
 * last canonical verdict or null). NULL on a host with fewer than two GPUs (no node worker) or
 * on allocation failure. */
json_t *job_query_node_json_locked(struct jobs *js);

/* Counts for STATUS= and /v1/health (metrics gets them pushed: jobs_publish_locked). */
void job_query_counts(struct jobs *js, size_t *ret_queued, size_t *ret_running, size_t *ret_total);
/* What is wrong with the job store's file (store_damage), or NULL. */
const char *job_query_store_damage(struct jobs *js);
/* The state of the store file's check after start: "pending", "ok" or "damaged". */
const char *job_query_store_check(struct jobs *js);
/* The indexes start-up rebuilt (store_repaired), or NULL. */
const char *job_query_store_repaired(struct jobs *js);
/* 0, or the -errno every commit of the store fails with (store_commit_error). */
int job_query_store_commit_error(struct jobs *js);

struct gpu_state;
/* What the last look at device dev's GPU found (coexist.c): other processes hold its queue
 * (busy_policy), mark a running part contended, and an EXCLUSIVE_PROCESS GPU gets no context
 * kept between parts. Takes core_lock. */
void job_dispatch_gpu_observed(struct jobs *js, size_t dev, const struct gpu_state *st,
                               uint64_t looked_ms);
/* The looker (coexist.c) offers poke (with its arg): a call asks it for a look now at GPU dev, or
 * at every GPU when dev is -1 (the node's part takes them all), without waiting for it. With one, a
 * part starts only on a look at its GPU that began after it was ready, and finishes only after a
 * look at its GPU that began once its worker was done; NULL (at stop, and in unit tests) goes
 * back to the last periodic look, and finishes any part still held. */
void job_dispatch_attach_looks(struct jobs *js, void (*poke)(void *arg, ssize_t dev), void *arg);
/* With core_lock held: start the next part of dev if it may run now (after a resume). */
void job_dispatch_locked(struct jobs *js, size_t dev);
/* Every store_retry_ms: once the store commits again after it could not, dispatches what
 * waited for it. Takes core_lock only then. */
void job_dispatch_store_watch(struct jobs *js);
/* With core_lock held, after dev was paused: cancel its running part, let its worker go. */
void job_dispatch_device_paused_locked(struct jobs *js, size_t dev);
/* With core_lock held: the devices whose canonical health check is due by health_interval_s
 * (idle, not paused, not in use by others); their clocks restart. Returns how many. *ret_all:
 * the GPU pairs are due too and every GPU is free at once, so the check is one job over every
 * GPU (which checks the pairs on the node worker); ret_devs then lists them all. */
size_t job_dispatch_health_due_locked(struct jobs *js, size_t *ret_devs, size_t max, bool *ret_all);

/* What core.h's job functions forward to (core.c): the same contracts, documented there. */
int job_submit(struct jobs *js, const json_t *body, const char *idempotency_key, const char *client,
               struct core_submitted *ret, struct problem *p);
int job_submit_when_done(struct job_submit_wait *w, void (*ready)(void *arg), void *arg);
int job_submit_end(struct job_submit_wait *w, struct core_submitted *ret, struct problem *p);
int job_cancel(struct jobs *js, const char *id, const char *client, bool admin, json_t **ret_job,
               struct problem *p);
int job_query_get(struct jobs *js, const char *id, json_t **ret_job, struct problem *p);
int job_query_get_finished(struct jobs *js, const char *id, struct blob **ret_body,
                           struct problem *p);
int job_query_list(struct jobs *js, const struct job_filter *f, struct job_rows *ret,
                   struct problem *p);
uint64_t jobs_generation(struct jobs *js);
void jobs_set_listener(struct jobs *js, core_job_listener fn, void *userdata);
