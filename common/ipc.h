/* The umd <-> umd-worker protocol: one socketpair (SOCK_STREAM) per worker, carrying frames of
 * a 4-byte big-endian payload length followed by that many bytes of one JSON object (UTF-8).
 *
 * Every message has "type". The worker speaks first:
 *   worker -> umd  {"type":"hello","protocol":1,"pid":N,"device":{...as in --list...}}
 *   umd -> worker  {"type":"run","job":"<uuid>","benchmark":"copy","params":{...}}
 *                  (the limits come once, on the worker's argv: --max-buffer-bytes and friends)
 *   worker -> umd  {"type":"result","job":"<uuid>","ok":true,"result":{...}}
 *   worker -> umd  {"type":"result","job":"<uuid>","ok":false,"error":"why"}
 *                  either may carry "look": the compute processes on the GPU right after the
 *                  part, {"pids":[N,...]} (NVML's, the worker's own included; "truncated":true
 *                  when there were more) or {"others":N} (a fake device); umd then finishes the
 *                  part on it instead of its own look (daemon/gpustate.h)
 *   umd -> worker  {"type":"cancel","job":"<uuid>"}   (worker stops between samples and answers
 *                                                      with ok:false,"error":"cancelled")
 *   worker -> umd  {"type":"heartbeat","busy":bool}   every heartbeat interval, from its own
 *                                                      thread, also while a job runs
 *   umd -> worker  {"type":"shutdown"}                 worker frees its buffers and exits 0
 * A frame larger than IPC_FRAME_MAX, a length of 0, or a payload that is not a JSON object with
 * a string "type" is a protocol error: the peer is treated as broken (umd kills the worker). */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define IPC_PROTOCOL_VERSION 1
#define IPC_FRAME_MAX        (16u * 1024u * 1024u)

/* Incremental decoder for a non-blocking reader. */
struct ipc_decoder {
        uint8_t *buf;
        size_t len, cap;
        size_t max_frame;
};

void ipc_decoder_init(struct ipc_decoder *d, size_t max_frame);
void ipc_decoder_free(struct ipc_decoder *d);
/* Append bytes read from the socket. 0 or -ENOMEM. */
int ipc_decoder_feed(struct ipc_decoder *d, const void *data, size_t len);
/* Take the next complete message. 1 and *ret set (caller decrefs) when one is complete,
 * 0 when more bytes are needed, -EMSGSIZE for an oversized or zero length, -EBADMSG for a
 * payload that is not a JSON object with a string "type". */
int ipc_decoder_next(struct ipc_decoder *d, json_t **ret);
/* ipc_decoder_next, but when the payload is canonical (json_canonical: what the peer's
 * ipc_encode writes) and its member raw_key is an object, that member comes as a raw node
 * (jsonraw.h) holding its bytes instead of a tree: only the rest of the frame is parsed. Any
 * other payload is parsed whole, as ipc_decoder_next does, and refused the same way. */
int ipc_decoder_next_split(struct ipc_decoder *d, const char *raw_key, json_t **ret);
/* ipc_decoder_next_split, and with 1 *ret_picked: what paths name in the raw member
 * (json_canonical_pick), taken as the frame is checked, or NULL where the member came parsed or
 * memory ran out for the pick (json_raw_pick then reads the member). */
int ipc_decoder_next_pick(struct ipc_decoder *d, const char *raw_key, const char *const *paths,
                          json_t **ret, json_t **ret_picked);

/* Encode msg as one frame; *ret malloc'd. 0, -ENOMEM or -EMSGSIZE. */
int ipc_encode(const json_t *msg, uint8_t **ret, size_t *ret_len);
/* Blocking: write one whole frame to fd (retries EINTR, short writes). 0 or -errno. */
int ipc_send(int fd, const json_t *msg);
/* ipc_send of a payload already dumped (len bytes of one JSON object, as ipc_encode would dump
 * it): 0, -EINVAL (empty), -EMSGSIZE or -errno. */
int ipc_send_payload(int fd, const char *payload, size_t len);
/* The run message's payload, {"type":"run","job":...,"benchmark":...,"params":...} dumped as
 * ipc_send would dump it (params NULL: {}), written without building the message: a part's
 * start sends one. malloc'd, NUL-terminated; NULL when out of memory. */
char *ipc_run_payload(const char *job_id, const char *benchmark, const json_t *params,
                      size_t *ret_len);
/* Blocking: read exactly one frame from fd. 1 with *ret, 0 on clean EOF before a frame,
 * -errno / -EMSGSIZE / -EBADMSG otherwise. */
int ipc_recv(int fd, size_t max_frame, json_t **ret);
