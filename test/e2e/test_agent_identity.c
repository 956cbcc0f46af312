/*
 * End to end: the node's identity on the server, node-stage secrets, and
 * issue 8's bad input for agents. A real `csid server` (ACL token,
 * node_ttl 2 s) and real `csid agent`s (node "node-e2e", 300 ms
 * heartbeat) supervising csi-hostpath as a monolith with controller
 * publish on and --require-stage-secret, so a mount only succeeds when
 * NodeStageVolume got the volume's secret.
 *
 * - Identity and secrets: a volume with a secret and mount flags
 *   ("noatime" and a canary) mounts through the agent: the plugin got
 *   the secret, the target carries noatime. A claim, a release and a
 *   node-stage read made with another instance ID for the node are
 *   refused with 403 and change nothing; node-stage without the header,
 *   or for an allocation without a claim, is refused too. Nodes show an
 *   instance tag, never the instance ID. The canary secret and flag are
 *   in no API answer (but the node's own node-stage read), event, or log
 *   line of the server or the agent.
 * - A server that answers nothing (SIGSTOP, then SIGCONT): the existing
 *   mount keeps serving, an unmount records its release, a mount asked
 *   meanwhile succeeds once the server is back, the pending release is
 *   sent, and the node is ready again with the same instance.
 * - A wrong token: a mount through the agent fails at once with a clear
 *   error and claims nothing, and a local mount keeps being served
 *   (test_agent_join checks the refused join and its slow retry).
 * - Two agents for one node: the second is refused (409, test_agent_join
 *   checks the log) and a mount through it is refused (403) and claims
 *   nothing, while the first one's mount stays.
 * - The claim that waits (PUT .../claim?wait=&node_stage=true) and its
 *   bad input: node-stage data asked for by an operator or another agent
 *   (403, nothing claimed), a malformed or huge wait (400 / cut), a
 *   client that goes away while its claim waits (the claim stays).
 */
#include <pthread.h>
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
#include "api/http.h"
#include "http_client.h"
#include "model/model.h"
#include "server_proc.h"

#define T_TOKEN "identity-e2e-token-5d2"
#define T_WRONG "identity-e2e-wrong-8a0"
#define T_NODE "node-e2e"
#define T_CANARY "CANARY-k7q2"
#define T_KEY "stage-key"
#define T_WAIT_MS 60000
/* Another agent's instance ID (the agents' are 32 hex digits too). */
#define T_FORGED "0123456789abcdef0123456789abcdef"

struct t_env {
	struct server_proc s;
	void *agents[2]; /* struct agent_proc *, as agent_proc_setup_hostpath makes them */
	struct http_client *forged; /* the server, with a forged node instance header */
	char *seen; /* every answer body, for the canary */
	size_t nseen;
};

static void t_seen(struct t_env *t, const char *text)
{
	size_t n = text ? strlen(text) : 0;
	char *p = realloc(t->seen, t->nseen + n + 2);

	assert_non_null(p);
	t->seen = p;
	memcpy(t->seen + t->nseen, text ? text : "", n);
	t->nseen += n;
	t->seen[t->nseen++] = '\n';
	t->seen[t->nseen] = '\0';
}

static void t_seen_json(struct t_env *t, json_t *doc)
{
	char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;

	t_seen(t, text);
	free(text);
}

static int t_setup(void **state)
{
	struct t_env *t = calloc(1, sizeof(*t));

	*state = t;
	if (!t || server_proc_init(&t->s) != 0 ||
	    server_proc_write_config(
		&t->s,
		"{\"data_dir\": \"@DIR@/d\", \"listen\": \"@ADDR@\", \"node_ttl\": \"2s\","
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
	t->forged = http_client_new(t->s.base);
	if (!t->forged)
		return -1;
	http_client_token(t->forged, T_TOKEN);
	http_client_extra_header(t->forged, HTTP_NODE_INSTANCE_HEADER ": " T_FORGED);
	return 0;
}

static bool t_file_has(const char *path, const char *needle)
{
	char buf[4096];
	bool found = false;
	FILE *f = fopen(path, "r");

	while (f && !found && fgets(buf, sizeof(buf), f))
		found = strstr(buf, needle) != NULL;
	if (f)
		fclose(f);
	return found;
}

static int t_teardown(void **state)
{
	struct t_env *t = *state;

	if (!t)
		return 0;
	/* A stopped server would hold every request up. */
	if (t->s.pid > 0)
		kill(t->s.pid, SIGCONT);
	for (int i = 0; i < 2; i++) {
		struct agent_proc *a = t->agents[i];

		if (a && a->dir[0]) {
			assert_false(t_file_has(a->log, T_TOKEN));
			assert_false(t_file_has(a->log, T_CANARY));
		}
		agent_proc_teardown(&t->agents[i]);
	}
	if (t->s.dir[0]) {
		assert_false(server_proc_log_has(&t->s, T_TOKEN));
		assert_false(server_proc_log_has(&t->s, T_CANARY));
		assert_false(server_proc_log_has(&t->s, T_FORGED));
	}
	http_client_free(t->forged);
	server_proc_cleanup(&t->s);
	free(t->seen);
	free(t);
	return 0;
}

/*
 * Starts agent i of node T_NODE joining the server with token. Its
 * csi-hostpath refuses NodeStageVolume without the secret T_KEY; local:
 * instead, it needs no ControllerPublishVolume (for mounts made on the
 * agent alone).
 */
static struct agent_proc *t_agent(struct t_env *t, int i, const char *token, bool local)
{
	char servers[256], listener[160];
	const char *edits[] = {"\"plugin_log_max_bytes\": 65536,",
			       servers,
			       "\"node_name\": \"" T_NODE "\",",
			       listener,
			       "\"stop_grace\": \"3s\"}",
			       "\"stop_grace\": \"3s\", \"heartbeat\": \"300ms\"}",
			       "\"--no-controller-publish\", ",
			       local ? "\"--no-controller-publish\", "
				     : "\"--require-stage-secret\", \"" T_KEY "\", ",
			       NULL};
	int n = snprintf(servers, sizeof(servers),
			 "\"plugin_log_max_bytes\": 65536, \"servers\": [\"%s\"],"
			 " \"server_token\": \"%s\",",
			 t->s.base, token);

	int port = server_proc_free_port();

	assert_true(n > 0 && (size_t)n < sizeof(servers) && port > 0);
	/* A TCP listener: the server runs controller RPCs through the agent there. */
	snprintf(listener, sizeof(listener),
		 "\"node_name\": \"" T_NODE "\", \"listener\": {\"addr\": \"127.0.0.1:%d\"},",
		 port);
	if (agent_proc_setup_hostpath(&t->agents[i], edits) != 0)
		fail_msg("agent %d did not start", i);
	return t->agents[i];
}

/* The agent's instance ID, from its data_dir. */
static void t_instance(struct agent_proc *a, char *out, size_t len)
{
	char path[AGENT_PROC_PATH + 32];
	FILE *f;

	snprintf(path, sizeof(path), "%s/agent-instance-id", a->data_dir);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(out, (int)len, f));
	fclose(f);
	out[strcspn(out, "\n")] = '\0';
}

struct t_node_want {
	struct t_env *t;
	const char *tag;
};

/* The node is ready, its plugin healthy, with the wanted tag and no instance ID. */
static bool t_node_ready(void *ctx)
{
	struct t_node_want *w = ctx;
	json_t *doc = NULL, *p;
	long st = server_proc_http(&w->t->s, "GET", "/v1/node/" T_NODE, NULL, &doc);
	const char *status = json_string_value(json_object_get(doc, "status"));
	const char *tag = json_string_value(json_object_get(doc, "instance_tag"));
	bool ok;

	p = json_array_get(json_object_get(doc, "plugins"), 0);
	ok = st == 200 && status && strcmp(status, "ready") == 0 && tag &&
	     strcmp(tag, w->tag) == 0 && !json_object_get(doc, "instance_id") &&
	     json_is_true(json_object_get(p, "healthy"));
	json_decref(doc);
	return ok;
}

static void t_wait_node(struct t_env *t, struct agent_proc *a)
{
	char inst[64], tag[MODEL_INSTANCE_TAG_LEN + 1];
	struct t_node_want w = {t, tag};

	t_instance(a, inst, sizeof(inst));
	model_node_instance_tag(inst, tag);
	if (!agent_proc_poll(t_node_ready, &w, T_WAIT_MS)) {
		server_proc_dump_log(&t->s, "node not ready");
		agent_proc_dump_log(a, "node not ready");
		fail_msg("node %s not ready with instance tag %s", T_NODE, tag);
	}
}

/*
 * Records volume id to create (single-node-writer, the canary secret and
 * mount flag); wait: and waits until it is ready.
 */
static void t_volume_put(struct t_env *t, const char *id, bool wait)
{
	char path[128];

	snprintf(path, sizeof(path), "/v1/volume/%s/create", id);
	assert_int_equal(
	    server_proc_put(&t->s, path,
			    "{\"plugin_id\": \"" AGENT_PROC_HP_ID "\", \"capacity_min\": \"1MiB\","
			    " \"capabilities\": [{\"access_mode\": \"single-node-writer\","
			    " \"attachment_mode\": \"file-system\"}],"
			    " \"mount_options\": {\"mount_flags\": [\"noatime\", \"" T_CANARY
			    "-flag\"]},"
			    " \"secrets\": {\"" T_KEY "\": \"" T_CANARY "-secret\"}}"),
	    200);
	if (!wait)
		return;
	snprintf(path, sizeof(path), "/v1/volume/%s", id);
	if (!server_proc_wait_doc(&t->s, path, server_proc_volume_ready, T_WAIT_MS))
		fail_msg("volume %s not ready", id);
}

/* The volume as the server shows it (a new reference, also kept for the canary). */
static json_t *t_volume(struct t_env *t, const char *id)
{
	char path[128];
	json_t *doc = NULL;

	snprintf(path, sizeof(path), "/v1/volume/%s", id);
	assert_int_equal(server_proc_http(&t->s, "GET", path, NULL, &doc), 200);
	t_seen_json(t, doc);
	return doc;
}

static size_t t_claims(struct t_env *t, const char *id)
{
	json_t *v = t_volume(t, id);
	size_t n = json_array_size(json_object_get(v, "claims"));

	json_decref(v);
	return n;
}

/* Mounts vol for alloc through agent a; the status, *path (1024 bytes) the mounted path. */
static long t_mount(struct t_env *t, struct agent_proc *a, const char *vol, const char *alloc,
		    char *path, char *err, size_t errlen)
{
	char url[128], body[128];
	json_t *doc = NULL;
	long st;

	snprintf(url, sizeof(url), "/v1/agent/volumes/%s/mount", vol);
	snprintf(body, sizeof(body), "{\"alloc_id\": \"%s\"}", alloc);
	st = agent_proc_http(a, "PUT", url, body, &doc);
	t_seen_json(t, doc);
	if (path)
		snprintf(path, 1024, "%s",
			 st == 200 ? json_string_value(json_object_get(doc, "path")) : "");
	if (err)
		snprintf(err, errlen, "%s",
			 st == 200 ? "" : json_string_value(json_object_get(doc, "error")));
	json_decref(doc);
	return st;
}

/* Unmounts through agent a; the status, *out the answer (a new reference, may be NULL). */
static long t_unmount(struct t_env *t, struct agent_proc *a, const char *vol, const char *alloc,
		      json_t **out)
{
	char url[160];
	json_t *doc = NULL;
	long st;

	snprintf(url, sizeof(url), "/v1/agent/volumes/%s/mount/%s", vol, alloc);
	st = agent_proc_http(a, "DELETE", url, NULL, &doc);
	t_seen_json(t, doc);
	if (out)
		*out = doc;
	else
		json_decref(doc);
	return st;
}

/* Whether the mount at path carries the mount option opt (from /proc/self/mountinfo). */
static bool t_mount_has_option(const char *path, const char *opt)
{
	char line[4096], mp[1100], opts[1024];
	bool found = false;
	FILE *f = fopen("/proc/self/mountinfo", "r");

	while (f && fgets(line, sizeof(line), f)) {
		/* id parent major:minor root mount-point options ... */
		if (sscanf(line, "%*s %*s %*s %*s %1099s %1023s", mp, opts) == 2 &&
		    strcmp(mp, path) == 0)
			found = strstr(opts, opt) != NULL;
	}
	if (f)
		fclose(f);
	return found;
}

/* A request of the forged client: its status, and its error holds in_error. */
static void t_forged(struct t_env *t, const char *method, const char *path, const char *body,
		     long status, const char *in_error)
{
	json_t *doc = NULL;
	long got = http_client_json(t->forged, method, path, body, &doc);
	const char *msg = json_string_value(json_object_get(doc, "error"));

	char copy[512];
	bool ok = got == status && msg && strstr(msg, in_error);

	t_seen_json(t, doc);
	snprintf(copy, sizeof(copy), "%s", msg ? msg : "");
	json_decref(doc);
	if (!ok)
		fail_msg("%s %s: HTTP %ld, error \"%s\"; wanted %ld and \"%s\"", method, path, got,
			 copy, status, in_error);
}

/* The event stream from the start, until its timeout ends it. */
static void t_events(struct t_env *t)
{
	struct http_client *h = http_client_new(t->s.base);
	char *text = NULL;

	assert_non_null(h);
	http_client_token(h, T_TOKEN);
	http_client_do(h, "GET", "/v1/event/stream?index=0", NULL, &text, NULL, 2000);
	assert_non_null(text);
	assert_non_null(strstr(text, "\"topic\":\"claim\""));
	t_seen(t, text);
	free(text);
	http_client_free(h);
}

static bool t_freed(void *ctx)
{
	struct t_env *t = ctx;
	json_t *doc = NULL;
	bool ok;

	if (server_proc_http(&t->s, "GET", "/v1/volume/data", NULL, &doc) != 200) {
		json_decref(doc);
		return false;
	}
	ok = json_array_size(json_object_get(doc, "claims")) == 0 &&
	     json_array_size(json_object_get(doc, "past_claims")) >= 1;
	json_decref(doc);
	return ok;
}

static void test_identity_and_secrets(void **state)
{
	struct t_env *t = *state;
	struct agent_proc *a = t_agent(t, 0, T_TOKEN, false);
	char path[1024], inst[64], hdr[128], err[512];
	struct http_client *own;
	json_t *doc = NULL;

	t_wait_node(t, a);
	t_volume_put(t, "data", true);
	t_instance(a, inst, sizeof(inst));

	/* Nodes never show the instance ID, a credential. */
	assert_int_equal(server_proc_http(&t->s, "GET", "/v1/nodes", NULL, &doc), 200);
	t_seen_json(t, doc);
	json_decref(doc);
	assert_null(strstr(t->seen, inst));

	/* A claim for this node made by another instance: 403, nothing claimed. */
	t_forged(t, "PUT", "/v1/volume/data/claim",
		 "{\"alloc_id\": \"evil-1\", \"node_id\": \"" T_NODE "\", \"mode\": \"write\","
		 " \"access_mode\": \"single-node-writer\", \"attachment_mode\": \"file-system\"}",
		 403, "a node may act only for itself");
	assert_int_equal(t_claims(t, "data"), 0);
	assert_true(server_proc_log_has(&t->s, "an agent acted for a node it does not hold"));
	/* Node-stage needs the header, and a claim. */
	assert_int_equal(
	    server_proc_http(&t->s, "GET", "/v1/volume/data/node-stage?alloc_id=web-1", NULL, &doc),
	    403);
	json_decref(doc);
	own = http_client_new(t->s.base);
	assert_non_null(own);
	http_client_token(own, T_TOKEN);
	snprintf(hdr, sizeof(hdr), HTTP_NODE_INSTANCE_HEADER ": %s", inst);
	http_client_extra_header(own, hdr);
	assert_int_equal(
	    http_client_json(own, "GET", "/v1/volume/data/node-stage?alloc_id=web-1", NULL, &doc),
	    404);
	json_decref(doc);

	/* The mount: NodeStageVolume got the secret (or the plugin refuses), and the flags. */
	if (t_mount(t, a, "data", "web-1", path, err, sizeof(err)) != 200) {
		agent_proc_dump_log(a, "mount failed");
		fail_msg("mount of data for web-1: %s", err);
	}
	assert_true(agent_proc_is_mount(path));
	assert_true(t_mount_has_option(path, "noatime"));
	assert_int_equal(t_claims(t, "data"), 1);

	/* The node's own agent reads the node-stage data; nobody else does. */
	assert_int_equal(
	    http_client_json(own, "GET", "/v1/volume/data/node-stage?alloc_id=web-1", NULL, &doc),
	    200);
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(doc, "secrets"), T_KEY)),
	    T_CANARY "-secret");
	assert_int_equal(json_array_size(json_object_get(doc, "mount_flags")), 2);
	json_decref(doc);
	http_client_free(own);
	t_forged(t, "GET", "/v1/volume/data/node-stage?alloc_id=web-1", NULL, 403,
		 "a node may act only for itself");
	/* A release of this node's claim by another instance: 403, the claim stays. */
	t_forged(t, "PUT", "/v1/volume/data/release", "{\"alloc_id\": \"web-1\"}", 403,
		 "a node may act only for itself");
	assert_int_equal(t_claims(t, "data"), 1);
	assert_true(agent_proc_is_mount(path));

	assert_int_equal(t_unmount(t, a, "data", "web-1", NULL), 200);
	assert_false(agent_proc_is_mount(path));
	if (!agent_proc_poll(t_freed, t, T_WAIT_MS))
		fail_msg("the claim of web-1 was not freed");

	/* The canary: in no answer, event or log line (teardown checks the logs). */
	t_events(t);
	assert_int_equal(server_proc_http(&t->s, "GET", "/v1/volumes", NULL, &doc), 200);
	t_seen_json(t, doc);
	json_decref(doc);
	assert_int_equal(agent_proc_http(a, "GET", "/v1/agent/mounts", NULL, &doc), 200);
	t_seen_json(t, doc);
	json_decref(doc);
	assert_null(strstr(t->seen, T_CANARY));
	assert_null(strstr(t->seen, "noatime"));
	assert_null(strstr(t->seen, inst));
	assert_false(server_proc_log_has(&t->s, inst));
	assert_false(agent_proc_log_count(a, inst, 1));
}

struct t_call {
	struct t_env *t;
	struct agent_proc *a;
	long status;
	char path[1024];
	char err[512];
};

static void *t_mount_thread(void *arg)
{
	struct t_call *c = arg;

	c->status = t_mount(c->t, c->a, "data2", "web-2", c->path, c->err, sizeof(c->err));
	return NULL;
}

static bool t_released(void *ctx)
{
	struct agent_proc *a = ctx;

	return agent_proc_log_count(a, "pending release sent", 1);
}

/*
 * The server answers nothing for a while (SIGSTOP): the mount keeps
 * serving, an unmount records its release, a mount asked meanwhile
 * succeeds once the server is back (SIGCONT), the release is sent, and
 * the node is ready again with the same instance.
 */
static void test_server_stopped(void **state)
{
	struct t_env *t = *state;
	struct agent_proc *a = t_agent(t, 0, T_TOKEN, false);
	struct t_call call = {.t = t, .a = a};
	char path[1024], file[1100], err[512];
	pthread_t th;
	json_t *doc = NULL;
	FILE *f;

	t_wait_node(t, a);
	t_volume_put(t, "data", true);
	t_volume_put(t, "data2", true);
	assert_int_equal(t_mount(t, a, "data", "web-1", path, err, sizeof(err)), 200);

	assert_int_equal(kill(t->s.pid, SIGSTOP), 0);
	assert_true(agent_proc_wait_log(
	    a, "no server reachable; the agent keeps serving its mounts", 1, T_WAIT_MS));
	/* The mount serves: a file is written there. */
	snprintf(file, sizeof(file), "%s/while-stopped", path);
	f = fopen(file, "w");
	assert_non_null(f);
	assert_true(fputs("still here\n", f) >= 0);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(agent_proc_mount_count(a), 1);

	/* A mount asked now waits for the server. */
	assert_int_equal(pthread_create(&th, NULL, t_mount_thread, &call), 0);
	/* An unmount takes the mount down and keeps the release for later. */
	assert_int_equal(t_unmount(t, a, "data", "web-1", &doc), 200);
	assert_true(json_is_true(json_object_get(doc, "unmounted")));
	assert_true(json_is_true(json_object_get(doc, "release_pending")));
	json_decref(doc);
	assert_false(agent_proc_is_mount(path));

	assert_int_equal(kill(t->s.pid, SIGCONT), 0);
	pthread_join(th, NULL);
	if (call.status != 200) {
		agent_proc_dump_log(a, "mount after the server came back");
		fail_msg("mount of data2 for web-2: HTTP %ld: %s", call.status, call.err);
	}
	assert_true(agent_proc_is_mount(call.path));
	if (!agent_proc_poll(t_released, a, T_WAIT_MS) || !agent_proc_poll(t_freed, t, T_WAIT_MS)) {
		agent_proc_dump_log(a, "release not sent");
		fail_msg("the pending release of web-1 was not sent");
	}
	t_wait_node(t, a);
	assert_int_equal(t_unmount(t, a, "data2", "web-2", NULL), 200);
}

/* A wrong token: a mount through the agent fails clearly and claims nothing; local mounts serve. */
static void test_wrong_token(void **state)
{
	struct t_env *t = *state;
	struct agent_proc *a = t_agent(t, 0, T_WRONG, true);
	char err[512], vol[64];
	int64_t start;

	t_volume_put(t, "data", false);
	start = agent_proc_now_ms();
	assert_int_equal(t_mount(t, a, "data", "web-1", NULL, err, sizeof(err)), 403);
	assert_non_null(strstr(err, "unknown token"));
	/* At once: a token is not fixed by retrying. */
	assert_true(agent_proc_now_ms() - start < 10000);
	assert_int_equal(t_claims(t, "data"), 0);
	assert_true(agent_proc_wait_log(a, "server refused the agent's token (check server_token)",
					1, AGENT_PROC_LOG_MS));
	/* The agent serves what it mounts by itself. */
	assert_int_equal(agent_proc_create_volume(a, "local-vol", vol), 0);
	assert_int_equal(agent_proc_mount(a, vol, "alloc-1", NULL), 200);
	assert_int_equal(agent_proc_mount_count(a), 1);
	assert_int_equal(agent_proc_unmount(a, vol, "alloc-1"), 200);
	assert_false(agent_proc_log_count(a, T_WRONG, 1));
}

/* Two agents for one node: the second serves nothing for that node's claims. */
static void test_two_agents_one_node(void **state)
{
	struct t_env *t = *state;
	struct agent_proc *a = t_agent(t, 0, T_TOKEN, false), *b;
	char path[1024], err[512], ia[64], ib[64];

	t_wait_node(t, a);
	t_volume_put(t, "data", true);
	t_volume_put(t, "data2", true);
	assert_int_equal(t_mount(t, a, "data", "web-1", path, err, sizeof(err)), 200);

	b = t_agent(t, 1, T_TOKEN, false);
	t_instance(a, ia, sizeof(ia));
	t_instance(b, ib, sizeof(ib));
	assert_string_not_equal(ia, ib);
	assert_true(
	    agent_proc_wait_log(b, "another agent holds this node name", 1, AGENT_PROC_LOG_MS));
	assert_int_equal(t_mount(t, b, "data2", "web-2", NULL, err, sizeof(err)), 403);
	assert_non_null(strstr(err, "a node may act only for itself"));
	assert_int_equal(t_claims(t, "data2"), 0);
	assert_int_equal(agent_proc_mount_count(b), 0);
	/* a's node and mount are untouched. */
	t_wait_node(t, a);
	assert_true(agent_proc_is_mount(path));
	assert_int_equal(t_claims(t, "data"), 1);
	assert_false(server_proc_log_has(&t->s, ia) || server_proc_log_has(&t->s, ib));
	assert_int_equal(t_unmount(t, a, "data", "web-1", NULL), 200);
}

/* The claim of volume rt for alloc (no access_mode: the volume's first capability). */
#define T_RT_CLAIM(alloc) \
	"{\"alloc_id\": \"" alloc "\", \"node_id\": \"" T_NODE "\", \"mode\": \"write\"}"
#define T_RT_WAIT "/v1/volume/rt/claim?wait="

/* A claim of rt that waits, by the node's own agent (instance inst): its status and answer. */
static long t_claim_wait(struct t_env *t, const char *inst, const char *query, const char *body,
			 int64_t timeout_ms, json_t **doc)
{
	struct http_client *own = http_client_new(t->s.base);
	char hdr[128], path[256], *text = NULL;
	long st;

	assert_non_null(own);
	http_client_token(own, T_TOKEN);
	snprintf(hdr, sizeof(hdr), HTTP_NODE_INSTANCE_HEADER ": %s", inst);
	http_client_extra_header(own, hdr);
	snprintf(path, sizeof(path), T_RT_WAIT "%s", query);
	st = http_client_do(own, "PUT", path, body, &text, NULL, timeout_ms);
	*doc = text ? json_loads(text, 0, NULL) : NULL;
	free(text);
	http_client_free(own);
	return st;
}

/* The claim of rt for alloc, as the server shows it: its state, or "" (none). */
static void t_rt_claim_state(struct t_env *t, const char *alloc, char *out, size_t len)
{
	json_t *v = t_volume(t, "rt"), *c;
	size_t i;

	out[0] = '\0';
	json_array_foreach(json_object_get(v, "claims"), i, c)
	{
		if (strcmp(json_string_value(json_object_get(c, "alloc_id")), alloc) == 0)
			snprintf(out, len, "%s", json_string_value(json_object_get(c, "state")));
	}
	json_decref(v);
}

/*
 * A claim answer with view=node, the volume published to T_NODE: the
 * claim, publication and node-stage data as in the whole answer; the
 * volume with what a node mounts with, only T_NODE's claims and
 * publication, and none of the spec's capabilities.
 */
static void t_node_view_check(json_t *doc)
{
	json_t *vol = json_object_get(doc, "volume"), *c;
	size_t i;

	assert_string_equal(json_string_value(json_object_get(doc, "publication_state")),
			    "published");
	assert_non_null(json_object_get(json_object_get(doc, "node_stage"), "secrets"));
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(doc, "claim"), "node_id")), T_NODE);
	assert_string_equal(json_string_value(json_object_get(vol, "plugin_id")), AGENT_PROC_HP_ID);
	assert_non_null(json_string_value(json_object_get(vol, "external_id")));
	assert_true(json_integer_value(json_object_get(vol, "capacity")) > 0);
	assert_int_equal(json_array_size(json_object_get(vol, "capabilities")), 0);
	assert_true(json_array_size(json_object_get(vol, "claims")) >= 1);
	json_array_foreach(json_object_get(vol, "claims"), i, c)
	    assert_string_equal(json_string_value(json_object_get(c, "node_id")), T_NODE);
	assert_int_equal(json_array_size(json_object_get(vol, "publications")), 1);
	assert_null(json_object_get(vol, "secrets"));
}

/*
 * The claim that waits (docs/server-api.md), and its bad input: the
 * node-stage data asked for by anyone but the node's agent (403, nothing
 * claimed), a malformed wait or view (400), a huge wait (cut to the cap,
 * not refused); the node's agent gets the claim, the publication and the
 * node-stage data in one answer, with the whole volume or (view=node) the
 * node's view of it; a client that goes away while the claim
 * waits loses nothing (the claim stays claimed; claiming again answers it).
 */
static void test_claim_wait(void **state)
{
	struct t_env *t = *state;
	struct agent_proc *a = t_agent(t, 0, T_TOKEN, false);
	char inst[64], st[32];
	json_t *doc = NULL, *stage;
	int64_t start;

	t_wait_node(t, a);
	t_volume_put(t, "rt", true);
	t_instance(a, inst, sizeof(inst));

	/* Node-stage data for an operator (no instance) or another agent: 403, nothing claimed. */
	assert_int_equal(server_proc_http(&t->s, "PUT", T_RT_WAIT "5s&node_stage=true",
					  T_RT_CLAIM("web-1"), &doc),
			 403);
	assert_non_null(strstr(json_string_value(json_object_get(doc, "error")),
			       "node-stage is only for the agent of the claim's node"));
	json_decref(doc);
	t_forged(t, "PUT", T_RT_WAIT "5s&node_stage=true", T_RT_CLAIM("web-1"), 403,
		 "a node may act only for itself");
	/* A malformed wait: 400, nothing claimed. */
	assert_int_equal(
	    t_claim_wait(t, inst, "soon&node_stage=true", T_RT_CLAIM("web-1"), 0, &doc), 400);
	assert_non_null(strstr(json_string_value(json_object_get(doc, "error")), "query wait"));
	json_decref(doc);
	assert_int_equal(t_claim_wait(t, inst, "nan", T_RT_CLAIM("web-1"), 0, &doc), 400);
	json_decref(doc);
	/* An unknown view: 400, nothing claimed. */
	assert_int_equal(
	    t_claim_wait(t, inst, "5s&node_stage=true&view=all", T_RT_CLAIM("web-1"), 0, &doc),
	    400);
	assert_non_null(strstr(json_string_value(json_object_get(doc, "error")), "view"));
	json_decref(doc);
	assert_int_equal(t_claims(t, "rt"), 0);

	/* The node's agent, a huge wait (cut, not refused): claim, publication, node-stage. */
	start = agent_proc_now_ms();
	assert_int_equal(
	    t_claim_wait(t, inst, "99999999s&node_stage=true", T_RT_CLAIM("web-1"), 0, &doc), 200);
	assert_true(agent_proc_now_ms() - start < T_WAIT_MS);
	assert_string_equal(json_string_value(json_object_get(doc, "publication_state")),
			    "published");
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(doc, "claim"), "access_mode")),
	    "single-node-writer");
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(doc, "publication"), "state")),
	    "published");
	assert_true(
	    json_is_object(json_object_get(json_object_get(doc, "publication"), "context")));
	stage = json_object_get(doc, "node_stage");
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(stage, "secrets"), T_KEY)),
	    T_CANARY "-secret");
	assert_int_equal(json_array_size(json_object_get(stage, "mount_flags")), 2);
	/* The volume in the answer is the API view: no secret there. */
	assert_null(json_object_get(json_object_get(doc, "volume"), "secrets"));
	assert_int_equal(
	    json_array_size(json_object_get(json_object_get(doc, "volume"), "capabilities")), 1);
	json_decref(doc);
	/*
	 * The answer went before the publication's write (docs/server-api.md):
	 * once the store has it, a claim that does not wait (0) answers it too.
	 */
	assert_true(server_proc_wait_doc(&t->s, "/v1/volume/rt", server_proc_volume_all_published,
					 T_WAIT_MS));
	/* The node's view: the same claim, publication and node-stage data, a smaller volume. */
	assert_int_equal(
	    t_claim_wait(t, inst, "0&node_stage=true&view=node", T_RT_CLAIM("web-1"), 0, &doc),
	    200);
	t_node_view_check(doc);
	json_decref(doc);
	/* Without node_stage: the same answer, no node-stage data. */
	assert_int_equal(t_claim_wait(t, inst, "0", T_RT_CLAIM("web-1"), 0, &doc), 200);
	assert_null(json_object_get(doc, "node_stage"));
	json_decref(doc);
	assert_int_equal(server_proc_put(&t->s, "/v1/volume/rt/release",
					 "{\"alloc_id\": \"web-1\", \"force\": true}"),
			 200);

	/*
	 * A client that goes away while its claim waits (the publication takes
	 * 4 s, the client gives up after 1 s): the claim stays claimed, and
	 * the same claim again answers it once published.
	 */
	assert_int_equal(agent_proc_write_faults(a, "ControllerPublishVolume delay_ms=4000\n"), 0);
	assert_int_equal(
	    t_claim_wait(t, inst, "30s&node_stage=true", T_RT_CLAIM("web-2"), 1000, &doc), -1);
	json_decref(doc);
	t_rt_claim_state(t, "web-2", st, sizeof(st));
	assert_string_equal(st, "claimed");
	assert_int_equal(t_claim_wait(t, inst, "30s&node_stage=true", T_RT_CLAIM("web-2"), 0, &doc),
			 200);
	assert_string_equal(json_string_value(json_object_get(doc, "publication_state")),
			    "published");
	assert_non_null(json_object_get(doc, "node_stage"));
	json_decref(doc);
	t_rt_claim_state(t, "web-2", st, sizeof(st));
	assert_string_equal(st, "claimed");
	assert_int_equal(agent_proc_write_faults(a, ""), 0);
	assert_int_equal(server_proc_put(&t->s, "/v1/volume/rt/release",
					 "{\"alloc_id\": \"web-2\", \"force\": true}"),
			 200);
	assert_false(server_proc_log_has(&t->s, T_CANARY));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_identity_and_secrets, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_server_stopped, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_wrong_token, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_two_agents_one_node, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_claim_wait, t_setup, t_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
