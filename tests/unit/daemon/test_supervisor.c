/* The supervisor against the real `umd-worker --fake` (path in $UMD_WORKER): a job succeeds, a
 * crash fails the part with its signal and the worker comes back, a hang is killed at its
 * deadline and the next part runs, a cancel is honoured by the worker or forced by SIGKILL,
 * and repeated crashes fault the device until a worker comes back. Workers start cold: the
 * first part starts one (and says how long that took), and an idle one exits after
 * worker_idle_s, or at once when retired, without counting as a crash. A stall of the whole
 * process (this one stops itself with SIGSTOP, a helper sends SIGCONT), with or without its
 * workers stopped too, fails no part and counts no crash. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "config.h"
#include "jsonraw.h"
#include "supervisor.h"
#include "util.h"

#define WAIT_MS 10000

struct part {
        size_t device;
        char job[64];
        enum part_outcome outcome;
        json_t *result;
        bool raw; /* the result came as the worker's bytes (a raw node) */
        /* what PATHS name in it, picked as the frame was checked, and read again here from the
         * bytes (json_raw_pick): the two must agree */
        json_t *seen, *picked_again;
        char error[256];
        double cold_start_ms;
};

struct rec {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        struct part parts[64];
        size_t n_parts;
        enum worker_state state[4];
        unsigned entered[4][WORKER_COLD + 1]; /* times each device entered each state */
        char reason[4][256];
};

static struct rec rec;
static struct umd_config cfg;

static const char *const PATHS[] = {"benchmark", "measurements[].name", "measurements[].gbps",
                                    NULL};

static void on_part(void *userdata, size_t device, const char *job_id, enum part_outcome outcome,
                    json_t *result, const json_t *seen, const json_t *look, const char *error,
                    double cold_start_ms)
{
        struct rec *r = userdata;

        pthread_mutex_lock(&r->lock);
        if (r->n_parts < 64) {
                struct part *p = &r->parts[r->n_parts++];

                p->device = device;
                snprintf(p->job, sizeof(p->job), "%s", job_id);
                p->outcome = outcome;
                /* A canonical result comes as its bytes (a raw node): read as a tree here. */
                p->raw = json_raw_get(result, NULL, NULL);
                p->result = result ? json_raw_tree(result) : NULL;
                p->seen = seen ? json_deep_copy(seen) : NULL;
                p->picked_again = p->raw ? json_raw_pick(result, PATHS) : NULL;
                snprintf(p->error, sizeof(p->error), "%s", error ? error : "");
                p->cold_start_ms = cold_start_ms;
        }
        pthread_cond_broadcast(&r->cond);
        pthread_mutex_unlock(&r->lock);
}

static void on_state(void *userdata, size_t device, enum worker_state state, const char *reason)
{
        struct rec *r = userdata;

        pthread_mutex_lock(&r->lock);
        if (device < 4) {
                r->state[device] = state;
                r->entered[device][state]++;
                snprintf(r->reason[device], sizeof(r->reason[device]), "%s", reason ? reason : "");
        }
        pthread_cond_broadcast(&r->cond);
        pthread_mutex_unlock(&r->lock);
}

/* Waits until device has entered `state` at least `times` times in all. */
static void wait_entered(size_t device, enum worker_state state, unsigned times)
{
        struct timespec ts;
        int r = 0;

        deadline_after_ms(CLOCK_REALTIME, WAIT_MS, &ts); /* the cond's default clock */
        pthread_mutex_lock(&rec.lock);
        while (rec.entered[device][state] < times && r == 0)
                r = pthread_cond_timedwait(&rec.cond, &rec.lock, &ts);
        pthread_mutex_unlock(&rec.lock);
        if (r != 0)
                fail_msg("device %zu never became %s (x%u)", device, worker_state_to_string(state),
                         times);
}

/* Waits for the part of job_id and returns a copy of it. */
static struct part wait_part(const char *job_id)
{
        struct timespec ts;
        struct part p = {0};
        bool found = false;
        int r = 0;

        deadline_after_ms(CLOCK_REALTIME, WAIT_MS, &ts); /* the cond's default clock */
        pthread_mutex_lock(&rec.lock);
        while (!found && r == 0) {
                for (size_t i = 0; i < rec.n_parts; i++)
                        if (strcmp(rec.parts[i].job, job_id) == 0) {
                                p = rec.parts[i];
                                found = true;
                        }
                if (!found)
                        r = pthread_cond_timedwait(&rec.cond, &rec.lock, &ts);
        }
        pthread_mutex_unlock(&rec.lock);
        if (!found)
                fail_msg("job %s never ended", job_id);
        return p;
}

static unsigned entered(size_t device, enum worker_state state)
{
        unsigned n;

        pthread_mutex_lock(&rec.lock);
        n = rec.entered[device][state];
        pthread_mutex_unlock(&rec.lock);
        return n;
}

static uint64_t now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int setup(void **state)
{
        const char *worker = getenv("UMD_WORKER");

        if (!worker || access(worker, X_OK) < 0) {
                fprintf(stderr, "UMD_WORKER must name the umd-worker binary\n");
                return -1;
        }
        for (size_t i = 0; i < rec.n_parts; i++) {
                json_decref(rec.parts[i].result);
                json_decref(rec.parts[i].seen);
                json_decref(rec.parts[i].picked_again);
        }
        memset(&rec, 0, sizeof(rec));
        pthread_mutex_init(&rec.lock, NULL);
        pthread_cond_init(&rec.cond, NULL);
        config_init(&cfg);
        free(cfg.worker_path);
        cfg.worker_path = strdup(worker);
        cfg.fake_devices = 2;
        cfg.heartbeat_interval_ms = 100;
        cfg.heartbeat_timeout_ms = 3000;
        cfg.max_crashes = 3;
        cfg.respawn_backoff_ms = 50;
        cfg.respawn_backoff_max_ms = 200;
        cfg.cancel_grace_ms = 300;
        return 0;
}

static int teardown(void **state)
{
        config_free(&cfg);
        return 0;
}

static struct supervisor *start_cold(size_t n)
{
        struct supervised_device devs[2] = {{.id = "0", .fake = true}, {.id = "1", .fake = true}};
        struct supervisor_callbacks cb = {
            .part_done = on_part,
            .worker_state = on_state,
            .userdata = &rec,
            .result_paths = PATHS,
        };
        struct supervisor *s = NULL;

        assert_int_equal(supervisor_start(&cfg, devs, n, &cb, &s), 0);
        assert_non_null(s);
        for (size_t i = 0; i < n; i++)
                assert_int_equal(supervisor_state(s, i), WORKER_COLD);
        return s;
}

/* Started and warmed: one short part on each device, so each is idle once with a worker. */
static struct supervisor *start(size_t n)
{
        struct supervisor *s = start_cold(n);
        json_t *ok = json_pack("{s:i}", "iterations", 1);

        for (size_t i = 0; i < n; i++) {
                char job[32];

                snprintf(job, sizeof(job), "warm-%zu", i);
                assert_int_equal(supervisor_dispatch(s, i, job, "copy", ok, 5000), 0);
                assert_int_equal(wait_part(job).outcome, PART_SUCCEEDED);
                wait_entered(i, WORKER_IDLE, 1);
        }
        json_decref(ok);
        return s;
}

/* Device 0's worker came back (idle a second time) after `restarts` restarts, never faulted. */
static void assert_respawned(struct supervisor *s, unsigned restarts)
{
        wait_entered(0, WORKER_IDLE, 2);
        assert_int_equal(supervisor_restarts(s, 0), restarts);
        assert_int_equal(entered(0, WORKER_FAULTED), 0);
}

/* A short job on device 0 succeeds: the worker there works. */
static void assert_job_succeeds(struct supervisor *s, const char *job_id)
{
        json_t *ok = json_pack("{s:i}", "iterations", 2);

        assert_int_equal(supervisor_dispatch(s, 0, job_id, "copy", ok, 5000), 0);
        assert_int_equal(wait_part(job_id).outcome, PART_SUCCEEDED);
        json_decref(ok);
}

static void test_job_succeeds_on_each_device(void **state)
{
        struct supervisor *s = start(2);
        json_t *params = json_pack("{s:i, s:i}", "size", 1 << 20, "iterations", 3);
        /* job-a runs long enough for the second dispatch to find the worker busy. */
        json_t *slow =
            json_pack("{s:i, s:i, s:i}", "size", 1 << 20, "iterations", 3, "fake_delay_ms", 1000);
        struct part p;

        assert_true(supervisor_all_alive(s));
        assert_int_equal(supervisor_dispatch(s, 0, "job-a", "copy", slow, 5000), 0);
        assert_int_equal(supervisor_dispatch(s, 1, "job-b", "zero_copy", params, 5000), 0);
        /* one part at a time per worker */
        assert_int_equal(supervisor_dispatch(s, 0, "job-c", "copy", params, 5000), -EBUSY);
        assert_int_equal(supervisor_dispatch(s, 5, "job-c", "copy", params, 5000), -ENODEV);
        assert_int_equal(supervisor_cancel(s, 1, "job-a"), -ESRCH);

        p = wait_part("job-a");
        assert_int_equal(p.outcome, PART_SUCCEEDED);
        assert_int_equal(p.device, 0);
        assert_non_null(p.result);
        assert_true(p.raw);      /* umd-worker writes its frames canonically: kept as bytes */
        assert_non_null(p.seen); /* and what result_paths name was picked on the way */
        assert_true(json_equal(p.seen, p.picked_again));
        assert_string_equal(json_string_value(json_object_get(p.seen, "benchmark")), "copy");
        assert_true(json_is_true(json_object_get(p.result, "fake")));
        assert_string_equal(
            json_string_value(json_object_get(
                json_array_get(json_object_get(p.result, "measurements"), 0), "name")),
            "h2d");
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(p.result, "context"), "device_uuid")),
            "GPU-fa4e0000-0000-4000-8000-000000000000");
        p = wait_part("job-b");
        assert_int_equal(p.outcome, PART_SUCCEEDED);
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(p.result, "context"), "device_uuid")),
            "GPU-fa4e0000-0000-4000-8000-000000000001");
        wait_entered(0, WORKER_IDLE, 2);

        /* a benchmark error is a failed part from a healthy worker */
        assert_int_equal(supervisor_dispatch(s, 0, "job-d", "system_memory", params, 5000), 0);
        p = wait_part("job-d");
        assert_int_equal(p.outcome, PART_FAILED);
        assert_non_null(strstr(p.error, "pageableMemoryAccess"));
        assert_int_equal(supervisor_restarts(s, 0), 0);
        json_decref(params);
        json_decref(slow);
        supervisor_stop(s, 2000);
}

/* The worker's limits reach it one way, on its argv at spawn (a run message carries none),
 * and it refuses a size over max_buffer_bytes, naming the limit. */
static void test_max_buffer_bytes_reaches_the_worker_on_argv(void **state)
{
        struct supervisor *s;
        json_t *big = json_pack("{s:i, s:i}", "size", 2 << 20, "iterations", 3);
        json_t *small = json_pack("{s:i, s:i}", "size", 1 << 20, "iterations", 3);
        struct part p;

        cfg.max_buffer_bytes = 1 << 20;
        s = start_cold(1); /* start() warms up with the default size, over this limit */
        assert_int_equal(supervisor_dispatch(s, 0, "job-big", "copy", big, 5000), 0);
        p = wait_part("job-big");
        assert_int_equal(p.outcome, PART_FAILED);
        assert_string_equal(p.error, "size 2097152 bytes is over the limit of 1048576 bytes "
                                     "(max_buffer_bytes)");
        wait_entered(0, WORKER_IDLE, 1);
        assert_int_equal(supervisor_dispatch(s, 0, "job-small", "copy", small, 5000), 0);
        p = wait_part("job-small");
        assert_int_equal(p.outcome, PART_SUCCEEDED);
        assert_int_equal(supervisor_restarts(s, 0), 0);
        json_decref(big);
        json_decref(small);
        supervisor_stop(s, 2000);
}

static void test_crash_fails_part_and_respawns(void **state)
{
        struct supervisor *s = start(1);
        json_t *crash = json_pack("{s:b}", "fake_crash", 1);
        struct part p;

        assert_int_equal(supervisor_dispatch(s, 0, "job-crash", "copy", crash, 5000), 0);
        p = wait_part("job-crash");
        assert_int_equal(p.outcome, PART_FAILED);
        assert_string_equal(p.error, "worker killed by signal SIGABRT");
        wait_entered(0, WORKER_BACKOFF, 1);
        assert_respawned(s, 1);

        /* the respawned worker runs jobs */
        assert_job_succeeds(s, "job-after");
        json_decref(crash);
        supervisor_stop(s, 2000);
}

/* The process's open descriptors (its own count in /proc). */
static size_t open_fds(void)
{
        DIR *d = opendir("/proc/self/fd");
        size_t n = 0;

        assert_non_null(d);
        while (readdir(d))
                n++;
        closedir(d);
        return n;
}

/* A worker's socket and pidfd are given up with it, and its successor is heard all the same:
 * four crashes and respawns leave the descriptors as they were. */
static void test_respawns_leave_no_descriptor_behind(void **state)
{
        struct supervisor *s = start(1);
        json_t *crash = json_pack("{s:b}", "fake_crash", 1);
        size_t before = open_fds();

        /* Each worker that comes up, and each part it ends, enters idle once: start() left 1. */
        unsigned idle = 1;

        for (unsigned i = 1; i <= 4; i++) {
                char job[32];

                snprintf(job, sizeof(job), "crash-%u", i);
                assert_int_equal(supervisor_dispatch(s, 0, job, "copy", crash, 5000), 0);
                assert_int_equal(wait_part(job).outcome, PART_FAILED);
                wait_entered(0, WORKER_IDLE, ++idle); /* the next worker is ready */
                snprintf(job, sizeof(job), "after-%u", i);
                assert_job_succeeds(s, job); /* also resets the crash count */
                wait_entered(0, WORKER_IDLE, ++idle);
        }
        assert_int_equal(supervisor_restarts(s, 0), 4);
        assert_int_equal(open_fds(), before);
        json_decref(crash);
        supervisor_stop(s, 2000);
}

static void test_hang_times_out_and_next_part_runs(void **state)
{
        struct supervisor *s;
        json_t *hang = json_pack("{s:b}", "fake_hang", 1);
        uint64_t t0;
        struct part p;

        /* one crash would fault the device: a timeout must not count as one */
        cfg.max_crashes = 1;
        s = start(1);
        t0 = now_ms();
        assert_int_equal(supervisor_dispatch(s, 0, "job-hang", "copy", hang, 300), 0);
        p = wait_part("job-hang");
        assert_int_equal(p.outcome, PART_TIMED_OUT);
        assert_true(now_ms() - t0 >= 300);
        assert_true(now_ms() - t0 < 3000);
        assert_non_null(strstr(p.error, "timed out"));
        assert_respawned(s, 1);

        assert_job_succeeds(s, "job-next");
        json_decref(hang);
        supervisor_stop(s, 2000);
}

static void test_cancel_is_honoured_by_the_worker(void **state)
{
        struct supervisor *s = start(1);
        json_t *slow = json_pack("{s:i}", "fake_delay_ms", 20000);
        uint64_t t0;
        struct part p;

        assert_int_equal(supervisor_dispatch(s, 0, "job-slow", "copy", slow, 60000), 0);
        usleep(100 * 1000);
        t0 = now_ms();
        assert_int_equal(supervisor_cancel(s, 0, "job-slow"), 0);
        p = wait_part("job-slow");
        assert_int_equal(p.outcome, PART_CANCELLED);
        /* well inside the grace period: the worker stopped, nobody was killed */
        assert_true(now_ms() - t0 < cfg.cancel_grace_ms);
        wait_entered(0, WORKER_IDLE, 2);
        assert_int_equal(supervisor_restarts(s, 0), 0);
        json_decref(slow);
        supervisor_stop(s, 2000);
}

static void test_cancel_of_a_hung_worker_kills_it(void **state)
{
        struct supervisor *s;
        json_t *hang = json_pack("{s:b}", "fake_hang", 1);
        uint64_t t0;
        struct part p;

        cfg.max_crashes = 1; /* a cancel must not count as a crash */
        s = start(1);

        assert_int_equal(supervisor_dispatch(s, 0, "job-stuck", "copy", hang, 60000), 0);
        usleep(50 * 1000);
        t0 = now_ms();
        assert_int_equal(supervisor_cancel(s, 0, "job-stuck"), 0);
        p = wait_part("job-stuck");
        assert_int_equal(p.outcome, PART_CANCELLED);
        assert_true(now_ms() - t0 >= cfg.cancel_grace_ms);
        /* killed and respawned, but a cancel is not a crash: never faulted */
        assert_respawned(s, 1);
        json_decref(hang);
        supervisor_stop(s, 2000);
}

static void test_repeated_crashes_fault_then_recover(void **state)
{
        struct supervisor *s;
        json_t *crash = json_pack("{s:b}", "fake_crash", 1);
        json_t *ok = json_pack("{s:i}", "iterations", 2);
        char job[32];
        struct part p;

        cfg.max_crashes = 2;
        s = start(1);
        for (unsigned i = 0; i < 2; i++) {
                snprintf(job, sizeof(job), "job-crash-%u", i);
                wait_entered(0, WORKER_IDLE, i + 1);
                assert_int_equal(supervisor_dispatch(s, 0, job, "copy", crash, 5000), 0);
                p = wait_part(job);
                assert_int_equal(p.outcome, PART_FAILED);
        }
        wait_entered(0, WORKER_FAULTED, 1);
        assert_int_equal(supervisor_state(s, 0), WORKER_FAULTED);
        assert_int_equal(supervisor_dispatch(s, 0, "job-refused", "copy", ok, 5000), -ENODEV);
        pthread_mutex_lock(&rec.lock);
        assert_non_null(strstr(rec.reason[0], "2 crashes in a row"));
        pthread_mutex_unlock(&rec.lock);

        /* respawning goes on at the max backoff: the worker comes back and works */
        wait_entered(0, WORKER_IDLE, 3);
        assert_job_succeeds(s, "job-recovered");
        json_decref(crash);
        json_decref(ok);
        supervisor_stop(s, 2000);
}

static void test_silent_worker_is_killed_as_a_crash(void **state)
{
        struct supervisor *s;

        /* heartbeats every 2 s against a 250 ms timeout: every worker looks hung after hello */
        cfg.heartbeat_interval_ms = 2000;
        cfg.heartbeat_timeout_ms = 250;
        cfg.max_crashes = 2;
        s = start_cold(1);
        assert_int_equal(supervisor_dispatch(s, 0, "job-slow", "copy", NULL, 0), 0);
        wait_entered(0, WORKER_FAULTED, 1);
        pthread_mutex_lock(&rec.lock);
        assert_non_null(strstr(rec.reason[0], "no heartbeat for"));
        pthread_mutex_unlock(&rec.lock);
        assert_true(supervisor_restarts(s, 0) >= 1);
        supervisor_stop(s, 2000);
}

static void test_stop_ends_a_busy_worker(void **state)
{
        struct supervisor *s = start(1);
        json_t *hang = json_pack("{s:b}", "fake_hang", 1);
        uint64_t t0;

        assert_int_equal(supervisor_dispatch(s, 0, "job-hang", "copy", hang, 0), 0);
        usleep(50 * 1000);
        t0 = now_ms();
        supervisor_stop(s, 500);
        /* worker ignores shutdown while hung: killed at the stop timeout */
        assert_true(now_ms() - t0 < 2500 + 500);
        json_decref(hang);
}

static void test_cold_start_is_reported_then_warm(void **state)
{
        struct supervisor *s = start_cold(1);
        json_t *ok = json_pack("{s:i}", "iterations", 1);
        struct part p;

        assert_false(supervisor_warm(s, 0));
        assert_int_equal(supervisor_worker_pid(s, 0), 0);
        assert_int_equal(supervisor_dispatch(s, 0, "job-cold", "copy", ok, 5000), 0);
        p = wait_part("job-cold");
        assert_int_equal(p.outcome, PART_SUCCEEDED);
        assert_true(p.cold_start_ms >= 0);
        wait_entered(0, WORKER_IDLE, 1);
        assert_true(supervisor_warm(s, 0));
        assert_true(supervisor_worker_pid(s, 0) > 0);
        assert_int_equal(supervisor_dispatch(s, 0, "job-warm", "copy", ok, 5000), 0);
        p = wait_part("job-warm");
        assert_int_equal(p.outcome, PART_SUCCEEDED);
        assert_true(p.cold_start_ms < 0);
        json_decref(ok);
        supervisor_stop(s, 2000);
}

static void test_idle_worker_exits_and_is_not_a_crash(void **state)
{
        struct supervisor *s;

        cfg.worker_idle_s = 1;
        s = start(1);
        wait_entered(0, WORKER_COLD, 1);
        assert_int_equal(supervisor_worker_pid(s, 0), 0);
        assert_int_equal(entered(0, WORKER_BACKOFF), 0);
        assert_int_equal(supervisor_restarts(s, 0), 0);
        /* and the next part starts it again */
        assert_job_succeeds(s, "job-after-idle");
        supervisor_stop(s, 2000);
}

static void test_retired_worker_exits_at_once(void **state)
{
        struct supervisor *s = start(1);
        uint64_t t0 = now_ms();

        supervisor_retire(s, 0);
        wait_entered(0, WORKER_COLD, 1);
        assert_true(now_ms() - t0 < 5000); /* not the 30 s idle timeout */
        assert_int_equal(entered(0, WORKER_BACKOFF), 0);
        supervisor_exit_after_each_part(s, 0, true);
        assert_job_succeeds(s, "job-exclusive");
        wait_entered(0, WORKER_COLD, 2);
        supervisor_stop(s, 2000);
}

/* Stops this whole process (the supervisor's thread with it) for ms, and `worker` too when it is
 * > 0: a helper process sends SIGCONT to both afterwards. */
static void stall_process(pid_t worker, unsigned ms)
{
        pid_t self = getpid(), helper;
        int status;

        if (worker > 0)
                assert_int_equal(kill(worker, SIGSTOP), 0);
        helper = fork();
        assert_true(helper >= 0);
        if (helper == 0) {
                usleep(ms * 1000u);
                if (worker > 0)
                        kill(worker, SIGCONT);
                kill(self, SIGCONT);
                _exit(0);
        }
        raise(SIGSTOP);
        assert_int_equal(waitpid(helper, &status, 0), helper);
}

/* umd stopped for 4x the heartbeat timeout while its worker runs a part: the heartbeats and the
 * result that queued are read before any silence is judged. */
static void test_stall_of_the_daemon_is_not_a_workers_silence(void **state)
{
        json_t *slow = json_pack("{s:i}", "fake_delay_ms", 300);
        struct supervisor *s;

        cfg.heartbeat_timeout_ms = 500;
        cfg.max_crashes = 1;
        s = start(1);
        assert_int_equal(supervisor_dispatch(s, 0, "job-stalled", "copy", slow, 5000), 0);
        stall_process(0, 4 * cfg.heartbeat_timeout_ms);
        assert_int_equal(wait_part("job-stalled").outcome, PART_SUCCEEDED);
        assert_job_succeeds(s, "job-after-stall");
        assert_int_equal(supervisor_crashes(s, 0), 0);
        assert_int_equal(supervisor_restarts(s, 0), 0);
        assert_true(supervisor_stalls(s) >= 1);
        json_decref(slow);
        supervisor_stop(s, 2000);
}

/* The whole host paused (workers stopped with the daemon): nothing queued, and the time the
 * thread could not watch is forgiven: no part fails, no crash is counted. */
static void test_stall_of_the_host_restarts_heartbeat_deadlines(void **state)
{
        json_t *slow = json_pack("{s:i}", "fake_delay_ms", 1500);
        struct supervisor *s;

        cfg.heartbeat_timeout_ms = 500;
        cfg.max_crashes = 1;
        s = start(1);
        assert_int_equal(supervisor_dispatch(s, 0, "job-paused", "copy", slow, 5000), 0);
        stall_process(supervisor_worker_pid(s, 0), 4 * cfg.heartbeat_timeout_ms);
        assert_int_equal(wait_part("job-paused").outcome, PART_SUCCEEDED);
        assert_int_equal(supervisor_crashes(s, 0), 0);
        assert_int_equal(supervisor_restarts(s, 0), 0);
        assert_true(supervisor_stalls(s) >= 1);
        json_decref(slow);
        supervisor_stop(s, 2000);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_job_succeeds_on_each_device, setup, teardown),
            cmocka_unit_test_setup_teardown(test_max_buffer_bytes_reaches_the_worker_on_argv, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_crash_fails_part_and_respawns, setup, teardown),
            cmocka_unit_test_setup_teardown(test_respawns_leave_no_descriptor_behind, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_hang_times_out_and_next_part_runs, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_cancel_is_honoured_by_the_worker, setup, teardown),
            cmocka_unit_test_setup_teardown(test_cancel_of_a_hung_worker_kills_it, setup, teardown),
            cmocka_unit_test_setup_teardown(test_repeated_crashes_fault_then_recover, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_silent_worker_is_killed_as_a_crash, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_stop_ends_a_busy_worker, setup, teardown),
            cmocka_unit_test_setup_teardown(test_cold_start_is_reported_then_warm, setup, teardown),
            cmocka_unit_test_setup_teardown(test_idle_worker_exits_and_is_not_a_crash, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_retired_worker_exits_at_once, setup, teardown),
            cmocka_unit_test_setup_teardown(test_stall_of_the_daemon_is_not_a_workers_silence,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_stall_of_the_host_restarts_heartbeat_deadlines,
                                            setup, teardown),
        };

        /* fake_crash's abort() in the workers (who inherit this) must not leave core files */
        struct rlimit no_core = {0, 0};

        setrlimit(RLIMIT_CORE, &no_core);
        signal(SIGPIPE, SIG_IGN);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
