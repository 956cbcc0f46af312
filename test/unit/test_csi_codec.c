/*
 * Encoding of CSI messages by the generated protobuf-c code: byte-exact
 * wire forms computed by hand from the field numbers of the CSI v1.12
 * spec (so a mistake in proto/csi.proto shows), and round trips of
 * representative messages with maps, oneofs, wrappers, timestamps and
 * nested repeated messages, through csi_msg_dup as well.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "csi/csi_client.h"

/* Packs m and compares with the expected bytes. */
static void tc_expect(const ProtobufCMessage *m, const uint8_t *want, size_t n)
{
	uint8_t buf[256];
	size_t got = protobuf_c_message_get_packed_size(m);

	assert_true(got <= sizeof(buf));
	assert_int_equal(protobuf_c_message_pack(m, buf), got);
	if (got != n || memcmp(buf, want, n) != 0) {
		char hex[3 * sizeof(buf) + 1] = "";

		for (size_t i = 0; i < got; i++)
			snprintf(hex + 3 * i, 4, "%02x ", buf[i]);
		fail_msg("%s packs as %s", m->descriptor->name, hex);
	}
}

static ProtobufCMessage *tc_roundtrip(const ProtobufCMessage *m)
{
	uint8_t buf[4096];
	size_t n = protobuf_c_message_get_packed_size(m);

	assert_true(n <= sizeof(buf));
	protobuf_c_message_pack(m, buf);
	return protobuf_c_message_unpack(m->descriptor, NULL, n, buf);
}

static void test_wire_bytes(void **state)
{
	Csi__V1__ProbeResponse probe = CSI__V1__PROBE_RESPONSE__INIT;
	Google__Protobuf__BoolValue yes = GOOGLE__PROTOBUF__BOOL_VALUE__INIT;
	Google__Protobuf__BoolValue no = GOOGLE__PROTOBUF__BOOL_VALUE__INIT;
	Csi__V1__CreateVolumeRequest cv = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	Csi__V1__CapacityRange cap = CSI__V1__CAPACITY_RANGE__INIT;
	Csi__V1__CreateVolumeRequest__ParametersEntry p =
	    CSI__V1__CREATE_VOLUME_REQUEST__PARAMETERS_ENTRY__INIT;
	Csi__V1__CreateVolumeRequest__ParametersEntry *ps[1] = {&p};
	Csi__V1__VolumeCapability vc = CSI__V1__VOLUME_CAPABILITY__INIT;
	Csi__V1__VolumeCapability__BlockVolume block =
	    CSI__V1__VOLUME_CAPABILITY__BLOCK_VOLUME__INIT;
	Csi__V1__VolumeCapability__AccessMode am = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__INIT;
	Csi__V1__NodeUnpublishVolumeRequest unpub = CSI__V1__NODE_UNPUBLISH_VOLUME_REQUEST__INIT;
	/* ProbeResponse.ready = 1 (BoolValue.value = 1). */
	static const uint8_t probe_true[] = {0x0a, 0x02, 0x08, 0x01};
	/* ready present but false: an empty BoolValue, not "unset". */
	static const uint8_t probe_false[] = {0x0a, 0x00};
	/* name = 1, capacity_range = 2 {required_bytes = 1}, parameters = 4. */
	static const uint8_t create[] = {0x0a, 0x01, 'v',  0x12, 0x03, 0x08, 0x80, 0x08,
					 0x22, 0x06, 0x0a, 0x01, 'k',  0x12, 0x01, 'x'};
	/* block = 1 (empty), access_mode = 3 {mode = 5 MULTI_NODE_MULTI_WRITER}. */
	static const uint8_t cap_block[] = {0x0a, 0x00, 0x1a, 0x02, 0x08, 0x05};
	/* volume_id = 1, target_path = 2. */
	static const uint8_t unpublish[] = {0x0a, 0x01, 'a', 0x12, 0x02, '/', 't'};

	(void)state;
	yes.value = 1;
	probe.ready = &yes;
	tc_expect(&probe.base, probe_true, sizeof(probe_true));
	probe.ready = &no;
	tc_expect(&probe.base, probe_false, sizeof(probe_false));
	cv.name = "v";
	cap.required_bytes = 1024;
	cv.capacity_range = &cap;
	p.key = "k";
	p.value = "x";
	cv.n_parameters = 1;
	cv.parameters = ps;
	tc_expect(&cv.base, create, sizeof(create));
	vc.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
	vc.block = &block;
	am.mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER;
	vc.access_mode = &am;
	tc_expect(&vc.base, cap_block, sizeof(cap_block));
	unpub.volume_id = "a";
	unpub.target_path = "/t";
	tc_expect(&unpub.base, unpublish, sizeof(unpublish));
}

static void test_oneof_and_wrappers(void **state)
{
	Csi__V1__CreateVolumeRequest req = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	Csi__V1__VolumeContentSource src = CSI__V1__VOLUME_CONTENT_SOURCE__INIT;
	Csi__V1__VolumeContentSource__SnapshotSource snap =
	    CSI__V1__VOLUME_CONTENT_SOURCE__SNAPSHOT_SOURCE__INIT;
	Csi__V1__VolumeCapability vc = CSI__V1__VOLUME_CAPABILITY__INIT;
	Csi__V1__VolumeCapability *vcs[1] = {&vc};
	Csi__V1__VolumeCapability__MountVolume mv = CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
	char *flags[2] = {"noatime", "nodev"};
	Csi__V1__CreateVolumeRequest *back;

	(void)state;
	req.name = "clone-of-snap";
	snap.snapshot_id = "snap-1";
	src.type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT;
	src.snapshot = &snap;
	req.volume_content_source = &src;
	mv.fs_type = "xfs";
	mv.n_mount_flags = 2;
	mv.mount_flags = flags;
	mv.volume_mount_group = "1000";
	vc.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
	vc.mount = &mv;
	req.n_volume_capabilities = 1;
	req.volume_capabilities = vcs;
	back = (Csi__V1__CreateVolumeRequest *)tc_roundtrip(&req.base);
	assert_non_null(back);
	assert_string_equal(back->name, "clone-of-snap");
	assert_int_equal(back->volume_content_source->type_case,
			 CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT);
	assert_string_equal(back->volume_content_source->snapshot->snapshot_id, "snap-1");
	assert_int_equal(back->n_volume_capabilities, 1);
	assert_int_equal(back->volume_capabilities[0]->access_type_case,
			 CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT);
	assert_string_equal(back->volume_capabilities[0]->mount->fs_type, "xfs");
	assert_int_equal(back->volume_capabilities[0]->mount->n_mount_flags, 2);
	assert_string_equal(back->volume_capabilities[0]->mount->mount_flags[1], "nodev");
	assert_string_equal(back->volume_capabilities[0]->mount->volume_mount_group, "1000");
	/* Absent sub-messages stay absent. */
	assert_null(back->capacity_range);
	assert_null(back->accessibility_requirements);
	csi_msg_free(&back->base);
}

static void test_list_with_timestamps(void **state)
{
	Csi__V1__ListSnapshotsResponse resp = CSI__V1__LIST_SNAPSHOTS_RESPONSE__INIT;
	Csi__V1__ListSnapshotsResponse__Entry e[3];
	Csi__V1__ListSnapshotsResponse__Entry *ep[3];
	Csi__V1__Snapshot s[3];
	Google__Protobuf__Timestamp ts[3];
	char ids[3][16];
	Csi__V1__ListSnapshotsResponse *back;

	(void)state;
	for (int i = 0; i < 3; i++) {
		csi__v1__list_snapshots_response__entry__init(&e[i]);
		csi__v1__snapshot__init(&s[i]);
		google__protobuf__timestamp__init(&ts[i]);
		snprintf(ids[i], sizeof(ids[i]), "snap-%d", i);
		s[i].snapshot_id = ids[i];
		s[i].source_volume_id = "vol";
		s[i].size_bytes = (int64_t)1 << (40 + i);
		s[i].ready_to_use = i != 1;
		ts[i].seconds = 1700000000 + i;
		ts[i].nanos = 999999999 - i;
		s[i].creation_time = &ts[i];
		e[i].snapshot = &s[i];
		ep[i] = &e[i];
	}
	resp.n_entries = 3;
	resp.entries = ep;
	resp.next_token = "3";
	back = (Csi__V1__ListSnapshotsResponse *)tc_roundtrip(&resp.base);
	assert_non_null(back);
	assert_int_equal(back->n_entries, 3);
	assert_string_equal(back->next_token, "3");
	for (int i = 0; i < 3; i++) {
		Csi__V1__Snapshot *b = back->entries[i]->snapshot;

		assert_string_equal(b->snapshot_id, ids[i]);
		assert_true(b->size_bytes == (int64_t)1 << (40 + i));
		assert_int_equal(b->ready_to_use, i != 1);
		assert_int_equal(b->creation_time->seconds, 1700000000 + i);
		assert_int_equal(b->creation_time->nanos, 999999999 - i);
	}
	csi_msg_free(&back->base);
}

static void test_maps_and_dup(void **state)
{
	Csi__V1__NodeGetInfoResponse info = CSI__V1__NODE_GET_INFO_RESPONSE__INIT;
	Csi__V1__Topology topo = CSI__V1__TOPOLOGY__INIT;
	Csi__V1__Topology__SegmentsEntry seg[2] = {CSI__V1__TOPOLOGY__SEGMENTS_ENTRY__INIT,
						   CSI__V1__TOPOLOGY__SEGMENTS_ENTRY__INIT};
	Csi__V1__Topology__SegmentsEntry *segs[2] = {&seg[0], &seg[1]};
	char big[2000];
	Csi__V1__NodeGetInfoResponse *copy;

	(void)state;
	memset(big, 'n', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	seg[0].key = "topology.csid.dev/zone";
	seg[0].value = "z1";
	seg[1].key = "topology.csid.dev/node";
	seg[1].value = big; /* larger than csi_msg_dup's stack buffer */
	topo.n_segments = 2;
	topo.segments = segs;
	info.node_id = "node-1";
	info.max_volumes_per_node = 64;
	info.accessible_topology = &topo;
	copy = (Csi__V1__NodeGetInfoResponse *)csi_msg_dup(&info.base);
	assert_non_null(copy);
	assert_ptr_not_equal(copy, &info);
	assert_string_equal(copy->node_id, "node-1");
	assert_int_equal(copy->max_volumes_per_node, 64);
	assert_int_equal(copy->accessible_topology->n_segments, 2);
	assert_string_equal(copy->accessible_topology->segments[0]->key, "topology.csid.dev/zone");
	assert_string_equal(copy->accessible_topology->segments[0]->value, "z1");
	assert_string_equal(copy->accessible_topology->segments[1]->value, big);
	csi_msg_free(&copy->base);
	assert_null(csi_msg_dup(NULL));
	csi_msg_free(NULL);
}

/* Every request and response type decodes from empty input and round trips. */
static void test_every_type_empty(void **state)
{
	(void)state;
	for (int i = 0; i < CSI_RPC_COUNT; i++) {
		const struct csi_rpc_info *info = csi_rpc_info((enum csi_rpc)i);
		const ProtobufCMessageDescriptor *d[2] = {info->request, info->response};

		assert_non_null(info);
		assert_int_equal(csi_rpc_by_path(info->path, strlen(info->path)), i);
		assert_int_equal(csi_rpc_by_name(info->name), i);
		for (int k = 0; k < 2; k++) {
			ProtobufCMessage *m = protobuf_c_message_unpack(d[k], NULL, 0, NULL);
			ProtobufCMessage *c;

			assert_non_null(m);
			assert_int_equal(protobuf_c_message_get_packed_size(m), 0);
			c = csi_msg_dup(m);
			assert_non_null(c);
			assert_ptr_equal(c->descriptor, d[k]);
			csi_msg_free(c);
			csi_msg_free(m);
		}
	}
	assert_null(csi_rpc_info((enum csi_rpc)CSI_RPC_COUNT));
	assert_int_equal(csi_rpc_by_path("/csi.v1.Identity/Probe", 21), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_wire_bytes),           cmocka_unit_test(test_oneof_and_wrappers),
	    cmocka_unit_test(test_list_with_timestamps), cmocka_unit_test(test_maps_and_dup),
	    cmocka_unit_test(test_every_type_empty),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
