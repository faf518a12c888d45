/* Summary statistics of benchmark samples, and the JSON of one measurement. Owns only
 * arithmetic on arrays it is given; it never reorders the caller's samples (results keep them in
 * the order they were taken). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return (x > y) - (x < y);
}

int stats_compute(const double *samples, size_t n, struct sample_stats *ret)
{
        struct sample_stats s = {0};
        double *sorted;
        double sum = 0, sq = 0;

        if (n == 0 || !samples)
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if (!isfinite(samples[i]))
                        return -EINVAL;

        sorted = malloc(n * sizeof(*sorted));
        if (!sorted)
                return -ENOMEM;
        memcpy(sorted, samples, n * sizeof(*sorted));
        qsort(sorted, n, sizeof(*sorted), cmp_double);

        s.min = sorted[0];
        s.max = sorted[n - 1];
        s.median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
        for (size_t i = 0; i < n; i++)
                sum += sorted[i];
        s.mean = sum / (double)n;
        /* Two-pass variance: the samples are close together, and one pass would cancel. */
        for (size_t i = 0; i < n; i++)
                sq += (sorted[i] - s.mean) * (sorted[i] - s.mean);
        s.stddev = n > 1 ? sqrt(sq / (double)(n - 1)) : 0;
        s.cv = s.mean != 0 ? s.stddev / s.mean : 0;
        free(sorted);
        *ret = s;
        return 0;
}

json_t *stats_to_json(const struct sample_stats *s)
{
        return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f}", "min_ms", s->min, "median_ms", s->median,
                         "mean_ms", s->mean, "max_ms", s->max, "stddev_ms", s->stddev, "cv", s->cv);
}

double stats_gbps(double bytes, double ms)
{
        return ms > 0 ? bytes / (ms * 1e-3) / 1e9 : 0;
}

json_t *stats_measurement_json(const char *name, uint64_t bytes, const char *counted,
                               const double *samples, size_t n, const struct sample_stats *st,
                               bool verified)
{
        json_t *arr = json_array();

        for (size_t i = 0; arr && i < n; i++)
                if (json_array_append_new(arr, json_real(samples[i])) < 0) {
                        json_decref(arr);
                        return NULL;
                }
        return json_pack("{s:s, s:I, s:s, s:o, s:o, s:f, s:b}", "name", name, "bytes",
                         (json_int_t)bytes, "bytes_counted", counted, "samples_ms", arr, "stats",
                         stats_to_json(st), "gbps", stats_gbps((double)bytes, st->median),
                         "verified", verified);
}
