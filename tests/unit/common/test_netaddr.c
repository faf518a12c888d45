/* Listen addresses: the forms accepted, the ones refused, and outputs untouched on refusal. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "netaddr.h"

static void test_ipv4_with_port(void **state)
{
        struct sockaddr_storage ss;
        socklen_t len = 0;

        assert_int_equal(netaddr_parse("127.0.0.1:7878", &ss, &len), 0);
        assert_int_equal(len, sizeof(struct sockaddr_in));
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        assert_int_equal(a->sin_family, AF_INET);
        assert_int_equal(ntohs(a->sin_port), 7878);
        assert_int_equal(ntohl(a->sin_addr.s_addr), 0x7f000001);
}

static void test_ipv6_in_brackets(void **state)
{
        struct sockaddr_storage ss;
        socklen_t len = 0;

        assert_int_equal(netaddr_parse("[::1]:80", &ss, &len), 0);
        assert_int_equal(len, sizeof(struct sockaddr_in6));
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        assert_int_equal(a->sin6_family, AF_INET6);
        assert_int_equal(ntohs(a->sin6_port), 80);
        assert_true(IN6_IS_ADDR_LOOPBACK(&a->sin6_addr));
}

static void test_port_zero_lets_the_kernel_pick(void **state)
{
        struct sockaddr_storage ss;
        socklen_t len;

        assert_int_equal(netaddr_parse("0.0.0.0:0", &ss, &len), 0);
}

static void test_refused_forms_leave_outputs_alone(void **state)
{
        static const char *const bad[] = {
            "",           "127.0.0.1",    "127.0.0.1:", "127.0.0.1:65536", "localhost:80",
            "::1:80",     "[::1]80",      "[::1",       "[127.0.0.1]:80",  "1.2.3.4:-1",
            "1.2.3.4:8x", "999.0.0.1:80", ":80",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct sockaddr_storage ss;
                memset(&ss, 0xab, sizeof(ss));
                socklen_t len = 12345;
                assert_int_equal(netaddr_parse(bad[i], &ss, &len), -EINVAL);
                assert_int_equal(len, 12345);
                assert_int_equal(((unsigned char *)&ss)[0], 0xab);
        }
        assert_int_equal(netaddr_parse(NULL, NULL, NULL), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_ipv4_with_port),
            cmocka_unit_test(test_ipv6_in_brackets),
            cmocka_unit_test(test_port_zero_lets_the_kernel_pick),
            cmocka_unit_test(test_refused_forms_leave_outputs_alone),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
