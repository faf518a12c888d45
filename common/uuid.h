/* Job ids: UUIDv7 (RFC 9562), time-ordered, printed lower-case with dashes (36 chars). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* A UUID's text, 32 hex digits and 4 dashes, and the NUL. */
#define UUID_STRING_MAX 37
/* The one size of a job id's buffer (its 36 chars and the NUL), wherever one is held: the job
 * files, the supervisor and the worker's protocol, the API's waiters. A job id is a UUID, so
 * nothing longer is ever sent or accepted. */
#define JOB_ID_MAX UUID_STRING_MAX

/* Monotonic within the process even when called twice in the same millisecond. */
int uuid7_generate(char ret[UUID_STRING_MAX]);
int uuid7_generate_at(uint64_t unix_ms, char ret[UUID_STRING_MAX]);
/* True when s is 36 chars of 8-4-4-4-12 lower/upper hex (any version); nothing else passes. */
bool uuid_is_valid(const char *s);
