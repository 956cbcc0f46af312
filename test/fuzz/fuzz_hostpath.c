/*
 * Fuzz target for csi-hostpath: request decoding and every handler. The
 * first byte picks the input kind: 0xf0 and above feed the rest to the
 * fault-script parser; otherwise it picks an RPC (modulo the RPC count)
 * and the rest is unpacked as that RPC's request and handed to hp_handle
 * on one long-lived plugin whose data dir is a temporary directory and
 * whose mount operations are the in-memory fake, so nothing is ever
 * mounted and no CO path is touched. Every response is encoded, as the
 * server would, to check it is well formed. So that mutated requests
 * reach past the "not found" checks, the placeholder IDs
 * vol-0000000000000000, snap-0000000000000000 and group-0000000000000000
 * in a top-level ID field (volume_id, source_volume_id, snapshot_id,
 * group_snapshot_id, or an entry of source_volume_ids or snapshot_ids)
 * stand for the volume, snapshot and group snapshot the target created
 * last. The plugin runs with --enable-alpha, so the alpha methods are
 * fuzzed too.
 */
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostpath.h"
#include "hp_faults.h"
#include "util/log.h"

static struct hp_plugin *fuzz_hp_plugin;
static struct hp_mount_fake *fuzz_hp_fake;
static char fuzz_hp_dir[64];

static char fuzz_hp_last_vol[64] = "vol-0000000000000000";
static char fuzz_hp_last_snap[64] = "snap-0000000000000000";
static char fuzz_hp_last_group[64] = "group-0000000000000000";

/* Placeholder fields swapped for one call, restored after it (at most FUZZ_HP_SWAPS). */
#define FUZZ_HP_SWAPS 16

struct fuzz_hp_swaps {
	char **field[FUZZ_HP_SWAPS];
	char *orig[FUZZ_HP_SWAPS];
	int n;
};

/* Points one string at the last ID of its kind when it holds a placeholder. */
static void fuzz_hp_swap(char **field, struct fuzz_hp_swaps *sw)
{
	char *last = NULL;

	if (!*field || sw->n == FUZZ_HP_SWAPS)
		return;
	if (strcmp(*field, "vol-0000000000000000") == 0)
		last = fuzz_hp_last_vol;
	else if (strcmp(*field, "snap-0000000000000000") == 0)
		last = fuzz_hp_last_snap;
	else if (strcmp(*field, "group-0000000000000000") == 0)
		last = fuzz_hp_last_group;
	if (!last)
		return;
	sw->field[sw->n] = field;
	sw->orig[sw->n++] = *field;
	*field = last;
}

/* Swaps the placeholders of the string field name (single or repeated); see fuzz_hp_restore. */
static void fuzz_hp_substitute(ProtobufCMessage *m, const char *name, struct fuzz_hp_swaps *sw)
{
	const ProtobufCFieldDescriptor *fd =
	    protobuf_c_message_descriptor_get_field_by_name(m->descriptor, name);

	if (!fd || fd->type != PROTOBUF_C_TYPE_STRING)
		return;
	if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
		size_t n = *(size_t *)((char *)m + fd->quantifier_offset);
		char **v = *(char ***)((char *)m + fd->offset);

		for (size_t i = 0; i < n; i++)
			fuzz_hp_swap(&v[i], sw);
		return;
	}
	fuzz_hp_swap((char **)((char *)m + fd->offset), sw);
}

static void fuzz_hp_restore(struct fuzz_hp_swaps *sw)
{
	while (sw->n > 0) {
		sw->n--;
		*sw->field[sw->n] = sw->orig[sw->n];
	}
}

/* Remembers the IDs of what a call created. */
static void fuzz_hp_remember(enum csi_rpc rpc, const ProtobufCMessage *resp)
{
	if (rpc == CSI_RPC_CREATE_VOLUME) {
		const Csi__V1__CreateVolumeResponse *r = (const void *)resp;

		if (r->volume && r->volume->volume_id)
			snprintf(fuzz_hp_last_vol, sizeof(fuzz_hp_last_vol), "%s",
				 r->volume->volume_id);
	} else if (rpc == CSI_RPC_CREATE_SNAPSHOT) {
		const Csi__V1__CreateSnapshotResponse *r = (const void *)resp;

		if (r->snapshot && r->snapshot->snapshot_id)
			snprintf(fuzz_hp_last_snap, sizeof(fuzz_hp_last_snap), "%s",
				 r->snapshot->snapshot_id);
	} else if (rpc == CSI_RPC_CREATE_VOLUME_GROUP_SNAPSHOT) {
		const Csi__V1__CreateVolumeGroupSnapshotResponse *r = (const void *)resp;
		const Csi__V1__VolumeGroupSnapshot *g = r->group_snapshot;

		if (g && g->group_snapshot_id)
			snprintf(fuzz_hp_last_group, sizeof(fuzz_hp_last_group), "%s",
				 g->group_snapshot_id);
		if (g && g->n_snapshots && g->snapshots[0]->snapshot_id)
			snprintf(fuzz_hp_last_snap, sizeof(fuzz_hp_last_snap), "%s",
				 g->snapshots[0]->snapshot_id);
	}
}

static int fuzz_hp_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	remove(path);
	return 0;
}

static void fuzz_hp_cleanup(void)
{
	hp_free(fuzz_hp_plugin);
	hp_mount_fake_free(fuzz_hp_fake);
	if (fuzz_hp_dir[0])
		nftw(fuzz_hp_dir, fuzz_hp_rm, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

static int fuzz_hp_init(void)
{
	struct hp_config cfg = {.mode = HP_MODE_MONOLITH,
				.controller_publish = true,
				.capacity = 1LL << 40,
				.node_id = "node-1",
				.max_volumes_per_node = 64,
				.enable_alpha = true};
	char data[96];
	struct err e;

	log_set_level(getenv("FUZZ_HP_DEBUG") ? LOG_DEBUG : LOG_ERROR);
	snprintf(fuzz_hp_dir, sizeof(fuzz_hp_dir), "/tmp/csid-fuzz-hp-XXXXXX");
	if (!mkdtemp(fuzz_hp_dir))
		return -1;
	snprintf(data, sizeof(data), "%s/data", fuzz_hp_dir);
	fuzz_hp_fake = hp_mount_fake_new(true);
	cfg.data_dir = data;
	cfg.ops = &hp_mount_fake_ops;
	cfg.ops_ctx = fuzz_hp_fake;
	atexit(fuzz_hp_cleanup);
	if (!fuzz_hp_fake || hp_new(&cfg, &fuzz_hp_plugin, &e) != 0) {
		fprintf(stderr, "fuzz_hostpath: %s\n", e.msg);
		return -1;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const id_fields[] = {"volume_id",         "source_volume_id",
						"snapshot_id",       "group_snapshot_id",
						"source_volume_ids", "snapshot_ids"};
	struct fuzz_hp_swaps sw = {.n = 0};
	const struct csi_rpc_info *info;
	enum csi_rpc rpc;
	ProtobufCMessage *req, *resp = NULL;
	char msg[CSI_STATUS_MSG_MAX];
	struct arena *a;
	int code;

	if (size == 0)
		return 0;
	if (!fuzz_hp_plugin && fuzz_hp_init() != 0)
		abort();
	if (data[0] >= 0xf0) {
		struct hp_faults *f = NULL;
		struct hp_fault_action act;
		struct err e;

		if (hp_faults_parse((const char *)data + 1, size - 1, &f, &e) == 0) {
			for (int r = 0; r < CSI_RPC_COUNT; r++)
				hp_faults_match(f, (enum csi_rpc)r, &act);
			hp_faults_free(f);
		}
		return 0;
	}
	rpc = (enum csi_rpc)(data[0] % CSI_RPC_COUNT);
	info = csi_rpc_info(rpc);
	req = protobuf_c_message_unpack(info->request, NULL, size - 1, data + 1);
	if (!req)
		return 0;
	a = arena_new();
	if (!a)
		abort();
	msg[0] = '\0';
	for (size_t i = 0; i < sizeof(id_fields) / sizeof(id_fields[0]); i++)
		fuzz_hp_substitute(req, id_fields[i], &sw);
	code = hp_handle(fuzz_hp_plugin, rpc, req, &resp, a, msg);
	fuzz_hp_restore(&sw);
	if (code < 0 || code > 16)
		abort();
	if (code == CSI_OK && resp) {
		size_t n = protobuf_c_message_get_packed_size(resp);
		uint8_t *buf = malloc(n ? n : 1);

		if (!buf || protobuf_c_message_pack(resp, buf) != n)
			abort();
		free(buf);
		fuzz_hp_remember(rpc, resp);
	}
	if (code != CSI_OK && strnlen(msg, sizeof(msg)) == sizeof(msg))
		abort();
	arena_free(a);
	protobuf_c_message_free_unpacked(req, NULL);
	return 0;
}
