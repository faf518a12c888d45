/* The GPU error state reader (see nvml_errors.h). Cheap by design: one call per figure, no
 * address lists (the retired-page counts are asked with no room for addresses), so that a
 * canonical check can afford it on every run (bench/nvml-errors measures it). */
#include "nvml_errors.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util.h"

/* "nvmlDeviceGetRetiredPagesPendingStatus: Not Supported" and the like. */
#define ERRORS_WHY_MAX 160

static json_t *unknown(const char *fn, bool present, nvml_return r)
{
        char why[ERRORS_WHY_MAX];

        if (!present)
                snprintf(why, sizeof(why), "NVML lacks %s", fn);
        else
                snprintf(why, sizeof(why), "%s: %s", fn, nvml_strerror(r));
        return json_pack("{s:s}", "unknown", why);
}

static json_t *read_remapped(const struct nvml_api *api, nvml_device dev)
{
        unsigned corr = 0, unc = 0, pending = 0, failure = 0;
        nvml_return r = api->remapped_rows
                            ? api->remapped_rows(dev, &corr, &unc, &pending, &failure)
                            : NVML_ERROR_FUNCTION_NOT_FOUND;

        if (r != NVML_SUCCESS)
                return unknown("nvmlDeviceGetRemappedRows", api->remapped_rows, r);
        return json_pack("{s:I, s:I, s:b, s:b}", "corrected", (json_int_t)corr, "uncorrected",
                         (json_int_t)unc, "pending", pending != 0, "failure", failure != 0);
}

/* One counter, or null with *why set by the first counter that could not be read. */
static json_t *read_count(const struct nvml_api *api, nvml_device dev, int type, int counter,
                          int location, json_t **why)
{
        unsigned long long n = 0;
        nvml_return r = api->memory_errors ? api->memory_errors(dev, type, counter, location, &n)
                                           : NVML_ERROR_FUNCTION_NOT_FOUND;

        if (r == NVML_SUCCESS)
                return json_integer((json_int_t)n);
        if (!*why)
                *why = unknown("nvmlDeviceGetMemoryErrorCounter", api->memory_errors, r);
        return json_null();
}

static json_t *read_ecc(const struct nvml_api *api, nvml_device dev)
{
        static const struct {
                const char *name;
                int counter;
        } counters[] = {{"volatile", NVML_VOLATILE_ECC}, {"aggregate", NVML_AGGREGATE_ECC}};
        static const struct {
                const char *name;
                int location;
        } places[] = {{"dram", NVML_MEMORY_LOCATION_DRAM}, {"sram", NVML_MEMORY_LOCATION_SRAM}};
        json_t *ecc = json_object(), *why = NULL;

        for (size_t c = 0; ecc && c < ELEMENTSOF(counters); c++) {
                json_t *by_place = json_object();
                for (size_t p = 0; by_place && p < ELEMENTSOF(places); p++)
                        json_object_set_new(
                            by_place, places[p].name,
                            json_pack("{s:o, s:o}", "corrected",
                                      read_count(api, dev, NVML_MEMORY_ERROR_TYPE_CORRECTED,
                                                 counters[c].counter, places[p].location, &why),
                                      "uncorrected",
                                      read_count(api, dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                                 counters[c].counter, places[p].location, &why)));
                json_object_set_new(ecc, counters[c].name, by_place);
        }
        if (ecc && why)
                json_object_set(ecc, "unknown", json_object_get(why, "unknown"));
        json_decref(why);
        return ecc;
}

static json_t *read_ecc_mode(const struct nvml_api *api, nvml_device dev)
{
        int current = 0, pending = 0;
        nvml_return r =
            api->ecc_mode ? api->ecc_mode(dev, &current, &pending) : NVML_ERROR_FUNCTION_NOT_FOUND;

        if (r != NVML_SUCCESS)
                return unknown("nvmlDeviceGetEccMode", api->ecc_mode, r);
        return json_pack("{s:s, s:s}", "current", current == NVML_FEATURE_ON ? "on" : "off",
                         "pending", pending == NVML_FEATURE_ON ? "on" : "off");
}

/* Retired pages of one cause, counted without their addresses: with no room, NVML answers
 * success for none and "insufficient size" with the count for some. */
static nvml_return retired_count(const struct nvml_api *api, nvml_device dev, int cause,
                                 unsigned *ret)
{
        unsigned n = 0;
        nvml_return r = api->retired_pages(dev, cause, &n, NULL);

        if (r == NVML_SUCCESS || r == NVML_ERROR_INSUFFICIENT_SIZE) {
                *ret = n;
                return NVML_SUCCESS;
        }
        return r;
}

static json_t *read_retired(const struct nvml_api *api, nvml_device dev)
{
        unsigned sbe = 0, dbe = 0;
        int pending = 0;
        nvml_return r =
            api->retired_pages
                ? retired_count(api, dev, NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
                                &sbe)
                : NVML_ERROR_FUNCTION_NOT_FOUND;

        if (r == NVML_SUCCESS)
                r = retired_count(api, dev, NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, &dbe);
        if (r != NVML_SUCCESS)
                return unknown("nvmlDeviceGetRetiredPages", api->retired_pages, r);
        r = api->retired_pending ? api->retired_pending(dev, &pending)
                                 : NVML_ERROR_FUNCTION_NOT_FOUND;
        return json_pack(
            "{s:I, s:I, s:o}", "single_bit", (json_int_t)sbe, "double_bit", (json_int_t)dbe,
            "pending", r == NVML_SUCCESS ? json_boolean(pending == NVML_FEATURE_ON) : json_null());
}

const char *nvml_recovery_action_name(long long value)
{
        static const char *const names[] = {
            [NVML_GPU_RECOVERY_ACTION_NONE] = "none",
            [NVML_GPU_RECOVERY_ACTION_GPU_RESET] = "gpu_reset",
            [NVML_GPU_RECOVERY_ACTION_NODE_REBOOT] = "node_reboot",
            [NVML_GPU_RECOVERY_ACTION_DRAIN_P2P] = "drain_p2p",
            [NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET] = "drain_and_reset",
        };
        return value >= 0 && value < (long long)ELEMENTSOF(names) ? names[value] : NULL;
}

static json_t *read_recovery(const struct nvml_api *api, nvml_device dev)
{
        struct nvml_field_value fv = {.field_id = NVML_FI_DEV_GET_GPU_RECOVERY_ACTION};
        nvml_return r =
            api->field_values ? api->field_values(dev, 1, &fv) : NVML_ERROR_FUNCTION_NOT_FOUND;
        long long v;

        if (r == NVML_SUCCESS)
                r = fv.status;
        if (r != NVML_SUCCESS)
                return unknown("nvmlDeviceGetFieldValues(GPU_RECOVERY_ACTION)", api->field_values,
                               r);
        v = fv.value_type == NVML_VALUE_TYPE_UNSIGNED_LONG_LONG ? (long long)fv.value.ull
                                                                : (long long)fv.value.ui;
        return json_pack("{s:I, s:s?}", "value", (json_int_t)v, "name",
                         nvml_recovery_action_name(v));
}

static json_t *read_inforom(const struct nvml_api *api, nvml_device dev)
{
        nvml_return r =
            api->validate_inforom ? api->validate_inforom(dev) : NVML_ERROR_FUNCTION_NOT_FOUND;

        if (r == NVML_SUCCESS || r == NVML_ERROR_CORRUPTED_INFOROM)
                return json_pack("{s:b}", "valid", r == NVML_SUCCESS);
        return unknown("nvmlDeviceValidateInforom", api->validate_inforom, r);
}

static long long now_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* One reading: its key, how it is read. */
struct errors_reader {
        const char *key;
        json_t *(*read)(const struct nvml_api *api, nvml_device dev);
};

static const struct errors_reader errors_readers[] = {
    {NVML_ERRORS_REMAPPED_ROWS, read_remapped},   {NVML_ERRORS_ECC, read_ecc},
    {NVML_ERRORS_ECC_MODE, read_ecc_mode},        {NVML_ERRORS_RETIRED_PAGES, read_retired},
    {NVML_ERRORS_RECOVERY_ACTION, read_recovery}, {NVML_ERRORS_INFOROM, read_inforom},
};

json_t *nvml_errors_read(const struct nvml_api *api, nvml_device dev, json_t **inforom_kept)
{
        long long t0 = now_us();
        json_t *o = json_pack("{s:s}", "source", "nvml"), *took = json_object();

        for (size_t i = 0; o && took && i < ELEMENTSOF(errors_readers); i++) {
                const struct errors_reader *rd = &errors_readers[i];
                long long t = now_us();
                json_t *v;

                /* The InfoROM's checksum reads the whole InfoROM (tens of ms on an H100): it
                 * changes only with a firmware write, so one read serves the caller's life. */
                if (inforom_kept && *inforom_kept && !strcmp(rd->key, NVML_ERRORS_INFOROM)) {
                        v = json_copy(*inforom_kept);
                        if (v)
                                json_object_set_new(v, "kept", json_true());
                        json_object_set_new(o, rd->key, v);
                        continue;
                }
                v = rd->read(api, dev);
                json_object_set_new(took, rd->key, json_integer(now_us() - t));
                if (inforom_kept && !*inforom_kept && !strcmp(rd->key, NVML_ERRORS_INFOROM) && v &&
                    json_object_get(v, "valid"))
                        *inforom_kept = json_copy(v);
                json_object_set_new(o, rd->key, v);
        }
        if (!o || !took) {
                json_decref(o);
                json_decref(took);
                return NULL;
        }
        json_object_set_new(o, "read_us", took);
        json_object_set_new(o, "elapsed_us", json_integer(now_us() - t0));
        return o;
}

json_t *nvml_errors_unknown(const char *why)
{
        static const char *const keys[] = {NVML_ERRORS_REMAPPED_ROWS,   NVML_ERRORS_ECC,
                                           NVML_ERRORS_ECC_MODE,        NVML_ERRORS_RETIRED_PAGES,
                                           NVML_ERRORS_RECOVERY_ACTION, NVML_ERRORS_INFOROM};
        json_t *o = json_pack("{s:s}", "source", "none");

        for (size_t i = 0; o && i < ELEMENTSOF(keys); i++)
                json_object_set_new(o, keys[i], json_pack("{s:s}", "unknown", why));
        return o;
}
