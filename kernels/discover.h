/* Finding one real GPU for `umd-worker --device ID` without touching the others: matching by
 * properties creates no context, so a worker holds a context on its own GPU only. Implemented
 * by discover.c (CUDA builds only: without CUDA, backend_nocuda.c has no real device). */
#pragma once

#include <jansson.h>
#include <stddef.h>

/* id: a "GPU-..." uuid or a decimal index. 0 with *ret_ordinal and *ret_info (its --list
 * entry), or -ENODEV / -ENOTSUP / -EIO with *ret_why (malloc'd). */
int discover_device(const char *id, int *ret_ordinal, json_t **ret_info, char **ret_why);

/* The 16 bytes of a cudaUUID_t as "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", the spelling of
 * --list and nvidia-smi; buf at least 41 bytes. CUDA builds only (discover.c): the worker's
 * context (bench.cu) names its device with the same function, so the two can never differ. */
void discover_format_uuid(const void *bytes, char *buf, size_t len);
