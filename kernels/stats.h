/* Summary statistics of timed samples (plain C, no CUDA): what every benchmark result reports
 * next to its raw samples, and the measurement object that carries both (bench.h's shape, built
 * here for real and fake devices alike). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sample_stats {
        double min, median, mean, max;
        double stddev; /* sample standard deviation (n - 1); 0 for one sample */
        double cv;     /* stddev / mean; 0 when the mean is 0 */
};

/* 0, or -EINVAL when n is 0 or a sample is not finite. */
int stats_compute(const double *samples, size_t n, struct sample_stats *ret);

/* {"min_ms","median_ms","mean_ms","max_ms","stddev_ms","cv"}; NULL on OOM. */
json_t *stats_to_json(const struct sample_stats *s);

/* Decimal GB/s for bytes moved in ms milliseconds; 0 when ms <= 0. */
double stats_gbps(double bytes, double ms);

/* One measurement of bench.h's shape: {"name","bytes","bytes_counted","samples_ms","stats",
 * "gbps" (at the median),"verified"}. samples (ms, in the order taken) and st, their stats_compute,
 * describe the same n samples. NULL on OOM. */
json_t *stats_measurement_json(const char *name, uint64_t bytes, const char *counted,
                               const double *samples, size_t n, const struct sample_stats *st,
                               bool verified);
