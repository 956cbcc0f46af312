/*
 * Unit tests of the reconciler's steps (src/server/reconcile_step.c,
 * reconcile_volume.c, reconcile_snapshot.c) in virtual time, with the memory
 * store and the scripted fake controller (test/lib/reconciler_fixture.h): the
 * decision table, register, publish / unpublish with the claim state machine from
 * every state and every step failing once, NOT_FOUND as done on delete and
 * unpublish, delete (with the lookup of a volume whose create answer was
 * lost), idempotence of a step whose write lost a race, capability gating,
 * snapshots (polled by ListSnapshots or CreateSnapshot), restore, clone,
 * expand and modify.
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

#include "reconciler_fixture.h"
#include "server/reconcile_int.h"

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
	/* No controller found: waited for, never ruled out. */
	reconcile_volume_next(&v, RECONCILE_CTRL_NONE, 0, &st);
	assert_int_equal(st.kind, RSTEP_CREATE);
	reconcile_volume_next(&v, RECONCILE_CTRL_UP, 0, &st);
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
	/* No controller up to say whether it needs one: waited for, not idle. */
	reconcile_volume_next(&v, RECONCILE_CTRL_DOWN, 0, &st);
	assert_int_equal(st.kind, RSTEP_PUB_ADD);
	/* A plugin without controller service publishes nothing. */
	reconcile_volume_next(&v, RECONCILE_CTRL_NONE, 0, &st);
	assert_int_equal(st.kind, RSTEP_NONE);
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
	assert_int_equal(st.kind, RSTEP_CREATE);
	reconcile_volume_next(&v, RECONCILE_CTRL_UP, all & ~(1ULL << 1), &st);
	assert_int_equal(st.kind, RSTEP_REMOVE);
	v.external_id = "x";
	reconcile_volume_next(&v, RECONCILE_CTRL_UP, all, &st);
	assert_int_equal(st.kind, RSTEP_DELETE);
	reconcile_volume_next(&v, RECONCILE_CTRL_UP, nopub & ~(1ULL << 1), &st);
	assert_int_equal(st.kind, RSTEP_LACKS);
	assert_string_equal(st.missing, "CREATE_DELETE_VOLUME");
}

/* ---- create, register, delete ---- */

static void test_register(void **state)
{
	struct rfx *t = *state;
	struct arena *a = arena_new();
	struct model_status st;
	char err[512], ext[64], extra[128];

	rfx_new(t);
	rfx_add(t, "src", MODEL_VOL_CREATING, NULL);
	rfx_run(t, 0);
	csi_fake_volume_id(&t->fake, "src", ext, sizeof(ext));
	snprintf(extra, sizeof(extra), "\"external_id\": \"%s\"", ext);
	rfx_add(t, "reg", MODEL_VOL_REGISTERING, extra);
	rfx_add(t, "bad", MODEL_VOL_REGISTERING, extra);
	/* The plugin does not know it yet: NOT_FOUND on validate is retried. */
	rfx_add(t, "gone", MODEL_VOL_REGISTERING, "\"external_id\": \"nope\"");
	rfx_run(t, 0);
	assert_int_equal(rfx_get(t, a, "reg")->state, MODEL_VOL_READY);
	assert_int_equal(rfx_get(t, a, "gone")->state, MODEL_VOL_REGISTERING);
	assert_int_equal(rfx_status(t, "gone", &st, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "NOT_FOUND"));

	/* Capabilities not confirmed: failed, with the plugin's message. */
	t->fake.confirm_none = true;
	rfx_set_state(t, "bad", MODEL_VOL_REGISTERING);
	rfx_run(t, 0);
	assert_int_equal(rfx_get(t, a, "bad")->state, MODEL_VOL_FAILED);
	assert_int_equal(rfx_status(t, "bad", &st, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "not confirmed: not supported"));
	arena_free(a);
}

static void test_delete(void **state)
{
	struct rfx *t = *state;
	struct arena *a = arena_new();

	rfx_new(t);
	rfx_add(t, "v1", MODEL_VOL_CREATING, NULL);
	rfx_run(t, 0);
	rfx_claim(t, "v1", "a1", "n1", MODEL_CLAIM_WRITE);
	rfx_run(t, 0);
	/* Deleting waits for the claim to be freed (published volumes are not deleted). */
	rfx_set_state(t, "v1", MODEL_VOL_DELETING);
	rfx_run(t, RFX_MAX_MS);
	assert_non_null(rfx_get(t, a, "v1"));
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_DELETE_VOLUME), 0);
	rfx_move(t, "v1", "a1", MODEL_CLAIM_NODE_UNPUBLISHED);
	csi_fake_script(&t->fake, CSI_RPC_DELETE_VOLUME, CSI_FAILED_PRECONDITION, 1);
	rfx_run(t, RFX_MAX_MS);
	assert_null(rfx_get(t, a, "v1"));
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
	rfx_add(t, "v2", MODEL_VOL_DELETING, NULL);
	rfx_run(t, 0);
	assert_null(rfx_get(t, a, "v2"));
	assert_false(csi_fake_has_volume(&t->fake, "v2"));
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_DELETE_VOLUME), 3);
	assert_string_equal(t->fake.log[t->fake.nlog - 1].volume, "lost-1");
	/* A final answer to that lookup: nothing can exist, the record goes. */
	rfx_add(t, "v3", MODEL_VOL_DELETING, NULL);
	csi_fake_script(&t->fake, CSI_RPC_CREATE_VOLUME, CSI_INVALID_ARGUMENT, 1);
	rfx_run(t, 0);
	assert_null(rfx_get(t, a, "v3"));
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_DELETE_VOLUME), 3);
	arena_free(a);
}

static void test_not_found_is_done(void **state)
{
	struct rfx *t = *state;
	struct arena *a = arena_new();
	struct model_status st;
	char err[64];

	rfx_new(t);
	rfx_add(t, "v1", MODEL_VOL_CREATING, NULL);
	rfx_run(t, 0);
	rfx_claim(t, "v1", "a1", "n1", MODEL_CLAIM_WRITE);
	rfx_run(t, 0);
	rfx_move(t, "v1", "a1", MODEL_CLAIM_NODE_UNPUBLISHED);
	csi_fake_script(&t->fake, CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME, CSI_NOT_FOUND, 1);
	rfx_run(t, 0);
	assert_int_equal(rfx_get(t, a, "v1")->nclaims, 0);
	assert_int_equal(rfx_status(t, "v1", &st, err, sizeof(err)), CSID_ENOTFOUND);

	rfx_set_state(t, "v1", MODEL_VOL_DELETING);
	csi_fake_script(&t->fake, CSI_RPC_DELETE_VOLUME, CSI_NOT_FOUND, 1);
	rfx_run(t, 0);
	assert_null(rfx_get(t, a, "v1"));
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_DELETE_VOLUME), 1);
	assert_int_equal(rfx_status(t, "v1", &st, err, sizeof(err)), CSID_ENOTFOUND);
	arena_free(a);
}

/* ---- claims ---- */

static void test_publish_unpublish(void **state)
{
	struct rfx *t = *state;
	struct arena *a = arena_new();
	struct model_volume *v;
	char ext[64];

	rfx_new(t);
	rfx_add(t, "v1", MODEL_VOL_CREATING, NULL);
	rfx_run(t, 0);
	csi_fake_volume_id(&t->fake, "v1", ext, sizeof(ext));
	rfx_claim(t, "v1", "a1", "n1", MODEL_CLAIM_WRITE);
	rfx_claim(t, "v1", "a2", "n1", MODEL_CLAIM_READ);
	rfx_run(t, 0);
	v = rfx_get(t, a, "v1");
	assert_int_equal(v->npubs, 1);
	assert_int_equal(v->pubs[0].state, MODEL_PUB_PUBLISHED);
	assert_string_equal(model_map_get(&v->pubs[0].context, "device"), "/dev/fake/fv-1");
	assert_true(csi_fake_has_pub(&t->fake, ext, "p-n1"));
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_PUBLISH_VOLUME), 1);

	/* One claim released: the other still needs the publication. */
	rfx_move(t, "v1", "a1", MODEL_CLAIM_NODE_UNPUBLISHED);
	rfx_run(t, 0);
	v = rfx_get(t, a, "v1");
	assert_int_equal(v->nclaims, 1);
	assert_int_equal(v->npast_claims, 1);
	assert_string_equal(v->past_claims[0].alloc_id, "a1");
	assert_int_equal(v->past_claims[0].state, MODEL_CLAIM_FREED);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME), 0);
	assert_true(csi_fake_has_pub(&t->fake, ext, "p-n1"));

	/* The last one: unpublished with the claim's plugin node ID, then freed. */
	rfx_move(t, "v1", "a2", MODEL_CLAIM_NODE_UNPUBLISHED);
	rfx_run(t, 0);
	v = rfx_get(t, a, "v1");
	assert_int_equal(v->nclaims, 0);
	assert_int_equal(v->npubs, 0);
	assert_int_equal(v->npast_claims, 2);
	assert_false(csi_fake_has_pub(&t->fake, ext, "p-n1"));
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME), 1);
	arena_free(a);
}

/*
 * A claim stored without its publication (granted before the controller's
 * capabilities were known), beside an orphan publication: while the
 * controller is down the volume is retried with backoff, never dropped;
 * once it is up the claim's node is published with the claim's plugin
 * node ID and the orphan unpublished, and nothing a claim needs is.
 */
static void test_claim_without_pub_repaired(void **state)
{
	struct rfx *t = *state;
	struct arena *a = arena_new();
	struct model_volume *v;
	struct model_status st;
	char err[512], ext[64];

	rfx_new(t);
	rfx_add(t, "v1", MODEL_VOL_CREATING, NULL);
	rfx_run(t, 0);
	csi_fake_volume_id(&t->fake, "v1", ext, sizeof(ext));
	rfx_claim(t, "v1", "a1", "n1", MODEL_CLAIM_WRITE);
	v = rfx_get(t, a, "v1");
	v->claims[0].plugin_node_id = "csi-n1";
	v->pubs[0].node_id = "n3";
	v->pubs[0].plugin_node_id = "p-n3";
	v->pubs[0].state = MODEL_PUB_PUBLISHED;
	snprintf(t->fake.pubs[t->fake.npubs].volume, CSI_FAKE_ID, "%s", ext);
	snprintf(t->fake.pubs[t->fake.npubs++].node, CSI_FAKE_ID, "p-n3");
	t->fake.down = true;
	rfx_put_volume(t, v);

	/* A virtual minute down: retried with backoff, the claim left as it is. */
	rfx_run(t, 60000);
	assert_int_equal(rfx_status(t, "v1", &st, err, sizeof(err)), 0);
	assert_non_null(strstr(
	    err, "volume v1: add publication: no healthy controller for plugin " RFX_PLUGIN));
	assert_true(st.attempts >= 5 && st.attempts <= 20);
	assert_true(st.next_attempt_ms > 0);
	v = rfx_get(t, a, "v1");
	assert_int_equal(v->nclaims, 1);
	assert_int_equal(v->claims[0].state, MODEL_CLAIM_CLAIMED);
	assert_int_equal(v->npubs, 1);
	assert_string_equal(v->pubs[0].node_id, "n3");
	assert_int_equal(v->pubs[0].state, MODEL_PUB_UNPUBLISHING);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_PUBLISH_VOLUME), 0);

	/* Up: published where the claim is, with its plugin node ID. */
	t->fake.down = false;
	rfx_run(t, RFX_MAX_MS);
	assert_int_equal(rfx_status(t, "v1", &st, err, sizeof(err)), CSID_ENOTFOUND);
	v = rfx_get(t, a, "v1");
	assert_int_equal(v->npubs, 1);
	assert_string_equal(v->pubs[0].node_id, "n1");
	assert_string_equal(v->pubs[0].plugin_node_id, "csi-n1");
	assert_int_equal(v->pubs[0].state, MODEL_PUB_PUBLISHED);
	assert_false(v->pubs[0].read_only);
	assert_true(csi_fake_has_pub(&t->fake, ext, "csi-n1"));
	assert_false(csi_fake_has_pub(&t->fake, ext, "p-n3"));
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_PUBLISH_VOLUME), 1);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME), 1);

	/* Settled: later passes leave the claim's publication alone. */
	rfx_set_state(t, "v1", MODEL_VOL_READY);
	rfx_run(t, 60000);
	assert_true(csi_fake_has_pub(&t->fake, ext, "csi-n1"));
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_PUBLISH_VOLUME), 1);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME), 1);
	assert_int_equal(rfx_get(t, a, "v1")->pubs[0].state, MODEL_PUB_PUBLISHED);
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
	struct rfx *t = *state;
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

	rfx_new(t);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct arena *a = arena_new();
		struct model_volume *v;
		char id[16], ext[64];
		int unpub0 = csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME);

		snprintf(id, sizeof(id), "c%zu", i);
		rfx_add(t, id, MODEL_VOL_CREATING, NULL);
		rfx_run(t, 0);
		csi_fake_volume_id(&t->fake, id, ext, sizeof(ext));
		rfx_claim(t, id, "a1", "n1", MODEL_CLAIM_WRITE);
		/* Put the record in the case's state, and the plugin in line with it. */
		v = rfx_get(t, a, id);
		v->claims[0].state = cases[i].claim;
		if (!cases[i].has_pub)
			v->npubs = 0;
		else
			v->pubs[0].state = cases[i].pub;
		if (cases[i].has_pub && cases[i].pub == MODEL_PUB_PUBLISHED)
			assert_int_equal(
			    model_map_put(a, &v->pubs[0].context, "device", "/dev/x", NULL), 0);
		rfx_put_volume(t, v);
		if (cases[i].has_pub && cases[i].pub != MODEL_PUB_PUBLISHING) {
			struct csi_fake *f = &t->fake;

			snprintf(f->pubs[f->npubs].volume, CSI_FAKE_ID, "%s", ext);
			snprintf(f->pubs[f->npubs++].node, CSI_FAKE_ID, "p-n1");
		}
		for (int rpc = 0; rpc < CSI_RPC_COUNT; rpc++)
			csi_fake_script(&t->fake, (enum csi_rpc)rpc, CSI_UNAVAILABLE, 1);
		rfx_run(t, 100 * RFX_MAX_MS);
		/* Drop the unused scripted failures before the next case. */
		t->fake.nscript = 0;

		v = rfx_get(t, a, id);
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
	struct rfx *t = ctx;
	struct arena *a;
	struct model_volume *v;

	if (rpc != t->hook_rpc || t->hook_left == 0 || code != CSI_OK)
		return;
	t->hook_left--;
	a = arena_new();
	v = rfx_get(t, a, t->hook_volume);
	v->updated_ms++;
	rfx_put_volume(t, v);
	arena_free(a);
}

static void test_idempotent_after_conflict(void **state)
{
	struct rfx *t = *state;
	const enum csi_rpc rpcs[] = {CSI_RPC_CREATE_VOLUME,
				     CSI_RPC_CONTROLLER_PUBLISH_VOLUME,
				     CSI_RPC_CONTROLLER_EXPAND_VOLUME,
				     CSI_RPC_CONTROLLER_MODIFY_VOLUME,
				     CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME,
				     CSI_RPC_DELETE_VOLUME};
	struct arena *a = arena_new();
	struct model_volume *v;

	rfx_new(t);
	t->fake.hook = t_race_hook;
	t->fake.hook_ctx = t;
	t->hook_volume = "v1";
	t->hook_rpc = rpcs[0];
	t->hook_left = 1;
	rfx_add(t, "v1", MODEL_VOL_CREATING, NULL);
	rfx_run(t, 0);
	/* Created twice (same name), one volume at the plugin. */
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CREATE_VOLUME), 2);
	assert_int_equal(t->fake.nvols, 1);
	assert_int_equal(rfx_get(t, a, "v1")->state, MODEL_VOL_READY);

	t->hook_rpc = rpcs[1];
	t->hook_left = 1;
	rfx_claim(t, "v1", "a1", "n1", MODEL_CLAIM_WRITE);
	rfx_run(t, 0);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_PUBLISH_VOLUME), 2);
	assert_int_equal(t->fake.npubs, 1);

	t->hook_rpc = rpcs[2];
	t->hook_left = 1;
	v = rfx_get(t, a, "v1");
	v->pending_capacity_min = 4 << 20;
	rfx_put_volume(t, v);
	rfx_run(t, 0);
	/* A done expand is recorded on the record as re-read: no second call. */
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_EXPAND_VOLUME), 1);
	assert_int_equal(rfx_get(t, a, "v1")->capacity, 4 << 20);
	assert_int_equal(rfx_get(t, a, "v1")->pending_capacity_min, 0);

	t->hook_rpc = rpcs[3];
	t->hook_left = 1;
	v = rfx_get(t, a, "v1");
	assert_int_equal(model_map_put(a, &v->pending_mutable, "iops", "300", NULL), 0);
	rfx_put_volume(t, v);
	rfx_run(t, 0);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_MODIFY_VOLUME), 2);
	assert_string_equal(model_map_get(&rfx_get(t, a, "v1")->mutable_parameters, "iops"), "300");

	t->hook_rpc = rpcs[4];
	t->hook_left = 1;
	rfx_move(t, "v1", "a1", MODEL_CLAIM_NODE_UNPUBLISHED);
	rfx_run(t, 0);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME), 2);
	assert_int_equal(t->fake.npubs, 0);
	assert_int_equal(rfx_get(t, a, "v1")->nclaims, 0);

	t->hook_rpc = rpcs[5];
	t->hook_left = 1;
	rfx_set_state(t, "v1", MODEL_VOL_DELETING);
	rfx_run(t, 0);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_DELETE_VOLUME), 2);
	assert_null(rfx_get(t, a, "v1"));
	assert_int_equal(t->fake.nvols, 0);
	arena_free(a);
}

/* What t_pending_hook writes as the pending expand while the expand RPC is in flight. */
static int64_t t_pending_during;

static void t_pending_hook(void *ctx, enum csi_rpc rpc, int code)
{
	struct rfx *t = ctx;
	struct arena *a;
	struct model_volume *v;

	if (rpc != CSI_RPC_CONTROLLER_EXPAND_VOLUME || t->hook_left == 0 || code != CSI_OK)
		return;
	t->hook_left--;
	a = arena_new();
	v = rfx_get(t, a, "v1");
	v->pending_capacity_min = t_pending_during;
	rfx_put_volume(t, v);
	arena_free(a);
}

/*
 * An expand whose RPC is in flight when the pending request changes: the
 * plugin grew the volume, so the outcome is recorded whatever happened
 * meanwhile. A cancel (pending dropped) keeps the new capacity and leaves
 * nothing pending; a larger request made meanwhile stays pending and is
 * done next.
 */
static void test_expand_raced(void **state)
{
	struct rfx *t = *state;
	struct arena *a = arena_new();
	struct model_volume *v;

	rfx_new(t);
	t->fake.hook = t_pending_hook;
	t->fake.hook_ctx = t;
	rfx_add(t, "v1", MODEL_VOL_CREATING, NULL);
	rfx_run(t, 0);

	/* Cancelled while in flight. */
	t_pending_during = 0;
	t->hook_left = 1;
	v = rfx_get(t, a, "v1");
	v->pending_capacity_min = 4 << 20;
	rfx_put_volume(t, v);
	rfx_run(t, 0);
	v = rfx_get(t, a, "v1");
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_EXPAND_VOLUME), 1);
	assert_int_equal(v->capacity, 4 << 20);
	assert_int_equal(v->capacity_min, 4 << 20);
	assert_int_equal(v->pending_capacity_min, 0);

	/* Raised while in flight: the first outcome recorded, the larger one done next. */
	t_pending_during = 16 << 20;
	t->hook_left = 1;
	v->pending_capacity_min = 8 << 20;
	rfx_put_volume(t, v);
	rfx_run(t, 0);
	v = rfx_get(t, a, "v1");
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_EXPAND_VOLUME), 3);
	assert_int_equal(t->fake.log[t->fake.nlog - 1].required_bytes, 16 << 20);
	assert_int_equal(v->capacity, 16 << 20);
	assert_int_equal(v->pending_capacity_min, 0);
	arena_free(a);
}

/* ---- capabilities ---- */

static void test_capability_gating(void **state)
{
	struct rfx *t = *state;
	struct arena *a = arena_new();
	struct model_status st;
	char err[512];
	struct model_volume *v;

	rfx_new(t);
	rfx_add(t, "v1", MODEL_VOL_CREATING, NULL);
	rfx_run(t, 0);

	/* Without PUBLISH_READONLY a read-only publication is sent readonly=false. */
	t->fake.caps &= ~(1ULL << 8);
	rfx_claim(t, "v1", "r1", "n1", MODEL_CLAIM_READ);
	rfx_run(t, 0);
	assert_int_equal(t->fake.log[t->fake.nlog - 1].rpc, CSI_RPC_CONTROLLER_PUBLISH_VOLUME);
	assert_false(t->fake.log[t->fake.nlog - 1].readonly);
	t->fake.caps |= 1ULL << 8;
	rfx_claim(t, "v1", "r2", "n2", MODEL_CLAIM_READ);
	rfx_run(t, 0);
	assert_true(t->fake.log[t->fake.nlog - 1].readonly);

	/* Without PUBLISH_UNPUBLISH_VOLUME: no controller publish, claims skip it. */
	t->fake.caps &= ~(1ULL << 2);
	rfx_add(t, "v2", MODEL_VOL_CREATING, NULL);
	rfx_run(t, 0);
	rfx_claim(t, "v2", "a1", "n1", MODEL_CLAIM_WRITE);
	rfx_run(t, 0);
	assert_int_equal(rfx_get(t, a, "v2")->npubs, 0);
	rfx_move(t, "v2", "a1", MODEL_CLAIM_NODE_UNPUBLISHED);
	{
		int pub0 = csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_PUBLISH_VOLUME);
		int unpub0 = csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME);

		rfx_run(t, 0);
		assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_PUBLISH_VOLUME), pub0);
		assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME),
				 unpub0);
	}
	v = rfx_get(t, a, "v2");
	assert_int_equal(v->nclaims, 0);
	assert_int_equal(v->npast_claims, 1);
	/* ...but a recorded publication is never dropped without its unpublish. */
	rfx_move(t, "v1", "r1", MODEL_CLAIM_NODE_UNPUBLISHED);
	rfx_run(t, 0);
	assert_int_equal(rfx_status(t, "v1", &st, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "lacks PUBLISH_UNPUBLISH_VOLUME"));
	v = rfx_get(t, a, "v1");
	assert_int_equal(v->nclaims, 2);
	t->fake.caps |= 1ULL << 2;
	rfx_run(t, RFX_MAX_MS);
	assert_int_equal(rfx_get(t, a, "v1")->nclaims, 1);

	/* Without CREATE_DELETE_VOLUME a create is a final error. */
	t->fake.caps &= ~(1ULL << 1);
	rfx_add(t, "v3", MODEL_VOL_CREATING, NULL);
	rfx_run(t, 0);
	assert_int_equal(rfx_get(t, a, "v3")->state, MODEL_VOL_FAILED);
	assert_int_equal(rfx_status(t, "v3", &st, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "lacks CREATE_DELETE_VOLUME"));

	/* Without EXPAND_VOLUME / MODIFY_VOLUME: final errors, nothing sent. */
	t->fake.caps &= ~((1ULL << 9) | (1ULL << 14));
	v = rfx_get(t, a, "v2");
	v->pending_capacity_min = 8 << 20;
	rfx_put_volume(t, v);
	rfx_run(t, 0);
	assert_int_equal(rfx_status(t, "v2", &st, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "expand: plugin " RFX_PLUGIN " lacks EXPAND_VOLUME"));
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_EXPAND_VOLUME), 0);

	arena_free(a);
}

static void test_no_controller_register(void **state)
{
	struct rfx *t = *state;
	struct arena *a = arena_new();
	struct model_volume *v = rfx_spec(a, "r1", "\"external_id\": \"x\"");
	struct model_status st;
	char err[512];

	rfx_new(t);
	v->plugin_id = RFX_PLUGIN2;
	v->state = MODEL_VOL_REGISTERING;
	rfx_put_volume(t, v);
	/* Controller down: retried with its error. */
	t->fake2.down = true;
	rfx_run(t, 0);
	assert_int_equal(rfx_status(t, "r1", &st, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "no healthy controller for plugin " RFX_PLUGIN2));
	assert_int_equal(rfx_get(t, a, "r1")->state, MODEL_VOL_REGISTERING);
	/* A plugin without controller service: nothing to validate, ready. */
	t->fake2.down = false;
	t->fake2.no_controller = true;
	rfx_run(t, RFX_MAX_MS);
	assert_int_equal(rfx_get(t, a, "r1")->state, MODEL_VOL_READY);
	assert_int_equal(csi_fake_calls(&t->fake2, CSI_RPC_VALIDATE_VOLUME_CAPABILITIES), 0);

	/*
	 * A create with no controller found (the plugin may still be
	 * starting): retried and shown, never failed; done once it is there.
	 */
	v = rfx_spec(a, "c1", NULL);
	v->plugin_id = RFX_PLUGIN2;
	v->state = MODEL_VOL_CREATING;
	rfx_put_volume(t, v);
	rfx_run(t, 2 * RFX_MAX_MS);
	assert_int_equal(rfx_get(t, a, "c1")->state, MODEL_VOL_CREATING);
	assert_int_equal(rfx_status(t, "c1", &st, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "volume c1: create: no controller plugin " RFX_PLUGIN2));
	assert_true(st.attempts > 1);
	t->fake2.no_controller = false;
	rfx_run(t, RFX_MAX_MS);
	assert_int_equal(rfx_get(t, a, "c1")->state, MODEL_VOL_READY);
	arena_free(a);
}

/* ---- snapshots, clone, restore, expand, modify ---- */

static void test_snapshots(void **state)
{
	struct rfx *t = *state;
	struct arena *a = arena_new();
	struct model_snapshot *s;
	struct model_volume *v;
	struct model_status st;
	char err[512];

	rfx_new(t);
	t->fake.snapshot_polls = 2;
	rfx_add(t, "v1", MODEL_VOL_CREATING, NULL);
	rfx_put_snap(t, "s1", "v1", MODEL_SNAP_CREATING, NULL);
	/* The snapshot waits for its source, then is polled until ready. */
	rfx_run(t, 0);
	s = rfx_get_snap(t, a, "s1");
	assert_int_equal(s->state, MODEL_SNAP_CREATING);
	assert_non_null(s->external_id);
	assert_false(s->ready_to_use);
	rfx_run(t, 10 * RFX_MIN_MS);
	s = rfx_get_snap(t, a, "s1");
	assert_int_equal(s->state, MODEL_SNAP_READY);
	assert_true(s->ready_to_use);
	assert_int_equal(s->size_bytes, 1 << 20);
	assert_int_equal(s->creation_time_ms, 1700000000000LL);
	/* Created once, then polled by ListSnapshots of its ID. */
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CREATE_SNAPSHOT), 1);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_LIST_SNAPSHOTS), 2);
	assert_string_equal(t->fake.log[t->fake.nlog - 1].snapshot, s->external_id);
	/* A plugin that does not list snapshots is asked with CreateSnapshot again. */
	t->fake.caps &= ~(1ULL << 6);
	rfx_put_snap(t, "s5", "v1", MODEL_SNAP_CREATING, NULL);
	rfx_run(t, 10 * RFX_MIN_MS);
	assert_int_equal(rfx_get_snap(t, a, "s5")->state, MODEL_SNAP_READY);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CREATE_SNAPSHOT), 4);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_LIST_SNAPSHOTS), 2);
	t->fake.caps |= 1ULL << 6;

	/* Restore from it and clone the volume: the plugin's IDs are the sources. */
	rfx_add(t, "restored", MODEL_VOL_CREATING, "\"snapshot_source\": \"s1\"");
	rfx_add(t, "clone", MODEL_VOL_CREATING, "\"clone_source\": \"v1\"");
	rfx_run(t, 0);
	v = rfx_get(t, a, "restored");
	assert_int_equal(v->state, MODEL_VOL_READY);
	assert_string_equal(t->fake.vols[t->fake.nvols - 2].source, s->external_id);
	assert_int_equal(rfx_get(t, a, "clone")->state, MODEL_VOL_READY);
	assert_string_equal(t->fake.vols[t->fake.nvols - 1].source,
			    rfx_get(t, a, "v1")->external_id);

	/* Delete: NOT_FOUND counts as done, the record goes. */
	rfx_put_snap(t, "s1", "v1", MODEL_SNAP_DELETING, s->external_id);
	csi_fake_script(&t->fake, CSI_RPC_DELETE_SNAPSHOT, CSI_NOT_FOUND, 1);
	rfx_run(t, 0);
	assert_null(rfx_get_snap(t, a, "s1"));

	/* Deleting one whose CreateSnapshot answer was lost: found by name, deleted. */
	{
		struct csi_fake_snap *fs = &t->fake.snaps[t->fake.nsnaps++];

		memset(fs, 0, sizeof(*fs));
		snprintf(fs->id, CSI_FAKE_ID, "lost-snap");
		snprintf(fs->name, CSI_FAKE_ID, "s3");
		snprintf(fs->volume, CSI_FAKE_ID, "%s", rfx_get(t, a, "v1")->external_id);
	}
	rfx_put_snap(t, "s3", "v1", MODEL_SNAP_DELETING, NULL);
	rfx_run(t, 0);
	assert_null(rfx_get_snap(t, a, "s3"));
	assert_false(csi_fake_has_snapshot(&t->fake, "s3"));
	assert_string_equal(t->fake.log[t->fake.nlog - 1].snapshot, "lost-snap");
	/* ...and one whose source volume is gone: nothing to look up, the record goes. */
	rfx_put_snap(t, "s4", "nope", MODEL_SNAP_DELETING, NULL);
	rfx_run(t, 0);
	assert_null(rfx_get_snap(t, a, "s4"));

	/* A final CreateSnapshot error: failed. */
	rfx_put_snap(t, "s2", "v1", MODEL_SNAP_CREATING, NULL);
	csi_fake_script(&t->fake, CSI_RPC_CREATE_SNAPSHOT, CSI_ALREADY_EXISTS, 1);
	rfx_run(t, RFX_MAX_MS);
	assert_int_equal(rfx_get_snap(t, a, "s2")->state, MODEL_SNAP_FAILED);
	/* A volume restored from it never can be: failed, saying why. */
	rfx_add(t, "r3", MODEL_VOL_CREATING, "\"snapshot_source\": \"s2\"");
	rfx_run(t, 0);
	assert_int_equal(rfx_get(t, a, "r3")->state, MODEL_VOL_FAILED);
	assert_int_equal(rfx_status(t, "r3", &st, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "snapshot source s2: failed"));
	/* Deleting a volume whose source is gone: nothing to look up, the record goes. */
	rfx_add(t, "r4", MODEL_VOL_DELETING, "\"clone_source\": \"nope\"");
	rfx_run(t, 0);
	assert_null(rfx_get(t, a, "r4"));
	/* Without CREATE_DELETE_SNAPSHOT, a restore is refused up front. */
	t->fake.caps &= ~(1ULL << 5);
	rfx_add(t, "r2", MODEL_VOL_CREATING, "\"snapshot_source\": \"s1\"");
	rfx_run(t, 0);
	assert_int_equal(rfx_get(t, a, "r2")->state, MODEL_VOL_FAILED);
	arena_free(a);
}

/*
 * A volume waiting for its source is worked again as soon as the source
 * is ready, not at the end of its own backoff.
 */
static void test_source_wakes_waiters(void **state)
{
	struct rfx *t = *state;
	struct arena *a = arena_new();

	rfx_new(t);
	t->fake.snapshot_polls = 4;
	csi_fake_script(&t->fake, CSI_RPC_CREATE_VOLUME, CSI_UNAVAILABLE, 6);
	rfx_add(t, "v1", MODEL_VOL_CREATING, NULL);
	rfx_add(t, "clone", MODEL_VOL_CREATING, "\"clone_source\": \"v1\"");
	rfx_put_snap(t, "s1", "v1", MODEL_SNAP_CREATING, NULL);
	rfx_add(t, "restored", MODEL_VOL_CREATING, "\"snapshot_source\": \"s1\"");
	for (int i = 0; i < 1000; i++) {
		int64_t next = reconciler_step(t->r);
		bool v1 = rfx_get(t, a, "v1")->state == MODEL_VOL_READY;
		bool s1 = rfx_get_snap(t, a, "s1")->state == MODEL_SNAP_READY;

		/* Whenever a source is ready, its waiters are done at the same time. */
		if (v1)
			assert_int_equal(rfx_get(t, a, "clone")->state, MODEL_VOL_READY);
		if (s1) {
			assert_int_equal(rfx_get(t, a, "restored")->state, MODEL_VOL_READY);
			break;
		}
		assert_true(next != CLOCK_NEVER);
		clock_fake_set(&t->clock, next);
	}
	assert_int_equal(rfx_get(t, a, "restored")->state, MODEL_VOL_READY);
	arena_free(a);
}

static void test_expand_modify(void **state)
{
	struct rfx *t = *state;
	struct arena *a = arena_new();
	struct model_volume *v;

	rfx_new(t);
	t->fake.node_expansion = true;
	rfx_add(t, "v1", MODEL_VOL_CREATING, "\"mutable_parameters\": {\"tier\": \"gold\"}");
	rfx_run(t, 0);
	v = rfx_get(t, a, "v1");
	v->pending_capacity_min = 64 << 20;
	assert_int_equal(model_map_put(a, &v->pending_mutable, "iops", "500", NULL), 0);
	rfx_put_volume(t, v);
	rfx_run(t, 0);
	v = rfx_get(t, a, "v1");
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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_next_step_table),
	    cmocka_unit_test_setup_teardown(test_register, rfx_setup, rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_delete, rfx_setup, rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_not_found_is_done, rfx_setup, rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_publish_unpublish, rfx_setup, rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_claim_without_pub_repaired, rfx_setup,
					    rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_claim_states_fail_once, rfx_setup, rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_idempotent_after_conflict, rfx_setup,
					    rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_capability_gating, rfx_setup, rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_no_controller_register, rfx_setup, rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_snapshots, rfx_setup, rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_source_wakes_waiters, rfx_setup, rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_expand_modify, rfx_setup, rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_expand_raced, rfx_setup, rfx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
