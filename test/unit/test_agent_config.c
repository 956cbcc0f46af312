/*
 * Unit tests of the agent configuration (src/agent/config.c): a complete
 * file, defaults, durations, overrides, variable expansion, and the strict
 * validation errors an operator sees for typos and hostile values.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/config.h"
#include "util/conf.h"

static struct config *parse_ok(const char *json)
{
	struct config *cfg = NULL;
	struct err e;

	err_clear(&e);
	if (config_parse(json, strlen(json), &cfg, &e) != 0)
		fail_msg("unexpected error: %s", e.msg);
	return cfg;
}

/* Parses json expecting failure, and checks the message contains want. */
static void parse_bad(const char *json, const char *want)
{
	struct config *cfg = NULL;
	struct err e;
	int rc;

	err_clear(&e);
	rc = config_parse(json, strlen(json), &cfg, &e);
	if (rc == 0)
		fail_msg("accepted: %s", json);
	assert_null(cfg);
	assert_int_equal(rc, CSID_EINVAL);
	if (!strstr(e.msg, want))
		fail_msg("error \"%s\" lacks \"%s\"", e.msg, want);
}

static void test_full(void **state)
{
	struct config *cfg = parse_ok(
	    "{\"data_dir\": \"/var/lib/csid\", \"node_name\": \"n1\","
	    " \"listener\": {\"socket\": \"/run/a.sock\", \"addr\": \"127.0.0.1:4650\"},"
	    " \"timings\": {\"probe_interval\": \"100ms\", \"health_timeout\": \"2s\","
	    "  \"resync_period\": \"1m\", \"backoff_base\": \"10ms\", \"backoff_max\": \"1s\","
	    "  \"rpc_timeout\": \"2s\", \"reconnect_max\": \"5s\"},"
	    " \"plugin_log_max_bytes\": 8192, \"server_token\": \"shared-secret-1\","
	    " \"plugins\": [{\"id\": \"hostpath.csi.csid.dev\", \"type\": \"monolith\","
	    "   \"command\": \"/bin/hp\", \"args\": [\"--endpoint=${CSI_ENDPOINT}\"],"
	    "   \"env\": {\"NODE\": \"${NODE_NAME}\"}},"
	    "  {\"id\": \"ext\", \"type\": \"node\", \"socket\": \"/run/ext.sock\"}]}");

	assert_string_equal(cfg->data_dir, "/var/lib/csid");
	assert_string_equal(cfg->node_name, "n1");
	assert_string_equal(cfg->listen_socket, "/run/a.sock");
	assert_string_equal(cfg->listen_addr, "127.0.0.1:4650");
	assert_int_equal(cfg->probe_interval_ms, 100);
	assert_int_equal(cfg->health_timeout_ms, 2000);
	assert_int_equal(cfg->resync_period_ms, 60000);
	assert_int_equal(cfg->backoff_base_ms, 10);
	assert_int_equal(cfg->backoff_max_ms, 1000);
	assert_int_equal(cfg->rpc_timeout_ms, 2000);
	assert_int_equal(cfg->reconnect_max_ms, 5000);
	assert_int_equal(cfg->plugin_log_max_bytes, 8192);
	assert_string_equal(cfg->server_token, "shared-secret-1");
	assert_int_equal(cfg->nplugins, 2);
	assert_string_equal(cfg->plugins[0].id, "hostpath.csi.csid.dev");
	assert_int_equal(cfg->plugins[0].type, CONFIG_PLUGIN_MONOLITH);
	assert_string_equal(cfg->plugins[0].command, "/bin/hp");
	assert_int_equal(cfg->plugins[0].nargs, 1);
	assert_int_equal(cfg->plugins[0].nenv, 1);
	assert_string_equal(cfg->plugins[0].env[0].name, "NODE");
	assert_null(cfg->plugins[0].socket);
	assert_string_equal(cfg->plugins[1].socket, "/run/ext.sock");
	assert_null(cfg->plugins[1].command);
	assert_non_null(config_find_plugin(cfg, "ext"));
	assert_null(config_find_plugin(cfg, "nope"));
	config_free(cfg);
}

static void test_defaults_and_finalize(void **state)
{
	struct config *cfg = parse_ok("{}");
	struct err e;

	assert_int_equal(cfg->probe_interval_ms, 30000);
	assert_int_equal(cfg->health_timeout_ms, 30000);
	assert_int_equal(cfg->backoff_base_ms, 1000);
	assert_int_equal(cfg->backoff_max_ms, 60000);
	assert_int_equal(cfg->rpc_timeout_ms, 15000);
	assert_int_equal(cfg->reconnect_max_ms, 30000);
	assert_int_equal(cfg->nplugins, 0);
	/* No data_dir anywhere: a clear error. */
	assert_int_equal(config_finalize(cfg, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "data_dir"));
	assert_int_equal(config_override(cfg, "/tmp/d", "node-x", NULL, &e), 0);
	assert_int_equal(config_finalize(cfg, &e), 0);
	assert_string_equal(cfg->listen_socket, "/tmp/d/agent.sock");
	assert_string_equal(cfg->node_name, "node-x");
	assert_null(cfg->listen_addr);
	config_free(cfg);
}

static void test_override(void **state)
{
	struct config *cfg = parse_ok("{\"data_dir\": \"rel\", \"node_name\": \"a\"}");
	char cwd[4096], want[4200];
	struct err e;

	assert_int_equal(config_override(cfg, NULL, NULL, "unix:/tmp/x.sock", &e), 0);
	assert_string_equal(cfg->listen_socket, "/tmp/x.sock");
	assert_int_equal(config_override(cfg, NULL, NULL, "127.0.0.1:9", &e), 0);
	assert_string_equal(cfg->listen_addr, "127.0.0.1:9");
	assert_int_equal(config_override(cfg, NULL, NULL, "nonsense", &e), CSID_EINVAL);
	assert_int_equal(config_override(cfg, NULL, "../evil", NULL, &e), CSID_EINVAL);
	assert_string_equal(cfg->node_name, "a");
	assert_int_equal(config_finalize(cfg, &e), 0);
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	snprintf(want, sizeof(want), "%s/rel", cwd);
	assert_string_equal(cfg->data_dir, want);
	config_free(cfg);
}

static void test_durations(void **state)
{
	assert_int_equal(conf_parse_duration("100ms"), 100);
	assert_int_equal(conf_parse_duration("30s"), 30000);
	assert_int_equal(conf_parse_duration("1m"), 60000);
	assert_int_equal(conf_parse_duration("1h2m3s"), 3723000);
	assert_int_equal(conf_parse_duration("1.5s"), 1500);
	assert_int_equal(conf_parse_duration("0"), 0);
	assert_int_equal(conf_parse_duration(""), -1);
	assert_int_equal(conf_parse_duration("10"), -1);
	assert_int_equal(conf_parse_duration("s"), -1);
	assert_int_equal(conf_parse_duration("5x"), -1);
	assert_int_equal(conf_parse_duration("-5s"), -1);
	assert_int_equal(conf_parse_duration("99999999999999999999h"), -1);
	assert_int_equal(conf_parse_duration("9000h"), -1);
}

static void test_bad(void **state)
{
	parse_bad("{", "line 1");
	parse_bad("[]", "expected a JSON object");
	parse_bad("{\"data_dri\": \"/x\"}", "unknown key data_dri");
	parse_bad("{\"data_dir\": 5}", "data_dir: expected a string");
	parse_bad("{\"data_dir\": \"/a\", \"data_dir\": \"/b\"}", "duplicate");
	parse_bad("{\"timings\": {\"probe_interval\": 30}}", "timings.probe_interval");
	parse_bad("{\"timings\": {\"probe_interval\": \"30 s\"}}", "invalid duration");
	parse_bad("{\"timings\": {\"probe_interval\": \"1ms\"}}", "at least");
	parse_bad("{\"timings\": {\"probe\": \"1s\"}}", "timings: unknown key probe");
	parse_bad("{\"timings\": {\"backoff_base\": \"2s\", \"backoff_max\": \"1s\"}}",
		  "backoff_max");
	parse_bad("{\"listener\": {\"socket\": \"rel.sock\"}}", "absolute");
	parse_bad("{\"plugins\": {}}", "plugins: expected an array");
	parse_bad("{\"plugins\": [5]}", "plugins[0]: expected an object");
	parse_bad("{\"plugins\": [{\"type\": \"node\", \"socket\": \"/s\"}]}", "plugins[0].id");
	parse_bad("{\"plugins\": [{\"id\": \"a/b\", \"type\": \"node\", \"socket\": \"/s\"}]}",
		  "'/'");
	parse_bad("{\"plugins\": [{\"id\": \"..\", \"type\": \"node\", \"socket\": \"/s\"}]}",
		  "..");
	parse_bad("{\"plugins\": [{\"id\": \"a\\u0001\", \"type\": \"node\", \"socket\": \"/s\"}]}",
		  "control");
	parse_bad(
	    "{\"plugins\": [{\"id\": \"a\\u0000b\", \"type\": \"node\", \"socket\": \"/s\"}]}",
	    "NUL");
	parse_bad("{\"plugins\": [{\"id\": \"\", \"type\": \"node\", \"socket\": \"/s\"}]}",
		  "empty");
	parse_bad("{\"plugins\": [{\"id\": \"a\", \"type\": \"both\", \"socket\": \"/s\"}]}",
		  "plugins[0].type");
	parse_bad("{\"plugins\": [{\"id\": \"a\", \"type\": \"node\"}]}", "\"command\" or");
	parse_bad("{\"plugins\": [{\"id\": \"a\", \"type\": \"node\", \"socket\": \"/s\","
		  " \"command\": \"/x\"}]}",
		  "excludes");
	parse_bad("{\"plugins\": [{\"id\": \"a\", \"type\": \"node\", \"command\": \"/x\","
		  " \"args\": [1]}]}",
		  "plugins[0].args[0]: expected a string");
	parse_bad("{\"plugins\": [{\"id\": \"a\", \"type\": \"node\", \"command\": \"/x\","
		  " \"args\": [\"${HOME}\"]}]}",
		  "unknown variable");
	parse_bad("{\"plugins\": [{\"id\": \"a\", \"type\": \"node\", \"command\": \"/x\","
		  " \"env\": {\"A=B\": \"c\"}}]}",
		  "invalid variable name");
	parse_bad("{\"plugins\": [{\"id\": \"a\", \"type\": \"node\", \"command\": \"/x\","
		  " \"env\": [\"A=B\"]}]}",
		  "plugins[0].env: expected an object");
	parse_bad("{\"plugins\": [{\"id\": \"a\", \"type\": \"node\", \"command\": \"/x\"},"
		  " {\"id\": \"a\", \"type\": \"node\", \"command\": \"/y\"}]}",
		  "duplicate");
	parse_bad("{\"plugins\": [{\"id\": \"a\", \"type\": \"node\", \"command\": \"/x\","
		  " \"extra\": 1}]}",
		  "plugins[0]: unknown key extra");
	parse_bad("{\"plugin_log_max_bytes\": \"big\"}", "plugin_log_max_bytes");
	/* A bad server_token is named, never quoted. */
	parse_bad("{\"server_token\": \"short\"}", "server_token: expected a string of 8 to 256");
	parse_bad("{\"server_token\": 12345678}", "server_token: expected a string");
	{
		char long_token[300];

		snprintf(long_token, sizeof(long_token), "{\"server_token\": \"%0257d\"}", 7);
		parse_bad(long_token, "server_token: expected a string of 8 to 256");
	}
}

static void test_plain_ids(void **state)
{
	struct err e;

	assert_int_equal(config_plugin_check_id("id", "hostpath.csi.csid.dev", &e), 0);
	assert_int_equal(config_plugin_check_id("id", "a_b-c:1", &e), 0);
	assert_int_equal(config_plugin_check_id("id", "a b", &e), CSID_EINVAL);
	assert_int_equal(config_plugin_check_id("id", "a=b", &e), CSID_EINVAL);
	assert_int_equal(config_plugin_check_id("id", "a\"b", &e), CSID_EINVAL);
	assert_int_equal(config_plugin_check_id("id", "$(x)", &e), CSID_EINVAL);
	assert_int_equal(config_plugin_check_id("id", "a\\b", &e), CSID_EINVAL);
	assert_int_equal(config_plugin_check_id("id", ".", &e), CSID_EINVAL);
	assert_int_equal(config_plugin_check_id("id", NULL, &e), CSID_EINVAL);
}

static void test_long_id(void **state)
{
	char json[1024], id[CONFIG_ID_MAX + 2];
	struct err e;

	memset(id, 'a', sizeof(id) - 1);
	id[sizeof(id) - 1] = '\0';
	snprintf(json, sizeof(json),
		 "{\"plugins\": [{\"id\": \"%s\", \"type\": \"node\", \"socket\": \"/s\"}]}", id);
	parse_bad(json, "longer than");
	id[CONFIG_ID_MAX] = '\0';
	assert_int_equal(config_plugin_check_id("id", id, &e), 0);
}

static void test_expand_and_equal(void **state)
{
	struct config *cfg = parse_ok(
	    "{\"plugins\": [{\"id\": \"a\", \"type\": \"node\", \"command\": \"/x\","
	    " \"args\": [\"--endpoint=${CSI_ENDPOINT}\", \"${NODE_NAME}-${NODE_NAME}\"]},"
	    " {\"id\": \"b\", \"type\": \"node\", \"command\": \"/x\","
	    " \"args\": [\"--endpoint=${CSI_ENDPOINT}\", \"${NODE_NAME}-${NODE_NAME}\"]}]}");
	struct config_plugin copy;
	char *s;

	s = config_plugin_expand(cfg->plugins[0].args[0], "unix:///d/csi.sock", "n1");
	assert_string_equal(s, "--endpoint=unix:///d/csi.sock");
	free(s);
	s = config_plugin_expand(cfg->plugins[0].args[1], "unix:///d/csi.sock", "node-1");
	assert_string_equal(s, "node-1-node-1");
	free(s);
	s = config_plugin_expand("${OTHER}", "e", "n");
	assert_string_equal(s, "${OTHER}");
	free(s);
	/* The bare socket path, for plugins that take a path. */
	s = config_plugin_expand("--csi-address=${CSI_ENDPOINT_PATH} ${CSI_ENDPOINT}",
				 "unix:///d/csi.sock", "n");
	assert_string_equal(s, "--csi-address=/d/csi.sock unix:///d/csi.sock");
	free(s);
	s = config_plugin_expand("${CSI_ENDPOINT_PATH}${CSI_ENDPOINT_PATH}", "unix:/s", "n");
	assert_string_equal(s, "/s/s");
	free(s);
	config_free(parse_ok("{\"plugins\": [{\"id\": \"c\", \"type\": \"node\", "
			     "\"command\": \"/x\", \"args\": [\"${CSI_ENDPOINT_PATH}\"], "
			     "\"env\": {\"ADDRESS\": \"${CSI_ENDPOINT_PATH}\"}}]}"));
	assert_false(config_plugin_equal(&cfg->plugins[0], &cfg->plugins[1]));
	assert_int_equal(config_plugin_copy(&copy, &cfg->plugins[0]), 0);
	assert_true(config_plugin_equal(&copy, &cfg->plugins[0]));
	free(copy.args[1]);
	copy.args[1] = strdup("changed");
	assert_false(config_plugin_equal(&copy, &cfg->plugins[0]));
	config_plugin_clear(&copy);
	config_plugin_clear(NULL);
	config_free(NULL);
	config_free(cfg);
}

static void test_load_file(void **state)
{
	char path[] = "/tmp/csid-config-XXXXXX";
	struct config *cfg = NULL;
	struct err e;
	int fd = mkstemp(path);
	FILE *f;

	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	fputs("{\"node_name\": \"from-file\"}", f);
	fclose(f);
	assert_int_equal(config_load(path, &cfg, &e), 0);
	assert_string_equal(cfg->node_name, "from-file");
	config_free(cfg);
	unlink(path);
	assert_int_equal(config_load(path, &cfg, &e), CSID_ENOTFOUND);
	assert_non_null(strstr(e.msg, path));
}

/* servers, server_token and timings.heartbeat; the token is never quoted in an error. */
static void test_servers(void **state)
{
	struct config *cfg = parse_ok("{\"servers\": [\"http://10.0.0.1:4646/\","
				      " \"https://s2:4646\", \"unix:/run/csid/server.sock\"],"
				      " \"server_token\": \"s3cr3t-9\","
				      " \"timings\": {\"heartbeat\": \"2s\"}}");
	char json[256];

	(void)state;
	assert_int_equal(cfg->nservers, 3);
	assert_string_equal(cfg->servers[0], "http://10.0.0.1:4646");
	assert_string_equal(cfg->servers[1], "https://s2:4646");
	assert_string_equal(cfg->servers[2], "unix:/run/csid/server.sock");
	assert_string_equal(cfg->server_token, "s3cr3t-9");
	assert_int_equal(cfg->heartbeat_ms, 2000);
	config_free(cfg);
	cfg = parse_ok("{}");
	assert_int_equal(cfg->nservers, 0);
	assert_null(cfg->server_token);
	assert_int_equal(cfg->heartbeat_ms, 10000);
	config_free(cfg);
	parse_bad("{\"servers\": []}", "servers: expected a non-empty array");
	parse_bad("{\"servers\": \"http://a:1\"}", "servers: expected a non-empty array");
	parse_bad("{\"servers\": [\"a:4646\"]}", "servers[0]: expected http://HOST:PORT");
	parse_bad("{\"servers\": [\"http://\"]}", "servers[0]: expected http://HOST:PORT");
	parse_bad("{\"servers\": [\"http://a:1/v1\"]}", "servers[0]: expected http://");
	parse_bad("{\"servers\": [\"http://a b:1\"]}", "servers[0]: expected http://");
	parse_bad("{\"servers\": [\"http://a:1\", \"http://a:1/\"]}",
		  "servers[1]: same as servers[0]");
	parse_bad("{\"servers\": [1]}", "servers[0]: expected a string");
	/* A server on this host at its unix socket: an absolute path that fits a socket. */
	parse_bad("{\"servers\": [\"unix:run/server.sock\"]}",
		  "servers[0]: expected http://HOST:PORT, https://HOST:PORT or unix:/PATH "
		  "(an absolute socket path of at most 107 bytes)");
	parse_bad("{\"servers\": [\"unix:\"]}", "servers[0]: expected http://");
	parse_bad("{\"servers\": [\"unix:/a\\tb\"]}", "servers[0]: expected http://");
	snprintf(json, sizeof(json), "{\"servers\": [\"unix:/%0107d\"]}", 0);
	parse_bad(json, "servers[0]: expected http://");
	snprintf(json, sizeof(json), "{\"servers\": [\"unix:/%0106d\"]}", 0);
	config_free(parse_ok(json));
	parse_bad("{\"server_token\": \"\"}", "server_token: expected a string of 8 to");
	parse_bad("{\"server_token\": \"s3cr3t-\\n-line\"}", "server_token: contains a space");
	parse_bad("{\"timings\": {\"heartbeat\": \"50ms\"}}",
		  "timings.heartbeat: must be at least 100ms");
	parse_bad("{\"timings\": {\"heartbeat\": \"11m\"}}", "timings.heartbeat: must be at most");
	{
		const char *bad = "{\"server_token\": \"top secret\"}";
		struct config *c = NULL;
		struct err e;

		err_clear(&e);
		assert_int_equal(config_parse(bad, strlen(bad), &c, &e), CSID_EINVAL);
		assert_non_null(strstr(e.msg, "server_token: contains a space"));
		assert_null(strstr(e.msg, "secret"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_full),      cmocka_unit_test(test_defaults_and_finalize),
	    cmocka_unit_test(test_override),  cmocka_unit_test(test_durations),
	    cmocka_unit_test(test_bad),       cmocka_unit_test(test_long_id),
	    cmocka_unit_test(test_plain_ids), cmocka_unit_test(test_expand_and_equal),
	    cmocka_unit_test(test_load_file), cmocka_unit_test(test_servers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
