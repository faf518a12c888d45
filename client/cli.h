/* umdctl's command line: the commands, their options, durations and key=value pairs. Pure
 * parsing, no I/O beyond the usage message, so the unit tests can drive it. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes, documented in umdctl(1). */
enum {
        UMDCTL_OK = 0,          /* done; job succeeded; verdict pass */
        UMDCTL_FAILED = 1,      /* the job failed, was cancelled or timed out; verdict fail/warn */
        UMDCTL_USAGE = 2,       /* bad command line or token file */
        UMDCTL_UNREACHABLE = 3, /* umd unreachable, refused the request, or answered oddly */
        UMDCTL_UNKNOWN = 4,     /* no final answer within --timeout; verdict unknown */
};

enum umdctl_command {
        CMD_NONE,
        CMD_SUBMIT,
        CMD_SHOW,
        CMD_LS,
        CMD_CANCEL,
        CMD_DEVICES,
        CMD_HEALTH,
        CMD_PAUSE,
        CMD_RESUME,
};

#define UMDCTL_MAX_KV 64

struct umdctl_args {
        enum umdctl_command command;
        const char *target; /* BENCHMARK, ID or DEVICE */

        /* connection */
        const char *url; /* never NULL after parsing: flag, $UMD_URL or the default */
        const char *unix_socket;
        const char *token_file;

        /* submit and health */
        json_t *devices; /* the "device"/"devices" value to send, or NULL */
        bool devices_plural;
        json_t *params; /* object, or NULL */
        json_t *labels; /* object, or NULL */
        const char *priority;
        bool wait;
        uint64_t timeout_ms; /* 0: the command's default */
        bool timeout_set;

        /* health */
        bool cached;
        bool extended; /* the extended tier (health_extended_budget_s) instead of quick */
        uint64_t max_age_ms;
        bool allow_warn;

        /* ls */
        const char *status, *benchmark, *device, *label, *since, *until, *cursor;
        unsigned limit;

        /* pause */
        const char *reason;

        bool json;
        bool quiet;
};

/* "30s", "5m", "1h30m", "500ms", "2d" or a plain number of seconds, into milliseconds.
 * 0 or -EINVAL (also for overflow and an empty string). */
int parse_duration_ms(const char *s, uint64_t *ret_ms);

/* "key=value" into an object member. The value becomes a JSON integer, number, true/false or
 * null when it reads as one, else a string ("size=1GiB" stays a string). 0 or -EINVAL
 * (no '=', empty key). typed false keeps every value a string (labels). */
int parse_kv_into(json_t *obj, const char *kv, bool typed);

/* "0", "GPU-…", "0,1,GPU-…" or "all" into the value of "device"/"devices": an integer or
 * string for one device (plural false), an array or "all" for several. 0 or -EINVAL. */
int parse_devices(const char *s, bool plural, json_t **ret);

/* Parse argv into a (zeroed by the caller). Returns 0, 1 when --help/--version printed
 * (exit 0), or -EINVAL after printing one line to stderr (exit UMDCTL_USAGE). env_url is
 * $UMD_URL and env_token_file $UMD_TOKEN_FILE (either may be NULL). */
int umdctl_parse_args(struct umdctl_args *a, int argc, char **argv, const char *env_url,
                      const char *env_token_file);
void umdctl_args_free(struct umdctl_args *a);

void umdctl_usage(FILE *f);
