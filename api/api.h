/* The HTTP layer's face to the daemon: open every listener, serve the v1 API on
 * libmicrohttpd's threads, and stop gracefully. Everything the handlers need from the daemon
 * goes through daemon/core.h; main.c needs only these three calls. */
#pragma once

#include <stddef.h>

struct umd_config;
struct api_server;

/* Opens the sockets systemd passed (sd_listen_fds), then each cfg->listen[] ("ADDR:PORT",
 * "[V6ADDR]:PORT") and cfg->unix_socket when set, and starts one server per socket. Returns 0
 * once every one is listening, with *ret the server; on failure logs one line naming the
 * address and returns -errno (-EADDRINUSE for a port in use, -EINVAL for an address that
 * does not parse), *ret untouched and nothing left open. cfg must outlive the server. */
int api_start(const struct umd_config *cfg, struct api_server **ret);

/* Stops accepting, lets requests already in flight finish for at most timeout_ms, then
 * closes every connection and listener and frees s. NULL is a no-op. */
void api_stop(struct api_server *s, unsigned timeout_ms);

/* The OpenAPI document GET /v1/openapi.json serves: api/openapi.json as committed, with one
 * params schema a catalog entry (components.schemas.params_<name>) and JobSpec tied to them.
 * Built once; NULL when out of memory. */
const char *api_openapi_document(size_t *ret_len);

/* How many sockets s listens on (for STATUS=). */
size_t api_listener_count(const struct api_server *s);
