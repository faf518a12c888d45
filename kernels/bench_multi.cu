/* The node worker's benchmarks, spanning GPUs: peer (every ordered pair, copy engine and SM,
 * one direction and both), managed_peer (managed memory first touched on one GPU, read by
 * another, on demand and with prefetch, against the peer copy of the same bytes), host_all
 * (every GPU copying with the host at once, against each alone) and the topology suite (d2d on
 * each GPU, then peer), and the canonical health check's pairs. Owns the node's contexts (one
 * bench_ctx per GPU, each with its own streams, gate and pool), peer access between them and the
 * link each pair reports. Timing and verification follow bench.cu's rules: CUDA events on the
 * issuing GPU's stream, small copies behind the spin-kernel gate, warm-up, verification after the
 * samples.
 *
 * Measurement names: "<method>_<uni|bidir>@S>D" (peer: method ce | sm; bidir only for S < D,
 * both directions' bytes), "on_demand@S>D", "prefetch@S>D", "peer_copy@S>D" (managed_peer),
 * "alone@G" and "all" (host_all), "d2d@G" (topology: read+write bytes). Each carries "src",
 * "dst" (absent for host_all), "method" and "direction" so that summaries never parse names. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_internal.h"

extern "C" {
#include "nvlink.h"
}

#define MULTI_MAX 16 /* GPUs the node worker opens at most */
/* A measurement's name: a MEAS_* name (24 bytes at most) and "@src>dst" (two indexes under
 * MULTI_MAX), or a check's sentence naming one GPU; snprintf cuts a longer one. */
#define MULTI_NAME_MAX 64
/* managed_peer's names: a measurement's, or its check's sentence naming two GPUs (under 60). */
#define MULTI_LONG_NAME_MAX 96
/* topology's own measurements: "d2d@g". */
#define MULTI_SHORT_NAME_MAX 32
/* A check's words for dev_verify: "GPU a's buffer after NAME copies from GPU b". */
#define MULTI_WHAT_MAX 96
/* The far end of a GPU's NVLinks as NVML names it: a PCI bus id ("00000000:18:00.0", 16 bytes
 * and the NUL), with room; nvlink_between cuts a longer one. */
#define MULTI_REMOTE_MAX 48
/* Why the node's extended tier skipped its pairs: one sentence and three numbers. */
#define MULTI_WHY_MAX 160

struct bench_multi {
        int n;
        struct bench_ctx *ctx[MULTI_MAX];
        json_t *devices; /* index, uuid, name, pci_bus_id, compute_capability, pcie of each */
        json_t *links;   /* one per ordered pair */
        bool peer[MULTI_MAX][MULTI_MAX]; /* peer access enabled from [a] to [b] */
};

/* ---------------------------------------------------------------- the node */

static json_t *link_json(struct bench_multi *m, int a, int b)
{
        const char *bus_a =
            json_string_value(json_object_get(m->ctx[a]->device_info, "pci_bus_id"));
        const char *bus_b =
            json_string_value(json_object_get(m->ctx[b]->device_info, "pci_bus_id"));
        int can = 0, rank = -1, atomics = 0, links = 0, other = 0;
        const char *why = NULL, *type;
        char remote[MULTI_REMOTE_MAX] = "";
        int r;

        cudaDeviceCanAccessPeer(&can, m->ctx[a]->ordinal, m->ctx[b]->ordinal);
        if (can) {
                cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, m->ctx[a]->ordinal,
                                          m->ctx[b]->ordinal);
                cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported,
                                          m->ctx[a]->ordinal, m->ctx[b]->ordinal);
        }
        (void)cudaGetLastError();
        r = nvlink_between(bus_a, bus_b, &links, &other, remote, sizeof(remote), &why);
        /* Without peer access the driver stages peer copies through host memory. With it, the
         * pair is on NVLink when GPU a has active links: those whose far end is GPU b, else
         * (an NVSwitch, or a far end NVML names by another PCI id) every active one. */
        if (!can)
                type = "host";
        else if (r == 0 && links + other > 0)
                type = "nvlink";
        else if (r == 0)
                type = "pcie";
        else
                type = "unknown";
        return json_pack("{s:i, s:i, s:s, s:i, s:i, s:i, s:s, s:b, s:i, s:b, s:s, s:s?}", "src", a,
                         "dst", b, "type", type, "nvlink_links",
                         strcmp(type, "nvlink") == 0 ? (links > 0 ? links : other) : 0,
                         "nvlink_links_to_peer", links, "nvlink_links_elsewhere", other,
                         "nvlink_far_end", remote, "peer_access", can != 0, "performance_rank",
                         rank, "native_atomics", atomics != 0, "source",
                         r == 0 ? "NVML NVLink state and remote PCI info; cudaDeviceCanAccessPeer"
                                : "cudaDeviceCanAccessPeer (NVML could not say)",
                         "nvml_unavailable", r == 0 ? NULL : why);
}

int bench_multi_create(const json_t *devices, const struct bench_limits *lim,
                       struct bench_multi **ret, char **ret_error)
{
        struct bench_multi *m = (struct bench_multi *)calloc(1, sizeof(*m));
        size_t i;
        json_t *d;
        int r = 0;

        if (!m)
                return -ENOMEM;
        m->devices = json_array();
        m->links = json_array();
        json_array_foreach(devices, i, d)
        {
                if (m->n == MULTI_MAX)
                        break;
                int ordinal = (int)json_integer_value(json_object_get(d, "index"));
                r = bench_ctx_create(ordinal, d, lim, &m->ctx[m->n], ret_error);
                if (r < 0) {
                        bench_multi_destroy(m);
                        return r;
                }
                json_array_append_new(
                    m->devices,
                    json_pack("{s:i, s:O?, s:O?, s:O?, s:O?, s:O?}", "index", ordinal, "uuid",
                              json_object_get(d, "uuid"), "name", json_object_get(d, "name"),
                              "pci_bus_id", json_object_get(d, "pci_bus_id"), "compute_capability",
                              json_object_get(d, "compute_capability"), "pcie",
                              json_object_get(d, "pcie")));
                m->n++;
        }
        /* Peer access both ways wherever the driver allows it, once for the process: the SM
         * copies need it, and copy-engine copies take the direct path with it. */
        for (int a = 0; a < m->n; a++)
                for (int b = 0; b < m->n; b++) {
                        int can = 0;
                        if (a == b)
                                continue;
                        if (cudaDeviceCanAccessPeer(&can, m->ctx[a]->ordinal, m->ctx[b]->ordinal) ==
                                cudaSuccess &&
                            can) {
                                cudaSetDevice(m->ctx[a]->ordinal);
                                cudaError_t e = cudaDeviceEnablePeerAccess(m->ctx[b]->ordinal, 0);
                                m->peer[a][b] =
                                    e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled;
                        }
                        (void)cudaGetLastError();
                        json_array_append_new(m->links, link_json(m, a, b));
                }
        *ret = m;
        return 0;
}

void bench_multi_destroy(struct bench_multi *m)
{
        if (!m)
                return;
        for (int g = 0; g < m->n; g++)
                bench_ctx_destroy(m->ctx[g]);
        json_decref(m->devices);
        json_decref(m->links);
        free(m);
}

uint64_t bench_multi_pool_release(struct bench_multi *m)
{
        uint64_t freed = 0;
        for (int g = 0; m && g < m->n; g++) {
                cudaSetDevice(m->ctx[g]->ordinal);
                freed += bench_pool_release(m->ctx[g]);
        }
        return freed;
}

/* ---------------------------------------------------------------- helpers */

/* Makes GPU g the job's (pool, kernels, events, errors) and the current device. */
static struct bench_ctx *use(struct bench_job *j, struct bench_multi *m, int g)
{
        j->ctx = m->ctx[g];
        cudaSetDevice(m->ctx[g]->ordinal);
        return j->ctx;
}

static json_t *pair_extra(int src, int dst, const char *method, const char *direction, int reps,
                          bool gated)
{
        json_t *x = json_pack("{s:i, s:s, s:s, s:i, s:b}", "src", src, "method", method,
                              "direction", direction, "copies_per_sample", reps, "gated", gated);
        if (x && dst >= 0)
                json_object_set_new(x, "dst", json_integer(dst));
        return x;
}

static bool list_has(const struct bench_job *j, const char *key, const char *value)
{
        const json_t *l = json_object_get(j->params, key);
        size_t i;
        json_t *v;

        if (!json_is_array(l))
                return true;
        json_array_foreach(l, i, v) if (json_is_string(v) &&
                                        strcmp(json_string_value(v), value) == 0) return true;
        return false;
}

/* Each GPU's two pool buffers: [0] the source it sends (pattern seed + g), [1] where peers
 * write to it. */
static int pair_buffers(struct bench_job *j, struct bench_multi *m, void **src, void **dst)
{
        for (int g = 0; g < m->n; g++) {
                struct bench_ctx *c = use(j, m, g);
                int r = pool_dev(j, 0, j->size, &src[g]);
                if (r >= 0)
                        r = pool_dev(j, 1, j->size, &dst[g]);
                if (r >= 0)
                        r = dev_fill(j, src[g], j->size, j->seed + (uint32_t)g, 0, c->streams[0]);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int clear(struct bench_job *j, struct bench_multi *m, int g, void *p)
{
        struct bench_ctx *c = use(j, m, g);
        CK(j, cudaMemsetAsync(p, 0, j->size, c->streams[0]));
        CK(j, cudaStreamSynchronize(c->streams[0]));
        return 0;
}

/* One copy of size bytes from GPU a's src to GPU b's dst on stream s (of GPU a), issued by
 * GPU a. */
static int copy_one(struct bench_job *j, struct bench_multi *m, bool sm, int a, int b, void *dst,
                    const void *src, cudaStream_t s)
{
        cudaSetDevice(m->ctx[a]->ordinal);
        if (sm) {
                struct bench_ctx *keep = j->ctx;
                j->ctx = m->ctx[a];
                int r = launch_copy(j, dst, src, j->size, s);
                j->ctx = keep;
                return r;
        }
        CK(j, cudaMemcpyPeerAsync(dst, m->ctx[b]->ordinal, src, m->ctx[a]->ordinal, j->size, s));
        return 0;
}

/* ---------------------------------------------------------------- peer */

/* src -> dst one way (issued on src's stream 0), or both ways at once (bidir: dst's copies on
 * its own stream 0, released by src's start event and joined before src's stop event). */
static int peer_pair(struct bench_job *j, struct bench_multi *m, void **src, void **dst, bool sm,
                     bool bidir, int a, int b, const char *name)
{
        size_t size = j->size;
        int reps = copies_per_sample(size);
        bool gated = size < BENCH_GATE_BELOW, gate_timeouts = false;
        struct bench_ctx *ca = m->ctx[a], *cb = m->ctx[b];
        std::vector<double> samples;
        char what[MULTI_WHAT_MAX];
        int r;

        r = clear(j, m, b, dst[b]);
        if (r >= 0 && bidir)
                r = clear(j, m, a, dst[a]);
        if (r < 0)
                return r;
        use(j, m, a);
        r = sample_events(
            j, samples,
            [&]() -> int { return gate_before_sample(j, gated, &gate_timeouts, ca->streams[0]); },
            [&]() -> int {
                    if (bidir) {
                            cudaSetDevice(cb->ordinal);
                            CK(j, cudaStreamWaitEvent(cb->streams[0], ca->ev_start, 0));
                    }
                    for (int k = 0; k < reps; k++) {
                            int rr = copy_one(j, m, sm, a, b, dst[b], src[a], ca->streams[0]);
                            if (rr >= 0 && bidir)
                                    rr = copy_one(j, m, sm, b, a, dst[a], src[b], cb->streams[0]);
                            if (rr < 0)
                                    return rr;
                    }
                    if (bidir) {
                            cudaSetDevice(cb->ordinal);
                            CK(j, cudaEventRecord(cb->ev_join[1], cb->streams[0]));
                            cudaSetDevice(ca->ordinal);
                            CK(j, cudaStreamWaitEvent(ca->streams[0], cb->ev_join[1], 0));
                    }
                    cudaSetDevice(ca->ordinal);
                    if (gated)
                            return gate_open(j, ca->ev_stop, ca->streams[0]);
                    return 0;
            });
        if (r < 0)
                return r;
        samples_per_copy(j, samples, reps, gated, &gate_timeouts);
        use(j, m, b);
        snprintf(what, sizeof(what), "GPU %d's buffer after %s copies from GPU %d", b, name, a);
        r = dev_verify(j, dst[b], size, j->seed + (uint32_t)a, 0, what);
        if (r >= 0 && bidir) {
                use(j, m, a);
                snprintf(what, sizeof(what), "GPU %d's buffer after %s copies from GPU %d", a, name,
                         b);
                r = dev_verify(j, dst[a], size, j->seed + (uint32_t)b, 0, what);
        }
        if (r < 0)
                return r;
        if (gate_timeouts)
                add_note(j, "%s: the spin kernel timed out before the copies were queued", name);
        return add_measurement(
            j, name, (double)size * (bidir ? 2 : 1), bidir ? "both directions" : "one direction",
            samples, false,
            pair_extra(a, b, sm ? "sm" : "ce", bidir ? "bidir" : "uni", reps, gated));
}

static int multi_peer(struct bench_job *j, struct bench_multi *m)
{
        static const char *const methods[] = {"ce", "sm"};
        void *src[MULTI_MAX] = {}, *dst[MULTI_MAX] = {};
        char name[MULTI_NAME_MAX];
        int r = pair_buffers(j, m, src, dst);

        for (int k = 0; r >= 0 && k < 2; k++) {
                bool sm = k == 1;
                if (!list_has(j, "methods", methods[k]))
                        continue;
                for (int bi = 0; r >= 0 && bi < 2; bi++) {
                        bool bidir = bi == 1;
                        if (!list_has(j, "directions", bidir ? "bidir" : "uni"))
                                continue;
                        for (int a = 0; r >= 0 && a < m->n; a++)
                                for (int b = bidir ? a + 1 : 0; r >= 0 && b < m->n; b++) {
                                        if (a == b)
                                                continue;
                                        if (sm && (!m->peer[a][b] || (bidir && !m->peer[b][a]))) {
                                                add_note(j,
                                                         "GPU %d -> GPU %d: no peer access, so no "
                                                         "SM copy (a kernel cannot reach the "
                                                         "other GPU's memory)",
                                                         a, b);
                                                continue;
                                        }
                                        snprintf(name, sizeof(name), "%s_%s@%d>%d", methods[k],
                                                 bidir ? "bidir" : "uni", a, b);
                                        r = peer_pair(j, m, src, dst, sm, bidir, a, b, name);
                                }
                }
        }
        return r;
}

/* ---------------------------------------------------------------- managed_peer */

static int managed_pair(struct bench_job *j, struct bench_multi *m, void **src, void **dst, int a,
                        int b)
{
        struct bench_ctx *ca = m->ctx[a], *cb = m->ctx[b];
        size_t size = j->size;
        void *p = NULL;
        std::vector<double> od, pf;
        char name[MULTI_LONG_NAME_MAX];
        int r;

        use(j, m, b);
        r = check_free(j, size, "managed memory (on the reading GPU)");
        if (r < 0)
                return r;
        use(j, m, a);
        r = managed_alloc(j, size, &p); /* held to GPU a's free memory */
        if (r < 0)
                return r;
        /* First touch on GPU a: its kernel writes the pattern, so the pages live there. */
        r = dev_fill(j, p, size, j->seed + (uint32_t)a, 0, ca->streams[0]);
        if (r < 0)
                goto out;

        use(j, m, b);
        {
                auto back_to_a = [&]() -> int {
                        cudaSetDevice(ca->ordinal);
                        CK(j, cudaMemPrefetchAsync(p, size, loc_dev(ca), 0, ca->streams[0]));
                        CK(j, cudaStreamSynchronize(ca->streams[0]));
                        cudaSetDevice(cb->ordinal);
                        return 0;
                };
                r = sample_events(j, od, back_to_a, [&]() -> int {
                        return launch_process(j, p, size, OP_READ, false, cb->streams[0]);
                });
                if (r >= 0)
                        r = sample_events(j, pf, back_to_a, [&]() -> int {
                                CK(j,
                                   cudaMemPrefetchAsync(p, size, loc_dev(cb), 0, cb->streams[0]));
                                return launch_process(j, p, size, OP_READ, false, cb->streams[0]);
                        });
        }
        if (r < 0)
                goto out;
        snprintf(name, sizeof(name), "managed memory read on GPU %d after GPU %d wrote it", b, a);
        r = dev_verify(j, p, size, j->seed + (uint32_t)a, 0, name);
        if (r < 0)
                goto out;
        snprintf(name, sizeof(name), MEAS_ON_DEMAND "@%d>%d", a, b);
        r = add_measurement(j, name, (double)size, "one direction", od, false,
                            pair_extra(a, b, "on_demand", "uni", 1, false));
        snprintf(name, sizeof(name), MEAS_PREFETCH "@%d>%d", a, b);
        if (r >= 0)
                r = add_measurement(j, name, (double)size, "one direction", pf, false,
                                    pair_extra(a, b, "prefetch", "uni", 1, false));
        snprintf(name, sizeof(name), MEAS_PEER_COPY "@%d>%d", a, b);
        if (r >= 0)
                r = peer_pair(j, m, src, dst, false, false, a, b, name);
out:
        cudaSetDevice(ca->ordinal);
        cudaFree(p);
        return r;
}

static int multi_managed_peer(struct bench_job *j, struct bench_multi *m)
{
        void *src[MULTI_MAX] = {}, *dst[MULTI_MAX] = {};
        int r = pair_buffers(j, m, src, dst);

        for (int g = 0; g < m->n; g++)
                if (!m->ctx[g]->concurrent_managed)
                        return job_fail(j, -ENOTSUP,
                                        "unsupported on this node: GPU %d lacks "
                                        "concurrentManagedAccess",
                                        g);
        for (int a = 0; r >= 0 && a < m->n; a++)
                for (int b = 0; r >= 0 && b < m->n; b++)
                        if (a != b)
                                r = managed_pair(j, m, src, dst, a, b);
        return r;
}

/* ---------------------------------------------------------------- host_all */

/* One GPU's copy of host_all, queued on its first stream. */
static int host_all_enqueue(struct bench_job *j, struct bench_multi *m, void **host, void **dev,
                            bool d2h, int g)
{
        struct bench_ctx *c = m->ctx[g];
        size_t size = j->size;
        cudaSetDevice(c->ordinal);
        CK(j,
           cudaMemcpyAsync(d2h ? host[g] : dev[g], d2h ? dev[g] : host[g], size,
                           d2h ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, c->streams[0]));
        return 0;
}

/* All at once: every GPU's stream held by its own gate while the copies are queued, the gates
 * released back to back; a sample (into all) is the longest GPU's span, each GPU's own into
 * per. */
static int host_all_at_once(struct bench_job *j, struct bench_multi *m, void **host, void **dev,
                            bool d2h, std::vector<double> &all,
                            std::vector<std::vector<double>> &per)
{
        int r = 0;

        for (int i = 0; r >= 0 && i < j->warmup + j->iterations; i++) {
                double longest = 0;
                if (job_cancelled(j))
                        return job_fail(j, -ECANCELED, "cancelled");
                for (int g = 0; r >= 0 && g < m->n; g++) {
                        struct bench_ctx *c = use(j, m, g);
                        r = gate_hold(j, c->streams[0]);
                        if (r < 0)
                                break;
                        CK(j, cudaEventRecord(c->ev_start, c->streams[0]));
                        r = host_all_enqueue(j, m, host, dev, d2h, g);
                        if (r < 0)
                                break;
                        CK(j, cudaEventRecord(c->ev_stop, c->streams[0]));
                }
                for (int g = 0; g < m->n; g++) {
                        j->ctx = m->ctx[g];
                        gate_release(j);
                }
                if (r < 0)
                        return r;
                for (int g = 0; g < m->n; g++) {
                        struct bench_ctx *c = use(j, m, g);
                        float ms;
                        CK(j, cudaEventSynchronize(c->ev_stop));
                        CK(j, cudaEventElapsedTime(&ms, c->ev_start, c->ev_stop));
                        if (gate_timed_out(j))
                                add_note(j,
                                         "GPU %d's spin kernel timed out: that sample may "
                                         "include launch cost",
                                         g);
                        if (i >= j->warmup)
                                per[g].push_back(ms);
                        longest = ms > longest ? ms : longest;
                }
                if (i >= j->warmup)
                        all.push_back(longest);
        }
        return r;
}

static int multi_host_all(struct bench_job *j, struct bench_multi *m)
{
        bool d2h = strcmp(param_str(j, "direction", "h2d"), "d2h") == 0;
        void *host[MULTI_MAX] = {}, *dev[MULTI_MAX] = {};
        size_t size = j->size;
        std::vector<double> all;
        std::vector<std::vector<double>> per(m->n);
        char name[MULTI_NAME_MAX];
        int r = 0;

        json_object_set_new(j->context_extra, "direction", json_string(d2h ? "d2h" : "h2d"));
        json_object_set_new(j->context_extra, "host_memory", json_string("pinned"));
        for (int g = 0; r >= 0 && g < m->n; g++) {
                struct bench_ctx *c = use(j, m, g);
                r = pool_host(j, 0, size, &host[g]);
                if (r >= 0)
                        r = pool_dev(j, 0, size, &dev[g]);
                if (r >= 0) /* the source holds GPU g's pattern, the destination zeros */
                        r = dev_fill(j, d2h ? dev[g] : host[g], size, j->seed + (uint32_t)g, 0,
                                     c->streams[0]);
                if (r >= 0)
                        r = clear(j, m, g, d2h ? host[g] : dev[g]);
        }
        if (r < 0)
                return r;
        /* Each GPU alone (the others idle). */
        for (int g = 0; r >= 0 && g < m->n; g++) {
                std::vector<double> s;
                use(j, m, g);
                r = sample_events(
                    j, s, []() -> int { return 0; },
                    [&]() -> int { return host_all_enqueue(j, m, host, dev, d2h, g); });
                snprintf(name, sizeof(name), MEAS_ALONE "@%d", g);
                if (r >= 0)
                        r = add_measurement(j, name, (double)size, "one direction", s, false,
                                            pair_extra(g, -1, "ce", d2h ? "d2h" : "h2d", 1, false));
        }
        if (r >= 0)
                r = host_all_at_once(j, m, host, dev, d2h, all, per);
        for (int g = 0; r >= 0 && g < m->n; g++) {
                use(j, m, g);
                snprintf(name, sizeof(name), "GPU %d's %s destination after the copies", g,
                         d2h ? "host" : "device");
                r = dev_verify(j, d2h ? host[g] : dev[g], size, j->seed + (uint32_t)g, 0, name);
        }
        if (r < 0)
                return r;
        json_t *per_gpu = json_array();
        for (int g = 0; g < m->n; g++) {
                struct sample_stats st;
                if (stats_compute(per[g].data(), per[g].size(), &st) == 0 && st.median > 0)
                        json_array_append_new(per_gpu, json_real((double)size / (st.median * 1e6)));
                else
                        json_array_append_new(per_gpu, json_null());
        }
        return add_measurement(j, MEAS_ALL, (double)size * m->n, "one direction", all, false,
                               json_pack("{s:s, s:o, s:s}", "direction", d2h ? "d2h" : "h2d",
                                         "per_gpu_gbps", per_gpu, "sample",
                                         "the longest GPU's span, each GPU timed by its own "
                                         "events"));
}

/* ---------------------------------------------------------------- topology */

static int multi_topology(struct bench_job *j, struct bench_multi *m)
{
        char name[MULTI_SHORT_NAME_MAX];
        int r = 0;

        for (int g = 0; r >= 0 && g < m->n; g++) {
                use(j, m, g);
                json_t *x = json_pack("{s:i, s:i, s:s, s:s}", "src", g, "dst", g, "method", "ce",
                                      "direction", "d2d");
                snprintf(name, sizeof(name), MEAS_D2D "@%d", g);
                r = d2d_measure(j, name, NULL, x);
                json_decref(x);
        }
        if (r >= 0)
                r = multi_peer(j, m);
        return r;
}

/* ---------------------------------------------------------------- health */

/* The canonical health check's part on the node: every pair's copy-engine copy, one direction
 * (daemon/health.c judges them against their links and their past). The extended tier then
 * measures them again at full_size when the quick pass's time, scaled to that size, fits what
 * is left of pairs_budget_ms, and says in the result's "plan" what it did. */
static int multi_health(struct bench_job *j, struct bench_multi *m)
{
        json_t *p = json_pack("{s:[s], s:[s]}", "methods", "ce", "directions", "uni");
        const json_t *keep = j->params;
        bool extended = strcmp(param_str(j, "tier", HEALTH_TIER_QUICK), HEALTH_TIER_EXTENDED) == 0;
        double t0 = now_ms(), budget = (double)param_int(j, "pairs_budget_ms", 0);
        uint64_t full = (uint64_t)param_int(j, "full_size", 1ll << 30), quick = j->size;
        int r;

        if (!p)
                return job_fail(j, -ENOMEM, "out of memory");
        json_object_update_missing(p, (json_t *)keep);
        j->params = p;
        r = multi_peer(j, m);
        if (r >= 0 && extended) {
                const char *what = "every GPU pair at full size";
                double took = now_ms() - t0, est = took * (double)full / (double)quick;
                double left = budget - took;
                json_t *ran = json_array(), *skipped = json_array();
                char why[MULTI_WHY_MAX];

                if (budget <= 0 || est <= left) {
                        json_array_clear(j->measurements);
                        j->size = full;
                        r = multi_peer(j, m);
                        j->size = quick;
                        json_array_append_new(ran, json_string(what));
                } else {
                        snprintf(why, sizeof(why),
                                 "skipped: %s would take about %.0f ms, and %.0f ms of the %.0f ms "
                                 "budget are left",
                                 what, est, left > 0 ? left : 0.0, budget);
                        json_array_append_new(skipped,
                                              json_pack("{s:s, s:f, s:s}", "check", what,
                                                        "estimate_ms", est, "reason", why));
                }
                json_object_set_new(j->extra_top, "tier", json_string(HEALTH_TIER_EXTENDED));
                json_object_set_new(j->extra_top, "plan",
                                    json_pack("{s:I, s:f, s:o, s:o}", "budget_ms",
                                              (json_int_t)budget, "elapsed_ms", now_ms() - t0,
                                              "ran", ran, "skipped", skipped));
        }
        j->params = keep;
        json_decref(p);
        return r;
}

/* ---------------------------------------------------------------- the run */

/* The node worker's dispatch, by catalog id (the canonical health check's GPU pairs too). */
static const bench_entry<int (*)(struct bench_job *, struct bench_multi *)> multi_benchmarks[] = {
    {"peer", multi_peer},         {"managed_peer", multi_managed_peer},
    {"host_all", multi_host_all}, {"topology", multi_topology},
    {"health", multi_health},
};

static int (*multi_find(const char *id))(struct bench_job *, struct bench_multi *)
{
        return bench_entry_find(multi_benchmarks, id);
}

bool bench_multi_implements(const char *id)
{
        return multi_find(id) != NULL;
}

int bench_multi_run(struct bench_multi *m, const char *benchmark, const json_t *params,
                    volatile sig_atomic_t *cancel, json_t **ret_result, char **ret_error)
{
        struct bench_job job = {};
        struct bench_job *j = &job;
        int (*run)(struct bench_job *, struct bench_multi *) = multi_find(benchmark);
        int r;

        if (!run)
                return job_unknown(benchmark, "the node worker", ret_error);
        if (m->n < 2)
                return backend_fail(ret_error, -ENOTSUP, "%s needs two GPUs: this node has %d",
                                    benchmark, m->n);

        r = job_begin(j, m->ctx[0], params, cancel);
        if (r < 0)
                return job_end(j, r, ret_error);
        j->access = BENCH_ACCESS_SEQUENTIAL;
        j->npages = (j->size + BENCH_PAGE_BYTES - 1) / BENCH_PAGE_BYTES;

        r = run(j, m);
        if (r < 0)
                goto out;
        {
                /* Each benchmark fails on a mismatch: reaching here means every copy checked
                 * out. */
                mark_verified(j);
                json_t *ctx =
                    json_pack("{s:i, s:i, s:I, s:I, s:i, s:i, s:b}", "driver_version",
                              m->ctx[0]->driver_version, "runtime_version",
                              m->ctx[0]->runtime_version, "buffer_bytes", (json_int_t)j->size,
                              "seed", (json_int_t)j->seed, "warmup", j->warmup, "iterations",
                              j->iterations, "buffer_reused", j->used_pool && j->all_reused);
                if (ctx)
                        json_object_update(ctx, j->context_extra);
                json_t *res = json_pack("{s:s, s:b, s:O, s:O, s:O, s:o}", "benchmark", benchmark,
                                        "fake", false, "measurements", j->measurements, "devices",
                                        m->devices, "links", m->links, "context", ctx);
                if (!res) {
                        r = job_fail(j, -ENOMEM, "out of memory");
                        goto out;
                }
                if (json_array_size(j->notes) > 0)
                        json_object_set(res, "notes", j->notes);
                json_object_update(res, j->extra_top); /* the extended health tier's plan */
                *ret_result = res;
        }
out:
        for (int g = 0; g < m->n; g++) {
                cudaSetDevice(m->ctx[g]->ordinal);
                for (int s = 0; s < BENCH_STREAMS; s++)
                        cudaStreamSynchronize(m->ctx[g]->streams[s]);
                bench_pool_trim(m->ctx[g]);
        }
        return job_end(j, r, ret_error);
}
