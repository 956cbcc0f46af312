/*
 * End-to-end tests of the operator's ways out, against a real `csid
 * agent` supervising csi-hostpath whose fault script refuses node RPCs:
 * a stage refused with INVALID_ARGUMENT whose rollback's NodeUnstage is
 * refused too leaves nothing behind (no record, no directory) and a later
 * valid mount works; DELETE /v1/agent/mounts/<vol>/<alloc>?force=true of
 * a mount whose NodeUnpublish and NodeUnstage are refused, with the
 * target busy (an open directory), unmounts everything (the target
 * lazily), drops the record and answers what it skipped; a second
 * allocation naming another external ID is refused with a conflict. Real
 * bind mounts (the tests run as root); teardown detaches every mount under the
 * test's directory even when a test fails.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_proc.h"

/* A directory held open in a target, making it busy; closed by the teardown. */
static int force_busy_fd = -1;

static int setup(void **state)
{
	return agent_proc_setup_hostpath(state, NULL);
}

static int teardown(void **state)
{
	if (force_busy_fd >= 0)
		close(force_busy_fd);
	force_busy_fd = -1;
	return agent_proc_teardown(state);
}

/* <data_dir>/mounts/<sub> into buf. */
static void force_path(const struct agent_proc *a, const char *sub, char *buf, size_t len)
{
	snprintf(buf, len, "%s/mounts/%s", a->data_dir, sub);
}

/* PUT /v1/agent/mounts of vol for alloc with external_id; returns the status and *out. */
static long force_mount(struct agent_proc *a, const char *vol, const char *ext, const char *alloc,
			json_t **out)
{
	char body[512];

	snprintf(body, sizeof(body),
		 "{\"volume_id\": \"%s\", \"external_id\": \"%s\", \"plugin_id\": \"%s\","
		 " \"alloc_id\": \"%s\", \"access_mode\": \"single-node-multi-writer\"}",
		 vol, ext, AGENT_PROC_HP_ID, alloc);
	return agent_proc_http(a, "PUT", "/v1/agent/mounts", body, out);
}

/* Whether the JSON array arr holds a string containing needle. */
static bool force_has(const json_t *arr, const char *needle)
{
	const json_t *v;
	size_t i;

	json_array_foreach(arr, i, v) if (json_is_string(v) &&
					  strstr(json_string_value(v), needle)) return true;
	return false;
}

/* The "lazy" flag of the detached entry whose path is path, or -1 when it is not listed. */
static int force_detached(const json_t *doc, const char *path)
{
	const json_t *v;
	size_t i;

	json_array_foreach(json_object_get(doc, "detached"), i, v)
	{
		if (strcmp(json_string_value(json_object_get(v, "path")), path) == 0)
			return json_is_true(json_object_get(v, "lazy"));
	}
	return -1;
}

/* Stage and unstage both refused: the rollback is done anyway, nothing stays. */
static void test_refused_stage(void **state)
{
	struct agent_proc *a = *state;
	char vol[64], dir[AGENT_PROC_PATH + 64];
	json_t *doc = NULL;

	assert_int_equal(agent_proc_create_volume(a, "refused", vol), 0);
	assert_int_equal(agent_proc_write_faults(a, "NodeStageVolume code=INVALID_ARGUMENT "
						    "msg=\"no such volume id\"\n"
						    "NodeUnstageVolume code=INVALID_ARGUMENT "
						    "msg=\"no such volume id\"\n"),
			 0);
	assert_int_equal(force_mount(a, "refused", vol, "a1", &doc), 400);
	assert_non_null(strstr(json_string_value(json_object_get(doc, "error")), "no such volume"));
	json_decref(doc);
	doc = NULL;
	assert_int_equal(agent_proc_mount_count(a), 0);
	force_path(a, "per-alloc/a1", dir, sizeof(dir));
	assert_int_not_equal(access(dir, F_OK), 0);
	/* The unmount has nothing to do, and the valid mount of the same pair works. */
	assert_int_equal(agent_proc_unmount(a, "refused", "a1"), 404);
	assert_int_equal(agent_proc_write_faults(a, ""), 0);
	assert_int_equal(force_mount(a, "refused", vol, "a1", &doc), 200);
	json_decref(doc);
	assert_int_equal(agent_proc_unmount(a, "refused", "a1"), 200);
	force_path(a, "", dir, sizeof(dir));
	assert_int_equal(agent_proc_mounts_under(dir), 0);
}

/* Unpublish and unstage refused, target busy: ?force=true gets out, and says how. */
static void test_force_delete(void **state)
{
	struct agent_proc *a = *state;
	char vol[64], target[1024], staging[1024], dir[AGENT_PROC_PATH + 64];
	json_t *doc = NULL;

	assert_int_equal(agent_proc_create_volume(a, "stuck", vol), 0);
	assert_int_equal(force_mount(a, "stuck", vol, "a1", &doc), 200);
	snprintf(target, sizeof(target), "%s", json_string_value(json_object_get(doc, "target")));
	snprintf(staging, sizeof(staging), "%s", json_string_value(json_object_get(doc, "source")));
	json_decref(doc);
	doc = NULL;
	assert_true(agent_proc_is_mount(target));
	assert_true(agent_proc_is_mount(staging));
	assert_int_equal(agent_proc_write_faults(a, "NodeUnpublishVolume code=INVALID_ARGUMENT "
						    "msg=\"will not\"\n"
						    "NodeUnstageVolume code=INVALID_ARGUMENT "
						    "msg=\"will not\"\n"),
			 0);
	/* An ordinary unmount fails and keeps everything. */
	assert_int_equal(agent_proc_unmount(a, "stuck", "a1"), 400);
	assert_int_equal(agent_proc_mount_count(a), 1);
	assert_true(agent_proc_is_mount(target));
	/* force=maybe is a bad request, not a force. */
	assert_int_equal(
	    agent_proc_http(a, "DELETE", "/v1/agent/mounts/stuck/a1?force=maybe", NULL, NULL), 400);
	assert_int_equal(agent_proc_mount_count(a), 1);

	force_busy_fd = open(target, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(force_busy_fd >= 0);
	assert_int_equal(
	    agent_proc_http(a, "DELETE", "/v1/agent/mounts/stuck/a1?force=true", NULL, &doc), 200);
	assert_true(json_is_true(json_object_get(doc, "unmounted")));
	assert_true(json_is_true(json_object_get(doc, "forced")));
	assert_true(force_has(json_object_get(doc, "skipped"), "will not"));
	assert_true(force_has(json_object_get(doc, "skipped"), "INVALID_ARGUMENT"));
	assert_int_equal(force_detached(doc, target), 1);
	assert_int_equal(force_detached(doc, staging), 0);
	assert_int_equal(json_array_size(json_object_get(doc, "kept")), 0);
	json_decref(doc);
	doc = NULL;
	close(force_busy_fd);
	force_busy_fd = -1;
	/* Nothing stays mounted under our paths, no record, no directory. */
	assert_false(agent_proc_is_mount(target));
	assert_false(agent_proc_is_mount(staging));
	force_path(a, "", dir, sizeof(dir));
	assert_int_equal(agent_proc_mounts_under(dir), 0);
	assert_int_equal(agent_proc_mount_count(a), 0);
	force_path(a, "per-alloc/a1", dir, sizeof(dir));
	assert_int_not_equal(access(dir, F_OK), 0);
	assert_int_not_equal(access(staging, F_OK), 0);
	assert_int_equal(agent_proc_unmount(a, "stuck", "a1"), 404);
	/* The plugin is fine again: the volume mounts and unmounts as usual. */
	assert_int_equal(agent_proc_write_faults(a, ""), 0);
	assert_int_equal(force_mount(a, "stuck", vol, "a1", &doc), 200);
	json_decref(doc);
	assert_int_equal(agent_proc_unmount(a, "stuck", "a1"), 200);
}

/* A second allocation must name the staged plugin volume. */
static void test_conflicting_external_id(void **state)
{
	struct agent_proc *a = *state;
	char vol1[64], vol2[64];
	json_t *doc = NULL;
	const char *msg;

	assert_int_equal(agent_proc_create_volume(a, "one", vol1), 0);
	assert_int_equal(agent_proc_create_volume(a, "two", vol2), 0);
	assert_int_equal(force_mount(a, "shared", vol1, "a1", &doc), 200);
	json_decref(doc);
	doc = NULL;
	assert_int_equal(force_mount(a, "shared", vol2, "a2", &doc), 409);
	msg = json_string_value(json_object_get(doc, "error"));
	assert_non_null(msg);
	assert_non_null(strstr(msg, vol1));
	assert_non_null(strstr(msg, vol2));
	json_decref(doc);
	assert_int_equal(agent_proc_mount_count(a), 1);
	assert_int_equal(agent_proc_unmount(a, "shared", "a1"), 200);
	assert_int_equal(agent_proc_mount_count(a), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_refused_stage, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_force_delete, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_conflicting_external_id, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
