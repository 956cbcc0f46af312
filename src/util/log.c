/*
 * key=value logging to stderr. The level comes from log_set_level() or
 * the CSID_LOG_LEVEL environment variable, read once on first use.
 */
#include "util/log.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static atomic_int log_level = -1;

static const char *const log_names[] = {"debug", "info", "warn", "error"};

int log_level_parse(const char *s)
{
	for (int i = 0; i < 4; i++)
		if (s && strcmp(s, log_names[i]) == 0)
			return i;
	return -1;
}

void log_set_level(enum log_level level)
{
	atomic_store(&log_level, (int)level);
}

static int log_current_level(void)
{
	int l = atomic_load(&log_level);

	if (l < 0) {
		l = log_level_parse(getenv("CSID_LOG_LEVEL"));
		if (l < 0)
			l = LOG_INFO;
		atomic_store(&log_level, l);
	}
	return l;
}

/*
 * This thread's last second as "ts=YYYY-MM-DDTHH:MM:SS." (log_prefix):
 * formatted once a second instead of on every line (a snprintf of the
 * whole date was half of what a line cost).
 */
static _Thread_local time_t log_sec = -1;
static _Thread_local char log_sec_text[40];
static _Thread_local size_t log_sec_len;

/* Writes "ts=<UTC time to the millisecond>Z level=<level> " to line; returns its length. */
static size_t log_prefix(char *line, enum log_level level)
{
	const char *name = log_names[level];
	size_t n = strlen(name);
	struct timespec ts;
	long ms;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (ts.tv_sec != log_sec) {
		struct tm tm;

		gmtime_r(&ts.tv_sec, &tm);
		log_sec_len = (size_t)snprintf(
		    log_sec_text, sizeof(log_sec_text), "ts=%04d-%02d-%02dT%02d:%02d:%02d.",
		    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
		log_sec = ts.tv_sec;
	}
	ms = ts.tv_nsec / 1000000;
	memcpy(line, log_sec_text, log_sec_len);
	line += log_sec_len;
	*line++ = (char)('0' + ms / 100);
	*line++ = (char)('0' + ms / 10 % 10);
	*line++ = (char)('0' + ms % 10);
	memcpy(line, "Z level=", 8);
	memcpy(line + 8, name, n);
	line[8 + n] = ' ';
	return log_sec_len + 3 + 8 + n + 1;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	char line[2048];
	va_list ap;
	size_t n;

	if (!log_enabled(level))
		return;
	n = log_prefix(line, level);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	va_end(ap);
	n += strlen(line + n);
	line[n] = '\n';
	/* One write per line, so lines of concurrent threads never interleave. */
	fwrite(line, 1, n + 1, stderr);
}

int log_enabled(enum log_level level)
{
	return (int)level >= log_current_level();
}

void log_parts(enum log_level level, const char *const *parts, unsigned n)
{
	char line[2048];
	size_t at, len;

	if (!log_enabled(level))
		return;
	at = log_prefix(line, level);
	/* Cut, as log_msg's line, to what the buffer holds before its newline. */
	for (unsigned i = 0; i < n && at < sizeof(line) - 2; i++) {
		len = strlen(parts[i]);
		if (len > sizeof(line) - 2 - at)
			len = sizeof(line) - 2 - at;
		memcpy(line + at, parts[i], len);
		at += len;
	}
	line[at] = '\n';
	fwrite(line, 1, at + 1, stderr);
}

const char *log_q(char *buf, unsigned len, const char *s)
{
	unsigned o = 0;
	bool plain = *s != '\0';

	for (const char *p = s; *p && plain; p++)
		if (*p == ' ' || *p == '"' || *p == '=' || (unsigned char)*p < 0x20)
			plain = false;
	if (plain || len < 4)
		return plain ? s : "\"\"";
	buf[o++] = '"';
	for (const char *p = s; *p && o + 5 < len; p++) {
		unsigned char c = (unsigned char)*p;

		if (c == '"' || c == '\\') {
			buf[o++] = '\\';
			buf[o++] = (char)c;
		} else if (c < 0x20) {
			o += (unsigned)snprintf(buf + o, len - o, "\\x%02x", c);
		} else {
			buf[o++] = (char)c;
		}
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return buf;
}
