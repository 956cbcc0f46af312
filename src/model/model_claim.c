/*
 * Claim rules (model_claim.h states them): whether an allocation may
 * claim a volume, checked in this order so that the most useful reason
 * wins: the allocation's own claim (idempotent re-claim), the volume's
 * state, the capability asked for, the plugin's health, the node's
 * topology and volume limit, then the holders. Conflict messages name
 * the holders that stand in the way ("alloc web-1 (write) on node n1").
 * Pure functions over the model's structs.
 */
#include "model/model_claim.h"

#include <stdio.h>
#include <string.h>

#include "model/model_int.h"

/* Holders named in one message; more are counted. */
#define MODEL_CLAIM_NAMED 4

/* Which active claims a conflict names. */
enum model_claim_who {
	MODEL_WHO_ALL,
	MODEL_WHO_OTHER_NODE,
	MODEL_WHO_WRITERS,
	MODEL_WHO_OTHER_CAP,
};

static bool model_claim_active(const struct model_claim *c)
{
	return c->state < MODEL_CLAIM_FREED;
}

static bool model_claim_is(const struct model_claim *c, const struct model_claim_request *req,
			   enum model_claim_who who)
{
	if (!model_claim_active(c))
		return false;
	switch (who) {
	case MODEL_WHO_ALL:
		return true;
	case MODEL_WHO_OTHER_NODE:
		return strcmp(c->node_id, req->node_id) != 0;
	case MODEL_WHO_WRITERS:
		return c->mode == MODEL_CLAIM_WRITE;
	case MODEL_WHO_OTHER_CAP:
		return c->cap.access != req->cap.access || c->cap.attachment != req->cap.attachment;
	}
	return false;
}

/* "alloc a (write) on node n1, alloc b (read, node-unpublished) on node n2
 * and 3 more" into buf: the claims of v that are `who`. */
static const char *model_claim_holders(char *buf, size_t cap, const struct model_volume *v,
				       const struct model_claim_request *req,
				       enum model_claim_who who)
{
	size_t used = 0;
	int named = 0, more = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < v->nclaims; i++) {
		const struct model_claim *c = &v->claims[i];
		char qa[48], qn[48];
		int k;

		if (!model_claim_is(c, req, who))
			continue;
		if (named == MODEL_CLAIM_NAMED) {
			more++;
			continue;
		}
		k = snprintf(
		    buf + used, cap - used, "%salloc %s (%s%s%s) on node %s", named ? ", " : "",
		    model_sanitize(qa, sizeof(qa), c->alloc_id, strlen(c->alloc_id)),
		    model_claim_mode_name(c->mode), c->state == MODEL_CLAIM_CLAIMED ? "" : ", ",
		    c->state == MODEL_CLAIM_CLAIMED ? "" : model_claim_state_name(c->state),
		    model_sanitize(qn, sizeof(qn), c->node_id, strlen(c->node_id)));
		if (k < 0 || (size_t)k >= cap - used) {
			buf[used] = '\0';
			more++;
			named = MODEL_CLAIM_NAMED;
			continue;
		}
		used += (size_t)k;
		named++;
	}
	if (more)
		snprintf(buf + used, cap - used, " and %d more", more);
	return buf;
}

static bool model_claim_any(const struct model_volume *v, const struct model_claim_request *req,
			    enum model_claim_who who)
{
	for (size_t i = 0; i < v->nclaims; i++)
		if (model_claim_is(&v->claims[i], req, who))
			return true;
	return false;
}

/* Whether v is in use on node_id already (so a claim there adds no volume to it). */
static bool model_claim_on_node(const struct model_volume *v, const char *node_id)
{
	for (size_t i = 0; i < v->nclaims; i++)
		if (model_claim_active(&v->claims[i]) && strcmp(v->claims[i].node_id, node_id) == 0)
			return true;
	return model_volume_pub(v, node_id) != NULL;
}

static bool model_claim_has_cap(const struct model_volume *v, const struct model_capability *c)
{
	for (size_t i = 0; i < v->ncaps; i++)
		if (v->caps[i].access == c->access && v->caps[i].attachment == c->attachment)
			return true;
	return false;
}

/*
 * The code of a refusal by the holders that are `who`: a conflict while one
 * of them is claimed; failed_precondition when every one is being released
 * already, since the server frees them without anyone's help and the same
 * request then succeeds (an agent retries it; a workload moving to
 * another node waits for its old claim's unpublish instead of failing).
 */
static int model_claim_refusal(const struct model_volume *v, const struct model_claim_request *req,
			       enum model_claim_who who)
{
	for (size_t i = 0; i < v->nclaims; i++)
		if (model_claim_is(&v->claims[i], req, who) &&
		    v->claims[i].state == MODEL_CLAIM_CLAIMED)
			return CSID_ECONFLICT;
	return CSID_EPRECOND;
}

/* The holders against a request with a fixed (matching) capability. */
static int model_claim_holders_check(const struct model_volume *v,
				     const struct model_claim_request *req, struct err *e)
{
	enum model_access mode = req->cap.access;
	const char *mname = model_access_name(mode);
	char who[320];

	if (model_claim_any(v, req, MODEL_WHO_OTHER_CAP))
		return err_set(e, model_claim_refusal(v, req, MODEL_WHO_OTHER_CAP),
			       "volume %s: %s: held with another mode by %s", v->id, mname,
			       model_claim_holders(who, sizeof(who), v, req, MODEL_WHO_OTHER_CAP));
	if (mode == MODEL_ACCESS_SINGLE_NODE_SINGLE_WRITER &&
	    model_claim_any(v, req, MODEL_WHO_ALL))
		return err_set(e, model_claim_refusal(v, req, MODEL_WHO_ALL),
			       "volume %s: %s: one allocation at a time, held by %s", v->id, mname,
			       model_claim_holders(who, sizeof(who), v, req, MODEL_WHO_ALL));
	if (!model_access_multi_node(mode) && model_claim_any(v, req, MODEL_WHO_OTHER_NODE))
		return err_set(e, model_claim_refusal(v, req, MODEL_WHO_OTHER_NODE),
			       "volume %s: %s: held on another node by %s", v->id, mname,
			       model_claim_holders(who, sizeof(who), v, req, MODEL_WHO_OTHER_NODE));
	if (req->mode == MODEL_CLAIM_WRITE &&
	    (mode == MODEL_ACCESS_SINGLE_NODE_WRITER ||
	     mode == MODEL_ACCESS_MULTI_NODE_SINGLE_WRITER) &&
	    model_claim_any(v, req, MODEL_WHO_WRITERS))
		return err_set(e, model_claim_refusal(v, req, MODEL_WHO_WRITERS),
			       "volume %s: %s: held for writing by %s", v->id, mname,
			       model_claim_holders(who, sizeof(who), v, req, MODEL_WHO_WRITERS));
	return 0;
}

static bool model_claim_same(const struct model_claim *c, const struct model_claim_request *req)
{
	return c->state == MODEL_CLAIM_CLAIMED && strcmp(c->node_id, req->node_id) == 0 &&
	       c->mode == req->mode && c->cap.access == req->cap.access &&
	       c->cap.attachment == req->cap.attachment;
}

int model_claim_check(const struct model_volume *v, const struct model_claim_request *req,
		      const struct model_claim_env *env, enum model_claim_verdict *verdict,
		      struct err *e)
{
	const struct model_claim *held;
	const char *mname = model_access_name(req->cap.access);
	const char *aname = model_attachment_name(req->cap.attachment);
	int rc;

	rc =
	    model_id_check("alloc id", req->alloc_id, req->alloc_id ? strlen(req->alloc_id) : 0, e);
	if (!rc)
		rc = model_id_check("node id", req->node_id,
				    req->node_id ? strlen(req->node_id) : 0, e);
	if (rc)
		return err_wrap(e, "volume %s: claim", v->id);
	if (!mname || !aname || (req->mode != MODEL_CLAIM_READ && req->mode != MODEL_CLAIM_WRITE))
		return err_set(e, CSID_EINVAL, "volume %s: claim: unknown mode", v->id);
	held = model_volume_claim(v, req->alloc_id);
	if (held && model_claim_same(held, req)) {
		*verdict = MODEL_CLAIM_ALREADY;
		return 0;
	}
	/* Its own claim on the way out: the same as a releasing holder (above). */
	if (held)
		return err_set(
		    e, held->state == MODEL_CLAIM_CLAIMED ? CSID_ECONFLICT : CSID_EPRECOND,
		    "volume %s: alloc %s already holds a %s claim as %s/%s on node %s (%s)", v->id,
		    req->alloc_id, model_claim_mode_name(held->mode),
		    model_access_name(held->cap.access),
		    model_attachment_name(held->cap.attachment), held->node_id,
		    model_claim_state_name(held->state));
	if (v->state != MODEL_VOL_READY)
		return err_set(e, CSID_EPRECOND, "volume %s: not ready (%s)", v->id,
			       model_volume_state_name(v->state));
	if (!model_claim_has_cap(v, &req->cap))
		return err_set(e, CSID_EINVAL, "volume %s: %s/%s is not one of its capabilities",
			       v->id, mname, aname);
	if (req->mode == MODEL_CLAIM_WRITE && !model_access_writable(req->cap.access))
		return err_set(e, CSID_EINVAL, "volume %s: %s: a write claim is refused", v->id,
			       mname);
	if (env->controller_required && !env->controller_healthy)
		return err_set(e, CSID_EPRECOND,
			       "volume %s: not schedulable: plugin %s has no healthy controller",
			       v->id, v->plugin_id);
	/* Granted now, it would get no publication and be mounted unpublished. */
	if (!env->controller_required && env->controller_unknown)
		return err_set(
		    e, CSID_EPRECOND,
		    "volume %s: not schedulable: plugin %s's controller has not reported "
		    "its capabilities yet",
		    v->id, v->plugin_id);
	if (!env->node_plugin_healthy)
		return err_set(e, CSID_EPRECOND,
			       "volume %s: not schedulable: plugin %s has no healthy node plugin "
			       "on node %s",
			       v->id, v->plugin_id, req->node_id);
	/* ControllerPublishVolume needs the plugin's node ID (NodeGetInfo). */
	if (env->controller_required && (!env->plugin_node_id || !env->plugin_node_id[0]))
		return err_set(e, CSID_EPRECOND,
			       "volume %s: not schedulable: plugin %s on node %s reported no node "
			       "ID",
			       v->id, v->plugin_id, req->node_id);
	if (!model_volume_reachable(v, env->node_topology))
		return err_set(e, CSID_EPRECOND, "volume %s: not reachable from node %s (topology)",
			       v->id, req->node_id);
	if (env->max_volumes > 0 && env->node_volume_count >= env->max_volumes &&
	    !model_claim_on_node(v, req->node_id))
		return err_set(e, CSID_EPRECOND,
			       "volume %s: node %s has reached plugin %s's limit of %lld volumes",
			       v->id, req->node_id, v->plugin_id, (long long)env->max_volumes);
	rc = model_claim_holders_check(v, req, e);
	if (rc)
		return rc;
	*verdict = MODEL_CLAIM_GRANT;
	return 0;
}

int model_claim_add_pub(struct arena *a, struct model_volume *v,
			const struct model_claim_request *req, const struct model_claim_env *env,
			struct err *e)
{
	struct model_publication *pub = model_volume_pub(v, req->node_id), *pubs;
	bool ro = req->mode == MODEL_CLAIM_READ;

	if (pub) {
		/* A publication on its way out, or read-only for a new writer,
		 * is wanted again as this claim needs it: the reconciler
		 * publishes it once more (ControllerPublishVolume is idempotent). */
		bool leaving = pub->state == MODEL_PUB_UNPUBLISHING;

		if (leaving || (pub->read_only && !ro)) {
			pub->state = MODEL_PUB_PUBLISHING;
			pub->read_only = leaving ? ro : false;
			pub->cap = req->cap;
			if (env->plugin_node_id &&
			    !(pub->plugin_node_id = arena_strdup(a, env->plugin_node_id)))
				return err_set(e, CSID_ENOMEM, "volume %s: out of memory", v->id);
		}
		return 0;
	}
	pubs = arena_alloc(a, (v->npubs + 1) * sizeof(*pubs));
	if (!pubs)
		return err_set(e, CSID_ENOMEM, "volume %s: out of memory", v->id);
	if (v->npubs)
		memcpy(pubs, v->pubs, v->npubs * sizeof(*pubs));
	pub = &pubs[v->npubs];
	pub->node_id = arena_strdup(a, req->node_id);
	pub->plugin_node_id = arena_strdup(a, env->plugin_node_id);
	pub->cap = req->cap;
	pub->read_only = ro;
	pub->state = MODEL_PUB_PUBLISHING;
	if (!pub->node_id || (env->plugin_node_id && !pub->plugin_node_id))
		return err_set(e, CSID_ENOMEM, "volume %s: out of memory", v->id);
	v->pubs = pubs;
	v->npubs++;
	return 0;
}

int model_claim_add(struct arena *a, struct model_volume *v, const struct model_claim_request *req,
		    const struct model_claim_env *env, int64_t now_ms, struct err *e)
{
	struct model_claim *claims, *c;

	if (model_volume_claim(v, req->alloc_id))
		return err_set(e, CSID_EEXIST, "volume %s: alloc %s holds a claim already", v->id,
			       req->alloc_id);
	claims = arena_alloc(a, (v->nclaims + 1) * sizeof(*claims));
	if (!claims)
		return err_set(e, CSID_ENOMEM, "volume %s: out of memory", v->id);
	if (v->nclaims)
		memcpy(claims, v->claims, v->nclaims * sizeof(*claims));
	c = &claims[v->nclaims];
	c->alloc_id = arena_strdup(a, req->alloc_id);
	c->node_id = arena_strdup(a, req->node_id);
	c->plugin_node_id = arena_strdup(a, env->plugin_node_id);
	c->mode = req->mode;
	c->cap = req->cap;
	c->read_only = req->mode == MODEL_CLAIM_READ;
	c->held_by_agent = req->held_by_agent;
	c->state = MODEL_CLAIM_CLAIMED;
	c->claimed_ms = now_ms;
	c->updated_ms = now_ms;
	if (!c->alloc_id || !c->node_id || (env->plugin_node_id && !c->plugin_node_id))
		return err_set(e, CSID_ENOMEM, "volume %s: out of memory", v->id);
	if (env->controller_required) {
		int rc = model_claim_add_pub(a, v, req, env, e);

		if (rc)
			return rc;
	}
	v->claims = claims;
	v->nclaims++;
	return 0;
}
