/* Health actions: their names and their order (see health_action.h). */
#include "health_action.h"

#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

static const char *const action_names[_HEALTH_ACTION_MAX] = {
    [HEALTH_ACTION_NONE] = "none",           [HEALTH_ACTION_RESTART_JOB] = "restart_job",
    [HEALTH_ACTION_RESET_GPU] = "reset_gpu", [HEALTH_ACTION_REBOOT_NODE] = "reboot_node",
    [HEALTH_ACTION_SERVICE] = "service",
};

const char *health_action_name(enum health_action a)
{
        assert(a >= HEALTH_ACTION_NONE && a < _HEALTH_ACTION_MAX);
        return action_names[a];
}

int health_action_from_name(const char *s, enum health_action *ret)
{
        if (!s)
                return -EINVAL;
        for (int a = HEALTH_ACTION_NONE; a < _HEALTH_ACTION_MAX; a++)
                if (strcmp(s, action_names[a]) == 0) {
                        *ret = (enum health_action)a;
                        return 0;
                }
        return -EINVAL;
}

enum health_action health_action_max(enum health_action a, enum health_action b)
{
        return a > b ? a : b;
}
