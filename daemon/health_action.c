/* Health actions: their names and their order (see health_action.h), and a verdict settled from its
 * checks. */
#include "health_action.h"

#include <assert.h>
#include <stdbool.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "util.h"

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

/* 0 pass (or any word no check gives), 1 warn, 2 fail. */
static int verdict_rank(const char *v)
{
        return streq_ptr(v, "fail") ? 2 : streq_ptr(v, "warn") ? 1 : 0;
}

void health_settle(json_t *verdict)
{
        static const char *const words[] = {"pass", "warn", "fail"};
        json_t *reasons = json_array(), *c;
        enum health_action action = HEALTH_ACTION_NONE, a;
        int worst = 0;
        size_t i;

        if (!reasons)
                return;
        json_array_foreach(json_object_get(verdict, "checks"), i, c)
        {
                int r = verdict_rank(json_string_value(json_object_get(c, "verdict")));
                if (r > 0 && json_is_string(json_object_get(c, "reason")))
                        json_array_append(reasons, json_object_get(c, "reason"));
                worst = r > worst ? r : worst;
                if (health_action_from_name(json_string_value(json_object_get(c, "action")), &a) ==
                    0)
                        action = health_action_max(action, a);
        }
        const char *was = json_string_value(json_object_get(verdict, "verdict"));
        bool other = was && verdict_rank(was) == 0 && strcmp(was, "pass") != 0;
        if (!(other && worst == 0))
                json_object_set_new(verdict, "verdict", json_string(words[worst]));
        json_object_set_new(verdict, "reasons", reasons);
        json_object_set_new(verdict, "action", json_string(health_action_name(action)));
}
