/* The benchmark catalog's entries: one static table of every benchmark and suite with its
 * parameters (types, bounds, defaults, allowed values) and measurement names, and the lookups
 * over it. Data, not rules: catalog_params.c validates against these entries, catalog_json.c
 * derives the listing (GET /v1/benchmarks) and the params' JSON Schemas from them. The parameter
 * tables sit in this one file because catalog[] takes each one's length at compile time. It
 * never allocates GPU memory, never knows which device a job runs on, and never logs. */
#include <string.h>

#include "catalog.h"
#include "util.h"

#define KiB 1024LL
#define MiB (1024LL * KiB)
#define GiB (1024LL * MiB)

static const char *const access_values[] = {"sequential", "strided", "random", NULL};
static const char *const direction_values[] = {"h2d", "d2h", "bidir", NULL};
static const char *const host_memory_values[] = {"pinned", "pageable", NULL};
/* managed kernels' access shape (issue 17): today's grid-stride loop, or one warp per 64 KiB
 * chunk walking it in order, as a fault-friendly program would. */
static const char *const kernel_values[] = {"grid_stride", "warp_per_chunk", NULL};
static const char *const advice_values[] = {"read_mostly", "preferred_location_host",
                                            "preferred_location_device", "accessed_by", NULL};
/* Modes a sweep can chart; each maps to one measurement of one benchmark. */
static const char *const sweep_mode_values[] = {MEAS_PINNED_H2D,
                                                MEAS_PINNED_D2H,
                                                MEAS_PAGEABLE_H2D,
                                                MEAS_PAGEABLE_D2H,
                                                MEAS_BIDIR,
                                                MEAS_ZERO_COPY,
                                                MEAS_MANAGED_ON_DEMAND,
                                                MEAS_MANAGED_PREFETCH,
                                                NULL};

#define P_SIZE(def_)                                                                               \
        {                                                                                          \
                .name = "size", .type = PARAM_SIZE, .unit = "bytes",                               \
                .description = "bytes per buffer: an integer or a string like \"64MiB\"",          \
                .min = 4 * KiB, .max = 0, .def = (def_)                                            \
        }
#define P_ITER(def_)                                                                               \
        {                                                                                          \
                .name = "iterations", .type = PARAM_INT, .unit = "samples",                        \
                .description = "timed samples", .min = 1, .max = 1000, .def = (def_)               \
        }
#define P_WARMUP                                                                                   \
        {                                                                                          \
                .name = "warmup", .type = PARAM_INT, .unit = "samples",                            \
                .description = "untimed runs before the samples", .min = 0, .max = 100, .def = 3   \
        }
#define P_ACCESS                                                                                   \
        {.name = "access",                                                                         \
         .type = PARAM_ENUM,                                                                       \
         .description = "order in which pages are touched",                                        \
         .def_str = "sequential",                                                                  \
         .values = access_values},                                                                 \
            {.name = "stride",                                                                     \
             .type = PARAM_SIZE,                                                                   \
             .unit = "bytes",                                                                      \
             .description = "distance between consecutive pages touched when access=strided",      \
             .min = 4 * KiB,                                                                       \
             .max = 1 * GiB,                                                                       \
             .def = 64 * KiB},                                                                     \
        {                                                                                          \
                .name = "seed", .type = PARAM_INT,                                                 \
                .description = "seed of the data pattern and of access=random's page order",       \
                .min = 0, .max = INT32_MAX, .def = 1                                               \
        }
#define P_SEED                                                                                     \
        {                                                                                          \
                .name = "seed", .type = PARAM_INT, .description = "seed of the data pattern",      \
                .min = 0, .max = INT32_MAX, .def = 1                                               \
        }
#define P_HOST_MEMORY                                                                              \
        {                                                                                          \
                .name = "host_memory", .type = PARAM_ENUM,                                         \
                .description = "host buffer: pinned (cudaMallocHost) or pageable (malloc)",        \
                .def_str = "pinned", .values = host_memory_values                                  \
        }
/* Issue 17: one untimed pass after the timed samples with CUPTI's Unified Memory counters on. */
#define P_EXPLAIN                                                                                  \
        {                                                                                          \
                .name = "explain", .type = PARAM_BOOL,                                             \
                .description = "after the timed samples, one untimed pass with CUPTI's Unified "   \
                               "Memory counters on (bytes migrated, page faults, thrashing)",      \
                .def = 0                                                                           \
        }
#define P_KERNEL                                                                                   \
        {                                                                                          \
                .name = "kernel", .type = PARAM_ENUM,                                              \
                .description = "GPU kernel shape: grid_stride (every thread strides over the "     \
                               "buffer) or warp_per_chunk (one warp walks each 64 KiB in order)",  \
                .def_str = "grid_stride", .values = kernel_values                                  \
        }
/* Test-only fault injection, honoured by fake devices and refused for real ones. */
#define P_FAKE                                                                                     \
        {.name = "fake_delay_ms",                                                                  \
         .type = PARAM_INT,                                                                        \
         .unit = "ms",                                                                             \
         .description = "fake devices: sleep this long before answering",                          \
         .min = 0,                                                                                 \
         .max = 3600000,                                                                           \
         .def = 0,                                                                                 \
         .fake_only = true},                                                                       \
            {.name = "fake_hang",                                                                  \
             .type = PARAM_BOOL,                                                                   \
             .description = "fake devices: never answer (tests timeouts)",                         \
             .def = 0,                                                                             \
             .fake_only = true},                                                                   \
            {.name = "fake_crash",                                                                 \
             .type = PARAM_BOOL,                                                                   \
             .description = "fake devices: the worker exits abnormally (tests supervision)",       \
             .def = 0,                                                                             \
             .fake_only = true},                                                                   \
        {                                                                                          \
                .name = "fake_bandwidth_pct", .type = PARAM_INT, .unit = "percent",                \
                .description = "fake devices: scale the modelled bandwidth", .min = 1,             \
                .max = 1000, .def = 100, .fake_only = true                                         \
        }

static const struct param_def copy_params[] = {
    P_SIZE(64 * MiB),
    P_ITER(20),
    P_WARMUP,
    {.name = "direction",
     .type = PARAM_ENUM,
     .description = "h2d, d2h, or bidir (both at once on two streams)",
     .def_str = "h2d",
     .values = direction_values},
    P_HOST_MEMORY,
    P_SEED,
    P_FAKE,
};

static const struct param_def copy_overlap_params[] = {
    P_SIZE(64 * MiB),
    P_ITER(20),
    P_WARMUP,
    {.name = "chunk",
     .type = PARAM_SIZE,
     .unit = "bytes",
     .description = "bytes per chunk copied and processed (at most size); 0, the default: a "
                    "sixteenth of size, at least 4 MiB (on an H200, 4 MiB chunks of 1 GiB cost "
                    "about 10% against one copy, a sixteenth about 2%)",
     .min = 0,
     .max = 0,
     .def = 0},
    {.name = "streams",
     .type = PARAM_INT,
     .unit = "streams",
     .description = "streams: the first carries every copy in order, the others run the "
                    "chunks' kernels (1: all on one stream, no overlap)",
     .min = 1,
     .max = 8,
     .def = 4},
    P_HOST_MEMORY,
    P_SEED,
    P_FAKE,
};

static const struct param_def kernel_params[] = {
    P_SIZE(64 * MiB), P_ITER(20), P_WARMUP, P_ACCESS, P_FAKE,
};

/* "only": one measurement of a benchmark that takes several, for a suite that quotes one (the
 * health check's warm time goal): the others are neither run nor reported. */
#define P_ONLY(values_)                                                                            \
        {                                                                                          \
                .name = "only", .type = PARAM_ENUM,                                                \
                .description = "take only this measurement (all: every one)", .def_str = "all",    \
                .values = (values_)                                                                \
        }
static const char *const prefetch_only_values[] = {"all", MEAS_PREFETCH_KERNEL, MEAS_PREFETCH,
                                                   MEAS_PREFETCH_TO_HOST, NULL};
static const char *const latency_only_values[] = {"all",
                                                  MEAS_PINNED_H2D,
                                                  MEAS_PINNED_D2H,
                                                  MEAS_PAGEABLE_H2D,
                                                  MEAS_PAGEABLE_D2H,
                                                  MEAS_FAULT_SINGLE,
                                                  MEAS_FAULT_BULK,
                                                  MEAS_RESIDENT,
                                                  NULL};

static const struct param_def managed_params[] = {
    P_SIZE(64 * MiB), P_ITER(20), P_WARMUP, P_ACCESS, P_EXPLAIN, P_ONLY(prefetch_only_values),
    P_FAKE,
};

static const struct param_def managed_on_demand_params[] = {
    P_SIZE(64 * MiB), P_ITER(20), P_WARMUP, P_ACCESS, P_KERNEL, P_EXPLAIN, P_FAKE,
};

static const struct param_def managed_advise_params[] = {
    P_SIZE(64 * MiB),
    P_ITER(20),
    P_WARMUP,
    P_ACCESS,
    {.name = "advice",
     .type = PARAM_ENUM,
     .description = "cudaMemAdvise applied before the kernel",
     .def_str = "read_mostly",
     .values = advice_values},
    P_KERNEL,
    P_EXPLAIN,
    P_FAKE,
};

static const struct param_def latency_params[] = {
    {.name = "size",
     .type = PARAM_SIZE,
     .unit = "bytes",
     .description = "bytes per small copy",
     .min = 1,
     .max = 1 * MiB,
     .def = 4},
    P_ITER(20),
    P_WARMUP,
    {.name = "repeats",
     .type = PARAM_INT,
     .unit = "copies",
     .description = "round trips averaged into one sample",
     .min = 1,
     .max = 10000,
     .def = 100},
    {.name = "pages",
     .type = PARAM_INT,
     .unit = "pages",
     .description = "managed pages faulted per sample (2 MiB apart)",
     .min = 1,
     .max = 1024,
     .def = 64},
    P_SEED,
    P_ONLY(latency_only_values),
    P_FAKE,
};

static const struct param_def um_vs_explicit_params[] = {
    P_SIZE(1 * GiB), P_ITER(5), P_WARMUP, P_SEED, P_EXPLAIN, P_FAKE,
};

static const struct param_def sweep_params[] = {
    {.name = "modes",
     .type = PARAM_ENUM_LIST,
     .description = "modes to chart",
     .def_str = "pinned_h2d,pinned_d2h,pageable_h2d,managed_prefetch",
     .values = sweep_mode_values},
    {.name = "max_size",
     .type = PARAM_SIZE,
     .unit = "bytes",
     .description = "largest size when sizes is not given (doubling from 4 KiB)",
     .min = 4 * KiB,
     .max = 0,
     .def = 256 * MiB},
    {.name = "sizes",
     .type = PARAM_SIZE_LIST,
     .unit = "bytes",
     .description = "sizes to measure; default 4 KiB doubling up to max_size",
     .min = 4 * KiB,
     .max = 0},
    P_ITER(5),
    P_WARMUP,
    P_SEED,
    P_FAKE,
};

/* pipeline (issue 21): the ways a training step can bring its batch to the GPU. */
static const char *const pipe_strategy_values[] = {MEAS_PIPE_SERIAL,
                                                   MEAS_PIPE_OVERLAPPED,
                                                   MEAS_PIPE_PAGEABLE,
                                                   MEAS_PIPE_ON_DEMAND,
                                                   MEAS_PIPE_PREFETCH,
                                                   MEAS_PIPE_PREFETCH_CHUNKED,
                                                   MEAS_PIPE_ZERO_COPY,
                                                   MEAS_PIPE_GATHER,
                                                   MEAS_PIPE_PREFETCH_BATCH,
                                                   MEAS_PIPE_DISCARD_PREFETCH,
                                                   NULL};
static const char *const layout_values[] = {"spread", "clustered", NULL};
/* issue 60: who makes each step's batch, and how a chunked strategy issues its chunks */
static const char *const pipe_batch_values[] = {PIPE_BATCH_PREPARED, PIPE_BATCH_WRITTEN, NULL};
static const char *const chunk_issue_values[] = {PIPE_ISSUE_AUTO, PIPE_ISSUE_COPY_STREAM,
                                                 PIPE_ISSUE_ROUND_ROBIN, NULL};

#define P_PIPE_COMMON                                                                              \
        {.name = "steps",                                                                          \
         .type = PARAM_INT,                                                                        \
         .unit = "steps",                                                                          \
         .description = "training steps per sample (the first is reported apart)",                 \
         .min = 1,                                                                                 \
         .max = 100,                                                                               \
         .def = 3},                                                                                \
            {.name = "chunks",                                                                     \
             .type = PARAM_INT,                                                                    \
             .unit = "chunks",                                                                     \
             .description = "pieces a chunked strategy splits the batch into (whole 4 KiB pages)", \
             .min = 1,                                                                             \
             .max = 1024,                                                                          \
             .def = 64},                                                                           \
            {.name = "streams",                                                                    \
             .type = PARAM_INT,                                                                    \
             .unit = "streams",                                                                    \
             .description = "streams of a chunked strategy: one for the copies, the rest run the " \
                            "kernels (1: everything on one stream, no overlap)",                   \
             .min = 1,                                                                             \
             .max = 8,                                                                             \
             .def = 3},                                                                            \
            {.name = "chunk_issue",                                                                \
             .type = PARAM_ENUM,                                                                   \
             .description = "how a chunked strategy issues its chunks: copy_stream (every copy "   \
                            "or prefetch on one stream, the kernels on the others after "          \
                            "events), round_robin (chunk k's copy or prefetch and its kernel on "  \
                            "stream k % streams), or auto: pinned copies copy_stream, managed "    \
                            "prefetches round_robin, each the faster on an H100 (issue 60)",       \
             .def_str = PIPE_ISSUE_AUTO,                                                           \
             .values = chunk_issue_values},                                                        \
            {.name = "batch",                                                                      \
             .type = PARAM_ENUM,                                                                   \
             .description = "prepared: the batch is in host memory before each step (untimed); "   \
                            "host_written: the host's CPU copies each batch into the strategy's "  \
                            "own memory (pinned, pageable or managed), double-buffered, the "      \
                            "write timed in the step",                                             \
             .def_str = PIPE_BATCH_PREPARED,                                                       \
             .values = pipe_batch_values},                                                         \
            {.name = "writers",                                                                    \
             .type = PARAM_INT,                                                                    \
             .unit = "threads",                                                                    \
             .description = "CPU threads of the host's write (batch host_written)",                \
             .min = 1,                                                                             \
             .max = 64,                                                                            \
             .def = 1},                                                                            \
            {.name = "strategies",                                                                 \
             .type = PARAM_ENUM_LIST,                                                              \
             .description = "strategies to run, all on the same data",                             \
             .def_str = MEAS_PIPE_SERIAL                                                           \
             "," MEAS_PIPE_OVERLAPPED "," MEAS_PIPE_PAGEABLE "," MEAS_PIPE_ON_DEMAND               \
             "," MEAS_PIPE_PREFETCH "," MEAS_PIPE_PREFETCH_CHUNKED "," MEAS_PIPE_ZERO_COPY         \
             "," MEAS_PIPE_GATHER "," MEAS_PIPE_PREFETCH_BATCH "," MEAS_PIPE_DISCARD_PREFETCH,     \
             .values = pipe_strategy_values},                                                      \
        {                                                                                          \
                .name = "layout", .type = PARAM_ENUM,                                              \
                .description = "where the touched pages lie: spread (every k-th page, k the "      \
                               "batch's pages over the touched ones, rounded down) or clustered "  \
                               "at the start of the batch",                                        \
                .def_str = "spread", .values = layout_values                                       \
        }

static const struct param_def pipeline_params[] = {
    P_SIZE(1 * GiB),
    P_ITER(5),
    P_WARMUP,
    {.name = "intensity",
     .type = PARAM_INT,
     .unit = "FMAs per 4-byte element",
     .description = "the kernel's work per float of the batch, or \"balanced\": as long as the "
                    "copy (umd times the copy first and picks it)",
     .min = 1,
     .max = 1 << 20,
     .def_str = PIPE_BALANCED,
     .int_word = PIPE_BALANCED},
    {.name = "weights",
     .type = PARAM_SIZE,
     .unit = "bytes",
     .description = "resident parameters every step reads again (0: none)",
     .min = 0,
     .max = 0,
     .def = 0},
    {.name = "writeback",
     .type = PARAM_SIZE,
     .unit = "bytes",
     .description = "bytes of the batch copied back to the host each step (at most size)",
     .min = 0,
     .max = 0,
     .def = 0},
    {.name = "touched",
     .type = PARAM_SIZE,
     .unit = "bytes",
     .description = "bytes of the batch the kernel reads, whole 4 KiB pages (0: all of it)",
     .min = 0,
     .max = 0,
     .def = 0},
    P_PIPE_COMMON,
    P_SEED,
    P_FAKE,
};

static const struct param_def pipeline_sweep_params[] = {
    P_SIZE(1 * GiB),
    P_ITER(5),
    P_WARMUP,
    {.name = "min_intensity",
     .type = PARAM_INT,
     .unit = "FMAs per 4-byte element",
     .description = "the lightest kernel of the sweep (memory-bound); each point is 4x the "
                    "last",
     .min = 1,
     .max = 1 << 16,
     .def = 2},
    {.name = "max_factor",
     .type = PARAM_INT,
     .unit = "x balanced",
     .description = "the heaviest kernel of the sweep, as a multiple of the balanced intensity",
     .min = 1,
     .max = 64,
     .def = 4},
    {.name = "min_touched",
     .type = PARAM_SIZE,
     .unit = "bytes",
     .description = "the sparsest step of the touched sweep; each point is 4x the last, up to "
                    "size",
     .min = 4 * KiB,
     .max = 0,
     .def = 1 * MiB},
    {.name = "touched_intensity",
     .type = PARAM_INT,
     .unit = "FMAs per 4-byte element",
     .description = "the kernel of the touched sweep",
     .min = 1,
     .max = 1 << 20,
     .def = 16},
    P_PIPE_COMMON,
    P_SEED,
    P_FAKE,
};

static const char *const peer_method_values[] = {"ce", "sm", NULL};
static const char *const peer_direction_values[] = {"uni", "bidir", NULL};
static const char *const host_all_direction_values[] = {"h2d", "d2h", NULL};

static const struct param_def d2d_params[] = {
    P_SIZE(256 * MiB), P_ITER(20), P_WARMUP, P_SEED, P_FAKE,
};

#define P_PEER_METHODS                                                                             \
        {                                                                                          \
                .name = "methods", .type = PARAM_ENUM_LIST,                                        \
                .description = "ce: copy engine (cudaMemcpyPeerAsync); sm: a kernel on the "       \
                               "source GPU writing peer memory",                                   \
                .def_str = "ce,sm", .values = peer_method_values                                   \
        }
#define P_PEER_DIRECTIONS                                                                          \
        {                                                                                          \
                .name = "directions", .type = PARAM_ENUM_LIST,                                     \
                .description = "uni: one pair direction at a time; bidir: both at once",           \
                .def_str = "uni,bidir", .values = peer_direction_values                            \
        }

static const struct param_def peer_params[] = {
    P_SIZE(256 * MiB), P_ITER(20), P_WARMUP, P_PEER_METHODS, P_PEER_DIRECTIONS, P_SEED, P_FAKE,
};

static const struct param_def managed_peer_params[] = {
    P_SIZE(256 * MiB), P_ITER(10), P_WARMUP, P_SEED, P_FAKE,
};

static const struct param_def host_all_params[] = {
    P_SIZE(256 * MiB),
    P_ITER(20),
    P_WARMUP,
    {.name = "direction",
     .type = PARAM_ENUM,
     .description = "h2d or d2h, from pinned host memory on each GPU's NUMA node",
     .def_str = "h2d",
     .values = host_all_direction_values},
    P_SEED,
    P_FAKE,
};

static const struct param_def topology_params[] = {
    P_SIZE(256 * MiB), P_ITER(10), P_WARMUP, P_PEER_METHODS, P_SEED, P_FAKE,
};

static const char *const health_tier_values[] = {HEALTH_TIER_QUICK, HEALTH_TIER_EXTENDED, NULL};

static const struct param_def health_params[] = {
    P_SIZE(64 * MiB),
    P_ITER(10),
    P_WARMUP,
    /* Its own size: the copy must be larger than the GPU's L2 cache to measure device memory,
     * and at HBM rates 256 MiB costs a few milliseconds where the host copies cost 0.2 s. */
    {.name = "d2d_size",
     .type = PARAM_SIZE,
     .unit = "bytes",
     .description = "bytes of the device-to-device copy (device memory bandwidth)",
     .min = 4 * KiB,
     .max = 0,
     .def = 256 * MiB},
    {.name = "tier",
     .type = PARAM_ENUM,
     .description = "quick (the canonical check, about 0.3 s a GPU) or extended (adds a short "
                    "sweep of each path, bidirectional and pageable copies both ways, latency, "
                    "managed memory, device memory and the GPU pairs at full_size, inside "
                    "budget_ms)",
     .def_str = "quick",
     .values = health_tier_values},
    {.name = "budget_ms",
     .type = PARAM_INT,
     .unit = "ms",
     .description = "extended: this part's time budget; what does not fit is skipped and said "
                    "(0: no budget)",
     .min = 0,
     .max = 3600000,
     .def = 0},
    {.name = "pairs_budget_ms",
     .type = PARAM_INT,
     .unit = "ms",
     .description = "extended: the GPU pairs' part's time budget (the node worker's; 0: no "
                    "budget)",
     .min = 0,
     .max = 3600000,
     .def = 0},
    {.name = "full_size",
     .type = PARAM_SIZE,
     .unit = "bytes",
     .description = "extended: the size of the device-memory copy and of each GPU pair's copy",
     .min = 4 * KiB,
     .max = 0,
     .def = 1 * GiB},
    P_SEED,
    P_FAKE,
};

/* train_step and embedding_gather (issue 60): a GEMM training step with each tensor class
 * placed, and embedding rows gathered from a table in host memory. */
static const char *const train_shape_values[] = {TRAIN_SHAPE_MLP, TRAIN_SHAPE_TRANSFORMER, NULL};
static const char *const train_class_values[] = {TRAIN_CLASS_BATCH,
                                                 TRAIN_CLASS_WEIGHTS,
                                                 TRAIN_CLASS_ACTIVATIONS,
                                                 TRAIN_CLASS_GRADIENTS,
                                                 TRAIN_CLASS_OPTIMIZER,
                                                 TRAIN_CLASS_ALL,
                                                 NULL};
static const char *const train_placement_values[] = {
    MEAS_TRAIN_MANAGED_RESIDENT, MEAS_TRAIN_MANAGED_HOST, MEAS_TRAIN_HOST_MAPPED, NULL};
static const char *const emb_strategy_values[] = {
    MEAS_EMB_DEVICE,    MEAS_EMB_MANAGED_UVM,     MEAS_EMB_ON_DEMAND,  MEAS_EMB_HOST_MAPPED,
    MEAS_EMB_HBM_CACHE, MEAS_EMB_EXPLICIT_GATHER, MEAS_EMB_WHOLE_COPY, NULL};

static const struct param_def train_step_params[] = {
    {.name = "shape",
     .type = PARAM_ENUM,
     .description = "mlp: layers of hidden x hidden GEMMs; transformer_block: each layer the "
                    "four GEMMs of a block (QKV, output projection, FFN up to 4x hidden and "
                    "down), no attention-score GEMMs",
     .def_str = TRAIN_SHAPE_MLP,
     .values = train_shape_values},
    {.name = "batch",
     .type = PARAM_INT,
     .unit = "rows",
     .description = "rows of the batch (tokens for transformer_block)",
     .min = 16,
     .max = 65536,
     .def = 2048},
    {.name = "hidden",
     .type = PARAM_INT,
     .unit = "floats",
     .description = "the hidden width",
     .min = 64,
     .max = 16384,
     .def = 2048},
    {.name = "layers",
     .type = PARAM_INT,
     .description = "layers (or blocks)",
     .min = 1,
     .max = 32,
     .def = 4},
    {.name = "steps",
     .type = PARAM_INT,
     .unit = "steps",
     .description = "training steps per sample, from a fresh placement (the first is reported "
                    "apart from the steady ones)",
     .min = 2,
     .max = 50,
     .def = 5},
    {.name = "classes",
     .type = PARAM_ENUM_LIST,
     .description = "the rows of the placement matrix: each tensor class placed alone, and all "
                    "of them at once",
     .def_str =
         TRAIN_CLASS_BATCH "," TRAIN_CLASS_WEIGHTS "," TRAIN_CLASS_ACTIVATIONS
                           "," TRAIN_CLASS_GRADIENTS "," TRAIN_CLASS_OPTIMIZER "," TRAIN_CLASS_ALL,
     .values = train_class_values},
    {.name = "placements",
     .type = PARAM_ENUM_LIST,
     .description = "the columns: managed and prefetched to the GPU, managed and first on the "
                    "host, or host-mapped pinned; every row is compared with all in device "
                    "memory",
     .def_str = MEAS_TRAIN_MANAGED_RESIDENT "," MEAS_TRAIN_MANAGED_HOST "," MEAS_TRAIN_HOST_MAPPED,
     .values = train_placement_values},
    P_ITER(3),
    {.name = "warmup",
     .type = PARAM_INT,
     .unit = "samples",
     .description = "untimed samples before the timed ones (each a fresh placement too)",
     .min = 0,
     .max = 10,
     .def = 1},
    P_SEED,
    P_FAKE,
};

static const struct param_def embedding_gather_params[] = {
    {.name = "size",
     .type = PARAM_SIZE,
     .unit = "bytes",
     .description = "bytes of the embedding table in host memory",
     .min = 64 * KiB,
     .max = 0,
     .def = 1 * GiB},
    {.name = "row_bytes",
     .type = PARAM_INT,
     .unit = "bytes",
     .description = "bytes of one row, a multiple of 16 (128: 32 floats)",
     .min = 16,
     .max = 65536,
     .def = 128},
    {.name = "lookups",
     .type = PARAM_INT,
     .unit = "rows",
     .description = "rows gathered a step",
     .min = 1,
     .max = 1 << 22,
     .def = 65536},
    {.name = "zipf_x100",
     .type = PARAM_INT,
     .description = "the rows' Zipf exponent in hundredths (0: uniform, 105: 1.05), indices "
                    "drawn on the host from seed",
     .min = 0,
     .max = 300,
     .def = 0},
    {.name = "cache_load_factor",
     .type = PARAM_INT,
     .unit = "percent",
     .description = "hbm_cache: rows of the table the HBM cache holds (FBGEMM's default 20)",
     .min = 1,
     .max = 100,
     .def = 20},
    {.name = "strategies",
     .type = PARAM_ENUM_LIST,
     .description = "strategies to run, all on the same indices (device is the reference)",
     .def_str = MEAS_EMB_DEVICE "," MEAS_EMB_MANAGED_UVM "," MEAS_EMB_ON_DEMAND
                                "," MEAS_EMB_HOST_MAPPED "," MEAS_EMB_HBM_CACHE
                                "," MEAS_EMB_EXPLICIT_GATHER "," MEAS_EMB_WHOLE_COPY,
     .values = emb_strategy_values},
    P_ITER(10),
    P_WARMUP,
    P_SEED,
    P_FAKE,
};

/* Each benchmark's measurement names (catalog.h's MEAS_*): what its result may contain. */
static const char *const copy_meas[] = {MEAS_H2D, MEAS_D2H, MEAS_BIDIR, NULL};
static const char *const copy_overlap_meas[] = {MEAS_OVERLAPPED, MEAS_SERIAL, MEAS_COPY_ALONE,
                                                MEAS_KERNEL_ALONE, NULL};
static const char *const pipeline_meas[] = {
    MEAS_PIPE_SERIAL,           MEAS_PIPE_OVERLAPPED, MEAS_PIPE_PAGEABLE,
    MEAS_PIPE_ON_DEMAND,        MEAS_PIPE_PREFETCH,   MEAS_PIPE_PREFETCH_CHUNKED,
    MEAS_PIPE_ZERO_COPY,        MEAS_PIPE_GATHER,     MEAS_PIPE_PREFETCH_BATCH,
    MEAS_PIPE_DISCARD_PREFETCH, MEAS_HOST_WRITE,      MEAS_COPY_ALONE,
    MEAS_KERNEL_ALONE,          MEAS_PREFETCH_ALONE,  NULL};
static const char *const zero_copy_meas[] = {MEAS_READ, MEAS_READ_WRITE, NULL};
static const char *const on_demand_meas[] = {MEAS_GPU_ON_DEMAND, MEAS_CPU_ON_DEMAND, NULL};
static const char *const prefetch_meas[] = {MEAS_PREFETCH_KERNEL, MEAS_PREFETCH,
                                            MEAS_PREFETCH_TO_HOST, NULL};
static const char *const advise_meas[] = {MEAS_READ, MEAS_WRITE, NULL};
static const char *const system_memory_meas[] = {MEAS_READ_WRITE, NULL};
static const char *const latency_meas[] = {
    MEAS_PINNED_H2D,   MEAS_PINNED_D2H, MEAS_PAGEABLE_H2D, MEAS_PAGEABLE_D2H,
    MEAS_FAULT_SINGLE, MEAS_FAULT_BULK, MEAS_RESIDENT,     NULL};
static const char *const um_vs_explicit_meas[] = {MEAS_UM_PINNED_COPY_KERNEL,
                                                  MEAS_UM_OVERLAPPED_COPY_KERNEL,
                                                  MEAS_UM_PAGEABLE_COPY_KERNEL,
                                                  MEAS_UM_ZERO_COPY_KERNEL,
                                                  MEAS_UM_ON_DEMAND,
                                                  MEAS_UM_PREFETCH,
                                                  MEAS_UM_READ_MOSTLY,
                                                  MEAS_UM_PREFERRED_HOST,
                                                  MEAS_UM_PREFERRED_DEVICE,
                                                  MEAS_UM_ACCESSED_BY,
                                                  MEAS_UM_PINNED_COPY_D2H,
                                                  MEAS_UM_PAGEABLE_COPY_D2H,
                                                  MEAS_UM_PREFETCH_TO_HOST,
                                                  MEAS_UM_CPU_ON_DEMAND,
                                                  NULL};
/* health: on a GPU's worker the copies and device memory (d2d); on the node worker the GPU
 * pairs (ce_uni) */
static const char *const health_meas[] = {
    MEAS_PINNED_H2D, MEAS_PINNED_D2H, MEAS_PAGEABLE_H2D, MEAS_MANAGED_PREFETCH,
    MEAS_LATENCY_PINNED_H2D, MEAS_D2D, MEAS_CE_UNI,
    /* the extended tier's */
    MEAS_BIDIR, MEAS_PAGEABLE_D2H, MEAS_MANAGED_ON_DEMAND, MEAS_LATENCY_PINNED_D2H,
    MEAS_LATENCY_PAGEABLE_H2D, MEAS_LATENCY_PAGEABLE_D2H, MEAS_LATENCY_FAULT, MEAS_D2D_FULL,
    MEAS_KNEE_PINNED_H2D, MEAS_KNEE_PINNED_D2H, MEAS_KNEE_D2D, NULL};
static const char *const d2d_meas[] = {MEAS_COPY_ENGINE, MEAS_SM_COPY, NULL};
static const char *const peer_meas[] = {MEAS_CE_UNI, MEAS_CE_BIDIR, MEAS_SM_UNI, MEAS_SM_BIDIR,
                                        NULL};
static const char *const managed_peer_meas[] = {MEAS_ON_DEMAND, MEAS_PREFETCH, MEAS_PEER_COPY,
                                                NULL};
static const char *const host_all_meas[] = {MEAS_ALONE, MEAS_ALL, NULL};
static const char *const topology_meas[] = {MEAS_D2D,    MEAS_CE_UNI,   MEAS_CE_BIDIR,
                                            MEAS_SM_UNI, MEAS_SM_BIDIR, NULL};
static const char *const train_step_meas[] = {MEAS_TRAIN_DEVICE, MEAS_TRAIN_MANAGED_RESIDENT,
                                              MEAS_TRAIN_MANAGED_HOST, MEAS_TRAIN_HOST_MAPPED,
                                              NULL};
#define embedding_gather_meas (emb_strategy_values)

#define BENCH(name_, kind_, desc_, params_, meas_)                                                 \
        {                                                                                          \
                .name = name_, .kind = kind_, .description = desc_, .params = params_,             \
                .n_params = ELEMENTSOF(params_), .measurements = meas_                             \
        }
#define BENCH_MULTI(name_, kind_, desc_, params_, meas_)                                           \
        {                                                                                          \
                .name = name_, .kind = kind_, .description = desc_, .params = params_,             \
                .n_params = ELEMENTSOF(params_), .multi_gpu = true, .measurements = meas_          \
        }

static const struct bench_def catalog[] = {
    BENCH("copy", "benchmark",
          "cudaMemcpyAsync host to device, device to host or both at once, pinned or pageable",
          copy_params, copy_meas),
    BENCH("copy_overlap", "benchmark",
          "chunked copies overlapped with a kernel on several streams, against copy-then-kernel",
          copy_overlap_params, copy_overlap_meas),
    BENCH("zero_copy", "benchmark", "a kernel reading and writing mapped pinned host memory",
          kernel_params, zero_copy_meas),
    BENCH("managed_on_demand", "benchmark",
          "CPU-initialised managed memory faulted in by a GPU kernel, and GPU-resident pages "
          "touched by the CPU",
          managed_on_demand_params, on_demand_meas),
    BENCH("managed_prefetch", "benchmark",
          "cudaMemPrefetchAsync to the GPU then a kernel, prefetch alone, and prefetch back",
          managed_params, prefetch_meas),
    BENCH("managed_advise", "benchmark",
          "cudaMemAdvise (read_mostly, preferred location, accessed_by), then kernels that "
          "read and write",
          managed_advise_params, advise_meas),
    BENCH("system_memory", "benchmark",
          "a kernel on plain malloc memory (needs pageableMemoryAccess)", kernel_params,
          system_memory_meas),
    BENCH("latency", "benchmark",
          "small-copy round-trip latency (pinned, pageable) and the cost of a managed page "
          "fault",
          latency_params, latency_meas),
    BENCH("um_vs_explicit", "suite",
          "the same bytes moved to the GPU and processed once by every mode, ranked against "
          "pinned copy + kernel",
          um_vs_explicit_params, um_vs_explicit_meas),
    BENCH("sweep", "suite", "chosen modes over doubling sizes: bandwidth curves", sweep_params,
          sweep_mode_values),
    BENCH("health", "suite",
          "per-GPU verdict, quick or extended (tier): copy bandwidth, prefetch, latency, device "
          "memory (d2d) and "
          "PCIe link against limits, the GPU model's figures and this GPU's history",
          health_params, health_meas),
    BENCH("d2d", "benchmark",
          "device-to-device copies within one GPU (copy engine and a copy kernel), read+write "
          "bytes: the memory ceiling",
          d2d_params, d2d_meas),
    BENCH("pipeline", "benchmark",
          "a training step: bring a batch to the GPU and run a kernel of chosen intensity on it, "
          "by every strategy, against the limit (the longer of copy alone and kernel alone)",
          pipeline_params, pipeline_meas),
    BENCH("pipeline_sweep", "suite",
          "pipeline across kernel intensities and touched fractions: each strategy's curve, the "
          "intensity where it comes within 10% of the limit, and where managed memory wins",
          pipeline_sweep_params, pipeline_meas),
    BENCH("train_step", "benchmark",
          "a GEMM training step (cuBLAS forward and backward, an Adam update) with each tensor "
          "class in device, managed or host-mapped memory: the placement matrix against all "
          "in device memory, first step and steady state",
          train_step_params, train_step_meas),
    BENCH("embedding_gather", "benchmark",
          "embedding rows gathered from a table in host memory by every strategy (HBM, "
          "FBGEMM's managed mode, on demand, host-mapped, an HBM row cache, a CPU gather, the "
          "whole table copied): rows/s and each against HBM, beside TorchRec's planner constants",
          embedding_gather_params, embedding_gather_meas),
    BENCH_MULTI("peer", "benchmark",
                "copies between every ordered pair of GPUs, copy engine and SM, one direction "
                "and both, with the link type between each pair (needs two GPUs)",
                peer_params, peer_meas),
    BENCH_MULTI("managed_peer", "benchmark",
                "managed memory first touched on one GPU then read by another, on demand and "
                "with prefetch, against a peer copy of the same bytes (needs two GPUs)",
                managed_peer_params, managed_peer_meas),
    BENCH_MULTI("host_all", "benchmark",
                "every GPU copying to or from the host at once, against the sum of each GPU "
                "alone (needs two GPUs)",
                host_all_params, host_all_meas),
    BENCH_MULTI("topology", "suite",
                "the node's matrices (source x destination GB/s) as nvbandwidth prints them, and "
                "the slowest pair against its link's expected rate (needs two GPUs)",
                topology_params, topology_meas),
};

const struct bench_def *catalog_find(const char *name)
{
        if (!name)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(catalog); i++)
                if (strcmp(catalog[i].name, name) == 0)
                        return &catalog[i];
        return NULL;
}

bool catalog_is_suite(const struct bench_def *b)
{
        return b && strcmp(b->kind, "suite") == 0;
}

bool catalog_has_measurement(const struct bench_def *b, const char *name)
{
        size_t len = name ? strcspn(name, "@") : 0;

        for (size_t i = 0; b && name && b->measurements && b->measurements[i]; i++)
                if (strlen(b->measurements[i]) == len &&
                    strncmp(b->measurements[i], name, len) == 0)
                        return true;
        return false;
}

const struct bench_def *catalog_get(size_t i)
{
        return i < ELEMENTSOF(catalog) ? &catalog[i] : NULL;
}

size_t catalog_count(void)
{
        return ELEMENTSOF(catalog);
}

const struct param_def *catalog_param(const struct bench_def *b, const char *name)
{
        for (size_t i = 0; b && name && i < b->n_params; i++)
                if (strcmp(b->params[i].name, name) == 0)
                        return &b->params[i];
        return NULL;
}
