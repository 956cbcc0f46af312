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

void log_msg(enum log_level level, const char *fmt, ...)
{
	char line[2048];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int n;

	if ((int)level < log_current_level())
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof(line), "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s ",
		     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		     ts.tv_nsec / 1000000, log_names[level]);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	n = (int)strlen(line);
	line[n] = '\n';
	/* One write per line, so lines of concurrent threads never interleave. */
	fwrite(line, 1, (size_t)n + 1, stderr);
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
