/* JSON kept as bytes (jsonraw.h). The recogniser accepts only what it is sure jansson 2.x writes
 * with JSON_COMPACT | JSON_SORT_KEYS for the value it would read: no whitespace, keys in
 * strictly ascending byte order (so no duplicates), strings in valid UTF-8 escaped as jansson
 * escapes them (\" \\ \b \f \n \r \t, \u00XX in capitals for the other control characters,
 * nothing else), integers in range without a sign on zero, and reals that read back and print
 * again (jansson's "%.17g" with its ".0" and exponent rules) as the same text. Anything else,
 * valid JSON or not, is "not surely": the caller parses it as before, so a doubt costs time,
 * never bytes. */
#include "jsonraw.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonutil.h"
#include "tbuf.h"

#define KEY_MAX 256 /* a longer key is "not surely" (results use short ones) */
#define NUM_MAX 64  /* likewise a number token: jansson writes reals in at most 24 */
/* jansson's own limit on nesting (JSON_PARSER_MAX_DEPTH in its private headers): what a value
 * parsed without a limit of umd's may nest to. */
#define JANSSON_MAX_DEPTH 2048

/* The last reals of a scan found to be jansson's text: a result repeats most of its reals (a
 * part of one sample has the same figure as its mean, median, min and max), and proving one
 * costs a strtod and a print. */
#define REALS_SEEN 4

struct pick;

struct scan {
        const char *b;
        size_t len, pos, max_depth;
        char seen[REALS_SEEN][NUM_MAX + 1];
        unsigned n_seen;
        /* json_canonical_pick: what to pick from the member's object while it is checked, and
         * whether it was (the member is there and an object). */
        struct pick *pick;
        bool picked;
};

static bool scan_value(struct scan *s, size_t depth, const char *member, struct json_span *span);
static bool pick_top(void *data, const char *key, size_t klen, struct json_span v);

static bool peek(const struct scan *s, char c)
{
        return s->pos < s->len && s->b[s->pos] == c;
}

static int hexval(char c)
{
        /* jansson writes "\\u%04X": capitals only. */
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* The bytes of one UTF-8 sequence starting at s->pos (its first byte >= 0x80), checked as
 * jansson checks them (no overlong forms, no surrogates, nothing past U+10FFFF). */
static bool scan_utf8(struct scan *s)
{
        const unsigned char *p = (const unsigned char *)s->b + s->pos;
        size_t left = s->len - s->pos, n;
        unsigned char lo = 0x80, hi = 0xBF;

        if (p[0] >= 0xC2 && p[0] <= 0xDF)
                n = 1;
        else if (p[0] >= 0xE0 && p[0] <= 0xEF) {
                n = 2;
                if (p[0] == 0xE0)
                        lo = 0xA0;
                else if (p[0] == 0xED)
                        hi = 0x9F;
        } else if (p[0] >= 0xF0 && p[0] <= 0xF4) {
                n = 3;
                if (p[0] == 0xF0)
                        lo = 0x90;
                else if (p[0] == 0xF4)
                        hi = 0x8F;
        } else
                return false;
        if (left < n + 1 || p[1] < lo || p[1] > hi)
                return false;
        for (size_t i = 2; i <= n; i++)
                if (p[i] < 0x80 || p[i] > 0xBF)
                        return false;
        s->pos += n + 1;
        return true;
}

/* The escape at b[pos] (a backslash), as jansson writes them: its byte into *ret_out and its
 * length (2, or 6 for a \u00XX), or 0 for one jansson would not write. */
static inline size_t decode_escape(const char *b, size_t len, size_t pos, char *ret_out)
{
        char out;

        if (len - pos < 2)
                return 0;
        switch (b[pos + 1]) {
        case '"':
                out = '"';
                break;
        case '\\':
                out = '\\';
                break;
        case 'b':
                out = '\b';
                break;
        case 'f':
                out = '\f';
                break;
        case 'n':
                out = '\n';
                break;
        case 'r':
                out = '\r';
                break;
        case 't':
                out = '\t';
                break;
        case 'u': {
                int h, l;

                /* Only a control character without a short escape, and never NUL (jansson
                 * reads none). */
                if (len - pos < 6 || b[pos + 2] != '0' || b[pos + 3] != '0')
                        return 0;
                h = hexval(b[pos + 4]);
                l = hexval(b[pos + 5]);
                if (h < 0 || h > 1 || l < 0)
                        return 0;
                out = (char)(h * 16 + l);
                if (out == 0 || out == '\b' || out == '\f' || out == '\n' || out == '\r' ||
                    out == '\t')
                        return 0;
                *ret_out = out;
                return 6;
        }
        default:
                return 0; /* \/ or a \u jansson would not write */
        }
        *ret_out = out;
        return 2;
}

/* A string at s->pos ('"') with some byte other than plain ones (json_plain_span), decoded.
 * When key is not NULL its decoded bytes go there (at most KEY_MAX) and their count to
 * *key_len. The cursor lives in locals and runs of plain bytes are taken at once: through s,
 * every byte's load had to wait for the last store to s->pos (a char may alias it), and this
 * and skip_value were a third of the supervisor's samples on an H100 host. */
__attribute__((noinline)) static bool scan_string_decoded(struct scan *s, char *key,
                                                          size_t *key_len)
{
        const char *b = s->b;
        size_t len = s->len, pos = s->pos, k = 0;

        if (pos >= len || b[pos] != '"')
                return false;
        pos++;
        for (;;) {
                size_t from = pos, esc;
                unsigned char c;
                char out;

                pos += json_plain_span(b + pos, len - pos);
                if (pos > from) {
                        if (key) {
                                if (k + (pos - from) > KEY_MAX)
                                        return false;
                                memcpy(key + k, b + from, pos - from);
                        }
                        k += pos - from;
                        from = pos;
                }
                if (pos >= len)
                        return false;
                c = (unsigned char)b[pos];
                if (c == '"') {
                        pos++;
                        break;
                }
                if (c < 0x20)
                        return false; /* jansson escapes every control character */
                if (c >= 0x80) {
                        s->pos = pos;
                        if (!scan_utf8(s))
                                return false;
                        pos = s->pos;
                        if (key) {
                                if (k + (pos - from) > KEY_MAX)
                                        return false;
                                memcpy(key + k, b + from, pos - from);
                        }
                        k += pos - from;
                        continue;
                }
                /* c is the backslash */
                esc = decode_escape(b, len, pos, &out);
                if (esc == 0)
                        return false;
                pos += esc;
                if (key) {
                        if (k + 1 > KEY_MAX)
                                return false;
                        key[k] = out;
                }
                k++;
        }
        s->pos = pos;
        if (key_len)
                *key_len = k;
        return true;
}

/* A string at s->pos ('"'). When ret_key is not NULL it gets the string's decoded bytes (at
 * most KEY_MAX) and key_len their count: the bytes in place where the string is plain bytes
 * alone, as nearly every key and value umd scans is, else decoded into buf. So a key is
 * neither copied nor decoded byte by byte (copying keys was a twentieth of the supervisor). */
__attribute__((always_inline)) static inline bool scan_string(struct scan *s, char *buf,
                                                              const char **ret_key, size_t *key_len)
{
        const char *b = s->b;
        size_t len = s->len, pos = s->pos, n;

        if (pos >= len || b[pos] != '"')
                return false;
        n = json_plain_span(b + pos + 1, len - pos - 1);
        if (pos + 1 + n < len && b[pos + 1 + n] == '"') {
                if (ret_key) {
                        if (n > KEY_MAX)
                                return false;
                        *ret_key = b + pos + 1;
                        *key_len = n;
                }
                s->pos = pos + n + 2;
                return true;
        }
        if (!scan_string_decoded(s, ret_key ? buf : NULL, key_len))
                return false;
        if (ret_key)
                *ret_key = buf;
        return true;
}

/* The text jansson writes for the real v (jsonp_dtostr with its default precision, 17). */
static bool real_text(double v, char *buf, size_t size)
{
        int n = snprintf(buf, size, "%.17g", v);
        size_t len;
        char *start, *end;

        if (n < 0 || (size_t)n >= size || strchr(buf, ','))
                return false; /* a locale's decimal comma: not worth being sure of */
        len = (size_t)n;
        if (!strchr(buf, '.') && !strchr(buf, 'e')) {
                if (len + 3 >= size)
                        return false;
                memcpy(buf + len, ".0", 3);
                len += 2;
        }
        /* No '+' and no leading zeros in the exponent, as jansson strips them. */
        start = strchr(buf, 'e');
        if (start) {
                start++;
                end = start + 1;
                if (*start == '-')
                        start++;
                while (*end == '0')
                        end++;
                if (end != start)
                        memmove(start, end, len + 1 - (size_t)(end - buf));
        }
        return true;
}

static bool scan_digits(struct scan *s)
{
        size_t from = s->pos;

        while (s->pos < s->len && s->b[s->pos] >= '0' && s->b[s->pos] <= '9')
                s->pos++;
        return s->pos > from;
}

/* Whether tok (a real's token, n bytes) is an integer of at most 15 digits and ".0": every such
 * integer is a double exactly, which "%.17g" prints as its digits (no exponent below 1e17),
 * jansson adding ".0"; "-0.0" is how it writes minus zero. */
static bool integral_real(const char *tok, size_t n)
{
        size_t i = tok[0] == '-', digits;

        if (n < i + 3 || memcmp(tok + n - 2, ".0", 2) != 0)
                return false;
        digits = n - 2 - i;
        if (digits > 15 || (digits > 1 && tok[i] == '0'))
                return false;
        for (size_t k = i; k < n - 2; k++)
                if (tok[k] < '0' || tok[k] > '9')
                        return false;
        return true;
}

static bool scan_number(struct scan *s)
{
        size_t from = s->pos, n;
        bool real = false;
        char tok[NUM_MAX + 1], again[NUM_MAX + 8], *end;

        if (peek(s, '-'))
                s->pos++;
        if (peek(s, '0'))
                s->pos++;
        else if (!scan_digits(s))
                return false;
        if (peek(s, '.')) {
                s->pos++;
                if (!scan_digits(s))
                        return false;
                real = true;
        }
        if (peek(s, 'e') || peek(s, 'E')) {
                s->pos++;
                if (peek(s, '+') || peek(s, '-'))
                        s->pos++;
                if (!scan_digits(s))
                        return false;
                real = true;
        }
        n = s->pos - from;
        if (n > NUM_MAX)
                return false;
        memcpy(tok, s->b + from, n);
        tok[n] = '\0';
        errno = 0;
        if (!real) {
                /* Out of a json_int_t's range is an error to jansson; "-0" reads as 0 and is
                 * written so. The scan let no leading zero through, so digits of the same
                 * count compare as their values do. */
                bool neg = tok[0] == '-';
                size_t nd = n - neg;

                if (nd < 19)
                        return strcmp(tok, "-0") != 0;
                return nd == 19 &&
                       strcmp(tok + neg, neg ? "9223372036854775808" : "9223372036854775807") <= 0;
        }
        if (integral_real(tok, n))
                return true;
        for (unsigned i = 0; i < s->n_seen && i < REALS_SEEN; i++)
                if (strcmp(s->seen[i], tok) == 0)
                        return true;
        if (json_real_surely_jansson(tok, n)) {
                memcpy(s->seen[s->n_seen++ % REALS_SEEN], tok, n + 1);
                return true;
        }
        double v = strtod(tok, &end);
        if (*end != '\0' || (errno == ERANGE && isinf(v)) || !isfinite(v))
                return false;
        if (!real_text(v, again, sizeof(again)) || strcmp(again, tok) != 0)
                return false;
        memcpy(s->seen[s->n_seen++ % REALS_SEEN], tok, n + 1);
        return true;
}

static bool scan_literal(struct scan *s, const char *lit)
{
        size_t n = strlen(lit);

        if (s->len - s->pos < n || memcmp(s->b + s->pos, lit, n) != 0)
                return false;
        s->pos += n;
        return true;
}

/* Past the opening bracket at s->pos: true when close follows at once (an empty object or
 * array, consumed too). */
static bool opens_empty(struct scan *s, char close)
{
        s->pos++;
        if (!peek(s, close))
                return false;
        s->pos++;
        return true;
}

/* After an item of an object or array: 1 when close ends it, 0 after a comma (another item
 * follows), -1 for anything else. Either byte is consumed. */
static int item_end(struct scan *s, char close)
{
        if (!peek(s, close) && !peek(s, ','))
                return -1;
        return s->b[s->pos++] == close;
}

/* Sorted keys mostly differ in their first bytes: a loop, not a call of memcmp. */
static inline int key_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
        size_t n = alen < blen ? alen : blen;

        for (size_t i = 0; i < n; i++)
                if (a[i] != b[i])
                        return (unsigned char)a[i] - (unsigned char)b[i];
        return alen < blen ? -1 : alen > blen;
}

/* pk: pick from this object's members as each is checked (json_canonical_pick), or NULL. */
static bool scan_object(struct scan *s, size_t depth, const char *member, struct json_span *span,
                        struct pick *pk)
{
        char bufs[2][KEY_MAX];
        const char *keys[2] = {NULL, NULL};
        size_t lens[2] = {0, 0}, cur = 0, mlen = member ? strlen(member) : 0;
        bool first = true;

        if (opens_empty(s, '}'))
                return true;
        for (;;) {
                size_t from;

                if (!scan_string(s, bufs[cur], &keys[cur], &lens[cur]))
                        return false;
                /* Sorted as jansson sorts (bytes, then length): strictly, so no duplicate. */
                if (!first && key_cmp(keys[!cur], lens[!cur], keys[cur], lens[cur]) >= 0)
                        return false;
                if (!peek(s, ':'))
                        return false;
                s->pos++;
                from = s->pos;
                bool is_member =
                    member && lens[cur] == mlen && memcmp(keys[cur], member, mlen) == 0;
                if (is_member && s->pick && peek(s, '{')) {
                        if (depth + 1 > s->max_depth ||
                            !scan_object(s, depth + 1, NULL, NULL, s->pick))
                                return false;
                        s->picked = true;
                } else if (!scan_value(s, depth, NULL, NULL))
                        return false;
                if (is_member)
                        *span = (struct json_span){from, s->pos - from};
                /* Out of memory picking: the check goes on, the caller picks again itself. */
                if (pk &&
                    !pick_top(pk, keys[cur], lens[cur], (struct json_span){from, s->pos - from}))
                        s->pick = NULL;
                first = false;
                cur = !cur;
                int e = item_end(s, '}');
                if (e != 0)
                        return e > 0;
        }
}

static bool scan_array(struct scan *s, size_t depth)
{
        if (opens_empty(s, ']'))
                return true;
        for (;;) {
                int e;

                if (!scan_value(s, depth, NULL, NULL))
                        return false;
                e = item_end(s, ']');
                if (e != 0)
                        return e > 0;
        }
}

/* depth: the brackets open around the value (json_parse_strict counts the same way). */
static bool scan_value(struct scan *s, size_t depth, const char *member, struct json_span *span)
{
        if (s->pos >= s->len)
                return false;
        switch (s->b[s->pos]) {
        case '{':
                return depth + 1 <= s->max_depth && scan_object(s, depth + 1, member, span, NULL);
        case '[':
                return depth + 1 <= s->max_depth && scan_array(s, depth + 1);
        case '"':
                return scan_string(s, NULL, NULL, NULL);
        case 't':
                return scan_literal(s, "true");
        case 'f':
                return scan_literal(s, "false");
        case 'n':
                return scan_literal(s, "null");
        default:
                return scan_number(s);
        }
}

bool json_canonical(const char *buf, size_t len, size_t max_depth, const char *member,
                    struct json_span *ret_member)
{
        return json_canonical_pick(buf, len, max_depth, member, NULL, ret_member, NULL);
}

/* ---- raw nodes ---- */

/* The marker and the bytes are put together in a buffer each thread keeps (tbuf.h), which
 * jansson then copies: a result is kilobytes, and a fresh buffer each time made the allocator
 * merge its free lists at every one (malloc_consolidate was a tenth of the supervisor's CPU). A
 * buffer grown past RAW_KEEP_MAX is given back after use. */
#define RAW_KEEP_MAX (256u * 1024u)

json_t *json_raw_new(const char *bytes, size_t len)
{
        char *buf;
        json_t *j;

        if (len >= SIZE_MAX - 1 || !(buf = tbuf_get(TBUF_RAW, len + 1, NULL)))
                return NULL;
        buf[0] = '\0';
        memcpy(buf + 1, bytes, len);
        /* Checked by json_canonical already: valid UTF-8, and the NUL is the marker. */
        j = json_stringn_nocheck(buf, len + 1);
        tbuf_trim(TBUF_RAW, RAW_KEEP_MAX);
        return j;
}

bool json_raw_get(const json_t *j, const char **ret_bytes, size_t *ret_len)
{
        const char *v = json_string_value(j);

        if (!v || json_string_length(j) == 0 || v[0] != '\0')
                return false;
        if (ret_bytes)
                *ret_bytes = v + 1;
        if (ret_len)
                *ret_len = json_string_length(j) - 1;
        return true;
}

/* The value at sp, in bytes json_canonical accepted. The usual scalars are made without
 * jansson's lexer (a buffer and a state each call): a string without a backslash is its bytes,
 * a number is what jansson's strtoll or strtod reads. */
static json_t *parse_span(const char *b, struct json_span sp)
{
        const char *v = b + sp.off;
        char tok[NUM_MAX + 1];

        if (sp.len >= 2 && v[0] == '"' && !memchr(v, '\\', sp.len))
                return json_stringn_nocheck(v + 1, sp.len - 2);
        if (sp.len > 0 && sp.len <= NUM_MAX && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9'))) {
                memcpy(tok, v, sp.len);
                tok[sp.len] = '\0';
                if (strpbrk(tok, ".eE"))
                        return json_real(strtod(tok, NULL));
                return json_integer(strtoll(tok, NULL, 10));
        }
        if (sp.len > 0 && (v[0] == '{' || v[0] == '[')) {
                json_t *j = json_canonical_load(v, sp.len, JANSSON_MAX_DEPTH);

                if (j)
                        return j;
        }
        return json_loadb(v, sp.len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
}

/* ---- building a tree from canonical bytes ---- */

static json_t *build_value(struct scan *s, size_t depth);

/* Keys as scan_string decodes them; one with a NUL (a "\u0000") is refused, as jansson refuses
 * it without JSON_ALLOW_NUL. */
static json_t *build_object(struct scan *s, size_t depth)
{
        char bufs[2][KEY_MAX];
        const char *keys[2] = {NULL, NULL};
        size_t lens[2] = {0, 0}, cur = 0;
        bool first = true;
        json_t *o = json_object();

        if (!o)
                return NULL;
        if (opens_empty(s, '}'))
                return o;
        for (;;) {
                json_t *v;
                int e;

                if (!scan_string(s, bufs[cur], &keys[cur], &lens[cur]) ||
                    memchr(keys[cur], '\0', lens[cur]))
                        break;
                if (!first && key_cmp(keys[!cur], lens[!cur], keys[cur], lens[cur]) >= 0)
                        break;
                if (!peek(s, ':'))
                        break;
                s->pos++;
                v = build_value(s, depth);
                if (!v || json_object_setn_new_nocheck(o, keys[cur], lens[cur], v) < 0)
                        break;
                first = false;
                cur = !cur;
                e = item_end(s, '}');
                if (e > 0)
                        return o;
                if (e < 0)
                        break;
        }
        json_decref(o);
        return NULL;
}

static json_t *build_array(struct scan *s, size_t depth)
{
        json_t *a = json_array();

        if (!a)
                return NULL;
        if (opens_empty(s, ']'))
                return a;
        for (;;) {
                json_t *v = build_value(s, depth);
                int e;

                if (!v || json_array_append_new(a, v) < 0)
                        break;
                e = item_end(s, ']');
                if (e > 0)
                        return a;
                if (e < 0)
                        break;
        }
        json_decref(a);
        return NULL;
}

/* Strings and numbers are checked by scan_value, then made as parse_span makes them. */
static json_t *build_value(struct scan *s, size_t depth)
{
        size_t from = s->pos;

        if (s->pos >= s->len)
                return NULL;
        switch (s->b[s->pos]) {
        case '{':
                return depth + 1 <= s->max_depth ? build_object(s, depth + 1) : NULL;
        case '[':
                return depth + 1 <= s->max_depth ? build_array(s, depth + 1) : NULL;
        case 't':
                return scan_literal(s, "true") ? json_true() : NULL;
        case 'f':
                return scan_literal(s, "false") ? json_false() : NULL;
        case 'n':
                return scan_literal(s, "null") ? json_null() : NULL;
        default:
                if (!scan_value(s, depth, NULL, NULL))
                        return NULL;
                return parse_span(s->b, (struct json_span){from, s->pos - from});
        }
}

json_t *json_canonical_load(const char *buf, size_t len, size_t max_depth)
{
        struct scan s = {.b = buf, .len = len, .max_depth = max_depth};
        json_t *j;

        if (!buf)
                return NULL;
        j = build_value(&s, 0);
        if (j && s.pos != len) {
                json_decref(j);
                return NULL;
        }
        return j;
}

/* Past the value at s->pos in bytes json_canonical accepted already: brackets counted and
 * strings skipped to their closing quote, nothing checked again (checking a real costs a
 * strtod and a print). */
static bool skip_value(struct scan *s)
{
        const char *b = s->b;
        size_t len = s->len, pos = s->pos, depth = 0;

        do {
                char c;

                if (pos >= len)
                        return false;
                c = b[pos];
                if (c == '"') {
                        for (pos++; pos < len && b[pos] != '"';)
                                pos += b[pos] == '\\' ? 2 : 1;
                        if (pos >= len)
                                return false;
                        pos++;
                } else if (c == '{' || c == '[') {
                        depth++;
                        pos++;
                } else if (c == '}' || c == ']') {
                        if (depth == 0)
                                return false;
                        depth--;
                        pos++;
                } else if (c == ',' || c == ':') {
                        if (depth == 0)
                                return false;
                        pos++;
                } else {
                        while (pos < len && b[pos] != ',' && b[pos] != '}' && b[pos] != ']')
                                pos++;
                }
        } while (depth > 0);
        s->pos = pos;
        return true;
}

json_t *json_raw_tree(const json_t *j)
{
        const char *b;
        size_t len;

        if (!json_raw_get(j, &b, &len))
                return json_incref((json_t *)j);
        return parse_span(b, (struct json_span){0, len});
}

/* Calls fn for each member of the (canonical) object at s->pos; false when fn does or the bytes
 * are not an object. */
static bool each_member(struct scan *s,
                        bool (*fn)(void *data, const char *key, size_t klen, struct json_span v),
                        void *data)
{
        char buf[KEY_MAX];
        const char *key;
        size_t klen;

        if (!peek(s, '{'))
                return false;
        if (opens_empty(s, '}'))
                return true;
        for (;;) {
                size_t from;
                int e;

                if (!scan_string(s, buf, &key, &klen) || !peek(s, ':'))
                        return false;
                s->pos++;
                from = s->pos;
                if (!skip_value(s) || !fn(data, key, klen, (struct json_span){from, s->pos - from}))
                        return false;
                e = item_end(s, '}');
                if (e != 0)
                        return e > 0;
        }
}

struct pick {
        const char *b;
        const char *const *paths;
        const char *prefix; /* NULL at the top level; else the array member's "key[]." */
        size_t prefix_len;
        json_t *out;
};

static bool key_is(const char *key, size_t klen, const char *name, size_t nlen)
{
        return klen == nlen && memcmp(key, name, nlen) == 0;
}

static bool pick_sub(void *data, const char *key, size_t klen, struct json_span v)
{
        struct pick *p = data;

        for (const char *const *path = p->paths; *path; path++) {
                const char *sub = *path + p->prefix_len;

                if (strncmp(*path, p->prefix, p->prefix_len) != 0 ||
                    !key_is(key, klen, sub, strlen(sub)))
                        continue;
                json_t *val = parse_span(p->b, v);
                return val && json_object_setn_new_nocheck(p->out, key, klen, val) == 0;
        }
        return true;
}

static bool pick_array(struct pick *top, const char *key, size_t klen, struct json_span v)
{
        struct scan s = {.b = top->b, .len = v.off + v.len, .pos = v.off, .max_depth = SIZE_MAX};
        char prefix[KEY_MAX + 4];
        json_t *arr = json_array();

        if (!arr || json_object_setn_new_nocheck(top->out, key, klen, arr) < 0)
                return false;
        if (!peek(&s, '['))
                return true; /* not an array: an empty one, as a reader would find nothing */
        memcpy(prefix, key, klen);
        memcpy(prefix + klen, "[].", 4);
        if (opens_empty(&s, ']'))
                return true;
        for (;;) {
                struct pick sub = {.b = top->b,
                                   .paths = top->paths,
                                   .prefix = prefix,
                                   .prefix_len = klen + 3,
                                   .out = json_object()};

                if (!sub.out || json_array_append_new(arr, sub.out) < 0)
                        return false;
                if (peek(&s, '{')) {
                        if (!each_member(&s, pick_sub, &sub))
                                return false;
                } else if (!skip_value(&s))
                        return false;
                int e = item_end(&s, ']');
                if (e != 0)
                        return e > 0;
        }
}

static bool pick_top(void *data, const char *key, size_t klen, struct json_span v)
{
        struct pick *p = data;

        for (const char *const *path = p->paths; *path; path++) {
                if (key_is(key, klen, *path, strlen(*path))) {
                        json_t *val = parse_span(p->b, v);
                        return val && json_object_setn_new_nocheck(p->out, key, klen, val) == 0;
                }
                if (strncmp(*path, key, klen) == 0 && strncmp(*path + klen, "[].", 3) == 0)
                        return pick_array(p, key, klen, v);
        }
        return true;
}

bool json_canonical_pick(const char *buf, size_t len, size_t max_depth, const char *member,
                         const char *const *paths, struct json_span *ret_member,
                         json_t **ret_picked)
{
        struct pick p = {.b = buf, .paths = paths};
        struct scan s = {.b = buf, .len = len, .max_depth = max_depth};
        struct json_span span = {0, 0};

        /* Out of memory for the pick: the check alone, and no pick. */
        if (member && paths && ret_picked && (p.out = json_object()))
                s.pick = &p;
        if (!buf || !scan_value(&s, 0, member, &span) || s.pos != len) {
                json_decref(p.out);
                return false;
        }
        if (ret_member)
                *ret_member = span;
        if (ret_picked) {
                /* s.pick is NULL again where picking ran out of memory. */
                *ret_picked = s.pick && s.picked ? p.out : NULL;
                if (!*ret_picked)
                        json_decref(p.out);
        }
        return true;
}

json_t *json_raw_pick(const json_t *j, const char *const *paths)
{
        struct pick p = {.paths = paths};
        struct scan s;
        size_t len;

        if (!json_raw_get(j, &p.b, &len))
                return json_incref((json_t *)j);
        p.out = json_object();
        if (!p.out)
                return NULL;
        s = (struct scan){.b = p.b, .len = len, .max_depth = SIZE_MAX};
        if (!peek(&s, '{'))
                return p.out; /* not an object: nothing to pick */
        if (!each_member(&s, pick_top, &p)) {
                json_decref(p.out);
                return NULL;
        }
        return p.out;
}
