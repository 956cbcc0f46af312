/*
 * Unit tests of the server facade (src/server/server*.c) in virtual time,
 * on the memory store, with the reconciler stepped by hand and the fake
 * controller plugins of test/lib/csi_fake.h: plugin "ctl.csi" has no
 * controller service (registered volumes become ready without an RPC),
 * "down.csi" has one that is unavailable (its volumes fail and show their
 * status), and "pub.csi" has a working one with controller publish (the
 * whole claim cycle through the reconciler). Nodes report the plugins'
 * health and topology.
 *
 * Covered: register/create/get/list with filters and pages, claims under
 * compare-and-set (100 threads race for one single-writer volume), the
 * operator exits and what they say they skipped, delete, node TTL,
 * the plugins view, schedulability and topology refusals, expand/modify,
 * snapshots, the claim history (freed claims out of the volume record).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "csi_fake.h"
#include "server/server.h"
#include "server/server_gc.h"
#include "store/store.h"
#include "util/arena.h"
#include "util/clock.h"

#define T_PLUGIN "ctl.csi"
#define T_DOWN_PLUGIN "down.csi"
#define T_PUB_PLUGIN "pub.csi"
#define T_WALL 1700000000000LL

struct t_env {
	struct clock_fake clock;
	struct store *store;
	struct server *s;
	struct arena *a;
	struct csi_fake ctl, down, pub;
	/* What local_controllers reports (the server's own controller plugins). */
	struct server_local_controller local[2];
	size_t nlocal;
};

static size_t t_local(void *ctx, struct server_local_controller *out, size_t cap, struct arena *a)
{
	struct t_env *t = ctx;
	size_t n = t->nlocal < cap ? t->nlocal : cap;

	memcpy(out, t->local, n * sizeof(*out));
	return n;
}

static int t_setup(void **state)
{
	struct t_env *t = calloc(1, sizeof(*t));
	struct server_config cfg = {0};
	struct err e;

	assert_non_null(t);
	csi_fake_init(&t->ctl, T_PLUGIN);
	csi_fake_init(&t->down, T_DOWN_PLUGIN);
	csi_fake_init(&t->pub, T_PUB_PLUGIN);
	t->ctl.no_controller = true;
	t->down.down = true;
	t->ctl.next = &t->down;
	t->down.next = &t->pub;
	clock_fake_init(&t->clock, 1000, T_WALL);
	assert_int_equal(store_mem_new(&t->store, &e), 0);
	cfg.store = t->store;
	cfg.controllers = csi_fake_controllers(&t->ctl);
	cfg.clock = &t->clock.base;
	cfg.manual_reconciler = true;
	cfg.node_ttl_ms = 10000;
	cfg.backoff_min_ms = 1000;
	cfg.backoff_max_ms = 60000;
	cfg.local_controllers = t_local;
	cfg.local_controllers_ctx = t;
	if (server_new(&cfg, &t->s, &e) != 0)
		fail_msg("server_new: %s", e.msg);
	t->a = arena_new();
	assert_non_null(t->a);
	*state = t;
	return 0;
}

static int t_teardown(void **state)
{
	struct t_env *t = *state;

	server_free(t->s);
	store_close(t->store);
	arena_free(t->a);
	clock_fake_destroy(&t->clock);
	csi_fake_fini(&t->ctl);
	csi_fake_fini(&t->down);
	csi_fake_fini(&t->pub);
	free(t);
	return 0;
}

static void t_step(struct t_env *t)
{
	reconciler_step(server_reconciler(t->s));
}

/* Registers node id with a healthy node plugin of plugin in zone (NULL: no topology). */
static void t_node(struct t_env *t, const char *id, const char *plugin, bool healthy,
		   const char *zone)
{
	struct model_node n = {0};
	struct model_node_plugin p = {0};
	struct model_kv seg = {.key = "zone", .value = (char *)zone};
	char node_id[64];
	struct err e;

	snprintf(node_id, sizeof(node_id), "csi-%s", id);
	p.plugin_id = (char *)plugin;
	p.type = MODEL_PLUGIN_NODE;
	p.healthy = healthy;
	p.health = healthy ? "healthy" : "probe failed";
	p.version = "1.0.0";
	p.plugin_node_id = node_id;
	if (zone) {
		p.topology.segments.kv = &seg;
		p.topology.segments.n = 1;
	}
	n.id = (char *)id;
	n.plugins = &p;
	n.nplugins = 1;
	if (server_node_put(t->s, &n, t->a, NULL, &e) != 0)
		fail_msg("node put %s: %s", id, e.msg);
}

/* Registers volume id of plugin with one capability, then steps it to ready. */
static void t_volume(struct t_env *t, const char *id, const char *plugin, enum model_access access)
{
	struct model_capability cap = {.access = access, .attachment = MODEL_ATTACH_FILE_SYSTEM};
	struct model_volume spec = {0}, *out = NULL;
	struct err e;

	spec.id = (char *)id;
	spec.plugin_id = (char *)plugin;
	spec.external_id = (char *)id;
	spec.caps = &cap;
	spec.ncaps = 1;
	if (server_volume_register(t->s, &spec, t->a, &out, &e) != 0)
		fail_msg("register %s: %s", id, e.msg);
	assert_int_equal(out->state, MODEL_VOL_REGISTERING);
	t_step(t);
	assert_int_equal(server_volume_get(t->s, id, t->a, &out, &e), 0);
	assert_int_equal(out->state, MODEL_VOL_READY);
}

static int t_claim(struct t_env *t, const char *vol, const char *alloc, const char *node,
		   enum model_claim_mode mode, enum model_access access, struct err *e)
{
	struct model_claim_request req = {
	    .alloc_id = alloc,
	    .node_id = node,
	    .mode = mode,
	    .cap = {.access = access, .attachment = MODEL_ATTACH_FILE_SYSTEM}};
	struct model_volume *out = NULL;

	return server_volume_claim(t->s, vol, &req, t->a, &out, e);
}

static void t_contains(const char *text, const char *want)
{
	if (!text || !strstr(text, want))
		fail_msg("\"%s\" lacks \"%s\"", text ? text : "(null)", want);
}

/* ---- volumes ---- */

static void test_register_idempotent_and_get(void **state)
{
	struct t_env *t = *state;
	struct model_capability cap = {.access = MODEL_ACCESS_SINGLE_NODE_WRITER};
	struct model_volume spec = {0}, *out = NULL;
	struct err e;

	t_node(t, "n1", T_PLUGIN, true, NULL);
	spec.id = "data";
	spec.plugin_id = T_PLUGIN;
	spec.external_id = "ext-1";
	spec.caps = &cap;
	spec.ncaps = 1;
	assert_int_equal(server_volume_register(t->s, &spec, t->a, &out, &e), 0);
	assert_string_equal(out->name, "data");
	assert_string_equal(out->plugin_health, "healthy");
	assert_true(out->create_index > 0);
	/* The same spec again is the same volume; another spec under the ID is refused. */
	assert_int_equal(server_volume_register(t->s, &spec, t->a, &out, &e), 0);
	spec.external_id = "ext-2";
	assert_int_equal(server_volume_register(t->s, &spec, t->a, &out, &e), CSID_EEXIST);
	t_contains(e.msg, "data");
	/* Validation reports the problem, nothing is written. */
	spec.id = "bad";
	spec.external_id = NULL;
	assert_int_equal(server_volume_register(t->s, &spec, t->a, &out, &e), CSID_EINVAL);
	assert_int_equal(server_volume_get(t->s, "bad", t->a, &out, &e), CSID_ENOTFOUND);
	t_step(t);
	assert_int_equal(server_volume_get(t->s, "data", t->a, &out, &e), 0);
	assert_int_equal(out->state, MODEL_VOL_READY);
	assert_true(out->schedulable);
	assert_string_equal(out->plugin_health, "healthy");
	/* Registered again once ready: still the same spec. */
	spec.id = "data";
	spec.external_id = "ext-1";
	assert_int_equal(server_volume_register(t->s, &spec, t->a, &out, &e), 0);
	assert_int_equal(out->state, MODEL_VOL_READY);
}

static void t_list_ids(struct t_env *t, struct server_volume_filter *f, const char *want, bool more)
{
	struct model_volume **page = NULL;
	char got[256] = "", *next = NULL;
	uint64_t index = 0;
	size_t n = 0;
	struct err e;

	if (server_volume_list(t->s, f, t->a, &page, &n, &next, &index, &e) != 0)
		fail_msg("list: %s", e.msg);
	for (size_t i = 0; i < n; i++) {
		strncat(got, page[i]->id, sizeof(got) - strlen(got) - 2);
		strncat(got, " ", sizeof(got) - strlen(got) - 1);
	}
	assert_string_equal(got, want);
	assert_true(index > 0);
	assert_int_equal(next != NULL, more);
	f->next_token = next;
}

static void test_list_filters_and_pages(void **state)
{
	struct t_env *t = *state;
	struct server_volume_filter f = {0};
	struct err e;

	t_node(t, "n1", T_PLUGIN, true, NULL);
	t_node(t, "n2", T_DOWN_PLUGIN, true, NULL);
	t_volume(t, "a1", T_PLUGIN, MODEL_ACCESS_MULTI_NODE_MULTI_WRITER);
	t_volume(t, "a2", T_PLUGIN, MODEL_ACCESS_MULTI_NODE_MULTI_WRITER);
	t_volume(t, "a3", T_PLUGIN, MODEL_ACCESS_MULTI_NODE_MULTI_WRITER);
	t_volume(t, "b1", T_PLUGIN, MODEL_ACCESS_MULTI_NODE_MULTI_WRITER);
	t_volume(t, "c1", T_PLUGIN, MODEL_ACCESS_MULTI_NODE_MULTI_WRITER);
	f.per_page = 2;
	t_list_ids(t, &f, "a1 a2 ", true);
	t_list_ids(t, &f, "a3 b1 ", true);
	t_list_ids(t, &f, "c1 ", false);
	f = (struct server_volume_filter){.prefix = "a"};
	t_list_ids(t, &f, "a1 a2 a3 ", false);
	f = (struct server_volume_filter){.plugin_id = T_DOWN_PLUGIN};
	t_list_ids(t, &f, "", false);
	/* Node filter: claims on n1; the page fills with filtered records only. */
	assert_int_equal(t_claim(t, "a2", "w1", "n1", MODEL_CLAIM_WRITE,
				 MODEL_ACCESS_MULTI_NODE_MULTI_WRITER, &e),
			 0);
	assert_int_equal(t_claim(t, "c1", "w2", "n1", MODEL_CLAIM_WRITE,
				 MODEL_ACCESS_MULTI_NODE_MULTI_WRITER, &e),
			 0);
	f = (struct server_volume_filter){.node_id = "n1", .per_page = 1};
	t_list_ids(t, &f, "a2 ", true);
	t_list_ids(t, &f, "c1 ", false);
}

/* ---- claims ---- */

#define T_RACERS 100

struct t_racer {
	struct server *s;
	const char *volume;
	enum model_access access;
	char alloc[32];
	int rc;
	char msg[ERR_MSG_MAX];
};

static void *t_race_main(void *arg)
{
	struct t_racer *r = arg;
	struct model_claim_request req = {.alloc_id = r->alloc,
					  .node_id = "n1",
					  .mode = MODEL_CLAIM_WRITE,
					  .cap = {.access = r->access}};
	struct arena *a = arena_new();
	struct model_volume *out = NULL;
	struct err e;

	err_clear(&e);
	r->rc = server_volume_claim(r->s, r->volume, &req, a, &out, &e);
	snprintf(r->msg, sizeof(r->msg), "%s", e.msg);
	arena_free(a);
	return NULL;
}

/* T_RACERS threads claim volume for writing on node n1 at once, each its own alloc. */
static void t_race(struct t_env *t, const char *volume, enum model_access access,
		   struct t_racer *racers)
{
	pthread_t th[T_RACERS];

	for (int i = 0; i < T_RACERS; i++) {
		racers[i].s = t->s;
		racers[i].volume = volume;
		racers[i].access = access;
		snprintf(racers[i].alloc, sizeof(racers[i].alloc), "alloc-%d", i);
		assert_int_equal(pthread_create(&th[i], NULL, t_race_main, &racers[i]), 0);
	}
	for (int i = 0; i < T_RACERS; i++)
		pthread_join(th[i], NULL);
}

static void test_claim_race_one_winner(void **state)
{
	struct t_env *t = *state;
	struct t_racer racers[T_RACERS];
	struct model_volume *v = NULL;
	const char *winner = NULL;
	char want[64];
	int wins = 0;
	struct err e;

	t_node(t, "n1", T_PLUGIN, true, NULL);
	t_volume(t, "solo", T_PLUGIN, MODEL_ACCESS_SINGLE_NODE_SINGLE_WRITER);
	t_race(t, "solo", MODEL_ACCESS_SINGLE_NODE_SINGLE_WRITER, racers);
	for (int i = 0; i < T_RACERS; i++)
		if (racers[i].rc == 0) {
			wins++;
			winner = racers[i].alloc;
		}
	assert_int_equal(wins, 1);
	snprintf(want, sizeof(want), "alloc %s", winner);
	for (int i = 0; i < T_RACERS; i++) {
		if (racers[i].rc == 0)
			continue;
		if (racers[i].rc != CSID_ECONFLICT)
			fail_msg("%s: rc %d: %s", racers[i].alloc, racers[i].rc, racers[i].msg);
		t_contains(racers[i].msg, want);
	}
	assert_int_equal(server_volume_get(t->s, "solo", t->a, &v, &e), 0);
	assert_int_equal(v->nclaims, 1);
	assert_string_equal(v->claims[0].alloc_id, winner);
	/* The winner claiming again is granted again, without a write. */
	uint64_t before = store_index(t->store);

	assert_int_equal(t_claim(t, "solo", winner, "n1", MODEL_CLAIM_WRITE,
				 MODEL_ACCESS_SINGLE_NODE_SINGLE_WRITER, &e),
			 0);
	assert_int_equal(store_index(t->store), before);
}

/* 100 writers on a multi-writer volume: every claim is kept (no lost update). */
static void test_claim_race_no_lost_update(void **state)
{
	struct t_env *t = *state;
	struct t_racer racers[T_RACERS];
	struct model_volume *v = NULL;
	struct err e;

	t_node(t, "n1", T_PLUGIN, true, NULL);
	t_volume(t, "many", T_PLUGIN, MODEL_ACCESS_MULTI_NODE_MULTI_WRITER);
	t_race(t, "many", MODEL_ACCESS_MULTI_NODE_MULTI_WRITER, racers);
	for (int i = 0; i < T_RACERS; i++)
		if (racers[i].rc != 0)
			fail_msg("%s: rc %d: %s", racers[i].alloc, racers[i].rc, racers[i].msg);
	assert_int_equal(server_volume_get(t->s, "many", t->a, &v, &e), 0);
	assert_int_equal(v->nclaims, T_RACERS);
	for (int i = 0; i < T_RACERS; i++)
		assert_non_null(model_volume_claim(v, racers[i].alloc));
}

static void test_claim_refusals(void **state)
{
	struct t_env *t = *state;
	struct model_volume *v = NULL;
	struct err e;

	t_node(t, "n1", T_PLUGIN, true, NULL);
	t_volume(t, "v", T_PLUGIN, MODEL_ACCESS_SINGLE_NODE_WRITER);
	assert_int_equal(
	    t_claim(t, "nope", "a", "n1", MODEL_CLAIM_READ, MODEL_ACCESS_SINGLE_NODE_WRITER, &e),
	    CSID_ENOTFOUND);
	assert_int_equal(
	    t_claim(t, "v", "a", "ghost", MODEL_CLAIM_READ, MODEL_ACCESS_SINGLE_NODE_WRITER, &e),
	    CSID_EPRECOND);
	t_contains(e.msg, "node ghost is not registered");
	assert_int_equal(
	    t_claim(t, "v", "a/b", "n1", MODEL_CLAIM_READ, MODEL_ACCESS_SINGLE_NODE_WRITER, &e),
	    CSID_EINVAL);
	assert_int_equal(
	    t_claim(t, "v", "a", "n1", MODEL_CLAIM_READ, MODEL_ACCESS_MULTI_NODE_MULTI_WRITER, &e),
	    CSID_EINVAL);
	t_contains(e.msg, "not one of its capabilities");
	/* A store that fails the write: the error says where, and nothing is claimed. */
	store_mem_fail_txn(t->store, CSID_EIO, 1);
	assert_int_equal(
	    t_claim(t, "v", "a", "n1", MODEL_CLAIM_WRITE, MODEL_ACCESS_SINGLE_NODE_WRITER, &e),
	    CSID_EIO);
	t_contains(e.msg, "volume v: write");
	assert_int_equal(server_volume_get(t->s, "v", t->a, &v, &e), 0);
	assert_int_equal(v->nclaims, 0);
	assert_int_equal(
	    t_claim(t, "v", "a", "n1", MODEL_CLAIM_WRITE, MODEL_ACCESS_SINGLE_NODE_WRITER, &e), 0);
}

/* ---- operator exits ---- */

/* A node whose controller plugin requires publish, so claims get publications; zone z1. */
static void t_node_with_controller(struct t_env *t, const char *id, const char *plugin,
				   bool ctl_healthy)
{
	struct model_node n = {0};
	struct model_node_plugin p[2] = {{0}};
	char *caps[] = {"CREATE_DELETE_VOLUME", "PUBLISH_UNPUBLISH_VOLUME"};
	/* The zone the fake controller puts its volumes in. */
	struct model_kv seg = {.key = "zone", .value = "z1"};
	struct err e;

	p[0].plugin_id = (char *)plugin;
	p[0].type = MODEL_PLUGIN_NODE;
	p[0].healthy = true;
	p[0].health = "healthy";
	p[0].version = "1.0.0";
	p[0].plugin_node_id = "csi-node";
	p[0].topology.segments.kv = &seg;
	p[0].topology.segments.n = 1;
	p[1].plugin_id = (char *)plugin;
	p[1].type = MODEL_PLUGIN_CONTROLLER;
	p[1].healthy = ctl_healthy;
	p[1].health = ctl_healthy ? "healthy" : "Probe: UNAVAILABLE";
	p[1].version = "1.1.0";
	p[1].caps = caps;
	p[1].ncaps = 2;
	n.id = (char *)id;
	n.plugins = p;
	n.nplugins = 2;
	if (server_node_put(t->s, &n, t->a, NULL, &e) != 0)
		fail_msg("node put: %s", e.msg);
}

static void test_release_and_force_free(void **state)
{
	struct t_env *t = *state;
	struct model_volume *v = NULL;
	char *skipped = NULL;
	struct err e;

	t_node(t, "n2", T_PLUGIN, true, NULL);
	t_volume(t, "shared", T_PLUGIN, MODEL_ACCESS_MULTI_NODE_MULTI_WRITER);
	t_node_with_controller(t, "n1", T_PLUGIN, true);
	assert_int_equal(t_claim(t, "shared", "a1", "n1", MODEL_CLAIM_WRITE,
				 MODEL_ACCESS_MULTI_NODE_MULTI_WRITER, &e),
			 0);
	assert_int_equal(t_claim(t, "shared", "a2", "n2", MODEL_CLAIM_WRITE,
				 MODEL_ACCESS_MULTI_NODE_MULTI_WRITER, &e),
			 0);
	assert_int_equal(server_volume_get(t->s, "shared", t->a, &v, &e), 0);
	assert_int_equal(v->npubs, 2);
	/*
	 * A plain release: the node side is done; the reconciler does the
	 * rest. The reason the node gave (its claim owner was gone) is in the
	 * claim's note.
	 */
	assert_int_equal(server_volume_release_why(t->s, "shared", "a2", false,
						   "owner pid 1234 exited", t->a, &v, &skipped, &e),
			 0);
	assert_null(skipped);
	assert_int_equal(model_volume_claim(v, "a2")->state, MODEL_CLAIM_NODE_UNPUBLISHED);
	assert_string_equal(model_volume_claim(v, "a2")->note, "released: owner pid 1234 exited");
	/* No claim on n2 needs its publication: marked for unpublishing in the same write. */
	assert_int_equal(model_volume_pub(v, "n2")->state, MODEL_PUB_UNPUBLISHING);
	assert_int_equal(model_volume_pub(v, "n1")->state, MODEL_PUB_PUBLISHING);
	/*
	 * Force-free: frees the claim at once and says what it did not wait
	 * for; the publication stays, marked for the reconciler to unpublish.
	 */
	assert_int_equal(server_volume_release(t->s, "shared", "a1", true, t->a, &v, &skipped, &e),
			 0);
	t_contains(skipped, "node unpublish on node n1");
	t_contains(skipped, "controller unpublish from node n1");
	assert_null(model_volume_claim(v, "a1"));
	assert_non_null(model_volume_pub(v, "n1"));
	assert_int_equal(model_volume_pub(v, "n1")->state, MODEL_PUB_UNPUBLISHING);
	assert_int_equal(v->npast_claims, 1);
	assert_string_equal(v->past_claims[0].alloc_id, "a1");
	assert_int_equal(v->past_claims[0].state, MODEL_CLAIM_FREED);
	/* Released again: already free, nothing to say. */
	assert_int_equal(server_volume_release(t->s, "shared", "a1", true, t->a, &v, &skipped, &e),
			 0);
	assert_null(skipped);
	assert_int_equal(server_volume_release(t->s, "shared", "zz", false, t->a, &v, &skipped, &e),
			 CSID_ENOTFOUND);
	t_contains(e.msg, "alloc zz holds no claim");
	/* b1 released while b2 on the same node is still claimed: the publication stays. */
	t_volume(t, "two", T_PLUGIN, MODEL_ACCESS_MULTI_NODE_MULTI_WRITER);
	for (int i = 0; i < 2; i++)
		assert_int_equal(t_claim(t, "two", i ? "b2" : "b1", "n1", MODEL_CLAIM_WRITE,
					 MODEL_ACCESS_MULTI_NODE_MULTI_WRITER, &e),
				 0);
	assert_int_equal(server_volume_release(t->s, "two", "b1", false, t->a, &v, &skipped, &e),
			 0);
	assert_int_equal(model_volume_claim(v, "b1")->state, MODEL_CLAIM_NODE_UNPUBLISHED);
	assert_int_equal(model_volume_pub(v, "n1")->state, MODEL_PUB_PUBLISHING);
	assert_int_equal(server_volume_release(t->s, "two", "b2", false, t->a, &v, &skipped, &e),
			 0);
	assert_int_equal(model_volume_pub(v, "n1")->state, MODEL_PUB_UNPUBLISHING);
}

static void test_detach(void **state)
{
	struct t_env *t = *state;
	struct model_volume *v = NULL;
	char *skipped = NULL;
	struct err e;

	t_node(t, "n1", T_PLUGIN, true, NULL);
	t_node(t, "n2", T_PLUGIN, true, NULL);
	t_volume(t, "ro", T_PLUGIN, MODEL_ACCESS_MULTI_NODE_READER_ONLY);
	assert_int_equal(
	    t_claim(t, "ro", "r1", "n1", MODEL_CLAIM_READ, MODEL_ACCESS_MULTI_NODE_READER_ONLY, &e),
	    0);
	assert_int_equal(
	    t_claim(t, "ro", "r2", "n1", MODEL_CLAIM_READ, MODEL_ACCESS_MULTI_NODE_READER_ONLY, &e),
	    0);
	assert_int_equal(
	    t_claim(t, "ro", "r3", "n2", MODEL_CLAIM_READ, MODEL_ACCESS_MULTI_NODE_READER_ONLY, &e),
	    0);
	assert_int_equal(server_volume_detach(t->s, "ro", "n1", t->a, &v, &skipped, &e), 0);
	t_contains(skipped, "from node n1 without node unpublish of alloc r1, r2");
	assert_int_equal(model_volume_claim(v, "r1")->state, MODEL_CLAIM_NODE_UNPUBLISHED);
	assert_int_equal(model_volume_claim(v, "r2")->state, MODEL_CLAIM_NODE_UNPUBLISHED);
	assert_int_equal(model_volume_claim(v, "r3")->state, MODEL_CLAIM_CLAIMED);
	/* Again: nothing left to skip. */
	assert_int_equal(server_volume_detach(t->s, "ro", "n1", t->a, &v, &skipped, &e), 0);
	assert_null(skipped);
}

static void test_deregister_and_delete(void **state)
{
	struct t_env *t = *state;
	struct model_volume *v = NULL;
	char *skipped = NULL;
	struct err e;

	t_node_with_controller(t, "n1", T_PLUGIN, true);
	t_volume(t, "gone", T_PLUGIN, MODEL_ACCESS_SINGLE_NODE_WRITER);
	t_volume(t, "del", T_PLUGIN, MODEL_ACCESS_SINGLE_NODE_WRITER);
	t_volume(t, "free", T_PLUGIN, MODEL_ACCESS_SINGLE_NODE_WRITER);
	assert_int_equal(
	    t_claim(t, "gone", "w1", "n1", MODEL_CLAIM_WRITE, MODEL_ACCESS_SINGLE_NODE_WRITER, &e),
	    0);
	assert_int_equal(server_volume_deregister(t->s, "gone", false, t->a, &skipped, &e),
			 CSID_ECONFLICT);
	t_contains(e.msg, "alloc w1 on node n1");
	assert_int_equal(server_volume_deregister(t->s, "gone", true, t->a, &skipped, &e), 0);
	t_contains(skipped, "without releasing the claims of alloc w1 on node n1");
	t_contains(skipped, "controller unpublish from node n1");
	assert_int_equal(server_volume_get(t->s, "gone", t->a, &v, &e), CSID_ENOTFOUND);
	/* Nothing held: a plain deregister, nothing skipped. */
	assert_int_equal(server_volume_deregister(t->s, "free", false, t->a, &skipped, &e), 0);
	assert_null(skipped);
	assert_int_equal(server_volume_deregister(t->s, "free", false, t->a, &skipped, &e),
			 CSID_ENOTFOUND);
	/* Delete waits for the claims, then records the wish. */
	assert_int_equal(
	    t_claim(t, "del", "w2", "n1", MODEL_CLAIM_WRITE, MODEL_ACCESS_SINGLE_NODE_WRITER, &e),
	    0);
	assert_int_equal(server_volume_delete(t->s, "del", t->a, &v, &e), CSID_ECONFLICT);
	t_contains(e.msg, "alloc w2 on node n1");
	assert_int_equal(server_volume_release(t->s, "del", "w2", true, t->a, &v, &skipped, &e), 0);
	assert_int_equal(server_volume_delete(t->s, "del", t->a, &v, &e), 0);
	assert_int_equal(v->state, MODEL_VOL_DELETING);
	assert_int_equal(server_volume_delete(t->s, "del", t->a, &v, &e), 0);
	/* A claim being released does not hold the delete back: the reconciler frees it first. */
	t_volume(t, "rel", T_PLUGIN, MODEL_ACCESS_SINGLE_NODE_WRITER);
	assert_int_equal(
	    t_claim(t, "rel", "w3", "n1", MODEL_CLAIM_WRITE, MODEL_ACCESS_SINGLE_NODE_WRITER, &e),
	    0);
	assert_int_equal(server_volume_release(t->s, "rel", "w3", false, t->a, &v, &skipped, &e),
			 0);
	assert_int_equal(v->nclaims, 1);
	assert_int_not_equal(v->claims[0].state, MODEL_CLAIM_CLAIMED);
	assert_int_equal(server_volume_delete(t->s, "rel", t->a, &v, &e), 0);
	assert_int_equal(v->state, MODEL_VOL_DELETING);
	assert_int_equal(v->nclaims, 1);
}

/* ---- nodes, plugins, schedulability ---- */

static void test_node_ttl(void **state)
{
	struct t_env *t = *state;
	struct server_health h;
	struct model_node *n = NULL;
	uint64_t index;
	int64_t next;
	struct err e;

	t_node(t, "n1", T_PLUGIN, true, NULL);
	t_volume(t, "v", T_PLUGIN, MODEL_ACCESS_SINGLE_NODE_WRITER);
	index = store_index(t->store);
	/* A heartbeat that changes nothing writes nothing. */
	clock_fake_advance(&t->clock, 6000);
	t_node(t, "n1", T_PLUGIN, true, NULL);
	assert_int_equal(store_index(t->store), index);
	/* Next due: the lost-claim pass, every half TTL (before the TTL ends). */
	next = server_tick(t->s);
	assert_int_equal(next, clock_now_ms(&t->clock.base) + 5000);
	clock_fake_advance(&t->clock, 5000);
	assert_int_equal(server_tick(t->s), clock_now_ms(&t->clock.base) + 5000);
	clock_fake_advance(&t->clock, 4999);
	server_tick(t->s);
	assert_int_equal(server_node_get(t->s, "n1", t->a, &n, &e), 0);
	assert_int_equal(n->status, MODEL_NODE_READY);
	clock_fake_advance(&t->clock, 1);
	/* Down: only the pass is due any more. */
	assert_int_equal(server_tick(t->s), clock_now_ms(&t->clock.base) + 5000);
	assert_int_equal(server_node_get(t->s, "n1", t->a, &n, &e), 0);
	assert_int_equal(n->status, MODEL_NODE_DOWN);
	assert_int_equal(store_index(t->store), index + 1);
	server_health(t->s, &h);
	assert_int_equal(h.nodes_down, 1);
	assert_int_equal(h.nodes_ready, 0);
	assert_string_equal(h.store_backend, "memory");
	assert_int_equal(
	    t_claim(t, "v", "a", "n1", MODEL_CLAIM_WRITE, MODEL_ACCESS_SINGLE_NODE_WRITER, &e),
	    CSID_EPRECOND);
	t_contains(e.msg, "node n1 is down");
	/* A heartbeat brings it back (a transition: written). */
	t_node(t, "n1", T_PLUGIN, true, NULL);
	assert_int_equal(store_index(t->store), index + 2);
	assert_int_equal(server_node_get(t->s, "n1", t->a, &n, &e), 0);
	assert_int_equal(n->status, MODEL_NODE_READY);
	assert_int_equal(
	    t_claim(t, "v", "a", "n1", MODEL_CLAIM_WRITE, MODEL_ACCESS_SINGLE_NODE_WRITER, &e), 0);
}

/* Two agents with one node name: the second is refused while the first is live. */
static void test_node_duplicate_instance(void **state)
{
	struct t_env *t = *state;
	struct model_node n = {.id = "n1"}, *got = NULL;
	char ta[MODEL_INSTANCE_TAG_LEN + 1], tb[MODEL_INSTANCE_TAG_LEN + 1], want[96];
	struct err e;

	model_node_instance_tag("agent-a", ta);
	model_node_instance_tag("agent-b", tb);
	assert_string_not_equal(ta, tb);
	n.instance_id = "agent-a";
	assert_int_equal(server_node_put(t->s, &n, t->a, NULL, &e), 0);
	clock_fake_advance(&t->clock, 3000);
	n.instance_id = "agent-b";
	assert_int_equal(server_node_put(t->s, &n, t->a, NULL, &e), CSID_ECONFLICT);
	/* Instance IDs are credentials: the message names their tags. */
	snprintf(want, sizeof(want), "node n1 is held by live agent instance %s", ta);
	t_contains(e.msg, want);
	assert_null(strstr(e.msg, "agent-a"));
	assert_null(strstr(e.msg, "agent-b"));
	t_contains(e.msg, "last heartbeat 3000 ms ago");
	assert_int_equal(server_node_get(t->s, "n1", t->a, &got, &e), 0);
	assert_string_equal(got->instance_id, "agent-a");
	/* The holder's heartbeat goes on; an operator's PUT (no instance) is not checked. */
	n.instance_id = "agent-a";
	assert_int_equal(server_node_put(t->s, &n, t->a, NULL, &e), 0);
	n.instance_id = NULL;
	assert_int_equal(server_node_put(t->s, &n, t->a, NULL, &e), 0);
	n.instance_id = "agent-a";
	assert_int_equal(server_node_put(t->s, &n, t->a, NULL, &e), 0);
	/* Silent for the TTL: the node is down and another instance may take it over. */
	clock_fake_advance(&t->clock, 10000);
	server_tick(t->s);
	n.instance_id = "agent-b";
	assert_int_equal(server_node_put(t->s, &n, t->a, &got, &e), 0);
	assert_string_equal(got->instance_id, "agent-b");
	assert_int_equal(got->status, MODEL_NODE_READY);
	n.instance_id = "agent-a";
	assert_int_equal(server_node_put(t->s, &n, t->a, NULL, &e), CSID_ECONFLICT);
	snprintf(want, sizeof(want), "held by live agent instance %s", tb);
	t_contains(e.msg, want);
}

/* Which agent instance may act for a node: the one that holds it (claims: while ready). */
static void test_node_instance_check(void **state)
{
	struct t_env *t = *state;
	struct model_node n = {.id = "n1", .instance_id = "agent-a"};
	struct err e;

	/* An operator's request (no instance) is not checked, even for an unknown node. */
	assert_int_equal(server_node_instance_check(t->s, "n1", NULL, "claim", true, &e), 0);
	/* Unknown: a claim waits for the registration; anything else is refused. */
	assert_int_equal(server_node_instance_check(t->s, "n1", "agent-a", "claim", true, &e),
			 CSID_EPRECOND);
	t_contains(e.msg, "not registered");
	assert_int_equal(server_node_instance_check(t->s, "n1", "agent-a", "release", false, &e),
			 CSID_EPERM);
	assert_int_equal(server_node_put(t->s, &n, t->a, NULL, &e), 0);
	assert_int_equal(server_node_instance_check(t->s, "n1", "agent-a", "claim", true, &e), 0);
	/* Another instance, or one that differs in its last byte or length. */
	assert_int_equal(server_node_instance_check(t->s, "n1", "agent-b", "claim", true, &e),
			 CSID_EPERM);
	t_contains(e.msg, "a node may act only for itself");
	assert_null(strstr(e.msg, "agent-"));
	assert_int_equal(server_node_instance_check(t->s, "n1", "agent-", "claim", true, &e),
			 CSID_EPERM);
	assert_int_equal(server_node_instance_check(t->s, "n1", "agent-aa", "claim", true, &e),
			 CSID_EPERM);
	/* Down: no claim until a heartbeat, but the holder may still release and stage. */
	clock_fake_advance(&t->clock, 20000);
	server_tick(t->s);
	assert_int_equal(server_node_instance_check(t->s, "n1", "agent-a", "claim", true, &e),
			 CSID_EPRECOND);
	t_contains(e.msg, "down");
	assert_int_equal(server_node_instance_check(t->s, "n1", "agent-a", "release", false, &e),
			 0);
	assert_int_equal(server_node_instance_check(t->s, "n1", "agent-b", "release", false, &e),
			 CSID_EPERM);
	/* A node registered without an instance cannot be acted for by an agent. */
	n.id = "n2";
	n.instance_id = NULL;
	assert_int_equal(server_node_put(t->s, &n, t->a, NULL, &e), 0);
	assert_int_equal(server_node_instance_check(t->s, "n2", "agent-a", "claim", true, &e),
			 CSID_EPERM);
	/*
	 * Another node's record that does not decode (the decoded node cache
	 * cannot be built): a node's own record still answers its check.
	 */
	{
		struct store_op bad = {STORE_OP_PUT, STORE_NODE, "n3", "{", 1, STORE_ANY};
		uint64_t index = 0;

		assert_int_equal(store_txn(t->store, &bad, 1, &index, &e), 0);
	}
	assert_int_equal(server_node_instance_check(t->s, "n1", "agent-a", "release", false, &e),
			 0);
	assert_int_equal(server_node_instance_check(t->s, "n1", "agent-b", "release", false, &e),
			 CSID_EPERM);
}

static void test_plugins_view(void **state)
{
	struct t_env *t = *state;
	struct server_plugin *all = NULL, *p = NULL;
	size_t n = 0;
	struct err e;

	t_node_with_controller(t, "n1", T_PLUGIN, false);
	t_node(t, "n2", T_PLUGIN, false, NULL);
	t_node(t, "n3", T_PLUGIN, true, NULL);
	t->local[0].plugin_id = T_PLUGIN;
	t->local[0].healthy = true;
	t->local[0].health = "healthy";
	t->local[0].version = "2.0.0";
	/* CREATE_DELETE_VOLUME, and bits 0 and 63 that have no name. */
	t->local[0].controller_caps = 1u << 1 | 1u | (uint64_t)1 << 63;
	t->local[1].plugin_id = "solo.csi";
	t->local[1].health = "not registered yet";
	t->nlocal = 2;
	assert_int_equal(server_plugin_list(t->s, t->a, &all, &n, &e), 0);
	assert_int_equal(n, 2);
	assert_string_equal(all[0].id, T_PLUGIN);
	assert_string_equal(all[1].id, "solo.csi");
	assert_int_equal(server_plugin_get(t->s, T_PLUGIN, t->a, &p, &e), 0);
	assert_true(p->controller_required);
	assert_int_equal(p->controllers_expected, 2);
	assert_int_equal(p->controllers_healthy, 1);
	assert_int_equal(p->nodes_expected, 3);
	assert_int_equal(p->nodes_healthy, 2);
	assert_int_equal(p->nversions, 3);
	assert_int_equal(p->ninstances, 5);
	assert_int_equal(p->ncontroller_caps, 2);
	assert_string_equal(p->controller_caps[0], "CREATE_DELETE_VOLUME");
	assert_string_equal(p->controller_caps[1], "PUBLISH_UNPUBLISH_VOLUME");
	assert_int_equal(server_plugin_get(t->s, "solo.csi", t->a, &p, &e), 0);
	assert_int_equal(p->controllers_expected, 1);
	assert_int_equal(p->controllers_healthy, 0);
	/* Not registered yet: whether it needs ControllerPublishVolume is unknown. */
	assert_int_equal(p->controllers_unknown, 1);
	assert_null(p->instances[0].node_id);
	assert_int_equal(server_plugin_get(t->s, "none.csi", t->a, &p, &e), CSID_ENOTFOUND);
	/* A node that goes down takes its plugins' health with it. */
	clock_fake_advance(&t->clock, 10000);
	server_tick(t->s);
	assert_int_equal(server_plugin_get(t->s, T_PLUGIN, t->a, &p, &e), 0);
	assert_int_equal(p->nodes_healthy, 0);
	assert_int_equal(p->controllers_healthy, 1);
}

static void test_schedulability(void **state)
{
	struct t_env *t = *state;
	struct model_volume *v = NULL;
	struct err e;

	t_node_with_controller(t, "n1", T_PLUGIN, false);
	t_node(t, "n2", "other.csi", true, NULL);
	t_volume(t, "v", T_PLUGIN, MODEL_ACCESS_SINGLE_NODE_WRITER);
	assert_int_equal(server_volume_get(t->s, "v", t->a, &v, &e), 0);
	assert_false(v->schedulable);
	t_contains(v->plugin_health, "no healthy controller");
	assert_int_equal(
	    t_claim(t, "v", "a", "n1", MODEL_CLAIM_WRITE, MODEL_ACCESS_SINGLE_NODE_WRITER, &e),
	    CSID_EPRECOND);
	t_contains(e.msg, "no healthy controller");
	/* The controller is back; the node without the node plugin is still refused. */
	t_node_with_controller(t, "n1", T_PLUGIN, true);
	assert_int_equal(server_volume_get(t->s, "v", t->a, &v, &e), 0);
	assert_true(v->schedulable);
	assert_int_equal(
	    t_claim(t, "v", "a", "n2", MODEL_CLAIM_WRITE, MODEL_ACCESS_SINGLE_NODE_WRITER, &e),
	    CSID_EPRECOND);
	t_contains(e.msg, "no healthy node plugin on node n2");
	assert_int_equal(
	    t_claim(t, "v", "a", "n1", MODEL_CLAIM_WRITE, MODEL_ACCESS_SINGLE_NODE_WRITER, &e), 0);
}

static void test_topology_refusal(void **state)
{
	struct t_env *t = *state;
	struct model_capability cap = {.access = MODEL_ACCESS_MULTI_NODE_READER_ONLY};
	struct model_kv seg = {.key = "zone", .value = "a"};
	struct model_topology req = {.segments = {.kv = &seg, .n = 1}};
	struct model_volume spec = {0}, *out = NULL;
	struct err e;

	t_node(t, "in-a", T_PLUGIN, true, "a");
	t_node(t, "in-b", T_PLUGIN, true, "b");
	spec.id = "zonal";
	spec.plugin_id = T_PLUGIN;
	spec.external_id = "ext-z";
	spec.caps = &cap;
	spec.ncaps = 1;
	spec.requisite = &req;
	spec.nrequisite = 1;
	assert_int_equal(server_volume_register(t->s, &spec, t->a, &out, &e), 0);
	t_step(t);
	assert_int_equal(t_claim(t, "zonal", "r1", "in-b", MODEL_CLAIM_READ,
				 MODEL_ACCESS_MULTI_NODE_READER_ONLY, &e),
			 CSID_EPRECOND);
	t_contains(e.msg, "topology");
	assert_int_equal(t_claim(t, "zonal", "r1", "in-a", MODEL_CLAIM_READ,
				 MODEL_ACCESS_MULTI_NODE_READER_ONLY, &e),
			 0);
}

/* ---- reconciler status, expand, modify ---- */

static void test_failing_volume_shows_status(void **state)
{
	struct t_env *t = *state;
	struct model_capability cap = {.access = MODEL_ACCESS_SINGLE_NODE_WRITER};
	struct model_volume spec = {0}, *out = NULL, **page = NULL;
	struct server_volume_filter f = {0};
	char *next = NULL;
	size_t n = 0;
	struct err e;

	spec.id = "new";
	spec.plugin_id = T_DOWN_PLUGIN;
	spec.caps = &cap;
	spec.ncaps = 1;
	spec.capacity_min = 1 << 20;
	assert_int_equal(server_volume_create(t->s, &spec, t->a, &out, &e), 0);
	assert_int_equal(out->state, MODEL_VOL_CREATING);
	assert_int_equal(out->status.attempts, 0);
	t_step(t);
	assert_int_equal(server_volume_get(t->s, "new", t->a, &out, &e), 0);
	assert_int_equal(out->state, MODEL_VOL_CREATING);
	assert_int_equal(out->status.attempts, 1);
	t_contains(out->status.last_error, "no healthy controller for plugin down.csi");
	assert_true(out->status.next_attempt_ms > T_WALL);
	assert_int_equal(server_volume_list(t->s, &f, t->a, &page, &n, &next, NULL, &e), 0);
	assert_int_equal(n, 1);
	assert_int_equal(page[0]->status.attempts, 1);
	/* Expanding or modifying a volume that is not ready is refused. */
	assert_int_equal(server_volume_expand(t->s, "new", 2 << 20, t->a, &out, &e), CSID_EPRECOND);
}

/* ControllerGetCapabilities bits (CSI enum values). */
#define T_CAP_CREATE ((uint64_t)1 << 1)
#define T_CAP_EXPAND ((uint64_t)1 << 9)

/* The server's own controller of plugin, healthy, with caps (0: not fingerprinted). */
static void t_local_ctl(struct t_env *t, const char *plugin, uint64_t caps)
{
	t->local[0] = (struct server_local_controller){.plugin_id = plugin,
						       .healthy = caps != 0,
						       .health = caps ? "healthy" : "starting",
						       .version = "1.0.0",
						       .controller_caps = caps};
	t->nlocal = 1;
}

/*
 * Expand is refused at request time (412, the volume untouched) when the
 * plugins view shows its plugin cannot: a controller without
 * EXPAND_VOLUME, or only node plugins without it. Unknown capabilities
 * let it through. A smaller size is refused (400); a cancel drops what is
 * pending and says so; a cancel of nothing is refused (412).
 */
static void test_expand_refused_and_cancel(void **state)
{
	struct t_env *t = *state;
	struct model_kv kv = {.key = "iops", .value = "3000"};
	struct model_map params = {.kv = &kv, .n = 1};
	struct model_volume *v = NULL;
	char *skipped = NULL;
	uint64_t index;
	struct err e;

	t_node(t, "n1", T_PLUGIN, true, NULL);
	t_volume(t, "v", T_PLUGIN, MODEL_ACCESS_SINGLE_NODE_WRITER);
	index = store_index(t->store);
	/* Node plugins only, none offering EXPAND_VOLUME. */
	assert_int_equal(server_volume_expand(t->s, "v", 1 << 30, t->a, &v, &e), CSID_EPRECOND);
	t_contains(e.msg, "expand volume v: plugin ctl.csi has no controller service");
	/* A controller that reported its capabilities without EXPAND_VOLUME. */
	t_local_ctl(t, T_PLUGIN, T_CAP_CREATE);
	assert_int_equal(server_volume_expand(t->s, "v", 1 << 30, t->a, &v, &e), CSID_EPRECOND);
	t_contains(e.msg, "its controller does not offer EXPAND_VOLUME");
	assert_int_equal(store_index(t->store), index);
	assert_int_equal(server_volume_get(t->s, "v", t->a, &v, &e), 0);
	assert_int_equal(v->pending_capacity_min, 0);
	/* Not fingerprinted yet: let through, and then cancellable. */
	t_local_ctl(t, T_PLUGIN, 0);
	assert_int_equal(server_volume_expand(t->s, "v", 1 << 30, t->a, &v, &e), 0);
	assert_int_equal(v->pending_capacity_min, 1 << 30);
	assert_int_equal(server_volume_modify(t->s, "v", &params, t->a, &v, &e), 0);
	assert_int_equal(server_volume_cancel(t->s, "v", t->a, &v, &skipped, &e), 0);
	t_contains(skipped, "cancelled the pending expand to 1073741824 bytes and modify");
	assert_int_equal(v->pending_capacity_min, 0);
	assert_int_equal(v->pending_mutable.n, 0);
	index = store_index(t->store);
	assert_int_equal(server_volume_cancel(t->s, "v", t->a, &v, &skipped, &e), CSID_EPRECOND);
	t_contains(e.msg, "cancel volume v: no pending change");
	assert_int_equal(server_volume_cancel(t->s, "nope", t->a, &v, &skipped, &e),
			 CSID_ENOTFOUND);
	assert_int_equal(store_index(t->store), index);
	/* With EXPAND_VOLUME: accepted. */
	t_local_ctl(t, T_PLUGIN, T_CAP_CREATE | T_CAP_EXPAND);
	assert_int_equal(server_volume_expand(t->s, "v", 2 << 20, t->a, &v, &e), 0);
	assert_int_equal(v->pending_capacity_min, 2 << 20);
}

/* Smaller than the capacity: refused even with nothing pending (it used to be a silent no-op). */
static void test_expand_smaller(void **state)
{
	struct t_env *t = *state;
	struct model_capability cap = {.access = MODEL_ACCESS_SINGLE_NODE_WRITER};
	struct model_volume spec = {0}, *v = NULL;
	struct err e;

	t_node(t, "n1", T_PUB_PLUGIN, true, NULL);
	spec.id = "big";
	spec.plugin_id = T_PUB_PLUGIN;
	spec.caps = &cap;
	spec.ncaps = 1;
	spec.capacity_min = 4 << 20;
	assert_int_equal(server_volume_create(t->s, &spec, t->a, &v, &e), 0);
	t_step(t);
	assert_int_equal(server_volume_get(t->s, "big", t->a, &v, &e), 0);
	assert_int_equal(v->state, MODEL_VOL_READY);
	assert_true(v->capacity >= 4 << 20);
	assert_int_equal(server_volume_expand(t->s, "big", 1 << 20, t->a, &v, &e), CSID_EINVAL);
	t_contains(e.msg, "is less than its capacity");
	t_contains(e.msg, "volumes do not shrink");
	/* The capacity it has: a no-op. */
	assert_int_equal(server_volume_get(t->s, "big", t->a, &v, &e), 0);
	assert_int_equal(server_volume_expand(t->s, "big", v->capacity, t->a, &v, &e), 0);
	assert_int_equal(v->pending_capacity_min, 0);
}

static void test_expand_and_modify(void **state)
{
	struct t_env *t = *state;
	struct model_kv kv = {.key = "iops", .value = "3000"};
	struct model_map params = {.kv = &kv, .n = 1}, empty = {0};
	struct model_volume *v = NULL;
	uint64_t index;
	struct err e;

	t_node(t, "n1", T_PLUGIN, true, NULL);
	t_local_ctl(t, T_PLUGIN, T_CAP_EXPAND);
	t_volume(t, "v", T_PLUGIN, MODEL_ACCESS_SINGLE_NODE_WRITER);
	assert_int_equal(server_volume_expand(t->s, "v", 1 << 30, t->a, &v, &e), 0);
	assert_int_equal(v->pending_capacity_min, 1 << 30);
	index = store_index(t->store);
	assert_int_equal(server_volume_expand(t->s, "v", 1 << 30, t->a, &v, &e), 0);
	assert_int_equal(store_index(t->store), index);
	assert_int_equal(server_volume_expand(t->s, "v", 0, t->a, &v, &e), CSID_EINVAL);
	assert_int_equal(server_volume_modify(t->s, "v", &params, t->a, &v, &e), 0);
	assert_int_equal(v->pending_mutable.n, 1);
	assert_string_equal(v->pending_mutable.kv[0].value, "3000");
	assert_int_equal(server_volume_modify(t->s, "v", &empty, t->a, &v, &e), CSID_EINVAL);
	assert_int_equal(server_volume_modify(t->s, "nope", &params, t->a, &v, &e), CSID_ENOTFOUND);
}

/* The volumes the heartbeat answer to node's report of (v, alloc) names to expand, "v:cap;". */
static const char *t_expand_answer(struct t_env *t, const char *node, const char *alloc, char *buf,
				   size_t cap)
{
	struct model_node_alloc al = {.volume_id = "v", .alloc_id = (char *)alloc};
	struct server_gc_answer ans;
	size_t used = 0;
	struct err e;

	assert_int_equal(server_gc_answer(t->s, node, &al, 1, t->a, &ans, &e), 0);
	buf[0] = '\0';
	for (size_t i = 0; i < ans.nexpand; i++)
		used +=
		    (size_t)snprintf(buf + used, cap - used, "%s:%lld;", ans.expand[i].volume_id,
				     (long long)ans.expand[i].capacity);
	return buf;
}

/*
 * node_expansion_required after a controller expand that asked for it is
 * cleared only when every node holding a claim reported its
 * NodeExpandVolume done; a report for an older (smaller) capacity or
 * while nothing is required changes nothing; a node without a claim is
 * refused. The heartbeat answer names the volume to each node that has
 * not reported yet, and to no other.
 */
static void test_node_expanded(void **state)
{
	struct t_env *t = *state;
	char want[64], buf[128];
	struct model_capability mc = {.access = MODEL_ACCESS_MULTI_NODE_MULTI_WRITER};
	struct model_volume spec = {0}, *v = NULL;
	int64_t cap;
	uint64_t index;
	struct err e;

	t_node(t, "n1", T_PUB_PLUGIN, true, "z1");
	t_node(t, "n2", T_PUB_PLUGIN, true, "z1");
	t_local_ctl(t, T_PUB_PLUGIN, T_CAP_CREATE | T_CAP_EXPAND);
	spec.id = "v";
	spec.plugin_id = T_PUB_PLUGIN;
	spec.caps = &mc;
	spec.ncaps = 1;
	spec.capacity_min = 1 << 20;
	assert_int_equal(server_volume_create(t->s, &spec, t->a, &v, &e), 0);
	t_step(t);
	assert_int_equal(t_claim(t, "v", "a1", "n1", MODEL_CLAIM_WRITE,
				 MODEL_ACCESS_MULTI_NODE_MULTI_WRITER, &e),
			 0);
	assert_int_equal(t_claim(t, "v", "a2", "n2", MODEL_CLAIM_WRITE,
				 MODEL_ACCESS_MULTI_NODE_MULTI_WRITER, &e),
			 0);
	t->pub.node_expansion = true;
	assert_int_equal(server_volume_expand(t->s, "v", 1 << 30, t->a, &v, &e), 0);
	t_step(t);
	assert_int_equal(server_volume_get(t->s, "v", t->a, &v, &e), 0);
	assert_true(v->node_expansion_required);
	cap = v->capacity;
	assert_true(cap >= 1 << 30);
	snprintf(want, sizeof(want), "v:%lld;", (long long)cap);
	assert_string_equal(t_expand_answer(t, "n1", "a1", buf, sizeof(buf)), want);
	assert_string_equal(t_expand_answer(t, "n2", "a2", buf, sizeof(buf)), want);

	assert_int_equal(server_volume_node_expanded(t->s, "v", "n3", cap, t->a, &v, &e),
			 CSID_EPRECOND);
	t_contains(e.msg, "node n3 holds no claim");
	index = store_index(t->store);
	assert_int_equal(server_volume_node_expanded(t->s, "v", "n1", cap - 1, t->a, &v, &e), 0);
	assert_int_equal(store_index(t->store), index);
	assert_int_equal(server_volume_node_expanded(t->s, "v", "n1", cap, t->a, &v, &e), 0);
	assert_true(v->node_expansion_required);
	assert_true(model_volume_claim(v, "a1")->node_expanded);
	assert_false(model_volume_claim(v, "a2")->node_expanded);
	assert_string_equal(t_expand_answer(t, "n1", "a1", buf, sizeof(buf)), "");
	assert_string_equal(t_expand_answer(t, "n2", "a2", buf, sizeof(buf)), want);
	assert_int_equal(server_volume_node_expanded(t->s, "v", "n2", cap, t->a, &v, &e), 0);
	assert_false(v->node_expansion_required);
	assert_false(model_volume_claim(v, "a1")->node_expanded);
	assert_string_equal(t_expand_answer(t, "n2", "a2", buf, sizeof(buf)), "");
	index = store_index(t->store);
	assert_int_equal(server_volume_node_expanded(t->s, "v", "n2", cap, t->a, &v, &e), 0);
	assert_int_equal(store_index(t->store), index);
}

/*
 * Waiting that tells the truth: a retry that failed again changes the
 * status stamp (a blocking query wakes on it); a new request (delete,
 * expand, cancel, modify) drops the error of the old one before its
 * answer; a volume of a plugin no one offers says so (plugin_registered).
 */
static void test_wait_truth(void **state)
{
	struct t_env *t = *state;
	struct model_capability cap = {.access = MODEL_ACCESS_SINGLE_NODE_WRITER};
	struct model_volume spec = {0}, *out = NULL;
	uint64_t stamp;
	struct err e;

	spec.id = "new";
	spec.plugin_id = T_DOWN_PLUGIN;
	spec.caps = &cap;
	spec.ncaps = 1;
	assert_int_equal(server_volume_create(t->s, &spec, t->a, &out, &e), 0);
	assert_false(out->plugin_registered);
	stamp = server_status_stamp(t->s, STORE_VOLUME, "new");
	t_step(t);
	assert_true(server_status_stamp(t->s, STORE_VOLUME, "new") != stamp);
	stamp = server_status_stamp(t->s, STORE_VOLUME, "new");
	assert_int_equal(server_status_stamp(t->s, STORE_VOLUME, "new"), stamp);
	clock_fake_advance(&t->clock, 60000);
	t_step(t);
	assert_int_equal(server_volume_get(t->s, "new", t->a, &out, &e), 0);
	assert_int_equal(out->status.attempts, 2);
	assert_true(server_status_stamp(t->s, STORE_VOLUME, "new") != stamp);
	/* The delete's answer does not carry the create's error. */
	assert_int_equal(server_volume_delete(t->s, "new", t->a, &out, &e), 0);
	assert_int_equal(out->state, MODEL_VOL_DELETING);
	assert_int_equal(out->status.attempts, 0);
	assert_null(out->status.last_error);
	t_step(t);
	assert_int_equal(server_volume_get(t->s, "new", t->a, &out, &e), 0);
	/* Counted afresh: the delete's first attempt (a lookup by name, for lack of an ID). */
	assert_int_equal(out->status.attempts, 1);
	t_contains(out->status.last_error, "no healthy controller for plugin down.csi");
	/* A plugin offered by a node. */
	t_node(t, "n1", T_PLUGIN, true, NULL);
	t_volume(t, "v", T_PLUGIN, MODEL_ACCESS_SINGLE_NODE_WRITER);
	assert_int_equal(server_volume_get(t->s, "v", t->a, &out, &e), 0);
	assert_true(out->plugin_registered);
}

/* ---- snapshots ---- */

static void test_snapshots(void **state)
{
	struct t_env *t = *state;
	struct model_snapshot spec = {0}, *snap = NULL, **page = NULL;
	char *next = NULL, id[16];
	size_t n = 0;
	struct err e;

	t_node(t, "n1", T_PLUGIN, true, NULL);
	t_volume(t, "v1", T_PLUGIN, MODEL_ACCESS_SINGLE_NODE_WRITER);
	t_volume(t, "v2", T_PLUGIN, MODEL_ACCESS_SINGLE_NODE_WRITER);
	spec.volume_id = "v1";
	for (int i = 0; i < 3; i++) {
		snprintf(id, sizeof(id), "s%d", i);
		spec.id = id;
		spec.volume_id = i == 2 ? "v2" : "v1";
		assert_int_equal(server_snapshot_create(t->s, &spec, t->a, &snap, &e), 0);
		assert_string_equal(snap->plugin_id, T_PLUGIN);
		assert_int_equal(snap->state, MODEL_SNAP_CREATING);
	}
	spec.id = "s0";
	spec.volume_id = "v1";
	assert_int_equal(server_snapshot_create(t->s, &spec, t->a, &snap, &e), 0);
	spec.name = "other";
	assert_int_equal(server_snapshot_create(t->s, &spec, t->a, &snap, &e), CSID_EEXIST);
	spec.id = "s9";
	spec.volume_id = "missing";
	assert_int_equal(server_snapshot_create(t->s, &spec, t->a, &snap, &e), CSID_ENOTFOUND);
	assert_int_equal(server_snapshot_get(t->s, "s1", t->a, &snap, &e), 0);
	assert_string_equal(snap->volume_id, "v1");
	assert_int_equal(
	    server_snapshot_list(t->s, "v1", NULL, 1, NULL, t->a, &page, &n, &next, NULL, &e), 0);
	assert_int_equal(n, 1);
	assert_string_equal(page[0]->id, "s0");
	assert_non_null(next);
	assert_int_equal(
	    server_snapshot_list(t->s, "v1", NULL, 1, next, t->a, &page, &n, &next, NULL, &e), 0);
	assert_int_equal(n, 1);
	assert_string_equal(page[0]->id, "s1");
	assert_null(next);
	assert_int_equal(
	    server_snapshot_list(t->s, NULL, "s", 0, NULL, t->a, &page, &n, &next, NULL, &e), 0);
	assert_int_equal(n, 3);
	assert_int_equal(server_snapshot_delete(t->s, "s1", t->a, &snap, &e), 0);
	assert_int_equal(snap->state, MODEL_SNAP_DELETING);
	assert_int_equal(server_snapshot_delete(t->s, "s8", t->a, &snap, &e), CSID_ENOTFOUND);
}

/* ---- the whole cycle through the reconciler ---- */

static void test_claim_cycle_with_controller(void **state)
{
	struct t_env *t = *state;
	struct model_capability cap = {.access = MODEL_ACCESS_SINGLE_NODE_WRITER};
	struct model_volume spec = {0}, *v = NULL;
	char ext[64], *skipped = NULL;
	uint64_t before;
	struct err e;

	t_node_with_controller(t, "n1", T_PUB_PLUGIN, true);
	spec.id = "cyc";
	spec.plugin_id = T_PUB_PLUGIN;
	spec.caps = &cap;
	spec.ncaps = 1;
	spec.capacity_min = 1 << 20;
	assert_int_equal(server_volume_create(t->s, &spec, t->a, &v, &e), 0);
	t_step(t);
	assert_int_equal(server_volume_get(t->s, "cyc", t->a, &v, &e), 0);
	assert_int_equal(v->state, MODEL_VOL_READY);
	assert_true(csi_fake_has_volume(&t->pub, "cyc"));
	csi_fake_volume_id(&t->pub, "cyc", ext, sizeof(ext));
	assert_string_equal(v->external_id, ext);
	assert_int_equal(
	    t_claim(t, "cyc", "a1", "n1", MODEL_CLAIM_WRITE, MODEL_ACCESS_SINGLE_NODE_WRITER, &e),
	    0);
	assert_int_equal(server_volume_get(t->s, "cyc", t->a, &v, &e), 0);
	assert_int_equal(v->npubs, 1);
	assert_int_equal(v->pubs[0].state, MODEL_PUB_PUBLISHING);
	t_step(t);
	assert_int_equal(server_volume_get(t->s, "cyc", t->a, &v, &e), 0);
	assert_int_equal(v->pubs[0].state, MODEL_PUB_PUBLISHED);
	assert_true(csi_fake_has_pub(&t->pub, ext, "csi-node"));
	/* Released: the reconciler unpublishes, then frees the claim. */
	before = store_index(t->store);
	assert_int_equal(server_volume_release(t->s, "cyc", "a1", false, t->a, &v, &skipped, &e),
			 0);
	assert_null(skipped);
	assert_int_equal(v->pubs[0].state, MODEL_PUB_UNPUBLISHING);
	t_step(t);
	/* The release's write, then one of the reconciler: unpublished and freed. */
	assert_int_equal(store_index(t->store), before + 2);
	assert_int_equal(server_volume_get_history(t->s, "cyc", t->a, &v, &e), 0);
	assert_int_equal(v->nclaims, 0);
	assert_int_equal(v->npubs, 0);
	assert_int_equal(v->npast_claims, 1);
	assert_false(csi_fake_has_pub(&t->pub, ext, "csi-node"));
	/* Delete: DeleteVolume, then the record goes. */
	assert_int_equal(server_volume_delete(t->s, "cyc", t->a, &v, &e), 0);
	t_step(t);
	assert_int_equal(server_volume_get(t->s, "cyc", t->a, &v, &e), CSID_ENOTFOUND);
	assert_false(csi_fake_has_volume(&t->pub, "cyc"));
}

/* The stored record of volume id, decoded as it is (no history merged). */
static struct model_volume *t_record(struct t_env *t, const char *id, size_t *len)
{
	struct model_volume *v = NULL;
	struct store_obj o;
	struct err e;

	assert_int_equal(store_get(t->store, STORE_VOLUME, id, &o, &e), 0);
	*len = o.len;
	assert_int_equal(model_volume_decode(t->a, o.value, o.len, &v, &e), 0);
	v->modify_index = o.modify_index;
	store_obj_free(&o);
	return v;
}

/* A claim of vol by alloc on n1, released, then freed by the reconciler. */
static void t_cycle(struct t_env *t, const char *vol, const char *alloc)
{
	struct model_volume *v = NULL;
	char *skipped = NULL;
	struct err e;

	assert_int_equal(
	    t_claim(t, vol, alloc, "n1", MODEL_CLAIM_WRITE, MODEL_ACCESS_SINGLE_NODE_WRITER, &e),
	    0);
	assert_int_equal(server_volume_release(t->s, vol, alloc, false, t->a, &v, &skipped, &e), 0);
	t_step(t);
}

/*
 * Freed claims go to the volume's claim history, not its record: after
 * many cycles the record holds none and stays as small as after one; the
 * history keeps the last MODEL_PAST_CLAIMS_MAX, newest last; a release of
 * a freed claim is still done. A record written before the history (past
 * claims inside) is read with them, and its next write moves them into
 * the history; the history goes with the volume.
 */
static void test_claim_history(void **state)
{
	struct t_env *t = *state;
	struct model_volume *v = NULL, *rec;
	struct model_claim legacy[2];
	char alloc[32], *text = NULL, *skipped = NULL;
	size_t len1 = 0, len = 0, tlen = 0;
	struct store_op op;
	struct store_obj o;
	struct err e;

	t_node(t, "n1", T_PLUGIN, true, NULL);
	t_volume(t, "hist", T_PLUGIN, MODEL_ACCESS_SINGLE_NODE_WRITER);
	t_cycle(t, "hist", "a0");
	rec = t_record(t, "hist", &len1);
	assert_int_equal(rec->npast_claims, 0);
	for (int i = 1; i < 40; i++) {
		snprintf(alloc, sizeof(alloc), "a%d", i);
		t_cycle(t, "hist", alloc);
	}
	rec = t_record(t, "hist", &len);
	assert_int_equal(rec->nclaims, 0);
	assert_int_equal(rec->npast_claims, 0);
	assert_true(len <= len1 + 8);
	assert_int_equal(server_volume_get_history(t->s, "hist", t->a, &v, &e), 0);
	assert_int_equal(v->npast_claims, MODEL_PAST_CLAIMS_MAX);
	assert_string_equal(v->past_claims[MODEL_PAST_CLAIMS_MAX - 1].alloc_id, "a39");
	assert_string_equal(v->past_claims[0].alloc_id, "a24");
	assert_int_equal(v->past_claims[0].state, MODEL_CLAIM_FREED);
	/* Freed long ago: a release is done, not refused. */
	assert_int_equal(server_volume_release(t->s, "hist", "a30", false, t->a, &v, &skipped, &e),
			 0);

	/* An older record, past claims inside: read with them, moved at its next write. */
	t_volume(t, "old", T_PLUGIN, MODEL_ACCESS_SINGLE_NODE_WRITER);
	assert_int_equal(server_volume_get_history(t->s, "hist", t->a, &v, &e), 0);
	legacy[0] = v->past_claims[0];
	legacy[1] = v->past_claims[1];
	legacy[0].alloc_id = "old-1";
	legacy[1].alloc_id = "old-2";
	rec = t_record(t, "old", &len);
	rec->past_claims = legacy;
	rec->npast_claims = 2;
	assert_int_equal(model_volume_encode(rec, MODEL_VIEW_STORE, &text, &tlen, &e), 0);
	op = (struct store_op){STORE_OP_PUT, STORE_VOLUME, "old", text, tlen, rec->modify_index};
	assert_int_equal(store_txn(t->store, &op, 1, NULL, &e), 0);
	free(text);
	assert_int_equal(server_volume_get_history(t->s, "old", t->a, &v, &e), 0);
	assert_int_equal(v->npast_claims, 2);
	t_cycle(t, "old", "new-1");
	assert_int_equal(t_record(t, "old", &len)->npast_claims, 0);
	assert_int_equal(server_volume_get_history(t->s, "old", t->a, &v, &e), 0);
	assert_int_equal(v->npast_claims, 3);
	assert_string_equal(v->past_claims[0].alloc_id, "old-1");
	assert_string_equal(v->past_claims[2].alloc_id, "new-1");

	/* The history goes with its volume. */
	assert_int_equal(server_volume_deregister(t->s, "old", false, t->a, &skipped, &e), 0);
	assert_int_equal(store_get(t->store, STORE_CLAIM_HISTORY, "old", &o, &e), CSID_ENOTFOUND);
	assert_int_equal(store_get(t->store, STORE_CLAIM_HISTORY, "hist", &o, &e), 0);
	store_obj_free(&o);
}

/* Registers volume id of T_PLUGIN with caps[0..n), stepped to ready. */
static void t_volume_caps(struct t_env *t, const char *id, struct model_capability *caps, size_t n)
{
	struct model_volume spec = {0}, *out = NULL;
	struct err e;

	spec.id = (char *)id;
	spec.plugin_id = T_PLUGIN;
	spec.external_id = (char *)id;
	spec.caps = caps;
	spec.ncaps = n;
	assert_int_equal(server_volume_register(t->s, &spec, t->a, &out, &e), 0);
	t_step(t);
}

/* The capability alloc's claim on vol was granted with: *access, *attach. */
static void t_claim_cap(struct t_env *t, const char *vol, enum model_access access,
			enum model_attachment attach, bool attach_default,
			enum model_claim_mode mode, enum model_access *got_access,
			enum model_attachment *got_attach)
{
	struct model_claim_request req = {
	    .alloc_id = "x1", .node_id = "n1", .mode = mode, .cap = {access, attach}};
	struct model_volume *v = NULL;
	struct err e;

	assert_int_equal(server_volume_claim_default(t->s, vol, &req, attach_default, t->a, &v, &e),
			 0);
	*got_access = model_volume_claim(v, "x1")->cap.access;
	*got_attach = model_volume_claim(v, "x1")->cap.attachment;
}

/*
 * A claim without an access mode takes the volume's first capability (the
 * first with the attachment mode named, if one is); one without an
 * attachment mode takes the attachment of the first capability with its
 * access mode.
 */
static void test_claim_default_capability(void **state)
{
	struct t_env *t = *state;
	struct model_capability caps[2] = {
	    {.access = MODEL_ACCESS_MULTI_NODE_READER_ONLY, .attachment = MODEL_ATTACH_FILE_SYSTEM},
	    {.access = MODEL_ACCESS_MULTI_NODE_MULTI_WRITER,
	     .attachment = MODEL_ATTACH_BLOCK_DEVICE}};
	enum model_attachment at;
	enum model_access ac;

	t_node(t, "n1", T_PLUGIN, true, NULL);
	t_volume_caps(t, "d1", caps, 2);
	t_volume_caps(t, "d2", caps, 2);
	t_volume_caps(t, "d3", caps, 2);
	t_claim_cap(t, "d1", MODEL_ACCESS_UNKNOWN, MODEL_ATTACH_FILE_SYSTEM, true, MODEL_CLAIM_READ,
		    &ac, &at);
	assert_int_equal(ac, MODEL_ACCESS_MULTI_NODE_READER_ONLY);
	assert_int_equal(at, MODEL_ATTACH_FILE_SYSTEM);
	t_claim_cap(t, "d2", MODEL_ACCESS_UNKNOWN, MODEL_ATTACH_BLOCK_DEVICE, false,
		    MODEL_CLAIM_WRITE, &ac, &at);
	assert_int_equal(ac, MODEL_ACCESS_MULTI_NODE_MULTI_WRITER);
	assert_int_equal(at, MODEL_ATTACH_BLOCK_DEVICE);
	t_claim_cap(t, "d3", MODEL_ACCESS_MULTI_NODE_MULTI_WRITER, MODEL_ATTACH_FILE_SYSTEM, true,
		    MODEL_CLAIM_WRITE, &ac, &at);
	assert_int_equal(ac, MODEL_ACCESS_MULTI_NODE_MULTI_WRITER);
	assert_int_equal(at, MODEL_ATTACH_BLOCK_DEVICE);
}

#define T_TEST(f) cmocka_unit_test_setup_teardown(f, t_setup, t_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T_TEST(test_register_idempotent_and_get),
	    T_TEST(test_list_filters_and_pages),
	    T_TEST(test_claim_race_one_winner),
	    T_TEST(test_claim_race_no_lost_update),
	    T_TEST(test_claim_refusals),
	    T_TEST(test_release_and_force_free),
	    T_TEST(test_detach),
	    T_TEST(test_deregister_and_delete),
	    T_TEST(test_node_ttl),
	    T_TEST(test_node_duplicate_instance),
	    T_TEST(test_node_instance_check),
	    T_TEST(test_plugins_view),
	    T_TEST(test_schedulability),
	    T_TEST(test_topology_refusal),
	    T_TEST(test_failing_volume_shows_status),
	    T_TEST(test_expand_and_modify),
	    T_TEST(test_node_expanded),
	    T_TEST(test_expand_refused_and_cancel),
	    T_TEST(test_expand_smaller),
	    T_TEST(test_wait_truth),
	    T_TEST(test_snapshots),
	    T_TEST(test_claim_cycle_with_controller),
	    T_TEST(test_claim_history),
	    T_TEST(test_claim_default_capability),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
