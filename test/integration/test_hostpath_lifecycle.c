/*
 * csi-hostpath as a real process on a temporary socket, driven through
 * the real gRPC client: the whole volume lifecycle with real bind mounts
 * (each call repeated for idempotency, misuse answered with its code),
 * block volumes, read-only publishing, snapshots and clones, expansion,
 * pagination, a kill -9 and restart that loses nothing, the plugin's
 * peak memory, and a controller plugin and a node plugin sharing one data
 * dir. Every mount is removed in teardown, even after a failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "hostpath_proc.h"

#define SNW CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER
#define MNMW CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER

struct fx {
	struct hpp_proc h, h2; /* h2: a second plugin, for split modes */
	struct hpp_client cl, cl2;
	char staging[160], pods[160];
};

static int teardown(void **state);

static int setup(void **state)
{
	static struct fx f;

	memset(&f, 0, sizeof(f));
	*state = &f;
	/* cmocka skips a test's teardown when its setup fails: clean up here. */
	if (hpp_proc_start(&f.h, NULL) != 0 || hpp_client_open(&f.cl, f.h.endpoint) != 0)
		goto fail;
	snprintf(f.staging, sizeof(f.staging), "%s/staging", f.h.dir);
	snprintf(f.pods, sizeof(f.pods), "%s/pods", f.h.dir);
	if (mkdir(f.staging, 0750) != 0 || mkdir(f.pods, 0750) != 0)
		goto fail;
	return 0;
fail:
	teardown(state);
	return -1;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	hpp_client_close(&f->cl2);
	hpp_proc_cleanup(&f->h2);
	hpp_client_close(&f->cl);
	hpp_proc_cleanup(&f->h);
	return 0;
}

static int call(struct fx *f, enum csi_rpc rpc, const void *req, void *resp)
{
	return hpp_client_call(&f->cl, rpc, req, resp, 0);
}

static void put(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fsync(fd), 0);
	close(fd);
}

static void expect(const char *path, const char *text)
{
	char buf[256] = "";
	int fd = open(path, O_RDONLY);
	ssize_t n;

	assert_true(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n >= 0);
	buf[n] = '\0';
	assert_memory_equal(buf, text, strlen(text));
}

static bool is_mount(const char *path)
{
	return hp_mount_real.is_mount(NULL, path);
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static void test_lifecycle(void **state)
{
	struct fx *f = *state;
	Csi__V1__NodeGetVolumeStatsRequest sr = CSI__V1__NODE_GET_VOLUME_STATS_REQUEST__INIT;
	Csi__V1__NodeGetVolumeStatsResponse *st;
	char id[64], id2[64], target[200], other[200], path[300], backing[300];

	snprintf(target, sizeof(target), "%s/t1", f->pods);
	snprintf(other, sizeof(other), "%s/t2", f->pods);
	for (int i = 0; i < 2; i++)
		assert_int_equal(
		    hpp_create(&f->cl.caller, "life", 10 << 20, 0, false, i ? id2 : id), CSI_OK);
	assert_string_equal(id, id2);
	for (int i = 0; i < 2; i++)
		assert_int_equal(hpp_ctl_publish(&f->cl.caller, id, "node-1", false, SNW, false),
				 CSI_OK);
	for (int i = 0; i < 2; i++)
		assert_int_equal(hpp_stage(&f->cl.caller, id, f->staging, false, SNW), CSI_OK);
	assert_true(is_mount(f->staging));
	for (int i = 0; i < 2; i++)
		assert_int_equal(
		    hpp_publish(&f->cl.caller, id, f->staging, target, false, SNW, false), CSI_OK);
	assert_true(is_mount(target));

	/* Write through the published path, read it back from the volume's directory. */
	snprintf(path, sizeof(path), "%s/hello.txt", target);
	put(path, "hello through the bind mount");
	snprintf(backing, sizeof(backing), "%s/volumes/%s/hello.txt", f->h.data, id);
	expect(backing, "hello through the bind mount");

	sr.volume_id = id;
	sr.volume_path = target;
	assert_int_equal(call(f, CSI_RPC_NODE_GET_VOLUME_STATS, &sr, &st), CSI_OK);
	assert_int_equal(st->n_usage, 2);
	assert_true(st->usage[0]->total > 0);

	/* Misuse, each with its code. */
	assert_int_equal(hpp_publish(&f->cl.caller, id, f->staging, other, false, SNW, false),
			 CSI_FAILED_PRECONDITION);
	assert_int_equal(hpp_publish(&f->cl.caller, id, "", other, false, SNW, false),
			 CSI_FAILED_PRECONDITION);
	assert_int_equal(hpp_publish(&f->cl.caller, id, f->staging, target, false, SNW, true),
			 CSI_ALREADY_EXISTS);
	assert_int_equal(
	    hpp_publish(&f->cl.caller, "vol-nope", f->staging, other, false, SNW, false),
	    CSI_NOT_FOUND);
	assert_int_equal(hpp_stage(&f->cl.caller, id, "relative", false, SNW),
			 CSI_INVALID_ARGUMENT);
	assert_int_equal(hpp_stage(&f->cl.caller, "../../etc", f->staging, false, SNW),
			 CSI_INVALID_ARGUMENT);
	assert_int_equal(hpp_delete(&f->cl.caller, id), CSI_FAILED_PRECONDITION);
	sr.volume_path = other;
	assert_int_equal(call(f, CSI_RPC_NODE_GET_VOLUME_STATS, &sr, NULL), CSI_NOT_FOUND);
	assert_false(exists(other));

	for (int i = 0; i < 2; i++)
		assert_int_equal(hpp_unpublish(&f->cl.caller, id, target), CSI_OK);
	assert_false(exists(target));
	for (int i = 0; i < 2; i++)
		assert_int_equal(hpp_unstage(&f->cl.caller, id, f->staging), CSI_OK);
	assert_false(is_mount(f->staging));
	assert_true(exists(f->staging));
	for (int i = 0; i < 2; i++)
		assert_int_equal(hpp_ctl_unpublish(&f->cl.caller, id, "node-1"), CSI_OK);
	for (int i = 0; i < 2; i++)
		assert_int_equal(hpp_delete(&f->cl.caller, id), CSI_OK);
	assert_false(exists(backing));
	assert_int_equal(hpp_umount_under(f->h.dir), 0);
}

static void test_readonly_and_block(void **state)
{
	struct fx *f = *state;
	char id[64], blk[64], target[200], btarget[200], path[300], backing[300];
	int fd;

	snprintf(target, sizeof(target), "%s/ro", f->pods);
	assert_int_equal(hpp_create(&f->cl.caller, "ro", 1 << 20, 0, false, id), CSI_OK);
	assert_int_equal(hpp_ctl_publish(&f->cl.caller, id, "node-1", false, MNMW, true), CSI_OK);
	assert_int_equal(hpp_stage(&f->cl.caller, id, f->staging, false, MNMW), CSI_OK);
	assert_int_equal(hpp_publish(&f->cl.caller, id, f->staging, target, false, MNMW, true),
			 CSI_OK);
	snprintf(path, sizeof(path), "%s/nope", target);
	fd = open(path, O_WRONLY | O_CREAT, 0644);
	assert_true(fd < 0);
	assert_int_equal(errno, EROFS);
	assert_int_equal(hpp_unpublish(&f->cl.caller, id, target), CSI_OK);
	assert_int_equal(hpp_unstage(&f->cl.caller, id, f->staging), CSI_OK);

	/* A block volume is published as a file the plugin creates. */
	snprintf(btarget, sizeof(btarget), "%s/dev", f->pods);
	assert_int_equal(hpp_create(&f->cl.caller, "blk", 1 << 20, 0, true, blk), CSI_OK);
	assert_int_equal(hpp_ctl_publish(&f->cl.caller, blk, "node-1", true, SNW, false), CSI_OK);
	assert_int_equal(hpp_stage(&f->cl.caller, blk, f->staging, false, SNW),
			 CSI_FAILED_PRECONDITION);
	assert_int_equal(hpp_stage(&f->cl.caller, blk, f->staging, true, SNW), CSI_OK);
	for (int i = 0; i < 2; i++)
		assert_int_equal(
		    hpp_publish(&f->cl.caller, blk, f->staging, btarget, true, SNW, false), CSI_OK);
	assert_true(is_mount(btarget));
	put(btarget, "raw block bytes");
	snprintf(backing, sizeof(backing), "%s/volumes/%s", f->h.data, blk);
	expect(backing, "raw block bytes");
	for (int i = 0; i < 2; i++)
		assert_int_equal(hpp_unpublish(&f->cl.caller, blk, btarget), CSI_OK);
	assert_false(exists(btarget));
	for (int i = 0; i < 2; i++)
		assert_int_equal(hpp_unstage(&f->cl.caller, blk, f->staging), CSI_OK);
	snprintf(path, sizeof(path), "%s/block", f->staging);
	assert_false(exists(path));
	assert_int_equal(hpp_ctl_unpublish(&f->cl.caller, blk, "node-1"), CSI_OK);
	assert_int_equal(hpp_delete(&f->cl.caller, blk), CSI_OK);
	assert_int_equal(hpp_umount_under(f->h.dir), 0);
}

static void test_snapshot_clone_expand(void **state)
{
	struct fx *f = *state;
	Csi__V1__CreateSnapshotRequest sr = CSI__V1__CREATE_SNAPSHOT_REQUEST__INIT;
	Csi__V1__CreateSnapshotResponse *so;
	Csi__V1__CreateVolumeRequest cr = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	Csi__V1__CreateVolumeResponse *co;
	Csi__V1__VolumeContentSource cs = CSI__V1__VOLUME_CONTENT_SOURCE__INIT;
	Csi__V1__VolumeContentSource__SnapshotSource ss =
	    CSI__V1__VOLUME_CONTENT_SOURCE__SNAPSHOT_SOURCE__INIT;
	Csi__V1__VolumeContentSource__VolumeSource vs =
	    CSI__V1__VOLUME_CONTENT_SOURCE__VOLUME_SOURCE__INIT;
	Csi__V1__ControllerExpandVolumeRequest er = CSI__V1__CONTROLLER_EXPAND_VOLUME_REQUEST__INIT;
	Csi__V1__ControllerExpandVolumeResponse *eo;
	Csi__V1__CapacityRange range = CSI__V1__CAPACITY_RANGE__INIT;
	char id[64], snap[64], path[300];
	struct hpp_cap c;
	struct stat st;

	assert_int_equal(hpp_create(&f->cl.caller, "origin", 2 << 20, 0, true, id), CSI_OK);
	snprintf(path, sizeof(path), "%s/volumes/%s", f->h.data, id);
	put(path, "version one");
	sr.name = "snap";
	sr.source_volume_id = id;
	assert_int_equal(call(f, CSI_RPC_CREATE_SNAPSHOT, &sr, &so), CSI_OK);
	assert_true(so->snapshot->ready_to_use);
	assert_int_equal(so->snapshot->size_bytes, 2 << 20);
	snprintf(snap, sizeof(snap), "%s", so->snapshot->snapshot_id);
	put(path, "version two");

	cr.name = "restored";
	cr.volume_capabilities = c.list;
	cr.n_volume_capabilities = 1;
	hpp_cap(&c, true, SNW);
	ss.snapshot_id = snap;
	cs.type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT;
	cs.snapshot = &ss;
	cr.volume_content_source = &cs;
	assert_int_equal(call(f, CSI_RPC_CREATE_VOLUME, &cr, &co), CSI_OK);
	assert_int_equal(co->volume->capacity_bytes, 2 << 20);
	snprintf(path, sizeof(path), "%s/volumes/%s", f->h.data, co->volume->volume_id);
	expect(path, "version one");
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 2 << 20);

	cr.name = "clone";
	vs.volume_id = id;
	cs.type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME;
	cs.volume = &vs;
	assert_int_equal(call(f, CSI_RPC_CREATE_VOLUME, &cr, &co), CSI_OK);
	snprintf(path, sizeof(path), "%s/volumes/%s", f->h.data, co->volume->volume_id);
	expect(path, "version two");
	vs.volume_id = "vol-gone";
	cr.name = "clone-of-nothing";
	assert_int_equal(call(f, CSI_RPC_CREATE_VOLUME, &cr, NULL), CSI_NOT_FOUND);

	er.volume_id = id;
	range.required_bytes = 8 << 20;
	er.capacity_range = &range;
	for (int i = 0; i < 2; i++) {
		assert_int_equal(call(f, CSI_RPC_CONTROLLER_EXPAND_VOLUME, &er, &eo), CSI_OK);
		assert_int_equal(eo->capacity_bytes, 8 << 20);
		assert_false(eo->node_expansion_required);
	}
	snprintf(path, sizeof(path), "%s/volumes/%s", f->h.data, id);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 8 << 20);
}

static void test_pagination(void **state)
{
	struct fx *f = *state;
	Csi__V1__ListVolumesRequest r = CSI__V1__LIST_VOLUMES_REQUEST__INIT;
	Csi__V1__ListVolumesResponse *out;
	char id[64], name[32], token[32] = "";
	int pages = 0, seen = 0;

	for (int i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "page-%d", i);
		assert_int_equal(hpp_create(&f->cl.caller, name, 1 << 20, 0, false, id), CSI_OK);
	}
	r.max_entries = 2;
	do {
		r.starting_token = token;
		assert_int_equal(call(f, CSI_RPC_LIST_VOLUMES, &r, &out), CSI_OK);
		assert_true(out->n_entries <= 2);
		seen += (int)out->n_entries;
		pages++;
		snprintf(token, sizeof(token), "%s", out->next_token ? out->next_token : "");
	} while (token[0] && pages < 10);
	assert_int_equal(seen, 5);
	assert_int_equal(pages, 3);
	r.starting_token = "not-a-token";
	assert_int_equal(call(f, CSI_RPC_LIST_VOLUMES, &r, NULL), CSI_ABORTED);
}

static void test_restart_loses_nothing(void **state)
{
	struct fx *f = *state;
	Csi__V1__ListVolumesRequest lr = CSI__V1__LIST_VOLUMES_REQUEST__INIT;
	Csi__V1__ListVolumesResponse *lo;
	char id[64], again[64], snapid[64], target[200];
	Csi__V1__CreateSnapshotRequest sr = CSI__V1__CREATE_SNAPSHOT_REQUEST__INIT;
	Csi__V1__CreateSnapshotResponse *so;
	long hwm;

	snprintf(target, sizeof(target), "%s/t", f->pods);
	assert_int_equal(hpp_create(&f->cl.caller, "durable", 1 << 20, 0, false, id), CSI_OK);
	assert_int_equal(hpp_ctl_publish(&f->cl.caller, id, "node-1", false, SNW, false), CSI_OK);
	assert_int_equal(hpp_stage(&f->cl.caller, id, f->staging, false, SNW), CSI_OK);
	assert_int_equal(hpp_publish(&f->cl.caller, id, f->staging, target, false, SNW, false),
			 CSI_OK);
	sr.name = "durable-snap";
	sr.source_volume_id = id;
	assert_int_equal(call(f, CSI_RPC_CREATE_SNAPSHOT, &sr, &so), CSI_OK);
	snprintf(snapid, sizeof(snapid), "%s", so->snapshot->snapshot_id);

	hwm = hpp_vmhwm_kb(f->h.pid);
	print_message("csi-hostpath peak RSS (VmHWM) after the lifecycle: %ld KiB\n", hwm);
	assert_true(hwm > 0);
#ifndef __SANITIZE_ADDRESS__
	assert_true(hwm <= 16 * 1024);
#endif

	assert_int_equal(WTERMSIG(hpp_proc_kill(&f->h, SIGKILL)), SIGKILL);
	assert_int_equal(hpp_proc_restart(&f->h, NULL), 0);
	assert_int_equal(hpp_client_wait_ready(&f->cl, 10000), 0);

	/* Everything acknowledged before the kill is still there. */
	assert_int_equal(hpp_create(&f->cl.caller, "durable", 1 << 20, 0, false, again), CSI_OK);
	assert_string_equal(id, again);
	assert_int_equal(call(f, CSI_RPC_LIST_VOLUMES, &lr, &lo), CSI_OK);
	assert_int_equal(lo->n_entries, 1);
	assert_int_equal(lo->entries[0]->status->n_published_node_ids, 1);
	sr.name = "durable-snap";
	assert_int_equal(call(f, CSI_RPC_CREATE_SNAPSHOT, &sr, &so), CSI_OK);
	assert_string_equal(so->snapshot->snapshot_id, snapid);
	assert_int_equal(hpp_publish(&f->cl.caller, id, f->staging, target, false, SNW, false),
			 CSI_OK);
	assert_int_equal(hpp_delete(&f->cl.caller, id), CSI_FAILED_PRECONDITION);
	assert_int_equal(hpp_unpublish(&f->cl.caller, id, target), CSI_OK);
	assert_int_equal(hpp_unstage(&f->cl.caller, id, f->staging), CSI_OK);
	assert_int_equal(hpp_ctl_unpublish(&f->cl.caller, id, "node-1"), CSI_OK);
	assert_int_equal(hpp_delete(&f->cl.caller, id), CSI_OK);
	assert_int_equal(hpp_umount_under(f->h.dir), 0);

	/* A clean stop exits 0 and removes the socket. */
	assert_int_equal(hpp_proc_kill(&f->h, SIGTERM), 0);
}

static void test_split_modes(void **state)
{
	struct fx *f = *state;
	const char *ctl_args[] = {"--mode", "controller", NULL};
	const char *node_args[] = {"--data-dir", f->h.data, "--mode", "node",
				   "--node-id",  "node-2",  NULL};
	Csi__V1__NodeGetInfoRequest ni = CSI__V1__NODE_GET_INFO_REQUEST__INIT;
	Csi__V1__NodeGetInfoResponse *info;
	Csi__V1__ListVolumesRequest lr = CSI__V1__LIST_VOLUMES_REQUEST__INIT;
	Csi__V1__ListVolumesResponse *lo;
	char id[64], target[200], path[300], backing[300];

	/* A controller plugin and a node plugin (node-2) share one data dir. */
	assert_int_equal(hpp_proc_restart(&f->h, ctl_args), 0);
	assert_int_equal(hpp_client_wait_ready(&f->cl, 10000), 0);
	assert_int_equal(hpp_proc_start(&f->h2, node_args), 0);
	assert_int_equal(hpp_client_open(&f->cl2, f->h2.endpoint), 0);
	assert_int_equal(call(f, CSI_RPC_NODE_GET_INFO, &ni, NULL), CSI_UNIMPLEMENTED);
	assert_int_equal(hpp_client_call(&f->cl2, CSI_RPC_NODE_GET_INFO, &ni, &info, 0), CSI_OK);
	assert_string_equal(info->node_id, "node-2");
	assert_int_equal(hpp_create(&f->cl2.caller, "split", 1 << 20, 0, false, id),
			 CSI_UNIMPLEMENTED);

	assert_int_equal(hpp_create(&f->cl.caller, "split", 1 << 20, 0, false, id), CSI_OK);
	assert_int_equal(hpp_ctl_publish(&f->cl.caller, id, "node-3", false, SNW, false),
			 CSI_NOT_FOUND);
	assert_int_equal(hpp_ctl_publish(&f->cl.caller, id, "node-2", false, SNW, false), CSI_OK);
	snprintf(target, sizeof(target), "%s/split", f->pods);
	assert_int_equal(hpp_stage(&f->cl2.caller, id, f->staging, false, SNW), CSI_OK);
	assert_int_equal(hpp_publish(&f->cl2.caller, id, f->staging, target, false, SNW, false),
			 CSI_OK);
	snprintf(path, sizeof(path), "%s/data.txt", target);
	put(path, "written on node-2");
	snprintf(backing, sizeof(backing), "%s/volumes/%s/data.txt", f->h.data, id);
	expect(backing, "written on node-2");
	assert_int_equal(call(f, CSI_RPC_LIST_VOLUMES, &lr, &lo), CSI_OK);
	assert_int_equal(lo->n_entries, 1);
	assert_int_equal(lo->entries[0]->status->n_published_node_ids, 1);
	assert_string_equal(lo->entries[0]->status->published_node_ids[0], "node-2");
	assert_int_equal(hpp_delete(&f->cl.caller, id), CSI_FAILED_PRECONDITION);
	assert_int_equal(hpp_unpublish(&f->cl2.caller, id, target), CSI_OK);
	assert_int_equal(hpp_unstage(&f->cl2.caller, id, f->staging), CSI_OK);
	assert_int_equal(hpp_ctl_unpublish(&f->cl.caller, id, "node-2"), CSI_OK);
	assert_int_equal(hpp_delete(&f->cl.caller, id), CSI_OK);
	assert_int_equal(hpp_umount_under(f->h.dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_lifecycle, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_readonly_and_block, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_snapshot_clone_expand, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pagination, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_restart_loses_nothing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_split_modes, setup, teardown),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	csi_grpc_shutdown();
	return rc;
}
