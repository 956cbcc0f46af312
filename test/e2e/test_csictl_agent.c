/*
 * End-to-end tests of `csictl agent` against a real `csid agent` that
 * supervises csi-hostpath (test/lib/agent_proc.h): plugins and mounts as
 * tables and JSON (with the external ID and the volume context), a mount
 * and an unmount through the command line (the mount checked in the
 * mount table, the context from a -context-file), unmount -force when the
 * plugin refuses to unpublish and unstage, the address from the flag and
 * from CSID_AGENT_ADDR, API errors printed as "error: <code>: <message>"
 * with exit status 1, the message when no agent listens, and usage errors
 * with exit status 2. Teardown kills the
 * agent and its plugin and detaches every mount under the directory.
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

#include "agent_proc.h"
#include "csictl_run.h"

#define RUN_DEADLINE_MS 60000

struct env {
	struct agent_proc a;
	char addr[AGENT_PROC_PATH + 8];
	char vol[64];
	struct csictl_runner rn; /* runs csictl; frees what a failed test left */
};

/* Runs "csictl agent -address <agent> ARGS...". */
#define AGENT(env, r, ...)                                                             \
	do {                                                                           \
		char *args_[] = {"agent", "-address", (env)->addr, __VA_ARGS__, NULL}; \
		csictl_runner_run(&(env)->rn, (r), NULL, args_);                       \
	} while (0)

static int setup(void **state)
{
	struct env *env = calloc(1, sizeof(*env));
	char cfg[4096];

	if (!env || agent_proc_init(&env->a) != 0)
		return -1;
	*state = env;
	env->rn.dir = env->a.dir;
	env->rn.deadline_ms = RUN_DEADLINE_MS;
	snprintf(env->addr, sizeof(env->addr), "unix:%s", env->a.sock);
	if (agent_proc_hostpath_config(&env->a, "{}", cfg, sizeof(cfg)) != 0 ||
	    agent_proc_write_config(&env->a, cfg) != 0 ||
	    agent_proc_write_faults(&env->a, "") != 0 || agent_proc_start(&env->a) != 0)
		return -1;
	if (agent_proc_wait_ready(&env->a, 20000) != 0 ||
	    !agent_proc_wait_healthy(&env->a, AGENT_PROC_HP_ID, 20000))
		return -1;
	if (agent_proc_create_volume(&env->a, "csictl-vol", env->vol) != 0)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	struct env *env = *state;

	if (env) {
		csictl_runner_cleanup(&env->rn);
		agent_proc_cleanup(&env->a);
		free(env);
	}
	return 0;
}

static void test_plugins(void **state)
{
	struct env *env = *state;
	struct csictl_run r;
	json_t *j, *p;
	size_t i;
	bool found = false;

	AGENT(env, &r, "self");
	csictl_expect_ok(&r);
	assert_non_null(strstr(r.out, "node_name:"));
	assert_non_null(strstr(r.out, env->a.data_dir));
	csictl_runner_free(&env->rn, &r);

	AGENT(env, &r, "plugins");
	csictl_expect_ok(&r);
	assert_non_null(strstr(r.out, "PLUGIN"));
	assert_non_null(strstr(r.out, AGENT_PROC_HP_ID));
	assert_non_null(strstr(r.out, "yes"));
	csictl_runner_free(&env->rn, &r);
	AGENT(env, &r, "plugins", "-o", "json");
	csictl_expect_ok(&r);
	j = csictl_expect_json(&r);
	json_array_foreach(json_object_get(j, "plugins"), i, p)
	{
		if (strcmp(json_string_value(json_object_get(p, "id")), AGENT_PROC_HP_ID) == 0 &&
		    strcmp(json_string_value(json_object_get(p, "type")), "node") == 0)
			found =
			    json_is_true(json_object_get(json_object_get(p, "health"), "healthy"));
	}
	assert_true(found);
	json_decref(j);
	csictl_runner_free(&env->rn, &r);
}

static void test_mount_unmount(void **state)
{
	struct env *env = *state;
	char target[1024], target2[1024], ctxfile[AGENT_PROC_PATH + 16];
	struct csictl_run r;
	json_t *j, *m;
	const char *line;
	size_t i;
	FILE *f;

	AGENT(env, &r, "mounts");
	csictl_expect_ok(&r);
	assert_null(strstr(r.out, env->vol));
	csictl_runner_free(&env->rn, &r);

	/* The volume context from the output of csictl csi create-volume -o json, as is. */
	snprintf(ctxfile, sizeof(ctxfile), "%s/volume.json", env->a.dir);
	f = fopen(ctxfile, "w");
	assert_non_null(f);
	fprintf(f,
		"{\"volume\": {\"capacity_bytes\": 1048576, \"volume_id\": \"%s\", "
		"\"volume_context\": {\"tier\": \"gold\"}, \"accessible_topology\": []}}\n",
		env->vol);
	fclose(f);
	AGENT(env, &r, "mount", env->vol, "alloc-1", "-plugin", AGENT_PROC_HP_ID, "-access-mode",
	      "single-node-multi-writer", "-secret", "token=csictl-s3cr3t", "-context-file",
	      ctxfile);
	csictl_expect_ok(&r);
	line = strstr(r.out, "target:");
	assert_non_null(line);
	assert_int_equal(sscanf(line, "target: %1023s", target), 1);
	assert_true(agent_proc_is_mount(target));
	assert_null(strstr(r.out, "csictl-s3cr3t"));
	csictl_runner_free(&env->rn, &r);

	AGENT(env, &r, "-o", "json", "mount", env->vol, "alloc-2", "-plugin", AGENT_PROC_HP_ID,
	      "-access-mode", "SINGLE_NODE_MULTI_WRITER");
	csictl_expect_ok(&r);
	j = csictl_expect_json(&r);
	snprintf(target2, sizeof(target2), "%s", json_string_value(json_object_get(j, "target")));
	assert_true(json_is_false(json_object_get(j, "is_device")));
	json_decref(j);
	csictl_runner_free(&env->rn, &r);
	assert_true(agent_proc_is_mount(target2));

	AGENT(env, &r, "mounts");
	csictl_expect_ok(&r);
	assert_non_null(strstr(r.out, "alloc-1"));
	assert_non_null(strstr(r.out, "alloc-2"));
	assert_non_null(strstr(r.out, "rw-file-system-single-node-multi-writer"));
	assert_non_null(strstr(r.out, "EXTERNAL-ID"));
	assert_non_null(strstr(r.out, "tier=gold"));
	assert_null(strstr(r.out, "csictl-s3cr3t"));
	csictl_runner_free(&env->rn, &r);
	AGENT(env, &r, "mounts", "-o", "json");
	csictl_expect_ok(&r);
	j = csictl_expect_json(&r);
	assert_int_equal(json_array_size(json_object_get(j, "mounts")), 2);
	json_array_foreach(json_object_get(j, "mounts"), i, m)
	{
		const json_t *vc = json_object_get(m, "volume_context");

		assert_string_equal(json_string_value(json_object_get(m, "external_id")), env->vol);
		assert_true(json_is_object(vc));
		if (strcmp(json_string_value(json_object_get(m, "alloc_id")), "alloc-1") == 0)
			assert_string_equal(json_string_value(json_object_get(vc, "tier")), "gold");
		else
			assert_int_equal(json_object_size(vc), 0);
	}
	json_decref(j);
	assert_null(strstr(r.out, "csictl-s3cr3t"));
	csictl_runner_free(&env->rn, &r);

	AGENT(env, &r, "unmount", env->vol, "alloc-1");
	csictl_expect_ok(&r);
	assert_non_null(strstr(r.out, "unmounted"));
	csictl_runner_free(&env->rn, &r);
	assert_false(agent_proc_is_mount(target));
	assert_true(agent_proc_is_mount(target2));
	/* The second time there is nothing left: the agent's error, exit 1. */
	AGENT(env, &r, "unmount", env->vol, "alloc-1");
	csictl_expect_fail(&r, 1, "error: not_found: ");
	csictl_runner_free(&env->rn, &r);
	{
		char var[AGENT_PROC_PATH + 32];
		char *extra[] = {var, NULL};
		char *args[] = {"agent", "unmount", env->vol, "alloc-2", NULL};

		/* The address can come from CSID_AGENT_ADDR. */
		snprintf(var, sizeof(var), "CSID_AGENT_ADDR=%s", env->addr);
		csictl_runner_run(&env->rn, &r, extra, args);
	}
	csictl_expect_ok(&r);
	csictl_runner_free(&env->rn, &r);
	assert_false(agent_proc_is_mount(target2));
	assert_int_equal(agent_proc_mount_count(&env->a), 0);
}

/*
 * unmount -force when the plugin refuses NodeUnpublish and NodeUnstage:
 * the first allocation's target is unmounted by the agent, the stage the
 * second still uses is left (and said so); the second's forced unmount
 * takes the stage down too. Nothing stays mounted.
 */
static void test_force(void **state)
{
	struct env *env = *state;
	char mounts[AGENT_PROC_PATH + 16], t1[1024], t2[1024];
	struct csictl_run r;
	json_t *j = NULL;

	assert_int_equal(agent_proc_mount(&env->a, env->vol, "f1", &j), 200);
	snprintf(t1, sizeof(t1), "%s", json_string_value(json_object_get(j, "target")));
	json_decref(j);
	assert_int_equal(agent_proc_mount(&env->a, env->vol, "f2", &j), 200);
	snprintf(t2, sizeof(t2), "%s", json_string_value(json_object_get(j, "target")));
	json_decref(j);
	assert_int_equal(agent_proc_write_faults(&env->a,
						 "NodeUnpublishVolume code=INVALID_ARGUMENT "
						 "msg=\"will not\"\n"
						 "NodeUnstageVolume code=INVALID_ARGUMENT "
						 "msg=\"will not\"\n"),
			 0);
	AGENT(env, &r, "unmount", env->vol, "f1");
	csictl_expect_fail(&r, 1, "will not");
	csictl_runner_free(&env->rn, &r);
	assert_true(agent_proc_is_mount(t1));

	AGENT(env, &r, "unmount", env->vol, "f1", "-force");
	csictl_expect_ok(&r);
	assert_non_null(strstr(r.out, "unmounted for allocation f1 (forced)"));
	assert_non_null(strstr(r.out, "skipped:"));
	assert_non_null(strstr(r.out, "INVALID_ARGUMENT: will not"));
	assert_non_null(strstr(r.out, "unmounted by the agent:"));
	assert_non_null(strstr(r.out, t1));
	assert_non_null(strstr(r.out, "left in place:"));
	assert_non_null(strstr(r.out, "still used by 1 other allocation"));
	csictl_runner_free(&env->rn, &r);
	assert_false(agent_proc_is_mount(t1));
	assert_true(agent_proc_is_mount(t2));

	AGENT(env, &r, "-o", "json", "unmount", env->vol, "f2", "-force");
	csictl_expect_ok(&r);
	j = csictl_expect_json(&r);
	assert_true(json_is_true(json_object_get(j, "forced")));
	/* The target and the staging path, both unmounted by the agent. */
	assert_int_equal(json_array_size(json_object_get(j, "detached")), 2);
	assert_int_equal(json_array_size(json_object_get(j, "kept")), 0);
	json_decref(j);
	csictl_runner_free(&env->rn, &r);
	snprintf(mounts, sizeof(mounts), "%s/mounts", env->a.data_dir);
	assert_int_equal(agent_proc_mounts_under(mounts), 0);
	assert_int_equal(agent_proc_mount_count(&env->a), 0);
	assert_int_equal(agent_proc_write_faults(&env->a, ""), 0);
}

static void test_errors(void **state)
{
	struct env *env = *state;
	char nobody[AGENT_PROC_PATH + 32];
	struct csictl_run r;

	AGENT(env, &r, "mount", env->vol, "alloc-x", "-plugin", "no.such.plugin", "-timeout",
	      "20s");
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.err, "error: "));
	assert_non_null(strstr(r.err, "no.such.plugin"));
	csictl_runner_free(&env->rn, &r);
	/* Hostile IDs are refused by the agent; they never become paths. */
	AGENT(env, &r, "mount", "../../etc", "alloc-x", "-plugin", AGENT_PROC_HP_ID);
	csictl_expect_fail(&r, 1, "error: invalid_argument: ");
	csictl_runner_free(&env->rn, &r);
	AGENT(env, &r, "unmount", "..", "a/b");
	assert_int_equal(r.status, 1);
	csictl_runner_free(&env->rn, &r);

	AGENT(env, &r, "unmount", "vol\xff", "alloc-x");
	csictl_expect_fail(&r, 2, "not valid UTF-8");
	csictl_runner_free(&env->rn, &r);
	AGENT(env, &r, "mount", env->vol, "alloc-x");
	csictl_expect_fail(&r, 2, "-plugin");
	csictl_runner_free(&env->rn, &r);
	AGENT(env, &r, "mount", env->vol);
	csictl_expect_fail(&r, 2, "usage: csictl agent mount VOLUME ALLOC");
	csictl_runner_free(&env->rn, &r);
	AGENT(env, &r, "mount", env->vol, "a", "-plugin", "p", "-access-mode", "often");
	csictl_expect_fail(&r, 2, "unknown access mode");
	csictl_runner_free(&env->rn, &r);
	AGENT(env, &r, "plugins", "-o", "xml");
	csictl_expect_fail(&r, 2, "-o must be table or json");
	csictl_runner_free(&env->rn, &r);
	AGENT(env, &r, "dance");
	csictl_expect_fail(&r, 2, "unknown command");
	csictl_runner_free(&env->rn, &r);
	{
		char *args[] = {"agent", "-address", "unix:relative.sock", "plugins", NULL};

		csictl_runner_run(&env->rn, &r, NULL, args);
	}
	csictl_expect_fail(&r, 2, "absolute");
	csictl_runner_free(&env->rn, &r);
	snprintf(nobody, sizeof(nobody), "unix:%s/nobody.sock", env->a.dir);
	{
		char *args[] = {"agent", "-address", nobody, "plugins", NULL};

		csictl_runner_run(&env->rn, &r, NULL, args);
	}
	/* Nothing listening: say so and how to fix it, not curl's words. */
	csictl_expect_fail(&r, 1, "error: no agent listening at ");
	assert_non_null(strstr(r.err, "/nobody.sock: start csid agent or set CSID_AGENT_ADDR"));
	assert_null(strstr(r.err, "port 80"));
	csictl_runner_free(&env->rn, &r);
	{
		char *args[] = {"agent", "-h", NULL};

		csictl_runner_run(&env->rn, &r, NULL, args);
	}
	csictl_expect_ok(&r);
	assert_non_null(strstr(r.out, "mount VOLUME ALLOC"));
	csictl_runner_free(&env->rn, &r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_plugins),
	    cmocka_unit_test(test_mount_unmount),
	    cmocka_unit_test(test_force),
	    cmocka_unit_test(test_errors),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
