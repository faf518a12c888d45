/* The error state and actions of the GPUs' last canonical verdicts as Prometheus families
 * (health_errors.h's health_errors_metrics): the action each verdict asks for, the ECC counts
 * NVML keeps over the GPU's life (counters: Prometheus takes their rates) and the remapped rows.
 * Read from each device's last verdict (the figures its error checks judged), so they change
 * only with a canonical check, and say what that check saw. Labels as dcgm-exporter's (gpu,
 * UUID) to join on. */
#include <stdio.h>
#include <string.h>

#include "devices.h"
#include "health_action.h"
#include "health_errors.h"
#include "lock.h"
#include "util.h"

/* A series' labels: a GPU's index and uuid. */
#define LABELS_MAX 160

static const json_t *check_figures(const json_t *verdict, const char *name)
{
        size_t i;
        json_t *c;

        json_array_foreach(json_object_get(verdict, "checks"), i, c)
        {
                if (streq_ptr(json_string_value(json_object_get(c, "name")), name))
                        return json_object_get(c, "figures");
        }
        return NULL;
}

static void print_action(FILE *f, const char *labels, const json_t *verdict)
{
        enum health_action a;

        if (health_action_from_name(json_string_value(json_object_get(verdict, "action")), &a) < 0)
                return;
        for (int k = HEALTH_ACTION_NONE; k < _HEALTH_ACTION_MAX; k++)
                fprintf(f, "umd_gpu_health_action{%s,action=\"%s\"} %d\n", labels,
                        health_action_name(k), (int)a == k);
}

static void print_ecc(FILE *f, const char *labels, const json_t *aggregate)
{
        static const char *const places[] = {"dram", "sram"};
        static const char *const types[] = {"corrected", "uncorrected"};

        for (size_t p = 0; p < ELEMENTSOF(places); p++)
                for (size_t t = 0; t < ELEMENTSOF(types); t++) {
                        json_t *n =
                            json_object_get(json_object_get(aggregate, places[p]), types[t]);
                        if (json_is_integer(n))
                                fprintf(f,
                                        "umd_gpu_ecc_errors_total{%s,location=\"%s\",type=\"%s\"} "
                                        "%lld\n",
                                        labels, places[p], types[t],
                                        (long long)json_integer_value(n));
                }
}

static void print_remapped(FILE *f, const char *labels, const json_t *rows)
{
        static const char *const kinds[] = {"corrected", "uncorrected"};

        for (size_t k = 0; k < ELEMENTSOF(kinds); k++)
                if (json_is_integer(json_object_get(rows, kinds[k])))
                        fprintf(f, "umd_gpu_remapped_rows{%s,kind=\"%s\"} %lld\n", labels, kinds[k],
                                (long long)json_integer_value(json_object_get(rows, kinds[k])));
}

/* One of NVML's two remapping flags as a 0/1 sample of its own family: a family's samples must
 * follow its own HELP and TYPE (promtool). */
static void print_flag(FILE *f, const char *family_name, const char *labels, const json_t *flag)
{
        if (json_is_boolean(flag))
                fprintf(f, "%s{%s} %d\n", family_name, labels, json_is_true(flag));
}

static void print_remap_pending(FILE *f, const char *labels, const json_t *rows)
{
        print_flag(f, "umd_gpu_row_remap_pending", labels, json_object_get(rows, "pending"));
}

static void print_remap_failure(FILE *f, const char *labels, const json_t *rows)
{
        print_flag(f, "umd_gpu_row_remap_failure", labels, json_object_get(rows, "failure"));
}

/* Each family's HELP and TYPE, then its samples from every device. */
static void family(FILE *f, const struct devices *ds, const char *name, const char *type,
                   const char *help, void (*print)(FILE *, const char *, const json_t *),
                   const char *check)
{
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
        for (size_t i = 0; i < devices_size(ds); i++) {
                struct device *d = devices_at(ds, i);
                json_t *idx = json_object_get(d->info, "index");
                char labels[LABELS_MAX];

                if (!d->last_verdict)
                        continue;
                snprintf(labels, sizeof(labels), "gpu=\"%lld\",UUID=\"%s\"",
                         json_is_integer(idx) ? (long long)json_integer_value(idx)
                                              : (long long)d->index,
                         d->uuid);
                print(f, labels, check ? check_figures(d->last_verdict, check) : d->last_verdict);
        }
}

void health_errors_metrics(FILE *f, const struct devices *ds)
{
        core_lock();
        family(f, ds, "umd_gpu_health_action", "gauge",
               "The action the GPU's last canonical health verdict asks for (1 for its action): "
               "none < restart_job < reset_gpu < reboot_node < service.",
               print_action, NULL);
        family(f, ds, "umd_gpu_ecc_errors_total", "counter",
               "ECC errors over the GPU's life (NVML's aggregate counts) at its last canonical "
               "check, by location (dram, sram) and type (corrected, uncorrected).",
               print_ecc, "ecc_aggregate");
        family(f, ds, "umd_gpu_remapped_rows", "gauge",
               "Rows of the GPU's memory remapped, for correctable and uncorrectable errors, at "
               "its last canonical check.",
               print_remapped, "remapped_rows");
        family(f, ds, "umd_gpu_row_remap_pending", "gauge",
               "1 when a row remap waits for the GPU's reset (NVML), at its last canonical check.",
               print_remap_pending, "remapped_rows");
        family(f, ds, "umd_gpu_row_remap_failure", "gauge",
               "1 when NVML says a row remap failed (the GPU needs service), at its last canonical "
               "check.",
               print_remap_failure, "remapped_rows");
        core_unlock();
}
