/* What the supervisor's files share (supervisor.c, supervisor_proc.c, supervisor_msg.c,
 * supervisor_loop.c): the supervisor object, its worker slots and queued events, and the
 * functions one file calls in another. Nothing outside the supervisor includes it. Every function
 * here but supervisor_loop_main is called with s->lock held, or once the thread is gone
 * (supervisor_stop). */
#pragma once

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ipc.h"
#include "supervisor.h"
#include "uuid.h"

#define POLL_MAX_MS     1000u /* the thread looks at its timers at least this often */
#define REAP_POLL_MS    100u  /* without pidfds, how often to look for dead workers */
#define SEND_TIMEOUT_MS 2000u /* a worker not reading its socket for this long is stuck */
/* One recv from a worker: a result's frame is read in as few calls as are needed. */
#define READ_CHUNK           65536u
#define FAULTED_RETRY_MIN_MS 100u /* retry period of a faulted device, at least */
#define STALL_MIN_MS         250u /* a wake-up no later than this is scheduling, never a stall */

/* What an epoll event is for: the eventfd, or slot i's socket (i << 1) or pidfd (i << 1 | 1). */
#define TAG_WAKE UINT64_MAX

/* A kill's reason, in a log line: room for a job id and a deadline. */
#define SUPERVISOR_KILL_DETAIL_MAX 128

enum kill_reason {
        KILL_NONE,
        KILL_TIMEOUT,  /* part deadline */
        KILL_CANCEL,   /* cancel grace period over */
        KILL_SILENT,   /* no hello or heartbeat in time: a crash */
        KILL_PROTOCOL, /* broke the protocol: a crash */
        KILL_STOP,     /* supervisor_stop timeout */
        KILL_RETIRE,   /* did not exit when retired: not a crash */
};

struct slot {
        struct supervised_device dev;
        enum worker_state state;

        pid_t pid; /* > 0 until reaped */
        int pidfd;
        bool exited; /* its pidfd polled readable: reap() has something to collect */
        int fd;
        struct ipc_decoder dec;
        bool hello;
        uint64_t spawned_at;
        uint64_t last_heard; /* the hello and heartbeat deadlines run from here */
        uint64_t respawn_at;
        bool spawned_once;
        unsigned crashes; /* in a row */
        unsigned crashes_total;
        unsigned restarts;
        enum kill_reason killed;
        char kill_detail[SUPERVISOR_KILL_DETAIL_MAX];

        bool has_part;
        char job[JOB_ID_MAX];
        uint64_t timeout_ms, deadline; /* deadline 0: none */
        bool cancelling;
        uint64_t cancel_kill_at;

        char *pending_run; /* the run message's payload a cold start sends after hello */
        size_t pending_run_len;
        double cold_start_ms; /* of the part in hand; < 0 when it found the worker warm */
        uint64_t idle_since;
        bool retire_requested, exit_after_each_part;
        bool retiring; /* shutdown sent: exits on its own, then WORKER_COLD */
        uint64_t retire_kill_at;
};

struct event {
        struct event *next;
        size_t device;
        bool is_part;
        char job[JOB_ID_MAX];
        enum part_outcome outcome;
        json_t *result;
        json_t *seen; /* what cb.result_paths name in a raw result, or NULL */
        json_t *look; /* the worker's look after the part (common/ipc.h), or NULL */
        char *error;
        double cold_start_ms;
        enum worker_state state;
        char *reason;
};

struct supervisor {
        pthread_mutex_t lock;
        pthread_t thread;
        bool thread_started;
        int efd;
        int epfd; /* efd, and each slot's fd and pidfd while open */

        /* configuration, copied */
        char *worker_path;
        unsigned fake_devices;
        unsigned heartbeat_interval_ms, heartbeat_timeout_ms, start_timeout_ms;
        unsigned max_crashes, backoff_ms, backoff_max_ms, cancel_grace_ms;
        uint64_t max_buffer_bytes, pool_bytes, managed_reserve_bytes;
        uint64_t pool_idle_ms, worker_idle_ms;
        char *fake_gpu_state;
        int log_level;

        struct supervisor_callbacks cb;
        struct slot *w;
        size_t n;

        struct event *events, **events_tail;
        uint64_t loop_at; /* when the thread last went round */
        unsigned stalls;  /* times the thread woke a stall late (see the top) */
        /* When the thread's poll ends at the latest (monotonic): a new timer due no earlier
         * needs no wake-up, the thread sees it when it next goes round. */
        uint64_t wake_at;
        bool stopping;
        uint64_t stop_deadline;
};

/* supervisor.c: the events the thread delivers. */
void supervisor_event_free(struct event *e);
/* Queues a state change for the callbacks (none while stopping); fmt may be NULL. */
void supervisor_set_state(struct supervisor *s, struct slot *w, enum worker_state state,
                          const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Ends the slot's part, queueing its outcome (only PART_SUCCEEDED while stopping). */
void supervisor_finish_part(struct supervisor *s, struct slot *w, enum part_outcome outcome,
                            json_t *result, json_t *seen, json_t *look, const char *error);

/* supervisor_proc.c: the worker processes. */
int supervisor_proc_spawn(struct supervisor *s, struct slot *w, uint64_t now);
void supervisor_proc_kill(struct slot *w, enum kill_reason why, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int supervisor_proc_watch(struct supervisor *s, int fd, uint64_t tag);
void supervisor_proc_close_channel(struct supervisor *s, struct slot *w);
void supervisor_proc_close_pidfd(struct supervisor *s, struct slot *w);
void supervisor_proc_crash_respawn(struct supervisor *s, struct slot *w, uint64_t now,
                                   const char *how);
void supervisor_proc_reap(struct supervisor *s, struct slot *w, uint64_t now);

/* supervisor_msg.c: what a worker sends. */
void supervisor_msg_read(struct supervisor *s, struct slot *w, uint64_t now);

/* supervisor_loop.c: the thread (pthread_create's start routine). */
void *supervisor_loop_main(void *arg);
