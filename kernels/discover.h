/* Finding one real GPU for `umd-worker --device ID` without touching the others: matching by
 * properties creates no context, so a worker holds a context on its own GPU only. Implemented
 * by discover.c (CUDA) and nocuda.c. */
#pragma once

#include <jansson.h>

/* id: a "GPU-..." uuid or a decimal index. 0 with *ret_ordinal and *ret_info (its --list
 * entry), or -ENODEV / -ENOTSUP / -EIO with *ret_why (malloc'd). */
int discover_device(const char *id, int *ret_ordinal, json_t **ret_info, char **ret_why);
