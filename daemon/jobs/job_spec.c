/* A submitted job body turned into a validated spec: the benchmark, its normalized params
 * (catalog_validate), the devices, priority, timeout and labels. Every rule answers with a
 * problem naming the field. Knows nothing of the queue or the store (job_index.c). */
#include "job_spec.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "catalog.h"
#include "config.h"
#include "devices.h"
#include "job_estimate.h"
#include "jsonutil.h"
#include "util.h"

/* A problem's field for one entry of a list, "devices[63]". */
#define LIST_FIELD_MAX 32

static const char *const priority_names[] = {"high", "normal", "low"};

int spec_priority_from_string(const char *s)
{
        for (size_t i = 0; s && i < ELEMENTSOF(priority_names); i++)
                if (strcmp(s, priority_names[i]) == 0)
                        return (int)i;
        return -1;
}

const char *spec_priority_name(int prio)
{
        return prio >= 0 && (size_t)prio < ELEMENTSOF(priority_names) ? priority_names[prio]
                                                                      : "normal";
}

static const char *const submit_keys[] = {"benchmark", "device",    "devices", "params",
                                          "priority",  "timeout_s", "labels",  "busy_policy"};

static int parse_device_value(const json_t *v, const char *field, size_t *devs, size_t *n,
                              struct problem *p)
{
        ssize_t idx = -1;
        if (json_is_integer(v)) {
                json_int_t i = json_integer_value(v);
                if (i >= 0 && (size_t)i < devices_count())
                        idx = (ssize_t)i;
                else
                        return problem_set(p, 400, field,
                                           "unknown device %lld: this host has %zu (see GET "
                                           "/v1/devices)",
                                           (long long)i, devices_count());
        } else if (json_is_string(v)) {
                idx = devices_lookup_uuid(json_string_value(v));
                if (idx < 0)
                        return problem_set(p, 400, field,
                                           "unknown device '%.64s' (see GET /v1/devices)",
                                           json_string_value(v));
        } else {
                return problem_set(p, 400, field, "must be a device index, a GPU uuid or \"all\"");
        }
        for (size_t k = 0; k < *n; k++)
                if (devs[k] == (size_t)idx)
                        return problem_set(p, 400, field, "device %zd is named twice", idx);
        devs[(*n)++] = (size_t)idx;
        return 0;
}

/* The device set of a submission: "device": N|UUID|"all" or "devices": [..]|"all"; default
 * all. */
static int parse_devices(const json_t *body, size_t *devs, size_t *ret_n, struct problem *p)
{
        json_t *one = json_object_get(body, "device"), *many = json_object_get(body, "devices");
        const char *field = one ? "device" : "devices";
        json_t *v = one ? one : many;
        size_t n = 0;
        int r;

        if (one && many)
                return problem_set(p, 400, "devices", "give either device or devices, not both");
        if (devices_count() == 0)
                return problem_set(p, 503, field, "this host has no usable GPU: %s",
                                   devices_empty_reason());
        if (!v || (json_is_string(v) && strcmp(json_string_value(v), "all") == 0)) {
                for (size_t i = 0; i < devices_count(); i++)
                        devs[n++] = i;
        } else if (one) {
                r = parse_device_value(v, "device", devs, &n, p);
                if (r < 0)
                        return r;
        } else if (json_is_array(v)) {
                size_t i;
                json_t *e;
                char f[LIST_FIELD_MAX];
                if (json_array_size(v) == 0)
                        return problem_set(p, 400, "devices", "must name at least one device");
                if (json_array_size(v) > devices_count())
                        return problem_set(p, 400, "devices", "names more devices than exist (%zu)",
                                           devices_count());
                json_array_foreach(v, i, e)
                {
                        snprintf(f, sizeof(f), "devices[%zu]", i);
                        r = parse_device_value(e, f, devs, &n, p);
                        if (r < 0)
                                return r;
                }
        } else {
                r = parse_device_value(v, "devices", devs, &n, p);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < n; i++) {
                struct device *d = devices_get(devs[i]);
                if (d->wstate == WORKER_FAULTED) {
                        int rr = problem_set(p, 503, field, "device %zu (%s) is faulted: %s",
                                             d->index, d->uuid, d->reason);
                        p->retry_after_s = 30;
                        return rr;
                }
        }
        *ret_n = n;
        return 0;
}

static bool label_key_ok(const char *k)
{
        if (!k[0])
                return false;
        for (const char *c = k; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                      (*c >= '0' && *c <= '9') || *c == '_' || *c == '-' || *c == '.' || *c == '/'))
                        return false;
        return true;
}

static int parse_labels(const struct umd_config *cfg, const json_t *labels, struct problem *p)
{
        const char *k;
        json_t *v;

        if (!labels)
                return 0;
        if (!json_is_object(labels))
                return problem_set(p, 400, "labels", "must be an object of string values");
        if (json_object_size(labels) > cfg->max_labels)
                return problem_set(p, 400, "labels", "at most %u labels (max_labels)",
                                   cfg->max_labels);
        json_object_foreach((json_t *)labels, k, v)
        {
                if (strlen(k) > cfg->max_label_key_len || !label_key_ok(k))
                        return problem_set(p, 400, "labels",
                                           "label keys are 1 to %u characters of A-Z a-z 0-9 _ - . "
                                           "/ (max_label_key_len)",
                                           cfg->max_label_key_len);
                if (!json_is_string(v))
                        return problem_set(p, 400, "labels", "label '%.64s' must be a string", k);
                if (json_string_length(v) > cfg->max_label_value_len)
                        return problem_set(p, 400, "labels",
                                           "label '%.64s' is longer than %u bytes "
                                           "(max_label_value_len)",
                                           k, cfg->max_label_value_len);
        }
        return 0;
}

static int parse_priority(const json_t *v, int *ret, struct problem *p)
{
        if (!v) {
                *ret = 1;
                return 0;
        }
        int prio = json_is_string(v) ? spec_priority_from_string(json_string_value(v)) : -1;
        if (prio >= 0) {
                *ret = prio;
                return 0;
        }
        return problem_set(p, 400, "priority", "must be \"high\", \"normal\" or \"low\"");
}

static int parse_timeout(const struct umd_config *cfg, const json_t *v, unsigned *ret,
                         struct problem *p)
{
        if (!v) {
                *ret = cfg->job_timeout_default_s;
                return 0;
        }
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > (json_int_t)cfg->job_timeout_max_s)
                return problem_set(p, 400, "timeout_s",
                                   "must be a whole number of seconds from 1 to %u "
                                   "(job_timeout_max_s)",
                                   cfg->job_timeout_max_s);
        *ret = (unsigned)json_integer_value(v);
        return 0;
}

int spec_check_body(const json_t *body, const struct bench_def **ret_bench, struct problem *p)
{
        const char *key;
        json_t *v;

        if (!json_is_object(body))
                return problem_set(p, 400, "", "the body must be a JSON object");
        json_object_foreach((json_t *)body, key, v)
        {
                bool known = false;
                for (size_t i = 0; i < ELEMENTSOF(submit_keys); i++)
                        known = known || strcmp(key, submit_keys[i]) == 0;
                if (!known)
                        return problem_set(p, 400, key,
                                           "unknown field '%.64s' (known: benchmark, device, "
                                           "devices, params, priority, timeout_s, labels, "
                                           "busy_policy)",
                                           key);
        }
        json_t *bn = json_object_get(body, "benchmark");
        if (!json_is_string(bn))
                return problem_set(p, 400, "benchmark",
                                   "benchmark is required: a name from GET /v1/benchmarks");
        const struct bench_def *b = catalog_find(json_string_value(bn));
        if (!b)
                return problem_set(p, 400, "benchmark",
                                   "unknown benchmark '%.64s' (see GET /v1/benchmarks)",
                                   json_string_value(bn));
        *ret_bench = b;
        return 0;
}

static int parse_busy_policy(const json_t *v, struct problem *p)
{
        if (!v || (json_is_string(v) && busy_policy_from_string(json_string_value(v)) >= 0))
                return 0;
        return problem_set(p, 400, "busy_policy", "must be \"wait\", \"run\" or \"fail\"");
}

bool spec_is_canonical_health(const json_t *body)
{
        const json_t *params = json_object_get(body, "params");

        return streq_ptr(json_string_value(json_object_get(body, "benchmark")), "health") &&
               (!params || (json_is_object(params) &&
                            (json_object_size(params) == 0 ||
                             (json_object_size(params) == 1 && json_object_get(params, "tier")))));
}

/* The canonical health check's parameters come from the configuration only, so no client can
 * change what a verdict is made of; the tier is the one thing a client picks. The extended
 * tier's budget is the node's (health_extended_budget_s): each GPU's part runs beside the
 * others, so each gets two thirds of it when the GPU pairs are checked after them (pairs: true),
 * the pairs the last third; a node without pairs gives the GPUs all of it. NULL on OOM. */
static json_t *canonical_health_params(const struct umd_config *cfg, const json_t *tier, bool pairs)
{
        json_int_t budget = (json_int_t)cfg->health_extended_budget_s * 1000;
        json_int_t gpu = pairs ? budget * 2 / 3 : budget;
        json_t *p = json_pack("{s:I, s:I, s:I}", "size", (json_int_t)cfg->health_size, "iterations",
                              (json_int_t)cfg->health_iterations, "d2d_size",
                              (json_int_t)cfg->health_d2d_size);

        if (p && tier) {
                json_object_set(p, "tier", (json_t *)tier);
                if (streq_ptr(json_string_value(tier), HEALTH_TIER_EXTENDED)) {
                        json_object_set_new(p, "budget_ms", json_integer(gpu));
                        json_object_set_new(p, "pairs_budget_ms", json_integer(budget - gpu));
                }
        }
        return p;
}

int spec_parse(const struct umd_config *cfg, const json_t *body, const struct bench_def *b,
               struct job_spec *ret, struct problem *p)
{
        struct job_spec s = {.bench = b, .prio = 1};
        struct catalog_limits lim = {.max_buffer_bytes = cfg->max_buffer_bytes};
        struct catalog_error cerr = {0};
        _cleanup_json_ json_t *canonical = NULL;
        bool all_fake = true;
        int r;

        r = parse_devices(body, s.devs, &s.n_devs, p);
        if (r < 0)
                return r;
        if (b->multi_gpu) {
                /* It runs on the node worker and takes every GPU, so naming fewer is a mistake
                 * best said now; so is a host with one GPU. */
                const char *field = json_object_get(body, "device") ? "device" : "devices";
                if (devices_count() < 2)
                        return problem_set(p, 400, "benchmark",
                                           "%s needs two GPUs: this node has %zu", b->name,
                                           devices_count());
                if (s.n_devs != devices_count())
                        return problem_set(p, 400, field,
                                           "%s spans every GPU of the node: give no device, or "
                                           "\"all\"",
                                           b->name);
        }
        for (size_t i = 0; i < s.n_devs; i++)
                all_fake = all_fake && devices_get(s.devs[i])->fake;
        s.canonical = spec_is_canonical_health(body);
        if (s.canonical && !(canonical = canonical_health_params(
                                 cfg, json_object_get(json_object_get(body, "params"), "tier"),
                                 have_node() && s.n_devs == devices_count())))
                return problem_set(p, 500, "", "out of memory");
        r = catalog_validate(b, s.canonical ? canonical : json_object_get(body, "params"), &lim,
                             all_fake, &s.params, &cerr);
        if (r < 0)
                return problem_set(p, 400,
                                   !s.canonical || streq_ptr(cerr.field, "params.tier") ? cerr.field
                                   : streq_ptr(cerr.field, "params.d2d_size") ? "health_d2d_size"
                                                                              : "health_size",
                                   "%s%s",
                                   s.canonical ? "the configured canonical health check: " : "",
                                   cerr.detail);
        if ((r = parse_priority(json_object_get(body, "priority"), &s.prio, p)) < 0 ||
            (r = parse_timeout(cfg, json_object_get(body, "timeout_s"), &s.timeout_s, p)) < 0 ||
            (r = parse_labels(cfg, json_object_get(body, "labels"), p)) < 0 ||
            (r = parse_busy_policy(json_object_get(body, "busy_policy"), p)) < 0 ||
            /* The canonical check's size is the administrator's (config.c checks it). */
            (!s.canonical &&
             (r = job_estimate_check(cfg, b, s.params, s.devs, s.n_devs, s.timeout_s, p)) < 0)) {
                json_decref(s.params);
                return r;
        }
        *ret = s;
        return 0;
}

void spec_done(struct job_spec *s)
{
        json_decref(s->params);
        s->params = NULL;
}

/* ---- a job document read back from storage ---- */

static bool opt_string(const json_t *doc, const char *key)
{
        const json_t *v = json_object_get(doc, key);
        return !v || json_is_null(v) || json_is_string(v);
}

static int stored_labels(const json_t *labels, char *why, size_t whylen)
{
        const char *k;
        json_t *v;

        if (!labels)
                return 0;
        if (!json_is_object(labels)) {
                snprintf(why, whylen, "\"labels\" is not an object");
                return -EINVAL;
        }
        /* The submission rules for keys and values; not the configured counts and lengths,
         * which may have been lowered since: that makes a job old, not damaged. */
        json_object_foreach((json_t *)labels, k, v)
        {
                if (!label_key_ok(k)) {
                        snprintf(why, whylen, "label key '%.64s' is not A-Z a-z 0-9 _ - . /", k);
                        return -EINVAL;
                }
                if (!json_is_string(v)) {
                        snprintf(why, whylen, "label '%.64s' is not a string", k);
                        return -EINVAL;
                }
        }
        return 0;
}

static int stored_part(const json_t *part, size_t i, char *why, size_t whylen)
{
        const json_t *dev = json_object_get(part, "device"), *res = json_object_get(part, "result");
        /* A GPU's part names its index; the node's part (a benchmark spanning GPUs, or the
         * canonical check's pairs) names "all" and the uuid "node". */
        bool node = streq_ptr(json_string_value(dev), "all") &&
                    streq_ptr(json_string_value(json_object_get(part, "uuid")), "node");

        if (!json_is_object(part) ||
            (!node && (!json_is_integer(dev) || json_integer_value(dev) < 0)) ||
            !json_is_string(json_object_get(part, "uuid")) ||
            !json_is_string(json_object_get(part, "state")) || !opt_string(part, "started") ||
            !opt_string(part, "finished") || !opt_string(part, "error") ||
            (res && !json_is_null(res) && !json_is_object(res))) {
                snprintf(why, whylen,
                         "part %zu is not an object with an integer device (or \"all\" on the "
                         "node), string uuid and "
                         "state, string or null times and error, and an object or null result",
                         i);
                return -EINVAL;
        }
        return 0;
}

int spec_validate_stored(const json_t *doc, char *why, size_t whylen)
{
        const json_t *parts = json_object_get(doc, "parts"), *prio, *timeout, *part;
        const char *bench;
        size_t i;
        int r;

        if (!json_is_object(doc)) {
                snprintf(why, whylen, "not a JSON object");
                return -EINVAL;
        }
        bench = json_string_value(json_object_get(doc, "benchmark"));
        if (!bench || !bench[0]) {
                snprintf(why, whylen, "\"benchmark\" is not a name");
                return -EINVAL;
        }
        if (!json_is_string(json_object_get(doc, "state")) ||
            !json_is_string(json_object_get(doc, "id"))) {
                snprintf(why, whylen, "\"id\" or \"state\" is not a string");
                return -EINVAL;
        }
        if (json_object_get(doc, "params") && !json_is_object(json_object_get(doc, "params"))) {
                snprintf(why, whylen, "\"params\" is not an object");
                return -EINVAL;
        }
        prio = json_object_get(doc, "priority");
        if (prio &&
            !(json_is_string(prio) && spec_priority_from_string(json_string_value(prio)) >= 0)) {
                snprintf(why, whylen, "\"priority\" is not high, normal or low");
                return -EINVAL;
        }
        timeout = json_object_get(doc, "timeout_s");
        if (timeout && !(json_is_integer(timeout) && json_integer_value(timeout) >= 0)) {
                snprintf(why, whylen, "\"timeout_s\" is not a whole number");
                return -EINVAL;
        }
        if (!opt_string(doc, "client") || !opt_string(doc, "idempotency_key") ||
            !opt_string(doc, "kind") || !opt_string(doc, "created") ||
            !opt_string(doc, "started") || !opt_string(doc, "finished") ||
            !opt_string(doc, "request")) {
                snprintf(why, whylen,
                         "one of client, idempotency_key, kind, created, started, finished, "
                         "request is neither a string nor null");
                return -EINVAL;
        }
        r = stored_labels(json_object_get(doc, "labels"), why, whylen);
        if (r < 0)
                return r;
        if (!json_is_array(parts) || json_array_size(parts) == 0 ||
            json_array_size(parts) > SPEC_MAX_DEVICES) {
                snprintf(why, whylen, "\"parts\" is not an array of 1 to %d parts",
                         SPEC_MAX_DEVICES);
                return -EINVAL;
        }
        json_array_foreach(parts, i, part)
        {
                r = stored_part(part, i, why, whylen);
                if (r < 0)
                        return r;
        }
        return 0;
}
