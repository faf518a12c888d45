/* Bearer tokens: the tokens file (one "NAME ROLE TOKEN" a line), its permission check, and
 * resolving an Authorization header to a token's name and role in constant time. Nothing
 * here touches a socket; server_request.c decides what each route needs. A token's secret never
 * leaves this file: not in logs, not in errors, not in what lookups return. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "http.h"

/* Longest token accepted; every comparison runs over this many bytes whatever was sent. */
#define AUTH_TOKEN_MAX 256
/* Shortest token accepted: shorter secrets can be guessed over the network. */
#define AUTH_TOKEN_MIN 16
#define AUTH_NAME_MAX  64
/* A tokens file larger than this is refused rather than read. */
#define AUTH_FILE_MAX (1024 * 1024)

struct auth_tokens;

/* The role named "read", "submit" or "admin"; ROLE_NONE for anything else. */
enum api_role auth_role_from_string(const char *s);
const char *auth_role_name(enum api_role role);

/* Whether a (alen bytes) equals b (blen bytes), both at most AUTH_TOKEN_MAX bytes (longer is
 * never equal). The time taken depends on neither the contents nor the lengths. */
bool auth_equal_ct(const char *a, size_t alen, const char *b, size_t blen);

/* Parse the text of a tokens file. origin names it in errors. 0 with *ret the table (which
 * may hold no token), or -EINVAL with err set to "ORIGIN:LINE: why" (never quoting a token);
 * -ENOMEM. */
int auth_tokens_parse(const char *text, size_t len, const char *origin, struct auth_tokens **ret,
                      char *err, size_t errlen);

/* Read and parse path. Refuses (-EPERM) a file that group or others may read or write or that
 * someone but root or umd's own user owns, and anything but a regular file (a FIFO too,
 * without blocking). Logs one error line naming the file and returns -errno. */
int auth_tokens_load(const char *path, struct auth_tokens **ret);

size_t auth_tokens_count(const struct auth_tokens *t);

/* Resolve the value of an Authorization header. 0 with *ret_name (owned by t) and *ret_role
 * for a known token; -ENOKEY for no header or not "Bearer"; -EACCES for an unknown token.
 * Every token is compared in full, whichever matches. */
int auth_tokens_check(const struct auth_tokens *t, const char *authorization, const char **ret_name,
                      enum api_role *ret_role);
/* The same for a value of alen bytes, which may hold NUL bytes (a header as sent): the whole
 * value counts, so anything after a NUL makes it an unknown token. */
int auth_tokens_check_n(const struct auth_tokens *t, const char *authorization, size_t alen,
                        const char **ret_name, enum api_role *ret_role);

/* Accepts NULL; returns NULL. Overwrites the secrets before freeing them. */
struct auth_tokens *auth_tokens_free(struct auth_tokens *t);
