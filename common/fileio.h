/* Durable files: a file written is either the old one or the whole new one, after a crash too. */
#pragma once

#include <stddef.h>
#include <stdio.h>

/* Write data to dir/name through dir/.name.tmp.XXXXXX: write, fsync, rename, fsync dir.
 * 0 or -errno; on failure the temp file is removed and the old file is untouched. */
int write_file_atomic(int dirfd, const char *name, const void *data, size_t len);
/* Open a regular file for reading without blocking on a FIFO: 0 and the descriptor, or
 * -errno, -EISDIR for a directory, -EBADFD for a FIFO, socket or device (*ret_fd untouched). */
int open_regular_at(int dirfd, const char *name, int flags, int *ret_fd);
/* The same as a stdio stream (the files umd parses with inih). */
int fopen_regular(const char *path, FILE **ret);
/* Read a whole regular file (at most max bytes, -EFBIG beyond). *ret is NUL-terminated, caller
 * frees. Anything but a regular file is refused without blocking: -EISDIR for a directory,
 * -EBADFD for a FIFO, socket or device (a socket fails open itself: -ENXIO). */
int read_file_at(int dirfd, const char *name, size_t max, char **ret, size_t *ret_len);
/* The same with extra open(2) flags, e.g. O_NOFOLLOW (-ELOOP on a symbolic link). */
int read_file_at_flags(int dirfd, const char *name, int flags, size_t max, char **ret,
                       size_t *ret_len);
/* mkdir -p with mode; 0 or -errno. */
int mkdir_p(const char *path, unsigned mode);
int fsync_dir(int dirfd);
