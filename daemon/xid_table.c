/* The Xid table (see xid_table.h). Its source: NVIDIA's Xid catalog for Ampere and newer GPUs
 * (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, the "Resolution Bucket
 * (Immediate Action)" column, driver r570-r580), mapped to umd's actions: RESTART_APP ->
 * restart_job, RESET_GPU -> reset_gpu, RESTART_BM (bare metal) -> reboot_node, IGNORE -> none.
 * docs/design.md holds the same table in words, and says which rows were checked against the
 * catalog itself (only its first rows could be read where this was written). */
#include "xid_table.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* An action's name in xid_actions ("restart_job", "reboot_node", ...), with room to spare. */
#define ACTION_NAME_MAX 32

/* Xid 154's recovery action values (nvmlDeviceGpuRecoveryAction_t). */
#define RECOVERY_NONE          0
#define RECOVERY_GPU_RESET     1
#define RECOVERY_NODE_REBOOT   2
#define RECOVERY_DRAIN_P2P     3
#define RECOVERY_DRAIN_N_RESET 4
/* The NVLink Xids whose catalog action depends on their sub-code; their line says Fatal or
 * Nonfatal, which umd goes by. */
#define XID_NVLINK_FIRST 144
#define XID_NVLINK_LAST  150
#define XID_RECOVERY     154

static const struct {
        unsigned code;
        enum health_action action;
        const char *name;
} table[] = {
    {8, HEALTH_ACTION_RESTART_JOB, "GPU stopped processing (channel idle timeout)"},
    {13, HEALTH_ACTION_RESTART_JOB, "Graphics engine exception"},
    {31, HEALTH_ACTION_RESTART_JOB, "GPU memory page fault (MMU fault)"},
    {32, HEALTH_ACTION_RESTART_JOB, "Invalid or corrupted push buffer stream"},
    {43, HEALTH_ACTION_RESTART_JOB, "GPU stopped processing (reset channel verification)"},
    {45, HEALTH_ACTION_NONE, "Preemptive cleanup, due to previous errors"},
    {48, HEALTH_ACTION_RESET_GPU, "Double bit ECC error"},
    {61, HEALTH_ACTION_RESET_GPU, "Internal micro-controller breakpoint/warning"},
    {62, HEALTH_ACTION_RESET_GPU, "Internal micro-controller halt"},
    {63, HEALTH_ACTION_RESET_GPU, "ECC page retirement or row remapping recording event"},
    {64, HEALTH_ACTION_RESET_GPU, "ECC page retirement or row remapper recording failure"},
    {68, HEALTH_ACTION_RESTART_JOB, "NVDEC0 exception"},
    {69, HEALTH_ACTION_RESTART_JOB, "Graphics engine class error"},
    {74, HEALTH_ACTION_RESET_GPU, "NVLink error"},
    {79, HEALTH_ACTION_REBOOT_NODE, "GPU has fallen off the bus"},
    {92, HEALTH_ACTION_NONE, "High single-bit ECC error rate"},
    {94, HEALTH_ACTION_RESTART_JOB, "Contained ECC error"},
    {95, HEALTH_ACTION_RESET_GPU, "Uncontained ECC error"},
    {109, HEALTH_ACTION_RESTART_JOB, "Context switch timeout"},
    {110, HEALTH_ACTION_RESET_GPU, "Security fault"},
    {119, HEALTH_ACTION_RESET_GPU, "GSP RPC timeout"},
    {120, HEALTH_ACTION_RESET_GPU, "GSP error"},
    {140, HEALTH_ACTION_RESET_GPU, "Unrecovered ECC error"},
    {144, HEALTH_ACTION_RESET_GPU, "NVLink SAW error"},
    {145, HEALTH_ACTION_RESET_GPU, "NVLink RLW error"},
    {146, HEALTH_ACTION_RESET_GPU, "NVLink TLW error"},
    {147, HEALTH_ACTION_RESET_GPU, "NVLink TREX error"},
    {148, HEALTH_ACTION_RESET_GPU, "NVLink NVLPW error"},
    {149, HEALTH_ACTION_RESET_GPU, "NVLink NETIR error"},
    {150, HEALTH_ACTION_RESET_GPU, "NVLink MSE error"},
    {154, HEALTH_ACTION_NONE, "GPU recovery action changed"},
};

bool xid_table_entry(size_t i, unsigned *ret_code, enum health_action *ret_action,
                     const char **ret_name)
{
        if (i >= ELEMENTSOF(table))
                return false;
        *ret_code = table[i].code;
        *ret_action = table[i].action;
        *ret_name = table[i].name;
        return true;
}

const char *xid_table_name(unsigned code)
{
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (table[i].code == code)
                        return table[i].name;
        return NULL;
}

bool xid_action_fails(enum health_action a)
{
        return a > HEALTH_ACTION_RESTART_JOB;
}

/* "Fatal" against "Non-fatal"/"Nonfatal" in the text after the code. */
static bool says_fatal(const char *text)
{
        const char *p = strstr(text, "Fatal");
        return p && !(p > text && (p[-1] == '-' || p[-1] == 'n'));
}

static enum health_action recovery_action(int v)
{
        switch (v) {
        case RECOVERY_NONE:
                return HEALTH_ACTION_NONE;
        case RECOVERY_GPU_RESET:
        case RECOVERY_DRAIN_P2P:
        case RECOVERY_DRAIN_N_RESET:
                return HEALTH_ACTION_RESET_GPU;
        case RECOVERY_NODE_REBOOT:
                return HEALTH_ACTION_REBOOT_NODE;
        default:
                return HEALTH_ACTION_RESET_GPU; /* a value newer than umd: the safer side */
        }
}

enum health_action xid_table_action(const struct xid_overrides *ov, const struct xid_line *x,
                                    bool *ret_known)
{
        *ret_known = true;
        if (x->kind == XID_KIND_SXID)
                return says_fatal(x->text) ? HEALTH_ACTION_REBOOT_NODE : HEALTH_ACTION_NONE;
        for (size_t i = 0; ov && i < ov->n; i++)
                if (ov->o[i].code == x->code)
                        return ov->o[i].action;
        if (x->code == XID_RECOVERY) {
                int v = xid_recovery_action(x->text);
                return v < 0 ? HEALTH_ACTION_NONE : recovery_action(v);
        }
        if (x->code >= XID_NVLINK_FIRST && x->code <= XID_NVLINK_LAST && !says_fatal(x->text))
                return HEALTH_ACTION_NONE;
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (table[i].code == x->code)
                        return table[i].action;
        *ret_known = false;
        return HEALTH_ACTION_NONE;
}

int xid_overrides_parse(const char *s, struct xid_overrides *ret, char *err, size_t errlen)
{
        struct xid_overrides ov = {0};
        const char *p = s ? s : "";

        while (*p) {
                char action[ACTION_NAME_MAX], *end;
                unsigned long code = strtoul(p, &end, 10);
                size_t n;

                if (end == p || *end != ':' || code == 0 || code > 99999) {
                        snprintf(err, errlen, "'%.40s' is not CODE:ACTION (e.g. 13:none)", p);
                        return -EINVAL;
                }
                p = end + 1;
                n = strcspn(p, ", ");
                if (n == 0 || n >= sizeof(action)) {
                        snprintf(err, errlen, "Xid %lu: no action", code);
                        return -EINVAL;
                }
                memcpy(action, p, n);
                action[n] = '\0';
                if (ov.n == XID_OVERRIDES_MAX) {
                        snprintf(err, errlen, "more than %d overrides", XID_OVERRIDES_MAX);
                        return -EINVAL;
                }
                ov.o[ov.n].code = (unsigned)code;
                if (health_action_from_name(action, &ov.o[ov.n].action) < 0) {
                        snprintf(err, errlen,
                                 "Xid %lu: '%s' is no action (none, restart_job, reset_gpu, "
                                 "reboot_node, service)",
                                 code, action);
                        return -EINVAL;
                }
                ov.n++;
                p += n;
                p += strspn(p, ", ");
        }
        *ret = ov;
        return 0;
}
