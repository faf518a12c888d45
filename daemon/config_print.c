/* What umd says of its configuration: --help (every key as a flag), the sample config file
 * (etc/umd.conf and the man page umd.conf(5) are made from it) and --print-config (the effective
 * values, the keys at their default commented out). */
#include <stdio.h>
#include <string.h>

#include "config_internal.h"
#include "log.h"
#include "size.h"
#include "umd-build.h"
#include "util.h"

static const char *type_hint(const struct key *k)
{
        switch (k->type) {
        case K_UINT:
                return "N";
        case K_SIZE:
                return "SIZE";
        case K_BOOL:
                return "BOOL";
        case K_DOUBLE:
                return "FRACTION";
        case K_MODE:
                return "MODE";
        case K_LISTEN:
                return "ADDR:PORT";
        case K_LOGLEVEL:
                return "LEVEL";
        case K_BUSY:
                return "POLICY";
        default:
                return "VALUE";
        }
}

void config_print_flag_name(const struct key *k, char *buf, size_t len)
{
        snprintf(buf, len, "%s", k->name);
        for (char *p = buf; *p; p++)
                if (*p == '_')
                        *p = '-';
}

void config_print_help(FILE *f, const char *prog)
{
        char flag[CONFIG_FLAG_MAX];

        fprintf(
            f,
            "Usage: %s [OPTIONS]\n\n"
            "umd serves GPU data-movement benchmarks (Unified Memory against explicit copies)\n"
            "over HTTP/JSON. Every option is also a key of the config file (section [umd],\n"
            "dashes as underscores); options given here win.\n\n"
            "  -c, --config FILE      config file (default " UMD_DEFAULT_CONFIG_FILE
            ", if present)\n"
            "      --check-config     parse the configuration, print nothing, exit 0 if valid\n"
            "      --print-config     print the effective configuration (defaults, file, flags)\n"
            "                         as a config file, and exit\n"
            "      --export DIR       write every stored job to DIR/<id>.json and exit\n"
            "      --print-openapi    print the OpenAPI document umd serves (with each\n"
            "                         benchmark's params schema from the catalog), and exit\n"
            "      --worker PATH      the same as --worker-path\n"
            "  -h, --help             this text\n"
            "  -V, --version          version and build\n\n",
            prog);
        for (size_t i = 0; i < config_n_keys; i++) {
                config_print_flag_name(&config_keys[i], flag, sizeof(flag));
                fprintf(f, "      --%s %s\n          %s (default: %s)\n", flag,
                        type_hint(&config_keys[i]), config_keys[i].help,
                        config_keys[i].def[0] ? config_keys[i].def : "none");
        }
}

static void print_wrapped(FILE *f, const char *text)
{
        const char *p = text;
        while (*p) {
                size_t n = strlen(p);
                if (n > 94) {
                        n = 94;
                        while (n > 0 && p[n] != ' ')
                                n--;
                        if (n == 0)
                                n = 94;
                }
                fprintf(f, "# %.*s\n", (int)n, p);
                p += n;
                while (*p == ' ')
                        p++;
        }
}

void config_print_sample(FILE *f)
{
        fprintf(f, "# /etc/umd/umd.conf: configuration of umd(8); see umd.conf(5).\n"
                   "# Every key is shown with its default, commented out. Each is also a\n"
                   "# command-line flag (--key-name); flags win over this file.\n\n"
                   "[umd]\n");
        for (size_t i = 0; i < config_n_keys; i++) {
                fputc('\n', f);
                print_wrapped(f, config_keys[i].help);
                fprintf(f, "#%s = %s\n", config_keys[i].name, config_keys[i].def);
        }
}

/* One key's value as the config file would spell it. */
static void key_format(const struct umd_config *c, const struct key *k, char *buf, size_t len)
{
        const void *p = (const char *)c + k->off;
        size_t used = 0;

        buf[0] = 0;
        switch (k->type) {
        case K_STR:
                snprintf(buf, len, "%s", *(char *const *)p ? *(char *const *)p : "");
                break;
        case K_LISTEN:
                for (size_t i = 0; i < c->n_listen && used < len; i++)
                        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? " " : "",
                                                 c->listen[i]);
                break;
        case K_UINT:
                snprintf(buf, len, "%u", *(const unsigned *)p);
                break;
        case K_MODE:
                snprintf(buf, len, "%04o", *(const unsigned *)p);
                break;
        case K_SIZE:
                size_format(*(const uint64_t *)p, buf, len);
                break;
        case K_BOOL:
                snprintf(buf, len, "%s", *(const bool *)p ? "true" : "false");
                break;
        case K_DOUBLE:
                snprintf(buf, len, "%g", *(const double *)p);
                break;
        case K_LOGLEVEL:
                snprintf(buf, len, "%s", log_level_to_string(*(const int *)p));
                break;
        case K_BUSY:
                snprintf(buf, len, "%s", busy_policy_to_string(*(const unsigned *)p));
                break;
        }
}

void config_print_effective(FILE *f, const struct umd_config *c)
{
        struct umd_config def;
        char now[CONFIG_VALUE_MAX], was[CONFIG_VALUE_MAX];

        /* A key still at its default is printed commented out with the documented default, so
         * with no file and no flags this is exactly the sample (etc/umd.conf). */
        config_init(&def);
        fprintf(f, "# /etc/umd/umd.conf: configuration of umd(8); see umd.conf(5).\n"
                   "# Every key is shown with its default, commented out. Each is also a\n"
                   "# command-line flag (--key-name); flags win over this file.\n");
        size_t changed = 0;
        for (size_t i = 0; i < config_n_keys; i++) {
                key_format(c, &config_keys[i], now, sizeof(now));
                key_format(&def, &config_keys[i], was, sizeof(was));
                changed += strcmp(now, was) != 0;
        }
        if (changed)
                fprintf(f,
                        "# Effective configuration: defaults, %s%sthen flags; keys that differ\n"
                        "# from their default are not commented out.\n",
                        c->config_file ? c->config_file : "", c->config_file ? ", " : "");
        fprintf(f, "\n[umd]\n");
        for (size_t i = 0; i < config_n_keys; i++) {
                key_format(c, &config_keys[i], now, sizeof(now));
                key_format(&def, &config_keys[i], was, sizeof(was));
                fputc('\n', f);
                print_wrapped(f, config_keys[i].help);
                if (strcmp(now, was) == 0)
                        fprintf(f, "#%s = %s\n", config_keys[i].name, config_keys[i].def);
                else
                        fprintf(f, "%s = %s\n", config_keys[i].name, now);
        }
        config_free(&def);
}
