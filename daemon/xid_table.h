/* What each Xid asks for: NVIDIA's published Xid catalog's immediate action, in umd's action
 * vocabulary (health_action.h), with the operator's overrides (xid_actions) on top. Pure: no
 * I/O, no state beyond what the caller holds. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "health_action.h"
#include "xid_parse.h"

/* Where the table comes from, as every Xid check's threshold_source says it. */
#define XID_TABLE_SOURCE                                                                           \
        "NVIDIA Xid catalog (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html), "      \
        "immediate action"
/* The overrides one xid_actions value may hold. */
#define XID_OVERRIDES_MAX 64

struct xid_override {
        unsigned code;
        enum health_action action;
};

struct xid_overrides {
        size_t n;
        struct xid_override o[XID_OVERRIDES_MAX];
};

/* The action an event asks for: an override of its code wins (Xids only: SXids are NVSwitch
 * codes); else Xid 154 the recovery action it names, NVLink Xids 144-150 and SXids their own
 * "Fatal"/"Non-fatal" word, other Xids the table's entry. *ret_known: whether the table (or an
 * override) knew the code; an unknown code asks for none. ov may be NULL. */
enum health_action xid_table_action(const struct xid_overrides *ov, const struct xid_line *x,
                                    bool *ret_known);

/* The catalog's name of an Xid ("GPU has fallen off the bus"), or NULL for one not in the
 * table. */
const char *xid_table_name(unsigned code);

/* Whether an event with this action fails its GPU: an action beyond restarting the job. An
 * application's Xid (13, 31, 43, 45, ...) is evidence only. */
bool xid_action_fails(enum health_action a);

/* Parses xid_actions ("13:none,79:reboot_node"; "" is none) into *ret. 0, or -EINVAL with what
 * is wrong in err (*ret untouched). */
int xid_overrides_parse(const char *s, struct xid_overrides *ret, char *err, size_t errlen);

/* The table for docs and tests: entry i's code, action and name; false past the end. */
bool xid_table_entry(size_t i, unsigned *ret_code, enum health_action *ret_action,
                     const char **ret_name);
