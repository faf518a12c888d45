/* Running a request through api_dispatch and reading the reply, for the api unit tests. */
#pragma once

#include <jansson.h>
#include <string.h>

#include "core_double.h"
#include "http.h"

static inline void run(struct api_reply *rep, enum http_method m, const char *path,
                       const char *body, const struct query_arg *args, size_t n_args,
                       const char *key)
{
        struct api_request req = {
            .method = m,
            .path = path,
            .body = body,
            .body_len = body ? strlen(body) : 0,
            .args = args,
            .n_args = n_args,
            .idempotency_key = key,
            .admin = true,
        };

        memset(rep, 0, sizeof(*rep));
        api_dispatch(&req, rep);
}

/* The reply's body as JSON (the test owns it). */
static inline json_t *reply_body(const struct api_reply *rep)
{
        return json_loadb(rep->body, rep->body_len, 0, NULL);
}
