/*
 * pdeath-exec PPID PATH ARGV0 [ARG...]: the exec wrapper the test helpers
 * start their long-lived children through (proc_guard_spawn). It asks the
 * kernel for SIGKILL when its parent thread ends, then becomes PATH (found
 * in PATH when it has no slash) with ARGV0 and the ARGs, in the same
 * process: the pid the test holds is the program's own.
 *
 * So a test program that dies without running its cleanup (ctest's
 * timeout, a kill of ctest, SIGPIPE on a closed output pipe) takes its
 * servers with it. The signal survives execve (but not a set-user-ID
 * program) and is not inherited by the program's own children.
 *
 * PPID is the pid the parent had when it spawned the wrapper: when the
 * parent died before the prctl below, this process has already been
 * reparented and nothing would ever signal it, so it does not start.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char *end = NULL;
	long ppid;

	if (argc < 4) {
		fprintf(stderr, "usage: pdeath-exec PPID PATH ARGV0 [ARG...]\n");
		return 127;
	}
	errno = 0;
	ppid = strtol(argv[1], &end, 10);
	if (errno || !end || *end || ppid <= 0) {
		fprintf(stderr, "pdeath-exec: bad parent pid %s\n", argv[1]);
		return 127;
	}
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
		fprintf(stderr, "pdeath-exec: prctl: %s\n", strerror(errno));
		return 127;
	}
	if ((long)getppid() != ppid)
		return 127;
	execvp(argv[2], argv + 3);
	fprintf(stderr, "pdeath-exec: %s: %s\n", argv[2], strerror(errno));
	return 127;
}
