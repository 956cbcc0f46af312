/*
 * The decision of a reconciler pass over a volume (reconcile_volume.c runs
 * it): the single next step, a pure function of the stored record and of
 * what is known of the plugin's controller, so tests drive it with no
 * store, plugin or clock (test/unit/test_reconcile_steps.c).
 *
 * By volume state:
 *   creating     -> CreateVolume (a snapshot or volume source resolved to
 *                   the plugin's ID through the store), then ready with
 *                   the plugin's ID, context, capacity and topology; a
 *                   final error (or a missing capability) -> failed
 *   registering  -> ValidateVolumeCapabilities; every requested
 *                   capability confirmed -> ready, else failed (no
 *                   controller service at all: ready, nothing to check)
 *   ready        -> the claim steps below, then ControllerExpandVolume
 *                   (node expansion flagged when asked), then
 *                   ControllerModifyVolume (mutable parameters merged)
 *   deleting     -> the claim steps, then once no claim nor publication
 *                   is left DeleteVolume and the record goes (no plugin
 *                   ID: looked up by name with CreateVolume first)
 *   failed       -> nothing (the error stays in the status)
 *
 * The claim and publication rules, level-triggered (every pass re-derives
 * them from the record):
 *   claim controller-unpublished           -> freed (into past claims)
 *   claim node-unpublished on node N:
 *     no publication on N, or another claim
 *     on N still claimed (it needs the pub)  -> controller-unpublished, and
 *                                               freed in the same write
 *     publication on N not yet unpublishing  -> publication unpublishing
 *   publication with no active claim on N    -> unpublishing
 *   publication unpublishing, N claimed again -> publishing
 *   claim claimed, no publication on N, the
 *     plugin has PUBLISH_UNPUBLISH_VOLUME    -> publication publishing
 *     (no healthy controller to say whether
 *     it has: retried with backoff until one is)
 *   publication unpublishing                 -> ControllerUnpublishVolume, dropped
 *   publication publishing                   -> ControllerPublishVolume, published
 * So a claim is freed only after the unpublish of its node succeeded (or
 * was never needed), and the claim's plugin node ID from claim time is
 * what the publication and the unpublish use (DESIGN.md lesson 3).
 */
#include "server/reconcile_int.h"

#include <stdint.h>
#include <string.h>

const char *reconcile_step_name(enum reconcile_step_kind k)
{
	static const char *const names[] = {
	    [RSTEP_NONE] = "none",
	    [RSTEP_FAILED] = "failed",
	    [RSTEP_CREATE] = "create",
	    [RSTEP_CREATE_LACKS] = "create",
	    [RSTEP_VALIDATE] = "validate",
	    [RSTEP_REGISTERED] = "register",
	    [RSTEP_CLAIM_FREE] = "free claim",
	    [RSTEP_CLAIM_CONTROLLER_DONE] = "claim controller-unpublished",
	    [RSTEP_PUB_UNPUBLISHING] = "mark unpublishing",
	    [RSTEP_PUB_REPUBLISH] = "mark publishing",
	    [RSTEP_PUB_ADD] = "add publication",
	    [RSTEP_UNPUBLISH] = "controller unpublish",
	    [RSTEP_PUBLISH] = "controller publish",
	    [RSTEP_EXPAND] = "expand",
	    [RSTEP_MODIFY] = "modify",
	    [RSTEP_DELETE] = "delete",
	    [RSTEP_REMOVE] = "remove",
	    [RSTEP_LACKS] = "lacks",
	};

	if ((unsigned)k >= sizeof(names) / sizeof(names[0]) || names[k] == NULL)
		return "unknown";
	return names[k];
}

bool reconcile_step_rpc(enum reconcile_step_kind k)
{
	return k == RSTEP_CREATE || k == RSTEP_VALIDATE || k == RSTEP_UNPUBLISH ||
	       k == RSTEP_PUBLISH || k == RSTEP_EXPAND || k == RSTEP_MODIFY || k == RSTEP_DELETE;
}

/* Whether a claim on node is still claimed (so needs the node's publication). */
static bool rs_node_claimed(const struct model_volume *v, const char *node)
{
	for (size_t i = 0; i < v->nclaims; i++)
		if (v->claims[i].state == MODEL_CLAIM_CLAIMED &&
		    strcmp(v->claims[i].node_id, node) == 0)
			return true;
	return false;
}

/* Whether any active claim is on node. */
static bool rs_node_active(const struct model_volume *v, const char *node)
{
	for (size_t i = 0; i < v->nclaims; i++)
		if (strcmp(v->claims[i].node_id, node) == 0)
			return true;
	return false;
}

static size_t rs_pub_index(const struct model_volume *v, const char *node)
{
	const struct model_publication *p = model_volume_pub(v, node);

	return p != NULL ? (size_t)(p - v->pubs) : SIZE_MAX;
}

static void rs_set(struct reconcile_step *out, enum reconcile_step_kind k, size_t index)
{
	out->kind = k;
	out->index = index;
}

/*
 * The step k, or LACKS when a controller that answered lacks cap (name).
 * Without one (down, or none found) the step stays k and waits for it.
 */
static void rs_gate(struct reconcile_step *out, enum reconcile_ctrl ctrl, uint64_t caps,
		    uint64_t cap, const char *name, enum reconcile_step_kind k, size_t index)
{
	rs_set(out, k, index);
	if (ctrl == RECONCILE_CTRL_UP && (caps & cap) == 0) {
		out->kind = RSTEP_LACKS;
		out->blocked = k;
		out->missing = name;
	}
}

/* The store-only steps of claims and publications; false when there is none. */
static bool rs_next_claims(const struct model_volume *v, enum reconcile_ctrl ctrl, uint64_t caps,
			   struct reconcile_step *out)
{
	for (size_t i = 0; i < v->nclaims; i++)
		if (v->claims[i].state == MODEL_CLAIM_CONTROLLER_UNPUBLISHED) {
			rs_set(out, RSTEP_CLAIM_FREE, i);
			return true;
		}
	for (size_t i = 0; i < v->nclaims; i++) {
		const struct model_claim *c = &v->claims[i];
		size_t p;

		if (c->state != MODEL_CLAIM_NODE_UNPUBLISHED)
			continue;
		p = rs_pub_index(v, c->node_id);
		if (p == SIZE_MAX || rs_node_claimed(v, c->node_id)) {
			rs_set(out, RSTEP_CLAIM_CONTROLLER_DONE, i);
			return true;
		}
		if (v->pubs[p].state != MODEL_PUB_UNPUBLISHING) {
			rs_set(out, RSTEP_PUB_UNPUBLISHING, p);
			return true;
		}
	}
	for (size_t p = 0; p < v->npubs; p++) {
		const struct model_publication *pub = &v->pubs[p];

		if (pub->state != MODEL_PUB_UNPUBLISHING && !rs_node_active(v, pub->node_id)) {
			rs_set(out, RSTEP_PUB_UNPUBLISHING, p);
			return true;
		}
		if (pub->state == MODEL_PUB_UNPUBLISHING && rs_node_claimed(v, pub->node_id)) {
			rs_set(out, RSTEP_PUB_REPUBLISH, p);
			return true;
		}
	}
	for (size_t i = 0; i < v->nclaims; i++) {
		if (v->claims[i].state != MODEL_CLAIM_CLAIMED ||
		    rs_pub_index(v, v->claims[i].node_id) != SIZE_MAX)
			continue;
		/*
		 * The server adds the publication with the claim when the plugin
		 * needs one; this repairs a record that lacks it (a claim granted
		 * before the controller's capabilities were known). Whether it is
		 * needed only a controller says: while none is up the step waits
		 * for one (retried like an RPC step), never idle with the claim
		 * unpublished.
		 */
		if (ctrl == RECONCILE_CTRL_DOWN ||
		    (ctrl == RECONCILE_CTRL_UP &&
		     (caps & RECONCILE_CAP(PUBLISH_UNPUBLISH_VOLUME)))) {
			rs_set(out, RSTEP_PUB_ADD, i);
			return true;
		}
	}
	return false;
}

void reconcile_volume_next(const struct model_volume *v, enum reconcile_ctrl ctrl, uint64_t caps,
			   struct reconcile_step *out)
{
	const uint64_t pubcap = RECONCILE_CAP(PUBLISH_UNPUBLISH_VOLUME);

	memset(out, 0, sizeof(*out));
	switch (v->state) {
	case MODEL_VOL_FAILED:
		rs_set(out, RSTEP_FAILED, 0);
		return;
	case MODEL_VOL_CREATING:
		rs_set(out, RSTEP_CREATE, 0);
		if (ctrl != RECONCILE_CTRL_UP)
			return;
		if ((caps & RECONCILE_CAP(CREATE_DELETE_VOLUME)) == 0)
			out->missing = "CREATE_DELETE_VOLUME";
		else if (v->snapshot_source && (caps & RECONCILE_CAP(CREATE_DELETE_SNAPSHOT)) == 0)
			out->missing = "CREATE_DELETE_SNAPSHOT";
		else if (v->clone_source && (caps & RECONCILE_CAP(CLONE_VOLUME)) == 0)
			out->missing = "CLONE_VOLUME";
		if (out->missing != NULL)
			out->kind = RSTEP_CREATE_LACKS;
		return;
	case MODEL_VOL_REGISTERING:
		rs_set(out, ctrl == RECONCILE_CTRL_NONE ? RSTEP_REGISTERED : RSTEP_VALIDATE, 0);
		return;
	case MODEL_VOL_READY:
	case MODEL_VOL_DELETING:
		break;
	}
	if (rs_next_claims(v, ctrl, caps, out))
		return;
	for (size_t p = 0; p < v->npubs; p++)
		if (v->pubs[p].state == MODEL_PUB_UNPUBLISHING) {
			rs_gate(out, ctrl, caps, pubcap, "PUBLISH_UNPUBLISH_VOLUME",
				RSTEP_UNPUBLISH, p);
			return;
		}
	for (size_t p = 0; p < v->npubs; p++)
		if (v->pubs[p].state == MODEL_PUB_PUBLISHING) {
			rs_gate(out, ctrl, caps, pubcap, "PUBLISH_UNPUBLISH_VOLUME", RSTEP_PUBLISH,
				p);
			return;
		}
	if (v->state == MODEL_VOL_READY) {
		if (v->pending_capacity_min > 0)
			rs_gate(out, ctrl, caps, RECONCILE_CAP(EXPAND_VOLUME), "EXPAND_VOLUME",
				RSTEP_EXPAND, 0);
		else if (v->pending_mutable.n > 0)
			rs_gate(out, ctrl, caps, RECONCILE_CAP(MODIFY_VOLUME), "MODIFY_VOLUME",
				RSTEP_MODIFY, 0);
		return;
	}
	/* Deleting: once every claim is freed and every publication gone. */
	if (v->nclaims > 0 || v->npubs > 0)
		return;
	/*
	 * Never created as far as the record knows; but a CreateVolume whose
	 * answer was lost may have made it, so it is looked up by name
	 * (CreateVolume is idempotent by name) before the record goes.
	 */
	if (v->external_id == NULL)
		rs_set(out,
		       ctrl != RECONCILE_CTRL_UP ||
			       ((caps & RECONCILE_CAP(CREATE_DELETE_VOLUME)) && v->ncaps > 0)
			   ? RSTEP_CREATE
			   : RSTEP_REMOVE,
		       0);
	else
		rs_gate(out, ctrl, caps, RECONCILE_CAP(CREATE_DELETE_VOLUME),
			"CREATE_DELETE_VOLUME", RSTEP_DELETE, 0);
}
