/* Private to the job files (daemon/jobs/job_*.c): struct job, struct jobs (the object: the
 * in-memory index and queues they share), and the few index operations more than one of them
 * needs. Everything here is guarded by core_lock. Only those files have this folder on their
 * include path (daemon/jobs/meson.build), so nothing else can include it. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "devices.h"
#include "core.h"
#include "job_state.h"
#include "job_persist_state.h"
#include "jobs.h"
#include "supervisor.h"
#include "uuid.h"

struct umd_config;
struct store;
struct store_ticket;
struct queue;

struct part {
        ssize_t device; /* -1: device gone */
        enum job_state st;
        uint64_t waiting_since_ms;       /* first refused for a busy GPU, 0 when not waiting */
        unsigned attempts;               /* runs started (a failing canonical check runs twice) */
        struct job_persist_part persist; /* job_persist.c's alone */
};

struct job {
        char id[JOB_ID_MAX];
        /* The flags in the bytes after id's 37, where they cost no padding (thousands of jobs
         * wait). */
        bool cancel_requested : 1;
        unsigned stripped : 3; /* the keys text leaves out (job_index.c's STRIPPED_*) */
        bool unchecked : 1;    /* recovered from its columns; job_checked() not yet run */
        bool stored : 1;       /* doc and text NULL: the document is the store's row */
        bool indexed : 1;      /* in jobs.jobs: counted in its client's jobs.clients[].open */
        /* The stored document: the truth; the fields below cache what queues need. A job that is
         * only waiting holds none of it: the store's committed row is the document (stored),
         * unless it was written again since its submission, which the store may not have yet;
         * then it holds its compact bytes (text, doc NULL). A tree costs about ten times its
         * text, and thousands of jobs may wait. job_doc() makes the tree again; read it through
         * job_doc(), never through doc. */
        json_t *doc;
        char *text; /* the document's compact bytes while doc is NULL, else NULL */
        size_t text_len;
        struct store *store; /* where job_doc() reads a stored job's document (jobs_append) */
        /* What scans of every job compare (idempotency, jobs_per_token), kept out of the
         * document so that a scan makes no tree; NULL: none. */
        char *client;
        char *idempotency_key;
        struct job *key_next; /* the next job of its bucket in jobs.keyed (idempotency_key set) */
        enum job_state st;
        int prio;
        size_t n_parts;
        struct part *parts;
        uint64_t finished_ms;
        /* Whether and when its changes reach the store: job_persist.c's alone. */
        struct job_persist_state persist;
};

/* What recovery keeps (job_recover.c): counts for the log, and the last submission
 * recover_check judged with its verdict (queued jobs come in runs of the same submission, and
 * judging one again costs more than comparing it). It outlives start-up because the jobs
 * recovered from their columns alone are checked afterwards. */
/* "it is no longer a valid job: " and a problem's field and detail (PROBLEM_FIELD_MAX +
 * PROBLEM_DETAIL_MAX), with room for the words between them. */
#define JOB_RECOVERY_WHY_MAX 800

struct job_recovery {
        unsigned changed;
        size_t unchecked;           /* jobs with unchecked set */
        size_t recovered_unchecked; /* how many there were after recovery, for the log */
        uint64_t checks_started_ms; /* the first jobs_check_recovered (monotonic), 0 before */
        json_t *last_body;
        bool last_ok;
        char last_why[JOB_RECOVERY_WHY_MAX];
};

/* One instance (jobs_init), behind core_lock. */
struct jobs {
        const struct umd_config *cfg;
        struct store *store;
        /* Where every job file reads the time (jobs_monotonic_ms, jobs_realtime_ms): the
         * system's clocks unless umd_daemon.jobs_clock gave a test's. */
        struct jobs_clock clock;
        struct metrics *metrics; /* d->metrics: told of queues, parts and finished jobs */
        /* NULL until job_dispatch_attach_supervisor and after jobs_shutdown. */
        struct supervisor *sup;
        /* The Xid watch, whose check each canonical verdict gets; NULL: none. */
        struct xid_watch *xid;
        /* Asks coexist.c for a look now; NULL: none (job_dispatch_attach_looks). */
        void (*poke)(void *arg, ssize_t dev);
        void *poke_arg;
        bool quiescing;
        bool store_was_failing; /* job_dispatch_store_watch saw the store failing */
        /* Each slot's (a GPU's, then the node's) part whose start is being committed before
         * its worker is sent it (job_start.c); ticket NULL: none. */
        struct job_start {
                struct store_ticket *ticket;
                char id[JOB_ID_MAX];
                size_t part;
                enum worker_state was; /* the slot's worker state before the part took it */
        } * starts;
        int start_fd;      /* eventfd: a start's commit is known, for the main loop */
        struct job **jobs; /* ascending id (submission order) */
        /* cap_jobs slots allocated from jobs - jobs_skip: the oldest jobs, which finish first,
         * leave by moving jobs on (jobs_skip grows) instead of moving every job after them
         * (job_persist_prune, jobs_remove_at); an append at the allocation's end closes the
         * gap. */
        size_t n_jobs, cap_jobs, jobs_skip;
        /* The indexed jobs with an idempotency_key, hashed by key and client (chained through
         * job.key_next): a submit with a key looked through every job in memory, under
         * core_lock (200 µs a submit with 30,000 queued). n_keyed_buckets is 0 or a power of 2. */
        struct job **keyed;
        size_t n_keyed, n_keyed_buckets;
        /* Each client's (token name's) indexed jobs not final, for jobs_per_token: counted as
         * jobs enter and leave the index and change state (job_state_set), not by a walk of every
         * job a submit. A client stays listed once seen: they are the tokens file's few. */
        struct client_open {
                char *client;
                size_t open;
        } * clients;
        size_t n_clients;
        struct queue *queues; /* one per device, then the node's */
        enum worker_state node_wstate;
        bool node_running;            /* a part runs on the node worker: every GPU is taken */
        uint64_t node_look_wanted_ms; /* the node's head waits for a look of every GPU since */
        json_t *node_last_verdict;    /* the canonical check's last verdict on the GPU pairs */
        json_t *node_verdict_by_tier; /* each tier's last one: {"quick": ..., "extended": ...} */
        uint64_t node_last_check_ms;  /* the pairs' last scheduled check (realtime) */
        /* The pending writes, the finals in flight, the rows behind: job_persist.c's alone. */
        struct jobs_persist persist;
        /* Waiters (GET ?wait=) learn of changes through these: the generation moves first, then
         * the listener is told, both under the lock (so a reader that saw the old generation is
         * woken). The generation is read without the lock. */
        _Atomic uint64_t generation;
        core_job_listener listener;
        void *listener_data;
        struct job_recovery rec;
};

static inline uint64_t jobs_monotonic_ms(const struct jobs *js)
{
        return js->clock.monotonic_ms(js->clock.data);
}

static inline uint64_t jobs_realtime_ms(const struct jobs *js)
{
        return js->clock.realtime_ms(js->clock.data);
}

static inline bool is_node(size_t dev)
{
        return have_node() && dev == node_index();
}

/* job_start.c: a part's start, committed before its worker is sent the part. */
/* Hand part i of j to slot's worker (a GPU, or the node). -errno when the supervisor cannot
 * take it now. */
int part_send(struct jobs *js, struct job *j, size_t slot);
/* Part i of j, its slot just taken (was: the slot's worker state before): marked running, its
 * start queued to the store, and sent once that commits (jobs_starts_committed). */
void job_start_part(struct jobs *js, struct job *j, size_t i, size_t slot, enum worker_state was);
int job_start_init(struct jobs *js);
/* At shutdown: every start in flight waited for, its part queued again (it never ran). */
void job_start_abandon_locked(struct jobs *js);
void job_start_free(struct jobs *js);

/* job_index.c: the index and the state machine. */
struct job *job_find(struct jobs *js, const char *id);
ssize_t job_index(struct jobs *js, const char *id);
int jobs_append(struct jobs *js, struct job *j);
void jobs_remove_at(struct jobs *js, size_t i);
/* Out of its queues and the index, freed (a job not in the index is only freed). */
void jobs_remove(struct jobs *js, struct job *j);
void job_free(struct job *j);
/* Every job in the index freed and the index emptied (jobs.c, at shutdown). */
void jobs_index_free(struct jobs *js);
/* The job's document as a tree, made again from its compact bytes or read from the store when
 * it has none (the bytes are then dropped: the tree is the truth again). NULL only when that
 * runs out of memory or the store cannot be read (logged). */
json_t *job_doc(struct job *j);
/* The head of queue q must be read back from the store (job_doc): so are, in the same read
 * transaction, the other jobs among the first queue_trees_per_device of the queue that wait
 * without a tree, whose dispatches come next. Each read of its own began and ended a read
 * transaction and read its pages again (the writer's commits drop a reader's cache): under a
 * backlog that was most of a dispatch's read (bench/store/RESULTS.md). The queue then holds
 * those trees, as one whose jobs were submitted near its head does. With core_lock held. */
void jobs_read_ahead(struct jobs *js, size_t q);
/* A job that is only waiting (queued, committed, nothing pending) gives its tree up: for
 * nothing when the store's row is its document (stored), else for its compact bytes. Leaves
 * the tree when the job must keep it or the dump fails. */
void job_compact(struct job *j);
/* Just submitted, a waiting part of j is among the first queue_trees_per_device of its queue:
 * its dispatch is near, and job_compact would only make job_doc read the tree back from the
 * store for it (a point query under core_lock and a parse: a third of the dispatching thread's
 * time under a submit load). A queue so holds at most that many trees kept this way (each was
 * pushed onto a queue no longer), whatever waits behind them. */
bool job_waits_near_head(struct jobs *js, const struct job *j);
/* Caches client and idempotency_key from the document. 0 or -ENOMEM (the job unchanged). */
int job_cache_keys(struct job *j, const char *client, const char *idempotency_key);
/* Set j's state, keeping its client's count of open jobs. */
void job_state_set(struct jobs *js, struct job *j, enum job_state st);
/* The client's jobs in memory that are not final. */
size_t jobs_open_of(const struct jobs *js, const char *client);
/* The job in memory with this idempotency key and client (NULL: none, or anonymous), or NULL. */
struct job *jobs_find_keyed(struct jobs *js, const char *key, const char *client);
/* job_public() of the job's document, without keeping a tree a compact job does not hold. */
json_t *job_public_of(struct job *j);
json_t *job_now_json(const struct jobs *js);
/* job_query.c: a store read's outcome r for job id as the API says it (0, or a 404 / 500). */
struct problem;
int job_query_store_problem(int r, const char *id, struct problem *p);
json_t *job_part_doc(struct job *j, size_t i);
const char *job_benchmark(struct job *j);
enum job_state job_derive_state(const struct job *j);
/* Moves part i to st (leaving its queue when it was queued), recording result and error when
 * st is final. */
void job_set_part(struct jobs *js, struct job *j, size_t i, enum job_state st, json_t *result,
                  const char *error);
/* Recomputes the job's state and times after its parts changed; true when it just finished. */
bool job_update_state(struct jobs *js, struct job *j);
/* A job reached a final state: counted in metrics. */
void job_finished(struct jobs *js, struct job *j);
/* The generation moved: waiters are told. */
void job_changed(struct jobs *js, const struct job *j);
int job_enqueue(struct jobs *js, struct job *j, size_t i);
/* What clients see: a copy of the stored document less umd's bookkeeping. */
json_t *job_public(const json_t *doc);
/* For job_persist_prune: the jobs at the n (> 0) indices at (sorted here) leave the index and
 * are freed, their gaps closed in one pass. */
void jobs_free_at(struct jobs *js, size_t *at, size_t n);
/* Every job for which drop(js, j) is true leaves the index and is freed (a walk of them all). */
void jobs_sweep(struct jobs *js, bool (*drop)(struct jobs *js, struct job *j));
size_t jobs_queued_total(struct jobs *js);
/* Parts running on every device and the node. */
size_t jobs_running_locked(struct jobs *js);
/* Parts queued for device dev (or the node). */
size_t jobs_queued_on_locked(struct jobs *js, size_t dev);
/* Tells metrics what the queues hold now (metrics never asks). */
void jobs_publish_locked(struct jobs *js);
/* jobs_publish_locked, then core_unlock. */
void jobs_unlock(struct jobs *js);

/* job_recover.c: every unfinished job from the store into the index and the queues, at start
 * (0 or -errno, logged). */
int job_recover_all(struct jobs *js);
/* A job recovered from its columns alone gets the checks every other recovered job had at start,
 * the first time something needs more than its queue entries (a read, a cancel, dispatch) or
 * when jobs_check_recovered reaches it. What it returns replaces j: the same job, checked (it
 * may now be failed), or NULL when its stored document turned out not to be a job at all or
 * could not be read (dropped from memory, as recovery ignores such a row; the store keeps it). */
struct job *job_checked(struct jobs *js, struct job *j);

/* job_dispatch.c */
void job_dispatch_try(struct jobs *js, size_t dev);
void job_dispatch_try_node(struct jobs *js);

/* job_verdict.c: judge a canonical health part; true when it was queued to run once more. */
bool job_verdict_judge(struct jobs *js, struct job *j, size_t i, struct device *d,
                       const json_t *result);
bool job_verdict_judge_node(struct jobs *js, struct job *j, size_t i, const json_t *result);
