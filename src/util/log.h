/*
 * Logging: one key=value line per event on stderr, for example
 *   ts=2026-11-22T02:05:08.123Z level=info msg="plugin healthy" plugin=hostpath
 * The caller's format supplies everything after level=; use log_q() to
 * quote values that may hold spaces. Thread-safe. Never log a secret.
 */
#ifndef CSID_UTIL_LOG_H
#define CSID_UTIL_LOG_H

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Sets the lowest level printed (default LOG_INFO, or $CSID_LOG_LEVEL). */
void log_set_level(enum log_level level);
/* Parses "debug|info|warn|error"; returns -1 when unknown. */
int log_level_parse(const char *s);
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * The same for a line written often (a request's): its message is the
 * concatenation of parts[0..n), with no format to read. Values still go
 * through log_q.
 */
void log_parts(enum log_level level, const char *const *parts, unsigned n);
/* Whether a line at level would be written (to skip preparing one that would not). */
int log_enabled(enum log_level level);

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

/*
 * Quotes s for a value: returns s itself when it has no space, quote,
 * '=' or control character, else a quoted, escaped copy in buf.
 */
const char *log_q(char *buf, unsigned len, const char *s);

#endif
