/*
 * kill -9 tests of the volume mounter. For every node RPC k of the
 * standard sequence (mount A, mount B, unmount A, unmount B of one volume)
 * and for both sides of it (the plugin did nothing yet / the plugin acted
 * but its answer was lost), a child process (this program re-executed
 * with --child) runs the sequence with the fake plugin set to _exit() at
 * that point; the records are in SQLite and the plugin's view in the fake
 * state file, so both survive. The parent then restarts the mounter on the
 * same files, recovers, and checks: nothing pending, every record
 * published, every mount and stage owned by a record, no stage of a path
 * already staged, no unstage under a live publish. Then it redoes the
 * interrupted operation and the rest of the sequence, and checks that
 * everything ends unmounted with no record left. Before recovering, the
 * records are checked against the plugin's view: never ahead of it, never
 * behind (mt_check_at_crash), which holds the two-commit mount (mounting:
 * stage and publish may be in flight) to the rule. A third test makes RPC k fail and kills the
 * child at RPC k+1, inside a rollback or a retry.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/mounter.h"
#include "mounter_fake.h"
#include "mounter_test.h"

extern char **environ;

/*
 * The child: runs the sequence, writing the op index it starts to
 * <dir>/progress. With fail_at >= 0, that RPC fails (UNAVAILABLE) and the
 * failed op is retried once, as a client would.
 */
static int mt_child(const char *dir, bool stage, int crash_at, bool after, int fail_at)
{
	struct mt_env env;
	char progress[400];
	struct err e;

	mt_env_attach(&env, dir, stage);
	env.fake.crash_at = crash_at;
	env.fake.crash_after = after;
	env.fake.fail_at = fail_at;
	env.fake.fail_code = CSI_UNAVAILABLE;
	snprintf(progress, sizeof(progress), "%s/progress", dir);
	for (int op = 0; op < MT_OPS; op++) {
		if (mt_progress_write(progress, op) != 0)
			return 2;
		if (mt_run_op(&env, op, &e) != 0 && (fail_at < 0 || mt_run_op(&env, op, &e) != 0)) {
			fprintf(stderr, "child op %d: %s\n", op, e.msg);
			return 3;
		}
	}
	mounter_close(env.m);
	mounter_fake_fini(&env.fake);
	return 0;
}

/* Runs the child for (crash_at, after, fail_at); returns its exit status. */
static int mt_spawn(const char *dir, bool stage, int crash_at, bool after, int fail_at)
{
	char self[PATH_MAX];
	char k[16], f[16];
	char *argv[8];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	pid_t pid;
	int status = 0;

	assert_true(n > 0);
	self[n] = '\0';
	snprintf(k, sizeof(k), "%d", crash_at);
	snprintf(f, sizeof(f), "%d", fail_at);
	argv[0] = self;
	argv[1] = "--child";
	argv[2] = (char *)dir;
	argv[3] = stage ? "stage" : "plain";
	argv[4] = k;
	argv[5] = after ? "after" : "before";
	argv[6] = f;
	argv[7] = NULL;
	assert_int_equal(posix_spawn(&pid, self, NULL, NULL, argv, environ), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static bool mt_crash_in(char (*list)[MOUNTER_FAKE_PATH], int n, const char *path)
{
	for (int i = 0; i < n; i++)
		if (strcmp(list[i], path) == 0)
			return true;
	return false;
}

/*
 * Every record carries the claim flow's mark of the mount that wrote it
 * (alloc-a's mount is the claim flow's, alloc-b's is not), from the
 * intent on: a mount recovered after a crash keeps it.
 */
static void mt_check_marks(struct mt_env *env, int k, bool after)
{
	struct mount_record **rs = NULL;
	size_t n = 0;
	struct err e;

	assert_int_equal(mounter_list(env->m, &rs, &n, &e), 0);
	for (size_t i = 0; i < n; i++)
		for (int op = 0; op < MT_OPS; op++)
			if (mt_ops[op].mount && strcmp(mt_ops[op].alloc, rs[i]->alloc_id) == 0 &&
			    rs[i]->claimed != mt_ops[op].claimed)
				fail_msg("k=%d %s: %s/%s (%s) claim mark %d", k,
					 after ? "after" : "before", rs[i]->volume_id,
					 rs[i]->alloc_id, mount_state_name(rs[i]->state),
					 rs[i]->claimed);
	mount_records_free(rs, n);
}

/*
 * The records as the crash left them, before any recovery, against what
 * the plugin did: a record is never ahead of the plugin (staged,
 * publishing or published only once the stage is done; published only
 * once the target is mounted) nor behind it (a mounted target's record is
 * at least mounting or publishing). This is what "recorded before and
 * after each RPC" means, with one intent before the first RPC of a mount
 * (mounting) and one result after its last.
 */
static void mt_check_at_crash(struct mt_env *env, int k, bool after)
{
	static struct mounter_fake_view v;
	struct mount_record **rs = NULL;
	size_t n = 0;
	struct err e;

	mt_check(env, false);
	mt_check_marks(env, k, after);
	assert_int_equal(mounter_list(env->m, &rs, &n, &e), 0);
	assert_int_equal(mounter_fake_view(&env->fake, &v), 0);
	for (size_t i = 0; i < n; i++) {
		const struct mount_record *r = rs[i];
		bool up = r->state == MOUNT_STATE_STAGED || r->state == MOUNT_STATE_PUBLISHING ||
			  r->state == MOUNT_STATE_PUBLISHED;
		bool mounted = mt_crash_in(v.targets, v.n_targets, r->target_path);

		if (up && r->staging_path && !mt_crash_in(v.staged, v.n_staged, r->staging_path))
			fail_msg("k=%d %s: %s/%s is %s but not staged", k,
				 after ? "after" : "before", r->volume_id, r->alloc_id,
				 mount_state_name(r->state));
		if (mounted && r->state != MOUNT_STATE_MOUNTING &&
		    r->state != MOUNT_STATE_PUBLISHING && r->state != MOUNT_STATE_PUBLISHED &&
		    r->state != MOUNT_STATE_UNPUBLISHING &&
		    r->state != MOUNT_STATE_UNPUBLISHING_UNCONFIRMED)
			fail_msg("k=%d %s: %s/%s is mounted but %s", k, after ? "after" : "before",
				 r->volume_id, r->alloc_id, mount_state_name(r->state));
	}
	mount_records_free(rs, n);
}

/*
 * One crash point (RPC k, with RPC fail_at failing first when >= 0):
 * returns false when the child ran to the end without crashing.
 */
static bool mt_crash_run(bool stage, int k, bool after, int fail_at)
{
	struct mounter_recovery rep;
	struct mounter_fake_view v;
	struct mt_env env;
	char progress[400];
	struct err e;
	int status, op;

	mt_env_open(&env, stage);
	mounter_close(env.m);
	env.m = NULL;
	status = mt_spawn(env.dir, stage, k, after, fail_at);
	if (status == 0) {
		mt_env_close(&env);
		return false;
	}
	assert_int_equal(status, MOUNTER_FAKE_CRASH_EXIT);
	snprintf(progress, sizeof(progress), "%s/progress", env.dir);
	op = mt_progress_read(progress);

	/* Restart: the same files, a fresh process state. */
	mt_reopen(&env);
	mt_check_at_crash(&env, k, after);
	if (mounter_recover(env.m, mt_lookup, NULL, &env, &rep, &e) != 0)
		fail_msg("k=%d %s: recover: %s", k, after ? "after" : "before", e.msg);
	assert_int_equal(rep.pending, 0);
	assert_int_equal(rep.orphans, 0);
	mt_check(&env, true);
	mt_check_marks(&env, k, after);

	/* The caller, who got no answer, asks again; then the rest of the sequence. */
	for (int i = op; i < MT_OPS; i++) {
		int rc = mt_run_op(&env, i, &e);

		/* The recovery may have finished the interrupted unmount already. */
		if (rc == CSID_ENOTFOUND && i == op && !mt_ops[i].mount)
			continue;
		if (rc != 0)
			fail_msg("k=%d %s op=%d: %s", k, after ? "after" : "before", i, e.msg);
		mt_check(&env, true);
		mt_check_marks(&env, k, after);
	}
	mt_check_empty(&env);
	assert_int_equal(mounter_fake_view(&env.fake, &v), 0);
	assert_int_equal(v.counts.double_stage, 0);
	mt_env_close(&env);
	return true;
}

static void mt_crash_all(bool stage, int rpcs)
{
	int k;

	for (int after = 0; after < 2; after++) {
		for (k = 0; mt_crash_run(stage, k, after, -1); k++)
			;
		/* The child crashed at each RPC of the sequence, and no further. */
		assert_int_equal(k, rpcs);
	}
}

/*
 * RPC k fails, and the agent dies at the next RPC: in the rollback of a
 * failed mount, or in the retry of a failed unmount.
 */
static void test_crash_after_failure(void **state)
{
	for (int stage = 0; stage < 2; stage++)
		for (int after = 0; after < 2; after++) {
			int k;

			for (k = 0; mt_crash_run(stage, k + 1, after, k); k++)
				;
			assert_true(k >= (stage ? MT_RPCS_STAGED : MT_RPCS_PLAIN));
		}
}

static void test_crash_with_stage(void **state)
{
	mt_crash_all(true, MT_RPCS_STAGED);
}

static void test_crash_without_stage(void **state)
{
	mt_crash_all(false, MT_RPCS_PLAIN);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_crash_with_stage, mt_scratch_setup,
					    mt_scratch_teardown),
	    cmocka_unit_test_setup_teardown(test_crash_without_stage, mt_scratch_setup,
					    mt_scratch_teardown),
	    cmocka_unit_test_setup_teardown(test_crash_after_failure, mt_scratch_setup,
					    mt_scratch_teardown),
	};

	if (argc == 7 && strcmp(argv[1], "--child") == 0)
		return mt_child(argv[2], strcmp(argv[3], "stage") == 0, atoi(argv[4]),
				strcmp(argv[5], "after") == 0, atoi(argv[6]));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
