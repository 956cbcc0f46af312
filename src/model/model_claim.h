/*
 * Claim rules: whether a volume may be claimed by an allocation, as a pure
 * function of the volume (its capabilities and active claims), the
 * request, and what the server knows of the plugin and the node. Used by
 * the server under compare-and-set (read the volume, check, write on the
 * index read), so that racing claims cannot both win.
 *
 * The rules, per access mode (the active claims fix the volume's access
 * and attachment mode while any is held; a claim with another mode is
 * refused until they are all freed):
 *   single-node-reader-only    readers, all on one node; no writer
 *   single-node-writer         one writer and any readers, all on one node
 *   single-node-single-writer  one allocation in all (reader or writer)
 *   single-node-multi-writer   any allocations, all on one node
 *   multi-node-reader-only     readers on any nodes; no writer
 *   multi-node-single-writer   one writer anywhere, readers anywhere
 *   multi-node-multi-writer    anything
 * Every active claim (claimed, node-unpublished, controller-unpublished)
 * holds the volume: a claim being released still counts until it is
 * freed. A write claim needs a writable mode; a read claim is read-only.
 * A claim by an allocation that already holds one with the same
 * request is granted again (idempotent); with another request it conflicts.
 */
#ifndef CSID_MODEL_MODEL_CLAIM_H
#define CSID_MODEL_MODEL_CLAIM_H

#include <stdbool.h>

#include "model/model.h"

struct model_claim_request {
	const char *alloc_id;
	const char *node_id;
	enum model_claim_mode mode;
	struct model_capability cap;
};

/* What the server knows about the plugin and the claiming node. */
struct model_claim_env {
	bool controller_required; /* the plugin has PUBLISH_UNPUBLISH_VOLUME */
	bool controller_healthy;
	bool node_plugin_healthy; /* a healthy node plugin on the claiming node */
	const char *plugin_node_id; /* its CSI node ID (NULL when none) */
	const struct model_topology *node_topology; /* its accessible topology, or NULL */
	int64_t max_volumes; /* node plugin's limit, 0: none */
	int64_t node_volume_count; /* volumes of this plugin published to the node now */
};

enum model_claim_verdict {
	MODEL_CLAIM_GRANT, /* a new claim */
	MODEL_CLAIM_ALREADY, /* the allocation holds this claim already */
};

/*
 * Checks req against v and env. Returns 0 with *verdict, or:
 *   CSID_ENOTFOUND  - never (the caller looked the volume up);
 *   CSID_EPRECOND   - the volume is not ready (creating, deleting, failed),
 *                     not schedulable (plugin unhealthy: says which part),
 *                     or the node cannot see its topology, or the node is
 *                     at its plugin's max volumes;
 *   CSID_EINVAL     - the capability is not one of the volume's, or a write
 *                     claim with a read-only mode;
 *   CSID_ECONFLICT  - the holders prevent it; e->msg names them
 *                     ("volume data: single-node-writer: held for writing by
 *                     alloc web-1 on node n1").
 */
int model_claim_check(const struct model_volume *v, const struct model_claim_request *req,
		      const struct model_claim_env *env, enum model_claim_verdict *verdict,
		      struct err *e);

/*
 * Adds the claim of req to v (allocated in a), in state claimed, at
 * now_ms, with env->plugin_node_id, and the publication it needs
 * (publishing) when the plugin requires controller publish and the node
 * has none yet. Call only after model_claim_check granted it.
 */
int model_claim_add(struct arena *a, struct model_volume *v, const struct model_claim_request *req,
		    const struct model_claim_env *env, int64_t now_ms, struct err *e);

#endif
