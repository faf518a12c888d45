/* The Xid watch (see xid.h): owns its thread (the sources, xid_source.c), each GPU's Xid
 * evidence and failing state behind its own lock, and state_dir/xid-state.json. Lock order:
 * core_lock, then w->lock; the watch's thread never takes core_lock (the devices' PCI addresses
 * and uuids are fixed before it starts) and asks the supervisor for pids before taking w->lock. */
#include "xid.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "config.h"
#include "daemon.h"
#include "devices.h"
#include "fileio.h"
#include "health_action.h"
#include "log.h"
#include "supervisor.h"
#include "util.h"
#include "xid_internal.h"
#include "xid_parse.h"
#include "xid_table.h"

/* The Xid check's reason: the kernel's line (XID_TEXT_MAX) and the sentence around it, the Xid's
 * name and its action. */
#define XID_VERDICT_WHY_MAX (XID_TEXT_MAX + 256)
/* When an Xid was seen: an RFC 3339 time with milliseconds. */
#define XID_TIME_MAX 40

#define XID_STATE_FILE "xid-state.json"
/* /proc/sys/kernel/random/boot_id: a uuid and a newline. */
#define XID_BOOT_ID_MAX 64
#define XID_STATE_MAX   (1024 * 1024)
/* Distinct (code, action) counters a GPU keeps; past this, new pairs are counted under the
 * last slot's code 0 ("other") so the counter family stays bounded. */
#define XID_COUNTERS_MAX 64
#define XID_WHY_MAX      256
#define XID_SOURCE_MAX   16
/* The watermark alone is saved at most this often (see feed_event). */
#define XID_SAVE_EVERY_MS 1000

struct xid_event {
        uint64_t time_ms; /* realtime */
        uint64_t mono_ms; /* for the dedup window */
        enum xid_kind kind;
        enum xid_origin origin;
        unsigned code;
        enum health_action action;
        bool known, own_worker;
        int pid;
        char process[XID_PROCESS_MAX];
        char text[XID_TEXT_MAX];
        char bus[XID_BUS_MAX];
};

struct xid_counter {
        unsigned code;
        enum health_action action;
        uint64_t n;
};

/* One GPU's evidence, or the node's (events on no GPU of umd's). */
struct xid_gpu {
        char bus[XID_BUS_MAX];
        char uuid[DEVICE_UUID_MAX];
        struct xid_event *ring; /* the newest xid_events_max, oldest overwritten */
        size_t next, count;
        struct xid_counter counters[XID_COUNTERS_MAX];
        size_t n_counters;
        /* The failing state: the most severe failing action not yet cleared, and its event. */
        enum health_action failing;
        struct xid_event failing_event;
        char failing_boot[XID_BOOT_ID_MAX];
};

struct xid_watch {
        const struct umd_config *cfg;
        struct devices *devices; /* d->devices: the GPUs whose Xids are told apart */
        struct supervisor *sup;  /* under lock: NULL until attached */
        pthread_mutex_t lock;
        pthread_t thread, nvml_thread;
        bool started, nvml_started;
        int stop_fd;
        bool stopping;
        struct xid_overrides overrides;
        size_t n; /* GPUs; gpus[n] is the node */
        struct xid_gpu *gpus;
        char boot_id[XID_BOOT_ID_MAX];
        uint64_t watermark_usec; /* the newest kernel record handled this boot */
        uint64_t saved_ms;       /* when the state file was last written (monotonic) */
        bool unsaved;            /* the watermark moved since */
        int state_dirfd;
        char source[XID_SOURCE_MAX];
        char why[XID_WHY_MAX];
};

static int read_boot_id(const char *path, char ret[XID_BOOT_ID_MAX])
{
        _cleanup_free_ char *buf = NULL;
        size_t len;
        int r = read_file_at(AT_FDCWD, path, XID_BOOT_ID_MAX, &buf, &len);

        if (r < 0)
                return r;
        buf[strcspn(buf, " \r\n")] = '\0';
        if (!buf[0])
                return -EINVAL;
        str_copy_cut(ret, XID_BOOT_ID_MAX, buf);
        return 0;
}

/* ---- the state file ---- */

static json_t *event_to_json(const struct xid_event *e)
{
        char when[XID_TIME_MAX];
        const char *name = e->kind == XID_KIND_XID || e->kind == XID_KIND_FALLEN_OFF_BUS
                               ? xid_table_name(e->code)
                               : NULL;
        static const char *const kinds[] = {"xid", "sxid", "fallen_off_bus"};
        static const char *const origins[] = {"kernel", "kernel", "nvml"};

        return json_pack("{s:s, s:s, s:I, s:s?, s:s, s:s, s:b, s:b, s:o, s:s?, s:b, s:s, s:s}",
                         "time", format_rfc3339_ms(e->time_ms, when, sizeof(when)), "kind",
                         kinds[e->kind], "xid", (json_int_t)e->code, "name", name, "text", e->text,
                         "action", health_action_name(e->action), "fails_gpu",
                         xid_action_fails(e->action), "known", e->known, "pid",
                         e->pid > 0 ? json_integer(e->pid) : json_null(), "process",
                         e->process[0] ? e->process : NULL, "own_worker", e->own_worker, "source",
                         origins[e->origin], "pci_bus_id", e->bus);
}

/* Under w->lock. Failures are logged: the state in memory stands, the file is the older. */
static void state_save(struct xid_watch *w)
{
        json_t *gpus = json_object();
        char when[XID_TIME_MAX];

        for (size_t i = 0; i < w->n; i++) {
                const struct xid_gpu *g = &w->gpus[i];
                if (!xid_action_fails(g->failing))
                        continue;
                json_object_set_new(
                    gpus, g->uuid,
                    json_pack("{s:s, s:I, s:s, s:s, s:s}", "action", health_action_name(g->failing),
                              "xid", (json_int_t)g->failing_event.code, "time",
                              format_rfc3339_ms(g->failing_event.time_ms, when, sizeof(when)),
                              "boot_id", g->failing_boot, "text", g->failing_event.text));
        }
        json_t *doc = json_pack("{s:s, s:I, s:o}", "boot_id", w->boot_id, "watermark_usec",
                                (json_int_t)w->watermark_usec, "gpus", gpus);
        _cleanup_free_ char *s = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
        json_decref(doc);
        int r = s ? write_file_atomic(w->state_dirfd, XID_STATE_FILE, s, strlen(s)) : -ENOMEM;
        if (r < 0)
                log_error_errno(r, "cannot save the Xid state (%s): %m", XID_STATE_FILE);
}

/* A GPU's failing state from the file: kept while what its action needs has not been seen. */
static void state_restore_gpu(struct xid_watch *w, struct xid_gpu *g, const json_t *e)
{
        enum health_action a;
        const char *boot = json_string_value(json_object_get(e, "boot_id"));
        const char *text = json_string_value(json_object_get(e, "text"));
        json_int_t code = json_integer_value(json_object_get(e, "xid"));

        if (health_action_from_name(json_string_value(json_object_get(e, "action")), &a) < 0 ||
            !xid_action_fails(a) || !boot)
                return;
        /* A new boot clears what a reset or a reboot asks for; servicing (a replaced GPU) is
         * seen as a new uuid at this address, which has no entry. */
        if (a != HEALTH_ACTION_SERVICE && strcmp(boot, w->boot_id) != 0) {
                log_info("GPU %s: Xid %lld (%s) cleared: the node has booted since", g->uuid,
                         (long long)code, health_action_name(a));
                return;
        }
        g->failing = a;
        g->failing_event = (struct xid_event){.code = (unsigned)code, .action = a, .pid = -1};
        str_copy_cut(g->failing_event.text, sizeof(g->failing_event.text), text);
        str_copy_cut(g->failing_event.bus, sizeof(g->failing_event.bus), g->bus);
        str_copy_cut(g->failing_boot, sizeof(g->failing_boot), boot);
        /* the time as the file has it: parsed back only as far as the API shows it */
        g->failing_event.time_ms = 0;
        log_warning("GPU %s: still failing from Xid %lld (%s required, since an earlier umd)",
                    g->uuid, (long long)code, health_action_name(a));
}

static int state_load(struct xid_watch *w)
{
        _cleanup_free_ char *buf = NULL;
        size_t len;
        json_error_t jerr;
        int r = read_file_at(w->state_dirfd, XID_STATE_FILE, XID_STATE_MAX, &buf, &len);

        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return log_error_errno(r, "cannot read %s: %m", XID_STATE_FILE);
        json_t *doc = json_loadb(buf, len, 0, &jerr);
        if (!json_is_object(doc)) {
                json_decref(doc);
                log_error("%s is not JSON (%s): the Xid failing state starts empty", XID_STATE_FILE,
                          jerr.text);
                return 0;
        }
        if (streq_ptr(json_string_value(json_object_get(doc, "boot_id")), w->boot_id))
                w->watermark_usec =
                    (uint64_t)json_integer_value(json_object_get(doc, "watermark_usec"));
        for (size_t i = 0; i < w->n; i++) {
                const json_t *e = json_object_get(json_object_get(doc, "gpus"), w->gpus[i].uuid);
                if (e)
                        state_restore_gpu(w, &w->gpus[i], e);
        }
        json_decref(doc);
        return 0;
}

/* ---- events ---- */

static struct xid_gpu *gpu_of_bus(struct xid_watch *w, const char *bus, size_t *ret_index)
{
        for (size_t i = 0; i < w->n; i++)
                if (strcmp(w->gpus[i].bus, bus) == 0) {
                        *ret_index = i;
                        return &w->gpus[i];
                }
        *ret_index = w->n;
        return &w->gpus[w->n];
}

/* An event of another origin for the same GPU and code within the window: the same fault said
 * twice. Fills what the first one lacked (NVML's event has no pid or words). */
static bool merge_duplicate(struct xid_watch *w, struct xid_gpu *g, const struct xid_event *e)
{
        size_t cap = w->cfg->xid_events_max;

        for (size_t k = 0; k < g->count; k++) {
                struct xid_event *o = &g->ring[(g->next + cap - 1 - k) % cap];
                /* either may be the older: a look back's records carry their own time */
                uint64_t apart =
                    e->mono_ms > o->mono_ms ? e->mono_ms - o->mono_ms : o->mono_ms - e->mono_ms;
                if (apart > w->cfg->xid_dedup_ms || o->code != e->code ||
                    o->kind == XID_KIND_SXID || o->origin == e->origin)
                        continue;
                if (o->pid <= 0 && e->pid > 0) {
                        o->pid = e->pid;
                        o->own_worker = e->own_worker;
                }
                if (!o->process[0])
                        str_copy_cut(o->process, sizeof(o->process), e->process);
                if (o->origin == XID_ORIGIN_NVML && e->origin == XID_ORIGIN_KERNEL)
                        str_copy_cut(o->text, sizeof(o->text), e->text);
                return true;
        }
        return false;
}

static void count(struct xid_gpu *g, unsigned code, enum health_action a)
{
        for (size_t i = 0; i < g->n_counters; i++)
                if (g->counters[i].code == code && g->counters[i].action == a) {
                        g->counters[i].n++;
                        return;
                }
        if (g->n_counters == XID_COUNTERS_MAX) {
                g->counters[XID_COUNTERS_MAX - 1].code = 0;
                g->counters[XID_COUNTERS_MAX - 1].n++;
                return;
        }
        g->counters[g->n_counters++] = (struct xid_counter){.code = code, .action = a, .n = 1};
}

/* Under w->lock: records e on g, worsens its failing state. Returns whether the file changes. */
static bool record(struct xid_watch *w, struct xid_gpu *g, const struct xid_event *e, bool is_gpu)
{
        size_t cap = w->cfg->xid_events_max;

        if (merge_duplicate(w, g, e))
                return false;
        if (cap > 0) {
                g->ring[g->next] = *e;
                g->next = (g->next + 1) % cap;
                if (g->count < cap)
                        g->count++;
        }
        count(g, e->code, e->action);
        log_warning("%s %s: %s %u (%s%s%s): %s", is_gpu ? "GPU" : "device", e->bus,
                    e->kind == XID_KIND_SXID ? "SXid" : "Xid", e->code,
                    health_action_name(e->action), e->own_worker ? ", umd's own worker" : "",
                    xid_action_fails(e->action) && is_gpu ? ", the GPU fails" : "", e->text);
        if (!is_gpu || !xid_action_fails(e->action) || e->action <= g->failing)
                return false;
        g->failing = e->action;
        g->failing_event = *e;
        str_copy_cut(g->failing_boot, sizeof(g->failing_boot), w->boot_id);
        return true;
}

/* Not under w->lock (the supervisor's lock is its own). */
static bool own_pid(struct xid_watch *w, int pid)
{
        size_t slots = devices_size(w->devices) + (devices_has_node(w->devices) ? 1 : 0);

        pthread_mutex_lock(&w->lock);
        struct supervisor *sup = w->sup;
        pthread_mutex_unlock(&w->lock);
        for (size_t i = 0; sup && pid > 0 && i < slots; i++)
                if (supervisor_worker_pid(sup, i) == (pid_t)pid)
                        return true;
        return false;
}

void xid_watch_attach_supervisor(struct xid_watch *w, struct supervisor *sup)
{
        if (!w)
                return;
        pthread_mutex_lock(&w->lock);
        w->sup = sup;
        pthread_mutex_unlock(&w->lock);
}

static void feed_event(struct xid_watch *w, struct xid_event *e)
{
        size_t index;

        e->own_worker = own_pid(w, e->pid);
        if (!e->mono_ms)
                e->mono_ms = now_monotonic_ms();
        pthread_mutex_lock(&w->lock);
        struct xid_gpu *g = gpu_of_bus(w, e->bus, &index);
        bool fails = record(w, g, e, index < w->n && e->kind != XID_KIND_SXID);
        /* A failing state is saved at once; the watermark (so that a restart's look back skips
         * what was counted) at most once a XID_SAVE_EVERY_MS, and at stop: a storm of
         * application Xids costs no fsync a line. */
        if (fails ||
            (e->origin != XID_ORIGIN_NVML && e->mono_ms - w->saved_ms >= XID_SAVE_EVERY_MS)) {
                state_save(w);
                w->saved_ms = e->mono_ms;
        } else if (e->origin != XID_ORIGIN_NVML) {
                w->unsaved = true;
        }
        pthread_mutex_unlock(&w->lock);
}

void xid_watch_feed(struct xid_watch *w, const char *msg, uint64_t boot_usec)
{
        struct xid_line x;
        struct xid_event e = {0};
        uint64_t now = now_realtime_ms();

        if (xid_parse_line(msg, &x) != 1)
                return;
        if (boot_usec) {
                /* the look back: what an earlier umd of this boot handled is not counted again */
                pthread_mutex_lock(&w->lock);
                bool seen = boot_usec <= w->watermark_usec;
                if (!seen)
                        w->watermark_usec = boot_usec;
                pthread_mutex_unlock(&w->lock);
                if (seen)
                        return;
                uint64_t ago_ms = now_monotonic_ms() - boot_usec / 1000;
                now = ago_ms < now && boot_usec / 1000 < now_monotonic_ms() ? now - ago_ms : now;
        }
        e.time_ms = now;
        e.mono_ms = boot_usec / 1000; /* the kernel's clock runs with CLOCK_MONOTONIC; 0: now */
        e.kind = x.kind;
        e.origin = x.kind == XID_KIND_FALLEN_OFF_BUS ? XID_ORIGIN_KERNEL_FALLEN : XID_ORIGIN_KERNEL;
        e.code = x.code;
        e.action = xid_table_action(&w->overrides, &x, &e.known);
        e.pid = x.pid;
        memcpy(e.process, x.process, sizeof(e.process));
        memcpy(e.text, x.text, sizeof(e.text));
        memcpy(e.bus, x.bus, sizeof(e.bus));
        feed_event(w, &e);
}

void xid_watch_feed_nvml(struct xid_watch *w, const char *bus, unsigned code)
{
        struct xid_line x = {.kind = XID_KIND_XID, .code = code, .pid = -1};
        struct xid_event e = {.time_ms = now_realtime_ms(),
                              .kind = XID_KIND_XID,
                              .origin = XID_ORIGIN_NVML,
                              .code = code,
                              .pid = -1};

        if (xid_normalise_bus(bus, e.bus) < 0)
                return;
        snprintf(e.text, sizeof(e.text), "NVML event: Xid %u", code);
        e.action = xid_table_action(&w->overrides, &x, &e.known);
        feed_event(w, &e);
}

bool xid_watch_stopping(struct xid_watch *w)
{
        pthread_mutex_lock(&w->lock);
        bool s = w->stopping;
        pthread_mutex_unlock(&w->lock);
        return s;
}

void xid_watch_source_set(struct xid_watch *w, const char *name, const char *why)
{
        pthread_mutex_lock(&w->lock);
        str_copy_cut(w->source, sizeof(w->source), name);
        str_copy_cut(w->why, sizeof(w->why), why);
        pthread_mutex_unlock(&w->lock);
        if (why && why[0])
                log_warning("Xid watch: %s", why);
        else
                log_info("Xid watch: reading %s", name);
}

uint64_t xid_watch_watermark(struct xid_watch *w)
{
        pthread_mutex_lock(&w->lock);
        uint64_t v = w->watermark_usec;
        pthread_mutex_unlock(&w->lock);
        return v;
}

/* ---- answers ---- */

/* Under w->lock: the "xid" check of g. */
static json_t *gpu_check(const struct xid_watch *w, const struct xid_gpu *g)
{
        char why[XID_VERDICT_WHY_MAX];
        size_t evidence = 0;

        for (size_t i = 0; i < g->n_counters; i++)
                evidence += g->counters[i].n;
        if (xid_action_fails(g->failing)) {
                const struct xid_event *e = &g->failing_event;
                const char *name = xid_table_name(e->code);
                snprintf(why, sizeof(why), "Xid %u%s%s%s asks to %s: failing until %s (%s)",
                         e->code, name ? " (" : "", name ? name : "", name ? ")" : "",
                         health_action_name(g->failing),
                         g->failing == HEALTH_ACTION_SERVICE ? "the GPU is replaced"
                                                             : "the node has booted again",
                         e->text);
        } else if (!w->source[0]) {
                snprintf(why, sizeof(why), "Xid watch starting");
        } else if (strcmp(w->source, "none") == 0) {
                snprintf(why, sizeof(why), "Xid watch off: %s",
                         w->why[0] ? w->why : "xid_source=none");
        } else {
                snprintf(why, sizeof(why),
                         "no failing Xid (source %s); %zu event(s) recorded as evidence only",
                         w->source, evidence);
        }
        bool fails = xid_action_fails(g->failing);
        return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "name", "xid", "verdict",
                         fails ? "fail" : "pass", "reason", why, "expectation", "none", "action",
                         health_action_name(fails ? g->failing : HEALTH_ACTION_NONE),
                         "threshold_source", XID_TABLE_SOURCE);
}

json_t *xid_compose_verdict(struct xid_watch *w, size_t index, const json_t *verdict)
{
        if (!w || index >= w->n)
                return verdict ? json_incref((json_t *)verdict) : NULL;
        pthread_mutex_lock(&w->lock);
        const struct xid_gpu *g = &w->gpus[index];
        json_t *check = gpu_check(w, g);
        bool fails = xid_action_fails(g->failing);
        pthread_mutex_unlock(&w->lock);
        if (!verdict && !fails) {
                json_decref(check);
                return NULL;
        }
        json_t *v = verdict ? json_copy((json_t *)verdict) : json_object();
        json_t *checks = json_array(), *c;
        size_t i;
        json_array_foreach(json_object_get(verdict, "checks"), i, c)
        {
                if (!streq_ptr(json_string_value(json_object_get(c, "name")), "xid"))
                        json_array_append(checks, c);
        }
        json_array_append_new(checks, check);
        json_object_set_new(v, "checks", checks);
        health_settle(v);
        return v;
}

/* Under w->lock: g's newest events first, and its counters. */
static json_t *gpu_json(const struct xid_watch *w, const struct xid_gpu *g)
{
        json_t *events = json_array(), *counts = json_array();
        size_t cap = w->cfg->xid_events_max;

        for (size_t k = 0; k < g->count; k++)
                json_array_append_new(events,
                                      event_to_json(&g->ring[(g->next + cap - 1 - k) % cap]));
        for (size_t i = 0; i < g->n_counters; i++)
                json_array_append_new(counts, json_pack("{s:I, s:s, s:I}", "xid",
                                                        (json_int_t)g->counters[i].code, "action",
                                                        health_action_name(g->counters[i].action),
                                                        "count", (json_int_t)g->counters[i].n));
        return json_pack(
            "{s:s, s:s, s:o, s:o}", "source", w->source, "action",
            health_action_name(xid_action_fails(g->failing) ? g->failing : HEALTH_ACTION_NONE),
            "counts", counts, "events", events);
}

void xid_decorate_device(struct xid_watch *w, size_t index, json_t *dev)
{
        if (!w || index >= w->n)
                return;
        json_t *v = xid_compose_verdict(w, index, json_object_get(dev, "last_health"));
        json_object_set_new(dev, "last_health", v ? v : json_null());
        pthread_mutex_lock(&w->lock);
        json_t *x = gpu_json(w, &w->gpus[index]);
        pthread_mutex_unlock(&w->lock);
        json_object_set_new(dev, "xid", x);
}

json_t *xid_watch_json(struct xid_watch *w)
{
        if (!w)
                return json_null();
        pthread_mutex_lock(&w->lock);
        json_t *node = gpu_json(w, &w->gpus[w->n]);
        json_object_set_new(node, "why", w->why[0] ? json_string(w->why) : json_null());
        json_object_set_new(node, "boot_id", json_string(w->boot_id));
        json_object_del(node, "action");
        pthread_mutex_unlock(&w->lock);
        return node;
}

void xid_metrics(struct xid_watch *w, FILE *f)
{
        if (!w)
                return;
        fputs("# HELP umd_gpu_xid_total Xid events the watch saw on each GPU since umd started, by "
              "code and the action the Xid table gives it (a counter: repeats count).\n"
              "# TYPE umd_gpu_xid_total counter\n",
              f);
        pthread_mutex_lock(&w->lock);
        for (size_t i = 0; i < w->n; i++)
                for (size_t k = 0; k < w->gpus[i].n_counters; k++) {
                        const struct xid_counter *c = &w->gpus[i].counters[k];
                        fprintf(f,
                                "umd_gpu_xid_total{gpu=\"%zu\",UUID=\"%s\",xid=\"%u\","
                                "action=\"%s\"} %llu\n",
                                i, w->gpus[i].uuid, c->code, health_action_name(c->action),
                                (unsigned long long)c->n);
                }
        fputs("# HELP umd_xid_other_total Xid and SXid events on no GPU of umd's (NVSwitches, GPUs "
              "umd does not own), by code and action.\n"
              "# TYPE umd_xid_other_total counter\n",
              f);
        for (size_t k = 0; k < w->gpus[w->n].n_counters; k++) {
                const struct xid_counter *c = &w->gpus[w->n].counters[k];
                fprintf(f, "umd_xid_other_total{xid=\"%u\",action=\"%s\"} %llu\n", c->code,
                        health_action_name(c->action), (unsigned long long)c->n);
        }
        pthread_mutex_unlock(&w->lock);
}

/* ---- lifecycle ---- */

static void *watch_thread(void *arg)
{
        struct xid_watch *w = arg;

        xid_source_run(w, w->cfg->xid_source, w->stop_fd);
        return NULL;
}

static void *nvml_thread(void *arg)
{
        xid_source_nvml_run(arg);
        return NULL;
}

static int watch_alloc(const struct umd_daemon *d, struct xid_watch **ret)
{
        struct xid_watch *w = calloc(1, sizeof(*w));
        size_t n = devices_size(d->devices);
        char err[XID_WHY_MAX];

        if (!w)
                return -ENOMEM;
        w->cfg = d->cfg;
        w->devices = d->devices;
        w->n = n;
        w->stop_fd = -1;
        w->state_dirfd = -1;
        pthread_mutex_init(&w->lock, NULL);
        *ret = w;
        /* config.c checked it: a failure here is a bug */
        if (xid_overrides_parse(d->cfg->xid_actions, &w->overrides, err, sizeof(err)) < 0)
                return log_error_errno(-EINVAL, "xid_actions: %s", err);
        w->gpus = calloc(n + 1, sizeof(*w->gpus));
        if (!w->gpus)
                return -ENOMEM;
        for (size_t i = 0; i <= n; i++) {
                w->gpus[i].ring = calloc(d->cfg->xid_events_max + 1, sizeof(struct xid_event));
                if (!w->gpus[i].ring)
                        return -ENOMEM;
                if (i == n)
                        break;
                struct device *dev = devices_at(d->devices, i);
                str_copy_cut(w->gpus[i].uuid, sizeof(w->gpus[i].uuid), dev->uuid);
                if (xid_normalise_bus(json_string_value(json_object_get(dev->info, "pci_bus_id")),
                                      w->gpus[i].bus) < 0)
                        log_warning("device %zu (%s): no PCI address: its Xids cannot be told "
                                    "apart from other GPUs'",
                                    i, dev->uuid);
        }
        return 0;
}

int xid_watch_start(const struct umd_daemon *d, struct xid_watch **ret)
{
        struct xid_watch *w = NULL;
        int r = watch_alloc(d, &w);

        if (r < 0)
                goto fail;
        r = read_boot_id(d->cfg->xid_boot_id_file, w->boot_id);
        if (r < 0) {
                log_warning_errno(r,
                                  "cannot read the boot id (%s): %m; an Xid's failing state "
                                  "then lasts until it is cleared by hand",
                                  d->cfg->xid_boot_id_file);
                str_copy_cut(w->boot_id, sizeof(w->boot_id), "unknown");
        }
        w->state_dirfd = open(d->cfg->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (w->state_dirfd < 0) {
                r = log_error_errno(errno, "cannot open %s: %m", d->cfg->state_dir);
                goto fail;
        }
        r = state_load(w);
        if (r < 0)
                goto fail;
        w->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (w->stop_fd < 0) {
                r = log_error_errno(errno, "eventfd: %m");
                goto fail;
        }
        r = -pthread_create(&w->thread, NULL, watch_thread, w);
        if (r < 0) {
                log_error_errno(r, "cannot start the Xid watch: %m");
                goto fail;
        }
        w->started = true;
        /* NVML's events beside a kernel source; fake devices only with a source named (auto
         * reads nothing for them), where NVML, if any loads, knows none of their uuids */
        const char *src = d->cfg->xid_source;
        bool fake = devices_size(d->devices) > 0 && devices_at(d->devices, 0)->fake;
        if (d->cfg->xid_nvml_events && devices_size(d->devices) > 0 && strcmp(src, "none") != 0 &&
            strcmp(src, "nvml") != 0 && !(fake && strcmp(src, "auto") == 0) &&
            pthread_create(&w->nvml_thread, NULL, nvml_thread, w) == 0)
                w->nvml_started = true;
        *ret = w;
        return 0;
fail:
        xid_watch_stop(w);
        return r;
}

struct devices *xid_watch_devices(struct xid_watch *w)
{
        return w->devices;
}

void xid_watch_stop(struct xid_watch *w)
{
        if (!w)
                return;
        pthread_mutex_lock(&w->lock);
        w->stopping = true;
        pthread_mutex_unlock(&w->lock);
        if (w->stop_fd >= 0)
                (void)eventfd_write(w->stop_fd, 1);
        if (w->started)
                pthread_join(w->thread, NULL);
        if (w->nvml_started)
                pthread_join(w->nvml_thread, NULL);
        if (w->unsaved && w->state_dirfd >= 0) {
                pthread_mutex_lock(&w->lock);
                state_save(w);
                pthread_mutex_unlock(&w->lock);
        }
        for (size_t i = 0; w->gpus && i <= w->n; i++)
                free(w->gpus[i].ring);
        free(w->gpus);
        if (w->stop_fd >= 0)
                close(w->stop_fd);
        if (w->state_dirfd >= 0)
                close(w->state_dirfd);
        pthread_mutex_destroy(&w->lock);
        free(w);
}
