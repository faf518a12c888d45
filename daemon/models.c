/* Owns the GPU model table (models.h): the shipped entries with their sources, the reader of
 * gpu_models_file (INI, a section per model) and the lookup by CUDA device name. It never judges
 * anything (health.c does) and never reads a GPU. */
#include "models.h"

#include <errno.h>
#include <fnmatch.h>
#include <ini.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "log.h"
#include "util.h"

/* A model's name and its fnmatch(3) glob on CUDA's device name, as the file gives them. */
#define MODEL_NAME_MAX  64
#define MODEL_MATCH_MAX 128
/* Where an entry came from: the file's path and its section, or "built in". */
#define MODEL_SOURCE_MAX 320
/* A file's error: its path, the line and what is wrong there. */
#define MODELS_ERR_MAX 256

#define MODELS_MAX 256 /* entries from the file, at most: a file is an admin's, not a client's */

struct model {
        char name[MODEL_NAME_MAX];
        char match[MODEL_MATCH_MAX]; /* fnmatch(3) glob on CUDA's device name */
        int pcie_gen, pcie_width;    /* 0: no PCIe expectation */
        int nvlinks;                 /* -1: unknown; 0: none */
        double nvlink_gbps;          /* a link, one direction, decimal GB/s; 0: unknown */
        double memory_gbps;          /* nominal device memory bandwidth, decimal GB/s; 0: unknown */
        char source[MODEL_SOURCE_MAX];
        bool from_file;
        /* Error-state thresholds (health_errors.h), from the file only; -1: the default. */
        int retired_pages_max, sram_uncorrected_max;
        int ecc_off_passes; /* -1: the default (warn), 0: warn, 1: pass (a model run without ECC) */
};

/* NVLink rates a direction: NVLink 3 and 4 carry 25 GB/s a link (A100: 12 links, 600 GB/s both
 * ways; H100/H200: 18 links, 900 GB/s), NVLink 5 50 GB/s (B200: 18 links, 1.8 TB/s). Memory
 * figures are the vendor's nominal peak (decimal TB/s): a device-to-device copy reaches 80-85% of
 * it (an H200: 4.06 of 4.8 TB/s, bench/results/multi-gpu/topology.txt). The first match wins, so
 * the more specific names come first. */
static const struct model shipped[] = {
    {"NVIDIA H200 NVL", "NVIDIA H200 NVL*", 5, 16, 18, 25, 4800,
     "NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/h200): H200 NVL, 4.8 TB/s HBM3e, 2- or "
     "4-way NVLink bridge 900 GB/s, PCIe Gen5 128 GB/s"},
    {"NVIDIA H200", "NVIDIA H200*", 5, 16, 18, 25, 4800,
     "NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/h200): H200 SXM, 4.8 TB/s HBM3e, NVLink "
     "900 GB/s, PCIe Gen5 128 GB/s"},
    {"NVIDIA H100 NVL", "NVIDIA H100 NVL*", 5, 16, 12, 25, 3900,
     "NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/h100): H100 NVL, 3.9 TB/s HBM3, NVLink "
     "bridge 600 GB/s, PCIe Gen5 128 GB/s"},
    {"NVIDIA H100 PCIe", "NVIDIA H100 PCIe*", 5, 16, 12, 25, 2000,
     "NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/h100): H100 PCIe, 2 TB/s HBM2e, NVLink "
     "bridge 600 GB/s, PCIe Gen5 128 GB/s"},
    {"NVIDIA H100 SXM", "NVIDIA H100 80GB HBM3*", 5, 16, 18, 25, 3350,
     "NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/h100): H100 SXM, 3.35 TB/s HBM3, NVLink "
     "900 GB/s, PCIe Gen5 128 GB/s"},
    {"NVIDIA B200", "NVIDIA B200*", 5, 16, 18, 50, 8000,
     "NVIDIA DGX B200 datasheet (nvidia.com/dgx-b200): 8 GPUs, 64 TB/s HBM3e in all (8 TB/s a "
     "GPU), fifth-generation NVLink 1.8 TB/s a GPU; PCIe Gen5 x16 to the host"},
    {"NVIDIA GH200 144GB HBM3e", "NVIDIA GH200 144G*", 0, 0, 18, 25, 4900,
     "NVIDIA GH200 Grace Hopper Superchip datasheet (nvidia.com/gh200): 144 GB HBM3e at 4.9 TB/s, "
     "NVLink 900 GB/s; the host link is NVLink-C2C (900 GB/s), not PCIe, so no PCIe expectation"},
    {"NVIDIA GH200 480GB", "NVIDIA GH200*", 0, 0, 18, 25, 4000,
     "NVIDIA GH200 Grace Hopper Superchip datasheet (nvidia.com/gh200): 96 GB HBM3 at 4 TB/s, "
     "NVLink 900 GB/s; the host link is NVLink-C2C (900 GB/s), not PCIe, so no PCIe expectation"},
    {"NVIDIA A100 SXM4 80GB", "NVIDIA A100-SXM4-80GB*", 4, 16, 12, 25, 2039,
     "NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/a100): A100 80GB SXM, 2,039 GB/s HBM2e, "
     "NVLink 600 GB/s, PCIe Gen4 64 GB/s"},
    {"NVIDIA A100 SXM4 40GB", "NVIDIA A100-SXM4-40GB*", 4, 16, 12, 25, 1555,
     "NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/a100): A100 40GB SXM, 1,555 GB/s HBM2, "
     "NVLink 600 GB/s, PCIe Gen4 64 GB/s"},
    {"NVIDIA A100 80GB PCIe", "NVIDIA A100 80GB PCIe*", 4, 16, 12, 25, 1935,
     "NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/a100): A100 80GB PCIe, 1,935 GB/s HBM2e, "
     "NVLink bridge for 2 GPUs 600 GB/s, PCIe Gen4 64 GB/s"},
    {"NVIDIA A100 PCIe 40GB", "NVIDIA A100-PCIE-40GB*", 4, 16, 12, 25, 1555,
     "NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/a100): A100 40GB PCIe, 1,555 GB/s HBM2, "
     "NVLink bridge for 2 GPUs 600 GB/s, PCIe Gen4 64 GB/s"},
    {"NVIDIA L40S", "NVIDIA L40S*", 4, 16, 0, 0, 864,
     "NVIDIA L40S datasheet (nvidia.com/l40s): 48 GB GDDR6 at 864 GB/s, PCIe Gen4 x16 64 GB/s "
     "both ways, no NVLink"},
};

static struct model *table;
static size_t n_table;

static int find_name(const struct model *t, size_t n, const char *name)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(t[i].name, name) == 0)
                        return (int)i;
        return -1;
}

struct reader {
        struct model *file; /* the file's entries, in the order of their sections */
        size_t n;
        char err[MODELS_ERR_MAX];
};

static int set_int(const char *v, int min, int max, int *ret)
{
        uint64_t u;
        if (parse_uint64(v, (uint64_t)min, (uint64_t)max, &u) < 0)
                return -EINVAL;
        *ret = (int)u;
        return 0;
}

static int set_gbps(const char *v, double *ret)
{
        char *end = NULL;
        errno = 0;
        double d = strtod(v, &end);
        if (errno || end == v || *end || !isfinite(d) || d < 0 || d > 1e6)
                return -EINVAL;
        *ret = d;
        return 0;
}

/* The shipped entries set no error-state threshold: health_errors.h's defaults apply. */
static void errors_defaults(struct model *m)
{
        m->retired_pages_max = m->sram_uncorrected_max = m->ecc_off_passes = -1;
}

/* The error-state keys (health_errors.h); 1 when key is one of them (r: the parse). */
static bool read_errors_key(struct model *m, const char *key, const char *value, int *r)
{
        if (strcmp(key, "retired_pages_max") == 0)
                *r = set_int(value, 0, 1 << 20, &m->retired_pages_max);
        else if (strcmp(key, "sram_uncorrected_max") == 0)
                *r = set_int(value, 0, 1 << 20, &m->sram_uncorrected_max);
        else if (strcmp(key, "ecc_off") == 0) {
                m->ecc_off_passes = strcmp(value, "pass") == 0 ? 1 : 0;
                *r = strcmp(value, "pass") == 0 || strcmp(value, "warn") == 0 ? 0 : -EINVAL;
        } else
                return false;
        return true;
}

/* One key of one section: the section's entry starts as the shipped one of that name, if any. */
static int read_line(void *user, const char *section, const char *key, const char *value)
{
        struct reader *rd = user;
        int i = find_name(rd->file, rd->n, section), r = 0;

        if (!*section) {
                snprintf(rd->err, sizeof(rd->err), "'%s' outside a [model] section", key);
                return 0;
        }
        if (strlen(section) >= sizeof(rd->file->name)) {
                snprintf(rd->err, sizeof(rd->err), "model name [%.40s...] is too long", section);
                return 0;
        }
        if (i < 0) {
                if (rd->n >= MODELS_MAX) {
                        snprintf(rd->err, sizeof(rd->err), "more than %d models", MODELS_MAX);
                        return 0;
                }
                int s = find_name(shipped, ELEMENTSOF(shipped), section);
                struct model m = {.nvlinks = -1};
                if (s >= 0) {
                        m = shipped[s];
                        errors_defaults(&m);
                        snprintf(m.source, sizeof(m.source),
                                 "gpu_models_file, over the shipped entry");
                } else {
                        snprintf(m.name, sizeof(m.name), "%s", section);
                        snprintf(m.match, sizeof(m.match), "%s", section);
                        snprintf(m.source, sizeof(m.source), "gpu_models_file");
                        errors_defaults(&m);
                }
                m.from_file = true;
                rd->file[rd->n] = m;
                i = (int)rd->n++;
        }
        struct model *m = &rd->file[i];
        if (strcmp(key, "match") == 0) {
                if (!*value || strlen(value) >= sizeof(m->match))
                        r = -EINVAL;
                else
                        snprintf(m->match, sizeof(m->match), "%s", value);
        } else if (strcmp(key, "source") == 0)
                snprintf(m->source, sizeof(m->source), "%s", value);
        else if (strcmp(key, "pcie_gen") == 0)
                r = set_int(value, 0, 7, &m->pcie_gen);
        else if (strcmp(key, "pcie_width") == 0)
                r = set_int(value, 0, 32, &m->pcie_width);
        else if (strcmp(key, "nvlinks") == 0)
                r = set_int(value, 0, 64, &m->nvlinks);
        else if (strcmp(key, "nvlink_gbps") == 0)
                r = set_gbps(value, &m->nvlink_gbps);
        else if (strcmp(key, "memory_gbps") == 0)
                r = set_gbps(value, &m->memory_gbps);
        else if (!read_errors_key(m, key, value, &r)) {
                snprintf(rd->err, sizeof(rd->err),
                         "unknown key '%s' (match, source, pcie_gen, pcie_width, nvlinks, "
                         "nvlink_gbps, memory_gbps, retired_pages_max, sram_uncorrected_max, "
                         "ecc_off)",
                         key);
                return 0;
        }
        if (r < 0) {
                snprintf(rd->err, sizeof(rd->err), "[%s] %s: bad value '%s'", section, key, value);
                return 0;
        }
        return 1;
}

/* The file's entries into rd (a missing file leaves rd empty and returns 0). */
static int read_file(const char *path, struct reader *rd)
{
        FILE *f = NULL;
        int r = fopen_regular(path, &f);

        if (r == -ENOENT) {
                log_debug("no GPU model file %s: the shipped model table alone", path);
                return 0;
        }
        if (r == -EISDIR || r == -EBADFD) {
                fprintf(stderr, "umd: GPU model file %s: not a regular file\n", path);
                return -EINVAL;
        }
        if (r < 0) {
                fprintf(stderr, "umd: cannot read GPU model file %s: %s\n", path, strerror(-r));
                return r;
        }
        int line = ini_parse_file(f, read_line, rd);
        fclose(f);
        if (line != 0) {
                fprintf(stderr, "umd: %s:%d: %s\n", path, line,
                        rd->err[0] ? rd->err : "not a '[model]' or 'key = value' line");
                return -EINVAL;
        }
        return 0;
}

int models_load(const char *path)
{
        struct reader rd = {.file = calloc(MODELS_MAX, sizeof(struct model))};
        int r = 0;

        if (!rd.file)
                return -ENOMEM;
        if (path && *path)
                r = read_file(path, &rd);
        if (r < 0) {
                free(rd.file);
                return r == -ENOMEM ? r : -EINVAL;
        }
        struct model *t = calloc(rd.n + ELEMENTSOF(shipped), sizeof(*t));
        if (!t) {
                free(rd.file);
                return -ENOMEM;
        }
        /* The file's entries first (an override replaces the shipped entry of its name). */
        size_t n = 0;
        for (size_t i = 0; i < rd.n; i++)
                t[n++] = rd.file[i];
        for (size_t i = 0; i < ELEMENTSOF(shipped); i++)
                if (find_name(rd.file, rd.n, shipped[i].name) < 0) {
                        t[n] = shipped[i];
                        errors_defaults(&t[n++]);
                }
        free(rd.file);
        free(table);
        table = t;
        n_table = n;
        if (rd.n > 0)
                log_info("GPU models: %zu from %s, %zu known in all", rd.n, path, n);
        return 0;
}

static json_t *num_or_null(double v)
{
        return v > 0 ? json_real(v) : json_null();
}

static json_t *int_or_null(int v)
{
        return v >= 0 ? json_integer(v) : json_null();
}

static json_t *model_json(const struct model *m)
{
        json_t *o = json_pack(
            "{s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:s, s:s}", "name", m->name, "match", m->match,
            "pcie_gen", m->pcie_gen > 0 ? json_integer(m->pcie_gen) : json_null(), "pcie_width",
            m->pcie_width > 0 ? json_integer(m->pcie_width) : json_null(), "nvlinks",
            m->nvlinks >= 0 ? json_integer(m->nvlinks) : json_null(), "nvlink_gbps",
            num_or_null(m->nvlink_gbps), "memory_gbps", num_or_null(m->memory_gbps), "source",
            m->source, "from", m->from_file ? "gpu_models_file" : "shipped");

        if (o && json_object_update_new(
                     o, json_pack("{s:o, s:o, s:o}", "retired_pages_max",
                                  int_or_null(m->retired_pages_max), "sram_uncorrected_max",
                                  int_or_null(m->sram_uncorrected_max), "ecc_off",
                                  m->ecc_off_passes < 0
                                      ? json_null()
                                      : json_string(m->ecc_off_passes ? "pass" : "warn"))) < 0) {
                json_decref(o);
                return NULL;
        }
        return o;
}

json_t *models_expectation(const char *device_name)
{
        const struct model *hit = NULL;

        if (!table && models_load(NULL) < 0)
                return NULL;
        for (size_t i = 0; device_name && !hit && i < n_table; i++)
                if (fnmatch(table[i].match, device_name, 0) == 0)
                        hit = &table[i];
        return json_pack("{s:s?, s:o}", "device_name", device_name, "model",
                         hit ? model_json(hit) : json_null());
}

json_t *models_table(void)
{
        json_t *arr = json_array();

        if (!table && models_load(NULL) < 0) {
                json_decref(arr);
                return NULL;
        }
        for (size_t i = 0; arr && i < n_table; i++)
                json_array_append_new(arr, model_json(&table[i]));
        return arr;
}

void models_free(void)
{
        free(table);
        table = NULL;
        n_table = 0;
}
