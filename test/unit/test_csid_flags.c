/*
 * csid_flags_parse, the flag parser of `csid agent`, `csid server` and
 * `csid dev`: "-name value", "-name=value", "--name", switches, help, and
 * the refusals (unknown flag, positional argument, missing value, a value
 * given to a switch), each leaving the flags it did not reach untouched.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "csid_flags.h"

struct t_flags {
	const char *dir, *listen;
	bool keep;
};

static int t_usage_calls;

static void t_usage(FILE *f)
{
	(void)f;
	t_usage_calls++;
}

static int t_parse(struct t_flags *v, int argc, char **argv)
{
	const struct csid_flag flags[] = {
	    {"data-dir", &v->dir, NULL}, {"listen", &v->listen, NULL}, {"keep", NULL, &v->keep}};

	t_usage_calls = 0;
	return csid_flags_parse("test", flags, sizeof(flags) / sizeof(flags[0]), argc, argv,
				t_usage);
}

static void test_forms(void **state)
{
	char *argv[] = {"-data-dir", "/tmp/a", "--listen=127.0.0.1:1", "--keep"};
	struct t_flags v = {0};

	(void)state;
	assert_int_equal(t_parse(&v, 4, argv), 0);
	assert_string_equal(v.dir, "/tmp/a");
	assert_string_equal(v.listen, "127.0.0.1:1");
	assert_true(v.keep);
	assert_int_equal(t_usage_calls, 0);
}

static void test_empty_value(void **state)
{
	char *argv[] = {"-listen="};
	struct t_flags v = {0};

	(void)state;
	assert_int_equal(t_parse(&v, 1, argv), 0);
	assert_string_equal(v.listen, "");
	assert_false(v.keep);
}

static void test_help(void **state)
{
	char *argv[] = {"-data-dir", "x", "-h", "-bogus"};
	struct t_flags v = {0};

	(void)state;
	assert_int_equal(t_parse(&v, 4, argv), 1);
	assert_int_equal(t_usage_calls, 1);
}

static void test_refused(void **state)
{
	char *unknown[] = {"-listen", "a:1", "-bogus", "x"};
	char *positional[] = {"extra"};
	char *missing[] = {"-data-dir"};
	char *valued_switch[] = {"-keep=yes"};
	struct t_flags v = {0};

	(void)state;
	assert_int_equal(t_parse(&v, 4, unknown), 2);
	assert_int_equal(t_usage_calls, 1);
	assert_string_equal(v.listen, "a:1");
	assert_null(v.dir);
	assert_int_equal(t_parse(&v, 1, positional), 2);
	assert_int_equal(t_parse(&v, 1, missing), 2);
	assert_null(v.dir);
	assert_int_equal(t_parse(&v, 1, valued_switch), 2);
	assert_false(v.keep);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_forms),
	    cmocka_unit_test(test_empty_value),
	    cmocka_unit_test(test_help),
	    cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
