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
 * caller can leave them to be marked interrupted rather than cancelled or failed.
 *
 * This file owns the object (start, stop, the calls other threads make) and the events queued for
 * the callbacks; supervisor_proc.c the processes, supervisor_msg.c what workers send,
 * supervisor_loop.c the thread. */
#include "supervisor.h"

#include "config.h"
#include "ipc.h"
#include "log.h"
#include "supervisor_internal.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

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

void supervisor_event_free(struct event *e)
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

void supervisor_set_state(struct supervisor *s, struct slot *w, enum worker_state state,
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

void supervisor_finish_part(struct supervisor *s, struct slot *w, enum part_outcome outcome,
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
        r = supervisor_proc_watch(s, s->efd, TAG_WAKE);
        if (r < 0) {
                log_error_errno(r, "epoll_ctl: %m");
                goto fail;
        }
        s->loop_at = now_monotonic_ms();
        r = -pthread_create(&s->thread, NULL, supervisor_loop_main, s);
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
        supervisor_set_state(s, w, WORKER_STARTING, "starting a worker for job %s", job_id);
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
                        supervisor_proc_kill(w, KILL_SILENT, "not reading its socket");
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
                supervisor_proc_close_channel(s, &s->w[i]);
                supervisor_proc_close_pidfd(s, &s->w[i]);
                free(s->w[i].pending_run);
        }
        while (s->events) {
                struct event *e = s->events;

                s->events = e->next;
                supervisor_event_free(e);
        }
        supervisor_free(s);
}
