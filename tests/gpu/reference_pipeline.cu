// reference_pipeline: the plain program umd's pipeline benchmark is checked against (no umd
// code). One training step: copy a batch of SIZE bytes from pinned memory to the GPU and run a
// kernel of K dependent FMAs on each of its floats. Times, each step between two events on its
// stream, warm-up first, median of N:
//   copy_alone, kernel_alone, serial (copy then kernel), overlapped (CHUNKS copies back to back
//   on one stream, each chunk's kernel on one of STREAMS-1 other streams after its copy's event)
// and, for the copy_overlap diagnosis (issue 21 item 6), chunked copy + light XOR kernel the way
// umd's copy_overlap did it before (each stream copies its chunk then runs its kernel, chunks
// round-robin over the streams) against the same chunks with the copies on one stream.
//   reference_pipeline [--size BYTES] [--intensity K|0] [--chunks N] [--streams N]
//                      [--iterations N] [--warmup N] [--managed 1]   prints one JSON line
// --managed 1 (issue 60) prints a second line instead of the diagnosis: managed memory
// prefetched chunk by chunk in each shape a program can issue it, after each way the batch can
// get back to the host (the matrix that finds what umd's managed_prefetch_chunked pays):
//   issue:  one_stream  every prefetch on stream 0, an event after each, each chunk's kernel on
//                       one of STREAMS-1 other streams after it (umd before issue 60)
//           round_robin chunk c's prefetch and its kernel both on stream c % STREAMS
//           batch       one cudaMemPrefetchBatchAsync of every chunk, then the kernel (CUDA 13)
//   reset (untimed, before each sample): prefetch_host (cudaMemPrefetchAsync to the host, umd
//           before issue 60), cpu_write (the CPU writes every byte, as a data loader does),
//           discard_write (cudaMemDiscardAndPrefetchBatchAsync to the host, then the CPU write:
//           the old batch is dead, so nothing moves back)
// with the prefetch alone (whole, one call) after each reset: the managed copy's own rate.
// --intensity 0 (default) finds the balanced K the way umd does: k <- k * copy / kernel(k).
// Exits 77 when there is no GPU.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <functional>
#include <vector>

#include "reference_common.h"

// The same arithmetic as umd's k_step, without its page mapping: every 16 bytes once.
__global__ void k_fma(const uint4 *p, size_t nvec, int k, unsigned *sink)
{
        size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
        size_t n = (size_t)gridDim.x * blockDim.x;
        unsigned acc = 0;
        for (size_t v = tid; v < nvec; v += n) {
                uint4 x = p[v];
                float f0 = (float)(x.x & 0xffff) * (1.0f / 65536), f1 = (float)(x.y & 0xffff),
                      f2 = (float)(x.z & 0xffff), f3 = (float)(x.w & 0xffff);
                for (int i = 0; i < k; i++) {
                        f0 = fmaf(f0, 0.999f, 0.001f);
                        f1 = fmaf(f1, 0.999f, 0.001f);
                        f2 = fmaf(f2, 0.999f, 0.001f);
                        f3 = fmaf(f3, 0.999f, 0.001f);
                }
                if (__float_as_uint(f0 + f1 + f2 + f3) == 0xffffffffu)
                        acc ^= 1;
                acc ^= x.x ^ x.y ^ x.z ^ x.w;
        }
        if (acc == 0x12345678u && tid == 0x7fffffff)
                *sink = acc;
}

// copy_overlap's light kernel: XOR every 16 bytes in place.
__global__ void k_xor(uint4 *p, size_t nvec)
{
        size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
        size_t n = (size_t)gridDim.x * blockDim.x;
        for (size_t v = tid; v < nvec; v += n) {
                uint4 x = p[v];
                x.x ^= 0x5A5A5A5Au;
                x.y ^= 0x5A5A5A5Au;
                x.z ^= 0x5A5A5A5Au;
                x.w ^= 0x5A5A5A5Au;
                p[v] = x;
        }
}

static int sms;
static unsigned grid(size_t bytes)
{
        size_t b = (bytes / 16 + 255) / 256;
        size_t max = (size_t)sms * 8;
        return (unsigned)std::max<size_t>(1, std::min(b, max));
}

typedef std::function<double(std::function<void()>, std::function<void()>, int)> timer_fn;

// The managed matrix (see the top): every issue shape after every reset, on one managed buffer.
static void managed_matrix(size_t size, int k, int chunks, int ns, int iterations,
                           std::vector<cudaStream_t> &s, std::vector<cudaEvent_t> &ev,
                           std::vector<cudaEvent_t> &join, timer_fn timed_after, double copy_ms,
                           double kern_ms, double pinned_over_ms)
{
        char *m;
        unsigned *sink;
        int dev = 0;
        CK(cudaGetDevice(&dev));
        cudaMemLocation host = {cudaMemLocationTypeHost, 0}, gpu = {cudaMemLocationTypeDevice, dev};
        CK(cudaMallocManaged(&m, size));
        CK(cudaMalloc(&sink, 4));
        memset(m, 0x21, size);
        size_t pages = size / 4096;
        auto span = [&](int c, size_t *off, size_t *len) {
                *off = pages * c / chunks * 4096;
                *len = (c == chunks - 1 ? size : pages * (c + 1) / chunks * 4096) - *off;
        };
        auto fma = [&](size_t off, size_t len, cudaStream_t st) {
                k_fma<<<grid(len), 256, 0, st>>>((const uint4 *)(m + off), len / 16, k, sink);
        };
        auto one_stream = [&] {
                for (int c = 0; c < chunks; c++) {
                        size_t off, len;
                        span(c, &off, &len);
                        CK(cudaMemPrefetchAsync(m + off, len, gpu, 0, s[0]));
                        CK(cudaEventRecord(ev[c], s[0]));
                        CK(cudaStreamWaitEvent(s[1 + c % (ns - 1)], ev[c], 0));
                        fma(off, len, s[1 + c % (ns - 1)]);
                }
                for (int x = 1; x < ns; x++) {
                        CK(cudaEventRecord(join[x], s[x]));
                        CK(cudaStreamWaitEvent(s[0], join[x], 0));
                }
        };
        auto round_robin = [&] {
                CK(cudaEventRecord(join[0], s[0]));
                for (int x = 1; x < ns; x++)
                        CK(cudaStreamWaitEvent(s[x], join[0], 0));
                for (int c = 0; c < chunks; c++) {
                        size_t off, len;
                        span(c, &off, &len);
                        CK(cudaMemPrefetchAsync(m + off, len, gpu, 0, s[c % ns]));
                        fma(off, len, s[c % ns]);
                }
                for (int x = 1; x < ns; x++) {
                        CK(cudaEventRecord(join[x], s[x]));
                        CK(cudaStreamWaitEvent(s[0], join[x], 0));
                }
        };
        std::vector<void *> ptrs(chunks);
        std::vector<size_t> lens(chunks);
        for (int c = 0; c < chunks; c++) {
                size_t off;
                span(c, &off, &lens[c]);
                ptrs[c] = m + off;
        }
        size_t idx0 = 0;
        auto batch = [&] {
                CK(cudaMemPrefetchBatchAsync(ptrs.data(), lens.data(), chunks, &gpu, &idx0, 1, 0,
                                             s[0]));
                fma(0, size, s[0]);
        };
        auto whole = [&] { CK(cudaMemPrefetchAsync(m, size, gpu, 0, s[0])); };
        auto prefetch_host = [&] {
                CK(cudaMemPrefetchAsync(m, size, host, 0, s[0]));
                CK(cudaStreamSynchronize(s[0]));
        };
        auto cpu_write = [&] {
                CK(cudaDeviceSynchronize());
                memset(m, 0x21, size);
        };
        void *mp = m;
        size_t msize = size;
        auto discard_write = [&] {
                CK(cudaMemDiscardAndPrefetchBatchAsync(&mp, &msize, 1, &host, &idx0, 1, 0, s[0]));
                CK(cudaStreamSynchronize(s[0]));
                memset(m, 0x21, size);
        };
        std::function<void()> resets[] = {prefetch_host, cpu_write, discard_write};
        const char *rname[] = {"prefetch_host", "cpu_write", "discard_write"};
        std::function<void()> shapes[] = {whole, one_stream, round_robin, batch};
        const char *sname[] = {"prefetch_alone", "one_stream", "round_robin", "batch"};
        double limit = std::max(copy_ms, kern_ms);
        printf("{\"size\": %zu, \"intensity\": %d, \"chunks\": %d, \"streams\": %d, "
               "\"copy_alone_ms\": %.4f, \"kernel_alone_ms\": %.4f, \"limit_ms\": %.4f, "
               "\"pinned_overlapped_ms\": %.4f, \"managed\": {",
               size, k, chunks, ns, copy_ms, kern_ms, limit, pinned_over_ms);
        for (int r = 0; r < 3; r++) {
                printf("%s\"%s\": {", r ? ", " : "", rname[r]);
                for (int x = 0; x < 4; x++) {
                        double t = timed_after(resets[r], shapes[x], iterations);
                        printf("%s\"%s_ms\": %.4f, \"%s_x\": %.3f", x ? ", " : "", sname[x], t,
                               sname[x], t / limit);
                }
                printf("}");
        }
        printf("}}\n");
        // the data arrived: after a CPU write, one more round robin step, then the host reads it
        cpu_write();
        round_robin();
        CK(cudaDeviceSynchronize());
        for (size_t i = 0; i < size; i += 4096)
                if (m[i] != 0x21) {
                        fprintf(stderr, "reference_pipeline: managed byte %zu is %d\n", i, m[i]);
                        exit(1);
                }
        CK(cudaFree(m));
        CK(cudaFree(sink));
}

int main(int argc, char **argv)
{
        size_t size = 1ull << 30;
        int k = 0, chunks = 64, nstreams = 3, iterations = 5, warmup = 3, ndev = 0, managed = 0;
        const struct {
                const char *flag;
                int *value;
        } flags[] = {{"--intensity", &k},           {"--chunks", &chunks}, {"--streams", &nstreams},
                     {"--iterations", &iterations}, {"--warmup", &warmup}, {"--managed", &managed}};
        for (int i = 1; i + 1 < argc; i += 2) {
                if (!strcmp(argv[i], "--size"))
                        size = strtoull(argv[i + 1], NULL, 0);
                for (auto &f : flags)
                        if (!strcmp(argv[i], f.flag))
                                *f.value = atoi(argv[i + 1]);
        }
        if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)
                return 77;
        CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
        char *host, *dev;
        unsigned *sink;
        CK(cudaMallocHost(&host, size));
        CK(cudaMalloc(&dev, size));
        CK(cudaMalloc(&sink, 4));
        memset(host, 0x21, size);
        std::vector<cudaStream_t> s(8);
        for (auto &x : s)
                CK(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
        cudaEvent_t a, b;
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
        std::vector<cudaEvent_t> ev(1024), join(8);
        for (auto &e : ev)
                CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        for (auto &e : join)
                CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));

        auto timed_after = [&](std::function<void()> reset, std::function<void()> work, int n) {
                std::vector<double> v;
                for (int i = 0; i < warmup + n; i++) {
                        float ms;
                        reset();
                        CK(cudaDeviceSynchronize());
                        CK(cudaEventRecord(a, s[0]));
                        work();
                        CK(cudaEventRecord(b, s[0]));
                        CK(cudaEventSynchronize(b));
                        CK(cudaEventElapsedTime(&ms, a, b));
                        if (i >= warmup)
                                v.push_back(ms);
                }
                return median(v);
        };
        auto timed = [&](std::function<void()> work, int n) { return timed_after([] {}, work, n); };
        auto copy = [&](size_t off, size_t len, cudaStream_t st) {
                CK(cudaMemcpyAsync(dev + off, host + off, len, cudaMemcpyHostToDevice, st));
        };
        auto fma = [&](size_t off, size_t len, int kk, cudaStream_t st) {
                k_fma<<<grid(len), 256, 0, st>>>((const uint4 *)(dev + off), len / 16, kk, sink);
        };
        // copies on s[0] with an event each, kernels on s[1..streams-1]
        auto one_copy_stream = [&](int n, int ns,
                                   std::function<void(size_t, size_t, cudaStream_t)> kern) {
                int nc = ns - 1;
                size_t pages = size / 4096;
                for (int c = 0; c < n; c++) {
                        size_t off = pages * c / n * 4096;
                        size_t end = c == n - 1 ? size : pages * (c + 1) / n * 4096;
                        copy(off, end - off, s[0]);
                        cudaStream_t cs = s[0];
                        if (nc) {
                                cs = s[1 + c % nc];
                                CK(cudaEventRecord(ev[c], s[0]));
                                CK(cudaStreamWaitEvent(cs, ev[c], 0));
                        }
                        kern(off, end - off, cs);
                }
                for (int x = 1; x <= nc; x++) {
                        CK(cudaEventRecord(join[x], s[x]));
                        CK(cudaStreamWaitEvent(s[0], join[x], 0));
                }
        };
        // umd's copy_overlap before issue 21: chunk c copied and processed on stream c % ns
        auto per_stream = [&](size_t chunk, int ns) {
                size_t n = (size + chunk - 1) / chunk;
                for (int x = 1; x < ns; x++)
                        CK(cudaStreamWaitEvent(s[x], a, 0));
                for (size_t c = 0; c < n; c++) {
                        size_t off = c * chunk, len = std::min(chunk, size - off);
                        copy(off, len, s[c % ns]);
                        k_xor<<<grid(len), 256, 0, s[c % ns]>>>((uint4 *)(dev + off), len / 16);
                }
                for (int x = 1; x < ns; x++) {
                        CK(cudaEventRecord(join[x], s[x]));
                        CK(cudaStreamWaitEvent(s[0], join[x], 0));
                }
        };

        double copy_ms = timed([&] { copy(0, size, s[0]); }, iterations);
        CK(cudaMemcpy(dev, host, size, cudaMemcpyHostToDevice));
        auto kernel_ms = [&](int kk) { return timed([&] { fma(0, size, kk, s[0]); }, 3); };
        if (k <= 0) {
                k = 256;
                for (int round = 0; round < 6; round++) {
                        double t = kernel_ms(k);
                        int nk = (int)std::max(1.0, std::min(k * copy_ms / t + 0.5, 1048576.0));
                        if (abs(nk - k) <= std::max(1, k / 200))
                                break;
                        k = nk;
                }
        }
        double kern = timed([&] { fma(0, size, k, s[0]); }, iterations);
        double serial = timed(
            [&] {
                    copy(0, size, s[0]);
                    fma(0, size, k, s[0]);
            },
            iterations);
        double over = timed(
            [&] {
                    one_copy_stream(chunks, nstreams,
                                    [&](size_t o, size_t l, cudaStream_t st) { fma(o, l, k, st); });
            },
            iterations);
        if (managed) {
                managed_matrix(size, k, chunks, nstreams, iterations, s, ev, join, timed_after,
                               copy_ms, kern, over);
                return 0;
        }
        // the copy_overlap diagnosis, light XOR kernel
        auto xor_k = [&](size_t o, size_t l, cudaStream_t st) {
                k_xor<<<grid(l), 256, 0, st>>>((uint4 *)(dev + o), l / 16);
        };
        double xserial = timed(
            [&] {
                    copy(0, size, s[0]);
                    xor_k(0, size, s[0]);
            },
            iterations);
        double old4 = timed([&] { per_stream(4ull << 20, 4); }, iterations);
        double old64 = timed([&] { per_stream(size / 16, 4); }, iterations);
        double old4_1 = timed([&] { per_stream(4ull << 20, 1); }, iterations);
        double new4 =
            timed([&] { one_copy_stream((int)std::min<size_t>(1024, size / (4 << 20)), 4, xor_k); },
                  iterations);
        double new16 = timed([&] { one_copy_stream(16, 3, xor_k); }, iterations);
        printf("{\"size\": %zu, \"intensity\": %d, \"chunks\": %d, \"streams\": %d, "
               "\"copy_alone_ms\": %.4f, \"kernel_alone_ms\": %.4f, \"serial_ms\": %.4f, "
               "\"overlapped_ms\": %.4f, \"copy_overlap_diagnosis\": {\"xor_serial_ms\": %.4f, "
               "\"per_stream_4MiB_4streams_ms\": %.4f, \"per_stream_size16_4streams_ms\": %.4f, "
               "\"per_stream_4MiB_1stream_ms\": %.4f, \"copy_stream_4MiB_3compute_ms\": %.4f, "
               "\"copy_stream_16chunks_2compute_ms\": %.4f}}\n",
               size, k, chunks, nstreams, copy_ms, kern, serial, over, xserial, old4, old64, old4_1,
               new4, new16);
        return 0;
}
