/*
 * Unit tests of the server's metrics collector (src/server/server_metrics.c)
 * on the memory store, with a server whose reconciler is stepped by hand
 * and a fake plugin without controller service: volumes already stored
 * are counted by the first list, later registrations, claims,
 * deregistrations and snapshots (created, deleted) through the change
 * log, each by plugin and state;
 * nodes and the plugins view come out too, no volume ID is ever a label,
 * and once stopped the collector is gone from the text. A collector held
 * while more writes than the change log keeps go by lists again once,
 * decoding only the volumes that changed, and counts right afterwards.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent_proc.h"
#include "csi_fake.h"
#include "server/server.h"
#include "server/server_metrics.h"
#include "store/store.h"
#include "util/arena.h"
#include "util/clock.h"
#include "util/metrics.h"

#define T_A "a.csi"
#define T_B "b.csi"

struct t_env {
	struct store *store;
	struct server *s;
	struct arena *a;
	struct csi_fake fa, fb;
	struct server_metrics *m; /* the collector under test */
};

static int t_setup(void **state)
{
	struct t_env *t = calloc(1, sizeof(*t));
	struct server_config cfg = {0};
	struct err e;

	assert_non_null(t);
	csi_fake_init(&t->fa, T_A);
	csi_fake_init(&t->fb, T_B);
	t->fa.no_controller = true;
	t->fb.no_controller = true;
	t->fa.next = &t->fb;
	assert_int_equal(store_mem_new(&t->store, &e), 0);
	cfg.store = t->store;
	cfg.controllers = csi_fake_controllers(&t->fa);
	cfg.manual_reconciler = true;
	assert_int_equal(server_new(&cfg, &t->s, &e), 0);
	t->a = arena_new();
	assert_non_null(t->a);
	*state = t;
	return 0;
}

static int t_teardown(void **state)
{
	struct t_env *t = *state;

	server_metrics_stop(t->m);
	server_free(t->s);
	store_close(t->store);
	arena_free(t->a);
	csi_fake_fini(&t->fa);
	csi_fake_fini(&t->fb);
	free(t);
	return 0;
}

static void t_node(struct t_env *t, const char *id)
{
	struct model_node n = {0};
	struct model_node_plugin p = {0};
	struct err e;

	p.plugin_id = T_A;
	p.type = MODEL_PLUGIN_NODE;
	p.healthy = true;
	p.health = "healthy";
	p.version = "1.0.0";
	p.plugin_node_id = "csi-n1";
	n.id = (char *)id;
	n.plugins = &p;
	n.nplugins = 1;
	assert_int_equal(server_node_put(t->s, &n, t->a, NULL, &e), 0);
}

static const struct model_capability t_cap = {.access = MODEL_ACCESS_SINGLE_NODE_WRITER,
					      .attachment = MODEL_ATTACH_FILE_SYSTEM};

/* A volume id of plugin (its plugin ID id too) with the one capability t_cap. */
static struct model_volume t_spec(const char *id, const char *plugin)
{
	struct model_volume v = {0};

	v.id = (char *)id;
	v.plugin_id = (char *)plugin;
	v.external_id = (char *)id;
	v.caps = (struct model_capability *)&t_cap;
	v.ncaps = 1;
	return v;
}

/* Registers volume id of plugin and steps it to ready. */
static void t_volume(struct t_env *t, const char *id, const char *plugin)
{
	struct model_volume spec = t_spec(id, plugin), *out = NULL;
	struct err e;

	assert_int_equal(server_volume_register(t->s, &spec, t->a, &out, &e), 0);
	reconciler_step(server_reconciler(t->s));
	assert_int_equal(server_volume_get(t->s, id, t->a, &out, &e), 0);
	assert_int_equal(out->state, MODEL_VOL_READY);
}

static bool t_caught_up(void *ctx)
{
	struct t_env *t = ctx;

	return server_metrics_index(t->m) >= store_index(t->store);
}

/* Waits until the collector counted every change, then renders the default registry. */
static char *t_scrape(struct t_env *t)
{
	struct strbuf b = {.max = 1 << 22};

	agent_proc_poll(t_caught_up, t, 10000);
	assert_int_equal(server_metrics_index(t->m), store_index(t->store));
	assert_int_equal(metrics_render(metrics_default(), &b), 0);
	assert_non_null(b.p);
	return b.p;
}

static void t_has(const char *text, const char *want)
{
	if (!strstr(text, want))
		fail_msg("metrics lack \"%s\":\n%s", want, text);
}

/* Writes volume id straight to the store: plugin, state, nclaims claimed write claims. */
static void t_put(struct t_env *t, const char *id, const char *plugin, enum model_volume_state st,
		  int nclaims)
{
	struct model_claim cl[2] = {
	    {.alloc_id = "alloc-1", .node_id = "n1", .mode = MODEL_CLAIM_WRITE, .cap = t_cap},
	    {.alloc_id = "alloc-2", .node_id = "n2", .mode = MODEL_CLAIM_WRITE, .cap = t_cap}};
	struct model_volume v = t_spec(id, plugin);
	struct store_op op = {
	    .type = STORE_OP_PUT, .kind = STORE_VOLUME, .expect_index = STORE_ANY};
	char *json = NULL;
	size_t len = 0;
	struct err e;

	v.state = st;
	v.claims = cl;
	v.nclaims = (size_t)nclaims;
	assert_int_equal(model_volume_encode(&v, MODEL_VIEW_STORE, &json, &len, &e), 0);
	op.id = id;
	op.value = json;
	op.len = len;
	assert_int_equal(store_txn(t->store, &op, 1, NULL, &e), 0);
	free(json);
}

static void test_server_metrics_behind(void **state)
{
	struct t_env *t = *state;
	struct store_op del = {
	    .type = STORE_OP_DELETE, .kind = STORE_VOLUME, .expect_index = STORE_ANY};
	struct server_metrics_stats before, after;
	struct store_changes ch = {0};
	uint64_t held_at;
	struct err e;
	char id[32], *text;

	for (int i = 0; i < 100; i++) {
		snprintf(id, sizeof(id), "vol-%03d", i);
		t_put(t, id, T_A, MODEL_VOL_READY, 0);
	}
	assert_int_equal(server_metrics_start(t->s, NULL, &t->m, &e), 0);
	text = t_scrape(t);
	t_has(text, "csid_volumes{plugin=\"" T_A "\",state=\"ready\"} 100\n");
	free(text);

	/*
	 * Held, it misses 12,000 changes of 60 volumes (the log keeps 10,000),
	 * ten deletions and twenty new volumes; 30 volumes stay as they were.
	 */
	server_metrics_hold(t->m, true);
	server_metrics_stats(t->m, &before);
	assert_int_equal(before.lists, 1);
	held_at = store_index(t->store);
	for (int r = 0; r < 200; r++)
		for (int i = 0; i < 60; i++) {
			snprintf(id, sizeof(id), "vol-%03d", i);
			if (r < 199)
				t_put(t, id, T_A, MODEL_VOL_CREATING, 2);
			else
				t_put(t, id, T_B, MODEL_VOL_READY, i % 3);
		}
	for (int i = 90; i < 100; i++) {
		snprintf(id, sizeof(id), "vol-%03d", i);
		del.id = id;
		assert_int_equal(store_txn(t->store, &del, 1, NULL, &e), 0);
	}
	for (int i = 0; i < 20; i++) {
		snprintf(id, sizeof(id), "new-%03d", i);
		t_put(t, id, T_A, MODEL_VOL_READY, 1);
	}
	assert_int_equal(store_changes(t->store, held_at, 1, &ch, &e), CSID_ERANGE);
	server_metrics_hold(t->m, false);

	text = t_scrape(t);
	t_has(text, "csid_volumes{plugin=\"" T_A "\",state=\"ready\"} 50\n");
	t_has(text, "csid_volumes{plugin=\"" T_A "\",state=\"creating\"} 0\n");
	t_has(text, "csid_volumes{plugin=\"" T_B "\",state=\"ready\"} 60\n");
	t_has(text, "csid_claims{state=\"claimed\",mode=\"write\"} 80\n");
	free(text);
	/* One list more, which decoded the 60 changed and 20 new volumes only. */
	server_metrics_stats(t->m, &after);
	assert_int_equal(after.lists, 2);
	assert_int_equal(after.decoded - before.decoded, 80);
}

static void test_server_metrics_counts(void **state)
{
	struct t_env *t = *state;
	struct model_claim_request req = {.alloc_id = "alloc-1",
					  .node_id = "n1",
					  .mode = MODEL_CLAIM_WRITE,
					  .cap = {.access = MODEL_ACCESS_SINGLE_NODE_WRITER,
						  .attachment = MODEL_ATTACH_FILE_SYSTEM}};
	struct model_volume *out = NULL;
	struct model_snapshot snap = {0}, *sout = NULL;
	struct err e;
	char *text, want[128];
	int queued = -1, failing = -1;

	/* Stored before the collector starts: counted by its first list. */
	t_node(t, "n1");
	t_volume(t, "vol-one", T_A);
	t_volume(t, "vol-two", T_A);
	assert_int_equal(server_metrics_start(t->s, NULL, &t->m, &e), 0);
	text = t_scrape(t);
	t_has(text, "csid_volumes{plugin=\"" T_A "\",state=\"ready\"} 2\n");
	t_has(text, "csid_volumes{plugin=\"" T_A "\",state=\"creating\"} 0\n");
	t_has(text, "csid_claims{state=\"claimed\",mode=\"write\"} 0\n");
	t_has(text, "csid_snapshots{state=\"ready\"} 0\n");
	t_has(text, "csid_nodes{status=\"ready\"} 1\n");
	t_has(text, "csid_nodes{status=\"down\"} 0\n");
	t_has(text, "csid_plugin_nodes_healthy{plugin=\"" T_A "\"} 1\n");
	/* The reconciler runs on this thread only: its counts stand still. */
	reconciler_counts(server_reconciler(t->s), &queued, &failing);
	snprintf(want, sizeof(want), "\ncsid_reconciler_queue_depth %d\n", queued);
	t_has(text, want);
	snprintf(want, sizeof(want), "\ncsid_reconciler_items_failing %d\n", failing);
	t_has(text, want);
	assert_null(strstr(text, "plugin=\"other\""));
	free(text);

	/* Then through the change log: a new plugin, a claim, a deregistration, snapshots. */
	t_volume(t, "vol-three", T_B);
	snap.volume_id = "vol-three";
	snap.id = "snap-1";
	assert_int_equal(server_snapshot_create(t->s, &snap, t->a, &sout, &e), 0);
	snap.id = "snap-2";
	assert_int_equal(server_snapshot_create(t->s, &snap, t->a, &sout, &e), 0);
	assert_int_equal(server_volume_claim(t->s, "vol-one", &req, t->a, &out, &e), 0);
	assert_int_equal(server_volume_deregister(t->s, "vol-two", false, t->a, NULL, &e), 0);
	text = t_scrape(t);
	t_has(text, "csid_volumes{plugin=\"" T_A "\",state=\"ready\"} 1\n");
	t_has(text, "csid_volumes{plugin=\"" T_B "\",state=\"ready\"} 1\n");
	t_has(text, "csid_claims{state=\"claimed\",mode=\"write\"} 1\n");
	t_has(text, "csid_claims{state=\"claimed\",mode=\"read\"} 0\n");
	t_has(text, "csid_snapshots{state=\"creating\"} 2\n");
	assert_null(strstr(text, "vol-one"));
	assert_null(strstr(text, "snap-1"));
	assert_null(strstr(text, "alloc-1"));
	free(text);

	/* The claim released and moved on by the reconciler: no longer active. */
	assert_int_equal(
	    server_volume_release(t->s, "vol-one", "alloc-1", false, t->a, &out, NULL, &e), 0);
	for (int i = 0; i < 5; i++)
		reconciler_step(server_reconciler(t->s));
	assert_int_equal(server_snapshot_delete(t->s, "snap-1", t->a, &sout, &e), 0);
	text = t_scrape(t);
	t_has(text, "csid_claims{state=\"claimed\",mode=\"write\"} 0\n");
	t_has(text, "csid_snapshots{state=\"creating\"} 1\n");
	t_has(text, "csid_snapshots{state=\"deleting\"} 1\n");
	free(text);

	server_metrics_stop(t->m);
	t->m = NULL;
	{
		struct strbuf b = {.max = 1 << 22};

		assert_int_equal(metrics_render(metrics_default(), &b), 0);
		assert_null(strstr(b.p, "csid_volumes"));
		strbuf_free(&b);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_server_metrics_counts, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_server_metrics_behind, t_setup, t_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
