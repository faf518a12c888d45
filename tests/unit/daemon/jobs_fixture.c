/* The job subsystem's unit-test fixture (see jobs_fixture.h): the fake supervisor and metrics the
 * job files call, the wrapped store calls, and helpers that go through core.h's contracts as
 * the API would. */
#include "jobs_fixture.h"

#include "../common/testutil.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "devctl.h"
#include "devices.h"
#include "log.h"
#include "metrics.h"
#include "store.h"
#include "util.h"

struct fx *fx;
/* The job fx_get read last (fx_state, fx_field and fx_part hand out parts of it). */
static json_t *last;
void (*fx_configure)(struct umd_config *cfg);

/* ---- the fake supervisor: one object, recording what it was asked ---- */

struct supervisor {
        int unused;
};
static struct supervisor fake_sup;

int supervisor_dispatch(struct supervisor *s, size_t device, const char *job_id,
                        const char *benchmark, const json_t *params, uint64_t timeout_ms)
{
        (void)s, (void)benchmark, (void)params, (void)timeout_ms;
        if (fx->dispatch_errno)
                return -fx->dispatch_errno;
        assert_true(fx->n_dispatched < ELEMENTSOF(fx->dispatched));
        fx->dispatched[fx->n_dispatched].device = device;
        snprintf(fx->dispatched[fx->n_dispatched++].job, JOB_ID_MAX, "%s", job_id);
        return 0;
}

int supervisor_cancel(struct supervisor *s, size_t device, const char *job_id)
{
        (void)s;
        assert_true(fx->n_cancelled < ELEMENTSOF(fx->cancelled));
        fx->cancelled[fx->n_cancelled].device = device;
        snprintf(fx->cancelled[fx->n_cancelled++].job, JOB_ID_MAX, "%s", job_id);
        return 0;
}

pid_t supervisor_worker_pid(struct supervisor *s, size_t device)
{
        (void)s;
        return device < ELEMENTSOF(fx->worker_pids) ? fx->worker_pids[device] : 0;
}

void supervisor_retire(struct supervisor *s, size_t device)
{
        (void)s, (void)device;
        fx->retired++;
}

void supervisor_exit_after_each_part(struct supervisor *s, size_t device, bool on)
{
        (void)s, (void)device, (void)on;
}

unsigned supervisor_restarts(struct supervisor *s, size_t device)
{
        (void)s, (void)device;
        return 0;
}

unsigned supervisor_crashes(struct supervisor *s, size_t device)
{
        (void)s, (void)device;
        return 0;
}

const char *worker_state_to_string(enum worker_state st)
{
        return st == WORKER_IDLE ? "idle" : st == WORKER_FAULTED ? "faulted" : "other";
}

/* ---- metrics: the job files push, nobody reads here ---- */

void metrics_observe_queue(struct metrics *mt, size_t dev, size_t queued)
{
        (void)mt, (void)dev, (void)queued;
}

void metrics_observe_running(struct metrics *mt, size_t running)
{
        (void)mt, (void)running;
}

void metrics_observe_node(struct metrics *mt, const char *state, bool warm, const char *verdict)
{
        (void)mt, (void)state, (void)warm, (void)verdict;
}

void metrics_job_finished(struct metrics *mt, const char *benchmark, const char *state,
                          double duration_s)
{
        (void)mt, (void)benchmark, (void)state, (void)duration_s;
}

const char *const metrics_result_paths[] = {"benchmark", "measurements[].name", NULL};

void metrics_part_result(struct metrics *mt, const char *uuid, const json_t *result, bool canonical)
{
        (void)mt, (void)uuid, (void)result, (void)canonical;
}

void metrics_health_result(struct metrics *mt, const char *uuid, const char *link,
                           const json_t *result, bool contended)
{
        (void)mt, (void)uuid, (void)link, (void)result, (void)contended;
}

void metrics_health_node_result(struct metrics *mt, const json_t *result)
{
        (void)mt, (void)result;
}

char *metrics_text(struct metrics *mt, size_t *ret_len)
{
        (void)mt, (void)ret_len;
        return NULL;
}

void metrics_http_observe(struct metrics *mt, const char *route, const char *method, int status)
{
        (void)mt, (void)route, (void)method, (void)status;
}

int fx_stored(struct store *s, const char *id, json_t **ret)
{
        struct store_text t;
        json_error_t e;
        int r = store_get(s, id, &t);

        if (r < 0)
                return r;
        *ret = json_loadb(t.doc, t.doc_len, 0, &e);
        store_text_free(&t);
        return *ret ? 0 : -EBADMSG;
}

/* ---- store failures, injected between the job files and the real store ---- */

int __real_store_put(struct store *s, const char *id, const struct store_row_maker *maker,
                     void *src, struct store_ticket **ret_ticket);
int __wrap_store_put(struct store *s, const char *id, const struct store_row_maker *maker,
                     void *src, struct store_ticket **ret_ticket);
int __real_store_put_row(struct store *s, struct store_row *row, struct store_ticket **ret_ticket);
int __wrap_store_put_row(struct store *s, struct store_row *row, struct store_ticket **ret_ticket);
int __real_store_put_part(struct store *s, const char *job_id, size_t idx, const char *state,
                          char *doc, size_t doc_len, struct store_ticket **ret_ticket);
int __wrap_store_put_part(struct store *s, const char *job_id, size_t idx, const char *state,
                          char *doc, size_t doc_len, struct store_ticket **ret_ticket);
int __real_store_ticket_wait(struct store_ticket *t, char **ret_doc, size_t *ret_len);
int __wrap_store_ticket_wait(struct store_ticket *t, char **ret_doc, size_t *ret_len);
int __real_store_ticket_poll(struct store_ticket *t, int *ret_r);
int __wrap_store_ticket_poll(struct store_ticket *t, int *ret_r);
int __real_store_get_internal(struct store *s, const char *id, struct store_text *ret);
int __wrap_store_get_internal(struct store *s, const char *id, struct store_text *ret);

int __real_store_get_internal_many(struct store *s, const char *const *ids, size_t n,
                                   struct store_text *ret);
int __wrap_store_get_internal_many(struct store *s, const char *const *ids, size_t n,
                                   struct store_text *ret);

int __wrap_store_get_internal_many(struct store *s, const char *const *ids, size_t n,
                                   struct store_text *ret)
{
        if (fx) {
                fx->batch_reads++;
                fx->batch_jobs += (unsigned)n;
        }
        return __real_store_get_internal_many(s, ids, n, ret);
}

int __wrap_store_get_internal(struct store *s, const char *id, struct store_text *ret)
{
        if (fx)
                fx->read_backs++;
        return __real_store_get_internal(s, id, ret);
}

/* A job's whole row (final or not): src taken either way, as the store takes it. */
int __wrap_store_put(struct store *s, const char *id, const struct store_row_maker *maker,
                     void *src, struct store_ticket **ret_ticket)
{
        if (fx && fx->fail_put > 0) {
                fx->fail_put--;
                maker->drop(src);
                return -ENOMEM;
        }
        return __real_store_put(s, id, maker, src, ret_ticket);
}

/* A submit's: the same failures as store_put's and store_ticket_wait's (the row taken either way).
 */
int __wrap_store_put_row(struct store *s, struct store_row *row, struct store_ticket **ret_ticket)
{
        if (fx && fx->fail_put > 0) {
                fx->fail_put--;
                store_row_free(row);
                return -ENOMEM;
        }
        return __real_store_put_row(s, row, ret_ticket);
}

/* A wait: fail_wait's failures; a submit's (the one that asks for its bytes) calls
 * after_commit first. */
int __wrap_store_ticket_wait(struct store_ticket *t, char **ret_doc, size_t *ret_len)
{
        char *doc = NULL;
        size_t len = 0;
        int r = __real_store_ticket_wait(t, ret_doc ? &doc : NULL, ret_doc ? &len : NULL);

        if (ret_doc && fx && fx->after_commit)
                fx->after_commit();
        if (fx && fx->fail_wait > 0) {
                fx->fail_wait--;
                free(doc);
                return -EIO;
        }
        if (doc) {
                *ret_doc = doc;
                *ret_len = len;
        }
        return r;
}

/* A part's state, a part's start that is waited for (job_start.c) and a part's own document
 * (doc taken either way). */
int __wrap_store_put_part(struct store *s, const char *job_id, size_t idx, const char *state,
                          char *doc, size_t doc_len, struct store_ticket **ret_ticket)
{
        if (fx && fx->fail_put_part > 0) {
                fx->fail_put_part--;
                free(doc);
                return -ENOMEM;
        }
        if (fx)
                fx->part_docs += doc != NULL;
        return __real_store_put_part(s, job_id, idx, state, doc, doc_len, ret_ticket);
}

int __wrap_store_ticket_poll(struct store_ticket *t, int *ret_r)
{
        int r = __real_store_ticket_poll(t, ret_r);

        if (r > 0 && fx && fx->fail_poll > 0) {
                fx->fail_poll--;
                *ret_r = -EIO;
        }
        return r;
}

/* ---- the jobs' clock: the system's, fx->clock_ahead_ms ahead ---- */

static uint64_t fx_monotonic_ms(void *data)
{
        (void)data;
        return now_monotonic_ms() + fx->clock_ahead_ms;
}

static uint64_t fx_realtime_ms(void *data)
{
        (void)data;
        return now_realtime_ms() + fx->clock_ahead_ms;
}

static const struct jobs_clock fx_clock = {.monotonic_ms = fx_monotonic_ms,
                                           .realtime_ms = fx_realtime_ms};

uint64_t fx_clock_monotonic_ms(void)
{
        return fx_monotonic_ms(NULL);
}

void fx_clock_advance(uint64_t ms)
{
        fx->clock_ahead_ms += ms;
}

/* ---- set-up ---- */

/* As umd's main loop does once a part's start commits (job_start.c): the parts whose starts
 * were queued are sent (or queued again). Every helper that may dispatch ends with it, so that
 * a test sees a part sent as soon as the change that dispatched it returns. */
void fx_settle_starts(void)
{
        for (int round = 0; round < 2; round++) {
                store_sync(fx->d.store);
                jobs_starts_committed(fx->d.jobs);
        }
}

static void fx_start(unsigned n_devices)
{
        const char *worker = getenv("UMD_WORKER");

        assert_non_null(worker);
        fx->cfg.fake_devices = n_devices;
        assert_int_equal(devices_new(&fx->cfg, worker, &fx->d.devices), 0);
        assert_int_equal(devices_size(fx->d.devices), n_devices);
        assert_int_equal(store_open(fx->dir, &fx->d.store), 0);
        assert_int_equal(jobs_init(&fx->d, &fx->d.jobs), 0);
        job_verdict_restore(fx->d.jobs);
        assert_int_equal(devctl_new(&fx->d, &fx->d.devctl), 0);
        core_init(&fx->d);
        job_dispatch_callbacks(fx->d.jobs, &fx->cb);
        job_dispatch_attach_supervisor(fx->d.jobs, &fake_sup);
        fx_settle_starts();
}

static void fx_stop(void)
{
        jobs_quiesce(fx->d.jobs);
        devctl_free(fx->d.devctl);
        fx->d.devctl = NULL;
        jobs_shutdown(fx->d.jobs);
        fx->d.jobs = NULL;
        store_close(fx->d.store);
        fx->d.store = NULL;
        fx->d.devices = devices_free(fx->d.devices);
}

int fx_setup(void **state)
{
        fx = calloc(1, sizeof(*fx));
        if (!fx)
                return -1;
        log_set_level(LOG_ERR);
        fx->dir = scratch_dir_new();
        if (!fx->dir)
                return -1;
        config_init(&fx->cfg);
        free(fx->cfg.state_dir);
        fx->cfg.state_dir = strdup(fx->dir);
        if (fx_configure)
                fx_configure(&fx->cfg);
        fx->d = (struct umd_daemon){.cfg = &fx->cfg, .signal_fd = -1, .jobs_clock = &fx_clock};
        fx_start(2);
        *state = fx;
        return 0;
}

int fx_teardown(void **state)
{
        (void)state;
        json_decref(last);
        last = NULL;
        fx_stop();
        config_free(&fx->cfg);
        scratch_dir_free(fx->dir);
        free(fx);
        fx = NULL;
        return 0;
}

void fx_restart(unsigned n_devices, bool crash)
{
        /* A crash writes nothing more: shutdown's writes are refused as a dead process's are
         * never made. */
        if (crash)
                fx->fail_put = fx->fail_put_part = 1u << 20;
        fx_stop();
        fx->fail_put = fx->fail_put_part = 0;
        fx->n_dispatched = fx->n_cancelled = 0;
        fx_start(n_devices);
}

/* ---- what the API would ask ---- */

int fx_submit(const char *body, const char *idem, const char *client, char ret_id[JOB_ID_MAX])
{
        json_t *b = json_loads(body, 0, NULL);
        struct core_submitted sub = {.bytes_ok = true}; /* as the API asks */
        struct problem p = {0};
        int r;

        assert_non_null(b);
        r = core_job_submit(b, idem, client, &sub, &p);
        json_decref(b);
        if (r < 0)
                return p.status;
        assert_true((sub.job == NULL) != (sub.body == NULL));
        if (ret_id)
                snprintf(ret_id, JOB_ID_MAX, "%s", sub.id);
        core_submitted_done(&sub);
        fx_settle_starts();
        return r == 1 ? 200 : 202;
}

int fx_cancel(const char *id, const char *client, bool admin)
{
        json_t *job = NULL;
        struct problem p = {0};
        int r = core_job_cancel(id, client, admin, &job, &p);

        json_decref(job);
        fx_settle_starts();
        return r < 0 ? p.status : 200;
}

static json_t *fx_get(const char *id)
{
        struct problem p = {0};

        json_decref(last);
        last = NULL;
        if (core_job_get(id, &last, &p) < 0)
                last = NULL;
        return last;
}

const char *fx_state(const char *id)
{
        const char *s = json_string_value(json_object_get(fx_get(id), "state"));
        return s ? s : "?";
}

json_t *fx_field(const char *id, const char *key)
{
        return json_object_get(fx_get(id), key);
}

json_t *fx_part(const char *id, size_t i)
{
        return json_array_get(json_object_get(fx_get(id), "parts"), i);
}

void fx_part_done_looked(size_t dev, const char *id, enum part_outcome outcome,
                         const char *look_json)
{
        json_t *result = outcome == PART_SUCCEEDED ? json_pack("{s:f}", "gbps", 10.0) : NULL;
        json_t *look = look_json ? json_loads(look_json, 0, NULL) : NULL;

        assert_true(!look_json || look);
        fx->cb.part_done(fx->cb.userdata, dev, id, outcome, result, NULL, look,
                         outcome == PART_FAILED ? "it failed" : NULL, -1);
        json_decref(result);
        json_decref(look);
        /* As the supervisor does: the worker says it is idle once its part is done. */
        fx_worker_state(dev, WORKER_IDLE, NULL);
}

void fx_part_done(size_t dev, const char *id, enum part_outcome outcome)
{
        fx_part_done_looked(dev, id, outcome, NULL);
}

static void fx_poke(void *arg, ssize_t dev)
{
        (void)dev;
        assert_ptr_equal(arg, fx);
        fx->pokes++;
}

void fx_attach_looks(void)
{
        job_dispatch_attach_looks(fx->d.jobs, fx_poke, fx);
}

void fx_look(size_t dev, int others)
{
        struct gpu_state st = {.known = true, .other_processes = others, .compute_mode = "default"};

        job_dispatch_gpu_observed(fx->d.jobs, dev, &st, fx_clock_monotonic_ms());
        fx_settle_starts();
}

void fx_worker_state(size_t dev, enum worker_state st, const char *reason)
{
        fx->cb.worker_state(fx->cb.userdata, dev, st, reason);
        fx_settle_starts();
}
