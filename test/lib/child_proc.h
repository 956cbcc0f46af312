/*
 * Test helper: child processes that stand for a workload (a claim
 * owner). An idle child waits to be killed; it is recorded with the
 * proc guard, so it is killed even when a test fails before its
 * teardown. A gone pid is the pid of a child that exited and was
 * reaped, so no process has it (until the kernel hands it out again).
 */
#ifndef CSID_TEST_CHILD_PROC_H
#define CSID_TEST_CHILD_PROC_H

#include <sys/types.h>

/* Starts `sleep 600`. Returns its pid, or -1. */
pid_t child_proc_idle(void);
/* Kills (SIGKILL) and reaps *pid when it is > 0, then sets it to 0. */
void child_proc_kill(pid_t *pid);
/* The pid of a child that ran `true` and was reaped, or -1. */
pid_t child_proc_gone(void);

#endif
