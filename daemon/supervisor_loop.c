/* The supervisor's thread: one epoll wait on every worker socket, pidfd and the wake-up
 * eventfd; each round reaps, checks every timer (hello, heartbeat, part deadline, cancel grace,
 * idle release, respawn), forgives a stall of the daemon itself, and delivers the queued events
 * to the callbacks with no lock held. */
#include "ipc.h"
#include "log.h"
#include "supervisor_internal.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

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
                        supervisor_proc_kill(w, KILL_STOP, "did not stop in time");
                else if (w->has_part && w->deadline && now >= w->deadline)
                        supervisor_proc_kill(w, KILL_TIMEOUT,
                                             "job %s passed its deadline of %llu ms", w->job,
                                             (unsigned long long)w->timeout_ms);
                else if (w->has_part && w->cancelling && now >= w->cancel_kill_at)
                        supervisor_proc_kill(w, KILL_CANCEL,
                                             "job %s not stopped %u ms after cancel", w->job,
                                             s->cancel_grace_ms);
                else if (!w->hello && now - w->last_heard >= s->start_timeout_ms)
                        supervisor_proc_kill(w, KILL_SILENT, "no hello within %u ms",
                                             s->start_timeout_ms);
                else if (w->hello && s->heartbeat_timeout_ms &&
                         now - w->last_heard >= s->heartbeat_timeout_ms)
                        supervisor_proc_kill(w, KILL_SILENT, "no heartbeat for %llu ms",
                                             (unsigned long long)(now - w->last_heard));
                else if (w->retiring && now >= w->retire_kill_at)
                        supervisor_proc_kill(w, KILL_RETIRE,
                                             "did not exit %u ms after being let go",
                                             s->cancel_grace_ms);
                else if (retire_due(s, w, now))
                        retire_now(s, w, now);
        }
        if (w->pid == 0 && !s->stopping && w->state != WORKER_STOPPED && w->state != WORKER_COLD &&
            now >= w->respawn_at) {
                if (supervisor_proc_spawn(s, w, now) < 0) {
                        supervisor_finish_part(s, w, PART_FAILED, NULL, NULL, NULL,
                                               "could not start the worker");
                        supervisor_proc_crash_respawn(s, w, now, "could not start the worker");
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
                        supervisor_msg_read(s, &s->w[i], now);
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
                supervisor_event_free(e);
        }
}

void *supervisor_loop_main(void *arg)
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
                        supervisor_proc_reap(s, &s->w[i], now);
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
                        /* A pidfd's wake-up lets the next round's supervisor_proc_reap() look. */
                        if (tag & 1)
                                w->exited = w->pidfd >= 0;
                        else if (w->fd >= 0)
                                supervisor_msg_read(s, w, now);
                }
                pthread_mutex_unlock(&s->lock);
        }
        free(evs);
        return NULL;
}
