/* Helpers shared by the common unit tests: a scratch directory per test, and the generator of
 * their random inputs. */
#pragma once

#include <fcntl.h>
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        (void)st;
        (void)flag;
        (void)ftw;
        return remove(path);
}

/* mkdtemp under $TMPDIR (or /tmp); returns a malloc'd path or NULL. */
static inline char *scratch_dir_new(void)
{
        const char *base = getenv("TMPDIR");
        char *p;

        if (asprintf(&p, "%s/umd-unit-XXXXXX", base && *base ? base : "/tmp") < 0)
                return NULL;
        if (!mkdtemp(p)) {
                free(p);
                return NULL;
        }
        return p;
}

static inline void scratch_dir_free(char *p)
{
        if (!p)
                return;
        nftw(p, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        free(p);
}

/* Number of entries in dirfd other than "." and "..". */
static inline int count_entries(int dirfd)
{
        int n = 0;
        int fd = dup(dirfd);
        DIR *d = fdopendir(fd);
        struct dirent *de;

        if (!d)
                return -1;
        rewinddir(d);
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                        n++;
        closedir(d);
        return n;
}

/* xorshift64: a number below n from *state, the same sequence on every run (a failure
 * reproduces). */
static inline unsigned test_rnd(unsigned long long *state, unsigned n)
{
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        return (unsigned)(*state % n);
}
