/*
 * Test helper: child processes that stand for a workload (a claim
 * owner). An idle child waits to be killed; it is recorded with the
 * proc guard, so it is killed even when a test fails before its
 * teardown. A gone pid is the pid of a child that exited and was
 * reaped, so no process has it (until the kernel hands it out again).
 */
#ifndef CSID_TEST_CHILD_PROC_H
#define CSID_TEST_CHILD_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Starts `sleep 600`. Returns its pid, or -1. */
pid_t child_proc_idle(void);
/* Kills (SIGKILL) and reaps *pid when it is > 0, then sets it to 0. */
void child_proc_kill(pid_t *pid);
/* The pid of a child that ran `true` and was reaped, or -1. */
pid_t child_proc_gone(void);

/*
 * Runs argv[0] (a path) with argv and envp (NULL: this environment),
 * stdin from /dev/null, stdout and stderr to out_fd, to completion or
 * at most timeout_ms (then killed). Returns its exit status, or -1 when
 * it could not start, timed out or was killed by a signal.
 */
int child_proc_run(char *const *argv, char *const *envp, int out_fd, int64_t timeout_ms);

/*
 * Fills envp (cap slots, NULL-terminated) with this environment, less
 * the variables that set (NULL-terminated "NAME=value" strings) names,
 * then set itself: a child's environment with, say, TMPDIR and HOME
 * under a test's directory. The strings are not copied. Returns the
 * number of variables, or -1 when cap is too small.
 */
int child_proc_env(char **envp, size_t cap, const char *const *set);

#endif
