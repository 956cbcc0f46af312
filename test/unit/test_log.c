/*
 * Unit tests of the logger (src/util/log.c): each line, written to
 * stderr (here a temporary file), is "ts=<UTC time to the millisecond>Z
 * level=<level> <message>" with the time of the call, also for lines of
 * the same second (whose date part is kept) and of the next ones, and
 * lines below the level are not written; log_parts joins its parts the
 * same way and cuts a long line as log_msg does.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"

#define TL_LINES 40

/* Seconds since the epoch (UTC) of a line's "ts=" field, with its milliseconds. */
static double tl_time(const char *line)
{
	struct tm tm;
	int ms = 0;

	memset(&tm, 0, sizeof(tm));
	assert_int_equal(sscanf(line, "ts=%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon,
				&tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms),
			 7);
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (double)timegm(&tm) + ms / 1000.0;
}

static double tl_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_log_lines(void **state)
{
	FILE *f = tmpfile();
	int saved = dup(fileno(stderr));
	double before[TL_LINES], after[TL_LINES];
	char line[512];
	regex_t re;
	int i = 0;

	(void)state;
	assert_non_null(f);
	assert_true(saved >= 0);
	assert_int_equal(
	    regcomp(&re,
		    "^ts=[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "
		    "level=(info|warn) msg=\"line [0-9]+\" n=[0-9]+\n$",
		    REG_EXTENDED | REG_NOSUB),
	    0);
	fflush(stderr);
	assert_true(dup2(fileno(f), fileno(stderr)) >= 0);
	log_set_level(LOG_INFO);
	/* Lines 50 ms apart: several in one second, and a few seconds after another. */
	for (int k = 0; k < TL_LINES; k++) {
		before[k] = tl_now();
		if (k % 2)
			log_warn("msg=\"line %d\" n=%d", k, k * 7);
		else
			log_info("msg=\"line %d\" n=%d", k, k * 7);
		log_debug("msg=\"not written\"");
		after[k] = tl_now();
		nanosleep(&(struct timespec){0, 50 * 1000000L}, NULL);
	}
	fflush(stderr);
	assert_true(dup2(saved, fileno(stderr)) >= 0);
	close(saved);

	rewind(f);
	while (fgets(line, sizeof(line), f)) {
		double t;

		assert_true(i < TL_LINES);
		assert_int_equal(regexec(&re, line, 0, NULL, 0), 0);
		assert_non_null(strstr(line, i % 2 ? "level=warn " : "level=info "));
		t = tl_time(line);
		/* Truncated to the millisecond: within [before - 1 ms, after]. */
		assert_true(t >= before[i] - 0.001 && t <= after[i] + 1e-6);
		i++;
	}
	assert_int_equal(i, TL_LINES);
	regfree(&re);
	fclose(f);
}

/*
 * log_parts: the prefix, the parts joined, one newline; nothing below the
 * level; a line longer than the buffer cut before its newline, as
 * log_msg's.
 */
static void test_log_parts(void **state)
{
	FILE *f = tmpfile();
	int saved = dup(fileno(stderr));
	static char big[3000];
	const char *const parts[] = {"msg=\"joined\" a=", "1", " b=", "two"};
	const char *const long_parts[] = {"msg=\"long\" v=", big};
	char line[4096];

	(void)state;
	memset(big, 'x', sizeof(big) - 1);
	assert_non_null(f);
	assert_true(saved >= 0);
	fflush(stderr);
	assert_true(dup2(fileno(f), fileno(stderr)) >= 0);
	log_set_level(LOG_INFO);
	assert_false(log_enabled(LOG_DEBUG));
	assert_true(log_enabled(LOG_INFO));
	log_parts(LOG_DEBUG, parts, 4);
	log_parts(LOG_WARN, parts, 4);
	log_parts(LOG_INFO, long_parts, 2);
	log_info("msg=\"long\" v=%s", big);
	fflush(stderr);
	assert_true(dup2(saved, fileno(stderr)) >= 0);
	close(saved);
	rewind(f);
	assert_non_null(fgets(line, sizeof(line), f));
	assert_non_null(strstr(line, "Z level=warn msg=\"joined\" a=1 b=two\n"));
	assert_true(strncmp(line, "ts=", 3) == 0);
	assert_non_null(fgets(line, sizeof(line), f));
	assert_non_null(strstr(line, "level=info msg=\"long\" v=xxx"));
	assert_int_equal(strlen(line), 2047);
	assert_int_equal(line[2046], '\n');
	/* log_msg's line of the same text: as long. */
	assert_non_null(fgets(line, sizeof(line), f));
	assert_int_equal(strlen(line), 2047);
	assert_null(fgets(line, sizeof(line), f));
	fclose(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_log_lines),
	    cmocka_unit_test(test_log_parts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
