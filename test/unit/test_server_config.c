/*
 * Unit tests of the server configuration (src/server/server_config.c): a
 * complete file, defaults, flag overrides, and the strict errors, each
 * naming the JSON path of the bad value and never echoing an ACL secret.
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

#include "server/server_config.h"
#include "util/log.h"

static struct server_config_file *sc_parse_ok(const char *json)
{
	struct server_config_file *cfg = NULL;
	struct err e;

	err_clear(&e);
	if (server_config_parse(json, strlen(json), &cfg, &e) != 0)
		fail_msg("unexpected error: %s", e.msg);
	return cfg;
}

/* Parses json expecting CSID_EINVAL with a message that contains want. */
static void sc_parse_bad(const char *json, const char *want)
{
	struct server_config_file *cfg = NULL;
	struct err e;
	int rc;

	err_clear(&e);
	rc = server_config_parse(json, strlen(json), &cfg, &e);
	if (rc == 0)
		fail_msg("accepted: %s", json);
	assert_null(cfg);
	assert_int_equal(rc, CSID_EINVAL);
	if (!strstr(e.msg, want))
		fail_msg("error \"%s\" lacks \"%s\"", e.msg, want);
}

static void test_full(void **state)
{
	struct server_config_file *cfg = sc_parse_ok(
	    "{\"data_dir\": \"/var/lib/csid-server\", \"listen\": \"0.0.0.0:8646\","
	    " \"socket\": \"/run/csid/server.sock\", \"store\": \"memory\", \"workers\": 8,"
	    " \"rpc_timeout\": \"2s\", \"backoff_min\": \"50ms\", \"backoff_max\": \"1m\","
	    " \"node_ttl\": \"10s\", \"node_grace\": \"2m\", \"plugin_concurrency\": 2, "
	    "\"log_level\": \"debug\","
	    " \"acl_tokens\": [{\"secret\": \"s3cret-write\", \"write\": true},"
	    "                  {\"secret\": \"s3cret-read\"}],"
	    " \"agent_token\": \"s3cret-agents\","
	    " \"controller_plugins\": ["
	    "   {\"id\": \"ebs.csi.aws.com\", \"socket\": \"/run/ebs/csi.sock\"},"
	    "   {\"id\": \"hostpath.csi.csid.dev\","
	    "    \"command\": \"/bin/hp\", \"args\": [\"--endpoint\", \"${CSI_ENDPOINT}\"],"
	    "    \"env\": {\"LOG\": \"debug\"}}]}");

	assert_string_equal(cfg->data_dir, "/var/lib/csid-server");
	assert_string_equal(cfg->listen, "0.0.0.0:8646");
	assert_string_equal(cfg->socket, "/run/csid/server.sock");
	assert_int_equal(cfg->store, SERVER_CONFIG_STORE_MEMORY);
	assert_int_equal(cfg->workers, 8);
	assert_int_equal(cfg->rpc_timeout_ms, 2000);
	assert_int_equal(cfg->backoff_min_ms, 50);
	assert_int_equal(cfg->backoff_max_ms, 60000);
	assert_int_equal(cfg->node_ttl_ms, 10000);
	assert_int_equal(cfg->node_grace_ms, 120000);
	assert_int_equal(cfg->plugin_concurrency, 2);
	assert_int_equal(cfg->log_level, LOG_DEBUG);
	assert_int_equal(cfg->ntokens, 2);
	assert_string_equal(cfg->tokens[0].secret, "s3cret-write");
	assert_true(cfg->tokens[0].write);
	assert_false(cfg->tokens[1].write);
	assert_string_equal(cfg->agent_token, "s3cret-agents");
	assert_int_equal(cfg->nplugins, 2);
	assert_string_equal(cfg->plugins[0].id, "ebs.csi.aws.com");
	assert_int_equal(cfg->plugins[0].type, CONFIG_PLUGIN_CONTROLLER);
	assert_string_equal(cfg->plugins[0].socket, "/run/ebs/csi.sock");
	assert_null(cfg->plugins[0].command);
	assert_string_equal(cfg->plugins[1].command, "/bin/hp");
	assert_int_equal(cfg->plugins[1].nargs, 2);
	assert_string_equal(cfg->plugins[1].args[1], "${CSI_ENDPOINT}");
	assert_int_equal(cfg->plugins[1].nenv, 1);
	assert_string_equal(cfg->plugins[1].env[0].value, "debug");
	assert_null(cfg->plugins[1].socket);
	server_config_free(cfg);
}

static void test_etcd(void **state)
{
	struct server_config_file *cfg = sc_parse_ok(
	    "{\"store\": \"etcd\", \"etcd\": {\"endpoints\": [\"https://10.0.0.1:2379\","
	    " \"https://10.0.0.2:2379\"], \"prefix\": \"/prod/\", \"dial_timeout\": \"3s\","
	    " \"request_timeout\": \"20s\", \"ca_file\": \"/etc/ca.pem\", \"cert_file\":"
	    " \"/etc/c.pem\", \"key_file\": \"/etc/k.pem\", \"max_request_bytes\": 2097152}}");

	assert_int_equal(cfg->store, SERVER_CONFIG_STORE_ETCD);
	assert_int_equal(cfg->etcd.nendpoints, 2);
	assert_string_equal(cfg->etcd.endpoints[1], "https://10.0.0.2:2379");
	assert_string_equal(cfg->etcd.prefix, "/prod/");
	assert_int_equal(cfg->etcd.dial_timeout_ms, 3000);
	assert_int_equal(cfg->etcd.request_timeout_ms, 20000);
	assert_string_equal(cfg->etcd.ca_file, "/etc/ca.pem");
	assert_string_equal(cfg->etcd.cert_file, "/etc/c.pem");
	assert_string_equal(cfg->etcd.key_file, "/etc/k.pem");
	assert_int_equal(cfg->etcd.max_request_bytes, 2097152);
	assert_int_equal(cfg->etcd.compaction_interval_ms, 0); /* the leader's default */
	server_config_free(cfg);
	cfg = sc_parse_ok("{\"store\": \"etcd\", \"etcd\": {\"endpoints\": [\"http://h:1\"],"
			  " \"compaction_interval\": \"10m\"}}");
	assert_int_equal(cfg->etcd.compaction_interval_ms, 600000);
	server_config_free(cfg);
	cfg = sc_parse_ok("{\"store\": \"etcd\", \"etcd\": {\"endpoints\": [\"http://h:1\"],"
			  " \"compaction_interval\": \"0s\"}}");
	assert_true(cfg->etcd.compaction_interval_ms < 0); /* never */
	server_config_free(cfg);
}

static void test_defaults_and_finalize(void **state)
{
	struct server_config_file *cfg = sc_parse_ok("{}");
	char cwd[4096], want[4200];
	struct err e;

	assert_int_equal(cfg->store, SERVER_CONFIG_STORE_SQLITE);
	assert_int_equal(cfg->rpc_timeout_ms, 15000);
	assert_int_equal(cfg->workers, 0);
	assert_int_equal(cfg->log_level, -1);
	assert_int_equal(server_config_finalize(cfg, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "data_dir"));
	assert_int_equal(server_config_override(cfg, "rel/dir", NULL, NULL, NULL, &e), 0);
	assert_int_equal(server_config_finalize(cfg, &e), 0);
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	snprintf(want, sizeof(want), "%s/rel/dir", cwd);
	assert_string_equal(cfg->data_dir, want);
	assert_string_equal(cfg->listen, SERVER_CONFIG_LISTEN_DEFAULT);
	snprintf(want, sizeof(want), "%s/rel/dir/server.db", cwd);
	assert_string_equal(cfg->store_path, want);
	snprintf(want, sizeof(want), "%s/rel/dir/server.lock", cwd);
	assert_string_equal(cfg->lock_path, want);
	assert_null(cfg->socket);
	server_config_free(cfg);
}

static void test_data_dir_too_long(void **state)
{
	struct server_config_file *cfg = sc_parse_ok("{}");
	char dir[4100];
	struct err e;

	memset(dir, 'd', sizeof(dir) - 1);
	dir[0] = '/';
	dir[4040] = '\0';
	assert_int_equal(server_config_override(cfg, dir, NULL, NULL, NULL, &e), 0);
	assert_int_equal(server_config_finalize(cfg, &e), CSID_EINVAL);
	assert_string_equal(e.msg, "data_dir: too long");
	server_config_free(cfg);
}

static void test_override(void **state)
{
	struct server_config_file *cfg =
	    sc_parse_ok("{\"data_dir\": \"/a\", \"listen\": \"127.0.0.1:1\", \"log_level\": "
			"\"warn\"}");
	struct err e;

	assert_int_equal(
	    server_config_override(cfg, "/b", "[::1]:4646", "/run/s.sock", "error", &e), 0);
	assert_string_equal(cfg->data_dir, "/b");
	assert_string_equal(cfg->listen, "[::1]:4646");
	assert_string_equal(cfg->socket, "/run/s.sock");
	assert_int_equal(cfg->log_level, LOG_ERROR);
	/* "" turns the TCP listener off and survives finalize. */
	assert_int_equal(server_config_override(cfg, NULL, "", NULL, NULL, &e), 0);
	assert_int_equal(server_config_finalize(cfg, &e), 0);
	assert_string_equal(cfg->listen, "");
	assert_int_equal(server_config_override(cfg, NULL, "localhost", NULL, NULL, &e),
			 CSID_EINVAL);
	assert_non_null(strstr(e.msg, "-listen"));
	assert_int_equal(server_config_override(cfg, NULL, "h:70000", NULL, NULL, &e), CSID_EINVAL);
	assert_int_equal(server_config_override(cfg, NULL, NULL, "rel.sock", NULL, &e),
			 CSID_EINVAL);
	assert_non_null(strstr(e.msg, "-socket"));
	assert_int_equal(server_config_override(cfg, NULL, NULL, NULL, "loud", &e), CSID_EINVAL);
	assert_int_equal(server_config_override(cfg, "", NULL, NULL, NULL, &e), CSID_EINVAL);
	/* A refused flag left the earlier values alone. */
	assert_string_equal(cfg->data_dir, "/b");
	assert_string_equal(cfg->socket, "/run/s.sock");
	server_config_free(cfg);
}

static void test_bad(void **state)
{
	sc_parse_bad("[]", "expected a JSON object");
	sc_parse_bad("{\"data_dir\": 1", "line 1");
	sc_parse_bad("{\"datadir\": \"/x\"}", "unknown key datadir");
	sc_parse_bad("{\"data_dir\": \"\"}", "data_dir: empty");
	sc_parse_bad("{\"data_dir\": 5}", "data_dir: expected a string");
	sc_parse_bad("{\"listen\": \"4646\"}", "listen: expected HOST:PORT");
	sc_parse_bad("{\"listen\": \"h:0\"}", "listen: port");
	sc_parse_bad("{\"listen\": \"::1:80\"}", "IPv6");
	sc_parse_bad("{\"socket\": \"x.sock\"}", "socket: must be an absolute path");
	sc_parse_bad("{\"store\": \"redis\"}", "store: expected");
	sc_parse_bad("{\"store\": \"etcd\"}", "needs etcd.endpoints");
	sc_parse_bad("{\"etcd\": {\"endpoints\": [\"http://h:1\"]}}", "\"store\" is not \"etcd\"");
	sc_parse_bad("{\"store\": \"etcd\", \"etcd\": {\"endpoints\": []}}",
		     "etcd.endpoints: expected an array");
	sc_parse_bad("{\"store\": \"etcd\", \"etcd\": {\"endpoints\": [\"h:2379\"]}}",
		     "etcd.endpoints[0]: expected http://");
	sc_parse_bad("{\"store\": \"etcd\", \"etcd\": {\"endpoints\": [\"http://h:1\"], \"x\": 1}}",
		     "etcd: unknown key x");
	sc_parse_bad("{\"store\": \"etcd\", \"etcd\": {\"endpoints\": [\"http://h:1\"],"
		     " \"prefix\": \"csid\"}}",
		     "etcd.prefix: must start and end");
	sc_parse_bad("{\"store\": \"etcd\", \"etcd\": {\"endpoints\": [\"http://h:1\"],"
		     " \"cert_file\": \"/c.pem\"}}",
		     "cert_file and key_file go together");
	sc_parse_bad("{\"store\": \"etcd\", \"etcd\": {\"endpoints\": [\"http://h:1\"],"
		     " \"compaction_interval\": \"10ms\"}}",
		     "etcd.compaction_interval: expected \"0s\" (off) or at least 1s");
	sc_parse_bad("{\"store\": \"etcd\", \"etcd\": {\"endpoints\": [\"http://h:1\"],"
		     " \"compaction_interval\": 5}}",
		     "etcd: compaction_interval: expected a duration");
	sc_parse_bad("{\"store\": \"etcd\", \"etcd\": {\"endpoints\": [\"http://h:1\"],"
		     " \"request_timeout\": \"1ms\"}}",
		     "etcd: request_timeout: must be at least");
	sc_parse_bad("{\"store\": \"etcd\", \"etcd\": {\"endpoints\": [\"http://h:1\"],"
		     " \"max_request_bytes\": 5}}",
		     "etcd.max_request_bytes");
	sc_parse_bad("{\"workers\": 0}", "workers: expected an integer from 1");
	sc_parse_bad("{\"workers\": \"4\"}", "workers");
	sc_parse_bad("{\"plugin_concurrency\": 1000}", "plugin_concurrency");
	sc_parse_bad("{\"rpc_timeout\": 15}", "rpc_timeout: expected a duration");
	sc_parse_bad("{\"rpc_timeout\": \"15 s\"}", "rpc_timeout: invalid duration");
	sc_parse_bad("{\"rpc_timeout\": \"1ms\"}", "rpc_timeout: must be at least");
	sc_parse_bad("{\"backoff_min\": \"2s\", \"backoff_max\": \"1s\"}", "backoff_max: shorter");
	sc_parse_bad("{\"node_ttl\": \"10ms\"}", "node_ttl: must be at least");
	sc_parse_bad("{\"node_grace\": \"10ms\"}", "node_grace: must be at least");
	sc_parse_bad("{\"node_grace\": 5}", "node_grace");
	sc_parse_bad("{\"log_level\": \"loud\"}", "log_level: expected");
	sc_parse_bad("{\"acl_tokens\": {}}", "acl_tokens: expected an array");
	sc_parse_bad("{\"acl_tokens\": [{\"write\": true}]}", "acl_tokens[0].secret: missing");
	sc_parse_bad("{\"acl_tokens\": [{\"secret\": \"abcdefgh\", \"read\": true}]}",
		     "acl_tokens[0]: unknown key read");
	sc_parse_bad("{\"acl_tokens\": [{\"secret\": \"abcdefgh\", \"write\": 1}]}",
		     "acl_tokens[0].write: expected true or false");
	sc_parse_bad("{\"controller_plugins\": [{\"socket\": \"/s\"}]}",
		     "controller_plugins[0].id: missing");
	sc_parse_bad("{\"controller_plugins\": [{\"id\": \"a/b\", \"socket\": \"/s\"}]}",
		     "controller_plugins[0].id must not contain '/'");
	sc_parse_bad("{\"controller_plugins\": [{\"id\": \"-a\", \"socket\": \"/s\"}]}",
		     "must start and end with a letter or digit");
	sc_parse_bad("{\"controller_plugins\": [{\"id\": \"a\"}]}",
		     "controller_plugins[0]: needs either");
	sc_parse_bad("{\"controller_plugins\": [{\"id\": \"a\", \"socket\": \"/s\", "
		     "\"command\": \"/x\"}]}",
		     "controller_plugins[0]: \"socket\" excludes");
	sc_parse_bad("{\"controller_plugins\": [{\"id\": \"a\", \"command\": [\"/bin/x\"]}]}",
		     "controller_plugins[0].command: expected a string");
	sc_parse_bad("{\"controller_plugins\": [{\"id\": \"a\", \"command\": \"\"}]}",
		     "controller_plugins[0].command: empty");
	sc_parse_bad("{\"controller_plugins\": [{\"id\": \"a\", \"command\": \"/x\", "
		     "\"args\": [3]}]}",
		     "controller_plugins[0].args[0]: expected a string");
	sc_parse_bad("{\"controller_plugins\": [{\"id\": \"a\", \"command\": \"/x\", "
		     "\"env\": {\"A\": 1}}]}",
		     "controller_plugins[0].env.A: expected a string");
	sc_parse_bad("{\"controller_plugins\": [{\"id\": \"a\", \"command\": \"/x\", "
		     "\"env\": {\"A=B\": \"1\"}}]}",
		     "controller_plugins[0].env");
	sc_parse_bad("{\"controller_plugins\": [{\"id\": \"a\", \"socket\": \"/s\"}, "
		     "{\"id\": \"a\", \"socket\": \"/t\"}]}",
		     "controller_plugins[1].id: duplicate of controller_plugins[0].id");
	sc_parse_bad("{\"controller_plugins\": [{\"id\": \"a\", \"socket\": \"/s\", "
		     "\"type\": \"node\"}]}",
		     "controller_plugins[0].type: a node plugin runs on the agents");
	sc_parse_bad("{\"controller_plugins\": [{\"id\": \"a\", \"socket\": \"/s\", "
		     "\"kind\": \"node\"}]}",
		     "controller_plugins[0]: unknown key kind");
	sc_parse_bad("{\"data_dir\": \"/a\", \"data_dir\": \"/b\"}", "duplicate");
}

static void test_secrets_stay_out_of_messages(void **state)
{
	struct server_config_file *cfg = NULL;
	const char *json;
	struct err e;

	json = "{\"acl_tokens\": [{\"secret\": \"short\"}]}";
	assert_int_equal(server_config_parse(json, strlen(json), &cfg, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "acl_tokens[0].secret: shorter than"));
	assert_null(strstr(e.msg, "short\""));
	json = "{\"acl_tokens\": [{\"secret\": \"topsecret-1\"}, {\"secret\": \"topsecret-1\"}]}";
	assert_int_equal(server_config_parse(json, strlen(json), &cfg, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "acl_tokens[1].secret: same as acl_tokens[0].secret"));
	assert_null(strstr(e.msg, "topsecret"));
	json = "{\"acl_tokens\": [{\"secret\": \"topsecret\\u0001x\"}]}";
	assert_int_equal(server_config_parse(json, strlen(json), &cfg, &e), CSID_EINVAL);
	assert_null(strstr(e.msg, "topsecret"));
	json = "{\"agent_token\": \"tiny\"}";
	assert_int_equal(server_config_parse(json, strlen(json), &cfg, &e), CSID_EINVAL);
	assert_string_equal(e.msg, "agent_token: shorter than 8 bytes");
	json = "{\"agent_token\": \"topsecret\\u0001x\"}";
	assert_int_equal(server_config_parse(json, strlen(json), &cfg, &e), CSID_EINVAL);
	assert_null(strstr(e.msg, "topsecret"));
}

static void test_load_file(void **state)
{
	char path[] = "/tmp/csid-server-config-XXXXXX";
	struct server_config_file *cfg = NULL;
	struct err e;
	int fd = mkstemp(path);
	FILE *f;

	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	fputs("{\"data_dir\": \"/from/file\", \"workers\": 3}", f);
	fclose(f);
	assert_int_equal(server_config_load(path, &cfg, &e), 0);
	assert_string_equal(cfg->data_dir, "/from/file");
	assert_int_equal(cfg->workers, 3);
	server_config_free(cfg);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("{\"workers\": -1}", f);
	fclose(f);
	assert_int_equal(server_config_load(path, &cfg, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, path));
	assert_non_null(strstr(e.msg, "workers"));
	unlink(path);
	assert_int_equal(server_config_load(path, &cfg, &e), CSID_ENOTFOUND);
	assert_non_null(strstr(e.msg, path));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_full),
	    cmocka_unit_test(test_etcd),
	    cmocka_unit_test(test_defaults_and_finalize),
	    cmocka_unit_test(test_data_dir_too_long),
	    cmocka_unit_test(test_override),
	    cmocka_unit_test(test_bad),
	    cmocka_unit_test(test_secrets_stay_out_of_messages),
	    cmocka_unit_test(test_load_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
