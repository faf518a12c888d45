/* Owns the umd-worker processes: spawning one per device, the socketpair to each, heartbeats,
 * per-part deadlines, cancels, reaping, respawning with backoff and marking a device faulted.
 * Knows nothing of queues, the store or HTTP; never touches CUDA.
 *
 * One thread waits on every worker socket, every pidfd and an eventfd (dispatch, cancel and
 * stop wake it), through one epoll set: each is added once, when it is made, not passed to the
 * kernel again at every wait (poll's cost grew with the fds, two a GPU). Every process is forked
 * from that thread, because PR_SET_PDEATHSIG follows the thread that forked: workers die with it,
 * never outlive umd.
 *
 * Callbacks are queued as events under the lock and delivered in order by the thread with no
 * lock held, so part_done always precedes the idle state that follows it.
 *
 * Crashes: a worker that dies on its own, stops answering (heartbeat or hello timeout) or breaks
 * the protocol has crashed. Deadlines and cancels kill workers too, but are not crashes: those
 * respawn at once. A part the worker answered, either way, resets the crash count.
 *
 * Idle release: workers start cold and are spawned by the first part dispatched to them. An idle
 * worker is asked to shut down after worker_idle_s (or at once when retired: a paused device,
 * an EXCLUSIVE_PROCESS GPU); its exit is not a crash and its device goes WORKER_COLD. A worker
 * that does not exit within the cancel grace period is killed, still not a crash.
 *
 * Stalls: silence is judged only after reading what the workers sent. When the thread itself did
 * not run (umd stopped by SIGSTOP or a debugger, the VM paused, a swap storm), heartbeats
 * queued in the sockets meanwhile: every socket is read before any timer is looked at. And when
 * the thread woke far later than it meant to (a quarter of the heartbeat timeout, STALL_MIN_MS at
 * least), the workers may have been stalled with it (a whole-VM pause): every hello and heartbeat
 * deadline restarts from now and part deadlines move by the stall, so time nobody could watch is
 * never taken for a worker's silence and never counts as a crash.
 *
 * Stopping: once supervisor_stop() starts, only PART_SUCCEEDED parts are still reported (a
 * result that arrived is real); parts cut short by the stop are not reported at all, so the
 * caller can leave them to be marked interrupted rather than cancelled or failed. */
#include "supervisor.h"

#include "config.h"
#include "ipc.h"
#include "jsonraw.h"
#include "log.h"
#include "util.h"
#include "uuid.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mempolicy.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define POLL_MAX_MS          1000u /* the thread looks at its timers at least this often */
#define REAP_POLL_MS         100u  /* without pidfds, how often to look for dead workers */
#define SEND_TIMEOUT_MS      2000u /* a worker not reading its socket for this long is stuck */
#define READ_CHUNK           65536u
#define FAULTED_RETRY_MIN_MS 100u /* retry period of a faulted device, at least */
#define STALL_MIN_MS         250u /* a wake-up no later than this is scheduling, never a stall */

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
        char kill_detail[128];

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

const char *worker_state_to_string(enum worker_state s)
{
        /* Log words; the API's device states are devices.c's table. */
        static const char *const names[] = {
            [WORKER_STARTING] = "starting", [WORKER_IDLE] = "idle",
            [WORKER_BUSY] = "busy",         [WORKER_BACKOFF] = "restarting",
            [WORKER_FAULTED] = "faulted",   [WORKER_STOPPED] = "stopped",
            [WORKER_COLD] = "cold",
        };
        return (size_t)s < ELEMENTSOF(names) ? names[s] : "unknown";
}

static void wake(struct supervisor *s)
{
        uint64_t one = 1;

        /* Only fails when the counter is saturated, which already means "wake up". */
        (void)!write(s->efd, &one, sizeof(one));
}

/* --- events (lock held) --- */

static void event_push(struct supervisor *s, struct event *e)
{
        e->next = NULL;
        *s->events_tail = e;
        s->events_tail = &e->next;
}

static void event_free(struct event *e)
{
        if (!e)
                return;
        json_decref(e->result);
        json_decref(e->seen);
        json_decref(e->look);
        free(e->error);
        free(e->reason);
        free(e);
}

static void set_state(struct supervisor *s, struct slot *w, enum worker_state state,
                      const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void set_state(struct supervisor *s, struct slot *w, enum worker_state state,
                      const char *fmt, ...)
{
        struct event *e;
        va_list ap;

        if (w->state == state)
                return;
        w->state = state;
        if (s->stopping)
                return;
        e = calloc(1, sizeof(*e));
        if (!e) {
                log_error("Out of memory: device %zu's change to %s not reported",
                          (size_t)(w - s->w), worker_state_to_string(state));
                return;
        }
        e->device = (size_t)(w - s->w);
        e->state = state;
        if (fmt) {
                va_start(ap, fmt);
                if (vasprintf(&e->reason, fmt, ap) < 0)
                        e->reason = NULL;
                va_end(ap);
        }
        event_push(s, e);
}

static void finish_part(struct supervisor *s, struct slot *w, enum part_outcome outcome,
                        json_t *result, json_t *seen, json_t *look, const char *error)
{
        struct event *e;

        if (!w->has_part)
                return;
        if (!s->stopping || outcome == PART_SUCCEEDED) {
                e = calloc(1, sizeof(*e));
                if (e) {
                        e->device = (size_t)(w - s->w);
                        e->is_part = true;
                        str_copy_cut(e->job, sizeof(e->job), w->job);
                        e->outcome = outcome;
                        e->result = result ? json_incref(result) : NULL;
                        e->seen = result && seen ? json_incref(seen) : NULL;
                        e->look = json_is_object(look) ? json_incref(look) : NULL;
                        e->error = error ? strdup(error) : NULL;
                        e->cold_start_ms = w->cold_start_ms;
                        event_push(s, e);
                } else {
                        log_error("Out of memory: the end of job %s on device %zu not reported",
                                  w->job, (size_t)(w - s->w));
                }
        }
        w->has_part = false;
        w->job[0] = '\0';
        w->deadline = 0;
        w->cancelling = false;
        w->cold_start_ms = -1;
        free(w->pending_run);
        w->pending_run = NULL;
}

/* --- processes --- */

/* Between fork and exec: async-signal-safe calls only. Placement is best effort: a host that
 * refuses it (a cgroup without those CPUs) still runs the worker, which reports where it ran. */
static _Noreturn void child_exec(int fd, pid_t parent, char **argv,
                                 const struct supervised_device *place)
{
        sigset_t none;

        if (place && place->has_cpus)
                (void)sched_setaffinity(0, sizeof(place->cpus), &place->cpus);
        if (place && place->numa_node >= 0 && place->numa_node < 64) {
                unsigned long mask = 1ul << place->numa_node;

                (void)syscall(SYS_set_mempolicy, MPOL_PREFERRED, &mask, 64ul);
        }

        /* Ignored signals stay ignored across exec (SIGPIPE in umd): start the worker clean. */
        for (int sig = 1; sig < NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        signal(sig, SIG_DFL);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                _exit(127);
        /* Whatever another thread opened without O_CLOEXEC must not leak into the worker. */
        (void)close_range(3, ~0u, CLOSE_RANGE_CLOEXEC);
        if (fcntl(fd, F_SETFD, 0) < 0)
                _exit(127);
        execv(argv[0], argv);
        _exit(127);
}

static void kill_worker(struct slot *w, enum kill_reason why, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void kill_worker(struct slot *w, enum kill_reason why, const char *fmt, ...)
{
        va_list ap;

        if (w->pid <= 0 || w->killed != KILL_NONE)
                return;
        w->killed = why;
        va_start(ap, fmt);
        vsnprintf(w->kill_detail, sizeof(w->kill_detail), fmt, ap);
        va_end(ap);
        if (why == KILL_TIMEOUT || why == KILL_CANCEL || why == KILL_STOP || why == KILL_RETIRE)
                log_notice("Device %s: killing worker %d: %s", w->dev.id, (int)w->pid,
                           w->kill_detail);
        else
                log_warning("Device %s: killing worker %d: %s", w->dev.id, (int)w->pid,
                            w->kill_detail);
        if (kill(w->pid, SIGKILL) < 0 && errno != ESRCH)
                log_error_errno(errno, "Device %s: cannot kill worker %d: %m", w->dev.id,
                                (int)w->pid);
}

/* What an epoll event is for: the eventfd, or slot i's socket (i << 1) or pidfd (i << 1 | 1). */
#define TAG_WAKE UINT64_MAX

static int watch(struct supervisor *s, int fd, uint64_t tag)
{
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = tag};

        return epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/* Before fd is closed: a descriptor another process still holds (a child between fork and
 * exec) would stay in the set after its close. */
static void unwatch(struct supervisor *s, int fd)
{
        (void)epoll_ctl(s->epfd, EPOLL_CTL_DEL, fd, NULL);
}

static void close_channel(struct supervisor *s, struct slot *w)
{
        if (w->fd >= 0) {
                unwatch(s, w->fd);
                close(w->fd);
        }
        w->fd = -1;
        ipc_decoder_free(&w->dec);
}

static void close_pidfd(struct supervisor *s, struct slot *w)
{
        if (w->pidfd >= 0) {
                unwatch(s, w->pidfd);
                close(w->pidfd);
        }
        w->pidfd = -1;
}

static void schedule_crash_respawn(struct supervisor *s, struct slot *w, uint64_t now,
                                   const char *how);

static int spawn(struct supervisor *s, struct slot *w, uint64_t now)
{
        char fd_s[16], fake_s[16], hb_s[16], maxb_s[24], pool_s[24], res_s[24], idle_s[24];
        char *argv[28];
        size_t a = 0;
        struct timeval tv = {SEND_TIMEOUT_MS / 1000, (SEND_TIMEOUT_MS % 1000) * 1000};
        int sv[2];
        pid_t pid;

        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                return log_error_errno(errno, "Device %s: socketpair: %m", w->dev.id);

        snprintf(fd_s, sizeof(fd_s), "%d", sv[1]);
        snprintf(hb_s, sizeof(hb_s), "%u", s->heartbeat_interval_ms);
        snprintf(maxb_s, sizeof(maxb_s), "%llu", (unsigned long long)s->max_buffer_bytes);
        snprintf(pool_s, sizeof(pool_s), "%llu", (unsigned long long)s->pool_bytes);
        snprintf(res_s, sizeof(res_s), "%llu", (unsigned long long)s->managed_reserve_bytes);
        snprintf(idle_s, sizeof(idle_s), "%llu", (unsigned long long)s->pool_idle_ms);
        argv[a++] = s->worker_path;
        if (w->dev.fake) {
                unsigned long idx = strtoul(w->dev.id, NULL, 10);
                unsigned n = s->fake_devices > idx ? s->fake_devices : (unsigned)idx + 1;

                snprintf(fake_s, sizeof(fake_s), "%u", n);
                argv[a++] = (char *)"--fake";
                argv[a++] = fake_s;
                if (s->fake_gpu_state) {
                        argv[a++] = (char *)"--fake-state";
                        argv[a++] = s->fake_gpu_state;
                }
        }
        const char *const opts[][2] = {
            {"--device", w->dev.id},
            {"--ipc-fd", fd_s},
            {"--heartbeat-ms", hb_s},
            /* The limits, once for the worker's life: run messages carry none. */
            {"--max-buffer-bytes", maxb_s},
            {"--pool-bytes", pool_s},
            {"--managed-reserve-bytes", res_s},
            {"--pool-idle-ms", idle_s},
            {"--log-level", log_level_to_string(s->log_level)},
        };
        for (size_t o = 0; o < ELEMENTSOF(opts); o++) {
                argv[a++] = (char *)opts[o][0];
                argv[a++] = (char *)opts[o][1];
        }
        argv[a] = NULL;

        pid_t parent = getpid();
        pid = fork();
        if (pid == 0)
                child_exec(sv[1], parent, argv, &w->dev);
        if (pid < 0) {
                int r = log_error_errno(errno, "Device %s: fork: %m", w->dev.id);

                close(sv[0]);
                close(sv[1]);
                return r;
        }
        close(sv[1]);
        /* Sends are blocking (they are small); a worker that stops reading must not hang us. */
        if (setsockopt(sv[0], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
                log_warning_errno(errno, "Device %s: SO_SNDTIMEO: %m", w->dev.id);
        w->fd = sv[0];
        w->pid = pid;
        w->pidfd = pidfd_open(pid, 0);
        w->exited = false;
        if (w->pidfd >= 0 && fcntl(w->pidfd, F_SETFD, FD_CLOEXEC) < 0)
                log_warning_errno(errno, "Device %s: pidfd FD_CLOEXEC: %m", w->dev.id);
        size_t i = (size_t)(w - s->w);
        int r = watch(s, w->fd, (uint64_t)i << 1);
        if (r < 0) {
                /* Unheard, it could only be found silent later: it goes now, as a crash. */
                errno = -r;
                kill_worker(w, KILL_SILENT, "cannot wait on its socket: %m");
        }
        /* Without its pidfd watched, the worker's exit is found as without a pidfd. */
        if (w->pidfd >= 0 && watch(s, w->pidfd, (uint64_t)i << 1 | 1) < 0) {
                close(w->pidfd);
                w->pidfd = -1;
        }
        ipc_decoder_init(&w->dec, IPC_FRAME_MAX);
        w->hello = false;
        w->killed = KILL_NONE;
        w->kill_detail[0] = '\0';
        w->retiring = false;
        w->spawned_at = w->last_heard = now;
        if (w->spawned_once)
                w->restarts++;
        w->spawned_once = true;
        log_info("Device %s: started worker %d", w->dev.id, (int)pid);
        /* A faulted device stays faulted until its new worker says hello. */
        if (w->state != WORKER_FAULTED)
                set_state(s, w, WORKER_STARTING, "worker %d started", (int)pid);
        return 0;
}

static void describe_status(int status, char *buf, size_t len)
{
        if (WIFEXITED(status)) {
                snprintf(buf, len, "worker exited with status %d", WEXITSTATUS(status));
        } else if (WIFSIGNALED(status)) {
                const char *abbrev = sigabbrev_np(WTERMSIG(status));

                if (abbrev)
                        snprintf(buf, len, "worker killed by signal SIG%s", abbrev);
                else
                        snprintf(buf, len, "worker killed by signal %d", WTERMSIG(status));
        } else {
                snprintf(buf, len, "worker ended with status 0x%x", (unsigned)status);
        }
}

static void schedule_crash_respawn(struct supervisor *s, struct slot *w, uint64_t now,
                                   const char *how)
{
        uint64_t delay;
        unsigned shift;

        w->crashes++;
        w->crashes_total++;
        shift = w->crashes - 1 < 31 ? w->crashes - 1 : 31;
        delay = (uint64_t)s->backoff_ms << shift;
        if (delay > s->backoff_max_ms)
                delay = s->backoff_max_ms;
        if (w->crashes >= s->max_crashes) {
                /* Keep trying, slowly: the GPU may come back (a reset, a reloaded driver).
                 * Never in a tight loop, whatever the configuration says. */
                delay = s->backoff_max_ms > FAULTED_RETRY_MIN_MS ? s->backoff_max_ms
                                                                 : FAULTED_RETRY_MIN_MS;
                if (w->state != WORKER_FAULTED)
                        log_error("Device %s: faulted after %u crashes in a row (last: %s)",
                                  w->dev.id, w->crashes, how);
                set_state(s, w, WORKER_FAULTED, "%u crashes in a row, last: %s", w->crashes, how);
        } else {
                set_state(s, w, WORKER_BACKOFF, "crashed: %s; respawning in %llu ms", how,
                          (unsigned long long)delay);
        }
        w->respawn_at = now + delay;
}

/* The worker process is gone (status from waitpid). */
static void on_exit_status(struct supervisor *s, struct slot *w, int status, uint64_t now)
{
        char how[160], err[256];
        enum kill_reason killed = w->killed;
        bool crash;

        describe_status(status, how, sizeof(how));
        if (killed == KILL_SILENT || killed == KILL_PROTOCOL) {
                /* Why we killed it says more than the SIGKILL it died of. */
                snprintf(how, sizeof(how), "%s", w->kill_detail);
        }
        close_channel(s, w);
        close_pidfd(s, w);
        if (killed == KILL_NONE && !s->stopping && !w->retiring)
                log_warning("Device %s: worker %d: %s", w->dev.id, (int)w->pid, how);
        else
                log_info("Device %s: worker %d: %s", w->dev.id, (int)w->pid, how);
        w->pid = 0;
        w->hello = false;
        w->killed = KILL_NONE;

        switch (killed) {
        case KILL_TIMEOUT:
                snprintf(err, sizeof(err), "timed out after %llu ms; worker killed",
                         (unsigned long long)w->timeout_ms);
                finish_part(s, w, PART_TIMED_OUT, NULL, NULL, NULL, err);
                break;
        case KILL_CANCEL:
                finish_part(s, w, PART_CANCELLED, NULL, NULL, NULL,
                            "cancelled; worker killed after the grace period");
                break;
        default:
                if (w->cancelling) {
                        finish_part(s, w, PART_CANCELLED, NULL, NULL, NULL, "cancelled");
                } else {
                        snprintf(err, sizeof(err), "%s", how);
                        finish_part(s, w, PART_FAILED, NULL, NULL, NULL, err);
                }
                break;
        }

        if (s->stopping) {
                set_state(s, w, WORKER_STOPPED, NULL);
                return;
        }
        if (w->retiring && (killed == KILL_NONE || killed == KILL_RETIRE)) {
                /* Asked to go: the GPU is free of umd until the next part. */
                w->retiring = false;
                w->retire_requested = false;
                w->crashes = 0;
                set_state(s, w, WORKER_COLD, "worker exited idle; nothing held on the GPU");
                return;
        }
        w->retiring = false;
        crash = killed == KILL_NONE || killed == KILL_SILENT || killed == KILL_PROTOCOL;
        if (crash) {
                schedule_crash_respawn(s, w, now, how);
        } else {
                w->respawn_at = now;
                if (w->state != WORKER_FAULTED)
                        set_state(s, w, WORKER_BACKOFF, "%s; respawning",
                                  killed == KILL_TIMEOUT ? "killed at its deadline"
                                                         : "killed to cancel its job");
        }
}

static void reap(struct supervisor *s, struct slot *w, uint64_t now)
{
        int status = 0;
        pid_t r;

        /* With a pidfd, only once it said the worker is gone: every round asked the kernel for
         * every worker, three waitpid calls a part under load for nothing. */
        if (w->pid <= 0 || (w->pidfd >= 0 && !w->exited))
                return;
        do
                r = waitpid(w->pid, &status, WNOHANG);
        while (r < 0 && errno == EINTR);
        if (r == 0)
                return;
        if (r < 0) {
                /* ECHILD: it is gone and was reaped for us (SIGCHLD ignored): the status is
                 * lost, so report it as exit status 255. */
                log_warning_errno(errno, "Device %s: waitpid(%d): %m", w->dev.id, (int)w->pid);
                status = 0xff00;
        }
        on_exit_status(s, w, status, now);
}

/* --- messages from a worker (lock held) --- */

static void protocol_error(struct slot *w, const char *what)
{
        kill_worker(w, KILL_PROTOCOL, "worker protocol error: %s", what);
}

/* seen: what cb.result_paths name in a raw result (ipc_decoder_next_pick), or NULL. */
static void handle_msg(struct supervisor *s, struct slot *w, json_t *msg, json_t *seen,
                       uint64_t now)
{
        const char *type = json_string_value(json_object_get(msg, "type"));

        w->last_heard = now;
        if (strcmp(type, "heartbeat") == 0)
                return;
        if (strcmp(type, "hello") == 0) {
                json_t *proto = json_object_get(msg, "protocol");

                if (!json_is_integer(proto) || json_integer_value(proto) != IPC_PROTOCOL_VERSION) {
                        protocol_error(w, "hello with another protocol version");
                        return;
                }
                if (!json_is_object(json_object_get(msg, "device"))) {
                        protocol_error(w, "hello without a device");
                        return;
                }
                if (w->hello) {
                        log_warning("Device %s: ignoring a second hello", w->dev.id);
                        return;
                }
                w->hello = true;
                log_info("Device %s: worker %d ready", w->dev.id, (int)w->pid);
                if (w->pending_run && w->has_part) {
                        int r = ipc_send_payload(w->fd, w->pending_run, w->pending_run_len);

                        free(w->pending_run);
                        w->pending_run = NULL;
                        w->cold_start_ms = (double)(now - w->spawned_at);
                        /* It died after its hello: its exit status (reaped next) says how. */
                        if (r == -EPIPE || r == -ECONNRESET)
                                return;
                        if (r < 0) {
                                kill_worker(w, KILL_SILENT,
                                            "cannot send job %s after a cold "
                                            "start",
                                            w->job);
                                return;
                        }
                        set_state(s, w, WORKER_BUSY, "job %s (cold start %.0f ms)", w->job,
                                  w->cold_start_ms);
                        return;
                }
                w->idle_since = now;
                set_state(s, w, WORKER_IDLE, "worker %d ready", (int)w->pid);
                return;
        }
        if (strcmp(type, "result") == 0) {
                const char *job = json_string_value(json_object_get(msg, "job"));
                json_t *ok = json_object_get(msg, "ok");
                json_t *result = json_object_get(msg, "result");
                const char *error = json_string_value(json_object_get(msg, "error"));
                json_t *look = json_object_get(msg, "look");

                /* An object, or (read_worker) a raw node holding the worker's canonical bytes of
                 * one, not parsed here: job_dispatch.c reads what it needs of them. */
                bool object = json_is_object(result) || json_raw_get(result, NULL, NULL);

                if (!job || !json_is_boolean(ok) || (json_is_true(ok) && !object) ||
                    (!json_is_true(ok) && !error)) {
                        protocol_error(w, "malformed result");
                        return;
                }
                if (!w->has_part || strcmp(job, w->job) != 0) {
                        log_warning("Device %s: ignoring a result for job %s, not running here",
                                    w->dev.id, job);
                        return;
                }
                if (w->killed != KILL_NONE)
                        return; /* decided already: the kill's outcome stands */
                /* The worker answered: it is healthy, whatever the benchmark said. */
                w->crashes = 0;
                if (w->cancelling)
                        finish_part(s, w, PART_CANCELLED, NULL, NULL, look, "cancelled");
                else if (json_is_true(ok))
                        finish_part(s, w, PART_SUCCEEDED, result, seen, look, NULL);
                else
                        finish_part(s, w, PART_FAILED, NULL, NULL, look, error);
                w->idle_since = now;
                if (w->exit_after_each_part)
                        w->retire_requested = true;
                set_state(s, w, WORKER_IDLE, NULL);
                return;
        }
        log_warning("Device %s: ignoring a message of unknown type '%s'", w->dev.id, type);
}

/* A result's object stays the worker's bytes (a raw node), and what the callbacks read of it is
 * picked as the frame is checked. */
static int next_msg(struct supervisor *s, struct slot *w, json_t **ret, json_t **ret_seen)
{
        return ipc_decoder_next_pick(&w->dec, "result", s->cb.result_paths, ret, ret_seen);
}

static void read_worker(struct supervisor *s, struct slot *w, uint64_t now)
{
        static uint8_t buf[READ_CHUNK]; /* only the supervisor thread reads */
        json_t *msg, *seen;
        int r;

        for (;;) {
                ssize_t n = recv(w->fd, buf, sizeof(buf), MSG_DONTWAIT);

                if (n > 0) {
                        if (ipc_decoder_feed(&w->dec, buf, (size_t)n) < 0) {
                                protocol_error(w, "out of memory buffering its messages");
                                close_channel(s, w);
                                return;
                        }
                        if ((size_t)n < sizeof(buf))
                                break;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        break;
                /* EOF or error: the process is exiting; reap() gives the reason. Whatever was
                 * complete before still counts (a result written just before a crash). */
                while (w->dec.len > 0 && next_msg(s, w, &msg, &seen) == 1) {
                        handle_msg(s, w, msg, seen, now);
                        json_decref(msg);
                        json_decref(seen);
                }
                close_channel(s, w);
                return;
        }
        while ((r = next_msg(s, w, &msg, &seen)) == 1) {
                handle_msg(s, w, msg, seen, now);
                json_decref(msg);
                json_decref(seen);
        }
        if (r == -EMSGSIZE)
                protocol_error(w, "frame of a bad size");
        else if (r == -EBADMSG)
                protocol_error(w, "frame that is not a JSON message");
        if (r < 0)
                close_channel(s, w); /* out of step: nothing more from it can be trusted */
}

/* --- idle release (lock held) --- */

static bool retire_due(const struct supervisor *s, const struct slot *w, uint64_t now)
{
        if (w->pid <= 0 || !w->hello || w->has_part || w->retiring || s->stopping ||
            w->state != WORKER_IDLE)
                return false;
        return w->retire_requested || now - w->idle_since >= s->worker_idle_ms;
}

static void retire_now(struct supervisor *s, struct slot *w, uint64_t now)
{
        json_t *msg = json_pack("{s:s}", "type", "shutdown");

        w->retiring = true;
        w->retire_kill_at = now + (s->cancel_grace_ms > 1000 ? s->cancel_grace_ms : 1000);
        log_info("Device %s: letting worker %d go (%s)", w->dev.id, (int)w->pid,
                 w->retire_requested ? "released" : "idle");
        if (!msg || w->fd < 0 || ipc_send(w->fd, msg) < 0)
                w->retire_kill_at = now; /* cannot ask: kill it (still not a crash) */
        json_decref(msg);
}

/* --- the thread --- */

static void check_timers(struct supervisor *s, struct slot *w, uint64_t now)
{
        if (w->pid > 0 && w->killed == KILL_NONE) {
                if (s->stopping && now >= s->stop_deadline)
                        kill_worker(w, KILL_STOP, "did not stop in time");
                else if (w->has_part && w->deadline && now >= w->deadline)
                        kill_worker(w, KILL_TIMEOUT, "job %s passed its deadline of %llu ms",
                                    w->job, (unsigned long long)w->timeout_ms);
                else if (w->has_part && w->cancelling && now >= w->cancel_kill_at)
                        kill_worker(w, KILL_CANCEL, "job %s not stopped %u ms after cancel", w->job,
                                    s->cancel_grace_ms);
                else if (!w->hello && now - w->last_heard >= s->start_timeout_ms)
                        kill_worker(w, KILL_SILENT, "no hello within %u ms", s->start_timeout_ms);
                else if (w->hello && s->heartbeat_timeout_ms &&
                         now - w->last_heard >= s->heartbeat_timeout_ms)
                        kill_worker(w, KILL_SILENT, "no heartbeat for %llu ms",
                                    (unsigned long long)(now - w->last_heard));
                else if (w->retiring && now >= w->retire_kill_at)
                        kill_worker(w, KILL_RETIRE, "did not exit %u ms after being let go",
                                    s->cancel_grace_ms);
                else if (retire_due(s, w, now))
                        retire_now(s, w, now);
        }
        if (w->pid == 0 && !s->stopping && w->state != WORKER_STOPPED && w->state != WORKER_COLD &&
            now >= w->respawn_at) {
                if (spawn(s, w, now) < 0) {
                        finish_part(s, w, PART_FAILED, NULL, NULL, NULL,
                                    "could not start the worker");
                        schedule_crash_respawn(s, w, now, "could not start the worker");
                }
        }
}

static uint64_t next_wakeup(struct supervisor *s, uint64_t now)
{
        uint64_t t = now + POLL_MAX_MS;

#define EARLIER(x)                                                                                 \
        do {                                                                                       \
                if ((x) < t)                                                                       \
                        t = (x);                                                                   \
        } while (0)
        for (size_t i = 0; i < s->n; i++) {
                struct slot *w = &s->w[i];

                if (w->pid > 0) {
                        if (w->pidfd < 0)
                                EARLIER(now + REAP_POLL_MS);
                        if (w->killed != KILL_NONE)
                                continue;
                        if (s->stopping)
                                EARLIER(s->stop_deadline);
                        if (w->has_part && w->deadline)
                                EARLIER(w->deadline);
                        if (w->has_part && w->cancelling)
                                EARLIER(w->cancel_kill_at);
                        if (!w->hello)
                                EARLIER(w->last_heard + s->start_timeout_ms);
                        else if (s->heartbeat_timeout_ms)
                                EARLIER(w->last_heard + s->heartbeat_timeout_ms);
                        if (w->retiring)
                                EARLIER(w->retire_kill_at);
                        else if (w->hello && !w->has_part && w->state == WORKER_IDLE)
                                EARLIER(w->retire_requested ? now
                                                            : w->idle_since + s->worker_idle_ms);
                } else if (!s->stopping && w->state != WORKER_STOPPED && w->state != WORKER_COLD) {
                        EARLIER(w->respawn_at);
                }
        }
#undef EARLIER
        return t > now ? t - now : 0;
}

/* Reads every open worker socket, readable or not: what queued while the thread was away. */
static void drain_all(struct supervisor *s, uint64_t now)
{
        for (size_t i = 0; i < s->n; i++)
                if (s->w[i].fd >= 0)
                        read_worker(s, &s->w[i], now);
}

/* Late enough to be a stall: a quarter of the heartbeat timeout leaves the workers most of it,
 * and a wake-up merely late from load only postpones judging a silence, once. */
static uint64_t stall_threshold_ms(const struct supervisor *s)
{
        return s->heartbeat_timeout_ms / 4 > STALL_MIN_MS ? s->heartbeat_timeout_ms / 4
                                                          : STALL_MIN_MS;
}

/* The thread woke `late` ms after it meant to: nothing was watched meanwhile, so no worker's
 * silence can be judged over that time. Called after drain_all(), before check_timers(). */
static void forgive_stall(struct supervisor *s, uint64_t now, uint64_t late)
{
        s->stalls++;
        log_warning("Supervisor: the daemon did not run for %llu ms (stopped or paused); worker "
                    "heartbeat deadlines restart from now, part deadlines move by as much",
                    (unsigned long long)late);
        for (size_t i = 0; i < s->n; i++) {
                struct slot *w = &s->w[i];

                if (w->pid <= 0 || w->killed != KILL_NONE)
                        continue;
                w->last_heard = now;
                if (w->has_part && w->deadline)
                        w->deadline += late;
                if (w->has_part && w->cancelling)
                        w->cancel_kill_at += late;
                if (w->retiring)
                        w->retire_kill_at += late;
        }
}

static void deliver(struct supervisor *s, struct event *list)
{
        while (list) {
                struct event *e = list;

                list = e->next;
                if (e->is_part && s->cb.part_done)
                        s->cb.part_done(s->cb.userdata, e->device, e->job, e->outcome, e->result,
                                        e->seen, e->look, e->error, e->cold_start_ms);
                else if (!e->is_part && s->cb.worker_state)
                        s->cb.worker_state(s->cb.userdata, e->device, e->state, e->reason);
                event_free(e);
        }
}

static void *supervisor_main(void *arg)
{
        struct supervisor *s = arg;
        size_t max_events = 1 + 2 * s->n;
        struct epoll_event *evs = calloc(max_events, sizeof(*evs));

        if (!evs) {
                log_error("Out of memory: the supervisor thread cannot run");
                return NULL;
        }
        for (;;) {
                struct event *events;
                uint64_t now, timeout;
                bool all_gone = true;
                int n;

                pthread_mutex_lock(&s->lock);
                now = now_monotonic_ms();
                s->loop_at = now;
                if (s->wake_at && now > s->wake_at + stall_threshold_ms(s)) {
                        drain_all(s, now);
                        forgive_stall(s, now, now - s->wake_at);
                }
                for (size_t i = 0; i < s->n; i++) {
                        reap(s, &s->w[i], now);
                        check_timers(s, &s->w[i], now);
                        if (s->w[i].pid > 0)
                                all_gone = false;
                }
                events = s->events;
                s->events = NULL;
                s->events_tail = &s->events;
                if (s->stopping && all_gone) {
                        pthread_mutex_unlock(&s->lock);
                        deliver(s, events);
                        break;
                }
                timeout = next_wakeup(s, now);
                s->wake_at = now + timeout;
                pthread_mutex_unlock(&s->lock);

                /* Callbacks may dispatch or cancel: those only queue work and wake us. */
                deliver(s, events);
                if (events)
                        continue; /* a callback may have changed the timers */

                n = epoll_wait(s->epfd, evs, (int)max_events, (int)timeout);
                if (n < 0 && errno != EINTR) {
                        log_error_errno(errno, "Supervisor epoll_wait: %m");
                        usleep(100 * 1000);
                        continue;
                }

                pthread_mutex_lock(&s->lock);
                now = now_monotonic_ms();
                /* Interrupted (a SIGCONT after a stop): what is readable was not listed. */
                if (n < 0)
                        drain_all(s, now);
                for (int k = 0; k < n; k++) {
                        uint64_t tag = evs[k].data.u64;
                        struct slot *w;

                        if (tag == TAG_WAKE) {
                                uint64_t v;

                                (void)!read(s->efd, &v, sizeof(v));
                                continue;
                        }
                        if ((tag >> 1) >= s->n)
                                continue;
                        w = &s->w[tag >> 1];
                        /* A pidfd's wake-up lets the next round's reap() look. */
                        if (tag & 1)
                                w->exited = w->pidfd >= 0;
                        else if (w->fd >= 0)
                                read_worker(s, w, now);
                }
                pthread_mutex_unlock(&s->lock);
        }
        free(evs);
        return NULL;
}

/* --- public --- */

/* What supervisor_start allocated, once its thread is gone (or never started). */
static void supervisor_free(struct supervisor *s)
{
        if (s->efd >= 0)
                close(s->efd);
        if (s->epfd >= 0)
                close(s->epfd);
        free(s->w);
        free(s->worker_path);
        free(s->fake_gpu_state);
        pthread_mutex_destroy(&s->lock);
        free(s);
}

int supervisor_start(const struct umd_config *cfg, const struct supervised_device *devs, size_t n,
                     const struct supervisor_callbacks *cb, struct supervisor **ret)
{
        struct supervisor *s;
        int r;

        if (!cfg || !ret || (n > 0 && !devs))
                return -EINVAL;
        if (!cfg->worker_path || !*cfg->worker_path)
                return log_error_errno(EINVAL, "No worker program configured (worker_path)");
        if (access(cfg->worker_path, X_OK) < 0)
                return log_error_errno(errno, "Worker program %s: %m", cfg->worker_path);

        s = calloc(1, sizeof(*s));
        if (!s)
                return log_error_errno(ENOMEM, "Out of memory");
        s->efd = -1;
        s->epfd = -1;
        pthread_mutex_init(&s->lock, NULL);
        s->events_tail = &s->events;
        s->worker_path = strdup(cfg->worker_path);
        if (cfg->fake_gpu_state && *cfg->fake_gpu_state)
                s->fake_gpu_state = strdup(cfg->fake_gpu_state);
        s->w = calloc(n ? n : 1, sizeof(*s->w));
        if (!s->worker_path || !s->w) {
                r = log_error_errno(ENOMEM, "Out of memory");
                goto fail;
        }
        s->fake_devices = cfg->fake_devices;
        s->heartbeat_interval_ms = cfg->heartbeat_interval_ms ? cfg->heartbeat_interval_ms : 1000;
        s->heartbeat_timeout_ms = cfg->heartbeat_timeout_ms;
        /* A real worker creates its CUDA context before hello (~0.3 s, more on a busy host). */
        s->start_timeout_ms = cfg->discovery_timeout_ms > s->heartbeat_timeout_ms
                                  ? cfg->discovery_timeout_ms
                                  : s->heartbeat_timeout_ms;
        if (s->start_timeout_ms == 0)
                s->start_timeout_ms = 30000;
        s->max_crashes = cfg->max_crashes ? cfg->max_crashes : 1;
        s->backoff_ms = cfg->respawn_backoff_ms;
        s->backoff_max_ms = cfg->respawn_backoff_max_ms > cfg->respawn_backoff_ms
                                ? cfg->respawn_backoff_max_ms
                                : cfg->respawn_backoff_ms;
        s->cancel_grace_ms = cfg->cancel_grace_ms;
        s->max_buffer_bytes = cfg->max_buffer_bytes;
        s->pool_bytes = cfg->pool_bytes;
        s->managed_reserve_bytes = cfg->managed_reserve_bytes;
        s->pool_idle_ms = (uint64_t)cfg->pool_idle_s * 1000;
        s->worker_idle_ms = (uint64_t)cfg->worker_idle_s * 1000;
        s->log_level = cfg->log_level;
        if (cb)
                s->cb = *cb;
        s->n = n;
        for (size_t i = 0; i < n; i++) {
                s->w[i].dev = devs[i];
                s->w[i].dev.id[sizeof(s->w[i].dev.id) - 1] = '\0';
                /* Nothing runs on a GPU until there is work for it. */
                s->w[i].state = WORKER_COLD;
                s->w[i].pid = 0;
                s->w[i].fd = -1;
                s->w[i].pidfd = -1;
                s->w[i].cold_start_ms = -1;
        }

        s->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (s->efd < 0) {
                r = log_error_errno(errno, "eventfd: %m");
                goto fail;
        }
        s->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (s->epfd < 0) {
                r = log_error_errno(errno, "epoll_create1: %m");
                goto fail;
        }
        r = watch(s, s->efd, TAG_WAKE);
        if (r < 0) {
                log_error_errno(r, "epoll_ctl: %m");
                goto fail;
        }
        s->loop_at = now_monotonic_ms();
        r = -pthread_create(&s->thread, NULL, supervisor_main, s);
        if (r < 0) {
                log_error_errno(r, "Cannot start the supervisor thread: %m");
                goto fail;
        }
        s->thread_started = true;
        pthread_setname_np(s->thread, "umd-supervisor");
        *ret = s;
        return 0;
fail:
        supervisor_free(s);
        return r;
}

static void take_part(struct slot *w, const char *job_id, uint64_t timeout_ms, uint64_t now)
{
        w->has_part = true;
        str_copy_cut(w->job, sizeof(w->job), job_id);
        w->timeout_ms = timeout_ms;
        w->deadline = timeout_ms ? now + timeout_ms : 0;
        w->cancelling = false;
        w->cold_start_ms = -1;
}

/* A cold device: start its worker; the part goes out with hello (handle_msg). Lock held. */
static int dispatch_cold(struct supervisor *s, struct slot *w, const char *job_id,
                         const char *benchmark, const json_t *params, uint64_t timeout_ms)
{
        uint64_t now = now_monotonic_ms();
        size_t len;
        char *msg = ipc_run_payload(job_id, benchmark, params, &len);

        if (!msg)
                return log_error_errno(ENOMEM, "Out of memory");
        /* The supervisor thread forks it (PR_SET_PDEATHSIG follows the forking thread, and the
         * caller's thread may end before the worker should). */
        take_part(w, job_id, timeout_ms, now);
        free(w->pending_run);
        w->pending_run = msg;
        w->pending_run_len = len;
        w->retire_requested = false;
        w->respawn_at = now;
        set_state(s, w, WORKER_STARTING, "starting a worker for job %s", job_id);
        wake(s);
        return 0;
}

int supervisor_dispatch(struct supervisor *s, size_t device, const char *job_id,
                        const char *benchmark, const json_t *params, uint64_t timeout_ms)
{
        struct slot *w;
        char *msg;
        size_t len;
        uint64_t now;
        int r;

        if (!s || !job_id || !benchmark)
                return -EINVAL;
        if (strlen(job_id) >= JOB_ID_MAX)
                return -EINVAL;
        pthread_mutex_lock(&s->lock);
        if (device >= s->n || s->stopping) {
                r = -ENODEV;
                goto out;
        }
        w = &s->w[device];
        if (w->state == WORKER_COLD && w->pid <= 0) {
                r = dispatch_cold(s, w, job_id, benchmark, params, timeout_ms);
                goto out;
        }
        if (w->state != WORKER_IDLE || w->fd < 0 || w->killed != KILL_NONE || w->retiring ||
            w->retire_requested) {
                r = w->state == WORKER_BUSY || w->state == WORKER_STARTING || w->retiring ||
                            w->retire_requested
                        ? -EBUSY
                        : -ENODEV;
                goto out;
        }
        msg = ipc_run_payload(job_id, benchmark, params, &len);
        if (!msg) {
                r = log_error_errno(ENOMEM, "Out of memory");
                goto out;
        }
        r = ipc_send_payload(w->fd, msg, len);
        free(msg);
        now = now_monotonic_ms();
        if (r < 0) {
                log_warning_errno(r, "Device %s: cannot send job %s to the worker: %m", w->dev.id,
                                  job_id);
                if (r == -EAGAIN || r == -EWOULDBLOCK)
                        kill_worker(w, KILL_SILENT, "not reading its socket");
                wake(s);
                r = -ENODEV;
                goto out;
        }
        take_part(w, job_id, timeout_ms, now);
        /* The caller knows the worker is busy (this returns 0): no event says so, and the
         * thread is woken only when the part's deadline comes before its next round. An event
         * and a wake-up for every part cost a round of this thread and of core_lock each. */
        w->state = WORKER_BUSY;
        if (w->deadline && w->deadline < s->wake_at)
                wake(s);
        r = 0;
out:
        pthread_mutex_unlock(&s->lock);
        return r;
}

int supervisor_cancel(struct supervisor *s, size_t device, const char *job_id)
{
        struct slot *w;
        json_t *msg;
        int r = 0;

        if (!s || !job_id)
                return -EINVAL;
        pthread_mutex_lock(&s->lock);
        if (device >= s->n || !s->w[device].has_part || strcmp(s->w[device].job, job_id) != 0) {
                r = -ESRCH;
                goto out;
        }
        w = &s->w[device];
        if (w->cancelling)
                goto out;
        w->cancelling = true;
        w->cancel_kill_at = now_monotonic_ms() + s->cancel_grace_ms;
        msg = json_pack("{s:s, s:s}", "type", "cancel", "job", job_id);
        if (w->fd < 0 || !msg || ipc_send(w->fd, msg) < 0)
                w->cancel_kill_at = now_monotonic_ms(); /* cannot ask: kill at once */
        json_decref(msg);
        wake(s);
out:
        pthread_mutex_unlock(&s->lock);
        return r;
}

void supervisor_retire(struct supervisor *s, size_t device)
{
        if (!s)
                return;
        pthread_mutex_lock(&s->lock);
        if (device < s->n && s->w[device].pid > 0) {
                s->w[device].retire_requested = true;
                wake(s);
        }
        pthread_mutex_unlock(&s->lock);
}

void supervisor_exit_after_each_part(struct supervisor *s, size_t device, bool on)
{
        if (!s)
                return;
        pthread_mutex_lock(&s->lock);
        if (device < s->n && s->w[device].exit_after_each_part != on) {
                s->w[device].exit_after_each_part = on;
                if (on && s->w[device].pid > 0 && !s->w[device].has_part)
                        s->w[device].retire_requested = true;
                wake(s);
        }
        pthread_mutex_unlock(&s->lock);
}

pid_t supervisor_worker_pid(struct supervisor *s, size_t device)
{
        pid_t pid = 0;

        if (!s)
                return 0;
        pthread_mutex_lock(&s->lock);
        if (device < s->n && s->w[device].pid > 0)
                pid = s->w[device].pid;
        pthread_mutex_unlock(&s->lock);
        return pid;
}

bool supervisor_warm(struct supervisor *s, size_t device)
{
        bool warm = false;

        if (!s)
                return false;
        pthread_mutex_lock(&s->lock);
        if (device < s->n)
                warm = s->w[device].pid > 0 && s->w[device].hello && !s->w[device].retiring;
        pthread_mutex_unlock(&s->lock);
        return warm;
}

enum worker_state supervisor_state(struct supervisor *s, size_t device)
{
        enum worker_state st;

        if (!s)
                return WORKER_STOPPED;
        pthread_mutex_lock(&s->lock);
        st = device < s->n ? s->w[device].state : WORKER_STOPPED;
        pthread_mutex_unlock(&s->lock);
        return st;
}

bool supervisor_all_alive(struct supervisor *s)
{
        uint64_t now = now_monotonic_ms(), limit;
        bool alive = true;

        if (!s)
                return false;
        pthread_mutex_lock(&s->lock);
        limit = s->heartbeat_timeout_ms ? s->heartbeat_timeout_ms : 10u * POLL_MAX_MS;
        /* The thread itself must be going round, or nothing it watches is watched. */
        if (now - s->loop_at > limit + POLL_MAX_MS)
                alive = false;
        for (size_t i = 0; alive && i < s->n; i++) {
                const struct slot *w = &s->w[i];

                /* Dead and faulted workers are being handled: that is not umd hanging. */
                if (w->pid <= 0)
                        continue;
                if (!w->hello)
                        alive = now - w->last_heard <= s->start_timeout_ms;
                else
                        alive = now - w->last_heard <= limit;
        }
        pthread_mutex_unlock(&s->lock);
        return alive;
}

unsigned supervisor_restarts(struct supervisor *s, size_t device)
{
        unsigned n;

        if (!s)
                return 0;
        pthread_mutex_lock(&s->lock);
        n = device < s->n ? s->w[device].restarts : 0;
        pthread_mutex_unlock(&s->lock);
        return n;
}

unsigned supervisor_stalls(struct supervisor *s)
{
        unsigned n;

        if (!s)
                return 0;
        pthread_mutex_lock(&s->lock);
        n = s->stalls;
        pthread_mutex_unlock(&s->lock);
        return n;
}

unsigned supervisor_crashes(struct supervisor *s, size_t device)
{
        unsigned n;

        if (!s)
                return 0;
        pthread_mutex_lock(&s->lock);
        n = device < s->n ? s->w[device].crashes_total : 0;
        pthread_mutex_unlock(&s->lock);
        return n;
}

void supervisor_stop(struct supervisor *s, unsigned timeout_ms)
{
        json_t *msg;

        if (!s)
                return;
        pthread_mutex_lock(&s->lock);
        s->stopping = true;
        s->stop_deadline = now_monotonic_ms() + timeout_ms;
        msg = json_pack("{s:s}", "type", "shutdown");
        for (size_t i = 0; i < s->n; i++) {
                struct slot *w = &s->w[i];

                if (w->fd >= 0 && msg && ipc_send(w->fd, msg) < 0)
                        log_debug("Device %s: cannot send shutdown", w->dev.id);
                if (w->pid <= 0)
                        w->state = WORKER_STOPPED;
        }
        json_decref(msg);
        wake(s);
        pthread_mutex_unlock(&s->lock);

        if (s->thread_started)
                pthread_join(s->thread, NULL);

        for (size_t i = 0; i < s->n; i++) {
                close_channel(s, &s->w[i]);
                close_pidfd(s, &s->w[i]);
                free(s->w[i].pending_run);
        }
        while (s->events) {
                struct event *e = s->events;

                s->events = e->next;
                event_free(e);
        }
        supervisor_free(s);
}
