/*
 * End-to-end tests of the agent's plugin supervisor with the real
 * csi-hostpath plugin:
 *   - a plugin killed with SIGKILL is restarted as a new instance, with
 *     exited/restarting/registered events;
 *   - a plugin whose Probe fails is reported unhealthy, restarted after the
 *     unhealthy threshold, and restarted again with a growing backoff while
 *     it keeps failing; it is registered again once it recovers;
 *   - SIGHUP with a changed definition starts the new instance, lets it
 *     become active, then stops the old one; mounts made through the old
 *     instance are served by the new one; a bad config is refused and a
 *     removed plugin is stopped and deregistered.
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

/* Writes the hostpath config with env, health_timeout set to 1s. */
static void write_config(struct agent_proc *a, const char *env)
{
	char cfg[4096], *p;

	assert_int_equal(agent_proc_hostpath_config(a, env, cfg, sizeof(cfg)), 0);
	p = strstr(cfg, "\"health_timeout\": \"5s\"");
	assert_non_null(p);
	memcpy(p, "\"health_timeout\": \"1s\"", 22);
	assert_int_equal(agent_proc_write_config(a, cfg), 0);
}

static int setup(void **state)
{
	static const char *const edits[] = {"\"health_timeout\": \"5s\"",
					    "\"health_timeout\": \"1s\"", NULL};

	return agent_proc_setup_hostpath(state, edits);
}

struct log_wait {
	struct agent_proc *a;
	const char *needle;
	int count;
};

static bool log_has(void *ctx)
{
	struct log_wait *w = ctx;

	return agent_proc_log_count(w->a, w->needle, w->count);
}

static void test_crash_restarts(void **state)
{
	struct agent_proc *a = *state;
	struct agent_proc_plugin p, c;
	char old[64];
	char needle[128];

	assert_int_equal(agent_proc_plugin(a, AGENT_PROC_HP_ID, "node", &p), 0);
	assert_true(p.pid > 0);
	assert_int_equal(p.restarts, 0);
	snprintf(old, sizeof(old), "%s", p.active);
	assert_int_equal(kill(p.pid, SIGKILL), 0);
	assert_true(agent_proc_wait_replaced(a, old, 20000));
	assert_int_equal(agent_proc_plugin(a, AGENT_PROC_HP_ID, "node", &c), 0);
	assert_int_equal(c.restarts, 1);
	assert_true(c.pid > 0 && c.pid != p.pid);
	/* A monolith: the controller registration moved to the new instance too. */
	assert_int_equal(agent_proc_plugin(a, AGENT_PROC_HP_ID, "controller", &p), 0);
	assert_string_equal(p.active, c.active);
	assert_int_equal(p.ninstances, 1);
	snprintf(needle, sizeof(needle), "msg=\"plugin exited\" plugin=%s instance=%s",
		 AGENT_PROC_HP_ID, old);
	assert_true(agent_proc_wait_log(a, needle, 1, AGENT_PROC_LOG_MS));
	assert_true(agent_proc_wait_log(a, "msg=\"plugin restarting\"", 1, AGENT_PROC_LOG_MS));
	assert_true(agent_proc_wait_log(a, "msg=\"plugin registered\"", 2, AGENT_PROC_LOG_MS));
	snprintf(needle, sizeof(needle), "msg=\"plugin registered\" plugin=%s instance=%s",
		 AGENT_PROC_HP_ID, c.active);
	assert_true(agent_proc_wait_log(a, needle, 1, AGENT_PROC_LOG_MS));
}

/* delay_ms of the n-th "plugin restarting" line of the log; -1 if none. */
static long restart_delay(struct agent_proc *a, int n)
{
	FILE *f = fopen(a->log, "r");
	char line[4096];
	long d = -1;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, "msg=\"plugin restarting\"");

		if (p && n-- == 0) {
			p = strstr(p, "delay_ms=");
			d = p ? strtol(p + 9, NULL, 10) : -1;
			break;
		}
	}
	fclose(f);
	return d;
}

static void test_unhealthy_backoff(void **state)
{
	struct agent_proc *a = *state;
	struct log_wait lw = {a, "msg=\"plugin restarting\"", 3};
	struct agent_proc_plugin p;
	char old[64];
	long d0, d1, d2;

	assert_int_equal(agent_proc_plugin(a, AGENT_PROC_HP_ID, "node", &p), 0);
	snprintf(old, sizeof(old), "%s", p.active);
	assert_int_equal(agent_proc_write_faults(a, "Probe code=UNAVAILABLE msg=\"sick\"\n"), 0);
	/* Health change event, then a restart after the threshold, then more with backoff. */
	assert_true(
	    agent_proc_poll(log_has, &(struct log_wait){a, "msg=\"plugin unhealthy\"", 1}, 10000));
	assert_true(agent_proc_poll(log_has, &(struct log_wait){a, "unhealthy for", 1}, 10000));
	assert_true(agent_proc_poll(log_has, &lw, 20000));
	assert_true(agent_proc_wait_log(a, "not healthy within 1000ms", 1, AGENT_PROC_LOG_MS));
	d0 = restart_delay(a, 0);
	d1 = restart_delay(a, 1);
	d2 = restart_delay(a, 2);
	/* 100ms base doubling, jitter within [3/4 d, d]. */
	assert_true(d0 >= 75 && d0 <= 100);
	assert_true(d1 >= 150 && d1 <= 200);
	assert_true(d2 >= 300 && d2 <= 400);
	assert_int_equal(agent_proc_plugin(a, AGENT_PROC_HP_ID, "node", &p), 0);
	assert_true(p.attempt >= 2);
	/* The plugin recovers: registered and healthy again, on a new instance. */
	assert_int_equal(agent_proc_write_faults(a, ""), 0);
	assert_true(agent_proc_wait_replaced(a, old, 20000));
}

static void test_update_overlaps(void **state)
{
	struct agent_proc *a = *state;
	struct agent_proc_plugin p, c;
	char old[64];
	char vol[64], needle[256], reg[256];

	assert_int_equal(agent_proc_create_volume(a, "upd", vol), 0);
	assert_int_equal(agent_proc_mount(a, vol, "alloc-u", NULL), 200);
	assert_int_equal(agent_proc_plugin(a, AGENT_PROC_HP_ID, "node", &p), 0);
	snprintf(old, sizeof(old), "%s", p.active);

	/* An invalid config is refused; nothing changes. */
	assert_int_equal(agent_proc_write_config(a, "{\"plugins\": 5}"), 0);
	assert_int_equal(kill(a->pid, SIGHUP), 0);
	assert_true(
	    agent_proc_poll(log_has, &(struct log_wait){a, "config reload failed", 1}, 10000));
	assert_int_equal(agent_proc_plugin(a, AGENT_PROC_HP_ID, "node", &c), 0);
	assert_string_equal(c.active, old);

	/* A changed definition: new instance first, then the old one stops. */
	write_config(a, "{\"CSID_E2E_GENERATION\": \"2\"}");
	assert_int_equal(kill(a->pid, SIGHUP), 0);
	assert_true(agent_proc_wait_replaced(a, old, 20000));
	assert_int_equal(agent_proc_plugin(a, AGENT_PROC_HP_ID, "node", &c), 0);
	snprintf(reg, sizeof(reg), "msg=\"plugin registered\" plugin=%s instance=%s",
		 AGENT_PROC_HP_ID, c.active);
	snprintf(needle, sizeof(needle),
		 "instance=%s delay_ms=0 reason=\"replaced by instance %s\"", old, c.active);
	assert_true(agent_proc_poll(log_has, &(struct log_wait){a, needle, 1}, 10000));
	{
		/* Order in the log: the new one registered before the old one was stopped. */
		FILE *f = fopen(a->log, "r");
		char line[4096];
		int at = 0, reg_at = 0, stop_at = 0;

		assert_non_null(f);
		while (fgets(line, sizeof(line), f)) {
			at++;
			if (!reg_at && strstr(line, reg))
				reg_at = at;
			if (!stop_at && strstr(line, needle))
				stop_at = at;
		}
		fclose(f);
		assert_true(reg_at > 0 && stop_at > reg_at);
	}
	/* The mount made through the old instance is unmounted through the new one. */
	assert_int_equal(agent_proc_unmount(a, vol, "alloc-u"), 200);
	assert_int_equal(agent_proc_mount(a, vol, "alloc-v", NULL), 200);
	assert_int_equal(agent_proc_unmount(a, vol, "alloc-v"), 200);

	/* Removing the plugin stops and deregisters it. */
	assert_int_equal(agent_proc_write_config(a, "{\"data_dir\": \"@DIR@/d\", \"plugins\": []}"),
			 0);
	assert_int_equal(kill(a->pid, SIGHUP), 0);
	assert_true(
	    agent_proc_poll(log_has, &(struct log_wait){a, "msg=\"plugin stopped\"", 2}, 20000));
	assert_true(agent_proc_wait_log(a, "reason=\"removed from config\"", 1, AGENT_PROC_LOG_MS));
	assert_int_equal(agent_proc_plugin(a, AGENT_PROC_HP_ID, "node", &c), 0);
	assert_false(c.found);
	assert_int_equal(agent_proc_plugin(a, AGENT_PROC_HP_ID, "controller", &c), 0);
	assert_false(c.found);
	assert_int_equal(agent_proc_stop(a, SIGTERM, 20000), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_crash_restarts, setup, agent_proc_teardown),
	    cmocka_unit_test_setup_teardown(test_unhealthy_backoff, setup, agent_proc_teardown),
	    cmocka_unit_test_setup_teardown(test_update_overlaps, setup, agent_proc_teardown),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	csi_grpc_shutdown();
	return rc;
}
