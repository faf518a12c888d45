/* The shapes umdctl accepts and the cleaning of server strings (see answer.h). Never talks to
 * anything. */
#include "answer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PROBLEM_TYPE_PREFIX "https://umd.dev/problems/"

static bool is_string_member(const json_t *o, const char *key)
{
        return json_is_string(json_object_get(o, key));
}

/* A UUID is one printable word: umdctl's verdict lines ("GPU 0 UUID PASS: ...") are read by
 * scripts that split on spaces. */
static bool is_uuid_member(const json_t *o, const char *key)
{
        const char *s = json_string_value(json_object_get(o, key));

        if (!s || !*s)
                return false;
        for (const unsigned char *c = (const unsigned char *)s; *c; c++)
                if (*c <= ' ' || *c == 0x7f)
                        return false;
        return true;
}

static bool is_part(const json_t *p)
{
        const json_t *dev = json_object_get(p, "device");

        if (!json_is_object(p) || !is_string_member(p, "state") || !is_uuid_member(p, "uuid"))
                return false;
        /* a GPU's part has its index; the node's part (every GPU) has "all" */
        return json_is_integer(dev) ||
               (json_is_string(dev) && !strcmp(json_string_value(dev), "all"));
}

bool answer_is_job(const json_t *j, const char *want_id)
{
        const json_t *parts = json_object_get(j, "parts"), *p;
        size_t i;

        if (!json_is_object(j) || !is_string_member(j, "id") || !is_string_member(j, "state") ||
            !json_is_array(parts))
                return false;
        if (want_id && strcmp(json_string_value(json_object_get(j, "id")), want_id) != 0)
                return false;
        json_array_foreach(parts, i, p)
        {
                if (!is_part(p))
                        return false;
        }
        return true;
}

bool answer_is_job_page(const json_t *j)
{
        const json_t *jobs = json_object_get(j, "jobs"), *next = json_object_get(j, "next"), *job;
        size_t i;

        if (!json_is_object(j) || !json_is_array(jobs) ||
            (next && !json_is_null(next) && !json_is_string(next)))
                return false;
        json_array_foreach(jobs, i, job)
        {
                if (!answer_is_job(job, NULL))
                        return false;
        }
        return true;
}

bool answer_is_verdict(const json_t *j)
{
        const char *v = json_string_value(json_object_get(j, "verdict"));
        const json_t *reasons = json_object_get(j, "reasons"), *r;
        size_t i;

        if (!json_is_object(j) || !v ||
            (strcmp(v, "pass") != 0 && strcmp(v, "warn") != 0 && strcmp(v, "fail") != 0))
                return false;
        if (!reasons)
                return true;
        if (!json_is_array(reasons))
                return false;
        json_array_foreach(reasons, i, r)
        {
                if (!json_is_string(r))
                        return false;
        }
        return true;
}

bool answer_is_device(const json_t *j)
{
        const json_t *lh = json_object_get(j, "last_health");

        return json_is_object(j) && is_uuid_member(j, "uuid") &&
               json_is_integer(json_object_get(j, "index")) && is_string_member(j, "state") &&
               json_is_boolean(json_object_get(j, "paused")) &&
               (!lh || json_is_null(lh) || answer_is_verdict(lh));
}

bool answer_is_device_list(const json_t *j)
{
        const json_t *d;
        size_t i;

        if (!json_is_array(j))
                return false;
        json_array_foreach(j, i, d)
        {
                if (!answer_is_device(d))
                        return false;
        }
        return true;
}

/* The media type of a Content-Type value, without parameters, compared case-insensitively. */
static bool media_type_is(const char *content_type, const char *want)
{
        size_t n = strlen(want);

        if (!content_type || strncasecmp(content_type, want, n) != 0)
                return false;
        return content_type[n] == 0 || content_type[n] == ';' || content_type[n] == ' ';
}

bool answer_is_job_text(const char *content_type, const char *body, const char *id)
{
        size_t n = id ? strlen(id) : 0;

        return media_type_is(content_type, "text/plain") && body && n &&
               !strncmp(body, "job ", 4) && !strncmp(body + 4, id, n) &&
               (body[4 + n] == ' ' || body[4 + n] == '\n');
}

bool answer_is_umd_problem(long status, const char *content_type, const char *body, size_t len)
{
        json_t *j;
        bool ok;

        if (!media_type_is(content_type, "application/problem+json") || !body || !len)
                return false;
        j = json_loadb(body, len, 0, NULL);
        const char *type = json_string_value(json_object_get(j, "type"));
        ok = json_is_object(j) && type &&
             !strncmp(type, PROBLEM_TYPE_PREFIX, strlen(PROBLEM_TYPE_PREFIX)) &&
             is_string_member(j, "title") && is_string_member(j, "detail") &&
             json_is_integer(json_object_get(j, "status")) &&
             json_integer_value(json_object_get(j, "status")) == status;
        json_decref(j);
        return ok;
}

size_t text_clean(char *s, bool keep_lines)
{
        unsigned char *r = (unsigned char *)s, *w = (unsigned char *)s;

        if (!s)
                return 0;
        for (; *r; r++) {
                unsigned char c = *r;

                if (c == 0xc2 && r[1] >= 0x80 && r[1] <= 0x9f) {
                        r++; /* a C1 control: CSI (U+009B) starts an escape sequence too */
                        continue;
                }
                if (keep_lines && (c == '\n' || c == '\t')) {
                        *w++ = c;
                        continue;
                }
                if (c == '\t' || c == '\n' || c == '\v' || c == '\f' ||
                    (c == '\r' && !keep_lines)) {
                        *w++ = ' ';
                        continue;
                }
                if (c < 0x20 || c == 0x7f)
                        continue;
                *w++ = c;
        }
        *w = 0;
        return (size_t)(w - (unsigned char *)s);
}

int json_clean_strings(json_t *j)
{
        const char *key;
        json_t *v;
        size_t i;

        if (json_is_string(j)) {
                const char *s = json_string_value(j);
                size_t n = json_string_length(j);

                /* Fast path: most strings hold nothing to clean. Also catches an embedded NUL
                 * (strlen shorter than the JSON length), which is cut at the NUL. */
                bool dirty = strlen(s) != n;
                for (const unsigned char *p = (const unsigned char *)s; !dirty && *p; p++)
                        dirty =
                            *p < 0x20 || *p == 0x7f || (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f);
                if (!dirty)
                        return 0;
                char *copy = strdup(s);
                if (!copy)
                        return -ENOMEM;
                text_clean(copy, false);
                int r = json_string_set(j, copy);
                free(copy);
                return r < 0 ? -ENOMEM : 0;
        }
        if (json_is_array(j)) {
                json_array_foreach(j, i, v)
                {
                        int r = json_clean_strings(v);
                        if (r < 0)
                                return r;
                }
        } else if (json_is_object(j)) {
                json_object_foreach(j, key, v)
                {
                        int r = json_clean_strings(v);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}
