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

#define BENCH_PLUGIN "bench.csi.csid.dev"

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

static void bench_node(struct server *s, int i)
{
	struct model_node n = {0};
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
	n.id = id;
	n.plugins = &p;
	n.nplugins = 1;
	a = arena_new();
	if (!a || server_node_put(s, &n, a, NULL, &e) != 0)
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
		bench_node(s, i);
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
	rmdir(dir);
	return 0;
}
