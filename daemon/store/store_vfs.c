/* The writer connection's VFS ("umd-wal"): SQLite's own unix VFS, but a WAL file's appends are
 * gathered in memory and written with one pwrite when SQLite next syncs, reads, truncates or
 * asks the size of that file. SQLite writes each WAL frame as two writes (its 24-byte header,
 * then the page): a commit of eight submits was forty pwrite calls, nine a job, and on a
 * virtual machine each costs the writer more CPU than the bytes it copies.
 *
 * Why this keeps every guarantee: a commit becomes visible to readers and to recovery only when
 * SQLite updates the WAL index after syncing the WAL (synchronous=FULL, which every writer
 * connection of store_db_open sets), and the sync writes the gathered frames first. A write that
 * fails (a full disk) fails that sync, so the commit fails as it would have at the write. Any
 * other file (the database, a rollback journal) and every other method go to the unix VFS as
 * they are: locks, shared memory and the inode bookkeeping that SQLite shares between the
 * process's connections are the unix VFS's own. */
#include "store_internal.h"

#include <assert.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* Past this, gathered bytes are written at once (a large transaction, retention's deletes):
 * the buffer is a commit's frames, not a copy of the log. */
#define GATHER_MAX (4u << 20)
#define WRITE_MAX  0x1f000u

struct wal_file {
        sqlite3_file base;  /* pMethods: wal_io_methods */
        sqlite3_file *real; /* the unix VFS's file, allocated right after this struct */
        unsigned char *buf;
        size_t len, cap;
        sqlite3_int64 off; /* where buf[0] goes in the file */
};

static sqlite3_vfs wal_vfs;
static sqlite3_vfs *unix_vfs;
static pthread_once_t wal_vfs_once = PTHREAD_ONCE_INIT;
static int wal_vfs_rc = SQLITE_ERROR;

/* To the file now, in pieces the unix VFS takes whole: it writes at most 0x1ffff bytes a call
 * (more is masked, and reads as a short write: SQLITE_FULL). */
static int write_through(struct wal_file *f, const unsigned char *p, size_t len, sqlite3_int64 off)
{
        int rc = SQLITE_OK;

        for (size_t done = 0, n; rc == SQLITE_OK && done < len; done += n) {
                n = len - done < WRITE_MAX ? len - done : WRITE_MAX;
                rc =
                    f->real->pMethods->xWrite(f->real, p + done, (int)n, off + (sqlite3_int64)done);
        }
        return rc;
}

static int flush(struct wal_file *f)
{
        int rc = write_through(f, f->buf, f->len, f->off);

        /* Dropped either way: SQLite fails the transaction and writes its frames again. */
        f->len = 0;
        return rc;
}

static int wal_close(sqlite3_file *file)
{
        struct wal_file *f = (struct wal_file *)file;
        int rc = flush(f), rc2 = f->real->pMethods->xClose(f->real);

        free(f->buf);
        f->buf = NULL;
        f->cap = 0;
        return rc != SQLITE_OK ? rc : rc2;
}

static int wal_read(sqlite3_file *file, void *p, int n, sqlite3_int64 off)
{
        struct wal_file *f = (struct wal_file *)file;
        int rc = flush(f);

        return rc != SQLITE_OK ? rc : f->real->pMethods->xRead(f->real, p, n, off);
}

static int wal_write(sqlite3_file *file, const void *p, int n, sqlite3_int64 off)
{
        struct wal_file *f = (struct wal_file *)file;
        size_t need = (size_t)n;
        int rc;

        assert(n >= 0);
        /* Not an append, or past what is gathered at most: what is gathered goes first. */
        if (f->len > 0 && (off != f->off + (sqlite3_int64)f->len || f->len + need > GATHER_MAX)) {
                rc = flush(f);
                if (rc != SQLITE_OK)
                        return rc;
        }
        if (f->len == 0)
                f->off = off;
        if (f->len + need > f->cap) {
                size_t cap = f->cap ? f->cap : 65536;
                unsigned char *nb;

                while (cap < f->len + need)
                        cap *= 2;
                nb = realloc(f->buf, cap);
                if (!nb) {
                        rc = flush(f);
                        return rc != SQLITE_OK ? rc : write_through(f, p, need, off);
                }
                f->buf = nb;
                f->cap = cap;
        }
        memcpy(f->buf + f->len, p, need);
        f->len += need;
        return SQLITE_OK;
}

static int wal_truncate(sqlite3_file *file, sqlite3_int64 size)
{
        struct wal_file *f = (struct wal_file *)file;
        int rc = flush(f);

        return rc != SQLITE_OK ? rc : f->real->pMethods->xTruncate(f->real, size);
}

static int wal_sync(sqlite3_file *file, int flags)
{
        struct wal_file *f = (struct wal_file *)file;
        int rc = flush(f);

        return rc != SQLITE_OK ? rc : f->real->pMethods->xSync(f->real, flags);
}

static int wal_file_size(sqlite3_file *file, sqlite3_int64 *ret_size)
{
        struct wal_file *f = (struct wal_file *)file;
        int rc = flush(f);

        return rc != SQLITE_OK ? rc : f->real->pMethods->xFileSize(f->real, ret_size);
}

static int wal_lock(sqlite3_file *file, int level)
{
        struct wal_file *f = (struct wal_file *)file;

        return f->real->pMethods->xLock(f->real, level);
}

static int wal_unlock(sqlite3_file *file, int level)
{
        struct wal_file *f = (struct wal_file *)file;

        return f->real->pMethods->xUnlock(f->real, level);
}

static int wal_check_reserved(sqlite3_file *file, int *ret)
{
        struct wal_file *f = (struct wal_file *)file;

        return f->real->pMethods->xCheckReservedLock(f->real, ret);
}

static int wal_file_control(sqlite3_file *file, int op, void *arg)
{
        struct wal_file *f = (struct wal_file *)file;
        int rc = flush(f);

        return rc != SQLITE_OK ? rc : f->real->pMethods->xFileControl(f->real, op, arg);
}

static int wal_sector_size(sqlite3_file *file)
{
        struct wal_file *f = (struct wal_file *)file;

        return f->real->pMethods->xSectorSize(f->real);
}

static int wal_device_characteristics(sqlite3_file *file)
{
        struct wal_file *f = (struct wal_file *)file;

        return f->real->pMethods->xDeviceCharacteristics(f->real);
}

/* Shared memory and memory mapping belong to the database file, never to its WAL, so they are
 * left out (SQLite never asks a WAL for them). */
static const sqlite3_io_methods wal_io_methods = {
    .iVersion = 1,
    .xClose = wal_close,
    .xRead = wal_read,
    .xWrite = wal_write,
    .xTruncate = wal_truncate,
    .xSync = wal_sync,
    .xFileSize = wal_file_size,
    .xLock = wal_lock,
    .xUnlock = wal_unlock,
    .xCheckReservedLock = wal_check_reserved,
    .xFileControl = wal_file_control,
    .xSectorSize = wal_sector_size,
    .xDeviceCharacteristics = wal_device_characteristics,
};

static int wal_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *file, int flags,
                    int *ret_flags)
{
        struct wal_file *f = (struct wal_file *)file;
        int rc;

        (void)vfs;
        /* Any other file is a unix file, in the space SQLite gave (larger than it needs). */
        if (!(flags & SQLITE_OPEN_WAL))
                return unix_vfs->xOpen(unix_vfs, name, file, flags, ret_flags);
        memset(f, 0, sizeof(*f));
        f->real = (sqlite3_file *)(f + 1);
        rc = unix_vfs->xOpen(unix_vfs, name, f->real, flags, ret_flags);
        if (rc != SQLITE_OK || !f->real->pMethods) {
                /* SQLite closes only a file whose pMethods is set: close the real one here. */
                if (f->real->pMethods)
                        f->real->pMethods->xClose(f->real);
                f->base.pMethods = NULL;
                return rc != SQLITE_OK ? rc : SQLITE_CANTOPEN;
        }
        f->base.pMethods = &wal_io_methods;
        return SQLITE_OK;
}

static void wal_vfs_register(void)
{
        unix_vfs = sqlite3_vfs_find(NULL);
        if (!unix_vfs) {
                wal_vfs_rc = SQLITE_ERROR;
                return;
        }
        /* Everything but opening a file is the default VFS's own, called with its own
         * settings (pAppData, mxPathname) copied here. */
        wal_vfs = *unix_vfs;
        wal_vfs.pNext = NULL;
        wal_vfs.zName = STORE_WAL_VFS;
        wal_vfs.szOsFile = (int)sizeof(struct wal_file) + unix_vfs->szOsFile;
        wal_vfs.xOpen = wal_open;
        wal_vfs_rc = sqlite3_vfs_register(&wal_vfs, 0);
}

int store_vfs_register(void)
{
        pthread_once(&wal_vfs_once, wal_vfs_register);
        if (wal_vfs_rc != SQLITE_OK)
                return log_error_errno(store_db_errno(wal_vfs_rc),
                                       "SQLite: cannot register the %s VFS: %s", STORE_WAL_VFS,
                                       sqlite3_errstr(wal_vfs_rc));
        return 0;
}
