/* Private to the job files (jobs.c, dispatch.c, submit.c, queries.c, verdicts.c): struct job,
 * the in-memory index and queues they share, and the few index operations more than one of them
 * needs. Everything here is guarded by core_lock. Nothing outside those files includes it. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "devices.h"
#include "jobstate.h"
#include "supervisor.h"
#include "uuid.h"

struct umd_config;
struct store;
struct store_ticket;
struct queue;

struct part {
        ssize_t device; /* -1: device gone */
        enum job_state st;
        uint64_t waiting_since_ms; /* first refused for a busy GPU, 0 when not waiting */
        unsigned attempts;         /* runs started (a failing canonical check runs twice) */
};

struct job {
        char id[UUID_STRING_MAX];
        json_t *doc; /* the stored document: the truth; the fields below cache what queues need */
        enum job_state st;
        int prio;
        size_t n_parts;
        struct part *parts;
        bool cancel_requested;
        uint64_t finished_ms;
        bool committed;                    /* its submission is durable: it may run */
        struct store_ticket *final_ticket; /* its final write; pruned from memory once done */
        bool final_unsaved; /* that write failed: written again every store_retry_ms */
};

/* One instance (jobs.c), behind core_lock. */
struct jobs_state {
        const struct umd_config *cfg;
        struct store *store;
        struct supervisor *sup; /* NULL until jobs_attach_supervisor and after jobs_shutdown */
        void (*poke)(void);     /* asks coexist.c for a look now; NULL: none (jobs_attach_looks) */
        bool quiescing;
        struct job **jobs; /* ascending id (submission order) */
        size_t n_jobs, cap_jobs;
        struct queue *queues; /* one per device, then the node's */
        enum worker_state node_wstate;
        bool node_running;            /* a part runs on the node worker: every GPU is taken */
        uint64_t node_look_wanted_ms; /* the node's head waits for a look of every GPU since */
        json_t *node_last_verdict;    /* the canonical check's last verdict on the GPU pairs */
        json_t *node_verdict_by_tier; /* each tier's last one: {"quick": ..., "extended": ...} */
        uint64_t node_last_check_ms;  /* the pairs' last scheduled check (realtime) */
};
extern struct jobs_state js;

static inline bool is_node(size_t dev)
{
        return have_node() && dev == node_index();
}

/* jobs.c: the index and the state machine. */
struct job *job_find(const char *id);
ssize_t job_index(const char *id);
int jobs_append(struct job *j);
void jobs_remove_at(size_t i);
void job_free(struct job *j);
json_t *job_now_json(void);
/* queries.c: a store read's outcome r for job id as the API says it (0, or a 404 / 500). */
struct problem;
int store_read_problem(int r, const char *id, struct problem *p);
json_t *job_part_doc(struct job *j, size_t i);
const char *job_benchmark(const struct job *j);
enum job_state job_derive_state(const struct job *j);
/* Moves part i to st (leaving its queue when it was queued), recording result and error when
 * st is final. */
void job_set_part(struct job *j, size_t i, enum job_state st, json_t *result, const char *error);
/* Recomputes the job's state and times after its parts changed; true when it just finished. */
bool job_update_state(struct job *j);
/* A job reached a final state: counted in metrics. */
void job_finished(struct job *j);
int job_persist(struct job *j);
/* The generation moved: waiters are told. */
void job_changed(const struct job *j);
int job_enqueue(struct job *j, size_t i);
/* What clients see: a copy of the stored document less umd's bookkeeping. */
json_t *job_public(const json_t *doc);
void jobs_prune_finished(void);
void jobs_retention_apply(void);
size_t jobs_queued_total(void);
/* Parts running on every device and the node. */
size_t jobs_running_locked(void);
/* Parts queued for device dev (or the node). */
size_t jobs_queued_on_locked(size_t dev);
/* Tells metrics what the queues hold now (metrics never asks). */
void jobs_publish_locked(void);
/* jobs_publish_locked, then core_unlock. */
void jobs_unlock(void);

/* dispatch.c */
void dispatch_try(size_t dev);
void dispatch_try_node(void);

/* verdicts.c: judge a canonical health part; true when it was queued to run once more. */
bool verdict_judge(struct job *j, size_t i, struct device *d, const json_t *result);
bool verdict_judge_node(struct job *j, size_t i, const json_t *result);
/* After recovery: each device's newest verdict in the store. */
void verdicts_restore_last(void);
