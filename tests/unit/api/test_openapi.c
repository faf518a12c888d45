/* The served OpenAPI document parses, is OpenAPI 3.1, and describes exactly the routes and
 * methods the router serves (HEAD aside, which every GET route answers implicitly), exactly the
 * query arguments each takes, every status by number (no "default" to hide one), and is the
 * committed file plus the catalog's params schemas. */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "api.h"
#include "http.h"

static void method_lower(enum http_method m, char *buf, size_t len)
{
        const char *name = http_method_name(m);
        size_t i;

        for (i = 0; name[i] && i + 1 < len; i++)
                buf[i] = (char)(name[i] | 0x20);
        buf[i] = '\0';
}

static void test_document_parses(void **state)
{
        json_error_t err;
        json_t *doc =
            json_loadb(api_openapi_json, api_openapi_json_len, JSON_REJECT_DUPLICATES, &err);

        if (!doc)
                fail_msg("openapi.json: line %d: %s", err.line, err.text);
        assert_int_equal(strlen(api_openapi_json), api_openapi_json_len);
        assert_string_equal(json_string_value(json_object_get(doc, "openapi")), "3.1.0");
        json_decref(doc);
}

static void test_every_route_is_documented_and_nothing_else(void **state)
{
        json_t *doc = json_loadb(api_openapi_json, api_openapi_json_len, 0, NULL);
        json_t *paths = json_object_get(doc, "paths");
        size_t n, documented = 0;
        const struct route *routes = router_table(&n);
        const char *key;
        json_t *item;

        assert_non_null(paths);
        for (size_t i = 0; i < n; i++) {
                json_t *p = json_object_get(paths, routes[i].pattern);
                if (!p)
                        fail_msg("route %s is not in openapi.json", routes[i].pattern);
                for (size_t k = 0; k < routes[i].n_methods; k++) {
                        char m[16];
                        method_lower(routes[i].methods[k].method, m, sizeof(m));
                        if (!json_object_get(p, m))
                                fail_msg("%s %s is not in openapi.json", m, routes[i].pattern);
                }
        }
        /* And the document promises nothing the router does not serve. */
        json_object_foreach(paths, key, item)
        {
                const struct route *r = NULL;
                const char *op;
                json_t *v;

                for (size_t i = 0; i < n; i++)
                        if (strcmp(routes[i].pattern, key) == 0)
                                r = &routes[i];
                if (!r)
                        fail_msg("openapi.json lists %s, which the router does not serve", key);
                json_object_foreach(item, op, v)
                {
                        enum http_method m;
                        char upper[16];
                        size_t i;

                        if (strcmp(op, "parameters") == 0 || strcmp(op, "summary") == 0 ||
                            strcmp(op, "description") == 0)
                                continue;
                        for (i = 0; op[i] && i + 1 < sizeof(upper); i++)
                                upper[i] = (char)(op[i] & ~0x20);
                        upper[i] = '\0';
                        m = http_method_from_string(upper);
                        if (!route_method_find(r, m))
                                fail_msg("openapi.json has %s %s, which the router refuses", op,
                                         key);
                }
                documented++;
        }
        assert_int_equal(documented, n);
        json_decref(doc);
}

static json_t *op_of(json_t *doc, const char *pattern, enum http_method m)
{
        char lower[16];

        method_lower(m, lower, sizeof(lower));
        return json_object_get(json_object_get(json_object_get(doc, "paths"), pattern), lower);
}

/* Whether the operation (or its path) documents query argument name. */
static bool documents_query(json_t *doc, const char *pattern, json_t *op, const char *name)
{
        json_t *lists[2] = {
            json_object_get(op, "parameters"),
            json_object_get(json_object_get(json_object_get(doc, "paths"), pattern), "parameters"),
        };

        for (size_t l = 0; l < 2; l++) {
                size_t i;
                json_t *p;

                json_array_foreach(lists[l], i, p)
                {
                        if (strcmp(json_string_value(json_object_get(p, "in")) ?: "", "query") ==
                                0 &&
                            strcmp(json_string_value(json_object_get(p, "name")) ?: "", name) == 0)
                                return true;
                }
        }
        return false;
}

static void test_query_arguments_match_the_router(void **state)
{
        json_t *doc = json_loadb(api_openapi_json, api_openapi_json_len, 0, NULL);
        size_t n;
        const struct route *routes = router_table(&n);

        for (size_t i = 0; i < n; i++)
                for (size_t k = 0; k < routes[i].n_methods; k++) {
                        const struct route_method *m = &routes[i].methods[k];
                        json_t *op = op_of(doc, routes[i].pattern, m->method);
                        size_t taken = 0, documented = 0, x;
                        json_t *p;

                        for (const char *const *a = m->args; a && *a; a++, taken++)
                                if (!documents_query(doc, routes[i].pattern, op, *a))
                                        fail_msg("%s takes ?%s, which openapi.json lacks",
                                                 routes[i].pattern, *a);
                        json_array_foreach(json_object_get(op, "parameters"), x, p)
                        {
                                documented += strcmp(json_string_value(json_object_get(p, "in")),
                                                     "query") == 0;
                        }
                        if (documented != taken)
                                fail_msg("%s: openapi.json documents %zu query arguments, the "
                                         "router takes %zu",
                                         routes[i].pattern, documented, taken);
                }
        json_decref(doc);
}

static void test_every_status_is_listed(void **state)
{
        json_t *doc = json_loadb(api_openapi_json, api_openapi_json_len, 0, NULL);
        const char *path, *op;
        json_t *item, *v;

        json_object_foreach(json_object_get(doc, "paths"), path, item)
        {
                json_object_foreach(item, op, v)
                {
                        json_t *responses = json_object_get(v, "responses");

                        if (strcmp(op, "parameters") == 0)
                                continue;
                        if (json_object_get(responses, "default"))
                                fail_msg("%s %s has a default response: list each status", op,
                                         path);
                        /* Every route refuses unknown query arguments and oversized bodies. */
                        assert_non_null(json_object_get(responses, "400"));
                        assert_non_null(json_object_get(responses, "413"));
                }
        }
        json_decref(doc);
}

static void test_served_document_is_the_file_plus_the_catalog(void **state)
{
        size_t len = 0;
        const char *text = api_openapi_document(&len);
        json_t *served, *file, *schemas, *spec;

        assert_non_null(text);
        served = json_loadb(text, len, 0, NULL);
        file = json_loadb(api_openapi_json, api_openapi_json_len, 0, NULL);
        assert_non_null(served);
        schemas = json_object_get(json_object_get(served, "components"), "schemas");
        /* The double's catalog has one entry, copy. */
        assert_non_null(json_object_get(schemas, "params_copy"));
        spec = json_object_get(schemas, "JobSpec");
        assert_int_equal(json_array_size(json_object_get(spec, "allOf")), 1);
        json_object_del(schemas, "params_copy");
        json_object_del(spec, "allOf");
        json_object_del(json_object_get(json_object_get(spec, "properties"), "benchmark"), "enum");
        assert_true(json_equal(served, file));
        json_decref(served);
        json_decref(file);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_document_parses),
            cmocka_unit_test(test_every_route_is_documented_and_nothing_else),
            cmocka_unit_test(test_query_arguments_match_the_router),
            cmocka_unit_test(test_every_status_is_listed),
            cmocka_unit_test(test_served_document_is_the_file_plus_the_catalog),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
