/* The catalog's parameter rules, applied: catalog_validate checks a job's params against its
 * benchmark's entry (catalog.c), one value at a time then the rules that tie two together, and
 * fills every default. Owns the size bounds and default lists the listing shows too
 * (catalog_params.h). Never logs: the caller reports the error it fills. */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "catalog.h"
#include "catalog_params.h"
#include "size.h"
#include "util.h"

/* One size_format answer in a message: SIZE_STRING_MAX (32) would do; 48 is room to spare. */
#define CATALOG_SIZE_TEXT_MAX 48
static_assert(CATALOG_SIZE_TEXT_MAX >= SIZE_STRING_MAX, "a size's text must fit");
/* An enum's allowed values joined by ", " for a message. A longer list is cut: pipeline's
 * strategies (202 bytes) lose their last letters, and the detail holds no more than
 * CATALOG_ERROR_DETAIL_MAX anyway. */
#define CATALOG_VALUES_TEXT_MAX 200
/* A size list item's field, "params.NAME[i]": the field cut at 80 bytes and an index of at
 * most 20 digits. */
#define CATALOG_ITEM_FIELD_MAX 128

uint64_t catalog_params_size_max(const struct param_def *p, const struct catalog_limits *lim)
{
        return p->max > 0 ? (uint64_t)p->max : lim->max_buffer_bytes;
}

/* Default of a size list: doubling from the minimum up to max_size (sweep). */
static json_t *default_size_list(const struct param_def *p, uint64_t upto)
{
        json_t *a = json_array();
        if (!a)
                return NULL;
        for (uint64_t s = (uint64_t)p->min; s <= upto && json_array_size(a) < 64; s *= 2)
                if (json_array_append_new(a, json_integer((json_int_t)s)) < 0) {
                        json_decref(a);
                        return NULL;
                }
        return a;
}

json_t *catalog_params_enum_list(const char *s)
{
        json_t *a = json_array();
        const char *p = s;
        while (a && p && *p) {
                const char *comma = strchr(p, ',');
                size_t n = comma ? (size_t)(comma - p) : strlen(p);
                json_array_append_new(a, json_stringn(p, n));
                p = comma ? comma + 1 : NULL;
        }
        return a;
}

static int fail(struct catalog_error *err, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct catalog_error *err, const char *field, const char *fmt, ...)
{
        if (err) {
                va_list ap;
                snprintf(err->field, sizeof(err->field), "%s", field);
                va_start(ap, fmt);
                vsnprintf(err->detail, sizeof(err->detail), fmt, ap);
                va_end(ap);
        }
        return -EINVAL;
}

/* One size value (integer or string) checked against the parameter's bounds. */
static int check_size(const struct param_def *p, const json_t *v, const struct catalog_limits *lim,
                      const char *field, uint64_t *ret, struct catalog_error *err)
{
        uint64_t bytes;
        char a[CATALOG_SIZE_TEXT_MAX], b[CATALOG_SIZE_TEXT_MAX];

        if (json_is_integer(v)) {
                json_int_t i = json_integer_value(v);
                if (i < p->min) {
                        size_format((uint64_t)p->min, a, sizeof(a));
                        return fail(err, field, "must be at least %s", a);
                }
                bytes = (uint64_t)i;
        } else if (json_is_string(v)) {
                int r = size_parse(json_string_value(v), &bytes);
                if (r == -ERANGE)
                        return fail(err, field, "size is too large");
                if (r < 0)
                        return fail(err, field,
                                    "must be a number of bytes or a size like \"64MiB\", "
                                    "\"1GiB\", \"4KiB\"");
        } else {
                return fail(err, field,
                            "must be an integer number of bytes or a size string like \"64MiB\"");
        }
        if (bytes < (uint64_t)p->min) {
                size_format((uint64_t)p->min, a, sizeof(a));
                return fail(err, field, "must be at least %s", a);
        }
        uint64_t max = catalog_params_size_max(p, lim);
        if (bytes > max) {
                size_format(max, a, sizeof(a));
                size_format(bytes, b, sizeof(b));
                return fail(err, field, "must be at most %s%s (got %s)", a,
                            p->max == 0 ? " (max_buffer_bytes)" : "", b);
        }
        *ret = bytes;
        return 0;
}

static bool enum_ok(const struct param_def *p, const char *s)
{
        for (size_t i = 0; p->values && p->values[i]; i++)
                if (strcmp(p->values[i], s) == 0)
                        return true;
        return false;
}

static void enum_join(const struct param_def *p, char *buf, size_t len)
{
        size_t off = 0;
        buf[0] = '\0';
        for (size_t i = 0; p->values && p->values[i] && off < len; i++)
                off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? ", " : "", p->values[i]);
}

/* Validate one present value; *ret_norm gets the normalized JSON value. */
static int check_param(const struct param_def *p, const json_t *v, const struct catalog_limits *lim,
                       json_t **ret_norm, struct catalog_error *err)
{
        char field[CATALOG_ERROR_FIELD_MAX], list[CATALOG_VALUES_TEXT_MAX];
        uint64_t bytes;
        int r;

        /* Not snprintf: every parameter of every submit comes through here, and the field is
         * read only by an error. Names are the catalog's own, far shorter than field. */
        size_t n = strlen(p->name);
        assert(n + sizeof("params.") <= sizeof(field));
        memcpy(field, "params.", sizeof("params.") - 1);
        memcpy(field + sizeof("params.") - 1, p->name, n + 1);
        switch (p->type) {
        case PARAM_SIZE:
                r = check_size(p, v, lim, field, &bytes, err);
                if (r < 0)
                        return r;
                *ret_norm = json_integer((json_int_t)bytes);
                break;
        case PARAM_INT:
                if (p->int_word && json_is_string(v) &&
                    strcmp(json_string_value(v), p->int_word) == 0) {
                        *ret_norm = json_string(p->int_word);
                        break;
                }
                if (!json_is_integer(v) && p->int_word)
                        return fail(err, field, "must be an integer or \"%s\"", p->int_word);
                if (!json_is_integer(v))
                        return fail(err, field, "must be an integer");
                if (json_integer_value(v) < p->min || json_integer_value(v) > p->max)
                        return fail(err, field, "must be between %lld and %lld", (long long)p->min,
                                    (long long)p->max);
                *ret_norm = json_integer(json_integer_value(v));
                break;
        case PARAM_BOOL:
                if (!json_is_boolean(v))
                        return fail(err, field, "must be true or false");
                *ret_norm = json_boolean(json_is_true(v));
                break;
        case PARAM_ENUM:
                enum_join(p, list, sizeof(list));
                if (!json_is_string(v) || !enum_ok(p, json_string_value(v)))
                        return fail(err, field, "must be one of: %s", list);
                *ret_norm = json_string(json_string_value(v));
                break;
        case PARAM_ENUM_LIST: {
                size_t i;
                json_t *e;
                enum_join(p, list, sizeof(list));
                if (!json_is_array(v) || json_array_size(v) == 0)
                        return fail(err, field, "must be a non-empty array of: %s", list);
                json_array_foreach(v, i, e)
                {
                        if (!json_is_string(e) || !enum_ok(p, json_string_value(e)))
                                return fail(err, field, "item %zu must be one of: %s", i, list);
                        for (size_t k = 0; k < i; k++)
                                if (json_equal(e, json_array_get(v, k)))
                                        return fail(err, field, "item %zu repeats \"%s\"", i,
                                                    json_string_value(e));
                }
                *ret_norm = json_deep_copy(v);
                break;
        }
        case PARAM_SIZE_LIST: {
                size_t i;
                json_t *e;
                if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > 64)
                        return fail(err, field, "must be an array of 1 to 64 sizes");
                json_t *out = json_array();
                if (!out)
                        return -ENOMEM;
                json_array_foreach(v, i, e)
                {
                        char ef[CATALOG_ITEM_FIELD_MAX];
                        snprintf(ef, sizeof(ef), "%.80s[%zu]", field, i);
                        r = check_size(p, e, lim, ef, &bytes, err);
                        if (r < 0) {
                                json_decref(out);
                                return r;
                        }
                        json_array_append_new(out, json_integer((json_int_t)bytes));
                }
                *ret_norm = out;
                break;
        }
        }
        return *ret_norm ? 0 : -ENOMEM;
}

static json_t *param_default(const struct param_def *p, const json_t *norm,
                             const struct catalog_limits *lim)
{
        switch (p->type) {
        case PARAM_SIZE:
                /* A default above the configured maximum is clamped, so a small max_buffer_bytes
                 * still leaves every benchmark runnable with no params. */
                return json_integer(
                    (json_int_t)(p->def > 0 && (uint64_t)p->def > catalog_params_size_max(p, lim)
                                     ? catalog_params_size_max(p, lim)
                                     : (uint64_t)p->def));
        case PARAM_INT:
                return p->int_word && p->def_str ? json_string(p->def_str) : json_integer(p->def);
        case PARAM_BOOL:
                return json_boolean(p->def);
        case PARAM_ENUM:
                return json_string(p->def_str);
        case PARAM_ENUM_LIST:
                return catalog_params_enum_list(p->def_str);
        case PARAM_SIZE_LIST: {
                json_t *m = json_object_get(norm, "max_size");
                uint64_t upto = json_is_integer(m) ? (uint64_t)json_integer_value(m)
                                                   : catalog_params_size_max(p, lim);
                return default_size_list(p, upto);
        }
        }
        return NULL;
}

/* Rules that tie two parameters together. A default that breaks one (the 4 MiB default chunk
 * of a 64 KiB copy) is clamped; a value the client gave is refused. */
static int check_cross(const json_t *params, json_t *norm, struct catalog_error *err)
{
        json_t *size = json_object_get(norm, "size");
        char a[CATALOG_SIZE_TEXT_MAX];
        static const char *const le_size[] = {"chunk",   "stride",      "writeback",
                                              "touched", "min_touched", "row_bytes"};
        json_t *touched = json_object_get(norm, "touched");

        /* pipeline: touched 0 is the whole batch, said in bytes so the result shows it. */
        if (size && touched && json_integer_value(touched) == 0)
                json_object_set_new(norm, "touched", json_integer(json_integer_value(size)));

        for (size_t i = 0; i < ELEMENTSOF(le_size); i++) {
                json_t *v = json_object_get(norm, le_size[i]);
                char field[CATALOG_ERROR_FIELD_MAX];
                if (!v || !size || json_integer_value(v) <= json_integer_value(size))
                        continue;
                if (!params || !json_object_get(params, le_size[i])) {
                        json_object_set_new(norm, le_size[i],
                                            json_integer(json_integer_value(size)));
                        continue;
                }
                snprintf(field, sizeof(field), "params.%s", le_size[i]);
                size_format((uint64_t)json_integer_value(size), a, sizeof(a));
                return fail(err, field, "must be at most size (%s)", a);
        }
        return 0;
}

int catalog_validate(const struct bench_def *b, const json_t *params,
                     const struct catalog_limits *lim, bool allow_fake, json_t **ret_params,
                     struct catalog_error *err)
{
        const char *key;
        json_t *v;
        int r;

        if (!b)
                return fail(err, "benchmark", "unknown benchmark");
        if (params && json_is_null(params))
                params = NULL;
        if (params && !json_is_object(params))
                return fail(err, "params", "must be an object");

        json_object_foreach((json_t *)params, key, v)
        {
                const struct param_def *p = catalog_param(b, key);
                char field[CATALOG_ERROR_FIELD_MAX];
                if (p && (!p->fake_only || allow_fake))
                        continue;
                snprintf(field, sizeof(field), "params.%.80s", key);
                if (!p)
                        return fail(err, field, "unknown parameter for benchmark %s", b->name);
                return fail(err, field,
                            "only accepted by fake devices (test-only fault injection)");
        }

        json_t *norm = json_object();
        if (!norm)
                return -ENOMEM;
        /* Two passes: present values first, so defaults that depend on them (a sweep's sizes
         * from max_size) see the normalized value. */
        for (size_t i = 0; i < b->n_params; i++) {
                const struct param_def *p = &b->params[i];
                json_t *in = params ? json_object_get(params, p->name) : NULL;
                json_t *out = NULL;
                if (!in || (p->fake_only && !allow_fake))
                        continue;
                r = check_param(p, in, lim, &out, err);
                if (r < 0)
                        goto fail;
                json_object_set_new_nocheck(norm, p->name, out); /* the catalog's names */
        }
        for (size_t i = 0; i < b->n_params; i++) {
                const struct param_def *p = &b->params[i];
                /* Fault injection means nothing to a real device: leaving it out keeps the
                 * normalized form valid when validated again (the worker, recovery). */
                if (json_object_get(norm, p->name) || (p->fake_only && !allow_fake))
                        continue;
                json_t *d = param_default(p, norm, lim);
                if (!d) {
                        r = -ENOMEM;
                        goto fail;
                }
                json_object_set_new_nocheck(norm, p->name, d);
        }
        r = check_cross(params, norm, err);
        if (r < 0)
                goto fail;

        *ret_params = norm;
        return 0;
fail:
        json_decref(norm);
        return r;
}
