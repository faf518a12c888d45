/* Durable files: a file written is either the old one or the whole new one, after a crash too. */
#pragma once

#include <stddef.h>

/* Write data to dir/name through dir/.name.tmp.XXXXXX: write, fsync, rename, fsync dir.
 * 0 or -errno; on failure the temp file is removed and the old file is untouched. */
int write_file_atomic(int dirfd, const char *name, const void *data, size_t len);
/* Read a whole file (at most max bytes, -EFBIG beyond). *ret is NUL-terminated, caller frees. */
int read_file_at(int dirfd, const char *name, size_t max, char **ret, size_t *ret_len);
/* mkdir -p with mode; 0 or -errno. */
int mkdir_p(const char *path, unsigned mode);
int fsync_dir(int dirfd);
