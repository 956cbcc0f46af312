/*
 * Test helper: a small cluster of real processes for end-to-end tests of
 * several nodes. One `csid server` (struct server_proc, with an ACL token
 * that writes and the same secret as its agent_token) and N `csid agent`s
 * (struct agent_proc) named node-1 .. node-N, each joined to the server
 * with a fast heartbeat and a TCP listener for the controller RPCs the
 * server runs through it, each supervising its own csi-hostpath monolith
 * with controller publish on.
 *
 * Every csi-hostpath shares the first agent's hostpath data dir: the
 * plugin keeps its state in SQLite there, which serialises the processes
 * that share it, and accepts as ControllerPublishVolume targets the node
 * IDs of every instance on that dir (csi-hostpath --help). So a volume
 * created through any node's plugin is the same directory for all of them,
 * as a networked file system would be, while each node stages and
 * publishes under its own agent's directory.
 *
 * cluster_cleanup works after any failure: the agents in reverse order
 * (each detaches its mounts and kills its plugins; the first agent's
 * directory, holding the shared volumes, goes last), then the server.
 */
#ifndef CSID_TEST_CLUSTER_H
#define CSID_TEST_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>

#include "agent_proc.h"
#include "csictl_run.h"
#include "server_proc.h"

#define CLUSTER_NODES_MAX 4
/* The ACL token of the server (write), also the agents' server_token. */
#define CLUSTER_TOKEN "cluster-e2e-token-5d2"
/* Longest wait for a state change the cluster converges to. */
#define CLUSTER_WAIT_MS 60000

struct cluster {
	struct server_proc s;
	int n;
	struct agent_proc *a[CLUSTER_NODES_MAX]; /* owned */
	char node[CLUSTER_NODES_MAX][16]; /* "node-1" ... */
	/* The environment csictl needs to talk to node i's agent and the server. */
	char server_env[128];
	char agent_env[CLUSTER_NODES_MAX][AGENT_PROC_PATH + 32];
	struct csictl_runner rn; /* capture files in the server's directory */
	/* Set before cluster_start: more top-level keys of agent i's config ("\"k\": v,"). */
	const char *agent_extra[CLUSTER_NODES_MAX];
};

/*
 * Starts the server and n agents (1..CLUSTER_NODES_MAX) and waits until the
 * server counts n healthy controller and node plugins of AGENT_PROC_HP_ID.
 * Returns 0 or -1 (printing the logs; cluster_cleanup still cleans up).
 */
int cluster_start(struct cluster *c, int n);

/* cmocka-style setup and teardown of a struct cluster in *state with 2 nodes. */
int cluster_setup2(void **state);
int cluster_teardown(void **state);

/*
 * Runs csictl with args (NULL-terminated) as on node i (0-based): the
 * server's address, node i's agent and the token in its environment. *r
 * is freed by csictl_runner_free(&c->rn, r) or at cluster_cleanup.
 */
void cluster_csictl(struct cluster *c, int i, struct csictl_run *r, char *const *args);

/*
 * Writes a volume spec with id, 1 MiB, the one capability access_mode
 * (file-system) to <server dir>/<id>.json and creates it with `csictl
 * volume create FILE -wait`; fails the test unless it ends ready.
 */
void cluster_create_volume(struct cluster *c, const char *id, const char *access_mode);

/* The volume as GET /v1/volume/<id> shows it (a new reference); fails unless 200. */
json_t *cluster_volume(struct cluster *c, const char *id);

/*
 * Polls until volume id holds no claim nor publication and its past
 * claims include every allocation of allocs (NULL-terminated), freed.
 */
bool cluster_wait_freed(struct cluster *c, const char *id, const char *const *allocs);

/* Prints every log of the cluster (for a failure). */
void cluster_dump_logs(struct cluster *c, const char *why);

/* Stops and removes everything (see above). Safe to call more than once. */
void cluster_cleanup(struct cluster *c);

#endif
