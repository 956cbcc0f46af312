/*
 * Unit tests of the claim rules (src/model/model_claim.c): every pair of
 * an existing claim's access mode and a new claim's access mode, times
 * read/write of each, same or other node, same or other allocation,
 * against a table of expected verdicts written out per mode; conflict
 * messages name the holders. Then the checks before the holders (volume
 * state, capability, plugin health, topology, volume limit), releasing
 * claims that still hold, and model_claim_add's claim and publication.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "model/model_claim.h"

#define R MODEL_CLAIM_READ
#define W MODEL_CLAIM_WRITE

enum expect { GRANT, ALREADY, CONFLICT, INVALID, PRECOND };

static const char *expect_name(enum expect x)
{
	static const char *const n[] = {"grant", "already", "conflict", "invalid", "precond"};
	return n[x];
}

/* A ready volume "data" offering every access mode on file-system, plus
 * single-node-writer on block-device. */
static struct model_volume *vol_new(struct arena *a)
{
	struct model_volume *v = arena_alloc(a, sizeof(*v));

	v->id = "data";
	v->plugin_id = "hostpath.csi.csid.dev";
	v->state = MODEL_VOL_READY;
	v->caps = arena_alloc(a, 8 * sizeof(*v->caps));
	for (int m = 1; m <= 7; m++)
		v->caps[v->ncaps++] =
		    (struct model_capability){(enum model_access)m, MODEL_ATTACH_FILE_SYSTEM};
	v->caps[v->ncaps++] =
	    (struct model_capability){MODEL_ACCESS_SINGLE_NODE_WRITER, MODEL_ATTACH_BLOCK_DEVICE};
	return v;
}

static struct model_claim_env env_ok(void)
{
	return (struct model_claim_env){.controller_required = true,
					.controller_healthy = true,
					.node_plugin_healthy = true,
					.plugin_node_id = "csi-n1"};
}

/* Adds an active claim straight into v (as a decoded record would hold it). */
static void vol_hold(struct arena *a, struct model_volume *v, const char *alloc, const char *node,
		     enum model_access m, enum model_claim_mode mode, enum model_claim_state st)
{
	struct model_claim *c = arena_alloc(a, (v->nclaims + 1) * sizeof(*c));

	if (v->nclaims)
		memcpy(c, v->claims, v->nclaims * sizeof(*c));
	c[v->nclaims] = (struct model_claim){.alloc_id = (char *)alloc,
					     .node_id = (char *)node,
					     .plugin_node_id = "csi-x",
					     .mode = mode,
					     .cap = {m, MODEL_ATTACH_FILE_SYSTEM},
					     .read_only = mode == R,
					     .state = st};
	v->claims = c;
	v->nclaims++;
}

static enum expect check(const struct model_volume *v, const struct model_claim_request *req,
			 const struct model_claim_env *env, struct err *e)
{
	enum model_claim_verdict verdict = MODEL_CLAIM_GRANT;
	int rc;

	err_clear(e);
	rc = model_claim_check(v, req, env, &verdict, e);
	switch (rc) {
	case 0:
		return verdict == MODEL_CLAIM_ALREADY ? ALREADY : GRANT;
	case CSID_ECONFLICT:
		return CONFLICT;
	case CSID_EINVAL:
		return INVALID;
	case CSID_EPRECOND:
		return PRECOND;
	}
	fail_msg("unexpected rc %d: %s", rc, e->msg);
	return INVALID;
}

/*
 * Expected verdicts when another allocation holds the volume with the
 * same access mode: {mode, held read/write, new read/write, same node,
 * other node}. A write claim under a reader-only mode is invalid.
 */
static const struct same_mode_row {
	enum model_access mode;
	enum model_claim_mode held, want;
	enum expect same_node, other_node;
} same_mode_rows[] = {
    {MODEL_ACCESS_SINGLE_NODE_READER_ONLY, R, R, GRANT, CONFLICT},
    {MODEL_ACCESS_SINGLE_NODE_READER_ONLY, R, W, INVALID, INVALID},
    {MODEL_ACCESS_SINGLE_NODE_WRITER, R, R, GRANT, CONFLICT},
    {MODEL_ACCESS_SINGLE_NODE_WRITER, R, W, GRANT, CONFLICT},
    {MODEL_ACCESS_SINGLE_NODE_WRITER, W, R, GRANT, CONFLICT},
    {MODEL_ACCESS_SINGLE_NODE_WRITER, W, W, CONFLICT, CONFLICT},
    {MODEL_ACCESS_SINGLE_NODE_SINGLE_WRITER, R, R, CONFLICT, CONFLICT},
    {MODEL_ACCESS_SINGLE_NODE_SINGLE_WRITER, R, W, CONFLICT, CONFLICT},
    {MODEL_ACCESS_SINGLE_NODE_SINGLE_WRITER, W, R, CONFLICT, CONFLICT},
    {MODEL_ACCESS_SINGLE_NODE_SINGLE_WRITER, W, W, CONFLICT, CONFLICT},
    {MODEL_ACCESS_SINGLE_NODE_MULTI_WRITER, R, R, GRANT, CONFLICT},
    {MODEL_ACCESS_SINGLE_NODE_MULTI_WRITER, R, W, GRANT, CONFLICT},
    {MODEL_ACCESS_SINGLE_NODE_MULTI_WRITER, W, R, GRANT, CONFLICT},
    {MODEL_ACCESS_SINGLE_NODE_MULTI_WRITER, W, W, GRANT, CONFLICT},
    {MODEL_ACCESS_MULTI_NODE_READER_ONLY, R, R, GRANT, GRANT},
    {MODEL_ACCESS_MULTI_NODE_READER_ONLY, R, W, INVALID, INVALID},
    {MODEL_ACCESS_MULTI_NODE_SINGLE_WRITER, R, R, GRANT, GRANT},
    {MODEL_ACCESS_MULTI_NODE_SINGLE_WRITER, R, W, GRANT, GRANT},
    {MODEL_ACCESS_MULTI_NODE_SINGLE_WRITER, W, R, GRANT, GRANT},
    {MODEL_ACCESS_MULTI_NODE_SINGLE_WRITER, W, W, CONFLICT, CONFLICT},
    {MODEL_ACCESS_MULTI_NODE_MULTI_WRITER, R, R, GRANT, GRANT},
    {MODEL_ACCESS_MULTI_NODE_MULTI_WRITER, R, W, GRANT, GRANT},
    {MODEL_ACCESS_MULTI_NODE_MULTI_WRITER, W, R, GRANT, GRANT},
    {MODEL_ACCESS_MULTI_NODE_MULTI_WRITER, W, W, GRANT, GRANT},
};

static const struct same_mode_row *same_mode_find(enum model_access m, enum model_claim_mode held,
						  enum model_claim_mode want)
{
	for (size_t i = 0; i < sizeof(same_mode_rows) / sizeof(same_mode_rows[0]); i++)
		if (same_mode_rows[i].mode == m && same_mode_rows[i].held == held &&
		    same_mode_rows[i].want == want)
			return &same_mode_rows[i];
	return NULL;
}

/* The expected verdict of one combination (see the table and the header). */
static enum expect expected(enum model_access held_mode, enum model_claim_mode held,
			    enum model_access want_mode, enum model_claim_mode want, bool same_node,
			    bool same_alloc)
{
	const struct same_mode_row *row;

	if (same_alloc)
		/* Granted again only when it asks exactly what it holds. */
		return held_mode == want_mode && held == want && same_node ? ALREADY : CONFLICT;
	if (want == W && (want_mode == MODEL_ACCESS_SINGLE_NODE_READER_ONLY ||
			  want_mode == MODEL_ACCESS_MULTI_NODE_READER_ONLY))
		return INVALID;
	if (held_mode != want_mode)
		return CONFLICT; /* the holders fix the mode */
	row = same_mode_find(held_mode, held, want);
	assert_non_null(row);
	return same_node ? row->same_node : row->other_node;
}

static void test_claim_every_mode_pair(void **state)
{
	int cases = 0, conflicts = 0;

	(void)state;
	for (int hm = 1; hm <= 7; hm++) {
		for (int held = R; held <= W; held++) {
			if (held == W && !model_access_writable((enum model_access)hm))
				continue; /* such a claim cannot exist */
			for (int wm = 1; wm <= 7; wm++)
				for (int want = R; want <= W; want++)
					for (int sn = 0; sn < 2; sn++)
						for (int sa = 0; sa < 2; sa++) {
							struct arena *a = arena_new();
							struct model_volume *v = vol_new(a);
							struct model_claim_env env = env_ok();
							struct model_claim_request req = {
							    .alloc_id = sa ? "holder-1" : "new-1",
							    .node_id = sn ? "n1" : "n2",
							    .mode = (enum model_claim_mode)want,
							    .cap = {(enum model_access)wm,
								    MODEL_ATTACH_FILE_SYSTEM}};
							enum expect want_x = expected(
							    (enum model_access)hm,
							    (enum model_claim_mode)held,
							    (enum model_access)wm,
							    (enum model_claim_mode)want, sn, sa);
							enum expect got;
							struct err e;

							vol_hold(a, v, "holder-1", "n1",
								 (enum model_access)hm,
								 (enum model_claim_mode)held,
								 MODEL_CLAIM_CLAIMED);
							got = check(v, &req, &env, &e);
							if (got != want_x)
								fail_msg(
								    "held %s/%s, want %s/%s, %s "
								    "node, %s alloc: expected "
								    "%s, got %s (%s)",
								    model_access_name(hm),
								    model_claim_mode_name(held),
								    model_access_name(wm),
								    model_claim_mode_name(want),
								    sn ? "same" : "other",
								    sa ? "same" : "other",
								    expect_name(want_x),
								    expect_name(got), e.msg);
							if (got == CONFLICT) {
								/* The message names the holder. */
								assert_non_null(
								    strstr(e.msg, "holder-1"));
								assert_non_null(
								    strstr(e.msg, "node n1"));
								assert_non_null(
								    strstr(e.msg, "data"));
								conflicts++;
							}
							cases++;
							arena_free(a);
						}
		}
	}
	/* 7 modes held for reading, 5 of them for writing; 7 x 2 x 2 x 2 asks each. */
	assert_int_equal(cases, 12 * 7 * 8);
	assert_true(conflicts > 0);
}

/*
 * Every active state holds the volume: a claim being released still
 * counts, refused as a precondition (retry) rather than a conflict. One
 * claimed holder among releasing ones makes it a conflict again.
 */
static void test_claim_releasing_holders_count(void **state)
{
	static const enum model_claim_state active[] = {
	    MODEL_CLAIM_CLAIMED, MODEL_CLAIM_NODE_UNPUBLISHED, MODEL_CLAIM_CONTROLLER_UNPUBLISHED};

	(void)state;
	for (size_t i = 0; i < 3; i++) {
		struct arena *a = arena_new();
		struct model_volume *v = vol_new(a);
		struct model_claim_env env = env_ok();
		struct model_claim_request req = {
		    "web-2",
		    "n1",
		    W,
		    {MODEL_ACCESS_SINGLE_NODE_WRITER, MODEL_ATTACH_FILE_SYSTEM},
		    false};
		struct err e;

		vol_hold(a, v, "web-1", "n1", MODEL_ACCESS_SINGLE_NODE_WRITER, W, active[i]);
		assert_int_equal(check(v, &req, &env, &e),
				 active[i] == MODEL_CLAIM_CLAIMED ? CONFLICT : PRECOND);
		assert_non_null(strstr(e.msg, "web-1"));
		if (active[i] != MODEL_CLAIM_CLAIMED)
			assert_non_null(strstr(e.msg, model_claim_state_name(active[i])));
		/* The same allocation asking again while releasing is no re-grant. */
		req.alloc_id = "web-1";
		assert_int_equal(check(v, &req, &env, &e),
				 active[i] == MODEL_CLAIM_CLAIMED ? ALREADY : PRECOND);
		/* ... nor with another node, which waits for the release as well. */
		req.node_id = "n2";
		assert_int_equal(check(v, &req, &env, &e),
				 active[i] == MODEL_CLAIM_CLAIMED ? CONFLICT : PRECOND);
		/* A claimed holder beside a releasing one: a conflict, both named. */
		vol_hold(a, v, "web-2", "n1", MODEL_ACCESS_SINGLE_NODE_WRITER, R,
			 MODEL_CLAIM_CLAIMED);
		req.alloc_id = "web-3";
		req.mode = R;
		assert_int_equal(check(v, &req, &env, &e), CONFLICT);
		assert_non_null(strstr(e.msg, "held on another node by alloc web-1"));
		assert_non_null(strstr(e.msg, "alloc web-2 (read) on node n1"));
		arena_free(a);
	}
}

static void test_claim_header_example_message(void **state)
{
	struct arena *a = arena_new();
	struct model_volume *v = vol_new(a);
	struct model_claim_env env = env_ok();
	struct model_claim_request req = {
	    "web-2", "n1", W, {MODEL_ACCESS_SINGLE_NODE_WRITER, MODEL_ATTACH_FILE_SYSTEM}, false};
	struct err e;

	(void)state;
	vol_hold(a, v, "web-1", "n1", MODEL_ACCESS_SINGLE_NODE_WRITER, W, MODEL_CLAIM_CLAIMED);
	assert_int_equal(check(v, &req, &env, &e), CONFLICT);
	assert_string_equal(e.msg, "volume data: single-node-writer: held for writing by alloc "
				   "web-1 (write) on node n1");
	arena_free(a);
}

/* Many holders: four are named, the rest counted. */
static void test_claim_many_holders_named(void **state)
{
	struct arena *a = arena_new();
	struct model_volume *v = vol_new(a);
	struct model_claim_env env = env_ok();
	struct model_claim_request req = {
	    "late",
	    "n9",
	    R,
	    {MODEL_ACCESS_SINGLE_NODE_MULTI_WRITER, MODEL_ATTACH_FILE_SYSTEM},
	    false};
	static const char *const allocs[] = {"a1", "a2", "a3", "a4", "a5", "a6"};
	struct err e;

	(void)state;
	for (int i = 0; i < 6; i++)
		vol_hold(a, v, allocs[i], "n1", MODEL_ACCESS_SINGLE_NODE_MULTI_WRITER, W,
			 MODEL_CLAIM_CLAIMED);
	assert_int_equal(check(v, &req, &env, &e), CONFLICT);
	assert_non_null(strstr(e.msg, "alloc a1 (write) on node n1"));
	assert_non_null(strstr(e.msg, "alloc a4"));
	assert_null(strstr(e.msg, "alloc a5"));
	assert_non_null(strstr(e.msg, "and 2 more"));
	/* On their node, a seventh is fine. */
	req.node_id = "n1";
	assert_int_equal(check(v, &req, &env, &e), GRANT);
	arena_free(a);
}

static void test_claim_preconditions(void **state)
{
	struct arena *a = arena_new();
	struct model_volume *v = vol_new(a);
	struct model_claim_env env = env_ok();
	struct model_claim_request req = {
	    "web-1", "n1", W, {MODEL_ACCESS_SINGLE_NODE_WRITER, MODEL_ATTACH_FILE_SYSTEM}, false};
	struct model_topology zone_a, zone_b, node_a;
	struct model_kv kv_a = {"zone", "a"}, kv_b = {"zone", "b"};
	struct err e;

	(void)state;
	assert_int_equal(check(v, &req, &env, &e), GRANT);

	for (int st = MODEL_VOL_CREATING; st <= MODEL_VOL_FAILED; st++) {
		v->state = (enum model_volume_state)st;
		assert_int_equal(check(v, &req, &env, &e), st == MODEL_VOL_READY ? GRANT : PRECOND);
		if (st != MODEL_VOL_READY)
			assert_non_null(strstr(e.msg, model_volume_state_name(v->state)));
	}
	v->state = MODEL_VOL_READY;

	req.cap.attachment = MODEL_ATTACH_BLOCK_DEVICE;
	req.cap.access = MODEL_ACCESS_MULTI_NODE_MULTI_WRITER;
	assert_int_equal(check(v, &req, &env, &e), INVALID);
	assert_non_null(strstr(e.msg, "multi-node-multi-writer/block-device"));
	req.cap.access = MODEL_ACCESS_SINGLE_NODE_WRITER;
	assert_int_equal(check(v, &req, &env, &e), GRANT);
	req.cap.access = MODEL_ACCESS_UNKNOWN;
	assert_int_equal(check(v, &req, &env, &e), INVALID);
	req.cap =
	    (struct model_capability){MODEL_ACCESS_SINGLE_NODE_WRITER, MODEL_ATTACH_FILE_SYSTEM};

	env.controller_healthy = false;
	assert_int_equal(check(v, &req, &env, &e), PRECOND);
	assert_non_null(strstr(e.msg, "controller"));
	env.controller_required = false; /* no controller needed: its health does not matter */
	assert_int_equal(check(v, &req, &env, &e), GRANT);
	/* A controller still starting may need ControllerPublishVolume: not yet. */
	env.controller_unknown = true;
	assert_int_equal(check(v, &req, &env, &e), PRECOND);
	assert_non_null(strstr(e.msg, "controller has not reported its capabilities yet"));
	env.controller_unknown = false;
	env.node_plugin_healthy = false;
	assert_int_equal(check(v, &req, &env, &e), PRECOND);
	assert_non_null(strstr(e.msg, "node plugin on node n1"));
	env = env_ok();
	env.plugin_node_id = NULL;
	assert_int_equal(check(v, &req, &env, &e), PRECOND);
	assert_non_null(strstr(e.msg, "no node ID"));
	env.controller_required = false; /* only ControllerPublishVolume needs it */
	assert_int_equal(check(v, &req, &env, &e), GRANT);
	env = env_ok();

	zone_a.segments = (struct model_map){&kv_a, 1};
	zone_b.segments = (struct model_map){&kv_b, 1};
	node_a = zone_a;
	v->requisite = &zone_b;
	v->nrequisite = 1;
	env.node_topology = &node_a;
	assert_int_equal(check(v, &req, &env, &e), PRECOND);
	assert_non_null(strstr(e.msg, "topology"));
	/* Accessible topology, once the plugin reported it, wins over requisite. */
	v->accessible = &zone_a;
	v->naccessible = 1;
	assert_int_equal(check(v, &req, &env, &e), GRANT);
	env.node_topology = NULL;
	assert_int_equal(check(v, &req, &env, &e), PRECOND);
	env = env_ok();
	v->naccessible = v->nrequisite = 0;

	env.max_volumes = 2;
	env.node_volume_count = 2;
	assert_int_equal(check(v, &req, &env, &e), PRECOND);
	assert_non_null(strstr(e.msg, "limit of 2 volumes"));
	/* Already on the node: the claim adds no volume there. */
	vol_hold(a, v, "reader", "n1", MODEL_ACCESS_SINGLE_NODE_WRITER, R, MODEL_CLAIM_CLAIMED);
	assert_int_equal(check(v, &req, &env, &e), GRANT);

	/* Hostile IDs are refused before anything else. */
	req.alloc_id = "../etc";
	assert_int_equal(check(v, &req, &env, &e), INVALID);
	req.alloc_id = "";
	assert_int_equal(check(v, &req, &env, &e), INVALID);
	arena_free(a);
}

/* A re-claim by the holder is answered before the plugin's health matters. */
static void test_claim_already_first(void **state)
{
	struct arena *a = arena_new();
	struct model_volume *v = vol_new(a);
	struct model_claim_env env = env_ok();
	struct model_claim_request req = {
	    "web-1", "n1", W, {MODEL_ACCESS_SINGLE_NODE_WRITER, MODEL_ATTACH_FILE_SYSTEM}, false};
	struct err e;

	(void)state;
	vol_hold(a, v, "web-1", "n1", MODEL_ACCESS_SINGLE_NODE_WRITER, W, MODEL_CLAIM_CLAIMED);
	env.node_plugin_healthy = false;
	assert_int_equal(check(v, &req, &env, &e), ALREADY);
	req.mode = R;
	assert_int_equal(check(v, &req, &env, &e), CONFLICT);
	assert_non_null(strstr(e.msg, "already holds a write claim"));
	arena_free(a);
}

static void test_claim_add(void **state)
{
	struct arena *a = arena_new();
	struct model_volume *v = vol_new(a);
	struct model_claim_env env = env_ok();
	struct model_claim_request req = {
	    "web-1",
	    "n1",
	    R,
	    {MODEL_ACCESS_MULTI_NODE_SINGLE_WRITER, MODEL_ATTACH_FILE_SYSTEM},
	    false};
	struct model_publication *pub;
	struct model_claim *c;
	struct err e;

	(void)state;
	err_clear(&e);
	assert_int_equal(model_claim_add(a, v, &req, &env, 1000, &e), 0);
	c = model_volume_claim(v, "web-1");
	assert_non_null(c);
	assert_string_equal(c->node_id, "n1");
	assert_string_equal(c->plugin_node_id, "csi-n1");
	assert_int_equal(c->state, MODEL_CLAIM_CLAIMED);
	assert_true(c->read_only);
	assert_int_equal(c->cap.access, MODEL_ACCESS_MULTI_NODE_SINGLE_WRITER);
	assert_int_equal(c->claimed_ms, 1000);
	pub = model_volume_pub(v, "n1");
	assert_non_null(pub);
	assert_int_equal(pub->state, MODEL_PUB_PUBLISHING);
	assert_true(pub->read_only);
	assert_string_equal(pub->plugin_node_id, "csi-n1");

	/* Twice is refused (model_claim_check answers ALREADY instead). */
	assert_int_equal(model_claim_add(a, v, &req, &env, 1000, &e), CSID_EEXIST);
	assert_int_equal(v->nclaims, 1);

	/* A writer on the same node turns the read-only publication read/write. */
	pub->state = MODEL_PUB_PUBLISHED;
	req.alloc_id = "web-2";
	req.mode = W;
	assert_int_equal(model_claim_add(a, v, &req, &env, 2000, &e), 0);
	pub = model_volume_pub(v, "n1");
	assert_int_equal(v->npubs, 1);
	assert_false(pub->read_only);
	assert_int_equal(pub->state, MODEL_PUB_PUBLISHING);

	/* A publication on its way out is wanted again. */
	pub->state = MODEL_PUB_UNPUBLISHING;
	req.alloc_id = "web-3";
	req.mode = R;
	assert_int_equal(model_claim_add(a, v, &req, &env, 3000, &e), 0);
	assert_int_equal(model_volume_pub(v, "n1")->state, MODEL_PUB_PUBLISHING);
	assert_true(model_volume_pub(v, "n1")->read_only);

	/* Without controller publish no publication is made. */
	env.controller_required = false;
	req.alloc_id = "web-4";
	req.node_id = "n2";
	assert_int_equal(model_claim_add(a, v, &req, &env, 4000, &e), 0);
	assert_null(model_volume_pub(v, "n2"));
	assert_int_equal(v->nclaims, 4);
	arena_free(a);
}

/* A claim keeps what it was granted under, so that it can be released
 * after the volume's capabilities and the node's plugin changed. */
static void test_claim_keeps_its_grant(void **state)
{
	struct arena *a = arena_new();
	struct model_volume *v = vol_new(a), *back = NULL;
	struct model_claim_env env = env_ok();
	struct model_claim_request req = {
	    "web-1", "n1", W, {MODEL_ACCESS_SINGLE_NODE_WRITER, MODEL_ATTACH_BLOCK_DEVICE}, false};
	struct model_claim *c;
	char *text = NULL;
	size_t len = 0;
	struct err e;

	(void)state;
	err_clear(&e);
	assert_int_equal(check(v, &req, &env, &e), GRANT);
	assert_int_equal(model_claim_add(a, v, &req, &env, 10, &e), 0);
	/* The operator narrows the volume; the node's plugin gets another ID. */
	v->ncaps = 1;
	env.plugin_node_id = "csi-n1-new";
	assert_int_equal(model_volume_encode(v, MODEL_VIEW_STORE, &text, &len, &e), 0);
	assert_int_equal(model_volume_decode(a, text, len, &back, &e), 0);
	model_wipe_free(text, len);
	c = model_volume_claim(back, "web-1");
	assert_non_null(c);
	assert_int_equal(c->cap.access, MODEL_ACCESS_SINGLE_NODE_WRITER);
	assert_int_equal(c->cap.attachment, MODEL_ATTACH_BLOCK_DEVICE);
	assert_false(c->read_only);
	assert_string_equal(c->node_id, "n1");
	assert_string_equal(c->plugin_node_id, "csi-n1");
	assert_string_equal(model_volume_pub(back, "n1")->plugin_node_id, "csi-n1");
	/* Re-claiming with the same request is still ALREADY, and release goes through. */
	assert_int_equal(check(back, &req, &env, &e), ALREADY);
	assert_int_equal(model_volume_claim_move(a, back, "web-1", MODEL_CLAIM_NODE_UNPUBLISHED,
						 "released", 20, &e),
			 0);
	assert_int_equal(model_volume_claim_move(a, back, "web-1",
						 MODEL_CLAIM_CONTROLLER_UNPUBLISHED, NULL, 30, &e),
			 0);
	assert_int_equal(model_volume_claim_move(a, back, "web-1", MODEL_CLAIM_FREED, NULL, 40, &e),
			 0);
	assert_int_equal(back->nclaims, 0);
	assert_int_equal(back->npast_claims, 1);
	assert_string_equal(back->past_claims[0].plugin_node_id, "csi-n1");
	/* Freed, the volume takes a claim in another mode. */
	req.cap.attachment = MODEL_ATTACH_FILE_SYSTEM;
	req.cap.access = MODEL_ACCESS_SINGLE_NODE_WRITER;
	req.alloc_id = "web-2";
	assert_int_equal(check(back, &req, &env, &e), GRANT);
	arena_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_claim_every_mode_pair),
	    cmocka_unit_test(test_claim_releasing_holders_count),
	    cmocka_unit_test(test_claim_header_example_message),
	    cmocka_unit_test(test_claim_many_holders_named),
	    cmocka_unit_test(test_claim_preconditions),
	    cmocka_unit_test(test_claim_already_first),
	    cmocka_unit_test(test_claim_add),
	    cmocka_unit_test(test_claim_keeps_its_grant),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
