/* Filling a struct api_reply: JSON bodies (dumped with stable key order), static bytes,
 * text the daemon produced, and problem+json for every error. server_request.c turns the reply into
 * a libmicrohttpd response; the unit tests read it directly. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "jsonutil.h"

#define CT_JSON    "application/json"
#define CT_PROBLEM "application/problem+json"

static void reply_reset(struct api_reply *rep)
{
        reply_done(rep);
        rep->status = 0;
        rep->content_type = NULL;
        rep->retry_after_s = 0;
        rep->location[0] = '\0';
}

/* The last resort when even the problem cannot be built: no allocation. */
static void reply_oom(struct api_reply *rep)
{
        static const char body[] = "{\"detail\":\"out of memory\",\"status\":500,"
                                   "\"title\":\"Internal Server Error\","
                                   "\"type\":\"" PROBLEM_TYPE_BASE "internal-error\"}";
        reply_reset(rep);
        reply_static(rep, 500, CT_PROBLEM, body, sizeof(body) - 1);
}

static void reply_dump(struct api_reply *rep, int status, const char *content_type, json_t *j)
{
        size_t len = 0;
        char *s;

        if (!j) {
                reply_oom(rep);
                return;
        }
        s = json_dump_compact(j, &len);
        json_decref(j);
        if (!s) {
                reply_oom(rep);
                return;
        }
        reply_text(rep, status, content_type, s, len);
}

void reply_json(struct api_reply *rep, int status, json_t *j)
{
        reply_dump(rep, status, CT_JSON, j);
}

void reply_json_bytes(struct api_reply *rep, int status, char *body, size_t len)
{
        reply_text(rep, status, CT_JSON, body, len);
}

void reply_static(struct api_reply *rep, int status, const char *content_type, const char *body,
                  size_t len)
{
        reply_done(rep);
        rep->status = status;
        rep->content_type = content_type;
        rep->body = (char *)body;
        rep->body_len = len;
        rep->body_static = true;
}

void reply_text(struct api_reply *rep, int status, const char *content_type, char *body, size_t len)
{
        reply_done(rep);
        rep->status = status;
        rep->content_type = content_type;
        rep->body = body;
        rep->body_len = len;
        rep->body_static = false;
}

void reply_blob(struct api_reply *rep, int status, const char *content_type, struct blob *b)
{
        reply_done(rep);
        rep->status = status;
        rep->content_type = content_type;
        rep->blob = b;
        rep->body = b->data;
        rep->body_len = b->len;
        rep->body_static = false;
}

void reply_problem(struct api_reply *rep, const struct problem *p)
{
        struct problem fixed;

        /* A core function that failed without saying why is our bug, not the client's. */
        if (p->status < 400 || p->status > 599) {
                problem_set(&fixed, 500, NULL, "internal error (status %d without a problem)",
                            p->status);
                p = &fixed;
        }
        reply_dump(rep, p->status, CT_PROBLEM, problem_to_json(p));
        rep->retry_after_s = p->retry_after_s;
}

void reply_errorf(struct api_reply *rep, int status, const char *field, const char *fmt, ...)
{
        struct problem p;
        va_list ap;

        problem_set(&p, status, field, "%s", "");
        va_start(ap, fmt);
        vsnprintf(p.detail, sizeof(p.detail), fmt, ap);
        va_end(ap);
        reply_problem(rep, &p);
}

void reply_done(struct api_reply *rep)
{
        if (rep->blob)
                rep->blob = blob_unref(rep->blob);
        else if (!rep->body_static)
                free(rep->body);
        rep->body = NULL;
        rep->body_len = 0;
        rep->body_static = false;
}

void reply_free(struct api_reply *rep)
{
        reply_done(rep);
        free(rep->link);
        rep->link = NULL;
}
