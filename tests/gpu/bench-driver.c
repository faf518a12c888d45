/* bench-driver: runs umd's CUDA benchmarks in one process without the daemon, for the gpu test
 * suite and bench/gpu-modes. Each JOB argument is "BENCHMARK key=value ..." (values are JSON
 * when they parse as JSON, else strings: size=1GiB, iterations=5, direction=bidir); params go
 * through catalog_validate exactly as POST /v1/jobs does. Prints one JSON line per job:
 *   {"benchmark","params","ok","errno","error","result","wall_ms"}
 * The context and buffer pool live across the jobs, as in a warm umd-worker.
 * Exit: 0 when every job ran (or failed with -ENOTSUP), 1 otherwise, 77 without a GPU. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "catalog.h"
#include "conditions.h"
#include "discover.h"
#include "size.h"
#include "suites.h"

static double now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static json_t *parse_job(const char *spec, char **ret_name)
{
        char *copy = strdup(spec), *save = NULL;
        json_t *params = json_object();
        char *tok = strtok_r(copy, " ", &save);
        if (!tok) {
                free(copy);
                json_decref(params);
                return NULL;
        }
        *ret_name = strdup(tok);
        while ((tok = strtok_r(NULL, " ", &save))) {
                char *eq = strchr(tok, '=');
                if (!eq) {
                        fprintf(stderr, "bench-driver: '%s' is not key=value\n", tok);
                        continue;
                }
                *eq = '\0';
                json_t *v = json_loads(eq + 1, JSON_DECODE_ANY, NULL);
                json_object_set_new(params, tok, v ? v : json_string(eq + 1));
        }
        free(copy);
        return params;
}

static uint64_t size_arg(const char *s)
{
        uint64_t v;
        if (size_parse(s, &v) < 0) {
                fprintf(stderr, "bench-driver: bad size '%s'\n", s);
                exit(2);
        }
        return v;
}

int main(int argc, char **argv)
{
        struct bench_limits lim = {.max_buffer_bytes = 4ull << 30,
                                   .pool_bytes = 8ull << 30,
                                   .managed_reserve_bytes = 2ull << 30};
        const char *device = "0";
        static const struct option opts[] = {
            {"device", required_argument, NULL, 'd'},
            {"max-buffer-bytes", required_argument, NULL, 'm'},
            {"pool-bytes", required_argument, NULL, 'p'},
            {"managed-reserve-bytes", required_argument, NULL, 'r'},
            {}};
        int c, ordinal, failures = 0;
        json_t *info = NULL;
        char *why = NULL;
        struct bench_ctx *ctx = NULL;

        while ((c = getopt_long(argc, argv, "", opts, NULL)) >= 0) {
                switch (c) {
                case 'd':
                        device = optarg;
                        break;
                case 'm':
                        lim.max_buffer_bytes = size_arg(optarg);
                        break;
                case 'p':
                        lim.pool_bytes = size_arg(optarg);
                        break;
                case 'r':
                        lim.managed_reserve_bytes = size_arg(optarg);
                        break;
                default:
                        fprintf(stderr, "usage: bench-driver [--device ID] [--max-buffer-bytes "
                                        "N] [--pool-bytes N] [--managed-reserve-bytes N] "
                                        "\"BENCHMARK key=value ...\"...\n");
                        return 2;
                }
        }

        if (discover_device(device, &ordinal, &info, &why) < 0) {
                fprintf(stderr, "bench-driver: no GPU %s: %s\n", device, why ? why : "");
                free(why);
                return 77;
        }
        double t0 = now_ms();
        if (bench_ctx_create(ordinal, info, &lim, &ctx, &why) < 0) {
                fprintf(stderr, "bench-driver: %s\n", why ? why : "cannot create the context");
                return 1;
        }
        fprintf(stderr, "bench-driver: context ready in %.0f ms\n", now_ms() - t0);

        struct catalog_limits clim = {.max_buffer_bytes = lim.max_buffer_bytes};
        for (int i = optind; i < argc; i++) {
                char *name = NULL, *err = NULL;
                json_t *raw = parse_job(argv[i], &name), *params = NULL, *result = NULL;
                struct catalog_error cerr = {{0}};
                int r;
                double t = now_ms();

                if (!raw)
                        continue;
                r = catalog_validate(catalog_find(name), raw, &clim, false, &params, &cerr);
                if (r < 0) {
                        if (asprintf(&err, "%s: %s", cerr.field, cerr.detail) < 0)
                                err = NULL;
                } else {
                        /* The run's conditions, as umd-worker records them (issue 17). */
                        json_t *before = conditions_before(info, false);
                        r = bench_run(ctx, name, params, NULL, &result, &err);
                        if (r == 0) {
                                conditions_stamp(result, info, before, false);
                                /* Derived numbers are the daemon's: the same code adds them. */
                                json_t *summary = suite_summary(name, result);
                                if (summary)
                                        json_object_set_new(result, "summary", summary);
                        } else
                                json_decref(before);
                }
                json_t *line = json_pack("{s:s, s:O, s:b, s:i, s:s?, s:o?, s:f}", "benchmark", name,
                                         "params", params ? params : raw, "ok", r == 0, "errno", r,
                                         "error", err, "result", result, "wall_ms", now_ms() - t);
                if (!line)
                        return 1;
                json_dumpf(line, stdout, JSON_COMPACT);
                fputc('\n', stdout);
                fflush(stdout);
                if (r < 0 && r != -ENOTSUP)
                        failures++;
                json_decref(line);
                json_decref(raw);
                json_decref(params);
                free(err);
                free(name);
        }
        bench_ctx_destroy(ctx);
        json_decref(info);
        return failures ? 1 : 0;
}
