/* metrics.c: what a result becomes in the exposition (units, bounded labels, escaping), the
 * job duration histogram and the HTTP counters. No devices are discovered: the per-device
 * gauges are empty, and the families the job files and the HTTP layer push are what is tested.
 * The families are process-wide, so each case uses its own device uuid or benchmark name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core.h"
#include "daemon.h"
#include "metrics.h"

/* The group's one (setup): series accumulate across the tests, as in a daemon. */
static struct metrics *mt;

static char *scrape(void)
{
        char *text = metrics_text(mt, NULL);

        assert_non_null(text);
        return text;
}

static void assert_has_line(const char *text, const char *line)
{
        size_t n = strlen(line);

        for (const char *p = text; (p = strstr(p, line)); p++)
                if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
                        return;
        fail_msg("no line '%s' in:\n%s", line, text);
}

/* The value of the one series named exactly series ("name{labels}"); fails when absent. */
static double value_of(const char *text, const char *series)
{
        size_t n = strlen(series);

        for (const char *p = text; (p = strstr(p, series)); p++)
                if ((p == text || p[-1] == '\n') && p[n] == ' ')
                        return strtod(p + n + 1, NULL);
        fail_msg("no series '%s'", series);
        return 0;
}

static size_t count_prefix(const char *text, const char *prefix)
{
        size_t n = 0, len = strlen(prefix);

        for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
                n += strncmp(p, prefix, len) == 0;
        return n;
}

static json_t *load(const char *json)
{
        json_error_t err;
        json_t *result = json_loads(json, 0, &err);

        assert_non_null(result);
        return result;
}

static void part(const char *uuid, const char *json)
{
        json_t *result = load(json);

        metrics_part_result(mt, uuid, result, false);
        json_decref(result);
}

static void health(const char *uuid, const char *json, bool contended)
{
        json_t *result = load(json);

        metrics_health_result(mt, uuid, "gen5x16", result, contended);
        json_decref(result);
}

static void test_an_adhoc_health_job_is_not_exported_as_health(void **state)
{
        part("GPU-adhoc", "{\"benchmark\": \"health\", \"measurements\": [{\"name\": "
                          "\"pinned_h2d\", \"gbps\": 50}]}");
        char *text = scrape();
        assert_has_line(text, "umd_bandwidth_bytes_per_second{uuid=\"GPU-adhoc\",benchmark="
                              "\"health_adhoc\",mode=\"pinned_h2d\"} 50000000000");
        assert_null(strstr(text, "uuid=\"GPU-adhoc\",benchmark=\"health\""));
        free(text);
}

static void test_a_canonical_check_exports_its_fleet_figures_with_the_link(void **state)
{
        health("GPU-fleet",
               "{\"benchmark\": \"health\", \"measurements\": [{\"name\": "
               "\"pinned_h2d\", \"gbps\": 55}, {\"name\": \"pinned_d2h\", "
               "\"gbps\": 54}, {\"name\": \"d2d\", \"gbps\": 4200}, {\"name\": "
               "\"managed_prefetch\", \"gbps\": 48}]}",
               false);
        char *text = scrape();
        assert_has_line(text, "umd_health_bandwidth_bytes_per_second{uuid=\"GPU-fleet\",figure="
                              "\"h2d\",link=\"gen5x16\"} 55000000000");
        assert_has_line(text, "umd_health_bandwidth_bytes_per_second{uuid=\"GPU-fleet\",figure="
                              "\"d2h\",link=\"gen5x16\"} 54000000000");
        assert_has_line(text, "umd_health_bandwidth_bytes_per_second{uuid=\"GPU-fleet\",figure="
                              "\"d2d\",link=\"gen5x16\"} 4200000000000");
        assert_int_equal(
            count_prefix(text, "umd_health_bandwidth_bytes_per_second{uuid=\"GPU-fleet\""), 3);
        assert_has_line(text, "umd_health_check_contended{uuid=\"GPU-fleet\"} 0");
        free(text);
}

static void test_a_contended_check_keeps_the_last_figures_and_says_so(void **state)
{
        const char *fast = "{\"measurements\": [{\"name\": \"pinned_h2d\", \"gbps\": 55}]}";
        const char *slow = "{\"measurements\": [{\"name\": \"pinned_h2d\", \"gbps\": 5}]}";

        health("GPU-shared", fast, false);
        health("GPU-shared", slow, true);
        char *text = scrape();
        assert_has_line(text, "umd_health_bandwidth_bytes_per_second{uuid=\"GPU-shared\",figure="
                              "\"h2d\",link=\"gen5x16\"} 55000000000");
        assert_has_line(text, "umd_health_check_contended{uuid=\"GPU-shared\"} 1");
        free(text);
}

static void test_the_node_check_gives_each_gpu_its_slowest_peer_copy(void **state)
{
        json_t *result = load(
            "{\"devices\": [{\"index\": 0, \"uuid\": \"GPU-p0\"}, {\"index\": 1, \"uuid\": "
            "\"GPU-p1\"}, {\"index\": 2, \"uuid\": \"GPU-p2\"}], \"links\": [{\"src\": 0, "
            "\"dst\": 2, \"type\": \"nvlink\", \"nvlink_links\": 18}], \"measurements\": ["
            "{\"method\": \"ce\", \"direction\": \"uni\", \"src\": 0, \"dst\": 1, \"gbps\": 390},"
            "{\"method\": \"ce\", \"direction\": \"uni\", \"src\": 0, \"dst\": 2, \"gbps\": 310},"
            "{\"method\": \"sm\", \"direction\": \"uni\", \"src\": 0, \"dst\": 2, \"gbps\": 100},"
            "{\"method\": \"ce\", \"direction\": \"bidir\", \"src\": 1, \"dst\": 0, \"gbps\": 700},"
            "{\"method\": \"ce\", \"direction\": \"uni\", \"src\": 1, \"dst\": 0, \"gbps\": "
            "380}]}");

        metrics_health_node_result(mt, result);
        json_decref(result);
        char *text = scrape();
        assert_has_line(text, "umd_health_bandwidth_bytes_per_second{uuid=\"GPU-p0\",figure="
                              "\"peer\",link=\"NV18\"} 310000000000");
        assert_has_line(text, "umd_health_bandwidth_bytes_per_second{uuid=\"GPU-p1\",figure="
                              "\"peer\",link=\"?\"} 380000000000");
        assert_null(strstr(text, "uuid=\"GPU-p2\",figure=\"peer\""));
        free(text);
}

static void test_bandwidth_is_exported_in_bytes_per_second(void **state)
{
        part("GPU-a", "{\"benchmark\": \"copy\", \"measurements\": [{\"name\": \"h2d\", \"gbps\": "
                      "55.5}]}");
        char *text = scrape();
        assert_has_line(text, "umd_bandwidth_bytes_per_second{uuid=\"GPU-a\",benchmark=\"copy\","
                              "mode=\"h2d\"} 55500000000");
        assert_int_equal(count_prefix(text, "umd_measurement_timestamp_seconds{uuid=\"GPU-a\""), 1);
        free(text);
}

static void test_latency_mode_is_seconds_and_no_bandwidth(void **state)
{
        part("GPU-l", "{\"benchmark\": \"latency\", \"measurements\": [{\"name\": \"pinned_h2d\", "
                      "\"gbps\": 0.001, \"latency_us\": 6.5}]}");
        char *text = scrape();
        double v = value_of(text, "umd_latency_seconds{uuid=\"GPU-l\",benchmark=\"latency\","
                                  "mode=\"pinned_h2d\"}");
        assert_true(v > 6.4999e-6 && v < 6.5001e-6);
        assert_int_equal(count_prefix(text, "umd_bandwidth_bytes_per_second{uuid=\"GPU-l\""), 0);
        free(text);
}

static void test_a_newer_result_replaces_the_figure(void **state)
{
        part("GPU-r",
             "{\"benchmark\": \"copy\", \"measurements\": [{\"name\": \"h2d\", \"gbps\": 1}]}");
        part("GPU-r",
             "{\"benchmark\": \"copy\", \"measurements\": [{\"name\": \"h2d\", \"gbps\": 2}]}");
        char *text = scrape();
        assert_has_line(text, "umd_bandwidth_bytes_per_second{uuid=\"GPU-r\",benchmark=\"copy\","
                              "mode=\"h2d\"} 2000000000");
        assert_int_equal(count_prefix(text, "umd_bandwidth_bytes_per_second{uuid=\"GPU-r\""), 1);
        free(text);
}

static void test_sweep_points_never_become_labels(void **state)
{
        part("GPU-s", "{\"benchmark\": \"sweep\", \"measurements\": [{\"name\": "
                      "\"pinned_h2d@4096\", \"gbps\": 3}, {\"name\": \"pinned_h2d@8192\", "
                      "\"gbps\": 6}]}");
        char *text = scrape();
        assert_null(strstr(text, "GPU-s"));
        free(text);
}

static void test_modes_per_device_are_bounded_and_the_rest_counted(void **state)
{
        json_t *ms = json_array();

        for (int i = 0; i < 70; i++) {
                char name[16];
                snprintf(name, sizeof(name), "mode%d", i);
                json_array_append_new(ms, json_pack("{s:s, s:f}", "name", name, "gbps", 1.0));
        }
        json_t *result = json_pack("{s:s, s:o}", "benchmark", "copy", "measurements", ms);
        metrics_part_result(mt, "GPU-many", result, false);
        json_decref(result);
        char *text = scrape();
        assert_int_equal(count_prefix(text, "umd_bandwidth_bytes_per_second{uuid=\"GPU-many\""),
                         64);
        assert_has_line(text, "umd_metrics_series_dropped_total 6");
        free(text);
}

static void test_label_values_are_escaped(void **state)
{
        part("GPU-\"q\"\n", "{\"benchmark\": \"co\\\\py\", \"measurements\": [{\"name\": \"h2d\", "
                            "\"gbps\": 1}]}");
        char *text = scrape();
        assert_has_line(text, "umd_bandwidth_bytes_per_second{uuid=\"GPU-\\\"q\\\"\\n\","
                              "benchmark=\"co\\\\py\",mode=\"h2d\"} 1000000000");
        free(text);
}

static void test_job_durations_fill_cumulative_buckets(void **state)
{
        metrics_job_finished(mt, "copy", "succeeded", 0.3);
        metrics_job_finished(mt, "copy", "succeeded", 7);
        metrics_job_finished(mt, "copy", "failed", 4000);
        char *text = scrape();
        assert_has_line(text, "umd_job_duration_seconds_bucket{le=\"0.1\"} 0");
        assert_has_line(text, "umd_job_duration_seconds_bucket{le=\"0.5\"} 1");
        assert_has_line(text, "umd_job_duration_seconds_bucket{le=\"10\"} 2");
        assert_has_line(text, "umd_job_duration_seconds_bucket{le=\"1800\"} 2");
        assert_has_line(text, "umd_job_duration_seconds_bucket{le=\"+Inf\"} 3");
        assert_has_line(text, "umd_job_duration_seconds_count 3");
        assert_has_line(text, "umd_jobs_finished_total{benchmark=\"copy\",state=\"succeeded\"} 2");
        assert_has_line(text, "umd_jobs_finished_total{benchmark=\"copy\",state=\"failed\"} 1");
        free(text);
}

static void test_http_requests_are_counted_by_route_method_and_status(void **state)
{
        metrics_http_observe(mt, "/v1/jobs/{id}", "GET", 200);
        metrics_http_observe(mt, "/v1/jobs/{id}", "GET", 200);
        metrics_http_observe(mt, "/v1/jobs/{id}", "GET", 404);
        char *text = scrape();
        assert_has_line(text, "umd_http_requests_total{route=\"/v1/jobs/{id}\",method=\"GET\","
                              "status=\"200\"} 2");
        assert_has_line(text, "umd_http_requests_total{route=\"/v1/jobs/{id}\",method=\"GET\","
                              "status=\"404\"} 1");
        free(text);
}

static void test_pushed_gauges_show_and_unknown_devices_are_ignored(void **state)
{
        metrics_observe_running(mt, 3);
        metrics_observe_queue(mt, 99, 5); /* no such device: nothing to keep, nothing to crash */
        char *text = scrape();
        assert_has_line(text, "umd_jobs_running 3");
        assert_has_line(text, "umd_up 1");
        free(text);
}

static int setup(void **state)
{
        static const struct umd_daemon d = {.signal_fd = -1};
        return metrics_new(&d, &mt);
}

static int teardown(void **state)
{
        metrics_free(mt);
        mt = NULL;
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_bandwidth_is_exported_in_bytes_per_second),
            cmocka_unit_test(test_latency_mode_is_seconds_and_no_bandwidth),
            cmocka_unit_test(test_a_newer_result_replaces_the_figure),
            cmocka_unit_test(test_sweep_points_never_become_labels),
            cmocka_unit_test(test_modes_per_device_are_bounded_and_the_rest_counted),
            cmocka_unit_test(test_label_values_are_escaped),
            cmocka_unit_test(test_job_durations_fill_cumulative_buckets),
            cmocka_unit_test(test_http_requests_are_counted_by_route_method_and_status),
            cmocka_unit_test(test_pushed_gauges_show_and_unknown_devices_are_ignored),
            cmocka_unit_test(test_an_adhoc_health_job_is_not_exported_as_health),
            cmocka_unit_test(test_a_canonical_check_exports_its_fleet_figures_with_the_link),
            cmocka_unit_test(test_a_contended_check_keeps_the_last_figures_and_says_so),
            cmocka_unit_test(test_the_node_check_gives_each_gpu_its_slowest_peer_copy),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
