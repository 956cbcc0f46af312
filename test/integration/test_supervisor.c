/*
 * Integration tests of the plugin supervisor on a real libuv loop with an
 * in-memory registry and a scripted CSI client (no gRPC):
 *   - an external plugin is probed, registered under a stable instance ID,
 *     reported unhealthy and healthy again, never restarted, and
 *     deregistered when removed; a monolith registers and deregisters both
 *     types;
 *   - a supervised plugin whose socket never appears fails after the
 *     socket timeout and is restarted with a growing backoff; its output
 *     goes to a log capped by rotation; the process sees CSI_ENDPOINT and
 *     the expanded ${NODE_NAME}; shutdown kills it and completes.
 * The loop runs until a condition holds or a deadline passes (no sleeps).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <spawn.h>
#include <unistd.h>

#include <cmocka.h>

#include "plugins/supervisor.h"
#include "proc_guard.h"

#define T_EVENTS_MAX 256

struct t_event {
	enum supervisor_event_kind kind;
	char instance[SUPERVISOR_INSTANCE_ID_MAX];
	int64_t delay_ms;
	char message[128];
};

struct t_ctx {
	char dir[64];
	uv_loop_t loop;
	struct registry *reg;
	struct supervisor *sv;
	atomic_bool healthy; /* what the fake plugin answers to Probe */
	struct t_event events[T_EVENTS_MAX];
	int nevents;
	bool done;
};

/* ---- a scripted CSI client ---- */

struct t_client {
	struct csi_client base;
	struct t_ctx *t;
};

static int t_call(struct csi_client *c, enum csi_rpc rpc, const ProtobufCMessage *req,
		  ProtobufCMessage **resp, int64_t timeout_ms, struct csi_status *st)
{
	struct t_client *tc = (struct t_client *)c;

	*resp = NULL;
	st->code = CSI_OK;
	st->message[0] = '\0';
	if (rpc == CSI_RPC_GET_PLUGIN_INFO) {
		Csi__V1__GetPluginInfoResponse r = CSI__V1__GET_PLUGIN_INFO_RESPONSE__INIT;

		r.name = (char *)"fake.csi";
		r.vendor_version = (char *)"1";
		*resp = csi_msg_dup(&r.base);
		return 0;
	}
	if (rpc == CSI_RPC_PROBE && atomic_load(&tc->t->healthy)) {
		Csi__V1__ProbeResponse r = CSI__V1__PROBE_RESPONSE__INIT;

		*resp = csi_msg_dup(&r.base);
		return 0;
	}
	st->code = CSI_UNAVAILABLE;
	snprintf(st->message, sizeof(st->message), "scripted failure");
	return CSID_EUNAVAIL;
}

static void t_client_free(struct csi_client *c)
{
	free(c);
}

static int t_connect(void *ctx, const char *endpoint, struct csi_client **out, struct err *e)
{
	struct t_client *c = calloc(1, sizeof(*c));

	if (!c)
		return err_set(e, CSID_ENOMEM, "out of memory");
	c->base.call = t_call;
	c->base.free = t_client_free;
	c->base.endpoint = "fake";
	c->t = ctx;
	*out = &c->base;
	return 0;
}

/* ---- loop driving ---- */

static void t_on_event(void *ctx, const struct supervisor_event *ev)
{
	struct t_ctx *t = ctx;
	struct t_event *te;

	if (t->nevents >= T_EVENTS_MAX)
		return;
	te = &t->events[t->nevents++];
	te->kind = ev->kind;
	te->delay_ms = ev->delay_ms;
	snprintf(te->instance, sizeof(te->instance), "%s", ev->instance_id);
	snprintf(te->message, sizeof(te->message), "%s", ev->message);
}

static int t_count(struct t_ctx *t, enum supervisor_event_kind kind)
{
	int n = 0;

	for (int i = 0; i < t->nevents; i++)
		n += t->events[i].kind == kind;
	return n;
}

static void t_tick(uv_timer_t *h)
{
}

/* Runs the loop until cond(t) or timeout_ms; returns whether cond held. */
static bool t_run_until(struct t_ctx *t, bool (*cond)(struct t_ctx *t, const void *arg),
			const void *arg, int64_t timeout_ms)
{
	uv_timer_t tick;
	uint64_t deadline;
	bool ok;

	uv_update_time(&t->loop);
	deadline = uv_now(&t->loop) + (uint64_t)timeout_ms;
	uv_timer_init(&t->loop, &tick);
	uv_timer_start(&tick, t_tick, 5, 5);
	while (!(ok = cond(t, arg)) && uv_now(&t->loop) < deadline)
		uv_run(&t->loop, UV_RUN_ONCE);
	uv_close((uv_handle_t *)&tick, NULL);
	uv_run(&t->loop, UV_RUN_NOWAIT);
	return ok;
}

static bool t_has_events(struct t_ctx *t, const void *arg)
{
	const int *want = arg; /* {kind, count} */

	return t_count(t, (enum supervisor_event_kind)want[0]) >= want[1];
}

static bool t_wait_event(struct t_ctx *t, enum supervisor_event_kind kind, int count,
			 int64_t timeout_ms)
{
	int want[2] = {(int)kind, count};

	return t_run_until(t, t_has_events, want, timeout_ms);
}

static bool t_is_done(struct t_ctx *t, const void *arg)
{
	return t->done;
}

static void t_done(void *ctx)
{
	((struct t_ctx *)ctx)->done = true;
}

static int setup(void **state)
{
	struct t_ctx *t = calloc(1, sizeof(*t));
	struct supervisor_config sc = {0};
	struct err e;

	if (!t)
		return -1;
	*state = t;
	snprintf(t->dir, sizeof(t->dir), "/tmp/csv-XXXXXX");
	if (!mkdtemp(t->dir))
		return -1;
	/* Should the test die, its plugin processes (cwd under dir) die with it. */
	proc_guard_track_dir(t->dir);
	if (uv_loop_init(&t->loop) != 0 || registry_new(NULL, NULL, &t->reg, &e) != 0)
		return -1;
	atomic_store(&t->healthy, true);
	sc.loop = &t->loop;
	sc.data_dir = t->dir;
	sc.node_name = "node-x";
	sc.registry = t->reg;
	sc.connect = t_connect;
	sc.connect_ctx = t;
	sc.on_event = t_on_event;
	sc.on_event_ctx = t;
	sc.socket_timeout_ms = 150;
	sc.health_timeout_ms = 300;
	sc.probe_interval_ms = 20;
	sc.unhealthy_threshold_ms = 60000;
	sc.backoff_base_ms = 40;
	sc.backoff_max_ms = 400;
	sc.stop_grace_ms = 1000;
	sc.log_max_bytes = 8192;
	return supervisor_new(&sc, &t->sv, &e) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	struct t_ctx *t = *state;
	char cmd[128];

	if (!t)
		return 0;
	if (t->sv) {
		if (!t->done)
			supervisor_shutdown(t->sv, t_done, t);
		t_run_until(t, t_is_done, NULL, 10000);
		supervisor_free(t->sv);
	}
	uv_run(&t->loop, UV_RUN_NOWAIT);
	uv_loop_close(&t->loop);
	registry_free(t->reg);
	/* The directory holds only plain files and directories made by this test. */
	snprintf(cmd, sizeof(cmd), "%s", t->dir);
	if (cmd[0] == '/' && strncmp(cmd, "/tmp/csv-", 9) == 0) {
		char *argv[] = {(char *)"rm", (char *)"-rf", cmd, NULL};
		pid_t pid;

		if (posix_spawnp(&pid, "rm", NULL, NULL, argv, NULL) == 0)
			waitpid(pid, NULL, 0);
	}
	proc_guard_untrack_dir(t->dir);
	free(t);
	return 0;
}

/* Creates a bound unix socket file at path (nobody needs to answer: probes are fake). */
static int t_make_socket(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		return -1;
	return fd;
}

static bool t_registered(struct t_ctx *t, enum registry_type type, const char *id, char *inst)
{
	struct registry_instance ri;

	if (registry_active(t->reg, type, id, &ri) != 0)
		return false;
	if (inst)
		snprintf(inst, SUPERVISOR_INSTANCE_ID_MAX, "%s", ri.instance_id);
	return true;
}

static void test_external_plugin(void **state)
{
	struct t_ctx *t = *state;
	struct config_plugin def = {0};
	char sock[128], inst[SUPERVISOR_INSTANCE_ID_MAX], inst2[SUPERVISOR_INSTANCE_ID_MAX];
	struct supervisor_status *st = NULL;
	size_t n = 0;
	struct err e;
	int fd;

	snprintf(sock, sizeof(sock), "%s/ext.sock", t->dir);
	def.id = (char *)"ext.csi";
	def.type = CONFIG_PLUGIN_NODE;
	def.socket = sock;
	assert_int_equal(supervisor_apply(t->sv, &def, 1, &e), 0);
	/* No socket yet: it waits, without failing or restarting. */
	assert_false(t_wait_event(t, SUPERVISOR_EVENT_REGISTERED, 1, 300));
	assert_int_equal(t_count(t, SUPERVISOR_EVENT_RESTARTING), 0);
	fd = t_make_socket(sock);
	assert_true(fd >= 0);
	assert_true(t_wait_event(t, SUPERVISOR_EVENT_REGISTERED, 1, 5000));
	assert_true(t_registered(t, REGISTRY_NODE, "ext.csi", inst));
	assert_false(t_registered(t, REGISTRY_CONTROLLER, "ext.csi", NULL));
	assert_int_equal(strncmp(inst, "ext-", 4), 0);
	assert_int_equal(supervisor_snapshot(t->sv, &st, &n), 0);
	assert_int_equal(n, 1);
	assert_true(st[0].external);
	assert_true(st[0].healthy);
	assert_string_equal(st[0].state, "running");
	free(st);

	/* Health changes are events; an external plugin is never restarted. */
	atomic_store(&t->healthy, false);
	assert_true(t_wait_event(t, SUPERVISOR_EVENT_UNHEALTHY, 1, 5000));
	atomic_store(&t->healthy, true);
	assert_true(t_wait_event(t, SUPERVISOR_EVENT_HEALTHY, 1, 5000));
	assert_int_equal(t_count(t, SUPERVISOR_EVENT_RESTARTING), 0);
	assert_true(t_registered(t, REGISTRY_NODE, "ext.csi", inst2));
	assert_string_equal(inst, inst2);

	/* A monolith now: a new instance registers both types, the old one goes. */
	def.type = CONFIG_PLUGIN_MONOLITH;
	assert_int_equal(supervisor_apply(t->sv, &def, 1, &e), 0);
	assert_true(t_wait_event(t, SUPERVISOR_EVENT_STOPPED, 1, 5000));
	assert_true(t_registered(t, REGISTRY_CONTROLLER, "ext.csi", inst2));
	assert_string_not_equal(inst, inst2);
	assert_true(t_registered(t, REGISTRY_NODE, "ext.csi", inst));
	assert_string_equal(inst, inst2);

	/* Removed: both registrations go. */
	assert_int_equal(supervisor_apply(t->sv, NULL, 0, &e), 0);
	assert_true(t_wait_event(t, SUPERVISOR_EVENT_STOPPED, 2, 5000));
	assert_false(t_registered(t, REGISTRY_NODE, "ext.csi", NULL));
	assert_false(t_registered(t, REGISTRY_CONTROLLER, "ext.csi", NULL));
	close(fd);
}

static bool t_log_rotated(struct t_ctx *t, const void *arg)
{
	char path[256];
	struct stat st;

	snprintf(path, sizeof(path), "%s/plugin.log.1", (const char *)arg);
	return stat(path, &st) == 0;
}

static void test_supervised_no_socket(void **state)
{
	struct t_ctx *t = *state;
	char *args[] = {(char *)"-c",
			(char *)"echo endpoint=$CSI_ENDPOINT node=$NODE_ARG >&2; "
				"i=0; while [ $i -lt 250 ]; do "
				"echo xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx >&2; "
				"i=$((i+1)); done; exec sleep 60"};
	struct config_env env = {(char *)"NODE_ARG", (char *)"${NODE_NAME}"};
	struct config_plugin def = {0};
	struct supervisor_status *st = NULL;
	char first[SUPERVISOR_INSTANCE_ID_MAX], dir[256], path[300], line[512];
	size_t n = 0;
	struct err e;
	FILE *f;

	def.id = (char *)"silent.csi";
	def.type = CONFIG_PLUGIN_NODE;
	def.command = (char *)"/bin/sh";
	def.args = args;
	def.nargs = 2;
	def.env = &env;
	def.nenv = 1;
	assert_int_equal(supervisor_apply(t->sv, &def, 1, &e), 0);
	assert_true(t_wait_event(t, SUPERVISOR_EVENT_STARTED, 1, 2000));
	snprintf(first, sizeof(first), "%s", t->events[0].instance);
	snprintf(dir, sizeof(dir), "%s/plugins/silent.csi/%s", t->dir, first);
	/* Its output is captured and capped: 12 KB of stderr against an 8 KiB cap. */
	assert_true(t_run_until(t, t_log_rotated, dir, 5000));
	/* The socket never appears: failed, then restarted with a growing backoff. */
	assert_true(t_wait_event(t, SUPERVISOR_EVENT_RESTARTING, 3, 10000));
	for (int i = 0, k = 0; i < t->nevents; i++) {
		const struct t_event *ev = &t->events[i];
		int64_t full = 40LL << k;

		if (ev->kind != SUPERVISOR_EVENT_RESTARTING)
			continue;
		assert_true(ev->delay_ms >= full - full / 4 && ev->delay_ms <= full);
		if (++k == 3)
			break;
	}
	assert_true(t_count(t, SUPERVISOR_EVENT_FAILED) >= 3);
	assert_non_null(strstr(t->events[1].message, "socket did not appear"));
	assert_false(t_registered(t, REGISTRY_NODE, "silent.csi", NULL));
	assert_int_equal(supervisor_snapshot(t->sv, &st, &n), 0);
	assert_true(st[0].restarts >= 2);
	assert_true(st[0].attempt >= 2);
	free(st);
	/* The log kept its first lines in plugin.log.1 (rotated once). */
	snprintf(path, sizeof(path), "%s/plugin.log.1", dir);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(line, sizeof(line), f));
	fclose(f);
	snprintf(path, sizeof(path), "%s/plugin.log", dir);
	{
		struct stat sb;

		assert_int_equal(stat(path, &sb), 0);
		assert_true(sb.st_size <= 8192);
	}
	assert_non_null(strstr(line, "node=node-x"));
	assert_non_null(strstr(line, "endpoint=unix:///tmp/csv-"));
	assert_non_null(strstr(line, "/csi.sock"));
	/* Shutdown stops whatever runs and completes. */
	assert_int_equal(supervisor_shutdown(t->sv, t_done, t), 0);
	assert_true(t_run_until(t, t_is_done, NULL, 10000));
	assert_int_equal(supervisor_shutdown(t->sv, t_done, t), CSID_EPRECOND);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_external_plugin, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_supervised_no_socket, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
