/* Health actions: the one vocabulary every check and every verdict uses to say what to do about
 * it, ordered from least to most severe, so that a verdict's action is the most severe of its
 * checks'. The names are the API's, umdctl's, the metrics' and the drain reason's. */
#pragma once

#include <jansson.h>

enum health_action {
        HEALTH_ACTION_NONE,
        HEALTH_ACTION_RESTART_JOB,
        HEALTH_ACTION_RESET_GPU,
        HEALTH_ACTION_REBOOT_NODE,
        HEALTH_ACTION_SERVICE, /* replace the GPU, or send it for service */
        _HEALTH_ACTION_MAX,
};

/* "none", "restart_job", "reset_gpu", "reboot_node", "service"; asserts a valid action. */
const char *health_action_name(enum health_action a);

/* The action named s: 0 and *ret, or -EINVAL (s NULL or no action's name; *ret untouched). */
int health_action_from_name(const char *s, enum health_action *ret);

/* The more severe of a and b. */
enum health_action health_action_max(enum health_action a, enum health_action b);

/* A verdict's "verdict", "reasons" and "action" again from its checks, after a check was added
 * or replaced: the worst check's verdict (a word no check gives, such as "unknown", stands unless
 * a check is worse), the reasons of the checks that did not pass, in order, and the most severe
 * of their actions. The one place that does it: health_links.c and the Xid watch call it. On
 * allocation failure the verdict is left as it was. */
void health_settle(json_t *verdict);
