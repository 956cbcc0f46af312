/*
 * End-to-end tests of `csictl csi` against the real csi-hostpath plugin:
 * both programs run as processes, csictl through posix_spawn with its
 * stdout, stderr and exit status captured (test/lib/csictl_run.h). Covers the whole volume
 * lifecycle through the command line, snapshots and group snapshots,
 * JSON output checked with jansson, error codes and messages, usage
 * errors (exit 2) and hostile input.
 * Every mount under the temporary directory is removed in teardown.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent_proc.h"
#include "csictl_run.h"
#include "hostpath_proc.h"

/* Longest a single csictl run may take. */
#define RUN_DEADLINE_MS 30000

struct env {
	struct hpp_proc hp;
	const char *dir; /* the plugin's temporary directory; ours too */
	const char *endpoint; /* unix://<dir>/csi.sock */
	struct csictl_runner rn; /* runs csictl; frees what a failed test left */
};

/* Runs csictl with "-endpoint <plugin>" first, then the given arguments. */
#define CSICTL(env, r, ...)                                                                       \
	do {                                                                                      \
		char *args_[] = {"csi", "-endpoint", (char *)(env)->endpoint, __VA_ARGS__, NULL}; \
		csictl_runner_run(&(env)->rn, (r), NULL, args_);                                  \
	} while (0)

/* Runs csictl with exactly the given arguments. */
#define CSICTL_RAW(env, r, ...)                                  \
	do {                                                     \
		char *args_[] = {__VA_ARGS__, NULL};             \
		csictl_runner_run(&(env)->rn, (r), NULL, args_); \
	} while (0)

/* Creates a volume and returns its plugin ID (caller frees). */
static char *create_volume(struct env *env, const char *name, const char *extra_flag)
{
	struct csictl_run r;
	json_t *j;
	char *id;

	if (extra_flag)
		CSICTL(env, &r, "-o", "json", "create-volume", (char *)name, "-capacity", "1Mi",
		       (char *)extra_flag);
	else
		CSICTL(env, &r, "-o", "json", "create-volume", (char *)name, "-capacity", "1Mi");
	csictl_expect_ok(&r);
	j = csictl_expect_json(&r);
	id = strdup(json_string_value(json_object_get(json_object_get(j, "volume"), "volume_id")));
	assert_non_null(id);
	assert_true(id[0] != '\0');
	json_decref(j);
	csictl_runner_free(&env->rn, &r);
	return id;
}

static int setup(void **state)
{
	struct env *env = calloc(1, sizeof(*env));

	if (!env)
		return -1;
	*state = env;
	/* get-volume calls ControllerGetVolume, an alpha method of CSI v1.12. */
	if (hpp_proc_start(&env->hp, (const char *const[]){"--enable-alpha", NULL}) != 0)
		return -1;
	env->dir = env->hp.dir;
	env->endpoint = env->hp.endpoint;
	env->rn.dir = env->hp.dir;
	env->rn.deadline_ms = RUN_DEADLINE_MS;
	return 0;
}

static int teardown(void **state)
{
	struct env *env = *state;

	if (!env)
		return 0;
	csictl_runner_cleanup(&env->rn);
	/* Stops the plugin, detaches every mount left below the directory, removes it. */
	hpp_proc_cleanup(&env->hp);
	free(env);
	return 0;
}

static void test_help(void **state)
{
	struct env *env = *state;
	struct csictl_run r;

	CSICTL_RAW(env, &r, "-h");
	csictl_expect_ok(&r);
	assert_non_null(strstr(r.out, "csi"));
	assert_non_null(strstr(r.out, "agent"));
	csictl_runner_free(&env->rn, &r);
	CSICTL_RAW(env, &r, "csi", "-h");
	csictl_expect_ok(&r);
	for (const char *const *c = (const char *const[]){"info",
							  "caps",
							  "probe",
							  "create-volume",
							  "delete-volume",
							  "list-volumes",
							  "get-volume",
							  "modify-volume",
							  "capacity",
							  "validate",
							  "controller-publish",
							  "controller-unpublish",
							  "stage",
							  "unstage",
							  "publish",
							  "unpublish",
							  "stats",
							  "expand",
							  "snapshot create",
							  "snapshot delete",
							  "snapshot list",
							  "group-snapshot create",
							  "group-snapshot get",
							  "group-snapshot delete",
							  "node-info",
							  NULL};
	     *c; c++)
		if (!strstr(r.out, *c))
			fail_msg("csictl csi -h does not list %s", *c);
	csictl_runner_free(&env->rn, &r);
	CSICTL_RAW(env, &r, "csi", "stage", "-h");
	csictl_expect_ok(&r);
	assert_non_null(strstr(r.out, "stage ID STAGING_PATH"));
	csictl_runner_free(&env->rn, &r);
	CSICTL_RAW(env, &r, "csi");
	csictl_expect_fail(&r, 2, "usage: csictl csi");
	csictl_runner_free(&env->rn, &r);
	CSICTL_RAW(env, &r, "bogus");
	csictl_expect_fail(&r, 2, "unknown command");
	csictl_runner_free(&env->rn, &r);
}

static void test_identity(void **state)
{
	struct env *env = *state;
	struct csictl_run r;
	json_t *j, *ctl, *node;
	bool create = false, stage = false;
	size_t i;
	json_t *v;

	CSICTL(env, &r, "info");
	csictl_expect_ok(&r);
	assert_non_null(strstr(r.out, "name:"));
	assert_non_null(strstr(r.out, "vendor version:"));
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "info", "-o", "json");
	csictl_expect_ok(&r);
	j = csictl_expect_json(&r);
	assert_true(strlen(json_string_value(json_object_get(j, "name"))) > 0);
	json_decref(j);
	csictl_runner_free(&env->rn, &r);

	CSICTL(env, &r, "-o", "json", "caps");
	csictl_expect_ok(&r);
	j = csictl_expect_json(&r);
	ctl = json_object_get(j, "controller");
	node = json_object_get(j, "node");
	assert_true(json_is_array(ctl));
	assert_true(json_is_array(node));
	json_array_foreach(ctl, i, v) create |=
	    strcmp(json_string_value(v), "CREATE_DELETE_VOLUME") == 0;
	json_array_foreach(node, i, v) stage |=
	    strcmp(json_string_value(v), "STAGE_UNSTAGE_VOLUME") == 0;
	assert_true(create);
	assert_true(stage);
	json_decref(j);
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "caps");
	csictl_expect_ok(&r);
	assert_non_null(strstr(r.out, "SERVICE"));
	assert_non_null(strstr(r.out, "\ncontroller "));
	assert_non_null(strstr(r.out, "CREATE_DELETE_VOLUME\n"));
	csictl_runner_free(&env->rn, &r);

	CSICTL(env, &r, "probe");
	csictl_expect_ok(&r);
	assert_string_equal(r.out, "ready: true\n");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "node-info", "-o", "json");
	csictl_expect_ok(&r);
	j = csictl_expect_json(&r);
	assert_string_equal(json_string_value(json_object_get(j, "node_id")), "node-1");
	json_decref(j);
	csictl_runner_free(&env->rn, &r);
}

static void test_lifecycle(void **state)
{
	struct env *env = *state;
	char staging[300], pubdir[300], target[300], file[400], sfile[400];
	char *id = create_volume(env, "life-1", NULL);
	struct csictl_run r;
	json_t *j;
	FILE *f;
	char buf[64] = "";

	/* Creating again with the same name is idempotent: same ID. */
	{
		char *again = create_volume(env, "life-1", NULL);

		assert_string_equal(again, id);
		free(again);
	}
	CSICTL(env, &r, "list-volumes");
	csictl_expect_ok(&r);
	assert_non_null(strstr(r.out, "VOLUME ID"));
	assert_non_null(strstr(r.out, id));
	assert_non_null(strstr(r.out, "1Mi"));
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "validate", id);
	csictl_expect_ok(&r);
	assert_non_null(strstr(r.out, "confirmed:  yes"));
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "get-volume", id);
	csictl_expect_ok(&r);
	assert_non_null(strstr(r.out, "volume id:"));
	assert_non_null(strstr(r.out, "published nodes:"));
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "modify-volume", id);
	csictl_expect_fail(&r, 2, "-mutable-param");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "capacity", "-o", "json");
	csictl_expect_ok(&r);
	j = csictl_expect_json(&r);
	assert_true(json_integer_value(json_object_get(j, "available_capacity")) > 0);
	json_decref(j);
	csictl_runner_free(&env->rn, &r);

	CSICTL(env, &r, "controller-publish", id, "node-1", "-o", "json");
	csictl_expect_ok(&r);
	j = csictl_expect_json(&r);
	assert_true(json_is_object(j));
	json_decref(j);
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "-o", "json", "get-volume", id);
	csictl_expect_ok(&r);
	j = csictl_expect_json(&r);
	assert_string_equal(
	    json_string_value(json_array_get(
		json_object_get(json_object_get(j, "status"), "published_node_ids"), 0)),
	    "node-1");
	json_decref(j);
	csictl_runner_free(&env->rn, &r);

	/* The CO's part: the staging directory and the parent of the target. */
	snprintf(staging, sizeof(staging), "%s/staging", env->dir);
	snprintf(pubdir, sizeof(pubdir), "%s/pub", env->dir);
	snprintf(target, sizeof(target), "%s/target", pubdir);
	assert_int_equal(mkdir(staging, 0750), 0);
	assert_int_equal(mkdir(pubdir, 0750), 0);
	for (int i = 0; i < 2; i++) {
		CSICTL(env, &r, "stage", id, staging);
		csictl_expect_ok(&r);
		assert_non_null(strstr(r.out, "staged at"));
		csictl_runner_free(&env->rn, &r);
	}
	assert_true(agent_proc_is_mount(staging));
	for (int i = 0; i < 2; i++) {
		CSICTL(env, &r, "publish", id, target, "-staging", staging);
		csictl_expect_ok(&r);
		csictl_runner_free(&env->rn, &r);
	}
	assert_true(agent_proc_is_mount(target));

	/* Data written through the target is seen through the staging mount. */
	snprintf(file, sizeof(file), "%s/hello.txt", target);
	snprintf(sfile, sizeof(sfile), "%s/hello.txt", staging);
	f = fopen(file, "w");
	assert_non_null(f);
	fputs("csictl was here", f);
	fclose(f);
	f = fopen(sfile, "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	assert_string_equal(buf, "csictl was here");

	CSICTL(env, &r, "stats", id, target);
	csictl_expect_ok(&r);
	assert_non_null(strstr(r.out, "UNIT"));
	assert_non_null(strstr(r.out, "BYTES"));
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "-o", "json", "stats", id, target);
	csictl_expect_ok(&r);
	j = csictl_expect_json(&r);
	assert_true(json_array_size(json_object_get(j, "usage")) >= 1);
	json_decref(j);
	csictl_runner_free(&env->rn, &r);

	CSICTL(env, &r, "expand", id, "2Mi");
	csictl_expect_ok(&r);
	assert_non_null(strstr(r.out, "capacity:"));
	assert_non_null(strstr(r.out, "2Mi"));
	csictl_runner_free(&env->rn, &r);

	for (int i = 0; i < 2; i++) {
		CSICTL(env, &r, "unpublish", id, target);
		csictl_expect_ok(&r);
		csictl_runner_free(&env->rn, &r);
	}
	assert_false(agent_proc_is_mount(target));
	for (int i = 0; i < 2; i++) {
		CSICTL(env, &r, "unstage", id, staging);
		csictl_expect_ok(&r);
		csictl_runner_free(&env->rn, &r);
	}
	assert_false(agent_proc_is_mount(staging));
	CSICTL(env, &r, "controller-unpublish", id, "node-1");
	csictl_expect_ok(&r);
	assert_non_null(strstr(r.out, "unpublished from node node-1"));
	csictl_runner_free(&env->rn, &r);
	for (int i = 0; i < 2; i++) {
		CSICTL(env, &r, "delete-volume", id);
		csictl_expect_ok(&r);
		csictl_runner_free(&env->rn, &r);
	}
	CSICTL(env, &r, "list-volumes");
	csictl_expect_ok(&r);
	assert_null(strstr(r.out, id));
	csictl_runner_free(&env->rn, &r);
	free(id);
}

static void test_block(void **state)
{
	struct env *env = *state;
	char staging[300], pubdir[300], target[300];
	char *id = create_volume(env, "blk-1", "-block");
	struct csictl_run r;
	struct stat st;

	snprintf(staging, sizeof(staging), "%s/blkstage", env->dir);
	snprintf(pubdir, sizeof(pubdir), "%s/blkpub", env->dir);
	snprintf(target, sizeof(target), "%s/dev", pubdir);
	assert_int_equal(mkdir(staging, 0750), 0);
	assert_int_equal(mkdir(pubdir, 0750), 0);
	CSICTL(env, &r, "stage", id, staging, "-block", "-fs-type", "ext4");
	csictl_expect_fail(&r, 2, "-block cannot be combined");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "controller-publish", id, "node-1", "-block");
	csictl_expect_ok(&r);
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "stage", id, staging, "-block");
	csictl_expect_ok(&r);
	csictl_runner_free(&env->rn, &r);
	/* With STAGE_UNSTAGE, publishing without the staging path is refused. */
	CSICTL(env, &r, "publish", id, target, "-block");
	csictl_expect_fail(&r, 1, "error: FAILED_PRECONDITION");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "publish", id, target, "-block", "-staging", staging, "-access-mode",
	       "SINGLE_NODE_WRITER", "-readonly");
	csictl_expect_ok(&r);
	assert_non_null(strstr(r.out, "(read-only)"));
	csictl_runner_free(&env->rn, &r);
	/* A block volume is published as a file the plugin created. */
	assert_int_equal(stat(target, &st), 0);
	assert_false(S_ISDIR(st.st_mode));
	assert_true(agent_proc_is_mount(target));
	CSICTL(env, &r, "unpublish", id, target);
	csictl_expect_ok(&r);
	csictl_runner_free(&env->rn, &r);
	assert_int_equal(stat(target, &st), -1);
	CSICTL(env, &r, "unstage", id, staging);
	csictl_expect_ok(&r);
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "controller-unpublish", id);
	csictl_expect_ok(&r);
	assert_non_null(strstr(r.out, "from every node"));
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "delete-volume", id);
	csictl_expect_ok(&r);
	csictl_runner_free(&env->rn, &r);
	free(id);
}

static void test_snapshots(void **state)
{
	struct env *env = *state;
	char *id = create_volume(env, "snap-src", NULL), *sid, *clone;
	struct csictl_run r;
	json_t *j;

	CSICTL(env, &r, "-o", "json", "snapshot", "create", "snap-1", id);
	csictl_expect_ok(&r);
	j = csictl_expect_json(&r);
	sid = strdup(
	    json_string_value(json_object_get(json_object_get(j, "snapshot"), "snapshot_id")));
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(j, "snapshot"), "source_volume_id")),
	    id);
	assert_non_null(json_object_get(json_object_get(j, "snapshot"), "ready_to_use"));
	json_decref(j);
	csictl_runner_free(&env->rn, &r);

	CSICTL(env, &r, "snapshot", "list");
	csictl_expect_ok(&r);
	assert_non_null(strstr(r.out, "SNAPSHOT ID"));
	assert_non_null(strstr(r.out, sid));
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "snapshot", "list", "-o", "json", "-source-volume", id);
	csictl_expect_ok(&r);
	j = csictl_expect_json(&r);
	assert_int_equal(json_array_size(json_object_get(j, "entries")), 1);
	json_decref(j);
	csictl_runner_free(&env->rn, &r);

	{
		char flag[300];

		snprintf(flag, sizeof(flag), "-from-snapshot=%s", sid);
		clone = create_volume(env, "from-snap", flag);
	}
	CSICTL(env, &r, "delete-volume", clone);
	csictl_expect_ok(&r);
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "snapshot", "delete", sid);
	csictl_expect_ok(&r);
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "snapshot", "list", "-o", "json");
	csictl_expect_ok(&r);
	assert_null(strstr(r.out, sid));
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "delete-volume", id);
	csictl_expect_ok(&r);
	csictl_runner_free(&env->rn, &r);
	free(clone);
	free(sid);
	free(id);
}

/* The member snapshot IDs of a group snapshot answer (JSON), into ids (caller frees each). */
static size_t group_members(json_t *group, char **ids, size_t max, const char *group_id)
{
	json_t *snaps = json_object_get(group, "snapshots");
	const char *when = json_string_value(json_object_get(group, "creation_time"));
	size_t n = json_array_size(snaps);

	assert_true(n >= 1 && n <= max);
	assert_non_null(when);
	for (size_t i = 0; i < n; i++) {
		json_t *s = json_array_get(snaps, i);

		ids[i] = strdup(json_string_value(json_object_get(s, "snapshot_id")));
		assert_non_null(ids[i]);
		assert_string_equal(json_string_value(json_object_get(s, "group_snapshot_id")),
				    group_id);
		/* Every member is cut at the group's one point in time. */
		assert_string_equal(json_string_value(json_object_get(s, "creation_time")), when);
	}
	return n;
}

static void test_group_snapshots(void **state)
{
	struct env *env = *state;
	char *v1 = create_volume(env, "gs-a", NULL), *v2 = create_volume(env, "gs-b", NULL);
	char *gid, *snaps[2], *again[2];
	struct csictl_run r;
	json_t *j;

	CSICTL(env, &r, "-o", "json", "group-snapshot", "create", "gs-1", v1, v2);
	csictl_expect_ok(&r);
	j = csictl_expect_json(&r);
	gid = strdup(json_string_value(
	    json_object_get(json_object_get(j, "group_snapshot"), "group_snapshot_id")));
	assert_non_null(gid);
	assert_int_equal(group_members(json_object_get(j, "group_snapshot"), snaps, 2, gid), 2);
	json_decref(j);
	csictl_runner_free(&env->rn, &r);

	/* The same request again (sources in another order): the same group. */
	CSICTL(env, &r, "-o", "json", "group-snapshot", "create", "gs-1", v2, v1);
	csictl_expect_ok(&r);
	j = csictl_expect_json(&r);
	assert_int_equal(group_members(json_object_get(j, "group_snapshot"), again, 2, gid), 2);
	for (int i = 0; i < 2; i++) {
		assert_string_equal(again[i], snaps[i]);
		free(again[i]);
	}
	json_decref(j);
	csictl_runner_free(&env->rn, &r);

	CSICTL(env, &r, "group-snapshot", "get", gid, snaps[1], snaps[0]);
	csictl_expect_ok(&r);
	assert_non_null(strstr(r.out, "group snapshot id:"));
	assert_non_null(strstr(r.out, gid));
	assert_non_null(strstr(r.out, "SNAPSHOT ID"));
	assert_non_null(strstr(r.out, snaps[0]));
	assert_non_null(strstr(r.out, snaps[1]));
	assert_non_null(strstr(r.out, v1));
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "snapshot", "list", "-o", "json", "-snapshot-id", snaps[0]);
	csictl_expect_ok(&r);
	assert_non_null(strstr(r.out, "\"group_snapshot_id\""));
	assert_non_null(strstr(r.out, gid));
	csictl_runner_free(&env->rn, &r);

	/* Each error code reaches the user with the plugin's message. */
	CSICTL(env, &r, "group-snapshot", "get", gid, snaps[0]);
	csictl_expect_fail(&r, 1, "error: INVALID_ARGUMENT: snapshot_ids do not match");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "snapshot", "delete", snaps[0]);
	csictl_expect_fail(&r, 1, "error: INVALID_ARGUMENT: snapshot");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "group-snapshot", "create", "gs-1", v1);
	csictl_expect_fail(&r, 1, "error: ALREADY_EXISTS: group snapshot");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "group-snapshot", "create", "gs-2", v1, "vol-0123456789abcdef");
	csictl_expect_fail(&r, 1, "error: NOT_FOUND: volume vol-0123456789abcdef not found");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "group-snapshot", "create", "gs-3");
	csictl_expect_fail(&r, 2, "usage: csictl csi group-snapshot create NAME VOL...");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "group-snapshot", "remove", gid);
	csictl_expect_fail(&r, 2, "usage: csictl csi group-snapshot create|get|delete");
	csictl_runner_free(&env->rn, &r);

	/* Delete takes the members along, and is idempotent. */
	CSICTL(env, &r, "group-snapshot", "delete", gid, snaps[0], snaps[1]);
	csictl_expect_ok(&r);
	assert_non_null(strstr(r.out, "deleted"));
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "-o", "json", "group-snapshot", "delete", gid, snaps[0], snaps[1]);
	csictl_expect_ok(&r);
	assert_string_equal(r.out, "{}\n");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "group-snapshot", "get", gid, snaps[0], snaps[1]);
	csictl_expect_fail(&r, 1, "error: NOT_FOUND: group snapshot");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "snapshot", "list", "-o", "json", "-source-volume", v1);
	csictl_expect_ok(&r);
	assert_null(strstr(r.out, snaps[0]));
	csictl_runner_free(&env->rn, &r);
	for (int i = 0; i < 2; i++) {
		CSICTL(env, &r, "delete-volume", i ? v2 : v1);
		csictl_expect_ok(&r);
		csictl_runner_free(&env->rn, &r);
		free(snaps[i]);
	}
	free(gid);
	free(v1);
	free(v2);
}

static void test_pagination(void **state)
{
	struct env *env = *state;
	char *ids[5];
	struct csictl_run r;
	json_t *j;
	int rows = 0;

	for (int i = 0; i < 5; i++) {
		char name[32];

		snprintf(name, sizeof(name), "page-%d", i);
		ids[i] = create_volume(env, name, NULL);
	}
	CSICTL(env, &r, "list-volumes", "-max-entries", "2");
	csictl_expect_ok(&r);
	for (const char *p = r.out; (p = strchr(p, '\n')); p++)
		rows++;
	/* Header, two volumes, the next token. */
	assert_int_equal(rows, 4);
	assert_non_null(strstr(r.out, "next token: "));
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "list-volumes", "-max-entries", "2", "-o", "json");
	csictl_expect_ok(&r);
	j = csictl_expect_json(&r);
	assert_int_equal(json_array_size(json_object_get(j, "entries")), 2);
	assert_true(strlen(json_string_value(json_object_get(j, "next_token"))) > 0);
	json_decref(j);
	csictl_runner_free(&env->rn, &r);
	/* Without -max-entries every page is fetched. */
	CSICTL(env, &r, "list-volumes", "-o", "json");
	csictl_expect_ok(&r);
	j = csictl_expect_json(&r);
	assert_true(json_array_size(json_object_get(j, "entries")) >= 5);
	assert_string_equal(json_string_value(json_object_get(j, "next_token")), "");
	json_decref(j);
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "list-volumes", "-starting-token", "no-such-token");
	csictl_expect_fail(&r, 1, "error: ABORTED");
	csictl_runner_free(&env->rn, &r);
	for (int i = 0; i < 5; i++) {
		CSICTL(env, &r, "delete-volume", ids[i]);
		csictl_expect_ok(&r);
		csictl_runner_free(&env->rn, &r);
		free(ids[i]);
	}
}

static void test_errors(void **state)
{
	struct env *env = *state;
	struct csictl_run r;
	char bad_ep[300];
	char *env_ep[2];
	char ep_var[300];

	CSICTL(env, &r, "validate", "vol-9");
	csictl_expect_fail(&r, 1, "error: NOT_FOUND: ");
	assert_string_equal(r.out, "");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "controller-publish", "vol-9", "node-1");
	csictl_expect_fail(&r, 1, "error: NOT_FOUND");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "expand", "vol-9", "1Gi");
	csictl_expect_fail(&r, 1, "error: NOT_FOUND");
	csictl_runner_free(&env->rn, &r);
	/* Deleting a volume that does not exist is OK in CSI. */
	CSICTL(env, &r, "delete-volume", "vol-9");
	csictl_expect_ok(&r);
	csictl_runner_free(&env->rn, &r);

	CSICTL(env, &r, "create-volume", "x", "-capacity", "12Q");
	csictl_expect_fail(&r, 2, "invalid size \"12Q\"");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "create-volume", "x", "-capacity", "1Gi", "-limit", "1Mi");
	csictl_expect_fail(&r, 2, "-limit is smaller");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "create-volume", "x", "-access-mode", "sometimes");
	csictl_expect_fail(&r, 2, "unknown access mode \"sometimes\"");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "create-volume", "x", "-param", "novalue");
	csictl_expect_fail(&r, 2, "KEY=VALUE");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "create-volume");
	csictl_expect_fail(&r, 2, "usage: csictl csi create-volume NAME");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "delete-volume", "a", "b");
	csictl_expect_fail(&r, 2, "usage: csictl csi delete-volume ID");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "info", "-frobnicate");
	csictl_expect_fail(&r, 2, "unknown flag -frobnicate");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "info", "-o", "yaml");
	csictl_expect_fail(&r, 2, "-o must be table or json");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "info", "-timeout", "soon");
	csictl_expect_fail(&r, 2, "invalid duration");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "list-volumes", "-max-entries", "-3");
	csictl_expect_fail(&r, 2, "");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "snapshot", "take");
	csictl_expect_fail(&r, 2, "usage: csictl csi snapshot create|delete|list");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "teleport");
	csictl_expect_fail(&r, 2, "unknown command \"teleport\"");
	csictl_runner_free(&env->rn, &r);

	/* No endpoint at all, a relative one, and one where nobody listens. */
	CSICTL_RAW(env, &r, "csi", "info");
	csictl_expect_fail(&r, 2, "no endpoint");
	csictl_runner_free(&env->rn, &r);
	CSICTL_RAW(env, &r, "csi", "-endpoint", "unix://relative.sock", "info");
	csictl_expect_fail(&r, 2, "endpoint");
	csictl_runner_free(&env->rn, &r);
	snprintf(bad_ep, sizeof(bad_ep), "unix://%s/nobody.sock", env->dir);
	CSICTL_RAW(env, &r, "csi", "-endpoint", bad_ep, "-timeout", "2s", "probe");
	csictl_expect_fail(&r, 1, "error: UNAVAILABLE");
	csictl_runner_free(&env->rn, &r);

	/* CSI_ENDPOINT is the default endpoint. */
	snprintf(ep_var, sizeof(ep_var), "CSI_ENDPOINT=%s", env->endpoint);
	env_ep[0] = ep_var;
	env_ep[1] = NULL;
	{
		char *args[] = {"csi", "probe", NULL};

		csictl_runner_run(&env->rn, &r, env_ep, args);
	}
	csictl_expect_ok(&r);
	csictl_runner_free(&env->rn, &r);
}

static void test_faults(void **state)
{
	struct env *env = *state;
	struct csictl_run r;

	/* A call slower than -timeout ends with DEADLINE_EXCEEDED. */
	assert_int_equal(hpp_write_file(env->hp.faults, "GetPluginInfo delay_ms=3000\n"), 0);
	CSICTL(env, &r, "info", "-timeout", "300ms");
	csictl_expect_fail(&r, 1, "error: DEADLINE_EXCEEDED");
	csictl_runner_free(&env->rn, &r);
	/* Probe answering ready=false is an answer, not a failure. */
	assert_int_equal(hpp_write_file(env->hp.faults, "Probe ready=false\n"), 0);
	CSICTL(env, &r, "probe");
	csictl_expect_ok(&r);
	assert_string_equal(r.out, "ready: false\n");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "probe", "-o", "json");
	csictl_expect_ok(&r);
	assert_non_null(strstr(r.out, "\"ready\": false"));
	csictl_runner_free(&env->rn, &r);
	/* The plugin's code and message are shown; escapes in it are neutralised. */
	assert_int_equal(hpp_write_file(env->hp.faults, "CreateVolume code=RESOURCE_EXHAUSTED "
							"msg=\"pool \x1b[2J full\"\n"),
			 0);
	CSICTL(env, &r, "create-volume", "f-1");
	csictl_expect_fail(&r, 1, "error: RESOURCE_EXHAUSTED: pool ");
	assert_null(strchr(r.err, '\x1b'));
	assert_non_null(strstr(r.err, "full"));
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "list-volumes", "-o", "json");
	csictl_expect_ok(&r);
	csictl_runner_free(&env->rn, &r);
	assert_int_equal(hpp_write_file(env->hp.faults, ""), 0);
}

static void test_hostile(void **state)
{
	struct env *env = *state;
	char *long_name = malloc(1025), *id;
	struct csictl_run r;

	assert_non_null(long_name);
	memset(long_name, 'n', 1024);
	long_name[1024] = '\0';
	CSICTL(env, &r, "create-volume", "../../etc");
	csictl_expect_fail(&r, 1, "error: INVALID_ARGUMENT");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "create-volume", long_name);
	csictl_expect_fail(&r, 1, "error: INVALID_ARGUMENT");
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "stage", "../x", "/tmp");
	csictl_expect_fail(&r, 1, "error:");
	csictl_runner_free(&env->rn, &r);
	/* Bytes that are not UTF-8 never reach the plugin. */
	CSICTL(env, &r, "create-volume", "bad\xff\xfe");
	csictl_expect_fail(&r, 2, "not valid UTF-8");
	csictl_runner_free(&env->rn, &r);
	/* Terminal escapes in a name never come back out raw. */
	CSICTL(env, &r, "validate", "\x1b[31mred");
	assert_int_equal(r.status, 1);
	assert_null(strchr(r.err, '\x1b'));
	csictl_runner_free(&env->rn, &r);
	/* A name that looks like a flag goes after "--". */
	CSICTL(env, &r, "validate", "--", "-dash");
	csictl_expect_fail(&r, 1, "error: NOT_FOUND");
	csictl_runner_free(&env->rn, &r);
	/* Secrets are accepted but never printed. */
	id = create_volume(env, "sec-1", "-secret=pw=hunter2");
	CSICTL(env, &r, "-o", "json", "create-volume", "sec-1", "-secret", "pw=hunter2");
	csictl_expect_ok(&r);
	assert_null(strstr(r.out, "hunter2"));
	assert_null(strstr(r.err, "hunter2"));
	csictl_runner_free(&env->rn, &r);
	CSICTL(env, &r, "delete-volume", id, "-secret", "pw=hunter2");
	csictl_expect_ok(&r);
	assert_null(strstr(r.out, "hunter2"));
	csictl_runner_free(&env->rn, &r);
	/* Secrets can come from a file instead of the command line. */
	{
		char path[128];

		snprintf(path, sizeof(path), "%s/secrets.json", env->dir);
		assert_int_equal(hpp_write_file(path, "{\"pw\": \"hunter2\"}"), 0);
		CSICTL(env, &r, "-o", "json", "create-volume", "sec-2", "-secrets-file", path);
		csictl_expect_ok(&r);
		assert_null(strstr(r.out, "hunter2"));
		csictl_runner_free(&env->rn, &r);
		assert_int_equal(hpp_write_file(path, "{\"pw\": 1}"), 0);
		CSICTL(env, &r, "create-volume", "sec-3", "-secrets-file", path);
		csictl_expect_fail(&r, 2, "-secrets-file");
		csictl_runner_free(&env->rn, &r);
		CSICTL(env, &r, "create-volume", "sec-3", "-secrets-file", "/nonexistent/s.json");
		csictl_expect_fail(&r, 2, "No such file");
		csictl_runner_free(&env->rn, &r);
	}
	free(id);
	free(long_name);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_help),      cmocka_unit_test(test_identity),
	    cmocka_unit_test(test_lifecycle), cmocka_unit_test(test_block),
	    cmocka_unit_test(test_snapshots), cmocka_unit_test(test_pagination),
	    cmocka_unit_test(test_errors),    cmocka_unit_test(test_faults),
	    cmocka_unit_test(test_hostile),   cmocka_unit_test(test_group_snapshots),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
