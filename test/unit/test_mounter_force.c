/*
 * Unit tests of the mounter's ways out, with the fake node plugin and
 * mount table of test/lib/mounter_fake.h: the rollback of a stage the
 * plugin refused, when the plugin refuses the unstage too (done when
 * nothing is mounted at the staging path, kept when something is, also
 * in the recovery after a restart); the recovery of a mount interrupted
 * between its intent (mounting) and its result;
 * the forced unmount (a refused unpublish or unstage, a busy target
 * detached lazily, a stage still used by another allocation, no plugin
 * at all, a record stuck in unstaging from an earlier agent); the
 * refusal of a second allocation naming another plugin volume; and the
 * removal of the per-allocation directories of a mount that failed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/mount_store.h"
#include "agent/mounter.h"
#include "csi/csi_rules.h"
#include "util/mkdir_p.h"
#include "mounter_fake.h"
#include "mounter_test.h"

/* <data>/mounts/per-alloc/<alloc> into buf. */
static void mtf_alloc_dir(const struct mt_env *env, const char *alloc, char *buf, size_t len)
{
	snprintf(buf, len, "%s/mounts/per-alloc/%s", env->real_data, alloc);
}

static bool mtf_exists(const char *path)
{
	return access(path, F_OK) == 0;
}

/* The record's state, or MOUNT_STATE_GONE when there is none. */
static enum mount_state mtf_state(struct mt_env *env, const char *vol, const char *alloc)
{
	struct mount_record *r = NULL;
	enum mount_state s;
	struct err e;
	int rc = mounter_get(env->m, vol, alloc, &r, &e);

	if (rc == CSID_ENOTFOUND)
		return MOUNT_STATE_GONE;
	assert_int_equal(rc, 0);
	s = r->state;
	mount_record_free(r);
	return s;
}

/*
 * Writes a record of vol/alloc in state `to` (through `via` when not new)
 * straight into the agent database, as an earlier agent would have left
 * it; fills staging with its staging path.
 */
static void mtf_plant(struct mt_env *env, const char *vol, const char *alloc, enum mount_state via,
		      enum mount_state to, char *staging, size_t len)
{
	struct mount_record r;
	struct mounter_request req;
	struct mount_store *s = NULL;
	char target[MOUNTER_PATH_MAX];
	struct err e;

	mt_request(&req, vol, alloc);
	memset(&r, 0, sizeof(r));
	assert_int_equal(
	    mount_staging_path(env->real_data, MT_PLUGIN, vol, &req.usage, staging, len, &e), 0);
	assert_int_equal(
	    mount_target_path(env->real_data, alloc, vol, &req.usage, target, sizeof(target), &e),
	    0);
	r.volume_id = (char *)vol;
	r.alloc_id = (char *)alloc;
	r.plugin_id = (char *)MT_PLUGIN;
	r.external_id = (char *)vol;
	r.attachment = req.usage.attachment;
	r.access = req.usage.access;
	r.fs_type = (char *)"ext4";
	mount_usage_options_hash(&req.usage, r.options_hash);
	r.staging_path = staging;
	r.target_path = target;
	r.state = MOUNT_STATE_NEW;
	assert_int_equal(mount_store_open(env->db, &s, &e), 0);
	assert_int_equal(mount_store_transition(s, &r, via, &e), 0);
	if (via != to)
		assert_int_equal(mount_store_transition(s, &r, to, &e), 0);
	mount_store_close(s);
	assert_int_equal(mkdir_p(staging, &e), 0);
}

/* The case: stage refused (INVALID_ARGUMENT), unstage refused too. */
static void test_refused_stage_and_unstage(void **state)
{
	struct mt_env *env = *state;
	struct mounter_request req;
	struct mounter_result res;
	struct mounter_recovery rep;
	char dir[MOUNTER_PATH_MAX];
	struct err e;

	env->fake.fail_at = 0; /* NodeStageVolume */
	env->fake.fail_code = CSI_INVALID_ARGUMENT;
	env->fake.fail_rpc = CSI_RPC_NODE_UNSTAGE_VOLUME;
	mt_request(&req, "vol1", "alloc-a");
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "INVALID_ARGUMENT"));
	/* The unstage was asked (and refused): nothing mounted there, so it is done. */
	assert_int_equal(env->fake.calls, 2);
	assert_int_equal(mtf_state(env, "vol1", "alloc-a"), MOUNT_STATE_GONE);
	/* Nothing of the failed mount stays under per-alloc. */
	mtf_alloc_dir(env, "alloc-a", dir, sizeof(dir));
	assert_false(mtf_exists(dir));
	/* A restart finds nothing pending. */
	mt_reopen(env);
	env->fake.fail_rpc = CSI_RPC_NODE_UNSTAGE_VOLUME;
	assert_int_equal(mounter_recover(env->m, mt_lookup, NULL, env, &rep, &e), 0);
	assert_int_equal(rep.pending, 0);
	/* A later valid mount of the same pair works, and so does its unmount. */
	env->fake.fail_rpc = -1;
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), 0);
	mt_check(env, true);
	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol1", "alloc-a", &e), 0);
	mt_check_empty(env);
}

/* A retryable refusal, or something mounted at the staging path, keeps the record. */
static void test_unconfirmed_stage_kept(void **state)
{
	struct mt_env *env = *state;
	struct mounter_request req;
	struct mounter_result res;
	char staging[MOUNTER_PATH_MAX];
	struct err e;

	/* UNAVAILABLE may mean the plugin is still staging: not ours to drop. */
	env->fake.fail_at = 0;
	env->fake.fail_code = CSI_UNAVAILABLE;
	env->fake.fail_rpc = CSI_RPC_NODE_UNSTAGE_VOLUME;
	mt_request(&req, "vol1", "alloc-a");
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), CSID_EUNAVAIL);
	assert_int_equal(mtf_state(env, "vol1", "alloc-a"), MOUNT_STATE_UNSTAGING_UNCONFIRMED);
	/* Once the plugin answers, the next mount finishes the rollback and mounts. */
	env->fake.fail_rpc = -1;
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), 0);
	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol1", "alloc-a", &e), 0);
	mt_check_empty(env);

	/* A final refusal while the staging path is a mount point keeps it too. */
	mtf_plant(env, "vol2", "alloc-b", MOUNT_STATE_STAGING, MOUNT_STATE_STAGING, staging,
		  sizeof(staging));
	assert_int_equal(mounter_fake_add_orphan(&env->fake, staging), 0);
	env->fake.fail_rpc = CSI_RPC_NODE_UNSTAGE_VOLUME;
	env->fake.fail_code = CSI_INVALID_ARGUMENT;
	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol2", "alloc-b", &e), CSID_EINVAL);
	assert_int_equal(mtf_state(env, "vol2", "alloc-b"), MOUNT_STATE_UNSTAGING_UNCONFIRMED);
	/* Once nothing is mounted there, the refusal no longer holds it. */
	assert_int_equal(env->fake.table.unmount(&env->fake.table, staging, &e), 0);
	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol2", "alloc-b", &e), 0);
	assert_int_equal(mtf_state(env, "vol2", "alloc-b"), MOUNT_STATE_GONE);
	mt_check_empty(env);
}

/* A crash during a stage the plugin then refuses to undo: recovery finishes it. */
static void test_recover_unconfirmed(void **state)
{
	struct mt_env *env = *state;
	struct mounter_recovery rr;
	char staging[MOUNTER_PATH_MAX];
	struct err e;

	assert_true(mount_store_allowed(MOUNT_STATE_STAGING, MOUNT_STATE_UNSTAGING_UNCONFIRMED));
	assert_false(mount_store_allowed(MOUNT_STATE_STAGING, MOUNT_STATE_UNSTAGING));
	assert_true(mount_store_allowed(MOUNT_STATE_UNSTAGING_UNCONFIRMED, MOUNT_STATE_GONE));
	assert_false(
	    mount_store_allowed(MOUNT_STATE_UNSTAGING_UNCONFIRMED, MOUNT_STATE_PUBLISHING));
	assert_string_equal(mount_state_name(MOUNT_STATE_UNSTAGING_UNCONFIRMED),
			    "unstaging-unconfirmed");
	mtf_plant(env, "vol1", "alloc-a", MOUNT_STATE_STAGING, MOUNT_STATE_STAGING, staging,
		  sizeof(staging));
	env->fake.fail_rpc = CSI_RPC_NODE_UNSTAGE_VOLUME;
	env->fake.fail_code = CSI_FAILED_PRECONDITION;
	assert_int_equal(mounter_recover(env->m, mt_lookup, NULL, env, &rr, &e), 0);
	assert_int_equal(rr.rolled_back, 1);
	assert_int_equal(rr.pending, 0);
	assert_int_equal(env->fake.calls, 1);
	assert_int_equal(mtf_state(env, "vol1", "alloc-a"), MOUNT_STATE_GONE);
	mt_check_empty(env);
}

/*
 * A crash between the intent of a mount (mounting) and its result, the
 * target not mounted: recovery sends NodeUnpublish, then NodeUnstage as
 * for a stage never confirmed (a final refusal with nothing mounted at
 * the staging path does not hold the record). A rollback the plugin
 * cannot answer yet stays in unpublishing-unconfirmed, pending, and the
 * next mount of the pair finishes it first.
 */
static void test_recover_mounting(void **state)
{
	struct mt_env *env = *state;
	struct mounter_recovery rr;
	struct mounter_request req;
	struct mounter_result res;
	char staging[MOUNTER_PATH_MAX];
	struct err e;

	mtf_plant(env, "vol1", "alloc-a", MOUNT_STATE_MOUNTING, MOUNT_STATE_MOUNTING, staging,
		  sizeof(staging));
	env->fake.fail_rpc = CSI_RPC_NODE_UNSTAGE_VOLUME;
	env->fake.fail_code = CSI_FAILED_PRECONDITION;
	assert_int_equal(mounter_recover(env->m, mt_lookup, NULL, env, &rr, &e), 0);
	assert_int_equal(rr.rolled_back, 1);
	assert_int_equal(rr.adopted, 0);
	assert_int_equal(rr.pending, 0);
	assert_int_equal(env->fake.calls, 2); /* NodeUnpublish, NodeUnstage */
	assert_int_equal(mtf_state(env, "vol1", "alloc-a"), MOUNT_STATE_GONE);
	mt_check_empty(env);

	mtf_plant(env, "vol2", "alloc-b", MOUNT_STATE_MOUNTING, MOUNT_STATE_MOUNTING, staging,
		  sizeof(staging));
	env->fake.fail_rpc = CSI_RPC_NODE_UNPUBLISH_VOLUME;
	env->fake.fail_code = CSI_UNAVAILABLE;
	assert_int_equal(mounter_recover(env->m, mt_lookup, NULL, env, &rr, &e), CSID_EUNAVAIL);
	assert_int_equal(rr.pending, 1);
	assert_int_equal(mtf_state(env, "vol2", "alloc-b"), MOUNT_STATE_UNPUBLISHING_UNCONFIRMED);
	env->fake.fail_rpc = -1;
	mt_request(&req, "vol2", "alloc-b");
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), 0);
	assert_int_equal(mtf_state(env, "vol2", "alloc-b"), MOUNT_STATE_PUBLISHED);
	mt_check(env, true);
	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol2", "alloc-b", &e), 0);
	mt_check_empty(env);
}

/* A record an earlier agent left in unstaging: pending for ever, until forced. */
static void test_force_stuck_unstaging(void **state)
{
	struct mt_env *env = *state;
	struct mounter_force_report *rep = calloc(1, sizeof(*rep));
	struct mounter_recovery rr;
	struct mounter_request req;
	struct mounter_result res;
	char staging[MOUNTER_PATH_MAX];
	struct err e;

	assert_non_null(rep);
	mtf_plant(env, "vol1", "alloc-a", MOUNT_STATE_STAGED, MOUNT_STATE_UNSTAGING, staging,
		  sizeof(staging));
	env->fake.fail_rpc = CSI_RPC_NODE_UNSTAGE_VOLUME;
	env->fake.fail_code = CSI_INVALID_ARGUMENT;
	assert_int_equal(mounter_recover(env->m, mt_lookup, NULL, env, &rr, &e), CSID_EUNAVAIL);
	assert_int_equal(rr.pending, 1);
	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol1", "alloc-a", &e), CSID_EINVAL);
	mt_request(&req, "vol1", "alloc-a");
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "finishing earlier operation"));

	assert_int_equal(
	    mounter_unmount_force(env->m, &env->plugin, NULL, "vol1", "alloc-a", rep, &e), 0);
	assert_true(rep->forced);
	assert_int_equal(rep->n_skipped, 1);
	assert_non_null(strstr(rep->skipped[0], "INVALID_ARGUMENT"));
	assert_int_equal(rep->n_detached, 0);
	assert_int_equal(mtf_state(env, "vol1", "alloc-a"), MOUNT_STATE_GONE);
	assert_false(mtf_exists(staging));
	assert_int_equal(
	    mounter_unmount_force(env->m, &env->plugin, NULL, "vol1", "alloc-a", rep, &e),
	    CSID_ENOTFOUND);
	/* The way is clear: the valid mount works. */
	env->fake.fail_rpc = -1;
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), 0);
	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol1", "alloc-a", &e), 0);
	mt_check_empty(env);
	free(rep);
}

/* Unpublish refused, target busy: detached lazily, the stage too, the record dropped. */
static void test_force_busy(void **state)
{
	struct mt_env *env = *state;
	struct mounter_force_report *rep = calloc(1, sizeof(*rep));
	struct mounter_fake_view v;
	struct mounter_request req;
	struct mounter_result res;
	char dir[MOUNTER_PATH_MAX];
	struct err e;

	assert_non_null(rep);
	mt_request(&req, "vol1", "alloc-a");
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), 0);
	snprintf(env->fake.busy_mount, sizeof(env->fake.busy_mount), "%s", res.target);
	env->fake.fail_rpc = CSI_RPC_NODE_UNPUBLISH_VOLUME;
	env->fake.fail_code = CSI_FAILED_PRECONDITION;
	assert_int_equal(
	    mounter_unmount_force(env->m, &env->plugin, NULL, "vol1", "alloc-a", rep, &e), 0);
	assert_true(rep->forced);
	assert_int_equal(rep->n_skipped, 1);
	assert_non_null(strstr(rep->skipped[0], "FAILED_PRECONDITION"));
	assert_int_equal(rep->n_detached, 2);
	assert_string_equal(rep->detached[0], res.target);
	assert_true(rep->lazy[0]);
	assert_string_equal(rep->detached[1], res.source);
	assert_false(rep->lazy[1]);
	assert_int_equal(rep->n_kept, 0);
	assert_int_equal(mounter_fake_view(&env->fake, &v), 0);
	assert_int_equal(v.n_targets, 0);
	assert_int_equal(v.n_staged, 0);
	assert_int_equal(v.counts.unstage, 0);
	assert_false(mtf_exists(res.source));
	mtf_alloc_dir(env, "alloc-a", dir, sizeof(dir));
	assert_false(mtf_exists(dir));
	assert_int_equal(mtf_state(env, "vol1", "alloc-a"), MOUNT_STATE_GONE);
	free(rep);
}

/* A stage another allocation still uses is kept; that allocation goes on working. */
static void test_force_shared_stage(void **state)
{
	struct mt_env *env = *state;
	struct mounter_force_report *rep = calloc(1, sizeof(*rep));
	struct mounter_fake_view v;
	struct mounter_request req;
	struct mounter_result ra, rb;
	struct err e;

	assert_non_null(rep);
	mt_request(&req, "vol1", "alloc-a");
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &ra, &e), 0);
	mt_request(&req, "vol1", "alloc-b");
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &rb, &e), 0);
	env->fake.fail_rpc = CSI_RPC_NODE_UNPUBLISH_VOLUME;
	env->fake.fail_code = CSI_INTERNAL;
	assert_int_equal(
	    mounter_unmount_force(env->m, &env->plugin, NULL, "vol1", "alloc-a", rep, &e), 0);
	assert_int_equal(rep->n_detached, 1);
	assert_string_equal(rep->detached[0], ra.target);
	assert_int_equal(rep->n_kept, 1);
	assert_non_null(strstr(rep->kept[0], "1 other allocation"));
	assert_int_equal(mounter_fake_view(&env->fake, &v), 0);
	assert_int_equal(v.n_staged, 1);
	assert_int_equal(v.n_targets, 1);
	assert_true(mtf_exists(ra.source));
	env->fake.fail_rpc = -1;
	mt_check(env, true);
	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol1", "alloc-b", &e), 0);
	mt_check_empty(env);
	free(rep);
}

/* No plugin at all: nothing is asked, everything is undone by the agent. */
static void test_force_no_plugin(void **state)
{
	struct mt_env *env = *state;
	struct mounter_force_report *rep = calloc(1, sizeof(*rep));
	struct mounter_request req;
	struct mounter_result res;
	struct err e;
	int calls;

	assert_non_null(rep);
	mt_request(&req, "vol1", "alloc-a");
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), 0);
	calls = env->fake.calls;
	assert_int_equal(mounter_unmount_force(env->m, NULL, "node plugin fake.csi is not running",
					       "vol1", "alloc-a", rep, &e),
			 0);
	assert_int_equal(env->fake.calls, calls);
	assert_true(rep->forced);
	assert_non_null(strstr(rep->skipped[0], "is not running"));
	assert_int_equal(rep->n_detached, 2);
	mt_check_empty(env);
	free(rep);
}

/* A plugin that does its job: force is an ordinary unmount, nothing skipped. */
static void test_force_clean(void **state)
{
	struct mt_env *env = *state;
	struct mounter_force_report *rep = calloc(1, sizeof(*rep));
	struct mounter_request req;
	struct mounter_result res;
	struct err e;

	assert_non_null(rep);
	mt_request(&req, "vol1", "alloc-a");
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), 0);
	assert_int_equal(
	    mounter_unmount_force(env->m, &env->plugin, NULL, "vol1", "alloc-a", rep, &e), 0);
	assert_false(rep->forced);
	assert_int_equal(rep->n_skipped + rep->n_detached + rep->n_kept, 0);
	mt_check_empty(env);
	assert_int_equal(mounter_unmount_force(env->m, &env->plugin, NULL, "vol1", "../x", rep, &e),
			 CSID_EINVAL);
	free(rep);
}

/* One volume, one plugin volume: another external ID or plugin is a conflict. */
static void test_conflicting_ids(void **state)
{
	struct mt_env *env = *state;
	struct mounter_request req;
	struct mounter_result res;
	struct mounter_plugin other = env->plugin;
	char dir[MOUNTER_PATH_MAX];
	struct err e;
	int calls;

	mt_request(&req, "vol1", "alloc-a");
	req.external_id = "ext-1";
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), 0);
	calls = env->fake.calls;
	mt_request(&req, "vol1", "alloc-b");
	req.external_id = "ext-2";
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), CSID_ECONFLICT);
	assert_non_null(strstr(e.msg, "\"ext-1\""));
	assert_non_null(strstr(e.msg, "\"ext-2\""));
	assert_non_null(strstr(e.msg, "alloc-a"));
	other.plugin_id = "other.csi";
	req.plugin_id = "other.csi";
	req.external_id = "ext-1";
	assert_int_equal(mounter_mount(env->m, &other, &req, &res, &e), CSID_ECONFLICT);
	assert_non_null(strstr(e.msg, "other.csi"));
	assert_int_equal(env->fake.calls, calls);
	mtf_alloc_dir(env, "alloc-b", dir, sizeof(dir));
	assert_false(mtf_exists(dir));
	/* The same IDs join the stage. */
	mt_request(&req, "vol1", "alloc-b");
	req.external_id = "ext-1";
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), 0);
	mt_check(env, true);
	/* The allocation itself may come back with a new ID once the others are gone. */
	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol1", "alloc-b", &e), 0);
	mt_request(&req, "vol1", "alloc-a");
	req.external_id = "ext-3";
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), CSID_ECONFLICT);
	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol1", "alloc-a", &e), 0);
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), 0);
	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol1", "alloc-a", &e), 0);
	mt_check_empty(env);
}

/* A mount that failed leaves no per-alloc directory, whichever RPC failed. */
static void test_failed_mount_dirs_removed(void **state)
{
	struct mt_env *env = *state;
	struct mounter_request req;
	struct mounter_result res;
	char dir[MOUNTER_PATH_MAX];
	struct err e;

	for (int at = 0; at < 2; at++) {
		env->fake.calls = 0;
		env->fake.fail_at = at; /* the stage, then the publish */
		env->fake.fail_code = CSI_RESOURCE_EXHAUSTED;
		mt_request(&req, "vol1", "alloc-a");
		assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e),
				 CSID_EEXHAUSTED);
		assert_int_equal(mtf_state(env, "vol1", "alloc-a"), MOUNT_STATE_GONE);
		mtf_alloc_dir(env, "alloc-a", dir, sizeof(dir));
		assert_false(mtf_exists(dir));
		mt_check_empty(env);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_refused_stage_and_unstage, mt_setup, mt_teardown),
	    cmocka_unit_test_setup_teardown(test_unconfirmed_stage_kept, mt_setup, mt_teardown),
	    cmocka_unit_test_setup_teardown(test_recover_unconfirmed, mt_setup, mt_teardown),
	    cmocka_unit_test_setup_teardown(test_recover_mounting, mt_setup, mt_teardown),
	    cmocka_unit_test_setup_teardown(test_force_stuck_unstaging, mt_setup, mt_teardown),
	    cmocka_unit_test_setup_teardown(test_force_busy, mt_setup, mt_teardown),
	    cmocka_unit_test_setup_teardown(test_force_shared_stage, mt_setup, mt_teardown),
	    cmocka_unit_test_setup_teardown(test_force_no_plugin, mt_setup, mt_teardown),
	    cmocka_unit_test_setup_teardown(test_force_clean, mt_setup, mt_teardown),
	    cmocka_unit_test_setup_teardown(test_conflicting_ids, mt_setup, mt_teardown),
	    cmocka_unit_test_setup_teardown(test_failed_mount_dirs_removed, mt_setup, mt_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
