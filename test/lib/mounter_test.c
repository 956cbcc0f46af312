/*
 * The mounter tests' fixture (mounter_test.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mounter_test.h"

const struct mt_op mt_ops[MT_OPS] = {
    {true, "vol1", "alloc-a", true},
    {true, "vol1", "alloc-b", false},
    {false, "vol1", "alloc-a", false},
    {false, "vol1", "alloc-b", false},
};

static int mt_rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	remove(path);
	return 0;
}

void mt_rm_rf(const char *dir)
{
	nftw(dir, mt_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void mt_open_mounter(struct mt_env *env)
{
	struct mounter_options opts = {.rpc_timeout_ms = MT_TIMEOUT_MS, .table = &env->fake.table};
	struct err e;

	if (mounter_open(env->data, env->db, &opts, &env->m, &e) != 0)
		fail_msg("mounter_open: %s", e.msg);
}

void mt_env_attach(struct mt_env *env, const char *dir, bool stage)
{
	memset(env, 0, sizeof(*env));
	snprintf(env->dir, sizeof(env->dir), "%s", dir);
	snprintf(env->data, sizeof(env->data), "%s/data", dir);
	snprintf(env->db, sizeof(env->db), "%s/agent.db", dir);
	snprintf(env->fake_state, sizeof(env->fake_state), "%s/fake.state", dir);
	mounter_fake_init(&env->fake, env->fake_state);
	env->fake.needs_stage = stage;
	env->plugin.plugin_id = MT_PLUGIN;
	env->plugin.client = &env->fake.client;
	env->plugin.has_stage_unstage = stage;
	mt_open_mounter(env);
	if (realpath(env->data, env->real_data) == NULL)
		fail_msg("realpath %s", env->data);
}

/* Where mt_env_open makes its directories while a scratch dir is set up. */
static char mt_scratch[64];

int mt_scratch_setup(void **state)
{
	snprintf(mt_scratch, sizeof(mt_scratch), "/tmp/csid-mt-XXXXXX");
	return mkdtemp(mt_scratch) == NULL ? -1 : 0;
}

const char *mt_scratch_dir(void)
{
	return mt_scratch;
}

int mt_scratch_teardown(void **state)
{
	mt_rm_rf(mt_scratch);
	mt_scratch[0] = '\0';
	return 0;
}

void mt_env_open(struct mt_env *env, bool stage)
{
	char dir[128];

	snprintf(dir, sizeof(dir), "%s/csid-mounter-XXXXXX", mt_scratch[0] ? mt_scratch : "/tmp");
	if (mkdtemp(dir) == NULL)
		fail_msg("mkdtemp");
	mt_env_attach(env, dir, stage);
}

void mt_env_close(struct mt_env *env)
{
	mounter_close(env->m);
	env->m = NULL;
	mounter_fake_fini(&env->fake);
	mt_rm_rf(env->dir);
}

void mt_reopen(struct mt_env *env)
{
	mounter_close(env->m);
	env->m = NULL;
	env->fake.calls = 0;
	env->fake.fail_at = -1;
	env->fake.crash_at = -1;
	mt_open_mounter(env);
}

int mt_setup(void **state)
{
	struct mt_env *env = calloc(1, sizeof(*env));

	if (env == NULL)
		return -1;
	mt_env_open(env, true);
	*state = env;
	return 0;
}

int mt_teardown(void **state)
{
	struct mt_env *env = *state;

	mt_env_close(env);
	free(env);
	return 0;
}

void mt_request(struct mounter_request *req, const char *vol, const char *alloc)
{
	static const char *const flags[] = {MT_FLAG};
	static const struct mount_kv vctx[] = {{"pool", "fast"}};
	static const struct mount_kv pctx[] = {{"device", "/dev/fake0"}};
	static const struct mount_kv secrets[] = {{"token", MT_SECRET}};

	memset(req, 0, sizeof(*req));
	req->volume_id = vol;
	req->alloc_id = alloc;
	req->external_id = vol; /* the plugin sees one volume per volume */
	req->plugin_id = MT_PLUGIN;
	req->usage.read_only = false;
	req->usage.attachment = MOUNT_ATTACH_FILE_SYSTEM;
	req->usage.access = MOUNT_ACCESS_SINGLE_NODE_MULTI_WRITER;
	req->usage.fs_type = "ext4";
	req->usage.mount_flags = flags;
	req->usage.n_mount_flags = 1;
	req->volume_context = vctx;
	req->n_volume_context = 1;
	req->publish_context = pctx;
	req->n_publish_context = 1;
	req->secrets = secrets;
	req->n_secrets = 1;
}

int mt_run_op(struct mt_env *env, int i, struct err *e)
{
	struct mounter_request req;
	struct mounter_result res;

	err_clear(e);
	if (!mt_ops[i].mount)
		return mounter_unmount(env->m, &env->plugin, mt_ops[i].vol, mt_ops[i].alloc, e);
	mt_request(&req, mt_ops[i].vol, mt_ops[i].alloc);
	req.claimed = mt_ops[i].claimed;
	return mounter_mount(env->m, &env->plugin, &req, &res, e);
}

int mt_progress_write(const char *path, int op)
{
	FILE *fp = fopen(path, "w");

	if (fp == NULL)
		return -1;
	fprintf(fp, "%d\n", op);
	return fclose(fp) == 0 ? 0 : -1;
}

int mt_progress_read(const char *path)
{
	FILE *fp = fopen(path, "r");
	int op = -1;

	assert_non_null(fp);
	assert_int_equal(fscanf(fp, "%d", &op), 1);
	fclose(fp);
	assert_true(op >= 0 && op < MT_OPS);
	return op;
}

int mt_lookup(void *ctx, const char *plugin_id, struct mounter_plugin *out, struct err *e)
{
	struct mt_env *env = ctx;

	if (strcmp(plugin_id, MT_PLUGIN) != 0)
		return err_set(e, CSID_ENOTFOUND, "no plugin %s", plugin_id);
	*out = env->plugin;
	return 0;
}

static bool mt_in(char (*list)[MOUNTER_FAKE_PATH], int n, const char *path)
{
	for (int i = 0; i < n; i++)
		if (strcmp(list[i], path) == 0)
			return true;
	return false;
}

void mt_check(struct mt_env *env, bool stable)
{
	static struct mounter_fake_view v;
	struct mount_record **rs = NULL;
	size_t n = 0;
	struct err e;

	if (mounter_list(env->m, &rs, &n, &e) != 0)
		fail_msg("mounter_list: %s", e.msg);
	assert_int_equal(mounter_fake_view(&env->fake, &v), 0);
	assert_int_equal(v.counts.double_stage, 0);
	assert_int_equal(v.counts.unstage_in_use, 0);
	assert_int_equal(v.counts.publish_unstaged, 0);
	assert_int_equal(v.counts.overlap, 0);
	for (int i = 0; i < v.n_targets; i++) {
		bool owned = false;

		for (size_t k = 0; k < n; k++)
			owned = owned || strcmp(rs[k]->target_path, v.targets[i]) == 0;
		if (!owned)
			fail_msg("mounted target %s has no record", v.targets[i]);
	}
	for (int i = 0; i < v.n_staged; i++) {
		bool owned = false;

		for (size_t k = 0; k < n; k++)
			owned = owned || (rs[k]->staging_path &&
					  strcmp(rs[k]->staging_path, v.staged[i]) == 0);
		if (!owned)
			fail_msg("staged path %s has no record", v.staged[i]);
	}
	for (size_t k = 0; k < n; k++) {
		if (stable && rs[k]->state != MOUNT_STATE_PUBLISHED)
			fail_msg("record %s/%s is %s", rs[k]->volume_id, rs[k]->alloc_id,
				 mount_state_name(rs[k]->state));
		if (rs[k]->state != MOUNT_STATE_PUBLISHED)
			continue;
		if (!mt_in(v.targets, v.n_targets, rs[k]->target_path))
			fail_msg("published %s/%s is not mounted", rs[k]->volume_id,
				 rs[k]->alloc_id);
		if (rs[k]->staging_path && !mt_in(v.staged, v.n_staged, rs[k]->staging_path))
			fail_msg("published %s/%s is not staged", rs[k]->volume_id,
				 rs[k]->alloc_id);
	}
	mount_records_free(rs, n);
}

void mt_check_empty(struct mt_env *env)
{
	static struct mounter_fake_view v;
	struct mount_record **rs = NULL;
	size_t n = 0;
	struct err e;

	mt_check(env, true);
	assert_int_equal(mounter_list(env->m, &rs, &n, &e), 0);
	mount_records_free(rs, n);
	assert_int_equal(n, 0);
	assert_int_equal(mounter_fake_view(&env->fake, &v), 0);
	assert_int_equal(v.n_staged, 0);
	assert_int_equal(v.n_targets, 0);
}

/* Whether the file at path contains needle. */
static bool mt_file_has(const char *path, const char *needle)
{
	FILE *fp = fopen(path, "rb");
	size_t nl = strlen(needle), len = 0;
	char *buf = NULL;
	bool found = false;
	long size;

	if (fp == NULL)
		return false;
	if (fseek(fp, 0, SEEK_END) == 0 && (size = ftell(fp)) > 0 && fseek(fp, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)size);
		if (buf != NULL)
			len = fread(buf, 1, (size_t)size, fp);
	}
	for (size_t i = 0; buf != NULL && i + nl <= len && !found; i++)
		found = memcmp(buf + i, needle, nl) == 0;
	free(buf);
	fclose(fp);
	return found;
}

void mt_assert_no_secret_in_db(struct mt_env *env)
{
	static const char *const suffixes[] = {"", "-wal", "-journal"};
	char path[400];

	for (size_t i = 0; i < sizeof(suffixes) / sizeof(*suffixes); i++) {
		snprintf(path, sizeof(path), "%s%s", env->db, suffixes[i]);
		assert_false(mt_file_has(path, MT_SECRET));
		assert_false(mt_file_has(path, "flag-s3cr3t"));
	}
	/* The database is where the records are: the context must be there. */
	snprintf(path, sizeof(path), "%s-wal", env->db);
	assert_true(mt_file_has(env->db, "/dev/fake0") || mt_file_has(path, "/dev/fake0"));
}
