/* ADDR:PORT and [V6ADDR]:PORT parsing (see netaddr.h). */
#include "netaddr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "util.h"

int netaddr_parse(const char *s, struct sockaddr_storage *ret_addr, socklen_t *ret_len)
{
        char host[INET6_ADDRSTRLEN + 1];
        const char *port_s;
        uint64_t port;
        size_t hlen;
        bool v6 = false;

        if (!s)
                return -EINVAL;
        if (s[0] == '[') {
                const char *end = strchr(s, ']');
                if (!end || end[1] != ':')
                        return -EINVAL;
                hlen = (size_t)(end - s - 1);
                port_s = end + 2;
                v6 = true;
                s++;
        } else {
                const char *colon = strrchr(s, ':');
                /* A bare IPv6 address has colons of its own: it needs brackets. */
                if (!colon || strchr(s, ':') != colon)
                        return -EINVAL;
                hlen = (size_t)(colon - s);
                port_s = colon + 1;
        }
        if (hlen >= sizeof(host))
                return -EINVAL;
        memcpy(host, s, hlen);
        host[hlen] = '\0';
        if (parse_uint64(port_s, 0, 65535, &port) < 0)
                return -EINVAL;

        struct sockaddr_storage ss = {0};
        socklen_t len;
        if (v6) {
                struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
                a->sin6_family = AF_INET6;
                a->sin6_port = htons((uint16_t)port);
                if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1)
                        return -EINVAL;
                len = sizeof(*a);
        } else {
                struct sockaddr_in *a = (struct sockaddr_in *)&ss;
                a->sin_family = AF_INET;
                a->sin_port = htons((uint16_t)port);
                if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
                        return -EINVAL;
                len = sizeof(*a);
        }
        *ret_addr = ss;
        *ret_len = len;
        return 0;
}
