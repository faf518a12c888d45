/* What every backend shares (backend.h): the one place a run's params are normalised and its
 * limits checked, before any backend sees them. Pure C, no CUDA: the unit tests link it. */
#include "backend.h"

#include "catalog.h"
#include "jsonutil.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int backend_fail(char **ret_error, int r, const char *fmt, ...)
{
        va_list ap;
        char *s = NULL;

        va_start(ap, fmt);
        if (vasprintf(&s, fmt, ap) < 0)
                s = NULL;
        va_end(ap);
        if (ret_error)
                *ret_error = s;
        else
                free(s);
        return r;
}

/* A fake_* parameter a real device must refuse: any that is present with a value other than
 * its catalog default (normalized params may carry the defaults). */
static const char *injected_fault(const struct bench_def *b, const json_t *params)
{
        const char *key;
        json_t *v;

        json_object_foreach((json_t *)params, key, v)
        {
                const struct param_def *def;

                if (strncmp(key, "fake_", 5) != 0)
                        continue;
                def = catalog_param(b, key);
                if (!def)
                        return key;
                if (json_is_boolean(v) && json_is_true(v) == (def->def != 0))
                        continue;
                if (json_is_integer(v) && json_integer_value(v) == def->def)
                        continue;
                return key;
        }
        return NULL;
}

/* The largest buffer the params ask for ("size", or the largest of "sizes"). */
static uint64_t largest_size(const json_t *params)
{
        json_t *v = json_object_get(params, "size"), *s;
        uint64_t m = json_is_integer(v) ? (uint64_t)json_integer_value(v) : 0;
        size_t i;

        json_array_foreach(json_object_get(params, "sizes"), i, s)
        {
                if (json_is_integer(s) && (uint64_t)json_integer_value(s) > m)
                        m = (uint64_t)json_integer_value(s);
        }
        return m;
}

int backend_prepare(const struct backend_ops *ops, const char *id, const json_t *params,
                    uint64_t max_buffer_bytes, json_t **ret_params, char **ret_error)
{
        const struct bench_def *b = catalog_find(id);
        /* Bounds from the configuration are checked below, once, with the worker's own text;
         * the catalog checks everything else (types, fixed bounds, allowed values). */
        struct catalog_limits unlimited = {.max_buffer_bytes = UINT64_MAX};
        struct catalog_error err;
        const char *fault;
        json_t *norm = NULL;
        uint64_t largest;
        int r;

        if (!b)
                return backend_fail(ret_error, -EINVAL, "unknown benchmark '%s'",
                                    id ? id : "(null)");
        if (params && !json_is_object(params))
                return backend_fail(ret_error, -EINVAL, "params must be an object");
        if (!ops->fake && (fault = injected_fault(b, params)))
                return backend_fail(ret_error, -EINVAL,
                                    "%s: fake_* parameters apply only to fake devices", fault);
        _cleanup_json_ json_t *in = params ? json_deep_copy(params) : json_object();
        if (!in)
                return backend_fail(ret_error, -ENOMEM, "out of memory");
        if (!ops->fake) {
                /* What is left of fake_* holds its default: drop it, as the daemon does. */
                const char *key;
                void *tmp;
                json_t *v;

                json_object_foreach_safe(in, tmp, key, v)
                {
                        if (strncmp(key, "fake_", 5) == 0)
                                json_object_del(in, key);
                }
        }
        r = catalog_validate(b, in, &unlimited, ops->fake, &norm, &err);
        if (r == -EINVAL)
                return backend_fail(ret_error, r, "%s: %s", err.field, err.detail);
        if (r < 0)
                return backend_fail(ret_error, r, "out of memory");
        largest = largest_size(norm);
        if (max_buffer_bytes > 0 && largest > max_buffer_bytes) {
                json_decref(norm);
                return backend_fail(
                    ret_error, -ENOMEM,
                    "size %llu bytes is over the limit of %llu bytes (max_buffer_bytes)",
                    (unsigned long long)largest, (unsigned long long)max_buffer_bytes);
        }
        *ret_params = norm;
        return 0;
}

json_t *backend_node_info(const json_t *devices, bool fake)
{
        return json_pack("{s:s, s:s, s:s, s:O, s:b}", "index", "all", "uuid", "node", "name",
                         "node worker (every GPU)", "devices", devices, "fake", fake);
}
