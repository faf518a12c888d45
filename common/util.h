/* Small helpers shared by both programs: cleanup attributes, time, string limits. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
/* Room for any value of an integer type in decimal: its digits, a sign and the NUL. */
#define DECIMAL_STR_MAX(type)                                                                      \
        (2 + (sizeof(type) <= 1 ? 3 : sizeof(type) <= 2 ? 5 : sizeof(type) <= 4 ? 10 : 20))

/* FNV-1a, 64 bits, of a NUL-terminated string, going on from h (FNV1A_INIT to start): what
 * umd's in-memory hash tables index by. */
#define FNV1A_INIT  UINT64_C(14695981039346656037)
#define FNV1A_PRIME UINT64_C(1099511628211)
static inline uint64_t fnv1a_str(uint64_t h, const char *s)
{
        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * FNV1A_PRIME;
        return h;
}

static inline void freep(void *p)
{
        free(*(void **)p);
}
static inline void closep(int *fd)
{
        if (*fd >= 0)
                close(*fd);
}
#define _cleanup_free_  __attribute__((cleanup(freep)))
#define _cleanup_close_ __attribute__((cleanup(closep)))

uint64_t now_realtime_ms(void);  /* CLOCK_REALTIME, ms since the epoch */
uint64_t now_monotonic_ms(void); /* CLOCK_MONOTONIC */
/* The time ms from now on clock id, as pthread_cond_timedwait and sem_timedwait take it. */
void deadline_after_ms(clockid_t id, unsigned ms, struct timespec *ret);
/* A condition variable whose timed waits take CLOCK_MONOTONIC deadlines (deadline_after_ms):
 * the default clock, CLOCK_REALTIME, makes a monotonic deadline expire at once. */
void cond_init_monotonic(pthread_cond_t *c);
/* src (NULL: "") into dst of size bytes (> 0), cut to fit and NUL-terminated: what
 * snprintf(dst, size, "%s", src) does, without a format's parse on paths every job takes. */
void str_copy_cut(char *dst, size_t size, const char *src);
/* RFC 3339 UTC with milliseconds, "2026-11-29T23:19:51.123Z"; buf at least 32 bytes. */
char *format_rfc3339_ms(uint64_t realtime_ms, char *buf, size_t len);

/* Parse a decimal unsigned integer in [min, max]; whole string must match. 0 or -EINVAL/-ERANGE. */
int parse_uint64(const char *s, uint64_t min, uint64_t max, uint64_t *ret);
bool streq_ptr(const char *a, const char *b);
