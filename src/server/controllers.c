/*
 * Host controller plugins (controllers.h): supervisor -> in-memory
 * registry -> plugin manager, as the agent wires them, plus a table of
 * shared gRPC clients for the reconciler.
 *
 * Client table: one entry per (plugin, endpoint) handed out, with a hold
 * count. acquire() looks the plugin up in the plugin manager's snapshot
 * (healthy, fingerprinted, its active instance's endpoint), reuses the
 * entry of that endpoint or opens a client for it; an entry whose
 * endpoint is no longer the plugin's active one is retired and freed when
 * its last holder releases it, so a restarted plugin is reached on its
 * new socket while RPCs in flight finish on the old client.
 */
#include "server/controllers.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/plugin_manager.h"
#include "plugins/registry.h"
#include "plugins/supervisor.h"
#include "util/array.h"
#include "util/log.h"

struct controllers_client {
	char plugin_id[REGISTRY_NAME_MAX];
	char endpoint[REGISTRY_ENDPOINT_MAX];
	struct csi_client *client;
	int holds;
	bool retired; /* no longer the active endpoint: freed at the last release */
};

struct controllers {
	struct registry *registry;
	struct supervisor *sv;
	struct plugin_manager *pm;
	struct config_plugin *plugins; /* the configuration, for controllers_local */
	size_t nplugins;

	pthread_mutex_t mu; /* guards clients */
	struct controllers_client *clients;
	size_t nclients, clients_cap;
};

static void controllers_on_health(void *ctx, const struct instance_manager_status *old,
				  const struct instance_manager_status *cur)
{
	char q[600];

	if (old->health.healthy == cur->health.healthy && old->state == cur->state)
		return;
	log_info("msg=\"controller plugin health\" plugin=%s instance=%s state=%s healthy=%d "
		 "description=%s",
		 cur->name, cur->instance.instance_id, instance_manager_state_name(cur->state),
		 cur->health.healthy, log_q(q, sizeof(q), cur->health.description));
}

int controllers_new(const struct controllers_config *cfg, struct controllers **out, struct err *e)
{
	struct plugin_manager_config pc = {0};
	struct supervisor_config sc = {0};
	struct controllers *c;
	int rc;

	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return err_set(e, CSID_ENOMEM, "controllers: out of memory");
	pthread_mutex_init(&c->mu, NULL);
	if (cfg->nplugins && !(c->plugins = calloc(cfg->nplugins, sizeof(*c->plugins)))) {
		rc = err_set(e, CSID_ENOMEM, "controllers: out of memory");
		goto fail;
	}
	for (; c->nplugins < cfg->nplugins; c->nplugins++)
		if (config_plugin_copy(&c->plugins[c->nplugins], &cfg->plugins[c->nplugins])) {
			rc = err_set(e, CSID_ENOMEM, "controllers: out of memory");
			goto fail;
		}
	if ((rc = registry_new(clock_real(), NULL, &c->registry, e)))
		goto fail;
	sc.loop = cfg->loop;
	sc.data_dir = cfg->data_dir;
	sc.node_name = "server";
	sc.registry = c->registry;
	if ((rc = supervisor_new(&sc, &c->sv, e)))
		goto fail;
	rc = supervisor_cleanup_stale(c->sv);
	if (rc > 0)
		log_info("msg=\"controller plugins left by a previous server stopped\" count=%d",
			 rc);
	pc.registry = c->registry;
	pc.on_health = controllers_on_health;
	pc.rpc_timeout_ms = cfg->rpc_timeout_ms;
	if ((rc = plugin_manager_new(&pc, &c->pm, e)) || (rc = plugin_manager_start(c->pm, e)) ||
	    (rc = supervisor_apply(c->sv, c->plugins, c->nplugins, e)))
		goto fail;
	*out = c;
	return 0;
fail:
	err_wrap(e, "controller plugins");
	controllers_free(c);
	return rc;
}

/* The managed controller plugin id, healthy and fingerprinted, from a snapshot. */
static bool controllers_configured(const struct controllers *c, const char *plugin_id)
{
	for (size_t i = 0; i < c->nplugins; i++)
		if (strcmp(c->plugins[i].id, plugin_id) == 0)
			return true;
	return false;
}

static int controllers_find(struct controllers *c, const char *plugin_id, char *endpoint,
			    uint64_t *caps, struct err *e)
{
	struct plugin_manager_snapshot snap = {0};
	const struct plugin_manager_plugin *p = NULL;
	int rc = plugin_manager_snapshot(c->pm, &snap, e);

	if (rc)
		return rc;
	for (size_t i = 0; i < snap.nplugins; i++)
		if (snap.plugins[i].type == REGISTRY_CONTROLLER &&
		    strcmp(snap.plugins[i].name, plugin_id) == 0)
			p = &snap.plugins[i];
	if (!p && controllers_configured(c, plugin_id))
		/* Configured, not registered yet (just started, or restarting): wait for it. */
		rc = err_set(e, CSID_EUNAVAIL, "controller plugin %s: not registered yet",
			     plugin_id);
	else if (!p)
		rc =
		    err_set(e, CSID_ENOTFOUND, "no controller plugin %s on this server", plugin_id);
	else if (!p->managed || p->status.state != INSTANCE_MANAGER_RUNNING ||
		 !p->status.health.healthy)
		rc = err_set(e, CSID_EUNAVAIL, "no healthy controller for plugin %s: %s (%s)",
			     plugin_id, instance_manager_state_name(p->status.state),
			     p->status.health.description);
	else {
		snprintf(endpoint, REGISTRY_ENDPOINT_MAX, "%s", p->status.instance.endpoint);
		*caps = p->status.fingerprint.controller_caps;
	}
	plugin_manager_snapshot_free(&snap);
	return rc;
}

/* Frees the retired entries nobody holds; c->mu held. */
static void controllers_reap(struct controllers *c)
{
	for (size_t i = 0; i < c->nclients;) {
		struct controllers_client *cl = &c->clients[i];

		if (!cl->retired || cl->holds) {
			i++;
			continue;
		}
		csi_client_free(cl->client);
		c->clients[i] = c->clients[--c->nclients];
	}
}

/*
 * The entry of (plugin_id, endpoint) with one more hold, retiring the
 * plugin's entries of other endpoints; adds fresh (taking it, *fresh set
 * NULL) when there is none. NULL when there is none and fresh is NULL or
 * memory ran out. c->mu held.
 */
static struct controllers_client *controllers_take(struct controllers *c, const char *plugin_id,
						   const char *endpoint, struct csi_client **fresh)
{
	struct controllers_client *hit = NULL;

	for (size_t i = 0; i < c->nclients; i++) {
		struct controllers_client *cl = &c->clients[i];

		if (strcmp(cl->plugin_id, plugin_id) != 0 || cl->retired)
			continue;
		if (strcmp(cl->endpoint, endpoint) == 0)
			hit = cl;
		else
			cl->retired = true;
	}
	controllers_reap(c);
	if (!hit && *fresh &&
	    array_grow((void **)&c->clients, &c->clients_cap, c->nclients + 1,
		       sizeof(*c->clients)) == 0) {
		hit = &c->clients[c->nclients++];
		memset(hit, 0, sizeof(*hit));
		snprintf(hit->plugin_id, sizeof(hit->plugin_id), "%s", plugin_id);
		snprintf(hit->endpoint, sizeof(hit->endpoint), "%s", endpoint);
		hit->client = *fresh;
		*fresh = NULL;
	}
	if (hit)
		hit->holds++;
	return hit;
}

static int controllers_acquire(void *ctx, const char *plugin_id, struct csi_client **client,
			       uint64_t *controller_caps, struct err *e)
{
	struct controllers *c = ctx;
	char endpoint[REGISTRY_ENDPOINT_MAX];
	struct controllers_client *hit;
	struct csi_client *fresh = NULL;
	int rc = controllers_find(c, plugin_id, endpoint, controller_caps, e);

	*client = NULL;
	if (rc)
		return rc;
	pthread_mutex_lock(&c->mu);
	hit = controllers_take(c, plugin_id, endpoint, &fresh);
	if (hit)
		*client = hit->client;
	pthread_mutex_unlock(&c->mu);
	if (*client)
		return 0;
	rc = csi_client_grpc_new(endpoint, &fresh, e);
	if (rc)
		return err_wrap(e, "controller plugin %s", plugin_id);
	pthread_mutex_lock(&c->mu);
	hit = controllers_take(c, plugin_id, endpoint, &fresh);
	if (hit)
		*client = hit->client;
	pthread_mutex_unlock(&c->mu);
	/* Another thread added the endpoint meanwhile: its client serves; ours goes. */
	csi_client_free(fresh);
	if (!*client)
		return err_set(e, CSID_ENOMEM, "controller plugin %s: out of memory", plugin_id);
	return 0;
}

static void controllers_release(void *ctx, const char *plugin_id, struct csi_client *client)
{
	struct controllers *c = ctx;

	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < c->nclients; i++)
		if (c->clients[i].client == client && c->clients[i].holds > 0) {
			c->clients[i].holds--;
			break;
		}
	controllers_reap(c);
	pthread_mutex_unlock(&c->mu);
}

struct reconciler_controllers controllers_seam(struct controllers *c)
{
	struct reconciler_controllers seam = {
	    .acquire = controllers_acquire, .release = controllers_release, .ctx = c};

	return seam;
}

/* Fills one entry from the plugin manager's view of the plugin, if it has one. */
static bool controllers_local_managed(const struct plugin_manager_snapshot *snap, const char *id,
				      struct server_local_controller *o, struct arena *a)
{
	for (size_t i = 0; i < snap->nplugins; i++) {
		const struct plugin_manager_plugin *p = &snap->plugins[i];

		if (p->type != REGISTRY_CONTROLLER || strcmp(p->name, id) != 0 || !p->managed)
			continue;
		o->healthy =
		    p->status.state == INSTANCE_MANAGER_RUNNING && p->status.health.healthy;
		o->health = arena_strdup(a, p->status.health.description[0]
						? p->status.health.description
						: instance_manager_state_name(p->status.state));
		o->version = arena_strdup(a, p->status.fingerprint.vendor_version);
		o->controller_caps = p->status.fingerprint.controller_caps;
		return true;
	}
	return false;
}

size_t controllers_local(void *ctx, struct server_local_controller *out, size_t cap,
			 struct arena *a)
{
	struct controllers *c = ctx;
	struct plugin_manager_snapshot snap = {0};
	struct supervisor_status *sv = NULL;
	size_t nsv = 0, n = 0;

	if (plugin_manager_snapshot(c->pm, &snap, NULL) != 0)
		return 0;
	if (supervisor_snapshot(c->sv, &sv, &nsv) != 0)
		nsv = 0;
	for (size_t i = 0; i < c->nplugins && n < cap; i++) {
		struct server_local_controller *o = &out[n++];
		const char *id = c->plugins[i].id;

		memset(o, 0, sizeof(*o));
		o->plugin_id = arena_strdup(a, id);
		if (controllers_local_managed(&snap, id, o, a))
			continue;
		o->health = "not registered yet";
		for (size_t j = 0; j < nsv; j++)
			if (strcmp(sv[j].id, id) == 0 && sv[j].message[0])
				o->health = arena_printf(a, "not registered yet: %s (%s)",
							 sv[j].message, sv[j].state);
	}
	free(sv);
	plugin_manager_snapshot_free(&snap);
	return n;
}

int controllers_shutdown(struct controllers *c, void (*done)(void *ctx), void *ctx, struct err *e)
{
	plugin_manager_shutdown(c->pm);
	return supervisor_shutdown(c->sv, done, ctx);
}

void controllers_free(struct controllers *c)
{
	if (!c)
		return;
	plugin_manager_free(c->pm);
	supervisor_free(c->sv);
	registry_free(c->registry);
	for (size_t i = 0; i < c->nclients; i++)
		csi_client_free(c->clients[i].client);
	free(c->clients);
	for (size_t i = 0; i < c->nplugins; i++)
		config_plugin_clear(&c->plugins[i]);
	free(c->plugins);
	pthread_mutex_destroy(&c->mu);
	free(c);
}
