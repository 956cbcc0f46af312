/*
 * Runs csictl as a child process for end-to-end tests: posix_spawn with
 * stdout and stderr redirected to files, a wait bounded by a deadline
 * (polled, never a blind sleep), and the files read back whole.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "csictl_run.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

#define CSICTL_RUN_ARGS_MAX 64
#define CSICTL_RUN_ENV_MAX 512

static int64_t csictl_run_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static char *csictl_run_slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
		goto out;
	buf = calloc(1, (size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
out:
	fclose(f);
	return buf;
}

static bool csictl_run_env_skip(const char *e)
{
	return strncmp(e, "CSI_ENDPOINT=", 13) == 0 || strncmp(e, "CSID_AGENT_ADDR=", 16) == 0;
}

int csictl_run(const char *dir, char *const *args, char *const *extra_env, int64_t deadline_ms,
	       struct csictl_run *r)
{
	return csictl_run_prog(dir, CSICTL_BIN, args, extra_env, deadline_ms, r);
}

int csictl_run_prog(const char *dir, const char *prog, char *const *args, char *const *extra_env,
		    int64_t deadline_ms, struct csictl_run *r)
{
	char outp[512], errp[512];
	char *argv[CSICTL_RUN_ARGS_MAX + 2], *envp[CSICTL_RUN_ENV_MAX + 1];
	posix_spawn_file_actions_t fa;
	int n = 0, ne = 0, st, rc;
	int64_t deadline;
	pid_t pid;

	memset(r, 0, sizeof(*r));
	snprintf(outp, sizeof(outp), "%s/csictl.out", dir);
	snprintf(errp, sizeof(errp), "%s/csictl.err", dir);
	argv[n++] = (char *)prog;
	for (int i = 0; args[i] && n <= CSICTL_RUN_ARGS_MAX; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	for (char **e = environ; *e && ne < CSICTL_RUN_ENV_MAX; e++)
		if (!csictl_run_env_skip(*e))
			envp[ne++] = *e;
	for (int i = 0; extra_env && extra_env[i] && ne < CSICTL_RUN_ENV_MAX; i++)
		envp[ne++] = extra_env[i];
	envp[ne] = NULL;
	if (posix_spawn_file_actions_init(&fa) != 0)
		return -1;
	posix_spawn_file_actions_addopen(&fa, 1, outp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_addopen(&fa, 2, errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	rc = posix_spawn(&pid, prog, &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0)
		return -1;
	deadline = csictl_run_now_ms() + deadline_ms;
	while ((rc = waitpid(pid, &st, WNOHANG)) == 0) {
		struct timespec ts = {0, 2 * 1000000L};

		if (csictl_run_now_ms() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		nanosleep(&ts, NULL);
	}
	if (rc < 0)
		return -1;
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	r->out = csictl_run_slurp(outp);
	r->err = csictl_run_slurp(errp);
	if (!r->out || !r->err) {
		csictl_run_free(r);
		return -1;
	}
	return 0;
}

void csictl_run_free(struct csictl_run *r)
{
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}

void csictl_runner_run(struct csictl_runner *rn, struct csictl_run *r, char *const *extra_env,
		       char *const *args)
{
	if (csictl_run(rn->dir, args, extra_env, rn->deadline_ms, r) != 0)
		fail_msg("csictl %s %s: could not run it to the end", args[0],
			 args[1] ? args[1] : "");
	rn->live = r;
}

void csictl_runner_free(struct csictl_runner *rn, struct csictl_run *r)
{
	csictl_run_free(r);
	if (rn->live == r)
		rn->live = NULL;
}

void csictl_runner_cleanup(struct csictl_runner *rn)
{
	if (rn->live)
		csictl_run_free(rn->live);
	rn->live = NULL;
}

void csictl_expect_ok(const struct csictl_run *r)
{
	if (r->status != 0)
		fail_msg("exit %d, stderr: %s", r->status, r->err);
}

void csictl_expect_fail(const struct csictl_run *r, int status, const char *in_stderr)
{
	if (r->status != status || !strstr(r->err, in_stderr))
		fail_msg("want exit %d with \"%s\", got exit %d, stderr: %s", status, in_stderr,
			 r->status, r->err);
}

json_t *csictl_expect_json(const struct csictl_run *r)
{
	json_error_t je;
	json_t *j = json_loads(r->out, 0, &je);

	if (!j)
		fail_msg("stdout is not JSON (%s): %s", je.text, r->out);
	return j;
}
