/*
 * End to end: `csid server` against a controller plugin that misbehaves
 * (csi-hostpath's fault script): a final error is shown on the volume, not
 * retried in a tight loop, and kept across a restart; a plugin that crashes in the middle of
 * CreateVolume is restarted by the supervisor and the create completes;
 * a ControllerPublishVolume that hangs is cut by the RPC deadline, shown
 * as the volume's last error, and completes once the plugin answers
 * again; the server keeps answering throughout.
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

#include "hostpath_proc.h"
#include "server_proc.h"

#define WAIT_MS 30000

static const char node_body[] =
    "{\"plugins\": [{\"plugin_id\": \"" SERVER_PROC_HP_ID "\", \"type\": \"node\", "
    "\"healthy\": true, \"health\": \"healthy\", \"version\": \"0.1.0\", "
    "\"capabilities\": [\"STAGE_UNSTAGE_VOLUME\"], \"plugin_node_id\": \"node-1\", "
    "\"topology\": {\"topology.hostpath.csi/node\": \"node-1\"}}]}";

static const char spec[] = "{\"plugin_id\": \"" SERVER_PROC_HP_ID "\", \"capacity_min\": \"1MiB\", "
			   "\"capabilities\": [{\"access_mode\": \"single-node-writer\"}]}";

static int setup(void **state)
{
	struct server_proc *s = calloc(1, sizeof(*s));

	if (!s)
		return -1;
	*state = s;
	/* A short RPC deadline, so a hang is cut quickly. */
	if (server_proc_init(s) ||
	    server_proc_write_config(
		s,
		"{\"data_dir\": \"@DIR@/d\", \"listen\": \"@ADDR@\", \"backoff_min\": \"20ms\","
		" \"backoff_max\": \"300ms\", \"rpc_timeout\": \"1s\", \"controller_plugins\": "
		"[{\"id\": \"" SERVER_PROC_HP_ID "\", \"command\": \"@HP@\", \"args\": "
		"[\"--endpoint\", \"${CSI_ENDPOINT}\", \"--data-dir\", \"@DIR@/hp\", \"--node-id\","
		" \"node-1\", \"--faults\", \"@DIR@/faults\"]}]}",
		NULL) ||
	    server_proc_start(s) || !server_proc_wait_ready(s, WAIT_MS) ||
	    !server_proc_wait_plugin(s, SERVER_PROC_HP_ID, WAIT_MS) ||
	    server_proc_http(s, "PUT", "/v1/node/node-1", node_body, NULL) != 200) {
		server_proc_dump_log(s, "setup");
		server_proc_cleanup(s);
		free(s);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	struct server_proc *s = *state;

	server_proc_cleanup(s);
	free(s);
	return 0;
}

/* Polls GET /v1/volume/<id> until status.last_error holds needle. */
static bool wait_error(struct server_proc *s, const char *id, const char *needle)
{
	int64_t deadline = hpp_now_ms() + WAIT_MS;
	char path[128];

	snprintf(path, sizeof(path), "/v1/volume/%s", id);
	while (hpp_now_ms() < deadline) {
		json_t *v = NULL;
		const char *err;
		bool ok;

		server_proc_http(s, "GET", path, NULL, &v);
		err =
		    json_string_value(json_object_get(json_object_get(v, "status"), "last_error"));
		ok = err && strstr(err, needle);
		json_decref(v);
		if (ok)
			return true;
		hpp_pause_ms(20);
	}
	return false;
}

static void test_final_error_shown(void **state)
{
	struct server_proc *s = *state;
	json_t *v = NULL;
	int64_t attempts;

	assert_int_equal(server_proc_write_faults(s, "CreateVolume code=INVALID_ARGUMENT "
						     "msg=\"no such pool\"\n"),
			 0);
	assert_int_equal(server_proc_http(s, "PUT", "/v1/volume/bad/create", spec, NULL), 200);
	assert_true(server_proc_wait_field(s, "/v1/volume/bad", "state", "failed", WAIT_MS));
	assert_true(wait_error(s, "bad", "no such pool"));
	assert_int_equal(server_proc_http(s, "GET", "/v1/volume/bad", NULL, &v), 200);
	attempts = json_integer_value(json_object_get(json_object_get(v, "status"), "attempts"));
	json_decref(v);
	/* A final error is not retried in a loop: the count stays put. */
	hpp_pause_ms(500);
	assert_int_equal(server_proc_http(s, "GET", "/v1/volume/bad", NULL, &v), 200);
	assert_int_equal(
	    json_integer_value(json_object_get(json_object_get(v, "status"), "attempts")),
	    attempts);
	json_decref(v);
	/* The reason outlives a restart: it is kept in the volume's record. */
	assert_int_equal(server_proc_stop(s, SIGTERM, 10000), 0);
	assert_int_equal(server_proc_start(s), 0);
	assert_true(server_proc_wait_ready(s, WAIT_MS));
	assert_int_equal(server_proc_http(s, "GET", "/v1/volume/bad", NULL, &v), 200);
	assert_string_equal(json_string_value(json_object_get(v, "state")), "failed");
	assert_non_null(json_string_value(json_object_get(v, "failure")));
	assert_non_null(strstr(json_string_value(json_object_get(v, "failure")), "no such pool"));
	json_decref(v);
	assert_false(server_proc_log_has(s, "runtime error"));
}

static void test_crash_in_create(void **state)
{
	struct server_proc *s = *state;
	int64_t deadline;

	assert_int_equal(server_proc_write_faults(s, "CreateVolume nth=1 crash=after\n"), 0);
	assert_int_equal(server_proc_http(s, "PUT", "/v1/volume/c1/create", spec, NULL), 200);
	/* The plugin dies once it created the volume; then it behaves. */
	deadline = hpp_now_ms() + WAIT_MS;
	while (!server_proc_log_has(s, "msg=\"plugin exited\"") && hpp_now_ms() < deadline)
		hpp_pause_ms(20);
	assert_true(server_proc_log_has(s, "msg=\"plugin exited\""));
	assert_int_equal(server_proc_write_faults(s, ""), 0);
	/* The supervisor restarts it; the retry finds the volume by name
	 * (CreateVolume is idempotent): one volume, ready. */
	if (!server_proc_wait_field(s, "/v1/volume/c1", "state", "ready", WAIT_MS)) {
		server_proc_dump_log(s, "crash");
		fail_msg("volume never became ready after the plugin crashed");
	}
}

static void test_hang_in_publish(void **state)
{
	struct server_proc *s = *state;
	int64_t deadline;
	bool published = false;
	json_t *v = NULL;

	assert_int_equal(server_proc_http(s, "PUT", "/v1/volume/h1/create", spec, NULL), 200);
	assert_true(server_proc_wait_field(s, "/v1/volume/h1", "state", "ready", WAIT_MS));
	assert_int_equal(server_proc_write_faults(s, "ControllerPublishVolume hang\n"), 0);
	assert_int_equal(server_proc_http(s, "PUT", "/v1/volume/h1/claim",
					  "{\"alloc_id\": \"a1\", \"node_id\": \"node-1\", "
					  "\"access_mode\": \"single-node-writer\"}",
					  NULL),
			 200);
	/* Cut by the 1 s deadline, shown, retried. */
	assert_true(wait_error(s, "h1", "ControllerPublishVolume"));
	assert_int_equal(server_proc_http(s, "GET", "/v1/status/health", NULL, NULL), 200);
	/* The plugin answers again: the publication completes. */
	assert_int_equal(server_proc_write_faults(s, ""), 0);
	deadline = hpp_now_ms() + WAIT_MS;
	while (!published && hpp_now_ms() < deadline) {
		json_t *p;

		server_proc_http(s, "GET", "/v1/volume/h1", NULL, &v);
		p = json_array_get(json_object_get(v, "publications"), 0);
		published =
		    p && strcmp(json_string_value(json_object_get(p, "state")), "published") == 0;
		json_decref(v);
		if (!published)
			hpp_pause_ms(20);
	}
	assert_true(published);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_final_error_shown, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_crash_in_create, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hang_in_publish, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
