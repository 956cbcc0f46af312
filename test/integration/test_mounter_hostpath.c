/*
 * The real mounter with the real gRPC client against the real csi-hostpath
 * plugin, doing real bind mounts (needs root; skipped otherwise, and when
 * csi-hostpath is not built). Two allocations share one staging mount; a
 * file written through one target is read through the other; unmounting
 * one keeps the stage; unmounting both leaves nothing mounted and no
 * record. A restart adopts what is mounted. A child agent killed at each
 * node RPC (before it reached the plugin, or after the plugin acted)
 * leaves a state that a restarted mounter recovers with nothing orphaned
 * and nothing staged twice. The real table's one-path check (statx)
 * agrees with the full table on a bind mount of the same file system.
 * The teardown detaches every mount under the test directory and stops
 * the plugin, even on failure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/mounter.h"
#include "agent/mountinfo.h"
#include "csi/csi_client.h"
#include "mounter_test.h"
#include "proc_guard.h"

extern char **environ;

#define MH_DEADLINE_MS 10000
#define MH_RPC_MS 10000

struct mh {
	char dir[64];
	char endpoint[128];
	char sock[100];
	char agent_dir[100];
	char db[100];
	char faults[100];
	pid_t plugin_pid;
	struct csi_client *client;
	struct mounter *m;
	struct mounter_plugin plugin;
	char external_id[256];
	/* publish_context from ControllerPublishVolume, passed to the mounter */
	char ctx_keys[8][128];
	char ctx_values[8][256];
	struct mount_kv ctx[8];
	size_t n_ctx;
};

static int64_t mh_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Polls until path exists or the deadline passes. */
static bool mh_wait_for(const char *path, int64_t timeout_ms)
{
	int64_t end = mh_now_ms() + timeout_ms;
	struct timespec pause = {0, 10 * 1000000L};

	while (access(path, F_OK) != 0) {
		if (mh_now_ms() > end)
			return false;
		nanosleep(&pause, NULL);
	}
	return true;
}

/* Detaches every mount under dir, deepest first. */
static void mh_unmount_all(const char *dir)
{
	struct mount_set s;
	struct err e;
	size_t n = strlen(dir);

	if (mountinfo_table()->load(mountinfo_table(), &s, &e) != 0)
		return;
	for (size_t i = s.n; i-- > 0;)
		if (strncmp(s.paths[i], dir, n) == 0 && s.paths[i][n] == '/')
			umount2(s.paths[i], MNT_DETACH);
	mount_set_clear(&s);
}

static bool mh_is_mounted(const char *path)
{
	bool mounted = false;
	struct err e;

	assert_int_equal(mount_table_is_mounted(mountinfo_table(), path, &mounted, &e), 0);
	return mounted;
}

/* Counts the mounts under dir. */
static int mh_mounts_under(const char *dir)
{
	struct mount_set s;
	struct err e;
	size_t n = strlen(dir);
	int count = 0;

	assert_int_equal(mountinfo_table()->load(mountinfo_table(), &s, &e), 0);
	for (size_t i = 0; i < s.n; i++)
		if (strncmp(s.paths[i], dir, n) == 0 && s.paths[i][n] == '/')
			count++;
	mount_set_clear(&s);
	return count;
}

/* Replaces csi-hostpath's fault script (atomically, as it asks). */
static void mh_faults(struct mh *h, const char *script)
{
	char tmp[128];
	FILE *fp;

	snprintf(tmp, sizeof(tmp), "%s.tmp", h->faults);
	fp = fopen(tmp, "w");
	assert_non_null(fp);
	fputs(script, fp);
	assert_int_equal(fclose(fp), 0);
	assert_int_equal(rename(tmp, h->faults), 0);
}

static int mh_start_plugin(struct mh *h)
{
#ifdef CSI_HOSTPATH_BIN
	char data[100], log[100];
	char *argv[] = {(char *)CSI_HOSTPATH_BIN,
			"--endpoint",
			h->endpoint,
			"--data-dir",
			data,
			"--node-id",
			"node-1",
			"--faults",
			h->faults,
			NULL};
	posix_spawn_file_actions_t fa;
	int rc;

	snprintf(data, sizeof(data), "%s/hp", h->dir);
	snprintf(log, sizeof(log), "%s/hp.log", h->dir);
	mh_faults(h, "");
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	rc = proc_guard_spawn(&h->plugin_pid, CSI_HOSTPATH_BIN, &fa, argv, NULL);
	posix_spawn_file_actions_destroy(&fa);
	return rc;
#else
	return -1;
#endif
}

static void mh_stop_plugin(struct mh *h)
{
	int64_t end = mh_now_ms() + MH_DEADLINE_MS;
	struct timespec pause = {0, 10 * 1000000L};
	int status;

	if (h->plugin_pid <= 0)
		return;
	kill(h->plugin_pid, SIGTERM);
	while (waitpid(h->plugin_pid, &status, WNOHANG) == 0) {
		if (mh_now_ms() > end) {
			kill(h->plugin_pid, SIGKILL);
			waitpid(h->plugin_pid, &status, 0);
			break;
		}
		nanosleep(&pause, NULL);
	}
	h->plugin_pid = 0;
}

/* Asks the node plugin whether it has STAGE_UNSTAGE_VOLUME. */
static bool mh_has_stage(struct mh *h)
{
	Csi__V1__NodeGetCapabilitiesRequest req = CSI__V1__NODE_GET_CAPABILITIES_REQUEST__INIT;
	Csi__V1__NodeGetCapabilitiesResponse *resp = NULL;
	struct csi_status st;
	bool stage = false;

	assert_int_equal(csi_node_get_capabilities(h->client, &req, &resp, MH_RPC_MS, &st), 0);
	for (size_t i = 0; i < resp->n_capabilities; i++)
		if (resp->capabilities[i]->rpc != NULL &&
		    resp->capabilities[i]->rpc->type ==
			CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__STAGE_UNSTAGE_VOLUME)
			stage = true;
	csi_msg_free(&resp->base);
	return stage;
}

static void mh_capability(Csi__V1__VolumeCapability *cap, Csi__V1__VolumeCapability__AccessMode *am,
			  Csi__V1__VolumeCapability__MountVolume *mv)
{
	am->mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER;
	cap->access_mode = am;
	cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
	cap->mount = mv;
}

/* ControllerPublishVolume to node-1 (the server's job in csid), keeping the context. */
static void mh_controller_publish(struct mh *h)
{
	Csi__V1__ControllerPublishVolumeRequest req =
	    CSI__V1__CONTROLLER_PUBLISH_VOLUME_REQUEST__INIT;
	Csi__V1__ControllerPublishVolumeResponse *resp = NULL;
	Csi__V1__VolumeCapability cap = CSI__V1__VOLUME_CAPABILITY__INIT;
	Csi__V1__VolumeCapability__AccessMode am = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__INIT;
	Csi__V1__VolumeCapability__MountVolume mv = CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
	struct csi_status st;

	mh_capability(&cap, &am, &mv);
	req.volume_id = h->external_id;
	req.node_id = "node-1";
	req.volume_capability = &cap;
	if (csi_controller_publish_volume(h->client, &req, &resp, MH_RPC_MS, &st) != 0)
		fail_msg("ControllerPublishVolume: %s: %s", csi_code_name(st.code), st.message);
	for (size_t i = 0; i < resp->n_publish_context && i < 8; i++) {
		snprintf(h->ctx_keys[i], sizeof(h->ctx_keys[i]), "%s",
			 resp->publish_context[i]->key);
		snprintf(h->ctx_values[i], sizeof(h->ctx_values[i]), "%s",
			 resp->publish_context[i]->value);
		h->ctx[i].key = h->ctx_keys[i];
		h->ctx[i].value = h->ctx_values[i];
		h->n_ctx = i + 1;
	}
	csi_msg_free(&resp->base);
}

static void mh_create_volume(struct mh *h)
{
	Csi__V1__CreateVolumeRequest req = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	Csi__V1__CreateVolumeResponse *resp = NULL;
	Csi__V1__VolumeCapability cap = CSI__V1__VOLUME_CAPABILITY__INIT;
	Csi__V1__VolumeCapability__AccessMode am = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__INIT;
	Csi__V1__VolumeCapability__MountVolume mv = CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
	Csi__V1__VolumeCapability *caps[] = {&cap};
	struct csi_status st;

	mh_capability(&cap, &am, &mv);
	req.name = "mounter-it";
	req.n_volume_capabilities = 1;
	req.volume_capabilities = caps;
	if (csi_create_volume(h->client, &req, &resp, MH_RPC_MS, &st) != 0)
		fail_msg("CreateVolume: %s: %s", csi_code_name(st.code), st.message);
	snprintf(h->external_id, sizeof(h->external_id), "%s", resp->volume->volume_id);
	csi_msg_free(&resp->base);
}

static void mh_open_mounter(struct mh *h)
{
	struct mounter_options opts = {.rpc_timeout_ms = MH_RPC_MS};
	struct err e;

	if (mounter_open(h->agent_dir, h->db, &opts, &h->m, &e) != 0)
		fail_msg("mounter_open: %s", e.msg);
}

static int mh_setup(void **state)
{
	struct mh *h;
	struct err e;
	char dir[] = "/tmp/csid-mh-XXXXXX";

	*state = NULL;
#ifndef CSI_HOSTPATH_BIN
	return 0;
#endif
	if (geteuid() != 0)
		return 0;
	h = calloc(1, sizeof(*h));
	assert_non_null(h);
	*state = h;
	assert_non_null(mkdtemp(dir));
	snprintf(h->dir, sizeof(h->dir), "%s", dir);
	snprintf(h->sock, sizeof(h->sock), "%s/csi.sock", dir);
	snprintf(h->endpoint, sizeof(h->endpoint), "unix://%s", h->sock);
	snprintf(h->agent_dir, sizeof(h->agent_dir), "%s/agent", dir);
	snprintf(h->db, sizeof(h->db), "%s/agent.db", dir);
	snprintf(h->faults, sizeof(h->faults), "%s/faults", dir);
	assert_int_equal(mh_start_plugin(h), 0);
	if (!mh_wait_for(h->sock, MH_DEADLINE_MS))
		fail_msg("csi-hostpath did not create %s", h->sock);
	if (csi_client_grpc_new(h->endpoint, &h->client, &e) != 0)
		fail_msg("client: %s", e.msg);
	h->plugin.plugin_id = "hostpath.csi.csid.dev";
	h->plugin.client = h->client;
	h->plugin.has_stage_unstage = mh_has_stage(h);
	mh_create_volume(h);
	mh_controller_publish(h);
	mh_open_mounter(h);
	return 0;
}

static int mh_teardown(void **state)
{
	struct mh *h = *state;

	if (h == NULL)
		return 0;
	mh_unmount_all(h->dir);
	mounter_close(h->m);
	csi_client_free(h->client);
	mh_stop_plugin(h);
	mh_unmount_all(h->dir);
	mt_rm_rf(h->dir);
	free(h);
	return 0;
}

static void mh_request(struct mh *h, struct mounter_request *req, const char *alloc)
{
	memset(req, 0, sizeof(*req));
	req->volume_id = "vol1";
	req->alloc_id = alloc;
	req->external_id = h->external_id;
	req->plugin_id = h->plugin.plugin_id;
	req->usage.attachment = MOUNT_ATTACH_FILE_SYSTEM;
	req->usage.access = MOUNT_ACCESS_MULTI_NODE_MULTI_WRITER;
	req->publish_context = h->ctx;
	req->n_publish_context = h->n_ctx;
}

static void mh_write(const char *dir, const char *name, const char *text)
{
	char path[MOUNTER_PATH_MAX + 64];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fp = fopen(path, "w");
	assert_non_null(fp);
	fputs(text, fp);
	assert_int_equal(fclose(fp), 0);
}

static void mh_expect(const char *dir, const char *name, const char *text)
{
	char path[MOUNTER_PATH_MAX + 64];
	char buf[128] = "";
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fp = fopen(path, "r");
	if (fp == NULL)
		fail_msg("open %s: %s", path, strerror(errno));
	assert_non_null(fgets(buf, sizeof(buf), fp));
	fclose(fp);
	assert_string_equal(buf, text);
}

static void test_two_allocs_share_stage(void **state)
{
	struct mh *h = *state;
	struct mounter_request req;
	struct mounter_result ra, rb;

	if (h == NULL)
		skip(); /* needs root and csi-hostpath */
	struct mount_record **rs = NULL;
	size_t n = 0;
	bool has;
	struct err e;

	mh_request(h, &req, "alloc-a");
	if (mounter_mount(h->m, &h->plugin, &req, &ra, &e) != 0)
		fail_msg("mount a: %s", e.msg);
	mh_request(h, &req, "alloc-b");
	if (mounter_mount(h->m, &h->plugin, &req, &rb, &e) != 0)
		fail_msg("mount b: %s", e.msg);
	assert_true(mh_is_mounted(ra.target));
	assert_true(mh_is_mounted(rb.target));
	if (h->plugin.has_stage_unstage)
		assert_string_equal(ra.source, rb.source);

	/* A file written through one target is visible through the other. */
	mh_write(ra.target, "hello.txt", "written through alloc-a\n");
	mh_expect(rb.target, "hello.txt", "written through alloc-a\n");

	/* Unmounting one keeps the other (and the stage). */
	assert_int_equal(mounter_unmount(h->m, &h->plugin, "vol1", "alloc-a", &e), 0);
	assert_false(mh_is_mounted(ra.target));
	assert_true(mh_is_mounted(rb.target));
	mh_expect(rb.target, "hello.txt", "written through alloc-a\n");
	if (h->plugin.has_stage_unstage)
		assert_int_equal(access(rb.source, F_OK), 0);
	assert_int_equal(mounter_has_mount(h->m, "vol1", "alloc-b", &has, &e), 0);
	assert_true(has);

	/* Unmounting both leaves nothing mounted and no record. */
	assert_int_equal(mounter_unmount(h->m, &h->plugin, "vol1", "alloc-b", &e), 0);
	assert_int_equal(mh_mounts_under(h->agent_dir), 0);
	assert_int_not_equal(access(rb.target, F_OK), 0);
	assert_int_equal(mounter_list(h->m, &rs, &n, &e), 0);
	mount_records_free(rs, n);
	assert_int_equal(n, 0);
}

static int mh_lookup(void *ctx, const char *plugin_id, struct mounter_plugin *out, struct err *e)
{
	struct mh *h = ctx;

	*out = h->plugin;
	return 0;
}

static void test_restart_adopts(void **state)
{
	struct mh *h = *state;
	struct mounter_request req;
	struct mounter_result ra;
	struct mounter_recovery rep;
	struct err e;

	if (h == NULL)
		skip(); /* needs root and csi-hostpath */

	mh_request(h, &req, "alloc-a");
	if (mounter_mount(h->m, &h->plugin, &req, &ra, &e) != 0)
		fail_msg("mount a: %s", e.msg);
	mh_write(ra.target, "kept.txt", "still here\n");
	mounter_close(h->m);
	h->m = NULL;
	mh_open_mounter(h);
	if (mounter_recover(h->m, mh_lookup, NULL, h, &rep, &e) != 0)
		fail_msg("recover: %s", e.msg);
	assert_int_equal(rep.adopted, 1);
	assert_int_equal(rep.orphans + rep.lost + rep.rolled_back + rep.pending, 0);
	assert_true(mh_is_mounted(ra.target));
	mh_expect(ra.target, "kept.txt", "still here\n");
	assert_int_equal(mounter_unmount(h->m, &h->plugin, "vol1", "alloc-a", &e), 0);
	assert_int_equal(mh_mounts_under(h->agent_dir), 0);
}

/*
 * A plugin that does not answer within the deadline: the mount fails with
 * a deadline error well before the plugin would have answered, nothing
 * stays mounted or recorded, and the same mount succeeds once the plugin
 * is well again.
 */
static void test_deadline(void **state)
{
	struct mh *h = *state;
	struct mounter_options opts = {.rpc_timeout_ms = 300};
	struct mount_record **rs = NULL;
	struct mounter_request req;
	struct mounter_result res;
	struct mounter *m;
	size_t n = 0;
	int64_t t0;
	struct err e;

	if (h == NULL)
		skip(); /* needs root and csi-hostpath */
	/* Answers after 3 s, without doing anything, so no late effect lands. */
	mh_faults(h, "NodePublishVolume delay_ms=3000 code=UNAVAILABLE\n");
	mounter_close(h->m);
	assert_int_equal(mounter_open(h->agent_dir, h->db, &opts, &m, &e), 0);
	h->m = m;
	mh_request(h, &req, "alloc-a");
	t0 = mh_now_ms();
	assert_int_equal(mounter_mount(h->m, &h->plugin, &req, &res, &e), CSID_ETIMEDOUT);
	assert_true(mh_now_ms() - t0 < 2500);
	assert_non_null(strstr(e.msg, "node publish: plugin hostpath.csi.csid.dev: "
				      "DEADLINE_EXCEEDED"));
	/*
	 * The rollback may itself time out while the plugin is busy: then the
	 * record stays, not published, and nothing is mounted at the target.
	 */
	assert_int_equal(mounter_list(h->m, &rs, &n, &e), 0);
	for (size_t i = 0; i < n; i++) {
		assert_int_not_equal(rs[i]->state, MOUNT_STATE_PUBLISHED);
		assert_false(mh_is_mounted(rs[i]->target_path));
	}
	mount_records_free(rs, n);

	/* Once the plugin is well, the same mount succeeds (poll while it is busy). */
	mh_faults(h, "");
	t0 = mh_now_ms();
	while (mounter_mount(h->m, &h->plugin, &req, &res, &e) != 0) {
		struct timespec pause = {0, 50 * 1000000L};

		if (mh_now_ms() - t0 > MH_DEADLINE_MS)
			fail_msg("mount after the fault: %s", e.msg);
		nanosleep(&pause, NULL);
	}
	assert_true(mh_is_mounted(res.target));
	assert_int_equal(mounter_unmount(h->m, &h->plugin, "vol1", "alloc-a", &e), 0);
	assert_int_equal(mh_mounts_under(h->agent_dir), 0);
}

/* A client that forwards to the real one and _exit()s at call number at. */
struct mh_crash {
	struct csi_client base;
	struct csi_client *real;
	int calls;
	int at;
	bool after; /* after the plugin answered (the answer is lost) */
};

static int mh_crash_call(struct csi_client *c, enum csi_rpc rpc, const ProtobufCMessage *req,
			 ProtobufCMessage **resp, int64_t timeout_ms, struct csi_status *st)
{
	struct mh_crash *w = (struct mh_crash *)(void *)c;
	int n = w->calls++;
	int rc;

	if (n == w->at && !w->after)
		_exit(MOUNTER_FAKE_CRASH_EXIT);
	rc = w->real->call(w->real, rpc, req, resp, timeout_ms, st);
	if (n == w->at && w->after)
		_exit(MOUNTER_FAKE_CRASH_EXIT);
	return rc;
}

/* Runs op i of the standard sequence through h's mounter. */
static int mh_run_op(struct mh *h, int i, struct err *e)
{
	struct mounter_request req;
	struct mounter_result res;

	if (!mt_ops[i].mount)
		return mounter_unmount(h->m, &h->plugin, "vol1", mt_ops[i].alloc, e);
	mh_request(h, &req, mt_ops[i].alloc);
	return mounter_mount(h->m, &h->plugin, &req, &res, e);
}

/*
 * The child of test_kill9: --child ENDPOINT AGENT_DIR DB EXTERNAL_ID STAGE K AFTER
 * [KEY=VALUE...]; runs the sequence, noting each op in DB.progress, and
 * dies at RPC K.
 */
static int mh_child(int argc, char **argv)
{
	static struct mh h;
	static struct mh_crash w;
	char progress[160];
	struct err e;

	snprintf(h.endpoint, sizeof(h.endpoint), "%s", argv[2]);
	snprintf(h.agent_dir, sizeof(h.agent_dir), "%s", argv[3]);
	snprintf(h.db, sizeof(h.db), "%s", argv[4]);
	snprintf(h.external_id, sizeof(h.external_id), "%s", argv[5]);
	for (int i = 9; i < argc && h.n_ctx < 8; i++) {
		char *eq = strchr(argv[i], '=');

		if (eq == NULL)
			continue;
		*eq = '\0';
		snprintf(h.ctx_keys[h.n_ctx], sizeof(h.ctx_keys[0]), "%s", argv[i]);
		snprintf(h.ctx_values[h.n_ctx], sizeof(h.ctx_values[0]), "%s", eq + 1);
		h.ctx[h.n_ctx].key = h.ctx_keys[h.n_ctx];
		h.ctx[h.n_ctx].value = h.ctx_values[h.n_ctx];
		h.n_ctx++;
	}
	if (csi_client_grpc_new(h.endpoint, &w.real, &e) != 0) {
		fprintf(stderr, "child: %s\n", e.msg);
		return 2;
	}
	w.base.call = mh_crash_call;
	w.base.endpoint = "crash";
	w.at = atoi(argv[7]);
	w.after = strcmp(argv[8], "1") == 0;
	h.plugin.plugin_id = "hostpath.csi.csid.dev";
	h.plugin.client = &w.base;
	h.plugin.has_stage_unstage = strcmp(argv[6], "1") == 0;
	if (mounter_open(h.agent_dir, h.db, NULL, &h.m, &e) != 0) {
		fprintf(stderr, "child: %s\n", e.msg);
		return 2;
	}
	snprintf(progress, sizeof(progress), "%s.progress", h.db);
	for (int op = 0; op < MT_OPS; op++) {
		if (mt_progress_write(progress, op) != 0)
			return 2;
		if (mh_run_op(&h, op, &e) != 0) {
			fprintf(stderr, "child op %d: %s\n", op, e.msg);
			return 3;
		}
	}
	mounter_close(h.m);
	csi_client_free(w.real);
	csi_grpc_shutdown();
	return 0;
}

static int mh_spawn_child(struct mh *h, const char *agent_dir, const char *db, int k, bool after)
{
	char self[PATH_MAX], ks[16];
	char *argv[9 + 8 * 2 + 1];
	char kv[8][400];
	int argc = 0, status = 0;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	pid_t pid;

	assert_true(n > 0);
	self[n] = '\0';
	snprintf(ks, sizeof(ks), "%d", k);
	argv[argc++] = self;
	argv[argc++] = "--child";
	argv[argc++] = h->endpoint;
	argv[argc++] = (char *)agent_dir;
	argv[argc++] = (char *)db;
	argv[argc++] = h->external_id;
	argv[argc++] = h->plugin.has_stage_unstage ? "1" : "0";
	argv[argc++] = ks;
	argv[argc++] = after ? "1" : "0";
	for (size_t i = 0; i < h->n_ctx; i++) {
		snprintf(kv[i], sizeof(kv[i]), "%s=%s", h->ctx[i].key, h->ctx[i].value);
		argv[argc++] = kv[i];
	}
	argv[argc] = NULL;
	assert_int_equal(posix_spawn(&pid, self, NULL, NULL, argv, environ), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/* Every mount under dir belongs to a published record; every such record is mounted. */
static void mh_check_owned(struct mh *h, const char *dir)
{
	struct mount_record **rs = NULL;
	struct mount_set s;
	size_t n = 0, len = strlen(dir);
	struct err e;

	assert_int_equal(mounter_list(h->m, &rs, &n, &e), 0);
	assert_int_equal(mountinfo_table()->load(mountinfo_table(), &s, &e), 0);
	for (size_t i = 0; i < s.n; i++) {
		bool owned = false;

		if (strncmp(s.paths[i], dir, len) != 0 || s.paths[i][len] != '/')
			continue;
		for (size_t k = 0; k < n; k++)
			owned =
			    owned || strcmp(s.paths[i], rs[k]->target_path) == 0 ||
			    (rs[k]->staging_path && strcmp(s.paths[i], rs[k]->staging_path) == 0);
		if (!owned)
			fail_msg("mount %s has no record", s.paths[i]);
	}
	for (size_t k = 0; k < n; k++) {
		if (rs[k]->state != MOUNT_STATE_PUBLISHED)
			fail_msg("record %s is %s", rs[k]->alloc_id,
				 mount_state_name(rs[k]->state));
		if (!mount_set_has(&s, rs[k]->target_path))
			fail_msg("record %s is not mounted", rs[k]->alloc_id);
	}
	mount_set_clear(&s);
	mount_records_free(rs, n);
}

/* One crash point; false when the child finished without crashing. */
static bool mh_kill9_run(struct mh *h, int k, bool after)
{
	struct mh r = *h;
	struct mounter_recovery rep;
	char progress[160];
	struct err e;
	int status, op;

	snprintf(r.agent_dir, sizeof(r.agent_dir), "%s/k%d-%d", h->dir, after, k);
	snprintf(r.db, sizeof(r.db), "%s/k%d-%d.db", h->dir, after, k);
	r.m = NULL;
	status = mh_spawn_child(h, r.agent_dir, r.db, k, after);
	if (status == 0) {
		assert_int_equal(mh_mounts_under(r.agent_dir), 0);
		return false;
	}
	assert_int_equal(status, MOUNTER_FAKE_CRASH_EXIT);
	snprintf(progress, sizeof(progress), "%s.progress", r.db);
	op = mt_progress_read(progress);

	/* The restarted agent: recover, check, then redo the rest of the sequence. */
	mh_open_mounter(&r);
	if (mounter_recover(r.m, mh_lookup, NULL, h, &rep, &e) != 0)
		fail_msg("k=%d after=%d: recover: %s", k, after, e.msg);
	assert_int_equal(rep.pending + rep.orphans, 0);
	mh_check_owned(&r, r.agent_dir);
	for (int i = op; i < MT_OPS; i++) {
		int rc = mh_run_op(&r, i, &e);

		if (rc == CSID_ENOTFOUND && i == op && !mt_ops[i].mount)
			continue;
		if (rc != 0)
			fail_msg("k=%d after=%d op=%d: %s", k, after, i, e.msg);
		mh_check_owned(&r, r.agent_dir);
	}
	assert_int_equal(mh_mounts_under(r.agent_dir), 0);
	mounter_close(r.m);
	return true;
}

static void test_kill9_every_step(void **state)
{
	struct mh *h = *state;
	int k;

	if (h == NULL)
		skip(); /* needs root and csi-hostpath */
	for (int after = 0; after < 2; after++) {
		for (k = 0; mh_kill9_run(h, k, after); k++)
			;
		assert_int_equal(k, h->plugin.has_stage_unstage ? MT_RPCS_STAGED : MT_RPCS_PLAIN);
	}
}

/* A scratch directory of its own for test_is_mounted, removed by the teardown. */
static int mh_scratch_setup(void **state)
{
	static char dir[64];

	snprintf(dir, sizeof(dir), "/tmp/csid-ismnt-XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	*state = dir;
	return 0;
}

static int mh_scratch_teardown(void **state)
{
	const char *dir = *state;

	mh_unmount_all(dir);
	mt_rm_rf(dir);
	return 0;
}

/* Whether the full mount table (not statx) lists path. */
static bool mh_listed(const char *path)
{
	struct mount_set s;
	struct err e;
	bool has;

	assert_int_equal(mountinfo_table()->load(mountinfo_table(), &s, &e), 0);
	has = mount_set_has(&s, path);
	mount_set_clear(&s);
	return has;
}

/*
 * The one-path check of the real table (statx, STATX_ATTR_MOUNT_ROOT)
 * agrees with the full table: a bind mount of a directory of the same file
 * system (same st_dev) is a mount point, its source and a plain directory
 * are not, nor a missing path, nor a symbolic link to a mount point; after
 * the unmount it is not any more.
 */
static void test_is_mounted(void **state)
{
	const char *dir = *state;
	char src[128], dst[128], link[128], missing[160];
	struct stat a, b;

	if (geteuid() != 0)
		skip(); /* needs root for mount(2) */
	snprintf(src, sizeof(src), "%s/src", dir);
	snprintf(dst, sizeof(dst), "%s/dst", dir);
	snprintf(link, sizeof(link), "%s/link", dir);
	snprintf(missing, sizeof(missing), "%s/missing/x", dir);
	assert_int_equal(mkdir(src, 0750), 0);
	assert_int_equal(mkdir(dst, 0750), 0);
	assert_false(mh_is_mounted(dst));
	assert_int_equal(mount(src, dst, NULL, MS_BIND, NULL), 0);
	assert_int_equal(stat(src, &a), 0);
	assert_int_equal(stat(dst, &b), 0);
	assert_true(a.st_dev == b.st_dev);
	assert_true(mh_is_mounted(dst));
	assert_true(mh_listed(dst));
	assert_false(mh_is_mounted(src));
	assert_false(mh_is_mounted(dir));
	assert_false(mh_is_mounted(missing));
	assert_int_equal(symlink(dst, link), 0);
	assert_false(mh_is_mounted(link));
	assert_int_equal(umount2(dst, MNT_DETACH), 0);
	assert_false(mh_is_mounted(dst));
	assert_false(mh_listed(dst));
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_two_allocs_share_stage, mh_setup, mh_teardown),
	    cmocka_unit_test_setup_teardown(test_restart_adopts, mh_setup, mh_teardown),
	    cmocka_unit_test_setup_teardown(test_kill9_every_step, mh_setup, mh_teardown),
	    cmocka_unit_test_setup_teardown(test_deadline, mh_setup, mh_teardown),
	    cmocka_unit_test_setup_teardown(test_is_mounted, mh_scratch_setup, mh_scratch_teardown),
	};
	int rc;

	if (argc >= 9 && strcmp(argv[1], "--child") == 0)
		return mh_child(argc, argv);
	rc = cmocka_run_group_tests(tests, NULL, NULL);

	csi_grpc_shutdown();
	return rc;
}
