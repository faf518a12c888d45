/* The explain pass's CUPTI side (see explain.h). libcupti is dlopen'ed, never linked: the
 * worker must run where only the driver is installed. Only the activity API's Unified Memory
 * counters are used; the types come from the toolkit's cupti_activity.h (the ABI of these
 * records is stable), the entry points from a table that common/dlib.h resolves.
 *
 * CUPTI hands records back in buffers it asks for and returns through two callbacks, which may
 * run on CUPTI's own thread: the totals they add to are guarded by a mutex. */
#include "explain.h"

#include <cupti_activity.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dlib.h"
#include "util.h"

#define EXPLAIN_BUFFER_BYTES  (8u << 20)
#define EXPLAIN_POLL_MS       20
#define EXPLAIN_QUIET_MS      500.0  /* no new event this long: CUPTI has handed everything back */
#define EXPLAIN_SETTLE_MAX_MS 5000.0 /* give up waiting (reported as "settled": false) */
/* CUpti_ActivityUnifiedMemoryCounterKind's kinds, 1 to 7 (BYTES_TRANSFER_HTOD to REMOTE_MAP) */
#define UM_COUNTER_KINDS 7
/* CUpti_ActivityUnifiedMemoryMigrationCause: unknown, user, coherence, prefetch, eviction,
 * access counters */
#define UM_CAUSES 6
/* CUpti_ActivityUnifiedMemoryAccessType: unknown, read, write, atomic, prefetch */
#define UM_ACCESS_TYPES 5

static struct {
        CUptiResult (*configure)(CUpti_ActivityUnifiedMemoryCounterConfig *, uint32_t);
        CUptiResult (*enable)(CUpti_ActivityKind);
        CUptiResult (*disable)(CUpti_ActivityKind);
        CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                          CUpti_BuffersCallbackCompleteFunc);
        CUptiResult (*flush_all)(uint32_t);
        CUptiResult (*next_record)(uint8_t *, size_t, CUpti_Activity **);
        CUptiResult (*dropped)(CUcontext, uint32_t, size_t *);
        CUptiResult (*result_string)(CUptiResult, const char **);
} cupti;

struct totals {
        uint64_t bytes[2], migrations[2]; /* [0] HtoD, [1] DtoH */
        uint64_t htod_by_cause[UM_CAUSES];
        uint64_t gpu_faults, gpu_fault_records, gpu_by_access[UM_ACCESS_TYPES];
        uint64_t cpu_faults;
        uint64_t thrashing, thrashing_bytes, throttling, remote_map, remote_map_bytes;
        uint64_t dropped;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct totals totals;
static void *handle;
static bool loaded, callbacks_registered;
/* Room for the words around a dlerror() ("cannot load CUPTI: ...", "CUPTI <fn>: ..."). */
#define EXPLAIN_WHY_WORDS 64
static char why[DLIB_WHY_MAX + EXPLAIN_WHY_WORDS]; /* a dlerror() and the words around it */

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
        *buffer = aligned_alloc(8, EXPLAIN_BUFFER_BYTES);
        *size = *buffer ? EXPLAIN_BUFFER_BYTES : 0;
        *max_records = 0;
}

static void add_record(const CUpti_ActivityUnifiedMemoryCounter3 *r)
{
        switch (r->counterKind) {
        case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD:
                totals.bytes[0] += r->value;
                totals.migrations[0]++;
                if (r->flags < UM_CAUSES)
                        totals.htod_by_cause[r->flags] += r->value;
                break;
        case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH:
                totals.bytes[1] += r->value;
                totals.migrations[1]++;
                break;
        case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT:
                /* value: faults grouped on one page */
                totals.gpu_faults += r->value;
                totals.gpu_fault_records++;
                totals.gpu_by_access[r->flags < UM_ACCESS_TYPES ? r->flags : 0] += r->value;
                break;
        case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT:
                totals.cpu_faults++; /* value is the faulting instruction's address */
                break;
        case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THRASHING:
                totals.thrashing++;
                totals.thrashing_bytes += r->value;
                break;
        case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THROTTLING:
                totals.throttling++;
                break;
        case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_REMOTE_MAP:
                totals.remote_map++;
                totals.remote_map_bytes += r->value;
                break;
        default:
                break;
        }
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid)
{
        CUpti_Activity *rec = NULL;
        size_t dropped = 0;

        pthread_mutex_lock(&lock);
        while (cupti.next_record(buffer, valid, &rec) == CUPTI_SUCCESS)
                if (rec->kind == CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER)
                        add_record((const CUpti_ActivityUnifiedMemoryCounter3 *)rec);
        if (cupti.dropped && cupti.dropped(ctx, stream, &dropped) == CUPTI_SUCCESS)
                totals.dropped += dropped;
        pthread_mutex_unlock(&lock);
        (void)size;
        free(buffer);
}

static const char *result_words(CUptiResult r)
{
        const char *s = NULL;
        if (cupti.result_string && cupti.result_string(r, &s) == CUPTI_SUCCESS && s)
                return s;
        return "CUPTI error";
}

/* The places CUPTI lives: the loader's path first (a bundle's lib/), then the toolkit's. */
static const char *const cupti_paths[] = {
    "libcupti.so.13",
    "libcupti.so",
    "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
    "/usr/local/cuda/lib64/libcupti.so",
    "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so",
};

static int load(void)
{
        const struct dlib_sym syms[] = {
            {"cuptiActivityConfigureUnifiedMemoryCounter", NULL, (void **)&cupti.configure, false},
            {"cuptiActivityEnable", NULL, (void **)&cupti.enable, false},
            {"cuptiActivityDisable", NULL, (void **)&cupti.disable, false},
            {"cuptiActivityRegisterCallbacks", NULL, (void **)&cupti.register_callbacks, false},
            {"cuptiActivityFlushAll", NULL, (void **)&cupti.flush_all, false},
            {"cuptiActivityGetNextRecord", NULL, (void **)&cupti.next_record, false},
            {"cuptiActivityGetNumDroppedRecords", NULL, (void **)&cupti.dropped, true},
            {"cuptiGetResultString", NULL, (void **)&cupti.result_string, true},
        };
        char err[DLIB_WHY_MAX];

        if (loaded)
                return 0;
        if (!handle &&
            dlib_open(cupti_paths, ELEMENTSOF(cupti_paths), &handle, err, sizeof(err)) < 0) {
                snprintf(why, sizeof(why), "CUPTI not found (libcupti.so: %s)", err);
                return -ENOENT;
        }
        if (dlib_resolve(handle, syms, ELEMENTSOF(syms), err, sizeof(err)) < 0) {
                snprintf(why, sizeof(why),
                         "CUPTI too old: no Unified Memory counter entry points (%s)", err);
                return -ENOTSUP;
        }
        loaded = true;
        return 0;
}

int explain_begin(const char **ret_why)
{
        CUpti_ActivityUnifiedMemoryCounterConfig cfg[UM_COUNTER_KINDS];
        CUptiResult cr;
        int r = load();

        if (r < 0) {
                *ret_why = why;
                return r;
        }
        if (!callbacks_registered) {
                cr = cupti.register_callbacks(buffer_requested, buffer_completed);
                if (cr != CUPTI_SUCCESS) {
                        snprintf(why, sizeof(why), "CUPTI refused its buffers: %s",
                                 result_words(cr));
                        *ret_why = why;
                        return -EIO;
                }
                callbacks_registered = true;
        }
        for (int k = 0; k < UM_COUNTER_KINDS; k++)
                cfg[k] = (CUpti_ActivityUnifiedMemoryCounterConfig){
                    .scope = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_ALL_DEVICES,
                    .kind = (CUpti_ActivityUnifiedMemoryCounterKind)(k + 1),
                    .deviceId = 0,
                    .enable = 1};
        cr = cupti.configure(cfg, UM_COUNTER_KINDS);
        if (cr == CUPTI_SUCCESS)
                cr = cupti.enable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
        if (cr != CUPTI_SUCCESS) {
                snprintf(why, sizeof(why), "CUPTI cannot count Unified Memory events here: %s",
                         result_words(cr));
                *ret_why = why;
                return -ENOTSUP;
        }
        pthread_mutex_lock(&lock);
        memset(&totals, 0, sizeof(totals));
        pthread_mutex_unlock(&lock);
        return 0;
}

static double mean(uint64_t sum, uint64_t n)
{
        return n ? (double)sum / (double)n : 0;
}

/* Events counted so far: what the settle loop watches. */
static uint64_t events(void)
{
        pthread_mutex_lock(&lock);
        uint64_t n = totals.migrations[0] + totals.migrations[1] + totals.gpu_fault_records +
                     totals.cpu_faults + totals.thrashing + totals.throttling + totals.remote_map;
        pthread_mutex_unlock(&lock);
        return n;
}

static double mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

bool explain_drain(double quiet_ms)
{
        double t0 = mono_ms(), quiet_since = t0;
        uint64_t last = events();

        if (!loaded)
                return false;
        while (mono_ms() - t0 < EXPLAIN_SETTLE_MAX_MS) {
                struct timespec nap = {0, EXPLAIN_POLL_MS * 1000000L};
                cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
                uint64_t now = events();
                if (now != last) {
                        last = now;
                        quiet_since = mono_ms();
                } else if (mono_ms() - quiet_since >= quiet_ms) {
                        return true;
                }
                nanosleep(&nap, NULL);
        }
        return false;
}

void explain_restart(void)
{
        explain_drain(EXPLAIN_PIECE_QUIET_MS);
        pthread_mutex_lock(&lock);
        memset(&totals, 0, sizeof(totals));
        pthread_mutex_unlock(&lock);
}

json_t *explain_end(void)
{
        struct totals t;
        double t0 = mono_ms();
        bool settled;

        if (!loaded)
                return NULL;
        /* CUPTI reads the driver's Unified Memory events on its own thread, late: on the H200 a
         * 180 ms pass had delivered nothing when the work was done, and disabling the counters
         * then dropped the rest. So the counters stay on (the work is done: nothing else runs)
         * and the buffers are flushed until no new event came for EXPLAIN_QUIET_MS. */
        settled = explain_drain(EXPLAIN_QUIET_MS);
        double settle_ms = mono_ms() - t0;
        cupti.disable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
        /* Forced: hands back the buffers still being filled, through buffer_completed. */
        cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        pthread_mutex_lock(&lock);
        t = totals;
        pthread_mutex_unlock(&lock);
        json_t *o = json_pack(
            "{s:b, s:I, s:I, s:I, s:I, s:f, s:f, s:{s:I, s:I, s:I, s:I, s:I, s:I}, s:I, s:I,"
            " s:{s:I, s:I, s:I, s:I, s:I}, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
            "available", 1, "bytes_htod", (json_int_t)t.bytes[0], "bytes_dtoh",
            (json_int_t)t.bytes[1], "migrations_htod", (json_int_t)t.migrations[0],
            "migrations_dtoh", (json_int_t)t.migrations[1], "mean_migration_htod_bytes",
            mean(t.bytes[0], t.migrations[0]), "mean_migration_dtoh_bytes",
            mean(t.bytes[1], t.migrations[1]), "htod_bytes_by_cause", "unknown",
            (json_int_t)t.htod_by_cause[0], "user", (json_int_t)t.htod_by_cause[1], "coherence",
            (json_int_t)t.htod_by_cause[2], "prefetch", (json_int_t)t.htod_by_cause[3], "eviction",
            (json_int_t)t.htod_by_cause[4], "access_counters", (json_int_t)t.htod_by_cause[5],
            "gpu_page_faults", (json_int_t)t.gpu_faults, "gpu_fault_records",
            (json_int_t)t.gpu_fault_records, "gpu_faults_by_access", "unknown",
            (json_int_t)t.gpu_by_access[0], "read", (json_int_t)t.gpu_by_access[1], "write",
            (json_int_t)t.gpu_by_access[2], "atomic", (json_int_t)t.gpu_by_access[3], "prefetch",
            (json_int_t)t.gpu_by_access[4], "cpu_page_faults", (json_int_t)t.cpu_faults,
            "thrashing_events", (json_int_t)t.thrashing, "thrashing_bytes",
            (json_int_t)t.thrashing_bytes, "throttling_events", (json_int_t)t.throttling,
            "remote_map_events", (json_int_t)t.remote_map, "remote_map_bytes",
            (json_int_t)t.remote_map_bytes, "dropped_records", (json_int_t)t.dropped);
        if (o) {
                json_object_set_new(o, "settle_ms", json_real(settle_ms));
                json_object_set_new(o, "settled", json_boolean(settled));
        }
        return o;
}

json_t *explain_unavailable(const char *reason)
{
        char buf[sizeof(why) + EXPLAIN_WHY_WORDS]; /* "explanation unavailable: " and a why */
        snprintf(buf, sizeof(buf), "explanation unavailable: %s", reason ? reason : "unknown");
        return json_pack("{s:b, s:s}", "available", 0, "why", buf);
}
