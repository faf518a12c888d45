/* GPU models and what each should reach: a table shipped with umd (models.c, each figure with the
 * vendor document it came from) and entries from gpu_models_file that override or add to it. The
 * health verdicts (health.c) judge a GPU against its model's entry when there is one; a GPU whose
 * name matches none is judged against its link and its own history, and says so. Loaded once at
 * start, before any thread, then read-only. */
#pragma once

#include <jansson.h>

/* Loads the shipped table, then path's entries over it (path NULL or "": the table alone). A
 * missing file is not an error (the shipped table alone). Returns 0, or
 * -EINVAL (a bad line, printed to stderr with its file and line: umd exits 2) or -ENOMEM. On
 * failure the previous table is kept. */
int models_load(const char *path);

/* What a GPU named device_name (CUDA's name, e.g. "NVIDIA H200") is expected to reach:
 * {"device_name": s, "model": {"name", "match", "pcie_gen", "pcie_width", "nvlinks",
 * "nvlink_gbps", "memory_gbps", "source", "from"} or null when no entry matches}. The first
 * matching entry wins; entries from the file are tried before the shipped ones. A figure an entry
 * does not know is null. NULL on allocation failure. */
json_t *models_expectation(const char *device_name);

/* The table as loaded (file entries first), for tests and the documentation. */
json_t *models_table(void);

void models_free(void);
