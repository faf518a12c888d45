/* Durable file writes and bounded reads. A file written here is either the old one or the
 * whole new one after a crash: temp file in the same directory, write, fsync, rename, fsync the
 * directory (the rename is only durable once the directory is). */
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

#define TEMP_ATTEMPTS 16
/* A temporary file's random suffix: 6 letters or digits, 36^6 (about 2^31) names, as mkstemp's
 * XXXXXX. */
#define TEMP_SUFFIX_LEN 6
#define FILE_MODE       0640

int fsync_dir(int dirfd)
{
        if (fsync(dirfd) < 0)
                return -errno;
        return 0;
}

static int write_all(int fd, const void *data, size_t len)
{
        const uint8_t *p = data;

        while (len > 0) {
                ssize_t w = write(fd, p, len);

                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (w == 0)
                        return -EIO;
                p += w;
                len -= (size_t)w;
        }
        return 0;
}

static int open_temp(int dirfd, const char *name, char *tmp, size_t tmp_len)
{
        static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";

        for (int attempt = 0; attempt < TEMP_ATTEMPTS; attempt++) {
                uint8_t rnd[TEMP_SUFFIX_LEN];
                char suffix[TEMP_SUFFIX_LEN + 1];
                int fd, r;

                if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
                        return errno ? -errno : -EIO;
                for (size_t i = 0; i < sizeof(rnd); i++)
                        suffix[i] = alphabet[rnd[i] % (sizeof(alphabet) - 1)];
                suffix[TEMP_SUFFIX_LEN] = '\0';
                r = snprintf(tmp, tmp_len, ".%s.tmp.%s", name, suffix);
                if (r < 0 || (size_t)r >= tmp_len || (size_t)r > NAME_MAX)
                        return -ENAMETOOLONG;
                fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                            FILE_MODE);
                if (fd >= 0)
                        return fd;
                if (errno != EEXIST)
                        return -errno;
        }
        return -EEXIST;
}

int write_file_atomic(int dirfd, const char *name, const void *data, size_t len)
{
        char tmp[NAME_MAX + 1];
        int fd, r;

        if (!name || !*name || strchr(name, '/') || (!data && len > 0))
                return -EINVAL;

        fd = open_temp(dirfd, name, tmp, sizeof(tmp));
        if (fd < 0)
                return fd;

        r = write_all(fd, data, len);
        if (r == 0 && fsync(fd) < 0)
                r = -errno;
        /* close() can report a deferred write error (NFS): it counts. */
        if (close(fd) < 0 && r == 0)
                r = -errno;
        if (r < 0)
                goto fail;
        if (renameat(dirfd, tmp, dirfd, name) < 0) {
                r = -errno;
                goto fail;
        }
        /* The new file is in place; a failed directory fsync means it may not survive a crash,
         * which the caller must know, but there is no temp left to remove. */
        return fsync_dir(dirfd);
fail:
        (void)unlinkat(dirfd, tmp, 0);
        return r;
}

int read_file_at(int dirfd, const char *name, size_t max, char **ret, size_t *ret_len)
{
        return read_file_at_flags(dirfd, name, 0, max, ret, ret_len);
}

int open_regular_at(int dirfd, const char *name, int flags, int *ret_fd)
{
        _cleanup_close_ int fd = -1;
        struct stat st;

        /* O_NONBLOCK: opening a FIFO blocks until a writer comes; with it the open returns at
         * once and the type check below refuses it. Reads of a regular file ignore it. */
        fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | flags);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (S_ISDIR(st.st_mode))
                return -EISDIR;
        if (!S_ISREG(st.st_mode))
                return -EBADFD;
        *ret_fd = fd;
        fd = -1;
        return 0;
}

int fopen_regular(const char *path, FILE **ret)
{
        int fd = -1, r = open_regular_at(AT_FDCWD, path, 0, &fd);
        FILE *f;

        if (r < 0)
                return r;
        f = fdopen(fd, "re");
        if (!f) {
                r = -errno;
                close(fd);
                return r;
        }
        *ret = f;
        return 0;
}

int read_file_at_flags(int dirfd, const char *name, int flags, size_t max, char **ret,
                       size_t *ret_len)
{
        _cleanup_close_ int fd = -1;
        char *buf = NULL;
        size_t len = 0, cap;
        struct stat st;
        int r;

        if (!name || !ret)
                return -EINVAL;
        if (max > SIZE_MAX - 2)
                max = SIZE_MAX - 2; /* room for the one-byte probe and the NUL */
        r = open_regular_at(dirfd, name, flags, &fd);
        if (r < 0)
                return r;
        if (fstat(fd, &st) < 0)
                return -errno;
        if ((uint64_t)st.st_size > max)
                return -EFBIG;

        /* st_size is a hint only (the file may grow while read): the loop enforces max. */
        cap = (size_t)st.st_size + 1;
        if (cap < 64)
                cap = 64;
        if (cap > max + 1)
                cap = max + 1;
        buf = malloc(cap + 1);
        if (!buf)
                return -ENOMEM;

        for (;;) {
                ssize_t n;

                if (len == cap) {
                        size_t ncap;
                        char *nbuf;

                        if (len > max) {
                                r = -EFBIG;
                                goto fail;
                        }
                        ncap = cap > (max + 1) / 2 ? max + 1 : cap * 2;
                        nbuf = realloc(buf, ncap + 1);
                        if (!nbuf) {
                                r = -ENOMEM;
                                goto fail;
                        }
                        buf = nbuf;
                        cap = ncap;
                }
                n = read(fd, buf + len, cap - len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        r = -errno;
                        goto fail;
                }
                if (n == 0)
                        break;
                len += (size_t)n;
        }
        if (len > max) {
                r = -EFBIG;
                goto fail;
        }
        buf[len] = '\0';
        *ret = buf;
        if (ret_len)
                *ret_len = len;
        return 0;
fail:
        free(buf);
        return r;
}

int mkdir_p(const char *path, unsigned mode)
{
        _cleanup_free_ char *p = NULL;
        struct stat st;

        if (!path || !*path)
                return -EINVAL;
        p = strdup(path);
        if (!p)
                return -ENOMEM;

        for (char *s = p + 1;; s++) {
                bool last = *s == '\0';

                if (*s != '/' && !last)
                        continue;
                *s = '\0';
                if (mkdir(p, (mode_t)mode) < 0) {
                        if (errno != EEXIST)
                                return -errno;
                        if (stat(p, &st) < 0)
                                return -errno;
                        if (!S_ISDIR(st.st_mode))
                                return -ENOTDIR;
                }
                if (last)
                        break;
                *s = '/';
                while (s[1] == '/')
                        s++;
                if (s[1] == '\0')
                        break; /* trailing slash */
        }
        return 0;
}
