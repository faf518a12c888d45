/* The Xid watch's sources (xid_internal.h): the kernel's messages from /dev/kmsg, from the
 * journal's kernel transport (libsystemd), or from a file or FIFO (tests' fixtures), and NVML's
 * Xid events. Each hands every message to xid_watch_feed; none keeps state of its own beyond
 * its descriptor. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <systemd/sd-id128.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include "devices.h"
#include "log.h"
#include "nvml.h"
#include "util.h"
#include "xid_internal.h"
#include "xid_parse.h"

/* The journal match on this boot: "_BOOT_ID=" and 32 hex digits. */
#define JOURNAL_MATCH_MAX 64

/* A kernel record: /dev/kmsg hands one a read, at most about 8 KiB (PRINTK_MESSAGE_MAX). */
#define XID_RECORD_MAX 8192
/* How often a file source is read again at its end, as tail -f does (ms): the delay a line
 * appended to it may wait. */
#define XID_FILE_POLL_MS 100
/* How long NVML's wait blocks before the stop flag is looked at again (ms). */
#define XID_NVML_WAIT_MS   500
#define XID_SOURCE_WHY_MAX 256
#define XID_KMSG_PATH      "/dev/kmsg"

/* Waits until fd is readable (or timeout_ms passes), or stop_fd says stop: false then. */
static bool wait_readable(int fd, int stop_fd, int timeout_ms)
{
        struct pollfd p[2] = {{.fd = stop_fd, .events = POLLIN}, {.fd = fd, .events = POLLIN}};

        for (;;) {
                int r = poll(p, fd >= 0 ? 2 : 1, timeout_ms);
                if (r < 0 && errno == EINTR)
                        continue;
                return !(r > 0 && (p[0].revents & POLLIN));
        }
}

/* /dev/kmsg from its first record still in the ring (the look back: the ring's size bounds
 * it; the watermark skips what an earlier umd of this boot handled), then as a stream. */
static void run_kmsg(struct xid_watch *w, int fd, int stop_fd)
{
        char rec[XID_RECORD_MAX + 1];

        while (!xid_watch_stopping(w)) {
                ssize_t n = read(fd, rec, XID_RECORD_MAX);
                uint64_t seq, usec;
                const char *msg;

                if (n < 0 && errno == EAGAIN) {
                        if (!wait_readable(fd, stop_fd, -1))
                                break;
                        continue;
                }
                if (n < 0 && (errno == EPIPE || errno == EINTR))
                        continue; /* records overwritten before they were read: go on */
                if (n <= 0) {
                        log_error_errno(n < 0 ? errno : EIO, "reading %s: %m", XID_KMSG_PATH);
                        break;
                }
                rec[n] = '\0';
                if (xid_parse_kmsg(rec, &seq, &usec, &msg) == 0)
                        xid_watch_feed(w, msg, usec ? usec : 1);
        }
}

/* One line of a file source: a /dev/kmsg record ("PRI,SEQ,USEC,FLAGS;MESSAGE") where records
 * is set (kmsg:PATH), with its time, else a line as dmesg or journalctl print it. */
static void feed_line(struct xid_watch *w, const char *line, bool records)
{
        uint64_t seq, usec;
        const char *msg;

        if (records && xid_parse_kmsg(line, &seq, &usec, &msg) == 0)
                xid_watch_feed(w, msg, usec ? usec : 1);
        else
                xid_watch_feed(w, line, 0);
}

/* A file or FIFO as a stream of lines: file:PATH from its end, kmsg:PATH (records as /dev/kmsg
 * gives them) from its start, as the look back reads the kernel's ring. */
static void run_file(struct xid_watch *w, int fd, int stop_fd, bool records)
{
        char buf[XID_RECORD_MAX + 1];
        size_t have = 0;

        while (!xid_watch_stopping(w)) {
                ssize_t n = read(fd, buf + have, XID_RECORD_MAX - have);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        /* at the end (or a FIFO without a writer): look again shortly */
                        if (!wait_readable(-1, stop_fd, XID_FILE_POLL_MS))
                                break;
                        continue;
                }
                have += (size_t)n;
                buf[have] = '\0';
                char *line = buf, *nl;
                while ((nl = strchr(line, '\n'))) {
                        *nl = '\0';
                        feed_line(w, line, records);
                        line = nl + 1;
                }
                have -= (size_t)(line - buf);
                memmove(buf, line, have);
                if (have == XID_RECORD_MAX)
                        have = 0; /* a line longer than any kernel record: dropped */
        }
}

/* The journal's kernel messages of this boot from its start (the look back, skipping what an
 * earlier umd handled), then as they come. */
static int run_journal(struct xid_watch *w, const char *dir, int stop_fd, char *why, size_t whylen)
{
        sd_journal *j = NULL;
        sd_id128_t boot;
        char match[JOURNAL_MATCH_MAX], sboot[SD_ID128_STRING_MAX];
        /* dir: journal:DIR, a directory of journal files (tests); else the system's journal */
        int r = dir ? sd_journal_open_directory(&j, dir, 0)
                    : sd_journal_open(&j, SD_JOURNAL_LOCAL_ONLY | SD_JOURNAL_SYSTEM);

        if (r >= 0 && (r = sd_id128_get_boot(&boot)) >= 0) {
                snprintf(match, sizeof(match), "_BOOT_ID=%s", sd_id128_to_string(boot, sboot));
                r = sd_journal_add_match(j, "_TRANSPORT=kernel", 0);
                if (r >= 0)
                        r = sd_journal_add_match(j, match, 0);
                if (r >= 0)
                        r = sd_journal_seek_head(j);
        }
        if (r < 0) {
                snprintf(why, whylen, "cannot read the journal: %s", strerror(-r));
                sd_journal_close(j);
                return r;
        }
        xid_watch_source_set(w, "journal", NULL);
        while (!xid_watch_stopping(w)) {
                r = sd_journal_next(j);
                if (r == 0) {
                        int fd = sd_journal_get_fd(j);
                        if (!wait_readable(fd, stop_fd, fd < 0 ? XID_FILE_POLL_MS : -1))
                                break;
                        (void)sd_journal_process(j);
                        continue;
                }
                const void *data;
                size_t len;
                uint64_t usec = 0;
                sd_id128_t b;
                if (r < 0 || sd_journal_get_data(j, "MESSAGE", &data, &len) < 0 || len < 8)
                        continue;
                (void)sd_journal_get_monotonic_usec(j, &usec, &b);
                char msg[XID_RECORD_MAX + 1];
                len -= 8; /* "MESSAGE=" */
                len = len < XID_RECORD_MAX ? len : XID_RECORD_MAX;
                memcpy(msg, (const char *)data + 8, len);
                msg[len] = '\0';
                xid_watch_feed(w, msg, usec ? usec : 1);
        }
        sd_journal_close(j);
        return 0;
}

/* Opens the kernel source spec names ("auto" tries /dev/kmsg, then the journal): its fd (-1
 * for the journal or none) and name; why says why none. */
static int open_kernel(const char *spec, const char **ret_name, char *why, size_t whylen)
{
        bool records = strncmp(spec, "kmsg:", 5) == 0;
        if (records || strncmp(spec, "file:", 5) == 0) {
                int fd = open(spec + 5, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
                struct stat st;
                if (fd < 0) {
                        snprintf(why, whylen, "cannot open %s: %s", spec + 5, strerror(errno));
                        return -errno;
                }
                if (!records && fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
                        (void)lseek(fd, 0, SEEK_END);
                *ret_name = records ? "kmsg-file" : "file";
                return fd;
        }
        if (strcmp(spec, "kmsg") == 0 || strcmp(spec, "auto") == 0) {
                int fd = open(XID_KMSG_PATH, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
                if (fd >= 0) {
                        *ret_name = "kmsg";
                        return fd;
                }
                snprintf(why, whylen, "cannot read %s: %s (the unit needs CAP_SYSLOG)",
                         XID_KMSG_PATH, strerror(errno));
                if (strcmp(spec, "kmsg") == 0)
                        return -errno;
        }
        *ret_name = strcmp(spec, "nvml") == 0 ? "nvml" : "journal";
        return -1; /* the journal's own descriptor is sd_journal's */
}

void xid_source_run(struct xid_watch *w, const char *spec, int stop_fd)
{
        char why[XID_SOURCE_WHY_MAX] = "";
        const char *name = "none";

        if (strcmp(spec, "none") == 0) {
                xid_watch_source_set(w, "none", "xid_source=none");
                return;
        }
        struct devices *ds = xid_watch_devices(w);
        if (strcmp(spec, "auto") == 0 && devices_size(ds) > 0 && devices_at(ds, 0)->fake) {
                /* a fake GPU's address may be a real one's: the host's Xids are not its own */
                xid_watch_source_set(w, "none",
                                     "fake devices: the kernel's Xids are not theirs "
                                     "(xid_source=file:PATH feeds them fixtures)");
                return;
        }
        int fd = open_kernel(spec, &name, why, sizeof(why));
        if (fd >= 0) {
                xid_watch_source_set(w, name, NULL);
                if (strcmp(name, "kmsg") == 0)
                        run_kmsg(w, fd, stop_fd);
                else
                        run_file(w, fd, stop_fd, strcmp(name, "kmsg-file") == 0);
                close(fd);
                return;
        }
        if (strcmp(name, "nvml") == 0) {
                xid_watch_source_set(w, "nvml", NULL);
                xid_source_nvml_run(w);
                return;
        }
        if (strcmp(name, "journal") == 0 &&
            run_journal(w, strncmp(spec, "journal:", 8) == 0 ? spec + 8 : NULL, stop_fd, why,
                        sizeof(why)) == 0)
                return;
        xid_watch_source_set(w, "none", why);
}

/* ---- NVML ---- */

void xid_source_nvml_run(struct xid_watch *w)
{
        const struct nvml_api *api;
        const char *why;
        nvml_event_set set = NULL;
        struct devices *ds = xid_watch_devices(w);
        size_t n = devices_size(ds);
        nvml_device *handles = calloc(n + 1, sizeof(*handles));

        if (!handles || nvml_open(&api, &why) < 0 || !api->event_set_create ||
            !api->register_events || !api->event_set_wait || !api->event_set_free ||
            api->event_set_create(&set) != NVML_SUCCESS) {
                log_warning("Xid watch: no NVML events (%s)",
                            !handles ? "out of memory" : "NVML or its event calls unavailable");
                free(handles);
                return;
        }
        for (size_t i = 0; i < n; i++) {
                const struct device *d = devices_at(ds, i);
                nvml_return r = api->by_uuid(d->uuid, &handles[i]);
                if (r == NVML_SUCCESS)
                        r = api->register_events(handles[i], NVML_EVENT_TYPE_XID, set);
                if (r != NVML_SUCCESS) {
                        log_warning("Xid watch: no NVML Xid events for %s: %s", d->uuid,
                                    nvml_strerror(r));
                        handles[i] = NULL;
                }
        }
        while (!xid_watch_stopping(w)) {
                struct nvml_event_data ev = {0};
                nvml_return r = api->event_set_wait(set, &ev, XID_NVML_WAIT_MS);
                if (r == NVML_ERROR_TIMEOUT)
                        continue;
                if (r != NVML_SUCCESS) {
                        log_warning("Xid watch: NVML's event wait failed: %s; NVML events stop",
                                    nvml_strerror(r));
                        break;
                }
                for (size_t i = 0; i < n; i++)
                        if (handles[i] && handles[i] == ev.device)
                                xid_watch_feed_nvml(w,
                                                    json_string_value(json_object_get(
                                                        devices_at(ds, i)->info, "pci_bus_id")),
                                                    (unsigned)ev.event_data);
        }
        api->event_set_free(set);
        free(handles);
}
