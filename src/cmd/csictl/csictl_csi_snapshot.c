/*
 * `csictl csi snapshot create|delete|list`: the snapshot RPCs of the
 * Controller service. `snapshot list` follows next_token like
 * list-volumes (one page with -max-entries) and can be narrowed with
 * -source-volume or -snapshot-id.
 */
#include "csictl_csi.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void csictl_csi_snapshot_cells(const Csi__V1__Snapshot *s, char *size, size_t size_len,
			       char *created, size_t created_len)
{
	struct tm tm;
	time_t t;

	csictl_size_format(s->size_bytes, size, size_len);
	created[0] = '\0';
	if (!s->creation_time)
		return;
	t = (time_t)s->creation_time->seconds;
	if (gmtime_r(&t, &tm) && tm.tm_year < 8100 && tm.tm_year > -1900)
		strftime(created, created_len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int csictl_csi_snapshot_print(struct csictl_csi *c, const Csi__V1__Snapshot *s)
{
	struct csictl_table *t = csictl_table_new(2, NULL);
	char size[32], created[64];

	csictl_csi_snapshot_cells(s, size, sizeof(size), created, sizeof(created));
	if (t) {
		csictl_table_addv(t, "snapshot id:", s->snapshot_id);
		csictl_table_addv(t, "source volume:", s->source_volume_id);
		csictl_table_addv(t, "size:", size);
		csictl_table_addv(t, "created:", created);
		csictl_table_addv(t, "ready:", s->ready_to_use ? "yes" : "no");
		if (s->group_snapshot_id && s->group_snapshot_id[0])
			csictl_table_addv(t, "group snapshot:", s->group_snapshot_id);
	}
	return csictl_csi_print_table(c, t);
}

static int csictl_csi_snapshot_create_show(struct csictl_csi *c, const ProtobufCMessage *m)
{
	const Csi__V1__CreateSnapshotResponse *resp = (const Csi__V1__CreateSnapshotResponse *)m;

	if (!resp->snapshot) {
		fputs("error: the plugin created the snapshot but returned none\n", c->err);
		return CSICTL_EXIT_FAIL;
	}
	return csictl_csi_snapshot_print(c, resp->snapshot);
}

static int csictl_csi_snapshot_create(struct csictl_csi *c)
{
	Csi__V1__CreateSnapshotRequest req = CSI__V1__CREATE_SNAPSHOT_REQUEST__INIT;

	req.name = (char *)c->args.v[0];
	req.source_volume_id = (char *)c->args.v[1];
	if (csictl_csi_map_set(c, &req.base, "parameters", &c->o.params) ||
	    csictl_csi_map_set(c, &req.base, "secrets", &c->o.secrets))
		return csictl_csi_nomem(c);
	return csictl_csi_call_show(c, CSI_RPC_CREATE_SNAPSHOT, &req.base,
				    csictl_csi_snapshot_create_show);
}

static int csictl_csi_snapshot_delete(struct csictl_csi *c)
{
	Csi__V1__DeleteSnapshotRequest req = CSI__V1__DELETE_SNAPSHOT_REQUEST__INIT;

	req.snapshot_id = (char *)c->args.v[0];
	if (csictl_csi_map_set(c, &req.base, "secrets", &c->o.secrets))
		return csictl_csi_nomem(c);
	return csictl_csi_call_done(c, CSI_RPC_DELETE_SNAPSHOT, &req.base, "snapshot %s deleted",
				    req.snapshot_id);
}

/* One ListSnapshots call (a csictl_csi_page_fn). */
static int csictl_csi_snapshot_page(struct csictl_csi *c, void *r, const char *token,
				    struct csictl_table *t, json_t *entries, char **next)
{
	Csi__V1__ListSnapshotsRequest *req = r;
	Csi__V1__ListSnapshotsResponse *resp = NULL;
	struct csi_status st;

	req->starting_token = (char *)token;
	if (csi_list_snapshots(c->client, req, &resp, c->timeout_ms, &st))
		return csictl_csi_fail(c, &st);
	for (size_t i = 0; i < resp->n_entries; i++) {
		const Csi__V1__Snapshot *s = resp->entries[i]->snapshot;
		char size[32], created[64];

		if (!t) {
			json_array_append_new(entries,
					      csictl_out_msg_json(&resp->entries[i]->base));
			continue;
		}
		if (!s)
			continue;
		csictl_csi_snapshot_cells(s, size, sizeof(size), created, sizeof(created));
		csictl_table_addv(t, s->snapshot_id, s->source_volume_id, size, created,
				  s->ready_to_use ? "yes" : "no");
	}
	*next = strdup(resp->next_token ? resp->next_token : "");
	csi_msg_free(&resp->base);
	return *next ? CSICTL_EXIT_OK : csictl_csi_nomem(c);
}

static int csictl_csi_snapshot_list(struct csictl_csi *c)
{
	static const char *const headers[] = {"SNAPSHOT ID", "SOURCE VOLUME", "SIZE", "CREATED",
					      "READY"};
	Csi__V1__ListSnapshotsRequest req = CSI__V1__LIST_SNAPSHOTS_REQUEST__INIT;
	struct err e;

	if (c->o.max_entries && csictl_int_parse(c->o.max_entries, &req.max_entries, &e))
		return csictl_csi_usage_error(c, "-max-entries: %s", e.msg);
	if (c->o.source_volume)
		req.source_volume_id = (char *)c->o.source_volume;
	if (c->o.snapshot_id)
		req.snapshot_id = (char *)c->o.snapshot_id;
	if (csictl_csi_map_set(c, &req.base, "secrets", &c->o.secrets))
		return csictl_csi_nomem(c);
	return csictl_csi_list(c, &req, csictl_csi_snapshot_page, 5, headers);
}

const struct csictl_csi_cmd csictl_csi_snapshot_cmds[] = {
    {"snapshot create", 2, 2, "snapshot create NAME SOURCE_VOLUME",
     "snapshot a volume (-param, -secret)", csictl_csi_snapshot_create},
    {"snapshot delete", 1, 1, "snapshot delete ID", "delete a snapshot",
     csictl_csi_snapshot_delete},
    {"snapshot list", 0, 0, "snapshot list",
     "list snapshots (-source-volume, -snapshot-id, -max-entries)", csictl_csi_snapshot_list},
    {0},
};
