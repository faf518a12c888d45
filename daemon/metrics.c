/* Prometheus text exposition (format 0.0.4), named by Prometheus's conventions (base units:
 * bytes per second, seconds) and joinable with dcgm-exporter (umd_device_info carries its gpu,
 * UUID, pci_bus_id and modelName labels). Owns the counters nothing else keeps: HTTP requests,
 * finished jobs, job durations, the last measurement of each mode (bandwidth, or latency for
 * latency modes, and when it was taken), and the queue and running gauges the job files push
 * (metrics_observe_*: this file never calls into them). Device gauges are read from devices.c
 * at scrape time, the job count from the store. Every label set is bounded: routes are patterns,
 * states and benchmarks come from fixed tables, uuids from discovery, and modes from results, at
 * most METRICS_MODES_PER_DEVICE per device (beyond, a mode is counted in
 * umd_metrics_series_dropped_total, never exported); a sweep's per-size points ("mode@size")
 * are never label values (their curves are in the job's result). The canonical health check's
 * figures for the fleet's comparison of peers (umd_health_bandwidth_bytes_per_second, bounded by
 * uuids and a fixed table of figures) are kept apart from the per-mode ones, so that no ad-hoc
 * or disturbed run can pass for them (docs/fleet.md). */
#include "metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog.h"
#include "devices.h"
#include "health_errors.h"
#include "health_links.h"
#include "daemon.h"
#include "jsonutil.h"
#include "lock.h"
#include "store.h"
#include "log.h"
#include "supervisor.h"
#include "topology.h"
#include "umd-build.h"
#include "umd-vcs.h"
#include "util.h"
#include "xid.h"

/* The host's name as umd_device_info's Hostname: HOST_NAME_MAX (64) is Linux's, room to spare. */
#define HOSTNAME_MAX 256
/* The node worker's state and verdict words as last pushed ("restarting", "pass"). */
#define NODE_STATE_MAX   16
#define NODE_VERDICT_MAX 8
/* Escaped label values: a route pattern, a method, a benchmark, a uuid (with room for escapes),
 * a measurement's name, a link label, a GPU model's name, a PCI bus id. */
#define LABEL_ROUTE_MAX  128
#define LABEL_METHOD_MAX 16
#define LABEL_NAME_MAX   64
#define LABEL_UUID_MAX   80
#define LABEL_LINK_MAX   40
#define LABEL_MODEL_MAX  160
/* The escaped host name: HOSTNAME_MAX with room for escapes. */
#define LABEL_HOST_MAX 300
/* A device's labels' start, uuid="...", (modes_of counts by it). */
#define LABEL_PREFIX_MAX 96
/* A series' whole label set: every value above with its key and quotes. */
#define LABELS_MAX       256
#define LABELS_SHORT_MAX 160
#define LABELS_LINK_MAX  96

#define MAX_SERIES 4096
/* (benchmark, mode) pairs exported per device. The catalog's benchmarks name about 40 modes
 * together; anything past this is a bug or a hostile worker, not a reason for new series. */
#define METRICS_MODES_PER_DEVICE 64

struct series {
        char *labels; /* rendered label set, e.g. route="/v1/jobs",method="GET",status="200" */
        double value;
};

struct family {
        struct series *s;
        size_t n, cap;
};

static const double duration_buckets[] = {0.1, 0.5, 1, 2, 5, 10, 30, 60, 300, 1800};

/* One per daemon (metrics_new), held by struct umd_daemon. */
struct metrics {
        pthread_mutex_t mlock; /* the families, the histogram and the node's entry */
        struct family http_requests, jobs_finished;
        /* Per (uuid, benchmark, mode): bandwidth in bytes/s or latency in seconds, and the Unix
         * time of the measurement. */
        struct family bandwidth, latency, measured_at;
        /* Per (uuid, figure, link): the canonical check's fleet figures in bytes/s; per uuid: 1
         * when the last canonical check was disturbed by another process. */
        struct family health_bw, health_contended;
        unsigned long long series_dropped;
        unsigned long long duration_counts[ELEMENTSOF(duration_buckets) + 1];
        double duration_sum;
        unsigned long long duration_count;
        uint64_t start_ms;
        struct supervisor *msup;
        const struct umd_daemon *daemon_state;
        struct devices *devices;     /* d->devices: a series per GPU */
        _Atomic size_t *queue_depth; /* per device, as the job files last pushed it */
        size_t n_queue_depth;
        _Atomic size_t running_parts;
        char hostname[HOSTNAME_MAX]; /* umd_device_info's Hostname, as dcgm-exporter labels it */
        /* The node worker as last pushed (under mlock); node_known stays false on a host with
         * one GPU. */
        bool node_known, node_warm;
        char node_state[NODE_STATE_MAX], node_verdict[NODE_VERDICT_MAX];
};

int metrics_new(const struct umd_daemon *d, struct metrics **ret)
{
        size_t n = devices_size(d->devices);
        struct metrics *mt = calloc(1, sizeof(*mt));

        if (!mt)
                return log_error_errno(ENOMEM, "out of memory");
        pthread_mutex_init(&mt->mlock, NULL);
        mt->start_ms = now_monotonic_ms();
        mt->daemon_state = d;
        mt->devices = d->devices;
        if (gethostname(mt->hostname, sizeof(mt->hostname)) < 0)
                mt->hostname[0] = 0;
        mt->hostname[sizeof(mt->hostname) - 1] = 0;
        mt->queue_depth = calloc(n ? n : 1, sizeof(*mt->queue_depth));
        if (!mt->queue_depth) {
                free(mt);
                return log_error_errno(ENOMEM, "out of memory");
        }
        mt->n_queue_depth = n;
        *ret = mt;
        return 0;
}

static void family_free(struct family *f)
{
        for (size_t i = 0; i < f->n; i++)
                free(f->s[i].labels);
        free(f->s);
}

void metrics_free(struct metrics *mt)
{
        if (!mt)
                return;
        struct family *fams[] = {&mt->http_requests,   &mt->jobs_finished, &mt->bandwidth,
                                 &mt->latency,         &mt->measured_at,   &mt->health_bw,
                                 &mt->health_contended};
        for (size_t i = 0; i < ELEMENTSOF(fams); i++)
                family_free(fams[i]);
        pthread_mutex_destroy(&mt->mlock);
        free((void *)mt->queue_depth);
        free(mt);
}

void metrics_observe_queue(struct metrics *mt, size_t dev, size_t queued)
{
        if (dev < mt->n_queue_depth)
                atomic_store(&mt->queue_depth[dev], queued);
}

void metrics_observe_running(struct metrics *mt, size_t running)
{
        atomic_store(&mt->running_parts, running);
}

void metrics_observe_node(struct metrics *mt, const char *state, bool warm, const char *verdict)
{
        pthread_mutex_lock(&mt->mlock);
        mt->node_known = true;
        mt->node_warm = warm;
        str_copy_cut(mt->node_state, sizeof(mt->node_state), state); /* at every unlock */
        str_copy_cut(mt->node_verdict, sizeof(mt->node_verdict), verdict);
        pthread_mutex_unlock(&mt->mlock);
}

void metrics_attach_supervisor(struct metrics *mt, struct supervisor *s)
{
        mt->msup = s;
}

/* Label values are escaped per the exposition format (backslash, quote, newline). */
static void escape(char *dst, size_t len, const char *src)
{
        size_t at = 0;
        for (; src && *src && at + 3 < len; src++) {
                if (*src == '\\' || *src == '"') {
                        dst[at++] = '\\';
                        dst[at++] = *src;
                } else if (*src == '\n') {
                        dst[at++] = '\\';
                        dst[at++] = 'n';
                } else {
                        dst[at++] = *src;
                }
        }
        dst[at] = 0;
}

static void family_set(struct family *f, const char *labels, double v, bool add)
{
        for (size_t i = 0; i < f->n; i++)
                if (strcmp(f->s[i].labels, labels) == 0) {
                        f->s[i].value = add ? f->s[i].value + v : v;
                        return;
                }
        if (f->n >= MAX_SERIES)
                return;
        if (f->n == f->cap) {
                size_t nc = f->cap ? f->cap * 2 : 32;
                struct series *n = realloc(f->s, nc * sizeof(*n));
                if (!n)
                        return;
                f->s = n;
                f->cap = nc;
        }
        char *l = strdup(labels);
        if (!l)
                return;
        f->s[f->n++] = (struct series){.labels = l, .value = v};
}

void metrics_http_observe(struct metrics *mt, const char *route, const char *method, int status)
{
        char r[LABEL_ROUTE_MAX], m[LABEL_METHOD_MAX], labels[LABELS_MAX];
        escape(r, sizeof(r), route);
        escape(m, sizeof(m), method);
        snprintf(labels, sizeof(labels), "route=\"%s\",method=\"%s\",status=\"%d\"", r, m, status);
        pthread_mutex_lock(&mt->mlock);
        family_set(&mt->http_requests, labels, 1, true);
        pthread_mutex_unlock(&mt->mlock);
}

void metrics_job_finished(struct metrics *mt, const char *benchmark, const char *state,
                          double duration_s)
{
        char b[LABEL_NAME_MAX], labels[LABELS_SHORT_MAX];
        escape(b, sizeof(b), benchmark);
        snprintf(labels, sizeof(labels), "benchmark=\"%s\",state=\"%s\"", b, state);
        pthread_mutex_lock(&mt->mlock);
        family_set(&mt->jobs_finished, labels, 1, true);
        size_t i = 0;
        while (i < ELEMENTSOF(duration_buckets) && duration_s > duration_buckets[i])
                i++;
        mt->duration_counts[i]++;
        mt->duration_sum += duration_s;
        mt->duration_count++;
        pthread_mutex_unlock(&mt->mlock);
}

static bool family_has(const struct family *f, const char *labels)
{
        for (size_t i = 0; i < f->n; i++)
                if (strcmp(f->s[i].labels, labels) == 0)
                        return true;
        return false;
}

/* Modes of device u (its rendered uuid="..." prefix) already exported. */
static size_t modes_of(const struct metrics *mt, const char *prefix)
{
        size_t n = 0, len = strlen(prefix);

        for (size_t i = 0; i < mt->measured_at.n; i++)
                n += strncmp(mt->measured_at.s[i].labels, prefix, len) == 0;
        return n;
}

const char *const metrics_result_paths[] = {
    "benchmark", "measurements[].name", "measurements[].gbps", "measurements[].latency_us", NULL};

void metrics_part_result(struct metrics *mt, const char *uuid, const json_t *result, bool canonical)
{
        const char *bench = json_string_value(json_object_get(result, "benchmark"));

        if (bench && !canonical && strcmp(bench, "health") == 0)
                bench = "health_adhoc";
        double now = (double)now_realtime_ms() / 1000.0;
        size_t i;
        json_t *m;
        char u[LABEL_UUID_MAX], b[LABEL_NAME_MAX], n[LABEL_NAME_MAX], prefix[LABEL_PREFIX_MAX],
            labels[LABELS_MAX];

        escape(u, sizeof(u), uuid);
        escape(b, sizeof(b), bench ? bench : "unknown");
        /* Put together with stpcpy, not snprintf (two parts a job, each measurement): escape
         * leaves each piece shorter than its buffer, and the buffers are sized so they fit. */
        _Static_assert(sizeof(prefix) > sizeof("uuid=\"\",") + sizeof(u), "prefix fits");
        _Static_assert(sizeof(labels) > sizeof(prefix) + sizeof("benchmark=\"\",mode=\"\"") +
                                            sizeof(b) + sizeof(n),
                       "labels fit");
        stpcpy(stpcpy(stpcpy(prefix, "uuid=\""), u), "\",");
        pthread_mutex_lock(&mt->mlock);
        json_array_foreach(json_object_get(result, "measurements"), i, m)
        {
                json_t *g = json_object_get(m, "gbps");
                json_t *lat = json_object_get(m, "latency_us");
                const char *name = json_string_value(json_object_get(m, "name"));

                /* A sweep point names its size: sizes must not become label values. */
                if (!name || strchr(name, '@') || (!json_is_number(g) && !json_is_number(lat)))
                        continue;
                escape(n, sizeof(n), name);
                stpcpy(stpcpy(stpcpy(stpcpy(stpcpy(stpcpy(labels, prefix), "benchmark=\""), b),
                                     "\",mode=\""),
                              n),
                       "\"");
                if (!family_has(&mt->measured_at, labels) &&
                    modes_of(mt, prefix) >= METRICS_MODES_PER_DEVICE) {
                        mt->series_dropped++;
                        continue;
                }
                /* A latency mode's figure is its latency; its bytes per second would be a
                 * bandwidth of nothing worth plotting. */
                if (json_is_number(lat))
                        family_set(&mt->latency, labels, json_number_value(lat) / 1e6, false);
                else
                        family_set(&mt->bandwidth, labels, json_number_value(g) * 1e9, false);
                family_set(&mt->measured_at, labels, now, false);
        }
        pthread_mutex_unlock(&mt->mlock);
}

/* The canonical figures the fleet compares, by the health result's measurement names. The
 * managed and latency modes are left out: they judge the driver as much as the GPU. */
static const struct {
        const char *measurement, *figure;
} fleet_figures[] = {
    {MEAS_PINNED_H2D, "h2d"},
    {MEAS_PINNED_D2H, "d2h"},
    {MEAS_D2D, "d2d"},
};

static void health_figure_set(struct metrics *mt, const char *u, const char *figure,
                              const char *link, double gbps)
{
        char labels[LABELS_MAX];

        snprintf(labels, sizeof(labels), "uuid=\"%s\",figure=\"%s\",link=\"%s\"", u, figure, link);
        family_set(&mt->health_bw, labels, gbps * 1e9, false);
}

void metrics_health_result(struct metrics *mt, const char *uuid, const char *link,
                           const json_t *result, bool contended)
{
        char u[LABEL_UUID_MAX], l[TOPOLOGY_LABEL_MAX], labels[LABELS_LINK_MAX];
        size_t i;
        json_t *m;

        escape(u, sizeof(u), uuid);
        escape(l, sizeof(l), link && *link ? link : "unknown");
        snprintf(labels, sizeof(labels), "uuid=\"%s\"", u);
        pthread_mutex_lock(&mt->mlock);
        family_set(&mt->health_contended, labels, contended ? 1 : 0, false);
        json_array_foreach(contended ? NULL : json_object_get(result, "measurements"), i, m)
        {
                const char *name = json_string_value(json_object_get(m, "name"));
                json_t *g = json_object_get(m, "gbps");

                for (size_t k = 0; name && json_is_number(g) && k < ELEMENTSOF(fleet_figures); k++)
                        if (strcmp(name, fleet_figures[k].measurement) == 0)
                                health_figure_set(mt, u, fleet_figures[k].figure, l,
                                                  json_number_value(g));
        }
        pthread_mutex_unlock(&mt->mlock);
}

/* The uuid of the node result's GPU with worker index idx, or NULL. */
static const char *node_device_uuid(const json_t *result, long long idx)
{
        size_t i;
        json_t *dev;

        json_array_foreach(json_object_get(result, "devices"), i, dev)
        {
                json_t *x = json_object_get(dev, "index");
                if (json_is_integer(x) && json_integer_value(x) == idx)
                        return json_string_value(json_object_get(dev, "uuid"));
        }
        return NULL;
}

void metrics_health_node_result(struct metrics *mt, const json_t *result)
{
        size_t n = json_array_size(json_object_get(result, "devices"));
        _cleanup_free_ double *slowest = n ? calloc(n, sizeof(*slowest)) : NULL;
        _cleanup_free_ long long *to = n ? calloc(n, sizeof(*to)) : NULL;
        size_t i;
        json_t *m;

        if (!slowest || !to)
                return;
        json_array_foreach(json_object_get(result, "measurements"), i, m)
        {
                const char *method = json_string_value(json_object_get(m, "method"));
                const char *dir = json_string_value(json_object_get(m, "direction"));
                json_t *src = json_object_get(m, "src"), *dst = json_object_get(m, "dst");
                json_t *g = json_object_get(m, "gbps");

                if (!method || !dir || strcmp(method, "ce") || strcmp(dir, "uni") ||
                    !json_is_integer(src) || !json_is_integer(dst) || !json_is_number(g))
                        continue;
                long long s = json_integer_value(src);
                if (s < 0 || (size_t)s >= n)
                        continue;
                double v = json_number_value(g);
                if (slowest[s] == 0 || v < slowest[s]) {
                        slowest[s] = v;
                        to[s] = json_integer_value(dst);
                }
        }
        pthread_mutex_lock(&mt->mlock);
        for (size_t s = 0; s < n; s++) {
                const char *uuid = node_device_uuid(result, (long long)s);
                char u[LABEL_UUID_MAX], label[TOPOLOGY_LABEL_MAX], l[LABEL_LINK_MAX];

                if (!uuid || slowest[s] <= 0)
                        continue;
                /* Peers are compared over links like theirs: the slowest pair's link kind. */
                escape(l, sizeof(l),
                       topology_link_label(topology_link(result, (long long)s, to[s]), label,
                                           sizeof(label)));
                escape(u, sizeof(u), uuid);
                health_figure_set(mt, u, "peer", l, slowest[s]);
        }
        pthread_mutex_unlock(&mt->mlock);
}

static void family_print(FILE *f, const char *name, const struct family *fam)
{
        for (size_t i = 0; i < fam->n; i++)
                fprintf(f, "%s{%s} %.17g\n", name, fam->s[i].labels, fam->s[i].value);
}

/* A family whose series were pushed: its HELP and TYPE lines, then the series. */
static void family_emit(FILE *f, const char *name, const char *type, const char *help,
                        const struct family *fam)
{
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
        family_print(f, name, fam);
}

/* The job store's commits, changes and checkpoints, and whether it can commit. */
static void text_store(FILE *f, struct metrics *mt)
{
        if (!mt->daemon_state || !mt->daemon_state->store)
                return;
        struct store_wal_stats w;

        store_wal_stats(mt->daemon_state->store, &w);
        fprintf(f,
                "# HELP umd_store_commits_total SQLite commits of the job store.\n"
                "# TYPE umd_store_commits_total counter\numd_store_commits_total %" PRIu64
                "\n# HELP umd_store_changes_total Job changes committed, by whether an "
                "answer waited for the commit (a submit, a cancel, a read of a change "
                "not yet written).\n"
                "# TYPE umd_store_changes_total counter\n"
                "umd_store_changes_total{waited=\"true\"} %" PRIu64 "\n"
                "umd_store_changes_total{waited=\"false\"} %" PRIu64 "\n"
                "# HELP umd_store_writes_total Job changes written, by what was written: "
                "a job's whole row (document) or a part's state alone (part); a change a "
                "later one of its job in the same commit replaced is neither.\n"
                "# TYPE umd_store_writes_total counter\n"
                "umd_store_writes_total{kind=\"document\"} %" PRIu64 "\n"
                "umd_store_writes_total{kind=\"part\"} %" PRIu64 "\n"
                "# HELP umd_store_wal_checkpoints_total Passive checkpoints asked for as "
                "the WAL grew.\n# TYPE umd_store_wal_checkpoints_total counter\n"
                "umd_store_wal_checkpoints_total %" PRIu64 "\n"
                "# HELP umd_store_wal_restarts_total RESTART checkpoints (the WAL past "
                "three quarters of wal_max_bytes: the next commit writes it from its "
                "start).\n"
                "# TYPE umd_store_wal_restarts_total counter\n"
                "umd_store_wal_restarts_total %" PRIu64 "\n"
                "# HELP umd_store_wal_truncations_total TRUNCATE checkpoints (the writer "
                "idle: the WAL cut to nothing).\n"
                "# TYPE umd_store_wal_truncations_total counter\n"
                "umd_store_wal_truncations_total %" PRIu64 "\n",
                w.commits, w.waited_changes, w.changes - w.waited_changes, w.documents_written,
                w.parts_written, w.checkpoints, w.restarts, w.idle_truncations);
        fprintf(f,
                "# HELP umd_store_commit_failing 1 while every commit of the job store "
                "fails for the disk (read-only, I/O error, full): no part is dispatched.\n"
                "# TYPE umd_store_commit_failing gauge\numd_store_commit_failing %d\n"
                "# HELP umd_store_commit_failures_total Commits of the job store that "
                "failed for the disk.\n"
                "# TYPE umd_store_commit_failures_total counter\n"
                "umd_store_commit_failures_total %" PRIu64 "\n",
                store_commit_error(mt->daemon_state->store) != 0,
                store_commit_failures(mt->daemon_state->store));
}

/* Each GPU's families, from its entry in the device table (takes core_lock). */
static void text_devices(FILE *f, struct metrics *mt)
{
        fprintf(f, "# HELP umd_device_info The GPUs umd owns, labelled as dcgm-exporter labels "
                   "them (gpu, UUID, pci_bus_id, modelName, Hostname) to join on.\n"
                   "# TYPE umd_device_info gauge\n");
        core_lock();
        for (size_t i = 0; i < devices_size(mt->devices); i++) {
                struct device *d = devices_at(mt->devices, i);
                json_t *idx = json_object_get(d->info, "index");
                char model[LABEL_MODEL_MAX], bus[LABEL_NAME_MAX], host[LABEL_HOST_MAX];

                escape(host, sizeof(host), mt->hostname);
                escape(model, sizeof(model), json_string_value(json_object_get(d->info, "name")));
                escape(bus, sizeof(bus), json_string_value(json_object_get(d->info, "pci_bus_id")));
                fprintf(f,
                        "umd_device_info{uuid=\"%s\",gpu=\"%lld\",UUID=\"%s\",pci_bus_id=\"%s\","
                        "modelName=\"%s\",Hostname=\"%s\",fake=\"%s\"} 1\n",
                        d->uuid,
                        json_is_integer(idx) ? (long long)json_integer_value(idx)
                                             : (long long)d->index,
                        d->uuid, bus, model, host, d->fake ? "true" : "false");
        }
        fprintf(f, "# HELP umd_queue_depth Job parts waiting, per device.\n"
                   "# TYPE umd_queue_depth gauge\n");
        for (size_t i = 0; i < devices_size(mt->devices); i++)
                fprintf(f, "umd_queue_depth{uuid=\"%s\"} %zu\n", devices_at(mt->devices, i)->uuid,
                        i < mt->n_queue_depth ? atomic_load(&mt->queue_depth[i]) : 0);
        fprintf(f, "# HELP umd_device_state Current state of each device (1 for the state it is "
                   "in).\n# TYPE umd_device_state gauge\n");
        for (size_t i = 0; i < devices_size(mt->devices); i++) {
                struct device *d = devices_at(mt->devices, i);
                enum device_state cur = device_state(d);
                for (size_t s = 0; s < DEVICE_STATE_MAX; s++)
                        fprintf(f, "umd_device_state{uuid=\"%s\",state=\"%s\"} %d\n", d->uuid,
                                device_state_names[s], cur == s);
        }
        fprintf(f, "# HELP umd_device_warm 1 while a worker holds a CUDA context on the GPU (it "
                   "exits after worker_idle_s).\n# TYPE umd_device_warm gauge\n");
        for (size_t i = 0; i < devices_size(mt->devices); i++) {
                struct device *d = devices_at(mt->devices, i);
                fprintf(f, "umd_device_warm{uuid=\"%s\"} %d\n", d->uuid,
                        d->wstate == WORKER_IDLE || d->wstate == WORKER_BUSY);
        }
        fprintf(f, "# HELP umd_device_other_processes Compute processes on the GPU that are not "
                   "umd's, at the last look (absent when unknown).\n"
                   "# TYPE umd_device_other_processes gauge\n");
        for (size_t i = 0; i < devices_size(mt->devices); i++) {
                struct device *d = devices_at(mt->devices, i);
                if (d->gpu.known && d->gpu.other_processes >= 0)
                        fprintf(f, "umd_device_other_processes{uuid=\"%s\"} %d\n", d->uuid,
                                d->gpu.other_processes);
        }
        fprintf(f, "# HELP umd_worker_restarts_total Worker processes respawned, per device.\n"
                   "# TYPE umd_worker_restarts_total counter\n");
        for (size_t i = 0; i < devices_size(mt->devices); i++)
                fprintf(f, "umd_worker_restarts_total{uuid=\"%s\"} %u\n",
                        devices_at(mt->devices, i)->uuid,
                        mt->msup ? supervisor_restarts(mt->msup, i) : 0);
        fprintf(f, "# HELP umd_device_health_verdict Last health verdict per device (1 for the "
                   "verdict it has).\n# TYPE umd_device_health_verdict gauge\n");
        for (size_t i = 0; i < devices_size(mt->devices); i++) {
                struct device *d = devices_at(mt->devices, i);
                _cleanup_json_ json_t *last = xid_compose_verdict(
                    mt->daemon_state ? mt->daemon_state->xid : NULL, i, d->last_verdict);
                const char *v = json_string_value(json_object_get(last, "verdict"));
                static const char *const verdicts[] = {"pass", "warn", "fail"};
                if (!v)
                        continue;
                for (size_t k = 0; k < ELEMENTSOF(verdicts); k++)
                        fprintf(f, "umd_device_health_verdict{uuid=\"%s\",verdict=\"%s\"} %d\n",
                                d->uuid, verdicts[k], strcmp(v, verdicts[k]) == 0);
        }
        core_unlock();
}

/* The node worker's families, on hosts with one (mlock held). */
static void text_node_locked(FILE *f, struct metrics *mt, unsigned node_restarts,
                             unsigned node_crashes)
{
        if (!mt->node_known)
                return;
        static const char *const verdicts[] = {"pass", "warn", "fail"};

        fprintf(f, "# HELP umd_node_worker_state State of the node worker, which runs the "
                   "benchmarks spanning GPUs and the check of the GPU pairs (1 for the "
                   "state it is in).\n# TYPE umd_node_worker_state gauge\n");
        for (size_t s = 0; s < DEVICE_STATE_MAX; s++)
                if (s != DEVICE_PAUSED)
                        fprintf(f, "umd_node_worker_state{state=\"%s\"} %d\n",
                                device_state_names[s],
                                strcmp(mt->node_state, device_state_names[s]) == 0);
        fprintf(f,
                "# HELP umd_node_worker_warm 1 while the node worker holds CUDA contexts "
                "on the GPUs.\n# TYPE umd_node_worker_warm gauge\numd_node_worker_warm "
                "%d\n",
                mt->node_warm);
        fprintf(f,
                "# HELP umd_node_worker_restarts_total Node worker processes respawned.\n"
                "# TYPE umd_node_worker_restarts_total counter\n"
                "umd_node_worker_restarts_total %u\n"
                "# HELP umd_node_worker_crashes_total Node worker crashes.\n"
                "# TYPE umd_node_worker_crashes_total counter\n"
                "umd_node_worker_crashes_total %u\n",
                node_restarts, node_crashes);
        if (mt->node_verdict[0]) {
                fprintf(f, "# HELP umd_node_health_verdict The GPU pairs' last canonical "
                           "health verdict (1 for the verdict it has).\n"
                           "# TYPE umd_node_health_verdict gauge\n");
                for (size_t k = 0; k < ELEMENTSOF(verdicts); k++)
                        fprintf(f, "umd_node_health_verdict{verdict=\"%s\"} %d\n", verdicts[k],
                                strcmp(mt->node_verdict, verdicts[k]) == 0);
        }
}

/* The HTTP requests, the jobs finished and their durations, and the measurements (mlock held). */
static void text_jobs_locked(FILE *f, struct metrics *mt)
{
        family_emit(f, "umd_http_requests_total", "counter",
                    "HTTP requests answered, by route, method and status.", &mt->http_requests);
        family_emit(f, "umd_jobs_finished_total", "counter", "Jobs that reached a final state.",
                    &mt->jobs_finished);
        fprintf(f, "# HELP umd_job_duration_seconds Time from submission to a final state.\n"
                   "# TYPE umd_job_duration_seconds histogram\n");
        unsigned long long cum = 0;
        for (size_t i = 0; i < ELEMENTSOF(duration_buckets); i++) {
                cum += mt->duration_counts[i];
                fprintf(f, "umd_job_duration_seconds_bucket{le=\"%g\"} %llu\n", duration_buckets[i],
                        cum);
        }
        fprintf(f,
                "umd_job_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
                "umd_job_duration_seconds_sum %.6f\numd_job_duration_seconds_count %llu\n",
                mt->duration_count, mt->duration_sum, mt->duration_count);
        family_emit(
            f, "umd_bandwidth_bytes_per_second", "gauge",
            "Last measured bandwidth (at the median sample) per device, benchmark and mode.",
            &mt->bandwidth);
        family_emit(f, "umd_latency_seconds", "gauge",
                    "Last measured latency (median sample) per device, benchmark and latency mode.",
                    &mt->latency);
        family_emit(f, "umd_measurement_timestamp_seconds", "gauge",
                    "Unix time of the last measurement per device, benchmark and mode.",
                    &mt->measured_at);
        fprintf(f,
                "# HELP umd_metrics_series_dropped_total Measurements not exported because their "
                "device already has %d modes.\n# TYPE umd_metrics_series_dropped_total counter\n"
                "umd_metrics_series_dropped_total %llu\n",
                METRICS_MODES_PER_DEVICE, mt->series_dropped);
}

char *metrics_text(struct metrics *mt, size_t *ret_len)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        size_t running = atomic_load(&mt->running_parts);
        size_t total =
            mt->daemon_state && mt->daemon_state->store ? store_count(mt->daemon_state->store) : 0;

        if (!f)
                return NULL;
        fprintf(f, "# HELP umd_up 1 while umd serves.\n# TYPE umd_up gauge\numd_up 1\n");
        fprintf(f,
                "# HELP umd_build_info Version and build of umd.\n# TYPE umd_build_info gauge\n"
                "umd_build_info{version=\"%s\",build=\"%s\",cuda=\"%s\"} 1\n",
                UMD_VERSION, UMD_BUILD, UMD_CUDA_VERSION);
        fprintf(f,
                "# HELP umd_uptime_seconds Seconds since umd started.\n"
                "# TYPE umd_uptime_seconds gauge\numd_uptime_seconds %.3f\n",
                (double)(now_monotonic_ms() - mt->start_ms) / 1000.0);
        fprintf(f,
                "# HELP umd_jobs Jobs in the store.\n# TYPE umd_jobs gauge\numd_jobs %zu\n"
                "# HELP umd_jobs_running Job parts running now.\n# TYPE umd_jobs_running gauge\n"
                "umd_jobs_running %zu\n",
                total, running);
        text_store(f, mt);

        text_devices(f, mt);
        health_errors_metrics(f, mt->devices);
        health_links_metrics(f, mt->daemon_state ? mt->daemon_state->cfg : NULL, mt->devices);

        /* The supervisor's own lock is never taken under mlock; the node is its slot after the
         * GPUs. */
        unsigned node_restarts =
            mt->msup ? supervisor_restarts(mt->msup, devices_size(mt->devices)) : 0;
        unsigned node_crashes =
            mt->msup ? supervisor_crashes(mt->msup, devices_size(mt->devices)) : 0;
        pthread_mutex_lock(&mt->mlock);
        family_emit(
            f, "umd_health_bandwidth_bytes_per_second", "gauge",
            "The last canonical, undisturbed health check's fleet figures per GPU (h2d, d2h, d2d, "
            "peer), labelled with the slot's link capability, for comparison with the GPU's peers.",
            &mt->health_bw);
        family_emit(f, "umd_health_check_contended", "gauge",
                    "1 when the GPU's last canonical health check was disturbed by another process "
                    "(its figures were not taken).",
                    &mt->health_contended);
        text_node_locked(f, mt, node_restarts, node_crashes);
        text_jobs_locked(f, mt);
        pthread_mutex_unlock(&mt->mlock);
        xid_metrics(mt->daemon_state ? mt->daemon_state->xid : NULL, f);

        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        if (ret_len)
                *ret_len = len;
        return buf;
}
