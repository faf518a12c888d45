/* umdctl health: the scheduler's check of this node (Slurm's HealthCheckProgram, NHC, the
 * prolog and epilog). Either reads each GPU's last canonical verdict when it is fresh enough
 * (--max-age), or submits the check and waits for it, then prints one line a GPU (or JSON) and
 * ends with the exit code the worst verdict calls for (cli.h). A GPU umd could not judge is
 * UNKNOWN, never PASS. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "answer.h"
#include "call.h"
#include "cli.h"
#include "cmd_health.h"
#include "http.h"

#define HEALTH_TIMEOUT_MS (50ull * 1000) /* inside Slurm's 60 s for a health-check program */
/* The extended tier fits umd's budget (health_extended_budget_s, 30 s by default) plus the wait
 * for busy GPUs; an epilog that allows less says so with --timeout. */
#define HEALTH_EXTENDED_TIMEOUT_MS (120ull * 1000)
#define CANCEL_RESERVE_MS          2000 /* of --timeout, kept for cancelling a check that ran out */
#define HEALTH_NOTE_MAX            128 /* what went wrong, after a part's state: a job id and words */

enum verdict { V_PASS, V_UNKNOWN, V_WARN, V_FAIL };
static const char *const verdict_upper[] = {"PASS", "UNKNOWN", "WARN", "FAIL"};
static const char *const verdict_lower[] = {"pass", "unknown", "warn", "fail"};

/* Of a verdict that passed answer_is_verdict(): only those three words get here. */
static enum verdict verdict_from(const json_t *verdict)
{
        const char *s = json_string_value(json_object_get(verdict, "verdict"));

        if (!strcmp(s, "pass"))
                return V_PASS;
        if (!strcmp(s, "warn"))
                return V_WARN;
        return V_FAIL;
}

/* Errors that say the check could not run on this GPU now, not that the GPU is bad. */
static bool error_means_unknown(const char *error)
{
        static const char *const words[] = {"in use", "paused", "busy", "other process", NULL};
        for (const char *const *w = words; error && *w; w++)
                if (strstr(error, *w))
                        return true;
        return false;
}

/* The verdict's reasons, then what the extended tier skipped ("skipped: ... would take about
 * ... ms"): a passing extended check that left something out says so on its line. */
static json_t *reasons_of(const json_t *verdict)
{
        json_t *r = json_object_get(verdict, "reasons"), *x;
        json_t *out = json_is_array(r) ? json_copy(r) : json_array();
        size_t i;

        json_array_foreach(json_object_get(verdict, "skipped"), i, x)
        {
                json_t *why = json_object_get(x, "reason");
                if (out && json_is_string(why))
                        json_array_append(out, why);
        }
        return out ? out : json_array();
}

static void report_add(json_t *list, const json_t *index, const char *uuid, enum verdict v,
                       json_t *reasons)
{
        json_array_append_new(list,
                              json_pack("{s:O?, s:s?, s:s, s:o}", "index", index, "uuid", uuid,
                                        "verdict", verdict_lower[v], "reasons", reasons));
}

/* umd's verdict into the report, with the action it asks for (none before umd had actions). */
static void report_verdict(json_t *list, const json_t *index, const char *uuid,
                           const json_t *verdict)
{
        json_t *action = json_object_get(verdict, "action");

        report_add(list, index, uuid, verdict_from(verdict), reasons_of(verdict));
        if (json_is_string(action))
                json_object_set(json_array_get(list, json_array_size(list) - 1), "action", action);
}

/* The actions' order (daemon/health_action.h): the report's overall action is the worst. */
static int action_rank(const char *action)
{
        static const char *const order[] = {"none", "restart_job", "reset_gpu", "reboot_node",
                                            "service"};
        for (int k = 0; action && k < (int)(sizeof(order) / sizeof(order[0])); k++)
                if (!strcmp(action, order[k]))
                        return k;
        return -1;
}

/* The node's GPU count (GET /v1/health's "inventory", there when umd has expected_gpus): a GPU
 * short fails the node on a line of its own. Nothing when umd does not say. */
static void health_inventory(struct http *h, json_t *list)
{
        struct http_answer ans;
        json_t *doc = NULL;

        /* A failed request may still hold a body (http_request's contract): freed either way. */
        if (http_request(h, "GET", "/v1/health", NULL, REQUEST_TIMEOUT_MS, &ans) >= 0 &&
            (ans.status == 200 || ans.status == 503))
                doc = http_answer_json(&ans);
        http_answer_free(&ans);
        json_t *inv = json_object_get(doc, "inventory");
        const char *v = json_string_value(json_object_get(inv, "verdict"));
        const char *why = json_string_value(json_object_get(inv, "reason"));
        if (v && why && strcmp(v, "pass") != 0) {
                json_t *action = json_object_get(inv, "action");
                report_add(list, NULL, "inventory", V_FAIL, json_pack("[s]", why));
                if (json_is_string(action))
                        json_object_set(json_array_get(list, json_array_size(list) - 1), "action",
                                        action);
        }
        json_decref(doc);
}

static int report_finish(json_t *list, const struct umdctl_args *a)
{
        bool any[4] = {false};
        const char *worst = NULL;
        size_t i;
        json_t *d;

        if (json_array_size(list) == 0) {
                fprintf(a->json ? stderr : stdout, "umd owns no GPU: nothing to check\n");
                any[V_FAIL] = true;
        }
        json_array_foreach(list, i, d)
        {
                enum verdict v = V_FAIL;
                const char *s = json_string_value(json_object_get(d, "verdict"));
                for (int k = 0; k < 4; k++)
                        if (!strcmp(s, verdict_lower[k]))
                                v = (enum verdict)k;
                any[v] = true;
                /* The action goes right after the verdict word, where no reason can mimic it;
                 * none is not printed, so a line without an action reads as it always did. */
                const char *action = json_string_value(json_object_get(d, "action"));
                if (action_rank(action) > action_rank(worst))
                        worst = action;
                if (a->json || (a->quiet && v == V_PASS))
                        continue;
                if (json_is_string(json_object_get(d, "index"))) /* the node's part */
                        printf("GPU pairs (every GPU) %s", verdict_upper[v]);
                else if (json_is_null(json_object_get(d, "index"))) /* the node's GPU count */
                        printf("GPU inventory (node) %s", verdict_upper[v]);
                else
                        printf("GPU %lld %s %s",
                               (long long)json_integer_value(json_object_get(d, "index")),
                               json_string_value(json_object_get(d, "uuid")), verdict_upper[v]);
                if (action && strcmp(action, "none") != 0)
                        printf(" action=%s", action);
                fputs(": ", stdout);
                json_t *reasons = json_object_get(d, "reasons"), *r;
                size_t k;
                if (json_array_size(reasons) == 0)
                        fputs(v == V_PASS ? "every check passed" : "no reason given", stdout);
                json_array_foreach(reasons, k, r)
                    printf("%s%s", k ? "; " : "", json_string_value(r));
                fputc('\n', stdout);
        }
        const char *overall = any[V_FAIL]      ? "fail"
                              : any[V_WARN]    ? "warn"
                              : any[V_UNKNOWN] ? "unknown"
                                               : "pass";
        if (a->json) {
                json_t *doc = json_pack("{s:s, s:s?, s:O}", "verdict", overall, "action", worst,
                                        "devices", list);
                call_print_json(doc);
                json_decref(doc);
        }
        if (any[V_FAIL] || (any[V_WARN] && !a->allow_warn))
                return UMDCTL_FAILED;
        if (any[V_UNKNOWN])
                return UMDCTL_UNKNOWN;
        return UMDCTL_OK;
}

/* false (with why) when the cached verdict lh is older than --max-age or has no time. */
static bool verdict_fresh(const json_t *lh, const struct umdctl_args *a, const struct timespec *now,
                          char *why, size_t len)
{
        if (!a->max_age_ms)
                return true;
        double t = call_rfc3339_seconds(json_string_value(json_object_get(lh, "time")));
        double age = (double)now->tv_sec + (double)now->tv_nsec / 1e9 - t;
        if (t >= 0 && age * 1000 <= (double)a->max_age_ms)
                return true;
        if (t < 0)
                snprintf(why, len, "the last verdict has no time");
        else
                snprintf(why, len, "the last verdict is %.0f s old (max age %.0f s)", age,
                         (double)a->max_age_ms / 1000);
        return false;
}

/* The GPU pairs' cached verdict (GET /v1/devices/node, on hosts with two GPUs or more) into
 * the report: none while the pairs were never checked; unknown when too old. */
static int health_cached_pairs(struct http *h, const struct umdctl_args *a, json_t *list,
                               const struct timespec *now)
{
        json_t *node = NULL;
        int rc = call_json(h, "GET", "/v1/devices/node", NULL, REQUEST_TIMEOUT_MS, &node);
        char why[CALL_WHY_MAX];

        if (rc)
                return rc;
        json_t *lh = json_object_get(node, "last_health");
        if (!json_is_object(node) || !json_is_string(json_object_get(node, "uuid")) ||
            !(json_is_null(lh) || (json_is_object(lh) && answer_is_verdict(lh)))) {
                json_decref(node);
                return call_odd_answer("GET", "/v1/devices/node", "the node worker");
        }
        json_t *all = json_string("all");
        if (json_is_object(lh) && !verdict_fresh(lh, a, now, why, sizeof(why)))
                report_add(list, all, "node", V_UNKNOWN, json_pack("[s]", why));
        else if (json_is_object(lh))
                report_verdict(list, all, "node", lh);
        json_decref(all);
        json_decref(node);
        return 0;
}

static int health_cached(struct http *h, const struct umdctl_args *a)
{
        json_t *doc = NULL, *d, *list = json_array();
        struct timespec ts;
        size_t i;
        int rc = call_json(h, "GET", "/v1/devices", NULL, REQUEST_TIMEOUT_MS, &doc);

        if (rc) {
                json_decref(list);
                return rc;
        }
        if (!answer_is_device_list(doc)) {
                json_decref(doc);
                json_decref(list);
                return call_odd_answer("GET", "/v1/devices", "a list of devices");
        }
        clock_gettime(CLOCK_REALTIME, &ts);
        json_array_foreach(doc, i, d)
        {
                json_t *lh = json_object_get(d, "last_health");
                json_t *index = json_object_get(d, "index");
                const char *uuid = json_string_value(json_object_get(d, "uuid"));
                const char *state = json_string_value(json_object_get(d, "state"));
                char why[CALL_WHY_MAX];

                if (json_is_true(json_object_get(d, "paused")) || !strcmp(state, "paused")) {
                        const char *pr = json_string_value(json_object_get(d, "pause_reason"));
                        snprintf(why, sizeof(why), "device paused%s%s", pr ? ": " : "",
                                 pr ? pr : "");
                        report_add(list, index, uuid, V_UNKNOWN, json_pack("[s]", why));
                        continue;
                }
                if (!strcmp(state, "faulted")) {
                        const char *sr = json_string_value(json_object_get(d, "state_reason"));
                        snprintf(why, sizeof(why), "device faulted%s%s", sr ? ": " : "",
                                 sr ? sr : "");
                        report_add(list, index, uuid, V_FAIL, json_pack("[s]", why));
                        continue;
                }
                if (!json_is_object(lh)) {
                        report_add(list, index, uuid, V_UNKNOWN,
                                   json_pack("[s]", "no health verdict yet"));
                        continue;
                }
                if (!verdict_fresh(lh, a, &ts, why, sizeof(why))) {
                        report_add(list, index, uuid, V_UNKNOWN, json_pack("[s]", why));
                        continue;
                }
                report_verdict(list, index, uuid, lh);
        }
        /* Only with every GPU asked for: the pairs span them all. */
        rc = json_array_size(doc) >= 2 && !a->devices ? health_cached_pairs(h, a, list, &ts) : 0;
        json_decref(doc);
        if (rc) {
                json_decref(list);
                return rc;
        }
        if (!a->devices)
                health_inventory(h, list);
        rc = report_finish(list, a);
        json_decref(list);
        return rc;
}

/* One part of the canonical check into the report. Only umd's own verdict on a part that
 * succeeded, or a part that failed or timed out for a reason other than being kept off the
 * GPU, is a failure: a part cancelled (by a pause, by someone's DELETE, by umdctl itself when
 * time ran out), interrupted, still queued or running, kept waiting, or run beside other
 * processes (contended: umd gives it no verdict), is unknown. false when a verdict is not umd's
 * shape. */
static bool health_part(json_t *list, const json_t *part, double timeout_s, const char *note)
{
        const char *state = json_string_value(json_object_get(part, "state"));
        const char *error = json_string_value(json_object_get(part, "error"));
        const char *waiting = json_string_value(json_object_get(part, "waiting"));
        json_t *index = json_object_get(part, "device"),
               *verdict = json_object_get(part, "verdict");
        const char *uuid = json_string_value(json_object_get(part, "uuid"));
        char why[CALL_WHY_MAX];

        if (!strcmp(state, "succeeded") && verdict && !json_is_null(verdict)) {
                if (!answer_is_verdict(verdict))
                        return false;
                report_verdict(list, index, uuid, verdict);
                return true;
        }
        if (!strcmp(state, "succeeded")) { /* umd judges no run that others disturbed */
                report_add(list, index, uuid, V_UNKNOWN,
                           json_pack("[s]", json_is_object(json_object_get(part, "contended"))
                                                ? "measured while other processes used the "
                                                  "GPU: not judged"
                                                : "umd gave no verdict"));
                return true;
        }
        if (!call_is_final(state)) {
                snprintf(why, sizeof(why), "no verdict within %.0f s (%s%s%s)", timeout_s,
                         waiting ? "waiting: " : "still ", waiting ? waiting : state, note);
                report_add(list, index, uuid, V_UNKNOWN, json_pack("[s]", why));
                return true;
        }
        if (!strcmp(state, "cancelled") || !strcmp(state, "interrupted") ||
            error_means_unknown(error)) {
                snprintf(why, sizeof(why), "the check could not run: %s",
                         error                           ? error
                         : !strcmp(state, "interrupted") ? "umd restarted during the check"
                                                         : "cancelled");
                report_add(list, index, uuid, V_UNKNOWN, json_pack("[s]", why));
                return true;
        }
        snprintf(why, sizeof(why), "health check %s: %s", state, error ? error : "no verdict");
        report_add(list, index, uuid, V_FAIL, json_pack("[s]", why));
        return true;
}

/* The health POST was not accepted. umd's own 503 about the devices asked for (no usable GPU,
 * a GPU faulted) is the node's fault: a failure. Anything else (a proxy's error page, umd busy
 * or stopping, a refusal) says nothing of the GPUs. */
static int health_refused(const struct http *h, const struct http_answer *ans, int rc)
{
        bool gpus_bad = false;

        if (rc == 0 && ans->status == 503 &&
            answer_is_umd_problem(ans->status, ans->content_type, ans->body, ans->len)) {
                json_t *j = http_answer_json(ans);
                const char *field = json_string_value(json_object_get(j, "field"));
                gpus_bad = field && (!strcmp(field, "device") || !strcmp(field, "devices"));
                json_decref(j);
        }
        rc = call_failed(h, ans, rc);
        return gpus_bad ? UMDCTL_FAILED : rc;
}

int cmd_health(struct http *h, const struct umdctl_args *a)
{
        uint64_t timeout = a->timeout_set ? a->timeout_ms
                           : a->extended  ? HEALTH_EXTENDED_TIMEOUT_MS
                                          : HEALTH_TIMEOUT_MS;
        uint64_t reserve = timeout / 5 < CANCEL_RESERVE_MS ? timeout / 5 : CANCEL_RESERVE_MS;
        json_t *body, *job = NULL, *done = NULL, *part, *list, *parts;
        struct http_answer ans;
        char path[CALL_PATH_MAX], note[HEALTH_NOTE_MAX] = "";
        size_t i;
        int rc;

        if (a->cached) {
                if (a->timeout_set) /* one request; --timeout bounds it (NHC gives 30 s) */
                        h->deadline_ms = call_now_ms() + a->timeout_ms;
                return health_cached(h, a);
        }

        /* --timeout bounds the whole run: the submit, the wait, and the cancel after a wait that
         * ran out, which gets the reserve the wait leaves. */
        h->deadline_ms = call_now_ms() + timeout;
        uint64_t wait_deadline = h->deadline_ms - reserve;

        /* The canonical check: a health job whose params name at most its tier, the only kind
         * that gives verdicts. */
        body = json_pack("{s:s, s:s, s:{s:s}}", "benchmark", "health", "priority", "high", "labels",
                         "source", a->extended ? "umdctl-health-extended" : "umdctl-health");
        if (body && a->extended)
                json_object_set_new(body, "params", json_pack("{s:s}", "tier", "extended"));
        if (a->devices)
                json_object_set(body, a->devices_plural ? "devices" : "device", a->devices);
        else
                json_object_set_new(body, "devices", json_string("all"));
        uint64_t now = call_now_ms();
        rc = http_request(h, "POST", "/v1/jobs", body,
                          (long)(wait_deadline > now ? wait_deadline - now : 1), &ans);
        json_decref(body);
        if (rc < 0 || !call_ok_status(ans.status)) {
                rc = health_refused(h, &ans, rc);
                http_answer_free(&ans);
                return rc;
        }
        job = http_answer_json(&ans);
        http_answer_free(&ans);
        if (!answer_is_job(job, NULL) || json_array_size(json_object_get(job, "parts")) == 0) {
                json_decref(job);
                return call_odd_answer("POST", "/v1/jobs", "an accepted health job");
        }
        const char *id = json_string_value(json_object_get(job, "id"));
        bool hung = false;
        rc = call_wait_final(h, id, wait_deadline, &done, &hung);
        if (rc == UMDCTL_UNKNOWN) {
                /* Leave nothing queued behind a busy GPU. The parts are reported as last seen
                 * (queued, running, waiting for another process), which says why, and each
                 * part's one line says what went wrong on the way. */
                snprintf(path, sizeof(path), "/v1/jobs/%s", id);
                bool cancelled =
                    http_request(h, "DELETE", path, NULL, REQUEST_TIMEOUT_MS, &ans) == 0 &&
                    call_ok_status(ans.status);
                http_answer_free(&ans);
                snprintf(note, sizeof(note), "%s%s%s", hung ? "; umd stopped answering" : "",
                         cancelled ? "" : "; could not cancel job ", cancelled ? "" : id);
        } else if (rc) {
                json_decref(job);
                return rc;
        }
        parts = json_object_get(done ? done : job, "parts");
        if (json_array_size(parts) == 0) {
                json_decref(done);
                json_decref(job);
                return call_odd_answer("GET", "/v1/jobs/ID", "a health job with its parts");
        }
        list = json_array();
        json_array_foreach(parts, i, part)
        {
                if (!health_part(list, part, (double)timeout / 1000, note)) {
                        rc = call_odd_answer("GET", "/v1/jobs/ID",
                                             "a health job with umd's verdicts");
                        goto out;
                }
        }
        if (!a->devices)
                health_inventory(h, list);
        rc = report_finish(list, a);
out:
        json_decref(list);
        json_decref(done);
        json_decref(job);
        return rc;
}
