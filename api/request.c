/* Checks on what a client sends, made before a handler runs: the body's media type and
 * declared length (so an oversized or mistyped body is refused before it is read), the
 * message's framing (Content-Length against Transfer-Encoding), the request target's path,
 * the Idempotency-Key header, the query arguments each route takes (and ?wait='s duration), GET
 * /v1/jobs's filters (typed into core.h's struct job_filter), and the JSON body itself. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "catalog.h"
#include "http.h"
#include "job_state.h"
#include "jsonutil.h"
#include "util.h"
#include "uuid.h"

int request_check_content_type(const char *content_type, struct problem *p)
{
        static const char want[] = "application/json";
        const char *s = content_type;

        if (!s)
                return problem_set(p, 415, "Content-Type",
                                   "a request body must be sent as application/json");
        while (*s == ' ' || *s == '\t')
                s++;
        /* The media type is case-insensitive; parameters (charset) may follow. */
        if (strncasecmp(s, want, sizeof(want) - 1) == 0) {
                s += sizeof(want) - 1;
                while (*s == ' ' || *s == '\t')
                        s++;
                if (*s == '\0' || *s == ';')
                        return 0;
        }
        return problem_set(p, 415, "Content-Type",
                           "request bodies must be application/json, not '%.64s'", content_type);
}

int request_check_content_length(const char *content_length, uint64_t max_body, struct problem *p)
{
        uint64_t n;

        if (!content_length)
                return 0; /* chunked: checked as it streams */
        if (parse_uint64(content_length, 0, UINT64_MAX, &n) < 0)
                return problem_set(p, 400, "Content-Length", "Content-Length is not a number");
        if (n > max_body)
                return problem_set(p, 413, NULL,
                                   "body of %" PRIu64 " bytes is over the limit of %" PRIu64
                                   " bytes (max_body_bytes)",
                                   n, max_body);
        return 0;
}

static bool is_ows(char c)
{
        return c == ' ' || c == '\t';
}

void request_framing_add(struct request_framing *f, const char *key, const char *value)
{
        assert(f);
        assert(key);
        if (!value)
                value = "";
        if (strpbrk(key, " \t"))
                f->name_has_space = true;
        if (strcasecmp(key, "Content-Length") == 0) {
                /* Compared as sent, less surrounding white space: "5" and "05" differ too, as
                 * they may to another parser on the path. */
                size_t n;

                while (is_ows(*value))
                        value++;
                n = strlen(value);
                while (n > 0 && is_ows(value[n - 1]))
                        n--;
                if (f->n_content_length++ == 0) {
                        if (n >= sizeof(f->content_length))
                                n = sizeof(f->content_length) - 1;
                        memcpy(f->content_length, value, n);
                        f->content_length[n] = '\0';
                } else if (strlen(f->content_length) != n ||
                           strncmp(f->content_length, value, n) != 0)
                        f->content_length_differs = true;
        } else if (strcasecmp(key, "Transfer-Encoding") == 0) {
                /* libmicrohttpd reads a body as chunked only for exactly "chunked" (any case);
                 * anything else it would read to the end of the connection. */
                f->n_transfer_encoding++;
                if (strcasecmp(value, "chunked") != 0)
                        f->transfer_encoding_odd = true;
        }
}

int request_framing_check(const struct request_framing *f, struct problem *p)
{
        assert(f);
        if (f->name_has_space)
                return problem_set(p, 400, NULL,
                                   "a header field name has white space in it (RFC 9112 "
                                   "section 5.1)");
        if (f->n_transfer_encoding > 0 && f->n_content_length > 0)
                return problem_set(p, 400, "Transfer-Encoding",
                                   "Content-Length and Transfer-Encoding together: the body's "
                                   "end is ambiguous (RFC 9112 section 6.1)");
        if (f->n_transfer_encoding > 1 || f->transfer_encoding_odd)
                return problem_set(p, 400, "Transfer-Encoding",
                                   "Transfer-Encoding must be exactly 'chunked', once");
        if (f->content_length_differs)
                return problem_set(p, 400, "Content-Length",
                                   "Content-Length given more than once with different values "
                                   "(RFC 9112 section 6.3)");
        return 0;
}

const char *request_target_path(const char *target)
{
        const char *s;

        assert(target);
        if (strncasecmp(target, "http://", 7) == 0)
                s = target + 7;
        else if (strncasecmp(target, "https://", 8) == 0)
                s = target + 8;
        else
                return target;
        s = strchr(s, '/');
        return s ? s : "/";
}

int request_check_idempotency_key(const char *key, struct problem *p)
{
        size_t n;

        if (!key)
                return 0;
        n = strlen(key);
        if (n == 0 || n > API_IDEMPOTENCY_KEY_MAX)
                return problem_set(p, 400, "Idempotency-Key",
                                   "Idempotency-Key must be 1 to %d characters, got %zu",
                                   API_IDEMPOTENCY_KEY_MAX, n);
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)key[i] < 0x20 || (unsigned char)key[i] > 0x7e)
                        return problem_set(p, 400, "Idempotency-Key",
                                           "Idempotency-Key must be printable ASCII "
                                           "(byte 0x%02x at offset %zu)",
                                           (unsigned char)key[i], i);
        return 0;
}

int job_list_query_set(struct job_list_query *q, const char *key, const char *value,
                       struct problem *p)
{
        static const struct {
                const char *name;
                size_t off;
        } keys[] = {
            {"status", offsetof(struct job_list_query, status)},
            {"benchmark", offsetof(struct job_list_query, benchmark)},
            {"device", offsetof(struct job_list_query, device)},
            {"label", offsetof(struct job_list_query, label)},
            {"before", offsetof(struct job_list_query, before)},
            {"after", offsetof(struct job_list_query, after)},
            {"since", offsetof(struct job_list_query, since)},
            {"until", offsetof(struct job_list_query, until)},
            {"limit", offsetof(struct job_list_query, limit)},
            {"include", offsetof(struct job_list_query, include)},
        };

        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                const char **slot;

                if (strcmp(keys[i].name, key) != 0)
                        continue;
                slot = (const char **)((char *)q + keys[i].off);
                /* One value per filter: silently taking the first or last would hide a typo. */
                if (*slot)
                        return problem_set(p, 400, key, "query argument '%s' given twice", key);
                *slot = value ? value : "";
                return 0;
        }
        return problem_set(p, 400, key,
                           "unknown query argument '%.64s' (known: status, benchmark, device, "
                           "label, before, limit)",
                           key);
}

/* A list's since/until: Unix milliseconds, or RFC 3339 with a Z or numeric offset. */
static int parse_time_ms(const char *s, uint64_t *ret)
{
        struct tm tm = {0};
        unsigned frac_ms = 0, digits = 0;
        int off = 0, oh, om, n = 0;
        uint64_t v;

        if (parse_uint64(s, 1, UINT64_C(253402300799999), &v) == 0) {
                *ret = v;
                return 0;
        }
        if (sscanf(s, "%4d-%2d-%2d%*[Tt ]%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                   &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6 ||
            n != 19)
                return -EINVAL;
        s += n;
        if (*s == '.') {
                for (s++; *s >= '0' && *s <= '9'; s++, digits++)
                        if (digits < 3)
                                frac_ms = frac_ms * 10 + (unsigned)(*s - '0');
                if (digits == 0)
                        return -EINVAL;
                for (; digits < 3; digits++)
                        frac_ms *= 10;
        }
        if (*s == 'Z' || *s == 'z') {
                s++;
        } else if ((*s == '+' || *s == '-') && sscanf(s + 1, "%2d:%2d%n", &oh, &om, &n) == 2 &&
                   n == 5 && oh < 24 && om < 60) {
                off = (*s == '-' ? -1 : 1) * (oh * 60 + om) * 60;
                s += 6;
        } else {
                return -EINVAL;
        }
        if (*s || tm.tm_year < 1970 || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 ||
            tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60)
                return -EINVAL;
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        time_t t = timegm(&tm);
        if (t == (time_t)-1 || (int64_t)t - off < 0)
                return -EINVAL;
        *ret = (uint64_t)((int64_t)t - off) * 1000u + frac_ms;
        return 0;
}

/* The checks in the order they have always been made, so that a query with several bad
 * arguments names the same one. */
int job_list_query_parse(const struct job_list_query *q, struct job_filter *ret, struct problem *p)
{
        struct job_filter f = {.state = -1, .device = -1, .limit = 50};
        unsigned limit_max = core_list_limit_max();
        uint64_t limit = f.limit;
        size_t dev;

        if (q->status && (f.state = job_state_from_string(q->status)) < 0)
                return problem_set(p, 400, "status", "unknown status '%.32s' (%s)", q->status,
                                   job_state_names_list);
        if (q->limit && parse_uint64(q->limit, 1, limit_max, &limit) < 0)
                return problem_set(p, 400, "limit",
                                   "must be a whole number from 1 to %u "
                                   "(list_limit_max)",
                                   limit_max);
        f.limit = (unsigned)limit;
        if (q->before && !uuid_is_valid(q->before))
                return problem_set(p, 400, "before", "must be a job id (a UUID)");
        if (q->after && !uuid_is_valid(q->after))
                return problem_set(p, 400, "after", "must be a job id (a UUID)");
        if (q->include && strcmp(q->include, "results") != 0)
                return problem_set(p, 400, "include", "the one value is 'results'");
        if (q->benchmark && !catalog_find(q->benchmark))
                return problem_set(p, 400, "benchmark",
                                   "unknown benchmark '%.64s' (see GET /v1/benchmarks)",
                                   q->benchmark);
        if (q->label) {
                const char *colon = strchr(q->label, ':');
                if (!colon || colon == q->label)
                        return problem_set(p, 400, "label", "must be KEY:VALUE");
                f.label_key = q->label;
                f.label_key_len = (size_t)(colon - q->label);
                f.label_value = colon + 1;
        }
        if (q->since && parse_time_ms(q->since, &f.since_ms) < 0)
                return problem_set(p, 400, "since",
                                   "must be a time in RFC 3339 (2026-01-31T12:00:00Z) or Unix "
                                   "milliseconds");
        if (q->until && parse_time_ms(q->until, &f.until_ms) < 0)
                return problem_set(p, 400, "until",
                                   "must be a time in RFC 3339 (2026-01-31T12:00:00Z) or Unix "
                                   "milliseconds");
        if (q->device) {
                if (core_device_index(q->device, &dev) < 0)
                        return problem_set(p, 400, "device", "unknown device '%.64s'", q->device);
                f.device = (ssize_t)dev;
        }
        f.benchmark = q->benchmark;
        f.before = q->before;
        f.after = q->after;
        f.with_results = q->include != NULL;
        *ret = f;
        return 0;
}

int request_check_args(const struct route_method *m, const struct query_arg *args, size_t n,
                       struct problem *p)
{
        for (size_t i = 0; i < n; i++) {
                bool known = false;

                for (const char *const *a = m->args; a && *a && !known; a++)
                        known = strcmp(*a, args[i].key) == 0;
                if (!known)
                        return problem_set(p, 400, args[i].key,
                                           "unknown query argument '%.64s' (see "
                                           "/v1/openapi.json for what this route takes)",
                                           args[i].key);
                /* One value each: silently taking the first or last would hide a typo. */
                for (size_t k = 0; k < i; k++)
                        if (strcmp(args[k].key, args[i].key) == 0)
                                return problem_set(p, 400, args[i].key,
                                                   "query argument '%.64s' given twice",
                                                   args[i].key);
        }
        return 0;
}

int request_parse_wait(const char *v, unsigned max_s, uint64_t *ret_ms, struct problem *p)
{
        uint64_t n = 0, unit = 1000;
        const char *s = v;

        if (!v || *v < '0' || *v > '9')
                goto bad;
        for (; *s >= '0' && *s <= '9'; s++) {
                if (n > UINT64_C(1) << 40)
                        goto bad;
                n = n * 10 + (uint64_t)(*s - '0');
        }
        if (strcmp(s, "ms") == 0)
                unit = 1;
        else if (strcmp(s, "m") == 0)
                unit = 60 * 1000;
        else if (*s && strcmp(s, "s") != 0)
                goto bad;
        n *= unit;
        /* Longer asks are cut, not refused: the answer says the job's state either way, and
         * a client waiting longer simply asks again. */
        *ret_ms = n < (uint64_t)max_s * 1000 ? n : (uint64_t)max_s * 1000;
        return 0;
bad:
        return problem_set(p, 400, "wait",
                           "must be a duration: seconds (30 or 30s), milliseconds (500ms) or "
                           "minutes (2m)");
}

/* Valid JSON that umd cannot hold (issue 57): a number past what jansson reads (a whole number
 * beyond -2^63..2^63-1, a real beyond a double) or a string holding \u0000 (C strings end there).
 * Said naming the field, as any other bad value is; any other error is invalid JSON. */
static int json_error_problem(const char *body, size_t len, const json_error_t *err,
                              struct problem *p)
{
        enum json_error_code code = json_error_code(err);
        char field[sizeof(p->field)];

        if (code != json_error_numeric_overflow &&
            !(code == json_error_null_character && strstr(err->text, "\\u0000")))
                return problem_set(p, 400, NULL, "invalid JSON at line %d, column %d: %s",
                                   err->line, err->column, err->text);
        json_path_at(body, len, err->position > 0 ? (size_t)err->position : 0, field,
                     sizeof(field));
        if (code == json_error_null_character)
                return problem_set(p, 400, field[0] ? field : NULL,
                                   "%s%sa string holding \\u0000 (a NUL character) is not accepted",
                                   field, field[0] ? ": " : "");
        return problem_set(p, 400, field[0] ? field : NULL,
                           "%s%sthe number is beyond what umd reads: whole numbers from -2^63 to "
                           "2^63-1 (9223372036854775807), others within a double's range",
                           field, field[0] ? ": " : "");
}

int request_parse_json_object(const char *body, size_t len, json_t **ret, struct problem *p)
{
        json_error_t err;
        json_t *j;

        if (!body || len == 0)
                return problem_set(p, 400, NULL, "a JSON object body is required");
        j = json_parse_strict(body, len, API_JSON_MAX_DEPTH, &err);
        if (!j)
                return json_error_problem(body, len, &err, p);
        if (!json_is_object(j)) {
                json_decref(j);
                return problem_set(p, 400, NULL, "the body must be a JSON object");
        }
        *ret = j;
        return 0;
}

static int hexval(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

size_t url_unescape(char *s)
{
        char *w = s;

        for (const char *r = s; *r;) {
                int hi, lo;

                /* %00 stays as written: decoded, it would cut the C string short and
                 * "/v1/jobs/ID%00.json" would quietly become "/v1/jobs/ID". */
                if (r[0] == '%' && (hi = hexval(r[1])) >= 0 && (lo = hexval(r[2])) >= 0 &&
                    (hi | lo) != 0) {
                        *w++ = (char)(hi << 4 | lo);
                        r += 3;
                        continue;
                }
                *w++ = *r++;
        }
        *w = '\0';
        return (size_t)(w - s);
}
