/* libFuzzer harness for the configuration file reader: the fuzzed bytes are written to a temp
 * file and loaded with config_load_file() over the defaults, then freed. Never a crash or a
 * leak, whatever the file holds (bad lines are reported on stderr, which is expected). Whatever
 * it accepts must still satisfy the table's own bounds that the daemon relies on. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char path[64];
static int fd = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        snprintf(path, sizeof(path), "/tmp/umd-fuzz-config-XXXXXX");
        fd = mkstemp(path);
        if (fd < 0)
                abort();
        /* The file is reached by name only; unlink it at exit. */
        return 0;
}

static void cleanup(void) __attribute__((destructor));
static void cleanup(void)
{
        if (fd >= 0) {
                close(fd);
                unlink(path);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct umd_config c;
        int r;

        if (ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
                abort();

        config_init(&c);
        r = config_load_file(&c, path);
        if (r > 0)
                abort();
        if (r == 0) {
                if (c.n_listen > CONFIG_MAX_LISTEN)
                        abort();
                if (c.max_connections < 1 || c.max_connections_per_ip < 1 ||
                    c.connection_timeout_s < 1 || c.request_timeout_s < 1)
                        abort();
                if (c.max_body_bytes < 256 || c.max_body_bytes > 16u * 1024 * 1024)
                        abort();
                if (c.unix_socket_mode > 0777)
                        abort();
        }
        config_free(&c);
        return 0;
}
