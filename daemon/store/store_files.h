/* The job store's file format from before SQLite (STATE_DIR/jobs/<id>.json, one file a job):
 * read once to import it into umd.db (store_import.c), and written by `umd --export DIR`
 * (store_export.c); main.c sets the check of a stored job (store_files_set_validator). */
#pragma once

#include <jansson.h>

#include "store.h"

/* Called once per good job file, in ascending id order (UUIDv7 = submission order); the
 * callback takes a reference if it keeps job. Return <0 to abort. */
typedef int (*store_files_fn)(json_t *job, void *userdata);

/* Read every job file in dir: stale temp files are removed, unreadable, invalid or oddly named
 * entries are renamed to <name>.corrupt (logged) or, when even that fails, skipped with a
 * warning; none of them is fatal. 0 or -errno (only for the directory itself or OOM). */
int store_files_load(const char *dir, store_files_fn fn, void *userdata, unsigned *ret_corrupt);

/* Write job (pretty, sorted keys) to dirfd/<id>.json atomically. 0 or -errno, logged. */
int store_files_write(int dirfd, const json_t *job);

/* Checks a job read from a file (spec_validate_stored in umd): 0, or <0 with why filled, and
 * the file is set aside. Without one (unit tests), only the file's shape is checked. */
typedef int (*store_files_validate_fn)(const json_t *job, char *why, size_t whylen);
void store_files_set_validator(store_files_validate_fn fn);

/* Makes the row of a job read from a file (job_doc.c's job_doc_row_from_file in umd): the store
 * parses the old files' JSON but never makes a job's row from it itself. Set by main.c with the
 * validator; without one (a unit test that imports nothing), an import fails with -ENOTSUP. */
typedef int (*store_files_row_fn)(const json_t *job, struct store_row *ret);
void store_files_set_row_maker(store_files_row_fn fn);
int store_files_row(const json_t *job, struct store_row *ret);
