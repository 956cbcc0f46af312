/*
 * End to end: a `csid server` without controller plugins of its own
 * drives the controller plugin that a `csid agent` supervises, through
 * the agent's API on TCP (POST /v1/agent/controller/...). The agent runs
 * csi-hostpath as a monolith with controller publish; the node is
 * registered through the server's API with the agent's address (as the
 * agent's own registration will do). A volume is created (CreateVolume
 * through the agent), claimed (ControllerPublishVolume through the
 * agent), released (ControllerUnpublishVolume) and deleted; a wrong or
 * missing token is refused with 403 and no secret reaches a log; with the
 * agent gone the volume's status shows the error and the reconciler
 * retries, and the volume becomes ready once the agent is back. A plugin
 * that hangs is cut off by the server's deadline, which the agent
 * applies to the RPC (DEADLINE_EXCEEDED from the agent, not a timeout of
 * the HTTP request).
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
#include "http_client.h"
#include "server_proc.h"

#define T_HP AGENT_PROC_HP_ID
#define T_NODE "node-e2e"
#define T_SECRET "agent-secret-e2e-1"
#define T_WAIT_MS 60000

struct t_env {
	struct agent_proc *a;
	struct server_proc s;
	char agent_addr[64];
};

static int t_setup(void **state)
{
	struct t_env *t = calloc(1, sizeof(*t));
	char listener[160], server_cfg[1024];
	const char *edits[] = {"\"--no-controller-publish\", ", "", "\"plugin_log_max_bytes\"",
			       listener, NULL};
	void *as = NULL;
	int port = server_proc_free_port();

	*state = t;
	if (!t || port < 0)
		return -1;
	snprintf(t->agent_addr, sizeof(t->agent_addr), "127.0.0.1:%d", port);
	snprintf(listener, sizeof(listener),
		 "\"listener\": {\"addr\": \"%s\"}, \"server_token\": \"" T_SECRET "\",\n"
		 " \"plugin_log_max_bytes\"",
		 t->agent_addr);
	if (agent_proc_setup_hostpath(&as, edits) != 0)
		return -1;
	t->a = as;
	if (server_proc_init(&t->s) != 0)
		return -1;
	snprintf(server_cfg, sizeof(server_cfg), "%s",
		 "{\"data_dir\": \"@DIR@/d\", \"listen\": \"@ADDR@\", \"backoff_min\": \"20ms\","
		 " \"backoff_max\": \"300ms\", \"rpc_timeout\": \"2s\", \"node_ttl\": \"10m\","
		 " \"agent_token\": \"" T_SECRET "\"}");
	if (server_proc_write_config(&t->s, server_cfg, NULL) != 0 ||
	    server_proc_start(&t->s) != 0 || !server_proc_wait_ready(&t->s, T_WAIT_MS)) {
		server_proc_dump_log(&t->s, "server setup failed");
		return -1;
	}
	return 0;
}

static int t_teardown(void **state)
{
	struct t_env *t = *state;

	if (!t)
		return 0;
	server_proc_cleanup(&t->s);
	agent_proc_cleanup(t->a);
	free(t->a);
	free(t);
	return 0;
}

/* Registers the node as its agent will: both sides of hostpath, the agent's address. */
static void t_register(struct t_env *t)
{
	char body[1024];

	snprintf(body, sizeof(body),
		 "{\"address\": \"http://%s\", \"plugins\": ["
		 "{\"plugin_id\": \"" T_HP "\", \"type\": \"controller\", \"healthy\": true,"
		 " \"capabilities\": [\"CREATE_DELETE_VOLUME\", \"PUBLISH_UNPUBLISH_VOLUME\"]},"
		 "{\"plugin_id\": \"" T_HP "\", \"type\": \"node\", \"healthy\": true,"
		 " \"plugin_node_id\": \"" T_NODE "\","
		 " \"topology\": {\"topology.hostpath.csi/node\": \"" T_NODE "\"}}]}",
		 t->agent_addr);
	assert_int_equal(server_proc_http(&t->s, "PUT", "/v1/node/" T_NODE, body, NULL), 200);
}

static bool t_wait(struct t_env *t, const char *path, bool (*check)(json_t *doc))
{
	bool ok = server_proc_wait_doc(&t->s, path, check, T_WAIT_MS);

	if (!ok)
		agent_proc_dump_log(t->a, path);
	return ok;
}

/* The reconciler shows the agent's failure and keeps retrying. */
static bool t_failing(json_t *doc)
{
	json_t *st = json_object_get(doc, "status");
	const char *err = json_string_value(json_object_get(st, "last_error"));

	return err && strstr(err, "agent on node " T_NODE) &&
	       json_integer_value(json_object_get(st, "attempts")) >= 3;
}

static long t_agent_post(struct t_env *t, const char *token, const char *path, json_t **out)
{
	char base[80];
	struct http_client *c;
	json_t *ignored = NULL;
	long status;

	snprintf(base, sizeof(base), "http://%s", t->agent_addr);
	c = http_client_new(base);
	assert_non_null(c);
	http_client_token(c, token);
	status = http_client_json(c, "POST", path, "", out ? out : &ignored);
	json_decref(ignored);
	http_client_free(c);
	return status;
}

static const char t_spec[] = "{\"plugin_id\": \"" T_HP "\", \"capacity_min\": 1048576,"
			     " \"capabilities\": [{\"access_mode\": \"single-node-writer\","
			     " \"attachment_mode\": \"file-system\"}]}";

static void test_lifecycle_through_agent(void **state)
{
	static const char claim[] =
	    "{\"alloc_id\": \"a1\", \"node_id\": \"" T_NODE "\", \"mode\": \"write\","
	    " \"access_mode\": \"single-node-writer\", \"attachment_mode\": \"file-system\"}";
	struct t_env *t = *state;

	t_register(t);
	assert_true(server_proc_wait_plugin(&t->s, T_HP, T_WAIT_MS));
	assert_int_equal(server_proc_http(&t->s, "PUT", "/v1/volume/v1/create", t_spec, NULL), 200);
	assert_true(t_wait(t, "/v1/volume/v1", server_proc_volume_ready));
	assert_true(agent_proc_wait_log(
	    t->a, "method=POST path=/v1/agent/controller/" T_HP "/CreateVolume status=200", 1,
	    AGENT_PROC_LOG_MS));
	assert_true(server_proc_log_has(
	    &t->s, "msg=\"controller plugin through agent\" plugin=" T_HP " node=" T_NODE));

	assert_int_equal(server_proc_put(&t->s, "/v1/volume/v1/claim", claim), 200);
	assert_true(t_wait(t, "/v1/volume/v1", server_proc_volume_published));
	assert_true(agent_proc_wait_log(
	    t->a, "path=/v1/agent/controller/" T_HP "/ControllerPublishVolume status=200", 1,
	    AGENT_PROC_LOG_MS));
	assert_int_equal(
	    server_proc_http(&t->s, "PUT", "/v1/volume/v1/release", "{\"alloc_id\": \"a1\"}", NULL),
	    200);
	assert_true(t_wait(t, "/v1/volume/v1", server_proc_volume_freed));
	assert_true(agent_proc_wait_log(
	    t->a, "path=/v1/agent/controller/" T_HP "/ControllerUnpublishVolume status=200", 1,
	    AGENT_PROC_LOG_MS));
	assert_int_equal(server_proc_http(&t->s, "DELETE", "/v1/volume/v1/delete", NULL, NULL),
			 200);
	assert_true(t_wait(t, "/v1/volume/v1", server_proc_not_found));
	assert_true(
	    agent_proc_wait_log(t->a, "path=/v1/agent/controller/" T_HP "/DeleteVolume status=200",
				1, AGENT_PROC_LOG_MS));
	assert_false(agent_proc_log_count(t->a, T_SECRET, 1));
	assert_false(server_proc_log_has(&t->s, T_SECRET));
}

static void test_token_refused(void **state)
{
	static const char path[] = "/v1/agent/controller/" T_HP "/CreateVolume";
	struct t_env *t = *state;
	json_t *doc = NULL;

	assert_int_equal(t_agent_post(t, "wrong-token-e2e-1", path, &doc), 403);
	assert_string_equal(json_string_value(json_object_get(doc, "error")), "unknown token");
	json_decref(doc);
	doc = NULL;
	assert_int_equal(t_agent_post(t, NULL, path, &doc), 403);
	json_decref(doc);
	doc = NULL;
	/* The token is checked before the method: nothing is learnt without it. */
	assert_int_equal(t_agent_post(t, NULL, "/v1/agent/controller/x/NodePublishVolume", NULL),
			 403);
	/* With the token: a node RPC is refused, an empty CreateVolume reaches the plugin. */
	assert_int_equal(
	    t_agent_post(t, T_SECRET, "/v1/agent/controller/" T_HP "/NodePublishVolume", NULL),
	    400);
	assert_int_equal(t_agent_post(t, T_SECRET, path, &doc), 200);
	assert_string_equal(json_string_value(json_object_get(doc, "code")), "INVALID_ARGUMENT");
	json_decref(doc);
	assert_int_equal(
	    t_agent_post(t, T_SECRET, "/v1/agent/controller/no.such.plugin/Probe", NULL), 404);
	assert_true(agent_proc_wait_log(t->a, "status=403", 3, AGENT_PROC_LOG_MS));
	assert_false(agent_proc_log_count(t->a, "wrong-token-e2e-1", 1));
	assert_false(agent_proc_log_count(t->a, T_SECRET, 1));
}

static void test_agent_down_then_back(void **state)
{
	struct t_env *t = *state;

	t_register(t);
	assert_true(server_proc_wait_plugin(&t->s, T_HP, T_WAIT_MS));
	assert_int_equal(agent_proc_stop(t->a, SIGTERM, 20000), 0);
	assert_int_equal(server_proc_http(&t->s, "PUT", "/v1/volume/v2/create", t_spec, NULL), 200);
	assert_true(t_wait(t, "/v1/volume/v2", t_failing));
	assert_int_equal(agent_proc_start(t->a), 0);
	assert_int_equal(agent_proc_wait_ready(t->a, AGENT_PROC_HP_START_MS), 0);
	assert_true(t_wait(t, "/v1/volume/v2", server_proc_volume_ready));
	assert_int_equal(server_proc_http(&t->s, "DELETE", "/v1/volume/v2/delete", NULL, NULL),
			 200);
	assert_true(t_wait(t, "/v1/volume/v2", server_proc_not_found));
	assert_false(server_proc_log_has(&t->s, T_SECRET));
}

/* The RPC ended at the agent with the server's deadline. */
static bool t_deadline(json_t *doc)
{
	const char *err =
	    json_string_value(json_object_get(json_object_get(doc, "status"), "last_error"));

	return err && strstr(err, "plugin " T_HP ": DEADLINE_EXCEEDED") &&
	       !strstr(err, "agent on node");
}

static void test_server_deadline_at_agent(void **state)
{
	struct t_env *t = *state;

	t_register(t);
	assert_true(server_proc_wait_plugin(&t->s, T_HP, T_WAIT_MS));
	/* The plugin hangs until the script changes: only a deadline ends the call. */
	assert_int_equal(agent_proc_write_faults(t->a, "CreateVolume hang\n"), 0);
	assert_int_equal(server_proc_http(&t->s, "PUT", "/v1/volume/v3/create", t_spec, NULL), 200);
	assert_true(t_wait(t, "/v1/volume/v3", t_deadline));
	assert_true(
	    agent_proc_wait_log(t->a, "path=/v1/agent/controller/" T_HP "/CreateVolume status=200",
				1, AGENT_PROC_LOG_MS));
	assert_int_equal(agent_proc_write_faults(t->a, ""), 0);
	assert_true(t_wait(t, "/v1/volume/v3", server_proc_volume_ready));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_lifecycle_through_agent, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_token_refused, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_agent_down_then_back, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_server_deadline_at_agent, t_setup, t_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
