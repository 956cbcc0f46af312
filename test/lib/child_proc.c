/*
 * Child processes for tests (child_proc.h), started with posix_spawnp
 * (never fork: test programs may run threads).
 */
#include "child_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "proc_guard.h"

extern char **environ;

pid_t child_proc_idle(void)
{
	char *argv[] = {"sleep", "600", NULL};
	pid_t pid = 0;

	if (posix_spawnp(&pid, "sleep", NULL, NULL, argv, environ) != 0)
		return -1;
	proc_guard_track(pid);
	return pid;
}

void child_proc_kill(pid_t *pid)
{
	if (*pid <= 0)
		return;
	kill(*pid, SIGKILL);
	while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR)
		;
	proc_guard_untrack(*pid);
	*pid = 0;
}

pid_t child_proc_gone(void)
{
	char *argv[] = {"true", NULL};
	pid_t pid = 0;

	if (posix_spawnp(&pid, "true", NULL, NULL, argv, environ) != 0)
		return -1;
	while (waitpid(pid, NULL, 0) < 0)
		if (errno != EINTR)
			return -1;
	return pid;
}

int child_proc_run(char *const *argv, char *const *envp, int out_fd, int64_t timeout_ms)
{
	struct timespec now, nap = {0, 5 * 1000000L};
	posix_spawn_file_actions_t fa;
	int64_t deadline;
	int status = -1;
	pid_t pid;

	clock_gettime(CLOCK_MONOTONIC, &now);
	deadline = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 + timeout_ms;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
	posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
	if (posix_spawn(&pid, argv[0], &fa, NULL, argv, envp ? envp : environ) == 0) {
		proc_guard_track(pid);
		while (waitpid(pid, &status, WNOHANG) == 0) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			if ((int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 > deadline) {
				kill(pid, SIGKILL);
				waitpid(pid, &status, 0);
				status = -1;
				break;
			}
			nanosleep(&nap, NULL);
		}
		proc_guard_untrack(pid);
	}
	posix_spawn_file_actions_destroy(&fa);
	return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Whether variable e ("NAME=value") is one that set names. */
static bool child_proc_env_set(const char *e, const char *const *set)
{
	size_t n = strcspn(e, "=");

	for (; *set; set++)
		if (strncmp(e, *set, n) == 0 && (*set)[n] == '=')
			return true;
	return false;
}

int child_proc_env(char **envp, size_t cap, const char *const *set)
{
	size_t n = 0;

	for (char **e = environ; *e; e++) {
		if (child_proc_env_set(*e, set))
			continue;
		if (n + 1 >= cap)
			return -1;
		envp[n++] = *e;
	}
	for (; *set; set++) {
		if (n + 1 >= cap)
			return -1;
		envp[n++] = (char *)*set;
	}
	envp[n] = NULL;
	return (int)n;
}
