/* umdctl's one way to talk to umd: an HTTP request over TCP (http/https) or a unix socket, with
 * the bearer token, through libcurl. Owns the curl handle; knows nothing of umd's documents
 * except how to turn a problem+json answer into one line. */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* curl's error buffer (CURLOPT_ERRORBUFFER): CURL_ERROR_SIZE, which curl.h sets to 256. */
#define HTTP_ERROR_MAX 256

struct http {
        void *curl;
        char *base; /* URL without the trailing slash */
        const char *unix_socket;
        char *auth_header; /* "Authorization: Bearer …", or NULL */
        /* CLOCK_MONOTONIC milliseconds by which every request must be over (0: none), so that
         * a --timeout bounds the whole run whatever the far end does: each request gets what
         * is left, never more. */
        uint64_t deadline_ms;
};

struct http_answer {
        long status; /* 0 when nothing answered */
        char *body;  /* NUL-terminated, owned */
        size_t len;
        char *content_type;         /* owned, or NULL */
        char error[HTTP_ERROR_MAX]; /* why nothing answered (status 0) */
};

/* 0, or -errno after printing one line (a token file that cannot be read, no curl). */
int http_open(struct http *h, const char *url, const char *unix_socket, const char *token_file);
void http_close(struct http *h);

/* Send METHOD path (path starts with '/'; query included) with an optional JSON body, and
 * collect the answer within timeout_ms, cut to what is left before h->deadline_ms. Returns 0
 * when something answered (whatever the status), -ETIMEDOUT when no whole answer came in time
 * (nothing is sent once the deadline passed), or -EIO; ret->error says why. ret is always filled
 * and must be freed. */
int http_request(struct http *h, const char *method, const char *path, const json_t *body,
                 long timeout_ms, struct http_answer *ret);
void http_answer_free(struct http_answer *a);

/* One line for an answer that is not what was asked: "HTTP 404 Not Found: no job …" from a
 * problem+json document, else the status and the start of the body; control characters from the
 * far end are cleaned out (answer.h). */
void http_answer_describe(const struct http_answer *a, char *buf, size_t len);

/* The body as JSON (NULL when it is not JSON), its strings cleaned for printing (answer.h). */
json_t *http_answer_json(const struct http_answer *a);

/* CLOCK_MONOTONIC in milliseconds, the clock of deadline_ms. */
uint64_t http_now_ms(void);
