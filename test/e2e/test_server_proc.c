/*
 * End-to-end tests of the `csid server` program on a private directory
 * and a free port: it serves the API over TCP and a unix socket, a second
 * server on the same data_dir is refused, SIGTERM stops it with status 0
 * (its socket removed) and what it acknowledged is there after a restart,
 * a store file from a newer schema is refused and left byte for byte as
 * it was, and a bad config names the JSON path at fault. With csi-hostpath
 * as a supervised controller plugin, the plugins view shows it healthy, a
 * volume is created and deleted through it, and SIGTERM stops it too.
 * The config's ACL tokens guard the API.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "agent_proc.h"
#include "http_client.h"
#include "proc_guard.h"
#include "server_proc.h"

#ifndef CSI_HOSTPATH_BIN
#define CSI_HOSTPATH_BIN "csi-hostpath"
#endif
#define T_HP "hostpath.csi.csid.dev"

struct t_srv {
	struct agent_proc p; /* dir, log, config; p.pid the server */
	char base[64]; /* http://127.0.0.1:PORT */
	char sock[AGENT_PROC_PATH];
	char db[AGENT_PROC_PATH];
	int port;
};

static void t_srv_init(struct t_srv *t)
{
	char json[512];

	assert_int_equal(agent_proc_init(&t->p), 0);
	t->port = server_proc_free_port();
	assert_true(t->port > 0);
	snprintf(t->base, sizeof(t->base), "http://127.0.0.1:%d", t->port);
	snprintf(t->sock, sizeof(t->sock), "%s/server.sock", t->p.dir);
	snprintf(t->db, sizeof(t->db), "%s/server.db", t->p.data_dir);
	snprintf(json, sizeof(json),
		 "{\"data_dir\": \"@DIR@/d\", \"listen\": \"127.0.0.1:%d\","
		 " \"socket\": \"@DIR@/server.sock\", \"node_ttl\": \"30s\"}",
		 t->port);
	assert_int_equal(agent_proc_write_config(&t->p, json), 0);
}

/* Starts `csid server -config <config>`, its stderr appended to the log. */
static void t_srv_start(struct t_srv *t)
{
	char *argv[] = {(char *)CSID_BIN, (char *)"server", (char *)"-config", t->p.config, NULL};
	posix_spawn_file_actions_t fa;
	int rc;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 2, t->p.log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	rc = proc_guard_spawn(&t->p.pid, CSID_BIN, &fa, argv, NULL);
	posix_spawn_file_actions_destroy(&fa);
	assert_int_equal(rc, 0);
	proc_guard_track(t->p.pid);
}

/* The status of GET /v1/status/health, or -1 when nothing answers. */
static long t_srv_health(struct t_srv *t)
{
	struct http_client *c = http_client_new(t->base);
	long status =
	    c ? http_client_do(c, "GET", "/v1/status/health", NULL, NULL, NULL, 1000) : -1;

	http_client_free(c);
	return status;
}

static bool t_srv_healthy(void *ctx)
{
	return t_srv_health(ctx) == 200;
}

/* The server answers HTTP at all (403 counts: ACL tokens are on). */
static bool t_srv_up(void *ctx)
{
	return t_srv_health(ctx) > 0;
}

static long t_http(const char *base, const char *method, const char *path, const char *body,
		   char **out)
{
	struct http_client *c = http_client_new(base);
	long status;

	assert_non_null(c);
	status = http_client_do(c, method, path, body, out, NULL, 10000);
	http_client_free(c);
	return status;
}

static char *t_read(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = malloc(1 << 20);

	assert_non_null(f);
	assert_non_null(buf);
	*len = fread(buf, 1, 1 << 20, f);
	fclose(f);
	return buf;
}

static void test_serve_refuse_second_and_stop(void **state)
{
	static const char spec[] =
	    "{\"id\": \"v1\", \"plugin_id\": \"ctl.csi\", \"external_id\": \"ext-1\","
	    " \"capabilities\": [{\"access_mode\": \"single-node-writer\","
	    " \"attachment_mode\": \"file-system\"}]}";
	char unix_base[AGENT_PROC_PATH + 8], out[4096], *body = NULL;
	const char *args[] = {"server", "-data-dir", NULL, "-listen", "", NULL};
	struct t_srv t;
	struct stat sb;

	t_srv_init(&t);
	t_srv_start(&t);
	assert_true(agent_proc_poll(t_srv_healthy, &t, 20000));
	snprintf(unix_base, sizeof(unix_base), "unix:%s", t.sock);
	assert_int_equal(t_http(unix_base, "GET", "/v1/status/health", NULL, &body), 200);
	assert_non_null(strstr(body, "\"sqlite\""));
	free(body);
	assert_int_equal(t_http(t.base, "PUT", "/v1/volume/v1", spec, NULL), 200);

	/* A second server on the same data_dir is refused before it touches anything. */
	args[2] = t.p.data_dir;
	assert_int_equal(agent_proc_run_csid(args, out, sizeof(out)), 1);
	if (!strstr(out, "another csid server is running"))
		fail_msg("second server said: %s", out);
	assert_true(t_srv_healthy(&t));

	/* SIGTERM drains and exits 0; the socket goes with it. */
	assert_int_equal(agent_proc_stop(&t.p, SIGTERM, 20000), 0);
	assert_int_equal(stat(t.sock, &sb), -1);
	assert_int_equal(errno, ENOENT);

	/* What it acknowledged is there after a restart. */
	t_srv_start(&t);
	assert_true(agent_proc_poll(t_srv_healthy, &t, 20000));
	assert_int_equal(t_http(t.base, "GET", "/v1/volume/v1", NULL, &body), 200);
	assert_non_null(strstr(body, "\"ext-1\""));
	free(body);
	assert_int_equal(agent_proc_stop(&t.p, SIGINT, 20000), 0);
	agent_proc_cleanup(&t.p);
}

static void test_newer_schema_refused_untouched(void **state)
{
	const char *args[] = {"server", "-data-dir", NULL, "-listen", "", NULL};
	char out[4096], *before, *after;
	size_t nbefore, nafter;
	struct stat sb1, sb2;
	struct t_srv t;
	sqlite3 *db;

	t_srv_init(&t);
	assert_int_equal(mkdir(t.p.data_dir, 0700), 0);
	assert_int_equal(sqlite3_open(t.db, &db), SQLITE_OK);
	assert_int_equal(
	    sqlite3_exec(db,
			 "PRAGMA application_id=1668508004; PRAGMA user_version=999;"
			 "CREATE TABLE future (x INTEGER); INSERT INTO future VALUES (7);",
			 NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(db);
	before = t_read(t.db, &nbefore);
	assert_int_equal(stat(t.db, &sb1), 0);
	args[2] = t.p.data_dir;
	assert_int_equal(agent_proc_run_csid(args, out, sizeof(out)), 1);
	if (!strstr(out, "newer than this program knows"))
		fail_msg("server said: %s", out);
	after = t_read(t.db, &nafter);
	assert_int_equal(stat(t.db, &sb2), 0);
	assert_int_equal(nbefore, nafter);
	assert_memory_equal(before, after, nbefore);
	assert_int_equal(sb1.st_mtim.tv_sec, sb2.st_mtim.tv_sec);
	assert_int_equal(sb1.st_mtim.tv_nsec, sb2.st_mtim.tv_nsec);
	free(before);
	free(after);
	agent_proc_cleanup(&t.p);
}

static void test_bad_config(void **state)
{
	const char *args[] = {"server", "-config", NULL, NULL};
	char out[4096];
	struct t_srv t;

	t_srv_init(&t);
	assert_int_equal(
	    agent_proc_write_config(&t.p, "{\"data_dir\": \"@DIR@/d\", \"controller_plugins\": "
					  "[{\"id\": \"x\", \"sokcet\": \"/s\"}]}"),
	    0);
	args[2] = t.p.config;
	assert_int_equal(agent_proc_run_csid(args, out, sizeof(out)), 2);
	if (!strstr(out, "controller_plugins[0]: unknown key sokcet"))
		fail_msg("server said: %s", out);
	agent_proc_cleanup(&t.p);
}

/* Polls GET path until check(doc) holds, at most 30 s. */
struct t_watch {
	const char *base, *path;
	bool (*check)(json_t *doc);
	long status;
};

static bool t_watch_once(void *ctx)
{
	struct t_watch *w = ctx;
	struct http_client *c = http_client_new(w->base);
	json_t *doc = NULL;
	bool ok;

	w->status = c ? http_client_json(c, "GET", w->path, NULL, &doc) : -1;
	ok = w->check(doc);
	json_decref(doc);
	http_client_free(c);
	return ok;
}

static bool t_ctl_healthy(json_t *doc)
{
	return json_integer_value(
		   json_object_get(json_object_get(doc, "controllers"), "healthy")) == 1;
}

static bool t_vol_ready(json_t *doc)
{
	const char *state = json_string_value(json_object_get(doc, "state"));

	return state && strcmp(state, "ready") == 0 &&
	       json_string_value(json_object_get(doc, "external_id"));
}

static bool t_vol_gone(json_t *doc)
{
	return doc && json_object_get(doc, "error") &&
	       strcmp(json_string_value(json_object_get(doc, "code")), "not_found") == 0;
}

static void test_supervised_controller_plugin(void **state)
{
	static const char spec[] =
	    "{\"id\": \"v1\", \"plugin_id\": \"" T_HP "\", \"capacity_min\": 1048576,"
	    " \"capabilities\": [{\"access_mode\": \"single-node-writer\","
	    " \"attachment_mode\": \"file-system\"}]}";
	struct t_watch w;
	char json[1024];
	struct t_srv t;
	pid_t pids[4];

	t_srv_init(&t);
	snprintf(json, sizeof(json),
		 "{\"data_dir\": \"@DIR@/d\", \"listen\": \"127.0.0.1:%d\","
		 " \"backoff_min\": \"50ms\", \"backoff_max\": \"500ms\","
		 " \"controller_plugins\": [{\"id\": \"" T_HP "\", \"command\": \"%s\", \"args\": ["
		 " \"--endpoint\", \"${CSI_ENDPOINT}\", \"--data-dir\", \"@DIR@/hp\","
		 " \"--node-id\", \"server\", \"--mode\", \"controller\"]}]}",
		 t.port, CSI_HOSTPATH_BIN);
	assert_int_equal(agent_proc_write_config(&t.p, json), 0);
	t_srv_start(&t);
	assert_true(agent_proc_poll(t_srv_healthy, &t, 20000));
	w = (struct t_watch){t.base, "/v1/plugin/" T_HP, t_ctl_healthy, 0};
	assert_true(agent_proc_poll(t_watch_once, &w, 30000));
	assert_int_equal(agent_proc_plugin_pids(&t.p, pids, 4), 1);

	assert_int_equal(t_http(t.base, "PUT", "/v1/volume/v1/create", spec, NULL), 200);
	w = (struct t_watch){t.base, "/v1/volume/v1", t_vol_ready, 0};
	assert_true(agent_proc_poll(t_watch_once, &w, 30000));
	assert_int_equal(t_http(t.base, "DELETE", "/v1/volume/v1/delete", NULL, NULL), 200);
	w = (struct t_watch){t.base, "/v1/volume/v1", t_vol_gone, 0};
	assert_true(agent_proc_poll(t_watch_once, &w, 30000));
	assert_int_equal(w.status, 404);

	/* SIGTERM stops the plugin with the server. */
	assert_int_equal(agent_proc_stop(&t.p, SIGTERM, 20000), 0);
	assert_int_equal(kill(pids[0], 0), -1);
	assert_int_equal(agent_proc_plugin_pids(&t.p, pids, 4), 0);
	agent_proc_cleanup(&t.p);
}

static long t_http_token(const char *base, const char *token, const char *method, const char *path,
			 const char *body)
{
	struct http_client *c = http_client_new(base);
	long status;

	assert_non_null(c);
	http_client_token(c, token);
	status = http_client_do(c, method, path, body, NULL, NULL, 10000);
	http_client_free(c);
	return status;
}

/* The config's ACL tokens reach the API: none 403, read-only may only read. */
static void test_acl_tokens(void **state)
{
	static const char node[] = "{\"id\": \"n1\", \"plugins\": []}";
	char json[512];
	struct t_srv t;

	t_srv_init(&t);
	snprintf(json, sizeof(json),
		 "{\"data_dir\": \"@DIR@/d\", \"listen\": \"127.0.0.1:%d\","
		 " \"acl_tokens\": [{\"secret\": \"write-token-1\", \"write\": true},"
		 " {\"secret\": \"read-token-1\"}]}",
		 t.port);
	assert_int_equal(agent_proc_write_config(&t.p, json), 0);
	t_srv_start(&t);
	assert_true(agent_proc_poll(t_srv_up, &t, 20000));
	assert_int_equal(t_http_token(t.base, NULL, "GET", "/v1/nodes", NULL), 403);
	assert_int_equal(t_http_token(t.base, "wrong-token", "GET", "/v1/nodes", NULL), 403);
	assert_int_equal(t_http_token(t.base, "read-token-1", "GET", "/v1/nodes", NULL), 200);
	assert_int_equal(t_http_token(t.base, "read-token-1", "PUT", "/v1/node/n1", node), 403);
	assert_int_equal(t_http_token(t.base, "write-token-1", "PUT", "/v1/node/n1", node), 200);
	assert_int_equal(agent_proc_stop(&t.p, SIGTERM, 20000), 0);
	agent_proc_cleanup(&t.p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_serve_refuse_second_and_stop),
	    cmocka_unit_test(test_newer_schema_refused_untouched),
	    cmocka_unit_test(test_bad_config),
	    cmocka_unit_test(test_supervised_controller_plugin),
	    cmocka_unit_test(test_acl_tokens),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
