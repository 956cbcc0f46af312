/*
 * Test fixture for end-to-end tests of claims from the node: a real
 * `csid server` (tokens, short backoffs) and a real `csid agent` that
 * joined it by itself ("servers", node CLAIM_ENV_NODE), supervising
 * csi-hostpath as a monolith with controller publish on; csictl runs
 * with both addresses and the token (CLAIM_ENV_RUN); a spec file of the
 * volume "data" (1 MiB, one capability) is written for
 * `csictl volume create`. The teardown stops the agent first (its
 * cleanup detaches every mount it made), then the server, and checks
 * that the server never logged the token.
 */
#ifndef CSID_TEST_CLAIM_ENV_H
#define CSID_TEST_CLAIM_ENV_H

#include "agent_proc.h"
#include "csictl_run.h"
#include "server_proc.h"

#define CLAIM_ENV_NODE "node-e2e"
#define CLAIM_ENV_TOKEN "claims-e2e-token-71b"
#define CLAIM_ENV_WAIT_MS 60000

struct claim_env {
	void *a; /* struct agent_proc *, as agent_proc_setup_hostpath makes it */
	struct server_proc s;
	struct csictl_runner rn;
	struct csictl_run r;
	char server_env[128];
	char agent_env[AGENT_PROC_PATH + 32];
	char spec[SERVER_PROC_PATH + 16];
};

/*
 * Starts both and writes the spec with access_mode ("single-node-single-
 * writer"). Returns 0, or -1 (claim_env_teardown still cleans up).
 */
int claim_env_setup(struct claim_env *t, const char *access_mode);
/* Stops and removes everything; asserts the token never reached the server's log. */
void claim_env_teardown(struct claim_env *t);

/*
 * cmocka setup/teardown: a claim_env in *state (single-node-single-writer),
 * torn down and freed even when the test failed.
 */
int claim_env_cmocka_setup(void **state);
int claim_env_cmocka_teardown(void **state);

/* Runs csictl with the server's and the agent's addresses and the token; args NULL-terminated. */
#define CLAIM_ENV_RUN(t, ...)                                                                   \
	do {                                                                                    \
		char *env_[] = {(t)->server_env, (t)->agent_env, "CSID_TOKEN=" CLAIM_ENV_TOKEN, \
				NULL};                                                          \
		char *args_[] = {__VA_ARGS__, NULL};                                            \
		csictl_runner_run(&(t)->rn, &(t)->r, env_, args_);                              \
	} while (0)

#endif
