/* PCIe link facts read from sysfs (no CUDA): the current and maximum generation and width of a
 * device's link, found under /sys/bus/pci/devices/<domain:bus:dev.fn>/. Parsers are separate
 * from file reading so unit tests can feed them fixture text. */
#pragma once

#include <jansson.h>
#include <stddef.h>

#define PCIE_SYSFS_DEVICES "/sys/bus/pci/devices"

/* "32.0 GT/s PCIe" (or "8 GT/s") -> 5 (or 3). Returns the generation, or -EINVAL. */
int pcie_parse_speed_gen(const char *s);
/* "16\n" -> 16. Returns the width (1..32), or -EINVAL (also for 0: link down). */
int pcie_parse_width(const char *s);
/* "00000000:1A:00.0", "0000:1a:00.0" or "1a:00.0" -> "0000:1a:00.0" (sysfs spelling).
 * buf at least 13 bytes. 0 or -EINVAL. */
int pcie_normalize_bus_id(const char *bus_id, char *buf, size_t len);

/* {"current_gen","current_width","max_gen","max_width"}, each an integer or null where not
 * readable. devices_dir is PCIE_SYSFS_DEVICES except in tests. NULL only on OOM. */
json_t *pcie_link_json(const char *devices_dir, const char *bus_id);

/* Theoretical one-direction rate of a PCIe link in decimal GB/s after line encoding, or 0 when
 * gen or width is unknown. The one place link rates are computed. */
double pcie_link_gbps(int gen, int width);
