/* The served OpenAPI document parses, is OpenAPI 3.1, and describes exactly the routes and
 * methods the router serves (HEAD aside, which every GET route answers implicitly). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

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

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_document_parses),
            cmocka_unit_test(test_every_route_is_documented_and_nothing_else),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
