/* RFC 9457 problem details: what the daemon fills when it refuses something, and its JSON form
 * (application/problem+json) that the HTTP layer sends. The daemon's own type: the API includes
 * it (through core.h), never the other way round. */
#pragma once

#include <jansson.h>

/* A problem's detail: one sentence, which may quote a short part of the input. */
#define PROBLEM_DETAIL_MAX 512
/* Where the input is wrong: a path into the body ("params.size", "devices[1]"). */
#define PROBLEM_FIELD_MAX 128

/* RFC 9457 problem details. type is "https://umd.dev/problems/<slug>". */
struct problem {
        int status;
        const char *slug;  /* "bad-request", "not-found", "queue-full", ... */
        const char *title; /* short, fixed per slug */
        char detail[PROBLEM_DETAIL_MAX];
        char field[PROBLEM_FIELD_MAX]; /* "" when no single input is at fault */
        unsigned retry_after_s;        /* for 429/503, 0 = none */
};

/* Fill p and return -status-ish negative (-EINVAL) for convenient `return problem_set(...)`. */
int problem_set(struct problem *p, int status, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
const char *problem_title(int status);
const char *problem_slug(int status);
/* {"type", "title", "status", "detail", "field"?}: the body of the answer. */
json_t *problem_to_json(const struct problem *p);
#define PROBLEM_TYPE_BASE "https://umd.dev/problems/"
