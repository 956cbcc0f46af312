/*
 * `csictl csi` node commands: node-info, stage, unstage, publish,
 * unpublish and stats. They pass paths through unchanged: the CO's duties
 * (creating the staging directory and the parent of a target) are left to
 * the person at the keyboard, so a plugin can be tested against exactly
 * the paths they choose.
 */
#include "csictl_csi.h"

#include <inttypes.h>
#include <string.h>

static int csictl_csi_node_info_show(struct csictl_csi *c, const ProtobufCMessage *m)
{
	const Csi__V1__NodeGetInfoResponse *resp = (const Csi__V1__NodeGetInfoResponse *)m;
	struct csictl_table *t = csictl_table_new(2, NULL);
	char max[32], topo[1024];

	snprintf(max, sizeof(max), "%" PRId64, resp->max_volumes_per_node);
	csictl_out_map_join(resp->accessible_topology ? &resp->accessible_topology->base : NULL,
			    "segments", topo, sizeof(topo));
	if (t) {
		csictl_table_addv(t, "node id:", resp->node_id);
		csictl_table_addv(t, "max volumes:", max);
		csictl_table_addv(t, "topology:", topo);
	}
	return csictl_csi_print_table(c, t);
}

static int csictl_csi_node_info(struct csictl_csi *c)
{
	Csi__V1__NodeGetInfoRequest req = CSI__V1__NODE_GET_INFO_REQUEST__INIT;

	return csictl_csi_call_show(c, CSI_RPC_NODE_GET_INFO, &req.base, csictl_csi_node_info_show);
}

/*
 * Fills the fields stage and publish share: capability, publish and volume
 * context, secrets. Returns an exit status (usage error for bad flags).
 */
static int csictl_csi_node_common(struct csictl_csi *c, ProtobufCMessage *req,
				  Csi__V1__VolumeCapability **cap)
{
	struct err e;

	err_clear(&e);
	if (csictl_csi_cap_one(c, cap, &e))
		return csictl_csi_usage_error(c, "%s", e.msg);
	if (csictl_csi_map_set(c, req, "publish_context", &c->o.publish_context) ||
	    csictl_csi_map_set(c, req, "volume_context", &c->o.context) ||
	    csictl_csi_map_set(c, req, "secrets", &c->o.secrets))
		return csictl_csi_nomem(c);
	return CSICTL_EXIT_OK;
}

static int csictl_csi_node_stage(struct csictl_csi *c)
{
	Csi__V1__NodeStageVolumeRequest req = CSI__V1__NODE_STAGE_VOLUME_REQUEST__INIT;
	int status;

	req.volume_id = (char *)c->args.v[0];
	req.staging_target_path = (char *)c->args.v[1];
	status = csictl_csi_node_common(c, &req.base, &req.volume_capability);
	if (status != CSICTL_EXIT_OK)
		return status;
	return csictl_csi_call_done(c, CSI_RPC_NODE_STAGE_VOLUME, &req.base,
				    "volume %s staged at %s", req.volume_id,
				    req.staging_target_path);
}

static int csictl_csi_node_unstage(struct csictl_csi *c)
{
	Csi__V1__NodeUnstageVolumeRequest req = CSI__V1__NODE_UNSTAGE_VOLUME_REQUEST__INIT;

	req.volume_id = (char *)c->args.v[0];
	req.staging_target_path = (char *)c->args.v[1];
	return csictl_csi_call_done(c, CSI_RPC_NODE_UNSTAGE_VOLUME, &req.base,
				    "volume %s unstaged from %s", req.volume_id,
				    req.staging_target_path);
}

static int csictl_csi_node_publish(struct csictl_csi *c)
{
	Csi__V1__NodePublishVolumeRequest req = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
	int status;

	req.volume_id = (char *)c->args.v[0];
	req.target_path = (char *)c->args.v[1];
	if (c->o.staging)
		req.staging_target_path = (char *)c->o.staging;
	req.readonly = c->o.readonly;
	status = csictl_csi_node_common(c, &req.base, &req.volume_capability);
	if (status != CSICTL_EXIT_OK)
		return status;
	return csictl_csi_call_done(c, CSI_RPC_NODE_PUBLISH_VOLUME, &req.base,
				    "volume %s published at %s%s", req.volume_id, req.target_path,
				    req.readonly ? " (read-only)" : "");
}

static int csictl_csi_node_unpublish(struct csictl_csi *c)
{
	Csi__V1__NodeUnpublishVolumeRequest req = CSI__V1__NODE_UNPUBLISH_VOLUME_REQUEST__INIT;

	req.volume_id = (char *)c->args.v[0];
	req.target_path = (char *)c->args.v[1];
	return csictl_csi_call_done(c, CSI_RPC_NODE_UNPUBLISH_VOLUME, &req.base,
				    "volume %s unpublished from %s", req.volume_id,
				    req.target_path);
}

static int csictl_csi_node_stats_show(struct csictl_csi *c, const ProtobufCMessage *m)
{
	static const char *const headers[] = {"UNIT", "TOTAL", "USED", "AVAILABLE"};
	const Csi__V1__NodeGetVolumeStatsResponse *resp =
	    (const Csi__V1__NodeGetVolumeStatsResponse *)m;
	struct csictl_table *t = csictl_table_new(4, headers);
	int status;

	for (size_t i = 0; t && i < resp->n_usage; i++) {
		const Csi__V1__VolumeUsage *u = resp->usage[i];
		const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(
		    &csi__v1__volume_usage__unit__descriptor, u->unit);
		char total[32], used[32], avail[32];

		snprintf(total, sizeof(total), "%" PRId64, u->total);
		snprintf(used, sizeof(used), "%" PRId64, u->used);
		snprintf(avail, sizeof(avail), "%" PRId64, u->available);
		csictl_table_addv(t, ev ? ev->name : "?", total, used, avail);
	}
	status = csictl_csi_print_table(c, t);
	if (status == CSICTL_EXIT_OK && resp->volume_condition) {
		char msg[300];

		fprintf(c->out, "condition: %s%s%s\n",
			resp->volume_condition->abnormal ? "abnormal" : "ok",
			resp->volume_condition->message[0] ? ": " : "",
			csictl_out_clean(resp->volume_condition->message, msg, sizeof(msg)));
	}
	return status;
}

static int csictl_csi_node_stats(struct csictl_csi *c)
{
	Csi__V1__NodeGetVolumeStatsRequest req = CSI__V1__NODE_GET_VOLUME_STATS_REQUEST__INIT;

	req.volume_id = (char *)c->args.v[0];
	req.volume_path = (char *)c->args.v[1];
	if (c->o.staging)
		req.staging_target_path = (char *)c->o.staging;
	return csictl_csi_call_show(c, CSI_RPC_NODE_GET_VOLUME_STATS, &req.base,
				    csictl_csi_node_stats_show);
}

const struct csictl_csi_cmd csictl_csi_node_cmds[] = {
    {"node-info", 0, 0, "node-info", "node ID, max volumes and topology (NodeGetInfo)",
     csictl_csi_node_info},
    {"stage", 2, 2, "stage ID STAGING_PATH", "stage a volume (NodeStageVolume)",
     csictl_csi_node_stage},
    {"unstage", 2, 2, "unstage ID STAGING_PATH", "unstage a volume", csictl_csi_node_unstage},
    {"publish", 2, 2, "publish ID TARGET [-staging PATH]",
     "publish a volume at a target path (NodePublishVolume)", csictl_csi_node_publish},
    {"unpublish", 2, 2, "unpublish ID TARGET", "unpublish a volume from a target path",
     csictl_csi_node_unpublish},
    {"stats", 2, 2, "stats ID PATH", "usage of a published volume (NodeGetVolumeStats)",
     csictl_csi_node_stats},
    {0},
};
