/* Matrices, link rates and the slowest pair of results spanning GPUs (see topology.h). */
#include "topology.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pcie.h"
#include "util.h"

/* A summary's sentence: the fastest and the slowest pair, their links and figures. */
#define SENTENCE_MAX 512
/* A pair's key in the summary: two indexes, "S->D". */
#define PAIR_KEY_MAX 32

static double gbps(const json_t *m)
{
        json_t *g = json_object_get(m, "gbps");
        return json_is_number(g) ? json_number_value(g) : 0;
}

static long long int_or(const json_t *o, const char *k, long long def)
{
        json_t *v = json_object_get(o, k);
        return json_is_integer(v) ? (long long)json_integer_value(v) : def;
}

static const json_t *device_at(const json_t *devices, long long index)
{
        size_t i;
        json_t *d;

        json_array_foreach(devices, i, d)
        {
                if (int_or(d, "index", -1) == index)
                        return d;
        }
        return NULL;
}

static double pcie_gbps(const json_t *dev)
{
        const json_t *p = json_object_get(dev, "pcie");
        return pcie_link_gbps((int)int_or(p, "current_gen", 0), (int)int_or(p, "current_width", 0));
}

/* One direction of one NVLink, by the GPU's generation (compute capability major). */
static double nvlink_per_link_gbps(const json_t *dev)
{
        const char *cc = json_string_value(json_object_get(dev, "compute_capability"));
        int major = cc ? atoi(cc) : 9;

        return major >= 10 ? 50 : major >= 7 ? 25 : 20;
}

double topology_link_expected_gbps(const json_t *link, const json_t *devices)
{
        const char *type = json_string_value(json_object_get(link, "type"));
        const json_t *a = device_at(devices, int_or(link, "src", -1));
        const json_t *b = device_at(devices, int_or(link, "dst", -1));
        long long links = int_or(link, "nvlink_links", 0);

        if (!type)
                return 0;
        if (strcmp(type, "nvlink") == 0 && links > 0)
                return (double)links * nvlink_per_link_gbps(a ? a : b);
        double pa = pcie_gbps(a), pb = pcie_gbps(b);
        if (pa <= 0 || pb <= 0)
                return pa > pb ? pa : pb;
        return pa < pb ? pa : pb;
}

const char *topology_link_label(const json_t *link, char *buf, size_t len)
{
        const char *type = json_string_value(json_object_get(link, "type"));

        if (!type)
                snprintf(buf, len, "?");
        else if (strcmp(type, "nvlink") == 0)
                snprintf(buf, len, "NV%lld", int_or(link, "nvlink_links", 0));
        else if (strcmp(type, "pcie") == 0)
                snprintf(buf, len, "PCIe");
        else
                snprintf(buf, len, "%s", type);
        return buf;
}

const json_t *topology_link(const json_t *result, long long src, long long dst)
{
        size_t i;
        json_t *l;

        json_array_foreach(json_object_get(result, "links"), i, l)
        {
                if (int_or(l, "src", -1) == src && int_or(l, "dst", -1) == dst)
                        return l;
        }
        return NULL;
}

/* n x n of null. */
static json_t *matrix_new(size_t n)
{
        json_t *rows = json_array();

        for (size_t r = 0; rows && r < n; r++) {
                json_t *row = json_array();
                for (size_t c = 0; row && c < n; c++)
                        json_array_append_new(row, json_null());
                json_array_append_new(rows, row);
        }
        return rows;
}

static void matrix_set(json_t *m, long long r, long long c, json_t *v)
{
        json_t *row = json_array_get(m, (size_t)r);

        if (row && c >= 0 && (size_t)c < json_array_size(row))
                json_array_set_new(row, (size_t)c, v);
        else
                json_decref(v);
}

static const char *matrix_title(const char *method, const char *direction)
{
        static const struct {
                const char *method, *direction, *title;
        } titles[] = {
            {"ce", "uni", "memcpy CE (cudaMemcpyPeerAsync), one direction, GB/s"},
            {"ce", "bidir", "memcpy CE, both directions at once (sum), GB/s"},
            {"sm", "uni", "memcpy SM (kernel writing peer memory), one direction, GB/s"},
            {"sm", "bidir", "memcpy SM, both directions at once (sum), GB/s"},
        };
        for (size_t i = 0; i < ELEMENTSOF(titles); i++)
                if (strcmp(titles[i].method, method) == 0 &&
                    strcmp(titles[i].direction, direction) == 0)
                        return titles[i].title;
        return "GB/s";
}

static json_t *peer_summary(const json_t *result)
{
        const json_t *ms = json_object_get(result, "measurements");
        const json_t *devices = json_object_get(result, "devices");
        size_t n = json_array_size(devices), i;
        json_t *m, *matrices = json_object(), *d2d = json_array(), *links, *expected;
        const json_t *slow = NULL;
        char sentence[SENTENCE_MAX], label[TOPOLOGY_LABEL_MAX];

        if (n < 2)
                return NULL;
        for (size_t g = 0; g < n; g++)
                json_array_append_new(d2d, json_null());
        json_array_foreach(ms, i, m)
        {
                const char *method = json_string_value(json_object_get(m, "method"));
                const char *dir = json_string_value(json_object_get(m, "direction"));
                long long s = int_or(m, "src", -1), d = int_or(m, "dst", -1);
                char key[PAIR_KEY_MAX];

                if (!method || !dir || s < 0 || d < 0)
                        continue;
                if (strcmp(dir, "d2d") == 0) {
                        if ((size_t)s < n)
                                json_array_set_new(d2d, (size_t)s, json_real(gbps(m)));
                        continue;
                }
                snprintf(key, sizeof(key), "%s_%s", method, dir);
                json_t *mx = json_object_get(matrices, key);
                if (!mx) {
                        mx = json_pack("{s:s, s:s, s:s, s:s, s:o}", "name", key, "title",
                                       matrix_title(method, dir), "method", method, "direction",
                                       dir, "gbps", matrix_new(n));
                        json_object_set_new(matrices, key, mx);
                }
                matrix_set(json_object_get(mx, "gbps"), s, d, json_real(gbps(m)));
                if (strcmp(dir, "bidir") == 0) /* one run carries both directions */
                        matrix_set(json_object_get(mx, "gbps"), d, s, json_real(gbps(m)));
                /* The slowest pair: among one-direction copy-engine copies, else any one
                 * direction. */
                if (strcmp(dir, "uni") == 0 &&
                    (!slow ||
                     (strcmp(method, "ce") == 0 &&
                      strcmp(json_string_value(json_object_get(slow, "method")), "ce")) ||
                     (strcmp(method, json_string_value(json_object_get(slow, "method"))) == 0 &&
                      gbps(m) < gbps(slow))))
                        slow = m;
        }
        links = matrix_new(n);
        expected = matrix_new(n);
        for (size_t s = 0; s < n; s++)
                for (size_t d = 0; d < n; d++) {
                        const json_t *l = topology_link(result, (long long)s, (long long)d);
                        if (!l)
                                continue;
                        matrix_set(links, (long long)s, (long long)d,
                                   json_string(topology_link_label(l, label, sizeof(label))));
                        double e = topology_link_expected_gbps(l, devices);
                        if (e > 0)
                                matrix_set(expected, (long long)s, (long long)d, json_real(e));
                }

        json_t *arr = json_array(), *mx;
        const char *k;
        json_object_foreach(matrices, k, mx) json_array_append(arr, mx);
        json_decref(matrices);

        json_t *slowest = json_null();
        if (slow) {
                long long s = int_or(slow, "src", -1), d = int_or(slow, "dst", -1);
                const json_t *l = topology_link(result, s, d);
                double e = l ? topology_link_expected_gbps(l, devices) : 0;
                const char *method = json_string_value(json_object_get(slow, "method"));
                const char *how = strcmp(method, "ce") == 0 ? "copy engine" : "SM copy";

                topology_link_label(l, label, sizeof(label));
                if (e > 0)
                        snprintf(sentence, sizeof(sentence),
                                 "The slowest pair is GPU %lld -> GPU %lld at %.1f GB/s (%s, one "
                                 "direction): %.0f%% of the %.0f GB/s its link (%s) should carry.",
                                 s, d, gbps(slow), how, 100 * gbps(slow) / e, e, label);
                else
                        snprintf(sentence, sizeof(sentence),
                                 "The slowest pair is GPU %lld -> GPU %lld at %.1f GB/s (%s, one "
                                 "direction); its link (%s) has no known expected rate.",
                                 s, d, gbps(slow), how, label);
                slowest =
                    json_pack("{s:I, s:I, s:f, s:s, s:s, s:o, s:o}", "src", (json_int_t)s, "dst",
                              (json_int_t)d, "gbps", gbps(slow), "method", method, "link", label,
                              "expected_gbps", e > 0 ? json_real(e) : json_null(), "fraction",
                              e > 0 ? json_real(gbps(slow) / e) : json_null());
        } else {
                snprintf(sentence, sizeof(sentence),
                         "No one-direction copy between GPUs was measured, so no pair can be "
                         "compared with its link.");
        }
        return json_pack("{s:I, s:o, s:o, s:o, s:o, s:o, s:s}", "gpus", (json_int_t)n, "matrices",
                         arr, "d2d_gbps", d2d, "links", links, "expected_gbps", expected, "slowest",
                         slowest, "conclusion", sentence);
}

static const json_t *find_pair(const json_t *ms, const char *method, long long s, long long d)
{
        size_t i;
        json_t *m;

        json_array_foreach(ms, i, m)
        {
                if (streq_ptr(json_string_value(json_object_get(m, "method")), method) &&
                    int_or(m, "src", -1) == s && int_or(m, "dst", -1) == d)
                        return m;
        }
        return NULL;
}

static json_t *managed_peer_summary(const json_t *result)
{
        const json_t *ms = json_object_get(result, "measurements");
        json_t *pairs = json_array(), *m;
        double worst = -1;
        char sentence[SENTENCE_MAX] = "No pair was measured.";
        size_t i;

        json_array_foreach(ms, i, m)
        {
                long long s = int_or(m, "src", -1), d = int_or(m, "dst", -1);
                if (!streq_ptr(json_string_value(json_object_get(m, "method")), "ce"))
                        continue;
                double copy = gbps(m);
                const json_t *od = find_pair(ms, "on_demand", s, d);
                const json_t *pf = find_pair(ms, "prefetch", s, d);
                json_array_append_new(
                    pairs,
                    json_pack("{s:I, s:I, s:f, s:f, s:f, s:o, s:o}", "src", (json_int_t)s, "dst",
                              (json_int_t)d, "peer_copy_gbps", copy, "on_demand_gbps", gbps(od),
                              "prefetch_gbps", gbps(pf), "on_demand_ratio",
                              copy > 0 ? json_real(gbps(od) / copy) : json_null(), "prefetch_ratio",
                              copy > 0 ? json_real(gbps(pf) / copy) : json_null()));
                if (copy > 0 && (worst < 0 || gbps(od) / copy < worst)) {
                        worst = gbps(od) / copy;
                        snprintf(sentence, sizeof(sentence),
                                 "Managed memory touched on GPU %lld and read on GPU %lld: on "
                                 "demand %.1f GB/s (%.2fx the peer copy's %.1f GB/s), with "
                                 "prefetch %.1f GB/s (%.2fx).",
                                 s, d, gbps(od), gbps(od) / copy, copy, gbps(pf), gbps(pf) / copy);
                }
        }
        return json_pack("{s:o, s:s}", "pairs", pairs, "conclusion", sentence);
}

static json_t *host_all_summary(const json_t *result)
{
        const json_t *ms = json_object_get(result, "measurements");
        json_t *alone = json_array(), *m;
        double sum = 0, all = 0;
        const char *dir = "h2d";
        char sentence[SENTENCE_MAX];
        size_t i, n = 0;

        json_array_foreach(ms, i, m)
        {
                const char *name = json_string_value(json_object_get(m, "name"));
                if (!name)
                        continue;
                if (strncmp(name, "alone@", 6) == 0) {
                        json_array_append_new(alone, json_real(gbps(m)));
                        sum += gbps(m);
                        n++;
                        if (json_is_string(json_object_get(m, "direction")))
                                dir = json_string_value(json_object_get(m, "direction"));
                } else if (strcmp(name, "all") == 0) {
                        all = gbps(m);
                }
        }
        snprintf(sentence, sizeof(sentence),
                 "All %zu GPUs copying %s at once: %.1f GB/s, %.0f%% of the %.1f GB/s they reach "
                 "one at a time.",
                 n, dir, all, sum > 0 ? 100 * all / sum : 0, sum);
        return json_pack("{s:o, s:f, s:f, s:o, s:s}", "alone_gbps", alone, "sum_alone_gbps", sum,
                         "all_gbps", all, "ratio", sum > 0 ? json_real(all / sum) : json_null(),
                         "conclusion", sentence);
}

bool topology_summarises(const char *benchmark)
{
        static const char *const names[] = {"peer", "topology", "managed_peer", "host_all"};

        for (size_t i = 0; benchmark && i < sizeof(names) / sizeof(names[0]); i++)
                if (strcmp(benchmark, names[i]) == 0)
                        return true;
        return false;
}

json_t *topology_summary(const char *benchmark, const json_t *result)
{
        if (!topology_summarises(benchmark) ||
            !json_is_array(json_object_get(result, "measurements")))
                return NULL;
        if (strcmp(benchmark, "peer") == 0 || strcmp(benchmark, "topology") == 0)
                return peer_summary(result);
        if (strcmp(benchmark, "managed_peer") == 0)
                return managed_peer_summary(result);
        if (strcmp(benchmark, "host_all") == 0)
                return host_all_summary(result);
        return NULL;
}
