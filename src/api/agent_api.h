/*
 * The agent's HTTP API (JSON over a unix socket, optionally TCP too), on
 * the event-driven HTTP layer of http.h: handlers run on its bounded
 * worker pool, so a mount that blocks on a slow plugin never stalls the
 * connections of other requests:
 *
 *   GET    /v1/agent/self                  node name, data dir, version, counts
 *   GET    /v1/agent/plugins               plugins: type, instances, active, health,
 *                                          fingerprint, supervisor state
 *   GET    /v1/agent/mounts                every mount record (no secrets)
 *   PUT    /v1/agent/mounts                mount; body: agent_api_decode_mount
 *   DELETE /v1/agent/mounts/<vol>/<alloc>  unmount; ?force=true: mounter_unmount_force
 *   PUT    /v1/agent/volumes/<vol>/mount   claim a volume of the servers for an
 *                                          allocation on this node, then mount it
 *   DELETE /v1/agent/volumes/<vol>/mount/<alloc>
 *                                          unmount, then release the claim
 *   PUT    /v1/agent/volumes/<vol>/mount/<alloc>/renew
 *                                          renew the lease that owns the mount
 *   GET    /v1/agent/owners                the owners of claim mounts (pid,
 *                                          cgroup, lease), and whether gone
 *   POST   /v1/agent/controller/<plugin>/<Method>
 *                                          one controller RPC for the server
 *                                          (csi/csi_remote.h); needs server_token
 *
 * On TCP nothing is served without authentication: the server_token in
 * X-Csid-Token (or "Authorization: Bearer"), or a client certificate of
 * the listener's tls.client_ca_file; otherwise 403 (401 for a missing or
 * bad certificate when one is required). The unix socket needs neither.
 *
 * Errors are {"error": "...", "code": "..."} with the HTTP status of the
 * csid error table (include/csid.h). Request bodies are capped
 * (AGENT_API_BODY_MAX, 413 beyond). Secrets are accepted, passed to the
 * plugin, and never returned nor logged; request bodies are never logged.
 */
#ifndef CSID_API_AGENT_API_H
#define CSID_API_AGENT_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "agent/claims.h"
#include "agent/config.h"
#include "agent/held_allocs.h"
#include "api/http.h"
#include "agent/mounter.h"
#include "agent/owners.h"
#include "plugins/plugin_manager.h"
#include "plugins/registry.h"
#include "plugins/supervisor.h"
#include "util/err.h"

#define AGENT_API_BODY_MAX (1024 * 1024)

struct agent_api_config {
	const char *socket_path; /* unix listener, required (replaced if stale) */
	const char *tcp_addr; /* optional "host:port" */
	struct plugin_manager *plugins; /* borrowed, required */
	struct registry *registry; /* borrowed, required */
	struct mounter *mounter; /* borrowed, required */
	struct supervisor *supervisor; /* borrowed, optional (plugin states) */
	const char *node_name;
	const char *data_dir;
	/* How long a mount waits for its plugin to become healthy (ms). */
	int64_t plugin_wait_ms;
	/*
	 * The secret the server presents to run controller RPCs here (copied;
	 * never logged); NULL or "": the controller endpoint refuses all.
	 */
	const char *server_token;
	/*
	 * The claim flow (borrowed, required) behind /v1/agent/volumes/ and
	 * /v1/agent/owners; the agent stops it (claims_shutdown) before
	 * agent_api_stop, so requests waiting on the servers end at once.
	 */
	struct claims *claims;
	/* Deadline of a controller RPC whose caller gave none (ms); 0: 15 s. */
	int64_t rpc_timeout_ms;
	/* The allocations reported to the servers (borrowed); NULL: none reported. */
	struct held_allocs *held;
	/* The Docker volume plugin (api/docker_plugin.h; borrowed); NULL or no name: off. */
	const struct config_docker *docker;
	struct http_limits limits; /* connections, timeouts, workers; zeros: defaults */
	struct http_tls tls; /* HTTPS on the TCP listener; zeros: plaintext */
};

struct agent_api;

/* Binds the listeners and starts serving. Returns 0 and *out, or a code with e set. */
int agent_api_start(const struct agent_api_config *cfg, struct agent_api **out, struct err *e);
/*
 * Stops accepting, waits for requests in flight, removes the socket file
 * and frees. NULL is a no-op.
 */
void agent_api_stop(struct agent_api *a);

/* A decoded PUT /v1/agent/mounts body; owns everything (secrets zeroed on free). */
struct agent_api_mount_req {
	struct mounter_request req; /* points into the fields below */
	void *json_; /* the parsed document the strings point into */
	struct mount_kv *kvs; /* volume context, publish context, secrets */
	const char **flags;
};

/*
 * Decodes and validates a mount request body of len bytes: JSON object,
 * only the documented keys, right types, names that are safe path
 * components, known attachment and access modes. Returns 0 and *out
 * (free with agent_api_mount_req_free), or CSID_EINVAL / CSID_ETOOBIG /
 * CSID_ENOMEM with e saying what is wrong (never echoing a secret).
 */
int agent_api_decode_mount(const char *body, size_t len, struct agent_api_mount_req **out,
			   struct err *e);
void agent_api_mount_req_free(struct agent_api_mount_req *r);

/* A decoded PUT /v1/agent/volumes/<vol>/mount body. */
struct agent_api_claim {
	/* The request (volume_id NULL: the caller sets it); strings point into doc_. */
	struct claims_mount_req req;
	struct owners_spec owner; /* req.owner points here when the body had one */
	json_t *doc_; /* the parsed body (free with agent_api_claim_clear) */
};

/*
 * Decodes the body of PUT /v1/agent/volumes/<vol>/mount (len bytes: a
 * JSON object of alloc_id, read_only, access_mode, attachment_mode and
 * owner, each checked; the owner as agent_api_decode_owner) into *out.
 * Returns 0 (clear *out with agent_api_claim_clear), or CSID_EINVAL /
 * CSID_ENOMEM with e set (nothing to clear).
 */
int agent_api_decode_claim(const char *body, size_t len, struct agent_api_claim *out,
			   struct err *e);
/* Frees what a decoded claim holds. */
void agent_api_claim_clear(struct agent_api_claim *c);

/*
 * Decodes the "owner" of a PUT /v1/agent/volumes/<vol>/mount body (len
 * bytes): absent (*present false), or an object of exactly one of
 * "pid" (1 to 4194304), "cgroup" (owners_cgroup_path_check) or
 * "lease_ms" (owners_lease_check). Nothing is checked on the system.
 * Returns 0 with *out and *present, or CSID_EINVAL with e set.
 */
int agent_api_decode_owner(const char *body, size_t len, struct owners_spec *out, bool *present,
			   struct err *e);

/*
 * Splits "/v1/agent/mounts/<vol>/<alloc>" into its names (checked as path
 * components) in vol and alloc (MOUNT_NAME_MAX + 1 bytes each). Returns 0
 * or CSID_EINVAL with e set.
 */
int agent_api_parse_mount_path(const char *url, char *vol, char *alloc, struct err *e);

/*
 * The "force" query parameter of a DELETE: NULL (absent), "false" or "0"
 * give false, "true" or "1" true. Returns 0 with *out, or CSID_EINVAL
 * with e set for any other value.
 */
int agent_api_parse_force(const char *value, bool *out, struct err *e);

#endif
