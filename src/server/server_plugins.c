/*
 * The plugins view and schedulability. Plugins are not stored: the view
 * is derived on each call from the node records (each lists the node and
 * controller plugins it runs, with health, version and capabilities) and
 * from the server's own controller plugins (local_controllers). A plugin
 * on a node that is down counts as unhealthy. A controller is required
 * when one advertises PUBLISH_UNPUBLISH_VOLUME.
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
#define SERVER_CAP_PUBLISH "PUBLISH_UNPUBLISH_VOLUME"

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

/* Every plugin instance the nodes and this server report, sorted by plugin ID. */
static int server_seen_collect(struct server *s, struct arena *a, struct server_seen **out,
			       size_t *n, struct err *e)
{
	struct server_local_controller *local = NULL;
	struct model_node **nodes = NULL;
	struct server_seen *seen;
	size_t nnodes = 0, nlocal = 0, total = 0;
	int rc = server_all_nodes(s, a, &nodes, &nnodes, NULL, e);

	if (rc)
		return rc;
	if (s->cfg.local_controllers) {
		local = arena_alloc(a, SERVER_LOCAL_CONTROLLERS_MAX * sizeof(*local));
		if (!local)
			return err_set(e, CSID_ENOMEM, "plugins: out of memory");
		nlocal = s->cfg.local_controllers(s->cfg.local_controllers_ctx, local,
						  SERVER_LOCAL_CONTROLLERS_MAX, a);
	}
	for (size_t i = 0; i < nnodes; i++)
		total += nodes[i]->nplugins;
	seen = arena_alloc(a, (total + nlocal + 1) * sizeof(*seen));
	if (!seen)
		return err_set(e, CSID_ENOMEM, "plugins: out of memory");
	total = 0;
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

int server_plugins_collect(struct server *s, struct arena *a, struct server_plugin **out, size_t *n,
			   struct err *e)
{
	struct server_seen *seen = NULL;
	struct server_plugin *plugins;
	size_t nseen = 0, count = 0;
	int rc = server_seen_collect(s, a, &seen, &nseen, e);

	*out = NULL;
	*n = 0;
	if (rc)
		return err_wrap(e, "plugins");
	plugins = arena_alloc(a, (nseen + 1) * sizeof(*plugins));
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
	v->schedulable = v->plugin_health && strcmp(v->plugin_health, "healthy") == 0;
	memset(&v->status, 0, sizeof(v->status));
	reconciler_status(s->rec, STORE_VOLUME, v->id, a, &v->status);
}
