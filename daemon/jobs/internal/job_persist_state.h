/* Private to the job files: the persistence state each job, part and the jobs object carry
 * (their persist members), apart from job_persist.h so that job_internal.h can hold it while
 * job_persist.c includes job_internal.h (no circle of includes). Only job_persist.c reads or
 * writes these fields (tests/lint/store-writers). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "uuid.h"

struct store_ticket;

/* A job's persistence (struct job's persist). The flags are bits: thousands of jobs wait. */
struct job_persist_state {
        struct store_ticket *final_ticket; /* its final write; pruned from memory once done */
        /* Monotonic: the tree is newer than what was queued to the store, and is written by
         * then (job_persist_soon); 0: nothing pending. */
        uint64_t due_ms;
        bool committed : 1;       /* its submission is durable: it may run */
        bool final_unsaved : 1;   /* its final write failed: written again every store_retry_ms */
        bool rewritten : 1;       /* a write was queued after its submission's (job_persist...) */
        bool final_committed : 1; /* final, and a cancel saw that write commit: prune it */
        bool in_finals : 1;       /* listed in jobs_persist.finals, for the prune to look at */
        /* Its parts' own documents (persist_due) are newer than its row's state and summary,
         * which lists read: counted in jobs_persist.n_rows_behind, written whole before a list
         * (job_persist_rows_current_locked). */
        bool row_behind : 1;
};

/* A part's persistence (struct part's persist). */
struct job_persist_part {
        /* Its object in the document changed since the job's last write of either (the whole
         * document, or the part's own: persist_due). */
        bool unsaved;
};

/* A job's pending change, in jobs_persist.pending. */
struct job_pending {
        char id[JOB_ID_MAX];
        uint64_t due_ms; /* the job's persist.due_ms when it was listed */
};

/* The object's persistence (struct jobs's persist). */
struct jobs_persist {
        uint64_t prune_seen_commits; /* store_commits at the last prune (UINT64_MAX: none yet) */
        /* The jobs given a final write since the last prune (job_persist), which the prune
         * looks at instead of every job in memory: under a backlog of thousands that walk, once
         * per commit, was 3% of umd's CPU. finals_lost: one could not be listed (out of
         * memory), so the next prune walks every job as before. */
        struct job **finals;
        size_t n_finals, cap_finals;
        bool finals_lost;
        uint64_t due_ms; /* monotonic: the earliest job's persist.due_ms; 0: none */
        /* Jobs in memory with row_behind set. No list of them: a list walks every job when
         * this is not 0, which it seldom is for long (a job's next whole write clears it). */
        size_t n_rows_behind;
        /* The jobs given a pending change (job_persist_soon), oldest first, which is the order
         * they fall due in (each waits JOB_PERSIST_DELAY_MS): a ring of ids, not pointers, since
         * a job may leave memory first. An entry whose job was written since, or is gone, is
         * passed over. Under a backlog of 100,000 jobs the pass that walked every job for the few
         * due, four times a second, was a cost of every job in memory. pending_lost: one could
         * not be listed (out of memory), so passes walk every job until none is pending. */
        struct job_pending *pending;
        size_t pending_head, n_pending, cap_pending;
        bool pending_lost;
};
