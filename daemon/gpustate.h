/* What the GPU's driver says about a GPU right now, apart from umd's own use of it: compute
 * processes that are not umd's, the compute mode, the PCIe link and its replay counter.
 * Two backends behind one call: NVML (libnvidia-ml.so.1, loaded at run time from the driver,
 * so umd builds and runs where it is absent) for real GPUs, and a JSON file (fake_gpu_state)
 * standing in for NVML on fake devices in tests. Never CUDA: NVML makes no context.
 *
 * Thread-safe; may block for as long as the driver takes (milliseconds; longer on a GPU in
 * trouble), so callers keep it out of the core lock. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct umd_config;

/* "exclusive_process", the longest compute mode, and room for what a fake file says. */
#define GPU_STATE_MODE_MAX 24
/* An NVML failure with its dlerror() or a UUID ("NVML does not know GPU-…: …"). */
#define GPU_STATE_WHY_MAX 160
/* NVLinks a GPU may have (NVML_NVLINK_MAX_LINKS: 18 on Hopper and Blackwell). */
#define GPU_STATE_NVLINKS_MAX 18

/* The NVLink error counters read (nvmlNvLinkErrorCounter_t's CRC_FLIT, REPLAY, RECOVERY). */
enum gpu_nvlink_kind {
        GPU_NVLINK_CRC,
        GPU_NVLINK_REPLAY,
        GPU_NVLINK_RECOVERY,
        _GPU_NVLINK_KIND_MAX,
};

struct gpu_state {
        bool known;          /* false: nothing could be read; why says so */
        int other_processes; /* compute processes not umd's; -1 unknown */
        /* "default", "exclusive_process", "prohibited", "" unknown */
        char compute_mode[GPU_STATE_MODE_MAX];
        int current_gen, current_width, max_gen, max_width; /* -1 unknown */
        long long replay_counter;                           /* -1 unknown */
        int nvlinks_active; /* links NVML says are up; -1 unknown (no NVLink answered) */
        /* Each link's error counters; -1 unknown (a link down, or NVML cannot say). */
        long long nvlink_errors[GPU_STATE_NVLINKS_MAX][_GPU_NVLINK_KIND_MAX];
        char why[GPU_STATE_WHY_MAX]; /* what is unknown, and why */
};

/* Load NVML where there are real devices (a failure is logged once and kept as the reason).
 * Always succeeds: what cannot be known is reported as unknown. */
void gpustate_init(const struct umd_config *cfg);
void gpustate_shutdown(void);
/* "nvml", "fake", or "unavailable". */
const char *gpustate_backend(void);

/* Read the state of one GPU. uuid: the GPU's "GPU-..." uuid; fake_index >= 0 for a fake device
 * (read from the fake_gpu_state file); own_pid: umd's worker on that GPU, node_pid: umd's node
 * worker (benchmarks spanning GPUs), 0 when none. Never
 * fails: *ret is filled with what is known. */
void gpustate_query(const char *uuid, int fake_index, pid_t own_pid, pid_t node_pid,
                    struct gpu_state *ret);

/* The NVIDIA GPUs (PCI vendor 0x10de, display or 3D class) the PCI bus lists, as a new array
 * of bus ids ("0000:5a:00.0"), for the node's inventory (health_links.h): a GPU fallen off the
 * bus often stays listed there while the driver cannot use it. Fake devices: the fake_gpu_state
 * file's "pci_gpus" array. NULL where it cannot be read. */
json_t *gpustate_pci_gpus(void);

/* Other compute processes on a GPU by its worker's look after a part (common/ipc.h's "look"):
 * {"others": N} as it is, {"pids": [...]} less umd's workers own_pid and node_pid (0: none) as
 * gpustate_query counts them. -1 when look is NULL or says nothing that can be counted. */
int gpustate_others_in_look(const json_t *look, pid_t own_pid, pid_t node_pid);

/* Of the compute processes pids[n] NVML lists on a GPU, those that are not umd's worker
 * own_pid (0: none runs). A pid that is not in this pid namespace may be the worker seen from
 * another one: while the worker runs and is not seen by its pid, one such process is taken to
 * be it. (Exposed for tests.) */
int gpustate_count_others(const unsigned *pids, unsigned n, pid_t own_pid);
