/* What a result spanning GPUs means (peer, topology, managed_peer, host_all; kernels/bench.h
 * gives their shape): source x destination matrices of GB/s as nvbandwidth prints them, the rate
 * each pair's link should carry, and one sentence on the slowest pair. Shared by the suite
 * summaries and the health check's pair verdicts, so the two never judge a link differently.
 * Pure functions: no I/O, no locks. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

/* A link's label as topology_link_label writes it ("NVLink x18", "PCIe Gen5 x16", "host"). */
#define TOPOLOGY_LABEL_MAX 32

/* GB/s one direction that the link between two GPUs should carry: NVLink, its link count times
 * the per-link rate of the GPUs' generation (compute capability 6: 20, 7 to 9: 25, 10 and
 * later: 50 GB/s a direction); PCIe (peer to peer, or through the host), the slower of the two
 * GPUs' PCIe links (pcie.h's pcie_link_gbps). 0 when unknown. link: one entry of a result's
 * "links"; devices: its "devices". */
double topology_link_expected_gbps(const json_t *link, const json_t *devices);

/* "NV18", "PCIe", "host" (no peer access: copies go through host memory), or "?". buf >= 16. */
const char *topology_link_label(const json_t *link, char *buf, size_t len);

/* The link entry of the ordered pair, or NULL. */
const json_t *topology_link(const json_t *result, long long src, long long dst);

/* Summaries (new objects, NULL when the result has nothing to summarise):
 *   peer, topology: {"gpus", "matrices": [{"name","title","gbps": [[..]]}], "d2d_gbps",
 *                    "links": [[..]], "expected_gbps": [[..]], "slowest", "conclusion"}
 *   managed_peer:   {"pairs": [{"src","dst","on_demand_gbps","prefetch_gbps","peer_copy_gbps",
 *                    ratios}], "conclusion"}
 *   host_all:       {"alone_gbps": [..], "sum_alone_gbps", "all_gbps", "ratio", "conclusion"} */
json_t *topology_summary(const char *benchmark, const json_t *result);
/* Whether topology_summary summarises benchmark's results at all. */
bool topology_summarises(const char *benchmark);
