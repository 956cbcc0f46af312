/*
 * End-to-end test of bad input to the agent API: malformed JSON, wrong
 * types, unknown fields, hostile IDs (in the body and in the path), bad
 * modes, oversized bodies, unknown endpoints and methods, a mount for an
 * unknown plugin and for an unhealthy one. Each gets a clear error with
 * the status of the csid error table; the agent keeps serving, its
 * state stays empty, and a good request still works afterwards.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <signal.h>

#include "agent_proc.h"
#include "csi/csi_client.h"

static int setup(void **state)
{
	/* Unhealthy plugins stay up (long threshold); mounts wait at most 1s for one. */
	static const char *const edits[] = {"\"health_timeout\": \"5s\"",
					    "\"health_timeout\": \"1s\"",
					    "\"unhealthy_threshold\": \"1500ms\"",
					    "\"unhealthy_threshold\": \"1000s\"",
					    "\"stop_grace\": \"3s\"",
					    "\"stop_grace\": \"3s\", \"rpc_timeout\": \"1s\"",
					    NULL};

	return agent_proc_setup_hostpath(state, edits);
}

/* Sends a request; checks the status, the error code and part of the message. */
static void expect(struct agent_proc *a, const char *method, const char *path, const char *body,
		   long status, const char *code, const char *msg_part)
{
	json_t *doc = NULL;
	long got = agent_proc_http(a, method, path, body, &doc);
	const char *c = json_string_value(json_object_get(doc, "code"));
	const char *m = json_string_value(json_object_get(doc, "error"));

	if (got != status || !c || strcmp(c, code) != 0 || !m || !strstr(m, msg_part)) {
		char *text = doc ? json_dumps(doc, 0) : NULL;

		print_error("%s %s: got %ld %s, want %ld %s \"%s\"\n", method, path, got,
			    text ? text : "(no JSON)", status, code, msg_part);
		free(text);
		json_decref(doc);
		fail();
	}
	json_decref(doc);
}

#define MOUNT_BODY(fields)                                                                        \
	"{\"volume_id\": \"v1\", \"plugin_id\": \"" AGENT_PROC_HP_ID "\", \"alloc_id\": \"a1\", " \
	"\"access_mode\": \"single-node-writer\"" fields "}"
#define NAMES(vol, plugin, alloc)                                                            \
	"{\"volume_id\": \"" vol "\", \"plugin_id\": \"" plugin "\", \"alloc_id\": \"" alloc \
	"\", \"access_mode\": \"single-node-writer\"}"

struct bad_case {
	const char *method;
	const char *path; /* NULL: /v1/agent/mounts */
	const char *body;
	long status;
	const char *code;
	const char *msg_part;
};

static const struct bad_case bad_cases[] = {
    {"PUT", NULL, "{\"volume_id\": ", 400, "invalid_argument", "not valid JSON"},
    {"PUT", NULL, "[1, 2]", 400, "invalid_argument", "JSON object"},
    {"PUT", NULL, "", 400, "invalid_argument", "empty"},
    {"PUT", NULL, "{\"volume_id\": 5, \"plugin_id\": \"p\", \"alloc_id\": \"a\"}", 400,
     "invalid_argument", "volume_id: expected a string"},
    {"PUT", NULL, MOUNT_BODY(", \"read_only\": \"yes\""), 400, "invalid_argument", "read_only"},
    {"PUT", NULL, MOUNT_BODY(", \"mount_flags\": \"ro\""), 400, "invalid_argument", "mount_flags"},
    {"PUT", NULL, MOUNT_BODY(", \"secrets\": {\"k\": 1}"), 400, "invalid_argument",
     "secrets: every value"},
    {"PUT", NULL, MOUNT_BODY(", \"volume_context\": []"), 400, "invalid_argument",
     "volume_context"},
    {"PUT", NULL, MOUNT_BODY(", \"colour\": \"blue\""), 400, "invalid_argument",
     "unknown field \"colour\""},
    {"PUT", NULL, MOUNT_BODY(", \"volume_id\": \"v2\""), 400, "invalid_argument", "not valid JSON"},
    {"PUT", NULL, NAMES("../../etc", "p", "a"), 400, "invalid_argument", "volume_id"},
    {"PUT", NULL, NAMES("v", "p", "a/b"), 400, "invalid_argument", "alloc_id"},
    {"PUT", NULL, NAMES("v", "p\\u0001", "a"), 400, "invalid_argument", "plugin_id"},
    {"PUT", NULL, NAMES("v\\u0000x", "p", "a"), 400, "invalid_argument", "not valid JSON"},
    {"PUT", NULL, MOUNT_BODY(", \"attachment_mode\": \"floppy\""), 400, "invalid_argument",
     "attachment_mode"},
    {"PUT", NULL,
     "{\"volume_id\": \"v\", \"plugin_id\": \"p\", \"alloc_id\": \"a\","
     " \"access_mode\": \"everyone\"}",
     400, "invalid_argument", "access_mode"},
    {"PUT", NULL, NAMES("v", "no.such.plugin", "a"), 404, "not_found", "no.such.plugin"},
    {"DELETE", "/v1/agent/mounts/..%2F..%2Fetc/a", NULL, 400, "invalid_argument",
     "expected /v1/agent/mounts/<volume>/<alloc>"},
    {"DELETE", "/v1/agent/mounts/%2e%2e/a", NULL, 400, "invalid_argument", ".."},
    {"DELETE", "/v1/agent/mounts/v1", NULL, 400, "invalid_argument", "expected"},
    {"DELETE", "/v1/agent/mounts/v1/a1", NULL, 404, "not_found", "no mount"},
    {"GET", "/v1/agent/nothing", NULL, 404, "not_found", "no such endpoint"},
    {"POST", NULL, "{}", 405, "method_not_allowed", "POST"},
};

static void test_bad_requests(void **state)
{
	struct agent_proc *a = *state;
	size_t big_len = 2 * 1024 * 1024;
	char *big;

	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad_case *c = &bad_cases[i];

		expect(a, c->method, c->path ? c->path : "/v1/agent/mounts", c->body, c->status,
		       c->code, c->msg_part);
	}
	big = malloc(big_len + 1);
	assert_non_null(big);
	memset(big, ' ', big_len);
	big[0] = '{';
	big[big_len - 1] = '}';
	big[big_len] = '\0';
	expect(a, "PUT", "/v1/agent/mounts", big, 413, "too_large", "larger than");
	free(big);
	/* Nothing was recorded, nothing mounted, and the agent still serves. */
	assert_int_equal(agent_proc_mount_count(a), 0);
	assert_int_equal(agent_proc_mounts_under(a->data_dir), 0);
	assert_int_equal(agent_proc_http(a, "GET", "/v1/agent/self", NULL, NULL), 200);
}

static bool is_unhealthy(void *ctx)
{
	struct agent_proc_plugin p;

	return agent_proc_plugin(ctx, AGENT_PROC_HP_ID, "node", &p) == 0 && p.found && !p.healthy;
}

static void test_unhealthy_plugin(void **state)
{
	struct agent_proc *a = *state;
	char vol[64];
	int64_t t0;
	json_t *doc = NULL;

	assert_int_equal(agent_proc_create_volume(a, "sick", vol), 0);
	assert_int_equal(
	    agent_proc_write_faults(a, "Probe code=UNAVAILABLE msg=\"disk on fire\"\n"), 0);
	assert_true(agent_proc_poll(is_unhealthy, a, 10000));
	/* The mount waits (bounded: 1s here) for the plugin, then fails clearly. */
	t0 = agent_proc_now_ms();
	expect(a, "PUT", "/v1/agent/mounts",
	       "{\"volume_id\": \"sick\", \"plugin_id\": \"" AGENT_PROC_HP_ID "\","
	       " \"alloc_id\": \"a1\", \"access_mode\": \"single-node-writer\"}",
	       503, "unavailable", "not healthy");
	assert_true(agent_proc_now_ms() - t0 >= 900);
	assert_true(agent_proc_now_ms() - t0 < 10000);
	assert_int_equal(agent_proc_mount_count(a), 0);
	/* A failing RPC (not the plugin's health) is reported with the plugin's code. */
	assert_int_equal(agent_proc_write_faults(a, "NodeStageVolume code=RESOURCE_EXHAUSTED "
						    "msg=\"no room\"\n"),
			 0);
	assert_true(agent_proc_wait_healthy(a, AGENT_PROC_HP_ID, 10000));
	expect(a, "PUT", "/v1/agent/mounts",
	       "{\"volume_id\": \"sick\", \"external_id\": \"vol-0000000000000000\","
	       " \"plugin_id\": \"" AGENT_PROC_HP_ID "\", \"alloc_id\": \"a1\","
	       " \"access_mode\": \"single-node-writer\"}",
	       429, "resource_exhausted", "no room");
	assert_int_equal(agent_proc_mount_count(a), 0);
	/* Once the plugin is fine the same request works. */
	assert_int_equal(agent_proc_write_faults(a, ""), 0);
	assert_int_equal(agent_proc_mount(a, vol, "a1", &doc), 200);
	json_decref(doc);
	assert_int_equal(agent_proc_unmount(a, vol, "a1"), 200);
	assert_int_equal(agent_proc_http(a, "GET", "/v1/agent/self", NULL, NULL), 200);
}

static bool plugin_hangs(void *ctx)
{
	return agent_proc_plugin_log_count(ctx, "injected hang", 1);
}

/*
 * A plugin that hangs in NodePublishVolume: the mount fails at the RPC
 * deadline (1s here) and is rolled back (or left recorded when the rollback
 * times out too; the next call on it finishes it), while other requests
 * are served at once (a thread per connection).
 */
static void test_hanging_plugin(void **state)
{
	struct agent_proc *a = *state;
	struct agent_proc_call call = {.a = a, .alloc = "a-hang"};
	struct agent_proc_plugin p;
	char vol[64];
	int64_t t0;

	assert_int_equal(agent_proc_create_volume(a, "hang", vol), 0);
	call.vol = vol;
	assert_int_equal(agent_proc_write_faults(a, "NodePublishVolume hang\n"), 0);
	assert_int_equal(agent_proc_call_start(&call), 0);
	assert_true(agent_proc_poll(plugin_hangs, a, 10000));
	t0 = agent_proc_now_ms();
	assert_int_equal(agent_proc_http(a, "GET", "/v1/agent/self", NULL, NULL), 200);
	assert_int_equal(agent_proc_http(a, "GET", "/v1/agent/plugins", NULL, NULL), 200);
	assert_int_equal(agent_proc_http(a, "GET", "/v1/agent/mounts", NULL, NULL), 200);
	assert_true(agent_proc_now_ms() - t0 < 900);
	agent_proc_call_join(&call);
	assert_int_equal(call.status, 504);
	assert_true(call.ms >= 900 && call.ms < 10000);
	assert_true(agent_proc_wait_log(a, "DEADLINE_EXCEEDED", 1, AGENT_PROC_LOG_MS));
	/* Rolled back, or (if the rollback timed out too) left recorded for the next call. */
	assert_true(agent_proc_mount_count(a) <= 1);
	/* Kill the plugin so the hung call never completes, then it works again. */
	assert_int_equal(agent_proc_plugin(a, AGENT_PROC_HP_ID, "node", &p), 0);
	assert_int_equal(kill(p.pid, SIGKILL), 0);
	assert_int_equal(agent_proc_write_faults(a, ""), 0);
	assert_true(agent_proc_wait_replaced(a, p.active, 20000));
	assert_int_equal(agent_proc_mount(a, vol, "a-hang", NULL), 200);
	assert_int_equal(agent_proc_mount_count(a), 1);
	assert_int_equal(agent_proc_unmount(a, vol, "a-hang"), 200);
	assert_int_equal(agent_proc_mount_count(a), 0);
	assert_int_equal(agent_proc_mounts_under(a->data_dir), 0);
}

/*
 * The command line and the config file: clear errors, exit status 2,
 * nothing started; a second agent on the data_dir of a running one is
 * refused, and the running one keeps serving.
 */
static void test_bad_command_lines(void **state)
{
	struct agent_proc *a = *state;
	char out[4096], cfg[AGENT_PROC_PATH + 16];
	const char *help[] = {"-h", NULL};
	const char *version[] = {"version", NULL};
	const char *unknown[] = {"frobnicate", NULL};
	const char *badflag[] = {"agent", "-no-such-flag", "x", NULL};
	const char *missing[] = {"agent", "-config", "/nonexistent/agent.json", NULL};
	const char *badcfg[] = {"agent", "-config", cfg, NULL};
	const char *level[] = {"agent", "-data-dir", "/tmp/x", "-log-level", "loud", NULL};
	const char *second[] = {"agent", "-config", a->config, NULL};

	assert_int_equal(agent_proc_run_csid(help, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "usage: csid"));
	assert_int_equal(agent_proc_run_csid(version, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "csid "));
	assert_int_equal(agent_proc_run_csid(unknown, out, sizeof(out)), 2);
	assert_non_null(strstr(out, "unknown command"));
	assert_int_equal(agent_proc_run_csid(badflag, out, sizeof(out)), 2);
	assert_non_null(strstr(out, "-no-such-flag"));
	assert_int_equal(agent_proc_run_csid(missing, out, sizeof(out)), 2);
	assert_non_null(strstr(out, "/nonexistent/agent.json"));
	assert_int_equal(agent_proc_run_csid(level, out, sizeof(out)), 2);
	assert_non_null(strstr(out, "-log-level"));
	snprintf(cfg, sizeof(cfg), "%s/bad.json", a->dir);
	{
		FILE *f = fopen(cfg, "w");

		assert_non_null(f);
		fputs("{\"data_dir\": \"/tmp/x\", \"plugins\": [{\"id\": \"../up\", "
		      "\"type\": \"node\", \"socket\": \"/s\"}]}",
		      f);
		fclose(f);
	}
	assert_int_equal(agent_proc_run_csid(badcfg, out, sizeof(out)), 2);
	assert_non_null(strstr(out, "plugins[0].id"));
	/* A second agent on the running one's data_dir (and database): refused, at once. */
	assert_int_not_equal(agent_proc_run_csid(second, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "another agent is running on it"));
	/* The running agent was not disturbed. */
	assert_int_equal(agent_proc_http(a, "GET", "/v1/agent/self", NULL, NULL), 200);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_bad_requests, setup, agent_proc_teardown),
	    cmocka_unit_test_setup_teardown(test_unhealthy_plugin, setup, agent_proc_teardown),
	    cmocka_unit_test_setup_teardown(test_bad_command_lines, setup, agent_proc_teardown),
	    cmocka_unit_test_setup_teardown(test_hanging_plugin, setup, agent_proc_teardown),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	csi_grpc_shutdown();
	return rc;
}
