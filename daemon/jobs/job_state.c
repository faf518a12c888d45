/* The job state table and the derivation of a job's state from its parts' (see job_state.h). */
#include "job_state.h"

#include <errno.h>
#include <string.h>

const char *const job_state_names[JOB_STATE_MAX] = {
    [JOB_QUEUED] = "queued",           [JOB_RUNNING] = "running",     [JOB_SUCCEEDED] = "succeeded",
    [JOB_FAILED] = "failed",           [JOB_CANCELLED] = "cancelled", [JOB_TIMED_OUT] = "timed_out",
    [JOB_INTERRUPTED] = "interrupted",
};

const char job_state_names_list[] =
    "queued, running, succeeded, failed, cancelled, timed_out, interrupted";

const char *job_state_to_string(enum job_state st)
{
        return (unsigned)st < JOB_STATE_MAX ? job_state_names[st] : "?";
}

int job_state_from_string(const char *s)
{
        for (size_t i = 0; s && i < JOB_STATE_MAX; i++)
                if (strcmp(s, job_state_names[i]) == 0)
                        return (int)i;
        return -EINVAL;
}

bool job_state_final(enum job_state st)
{
        return st >= JOB_SUCCEEDED && st < JOB_STATE_MAX;
}

/* Open while any part is queued or running (running once any has started). Then a client's
 * cancel wins over what its parts did; otherwise the worst outcome names the job:
 * a deadline passed, then a failure, then an interruption (umd stopped), and a job whose parts
 * were all cancelled (a paused device) is cancelled. */
enum job_state job_state_from_counts(const size_t *count, bool cancel_requested)
{
        size_t n = 0;

        for (size_t s = 0; s < JOB_STATE_MAX; s++)
                n += count[s];
        if (count[JOB_QUEUED] + count[JOB_RUNNING] > 0)
                return count[JOB_QUEUED] == n ? JOB_QUEUED : JOB_RUNNING;
        if (cancel_requested && count[JOB_CANCELLED])
                return JOB_CANCELLED;
        if (count[JOB_SUCCEEDED] == n)
                return JOB_SUCCEEDED;
        if (count[JOB_TIMED_OUT])
                return JOB_TIMED_OUT;
        if (count[JOB_FAILED])
                return JOB_FAILED;
        if (count[JOB_INTERRUPTED])
                return JOB_INTERRUPTED;
        return JOB_CANCELLED;
}

enum job_state job_state_derive(const enum job_state *parts, size_t n, bool cancel_requested)
{
        size_t count[JOB_STATE_MAX] = {0};

        for (size_t i = 0; i < n; i++)
                if ((unsigned)parts[i] < JOB_STATE_MAX)
                        count[parts[i]]++;
        return job_state_from_counts(count, cancel_requested);
}
