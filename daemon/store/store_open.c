/* Opening and closing the store (store.h): STATE_DIR/umd.db in WAL mode, synchronous=FULL (a
 * 2xx means the job survives a power cut, not only a crash of umd). Owns the lock on the state
 * directory (a second umd is refused), the refusal of symbolic links, a corrupt file set aside,
 * and the order of start-up: repair, schema (store_schema.c), import (store_import.c), writer
 * (store_writer.c); store_close undoes it. */
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
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "log.h"

/* A pid in umd.lock, as written ("%ld\n") or read back: 20 digits at most, a sign, the newline
 * and the NUL, with room to spare. */
#define PID_TEXT_MAX 32
/* The suffix of a file set aside: milliseconds since 1970 in decimal (20 digits at most). */
#define STAMP_TEXT_MAX 40

/* The lock that keeps a second umd off the store is on the state directory itself: a file
 * (umd.lock) can be deleted from under its holder, and a second umd would then lock a new file
 * of that name and open the same database; a directory holding umd.db cannot be removed.
 * umd.lock is still taken too (an older umd locks only that, and its pid is in it). */
static int take_dir_lock(struct store *s)
{
        s->dir_fd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (s->dir_fd < 0)
                return log_error_errno(errno, "Cannot open state directory %s: %m", s->dir);
        if (flock(s->dir_fd, LOCK_EX | LOCK_NB) < 0) {
                if (errno == EWOULDBLOCK) {
                        /* Its pid, if umd.lock is still there to say it. */
                        char pid[PID_TEXT_MAX] = "", path[PATH_MAX];
                        _cleanup_close_ int fd = -1;
                        ssize_t got;

                        snprintf(path, sizeof(path), "%s/" LOCK_NAME, s->dir);
                        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
                        got = fd >= 0 ? pread(fd, pid, sizeof(pid) - 1, 0) : -1;
                        pid[got > 0 ? got : 0] = '\0';
                        pid[strcspn(pid, "\n")] = '\0';
                        return log_error_errno(EBUSY,
                                               "Another umd (pid %s) already uses state directory "
                                               "%s (it holds the directory's lock): refusing to "
                                               "start a second one",
                                               pid[0] ? pid : "unknown", s->dir);
                }
                return log_error_errno(errno, "Cannot lock state directory %s: %m", s->dir);
        }
        return 0;
}

static int take_lock(struct store *s)
{
        _cleanup_free_ char *path = NULL;
        char pid[PID_TEXT_MAX];
        int n, r;

        r = take_dir_lock(s);
        if (r < 0)
                return r;
        if (asprintf(&path, "%s/" LOCK_NAME, s->dir) < 0)
                return -ENOMEM;
        s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
        if (s->lock_fd < 0)
                return log_error_errno(errno, "Cannot open %s: %m", path);
        if (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0) {
                int e = errno;
                ssize_t got = pread(s->lock_fd, pid, sizeof(pid) - 1, 0);

                pid[got > 0 ? got : 0] = '\0';
                pid[strcspn(pid, "\n")] = '\0';
                if (e == EWOULDBLOCK)
                        return log_error_errno(EBUSY,
                                               "Another umd (pid %s) already uses state directory "
                                               "%s (it holds %s): refusing to start a second one",
                                               pid[0] ? pid : "unknown", s->dir, path);
                return log_error_errno(e, "Cannot lock %s: %m", path);
        }
        n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
        if (ftruncate(s->lock_fd, 0) < 0 || pwrite(s->lock_fd, pid, (size_t)n, 0) != n)
                log_warning("Cannot write the pid to %s: %m", path);
        return 0;
}

/* umd.db, its WAL and its shared-memory file must be files of their own: through a symbolic
 * link umd would add its tables to (and switch to WAL) whatever the link points at. Refused,
 * with what it points at, rather than set aside: the link is someone's deliberate choice. */
static int check_not_links(const struct store *s)
{
        static const char *const suffixes[] = {"", "-wal", "-shm"};

        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++) {
                char path[PATH_MAX], target[PATH_MAX];
                struct stat st;
                ssize_t n;

                snprintf(path, sizeof(path), "%s%s", s->db_path, suffixes[i]);
                if (lstat(path, &st) < 0) {
                        if (errno == ENOENT)
                                continue;
                        return log_error_errno(errno, "Cannot look at %s: %m", path);
                }
                if (!S_ISLNK(st.st_mode))
                        continue;
                n = readlink(path, target, sizeof(target) - 1);
                target[n > 0 ? n : 0] = '\0';
                return log_error_errno(ELOOP,
                                       "%s is a symbolic link (to %s): refusing to open it; the "
                                       "job store must be a file of umd's own",
                                       path, target[0] ? target : "?");
        }
        return 0;
}

/* Move umd.db and its WAL aside; the next open starts an empty database. */
static int set_aside_db(struct store *s, const char *why)
{
        char ts[STAMP_TEXT_MAX], target[PATH_MAX];
        static const char *const suffixes[] = {"", "-wal", "-shm"};

        snprintf(ts, sizeof(ts), "%llu", (unsigned long long)now_realtime_ms());
        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++) {
                char from[PATH_MAX];

                snprintf(from, sizeof(from), "%s%s", s->db_path, suffixes[i]);
                snprintf(target, sizeof(target), "%s.corrupt-%s%s", s->db_path, ts, suffixes[i]);
                if (rename(from, target) < 0 && errno != ENOENT)
                        return log_error_errno(errno, "Cannot set aside %s: %m", from);
        }
        snprintf(target, sizeof(target), "%s.corrupt-%s", s->db_path, ts);
        log_error("store: %s is unusable (%s): moved to %s; 0 jobs saved from it, starting with "
                  "an empty store",
                  s->db_path, why, target);
        return 0;
}

int store_open(const char *state_dir, struct store **ret)
{
        struct store *s;
        int r;

        if (!state_dir || !ret)
                return -EINVAL;
        s = calloc(1, sizeof(*s));
        if (!s)
                return log_error_errno(ENOMEM, "Cannot allocate the job store");
        s->lock_fd = -1;
        s->dir_fd = -1;
        pthread_mutex_init(&s->mu, NULL);
        pthread_mutex_init(&s->readers_mu, NULL);
        pthread_mutex_init(&s->cache_mu, NULL);
        pthread_mutex_init(&s->check_mu, NULL);
        pthread_mutex_init(&s->log_mu, NULL);
        atomic_init(&s->check_state, STORE_CHECK_PENDING);
        cond_init_monotonic(&s->work); /* the writer's wait for more of the lazy changes */
        pthread_cond_init(&s->done, NULL);
        pthread_cond_init(&s->prep_done, NULL);
        cond_init_monotonic(&s->ckpt); /* the checkpointer's idle wait */
        s->max_jobs = UINT_MAX;
        s->wal_max_bytes = UINT64_MAX; /* unbounded until store_set_wal_max */
        s->page_size = 4096;
        s->ckpt_next_pages = CHECKPOINT_PAGES;
        s->dir = strdup(state_dir);
        if (!s->dir || asprintf(&s->db_path, "%s/" DB_NAME, state_dir) < 0) {
                s->db_path = NULL;
                r = log_error_errno(ENOMEM, "Cannot allocate the job store");
                goto fail;
        }
        r = take_lock(s);
        if (r < 0)
                goto fail;
        r = check_not_links(s);
        if (r < 0)
                goto fail;
        /* Before anything reads through an index: recovery trusts jobs_open_cols. */
        r = access(s->db_path, F_OK) == 0
                ? store_repair_indexes(s->db_path, s->repaired, sizeof(s->repaired))
                : 0;
        if (r == 0)
                r = store_schema_open(s);
        if (r == -EBADMSG) {
                /* Damage is not repaired in place: keep the file for whoever investigates and
                 * start empty, rather than fail every start (a restart loop). */
                store_schema_close(s);
                r = set_aside_db(s, "the database is corrupt or not a database");
                if (r == 0)
                        r = store_schema_open(s);
        }
        if (r < 0)
                goto fail;
        r = store_import_files(s);
        if (r < 0)
                goto fail;
        r = store_writer_start(s);
        if (r < 0)
                goto fail;
        log_info("store: %s open, %zu jobs", s->db_path, store_count(s));
        *ret = s;
        return 0;
fail:
        store_close(s);
        return r;
}

void store_close(struct store *s)
{
        if (!s)
                return;
        if (s->check_started) {
                pthread_mutex_lock(&s->check_mu);
                if (s->check_db)
                        sqlite3_interrupt(s->check_db);
                pthread_mutex_unlock(&s->check_mu);
                pthread_join(s->check_thread, NULL);
        }
        store_writer_stop(s);
        store_read_close(s);
        store_schema_close(s);
        if (s->lock_fd >= 0)
                close(s->lock_fd);
        if (s->dir_fd >= 0)
                close(s->dir_fd);
        pthread_cond_destroy(&s->work);
        pthread_cond_destroy(&s->done);
        pthread_cond_destroy(&s->prep_done);
        pthread_cond_destroy(&s->ckpt);
        pthread_mutex_destroy(&s->mu);
        pthread_mutex_destroy(&s->readers_mu);
        store_cache_free(s);
        pthread_mutex_destroy(&s->cache_mu);
        pthread_mutex_destroy(&s->check_mu);
        pthread_mutex_destroy(&s->log_mu);
        free(s->dir);
        free(s->db_path);
        free(s);
}
