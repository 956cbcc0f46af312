/*
 * The node RPCs of the volume mounter, built from a mount record and
 * (going up) the request that carries the maps and the secrets: every
 * call gets the mounter's deadline, and its outcome is read through the
 * CSI rules table, so NOT_FOUND from NodeUnpublish/NodeUnstage counts as
 * done. Requests are built on an arena that borrows the caller's strings;
 * nothing here keeps or logs a secret.
 */
#include "agent/mount_rpc.h"

#include <string.h>

#include "csi/csi_rules.h"
#include "util/arena.h"
#include "util/log.h"

/*
 * Sends one node RPC with the deadline. Returns 0 when the step is done
 * (OK, or an outcome csi_rules calls done, such as NOT_FOUND on an
 * unpublish), else the mapped code with e saying "<what>: plugin <id>:
 * <CODE>: <message>".
 */
static int mount_rpc_call(const struct mounter_plugin *p, int64_t timeout_ms, enum csi_rpc rpc,
			  const ProtobufCMessage *req, const char *what, struct err *e)
{
	struct csi_status st;
	ProtobufCMessage *resp = NULL;
	int rc;

	memset(&st, 0, sizeof(st));
	rc = p->client->call(p->client, rpc, req, &resp, timeout_ms, &st);
	csi_msg_free(resp);
	if (rc == 0)
		return 0;
	if (st.code != CSI_OK && csi_rules_outcome(rpc, st.code) == CSI_OUTCOME_DONE) {
		char q[2 * MOUNT_NAME_MAX + 8];

		log_info("msg=\"node rpc counts as done\" rpc=%s plugin=%s code=%s",
			 csi_rpc_info(rpc)->name, log_q(q, sizeof(q), p->plugin_id),
			 csi_code_name(st.code));
		return 0;
	}
	if (rc >= 0)
		rc = CSID_EINTERNAL;
	return err_set(e, rc, "%s: plugin %s: %s: %s", what, p->plugin_id, csi_code_name(st.code),
		       st.message);
}

/*
 * Fills a protobuf map field (an array of key/value entry messages of
 * descriptor d) from kv, allocating from a.
 */
static int mount_rpc_map(struct arena *a, const ProtobufCMessageDescriptor *d,
			 const struct mount_kv *kv, size_t n, size_t *out_n, void *out_v)
{
	const ProtobufCFieldDescriptor *fk =
	    protobuf_c_message_descriptor_get_field_by_name(d, "key");
	const ProtobufCFieldDescriptor *fv =
	    protobuf_c_message_descriptor_get_field_by_name(d, "value");
	ProtobufCMessage **v = arena_alloc(a, (n + 1) * sizeof(*v));

	if (v == NULL || fk == NULL || fv == NULL)
		return CSID_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		char *msg = arena_alloc(a, d->sizeof_message);

		if (msg == NULL)
			return CSID_ENOMEM;
		protobuf_c_message_init(d, msg);
		*(const char **)(void *)(msg + fk->offset) = kv[i].key;
		*(const char **)(void *)(msg + fv->offset) = kv[i].value;
		v[i] = (ProtobufCMessage *)(void *)msg;
	}
	*out_n = n;
	*(ProtobufCMessage ***)out_v = v;
	return 0;
}

/* The VolumeCapability of a usage, allocated from a. */
static Csi__V1__VolumeCapability *mount_rpc_capability(struct arena *a, const struct mount_usage *u)
{
	Csi__V1__VolumeCapability *cap = arena_alloc(a, sizeof(*cap));
	Csi__V1__VolumeCapability__AccessMode *am = arena_alloc(a, sizeof(*am));

	if (cap == NULL || am == NULL)
		return NULL;
	csi__v1__volume_capability__init(cap);
	csi__v1__volume_capability__access_mode__init(am);
	am->mode = (Csi__V1__VolumeCapability__AccessMode__Mode)mount_access_csi_mode(u->access);
	cap->access_mode = am;
	if (u->attachment == MOUNT_ATTACH_BLOCK_DEVICE) {
		Csi__V1__VolumeCapability__BlockVolume *b = arena_alloc(a, sizeof(*b));

		if (b == NULL)
			return NULL;
		csi__v1__volume_capability__block_volume__init(b);
		cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
		cap->block = b;
	} else {
		Csi__V1__VolumeCapability__MountVolume *mv = arena_alloc(a, sizeof(*mv));

		if (mv == NULL)
			return NULL;
		csi__v1__volume_capability__mount_volume__init(mv);
		mv->fs_type = (char *)(u->fs_type ? u->fs_type : "");
		mv->n_mount_flags = u->n_mount_flags;
		mv->mount_flags = (char **)u->mount_flags;
		cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
		cap->mount = mv;
	}
	return cap;
}

int mount_rpc_stage(const struct mounter_plugin *p, int64_t timeout_ms,
		    const struct mount_record *r, const struct mounter_request *req, struct err *e)
{
	Csi__V1__NodeStageVolumeRequest sr = CSI__V1__NODE_STAGE_VOLUME_REQUEST__INIT;
	struct arena *a = arena_new();
	int rc = a ? 0 : CSID_ENOMEM;

	sr.volume_id = r->external_id;
	sr.staging_target_path = r->staging_path;
	if (rc == 0)
		rc = mount_rpc_map(
		    a, &csi__v1__node_stage_volume_request__publish_context_entry__descriptor,
		    req->publish_context, req->n_publish_context, &sr.n_publish_context,
		    &sr.publish_context);
	if (rc == 0)
		rc =
		    mount_rpc_map(a, &csi__v1__node_stage_volume_request__secrets_entry__descriptor,
				  req->secrets, req->n_secrets, &sr.n_secrets, &sr.secrets);
	if (rc == 0)
		rc = mount_rpc_map(
		    a, &csi__v1__node_stage_volume_request__volume_context_entry__descriptor,
		    req->volume_context, req->n_volume_context, &sr.n_volume_context,
		    &sr.volume_context);
	if (rc == 0 && (sr.volume_capability = mount_rpc_capability(a, &req->usage)) == NULL)
		rc = CSID_ENOMEM;
	if (rc == 0)
		rc = mount_rpc_call(p, timeout_ms, CSI_RPC_NODE_STAGE_VOLUME, &sr.base,
				    "node stage", e);
	else
		err_set(e, rc, "node stage: out of memory");
	arena_free(a);
	return rc;
}

int mount_rpc_publish(const struct mounter_plugin *p, int64_t timeout_ms,
		      const struct mount_record *r, const struct mounter_request *req,
		      struct err *e)
{
	Csi__V1__NodePublishVolumeRequest pr = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
	struct arena *a = arena_new();
	int rc = a ? 0 : CSID_ENOMEM;

	pr.volume_id = r->external_id;
	pr.staging_target_path = r->staging_path ? r->staging_path : "";
	pr.target_path = r->target_path;
	pr.readonly = req->usage.read_only;
	if (rc == 0)
		rc = mount_rpc_map(
		    a, &csi__v1__node_publish_volume_request__publish_context_entry__descriptor,
		    req->publish_context, req->n_publish_context, &pr.n_publish_context,
		    &pr.publish_context);
	if (rc == 0)
		rc = mount_rpc_map(a,
				   &csi__v1__node_publish_volume_request__secrets_entry__descriptor,
				   req->secrets, req->n_secrets, &pr.n_secrets, &pr.secrets);
	if (rc == 0)
		rc = mount_rpc_map(
		    a, &csi__v1__node_publish_volume_request__volume_context_entry__descriptor,
		    req->volume_context, req->n_volume_context, &pr.n_volume_context,
		    &pr.volume_context);
	if (rc == 0 && (pr.volume_capability = mount_rpc_capability(a, &req->usage)) == NULL)
		rc = CSID_ENOMEM;
	if (rc == 0)
		rc = mount_rpc_call(p, timeout_ms, CSI_RPC_NODE_PUBLISH_VOLUME, &pr.base,
				    "node publish", e);
	else
		err_set(e, rc, "node publish: out of memory");
	arena_free(a);
	return rc;
}

int mount_rpc_unpublish(const struct mounter_plugin *p, int64_t timeout_ms,
			const struct mount_record *r, struct err *e)
{
	Csi__V1__NodeUnpublishVolumeRequest ur = CSI__V1__NODE_UNPUBLISH_VOLUME_REQUEST__INIT;

	ur.volume_id = r->external_id;
	ur.target_path = r->target_path;
	return mount_rpc_call(p, timeout_ms, CSI_RPC_NODE_UNPUBLISH_VOLUME, &ur.base,
			      "node unpublish", e);
}

int mount_rpc_unstage(const struct mounter_plugin *p, int64_t timeout_ms,
		      const struct mount_record *r, struct err *e)
{
	Csi__V1__NodeUnstageVolumeRequest ur = CSI__V1__NODE_UNSTAGE_VOLUME_REQUEST__INIT;

	ur.volume_id = r->external_id;
	ur.staging_target_path = r->staging_path;
	return mount_rpc_call(p, timeout_ms, CSI_RPC_NODE_UNSTAGE_VOLUME, &ur.base, "node unstage",
			      e);
}

int mount_rpc_expand(const struct mounter_plugin *p, int64_t timeout_ms,
		     const struct mount_record *r, int64_t capacity, struct err *e)
{
	Csi__V1__NodeExpandVolumeRequest xr = CSI__V1__NODE_EXPAND_VOLUME_REQUEST__INIT;
	Csi__V1__CapacityRange range = CSI__V1__CAPACITY_RANGE__INIT;
	struct mount_usage u;
	struct arena *a = arena_new();
	int rc = a ? 0 : CSID_ENOMEM;

	memset(&u, 0, sizeof(u));
	u.attachment = r->attachment;
	u.access = r->access;
	u.fs_type = r->fs_type;
	u.read_only = r->read_only;
	range.required_bytes = capacity;
	xr.volume_id = r->external_id;
	xr.volume_path = r->target_path;
	xr.staging_target_path = r->staging_path ? r->staging_path : "";
	xr.capacity_range = &range;
	if (rc == 0 && (xr.volume_capability = mount_rpc_capability(a, &u)) == NULL)
		rc = CSID_ENOMEM;
	if (rc == 0)
		rc = mount_rpc_call(p, timeout_ms, CSI_RPC_NODE_EXPAND_VOLUME, &xr.base,
				    "node expand", e);
	else
		err_set(e, rc, "node expand: out of memory");
	arena_free(a);
	return rc;
}
