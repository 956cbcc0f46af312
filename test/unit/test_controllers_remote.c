/*
 * Controllers behind agents: the choice of an agent for a controller
 * plugin (healthy candidates only, the last one preferred, failover away
 * from an agent that failed, clear errors when there is none), and the
 * encodings of one controller RPC over the agent API (csi_remote.h):
 * round trips, every gRPC code, and malformed answers refused; the seam
 * itself on the memory store: host controllers first, agents for the
 * rest, failover after a transport failure, then the new one kept.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "csi/csi_remote.h"
#include "server/controllers_remote.h"

#define TCR_PLUGIN "hostpath.csi.csid.dev"

static char *tcr_caps_publish[] = {"CREATE_DELETE_VOLUME", "PUBLISH_UNPUBLISH_VOLUME"};

/* A node with one controller plugin of TCR_PLUGIN. */
static void tcr_node(struct model_node *n, struct model_node_plugin *p, const char *id, bool ready,
		     bool healthy, const char *address)
{
	memset(n, 0, sizeof(*n));
	memset(p, 0, sizeof(*p));
	p->plugin_id = TCR_PLUGIN;
	p->type = MODEL_PLUGIN_CONTROLLER;
	p->healthy = healthy;
	p->health = healthy ? "" : "Probe: not ready";
	p->caps = tcr_caps_publish;
	p->ncaps = 2;
	n->id = (char *)id;
	n->status = ready ? MODEL_NODE_READY : MODEL_NODE_DOWN;
	n->address = (char *)address;
	n->plugins = p;
	n->nplugins = 1;
}

struct tcr_nodes {
	struct model_node n[4];
	struct model_node_plugin p[4];
	struct model_node *ptr[4];
};

/* a: healthy, b: healthy, c: unhealthy, d: node down. */
static void tcr_four(struct tcr_nodes *t)
{
	tcr_node(&t->n[0], &t->p[0], "a", true, true, "127.0.0.1:1");
	tcr_node(&t->n[1], &t->p[1], "b", true, true, "http://127.0.0.1:2");
	tcr_node(&t->n[2], &t->p[2], "c", true, false, "127.0.0.1:3");
	tcr_node(&t->n[3], &t->p[3], "d", false, true, "127.0.0.1:4");
	for (int i = 0; i < 4; i++)
		t->ptr[i] = &t->n[i];
}

static void test_choose_healthy_and_caps(void **state)
{
	struct tcr_nodes t;
	size_t chosen = 99;
	uint64_t caps = 0;
	struct err e;

	tcr_four(&t);
	assert_int_equal(
	    controllers_remote_choose(t.ptr, 4, TCR_PLUGIN, NULL, NULL, &chosen, &caps, &e), 0);
	assert_int_equal(chosen, 0);
	assert_true(caps &
		    ((uint64_t)1
		     << CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_VOLUME));
	assert_true(
	    caps &
	    ((uint64_t)1
	     << CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_UNPUBLISH_VOLUME));
	assert_false(
	    caps & ((uint64_t)1
		    << CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_SNAPSHOT));
	/* The last one is preferred while it stays a candidate. */
	assert_int_equal(
	    controllers_remote_choose(t.ptr, 4, TCR_PLUGIN, "b", NULL, &chosen, &caps, &e), 0);
	assert_int_equal(chosen, 1);
	/* An unhealthy or down last one is never chosen. */
	assert_int_equal(
	    controllers_remote_choose(t.ptr, 4, TCR_PLUGIN, "c", NULL, &chosen, &caps, &e), 0);
	assert_int_equal(chosen, 0);
	assert_int_equal(
	    controllers_remote_choose(t.ptr, 4, TCR_PLUGIN, "d", NULL, &chosen, &caps, &e), 0);
	assert_int_equal(chosen, 0);
}

static void test_choose_fails_over(void **state)
{
	struct tcr_nodes t;
	size_t chosen = 99;
	uint64_t caps = 0;
	struct err e;

	tcr_four(&t);
	/* The last one failed at the transport: another is taken. */
	assert_int_equal(
	    controllers_remote_choose(t.ptr, 4, TCR_PLUGIN, "a", "a", &chosen, &caps, &e), 0);
	assert_int_equal(chosen, 1);
	assert_int_equal(
	    controllers_remote_choose(t.ptr, 4, TCR_PLUGIN, "b", "b", &chosen, &caps, &e), 0);
	assert_int_equal(chosen, 0);
	/* The failed one is still tried when nothing else is left. */
	t.p[1].healthy = false;
	assert_int_equal(
	    controllers_remote_choose(t.ptr, 4, TCR_PLUGIN, "a", "a", &chosen, &caps, &e), 0);
	assert_int_equal(chosen, 0);
	/* A node without an agent address is no candidate. */
	t.n[0].address = NULL;
	assert_int_equal(
	    controllers_remote_choose(t.ptr, 4, TCR_PLUGIN, "a", NULL, &chosen, &caps, &e),
	    CSID_EUNAVAIL);
	assert_non_null(strstr(e.msg, "a: node has no agent address"));
}

static void test_choose_none(void **state)
{
	struct tcr_nodes t;
	size_t chosen = 99;
	uint64_t caps = 0;
	struct err e;

	tcr_four(&t);
	t.p[0].healthy = t.p[1].healthy = false;
	err_clear(&e);
	assert_int_equal(
	    controllers_remote_choose(t.ptr, 4, TCR_PLUGIN, NULL, NULL, &chosen, &caps, &e),
	    CSID_EUNAVAIL);
	assert_string_equal(e.msg, "no healthy controller for plugin " TCR_PLUGIN
				   ": a: unhealthy; b: unhealthy; c: Probe: not ready; d: "
				   "node down");
	assert_int_equal(chosen, 99);
	/* Nobody lists the plugin (a node plugin of that ID does not count). */
	t.p[0].type = MODEL_PLUGIN_NODE;
	assert_int_equal(
	    controllers_remote_choose(t.ptr, 1, TCR_PLUGIN, NULL, NULL, &chosen, &caps, &e),
	    CSID_ENOTFOUND);
	assert_string_equal(e.msg, "no controller plugin " TCR_PLUGIN " on any node");
	assert_int_equal(
	    controllers_remote_choose(t.ptr, 0, TCR_PLUGIN, NULL, NULL, &chosen, &caps, &e),
	    CSID_ENOTFOUND);
}

static void test_allowed_and_deadline(void **state)
{
	int64_t ms = 0;
	struct err e;

	assert_true(csi_remote_allowed(CSI_RPC_CREATE_VOLUME));
	assert_true(csi_remote_allowed(CSI_RPC_CONTROLLER_PUBLISH_VOLUME));
	assert_true(csi_remote_allowed(CSI_RPC_GET_PLUGIN_CAPABILITIES));
	assert_false(csi_remote_allowed(CSI_RPC_NODE_PUBLISH_VOLUME));
	assert_false(csi_remote_allowed(CSI_RPC_CREATE_VOLUME_GROUP_SNAPSHOT));
	assert_false(csi_remote_allowed(CSI_RPC_COUNT));
	assert_int_equal(csi_remote_deadline_parse(NULL, 1500, &ms, &e), 0);
	assert_int_equal(ms, 1500);
	assert_int_equal(csi_remote_deadline_parse("250", 1500, &ms, &e), 0);
	assert_int_equal(ms, 250);
	assert_int_equal(csi_remote_deadline_parse("99999999999", 1500, &ms, &e), 0);
	assert_int_equal(ms, CSI_REMOTE_DEADLINE_MAX_MS);
	assert_int_equal(csi_remote_deadline_parse("0", 1, &ms, &e), CSID_EINVAL);
	assert_int_equal(csi_remote_deadline_parse("-5", 1, &ms, &e), CSID_EINVAL);
	assert_int_equal(csi_remote_deadline_parse("5s", 1, &ms, &e), CSID_EINVAL);
	assert_int_equal(csi_remote_deadline_parse("", 1, &ms, &e), CSID_EINVAL);
	assert_int_equal(csi_remote_deadline_parse("1234567890123456789", 1, &ms, &e), CSID_EINVAL);
}

static void test_request_roundtrip(void **state)
{
	Csi__V1__CreateVolumeRequest req = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	Csi__V1__CreateVolumeRequest *got;
	ProtobufCMessage *m = NULL;
	uint8_t buf[256];
	size_t n;
	struct err e;

	req.name = "vol-1";
	n = protobuf_c_message_pack(&req.base, buf);
	assert_int_equal(csi_remote_request_decode(CSI_RPC_CREATE_VOLUME, buf, n, &m, &e), 0);
	got = (Csi__V1__CreateVolumeRequest *)m;
	assert_string_equal(got->name, "vol-1");
	csi_msg_free(m);
	/* Garbage is refused without quoting it. */
	assert_int_equal(
	    csi_remote_request_decode(CSI_RPC_CREATE_VOLUME, "\xff\xff\xff", 3, &m, &e),
	    CSID_EINVAL);
	assert_null(m);
	assert_null(strstr(e.msg, "\xff"));
}

/* Encodes st + resp, decodes it back as rpc. */
static int tcr_answer(enum csi_rpc rpc, const struct csi_status *st, const ProtobufCMessage *resp,
		      ProtobufCMessage **out, struct csi_status *got)
{
	char *text = NULL;
	struct err e;
	int rc;

	assert_int_equal(csi_remote_answer_encode(st, resp, &text, &e), 0);
	rc = csi_remote_answer_decode(rpc, text, strlen(text), out, got, &e);
	free(text);
	return rc;
}

static void test_answer_roundtrip(void **state)
{
	Csi__V1__CreateVolumeResponse resp = CSI__V1__CREATE_VOLUME_RESPONSE__INIT;
	Csi__V1__Volume vol = CSI__V1__VOLUME__INIT;
	Csi__V1__ControllerPublishVolumeResponse empty =
	    CSI__V1__CONTROLLER_PUBLISH_VOLUME_RESPONSE__INIT;
	Csi__V1__CreateVolumeResponse *cv;
	struct csi_status st = {0}, got;
	ProtobufCMessage *out = NULL;
	char id[64];

	/* Every length mod 3, so base64 padding of 0, 1 and 2 is covered. */
	for (int len = 1; len <= 12; len++) {
		memset(id, 'x', (size_t)len);
		id[len] = '\0';
		id[0] = (char)('a' + len);
		vol.volume_id = id;
		vol.capacity_bytes = 1 << len;
		resp.volume = &vol;
		memset(&got, 0x55, sizeof(got));
		assert_int_equal(tcr_answer(CSI_RPC_CREATE_VOLUME, &st, &resp.base, &out, &got), 0);
		assert_int_equal(got.code, CSI_OK);
		assert_string_equal(got.message, "");
		cv = (Csi__V1__CreateVolumeResponse *)out;
		assert_string_equal(cv->volume->volume_id, id);
		assert_int_equal(cv->volume->capacity_bytes, 1 << len);
		csi_msg_free(out);
	}
	/* An empty response packs to no bytes: still OK with a message. */
	assert_int_equal(
	    tcr_answer(CSI_RPC_CONTROLLER_PUBLISH_VOLUME, &st, &empty.base, &out, &got), 0);
	assert_non_null(out);
	csi_msg_free(out);
	/* Every error code comes back with its message and no response. */
	for (int code = 1; code <= CSI_UNAUTHENTICATED; code++) {
		st.code = code;
		snprintf(st.message, sizeof(st.message), "volume \"v\" failed: code %d", code);
		assert_int_equal(tcr_answer(CSI_RPC_DELETE_VOLUME, &st, NULL, &out, &got), 0);
		assert_int_equal(got.code, code);
		assert_string_equal(got.message, st.message);
		assert_null(out);
	}
}

static void test_answer_malformed(void **state)
{
	static const char *const bad[] = {
	    "",
	    "[]",
	    "{\"code\":\"OK\"}",
	    "{\"code\":\"NOPE\",\"message\":\"\"}",
	    "{\"code\":5,\"message\":\"\"}",
	    "{\"code\":\"NOT_FOUND\",\"message\":7}",
	    "{\"code\":\"OK\",\"response\":\"abc\"}",
	    "{\"code\":\"OK\",\"response\":\"a=bc\"}",
	    "{\"code\":\"OK\",\"response\":\"ab\\u0000c\"}",
	    "{\"code\":\"OK\",\"response\":\"/////w==\"}",
	    "{\"code\":\"OK\",\"response\":1}",
	    "{\"code\":\"OK\",\"code\":\"OK\",\"response\":\"\"}",
	};
	struct csi_status st = {.code = 77};
	ProtobufCMessage *out = NULL;
	struct err e;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err_clear(&e);
		assert_int_equal(csi_remote_answer_decode(CSI_RPC_CREATE_VOLUME, bad[i],
							  strlen(bad[i]), &out, &st, &e),
				 CSID_EPROTO);
		assert_null(out);
		assert_int_equal(st.code, 77);
		assert_non_null(strstr(e.msg, "controller answer"));
	}
	/* A long message is cut to the status buffer. */
	{
		char big[2048];

		snprintf(big, sizeof(big), "{\"code\":\"ABORTED\",\"message\":\"%0600d\"}", 0);
		assert_int_equal(csi_remote_answer_decode(CSI_RPC_CREATE_VOLUME, big, strlen(big),
							  &out, &st, &e),
				 0);
		assert_int_equal(st.code, CSI_ABORTED);
		assert_int_equal(strlen(st.message), CSI_STATUS_MSG_MAX - 1);
	}
}

/* A bare client to a port nobody listens on: UNAVAILABLE, with the node named. */
static void test_client_unreachable(void **state)
{
	Csi__V1__DeleteVolumeRequest req = CSI__V1__DELETE_VOLUME_REQUEST__INIT;
	Csi__V1__DeleteVolumeResponse *resp = NULL;
	struct csi_client *c = NULL;
	struct csi_status st;
	struct err e;

	assert_int_equal(
	    controllers_remote_client_new("127.0.0.1:1", "n1", TCR_PLUGIN, "secret-token", &c, &e),
	    0);
	req.volume_id = "v";
	assert_int_equal(csi_delete_volume(c, &req, &resp, 2000, &st), CSID_EUNAVAIL);
	assert_int_equal(st.code, CSI_UNAVAILABLE);
	assert_non_null(strstr(st.message, "agent on node n1 (http://127.0.0.1:1)"));
	assert_null(strstr(st.message, "secret-token"));
	assert_null(resp);
	/* Node RPCs never go through an agent. */
	{
		Csi__V1__NodeGetInfoRequest ni = CSI__V1__NODE_GET_INFO_REQUEST__INIT;
		Csi__V1__NodeGetInfoResponse *nr = NULL;

		assert_int_equal(csi_node_get_info(c, &ni, &nr, 2000, &st), CSID_EINVAL);
		assert_null(nr);
	}
	csi_client_free(c);
	assert_int_equal(controllers_remote_client_new("", "n1", TCR_PLUGIN, NULL, &c, &e),
			 CSID_EINVAL);
	assert_null(c);
}

/* One HTTP exchange on a loopback listener (or a unix socket), served by a thread. */
struct tcr_agent {
	int fd;
	int port;
	pid_t caller; /* the thread whose policy is read while its request is served */
	int caller_policy;
	char line[256]; /* the request line it got */
	pthread_t th;
};

/* Reads one request (headers and Content-Length body), notes the caller's policy, answers. */
static void *tcr_agent_main(void *arg)
{
	static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
				     "Content-Length: 37\r\nConnection: close\r\n\r\n"
				     "{\"code\":\"NOT_FOUND\",\"message\":\"gone\"}";
	struct tcr_agent *a = arg;
	char buf[8192];
	size_t n = 0;
	int c = accept(a->fd, NULL, NULL);

	while (c >= 0 && n < sizeof(buf) - 1) {
		const char *end, *cl;
		ssize_t got = read(c, buf + n, sizeof(buf) - 1 - n);

		if (got <= 0)
			break;
		n += (size_t)got;
		buf[n] = '\0';
		end = strstr(buf, "\r\n\r\n");
		cl = strcasestr(buf, "content-length:");
		if (end && (!cl || n >= (size_t)(end + 4 - buf) + strtoul(cl + 15, NULL, 10)))
			break;
	}
	/* The caller is blocked in its request right now. */
	a->caller_policy = sched_getscheduler(a->caller);
	buf[n] = '\0';
	snprintf(a->line, sizeof(a->line), "%.*s", (int)strcspn(buf, "\r\n"), buf);
	if (c >= 0 && write(c, answer, sizeof(answer) - 1) < 0)
		a->caller_policy = -2;
	if (c >= 0)
		close(c);
	return NULL;
}

/* Listens on loopback TCP, or on the unix socket path when it is not NULL. */
static void tcr_agent_start_at(struct tcr_agent *a, const char *path)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct sockaddr_un su = {.sun_family = AF_UNIX};
	socklen_t len = sizeof(sa);

	a->fd = socket(path ? AF_UNIX : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(a->fd >= 0);
	if (path) {
		snprintf(su.sun_path, sizeof(su.sun_path), "%s", path);
		assert_int_equal(bind(a->fd, (struct sockaddr *)&su, sizeof(su)), 0);
	} else {
		assert_int_equal(bind(a->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	}
	assert_int_equal(listen(a->fd, 4), 0);
	if (!path) {
		assert_int_equal(getsockname(a->fd, (struct sockaddr *)&sa, &len), 0);
		a->port = ntohs(sa.sin_port);
	}
	a->line[0] = '\0';
	a->caller = gettid();
	a->caller_policy = -1;
	assert_int_equal(pthread_create(&a->th, NULL, tcr_agent_main, a), 0);
}

static void tcr_agent_start(struct tcr_agent *a)
{
	tcr_agent_start_at(a, NULL);
}

static void tcr_set_policy(int policy)
{
	struct sched_param sp = {.sched_priority = 0};

	assert_int_equal(pthread_setschedparam(pthread_self(), policy, &sp), 0);
}

/*
 * A controller RPC from a SCHED_BATCH thread (a reconciler or HTTP
 * worker) waits for the agent's answer as SCHED_OTHER, so that the answer
 * wakes it at once, and the thread is a batch thread again after it
 * (util/sched_wait.h).
 */
static void test_client_waits_as_other(void **state)
{
	Csi__V1__DeleteVolumeRequest req = CSI__V1__DELETE_VOLUME_REQUEST__INIT;
	struct tcr_agent a;
	struct csi_client *c = NULL;
	struct csi_status st;
	char addr[64];
	struct err e;

	tcr_agent_start(&a);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", a.port);
	assert_int_equal(controllers_remote_client_new(addr, "n1", TCR_PLUGIN, "t", &c, &e), 0);
	req.volume_id = "v";
	tcr_set_policy(SCHED_BATCH);
	assert_int_equal(csi_delete_volume(c, &req, NULL, 5000, &st), CSID_ENOTFOUND);
	assert_int_equal(sched_getscheduler(0), SCHED_BATCH);
	tcr_set_policy(SCHED_OTHER);
	assert_int_equal(pthread_join(a.th, NULL), 0);
	close(a.fd);
	csi_client_free(c);
	assert_int_equal(st.code, CSI_NOT_FOUND);
	assert_int_equal(a.caller_policy, SCHED_OTHER);
	(void)state;
}

/*
 * An agent that gave the servers its unix socket ("unix:/PATH", a server on
 * its host): the RPC goes over the socket, to the same path as over TCP.
 */
static void test_client_unix_socket(void **state)
{
	Csi__V1__DeleteVolumeRequest req = CSI__V1__DELETE_VOLUME_REQUEST__INIT;
	char dir[] = "/tmp/csid-tcr-XXXXXX", path[64], addr[80];
	struct tcr_agent a;
	struct csi_client *c = NULL;
	struct csi_status st;
	struct err e;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/agent.sock", dir);
	snprintf(addr, sizeof(addr), "unix:%s", path);
	tcr_agent_start_at(&a, path);
	assert_int_equal(controllers_remote_client_new(addr, "n1", TCR_PLUGIN, "t", &c, &e), 0);
	req.volume_id = "v";
	assert_int_equal(csi_delete_volume(c, &req, NULL, 5000, &st), CSID_ENOTFOUND);
	assert_int_equal(pthread_join(a.th, NULL), 0);
	close(a.fd);
	unlink(path);
	rmdir(dir);
	csi_client_free(c);
	assert_int_equal(st.code, CSI_NOT_FOUND);
	assert_string_equal(a.line,
			    "POST /v1/agent/controller/" TCR_PLUGIN "/DeleteVolume HTTP/1.1");
	(void)state;
}

/* A host seam that runs "host.plugin", starts "starting.plugin" and knows no other. */
struct tcr_host {
	struct csi_client client;
	int acquired, released;
};

static int tcr_host_acquire(void *ctx, const char *plugin_id, struct csi_client **client,
			    uint64_t *caps, struct err *e)
{
	struct tcr_host *h = ctx;

	if (strcmp(plugin_id, "host.plugin") == 0) {
		h->acquired++;
		*client = &h->client;
		*caps = 1;
		return 0;
	}
	if (strcmp(plugin_id, "starting.plugin") == 0)
		return err_set(e, CSID_EUNAVAIL, "controller plugin %s: not registered yet",
			       plugin_id);
	return err_set(e, CSID_ENOTFOUND, "no controller plugin %s on this server", plugin_id);
}

static void tcr_host_release(void *ctx, const char *plugin_id, struct csi_client *client)
{
	struct tcr_host *h = ctx;

	assert_ptr_equal(client, &h->client);
	h->released++;
}

static void tcr_put_node(struct store *s, struct model_node *n)
{
	char *text = NULL;
	size_t len = 0;
	struct store_op op = {.type = STORE_OP_PUT, .kind = STORE_NODE, .expect_index = STORE_ANY};
	struct err e;

	assert_int_equal(model_node_encode(n, &text, &len, &e), 0);
	op.id = n->id;
	op.value = text;
	op.len = len;
	assert_int_equal(store_txn(s, &op, 1, NULL, &e), 0);
	free(text);
}

/* One DeleteVolume through c; returns the status code. */
static int tcr_delete(struct csi_client *c, struct csi_status *st)
{
	Csi__V1__DeleteVolumeRequest req = CSI__V1__DELETE_VOLUME_REQUEST__INIT;
	Csi__V1__DeleteVolumeResponse *resp = NULL;

	req.volume_id = "v";
	csi_delete_volume(c, &req, &resp, 2000, st);
	csi_msg_free(resp ? &resp->base : NULL);
	return st->code;
}

static void test_seam_host_first_then_agents(void **state)
{
	struct tcr_host host = {.client = {.endpoint = "host"}};
	struct controllers_remote_config cfg = {0};
	struct controllers_remote *r = NULL;
	struct reconciler_controllers seam;
	struct store *s = NULL;
	struct csi_client *c = NULL;
	struct csi_status st;
	struct tcr_nodes t;
	uint64_t caps = 0;
	struct err e;

	assert_int_equal(store_mem_new(&s, &e), 0);
	tcr_four(&t);
	/* Nobody listens on ports 1 and 2: every call fails at the transport. */
	for (int i = 0; i < 4; i++)
		tcr_put_node(s, &t.n[i]);
	cfg.store = s;
	cfg.token = "secret-token";
	cfg.host = (struct reconciler_controllers){tcr_host_acquire, tcr_host_release, &host};
	assert_int_equal(controllers_remote_new(&cfg, &r, &e), 0);
	seam = controllers_remote_seam(r);

	/* The host runs it: its client, given back to it. */
	assert_int_equal(seam.acquire(seam.ctx, "host.plugin", &c, &caps, &e), 0);
	assert_ptr_equal(c, &host.client);
	seam.release(seam.ctx, "host.plugin", c);
	assert_int_equal(host.released, 1);
	/* The host has it, not ready yet: no agent is asked. */
	assert_int_equal(seam.acquire(seam.ctx, "starting.plugin", &c, &caps, &e), CSID_EUNAVAIL);
	assert_null(c);
	/* Neither has it. */
	assert_int_equal(seam.acquire(seam.ctx, "none.plugin", &c, &caps, &e), CSID_ENOTFOUND);
	assert_string_equal(e.msg, "no controller plugin none.plugin on any node");

	/* Through the agents: node a first. */
	assert_int_equal(seam.acquire(seam.ctx, TCR_PLUGIN, &c, &caps, &e), 0);
	assert_string_equal(c->endpoint, "agent on node a (http://127.0.0.1:1)");
	assert_true(
	    caps &
	    ((uint64_t)1
	     << CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_UNPUBLISH_VOLUME));
	assert_int_equal(tcr_delete(c, &st), CSI_UNAVAILABLE);
	seam.release(seam.ctx, TCR_PLUGIN, c);
	/* a failed at the transport: b is taken, and kept while it is a candidate. */
	assert_int_equal(seam.acquire(seam.ctx, TCR_PLUGIN, &c, &caps, &e), 0);
	assert_string_equal(c->endpoint, "agent on node b (http://127.0.0.1:2)");
	seam.release(seam.ctx, TCR_PLUGIN, c);
	assert_int_equal(seam.acquire(seam.ctx, TCR_PLUGIN, &c, &caps, &e), 0);
	assert_string_equal(c->endpoint, "agent on node b (http://127.0.0.1:2)");
	assert_int_equal(tcr_delete(c, &st), CSI_UNAVAILABLE);
	seam.release(seam.ctx, TCR_PLUGIN, c);
	/* b failed too: back to a. */
	assert_int_equal(seam.acquire(seam.ctx, TCR_PLUGIN, &c, &caps, &e), 0);
	assert_string_equal(c->endpoint, "agent on node a (http://127.0.0.1:1)");
	seam.release(seam.ctx, TCR_PLUGIN, c);
	/* Both turn unhealthy (c is, d is down): nothing is left, and the message says why. */
	t.p[0].healthy = false;
	tcr_put_node(s, &t.n[0]);
	t.p[1].healthy = false;
	tcr_put_node(s, &t.n[1]);
	assert_int_equal(seam.acquire(seam.ctx, TCR_PLUGIN, &c, &caps, &e), CSID_EUNAVAIL);
	assert_non_null(strstr(e.msg, "no healthy controller for plugin " TCR_PLUGIN ": a: "));
	assert_null(c);
	assert_int_equal(host.acquired, 1);
	controllers_remote_free(r);
	store_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_choose_healthy_and_caps),
	    cmocka_unit_test(test_choose_fails_over),
	    cmocka_unit_test(test_choose_none),
	    cmocka_unit_test(test_allowed_and_deadline),
	    cmocka_unit_test(test_request_roundtrip),
	    cmocka_unit_test(test_answer_roundtrip),
	    cmocka_unit_test(test_answer_malformed),
	    cmocka_unit_test(test_client_unreachable),
	    cmocka_unit_test(test_client_waits_as_other),
	    cmocka_unit_test(test_client_unix_socket),
	    cmocka_unit_test(test_seam_host_first_then_agents),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
