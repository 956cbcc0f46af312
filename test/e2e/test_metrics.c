/*
 * End to end: the Prometheus metrics of csid.
 *
 * test_metrics_prometheus runs `csid dev` on a temporary directory and a
 * free port, creates two volumes through the server API and mounts them
 * through the agent's socket (one as a plain mount of a claim made on the
 * server, one through the agent's claim flow with a lease owner), then
 * checks:
 *  - GET /v1/metrics of the server (TCP) and of the agent (its socket)
 *    answer the text format, which Debian's `promtool check metrics`
 *    accepts (exit 0, no lint complaint);
 *  - a real Prometheus (Debian's, on another free loopback port and its
 *    own data dir, stopped in the teardown whatever happened) scraping the
 *    server's and the agent's TCP listeners finds, through its HTTP query
 *    API, the two ready volumes, the CreateVolume and NodePublishVolume
 *    RPCs just made, the claim, and the agent's published mount.
 *
 * test_metrics_acl runs `csid server` with ACL tokens: /v1/metrics without
 * a token gets 403, a read token in "Authorization: Bearer" (what
 * Prometheus sends) gets the metrics, a write to it 405.
 */
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
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "agent_proc.h"
#include "http_client.h"
#include "proc_guard.h"
#include "server_proc.h"

#define T_HP SERVER_PROC_HP_ID
#define T_WAIT_MS 60000
#define T_PROM_WAIT_MS 90000
#define T_TOKEN_READ "read-token-0123456789abcdef"
#define T_TOKEN_WRITE "write-token-0123456789abcdef"

extern char **environ;

struct t_env {
	struct server_proc s;
	char dev_dir[SERVER_PROC_PATH + 8];
	char prom_dir[SERVER_PROC_PATH + 8];
	char prom_log[SERVER_PROC_PATH + 16];
	char prom_base[64];
	pid_t prom_pid;
};

static const char t_spec[] = "{\"plugin_id\": \"" T_HP "\", \"capacity_min\": 1048576,"
			     " \"capabilities\": [{\"access_mode\": \"single-node-writer\","
			     " \"attachment_mode\": \"file-system\"}]}";

static const char t_claim[] =
    "{\"alloc_id\": \"web-1\", \"node_id\": \"dev\", \"mode\": \"write\","
    " \"access_mode\": \"single-node-writer\", \"attachment_mode\": \"file-system\"}";

static int t_setup_dev(void **state)
{
	struct t_env *t = calloc(1, sizeof(*t));

	*state = t;
	if (!t || server_proc_init(&t->s) != 0)
		return -1;
	snprintf(t->dev_dir, sizeof(t->dev_dir), "%s/dev", t->s.dir);
	snprintf(t->prom_dir, sizeof(t->prom_dir), "%s/prom", t->s.dir);
	snprintf(t->prom_log, sizeof(t->prom_log), "%s/prometheus.log", t->s.dir);
	return server_proc_start_dev(&t->s, t->dev_dir, false, T_WAIT_MS);
}

static int t_setup_acl(void **state)
{
	struct t_env *t = calloc(1, sizeof(*t));

	*state = t;
	if (!t || server_proc_init(&t->s) != 0 ||
	    server_proc_write_config(&t->s, NULL,
				     "\"acl_tokens\": [{\"secret\": \"" T_TOKEN_READ "\"},"
				     " {\"secret\": \"" T_TOKEN_WRITE
				     "\", \"write\": true}]") != 0 ||
	    server_proc_start(&t->s) != 0 || !server_proc_wait_ready(&t->s, T_WAIT_MS)) {
		if (t)
			server_proc_dump_log(&t->s, "csid server setup failed");
		return -1;
	}
	return 0;
}

static bool t_prom_exited(void *ctx)
{
	struct t_env *t = ctx;
	int status;

	return waitpid(t->prom_pid, &status, WNOHANG) != 0;
}

/* Stops Prometheus: SIGTERM, then SIGKILL when it lingers. */
static void t_prom_stop(struct t_env *t)
{
	int status;

	if (!t->prom_pid)
		return;
	kill(t->prom_pid, SIGTERM);
	if (!agent_proc_poll(t_prom_exited, t, 10000)) {
		kill(t->prom_pid, SIGKILL);
		waitpid(t->prom_pid, &status, 0);
	}
	proc_guard_untrack(t->prom_pid);
	t->prom_pid = 0;
}

static int t_teardown(void **state)
{
	struct t_env *t = *state;

	if (!t)
		return 0;
	t_prom_stop(t);
	server_proc_cleanup(&t->s);
	free(t);
	return 0;
}

/* Runs argv with stdin from in_path and stdout+stderr to out_path; its exit status or -1. */
static int t_run(char *const *argv, const char *in_path, const char *out_path)
{
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int status, rc;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, in_path, O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0)
		return -1;
	proc_guard_track(pid);
	waitpid(pid, &status, 0);
	proc_guard_untrack(pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int t_write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	int rc;

	if (!f)
		return -1;
	rc = fputs(text, f) < 0 ? -1 : 0;
	return fclose(f) != 0 ? -1 : rc;
}

static void t_dump_file(const char *why, const char *path)
{
	FILE *f = fopen(path, "r");
	char line[4096];

	fprintf(stderr, "--- %s (%s) ---\n", why, path);
	while (f && fgets(line, sizeof(line), f))
		fputs(line, stderr);
	if (f)
		fclose(f);
}

struct t_fetch {
	struct http_client *c;
	const char *want;
	char *text;
};

/* GET /v1/metrics into f->text; whether it holds f->want. */
static bool t_fetch(void *ctx)
{
	struct t_fetch *f = ctx;

	free(f->text);
	f->text = NULL;
	assert_int_equal(http_client_do(f->c, "GET", "/v1/metrics", NULL, &f->text, NULL, 0), 200);
	assert_non_null(f->text);
	return strstr(f->text, f->want) != NULL;
}

/*
 * GETs /v1/metrics from base until the text holds want (the catalogue
 * counts follow the store a moment later); checks that promtool accepts
 * it and returns it.
 */
static char *t_scrape_check(struct t_env *t, const char *base, const char *name, const char *want)
{
	struct t_fetch f = {.c = http_client_new(base), .want = want};
	char *text, in[SERVER_PROC_PATH + 32], out[SERVER_PROC_PATH + 32];
	char *argv[] = {"/usr/bin/promtool", "check", "metrics", NULL};
	int rc;

	assert_non_null(f.c);
	if (!agent_proc_poll(t_fetch, &f, T_WAIT_MS))
		fprintf(stderr, "%s metrics without %s:\n%s\n", name, want, f.text);
	http_client_free(f.c);
	text = f.text;
	assert_non_null(strstr(text, want));
	snprintf(in, sizeof(in), "%s/%s.prom", t->s.dir, name);
	snprintf(out, sizeof(out), "%s/%s.promtool", t->s.dir, name);
	assert_int_equal(t_write_file(in, text), 0);
	rc = t_run(argv, in, out);
	if (rc != 0)
		t_dump_file("promtool check metrics", out);
	assert_int_equal(rc, 0);
	return text;
}

/* The agent's TCP address from csid dev's "dev running" line, into buf. */
static bool t_agent_addr(struct t_env *t, char *buf, size_t cap)
{
	FILE *f = fopen(t->s.log, "r");
	char line[8192];
	bool found = false;

	while (f && !found && fgets(line, sizeof(line), f)) {
		char *p = strstr(line, "msg=\"dev running\"");

		if (p && (p = strstr(p, " agent_addr=")) != NULL) {
			p += strlen(" agent_addr=");
			snprintf(buf, cap, "%.*s", (int)strcspn(p, " \n"), p);
			found = buf[0] != '\0' && strcmp(buf, "-") != 0;
		}
	}
	if (f)
		fclose(f);
	return found;
}

static void t_prom_start(struct t_env *t, const char *agent_addr)
{
	char config[SERVER_PROC_PATH + 32], text[2048], flag_cfg[SERVER_PROC_PATH + 48];
	char flag_db[SERVER_PROC_PATH + 48], flag_web[80];
	char *argv[] = {"/usr/bin/prometheus", flag_cfg, flag_db, flag_web, NULL};
	posix_spawn_file_actions_t fa;
	int port = server_proc_free_port();

	assert_true(port > 0);
	snprintf(config, sizeof(config), "%s/prometheus.yml", t->s.dir);
	snprintf(text, sizeof(text),
		 "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
		 "scrape_configs:\n"
		 "  - job_name: csid-server\n    metrics_path: /v1/metrics\n"
		 "    static_configs:\n      - targets: ['%s']\n"
		 "  - job_name: csid-agent\n    metrics_path: /v1/metrics\n"
		 /* The agent's TCP API answers nothing without csid dev's token. */
		 "    authorization:\n      credentials_file: %s/agent-token\n"
		 "    static_configs:\n      - targets: ['%s']\n",
		 t->s.addr, t->dev_dir, agent_addr);
	assert_int_equal(t_write_file(config, text), 0);
	snprintf(flag_cfg, sizeof(flag_cfg), "--config.file=%s", config);
	snprintf(flag_db, sizeof(flag_db), "--storage.tsdb.path=%s", t->prom_dir);
	snprintf(flag_web, sizeof(flag_web), "--web.listen-address=127.0.0.1:%d", port);
	snprintf(t->prom_base, sizeof(t->prom_base), "http://127.0.0.1:%d", port);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, t->prom_log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	assert_int_equal(proc_guard_spawn(&t->prom_pid, argv[0], &fa, argv, NULL), 0);
	posix_spawn_file_actions_destroy(&fa);
	proc_guard_track(t->prom_pid);
}

/*
 * The value of the first sample a PromQL instant query gives, through
 * Prometheus' HTTP API; false when it gives none (or is not up yet).
 */
static bool t_query(struct t_env *t, const char *promql, double *value)
{
	struct http_client *c = http_client_new(t->prom_base);
	char *esc = curl_easy_escape(NULL, promql, 0), path[2048];
	json_t *doc = NULL, *res;
	const char *v;
	bool ok = false;

	if (c && esc) {
		snprintf(path, sizeof(path), "/api/v1/query?query=%s", esc);
		if (http_client_json(c, "GET", path, NULL, &doc) == 200) {
			res = json_array_get(
			    json_object_get(json_object_get(doc, "data"), "result"), 0);
			v = json_string_value(json_array_get(json_object_get(res, "value"), 1));
			if (v) {
				*value = strtod(v, NULL);
				ok = true;
			}
		}
	}
	json_decref(doc);
	curl_free(esc);
	http_client_free(c);
	return ok;
}

struct t_want {
	struct t_env *t;
	const char *promql;
	double want, last;
};

static bool t_query_at_least(void *ctx)
{
	struct t_want *w = ctx;

	return t_query(w->t, w->promql, &w->last) && w->last >= w->want;
}

/* Polls the query until its first sample is at least want. */
static bool t_wait_query(struct t_env *t, const char *promql, double want)
{
	struct t_want w = {.t = t, .promql = promql, .want = want, .last = -1};

	if (agent_proc_poll(t_query_at_least, &w, T_PROM_WAIT_MS))
		return true;
	fprintf(stderr, "query %s: last value %g, want >= %g\n", promql, w.last, want);
	return false;
}

/* Creates volume id through the server and waits until it is ready. */
static void t_create(struct t_env *t, const char *id)
{
	char path[128];

	snprintf(path, sizeof(path), "/v1/volume/%s/create", id);
	assert_int_equal(server_proc_put(&t->s, path, t_spec), 200);
	snprintf(path, sizeof(path), "/v1/volume/%s", id);
	assert_true(server_proc_wait_doc(&t->s, path, server_proc_volume_ready, T_WAIT_MS));
}

static void test_metrics_prometheus(void **state)
{
	struct t_env *t = *state;
	struct agent_proc a;
	char agent_addr[80], agent_base[SERVER_PROC_PATH + 32], ext[256], *text;
	json_t *doc = NULL;

	assert_true(server_proc_wait_doc(&t->s, "/v1/plugins", server_proc_hp_up, T_WAIT_MS));
	t_create(t, "metrics-a");
	t_create(t, "metrics-b");
	assert_int_equal(server_proc_put(&t->s, "/v1/volume/metrics-b/claim", t_claim), 200);
	assert_true(server_proc_wait_doc(&t->s, "/v1/volume/metrics-b",
					 server_proc_volume_published, T_WAIT_MS));
	assert_int_equal(server_proc_http(&t->s, "GET", "/v1/volume/metrics-b", NULL, &doc), 200);
	snprintf(ext, sizeof(ext), "%s", json_string_value(json_object_get(doc, "external_id")));
	json_decref(doc);
	memset(&a, 0, sizeof(a));
	snprintf(a.sock, sizeof(a.sock), "%s/agent/agent.sock", t->dev_dir);
	assert_int_equal(agent_proc_mount_with(&a, T_HP, ext, "web-1", NULL), 200);
	/* And one through the claim flow, owned by a lease. */
	assert_int_equal(
	    agent_proc_http(&a, "PUT", "/v1/agent/volumes/metrics-a/mount",
			    "{\"alloc_id\": \"web-2\", \"owner\": {\"lease_ms\": 600000}}", NULL),
	    200);

	/* Both outputs pass promtool, and say what just happened. */
	text = t_scrape_check(t, t->s.base, "server",
			      "csid_volumes{plugin=\"" T_HP "\",state=\"ready\"} 2\n");
	assert_non_null(strstr(text, "# TYPE csid_csi_operations_seconds histogram\n"));
	assert_null(strstr(text, "metrics-a")); /* no volume ID as a label */
	free(text);
	snprintf(agent_base, sizeof(agent_base), "unix:%s", a.sock);
	text = t_scrape_check(t, agent_base, "agent", "csid_mounts{state=\"published\"} 2\n");
	assert_non_null(strstr(text, "route=\"/v1/agent/mounts\",method=\"PUT\",code=\"200\"}"));
	assert_non_null(strstr(text, "csid_owners_watched{kind=\"lease\"} 1\n"));
	assert_non_null(strstr(text, "csid_owners_watched{kind=\"pid\"} 0\n"));
	assert_non_null(strstr(text, "\ncsid_releases_pending 0\n"));
	free(text);

	/* A real Prometheus scrapes both and answers queries about them. */
	assert_true(t_agent_addr(t, agent_addr, sizeof(agent_addr)));
	t_prom_start(t, agent_addr);
	if (!t_wait_query(t, "up{job=\"csid-server\"}", 1) ||
	    !t_wait_query(t, "up{job=\"csid-agent\"}", 1)) {
		t_dump_file("prometheus log", t->prom_log);
		fail_msg("Prometheus never scraped csid");
	}
	assert_true(t_wait_query(
	    t, "csid_volumes{job=\"csid-server\",plugin=\"" T_HP "\",state=\"ready\"}", 2));
	assert_true(t_wait_query(t,
				 "sum(csid_csi_operations_seconds_count{job=\"csid-server\","
				 "driver_name=\"" T_HP "\",method_name=\"/csi.v1.Controller/"
				 "CreateVolume\",grpc_status_code=\"OK\"})",
				 2));
	assert_true(t_wait_query(t,
				 "sum(csid_csi_operations_seconds_count{job=\"csid-agent\","
				 "method_name=\"/csi.v1.Node/NodePublishVolume\","
				 "grpc_status_code=\"OK\"})",
				 1));
	assert_true(t_wait_query(
	    t, "csid_claims{job=\"csid-server\",state=\"claimed\",mode=\"write\"}", 1));
	assert_true(t_wait_query(t, "csid_mounts{job=\"csid-agent\",state=\"published\"}", 1));
	assert_true(t_wait_query(t,
				 "sum(csid_http_requests_total{job=\"csid-server\","
				 "route=\"/v1/volume/{id}/create\",code=\"200\"})",
				 2));
	assert_true(t_wait_query(t, "process_start_time_seconds{job=\"csid-server\"}", 1.5e9));

	snprintf(agent_base, sizeof(agent_base), "/v1/agent/mounts/%s/web-1", ext);
	assert_int_equal(agent_proc_http(&a, "DELETE", agent_base, NULL, NULL), 200);
	assert_int_equal(
	    agent_proc_http(&a, "DELETE", "/v1/agent/volumes/metrics-a/mount/web-2", NULL, NULL),
	    200);
	t_prom_stop(t);
}

static void test_metrics_acl(void **state)
{
	struct t_env *t = *state;
	struct http_client *c = http_client_new(t->s.base);
	char *text = NULL;

	assert_non_null(c);
	assert_int_equal(http_client_do(c, "GET", "/v1/metrics", NULL, NULL, NULL, 0), 403);
	http_client_extra_header(c, "Authorization: Bearer wrong-token-0123456789");
	assert_int_equal(http_client_do(c, "GET", "/v1/metrics", NULL, NULL, NULL, 0), 403);
	http_client_extra_header(c, "Authorization: Bearer " T_TOKEN_READ);
	assert_int_equal(http_client_do(c, "GET", "/v1/metrics", NULL, &text, NULL, 0), 200);
	assert_non_null(text);
	assert_non_null(strstr(text, "# TYPE csid_volumes gauge\n"));
	assert_non_null(strstr(text, "\nprocess_resident_memory_bytes "));
	assert_null(strstr(text, T_TOKEN_READ));
	free(text);
	/* The token header works as well; the endpoint only reads. */
	http_client_extra_header(c, NULL);
	http_client_token(c, T_TOKEN_WRITE);
	assert_int_equal(http_client_do(c, "GET", "/v1/metrics", NULL, NULL, NULL, 0), 200);
	assert_int_equal(http_client_do(c, "PUT", "/v1/metrics", "{}", NULL, NULL, 0), 405);
	http_client_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_metrics_prometheus, t_setup_dev, t_teardown),
	    cmocka_unit_test_setup_teardown(test_metrics_acl, t_setup_acl, t_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
