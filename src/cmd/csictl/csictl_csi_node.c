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

static int csictl_csi_node_info(struct csictl_csi *c)
{
	Csi__V1__NodeGetInfoRequest req = CSI__V1__NODE_GET_INFO_REQUEST__INIT;
	Csi__V1__NodeGetInfoResponse *resp = NULL;
	struct csi_status st;
	struct csictl_table *t;
	char max[32], topo[1024];
	int status;

	if (csi_node_get_info(c->client, &req, &resp, c->timeout_ms, &st))
		return csictl_csi_fail(c, &st);
	if (c->json) {
		status = csictl_csi_print_json(c, &resp->base);
	} else {
		snprintf(max, sizeof(max), "%" PRId64, resp->max_volumes_per_node);
		csictl_out_map_join(resp->accessible_topology ? &resp->accessible_topology->base
							      : NULL,
				    "segments", topo, sizeof(topo));
		t = csictl_table_new(2, NULL);
		if (t) {
			csictl_table_addv(t, "node id:", resp->node_id);
			csictl_table_addv(t, "max volumes:", max);
			csictl_table_addv(t, "topology:", topo);
		}
		status = csictl_csi_print_table(c, t);
	}
	csi_msg_free(&resp->base);
	return status;
}

static int csictl_csi_node_stage(struct csictl_csi *c)
{
	Csi__V1__NodeStageVolumeRequest req = CSI__V1__NODE_STAGE_VOLUME_REQUEST__INIT;
	Csi__V1__NodeStageVolumeResponse *resp = NULL;
	struct csi_status st;
	struct err e;

	err_clear(&e);
	req.volume_id = (char *)c->args.v[0];
	req.staging_target_path = (char *)c->args.v[1];
	if (csictl_csi_cap_one(c, &req.volume_capability, &e))
		return csictl_csi_usage_error(c, "%s", e.msg);
	if (csictl_csi_map_set(c, &req.base, "publish_context", &c->o.publish_context) ||
	    csictl_csi_map_set(c, &req.base, "volume_context", &c->o.context) ||
	    csictl_csi_map_set(c, &req.base, "secrets", &c->o.secrets))
		return csictl_csi_nomem(c);
	if (csi_node_stage_volume(c->client, &req, &resp, c->timeout_ms, &st))
		return csictl_csi_fail(c, &st);
	csi_msg_free(&resp->base);
	return csictl_csi_print_done(c, "volume %s staged at %s", req.volume_id,
				     req.staging_target_path);
}

static int csictl_csi_node_unstage(struct csictl_csi *c)
{
	Csi__V1__NodeUnstageVolumeRequest req = CSI__V1__NODE_UNSTAGE_VOLUME_REQUEST__INIT;
	Csi__V1__NodeUnstageVolumeResponse *resp = NULL;
	struct csi_status st;

	req.volume_id = (char *)c->args.v[0];
	req.staging_target_path = (char *)c->args.v[1];
	if (csi_node_unstage_volume(c->client, &req, &resp, c->timeout_ms, &st))
		return csictl_csi_fail(c, &st);
	csi_msg_free(&resp->base);
	return csictl_csi_print_done(c, "volume %s unstaged from %s", req.volume_id,
				     req.staging_target_path);
}

static int csictl_csi_node_publish(struct csictl_csi *c)
{
	Csi__V1__NodePublishVolumeRequest req = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
	Csi__V1__NodePublishVolumeResponse *resp = NULL;
	struct csi_status st;
	struct err e;

	err_clear(&e);
	req.volume_id = (char *)c->args.v[0];
	req.target_path = (char *)c->args.v[1];
	if (c->o.staging)
		req.staging_target_path = (char *)c->o.staging;
	req.readonly = c->o.readonly;
	if (csictl_csi_cap_one(c, &req.volume_capability, &e))
		return csictl_csi_usage_error(c, "%s", e.msg);
	if (csictl_csi_map_set(c, &req.base, "publish_context", &c->o.publish_context) ||
	    csictl_csi_map_set(c, &req.base, "volume_context", &c->o.context) ||
	    csictl_csi_map_set(c, &req.base, "secrets", &c->o.secrets))
		return csictl_csi_nomem(c);
	if (csi_node_publish_volume(c->client, &req, &resp, c->timeout_ms, &st))
		return csictl_csi_fail(c, &st);
	csi_msg_free(&resp->base);
	return csictl_csi_print_done(c, "volume %s published at %s%s", req.volume_id,
				     req.target_path, req.readonly ? " (read-only)" : "");
}

static int csictl_csi_node_unpublish(struct csictl_csi *c)
{
	Csi__V1__NodeUnpublishVolumeRequest req = CSI__V1__NODE_UNPUBLISH_VOLUME_REQUEST__INIT;
	Csi__V1__NodeUnpublishVolumeResponse *resp = NULL;
	struct csi_status st;

	req.volume_id = (char *)c->args.v[0];
	req.target_path = (char *)c->args.v[1];
	if (csi_node_unpublish_volume(c->client, &req, &resp, c->timeout_ms, &st))
		return csictl_csi_fail(c, &st);
	csi_msg_free(&resp->base);
	return csictl_csi_print_done(c, "volume %s unpublished from %s", req.volume_id,
				     req.target_path);
}

static int csictl_csi_node_stats(struct csictl_csi *c)
{
	static const char *const headers[] = {"UNIT", "TOTAL", "USED", "AVAILABLE"};
	Csi__V1__NodeGetVolumeStatsRequest req = CSI__V1__NODE_GET_VOLUME_STATS_REQUEST__INIT;
	Csi__V1__NodeGetVolumeStatsResponse *resp = NULL;
	struct csi_status st;
	struct csictl_table *t;
	int status;

	req.volume_id = (char *)c->args.v[0];
	req.volume_path = (char *)c->args.v[1];
	if (c->o.staging)
		req.staging_target_path = (char *)c->o.staging;
	if (csi_node_get_volume_stats(c->client, &req, &resp, c->timeout_ms, &st))
		return csictl_csi_fail(c, &st);
	if (c->json) {
		status = csictl_csi_print_json(c, &resp->base);
		goto out;
	}
	t = csictl_table_new(4, headers);
	for (size_t i = 0; t && i < resp->n_usage; i++) {
		const Csi__V1__VolumeUsage *u = resp->usage[i];
		const ProtobufCEnumValue *ev =
			protobuf_c_enum_descriptor_get_value(&csi__v1__volume_usage__unit__descriptor,
							     u->unit);
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
out:
	csi_msg_free(&resp->base);
	return status;
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
