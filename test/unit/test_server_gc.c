/*
 * Unit tests of the lost-claim collector (src/server/server_gc.c, rules in
 * server_gc.h) in virtual time, on the memory store, with the reconciler
 * stepped by hand. The plugin "ctl.csi" has no controller service, so a
 * released claim goes to freed in one reconciler step.
 *
 * Covered: the report rule (an allocation the agent stops reporting is
 * released, with its note, and ends freed), the race of a report built
 * before the claim but received after it, a claim made again by the agent
 * refreshing it, claims not held by the agent never collected by reports,
 * a PUT without a report stopping collection, the grace rule (down less
 * than node_grace keeps, more releases, a node back in time keeps, a
 * restarted server keeps counting from the record), the duration
 * format of the notes, and the answer to a node back after its claims
 * were released (which reported allocations are answered released: past
 * claims with their note, none at all, a claim on another node, a gone
 * volume; kept: claimed ones, in flight too, and released ones not made
 * by the agent).
 */
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
#include "util/conf.h"

#define T_PLUGIN "ctl.csi"
#define T_WALL 1700000000000LL
#define T_TTL_MS 10000
#define T_GRACE_MS 60000

struct t_env {
	struct clock_fake clock;
	struct store *store;
	struct server *s;
	struct arena *a;
	struct csi_fake ctl;
};

static void t_server(struct t_env *t)
{
	struct server_config cfg = {0};
	struct err e;

	cfg.store = t->store;
	cfg.controllers = csi_fake_controllers(&t->ctl);
	cfg.clock = &t->clock.base;
	cfg.manual_reconciler = true;
	cfg.node_ttl_ms = T_TTL_MS;
	cfg.node_grace_ms = T_GRACE_MS;
	if (server_new(&cfg, &t->s, &e) != 0)
		fail_msg("server_new: %s", e.msg);
}

static int t_setup(void **state)
{
	struct t_env *t = calloc(1, sizeof(*t));
	struct err e;

	assert_non_null(t);
	csi_fake_init(&t->ctl, T_PLUGIN);
	t->ctl.no_controller = true;
	clock_fake_init(&t->clock, 1000, T_WALL);
	assert_int_equal(store_mem_new(&t->store, &e), 0);
	t_server(t);
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
	free(t);
	return 0;
}

/*
 * PUT of node id by agent instance "i1" with a healthy node plugin;
 * allocs: NULL for no report, else a NULL-terminated list of "vol/alloc".
 */
static void t_put(struct t_env *t, const char *id, const char *const *allocs)
{
	struct model_node n = {0};
	struct model_node_plugin p = {0};
	struct model_node_alloc al[8];
	char buf[8][64];
	struct err e;

	p.plugin_id = T_PLUGIN;
	p.type = MODEL_PLUGIN_NODE;
	p.healthy = true;
	p.health = "healthy";
	p.plugin_node_id = "csi-node";
	n.id = (char *)id;
	n.instance_id = "i1";
	n.plugins = &p;
	n.nplugins = 1;
	n.allocs_reported = allocs != NULL;
	n.allocs = al;
	for (size_t i = 0; allocs && allocs[i]; i++) {
		snprintf(buf[i], sizeof(buf[i]), "%s", allocs[i]);
		al[i].volume_id = buf[i];
		al[i].alloc_id = strchr(buf[i], '/') + 1;
		al[i].alloc_id[-1] = '\0';
		n.nallocs++;
	}
	if (server_node_put(t->s, &n, t->a, NULL, &e) != 0)
		fail_msg("node put %s: %s", id, e.msg);
}

static void t_volume(struct t_env *t, const char *id)
{
	struct model_capability cap = {.access = MODEL_ACCESS_SINGLE_NODE_WRITER,
				       .attachment = MODEL_ATTACH_FILE_SYSTEM};
	struct model_volume spec = {0}, *out = NULL;
	struct err e;

	spec.id = (char *)id;
	spec.plugin_id = T_PLUGIN;
	spec.external_id = (char *)id;
	spec.caps = &cap;
	spec.ncaps = 1;
	if (server_volume_register(t->s, &spec, t->a, &out, &e) != 0)
		fail_msg("register %s: %s", id, e.msg);
	reconciler_step(server_reconciler(t->s));
	assert_int_equal(server_volume_get(t->s, id, t->a, &out, &e), 0);
	assert_int_equal(out->state, MODEL_VOL_READY);
}

static void t_claim(struct t_env *t, const char *vol, const char *alloc, const char *node,
		    bool held_by_agent)
{
	struct model_claim_request req = {.alloc_id = alloc,
					  .node_id = node,
					  .mode = MODEL_CLAIM_WRITE,
					  .cap = {.access = MODEL_ACCESS_SINGLE_NODE_WRITER,
						  .attachment = MODEL_ATTACH_FILE_SYSTEM},
					  .held_by_agent = held_by_agent};
	struct model_volume *out = NULL;
	struct err e;

	if (server_volume_claim(t->s, vol, &req, t->a, &out, &e) != 0)
		fail_msg("claim %s for %s: %s", vol, alloc, e.msg);
	assert_int_equal(model_volume_claim(out, alloc)->held_by_agent, held_by_agent);
}

/* The active claim of alloc on vol (NULL: none). */
static struct model_claim *t_active(struct t_env *t, const char *vol, const char *alloc)
{
	struct model_volume *v = NULL;
	struct err e;

	assert_int_equal(server_volume_get(t->s, vol, t->a, &v, &e), 0);
	return model_volume_claim(v, alloc);
}

static void t_advance(struct t_env *t, int64_t ms)
{
	clock_fake_advance(&t->clock, ms);
}

/* A tick whose pass is due (the period is at most half the TTL). */
static void t_tick(struct t_env *t)
{
	t_advance(t, T_TTL_MS / 2);
	server_tick(t->s);
}

/* The claim is released with note, then ends freed with the reconciler. */
static void t_released(struct t_env *t, const char *vol, const char *alloc, const char *note)
{
	struct model_claim *c = t_active(t, vol, alloc);
	struct model_volume *v = NULL;
	struct err e;

	assert_non_null(c);
	assert_int_equal(c->state, MODEL_CLAIM_NODE_UNPUBLISHED);
	assert_string_equal(c->note, note);
	reconciler_step(server_reconciler(t->s));
	assert_int_equal(server_volume_get_history(t->s, vol, t->a, &v, &e), 0);
	assert_int_equal(v->nclaims, 0);
	assert_int_equal(v->npast_claims, 1);
	assert_string_equal(v->past_claims[0].alloc_id, alloc);
	assert_int_equal(v->past_claims[0].state, MODEL_CLAIM_FREED);
	/* The reason stays with it. */
	assert_string_equal(v->past_claims[0].note, note);
}

static void test_report_rule_and_race(void **state)
{
	struct t_env *t = *state;
	const char *const none[] = {NULL}, *const held[] = {"v/web-1", NULL};

	t_put(t, "n1", none);
	t_volume(t, "v");
	t_advance(t, 1000);
	t_claim(t, "v", "web-1", "n1", true);
	/*
	 * The race: a report the agent built before it began the claim flow
	 * reaches the server after the claim was recorded. The report before
	 * it was received before the claim: nothing is proved, nothing released.
	 */
	t_advance(t, 1000);
	t_put(t, "n1", none);
	t_tick(t);
	assert_int_equal(t_active(t, "v", "web-1")->state, MODEL_CLAIM_CLAIMED);
	/* The next report has it; heartbeats with it keep it. */
	t_put(t, "n1", held);
	t_tick(t);
	t_put(t, "n1", held);
	t_tick(t);
	assert_int_equal(t_active(t, "v", "web-1")->state, MODEL_CLAIM_CLAIMED);
	/* The agent dropped it (unmounted without releasing): released at the next pass. */
	t_advance(t, 100);
	t_put(t, "n1", none);
	server_tick(t->s);
	t_released(t, "v", "web-1",
		   "released: allocation web-1 no longer held by the agent of node n1");
}

/* A claim flow that died before its mount: missing from two reports after the claim. */
static void test_report_lost_flow(void **state)
{
	struct t_env *t = *state;
	const char *const none[] = {NULL}, *const other[] = {"w/db-1", NULL};

	t_put(t, "n1", other);
	t_volume(t, "v");
	t_advance(t, 1000);
	t_claim(t, "v", "web-1", "n1", true);
	t_advance(t, 1000);
	t_put(t, "n1", other);
	t_tick(t);
	assert_int_equal(t_active(t, "v", "web-1")->state, MODEL_CLAIM_CLAIMED);
	t_put(t, "n1", none);
	t_tick(t);
	t_released(t, "v", "web-1",
		   "released: allocation web-1 no longer held by the agent of node n1");
}

/* The agent claims again (a new mount flow): the claim is fresh, the old reports prove nothing. */
static void test_report_claim_again(void **state)
{
	struct t_env *t = *state;
	const char *const none[] = {NULL}, *const held[] = {"v/web-1", NULL};

	t_put(t, "n1", none);
	t_volume(t, "v");
	t_advance(t, 1000);
	t_claim(t, "v", "web-1", "n1", true);
	t_advance(t, 1000);
	t_put(t, "n1", held);
	t_advance(t, 1000);
	t_put(t, "n1", none);
	t_advance(t, 10);
	t_claim(t, "v", "web-1", "n1", true);
	server_tick(t->s);
	t_tick(t);
	assert_int_equal(t_active(t, "v", "web-1")->state, MODEL_CLAIM_CLAIMED);
	/* Two reports without it after the claim again: the new flow died too. */
	t_put(t, "n1", none);
	t_tick(t);
	assert_int_equal(t_active(t, "v", "web-1")->state, MODEL_CLAIM_CLAIMED);
	t_put(t, "n1", none);
	t_tick(t);
	t_released(t, "v", "web-1",
		   "released: allocation web-1 no longer held by the agent of node n1");
}

/* A claim an external scheduler made is not the agent's to report: never collected by reports. */
static void test_report_not_held_by_agent(void **state)
{
	struct t_env *t = *state;
	const char *const none[] = {NULL};

	t_put(t, "n1", none);
	t_volume(t, "v");
	t_advance(t, 1000);
	t_claim(t, "v", "web-1", "n1", false);
	for (int i = 0; i < 5; i++) {
		t_put(t, "n1", none);
		t_tick(t);
	}
	assert_int_equal(t_active(t, "v", "web-1")->state, MODEL_CLAIM_CLAIMED);
	assert_false(t_active(t, "v", "web-1")->held_by_agent);
}

/* A PUT without a report (an operator's, an older agent) stops collection until two reports. */
static void test_report_absent(void **state)
{
	struct t_env *t = *state;
	const char *const none[] = {NULL};

	t_put(t, "n1", none);
	t_volume(t, "v");
	t_advance(t, 1000);
	t_claim(t, "v", "web-1", "n1", true);
	t_advance(t, 1000);
	t_put(t, "n1", none);
	t_advance(t, 1000);
	t_put(t, "n1", NULL);
	t_tick(t);
	t_put(t, "n1", none);
	t_tick(t);
	assert_int_equal(t_active(t, "v", "web-1")->state, MODEL_CLAIM_CLAIMED);
	t_put(t, "n1", none);
	t_tick(t);
	assert_int_equal(t_active(t, "v", "web-1")->state, MODEL_CLAIM_NODE_UNPUBLISHED);
}

/* Silent for the TTL: down. Returns the wall time it went down. */
/* Whether the claim index holds id. */
static bool t_indexed(struct t_env *t, const char *id)
{
	struct store_obj o;
	struct err e;
	int rc = store_get(t->store, STORE_CLAIM, id, &o, &e);

	if (rc == 0)
		store_obj_free(&o);
	return rc == 0;
}

/*
 * The pass reads the claim index, not the volumes: a claim's entry comes
 * and goes with its claimed state in the volume's own writes; an entry no
 * claim backs is dropped by the pass that meets it; a store whose index
 * was lost (written before it existed) is rebuilt by the first pass of a
 * new server, which then finds the lost claim.
 */
static void test_claim_index(void **state)
{
	struct t_env *t = *state;
	const char *const none[] = {NULL};
	struct store_op op = {
	    STORE_OP_PUT, STORE_CLAIM, "n1/v/ghost", "{\"updated_ms\":1,\"held_by_agent\":true}", 0,
	    STORE_ANY};
	struct store_op del = {STORE_OP_DELETE, STORE_CLAIM, "n1/v/web-1", NULL, 0, STORE_ANY};
	struct err e;

	t_put(t, "n1", none);
	t_volume(t, "v");
	t_advance(t, 1000);
	t_claim(t, "v", "web-1", "n1", true);
	assert_true(t_indexed(t, "n1/v/web-1"));
	op.len = strlen(op.value);
	assert_int_equal(store_txn(t->store, &op, 1, NULL, &e), 0);
	/* The index lost web-1's entry; a new server rebuilds it (and drops the ghost). */
	assert_int_equal(store_txn(t->store, &del, 1, NULL, &e), 0);
	server_free(t->s);
	t_server(t);
	t_advance(t, 1000);
	t_put(t, "n1", none);
	t_tick(t);
	assert_true(t_indexed(t, "n1/v/web-1"));
	assert_false(t_indexed(t, "n1/v/ghost"));
	/* A stale entry met by a pass is dropped. */
	assert_int_equal(store_txn(t->store, &op, 1, NULL, &e), 0);
	t_advance(t, 1000);
	t_put(t, "n1", none);
	t_tick(t);
	assert_false(t_indexed(t, "n1/v/ghost"));
	/* Two reports without web-1 after the claim: released, and its entry goes with it. */
	t_released(t, "v", "web-1",
		   "released: allocation web-1 no longer held by the agent of node n1");
	assert_false(t_indexed(t, "n1/v/web-1"));
}

static int64_t t_down(struct t_env *t, const char *node)
{
	struct model_node *n = NULL;
	struct err e;

	t_advance(t, T_TTL_MS);
	server_tick(t->s);
	assert_int_equal(server_node_get(t->s, node, t->a, &n, &e), 0);
	assert_int_equal(n->status, MODEL_NODE_DOWN);
	return n->updated_ms;
}

static void test_grace(void **state)
{
	struct t_env *t = *state;
	int64_t since;

	t_put(t, "n1", NULL);
	t_volume(t, "v");
	t_claim(t, "v", "web-1", "n1", false);
	since = t_down(t, "n1");
	assert_int_equal(since, clock_wall_ms(&t->clock.base));
	t_advance(t, T_GRACE_MS - 1);
	server_tick(t->s);
	assert_int_equal(t_active(t, "v", "web-1")->state, MODEL_CLAIM_CLAIMED);
	/* The pass is due at most half a TTL later: by then the grace is over. */
	t_tick(t);
	t_released(t, "v", "web-1", "released: node n1 down for more than 1m0s");
}

static void test_grace_node_back(void **state)
{
	struct t_env *t = *state;

	t_put(t, "n1", NULL);
	t_volume(t, "v");
	t_claim(t, "v", "web-1", "n1", true);
	t_down(t, "n1");
	t_advance(t, T_GRACE_MS - 1000);
	server_tick(t->s);
	t_put(t, "n1", NULL);
	for (int i = 0; i < 40; i++) {
		t_tick(t);
		t_put(t, "n1", NULL);
	}
	assert_int_equal(t_active(t, "v", "web-1")->state, MODEL_CLAIM_CLAIMED);
}

/* The down time is the record's: a restarted server keeps counting. */
static void test_grace_server_restart(void **state)
{
	struct t_env *t = *state;

	t_put(t, "n1", NULL);
	t_volume(t, "v");
	t_claim(t, "v", "web-1", "n1", false);
	t_down(t, "n1");
	t_advance(t, T_GRACE_MS / 2);
	server_tick(t->s);
	server_free(t->s);
	t_server(t);
	server_tick(t->s);
	assert_int_equal(t_active(t, "v", "web-1")->state, MODEL_CLAIM_CLAIMED);
	t_advance(t, T_GRACE_MS / 2 - T_TTL_MS);
	server_tick(t->s);
	assert_int_equal(t_active(t, "v", "web-1")->state, MODEL_CLAIM_CLAIMED);
	t_advance(t, T_TTL_MS + 1);
	server_tick(t->s);
	t_released(t, "v", "web-1", "released: node n1 down for more than 1m0s");
}

static void test_verdict_and_duration(void **state)
{
	struct model_node_alloc allocs[] = {{"a", "x"}, {"v", "web-1"}, {"v", "web-2"}};
	struct model_claim c = {.alloc_id = "web-1",
				.node_id = "n1",
				.state = MODEL_CLAIM_CLAIMED,
				.updated_ms = 100,
				.held_by_agent = true};
	struct server_gc_node n = {
	    .id = "n1", .live = true, .reported = true, .prev_report_ms = 101};
	char note[256], d[32];

	(void)state;
	n.allocs = allocs;
	n.nallocs = 3;
	assert_true(server_gc_has(allocs, 3, "v", "web-2"));
	assert_false(server_gc_has(allocs, 3, "v", "web-3"));
	assert_false(server_gc_verdict("v", &c, &n, 0, 1, note, sizeof(note)));
	n.nallocs = 1;
	assert_true(server_gc_verdict("v", &c, &n, 0, 1, note, sizeof(note)));
	c.updated_ms = 101;
	assert_false(server_gc_verdict("v", &c, &n, 0, 1, note, sizeof(note)));
	c.updated_ms = 100;
	c.state = MODEL_CLAIM_NODE_UNPUBLISHED;
	assert_false(server_gc_verdict("v", &c, &n, 0, 1, note, sizeof(note)));
	c.state = MODEL_CLAIM_CLAIMED;
	assert_false(server_gc_verdict("v", &c, NULL, 0, 1, note, sizeof(note)));
	n.live = false;
	assert_false(server_gc_verdict("v", &c, &n, 0, 1, note, sizeof(note)));
	n.down = true;
	n.down_since_ms = 1000;
	assert_false(server_gc_verdict("v", &c, &n, 2000, 1000, note, sizeof(note)));
	assert_true(server_gc_verdict("v", &c, &n, 2001, 1000, note, sizeof(note)));
	assert_string_equal(note, "released: node n1 down for more than 1s");
	conf_format_duration(500, d, sizeof(d));
	assert_string_equal(d, "500ms");
	conf_format_duration(2000, d, sizeof(d));
	assert_string_equal(d, "2s");
	conf_format_duration(1500, d, sizeof(d));
	assert_string_equal(d, "1.5s");
	conf_format_duration(90000, d, sizeof(d));
	assert_string_equal(d, "1m30s");
	conf_format_duration(300000, d, sizeof(d));
	assert_string_equal(d, "5m0s");
	conf_format_duration(3600000, d, sizeof(d));
	assert_string_equal(d, "1h0m0s");
}

/*
 * The heartbeat's expand rule: a flagged volume wants NodeExpandVolume on
 * a node with a claimed claim there not yet marked; not on a node whose
 * claims are marked, released, or elsewhere; nothing without the flag.
 */
static void test_expand_wanted(void **state)
{
	struct model_claim c[3] = {
	    {.alloc_id = "a1", .node_id = "n1", .state = MODEL_CLAIM_CLAIMED},
	    {.alloc_id = "a2",
	     .node_id = "n2",
	     .state = MODEL_CLAIM_CLAIMED,
	     .node_expanded = true},
	    {.alloc_id = "a3", .node_id = "n3", .state = MODEL_CLAIM_NODE_UNPUBLISHED},
	};
	struct model_volume v = {.id = "v", .claims = c, .nclaims = 3};

	(void)state;
	assert_false(server_gc_expand_wanted(&v, "n1"));
	v.node_expansion_required = true;
	assert_true(server_gc_expand_wanted(&v, "n1"));
	assert_false(server_gc_expand_wanted(&v, "n2"));
	assert_false(server_gc_expand_wanted(&v, "n3"));
	assert_false(server_gc_expand_wanted(&v, "n4"));
	assert_false(server_gc_expand_wanted(NULL, "n1"));
	c[0].node_expanded = true;
	assert_false(server_gc_expand_wanted(&v, "n1"));
}

static void test_orphan_verdict(void **state)
{
	struct model_claim claims[] = {
	    {.alloc_id = "web-1",
	     .node_id = "n1",
	     .state = MODEL_CLAIM_CLAIMED,
	     .held_by_agent = true},
	    {.alloc_id = "web-2",
	     .node_id = "n1",
	     .state = MODEL_CLAIM_NODE_UNPUBLISHED,
	     .held_by_agent = true,
	     .note = "released: node n1 down for more than 2s"},
	    {.alloc_id = "web-3",
	     .node_id = "n1",
	     .state = MODEL_CLAIM_CONTROLLER_UNPUBLISHED,
	     .held_by_agent = true},
	    {.alloc_id = "ext-1",
	     .node_id = "n1",
	     .state = MODEL_CLAIM_NODE_UNPUBLISHED,
	     .held_by_agent = false,
	     .note = "released"},
	    {.alloc_id = "ext-2",
	     .node_id = "n1",
	     .state = MODEL_CLAIM_CLAIMED,
	     .held_by_agent = false},
	    {.alloc_id = "moved",
	     .node_id = "n2",
	     .state = MODEL_CLAIM_CLAIMED,
	     .held_by_agent = true},
	};
	struct model_claim past[] = {
	    {.alloc_id = "old", .node_id = "n1", .state = MODEL_CLAIM_FREED, .note = "first"},
	    {.alloc_id = "old", .node_id = "n1", .state = MODEL_CLAIM_FREED, .note = "newest"},
	    {.alloc_id = "bare", .node_id = "n1", .state = MODEL_CLAIM_FREED},
	};
	struct model_volume v = {
	    .id = "v", .claims = claims, .nclaims = 6, .past_claims = past, .npast_claims = 3};
	char note[256] = "";

	(void)state;
	/* Claimed: held, also while its publication is still under way (in flight). */
	assert_false(server_gc_orphan(&v, "v", "n1", "web-1", note, sizeof(note)));
	assert_false(server_gc_orphan(&v, "v", "n1", "ext-2", note, sizeof(note)));
	/* Released, made by the agent: its note, else its state. */
	assert_true(server_gc_orphan(&v, "v", "n1", "web-2", note, sizeof(note)));
	assert_string_equal(note, "released: node n1 down for more than 2s");
	assert_true(server_gc_orphan(&v, "v", "n1", "web-3", note, sizeof(note)));
	assert_string_equal(note, "claim controller-unpublished");
	/* Released, made by an external scheduler: the agent's claim flow did not mount it. */
	assert_false(server_gc_orphan(&v, "v", "n1", "ext-1", note, sizeof(note)));
	/* Freed: the newest past claim on the node says why. */
	assert_true(server_gc_orphan(&v, "v", "n1", "old", note, sizeof(note)));
	assert_string_equal(note, "newest (claim freed)");
	assert_true(server_gc_orphan(&v, "v", "n1", "bare", note, sizeof(note)));
	assert_string_equal(note, "claim freed");
	/* The allocation holds its claim on another node, or none at all (in flight at the
	 * agent, which keeps it), or the volume is gone. */
	assert_true(server_gc_orphan(&v, "v", "n1", "moved", note, sizeof(note)));
	assert_string_equal(note, "no claim of allocation moved on node n1");
	assert_false(server_gc_orphan(&v, "v", "n2", "moved", note, sizeof(note)));
	assert_true(server_gc_orphan(&v, "v", "n1", "web-9", note, sizeof(note)));
	assert_string_equal(note, "no claim of allocation web-9 on node n1");
	assert_true(server_gc_orphan(NULL, "gone", "n1", "web-1", note, sizeof(note)));
	assert_string_equal(note, "volume gone is gone");
}

/* The allocations server_gc_answer answers node n1 released for its report, as "vol/alloc:note;".
 */
static const char *t_answer(struct t_env *t, const char *const *allocs, char *buf, size_t cap)
{
	struct model_node_alloc al[8];
	struct server_gc_answer ans;
	char names[8][64];
	size_t k = 0, used = 0;
	struct err e;

	for (; allocs[k]; k++) {
		snprintf(names[k], sizeof(names[k]), "%s", allocs[k]);
		al[k].volume_id = names[k];
		al[k].alloc_id = strchr(names[k], '/') + 1;
		al[k].alloc_id[-1] = '\0';
	}
	assert_int_equal(server_gc_answer(t->s, "n1", al, k, t->a, &ans, &e), 0);
	/* No volume was grown: nothing to expand. */
	assert_int_equal(ans.nexpand, 0);
	buf[0] = '\0';
	for (size_t i = 0; i < ans.nreleased; i++)
		used +=
		    (size_t)snprintf(buf + used, cap - used, "%s/%s:%s;", ans.released[i].volume_id,
				     ans.released[i].alloc_id, ans.released[i].note);
	return buf;
}

static void test_released_answer(void **state)
{
	const char *const report[] = {"v/web-1", "v/web-2", "w/web-3", "nov/web-4", NULL};
	struct t_env *t = *state;
	char buf[512];

	t_put(t, "n1", NULL);
	t_volume(t, "v");
	t_volume(t, "w");
	t_claim(t, "v", "web-1", "n1", true);
	t_claim(t, "w", "web-3", "n1", true);
	/* Live: web-1 and web-3 hold their claims; web-2 has none (in flight at the agent). */
	assert_string_equal(t_answer(t, report, buf, sizeof(buf)),
			    "v/web-2:no claim of allocation web-2 on node n1;"
			    "nov/web-4:volume nov is gone;");
	/* Down past the grace: released, then freed; the node comes back. */
	t_down(t, "n1");
	t_advance(t, T_GRACE_MS);
	t_tick(t);
	assert_int_equal(t_active(t, "v", "web-1")->state, MODEL_CLAIM_NODE_UNPUBLISHED);
	assert_string_equal(t_answer(t, report, buf, sizeof(buf)),
			    "v/web-1:released: node n1 down for more than 1m0s;"
			    "v/web-2:no claim of allocation web-2 on node n1;"
			    "w/web-3:released: node n1 down for more than 1m0s;"
			    "nov/web-4:volume nov is gone;");
	reconciler_step(server_reconciler(t->s));
	assert_null(t_active(t, "v", "web-1"));
	t_put(t, "n1", report);
	assert_string_equal(t_answer(t, report, buf, sizeof(buf)),
			    "v/web-1:released: node n1 down for more than 1m0s (claim freed);"
			    "v/web-2:no claim of allocation web-2 on node n1;"
			    "w/web-3:released: node n1 down for more than 1m0s (claim freed);"
			    "nov/web-4:volume nov is gone;");
	/* Claimed again (the workload mounts anew): held. */
	t_claim(t, "v", "web-1", "n1", true);
	assert_string_equal(t_answer(t, (const char *const[]){"v/web-1", NULL}, buf, sizeof(buf)),
			    "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_report_rule_and_race, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_report_lost_flow, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_report_claim_again, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_report_not_held_by_agent, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_report_absent, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_claim_index, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_grace, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_grace_node_back, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_grace_server_restart, t_setup, t_teardown),
	    cmocka_unit_test(test_verdict_and_duration),
	    cmocka_unit_test(test_orphan_verdict),
	    cmocka_unit_test(test_expand_wanted),
	    cmocka_unit_test_setup_teardown(test_released_answer, t_setup, t_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
