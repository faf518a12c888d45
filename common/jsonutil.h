/* jansson helpers used by both programs. */
#pragma once

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* jansson >= 2.14 provides json_decrefp() for this. */
#define _cleanup_json_ __attribute__((cleanup(json_decrefp)))

/* Dump compactly with sorted keys (stable bytes), NUL-terminated; NULL on OOM. */
char *json_dump_compact(const json_t *j, size_t *ret_len);
/* The same without sorting the keys (a third of a dump's cost), for bytes that only umd reads
 * back. */
char *json_dump_unsorted(const json_t *j, size_t *ret_len);
/* What the two above write, written by umd's own dumper (jsonutil.c says why), which they try
 * first: NULL where it gives up (a string that is not UTF-8, a tree deeper than 2048) or memory
 * ran out, where they then ask jansson. For the test that holds it to jansson's bytes. */
char *json_dump_own(const json_t *j, bool sort, size_t *ret_len);
/* A member of a top level to dump otherwise: left out (value and sub_key NULL), with value in
 * its place, or (value NULL, sub_key set) kept but with each object of its array dumped as if
 * its member sub_key, where it has one, were sub_value. */
struct json_override {
        const char *key;
        const json_t *value;
        const char *sub_key;
        const json_t *sub_value;
};
/* json_dump_compact of the object obj as if its top level had the members ov says left out or
 * replaced (a replacement of a member obj lacks is not added): the bytes without building that
 * object. NULL when obj is not an object, umd's own dumper gives up (json_dump_own) or memory
 * ran out. */
char *json_dump_compact_with(const json_t *obj, const struct json_override *ov, size_t n_ov,
                             size_t *ret_len);
/* Whether json_dump_compact(j) is surely at most max bytes, found without dumping: a walk that
 * adds each value's longest dump (a string's bytes all escaped, a real's 17 digits). false
 * means only "perhaps not": dump to know. */
bool json_dump_compact_fits(const json_t *j, size_t max);
/* How many bytes at the start of p[0..n) a JSON string holds as themselves, as jansson writes
 * it: printable ASCII other than '"' and '\\' (0x20..0x7F less those two). The dumper and the
 * canonical scanner both run through strings this way.
 *
 * Eight bytes a step ("SWAR"): each term of special is nonzero exactly when some byte of x
 * matches it, and a borrow sets a bit only above a byte that matched, so on a little-endian
 * machine the lowest set bit is the first match in memory. Inline: strings in umd's documents
 * average ten bytes, a job's dumps and scans run through about 400 of them, and a call's own
 * cost was a quarter of a string's. */
/* One entry per byte value. */
#define JSON_PLAIN_BYTES_N (UCHAR_MAX + 1)
extern const bool json_plain_bytes[JSON_PLAIN_BYTES_N];
static inline size_t json_plain_span(const char *p, size_t n)
{
        const uint64_t ones = 0x0101010101010101u, high = 0x8080808080808080u;
        size_t i = 0;

        for (; i + 8 <= n; i += 8) {
                uint64_t x, q, b, special;

                memcpy(&x, p + i, sizeof(x));
                q = x ^ ('"' * ones);
                b = x ^ ('\\' * ones);
                special =
                    (x | ((x - 0x20 * ones) & ~x) | ((q - ones) & ~q) | ((b - ones) & ~b)) & high;
                if (special) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
                        return i + ((size_t)__builtin_ctzll(special) >> 3);
#else
                        break; /* the bytes below find it */
#endif
                }
        }
        while (i < n && json_plain_bytes[(unsigned char)p[i]])
                i++;
        return i;
}
/* Dump indented for files people read. */
char *json_dump_pretty(const json_t *j, size_t *ret_len);
/* Parse with JSON_REJECT_DUPLICATES, at most max_depth nesting; NULL with err filled. */
json_t *json_parse_strict(const char *buf, size_t len, size_t max_depth, json_error_t *err);
/* Where byte pos of buf (JSON text, well formed up to pos) lies, as a client names a field:
 * "params.size", "devices[2]", "" at the top. Written to out (cut to outlen); keys are copied as
 * written, escapes and all. */
void json_path_at(const char *buf, size_t len, size_t pos, char *out, size_t outlen);

/* The first object of array whose member key is the string value, or NULL (array not an
 * array, value NULL, or no such object). The one way results, summaries and verdicts are
 * searched by name. */
json_t *json_array_find(const json_t *array, const char *key, const char *value);

/* The measurement named name in a benchmark result ({"measurements": [{"name": ...}, ...]}),
 * or NULL. Every reader of results finds measurements this one way. */
json_t *result_measurement(const json_t *result, const char *name);
