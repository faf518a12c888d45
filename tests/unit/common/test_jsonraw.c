/* jsonraw.c: json_canonical accepts every compact sorted dump jansson makes, and whatever it
 * accepts parses and dumps again to the same bytes (random trees, and random edits of their
 * dumps); the forms jansson never writes are refused; raw nodes and json_raw_pick. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "testutil.h"

#include "jsonraw.h"
#include "jsonutil.h"

static unsigned long long rng = 88172645463325252ull;

static unsigned rnd(unsigned n)
{
        return test_rnd(&rng, n);
}

static bool canon(const char *s)
{
        return json_canonical(s, strlen(s), 64, NULL, NULL);
}

/* A random string: ASCII, escapes jansson writes, control characters, and UTF-8 of 2-4 bytes. */
static void random_text(char *buf, size_t cap)
{
        static const char *const pieces[] = {
            "a",        "b",
            "Z",        "0",
            "\"",       "\\",
            "/",        "\b",
            "\f",       "\n",
            "\r",       "\t",
            "\x01",     "\x1f",
            "\x7f",     "é",
            "€",        "😀",
            " ",        "result",
            "{",        "]",
            ":",        ",",
            "\xc2\x80", "\xef\xbf\xbf",
        };
        size_t n = rnd(6), len = 0;

        buf[0] = '\0';
        for (size_t i = 0; i < n; i++) {
                const char *p = pieces[rnd(sizeof(pieces) / sizeof(pieces[0]))];
                if (len + strlen(p) + 1 > cap)
                        break;
                strcpy(buf + len, p);
                len += strlen(p);
        }
}

static json_t *random_value(unsigned depth)
{
        static const double reals[] = {
            0.0,     -0.0, 0.5,  1.0,     -1.5, 1e20,      1e-5, 1e300,  5e-324,
            123.456, 1e16, 1e17, -2.5e-7, 0.1,  1.0 / 3.0, 1e21, 1e-300, 9007199254740993.0};
        char text[64];

        switch (depth > 3 ? rnd(5) : rnd(8)) {
        case 0:
                return rnd(2) ? json_true() : (rnd(2) ? json_false() : json_null());
        case 1: {
                static const json_int_t ints[] = {0, 1, -1, 42, INT64_MAX, INT64_MIN, 1000000};
                return json_integer(rnd(2) ? ints[rnd(7)] : (json_int_t)rnd(100000) - 50000);
        }
        case 2:
                if (rnd(2))
                        return json_real(reals[rnd(sizeof(reals) / sizeof(reals[0]))]);
                return json_real(((double)rnd(1000000) - 500000) / (double)(1 + rnd(10000)) *
                                 pow(10.0, (double)rnd(40) - 20.0));
        case 3:
        case 4:
                random_text(text, sizeof(text));
                return json_string(text);
        case 5: {
                json_t *a = json_array();
                unsigned n = rnd(4);
                for (unsigned i = 0; i < n; i++)
                        json_array_append_new(a, random_value(depth + 1));
                return a;
        }
        default: {
                json_t *o = json_object();
                unsigned n = rnd(5);
                for (unsigned i = 0; i < n; i++) {
                        random_text(text, sizeof(text));
                        json_object_set_new(o, text, random_value(depth + 1));
                }
                return o;
        }
        }
}

static void test_every_jansson_dump_is_canonical(void **state)
{
        for (int i = 0; i < 20000; i++) {
                json_t *j = random_value(0);
                size_t len;
                char *s = json_dump_compact(j, &len);

                assert_non_null(s);
                if (!json_canonical(s, len, 64, NULL, NULL))
                        fail_msg("refused jansson's own dump: %s", s);
                free(s);
                json_decref(j);
        }
}

/* Whatever is accepted is what jansson would write for what it reads. */
static void check_sound(const char *s, size_t len)
{
        json_error_t err;
        json_t *j;
        char *again;
        size_t alen;

        if (!json_canonical(s, len, 64, NULL, NULL))
                return;
        j = json_parse_strict(s, len, 64, &err);
        if (!j) /* only objects and arrays at the top: values inside one */
                j = json_loadb(s, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &err);
        if (!j)
                fail_msg("accepted what jansson refuses (%s): %.*s", err.text, (int)len, s);
        again = json_dump_compact(j, &alen);
        if (alen != len || memcmp(again, s, len) != 0)
                fail_msg("accepted %.*s, which jansson writes %s", (int)len, s, again);
        free(again);
        /* Built without jansson's parser: the same tree, or a refusal where jansson refuses a
         * NUL (json_canonical accepts "\u0000", which jansson writes). */
        json_t *built = json_canonical_load(s, len, 64);
        if (built && !json_equal(built, j))
                fail_msg("json_canonical_load built another tree of %.*s", (int)len, s);
        if (!built && !memmem(s, len, "\\u0000", 6))
                fail_msg("json_canonical_load refused %.*s", (int)len, s);
        json_decref(built);
        json_decref(j);
}

static void test_what_is_accepted_dumps_to_itself(void **state)
{
        static const char *const inserts[] = {" ", "\\",   "\"",   ",",    "-", "0",  "e", "E",
                                              "+", ".",    "1",    "u",    "/", "{}", "[", "]",
                                              "}", "\xff", "\x80", "\xc0", "n", "9",  "00"};
        char buf[8192];

        for (int i = 0; i < 40000; i++) {
                json_t *j = random_value(0);
                size_t len;
                char *s = json_dump_compact(j, &len);

                json_decref(j);
                if (len + 8 > sizeof(buf) || len == 0) {
                        free(s);
                        continue;
                }
                memcpy(buf, s, len);
                free(s);
                for (int e = 0, n = 1 + (int)rnd(2); e < n && len > 0; e++) {
                        size_t at = rnd((unsigned)len);
                        switch (rnd(3)) {
                        case 0: /* delete a byte */
                                memmove(buf + at, buf + at + 1, len - at - 1);
                                len--;
                                break;
                        case 1: { /* insert a piece */
                                const char *p = inserts[rnd(sizeof(inserts) / sizeof(inserts[0]))];
                                size_t pl = strlen(p);
                                if (len + pl > sizeof(buf))
                                        break;
                                memmove(buf + at + pl, buf + at, len - at);
                                memcpy(buf + at, p, pl);
                                len += pl;
                                break;
                        }
                        default: /* swap two bytes */
                        {
                                size_t b = rnd((unsigned)len);
                                char t = buf[at];
                                buf[at] = buf[b];
                                buf[b] = t;
                        }
                        }
                }
                check_sound(buf, len);
        }
}

static void test_forms_jansson_never_writes_are_refused(void **state)
{
        static const char *const refused[] = {
            "{\"b\":1,\"a\":2}", /* unsorted */
            "{\"a\":1,\"a\":1}", /* duplicate */
            "{\"a\": 1}",        /* space */
            " {}",
            "{}\n",
            "[1,]",
            "[1 ,2]",
            "-0",
            "01",
            "1.5E3",
            "1e+5",
            "1e05",
            "1.50",
            "100000000000000000000",
            "9223372036854775808",
            "-9223372036854775809",
            "10000000000000000000",
            "1e400",
            "0.10000000000000001e0",
            "\"\\/\"",
            "\"\\u001f\"", /* jansson writes capitals */
            "\"\\u0041\"",
            "\"\\u000A\"",
            "\"\\u0000\"",
            "\"\\ud83d\\ude00\"",
            "\"\x01\"",
            "\"\xc0\xaf\"",         /* overlong */
            "\"\xed\xa0\x80\"",     /* a surrogate */
            "\"\xf4\x90\x80\x80\"", /* past U+10FFFF */
            "\"\xe2\x82\"",         /* cut short */
            "tru",
            "nul",
            "{\"a\"}",
            "[",
            "",
            "{\"a\":1}x",
        };

        for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
                if (canon(refused[i]))
                        fail_msg("accepted %s", refused[i]);
        assert_true(canon("{\"a\":1.5,\"b\":[true,false,null],\"c\":\"\\u001F\\n\"}"));
        assert_true(canon("[1e20,0.25,-0.0,0.0,9223372036854775807,-9223372036854775808]"));
        assert_true(canon("{\"A\":1,\"a\":2,\"é\":3}")); /* bytes order: capitals first */
}

/* A stored document read back without jansson's parser is the tree jansson would make, its
 * members in the same order (a dump of it is the same bytes). */
static void test_canonical_load_builds_what_jansson_parses(void **state)
{
        for (int i = 0; i < 20000; i++) {
                json_t *j = random_value(0), *want, *got;
                size_t len, again_len;
                char *s = json_dump_compact(j, &len), *again;

                assert_non_null(s);
                want = json_loadb(s, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
                got = json_canonical_load(s, len, 64);
                if (memmem(s, len, "\\u0000", 6)) {
                        assert_null(got); /* jansson refuses it without JSON_ALLOW_NUL */
                } else {
                        if (!got || !json_equal(got, want))
                                fail_msg("not jansson's tree of %s", s);
                        again = json_dump_unsorted(got, &again_len);
                        char *order = json_dump_unsorted(want, NULL);
                        assert_string_equal(again, order);
                        free(again);
                        free(order);
                }
                json_decref(got);
                json_decref(want);
                free(s);
                json_decref(j);
        }
}

/* Each byte alone, as a value and as a key: jansson's dump of it is accepted and read back as
 * that byte; a lone byte of 0x80 or more (not UTF-8) is refused as it stands. */
static void test_every_byte_in_a_string_and_a_key(void **state)
{
        for (unsigned c = 1; c < 256; c++) {
                char one[2] = {(char)c, '\0'}, raw[8];
                json_t *j = json_pack("{s:s, s:i}", "v", one, one, 1), *got;
                size_t len;
                char *s;

                if (c >= 0x80) {
                        assert_null(j); /* jansson refuses it too */
                        snprintf(raw, sizeof(raw), "\"%c\"", (char)c);
                        assert_false(canon(raw));
                        continue;
                }
                assert_non_null(j);
                s = json_dump_compact(j, &len);
                assert_non_null(s);
                if (!json_canonical(s, len, 64, NULL, NULL))
                        fail_msg("byte 0x%02x: %s refused", c, s);
                got = json_canonical_load(s, len, 64);
                if (!got || !json_equal(got, j))
                        fail_msg("byte 0x%02x: %s read back otherwise", c, s);
                json_decref(got);
                free(s);
                json_decref(j);
        }
}

/* A key of up to 256 bytes is checked, whether read in place (plain bytes) or decoded (with an
 * escape), and its order with the key before it is the decoded bytes' order; a longer one is
 * "not surely". */
static void test_keys_in_place_and_decoded_alike(void **state)
{
        char key[300], doc[700];

        for (size_t n = 255; n <= 257; n++)
                for (int escaped = 0; escaped < 2; escaped++) {
                        memset(key, 'k', n);
                        key[n] = '\0';
                        if (escaped)
                                memcpy(key + n - 2, "\\n", 2); /* decoded: n - 1 bytes */
                        size_t decoded = escaped ? n - 1 : n;
                        snprintf(doc, sizeof(doc), "{\"%s\":1}", key);
                        assert_int_equal(canon(doc), decoded <= 256);
                        json_t *got = json_canonical_load(doc, strlen(doc), 64);
                        assert_int_equal(got != NULL, decoded <= 256);
                        json_decref(got);
                }
        /* "a\n" decodes to "a" and a newline (0x0A), which sorts before "a0" though '\\' does not.
         */
        assert_true(canon("{\"a\\n\":1,\"a0\":2}"));
        assert_false(canon("{\"a0\":1,\"a\\n\":2}"));
        /* In place and decoded keys that are the same bytes: a duplicate. */
        assert_false(canon("{\"a\\n\":1,\"a\\n\":2}"));
        assert_false(canon("{\"ab\":1,\"ab\":2}"));
}

/* What is not surely canonical is left to the caller's parser, which then decides. */
static void test_canonical_load_refuses_what_it_is_not_sure_of(void **state)
{
        static const char *const refused[] = {
            "{\"b\":1,\"a\":2}", "{\"a\":1,\"a\":1}", "{ \"a\":1}",    "[1,]",
            "{\"a\":1}x",        "{\"a\":1.50}",      "{\"a\":-0}",    "{\"\\u0000\":1}",
            "[\"\\u0000x\"]",    "{\"a\":[[[1]]]}",   "[\"\\u00e9\"]", "",
        };

        for (size_t i = 0; i < sizeof(refused) / sizeof(*refused); i++) {
                json_t *j = json_canonical_load(refused[i], strlen(refused[i]), 3);
                if (j)
                        fail_msg("built %s", refused[i]);
        }
        const char *nested = "{\"a\":[[1]],\"b\":\"\\n\"}";
        json_t *j = json_canonical_load(nested, strlen(nested), 3);
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "b")), "\n");
        json_decref(j);
}

/* A real proven once is not proven again in the same scan, but a repeated real that is not
 * jansson's text is refused every time; integers written as reals are jansson's text. */
static void test_repeated_and_integral_reals(void **state)
{
        assert_true(canon("[0.0080519710557391683,0.0080519710557391683,0.0,0.0,-0.0]"));
        assert_false(canon("[0.0080519710557391683,0.008051971055739168]")); /* repr, not %.17g */
        assert_false(canon("[0.5,0.5,0.50]"));
        assert_false(canon("[0.50,0.50]"));
        assert_false(canon("[1.0,-7.0,123456789012345.0,1234567890123456.0,1e+17]"));
        assert_true(canon("[1.0,-7.0,123456789012345.0,1234567890123456.0,1e17]"));
        assert_false(canon("[01.0]"));
        assert_false(canon("[1.00]"));
        assert_false(canon("[100000000000000000.0]")); /* jansson writes 1e17 */
        /* More distinct reals than the scan remembers, then the first again. */
        assert_true(canon("[0.10000000000000001,0.20000000000000001,0.30000000000000004,"
                          "0.40000000000000002,0.5,0.10000000000000001,0.20000000000000001]"));
        assert_false(canon("[0.10000000000000001,0.20000000000000001,0.30000000000000004,"
                           "0.40000000000000002,0.5,0.10000000000000001,0.1]"));
}

/* What jansson writes for the real its parser reads from tok: the text the fast proof must
 * never claim for a token that is not it. */
static bool is_janssons_text(const char *tok)
{
        char *end;
        double v = strtod(tok, &end);

        if (*end || !isfinite(v))
                return false;
        json_t *r = json_real(v);
        char *text = json_dumps(r, JSON_ENCODE_ANY | JSON_COMPACT);
        bool same = text && strcmp(text, tok) == 0;

        free(text);
        json_decref(r);
        return same;
}

static double random_real(void)
{
        char buf[64];
        uint64_t bits;

        switch (rnd(4)) {
        case 0: /* any double of a magnitude results have, and beyond */
                bits = (uint64_t)rnd(1u << 16) << 48 | (uint64_t)rnd(1u << 16) << 32 |
                       (uint64_t)rnd(1u << 16) << 16 | rnd(1u << 16);
                double v;
                memcpy(&v, &bits, sizeof(v));
                return isfinite(v) ? v : 0.5;
        case 1: /* a short decimal, as figures often are */
                snprintf(buf, sizeof(buf), "%u.%ue%d", rnd(100000), rnd(1000), (int)rnd(40) - 20);
                return strtod(buf, NULL);
        case 2: { /* a power of ten or of two, or next to one */
                double p = rnd(2) ? pow(10, (int)rnd(60) - 20) : ldexp(1, (int)rnd(180) - 60);
                unsigned how = rnd(3);

                return (how == 0 ? p : nextafter(p, how == 1 ? INFINITY : 0)) * (rnd(2) ? -1 : 1);
        }
        default: /* a ratio of small integers, as a mean or a rate is */
                return (double)(rnd(1000000) + 1) / (double)(rnd(999) + 1) *
                       pow(10, (int)rnd(24) - 12);
        }
}

/* Edits of jansson's text for one real that jansson never writes for the double they read as
 * (or sometimes does): a digit off by one, one digit more or less, a zero added, the
 * exponent's sign and zeros, the other notation. */
static size_t edits_of(const char *tok, char out[][64], size_t max)
{
        size_t n = 0, len = strlen(tok);
        const char *e = strchr(tok, 'e');
        size_t mant = e ? (size_t)(e - tok) : len;

#define EDIT(...) (n < max ? (void)snprintf(out[n++], 64, __VA_ARGS__) : (void)0)
        for (size_t i = 0; i < mant; i++)
                if (tok[i] >= '0' && tok[i] <= '9') {
                        EDIT("%.*s%c%s", (int)i, tok, tok[i] == '9' ? '8' : tok[i] + 1,
                             tok + i + 1);
                        EDIT("%.*s%c%s", (int)i, tok, tok[i] == '0' ? '1' : tok[i] - 1,
                             tok + i + 1);
                }
        EDIT("%.*s0%s", (int)mant, tok, tok + mant);
        EDIT("%.*s1%s", (int)mant, tok, tok + mant);
        EDIT("%.*s9%s", (int)mant, tok, tok + mant);
        if (mant > 3)
                EDIT("%.*s%s", (int)mant - 1, tok, tok + mant);
        if (e) {
                EDIT("%.*sE%s", (int)mant, tok, e + 1);
                EDIT("%.*se+%s", (int)mant, tok, e[1] == '-' ? e + 2 : e + 1);
                EDIT("%.*se%s0%s", (int)mant, tok, e[1] == '-' ? "-" : "",
                     e[1] == '-' ? e + 2 : e + 1);
        }
        char *endp;
        double v = strtod(tok, &endp);
        EDIT("%.17e", v);
        EDIT("%.16e", v);
        EDIT("%.17f", v);
        EDIT("%.20g", v);
        EDIT("%.16g", v);
        EDIT("0%s", tok);
#undef EDIT
        return n;
}

/* The fast proof (no strtod, no print) claims only jansson's own text: on random reals' text
 * and on every edit of it, a claim is always true; and it does claim most of the texts of
 * magnitudes results have, so that it is worth having. */
static void test_fast_real_proof_claims_only_janssons_text(void **state)
{
        size_t claimed = 0, in_range = 0, edits_claimed = 0;
        char edits[64][64];

        for (int i = 0; i < 40000; i++) {
                double v = random_real();
                json_t *r = json_real(v);
                char *tok = json_dumps(r, JSON_ENCODE_ANY | JSON_COMPACT);

                json_decref(r);
                assert_non_null(tok);
                if (json_real_surely_jansson(tok, strlen(tok))) {
                        assert_true(is_janssons_text(tok));
                        claimed++;
                }
                if (fabs(v) > 1e-9 && fabs(v) < 1e40)
                        in_range++;
                for (size_t k = 0, n = edits_of(tok, edits, 64); k < n; k++)
                        if (json_real_surely_jansson(edits[k], strlen(edits[k]))) {
                                if (!is_janssons_text(edits[k]))
                                        fail_msg("claimed %s (from %s)", edits[k], tok);
                                edits_claimed++;
                        }
                free(tok);
        }
        assert_true(claimed * 100 >= in_range * 95);
        /* Some edits are jansson's text for another double, and are claimed as such. */
        assert_true(edits_claimed > 0);
        /* Each power of ten written as jansson writes a real of its shape ("0.001", "1e-5",
         * "1e20"): claimed only where it is the text of the double nearest it, not where that
         * double lies below and prints with the exponent below. */
        for (int x = -12; x < 45; x++) {
                char t[64];

                if (x < -4)
                        snprintf(t, sizeof(t), "1e%d", x);
                else if (x < 0)
                        snprintf(t, sizeof(t), "0.%0*d1", -x - 1, 0);
                else if (x < 17)
                        snprintf(t, sizeof(t), "1%0*d.0", x, 0);
                else
                        snprintf(t, sizeof(t), "1e%d", x);
                if (x == -1)
                        snprintf(t, sizeof(t), "0.1");
                if (json_real_surely_jansson(t, strlen(t)) && !is_janssons_text(t))
                        fail_msg("claimed %s", t);
        }
        /* Not its shapes: refused whatever the value. */
        const char *not_shapes[] = {"1.5E3",
                                    "1.5e+3",
                                    "1.5e03",
                                    "15e2",
                                    "1500.00",
                                    "01.5",
                                    "0.50",
                                    ".5",
                                    "5.",
                                    "1e5",
                                    "100000000000000000.0",
                                    "1e16",
                                    "0.00001",
                                    "-0.5e-5",
                                    "1.2345e16", /* jansson: 12345000000000000.0 */
                                    "1.2345e-4", /* jansson: 0.00012345 */
                                    "12345678901234567890.0"};
        for (size_t k = 0; k < sizeof(not_shapes) / sizeof(*not_shapes); k++)
                assert_false(json_real_surely_jansson(not_shapes[k], strlen(not_shapes[k])));
        assert_true(json_real_surely_jansson("1.5", 3));
        assert_true(json_real_surely_jansson("0.25", 4)); /* a power of two */
        assert_true(json_real_surely_jansson("-1.5e-5", 7));
        assert_true(json_real_surely_jansson("1.25e20", 7));
        assert_false(json_real_surely_jansson("2.5e-5", 6)); /* jansson: 2.5000000000000001e-5 */
        assert_true(json_real_surely_jansson("0.0080519710557391683", 21));
}

static void test_depth_limit_as_json_parse_strict(void **state)
{
        assert_true(json_canonical("{\"a\":[[1]]}", 11, 3, NULL, NULL));
        assert_false(json_canonical("{\"a\":[[[1]]]}", 13, 3, NULL, NULL));
}

static void test_member_span(void **state)
{
        const char *f = "{\"job\":\"x\",\"ok\":true,\"result\":{\"a\":[1,{\"result\":2}]},"
                        "\"type\":\"result\"}";
        struct json_span sp = {99, 99};

        assert_true(json_canonical(f, strlen(f), 64, "result", &sp));
        assert_int_equal(sp.len, strlen("{\"a\":[1,{\"result\":2}]}"));
        assert_memory_equal(f + sp.off, "{\"a\":[1,{\"result\":2}]}", sp.len);
        assert_true(json_canonical(f, strlen(f), 64, "nothing", &sp));
        assert_int_equal(sp.len, 0);
}

static void test_raw_node(void **state)
{
        const char *b = "{\"benchmark\":\"copy\",\"n\":[1,2]}";
        json_t *raw = json_raw_new(b, strlen(b)), *tree, *plain = json_string("copy");
        const char *got;
        size_t len;

        assert_non_null(raw);
        assert_true(json_raw_get(raw, &got, &len));
        assert_int_equal(len, strlen(b));
        assert_memory_equal(got, b, len);
        assert_false(json_raw_get(plain, NULL, NULL));
        assert_false(json_raw_get(json_object_get(raw, "x"), NULL, NULL));
        tree = json_raw_tree(raw);
        assert_string_equal(json_string_value(json_object_get(tree, "benchmark")), "copy");
        json_decref(tree);
        tree = json_raw_tree(plain); /* not raw: itself */
        assert_ptr_equal(tree, plain);
        json_decref(tree);
        json_decref(plain);
        json_decref(raw);
}

/* A raw node larger than the buffer a thread keeps for making them, then a small one: both are
 * their bytes exactly. */
static void test_raw_nodes_after_a_large_one_are_their_bytes(void **state)
{
        size_t big = 300 * 1024;
        char *b = malloc(big + 3);
        const char *got, *small = "[1,2]";
        size_t len;

        assert_non_null(b);
        b[0] = '"';
        memset(b + 1, 'y', big);
        b[big + 1] = '"';
        b[big + 2] = '\0';
        json_t *large = json_raw_new(b, big + 2), *other = json_raw_new(small, strlen(small));
        assert_true(json_raw_get(large, &got, &len));
        assert_int_equal(len, big + 2);
        assert_memory_equal(got, b, len);
        assert_true(json_raw_get(other, &got, &len));
        assert_int_equal(len, strlen(small));
        assert_memory_equal(got, small, len);
        json_decref(large);
        json_decref(other);
        free(b);
}

static void test_pick_reads_only_the_paths(void **state)
{
        static const char *const paths[] = {"benchmark", "measurements[].name",
                                            "measurements[].gbps", NULL};
        const char *b = "{\"benchmark\":\"copy\",\"context\":{\"x\":1},\"measurements\":[{"
                        "\"gbps\":0.5,\"name\":\"h2d\",\"samples_ms\":[1.0]},7,{\"name\":"
                        "\"d2h\"}],\"notes\":[]}";
        json_t *raw = json_raw_new(b, strlen(b));
        json_t *v = json_raw_pick(raw, paths), *m;
        char *s = json_dump_compact(v, NULL);

        assert_string_equal(s, "{\"benchmark\":\"copy\",\"measurements\":[{\"gbps\":0.5,\"name\":"
                               "\"h2d\"},{},{\"name\":\"d2h\"}]}");
        m = result_measurement(v, "h2d");
        assert_non_null(m);
        free(s);
        json_decref(v);
        json_decref(raw);
}

/* Picking every member of an object gives the object: each value read as jansson reads it. */
static void test_pick_of_every_member_is_the_tree(void **state)
{
        for (int i = 0; i < 5000; i++) {
                json_t *j = json_object(), *raw, *got, *v;
                const char *paths[8], *k;
                size_t len, n = 0;
                char *s;

                for (unsigned m = rnd(6); m > 0; m--) {
                        char key[16];
                        snprintf(key, sizeof(key), "k%u", rnd(1000));
                        json_object_set_new(j, key, random_value(1));
                }
                json_object_foreach(j, k, v) paths[n++] = k;
                paths[n] = NULL;
                s = json_dump_compact(j, &len);
                assert_true(json_canonical(s, len, 64, NULL, NULL));
                raw = json_raw_new(s, len);
                got = json_raw_pick(raw, paths);
                if (!json_equal(got, j))
                        fail_msg("picked differently from %s", s);
                free(s);
                json_decref(got);
                json_decref(raw);
                json_decref(j);
        }
}

/* Picked while the frame is checked: the same tree json_raw_pick gives of the member's bytes,
 * for members made to hold what the paths name (objects in arrays, scalars, nesting) among
 * random others, inside a frame with members before and after it. */
static void test_pick_while_checking_is_the_pick_of_the_bytes(void **state)
{
        static const char *const paths[] = {"a", "m[].x", "m[].y", "z", NULL};

        for (int i = 0; i < 5000; i++) {
                json_t *res = json_object(), *frame, *m = json_array(), *want, *got = NULL, *raw;
                struct json_span span = {0, 0};
                size_t len;
                char *s;

                json_object_set_new(res, "a", random_value(1));
                json_object_set_new(res, "b", random_value(0));
                for (unsigned k = rnd(4); k > 0; k--) {
                        json_t *o = rnd(4) ? json_object() : random_value(2);
                        if (json_is_object(o) && rnd(2))
                                json_object_set_new(o, "x", random_value(2));
                        if (json_is_object(o) && rnd(2))
                                json_object_set_new(o, "w", random_value(2));
                        json_array_append_new(m, o);
                }
                json_object_set_new(res, rnd(5) ? "m" : "n", m);
                if (rnd(2))
                        json_object_set_new(res, "z", random_value(1));
                frame = json_pack("{s:s, s:o, s:i}", "job", "j", "result", res, "z", 1);
                s = json_dump_compact(frame, &len);
                assert_true(json_canonical_pick(s, len, 64, "result", paths, &span, &got));
                assert_non_null(got);
                raw = json_raw_new(s + span.off, span.len);
                want = json_raw_pick(raw, paths);
                if (!json_equal(got, want))
                        fail_msg("picked otherwise while checking %s", s);
                json_decref(got);
                json_decref(want);
                json_decref(raw);
                free(s);
                json_decref(frame);
        }
}

/* No pick where the member is missing or not an object; and none from a frame refused. */
static void test_pick_while_checking_needs_an_object_member(void **state)
{
        static const char *const paths[] = {"a", NULL};
        const char *cases[] = {"{\"job\":1}", "{\"result\":[1]}", "{\"result\":\"x\"}"};
        json_t *got = json_true(), *keep = got;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                got = keep;
                assert_true(json_canonical_pick(cases[i], strlen(cases[i]), 64, "result", paths,
                                                NULL, &got));
                assert_null(got);
        }
        const char *spaced = "{\"result\":{\"a\":1} }", *empty = "{\"result\":{}}";
        got = keep;
        assert_false(json_canonical_pick(spaced, strlen(spaced), 64, "result", paths, NULL, &got));
        assert_ptr_equal(got, keep);
        assert_true(json_canonical_pick(empty, strlen(empty), 64, "result", paths, NULL, &got));
        assert_non_null(got);
        assert_int_equal(json_object_size(got), 0);
        json_decref(got);
        json_decref(keep);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_every_jansson_dump_is_canonical),
            cmocka_unit_test(test_what_is_accepted_dumps_to_itself),
            cmocka_unit_test(test_forms_jansson_never_writes_are_refused),
            cmocka_unit_test(test_canonical_load_builds_what_jansson_parses),
            cmocka_unit_test(test_every_byte_in_a_string_and_a_key),
            cmocka_unit_test(test_keys_in_place_and_decoded_alike),
            cmocka_unit_test(test_pick_while_checking_is_the_pick_of_the_bytes),
            cmocka_unit_test(test_pick_while_checking_needs_an_object_member),
            cmocka_unit_test(test_canonical_load_refuses_what_it_is_not_sure_of),
            cmocka_unit_test(test_repeated_and_integral_reals),
            cmocka_unit_test(test_fast_real_proof_claims_only_janssons_text),
            cmocka_unit_test(test_depth_limit_as_json_parse_strict),
            cmocka_unit_test(test_member_span),
            cmocka_unit_test(test_raw_node),
            cmocka_unit_test(test_raw_nodes_after_a_large_one_are_their_bytes),
            cmocka_unit_test(test_pick_reads_only_the_paths),
            cmocka_unit_test(test_pick_of_every_member_is_the_tree),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
