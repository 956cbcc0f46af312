/*
 * Unit tests of the supervisor's pure parts: the restart backoff with
 * injected randomness (growth, jitter bounds, cap, no overflow) and the
 * choice of an instance's socket path under the 107-byte limit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "plugins/supervisor.h"

static void test_backoff_growth(void **state)
{
	/* rnd = 0 gives the low end (3/4 d); a huge rnd modulo lands inside. */
	assert_int_equal(supervisor_backoff_ms(0, 1000, 60000, 0), 750);
	assert_int_equal(supervisor_backoff_ms(0, 1000, 60000, 250), 1000);
	assert_int_equal(supervisor_backoff_ms(0, 1000, 60000, 251), 750);
	assert_int_equal(supervisor_backoff_ms(1, 1000, 60000, 0), 1500);
	assert_int_equal(supervisor_backoff_ms(2, 1000, 60000, 1000), 4000);
	assert_int_equal(supervisor_backoff_ms(5, 1000, 60000, 0), 24000);
	/* Capped at one minute from attempt 6 on, whatever the attempt. */
	assert_int_equal(supervisor_backoff_ms(6, 1000, 60000, 15000), 60000);
	assert_int_equal(supervisor_backoff_ms(6, 1000, 60000, 0), 45000);
	assert_int_equal(supervisor_backoff_ms(1000000, 1000, 60000, 15000), 60000);
	assert_int_equal(supervisor_backoff_ms(UINT32_MAX, 1000, INT64_MAX / 2, 0) > 0, 1);
}

static void test_backoff_bounds(void **state)
{
	uint64_t x = 88172645463325252ULL;

	for (unsigned attempt = 0; attempt < 80; attempt++) {
		int64_t prev_hi = 0;

		for (int i = 0; i < 200; i++) {
			int64_t d, full;

			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			d = supervisor_backoff_ms(attempt, 10, 500, x);
			full = attempt >= 6 ? 500 : 10LL << attempt;
			if (full > 500)
				full = 500;
			assert_true(d >= full - full / 4);
			assert_true(d <= full);
			prev_hi = d > prev_hi ? d : prev_hi;
		}
		assert_true(prev_hi <= 500);
	}
	/* Degenerate settings still give a positive, bounded delay. */
	assert_int_equal(supervisor_backoff_ms(3, 0, 0, 12345), 1);
	assert_int_equal(supervisor_backoff_ms(0, 100, 10, 0), 75);
}

static void test_socket_path(void **state)
{
	char sock[SUPERVISOR_SOCK_MAX], dir[SUPERVISOR_SOCK_MAX], data[200];
	struct err e;

	assert_int_equal(supervisor_socket_path("/tmp/d", "hp", "abc", sock, dir, &e), 0);
	assert_string_equal(sock, "/tmp/d/plugins/hp/abc/csi.sock");
	assert_string_equal(dir, "/tmp/d/plugins/hp/abc");
	/* A long plugin ID moves the socket to a hashed short directory. */
	memset(data, 'x', 100);
	data[100] = '\0';
	assert_int_equal(supervisor_socket_path("/tmp/d", data, "abc", sock, dir, &e), 0);
	assert_int_equal(strncmp(sock, "/tmp/d/p/", 9), 0);
	assert_int_equal(strlen(sock), strlen("/tmp/d/p/0123456789abcdef/csi.sock"));
	assert_int_equal(strncmp(sock, dir, strlen(dir)), 0);
	{
		char sock2[SUPERVISOR_SOCK_MAX], dir2[SUPERVISOR_SOCK_MAX];

		/* Another instance of the same plugin gets another directory. */
		assert_int_equal(supervisor_socket_path("/tmp/d", data, "abd", sock2, dir2, &e), 0);
		assert_string_not_equal(sock, sock2);
	}
	/* A data_dir too long even for the short form: a clear error. */
	data[0] = '/';
	memset(data + 1, 'y', 90);
	data[91] = '\0';
	assert_int_equal(supervisor_socket_path(data, "hp", "abc", sock, dir, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "too long"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_backoff_growth),
	    cmocka_unit_test(test_backoff_bounds),
	    cmocka_unit_test(test_socket_path),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
