/* umdctl: the command-line client of umd. Owns the commands (submit, show, ls, cancel, devices,
 * health, pause, resume): what each asks umd, how it waits, what it prints and which exit code
 * it ends with (cli.h). Parsing lives in cli.c, HTTP in http.c, what an answer must look like
 * before a command reads it in answer.c. Never keeps state between runs. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "answer.h"
#include "cli.h"
#include "http.h"

#define REQUEST_TIMEOUT_MS 15000L
#define WAIT_SLICE_MS      60000 /* longest single ?wait= asked for: umd's default wait_max_s */
#define POLL_PAUSE_MS      250   /* between polls when umd answers ?wait= at once */
#define SUBMIT_TIMEOUT_MS  (3600ull * 1000)
#define HEALTH_TIMEOUT_MS  (50ull * 1000) /* inside Slurm's 60 s for a health-check program */
/* The extended tier fits umd's budget (health_extended_budget_s, 30 s by default) plus the wait
 * for busy GPUs; an epilog that allows less says so with --timeout. */
#define HEALTH_EXTENDED_TIMEOUT_MS (120ull * 1000)
#define CANCEL_RESERVE_MS          2000 /* of --timeout, kept for cancelling a check that ran out */
#define HEALTH_NOTE_MAX            128 /* what went wrong, after a part's state: a job id and words */
#define LS_DEFAULT_LIMIT           50u
#define LS_PAGE_MAX                500u

static const char *const final_states[] = {"succeeded", "failed",      "cancelled",
                                           "timed_out", "interrupted", NULL};

static bool is_final(const char *state)
{
        for (const char *const *s = final_states; state && *s; s++)
                if (!strcmp(*s, state))
                        return true;
        return false;
}

static uint64_t now_ms(void)
{
        return http_now_ms();
}

static void sleep_ms(uint64_t ms)
{
        struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
                              .tv_nsec = (long)(ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
}

/* Seconds since the epoch of an RFC 3339 UTC time ("2026-11-30T22:46:59.610Z"), or -1. */
static double rfc3339_seconds(const char *s)
{
        struct tm tm = {0};
        const char *rest = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
        double frac = 0;

        if (!rest)
                return -1;
        if (*rest == '.')
                frac = strtod(rest, NULL);
        return (double)timegm(&tm) + frac;
}

static void print_json(const json_t *j)
{
        json_dumpf(j, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
        fputc('\n', stdout);
}

/* The exit code for a request that did not get a 2xx, after saying why in one line. A request
 * that ran out of --timeout (h->deadline_ms) is an answer not had in time. */
static int request_failed(const struct http *h, const struct http_answer *a, int rc)
{
        char why[512];

        if (rc == -ETIMEDOUT && h->deadline_ms) {
                fprintf(stderr, "umdctl: no answer from umd at %s within --timeout: %s\n",
                        h->unix_socket ? h->unix_socket : h->base, a->error);
                return UMDCTL_UNKNOWN;
        }
        if (rc < 0) {
                fprintf(stderr, "umdctl: cannot reach umd at %s%s%s: %s\n",
                        h->unix_socket ? "unix socket " : "",
                        h->unix_socket ? h->unix_socket : h->base, "", a->error);
                return UMDCTL_UNREACHABLE;
        }
        http_answer_describe(a, why, sizeof(why));
        fprintf(stderr, "umdctl: %s\n", why);
        return UMDCTL_UNREACHABLE;
}

static bool ok_status(long s)
{
        return s >= 200 && s < 300;
}

/* An answer that came with a 2xx but is not what umd sends: never trusted, never "no GPU". */
static int odd_answer(const char *method, const char *path, const char *what)
{
        char p[200];

        snprintf(p, sizeof(p), "%s", path);
        text_clean(p, false);
        fprintf(stderr,
                "umdctl: the answer to %s %s is not %s: is something other than umd "
                "answering at this URL?\n",
                method, p, what);
        return UMDCTL_UNREACHABLE;
}

/* Request and parse a JSON answer. Returns 0 with *ret set, or an exit code after printing;
 * quiet_timeout: UMDCTL_UNKNOWN, unsaid, when --timeout ran out (the caller says it, in the one
 * line it prints for what it waited for). */
static int request_json_as(struct http *h, const char *method, const char *path, const json_t *body,
                           long timeout_ms, bool quiet_timeout, json_t **ret)
{
        struct http_answer a;
        int rc = http_request(h, method, path, body, timeout_ms, &a);

        if (quiet_timeout && rc == -ETIMEDOUT && h->deadline_ms) {
                http_answer_free(&a);
                return UMDCTL_UNKNOWN;
        }
        if (rc < 0 || !ok_status(a.status)) {
                rc = request_failed(h, &a, rc);
                http_answer_free(&a);
                return rc;
        }
        *ret = http_answer_json(&a);
        if (!*ret) {
                fprintf(stderr, "umdctl: %s %s answered HTTP %ld without JSON\n", method, path,
                        a.status);
                http_answer_free(&a);
                return UMDCTL_UNREACHABLE;
        }
        http_answer_free(&a);
        return 0;
}

static int request_json(struct http *h, const char *method, const char *path, const json_t *body,
                        long timeout_ms, json_t **ret)
{
        return request_json_as(h, method, path, body, timeout_ms, false, ret);
}

/* Percent-encode s for a query string. */
static void query_add(char **q, const char *key, const char *value)
{
        char enc[1024];
        size_t n = 0;

        for (const unsigned char *p = (const unsigned char *)value; *p && n + 4 < sizeof(enc);
             p++) {
                if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || strchr("-._~", *p))
                        enc[n++] = (char)*p;
                else
                        n += (size_t)snprintf(enc + n, sizeof(enc) - n, "%%%02X", *p);
        }
        enc[n] = 0;
        char *grown = NULL;
        if (asprintf(&grown, "%s%s%s=%s", *q ? *q : "", *q ? "&" : "?", key, enc) < 0)
                return;
        free(*q);
        *q = grown;
}

/* Wait until job id is final or the deadline (now_ms()) passes. Returns 0 with the final job
 * in *ret, UMDCTL_UNKNOWN with the last job seen in *ret (NULL when no answer came) when time ran
 * out, or an exit code. umd's ?wait= (milliseconds, "NNNms") holds the request until the job is
 * final, so a wait within umd's wait_max_s is one request; a umd that cuts it shorter, or an
 * older one that answers at once, is asked again, after a short pause when the answer came back
 * quickly. umd is asked to answer a little before the deadline, so that its answer (the state as
 * it is then) comes before the request's own limit: the deadline, or the slice and
 * REQUEST_TIMEOUT_MS when that comes first. *ret_hung is set when the time ran out in a
 * request umd did not answer (nothing is printed for it: the caller's one line says so). */
static int wait_final(struct http *h, const char *id, uint64_t deadline, json_t **ret,
                      bool *ret_hung)
{
        char path[256];
        json_t *job = NULL;
        int rc;

        for (;;) {
                uint64_t start = now_ms();
                if (start >= deadline) {
                        *ret = job;
                        return UMDCTL_UNKNOWN;
                }
                uint64_t left = deadline - start;
                uint64_t margin = left / 4 < 1000 ? left / 4 : 1000;
                uint64_t slice = left - margin < WAIT_SLICE_MS ? left - margin : WAIT_SLICE_MS;
                snprintf(path, sizeof(path), "/v1/jobs/%s?wait=%llums", id,
                         (unsigned long long)(slice ? slice : 1));
                json_t *next = NULL;
                uint64_t limit =
                    slice + REQUEST_TIMEOUT_MS < left ? slice + REQUEST_TIMEOUT_MS : left;
                rc = request_json_as(h, "GET", path, NULL, (long)limit, true, &next);
                if (rc == UMDCTL_UNKNOWN) { /* no answer in time: the last one seen stands */
                        *ret_hung = true;
                        *ret = job;
                        return rc;
                }
                json_decref(job);
                if (rc)
                        return rc;
                if (!answer_is_job(next, id)) {
                        json_decref(next);
                        return odd_answer("GET", path, "the job asked for");
                }
                job = next;
                if (is_final(json_string_value(json_object_get(job, "state")))) {
                        *ret = job;
                        return 0;
                }
                uint64_t now = now_ms();
                if (now >= deadline) {
                        *ret = job;
                        return UMDCTL_UNKNOWN;
                }
                if (now - start < 1000) {
                        uint64_t pause =
                            deadline - now < POLL_PAUSE_MS ? deadline - now : POLL_PAUSE_MS;
                        sleep_ms(pause);
                }
        }
}

static int print_job_text(struct http *h, const char *id)
{
        char path[256];
        struct http_answer a;

        snprintf(path, sizeof(path), "/v1/jobs/%s?format=text", id);
        int rc = http_request(h, "GET", path, NULL, REQUEST_TIMEOUT_MS, &a);
        if (rc < 0 || !ok_status(a.status)) {
                rc = request_failed(h, &a, rc);
                http_answer_free(&a);
                return rc;
        }
        if (!answer_is_job_text(a.content_type, a.body, id)) {
                http_answer_free(&a);
                return odd_answer("GET", path, "umd's text view of the job");
        }
        a.len = text_clean(a.body, true);
        fputs(a.body, stdout);
        if (a.len && a.body[a.len - 1] != '\n')
                fputc('\n', stdout);
        http_answer_free(&a);
        return 0;
}

static int job_exit(const json_t *job)
{
        const char *state = json_string_value(json_object_get(job, "state"));
        return state && !strcmp(state, "succeeded") ? UMDCTL_OK : UMDCTL_FAILED;
}

static int cmd_submit(struct http *h, const struct umdctl_args *a)
{
        json_t *body = json_pack("{s:s}", "benchmark", a->target), *job = NULL, *done = NULL;
        int rc;

        /* --timeout (or the default) bounds the whole run, the submit included */
        if (a->wait)
                h->deadline_ms = now_ms() + (a->timeout_set ? a->timeout_ms : SUBMIT_TIMEOUT_MS);
        if (a->devices)
                json_object_set(body, a->devices_plural ? "devices" : "device", a->devices);
        if (a->params)
                json_object_set(body, "params", a->params);
        if (a->labels)
                json_object_set(body, "labels", a->labels);
        if (a->priority)
                json_object_set_new(body, "priority", json_string(a->priority));
        rc = request_json(h, "POST", "/v1/jobs", body, REQUEST_TIMEOUT_MS, &job);
        json_decref(body);
        if (rc)
                return rc;
        if (!answer_is_job(job, NULL)) {
                json_decref(job);
                return odd_answer("POST", "/v1/jobs", "an accepted job");
        }
        const char *id = json_string_value(json_object_get(job, "id"));
        if (!a->wait) {
                if (a->json)
                        print_json(job);
                else
                        printf("%s\n", id);
                json_decref(job);
                return UMDCTL_OK;
        }
        bool hung = false;
        rc = wait_final(h, id, h->deadline_ms, &done, &hung);
        if (rc == UMDCTL_UNKNOWN) {
                fprintf(stderr, "umdctl: job %s is still %s%s; see 'umdctl show %s'\n", id,
                        json_string_value(json_object_get(done ? done : job, "state")),
                        hung ? " (umd at this URL stopped answering within --timeout)" : "", id);
                if (a->json)
                        print_json(done ? done : job);
                else
                        printf("%s\n", id);
        } else if (rc == 0) {
                rc = a->json ? (print_json(done), 0) : print_job_text(h, id);
                if (rc == 0)
                        rc = job_exit(done);
        }
        json_decref(done);
        json_decref(job);
        return rc;
}

static int cmd_show(struct http *h, const struct umdctl_args *a)
{
        char path[256];
        json_t *job = NULL;

        if (!a->json)
                return print_job_text(h, a->target);
        snprintf(path, sizeof(path), "/v1/jobs/%s", a->target);
        int rc = request_json(h, "GET", path, NULL, REQUEST_TIMEOUT_MS, &job);
        if (rc)
                return rc;
        if (!answer_is_job(job, a->target)) {
                json_decref(job);
                return odd_answer("GET", path, "the job asked for");
        }
        print_json(job);
        json_decref(job);
        return UMDCTL_OK;
}

/* --since/--until: an RFC 3339 time, or a duration meaning that long ago. -1 when neither. */
static double time_arg(const char *s)
{
        uint64_t ms;
        struct timespec ts;

        if (parse_duration_ms(s, &ms) == 0) {
                clock_gettime(CLOCK_REALTIME, &ts);
                return (double)ts.tv_sec - (double)ms / 1000.0;
        }
        return rfc3339_seconds(s);
}

/* A member that umdctl prints but does not rely on: "-" when it is not a string. */
static const char *str_or_dash(const json_t *o, const char *key)
{
        const char *s = json_string_value(json_object_get(o, key));
        return s ? s : "-";
}

static void job_devices(const json_t *job, char *buf, size_t len)
{
        size_t i, used = 0;
        json_t *p;

        buf[0] = 0;
        json_array_foreach(json_object_get(job, "parts"), i, p)
        {
                if (used + 1 >= len)
                        break;
                const json_t *dev = json_object_get(p, "device");
                if (json_is_string(dev)) /* the node worker's part: every GPU */
                        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? "," : "",
                                                 json_string_value(dev));
                else
                        used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? "," : "",
                                                 (long long)json_integer_value(dev));
        }
        if (!buf[0])
                snprintf(buf, len, "-");
}

static int cmd_ls(struct http *h, const struct umdctl_args *a)
{
        unsigned want = a->limit ? a->limit : LS_DEFAULT_LIMIT, shown = 0;
        double since = -1, until = -1;
        char *cursor = a->cursor ? strdup(a->cursor) : NULL;
        json_t *out = json_array();
        bool more = false;
        int rc = 0;

        if (a->since && (since = time_arg(a->since)) < 0) {
                fprintf(stderr, "umdctl: --since: '%s' is not a time (RFC 3339) or a duration\n",
                        a->since);
                return UMDCTL_USAGE;
        }
        if (a->until && (until = time_arg(a->until)) < 0) {
                fprintf(stderr, "umdctl: --until: '%s' is not a time (RFC 3339) or a duration\n",
                        a->until);
                return UMDCTL_USAGE;
        }
        /* umd filters by status, benchmark, device and label; times are filtered here, walking
         * the newest-first pages until a job is older than --since. */
        while (shown < want) {
                char *q = NULL, lim[16], label[512];
                json_t *page = NULL;
                snprintf(lim, sizeof(lim), "%u",
                         since >= 0 || until >= 0
                             ? LS_PAGE_MAX
                             : (want - shown > LS_PAGE_MAX ? LS_PAGE_MAX : want - shown));
                if (a->status)
                        query_add(&q, "status", a->status);
                if (a->benchmark)
                        query_add(&q, "benchmark", a->benchmark);
                if (a->device)
                        query_add(&q, "device", a->device);
                if (a->label) {
                        snprintf(label, sizeof(label), "%s", a->label);
                        char *eq = strchr(label, '=');
                        if (eq)
                                *eq = ':';
                        query_add(&q, "label", label);
                }
                if (cursor)
                        query_add(&q, "before", cursor);
                query_add(&q, "limit", lim);
                char *path = NULL;
                if (asprintf(&path, "/v1/jobs%s", q ? q : "") < 0)
                        path = NULL;
                free(q);
                rc = path ? request_json(h, "GET", path, NULL, REQUEST_TIMEOUT_MS, &page)
                          : UMDCTL_UNREACHABLE;
                if (rc == 0 && !answer_is_job_page(page)) {
                        json_decref(page);
                        rc = odd_answer("GET", path, "a page of jobs");
                }
                free(path);
                if (rc)
                        break;
                size_t i;
                json_t *job;
                bool older = false;
                json_array_foreach(json_object_get(page, "jobs"), i, job)
                {
                        double t =
                            rfc3339_seconds(json_string_value(json_object_get(job, "created")));
                        if (since >= 0 && t >= 0 && t < since) {
                                older = true;
                                break;
                        }
                        if (until >= 0 && t > until)
                                continue;
                        if (shown < want) {
                                json_array_append(out, job);
                                shown++;
                        }
                }
                /* "next" is the next page's URL; its before= is the cursor to show and use */
                const char *next = json_string_value(json_object_get(page, "next"));
                const char *b = next ? strstr(next, "before=") : NULL;
                free(cursor);
                cursor = b && !older ? strndup(b + 7, strcspn(b + 7, "&")) : NULL;
                json_decref(page);
                if (!cursor)
                        break;
                more = shown >= want;
        }
        if (rc == 0) {
                if (a->json) {
                        json_t *doc =
                            json_pack("{s:O, s:s?}", "jobs", out, "next", more ? cursor : NULL);
                        print_json(doc);
                        json_decref(doc);
                } else {
                        size_t i;
                        json_t *job;
                        printf("%-36s  %-11s  %-16s  %-8s  %s\n", "ID", "STATE", "BENCHMARK",
                               "DEVICES", "CREATED");
                        json_array_foreach(out, i, job)
                        {
                                char devs[128];
                                job_devices(job, devs, sizeof(devs));
                                printf("%-36s  %-11s  %-16s  %-8s  %s\n",
                                       json_string_value(json_object_get(job, "id")),
                                       json_string_value(json_object_get(job, "state")),
                                       str_or_dash(job, "benchmark"), devs,
                                       str_or_dash(job, "created"));
                        }
                        if (more && cursor)
                                fprintf(stderr, "umdctl: more with --cursor %s\n", cursor);
                }
        }
        free(cursor);
        json_decref(out);
        return rc;
}

static int cmd_cancel(struct http *h, const struct umdctl_args *a)
{
        char path[256];
        json_t *job = NULL;

        snprintf(path, sizeof(path), "/v1/jobs/%s", a->target);
        int rc = request_json(h, "DELETE", path, NULL, REQUEST_TIMEOUT_MS, &job);
        if (rc)
                return rc;
        if (!answer_is_job(job, a->target)) {
                json_decref(job);
                return odd_answer("DELETE", path, "the job asked for");
        }
        if (a->json)
                print_json(job);
        else
                printf("%s %s\n", a->target, json_string_value(json_object_get(job, "state")));
        json_decref(job);
        return UMDCTL_OK;
}

/* A device's Xid evidence under its line, where the Xid watch saw any: how many events, the
 * newest (code, action, process, whether umd's own worker raised it) and what fails. */
static void print_xid_line(const json_t *d)
{
        const json_t *x = json_object_get(d, "xid");
        const json_t *ev = json_array_get(json_object_get(x, "events"), 0);
        const char *failing = json_string_value(json_object_get(x, "action"));
        json_int_t total = 0;
        size_t i;
        json_t *c;

        json_array_foreach(json_object_get(x, "counts"), i, c)
        {
                total += json_integer_value(json_object_get(c, "count"));
        }
        if (!ev && (!failing || !strcmp(failing, "none")))
                return;
        if (!ev) { /* failing since an earlier umd of this boot: its events are not kept */
                printf("       xid: failing action=%s\n", failing);
                return;
        }
        const char *proc = json_string_value(json_object_get(ev, "process"));
        printf("       xid: %lld event(s); newest Xid %lld (%s) at %s, pid %lld%s%s%s; failing "
               "action=%s\n",
               (long long)total, (long long)json_integer_value(json_object_get(ev, "xid")),
               json_string_value(json_object_get(ev, "action")),
               json_string_value(json_object_get(ev, "time")),
               (long long)json_integer_value(json_object_get(ev, "pid")), proc ? " " : "",
               proc ? proc : "",
               json_is_true(json_object_get(ev, "own_worker")) ? " (umd's worker)" : "",
               failing ? failing : "none");
}

static int cmd_devices(struct http *h, const struct umdctl_args *a)
{
        json_t *doc = NULL, *d;
        size_t i;
        int rc = request_json(h, "GET", "/v1/devices", NULL, REQUEST_TIMEOUT_MS, &doc);

        if (rc)
                return rc;
        if (!answer_is_device_list(doc)) {
                json_decref(doc);
                return odd_answer("GET", "/v1/devices", "a list of devices");
        }
        if (a->json) {
                print_json(doc);
                json_decref(doc);
                return UMDCTL_OK;
        }
        printf("%-5s  %-40s  %-24s  %-10s  %-15s  %s\n", "INDEX", "UUID", "NAME", "STATE", "LINK",
               "HEALTH");
        json_array_foreach(doc, i, d)
        {
                json_t *pcie = json_object_get(d, "pcie"), *lh = json_object_get(d, "last_health");
                char link[32] = "-";
                if (json_is_object(pcie))
                        snprintf(
                            link, sizeof(link), "Gen%lld x%lld",
                            (long long)json_integer_value(json_object_get(pcie, "current_gen")),
                            (long long)json_integer_value(json_object_get(pcie, "current_width")));
                const char *verdict = json_string_value(json_object_get(lh, "verdict"));
                const char *state = json_string_value(json_object_get(d, "state"));
                const char *why = json_string_value(json_object_get(d, "pause_reason"));
                if (!why)
                        why = json_string_value(json_object_get(d, "state_reason"));
                const char *name = json_string_value(json_object_get(d, "name"));
                printf("%-5lld  %-40s  %-24s  %-10s  %-15s  %s%s%s\n",
                       (long long)json_integer_value(json_object_get(d, "index")),
                       json_string_value(json_object_get(d, "uuid")), name ? name : "?", state,
                       link, verdict ? verdict : "-", why ? "  " : "", why ? why : "");
                print_xid_line(d);
        }
        json_decref(doc);
        return UMDCTL_OK;
}

/* -- health -- */

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
                print_json(doc);
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
        double t = rfc3339_seconds(json_string_value(json_object_get(lh, "time")));
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
        int rc = request_json(h, "GET", "/v1/devices/node", NULL, REQUEST_TIMEOUT_MS, &node);
        char why[512];

        if (rc)
                return rc;
        json_t *lh = json_object_get(node, "last_health");
        if (!json_is_object(node) || !json_is_string(json_object_get(node, "uuid")) ||
            !(json_is_null(lh) || (json_is_object(lh) && answer_is_verdict(lh)))) {
                json_decref(node);
                return odd_answer("GET", "/v1/devices/node", "the node worker");
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
        int rc = request_json(h, "GET", "/v1/devices", NULL, REQUEST_TIMEOUT_MS, &doc);

        if (rc) {
                json_decref(list);
                return rc;
        }
        if (!answer_is_device_list(doc)) {
                json_decref(doc);
                json_decref(list);
                return odd_answer("GET", "/v1/devices", "a list of devices");
        }
        clock_gettime(CLOCK_REALTIME, &ts);
        json_array_foreach(doc, i, d)
        {
                json_t *lh = json_object_get(d, "last_health");
                json_t *index = json_object_get(d, "index");
                const char *uuid = json_string_value(json_object_get(d, "uuid"));
                const char *state = json_string_value(json_object_get(d, "state"));
                char why[512];

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
        char why[512];

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
        if (!is_final(state)) {
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
        rc = request_failed(h, ans, rc);
        return gpus_bad ? UMDCTL_FAILED : rc;
}

static int cmd_health(struct http *h, const struct umdctl_args *a)
{
        uint64_t timeout = a->timeout_set ? a->timeout_ms
                           : a->extended  ? HEALTH_EXTENDED_TIMEOUT_MS
                                          : HEALTH_TIMEOUT_MS;
        uint64_t reserve = timeout / 5 < CANCEL_RESERVE_MS ? timeout / 5 : CANCEL_RESERVE_MS;
        json_t *body, *job = NULL, *done = NULL, *part, *list, *parts;
        struct http_answer ans;
        char path[256], note[HEALTH_NOTE_MAX] = "";
        size_t i;
        int rc;

        if (a->cached) {
                if (a->timeout_set) /* one request; --timeout bounds it (NHC gives 30 s) */
                        h->deadline_ms = now_ms() + a->timeout_ms;
                return health_cached(h, a);
        }

        /* --timeout bounds the whole run: the submit, the wait, and the cancel after a wait that
         * ran out, which gets the reserve the wait leaves. */
        h->deadline_ms = now_ms() + timeout;
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
        uint64_t now = now_ms();
        rc = http_request(h, "POST", "/v1/jobs", body,
                          (long)(wait_deadline > now ? wait_deadline - now : 1), &ans);
        json_decref(body);
        if (rc < 0 || !ok_status(ans.status)) {
                rc = health_refused(h, &ans, rc);
                http_answer_free(&ans);
                return rc;
        }
        job = http_answer_json(&ans);
        http_answer_free(&ans);
        if (!answer_is_job(job, NULL) || json_array_size(json_object_get(job, "parts")) == 0) {
                json_decref(job);
                return odd_answer("POST", "/v1/jobs", "an accepted health job");
        }
        const char *id = json_string_value(json_object_get(job, "id"));
        bool hung = false;
        rc = wait_final(h, id, wait_deadline, &done, &hung);
        if (rc == UMDCTL_UNKNOWN) {
                /* Leave nothing queued behind a busy GPU. The parts are reported as last seen
                 * (queued, running, waiting for another process), which says why, and each
                 * part's one line says what went wrong on the way. */
                snprintf(path, sizeof(path), "/v1/jobs/%s", id);
                bool cancelled =
                    http_request(h, "DELETE", path, NULL, REQUEST_TIMEOUT_MS, &ans) == 0 &&
                    ok_status(ans.status);
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
                return odd_answer("GET", "/v1/jobs/ID", "a health job with its parts");
        }
        list = json_array();
        json_array_foreach(parts, i, part)
        {
                if (!health_part(list, part, (double)timeout / 1000, note)) {
                        rc = odd_answer("GET", "/v1/jobs/ID", "a health job with umd's verdicts");
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

static int cmd_pause(struct http *h, const struct umdctl_args *a, bool pause)
{
        char path[512];
        json_t *body = NULL, *dev = NULL;

        snprintf(path, sizeof(path), "/v1/devices/%s/%s", a->target, pause ? "pause" : "resume");
        if (pause && a->reason)
                body = json_pack("{s:s}", "reason", a->reason);
        int rc = request_json(h, "POST", path, body, REQUEST_TIMEOUT_MS, &dev);
        json_decref(body);
        if (rc)
                return rc;
        /* The device as it is now: a pause that did not take is no pause. */
        if (!answer_is_device(dev) || json_is_true(json_object_get(dev, "paused")) != pause) {
                json_decref(dev);
                return odd_answer("POST", path,
                                  pause ? "the device, paused" : "the device, resumed");
        }
        if (a->json) {
                print_json(dev);
        } else {
                const char *state = json_string_value(json_object_get(dev, "state"));
                printf("device %s %s%s%s\n", a->target, pause ? "paused" : "resumed",
                       state ? ", now " : "", state ? state : "");
        }
        json_decref(dev);
        return UMDCTL_OK;
}

int main(int argc, char **argv)
{
        struct umdctl_args a = {0};
        struct http h;
        int rc;

        rc = umdctl_parse_args(&a, argc, argv, getenv("UMD_URL"), getenv("UMD_TOKEN_FILE"));
        if (rc != 0) {
                umdctl_args_free(&a);
                return rc > 0 ? UMDCTL_OK : UMDCTL_USAGE;
        }
        rc = http_open(&h, a.url, a.unix_socket, a.token_file);
        if (rc < 0) {
                http_close(&h);
                umdctl_args_free(&a);
                return rc == -ENOMEM || rc == -EIO ? UMDCTL_UNREACHABLE : UMDCTL_USAGE;
        }
        switch (a.command) {
        case CMD_SUBMIT:
                rc = cmd_submit(&h, &a);
                break;
        case CMD_SHOW:
                rc = cmd_show(&h, &a);
                break;
        case CMD_LS:
                rc = cmd_ls(&h, &a);
                break;
        case CMD_CANCEL:
                rc = cmd_cancel(&h, &a);
                break;
        case CMD_DEVICES:
                rc = cmd_devices(&h, &a);
                break;
        case CMD_HEALTH:
                rc = cmd_health(&h, &a);
                break;
        case CMD_PAUSE:
        case CMD_RESUME:
                rc = cmd_pause(&h, &a, a.command == CMD_PAUSE);
                break;
        default:
                rc = UMDCTL_USAGE;
        }
        fflush(stdout);
        http_close(&h);
        umdctl_args_free(&a);
        return rc;
}
