/* explain-probe: a plain CUPTI program, apart from umd, that asks where Unified Memory counter
 * records go missing on a large on-demand pass (issue 26), and stamps when pages arrive as the
 * kernel sees them.
 *
 *   explain-probe --size BYTES [--kinds K,K,...] [--flush-us N] [--forced] [--pieces BYTES]
 *                 [--prep host|fresh] [--buffer-mib N] [--stamps] [--alloc-after]
 *                 [--early-register] [--flush-period MS] [--quiet-ms MS]
 *
 * --kinds: CUPTI's Unified Memory counter kinds by number (1 HtoD bytes, 2 DtoH bytes, 3 CPU
 * page faults, 4 GPU page faults, ...; default all seven); --alloc-after: allocate and fill the
 * managed buffer after the counters are enabled, not before.
 *
 * One variant per process (UM counters, once enabled, stay for the process). Prints one JSON
 * line: bytes counted each way, records, dropped, the kernel's time, and with --stamps a summary
 * of the per-page arrival stamps. Build:
 *   nvcc -O2 -gencode arch=compute_90,code=[sm_90,compute_90] bench/explain-probe.cu \
 *        -o build/bench/explain-probe -L/usr/local/cuda/extras/CUPTI/lib64 -lcupti -lpthread */
#include <cuda_runtime.h>
#include <cupti.h>

#include <algorithm>
#include <atomic>
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <vector>

#define CK(x)                                                                                      \
        do {                                                                                       \
                cudaError_t e_ = (x);                                                              \
                if (e_ != cudaSuccess) {                                                           \
                        fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                   \
                        exit(1);                                                                   \
                }                                                                                  \
        } while (0)
#define CU(x)                                                                                      \
        do {                                                                                       \
                CUptiResult r_ = (x);                                                              \
                if (r_ != CUPTI_SUCCESS) {                                                         \
                        const char *s_ = "?";                                                      \
                        cuptiGetResultString(r_, &s_);                                             \
                        fprintf(stderr, "%s: %s\n", #x, s_);                                       \
                        exit(1);                                                                   \
                }                                                                                  \
        } while (0)

static size_t buffer_bytes = 32u << 20;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t bytes_htod, bytes_dtoh, rec_htod, rec_dtoh, rec_fault, faults, rec_other, dropped,
    buffers_done;
static uint64_t first_ts = UINT64_MAX, last_ts;

static void CUPTIAPI req(uint8_t **b, size_t *size, size_t *max)
{
        *b = (uint8_t *)aligned_alloc(8, buffer_bytes);
        *size = buffer_bytes;
        *max = 0;
}

static void CUPTIAPI done(CUcontext ctx, uint32_t stream, uint8_t *b, size_t size, size_t valid)
{
        CUpti_Activity *rec = NULL;
        size_t d = 0;
        pthread_mutex_lock(&mu);
        buffers_done++;
        while (cuptiActivityGetNextRecord(b, valid, &rec) == CUPTI_SUCCESS) {
                if (rec->kind != CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER) {
                        rec_other++;
                        continue;
                }
                auto *u = (CUpti_ActivityUnifiedMemoryCounter3 *)rec;
                if (u->counterKind ==
                    CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD) {
                        bytes_htod += u->value;
                        rec_htod++;
                        first_ts = std::min<uint64_t>(first_ts, u->start);
                        last_ts = std::max<uint64_t>(last_ts, u->end);
                } else if (u->counterKind ==
                           CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH) {
                        bytes_dtoh += u->value;
                        rec_dtoh++;
                } else if (u->counterKind ==
                           CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT) {
                        rec_fault++;
                        faults += u->value;
                } else {
                        rec_other++;
                }
        }
        if (cuptiActivityGetNumDroppedRecords(ctx, stream, &d) == CUPTI_SUCCESS)
                dropped += d;
        pthread_mutex_unlock(&mu);
        free(b);
        (void)size;
}

static double mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static uint64_t events(void)
{
        pthread_mutex_lock(&mu);
        uint64_t n = rec_htod + rec_dtoh + rec_fault + rec_other;
        pthread_mutex_unlock(&mu);
        return n;
}

/* Flush until nothing new came for quiet_ms (at most 5 s). */
static void settle(double quiet_ms)
{
        double t0 = mono_ms(), q = t0;
        uint64_t last = events();
        while (mono_ms() - t0 < 5000) {
                cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
                uint64_t n = events();
                if (n != last) {
                        last = n;
                        q = mono_ms();
                } else if (mono_ms() - q >= quiet_ms) {
                        break;
                }
                usleep(5000);
        }
}

static std::atomic<bool> flusher_stop;
static int flush_us;
static bool flush_forced;

static void *flusher(void *)
{
        while (!flusher_stop.load()) {
                cuptiActivityFlushAll(flush_forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
                usleep(flush_us);
        }
        return NULL;
}

__device__ __forceinline__ uint64_t gtimer(void)
{
        uint64_t t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        return t;
}

/* umd's grid-stride read-write kernel: 16 bytes a thread, a block covers 4 KiB a step. With
 * stamps, thread 0 of each block records the global timer once its first load of each page has
 * returned (the load's value feeds the stamp, so it cannot be taken early). */
__global__ void k_grid(uint4 *p, size_t n16, uint64_t *stamps)
{
        size_t stride = (size_t)gridDim.x * blockDim.x;
        for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += stride) {
                uint4 v = p[i];
                if (stamps && threadIdx.x == 0) {
                        asm volatile("" ::"r"(v.x)); /* the load has returned ... */
                        stamps[i / 256] = gtimer();  /* ... before the clock is read */
                }
                v.x ^= 0x5a5a5a5au;
                p[i] = v;
        }
}

int main(int argc, char **argv)
{
        size_t size = 64u << 20, pieces = 0;
        int kind_list[8] = {1, 2, 3, 4, 5, 6, 7}, kinds = 7, flush_period = 0;
        double quiet_ms = 500;
        bool alloc_after = false, early_register = false;
        const char *prep = "host";
        bool want_stamps = false;
        static const struct option opts[] = {{"size", required_argument, 0, 's'},
                                             {"kinds", required_argument, 0, 'k'},
                                             {"flush-us", required_argument, 0, 'f'},
                                             {"forced", no_argument, 0, 'F'},
                                             {"pieces", required_argument, 0, 'p'},
                                             {"prep", required_argument, 0, 'P'},
                                             {"buffer-mib", required_argument, 0, 'b'},
                                             {"stamps", no_argument, 0, 'S'},
                                             {"alloc-after", no_argument, 0, 'A'},
                                             {"early-register", no_argument, 0, 'E'},
                                             {"flush-period", required_argument, 0, 'T'},
                                             {"quiet-ms", required_argument, 0, 'Q'},
                                             {0, 0, 0, 0}};
        char argstr[512] = "";
        for (int i = 1; i < argc; i++)
                snprintf(argstr + strlen(argstr), sizeof(argstr) - strlen(argstr), "%s%s",
                         i > 1 ? " " : "", argv[i]);
        for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
                switch (c) {
                case 's':
                        size = strtoull(optarg, NULL, 0);
                        break;
                case 'k': {
                        kinds = 0;
                        for (char *t = strtok(optarg, ","); t && kinds < 8; t = strtok(NULL, ","))
                                kind_list[kinds++] = atoi(t);
                        break;
                }
                case 'A':
                        alloc_after = true;
                        break;
                case 'E':
                        early_register = true;
                        break;
                case 'T':
                        flush_period = atoi(optarg);
                        break;
                case 'Q':
                        quiet_ms = atof(optarg);
                        break;
                case 'f':
                        flush_us = atoi(optarg);
                        break;
                case 'F':
                        flush_forced = true;
                        break;
                case 'p':
                        pieces = strtoull(optarg, NULL, 0);
                        break;
                case 'P':
                        prep = optarg;
                        break;
                case 'b':
                        buffer_bytes = (size_t)atoi(optarg) << 20;
                        break;
                case 'S':
                        want_stamps = true;
                        break;
                default:
                        return 2;
                }
        }
        if (early_register)
                CU(cuptiActivityRegisterCallbacks(req, done));
        CK(cudaSetDevice(0));
        CK(cudaFree(0));
        int sms = 0;
        CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
        cudaStream_t s;
        CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        uint8_t *p = NULL;
        uint64_t *stamps = NULL;
        size_t pages = size / 4096;
        if (want_stamps) {
                CK(cudaMalloc(&stamps, pages * sizeof(uint64_t)));
                CK(cudaMemset(stamps, 0, pages * sizeof(uint64_t)));
        }
        auto alloc_fill = [&]() {
                CK(cudaMallocManaged(&p, size));
                for (size_t i = 0; i < size; i += 4096)
                        memset(p + i, (int)(i >> 12), 4096);
                if (strcmp(prep, "host") == 0) {
                        /* as umd's prep: pages on the GPU in the timed samples, then back */
                        cudaMemLocation dev = {cudaMemLocationTypeDevice, 0};
                        cudaMemLocation host = {cudaMemLocationTypeHost, 0};
                        CK(cudaMemPrefetchAsync(p, size, dev, 0, s));
                        CK(cudaStreamSynchronize(s));
                        CK(cudaMemPrefetchAsync(p, size, host, 0, s));
                        CK(cudaStreamSynchronize(s));
                }
                CK(cudaDeviceSynchronize());
        };
        if (!alloc_after)
                alloc_fill();

        if (!early_register)
                CU(cuptiActivityRegisterCallbacks(req, done));
        if (flush_period > 0)
                CU(cuptiActivityFlushPeriod((uint32_t)flush_period));
        CUpti_ActivityUnifiedMemoryCounterConfig cfg[8];
        for (int k = 0; k < kinds; k++)
                cfg[k] = {CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_ALL_DEVICES,
                          (CUpti_ActivityUnifiedMemoryCounterKind)kind_list[k], 0, 1};
        CU(cuptiActivityConfigureUnifiedMemoryCounter(cfg, (uint32_t)kinds));
        CU(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER));
        if (alloc_after) {
                alloc_fill();
                settle(200); /* the prep's own migrations, counted apart */
                pthread_mutex_lock(&mu);
                bytes_htod = bytes_dtoh = rec_htod = rec_dtoh = rec_fault = faults = rec_other = 0;
                first_ts = UINT64_MAX;
                last_ts = 0;
                pthread_mutex_unlock(&mu);
        }

        pthread_t th;
        if (flush_us > 0)
                pthread_create(&th, NULL, flusher, NULL);
        unsigned blocks = (unsigned)sms * 8;
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        size_t piece = pieces ? pieces : size;
        float kernel_ms = 0;
        for (size_t off = 0; off < size; off += piece) {
                size_t n = std::min(piece, size - off);
                float ms = 0;
                CK(cudaEventRecord(e0, s));
                k_grid<<<std::min<size_t>(blocks, n / 4096), 256, 0, s>>>(
                    (uint4 *)(p + off), n / 16, stamps ? stamps + off / 4096 : NULL);
                CK(cudaEventRecord(e1, s));
                CK(cudaEventSynchronize(e1));
                CK(cudaEventElapsedTime(&ms, e0, e1));
                kernel_ms += ms;
                if (pieces)
                        settle(100);
        }
        flusher_stop = true;
        if (flush_us > 0)
                pthread_join(th, NULL);
        double t0 = mono_ms();
        settle(quiet_ms);
        double settle_ms = mono_ms() - t0;
        cuptiActivityDisable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
        cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);

        printf("{\"args\": \"%s\", ", argstr);
        printf("\"size\": %zu, \"kinds\": %d, \"flush_us\": %d, \"forced\": %d, \"pieces\": %zu, "
               "\"prep\": \"%s\", \"buffer_mib\": %zu, \"kernel_ms\": %.3f, \"settle_ms\": %.0f, "
               "\"bytes_htod\": %llu, \"share_htod\": %.4f, \"bytes_dtoh\": %llu, \"rec_htod\": "
               "%llu, \"rec_dtoh\": %llu, \"rec_fault\": %llu, \"faults\": %llu, \"rec_other\": "
               "%llu, \"dropped\": %llu, \"buffers\": %llu, \"htod_span_ms\": %.3f",
               size, kinds, flush_us, flush_forced, pieces, prep, buffer_bytes >> 20, kernel_ms,
               settle_ms, (unsigned long long)bytes_htod, (double)bytes_htod / size,
               (unsigned long long)bytes_dtoh, (unsigned long long)rec_htod,
               (unsigned long long)rec_dtoh, (unsigned long long)rec_fault,
               (unsigned long long)faults, (unsigned long long)rec_other,
               (unsigned long long)dropped, (unsigned long long)buffers_done,
               last_ts > first_ts ? (last_ts - first_ts) / 1e6 : 0.0);
        if (stamps) {
                std::vector<uint64_t> h(pages);
                CK(cudaMemcpy(h.data(), stamps, pages * 8, cudaMemcpyDeviceToHost));
                std::sort(h.begin(), h.end());
                uint64_t t_first = h.front(), t_last = h.back();
                std::vector<uint64_t> gaps;
                for (size_t i = 1; i < pages; i++)
                        gaps.push_back(h[i] - h[i - 1]);
                std::vector<uint64_t> g = gaps;
                std::sort(g.begin(), g.end());
                auto q = [&](double f) { return g.empty() ? 0 : g[(size_t)(f * (g.size() - 1))]; };
                printf(", \"stamps\": {\"pages\": %zu, \"span_ms\": %.3f, \"gap_ns\": {\"p50\": "
                       "%llu, \"p90\": %llu, \"p99\": %llu, \"p999\": %llu, \"max\": %llu}",
                       pages, (t_last - t_first) / 1e6, (unsigned long long)q(0.5),
                       (unsigned long long)q(0.9), (unsigned long long)q(0.99),
                       (unsigned long long)q(0.999), (unsigned long long)g.back());
                for (uint64_t thr : {2000ull, 5000ull, 10000ull, 20000ull, 50000ull}) {
                        size_t bursts = 1;
                        uint64_t idle = 0;
                        for (uint64_t x : gaps)
                                if (x > thr) {
                                        bursts++;
                                        idle += x;
                                }
                        printf(", \"gt%lluus\": {\"bursts\": %zu, \"idle_ms\": %.3f}",
                               (unsigned long long)(thr / 1000), bursts, idle / 1e6);
                }
                /* a coarse arrival curve: pages stamped in each tenth of the span */
                printf(", \"deciles\": [");
                size_t k = 0;
                for (int d = 1; d <= 10; d++) {
                        uint64_t lim = t_first + (t_last - t_first) * d / 10;
                        size_t c = 0;
                        while (k < pages && h[k] <= lim) {
                                k++;
                                c++;
                        }
                        printf("%s%zu", d > 1 ? ", " : "", c);
                }
                printf("]}");
        }
        printf("}\n");
        return 0;
}
