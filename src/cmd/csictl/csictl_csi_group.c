/*
 * `csictl csi group-snapshot create|get|delete`: the GroupController
 * service (volume group snapshots). create takes the group's name and its
 * source volumes; get and delete take the group's ID and the IDs of its
 * member snapshots, which the spec makes REQUIRED so that a plugin can
 * refuse a list that does not match the group (create prints them).
 * The answer of create and get is the group (ID, creation time, ready)
 * followed by one row per member snapshot.
 */
#include "csictl_csi.h"

#include <string.h>

static int csictl_csi_group_print(struct csictl_csi *c, const Csi__V1__VolumeGroupSnapshot *g)
{
	static const char *const headers[] = {"SNAPSHOT ID", "SOURCE VOLUME", "SIZE", "READY"};
	struct csictl_table *head = csictl_table_new(2, NULL);
	struct csictl_table *members = csictl_table_new(4, headers);
	char size[32], created[64] = "";
	Csi__V1__Snapshot when = CSI__V1__SNAPSHOT__INIT;

	if (!head || !members) {
		csictl_table_free(head);
		csictl_table_free(members);
		return csictl_csi_nomem(c);
	}
	when.creation_time = g->creation_time;
	csictl_csi_snapshot_cells(&when, size, sizeof(size), created, sizeof(created));
	csictl_table_addv(head, "group snapshot id:", g->group_snapshot_id);
	csictl_table_addv(head, "created:", created);
	csictl_table_addv(head, "ready:", g->ready_to_use ? "yes" : "no");
	for (size_t i = 0; i < g->n_snapshots; i++) {
		const Csi__V1__Snapshot *s = g->snapshots[i];

		csictl_csi_snapshot_cells(s, size, sizeof(size), created, sizeof(created));
		csictl_table_addv(members, s->snapshot_id, s->source_volume_id, size,
				  s->ready_to_use ? "yes" : "no");
	}
	csictl_csi_print_table(c, head);
	return csictl_csi_print_table(c, members);
}

/* The group of a create or get answer; a missing one is the plugin's fault. */
static int csictl_csi_group_show_one(struct csictl_csi *c, const Csi__V1__VolumeGroupSnapshot *g)
{
	if (!g) {
		fputs("error: the plugin answered OK without a group snapshot\n", c->err);
		return CSICTL_EXIT_FAIL;
	}
	return csictl_csi_group_print(c, g);
}

static int csictl_csi_group_create_show(struct csictl_csi *c, const ProtobufCMessage *m)
{
	return csictl_csi_group_show_one(
	    c, ((const Csi__V1__CreateVolumeGroupSnapshotResponse *)m)->group_snapshot);
}

static int csictl_csi_group_get_show(struct csictl_csi *c, const ProtobufCMessage *m)
{
	return csictl_csi_group_show_one(
	    c, ((const Csi__V1__GetVolumeGroupSnapshotResponse *)m)->group_snapshot);
}

/* Arguments from index first on, as a repeated string field (they live in argv). */
static char **csictl_csi_group_rest(struct csictl_csi *c, int first, size_t *n)
{
	*n = (size_t)(c->args.n - first);
	return (char **)(c->args.v + first);
}

static int csictl_csi_group_create(struct csictl_csi *c)
{
	Csi__V1__CreateVolumeGroupSnapshotRequest req =
	    CSI__V1__CREATE_VOLUME_GROUP_SNAPSHOT_REQUEST__INIT;

	req.name = (char *)c->args.v[0];
	req.source_volume_ids = csictl_csi_group_rest(c, 1, &req.n_source_volume_ids);
	if (csictl_csi_map_set(c, &req.base, "parameters", &c->o.params) ||
	    csictl_csi_map_set(c, &req.base, "secrets", &c->o.secrets))
		return csictl_csi_nomem(c);
	return csictl_csi_call_show(c, CSI_RPC_CREATE_VOLUME_GROUP_SNAPSHOT, &req.base,
				    csictl_csi_group_create_show);
}

static int csictl_csi_group_get(struct csictl_csi *c)
{
	Csi__V1__GetVolumeGroupSnapshotRequest req =
	    CSI__V1__GET_VOLUME_GROUP_SNAPSHOT_REQUEST__INIT;

	req.group_snapshot_id = (char *)c->args.v[0];
	req.snapshot_ids = csictl_csi_group_rest(c, 1, &req.n_snapshot_ids);
	if (csictl_csi_map_set(c, &req.base, "secrets", &c->o.secrets))
		return csictl_csi_nomem(c);
	return csictl_csi_call_show(c, CSI_RPC_GET_VOLUME_GROUP_SNAPSHOT, &req.base,
				    csictl_csi_group_get_show);
}

static int csictl_csi_group_delete(struct csictl_csi *c)
{
	Csi__V1__DeleteVolumeGroupSnapshotRequest req =
	    CSI__V1__DELETE_VOLUME_GROUP_SNAPSHOT_REQUEST__INIT;

	req.group_snapshot_id = (char *)c->args.v[0];
	req.snapshot_ids = csictl_csi_group_rest(c, 1, &req.n_snapshot_ids);
	if (csictl_csi_map_set(c, &req.base, "secrets", &c->o.secrets))
		return csictl_csi_nomem(c);
	return csictl_csi_call_done(c, CSI_RPC_DELETE_VOLUME_GROUP_SNAPSHOT, &req.base,
				    "group snapshot %s deleted", req.group_snapshot_id);
}

/* Two words name the command, so CSICTL_ARGS_MAX - 2 arguments are left. */
const struct csictl_csi_cmd csictl_csi_group_cmds[] = {
    {"group-snapshot create", 2, CSICTL_ARGS_MAX - 2, "group-snapshot create NAME VOL...",
     "snapshot volumes together at one point in time (-param, -secret)", csictl_csi_group_create},
    {"group-snapshot get", 2, CSICTL_ARGS_MAX - 2, "group-snapshot get ID SNAP...",
     "show a group snapshot; SNAP... are its member snapshot IDs (-secret)", csictl_csi_group_get},
    {"group-snapshot delete", 2, CSICTL_ARGS_MAX - 2, "group-snapshot delete ID SNAP...",
     "delete a group snapshot with its member snapshots (-secret)", csictl_csi_group_delete},
    {0},
};
