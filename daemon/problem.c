/* RFC 9457 problem details (see problem.h): the fixed title and slug per status, filling a
 * struct problem, and its JSON form. */
#include "problem.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

/* A problem's type URI: the base and the slug. */
#define PROBLEM_TYPE_MAX 160

struct problem_kind {
        int status;
        const char *slug;
        const char *title;
        int err;
};

static const struct problem_kind problems[] = {
    {400, "bad-request", "Bad Request", EINVAL},
    {401, "unauthorized", "Unauthorized", EACCES},
    {403, "forbidden", "Forbidden", EPERM},
    {404, "not-found", "Not Found", ENOENT},
    {405, "method-not-allowed", "Method Not Allowed", EOPNOTSUPP},
    {409, "conflict", "Conflict", EEXIST},
    {413, "body-too-large", "Content Too Large", E2BIG},
    {415, "unsupported-media-type", "Unsupported Media Type", EPROTONOSUPPORT},
    {429, "queue-full", "Too Many Requests", EBUSY},
    {500, "internal-error", "Internal Server Error", EIO},
    {503, "unavailable", "Service Unavailable", EAGAIN},
    {507, "insufficient-storage", "Insufficient Storage", ENOSPC},
};

/* The entry for status, or the generic client or server error for one not in the table. */
static const struct problem_kind *problem_kind(int status)
{
        static const struct problem_kind client_error = {0, "client-error", "Client Error", EINVAL};
        static const struct problem_kind server_error = {0, "server-error", "Server Error", EINVAL};

        for (size_t i = 0; i < ELEMENTSOF(problems); i++)
                if (problems[i].status == status)
                        return &problems[i];
        return status >= 500 ? &server_error : &client_error;
}

const char *problem_title(int status)
{
        return problem_kind(status)->title;
}

const char *problem_slug(int status)
{
        return problem_kind(status)->slug;
}

int problem_set(struct problem *p, int status, const char *field, const char *fmt, ...)
{
        const struct problem_kind *k = problem_kind(status);
        va_list ap;

        p->status = status;
        p->slug = k->slug;
        p->title = k->title;
        va_start(ap, fmt);
        vsnprintf(p->detail, sizeof(p->detail), fmt, ap);
        va_end(ap);
        snprintf(p->field, sizeof(p->field), "%s", field ? field : "");
        p->retry_after_s = 0;
        return -k->err;
}

/* Details quote what the client sent, which need not be UTF-8, and jansson refuses strings
 * that are not: copy valid sequences, replace every other byte with '?'. */
static void utf8_sanitize(const char *in, char *out, size_t len)
{
        const unsigned char *s = (const unsigned char *)in;
        size_t o = 0;

        while (*s && o + 1 < len) {
                size_t n = *s < 0x80             ? 1
                           : (*s & 0xe0) == 0xc0 ? 2
                           : (*s & 0xf0) == 0xe0 ? 3
                           : (*s & 0xf8) == 0xf0 ? 4
                                                 : 0;
                bool ok = n > 0 && o + n < len;
                uint32_t cp = n == 1   ? *s
                              : n == 2 ? (*s & 0x1fu)
                              : n == 3 ? (*s & 0x0fu)
                                       : (*s & 0x07u);

                for (size_t i = 1; ok && i < n; i++) {
                        if ((s[i] & 0xc0) != 0x80)
                                ok = false;
                        else
                                cp = (cp << 6) | (s[i] & 0x3fu);
                }
                /* Overlong forms, surrogates and values past U+10FFFF are invalid too. */
                if (ok &&
                    ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
                     (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff))
                        ok = false;
                if (!ok) {
                        out[o++] = '?';
                        s++;
                        continue;
                }
                memcpy(out + o, s, n);
                o += n;
                s += n;
        }
        out[o] = '\0';
}

json_t *problem_to_json(const struct problem *p)
{
        char detail[sizeof(p->detail)], field[sizeof(p->field)];
        char type[PROBLEM_TYPE_MAX];
        int status = p->status >= 400 && p->status <= 599 ? p->status : 500;
        const char *slug = p->slug ? p->slug : problem_slug(status);
        const char *title = p->title ? p->title : problem_title(status);
        json_t *j;

        snprintf(type, sizeof(type), PROBLEM_TYPE_BASE "%s", slug);
        utf8_sanitize(p->detail, detail, sizeof(detail));
        utf8_sanitize(p->field, field, sizeof(field));
        j = json_pack("{s:s, s:s, s:i, s:s}", "type", type, "title", title, "status", status,
                      "detail", detail);
        if (!j)
                return NULL;
        if (field[0] != '\0' && json_object_set_new(j, "field", json_string(field)) < 0) {
                json_decref(j);
                return NULL;
        }
        return j;
}
