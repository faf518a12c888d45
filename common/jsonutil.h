/* jansson helpers used by both programs. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

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
/* Dump indented for files people read. */
char *json_dump_pretty(const json_t *j, size_t *ret_len);
/* Parse with JSON_REJECT_DUPLICATES, at most max_depth nesting; NULL with err filled. */
json_t *json_parse_strict(const char *buf, size_t len, size_t max_depth, json_error_t *err);

/* The first object of array whose member key is the string value, or NULL (array not an
 * array, value NULL, or no such object). The one way results, summaries and verdicts are
 * searched by name. */
json_t *json_array_find(const json_t *array, const char *key, const char *value);

/* The measurement named name in a benchmark result ({"measurements": [{"name": ...}, ...]}),
 * or NULL. Every reader of results finds measurements this one way. */
json_t *result_measurement(const json_t *result, const char *name);
