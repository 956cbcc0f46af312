/*
 * proc_guard_spawn: a child the test helpers start on the main thread dies
 * with the test program, however that dies (here: _exit, no cleanup run),
 * and keeps its own pid; a child started on a helper thread outlives the
 * thread; the exec wrapper refuses to start for a parent that is already
 * gone. The dying test program is this one re-executed with --child.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hostpath_proc.h"
#include "proc_guard.h"

extern char **environ;

#define PG_DEADLINE_MS 20000

static int64_t pg_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* pid's state letter (0: gone) and its program's name, from /proc/<pid>/stat. */
static char pg_state(pid_t pid, char *comm, size_t len)
{
	char path[64], buf[256], *lp, *rp;
	FILE *f;
	char st = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f) && (lp = strchr(buf, '(')) && (rp = strrchr(buf, ')')) &&
	    rp[1] == ' ') {
		snprintf(comm, len, "%.*s", (int)(rp - lp - 1), lp + 1);
		st = rp[2];
	}
	fclose(f);
	return st;
}

/* Whether pid is alive (gone or a zombie is dead) and, with comm, runs that program. */
static bool pg_runs(pid_t pid, const char *comm)
{
	char name[64] = "";
	char st = pg_state(pid, name, sizeof(name));

	return st && st != 'Z' && st != 'X' && (!comm || strcmp(name, comm) == 0);
}

/*
 * The child: starts `sleep 600` through proc_guard_spawn, waits until it
 * runs as sleep under the pid it got, writes that pid to stdout and ends
 * without any cleanup, as a test killed by ctest would.
 */
static int pg_child(void)
{
	char *argv[] = {(char *)"sleep", (char *)"600", NULL};
	int64_t end = pg_now_ms() + PG_DEADLINE_MS;
	pid_t pid = 0;

	if (proc_guard_spawn(&pid, "sleep", NULL, argv, NULL) != 0)
		_exit(2);
	while (!pg_runs(pid, "sleep") && pg_now_ms() < end)
		hpp_pause_ms(5);
	if (!pg_runs(pid, "sleep")) {
		kill(pid, SIGKILL);
		_exit(3);
	}
	printf("%d\n", (int)pid);
	fflush(stdout);
	_exit(0);
}

static void test_child_dies_with_test(void **state)
{
	char self[PATH_MAX], out[] = "/tmp/pg-out-XXXXXX", buf[32] = "";
	char *argv[] = {self, (char *)"--child", NULL};
	posix_spawn_file_actions_t fa;
	int fd = mkstemp(out), status = 0;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	int64_t end;
	pid_t child, sleeper;

	(void)state;
	assert_true(fd >= 0);
	assert_true(n > 0);
	self[n] = '\0';
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fd, 1);
	assert_int_equal(posix_spawn(&child, self, &fa, NULL, argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	assert_int_equal(waitpid(child, &status, 0), child);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	unlink(out);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_true(n > 0);
	sleeper = (pid_t)atoi(buf);
	assert_true(sleeper > 0);
	/* The parent is gone: the kernel's SIGKILL follows at once. */
	end = pg_now_ms() + PG_DEADLINE_MS;
	while (pg_runs(sleeper, NULL) && pg_now_ms() < end)
		hpp_pause_ms(5);
	if (pg_runs(sleeper, NULL)) {
		kill(sleeper, SIGKILL);
		fail_msg("sleep %d outlived the test program that started it", (int)sleeper);
	}
}

struct pg_thread {
	pid_t pid;
	pid_t tid;
	int rc;
};

static void *pg_thread_main(void *arg)
{
	struct pg_thread *t = arg;
	char *argv[] = {(char *)"sleep", (char *)"600", NULL};

	int64_t end = pg_now_ms() + PG_DEADLINE_MS;

	t->tid = gettid();
	t->rc = proc_guard_spawn(&t->pid, "sleep", NULL, argv, NULL);
	/* Past any wrapper's prctl before the thread ends. */
	while (t->rc == 0 && !pg_runs(t->pid, "sleep") && pg_now_ms() < end)
		hpp_pause_ms(5);
	return NULL;
}

static void test_thread_child_outlives_thread(void **state)
{
	struct pg_thread t = {0};
	char task[64];
	struct stat sb;
	int64_t end = pg_now_ms() + PG_DEADLINE_MS;
	pthread_t th;
	int status = 0;

	(void)state;
	assert_int_equal(pthread_create(&th, NULL, pg_thread_main, &t), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(t.rc, 0);
	/* The thread is released only after its exit sent any parent-death signal. */
	snprintf(task, sizeof(task), "/proc/self/task/%d", (int)t.tid);
	while (stat(task, &sb) == 0 && pg_now_ms() < end)
		hpp_pause_ms(5);
	assert_int_equal(stat(task, &sb), -1);
	/* A pending SIGKILL would win over this SIGTERM. */
	assert_int_equal(kill(t.pid, SIGTERM), 0);
	assert_int_equal(waitpid(t.pid, &status, 0), t.pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGTERM);
}

/* A wrapper whose parent is not the one it was told of runs nothing. */
static void test_wrapper_refuses_orphan(void **state)
{
	char marker[] = "/tmp/pg-mark-XXXXXX", ppid[24];
	char *argv[] = {(char *)PDEATH_EXEC_BIN, (char *)"1", (char *)"/usr/bin/touch",
			(char *)"touch",         marker,      NULL};
	int fd = mkstemp(marker), status = 0;
	struct stat sb;
	pid_t pid;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	unlink(marker);
	assert_int_equal(posix_spawn(&pid, PDEATH_EXEC_BIN, NULL, NULL, argv, environ), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 127);
	assert_int_equal(stat(marker, &sb), -1);
	/* The same call with the right parent runs it. */
	snprintf(ppid, sizeof(ppid), "%d", (int)getpid());
	argv[1] = ppid;
	assert_int_equal(posix_spawn(&pid, PDEATH_EXEC_BIN, NULL, NULL, argv, environ), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(stat(marker, &sb), 0);
	unlink(marker);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_child_dies_with_test),
	    cmocka_unit_test(test_thread_child_outlives_thread),
	    cmocka_unit_test(test_wrapper_refuses_orphan),
	};

	if (argc == 2 && strcmp(argv[1], "--child") == 0)
		return pg_child();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
