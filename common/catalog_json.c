/* What derives from the catalog's entries (catalog.c) for those who read it: the listing GET
 * /v1/benchmarks prints (catalog_to_json) and the JSON Schema of each benchmark's params that the
 * OpenAPI document carries (catalog_params_schema). Bounds and defaults come from the entries
 * through catalog_params.h, so the listing, the schema and the validator never disagree. */
#include <stdio.h>
#include <string.h>

#include "catalog.h"
#include "catalog_params.h"

/* A parameter's description in its schema, with its unit and the fake-only note: the longest
 * (chunk_issue's) is about 320 bytes; a longer one is cut. */
#define CATALOG_DESCRIPTION_MAX 512

static const char *type_name(enum param_type t)
{
        switch (t) {
        case PARAM_SIZE:
                return "size";
        case PARAM_INT:
                return "integer";
        case PARAM_ENUM:
                return "enum";
        case PARAM_BOOL:
                return "boolean";
        case PARAM_ENUM_LIST:
                return "enum_list";
        case PARAM_SIZE_LIST:
                return "size_list";
        }
        return "unknown";
}

static json_t *values_json(const char *const *values)
{
        json_t *a = json_array();
        for (size_t i = 0; a && values && values[i]; i++)
                json_array_append_new(a, json_string(values[i]));
        return a;
}

static json_t *param_to_json(const struct param_def *p, const struct catalog_limits *lim)
{
        json_t *o = json_pack("{s:s, s:s, s:s}", "name", p->name, "type", type_name(p->type),
                              "description", p->description ? p->description : "");
        if (!o)
                return NULL;
        if (p->unit)
                json_object_set_new(o, "unit", json_string(p->unit));
        switch (p->type) {
        case PARAM_SIZE:
        case PARAM_SIZE_LIST:
                json_object_set_new(o, "min", json_integer(p->min));
                json_object_set_new(o, "max",
                                    json_integer((json_int_t)catalog_params_size_max(p, lim)));
                if (p->max == 0)
                        json_object_set_new(o, "max_from", json_string("max_buffer_bytes"));
                if (p->type == PARAM_SIZE)
                        json_object_set_new(o, "default", json_integer(p->def));
                else
                        json_object_set_new(o, "max_items", json_integer(64));
                break;
        case PARAM_INT:
                json_object_set_new(o, "min", json_integer(p->min));
                json_object_set_new(o, "max", json_integer(p->max));
                json_object_set_new(o, "default",
                                    p->int_word && p->def_str ? json_string(p->def_str)
                                                              : json_integer(p->def));
                if (p->int_word)
                        json_object_set_new(o, "or", json_string(p->int_word));
                break;
        case PARAM_BOOL:
                json_object_set_new(o, "default", json_boolean(p->def));
                break;
        case PARAM_ENUM:
                json_object_set_new(o, "values", values_json(p->values));
                json_object_set_new(o, "default", json_string(p->def_str));
                break;
        case PARAM_ENUM_LIST:
                json_object_set_new(o, "values", values_json(p->values));
                json_object_set_new(o, "default", catalog_params_enum_list(p->def_str));
                break;
        }
        if (p->fake_only)
                json_object_set_new(o, "fake_only", json_true());
        return o;
}

json_t *catalog_to_json(const struct catalog_limits *lim)
{
        json_t *arr = json_array();
        if (!arr)
                return NULL;
        for (size_t i = 0; i < catalog_count(); i++) {
                const struct bench_def *b = catalog_get(i);
                json_t *params = json_array();
                for (size_t j = 0; params && j < b->n_params; j++)
                        json_array_append_new(params, param_to_json(&b->params[j], lim));
                json_t *o = json_pack("{s:s, s:s, s:s, s:o*, s:i}", "name", b->name, "kind",
                                      b->kind, "description", b->description, "params", params,
                                      "min_gpus", b->multi_gpu ? 2 : 1);
                if (!o || json_array_append_new(arr, o) < 0) {
                        json_decref(arr);
                        return NULL;
                }
        }
        return arr;
}

/* ---- JSON Schema (2020-12, as OpenAPI 3.1 takes it) of each benchmark's params ---- */

/* What size_parse() reads: digits, an optional fraction (with a unit), one optional space and a
 * unit. The byte bounds of a string are the validator's to check; the schema says them in the
 * integer branch and the description. */
#define SIZE_STRING_PATTERN                                                                        \
        "^[0-9]+(\\.[0-9]+ ?(B|KiB|MiB|GiB|TiB|kB|KB|MB|GB|TB)|( "                                 \
        "?(B|KiB|MiB|GiB|TiB|kB|KB|MB|GB|TB))?)$"

static json_t *size_schema(const struct param_def *p, const struct catalog_limits *lim)
{
        return json_pack("{s:[{s:s, s:I, s:I}, {s:s, s:s}]}", "oneOf", "type", "integer", "minimum",
                         (json_int_t)p->min, "maximum", (json_int_t)catalog_params_size_max(p, lim),
                         "type", "string", "pattern", SIZE_STRING_PATTERN);
}

static json_t *param_schema(const struct param_def *p, const struct catalog_limits *lim)
{
        json_t *s = NULL;

        switch (p->type) {
        case PARAM_SIZE:
                s = size_schema(p, lim);
                if (s)
                        json_object_set_new(s, "default", json_integer(p->def));
                break;
        case PARAM_SIZE_LIST:
                s = json_pack("{s:s, s:i, s:i, s:o}", "type", "array", "minItems", 1, "maxItems",
                              64, "items", size_schema(p, lim));
                break;
        case PARAM_INT:
                if (p->int_word) {
                        s = json_pack("{s:[{s:s, s:I, s:I}, {s:s, s:[s]}]}", "oneOf", "type",
                                      "integer", "minimum", (json_int_t)p->min, "maximum",
                                      (json_int_t)p->max, "type", "string", "enum", p->int_word);
                        if (s)
                                json_object_set_new(s, "default",
                                                    p->def_str ? json_string(p->def_str)
                                                               : json_integer(p->def));
                        break;
                }
                s = json_pack("{s:s, s:I, s:I, s:I}", "type", "integer", "minimum",
                              (json_int_t)p->min, "maximum", (json_int_t)p->max, "default",
                              (json_int_t)p->def);
                break;
        case PARAM_BOOL:
                s = json_pack("{s:s, s:b}", "type", "boolean", "default", (int)p->def);
                break;
        case PARAM_ENUM:
                s = json_pack("{s:s, s:o, s:s}", "type", "string", "enum", values_json(p->values),
                              "default", p->def_str);
                break;
        case PARAM_ENUM_LIST:
                s = json_pack("{s:s, s:i, s:b, s:{s:s, s:o}, s:o}", "type", "array", "minItems", 1,
                              "uniqueItems", 1, "items", "type", "string", "enum",
                              values_json(p->values), "default",
                              catalog_params_enum_list(p->def_str));
                break;
        }
        if (!s)
                return NULL;
        if (p->description || p->fake_only) {
                char d[CATALOG_DESCRIPTION_MAX];

                snprintf(d, sizeof(d), "%s%s%s%s", p->description ? p->description : "",
                         p->unit ? " (" : "", p->unit ? p->unit : "", p->unit ? ")" : "");
                if (p->fake_only)
                        snprintf(d + strlen(d), sizeof(d) - strlen(d),
                                 "; fake devices only (refused for real ones)");
                json_object_set_new(s, "description", json_string(d));
        }
        return s;
}

json_t *catalog_params_schema(const struct bench_def *b, const struct catalog_limits *lim)
{
        json_t *props = json_object(), *s;

        if (!props)
                return NULL;
        for (size_t j = 0; j < b->n_params; j++) {
                json_t *ps = param_schema(&b->params[j], lim);
                if (!ps || json_object_set_new(props, b->params[j].name, ps) < 0) {
                        json_decref(props);
                        return NULL;
                }
        }
        s = json_pack("{s:s, s:s, s:o, s:b}", "title", b->name, "type", "object", "properties",
                      props, "additionalProperties", 0);
        if (s)
                json_object_set_new(s, "description", json_string(b->description));
        return s;
}
