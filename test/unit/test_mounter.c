/*
 * Unit tests of the volume mounter with the fake node plugin and mount
 * table of test/lib/mounter_fake.h: mounts with and without
 * STAGE_UNSTAGE, two allocations sharing one staging path, every RPC of a
 * mount/unmount sequence failing in turn (then a retry), recovery after a
 * restart (adopt, lost mounts, orphans, a missing plugin), bad requests,
 * concurrent calls, and the directories kept for reuse (parked). The
 * kill -9 tests are in test_mounter_crash.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/mounter.h"
#include "csi/csi_rules.h"
#include "util/mkdir_p.h"
#include "mounter_fake.h"
#include "mounter_test.h"

static void test_mount_with_stage(void **state)
{
	struct mt_env *env = *state;
	struct mounter_fake_view v;
	struct mounter_result res;
	struct mounter_request req;
	struct mount_record *rec = NULL;
	struct err e;
	bool has = false;
	char parent[MOUNTER_PATH_MAX];

	mt_request(&req, "vol1", "alloc-a");
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), 0);
	assert_false(res.is_device);
	assert_non_null(strstr(res.source, "/mounts/staging/fake.csi/vol1/"
					   "rw-file-system-single-node-multi-writer"));
	assert_non_null(strstr(res.target, "/mounts/per-alloc/alloc-a/vol1/"
					   "rw-file-system-single-node-multi-writer"));
	assert_int_equal(env->fake.last_timeout_ms, MT_TIMEOUT_MS);
	assert_int_equal(mounter_fake_view(&env->fake, &v), 0);
	assert_int_equal(v.counts.stage, 1);
	assert_int_equal(v.counts.publish, 1);
	assert_int_equal(v.n_staged, 1);
	assert_int_equal(v.n_targets, 1);
	assert_string_equal(v.target_stage[0], res.source);
	/* The agent made the staging dir and the target's parent, not the target. */
	assert_int_equal(access(res.source, F_OK), 0);
	assert_int_not_equal(access(res.target, F_OK), 0);
	snprintf(parent, sizeof(parent), "%s", res.target);
	*strrchr(parent, '/') = '\0';
	assert_int_equal(access(parent, F_OK), 0);
	assert_int_equal(mounter_has_mount(env->m, "vol1", "alloc-a", &has, &e), 0);
	assert_true(has);
	assert_int_equal(mounter_get(env->m, "vol1", "alloc-a", &rec, &e), 0);
	assert_string_equal(rec->plugin_id, MT_PLUGIN);
	assert_string_equal(rec->target_path, res.target);
	assert_int_equal(rec->state, MOUNT_STATE_PUBLISHED);
	mount_record_free(rec);
	assert_int_equal(mounter_get(env->m, "vol1", "alloc-b", &rec, &e), CSID_ENOTFOUND);
	assert_int_equal(mounter_get(env->m, "vol1", "../x", &rec, &e), CSID_EINVAL);
	mt_check(env, true);

	/* Mounting again is idempotent: no RPC. */
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), 0);
	assert_int_equal(env->fake.calls, 2);
	/* Another usage for the same allocation is a conflict. */
	req.usage.read_only = true;
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), CSID_ECONFLICT);
	assert_int_equal(env->fake.calls, 2);

	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol1", "alloc-a", &e), 0);
	assert_int_equal(mounter_fake_view(&env->fake, &v), 0);
	assert_int_equal(v.counts.unpublish, 1);
	assert_int_equal(v.counts.unstage, 1);
	assert_int_equal(mounter_has_mount(env->m, "vol1", "alloc-a", &has, &e), 0);
	assert_false(has);
	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol1", "alloc-a", &e),
			 CSID_ENOTFOUND);
	/* The directories the agent made stay, empty, for the next mount (parked)... */
	assert_int_equal(access(res.source, F_OK), 0);
	assert_int_equal(access(parent, F_OK), 0);
	/* ... and closing the mounter removes them. */
	mt_reopen(env);
	assert_int_not_equal(access(res.source, F_OK), 0);
	assert_int_not_equal(access(parent, F_OK), 0);
	mt_check_empty(env);
}

/* The state machine of mount_store.h: the two-commit mount, and the older agents' states. */
static void test_state_machine(void **state)
{
	assert_true(mount_store_allowed(MOUNT_STATE_NEW, MOUNT_STATE_MOUNTING));
	assert_true(mount_store_allowed(MOUNT_STATE_NEW, MOUNT_STATE_PUBLISHING));
	assert_true(mount_store_allowed(MOUNT_STATE_MOUNTING, MOUNT_STATE_PUBLISHED));
	assert_true(mount_store_allowed(MOUNT_STATE_MOUNTING, MOUNT_STATE_UNSTAGING_UNCONFIRMED));
	assert_true(mount_store_allowed(MOUNT_STATE_MOUNTING, MOUNT_STATE_UNPUBLISHING));
	assert_true(
	    mount_store_allowed(MOUNT_STATE_MOUNTING, MOUNT_STATE_UNPUBLISHING_UNCONFIRMED));
	assert_true(mount_store_allowed(MOUNT_STATE_UNPUBLISHING_UNCONFIRMED,
					MOUNT_STATE_UNSTAGING_UNCONFIRMED));
	assert_true(mount_store_allowed(MOUNT_STATE_UNPUBLISHING_UNCONFIRMED, MOUNT_STATE_GONE));
	assert_true(mount_store_allowed(MOUNT_STATE_NEW, MOUNT_STATE_STAGING));
	assert_true(mount_store_allowed(MOUNT_STATE_STAGING, MOUNT_STATE_PUBLISHING));
	assert_true(mount_store_allowed(MOUNT_STATE_STAGING, MOUNT_STATE_STAGED));
	assert_true(mount_store_allowed(MOUNT_STATE_STAGED, MOUNT_STATE_PUBLISHING));
	assert_true(mount_store_allowed(MOUNT_STATE_PUBLISHING, MOUNT_STATE_PUBLISHED));
	assert_true(mount_store_allowed(MOUNT_STATE_UNPUBLISHING, MOUNT_STATE_UNSTAGING));
	/* Never straight to published, nor from staging past the publish. */
	assert_false(mount_store_allowed(MOUNT_STATE_NEW, MOUNT_STATE_PUBLISHED));
	assert_false(mount_store_allowed(MOUNT_STATE_STAGING, MOUNT_STATE_PUBLISHED));
	assert_false(mount_store_allowed(MOUNT_STATE_STAGED, MOUNT_STATE_PUBLISHED));
	assert_false(mount_store_allowed(MOUNT_STATE_PUBLISHED, MOUNT_STATE_GONE));
	/* A mount that saw nothing confirmed never claims a confirmed stage on the way down. */
	assert_false(mount_store_allowed(MOUNT_STATE_MOUNTING, MOUNT_STATE_UNSTAGING));
	assert_false(mount_store_allowed(MOUNT_STATE_MOUNTING, MOUNT_STATE_GONE));
	assert_false(
	    mount_store_allowed(MOUNT_STATE_UNPUBLISHING_UNCONFIRMED, MOUNT_STATE_UNSTAGING));
	assert_false(mount_store_allowed(MOUNT_STATE_GONE, MOUNT_STATE_STAGING));
	assert_false(mount_store_allowed(MOUNT_STATE_COUNT_, MOUNT_STATE_STAGING));
	assert_string_equal(mount_state_name(MOUNT_STATE_PUBLISHING), "publishing");
	assert_string_equal(mount_state_name(MOUNT_STATE_MOUNTING), "mounting");
	assert_string_equal(mount_state_name(MOUNT_STATE_UNPUBLISHING_UNCONFIRMED),
			    "unpublishing-unconfirmed");
	assert_string_equal(mount_state_name(MOUNT_STATE_COUNT_), "invalid");
}

/* How many entries (other than . and ..) the directory dir has; -1 when it cannot be read. */
static int mt_count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((de = readdir(d)) != NULL)
		n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
	closedir(d);
	return n;
}

/* Mounts and unmounts vol for alloc, returning the paths into res. */
static void mt_cycle(struct mt_env *env, const char *vol, const char *alloc,
		     struct mounter_result *res)
{
	struct mounter_request req;
	struct err e;

	mt_request(&req, vol, alloc);
	if (mounter_mount(env->m, &env->plugin, &req, res, &e) != 0)
		fail_msg("mount %s/%s: %s", vol, alloc, e.msg);
	if (mounter_unmount(env->m, &env->plugin, vol, alloc, &e) != 0)
		fail_msg("unmount %s/%s: %s", vol, alloc, e.msg);
}

/*
 * Parked directories: reused by the next mount of the same path, at most
 * MOUNTER_PARK_MAX of them (the oldest go first), and the ones a crashed
 * agent left are removed by the first recovery, which keeps what a record
 * names and never removes content.
 */
static void test_parked_dirs(void **state)
{
	struct mt_env *env = *state;
	struct mounter_recovery rep;
	struct mounter_result res, first, live;
	struct mounter_request req;
	char path[MOUNTER_PATH_MAX], keep[MOUNTER_PATH_MAX], junk[MOUNTER_PATH_MAX];
	char per_alloc[MOUNTER_PATH_MAX], alloc[32];
	FILE *fp;
	struct err e;

	snprintf(per_alloc, sizeof(per_alloc), "%s/mounts/per-alloc", env->real_data);
	mt_cycle(env, "vol1", "alloc-a", &first);
	mt_cycle(env, "vol1", "alloc-a", &res);
	assert_string_equal(res.target, first.target);
	assert_int_equal(access(first.source, F_OK), 0);
	snprintf(path, sizeof(path), "%s/alloc-a/vol1", per_alloc);
	assert_int_equal(access(path, F_OK), 0);
	/* Another MOUNTER_PARK_MAX allocations push alloc-a's directory out. */
	for (int i = 0; i < MOUNTER_PARK_MAX; i++) {
		snprintf(alloc, sizeof(alloc), "alloc-%02d", i);
		mt_cycle(env, "vol1", alloc, &res);
	}
	assert_int_not_equal(access(path, F_OK), 0);
	snprintf(path, sizeof(path), "%s/alloc-a", per_alloc);
	assert_int_not_equal(access(path, F_OK), 0);
	assert_true(mt_count_entries(per_alloc) > 0);
	assert_true(mt_count_entries(per_alloc) <= MOUNTER_PARK_MAX);
	assert_int_equal(access(first.source, F_OK), 0);
	mt_check_empty(env);

	/* A live mount, then what a crashed agent could leave behind. */
	mt_request(&req, "vol2", "alloc-b");
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &live, &e), 0);
	mt_reopen(env);
	assert_int_equal(mt_count_entries(per_alloc), 1);
	snprintf(junk, sizeof(junk), "%s/mounts/staging/" MT_PLUGIN "/vol9/rw-x", env->real_data);
	assert_int_equal(mkdir_p(junk, &e), 0);
	snprintf(junk, sizeof(junk), "%s/ghost/vol9/target", per_alloc);
	assert_int_equal(mkdir_p(junk, &e), 0);
	snprintf(keep, sizeof(keep), "%s/full/vol9/target", per_alloc);
	assert_int_equal(mkdir_p(keep, &e), 0);
	snprintf(path, sizeof(path), "%s/data", keep);
	fp = fopen(path, "w");
	assert_non_null(fp);
	fclose(fp);
	assert_int_equal(mounter_recover(env->m, mt_lookup, NULL, env, &rep, &e), 0);
	assert_int_equal(rep.adopted, 1);
	snprintf(path, sizeof(path), "%s/mounts/staging/" MT_PLUGIN "/vol9", env->real_data);
	assert_int_not_equal(access(path, F_OK), 0);
	snprintf(path, sizeof(path), "%s/ghost", per_alloc);
	assert_int_not_equal(access(path, F_OK), 0);
	/* Content is never removed; what the record names stays. */
	snprintf(path, sizeof(path), "%s/data", keep);
	assert_int_equal(access(path, F_OK), 0);
	assert_int_equal(access(live.source, F_OK), 0);
	snprintf(path, sizeof(path), "%s", live.target);
	*strrchr(path, '/') = '\0';
	assert_int_equal(access(path, F_OK), 0);
	assert_int_equal(mt_count_entries(per_alloc), 2); /* alloc-b and full */
	mt_check(env, true);
	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol2", "alloc-b", &e), 0);
	mt_check_empty(env);
}

static void test_mount_without_stage(void **state)
{
	struct mt_env *env = *state;
	struct mounter_fake_view v;
	struct mounter_result res;
	struct mounter_request req;
	struct err e;

	env->plugin.has_stage_unstage = false;
	env->fake.needs_stage = false;
	mt_request(&req, "vol1", "alloc-a");
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), 0);
	assert_string_equal(res.source, res.target);
	assert_int_equal(mounter_fake_view(&env->fake, &v), 0);
	assert_int_equal(v.counts.stage, 0);
	assert_int_equal(v.counts.publish, 1);
	mt_check(env, true);
	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol1", "alloc-a", &e), 0);
	assert_int_equal(mounter_fake_view(&env->fake, &v), 0);
	assert_int_equal(v.counts.unstage, 0);
	mt_check_empty(env);
}

/* vol1's record for alloc-a: its claim flow mark. */
static bool mt_claim_mark(struct mt_env *env)
{
	struct mount_record *r = NULL;
	struct err e;
	bool on;

	assert_int_equal(mounter_get(env->m, "vol1", "alloc-a", &r, &e), 0);
	on = r->claimed;
	mount_record_free(r);
	return on;
}

/*
 * The claim flow's mark is written with the mount's intent (one write
 * for the mount's first row) and read back; a repeated mount sets it to
 * what the repeat asks, with no RPC; the mark goes with the record.
 */
static void test_claim_mark(void **state)
{
	struct mt_env *env = *state;
	struct mounter_fake_view v;
	struct mounter_result res;
	struct mounter_request req;
	struct err e;

	mt_request(&req, "vol1", "alloc-a");
	req.claimed = true;
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), 0);
	assert_true(mt_claim_mark(env));
	req.claimed = false;
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), 0);
	assert_false(mt_claim_mark(env));
	req.claimed = true;
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), 0);
	assert_true(mt_claim_mark(env));
	/* A reopened mounter reads the same mark. */
	mt_reopen(env);
	assert_true(mt_claim_mark(env));
	assert_int_equal(mounter_fake_view(&env->fake, &v), 0);
	assert_int_equal(v.counts.stage, 1);
	assert_int_equal(v.counts.publish, 1);
	mt_check(env, true);
	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol1", "alloc-a", &e), 0);
	mt_check_empty(env);
}

/*
 * NodeExpandVolume after a controller expand: a fault is an error the
 * caller retries, the retry grows the volume once for its shared stage,
 * with the published target and the staging path; a plugin without
 * EXPAND_VOLUME is not called and that counts as done; a volume not
 * mounted here is not found.
 */
static void test_node_expand(void **state)
{
	struct mt_env *env = *state;
	struct mounter_result ra, rb;
	struct mounter_request req;
	struct err e;

	mt_request(&req, "vol1", "alloc-a");
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &ra, &e), 0);
	mt_request(&req, "vol1", "alloc-b");
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &rb, &e), 0);

	env->plugin.has_node_expand = true;
	env->fake.fail_rpc = CSI_RPC_NODE_EXPAND_VOLUME;
	env->fake.fail_code = CSI_UNAVAILABLE;
	assert_int_equal(mounter_expand(env->m, &env->plugin, "vol1", 4096, &e), CSID_EUNAVAIL);
	assert_non_null(strstr(e.msg, "node expand vol1"));
	assert_int_equal(env->fake.expands, 0);

	env->fake.fail_rpc = -1;
	assert_int_equal(mounter_expand(env->m, &env->plugin, "vol1", 4096, &e), 0);
	assert_int_equal(env->fake.expands, 1);
	assert_int_equal(env->fake.expand_bytes, 4096);
	assert_string_equal(env->fake.expand_stage, ra.source);
	assert_true(strcmp(env->fake.expand_path, ra.target) == 0 ||
		    strcmp(env->fake.expand_path, rb.target) == 0);

	env->plugin.has_node_expand = false;
	assert_int_equal(mounter_expand(env->m, &env->plugin, "vol1", 8192, &e), 0);
	assert_int_equal(env->fake.expands, 1);

	assert_int_equal(mounter_expand(env->m, &env->plugin, "vol2", 8192, &e), CSID_ENOTFOUND);
	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol1", "alloc-a", &e), 0);
	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol1", "alloc-b", &e), 0);
	mt_check_empty(env);
}

static void test_block_device(void **state)
{
	struct mt_env *env = *state;
	struct mounter_result res;
	struct mounter_request req;
	struct err e;

	mt_request(&req, "vol1", "alloc-a");
	req.usage.attachment = MOUNT_ATTACH_BLOCK_DEVICE;
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), CSID_EINVAL);
	req.usage.fs_type = NULL;
	req.usage.n_mount_flags = 0;
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), 0);
	assert_true(res.is_device);
	assert_non_null(strstr(res.target, "/rw-block-device-single-node-multi-writer"));
	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol1", "alloc-a", &e), 0);
	mt_check_empty(env);
}

static void test_shared_staging(void **state)
{
	struct mt_env *env = *state;
	struct mounter_fake_view v;
	struct mounter_result ra, rb;
	struct mounter_request req;
	struct err e;

	mt_request(&req, "vol1", "alloc-a");
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &ra, &e), 0);
	mt_request(&req, "vol1", "alloc-b");
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &rb, &e), 0);
	assert_string_equal(ra.source, rb.source);
	assert_string_not_equal(ra.target, rb.target);
	assert_int_equal(mounter_fake_view(&env->fake, &v), 0);
	assert_int_equal(v.counts.stage, 1);
	assert_int_equal(v.counts.publish, 2);
	mt_check(env, true);

	/* Unmounting one keeps the stage. */
	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol1", "alloc-a", &e), 0);
	assert_int_equal(mounter_fake_view(&env->fake, &v), 0);
	assert_int_equal(v.counts.unstage, 0);
	assert_int_equal(v.n_staged, 1);
	assert_int_equal(v.n_targets, 1);
	assert_int_equal(access(rb.source, F_OK), 0);
	mt_check(env, true);

	/* The second unmount unstages. */
	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol1", "alloc-b", &e), 0);
	assert_int_equal(mounter_fake_view(&env->fake, &v), 0);
	assert_int_equal(v.counts.unstage, 1);
	mt_check_empty(env);
}

/*
 * Runs the standard sequence (mount A, mount B, unmount A, unmount B: six
 * RPCs with staging) with RPC number k failing fail_count times in a row
 * with code. An op that fails must leave consistent state (everything
 * mounted is recorded, no protocol violation) and succeed when retried.
 */
static void mt_failure_run(int k, int code, int fail_count)
{
	struct mt_env env;
	struct err e;
	int failed = 0;

	mt_env_open(&env, true);
	env.fake.fail_at = k;
	env.fake.fail_count = fail_count;
	env.fake.fail_code = code;
	for (int op = 0; op < MT_OPS; op++) {
		int rc = mt_run_op(&env, op, &e);

		for (int attempt = 0; rc != 0 && attempt < 3; attempt++) {
			failed++;
			if (rc != csi_status_to_err(code))
				fail_msg("k=%d code=%d op=%d: %s", k, code, op, e.msg);
			mt_check(&env, false);
			rc = mt_run_op(&env, op, &e);
		}
		if (rc != 0)
			fail_msg("k=%d code=%d op=%d: retries failed: %s", k, code, op, e.msg);
		mt_check(&env, true);
	}
	assert_true(failed >= 1);
	mt_check_empty(&env);
	mt_env_close(&env);
}

static void test_every_rpc_failing(void **state)
{
	static const int codes[] = {CSI_DEADLINE_EXCEEDED, CSI_UNAVAILABLE, CSI_INTERNAL,
				    CSI_ABORTED, CSI_RESOURCE_EXHAUSTED};

	for (size_t c = 0; c < sizeof(codes) / sizeof(*codes); c++)
		for (int k = 0; k < MT_RPCS_STAGED; k++) {
			mt_failure_run(k, codes[c], 1);
			/* The rollback (or the next step of an unmount) fails too. */
			mt_failure_run(k, codes[c], 2);
		}
}

static void test_not_found_is_done(void **state)
{
	struct mt_env *env = *state;
	struct mounter_result res;
	struct mounter_request req;
	struct err e;

	mt_request(&req, "vol1", "alloc-a");
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), 0);
	env->fake.fail_at = env->fake.calls;
	env->fake.fail_count = 2;
	env->fake.fail_code = CSI_NOT_FOUND;
	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol1", "alloc-a", &e), 0);
	assert_int_equal(env->fake.calls, 4);
	struct mount_record **rs = NULL;
	size_t n = 9;

	assert_int_equal(mounter_list(env->m, &rs, &n, &e), 0);
	assert_int_equal(n, 0);
	mount_records_free(rs, n);
	/* NOT_FOUND on a stage is a failure, rolled back. */
	env->fake.fail_at = env->fake.calls;
	env->fake.fail_count = 1;
	mt_request(&req, "vol2", "alloc-a");
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), CSID_ENOTFOUND);
	assert_non_null(strstr(e.msg, "node stage: plugin fake.csi: NOT_FOUND"));
}

static void test_bad_requests(void **state)
{
	struct mt_env *env = *state;
	static const char *const hostile[] = {"..", "a/b", "/", ".", "a..b", "tab\tx", "nl\n", ""};
	struct mounter_result res;
	struct mounter_request req;
	struct mounter_plugin other = env->plugin;
	struct mount_kv bad_ctx[] = {{"k", NULL}};
	static char flag[5000];
	const char *const flags[] = {flag};
	char big[1025];
	struct err e;

	for (size_t i = 0; i < sizeof(hostile) / sizeof(*hostile); i++) {
		mt_request(&req, hostile[i], "alloc-a");
		assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), CSID_EINVAL);
		mt_request(&req, "vol1", hostile[i]);
		assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), CSID_EINVAL);
		assert_int_equal(mounter_unmount(env->m, &env->plugin, hostile[i], "a", &e),
				 CSID_EINVAL);
	}
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	mt_request(&req, big, "alloc-a");
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), CSID_EINVAL);
	mt_request(&req, "vol1", "alloc-a");
	req.external_id = "";
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), CSID_EINVAL);
	mt_request(&req, "vol1", "alloc-a");
	req.publish_context = bad_ctx;
	req.n_publish_context = 1;
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), CSID_EINVAL);
	mt_request(&req, "vol1", "alloc-a");
	memset(flag, 'f', sizeof(flag) - 1);
	flag[sizeof(flag) - 1] = '\0';
	req.usage.mount_flags = flags;
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), CSID_EINVAL);
	assert_null(strstr(e.msg, "fff"));
	mt_request(&req, "vol1", "alloc-a");
	req.usage.access = MOUNT_ACCESS_COUNT_;
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), CSID_EINVAL);
	/* The plugin must be the one the request names, and the one that mounted. */
	mt_request(&req, "vol1", "alloc-a");
	other.plugin_id = "other.csi";
	assert_int_equal(mounter_mount(env->m, &other, &req, &res, &e), CSID_EINVAL);
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), 0);
	assert_int_equal(mounter_unmount(env->m, &other, "vol1", "alloc-a", &e), CSID_EINVAL);
	/* Secrets never reach the records or the error messages. */
	assert_null(strstr(e.msg, MT_SECRET));
	mt_assert_no_secret_in_db(env);
	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol1", "alloc-a", &e), 0);
	assert_int_equal(env->fake.calls, 4);
	mt_check_empty(env);
}

static int mt_lookup_fail(void *ctx, const char *plugin_id, struct mounter_plugin *out,
			  struct err *e)
{
	return err_set(e, CSID_EUNAVAIL, "not running");
}

static void test_recover_adopt_lost_orphan(void **state)
{
	struct mt_env *env = *state;
	struct mounter_recovery rep;
	struct mounter_result ra, rb;
	struct mounter_request req;
	struct mounter_fake_view v;
	char orphan[MOUNTER_PATH_MAX], outside[MOUNTER_PATH_MAX];
	struct err e;

	mt_request(&req, "vol1", "alloc-a");
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &ra, &e), 0);
	mt_request(&req, "vol1", "alloc-b");
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &rb, &e), 0);
	mt_reopen(env);
	/* B's mount vanished while the agent was down; an orphan appeared. */
	assert_int_equal(env->fake.table.unmount(&env->fake.table, rb.target, &e), 0);
	snprintf(orphan, sizeof(orphan), "%s/mounts/per-alloc/ghost/vol9/x", env->real_data);
	snprintf(outside, sizeof(outside), "%s/elsewhere", env->dir);
	assert_int_equal(mounter_fake_add_orphan(&env->fake, orphan), 0);
	assert_int_equal(mounter_fake_add_orphan(&env->fake, outside), 0);
	assert_int_equal(mounter_recover(env->m, mt_lookup, NULL, env, &rep, &e), 0);
	assert_int_equal(rep.adopted, 1);
	assert_int_equal(rep.lost, 1);
	assert_int_equal(rep.orphans, 1);
	assert_int_equal(rep.pending, 0);
	assert_int_equal(mounter_fake_view(&env->fake, &v), 0);
	assert_int_equal(v.n_staged, 1);
	assert_int_equal(v.n_targets, 2); /* A and the mount outside the mounts dir */
	assert_int_equal(v.counts.stage, 1);
	assert_int_equal(env->fake.table.unmount(&env->fake.table, outside, &e), 0);
	mt_check(env, true);
	/* A second recovery changes nothing. */
	assert_int_equal(mounter_recover(env->m, mt_lookup, NULL, env, &rep, &e), 0);
	assert_int_equal(rep.adopted, 1);
	assert_int_equal(rep.lost + rep.orphans + rep.rolled_back + rep.finished, 0);
	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol1", "alloc-a", &e), 0);
	mt_check_empty(env);
}

static void test_recover_plugin_missing(void **state)
{
	struct mt_env *env = *state;
	struct mounter_recovery rep;
	struct mounter_result res;
	struct mounter_request req;
	struct err e;

	mt_request(&req, "vol1", "alloc-a");
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), 0);
	/* The unmount fails at NodeUnpublish: the record stays unpublishing. */
	env->fake.fail_at = env->fake.calls;
	env->fake.fail_code = CSI_UNAVAILABLE;
	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol1", "alloc-a", &e),
			 CSID_EUNAVAIL);
	mt_reopen(env);
	assert_int_equal(mounter_recover(env->m, mt_lookup_fail, NULL, env, &rep, &e),
			 CSID_EUNAVAIL);
	assert_int_equal(rep.pending, 1);
	assert_non_null(strstr(e.msg, "plugin fake.csi"));
	mt_check(env, false);
	assert_int_equal(mounter_recover(env->m, mt_lookup, NULL, env, &rep, &e), 0);
	assert_int_equal(rep.finished, 1);
	assert_int_equal(rep.pending, 0);
	mt_check_empty(env);
}

struct mt_thread {
	struct mt_env *env;
	char vol[16];
	char alloc[16];
	int rc;
};

static void *mt_thread_main(void *arg)
{
	struct mt_thread *t = arg;
	struct mounter_result res;
	struct mounter_request req;
	struct err e;

	mt_request(&req, t->vol, t->alloc);
	t->rc = mounter_mount(t->env->m, &t->env->plugin, &req, &res, &e);
	if (t->rc == 0)
		t->rc = mounter_unmount(t->env->m, &t->env->plugin, t->vol, t->alloc, &e);
	if (t->rc == 0)
		t->rc = mounter_mount(t->env->m, &t->env->plugin, &req, &res, &e);
	return NULL;
}

static void test_concurrent(void **state)
{
	struct mt_env *env = *state;
	struct mt_thread t[8];
	pthread_t th[8];
	struct mounter_fake_view v;
	struct mount_record **rs = NULL;
	size_t n = 0;
	struct err e;

	env->fake.delay_ms = 2;
	for (int i = 0; i < 8; i++) {
		t[i].env = env;
		/* Four allocations share vol-s; four more use a volume each. */
		snprintf(t[i].vol, sizeof(t[i].vol), i < 4 ? "vol-s" : "vol-%d", i);
		snprintf(t[i].alloc, sizeof(t[i].alloc), "alloc-%d", i);
		assert_int_equal(pthread_create(&th[i], NULL, mt_thread_main, &t[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(t[i].rc, 0);
	}
	assert_int_equal(mounter_fake_view(&env->fake, &v), 0);
	assert_int_equal(v.counts.overlap, 0);
	assert_int_equal(v.n_staged, 5);
	assert_int_equal(v.n_targets, 8);
	mt_check(env, true);
	assert_int_equal(mounter_list(env->m, &rs, &n, &e), 0);
	assert_int_equal(n, 8);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(
		    mounter_unmount(env->m, &env->plugin, rs[i]->volume_id, rs[i]->alloc_id, &e),
		    0);
	mount_records_free(rs, n);
	mt_check_empty(env);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_mount_with_stage, mt_setup, mt_teardown),
	    cmocka_unit_test_setup_teardown(test_mount_without_stage, mt_setup, mt_teardown),
	    cmocka_unit_test_setup_teardown(test_claim_mark, mt_setup, mt_teardown),
	    cmocka_unit_test_setup_teardown(test_block_device, mt_setup, mt_teardown),
	    cmocka_unit_test_setup_teardown(test_node_expand, mt_setup, mt_teardown),
	    cmocka_unit_test_setup_teardown(test_shared_staging, mt_setup, mt_teardown),
	    cmocka_unit_test_setup_teardown(test_every_rpc_failing, mt_scratch_setup,
					    mt_scratch_teardown),
	    cmocka_unit_test_setup_teardown(test_not_found_is_done, mt_setup, mt_teardown),
	    cmocka_unit_test_setup_teardown(test_bad_requests, mt_setup, mt_teardown),
	    cmocka_unit_test_setup_teardown(test_recover_adopt_lost_orphan, mt_setup, mt_teardown),
	    cmocka_unit_test_setup_teardown(test_recover_plugin_missing, mt_setup, mt_teardown),
	    cmocka_unit_test_setup_teardown(test_concurrent, mt_setup, mt_teardown),
	    cmocka_unit_test_setup_teardown(test_parked_dirs, mt_setup, mt_teardown),
	    cmocka_unit_test(test_state_machine),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
