/*
 * /proc/PID/stat (src/util/procstat.c): a command name with spaces and
 * parentheses does not shift the fields, a zombie is read as one, short
 * or unbracketed text is refused; reading this process gives its own
 * state, a pid that does not exist gives CSID_ENOTFOUND.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "csid.h"
#include "util/procstat.h"

extern char **environ;

static void test_stat_parse(void **state)
{
	static const char ok[] =
	    "1234 (my (odd) prog) S 1 1234 1234 0 -1 4194560 100 0 0 0 3 1 0 0 20 0 1 0 "
	    "987654321 1000 100 18446744073709551615\n";
	static const char zombie[] = "9 (z) Z 1 9 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 42 0 0\n";
	char st = 0;
	uint64_t start = 0;

	(void)state;
	assert_int_equal(procstat_parse(ok, sizeof(ok) - 1, &st, &start), 0);
	assert_int_equal(st, 'S');
	assert_int_equal(start, 987654321);
	assert_int_equal(procstat_parse(zombie, sizeof(zombie) - 1, &st, &start), 0);
	assert_int_equal(st, 'Z');
	assert_int_equal(start, 42);
	assert_int_equal(procstat_parse("1 (x) S 1 2 3", 13, &st, &start), CSID_EINVAL);
	assert_int_equal(procstat_parse("no paren", 8, &st, &start), CSID_EINVAL);
	assert_int_equal(procstat_parse("1 (x)", 5, &st, &start), CSID_EINVAL);
}

static void test_stat_read(void **state)
{
	char st = 0, st_self = 0;
	uint64_t start = 0, start_self = 0;
	char *argv[] = {"true", NULL};
	siginfo_t info;
	pid_t child;

	(void)state;
	assert_int_equal(procstat_read(0, &st, &start), 0);
	assert_int_equal(st, 'R');
	assert_true(start > 0);
	assert_int_equal(procstat_read((int)getpid(), &st_self, &start_self), 0);
	assert_int_equal(start_self, start);

	/* A child that exited and was not reaped yet is a zombie. */
	assert_int_equal(posix_spawn(&child, "/bin/true", NULL, NULL, argv, environ), 0);
	assert_int_equal(waitid(P_PID, (id_t)child, &info, WEXITED | WNOWAIT), 0);
	assert_int_equal(procstat_read((int)child, &st, &start), 0);
	assert_int_equal(st, 'Z');
	assert_int_equal(waitpid(child, NULL, 0), child);
	assert_int_equal(procstat_read((int)child, &st, &start), CSID_ENOTFOUND);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_stat_parse),
	    cmocka_unit_test(test_stat_read),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
