/* The text view's explain sentences (issues 17 and 26): counts in words, thousands separated,
 * a count short of the bytes that had to move said to be a lower bound, the pieces a count was
 * made in, the kernel clock's arrival view and the fault cost, each saying whose figures. */
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

static void test_pieces_are_named_with_their_size(void **state)
{
        (void)state;
        char *s = render("{\"available\": true, \"gpu_page_faults\": 10, \"bytes_htod\": "
                         "1073741824, \"migrations_htod\": 44538, \"mean_migration_htod_bytes\": "
                         "24108.0, \"complete\": true, \"pieces\": 16, \"piece_bytes\": "
                         "67108864}");
        assert_non_null(strstr(s, "no thrashing or throttling (CUPTI, counted in 16 pieces of "
                                  "64 MiB).\n"));
        free(s);
}

static void test_arrival_view_in_one_sentence(void **state)
{
        (void)state;
        char *s = render("{\"available\": true, \"bytes_htod\": 1073741824, \"complete\": true, "
                         "\"arrival\": {\"available\": true, \"waited_share\": 0.84, "
                         "\"bursts\": 310, \"mean_burst_bytes\": 3460300.8, \"rate_gbps\": 9.8, "
                         "\"pinned_h2d_gbps\": 55.2}}");
        assert_non_null(strstr(s, "(CUPTI).\n"));
        assert_non_null(strstr(s, "  arrival gpu_on_demand: the kernel waited for pages 84% of its "
                                  "time; they arrived in 310 bursts of about 3.3 MiB, at 9.8 GB/s "
                                  "while they moved, against 55 for a pinned copy (the kernel's "
                                  "clock).\n"));
        free(s);
}

static void test_arrival_unavailable_says_why(void **state)
{
        (void)state;
        char *s = render("{\"available\": true, \"arrival\": {\"available\": false, \"why\": "
                         "\"access order is not sequential\"}}");
        assert_non_null(strstr(s, "  arrival gpu_on_demand: access order is not sequential\n"));
        free(s);
}

static void test_fault_cost_says_its_share_of_the_gap(void **state)
{
        (void)state;
        char *s = render("{\"available\": true, \"fault_cost\": {\"fault_single_us\": 43.5, "
                         "\"batches\": 495, \"batches_from\": \"arrival bursts\", "
                         "\"estimate_ms\": 21.5, \"gap_ms\": 124.0, \"explained_share\": "
                         "0.1734}}");
        assert_non_null(strstr(s, "  fault cost gpu_on_demand: 495 fault batches (arrival bursts) "
                                  "at 43.5 us a fault come to about 21.5 ms, 17% of the 124.0 ms "
                                  "on-demand takes over prefetch + kernel.\n"));
        free(s);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_sentence_counts_faults_and_migrations),
            cmocka_unit_test(test_incomplete_counts_are_called_lower_bounds),
            cmocka_unit_test(test_unavailable_says_why),
            cmocka_unit_test(test_pieces_are_named_with_their_size),
            cmocka_unit_test(test_arrival_view_in_one_sentence),
            cmocka_unit_test(test_arrival_unavailable_says_why),
            cmocka_unit_test(test_fault_cost_says_its_share_of_the_gap),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
