/*
 * Benchmark of the server core's claim path as the cluster grows (not a
 * test: it prints figures and targets). A server in this process on a
 * SQLite store in a private directory under /tmp (or $CSID_BENCH_DIR),
 * with a manual reconciler (nothing runs behind the measured calls):
 *   nodes  one claim (server_volume_claim, the call the agent's claim
 *          request makes) of a node plugin without a controller, with 1
 *          and then 1,000 registered nodes, each with one plugin; then a
 *          forced release so the next claim finds the volume free. Median
 *          of the claim's wall time over many claims. Target: 1,000 nodes
 *          within 10% of one node.
 *   gc     one lost-claim pass (server_tick on a fake clock, past the gc
 *          period) with 100,000 volumes stored, 1,000 of them claimed by
 *          the agents of 10 live nodes whose last two reports list every
 *          one of those allocations: nothing to do. Median of 20 passes,
 *          after the first (which rebuilds the claim index). Target <= 10 ms.
 *
 *   bench_claims [claims]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "model/model.h"
#include "server/server.h"
#include "store/store.h"
#include "util/clock.h"

#define BENCH_PLUGIN "bench.csi.csid.dev"
#define BENCH_GC_VOLUMES 100000
#define BENCH_GC_NODES 10
#define BENCH_GC_CLAIMED 1000
#define BENCH_GC_PASSES 20

static double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void bench_die(const char *what, const char *detail)
{
	fprintf(stderr, "bench_claims: %s: %s\n", what, detail ? detail : "");
	exit(1);
}

static int bench_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int bench_acquire(void *ctx, const char *plugin_id, struct csi_client **client,
			 uint64_t *caps, struct err *e)
{
	(void)ctx;
	(void)client;
	(void)caps;
	return err_set(e, CSID_ENOTFOUND, "no controller plugin %s", plugin_id);
}

static void bench_release(void *ctx, const char *plugin_id, struct csi_client *client)
{
	(void)ctx;
	(void)plugin_id;
	(void)client;
}

/*
 * Registers node i (node-NNNN) with one healthy node plugin; with allocs
 * (not NULL) its agent's report of n allocations, under instance i.
 */
static void bench_node(struct server *s, int i, struct model_node_alloc *allocs, size_t n)
{
	struct model_node node = {0};
	struct model_node_plugin p = {0};
	char id[32], pid[40];
	struct err e;
	struct arena *a;

	snprintf(id, sizeof(id), "node-%04d", i);
	snprintf(pid, sizeof(pid), "csi-%s", id);
	p.plugin_id = BENCH_PLUGIN;
	p.type = MODEL_PLUGIN_NODE;
	p.healthy = true;
	p.health = "healthy";
	p.version = "1.0.0";
	p.plugin_node_id = pid;
	node.id = id;
	node.plugins = &p;
	node.nplugins = 1;
	if (allocs) {
		node.instance_id = id;
		node.allocs_reported = true;
		node.allocs = allocs;
		node.nallocs = n;
	}
	a = arena_new();
	if (!a || server_node_put(s, &node, a, NULL, &e) != 0)
		bench_die("node put", a ? e.msg : "out of memory");
	arena_free(a);
}

/* Median microseconds of a claim with nnodes registered nodes. */
static double bench_claims(const char *dir, int nnodes, int claims)
{
	struct model_capability cap = {MODEL_ACCESS_SINGLE_NODE_WRITER, MODEL_ATTACH_FILE_SYSTEM};
	struct server_config cfg = {0};
	struct model_volume spec = {0};
	struct store *st = NULL;
	struct server *s = NULL;
	double *t = calloc((size_t)claims, sizeof(*t)), med;
	struct model_volume *vout = NULL;
	struct arena *ra;
	char db[300];
	struct err e;

	snprintf(db, sizeof(db), "%s/claims-%d.db", dir, nnodes);
	unlink(db);
	if (!t || store_sqlite_open(db, &st, &e) != 0)
		bench_die("open store", t ? e.msg : "out of memory");
	cfg.store = st;
	cfg.controllers = (struct reconciler_controllers){bench_acquire, bench_release, NULL};
	cfg.manual_reconciler = true;
	if (server_new(&cfg, &s, &e) != 0)
		bench_die("server_new", e.msg);
	for (int i = 0; i < nnodes; i++)
		bench_node(s, i, NULL, 0);
	spec.id = "vol";
	spec.plugin_id = BENCH_PLUGIN;
	spec.external_id = "ext-vol";
	spec.caps = &cap;
	spec.ncaps = 1;
	ra = arena_new();
	if (!ra || server_volume_register(s, &spec, ra, &vout, &e) != 0)
		bench_die("register", ra ? e.msg : "out of memory");
	arena_free(ra);
	reconciler_step(server_reconciler(s));
	for (int i = 0; i < claims; i++) {
		struct model_claim_request req = {
		    .node_id = "node-0000", .mode = MODEL_CLAIM_WRITE, .cap = cap};
		struct arena *a = arena_new();
		struct model_volume *v = NULL;
		char alloc[32];
		double t0;

		snprintf(alloc, sizeof(alloc), "alloc-%d", i);
		req.alloc_id = alloc;
		t0 = bench_now();
		if (!a || server_volume_claim(s, "vol", &req, a, &v, &e) != 0)
			bench_die("claim", a ? e.msg : "out of memory");
		t[i] = (bench_now() - t0) * 1e6;
		if (server_volume_release(s, "vol", alloc, true, a, NULL, NULL, &e) != 0)
			bench_die("release", e.msg);
		arena_free(a);
	}
	server_free(s);
	store_close(st);
	unlink(db);
	qsort(t, (size_t)claims, sizeof(*t), bench_cmp);
	med = t[claims / 2];
	free(t);
	return med;
}

/* Volume i, claimed by alloc-i on its node when i < BENCH_GC_CLAIMED. */
static char *bench_gc_volume(int i, size_t *len)
{
	struct model_capability cap = {MODEL_ACCESS_SINGLE_NODE_WRITER, MODEL_ATTACH_FILE_SYSTEM};
	struct model_claim c = {0};
	struct model_volume v = {0};
	char id[32], alloc[32], node[32];
	char *text = NULL;
	struct err e;

	snprintf(id, sizeof(id), "vol-%07d", i);
	snprintf(alloc, sizeof(alloc), "alloc-%d", i);
	snprintf(node, sizeof(node), "node-%04d", i % BENCH_GC_NODES);
	v.id = v.name = id;
	v.plugin_id = BENCH_PLUGIN;
	v.external_id = id;
	v.caps = &cap;
	v.ncaps = 1;
	v.state = MODEL_VOL_READY;
	v.capacity = 1 << 30;
	if (i < BENCH_GC_CLAIMED) {
		c.alloc_id = alloc;
		c.node_id = node;
		c.plugin_node_id = node;
		c.mode = MODEL_CLAIM_WRITE;
		c.cap = cap;
		c.state = MODEL_CLAIM_CLAIMED;
		c.claimed_ms = c.updated_ms = 1;
		c.held_by_agent = true;
		v.claims = &c;
		v.nclaims = 1;
	}
	if (model_volume_encode(&v, MODEL_VIEW_STORE, &text, len, &e) != 0)
		bench_die("encode", e.msg);
	return text;
}

static void bench_gc_fill(struct store *st)
{
	struct store_op ops[64];
	char *texts[64], ids[64][32];
	struct err e;
	int k = 0;

	for (int i = 0; i < BENCH_GC_VOLUMES; i++) {
		size_t len = 0;

		snprintf(ids[k], sizeof(ids[k]), "vol-%07d", i);
		texts[k] = bench_gc_volume(i, &len);
		ops[k] = (struct store_op){STORE_OP_PUT, STORE_VOLUME, ids[k], texts[k], len, 0};
		if (++k == 64 || i == BENCH_GC_VOLUMES - 1) {
			if (store_txn(st, ops, (size_t)k, NULL, &e) != 0)
				bench_die("fill", e.msg);
			for (int j = 0; j < k; j++)
				free(texts[j]);
			k = 0;
		}
	}
}

/* Node n's heartbeat with its report: every claimed allocation of its volumes. */
static void bench_gc_report(struct server *s, int n)
{
	struct model_node_alloc allocs[BENCH_GC_CLAIMED / BENCH_GC_NODES];
	char vols[BENCH_GC_CLAIMED / BENCH_GC_NODES][32],
	    ids[BENCH_GC_CLAIMED / BENCH_GC_NODES][32];
	size_t k = 0;

	for (int i = n; i < BENCH_GC_CLAIMED; i += BENCH_GC_NODES, k++) {
		snprintf(vols[k], sizeof(vols[k]), "vol-%07d", i);
		snprintf(ids[k], sizeof(ids[k]), "alloc-%d", i);
		allocs[k] = (struct model_node_alloc){vols[k], ids[k]};
	}
	bench_node(s, n, allocs, k);
}

/* Median milliseconds of a lost-claim pass with nothing to do. */
static double bench_gc(const char *dir)
{
	struct server_config cfg = {0};
	struct clock_fake clock;
	struct store *st = NULL;
	struct server *s = NULL;
	double t[BENCH_GC_PASSES];
	char db[300];
	struct err e;

	snprintf(db, sizeof(db), "%s/gc.db", dir);
	unlink(db);
	if (store_sqlite_open(db, &st, &e) != 0)
		bench_die("open store", e.msg);
	bench_gc_fill(st);
	clock_fake_init(&clock, 1000, 1700000000000LL);
	cfg.store = st;
	cfg.clock = &clock.base;
	cfg.controllers = (struct reconciler_controllers){bench_acquire, bench_release, NULL};
	cfg.manual_reconciler = true;
	cfg.node_ttl_ms = 3600 * 1000;
	if (server_new(&cfg, &s, &e) != 0)
		bench_die("server_new", e.msg);
	for (int r = 0; r < 2; r++) {
		for (int n = 0; n < BENCH_GC_NODES; n++)
			bench_gc_report(s, n);
		clock_fake_advance(&clock, 1000);
	}
	/* The first pass rebuilds the index (100,000 records decoded once). */
	clock_fake_advance(&clock, 60000);
	server_tick(s);
	for (int i = 0; i < BENCH_GC_PASSES; i++) {
		double t0;

		clock_fake_advance(&clock, 60000);
		t0 = bench_now();
		server_tick(s);
		t[i] = (bench_now() - t0) * 1e3;
	}
	server_free(s);
	store_close(st);
	clock_fake_destroy(&clock);
	unlink(db);
	qsort(t, BENCH_GC_PASSES, sizeof(*t), bench_cmp);
	return t[BENCH_GC_PASSES / 2];
}

int main(int argc, char **argv)
{
	const char *base = getenv("CSID_BENCH_DIR");
	int claims = argc > 1 ? atoi(argv[1]) : 400;
	char dir[256];
	double one, many;

	snprintf(dir, sizeof(dir), "%s/csid-bench-claims-XXXXXX", base ? base : "/tmp");
	if (claims < 10 || !mkdtemp(dir))
		bench_die("usage or temp dir", "bench_claims [claims >= 10]");
	one = bench_claims(dir, 1, claims);
	many = bench_claims(dir, 1000, claims);
	printf("claim, median of %d (SQLite, core call): 1 node %.0f us, 1,000 nodes %.0f us "
	       "(%+.1f%%; target within 10%%)\n",
	       claims, one, many, (many - one) / one * 100);
	printf("lost-claim pass, %d volumes, %d claimed on %d live reporting nodes, nothing to "
	       "do: median of %d %.2f ms (target <= 10 ms)\n",
	       BENCH_GC_VOLUMES, BENCH_GC_CLAIMED, BENCH_GC_NODES, BENCH_GC_PASSES, bench_gc(dir));
	rmdir(dir);
	return 0;
}
