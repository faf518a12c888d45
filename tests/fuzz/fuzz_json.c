/* libFuzzer harness for json_parse_strict(), the parser every untrusted byte goes through
 * (request bodies, IPC frames, job files): any bytes, a depth limit chosen by the input, never
 * a crash or a leak; what it accepts has no nesting beyond the limit and dumps to text that
 * parses back equal. json_canonical (jsonraw.c), which lets umd keep a worker's bytes unparsed,
 * accepts every such dump, and whatever it accepts is what jansson reads and dumps again, byte
 * for byte. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jsonraw.h"
#include "jsonutil.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t depth_of(const json_t *j)
{
        size_t d = 0, c;
        const char *k;
        json_t *v;
        size_t i;

        if (json_is_object(j)) {
                json_object_foreach((json_t *)j, k, v)
                {
                        c = depth_of(v);
                        d = c > d ? c : d;
                }
                return d + 1;
        }
        if (json_is_array(j)) {
                json_array_foreach(j, i, v)
                {
                        c = depth_of(v);
                        d = c > d ? c : d;
                }
                return d + 1;
        }
        return 0;
}

/* The longest key in j: json_canonical leaves keys over 256 bytes to the parser. */
static size_t longest_key(const json_t *j)
{
        size_t m = 0, c;
        const char *k;
        json_t *v;
        size_t i;

        if (json_is_object(j))
                json_object_foreach((json_t *)j, k, v)
                {
                        c = strlen(k) > longest_key(v) ? strlen(k) : longest_key(v);
                        m = c > m ? c : m;
                }
        else if (json_is_array(j))
                json_array_foreach(j, i, v) m = longest_key(v) > m ? longest_key(v) : m;
        return m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        json_error_t err;
        size_t max_depth;
        json_t *j, *back;
        char *text;
        size_t len;

        if (size < 1)
                return 0;
        max_depth = data[0] % 40;
        data++;
        size--;

        j = json_parse_strict((const char *)data, size, max_depth, &err);
        /* Accepted as canonical: parsed (an object or array at the top; a scalar only with
         * JSON_DECODE_ANY), and dumped again to the same bytes. */
        if (json_canonical((const char *)data, size, max_depth, NULL, NULL)) {
                json_t *c = json_loadb((const char *)data, size,
                                       JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &err);
                char *same = c ? json_dump_compact(c, &len) : NULL;

                if (!same || len != size || memcmp(same, data, size) != 0)
                        abort();
                if ((data[0] == '{' || data[0] == '[') && !j)
                        abort();
                free(same);
                json_decref(c);
        }
        if (!j) {
                /* Error text is shown to clients: it must be a terminated string. */
                if (memchr(err.text, '\0', sizeof(err.text)) == NULL)
                        abort();
                return 0;
        }
        if (depth_of(j) > max_depth)
                abort();
        text = json_dump_compact(j, &len);
        if (!text || (!json_canonical(text, len, max_depth, NULL, NULL) && longest_key(j) <= 256))
                abort();
        back = json_parse_strict(text, len, max_depth, &err);
        if (!back || !json_equal(j, back))
                abort();
        json_decref(back);
        free(text);
        json_decref(j);
        return 0;
}
