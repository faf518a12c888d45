/* NVLink between two GPUs as the driver reports it, read through NVML (loaded at run time from
 * the driver; no CUDA here). */
#pragma once

/* Active NVLink links of the GPU at bus_a whose far end is the GPU at bus_b (PCI bus ids as
 * --list gives them). *ret_switch_links: active links of bus_a that end at no GPU of the pair
 * (an NVSwitch). 0, or -ENOENT with *ret_why (static) when NVML cannot say. */
int nvlink_between(const char *bus_a, const char *bus_b, int *ret_links, int *ret_switch_links,
                   const char **ret_why);
