/* Kernel lines about a GPU's errors, parsed: the NVIDIA driver's Xid lines in their older
 * ("Ch 0000003b", "(0000:01:00)") and current ("channel 0x0000000a") forms, NVSwitch SXid lines,
 * and "has fallen off the bus" said without an Xid. Pure functions: no I/O, no state, so the
 * fixtures under tests/ pin down every form. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* "0000:3b:00.0": a PCI address as umd compares them (4-digit domain, lowercase, function). */
#define XID_BUS_MAX 16
/* A process name as the driver prints it: the kernel's comm (16) or "<unknown>", with room. */
#define XID_PROCESS_MAX 64
/* The message kept for the API: the driver's words from "NVRM: " on, cut at this length. */
#define XID_TEXT_MAX 384

enum xid_kind {
        XID_KIND_XID,            /* "NVRM: Xid (PCI:...): N, ..." */
        XID_KIND_SXID,           /* "nvidia-nvswitchK: SXid (PCI:...): N, ..." */
        XID_KIND_FALLEN_OFF_BUS, /* "NVRM: GPU ... has fallen off the bus", no Xid: code 79 */
};

struct xid_line {
        enum xid_kind kind;
        unsigned code;                 /* the Xid or SXid; 79 for a fall off the bus */
        char bus[XID_BUS_MAX];         /* normalised (xid_normalise_bus) */
        int pid;                       /* -1 where the line names none (or "<unknown>") */
        char process[XID_PROCESS_MAX]; /* "" where the line names none */
        char text[XID_TEXT_MAX];       /* from "NVRM: " (or the switch's name) on */
};

/* Parses one kernel message (a line of /dev/kmsg after its ';', a journal MESSAGE, or a line of
 * dmesg or journalctl output: the prefix before the driver's words is skipped). Returns 1 and
 * fills *ret for an Xid, SXid or fall off the bus; 0 for any other line (*ret untouched). */
int xid_parse_line(const char *line, struct xid_line *ret);

/* A PCI address in any of the driver's and NVML's spellings ("PCI:0000:3B:00",
 * "00000000:3B:00.0", "0000:3b:00", "3b:00.0") as "0000:3b:00.0" into ret (XID_BUS_MAX).
 * 0, or -EINVAL when s is no PCI address (ret untouched). */
int xid_normalise_bus(const char *s, char ret[XID_BUS_MAX]);

/* A /dev/kmsg record "PRI,SEQ,USEC,FLAGS[,..];MESSAGE": its sequence number, its time (µs since
 * boot) and where its message starts. 0, or -EINVAL for no such record (continuation lines,
 * which start with a space, included). */
int xid_parse_kmsg(const char *rec, uint64_t *ret_seq, uint64_t *ret_usec, const char **ret_msg);

/* Xid 154's "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)": the
 * value it changed to, or -1 for any other text. */
int xid_recovery_action(const char *text);
