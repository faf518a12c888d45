/* Libraries loaded at run time (see dlib.h). Owns nothing but the dlopen/dlsym pattern: the
 * handles it returns are the caller's, and are never closed (NVML's and CUPTI's threads may
 * outlive a dlclose). */
#include "dlib.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>

int dlib_open(const char *const *names, size_t n, void **ret_handle, char *why, size_t why_len)
{
        const char *err = "no library named";

        for (size_t i = 0; i < n; i++) {
                void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
                if (h) {
                        *ret_handle = h;
                        return 0;
                }
                err = dlerror();
        }
        snprintf(why, why_len, "%s", err ? err : "cannot be loaded");
        return -ENOENT;
}

int dlib_resolve(void *handle, const struct dlib_sym *syms, size_t n, char *why, size_t why_len)
{
        void *found[DLIB_SYMS_MAX];

        if (n > DLIB_SYMS_MAX) {
                snprintf(why, why_len, "%zu entry points, more than %d", n, DLIB_SYMS_MAX);
                return -E2BIG;
        }
        /* Every address is found before any is written: a table is either whole or untouched. */
        for (size_t i = 0; i < n; i++) {
                found[i] = dlsym(handle, syms[i].name);
                if (!found[i] && syms[i].fallback)
                        found[i] = dlsym(handle, syms[i].fallback);
                if (!found[i] && !syms[i].optional) {
                        snprintf(why, why_len, "missing %s", syms[i].name);
                        return -ENOTSUP;
                }
        }
        for (size_t i = 0; i < n; i++)
                *syms[i].fn = found[i];
        return 0;
}
