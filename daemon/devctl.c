/* Pausing and resuming devices (the scheduler's prolog and epilog, or an admin): a paused device
 * runs nothing and holds nothing; its running part is cancelled, its queued parts wait. Owns the
 * record of paused devices in the state directory (paused.json), written atomically before the
 * API answers, so a pause survives a restart of umd. */
#include "devctl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "daemon.h"
#include "devices.h"
#include "fileio.h"
#include "jobs.h"
#include "jsonutil.h"
#include "lock.h"
#include "log.h"
#include "problem.h"
#include "util.h"

#define PAUSED_FILE      "paused.json"
#define PAUSED_MAX_BYTES (1024u * 1024u)
#define REASON_MAX       200u

struct devctl {
        const char *state_dir;   /* the configuration's, which outlives this */
        struct jobs *jobs;       /* told of pauses and resumes (devctl_new's d->jobs) */
        struct devices *devices; /* d->devices: whose pauses these are */
};

/* With core_lock held. 0 or -errno (logged). */
static int save_locked(struct devctl *dc)
{
        const char *state_dir = dc->state_dir;
        assert_locked();
        _cleanup_json_ json_t *all = json_object();
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        int dfd, r;

        if (!all)
                return -ENOMEM;
        for (size_t i = 0; i < devices_size(dc->devices); i++) {
                struct device *d = devices_at(dc->devices, i);

                if (d->paused)
                        json_object_set_new(all, d->uuid,
                                            json_pack("{s:s, s:s}", "reason", d->pause_reason,
                                                      "since", d->paused_at));
        }
        text = json_dump_pretty(all, &len);
        if (!text)
                return -ENOMEM;
        dfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return log_error_errno(errno, "cannot open %s: %m", state_dir);
        r = write_file_atomic(dfd, PAUSED_FILE, text, len);
        close(dfd);
        if (r < 0)
                log_error_errno(r, "cannot write %s/%s: %m", state_dir, PAUSED_FILE);
        return r;
}

/* Marks the devices paused.json names as paused: 0 or -errno (logged). */
static int load(struct devices *ds, const char *state_dir)
{
        _cleanup_free_ char *buf = NULL;
        _cleanup_json_ json_t *all = NULL;
        json_error_t err;
        const char *uuid;
        json_t *v;
        size_t len = 0;
        int dfd, r;

        dfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return log_error_errno(errno, "cannot open %s: %m", state_dir);
        r = read_file_at(dfd, PAUSED_FILE, PAUSED_MAX_BYTES, &buf, &len);
        close(dfd);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return log_error_errno(r, "cannot read %s/%s: %m", state_dir, PAUSED_FILE);
        all = json_parse_strict(buf, len, 4, &err);
        if (!json_is_object(all)) {
                /* Refusing to start would keep umd off every GPU anyway; say so and go on. */
                log_error("%s/%s is not a JSON object (%s); no device is paused", state_dir,
                          PAUSED_FILE, err.text);
                return 0;
        }
        core_lock();
        json_object_foreach(all, uuid, v)
        {
                ssize_t i = devices_find_uuid(ds, uuid);
                const char *reason = json_string_value(json_object_get(v, "reason"));
                const char *since = json_string_value(json_object_get(v, "since"));
                struct device *d = i >= 0 ? devices_at(ds, (size_t)i) : NULL;

                if (!d) {
                        log_warning("paused device %s is not present; forgetting it", uuid);
                        continue;
                }
                d->paused = true;
                snprintf(d->pause_reason, sizeof(d->pause_reason), "%s", reason ? reason : "");
                snprintf(d->paused_at, sizeof(d->paused_at), "%s", since ? since : "");
                log_notice("device %zu (%s) stays paused: %s", d->index, d->uuid, d->pause_reason);
        }
        core_unlock();
        return 0;
}

int devctl_new(const struct umd_daemon *d, struct devctl **ret)
{
        struct devctl *dc = calloc(1, sizeof(*dc));
        int r;

        if (!dc)
                return log_error_errno(ENOMEM, "out of memory");
        dc->state_dir = d->cfg->state_dir;
        dc->jobs = d->jobs;
        dc->devices = d->devices;
        r = load(dc->devices, dc->state_dir);
        if (r < 0) {
                free(dc);
                return r;
        }
        *ret = dc;
        return 0;
}

void devctl_free(struct devctl *dc)
{
        free(dc);
}

static int parse_reason(const json_t *body, const char **ret, struct problem *p)
{
        const char *key;
        json_t *v;

        *ret = "";
        if (!body)
                return 0;
        if (!json_is_object(body))
                return problem_set(p, 400, "", "the body must be a JSON object");
        json_object_foreach((json_t *)body, key, v)
        {
                if (strcmp(key, "reason") != 0)
                        return problem_set(p, 400, key, "unknown field '%.64s' (known: reason)",
                                           key);
        }
        v = json_object_get(body, "reason");
        if (!v)
                return 0;
        if (!json_is_string(v) || json_string_length(v) > REASON_MAX)
                return problem_set(p, 400, "reason", "must be a string of at most %u bytes",
                                   REASON_MAX);
        for (const char *c = json_string_value(v); *c; c++)
                if ((unsigned char)*c < ' ')
                        return problem_set(p, 400, "reason", "must not hold control characters");
        *ret = json_string_value(v);
        return 0;
}

/* Take core_lock and find the device id names (an index or a uuid): 0 with the lock held, or a
 * 404 with it released. */
static int lock_device(struct devctl *dc, const char *id, ssize_t *ret_index, struct device **ret,
                       struct problem *p)
{
        core_lock();
        ssize_t i = devices_find(dc->devices, id);
        struct device *d = i >= 0 ? devices_at(dc->devices, (size_t)i) : NULL;

        if (!d) {
                core_unlock();
                return problem_set(p, 404, "device", "no device '%.64s'", id);
        }
        *ret_index = i;
        *ret = d;
        return 0;
}

int devctl_pause(struct devctl *dc, const char *id, const json_t *body, json_t **ret_device,
                 struct problem *p)
{
        const char *reason;
        char was_reason[sizeof(((struct device *)0)->pause_reason)];
        char was_at[sizeof(((struct device *)0)->paused_at)];
        bool was;
        int r;

        r = parse_reason(body, &reason, p);
        if (r < 0)
                return r;
        ssize_t i = -1;
        struct device *d = NULL;
        r = lock_device(dc, id, &i, &d, p);
        if (r < 0)
                return r;
        was = d->paused;
        memcpy(was_reason, d->pause_reason, sizeof(was_reason));
        memcpy(was_at, d->paused_at, sizeof(was_at));
        d->paused = true;
        snprintf(d->pause_reason, sizeof(d->pause_reason), "%s", reason);
        if (!was)
                format_rfc3339_ms(now_realtime_ms(), d->paused_at, sizeof(d->paused_at));
        if (save_locked(dc) < 0) {
                /* Not recorded, not done: a pause lost at the next restart is no pause. */
                d->paused = was;
                memcpy(d->pause_reason, was_reason, sizeof(was_reason));
                memcpy(d->paused_at, was_at, sizeof(was_at));
                core_unlock();
                return problem_set(p, 507, "", "the pause could not be recorded (see the log)");
        }
        if (!was)
                log_notice("device %zu (%s) paused%s%s", d->index, d->uuid, reason[0] ? ": " : "",
                           reason);
        job_dispatch_device_paused_locked(dc->jobs, (size_t)i);
        *ret_device = device_to_json(d);
        core_unlock();
        return 0;
}

int devctl_resume(struct devctl *dc, const char *id, json_t **ret_device, struct problem *p)
{
        int r;

        ssize_t i = -1;
        struct device *d = NULL;
        r = lock_device(dc, id, &i, &d, p);
        if (r < 0)
                return r;
        if (d->paused) {
                d->paused = false;
                if (save_locked(dc) < 0) {
                        d->paused = true;
                        core_unlock();
                        return problem_set(p, 507, "",
                                           "the resume could not be recorded (see the log)");
                }
                d->pause_reason[0] = d->paused_at[0] = '\0';
                log_notice("device %zu (%s) resumed", d->index, d->uuid);
                job_dispatch_locked(dc->jobs, (size_t)i);
        }
        *ret_device = device_to_json(d);
        core_unlock();
        return 0;
}
