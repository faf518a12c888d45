/* jansson helpers: stable dumps, and the one strict parser every untrusted byte goes through
 * (request bodies, IPC frames, job files). jansson's own depth limit is a compile-time 2048;
 * ours is the caller's, checked before jansson recurses. */
#include "jsonutil.h"

#include <stdarg.h>
#include <assert.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tbuf.h"

/* Each thread's dumps are written into one buffer it keeps (tbuf.h), and copied out at their
 * exact size: jansson's json_dumps grows its buffer from 16 bytes by doubling and then copies
 * it, nine or ten allocations for a job's document, and the allocator was a third of umd's CPU
 * under a load of submits (bench/store/RESULTS.md). A buffer grown past DUMP_KEEP_MAX is given
 * back after the dump, so that one large result does not stay with its thread. */
#define DUMP_KEEP_MAX (256u * 1024u)

struct dump_buf {
        char *data;
        size_t len, cap;
        bool sort; /* the own dumper's: keys in jansson's JSON_SORT_KEYS order */
        /* json_dump_compact_with: the top level's members to leave out or replace */
        const struct json_override *ov;
        size_t n_ov;
        /* While a member with a sub_key override is dumped: that override */
        const struct json_override *sub;
};

static bool dump_reserve(struct dump_buf *d, size_t n)
{
        if (n <= d->cap - d->len && d->data)
                return true;
        if (n > SIZE_MAX - d->len)
                return false;
        char *data = tbuf_get(TBUF_DUMP, d->len + n, &d->cap);
        if (!data)
                return false;
        d->data = data;
        return true;
}

static bool dump_put(struct dump_buf *d, const char *p, size_t n)
{
        if (!dump_reserve(d, n))
                return false;
        memcpy(d->data + d->len, p, n);
        d->len += n;
        return true;
}

/* One byte of punctuation: four a member, so without the call and the memcpy. */
static inline bool dump_char(struct dump_buf *d, char c)
{
        if (d->len < d->cap && d->data) {
                d->data[d->len++] = c;
                return true;
        }
        return dump_put(d, &c, 1);
}

static int dump_append(const char *buf, size_t size, void *userdata)
{
        return dump_put(userdata, buf, size) ? 0 : -1;
}

/* The dump in d (ok: whole), NUL-terminated, copied out at its exact size; the thread's buffer
 * trimmed either way. */
static char *dump_finish(struct dump_buf *d, bool ok, size_t *ret_len)
{
        char *s = NULL;

        if (ok && dump_put(d, "", 1) && (s = malloc(d->len))) {
                memcpy(s, d->data, d->len);
                if (ret_len)
                        *ret_len = d->len - 1;
        }
        tbuf_trim(TBUF_DUMP, DUMP_KEEP_MAX);
        return s;
}

/* j dumped with flags, then extra (may be ""), NUL-terminated, in a buffer of its exact size. */
static char *dump_with(const json_t *j, size_t flags, const char *extra, size_t *ret_len)
{
        struct dump_buf d = {0};

        if (!j)
                return NULL;
        return dump_finish(&d,
                           json_dump_callback(j, dump_append, &d, flags) == 0 &&
                               dump_put(&d, extra, strlen(extra)),
                           ret_len);
}

/* ---- the compact dump, without jansson's ----
 * jansson's dump spends most of its time around the bytes: a hash table of the containers on the
 * path (its loop check formats each one's address with snprintf), a callback and a capacity
 * check for every piece, and, with sorted keys, a malloc'd array of them, qsort and a lookup of
 * each value again. A job's document is dumped at its submit, at its end and for its run message
 * (issue 23). This writes the same bytes as JSON_COMPACT | JSON_ENCODE_ANY (with JSON_SORT_KEYS
 * when asked) straight into the thread's buffer; test_jsonutil checks it against jansson on
 * random trees. What it is not sure to write alike (a string that is not UTF-8, which jansson
 * refuses, a tree deeper than DUMP_DEPTH_MAX, which could be a loop jansson would refuse too)
 * makes it give up, and jansson dumps as before. */
#define DUMP_DEPTH_MAX 2048
/* An object of up to this many members sorts its keys on the stack (a job's documents have
 * fewer); a larger one mallocs. */
#define DUMP_SORT_STACK 32
/* An integer's text: INT64_MIN is 20 bytes with its sign; digits are written backwards from the
 * end, so no NUL. */
#define DUMP_INTEGER_MAX 24
/* A real's text: "%.17g" writes at most 24 bytes ("-1.2345678901234567e-308"); room for the
 * ".0" jansson adds and the NUL, and a longer one is refused. */
#define DUMP_REAL_MAX 40

/* The length of the valid UTF-8 sequence at s (at most n bytes), or 0: jansson's utf8_check_full
 * (no overlong forms, no surrogates, nothing past U+10FFFF). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
        unsigned c = s[0], cp;
        size_t len;

        if (c >= 0xC2 && c <= 0xDF)
                len = 2, cp = c & 0x1F;
        else if (c >= 0xE0 && c <= 0xEF)
                len = 3, cp = c & 0x0F;
        else if (c >= 0xF0 && c <= 0xF4)
                len = 4, cp = c & 0x07;
        else
                return 0;
        if (len > n)
                return 0;
        for (size_t i = 1; i < len; i++) {
                if ((s[i] & 0xC0) != 0x80)
                        return 0;
                cp = (cp << 6) | (s[i] & 0x3F);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
                return 0;
        return len;
}

/* json_plain_span's bytes after its last whole word (jsonutil.h). */
const bool json_plain_bytes[JSON_PLAIN_BYTES_N] = {
#define PLAIN_ROW    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1
#define PLAIN_ROW_20 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 /* 0x22 the quote */
#define PLAIN_ROW_50 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1 /* 0x5C the backslash */
    [0x20] = PLAIN_ROW_20, [0x30] = PLAIN_ROW, [0x40] = PLAIN_ROW,
    [0x50] = PLAIN_ROW_50, [0x60] = PLAIN_ROW, [0x70] = PLAIN_ROW};
#undef PLAIN_ROW
#undef PLAIN_ROW_20
#undef PLAIN_ROW_50

/* A string as jansson's dump_string writes it without JSON_ENSURE_ASCII or JSON_ESCAPE_SLASH:
 * '"' and '\\' escaped, control characters as \b \f \n \r \t or \u00XX, everything else as is. */
static bool dump_string(struct dump_buf *d, const char *str, size_t n)
{
        static const char hex[] = "0123456789ABCDEF";
        const unsigned char *s = (const unsigned char *)str;
        size_t i = 0, run = 0;

        /* Each byte is at most six: reserved once, so the loop only stores. */
        if (n > (SIZE_MAX - 2) / 6 || !dump_reserve(d, 6 * n + 2))
                return false;
        char *o = d->data + d->len;
        *o++ = '"';
        while (i < n) {
                unsigned c;

                i += json_plain_span(str + i, n - i);
                if (i == n)
                        break;
                c = s[i];
                if (c >= 0x80) {
                        size_t l = utf8_seq(s + i, n - i);
                        if (!l)
                                return false;
                        i += l;
                        continue;
                }
                memcpy(o, s + run, i - run);
                o += i - run;
                *o++ = '\\';
                switch (c) {
                case '"':
                case '\\':
                        *o++ = (char)c;
                        break;
                case '\b':
                        *o++ = 'b';
                        break;
                case '\f':
                        *o++ = 'f';
                        break;
                case '\n':
                        *o++ = 'n';
                        break;
                case '\r':
                        *o++ = 'r';
                        break;
                case '\t':
                        *o++ = 't';
                        break;
                default:
                        memcpy(o, "u00", 3);
                        o[3] = hex[c >> 4];
                        o[4] = hex[c & 0xF];
                        o += 5;
                        break;
                }
                run = ++i;
        }
        memcpy(o, s + run, n - run);
        o += n - run;
        *o++ = '"';
        d->len = (size_t)(o - d->data);
        return true;
}

static bool dump_integer(struct dump_buf *d, json_int_t v)
{
        char buf[DUMP_INTEGER_MAX], *p = buf + sizeof(buf);
        /* Negated as unsigned: INT64_MIN has no positive. */
        unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;

        do
                *--p = (char)('0' + u % 10);
        while ((u /= 10) != 0);
        if (v < 0)
                *--p = '-';
        return dump_put(d, p, (size_t)(buf + sizeof(buf) - p));
}

/* jansson's jsonp_dtostr with precision 17: "%.17g", ".0" when that reads as an integer, and
 * the exponent without '+' or leading zeros. umd never sets a locale, so the point is '.'. */
static bool dump_real(struct dump_buf *d, double v)
{
        char buf[DUMP_REAL_MAX];
        int n = snprintf(buf, sizeof(buf), "%.17g", v);
        size_t len;
        char *e;

        if (n < 0 || (size_t)n >= sizeof(buf) - 3)
                return false;
        len = (size_t)n;
        if (!strchr(buf, '.') && !strchr(buf, 'e')) {
                memcpy(buf + len, ".0", 3);
                len += 2;
        }
        if ((e = strchr(buf, 'e'))) {
                char *start = e + 1, *end = start + 1;

                if (*start == '-')
                        start++;
                while (*end == '0')
                        end++;
                if (end != start) {
                        memmove(start, end, len - (size_t)(end - buf));
                        len -= (size_t)(end - start);
                }
        }
        return dump_put(d, buf, len);
}

struct member {
        const char *key;
        size_t len;
        json_t *value;
        const struct json_override *sub; /* a top level member's sub_key override, or NULL */
};

/* jansson's order for JSON_SORT_KEYS: bytes, then length. */
static int member_cmp(const void *a, const void *b)
{
        const struct member *x = a, *y = b;
        int r = memcmp(x->key, y->key, x->len < y->len ? x->len : y->len);

        return r ? r : (x->len > y->len) - (x->len < y->len);
}

static bool dump_value(struct dump_buf *d, const json_t *j, size_t depth);

/* The override of the top level's member key, or NULL. */
static const struct json_override *override_of(const struct dump_buf *d, const char *key,
                                               size_t len)
{
        for (size_t k = 0; k < d->n_ov; k++)
                if (strlen(d->ov[k].key) == len && memcmp(d->ov[k].key, key, len) == 0)
                        return &d->ov[k];
        return NULL;
}

static bool dump_object(struct dump_buf *d, const json_t *j, size_t depth)
{
        struct member stack[DUMP_SORT_STACK], *m = stack;
        size_t n = json_object_size(j), i = 0;
        bool ok = false;

        if (n > DUMP_SORT_STACK && !(m = malloc(n * sizeof(*m))))
                return false;
        for (void *it = json_object_iter((json_t *)j); it && i < n;
             it = json_object_iter_next((json_t *)j, it)) {
                m[i].key = json_object_iter_key(it);
                m[i].len = json_object_iter_key_len(it);
                m[i].value = json_object_iter_value(it);
                if (depth == 0 && d->n_ov) {
                        const struct json_override *o = override_of(d, m[i].key, m[i].len);

                        m[i].sub = o && o->sub_key ? o : NULL;
                        if (o && !o->value && !o->sub_key)
                                continue;
                        if (o && o->value)
                                m[i].value = (json_t *)o->value; /* only read */
                } else if (depth == 2 && d->sub && strlen(d->sub->sub_key) == m[i].len &&
                           memcmp(d->sub->sub_key, m[i].key, m[i].len) == 0) {
                        m[i].value = (json_t *)d->sub->sub_value; /* only read */
                        m[i].sub = NULL;
                } else
                        m[i].sub = NULL;
                i++;
        }
        n = i;
        if (d->sort) {
                if (n > 16) {
                        /* Often in order already: a tree read from sorted bytes, or built so. */
                        size_t k = 1;

                        while (k < n && member_cmp(&m[k - 1], &m[k]) < 0)
                                k++;
                        if (k < n)
                                qsort(m, n, sizeof(*m), member_cmp);
                } else {
                        for (size_t k = 1; k < n; k++) {
                                struct member t = m[k];
                                size_t p = k;

                                for (; p > 0 && member_cmp(&m[p - 1], &t) > 0; p--)
                                        m[p] = m[p - 1];
                                m[p] = t;
                        }
                }
        }
        if (!dump_char(d, '{'))
                goto out;
        for (i = 0; i < n; i++) {
                if ((i > 0 && !dump_char(d, ',')) || !dump_string(d, m[i].key, m[i].len) ||
                    !dump_char(d, ':'))
                        goto out;
                if (depth == 0)
                        d->sub = m[i].sub; /* for the objects of this member's array */
                bool ok_value = dump_value(d, m[i].value, depth + 1);
                if (depth == 0)
                        d->sub = NULL;
                if (!ok_value)
                        goto out;
        }
        ok = dump_char(d, '}');
out:
        if (m != stack)
                free(m);
        return ok;
}

static bool dump_value(struct dump_buf *d, const json_t *j, size_t depth)
{
        if (!j || depth > DUMP_DEPTH_MAX)
                return false;
        switch (json_typeof(j)) {
        case JSON_OBJECT:
                return dump_object(d, j, depth);
        case JSON_ARRAY: {
                size_t n = json_array_size(j);

                if (!dump_char(d, '['))
                        return false;
                for (size_t i = 0; i < n; i++)
                        if ((i > 0 && !dump_char(d, ',')) ||
                            !dump_value(d, json_array_get(j, i), depth + 1))
                                return false;
                return dump_char(d, ']');
        }
        case JSON_STRING:
                return dump_string(d, json_string_value(j), json_string_length(j));
        case JSON_INTEGER:
                return dump_integer(d, json_integer_value(j));
        case JSON_REAL:
                return dump_real(d, json_real_value(j));
        case JSON_TRUE:
                return dump_put(d, "true", 4);
        case JSON_FALSE:
                return dump_put(d, "false", 5);
        case JSON_NULL:
                return dump_put(d, "null", 4);
        }
        return false;
}

char *json_dump_own(const json_t *j, bool sort, size_t *ret_len)
{
        struct dump_buf d = {.sort = sort};

        if (!j)
                return NULL;
        return dump_finish(&d, dump_value(&d, j, 0), ret_len);
}

char *json_dump_compact_with(const json_t *obj, const struct json_override *ov, size_t n_ov,
                             size_t *ret_len)
{
        struct dump_buf d = {.sort = true, .ov = ov, .n_ov = n_ov};

        if (!json_is_object(obj))
                return NULL;
        /* No fallback to jansson, which knows no overrides: umd's dumper gives up only on a
         * string that is not UTF-8 or a tree deeper than it goes, neither of which a caller's
         * document holds. */
        return dump_finish(&d, dump_value(&d, obj, 0), ret_len);
}

static char *dump_compact(const json_t *j, bool sort, size_t *ret_len)
{
        char *s = json_dump_own(j, sort, ret_len);

        if (s || !j)
                return s;
        return dump_with(j, JSON_COMPACT | JSON_ENCODE_ANY | (sort ? JSON_SORT_KEYS : 0), "",
                         ret_len);
}

char *json_dump_compact(const json_t *j, size_t *ret_len)
{
        return dump_compact(j, true, ret_len);
}

char *json_dump_unsorted(const json_t *j, size_t *ret_len)
{
        return dump_compact(j, false, ret_len);
}

/* Adds to *n the longest compact dump of j; false as soon as *n passes max. */
static bool dump_bound(const json_t *j, size_t max, size_t *n)
{
        const char *k;
        json_t *v;
        size_t i;

        switch (json_typeof(j)) {
        case JSON_OBJECT:
                *n += 2 + 2 * json_object_size(j); /* braces, a colon and a comma each */
                json_object_foreach((json_t *)j, k, v)
                {
                        *n += 2 + 6 * strlen(k); /* quoted, every byte as \u00XX */
                        if (*n > max || !dump_bound(v, max, n))
                                return false;
                }
                break;
        case JSON_ARRAY:
                *n += 2 + json_array_size(j);
                json_array_foreach(j, i, v) if (*n > max || !dump_bound(v, max, n)) return false;
                break;
        case JSON_STRING:
                *n += 2 + 6 * json_string_length(j);
                break;
        case JSON_INTEGER:
                *n += 20; /* -9223372036854775808 */
                break;
        case JSON_REAL:
                *n += 26; /* "%.17g" with a sign, "e-308", and the ".0" jansson may add */
                break;
        default:
                *n += 5; /* false */
                break;
        }
        return *n <= max;
}

bool json_dump_compact_fits(const json_t *j, size_t max)
{
        size_t n = 0;

        return j && dump_bound(j, max, &n);
}

char *json_dump_pretty(const json_t *j, size_t *ret_len)
{
        /* Files people read end with a newline. */
        return dump_with(j, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_ENCODE_ANY, "\n", ret_len);
}

static void set_error(json_error_t *err, const char *buf, enum json_error_code code, size_t pos,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void set_error(json_error_t *err, const char *buf, enum json_error_code code, size_t pos,
                      const char *fmt, ...)
{
        va_list ap;

        if (!err)
                return;
        memset(err, 0, sizeof(*err));
        /* Same 1-based line and column as jansson's own errors, for messages to clients. */
        err->line = 1;
        err->column = 1;
        for (size_t i = 0; buf && i < pos; i++) {
                if (buf[i] == '\n') {
                        err->line++;
                        err->column = 1;
                } else {
                        err->column++;
                }
        }
        err->position = (int)pos;
        snprintf(err->source, sizeof(err->source), "<buffer>");
        va_start(ap, fmt);
        vsnprintf(err->text, sizeof(err->text) - 1, fmt, ap);
        va_end(ap);
        /* jansson keeps the error code in the last byte of text (json_error_code()). */
        err->text[JSON_ERROR_TEXT_LENGTH - 1] = (char)code;
}

/* One byte of JSON text against its string state: true when c is part of a string (its closing
 * quote included, which clears *in_string). */
static bool string_byte(char c, bool *in_string, bool *escaped)
{
        if (!*in_string)
                return false;
        if (*escaped)
                *escaped = false;
        else if (c == '\\')
                *escaped = true;
        else if (c == '"')
                *in_string = false;
        return true;
}

json_t *json_parse_strict(const char *buf, size_t len, size_t max_depth, json_error_t *err)
{
        size_t depth = 0;
        bool in_string = false, escaped = false;

        if (!buf) {
                set_error(err, NULL, json_error_invalid_argument, 0, "no input");
                return NULL;
        }
        if (memchr(buf, '\0', len)) {
                set_error(err, buf, json_error_null_character,
                          (size_t)((const char *)memchr(buf, '\0', len) - buf),
                          "NUL byte in input");
                return NULL;
        }

        /* Brackets inside strings do not nest; everything else is jansson's to judge. */
        for (size_t i = 0; i < len; i++) {
                char c = buf[i];

                if (string_byte(c, &in_string, &escaped))
                        continue;
                switch (c) {
                case '"':
                        in_string = true;
                        break;
                case '[':
                case '{':
                        if (++depth > max_depth) {
                                set_error(err, buf, json_error_stack_overflow, i,
                                          "nesting deeper than %zu", max_depth);
                                return NULL;
                        }
                        break;
                case ']':
                case '}':
                        if (depth > 0)
                                depth--;
                        break;
                default:
                        break;
                }
        }

        return json_loadb(buf, len, JSON_REJECT_DUPLICATES, err);
}

/* Containers json_path_at follows; deeper ones are counted, not named. */
#define JSON_PATH_DEPTH_MAX 64

struct json_path_frame {
        bool array;
        size_t index;    /* array: the element's */
        const char *key; /* object: the member's key, NULL before its colon */
        size_t key_len;
};

static void json_path_write(const struct json_path_frame *f, size_t n, char *out, size_t outlen)
{
        size_t w = 0;

        out[0] = '\0';
        for (size_t i = 0; i < n && w < outlen; i++) {
                int k;
                if (f[i].array)
                        k = snprintf(out + w, outlen - w, "[%zu]", f[i].index);
                else if (f[i].key)
                        k = snprintf(out + w, outlen - w, "%s%.*s", w ? "." : "", (int)f[i].key_len,
                                     f[i].key);
                else
                        break;
                if (k < 0)
                        break;
                w += (size_t)k;
        }
}

void json_path_at(const char *buf, size_t len, size_t pos, char *out, size_t outlen)
{
        struct json_path_frame f[JSON_PATH_DEPTH_MAX];
        const char *str = NULL;
        size_t n = 0, deep = 0, str_len = 0;
        bool in_string = false, escaped = false;

        assert(out && outlen > 0);
        for (size_t i = 0; buf && i < len && i < pos; i++) {
                char c = buf[i];

                if (string_byte(c, &in_string, &escaped)) {
                        if (!in_string) /* its closing quote */
                                str_len = (size_t)(buf + i - str);
                        continue;
                }
                if (c == '"') {
                        in_string = true;
                        str = buf + i + 1;
                } else if ((c == '[' || c == '{') && deep == 0 && n < JSON_PATH_DEPTH_MAX) {
                        f[n++] = (struct json_path_frame){.array = c == '['};
                } else if (c == '[' || c == '{') {
                        deep++;
                } else if ((c == ']' || c == '}') && deep > 0) {
                        deep--;
                } else if ((c == ']' || c == '}') && n > 0) {
                        n--;
                } else if (c == ':' && deep == 0 && n > 0 && !f[n - 1].array) {
                        f[n - 1].key = str;
                        f[n - 1].key_len = str_len;
                } else if (c == ',' && deep == 0 && n > 0) {
                        f[n - 1].index++;
                        f[n - 1].key = NULL;
                }
        }
        json_path_write(f, n, out, outlen);
}

json_t *json_array_find(const json_t *array, const char *key, const char *value)
{
        size_t i;
        json_t *o;

        if (!value)
                return NULL;
        json_array_foreach(array, i, o)
        {
                const char *s = json_string_value(json_object_get(o, key));
                if (s && strcmp(s, value) == 0)
                        return o;
        }
        return NULL;
}

json_t *result_measurement(const json_t *result, const char *name)
{
        return json_array_find(json_object_get(result, "measurements"), "name", name);
}
