/*
 * The installation record (src/server/server_install.h) with real `csid
 * server`s on a real one-member etcd:
 *   - the first server on an empty prefix makes the installation (its
 *     cluster_id); a server configured with another cluster_id is refused
 *     naming both; one whose node_ttl and leader_ttl differ is refused
 *     naming each key with both values (`csictl server leader` shows the
 *     installation); one whose backoffs differ starts,
 *     warned; -update-settings rewrites the settings, after which a server
 *     with the old config is refused;
 *   - a prefix holding keys that are not csid's is refused, never adopted;
 *     a catalogue without a record (an installation older than it) starts
 *     and gets one;
 *   - a server restarted (kill -9) keeps its ID: `members` lists it once,
 *     though its old lease still runs.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "csictl_run.h"
#include "etcd_proc.h"
#include "hostpath_proc.h"
#include "server_proc.h"
#include "util/base64.h"

#define WAIT_MS 30000
#define PREFIX "/csid-install/"

struct fixture {
	struct etcd_proc etcd;
	struct server_proc s[2];
};

/* Writes s's config on etcd under prefix, with extra top-level keys ("\"k\": v,"). */
static void config(struct fixture *f, struct server_proc *s, const char *prefix, const char *extra)
{
	char cfg[1024];

	snprintf(cfg, sizeof(cfg),
		 "{\"data_dir\": \"@DIR@/d\", \"listen\": \"@ADDR@\", %s"
		 " \"store\": \"etcd\", \"etcd\": {\"endpoints\": [\"%s\"], \"prefix\": \"%s\","
		 " \"dial_timeout\": \"500ms\", \"request_timeout\": \"2s\"}}",
		 extra, f->etcd.url, prefix);
	assert_int_equal(server_proc_write_config(s, cfg, NULL), 0);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	*state = f;
	if (etcd_proc_start(&f->etcd) || server_proc_init(&f->s[0]) || server_proc_init(&f->s[1]))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	server_proc_cleanup(&f->s[0]);
	server_proc_cleanup(&f->s[1]);
	etcd_proc_cleanup(&f->etcd);
	free(f);
	return 0;
}

static void start_ok(struct server_proc *s, const char *const *args)
{
	if ((args ? server_proc_start_args(s, args) : server_proc_start(s)) ||
	    !server_proc_wait_ready(s, WAIT_MS)) {
		server_proc_dump_log(s, "start");
		fail_msg("server did not start");
	}
}

/* Starts s and expects it to exit non-zero at once, its log holding each needle. */
static void start_refused(struct server_proc *s, const char *const *needles)
{
	int st;

	assert_int_equal(server_proc_start(s), 0);
	st = server_proc_stop(s, 0, WAIT_MS);
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) == 0) {
		server_proc_dump_log(s, "refusal");
		fail_msg("server was not refused");
	}
	for (; *needles; needles++)
		if (!server_proc_log_has(s, *needles)) {
			server_proc_dump_log(s, "refusal");
			fail_msg("log lacks \"%s\"", *needles);
		}
}

/* Puts key with value, or deletes it (value NULL), through etcd's gateway. */
static void etcd_write(struct fixture *f, const char *key, const char *value)
{
	char *k = base64_encode(key, strlen(key), NULL), body[512];

	assert_non_null(k);
	if (value) {
		assert_int_equal(etcd_proc_put(&f->etcd, key, value), 200);
	} else {
		snprintf(body, sizeof(body), "{\"key\":\"%s\"}", k);
		assert_int_equal(etcd_proc_post(&f->etcd, "/v3/kv/deleterange", body), 200);
	}
	free(k);
}

/* `csictl server <what>` against s prints want and, when not NULL, not lacks. */
static void server_shows(struct server_proc *s, const char *what, const char *want,
			 const char *lacks)
{
	struct csictl_runner rn = {.dir = s->dir, .deadline_ms = WAIT_MS};
	struct csictl_run r;
	char env[256];
	char *envv[] = {env, NULL};
	char *args[] = {"server", (char *)what, NULL};

	snprintf(env, sizeof(env), "CSID_ADDR=%s", s->base);
	csictl_runner_run(&rn, &r, envv, args);
	csictl_expect_ok(&r);
	if (!strstr(r.out, want))
		fail_msg("csictl server %s: \"%s\" lacks \"%s\"", what, r.out, want);
	if (lacks && strstr(r.out, lacks))
		fail_msg("csictl server %s: \"%s\" has \"%s\"", what, r.out, lacks);
	csictl_runner_free(&rn, &r);
	csictl_runner_cleanup(&rn);
}

/* GET /v1/status/installation of s: key's installation_ms and server_ms. */
static void setting_is(struct server_proc *s, const char *key, json_int_t stored, json_int_t mine)
{
	json_t *doc = NULL, *x;
	size_t i;
	bool seen = false;

	assert_int_equal(server_proc_http(s, "GET", "/v1/status/installation", NULL, &doc), 200);
	assert_string_equal(json_string_value(json_object_get(doc, "installation")), "east");
	json_array_foreach(json_object_get(doc, "settings"), i, x)
	{
		if (strcmp(json_string_value(json_object_get(x, "key")), key) != 0)
			continue;
		seen = true;
		assert_int_equal(json_integer_value(json_object_get(x, "installation_ms")), stored);
		assert_int_equal(json_integer_value(json_object_get(x, "server_ms")), mine);
	}
	assert_int_equal(json_array_size(json_object_get(doc, "settings")), 5);
	assert_true(seen);
	json_decref(doc);
}

static void test_ids_and_settings(void **state)
{
	struct fixture *f = *state;
	struct server_proc *a = &f->s[0], *b = &f->s[1];
	const char *other_id[] = {"cluster_id is west", "installation east", NULL};
	const char *differ[] = {"node_ttl: this server 7s, the installation 30s",
				"leader_ttl: this server 3s, the installation 10s", NULL};
	const char *old_grace[] = {"node_grace: this server 5m0s, the installation 1m0s", NULL};
	const char *update[] = {"server", "-config", b->config, "-update-settings", NULL};

	config(f, a, PREFIX, "\"cluster_id\": \"east\",");
	start_ok(a, NULL);
	assert_true(server_proc_log_has(a, "new installation"));
	assert_true(server_proc_log_has(a, "installation=east"));
	assert_true(
	    server_proc_wait_field(a, "/v1/status/leader", "installation", "east", WAIT_MS));
	server_shows(a, "leader", "Installation  east", NULL);
	setting_is(a, "node_grace", 300000, 300000);
	server_shows(a, "installation", "node_ttl     30s", "(old)");
	/* Pointed at another installation's prefix. */
	config(f, b, PREFIX, "\"cluster_id\": \"west\",");
	start_refused(b, other_id);
	/* Two servers with different configs on one store. */
	config(f, b, PREFIX, "\"node_ttl\": \"7s\", \"leader_ttl\": \"3s\",");
	start_refused(b, differ);
	config(f, b, PREFIX, "\"backoff_max\": \"1s\",");
	start_ok(b, NULL);
	assert_true(server_proc_log_has(b, "key=backoff_max this_server=1s installation=10m0s"));
	assert_true(server_proc_log_has(b, "joined installation"));
	assert_int_not_equal(server_proc_stop(b, SIGTERM, WAIT_MS), -1);
	/* On purpose: the record takes the new settings; a server with the old ones is refused. */
	config(f, b, PREFIX, "\"node_grace\": \"1m\",");
	start_ok(b, update);
	assert_true(server_proc_log_has(b, "key=node_grace from=5m0s to=1m0s"));
	/* a still runs with the old grace until it restarts, and says so. */
	setting_is(a, "node_grace", 60000, 300000);
	setting_is(b, "node_grace", 60000, 60000);
	server_shows(a, "installation", "5m0s (old)", NULL);
	server_shows(a, "installation", "restart it with the new config", NULL);
	server_shows(b, "installation", "node_grace   1m0s", "(old)");
	assert_int_not_equal(server_proc_stop(a, SIGTERM, WAIT_MS), -1);
	start_refused(a, old_grace);
}

static void test_foreign_and_old(void **state)
{
	struct fixture *f = *state;
	struct server_proc *a = &f->s[0];
	const char *foreign[] = {"not csid's", "not a csid installation", NULL};
	const char *damaged[] = {"installation record cannot be read", NULL};

	/* Someone else's keys under the prefix: refused, nothing written there. */
	etcd_write(f, "/registry/pods/default/web", "{\"kind\": \"Pod\"}");
	config(f, a, "/registry/", "");
	start_refused(a, foreign);
	/* A record csid cannot decode: refused. */
	etcd_write(f, "/damaged/installation/record", "{\"format\": 7}");
	config(f, a, "/damaged/", "");
	start_refused(a, damaged);
	/* A catalogue from before the record: it starts and gets one. */
	config(f, a, PREFIX, "");
	start_ok(a, NULL);
	assert_int_equal(server_proc_put(a, "/v1/node/node-1", SERVER_PROC_NODE_BODY), 200);
	assert_int_not_equal(server_proc_stop(a, SIGTERM, WAIT_MS), -1);
	etcd_write(f, PREFIX "installation/record", NULL);
	start_ok(a, NULL);
	assert_true(server_proc_log_has(a, "older than it"));
	assert_int_equal(server_proc_http(a, "GET", "/v1/node/node-1", NULL, NULL), 200);
}

/* The members' IDs in GET /v1/status/members; false when it does not answer. */
static bool members(struct server_proc *s, char ids[4][160], size_t *n, int64_t *started)
{
	json_t *doc = NULL, *arr;
	bool ok = server_proc_http(s, "GET", "/v1/status/members", NULL, &doc) == 200;

	*n = 0;
	arr = json_object_get(doc, "members");
	for (size_t i = 0; ok && i < json_array_size(arr) && i < 4; i++) {
		json_t *m = json_array_get(arr, i);

		snprintf(ids[i], 160, "%s", json_string_value(json_object_get(m, "id")));
		*started = json_integer_value(json_object_get(m, "started_ms"));
		(*n)++;
	}
	json_decref(doc);
	return ok;
}

static void test_restart_same_member(void **state)
{
	struct fixture *f = *state;
	struct server_proc *a = &f->s[0];
	char ids[4][160], first[160];
	int64_t started = 0, was;
	size_t n = 0;

	/* A long lease: the old record would outlive the restart. */
	config(f, a, PREFIX, "\"leader_ttl\": \"30s\",");
	start_ok(a, NULL);
	for (int i = 0; i < WAIT_MS / 50 && (!members(a, ids, &n, &started) || n == 0); i++)
		hpp_pause_ms(50);
	assert_int_equal(n, 1);
	snprintf(first, sizeof(first), "%s", ids[0]);
	was = started;
	server_proc_stop(a, SIGKILL, WAIT_MS);
	start_ok(a, NULL);
	/* Until the new record is written the old one shows; then it alone. */
	for (int i = 0; i < WAIT_MS / 50; i++) {
		if (members(a, ids, &n, &started) && n >= 1 && started != was)
			break;
		hpp_pause_ms(50);
	}
	assert_int_not_equal(started, was);
	assert_int_equal(n, 1);
	assert_string_equal(ids[0], first);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_ids_and_settings, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_foreign_and_old, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_restart_same_member, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
