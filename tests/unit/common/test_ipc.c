/* IPC framing: the decoder and the blocking send/recv against good, truncated, oversized and
 * garbage frames. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "ipc.h"
#include "jsonraw.h"
#include "jsonutil.h"

static size_t raw_frame(uint8_t *out, uint32_t len, const char *payload)
{
        out[0] = (uint8_t)(len >> 24);
        out[1] = (uint8_t)(len >> 16);
        out[2] = (uint8_t)(len >> 8);
        out[3] = (uint8_t)len;
        if (payload)
                memcpy(out + 4, payload, strlen(payload));
        return 4 + (payload ? strlen(payload) : 0);
}

static json_t *hello(void)
{
        return json_pack("{s:s, s:i, s:i, s:{s:s}}", "type", "hello", "protocol",
                         IPC_PROTOCOL_VERSION, "pid", 42, "device", "name", "fake \"[{\" GPU");
}

static void test_round_trip(void **state)
{
        struct ipc_decoder d;
        json_t *msg = hello(), *got = NULL;
        uint8_t *f = NULL;
        size_t len = 0;

        ipc_decoder_init(&d, 0);
        assert_int_equal(ipc_encode(msg, &f, &len), 0);
        assert_int_equal(ipc_decoder_feed(&d, f, len), 0);
        assert_int_equal(ipc_decoder_next(&d, &got), 1);
        assert_true(json_equal(msg, got));
        assert_int_equal(ipc_decoder_next(&d, &got), 0);
        json_decref(got);
        json_decref(msg);
        free(f);
        ipc_decoder_free(&d);
}

/* One payload through ipc_decoder_next_split(d, "result"): its return, *ret. */
static int split_one(const char *payload, json_t **ret)
{
        struct ipc_decoder d;
        uint8_t buf[512];
        size_t n = raw_frame(buf, (uint32_t)strlen(payload), payload);
        int r;

        ipc_decoder_init(&d, 0);
        assert_int_equal(ipc_decoder_feed(&d, buf, n), 0);
        r = ipc_decoder_next_split(&d, "result", ret);
        ipc_decoder_free(&d);
        return r;
}

/* What ipc_encode writes comes with "result" as its bytes; anything else is parsed whole, and
 * a broken frame is refused as by ipc_decoder_next, so the supervisor's handling is unchanged. */
static void test_split_keeps_a_canonical_result_as_bytes(void **state)
{
        json_t *msg = json_pack("{s:s, s:s, s:b, s:{s:s, s:[{s:f, s:s}]}}", "type", "result", "job",
                                "j1", "ok", 1, "result", "benchmark", "copy", "measurements",
                                "gbps", 0.1, "name", "h2d");
        json_t *got = NULL;
        const char *bytes;
        size_t len, want_len;
        uint8_t *f = NULL;
        struct ipc_decoder d;
        char *want = json_dump_compact(json_object_get(msg, "result"), &want_len);

        ipc_decoder_init(&d, 0);
        assert_int_equal(ipc_encode(msg, &f, &len), 0);
        assert_int_equal(ipc_decoder_feed(&d, f, len), 0);
        assert_int_equal(ipc_decoder_next_split(&d, "result", &got), 1);
        assert_true(json_raw_get(json_object_get(got, "result"), &bytes, &len));
        assert_int_equal(len, want_len);
        assert_memory_equal(bytes, want, len);
        assert_string_equal(json_string_value(json_object_get(got, "job")), "j1");
        assert_true(json_is_true(json_object_get(got, "ok")));
        assert_int_equal(json_object_size(got), 4);
        json_decref(got);
        json_decref(msg);
        free(want);
        free(f);
        ipc_decoder_free(&d);

        /* Not as jansson writes it (a space, keys out of order): parsed whole, a tree. */
        assert_int_equal(split_one("{\"type\":\"result\",\"job\":\"j\",\"ok\":true,"
                                   "\"result\":{\"b\":1, \"a\":2}}",
                                   &got),
                         1);
        assert_true(json_is_object(json_object_get(got, "result")));
        assert_int_equal(json_integer_value(json_object_get(json_object_get(got, "result"), "a")),
                         2);
        json_decref(got);
        /* A result that is not an object: left to the supervisor to refuse, as before. */
        assert_int_equal(
            split_one("{\"job\":\"j\",\"ok\":true,\"result\":\"x\",\"type\":\"result\"}", &got), 1);
        assert_string_equal(json_string_value(json_object_get(got, "result")), "x");
        assert_false(json_raw_get(json_object_get(got, "result"), NULL, NULL));
        json_decref(got);
        /* Broken frames: refused as ever. */
        assert_int_equal(split_one("{\"job\":\"j\",\"ok\":true,\"result\":{\"a\":1}", &got),
                         -EBADMSG);
        assert_int_equal(
            split_one("{\"job\":\"j\",\"ok\":true,\"result\":{\"a\":1},\"result\":{}}", &got),
            -EBADMSG);
        assert_int_equal(split_one("{\"job\":\"j\",\"result\":{\"a\":1}}", &got), -EBADMSG);
}

static void test_frame_header_is_big_endian_length(void **state)
{
        json_t *msg = json_pack("{s:s}", "type", "shutdown");
        uint8_t *f = NULL;
        size_t len = 0;

        assert_int_equal(ipc_encode(msg, &f, &len), 0);
        assert_int_equal(len, 4 + strlen("{\"type\":\"shutdown\"}"));
        assert_memory_equal(f, "\0\0\0\x13{\"type\":\"shutdown\"}", len);
        free(f);
        json_decref(msg);
}

static void test_truncated_frame_across_feeds(void **state)
{
        struct ipc_decoder d;
        json_t *msg = hello(), *got = NULL;
        uint8_t *f = NULL;
        size_t len = 0;

        ipc_decoder_init(&d, 0);
        assert_int_equal(ipc_encode(msg, &f, &len), 0);
        /* one byte at a time, the header split too */
        for (size_t i = 0; i < len - 1; i++) {
                assert_int_equal(ipc_decoder_feed(&d, f + i, 1), 0);
                assert_int_equal(ipc_decoder_next(&d, &got), 0);
                assert_null(got);
        }
        assert_int_equal(ipc_decoder_feed(&d, f + len - 1, 1), 0);
        assert_int_equal(ipc_decoder_next(&d, &got), 1);
        assert_true(json_equal(msg, got));
        json_decref(got);
        json_decref(msg);
        free(f);
        ipc_decoder_free(&d);
}

static void test_two_frames_in_one_feed(void **state)
{
        struct ipc_decoder d;
        uint8_t buf[128];
        size_t n;
        json_t *got = NULL;

        n = raw_frame(buf, 16, "{\"type\":\"first\"}");
        n += raw_frame(buf + n, 17, "{\"type\":\"second\"}");
        ipc_decoder_init(&d, 0);
        assert_int_equal(ipc_decoder_feed(&d, buf, n), 0);
        assert_int_equal(ipc_decoder_next(&d, &got), 1);
        assert_string_equal(json_string_value(json_object_get(got, "type")), "first");
        json_decref(got);
        assert_int_equal(ipc_decoder_next(&d, &got), 1);
        assert_string_equal(json_string_value(json_object_get(got, "type")), "second");
        json_decref(got);
        assert_int_equal(ipc_decoder_next(&d, &got), 0);
        assert_int_equal(d.len, 0);
        ipc_decoder_free(&d);
}

static void test_oversized_length_rejected_from_header(void **state)
{
        struct ipc_decoder d;
        uint8_t buf[8];
        json_t *got = NULL;

        ipc_decoder_init(&d, 0);
        raw_frame(buf, IPC_FRAME_MAX + 1, NULL);
        /* the header alone is enough: nothing of the payload needs to arrive */
        assert_int_equal(ipc_decoder_feed(&d, buf, 4), 0);
        assert_int_equal(ipc_decoder_next(&d, &got), -EMSGSIZE);
        assert_null(got);
        ipc_decoder_free(&d);
}

static void test_length_over_configured_max_rejected(void **state)
{
        struct ipc_decoder d;
        uint8_t buf[64];
        json_t *got = NULL;
        size_t n = raw_frame(buf, 16, "{\"type\":\"first\"}");

        ipc_decoder_init(&d, 15);
        assert_int_equal(ipc_decoder_feed(&d, buf, n), 0);
        assert_int_equal(ipc_decoder_next(&d, &got), -EMSGSIZE);
        ipc_decoder_free(&d);
}

static void test_zero_length_rejected(void **state)
{
        struct ipc_decoder d;
        uint8_t buf[8];
        json_t *got = NULL;

        ipc_decoder_init(&d, 0);
        raw_frame(buf, 0, NULL);
        assert_int_equal(ipc_decoder_feed(&d, buf, 4), 0);
        assert_int_equal(ipc_decoder_next(&d, &got), -EMSGSIZE);
        ipc_decoder_free(&d);
}

static int decode_one(const char *payload)
{
        struct ipc_decoder d;
        uint8_t buf[256];
        json_t *got = NULL;
        size_t n = raw_frame(buf, (uint32_t)strlen(payload), payload);
        int r;

        ipc_decoder_init(&d, 0);
        assert_int_equal(ipc_decoder_feed(&d, buf, n), 0);
        r = ipc_decoder_next(&d, &got);
        if (r == 1)
                json_decref(got);
        else
                assert_null(got);
        ipc_decoder_free(&d);
        return r;
}

static void test_garbage_payload_is_ebadmsg(void **state)
{
        assert_int_equal(decode_one("not json at all"), -EBADMSG);
        assert_int_equal(decode_one("{\"type\":\"x\""), -EBADMSG);
        assert_int_equal(decode_one("{\"type\":\"x\"} trailing"), -EBADMSG);
        assert_int_equal(decode_one("\xff\xfe{}"), -EBADMSG);
}

static void test_non_object_payload_is_ebadmsg(void **state)
{
        assert_int_equal(decode_one("[\"type\"]"), -EBADMSG);
        assert_int_equal(decode_one("\"hello\""), -EBADMSG);
        assert_int_equal(decode_one("42"), -EBADMSG);
}

static void test_object_without_string_type_is_ebadmsg(void **state)
{
        assert_int_equal(decode_one("{}"), -EBADMSG);
        assert_int_equal(decode_one("{\"kind\":\"hello\"}"), -EBADMSG);
        assert_int_equal(decode_one("{\"type\":1}"), -EBADMSG);
        assert_int_equal(decode_one("{\"type\":null}"), -EBADMSG);
        assert_int_equal(decode_one("{\"type\":\"a\",\"type\":\"b\"}"), -EBADMSG);
        assert_int_equal(decode_one("{\"type\":\"ok\"}"), 1);
}

static void test_encode_oversized_is_emsgsize(void **state)
{
        size_t n = IPC_FRAME_MAX;
        char *big = malloc(n + 1);
        json_t *msg;
        uint8_t *f = (uint8_t *)"untouched";

        assert_non_null(big);
        memset(big, 'a', n);
        big[n] = '\0';
        msg = json_pack("{s:s, s:s}", "type", "result", "error", big);
        assert_non_null(msg);
        assert_int_equal(ipc_encode(msg, &f, NULL), -EMSGSIZE);
        assert_string_equal((char *)f, "untouched");
        json_decref(msg);
        free(big);
}

static void test_send_recv_over_socketpair(void **state)
{
        int sv[2];
        json_t *msg = hello(), *got = NULL;

        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        assert_int_equal(ipc_send(sv[0], msg), 0);
        assert_int_equal(ipc_send(sv[0], msg), 0);
        assert_int_equal(ipc_recv(sv[1], 0, &got), 1);
        assert_true(json_equal(msg, got));
        json_decref(got);
        assert_int_equal(ipc_recv(sv[1], 0, &got), 1);
        json_decref(got);
        close(sv[0]);
        got = NULL;
        assert_int_equal(ipc_recv(sv[1], 0, &got), 0); /* clean EOF */
        assert_null(got);
        close(sv[1]);
        json_decref(msg);
}

/* The run payload written by hand is the bytes the message's dump is, escapes and all. */
static void assert_run_payload_is_dump(const char *job, const char *bench, json_t *params)
{
        json_t *msg = json_pack("{s:s, s:s, s:s, s:o}", "type", "run", "job", job, "benchmark",
                                bench, "params", params ? json_incref(params) : json_object());
        size_t want_len, got_len;
        char *want = json_dump_compact(msg, &want_len);
        char *got = ipc_run_payload(job, bench, params, &got_len);

        assert_non_null(got);
        assert_int_equal(got_len, want_len);
        assert_string_equal(got, want);
        free(want);
        free(got);
        json_decref(msg);
}

static void test_run_payload_is_the_messages_dump(void **state)
{
        json_t *params = json_pack("{s:I, s:s, s:{s:[i,f]}, s:n}", "size", (json_int_t)4096,
                                   "access", "str\"ided\\", "nested", "a", 1, 0.5, "z", NULL);

        assert_run_payload_is_dump("0190aa5e-1c2b-7d3e-8f40-123456789abc", "copy", params);
        assert_run_payload_is_dump("0190aa5e-1c2b-7d3e-8f40-123456789abc", "copy", NULL);
        /* Not what umd sends, but sent right: escaped as jansson escapes. */
        assert_run_payload_is_dump("id \"quoted\" \\ \x01", "b\xc3\xa9nch", params);
        json_decref(params);
}

static void test_send_payload_arrives_as_one_frame(void **state)
{
        int sv[2];
        size_t len;
        char *p = ipc_run_payload("0190aa5e-1c2b-7d3e-8f40-123456789abc", "copy", NULL, &len);
        json_t *got = NULL;

        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        assert_int_equal(ipc_send_payload(sv[0], p, len), 0);
        assert_int_equal(ipc_send_payload(sv[0], p, 0), -EINVAL);
        assert_int_equal(ipc_send_payload(sv[0], p, IPC_FRAME_MAX + 1u), -EMSGSIZE);
        assert_int_equal(ipc_recv(sv[1], 0, &got), 1);
        assert_string_equal(json_string_value(json_object_get(got, "type")), "run");
        assert_string_equal(json_string_value(json_object_get(got, "benchmark")), "copy");
        assert_true(json_is_object(json_object_get(got, "params")));
        assert_int_equal(json_object_size(json_object_get(got, "params")), 0);
        json_decref(got);
        close(sv[0]);
        assert_int_equal(ipc_recv(sv[1], 0, &got), 0); /* nothing else was sent */
        close(sv[1]);
        free(p);
}

static void test_recv_eof_inside_frame_is_error(void **state)
{
        int sv[2];
        uint8_t buf[64];
        json_t *got = NULL;
        size_t n = raw_frame(buf, 16, "{\"type\":\"first\"}");

        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        assert_int_equal(write(sv[0], buf, n - 3), (ssize_t)(n - 3));
        close(sv[0]);
        assert_true(ipc_recv(sv[1], 0, &got) < 0);
        assert_null(got);
        close(sv[1]);
}

static void test_recv_oversized_and_garbage(void **state)
{
        int sv[2];
        uint8_t buf[64];
        json_t *got = NULL;
        size_t n;

        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        n = raw_frame(buf, 16, "{\"type\":\"first\"}");
        assert_int_equal(write(sv[0], buf, n), (ssize_t)n);
        assert_int_equal(ipc_recv(sv[1], 8, &got), -EMSGSIZE);
        close(sv[0]);
        close(sv[1]);

        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        n = raw_frame(buf, 5, "[1,2]");
        assert_int_equal(write(sv[0], buf, n), (ssize_t)n);
        assert_int_equal(ipc_recv(sv[1], 0, &got), -EBADMSG);
        assert_null(got);
        close(sv[0]);
        close(sv[1]);
}

static void test_send_to_closed_peer_fails_without_sigpipe(void **state)
{
        int sv[2];
        json_t *msg = hello();

        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        close(sv[1]);
        assert_int_equal(ipc_send(sv[0], msg), -EPIPE);
        close(sv[0]);
        json_decref(msg);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_round_trip),
            cmocka_unit_test(test_split_keeps_a_canonical_result_as_bytes),
            cmocka_unit_test(test_frame_header_is_big_endian_length),
            cmocka_unit_test(test_truncated_frame_across_feeds),
            cmocka_unit_test(test_two_frames_in_one_feed),
            cmocka_unit_test(test_oversized_length_rejected_from_header),
            cmocka_unit_test(test_length_over_configured_max_rejected),
            cmocka_unit_test(test_zero_length_rejected),
            cmocka_unit_test(test_garbage_payload_is_ebadmsg),
            cmocka_unit_test(test_non_object_payload_is_ebadmsg),
            cmocka_unit_test(test_object_without_string_type_is_ebadmsg),
            cmocka_unit_test(test_encode_oversized_is_emsgsize),
            cmocka_unit_test(test_send_recv_over_socketpair),
            cmocka_unit_test(test_run_payload_is_the_messages_dump),
            cmocka_unit_test(test_send_payload_arrives_as_one_frame),
            cmocka_unit_test(test_recv_eof_inside_frame_is_error),
            cmocka_unit_test(test_recv_oversized_and_garbage),
            cmocka_unit_test(test_send_to_closed_peer_fails_without_sigpipe),
        };

        return cmocka_run_group_tests_name("ipc", tests, NULL, NULL);
}
