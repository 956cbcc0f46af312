/*
 * Controller plugins behind agents: the reconciler_controllers seam for
 * plugins that agents supervise. acquire(plugin_id) reads the node
 * records (their fingerprints) as stored now (decoded once per change,
 * server/server_pcache.h), keeps the ready nodes that
 * have an agent address and a healthy controller plugin of that ID, and
 * chooses one: the node it used last for that plugin while it stays a
 * candidate, else the first other candidate (by node ID), the node whose
 * agent last failed at the transport only when nothing else is left. The
 * client it hands out runs each RPC as one HTTP request to that agent
 * (csi/csi_remote.h), with the reconciler's deadline, and maps the answer
 * back to the gRPC code and response message, so everything above
 * (csi_rules, the reconciler) is unchanged. An agent that cannot be
 * reached, or refuses the call, reads as UNAVAILABLE (retried with
 * backoff, the message shown in the volume's status).
 *
 * Composition: with host controllers given (controllers.h), a plugin the
 * host runs is driven there (its acquire answers anything but
 * CSID_ENOTFOUND); any other goes through the agents.
 *
 * Threading: acquire, release and the clients' call are thread-safe.
 */
#ifndef CSID_SERVER_CONTROLLERS_REMOTE_H
#define CSID_SERVER_CONTROLLERS_REMOTE_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "server/reconciler.h"
#include "store/store.h"
#include "util/err.h"

struct controllers_remote_config {
	struct store *store; /* borrowed, required: the node records */
	const char *token; /* copied: presented to agents (X-Csid-Token); NULL: none */
	/* Optional: the host's controllers, asked first (controllers_seam). */
	struct reconciler_controllers host;
};

struct controllers_remote;

/* Returns 0 and *out, or CSID_EINVAL / CSID_ENOMEM with e set. */
int controllers_remote_new(const struct controllers_remote_config *cfg,
			   struct controllers_remote **out, struct err *e);

/* The seam for server_config.controllers (valid until controllers_remote_free). */
struct reconciler_controllers controllers_remote_seam(struct controllers_remote *r);

/* Frees (wiping the token), after the reconciler stopped; NULL is a no-op. */
void controllers_remote_free(struct controllers_remote *r);

/*
 * The choice, pure: among nodes[0..n), the candidates for plugin_id as
 * above; last and avoid are node IDs (NULL: none). Returns 0 with *chosen
 * (an index into nodes) and *caps (the controller's capability bits,
 * indexed by the CSI enum values, from the names in its fingerprint); or
 * CSID_EUNAVAIL ("no healthy controller for plugin X: node-1: <health>;
 * ...") when nodes list the plugin but none is a candidate, or
 * CSID_ENOTFOUND ("no controller plugin X on any node") when none lists
 * it, with e set.
 */
int controllers_remote_choose(struct model_node *const *nodes, size_t n, const char *plugin_id,
			      const char *last, const char *avoid, size_t *chosen, uint64_t *caps,
			      struct err *e);

/*
 * A client for the agent at address (e.g. "http://10.0.0.5:4650" or
 * "10.0.0.5:4650") that runs plugin_id's controller RPCs there,
 * presenting token (borrowed: must outlive the client; NULL: none).
 * node_id names it in messages. Returns 0 and *out (csi_client_free), or
 * CSID_ENOMEM / CSID_EINVAL with e set. The client is not tied to a
 * struct controllers_remote (it marks no failover); for tests.
 */
int controllers_remote_client_new(const char *address, const char *node_id, const char *plugin_id,
				  const char *token, struct csi_client **out, struct err *e);

#endif
