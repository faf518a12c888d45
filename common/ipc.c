/* Framing for the umd <-> umd-worker socketpair: 4-byte big-endian length, then one JSON object
 * with a string "type". Both the incremental decoder (umd's non-blocking loop) and the blocking
 * send/recv (the worker) validate frames with the same function, so they cannot disagree. */
#include "ipc.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "jsonraw.h"
#include "jsonutil.h"
#include "util.h"

/* Messages are flat (results are at most a few levels deep): anything deeper is an error. */
#define IPC_MAX_DEPTH 64
#define IPC_HEADER    4u

static size_t clamp_max(size_t max_frame)
{
        if (max_frame == 0 || max_frame > UINT32_MAX)
                return IPC_FRAME_MAX;
        return max_frame;
}

static uint32_t read_be32(const uint8_t *p)
{
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* A message: an object with a string "type". */
static bool is_message(const json_t *j)
{
        return json_is_object(j) && json_is_string(json_object_get(j, "type"));
}

static int parse_payload(const uint8_t *p, size_t len, json_t **ret)
{
        json_error_t err;
        json_t *j;

        j = json_parse_strict((const char *)p, len, IPC_MAX_DEPTH, &err);
        if (!j)
                return json_error_code(&err) == json_error_out_of_memory ? -ENOMEM : -EBADMSG;
        if (!is_message(j)) {
                json_decref(j);
                return -EBADMSG;
        }
        *ret = j;
        return 0;
}

void ipc_decoder_init(struct ipc_decoder *d, size_t max_frame)
{
        memset(d, 0, sizeof(*d));
        d->max_frame = clamp_max(max_frame);
}

void ipc_decoder_free(struct ipc_decoder *d)
{
        if (!d)
                return;
        free(d->buf);
        d->buf = NULL;
        d->len = d->cap = 0;
}

int ipc_decoder_feed(struct ipc_decoder *d, const void *data, size_t len)
{
        if (len == 0)
                return 0;
        if (len > SIZE_MAX - d->len)
                return -ENOMEM;
        if (d->len + len > d->cap) {
                size_t ncap = d->cap ? d->cap : 4096;
                uint8_t *nbuf;

                while (ncap < d->len + len)
                        ncap = ncap > SIZE_MAX / 2 ? d->len + len : ncap * 2;
                nbuf = realloc(d->buf, ncap);
                if (!nbuf)
                        return -ENOMEM;
                d->buf = nbuf;
                d->cap = ncap;
        }
        memcpy(d->buf + d->len, data, len);
        d->len += len;
        return 0;
}

/* The payload p (canonical, its member raw_key at span, an object) as a tree whose raw_key is a
 * raw node: the frame less that member's bytes is parsed, a few dozen bytes instead of a
 * result's kilobytes. 0, or -ENOMEM. */
static int parse_split(const uint8_t *p, size_t len, const char *raw_key, struct json_span span,
                       json_t **ret)
{
        size_t rest = len - span.len;
        _cleanup_json_ json_t *j = NULL;
        json_t *raw;
        uint8_t *skel;
        int r;

        skel = malloc(rest + 2);
        if (!skel)
                return -ENOMEM;
        memcpy(skel, p, span.off);
        memcpy(skel + span.off, "{}", 2);
        memcpy(skel + span.off + 2, p + span.off + span.len, len - span.off - span.len);
        /* Canonical still (the member's value replaced by an empty object): built without
         * jansson's parser, as parse_payload would parse it. */
        j = json_canonical_load((const char *)skel, rest + 2, IPC_MAX_DEPTH);
        if (j && !is_message(j)) {
                json_decref(j);
                j = NULL;
        }
        r = j ? 0 : parse_payload(skel, rest + 2, &j);
        free(skel);
        if (r < 0)
                return r == -ENOMEM ? r : -EBADMSG; /* cannot be: it was canonical */
        raw = json_raw_new((const char *)p + span.off, span.len);
        if (!raw || json_object_set_new(j, raw_key, raw) < 0)
                return -ENOMEM;
        *ret = j;
        j = NULL;
        return 0;
}

/* *ret_picked (when paths) is what paths name in the raw member, or NULL: none was split off, or
 * memory ran out for the pick. */
static int parse_frame(const uint8_t *p, size_t n, const char *raw_key, const char *const *paths,
                       json_t **ret, json_t **ret_picked)
{
        struct json_span span = {0, 0};
        _cleanup_json_ json_t *picked = NULL;
        int r;

        *ret_picked = NULL;
        if (raw_key &&
            json_canonical_pick((const char *)p, n, IPC_MAX_DEPTH, raw_key, paths, &span,
                                &picked) &&
            span.len > 0 && p[span.off] == '{') {
                r = parse_split(p, n, raw_key, span, ret);
                if (r == 0) {
                        *ret_picked = picked;
                        picked = NULL;
                }
                if (r != -EBADMSG)
                        return r;
        }
        return parse_payload(p, n, ret);
}

int ipc_decoder_next(struct ipc_decoder *d, json_t **ret)
{
        return ipc_decoder_next_split(d, NULL, ret);
}

int ipc_decoder_next_split(struct ipc_decoder *d, const char *raw_key, json_t **ret)
{
        return ipc_decoder_next_pick(d, raw_key, NULL, ret, NULL);
}

int ipc_decoder_next_pick(struct ipc_decoder *d, const char *raw_key, const char *const *paths,
                          json_t **ret, json_t **ret_picked)
{
        size_t n, frame;
        json_t *j = NULL, *picked = NULL;
        int r;

        if (d->len < IPC_HEADER)
                return 0;
        n = read_be32(d->buf);
        /* Judged from the header alone, so an oversized frame is refused before it is buffered. */
        if (n == 0 || n > d->max_frame)
                return -EMSGSIZE;
        if (d->len - IPC_HEADER < n)
                return 0;

        frame = IPC_HEADER + n;
        r = parse_frame(d->buf + IPC_HEADER, n, raw_key, paths, &j, &picked);
        if (r == -ENOMEM)
                return r; /* the frame stays: the caller may retry */
        /* A bad payload is consumed too, so a caller that chose to go on stays in step. */
        memmove(d->buf, d->buf + frame, d->len - frame);
        d->len -= frame;
        if (r < 0)
                return r;
        *ret = j;
        if (ret_picked)
                *ret_picked = picked;
        else
                json_decref(picked);
        return 1;
}

int ipc_encode(const json_t *msg, uint8_t **ret, size_t *ret_len)
{
        size_t len;
        char *s;
        uint8_t *f;

        if (!msg || !ret)
                return -EINVAL;
        s = json_dump_compact(msg, &len);
        if (!s)
                return -ENOMEM;
        if (len == 0 || len > IPC_FRAME_MAX) {
                free(s);
                return -EMSGSIZE;
        }
        f = malloc(IPC_HEADER + len);
        if (!f) {
                free(s);
                return -ENOMEM;
        }
        f[0] = (uint8_t)(len >> 24);
        f[1] = (uint8_t)(len >> 16);
        f[2] = (uint8_t)(len >> 8);
        f[3] = (uint8_t)len;
        memcpy(f + IPC_HEADER, s, len);
        free(s);
        *ret = f;
        if (ret_len)
                *ret_len = IPC_HEADER + len;
        return 0;
}

int ipc_send(int fd, const json_t *msg)
{
        size_t len;
        int r;

        if (!msg)
                return -EINVAL;
        char *s = json_dump_compact(msg, &len);
        if (!s)
                return -ENOMEM;
        r = ipc_send_payload(fd, s, len);
        free(s);
        return r;
}

int ipc_send_payload(int fd, const char *payload, size_t len)
{
        uint8_t head[IPC_HEADER] = {(uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
                                    (uint8_t)len};
        /* Header and payload in one call, neither copied into a frame of their own. */
        struct iovec iov[2] = {{.iov_base = head, .iov_len = sizeof(head)},
                               {.iov_base = (void *)payload, .iov_len = len}};
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
        bool is_socket = true;

        if (!payload || len == 0 || len > IPC_FRAME_MAX)
                return len == 0 || !payload ? -EINVAL : -EMSGSIZE;
        while (mh.msg_iovlen > 0) {
                ssize_t w;

                /* MSG_NOSIGNAL: a dead peer is an error to handle, not a SIGPIPE to die of. */
                if (is_socket)
                        w = sendmsg(fd, &mh, MSG_NOSIGNAL);
                else
                        w = writev(fd, mh.msg_iov, (int)mh.msg_iovlen);
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == ENOTSOCK && is_socket) {
                                is_socket = false;
                                continue;
                        }
                        return -errno;
                }
                /* A short write: on from the first byte not written. */
                while (mh.msg_iovlen > 0 && (size_t)w >= mh.msg_iov[0].iov_len) {
                        w -= (ssize_t)mh.msg_iov[0].iov_len;
                        mh.msg_iov++;
                        mh.msg_iovlen--;
                }
                if (mh.msg_iovlen > 0) {
                        mh.msg_iov[0].iov_base = (uint8_t *)mh.msg_iov[0].iov_base + w;
                        mh.msg_iov[0].iov_len -= (size_t)w;
                }
        }
        return 0;
}

/* Whether s goes into JSON as it is: printable ASCII but the quote and the backslash (catalog
 * names and job ids always are). */
static bool plain_ascii(const char *s)
{
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e || *s == '"' || *s == '\\')
                        return false;
        return true;
}

char *ipc_run_payload(const char *job_id, const char *benchmark, const json_t *params,
                      size_t *ret_len)
{
        static const char empty[] = "{}";
        _cleanup_free_ char *p = NULL;
        size_t plen = sizeof(empty) - 1;

        assert(job_id && benchmark && ret_len);
        if (!plain_ascii(job_id) || !plain_ascii(benchmark)) {
                /* Not what umd sends; jansson escapes it, in the same order of keys. */
                _cleanup_json_ json_t *msg = json_pack(
                    "{s:s, s:s, s:s, s:o}", "type", "run", "job", job_id, "benchmark", benchmark,
                    "params", params ? json_incref((json_t *)params) : json_object());
                return msg ? json_dump_compact(msg, ret_len) : NULL;
        }
        if (params && !(p = json_dump_compact(params, &plen)))
                return NULL;
        /* Keys in json_dump_compact's order (sorted): the same bytes as the message's dump. */
        size_t blen = strlen(benchmark), jlen = strlen(job_id);
        size_t len = strlen("{\"benchmark\":\"\",\"job\":\"\",\"params\":,\"type\":\"run\"}") +
                     blen + jlen + plen;
        char *out = malloc(len + 1), *o = out;
        if (!out)
                return NULL;
#define PUT(src, n) (memcpy(o, (src), (n)), o += (n))
        PUT("{\"benchmark\":\"", strlen("{\"benchmark\":\""));
        PUT(benchmark, blen);
        PUT("\",\"job\":\"", strlen("\",\"job\":\""));
        PUT(job_id, jlen);
        PUT("\",\"params\":", strlen("\",\"params\":"));
        PUT(p ? p : empty, plen);
        PUT(",\"type\":\"run\"}", strlen(",\"type\":\"run\"}"));
#undef PUT
        *o = '\0';
        assert((size_t)(o - out) == len);
        *ret_len = len;
        return out;
}

/* 0 when len bytes were read, 1 on EOF before any byte, -errno otherwise. */
static int read_exact(int fd, void *buf, size_t len)
{
        uint8_t *p = buf;
        size_t got = 0;

        while (got < len) {
                ssize_t n = read(fd, p + got, len - got);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return got == 0 ? 1 : -ECONNRESET;
                got += (size_t)n;
        }
        return 0;
}

int ipc_recv(int fd, size_t max_frame, json_t **ret)
{
        uint8_t hdr[IPC_HEADER];
        uint8_t *payload;
        json_t *j = NULL;
        size_t n;
        int r;

        r = read_exact(fd, hdr, sizeof(hdr));
        if (r == 1)
                return 0;
        if (r < 0)
                return r;
        n = read_be32(hdr);
        if (n == 0 || n > clamp_max(max_frame))
                return -EMSGSIZE;
        payload = malloc(n);
        if (!payload)
                return -ENOMEM;
        r = read_exact(fd, payload, n);
        if (r == 1)
                r = -ECONNRESET; /* EOF inside a frame */
        if (r == 0)
                r = parse_payload(payload, n, &j);
        free(payload);
        if (r < 0)
                return r;
        *ret = j;
        return 1;
}
