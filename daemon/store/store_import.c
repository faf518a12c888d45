/* The one-time import (store_internal.h): STATE_DIR/jobs, the job files of the store before
 * SQLite, read in id order into umd.db at the first open, then renamed jobs.imported so that it is
 * never imported twice (nothing is deleted). */
#include "store_internal.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "log.h"

struct import {
        struct store *s;
        size_t n, in_tx, dup;
        int r;
};

/* The job subsystem's side of the old files (store_set_files); zeroed: none set. */
static struct store_files files;

void store_set_files(const struct store_files *f)
{
        files = *f;
}

const struct store_files *store_import_files_hooks(void)
{
        return &files;
}

static int import_one(struct store_row *row, void *userdata)
{
        struct import *im = userdata;
        struct store *s = im->s;
        const char *id = row->id;
        int r;

        if (im->in_tx == 0 && (r = store_rows_step(s, s->w[W_BEGIN])) < 0)
                goto out;
        /* A case variant of an id already imported is a duplicate: keep the first. */
        sqlite3_bind_text(s->w[W_EXISTS], 1, id, -1, SQLITE_STATIC);
        bool dup = sqlite3_step(s->w[W_EXISTS]) == SQLITE_ROW;
        sqlite3_reset(s->w[W_EXISTS]);
        if (dup) {
                log_warning("store: job file %s duplicates a job already imported (ids differ "
                            "only in case); skipped",
                            id);
                im->dup++;
                r = 0;
                goto out;
        }
        r = store_rows_write(s, row);
        im->in_tx++;
        im->n++;
        if (r == 0 && im->in_tx >= IMPORT_BATCH) {
                r = store_rows_step(s, s->w[W_COMMIT]);
                im->in_tx = 0;
        }
out:
        if (r < 0)
                log_error("store: cannot import job %s: %s", id ?: "?", strerror(-r));
        return r;
}

/* STATE_DIR/jobs from the store before SQLite: imported in id order, then renamed to
 * jobs.imported so it is never imported twice (and nothing is deleted). */
int store_import_files(struct store *s)
{
        _cleanup_free_ char *from = NULL, *to = NULL;
        struct import im = {.s = s};
        unsigned corrupt = 0;
        struct stat st;
        int r;

        if (asprintf(&from, "%s/jobs", s->dir) < 0)
                return -ENOMEM;
        if (stat(from, &st) < 0 || !S_ISDIR(st.st_mode))
                return 0;
        if (!files.import)
                return log_error_errno(ENOTSUP, "store: %s is there, but nothing to import it with",
                                       from);
        r = files.import(from, import_one, &im, &corrupt);
        if (r == 0 && im.in_tx > 0)
                r = store_rows_step(s, s->w[W_COMMIT]);
        if (r < 0) {
                if (!sqlite3_get_autocommit(s->wdb))
                        (void)store_rows_step(s, s->w[W_ROLLBACK]);
                return log_error_errno(r, "store: cannot import %s: %m", from);
        }
        for (unsigned i = 0; i < 100; i++) {
                free(to);
                to = NULL;
                if ((i == 0 ? asprintf(&to, "%s/jobs.imported", s->dir)
                            : asprintf(&to, "%s/jobs.imported.%u", s->dir, i)) < 0)
                        return -ENOMEM;
                if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
                        break;
                if (errno != EEXIST)
                        return log_error_errno(errno, "Cannot rename %s: %m", from);
        }
        store_rows_read_stats(s);
        log_info("store: imported %zu jobs from %s into %s (%u files set aside, %zu duplicates "
                 "skipped); the files are kept in %s",
                 im.n, from, s->db_path, corrupt, im.dup, to);
        return 0;
}
