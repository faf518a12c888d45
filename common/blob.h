/* blob: an immutable, reference-counted byte buffer with its ETag.
 *
 * A finished job's stored document never changes, so the store's cache and every response
 * that serves it can share one copy: the reader takes a reference instead of copying bytes
 * under a lock, and the ETag is computed once, when the bytes enter memory, not per request.
 * Nothing may write to data once blob_new has returned. */
#pragma once

#include <stdatomic.h>
#include <stddef.h>

/* "\"" + 16 hex digits + "\"" + NUL */
#define BLOB_ETAG_MAX 19u

struct blob {
        atomic_uint refs;
        size_t len;
        char etag[BLOB_ETAG_MAX]; /* strong validator, with the quotes */
        char data[];              /* len bytes, then a NUL */
};

/* A new blob holding a copy of data (one reference, the caller's). 0 or -ENOMEM. */
int blob_new(const char *data, size_t len, struct blob **ret);
/* Another reference to b; b itself. */
struct blob *blob_ref(struct blob *b);
/* Drop a reference; the last one frees. NULL is a no-op. Always returns NULL. */
struct blob *blob_unref(struct blob *b);

/* The ETag of len bytes at data, as blob_new computes it: FNV-1a, 64 bits, in quotes.
 * ret must hold BLOB_ETAG_MAX bytes. */
void blob_etag(const char *data, size_t len, char ret[BLOB_ETAG_MAX]);
