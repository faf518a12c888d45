/* The job store's file format from before SQLite (STATE_DIR/jobs/<id>.json, one file a job):
 * read once to import it into umd.db (store_import.c), and written by `umd --export DIR`
 * (store_export.c); main.c sets the job subsystem's side of them (store_files_set_hooks). */
#pragma once

#include <jansson.h>

#include "store.h"

/* Called once per good job file, in ascending id order (UUIDv7 = submission order), with its id
 * (the file's name, which its "id" matches but for case); the callback takes a reference if it
 * keeps job. Return <0 to abort. */
typedef int (*store_files_fn)(const char *id, json_t *job, void *userdata);

/* Read every job file in dir: stale temp files are removed, unreadable, invalid or oddly named
 * entries are renamed to <name>.corrupt (logged) or, when even that fails, skipped with a
 * warning; none of them is fatal. 0 or -errno (only for the directory itself or OOM). */
int store_files_load(const char *dir, store_files_fn fn, void *userdata, unsigned *ret_corrupt);

/* Write job (pretty, sorted keys) to dirfd/<id>.json atomically. 0 or -errno, logged. */
int store_files_write(int dirfd, const json_t *job);

/* The job subsystem's side of the old files, set once by main.c before store_open or
 * store_export, so that the store reads and writes the files' JSON but never judges nor converts
 * a job itself:
 *  - validate: checks a job read from a file (spec_validate_stored): 0, or <0 with why filled,
 *    and the file is set aside; NULL (unit tests): only the file's shape is checked;
 *  - row: the row of a job read from a file, for the import (job_doc_row_from_file); NULL: an
 *    import fails with -ENOTSUP;
 *  - export: writes a stored row to dirfd/<id>.json in the internal form, for `umd --export`
 *    (job_doc_export_file, which calls store_files_write): 0 or -errno, logged; -EBADMSG: the
 *    row is not JSON (skipped); NULL: an export fails. */
struct store_files_hooks {
        int (*validate)(const json_t *job, char *why, size_t whylen);
        int (*row)(const json_t *job, struct store_row *ret);
        int (*export)(int dirfd, const struct store_text *t);
};
void store_files_set_hooks(const struct store_files_hooks *h);
/* The hooks called (store_import.c, store_export.c): as the hook returns, or -ENOTSUP (logged)
 * without one. */
int store_files_row(const json_t *job, struct store_row *ret);
int store_files_export(int dirfd, const struct store_text *t);
