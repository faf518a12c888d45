/* Small shared helpers: clocks, RFC 3339 timestamps, strict integer parsing. */
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static uint64_t clock_ms(clockid_t id)
{
        struct timespec ts;

        /* Cannot fail for the clocks used here. */
        (void)clock_gettime(id, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t now_realtime_ms(void)
{
        return clock_ms(CLOCK_REALTIME);
}

uint64_t now_monotonic_ms(void)
{
        return clock_ms(CLOCK_MONOTONIC);
}

void cond_init_monotonic(pthread_cond_t *c)
{
        pthread_condattr_t ca;

        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(c, &ca);
        pthread_condattr_destroy(&ca);
}

void deadline_after_ms(clockid_t id, unsigned ms, struct timespec *ret)
{
        struct timespec ts;

        (void)clock_gettime(id, &ts);
        ts.tv_sec += ms / 1000;
        ts.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
        }
        *ret = ts;
}

char *format_rfc3339_ms(uint64_t realtime_ms, char *buf, size_t len)
{
        time_t secs = (time_t)(realtime_ms / 1000u);
        struct tm tm;
        int r;

        if (!buf || len == 0)
                return NULL;
        if (!gmtime_r(&secs, &tm)) {
                buf[0] = '\0';
                return NULL;
        }
        r = snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     (unsigned)(realtime_ms % 1000u));
        if (r < 0 || (size_t)r >= len)
                return NULL;
        return buf;
}

int parse_uint64(const char *s, uint64_t min, uint64_t max, uint64_t *ret)
{
        uint64_t v = 0;

        /* Digits only: strtoull would accept leading blanks, a sign and "-1" as UINT64_MAX. */
        if (!s || !*s)
                return -EINVAL;
        for (const char *p = s; *p; p++) {
                unsigned d;

                if (*p < '0' || *p > '9')
                        return -EINVAL;
                d = (unsigned)(*p - '0');
                if (v > (UINT64_MAX - d) / 10u)
                        return -ERANGE;
                v = v * 10u + d;
        }
        if (v < min || v > max)
                return -ERANGE;
        if (ret)
                *ret = v;
        return 0;
}

bool streq_ptr(const char *a, const char *b)
{
        if (!a || !b)
                return a == b;
        return strcmp(a, b) == 0;
}
