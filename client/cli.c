/* umdctl's command line (see cli.h): which command, which options it takes, and the small
 * grammars (durations, key=value, device lists). Never talks to umd. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "umd-build.h"
#include "umd-vcs.h"

#define DEFAULT_URL "http://127.0.0.1:8470"
/* A --param or --label key: well past what umd takes (max_label_key_len, 64 by default), so umd
 * is the one that says a key is too long. */
#define KV_KEY_MAX 256
/* One device of --device or --devices: an index, or a UUID ("GPU-" and 36, or a MIG one). */
#define DEVICE_ARG_MAX 128

static const struct {
        const char *name;
        enum umdctl_command cmd;
} commands[] = {
    {"submit", CMD_SUBMIT}, {"show", CMD_SHOW},     {"ls", CMD_LS},
    {"list", CMD_LS},       {"cancel", CMD_CANCEL}, {"devices", CMD_DEVICES},
    {"health", CMD_HEALTH}, {"pause", CMD_PAUSE},   {"resume", CMD_RESUME},
};

/* Which commands an option belongs to; 0 means every command. */
#define C(x) (1u << (x))
enum opt_id {
        O_URL,
        O_UNIX,
        O_TOKEN,
        O_DEVICE,
        O_DEVICES,
        O_PARAM,
        O_LABEL,
        O_PRIORITY,
        O_WAIT,
        O_TIMEOUT,
        O_CACHED,
        O_MAX_AGE,
        O_ALLOW_WARN,
        O_STATUS,
        O_BENCHMARK,
        O_SINCE,
        O_UNTIL,
        O_LIMIT,
        O_CURSOR,
        O_REASON,
        O_JSON,
        O_QUIET,
        O_EXTENDED,
};

static const struct opt {
        const char *name;
        enum opt_id id;
        bool value;
        unsigned cmds;
} opts[] = {
    {"url", O_URL, true, 0},
    {"unix-socket", O_UNIX, true, 0},
    {"token-file", O_TOKEN, true, 0},
    {"device", O_DEVICE, true, C(CMD_SUBMIT) | C(CMD_HEALTH) | C(CMD_LS)},
    {"devices", O_DEVICES, true, C(CMD_SUBMIT) | C(CMD_HEALTH)},
    {"param", O_PARAM, true, C(CMD_SUBMIT)},
    {"label", O_LABEL, true, C(CMD_SUBMIT) | C(CMD_LS)},
    {"priority", O_PRIORITY, true, C(CMD_SUBMIT)},
    {"wait", O_WAIT, false, C(CMD_SUBMIT)},
    {"timeout", O_TIMEOUT, true, C(CMD_SUBMIT) | C(CMD_HEALTH)},
    {"cached", O_CACHED, false, C(CMD_HEALTH)},
    {"extended", O_EXTENDED, false, C(CMD_HEALTH)},
    {"max-age", O_MAX_AGE, true, C(CMD_HEALTH)},
    {"allow-warn", O_ALLOW_WARN, false, C(CMD_HEALTH)},
    {"status", O_STATUS, true, C(CMD_LS)},
    {"benchmark", O_BENCHMARK, true, C(CMD_LS)},
    {"since", O_SINCE, true, C(CMD_LS)},
    {"until", O_UNTIL, true, C(CMD_LS)},
    {"limit", O_LIMIT, true, C(CMD_LS)},
    {"cursor", O_CURSOR, true, C(CMD_LS)},
    {"reason", O_REASON, true, C(CMD_PAUSE)},
    {"json", O_JSON, false,
     C(CMD_SUBMIT) | C(CMD_SHOW) | C(CMD_LS) | C(CMD_CANCEL) | C(CMD_DEVICES) | C(CMD_HEALTH) |
         C(CMD_PAUSE) | C(CMD_RESUME)},
    {"quiet", O_QUIET, false, C(CMD_HEALTH) | C(CMD_SUBMIT)},
};

void umdctl_usage(FILE *f)
{
        fputs("Usage: umdctl [--url URL | --unix-socket PATH] [--token-file FILE] COMMAND ...\n"
              "\n"
              "  submit BENCHMARK [--device N|UUID | --devices LIST|all] [--param K=V]...\n"
              "                   [--label K=V]... [--priority high|normal] [--wait]\n"
              "                   [--timeout DUR] [--json]\n"
              "  show ID [--json]\n"
              "  ls [--status S] [--benchmark B] [--device D] [--label K=V] [--since T]\n"
              "     [--until T] [--limit N] [--cursor ID] [--json]\n"
              "  cancel ID\n"
              "  devices [--json]\n"
              "  health [--devices LIST|all] [--extended] [--timeout DUR] [--allow-warn]\n"
              "         [--quiet]\n"
              "  health --cached [--max-age DUR] [--timeout DUR] [--allow-warn] [--quiet]\n"
              "  pause DEVICE [--reason TEXT]\n"
              "  resume DEVICE\n"
              "\n"
              "umd is reached at --url, else $UMD_URL, else " DEFAULT_URL ";\n"
              "the bearer token is read from --token-file, else $UMD_TOKEN_FILE.\n"
              "Durations: 30s, 5m, 1h30m, 500ms, or plain seconds.\n"
              "Exit: 0 success, 1 job failed or verdict fail/warn, 2 usage, 3 umd unreachable\n"
              "or an error answer, 4 no final answer in time or verdict unknown. See umdctl(1).\n",
              f);
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fputs("umdctl: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputs(" (see umdctl --help)\n", stderr);
        va_end(ap);
        return -EINVAL;
}

int parse_duration_ms(const char *s, uint64_t *ret_ms)
{
        static const struct {
                const char *unit;
                uint64_t ms;
        } units[] = {{"ms", 1},      {"s", 1000},     {"m", 60000},
                     {"h", 3600000}, {"d", 86400000}, {"", 1000}};
        uint64_t total = 0;
        const char *p = s;

        if (!s || !*s)
                return -EINVAL;
        while (*p) {
                char *end;
                size_t i;
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                errno = 0;
                double v = strtod(p, &end);
                if (errno || end == p)
                        return -EINVAL;
                bool end_is_all = p == s && *end == 0; /* "30" alone: seconds */
                p = end;
                /* longest unit first: "ms" before "m" */
                for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
                        size_t n = strlen(units[i].unit);
                        if (strncmp(p, units[i].unit, n) == 0 && (n > 0 || (*p == 0 && end_is_all)))
                                break;
                }
                if (i == sizeof(units) / sizeof(units[0]))
                        return -EINVAL;
                double ms = v * (double)units[i].ms;
                if (ms > (double)(UINT64_MAX / 4) - (double)total)
                        return -EINVAL;
                total += (uint64_t)(ms + 0.5);
                p += strlen(units[i].unit);
        }
        *ret_ms = total;
        return 0;
}

static json_t *typed_value(const char *v)
{
        char *end;

        if (!strcmp(v, "true"))
                return json_true();
        if (!strcmp(v, "false"))
                return json_false();
        if (!strcmp(v, "null"))
                return json_null();
        if (*v && (*v == '-' || (*v >= '0' && *v <= '9'))) {
                errno = 0;
                long long i = strtoll(v, &end, 10);
                if (!errno && *end == 0)
                        return json_integer(i);
                errno = 0;
                double d = strtod(v, &end);
                if (!errno && *end == 0)
                        return json_real(d);
        }
        return json_string(v);
}

int parse_kv_into(json_t *obj, const char *kv, bool typed)
{
        const char *eq = strchr(kv, '=');
        char key[KV_KEY_MAX];

        if (!eq || eq == kv || (size_t)(eq - kv) >= sizeof(key))
                return -EINVAL;
        memcpy(key, kv, eq - kv);
        key[eq - kv] = 0;
        json_t *v = typed ? typed_value(eq + 1) : json_string(eq + 1);
        if (!v || json_object_set_new(obj, key, v) < 0)
                return -EINVAL;
        return 0;
}

static json_t *one_device(const char *s, size_t n)
{
        char buf[DEVICE_ARG_MAX], *end;

        if (n == 0 || n >= sizeof(buf))
                return NULL;
        memcpy(buf, s, n);
        buf[n] = 0;
        if (buf[0] >= '0' && buf[0] <= '9') {
                errno = 0;
                unsigned long long i = strtoull(buf, &end, 10);
                if (errno || *end || i > INT_MAX)
                        return NULL;
                return json_integer((json_int_t)i);
        }
        return json_string(buf);
}

int parse_devices(const char *s, bool plural, json_t **ret)
{
        if (!s || !*s)
                return -EINVAL;
        if (!strcmp(s, "all")) {
                if (!plural)
                        return -EINVAL;
                *ret = json_string("all");
                return 0;
        }
        if (!plural) {
                json_t *d = one_device(s, strlen(s));
                if (!d)
                        return -EINVAL;
                *ret = d;
                return 0;
        }
        json_t *arr = json_array();
        for (const char *p = s;;) {
                size_t n = strcspn(p, ",");
                json_t *d = one_device(p, n);
                if (!d) {
                        json_decref(arr);
                        return -EINVAL;
                }
                json_array_append_new(arr, d);
                if (!p[n])
                        break;
                p += n + 1;
        }
        *ret = arr;
        return 0;
}

static const char *command_name(enum umdctl_command c)
{
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                if (commands[i].cmd == c)
                        return commands[i].name;
        return "?";
}

/* --device or --devices: ls's filter, or the devices a submit runs on (given once). */
static int set_devices(struct umdctl_args *a, const struct opt *o, const char *v)
{
        if (a->command == CMD_LS) {
                a->device = v;
                return 0;
        }
        if (a->devices)
                return usage_error("give --device or --devices once");
        a->devices_plural = o->id == O_DEVICES;
        if (parse_devices(v, a->devices_plural, &a->devices) < 0)
                return usage_error("--%s: '%s' is not %s", o->name, v,
                                   a->devices_plural
                                       ? "a comma-separated list of indexes and UUIDs, "
                                         "or all"
                                       : "a device index or UUID");
        return 0;
}

/* --label: ls's filter (one), or a submit's labels (any number). */
static int set_label(struct umdctl_args *a, const char *v)
{
        if (a->command == CMD_LS) {
                if (!strchr(v, '=') && !strchr(v, ':'))
                        return usage_error("--label: '%s' is not KEY=VALUE", v);
                a->label = v;
                return 0;
        }
        if (!a->labels)
                a->labels = json_object();
        if (parse_kv_into(a->labels, v, false) < 0)
                return usage_error("--label: '%s' is not KEY=VALUE", v);
        return 0;
}

static int set_opt(struct umdctl_args *a, const struct opt *o, const char *v)
{
        uint64_t u;

        switch (o->id) {
        case O_URL:
                a->url = v;
                return 0;
        case O_UNIX:
                a->unix_socket = v;
                return 0;
        case O_TOKEN:
                a->token_file = v;
                return 0;
        case O_DEVICE:
        case O_DEVICES:
                return set_devices(a, o, v);
        case O_PARAM:
                if (!a->params)
                        a->params = json_object();
                if (parse_kv_into(a->params, v, true) < 0)
                        return usage_error("--param: '%s' is not KEY=VALUE", v);
                return 0;
        case O_LABEL:
                return set_label(a, v);
        case O_PRIORITY:
                a->priority = v;
                return 0;
        case O_WAIT:
                a->wait = true;
                return 0;
        case O_TIMEOUT:
                if (parse_duration_ms(v, &a->timeout_ms) < 0 || a->timeout_ms == 0)
                        return usage_error("--timeout: '%s' is not a duration like 30s or 5m", v);
                a->timeout_set = true;
                return 0;
        case O_CACHED:
                a->cached = true;
                return 0;
        case O_EXTENDED:
                a->extended = true;
                return 0;
        case O_MAX_AGE:
                if (parse_duration_ms(v, &a->max_age_ms) < 0 || a->max_age_ms == 0)
                        return usage_error("--max-age: '%s' is not a duration like 1h", v);
                return 0;
        case O_ALLOW_WARN:
                a->allow_warn = true;
                return 0;
        case O_STATUS:
                a->status = v;
                return 0;
        case O_BENCHMARK:
                a->benchmark = v;
                return 0;
        case O_SINCE:
                a->since = v;
                return 0;
        case O_UNTIL:
                a->until = v;
                return 0;
        case O_LIMIT: {
                char *end;
                errno = 0;
                u = strtoull(v, &end, 10);
                if (errno || end == v || *end || u == 0 || u > 100000)
                        return usage_error("--limit: '%s' is not a number from 1 to 100000", v);
                a->limit = (unsigned)u;
                return 0;
        }
        case O_CURSOR:
                a->cursor = v;
                return 0;
        case O_REASON:
                a->reason = v;
                return 0;
        case O_JSON:
                a->json = true;
                return 0;
        case O_QUIET:
                a->quiet = true;
                return 0;
        }
        return -EINVAL;
}

/* getopt_long's table, generated from opts[]: each option's val is OPT_BASE + its index there,
 * so a missing value (':', with optopt) still says which option. */
#define OPT_BASE 0x100
/* opts, --help, --version, the terminator */
#define OPTIONS_MAX (sizeof(opts) / sizeof(opts[0]) + 3)
/* "-": operands come back in order (as 1), so the command is found where it stands; ":": a
 * missing value is told apart from an unknown option. */
#define SHORT_OPTIONS "-:hV"

static void options_build(struct option *lopts)
{
        size_t n = 0;

        for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
                lopts[n++] =
                    (struct option){opts[i].name, opts[i].value ? required_argument : no_argument,
                                    NULL, OPT_BASE + (int)i};
        lopts[n++] = (struct option){"help", no_argument, NULL, 'h'};
        lopts[n++] = (struct option){"version", no_argument, NULL, 'V'};
        lopts[n] = (struct option){0};
}

/* opts[] entry that "--name" or "--name=value" names exactly, or NULL: getopt_long would also
 * take an unambiguous abbreviation (--lim), which umdctl has always refused. */
static const struct opt *opt_exact(const char *s)
{
        size_t n = strcspn(s + 2, "=");

        for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
                if (strlen(opts[i].name) == n && strncmp(opts[i].name, s + 2, n) == 0)
                        return &opts[i];
        return NULL;
}

/* An argument with one dash that is not -h or -V ("-", "-1", "-x") is an operand, as it always
 * was: a job id, a device, or an unknown command. It never reaches getopt_long, which so never
 * stops inside a group of short options (and optind = 1 restarts it cleanly). */
static bool single_dash_operand(const char *s)
{
        return s[0] == '-' && s[1] != '-' && strcmp(s, "-h") != 0 && strcmp(s, "-V") != 0;
}

/* One argument as pass 1 read it, for pass 2 to check against the command. */
struct item {
        const struct opt *opt; /* NULL: an operand (the command, or a positional argument) */
        const char *arg;       /* as typed: "--wait=1", "ls" */
        const char *value;     /* the option's value, or NULL */
        bool missing;          /* the option needs a value and none followed */
        bool unwanted;         /* the option takes no value and was given one */
};

static int find_command(struct umdctl_args *a, const char *s)
{
        if (a->command != CMD_NONE)
                return 0;
        for (size_t c = 0; c < sizeof(commands) / sizeof(commands[0]); c++)
                if (!strcmp(commands[c].name, s))
                        a->command = commands[c].cmd;
        return a->command == CMD_NONE ? usage_error("unknown command '%s'", s) : 0;
}

/* items: room for one per argument. */
/* What pass 2 leaves to check: the command's argument, and options that go together or not. */
static int check_args(struct umdctl_args *a, const char *const *positional, size_t npos)
{
        switch (a->command) {
        case CMD_SUBMIT:
        case CMD_SHOW:
        case CMD_CANCEL:
        case CMD_PAUSE:
        case CMD_RESUME:
                if (npos != 1)
                        return usage_error("'%s' needs %s", command_name(a->command),
                                           a->command == CMD_SUBMIT ? "a BENCHMARK"
                                           : a->command == CMD_PAUSE || a->command == CMD_RESUME
                                               ? "a DEVICE (index or UUID)"
                                               : "a job ID");
                a->target = positional[0];
                break;
        default:
                if (npos != 0)
                        return usage_error("'%s' takes no argument '%s'", command_name(a->command),
                                           positional[0]);
        }
        if (a->command == CMD_HEALTH && a->cached && a->devices)
                return usage_error("--cached reads every device's last verdict; drop --devices");
        if (a->command == CMD_HEALTH && a->cached && a->extended)
                return usage_error("--extended runs the extended tier; --cached reads the last "
                                   "verdicts of any tier: use one");
        if (a->command == CMD_HEALTH && a->max_age_ms && !a->cached)
                return usage_error("--max-age goes with --cached");
        if (a->command == CMD_SUBMIT && a->timeout_set && !a->wait)
                return usage_error("--timeout goes with --wait");
        return 0;
}

static int parse_args(struct umdctl_args *a, int argc, char **argv, struct item *items,
                      const char *env_url, const char *env_token_file)
{
        struct option lopts[OPTIONS_MAX];
        const char *positional[2] = {NULL, NULL};
        size_t npos = 0, n = 0;
        int r;

        options_build(lopts);

        /* Pass 1: find the command, so options can be checked against it in pass 2. Options
         * may come before or after it; "--" ends them. */
        opterr = 0;
        optind = 1;
        for (;;) {
                int at = optind, c;

                if (at < argc && single_dash_operand(argv[at])) {
                        r = find_command(a, argv[at]);
                        if (r < 0)
                                return r;
                        items[n++] = (struct item){.arg = argv[at]};
                        optind = at + 1;
                        continue;
                }
                c = getopt_long(argc, argv, SHORT_OPTIONS, lopts, NULL);
                if (c == -1) {
                        /* after "--", everything is an operand; the command came before */
                        for (int i = optind; at < argc && !strcmp(argv[at], "--") && i < argc; i++)
                                items[n++] = (struct item){.arg = argv[i]};
                        break;
                }
                const char *s = argv[at];
                const struct opt *o = c == 1 ? NULL : opt_exact(s);
                if (c == 1) {
                        r = find_command(a, s);
                        if (r < 0)
                                return r;
                        items[n++] = (struct item){.arg = s};
                } else if (c == 'h' && (s[1] != '-' || !strcmp(s, "--help"))) {
                        umdctl_usage(stdout);
                        return 1;
                } else if (c == 'V' && (s[1] != '-' || !strcmp(s, "--version"))) {
                        printf("umdctl %s (build %s)\n", UMD_VERSION, UMD_BUILD);
                        return 1;
                } else if (!o) {
                        return usage_error("unknown option '%s'", s);
                } else if (c == ':') {
                        items[n++] = (struct item){.opt = o, .arg = s, .missing = true};
                } else if (c == '?') { /* a value given to an option that takes none */
                        items[n++] = (struct item){.opt = o, .arg = s, .unwanted = true};
                } else {
                        items[n++] = (struct item){.opt = o, .arg = s, .value = optarg};
                }
        }
        if (a->command == CMD_NONE)
                return usage_error("no command given");

        /* Pass 2: options and positional arguments. */
        bool seen_command = false;
        for (size_t i = 0; i < n; i++) {
                const struct item *it = &items[i];
                const struct opt *o = it->opt;

                if (o) {
                        if (o->cmds && !(o->cmds & C(a->command)))
                                return usage_error("%s does not apply to '%s'", it->arg,
                                                   command_name(a->command));
                        if (it->missing)
                                return usage_error("--%s needs a value", o->name);
                        if (it->unwanted)
                                return usage_error("--%s takes no value", o->name);
                        r = set_opt(a, o, it->value);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (!seen_command) {
                        seen_command = true;
                        continue;
                }
                if (npos >= 1)
                        return usage_error("unexpected argument '%s'", it->arg);
                positional[npos++] = it->arg;
        }

        r = check_args(a, positional, npos);
        if (r < 0)
                return r;

        if (!a->url)
                a->url = env_url && *env_url ? env_url : DEFAULT_URL;
        if (!a->token_file && env_token_file && *env_token_file)
                a->token_file = env_token_file;
        return 0;
}

int umdctl_parse_args(struct umdctl_args *a, int argc, char **argv, const char *env_url,
                      const char *env_token_file)
{
        struct item *items = calloc(argc > 0 ? (size_t)argc : 1, sizeof(*items));
        int r;

        if (!items)
                return usage_error("out of memory");
        r = parse_args(a, argc, argv, items, env_url, env_token_file);
        free(items);
        return r;
}

void umdctl_args_free(struct umdctl_args *a)
{
        json_decref(a->devices);
        json_decref(a->params);
        json_decref(a->labels);
        a->devices = a->params = a->labels = NULL;
}
