/*
 * Test helper: the fixture of the Docker/Podman volume plugin tests. A
 * cluster (test/lib/cluster.h) of n nodes whose agents serve the volume
 * plugin under names unique to the test program's run, and one engine
 * per node (test/lib/engine.h): a sandboxed dockerd that finds the
 * plugin socket in /run/docker/plugins, or Podman told the socket in its
 * containers.conf. Engines that cannot start here leave skip set with
 * the reason; bridge_env_teardown stops the engines before the cluster
 * (their containers hold the agents' mounts) and removes the sockets a
 * killed agent leaves.
 */
#ifndef CSID_TEST_BRIDGE_ENV_H
#define CSID_TEST_BRIDGE_ENV_H

#include <stdbool.h>

#include "cluster.h"
#include "engine.h"

#define BRIDGE_ENV_OUT 16384

struct bridge_env {
	struct cluster c;
	int n;
	struct engine en[2];
	char plugin[2][40]; /* the plugin name each agent serves */
	char socket[2][96];
	char extra[2][512];
	bool skip;
	char why[256];
	char out[BRIDGE_ENV_OUT]; /* output of the last engine command */
};

/* cmocka setups: a new struct bridge_env in *state, with n Docker engines or one Podman. */
int bridge_env_setup_docker1(void **state);
int bridge_env_setup_docker2(void **state);
int bridge_env_setup_podman(void **state);
int bridge_env_teardown(void **state);

/* At the start of a test: prints why and skips it when no engine can run here. */
#define BRIDGE_ENV_SKIP(t)                                                                    \
	do {                                                                                  \
		if ((t)->skip) {                                                              \
			fprintf(stderr, "skipped: no container engine here: %s\n", (t)->why); \
			skip();                                                               \
		}                                                                             \
	} while (0)

/* Runs engine i's command (args NULL-terminated); its output in t->out. The exit status. */
int bridge_env_run(struct bridge_env *t, int i, const char *const *args);
/* The same, failing the test (with the cluster's logs) unless it exits 0. */
void bridge_env_ok(struct bridge_env *t, int i, const char *const *args);

/* Entries of dir but "." ones (0 when it does not exist): csi-hostpath's volumes. */
int bridge_env_entries(const char *dir);

/* Whether the note of a past claim of volume vol holds needle. */
bool bridge_env_past_note(struct bridge_env *t, const char *vol, const char *needle);

#endif
