/* The supervisor's worker processes: forking and exec'ing one (placed on its GPU's CPUs and
 * memory node), killing it with a reason, watching its socket and pidfd in the thread's epoll
 * set, reaping it, and what its exit means: a crash (respawned with backoff, faulted after
 * max_crashes in a row), a kill for a deadline or a cancel (respawned at once), or an idle worker
 * let go (WORKER_COLD). Called on the supervisor thread, with the lock held. */
#include "config.h"
#include "ipc.h"
#include "log.h"
#include "supervisor_internal.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mempolicy.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* A number as a worker's argument: a descriptor, a count or milliseconds (up to 10 digits). */
#define ARG_SMALL_MAX 16
/* A byte count as a worker's argument (up to 20 digits). */
#define ARG_BYTES_MAX 24
/* The worker's argv: its path, --fake N --fake-state PATH, eight options with their values,
 * the terminator, and room to spare. */
#define WORKER_ARGV_MAX 28
/* How a worker ended, in words ("worker killed by signal SIGSEGV"), or a kill's reason. */
#define EXIT_HOW_MAX 160
/* A part's error after its worker ended: how, or the deadline it passed. */
#define EXIT_ERR_MAX 256

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

void supervisor_proc_kill(struct slot *w, enum kill_reason why, const char *fmt, ...)
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

int supervisor_proc_watch(struct supervisor *s, int fd, uint64_t tag)
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

void supervisor_proc_close_channel(struct supervisor *s, struct slot *w)
{
        if (w->fd >= 0) {
                unwatch(s, w->fd);
                close(w->fd);
        }
        w->fd = -1;
        ipc_decoder_free(&w->dec);
}

void supervisor_proc_close_pidfd(struct supervisor *s, struct slot *w)
{
        if (w->pidfd >= 0) {
                unwatch(s, w->pidfd);
                close(w->pidfd);
        }
        w->pidfd = -1;
}

int supervisor_proc_spawn(struct supervisor *s, struct slot *w, uint64_t now)
{
        char fd_s[ARG_SMALL_MAX], fake_s[ARG_SMALL_MAX], hb_s[ARG_SMALL_MAX];
        char maxb_s[ARG_BYTES_MAX], pool_s[ARG_BYTES_MAX], res_s[ARG_BYTES_MAX],
            idle_s[ARG_BYTES_MAX];
        char *argv[WORKER_ARGV_MAX];
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
        int r = supervisor_proc_watch(s, w->fd, (uint64_t)i << 1);
        if (r < 0) {
                /* Unheard, it could only be found silent later: it goes now, as a crash. */
                errno = -r;
                supervisor_proc_kill(w, KILL_SILENT, "cannot wait on its socket: %m");
        }
        /* Without its pidfd watched, the worker's exit is found as without a pidfd. */
        if (w->pidfd >= 0 && supervisor_proc_watch(s, w->pidfd, (uint64_t)i << 1 | 1) < 0) {
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
                supervisor_set_state(s, w, WORKER_STARTING, "worker %d started", (int)pid);
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

void supervisor_proc_crash_respawn(struct supervisor *s, struct slot *w, uint64_t now,
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
                supervisor_set_state(s, w, WORKER_FAULTED, "%u crashes in a row, last: %s",
                                     w->crashes, how);
        } else {
                supervisor_set_state(s, w, WORKER_BACKOFF, "crashed: %s; respawning in %llu ms",
                                     how, (unsigned long long)delay);
        }
        w->respawn_at = now + delay;
}

/* The worker process is gone (status from waitpid). */
static void on_exit_status(struct supervisor *s, struct slot *w, int status, uint64_t now)
{
        char how[EXIT_HOW_MAX], err[EXIT_ERR_MAX];
        enum kill_reason killed = w->killed;
        bool crash;

        describe_status(status, how, sizeof(how));
        if (killed == KILL_SILENT || killed == KILL_PROTOCOL) {
                /* Why we killed it says more than the SIGKILL it died of. */
                snprintf(how, sizeof(how), "%s", w->kill_detail);
        }
        supervisor_proc_close_channel(s, w);
        supervisor_proc_close_pidfd(s, w);
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
                supervisor_finish_part(s, w, PART_TIMED_OUT, NULL, NULL, NULL, err);
                break;
        case KILL_CANCEL:
                supervisor_finish_part(s, w, PART_CANCELLED, NULL, NULL, NULL,
                                       "cancelled; worker killed after the grace period");
                break;
        default:
                if (w->cancelling) {
                        supervisor_finish_part(s, w, PART_CANCELLED, NULL, NULL, NULL, "cancelled");
                } else {
                        snprintf(err, sizeof(err), "%s", how);
                        supervisor_finish_part(s, w, PART_FAILED, NULL, NULL, NULL, err);
                }
                break;
        }

        if (s->stopping) {
                supervisor_set_state(s, w, WORKER_STOPPED, NULL);
                return;
        }
        if (w->retiring && (killed == KILL_NONE || killed == KILL_RETIRE)) {
                /* Asked to go: the GPU is free of umd until the next part. */
                w->retiring = false;
                w->retire_requested = false;
                w->crashes = 0;
                supervisor_set_state(s, w, WORKER_COLD,
                                     "worker exited idle; nothing held on the GPU");
                return;
        }
        w->retiring = false;
        crash = killed == KILL_NONE || killed == KILL_SILENT || killed == KILL_PROTOCOL;
        if (crash) {
                supervisor_proc_crash_respawn(s, w, now, how);
        } else {
                w->respawn_at = now;
                if (w->state != WORKER_FAULTED)
                        supervisor_set_state(s, w, WORKER_BACKOFF, "%s; respawning",
                                             killed == KILL_TIMEOUT ? "killed at its deadline"
                                                                    : "killed to cancel its job");
        }
}

void supervisor_proc_reap(struct supervisor *s, struct slot *w, uint64_t now)
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
