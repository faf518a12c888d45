/* libFuzzer harness for size_parse(): any byte string, never a crash, and every accepted size
 * must survive size_format() and read back as the same number (what the catalog shows as a
 * default must be accepted as input). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "size.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char buf[64];
        uint64_t v = 0, back = 0;
        char *s;
        int r;

        s = malloc(size + 1);
        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = '\0';

        r = size_parse(s, &v);
        if (r != 0 && r != -EINVAL && r != -ERANGE)
                abort();
        if (r == 0) {
                /* Sizes end up as jansson integers: never above INT64_MAX. */
                if (v > (uint64_t)INT64_MAX)
                        abort();
                if (!size_format(v, buf, sizeof(buf)))
                        abort();
                if (size_parse(buf, &back) != 0 || back != v)
                        abort();
        }
        /* A NULL output pointer is allowed and must give the same verdict. */
        if (size_parse(s, NULL) != r)
                abort();
        free(s);
        return 0;
}
