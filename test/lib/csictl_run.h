/*
 * Test helper: runs the real csictl program (CSICTL_BIN) with posix_spawn
 * and captures its stdout, stderr and exit status. Output goes through
 * two files in a directory the test owns; the run is bounded by a
 * deadline (the child is killed with SIGKILL when it passes it). The
 * csictl_runner and csictl_expect_* functions use cmocka assertions.
 */
#ifndef CSID_TEST_CSICTL_RUN_H
#define CSID_TEST_CSICTL_RUN_H

#include <stdint.h>

#include <jansson.h>

struct csictl_run {
	int status; /* exit status, or 128 + signal */
	char *out; /* all of stdout, NUL-terminated; owned */
	char *err; /* all of stderr; owned */
};

/*
 * Runs csictl with args (NULL-terminated, without the program name). The
 * child gets this process's environment without CSI_ENDPOINT and
 * CSID_AGENT_ADDR, plus extra_env ("NAME=value" strings, NULL-terminated;
 * may be NULL). dir holds the capture files. Returns 0 with *r filled
 * (free with csictl_run_free), or -1 when the program could not be
 * started, did not finish within deadline_ms, or its output could not be
 * read (then *r holds nothing to free).
 */
int csictl_run(const char *dir, char *const *args, char *const *extra_env, int64_t deadline_ms,
	       struct csictl_run *r);

/* Runs prog (a path: csid, bash...) the way csictl_run runs csictl. */
int csictl_run_prog(const char *dir, const char *prog, char *const *args, char *const *extra_env,
		    int64_t deadline_ms, struct csictl_run *r);

/* Frees what a run captured; safe to call twice. */
void csictl_run_free(struct csictl_run *r);

/*
 * cmocka side, for tests that run csictl many times: a runner remembers
 * the run whose output is not freed yet, so a teardown can free it after
 * an assertion failed in the middle of a test.
 */
struct csictl_runner {
	const char *dir; /* where the capture files go; borrowed */
	int64_t deadline_ms; /* per run */
	struct csictl_run *live; /* the last run not yet released */
};

/* Runs csictl as csictl_run does; fails the test when it cannot run to the end. */
void csictl_runner_run(struct csictl_runner *rn, struct csictl_run *r, char *const *extra_env,
		       char *const *args);
/* Frees r (the last run). */
void csictl_runner_free(struct csictl_runner *rn, struct csictl_run *r);
/* Frees what a failed test left; for teardown. */
void csictl_runner_cleanup(struct csictl_runner *rn);
/* Fails the test unless r exited 0. */
void csictl_expect_ok(const struct csictl_run *r);
/* Fails the test unless r exited with status and its stderr contains in_stderr. */
void csictl_expect_fail(const struct csictl_run *r, int status, const char *in_stderr);
/* r's stdout parsed as JSON (a new reference); fails the test when it is not JSON. */
json_t *csictl_expect_json(const struct csictl_run *r);

#endif
