/* NVLink between two GPUs as the driver reports it, read through NVML (loaded at run time from
 * the driver; no CUDA here). */
#pragma once

#include <stddef.h>

/* Active NVLink links of the GPU at bus_a whose far end is the GPU at bus_b (PCI bus ids as
 * --list gives them). *ret_other_links: active links of bus_a whose far end NVML names by
 * another PCI id (an NVSwitch, or a peer whose id NVML reports differently from CUDA's, as in
 * some virtual machines); remote (len >= 32) gets the first such far end's id, or "". 0, or
 * -ENOENT with *ret_why (static) when NVML cannot say. */
int nvlink_between(const char *bus_a, const char *bus_b, int *ret_links, int *ret_other_links,
                   char *remote, size_t len, const char **ret_why);
