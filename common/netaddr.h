/* Listen addresses as people write them: "127.0.0.1:7878" or "[::1]:7878", numeric hosts only
 * (no name lookups at start-up). The configuration checks them and the server binds them with
 * this one parser. */
#pragma once

#include <sys/socket.h>

/* s -> *ret_addr, *ret_len. Port 0..65535 (0: the kernel picks one). 0, or -EINVAL with both
 * outputs untouched. */
int netaddr_parse(const char *s, struct sockaddr_storage *ret_addr, socklen_t *ret_len);
