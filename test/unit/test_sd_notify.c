/*
 * sd_notify_send against a datagram socket of the test's own, bound where
 * $NOTIFY_SOCKET says (a path, then an abstract name): what arrives is
 * exactly what was sent, one datagram per message. Without NOTIFY_SOCKET
 * nothing is sent; a bad value or nobody listening is an error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/sd_notify.h"

struct fixture {
	char dir[64];
	char path[128];
	int fd;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->fd = -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/csid-notify-XXXXXX");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	snprintf(f->path, sizeof(f->path), "%s/notify.sock", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	if (f->fd >= 0)
		close(f->fd);
	unlink(f->path);
	rmdir(f->dir);
	unsetenv("NOTIFY_SOCKET");
	free(f);
	return 0;
}

/* Binds a datagram socket at name ('@' first: abstract) and points NOTIFY_SOCKET at it. */
static void listen_at(struct fixture *f, const char *name)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t len = strlen(name);
	struct timeval tv = {.tv_sec = 10};

	f->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(f->fd >= 0);
	memcpy(sa.sun_path, name, len);
	if (name[0] == '@')
		sa.sun_path[0] = '\0';
	assert_int_equal(
	    bind(f->fd, (struct sockaddr *)&sa,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (name[0] == '/'))),
	    0);
	/* A bound on the wait for a datagram, so a failure cannot hang the test. */
	assert_int_equal(setsockopt(f->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	assert_int_equal(setenv("NOTIFY_SOCKET", name, 1), 0);
}

static void expect_datagram(struct fixture *f, const char *want)
{
	char buf[256];
	ssize_t n = recv(f->fd, buf, sizeof(buf) - 1, 0);

	assert_true(n >= 0);
	buf[n] = '\0';
	assert_string_equal(buf, want);
}

static void test_path(void **state)
{
	struct fixture *f = *state;
	struct err e;

	err_clear(&e);
	listen_at(f, f->path);
	assert_int_equal(sd_notify_send("READY=1\nSTATUS=serving", &e), 0);
	assert_int_equal(sd_notify_send("STOPPING=1", &e), 0);
	expect_datagram(f, "READY=1\nSTATUS=serving");
	expect_datagram(f, "STOPPING=1");
}

static void test_abstract(void **state)
{
	struct fixture *f = *state;
	char name[64];
	struct err e;

	err_clear(&e);
	snprintf(name, sizeof(name), "@csid-test-notify-%d", (int)getpid());
	listen_at(f, name);
	assert_int_equal(sd_notify_send("READY=1", &e), 0);
	expect_datagram(f, "READY=1");
}

static void test_not_under_systemd(void **state)
{
	struct err e;

	(void)state;
	err_clear(&e);
	unsetenv("NOTIFY_SOCKET");
	assert_int_equal(sd_notify_send("READY=1", &e), 0);
	setenv("NOTIFY_SOCKET", "", 1);
	assert_int_equal(sd_notify_send("READY=1", &e), 0);
}

static void test_errors(void **state)
{
	struct fixture *f = *state;
	struct err e;

	err_clear(&e);
	setenv("NOTIFY_SOCKET", "relative/notify.sock", 1);
	assert_int_equal(sd_notify_send("READY=1", &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "NOTIFY_SOCKET"));
	/* Nobody bound there. */
	err_clear(&e);
	setenv("NOTIFY_SOCKET", f->path, 1);
	assert_true(sd_notify_send("READY=1", &e) < 0);
	assert_non_null(strstr(e.msg, f->path));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_path, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_abstract, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_not_under_systemd, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
