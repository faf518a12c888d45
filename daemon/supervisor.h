/* Worker processes: one umd-worker per device, spawned, watched and respawned here. Owns the
 * processes, their socketpairs and a thread that polls them; knows nothing of queues or HTTP.
 * job_dispatch.c hands it one job part at a time per device and hears back through callbacks.
 *
 * Threading: callbacks run on the supervisor thread with no supervisor lock held, so they may
 * call supervisor_dispatch()/supervisor_cancel(). Those two never call a callback themselves. */
#pragma once

#include <jansson.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* What a worker is told it serves (--device): a GPU's uuid, a fake index, or "all". */
#define SUPERVISED_ID_MAX 64

struct umd_config;
struct supervisor;

enum worker_state {
        WORKER_STARTING, /* spawned, hello not yet received */
        WORKER_IDLE,
        WORKER_BUSY,
        WORKER_BACKOFF, /* died; waiting to respawn */
        WORKER_FAULTED, /* max_crashes in a row; respawn attempts continue at the max backoff */
        WORKER_STOPPED,
        WORKER_COLD, /* no process, by design: started when a part is dispatched */
};
const char *worker_state_to_string(enum worker_state s);

/* How a dispatched part ended. */
enum part_outcome {
        PART_SUCCEEDED,
        PART_FAILED,    /* benchmark error, or the worker died mid-job (error says how) */
        PART_TIMED_OUT, /* deadline passed, worker killed */
        PART_CANCELLED,
};

struct supervisor_callbacks {
        /* result: the worker's result object (borrowed; json_incref to keep) or NULL. When the
         * worker wrote it canonically (as its own ipc_encode does) it is a raw node
         * (jsonraw.h) of those bytes, unparsed: json_raw_tree or json_raw_pick reads it. */
        /* cold_start_ms: how long the worker took from spawn to ready when this part had to
         * start it, or a negative number when the part found it warm. */
        /* look: the worker's own look at the GPU right after the part (common/ipc.h: the
         * processes on it; gpustate_others_in_look counts them), borrowed, or NULL. */
        /* seen: what result_paths name in a raw result (json_raw_pick's tree), taken as its
         * frame was checked, borrowed; NULL when result is not raw, no paths were given, or
         * memory ran out (json_raw_pick then reads them). */
        void (*part_done)(void *userdata, size_t device, const char *job_id,
                          enum part_outcome outcome, json_t *result, const json_t *seen,
                          const json_t *look, const char *error, double cold_start_ms);
        /* The worker of `device` changed state (reason: "crashed: signal 11", ...). Called on
         * every change, including becoming idle, when job_dispatch.c starts the next part. */
        void (*worker_state)(void *userdata, size_t device, enum worker_state state,
                             const char *reason);
        void *userdata;
        /* Paths (json_raw_pick's) the caller reads of every raw result, or NULL: picked while
         * the worker's frame is checked, so its bytes are walked once. */
        const char *const *result_paths;
};

/* One entry per device to supervise: the id passed as --device (uuid, or the fake index),
 * and whether it is fake (the worker is then run as --fake N --device ID). Placement: when
 * has_cpus the worker runs on cpus; when numa_node >= 0 its memory comes preferably from that
 * node (set before exec, so the CUDA runtime's pinned host buffers follow it). */
struct supervised_device {
        char id[SUPERVISED_ID_MAX];
        bool fake;
        bool has_cpus;
        cpu_set_t cpus;
        int numa_node;
};

/* Spawn all workers and start the thread. 0 or -errno (logged). */
int supervisor_start(const struct umd_config *cfg, const struct supervised_device *devs, size_t n,
                     const struct supervisor_callbacks *cb, struct supervisor **ret);

/* Workers start cold: none runs until a part is dispatched to its device. An idle worker gives
 * back its pool after cfg->pool_idle_s (the worker's own timer) and exits after
 * cfg->worker_idle_s (this supervisor's), its device going back to WORKER_COLD.
 *
 * Send a job part to an idle or cold worker (a cold one is started and gets the part once it
 * says hello; the deadline counts from now). timeout_ms from now (0 = none). 0, -EBUSY (not
 * idle, or exiting), -ENODEV (not running). params: normalized params (borrowed). A warm
 * worker is WORKER_BUSY once this returns 0, with no worker_state callback saying so (the
 * caller knows); a cold one reports WORKER_STARTING, then WORKER_BUSY after its hello. */
int supervisor_dispatch(struct supervisor *s, size_t device, const char *job_id,
                        const char *benchmark, const json_t *params, uint64_t timeout_ms);
/* Ask the worker to stop the part; kill it after cfg->cancel_grace_ms. part_done follows
 * with PART_CANCELLED. 0 or -ESRCH when that job is not running there. */
int supervisor_cancel(struct supervisor *s, size_t device, const char *job_id);

/* Let the worker of device exit (and its CUDA context go) as soon as it has no part: for a
 * paused device, or a GPU in EXCLUSIVE_PROCESS mode after each part (after_each_part). Its
 * device becomes WORKER_COLD, which is not a crash. after_each_part stays until cleared with
 * supervisor_exit_after_each_part(s, dev, false). */
void supervisor_retire(struct supervisor *s, size_t device);
void supervisor_exit_after_each_part(struct supervisor *s, size_t device, bool on);
/* The worker's pid (0 when none runs), for telling umd's own processes on the GPU apart. */
pid_t supervisor_worker_pid(struct supervisor *s, size_t device);
/* True while the worker runs and has said hello (its context exists). */
bool supervisor_warm(struct supervisor *s, size_t device);

enum worker_state supervisor_state(struct supervisor *s, size_t device);
/* True when every worker that should be running has been heard from within the heartbeat
 * timeout (the systemd watchdog is petted only then). */
bool supervisor_all_alive(struct supervisor *s);
/* Restarts per device since start (metrics). */
unsigned supervisor_restarts(struct supervisor *s, size_t device);
/* Crashes per device since start (an exit at worker_idle_s, a deadline's or a cancel's kill are
 * not crashes). */
unsigned supervisor_crashes(struct supervisor *s, size_t device);
/* Times the thread woke a stall late and forgave the workers the time (supervisor.c's top). */
unsigned supervisor_stalls(struct supervisor *s);

/* Ask every worker to shut down, wait up to timeout_ms, kill the rest, join the thread. */
void supervisor_stop(struct supervisor *s, unsigned timeout_ms);
