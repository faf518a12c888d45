/* Where a GPU sits on the host and where a process runs: the GPU's NUMA node and local CPUs
 * (sysfs, found by PCI bus id), the number of NUMA nodes, and a process's own CPU affinity and
 * memory policy. umd uses it to place each worker beside its GPU; the worker to report where it
 * ran. Nothing here fails a caller: what cannot be read is "unknown" (-1, empty, null). */
#pragma once

#include <jansson.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

#define PLACEMENT_SYSFS_DEVICES "/sys/bus/pci/devices"
#define PLACEMENT_SYSFS_NODES   "/sys/devices/system/node"

/* "0-3,8,10-11" -> set. 0 or -EINVAL (nothing set then). */
int cpulist_parse(const char *s, cpu_set_t *ret);
/* set -> "0-3,8,10-11" in buf ("" for an empty set). buf always terminated; truncated lists
 * end in "...". */
void cpulist_format(const cpu_set_t *set, char *buf, size_t len);

/* The GPU's NUMA node (-1 when the host has none or it cannot be read) and its local CPUs
 * (*ret_has_cpus false when unknown). devices_dir is PLACEMENT_SYSFS_DEVICES except in tests. */
void placement_gpu(const char *devices_dir, const char *pci_bus_id, int *ret_node,
                   cpu_set_t *ret_cpus, bool *ret_has_cpus);
/* NUMA nodes online (1 when the host has no NUMA information). */
int placement_numa_nodes(const char *nodes_dir);

/* This process: {"cpus": "0-15", "memory_policy": "preferred"|"default"|..., "numa_node": N|null}
 * plus the GPU's {"gpu_numa_node", "gpu_local_cpus"} when pci_bus_id is given. NULL on OOM. */
json_t *placement_self_json(const char *pci_bus_id);
