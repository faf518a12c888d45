/* umdctl: the command-line client of umd. Owns main and the commands (submit, show, ls, cancel,
 * devices, pause, resume): what each asks umd, how it waits, what it prints and which exit code
 * it ends with (cli.h). `umdctl health` is cmd_health.c's; a request and its checks, and waiting
 * for a job to end, are call.c's. Parsing lives in cli.c, HTTP in http.c, what an answer must
 * look like before a command reads it in answer.c. Never keeps state between runs. */
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

/* ls's page size as a query value. */
#define LS_LIMIT_ARG_MAX 16
/* --label KEY=VALUE as ls sends it (KEY:VALUE). */
#define LS_LABEL_MAX 512
/* A job's devices in ls's table: indexes, comma-separated, cut. */
#define LS_DEVICES_MAX 128
/* A device's PCIe link in words ("Gen5 x16"). */
#define LINK_WORDS_MAX 32
/* pause and resume's path: a device as the user gave it (an index or a uuid), room to spare. */
#define DEVICE_PATH_MAX 512

#define SUBMIT_TIMEOUT_MS (3600ull * 1000)
#define LS_DEFAULT_LIMIT  50u
#define LS_PAGE_MAX       500u

static int print_job_text(struct http *h, const char *id)
{
        char path[CALL_PATH_MAX];
        struct http_answer a;

        snprintf(path, sizeof(path), "/v1/jobs/%s?format=text", id);
        int rc = http_request(h, "GET", path, NULL, REQUEST_TIMEOUT_MS, &a);
        if (rc < 0 || !call_ok_status(a.status)) {
                rc = call_failed(h, &a, rc);
                http_answer_free(&a);
                return rc;
        }
        if (!answer_is_job_text(a.content_type, a.body, id)) {
                http_answer_free(&a);
                return call_odd_answer("GET", path, "umd's text view of the job");
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
                h->deadline_ms =
                    call_now_ms() + (a->timeout_set ? a->timeout_ms : SUBMIT_TIMEOUT_MS);
        if (a->devices)
                json_object_set(body, a->devices_plural ? "devices" : "device", a->devices);
        if (a->params)
                json_object_set(body, "params", a->params);
        if (a->labels)
                json_object_set(body, "labels", a->labels);
        if (a->priority)
                json_object_set_new(body, "priority", json_string(a->priority));
        rc = call_json(h, "POST", "/v1/jobs", body, REQUEST_TIMEOUT_MS, &job);
        json_decref(body);
        if (rc)
                return rc;
        if (!answer_is_job(job, NULL)) {
                json_decref(job);
                return call_odd_answer("POST", "/v1/jobs", "an accepted job");
        }
        const char *id = json_string_value(json_object_get(job, "id"));
        if (!a->wait) {
                if (a->json)
                        call_print_json(job);
                else
                        printf("%s\n", id);
                json_decref(job);
                return UMDCTL_OK;
        }
        bool hung = false;
        rc = call_wait_final(h, id, h->deadline_ms, &done, &hung);
        if (rc == UMDCTL_UNKNOWN) {
                fprintf(stderr, "umdctl: job %s is still %s%s; see 'umdctl show %s'\n", id,
                        json_string_value(json_object_get(done ? done : job, "state")),
                        hung ? " (umd at this URL stopped answering within --timeout)" : "", id);
                if (a->json)
                        call_print_json(done ? done : job);
                else
                        printf("%s\n", id);
        } else if (rc == 0) {
                rc = a->json ? (call_print_json(done), 0) : print_job_text(h, id);
                if (rc == 0)
                        rc = job_exit(done);
        }
        json_decref(done);
        json_decref(job);
        return rc;
}

static int cmd_show(struct http *h, const struct umdctl_args *a)
{
        char path[CALL_PATH_MAX];
        json_t *job = NULL;

        if (!a->json)
                return print_job_text(h, a->target);
        snprintf(path, sizeof(path), "/v1/jobs/%s", a->target);
        int rc = call_json(h, "GET", path, NULL, REQUEST_TIMEOUT_MS, &job);
        if (rc)
                return rc;
        if (!answer_is_job(job, a->target)) {
                json_decref(job);
                return call_odd_answer("GET", path, "the job asked for");
        }
        call_print_json(job);
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
        return call_rfc3339_seconds(s);
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

/* The path of one page of GET /v1/jobs: the filters umd applies, the cursor, the page's size.
 * malloc'd, NULL without memory. */
static char *ls_page_path(const struct umdctl_args *a, const char *cursor, unsigned limit)
{
        char *q = NULL, lim[LS_LIMIT_ARG_MAX], label[LS_LABEL_MAX];
        char *path = NULL;

        snprintf(lim, sizeof(lim), "%u", limit);
        if (a->status)
                call_query_add(&q, "status", a->status);
        if (a->benchmark)
                call_query_add(&q, "benchmark", a->benchmark);
        if (a->device)
                call_query_add(&q, "device", a->device);
        if (a->label) {
                snprintf(label, sizeof(label), "%s", a->label);
                char *eq = strchr(label, '=');
                if (eq)
                        *eq = ':';
                call_query_add(&q, "label", label);
        }
        if (cursor)
                call_query_add(&q, "before", cursor);
        call_query_add(&q, "limit", lim);
        if (asprintf(&path, "/v1/jobs%s", q ? q : "") < 0)
                path = NULL;
        free(q);
        return path;
}

/* The jobs umdctl ls found, as JSON or a table; the cursor for more when there are. */
static void ls_print(const struct umdctl_args *a, json_t *out, bool more, const char *cursor)
{
        if (a->json) {
                json_t *doc = json_pack("{s:O, s:s?}", "jobs", out, "next", more ? cursor : NULL);
                call_print_json(doc);
                json_decref(doc);
                return;
        }
        size_t i;
        json_t *job;
        printf("%-36s  %-11s  %-16s  %-8s  %s\n", "ID", "STATE", "BENCHMARK", "DEVICES", "CREATED");
        json_array_foreach(out, i, job)
        {
                char devs[LS_DEVICES_MAX];
                job_devices(job, devs, sizeof(devs));
                printf("%-36s  %-11s  %-16s  %-8s  %s\n",
                       json_string_value(json_object_get(job, "id")),
                       json_string_value(json_object_get(job, "state")),
                       str_or_dash(job, "benchmark"), devs, str_or_dash(job, "created"));
        }
        if (more && cursor)
                fprintf(stderr, "umdctl: more with --cursor %s\n", cursor);
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
                json_t *page = NULL;
                char *path =
                    ls_page_path(a, cursor,
                                 since >= 0 || until >= 0
                                     ? LS_PAGE_MAX
                                     : (want - shown > LS_PAGE_MAX ? LS_PAGE_MAX : want - shown));
                rc = path ? call_json(h, "GET", path, NULL, REQUEST_TIMEOUT_MS, &page)
                          : UMDCTL_UNREACHABLE;
                if (rc == 0 && !answer_is_job_page(page)) {
                        json_decref(page);
                        rc = call_odd_answer("GET", path, "a page of jobs");
                }
                free(path);
                if (rc)
                        break;
                size_t i;
                json_t *job;
                bool older = false;
                json_array_foreach(json_object_get(page, "jobs"), i, job)
                {
                        double t = call_rfc3339_seconds(
                            json_string_value(json_object_get(job, "created")));
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
        if (rc == 0)
                ls_print(a, out, more, cursor);
        free(cursor);
        json_decref(out);
        return rc;
}

static int cmd_cancel(struct http *h, const struct umdctl_args *a)
{
        char path[CALL_PATH_MAX];
        json_t *job = NULL;

        snprintf(path, sizeof(path), "/v1/jobs/%s", a->target);
        int rc = call_json(h, "DELETE", path, NULL, REQUEST_TIMEOUT_MS, &job);
        if (rc)
                return rc;
        if (!answer_is_job(job, a->target)) {
                json_decref(job);
                return call_odd_answer("DELETE", path, "the job asked for");
        }
        if (a->json)
                call_print_json(job);
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
        int rc = call_json(h, "GET", "/v1/devices", NULL, REQUEST_TIMEOUT_MS, &doc);

        if (rc)
                return rc;
        if (!answer_is_device_list(doc)) {
                json_decref(doc);
                return call_odd_answer("GET", "/v1/devices", "a list of devices");
        }
        if (a->json) {
                call_print_json(doc);
                json_decref(doc);
                return UMDCTL_OK;
        }
        printf("%-5s  %-40s  %-24s  %-10s  %-15s  %s\n", "INDEX", "UUID", "NAME", "STATE", "LINK",
               "HEALTH");
        json_array_foreach(doc, i, d)
        {
                json_t *pcie = json_object_get(d, "pcie"), *lh = json_object_get(d, "last_health");
                char link[LINK_WORDS_MAX] = "-";
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

static int cmd_pause(struct http *h, const struct umdctl_args *a, bool pause)
{
        char path[DEVICE_PATH_MAX];
        json_t *body = NULL, *dev = NULL;

        snprintf(path, sizeof(path), "/v1/devices/%s/%s", a->target, pause ? "pause" : "resume");
        if (pause && a->reason)
                body = json_pack("{s:s}", "reason", a->reason);
        int rc = call_json(h, "POST", path, body, REQUEST_TIMEOUT_MS, &dev);
        json_decref(body);
        if (rc)
                return rc;
        /* The device as it is now: a pause that did not take is no pause. */
        if (!answer_is_device(dev) || json_is_true(json_object_get(dev, "paused")) != pause) {
                json_decref(dev);
                return call_odd_answer("POST", path,
                                       pause ? "the device, paused" : "the device, resumed");
        }
        if (a->json) {
                call_print_json(dev);
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
