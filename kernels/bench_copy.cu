/* Explicit copies: copy (h2d, d2h, bidir; pinned or pageable), copy_overlap (chunks on streams
 * overlapped with a kernel, against copy-then-kernel), latency (small copies, managed page
 * faults) and d2d (device to device within one GPU, copy engine and a copy kernel). Owns how these
 * are timed and verified; buffers come from bench.cu's pool. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench_internal.h"

struct host_buf {
        void *p;
        bool pinned;
};

/* Host buffer slot, pinned or pageable, both from the pool. A pooled pageable buffer is still
 * the application's own malloc (never pinned nor registered): it only skips the first-touch
 * faults and the munmap that every job used to pay outside its samples. */
static int get_host(struct bench_job *j, int slot, bool pinned, size_t size, struct host_buf *ret)
{
        ret->pinned = pinned;
        if (pinned)
                return pool_host(j, slot, size, &ret->p);
        return pool_pageable(j, slot, size, &ret->p);
}

static int fill_host(struct bench_job *j, struct host_buf *b, size_t size, uint32_t seed)
{
        if (b->pinned) /* mapped: the GPU writes it at PCIe speed, faster than one CPU core */
                return dev_fill(j, b->p, size, seed, 0, j->ctx->streams[0]);
        host_fill(b->p, size, seed);
        return 0;
}

static int verify_host(struct bench_job *j, struct host_buf *b, size_t size, uint32_t seed,
                       const char *what)
{
        if (b->pinned)
                return dev_verify(j, b->p, size, seed, 0, what);
        return host_verify(j, b->p, size, seed, 0, what);
}

/* Copies per sample: enough that a small copy's sample is not one event tick, few enough that
 * the stream's queue never fills while the gate holds it. */
int copies_per_sample(uint64_t size)
{
        uint64_t n = BENCH_GATE_BELOW / size;
        return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

int bench_copy(struct bench_job *j)
{
        struct bench_ctx *c = j->ctx;
        const char *dir = param_str(j, "direction", "h2d");
        bool pinned = strcmp(param_str(j, "host_memory", "pinned"), "pinned") == 0;
        bool h2d = strcmp(dir, "h2d") == 0 || strcmp(dir, "bidir") == 0;
        bool d2h = strcmp(dir, "d2h") == 0 || strcmp(dir, "bidir") == 0;
        size_t size = j->size;
        struct host_buf src = {}, dst = {};
        void *dsrc = NULL, *ddst = NULL;
        std::vector<double> samples;
        int reps = copies_per_sample(size);
        /* Pageable copies are synchronous for the host beyond a staging size, so they cannot
         * sit behind a gate the host releases afterwards. */
        bool gated = pinned && size < BENCH_GATE_BELOW;
        bool gate_timeouts = false;
        cudaStream_t s0 = c->streams[0], s1 = c->streams[1];
        int r;

        json_object_set_new(j->context_extra, "host_memory",
                            json_string(pinned ? "pinned" : "pageable"));
        json_object_set_new(j->context_extra, "direction", json_string(dir));

        if (h2d) {
                r = get_host(j, 0, pinned, size, &src);
                if (r >= 0)
                        r = pool_dev(j, 0, size, &ddst);
                if (r >= 0)
                        r = fill_host(j, &src, size, j->seed);
                if (r < 0)
                        return r;
                CK(j, cudaMemsetAsync(ddst, 0, size, s0));
        }
        if (d2h) {
                r = get_host(j, 1, pinned, size, &dst);
                if (r >= 0)
                        r = pool_dev(j, 1, size, &dsrc);
                if (r >= 0)
                        r = dev_fill(j, dsrc, size, j->seed + 1, 0, s0);
                if (r < 0)
                        return r;
                if (pinned)
                        CK(j, cudaMemsetAsync(dst.p, 0, size, s0));
                else
                        memset(dst.p, 0, size);
        }
        CK(j, cudaStreamSynchronize(s0));

        r = sample_events(
            j, samples, [&]() -> int { return gate_before_sample(j, gated, &gate_timeouts, s0); },
            [&]() -> int {
                    if (d2h && h2d) {
                            /* Both directions start from the same event and stream 0
                             * waits for stream 1 before the stop event. */
                            CK(j, cudaStreamWaitEvent(s1, c->ev_start, 0));
                    }
                    for (int k = 0; k < reps; k++) {
                            if (h2d)
                                    CK(j, cudaMemcpyAsync(ddst, src.p, size, cudaMemcpyHostToDevice,
                                                          s0));
                            if (d2h)
                                    CK(j, cudaMemcpyAsync(dst.p, dsrc, size, cudaMemcpyDeviceToHost,
                                                          h2d ? s1 : s0));
                    }
                    if (d2h && h2d) {
                            CK(j, cudaEventRecord(c->ev_join[1], s1));
                            CK(j, cudaStreamWaitEvent(s0, c->ev_join[1], 0));
                    }
                    if (gated)
                            return gate_open(j, c->ev_stop, s0);
                    return 0;
            });
        if (r < 0)
                return r;
        samples_per_copy(j, samples, reps, gated, &gate_timeouts);

        /* Verification after the samples, outside every timed window. */
        if (h2d) {
                r = dev_verify(j, ddst, size, j->seed, 0, "device buffer after h2d copies");
                if (r < 0)
                        return r;
        }
        if (d2h) {
                r = verify_host(j, &dst, size, j->seed + 1, "host buffer after d2h copies");
                if (r < 0)
                        return r;
        }
        if (gate_timeouts)
                add_note(j, "the spin kernel timed out before the copies were queued: samples "
                            "may include launch cost");
        return add_measurement(j,
                               h2d && d2h ? MEAS_BIDIR
                               : h2d      ? MEAS_H2D
                                          : MEAS_D2H,
                               (double)size * (h2d && d2h ? 2 : 1),
                               h2d && d2h ? "both directions" : "one direction", samples, false,
                               json_pack("{s:i, s:b}", "copies_per_sample", reps, "gated", gated));
}

/* copy_overlap's overlapped step: every chunk copied on stream 0 and each one's kernel on one of
 * the other streams after its copy landed, into out. */
static int overlap_chunked(struct bench_job *j, void *dev, void *host, size_t chunk, int nstreams,
                           std::vector<double> &out)
{
        struct bench_ctx *c = j->ctx;
        size_t size = j->size;
        size_t nchunks = (size + chunk - 1) / chunk;
        cudaStream_t s0 = c->streams[0];
        auto none = []() -> int { return 0; };
        std::vector<cudaEvent_t> landed(nstreams > 1 ? nchunks : 0);
        struct events {
                std::vector<cudaEvent_t> &v;
                ~events()
                {
                        for (cudaEvent_t e : v)
                                if (e)
                                        cudaEventDestroy(e);
                }
        } eg = {landed};
        for (cudaEvent_t &e : landed)
                CK(j, cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        /* Every copy on stream 0, back to back, each chunk's kernel on one of the other streams
         * after its copy's event. Issue 21 found the old way (each stream copying its chunk,
         * then running its kernel) about 10% slower than serial at 1 GiB in 4 MiB chunks with
         * this light kernel; the suspected cause is several H2D copies in flight at once on
         * different copy engines, which one copy stream rules out. Not yet confirmed on a GPU:
         * tests/gpu/reference_pipeline times both ways side by side (bench/pipeline-run.sh). */
        return sample_events(j, out, none, [&]() -> int {
                int ncompute = nstreams - 1;
                for (size_t k = 0; k < nchunks; k++) {
                        size_t off = k * chunk, len = size - off < chunk ? size - off : chunk;
                        cudaStream_t s = s0;
                        CK(j, cudaMemcpyAsync((char *)dev + off, (char *)host + off, len,
                                              cudaMemcpyHostToDevice, s0));
                        if (ncompute) {
                                s = c->streams[1 + k % ncompute];
                                CK(j, cudaEventRecord(landed[k], s0));
                                CK(j, cudaStreamWaitEvent(s, landed[k], 0));
                        }
                        int r = launch_process(j, (char *)dev + off, len, OP_READ_WRITE, false, s);
                        if (r < 0)
                                return r;
                }
                for (int s = 1; s <= ncompute; s++) {
                        CK(j, cudaEventRecord(c->ev_join[s], c->streams[s]));
                        CK(j, cudaStreamWaitEvent(s0, c->ev_join[s], 0));
                }
                return 0;
        });
}

/* The two halves of the step alone: overlap can save at most the shorter, so a kernel much
 * shorter than the copy leaves nothing to hide (daemon/suites.c says so). Checks the device
 * buffer after both. */
static int overlap_halves(struct bench_job *j, void *dev, void *host,
                          std::vector<double> &copy_alone, std::vector<double> &kernel_alone)
{
        size_t size = j->size;
        cudaStream_t s0 = j->ctx->streams[0];
        auto none = []() -> int { return 0; };
        uint64_t kernel_runs = 0;
        int r = sample_events(j, copy_alone, none, [&]() -> int {
                CK(j, cudaMemcpyAsync(dev, host, size, cudaMemcpyHostToDevice, s0));
                return 0;
        });
        if (r >= 0)
                r = sample_events(j, kernel_alone, none, [&]() -> int {
                        kernel_runs++;
                        return launch_process(j, dev, size, OP_READ_WRITE, false, s0);
                });
        if (r >= 0)
                r = dev_verify(j, dev, size, j->seed, kernel_runs % 2 ? BENCH_XOR_BYTE : 0,
                               "device buffer after the copies and kernels alone");
        return r;
}

int bench_copy_overlap(struct bench_job *j)
{
        struct bench_ctx *c = j->ctx;
        size_t size = j->size;
        size_t chunk = (size_t)param_int(j, "chunk", 0);
        int nstreams = (int)param_int(j, "streams", 4);
        void *host = NULL, *dev = NULL;
        std::vector<double> overlapped, serial;
        cudaStream_t s0 = c->streams[0];
        int r;

        if (nstreams < 1 || nstreams > BENCH_STREAMS)
                return job_fail(j, -EINVAL, "streams must be between 1 and %d", BENCH_STREAMS);
        /* Every copy has a fixed cost (about 16 us on an H200): many small chunks lose more to
         * it than a light kernel's overlap can win back, so by default a sixteenth of size. */
        if (chunk == 0)
                chunk = std::max(size / 16, (size_t)4 << 20);
        chunk = std::min(chunk, size);
        size_t nchunks = (size + chunk - 1) / chunk;
        bool pinned = strcmp(param_str(j, "host_memory", "pinned"), "pinned") == 0;
        json_object_set_new(j->context_extra, "host_memory",
                            json_string(pinned ? "pinned" : "pageable"));
        json_object_set_new(j->context_extra, "chunk", json_integer((json_int_t)chunk));
        json_object_set_new(j->context_extra, "streams", json_integer(nstreams));

        struct host_buf hb = {};
        r = get_host(j, 0, pinned, size, &hb);
        if (r < 0)
                return r;
        host = hb.p;
        r = pool_dev(j, 0, size, &dev);
        if (r >= 0)
                r = fill_host(j, &hb, size, j->seed);
        if (r < 0)
                return r;

        r = overlap_chunked(j, dev, host, chunk, nstreams, overlapped);
        if (r < 0)
                return r;
        /* Every run copies fresh data and XORs it once. */
        r = dev_verify(j, dev, size, j->seed, BENCH_XOR_BYTE,
                       "device buffer after overlapped copies and kernels");
        if (r < 0)
                return r;
        CK(j, cudaMemsetAsync(dev, 0, size, s0));

        r = sample_events(
            j, serial, []() -> int { return 0; },
            [&]() -> int {
                    CK(j, cudaMemcpyAsync(dev, host, size, cudaMemcpyHostToDevice, s0));
                    return launch_process(j, dev, size, OP_READ_WRITE, false, s0);
            });
        if (r < 0)
                return r;
        r = dev_verify(j, dev, size, j->seed, BENCH_XOR_BYTE,
                       "device buffer after copy-then-kernel");
        if (r < 0)
                return r;

        std::vector<double> copy_alone, kernel_alone;
        r = overlap_halves(j, dev, host, copy_alone, kernel_alone);
        if (r < 0)
                return r;

        r = add_measurement(
            j, MEAS_OVERLAPPED, (double)size, "one direction", overlapped, false,
            json_pack("{s:I, s:i}", "chunks", (json_int_t)nchunks, "streams", nstreams));
        if (r >= 0)
                r = add_measurement(j, MEAS_SERIAL, (double)size, "one direction", serial, false,
                                    NULL);
        if (r >= 0)
                r = add_measurement(j, MEAS_COPY_ALONE, (double)size, "one direction", copy_alone,
                                    false, NULL);
        if (r >= 0)
                r = add_measurement(j, MEAS_KERNEL_ALONE, 2.0 * (double)size, "read+write",
                                    kernel_alone, false, NULL);
        return r;
}

/* Round trip of one small copy and its synchronisation, as an application sees it. */
static int latency_copies(struct bench_job *j, const char *name, void *hostp, void *devp,
                          size_t size, bool h2d, int repeats)
{
        cudaStream_t s0 = j->ctx->streams[0];
        std::vector<double> samples;
        int r = sample_host(
            j, samples, []() -> int { return 0; },
            [&]() -> int {
                    for (int k = 0; k < repeats; k++) {
                            CK(j, cudaMemcpyAsync(
                                      h2d ? devp : hostp, h2d ? hostp : devp, size,
                                      h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, s0));
                            CK(j, cudaStreamSynchronize(s0));
                    }
                    return 0;
            });
        if (r < 0)
                return r;
        for (double &s : samples)
                s /= repeats;
        struct sample_stats st;
        stats_compute(samples.data(), samples.size(), &st);
        return add_measurement(j, name, (double)size, "one direction", samples, false,
                               json_pack("{s:f, s:i, s:s}", "latency_us", st.median * 1e3,
                                         "copies_per_sample", repeats, "timer", "host clock"));
}

/* latency's copies, pinned and pageable, each way the run takes (only), each checked after it. */
static int latency_copy_all(struct bench_job *j, void *pin, void *dev, void *pageable, int repeats)
{
        size_t size = j->size;
        int r = 0;

        /* Each copy's check follows it; a d2h copy is checked against the pattern the h2d copy
         * before it would have left, so without one the device buffer is filled first. */
        host_fill(pin, size, j->seed);
        if (bench_takes(j, MEAS_PINNED_H2D)) {
                r = latency_copies(j, MEAS_PINNED_H2D, pin, dev, size, true, repeats);
                if (r >= 0)
                        r = dev_verify(j, dev, size, j->seed, 0, "device buffer after pinned h2d");
        } else if (bench_takes(j, MEAS_PINNED_D2H)) {
                CK(j, cudaMemcpy(dev, pin, size, cudaMemcpyHostToDevice));
        }
        if (r >= 0 && bench_takes(j, MEAS_PINNED_D2H)) {
                memset(pin, 0, size);
                r = latency_copies(j, MEAS_PINNED_D2H, pin, dev, size, false, repeats);
                if (r >= 0)
                        r = host_verify(j, pin, size, j->seed, 0, "host buffer after pinned d2h");
        }
        if (r >= 0 && (bench_takes(j, MEAS_PAGEABLE_H2D) || bench_takes(j, MEAS_PAGEABLE_D2H))) {
                host_fill(pageable, size, j->seed + 1);
                if (bench_takes(j, MEAS_PAGEABLE_H2D))
                        r = latency_copies(j, MEAS_PAGEABLE_H2D, pageable, dev, size, true,
                                           repeats);
                else
                        CK(j, cudaMemcpy(dev, pageable, size, cudaMemcpyHostToDevice));
                if (r >= 0)
                        r = dev_verify(j, dev, size, j->seed + 1, 0,
                                       "device buffer after pageable h2d");
        }
        if (r >= 0 && bench_takes(j, MEAS_PAGEABLE_D2H)) {
                memset(pageable, 0, size);
                r = latency_copies(j, MEAS_PAGEABLE_D2H, pageable, dev, size, false, repeats);
                if (r >= 0)
                        r = host_verify(j, pageable, size, j->seed + 1, 0,
                                        "host buffer after pageable d2h");
        }
        return r;
}

/* After the fault passes: each page's first word was XORed once per pass (touches of them),
 * the rest is untouched. */
static int latency_verify_pages(struct bench_job *j, const void *managed, uint64_t pages,
                                uint64_t spacing, uint64_t touches)
{
        CK(j, cudaDeviceSynchronize());
        uint32_t xw = touches % 2 ? BENCH_XOR_WORD : 0;
        uint64_t bad = 0;
        for (uint64_t p = 0; p < pages; p++) {
                uint64_t w = p * spacing / 4;
                bad += ((const uint32_t *)managed)[w] != (pattern_word(w, j->seed) ^ xw);
                bad += ((const uint32_t *)managed)[w + 1] != pattern_word(w + 1, j->seed);
        }
        if (bad)
                return job_fail(j, -EIO, "verification failed: %llu managed words differ",
                                (unsigned long long)bad);
        return 0;
}

/* The fault measurements the run takes, each a page's mean latency. */
static int latency_report_faults(struct bench_job *j, std::vector<double> &single,
                                 std::vector<double> &bulk, std::vector<double> &resident,
                                 uint64_t pages, uint64_t spacing)
{
        int r = 0;

        for (auto *m : {&single, &bulk, &resident}) {
                if (r < 0)
                        break;
                struct sample_stats st;
                const char *name = m == &single ? MEAS_FAULT_SINGLE
                                   : m == &bulk ? MEAS_FAULT_BULK
                                                : MEAS_RESIDENT;
                if (!bench_takes(j, name))
                        continue;
                stats_compute(m->data(), m->size(), &st);
                r = add_measurement(j, name, 4.0, "one word touched per page", *m, false,
                                    json_pack("{s:f, s:I, s:I}", "latency_us", st.median * 1e3,
                                              "pages", (json_int_t)pages, "page_spacing_bytes",
                                              (json_int_t)spacing));
        }
        return r;
}

/* latency's managed page faults: one page at a time from the host (single) or already on the
 * GPU (resident), and every page in one kernel (bulk). */
static int latency_faults(struct bench_job *j, uint64_t pages, uint64_t spacing)
{
        struct bench_ctx *c = j->ctx;
        cudaStream_t s0 = c->streams[0];
        void *managed = NULL;
        uint64_t touches = 0;
        size_t msize = pages * spacing;
        int r = managed_alloc(j, msize, &managed);
        if (r < 0)
                return r;
        host_fill(managed, msize, j->seed);

        std::vector<double> single, bulk, resident;
        auto to_host = [&]() -> int {
                CK(j, cudaMemPrefetchAsync(managed, msize, loc_host(), 0, s0));
                CK(j, cudaStreamSynchronize(s0));
                return 0;
        };
        auto to_dev = [&]() -> int {
                CK(j, cudaMemPrefetchAsync(managed, msize, loc_dev(c), 0, s0));
                CK(j, cudaStreamSynchronize(s0));
                return 0;
        };
        /* One kernel per page, each timed alone; a sample is their mean. */
        auto one_by_one = [&](std::vector<double> &out, bool on_gpu) -> int {
                for (int i = 0; i < j->warmup + j->iterations; i++) {
                        double sum = 0;
                        if (job_cancelled(j))
                                return job_fail(j, -ECANCELED, "cancelled");
                        int rr = on_gpu ? to_dev() : to_host();
                        if (rr < 0)
                                return rr;
                        for (uint64_t p = 0; p < pages; p++) {
                                float ms;
                                CK(j, cudaEventRecord(c->ev_start, s0));
                                rr = launch_touch(j, managed, p, 1, spacing, s0);
                                if (rr < 0)
                                        return rr;
                                CK(j, cudaEventRecord(c->ev_stop, s0));
                                CK(j, cudaEventSynchronize(c->ev_stop));
                                CK(j, cudaEventElapsedTime(&ms, c->ev_start, c->ev_stop));
                                sum += ms;
                        }
                        touches++;
                        if (i >= j->warmup)
                                out.push_back(sum / (double)pages);
                }
                return 0;
        };
        if (bench_takes(j, MEAS_FAULT_SINGLE))
                r = one_by_one(single, false);
        if (r >= 0 && bench_takes(j, MEAS_RESIDENT))
                r = one_by_one(resident, true);
        if (r >= 0 && bench_takes(j, MEAS_FAULT_BULK))
                r = sample_events(j, bulk, to_host, [&]() -> int {
                        touches++;
                        return launch_touch(j, managed, 0, pages, spacing, s0);
                });
        if (r >= 0) {
                for (double &s : bulk)
                        s /= (double)pages;
                r = latency_verify_pages(j, managed, pages, spacing, touches);
        }
        if (r >= 0)
                r = latency_report_faults(j, single, bulk, resident, pages, spacing);
        cudaFree(managed);
        return r;
}

int bench_latency(struct bench_job *j)
{
        size_t size = j->size;
        int repeats = (int)param_int(j, "repeats", 100);
        uint64_t pages = (uint64_t)param_int(j, "pages", 64);
        /* 2 MiB apart: the largest block the driver migrates at once, so each touch is its own
         * fault rather than a neighbour brought in by the previous one. */
        const uint64_t spacing = 2ull << 20;
        void *pin = NULL, *dev = NULL, *pageable = NULL;
        int r;

        r = pool_host(j, 0, size, &pin);
        if (r >= 0)
                r = pool_dev(j, 0, size, &dev);
        if (r < 0)
                return r;
        pageable = aligned_alloc(4096, (size + 4095) / 4096 * 4096);
        if (!pageable)
                return job_fail(j, -ENOMEM, "out of memory");
        r = latency_copy_all(j, pin, dev, pageable, repeats);
        free(pageable);
        if (r < 0)
                return r;
        if (!bench_takes(j, MEAS_FAULT_SINGLE) && !bench_takes(j, MEAS_FAULT_BULK) &&
            !bench_takes(j, MEAS_RESIDENT))
                return 0;
        return latency_faults(j, pages, spacing);
}

/* One way of copying within the GPU, timed like copy's pinned copies (small ones repeated behind
 * the gate), then checked against the pattern outside the samples. */
static int d2d_one(struct bench_job *j, bool sm, void *dst, void *src, const char *name,
                   const json_t *extra)
{
        struct bench_ctx *c = j->ctx;
        size_t size = j->size;
        int reps = copies_per_sample(size);
        bool gated = size < BENCH_GATE_BELOW, gate_timeouts = false;
        cudaStream_t s0 = c->streams[0];
        std::vector<double> samples;
        int r;

        CK(j, cudaMemsetAsync(dst, 0, size, s0));
        CK(j, cudaStreamSynchronize(s0));
        r = sample_events(
            j, samples, [&]() -> int { return gate_before_sample(j, gated, &gate_timeouts, s0); },
            [&]() -> int {
                    for (int k = 0; k < reps; k++) {
                            if (sm) {
                                    int rr = launch_copy(j, dst, src, size, s0);
                                    if (rr < 0)
                                            return rr;
                            } else {
                                    CK(j, cudaMemcpyAsync(dst, src, size, cudaMemcpyDeviceToDevice,
                                                          s0));
                            }
                    }
                    if (gated)
                            return gate_open(j, c->ev_stop, s0);
                    return 0;
            });
        if (r < 0)
                return r;
        samples_per_copy(j, samples, reps, gated, &gate_timeouts);
        r = dev_verify(j, dst, size, j->seed, 0,
                       sm ? "destination after the copy kernel"
                          : "destination after device copies");
        if (r < 0)
                return r;
        if (gate_timeouts)
                add_note(j, "the spin kernel timed out before the copies were queued: samples "
                            "may include launch cost");
        json_t *x = json_pack("{s:i, s:b}", "copies_per_sample", reps, "gated", gated);
        if (x && extra)
                json_object_update(x, (json_t *)extra);
        return add_measurement(j, name, 2.0 * (double)size, "read+write", samples, false, x);
}

int d2d_measure(struct bench_job *j, const char *ce_name, const char *sm_name, const json_t *extra)
{
        void *src = NULL, *dst = NULL;
        int r = pool_dev(j, 0, j->size, &src);

        if (r >= 0)
                r = pool_dev(j, 1, j->size, &dst);
        if (r >= 0)
                r = dev_fill(j, src, j->size, j->seed, 0, j->ctx->streams[0]);
        if (r >= 0 && ce_name)
                r = d2d_one(j, false, dst, src, ce_name, extra);
        if (r >= 0 && sm_name)
                r = d2d_one(j, true, dst, src, sm_name, extra);
        return r;
}

int bench_d2d(struct bench_job *j)
{
        return d2d_measure(j, MEAS_COPY_ENGINE, MEAS_SM_COPY, NULL);
}
