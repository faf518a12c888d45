/* The core.h test double's controls. */
#pragma once

#include "http.h"

struct core_double {
        int result;      /* what the job functions return when not failing (0 or 1) */
        int fail_status; /* non-zero: fail with this problem status */
        const char *fail_field;
        unsigned fail_retry_after;
        int health; /* 200 or 503 (0 = 200) */
        struct job_filter last_filter;
        bool list_more; /* core_job_list says another page follows */
        char *last_id;
        char *last_key;
        unsigned calls;
        unsigned observed;
        /* core_job_submit returns 2 (its answer waits for a commit) where the caller may wait;
         * core_job_submit_end then answers as core_job_submit would have. */
        bool submit_waits;
        unsigned submit_ends;
};

extern struct core_double core_double;
void core_double_reset(void);
