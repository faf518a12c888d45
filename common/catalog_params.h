/* What the catalog's validator (catalog_params.c) shares with the listing and the schemas
 * (catalog_json.c), so that all three say the same bounds and defaults. Not for outside common/. */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "catalog.h"

/* A size parameter's upper bound: its own max, or max_buffer_bytes from the configuration. */
uint64_t catalog_params_size_max(const struct param_def *p, const struct catalog_limits *lim);
/* An enum list's default ("a,b,c") as a JSON array of strings. */
json_t *catalog_params_enum_list(const char *s);
