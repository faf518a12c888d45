/* Logging to stderr, one line per event. When stderr is the journal (JOURNAL_STREAM matches
 * fd 2) each line carries a "<N>" syslog priority prefix that journald turns into PRIORITY=. */
#pragma once

#include <stdarg.h>
#include <syslog.h>

void log_set_level(int level); /* LOG_ERR .. LOG_DEBUG */
int log_get_level(void);
int log_level_from_string(const char *s); /* "error","warning","notice","info","debug" or -EINVAL */
const char *log_level_to_string(int level); /* the name log_level_from_string() reads back */
void log_set_ident(const char *ident);      /* prefix used when not on the journal, e.g. "umd" */

void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Logs and returns the negative errno given (r may be -errno or errno). "%m" works. */
int log_errno(int level, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define log_debug(...)            log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...)             log_msg(LOG_INFO, __VA_ARGS__)
#define log_notice(...)           log_msg(LOG_NOTICE, __VA_ARGS__)
#define log_warning(...)          log_msg(LOG_WARNING, __VA_ARGS__)
#define log_error(...)            log_msg(LOG_ERR, __VA_ARGS__)
#define log_error_errno(r, ...)   log_errno(LOG_ERR, (r), __VA_ARGS__)
#define log_warning_errno(r, ...) log_errno(LOG_WARNING, (r), __VA_ARGS__)
