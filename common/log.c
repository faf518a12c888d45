/* Logging: one line per event on stderr, written with a single write(2) so lines from several
 * threads never interleave. Owns the level, the ident and the journal detection; never
 * allocates, so it can be used on out-of-memory paths. */
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* Longer messages are truncated: a log line is not a place for a job's whole result. */
#define LOG_LINE_MAX 4096

static atomic_int log_level = LOG_INFO;
static _Atomic(const char *) log_ident = "umd";
static pthread_once_t journal_once = PTHREAD_ONCE_INIT;
static bool on_journal;

static void journal_detect(void)
{
        /* systemd sets JOURNAL_STREAM to "dev:ino" of the stream it connected; only trust it if
         * fd 2 is still that stream (a child may have inherited the variable but not the fd). */
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;

        if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
                return;
        if (fstat(STDERR_FILENO, &st) < 0)
                return;
        on_journal = (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void log_set_level(int level)
{
        if (level < LOG_EMERG)
                level = LOG_EMERG;
        if (level > LOG_DEBUG)
                level = LOG_DEBUG;
        atomic_store(&log_level, level);
}

int log_get_level(void)
{
        return atomic_load(&log_level);
}

static const struct {
        const char *name;
        int level;
} level_names[] = {
    {"error", LOG_ERR}, {"warning", LOG_WARNING}, {"notice", LOG_NOTICE},
    {"info", LOG_INFO}, {"debug", LOG_DEBUG},
};

int log_level_from_string(const char *s)
{
        if (!s)
                return -EINVAL;
        for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
                if (strcasecmp(s, level_names[i].name) == 0)
                        return level_names[i].level;
        return -EINVAL;
}

const char *log_level_to_string(int level)
{
        for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
                if (level_names[i].level == level)
                        return level_names[i].name;
        return level < LOG_ERR ? "error" : "debug";
}

void log_set_ident(const char *ident)
{
        /* The caller passes a string that lives for the program (argv[0] basename, a literal). */
        atomic_store(&log_ident, ident ? ident : "umd");
}

static const char *level_word(int level)
{
        switch (level) {
        case LOG_EMERG:
        case LOG_ALERT:
        case LOG_CRIT:
                return "critical";
        case LOG_ERR:
                return "error";
        case LOG_WARNING:
                return "warning";
        case LOG_NOTICE:
                return "notice";
        case LOG_INFO:
                return "info";
        default:
                return "debug";
        }
}

static void log_write(int level, int saved_errno, const char *fmt, va_list ap)
{
        char line[LOG_LINE_MAX];
        size_t n, prefix;
        int r;

        pthread_once(&journal_once, journal_detect);
        if (on_journal)
                r = snprintf(line, sizeof(line), "<%d>", level);
        else
                r = snprintf(line, sizeof(line), "%s: %s: ", atomic_load(&log_ident),
                             level_word(level));
        if (r < 0)
                return;
        prefix = (size_t)r < sizeof(line) ? (size_t)r : sizeof(line) - 1;

        errno = saved_errno; /* so that "%m" names the caller's error */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        r = vsnprintf(line + prefix, sizeof(line) - prefix - 1, fmt, ap);
#pragma GCC diagnostic pop
        if (r < 0)
                return;
        n = prefix + (size_t)r;
        if (n > sizeof(line) - 2)
                n = sizeof(line) - 2;

        /* One event, one line: a newline inside a message would forge a second event. */
        for (size_t i = prefix; i < n; i++)
                if (line[i] == '\n' || line[i] == '\r')
                        line[i] = ' ';
        line[n++] = '\n';

        for (size_t off = 0; off < n;) {
                ssize_t w = write(STDERR_FILENO, line + off, n - off);
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        return;
                }
                off += (size_t)w;
        }
}

void log_msg(int level, const char *fmt, ...)
{
        int saved_errno = errno;
        va_list ap;

        if (level > atomic_load(&log_level))
                return;
        va_start(ap, fmt);
        log_write(level, saved_errno, fmt, ap);
        va_end(ap);
        errno = saved_errno;
}

int log_errno(int level, int r, const char *fmt, ...)
{
        int e = r < 0 ? -r : r;
        va_list ap;

        if (level <= atomic_load(&log_level)) {
                va_start(ap, fmt);
                log_write(level, e, fmt, ap);
                va_end(ap);
        }
        errno = e;
        return -e;
}
