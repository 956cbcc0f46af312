/*
 * The reconciler test fixture of reconciler_fixture.h: setup and
 * teardown, stepping in virtual time, and the store helpers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model/model_claim.h"
#include "server/server_pastclaims.h"
#include "reconciler_fixture.h"

int rfx_setup(void **state)
{
	struct rfx *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	clock_fake_init(&t->clock, RFX_T0, RFX_WALL0);
	assert_int_equal(store_mem_new(&t->store, NULL), 0);
	csi_fake_init(&t->fake, RFX_PLUGIN);
	csi_fake_init(&t->fake2, RFX_PLUGIN2);
	t->fake.next = &t->fake2;
	t->cfg.store = t->store;
	t->cfg.controllers = csi_fake_controllers(&t->fake);
	t->cfg.clock = &t->clock.base;
	t->cfg.backoff_min_ms = RFX_MIN_MS;
	t->cfg.backoff_max_ms = RFX_MAX_MS;
	t->cfg.seed = 42;
	*state = t;
	return 0;
}

int rfx_teardown(void **state)
{
	struct rfx *t = *state;

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

void rfx_new(struct rfx *t)
{
	struct err e;

	assert_int_equal(reconciler_new(&t->cfg, &t->r, &e), 0);
}

int64_t rfx_now(struct rfx *t)
{
	return clock_now_ms(&t->clock.base);
}

/* Steps, moving the clock to each next due time, while it is within budget_ms. */
int64_t rfx_run(struct rfx *t, int64_t budget_ms)
{
	int64_t end = rfx_now(t) + budget_ms;

	for (;;) {
		int64_t next = reconciler_step(t->r);

		if (next == CLOCK_NEVER || next > end)
			return next;
		clock_fake_set(&t->clock, next);
	}
}

/* ---- store helpers ---- */

void rfx_put_volume(struct rfx *t, const struct model_volume *v)
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

/* A volume from a spec with plugin RFX_PLUGIN and one single-node-writer capability. */
struct model_volume *rfx_spec(struct arena *a, const char *id, const char *extra)
{
	char text[2048];
	struct model_volume *v;
	struct err e;

	snprintf(text, sizeof(text),
		 "{\"id\": \"%s\", \"plugin_id\": \"" RFX_PLUGIN "\", \"capacity_min\": 1048576, "
		 "\"capabilities\": [{\"access_mode\": \"single-node-writer\"}], "
		 "\"secrets\": {\"token\": \"s3cret\"}%s%s}",
		 id, extra ? ", " : "", extra ? extra : "");
	if (model_volume_spec_decode(a, text, strlen(text), false, &v, &e) != 0)
		fail_msg("spec: %s", e.msg);
	v->created_ms = RFX_WALL0;
	return v;
}

/* Stores a new volume in state st. */
void rfx_add(struct rfx *t, const char *id, enum model_volume_state st, const char *extra)
{
	struct arena *a = arena_new();
	struct model_volume *v = rfx_spec(a, id, extra);

	v->state = st;
	rfx_put_volume(t, v);
	arena_free(a);
}

/* The stored volume record (in a), or NULL. */
static struct model_volume *rfx_record(struct rfx *t, struct arena *a, const char *id)
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

/* The stored volume (in a) with its claim history in past_claims, or NULL. */
struct model_volume *rfx_get(struct rfx *t, struct arena *a, const char *id)
{
	struct model_volume *v = rfx_record(t, a, id);
	struct err e;

	if (v)
		assert_int_equal(server_pastclaims_read(t->store, v, a, &e), 0);
	return v;
}

struct model_snapshot *rfx_get_snap(struct rfx *t, struct arena *a, const char *id)
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

void rfx_put_snap(struct rfx *t, const char *id, const char *volume, enum model_snapshot_state st,
		  const char *external_id)
{
	struct model_snapshot s;
	struct store_op op = {STORE_OP_PUT, STORE_SNAPSHOT, id, NULL, 0, STORE_ANY};
	char *json;
	size_t len;
	struct err e;

	memset(&s, 0, sizeof(s));
	s.id = (char *)id;
	s.volume_id = (char *)volume;
	s.plugin_id = RFX_PLUGIN;
	s.external_id = (char *)external_id;
	s.state = st;
	s.ready_to_use = st == MODEL_SNAP_READY;
	s.created_ms = RFX_WALL0;
	assert_int_equal(model_snapshot_encode(&s, MODEL_VIEW_STORE, &json, &len, &e), 0);
	op.value = json;
	op.len = len;
	assert_int_equal(store_txn(t->store, &op, 1, NULL, &e), 0);
	model_wipe_free(json, len);
}

/* Adds alloc's claim on node (plugin node ID "p-<node>") as the server would. */
void rfx_claim(struct rfx *t, const char *id, const char *alloc, const char *node,
	       enum model_claim_mode mode)
{
	struct arena *a = arena_new();
	struct model_volume *v = rfx_record(t, a, id);
	char pnode[64];
	struct model_claim_request req = {alloc, node, mode, v->caps[0], false};
	struct model_claim_env env = {.controller_required = (t->fake.caps & (1ULL << 2)) != 0,
				      .controller_healthy = true,
				      .node_plugin_healthy = true,
				      .plugin_node_id = pnode};
	struct err e;

	snprintf(pnode, sizeof(pnode), "p-%s", node);
	if (model_claim_add(a, v, &req, &env, RFX_WALL0, &e) != 0)
		fail_msg("claim: %s", e.msg);
	rfx_put_volume(t, v);
	arena_free(a);
}

/* Moves alloc's claim to `to` as the server's release or detach would. */
void rfx_move(struct rfx *t, const char *id, const char *alloc, enum model_claim_state to)
{
	struct arena *a = arena_new();
	struct model_volume *v = rfx_record(t, a, id);
	struct err e;

	if (model_volume_claim_move(a, v, alloc, to, "test", RFX_WALL0, &e) != 0)
		fail_msg("move: %s", e.msg);
	rfx_put_volume(t, v);
	arena_free(a);
}

void rfx_set_state(struct rfx *t, const char *id, enum model_volume_state st)
{
	struct arena *a = arena_new();
	struct model_volume *v = rfx_record(t, a, id);

	v->state = st;
	rfx_put_volume(t, v);
	arena_free(a);
}

/* The reconciler's status of volume id (last_error "" when none). */
int rfx_status(struct rfx *t, const char *id, struct model_status *st, char *err, size_t len)
{
	struct arena *a = arena_new();
	int rc = reconciler_status(t->r, STORE_VOLUME, id, a, st);

	snprintf(err, len, "%s", rc == 0 && st->last_error ? st->last_error : "");
	arena_free(a);
	return rc;
}
