/* bench/nvml-errors: what the canonical check's read of a GPU's error state costs (issue 58,
 * goal: 1 ms a GPU). Reads it through umd's own reader (common/nvml_errors.c, the one the
 * worker calls after the check's copies) ROUNDS times for each GPU named, and prints the
 * median, the 90th percentile and the worst of each call, in microseconds.
 *
 *   nvml-errors [--rounds N] UUID...         real NVML (libnvidia-ml.so.1)
 *   nvml-errors-fake [--rounds N] UUID...    the fake library of tests/unit/common, with
 *                                            UMD_FAKE_NVML_STATE naming its state: the
 *                                            reader's own cost, not a GPU's
 *
 * On the GPU machine: nvml-errors $(nvidia-smi --query-gpu=uuid --format=csv,noheader). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nvml.h"
#include "nvml_errors.h"

#define ROUNDS_DEFAULT 50
#define ROUNDS_MAX     100000

static double now_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return (x > y) - (x < y);
}

/* One GPU: its readings once (printed, with each reading's own time in read_us), then rounds
 * timed reads: every reading each time (keep false), or as the worker reads them, the InfoROM
 * read once and kept (keep true). */
static int bench_gpu(const struct nvml_api *api, const char *uuid, int rounds, bool keep)
{
        double *us = calloc((size_t)rounds, sizeof(*us));
        nvml_device dev;
        nvml_return r = api->by_uuid(uuid, &dev);

        if (!us)
                return -ENOMEM;
        if (r != NVML_SUCCESS) {
                fprintf(stderr, "nvml-errors: NVML does not know %s: %s\n", uuid, nvml_strerror(r));
                free(us);
                return -ENODEV;
        }
        json_t *kept = NULL;
        for (int i = 0; i < rounds; i++) {
                double t0 = now_us();
                json_t *o = nvml_errors_read(api, dev, keep ? &kept : NULL);
                us[i] = now_us() - t0;
                if (i == 0) {
                        char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
                        printf("%s readings: %s\n", uuid, s ? s : "?");
                        free(s);
                }
                json_decref(o);
        }
        json_decref(kept);
        qsort(us, (size_t)rounds, sizeof(*us), cmp);
        printf("%s, %s: %d reads, median %.1f us, p90 %.1f us, max %.1f us (goal 1000 us)\n", uuid,
               keep ? "InfoROM kept (the worker's way)" : "every reading", rounds, us[rounds / 2],
               us[rounds * 9 / 10], us[rounds - 1]);
        free(us);
        return 0;
}

int main(int argc, char **argv)
{
        const struct nvml_api *api = NULL;
        const char *why = NULL;
        int rounds = ROUNDS_DEFAULT, first = 1, rc = 0;

        if (argc > 2 && strcmp(argv[1], "--rounds") == 0) {
                rounds = atoi(argv[2]);
                first = 3;
        }
        if (rounds < 1 || rounds > ROUNDS_MAX || first >= argc) {
                fprintf(stderr, "usage: %s [--rounds 1..%d] UUID...\n", argv[0], ROUNDS_MAX);
                return 2;
        }
        if (nvml_open(&api, &why) < 0) {
                fprintf(stderr, "nvml-errors: %s\n", why);
                return 1;
        }
        for (int i = first; i < argc; i++)
                if (bench_gpu(api, argv[i], rounds, false) < 0 ||
                    bench_gpu(api, argv[i], rounds, true) < 0)
                        rc = 1;
        nvml_close();
        return rc;
}
