/*
 * Node plugin lookups (node_plugins.h). A lookup for the mounter keeps
 * its plugin_ref on the heap; the mounter_plugin's plugin_id points into
 * the ref's name, which is how the release finds it again.
 */
#include "agent/node_plugins.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

int node_plugins_known(const struct node_plugins *np, const char *plugin_id, struct err *e)
{
	struct registry_instance inst;
	struct supervisor_status *ss = NULL;
	const struct supervisor_status *s = NULL;
	size_t n = 0;
	int rc = 0;

	if (registry_active(np->registry, REGISTRY_NODE, plugin_id, &inst) == 0)
		return 0;
	if (np->supervisor && supervisor_snapshot(np->supervisor, &ss, &n) != 0)
		return err_set(e, CSID_ENOMEM, "out of memory");
	for (size_t i = 0; i < n && !s; i++)
		if (strcmp(ss[i].id, plugin_id) == 0)
			s = &ss[i];
	if (!s)
		rc = err_set(e, CSID_ENOTFOUND, "plugin %s: no such node plugin on this node",
			     plugin_id);
	else if (s->type == CONFIG_PLUGIN_CONTROLLER)
		rc = err_set(e, CSID_EINVAL, "plugin %s is a controller plugin, not a node plugin",
			     plugin_id);
	free(ss);
	return rc;
}

int node_plugins_ref(const struct node_plugins *np, const char *plugin_id, struct plugin_ref *ref,
		     struct err *e)
{
	int rc = node_plugins_known(np, plugin_id, e);

	if (rc)
		return rc;
	rc = plugin_manager_wait_for_plugin(np->plugins, REGISTRY_NODE, plugin_id, np->wait_ms,
					    NULL, e);
	if (rc == CSID_ETIMEDOUT) {
		e->code = CSID_EUNAVAIL;
		return err_wrap(e, "node plugin %s not healthy after %lldms", plugin_id,
				(long long)np->wait_ms);
	}
	if (rc)
		return rc;
	return plugin_manager_mounter_for_plugin(np->plugins, plugin_id, ref, e);
}

int node_plugins_lookup(void *ctx, const char *plugin_id, struct mounter_plugin *out, struct err *e)
{
	/* Not zeroed: plugin_manager_ref fills all of it; only what a failure releases is set. */
	struct plugin_ref *ref = malloc(sizeof(*ref));
	int rc;

	if (!ref)
		return err_set(e, CSID_ENOMEM, "out of memory");
	ref->conn_ = NULL;
	if ((rc = node_plugins_ref(ctx, plugin_id, ref, e))) {
		plugin_ref_release(ref);
		free(ref);
		return rc;
	}
	out->plugin_id = ref->name;
	out->client = ref->client;
	out->has_stage_unstage = ref->fingerprint.stage_unstage;
	out->has_node_expand = ref->fingerprint.node_expand;
	return 0;
}

void node_plugins_release(void *ctx, struct mounter_plugin *p)
{
	struct plugin_ref *ref;

	(void)ctx;
	if (!p || !p->plugin_id)
		return;
	ref =
	    (struct plugin_ref *)(void *)((char *)p->plugin_id - offsetof(struct plugin_ref, name));
	plugin_ref_release(ref);
	free(ref);
	p->plugin_id = NULL;
}
