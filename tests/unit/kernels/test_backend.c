/* The backend interface (kernels/backend.h) against the registry (common/catalog.h): every
 * catalog entry has a fake model and a real implementation, a run's params are normalised and
 * its limits checked once (backend_prepare), and what a fake result names is in the catalog.
 *
 * Adding a catalog entry without a fake model fails test_every_entry_has_a_fake_model (a new
 * enum value without one, test_every_mode_has_a_fake_model); without
 * a CUDA implementation, test_every_entry_has_a_real_implementation (it runs the worker given
 * as argv[1] with --implements; skipped where the worker was built without CUDA: exit 77). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "backend.h"
#include "catalog.h"
#include "fake.h"

static const char *worker_path;

static void test_every_entry_has_a_fake_model(void **state)
{
        for (size_t i = 0; i < catalog_count(); i++) {
                const char *id = catalog_get(i)->name;

                if (!backend_fake.implements(id))
                        fail_msg("catalog entry %s has no fake model (kernels/fake.c: gpu_plans "
                                 "or node_plans)",
                                 id);
        }
        assert_false(backend_fake.implements("warp_drive"));
}

/* backend_prepare() with params owned by the call (they are built inline). */
static int prepare_owned(const struct backend_ops *ops, const char *id, json_t *params,
                         uint64_t max_buffer_bytes, json_t **ret_params, char **ret_error)
{
        int r = backend_prepare(ops, id, params, max_buffer_bytes, ret_params, ret_error);

        json_decref(params);
        return r;
}

/* Every catalog entry run on fake devices (two, so the node's run too) with its defaults:
 * answered (or refused as unsupported by the device, never "not modelled"), and every
 * measurement it names is one of the catalog's names for it. */
static void test_fake_results_use_catalog_names(void **state)
{
        for (size_t i = 0; i < catalog_count(); i++) {
                const struct bench_def *b = catalog_get(i);
                struct backend_args a = {.device_id = b->multi_gpu ? "all" : "0", .fake_n = 2};
                struct backend *be = NULL;
                json_t *dev = NULL, *params = NULL, *res = NULL, *m;
                char *error = NULL;
                size_t k;
                int r;

                assert_int_equal(backend_fake.open(&a, &be, &dev, &error), 0);
                r = prepare_owned(&backend_fake, b->name,
                                  json_pack("{s:i, s:I}", "iterations", 2, "size",
                                            (json_int_t)(b->multi_gpu ? 4 << 20 : 4096)),
                                  0, &params, &error);
                if (r < 0) { /* latency's size has its own bounds: its default then */
                        free(error);
                        error = NULL;
                        r = backend_prepare(&backend_fake, b->name, NULL, 0, &params, &error);
                }
                assert_int_equal(r, 0);
                r = backend_fake.run(be, b->name, params, NULL, &res, &error);
                if (r == -ENOTSUP) {
                        assert_null(strstr(error, "not modelled"));
                        free(error);
                } else {
                        if (r < 0)
                                fail_msg("%s: %s", b->name, error);
                        json_array_foreach(json_object_get(res, "measurements"), k, m)
                        {
                                const char *name = json_string_value(json_object_get(m, "name"));
                                if (!catalog_has_measurement(b, name))
                                        fail_msg("%s: measurement %s is not in the catalog",
                                                 b->name, name);
                        }
                }
                json_decref(res);
                json_decref(params);
                json_decref(dev);
                backend_fake.close(be);
        }
}

/* One fake run of b with extra params; fails the test on "not modelled". */
static void run_fake_modelled(const struct bench_def *b, json_t *extra)
{
        struct backend_args a = {.device_id = b->multi_gpu ? "all" : "0", .fake_n = 2};
        struct backend *be = NULL;
        json_t *dev = NULL, *params = NULL, *res = NULL;
        char *error = NULL;
        int r;

        json_object_set_new(extra, "iterations", json_integer(2));
        assert_int_equal(backend_fake.open(&a, &be, &dev, &error), 0);
        r = backend_prepare(&backend_fake, b->name, extra, 0, &params, &error);
        if (r < 0)
                fail_msg("%s: %s", b->name, error);
        r = backend_fake.run(be, b->name, params, NULL, &res, &error);
        if (r < 0 && (r != -ENOTSUP || strstr(error, "not modelled")))
                fail_msg("%s %s: %s", b->name, json_dumps(extra, JSON_COMPACT), error);
        free(error);
        json_decref(res);
        json_decref(params);
        json_decref(dev);
        json_decref(extra);
        backend_fake.close(be);
}

/* Every mode the catalog allows is modelled: each value of each enum parameter (and each single
 * value of a list: sweep's modes, peer's methods and directions) runs on the fake. */
static void test_every_mode_has_a_fake_model(void **state)
{
        for (size_t i = 0; i < catalog_count(); i++) {
                const struct bench_def *b = catalog_get(i);

                for (size_t k = 0; k < b->n_params; k++) {
                        const struct param_def *p = &b->params[k];

                        for (size_t v = 0; p->values && p->values[v]; v++) {
                                json_t *x = json_object();

                                if (p->type == PARAM_ENUM)
                                        json_object_set_new(x, p->name, json_string(p->values[v]));
                                else
                                        json_object_set_new(x, p->name,
                                                            json_pack("[s]", p->values[v]));
                                if (catalog_param(b, "max_size")) /* sweep: few sizes */
                                        json_object_set_new(x, "max_size", json_integer(16384));
                                run_fake_modelled(b, x);
                        }
                }
        }
}

static void test_every_entry_has_a_real_implementation(void **state)
{
        char cmd[4200], line[128], *ids[256];
        size_t found = 0, missing = 0;
        FILE *f;
        int status;

        if (!worker_path)
                skip();
        snprintf(cmd, sizeof(cmd), "'%s' --implements", worker_path);
        f = popen(cmd, "r");
        assert_non_null(f);
        while (fgets(line, sizeof(line), f) && found < 256) {
                line[strcspn(line, "\n")] = '\0';
                if (!catalog_find(line))
                        fail_msg("the worker implements %s, which the catalog lacks", line);
                ids[found++] = strdup(line);
        }
        status = pclose(f);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
                skip(); /* built without CUDA: no real backend to compare */
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        for (size_t i = 0; i < catalog_count(); i++) {
                bool have = false;

                for (size_t k = 0; k < found; k++)
                        have = have || strcmp(ids[k], catalog_get(i)->name) == 0;
                if (!have) {
                        print_error("catalog entry %s has no CUDA implementation (kernels/bench.cu "
                                    "benchmarks[] or kernels/bench_multi.cu multi_benchmarks[])\n",
                                    catalog_get(i)->name);
                        missing++;
                }
        }
        for (size_t k = 0; k < found; k++)
                free(ids[k]);
        if (missing)
                fail_msg("%zu catalog entries have no CUDA implementation", missing);
}

static void test_prepare_normalises_and_checks_limits_once(void **state)
{
        json_t *p = NULL;
        char *error = NULL;

        /* every parameter filled from the catalog */
        assert_int_equal(backend_prepare(&backend_fake, "copy", NULL, 0, &p, &error), 0);
        assert_int_equal(json_integer_value(json_object_get(p, "iterations")),
                         catalog_param(catalog_find("copy"), "iterations")->def);
        assert_int_equal(json_integer_value(json_object_get(p, "warmup")),
                         catalog_param(catalog_find("copy"), "warmup")->def);
        assert_int_equal(json_integer_value(json_object_get(p, "size")),
                         catalog_param(catalog_find("copy"), "size")->def);
        json_decref(p);
        p = NULL;

        /* over max_buffer_bytes: the worker's words */
        assert_int_equal(prepare_owned(&backend_fake, "copy",
                                       json_pack("{s:I}", "size", (json_int_t)(2ll << 30)),
                                       1ull << 30, &p, &error),
                         -ENOMEM);
        assert_null(p);
        assert_string_equal(error, "size 2147483648 bytes is over the limit of 1073741824 bytes "
                                   "(max_buffer_bytes)");
        free(error);
        error = NULL;

        /* a sweep's largest size counts */
        assert_int_equal(
            prepare_owned(&backend_fake, "sweep",
                          json_pack("{s:[i, I]}", "sizes", 4096, (json_int_t)(64 << 20)), 1 << 20,
                          &p, &error),
            -ENOMEM);
        free(error);
        error = NULL;

        /* fault injection is refused for real devices, its defaults are not */
        assert_int_equal(prepare_owned(&backend_real, "copy",
                                       json_pack("{s:i}", "fake_delay_ms", 5), 0, &p, &error),
                         -EINVAL);
        assert_string_equal(error, "fake_delay_ms: fake_* parameters apply only to fake devices");
        free(error);
        error = NULL;
        assert_int_equal(prepare_owned(&backend_real, "copy",
                                       json_pack("{s:i}", "fake_delay_ms", 0), 0, &p, &error),
                         0);
        assert_null(json_object_get(p, "fake_delay_ms"));
        json_decref(p);
        p = NULL;

        assert_int_equal(backend_prepare(&backend_fake, "warp_drive", NULL, 0, &p, &error),
                         -EINVAL);
        assert_non_null(strstr(error, "unknown benchmark"));
        free(error);
}

int main(int argc, char **argv)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_every_entry_has_a_fake_model),
            cmocka_unit_test(test_fake_results_use_catalog_names),
            cmocka_unit_test(test_every_mode_has_a_fake_model),
            cmocka_unit_test(test_every_entry_has_a_real_implementation),
            cmocka_unit_test(test_prepare_normalises_and_checks_limits_once),
        };

        worker_path = argc > 1 ? argv[1] : NULL;
        return cmocka_run_group_tests(tests, NULL, NULL);
}
