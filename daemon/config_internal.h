/* What the configuration's files share (config.c: the key table and the command line;
 * config_read.c: a key's value from its text, and the INI file; config_print.c: --help, the
 * sample and --print-config): the table's type and the calls between them. Only umd's
 * configuration library includes it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

/* A key's error: the value as given (a listen list can be long) and what it should be. */
#define CONFIG_ERR_MAX 384
/* A file line's error: the key's name, then CONFIG_ERR_MAX. */
#define CONFIG_LINE_ERR_MAX (CONFIG_ERR_MAX + 128)
/* A key's name as a flag: the longest (health_memory_warn_fraction, 27) with room to spare. */
#define CONFIG_FLAG_MAX 64
/* A key's value as the file spells it: at most CONFIG_MAX_LISTEN addresses of up to 64. */
#define CONFIG_VALUE_MAX 1024

enum key_type { K_STR, K_LISTEN, K_UINT, K_SIZE, K_BOOL, K_DOUBLE, K_MODE, K_LOGLEVEL, K_BUSY };

struct key {
        const char *name;
        enum key_type type;
        size_t off;
        const char *def;
        double min, max; /* K_UINT, K_SIZE, K_DOUBLE, K_MODE */
        const char *help;
};

/* The one table of keys (config.c), in the order --help and the sample show them. */
extern const struct key config_keys[];
extern const size_t config_n_keys;

/* config_read.c */
/* Set one key from its text form. append: a repeated --listen adds rather than replaces.
 * 0, or -errno with err saying why. */
int config_read_key(struct umd_config *c, const struct key *k, const char *v, bool append,
                    char *err, size_t errlen);
void config_read_listen_clear(struct umd_config *c);

/* config_print.c */
/* A key's name as a flag: dashes for underscores. */
void config_print_flag_name(const struct key *k, char *buf, size_t len);
