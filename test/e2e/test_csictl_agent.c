/*
 * End-to-end tests of `csictl agent` against a real `csid agent` that
 * supervises csi-hostpath (test/lib/agent_proc.h): plugins and mounts as
 * tables and JSON, a mount and an unmount through the command line (the
 * mount checked in the mount table), the address from the flag and from
 * CSID_AGENT_ADDR, API errors printed as "error: <code>: <message>" with
 * exit status 1, and usage errors with exit status 2. Teardown kills the
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
	/* The last run, freed by teardown when a failed assertion left it. */
	struct csictl_run *live;
};

static struct env *run_owner;

static void run_free(struct csictl_run *r)
{
	csictl_run_free(r);
	run_owner->live = NULL;
}

static void run_env(struct env *env, struct csictl_run *r, char *const *extra_env,
		    char *const *args)
{
	if (csictl_run(env->a.dir, args, extra_env, RUN_DEADLINE_MS, r) != 0)
		fail_msg("csictl agent %s: could not run it to the end", args[1]);
	run_owner = env;
	env->live = r;
}

/* Runs "csictl agent -address <agent> ARGS...". */
#define AGENT(env, r, ...)                                                             \
	do {                                                                           \
		char *args_[] = {"agent", "-address", (env)->addr, __VA_ARGS__, NULL}; \
		run_env((env), (r), NULL, args_);                                      \
	} while (0)

static void expect_ok(const struct csictl_run *r)
{
	if (r->status != 0)
		fail_msg("exit %d, stderr: %s", r->status, r->err);
}

static void expect_fail(const struct csictl_run *r, int status, const char *in_stderr)
{
	if (r->status != status || !strstr(r->err, in_stderr))
		fail_msg("want exit %d with \"%s\", got exit %d, stderr: %s", status, in_stderr,
			 r->status, r->err);
}

static json_t *parse_out(const struct csictl_run *r)
{
	json_error_t je;
	json_t *j = json_loads(r->out, 0, &je);

	if (!j)
		fail_msg("stdout is not JSON (%s): %s", je.text, r->out);
	return j;
}

static int setup(void **state)
{
	struct env *env = calloc(1, sizeof(*env));
	char cfg[4096];

	if (!env || agent_proc_init(&env->a) != 0)
		return -1;
	*state = env;
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
		if (env->live)
			csictl_run_free(env->live);
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
	expect_ok(&r);
	assert_non_null(strstr(r.out, "node_name:"));
	assert_non_null(strstr(r.out, env->a.data_dir));
	run_free(&r);

	AGENT(env, &r, "plugins");
	expect_ok(&r);
	assert_non_null(strstr(r.out, "PLUGIN"));
	assert_non_null(strstr(r.out, AGENT_PROC_HP_ID));
	assert_non_null(strstr(r.out, "yes"));
	run_free(&r);
	AGENT(env, &r, "plugins", "-o", "json");
	expect_ok(&r);
	j = parse_out(&r);
	json_array_foreach(json_object_get(j, "plugins"), i, p)
	{
		if (strcmp(json_string_value(json_object_get(p, "id")), AGENT_PROC_HP_ID) == 0 &&
		    strcmp(json_string_value(json_object_get(p, "type")), "node") == 0)
			found =
			    json_is_true(json_object_get(json_object_get(p, "health"), "healthy"));
	}
	assert_true(found);
	json_decref(j);
	run_free(&r);
}

static void test_mount_unmount(void **state)
{
	struct env *env = *state;
	char target[1024], target2[1024];
	struct csictl_run r;
	json_t *j;
	const char *line;

	AGENT(env, &r, "mounts");
	expect_ok(&r);
	assert_null(strstr(r.out, env->vol));
	run_free(&r);

	AGENT(env, &r, "mount", env->vol, "alloc-1", "-plugin", AGENT_PROC_HP_ID, "-access-mode",
	      "single-node-multi-writer", "-secret", "token=csictl-s3cr3t");
	expect_ok(&r);
	line = strstr(r.out, "target:");
	assert_non_null(line);
	assert_int_equal(sscanf(line, "target: %1023s", target), 1);
	assert_true(agent_proc_is_mount(target));
	assert_null(strstr(r.out, "csictl-s3cr3t"));
	run_free(&r);

	AGENT(env, &r, "-o", "json", "mount", env->vol, "alloc-2", "-plugin", AGENT_PROC_HP_ID,
	      "-access-mode", "SINGLE_NODE_MULTI_WRITER");
	expect_ok(&r);
	j = parse_out(&r);
	snprintf(target2, sizeof(target2), "%s", json_string_value(json_object_get(j, "target")));
	assert_true(json_is_false(json_object_get(j, "is_device")));
	json_decref(j);
	run_free(&r);
	assert_true(agent_proc_is_mount(target2));

	AGENT(env, &r, "mounts");
	expect_ok(&r);
	assert_non_null(strstr(r.out, "alloc-1"));
	assert_non_null(strstr(r.out, "alloc-2"));
	assert_non_null(strstr(r.out, "rw-file-system-single-node-multi-writer"));
	assert_null(strstr(r.out, "csictl-s3cr3t"));
	run_free(&r);
	AGENT(env, &r, "mounts", "-o", "json");
	expect_ok(&r);
	j = parse_out(&r);
	assert_int_equal(json_array_size(json_object_get(j, "mounts")), 2);
	json_decref(j);
	assert_null(strstr(r.out, "csictl-s3cr3t"));
	run_free(&r);

	AGENT(env, &r, "unmount", env->vol, "alloc-1");
	expect_ok(&r);
	assert_non_null(strstr(r.out, "unmounted"));
	run_free(&r);
	assert_false(agent_proc_is_mount(target));
	assert_true(agent_proc_is_mount(target2));
	/* The second time there is nothing left: the agent's error, exit 1. */
	AGENT(env, &r, "unmount", env->vol, "alloc-1");
	expect_fail(&r, 1, "error: not_found: ");
	run_free(&r);
	{
		char var[AGENT_PROC_PATH + 32];
		char *extra[] = {var, NULL};
		char *args[] = {"agent", "unmount", env->vol, "alloc-2", NULL};

		/* The address can come from CSID_AGENT_ADDR. */
		snprintf(var, sizeof(var), "CSID_AGENT_ADDR=%s", env->addr);
		run_env(env, &r, extra, args);
	}
	expect_ok(&r);
	run_free(&r);
	assert_false(agent_proc_is_mount(target2));
	assert_int_equal(agent_proc_mount_count(&env->a), 0);
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
	run_free(&r);
	/* Hostile IDs are refused by the agent; they never become paths. */
	AGENT(env, &r, "mount", "../../etc", "alloc-x", "-plugin", AGENT_PROC_HP_ID);
	expect_fail(&r, 1, "error: invalid_argument: ");
	run_free(&r);
	AGENT(env, &r, "unmount", "..", "a/b");
	assert_int_equal(r.status, 1);
	run_free(&r);

	AGENT(env, &r, "mount", env->vol, "alloc-x");
	expect_fail(&r, 2, "-plugin");
	run_free(&r);
	AGENT(env, &r, "mount", env->vol);
	expect_fail(&r, 2, "usage: csictl agent mount VOLUME ALLOC");
	run_free(&r);
	AGENT(env, &r, "mount", env->vol, "a", "-plugin", "p", "-access-mode", "often");
	expect_fail(&r, 2, "unknown access mode");
	run_free(&r);
	AGENT(env, &r, "plugins", "-o", "xml");
	expect_fail(&r, 2, "-o must be table or json");
	run_free(&r);
	AGENT(env, &r, "dance");
	expect_fail(&r, 2, "unknown command");
	run_free(&r);
	{
		char *args[] = {"agent", "-address", "unix:relative.sock", "plugins", NULL};

		run_env(env, &r, NULL, args);
	}
	expect_fail(&r, 2, "absolute");
	run_free(&r);
	snprintf(nobody, sizeof(nobody), "unix:%s/nobody.sock", env->a.dir);
	{
		char *args[] = {"agent", "-address", nobody, "plugins", NULL};

		run_env(env, &r, NULL, args);
	}
	expect_fail(&r, 1, "error: agent at ");
	run_free(&r);
	{
		char *args[] = {"agent", "-h", NULL};

		run_env(env, &r, NULL, args);
	}
	expect_ok(&r);
	assert_non_null(strstr(r.out, "mount VOLUME ALLOC"));
	run_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_plugins),
	    cmocka_unit_test(test_mount_unmount),
	    cmocka_unit_test(test_errors),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
