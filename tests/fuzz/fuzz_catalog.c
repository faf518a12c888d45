/* libFuzzer harness for the job-spec validator, the gate every POST /v1/jobs passes: a fuzzed
 * benchmark name is looked up, fuzzed JSON params are validated against it. Never a crash or a
 * leak; errors name a field and a rule; accepted params come back normalized (every parameter
 * present) and the normalized form must itself be accepted unchanged, since the worker and
 * recovery re-read exactly that.
 *
 * Input: byte 0 = flags (bit 0 allow_fake, bit 1 a small max_buffer_bytes), then the name up to
 * the first '\n', then the params document (or nothing: no params). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "jsonutil.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_error(const struct catalog_error *err)
{
        if (!memchr(err->field, '\0', sizeof(err->field)) ||
            !memchr(err->detail, '\0', sizeof(err->detail)))
                abort();
        if (err->field[0] == '\0' || err->detail[0] == '\0')
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct catalog_limits lim;
        struct catalog_error err;
        const struct bench_def *b;
        const uint8_t *nl;
        json_t *params = NULL, *norm = NULL, *again = NULL;
        json_error_t jerr;
        bool allow_fake;
        char name[128];
        size_t name_len;
        int r;

        if (size < 1)
                return 0;
        allow_fake = data[0] & 1;
        lim.max_buffer_bytes = data[0] & 2 ? 64ull << 20 : 4ull << 30;
        data++;
        size--;

        nl = memchr(data, '\n', size);
        name_len = nl ? (size_t)(nl - data) : size;
        if (name_len >= sizeof(name))
                return 0;
        memcpy(name, data, name_len);
        name[name_len] = '\0';
        b = catalog_find(name);
        if (nl) {
                size_t off = name_len + 1;

                params = json_parse_strict((const char *)data + off, size - off, 32, &jerr);
                if (!params)
                        return 0;
        }

        memset(&err, 0, sizeof(err));
        r = catalog_validate(b, params, &lim, allow_fake, &norm, &err);
        if (r == -EINVAL) {
                check_error(&err);
                if (norm)
                        abort();
                goto out;
        }
        if (r < 0)
                abort(); /* -ENOMEM is not expected from a fuzzer's small inputs */
        if (!b || !json_is_object(norm))
                abort();
        for (size_t i = 0; i < b->n_params; i++)
                if (!json_object_get(norm, b->params[i].name) &&
                    (allow_fake || !b->params[i].fake_only))
                        abort();

        if (allow_fake) {
                memset(&err, 0, sizeof(err));
                r = catalog_validate(b, norm, &lim, allow_fake, &again, &err);
                if (r != 0 || !json_equal(norm, again))
                        abort();
                json_decref(again);
        }
        json_decref(norm);
out:
        json_decref(params);
        return 0;
}
