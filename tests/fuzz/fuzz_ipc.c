/* libFuzzer harness for the IPC frame decoder, umd's side of the worker socketpair: the bytes
 * are fed in pieces whose sizes the input chooses (a worker's writes arrive split anywhere), and
 * frames are taken until the decoder wants more or reports a protocol error, as umd does (its
 * "result" member kept as bytes when the frame is canonical). Such bytes must be exactly the
 * dump of what they parse to, and every decoded message must re-encode to a frame that decodes
 * again. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ipc.h"
#include "jsonraw.h"
#include "jsonutil.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A "result" kept as bytes becomes its tree: checked to dump to those very bytes. */
static void unraw(json_t *msg)
{
        json_t *res = json_object_get(msg, "result"), *tree;
        const char *bytes;
        size_t len, dlen;
        char *dump;

        if (!json_raw_get(res, &bytes, &len))
                return;
        tree = json_raw_tree(res);
        if (!json_is_object(tree))
                abort();
        dump = json_dump_compact(tree, &dlen);
        if (!dump || dlen != len || memcmp(dump, bytes, len) != 0)
                abort();
        free(dump);
        json_object_set_new(msg, "result", tree);
}

static void roundtrip(json_t *msg)
{
        struct ipc_decoder d;
        uint8_t *frame = NULL;
        size_t len = 0;
        json_t *again = NULL;
        int r;

        r = ipc_encode(msg, &frame, &len);
        if (r == -EMSGSIZE)
                return;
        if (r < 0)
                abort();
        ipc_decoder_init(&d, 0);
        if (ipc_decoder_feed(&d, frame, len) < 0)
                abort();
        r = ipc_decoder_next(&d, &again);
        if (r != 1 || !json_equal(msg, again))
                abort();
        json_decref(again);
        if (d.len != 0)
                abort();
        ipc_decoder_free(&d);
        free(frame);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct ipc_decoder d;
        size_t max_frame, off = 0;
        int r = 0;

        if (size < 2)
                return 0;
        /* First byte: a small frame limit now and then, so oversize paths are reached. */
        max_frame = data[0] & 1 ? (size_t)data[0] * 4 : 0;
        /* Second byte: the chunk size the reader gets from each read(). */
        size_t chunk = (size_t)data[1] + 1;
        data += 2;
        size -= 2;

        ipc_decoder_init(&d, max_frame);
        while (off < size && r >= 0) {
                size_t n = size - off < chunk ? size - off : chunk;

                if (ipc_decoder_feed(&d, data + off, n) < 0)
                        abort();
                off += n;
                for (;;) {
                        json_t *msg = NULL;

                        r = ipc_decoder_next_split(&d, "result", &msg);
                        if (r == 1) {
                                if (!json_is_object(msg) ||
                                    !json_is_string(json_object_get(msg, "type")))
                                        abort();
                                unraw(msg);
                                roundtrip(msg);
                                json_decref(msg);
                                continue;
                        }
                        if (r != 0 && r != -EMSGSIZE && r != -EBADMSG && r != -ENOMEM)
                                abort();
                        if (d.len > d.cap)
                                abort();
                        break;
                }
        }
        ipc_decoder_free(&d);
        return 0;
}
