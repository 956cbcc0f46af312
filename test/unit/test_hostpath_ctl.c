/*
 * Unit tests of csi-hostpath's Controller and Identity services, calling
 * hp_handle in process on a temporary data dir with fake mounts: volume
 * creation rules (idempotency, capacity, hostile names), deletion,
 * publication rules, listing with pagination, snapshots and clones,
 * expansion, modification, modes, and state surviving a restart.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include <cmocka.h>

#include "hostpath_proc.h"

#define SNW CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER
#define MNMW CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER
#define MNSW CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_SINGLE_WRITER

static int setup(void **state)
{
	static struct hpp_inproc t;

	if (hpp_inproc_start(&t, NULL) != 0)
		return -1;
	*state = &t;
	return 0;
}

static int teardown(void **state)
{
	hpp_inproc_stop(*state);
	return 0;
}

static void volume_path(struct hpp_inproc *t, const char *id, char *buf, size_t len)
{
	snprintf(buf, len, "%s/volumes/%s", t->p->data_dir, id);
}

static int64_t available(struct hpp_inproc *t)
{
	Csi__V1__GetCapacityRequest r = CSI__V1__GET_CAPACITY_REQUEST__INIT;
	Csi__V1__GetCapacityResponse *out;

	assert_int_equal(hpp_call(t, CSI_RPC_GET_CAPACITY, &r, &out), CSI_OK);
	return out->available_capacity;
}

static void test_identity(void **state)
{
	struct hpp_inproc *t = *state;
	Csi__V1__GetPluginInfoRequest ir = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	Csi__V1__GetPluginInfoResponse *info;
	Csi__V1__GetPluginCapabilitiesRequest cr = CSI__V1__GET_PLUGIN_CAPABILITIES_REQUEST__INIT;
	Csi__V1__GetPluginCapabilitiesResponse *caps;
	Csi__V1__ProbeRequest pr = CSI__V1__PROBE_REQUEST__INIT;
	Csi__V1__ProbeResponse *probe;
	bool controller = false;

	assert_int_equal(hpp_call(t, CSI_RPC_GET_PLUGIN_INFO, &ir, &info), CSI_OK);
	assert_string_equal(info->name, HP_DEFAULT_NAME);
	assert_int_equal(hpp_call(t, CSI_RPC_GET_PLUGIN_CAPABILITIES, &cr, &caps), CSI_OK);
	for (size_t i = 0; i < caps->n_capabilities; i++)
		if (caps->capabilities[i]->service &&
		    caps->capabilities[i]->type_case == CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE &&
		    caps->capabilities[i]->service->type ==
			CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__CONTROLLER_SERVICE)
			controller = true;
	assert_true(controller);
	assert_int_equal(hpp_call(t, CSI_RPC_PROBE, &pr, &probe), CSI_OK);
	assert_non_null(probe->ready);
	assert_true(probe->ready->value);
	/* The group controller service is offered (GA in CSI v1.12). */
	assert_int_equal(hpp_call(t, CSI_RPC_GROUP_CONTROLLER_GET_CAPABILITIES, &ir, NULL), CSI_OK);
}

static void test_create_idempotent(void **state)
{
	struct hpp_inproc *t = *state;
	char id[64], id2[64], path[512];
	struct stat st;
	int64_t before = available(t);

	assert_int_equal(hpp_create(&t->caller, "pvc-1", 0, 0, false, id), CSI_OK);
	assert_int_equal(strncmp(id, "vol-", 4), 0);
	volume_path(t, id, path, sizeof(path));
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(available(t), before - HP_DEFAULT_VOLUME_SIZE);
	/* Same name, compatible: the same volume. */
	assert_int_equal(hpp_create(&t->caller, "pvc-1", 0, 0, false, id2), CSI_OK);
	assert_string_equal(id, id2);
	assert_int_equal(
	    hpp_create(&t->caller, "pvc-1", 1 << 20, HP_DEFAULT_VOLUME_SIZE, false, id2), CSI_OK);
	/* Same name, incompatible capacity or access type. */
	assert_int_equal(
	    hpp_create(&t->caller, "pvc-1", 2 * HP_DEFAULT_VOLUME_SIZE, 0, false, NULL),
	    CSI_ALREADY_EXISTS);
	assert_int_equal(hpp_create(&t->caller, "pvc-1", 0, 0, true, NULL), CSI_ALREADY_EXISTS);
	assert_int_equal(available(t), before - HP_DEFAULT_VOLUME_SIZE);
}

static void test_create_capacity(void **state)
{
	struct hpp_inproc *t = *state;
	Csi__V1__CreateVolumeRequest r = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	Csi__V1__CreateVolumeResponse *out;
	char id[64], path[512];
	struct stat st;
	struct hpp_cap c;

	assert_int_equal(hpp_create(&t->caller, "lim", 2 << 20, 1 << 20, false, NULL),
			 CSI_OUT_OF_RANGE);
	assert_int_equal(hpp_create(&t->caller, "neg", -1, 0, false, NULL), CSI_INVALID_ARGUMENT);
	assert_int_equal(hpp_create(&t->caller, "huge", 1LL << 50, 0, false, NULL),
			 CSI_OUT_OF_RANGE);
	/* Block volumes are sparse files of the size asked. */
	assert_int_equal(hpp_create(&t->caller, "blk", 5 << 20, 0, true, id), CSI_OK);
	volume_path(t, id, path, sizeof(path));
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_size, 5 << 20);
	/* Only a limit: the default size capped at the limit. */
	hpp_cap(&c, false, SNW);
	r.name = "limited";
	r.volume_capabilities = c.list;
	r.n_volume_capabilities = 1;
	Csi__V1__CapacityRange cr = CSI__V1__CAPACITY_RANGE__INIT;
	cr.limit_bytes = 3 << 20;
	r.capacity_range = &cr;
	assert_int_equal(hpp_call(t, CSI_RPC_CREATE_VOLUME, &r, &out), CSI_OK);
	assert_int_equal(out->volume->capacity_bytes, 3 << 20);
	assert_int_equal(out->volume->n_accessible_topology, 1);
	assert_string_equal(out->volume->accessible_topology[0]->segments[0]->key, HP_TOPOLOGY_KEY);
	assert_string_equal(out->volume->accessible_topology[0]->segments[0]->value, "node-1");
}

static void test_create_full(void **state)
{
	struct hpp_inproc *t = *state;
	struct hp_config cfg = {.controller_publish = true, .capacity = 10 << 20};

	assert_int_equal(hpp_inproc_restart(t, &cfg), 0);
	assert_int_equal(hpp_create(&t->caller, "a", 6 << 20, 0, false, NULL), CSI_OK);
	assert_int_equal(hpp_create(&t->caller, "b", 6 << 20, 0, false, NULL),
			 CSI_RESOURCE_EXHAUSTED);
	assert_int_equal(available(t), 4 << 20);
}

static void test_create_bad_input(void **state)
{
	struct hpp_inproc *t = *state;
	Csi__V1__CreateVolumeRequest r = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	char long_name[1100];
	struct hpp_cap c[2];
	Csi__V1__VolumeCapability *mixed[2];
	const char *hostile[] = {"..",          "../../etc", "a/b",      "\xff\xfe",
				 "bad\x01name", "",          "\xc0\xaf", "\xed\xa0\x80"};

	memset(long_name, 'x', 1024);
	long_name[1024] = '\0';
	for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++)
		assert_int_equal(hpp_create(&t->caller, hostile[i], 0, 0, false, NULL),
				 CSI_INVALID_ARGUMENT);
	assert_int_equal(hpp_create(&t->caller, long_name, 0, 0, false, NULL),
			 CSI_INVALID_ARGUMENT);
	assert_int_equal(hpp_create(&t->caller, "ünïcödé", 1 << 20, 0, false, NULL), CSI_OK);
	/* No capabilities, a capability without access mode, mixed access types. */
	r.name = "caps";
	assert_int_equal(hpp_call(t, CSI_RPC_CREATE_VOLUME, &r, NULL), CSI_INVALID_ARGUMENT);
	hpp_cap(&c[0], false, SNW);
	c[0].cap.access_mode = NULL;
	r.volume_capabilities = c[0].list;
	r.n_volume_capabilities = 1;
	assert_int_equal(hpp_call(t, CSI_RPC_CREATE_VOLUME, &r, NULL), CSI_INVALID_ARGUMENT);
	mixed[0] = hpp_cap(&c[0], false, SNW);
	mixed[1] = hpp_cap(&c[1], true, SNW);
	r.volume_capabilities = mixed;
	r.n_volume_capabilities = 2;
	assert_int_equal(hpp_call(t, CSI_RPC_CREATE_VOLUME, &r, NULL), CSI_INVALID_ARGUMENT);
	hpp_cap(&c[0], false, 99);
	r.volume_capabilities = c[0].list;
	r.n_volume_capabilities = 1;
	assert_int_equal(hpp_call(t, CSI_RPC_CREATE_VOLUME, &r, NULL), CSI_INVALID_ARGUMENT);
	/* Hostile IDs never reach the file system. */
	assert_int_equal(hpp_delete(&t->caller, "../../etc"), CSI_INVALID_ARGUMENT);
	assert_int_equal(hpp_delete(&t->caller, ".."), CSI_INVALID_ARGUMENT);
	assert_int_equal(hpp_delete(&t->caller, ""), CSI_INVALID_ARGUMENT);
	assert_int_equal(hpp_delete(&t->caller, long_name), CSI_INVALID_ARGUMENT);
	assert_int_equal(hpp_delete(&t->caller, "vol-unknown"), CSI_OK);
}

static void test_delete(void **state)
{
	struct hpp_inproc *t = *state;
	char id[64], path[512];
	struct stat st;

	assert_int_equal(hpp_create(&t->caller, "del", 1 << 20, 0, false, id), CSI_OK);
	volume_path(t, id, path, sizeof(path));
	assert_int_equal(hpp_ctl_publish(&t->caller, id, "node-1", false, SNW, false), CSI_OK);
	assert_int_equal(hpp_delete(&t->caller, id), CSI_FAILED_PRECONDITION);
	assert_int_equal(hpp_ctl_unpublish(&t->caller, id, "node-1"), CSI_OK);
	assert_int_equal(hpp_delete(&t->caller, id), CSI_OK);
	assert_int_not_equal(stat(path, &st), 0);
	assert_int_equal(hpp_delete(&t->caller, id), CSI_OK);
}

static void test_publish_rules(void **state)
{
	struct hpp_inproc *t = *state;
	Csi__V1__ControllerGetVolumeRequest gr = CSI__V1__CONTROLLER_GET_VOLUME_REQUEST__INIT;
	Csi__V1__ControllerGetVolumeResponse *gv;
	char id[64], multi[64];

	/* A second node, as a node plugin sharing the data dir would register it. */
	struct hp_config cfg = {.mode = HP_MODE_NODE, .node_id = "node-2"};
	struct hp_config alpha = {.controller_publish = true, .enable_alpha = true};

	assert_int_equal(hpp_inproc_restart(t, &cfg), 0);
	assert_int_equal(hpp_inproc_restart(t, &alpha), 0);
	assert_int_equal(hpp_create(&t->caller, "pub", 1 << 20, 0, false, id), CSI_OK);
	assert_int_equal(hpp_ctl_publish(&t->caller, "vol-missing", "node-1", false, SNW, false),
			 CSI_NOT_FOUND);
	assert_int_equal(hpp_ctl_publish(&t->caller, id, "node-9", false, SNW, false),
			 CSI_NOT_FOUND);
	assert_int_equal(hpp_ctl_publish(&t->caller, id, "", false, SNW, false),
			 CSI_INVALID_ARGUMENT);
	assert_int_equal(hpp_ctl_publish(&t->caller, id, "node-1", false, SNW, false), CSI_OK);
	assert_int_equal(hpp_ctl_publish(&t->caller, id, "node-1", false, SNW, false), CSI_OK);
	assert_int_equal(hpp_ctl_publish(&t->caller, id, "node-1", false, SNW, true),
			 CSI_ALREADY_EXISTS);
	assert_int_equal(hpp_ctl_publish(&t->caller, id, "node-2", false, SNW, false),
			 CSI_FAILED_PRECONDITION);
	assert_non_null(strstr(t->msg, "node-1"));
	/* Multi-node modes: several nodes, but one writer under MULTI_NODE_SINGLE_WRITER. */
	assert_int_equal(hpp_create(&t->caller, "multi", 1 << 20, 0, false, multi), CSI_OK);
	assert_int_equal(hpp_ctl_publish(&t->caller, multi, "node-1", false, MNSW, false), CSI_OK);
	assert_int_equal(hpp_ctl_publish(&t->caller, multi, "node-2", false, MNSW, false),
			 CSI_FAILED_PRECONDITION);
	assert_int_equal(hpp_ctl_publish(&t->caller, multi, "node-2", false, MNSW, true), CSI_OK);
	gr.volume_id = multi;
	assert_int_equal(hpp_call(t, CSI_RPC_CONTROLLER_GET_VOLUME, &gr, &gv), CSI_OK);
	assert_int_equal(gv->status->n_published_node_ids, 2);
	assert_false(gv->status->volume_condition->abnormal);
	/* Unpublish: unknown volume or node is OK; no node means every node. */
	assert_int_equal(hpp_ctl_unpublish(&t->caller, "vol-missing", "node-1"), CSI_OK);
	assert_int_equal(hpp_ctl_unpublish(&t->caller, multi, "node-7"), CSI_OK);
	assert_int_equal(hpp_ctl_unpublish(&t->caller, multi, ""), CSI_OK);
	assert_int_equal(hpp_call(t, CSI_RPC_CONTROLLER_GET_VOLUME, &gr, &gv), CSI_OK);
	assert_int_equal(gv->status->n_published_node_ids, 0);
	gr.volume_id = "vol-missing";
	assert_int_equal(hpp_call(t, CSI_RPC_CONTROLLER_GET_VOLUME, &gr, NULL), CSI_NOT_FOUND);
	(void)MNMW;
}

static void test_max_volumes(void **state)
{
	struct hpp_inproc *t = *state;
	struct hp_config cfg = {.controller_publish = true, .max_volumes_per_node = 1};
	char a[64], b[64];

	assert_int_equal(hpp_inproc_restart(t, &cfg), 0);
	assert_int_equal(hpp_create(&t->caller, "a", 1 << 20, 0, false, a), CSI_OK);
	assert_int_equal(hpp_create(&t->caller, "b", 1 << 20, 0, false, b), CSI_OK);
	assert_int_equal(hpp_ctl_publish(&t->caller, a, "node-1", false, SNW, false), CSI_OK);
	assert_int_equal(hpp_ctl_publish(&t->caller, b, "node-1", false, SNW, false),
			 CSI_RESOURCE_EXHAUSTED);
}

static void test_list_pagination(void **state)
{
	struct hpp_inproc *t = *state;
	Csi__V1__ListVolumesRequest r = CSI__V1__LIST_VOLUMES_REQUEST__INIT;
	Csi__V1__ListVolumesResponse *out;
	char ids[5][64], name[16], token[32];
	size_t seen = 0;

	for (int i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "list-%d", i);
		assert_int_equal(hpp_create(&t->caller, name, 1 << 20, 0, false, ids[i]), CSI_OK);
	}
	assert_int_equal(hpp_ctl_publish(&t->caller, ids[0], "node-1", false, SNW, false), CSI_OK);
	r.max_entries = 2;
	assert_int_equal(hpp_call(t, CSI_RPC_LIST_VOLUMES, &r, &out), CSI_OK);
	assert_int_equal(out->n_entries, 2);
	assert_string_equal(out->entries[0]->volume->volume_id, ids[0]);
	assert_int_equal(out->entries[0]->status->n_published_node_ids, 1);
	assert_string_equal(out->entries[0]->status->published_node_ids[0], "node-1");
	assert_true(out->next_token && *out->next_token);
	snprintf(token, sizeof(token), "%s", out->next_token);
	seen += out->n_entries;
	/* The last volume of a page is deleted: the next page still follows on. */
	assert_int_equal(hpp_delete(&t->caller, ids[1]), CSI_OK);
	while (token[0]) {
		r.starting_token = token;
		assert_int_equal(hpp_call(t, CSI_RPC_LIST_VOLUMES, &r, &out), CSI_OK);
		seen += out->n_entries;
		snprintf(token, sizeof(token), "%s", out->next_token ? out->next_token : "");
	}
	assert_int_equal(seen, 5);
	r.starting_token = "bogus";
	assert_int_equal(hpp_call(t, CSI_RPC_LIST_VOLUMES, &r, NULL), CSI_ABORTED);
	r.starting_token = "999999";
	assert_int_equal(hpp_call(t, CSI_RPC_LIST_VOLUMES, &r, NULL), CSI_ABORTED);
	r.starting_token = "";
	r.max_entries = -1;
	assert_int_equal(hpp_call(t, CSI_RPC_LIST_VOLUMES, &r, NULL), CSI_INVALID_ARGUMENT);
	r.max_entries = 0;
	assert_int_equal(hpp_call(t, CSI_RPC_LIST_VOLUMES, &r, &out), CSI_OK);
	assert_int_equal(out->n_entries, 4);
	assert_true(!out->next_token || !*out->next_token);
	/* One page of everything; max_entries + 1 must not overflow (UBSan checks it). */
	r.max_entries = INT32_MAX;
	assert_int_equal(hpp_call(t, CSI_RPC_LIST_VOLUMES, &r, &out), CSI_OK);
	assert_int_equal(out->n_entries, 4);
	assert_true(!out->next_token || !*out->next_token);
	/* Without --enable-alpha, no volume condition (an alpha field). */
	assert_null(out->entries[0]->status->volume_condition);
}

/* Page through every snapshot with max_entries = 1, then ask for INT32_MAX. */
static void test_list_snapshots_edges(void **state)
{
	struct hpp_inproc *t = *state;
	Csi__V1__ListSnapshotsRequest r = CSI__V1__LIST_SNAPSHOTS_REQUEST__INIT;
	Csi__V1__ListSnapshotsResponse *out;
	Csi__V1__CreateSnapshotRequest cr = CSI__V1__CREATE_SNAPSHOT_REQUEST__INIT;
	char vol[64], token[32] = "", name[16];
	size_t seen = 0;

	assert_int_equal(hpp_create(&t->caller, "snapsrc", 1 << 20, 0, false, vol), CSI_OK);
	cr.source_volume_id = vol;
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "s-%d", i);
		cr.name = name;
		assert_int_equal(hpp_call(t, CSI_RPC_CREATE_SNAPSHOT, &cr, NULL), CSI_OK);
	}
	r.max_entries = 1;
	do {
		r.starting_token = token;
		assert_int_equal(hpp_call(t, CSI_RPC_LIST_SNAPSHOTS, &r, &out), CSI_OK);
		assert_true(out->n_entries <= 1);
		seen += out->n_entries;
		snprintf(token, sizeof(token), "%s", out->next_token ? out->next_token : "");
	} while (token[0]);
	assert_int_equal(seen, 3);
	r.starting_token = "";
	r.max_entries = INT32_MAX;
	assert_int_equal(hpp_call(t, CSI_RPC_LIST_SNAPSHOTS, &r, &out), CSI_OK);
	assert_int_equal(out->n_entries, 3);
	assert_true(!out->next_token || !*out->next_token);
	r.source_volume_id = vol;
	assert_int_equal(hpp_call(t, CSI_RPC_LIST_SNAPSHOTS, &r, &out), CSI_OK);
	assert_int_equal(out->n_entries, 3);
}

/* The spec's alpha methods and capabilities only with --enable-alpha. */
static void test_alpha(void **state)
{
	static const int alpha_caps[] = {
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__VOLUME_CONDITION,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__GET_VOLUME,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__SINGLE_NODE_MULTI_WRITER,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__GET_SNAPSHOT,
	};
	struct hpp_inproc *t = *state;
	struct hp_config alpha = {.controller_publish = true, .enable_alpha = true};
	Csi__V1__ControllerGetCapabilitiesRequest cq =
	    CSI__V1__CONTROLLER_GET_CAPABILITIES_REQUEST__INIT;
	Csi__V1__ControllerGetCapabilitiesResponse *caps;
	Csi__V1__ControllerGetVolumeRequest gr = CSI__V1__CONTROLLER_GET_VOLUME_REQUEST__INIT;
	Csi__V1__GetSnapshotRequest sr = CSI__V1__GET_SNAPSHOT_REQUEST__INIT;
	char id[64];

	assert_int_equal(hpp_create(&t->caller, "alpha", 1 << 20, 0, false, id), CSI_OK);
	gr.volume_id = id;
	sr.snapshot_id = "snap-missing";
	for (int on = 0; on < 2; on++) {
		size_t found = 0;

		assert_int_equal(hpp_call(t, CSI_RPC_CONTROLLER_GET_CAPABILITIES, &cq, &caps),
				 CSI_OK);
		for (size_t i = 0; i < caps->n_capabilities; i++)
			for (size_t k = 0; k < sizeof(alpha_caps) / sizeof(alpha_caps[0]); k++)
				found += (int)caps->capabilities[i]->rpc->type == alpha_caps[k];
		assert_int_equal(found, on ? 4 : 0);
		/* MODIFY_VOLUME is GA in v1.12: always there. */
		assert_int_equal(caps->n_capabilities, on ? 15 : 11);
		assert_int_equal(hpp_call(t, CSI_RPC_CONTROLLER_GET_VOLUME, &gr, NULL),
				 on ? CSI_OK : CSI_UNIMPLEMENTED);
		assert_int_equal(hpp_call(t, CSI_RPC_GET_SNAPSHOT, &sr, NULL),
				 on ? CSI_NOT_FOUND : CSI_UNIMPLEMENTED);
		assert_int_equal(hpp_inproc_restart(t, &alpha), 0);
	}
}

/* <data>/volumes/<id>/hello.txt */
static void file_path(struct hpp_inproc *t, const char *id, char *buf, size_t len)
{
	snprintf(buf, len, "%s/volumes/%s/hello.txt", t->p->data_dir, id);
}

static int snapshot(struct hpp_inproc *t, const char *name, const char *vol, char *id)
{
	Csi__V1__CreateSnapshotRequest r = CSI__V1__CREATE_SNAPSHOT_REQUEST__INIT;
	Csi__V1__CreateSnapshotResponse *out;
	int code;

	r.name = (char *)name;
	r.source_volume_id = (char *)vol;
	code = hpp_call(t, CSI_RPC_CREATE_SNAPSHOT, &r, &out);
	if (code == CSI_OK) {
		assert_true(out->snapshot->ready_to_use);
		assert_string_equal(out->snapshot->source_volume_id, vol);
		if (id)
			snprintf(id, 64, "%s", out->snapshot->snapshot_id);
	}
	return code;
}

static int create_from(struct hpp_inproc *t, const char *name, bool snap, const char *src, char *id)
{
	Csi__V1__CreateVolumeRequest r = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	Csi__V1__VolumeContentSource cs = CSI__V1__VOLUME_CONTENT_SOURCE__INIT;
	Csi__V1__VolumeContentSource__SnapshotSource ss =
	    CSI__V1__VOLUME_CONTENT_SOURCE__SNAPSHOT_SOURCE__INIT;
	Csi__V1__VolumeContentSource__VolumeSource vs =
	    CSI__V1__VOLUME_CONTENT_SOURCE__VOLUME_SOURCE__INIT;
	Csi__V1__CreateVolumeResponse *out;
	struct hpp_cap c;
	int code;

	hpp_cap(&c, false, SNW);
	r.name = (char *)name;
	r.volume_capabilities = c.list;
	r.n_volume_capabilities = 1;
	if (snap) {
		ss.snapshot_id = (char *)src;
		cs.type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT;
		cs.snapshot = &ss;
	} else {
		vs.volume_id = (char *)src;
		cs.type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME;
		cs.volume = &vs;
	}
	r.volume_content_source = &cs;
	code = hpp_call(t, CSI_RPC_CREATE_VOLUME, &r, &out);
	if (code == CSI_OK) {
		assert_non_null(out->volume->content_source);
		snprintf(id, 64, "%s", out->volume->volume_id);
	}
	return code;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void assert_file(const char *path, const char *text)
{
	char buf[128] = "";
	FILE *f = fopen(path, "r");

	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	assert_string_equal(buf, text);
}

static void test_snapshots_and_clones(void **state)
{
	struct hpp_inproc *t = *state;
	Csi__V1__ListSnapshotsRequest lr = CSI__V1__LIST_SNAPSHOTS_REQUEST__INIT;
	Csi__V1__ListSnapshotsResponse *ls;
	Csi__V1__DeleteSnapshotRequest dr = CSI__V1__DELETE_SNAPSHOT_REQUEST__INIT;
	char vol[64], vol2[64], snap[64], snap2[64], clone[64], restored[64], path[600];

	assert_int_equal(hpp_create(&t->caller, "src", 1 << 20, 0, false, vol), CSI_OK);
	assert_int_equal(hpp_create(&t->caller, "src2", 1 << 20, 0, false, vol2), CSI_OK);
	file_path(t, vol, path, sizeof(path));
	write_file(path, "before");
	assert_int_equal(snapshot(t, "snap-1", vol, snap), CSI_OK);
	assert_int_equal(snapshot(t, "snap-1", vol, snap2), CSI_OK);
	assert_string_equal(snap, snap2);
	assert_int_equal(snapshot(t, "snap-1", vol2, NULL), CSI_ALREADY_EXISTS);
	assert_int_equal(snapshot(t, "snap-x", "vol-missing", NULL), CSI_NOT_FOUND);
	assert_int_equal(snapshot(t, "../x", vol, NULL), CSI_INVALID_ARGUMENT);
	assert_int_equal(snapshot(t, "snap-2", vol2, snap2), CSI_OK);
	write_file(path, "after");
	/* A volume from the snapshot has the old data; a clone the current data. */
	assert_int_equal(create_from(t, "restored", true, snap, restored), CSI_OK);
	assert_int_equal(create_from(t, "clone", false, vol, clone), CSI_OK);
	file_path(t, restored, path, sizeof(path));
	assert_file(path, "before");
	file_path(t, clone, path, sizeof(path));
	assert_file(path, "after");
	assert_int_equal(create_from(t, "nosnap", true, "snap-missing", clone), CSI_NOT_FOUND);
	assert_int_equal(create_from(t, "novol", false, "vol-missing", clone), CSI_NOT_FOUND);
	/* Listing: all, by source, by ID, paged. */
	assert_int_equal(hpp_call(t, CSI_RPC_LIST_SNAPSHOTS, &lr, &ls), CSI_OK);
	assert_int_equal(ls->n_entries, 2);
	lr.source_volume_id = vol2;
	assert_int_equal(hpp_call(t, CSI_RPC_LIST_SNAPSHOTS, &lr, &ls), CSI_OK);
	assert_int_equal(ls->n_entries, 1);
	assert_string_equal(ls->entries[0]->snapshot->snapshot_id, snap2);
	lr.source_volume_id = "";
	lr.snapshot_id = snap;
	assert_int_equal(hpp_call(t, CSI_RPC_LIST_SNAPSHOTS, &lr, &ls), CSI_OK);
	assert_int_equal(ls->n_entries, 1);
	lr.snapshot_id = "snap-none";
	assert_int_equal(hpp_call(t, CSI_RPC_LIST_SNAPSHOTS, &lr, &ls), CSI_OK);
	assert_int_equal(ls->n_entries, 0);
	lr.snapshot_id = "";
	lr.max_entries = 1;
	assert_int_equal(hpp_call(t, CSI_RPC_LIST_SNAPSHOTS, &lr, &ls), CSI_OK);
	assert_int_equal(ls->n_entries, 1);
	assert_true(ls->next_token && *ls->next_token);
	lr.starting_token = "nope";
	assert_int_equal(hpp_call(t, CSI_RPC_LIST_SNAPSHOTS, &lr, NULL), CSI_ABORTED);
	/* Deleting the source keeps the snapshot usable; deleting twice is OK. */
	assert_int_equal(hpp_delete(&t->caller, vol), CSI_OK);
	assert_int_equal(create_from(t, "restored-2", true, snap, restored), CSI_OK);
	dr.snapshot_id = snap;
	assert_int_equal(hpp_call(t, CSI_RPC_DELETE_SNAPSHOT, &dr, NULL), CSI_OK);
	assert_int_equal(hpp_call(t, CSI_RPC_DELETE_SNAPSHOT, &dr, NULL), CSI_OK);
	dr.snapshot_id = "../snap";
	assert_int_equal(hpp_call(t, CSI_RPC_DELETE_SNAPSHOT, &dr, NULL), CSI_INVALID_ARGUMENT);
}

static void test_expand_modify(void **state)
{
	struct hpp_inproc *t = *state;
	Csi__V1__ControllerExpandVolumeRequest er = CSI__V1__CONTROLLER_EXPAND_VOLUME_REQUEST__INIT;
	Csi__V1__ControllerExpandVolumeResponse *eo;
	Csi__V1__CapacityRange cr = CSI__V1__CAPACITY_RANGE__INIT;
	Csi__V1__ControllerModifyVolumeRequest mr = CSI__V1__CONTROLLER_MODIFY_VOLUME_REQUEST__INIT;
	Csi__V1__ControllerModifyVolumeRequest__MutableParametersEntry e1 =
	    CSI__V1__CONTROLLER_MODIFY_VOLUME_REQUEST__MUTABLE_PARAMETERS_ENTRY__INIT;
	Csi__V1__ControllerModifyVolumeRequest__MutableParametersEntry e2 =
	    CSI__V1__CONTROLLER_MODIFY_VOLUME_REQUEST__MUTABLE_PARAMETERS_ENTRY__INIT;
	Csi__V1__ControllerModifyVolumeRequest__MutableParametersEntry *entries[2] = {&e1, &e2};
	char blk[64], fs[64], path[512];
	struct stat st;

	assert_int_equal(hpp_create(&t->caller, "blk", 1 << 20, 0, true, blk), CSI_OK);
	assert_int_equal(hpp_create(&t->caller, "fs", 1 << 20, 0, false, fs), CSI_OK);
	er.volume_id = blk;
	assert_int_equal(hpp_call(t, CSI_RPC_CONTROLLER_EXPAND_VOLUME, &er, NULL),
			 CSI_INVALID_ARGUMENT);
	cr.required_bytes = 4 << 20;
	er.capacity_range = &cr;
	assert_int_equal(hpp_call(t, CSI_RPC_CONTROLLER_EXPAND_VOLUME, &er, &eo), CSI_OK);
	assert_int_equal(eo->capacity_bytes, 4 << 20);
	assert_false(eo->node_expansion_required);
	volume_path(t, blk, path, sizeof(path));
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 4 << 20);
	/* Asking for less keeps the size; a too small limit is OUT_OF_RANGE. */
	cr.required_bytes = 2 << 20;
	assert_int_equal(hpp_call(t, CSI_RPC_CONTROLLER_EXPAND_VOLUME, &er, &eo), CSI_OK);
	assert_int_equal(eo->capacity_bytes, 4 << 20);
	cr.limit_bytes = 1 << 20;
	assert_int_equal(hpp_call(t, CSI_RPC_CONTROLLER_EXPAND_VOLUME, &er, NULL),
			 CSI_OUT_OF_RANGE);
	cr.limit_bytes = 0;
	er.volume_id = fs;
	cr.required_bytes = 8 << 20;
	assert_int_equal(hpp_call(t, CSI_RPC_CONTROLLER_EXPAND_VOLUME, &er, &eo), CSI_OK);
	assert_true(eo->node_expansion_required);
	er.volume_id = "vol-missing";
	assert_int_equal(hpp_call(t, CSI_RPC_CONTROLLER_EXPAND_VOLUME, &er, NULL), CSI_NOT_FOUND);

	/* Modify: known keys are taken; an unknown key changes nothing. */
	mr.volume_id = fs;
	e1.key = "iops";
	e1.value = "500";
	e2.key = "colour";
	e2.value = "red";
	mr.mutable_parameters = entries;
	mr.n_mutable_parameters = 2;
	assert_int_equal(hpp_call(t, CSI_RPC_CONTROLLER_MODIFY_VOLUME, &mr, NULL),
			 CSI_INVALID_ARGUMENT);
	assert_non_null(strstr(t->msg, "colour"));
	e2.key = "tier";
	e2.value = "gold";
	assert_int_equal(hpp_call(t, CSI_RPC_CONTROLLER_MODIFY_VOLUME, &mr, NULL),
			 CSI_INVALID_ARGUMENT);
	e2.value = "premium";
	assert_int_equal(hpp_call(t, CSI_RPC_CONTROLLER_MODIFY_VOLUME, &mr, NULL), CSI_OK);
	mr.n_mutable_parameters = 0;
	assert_int_equal(hpp_call(t, CSI_RPC_CONTROLLER_MODIFY_VOLUME, &mr, NULL),
			 CSI_INVALID_ARGUMENT);
	mr.n_mutable_parameters = 1;
	mr.volume_id = "vol-missing";
	assert_int_equal(hpp_call(t, CSI_RPC_CONTROLLER_MODIFY_VOLUME, &mr, NULL), CSI_NOT_FOUND);
}

static void test_validate(void **state)
{
	struct hpp_inproc *t = *state;
	Csi__V1__ValidateVolumeCapabilitiesRequest r =
	    CSI__V1__VALIDATE_VOLUME_CAPABILITIES_REQUEST__INIT;
	Csi__V1__ValidateVolumeCapabilitiesResponse *out;
	struct hpp_cap c;
	char id[64];

	assert_int_equal(hpp_create(&t->caller, "val", 1 << 20, 0, false, id), CSI_OK);
	r.volume_id = id;
	assert_int_equal(hpp_call(t, CSI_RPC_VALIDATE_VOLUME_CAPABILITIES, &r, NULL),
			 CSI_INVALID_ARGUMENT);
	hpp_cap(&c, false, MNMW);
	r.volume_capabilities = c.list;
	r.n_volume_capabilities = 1;
	assert_int_equal(hpp_call(t, CSI_RPC_VALIDATE_VOLUME_CAPABILITIES, &r, &out), CSI_OK);
	assert_non_null(out->confirmed);
	assert_int_equal(out->confirmed->n_volume_capabilities, 1);
	hpp_cap(&c, true, SNW);
	assert_int_equal(hpp_call(t, CSI_RPC_VALIDATE_VOLUME_CAPABILITIES, &r, &out), CSI_OK);
	assert_null(out->confirmed);
	assert_non_null(out->message);
	r.volume_id = "vol-missing";
	assert_int_equal(hpp_call(t, CSI_RPC_VALIDATE_VOLUME_CAPABILITIES, &r, NULL),
			 CSI_NOT_FOUND);
}

static bool has_ctl_cap(struct hpp_inproc *t, int type)
{
	Csi__V1__ControllerGetCapabilitiesRequest r =
	    CSI__V1__CONTROLLER_GET_CAPABILITIES_REQUEST__INIT;
	Csi__V1__ControllerGetCapabilitiesResponse *out;

	assert_int_equal(hpp_call(t, CSI_RPC_CONTROLLER_GET_CAPABILITIES, &r, &out), CSI_OK);
	for (size_t i = 0; i < out->n_capabilities; i++)
		if ((int)out->capabilities[i]->rpc->type == type)
			return true;
	return false;
}

static void test_modes(void **state)
{
	struct hpp_inproc *t = *state;
	struct hp_config node = {.mode = HP_MODE_NODE, .controller_publish = true};
	struct hp_config ctl = {.mode = HP_MODE_CONTROLLER, .controller_publish = false};
	Csi__V1__NodeGetInfoRequest ni = CSI__V1__NODE_GET_INFO_REQUEST__INIT;
	char id[64];

	assert_true(has_ctl_cap(
	    t, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_UNPUBLISH_VOLUME));
	assert_int_equal(hpp_inproc_restart(t, &node), 0);
	assert_int_equal(hpp_create(&t->caller, "x", 0, 0, false, id), CSI_UNIMPLEMENTED);
	assert_int_equal(hpp_call(t, CSI_RPC_NODE_GET_INFO, &ni, NULL), CSI_OK);
	assert_int_equal(hpp_inproc_restart(t, &ctl), 0);
	assert_int_equal(hpp_call(t, CSI_RPC_NODE_GET_INFO, &ni, NULL), CSI_UNIMPLEMENTED);
	assert_int_equal(hpp_create(&t->caller, "x", 0, 0, false, id), CSI_OK);
	assert_int_equal(hpp_ctl_publish(&t->caller, id, "node-1", false, SNW, false),
			 CSI_UNIMPLEMENTED);
	assert_false(has_ctl_cap(
	    t, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_UNPUBLISH_VOLUME));
	assert_true(
	    has_ctl_cap(t, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CLONE_VOLUME));
}

static void test_restart_keeps_state(void **state)
{
	struct hpp_inproc *t = *state;
	char id[64], again[64];

	assert_int_equal(hpp_create(&t->caller, "durable", 1 << 20, 0, false, id), CSI_OK);
	assert_int_equal(hpp_ctl_publish(&t->caller, id, "node-1", false, SNW, false), CSI_OK);
	assert_int_equal(hpp_inproc_restart(t, NULL), 0);
	assert_int_equal(hpp_create(&t->caller, "durable", 1 << 20, 0, false, again), CSI_OK);
	assert_string_equal(id, again);
	assert_int_equal(hpp_delete(&t->caller, id), CSI_FAILED_PRECONDITION);
}

static void test_sweep_leftovers(void **state)
{
	struct hpp_inproc *t = *state;
	struct timespec old[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
	char id[64], known[512], stale[512], fresh[512];
	struct stat st;

	assert_int_equal(hpp_create(&t->caller, "kept", 1 << 20, 0, false, id), CSI_OK);
	volume_path(t, id, known, sizeof(known));
	volume_path(t, "vol-stale", stale, sizeof(stale));
	volume_path(t, "vol-fresh", fresh, sizeof(fresh));
	assert_int_equal(mkdir(stale, 0700), 0);
	assert_int_equal(mkdir(fresh, 0700), 0);
	assert_int_equal(utimensat(AT_FDCWD, stale, old, 0), 0);
	assert_int_equal(utimensat(AT_FDCWD, known, old, 0), 0);
	assert_int_equal(hpp_inproc_restart(t, NULL), 0);
	assert_int_not_equal(stat(stale, &st), 0);
	assert_int_equal(stat(fresh, &st), 0);
	assert_int_equal(stat(known, &st), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_identity, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_create_idempotent, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_create_capacity, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_create_full, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_create_bad_input, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_delete, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_publish_rules, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_max_volumes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_list_pagination, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_list_snapshots_edges, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_alpha, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_snapshots_and_clones, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_expand_modify, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_validate, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_modes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_restart_keeps_state, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sweep_leftovers, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
