/* Job and part states: the one table of their names, and the pure rule that derives a job's
 * state from its parts'. No locks, no store: unit-tested alone
 * (tests/unit/daemon/test_job_state.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Ordered: every state from JOB_SUCCEEDED on is final. */
enum job_state {
        JOB_QUEUED,
        JOB_RUNNING,
        JOB_SUCCEEDED,
        JOB_FAILED,
        JOB_CANCELLED,
        JOB_TIMED_OUT,
        JOB_INTERRUPTED,
        JOB_STATE_MAX,
};

/* The names the API and the store use, indexed by enum job_state. */
extern const char *const job_state_names[JOB_STATE_MAX];
/* "queued, running, ..., interrupted": for messages that list the valid names. */
extern const char job_state_names_list[];

/* The name of st; "?" for a value outside the table. */
const char *job_state_to_string(enum job_state st);
/* The state named s, or -EINVAL for NULL or an unknown name. */
int job_state_from_string(const char *s);
bool job_state_final(enum job_state st);

/* The same from how many parts are in each state (count[JOB_STATE_MAX]). */
enum job_state job_state_from_counts(const size_t *count, bool cancel_requested);
/* The state of a job whose n parts are in parts[] (n >= 1): queued while none has started,
 * running while any is open, else the outcome (see job_state.c for the order). cancel_requested:
 * a client asked to cancel it (a cancelled part then makes the job cancelled). */
enum job_state job_state_derive(const enum job_state *parts, size_t n, bool cancel_requested);
