/*
 * One reconciler pass over a volume: read it, take the next step from its
 * stored state (reconcile_volume_next, pure, in reconcile_step.c, which
 * states the rules by volume state and for claims and publications), run
 * that step (at most one controller RPC) and write the result on the
 * index read.
 */
#include "server/reconcile_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csi/csi_rules.h"
#include "model/model_claim.h"
#include "server/server_pastclaims.h"

/* ---- request and response conversions ---- */

/* A CSI VolumeCapability for cap with the volume's mount options, in a. */
static Csi__V1__VolumeCapability *rv_cap(struct arena *a, const struct model_volume *v,
					 const struct model_capability *cap)
{
	Csi__V1__VolumeCapability *c = arena_alloc(a, sizeof(*c));
	Csi__V1__VolumeCapability__AccessMode *m = arena_alloc(a, sizeof(*m));

	if (c == NULL || m == NULL)
		return NULL;
	csi__v1__volume_capability__init(c);
	csi__v1__volume_capability__access_mode__init(m);
	m->mode = (Csi__V1__VolumeCapability__AccessMode__Mode)cap->access;
	c->access_mode = m;
	if (cap->attachment == MODEL_ATTACH_BLOCK_DEVICE) {
		Csi__V1__VolumeCapability__BlockVolume *b = arena_alloc(a, sizeof(*b));

		if (b == NULL)
			return NULL;
		csi__v1__volume_capability__block_volume__init(b);
		c->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
		c->block = b;
	} else {
		Csi__V1__VolumeCapability__MountVolume *mv = arena_alloc(a, sizeof(*mv));

		if (mv == NULL)
			return NULL;
		csi__v1__volume_capability__mount_volume__init(mv);
		if (v->fs_type != NULL)
			mv->fs_type = v->fs_type;
		mv->n_mount_flags = v->nmount_flags;
		mv->mount_flags = v->mount_flags;
		c->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
		c->mount = mv;
	}
	return c;
}

/* Every capability of v, for CreateVolume and ValidateVolumeCapabilities. */
static Csi__V1__VolumeCapability **rv_caps(struct arena *a, const struct model_volume *v)
{
	Csi__V1__VolumeCapability **caps = arena_alloc(a, (v->ncaps + 1) * sizeof(*caps));

	for (size_t i = 0; caps != NULL && i < v->ncaps; i++)
		if ((caps[i] = rv_cap(a, v, &v->caps[i])) == NULL)
			return NULL;
	return caps;
}

/* A model map from a protobuf map field's entries (every entry is base, key, value), in a. */
static int rv_map_from(struct arena *a, void *const *entries, size_t n, struct model_map *out)
{
	const struct {
		ProtobufCMessage base;
		char *key;
		char *value;
	} *const *kv = (const void *)entries;

	out->kv = NULL;
	out->n = 0;
	for (size_t i = 0; i < n; i++)
		if (model_map_put(a, out, kv[i]->key ? kv[i]->key : "",
				  kv[i]->value ? kv[i]->value : "", NULL) < 0)
			return CSID_ENOMEM;
	return 0;
}

static Csi__V1__Topology **rv_topologies(struct arena *a, const struct model_topology *t, size_t n)
{
	Csi__V1__Topology **out = arena_alloc(a, (n + 1) * sizeof(*out));

	for (size_t i = 0; out != NULL && i < n; i++) {
		out[i] = arena_alloc(a, sizeof(**out));
		if (out[i] == NULL)
			return NULL;
		csi__v1__topology__init(out[i]);
		if (reconcile_map_set(a, &out[i]->base, "segments", &t[i].segments) < 0)
			return NULL;
	}
	return out;
}

/* ---- the pass ---- */

struct rv_pass {
	struct reconcile_pass p;
	struct model_volume *v;
	uint64_t index; /* modify_index read */
	char what[MODEL_ID_MAX + 16]; /* "volume <id>" */
	struct reconcile_result *res;
};

/*
 * Writes the changed volume on the index read; success gives AGAIN, and
 * settled when the version written needs no further step: decided here on
 * it, with this pass's view of the controller, instead of by a second
 * pass that reads it back to find that (a store read and a copy per step).
 */
static int rv_write(struct rv_pass *s)
{
	struct reconcile_step next;
	struct model_history_map map;
	struct store_op ops[2];
	struct model_claim *freed;
	char *json = NULL;
	size_t len = 0, nfreed;
	bool history = false;
	struct err e;
	int rc;

	err_clear(&e);
	s->v->updated_ms = clock_wall_ms(s->p.env->clock);
	/* Claims that reached freed go to the volume's history, in the same transaction. */
	rc = server_pastclaims_take(s->p.env->store, s->p.env->vcache, s->v, s->p.a, &ops[1],
				    &history, &map, &freed, &nfreed, &e);
	if (rc < 0)
		return reconcile_fail(s->res, RECONCILE_RETRY, rc, "%s: %s", s->what, e.msg);
	rc = model_volume_encode(s->v, MODEL_VIEW_STORE, &json, &len, &e);
	if (rc < 0)
		return reconcile_fail(s->res, RECONCILE_RETRY, rc, "%s: encode: %s", s->what,
				      e.msg);
	ops[0] = (struct store_op){STORE_OP_PUT, STORE_VOLUME, s->v->id, json, len, s->index};
	rc = reconcile_txn(s->p.env, ops, history ? 2 : 1, s->res);
	model_wipe_free(json, len);
	if (rc == 0) {
		/* The next pass and the API's next read take it decoded. */
		server_vcache_put(s->p.env->vcache, s->v, s->res->wrote_index,
				  history ? &map : NULL);
		s->res->outcome = RECONCILE_AGAIN;
		reconcile_volume_next(s->v, s->p.ctrl, s->p.caps, &next);
		s->res->settled = next.kind == RSTEP_NONE;
	}
	return rc;
}

static int rv_nomem(struct rv_pass *s)
{
	return reconcile_fail(s->res, RECONCILE_RETRY, CSID_ENOMEM, "%s: out of memory", s->what);
}

/* A final error of create or register: the volume is failed, the error shown. */
static int rv_failed(struct rv_pass *s)
{
	struct reconcile_result keep = *s->res;

	s->v->state = MODEL_VOL_FAILED;
	/* Kept in the record, so the reason outlives the reconciler's memory. */
	s->v->failure = arena_strdup(s->p.a, keep.e.msg);
	if (rv_write(s) < 0)
		return -1;
	*s->res = keep;
	return -1;
}

/*
 * The plugin's ID of a snapshot or volume source, when it is ready. A
 * source still being made is waited for (RETRY, naming it in res so the
 * queue works this volume again as soon as the source moves); one that is
 * gone, failed or being deleted never will be (FINAL).
 */
static int rv_source(struct rv_pass *s, enum store_kind kind, const char *id, char **out)
{
	const char *state = "not found";
	bool wait = false;
	struct store_obj o;
	struct err e;
	int rc;

	err_clear(&e);
	*out = NULL;
	rc = store_get(s->p.env->store, kind, id, &o, &e);
	if (rc < 0 && rc != CSID_ENOTFOUND)
		return reconcile_fail(s->res, RECONCILE_RETRY, rc, "%s: create: %s", s->what,
				      e.msg);
	if (rc == 0 && kind == STORE_SNAPSHOT) {
		struct model_snapshot *snap;

		rc = model_snapshot_decode(s->p.a, o.value, o.len, &snap, &e);
		if (rc == 0 && snap->state == MODEL_SNAP_READY && snap->ready_to_use)
			*out = snap->external_id;
		if (rc == 0) {
			state = model_snapshot_state_name(snap->state);
			wait =
			    snap->state == MODEL_SNAP_CREATING || snap->state == MODEL_SNAP_READY;
		}
		store_obj_free(&o);
	} else if (rc == 0) {
		struct model_volume *src;

		rc = model_volume_decode(s->p.a, o.value, o.len, &src, &e);
		if (rc == 0 && src->state == MODEL_VOL_READY)
			*out = src->external_id;
		if (rc == 0) {
			state = model_volume_state_name(src->state);
			wait =
			    src->state == MODEL_VOL_CREATING || src->state == MODEL_VOL_REGISTERING;
		}
		store_obj_free(&o);
	}
	if (rc < 0 && rc != CSID_ENOTFOUND)
		return reconcile_fail(s->res, RECONCILE_RETRY, rc, "%s: create: %s source %s: %s",
				      s->what, store_kind_name(kind), id, e.msg);
	if (*out == NULL && wait) {
		s->res->wait_kind = kind;
		snprintf(s->res->wait_id, sizeof(s->res->wait_id), "%s", id);
	}
	if (*out == NULL)
		return reconcile_fail(s->res, wait ? RECONCILE_RETRY : RECONCILE_FINAL,
				      CSID_EPRECOND, "%s: create: %s source %s: %s", s->what,
				      store_kind_name(kind), id, wait ? "not ready" : state);
	return 0;
}

/* Removes the record on the index read. */
static int rv_remove(struct rv_pass *s)
{
	struct store_op ops[2] = {
	    {STORE_OP_DELETE, STORE_VOLUME, s->v->id, NULL, 0, s->index},
	    server_pastclaims_delete(s->v->id),
	};

	/* The volume's claim history goes with it. */
	if (reconcile_txn(s->p.env, ops, 2, s->res) < 0)
		return -1;
	s->res->outcome = RECONCILE_AGAIN;
	return 0;
}

/*
 * A create that did not go through. For a volume being deleted, its
 * record goes when the plugin cannot hold it: the create failed for good,
 * or its source is not there (still being made: the volume cannot have
 * been made from it; gone: it cannot be looked up). Otherwise a final
 * error makes the volume failed. (rv_source reports an unusable source
 * with CSID_EPRECOND, a store error with its own code.)
 */
static int rv_create_failed(struct rv_pass *s, bool deleting, bool source)
{
	if (deleting && ((source && s->res->e.code == CSID_EPRECOND) ||
			 (!source && s->res->outcome == RECONCILE_FINAL)))
		return rv_remove(s);
	return s->res->outcome == RECONCILE_FINAL ? rv_failed(s) : -1;
}

/*
 * CreateVolume: for a volume being created, then ready; for one being
 * deleted that has no plugin ID, to find it (kept deleting, DeleteVolume
 * follows), and when the plugin cannot have it, the record goes.
 */
static int rv_create(struct rv_pass *s)
{
	Csi__V1__CreateVolumeRequest req = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	Csi__V1__CapacityRange range = CSI__V1__CAPACITY_RANGE__INIT;
	Csi__V1__VolumeContentSource src = CSI__V1__VOLUME_CONTENT_SOURCE__INIT;
	Csi__V1__VolumeContentSource__SnapshotSource snap =
	    CSI__V1__VOLUME_CONTENT_SOURCE__SNAPSHOT_SOURCE__INIT;
	Csi__V1__VolumeContentSource__VolumeSource vol =
	    CSI__V1__VOLUME_CONTENT_SOURCE__VOLUME_SOURCE__INIT;
	Csi__V1__TopologyRequirement topo = CSI__V1__TOPOLOGY_REQUIREMENT__INIT;
	Csi__V1__CreateVolumeResponse *resp = NULL;
	struct model_volume *v = s->v;
	bool deleting = v->state == MODEL_VOL_DELETING;
	struct arena *a = s->p.a;
	int rc = -1;

	req.name = v->name ? v->name : v->id;
	if (v->capacity_min > 0 || v->capacity_max > 0) {
		range.required_bytes = v->capacity_min;
		range.limit_bytes = v->capacity_max;
		req.capacity_range = &range;
	}
	req.n_volume_capabilities = v->ncaps;
	req.volume_capabilities = rv_caps(a, v);
	if (req.volume_capabilities == NULL ||
	    reconcile_map_set(a, &req.base, "parameters", &v->parameters) < 0 ||
	    reconcile_map_set(a, &req.base, "secrets", &v->secrets) < 0 ||
	    reconcile_map_set(a, &req.base, "mutable_parameters", &v->mutable_parameters) < 0)
		return rv_nomem(s);
	if (v->snapshot_source != NULL) {
		if (rv_source(s, STORE_SNAPSHOT, v->snapshot_source, &snap.snapshot_id) < 0)
			return rv_create_failed(s, deleting, true);
		src.type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT;
		src.snapshot = &snap;
		req.volume_content_source = &src;
	} else if (v->clone_source != NULL) {
		if (rv_source(s, STORE_VOLUME, v->clone_source, &vol.volume_id) < 0)
			return rv_create_failed(s, deleting, true);
		src.type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME;
		src.volume = &vol;
		req.volume_content_source = &src;
	}
	if (v->nrequisite > 0 || v->npreferred > 0) {
		topo.n_requisite = v->nrequisite;
		topo.requisite = rv_topologies(a, v->requisite, v->nrequisite);
		topo.n_preferred = v->npreferred;
		topo.preferred = rv_topologies(a, v->preferred, v->npreferred);
		if (topo.requisite == NULL || topo.preferred == NULL)
			return rv_nomem(s);
		req.accessibility_requirements = &topo;
	}
	if (reconcile_rpc(&s->p, s->what, CSI_RPC_CREATE_VOLUME, &req.base,
			  (ProtobufCMessage **)&resp, s->res) < 0)
		return rv_create_failed(s, deleting, false);
	if (resp == NULL || resp->volume == NULL || resp->volume->volume_id == NULL ||
	    resp->volume->volume_id[0] == '\0') {
		reconcile_fail(s->res, RECONCILE_RETRY, CSID_EPROTO,
			       "%s: CreateVolume: plugin %s: answer without a volume ID", s->what,
			       s->p.plugin_id);
		goto out;
	}
	v->external_id = arena_strdup(a, resp->volume->volume_id);
	v->capacity = resp->volume->capacity_bytes;
	if (v->external_id == NULL ||
	    (resp->volume->n_volume_context > 0 &&
	     rv_map_from(a, (void *const *)resp->volume->volume_context,
			 resp->volume->n_volume_context, &v->context) < 0)) {
		rv_nomem(s);
		goto out;
	}
	v->naccessible = resp->volume->n_accessible_topology;
	v->accessible = arena_alloc(a, (v->naccessible + 1) * sizeof(*v->accessible));
	for (size_t i = 0; v->accessible != NULL && i < v->naccessible; i++) {
		const Csi__V1__Topology *t = resp->volume->accessible_topology[i];

		if (rv_map_from(a, (void *const *)t->segments, t->n_segments,
				&v->accessible[i].segments) < 0)
			v->accessible = NULL;
	}
	if (v->accessible == NULL) {
		rv_nomem(s);
		goto out;
	}
	if (!deleting)
		v->state = MODEL_VOL_READY;
	rc = rv_write(s);
out:
	csi_msg_free(resp ? &resp->base : NULL);
	return rc;
}

/* Whether confirmed lists a capability matching cap (access mode and type). */
static bool rv_confirmed(const Csi__V1__ValidateVolumeCapabilitiesResponse__Confirmed *c,
			 const struct model_capability *cap)
{
	for (size_t i = 0; i < c->n_volume_capabilities; i++) {
		const Csi__V1__VolumeCapability *vc = c->volume_capabilities[i];
		bool block = vc->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;

		if (vc->access_mode != NULL && (int)vc->access_mode->mode == (int)cap->access &&
		    block == (cap->attachment == MODEL_ATTACH_BLOCK_DEVICE))
			return true;
	}
	return false;
}

static int rv_validate(struct rv_pass *s)
{
	Csi__V1__ValidateVolumeCapabilitiesRequest req =
	    CSI__V1__VALIDATE_VOLUME_CAPABILITIES_REQUEST__INIT;
	Csi__V1__ValidateVolumeCapabilitiesResponse *resp = NULL;
	struct model_volume *v = s->v;
	struct arena *a = s->p.a;
	int rc = -1;

	req.volume_id = v->external_id ? v->external_id : "";
	req.n_volume_capabilities = v->ncaps;
	req.volume_capabilities = rv_caps(a, v);
	if (req.volume_capabilities == NULL ||
	    reconcile_map_set(a, &req.base, "volume_context", &v->context) < 0 ||
	    reconcile_map_set(a, &req.base, "parameters", &v->parameters) < 0 ||
	    reconcile_map_set(a, &req.base, "secrets", &v->secrets) < 0 ||
	    reconcile_map_set(a, &req.base, "mutable_parameters", &v->mutable_parameters) < 0)
		return rv_nomem(s);
	if (reconcile_rpc(&s->p, s->what, CSI_RPC_VALIDATE_VOLUME_CAPABILITIES, &req.base,
			  (ProtobufCMessage **)&resp, s->res) < 0)
		return s->res->outcome == RECONCILE_FINAL ? rv_failed(s) : -1;
	/* "The CO SHALL compare the confirmed capabilities with the ones it requested." */
	if (resp == NULL || resp->confirmed == NULL) {
		reconcile_fail(s->res, RECONCILE_FINAL, CSID_EPRECOND,
			       "%s: ValidateVolumeCapabilities: plugin %s: not confirmed%s%s",
			       s->what, s->p.plugin_id, resp && resp->message[0] ? ": " : "",
			       resp ? resp->message : "");
		rc = rv_failed(s);
		goto out;
	}
	for (size_t i = 0; i < v->ncaps; i++)
		if (!rv_confirmed(resp->confirmed, &v->caps[i])) {
			reconcile_fail(s->res, RECONCILE_FINAL, CSID_EPRECOND,
				       "%s: ValidateVolumeCapabilities: plugin %s: capability %s "
				       "%s not confirmed",
				       s->what, s->p.plugin_id,
				       model_access_name(v->caps[i].access),
				       model_attachment_name(v->caps[i].attachment));
			rc = rv_failed(s);
			goto out;
		}
	v->state = MODEL_VOL_READY;
	rc = rv_write(s);
out:
	csi_msg_free(resp ? &resp->base : NULL);
	return rc;
}

/*
 * Moves claims[i] on in memory: to controller-unpublished and at once to
 * freed, or from controller-unpublished to freed. 0, or -1 with res set.
 */
static int rv_claim_advance(struct rv_pass *s, size_t i, enum model_claim_state to)
{
	struct model_volume *v = s->v;
	const char *alloc = v->claims[i].alloc_id;
	/*
	 * Why it was released ("released", a lost claim's reason) stays with
	 * the claim up to freed: past_claims and the claim events show it.
	 */
	const char *note = v->claims[i].note;
	int64_t now = clock_wall_ms(s->p.env->clock);
	struct err e;
	int rc;

	err_clear(&e);
	rc = model_volume_claim_move(s->p.a, v, alloc, to, note, now, &e);
	if (rc == 0 && to != MODEL_CLAIM_FREED)
		rc = model_volume_claim_move(s->p.a, v, alloc, MODEL_CLAIM_FREED, note, now, &e);
	if (rc < 0)
		return reconcile_fail(s->res, RECONCILE_FINAL, rc, "%s: claim %s: %s", s->what,
				      alloc, e.msg);
	return 0;
}

/* rv_claim_advance, then the write (one write for both moves). */
static int rv_claim_move(struct rv_pass *s, size_t i, enum model_claim_state to)
{
	if (rv_claim_advance(s, i, to) < 0)
		return -1;
	return rv_write(s);
}

/* Adds the publication claims[i] needs, as the claim would have (model_claim_add). */
static int rv_pub_add(struct rv_pass *s, size_t i)
{
	const struct model_claim *c = &s->v->claims[i];
	struct model_claim_request req = {
	    .alloc_id = c->alloc_id, .node_id = c->node_id, .mode = c->mode, .cap = c->cap};
	struct model_claim_env env = {.controller_required = true,
				      .plugin_node_id = c->plugin_node_id};
	struct err e;

	err_clear(&e);
	if (model_claim_add_pub(s->p.a, s->v, &req, &env, &e) < 0)
		return rv_nomem(s);
	return rv_write(s);
}

static int rv_publish(struct rv_pass *s, size_t p)
{
	Csi__V1__ControllerPublishVolumeRequest req =
	    CSI__V1__CONTROLLER_PUBLISH_VOLUME_REQUEST__INIT;
	Csi__V1__ControllerPublishVolumeResponse *resp = NULL;
	struct model_volume *v = s->v;
	struct model_publication *pub = &v->pubs[p];
	int rc = -1;

	req.volume_id = v->external_id ? v->external_id : "";
	req.node_id = pub->plugin_node_id;
	if (req.node_id == NULL || req.node_id[0] == '\0')
		return reconcile_fail(s->res, RECONCILE_FINAL, CSID_EINVAL,
				      "%s: ControllerPublishVolume: node %s: no plugin node ID",
				      s->what, pub->node_id);
	req.volume_capability = rv_cap(s->p.a, v, &pub->cap);
	/* "the CO MUST set readonly to false" when the SP lacks PUBLISH_READONLY. */
	req.readonly = pub->read_only && (s->p.caps & RECONCILE_CAP(PUBLISH_READONLY));
	if (req.volume_capability == NULL ||
	    reconcile_map_set(s->p.a, &req.base, "secrets", &v->secrets) < 0 ||
	    reconcile_map_set(s->p.a, &req.base, "volume_context", &v->context) < 0)
		return rv_nomem(s);
	if (reconcile_rpc(&s->p, s->what, CSI_RPC_CONTROLLER_PUBLISH_VOLUME, &req.base,
			  (ProtobufCMessage **)&resp, s->res) < 0)
		return -1;
	if (resp != NULL && rv_map_from(s->p.a, (void *const *)resp->publish_context,
					resp->n_publish_context, &pub->context) < 0) {
		rv_nomem(s);
		goto out;
	}
	pub->state = MODEL_PUB_PUBLISHED;
	/* Told before the write: see reconciler_published for why that is safe. */
	if (s->res->published)
		s->res->published->fn(s->res->published->ctx, v);
	rc = rv_write(s);
out:
	csi_msg_free(resp ? &resp->base : NULL);
	return rc;
}

static int rv_unpublish(struct rv_pass *s, size_t p)
{
	Csi__V1__ControllerUnpublishVolumeRequest req =
	    CSI__V1__CONTROLLER_UNPUBLISH_VOLUME_REQUEST__INIT;
	ProtobufCMessage *resp = NULL;
	struct model_volume *v = s->v;
	const char *node;

	req.volume_id = v->external_id ? v->external_id : "";
	/* Never empty: an empty node ID would unpublish from every node. */
	req.node_id = v->pubs[p].plugin_node_id;
	if (req.node_id == NULL || req.node_id[0] == '\0')
		return reconcile_fail(s->res, RECONCILE_FINAL, CSID_EINVAL,
				      "%s: ControllerUnpublishVolume: node %s: no plugin node ID",
				      s->what, v->pubs[p].node_id);
	if (reconcile_map_set(s->p.a, &req.base, "secrets", &v->secrets) < 0)
		return rv_nomem(s);
	if (reconcile_rpc(&s->p, s->what, CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME, &req.base, &resp,
			  s->res) < 0)
		return -1;
	csi_msg_free(resp);
	node = v->pubs[p].node_id;
	memmove(&v->pubs[p], &v->pubs[p + 1], (v->npubs - p - 1) * sizeof(*v->pubs));
	v->npubs--;
	/*
	 * The claims of that node that waited for this unpublish are done with
	 * it: freed in the same write (never before the unpublish succeeded).
	 */
	for (size_t i = 0; i < v->nclaims;) {
		if (v->claims[i].state != MODEL_CLAIM_NODE_UNPUBLISHED ||
		    strcmp(v->claims[i].node_id, node) != 0) {
			i++;
			continue;
		}
		if (rv_claim_advance(s, i, MODEL_CLAIM_CONTROLLER_UNPUBLISHED) < 0)
			return -1;
	}
	return rv_write(s);
}

/* Tries to re-read the pass's volume after a conflict; false when it cannot. */
static bool rv_reread(struct rv_pass *s)
{
	struct store_obj o;
	struct err e;
	int rc;

	err_clear(&e);
	if (reconcile_read(s->p.env, STORE_VOLUME, s->v->id, s->what, &o, s->res) < 0)
		return false;
	rc = model_volume_decode(s->p.a, o.value, o.len, &s->v, &e);
	s->index = o.modify_index;
	if (rc == 0)
		s->v->create_index = o.create_index;
	store_obj_free(&o);
	if (rc < 0) {
		reconcile_fail(s->res, RECONCILE_FINAL, rc, "%s: damaged record: %s", s->what,
			       e.msg);
		return false;
	}
	s->v->modify_index = s->index;
	return true;
}

/* How often an expand's outcome is written again on a record changed meanwhile. */
#define RV_EXPAND_WRITES 4

/*
 * Records a done ControllerExpandVolume (capacity and min as asked,
 * node_expansion_required as answered). The plugin has grown the volume,
 * so the outcome must not be lost to a write that raced the RPC (a claim,
 * or an operator's cancel): on a conflict the record is read again and
 * the outcome applied to it, and the pending request is dropped only when
 * this outcome satisfies it (a cancel already dropped it; a larger request
 * made meanwhile stays pending).
 */
static int rv_expand_record(struct rv_pass *s, int64_t min, int64_t capacity, bool node_required)
{
	for (int i = 0; i < RV_EXPAND_WRITES; i++) {
		struct model_volume *v = s->v;

		if (v->capacity < capacity)
			v->capacity = capacity;
		if (v->capacity_min < min)
			v->capacity_min = min;
		/* "node_expansion_required=true: the CO MUST call NodeExpandVolume". */
		if (node_required) {
			v->node_expansion_required = true;
			/* Every node holding it must grow it again (server_volumes.c). */
			for (size_t j = 0; j < v->nclaims; j++)
				v->claims[j].node_expanded = false;
		}
		if (v->pending_capacity_min <= min || v->pending_capacity_min <= v->capacity)
			v->pending_capacity_min = 0;
		if (rv_write(s) == 0)
			return 0;
		if (s->res->outcome != RECONCILE_AGAIN || !rv_reread(s))
			return -1;
	}
	return reconcile_fail(s->res, RECONCILE_RETRY, CSID_EABORTED,
			      "%s: expand done, but its record raced %d writers; retried", s->what,
			      RV_EXPAND_WRITES);
}

static int rv_expand(struct rv_pass *s)
{
	Csi__V1__ControllerExpandVolumeRequest req =
	    CSI__V1__CONTROLLER_EXPAND_VOLUME_REQUEST__INIT;
	Csi__V1__CapacityRange range = CSI__V1__CAPACITY_RANGE__INIT;
	Csi__V1__ControllerExpandVolumeResponse *resp = NULL;
	struct model_volume *v = s->v;
	int64_t capacity;
	bool node_required;

	req.volume_id = v->external_id ? v->external_id : "";
	range.required_bytes = v->pending_capacity_min;
	range.limit_bytes = v->capacity_max;
	req.capacity_range = &range;
	if (v->ncaps > 0 && (req.volume_capability = rv_cap(s->p.a, v, &v->caps[0])) == NULL)
		return rv_nomem(s);
	if (reconcile_map_set(s->p.a, &req.base, "secrets", &v->secrets) < 0)
		return rv_nomem(s);
	if (reconcile_rpc(&s->p, s->what, CSI_RPC_CONTROLLER_EXPAND_VOLUME, &req.base,
			  (ProtobufCMessage **)&resp, s->res) < 0)
		return -1;
	capacity =
	    resp && resp->capacity_bytes > 0 ? resp->capacity_bytes : v->pending_capacity_min;
	node_required = resp && resp->node_expansion_required;
	csi_msg_free(resp ? &resp->base : NULL);
	return rv_expand_record(s, v->pending_capacity_min, capacity, node_required);
}

static int rv_modify(struct rv_pass *s)
{
	Csi__V1__ControllerModifyVolumeRequest req =
	    CSI__V1__CONTROLLER_MODIFY_VOLUME_REQUEST__INIT;
	ProtobufCMessage *resp = NULL;
	struct model_volume *v = s->v;

	req.volume_id = v->external_id ? v->external_id : "";
	if (reconcile_map_set(s->p.a, &req.base, "secrets", &v->secrets) < 0 ||
	    reconcile_map_set(s->p.a, &req.base, "mutable_parameters", &v->pending_mutable) < 0)
		return rv_nomem(s);
	if (reconcile_rpc(&s->p, s->what, CSI_RPC_CONTROLLER_MODIFY_VOLUME, &req.base, &resp,
			  s->res) < 0)
		return -1;
	csi_msg_free(resp);
	for (size_t i = 0; i < v->pending_mutable.n; i++)
		if (model_map_put(s->p.a, &v->mutable_parameters, v->pending_mutable.kv[i].key,
				  v->pending_mutable.kv[i].value, NULL) < 0)
			return rv_nomem(s);
	v->pending_mutable.kv = NULL;
	v->pending_mutable.n = 0;
	return rv_write(s);
}

static int rv_delete(struct rv_pass *s)
{
	Csi__V1__DeleteVolumeRequest req = CSI__V1__DELETE_VOLUME_REQUEST__INIT;
	ProtobufCMessage *resp = NULL;

	req.volume_id = s->v->external_id;
	if (reconcile_map_set(s->p.a, &req.base, "secrets", &s->v->secrets) < 0)
		return rv_nomem(s);
	if (reconcile_rpc(&s->p, s->what, CSI_RPC_DELETE_VOLUME, &req.base, &resp, s->res) < 0)
		return -1;
	csi_msg_free(resp);
	return rv_remove(s);
}

/* Runs step on the pass's volume. */
static void rv_run(struct rv_pass *s, const struct reconcile_step *st)
{
	struct model_volume *v = s->v;

	switch (st->kind) {
	case RSTEP_NONE:
		s->res->outcome = RECONCILE_IDLE;
		return;
	case RSTEP_FAILED:
		s->res->outcome = RECONCILE_IDLE_FAILED;
		return;
	case RSTEP_CREATE:
		rv_create(s);
		return;
	case RSTEP_CREATE_LACKS:
		reconcile_fail(s->res, RECONCILE_FINAL, CSID_EUNIMPL,
			       "%s: create: plugin %s lacks %s", s->what, s->p.plugin_id,
			       st->missing);
		rv_failed(s);
		return;
	case RSTEP_VALIDATE:
		rv_validate(s);
		return;
	case RSTEP_REGISTERED:
		v->state = MODEL_VOL_READY;
		rv_write(s);
		return;
	case RSTEP_CLAIM_FREE:
		rv_claim_move(s, st->index, MODEL_CLAIM_FREED);
		return;
	case RSTEP_CLAIM_CONTROLLER_DONE:
		rv_claim_move(s, st->index, MODEL_CLAIM_CONTROLLER_UNPUBLISHED);
		return;
	case RSTEP_PUB_UNPUBLISHING:
		v->pubs[st->index].state = MODEL_PUB_UNPUBLISHING;
		rv_write(s);
		return;
	case RSTEP_PUB_REPUBLISH:
		v->pubs[st->index].state = MODEL_PUB_PUBLISHING;
		rv_write(s);
		return;
	case RSTEP_PUB_ADD:
		rv_pub_add(s, st->index);
		return;
	case RSTEP_UNPUBLISH:
		rv_unpublish(s, st->index);
		return;
	case RSTEP_PUBLISH:
		rv_publish(s, st->index);
		return;
	case RSTEP_EXPAND:
		rv_expand(s);
		return;
	case RSTEP_MODIFY:
		rv_modify(s);
		return;
	case RSTEP_DELETE:
		rv_delete(s);
		return;
	case RSTEP_REMOVE:
		rv_remove(s);
		return;
	case RSTEP_LACKS:
		reconcile_fail(s->res, RECONCILE_FINAL, CSID_EUNIMPL, "%s: %s: plugin %s lacks %s",
			       s->what, reconcile_step_name(st->blocked), s->p.plugin_id,
			       st->missing);
		return;
	}
}

void reconcile_volume(const struct reconcile_env *env, const char *id, struct reconcile_result *res)
{
	const struct reconciler_published *pub = res->published;
	struct rv_pass s;
	struct reconcile_step st;
	struct store_obj o;
	struct arena *a = arena_new();
	struct err e;
	int rc;

	memset(&s, 0, sizeof(s));
	memset(res, 0, sizeof(*res));
	res->published = pub;
	err_clear(&e);
	s.res = res;
	snprintf(s.what, sizeof(s.what), "volume %s", id);
	if (a == NULL) {
		reconcile_fail(res, RECONCILE_RETRY, CSID_ENOMEM, "%s: out of memory", s.what);
		return;
	}
	if (reconcile_read(env, STORE_VOLUME, id, s.what, &o, res) < 0)
		goto out;
	rc = server_vcache_decode(env->vcache, id, o.value, o.len, o.create_index, o.modify_index,
				  a, &s.v, &e);
	s.index = o.modify_index;
	store_obj_free(&o);
	if (rc < 0) {
		reconcile_fail(res, RECONCILE_FINAL, rc, "%s: damaged record: %s", s.what, e.msg);
		goto out;
	}
	s.v->modify_index = s.index;
	reconcile_pass_begin(&s.p, env, a, s.v->plugin_id);
	reconcile_volume_next(s.v, s.p.ctrl, s.p.caps, &st);
	/* Adding a publication, too, waits for a controller to say it is needed. */
	if ((reconcile_step_rpc(st.kind) || st.kind == RSTEP_PUB_ADD) &&
	    s.p.ctrl != RECONCILE_CTRL_UP)
		reconcile_fail(res, RECONCILE_RETRY, s.p.ctrl_err.code, "%s: %s: %s", s.what,
			       reconcile_step_name(st.kind), s.p.ctrl_err.msg);
	else
		rv_run(&s, &st);
	reconcile_pass_end(&s.p);
out:
	arena_free(a);
}
