/*
 * The exit-time cleanup of test processes and directories (see
 * proc_guard.h). Registered with atexit() and, under AddressSanitizer, as
 * its death callback, the first time anything is tracked.
 */
#include "proc_guard.h"

#include "hostpath_proc.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROC_GUARD_MAX 64
#define PROC_GUARD_PATH 192
/* Arguments a spawned child may have, its argv[0] included. */
#define PROC_GUARD_ARGS 96

extern char **environ;

/* Provided by the sanitizer runtime when the test is built with one. */
void __sanitizer_set_death_callback(void (*cb)(void)) __attribute__((weak));

static pid_t proc_guard_pids[PROC_GUARD_MAX];
static char proc_guard_dirs[PROC_GUARD_MAX][PROC_GUARD_PATH];
static bool proc_guard_armed;

static void proc_guard_arm(void)
{
	if (proc_guard_armed)
		return;
	proc_guard_armed = true;
	atexit(proc_guard_run);
	if (__sanitizer_set_death_callback)
		__sanitizer_set_death_callback(proc_guard_run);
}

int proc_guard_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
		     char *const *argv, char *const *envp)
{
	char *wrapped[PROC_GUARD_ARGS + 3], ppid[24];
	int n = 0;

	if (!envp)
		envp = environ;
	if (gettid() != getpid()) {
		if (strchr(path, '/'))
			return posix_spawn(pid, path, fa, NULL, argv, envp);
		return posix_spawnp(pid, path, fa, NULL, argv, envp);
	}
	snprintf(ppid, sizeof(ppid), "%d", (int)getpid());
	wrapped[n++] = (char *)PDEATH_EXEC_BIN;
	wrapped[n++] = ppid;
	wrapped[n++] = (char *)path;
	for (int i = 0; argv[i]; i++) {
		if (i == PROC_GUARD_ARGS)
			return E2BIG;
		wrapped[n++] = argv[i];
	}
	wrapped[n] = NULL;
	return posix_spawn(pid, PDEATH_EXEC_BIN, fa, NULL, wrapped, envp);
}

void proc_guard_track(pid_t pid)
{
	proc_guard_arm();
	for (int i = 0; i < PROC_GUARD_MAX; i++) {
		if (proc_guard_pids[i] <= 0) {
			proc_guard_pids[i] = pid;
			return;
		}
	}
}

void proc_guard_untrack(pid_t pid)
{
	for (int i = 0; i < PROC_GUARD_MAX; i++)
		if (proc_guard_pids[i] == pid)
			proc_guard_pids[i] = 0;
}

void proc_guard_track_dir(const char *dir)
{
	proc_guard_arm();
	if (!dir || !dir[0] || strlen(dir) >= PROC_GUARD_PATH)
		return;
	for (int i = 0; i < PROC_GUARD_MAX; i++) {
		if (!proc_guard_dirs[i][0]) {
			snprintf(proc_guard_dirs[i], PROC_GUARD_PATH, "%s", dir);
			return;
		}
	}
}

void proc_guard_untrack_dir(const char *dir)
{
	for (int i = 0; dir && i < PROC_GUARD_MAX; i++)
		if (strcmp(proc_guard_dirs[i], dir) == 0)
			proc_guard_dirs[i][0] = '\0';
}

/* Whether path is dir or lies below it. */
static bool proc_guard_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

/* SIGKILLs every process whose working directory is under dir; returns how many. */
static int proc_guard_kill_in(const char *dir)
{
	char link[64], cwd[PATH_MAX];
	struct dirent *de;
	DIR *d = opendir("/proc");
	int n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		ssize_t len;
		pid_t pid;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		pid = (pid_t)atoi(de->d_name);
		if (pid == getpid())
			continue;
		snprintf(link, sizeof(link), "/proc/%d/cwd", (int)pid);
		len = readlink(link, cwd, sizeof(cwd) - 1);
		if (len <= 0)
			continue;
		cwd[len] = '\0';
		if (proc_guard_under(cwd, dir) && kill(pid, SIGKILL) == 0)
			n++;
	}
	closedir(d);
	return n;
}

void proc_guard_clear_dir(const char *dir)
{
	/* Killed processes may be children of ours (zombies until reaped). */
	for (int round = 0; round < 100 && proc_guard_kill_in(dir) > 0; round++) {
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		hpp_pause_ms(10);
	}
	hpp_rmrf(dir);
}

void proc_guard_run(void)
{
	for (int i = 0; i < PROC_GUARD_MAX; i++) {
		pid_t pid = proc_guard_pids[i];

		if (pid <= 0)
			continue;
		proc_guard_pids[i] = 0;
		fprintf(stderr, "proc_guard: killing leftover child %d\n", (int)pid);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	for (int i = 0; i < PROC_GUARD_MAX; i++) {
		char *dir = proc_guard_dirs[i];

		if (!dir[0])
			continue;
		fprintf(stderr, "proc_guard: clearing leftover %s\n", dir);
		proc_guard_clear_dir(dir);
		dir[0] = '\0';
	}
}
