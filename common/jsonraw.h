/* JSON kept as the bytes it came in: recognising a canonical dump (exactly what
 * json_dump_compact would make of the value it parses to), carrying such bytes inside a jansson
 * tree (a "raw" node), and reading from them only what a caller needs. A worker's result is
 * stored as the worker dumped it instead of being parsed and dumped again (issue 23). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Where a value lies in a buffer. */
struct json_span {
        size_t off, len;
};

/* Whether buf[0, len) is one JSON value written exactly as json_dump_compact (compact, keys
 * sorted, jansson's escapes and number forms) writes the value json_parse_strict(buf, len,
 * max_depth) reads from it, so that parsing and dumping it again would give the same bytes.
 * false also means "perhaps, but not surely": a caller then parses as it would have.
 * When member is not NULL and the value is an object, *ret_member is set to where that member's
 * value lies (len 0 when it has none); untouched when false is returned. */
bool json_canonical(const char *buf, size_t len, size_t max_depth, const char *member,
                    struct json_span *ret_member);
/* json_canonical, and *ret_picked the tree json_raw_pick(paths) would give of the member's
 * object, taken while its bytes are checked: no second walk through them (a worker's result is
 * checked as its frame comes in, and metrics read four paths of it). *ret_picked is NULL when the
 * member is missing or not an object, or memory ran out; untouched when false is returned. */
bool json_canonical_pick(const char *buf, size_t len, size_t max_depth, const char *member,
                         const char *const *paths, struct json_span *ret_member,
                         json_t **ret_picked);

/* The tree json_parse_strict(buf, len, max_depth) would give (or, for a value that is neither
 * an object nor an array, json_loadb with JSON_DECODE_ANY), built from bytes that are canonical
 * (json_canonical) without jansson's parser, which reads through a stream a byte at a time: a
 * stored document is read back at every dispatch of a job that waited (issue 23). NULL when the
 * bytes are not surely canonical, hold a NUL in a string or key, or memory ran out: the caller
 * then parses them as it would have, which gives the same tree or the same refusal. */
json_t *json_canonical_load(const char *buf, size_t len, size_t max_depth);

/* A raw node: a JSON string whose first byte is NUL, followed by the canonical bytes of a value
 * (json_canonical). No parsed string can start with NUL (json_parse_strict and jansson reject
 * one), so the marker is unambiguous. Raw nodes live in umd's own trees only: whatever dumps such
 * a tree for someone to read must splice the bytes in (store_write.c) or parse them
 * (json_raw_tree); jansson would dump the node as a string. The bytes are not checked here: the
 * caller has (json_canonical). NULL on OOM. */
json_t *json_raw_new(const char *bytes, size_t len);
/* Whether j is a raw node; *ret_bytes and *ret_len (either may be NULL) are set if so. */
bool json_raw_get(const json_t *j, const char **ret_bytes, size_t *ret_len);
/* The tree of a raw node's bytes (new reference), or j itself (incref'd) when j is not a raw
 * node. NULL only when out of memory. */
json_t *json_raw_tree(const json_t *j);
/* A tree of the members of a raw node's object that paths name, parsed, and nothing else:
 * "key" picks a member; "key[].sub" picks member sub of each object in the array member key
 * (elements that are not objects become empty objects, so indexes stay). j not a raw node: j
 * itself, incref'd. NULL when out of memory. */
json_t *json_raw_pick(const json_t *j, const char *const *paths);

/* Whether tok (n bytes, a JSON number with a point or an exponent) is surely the text jansson
 * writes for the double it reads as ("%.17g" with jansson's ".0" and exponent rules), decided
 * with no strtod and no print: from its shape and extended-precision arithmetic, for
 * magnitudes between 1e-11 and 1e43. false means only "not sure": the recogniser then reads and
 * prints it, as it does for every real false here. In jsonreal.c. */
bool json_real_surely_jansson(const char *tok, size_t n);
