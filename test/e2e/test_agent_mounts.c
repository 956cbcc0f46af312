/*
 * End-to-end tests of `csid agent` mounting volumes through the real
 * csi-hostpath plugin, over the agent's HTTP API:
 *   - two allocations share one staging mount; unmounting one keeps it;
 *   - the agent is killed with SIGKILL while each node RPC hangs (stage,
 *     publish, unpublish, unstage), then restarted: the state is
 *     consistent (every record's target mounted exactly once, nothing
 *     mounted that no record owns), and the operation can be finished;
 *   - a clean SIGTERM stops the plugins but keeps the mounts, which the
 *     next agent adopts.
 * Every test runs in its own short directory under /tmp; the teardown
 * kills every process and detaches every mount even after a failure.
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
#include "csi/csi_client.h"

static int setup(void **state)
{
	return agent_proc_setup_hostpath(state, NULL);
}

/* The target of a mount answer, copied to buf. */
static void answer_path(json_t *doc, const char *key, char *buf, size_t len)
{
	const char *s = json_string_value(json_object_get(doc, key));

	assert_non_null(s);
	snprintf(buf, len, "%s", s);
}

static void restart(struct agent_proc *a)
{
	assert_int_equal(agent_proc_start(a), 0);
	assert_int_equal(agent_proc_wait_ready(a, 30000), 0);
	assert_true(agent_proc_wait_healthy(a, AGENT_PROC_HP_ID, 20000));
}

/* Every mount under the agent's mounts dir is owned by a published record, once. */
static void assert_consistent(struct agent_proc *a)
{
	char mounts[AGENT_PROC_PATH + 16];
	json_t *doc = NULL, *m;
	int published = 0;
	size_t i;

	snprintf(mounts, sizeof(mounts), "%s/mounts/per-alloc", a->data_dir);
	assert_int_equal(agent_proc_http(a, "GET", "/v1/agent/mounts", NULL, &doc), 200);
	json_array_foreach(json_object_get(doc, "mounts"), i, m)
	{
		const char *state = json_string_value(json_object_get(m, "state"));
		const char *target = json_string_value(json_object_get(m, "target_path"));

		/* After recovery nothing is left half done. */
		assert_string_equal(state, "published");
		assert_int_equal(agent_proc_mounts_under(target), 1);
		assert_null(json_object_get(m, "secrets"));
		published++;
	}
	json_decref(doc);
	assert_int_equal(agent_proc_mounts_under(mounts), published);
}

static void test_shared_staging(void **state)
{
	struct agent_proc *a = *state;
	char vol[64], src1[512], src2[512], t1[512], t2[512];
	json_t *doc = NULL;

	assert_int_equal(agent_proc_create_volume(a, "shared", vol), 0);
	assert_int_equal(agent_proc_mount(a, vol, "alloc-1", &doc), 200);
	answer_path(doc, "source", src1, sizeof(src1));
	answer_path(doc, "target", t1, sizeof(t1));
	assert_false(json_is_true(json_object_get(doc, "is_device")));
	json_decref(doc);
	assert_int_equal(agent_proc_mount(a, vol, "alloc-2", &doc), 200);
	answer_path(doc, "source", src2, sizeof(src2));
	answer_path(doc, "target", t2, sizeof(t2));
	json_decref(doc);
	/* One staging path shared by both allocations, one target each. */
	assert_string_equal(src1, src2);
	assert_non_null(strstr(src1, "/mounts/staging/" AGENT_PROC_HP_ID "/"));
	assert_non_null(strstr(t1, "/mounts/per-alloc/alloc-1/"));
	assert_string_not_equal(t1, t2);
	assert_true(agent_proc_is_mount(t1));
	assert_true(agent_proc_is_mount(t2));
	assert_int_equal(agent_proc_mount_count(a), 2);
	/* Mounting again is idempotent. */
	assert_int_equal(agent_proc_mount(a, vol, "alloc-1", NULL), 200);
	assert_int_equal(agent_proc_mounts_under(t1), 1);
	/* The secret never comes back, and never reaches the log. */
	assert_int_equal(agent_proc_http(a, "GET", "/v1/agent/mounts", NULL, &doc), 200);
	{
		char *text = json_dumps(doc, 0);

		assert_null(strstr(text, "e2e-secret-value"));
		free(text);
	}
	json_decref(doc);
	assert_false(agent_proc_log_count(a, "e2e-secret-value", 1));

	/* Unmounting one keeps the other and the stage. */
	assert_int_equal(agent_proc_unmount(a, vol, "alloc-1"), 200);
	assert_false(agent_proc_is_mount(t1));
	assert_true(agent_proc_is_mount(t2));
	assert_int_equal(agent_proc_mount_count(a), 1);
	assert_int_equal(agent_proc_unmount(a, vol, "alloc-1"), 404);
	assert_int_equal(agent_proc_unmount(a, vol, "alloc-2"), 200);
	assert_false(agent_proc_is_mount(t2));
	assert_int_equal(agent_proc_mount_count(a), 0);
	assert_int_equal(agent_proc_mounts_under(a->data_dir), 0);
	assert_consistent(a);
}

struct hang_wait {
	struct agent_proc *a;
	int count;
};

static bool plugin_hangs(void *ctx)
{
	struct hang_wait *w = ctx;

	return agent_proc_plugin_log_count(w->a, "injected hang", w->count);
}

/*
 * Runs the mount or unmount of (vol, alloc) with `rpc hang` in the fault
 * script, waits until the plugin hangs in that RPC, kills the agent with
 * SIGKILL, releases the hang, restarts the agent, checks consistency, and
 * finishes the operation.
 */
static void crash_during(struct agent_proc *a, const char *rpc, const char *vol, const char *alloc,
			 bool unmount, int *hangs)
{
	struct agent_proc_call call = {.a = a, .vol = vol, .alloc = alloc, .unmount = unmount};
	struct hang_wait w = {a, *hangs + 1};
	char faults[128];
	json_t *doc = NULL;
	long status;

	snprintf(faults, sizeof(faults), "%s hang\n", rpc);
	assert_int_equal(agent_proc_write_faults(a, faults), 0);
	assert_int_equal(agent_proc_call_start(&call), 0);
	if (!agent_proc_poll(plugin_hangs, &w, 20000)) {
		agent_proc_write_faults(a, "");
		agent_proc_call_join(&call);
		fail_msg("the plugin never hung in %s", rpc);
	}
	*hangs += 1;
	assert_int_equal(agent_proc_stop(a, SIGKILL, 10000), 128 + SIGKILL);
	agent_proc_call_join(&call);
	assert_true(call.status != 200);
	/* The orphaned plugin may finish the call now; either outcome must recover. */
	assert_int_equal(agent_proc_write_faults(a, ""), 0);
	restart(a);
	assert_consistent(a);
	if (unmount) {
		status = agent_proc_unmount(a, vol, alloc);
		assert_true(status == 200 || status == 404);
	} else {
		assert_int_equal(agent_proc_mount(a, vol, alloc, &doc), 200);
		assert_int_equal(
		    agent_proc_mounts_under(json_string_value(json_object_get(doc, "target"))), 1);
		json_decref(doc);
	}
	assert_consistent(a);
}

static void test_kill9_at_every_step(void **state)
{
	struct agent_proc *a = *state;
	char vol[64];
	int hangs = 0;

	assert_int_equal(agent_proc_create_volume(a, "crashy", vol), 0);
	crash_during(a, "NodeStageVolume", vol, "alloc-1", false, &hangs);
	crash_during(a, "NodePublishVolume", vol, "alloc-2", false, &hangs);
	assert_int_equal(agent_proc_mount_count(a), 2);
	crash_during(a, "NodeUnpublishVolume", vol, "alloc-1", true, &hangs);
	assert_int_equal(agent_proc_mount_count(a), 1);
	crash_during(a, "NodeUnstageVolume", vol, "alloc-2", true, &hangs);
	assert_int_equal(agent_proc_mount_count(a), 0);
	assert_int_equal(agent_proc_mounts_under(a->data_dir), 0);
	/* The restarted agents killed the plugins their predecessors left behind. */
	{
		pid_t pids[8];

		assert_int_equal(agent_proc_plugin_pids(a, pids, 8), 1);
	}
}

static void test_sigterm_keeps_mounts(void **state)
{
	struct agent_proc *a = *state;
	char vol[64], target[512];
	json_t *doc = NULL;
	pid_t pids[8];

	assert_int_equal(agent_proc_create_volume(a, "kept", vol), 0);
	assert_int_equal(agent_proc_mount(a, vol, "alloc-k", &doc), 200);
	answer_path(doc, "target", target, sizeof(target));
	json_decref(doc);
	assert_int_equal(agent_proc_stop(a, SIGTERM, 20000), 0);
	/* Plugins stopped, mounts kept, socket removed. */
	assert_int_equal(agent_proc_plugin_pids(a, pids, 8), 0);
	assert_true(agent_proc_is_mount(target));
	assert_true(agent_proc_log_count(a, "agent stopped", 1));
	restart(a);
	assert_true(agent_proc_wait_log(a, "adopted=1", 1, AGENT_PROC_LOG_MS));
	assert_consistent(a);
	assert_int_equal(agent_proc_mount_count(a), 1);
	assert_int_equal(agent_proc_unmount(a, vol, "alloc-k"), 200);
	assert_false(agent_proc_is_mount(target));
}

/*
 * A plugin dropped from the config while it has a mount: the agent starts
 * at once (no waiting for a plugin that will not come), keeps the record,
 * refuses the unmount clearly, and finishes it once the plugin is back.
 */
static void test_plugin_gone_with_mount(void **state)
{
	struct agent_proc *a = *state;
	char vol[64], target[512], cfg[4096];
	json_t *doc = NULL;
	int64_t t0;

	assert_int_equal(agent_proc_create_volume(a, "orphaned", vol), 0);
	assert_int_equal(agent_proc_mount(a, vol, "alloc-o", &doc), 200);
	answer_path(doc, "target", target, sizeof(target));
	json_decref(doc);
	assert_int_equal(agent_proc_stop(a, SIGTERM, 20000), 0);
	assert_int_equal(agent_proc_write_config(a, "{\"data_dir\": \"@DIR@/d\", \"plugins\": []}"),
			 0);
	t0 = agent_proc_now_ms();
	assert_int_equal(agent_proc_start(a), 0);
	assert_int_equal(agent_proc_wait_ready(a, 20000), 0);
	/*
	 * Not held up by the missing plugin: waiting for it would take the
	 * default health_timeout (30 s). A sanitized start on a loaded machine
	 * can take seconds, so the bound is half of that, not a speed target.
	 */
	assert_true(agent_proc_now_ms() - t0 < 15000);
	assert_true(agent_proc_is_mount(target));
	assert_int_equal(agent_proc_mount_count(a), 1);
	assert_int_equal(agent_proc_unmount(a, vol, "alloc-o"), 404);
	assert_true(agent_proc_is_mount(target));
	/* The plugin comes back with a reload: the unmount goes through. */
	assert_int_equal(agent_proc_hostpath_config(a, "{}", cfg, sizeof(cfg)), 0);
	assert_int_equal(agent_proc_write_config(a, cfg), 0);
	assert_int_equal(kill(a->pid, SIGHUP), 0);
	assert_true(agent_proc_wait_healthy(a, AGENT_PROC_HP_ID, 20000));
	assert_int_equal(agent_proc_unmount(a, vol, "alloc-o"), 200);
	assert_false(agent_proc_is_mount(target));
	assert_int_equal(agent_proc_mounts_under(a->data_dir), 0);
	/* And a stop with nothing pending is quick. */
	t0 = agent_proc_now_ms();
	assert_int_equal(agent_proc_stop(a, SIGTERM, 20000), 0);
	assert_true(agent_proc_now_ms() - t0 < 5000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_shared_staging, setup, agent_proc_teardown),
	    cmocka_unit_test_setup_teardown(test_kill9_at_every_step, setup, agent_proc_teardown),
	    cmocka_unit_test_setup_teardown(test_sigterm_keeps_mounts, setup, agent_proc_teardown),
	    cmocka_unit_test_setup_teardown(test_plugin_gone_with_mount, setup,
					    agent_proc_teardown),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	csi_grpc_shutdown();
	return rc;
}
