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
 * (CSI: SINGLE_NODE_WRITER is "published once as read/write on a single
 * node"; the alpha SINGLE_NODE_SINGLE_WRITER is read/write "by a single
 * workload" and SINGLE_NODE_MULTI_WRITER "by many workloads" on a single
 * node; MULTI_NODE_SINGLE_WRITER has "only one node read/write, the rest
 * read-only".)
 * Every active claim (claimed, node-unpublished, controller-unpublished)
 * holds the volume: a claim being released still counts until it is
 * freed. Such a refusal is a conflict while a claimed holder stands in the
 * way, and failed_precondition when only releasing ones do (they free
 * themselves, so the request is to be retried, as a precondition not met
 * yet: the agent does, and a volume unmounted on one node then mounts on
 * the next once the first one's unpublish is done). A write claim needs a writable mode; a read
 * claim is read-only. A claim by an allocation that already holds one with the same request is
 * granted again (idempotent); with another request it conflicts.
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
	bool held_by_agent; /* the node's agent claims for its own mount flow */
};

/* What the server knows about the plugin and the claiming node. */
struct model_claim_env {
	bool controller_required; /* the plugin has PUBLISH_UNPUBLISH_VOLUME */
	bool controller_healthy;
	/*
	 * No controller is healthy and one has not reported its capabilities
	 * yet (starting): whether it needs ControllerPublishVolume is unknown.
	 */
	bool controller_unknown;
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
 * Checks req against v and env, in this order, and returns 0 with
 * *verdict, or the first reason it fails:
 *   MODEL_CLAIM_ALREADY - the allocation holds a claimed (not releasing)
 *                     claim with the same node, mode and capability;
 *   CSID_EINVAL     - a hostile alloc or node ID, an unknown mode, a
 *                     capability that is not one of the volume's, or a
 *                     write claim with a read-only mode;
 *   CSID_ECONFLICT  - the allocation holds another claim; or the
 *                     holders prevent it, e->msg naming them ("volume
 *                     data: single-node-writer: held for writing by alloc
 *                     web-1 (write) on node n1"; a releasing holder shows
 *                     its state; four are named, the rest counted);
 *                     CSID_EPRECOND instead, with the same message, when
 *                     that claim or every holder in the way is releasing;
 *   CSID_EPRECOND   - the volume is not ready (creating, registering,
 *                     deleting, failed), not schedulable (no healthy
 *                     controller when one is required or may be (its
 *                     capabilities not known yet), no healthy node
 *                     plugin on the node, or no plugin node ID for
 *                     ControllerPublishVolume), the node cannot see its
 *                     topology, or the node is at its plugin's max volumes
 *                     (a volume in use on the node already does not count).
 * The holder conflicts are checked after the preconditions.
 */
int model_claim_check(const struct model_volume *v, const struct model_claim_request *req,
		      const struct model_claim_env *env, enum model_claim_verdict *verdict,
		      struct err *e);

/*
 * Adds the claim of req to v (allocated in a), in state claimed, at
 * now_ms, read-only for a read claim, with env->plugin_node_id. When the
 * plugin requires controller publish it also makes sure of the
 * publication to the node: a new one (publishing) when there is none; an
 * unpublishing one is wanted again (publishing); a read-only one with a
 * new writer becomes read/write and publishing. Call only after
 * model_claim_check granted it (CSID_EEXIST when the allocation holds a
 * claim already; v unchanged).
 */
int model_claim_add(struct arena *a, struct model_volume *v, const struct model_claim_request *req,
		    const struct model_claim_env *env, int64_t now_ms, struct err *e);

/*
 * The publication part of model_claim_add alone (allocated in a), for a
 * plugin that requires controller publish: makes sure of the publication
 * of v to req->node_id that a claim of req needs, with
 * env->plugin_node_id. The reconciler uses it to repair a stored claim
 * that has none. Returns 0 or CSID_ENOMEM.
 */
int model_claim_add_pub(struct arena *a, struct model_volume *v,
			const struct model_claim_request *req, const struct model_claim_env *env,
			struct err *e);

#endif
