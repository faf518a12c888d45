/* libFuzzer harness for the Xid watch's line parsers (daemon/xid_parse.c), which read the
 * kernel's log: any bytes, never a crash; a parsed line always has a normalised PCI address (one
 * xid_normalise_bus accepts again, unchanged), a code, and a text that is part of the line. The
 * table classifies every parsed line. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xid_parse.h"
#include "xid_table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *s = malloc(size + 1);
        struct xid_line x;
        uint64_t seq, usec;
        const char *msg;
        bool known;

        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = '\0';
        if (xid_parse_kmsg(s, &seq, &usec, &msg) == 0 && (msg < s || msg > s + size))
                abort();
        if (xid_parse_line(s, &x) == 1) {
                char again[XID_BUS_MAX];
                if (xid_normalise_bus(x.bus, again) != 0 || strcmp(again, x.bus) != 0)
                        abort();
                if (x.code == 0 || strlen(x.text) >= XID_TEXT_MAX)
                        abort();
                (void)xid_table_action(NULL, &x, &known);
        }
        free(s);
        return 0;
}
