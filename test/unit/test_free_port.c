/*
 * The tests' port picker (server_proc_free_port, test/lib): a picked port
 * lies below the kernel's range of local ports for outgoing connections,
 * is held by this process, so another pick never gets it and a plain
 * bind on it (another process's pick is one) fails on any address, while a
 * listener that sets SO_REUSEADDR (as every server the tests start does)
 * binds it on 127.0.0.1 or on 0.0.0.0, and again after a restart. (A
 * port released between the pick and the listener's bind could be taken
 * by any process meanwhile, and the test's server then failed to start.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>

#include "server_proc.h"

/* A TCP socket bound to addr:port (SO_REUSEADDR as asked), listening if asked; -1 if refused. */
static int t_bind(uint32_t addr, int port, bool reuse, bool listening)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	assert_true(fd >= 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(addr);
	if (reuse)
		assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    (listening && listen(fd, 4) != 0)) {
		close(fd);
		return -1;
	}
	return fd;
}

static int t_ephemeral_low(void)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	int low = 0, high = 0;

	assert_non_null(f);
	assert_int_equal(fscanf(f, "%d %d", &low, &high), 2);
	fclose(f);
	return low;
}

static void test_pick_outside_ephemeral_range(void **state)
{
	int low = t_ephemeral_low();

	(void)state;
	for (int i = 0; i < 50; i++) {
		int port = server_proc_free_port();

		assert_true(port >= SERVER_PROC_PORT_MIN);
		assert_true(port < low);
	}
}

static void test_held_until_exit(void **state)
{
	int port = server_proc_free_port(), fd;

	(void)state;
	assert_true(port > 0);
	/* Held: a plain bind fails on the loopback address and on every address. */
	assert_int_equal(t_bind(INADDR_LOOPBACK, port, false, false), -1);
	assert_int_equal(t_bind(INADDR_ANY, port, false, false), -1);
	/* Nor does the next pick hand it out. */
	for (int i = 0; i < 50; i++)
		assert_int_not_equal(server_proc_free_port(), port);
	/* A server's listener binds it, on 0.0.0.0 as on 127.0.0.1, and again after a restart. */
	fd = t_bind(INADDR_ANY, port, true, true);
	assert_true(fd >= 0);
	close(fd);
	fd = t_bind(INADDR_LOOPBACK, port, true, true);
	assert_true(fd >= 0);
	/* While it listens, a second listener does not. */
	assert_int_equal(t_bind(INADDR_ANY, port, true, true), -1);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pick_outside_ephemeral_range),
	    cmocka_unit_test(test_held_until_exit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
