/*
 * Volumes: register, create, get, list, delete, deregister, claim,
 * release and detach (expand, modify and cancel: server_volume_change.c).
 * Each write is one callback run by the compare-and-set loop
 * (server_volume_update in server.c) on a fresh read of the volume, so
 * the rules are always checked against what is written over. The
 * controller work itself (CreateVolume, publish, unpublish, DeleteVolume)
 * is left to the reconciler: these calls only record what is wanted.
 *
 * The operator exits (force release, detach, force deregister) say what
 * they skipped, in one sentence, so nobody is left guessing which plugin
 * call never happened.
 */
#include "server/server_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

/* ---- helpers ---- */

/* Appends sep (unless buf is empty) and text to a bounded sentence (buf of cap bytes). */
static void server_note_add(char *buf, size_t cap, const char *sep, const char *text)
{
	size_t len = strlen(buf);

	if (len + 1 < cap)
		snprintf(buf + len, cap - len, "%s%s", len ? sep : "", text);
}

/* "alloc a1 on node n1 (claimed), ..." for v's active claims. */
static void server_holders(const struct model_volume *v, char *buf, size_t cap)
{
	buf[0] = '\0';
	for (size_t i = 0; i < v->nclaims; i++) {
		char one[MODEL_ID_MAX * 2 + 64];

		snprintf(one, sizeof(one), "alloc %s on node %s (%s)", v->claims[i].alloc_id,
			 v->claims[i].node_id, model_claim_state_name(v->claims[i].state));
		server_note_add(buf, cap, ", ", one);
	}
}

/* The spec fields of v only (observed state dropped), for idempotency checks. */
static int server_spec_of(struct arena *a, const struct model_volume *v, bool for_create,
			  struct model_volume **out, struct err *e)
{
	struct model_volume *c;
	int rc = model_volume_copy(a, v, &c, e);

	if (rc)
		return rc;
	if (!c->name)
		c->name = c->id;
	if (for_create) {
		c->external_id = NULL;
		memset(&c->context, 0, sizeof(c->context));
	}
	memset(&c->mutable_parameters, 0, sizeof(c->mutable_parameters));
	c->state = MODEL_VOL_READY;
	c->capacity = 0;
	c->accessible = NULL;
	c->naccessible = 0;
	c->node_expansion_required = false;
	c->pending_capacity_min = 0;
	memset(&c->pending_mutable, 0, sizeof(c->pending_mutable));
	c->claims = c->past_claims = NULL;
	c->nclaims = c->npast_claims = 0;
	c->pubs = NULL;
	c->npubs = 0;
	c->created_ms = c->updated_ms = 0;
	c->create_index = c->modify_index = 0;
	memset(&c->status, 0, sizeof(c->status));
	c->schedulable = false;
	c->plugin_health = NULL;
	*out = c;
	return 0;
}

static bool server_spec_same(struct arena *a, const struct model_volume *x,
			     const struct model_volume *y, bool for_create)
{
	struct model_volume *sx, *sy;
	char *tx = NULL, *ty = NULL;
	size_t lx = 0, ly = 0;
	bool same = false;

	if (server_spec_of(a, x, for_create, &sx, NULL) ||
	    server_spec_of(a, y, for_create, &sy, NULL))
		return false;
	if (!model_volume_encode(sx, MODEL_VIEW_STORE, &tx, &lx, NULL) &&
	    !model_volume_encode(sy, MODEL_VIEW_STORE, &ty, &ly, NULL))
		same = lx == ly && memcmp(tx, ty, lx) == 0;
	model_wipe_free(tx, lx);
	model_wipe_free(ty, ly);
	return same;
}

/* Fills the API view of v (plugins read now). */
static int server_view(struct server *s, struct model_volume *v, struct arena *a, struct err *e)
{
	struct server_plugin *p = NULL;
	size_t n = 0;
	int rc = server_plugins_summary(s, a, &p, &n, e);

	if (!rc)
		server_volume_fill(s, v, p, n, a);
	return rc;
}

/* Whether an active claim other than skip uses node_id. */
static bool server_node_in_use(const struct model_volume *v, const char *node_id,
			       const struct model_claim *skip)
{
	for (size_t i = 0; i < v->nclaims; i++)
		if (&v->claims[i] != skip && strcmp(v->claims[i].node_id, node_id) == 0)
			return true;
	return false;
}

/* ---- register, create ---- */

struct server_new_arg {
	const struct model_volume *spec;
	bool for_create;
};

static int server_volume_record(struct server *s, const struct model_volume *spec, bool for_create,
				struct arena *a, struct model_volume **out, struct err *e)
{
	const char *what = for_create ? "create" : "register";
	struct model_volume *v = NULL;
	struct arena *scratch = NULL;
	int rc;

	*out = NULL;
	if ((rc = model_volume_validate(spec, for_create, e)))
		return err_wrap(e, "%s volume %s", what, spec->id ? spec->id : "(no id)");
	if (!(scratch = arena_new()))
		return err_set(e, CSID_ENOMEM, "out of memory");
	for (int attempt = 0; attempt < SERVER_CAS_RETRIES; attempt++) {
		struct model_volume *old = NULL;
		const char *src =
		    spec->snapshot_source ? spec->snapshot_source : spec->clone_source;
		uint64_t index = 0;

		rc = server_get_volume(s, spec->id, scratch, &old, e);
		if (!rc) {
			if (!server_spec_same(scratch, old, spec, for_create)) {
				rc = err_set(
				    e, CSID_EEXIST,
				    "%s volume %s: the ID is taken by a volume with another "
				    "spec",
				    what, spec->id);
				goto out;
			}
			v = old;
			break;
		}
		if (rc != CSID_ENOTFOUND)
			goto out;
		if (src) {
			struct model_snapshot *snap = NULL;
			struct model_volume *clone = NULL;
			const char *plugin;

			rc = spec->snapshot_source ? server_get_snapshot(s, src, scratch, &snap, e)
						   : server_get_volume(s, src, scratch, &clone, e);
			if (rc) {
				err_wrap(e, "create volume %s: source", spec->id);
				goto out;
			}
			plugin = snap ? snap->plugin_id : clone->plugin_id;
			if (strcmp(plugin, spec->plugin_id) != 0) {
				rc =
				    err_set(e, CSID_EINVAL,
					    "create volume %s: source %s belongs to plugin %s, not "
					    "%s",
					    spec->id, src, plugin, spec->plugin_id);
				goto out;
			}
		}
		if ((rc = server_spec_of(scratch, spec, false, &v, e)))
			goto out;
		v->state = for_create ? MODEL_VOL_CREATING : MODEL_VOL_REGISTERING;
		v->mutable_parameters = spec->mutable_parameters;
		v->created_ms = v->updated_ms = clock_wall_ms(s->clock);
		rc = server_put_volume(s, v, 0, &index, e);
		if (rc == CSID_ECONFLICT) {
			v = NULL;
			continue;
		}
		if (rc)
			goto out;
		v->create_index = v->modify_index = index;
		reconciler_enqueue(s->rec, STORE_VOLUME, v->id);
		break;
	}
	if (!v) {
		rc = err_set(e, CSID_EABORTED, "%s volume %s: writers raced; try again", what,
			     spec->id);
		goto out;
	}
	rc = model_volume_copy(a, v, out, e);
	if (!rc)
		rc = server_view(s, *out, a, e);
	/* Taken, since a plugin may register later; the answer's plugin_registered warns. */
	if (!rc && !(*out)->plugin_registered)
		log_warn("msg=\"volume recorded for a plugin no node nor this server offers\" "
			 "volume=%s plugin=%s",
			 v->id, v->plugin_id);
out:
	arena_free(scratch);
	return rc;
}

int server_volume_register(struct server *s, const struct model_volume *spec, struct arena *a,
			   struct model_volume **out, struct err *e)
{
	return server_volume_record(s, spec, false, a, out, e);
}

int server_volume_create(struct server *s, const struct model_volume *spec, struct arena *a,
			 struct model_volume **out, struct err *e)
{
	return server_volume_record(s, spec, true, a, out, e);
}

/* ---- reads ---- */

int server_volume_get(struct server *s, const char *id, struct arena *a, struct model_volume **out,
		      struct err *e)
{
	int rc = server_get_volume(s, id, a, out, e);

	if (!rc)
		rc = server_view(s, *out, a, e);
	return rc;
}

int server_volume_get_history(struct server *s, const char *id, struct arena *a,
			      struct model_volume **out, struct err *e)
{
	int rc = server_volume_get(s, id, a, out, e);

	if (!rc)
		rc = server_pastclaims_read(s->cfg.store, *out, a, e);
	return rc;
}

static bool server_volume_matches(const struct model_volume *v,
				  const struct server_volume_filter *f)
{
	if (f->plugin_id && strcmp(v->plugin_id, f->plugin_id) != 0)
		return false;
	if (!f->node_id)
		return true;
	for (size_t i = 0; i < v->nclaims; i++)
		if (strcmp(v->claims[i].node_id, f->node_id) == 0)
			return true;
	return model_volume_pub(v, f->node_id) != NULL;
}

int server_volume_list(struct server *s, const struct server_volume_filter *f, struct arena *a,
		       struct model_volume ***out, size_t *n, char **next_token, uint64_t *index,
		       struct err *e)
{
	size_t per_page = server_per_page(f->per_page), count = 0;
	struct model_volume **page = arena_alloc(a, per_page * sizeof(*page));
	struct server_plugin *plugins = NULL;
	const char *after = f->next_token;
	bool first = true, more = true, extra = false;
	size_t nplugins = 0;
	int rc = 0;

	*out = NULL;
	*n = 0;
	*next_token = NULL;
	if (!page)
		return err_set(e, CSID_ENOMEM, "list volumes: out of memory");
	/* Filters skip records: read on until the page is full and one more match is seen. */
	while (more && !extra && !rc) {
		struct store_list l = {0};

		rc = store_list(s->cfg.store, STORE_VOLUME, f->prefix, after, per_page + 1, &l, e);
		if (rc)
			return err_wrap(e, "list volumes");
		if (first && index)
			*index = l.index;
		first = false;
		more = l.more && l.n > 0;
		for (size_t i = 0; i < l.n && !rc && !extra; i++) {
			struct model_volume *v = NULL;

			rc = model_volume_decode(a, l.objs[i].value, l.objs[i].len, &v, e);
			if (rc) {
				err_wrap(e, "volume %s: stored record", l.objs[i].id);
				break;
			}
			v->create_index = l.objs[i].create_index;
			v->modify_index = l.objs[i].modify_index;
			if (!server_volume_matches(v, f))
				continue;
			if (count == per_page)
				extra = true;
			else
				page[count++] = v;
		}
		if (!rc && l.n && !(after = arena_strdup(a, l.objs[l.n - 1].id)))
			rc = err_set(e, CSID_ENOMEM, "list volumes: out of memory");
		for (size_t i = 0; i < l.n; i++)
			explicit_bzero(l.objs[i].value, l.objs[i].len);
		store_list_free(&l);
	}
	if (!rc && extra && !(*next_token = arena_strdup(a, page[count - 1]->id)))
		rc = err_set(e, CSID_ENOMEM, "list volumes: out of memory");
	if (!rc && count)
		rc = server_plugins_summary(s, a, &plugins, &nplugins, e);
	for (size_t i = 0; !rc && i < count; i++)
		server_volume_fill(s, page[i], plugins, nplugins, a);
	if (rc)
		return rc;
	*out = page;
	*n = count;
	return 0;
}

/* ---- delete, deregister ---- */

/*
 * A claim still claimed refuses the delete; claims being released do not:
 * the reconciler drives a deleting volume's claims to freed before its
 * DeleteVolume, as it would have anyway (a user who unmounts and deletes
 * at once need not wait for the controller unpublish in between).
 */
static int server_delete_fn(struct server *s, struct model_volume *v, void *arg,
			    struct arena *scratch, char **skipped, struct err *e)
{
	char holders[ERR_MSG_MAX];

	for (size_t i = 0; i < v->nclaims; i++) {
		if (v->claims[i].state != MODEL_CLAIM_CLAIMED)
			continue;
		server_holders(v, holders, sizeof(holders));
		return err_set(e, CSID_ECONFLICT,
			       "delete volume %s: claimed by %s; release it first", v->id, holders);
	}
	if (v->state == MODEL_VOL_DELETING)
		return SERVER_KEEP;
	v->state = MODEL_VOL_DELETING;
	v->updated_ms = clock_wall_ms(s->clock);
	return SERVER_PUT;
}

int server_volume_delete(struct server *s, const char *id, struct arena *a,
			 struct model_volume **out, struct err *e)
{
	return server_volume_request(s, id, server_delete_fn, NULL, a, out, NULL, e);
}

static int server_deregister_fn(struct server *s, struct model_volume *v, void *arg,
				struct arena *scratch, char **skipped, struct err *e)
{
	bool force = *(const bool *)arg;
	char holders[ERR_MSG_MAX], nodes[ERR_MSG_MAX] = "";

	server_holders(v, holders, sizeof(holders));
	for (size_t i = 0; i < v->npubs; i++)
		server_note_add(nodes, sizeof(nodes), ", ", v->pubs[i].node_id);
	if (!force && v->nclaims)
		return err_set(e, CSID_ECONFLICT,
			       "deregister volume %s: claimed by %s; release it or use force",
			       v->id, holders);
	if (!force && v->npubs)
		return err_set(e, CSID_ECONFLICT,
			       "deregister volume %s: still published to node %s; wait for the "
			       "controller unpublish or use force",
			       v->id, nodes);
	if (v->nclaims || v->npubs || v->state == MODEL_VOL_CREATING) {
		*skipped = arena_printf(
		    scratch, "deregistered volume %s without %s%s%s%s%s%s%s", v->id,
		    v->nclaims ? "releasing the claims of " : "", v->nclaims ? holders : "",
		    v->nclaims && v->npubs ? "; without " : "",
		    v->npubs ? "controller unpublish from node " : "", v->npubs ? nodes : "",
		    v->state == MODEL_VOL_CREATING && (v->nclaims || v->npubs) ? "; without " : "",
		    v->state == MODEL_VOL_CREATING
			? "waiting for CreateVolume (the plugin may still hold the volume)"
			: "");
		if (!*skipped)
			return err_set(e, CSID_ENOMEM, "volume %s: out of memory", v->id);
	}
	return SERVER_DELETE;
}

int server_volume_deregister(struct server *s, const char *id, bool force, struct arena *a,
			     char **skipped, struct err *e)
{
	return server_volume_update(s, id, server_deregister_fn, &force, a, NULL, skipped, e);
}

/* ---- claims ---- */

/* Volumes of plugin_id other than skip_id that node_id uses (claims or publications). */
static int server_node_volume_count(struct server *s, const char *plugin_id, const char *node_id,
				    const char *skip_id, int64_t *count, struct err *e)
{
	struct server_volume_filter f = {
	    .plugin_id = plugin_id, .node_id = node_id, .per_page = SERVER_PER_PAGE_MAX};
	int rc = 0;

	*count = 0;
	do {
		struct arena *a = arena_new();
		struct model_volume **page = NULL;
		char *next = NULL;
		size_t n = 0;

		if (!a)
			return err_set(e, CSID_ENOMEM, "out of memory");
		rc = server_volume_list(s, &f, a, &page, &n, &next, NULL, e);
		for (size_t i = 0; !rc && i < n; i++)
			*count += strcmp(page[i]->id, skip_id) != 0;
		f.next_token = next ? strdup(next) : NULL;
		if (next && !f.next_token)
			rc = err_set(e, CSID_ENOMEM, "out of memory");
		arena_free(a);
	} while (!rc && f.next_token);
	free((char *)f.next_token);
	return rc;
}

/* What server_claim_env takes of the claiming node's record, copied into a. */
struct server_claim_node {
	const char *plugin_id;
	struct arena *a;
	struct model_claim_env *env;
	bool found, down, nomem;
};

/* server_node_use_fn of server_claim_env: the record as the node cache holds it decoded. */
static void server_claim_node_look(void *arg, const struct model_node *n)
{
	struct server_claim_node *l = arg;
	struct err e;

	l->found = n != NULL;
	l->down = n && n->status == MODEL_NODE_DOWN;
	for (size_t i = 0; n && i < n->nplugins; i++) {
		const struct model_node_plugin *np = &n->plugins[i];
		const struct model_map *seg = &np->topology.segments;
		struct model_topology *t;

		if (np->type != MODEL_PLUGIN_NODE || strcmp(np->plugin_id, l->plugin_id) != 0)
			continue;
		l->env->node_plugin_healthy = np->healthy;
		l->env->plugin_node_id =
		    np->plugin_node_id ? arena_strdup(l->a, np->plugin_node_id) : NULL;
		l->env->max_volumes = np->max_volumes;
		t = arena_alloc(l->a, sizeof(*t));
		for (size_t k = 0; t && k < seg->n; k++)
			if (model_map_put(l->a, &t->segments, seg->kv[k].key, seg->kv[k].value, &e))
				t = NULL;
		l->env->node_topology = t;
		l->nomem |= !t || (np->plugin_node_id && !l->env->plugin_node_id);
	}
}

/*
 * What the server knows of the plugin and of node_id, for
 * model_claim_check: the node's record as the node cache holds it (no
 * read and decode of it per claim), the plugins summary.
 */
static int server_claim_env(struct server *s, const struct model_volume *v, const char *node_id,
			    struct arena *a, struct model_claim_env *env, struct err *e)
{
	struct server_claim_node l = {.plugin_id = v->plugin_id, .a = a, .env = env};
	struct server_plugin *plugins = NULL;
	const struct server_plugin *p;
	size_t n = 0;
	int rc;

	memset(env, 0, sizeof(*env));
	if ((rc = server_plugins_node_use(s, node_id, server_claim_node_look, &l, e)))
		return rc;
	if (l.nomem)
		return err_set(e, CSID_ENOMEM, "claim volume %s: out of memory", v->id);
	if (!l.found)
		return err_set(e, CSID_EPRECOND, "claim volume %s: node %s is not registered",
			       v->id, node_id);
	if (l.down)
		return err_set(e, CSID_EPRECOND, "claim volume %s: node %s is down", v->id,
			       node_id);
	if ((rc = server_plugins_summary(s, a, &plugins, &n, e)))
		return rc;
	p = server_plugin_find(plugins, n, v->plugin_id);
	env->controller_required = p && p->controller_required;
	env->controller_healthy = p && p->controllers_healthy > 0;
	env->controller_unknown = p && p->controllers_unknown > 0 && p->controllers_healthy == 0;
	if (env->max_volumes > 0)
		return server_node_volume_count(s, v->plugin_id, node_id, v->id,
						&env->node_volume_count, e);
	return 0;
}

struct server_claim_arg {
	struct model_claim_request req; /* its capability defaulted per attempt (below) */
	bool cap_given; /* the request named an access mode */
	bool attach_default; /* ... but no attachment mode */
	struct model_claim_env env;
};

/*
 * The allocation holds this claim already. When the node's agent claims
 * again (a new mount flow for it), the claim becomes its and its
 * updated_ms moves to now: the lost-claim rule (server_gc.h) measures the
 * agent's reports from the claim's last change, and the new flow's
 * allocation may be missing from a report built before the flow began.
 */
static int server_claim_again(struct server *s, struct model_volume *v,
			      const struct model_claim_request *req)
{
	struct model_claim *c = model_volume_claim(v, req->alloc_id);

	if (!req->held_by_agent || !c)
		return SERVER_KEEP;
	c->held_by_agent = true;
	c->updated_ms = v->updated_ms = clock_wall_ms(s->clock);
	return SERVER_PUT;
}

static int server_claim_fn(struct server *s, struct model_volume *v, void *arg,
			   struct arena *scratch, char **skipped, struct err *e)
{
	struct server_claim_arg *c = arg;
	enum model_claim_verdict verdict;
	/* What the server knows of the plugin and node, as of this attempt. */
	int rc = server_claim_env(s, v, c->req.node_id, scratch, &c->env, e);

	/*
	 * No access mode named: the volume's first capability (the first with
	 * the attachment mode named, if one was), as of this attempt.
	 */
	if (!c->cap_given && v->ncaps > 0) {
		enum model_attachment asked = c->req.cap.attachment;
		const struct model_capability *pick = &v->caps[0];

		for (size_t i = 0; !c->attach_default && i < v->ncaps; i++)
			if (v->caps[i].attachment == asked) {
				pick = &v->caps[i];
				break;
			}
		c->req.cap = *pick;
		if (!c->attach_default)
			c->req.cap.attachment = asked;
	}
	for (size_t i = 0; c->cap_given && c->attach_default && i < v->ncaps; i++)
		if (v->caps[i].access == c->req.cap.access) {
			c->req.cap.attachment = v->caps[i].attachment;
			break;
		}
	if (!rc && !c->cap_given && v->ncaps == 0)
		rc = err_set(e, CSID_EINVAL,
			     "claim volume %s: no access_mode given and the "
			     "volume has no capability",
			     v->id);
	if (!rc)
		rc = model_claim_check(v, &c->req, &c->env, &verdict, e);
	if (rc)
		return rc;
	if (verdict == MODEL_CLAIM_ALREADY)
		return server_claim_again(s, v, &c->req);
	rc = model_claim_add(scratch, v, &c->req, &c->env, clock_wall_ms(s->clock), e);
	if (rc)
		return err_wrap(e, "claim volume %s", v->id);
	v->updated_ms = clock_wall_ms(s->clock);
	return SERVER_PUT;
}

/* What server_volume_claim_run tells its caller: see server_claim_published. */
struct server_claim_told {
	struct server *s;
	server_claim_published_fn fn;
	void *ctx;
	struct arena *a;
};

/*
 * The pass published a node (reconciler_published): the caller is told
 * with the API view of a copy (the pass writes its own next). Out of
 * memory: not told, so it answers after the write, as without this.
 */
static void server_claim_published(void *arg, struct model_volume *v)
{
	struct server_claim_told *t = arg;
	struct model_volume *view = NULL;
	struct err e;

	err_clear(&e);
	if (model_volume_copy(t->a, v, &view, &e) || server_view(t->s, view, t->a, &e))
		return;
	t->fn(t->ctx, view);
}

static int server_volume_claim_do(struct server *s, const char *id,
				  const struct model_claim_request *req, bool attach_default,
				  bool run, const struct server_claim_told *told, struct arena *a,
				  struct model_volume **out, struct err *e)
{
	struct server_claim_arg arg = {.req = *req,
				       .cap_given = req->cap.access != MODEL_ACCESS_UNKNOWN,
				       .attach_default = attach_default};
	struct reconciler_published pub = {server_claim_published, (void *)told};
	int rc;

	if (!req->alloc_id || !req->node_id)
		return err_set(e, CSID_EINVAL, "claim volume %s: alloc_id and node_id required",
			       id);
	if ((rc = model_id_check("alloc id", req->alloc_id, strlen(req->alloc_id), e)) ||
	    (rc = model_id_check("node id", req->node_id, strlen(req->node_id), e)))
		return err_wrap(e, "claim volume %s", id);
	return run ? server_volume_update_run(s, id, server_claim_fn, &arg, told ? &pub : NULL, a,
					      out, e)
		   : server_volume_update(s, id, server_claim_fn, &arg, a, out, NULL, e);
}

int server_volume_claim_default(struct server *s, const char *id,
				const struct model_claim_request *req, bool attach_default,
				struct arena *a, struct model_volume **out, struct err *e)
{
	return server_volume_claim_do(s, id, req, attach_default, false, NULL, a, out, e);
}

int server_volume_claim_run(struct server *s, const char *id, const struct model_claim_request *req,
			    bool attach_default, server_claim_published_fn published, void *ctx,
			    struct arena *a, struct model_volume **out, struct err *e)
{
	struct server_claim_told told = {s, published, ctx, a};

	return server_volume_claim_do(s, id, req, attach_default, true, published ? &told : NULL, a,
				      out, e);
}

int server_volume_claim(struct server *s, const char *id, const struct model_claim_request *req,
			struct arena *a, struct model_volume **out, struct err *e)
{
	return server_volume_claim_default(s, id, req, false, a, out, e);
}

int server_volume_claim_progress(struct server *s, const struct model_volume *v,
				 const char *alloc_id, const char *node_id,
				 enum server_claim_progress *out, struct err *e)
{
	const struct model_claim *c = model_volume_claim(v, alloc_id);
	const struct model_publication *p = model_volume_pub(v, node_id);
	struct server_plugin *plugins = NULL;
	const struct server_plugin *plug;
	struct arena *a;
	size_t n = 0;
	int rc;

	if (!c || c->state != MODEL_CLAIM_CLAIMED || strcmp(c->node_id, node_id) != 0)
		return err_set(e, CSID_ENOTFOUND,
			       "volume %s: allocation %s holds no active claim on node %s (%s)",
			       v->id, alloc_id, node_id,
			       c && c->note ? c->note : "released or never granted");
	if (p) {
		*out = p->state == MODEL_PUB_PUBLISHED ? SERVER_CLAIM_PUBLISHED
						       : SERVER_CLAIM_PUBLISHING;
		return 0;
	}
	/* No publication: none is needed, unless the plugin wants one (made at the next claim). */
	if (!(a = arena_new()))
		return err_set(e, CSID_ENOMEM, "out of memory");
	rc = server_plugins_summary(s, a, &plugins, &n, e);
	plug = rc ? NULL : server_plugin_find(plugins, n, v->plugin_id);
	*out = plug && plug->controller_required ? SERVER_CLAIM_PUBLISHING
						 : SERVER_CLAIM_NO_PUBLICATION;
	arena_free(a);
	return rc;
}

struct server_release_arg {
	const char *alloc_id;
	const char *reason; /* NULL: none */
	bool force;
};

/*
 * The reconciler's next step after a release, taken in the release's own
 * write (one store write less per cycle): the node's publication goes
 * unpublishing once no claim on the node is still claimed (one that is
 * still needs it; the reconciler then frees the released claim alone).
 */
static void server_release_unpublish(struct model_volume *v, const struct model_claim *c)
{
	struct model_publication *pub = model_volume_pub(v, c->node_id);

	if (!pub)
		return;
	for (size_t i = 0; i < v->nclaims; i++)
		if (v->claims[i].state == MODEL_CLAIM_CLAIMED &&
		    strcmp(v->claims[i].node_id, c->node_id) == 0)
			return;
	pub->state = MODEL_PUB_UNPUBLISHING;
}

static int server_release_fn(struct server *s, struct model_volume *v, void *arg,
			     struct arena *scratch, char **skipped, struct err *e)
{
	const struct server_release_arg *r = arg;
	struct model_claim *c = model_volume_claim(v, r->alloc_id);
	int64_t now = clock_wall_ms(s->clock);
	char note[ERR_MSG_MAX] = "";
	bool pub;
	int rc;

	if (!c) {
		/* Freed already (its history says so): nothing to do. */
		if ((rc = server_pastclaims_read(s->cfg.store, v, scratch, e)))
			return rc;
		for (size_t i = 0; i < v->npast_claims; i++)
			if (strcmp(v->past_claims[i].alloc_id, r->alloc_id) == 0)
				return SERVER_KEEP;
		return err_set(e, CSID_ENOTFOUND, "release volume %s: alloc %s holds no claim",
			       v->id, r->alloc_id);
	}
	if (!r->force) {
		if (c->state != MODEL_CLAIM_CLAIMED)
			return SERVER_KEEP;
		if (r->reason)
			snprintf(note, sizeof(note), "released: %s", r->reason);
		rc = model_claim_transition(scratch, v->id, c, MODEL_CLAIM_NODE_UNPUBLISHED,
					    note[0] ? note : "released", now, e);
		v->updated_ms = now;
		if (!rc)
			server_release_unpublish(v, c);
		return rc ? rc : SERVER_PUT;
	}
	pub = model_volume_pub(v, c->node_id) && !server_node_in_use(v, c->node_id, c);
	if (c->state == MODEL_CLAIM_CLAIMED)
		snprintf(note, sizeof(note), "node unpublish on node %s", c->node_id);
	if (pub) {
		char step[MODEL_ID_MAX + 96];

		/*
		 * The publication stays, marked for unpublishing: the reconciler
		 * keeps trying ControllerUnpublishVolume in the background, so the
		 * plugin's attachment is not forgotten (a strict plugin would
		 * refuse the next publish elsewhere, or the delete, for ever).
		 */
		snprintf(step, sizeof(step),
			 "waiting for the controller unpublish from node %s (it goes on in the "
			 "background)",
			 c->node_id);
		server_note_add(note, sizeof(note), " and ", step);
		model_volume_pub(v, c->node_id)->state = MODEL_PUB_UNPUBLISHING;
	}
	*skipped = note[0]
		       ? arena_printf(scratch, "force-freed alloc %s without %s", r->alloc_id, note)
		       : NULL;
	rc = model_volume_claim_move(scratch, v, r->alloc_id, MODEL_CLAIM_FREED,
				     note[0] ? *skipped : "force-freed", now, e);
	v->updated_ms = now;
	return rc ? rc : SERVER_PUT;
}

int server_volume_release(struct server *s, const char *id, const char *alloc_id, bool force,
			  struct arena *a, struct model_volume **out, char **skipped, struct err *e)
{
	return server_volume_release_why(s, id, alloc_id, force, NULL, a, out, skipped, e);
}

int server_volume_release_why(struct server *s, const char *id, const char *alloc_id, bool force,
			      const char *reason, struct arena *a, struct model_volume **out,
			      char **skipped, struct err *e)
{
	struct server_release_arg arg = {.alloc_id = alloc_id, .reason = reason, .force = force};

	if (!alloc_id)
		return err_set(e, CSID_EINVAL, "release volume %s: alloc_id required", id);
	return server_volume_update(s, id, server_release_fn, &arg, a, out, skipped, e);
}

static int server_detach_fn(struct server *s, struct model_volume *v, void *arg,
			    struct arena *scratch, char **skipped, struct err *e)
{
	const char *node_id = arg;
	int64_t now = clock_wall_ms(s->clock);
	char allocs[ERR_MSG_MAX] = "";
	int rc;

	for (size_t i = 0; i < v->nclaims; i++) {
		struct model_claim *c = &v->claims[i];

		if (strcmp(c->node_id, node_id) != 0 || c->state != MODEL_CLAIM_CLAIMED)
			continue;
		rc = model_claim_transition(scratch, v->id, c, MODEL_CLAIM_NODE_UNPUBLISHED,
					    "detached by the operator", now, e);
		if (rc)
			return rc;
		server_note_add(allocs, sizeof(allocs), ", ", c->alloc_id);
	}
	if (!allocs[0])
		return SERVER_KEEP;
	*skipped = arena_printf(scratch,
				"detached volume %s from node %s without node unpublish of alloc "
				"%s (the operator asserts the node no longer uses it)",
				v->id, node_id, allocs);
	if (!*skipped)
		return err_set(e, CSID_ENOMEM, "volume %s: out of memory", v->id);
	v->updated_ms = now;
	return SERVER_PUT;
}

int server_volume_detach(struct server *s, const char *id, const char *node_id, struct arena *a,
			 struct model_volume **out, char **skipped, struct err *e)
{
	if (!node_id)
		return err_set(e, CSID_EINVAL, "detach volume %s: node_id required", id);
	return server_volume_update(s, id, server_detach_fn, (void *)node_id, a, out, skipped, e);
}
