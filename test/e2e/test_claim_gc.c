/*
 * End to end: the server releases lost claims (server/server_gc.h). A
 * real `csid server` (node_ttl 2s, node_grace 2s) and two real `csid
 * agent`s, nodes n1 and n2, that joined it by themselves, each
 * supervising csi-hostpath as a monolith with controller publish on; the
 * two plugins share one data dir, as two nodes share their storage.
 *
 *   - A volume mounted through n1's agent, then unmounted with the
 *     agent's low-level DELETE /v1/agent/mounts/<vol>/<alloc> (which
 *     unmounts and releases nothing): the agent stops reporting the
 *     allocation, the server releases the claim with the reason, and the
 *     claim ends freed; `csictl volume status` and the claim event of the
 *     event stream say why.
 *   - A node that disappears: a single-node-writer volume mounted on n1,
 *     n1's agent and plugin killed -9; mounting on n2 is refused while n1
 *     holds the claim; after the TTL and the grace period the server
 *     releases it (ControllerUnpublishVolume through n2's controller,
 *     with n1's plugin node ID) and the volume mounts on n2.
 *   - A node that comes back: n1 mounts through the claim flow and also
 *     through the low-level PUT /v1/agent/mounts (no claim); n1's agent
 *     is stopped (SIGSTOP: no heartbeat, mounts kept) until the server
 *     released and freed its claim and the volume mounted on n2; once
 *     continued, n1's agent unmounts the orphan (not a mount point, no
 *     record), saying why, the server holds only n2's claim, and the
 *     low-level mount stays.
 * Every mount of both agents is detached at teardown even when a test
 * fails (agent_proc_cleanup), n2's first (its mounts sit on n1's data).
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
#include "csictl_run.h"
#include "hostpath_proc.h"
#include "server_proc.h"

#define T_HP AGENT_PROC_HP_ID
#define T_TOKEN "claim-gc-e2e-token-5c2"
#define T_WAIT_MS 60000

struct t_env {
	void *a1, *a2; /* struct agent_proc *, as agent_proc_setup_hostpath makes them */
	struct server_proc s;
	struct csictl_runner rn;
	struct csictl_run r;
	char server_env[128];
};

/* Starts the agent of node name in *a (data in hp_dir, NULL: its own). 0 or -1. */
static int t_agent(struct t_env *t, void **a, const char *name, const char *hp_dir)
{
	char servers[512], listener[200];
	const char *edits[] = {"\"--no-controller-publish\", ",
			       "",
			       "\"plugin_log_max_bytes\": 65536,",
			       servers,
			       "\"stop_grace\": \"3s\"}",
			       "\"stop_grace\": \"3s\", \"heartbeat\": \"250ms\"}",
			       "\"node_name\": \"node-e2e\",",
			       listener,
			       NULL};
	int port = server_proc_free_port();

	if (port < 0)
		return -1;
	snprintf(listener, sizeof(listener),
		 "\"node_name\": \"%s\", \"listener\": {\"addr\": \"127.0.0.1:%d\"},", name, port);
	snprintf(servers, sizeof(servers),
		 "\"plugin_log_max_bytes\": 65536, \"servers\": [\"%s\"],"
		 " \"server_token\": \"" T_TOKEN "\",",
		 t->s.base);
	return agent_proc_setup_hostpath_dir(a, edits, hp_dir);
}

static int t_setup(void **state)
{
	struct t_env *t = calloc(1, sizeof(*t));

	*state = t;
	if (!t || server_proc_init(&t->s) != 0 ||
	    server_proc_write_config(
		&t->s,
		"{\"data_dir\": \"@DIR@/d\", \"listen\": \"@ADDR@\", \"node_ttl\": \"2s\","
		" \"node_grace\": \"2s\","
		" \"acl_tokens\": [{\"secret\": \"" T_TOKEN "\", \"write\": true}],"
		" \"agent_token\": \"" T_TOKEN "\", \"backoff_min\": \"20ms\","
		" \"backoff_max\": \"300ms\"}",
		NULL) != 0 ||
	    server_proc_start(&t->s) != 0 || !server_proc_wait_ready(&t->s, T_WAIT_MS)) {
		if (t)
			server_proc_dump_log(&t->s, "server setup failed");
		return -1;
	}
	http_client_token(t->s.http, T_TOKEN);
	if (t_agent(t, &t->a1, "n1", NULL) != 0 ||
	    t_agent(t, &t->a2, "n2", ((struct agent_proc *)t->a1)->hp_dir) != 0)
		return -1;
	if (!server_proc_wait_plugin(&t->s, T_HP, T_WAIT_MS)) {
		server_proc_dump_log(&t->s, "plugin never healthy on the server");
		return -1;
	}
	t->rn.dir = t->s.dir;
	t->rn.deadline_ms = 120000;
	snprintf(t->server_env, sizeof(t->server_env), "CSID_ADDR=%s", t->s.base);
	return 0;
}

static int t_teardown(void **state)
{
	struct t_env *t = *state;

	if (!t)
		return 0;
	csictl_runner_cleanup(&t->rn);
	/* The agents first: their cleanup detaches every mount they made; n2's sit on n1's data. */
	agent_proc_teardown(&t->a2);
	agent_proc_teardown(&t->a1);
	if (t->s.dir[0])
		assert_false(server_proc_log_has(&t->s, T_TOKEN));
	server_proc_cleanup(&t->s);
	free(t);
	return 0;
}

/* Runs csictl against the server with the token; args NULL-terminated. */
#define T_RUN(t, ...)                                                          \
	do {                                                                   \
		char *env_[] = {(t)->server_env, "CSID_TOKEN=" T_TOKEN, NULL}; \
		char *args_[] = {__VA_ARGS__, NULL};                           \
		csictl_runner_run(&(t)->rn, &(t)->r, env_, args_);             \
	} while (0)

/* Creates volume data (access mode access) and waits for it. */
static void t_create(struct t_env *t, const char *access)
{
	char spec[512];

	snprintf(spec, sizeof(spec),
		 "{\"id\": \"data\", \"plugin_id\": \"" T_HP "\", \"capacity_min\": 1048576,"
		 " \"capabilities\": [{\"access_mode\": \"%s\","
		 " \"attachment_mode\": \"file-system\"}]}",
		 access);
	assert_int_equal(server_proc_put(&t->s, "/v1/volume/data/create", spec), 200);
	assert_true(
	    server_proc_wait_doc(&t->s, "/v1/volume/data", server_proc_volume_ready, T_WAIT_MS));
}

/* Mounts data for alloc through agent a; returns the HTTP status, the path in path. */
static long t_mount(void *a, const char *alloc, char *path, size_t len)
{
	char body[128];
	json_t *doc = NULL;
	long st;

	snprintf(body, sizeof(body), "{\"alloc_id\": \"%s\"}", alloc);
	st = agent_proc_http(a, "PUT", "/v1/agent/volumes/data/mount", body, &doc);
	snprintf(path, len, "%s",
		 st == 200 ? json_string_value(json_object_get(doc, "path"))
			   : json_string_value(json_object_get(doc, "error")));
	json_decref(doc);
	return st;
}

/* The note every check below looks for in a freed claim. */
static const char *t_note;

/* data has no active claim, and its newest past claim is freed with t_note. */
static bool t_freed_with_note(json_t *doc)
{
	json_t *past = json_object_get(doc, "past_claims");
	json_t *c = json_array_get(past, json_array_size(past) - 1);
	const char *note = json_string_value(json_object_get(c, "note"));
	const char *st = json_string_value(json_object_get(c, "state"));

	return json_array_size(json_object_get(doc, "claims")) == 0 && c && note && st &&
	       strcmp(st, "freed") == 0 && strstr(note, t_note);
}

/* A string member of o, "" when absent. */
static const char *t_str(json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));

	return v ? v : "";
}

/* The event stream from the start holds a node-unpublished claim event with t_note. */
static bool t_event_has_note(struct t_env *t)
{
	struct http_client *h = http_client_new(t->s.base);
	char *text = NULL, *line;
	bool found = false;

	assert_non_null(h);
	http_client_token(h, T_TOKEN);
	/* The stream never ends by itself: the timeout ends it. */
	http_client_do(h, "GET", "/v1/event/stream?index=1", NULL, &text, NULL, 3000);
	http_client_free(h);
	for (line = text; line && *line && !found;) {
		char *nl = strchr(line, '\n');
		json_t *ev;

		if (nl)
			*nl = '\0';
		ev = json_loads(line, 0, NULL);
		found = ev && strcmp(t_str(ev, "topic"), "claim") == 0 &&
			strcmp(t_str(ev, "type"), "node-unpublished") == 0 &&
			strstr(t_str(json_object_get(ev, "object"), "note"), t_note);
		json_decref(ev);
		line = nl ? nl + 1 : NULL;
	}
	free(text);
	return found;
}

static void test_unmounted_allocation_released(void **state)
{
	struct t_env *t = *state;
	char path[1024];

	t_create(t, "single-node-writer");
	if (t_mount(t->a1, "web-1", path, sizeof(path)) != 200) {
		agent_proc_dump_log(t->a1, "mount failed");
		fail_msg("mount on n1: %s", path);
	}
	assert_true(agent_proc_is_mount(path));
	/* The low-level unmount takes the mount down and releases nothing itself. */
	assert_int_equal(agent_proc_unmount(t->a1, "data", "web-1"), 200);
	assert_false(agent_proc_is_mount(path));
	t_note = "released: allocation web-1 no longer held by the agent of node n1";
	if (!server_proc_wait_doc(&t->s, "/v1/volume/data", t_freed_with_note, T_WAIT_MS))
		fail_msg("the claim of web-1 was not released by the server");
	assert_true(server_proc_log_has(&t->s, "lost claim released"));
	T_RUN(t, "volume", "status", "data");
	csictl_expect_ok(&t->r);
	assert_non_null(strstr(t->r.out, "no longer held by the agent of node n1"));
	csictl_runner_free(&t->rn, &t->r);
	assert_true(t_event_has_note(t));
}

static void test_node_gone_released_after_grace(void **state)
{
	struct t_env *t = *state;
	char path[1024], path2[1024];
	pid_t pids[8];
	int n;

	t_create(t, "single-node-writer");
	if (t_mount(t->a1, "web-1", path, sizeof(path)) != 200) {
		agent_proc_dump_log(t->a1, "mount failed");
		fail_msg("mount on n1: %s", path);
	}
	assert_true(agent_proc_is_mount(path));
	/* While n1 holds it, n2 is refused, naming the holder. */
	assert_int_equal(t_mount(t->a2, "web-2", path2, sizeof(path2)), 409);
	assert_non_null(strstr(path2, "web-1"));

	/* n1 disappears: its agent and its plugin, killed -9 (the mount stays behind). */
	n = agent_proc_plugin_pids(t->a1, pids, 8);
	assert_int_equal(agent_proc_stop(t->a1, SIGKILL, T_WAIT_MS), 128 + SIGKILL);
	for (int i = 0; i < n; i++)
		kill(pids[i], SIGKILL);
	assert_true(server_proc_wait_field(&t->s, "/v1/node/n1", "status", "down", T_WAIT_MS));
	t_note = "released: node n1 down for more than 2s";
	if (!server_proc_wait_doc(&t->s, "/v1/volume/data", t_freed_with_note, T_WAIT_MS))
		fail_msg("the claim of n1 was not released after the grace period");
	/* The volume mounts on n2 now. */
	if (t_mount(t->a2, "web-2", path2, sizeof(path2)) != 200) {
		agent_proc_dump_log(t->a2, "mount on n2 failed");
		fail_msg("mount on n2: %s", path2);
	}
	assert_true(agent_proc_is_mount(path2));
	assert_true(t_event_has_note(t));
}

/* ControllerPublishVolume of plugin volume vol to node through a's controller plugin. */
static void t_publish_raw(struct agent_proc *a, const char *vol, const char *node)
{
	struct agent_proc_plugin p;
	struct hpp_client cl = {0};
	int code;

	assert_int_equal(agent_proc_plugin(a, T_HP, "controller", &p), 0);
	assert_int_equal(hpp_client_open(&cl, p.endpoint), 0);
	code = hpp_ctl_publish(
	    &cl.caller, vol, node, false,
	    CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_MULTI_WRITER, false);
	hpp_client_close(&cl);
	assert_int_equal(code, 0);
}

/* What t_orphan_gone polls: agent a holds path no more, and only keep records. */
struct t_orphan {
	struct agent_proc *a;
	const char *path;
	int keep;
};

static bool t_orphan_gone(void *ctx)
{
	struct t_orphan *o = ctx;

	return !agent_proc_is_mount(o->path) && agent_proc_mount_count(o->a) == o->keep;
}

/* data's active claims are exactly web-2's. */
static bool t_only_web2(json_t *doc)
{
	json_t *claims = json_object_get(doc, "claims");

	return json_array_size(claims) == 1 &&
	       strcmp(t_str(json_array_get(claims, 0), "alloc_id"), "web-2") == 0;
}

static void test_node_back_unmounts_orphan(void **state)
{
	struct t_env *t = *state;
	struct agent_proc *a1 = t->a1;
	struct t_orphan o = {.a = a1, .keep = 1};
	char path[1024], path2[1024], raw_id[64], raw_path[1024];
	json_t *doc = NULL;
	long st;

	t_create(t, "single-node-writer");
	if (t_mount(a1, "web-1", path, sizeof(path)) != 200) {
		agent_proc_dump_log(a1, "mount failed");
		fail_msg("mount on n1: %s", path);
	}
	assert_true(agent_proc_is_mount(path));
	/* A mount without a claim: reported, answered released, never touched. */
	assert_int_equal(agent_proc_create_volume(a1, "raw", raw_id), 0);
	t_publish_raw(a1, raw_id, "n1");
	st = agent_proc_mount(a1, raw_id, "raw-1", &doc);
	snprintf(raw_path, sizeof(raw_path), "%s", t_str(doc, st == 200 ? "target" : "error"));
	json_decref(doc);
	if (st != 200)
		fail_msg("low-level mount on n1: HTTP %ld: %s", st, raw_path);
	assert_true(agent_proc_is_mount(raw_path));

	/* n1 goes away with its mounts: its agent stopped, not killed. */
	assert_int_equal(kill(a1->pid, SIGSTOP), 0);
	assert_true(server_proc_wait_field(&t->s, "/v1/node/n1", "status", "down", T_WAIT_MS));
	t_note = "released: node n1 down for more than 2s";
	if (!server_proc_wait_doc(&t->s, "/v1/volume/data", t_freed_with_note, T_WAIT_MS))
		fail_msg("the claim of n1 was not released after the grace period");
	if (t_mount(t->a2, "web-2", path2, sizeof(path2)) != 200) {
		agent_proc_dump_log(t->a2, "mount on n2 failed");
		fail_msg("mount on n2: %s", path2);
	}
	/* Still mounted on n1: the orphan. */
	assert_true(agent_proc_is_mount(path));

	assert_int_equal(kill(a1->pid, SIGCONT), 0);
	o.path = path;
	if (!agent_proc_poll(t_orphan_gone, &o, T_WAIT_MS)) {
		agent_proc_dump_log(a1, "orphan not unmounted");
		fail_msg("n1 still holds the mount of its released claim: %s", path);
	}
	assert_true(agent_proc_wait_log(a1,
					"claim released by the server while the node was away: "
					"released: node n1 down for more than 2s",
					1, T_WAIT_MS));
	assert_true(agent_proc_log_count(a1, "; unmounting", 1));
	assert_true(server_proc_wait_field(&t->s, "/v1/node/n1", "status", "ready", T_WAIT_MS));
	assert_true(server_proc_wait_doc(&t->s, "/v1/volume/data", t_only_web2, T_WAIT_MS));
	/* n2's mount and n1's low-level mount are untouched. */
	assert_true(agent_proc_is_mount(path2));
	assert_true(agent_proc_is_mount(raw_path));
	assert_int_equal(agent_proc_mount_count(a1), 1);
	assert_false(agent_proc_log_count(a1, "raw-1; unmounting", 1));
	assert_int_equal(agent_proc_unmount(a1, raw_id, "raw-1"), 200);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_unmounted_allocation_released, t_setup,
					    t_teardown),
	    cmocka_unit_test_setup_teardown(test_node_gone_released_after_grace, t_setup,
					    t_teardown),
	    cmocka_unit_test_setup_teardown(test_node_back_unmounts_orphan, t_setup, t_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
