/*
 * The node plugins a mount goes through: a plugin ID is looked up in the
 * registry (registered instances) and the supervisor (configured ones,
 * maybe still starting), waited for until healthy (bounded), and a
 * counted reference on its client is taken from the plugin manager. The
 * agent's low-level mounts and the claim flow (agent/claims.h, through
 * node_plugins_lookup) share it. Every function is thread-safe; the
 * struct is borrowed and its members outlive every call.
 */
#ifndef CSID_AGENT_NODE_PLUGINS_H
#define CSID_AGENT_NODE_PLUGINS_H

#include <stdint.h>

#include "agent/mounter.h"
#include "plugins/plugin_manager.h"
#include "plugins/registry.h"
#include "plugins/supervisor.h"
#include "util/err.h"

struct node_plugins {
	struct plugin_manager *plugins; /* required */
	struct registry *registry; /* required */
	struct supervisor *supervisor; /* NULL: only registered plugins are known */
	int64_t wait_ms; /* how long a plugin is waited for to become healthy */
};

/*
 * Whether plugin_id is known here as a node plugin (registered, or
 * configured). Returns 0, CSID_ENOTFOUND (no such node plugin) or
 * CSID_EINVAL (a controller plugin), with e set.
 */
int node_plugins_known(const struct node_plugins *np, const char *plugin_id, struct err *e);

/*
 * Waits (wait_ms) for the known node plugin plugin_id to be healthy and
 * takes a reference on its client (release with plugin_ref_release).
 * Returns 0, node_plugins_known's codes, or CSID_EUNAVAIL ("not healthy
 * after ...") with e set.
 */
int node_plugins_ref(const struct node_plugins *np, const char *plugin_id, struct plugin_ref *ref,
		     struct err *e);

/*
 * mounter_lookup_fn over node_plugins_ref (ctx: a struct node_plugins):
 * out holds a reference until node_plugins_release (a mounter_release_fn).
 */
int node_plugins_lookup(void *ctx, const char *plugin_id, struct mounter_plugin *out,
			struct err *e);
void node_plugins_release(void *ctx, struct mounter_plugin *p);

#endif
