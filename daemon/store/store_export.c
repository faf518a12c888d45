/* `umd --export DIR` (store.h's store_export): every job of STATE_DIR/umd.db written to
 * DIR/<id>.json in the internal form (the old store's format), from one read transaction, so a
 * live database is read consistently. Needs no open store. */
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
#include <unistd.h>

#include "fileio.h"
#include "log.h"

/* The row under st written to dfd (store_set_files' export: the job subsystem's). 0,
 * -EBADMSG (not JSON: skipped) or -errno. */
static int export_row(int dfd, sqlite3_stmt *st)
{
        struct store_text t = {.doc = (char *)sqlite3_column_text(st, 0),
                               .doc_len = (size_t)sqlite3_column_bytes(st, 0),
                               .request = (char *)sqlite3_column_text(st, 1),
                               .created_ms = sqlite3_column_int64(st, 2),
                               .finished = sqlite3_column_type(st, 3) != SQLITE_NULL,
                               .finished_ms = sqlite3_column_int64(st, 3)};

        return t.doc ? store_import_files_hooks()->export(dfd, &t) : -EBADMSG;
}

int store_export(const char *state_dir, const char *dir)
{
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int dfd = -1;
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        size_t n = 0;
        int rc, r = 0;

        if (!store_import_files_hooks()->export)
                return log_error_errno(ENOTSUP, "export: nothing to write the job files with");
        if (asprintf(&path, "%s/" DB_NAME, state_dir) < 0)
                return -ENOMEM;
        r = mkdir_p(dir, 0750);
        if (r < 0)
                return log_error_errno(r, "Cannot create %s: %m", dir);
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return log_error_errno(errno, "Cannot open %s: %m", dir);
        r = store_db_open(path, false, &db);
        if (r < 0)
                return r;
        /* One read transaction: a consistent snapshot even while umd writes. */
        rc = sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_prepare_v2(db,
                                        "SELECT doc, request, created_ms, finished_ms FROM jobs "
                                        "ORDER BY id",
                                        -1, &st, NULL);
        while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
                r = export_row(dfd, st);
                if (r == -EBADMSG) {
                        log_warning("export: a job is not valid JSON; skipped");
                        r = 0;
                        rc = SQLITE_OK;
                        continue;
                }
                if (r < 0)
                        break;
                n++;
                rc = SQLITE_OK;
        }
        if (r == 0 && rc != SQLITE_DONE)
                r = log_error_errno(EIO, "export: cannot read %s: %s", path, sqlite3_errmsg(db));
        sqlite3_finalize(st);
        sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
        sqlite3_close(db);
        if (r == 0)
                log_info("export: wrote %zu jobs from %s to %s", n, path, dir);
        return r;
}
