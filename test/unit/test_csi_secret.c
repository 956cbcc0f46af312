/*
 * Secret redaction: the list of secret fields matches proto/csi.proto, and
 * no secret value ever reaches the formatted text, for every request and
 * response type filled generically (nested messages, maps, oneofs), both
 * as built and after a trip through the wire format.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "csi/csi_rpc.h"
#include "csi/csi_secret.h"
#include "util/arena.h"

#define TS_SECRET "TOPSECRET"
#define TS_PUBLIC "public"
#define TS_MAX_DESC 256

/* Every message type reachable from the RPC table and the streaming RPCs. */
static const ProtobufCMessageDescriptor *ts_desc[TS_MAX_DESC];
static size_t ts_ndesc;

static void ts_collect(const ProtobufCMessageDescriptor *d)
{
	for (size_t i = 0; i < ts_ndesc; i++)
		if (ts_desc[i] == d)
			return;
	assert_true(ts_ndesc < TS_MAX_DESC);
	ts_desc[ts_ndesc++] = d;
	for (unsigned i = 0; i < d->n_fields; i++)
		if (d->fields[i].type == PROTOBUF_C_TYPE_MESSAGE)
			ts_collect(d->fields[i].descriptor);
}

static void ts_collect_all(void)
{
	if (ts_ndesc)
		return;
	for (int i = 0; i < CSI_RPC_COUNT; i++) {
		ts_collect(csi_rpc_info((enum csi_rpc)i)->request);
		ts_collect(csi_rpc_info((enum csi_rpc)i)->response);
	}
	ts_collect(&csi__v1__get_metadata_allocated_request__descriptor);
	ts_collect(&csi__v1__get_metadata_allocated_response__descriptor);
	ts_collect(&csi__v1__get_metadata_delta_request__descriptor);
	ts_collect(&csi__v1__get_metadata_delta_response__descriptor);
}

static const ProtobufCMessageDescriptor *ts_find(const char *short_name)
{
	char full[128];

	snprintf(full, sizeof(full), "csi.v1.%s", short_name);
	for (size_t i = 0; i < ts_ndesc; i++)
		if (strcmp(ts_desc[i]->name, full) == 0)
			return ts_desc[i];
	return NULL;
}

/* Every field the proto marks "// secret" is on our list, and nothing else is. */
static void test_list_matches_proto(void **state)
{
	char line[512], msg[128] = "";
	FILE *f = fopen(CSID_SOURCE_DIR "/proto/csi.proto", "r");
	int marked = 0, listed = 0;

	(void)state;
	ts_collect_all();
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		char name[128];
		const ProtobufCMessageDescriptor *d;
		const ProtobufCFieldDescriptor *fd;

		if (sscanf(line, "message %127s", name) == 1)
			snprintf(msg, sizeof(msg), "%s", name);
		if (!strstr(line, "// secret"))
			continue;
		assert_int_equal(sscanf(line, " map<string, string> %127s", name), 1);
		d = ts_find(msg);
		if (!d)
			fail_msg("message %s of the proto not found", msg);
		fd = protobuf_c_message_descriptor_get_field_by_name(d, name);
		assert_non_null(fd);
		if (!csi_secret_field(d, fd))
			fail_msg("%s.%s is marked secret but not listed", msg, name);
		marked++;
	}
	fclose(f);
	assert_true(marked >= 19);
	for (size_t i = 0; i < ts_ndesc; i++)
		for (unsigned k = 0; k < ts_desc[i]->n_fields; k++)
			if (csi_secret_field(ts_desc[i], &ts_desc[i]->fields[k]))
				listed++;
	/* The marked maps plus MountVolume.mount_flags. */
	assert_int_equal(listed, marked + 1);
	assert_true(csi_secret_has(&csi__v1__node_stage_volume_request__descriptor));
	assert_true(csi_secret_has(&csi__v1__volume_capability__descriptor));
	assert_false(csi_secret_has(&csi__v1__probe_request__descriptor));
	assert_false(csi_secret_has(NULL));
}

/*
 * Fills every field of a message of type d: strings inside secret fields
 * hold TS_SECRET, all others TS_PUBLIC; repeated fields get two elements;
 * of each oneof the last member is set.
 */
static ProtobufCMessage *ts_fill(struct arena *a, const ProtobufCMessageDescriptor *d, bool secret,
				 int depth)
{
	ProtobufCMessage *m = arena_alloc(a, d->sizeof_message);

	protobuf_c_message_init(d, m);
	if (depth > 6)
		return m;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		bool sec = secret || csi_secret_field(d, f);
		char *base = (char *)m;
		size_t n = f->label == PROTOBUF_C_LABEL_REPEATED ? 2 : 1;
		void *slot = base + f->offset;

		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t sz =
			    f->type == PROTOBUF_C_TYPE_MESSAGE || f->type == PROTOBUF_C_TYPE_STRING
				? sizeof(void *)
				: 8;

			*(size_t *)(base + f->quantifier_offset) = n;
			*(void **)slot = arena_alloc(a, n * sz);
			slot = *(void **)slot;
		} else if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			*(uint32_t *)(base + f->quantifier_offset) = f->id;
		}
		for (size_t k = 0; k < n; k++) {
			switch (f->type) {
			case PROTOBUF_C_TYPE_STRING:
				((char **)slot)[k] = arena_printf(
				    a, "%s-%s-%zu", sec ? TS_SECRET : TS_PUBLIC, f->name, k);
				break;
			case PROTOBUF_C_TYPE_MESSAGE:
				((ProtobufCMessage **)slot)[k] =
				    ts_fill(a, f->descriptor, sec, depth + 1);
				break;
			case PROTOBUF_C_TYPE_INT64:
				((int64_t *)slot)[k] = 4096 + (int64_t)k;
				break;
			case PROTOBUF_C_TYPE_INT32:
			case PROTOBUF_C_TYPE_ENUM:
				((int32_t *)slot)[k] = 1;
				break;
			case PROTOBUF_C_TYPE_BOOL:
				((protobuf_c_boolean *)slot)[k] = 1;
				break;
			default:
				break;
			}
		}
	}
	return m;
}

static void ts_check_text(const char *text, const ProtobufCMessageDescriptor *d)
{
	if (strstr(text, TS_SECRET))
		fail_msg("secret leaked formatting %s: %s", d->name, text);
	if (csi_secret_has(d) && !strstr(text, "<redacted>"))
		fail_msg("%s: no <redacted> in %s", d->name, text);
}

static void test_no_secret_in_any_message(void **state)
{
	static char text[64 * 1024];

	(void)state;
	ts_collect_all();
	for (size_t i = 0; i < ts_ndesc; i++) {
		struct arena *a = arena_new();
		ProtobufCMessage *m = ts_fill(a, ts_desc[i], false, 0);
		size_t n = protobuf_c_message_get_packed_size(m);
		uint8_t *wire = arena_alloc(a, n + 1);
		ProtobufCMessage *back;

		csi_secret_format(m, text, sizeof(text));
		ts_check_text(text, ts_desc[i]);
		if (ts_desc[i]->n_fields && strchr(text, ':') == NULL)
			fail_msg("%s printed no field: %s", ts_desc[i]->name, text);
		protobuf_c_message_pack(m, wire);
		back = protobuf_c_message_unpack(ts_desc[i], NULL, n, wire);
		assert_non_null(back);
		csi_secret_format(back, text, sizeof(text));
		ts_check_text(text, ts_desc[i]);
		/* Every size of buffer: bounded, terminated, still no secret. */
		for (size_t len = 1; len < 300; len += 7) {
			char small[300];

			memset(small, 'Z', sizeof(small));
			csi_secret_format(back, small, len);
			assert_true(strlen(small) < len);
			assert_null(strstr(small, "TOPSEC"));
		}
		protobuf_c_message_free_unpacked(back, NULL);
		arena_free(a);
	}
}

static void test_readable_text(void **state)
{
	Csi__V1__NodeStageVolumeRequest req = CSI__V1__NODE_STAGE_VOLUME_REQUEST__INIT;
	Csi__V1__NodeStageVolumeRequest__SecretsEntry sec =
	    CSI__V1__NODE_STAGE_VOLUME_REQUEST__SECRETS_ENTRY__INIT;
	Csi__V1__NodeStageVolumeRequest__SecretsEntry *secs[1] = {&sec};
	Csi__V1__NodeStageVolumeRequest__PublishContextEntry pc =
	    CSI__V1__NODE_STAGE_VOLUME_REQUEST__PUBLISH_CONTEXT_ENTRY__INIT;
	Csi__V1__NodeStageVolumeRequest__PublishContextEntry *pcs[1] = {&pc};
	Csi__V1__VolumeCapability cap = CSI__V1__VOLUME_CAPABILITY__INIT;
	Csi__V1__VolumeCapability__MountVolume mount =
	    CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
	Csi__V1__VolumeCapability__AccessMode mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__INIT;
	char *flags[2] = {"ro", "password=hunter2"};
	char text[512];

	(void)state;
	sec.key = "password";
	sec.value = "hunter2";
	pc.key = "dev";
	pc.value = "/dev/x\"y\n\xc3\xa9";
	mount.fs_type = "ext4";
	mount.n_mount_flags = 2;
	mount.mount_flags = flags;
	mode.mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
	cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
	cap.mount = &mount;
	cap.access_mode = &mode;
	req.volume_id = "v1";
	req.n_secrets = 1;
	req.secrets = secs;
	req.n_publish_context = 1;
	req.publish_context = pcs;
	req.volume_capability = &cap;
	csi_secret_format(&req.base, text, sizeof(text));
	assert_null(strstr(text, "hunter2"));
	assert_null(strstr(text, "password"));
	assert_string_equal(text,
			    "{volume_id:\"v1\", publish_context:{\"dev\":\"/dev/x\\\"y\\x0a"
			    "\\xc3\\xa9\"}, volume_capability:{mount:{fs_type:\"ext4\", "
			    "mount_flags:<redacted>}, access_mode:{mode:SINGLE_NODE_WRITER}}, "
			    "secrets:<redacted>}");
	assert_string_equal(csi_secret_format(NULL, text, sizeof(text)), "null");
	csi_secret_format(&req.base, text, 20);
	assert_int_equal(strlen(text), 19);
	assert_string_equal(text + 16, "...");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_list_matches_proto),
	    cmocka_unit_test(test_no_secret_in_any_message),
	    cmocka_unit_test(test_readable_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
