/*
 * Unit tests of the plugin manager and its instance managers
 * (src/plugins/plugin_manager.c, instance_manager.c) with a memory-only
 * registry and a scripted fake CSI client, in virtual time: registration,
 * fingerprint, health changes, the retry backoff of a plugin that is down, resync of missed events,
 * instance changes, deregistration, wait_for_plugin, references held across a replacement, hanging
 * and garbage-answering plugins. Two tests run the real threads on the real clock (waiting and
 * parallel shutdown).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "plugins/plugin_manager.h"
#include "plugins/registry.h"
#include "util/clock.h"

#define FAKE_MAX 8
#define T0 1000000
#define WALL0 1700000000000

/* One scripted plugin, found by its endpoint. */
struct fake_plugin {
	char endpoint[64];
	char name[64];
	bool controller_service;
	bool stage_unstage;
	bool not_ready;
	const char *node_id;
	int64_t max_volumes;
	int fail[CSI_RPC_COUNT]; /* a gRPC code to answer with, 0: answer OK */
	bool garbage[CSI_RPC_COUNT]; /* answer as a response that does not decode */
	int hang_ms; /* real delay of every Probe (threaded tests) */
	bool connect_fails;
	/* Counters, under the test's lock. */
	int calls[CSI_RPC_COUNT];
	int connects;
	int clients; /* connects that gave a client */
	int frees;
	int in_flight;
	int max_in_flight;
};

struct fake_client {
	struct csi_client base;
	struct fake_plugin *p;
};

struct test_ctx {
	struct clock_fake clock;
	struct registry *reg;
	struct plugin_manager *pm;
	struct plugin_manager_config cfg;
	struct fake_plugin fakes[FAKE_MAX];
	int nfakes;
	int health_events;
	int attempt_events; /* changes of the failed-attempt count */
	struct instance_manager_status last_old, last_cur;
	uint64_t rnd; /* what the jitter's random source returns */
};

static pthread_mutex_t test_mu = PTHREAD_MUTEX_INITIALIZER;

static int fake_answer(struct fake_plugin *p, enum csi_rpc rpc, ProtobufCMessage **resp)
{
	switch (rpc) {
	case CSI_RPC_GET_PLUGIN_INFO: {
		Csi__V1__GetPluginInfoResponse r = CSI__V1__GET_PLUGIN_INFO_RESPONSE__INIT;

		r.name = p->name;
		r.vendor_version = "1.2.3";
		*resp = csi_msg_dup(&r.base);
		break;
	}
	case CSI_RPC_GET_PLUGIN_CAPABILITIES: {
		Csi__V1__GetPluginCapabilitiesResponse r =
		    CSI__V1__GET_PLUGIN_CAPABILITIES_RESPONSE__INIT;
		Csi__V1__PluginCapability c[2] = {CSI__V1__PLUGIN_CAPABILITY__INIT,
						  CSI__V1__PLUGIN_CAPABILITY__INIT};
		Csi__V1__PluginCapability__Service s[2] = {
		    CSI__V1__PLUGIN_CAPABILITY__SERVICE__INIT,
		    CSI__V1__PLUGIN_CAPABILITY__SERVICE__INIT};
		Csi__V1__PluginCapability *cp[2] = {&c[0], &c[1]};

		s[0].type =
		    CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__VOLUME_ACCESSIBILITY_CONSTRAINTS;
		s[1].type = CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__CONTROLLER_SERVICE;
		for (int i = 0; i < 2; i++) {
			c[i].type_case = CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE;
			c[i].service = &s[i];
		}
		r.capabilities = cp;
		r.n_capabilities = p->controller_service ? 2 : 1;
		*resp = csi_msg_dup(&r.base);
		break;
	}
	case CSI_RPC_CONTROLLER_GET_CAPABILITIES: {
		Csi__V1__ControllerGetCapabilitiesResponse r =
		    CSI__V1__CONTROLLER_GET_CAPABILITIES_RESPONSE__INIT;
		Csi__V1__ControllerServiceCapability c =
		    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__INIT;
		Csi__V1__ControllerServiceCapability__RPC rpcs =
		    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__INIT;
		Csi__V1__ControllerServiceCapability *cp = &c;

		rpcs.type =
		    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_UNPUBLISH_VOLUME;
		c.type_case = CSI__V1__CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC;
		c.rpc = &rpcs;
		r.capabilities = &cp;
		r.n_capabilities = 1;
		*resp = csi_msg_dup(&r.base);
		break;
	}
	case CSI_RPC_NODE_GET_CAPABILITIES: {
		Csi__V1__NodeGetCapabilitiesResponse r =
		    CSI__V1__NODE_GET_CAPABILITIES_RESPONSE__INIT;
		Csi__V1__NodeServiceCapability c[2] = {CSI__V1__NODE_SERVICE_CAPABILITY__INIT,
						       CSI__V1__NODE_SERVICE_CAPABILITY__INIT};
		Csi__V1__NodeServiceCapability__RPC rpcs[2] = {
		    CSI__V1__NODE_SERVICE_CAPABILITY__RPC__INIT,
		    CSI__V1__NODE_SERVICE_CAPABILITY__RPC__INIT};
		Csi__V1__NodeServiceCapability *cp[2] = {&c[0], &c[1]};

		rpcs[0].type = CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__GET_VOLUME_STATS;
		rpcs[1].type = CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__STAGE_UNSTAGE_VOLUME;
		for (int i = 0; i < 2; i++) {
			c[i].type_case = CSI__V1__NODE_SERVICE_CAPABILITY__TYPE_RPC;
			c[i].rpc = &rpcs[i];
		}
		r.capabilities = cp;
		r.n_capabilities = p->stage_unstage ? 2 : 1;
		*resp = csi_msg_dup(&r.base);
		break;
	}
	case CSI_RPC_NODE_GET_INFO: {
		Csi__V1__NodeGetInfoResponse r = CSI__V1__NODE_GET_INFO_RESPONSE__INIT;
		Csi__V1__Topology topo = CSI__V1__TOPOLOGY__INIT;
		Csi__V1__Topology__SegmentsEntry s[2] = {CSI__V1__TOPOLOGY__SEGMENTS_ENTRY__INIT,
							 CSI__V1__TOPOLOGY__SEGMENTS_ENTRY__INIT};
		Csi__V1__Topology__SegmentsEntry *sp[2] = {&s[0], &s[1]};

		s[0].key = "zone";
		s[0].value = "z1";
		s[1].key = "region";
		s[1].value = "r1";
		topo.segments = sp;
		topo.n_segments = 2;
		r.node_id = (char *)p->node_id;
		r.max_volumes_per_node = p->max_volumes;
		r.accessible_topology = &topo;
		*resp = csi_msg_dup(&r.base);
		break;
	}
	case CSI_RPC_PROBE: {
		Csi__V1__ProbeResponse r = CSI__V1__PROBE_RESPONSE__INIT;
		Google__Protobuf__BoolValue ready = GOOGLE__PROTOBUF__BOOL_VALUE__INIT;

		ready.value = !p->not_ready;
		r.ready = &ready;
		*resp = csi_msg_dup(&r.base);
		break;
	}
	default:
		return CSI_UNIMPLEMENTED;
	}
	return *resp ? CSI_OK : CSI_RESOURCE_EXHAUSTED;
}

static void fake_hang(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};

	/* Simulates a slow plugin; the test itself never waits like this. */
	nanosleep(&ts, NULL);
}

static int fake_call(struct csi_client *c, enum csi_rpc rpc, const ProtobufCMessage *req,
		     ProtobufCMessage **resp, int64_t timeout_ms, struct csi_status *st)
{
	struct fake_plugin *p = ((struct fake_client *)c)->p;
	int code, hang;
	bool garbage;

	*resp = NULL;
	pthread_mutex_lock(&test_mu);
	p->calls[rpc]++;
	code = p->fail[rpc];
	garbage = p->garbage[rpc];
	hang = rpc == CSI_RPC_PROBE ? p->hang_ms : 0;
	p->in_flight++;
	if (p->in_flight > p->max_in_flight)
		p->max_in_flight = p->in_flight;
	pthread_mutex_unlock(&test_mu);
	if (hang > 0)
		fake_hang(hang);
	memset(st, 0, sizeof(*st));
	if (code == 0 && !garbage)
		code = fake_answer(p, rpc, resp);
	pthread_mutex_lock(&test_mu);
	p->in_flight--;
	pthread_mutex_unlock(&test_mu);
	if (garbage) {
		st->code = CSI_INTERNAL;
		snprintf(st->message, sizeof(st->message), "response does not decode");
		return CSID_EPROTO;
	}
	st->code = code;
	if (code != CSI_OK) {
		snprintf(st->message, sizeof(st->message), "scripted %s", csi_code_name(code));
		return code == CSI_DEADLINE_EXCEEDED ? CSID_ETIMEDOUT : CSID_EUNAVAIL;
	}
	return 0;
}

static void fake_free(struct csi_client *c)
{
	struct fake_client *fc = (struct fake_client *)c;

	pthread_mutex_lock(&test_mu);
	fc->p->frees++;
	pthread_mutex_unlock(&test_mu);
	free(fc);
}

static int fake_connect(void *ctx, const char *endpoint, struct csi_client **out, struct err *e)
{
	struct test_ctx *t = ctx;
	struct fake_client *fc;

	for (int i = 0; i < t->nfakes; i++) {
		struct fake_plugin *p = &t->fakes[i];

		if (strcmp(p->endpoint, endpoint) != 0)
			continue;
		pthread_mutex_lock(&test_mu);
		p->connects++;
		pthread_mutex_unlock(&test_mu);
		if (p->connect_fails)
			return err_set(e, CSID_EUNAVAIL, "scripted connect failure");
		fc = calloc(1, sizeof(*fc));
		if (fc == NULL)
			return err_set(e, CSID_ENOMEM, "out of memory");
		fc->base.call = fake_call;
		fc->base.free = fake_free;
		fc->base.endpoint = p->endpoint;
		fc->p = p;
		pthread_mutex_lock(&test_mu);
		p->clients++;
		pthread_mutex_unlock(&test_mu);
		*out = &fc->base;
		return 0;
	}
	return err_set(e, CSID_EUNAVAIL, "no plugin at %s", endpoint);
}

static struct fake_plugin *fake_add(struct test_ctx *t, const char *endpoint)
{
	struct fake_plugin *p = &t->fakes[t->nfakes++];

	assert_true(t->nfakes <= FAKE_MAX);
	snprintf(p->endpoint, sizeof(p->endpoint), "%s", endpoint);
	snprintf(p->name, sizeof(p->name), "hostpath.csi.csid.dev");
	p->controller_service = true;
	p->stage_unstage = true;
	p->node_id = "node-1";
	p->max_volumes = 7;
	return p;
}

static int fake_count(struct fake_plugin *p, enum csi_rpc rpc)
{
	int n;

	pthread_mutex_lock(&test_mu);
	n = p->calls[rpc];
	pthread_mutex_unlock(&test_mu);
	return n;
}

static void test_on_health(void *ctx, const struct instance_manager_status *old,
			   const struct instance_manager_status *cur)
{
	struct test_ctx *t = ctx;

	pthread_mutex_lock(&test_mu);
	if (old->attempts != cur->attempts)
		t->attempt_events++;
	if (old->health.healthy != cur->health.healthy) {
		t->health_events++;
		t->last_old = *old;
		t->last_cur = *cur;
	}
	pthread_mutex_unlock(&test_mu);
}

/* The jitter's randomness: t->rnd, so that retry delays are exact. */
static uint64_t test_random(void *ctx)
{
	struct test_ctx *t = ctx;

	return t->rnd;
}

static struct test_ctx *test_new(bool manual, struct clock *clock)
{
	struct test_ctx *t = calloc(1, sizeof(*t));
	struct err e;

	assert_non_null(t);
	clock_fake_init(&t->clock, T0, WALL0);
	assert_int_equal(registry_new(&t->clock.base, NULL, &t->reg, &e), 0);
	t->cfg.registry = t->reg;
	t->cfg.clock = clock ? clock : &t->clock.base;
	t->cfg.connect = fake_connect;
	t->cfg.connect_ctx = t;
	t->cfg.on_health = test_on_health;
	t->cfg.on_health_ctx = t;
	t->cfg.probe_interval_ms = 1000;
	t->cfg.fingerprint_interval_ms = 10000;
	t->cfg.rpc_timeout_ms = 500;
	t->cfg.resync_ms = 30000;
	t->cfg.manual_events = manual;
	t->cfg.random = test_random;
	t->cfg.random_ctx = t;
	assert_int_equal(plugin_manager_new(&t->cfg, &t->pm, &e), 0);
	return t;
}

static int test_setup(void **state)
{
	*state = test_new(false, NULL);
	return 0;
}

static int test_setup_manual(void **state)
{
	*state = test_new(true, NULL);
	return 0;
}

static int test_teardown(void **state)
{
	struct test_ctx *t = *state;

	plugin_manager_free(t->pm);
	registry_free(t->reg);
	for (int i = 0; i < t->nfakes; i++)
		assert_int_equal(t->fakes[i].clients, t->fakes[i].frees);
	clock_fake_destroy(&t->clock);
	free(t);
	return 0;
}

/* Status of (type, name) from a snapshot; false when not managed. */
static bool test_status(struct test_ctx *t, enum registry_type type, const char *name,
			struct instance_manager_status *out)
{
	struct plugin_manager_snapshot s;
	bool found = false;
	struct err e;

	assert_int_equal(plugin_manager_snapshot(t->pm, &s, &e), 0);
	for (size_t i = 0; i < s.nplugins; i++)
		if (s.plugins[i].type == type && strcmp(s.plugins[i].name, name) == 0 &&
		    s.plugins[i].managed) {
			*out = s.plugins[i].status;
			found = true;
		}
	plugin_manager_snapshot_free(&s);
	return found;
}

static void test_advance_step(struct test_ctx *t, int64_t ms)
{
	clock_fake_advance(&t->clock, ms);
	plugin_manager_step(t->pm);
}

static void test_register_fingerprint(void **state)
{
	struct test_ctx *t = *state;
	struct fake_plugin *p = fake_add(t, "/run/hp/i1.sock");
	struct instance_manager_status st;
	struct plugin_manager_snapshot s;
	int64_t next;
	struct err e;

	assert_int_equal(plugin_manager_step(t->pm), T0 + 30000);
	assert_false(test_status(t, REGISTRY_NODE, "hp", &st));
	assert_int_equal(registry_register_monolith(t->reg, "hp", "i1", p->endpoint, &e), 0);
	next = plugin_manager_step(t->pm);
	assert_int_equal(next, T0 + 1000); /* the next probe */
	assert_true(test_status(t, REGISTRY_NODE, "hp", &st));
	assert_int_equal(st.state, INSTANCE_MANAGER_RUNNING);
	assert_true(st.health.healthy);
	assert_string_equal(st.health.description, "healthy");
	assert_string_equal(st.instance.instance_id, "i1");
	assert_string_equal(st.fingerprint.plugin_name, "hostpath.csi.csid.dev");
	assert_string_equal(st.fingerprint.vendor_version, "1.2.3");
	assert_true(st.fingerprint.stage_unstage);
	assert_string_equal(st.fingerprint.node_id, "node-1");
	assert_int_equal(st.fingerprint.max_volumes, 7);
	assert_int_equal(st.fingerprint.ntopology, 2);
	assert_string_equal(st.fingerprint.topology[0].key, "region"); /* sorted */
	assert_string_equal(st.fingerprint.topology[1].value, "z1");
	assert_int_equal(st.last_probe_ms, WALL0);
	assert_true(test_status(t, REGISTRY_CONTROLLER, "hp", &st));
	assert_true(st.health.healthy);
	assert_true(
	    st.fingerprint.controller_caps &
	    (1u << CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_UNPUBLISH_VOLUME));
	assert_int_equal(st.fingerprint.node_caps, 0);
	/* Controller: info, caps, controller caps, probe; node: info, caps, node caps+info, probe.
	 */
	assert_int_equal(fake_count(p, CSI_RPC_GET_PLUGIN_INFO), 2);
	assert_int_equal(fake_count(p, CSI_RPC_CONTROLLER_GET_CAPABILITIES), 1);
	assert_int_equal(fake_count(p, CSI_RPC_NODE_GET_INFO), 1);
	assert_int_equal(fake_count(p, CSI_RPC_PROBE), 2);
	assert_int_equal(t->health_events, 2);
	/* Stepping again at the same time does no RPC. */
	plugin_manager_step(t->pm);
	assert_int_equal(fake_count(p, CSI_RPC_PROBE), 2);
	/* Probes follow the interval; fingerprints their own, longer one. */
	test_advance_step(t, 1000);
	assert_int_equal(fake_count(p, CSI_RPC_PROBE), 4);
	assert_int_equal(fake_count(p, CSI_RPC_GET_PLUGIN_INFO), 2);
	for (int i = 0; i < 9; i++)
		test_advance_step(t, 1000);
	assert_int_equal(fake_count(p, CSI_RPC_GET_PLUGIN_INFO), 4);
	/* The snapshot lists the registry's instances too. */
	assert_int_equal(plugin_manager_snapshot(t->pm, &s, &e), 0);
	assert_int_equal(s.nplugins, 2);
	assert_int_equal(s.plugins[0].type, REGISTRY_CONTROLLER);
	assert_int_equal(s.plugins[1].ninstances, 1);
	assert_string_equal(s.plugins[1].instances[0].endpoint, p->endpoint);
	plugin_manager_snapshot_free(&s);
}

static void test_health_change(void **state)
{
	struct test_ctx *t = *state;
	struct fake_plugin *p = fake_add(t, "/run/hp/i1.sock");
	struct instance_manager_status st;
	struct err e;

	assert_int_equal(registry_register(t->reg, REGISTRY_NODE, "hp", "i1", p->endpoint, &e), 0);
	plugin_manager_step(t->pm);
	assert_true(test_status(t, REGISTRY_NODE, "hp", &st));
	assert_true(st.health.healthy);
	assert_int_equal(t->health_events, 1);

	p->fail[CSI_RPC_PROBE] = CSI_UNAVAILABLE;
	test_advance_step(t, 1000);
	assert_true(test_status(t, REGISTRY_NODE, "hp", &st));
	assert_false(st.health.healthy);
	assert_string_equal(st.health.description, "Probe: UNAVAILABLE: scripted UNAVAILABLE");
	assert_int_equal(st.health.changed_ms, WALL0 + 1000);
	assert_int_equal(t->health_events, 2);
	assert_true(t->last_old.health.healthy);
	assert_false(t->last_cur.health.healthy);
	/* Still failing: no new event. */
	test_advance_step(t, 1000);
	assert_int_equal(t->health_events, 2);
	/* ready=false is unhealthy too. */
	p->fail[CSI_RPC_PROBE] = 0;
	p->not_ready = true;
	test_advance_step(t, 1000);
	assert_true(test_status(t, REGISTRY_NODE, "hp", &st));
	assert_false(st.health.healthy);
	assert_string_equal(st.health.description, "Probe: plugin is not ready");
	/* Recovery. */
	p->not_ready = false;
	test_advance_step(t, 1000);
	assert_true(test_status(t, REGISTRY_NODE, "hp", &st));
	assert_true(st.health.healthy);
	assert_int_equal(st.health.changed_ms, WALL0 + 4000);
	assert_int_equal(t->health_events, 3);
}

static void test_resync_repairs_missed_event(void **state)
{
	struct test_ctx *t = *state;
	struct fake_plugin *p1 = fake_add(t, "/run/hp/i1.sock");
	struct fake_plugin *p2 = fake_add(t, "/run/hp/i2.sock");
	struct instance_manager_status st;
	struct err e;

	/* manual_events: nothing tells the manager about registrations. */
	assert_int_equal(registry_register(t->reg, REGISTRY_NODE, "hp", "i1", p1->endpoint, &e), 0);
	plugin_manager_step(t->pm); /* the first step is a resync */
	assert_true(test_status(t, REGISTRY_NODE, "hp", &st));
	assert_string_equal(st.instance.instance_id, "i1");

	assert_int_equal(registry_register(t->reg, REGISTRY_NODE, "hp", "i2", p2->endpoint, &e), 0);
	test_advance_step(t, 1000);
	assert_true(test_status(t, REGISTRY_NODE, "hp", &st));
	assert_string_equal(st.instance.instance_id, "i1"); /* event missed */
	test_advance_step(t, 29000); /* resync due */
	assert_true(test_status(t, REGISTRY_NODE, "hp", &st));
	assert_string_equal(st.instance.instance_id, "i2");
	assert_true(st.health.healthy);
	assert_int_equal(p1->frees, 1);

	/* A missed deregistration is repaired too; a notified one at once. */
	assert_int_equal(registry_deregister(t->reg, REGISTRY_NODE, "hp", "i2", &e), 0);
	assert_int_equal(registry_deregister(t->reg, REGISTRY_NODE, "hp", "i1", &e), 0);
	test_advance_step(t, 1000);
	assert_true(test_status(t, REGISTRY_NODE, "hp", &st));
	plugin_manager_notify(t->pm, REGISTRY_NODE, "hp");
	plugin_manager_step(t->pm);
	assert_false(test_status(t, REGISTRY_NODE, "hp", &st));
	assert_int_equal(p2->frees, 1);
}

static void test_instance_change(void **state)
{
	struct test_ctx *t = *state;
	struct fake_plugin *p1 = fake_add(t, "/run/hp/i1.sock");
	struct fake_plugin *p2 = fake_add(t, "/run/hp/i2.sock");
	struct instance_manager_status st;
	struct plugin_ref ref;
	Csi__V1__ProbeRequest preq = CSI__V1__PROBE_REQUEST__INIT;
	Csi__V1__ProbeResponse *presp;
	struct csi_status cst;
	struct err e;

	assert_int_equal(registry_register(t->reg, REGISTRY_NODE, "hp", "i1", p1->endpoint, &e), 0);
	plugin_manager_step(t->pm);
	assert_int_equal(plugin_manager_mounter_for_plugin(t->pm, "hp", &ref, &e), 0);
	assert_true(ref.fingerprint.stage_unstage);
	assert_string_equal(ref.instance.instance_id, "i1");

	/*
	 * A new instance becomes active: until the manager took it over, a
	 * wait does not hand out the old one (its process is being stopped).
	 */
	assert_int_equal(registry_register(t->reg, REGISTRY_NODE, "hp", "i2", p2->endpoint, &e), 0);
	assert_int_equal(plugin_manager_wait_for_plugin(t->pm, REGISTRY_NODE, "hp", 0, &st, &e),
			 CSID_ETIMEDOUT);
	assert_string_equal(e.msg, "plugin node/hp: instance i1 is being replaced by i2");
	/* The old manager stops, a new one starts. */
	plugin_manager_step(t->pm);
	assert_int_equal(plugin_manager_wait_for_plugin(t->pm, REGISTRY_NODE, "hp", 0, &st, &e), 0);
	assert_string_equal(st.instance.instance_id, "i2");
	assert_true(test_status(t, REGISTRY_NODE, "hp", &st));
	assert_string_equal(st.instance.instance_id, "i2");
	assert_true(st.health.healthy);
	assert_int_equal(p2->connects, 1);
	/* The mounter's reference still works on the old instance's client. */
	assert_int_equal(p1->frees, 0);
	assert_int_equal(csi_probe(ref.client, &preq, &presp, 100, &cst), 0);
	csi_msg_free(&presp->base);
	plugin_ref_release(&ref);
	assert_int_equal(p1->frees, 1);
	plugin_ref_release(&ref); /* released: a no-op */
	assert_null(ref.client);

	/* Deregistering the old instance leaves the new manager alone. */
	assert_int_equal(registry_deregister(t->reg, REGISTRY_NODE, "hp", "i1", &e), 0);
	plugin_manager_step(t->pm);
	assert_true(test_status(t, REGISTRY_NODE, "hp", &st));
	assert_string_equal(st.instance.instance_id, "i2");
	assert_int_equal(p2->connects, 1);
	assert_int_equal(p2->frees, 0);

	/* Deregistering the active one shuts its manager down. */
	assert_int_equal(registry_deregister(t->reg, REGISTRY_NODE, "hp", "i2", &e), 0);
	plugin_manager_step(t->pm);
	assert_false(test_status(t, REGISTRY_NODE, "hp", &st));
	assert_int_equal(p2->frees, 1);
	assert_int_equal(plugin_manager_mounter_for_plugin(t->pm, "hp", &ref, &e), CSID_ENOTFOUND);
	assert_non_null(strstr(e.msg, "not registered"));
	assert_null(ref.client);
}

static void test_active_deregistered_falls_back(void **state)
{
	struct test_ctx *t = *state;
	struct fake_plugin *p1 = fake_add(t, "/run/hp/i1.sock");
	struct fake_plugin *p2 = fake_add(t, "/run/hp/i2.sock");
	struct instance_manager_status st;
	struct err e;

	assert_int_equal(registry_register(t->reg, REGISTRY_NODE, "hp", "i1", p1->endpoint, &e), 0);
	assert_int_equal(registry_register(t->reg, REGISTRY_NODE, "hp", "i2", p2->endpoint, &e), 0);
	plugin_manager_step(t->pm);
	assert_true(test_status(t, REGISTRY_NODE, "hp", &st));
	assert_string_equal(st.instance.instance_id, "i2");
	assert_int_equal(p1->connects, 0); /* both events handled in one step */
	/* The active instance goes: the older one, still registered, is managed again. */
	assert_int_equal(registry_deregister(t->reg, REGISTRY_NODE, "hp", "i2", &e), 0);
	plugin_manager_step(t->pm);
	assert_true(test_status(t, REGISTRY_NODE, "hp", &st));
	assert_string_equal(st.instance.instance_id, "i1");
	assert_true(st.health.healthy);
	assert_int_equal(p2->frees, 1);
	assert_int_equal(p1->connects, 1);
}

static void test_wait_for_plugin(void **state)
{
	struct test_ctx *t = *state;
	struct fake_plugin *p = fake_add(t, "/run/hp/i1.sock");
	struct instance_manager_status st;
	struct plugin_ref ref;
	struct err e;

	/* Auto-advance: waiting costs virtual time only. */
	clock_fake_set_auto_advance(&t->clock, true);
	assert_int_equal(plugin_manager_wait_for_plugin(t->pm, REGISTRY_NODE, "hp", 5000, &st, &e),
			 CSID_ETIMEDOUT);
	assert_string_equal(e.msg, "plugin node/hp: not registered");
	assert_true(clock_now_ms(&t->clock.base) >= T0 + 5000);

	p->fail[CSI_RPC_PROBE] = CSI_DEADLINE_EXCEEDED;
	assert_int_equal(registry_register(t->reg, REGISTRY_NODE, "hp", "i1", p->endpoint, &e), 0);
	assert_int_equal(plugin_manager_wait_for_plugin(t->pm, REGISTRY_NODE, "hp", 1000, &st, &e),
			 CSID_ETIMEDOUT);
	assert_non_null(strstr(e.msg, "instance i1 registered, not yet managed"));
	assert_int_equal(plugin_manager_mounter_for_plugin(t->pm, "hp", &ref, &e), CSID_EUNAVAIL);
	plugin_manager_step(t->pm);
	assert_int_equal(plugin_manager_wait_for_plugin(t->pm, REGISTRY_NODE, "hp", 1000, &st, &e),
			 CSID_ETIMEDOUT);
	assert_string_equal(e.msg, "plugin node/hp: instance i1 unhealthy: Probe: "
				   "DEADLINE_EXCEEDED: scripted DEADLINE_EXCEEDED");
	p->fail[CSI_RPC_PROBE] = 0;
	test_advance_step(t, 1000);
	assert_int_equal(plugin_manager_wait_for_plugin(t->pm, REGISTRY_NODE, "hp", 0, &st, &e), 0);
	assert_string_equal(st.fingerprint.node_id, "node-1");
	assert_int_equal(plugin_manager_wait_for_plugin(t->pm, REGISTRY_NODE, NULL, 0, &st, &e),
			 CSID_EINVAL);
	plugin_manager_shutdown(t->pm);
	assert_int_equal(plugin_manager_wait_for_plugin(t->pm, REGISTRY_NODE, "hp", 0, &st, &e),
			 CSID_ECANCELED);
	assert_int_equal(plugin_manager_mounter_for_plugin(t->pm, "hp", &ref, &e), CSID_EUNAVAIL);
	assert_null(ref.client);
}

struct test_waiter {
	struct test_ctx *t;
	int rc;
	bool done;
};

static void *test_wait_thread(void *arg)
{
	struct test_waiter *w = arg;
	struct err e;
	int rc = plugin_manager_wait_for_plugin(w->t->pm, REGISTRY_NODE, "hp", INT64_MAX, NULL, &e);

	pthread_mutex_lock(&test_mu);
	w->rc = rc;
	w->done = true;
	pthread_mutex_unlock(&test_mu);
	return NULL;
}

static void test_wait_wakes_on_healthy(void **state)
{
	struct test_ctx *t = *state;
	struct fake_plugin *p = fake_add(t, "/run/hp/i1.sock");
	struct test_waiter w = {.t = t, .rc = 1};
	pthread_t th;
	struct err e;

	/* A waiter on virtual time, woken by the step that makes the plugin healthy. */
	assert_int_equal(pthread_create(&th, NULL, test_wait_thread, &w), 0);
	assert_int_equal(registry_register(t->reg, REGISTRY_NODE, "hp", "i1", p->endpoint, &e), 0);
	plugin_manager_step(t->pm);
	pthread_join(th, NULL);
	assert_true(w.done);
	assert_int_equal(w.rc, 0);
	/* No virtual time passed. */
	assert_int_equal(clock_now_ms(&t->clock.base), T0);
}

static void test_hang_and_garbage(void **state)
{
	struct test_ctx *t = *state;
	struct fake_plugin *p = fake_add(t, "/run/hp/i1.sock");
	struct instance_manager_status st;
	struct plugin_ref ref;
	int64_t next;
	struct err e;

	p->fail[CSI_RPC_GET_PLUGIN_INFO] = CSI_DEADLINE_EXCEEDED;
	assert_int_equal(registry_register(t->reg, REGISTRY_NODE, "hp", "i1", p->endpoint, &e), 0);
	next = plugin_manager_step(t->pm);
	assert_true(test_status(t, REGISTRY_NODE, "hp", &st));
	assert_int_equal(st.state, INSTANCE_MANAGER_FINGERPRINTING);
	assert_false(st.health.healthy);
	assert_string_equal(st.health.description,
			    "GetPluginInfo: DEADLINE_EXCEEDED: scripted DEADLINE_EXCEEDED");
	assert_int_equal(plugin_manager_mounter_for_plugin(t->pm, "hp", &ref, &e), CSID_EUNAVAIL);
	assert_non_null(strstr(e.msg, "fingerprinting"));
	/* Retries back off: 100, 200, 400 ms less jitter (rnd 0: 3/4 of each). */
	assert_int_equal(next, T0 + 75);
	plugin_manager_step(t->pm);
	assert_int_equal(fake_count(p, CSI_RPC_GET_PLUGIN_INFO), 1);
	clock_fake_set(&t->clock, next);
	next = plugin_manager_step(t->pm);
	assert_int_equal(next, T0 + 225);
	clock_fake_set(&t->clock, next);
	next = plugin_manager_step(t->pm);
	assert_int_equal(next, T0 + 525);
	assert_int_equal(fake_count(p, CSI_RPC_GET_PLUGIN_INFO), 3);

	/* Garbage from NodeGetInfo: still unhealthy, nothing half-updated. */
	p->fail[CSI_RPC_GET_PLUGIN_INFO] = 0;
	p->garbage[CSI_RPC_NODE_GET_INFO] = true;
	clock_fake_set(&t->clock, next);
	plugin_manager_step(t->pm);
	assert_true(test_status(t, REGISTRY_NODE, "hp", &st));
	assert_false(st.fingerprinted);
	assert_false(st.health.healthy);
	assert_string_equal(st.health.description,
			    "NodeGetInfo: INTERNAL: response does not decode");
	assert_string_equal(st.fingerprint.plugin_name, "");

	/* Invalid answers are refused with a clear reason. */
	p->garbage[CSI_RPC_NODE_GET_INFO] = false;
	p->node_id = "";
	test_advance_step(t, 2000);
	assert_true(test_status(t, REGISTRY_NODE, "hp", &st));
	assert_string_equal(st.health.description, "NodeGetInfo: plugin returned an empty node_id");
	p->node_id = "node-1";
	p->max_volumes = -3;
	test_advance_step(t, 4000);
	assert_true(test_status(t, REGISTRY_NODE, "hp", &st));
	assert_string_equal(st.health.description, "NodeGetInfo: negative max_volumes_per_node -3");

	/* Fixed: healthy; then a hanging Probe makes it unhealthy again. */
	p->max_volumes = 0;
	test_advance_step(t, 8000);
	assert_true(test_status(t, REGISTRY_NODE, "hp", &st));
	assert_true(st.health.healthy);
	assert_int_equal(st.state, INSTANCE_MANAGER_RUNNING);
	p->fail[CSI_RPC_PROBE] = CSI_DEADLINE_EXCEEDED;
	test_advance_step(t, 1000);
	assert_true(test_status(t, REGISTRY_NODE, "hp", &st));
	assert_false(st.health.healthy);
	/* The fingerprint is kept, so the mounter can still reach it. */
	assert_int_equal(plugin_manager_mounter_for_plugin(t->pm, "hp", &ref, &e), 0);
	assert_false(ref.health.healthy);
	plugin_ref_release(&ref);
}

/*
 * A plugin that goes down (its socket refuses: Probe answers UNAVAILABLE)
 * is retried after 100 ms doubling up to the cap, with jitter, never at a
 * fixed rate; the status counts the attempts and tells when the next is
 * due, and each attempt is reported. Recovery resets the backoff.
 */
static void test_down_backoff(void **state)
{
	struct test_ctx *t = *state;
	struct fake_plugin *p = fake_add(t, "/run/hp/i1.sock");
	struct instance_manager_status st;
	int64_t next, start, delay, prev = 0;
	int probes;
	struct err e;

	/* Only the Probe timer runs in the hour this test spans. */
	plugin_manager_free(t->pm);
	t->cfg.fingerprint_interval_ms = 3600000;
	t->cfg.resync_ms = 3600000;
	assert_int_equal(plugin_manager_new(&t->cfg, &t->pm, &e), 0);
	assert_int_equal(registry_register(t->reg, REGISTRY_NODE, "hp", "i1", p->endpoint, &e), 0);
	plugin_manager_step(t->pm);
	assert_true(test_status(t, REGISTRY_NODE, "hp", &st));
	assert_true(st.health.healthy);
	assert_int_equal(st.attempts, 0);

	/* Down: each retry waits twice as long, up to the 30 s default cap. */
	p->fail[CSI_RPC_PROBE] = CSI_UNAVAILABLE;
	next = plugin_manager_step(t->pm);
	assert_int_equal(next, T0 + 1000); /* the next Probe is due */
	clock_fake_set(&t->clock, next);
	start = next;
	for (unsigned i = 1; i <= 12; i++) {
		int64_t now = clock_now_ms(&t->clock.base);
		int64_t d = 100LL << (i - 1);

		if (d > 30000)
			d = 30000;
		probes = fake_count(p, CSI_RPC_PROBE);
		next = plugin_manager_step(t->pm);
		assert_int_equal(fake_count(p, CSI_RPC_PROBE), probes + 1);
		assert_true(test_status(t, REGISTRY_NODE, "hp", &st));
		assert_false(st.health.healthy);
		assert_int_equal(st.attempts, i);
		assert_int_equal(st.retry_delay_ms, d - d / 4);
		assert_int_equal(next, now + d - d / 4);
		assert_int_equal(st.next_attempt_ms, WALL0 + (next - T0));
		/* Nothing happens before the next attempt is due. */
		clock_fake_set(&t->clock, next - 1);
		assert_int_equal(plugin_manager_step(t->pm), next);
		assert_int_equal(fake_count(p, CSI_RPC_PROBE), probes + 1);
		clock_fake_set(&t->clock, next);
	}
	assert_int_equal(t->attempt_events, 12);
	/* Twelve attempts took over a minute, not four seconds. */
	assert_true(clock_now_ms(&t->clock.base) - start > 60000);

	/* Recovery resets the count; the next failure is retried soon again. */
	p->fail[CSI_RPC_PROBE] = 0;
	plugin_manager_step(t->pm);
	assert_true(test_status(t, REGISTRY_NODE, "hp", &st));
	assert_true(st.health.healthy);
	assert_int_equal(st.attempts, 0);
	assert_int_equal(st.next_attempt_ms, 0);
	p->fail[CSI_RPC_PROBE] = CSI_UNAVAILABLE;
	test_advance_step(t, 1000);
	assert_true(test_status(t, REGISTRY_NODE, "hp", &st));
	assert_int_equal(st.attempts, 1);
	assert_int_equal(st.retry_delay_ms, 75);

	/* Jitter: delays lie in [3/4 d, d] and differ with the random source. */
	for (unsigned i = 0; i < 6; i++) {
		t->rnd = 0x9e3779b97f4a7c15ULL * (i + 1);
		clock_fake_set(&t->clock, T0 + 10000000 + i * 100000);
		plugin_manager_step(t->pm);
		assert_true(test_status(t, REGISTRY_NODE, "hp", &st));
		delay = st.retry_delay_ms;
		assert_true(delay >= (100LL << (st.attempts - 1)) * 3 / 4);
		assert_true(delay <= 100LL << (st.attempts - 1));
		assert_true(delay != prev);
		prev = delay;
	}
}

/* The cap is configurable (the agent's timings.reconnect_max). */
static void test_down_backoff_cap(void **state)
{
	struct test_ctx *t = *state;
	struct fake_plugin *p = fake_add(t, "/run/hp/i1.sock");
	struct instance_manager_status st;
	int64_t next;
	struct err e;

	plugin_manager_free(t->pm);
	t->cfg.retry_max_ms = 2000;
	t->cfg.fingerprint_interval_ms = 3600000;
	t->cfg.resync_ms = 3600000;
	assert_int_equal(plugin_manager_new(&t->cfg, &t->pm, &e), 0);
	p->fail[CSI_RPC_PROBE] = CSI_UNAVAILABLE;
	assert_int_equal(registry_register(t->reg, REGISTRY_NODE, "hp", "i1", p->endpoint, &e), 0);
	next = plugin_manager_step(t->pm);
	for (int i = 0; i < 10; i++) {
		clock_fake_set(&t->clock, next);
		next = plugin_manager_step(t->pm);
	}
	assert_true(test_status(t, REGISTRY_NODE, "hp", &st));
	assert_int_equal(st.attempts, 11);
	assert_int_equal(st.retry_delay_ms, 1500);
	assert_int_equal(next, clock_now_ms(&t->clock.base) + 1500);
}

static void test_controller_without_service(void **state)
{
	struct test_ctx *t = *state;
	struct fake_plugin *p = fake_add(t, "/run/n/i1.sock");
	struct fake_plugin *q = fake_add(t, "/run/n/i2.sock");
	struct instance_manager_status st;
	struct err e;

	p->controller_service = false;
	q->connect_fails = true;
	assert_int_equal(
	    registry_register(t->reg, REGISTRY_CONTROLLER, "nfs", "i1", p->endpoint, &e), 0);
	assert_int_equal(registry_register(t->reg, REGISTRY_NODE, "nfs", "i2", q->endpoint, &e), 0);
	plugin_manager_step(t->pm);
	assert_true(test_status(t, REGISTRY_CONTROLLER, "nfs", &st));
	assert_false(st.health.healthy);
	assert_non_null(strstr(st.health.description, "does not advertise CONTROLLER_SERVICE"));
	assert_int_equal(fake_count(p, CSI_RPC_CONTROLLER_GET_CAPABILITIES), 0);
	assert_true(test_status(t, REGISTRY_NODE, "nfs", &st));
	assert_int_equal(st.state, INSTANCE_MANAGER_CONNECTING);
	assert_string_equal(st.health.description,
			    "connect /run/n/i2.sock: scripted connect failure");
	q->connect_fails = false;
	test_advance_step(t, 100);
	assert_true(test_status(t, REGISTRY_NODE, "nfs", &st));
	assert_true(st.health.healthy);
	assert_int_equal(q->connects, 2);
	assert_int_equal(q->clients, 1);
}

/* plugin_manager_ref hands out a controller's client, by type: a node plugin's name is not it. */
static void test_ref_controller(void **state)
{
	struct test_ctx *t = *state;
	struct fake_plugin *p = fake_add(t, "/run/c/i1.sock");
	struct plugin_ref ref;
	Csi__V1__ProbeRequest preq = CSI__V1__PROBE_REQUEST__INIT;
	Csi__V1__ProbeResponse *presp;
	struct csi_status cst;
	struct err e;

	assert_int_equal(plugin_manager_ref(t->pm, REGISTRY_CONTROLLER, "ctl", &ref, &e),
			 CSID_ENOTFOUND);
	assert_non_null(strstr(e.msg, "controller/ctl"));
	assert_int_equal(
	    registry_register(t->reg, REGISTRY_CONTROLLER, "ctl", "i1", p->endpoint, &e), 0);
	plugin_manager_step(t->pm);
	assert_int_equal(plugin_manager_ref(t->pm, REGISTRY_CONTROLLER, "ctl", &ref, &e), 0);
	assert_int_equal(ref.type, REGISTRY_CONTROLLER);
	assert_string_equal(ref.instance.instance_id, "i1");
	assert_true(
	    ref.fingerprint.controller_caps &
	    (1u << CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_UNPUBLISH_VOLUME));
	/* The manager's own connection, not a second one. */
	assert_int_equal(p->connects, 1);
	assert_int_equal(csi_probe(ref.client, &preq, &presp, 100, &cst), 0);
	csi_msg_free(&presp->base);
	plugin_ref_release(&ref);
	assert_int_equal(p->connects, 1);
	assert_int_equal(plugin_manager_ref(t->pm, REGISTRY_NODE, "ctl", &ref, &e), CSID_ENOTFOUND);
	assert_null(ref.client);
	assert_int_equal(plugin_manager_mounter_for_plugin(t->pm, "ctl", &ref, &e), CSID_ENOTFOUND);
}

static int64_t test_real_ms(void)
{
	return clock_now_ms(clock_real());
}

/* Polls cond() every few ms until it holds or deadline_ms pass. */
static bool test_poll(bool (*cond)(struct test_ctx *), struct test_ctx *t, int64_t deadline_ms)
{
	int64_t end = test_real_ms() + deadline_ms;
	struct timespec ts = {.tv_sec = 0, .tv_nsec = 2000000};

	while (!cond(t)) {
		if (test_real_ms() > end)
			return false;
		nanosleep(&ts, NULL);
	}
	return true;
}

static bool test_all_probing(struct test_ctx *t)
{
	int n = 0;

	pthread_mutex_lock(&test_mu);
	for (int i = 0; i < t->nfakes; i++)
		n += t->fakes[i].in_flight;
	pthread_mutex_unlock(&test_mu);
	return n == t->nfakes;
}

static void test_threads_parallel_shutdown(void **state)
{
	struct test_ctx *t = test_new(false, clock_real());
	struct instance_manager_status st;
	int64_t start, took;
	char ep[32], name[16];
	struct err e;

	*state = t;
	for (int i = 0; i < 4; i++) {
		snprintf(ep, sizeof(ep), "/run/p%d.sock", i);
		fake_add(t, ep);
		snprintf(name, sizeof(name), "p%d", i);
		assert_int_equal(registry_register(t->reg, REGISTRY_NODE, name, "i1", ep, &e), 0);
	}
	assert_int_equal(plugin_manager_start(t->pm, &e), 0);
	assert_int_equal(plugin_manager_start(t->pm, &e), CSID_EPRECOND);
	assert_int_equal(plugin_manager_wait_for_plugin(t->pm, REGISTRY_NODE, "p3", 10000, &st, &e),
			 0);
	assert_string_equal(st.instance.instance_id, "i1");
	/* Now make every Probe hang 500 ms and wait until all four hang at once. */
	pthread_mutex_lock(&test_mu);
	for (int i = 0; i < 4; i++)
		t->fakes[i].hang_ms = 500;
	pthread_mutex_unlock(&test_mu);
	/* Re-registering restarts each manager, whose first step probes. */
	for (int i = 0; i < 4; i++) {
		snprintf(ep, sizeof(ep), "/run/p%d.sock", i);
		snprintf(name, sizeof(name), "p%d", i);
		assert_int_equal(registry_register(t->reg, REGISTRY_NODE, name, "i1", ep, &e), 0);
	}
	assert_true(test_poll(test_all_probing, t, 10000));
	start = test_real_ms();
	plugin_manager_shutdown(t->pm);
	took = test_real_ms() - start;
	/* Every RPC in flight finished before shutdown returned... */
	assert_false(test_all_probing(t));
	for (int i = 0; i < 4; i++)
		assert_int_equal(t->fakes[i].in_flight, 0);
	/* ...and they were waited for in parallel: less than 4 x 500 ms. */
	assert_true(took < 1900);
	assert_int_equal(plugin_manager_wait_for_plugin(t->pm, REGISTRY_NODE, "p0", 0, NULL, &e),
			 CSID_ECANCELED);
}

static void test_probe_grpc_dead(void **state)
{
	struct registry_instance inst = {.instance_id = "i1"};
	int64_t timeout = 500;
	int64_t start = test_real_ms();

	/* Nothing listens there: dead, and found out within the deadline. */
	snprintf(inst.endpoint, sizeof(inst.endpoint), "unix:///tmp/csid-test-no-such-%d.sock",
		 (int)getpid());
	assert_false(plugin_manager_probe_grpc(&timeout, REGISTRY_NODE, "hp", &inst));
	assert_true(test_real_ms() - start < 5000);
	/* Not a valid endpoint at all. */
	snprintf(inst.endpoint, sizeof(inst.endpoint), "relative/path.sock");
	assert_false(plugin_manager_probe_grpc(NULL, REGISTRY_NODE, "hp", &inst));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_register_fingerprint, test_setup, test_teardown),
	    cmocka_unit_test_setup_teardown(test_health_change, test_setup, test_teardown),
	    cmocka_unit_test_setup_teardown(test_resync_repairs_missed_event, test_setup_manual,
					    test_teardown),
	    cmocka_unit_test_setup_teardown(test_instance_change, test_setup, test_teardown),
	    cmocka_unit_test_setup_teardown(test_active_deregistered_falls_back, test_setup,
					    test_teardown),
	    cmocka_unit_test_setup_teardown(test_wait_for_plugin, test_setup, test_teardown),
	    cmocka_unit_test_setup_teardown(test_wait_wakes_on_healthy, test_setup, test_teardown),
	    cmocka_unit_test_setup_teardown(test_hang_and_garbage, test_setup, test_teardown),
	    cmocka_unit_test_setup_teardown(test_down_backoff, test_setup, test_teardown),
	    cmocka_unit_test_setup_teardown(test_down_backoff_cap, test_setup, test_teardown),
	    cmocka_unit_test_setup_teardown(test_controller_without_service, test_setup,
					    test_teardown),
	    cmocka_unit_test_setup_teardown(test_ref_controller, test_setup, test_teardown),
	    cmocka_unit_test_teardown(test_threads_parallel_shutdown, test_teardown),
	    cmocka_unit_test(test_probe_grpc_dead),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
