/*
 * End-to-end: `csid server` and `csid agent` under a NOTIFY_SOCKET the
 * test binds (the sd_notify protocol systemd speaks to Type=notify
 * units). Each sends READY=1 once its API answers: the test's very first
 * request after the datagram must succeed, without a retry. SIGTERM
 * brings STOPPING=1, then a clean exit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "http_client.h"
#include "proc_guard.h"
#include "server_proc.h"

#define WAIT_MS 60000

extern char **environ;

struct fixture {
	char dir[64];
	char sock[128];
	int fd;
	pid_t pid;
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/csid-ready-XXXXXX");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	proc_guard_track_dir(f->dir);
	snprintf(f->sock, sizeof(f->sock), "%s/notify.sock", f->dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->sock);
	f->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	*state = f;
	if (f->fd < 0 || bind(f->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	if (f->pid > 0) {
		kill(f->pid, SIGKILL);
		waitpid(f->pid, NULL, 0);
		proc_guard_untrack(f->pid);
	}
	if (f->fd >= 0)
		close(f->fd);
	proc_guard_clear_dir(f->dir);
	proc_guard_untrack_dir(f->dir);
	free(f);
	return 0;
}

/* Starts csid with args and NOTIFY_SOCKET, its stderr to <dir>/csid.log. */
static void start(struct fixture *f, char **args)
{
	char env_sock[160], log[128], *envp[512];
	char *argv[16] = {(char *)CSID_BIN};
	posix_spawn_file_actions_t fa;
	int n = 0, a = 1;

	for (char **e = environ; *e && n < 500; e++)
		if (strncmp(*e, "NOTIFY_SOCKET=", 14) != 0)
			envp[n++] = *e;
	snprintf(env_sock, sizeof(env_sock), "NOTIFY_SOCKET=%s", f->sock);
	envp[n++] = env_sock;
	envp[n] = NULL;
	for (int i = 0; args[i] && a < 15; i++)
		argv[a++] = args[i];
	argv[a] = NULL;
	snprintf(log, sizeof(log), "%s/csid.log", f->dir);
	assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_APPEND, 0600);
	assert_int_equal(proc_guard_spawn(&f->pid, CSID_BIN, &fa, argv, envp), 0);
	posix_spawn_file_actions_destroy(&fa);
	proc_guard_track(f->pid);
}

/* The next datagram on the notify socket, waiting at most WAIT_MS. */
static void expect_notify(struct fixture *f, const char *prefix)
{
	int64_t deadline = now_ms() + WAIT_MS;
	struct pollfd p = {.fd = f->fd, .events = POLLIN};
	char buf[512];
	ssize_t n;

	while (poll(&p, 1, 100) == 0) {
		int st;

		if (waitpid(f->pid, &st, WNOHANG) == f->pid) {
			proc_guard_untrack(f->pid);
			f->pid = 0;
			fail_msg("csid exited (status %d) before sending %s", st, prefix);
		}
		if (now_ms() > deadline)
			fail_msg("no %s within %d ms", prefix, WAIT_MS);
	}
	n = recv(f->fd, buf, sizeof(buf) - 1, 0);
	assert_true(n > 0);
	buf[n] = '\0';
	if (strncmp(buf, prefix, strlen(prefix)) != 0)
		fail_msg("expected %s, got \"%s\"", prefix, buf);
}

/* SIGTERM: STOPPING=1, then exit status 0 within WAIT_MS. */
static void stop(struct fixture *f)
{
	int64_t deadline = now_ms() + WAIT_MS;
	int st = 0;
	pid_t r;

	assert_int_equal(kill(f->pid, SIGTERM), 0);
	expect_notify(f, "STOPPING=1");
	while ((r = waitpid(f->pid, &st, WNOHANG)) == 0 && now_ms() < deadline) {
		struct timespec ts = {0, 5 * 1000000L};

		nanosleep(&ts, NULL);
	}
	assert_int_equal(r, f->pid);
	proc_guard_untrack(f->pid);
	f->pid = 0;
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_server_ready(void **state)
{
	struct fixture *f = *state;
	char data[128], listen[64], base[96];
	char *args[] = {"server", "-data-dir", data, "-listen", listen, NULL};
	struct http_client *c;
	int port = server_proc_free_port();

	assert_true(port > 0);
	snprintf(data, sizeof(data), "%s/server", f->dir);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	snprintf(base, sizeof(base), "http://%s", listen);
	start(f, args);
	expect_notify(f, "READY=1");
	c = http_client_new(base);
	assert_non_null(c);
	assert_int_equal(http_client_do(c, "GET", "/v1/status/health", NULL, NULL, NULL, 10000),
			 200);
	http_client_free(c);
	stop(f);
}

static void test_agent_ready(void **state)
{
	struct fixture *f = *state;
	char data[128], listen[160], base[160];
	char *args[] = {"agent", "-data-dir",  data,      "-listen",
			listen,  "-node-name", "ready-1", NULL};
	struct http_client *c;

	snprintf(data, sizeof(data), "%s/agent", f->dir);
	snprintf(listen, sizeof(listen), "unix:%s/agent/agent.sock", f->dir);
	snprintf(base, sizeof(base), "%s", listen);
	start(f, args);
	expect_notify(f, "READY=1");
	c = http_client_new(base);
	assert_non_null(c);
	assert_int_equal(http_client_do(c, "GET", "/v1/agent/self", NULL, NULL, NULL, 10000), 200);
	http_client_free(c);
	stop(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_server_ready, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_agent_ready, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
