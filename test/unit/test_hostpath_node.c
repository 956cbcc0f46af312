/*
 * Unit tests of csi-hostpath's Node service in process, on the fake mount
 * operations: the stage/publish/unpublish/unstage lifecycle and its
 * idempotency, read-only publishing, block volumes published as files,
 * the second-NodePublishVolume table of the spec, hostile paths, volume
 * stats and node expansion, node info, and crash leftovers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>

#include <cmocka.h>

#include "hostpath_proc.h"

#define SNW CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER
#define SNMW CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_MULTI_WRITER
#define MNRO CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY

#define STAGING "/co/staging/vol"
#define PARENT "/co/pods"
#define TARGET "/co/pods/t1"
#define TARGET2 "/co/pods/t2"

static int setup_with(void **state, bool controller_publish)
{
	static struct hpp_inproc t;
	struct hp_config cfg = {.controller_publish = controller_publish};

	if (hpp_inproc_start(&t, &cfg) != 0)
		return -1;
	hp_mount_fake_add_dir(t.fake, STAGING);
	hp_mount_fake_add_dir(t.fake, PARENT);
	*state = &t;
	return 0;
}

static int setup(void **state)
{
	return setup_with(state, false);
}

static int setup_publish(void **state)
{
	return setup_with(state, true);
}

static int teardown(void **state)
{
	hpp_inproc_stop(*state);
	return 0;
}

static enum hp_path_kind kind(struct hpp_inproc *t, const char *path)
{
	return hp_mount_fake_ops.kind(t->fake, path);
}

static void test_lifecycle(void **state)
{
	struct hpp_inproc *t = *state;
	char id[64];

	assert_int_equal(hpp_create(&t->caller, "v", 1 << 20, 0, false, id), CSI_OK);
	assert_int_equal(hpp_stage(&t->caller, "vol-missing", STAGING, false, SNW), CSI_NOT_FOUND);
	assert_int_equal(hpp_stage(&t->caller, id, STAGING, true, SNW), CSI_FAILED_PRECONDITION);
	assert_int_equal(hpp_stage(&t->caller, id, "/co/not-there", false, SNW),
			 CSI_FAILED_PRECONDITION);
	for (int i = 0; i < 2; i++)
		assert_int_equal(hpp_stage(&t->caller, id, STAGING, false, SNW), CSI_OK);
	assert_int_equal(hp_mount_fake_mounts(t->fake), 1);
	assert_int_equal(hpp_stage(&t->caller, id, STAGING, false, SNMW), CSI_ALREADY_EXISTS);
	assert_int_equal(hpp_publish(&t->caller, id, "", TARGET, false, SNW, false),
			 CSI_FAILED_PRECONDITION);
	assert_int_equal(hpp_publish(&t->caller, id, "/co/other", TARGET, false, SNW, false),
			 CSI_FAILED_PRECONDITION);
	for (int i = 0; i < 2; i++)
		assert_int_equal(hpp_publish(&t->caller, id, STAGING, TARGET, false, SNW, false),
				 CSI_OK);
	assert_int_equal(kind(t, TARGET), HP_PATH_DIR);
	assert_int_equal(hp_mount_fake_flags(t->fake, TARGET), 0);
	assert_int_equal(hp_mount_fake_mounts(t->fake), 2);
	/* The volume is in use: it cannot be deleted. */
	Csi__V1__DeleteVolumeRequest dr = CSI__V1__DELETE_VOLUME_REQUEST__INIT;
	dr.volume_id = id;
	assert_int_equal(hpp_call(t, CSI_RPC_DELETE_VOLUME, &dr, NULL), CSI_FAILED_PRECONDITION);
	for (int i = 0; i < 2; i++)
		assert_int_equal(hpp_unpublish(&t->caller, id, TARGET), CSI_OK);
	assert_int_equal(kind(t, TARGET), HP_PATH_NONE);
	for (int i = 0; i < 2; i++)
		assert_int_equal(hpp_unstage(&t->caller, id, STAGING), CSI_OK);
	assert_int_equal(hp_mount_fake_mounts(t->fake), 0);
	assert_int_equal(kind(t, STAGING), HP_PATH_DIR); /* the CO's directory stays */
	assert_int_equal(hpp_unpublish(&t->caller, "vol-missing", TARGET), CSI_NOT_FOUND);
	assert_int_equal(hpp_unstage(&t->caller, "vol-missing", STAGING), CSI_NOT_FOUND);
	assert_int_equal(hpp_call(t, CSI_RPC_DELETE_VOLUME, &dr, NULL), CSI_OK);
}

static void test_readonly(void **state)
{
	struct hpp_inproc *t = *state;
	char id[64];

	assert_int_equal(hpp_create(&t->caller, "v", 1 << 20, 0, false, id), CSI_OK);
	assert_int_equal(hpp_stage(&t->caller, id, STAGING, false, MNRO), CSI_OK);
	assert_int_equal(hpp_publish(&t->caller, id, STAGING, TARGET, false, SNW, true), CSI_OK);
	assert_true(hp_mount_fake_flags(t->fake, TARGET) & MS_RDONLY);
	assert_int_equal(hpp_unpublish(&t->caller, id, TARGET), CSI_OK);
	/* A read-only access mode is published read-only even without the flag. */
	assert_int_equal(hpp_publish(&t->caller, id, STAGING, TARGET2, false, MNRO, false), CSI_OK);
	assert_true(hp_mount_fake_flags(t->fake, TARGET2) & MS_RDONLY);
}

static void test_mount_flags(void **state)
{
	struct hpp_inproc *t = *state;
	Csi__V1__NodePublishVolumeRequest r = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
	char *flags[] = {"noexec", "nosuid", "discard"};
	struct hpp_cap c;
	char id[64];
	long f;

	assert_int_equal(hpp_create(&t->caller, "v", 1 << 20, 0, false, id), CSI_OK);
	assert_int_equal(hpp_stage(&t->caller, id, STAGING, false, SNW), CSI_OK);
	r.volume_id = id;
	r.staging_target_path = STAGING;
	r.target_path = TARGET;
	r.volume_capability = hpp_cap(&c, false, SNW);
	c.mount.mount_flags = flags;
	c.mount.n_mount_flags = 3;
	assert_int_equal(hpp_call(t, CSI_RPC_NODE_PUBLISH_VOLUME, &r, NULL), CSI_OK);
	/* Bind-mount options are honoured; file-system options are ignored. */
	f = hp_mount_fake_flags(t->fake, TARGET);
	assert_true(f & MS_NOEXEC);
	assert_true(f & MS_NOSUID);
	assert_false(f & MS_RDONLY);
	/* Other mount flags are other arguments for the same target. */
	c.mount.n_mount_flags = 1;
	assert_int_equal(hpp_call(t, CSI_RPC_NODE_PUBLISH_VOLUME, &r, NULL), CSI_ALREADY_EXISTS);
}

static void test_second_publish_table(void **state)
{
	struct hpp_inproc *t = *state;
	char id[64];

	assert_int_equal(hpp_create(&t->caller, "v", 1 << 20, 0, false, id), CSI_OK);
	assert_int_equal(hpp_stage(&t->caller, id, STAGING, false, SNW), CSI_OK);
	assert_int_equal(hpp_publish(&t->caller, id, STAGING, TARGET, false, SNW, false), CSI_OK);
	/* T1=T2: same arguments OK, other arguments ALREADY_EXISTS. */
	assert_int_equal(hpp_publish(&t->caller, id, STAGING, TARGET, false, SNW, false), CSI_OK);
	assert_int_equal(hpp_publish(&t->caller, id, STAGING, TARGET, false, SNW, true),
			 CSI_ALREADY_EXISTS);
	/* T1≠T2 under a single-workload mode: FAILED_PRECONDITION either way. */
	assert_int_equal(hpp_publish(&t->caller, id, STAGING, TARGET2, false, SNW, false),
			 CSI_FAILED_PRECONDITION);
	assert_int_equal(hpp_publish(&t->caller, id, STAGING, TARGET2, false, SNW, true),
			 CSI_FAILED_PRECONDITION);
	assert_int_equal(hpp_unpublish(&t->caller, id, TARGET), CSI_OK);
	/* Modes that allow several workloads: other targets are OK. */
	assert_int_equal(hpp_publish(&t->caller, id, STAGING, TARGET, false, SNMW, false), CSI_OK);
	assert_int_equal(hpp_publish(&t->caller, id, STAGING, TARGET2, false, SNMW, false), CSI_OK);
	assert_int_equal(hpp_publish(&t->caller, id, STAGING, TARGET2, false, SNMW, true),
			 CSI_ALREADY_EXISTS);
	assert_int_equal(hp_mount_fake_mounts(t->fake), 3);
}

static void test_block(void **state)
{
	struct hpp_inproc *t = *state;
	Csi__V1__NodeGetVolumeStatsRequest sr = CSI__V1__NODE_GET_VOLUME_STATS_REQUEST__INIT;
	Csi__V1__NodeGetVolumeStatsResponse *st;
	char id[64];

	assert_int_equal(hpp_create(&t->caller, "b", 4 << 20, 0, true, id), CSI_OK);
	assert_int_equal(hpp_stage(&t->caller, id, STAGING, false, SNW), CSI_FAILED_PRECONDITION);
	assert_int_equal(hpp_stage(&t->caller, id, STAGING, true, SNW), CSI_OK);
	assert_int_equal(kind(t, STAGING "/block"), HP_PATH_FILE);
	assert_int_equal(hpp_publish(&t->caller, id, STAGING, TARGET, true, SNW, false), CSI_OK);
	assert_int_equal(kind(t, TARGET), HP_PATH_FILE);
	sr.volume_id = id;
	sr.volume_path = TARGET;
	assert_int_equal(hpp_call(t, CSI_RPC_NODE_GET_VOLUME_STATS, &sr, &st), CSI_OK);
	assert_int_equal(st->n_usage, 1);
	assert_int_equal(st->usage[0]->total, 4 << 20);
	assert_int_equal(hpp_unpublish(&t->caller, id, TARGET), CSI_OK);
	assert_int_equal(kind(t, TARGET), HP_PATH_NONE);
	assert_int_equal(hpp_unstage(&t->caller, id, STAGING), CSI_OK);
	assert_int_equal(kind(t, STAGING "/block"), HP_PATH_NONE);
	assert_int_equal(hp_mount_fake_mounts(t->fake), 0);
}

static void test_bad_paths(void **state)
{
	struct hpp_inproc *t = *state;
	char id[64], inside[256];
	const char *bad[] = {"relative/path", "/co/../etc", "/co/./x",  "/co//x",
			     "/co/x/",        "/",          "/co/\x01x"};

	assert_int_equal(hpp_create(&t->caller, "v", 1 << 20, 0, false, id), CSI_OK);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(hpp_stage(&t->caller, id, bad[i], false, SNW),
				 CSI_INVALID_ARGUMENT);
		assert_int_equal(hpp_unstage(&t->caller, id, bad[i]), CSI_INVALID_ARGUMENT);
		assert_int_equal(hpp_publish(&t->caller, id, STAGING, bad[i], false, SNW, false),
				 CSI_INVALID_ARGUMENT);
		assert_int_equal(hpp_unpublish(&t->caller, id, bad[i]), CSI_INVALID_ARGUMENT);
	}
	snprintf(inside, sizeof(inside), "%s/volumes", t->p->data_dir);
	assert_int_equal(hpp_stage(&t->caller, id, inside, false, SNW), CSI_INVALID_ARGUMENT);
	assert_int_equal(hpp_stage(&t->caller, "../x", STAGING, false, SNW), CSI_INVALID_ARGUMENT);
	assert_int_equal(hpp_stage(&t->caller, id, STAGING, false, 0), CSI_INVALID_ARGUMENT);
	assert_int_equal(hp_mount_fake_mounts(t->fake), 0);
}

static void test_stats_expand_info(void **state)
{
	struct hpp_inproc *t = *state;
	Csi__V1__NodeGetVolumeStatsRequest sr = CSI__V1__NODE_GET_VOLUME_STATS_REQUEST__INIT;
	Csi__V1__NodeGetVolumeStatsResponse *st;
	struct hp_config alpha = {.enable_alpha = true};
	Csi__V1__NodeExpandVolumeRequest er = CSI__V1__NODE_EXPAND_VOLUME_REQUEST__INIT;
	Csi__V1__NodeExpandVolumeResponse *eo;
	Csi__V1__CapacityRange cr = CSI__V1__CAPACITY_RANGE__INIT;
	Csi__V1__NodeGetInfoRequest ir = CSI__V1__NODE_GET_INFO_REQUEST__INIT;
	Csi__V1__NodeGetInfoResponse *info;
	Csi__V1__NodeGetCapabilitiesRequest cq = CSI__V1__NODE_GET_CAPABILITIES_REQUEST__INIT;
	Csi__V1__NodeGetCapabilitiesResponse *caps;
	char id[64];

	assert_int_equal(hpp_create(&t->caller, "v", 1 << 20, 0, false, id), CSI_OK);
	sr.volume_id = id;
	sr.volume_path = TARGET;
	assert_int_equal(hpp_call(t, CSI_RPC_NODE_GET_VOLUME_STATS, &sr, NULL), CSI_NOT_FOUND);
	assert_int_equal(hpp_stage(&t->caller, id, STAGING, false, SNW), CSI_OK);
	assert_int_equal(hpp_publish(&t->caller, id, STAGING, TARGET, false, SNW, false), CSI_OK);
	assert_int_equal(hpp_call(t, CSI_RPC_NODE_GET_VOLUME_STATS, &sr, &st), CSI_OK);
	assert_int_equal(st->n_usage, 2);
	assert_null(st->volume_condition); /* an alpha field: only with --enable-alpha */
	sr.volume_path = STAGING;
	assert_int_equal(hpp_call(t, CSI_RPC_NODE_GET_VOLUME_STATS, &sr, &st), CSI_OK);
	sr.volume_id = "vol-missing";
	assert_int_equal(hpp_call(t, CSI_RPC_NODE_GET_VOLUME_STATS, &sr, NULL), CSI_NOT_FOUND);
	sr.volume_id = "";
	assert_int_equal(hpp_call(t, CSI_RPC_NODE_GET_VOLUME_STATS, &sr, NULL),
			 CSI_INVALID_ARGUMENT);

	er.volume_id = id;
	er.volume_path = TARGET;
	cr.required_bytes = 1 << 20;
	er.capacity_range = &cr;
	assert_int_equal(hpp_call(t, CSI_RPC_NODE_EXPAND_VOLUME, &er, &eo), CSI_OK);
	assert_int_equal(eo->capacity_bytes, 1 << 20);
	cr.required_bytes = 2 << 20; /* the controller has not grown it */
	assert_int_equal(hpp_call(t, CSI_RPC_NODE_EXPAND_VOLUME, &er, NULL), CSI_OUT_OF_RANGE);
	/* Spec: a path where the volume is not staged or published is NOT_FOUND. */
	for (int i = 0; i < 2; i++) {
		static const char *const bad[] = {"/co/elsewhere", "relative/path",
						  "/co/pods/../t1", "/co/pods/t1/"};
		char inside[HP_PATH_MAX + 16];

		snprintf(inside, sizeof(inside), "%s/volumes/%s", t->p->data_dir, id);
		sr.volume_id = er.volume_id = id;
		for (size_t k = 0; k <= sizeof(bad) / sizeof(bad[0]); k++) {
			const char *path = k < sizeof(bad) / sizeof(bad[0]) ? bad[k] : inside;

			sr.volume_path = er.volume_path = (char *)path;
			assert_int_equal(i ? hpp_call(t, CSI_RPC_NODE_EXPAND_VOLUME, &er, NULL)
					   : hpp_call(t, CSI_RPC_NODE_GET_VOLUME_STATS, &sr, NULL),
					 CSI_NOT_FOUND);
		}
		sr.volume_path = er.volume_path = TARGET;
		sr.volume_id = er.volume_id = "../../etc"; /* cannot exist */
		assert_int_equal(i ? hpp_call(t, CSI_RPC_NODE_EXPAND_VOLUME, &er, NULL)
				   : hpp_call(t, CSI_RPC_NODE_GET_VOLUME_STATS, &sr, NULL),
				 CSI_NOT_FOUND);
		sr.volume_id = er.volume_id = id;
		sr.volume_path = er.volume_path = "";
		assert_int_equal(i ? hpp_call(t, CSI_RPC_NODE_EXPAND_VOLUME, &er, NULL)
				   : hpp_call(t, CSI_RPC_NODE_GET_VOLUME_STATS, &sr, NULL),
				 CSI_INVALID_ARGUMENT);
	}

	assert_int_equal(hpp_call(t, CSI_RPC_NODE_GET_INFO, &ir, &info), CSI_OK);
	assert_string_equal(info->node_id, "node-1");
	assert_non_null(info->accessible_topology);
	assert_string_equal(info->accessible_topology->segments[0]->key, HP_TOPOLOGY_KEY);
	assert_int_equal(hpp_call(t, CSI_RPC_NODE_GET_CAPABILITIES, &cq, &caps), CSI_OK);
	assert_int_equal(caps->capabilities[0]->rpc->type,
			 CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__STAGE_UNSTAGE_VOLUME);
	assert_int_equal(caps->n_capabilities, 3);

	/* With --enable-alpha: VOLUME_CONDITION, SINGLE_NODE_MULTI_WRITER and conditions. */
	assert_int_equal(hpp_inproc_restart(t, &alpha), 0);
	assert_int_equal(hpp_call(t, CSI_RPC_NODE_GET_CAPABILITIES, &cq, &caps), CSI_OK);
	assert_int_equal(caps->n_capabilities, 5);
	sr.volume_id = id;
	sr.volume_path = TARGET;
	assert_int_equal(hpp_call(t, CSI_RPC_NODE_GET_VOLUME_STATS, &sr, &st), CSI_OK);
	assert_non_null(st->volume_condition);
	assert_false(st->volume_condition->abnormal);
}

static void test_needs_controller_publish(void **state)
{
	struct hpp_inproc *t = *state;
	Csi__V1__ControllerPublishVolumeRequest r =
	    CSI__V1__CONTROLLER_PUBLISH_VOLUME_REQUEST__INIT;
	Csi__V1__ControllerPublishVolumeResponse *out;
	Csi__V1__NodePublishVolumeRequest pr = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
	Csi__V1__NodePublishVolumeRequest__PublishContextEntry ro =
	    CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__PUBLISH_CONTEXT_ENTRY__INIT;
	Csi__V1__NodePublishVolumeRequest__PublishContextEntry *ctx[1] = {&ro};
	struct hpp_cap c;
	char id[64];

	assert_int_equal(hpp_create(&t->caller, "v", 1 << 20, 0, false, id), CSI_OK);
	assert_int_equal(hpp_stage(&t->caller, id, STAGING, false, SNW), CSI_FAILED_PRECONDITION);
	r.volume_id = id;
	r.node_id = "node-1";
	r.readonly = true;
	r.volume_capability = hpp_cap(&c, false, SNW);
	assert_int_equal(hpp_call(t, CSI_RPC_CONTROLLER_PUBLISH_VOLUME, &r, &out), CSI_OK);
	assert_int_equal(out->n_publish_context, 1);
	assert_string_equal(out->publish_context[0]->value, "true");
	assert_int_equal(hpp_stage(&t->caller, id, STAGING, false, SNW), CSI_OK);
	/* The controller's read-only publish_context makes the node mount read-only. */
	ro.key = HP_CTX_READONLY;
	ro.value = "true";
	pr.volume_id = id;
	pr.staging_target_path = STAGING;
	pr.target_path = TARGET;
	pr.volume_capability = hpp_cap(&c, false, SNW);
	pr.publish_context = ctx;
	pr.n_publish_context = 1;
	assert_int_equal(hpp_call(t, CSI_RPC_NODE_PUBLISH_VOLUME, &pr, NULL), CSI_OK);
	assert_true(hp_mount_fake_flags(t->fake, TARGET) & MS_RDONLY);
}

static void test_crash_leftovers(void **state)
{
	struct hpp_inproc *t = *state;
	char id[64], src[512];

	assert_int_equal(hpp_create(&t->caller, "v", 1 << 20, 0, false, id), CSI_OK);
	/* A mount of this volume made before a crash, never recorded. */
	snprintf(src, sizeof(src), "%s/volumes/%s", t->p->data_dir, id);
	assert_int_equal(hp_mount_fake_ops.bind(t->fake, src, STAGING, 0), 0);
	assert_int_equal(hpp_unstage(&t->caller, id, STAGING), CSI_OK);
	assert_int_equal(hp_mount_fake_mounts(t->fake), 0);
	assert_int_equal(hp_mount_fake_ops.bind(t->fake, src, STAGING, 0), 0);
	assert_int_equal(hpp_stage(&t->caller, id, STAGING, false, SNW), CSI_OK);
	assert_int_equal(hp_mount_fake_mounts(t->fake), 1);
	/* Something else mounted at a target is never touched. */
	assert_int_equal(hp_mount_fake_ops.mkdir(t->fake, TARGET), 0);
	assert_int_equal(hp_mount_fake_ops.bind(t->fake, "/elsewhere", TARGET, 0), 0);
	assert_int_equal(hpp_unpublish(&t->caller, id, TARGET), CSI_FAILED_PRECONDITION);
	assert_int_equal(hpp_publish(&t->caller, id, STAGING, TARGET, false, SNW, false),
			 CSI_FAILED_PRECONDITION);
	assert_int_equal(hp_mount_fake_mounts(t->fake), 2);
	/* The mount vanished behind the plugin's back (reboot): publish mounts it again. */
	assert_int_equal(hp_mount_fake_ops.umount(t->fake, TARGET), 0);
	assert_int_equal(hpp_publish(&t->caller, id, STAGING, TARGET, false, SNW, false), CSI_OK);
	assert_int_equal(hp_mount_fake_ops.umount(t->fake, TARGET), 0);
	assert_int_equal(hpp_publish(&t->caller, id, STAGING, TARGET, false, SNW, false), CSI_OK);
	assert_true(hp_mount_fake_ops.is_mount(t->fake, TARGET));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_lifecycle, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_readonly, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_mount_flags, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_second_publish_table, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_block, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_paths, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stats_expand_info, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_needs_controller_publish, setup_publish, teardown),
	    cmocka_unit_test_setup_teardown(test_crash_leftovers, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
