/*
 * Unit tests of the reconciler (src/server/reconciler.c, reconcile_*.c)
 * in virtual time, with the memory store and the scripted fake controller
 * (test/lib/csi_fake.h): the backoff function and its cap on the fake
 * clock, create / register / publish / unpublish / delete / snapshot /
 * clone / restore / expand / modify, the CSI outcome rules (ABORTED
 * retried, NOT_FOUND done on delete and unpublish, INVALID_ARGUMENT final
 * and shown), capability gating, the claim state machine from every state
 * with every step failing once, idempotence of repeated steps and of a
 * step whose write conflicts, one failing volume not delaying 100 others,
 * the change-log follower, and per-plugin serialization on real threads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "csi_fake.h"
#include "model/model.h"
#include "model/model_claim.h"
#include "server/reconcile_int.h"
#include "server/reconciler.h"
#include "store/store.h"
#include "util/clock.h"

#define T0 1000000
#define WALL0 1700000000000
#define PLUGIN "fake.csi.csid.dev"
#define PLUGIN2 "other.csi.csid.dev"
#define MIN_MS 100
#define MAX_MS 10000
/* Volumes per plugin in the threaded tests. */
#define THREADS_VOLUMES 24

struct t {
	struct clock_fake clock;
	struct store *store;
	struct csi_fake fake;
	struct csi_fake fake2;
	struct reconciler *r;
	struct reconciler_config cfg;
	/* conflict hook: the store write to race with the next RPC of hook_rpc */
	enum csi_rpc hook_rpc;
	int hook_left;
	const char *hook_volume;
};

static int t_setup(void **state)
{
	struct t *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	clock_fake_init(&t->clock, T0, WALL0);
	assert_int_equal(store_mem_new(&t->store, NULL), 0);
	csi_fake_init(&t->fake, PLUGIN);
	csi_fake_init(&t->fake2, PLUGIN2);
	t->fake.next = &t->fake2;
	t->cfg.store = t->store;
	t->cfg.controllers = csi_fake_controllers(&t->fake);
	t->cfg.clock = &t->clock.base;
	t->cfg.backoff_min_ms = MIN_MS;
	t->cfg.backoff_max_ms = MAX_MS;
	t->cfg.seed = 42;
	*state = t;
	return 0;
}

static int t_teardown(void **state)
{
	struct t *t = *state;

	reconciler_free(t->r);
	/* Every controller the reconciler acquired was released. */
	assert_int_equal(t->fake.acquired, 0);
	assert_int_equal(t->fake2.acquired, 0);
	store_close(t->store);
	csi_fake_fini(&t->fake);
	csi_fake_fini(&t->fake2);
	clock_fake_destroy(&t->clock);
	free(t);
	return 0;
}

static void t_new(struct t *t)
{
	struct err e;

	assert_int_equal(reconciler_new(&t->cfg, &t->r, &e), 0);
}

static int64_t t_now(struct t *t)
{
	return clock_now_ms(&t->clock.base);
}

/* Steps, moving the clock to each next due time, while it is within budget_ms. */
static int64_t t_run(struct t *t, int64_t budget_ms)
{
	int64_t end = t_now(t) + budget_ms;

	for (;;) {
		int64_t next = reconciler_step(t->r);

		if (next == CLOCK_NEVER || next > end)
			return next;
		clock_fake_set(&t->clock, next);
	}
}

/* ---- store helpers ---- */

static void t_put_volume(struct t *t, const struct model_volume *v)
{
	struct store_op op = {STORE_OP_PUT, STORE_VOLUME, v->id, NULL, 0, STORE_ANY};
	char *json;
	size_t len;
	struct err e;

	assert_int_equal(model_volume_encode(v, MODEL_VIEW_STORE, &json, &len, &e), 0);
	op.value = json;
	op.len = len;
	assert_int_equal(store_txn(t->store, &op, 1, NULL, &e), 0);
	model_wipe_free(json, len);
}

/* A volume from a spec with plugin PLUGIN and one single-node-writer capability. */
static struct model_volume *t_spec(struct arena *a, const char *id, const char *extra)
{
	char text[2048];
	struct model_volume *v;
	struct err e;

	snprintf(text, sizeof(text),
		 "{\"id\": \"%s\", \"plugin_id\": \"" PLUGIN "\", \"capacity_min\": 1048576, "
		 "\"capabilities\": [{\"access_mode\": \"single-node-writer\"}], "
		 "\"secrets\": {\"token\": \"s3cret\"}%s%s}",
		 id, extra ? ", " : "", extra ? extra : "");
	if (model_volume_spec_decode(a, text, strlen(text), false, &v, &e) != 0)
		fail_msg("spec: %s", e.msg);
	v->created_ms = WALL0;
	return v;
}

/* Stores a new volume in state st. */
static void t_add(struct t *t, const char *id, enum model_volume_state st, const char *extra)
{
	struct arena *a = arena_new();
	struct model_volume *v = t_spec(a, id, extra);

	v->state = st;
	t_put_volume(t, v);
	arena_free(a);
}

/* The stored volume (in a), or NULL. */
static struct model_volume *t_get(struct t *t, struct arena *a, const char *id)
{
	struct model_volume *v = NULL;
	struct store_obj o;
	struct err e;

	if (store_get(t->store, STORE_VOLUME, id, &o, &e) != 0)
		return NULL;
	assert_int_equal(model_volume_decode(a, o.value, o.len, &v, &e), 0);
	store_obj_free(&o);
	return v;
}

static struct model_snapshot *t_get_snap(struct t *t, struct arena *a, const char *id)
{
	struct model_snapshot *s = NULL;
	struct store_obj o;
	struct err e;

	if (store_get(t->store, STORE_SNAPSHOT, id, &o, &e) != 0)
		return NULL;
	assert_int_equal(model_snapshot_decode(a, o.value, o.len, &s, &e), 0);
	store_obj_free(&o);
	return s;
}

static void t_put_snap(struct t *t, const char *id, const char *volume,
		       enum model_snapshot_state st, const char *external_id)
{
	struct model_snapshot s;
	struct store_op op = {STORE_OP_PUT, STORE_SNAPSHOT, id, NULL, 0, STORE_ANY};
	char *json;
	size_t len;
	struct err e;

	memset(&s, 0, sizeof(s));
	s.id = (char *)id;
	s.volume_id = (char *)volume;
	s.plugin_id = PLUGIN;
	s.external_id = (char *)external_id;
	s.state = st;
	s.ready_to_use = st == MODEL_SNAP_READY;
	s.created_ms = WALL0;
	assert_int_equal(model_snapshot_encode(&s, MODEL_VIEW_STORE, &json, &len, &e), 0);
	op.value = json;
	op.len = len;
	assert_int_equal(store_txn(t->store, &op, 1, NULL, &e), 0);
	model_wipe_free(json, len);
}

/* Adds alloc's claim on node (plugin node ID "p-<node>") as the server would. */
static void t_claim(struct t *t, const char *id, const char *alloc, const char *node,
		    enum model_claim_mode mode)
{
	struct arena *a = arena_new();
	struct model_volume *v = t_get(t, a, id);
	char pnode[64];
	struct model_claim_request req = {alloc, node, mode, v->caps[0]};
	struct model_claim_env env = {.controller_required = (t->fake.caps & (1ULL << 2)) != 0,
				      .controller_healthy = true,
				      .node_plugin_healthy = true,
				      .plugin_node_id = pnode};
	struct err e;

	snprintf(pnode, sizeof(pnode), "p-%s", node);
	if (model_claim_add(a, v, &req, &env, WALL0, &e) != 0)
		fail_msg("claim: %s", e.msg);
	t_put_volume(t, v);
	arena_free(a);
}

/* Moves alloc's claim to `to` as the server's release or detach would. */
static void t_move(struct t *t, const char *id, const char *alloc, enum model_claim_state to)
{
	struct arena *a = arena_new();
	struct model_volume *v = t_get(t, a, id);
	struct err e;

	if (model_volume_claim_move(a, v, alloc, to, "test", WALL0, &e) != 0)
		fail_msg("move: %s", e.msg);
	t_put_volume(t, v);
	arena_free(a);
}

static void t_set_state(struct t *t, const char *id, enum model_volume_state st)
{
	struct arena *a = arena_new();
	struct model_volume *v = t_get(t, a, id);

	v->state = st;
	t_put_volume(t, v);
	arena_free(a);
}

/* The reconciler's status of volume id (last_error "" when none). */
static int t_status(struct t *t, const char *id, struct model_status *st, char *err, size_t len)
{
	struct arena *a = arena_new();
	int rc = reconciler_status(t->r, STORE_VOLUME, id, a, st);

	snprintf(err, len, "%s", rc == 0 && st->last_error ? st->last_error : "");
	arena_free(a);
	return rc;
}

/* ---- backoff ---- */

static void test_backoff_function(void **state)
{
	/* Doubling from the minimum, jitter within [3/4 d, d], capped. */
	for (int attempt = 1; attempt <= 40; attempt++) {
		int64_t full = attempt >= 14 ? 600000 : (int64_t)100 << (attempt - 1);
		int64_t lo = INT64_MAX, hi = 0;

		if (full > 600000)
			full = 600000;
		for (int i = 0; i < 200; i++) {
			char id[16];
			int64_t d;

			snprintf(id, sizeof(id), "v%d", i);
			d = reconciler_backoff_ms(attempt, 100, 600000, 7, STORE_VOLUME, id);
			assert_true(d >= full - full / 4 && d <= full);
			lo = d < lo ? d : lo;
			hi = d > hi ? d : hi;
		}
		/* Items failing together spread out. */
		if (full >= 400)
			assert_true(hi > lo);
	}
	/* Pure: the same inputs give the same delay; another seed another one somewhere. */
	assert_int_equal(reconciler_backoff_ms(3, 100, 600000, 7, STORE_VOLUME, "a"),
			 reconciler_backoff_ms(3, 100, 600000, 7, STORE_VOLUME, "a"));
	assert_int_equal(
	    reconciler_backoff_ms(INT32_MAX, 100, 600000, 1, STORE_SNAPSHOT, "x") <= 600000, 1);
}

static void test_backoff_virtual_time(void **state)
{
	struct t *t = *state;
	struct model_status st;
	char err[512];
	int64_t prev_next = 0;

	t_new(t);
	t_add(t, "v1", MODEL_VOL_CREATING, NULL);
	csi_fake_script(&t->fake, CSI_RPC_CREATE_VOLUME, CSI_UNAVAILABLE, 12);
	for (int attempt = 1; attempt <= 12; attempt++) {
		int64_t next = reconciler_step(t->r), delay = next - t_now(t);
		int64_t full = (int64_t)MIN_MS << (attempt - 1);

		if (full > MAX_MS)
			full = MAX_MS;
		assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CREATE_VOLUME), attempt);
		assert_true(delay >= full - full / 4 && delay <= full);
		assert_int_equal(t_status(t, "v1", &st, err, sizeof(err)), 0);
		assert_int_equal(st.attempts, attempt);
		assert_non_null(strstr(err, "UNAVAILABLE"));
		assert_int_equal(st.next_attempt_ms, WALL0 + (next - T0));
		assert_true(st.next_attempt_ms > prev_next);
		prev_next = st.next_attempt_ms;
		/* Nothing happens before the due time. */
		clock_fake_set(&t->clock, next - 1);
		assert_int_equal(reconciler_step(t->r), next);
		assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CREATE_VOLUME), attempt);
		clock_fake_set(&t->clock, next);
	}
	/* The script is spent: the next attempt works and the status clears. */
	t_run(t, MAX_MS);
	assert_int_equal(t_status(t, "v1", &st, err, sizeof(err)), CSID_ENOTFOUND);
	{
		struct arena *a = arena_new();
		struct model_volume *v = t_get(t, a, "v1");

		assert_int_equal(v->state, MODEL_VOL_READY);
		arena_free(a);
	}
}

/* ---- create, register, outcome rules ---- */

static void test_create(void **state)
{
	struct t *t = *state;
	struct arena *a = arena_new();
	struct model_volume *v;
	char ext[64];

	t_new(t);
	t_add(t, "v1", MODEL_VOL_CREATING, "\"name\": \"data-1\", \"parameters\": {\"k\": \"x\"}");
	t_run(t, 0);
	v = t_get(t, a, "v1");
	csi_fake_volume_id(&t->fake, "data-1", ext, sizeof(ext));
	assert_int_equal(v->state, MODEL_VOL_READY);
	assert_string_equal(v->external_id, ext);
	assert_int_equal(v->capacity, 1048576);
	assert_string_equal(model_map_get(&v->context, "fake"), "1");
	assert_int_equal(v->naccessible, 1);
	assert_string_equal(model_map_get(&v->accessible[0].segments, "zone"), "z1");
	assert_int_equal(t->fake.log[0].nsecrets, 1);
	assert_int_equal(t->fake.log[0].required_bytes, 1048576);
	/* Converged: worked again, it asks nothing of the plugin. */
	reconciler_enqueue(t->r, STORE_VOLUME, "v1");
	t_run(t, 0);
	assert_int_equal(t->fake.nlog, 1);
	arena_free(a);
}

static void test_aborted_retried(void **state)
{
	struct t *t = *state;
	struct arena *a = arena_new();
	struct model_status st;
	char err[512];
	int queued, failing;

	t_new(t);
	t_add(t, "v1", MODEL_VOL_CREATING, NULL);
	csi_fake_script(&t->fake, CSI_RPC_CREATE_VOLUME, CSI_ABORTED, 2);
	reconciler_step(t->r);
	assert_int_equal(t_status(t, "v1", &st, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "volume v1: CreateVolume: plugin " PLUGIN ": ABORTED"));
	reconciler_counts(t->r, &queued, &failing);
	assert_int_equal(queued, 1);
	assert_int_equal(failing, 1);
	t_run(t, 10 * MIN_MS);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CREATE_VOLUME), 3);
	assert_int_equal(t_get(t, a, "v1")->state, MODEL_VOL_READY);
	reconciler_counts(t->r, &queued, &failing);
	assert_int_equal(queued, 0);
	assert_int_equal(failing, 0);
	arena_free(a);
}

static void test_invalid_argument_final(void **state)
{
	struct t *t = *state;
	struct arena *a = arena_new();
	struct model_status st;
	char err[512];

	t_new(t);
	t_add(t, "v1", MODEL_VOL_CREATING, NULL);
	csi_fake_script(&t->fake, CSI_RPC_CREATE_VOLUME, CSI_INVALID_ARGUMENT, 1);
	t_run(t, 10 * MAX_MS);
	/* Failed for good: recorded, shown, never sent again unchanged. */
	assert_int_equal(t_get(t, a, "v1")->state, MODEL_VOL_FAILED);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CREATE_VOLUME), 1);
	assert_int_equal(t_status(t, "v1", &st, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "INVALID_ARGUMENT"));
	assert_null(strstr(err, "s3cret"));
	assert_int_equal(st.attempts, 1);

	/* INVALID_ARGUMENT on publish: final, shown, tried again only at the cap. */
	t_add(t, "v2", MODEL_VOL_CREATING, NULL);
	t_run(t, 0);
	t_claim(t, "v2", "a1", "n1", MODEL_CLAIM_WRITE);
	csi_fake_script(&t->fake, CSI_RPC_CONTROLLER_PUBLISH_VOLUME, CSI_INVALID_ARGUMENT, 1);
	assert_int_equal(reconciler_step(t->r), t_now(t) + MAX_MS);
	assert_int_equal(t_status(t, "v2", &st, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "ControllerPublishVolume"));
	assert_non_null(strstr(err, "INVALID_ARGUMENT"));
	t_run(t, MAX_MS);
	assert_int_equal(t_get(t, a, "v2")->pubs[0].state, MODEL_PUB_PUBLISHED);
	assert_int_equal(t_status(t, "v2", &st, err, sizeof(err)), CSID_ENOTFOUND);
	arena_free(a);
}

static void test_register(void **state)
{
	struct t *t = *state;
	struct arena *a = arena_new();
	struct model_status st;
	char err[512], ext[64], extra[128];

	t_new(t);
	t_add(t, "src", MODEL_VOL_CREATING, NULL);
	t_run(t, 0);
	csi_fake_volume_id(&t->fake, "src", ext, sizeof(ext));
	snprintf(extra, sizeof(extra), "\"external_id\": \"%s\"", ext);
	t_add(t, "reg", MODEL_VOL_REGISTERING, extra);
	t_add(t, "bad", MODEL_VOL_REGISTERING, extra);
	/* The plugin does not know it yet: NOT_FOUND on validate is retried. */
	t_add(t, "gone", MODEL_VOL_REGISTERING, "\"external_id\": \"nope\"");
	t_run(t, 0);
	assert_int_equal(t_get(t, a, "reg")->state, MODEL_VOL_READY);
	assert_int_equal(t_get(t, a, "gone")->state, MODEL_VOL_REGISTERING);
	assert_int_equal(t_status(t, "gone", &st, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "NOT_FOUND"));

	/* Capabilities not confirmed: failed, with the plugin's message. */
	t->fake.confirm_none = true;
	t_set_state(t, "bad", MODEL_VOL_REGISTERING);
	t_run(t, 0);
	assert_int_equal(t_get(t, a, "bad")->state, MODEL_VOL_FAILED);
	assert_int_equal(t_status(t, "bad", &st, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "not confirmed: not supported"));
	arena_free(a);
}

/* ---- claims ---- */

static void test_publish_unpublish(void **state)
{
	struct t *t = *state;
	struct arena *a = arena_new();
	struct model_volume *v;
	char ext[64];

	t_new(t);
	t_add(t, "v1", MODEL_VOL_CREATING, NULL);
	t_run(t, 0);
	csi_fake_volume_id(&t->fake, "v1", ext, sizeof(ext));
	t_claim(t, "v1", "a1", "n1", MODEL_CLAIM_WRITE);
	t_claim(t, "v1", "a2", "n1", MODEL_CLAIM_READ);
	t_run(t, 0);
	v = t_get(t, a, "v1");
	assert_int_equal(v->npubs, 1);
	assert_int_equal(v->pubs[0].state, MODEL_PUB_PUBLISHED);
	assert_string_equal(model_map_get(&v->pubs[0].context, "device"), "/dev/fake/fv-1");
	assert_true(csi_fake_has_pub(&t->fake, ext, "p-n1"));
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_PUBLISH_VOLUME), 1);

	/* One claim released: the other still needs the publication. */
	t_move(t, "v1", "a1", MODEL_CLAIM_NODE_UNPUBLISHED);
	t_run(t, 0);
	v = t_get(t, a, "v1");
	assert_int_equal(v->nclaims, 1);
	assert_int_equal(v->npast_claims, 1);
	assert_string_equal(v->past_claims[0].alloc_id, "a1");
	assert_int_equal(v->past_claims[0].state, MODEL_CLAIM_FREED);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME), 0);
	assert_true(csi_fake_has_pub(&t->fake, ext, "p-n1"));

	/* The last one: unpublished with the claim's plugin node ID, then freed. */
	t_move(t, "v1", "a2", MODEL_CLAIM_NODE_UNPUBLISHED);
	t_run(t, 0);
	v = t_get(t, a, "v1");
	assert_int_equal(v->nclaims, 0);
	assert_int_equal(v->npubs, 0);
	assert_int_equal(v->npast_claims, 2);
	assert_false(csi_fake_has_pub(&t->fake, ext, "p-n1"));
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME), 1);
	arena_free(a);
}

static void test_not_found_is_done(void **state)
{
	struct t *t = *state;
	struct arena *a = arena_new();
	struct model_status st;
	char err[64];

	t_new(t);
	t_add(t, "v1", MODEL_VOL_CREATING, NULL);
	t_run(t, 0);
	t_claim(t, "v1", "a1", "n1", MODEL_CLAIM_WRITE);
	t_run(t, 0);
	t_move(t, "v1", "a1", MODEL_CLAIM_NODE_UNPUBLISHED);
	csi_fake_script(&t->fake, CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME, CSI_NOT_FOUND, 1);
	t_run(t, 0);
	assert_int_equal(t_get(t, a, "v1")->nclaims, 0);
	assert_int_equal(t_status(t, "v1", &st, err, sizeof(err)), CSID_ENOTFOUND);

	t_set_state(t, "v1", MODEL_VOL_DELETING);
	csi_fake_script(&t->fake, CSI_RPC_DELETE_VOLUME, CSI_NOT_FOUND, 1);
	t_run(t, 0);
	assert_null(t_get(t, a, "v1"));
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_DELETE_VOLUME), 1);
	assert_int_equal(t_status(t, "v1", &st, err, sizeof(err)), CSID_ENOTFOUND);
	arena_free(a);
}

static void test_delete(void **state)
{
	struct t *t = *state;
	struct arena *a = arena_new();

	t_new(t);
	t_add(t, "v1", MODEL_VOL_CREATING, NULL);
	t_run(t, 0);
	t_claim(t, "v1", "a1", "n1", MODEL_CLAIM_WRITE);
	t_run(t, 0);
	/* Deleting waits for the claim to be freed (published volumes are not deleted). */
	t_set_state(t, "v1", MODEL_VOL_DELETING);
	t_run(t, MAX_MS);
	assert_non_null(t_get(t, a, "v1"));
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_DELETE_VOLUME), 0);
	t_move(t, "v1", "a1", MODEL_CLAIM_NODE_UNPUBLISHED);
	csi_fake_script(&t->fake, CSI_RPC_DELETE_VOLUME, CSI_FAILED_PRECONDITION, 1);
	t_run(t, MAX_MS);
	assert_null(t_get(t, a, "v1"));
	assert_false(csi_fake_has_volume(&t->fake, "v1"));
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_DELETE_VOLUME), 2);
	/*
	 * A volume without plugin ID may still exist at the plugin (the answer
	 * to its CreateVolume was lost): it is found by name and deleted.
	 */
	{
		struct csi_fake_vol *fv = &t->fake.vols[t->fake.nvols++];

		memset(fv, 0, sizeof(*fv));
		snprintf(fv->id, CSI_FAKE_ID, "lost-1");
		snprintf(fv->name, CSI_FAKE_ID, "v2");
	}
	t_add(t, "v2", MODEL_VOL_DELETING, NULL);
	t_run(t, 0);
	assert_null(t_get(t, a, "v2"));
	assert_false(csi_fake_has_volume(&t->fake, "v2"));
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_DELETE_VOLUME), 3);
	assert_string_equal(t->fake.log[t->fake.nlog - 1].volume, "lost-1");
	/* A final answer to that lookup: nothing can exist, the record goes. */
	t_add(t, "v3", MODEL_VOL_DELETING, NULL);
	csi_fake_script(&t->fake, CSI_RPC_CREATE_VOLUME, CSI_INVALID_ARGUMENT, 1);
	t_run(t, 0);
	assert_null(t_get(t, a, "v3"));
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_DELETE_VOLUME), 3);
	arena_free(a);
}

/*
 * The claim state machine from every stored state, with every RPC on the
 * way failing once (UNAVAILABLE) before it works: each ends where the
 * rules say, nothing is freed before its unpublish succeeded, and the
 * plugin's view matches the record.
 */
static void test_claim_states_fail_once(void **state)
{
	struct t *t = *state;
	const struct {
		enum model_claim_state claim;
		enum model_pub_state pub;
		bool has_pub;
		bool freed; /* where it ends */
	} cases[] = {
	    {MODEL_CLAIM_CLAIMED, MODEL_PUB_PUBLISHING, true, false},
	    {MODEL_CLAIM_CLAIMED, MODEL_PUB_PUBLISHED, true, false},
	    {MODEL_CLAIM_CLAIMED, MODEL_PUB_UNPUBLISHING, true, false},
	    {MODEL_CLAIM_CLAIMED, MODEL_PUB_PUBLISHING, false, false},
	    {MODEL_CLAIM_NODE_UNPUBLISHED, MODEL_PUB_PUBLISHING, true, true},
	    {MODEL_CLAIM_NODE_UNPUBLISHED, MODEL_PUB_PUBLISHED, true, true},
	    {MODEL_CLAIM_NODE_UNPUBLISHED, MODEL_PUB_UNPUBLISHING, true, true},
	    {MODEL_CLAIM_NODE_UNPUBLISHED, MODEL_PUB_PUBLISHED, false, true},
	    {MODEL_CLAIM_CONTROLLER_UNPUBLISHED, MODEL_PUB_PUBLISHED, false, true},
	};

	t_new(t);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct arena *a = arena_new();
		struct model_volume *v;
		char id[16], ext[64];
		int unpub0 = csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME);

		snprintf(id, sizeof(id), "c%zu", i);
		t_add(t, id, MODEL_VOL_CREATING, NULL);
		t_run(t, 0);
		csi_fake_volume_id(&t->fake, id, ext, sizeof(ext));
		t_claim(t, id, "a1", "n1", MODEL_CLAIM_WRITE);
		/* Put the record in the case's state, and the plugin in line with it. */
		v = t_get(t, a, id);
		v->claims[0].state = cases[i].claim;
		if (!cases[i].has_pub)
			v->npubs = 0;
		else
			v->pubs[0].state = cases[i].pub;
		if (cases[i].has_pub && cases[i].pub == MODEL_PUB_PUBLISHED)
			assert_int_equal(
			    model_map_put(a, &v->pubs[0].context, "device", "/dev/x", NULL), 0);
		t_put_volume(t, v);
		if (cases[i].has_pub && cases[i].pub != MODEL_PUB_PUBLISHING) {
			struct csi_fake *f = &t->fake;

			snprintf(f->pubs[f->npubs].volume, CSI_FAKE_ID, "%s", ext);
			snprintf(f->pubs[f->npubs++].node, CSI_FAKE_ID, "p-n1");
		}
		for (int rpc = 0; rpc < CSI_RPC_COUNT; rpc++)
			csi_fake_script(&t->fake, (enum csi_rpc)rpc, CSI_UNAVAILABLE, 1);
		t_run(t, 100 * MAX_MS);
		/* Drop the unused scripted failures before the next case. */
		t->fake.nscript = 0;

		v = t_get(t, a, id);
		if (cases[i].freed) {
			assert_int_equal(v->nclaims, 0);
			assert_int_equal(v->npast_claims, 1);
			assert_int_equal(v->npubs, 0);
			assert_false(csi_fake_has_pub(&t->fake, ext, "p-n1"));
			/* Unpublished exactly when a publication was recorded. */
			assert_int_equal(
			    csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME) > unpub0,
			    cases[i].has_pub);
		} else {
			assert_int_equal(v->nclaims, 1);
			assert_int_equal(v->claims[0].state, MODEL_CLAIM_CLAIMED);
			assert_int_equal(v->npubs, 1);
			assert_int_equal(v->pubs[0].state, MODEL_PUB_PUBLISHED);
			assert_non_null(model_map_get(&v->pubs[0].context, "device"));
			assert_true(csi_fake_has_pub(&t->fake, ext, "p-n1"));
		}
		arena_free(a);
	}
}

/* A step whose RPC succeeded but whose write lost a race is redone, idempotently. */
static void t_race_hook(void *ctx, enum csi_rpc rpc, int code)
{
	struct t *t = ctx;
	struct arena *a;
	struct model_volume *v;

	if (rpc != t->hook_rpc || t->hook_left == 0 || code != CSI_OK)
		return;
	t->hook_left--;
	a = arena_new();
	v = t_get(t, a, t->hook_volume);
	v->updated_ms++;
	t_put_volume(t, v);
	arena_free(a);
}

static void test_idempotent_after_conflict(void **state)
{
	struct t *t = *state;
	const enum csi_rpc rpcs[] = {CSI_RPC_CREATE_VOLUME,
				     CSI_RPC_CONTROLLER_PUBLISH_VOLUME,
				     CSI_RPC_CONTROLLER_EXPAND_VOLUME,
				     CSI_RPC_CONTROLLER_MODIFY_VOLUME,
				     CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME,
				     CSI_RPC_DELETE_VOLUME};
	struct arena *a = arena_new();
	struct model_volume *v;

	t_new(t);
	t->fake.hook = t_race_hook;
	t->fake.hook_ctx = t;
	t->hook_volume = "v1";
	t->hook_rpc = rpcs[0];
	t->hook_left = 1;
	t_add(t, "v1", MODEL_VOL_CREATING, NULL);
	t_run(t, 0);
	/* Created twice (same name), one volume at the plugin. */
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CREATE_VOLUME), 2);
	assert_int_equal(t->fake.nvols, 1);
	assert_int_equal(t_get(t, a, "v1")->state, MODEL_VOL_READY);

	t->hook_rpc = rpcs[1];
	t->hook_left = 1;
	t_claim(t, "v1", "a1", "n1", MODEL_CLAIM_WRITE);
	t_run(t, 0);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_PUBLISH_VOLUME), 2);
	assert_int_equal(t->fake.npubs, 1);

	t->hook_rpc = rpcs[2];
	t->hook_left = 1;
	v = t_get(t, a, "v1");
	v->pending_capacity_min = 4 << 20;
	t_put_volume(t, v);
	t_run(t, 0);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_EXPAND_VOLUME), 2);
	assert_int_equal(t_get(t, a, "v1")->capacity, 4 << 20);

	t->hook_rpc = rpcs[3];
	t->hook_left = 1;
	v = t_get(t, a, "v1");
	assert_int_equal(model_map_put(a, &v->pending_mutable, "iops", "300", NULL), 0);
	t_put_volume(t, v);
	t_run(t, 0);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_MODIFY_VOLUME), 2);
	assert_string_equal(model_map_get(&t_get(t, a, "v1")->mutable_parameters, "iops"), "300");

	t->hook_rpc = rpcs[4];
	t->hook_left = 1;
	t_move(t, "v1", "a1", MODEL_CLAIM_NODE_UNPUBLISHED);
	t_run(t, 0);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME), 2);
	assert_int_equal(t->fake.npubs, 0);
	assert_int_equal(t_get(t, a, "v1")->nclaims, 0);

	t->hook_rpc = rpcs[5];
	t->hook_left = 1;
	t_set_state(t, "v1", MODEL_VOL_DELETING);
	t_run(t, 0);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_DELETE_VOLUME), 2);
	assert_null(t_get(t, a, "v1"));
	assert_int_equal(t->fake.nvols, 0);
	arena_free(a);
}

/* ---- capabilities ---- */

static void test_capability_gating(void **state)
{
	struct t *t = *state;
	struct arena *a = arena_new();
	struct model_status st;
	char err[512];
	struct model_volume *v;

	t_new(t);
	t_add(t, "v1", MODEL_VOL_CREATING, NULL);
	t_run(t, 0);

	/* Without PUBLISH_READONLY a read-only publication is sent readonly=false. */
	t->fake.caps &= ~(1ULL << 8);
	t_claim(t, "v1", "r1", "n1", MODEL_CLAIM_READ);
	t_run(t, 0);
	assert_int_equal(t->fake.log[t->fake.nlog - 1].rpc, CSI_RPC_CONTROLLER_PUBLISH_VOLUME);
	assert_false(t->fake.log[t->fake.nlog - 1].readonly);
	t->fake.caps |= 1ULL << 8;
	t_claim(t, "v1", "r2", "n2", MODEL_CLAIM_READ);
	t_run(t, 0);
	assert_true(t->fake.log[t->fake.nlog - 1].readonly);

	/* Without PUBLISH_UNPUBLISH_VOLUME: no controller publish, claims skip it. */
	t->fake.caps &= ~(1ULL << 2);
	t_add(t, "v2", MODEL_VOL_CREATING, NULL);
	t_run(t, 0);
	t_claim(t, "v2", "a1", "n1", MODEL_CLAIM_WRITE);
	t_run(t, 0);
	assert_int_equal(t_get(t, a, "v2")->npubs, 0);
	t_move(t, "v2", "a1", MODEL_CLAIM_NODE_UNPUBLISHED);
	{
		int pub0 = csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_PUBLISH_VOLUME);
		int unpub0 = csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME);

		t_run(t, 0);
		assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_PUBLISH_VOLUME), pub0);
		assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME),
				 unpub0);
	}
	v = t_get(t, a, "v2");
	assert_int_equal(v->nclaims, 0);
	assert_int_equal(v->npast_claims, 1);
	/* ...but a recorded publication is never dropped without its unpublish. */
	t_move(t, "v1", "r1", MODEL_CLAIM_NODE_UNPUBLISHED);
	t_run(t, 0);
	assert_int_equal(t_status(t, "v1", &st, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "lacks PUBLISH_UNPUBLISH_VOLUME"));
	v = t_get(t, a, "v1");
	assert_int_equal(v->nclaims, 2);
	t->fake.caps |= 1ULL << 2;
	t_run(t, MAX_MS);
	assert_int_equal(t_get(t, a, "v1")->nclaims, 1);

	/* Without CREATE_DELETE_VOLUME a create is a final error. */
	t->fake.caps &= ~(1ULL << 1);
	t_add(t, "v3", MODEL_VOL_CREATING, NULL);
	t_run(t, 0);
	assert_int_equal(t_get(t, a, "v3")->state, MODEL_VOL_FAILED);
	assert_int_equal(t_status(t, "v3", &st, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "lacks CREATE_DELETE_VOLUME"));

	/* Without EXPAND_VOLUME / MODIFY_VOLUME: final errors, nothing sent. */
	t->fake.caps &= ~((1ULL << 9) | (1ULL << 14));
	v = t_get(t, a, "v2");
	v->pending_capacity_min = 8 << 20;
	t_put_volume(t, v);
	t_run(t, 0);
	assert_int_equal(t_status(t, "v2", &st, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "expand: plugin " PLUGIN " lacks EXPAND_VOLUME"));
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_EXPAND_VOLUME), 0);

	arena_free(a);
}

static void test_no_controller_register(void **state)
{
	struct t *t = *state;
	struct arena *a = arena_new();
	struct model_volume *v = t_spec(a, "r1", "\"external_id\": \"x\"");
	struct model_status st;
	char err[512];

	t_new(t);
	v->plugin_id = PLUGIN2;
	v->state = MODEL_VOL_REGISTERING;
	t_put_volume(t, v);
	/* Controller down: retried with its error. */
	t->fake2.down = true;
	t_run(t, 0);
	assert_int_equal(t_status(t, "r1", &st, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "no healthy controller for plugin " PLUGIN2));
	assert_int_equal(t_get(t, a, "r1")->state, MODEL_VOL_REGISTERING);
	/* A plugin without controller service: nothing to validate, ready. */
	t->fake2.down = false;
	t->fake2.no_controller = true;
	t_run(t, MAX_MS);
	assert_int_equal(t_get(t, a, "r1")->state, MODEL_VOL_READY);
	assert_int_equal(csi_fake_calls(&t->fake2, CSI_RPC_VALIDATE_VOLUME_CAPABILITIES), 0);
	arena_free(a);
}

/* ---- snapshots, clone, restore, expand, modify ---- */

static void test_snapshots(void **state)
{
	struct t *t = *state;
	struct arena *a = arena_new();
	struct model_snapshot *s;
	struct model_volume *v;
	struct model_status st;
	char err[512];

	t_new(t);
	t->fake.snapshot_polls = 2;
	t_add(t, "v1", MODEL_VOL_CREATING, NULL);
	t_put_snap(t, "s1", "v1", MODEL_SNAP_CREATING, NULL);
	/* The snapshot waits for its source, then is polled until ready. */
	t_run(t, 0);
	s = t_get_snap(t, a, "s1");
	assert_int_equal(s->state, MODEL_SNAP_CREATING);
	assert_non_null(s->external_id);
	assert_false(s->ready_to_use);
	t_run(t, 10 * MIN_MS);
	s = t_get_snap(t, a, "s1");
	assert_int_equal(s->state, MODEL_SNAP_READY);
	assert_true(s->ready_to_use);
	assert_int_equal(s->size_bytes, 1 << 20);
	assert_int_equal(s->creation_time_ms, 1700000000000LL);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CREATE_SNAPSHOT), 3);

	/* Restore from it and clone the volume: the plugin's IDs are the sources. */
	t_add(t, "restored", MODEL_VOL_CREATING, "\"snapshot_source\": \"s1\"");
	t_add(t, "clone", MODEL_VOL_CREATING, "\"clone_source\": \"v1\"");
	t_run(t, 0);
	v = t_get(t, a, "restored");
	assert_int_equal(v->state, MODEL_VOL_READY);
	assert_string_equal(t->fake.vols[t->fake.nvols - 2].source, s->external_id);
	assert_int_equal(t_get(t, a, "clone")->state, MODEL_VOL_READY);
	assert_string_equal(t->fake.vols[t->fake.nvols - 1].source, t_get(t, a, "v1")->external_id);

	/* Delete: NOT_FOUND counts as done, the record goes. */
	t_put_snap(t, "s1", "v1", MODEL_SNAP_DELETING, s->external_id);
	csi_fake_script(&t->fake, CSI_RPC_DELETE_SNAPSHOT, CSI_NOT_FOUND, 1);
	t_run(t, 0);
	assert_null(t_get_snap(t, a, "s1"));

	/* Deleting one whose CreateSnapshot answer was lost: found by name, deleted. */
	{
		struct csi_fake_snap *fs = &t->fake.snaps[t->fake.nsnaps++];

		memset(fs, 0, sizeof(*fs));
		snprintf(fs->id, CSI_FAKE_ID, "lost-snap");
		snprintf(fs->name, CSI_FAKE_ID, "s3");
		snprintf(fs->volume, CSI_FAKE_ID, "%s", t_get(t, a, "v1")->external_id);
	}
	t_put_snap(t, "s3", "v1", MODEL_SNAP_DELETING, NULL);
	t_run(t, 0);
	assert_null(t_get_snap(t, a, "s3"));
	assert_false(csi_fake_has_snapshot(&t->fake, "s3"));
	assert_string_equal(t->fake.log[t->fake.nlog - 1].snapshot, "lost-snap");
	/* ...and one whose source volume is gone: nothing to look up, the record goes. */
	t_put_snap(t, "s4", "nope", MODEL_SNAP_DELETING, NULL);
	t_run(t, 0);
	assert_null(t_get_snap(t, a, "s4"));

	/* A final CreateSnapshot error: failed. */
	t_put_snap(t, "s2", "v1", MODEL_SNAP_CREATING, NULL);
	csi_fake_script(&t->fake, CSI_RPC_CREATE_SNAPSHOT, CSI_ALREADY_EXISTS, 1);
	t_run(t, MAX_MS);
	assert_int_equal(t_get_snap(t, a, "s2")->state, MODEL_SNAP_FAILED);
	/* A volume restored from it never can be: failed, saying why. */
	t_add(t, "r3", MODEL_VOL_CREATING, "\"snapshot_source\": \"s2\"");
	t_run(t, 0);
	assert_int_equal(t_get(t, a, "r3")->state, MODEL_VOL_FAILED);
	assert_int_equal(t_status(t, "r3", &st, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "snapshot source s2: failed"));
	/* Deleting a volume whose source is gone: nothing to look up, the record goes. */
	t_add(t, "r4", MODEL_VOL_DELETING, "\"clone_source\": \"nope\"");
	t_run(t, 0);
	assert_null(t_get(t, a, "r4"));
	/* Without CREATE_DELETE_SNAPSHOT, a restore is refused up front. */
	t->fake.caps &= ~(1ULL << 5);
	t_add(t, "r2", MODEL_VOL_CREATING, "\"snapshot_source\": \"s1\"");
	t_run(t, 0);
	assert_int_equal(t_get(t, a, "r2")->state, MODEL_VOL_FAILED);
	arena_free(a);
}

static void test_expand_modify(void **state)
{
	struct t *t = *state;
	struct arena *a = arena_new();
	struct model_volume *v;

	t_new(t);
	t->fake.node_expansion = true;
	t_add(t, "v1", MODEL_VOL_CREATING, "\"mutable_parameters\": {\"tier\": \"gold\"}");
	t_run(t, 0);
	v = t_get(t, a, "v1");
	v->pending_capacity_min = 64 << 20;
	assert_int_equal(model_map_put(a, &v->pending_mutable, "iops", "500", NULL), 0);
	t_put_volume(t, v);
	t_run(t, 0);
	v = t_get(t, a, "v1");
	assert_int_equal(v->capacity, 64 << 20);
	assert_int_equal(v->capacity_min, 64 << 20);
	assert_int_equal(v->pending_capacity_min, 0);
	assert_true(v->node_expansion_required);
	assert_int_equal(v->pending_mutable.n, 0);
	assert_string_equal(model_map_get(&v->mutable_parameters, "iops"), "500");
	assert_string_equal(model_map_get(&v->mutable_parameters, "tier"), "gold");
	assert_int_equal(t->fake.vols[0].modified, 1);
	assert_int_equal(t->fake.log[t->fake.nlog - 2].required_bytes, 64 << 20);
	arena_free(a);
}

/* ---- the queue ---- */

static void test_failing_volume_does_not_delay_others(void **state)
{
	struct t *t = *state;
	struct arena *a = arena_new();
	struct model_status st;
	char err[512];
	int queued, failing, bad_calls;

	t_new(t);
	csi_fake_fail_volume(&t->fake, "bad", CSI_UNAVAILABLE);
	t_add(t, "bad", MODEL_VOL_CREATING, NULL);
	for (int i = 0; i < 100; i++) {
		char id[16];

		snprintf(id, sizeof(id), "ok-%03d", i);
		t_add(t, id, MODEL_VOL_CREATING, NULL);
	}
	/* One step at the start time creates all 100; the bad one backs off. */
	reconciler_step(t->r);
	for (int i = 0; i < 100; i++) {
		char id[16];

		snprintf(id, sizeof(id), "ok-%03d", i);
		assert_int_equal(t_get(t, a, id)->state, MODEL_VOL_READY);
	}
	assert_int_equal(t_now(t), T0);
	t_run(t, 100 * MAX_MS);
	assert_int_equal(t_status(t, "bad", &st, err, sizeof(err)), 0);
	assert_true(st.attempts > 10);
	assert_true(st.next_attempt_ms > 0);
	reconciler_counts(t->r, &queued, &failing);
	assert_int_equal(queued, 1);
	assert_int_equal(failing, 1);
	/*
	 * Its retries are spaced by the capped backoff (at least 3/4 of the cap
	 * once there), not a tight loop: about 7 to reach the cap, then one per
	 * 7.5 to 10 s of the 1000 s run.
	 */
	bad_calls = csi_fake_calls(&t->fake, CSI_RPC_CREATE_VOLUME) - 100;
	assert_true(bad_calls >= 100 && bad_calls <= 8 + 100 * 4 / 3 + 1);
	arena_free(a);
}

static void test_change_log_and_start_enqueue(void **state)
{
	struct t *t = *state;
	struct arena *a = arena_new();

	/* Volumes stored before the reconciler exists are all worked at start. */
	t_add(t, "v1", MODEL_VOL_CREATING, NULL);
	t_add(t, "v2", MODEL_VOL_CREATING, NULL);
	t_put_snap(t, "s1", "v1", MODEL_SNAP_CREATING, NULL);
	t_new(t);
	t_run(t, 0);
	assert_int_equal(t_get(t, a, "v1")->state, MODEL_VOL_READY);
	assert_int_equal(t_get(t, a, "v2")->state, MODEL_VOL_READY);
	assert_int_equal(t_get_snap(t, a, "s1")->state, MODEL_SNAP_READY);
	/* A store change enqueues its volume without anyone calling enqueue. */
	t_add(t, "v3", MODEL_VOL_CREATING, NULL);
	t_run(t, 0);
	assert_int_equal(t_get(t, a, "v3")->state, MODEL_VOL_READY);
	arena_free(a);
}

/* A change log compacted past the reconciler's position: it lists everything again. */
static void test_change_log_compacted(void **state)
{
	struct t *t = *state;
	struct arena *a = arena_new();
	struct store_op op = {STORE_OP_PUT, STORE_NODE, "n1", "{}", 2, STORE_ANY};
	struct err e;

	t_new(t);
	t_add(t, "v1", MODEL_VOL_CREATING, NULL);
	t_run(t, 0);
	t_add(t, "v2", MODEL_VOL_CREATING, NULL);
	for (int i = 0; i < STORE_CHANGES_KEEP + 2048; i++)
		assert_int_equal(store_txn(t->store, &op, 1, NULL, &e), 0);
	t_run(t, 0);
	assert_int_equal(t_get(t, a, "v2")->state, MODEL_VOL_READY);
	/* And it follows the log again from there. */
	t_add(t, "v3", MODEL_VOL_CREATING, NULL);
	t_run(t, 0);
	assert_int_equal(t_get(t, a, "v3")->state, MODEL_VOL_READY);
	arena_free(a);
}

/* ---- threads ---- */

/* Waits (real time, bounded) until volumes <prefix>-0..n-1 are ready. */
static void t_wait_ready(struct t *t, const char *prefix, int n, int timeout_ms)
{
	struct timespec ts = {0, 2 * 1000000L};
	int64_t end = clock_now_ms(clock_real()) + timeout_ms;

	for (;;) {
		struct arena *a = arena_new();
		int ready = 0;

		for (int i = 0; i < n; i++) {
			char id[32];
			struct model_volume *v;

			snprintf(id, sizeof(id), "%s-%d", prefix, i);
			v = t_get(t, a, id);
			ready += v != NULL && v->state == MODEL_VOL_READY;
		}
		arena_free(a);
		if (ready == n)
			return;
		assert_true(clock_now_ms(clock_real()) < end);
		nanosleep(&ts, NULL);
	}
}

static void t_add_on(struct t *t, const char *id, const char *plugin)
{
	struct arena *a = arena_new();
	struct model_volume *v = t_spec(a, id, NULL);

	v->plugin_id = (char *)plugin;
	v->state = MODEL_VOL_CREATING;
	t_put_volume(t, v);
	arena_free(a);
}

/*
 * Workers on real threads: controller RPCs to one plugin never exceed its
 * concurrency, whatever the number of workers; volumes stored before the
 * start are enqueued by it, those stored after by the change-log follower.
 */
static void t_threads(struct t *t, int concurrency)
{
	struct err e;
	char id[32];

	t->cfg.clock = NULL;
	t->cfg.workers = 4;
	t->cfg.plugin_concurrency = concurrency;
	t->fake.delay_ms = 2;
	t->fake2.delay_ms = 2;
	t_new(t);
	for (int i = 0; i < THREADS_VOLUMES; i++) {
		snprintf(id, sizeof(id), "a-%d", i);
		t_add_on(t, id, PLUGIN);
	}
	assert_int_equal(reconciler_start(t->r, &e), 0);
	for (int i = 0; i < THREADS_VOLUMES; i++) {
		snprintf(id, sizeof(id), "b-%d", i);
		t_add_on(t, id, PLUGIN2);
	}
	t_wait_ready(t, "a", THREADS_VOLUMES, 20000);
	t_wait_ready(t, "b", THREADS_VOLUMES, 20000);
	reconciler_stop(t->r);
	assert_int_equal(t->fake.nlog, THREADS_VOLUMES);
	assert_int_equal(t->fake2.nlog, THREADS_VOLUMES);
	assert_true(t->fake.max_in_flight >= 1 && t->fake.max_in_flight <= concurrency);
	assert_true(t->fake2.max_in_flight >= 1 && t->fake2.max_in_flight <= concurrency);
	assert_int_equal(t->fake.in_flight, 0);
}

static void test_threads_serialized(void **state)
{
	t_threads(*state, 1);
}

static void test_threads_concurrency_two(void **state)
{
	t_threads(*state, 2);
}

/* ---- the decision table ---- */

static void test_next_step_table(void **state)
{
	const uint64_t all = CSI_FAKE_CAPS_ALL, nopub = all & ~(1ULL << 2);
	struct model_claim claims[2];
	struct model_publication pubs[1];
	struct model_kv kv = {"k", "v"};
	struct model_volume v;
	struct reconcile_step st;

	memset(&v, 0, sizeof(v));
	memset(claims, 0, sizeof(claims));
	memset(pubs, 0, sizeof(pubs));
	v.id = "v";
	v.claims = claims;
	v.pubs = pubs;
	claims[0].alloc_id = "a1";
	claims[0].node_id = "n1";
	claims[1].alloc_id = "a2";
	claims[1].node_id = "n1";
	pubs[0].node_id = "n1";

	v.state = MODEL_VOL_CREATING;
	reconcile_volume_next(&v, RECONCILE_CTRL_UP, all, &st);
	assert_int_equal(st.kind, RSTEP_CREATE);
	reconcile_volume_next(&v, RECONCILE_CTRL_DOWN, 0, &st);
	assert_int_equal(st.kind, RSTEP_CREATE);
	reconcile_volume_next(&v, RECONCILE_CTRL_NONE, 0, &st);
	assert_int_equal(st.kind, RSTEP_CREATE_LACKS);
	v.clone_source = "src";
	reconcile_volume_next(&v, RECONCILE_CTRL_UP, all & ~(1ULL << 7), &st);
	assert_int_equal(st.kind, RSTEP_CREATE_LACKS);
	assert_string_equal(st.missing, "CLONE_VOLUME");
	v.clone_source = NULL;
	v.state = MODEL_VOL_REGISTERING;
	reconcile_volume_next(&v, RECONCILE_CTRL_UP, 0, &st);
	assert_int_equal(st.kind, RSTEP_VALIDATE);
	reconcile_volume_next(&v, RECONCILE_CTRL_NONE, 0, &st);
	assert_int_equal(st.kind, RSTEP_REGISTERED);
	v.state = MODEL_VOL_FAILED;
	reconcile_volume_next(&v, RECONCILE_CTRL_UP, all, &st);
	assert_int_equal(st.kind, RSTEP_FAILED);

	v.state = MODEL_VOL_READY;
	reconcile_volume_next(&v, RECONCILE_CTRL_UP, all, &st);
	assert_int_equal(st.kind, RSTEP_NONE);
	/* A claim without publication: added when the plugin needs one. */
	v.nclaims = 1;
	reconcile_volume_next(&v, RECONCILE_CTRL_UP, all, &st);
	assert_int_equal(st.kind, RSTEP_PUB_ADD);
	reconcile_volume_next(&v, RECONCILE_CTRL_UP, nopub, &st);
	assert_int_equal(st.kind, RSTEP_NONE);
	reconcile_volume_next(&v, RECONCILE_CTRL_DOWN, 0, &st);
	assert_int_equal(st.kind, RSTEP_NEED_CONTROLLER);
	/* Publishing -> publish; lacking the capability -> lacks. */
	v.npubs = 1;
	pubs[0].state = MODEL_PUB_PUBLISHING;
	reconcile_volume_next(&v, RECONCILE_CTRL_UP, all, &st);
	assert_int_equal(st.kind, RSTEP_PUBLISH);
	reconcile_volume_next(&v, RECONCILE_CTRL_UP, nopub, &st);
	assert_int_equal(st.kind, RSTEP_LACKS);
	assert_int_equal(st.blocked, RSTEP_PUBLISH);
	/* Unpublishing while claimed: publishing again (store only, controller down too). */
	pubs[0].state = MODEL_PUB_UNPUBLISHING;
	reconcile_volume_next(&v, RECONCILE_CTRL_DOWN, 0, &st);
	assert_int_equal(st.kind, RSTEP_PUB_REPUBLISH);
	/* Node-unpublished, another claim on the node still claimed: pub kept. */
	pubs[0].state = MODEL_PUB_PUBLISHED;
	v.nclaims = 2;
	claims[0].state = MODEL_CLAIM_NODE_UNPUBLISHED;
	reconcile_volume_next(&v, RECONCILE_CTRL_DOWN, 0, &st);
	assert_int_equal(st.kind, RSTEP_CLAIM_CONTROLLER_DONE);
	assert_int_equal(st.index, 0);
	/* The last claim on the node: the publication goes first. */
	claims[1].state = MODEL_CLAIM_NODE_UNPUBLISHED;
	reconcile_volume_next(&v, RECONCILE_CTRL_DOWN, 0, &st);
	assert_int_equal(st.kind, RSTEP_PUB_UNPUBLISHING);
	pubs[0].state = MODEL_PUB_UNPUBLISHING;
	reconcile_volume_next(&v, RECONCILE_CTRL_UP, all, &st);
	assert_int_equal(st.kind, RSTEP_UNPUBLISH);
	reconcile_volume_next(&v, RECONCILE_CTRL_DOWN, 0, &st);
	assert_int_equal(st.kind, RSTEP_UNPUBLISH);
	/* Freed only once the publication is gone. */
	v.npubs = 0;
	reconcile_volume_next(&v, RECONCILE_CTRL_DOWN, 0, &st);
	assert_int_equal(st.kind, RSTEP_CLAIM_CONTROLLER_DONE);
	claims[0].state = MODEL_CLAIM_CONTROLLER_UNPUBLISHED;
	reconcile_volume_next(&v, RECONCILE_CTRL_DOWN, 0, &st);
	assert_int_equal(st.kind, RSTEP_CLAIM_FREE);
	/* An orphan publication (no claim on its node) is unpublished. */
	v.nclaims = 0;
	v.npubs = 1;
	pubs[0].state = MODEL_PUB_PUBLISHED;
	reconcile_volume_next(&v, RECONCILE_CTRL_UP, all, &st);
	assert_int_equal(st.kind, RSTEP_PUB_UNPUBLISHING);
	/* Expand before modify; deleting waits for the publication. */
	v.npubs = 0;
	v.pending_capacity_min = 10;
	v.pending_mutable.kv = &kv;
	v.pending_mutable.n = 1;
	reconcile_volume_next(&v, RECONCILE_CTRL_UP, all, &st);
	assert_int_equal(st.kind, RSTEP_EXPAND);
	v.pending_capacity_min = 0;
	reconcile_volume_next(&v, RECONCILE_CTRL_UP, all, &st);
	assert_int_equal(st.kind, RSTEP_MODIFY);
	reconcile_volume_next(&v, RECONCILE_CTRL_UP, all & ~(1ULL << 14), &st);
	assert_int_equal(st.kind, RSTEP_LACKS);
	assert_int_equal(st.blocked, RSTEP_MODIFY);
	v.pending_mutable.n = 0;
	v.state = MODEL_VOL_DELETING;
	v.npubs = 1;
	reconcile_volume_next(&v, RECONCILE_CTRL_UP, all, &st);
	assert_int_equal(st.kind, RSTEP_PUB_UNPUBLISHING);
	v.npubs = 0;
	v.ncaps = 1;
	reconcile_volume_next(&v, RECONCILE_CTRL_UP, all, &st);
	assert_int_equal(st.kind, RSTEP_CREATE);
	reconcile_volume_next(&v, RECONCILE_CTRL_DOWN, 0, &st);
	assert_int_equal(st.kind, RSTEP_CREATE);
	reconcile_volume_next(&v, RECONCILE_CTRL_NONE, 0, &st);
	assert_int_equal(st.kind, RSTEP_REMOVE);
	reconcile_volume_next(&v, RECONCILE_CTRL_UP, all & ~(1ULL << 1), &st);
	assert_int_equal(st.kind, RSTEP_REMOVE);
	v.external_id = "x";
	reconcile_volume_next(&v, RECONCILE_CTRL_UP, all, &st);
	assert_int_equal(st.kind, RSTEP_DELETE);
	reconcile_volume_next(&v, RECONCILE_CTRL_UP, nopub & ~(1ULL << 1), &st);
	assert_int_equal(st.kind, RSTEP_LACKS);
	assert_string_equal(st.missing, "CREATE_DELETE_VOLUME");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_backoff_function),
	    cmocka_unit_test(test_next_step_table),
	    cmocka_unit_test_setup_teardown(test_backoff_virtual_time, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_create, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_aborted_retried, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_invalid_argument_final, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_register, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_publish_unpublish, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_not_found_is_done, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_delete, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_claim_states_fail_once, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_idempotent_after_conflict, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_capability_gating, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_no_controller_register, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_snapshots, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_expand_modify, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_failing_volume_does_not_delay_others, t_setup,
					    t_teardown),
	    cmocka_unit_test_setup_teardown(test_change_log_and_start_enqueue, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_change_log_compacted, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_threads_serialized, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_threads_concurrency_two, t_setup, t_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
