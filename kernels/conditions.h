/* The conditions a result was measured in (issue 17), beside what the benchmark itself records:
 * the nvidia_uvm driver's module parameters, whether the system could use HMM, and the GPU's
 * clocks and throttle reasons (NVML, loaded at run time). Anything that cannot be read is null
 * with a reason, never a guess. Plain C: no CUDA, no HTTP. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#define CONDITIONS_UVM_PARAMS "/sys/module/nvidia_uvm/parameters"

/* Every file under dir as {"name": value} (integers as integers, else the trimmed text), or NULL
 * with *ret_why (static) when the directory cannot be read (module not loaded). */
json_t *conditions_uvm_params(const char *dir, const char **ret_why);

/* {"nvidia_uvm": {...} | null, "nvidia_uvm_why"?, "hmm": {"pageableMemoryAccess",
 *  "pageableMemoryAccessUsesHostPageTables", "uvm_disable_hmm" (null when absent),
 *  "could_use_hmm", "why"}} from the uvm parameter directory and the device's --list entry. */
json_t *conditions_host(const char *uvm_dir, const json_t *device);

/* Why HMM can or cannot be used here (issue 60), said plainly: conditions_host's "hmm" from the
 * uvm parameters (NULL: unread), the device's --list entry, /proc/driver/nvidia/version's text
 * (NULL: unread) and the kernel's release (NULL: unknown). Adds kernel_module ("open",
 * "proprietary" or null), kernel_release and cuda_driver_version; why names every blocker. */
#define CONDITIONS_NVIDIA_VERSION "/proc/driver/nvidia/version"
json_t *conditions_hmm(const json_t *uvm, const json_t *device, const char *version_text,
                       const char *release);

/* The GPU with this UUID now, through NVML: {"sm_clock_mhz", "memory_clock_mhz",
 * "graphics_clock_mhz", "max_sm_clock_mhz", "temperature_c", "power_w", "throttle_reasons":
 * [names], "throttle_mask"}; fields NVML does not answer are null. When NVML is absent:
 * {"unavailable": "why"}. Thread-safe; NVML is loaded once. */
json_t *conditions_gpu(const char *uuid);

/* The GPU with this UUID's error state now, through NVML (common/nvml_errors.h's readings), for
 * the canonical health check's result; every reading {"unknown": why} where NVML is absent or
 * does not know the GPU. NULL on allocation failure. Thread-safe; reads only. inforom_kept: the
 * worker's InfoROM reading, read once and kept (nvml_errors_read); may be NULL. */
json_t *conditions_gpu_errors(const char *uuid, json_t **inforom_kept);

/* The look after a part (the protocol's "look", common/ipc.h): every compute process NVML lists
 * on the GPU with this UUID now, this worker's own included, as {"pids": [...]} (with
 * "truncated": true when there were more than CONDITIONS_PIDS_MAX); NULL when NVML cannot say
 * (umd then looks itself). Makes no CUDA context. */
#define CONDITIONS_PIDS_MAX 256
json_t *conditions_processes(const char *uuid);

/* NVML's clocks-event (throttle) reason bits in words, as an array. */
json_t *conditions_throttle_words(unsigned long long mask);

/* Tests: the fake backend's stand-in for a fake GPU's throttle reasons, a key of the result
 * that conditions_stamp moves into gpu_before and gpu_after (and removes). */
#define CONDITIONS_FAKE_THROTTLE "fake_throttle_reasons"

/* Sets result.context.conditions: conditions_host's keys plus "gpu_before" (stolen; taken with
 * conditions_gpu before the run) and "gpu_after" (taken now). Fake devices (fake true) read
 * neither sysfs nor NVML: each says "fake device". Leaves result as it was on out of memory. */
void conditions_stamp(json_t *result, const json_t *device, json_t *gpu_before, bool fake);
/* What to pass as gpu_before: conditions_gpu for a real device, a "fake device" note else. */
json_t *conditions_before(const json_t *device, bool fake);
