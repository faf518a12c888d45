/* What every umdctl command does with umd (call.c): a request and the checks on its answer,
 * query strings, waiting for a job to end. Functions returning int return 0 or an exit code
 * (cli.h) after printing why. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "http.h"

/* A request's path: a route, a job id and a query of a few arguments. */
#define CALL_PATH_MAX 256
/* One line saying why a request or a check failed: a status, a problem's title and detail, or a
 * device's state and reason. */
#define CALL_WHY_MAX 512

/* A request's own limit when the command sets none shorter (--timeout). */
#define REQUEST_TIMEOUT_MS 15000L

/* Whether a job state is final (nothing more will happen to it). */
bool call_is_final(const char *state);
uint64_t call_now_ms(void);
/* Seconds since the epoch of an RFC 3339 UTC time, or -1. */
double call_rfc3339_seconds(const char *s);
/* j on stdout, indented, keys sorted. */
void call_print_json(const json_t *j);
/* The exit code for a request that did not get a 2xx, after saying why in one line. */
int call_failed(const struct http *h, const struct http_answer *a, int rc);
bool call_ok_status(long s);
/* A 2xx answer that is not what umd sends: says so, UMDCTL_UNREACHABLE. */
int call_odd_answer(const char *method, const char *path, const char *what);
/* Request and parse a JSON answer: 0 with *ret set, or an exit code after printing;
 * quiet_timeout: UMDCTL_UNKNOWN, unsaid, when --timeout ran out. */
int call_json_as(struct http *h, const char *method, const char *path, const json_t *body,
                 long timeout_ms, bool quiet_timeout, json_t **ret);
int call_json(struct http *h, const char *method, const char *path, const json_t *body,
              long timeout_ms, json_t **ret);
/* Append key=value, percent-encoded, to the query string *q (malloc'd, "?" first). */
void call_query_add(char **q, const char *key, const char *value);
/* Wait until job id is final or the deadline (call_now_ms()) passes (call.c says how). */
int call_wait_final(struct http *h, const char *id, uint64_t deadline, json_t **ret,
                    bool *ret_hung);
