/* Libraries loaded at run time (NVML, CUPTI): open the first of several names, resolve a table of
 * entry points, and say in one string what went wrong. No state: each caller keeps its handle
 * and table, and decides when to load (nvml.c once for the process, explain.c on demand). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Room for a why: dlerror()'s text names the file and the reason, about 100 bytes. */
#define DLIB_WHY_MAX 256
/* The most entry points one table resolves (NVML's, the largest, has 19). */
#define DLIB_SYMS_MAX 32

struct dlib_sym {
        const char *name;
        const char *fallback; /* tried when name is absent (an older driver's name), or NULL */
        void **fn;            /* where the address goes: (void **)&table.entry */
        bool optional;        /* absent: *fn = NULL; otherwise the whole resolve fails */
};

/* dlopen (RTLD_NOW | RTLD_LOCAL) the first of names[0..n) that loads. 0 and *ret_handle, or
 * -ENOENT with why holding the last name's dlerror() ("libx.so.1: cannot open shared object
 * file: No such file or directory"); *ret_handle is untouched on failure. */
int dlib_open(const char *const *names, size_t n, void **ret_handle, char *why, size_t why_len);

/* Resolve every entry of syms[0..n) in handle. 0 when all the required ones resolved (optional
 * ones that did not are NULL); -ENOTSUP with why saying "missing <name>" for the first required
 * entry absent, and then no *fn is written; -E2BIG when n exceeds DLIB_SYMS_MAX. */
int dlib_resolve(void *handle, const struct dlib_sym *syms, size_t n, char *why, size_t why_len);
