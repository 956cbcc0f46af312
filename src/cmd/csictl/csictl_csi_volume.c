/*
 * `csictl csi` controller volume commands: create-volume, delete-volume,
 * get-volume, modify-volume, capacity, list-volumes, validate,
 * controller-publish, controller-unpublish and expand
 * (ControllerExpandVolume, or NodeExpandVolume with -node PATH).
 * list-volumes follows next_token until the plugin has no more pages
 * unless -max-entries asks for one page; it stops with an error when a
 * plugin hands back the token it was given, which would loop forever.
 */
#include "csictl_csi.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void csictl_csi_volume_topology(const Csi__V1__Volume *v, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < v->n_accessible_topology && used + 1 < len; i++) {
		char seg[256];
		int w;

		csictl_out_map_join(&v->accessible_topology[i]->base, "segments", seg, sizeof(seg));
		w = snprintf(buf + used, len - used, "%s%s", i ? ";" : "", seg);
		if (w < 0)
			break;
		used += (size_t)w;
	}
}

/*
 * Prints a volume as "field: value" lines, with its published nodes and
 * condition when the plugin reported a status (status may be NULL).
 */
static int csictl_csi_volume_print(struct csictl_csi *c, const Csi__V1__Volume *v,
				   const Csi__V1__ControllerGetVolumeResponse__VolumeStatus *status)
{
	struct csictl_table *t = csictl_table_new(2, NULL);
	char size[32], ctx[1024], topo[1024], src[300] = "";
	const Csi__V1__VolumeContentSource *cs = v->content_source;

	if (cs && cs->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT && cs->snapshot)
		snprintf(src, sizeof(src), "snapshot %s", cs->snapshot->snapshot_id);
	if (cs && cs->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME && cs->volume)
		snprintf(src, sizeof(src), "volume %s", cs->volume->volume_id);
	csictl_csi_volume_topology(v, topo, sizeof(topo));
	if (t) {
		csictl_table_addv(t, "volume id:", v->volume_id);
		csictl_table_addv(
		    t, "capacity:", csictl_size_format(v->capacity_bytes, size, sizeof(size)));
		csictl_table_addv(
		    t,
		    "context:", csictl_out_map_join(&v->base, "volume_context", ctx, sizeof(ctx)));
		csictl_table_addv(t, "source:", src);
		csictl_table_addv(t, "topology:", topo);
	}
	if (t && status) {
		char nodes[1024] = "", cond[300] = "";
		size_t used = 0;

		for (size_t i = 0; i < status->n_published_node_ids && used + 1 < sizeof(nodes);
		     i++) {
			int w = snprintf(nodes + used, sizeof(nodes) - used, "%s%s", i ? "," : "",
					 status->published_node_ids[i]);

			if (w < 0)
				break;
			used += (size_t)w;
		}
		if (status->volume_condition)
			snprintf(cond, sizeof(cond), "%s%s%s",
				 status->volume_condition->abnormal ? "abnormal" : "ok",
				 status->volume_condition->message[0] ? ": " : "",
				 status->volume_condition->message);
		csictl_table_addv(t, "published nodes:", nodes);
		csictl_table_addv(t, "condition:", cond);
	}
	return csictl_csi_print_table(c, t);
}

static int csictl_csi_volume_create_show(struct csictl_csi *c, const ProtobufCMessage *m)
{
	const Csi__V1__CreateVolumeResponse *resp = (const Csi__V1__CreateVolumeResponse *)m;

	if (!resp->volume) {
		fputs("error: the plugin created the volume but returned none\n", c->err);
		return CSICTL_EXIT_FAIL;
	}
	return csictl_csi_volume_print(c, resp->volume, NULL);
}

static int csictl_csi_volume_create(struct csictl_csi *c)
{
	Csi__V1__CreateVolumeRequest req = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	struct err e;

	err_clear(&e);
	req.name = (char *)c->args.v[0];
	if (csictl_csi_caps(c, &req.volume_capabilities, &req.n_volume_capabilities, &e) ||
	    csictl_csi_capacity(c, c->o.capacity, &req.capacity_range, &e))
		return csictl_csi_usage_error(c, "%s", e.msg);
	if (c->o.from_snapshot && c->o.from_volume)
		return csictl_csi_usage_error(c, "give -from-snapshot or -from-volume, not both");
	if (c->o.from_snapshot || c->o.from_volume) {
		Csi__V1__VolumeContentSource *cs =
		    csictl_csi_msg_new(c, &csi__v1__volume_content_source__descriptor);
		Csi__V1__VolumeContentSource__SnapshotSource *ss = csictl_csi_msg_new(
		    c, &csi__v1__volume_content_source__snapshot_source__descriptor);
		Csi__V1__VolumeContentSource__VolumeSource *vs = csictl_csi_msg_new(
		    c, &csi__v1__volume_content_source__volume_source__descriptor);

		if (!cs || !ss || !vs)
			return csictl_csi_nomem(c);
		if (c->o.from_snapshot) {
			ss->snapshot_id = (char *)c->o.from_snapshot;
			cs->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT;
			cs->snapshot = ss;
		} else {
			vs->volume_id = (char *)c->o.from_volume;
			cs->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME;
			cs->volume = vs;
		}
		req.volume_content_source = cs;
	}
	if (csictl_csi_map_set(c, &req.base, "parameters", &c->o.params) ||
	    csictl_csi_map_set(c, &req.base, "mutable_parameters", &c->o.mutable_params) ||
	    csictl_csi_map_set(c, &req.base, "secrets", &c->o.secrets))
		return csictl_csi_nomem(c);
	return csictl_csi_call_show(c, CSI_RPC_CREATE_VOLUME, &req.base,
				    csictl_csi_volume_create_show);
}

static int csictl_csi_volume_delete(struct csictl_csi *c)
{
	Csi__V1__DeleteVolumeRequest req = CSI__V1__DELETE_VOLUME_REQUEST__INIT;

	req.volume_id = (char *)c->args.v[0];
	if (csictl_csi_map_set(c, &req.base, "secrets", &c->o.secrets))
		return csictl_csi_nomem(c);
	return csictl_csi_call_done(c, CSI_RPC_DELETE_VOLUME, &req.base, "volume %s deleted",
				    req.volume_id);
}

static void csictl_csi_volume_row(struct csictl_table *t,
				  const Csi__V1__ListVolumesResponse__Entry *en)
{
	char size[32] = "", nodes[1024] = "", cond[300] = "";
	const Csi__V1__Volume *v = en->volume;
	const Csi__V1__ListVolumesResponse__VolumeStatus *s = en->status;
	size_t used = 0;

	if (v)
		csictl_size_format(v->capacity_bytes, size, sizeof(size));
	for (size_t i = 0; s && i < s->n_published_node_ids && used + 1 < sizeof(nodes); i++) {
		int w = snprintf(nodes + used, sizeof(nodes) - used, "%s%s", i ? "," : "",
				 s->published_node_ids[i]);

		if (w < 0)
			break;
		used += (size_t)w;
	}
	if (s && s->volume_condition)
		snprintf(cond, sizeof(cond), "%s%s%s",
			 s->volume_condition->abnormal ? "abnormal" : "ok",
			 s->volume_condition->message[0] ? ": " : "", s->volume_condition->message);
	csictl_table_addv(t, v ? v->volume_id : "", size, nodes, cond);
}

/* One ListVolumes call (a csictl_csi_page_fn). */
static int csictl_csi_volume_page(struct csictl_csi *c, void *r, const char *token,
				  struct csictl_table *t, json_t *entries, char **next)
{
	Csi__V1__ListVolumesRequest *req = r;
	Csi__V1__ListVolumesResponse *resp = NULL;
	struct csi_status st;

	req->starting_token = (char *)token;
	if (csi_list_volumes(c->client, req, &resp, c->timeout_ms, &st))
		return csictl_csi_fail(c, &st);
	for (size_t i = 0; i < resp->n_entries; i++) {
		if (t)
			csictl_csi_volume_row(t, resp->entries[i]);
		else
			json_array_append_new(entries,
					      csictl_out_msg_json(&resp->entries[i]->base));
	}
	*next = strdup(resp->next_token ? resp->next_token : "");
	csi_msg_free(&resp->base);
	return *next ? CSICTL_EXIT_OK : csictl_csi_nomem(c);
}

static int csictl_csi_volume_list(struct csictl_csi *c)
{
	static const char *const headers[] = {"VOLUME ID", "CAPACITY", "PUBLISHED NODES",
					      "CONDITION"};
	Csi__V1__ListVolumesRequest req = CSI__V1__LIST_VOLUMES_REQUEST__INIT;
	struct err e;

	if (c->o.max_entries && csictl_int_parse(c->o.max_entries, &req.max_entries, &e))
		return csictl_csi_usage_error(c, "-max-entries: %s", e.msg);
	return csictl_csi_list(c, &req, csictl_csi_volume_page, 4, headers);
}

static int csictl_csi_volume_validate_show(struct csictl_csi *c, const ProtobufCMessage *m)
{
	const Csi__V1__ValidateVolumeCapabilitiesResponse *resp =
	    (const Csi__V1__ValidateVolumeCapabilitiesResponse *)m;
	struct csictl_table *t = csictl_table_new(2, NULL);

	if (t) {
		csictl_table_addv(t, "confirmed:", resp->confirmed ? "yes" : "no");
		csictl_table_addv(t, "message:", resp->message);
	}
	return csictl_csi_print_table(c, t);
}

static int csictl_csi_volume_validate(struct csictl_csi *c)
{
	Csi__V1__ValidateVolumeCapabilitiesRequest req =
	    CSI__V1__VALIDATE_VOLUME_CAPABILITIES_REQUEST__INIT;
	struct err e;

	err_clear(&e);
	req.volume_id = (char *)c->args.v[0];
	if (csictl_csi_caps(c, &req.volume_capabilities, &req.n_volume_capabilities, &e))
		return csictl_csi_usage_error(c, "%s", e.msg);
	if (csictl_csi_map_set(c, &req.base, "volume_context", &c->o.context) ||
	    csictl_csi_map_set(c, &req.base, "parameters", &c->o.params) ||
	    csictl_csi_map_set(c, &req.base, "secrets", &c->o.secrets))
		return csictl_csi_nomem(c);
	return csictl_csi_call_show(c, CSI_RPC_VALIDATE_VOLUME_CAPABILITIES, &req.base,
				    csictl_csi_volume_validate_show);
}

static int csictl_csi_volume_publish_show(struct csictl_csi *c, const ProtobufCMessage *m)
{
	static const char *const headers[] = {"KEY", "VALUE"};
	const Csi__V1__ControllerPublishVolumeResponse *resp =
	    (const Csi__V1__ControllerPublishVolumeResponse *)m;
	struct csictl_table *t;

	if (resp->n_publish_context == 0) {
		fprintf(c->out, "published (no publish context)\n");
		return CSICTL_EXIT_OK;
	}
	t = csictl_table_new(2, headers);
	for (size_t i = 0; t && i < resp->n_publish_context; i++)
		csictl_table_addv(t, resp->publish_context[i]->key,
				  resp->publish_context[i]->value);
	return csictl_csi_print_table(c, t);
}

static int csictl_csi_volume_publish(struct csictl_csi *c)
{
	Csi__V1__ControllerPublishVolumeRequest req =
	    CSI__V1__CONTROLLER_PUBLISH_VOLUME_REQUEST__INIT;
	struct err e;

	err_clear(&e);
	req.volume_id = (char *)c->args.v[0];
	req.node_id = (char *)c->args.v[1];
	req.readonly = c->o.readonly;
	if (csictl_csi_cap_one(c, &req.volume_capability, &e))
		return csictl_csi_usage_error(c, "%s", e.msg);
	if (csictl_csi_map_set(c, &req.base, "volume_context", &c->o.context) ||
	    csictl_csi_map_set(c, &req.base, "secrets", &c->o.secrets))
		return csictl_csi_nomem(c);
	return csictl_csi_call_show(c, CSI_RPC_CONTROLLER_PUBLISH_VOLUME, &req.base,
				    csictl_csi_volume_publish_show);
}

static int csictl_csi_volume_unpublish(struct csictl_csi *c)
{
	Csi__V1__ControllerUnpublishVolumeRequest req =
	    CSI__V1__CONTROLLER_UNPUBLISH_VOLUME_REQUEST__INIT;

	req.volume_id = (char *)c->args.v[0];
	if (c->args.n > 1)
		req.node_id = (char *)c->args.v[1];
	if (csictl_csi_map_set(c, &req.base, "secrets", &c->o.secrets))
		return csictl_csi_nomem(c);
	/* CSI: an empty node_id unpublishes the volume from every node. */
	return csictl_csi_call_done(c, CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME, &req.base,
				    "volume %s unpublished from %s%s", req.volume_id,
				    c->args.n > 1 ? "node " : "every node",
				    c->args.n > 1 ? req.node_id : "");
}

static int csictl_csi_volume_expand_node_show(struct csictl_csi *c, const ProtobufCMessage *m)
{
	const Csi__V1__NodeExpandVolumeResponse *resp =
	    (const Csi__V1__NodeExpandVolumeResponse *)m;
	char size[32];

	fprintf(c->out, "capacity: %s\n",
		csictl_size_format(resp->capacity_bytes, size, sizeof(size)));
	return CSICTL_EXIT_OK;
}

static int csictl_csi_volume_expand_node(struct csictl_csi *c, Csi__V1__CapacityRange *range)
{
	Csi__V1__NodeExpandVolumeRequest req = CSI__V1__NODE_EXPAND_VOLUME_REQUEST__INIT;
	struct err e;

	err_clear(&e);
	req.volume_id = (char *)c->args.v[0];
	req.volume_path = (char *)c->o.node_path;
	req.capacity_range = range;
	if (c->o.staging)
		req.staging_target_path = (char *)c->o.staging;
	if (csictl_csi_caps_given(c) && csictl_csi_cap_one(c, &req.volume_capability, &e))
		return csictl_csi_usage_error(c, "%s", e.msg);
	if (csictl_csi_map_set(c, &req.base, "secrets", &c->o.secrets))
		return csictl_csi_nomem(c);
	return csictl_csi_call_show(c, CSI_RPC_NODE_EXPAND_VOLUME, &req.base,
				    csictl_csi_volume_expand_node_show);
}

static int csictl_csi_volume_expand_show(struct csictl_csi *c, const ProtobufCMessage *m)
{
	const Csi__V1__ControllerExpandVolumeResponse *resp =
	    (const Csi__V1__ControllerExpandVolumeResponse *)m;
	struct csictl_table *t = csictl_table_new(2, NULL);
	char size[32];

	if (t) {
		csictl_table_addv(
		    t, "capacity:", csictl_size_format(resp->capacity_bytes, size, sizeof(size)));
		csictl_table_addv(
		    t, "node expansion required:", resp->node_expansion_required ? "yes" : "no");
	}
	return csictl_csi_print_table(c, t);
}

static int csictl_csi_volume_expand(struct csictl_csi *c)
{
	Csi__V1__ControllerExpandVolumeRequest req =
	    CSI__V1__CONTROLLER_EXPAND_VOLUME_REQUEST__INIT;
	struct err e;

	err_clear(&e);
	if (csictl_csi_capacity(c, c->args.v[1], &req.capacity_range, &e))
		return csictl_csi_usage_error(c, "%s", e.msg);
	if (c->o.node_path)
		return csictl_csi_volume_expand_node(c, req.capacity_range);
	req.volume_id = (char *)c->args.v[0];
	if (csictl_csi_caps_given(c) && csictl_csi_cap_one(c, &req.volume_capability, &e))
		return csictl_csi_usage_error(c, "%s", e.msg);
	if (csictl_csi_map_set(c, &req.base, "secrets", &c->o.secrets))
		return csictl_csi_nomem(c);
	return csictl_csi_call_show(c, CSI_RPC_CONTROLLER_EXPAND_VOLUME, &req.base,
				    csictl_csi_volume_expand_show);
}

static int csictl_csi_volume_get_show(struct csictl_csi *c, const ProtobufCMessage *m)
{
	const Csi__V1__ControllerGetVolumeResponse *resp =
	    (const Csi__V1__ControllerGetVolumeResponse *)m;

	if (!resp->volume) {
		fputs("error: the plugin answered without a volume\n", c->err);
		return CSICTL_EXIT_FAIL;
	}
	return csictl_csi_volume_print(c, resp->volume, resp->status);
}

static int csictl_csi_volume_get(struct csictl_csi *c)
{
	Csi__V1__ControllerGetVolumeRequest req = CSI__V1__CONTROLLER_GET_VOLUME_REQUEST__INIT;

	req.volume_id = (char *)c->args.v[0];
	return csictl_csi_call_show(c, CSI_RPC_CONTROLLER_GET_VOLUME, &req.base,
				    csictl_csi_volume_get_show);
}

static int csictl_csi_volume_modify(struct csictl_csi *c)
{
	Csi__V1__ControllerModifyVolumeRequest req =
	    CSI__V1__CONTROLLER_MODIFY_VOLUME_REQUEST__INIT;

	req.volume_id = (char *)c->args.v[0];
	if (c->o.mutable_params.n == 0)
		return csictl_csi_usage_error(c, "modify-volume needs at least one -mutable-param");
	if (csictl_csi_map_set(c, &req.base, "mutable_parameters", &c->o.mutable_params) ||
	    csictl_csi_map_set(c, &req.base, "secrets", &c->o.secrets))
		return csictl_csi_nomem(c);
	return csictl_csi_call_done(c, CSI_RPC_CONTROLLER_MODIFY_VOLUME, &req.base,
				    "volume %s modified", req.volume_id);
}

static int csictl_csi_volume_capacity_show(struct csictl_csi *c, const ProtobufCMessage *m)
{
	const Csi__V1__GetCapacityResponse *resp = (const Csi__V1__GetCapacityResponse *)m;
	struct csictl_table *t = csictl_table_new(2, NULL);
	char avail[32], max[32] = "", min[32] = "";

	csictl_size_format(resp->available_capacity, avail, sizeof(avail));
	if (resp->maximum_volume_size)
		csictl_size_format(resp->maximum_volume_size->value, max, sizeof(max));
	if (resp->minimum_volume_size)
		csictl_size_format(resp->minimum_volume_size->value, min, sizeof(min));
	if (t) {
		csictl_table_addv(t, "available:", avail);
		csictl_table_addv(t, "maximum volume size:", max);
		csictl_table_addv(t, "minimum volume size:", min);
	}
	return csictl_csi_print_table(c, t);
}

static int csictl_csi_volume_capacity(struct csictl_csi *c)
{
	Csi__V1__GetCapacityRequest req = CSI__V1__GET_CAPACITY_REQUEST__INIT;
	struct err e;

	err_clear(&e);
	/* Capabilities narrow the answer only when the user gave some. */
	if (csictl_csi_caps_given(c) &&
	    csictl_csi_caps(c, &req.volume_capabilities, &req.n_volume_capabilities, &e))
		return csictl_csi_usage_error(c, "%s", e.msg);
	if (csictl_csi_map_set(c, &req.base, "parameters", &c->o.params))
		return csictl_csi_nomem(c);
	return csictl_csi_call_show(c, CSI_RPC_GET_CAPACITY, &req.base,
				    csictl_csi_volume_capacity_show);
}

const struct csictl_csi_cmd csictl_csi_volume_cmds[] = {
    {"create-volume", 1, 1, "create-volume NAME",
     "create a volume (-capacity, -param, capability flags)", csictl_csi_volume_create},
    {"delete-volume", 1, 1, "delete-volume ID", "delete a volume", csictl_csi_volume_delete},
    {"get-volume", 1, 1, "get-volume ID", "one volume with its status (ControllerGetVolume)",
     csictl_csi_volume_get},
    {"modify-volume", 1, 1, "modify-volume ID", "change -mutable-param values",
     csictl_csi_volume_modify},
    {"capacity", 0, 0, "capacity", "available capacity (GetCapacity; -param, capabilities)",
     csictl_csi_volume_capacity},
    {"list-volumes", 0, 0, "list-volumes", "list volumes (all pages, or one with -max-entries)",
     csictl_csi_volume_list},
    {"validate", 1, 1, "validate ID", "check capabilities against a volume",
     csictl_csi_volume_validate},
    {"controller-publish", 2, 2, "controller-publish ID NODE", "attach a volume to a node",
     csictl_csi_volume_publish},
    {"controller-unpublish", 1, 2, "controller-unpublish ID [NODE]",
     "detach a volume (from every node without NODE)", csictl_csi_volume_unpublish},
    {"expand", 2, 2, "expand ID SIZE", "grow a volume (on the node with -node PATH)",
     csictl_csi_volume_expand},
    {0},
};
