/*
 * Test helper: runs the real csictl program (CSICTL_BIN) with posix_spawn
 * and captures its stdout, stderr and exit status. Output goes through
 * two files in a directory the test owns; the run is bounded by a
 * deadline (the child is killed with SIGKILL when it passes it).
 */
#ifndef CSID_TEST_CSICTL_RUN_H
#define CSID_TEST_CSICTL_RUN_H

#include <stdint.h>

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

/* Frees what a run captured; safe to call twice. */
void csictl_run_free(struct csictl_run *r);

#endif
