/*
 * The node-derived view cache (rules in server_pcache.h). State: the view
 * and its arena, valid or not, and the store index up to which the change
 * log has been read since the view was built. A use reads the log's keys
 * (no values) after that index a page at a time; any node change, a compacted log, or more
 * than SERVER_PCACHE_SCAN changes to read invalidates the view (reading
 * that many changes costs about what a rebuild does). A rebuild notes the
 * store's index before it reads the nodes, so a node written while it
 * reads is seen again by the next use (one extra rebuild, never a stale
 * view).
 */
#include "server/server_pcache.h"

#include <pthread.h>
#include <stdlib.h>

#include "server/server.h"

/* Most changes a use reads before it rebuilds instead. */
#define SERVER_PCACHE_SCAN 1024

struct server_pcache {
	pthread_mutex_t mu;
	struct store *st;
	server_pcache_build_fn build;
	void *ctx;
	struct arena *a; /* the view's; NULL when there is none */
	void *view;
	uint64_t index; /* the change log is read up to here */
	unsigned long builds;
};

struct server_pcache *server_pcache_new(struct store *st, server_pcache_build_fn build, void *ctx)
{
	struct server_pcache *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	pthread_mutex_init(&c->mu, NULL);
	c->st = st;
	c->build = build;
	c->ctx = ctx;
	return c;
}

void server_pcache_free(struct server_pcache *c)
{
	if (!c)
		return;
	arena_free(c->a);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

/* Whether the view is still that of the stored nodes; advances c->index. */
static bool server_pcache_fresh(struct server_pcache *c)
{
	size_t seen = 0;

	if (!c->a)
		return false;
	while (seen < SERVER_PCACHE_SCAN) {
		struct store_changes ch = {0};
		struct err e;
		bool node = false;
		uint64_t at;
		size_t n;

		if (store_change_keys(c->st, c->index, 256, &ch, &e) != 0)
			return false;
		n = ch.n;
		at = ch.index;
		for (size_t i = 0; i < n && !node; i++)
			node = ch.changes[i].obj.kind == STORE_NODE;
		if (n)
			c->index = ch.changes[n - 1].index;
		store_changes_free(&ch);
		if (node)
			return false;
		/* Read up to the store's index as of this page: nothing more to see. */
		if (n == 0 || c->index >= at)
			return true;
		seen += n;
	}
	return false;
}

static int server_pcache_rebuild(struct server_pcache *c, struct err *e)
{
	struct arena *a = arena_new();
	struct model_node **nodes = NULL;
	uint64_t index = store_index(c->st);
	void *view = NULL;
	size_t n = 0;
	int rc;

	if (!a)
		return err_set(e, CSID_ENOMEM, "plugins view: out of memory");
	rc = server_store_nodes(c->st, a, &nodes, &n, NULL, e);
	if (!rc)
		rc = c->build(c->ctx, nodes, n, a, &view, e);
	if (rc) {
		arena_free(a);
		return rc;
	}
	arena_free(c->a);
	c->a = a;
	c->view = view;
	c->index = index;
	c->builds++;
	return 0;
}

int server_pcache_use(struct server_pcache *c, server_pcache_use_fn use, void *arg, struct err *e)
{
	int rc = 0;

	pthread_mutex_lock(&c->mu);
	if (!server_pcache_fresh(c))
		rc = server_pcache_rebuild(c, e);
	if (!rc)
		use(arg, c->view);
	pthread_mutex_unlock(&c->mu);
	return rc;
}

unsigned long server_pcache_builds(struct server_pcache *c)
{
	unsigned long n;

	pthread_mutex_lock(&c->mu);
	n = c->builds;
	pthread_mutex_unlock(&c->mu);
	return n;
}
