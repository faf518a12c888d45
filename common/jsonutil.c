/* jansson helpers: stable dumps, and the one strict parser every untrusted byte goes through
 * (request bodies, IPC frames, job files). jansson's own depth limit is a compile-time 2048;
 * ours is the caller's, checked before jansson recurses. */
#include "jsonutil.h"

#include <stdarg.h>
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
};

static int dump_append(const char *buf, size_t size, void *userdata)
{
        struct dump_buf *d = userdata;

        if (size > d->cap - d->len || !d->data) {
                char *data =
                    size <= SIZE_MAX - d->len ? tbuf_get(TBUF_DUMP, d->len + size, &d->cap) : NULL;
                if (!data)
                        return -1;
                d->data = data;
        }
        memcpy(d->data + d->len, buf, size);
        d->len += size;
        return 0;
}

/* j dumped with flags, then extra (may be ""), NUL-terminated, in a buffer of its exact size. */
static char *dump_with(const json_t *j, size_t flags, const char *extra, size_t *ret_len)
{
        struct dump_buf d = {0};
        char *s = NULL;

        if (!j)
                return NULL;
        if (json_dump_callback(j, dump_append, &d, flags) == 0 &&
            dump_append(extra, strlen(extra) + 1, &d) == 0 && (s = malloc(d.len)))
                memcpy(s, d.data, d.len);
        if (s && ret_len)
                *ret_len = d.len - 1;
        tbuf_trim(TBUF_DUMP, DUMP_KEEP_MAX);
        return s;
}

char *json_dump_compact(const json_t *j, size_t *ret_len)
{
        return dump_with(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY, "", ret_len);
}

char *json_dump_unsorted(const json_t *j, size_t *ret_len)
{
        return dump_with(j, JSON_COMPACT | JSON_ENCODE_ANY, "", ret_len);
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

                if (in_string) {
                        if (escaped)
                                escaped = false;
                        else if (c == '\\')
                                escaped = true;
                        else if (c == '"')
                                in_string = false;
                        continue;
                }
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
