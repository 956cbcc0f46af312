/*
 * Connections per local process on a unix-socket listener (http_peers.c),
 * on both kinds of listener (I/O thread and workers; a thread per
 * connection), over a real socket: this process keeps per_client idle
 * keep-alive connections, each served; one more is closed by the server
 * at once, with a warning naming the process, and takes no slot; another
 * process (this test binary run again) is still served; once one of the
 * first closes, this process is served again.
 */
#include <setjmp.h>
#include <errno.h>
#include <poll.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/http.h"
#include "util/clock.h"

#define T_PER_PROCESS 3
#define T_WAIT_MS 10000
#define T_CHILD_FLAG "--get-unix"

extern char **environ;

struct fixture {
	char dir[64];
	char path[128];
	struct http_server *srv;
};

static int handler(void *ctx, const struct http_request *req, struct http_reply *rep, struct err *e)
{
	(void)ctx;
	(void)req;
	(void)e;
	rep->doc = json_pack("{s:b}", "ok", 1);
	return 0;
}

static int setup_with(void **state, bool threaded)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct err e;
	struct http_server_config cfg = {
	    .name = "test api",
	    .body_max = 1024,
	    .handler = handler,
	    .threaded = threaded,
	    /* The timeouts far beyond T_WAIT_MS: only the limit closes a connection here. */
	    .limits = {.per_client = T_PER_PROCESS,
		       .header_timeout_s = 60,
		       .idle_timeout_s = 60,
		       .max_conns = 64},
	};

	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/csid-peers-XXXXXX");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	snprintf(f->path, sizeof(f->path), "%s/api.sock", f->dir);
	cfg.socket_path = f->path;
	if (http_server_start(&cfg, &f->srv, &e) != 0) {
		fprintf(stderr, "start: %s\n", e.msg);
		rmdir(f->dir);
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int setup_io(void **state)
{
	return setup_with(state, false);
}

static int setup_threaded(void **state)
{
	return setup_with(state, true);
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	http_server_stop(f->srv);
	rmdir(f->dir);
	free(f);
	return 0;
}

static int dial(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * One keep-alive GET on fd: the status, or -1 when the server closed the
 * connection (or said nothing within timeout_ms).
 */
static int get_on(int fd, int timeout_ms)
{
	static const char req[] = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
	char buf[512];
	size_t got = 0;
	int64_t until = clock_now_ms(clock_real()) + timeout_ms;
	int status;

	if (send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof(req) - 1))
		return -1;
	while (got < sizeof(buf) - 1 && !memchr(buf, '\n', got)) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int64_t left = until - clock_now_ms(clock_real());
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return -1;
		n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	buf[got] = '\0';
	return sscanf(buf, "HTTP/1.1 %d", &status) == 1 ? status : -1;
}

/* Whether the server closes fd within timeout_ms, sending nothing. */
static bool closed_soon(int fd, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char c;

	return poll(&p, 1, timeout_ms) == 1 && recv(fd, &c, 1, 0) <= 0;
}

/* The test binary run again as another process: one GET on path; exits 0 on a 200. */
static int child_get(const char *path)
{
	int fd = dial(path), st = fd >= 0 ? get_on(fd, T_WAIT_MS) : -1;

	if (fd >= 0)
		close(fd);
	return st == 200 ? 0 : 1;
}

/* Runs child_get in another process; returns its exit status. */
static int other_process_get(const char *path)
{
	char self[] = "/proc/self/exe", flag[] = T_CHILD_FLAG, p[128];
	char *argv[] = {self, flag, p, NULL};
	pid_t pid;
	int st = 0;

	snprintf(p, sizeof(p), "%s", path);
	if (posix_spawn(&pid, self, NULL, NULL, argv, environ) != 0)
		return -1;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_per_process(void **state)
{
	struct fixture *f = *state;
	int fds[T_PER_PROCESS], extra, again, st = -1;
	int64_t until;

	/* This process's per_client connections, each served and kept open. */
	for (int i = 0; i < T_PER_PROCESS; i++) {
		fds[i] = dial(f->path);
		assert_true(fds[i] >= 0);
		assert_int_equal(get_on(fds[i], T_WAIT_MS), 200);
	}
	/* One more is closed at once, before it sends anything. */
	extra = dial(f->path);
	assert_true(extra >= 0);
	assert_true(closed_soon(extra, T_WAIT_MS));
	close(extra);
	/* It took no slot, and the ones kept still serve. */
	for (int i = 0; i < T_PER_PROCESS; i++)
		assert_int_equal(get_on(fds[i], T_WAIT_MS), 200);
	/* Another process is served meanwhile. */
	assert_int_equal(other_process_get(f->path), 0);
	/* Once one closes, this process gets a slot again (the close is counted). */
	close(fds[0]);
	until = clock_now_ms(clock_real()) + T_WAIT_MS;
	while (clock_now_ms(clock_real()) < until) {
		again = dial(f->path);
		assert_true(again >= 0);
		st = get_on(again, 2000);
		if (st == 200) {
			fds[0] = again;
			break;
		}
		close(again);
		poll(NULL, 0, 20);
	}
	assert_int_equal(st, 200);
	for (int i = 0; i < T_PER_PROCESS; i++)
		close(fds[i]);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_per_process, setup_io, teardown),
	    cmocka_unit_test_setup_teardown(test_per_process, setup_threaded, teardown),
	};

	if (argc == 3 && strcmp(argv[1], T_CHILD_FLAG) == 0)
		return child_get(argv[2]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
