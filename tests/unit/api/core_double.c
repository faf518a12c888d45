/* A test double of daemon/core.h for the api unit tests: every function records what it was
 * given and answers what the test put in `core_double`, so handlers are tested without a
 * daemon. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_double.h"

struct core_double core_double;

void core_double_reset(void)
{
        free(core_double.last_id);
        free(core_double.last_key);
        memset(&core_double, 0, sizeof(core_double));
}

static void record(char **slot, const char *s)
{
        free(*slot);
        *slot = s ? strdup(s) : NULL;
}

/* Count the call and answer: the problem the test asked for, or core_double.result. */
static int answer(struct problem *p)
{
        core_double.calls++;
        if (core_double.fail_status) {
                int r = problem_set(p, core_double.fail_status, core_double.fail_field,
                                    "double says no");
                p->retry_after_s = core_double.fail_retry_after;
                return r;
        }
        return core_double.result;
}

json_t *core_devices_json(void)
{
        core_double.calls++;
        return json_pack("[{s:s, s:i}]", "uuid", "GPU-fake", "index", 0);
}

json_t *core_node_json(void)
{
        core_double.calls++;
        return json_pack("{s:s}", "uuid", "node");
}

int core_health(json_t **ret_body)
{
        core_double.calls++;
        *ret_body = json_pack("{s:s}", "status", core_double.health == 503 ? "down" : "ok");
        return core_double.health ? core_double.health : 200;
}

json_t *core_version_json(void)
{
        core_double.calls++;
        return json_pack("{s:s}", "version", "test");
}

json_t *core_catalog_json(void)
{
        core_double.calls++;
        return json_pack("{s:[]}", "benchmarks");
}

/* Stands for the daemon's wait: only its address is used. */
static char fake_wait;

static int submitted(struct core_submitted *ret, struct problem *p)
{
        int r = answer(p);

        if (r >= 0) {
                ret->job = json_pack("{s:s, s:s}", "id", "0190a0b0-0000-7000-8000-000000000001",
                                     "state", "queued");
                snprintf(ret->id, sizeof(ret->id), "%s", "0190a0b0-0000-7000-8000-000000000001");
        }
        return r;
}

int core_job_submit(const json_t *body, const char *idempotency_key, const char *client,
                    struct core_submitted *ret, struct problem *p)
{
        record(&core_double.last_key, idempotency_key);
        if (core_double.submit_waits && ret->may_wait) {
                core_double.calls++;
                ret->wait = (struct job_submit_wait *)&fake_wait;
                return 2;
        }
        return submitted(ret, p);
}

int core_job_submit_when_done(struct job_submit_wait *w, void (*ready)(void *arg), void *arg)
{
        return 1;
}

int core_job_submit_end(struct job_submit_wait *w, struct core_submitted *ret, struct problem *p)
{
        if (w != (struct job_submit_wait *)&fake_wait)
                abort();
        core_double.submit_ends++;
        return submitted(ret, p);
}

int core_job_get(const char *id, json_t **ret_job, struct problem *p)
{
        int r;

        record(&core_double.last_id, id);
        r = answer(p);
        if (r >= 0)
                *ret_job = json_pack("{s:s}", "id", id);
        return r;
}

int core_job_list(const struct job_filter *f, struct job_rows *ret, struct problem *p)
{
        int r;

        core_double.last_filter = *f;
        r = answer(p);
        if (r >= 0) {
                *ret = (struct job_rows){.rows = strdup("[]"), .len = 2};
                if (core_double.list_more) {
                        ret->more = true;
                        snprintf(ret->last, sizeof(ret->last), "%s",
                                 "01890000-0000-7000-8000-000000000001");
                }
        }
        return r;
}

unsigned core_list_limit_max(void)
{
        return 1000;
}

/* Two devices: "0" and "1", or their uuids GPU-0 and GPU-1. */
int core_device_index(const char *id, size_t *ret_index)
{
        if (strcmp(id, "0") == 0 || strcmp(id, "GPU-0") == 0)
                *ret_index = 0;
        else if (strcmp(id, "1") == 0 || strcmp(id, "GPU-1") == 0)
                *ret_index = 1;
        else
                return -ENODEV;
        return 0;
}

int core_job_cancel(const char *id, const char *client, bool admin, json_t **ret_job,
                    struct problem *p)
{
        int r;

        record(&core_double.last_id, id);
        r = answer(p);
        if (r >= 0)
                *ret_job = json_pack("{s:s, s:s}", "id", id, "state", "cancelled");
        return r;
}

int core_device_pause(const char *id, const json_t *body, json_t **ret_device, struct problem *p)
{
        int r;

        record(&core_double.last_id, id);
        r = answer(p);
        if (r >= 0)
                *ret_device = json_pack("{s:s, s:b}", "uuid", id, "paused", 1);
        return r;
}

int core_device_resume(const char *id, json_t **ret_device, struct problem *p)
{
        int r;

        record(&core_double.last_id, id);
        r = answer(p);
        if (r >= 0)
                *ret_device = json_pack("{s:s, s:b}", "uuid", id, "paused", 0);
        return r;
}

char *core_metrics_text(size_t *ret_len)
{
        char *s = strdup("umd_up 1\n");

        core_double.calls++;
        if (s)
                *ret_len = strlen(s);
        return s;
}

void core_http_observe(const char *route, const char *method, int status)
{
        core_double.observed++;
}

bool core_job_state_final(const char *state)
{
        return state && (strcmp(state, "succeeded") == 0 || strcmp(state, "failed") == 0 ||
                         strcmp(state, "cancelled") == 0 || strcmp(state, "timed_out") == 0 ||
                         strcmp(state, "interrupted") == 0);
}

uint64_t core_jobs_generation(void)
{
        return 1;
}

void core_set_job_listener(core_job_listener fn, void *userdata)
{
}

json_t *core_params_schemas(void)
{
        return json_pack("[[s, {s:s, s:{s:{s:s}}, s:b}]]", "copy", "type", "object", "properties",
                         "size", "type", "integer", "additionalProperties", 0);
}

int core_job_get_finished(const char *id, struct blob **ret_body, struct problem *p)
{
        return 1; /* ask core_job_get */
}
