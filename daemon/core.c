/* core.h, the seam the HTTP layer calls: devices, health, version and catalog answered here,
 * and the job functions forwarded to the job subsystem (jobs.h) with the daemon's one struct
 * jobs, pauses to devctl.c and metrics to metrics.c. (problem_set() and friends are in
 * problem.c.) */
#include "core.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "catalog.h"
#include "config.h"
#include "daemon.h"
#include "devctl.h"
#include "devices.h"
#include "gpustate.h"
#include "health_action.h"
#include "health_links.h"
#include "job_state.h"
#include "jobs.h"
#include "jsonutil.h"
#include "metrics.h"
#include "store.h"
#include "umd-build.h"
#include "umd-vcs.h"
#include "util.h"
#include "xid.h"

/* A GPU's problem in GET /v1/health: its index, uuid, state and the reason given for it. */
#define HEALTH_WHY_MAX 512
/* The store's damage, as store.c words it (a sentence), in one problem. */
#define HEALTH_STORE_WHY_MAX 400
/* A failing commit's problem: a fixed sentence and strerror's words. */
#define HEALTH_COMMIT_WHY_MAX 160

static const struct umd_config *core_config;
/* main.c's daemon: its jobs member is read at each call, set by main.c before the listeners
 * start and cleared only after they stopped (daemon.h). */
static const struct umd_daemon *core_daemon;

void core_init(const struct umd_daemon *d)
{
        core_config = d->cfg;
        core_daemon = d;
}

static struct jobs *core_jobs(void)
{
        return core_daemon->jobs;
}

static struct devices *core_devices(void)
{
        return core_daemon->devices;
}

/* A job's answer from memory leaves core_lock with the results that are kept as the worker's
 * bytes unparsed (job_doc_public_copy): they are parsed here, outside the lock, before the API
 * dumps the answer. r: what the job function returned. */
static int expanded(int r, json_t **ret_job, struct problem *p)
{
        if (r < 0 || !*ret_job || job_doc_public_expand(*ret_job) == 0)
                return r;
        json_decref(*ret_job);
        *ret_job = NULL;
        return problem_set(p, 500, "", "out of memory reading the job's results");
}

/* A submit's answer as a job function left it (r), its job's results parsed. */
static int submitted_expanded(int r, struct core_submitted *ret, struct problem *p)
{
        if (r >= 0 && ret->job) {
                r = expanded(r, &ret->job, p);
                if (r < 0)
                        core_submitted_done(ret);
        }
        return r;
}

int core_job_submit(const json_t *body, const char *idempotency_key, const char *client,
                    struct core_submitted *ret, struct problem *p)
{
        return submitted_expanded(job_submit(core_jobs(), body, idempotency_key, client, ret, p),
                                  ret, p);
}

int core_job_submit_when_done(struct job_submit_wait *w, void (*ready)(void *arg), void *arg)
{
        return job_submit_when_done(w, ready, arg);
}

int core_job_submit_end(struct job_submit_wait *w, struct core_submitted *ret, struct problem *p)
{
        return submitted_expanded(job_submit_end(w, ret, p), ret, p);
}

int core_job_get(const char *id, json_t **ret_job, struct problem *p)
{
        return expanded(job_query_get(core_jobs(), id, ret_job, p), ret_job, p);
}

int core_job_get_finished(const char *id, struct blob **ret_body, struct problem *p)
{
        return job_query_get_finished(core_jobs(), id, ret_body, p);
}

bool core_job_state_final(const char *state)
{
        int s = job_state_from_string(state);
        return s >= 0 && job_state_final((enum job_state)s);
}

uint64_t core_jobs_generation(void)
{
        return jobs_generation(core_jobs());
}

void core_set_job_listener(core_job_listener fn, void *userdata)
{
        jobs_set_listener(core_jobs(), fn, userdata);
}

int core_job_list(const struct job_filter *f, struct job_rows *ret, struct problem *p)
{
        return job_query_list(core_jobs(), f, ret, p);
}

unsigned core_list_limit_max(void)
{
        return core_config->list_limit_max;
}

int core_device_index(const char *id, size_t *ret_index)
{
        ssize_t i;

        core_lock();
        i = devices_find(core_devices(), id);
        core_unlock();
        if (i < 0)
                return -ENODEV;
        *ret_index = (size_t)i;
        return 0;
}

int core_job_cancel(const char *id, const char *client, bool admin, json_t **ret_job,
                    struct problem *p)
{
        return expanded(job_cancel(core_jobs(), id, client, admin, ret_job, p), ret_job, p);
}

json_t *core_node_json(void)
{
        core_lock();
        json_t *node = job_query_node_json_locked(core_jobs());
        core_unlock();
        return node;
}

json_t *core_devices_json(void)
{
        json_t *arr = json_array();
        core_lock();
        for (size_t i = 0; i < devices_size(core_devices()); i++) {
                json_t *dev = device_to_json(devices_at(core_devices(), i));
                xid_decorate_device(core_daemon->xid, i, dev);
                json_array_append_new(arr, dev);
        }
        core_unlock();
        return arr;
}

/* A verdict's action (health_action.h); none without one (a verdict stored before actions). */
static enum health_action verdict_action(const json_t *verdict)
{
        enum health_action a = HEALTH_ACTION_NONE;
        (void)health_action_from_name(json_string_value(json_object_get(verdict, "action")), &a);
        return a;
}

/* The indexes start-up rebuilt, a comma and a space apart (store_repair.c), as a list. */
static json_t *store_repaired_json(void)
{
        json_t *repaired = json_array();
        const char *names = job_query_store_repaired(core_jobs());

        for (const char *at = names; at && *at;) {
                size_t len = strcspn(at, ",");

                json_array_append_new(repaired, json_stringn(at, len));
                at += len;
                at += strspn(at, ", ");
        }
        return repaired;
}

/* What GET /v1/health counts of the GPUs: usable, faulted (or stopped), failing their health
 * check, and the most severe action their verdicts ask for. */
struct health_tally {
        size_t usable, faulted, failing;
        enum health_action action;
};

/* Each GPU's verdict (with the Xid watch's) into verdicts, what is wrong with it into problems,
 * its PCI bus id into present, its counts into t. core_lock held. */
static void health_devices_locked(struct health_tally *t, json_t *problems, json_t *verdicts,
                                  json_t *present)
{
        char why[HEALTH_WHY_MAX];

        for (size_t i = 0; i < devices_size(core_devices()); i++) {
                struct device *d = devices_at(core_devices(), i);
                /* with the Xid watch's check: a failing Xid counts the moment it is read */
                json_t *last = xid_compose_verdict(core_daemon->xid, i, d->last_verdict);
                const char *verdict = json_string_value(json_object_get(last, "verdict"));
                enum health_action a = verdict_action(last);
                t->action = health_action_max(t->action, a);
                json_array_append(present, json_object_get(d->info, "pci_bus_id"));
                json_array_append_new(verdicts,
                                      json_pack("{s:I, s:s, s:s, s:o?}", "index", (json_int_t)i,
                                                "uuid", d->uuid, "state", device_state_string(d),
                                                "last_health", last));
                if (d->wstate == WORKER_FAULTED || d->wstate == WORKER_STOPPED) {
                        t->faulted++;
                        snprintf(why, sizeof(why), "device %zu (%s) is %s%s%s", i, d->uuid,
                                 device_state_string(d), d->reason[0] ? ": " : "", d->reason);
                        json_array_append_new(problems, json_string(why));
                } else if (verdict && strcmp(verdict, "fail") == 0) {
                        t->failing++;
                        snprintf(why, sizeof(why),
                                 "device %zu (%s) failed its last health check (action: %s)", i,
                                 d->uuid, health_action_name(a));
                        json_array_append_new(problems, json_string(why));
                } else {
                        t->usable++;
                }
        }
}

int core_health(json_t **ret_body)
{
        struct health_tally tally = {.action = HEALTH_ACTION_NONE};
        size_t n, queued, running, total;
        json_t *problems_arr = json_array(), *verdicts = json_array();
        char store_why[HEALTH_STORE_WHY_MAX], commit_why[HEALTH_COMMIT_WHY_MAX];
        const char *damage = job_query_store_damage(core_jobs());
        int commit_error = job_query_store_commit_error(core_jobs());

        job_query_counts(core_jobs(), &queued, &running, &total);
        /* The PCI bus is read before the lock: sysfs, but still I/O. */
        _cleanup_json_ json_t *seen = core_config->expected_gpus ? gpustate_pci_gpus() : NULL;
        _cleanup_json_ json_t *present = json_array();
        core_lock();
        n = devices_size(core_devices());
        health_devices_locked(&tally, problems_arr, verdicts, present);
        /* The node worker and the GPU pairs' verdict: a failing pair is a problem to report, but
         * no GPU is less usable for it (each GPU's own verdict says that). */
        json_t *node = job_query_node_json_locked(core_jobs());
        const char *pairs =
            json_string_value(json_object_get(json_object_get(node, "last_health"), "verdict"));
        tally.action =
            health_action_max(tally.action, verdict_action(json_object_get(node, "last_health")));
        if (pairs && strcmp(pairs, "fail") == 0)
                json_array_append_new(problems_arr,
                                      json_string("the GPU pairs failed their last health check"));
        const char *reason = NULL, *status = tally.usable ? "ok" : "unavailable";
        if (n == 0)
                reason = devices_why_empty(core_devices());
        else if (tally.usable == 0)
                reason = tally.failing ? "no device is both running and passing its health check"
                                       : "every device is faulted";
        core_unlock();
        /* Fewer GPUs than the node should have (issue 58): the node fails, usable or not. */
        json_t *inventory = health_links_inventory(core_config, present, seen);
        bool short_of = streq_ptr(json_string_value(json_object_get(inventory, "verdict")), "fail");
        if (short_of) {
                json_array_append(problems_arr, json_object_get(inventory, "reason"));
                if (tally.usable) {
                        status = "degraded";
                        reason = json_string_value(json_object_get(inventory, "reason"));
                }
        }
        /* A damaged store still runs jobs, but the history a client reads may be gone: say so
         * rather than 200 while lists answer 500. */
        if (damage) {
                snprintf(store_why, sizeof(store_why),
                         "the job store is damaged (%s): some finished jobs cannot be read",
                         damage);
                json_array_append_new(problems_arr, json_string(store_why));
                if (tally.usable) {
                        status = "degraded";
                        reason = store_why;
                }
        }
        /* A store that cannot commit runs nothing new (job_dispatch.c): the node is not usable
         * for jobs, whatever its GPUs say, and NHC, Slurm and Prometheus must see it. */
        if (commit_error) {
                snprintf(commit_why, sizeof(commit_why),
                         "the job store cannot commit (%s): no job part starts until it can",
                         strerror(-commit_error));
                json_array_append_new(problems_arr, json_string(commit_why));
                if (tally.usable) {
                        status = "degraded";
                        reason = commit_why;
                }
        }

        *ret_body = json_pack(
            "{s:s, s:s?, s:{s:I, s:I, s:I, s:I}, s:{s:I, s:I}, s:o, s:o, s:o, s:s, s:o, s:s, s:o}",
            "status", status, "reason", reason, "devices", "total", (json_int_t)n, "usable",
            (json_int_t)tally.usable, "faulted", (json_int_t)tally.faulted, "failing_health",
            (json_int_t)tally.failing, "jobs", "queued", (json_int_t)queued, "running",
            (json_int_t)running, "problems", problems_arr, "device_health", verdicts, "node",
            node ? node : json_null(), "store_check", job_query_store_check(core_jobs()),
            "store_repaired", store_repaired_json(), "store_commit",
            commit_error ? "failing" : "ok", "xid", xid_watch_json(core_daemon->xid));
        tally.action = health_action_max(tally.action, verdict_action(inventory));
        if (*ret_body) {
                json_object_set_new(*ret_body, "action",
                                    json_string(health_action_name(tally.action)));
                if (inventory)
                        json_object_set(*ret_body, "inventory", inventory);
        }
        json_decref(inventory);
        return tally.usable && !damage && !short_of && !commit_error ? 200 : 503;
}

json_t *core_version_json(void)
{
        return json_pack("{s:s, s:s, s:s, s:b}", "version", UMD_VERSION, "build", UMD_BUILD,
                         "cuda_runtime_built_against", UMD_CUDA_VERSION, "cuda",
                         (int)UMD_HAVE_CUDA);
}

json_t *core_params_schemas(void)
{
        struct catalog_limits lim = {.max_buffer_bytes = core_config->max_buffer_bytes};
        json_t *arr = json_array();

        for (size_t i = 0; arr && i < catalog_count(); i++) {
                const struct bench_def *b = catalog_get(i);
                json_t *pair = json_pack("[s, o]", b->name, catalog_params_schema(b, &lim));

                if (!pair || json_array_append_new(arr, pair) < 0) {
                        json_decref(arr);
                        return NULL;
                }
        }
        return arr;
}

json_t *core_catalog_json(void)
{
        struct catalog_limits lim = {.max_buffer_bytes = core_config->max_buffer_bytes};
        return catalog_to_json(&lim);
}

int core_device_pause(const char *id, const json_t *body, json_t **ret_device, struct problem *p)
{
        return devctl_pause(core_daemon->devctl, id, body, ret_device, p);
}

int core_device_resume(const char *id, json_t **ret_device, struct problem *p)
{
        return devctl_resume(core_daemon->devctl, id, ret_device, p);
}

char *core_metrics_text(size_t *ret_len)
{
        return metrics_text(core_daemon->metrics, ret_len);
}

void core_http_observe(const char *route, const char *method, int status)
{
        metrics_http_observe(core_daemon->metrics, route, method, status);
}
