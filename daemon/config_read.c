/* A configuration key's value from its text (as the file or a flag spells it) into struct
 * umd_config, each type's parser and its error; the listen list; reading the INI file. */
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"
#include "fileio.h"
#include "log.h"
#include "netaddr.h"
#include "size.h"
#include "util.h"

static const char *const busy_policy_names[] = {"wait", "run", "fail"};

int busy_policy_from_string(const char *s)
{
        for (size_t i = 0; s && i < ELEMENTSOF(busy_policy_names); i++)
                if (strcmp(s, busy_policy_names[i]) == 0)
                        return (int)i;
        return -EINVAL;
}

const char *busy_policy_to_string(unsigned p)
{
        return p < ELEMENTSOF(busy_policy_names) ? busy_policy_names[p] : "wait";
}

static void *field(struct umd_config *c, const struct key *k)
{
        return (char *)c + k->off;
}

static const struct key *key_find(const char *name)
{
        for (size_t i = 0; i < config_n_keys; i++)
                if (strcmp(config_keys[i].name, name) == 0)
                        return &config_keys[i];
        return NULL;
}

static int listen_validate(const char *s, char *err, size_t errlen)
{
        struct sockaddr_storage ss;
        socklen_t len;

        if (netaddr_parse(s, &ss, &len) < 0) {
                snprintf(err, errlen,
                         "'%s' is not ADDR:PORT or [V6ADDR]:PORT with a numeric address", s);
                return -EINVAL;
        }
        return 0;
}

void config_read_listen_clear(struct umd_config *c)
{
        for (size_t i = 0; i < c->n_listen; i++)
                free(c->listen[i]);
        c->n_listen = 0;
}

static int listen_add(struct umd_config *c, const char *s, char *err, size_t errlen)
{
        int r = listen_validate(s, err, errlen);
        if (r < 0)
                return r;
        if (c->n_listen >= CONFIG_MAX_LISTEN) {
                snprintf(err, errlen, "at most %d listen addresses", CONFIG_MAX_LISTEN);
                return -E2BIG;
        }
        c->listen[c->n_listen] = strdup(s);
        if (!c->listen[c->n_listen])
                return -ENOMEM;
        c->n_listen++;
        return 0;
}

static int set_mode(void *p, const char *v, char *err, size_t errlen)
{
        char *end;
        errno = 0;
        unsigned long m = strtoul(v, &end, 8);
        if (errno || end == v || *end || m > 0777) {
                snprintf(err, errlen, "'%s' is not an octal mode like 0660", v);
                return -EINVAL;
        }
        *(unsigned *)p = (unsigned)m;
        return 0;
}

static int set_size(const struct key *k, void *p, const char *v, char *err, size_t errlen)
{
        char a[SIZE_STRING_MAX], b[SIZE_STRING_MAX];
        uint64_t u;
        int r = size_parse(v, &u);
        if (r < 0 || u < (uint64_t)k->min || u > (uint64_t)k->max) {
                snprintf(err, errlen, "'%s' is not a size from %s to %s", v,
                         size_format((uint64_t)k->min, a, sizeof(a)),
                         size_format((uint64_t)k->max, b, sizeof(b)));
                return -EINVAL;
        }
        *(uint64_t *)p = u;
        return 0;
}

static int set_double(const struct key *k, void *p, const char *v, char *err, size_t errlen)
{
        char *end;
        errno = 0;
        double d = strtod(v, &end);
        if (errno || end == v || *end || !isfinite(d) || d < k->min || d > k->max) {
                snprintf(err, errlen, "'%s' is not a number from %g to %g", v, k->min, k->max);
                return -EINVAL;
        }
        *(double *)p = d;
        return 0;
}

/* Set one key from its text form. append: a repeated --listen adds rather than replaces. */
int config_read_key(struct umd_config *c, const struct key *k, const char *v, bool append,
                    char *err, size_t errlen)
{
        void *p = field(c, k);
        uint64_t u;
        int r;

        switch (k->type) {
        case K_STR: {
                char **s = p;
                char *n = v[0] ? strdup(v) : NULL;
                if (v[0] && !n)
                        return -ENOMEM;
                free(*s);
                *s = n;
                return 0;
        }
        case K_LISTEN: {
                if (!append)
                        config_read_listen_clear(c);
                _cleanup_free_ char *copy = strdup(v);
                if (!copy)
                        return -ENOMEM;
                char *save = NULL;
                for (char *w = strtok_r(copy, " \t,", &save); w;
                     w = strtok_r(NULL, " \t,", &save)) {
                        r = listen_add(c, w, err, errlen);
                        if (r < 0)
                                return r;
                }
                return 0;
        }
        case K_UINT:
                r = parse_uint64(v, (uint64_t)k->min, (uint64_t)k->max, &u);
                if (r < 0) {
                        snprintf(err, errlen, "'%s' is not a whole number from %.0f to %.0f", v,
                                 k->min, k->max);
                        return r;
                }
                *(unsigned *)p = (unsigned)u;
                return 0;
        case K_MODE:
                return set_mode(p, v, err, errlen);
        case K_SIZE:
                return set_size(k, p, v, err, errlen);
        case K_BOOL:
                if (!strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "1") || !strcmp(v, "on"))
                        *(bool *)p = true;
                else if (!strcmp(v, "false") || !strcmp(v, "no") || !strcmp(v, "0") ||
                         !strcmp(v, "off"))
                        *(bool *)p = false;
                else {
                        snprintf(err, errlen, "'%s' is not true or false", v);
                        return -EINVAL;
                }
                return 0;
        case K_DOUBLE:
                return set_double(k, p, v, err, errlen);
        case K_BUSY:
                r = busy_policy_from_string(v);
                if (r < 0) {
                        snprintf(err, errlen, "'%s' is not one of wait, run, fail", v);
                        return -EINVAL;
                }
                *(unsigned *)p = (unsigned)r;
                return 0;
        case K_LOGLEVEL:
                r = log_level_from_string(v);
                if (r < 0) {
                        snprintf(err, errlen,
                                 "'%s' is not one of error, warning, notice, info, debug", v);
                        return -EINVAL;
                }
                *(int *)p = r;
                return 0;
        }
        return -EINVAL;
}

struct ini_state {
        struct umd_config *c;
        char err[CONFIG_LINE_ERR_MAX];
};

static int config_ini_line(void *user, const char *section, const char *name, const char *value)
{
        struct ini_state *st = user;
        char err[CONFIG_ERR_MAX];

        if (strcmp(section, "umd") != 0) {
                snprintf(st->err, sizeof(st->err), "unknown section [%s] (only [umd])", section);
                return 0;
        }
        const struct key *k = key_find(name);
        if (!k) {
                snprintf(st->err, sizeof(st->err), "unknown key '%s'", name);
                return 0;
        }
        if (config_read_key(st->c, k, value, false, err, sizeof(err)) < 0) {
                snprintf(st->err, sizeof(st->err), "%s: %s", name, err);
                return 0;
        }
        return 1;
}

int config_load_file(struct umd_config *c, const char *path)
{
        struct ini_state st = {.c = c};
        FILE *f = NULL;
        /* A FIFO at the path is refused, and does not block start-up. */
        int r = fopen_regular(path, &f);

        if (r == -EISDIR || r == -EBADFD) {
                fprintf(stderr, "umd: config file %s: not a regular file\n", path);
                return -EINVAL;
        }
        if (r < 0) {
                fprintf(stderr, "umd: cannot read config file %s: %s\n", path, strerror(-r));
                return r;
        }
        int line = ini_parse_file(f, config_ini_line, &st);
        fclose(f);
        if (line != 0) {
                fprintf(stderr, "umd: %s:%d: %s\n", path, line,
                        st.err[0] ? st.err : "not a 'key = value' line");
                return -EINVAL;
        }
        return 0;
}
