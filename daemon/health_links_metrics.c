/* The link and inventory metrics (issue 58): each GPU's PCIe replays and NVLink errors as
 * counters (what NVML counts, never a rate: Prometheus takes rates, and the fleet rules in
 * packaging/prometheus/fleet.yml compare them with the model's fleet median), its NVLinks up,
 * and the node's GPUs expected and present. Read from devices.c's last look under core_lock at
 * scrape time; labelled gpu and UUID as dcgm-exporter labels them, to join on umd_device_info. */
#include "health_links.h"

#include <stdio.h>

#include "config.h"
#include "devices.h"
#include "lock.h"

/* Each family's HELP and TYPE, once, before its first series. */
static void header(FILE *f, bool *done, const char *name, const char *type, const char *help)
{
        if (*done)
                return;
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
        *done = true;
}

static long long gpu_index(const struct device *d)
{
        json_t *idx = json_object_get(d->info, "index");
        return json_is_integer(idx) ? (long long)json_integer_value(idx) : (long long)d->index;
}

static void nvlink_series(FILE *f, const struct device *d, bool *done)
{
        for (size_t l = 0; l < GPU_STATE_NVLINKS_MAX; l++)
                for (size_t k = 0; k < _GPU_NVLINK_KIND_MAX; k++) {
                        if (d->gpu.nvlink_errors[l][k] < 0)
                                continue;
                        header(f, done, "umd_gpu_nvlink_errors_total", "counter",
                               "NVLink errors per link and kind (crc: flit CRC, replay, "
                               "recovery), as NVML counts them.");
                        fprintf(f,
                                "umd_gpu_nvlink_errors_total{gpu=\"%lld\",UUID=\"%s\",link=\"%zu\","
                                "kind=\"%s\"} %lld\n",
                                gpu_index(d), d->uuid, l, health_nvlink_kind_name(k),
                                d->gpu.nvlink_errors[l][k]);
                }
}

/* One series of a per-GPU family, its header first; nothing where value is unknown (< 0). */
static void gpu_series(FILE *f, const struct device *d, bool *done, const char *name,
                       const char *type, const char *help, long long value)
{
        if (!d->gpu.known || value < 0)
                return;
        header(f, done, name, type, help);
        fprintf(f, "%s{gpu=\"%lld\",UUID=\"%s\"} %lld\n", name, gpu_index(d), d->uuid, value);
}

void health_links_metrics(FILE *f, const struct umd_config *cfg, const struct devices *ds)
{
        bool replays = false, active = false, nvlink = false;

        core_lock();
        size_t n = devices_size(ds);
        for (size_t i = 0; i < n; i++)
                gpu_series(f, devices_at(ds, i), &replays, "umd_gpu_pcie_replays_total", "counter",
                           "PCIe replays (link-level retries) as NVML counts them.",
                           devices_at(ds, i)->gpu.replay_counter);
        for (size_t i = 0; i < n; i++)
                gpu_series(f, devices_at(ds, i), &active, "umd_gpu_nvlinks_active", "gauge",
                           "NVLinks up, as NVML says (the model table says how many there "
                           "should be).",
                           devices_at(ds, i)->gpu.nvlinks_active);
        for (size_t i = 0; i < n; i++)
                if (devices_at(ds, i)->gpu.known)
                        nvlink_series(f, devices_at(ds, i), &nvlink);
        core_unlock();
        fprintf(f,
                "# HELP umd_node_gpus_expected The GPUs this node should have (expected_gpus; 0: "
                "not checked).\n# TYPE umd_node_gpus_expected gauge\n"
                "umd_node_gpus_expected %u\n"
                "# HELP umd_node_gpus_present The GPUs umd found and owns.\n"
                "# TYPE umd_node_gpus_present gauge\numd_node_gpus_present %zu\n",
                cfg ? cfg->expected_gpus : 0, n);
}
