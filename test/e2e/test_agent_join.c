/*
 * End-to-end tests of agents joining a server: a real `csid server` (ACL
 * token, node_ttl 2 s, no plugins of its own) and real `csid agent`s
 * supervising csi-hostpath, with a 300 ms heartbeat and a TCP listener.
 * The node appears ready with its node plugin healthy in /v1/nodes and
 * /v1/plugins within a bound, with the agent's address, after failing over from a first server
 * address that refuses connections, or one that answers 500, or one that takes connections and
 * never answers (the request's deadline, then failover); a killed agent's node goes down after the
 * TTL and its plugin stops counting as healthy; a second agent with the same node name takes the
 * node over only once it is down, and the first agent coming back is then refused (409) and says
 * so (naming instance tags: no instance ID is in any log or answer); a server restarted on an
 * empty store is caught up by the agent, which kept serving its mount
 * meanwhile; the server runs CreateVolume through the controller plugin
 * of an agent that joined by itself; a wrong token is refused and logged
 * clearly. No token is in
 * any log line.
 */
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent_proc.h"
#include "hostpath_proc.h"
#include "http_client.h"
#include "model/model.h"
#include "server_proc.h"

#define T_TOKEN "e2e-join-token-9f3"
#define T_WRONG "e2e-wrong-token-4c1"
#define T_NODE "node-e2e"
#define T_TTL_MS 2000
#define T_SERVER_CONFIG                                                              \
	"{\"data_dir\": \"@DIR@/%s\", \"listen\": \"@ADDR@\", \"node_ttl\": \"2s\"," \
	" \"acl_tokens\": [{\"secret\": \"" T_TOKEN "\", \"write\": true}],"         \
	" \"agent_token\": \"" T_TOKEN                                               \
	"\", \"backoff_min\": \"20ms\", \"backoff_max\": \"300ms\"}"

struct t_env {
	struct server_proc s;
	int refuse_fd; /* bound, never listening: connections to its port are refused */
	int refuse_port;
	int silent_fd; /* listening, never accepting: requests to it get no answer */
	int silent_port;
	int failing_fd; /* listening; t_failing answers every request with 500 */
	int failing_port;
	pthread_t failing;
	bool failing_started;
	int failing_answers; /* how many it answered (written by the thread) */
	void *agents[2]; /* struct agent_proc *, as agent_proc_setup_hostpath makes them */
	char addresses[2][64]; /* each agent's API on TCP, as the servers are told it */
};

static int t_server_config(struct t_env *t, const char *data)
{
	char json[512];

	snprintf(json, sizeof(json), T_SERVER_CONFIG, data);
	return server_proc_write_config(&t->s, json, NULL);
}

/* A socket bound to a free port of 127.0.0.1 (listening or not); its port in *port. */
static int t_socket(bool listening, int *port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) != 0 || (listening && listen(fd, 16))) {
		close(fd);
		return -1;
	}
	*port = ntohs(sa.sin_port);
	return fd;
}

static int t_setup(void **state)
{
	struct t_env *t = calloc(1, sizeof(*t));

	*state = t;
	if (!t)
		return -1;
	t->refuse_fd = t_socket(false, &t->refuse_port);
	t->silent_fd = t_socket(true, &t->silent_port);
	t->failing_fd = t_socket(true, &t->failing_port);
	if (t->refuse_fd < 0 || t->silent_fd < 0 || t->failing_fd < 0)
		return -1;
	if (server_proc_init(&t->s) != 0 || t_server_config(t, "d") != 0 ||
	    server_proc_start(&t->s) != 0 || !server_proc_wait_ready(&t->s, 30000)) {
		server_proc_dump_log(&t->s, "server setup failed");
		server_proc_cleanup(&t->s);
		return -1;
	}
	http_client_token(t->s.http, T_TOKEN);
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
	for (int i = 0; i < 2; i++) {
		struct agent_proc *a = t->agents[i];

		/* No token in any log line, whatever the test did. */
		if (a && a->dir[0]) {
			assert_false(t_file_has(a->log, T_TOKEN));
			assert_false(t_file_has(a->log, T_WRONG));
		}
		agent_proc_teardown(&t->agents[i]);
	}
	if (t->s.dir[0]) {
		assert_false(server_proc_log_has(&t->s, T_TOKEN));
		assert_false(server_proc_log_has(&t->s, T_WRONG));
	}
	server_proc_cleanup(&t->s);
	if (t->refuse_fd >= 0)
		close(t->refuse_fd);
	if (t->silent_fd >= 0)
		close(t->silent_fd);
	if (t->failing_started) {
		/* Wakes the thread's accept. */
		shutdown(t->failing_fd, SHUT_RDWR);
		pthread_join(t->failing, NULL);
	}
	if (t->failing_fd >= 0)
		close(t->failing_fd);
	free(t);
	return 0;
}

/*
 * Starts agent i (node T_NODE, csi-hostpath) joining the server with
 * token, after a first server address on 127.0.0.1:first_port (0: none).
 */
static struct agent_proc *t_agent(struct t_env *t, int i, int first_port, const char *token)
{
	char servers[256], listener[128];
	const char *edits[] = {"\"plugin_log_max_bytes\": 65536,",
			       servers,
			       "\"stop_grace\": \"3s\"}",
			       "\"stop_grace\": \"3s\", \"heartbeat\": \"300ms\"}",
			       "\"node_name\": \"" T_NODE "\",",
			       listener,
			       NULL};
	int n, port = server_proc_free_port();

	/* The agent's TCP listener, on a port held for it: it tells the servers its address. */
	assert_true(port > 0);
	snprintf(t->addresses[i], sizeof(t->addresses[i]), "http://127.0.0.1:%d", port);
	snprintf(listener, sizeof(listener),
		 "\"node_name\": \"" T_NODE "\", \"listener\": {\"addr\": \"127.0.0.1:%d\"},",
		 port);

	if (first_port)
		n = snprintf(
		    servers, sizeof(servers),
		    "\"plugin_log_max_bytes\": 65536, \"servers\": [\"http://127.0.0.1:%d\","
		    " \"%s\"], \"server_token\": \"%s\",",
		    first_port, t->s.base, token);
	else
		n = snprintf(servers, sizeof(servers),
			     "\"plugin_log_max_bytes\": 65536, \"servers\": [\"%s\"],"
			     " \"server_token\": \"%s\",",
			     t->s.base, token);
	assert_true(n > 0 && (size_t)n < sizeof(servers));
	if (agent_proc_setup_hostpath(&t->agents[i], edits) != 0)
		fail_msg("agent %d did not start", i);
	return t->agents[i];
}

/* A string field of o, "" when absent. */
static const char *t_str(json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));

	return v ? v : "";
}

/* Checks the address the node's record holds. */
static void t_node_address(struct t_env *t, const char *want)
{
	json_t *doc = NULL;

	assert_int_equal(server_proc_http(&t->s, "GET", "/v1/node/" T_NODE, NULL, &doc), 200);
	assert_string_equal(t_str(doc, "address"), want);
	json_decref(doc);
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
	const char *status; /* "ready", "down", or NULL: absent */
	const char *instance; /* NULL: any */
	int nodes_healthy; /* of the plugin in /v1/plugin/<hp>; -1: not checked */
};

static bool t_node_is(void *ctx)
{
	struct t_node_want *w = ctx;
	char tag[MODEL_INSTANCE_TAG_LEN + 1];
	json_t *doc = NULL;
	long st = server_proc_http(&w->t->s, "GET", "/v1/node/" T_NODE, NULL, &doc);
	bool ok;

	if (!w->status) {
		json_decref(doc);
		return st == 404;
	}
	if (w->instance)
		model_node_instance_tag(w->instance, tag);
	/* The instance ID is a credential: the API shows its tag only. */
	ok = st == 200 && strcmp(t_str(doc, "status"), w->status) == 0 &&
	     !json_object_get(doc, "instance_id") &&
	     (!w->instance || strcmp(t_str(doc, "instance_tag"), tag) == 0);
	json_decref(doc);
	if (!ok || w->nodes_healthy < 0)
		return ok;
	doc = NULL;
	st = server_proc_http(&w->t->s, "GET", "/v1/plugin/" AGENT_PROC_HP_ID, NULL, &doc);
	ok = st == 200 &&
	     json_integer_value(json_object_get(json_object_get(doc, "nodes"), "healthy")) ==
		 w->nodes_healthy &&
	     json_integer_value(json_object_get(json_object_get(doc, "nodes"), "expected")) == 1;
	json_decref(doc);
	return ok;
}

/* Polls until the node is as wanted; returns the milliseconds it took, or fails. */
static int64_t t_wait_node(struct t_env *t, const char *status, const char *instance,
			   int nodes_healthy, int64_t timeout_ms)
{
	struct t_node_want w = {t, status, instance, nodes_healthy};
	int64_t start = agent_proc_now_ms();

	if (!agent_proc_poll(t_node_is, &w, timeout_ms)) {
		server_proc_dump_log(&t->s, "node not as wanted");
		for (int i = 0; i < 2; i++)
			if (t->agents[i])
				agent_proc_dump_log(t->agents[i], "agent");
		fail_msg("node %s: not %s (instance %s, %d healthy) within %lld ms", T_NODE,
			 status ? status : "absent", instance ? instance : "any", nodes_healthy,
			 (long long)timeout_ms);
	}
	return agent_proc_now_ms() - start;
}

/* The wall-clock milliseconds of a log line's ts= field, or -1. */
static int64_t t_log_ts(const char *line)
{
	const char *p = strstr(line, "ts=");
	struct tm tm = {0};
	int ms = 0;

	if (!p || sscanf(p, "ts=%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
			 &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7)
		return -1;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (int64_t)timegm(&tm) * 1000 + ms;
}

/*
 * From the server's log: how long after T_NODE's last heartbeat the server
 * marked it down, at most short of the truth. A heartbeat counts while
 * its request runs, so its time is taken as the request's start (its
 * line's time less its duration); the down line follows the decision.
 * -1 when either line is missing.
 */
static int64_t t_down_after_heartbeat(struct t_env *t)
{
	FILE *f = fopen(t->s.log, "r");
	char line[8192];
	int64_t beat = -1, down = -1;

	if (!f)
		return -1;
	while (down < 0 && fgets(line, sizeof(line), f)) {
		const char *d = strstr(line, "duration_ms=");

		if (d && strstr(line, "method=PUT path=/v1/node/" T_NODE) &&
		    strstr(line, "status=200"))
			beat = t_log_ts(line) - atoll(d + strlen("duration_ms="));
		else if (strstr(line, "node down: no heartbeat within the TTL") &&
			 strstr(line, "node=" T_NODE))
			down = t_log_ts(line);
	}
	fclose(f);
	return beat >= 0 && down >= 0 ? down - beat : -1;
}

/*
 * Join through failover, down after the TTL when the agent is killed,
 * takeover by a second agent, and the first one refused when it returns.
 */
static void test_join_down_takeover(void **state)
{
	struct t_env *t = *state;
	char ia[64], ib[64], tag[MODEL_INSTANCE_TAG_LEN + 1];
	struct agent_proc *a, *b;
	int64_t ms, killed;

	a = t_agent(t, 0, t->refuse_port, T_TOKEN);
	t_instance(a, ia, sizeof(ia));
	ms = t_wait_node(t, "ready", ia, 1, 30000);
	print_message(
	    "node ready on the server %lld ms after its plugin was healthy on the agent\n",
	    (long long)ms);
	assert_true(
	    agent_proc_wait_log(a, "server unreachable, failing over", 1, AGENT_PROC_LOG_MS));
	assert_true(agent_proc_wait_log(a, "msg=\"joined server\" server=http://127.0.0.1", 1,
					AGENT_PROC_LOG_MS));
	assert_true(server_proc_log_has(&t->s, "msg=\"node registered\" node=" T_NODE));
	/* Where the server would run controller RPCs through this agent. */
	t_node_address(t, t->addresses[0]);

	/* Killed: down once no heartbeat came for the TTL, never before. */
	killed = agent_proc_now_ms();
	assert_int_equal(agent_proc_stop(a, SIGKILL, 10000), 128 + SIGKILL);
	t_wait_node(t, "down", ia, 0, T_TTL_MS + 20000);
	ms = agent_proc_now_ms() - killed;
	/* The server logs the mark after its write, which the answer above may beat. */
	for (int64_t until = agent_proc_now_ms() + 10000;
	     !server_proc_log_has(&t->s, "node down: no heartbeat within the TTL") &&
	     agent_proc_now_ms() < until;)
		hpp_pause_ms(10);
	assert_true(server_proc_log_has(&t->s, "node down: no heartbeat within the TTL"));
	/*
	 * Never before: measured from the last heartbeat the server took, not
	 * from the kill. Under load the agent's last heartbeat was sent more
	 * than the 300 ms period before the kill (down came 1,234 ms after the
	 * kill was reaped, at load 21).
	 */
	print_message("node down %lld ms after the agent was killed, %lld ms after its last "
		      "heartbeat (ttl %d ms)\n",
		      (long long)ms, (long long)t_down_after_heartbeat(t), T_TTL_MS);
	/* Less 3 ms: three times in whole milliseconds, two of them wall-clock. */
	assert_true(t_down_after_heartbeat(t) >= T_TTL_MS - 3);

	/* Another agent with the same node name takes the node over once it is down. */
	b = t_agent(t, 1, 0, T_TOKEN);
	t_instance(b, ib, sizeof(ib));
	assert_string_not_equal(ia, ib);
	t_wait_node(t, "ready", ib, 1, 30000);
	assert_true(server_proc_log_has(&t->s, "node taken over by another agent instance"));
	t_node_address(t, t->addresses[1]);

	/* The first agent comes back while b holds the node: refused, said, nothing taken. */
	assert_int_equal(agent_proc_start(a), 0);
	assert_int_equal(agent_proc_wait_ready(a, AGENT_PROC_HP_START_MS), 0);
	assert_true(
	    agent_proc_wait_log(a, "another agent holds this node name", 1, AGENT_PROC_LOG_MS));
	model_node_instance_tag(ib, tag);
	assert_true(agent_proc_wait_log(a, tag, 1, AGENT_PROC_LOG_MS));
	/* Instance IDs are credentials: tags in logs, never the IDs. */
	assert_false(server_proc_log_has(&t->s, ia));
	assert_false(server_proc_log_has(&t->s, ib));
	assert_false(agent_proc_log_count(a, ia, 1) || agent_proc_log_count(a, ib, 1));
	assert_false(agent_proc_log_count(b, ia, 1) || agent_proc_log_count(b, ib, 1));
	t_wait_node(t, "ready", ib, 1, 5000);
	t_node_address(t, t->addresses[1]);
	/* a still serves its own API meanwhile. */
	assert_int_equal(agent_proc_http(a, "GET", "/v1/agent/self", NULL, NULL), 200);
}

/* A server that answers 500 to every request, until its socket is shut down. */
static void *t_failing(void *arg)
{
	static const char answer[] = "HTTP/1.1 500 Internal Server Error\r\n"
				     "Content-Type: application/json\r\nContent-Length: 48\r\n"
				     "Connection: close\r\n\r\n"
				     "{\"error\": \"store: disk I/O\", \"code\": \"io_error\"}";
	struct t_env *t = arg;
	char buf[8192];
	int fd;

	while ((fd = accept(t->failing_fd, NULL, NULL)) >= 0) {
		/*
		 * The answer, whatever was asked; then the rest of the request is
		 * drained until the client closes, so no unread byte turns the
		 * close into a reset that would hide the answer.
		 */
		if (read(fd, buf, sizeof(buf)) > 0 &&
		    write(fd, answer, sizeof(answer) - 1) == (ssize_t)sizeof(answer) - 1)
			__atomic_add_fetch(&t->failing_answers, 1, __ATOMIC_SEQ_CST);
		shutdown(fd, SHUT_WR);
		while (read(fd, buf, sizeof(buf)) > 0)
			;
		close(fd);
	}
	return NULL;
}

/* A first server that answers 500: failover at once to the second. */
static void test_failing_server(void **state)
{
	struct t_env *t = *state;
	struct agent_proc *a;
	char ia[64];

	assert_int_equal(pthread_create(&t->failing, NULL, t_failing, t), 0);
	t->failing_started = true;
	a = t_agent(t, 0, t->failing_port, T_TOKEN);
	t_instance(a, ia, sizeof(ia));
	t_wait_node(t, "ready", ia, 1, 30000);
	assert_true(
	    agent_proc_wait_log(a, "error=\"HTTP 500: store: disk I/O\"", 1, AGENT_PROC_LOG_MS));
	assert_true(__atomic_load_n(&t->failing_answers, __ATOMIC_SEQ_CST) >= 1);
}

/* A first server that takes connections and never answers: the request's deadline, then failover.
 */
static void test_silent_server(void **state)
{
	struct t_env *t = *state;
	struct agent_proc *a;
	char ia[64];
	int64_t ms;

	a = t_agent(t, 0, t->silent_port, T_TOKEN);
	t_instance(a, ia, sizeof(ia));
	ms = t_wait_node(t, "ready", ia, 1, 60000);
	print_message("node ready %lld ms after its plugin, past a silent first server\n",
		      (long long)ms);
	assert_true(
	    agent_proc_wait_log(a, "server unreachable, failing over", 1, AGENT_PROC_LOG_MS));
	assert_true(agent_proc_wait_log(a, "Operation timed out", 1, AGENT_PROC_LOG_MS));
}

/* The server restarts on an empty store; the agent keeps its mount and catches up. */
static void test_server_restart(void **state)
{
	struct t_env *t = *state;
	char ia[64], vol[64];
	struct agent_proc *a;
	int64_t ms;

	a = t_agent(t, 0, 0, T_TOKEN);
	t_instance(a, ia, sizeof(ia));
	t_wait_node(t, "ready", ia, 1, 30000);
	assert_int_equal(agent_proc_create_volume(a, "join-vol", vol), 0);
	assert_int_equal(agent_proc_mount(a, vol, "alloc-1", NULL), 200);

	assert_int_equal(server_proc_stop(&t->s, SIGTERM, 20000), 0);
	assert_true(agent_proc_wait_log(
	    a, "no server reachable; the agent keeps serving its mounts", 1, AGENT_PROC_LOG_MS));
	/* Alone, the agent serves its mounts as before. */
	assert_int_equal(agent_proc_mount_count(a), 1);
	assert_int_equal(agent_proc_mount(a, vol, "alloc-1", NULL), 200);

	/* A server on a fresh store knows nothing until the agent sends its fingerprint. */
	assert_int_equal(t_server_config(t, "d2"), 0);
	assert_int_equal(server_proc_start(&t->s), 0);
	assert_true(server_proc_wait_ready(&t->s, 30000));
	ms = t_wait_node(t, "ready", ia, 1, 60000);
	print_message("caught up %lld ms after the server answered again\n", (long long)ms);
	assert_int_equal(agent_proc_mount_count(a), 1);
	assert_int_equal(agent_proc_unmount(a, vol, "alloc-1"), 200);
}

/*
 * Issue 8 end to end: the server has no controller plugin of its own; the
 * agent joined by itself with its address, so the server creates a
 * volume through the controller the agent supervises.
 */
static void test_controller_through_joined_agent(void **state)
{
	static const char spec[] =
	    "{\"plugin_id\": \"" AGENT_PROC_HP_ID "\", \"capacity_min\": 1048576,"
	    " \"capabilities\": [{\"access_mode\": \"single-node-writer\","
	    " \"attachment_mode\": \"file-system\"}]}";
	struct t_env *t = *state;
	struct agent_proc *a;
	char ia[64];

	a = t_agent(t, 0, 0, T_TOKEN);
	t_instance(a, ia, sizeof(ia));
	t_wait_node(t, "ready", ia, 1, 30000);
	assert_int_equal(server_proc_http(&t->s, "PUT", "/v1/volume/v1/create", spec, NULL), 200);
	if (!server_proc_wait_field(&t->s, "/v1/volume/v1", "state", "ready", 60000)) {
		server_proc_dump_log(&t->s, "volume not ready");
		fail_msg("volume v1 not ready through the joined agent");
	}
	assert_true(agent_proc_wait_log(
	    a, "path=/v1/agent/controller/" AGENT_PROC_HP_ID "/CreateVolume status=200", 1,
	    AGENT_PROC_LOG_MS));
	assert_int_equal(server_proc_http(&t->s, "DELETE", "/v1/volume/v1", NULL, NULL), 200);
}

/* A wrong token: refused, logged clearly without the token, retried slowly. */
static void test_wrong_token(void **state)
{
	struct t_env *t = *state;
	struct agent_proc *a;

	a = t_agent(t, 0, 0, T_WRONG);
	assert_true(agent_proc_wait_log(a, "server refused the agent's token (check server_token)",
					1, AGENT_PROC_LOG_MS));
	assert_true(agent_proc_wait_log(a, "HTTP 403: unknown token", 1, AGENT_PROC_LOG_MS));
	t_wait_node(t, NULL, NULL, -1, 1000);
	/* Slowly: one refusal, not a retry loop (the slow delay is about a minute). */
	assert_false(agent_proc_log_count(a, "server refused the agent's token", 2));
	assert_int_equal(agent_proc_http(a, "GET", "/v1/agent/self", NULL, NULL), 200);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_join_down_takeover, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_server_restart, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_silent_server, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_failing_server, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_controller_through_joined_agent, t_setup,
					    t_teardown),
	    cmocka_unit_test_setup_teardown(test_wrong_token, t_setup, t_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
