/*
 * One reconciler pass over a snapshot, level-triggered like volumes:
 *   creating  -> CreateSnapshot of the source volume's plugin ID (the
 *                source must be ready); the plugin's snapshot ID, size
 *                and creation time are recorded; while ready_to_use is
 *                false it is polled after a growing delay, by
 *                ListSnapshots of its ID when the plugin lists snapshots,
 *                else by the same CreateSnapshot again ("the CO SHOULD
 *                reissue the same request periodically until
 *                ready_to_use is true"), then ready;
 *                a final error (or a plugin without
 *                CREATE_DELETE_SNAPSHOT) makes it failed;
 *   deleting  -> DeleteSnapshot (NOT_FOUND counts as done), then the
 *                record is removed; without a plugin ID, first
 *                CreateSnapshot by name to find it (an earlier answer
 *                may have been lost), unless the plugin cannot hold it;
 *   ready, failed -> nothing.
 */
#include "server/reconcile_int.h"

#include <stdio.h>
#include <string.h>

struct rs_pass {
	struct reconcile_pass p;
	struct model_snapshot *s;
	uint64_t index;
	char what[MODEL_ID_MAX + 16];
	struct reconcile_result *res;
};

static int rs_write(struct rs_pass *s)
{
	char *json = NULL;
	size_t len = 0;
	struct err e;
	int rc;

	err_clear(&e);
	rc = model_snapshot_encode(s->s, MODEL_VIEW_STORE, &json, &len, &e);
	if (rc < 0)
		return reconcile_fail(s->res, RECONCILE_RETRY, rc, "%s: encode: %s", s->what,
				      e.msg);
	rc = reconcile_put(s->p.env, STORE_SNAPSHOT, s->s->id, json, len, s->index, s->res);
	model_wipe_free(json, len);
	if (rc == 0)
		s->res->outcome = RECONCILE_AGAIN;
	return rc;
}

static void rs_remove(struct rs_pass *s)
{
	if (reconcile_remove(s->p.env, STORE_SNAPSHOT, s->s->id, s->index, s->res) == 0)
		s->res->outcome = RECONCILE_AGAIN;
}

/*
 * A create that did not go through (res says why). Creating: a final
 * error makes the snapshot failed, keeping the error in res. Deleting
 * (the create was only to find the plugin's ID): the record goes when the
 * plugin cannot hold the snapshot (a final error, or a source volume that
 * is not there: rs_source reports it with CSID_EPRECOND).
 */
static void rs_create_failed(struct rs_pass *s, bool source)
{
	struct reconcile_result keep = *s->res;

	if (s->s->state == MODEL_SNAP_DELETING) {
		if ((source && s->res->e.code == CSID_EPRECOND) ||
		    (!source && s->res->outcome == RECONCILE_FINAL))
			rs_remove(s);
		return;
	}
	if (s->res->outcome != RECONCILE_FINAL)
		return;
	s->s->state = MODEL_SNAP_FAILED;
	s->s->failure = arena_strdup(s->p.a, keep.e.msg);
	if (rs_write(s) == 0)
		*s->res = keep;
}

/*
 * The plugin's ID of the source volume, when it is ready. A volume still
 * being made is waited for (RETRY); one that is gone, failed or being
 * deleted never will be (FINAL); both CSID_EPRECOND.
 */
static int rs_source(struct rs_pass *s, char **out)
{
	const char *state = "not found";
	struct model_volume *v = NULL;
	struct store_obj o;
	struct err e;
	bool wait;
	int rc;

	err_clear(&e);
	*out = NULL;
	rc = store_get(s->p.env->store, STORE_VOLUME, s->s->volume_id, &o, &e);
	if (rc == 0) {
		rc = model_volume_decode(s->p.a, o.value, o.len, &v, &e);
		store_obj_free(&o);
	}
	if (rc < 0 && rc != CSID_ENOTFOUND)
		return reconcile_fail(s->res, RECONCILE_RETRY, rc, "%s: source volume %s: %s",
				      s->what, s->s->volume_id, e.msg);
	if (v != NULL && v->state == MODEL_VOL_READY && v->external_id != NULL) {
		*out = v->external_id;
		return 0;
	}
	if (v != NULL)
		state = model_volume_state_name(v->state);
	wait = v != NULL && (v->state == MODEL_VOL_CREATING || v->state == MODEL_VOL_REGISTERING);
	if (wait) {
		s->res->wait_kind = STORE_VOLUME;
		snprintf(s->res->wait_id, sizeof(s->res->wait_id), "%s", s->s->volume_id);
	}
	return reconcile_fail(s->res, wait ? RECONCILE_RETRY : RECONCILE_FINAL, CSID_EPRECOND,
			      "%s: source volume %s: %s", s->what, s->s->volume_id,
			      wait ? "not ready" : state);
}

/*
 * Records what the plugin answered of the snapshot (its ID, size, time,
 * readiness): ready once the plugin says so, else polled again.
 */
static void rs_record(struct rs_pass *s, const char *rpc, const Csi__V1__Snapshot *r)
{
	struct model_snapshot *snap = s->s;
	bool creating = snap->state == MODEL_SNAP_CREATING;
	bool changed;

	if (r == NULL || r->snapshot_id == NULL || r->snapshot_id[0] == '\0') {
		reconcile_fail(s->res, RECONCILE_RETRY, CSID_EPROTO,
			       "%s: %s: plugin %s: answer without a snapshot ID", s->what, rpc,
			       s->p.plugin_id);
		return;
	}
	changed = snap->external_id == NULL || strcmp(snap->external_id, r->snapshot_id) != 0 ||
		  snap->size_bytes != r->size_bytes || snap->ready_to_use != r->ready_to_use;
	snap->external_id = arena_strdup(s->p.a, r->snapshot_id);
	snap->size_bytes = r->size_bytes;
	snap->ready_to_use = r->ready_to_use;
	if (r->creation_time != NULL) {
		int64_t t = r->creation_time->seconds * 1000 + r->creation_time->nanos / 1000000;

		changed = changed || t != snap->creation_time_ms;
		snap->creation_time_ms = t;
	}
	if (creating && r->ready_to_use) {
		snap->state = MODEL_SNAP_READY;
		changed = true;
	}
	if (snap->external_id == NULL) {
		reconcile_fail(s->res, RECONCILE_RETRY, CSID_ENOMEM, "%s: out of memory", s->what);
		return;
	}
	if (changed && rs_write(s) < 0)
		return;
	if (creating && !r->ready_to_use)
		s->res->outcome = RECONCILE_POLL;
}

/*
 * Polls a snapshot the plugin made but has not finished with ListSnapshots
 * of its ID, as Kubernetes' snapshotter does, when the plugin offers
 * LIST_SNAPSHOTS. Returns 0 when that answered (res set by rs_record or
 * the call), 1 when the snapshot was not listed (the caller reissues
 * CreateSnapshot).
 */
static int rs_list(struct rs_pass *s)
{
	Csi__V1__ListSnapshotsRequest req = CSI__V1__LIST_SNAPSHOTS_REQUEST__INIT;
	Csi__V1__ListSnapshotsResponse *resp = NULL;

	req.snapshot_id = s->s->external_id;
	if (reconcile_map_set(s->p.a, &req.base, "secrets", &s->s->secrets) < 0) {
		reconcile_fail(s->res, RECONCILE_RETRY, CSID_ENOMEM, "%s: out of memory", s->what);
		return 0;
	}
	if (reconcile_rpc(&s->p, s->what, CSI_RPC_LIST_SNAPSHOTS, &req.base,
			  (ProtobufCMessage **)&resp, s->res) < 0)
		return 0;
	if (resp == NULL || resp->n_entries == 0 || resp->entries[0]->snapshot == NULL ||
	    resp->entries[0]->snapshot->snapshot_id == NULL ||
	    strcmp(resp->entries[0]->snapshot->snapshot_id, s->s->external_id) != 0) {
		csi_msg_free(resp ? &resp->base : NULL);
		return 1;
	}
	rs_record(s, "ListSnapshots", resp->entries[0]->snapshot);
	csi_msg_free(&resp->base);
	return 0;
}

/*
 * CreateSnapshot: for a snapshot being created (recorded; ready once the
 * plugin says so, else polled), or for one being deleted that has no
 * plugin ID yet, to find it by name (the answer to an earlier
 * CreateSnapshot may have been lost). "The CO SHOULD reissue the same
 * request periodically until ready_to_use is true": it is, unless the
 * plugin lists snapshots (rs_list).
 */
static void rs_create(struct rs_pass *s)
{
	Csi__V1__CreateSnapshotRequest req = CSI__V1__CREATE_SNAPSHOT_REQUEST__INIT;
	Csi__V1__CreateSnapshotResponse *resp = NULL;
	struct model_snapshot *snap = s->s;

	if ((s->p.caps & RECONCILE_CAP(CREATE_DELETE_SNAPSHOT)) == 0) {
		reconcile_fail(s->res, RECONCILE_FINAL, CSID_EUNIMPL,
			       "%s: create: plugin %s lacks CREATE_DELETE_SNAPSHOT", s->what,
			       s->p.plugin_id);
		rs_create_failed(s, false);
		return;
	}
	if (snap->state == MODEL_SNAP_CREATING && snap->external_id != NULL &&
	    (s->p.caps & RECONCILE_CAP(LIST_SNAPSHOTS)) && rs_list(s) == 0)
		return;
	if (rs_source(s, &req.source_volume_id) < 0) {
		rs_create_failed(s, true);
		return;
	}
	req.name = snap->name ? snap->name : snap->id;
	if (reconcile_map_set(s->p.a, &req.base, "secrets", &snap->secrets) < 0 ||
	    reconcile_map_set(s->p.a, &req.base, "parameters", &snap->parameters) < 0) {
		reconcile_fail(s->res, RECONCILE_RETRY, CSID_ENOMEM, "%s: out of memory", s->what);
		return;
	}
	if (reconcile_rpc(&s->p, s->what, CSI_RPC_CREATE_SNAPSHOT, &req.base,
			  (ProtobufCMessage **)&resp, s->res) < 0) {
		rs_create_failed(s, false);
		return;
	}
	rs_record(s, "CreateSnapshot", resp ? resp->snapshot : NULL);
	csi_msg_free(resp ? &resp->base : NULL);
}

/* DeleteSnapshot (NOT_FOUND counts as done), then the record goes. */
static void rs_delete(struct rs_pass *s)
{
	Csi__V1__DeleteSnapshotRequest req = CSI__V1__DELETE_SNAPSHOT_REQUEST__INIT;
	ProtobufCMessage *resp = NULL;

	if ((s->p.caps & RECONCILE_CAP(CREATE_DELETE_SNAPSHOT)) == 0) {
		reconcile_fail(s->res, RECONCILE_FINAL, CSID_EUNIMPL,
			       "%s: delete: plugin %s lacks CREATE_DELETE_SNAPSHOT", s->what,
			       s->p.plugin_id);
		return;
	}
	req.snapshot_id = s->s->external_id;
	if (reconcile_map_set(s->p.a, &req.base, "secrets", &s->s->secrets) < 0) {
		reconcile_fail(s->res, RECONCILE_RETRY, CSID_ENOMEM, "%s: out of memory", s->what);
		return;
	}
	if (reconcile_rpc(&s->p, s->what, CSI_RPC_DELETE_SNAPSHOT, &req.base, &resp, s->res) < 0)
		return;
	csi_msg_free(resp);
	rs_remove(s);
}

void reconcile_snapshot(const struct reconcile_env *env, const char *id,
			struct reconcile_result *res)
{
	struct rs_pass s;
	struct store_obj o;
	struct arena *a = arena_new();
	struct err e;
	int rc;

	memset(&s, 0, sizeof(s));
	memset(res, 0, sizeof(*res));
	err_clear(&e);
	s.res = res;
	snprintf(s.what, sizeof(s.what), "snapshot %s", id);
	if (a == NULL) {
		reconcile_fail(res, RECONCILE_RETRY, CSID_ENOMEM, "%s: out of memory", s.what);
		return;
	}
	if (reconcile_read(env, STORE_SNAPSHOT, id, s.what, &o, res) < 0)
		goto out;
	rc = model_snapshot_decode(a, o.value, o.len, &s.s, &e);
	s.index = o.modify_index;
	if (rc == 0) {
		s.s->create_index = o.create_index;
		s.s->modify_index = o.modify_index;
	}
	store_obj_free(&o);
	if (rc < 0) {
		reconcile_fail(res, RECONCILE_FINAL, rc, "%s: damaged record: %s", s.what, e.msg);
		goto out;
	}
	switch (s.s->state) {
	case MODEL_SNAP_READY:
		res->outcome = RECONCILE_IDLE;
		break;
	case MODEL_SNAP_FAILED:
		res->outcome = RECONCILE_IDLE_FAILED;
		break;
	case MODEL_SNAP_CREATING:
	case MODEL_SNAP_DELETING:
		reconcile_pass_begin(&s.p, env, a, s.s->plugin_id);
		/* Only a controller that answered can rule a step out. */
		if (s.p.ctrl != RECONCILE_CTRL_UP)
			reconcile_fail(res, RECONCILE_RETRY, s.p.ctrl_err.code, "%s: %s", s.what,
				       s.p.ctrl_err.msg);
		else if (s.s->state == MODEL_SNAP_DELETING && s.s->external_id != NULL)
			rs_delete(&s);
		/* A plugin without the capability cannot hold it: nothing to look up. */
		else if (s.s->state == MODEL_SNAP_DELETING &&
			 (s.p.caps & RECONCILE_CAP(CREATE_DELETE_SNAPSHOT)) == 0)
			rs_remove(&s);
		else
			rs_create(&s);
		reconcile_pass_end(&s.p);
		break;
	}
out:
	arena_free(a);
}
