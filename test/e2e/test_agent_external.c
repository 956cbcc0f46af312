/*
 * End-to-end test of an external plugin (a socket in the config, a
 * process the agent does not own): a csi-hostpath started by the test is
 * probed and registered by the agent, serves mounts, is reported
 * unhealthy when it dies but never restarted by the agent, is healthy
 * again when it comes back, and survives the agent's own stop. After an
 * agent restart its registration comes back under the same instance ID
 * and the mount is adopted.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent_proc.h"
#include "hostpath_proc.h"

#define EXT_ID "ext.hostpath"

struct ext {
	struct agent_proc a;
	struct hpp_proc h;
};

static const char *const ext_args[] = {"--no-controller-publish", NULL};

static int teardown(void **state);

static int setup(void **state)
{
	struct ext *x = calloc(1, sizeof(*x));
	char cfg[1024];

	*state = x;
	if (!x || agent_proc_init(&x->a) != 0 || hpp_proc_start(&x->h, ext_args) != 0)
		goto fail;
	snprintf(
	    cfg, sizeof(cfg),
	    "{\"data_dir\": \"@DIR@/d\", \"node_name\": \"node-1\",\n"
	    " \"timings\": {\"probe_interval\": \"100ms\", \"health_timeout\": \"2s\","
	    " \"resync_period\": \"1s\"},\n"
	    " \"plugins\": [{\"id\": \"%s\", \"type\": \"node\", \"socket\": \"%s/csi.sock\"}]}\n",
	    EXT_ID, x->h.dir);
	if (agent_proc_write_config(&x->a, cfg) != 0 || agent_proc_start(&x->a) != 0 ||
	    agent_proc_wait_ready(&x->a, AGENT_PROC_HP_START_MS) != 0 ||
	    !agent_proc_wait_healthy(&x->a, EXT_ID, AGENT_PROC_HP_START_MS))
		goto fail;
	return 0;
fail:
	/* cmocka skips a test's teardown when its setup fails. */
	if (x && x->a.dir[0])
		agent_proc_dump_log(&x->a, "external setup failed");
	teardown(state);
	return -1;
}

static int teardown(void **state)
{
	struct ext *x = *state;

	if (x) {
		agent_proc_cleanup(&x->a);
		hpp_proc_cleanup(&x->h);
		free(x);
	}
	return 0;
}

static bool ext_unhealthy(void *ctx)
{
	struct agent_proc_plugin p;

	return agent_proc_plugin(ctx, EXT_ID, "node", &p) == 0 && p.found && !p.healthy;
}

static void test_external_plugin(void **state)
{
	struct ext *x = *state;
	struct agent_proc *a = &x->a;
	struct agent_proc_plugin p, q;
	struct hpp_client cl;
	char vol[64], target[512];
	json_t *doc = NULL;

	assert_int_equal(agent_proc_plugin(a, EXT_ID, "node", &p), 0);
	assert_true(p.healthy);
	assert_int_equal(strncmp(p.active, "ext-", 4), 0);
	assert_int_equal(p.pid, 0);
	assert_int_equal(hpp_client_open(&cl, x->h.endpoint), 0);
	assert_int_equal(hpp_create(&cl.caller, "ext-vol", 1 << 20, 0, false, vol), 0);
	hpp_client_close(&cl);
	assert_int_equal(agent_proc_mount_with(a, EXT_ID, vol, "alloc-x", &doc), 200);
	snprintf(target, sizeof(target), "%s", json_string_value(json_object_get(doc, "target")));
	json_decref(doc);
	assert_true(agent_proc_is_mount(target));

	/* The plugin dies: unhealthy, never restarted by the agent. */
	hpp_proc_kill(&x->h, SIGKILL);
	assert_true(agent_proc_poll(ext_unhealthy, a, 10000));
	assert_true(agent_proc_wait_log(a, "msg=\"plugin unhealthy\" plugin=" EXT_ID, 1,
					AGENT_PROC_LOG_MS));
	assert_false(agent_proc_log_count(a, "msg=\"plugin restarting\"", 1));
	/* It comes back by its owner's hand: healthy again, same instance. */
	assert_int_equal(hpp_proc_restart(&x->h, ext_args), 0);
	assert_true(agent_proc_wait_healthy(a, EXT_ID, 10000));
	assert_int_equal(agent_proc_plugin(a, EXT_ID, "node", &q), 0);
	assert_string_equal(q.active, p.active);

	/* The agent stops: the external plugin keeps running; the mount stays. */
	assert_int_equal(agent_proc_stop(a, SIGTERM, 20000), 0);
	assert_int_equal(hpp_wait_socket(x->h.endpoint + strlen("unix://"), 1000), 0);
	assert_true(agent_proc_is_mount(target));
	assert_int_equal(agent_proc_start(a), 0);
	assert_int_equal(agent_proc_wait_ready(a, 20000), 0);
	assert_true(agent_proc_wait_healthy(a, EXT_ID, 10000));
	assert_int_equal(agent_proc_plugin(a, EXT_ID, "node", &q), 0);
	assert_string_equal(q.active, p.active);
	assert_int_equal(q.ninstances, 1);
	assert_true(agent_proc_wait_log(a, "adopted=1", 1, AGENT_PROC_LOG_MS));
	assert_int_equal(agent_proc_unmount(a, vol, "alloc-x"), 200);
	assert_false(agent_proc_is_mount(target));
	assert_int_equal(agent_proc_mount_count(a), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_external_plugin, setup, teardown),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	csi_grpc_shutdown();
	return rc;
}
