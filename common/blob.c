/* blob: immutable, reference-counted bytes with their ETag (see blob.h). */
#include "blob.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* FNV-1a, 64 bits: an ETag only has to change when the bytes do. */
void blob_etag(const char *data, size_t len, char ret[BLOB_ETAG_MAX])
{
        uint64_t h = UINT64_C(14695981039346656037);

        for (size_t i = 0; i < len; i++) {
                h ^= (unsigned char)data[i];
                h *= UINT64_C(1099511628211);
        }
        snprintf(ret, BLOB_ETAG_MAX, "\"%016" PRIx64 "\"", h);
}

int blob_new(const char *data, size_t len, struct blob **ret)
{
        struct blob *b;

        if (len > SIZE_MAX - sizeof(*b) - 1)
                return -ENOMEM;
        b = malloc(sizeof(*b) + len + 1);
        if (!b)
                return -ENOMEM;
        atomic_init(&b->refs, 1);
        b->len = len;
        memcpy(b->data, data, len);
        b->data[len] = '\0';
        blob_etag(b->data, len, b->etag);
        *ret = b;
        return 0;
}

struct blob *blob_ref(struct blob *b)
{
        /* Taking a reference needs no ordering: whoever hands b over already holds one. */
        atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
        return b;
}

struct blob *blob_unref(struct blob *b)
{
        if (b && atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
                free(b);
        return NULL;
}
