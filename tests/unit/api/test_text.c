/* The text view's explain sentence (issue 17): counts in words, thousands separated, and a
 * count short of the bytes that had to move said to be a lower bound. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "text.h"

static char *render(const char *explain_json)
{
        json_t *x = json_loads(explain_json, 0, NULL);
        assert_non_null(x);
        json_t *job =
            json_pack("{s:s, s:s, s:s, s:[{s:i, s:s, s:s, s:{s:[{s:s, s:I, s:o}]}}]}", "id", "j",
                      "benchmark", "managed_on_demand", "state", "succeeded", "parts", "device", 0,
                      "uuid", "GPU-x", "state", "succeeded", "result", "measurements", "name",
                      "gpu_on_demand", "bytes", (json_int_t)(1 << 30), "explain", x);
        assert_non_null(job);
        char *s = text_render_job(job);
        json_decref(job);
        assert_non_null(s);
        return s;
}

static void test_sentence_counts_faults_and_migrations(void **state)
{
        (void)state;
        char *s = render("{\"available\": true, \"gpu_page_faults\": 262144, \"bytes_htod\": "
                         "1073741824, \"migrations_htod\": 16384, \"mean_migration_htod_bytes\": "
                         "65536.0, \"thrashing_events\": 0, \"throttling_events\": 0, "
                         "\"complete\": true}");
        assert_non_null(strstr(s, "explain gpu_on_demand: the kernel faulted 262,144 times, "
                                  "migrating 1 GiB to the GPU in 16,384 pieces of 64 KiB on "
                                  "average; no thrashing or throttling.\n"));
        free(s);
}

static void test_incomplete_counts_are_called_lower_bounds(void **state)
{
        (void)state;
        char *s = render("{\"available\": true, \"gpu_page_faults\": 104, \"bytes_htod\": "
                         "78643200, \"migrations_htod\": 4256, \"mean_migration_htod_bytes\": "
                         "18478.0, \"thrashing_events\": 96, \"throttling_events\": 2, "
                         "\"complete\": false, \"expected_bytes_htod\": 268435456, "
                         "\"expected_bytes_dtoh\": 0}");
        assert_non_null(strstr(s, "the driver saw 96 thrashing events and throttled 2 times"));
        assert_non_null(strstr(s, "(incomplete: CUPTI reported 75 MiB of the 256 MiB that moved, "
                                  "so these are lower bounds)."));
        free(s);
}

static void test_unavailable_says_why(void **state)
{
        (void)state;
        char *s = render("{\"available\": false, \"why\": \"explanation unavailable: CUPTI not "
                         "found\"}");
        assert_non_null(
            strstr(s, "explain gpu_on_demand: explanation unavailable: CUPTI not found\n"));
        free(s);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_sentence_counts_faults_and_migrations),
            cmocka_unit_test(test_incomplete_counts_are_called_lower_bounds),
            cmocka_unit_test(test_unavailable_says_why),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
