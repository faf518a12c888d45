/* The canonical health check's verdicts on a finished part: its baseline from the store's past
 * passing parts (the median itself is health.c's pure health_baseline), the link to judge
 * against, stamping the verdict on the part and the device, and the rule that a first "fail"
 * is run once more before it counts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "config.h"
#include "devices.h"
#include "health.h"
#include "health_links.h"
#include "job_doc.h"
#include "job_internal.h"
#include "job_persist.h"
#include "jobs.h"
#include "jsonutil.h"
#include "log.h"
#include "models.h"
#include "store.h"
#include "util.h"
#include "xid.h"

static json_t *part_verdict(const json_t *part)
{
        return json_object_get(part, "verdict");
}

/* The past passing health parts of uuid (newest first, at most health_baseline_runs), excluding
 * job self; NULL when the store cannot say (no baseline then). */
static json_t *past_parts(struct jobs *js, const char *uuid, const struct job *self)
{
        json_t *parts = NULL;

        /* Read-your-writes: parts that finished a moment ago are still being committed. */
        job_persist_sync(js);
        if (job_doc_health_parts(js->store, uuid, self->id, true, js->cfg->health_baseline_runs,
                                 &parts) < 0)
                return NULL;
        return parts;
}

/* The link to judge against: a fake device's test state, else what the worker read during the
 * check (live), else what NVML says now, else what discovery saw. */
static json_t *health_link(const struct device *d, const json_t *result)
{
        const json_t *pcie = json_object_get(json_object_get(result, "link"), "pcie");

        if ((d->fake || !json_is_integer(json_object_get(pcie, "current_gen"))) && d->gpu.known &&
            d->gpu.current_gen > 0)
                return json_pack("{s:i, s:i, s:i, s:i}", "current_gen", d->gpu.current_gen,
                                 "current_width", d->gpu.current_width, "max_gen", d->gpu.max_gen,
                                 "max_width", d->gpu.max_width);
        if (json_is_integer(json_object_get(pcie, "current_gen")))
                return json_deep_copy(pcie);
        return json_deep_copy(json_object_get(d->info, "pcie"));
}

/* The link counters the last verdict kept (health_links.h), for their rates; a verdict from
 * before they were kept has only its replay counter, without a time: judged from the next. */
static const json_t *verdict_counters(const json_t *v)
{
        return json_object_get(v, "link_counters");
}

/* The fields every verdict carries, then the rule every canonical check follows: a first
 * "fail" is not trusted alone, so the part goes back to the queue (with why) to run once more,
 * and only that run counts. Returns 1 when re-queued (v is kept in first_attempt), 0 when v is
 * the verdict to record, -1 when re-queueing failed (the part is failed, v dropped). */
static int verdict_stamp_or_retry(struct jobs *js, struct job *j, size_t i, json_t *v,
                                  const json_t *baseline, const char *uuid, const json_t *result,
                                  const char *waiting)
{
        json_t *p = job_part_doc(j, i);

        json_object_set(v, "baseline", (json_t *)baseline);
        json_object_set_new(v, "job", json_string(j->id));
        json_object_set_new(v, "uuid", json_string(uuid));
        json_object_set_new(v, "time", job_now_json(js));
        if (!streq_ptr(json_string_value(json_object_get(v, "verdict")), "fail") ||
            j->parts[i].attempts >= 2)
                return 0;
        json_object_set_new(p, "first_attempt",
                            json_pack("{s:o, s:O}", "verdict", v, "result", result));
        j->parts[i].st = JOB_QUEUED;
        job_persist_part_changed(j, i);
        json_object_set_new(p, "state", json_string("queued"));
        json_object_set_new(p, "waiting", json_string(waiting));
        if (job_enqueue(js, j, i) < 0) {
                job_set_part(js, j, i, JOB_FAILED, NULL, "out of memory while re-queueing");
                return -1;
        }
        return 1;
}

/* Keeps v as its tier's last verdict in *by_tier: a new object each time, because readers
 * (device_to_json, the node's entry) hand the old one out by reference to be dumped after the
 * lock is released. On allocation failure *by_tier is left as it was. */
static void remember_tier(json_t **by_tier, json_t *v)
{
        const char *tier = json_string_value(json_object_get(v, "tier"));
        json_t *next = *by_tier ? json_copy(*by_tier) : json_object();

        if (!next || json_object_set(next, tier ? tier : HEALTH_TIER_QUICK, v) < 0) {
                json_decref(next);
                return;
        }
        json_decref(*by_tier);
        *by_tier = next;
}

/* Judges a canonical health part. A first "fail" is not trusted alone: the part goes back to
 * the queue to run once more, and only the second run's verdict counts (returns true then). */
bool job_verdict_judge(struct jobs *js, struct job *j, size_t i, struct device *d,
                       const json_t *result)
{
        size_t runs = 0;
        _cleanup_json_ json_t *past = past_parts(js, d->uuid, j);
        _cleanup_json_ json_t *baseline = health_baseline(js->cfg, past, &runs);
        _cleanup_json_ json_t *pcie = health_link(d, result);
        _cleanup_json_ json_t *expect =
            models_expectation(json_string_value(json_object_get(d->info, "name")));
        _cleanup_json_ json_t *counters =
            d->gpu.known ? health_links_counters(&d->gpu, now_realtime_ms()) : NULL;
        json_t *v = health_verdict(js->cfg, result, pcie, expect, baseline, runs);

        if (!v)
                return false;
        health_links_judge(js->cfg, v, counters, verdict_counters(d->last_verdict), pcie, expect,
                           result);
        json_object_set(v, "pcie", pcie);
        if (counters)
                json_object_set(v, "link_counters", counters);
        if (d->gpu.known && d->gpu.replay_counter >= 0)
                json_object_set_new(v, "pcie_replay_counter", json_integer(d->gpu.replay_counter));
        int r = verdict_stamp_or_retry(js, j, i, v, baseline, d->uuid, result,
                                       "re-running a failed health check once before the GPU "
                                       "is marked fail");
        if (r != 0) {
                if (r > 0)
                        log_info("device %zu (%s): health check failed; running it once more",
                                 d->index, d->uuid);
                return r > 0;
        }
        /* After the retry rule: an Xid's failing state is no reason to run the copies again. */
        json_t *with_xid = xid_compose_verdict(js->xid, d->index, v);
        if (with_xid) {
                json_decref(v);
                v = with_xid;
        }
        json_object_set(job_part_doc(j, i), "verdict", v);
        json_decref(d->last_verdict);
        d->last_verdict = v;
        remember_tier(&d->verdict_by_tier, v);
        d->last_check_ms = jobs_realtime_ms(js);
        log_info("device %zu (%s): health %s", d->index, d->uuid,
                 json_string_value(json_object_get(v, "verdict")));
        return false;
}

/* health_judge for the node's part: every pair of GPUs. Same retry of a first fail. */
bool job_verdict_judge_node(struct jobs *js, struct job *j, size_t i, const json_t *result)
{
        size_t runs = 0;
        _cleanup_json_ json_t *past = past_parts(js, "node", j);
        _cleanup_json_ json_t *baseline = health_pair_baseline(js->cfg, past, &runs);
        _cleanup_json_ json_t *expects = json_array();
        json_t *dev;
        size_t k;

        /* Each GPU's model, by the node result's device index, for the pairs' NVLink rates. */
        json_array_foreach(json_object_get(result, "devices"), k, dev)
        {
                json_t *e = models_expectation(json_string_value(json_object_get(dev, "name")));
                json_array_append_new(expects, e ? e : json_null());
        }
        json_t *v = health_pair_verdict(js->cfg, result, expects, baseline, runs);

        if (!v)
                return false;
        int r = verdict_stamp_or_retry(js, j, i, v, baseline, "node", result,
                                       "re-running a failed check of the GPU pairs once before "
                                       "the node is marked fail");
        if (r != 0) {
                if (r > 0)
                        log_info("node: the check of the GPU pairs failed; running it once more");
                return r > 0;
        }
        json_object_set(job_part_doc(j, i), "verdict", v);
        json_decref(js->node_last_verdict);
        js->node_last_verdict = v;
        remember_tier(&js->node_verdict_by_tier, v);
        log_info("node: GPU pairs health %s", json_string_value(json_object_get(v, "verdict")));
        return false;
}

/* How many of the newest verdicts of a device are read back after a restart to find each
 * tier's last one. */
#define RESTORE_PARTS 32

/* The newest verdict of each tier among parts (newest first) into *by_tier. */
static void restore_tiers(json_t **by_tier, const json_t *parts)
{
        size_t k;
        json_t *p;

        json_array_foreach(parts, k, p)
        {
                json_t *v = (json_t *)part_verdict(p);
                const char *tier = json_string_value(json_object_get(v, "tier"));
                if (!v)
                        continue;
                if (!*by_tier)
                        *by_tier = json_object();
                if (*by_tier && !json_object_get(*by_tier, tier ? tier : HEALTH_TIER_QUICK))
                        json_object_set(*by_tier, tier ? tier : HEALTH_TIER_QUICK, v);
        }
}

/* After recovery: each device's newest verdict in the store, and the GPU pairs' (the node's
 * part), so /v1/health serves them from the first request after a restart; and each tier's
 * newest among the last RESTORE_PARTS. */
void job_verdict_restore(struct jobs *js)
{
        _cleanup_json_ json_t *node = NULL;

        if (have_node() && !js->node_last_verdict &&
            job_doc_health_parts(js->store, "node", NULL, false, RESTORE_PARTS, &node) == 0 &&
            json_array_size(node) > 0) {
                js->node_last_verdict = json_incref(part_verdict(json_array_get(node, 0)));
                restore_tiers(&js->node_verdict_by_tier, node);
        }
        for (size_t i = 0; i < devices_count(); i++) {
                struct device *d = devices_get(i);
                _cleanup_json_ json_t *parts = NULL;

                if (d && !d->last_verdict &&
                    job_doc_health_parts(js->store, d->uuid, NULL, false, RESTORE_PARTS, &parts) ==
                        0 &&
                    json_array_size(parts) > 0) {
                        d->last_verdict = json_incref(part_verdict(json_array_get(parts, 0)));
                        restore_tiers(&d->verdict_by_tier, parts);
                }
        }
}

void job_verdict_attach_xid(struct jobs *js, struct xid_watch *w)
{
        js->xid = w;
}
