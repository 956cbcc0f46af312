/*
 * csi-hostpath's GroupController service as a real process on a
 * temporary socket, driven through the real gRPC client: capabilities,
 * CreateVolumeGroupSnapshot (idempotent by name, one creation time and
 * the data of one moment for every member), GetVolumeGroupSnapshot and
 * DeleteVolumeGroupSnapshot (members go with the group), how the member
 * snapshots look to the Controller service, survival of a kill -9, and
 * every error code of the three RPCs: the spec's rows and the general
 * ones (missing or invalid fields, UNIMPLEMENTED in node mode). The rows
 * csi-hostpath never produces by itself (DeleteVolumeGroupSnapshot
 * FAILED_PRECONDITION: nothing uses a snapshot once it is cut; ABORTED)
 * come from its fault script, to check they reach the CO intact and
 * change nothing.
 */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "csi/csi_rules.h"
#include "hostpath_proc.h"

#define GRP_MAX 8

struct fx {
	struct hpp_proc h, h2; /* h2: a second plugin, in another mode */
	struct hpp_client cl, cl2;
};

/* What a test keeps of a VolumeGroupSnapshot (responses live until the next call). */
struct grp {
	char id[64];
	size_t n;
	char snap[GRP_MAX][64];
	char source[GRP_MAX][64];
	char *ids[GRP_MAX]; /* snap[i], for snapshot_ids fields */
	int64_t ns; /* creation_time */
};

static int teardown(void **state);

static int setup(void **state)
{
	/* GetSnapshot (alpha in v1.12) shows a member's group. */
	static const char *const alpha[] = {"--enable-alpha", NULL};
	static struct fx f;

	memset(&f, 0, sizeof(f));
	*state = &f;
	if (hpp_proc_start(&f.h, alpha) != 0 || hpp_client_open(&f.cl, f.h.endpoint) != 0) {
		teardown(state);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	hpp_client_close(&f->cl2);
	hpp_proc_cleanup(&f->h2);
	hpp_client_close(&f->cl);
	hpp_proc_cleanup(&f->h);
	return 0;
}

static int call(struct fx *f, enum csi_rpc rpc, const void *req, void *resp)
{
	return hpp_client_call(&f->cl, rpc, req, resp, 0);
}

static int64_t ts_ns(const Google__Protobuf__Timestamp *t)
{
	assert_non_null(t);
	return t->seconds * 1000000000LL + t->nanos;
}

/* Copies vg into g, checking what every group answer must hold. */
static void grp_keep(const Csi__V1__VolumeGroupSnapshot *vg, struct grp *g)
{
	assert_non_null(vg);
	assert_true(vg->ready_to_use);
	assert_true(vg->n_snapshots >= 1 && vg->n_snapshots <= GRP_MAX);
	snprintf(g->id, sizeof(g->id), "%s", vg->group_snapshot_id);
	assert_int_equal(strncmp(g->id, "group-", 6), 0);
	g->n = vg->n_snapshots;
	g->ns = ts_ns(vg->creation_time);
	for (size_t i = 0; i < g->n; i++) {
		const Csi__V1__Snapshot *s = vg->snapshots[i];

		snprintf(g->snap[i], sizeof(g->snap[i]), "%s", s->snapshot_id);
		snprintf(g->source[i], sizeof(g->source[i]), "%s", s->source_volume_id);
		g->ids[i] = g->snap[i];
		/* "the value MUST be the same as the group_snapshot_id in that message". */
		assert_string_equal(s->group_snapshot_id, g->id);
		assert_true(s->ready_to_use);
		/* All members are cut at the group's one point in time. */
		assert_true(ts_ns(s->creation_time) == g->ns);
	}
}

static int group_create(struct fx *f, const char *name, const char *const *vols, size_t n,
			const char *param, struct grp *g)
{
	Csi__V1__CreateVolumeGroupSnapshotRequest r =
	    CSI__V1__CREATE_VOLUME_GROUP_SNAPSHOT_REQUEST__INIT;
	Csi__V1__CreateVolumeGroupSnapshotRequest__ParametersEntry pe =
	    CSI__V1__CREATE_VOLUME_GROUP_SNAPSHOT_REQUEST__PARAMETERS_ENTRY__INIT;
	Csi__V1__CreateVolumeGroupSnapshotRequest__ParametersEntry *pl[1] = {&pe};
	Csi__V1__CreateVolumeGroupSnapshotResponse *resp;
	int code;

	r.name = (char *)name;
	r.source_volume_ids = (char **)vols;
	r.n_source_volume_ids = n;
	if (param) {
		pe.key = "tier";
		pe.value = (char *)param;
		r.parameters = pl;
		r.n_parameters = 1;
	}
	code = call(f, CSI_RPC_CREATE_VOLUME_GROUP_SNAPSHOT, &r, &resp);
	if (code == CSI_OK && g)
		grp_keep(resp->group_snapshot, g);
	return code;
}

static int group_get(struct fx *f, const char *id, char *const *snaps, size_t n, struct grp *g)
{
	Csi__V1__GetVolumeGroupSnapshotRequest r = CSI__V1__GET_VOLUME_GROUP_SNAPSHOT_REQUEST__INIT;
	Csi__V1__GetVolumeGroupSnapshotResponse *resp;
	int code;

	r.group_snapshot_id = (char *)id;
	r.snapshot_ids = (char **)snaps;
	r.n_snapshot_ids = n;
	code = call(f, CSI_RPC_GET_VOLUME_GROUP_SNAPSHOT, &r, &resp);
	if (code == CSI_OK && g)
		grp_keep(resp->group_snapshot, g);
	return code;
}

static int group_delete(struct fx *f, const char *id, char *const *snaps, size_t n)
{
	Csi__V1__DeleteVolumeGroupSnapshotRequest r =
	    CSI__V1__DELETE_VOLUME_GROUP_SNAPSHOT_REQUEST__INIT;

	r.group_snapshot_id = (char *)id;
	r.snapshot_ids = (char **)snaps;
	r.n_snapshot_ids = n;
	return call(f, CSI_RPC_DELETE_VOLUME_GROUP_SNAPSHOT, &r, NULL);
}

static int snap_get(struct fx *f, const char *id, char *group, size_t len)
{
	Csi__V1__GetSnapshotRequest r = CSI__V1__GET_SNAPSHOT_REQUEST__INIT;
	Csi__V1__GetSnapshotResponse *resp;
	int code;

	r.snapshot_id = (char *)id;
	code = call(f, CSI_RPC_GET_SNAPSHOT, &r, &resp);
	if (code == CSI_OK)
		snprintf(group, len, "%s",
			 resp->snapshot->group_snapshot_id ? resp->snapshot->group_snapshot_id
							   : "");
	return code;
}

static int snap_delete(struct fx *f, const char *id)
{
	Csi__V1__DeleteSnapshotRequest r = CSI__V1__DELETE_SNAPSHOT_REQUEST__INIT;

	r.snapshot_id = (char *)id;
	return call(f, CSI_RPC_DELETE_SNAPSHOT, &r, NULL);
}

/* Number of snapshots ListSnapshots reports. */
static size_t snap_count(struct fx *f)
{
	Csi__V1__ListSnapshotsRequest r = CSI__V1__LIST_SNAPSHOTS_REQUEST__INIT;
	Csi__V1__ListSnapshotsResponse *resp;

	assert_int_equal(call(f, CSI_RPC_LIST_SNAPSHOTS, &r, &resp), CSI_OK);
	return resp->n_entries;
}

static void put(struct fx *f, const char *vol, const char *text)
{
	char path[300];
	int fd;

	snprintf(path, sizeof(path), "%s/volumes/%s/data.txt", f->h.data, vol);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* Whether <data>/<kind>/<id>/data.txt holds exactly text. */
static bool holds(struct fx *f, const char *kind, const char *id, const char *text)
{
	char path[300], buf[128] = "";
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%s/%s/data.txt", f->h.data, kind, id);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n == (ssize_t)strlen(text) && memcmp(buf, text, (size_t)n) == 0;
}

/* Entries of <data>/<sub>, or -1 when it cannot be read. */
static int dir_entries(const char *data, const char *sub)
{
	char path[200];
	struct dirent *de;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "%s/%s", data, sub);
	d = opendir(path);
	if (!d)
		return -1;
	while ((de = readdir(d)) != NULL)
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

static bool snapshot_dir_exists(struct fx *f, const char *id)
{
	char path[300];
	struct stat st;

	snprintf(path, sizeof(path), "%s/snapshots/%s", f->h.data, id);
	return lstat(path, &st) == 0;
}

/* Index of the member of g cut from volume vol. */
static size_t member_of(const struct grp *g, const char *vol)
{
	for (size_t i = 0; i < g->n; i++)
		if (strcmp(g->source[i], vol) == 0)
			return i;
	fail_msg("no member of %s from volume %s", g->id, vol);
	return 0;
}

static void test_capabilities(void **state)
{
	struct fx *f = *state;
	Csi__V1__GetPluginCapabilitiesRequest pr = CSI__V1__GET_PLUGIN_CAPABILITIES_REQUEST__INIT;
	Csi__V1__GetPluginCapabilitiesResponse *pc;
	Csi__V1__GroupControllerGetCapabilitiesRequest gr =
	    CSI__V1__GROUP_CONTROLLER_GET_CAPABILITIES_REQUEST__INIT;
	Csi__V1__GroupControllerGetCapabilitiesResponse *gc;
	const char *node_args[] = {"--mode", "node", "--node-id", "node-2", NULL};
	bool group = false;

	assert_int_equal(call(f, CSI_RPC_GET_PLUGIN_CAPABILITIES, &pr, &pc), CSI_OK);
	for (size_t i = 0; i < pc->n_capabilities; i++)
		if (pc->capabilities[i]->type_case == CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE &&
		    pc->capabilities[i]->service->type ==
			CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__GROUP_CONTROLLER_SERVICE)
			group = true;
	assert_true(group);
	assert_int_equal(call(f, CSI_RPC_GROUP_CONTROLLER_GET_CAPABILITIES, &gr, &gc), CSI_OK);
	assert_int_equal(gc->n_capabilities, 1);
	assert_int_equal(gc->capabilities[0]->type_case,
			 CSI__V1__GROUP_CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC);
	assert_int_equal(
	    gc->capabilities[0]->rpc->type,
	    CSI__V1__GROUP_CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT);

	/* A node plugin has no group controller: UNIMPLEMENTED, which a CO never retries. */
	assert_int_equal(hpp_proc_start(&f->h2, node_args), 0);
	assert_int_equal(hpp_client_open(&f->cl2, f->h2.endpoint), 0);
	assert_int_equal(hpp_client_call(&f->cl2, CSI_RPC_GET_PLUGIN_CAPABILITIES, &pr, &pc, 0),
			 CSI_OK);
	for (size_t i = 0; i < pc->n_capabilities; i++)
		assert_false(
		    pc->capabilities[i]->service &&
		    pc->capabilities[i]->service->type ==
			CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__GROUP_CONTROLLER_SERVICE);
	for (enum csi_rpc rpc = CSI_RPC_GROUP_CONTROLLER_GET_CAPABILITIES;
	     rpc <= CSI_RPC_GET_VOLUME_GROUP_SNAPSHOT; rpc++) {
		const struct csi_rpc_info *info = csi_rpc_info(rpc);
		static const uint8_t empty[1];
		ProtobufCMessage *req = protobuf_c_message_unpack(info->request, NULL, 0, empty);

		assert_non_null(req);
		assert_string_equal(info->service, "GroupController");
		assert_int_equal(hpp_client_call(&f->cl2, rpc, req, NULL, 0), CSI_UNIMPLEMENTED);
		assert_int_equal(csi_rules_outcome(rpc, CSI_UNIMPLEMENTED), CSI_OUTCOME_FINAL);
		protobuf_c_message_free_unpacked(req, NULL);
	}
}

static void test_create_consistent_and_idempotent(void **state)
{
	struct fx *f = *state;
	char v1[64], v2[64], v3[64], clone[64], group[64];
	struct grp g, again;
	Csi__V1__CreateVolumeRequest cr = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	Csi__V1__VolumeContentSource cs = CSI__V1__VOLUME_CONTENT_SOURCE__INIT;
	Csi__V1__VolumeContentSource__SnapshotSource ss =
	    CSI__V1__VOLUME_CONTENT_SOURCE__SNAPSHOT_SOURCE__INIT;
	struct hpp_cap cap;
	Csi__V1__CreateVolumeResponse *cv;
	size_t m;

	assert_int_equal(hpp_create(&f->cl.caller, "db-data", 1 << 20, 0, false, v1), CSI_OK);
	assert_int_equal(hpp_create(&f->cl.caller, "db-log", 2 << 20, 0, false, v2), CSI_OK);
	assert_int_equal(hpp_create(&f->cl.caller, "other", 1 << 20, 0, false, v3), CSI_OK);
	put(f, v1, "data at t0");
	put(f, v2, "log at t0");
	assert_int_equal(group_create(f, "backup-1", (const char *const[]){v1, v2}, 2, NULL, &g),
			 CSI_OK);
	assert_int_equal(g.n, 2);
	assert_string_equal(g.source[0], v1);
	assert_string_equal(g.source[1], v2);

	/* Writes after the cut do not reach the members; each member holds its own volume. */
	put(f, v1, "data at t1");
	put(f, v2, "log at t1");
	assert_true(holds(f, "snapshots", g.snap[member_of(&g, v1)], "data at t0"));
	assert_true(holds(f, "snapshots", g.snap[member_of(&g, v2)], "log at t0"));

	/* Same name, same sources (in any order), same parameters: the same group. */
	for (int i = 0; i < 2; i++) {
		const char *const *order =
		    i ? (const char *const[]){v2, v1} : (const char *const[]){v1, v2};

		assert_int_equal(group_create(f, "backup-1", order, 2, NULL, &again), CSI_OK);
		assert_string_equal(again.id, g.id);
		assert_int_equal(again.n, 2);
		assert_true(again.ns == g.ns);
		for (size_t k = 0; k < 2; k++)
			assert_string_equal(again.snap[k], g.snap[k]);
	}
	/* The retry cut nothing new: the t0 data is still what the members hold. */
	assert_true(holds(f, "snapshots", g.snap[member_of(&g, v1)], "data at t0"));
	assert_int_equal(snap_count(f), 2);

	/* ALREADY_EXISTS: the same name with other sources or other parameters. */
	assert_int_equal(group_create(f, "backup-1", (const char *const[]){v1}, 1, NULL, NULL),
			 CSI_ALREADY_EXISTS);
	assert_int_equal(
	    group_create(f, "backup-1", (const char *const[]){v1, v2, v3}, 3, NULL, NULL),
	    CSI_ALREADY_EXISTS);
	assert_int_equal(
	    group_create(f, "backup-1", (const char *const[]){v1, v2}, 2, "premium", NULL),
	    CSI_ALREADY_EXISTS);
	assert_int_equal(
	    csi_rules_outcome(CSI_RPC_CREATE_VOLUME_GROUP_SNAPSHOT, CSI_ALREADY_EXISTS),
	    CSI_OUTCOME_FINAL);
	assert_int_equal(snap_count(f), 2);

	/* The Controller service sees the members, with their group. */
	for (size_t i = 0; i < g.n; i++) {
		assert_int_equal(snap_get(f, g.snap[i], group, sizeof(group)), CSI_OK);
		assert_string_equal(group, g.id);
	}

	/* A member is the source of a new volume like any snapshot. */
	m = member_of(&g, v2);
	ss.snapshot_id = g.snap[m];
	cs.type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT;
	cs.snapshot = &ss;
	cr.name = "restored-log";
	cr.volume_content_source = &cs;
	cr.volume_capabilities = hpp_cap(&cap, false, 1) ? cap.list : NULL;
	cr.n_volume_capabilities = 1;
	assert_int_equal(call(f, CSI_RPC_CREATE_VOLUME, &cr, &cv), CSI_OK);
	snprintf(clone, sizeof(clone), "%s", cv->volume->volume_id);
	assert_true(holds(f, "volumes", clone, "log at t0"));

	/* A volume may be in several groups; a group of one volume is a group too. */
	assert_int_equal(
	    group_create(f, "backup-2", (const char *const[]){v2}, 1, "premium", &again), CSI_OK);
	assert_string_not_equal(again.id, g.id);
	assert_true(holds(f, "snapshots", again.snap[0], "log at t1"));
	assert_int_equal(snap_count(f), 3);
}

static void test_create_errors(void **state)
{
	struct fx *f = *state;
	const char *args[] = {"--capacity", "3M", NULL};
	char mnt[64], blk[64], ids[65][32], *many[65];

	assert_int_equal(hpp_create(&f->cl.caller, "mnt", 1 << 20, 0, false, mnt), CSI_OK);
	assert_int_equal(hpp_create(&f->cl.caller, "blk", 1 << 20, 0, true, blk), CSI_OK);

	/* INVALID_ARGUMENT: missing or invalid fields. */
	assert_int_equal(group_create(f, "", (const char *const[]){mnt}, 1, NULL, NULL),
			 CSI_INVALID_ARGUMENT);
	assert_int_equal(group_create(f, "bad/name", (const char *const[]){mnt}, 1, NULL, NULL),
			 CSI_INVALID_ARGUMENT);
	assert_int_equal(group_create(f, "g", NULL, 0, NULL, NULL), CSI_INVALID_ARGUMENT);
	assert_int_equal(group_create(f, "g", (const char *const[]){mnt, "../etc"}, 2, NULL, NULL),
			 CSI_INVALID_ARGUMENT);
	assert_int_equal(group_create(f, "g", (const char *const[]){mnt, ""}, 2, NULL, NULL),
			 CSI_INVALID_ARGUMENT);
	assert_int_equal(group_create(f, "g", (const char *const[]){mnt, mnt}, 2, NULL, NULL),
			 CSI_INVALID_ARGUMENT);
	for (int i = 0; i < 65; i++) {
		snprintf(ids[i], sizeof(ids[i]), "vol-%d", i);
		many[i] = ids[i];
	}
	assert_int_equal(group_create(f, "g", (const char *const *)many, 65, NULL, NULL),
			 CSI_INVALID_ARGUMENT);

	/* NOT_FOUND: every source volume must exist; nothing is cut otherwise. */
	assert_int_equal(
	    group_create(f, "g", (const char *const[]){mnt, "vol-0123456789abcdef"}, 2, NULL, NULL),
	    CSI_NOT_FOUND);

	/* FAILED_PRECONDITION: mount and block volumes cannot be snapshotted together. */
	assert_int_equal(group_create(f, "g", (const char *const[]){mnt, blk}, 2, NULL, NULL),
			 CSI_FAILED_PRECONDITION);
	assert_int_equal(
	    csi_rules_outcome(CSI_RPC_CREATE_VOLUME_GROUP_SNAPSHOT, CSI_FAILED_PRECONDITION),
	    CSI_OUTCOME_FINAL);
	assert_int_equal(snap_count(f), 0);
	assert_int_equal(group_get(f, "group-0123456789abcdef",
				   (char *const[]){"snap-0123456789abcdef"}, 1, NULL),
			 CSI_NOT_FOUND);

	/*
	 * A copy that fails half-way (the second volume's directory vanished
	 * behind the plugin's back) leaves no snapshot behind.
	 */
	{
		char ga[64], gb[64], path[300];

		assert_int_equal(hpp_create(&f->cl.caller, "gone-a", 1 << 20, 0, false, ga),
				 CSI_OK);
		assert_int_equal(hpp_create(&f->cl.caller, "gone-b", 1 << 20, 0, false, gb),
				 CSI_OK);
		snprintf(path, sizeof(path), "%s/volumes/%s", f->h.data, gb);
		hpp_rmrf(path);
		assert_int_equal(group_create(f, "g", (const char *const[]){ga, gb}, 2, NULL, NULL),
				 CSI_INTERNAL);
		assert_int_equal(snap_count(f), 0);
		assert_int_equal(dir_entries(f->h.data, "snapshots"), 0);
	}

	/* ABORTED (an operation pending) reaches the CO, which retries; the retry works. */
	assert_int_equal(
	    hpp_write_file(f->h.faults,
			   "CreateVolumeGroupSnapshot nth=1 code=ABORTED msg=\"busy\"\n"),
	    0);
	assert_int_equal(group_create(f, "g", (const char *const[]){blk}, 1, NULL, NULL),
			 CSI_ABORTED);
	assert_string_equal(f->cl.st.message, "busy");
	assert_int_equal(csi_rules_outcome(CSI_RPC_CREATE_VOLUME_GROUP_SNAPSHOT, CSI_ABORTED),
			 CSI_OUTCOME_RETRY);
	assert_int_equal(group_create(f, "g", (const char *const[]){blk}, 1, NULL, NULL), CSI_OK);
	assert_int_equal(hpp_write_file(f->h.faults, ""), 0);

	/*
	 * RESOURCE_EXHAUSTED: a plugin of 3 MiB holds two 1 MiB volumes; a
	 * group needs 2 MiB more. No copy is left behind.
	 */
	assert_int_equal(hpp_proc_start(&f->h2, args), 0);
	assert_int_equal(hpp_client_open(&f->cl2, f->h2.endpoint), 0);
	assert_int_equal(hpp_create(&f->cl2.caller, "a", 1 << 20, 0, false, mnt), CSI_OK);
	assert_int_equal(hpp_create(&f->cl2.caller, "b", 1 << 20, 0, false, blk), CSI_OK);
	{
		Csi__V1__CreateVolumeGroupSnapshotRequest r =
		    CSI__V1__CREATE_VOLUME_GROUP_SNAPSHOT_REQUEST__INIT;

		r.name = "too-big";
		r.source_volume_ids = (char *[]){mnt, blk};
		r.n_source_volume_ids = 2;
		assert_int_equal(
		    hpp_client_call(&f->cl2, CSI_RPC_CREATE_VOLUME_GROUP_SNAPSHOT, &r, NULL, 0),
		    CSI_RESOURCE_EXHAUSTED);
		assert_int_equal(dir_entries(f->h2.data, "snapshots"), 0);
	}
}

static void test_get_and_delete(void **state)
{
	struct fx *f = *state;
	char v1[64], v2[64], group[64];
	struct grp g, g2, got;
	char *rev[2], *wrong[2];

	assert_int_equal(hpp_create(&f->cl.caller, "a", 1 << 20, 0, false, v1), CSI_OK);
	assert_int_equal(hpp_create(&f->cl.caller, "b", 1 << 20, 0, false, v2), CSI_OK);
	put(f, v1, "a0");
	assert_int_equal(group_create(f, "grp", (const char *const[]){v1, v2}, 2, NULL, &g),
			 CSI_OK);
	assert_int_equal(group_create(f, "grp2", (const char *const[]){v1}, 1, NULL, &g2), CSI_OK);

	/* Get with the members in any order. */
	rev[0] = g.ids[1];
	rev[1] = g.ids[0];
	assert_int_equal(group_get(f, g.id, rev, 2, &got), CSI_OK);
	assert_string_equal(got.id, g.id);
	assert_int_equal(got.n, 2);
	assert_true(got.ns == g.ns);

	/* INVALID_ARGUMENT: missing fields and a snapshot list that does not match. */
	wrong[0] = g.ids[0];
	wrong[1] = g2.ids[0];
	assert_int_equal(group_get(f, "", g.ids, 2, NULL), CSI_INVALID_ARGUMENT);
	assert_int_equal(group_get(f, "../x", g.ids, 2, NULL), CSI_INVALID_ARGUMENT);
	assert_int_equal(group_get(f, g.id, NULL, 0, NULL), CSI_INVALID_ARGUMENT);
	assert_int_equal(group_get(f, g.id, g.ids, 1, NULL), CSI_INVALID_ARGUMENT);
	assert_int_equal(group_get(f, g.id, wrong, 2, NULL), CSI_INVALID_ARGUMENT);
	assert_int_equal(group_get(f, g.id, (char *const[]){g.ids[0], g.ids[0]}, 2, NULL),
			 CSI_INVALID_ARGUMENT);
	assert_int_equal(
	    group_get(f, g.id, (char *const[]){g.ids[0], g.ids[1], g2.ids[0]}, 3, NULL),
	    CSI_INVALID_ARGUMENT);
	assert_int_equal(group_delete(f, "", g.ids, 2), CSI_INVALID_ARGUMENT);
	assert_int_equal(group_delete(f, g.id, NULL, 0), CSI_INVALID_ARGUMENT);
	assert_int_equal(group_delete(f, g.id, g.ids, 1), CSI_INVALID_ARGUMENT);
	assert_int_equal(group_delete(f, g.id, wrong, 2), CSI_INVALID_ARGUMENT);
	assert_int_equal(group_delete(f, g.id, (char *const[]){g.ids[0], "snap-bad/.."}, 2),
			 CSI_INVALID_ARGUMENT);
	assert_int_equal(
	    csi_rules_outcome(CSI_RPC_DELETE_VOLUME_GROUP_SNAPSHOT, CSI_INVALID_ARGUMENT),
	    CSI_OUTCOME_FINAL);
	/* A refused delete changed nothing. */
	assert_int_equal(group_get(f, g.id, g.ids, 2, NULL), CSI_OK);
	for (size_t i = 0; i < g.n; i++)
		assert_true(snapshot_dir_exists(f, g.snap[i]));

	/* NOT_FOUND for an unknown group (a read: the answer, not a reason to retry). */
	assert_int_equal(group_get(f, "group-0000000000000000", g.ids, 2, NULL), CSI_NOT_FOUND);
	assert_int_equal(csi_rules_outcome(CSI_RPC_GET_VOLUME_GROUP_SNAPSHOT, CSI_NOT_FOUND),
			 CSI_OUTCOME_FINAL);

	/* A member cannot be deleted alone: INVALID_ARGUMENT, and it stays. */
	assert_int_equal(snap_delete(f, g.snap[0]), CSI_INVALID_ARGUMENT);
	assert_non_null(strstr(f->cl.st.message, g.id));
	assert_int_equal(snap_get(f, g.snap[0], group, sizeof(group)), CSI_OK);
	assert_string_equal(group, g.id);

	/*
	 * FAILED_PRECONDITION (group snapshot in use) from the fault script:
	 * the CO retries with backoff, and the group is untouched.
	 */
	assert_int_equal(hpp_write_file(f->h.faults,
					"DeleteVolumeGroupSnapshot nth=1 code=FAILED_PRECONDITION"
					" msg=\"in use\"\n"),
			 0);
	assert_int_equal(group_delete(f, g.id, g.ids, 2), CSI_FAILED_PRECONDITION);
	assert_int_equal(
	    csi_rules_outcome(CSI_RPC_DELETE_VOLUME_GROUP_SNAPSHOT, CSI_FAILED_PRECONDITION),
	    CSI_OUTCOME_RETRY);
	assert_int_equal(hpp_write_file(f->h.faults, ""), 0);
	assert_int_equal(group_get(f, g.id, g.ids, 2, NULL), CSI_OK);

	/* Delete takes the members with the group, and is idempotent. */
	for (int i = 0; i < 2; i++)
		assert_int_equal(group_delete(f, g.id, rev, 2), CSI_OK);
	for (size_t i = 0; i < g.n; i++) {
		assert_false(snapshot_dir_exists(f, g.snap[i]));
		assert_int_equal(snap_get(f, g.snap[i], group, sizeof(group)), CSI_NOT_FOUND);
	}
	assert_int_equal(group_get(f, g.id, g.ids, 2, NULL), CSI_NOT_FOUND);
	assert_int_equal(snap_count(f), 1);
	/* Unknown group: OK. */
	assert_int_equal(group_delete(f, "group-0000000000000000", g.ids, 2), CSI_OK);

	/* The other group, of the same volume, is untouched; the name is free again. */
	assert_int_equal(group_get(f, g2.id, g2.ids, 1, NULL), CSI_OK);
	assert_true(holds(f, "snapshots", g2.snap[0], "a0"));
	assert_int_equal(group_create(f, "grp", (const char *const[]){v2}, 1, NULL, &got), CSI_OK);
	assert_string_not_equal(got.id, g.id);

	/* The source volumes can go; the group snapshot does not depend on them. */
	assert_int_equal(hpp_delete(&f->cl.caller, v1), CSI_OK);
	assert_int_equal(group_get(f, g2.id, g2.ids, 1, NULL), CSI_OK);
	assert_int_equal(group_create(f, "grp2", (const char *const[]){v1}, 1, NULL, &got), CSI_OK);
	assert_string_equal(got.id, g2.id);
}

/*
 * Get and Delete by group ID and snapshot_ids, one row per case: the list
 * is checked only against a group that exists, so an unknown group is
 * NOT_FOUND (Get) and OK (Delete) whatever the list holds, empty included.
 */
enum grp_ids { IDS_NONE, IDS_MEMBERS, IDS_WRONG, IDS_BAD };

static const struct grp_row {
	bool exists;
	enum grp_ids ids;
	int get, del;
} grp_rows[] = {
    {false, IDS_NONE, CSI_NOT_FOUND, CSI_OK},
    {false, IDS_MEMBERS, CSI_NOT_FOUND, CSI_OK},
    {false, IDS_WRONG, CSI_NOT_FOUND, CSI_OK},
    {false, IDS_BAD, CSI_NOT_FOUND, CSI_OK},
    {true, IDS_NONE, CSI_INVALID_ARGUMENT, CSI_INVALID_ARGUMENT},
    {true, IDS_WRONG, CSI_INVALID_ARGUMENT, CSI_INVALID_ARGUMENT},
    {true, IDS_BAD, CSI_INVALID_ARGUMENT, CSI_INVALID_ARGUMENT},
    {true, IDS_MEMBERS, CSI_OK, CSI_OK},
};

static void test_ids_table(void **state)
{
	struct fx *f = *state;
	char v1[64], *wrong[1] = {"snap-0000000000000000"}, *bad[1] = {"snap-bad/.."};
	struct grp g;

	assert_int_equal(hpp_create(&f->cl.caller, "a", 1 << 20, 0, false, v1), CSI_OK);
	for (size_t i = 0; i < sizeof(grp_rows) / sizeof(grp_rows[0]); i++) {
		const struct grp_row *r = &grp_rows[i];
		char *const *ids = r->ids == IDS_MEMBERS ? g.ids
				   : r->ids == IDS_WRONG ? wrong
				   : r->ids == IDS_BAD   ? bad
							 : NULL;
		size_t n = r->ids == IDS_NONE ? 0 : 1;
		const char *id = "group-0000000000000000";

		print_message("row %zu\n", i);
		assert_int_equal(group_create(f, "g", (const char *const[]){v1}, 1, NULL, &g),
				 CSI_OK);
		if (r->exists)
			id = g.id;
		assert_int_equal(group_get(f, id, ids, n, NULL), r->get);
		if (r->get == CSI_NOT_FOUND)
			assert_non_null(strstr(f->cl.st.message, "not found"));
		assert_int_equal(group_delete(f, id, ids, n), r->del);
		/* A refused delete keeps the group; a done one removes it. */
		assert_int_equal(group_get(f, g.id, g.ids, 1, NULL),
				 r->exists && r->del == CSI_OK ? CSI_NOT_FOUND : CSI_OK);
		assert_int_equal(group_delete(f, g.id, g.ids, 1), CSI_OK);
	}
}

static void test_kill_restart(void **state)
{
	struct fx *f = *state;
	char v1[64], v2[64];
	struct grp g, got;

	assert_int_equal(hpp_create(&f->cl.caller, "a", 1 << 20, 0, false, v1), CSI_OK);
	assert_int_equal(hpp_create(&f->cl.caller, "b", 1 << 20, 0, false, v2), CSI_OK);
	assert_int_equal(group_create(f, "durable", (const char *const[]){v1, v2}, 2, NULL, &g),
			 CSI_OK);
	hpp_proc_kill(&f->h, SIGKILL);
	assert_int_equal(hpp_proc_restart(&f->h, NULL), 0);
	assert_int_equal(hpp_client_wait_ready(&f->cl, 10000), 0);
	assert_int_equal(group_get(f, g.id, g.ids, 2, &got), CSI_OK);
	assert_true(got.ns == g.ns);
	assert_int_equal(group_create(f, "durable", (const char *const[]){v2, v1}, 2, NULL, &got),
			 CSI_OK);
	assert_string_equal(got.id, g.id);
	for (size_t i = 0; i < g.n; i++)
		assert_true(snapshot_dir_exists(f, g.snap[i]));
	assert_int_equal(group_delete(f, g.id, g.ids, 2), CSI_OK);
	assert_int_equal(snap_count(f), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_capabilities, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_create_consistent_and_idempotent, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_create_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_get_and_delete, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ids_table, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_kill_restart, setup, teardown),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	csi_grpc_shutdown();
	return rc;
}
