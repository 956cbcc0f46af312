/*
 * Child processes for tests (child_proc.h), started with posix_spawnp
 * (never fork: test programs may run threads).
 */
#include "child_proc.h"

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

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
