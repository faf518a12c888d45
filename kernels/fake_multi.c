/* The fake model's benchmarks that span GPUs, on the node worker: peer, topology, managed_peer,
 * host_all, and the links between fake devices (UMD_FAKE_P2P degrades one for tests). */
#include "fake_model.h"

#include "catalog.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A link type of UMD_FAKE_P2P ("host", "pcie", "nvlink"): sscanf reads at most 15 letters
 * ("%15[a-z]"), so 16 with the NUL. */
#define FAKE_LINK_TYPE_MAX 16
/* A pair's model key or name prefix, "peer_sm_bidir" or "sm_bidir": under 16 bytes. */
#define FAKE_PAIR_KEY_MAX 32

/* --- several GPUs: the node worker's benchmarks --- */

#define FAKE_NVLINKS 18 /* an H200 pair as nvidia-smi topo -m shows it: NV18 */

/* The link between fake devices a and b. Tests degrade one with
 * UMD_FAKE_P2P="A-B=host,C-D=nvlink:12,E-F=pcie" (unordered pairs): "host" stands for a pair
 * whose peer access is gone, so its copies go through host memory. */
static void fake_pair_link(unsigned a, unsigned b, const char **ret_type, unsigned *ret_links)
{
        const char *env = getenv("UMD_FAKE_P2P");
        unsigned x, y, links;
        char type[FAKE_LINK_TYPE_MAX];
        int n;

        *ret_type = "nvlink";
        *ret_links = FAKE_NVLINKS;
        for (const char *p = env; p && *p;) {
                if (sscanf(p, "%u-%u=%15[a-z]%n", &x, &y, type, &n) == 3 &&
                    ((x == a && y == b) || (x == b && y == a))) {
                        if (strcmp(type, "host") == 0) {
                                *ret_type = "host";
                                *ret_links = 0;
                        } else if (strcmp(type, "pcie") == 0) {
                                *ret_type = "pcie";
                                *ret_links = 0;
                        } else if (strcmp(type, "nvlink") == 0 &&
                                   sscanf(p + n, ":%u", &links) == 1 && links >= 1 && links <= 64) {
                                *ret_links = links;
                        }
                }
                p = strchr(p, ',');
                if (p)
                        p++;
        }
}

/* What a pair's copies reach against the model's NV18 rates. */
static double fake_pair_scale(unsigned a, unsigned b)
{
        const char *type;
        unsigned links;

        fake_pair_link(a, b, &type, &links);
        if (strcmp(type, "host") == 0)
                return 24.0 / 389.0; /* staged through host memory: two PCIe hops */
        if (strcmp(type, "pcie") == 0)
                return 50.0 / 389.0;
        return (double)links / FAKE_NVLINKS;
}

/* The fake links between n devices (see fake_run_multi). */
json_t *fake_multi_links_json(unsigned n)
{
        json_t *links = json_array();

        for (unsigned a = 0; links && a < n; a++)
                for (unsigned b = 0; b < n; b++) {
                        const char *type;
                        unsigned count;

                        if (a == b)
                                continue;
                        fake_pair_link(a, b, &type, &count);
                        json_array_append_new(
                            links, json_pack("{s:i, s:i, s:s, s:i, s:b, s:s}", "src", (int)a, "dst",
                                             (int)b, "type", type, "nvlink_links", (int)count,
                                             "peer_access", strcmp(type, "host") != 0, "source",
                                             "fake: UMD_FAKE_P2P, else NV18"));
                }
        return links;
}

static int add_pair(struct fake_job *j, const char *prefix, const char *key, uint64_t size, int src,
                    int dst, const char *method, const char *direction)
{
        char name[FAKE_MEAS_NAME_MAX];
        int r;

        if (dst < 0 || dst == src)
                snprintf(name, sizeof(name), "%s@%d", prefix, src);
        else
                snprintf(name, sizeof(name), "%s@%d>%d", prefix, src, dst);
        r = fake_model_add(j, name, key, size);
        if (r < 0)
                return r;
        j->m[j->n - 1].src = src;
        j->m[j->n - 1].dst = dst;
        j->m[j->n - 1].method = method;
        j->m[j->n - 1].direction = direction;
        if (dst >= 0 && dst != src)
                j->m[j->n - 1].scale = fake_pair_scale((unsigned)src, (unsigned)dst);
        return 0;
}

/* peer's measurements (also topology's and the node's health): every ordered pair one way,
 * every pair both ways, for the methods and directions params name. */
int fake_multi_plan_pairs(struct fake_job *j, const json_t *params)
{
        static const char *const methods[] = {"ce", "sm"};
        int r = 0;

        for (size_t m = 0; m < ELEMENTSOF(methods); m++) {
                char key[FAKE_PAIR_KEY_MAX], prefix[FAKE_PAIR_KEY_MAX];

                if (!fake_model_list_has(params, "methods", methods[m]))
                        continue;
                if (fake_model_list_has(params, "directions", "uni")) {
                        snprintf(key, sizeof(key), "peer_%s_uni", methods[m]);
                        snprintf(prefix, sizeof(prefix), "%s_uni", methods[m]);
                        for (unsigned a = 0; r == 0 && a < j->n_gpus; a++)
                                for (unsigned b = 0; r == 0 && b < j->n_gpus; b++)
                                        if (a != b)
                                                r = add_pair(j, prefix, key, j->size, (int)a,
                                                             (int)b, methods[m], "uni");
                }
                if (fake_model_list_has(params, "directions", "bidir")) {
                        snprintf(key, sizeof(key), "peer_%s_bidir", methods[m]);
                        snprintf(prefix, sizeof(prefix), "%s_bidir", methods[m]);
                        for (unsigned a = 0; r == 0 && a < j->n_gpus; a++)
                                for (unsigned b = a + 1; r == 0 && b < j->n_gpus; b++)
                                        r = add_pair(j, prefix, key, j->size, (int)a, (int)b,
                                                     methods[m], "bidir");
                }
        }
        return r;
}

int fake_multi_plan_peer(struct fake_job *j)
{
        return fake_multi_plan_pairs(j, j->params);
}

int fake_multi_plan_topology(struct fake_job *j)
{
        int r = 0;

        for (unsigned g = 0; r == 0 && g < j->n_gpus; g++)
                r = add_pair(j, MEAS_D2D, "d2d_ce", j->size, (int)g, (int)g, "ce", "d2d");
        /* topology takes no directions: both, as the real suite measures */
        if (r == 0) {
                json_t *p = json_deep_copy(j->params);

                r = p ? 0 : -ENOMEM;
                if (p)
                        json_object_set_new(p, "directions", json_pack("[s, s]", "uni", "bidir"));
                if (r == 0)
                        r = fake_multi_plan_pairs(j, p);
                json_decref(p);
        }
        return r;
}

int fake_multi_plan_managed_peer(struct fake_job *j)
{
        int r = 0;

        for (unsigned a = 0; r == 0 && a < j->n_gpus; a++)
                for (unsigned b = 0; r == 0 && b < j->n_gpus; b++) {
                        if (a == b)
                                continue;
                        r = add_pair(j, MEAS_ON_DEMAND, "managed_peer_on_demand", j->size, (int)a,
                                     (int)b, "on_demand", "uni");
                        if (r == 0)
                                r = add_pair(j, MEAS_PREFETCH, "managed_peer_prefetch", j->size,
                                             (int)a, (int)b, "prefetch", "uni");
                        if (r == 0)
                                r = add_pair(j, MEAS_PEER_COPY, "managed_peer_copy", j->size,
                                             (int)a, (int)b, "ce", "uni");
                }
        return r;
}

int fake_multi_plan_host_all(struct fake_job *j)
{
        bool d2h = streq_ptr(fake_model_param_str(j->params, "direction"), "d2h");
        int r = 0;

        for (unsigned g = 0; r == 0 && g < j->n_gpus; g++)
                r = add_pair(j, MEAS_ALONE, d2h ? MEAS_PINNED_D2H : MEAS_PINNED_H2D, j->size,
                             (int)g, -1, NULL, d2h ? "d2h" : "h2d");
        /* Two H200s behind separate PCIe Gen5 switches: each keeps its own rate. */
        if (r == 0)
                r = fake_model_add(j, MEAS_ALL, d2h ? "host_all_d2h" : "host_all_h2d",
                                   j->size * j->n_gpus);
        return r;
}
