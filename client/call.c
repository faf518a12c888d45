/* What every umdctl command does with umd: a request and the checks on its answer (a 2xx, JSON,
 * the shape umd sends), the one line saying why one failed and its exit code, query strings,
 * and waiting for a job to end with ?wait=. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "answer.h"
#include "call.h"
#include "cli.h"
#include "http.h"

/* A query value, percent-encoded: a label or a cursor, at three characters a byte. */
#define QUERY_VALUE_MAX 1024

#define WAIT_SLICE_MS 60000 /* longest single ?wait= asked for: umd's default wait_max_s */
#define POLL_PAUSE_MS 250   /* between polls when umd answers ?wait= at once */
/* Of a path, what an error line shows: a route and a job id fit, with room to spare. */
#define ODD_PATH_SHOWN 200

static const char *const final_states[] = {"succeeded", "failed",      "cancelled",
                                           "timed_out", "interrupted", NULL};

bool call_is_final(const char *state)
{
        for (const char *const *s = final_states; state && *s; s++)
                if (!strcmp(*s, state))
                        return true;
        return false;
}

uint64_t call_now_ms(void)
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
double call_rfc3339_seconds(const char *s)
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

void call_print_json(const json_t *j)
{
        json_dumpf(j, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
        fputc('\n', stdout);
}

/* The exit code for a request that did not get a 2xx, after saying why in one line. A request
 * that ran out of --timeout (h->deadline_ms) is an answer not had in time. */
int call_failed(const struct http *h, const struct http_answer *a, int rc)
{
        char why[CALL_WHY_MAX];

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

bool call_ok_status(long s)
{
        return s >= 200 && s < 300;
}

/* An answer that came with a 2xx but is not what umd sends: never trusted, never "no GPU". */
int call_odd_answer(const char *method, const char *path, const char *what)
{
        char p[ODD_PATH_SHOWN];

        /* Cut on purpose: a path longer than that says nothing more about the answer. */
        snprintf(p, sizeof(p), "%.*s", (int)sizeof(p) - 1, path);
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
int call_json_as(struct http *h, const char *method, const char *path, const json_t *body,
                 long timeout_ms, bool quiet_timeout, json_t **ret)
{
        struct http_answer a;
        int rc = http_request(h, method, path, body, timeout_ms, &a);

        if (quiet_timeout && rc == -ETIMEDOUT && h->deadline_ms) {
                http_answer_free(&a);
                return UMDCTL_UNKNOWN;
        }
        if (rc < 0 || !call_ok_status(a.status)) {
                rc = call_failed(h, &a, rc);
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

int call_json(struct http *h, const char *method, const char *path, const json_t *body,
              long timeout_ms, json_t **ret)
{
        return call_json_as(h, method, path, body, timeout_ms, false, ret);
}

/* Percent-encode s for a query string. */
void call_query_add(char **q, const char *key, const char *value)
{
        char enc[QUERY_VALUE_MAX];
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

/* Wait until job id is final or the deadline (call_now_ms()) passes. Returns 0 with the final job
 * in *ret, UMDCTL_UNKNOWN with the last job seen in *ret (NULL when no answer came) when time ran
 * out, or an exit code. umd's ?wait= (milliseconds, "NNNms") holds the request until the job is
 * final, so a wait within umd's wait_max_s is one request; a umd that cuts it shorter, or an
 * older one that answers at once, is asked again, after a short pause when the answer came back
 * quickly. umd is asked to answer a little before the deadline, so that its answer (the state as
 * it is then) comes before the request's own limit: the deadline, or the slice and
 * REQUEST_TIMEOUT_MS when that comes first. *ret_hung is set when the time ran out in a
 * request umd did not answer (nothing is printed for it: the caller's one line says so). */
int call_wait_final(struct http *h, const char *id, uint64_t deadline, json_t **ret, bool *ret_hung)
{
        char path[CALL_PATH_MAX];
        json_t *job = NULL;
        int rc;

        for (;;) {
                uint64_t start = call_now_ms();
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
                rc = call_json_as(h, "GET", path, NULL, (long)limit, true, &next);
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
                        return call_odd_answer("GET", path, "the job asked for");
                }
                job = next;
                if (call_is_final(json_string_value(json_object_get(job, "state")))) {
                        *ret = job;
                        return 0;
                }
                uint64_t now = call_now_ms();
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
