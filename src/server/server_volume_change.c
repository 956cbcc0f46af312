/*
 * Changes asked of a volume: expand it (refused at once when its plugin
 * lacks EXPAND_VOLUME where that is known), a node's report that its
 * NodeExpandVolume is done, modify its mutable parameters, and cancel a
 * change still pending. Like the writes of server_volumes.c, each is a
 * callback of the compare-and-set loop (server_volume_update); the
 * reconciler makes the plugin calls.
 */
#include "server/server_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether caps[0..n) names EXPAND_VOLUME. */
static bool server_caps_expand(char *const *caps, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(caps[i], "EXPAND_VOLUME") == 0)
			return true;
	return false;
}

/*
 * Why plugin_id cannot expand a volume, as far as the plugins view knows
 * (in scratch), or NULL when it can or nothing is known yet: controllers
 * that reported their capabilities without EXPAND_VOLUME, or a plugin
 * seen only as node plugins none of which offers EXPAND_VOLUME. A plugin
 * no one offers yet, or whose controllers have not been fingerprinted, is
 * let through: the reconciler then says what it waits for, and the
 * operator can cancel (server_volume_cancel).
 */
static char *server_expand_lacks(struct server *s, const char *plugin_id, struct arena *scratch)
{
	struct server_plugin *all = NULL;
	const struct server_plugin *p;
	size_t n = 0;
	struct err e;

	if (server_plugins_collect(s, scratch, &all, &n, &e) != 0)
		return NULL;
	p = server_plugin_find(all, n, plugin_id);
	if (!p)
		return NULL;
	if (p->controllers_expected == 0)
		return p->nodes_expected && !server_caps_expand(p->node_caps, p->nnode_caps)
			   ? arena_printf(scratch,
					  "plugin %s has no controller service and its node "
					  "plugins do not offer EXPAND_VOLUME",
					  plugin_id)
			   : NULL;
	if (p->controllers_unknown == p->controllers_expected ||
	    server_caps_expand(p->controller_caps, p->ncontroller_caps))
		return NULL;
	return arena_printf(scratch, "plugin %s: its controller does not offer EXPAND_VOLUME",
			    plugin_id);
}

static int server_expand_fn(struct server *s, struct model_volume *v, void *arg,
			    struct arena *scratch, char **skipped, struct err *e)
{
	int64_t want = *(const int64_t *)arg;
	char *lacks;

	if (v->state != MODEL_VOL_READY)
		return err_set(e, CSID_EPRECOND, "expand volume %s: it is %s, not ready", v->id,
			       model_volume_state_name(v->state));
	if (v->capacity_max && want > v->capacity_max)
		return err_set(e, CSID_EINVAL,
			       "expand volume %s: %lld bytes is over its capacity_max %lld", v->id,
			       (long long)want, (long long)v->capacity_max);
	if (want < v->capacity)
		return err_set(e, CSID_EINVAL,
			       "expand volume %s: %lld bytes is less than its capacity %lld "
			       "(volumes do not shrink)",
			       v->id, (long long)want, (long long)v->capacity);
	if (v->pending_capacity_min == want || (!v->pending_capacity_min && want == v->capacity))
		return SERVER_KEEP;
	if ((lacks = server_expand_lacks(s, v->plugin_id, scratch)) != NULL)
		return err_set(e, CSID_EPRECOND, "expand volume %s: %s", v->id, lacks);
	v->pending_capacity_min = want;
	v->updated_ms = clock_wall_ms(s->clock);
	return SERVER_PUT;
}

int server_volume_expand(struct server *s, const char *id, int64_t capacity_min, struct arena *a,
			 struct model_volume **out, struct err *e)
{
	if (capacity_min <= 0)
		return err_set(e, CSID_EINVAL, "expand volume %s: capacity_min must be positive",
			       id);
	return server_volume_request(s, id, server_expand_fn, &capacity_min, a, out, NULL, e);
}

struct server_node_expanded {
	const char *node_id;
	int64_t capacity;
};

static int server_node_expanded_fn(struct server *s, struct model_volume *v, void *arg,
				   struct arena *scratch, char **skipped, struct err *e)
{
	const struct server_node_expanded *x = arg;
	bool held = false, all = true;

	(void)scratch;
	(void)skipped;
	if (!v->node_expansion_required || x->capacity < v->capacity)
		return SERVER_KEEP;
	for (size_t i = 0; i < v->nclaims; i++) {
		struct model_claim *c = &v->claims[i];

		if (strcmp(c->node_id, x->node_id) == 0) {
			held = true;
			c->node_expanded = true;
		}
		if (c->state == MODEL_CLAIM_CLAIMED && !c->node_expanded)
			all = false;
	}
	if (!held)
		return err_set(e, CSID_EPRECOND, "volume %s: node %s holds no claim of it", v->id,
			       x->node_id);
	if (all) {
		v->node_expansion_required = false;
		for (size_t i = 0; i < v->nclaims; i++)
			v->claims[i].node_expanded = false;
	}
	v->updated_ms = clock_wall_ms(s->clock);
	return SERVER_PUT;
}

int server_volume_node_expanded(struct server *s, const char *id, const char *node_id,
				int64_t capacity, struct arena *a, struct model_volume **out,
				struct err *e)
{
	struct server_node_expanded x = {node_id, capacity};

	return server_volume_request(s, id, server_node_expanded_fn, &x, a, out, NULL, e);
}

static int server_cancel_fn(struct server *s, struct model_volume *v, void *arg,
			    struct arena *scratch, char **skipped, struct err *e)
{
	char what[64] = "";

	if (v->pending_capacity_min)
		snprintf(what, sizeof(what), "expand to %lld bytes",
			 (long long)v->pending_capacity_min);
	if (v->pending_mutable.n)
		snprintf(what + strlen(what), sizeof(what) - strlen(what), "%smodify",
			 what[0] ? " and " : "");
	if (!what[0])
		return err_set(e, CSID_EPRECOND, "cancel volume %s: no pending change", v->id);
	*skipped = arena_printf(scratch, "cancelled the pending %s", what);
	if (!*skipped)
		return err_set(e, CSID_ENOMEM, "volume %s: out of memory", v->id);
	v->pending_capacity_min = 0;
	memset(&v->pending_mutable, 0, sizeof(v->pending_mutable));
	v->updated_ms = clock_wall_ms(s->clock);
	return SERVER_PUT;
}

int server_volume_cancel(struct server *s, const char *id, struct arena *a,
			 struct model_volume **out, char **skipped, struct err *e)
{
	return server_volume_request(s, id, server_cancel_fn, NULL, a, out, skipped, e);
}

static int server_modify_fn(struct server *s, struct model_volume *v, void *arg,
			    struct arena *scratch, char **skipped, struct err *e)
{
	const struct model_map *params = arg;

	if (v->state != MODEL_VOL_READY)
		return err_set(e, CSID_EPRECOND, "modify volume %s: it is %s, not ready", v->id,
			       model_volume_state_name(v->state));
	v->pending_mutable = *params;
	v->updated_ms = clock_wall_ms(s->clock);
	return SERVER_PUT;
}

int server_volume_modify(struct server *s, const char *id, const struct model_map *mutable_params,
			 struct arena *a, struct model_volume **out, struct err *e)
{
	size_t bytes = 0;

	if (!mutable_params || !mutable_params->n)
		return err_set(e, CSID_EINVAL, "modify volume %s: no mutable_parameters", id);
	for (size_t i = 0; i < mutable_params->n; i++) {
		if (!mutable_params->kv[i].key || !mutable_params->kv[i].key[0] ||
		    !mutable_params->kv[i].value)
			return err_set(e, CSID_EINVAL, "modify volume %s: empty parameter name",
				       id);
		bytes += strlen(mutable_params->kv[i].key) + strlen(mutable_params->kv[i].value);
	}
	if (bytes > MODEL_MAP_BYTES_MAX)
		return err_set(e, CSID_EINVAL,
			       "modify volume %s: mutable_parameters over %d bytes in all", id,
			       MODEL_MAP_BYTES_MAX);
	return server_volume_request(s, id, server_modify_fn, (void *)mutable_params, a, out, NULL,
				     e);
}
