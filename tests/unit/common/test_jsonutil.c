/* json_parse_strict and the dump helpers. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "testutil.h"

#include "jsonutil.h"

static json_t *parse(const char *s, size_t depth, json_error_t *err)
{
        return json_parse_strict(s, strlen(s), depth, err);
}

static void test_depth_at_limit_accepted(void **state)
{
        json_error_t err;
        json_t *j = parse("{\"a\":[[1]]}", 3, &err);

        assert_non_null(j);
        json_decref(j);
}

static void test_depth_over_limit_rejected(void **state)
{
        json_error_t err;

        assert_null(parse("{\"a\":[[[1]]]}", 3, &err));
        assert_int_equal(json_error_code(&err), json_error_stack_overflow);
        assert_null(parse("{\n \"a\": [[[1]]]}", 3, &err));
        assert_int_equal(err.line, 2);
        assert_int_equal(err.column, 9); /* the third "[" */
        assert_null(
            parse("[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", 32, &err));
}

static void test_depth_ignores_brackets_in_strings(void **state)
{
        json_error_t err;
        json_t *j = parse("{\"a\":\"[[[[{{{{\",\"b\":\"\\\"[[[[\\\\\",\"c\":[1]}", 2, &err);

        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "b")), "\"[[[[\\");
        json_decref(j);
}

static void test_duplicate_keys_rejected(void **state)
{
        json_error_t err;

        assert_null(parse("{\"a\":1,\"a\":2}", 8, &err));
        assert_int_equal(json_error_code(&err), json_error_duplicate_key);
        assert_null(parse("{\"x\":{\"a\":1,\"a\":1}}", 8, &err));
}

static void test_nul_byte_rejected(void **state)
{
        static const char buf[] = "{\"a\":\"b\0c\"}";
        json_error_t err;

        assert_null(json_parse_strict(buf, sizeof(buf) - 1, 8, &err));
        assert_int_equal(json_error_code(&err), json_error_null_character);
        assert_int_equal(err.position, 7);
        /* a trailing NUL counts too */
        assert_null(json_parse_strict("{}", 3, 8, &err));
        /* and the escaped form */
        assert_null(parse("{\"a\":\"\\u0000\"}", 8, &err));
}

static void test_parse_needs_exact_length(void **state)
{
        json_error_t err;
        json_t *j = json_parse_strict("{\"a\":1}garbage", 7, 8, &err);

        assert_non_null(j);
        json_decref(j);
        assert_null(parse("{\"a\":1} x", 8, &err));
        assert_null(parse("", 8, &err));
}

static void test_dump_compact_sorts_keys(void **state)
{
        json_t *j = json_pack("{s:i,s:i,s:[i]}", "b", 1, "a", 2, "c", 3);
        size_t len = 0;
        char *s = json_dump_compact(j, &len);

        assert_string_equal(s, "{\"a\":2,\"b\":1,\"c\":[3]}");
        assert_int_equal(len, strlen(s));
        free(s);
        json_decref(j);
}

static void test_dump_unsorted_keeps_insertion_order(void **state)
{
        json_t *j = json_pack("{s:i,s:i}", "b", 1, "a", 2);
        size_t len = 0;
        char *s = json_dump_unsorted(j, &len);

        assert_string_equal(s, "{\"b\":1,\"a\":2}");
        assert_int_equal(len, strlen(s));
        free(s);
        json_decref(j);
}

/* The thread's dump buffer, grown past what it keeps for a large dump and given back, serves
 * the next dump as well: each comes out whole, at its own length. */
static void test_dumps_after_a_large_one_are_whole(void **state)
{
        size_t big = 600 * 1024, len = 0;
        char *v = malloc(big + 1);
        assert_non_null(v);
        memset(v, 'x', big);
        v[big] = '\0';
        json_t *large = json_pack("{s:s}", "v", v), *small = json_pack("{s:i}", "n", 7);
        char *a = json_dump_compact(large, &len);

        assert_non_null(a);
        assert_int_equal(len, big + 8); /* {"v":"..."} */
        assert_int_equal(strlen(a), len);
        assert_memory_equal(a, "{\"v\":\"xxx", 9);
        char *b = json_dump_compact(small, &len);
        assert_string_equal(b, "{\"n\":7}");
        assert_int_equal(len, 7);
        free(a);
        free(b);
        free(v);
        json_decref(large);
        json_decref(small);
}

static unsigned long long rng = 0x9E3779B97F4A7C15ull;

static unsigned rnd(unsigned n)
{
        return test_rnd(&rng, n);
}

/* Random bytes for a string or key: ASCII, every escape jansson writes, control characters,
 * NUL, UTF-8 of 2-4 bytes at its edges, and (when bad) bytes that are not UTF-8: an overlong
 * form, a surrogate, a lone continuation, a sequence cut short, past U+10FFFF. */
static size_t random_bytes(char *buf, size_t cap, bool bad)
{
        static const char *const good[] = {
            "a",
            "b",
            "Z",
            "0",
            "\"",
            "\\",
            "/",
            "\b",
            "\f",
            "\n",
            "\r",
            "\t",
            "\x01",
            "\x1f",
            "\x7f",
            "é",
            "€",
            "😀",
            " ",
            "result",
            "{",
            "]",
            "\xc2\x80",
            "\xef\xbf\xbf",
            "\xf4\x8f\xbf\xbf",
            "\xe0\xa0\x80",
            "\xf0\x90\x80\x80",
        };
        static const char *const wrong[] = {"\xc0\xaf", "\xed\xa0\x80",     "\x80",
                                            "\xe2\x82", "\xf4\x90\x80\x80", "\xff"};
        size_t n = rnd(7), len = 0;

        for (size_t i = 0; i < n; i++) {
                const char *p;
                size_t l;

                if (rnd(12) == 0) {
                        p = "\0";
                        l = 1;
                } else {
                        p = bad && rnd(3) == 0 ? wrong[rnd(sizeof(wrong) / sizeof(wrong[0]))]
                                               : good[rnd(sizeof(good) / sizeof(good[0]))];
                        l = strlen(p);
                }
                if (len + l > cap)
                        break;
                memcpy(buf + len, p, l);
                len += l;
        }
        return len;
}

static json_t *random_tree(unsigned depth, bool bad)
{
        static const double reals[] = {
            0.0,     -0.0,    0.5,   1.0,     -1.5, 1e20,      1e-5, 1e300,  5e-324,
            123.456, 1e16,    1e17,  -2.5e-7, 0.1,  1.0 / 3.0, 1e21, 1e-300, 9007199254740993.0,
            1e100,   -1e-100, 2.5e15};
        static const json_int_t ints[] = {0, 1, -1, 42, INT64_MAX, INT64_MIN, 1000000, -10};
        char text[64];
        size_t len;

        switch (depth > 3 ? rnd(5) : rnd(8)) {
        case 0:
                return rnd(2) ? json_true() : (rnd(2) ? json_false() : json_null());
        case 1:
                return json_integer(rnd(2) ? ints[rnd(sizeof(ints) / sizeof(ints[0]))]
                                           : (json_int_t)rnd(2000000) - 1000000);
        case 2:
                if (rnd(2))
                        return json_real(reals[rnd(sizeof(reals) / sizeof(reals[0]))]);
                return json_real(((double)rnd(1000000) - 500000) / (double)(1 + rnd(10000)) *
                                 pow(10.0, (double)rnd(80) - 40.0));
        case 3:
        case 4:
                len = random_bytes(text, sizeof(text), bad);
                return json_stringn_nocheck(text, len);
        case 5: {
                json_t *a = json_array();
                unsigned n = rnd(5);
                for (unsigned i = 0; i < n; i++)
                        json_array_append_new(a, random_tree(depth + 1, bad));
                return a;
        }
        default: {
                json_t *o = json_object();
                /* Now and then past the dumper's 16 (insertion sort) and 32 (on its stack). */
                unsigned n = rnd(8) == 0 ? 17 + rnd(30) : rnd(6);
                for (unsigned i = 0; i < n; i++) {
                        /* Keys are always UTF-8: for one that is not, jansson writes a broken
                         * dump rather than failing (the own dumper gives up, and jansson's
                         * bytes are what they were); umd's keys come from its parser or its
                         * code. */
                        len = random_bytes(text, sizeof(text), false);
                        json_object_setn_new_nocheck(o, text, len, random_tree(depth + 1, bad));
                }
                return o;
        }
        }
}

/* umd's own dumper writes jansson's bytes for every tree jansson dumps, sorted or not, and
 * gives up exactly where jansson refuses (a string or key that is not UTF-8). */
/* Every byte value at every place of strings of 1..24 bytes, at every alignment: the span ends
 * at the first byte jansson would escape or that starts UTF-8, and nowhere else. */
static void test_plain_span_stops_at_the_first_byte_not_plain(void **state)
{
        char buf[40];

        for (unsigned c = 0; c < 256; c++) {
                bool plain = c >= 0x20 && c < 0x80 && c != '"' && c != '\\';

                for (size_t n = 1; n <= 24; n++)
                        for (size_t at = 0; at < n; at++)
                                for (size_t align = 0; align < 8; align++) {
                                        char *p = buf + align;

                                        memset(buf, 'a', sizeof(buf));
                                        p[at] = (char)c;
                                        if (at + 1 < n)
                                                p[n - 1] = '"'; /* a later stop changes nothing */
                                        p[n] = '\0';            /* nor one past the end */
                                        assert_int_equal(json_plain_span(p, n),
                                                         plain ? (at + 1 < n ? n - 1 : n) : at);
                                }
        }
        assert_int_equal(json_plain_span("", 0), 0);
}

static void test_own_dump_is_janssons(void **state)
{
        size_t refused = 0, sorted_big = 0;

        for (int i = 0; i < 20000; i++) {
                bool bad = i % 4 == 3;
                json_t *j = random_tree(0, bad);

                for (int sort = 0; sort < 2; sort++) {
                        size_t flags = JSON_COMPACT | JSON_ENCODE_ANY | (sort ? JSON_SORT_KEYS : 0);
                        char *want = json_dumps(j, flags), *got;
                        size_t len = 0;

                        got = json_dump_own(j, sort, &len);
                        if (!want) {
                                assert_null(got);
                                refused++;
                                continue;
                        }
                        assert_non_null(got);
                        assert_int_equal(len, strlen(want));
                        assert_memory_equal(got, want, len + 1);
                        /* The public calls give the same bytes. */
                        char *pub = sort ? json_dump_compact(j, NULL) : json_dump_unsorted(j, NULL);
                        assert_string_equal(pub, want);
                        sorted_big += sort && strlen(want) > 2000;
                        free(pub);
                        free(want);
                        free(got);
                }
                json_decref(j);
        }
        /* The generator reached both: trees jansson refuses and large ones. */
        assert_true(refused > 100);
        assert_true(sorted_big > 10);
}

/* A top level dumped with members left out or replaced is the dump of the object built so: random
 * objects, overrides of members they have and lack, large tops past the dumper's stack. */
static void test_dump_with_overrides_is_the_dump_of_the_changed_object(void **state)
{
        static const char *const keys[] = {"a", "b", "parts", "request", "zz"};

        for (int i = 0; i < 5000; i++) {
                json_t *j = random_tree(3, false), *built, *put[4] = {NULL};
                struct json_override ov[4];
                size_t n_ov = rnd(5), len = 0;
                char *want, *got;

                if (!json_is_object(j)) {
                        json_decref(j);
                        j = json_object();
                }
                for (size_t k = 0; k < 5; k++)
                        if (rnd(2))
                                json_object_set_new(j, keys[k], random_tree(2, false));
                /* Its top level again, values shared (keys may hold NUL: by length). */
                built = json_object();
                for (void *it = json_object_iter(j); it; it = json_object_iter_next(j, it))
                        json_object_setn(built, json_object_iter_key(it),
                                         json_object_iter_key_len(it), json_object_iter_value(it));
                for (size_t k = 0; k < n_ov; k++) {
                        put[k] = rnd(3) ? random_tree(3, false) : NULL;
                        ov[k] = (struct json_override){keys[k], put[k]};
                        if (!put[k])
                                json_object_del(built, keys[k]);
                        else if (json_object_get(built, keys[k]))
                                json_object_set(built, keys[k], put[k]);
                }
                want = json_dump_compact(built, NULL);
                got = json_dump_compact_with(j, ov, n_ov, &len);
                assert_non_null(got);
                assert_string_equal(got, want);
                assert_int_equal(len, strlen(want));
                free(want);
                free(got);
                for (size_t k = 0; k < n_ov; k++)
                        json_decref(put[k]);
                json_decref(built);
                json_decref(j);
        }
        json_t *not_object = json_array();
        assert_null(json_dump_compact_with(not_object, NULL, 0, NULL));
        json_decref(not_object);
}

/* A member whose array's objects are dumped with one member replaced is the dump of the object
 * built so: random arrays of random objects (some with the member, some with objects below
 * holding it, which stay as they are), beside members left out. */
static void test_dump_with_a_sub_override_replaces_the_member_in_each_object(void **state)
{
        for (int i = 0; i < 3000; i++) {
                json_t *j = json_object(), *built = json_object(), *parts = json_array();
                json_t *copies = json_array(), *mark = random_tree(2, false);
                size_t len = 0;

                for (size_t k = 0, n = rnd(4); k < n; k++) {
                        json_t *o = random_tree(2, false), *c;

                        if (!json_is_object(o)) {
                                json_array_append_new(parts, o); /* not an object: kept */
                                json_array_append(copies, o);
                                continue;
                        }
                        if (rnd(2))
                                json_object_set_new(o, "result", random_tree(2, false));
                        if (rnd(3) == 0) /* deeper: not the array's object, so not replaced */
                                json_object_set_new(o, "inner", json_pack("{s:i}", "result", 1));
                        c = json_object(); /* its top level again (keys may hold NUL) */
                        for (void *it = json_object_iter(o); it; it = json_object_iter_next(o, it))
                                json_object_setn(c, json_object_iter_key(it),
                                                 json_object_iter_key_len(it),
                                                 json_object_iter_value(it));
                        if (json_object_get(c, "result"))
                                json_object_set(c, "result", mark);
                        json_array_append_new(parts, o);
                        json_array_append_new(copies, c);
                }
                json_object_set_new(j, "parts", parts);
                json_object_set_new(j, "result", json_string("top: not replaced"));
                json_object_set_new(j, "gone", json_true());
                json_object_set_new(built, "parts", copies);
                json_object_set_new(built, "result", json_string("top: not replaced"));
                struct json_override ov[] = {{"gone", NULL}, {"parts", NULL, "result", mark}};
                char *want = json_dump_compact(built, NULL);
                char *got = json_dump_compact_with(j, ov, 2, &len);
                assert_non_null(got);
                assert_string_equal(got, want);
                assert_int_equal(len, strlen(want));
                free(want);
                free(got);
                json_decref(mark);
                json_decref(built);
                json_decref(j);
        }
}

/* Objects of more than 16 members whose keys came in order, in reverse, or in order but for the
 * last (or first) pair: each dumped with its keys sorted, as jansson sorts them. */
static void test_large_objects_in_order_or_nearly_are_sorted(void **state)
{
        char key[16];

        for (int shape = 0; shape < 4; shape++) {
                json_t *o = json_object();

                for (int i = 0; i < 40; i++) {
                        int k = shape == 1 ? 39 - i : i;
                        if (shape == 2 && (i == 38 || i == 39))
                                k = i == 38 ? 39 : 38;
                        if (shape == 3 && (i == 0 || i == 1))
                                k = i == 0 ? 1 : 0;
                        snprintf(key, sizeof(key), "k%02d", k);
                        json_object_set_new(o, key, json_integer(k));
                }
                char *want = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
                char *got = json_dump_compact(o, NULL);
                assert_string_equal(got, want);
                free(want);
                free(got);
                json_decref(o);
        }
}

/* A tree deeper than the dumper goes is still dumped (by jansson). */
static void test_deep_tree_is_dumped_by_jansson(void **state)
{
        json_t *root = json_array(), *a = root;
        char *s;

        for (int i = 0; i < 2100; i++) {
                json_t *b = json_array();
                json_array_append_new(a, b);
                a = b;
        }
        assert_null(json_dump_own(root, true, NULL));
        s = json_dump_compact(root, NULL);
        assert_non_null(s);
        assert_int_equal(strlen(s), 2 * 2101);
        free(s);
        json_decref(root);
}

static void test_dump_pretty_ends_with_newline(void **state)
{
        json_t *j = json_pack("{s:i}", "a", 1);
        size_t len = 0;
        char *s = json_dump_pretty(j, &len);
        json_error_t err;
        json_t *back;

        assert_non_null(s);
        assert_int_equal(len, strlen(s));
        assert_int_equal(s[len - 1], '\n');
        assert_non_null(strchr(s, ' '));
        back = json_parse_strict(s, len, 8, &err);
        assert_true(json_equal(j, back));
        json_decref(back);
        free(s);
        json_decref(j);
}

static void test_result_measurement_finds_by_name(void **state)
{
        json_t *r = json_pack("{s:[{s:s, s:i}, {s:i}, {s:s, s:i}]}", "measurements", "name", "h2d",
                              "gbps", 1, "gbps", 2, "name", "d2h", "gbps", 3);

        assert_int_equal(json_integer_value(json_object_get(result_measurement(r, "d2h"), "gbps")),
                         3);
        assert_int_equal(json_integer_value(json_object_get(result_measurement(r, "h2d"), "gbps")),
                         1);
        assert_null(result_measurement(r, "bidir"));
        assert_null(result_measurement(r, NULL));
        assert_null(result_measurement(NULL, "h2d"));
        json_decref(r);
}

static void test_array_find_takes_the_first_with_that_string(void **state)
{
        json_t *a = json_pack("[{s:i}, {s:i, s:i}, {s:s, s:i}, {s:s, s:i}]", "mode", 1, "mode", 2,
                              "n", 0, "mode", "pinned", "n", 3, "mode", "pinned", "n", 4);

        assert_int_equal(
            json_integer_value(json_object_get(json_array_find(a, "mode", "pinned"), "n")), 3);
        assert_null(json_array_find(a, "mode", "managed"));
        assert_null(json_array_find(a, "mode", NULL));
        json_t *o = json_object();
        assert_null(json_array_find(o, "mode", "pinned")); /* not an array */
        assert_null(json_array_find(NULL, "mode", "pinned"));
        json_decref(o);
        json_decref(a);
}

/* The bound never says "fits" for a dump longer than max: the worst cases of each type (reals
 * of 17 digits and an exponent, control bytes escaped as \u00XX, the smallest integer) and a
 * result-like mix, each against its own dump's length and one byte less. */
static void test_dump_fits_bounds_the_dump(void **state)
{
        (void)state;
        const char *docs[] = {
            "-2.2250738585072014e-308",
            "[0.1,0.3,1e-07,-9223372036854775808,true,false,null]",
            "{\"\\u0001\\u001f\":\"\\u0003\\u0002\\\"\\\\\"}",
            "{\"a\":{\"b\":[1,2.5,{\"c\":\"d\"}]},\"e\":[],\"f\":{}}",
        };

        for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
                json_t *j = json_loads(docs[i], JSON_DECODE_ANY, NULL);
                size_t len = 0;
                char *d;

                assert_non_null(j);
                d = json_dump_compact(j, &len);
                assert_non_null(d);
                assert_false(json_dump_compact_fits(j, len - 1));
                free(d);
                json_decref(j);
        }
        json_t *big = json_loads("{\"samples\":[0.0080519710557391683,1.5]}", 0, NULL);
        assert_true(json_dump_compact_fits(big, 4096));
        assert_false(json_dump_compact_fits(big, 10));
        assert_false(json_dump_compact_fits(NULL, 4096));
        json_decref(big);
}

static void path_is(const char *json, const char *at, const char *want)
{
        char out[64];

        json_path_at(json, strlen(json), (size_t)(strstr(json, at) - json), out, sizeof(out));
        assert_string_equal(out, want);
}

static void test_path_at_names_members_and_elements(void **state)
{
        path_is("{\"params\": {\"size\": 1, \"sizes\": [1, 2, X]}}", "X", "params.sizes[2]");
        path_is("{\"a\": 1, \"b\": X}", "X", "b");
        path_is("{\"a\": {\"x\": [1]}, \"b\": X}", "X", "b");
        path_is("{\"a\": \"}],{\", \"b\": X}", "X", "b");
        path_is("[{\"k\": 1}, {\"k\": X}]", "X", "[1].k");
        path_is("X", "X", "");
}

static void test_path_at_is_cut_to_its_buffer(void **state)
{
        const char *json = "{\"aaaaaaaaaaaaaaaa\": {\"bbbbbbbbbbbbbbbb\": X}}";
        char out[8];

        json_path_at(json, strlen(json), (size_t)(strchr(json, 'X') - json), out, sizeof(out));
        assert_string_equal(out, "aaaaaaa");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_path_at_names_members_and_elements),
            cmocka_unit_test(test_path_at_is_cut_to_its_buffer),
            cmocka_unit_test(test_depth_at_limit_accepted),
            cmocka_unit_test(test_depth_over_limit_rejected),
            cmocka_unit_test(test_depth_ignores_brackets_in_strings),
            cmocka_unit_test(test_duplicate_keys_rejected),
            cmocka_unit_test(test_nul_byte_rejected),
            cmocka_unit_test(test_parse_needs_exact_length),
            cmocka_unit_test(test_dump_compact_sorts_keys),
            cmocka_unit_test(test_array_find_takes_the_first_with_that_string),
            cmocka_unit_test(test_dump_pretty_ends_with_newline),
            cmocka_unit_test(test_dump_unsorted_keeps_insertion_order),
            cmocka_unit_test(test_dumps_after_a_large_one_are_whole),
            cmocka_unit_test(test_result_measurement_finds_by_name),
            cmocka_unit_test(test_dump_fits_bounds_the_dump),
            cmocka_unit_test(test_plain_span_stops_at_the_first_byte_not_plain),
            cmocka_unit_test(test_own_dump_is_janssons),
            cmocka_unit_test(test_deep_tree_is_dumped_by_jansson),
            cmocka_unit_test(test_dump_with_overrides_is_the_dump_of_the_changed_object),
            cmocka_unit_test(test_dump_with_a_sub_override_replaces_the_member_in_each_object),
            cmocka_unit_test(test_large_objects_in_order_or_nearly_are_sorted),
        };

        return cmocka_run_group_tests_name("jsonutil", tests, NULL, NULL);
}
