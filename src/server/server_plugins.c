/*
 * The plugins view and schedulability. Plugins are not stored: the view
 * is derived on each call from the node records (each lists the node and
 * controller plugins it runs, with health, version and capabilities) and
 * from the server's own controller plugins (local_controllers). A plugin
 * on a node that is down counts as unhealthy. A controller is required
 * when one advertises PUBLISH_UNPUBLISH_VOLUME.
 *
 * The node records' part of the view is cached (server_pcache.h): the
 * summary of counts that claims, volume reads and lists need
 * (server_plugins_summary) decodes no node record unless one changed.
 * The full view (instances, capabilities, versions) is built afresh.
 *
 * A volume is schedulable while its plugin is healthy: a healthy
 * controller if one is required, and a healthy node plugin somewhere (the
 * claim checks the claiming node itself, server_claim_env).
 */
#include "server/server_int.h"

#include <stdlib.h>
#include <string.h>

#include "plugins/instance_manager.h"

#define SERVER_LOCAL_CONTROLLERS_MAX 256
#define SERVER_LOCAL_CONTROLLERS_FEW 16
#define SERVER_CAP_PUBLISH "PUBLISH_UNPUBLISH_VOLUME"
#define SERVER_CAP_PUBLISH_BIT \
	((uint64_t)1 << CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_UNPUBLISH_VOLUME)

/* One plugin instance seen on a node or on this server, before grouping. */
struct server_seen {
	const char *plugin_id;
	struct server_plugin_instance inst;
	char **caps;
	size_t ncaps;
};

static int server_seen_cmp(const void *pa, const void *pb)
{
	const struct server_seen *a = pa, *b = pb;
	int c = strcmp(a->plugin_id, b->plugin_id);

	if (c)
		return c;
	if (!a->inst.node_id || !b->inst.node_id)
		return !a->inst.node_id ? (b->inst.node_id ? -1 : 0) : 1;
	c = strcmp(a->inst.node_id, b->inst.node_id);
	return c ? c : (int)a->inst.type - (int)b->inst.type;
}

/* Adds s to the set list[0..*n) unless there (list has room for every string). */
static void server_set_add(char **list, size_t *n, char *s)
{
	if (!s || !s[0])
		return;
	for (size_t i = 0; i < *n; i++)
		if (strcmp(list[i], s) == 0)
			return;
	list[(*n)++] = s;
}

/* The local controllers' capability bits as names (in a). */
static int server_local_caps(uint64_t bits, struct arena *a, char ***out, size_t *n)
{
	size_t count = 0;

	*out = arena_alloc(a, 64 * sizeof(**out));
	if (!*out)
		return CSID_ENOMEM;
	for (int bit = 0; bit < 64; bit++) {
		const char *name;

		/* Bits this program has no name for are left out, not shown as UNKNOWN. */
		if (!(bits & ((uint64_t)1 << bit)) || !(name = plugin_controller_cap_name(bit)) ||
		    strcmp(name, "UNKNOWN") == 0)
			continue;
		if (!((*out)[count++] = arena_strdup(a, name)))
			return CSID_ENOMEM;
	}
	*n = count;
	return 0;
}

/* The plugin instances of nodes[0..nnodes), at seen[0..): returns how many. */
static size_t server_seen_nodes(struct model_node *const *nodes, size_t nnodes,
				struct server_seen *seen)
{
	size_t total = 0;

	for (size_t i = 0; i < nnodes; i++) {
		bool up = nodes[i]->status == MODEL_NODE_READY;

		for (size_t j = 0; j < nodes[i]->nplugins; j++) {
			const struct model_node_plugin *p = &nodes[i]->plugins[j];
			struct server_seen *x = &seen[total++];

			x->plugin_id = p->plugin_id;
			x->inst.node_id = nodes[i]->id;
			x->inst.type = p->type;
			x->inst.healthy = up && p->healthy;
			x->inst.health = up ? p->health : "node down";
			x->inst.version = p->version;
			x->caps = p->caps;
			x->ncaps = p->ncaps;
		}
	}
	return total;
}

/* The server's own controllers, at *out (in a); *n how many. */
static int server_local_list(struct server *s, struct arena *a,
			     struct server_local_controller **out, size_t *n, struct err *e)
{
	*out = NULL;
	*n = 0;
	if (!s->cfg.local_controllers)
		return 0;
	/*
	 * A server hosts a few controllers: a small table first, the full one
	 * only when that one fills up (each claim asks, and zeroing the full
	 * table cost more than the rest of the summary).
	 */
	for (size_t cap = SERVER_LOCAL_CONTROLLERS_FEW;; cap = SERVER_LOCAL_CONTROLLERS_MAX) {
		*out = arena_alloc(a, cap * sizeof(**out));
		if (!*out)
			return err_set(e, CSID_ENOMEM, "plugins: out of memory");
		*n = s->cfg.local_controllers(s->cfg.local_controllers_ctx, *out, cap, a);
		if (*n < cap || cap == SERVER_LOCAL_CONTROLLERS_MAX)
			return 0;
	}
}

/* Every plugin instance the nodes and this server report, sorted by plugin ID. */
static int server_seen_collect(struct server *s, struct arena *a, struct server_seen **out,
			       size_t *n, struct err *e)
{
	struct server_local_controller *local = NULL;
	struct model_node **nodes = NULL;
	struct server_seen *seen;
	size_t nnodes = 0, nlocal = 0, total = 0;
	int rc = server_all_nodes(s, a, &nodes, &nnodes, NULL, e);

	if (!rc)
		rc = server_local_list(s, a, &local, &nlocal, e);
	if (rc)
		return rc;
	for (size_t i = 0; i < nnodes; i++)
		total += nodes[i]->nplugins;
	seen = arena_alloc(a, (total + nlocal + 1) * sizeof(*seen));
	if (!seen)
		return err_set(e, CSID_ENOMEM, "plugins: out of memory");
	total = server_seen_nodes(nodes, nnodes, seen);
	for (size_t i = 0; i < nlocal; i++) {
		struct server_seen *x = &seen[total++];

		x->plugin_id = local[i].plugin_id;
		x->inst.type = MODEL_PLUGIN_CONTROLLER;
		x->inst.healthy = local[i].healthy;
		x->inst.health = arena_strdup(a, local[i].health);
		x->inst.version = arena_strdup(a, local[i].version);
		if (server_local_caps(local[i].controller_caps, a, &x->caps, &x->ncaps))
			return err_set(e, CSID_ENOMEM, "plugins: out of memory");
	}
	qsort(seen, total, sizeof(*seen), server_seen_cmp);
	*out = seen;
	*n = total;
	return 0;
}

/* Fills p from the instances seen[0..n) of one plugin. */
static int server_plugin_group(struct server_plugin *p, const struct server_seen *seen, size_t n,
			       struct arena *a)
{
	size_t ncaps = 0;

	for (size_t i = 0; i < n; i++)
		ncaps += seen[i].ncaps;
	p->id = (char *)seen[0].plugin_id;
	p->instances = arena_alloc(a, n * sizeof(*p->instances));
	p->versions = arena_alloc(a, n * sizeof(*p->versions));
	p->controller_caps = arena_alloc(a, (ncaps + 1) * sizeof(*p->controller_caps));
	p->node_caps = arena_alloc(a, (ncaps + 1) * sizeof(*p->node_caps));
	if (!p->instances || !p->versions || !p->controller_caps || !p->node_caps)
		return CSID_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct server_seen *x = &seen[i];
		bool ctl = x->inst.type == MODEL_PLUGIN_CONTROLLER;

		p->instances[p->ninstances++] = x->inst;
		server_set_add(p->versions, &p->nversions, x->inst.version);
		if (ctl) {
			p->controllers_expected++;
			p->controllers_healthy += x->inst.healthy;
			p->controllers_unknown += !x->inst.healthy && x->ncaps == 0;
		} else {
			p->nodes_expected++;
			p->nodes_healthy += x->inst.healthy;
		}
		for (size_t j = 0; j < x->ncaps; j++) {
			if (ctl)
				server_set_add(p->controller_caps, &p->ncontroller_caps,
					       x->caps[j]);
			else
				server_set_add(p->node_caps, &p->nnode_caps, x->caps[j]);
			if (ctl && strcmp(x->caps[j], SERVER_CAP_PUBLISH) == 0)
				p->controller_required = true;
		}
	}
	return 0;
}

/* Groups the sorted instances seen[0..nseen) by plugin into *out (in a). */
static int server_plugins_group(const struct server_seen *seen, size_t nseen, struct arena *a,
				struct server_plugin **out, size_t *n, struct err *e)
{
	struct server_plugin *plugins = arena_alloc(a, (nseen + 1) * sizeof(*plugins));
	size_t count = 0;

	*out = NULL;
	*n = 0;
	if (!plugins)
		return err_set(e, CSID_ENOMEM, "plugins: out of memory");
	for (size_t i = 0, j; i < nseen; i = j) {
		for (j = i + 1; j < nseen && strcmp(seen[j].plugin_id, seen[i].plugin_id) == 0; j++)
			;
		if (server_plugin_group(&plugins[count++], &seen[i], j - i, a))
			return err_set(e, CSID_ENOMEM, "plugins: out of memory");
	}
	*out = plugins;
	*n = count;
	return 0;
}

int server_plugins_collect(struct server *s, struct arena *a, struct server_plugin **out, size_t *n,
			   struct err *e)
{
	struct server_seen *seen = NULL;
	size_t nseen = 0;
	int rc = server_seen_collect(s, a, &seen, &nseen, e);

	*out = NULL;
	*n = 0;
	if (rc)
		return err_wrap(e, "plugins");
	return server_plugins_group(seen, nseen, a, out, n, e);
}

/* The cached view: the plugins of the node records only, and the records by ID. */
struct server_nodes_view {
	struct server_plugin *plugins;
	size_t n;
	int nodes_ready, nodes_down; /* by the records' status */
	struct model_node **byid; /* the decoded records (in the cache's arena), sorted by ID */
	size_t nnodes;
};

static int server_node_id_cmp(const void *a, const void *b)
{
	return strcmp((*(struct model_node *const *)a)->id, (*(struct model_node *const *)b)->id);
}

int server_plugins_build(void *ctx, struct model_node *const *nodes, size_t n, struct arena *a,
			 void **view, struct err *e)
{
	struct server_nodes_view *v = arena_alloc(a, sizeof(*v));
	struct server_seen *seen;
	size_t total = 0;

	(void)ctx;
	for (size_t i = 0; i < n; i++)
		total += nodes[i]->nplugins;
	seen = arena_alloc(a, (total + 1) * sizeof(*seen));
	if (v)
		v->byid = arena_alloc(a, (n + 1) * sizeof(*v->byid));
	if (!v || !seen || !v->byid)
		return err_set(e, CSID_ENOMEM, "plugins view: out of memory");
	/* No node yet: nodes may be NULL. */
	if (n) {
		memcpy(v->byid, nodes, n * sizeof(*v->byid));
		qsort(v->byid, n, sizeof(*v->byid), server_node_id_cmp);
	}
	v->nnodes = n;
	total = server_seen_nodes(nodes, n, seen);
	qsort(seen, total, sizeof(*seen), server_seen_cmp);
	v->nodes_ready = v->nodes_down = 0;
	for (size_t i = 0; i < n; i++) {
		if (nodes[i]->status == MODEL_NODE_DOWN)
			v->nodes_down++;
		else
			v->nodes_ready++;
	}
	*view = v;
	return server_plugins_group(seen, total, a, &v->plugins, &v->n, e);
}

static void server_node_counts_use(void *arg, const void *view)
{
	const struct server_nodes_view *v = view;
	int *counts = arg;

	counts[0] = v->nodes_ready;
	counts[1] = v->nodes_down;
}

/* What server_plugins_node_use runs under the cache's lock. */
struct server_node_use {
	const char *id;
	server_node_use_fn use;
	void *arg;
};

static void server_node_use_view(void *arg, const void *view)
{
	const struct server_nodes_view *v = view;
	struct server_node_use *u = arg;
	struct model_node key = {.id = (char *)u->id}, *kp = &key;
	struct model_node **found =
	    bsearch(&kp, v->byid, v->nnodes, sizeof(*v->byid), server_node_id_cmp);

	u->use(u->arg, found ? *found : NULL);
}

int server_plugins_node_use(struct server *s, const char *id, server_node_use_fn use, void *arg,
			    struct err *e)
{
	struct server_node_use u = {.id = id, .use = use, .arg = arg};

	return server_pcache_use(s->pcache, server_node_use_view, &u, e);
}

int server_plugins_node_counts(struct server *s, int *ready, int *down, struct err *e)
{
	int counts[2] = {0, 0};
	int rc = server_pcache_use(s->pcache, server_node_counts_use, counts, e);

	*ready = counts[0];
	*down = counts[1];
	return rc ? err_wrap(e, "node counts") : 0;
}

/* Copying the cached counts out (under the cache's lock). */
struct server_summary_copy {
	struct arena *a;
	struct server_plugin *out;
	size_t n, cap;
	bool nomem;
};

/* The counts of p, without its lists (id in a). */
static void server_summary_add(struct server_summary_copy *c, const struct server_plugin *p)
{
	struct server_plugin *q = &c->out[c->n];

	memset(q, 0, sizeof(*q));
	q->id = arena_strdup(c->a, p->id);
	q->controller_required = p->controller_required;
	q->controllers_healthy = p->controllers_healthy;
	q->controllers_expected = p->controllers_expected;
	q->controllers_unknown = p->controllers_unknown;
	q->nodes_healthy = p->nodes_healthy;
	q->nodes_expected = p->nodes_expected;
	c->nomem |= q->id == NULL;
	c->n++;
}

static void server_summary_use(void *arg, const void *view)
{
	struct server_summary_copy *c = arg;
	const struct server_nodes_view *v = view;

	c->out = arena_alloc(c->a, (v->n + c->cap + 1) * sizeof(*c->out));
	if (!c->out) {
		c->nomem = true;
		return;
	}
	for (size_t i = 0; i < v->n; i++)
		server_summary_add(c, &v->plugins[i]);
}

int server_plugins_summary(struct server *s, struct arena *a, struct server_plugin **out, size_t *n,
			   struct err *e)
{
	struct server_local_controller *local = NULL;
	struct server_summary_copy c = {.a = a};
	size_t nlocal = 0;
	int rc = server_local_list(s, a, &local, &nlocal, e);

	*out = NULL;
	*n = 0;
	c.cap = nlocal;
	if (!rc)
		rc = server_pcache_use(s->pcache, server_summary_use, &c, e);
	if (rc)
		return err_wrap(e, "plugins");
	if (c.nomem)
		return err_set(e, CSID_ENOMEM, "plugins: out of memory");
	for (size_t i = 0; i < nlocal; i++) {
		struct server_plugin *p =
		    (struct server_plugin *)server_plugin_find(c.out, c.n, local[i].plugin_id);
		bool healthy = local[i].healthy;

		if (!p) {
			p = &c.out[c.n++];
			memset(p, 0, sizeof(*p));
			if (!(p->id = arena_strdup(a, local[i].plugin_id)))
				return err_set(e, CSID_ENOMEM, "plugins: out of memory");
		}
		p->controllers_expected++;
		p->controllers_healthy += healthy;
		p->controllers_unknown += !healthy && local[i].controller_caps == 0;
		if (local[i].controller_caps & SERVER_CAP_PUBLISH_BIT)
			p->controller_required = true;
	}
	*out = c.out;
	*n = c.n;
	return 0;
}

const struct server_plugin *server_plugin_find(const struct server_plugin *p, size_t n,
					       const char *id)
{
	for (size_t i = 0; id && i < n; i++)
		if (strcmp(p[i].id, id) == 0)
			return &p[i];
	return NULL;
}

int server_plugin_list(struct server *s, struct arena *a, struct server_plugin **out, size_t *n,
		       struct err *e)
{
	return server_plugins_collect(s, a, out, n, e);
}

int server_plugin_get(struct server *s, const char *id, struct arena *a, struct server_plugin **out,
		      struct err *e)
{
	struct server_plugin *all = NULL;
	size_t n = 0;
	int rc = server_plugins_collect(s, a, &all, &n, e);

	*out = NULL;
	if (rc)
		return rc;
	*out = (struct server_plugin *)server_plugin_find(all, n, id);
	if (!*out)
		return err_set(e, CSID_ENOTFOUND, "plugin %.128s not found", id);
	return 0;
}

/* "healthy", or why v's plugin is not (in a; NULL when out of memory). */
static char *server_plugin_health(const struct server_plugin *p, const char *plugin_id,
				  struct arena *a)
{
	if (!p)
		return arena_printf(a, "plugin %s: no controller nor node plugin registered",
				    plugin_id);
	if (p->controller_required && p->controllers_healthy == 0)
		return arena_printf(a, "plugin %s: no healthy controller (%d expected)", plugin_id,
				    p->controllers_expected);
	if (p->nodes_healthy == 0)
		return arena_printf(a, "plugin %s: no healthy node plugin (%d expected)", plugin_id,
				    p->nodes_expected);
	return arena_strdup(a, "healthy");
}

void server_volume_fill(struct server *s, struct model_volume *v, const struct server_plugin *p,
			size_t n, struct arena *a)
{
	const struct server_plugin *plugin = server_plugin_find(p, n, v->plugin_id);

	v->plugin_health = server_plugin_health(plugin, v->plugin_id, a);
	v->plugin_registered = plugin != NULL;
	v->schedulable = v->plugin_health && strcmp(v->plugin_health, "healthy") == 0;
	memset(&v->status, 0, sizeof(v->status));
	server_status_get(s, STORE_VOLUME, v->id, a, &v->status);
}
