/*
 * The registry and the plugin manager on real threads, the real clock and
 * the real gRPC client, against an in-process csi_server on a temporary
 * socket: registration to healthy and fingerprinted, a reference used for
 * a node RPC, health following Probe, the plugin going away and coming
 * back on the same socket, and a restored registry pruned with
 * plugin_manager_probe_grpc.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
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
#include "store/agent_db.h"
#include "csi/csi_server.h"
#include "util/arena.h"
#include "util/clock.h"

struct tpm {
	char dir[64];
	char sock[128];
	char endpoint[160];
	char db_path[128];
	sqlite3 *db;
	struct registry *reg;
	struct plugin_manager *pm;
	struct csi_server *server;
	atomic_bool not_ready;
};

static int tpm_handler(void *ctx, enum csi_rpc rpc, const ProtobufCMessage *req,
		       ProtobufCMessage **resp, struct arena *a, char *msg)
{
	struct tpm *t = ctx;

	switch (rpc) {
	case CSI_RPC_GET_PLUGIN_INFO: {
		Csi__V1__GetPluginInfoResponse *r = arena_alloc(a, sizeof(*r));

		csi__v1__get_plugin_info_response__init(r);
		r->name = arena_strdup(a, "it.csid.dev");
		r->vendor_version = arena_strdup(a, "0.1");
		*resp = &r->base;
		return CSI_OK;
	}
	case CSI_RPC_GET_PLUGIN_CAPABILITIES: {
		Csi__V1__GetPluginCapabilitiesResponse *r = arena_alloc(a, sizeof(*r));
		Csi__V1__PluginCapability *c = arena_alloc(a, sizeof(*c));
		Csi__V1__PluginCapability__Service *s = arena_alloc(a, sizeof(*s));
		Csi__V1__PluginCapability **cp = arena_alloc(a, sizeof(*cp));

		csi__v1__get_plugin_capabilities_response__init(r);
		csi__v1__plugin_capability__init(c);
		csi__v1__plugin_capability__service__init(s);
		s->type = CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__CONTROLLER_SERVICE;
		c->type_case = CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE;
		c->service = s;
		cp[0] = c;
		r->capabilities = cp;
		r->n_capabilities = 1;
		*resp = &r->base;
		return CSI_OK;
	}
	case CSI_RPC_CONTROLLER_GET_CAPABILITIES:
		*resp = NULL; /* an empty response: no capability */
		return CSI_OK;
	case CSI_RPC_NODE_GET_CAPABILITIES: {
		Csi__V1__NodeGetCapabilitiesResponse *r = arena_alloc(a, sizeof(*r));
		Csi__V1__NodeServiceCapability *c = arena_alloc(a, sizeof(*c));
		Csi__V1__NodeServiceCapability__RPC *rp = arena_alloc(a, sizeof(*rp));
		Csi__V1__NodeServiceCapability **cp = arena_alloc(a, sizeof(*cp));

		csi__v1__node_get_capabilities_response__init(r);
		csi__v1__node_service_capability__init(c);
		csi__v1__node_service_capability__rpc__init(rp);
		rp->type = CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__STAGE_UNSTAGE_VOLUME;
		c->type_case = CSI__V1__NODE_SERVICE_CAPABILITY__TYPE_RPC;
		c->rpc = rp;
		cp[0] = c;
		r->capabilities = cp;
		r->n_capabilities = 1;
		*resp = &r->base;
		return CSI_OK;
	}
	case CSI_RPC_NODE_GET_INFO: {
		Csi__V1__NodeGetInfoResponse *r = arena_alloc(a, sizeof(*r));

		csi__v1__node_get_info_response__init(r);
		r->node_id = arena_strdup(a, "n1");
		r->max_volumes_per_node = 3;
		*resp = &r->base;
		return CSI_OK;
	}
	case CSI_RPC_PROBE: {
		Csi__V1__ProbeResponse *r = arena_alloc(a, sizeof(*r));
		Google__Protobuf__BoolValue *b = arena_alloc(a, sizeof(*b));

		csi__v1__probe_response__init(r);
		google__protobuf__bool_value__init(b);
		b->value = !atomic_load(&t->not_ready);
		r->ready = b;
		*resp = &r->base;
		return CSI_OK;
	}
	default:
		snprintf(msg, CSI_STATUS_MSG_MAX, "not in this test plugin");
		return CSI_UNIMPLEMENTED;
	}
}

static void tpm_serve(struct tpm *t)
{
	struct err e;

	assert_int_equal(csi_server_new(t->endpoint, 2, tpm_handler, t, &t->server, &e), 0);
	assert_int_equal(csi_server_start(t->server, &e), 0);
}

static void tpm_unserve(struct tpm *t)
{
	csi_server_free(t->server);
	t->server = NULL;
}

static int tpm_setup(void **state)
{
	struct tpm *t = calloc(1, sizeof(*t));
	struct plugin_manager_config cfg = {0};
	struct err e;

	assert_non_null(t);
	snprintf(t->dir, sizeof(t->dir), "/tmp/csid-test-pm-XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	snprintf(t->sock, sizeof(t->sock), "%s/p.sock", t->dir);
	snprintf(t->endpoint, sizeof(t->endpoint), "unix://%s", t->sock);
	snprintf(t->db_path, sizeof(t->db_path), "%s/agent.db", t->dir);
	assert_int_equal(agent_db_open(t->db_path, &t->db, &e), 0);
	assert_int_equal(registry_new(NULL, t->db, &t->reg, &e), 0);
	cfg.registry = t->reg;
	cfg.probe_interval_ms = 100;
	cfg.fingerprint_interval_ms = 1000;
	cfg.rpc_timeout_ms = 1000;
	assert_int_equal(plugin_manager_new(&cfg, &t->pm, &e), 0);
	assert_int_equal(plugin_manager_start(t->pm, &e), 0);
	tpm_serve(t);
	*state = t;
	return 0;
}

static int tpm_teardown(void **state)
{
	struct tpm *t = *state;
	const char *suffix[] = {"", "-wal", "-shm"};
	char p[160];

	plugin_manager_free(t->pm);
	tpm_unserve(t);
	registry_free(t->reg);
	agent_db_close(t->db);
	for (size_t i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s%s", t->db_path, suffix[i]);
		unlink(p);
	}
	unlink(t->sock);
	rmdir(t->dir);
	free(t);
	return 0;
}

/* Polls until the node plugin's health is want, at most 5 s; returns its description. */
static bool tpm_wait_health(struct tpm *t, bool want, char *desc, size_t len)
{
	int64_t end = clock_now_ms(clock_real()) + 5000;
	struct timespec ts = {.tv_sec = 0, .tv_nsec = 5000000};
	struct instance_manager_status st;
	struct err e;

	while (clock_now_ms(clock_real()) < end) {
		int rc = plugin_manager_wait_for_plugin(t->pm, REGISTRY_NODE, "it", 0, &st, &e);

		if ((rc == 0) == want) {
			snprintf(desc, len, "%s", rc == 0 ? st.health.description : e.msg);
			return true;
		}
		nanosleep(&ts, NULL);
	}
	return false;
}

static void test_register_to_healthy(void **state)
{
	struct tpm *t = *state;
	Csi__V1__NodeGetInfoRequest req = CSI__V1__NODE_GET_INFO_REQUEST__INIT;
	Csi__V1__NodeGetInfoResponse *resp;
	struct instance_manager_status st;
	struct csi_status cst;
	struct plugin_ref ref;
	int64_t start, took;
	char desc[512];
	struct err e;

	start = clock_now_ms(clock_real());
	assert_int_equal(registry_register_monolith(t->reg, "it", "i1", t->endpoint, &e), 0);
	assert_int_equal(plugin_manager_wait_for_plugin(t->pm, REGISTRY_NODE, "it", 5000, &st, &e),
			 0);
	took = clock_now_ms(clock_real()) - start;
	print_message("registration to healthy and fingerprinted: %lld ms\n", (long long)took);
	assert_string_equal(st.fingerprint.plugin_name, "it.csid.dev");
	assert_string_equal(st.fingerprint.node_id, "n1");
	assert_int_equal(st.fingerprint.max_volumes, 3);
	assert_true(st.fingerprint.stage_unstage);
	assert_int_equal(
	    plugin_manager_wait_for_plugin(t->pm, REGISTRY_CONTROLLER, "it", 5000, &st, &e), 0);
	assert_int_equal(st.fingerprint.controller_caps, 0);

	/* The mounter's reference runs node RPCs over the manager's channel. */
	assert_int_equal(plugin_manager_mounter_for_plugin(t->pm, "it", &ref, &e), 0);
	assert_int_equal(csi_node_get_info(ref.client, &req, &resp, 1000, &cst), 0);
	assert_string_equal(resp->node_id, "n1");
	csi_msg_free(&resp->base);
	plugin_ref_release(&ref);

	/* Probe says not ready: unhealthy within a few probe intervals. */
	atomic_store(&t->not_ready, true);
	assert_true(tpm_wait_health(t, false, desc, sizeof(desc)));
	assert_non_null(strstr(desc, "Probe: plugin is not ready"));
	atomic_store(&t->not_ready, false);
	assert_true(tpm_wait_health(t, true, desc, sizeof(desc)));

	/* The plugin goes away, then comes back on the same socket. */
	tpm_unserve(t);
	assert_true(tpm_wait_health(t, false, desc, sizeof(desc)));
	assert_non_null(strstr(desc, "Probe: "));
	tpm_serve(t);
	assert_true(tpm_wait_health(t, true, desc, sizeof(desc)));
}

static void test_restore_and_prune(void **state)
{
	struct tpm *t = *state;
	struct registry *r2;
	int64_t timeout = 1000;
	sqlite3 *db2;
	struct err e;

	assert_int_equal(registry_register_monolith(t->reg, "it", "i1", t->endpoint, &e), 0);
	assert_int_equal(registry_register(t->reg, REGISTRY_NODE, "gone", "g1",
					   "unix:///tmp/csid-test-pm-nothing-here.sock", &e),
			 0);
	/* What a restarted agent does: restore, then probe each instance. */
	assert_int_equal(agent_db_open(t->db_path, &db2, &e), 0);
	assert_int_equal(registry_new(NULL, db2, &r2, &e), 0);
	assert_int_equal(registry_restore(r2, &e), 3);
	assert_int_equal(registry_prune(r2, plugin_manager_probe_grpc, &timeout, &e), 1);
	/* With the plugin stopped, its two registrations go too. */
	tpm_unserve(t);
	assert_int_equal(registry_prune(r2, plugin_manager_probe_grpc, &timeout, &e), 2);
	registry_free(r2);
	agent_db_close(db2);
	tpm_serve(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_register_to_healthy, tpm_setup, tpm_teardown),
	    cmocka_unit_test_setup_teardown(test_restore_and_prune, tpm_setup, tpm_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
