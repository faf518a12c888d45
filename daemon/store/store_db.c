/* The store's SQLite connections (store_internal.h): the settings every connection gets
 * (store_db_open: WAL, synchronous=FULL, no symbolic links, the writer's VFS), the NOCASE
 * collation of umd's own that each is given, SQLite's result codes as -errno, and persistent
 * prepared statements. Process-wide: SQLite's configuration, set once before its first use. */
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

#include "log.h"

int store_db_errno(int rc)
{
        switch (rc & 0xff) {
        case SQLITE_FULL:
                return -ENOSPC;
        case SQLITE_NOMEM:
                return -ENOMEM;
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
                return -EBUSY;
        case SQLITE_READONLY:
                return -EROFS;
        case SQLITE_CANTOPEN:
                return -ENOENT;
        default:
                return -EIO;
        }
}

bool store_db_is_corrupt(int rc)
{
        return (rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB;
}

/* SQLite counts every allocation and free under one global mutex unless told not to: umd reads
 * none of those counts (sqlite3_memory_used and the heap limits), and that mutex was most of
 * the writer's mutex calls, 6% of its CPU on the H100 host. Only before SQLite is initialised; a
 * refusal (SQLITE_MISUSE, when another part of the process initialised it first) costs only that.
 */
static pthread_once_t sqlite_config_once = PTHREAD_ONCE_INIT;

static void sqlite_config(void)
{
        (void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

/* SQLite's NOCASE (ASCII A-Z folded to a-z, compared up to the shorter length or a NUL in
 * the left string, then the shorter first), with the equal bytes skipped eight at a time. The
 * job ids that every index seek compares are UUIDv7s sharing their first dozen characters (the
 * time), and the built-in folds each of those bytes at each of the two hundred compares a job's
 * seeks make: sqlite3_strnicmp was 5% of umd's instructions under a submit load. Its order is the
 * built-in's exactly (test_nocase_is_sqlites_own_order), so a database written by either, or by
 * the sqlite3 shell, is read right by the other. */
static inline unsigned char nocase_fold(unsigned char c)
{
        return c >= 'A' && c <= 'Z' ? (unsigned char)(c + ('a' - 'A')) : c;
}

/* The first of the eight bytes at a that differs from b's or is a NUL; 8: none. The NUL test
 * flags each NUL of a, and spuriously only a byte above a NUL: the lowest flag is exact. */
static inline int nocase_word_stop(const unsigned char *a, const unsigned char *b)
{
        uint64_t x, y, mark;

        memcpy(&x, a, sizeof(x));
        memcpy(&y, b, sizeof(y));
        mark = ((x - 0x0101010101010101u) & ~x & 0x8080808080808080u) | (x ^ y);
        if (mark == 0)
                return 8;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        return __builtin_ctzll(mark) >> 3;
#else
        return 0; /* the bytewise compare finds it */
#endif
}

int store_db_nocase_compare(void *unused, int n1, const void *k1, int n2, const void *k2)
{
        const unsigned char *a = k1, *b = k2;
        int n = n1 < n2 ? n1 : n2, i = 0, stop = 8;

        (void)unused;
        for (; i + 8 <= n; i += 8)
                if ((stop = nocase_word_stop(a + i, b + i)) < 8)
                        break;
        if (stop < 8)
                i += stop;
        else if (i < n && n >= 8 && nocase_word_stop(a + n - 8, b + n - 8) == 8)
                return n1 - n2; /* the rest, as the last eight bytes: equal, no NUL */
        for (; i < n; i++) {
                int d = nocase_fold(a[i]) - nocase_fold(b[i]);

                if (d != 0 || a[i] == 0)
                        return d != 0 ? d : n1 - n2;
        }
        return n1 - n2;
}

/* Open one connection with the settings every connection needs. */
int store_db_open(const char *path, bool writer, sqlite3 **ret)
{
        sqlite3 *db = NULL;
        int rc;

        pthread_once(&sqlite_config_once, sqlite_config);
        rc = writer ? store_vfs_register() : 0;

        if (rc < 0)
                return rc;
        /* NOFOLLOW: umd.db must be umd's own file, never another application's database
         * adopted through a link (check_not_links says so clearly; this closes the race).
         * The writer's VFS relies on synchronous=FULL, set below (store_vfs.c). */
        rc = sqlite3_open_v2(path, &db,
                             SQLITE_OPEN_READWRITE | (writer ? SQLITE_OPEN_CREATE : 0) |
                                 SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW,
                             writer ? STORE_WAL_VFS : NULL);
        if (rc != SQLITE_OK)
                goto fail;
        sqlite3_extended_result_codes(db, 1);
        sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);
        rc = sqlite3_create_collation_v2(db, "NOCASE", SQLITE_UTF8, NULL, store_db_nocase_compare,
                                         NULL);
        if (rc != SQLITE_OK)
                goto fail;
        rc = sqlite3_exec(db,
                          writer ? "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                                   " PRAGMA foreign_keys=OFF;"
                                 : "PRAGMA query_only=1; PRAGMA synchronous=FULL;",
                          NULL, NULL, NULL);
        if (rc != SQLITE_OK)
                goto fail;
        *ret = db;
        return 0;
fail:
        if (db)
                log_error("SQLite: cannot open %s: %s", path, sqlite3_errmsg(db));
        else
                log_error("SQLite: cannot open %s: %s", path, sqlite3_errstr(rc));
        sqlite3_close(db);
        return store_db_is_corrupt(rc) ? -EBADMSG : store_db_errno(rc);
}

int store_db_prepare(sqlite3 *db, const char *sql, sqlite3_stmt **ret)
{
        int rc = sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, ret, NULL);

        if (rc != SQLITE_OK) {
                log_error("SQLite: cannot prepare \"%.60s\": %s", sql, sqlite3_errmsg(db));
                return store_db_is_corrupt(rc) ? -EBADMSG : store_db_errno(rc);
        }
        return 0;
}
