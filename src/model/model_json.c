/*
 * JSON encodings of the model (model.h gives the shapes): encoders for
 * the store view (everything a record needs, secrets and mount flags
 * included) and the API view (what a reader may see: no secrets, no mount
 * flags, plus the server's status fields). Decoders are in
 * model_decode.c and model_spec.c. The JSON trees built here are wiped
 * before they are freed, since a store view holds secrets.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/model_int.h"

/* ---- encoding ---- */

/* A copy of s with every non-ASCII byte as '?' (malloc'd), or NULL. */
static char *model_ascii(const char *s)
{
	char *copy = strdup(s);

	for (char *p = copy; p && *p; p++)
		if ((unsigned char)*p >= 0x80)
			*p = '?';
	return copy;
}

json_t *model_json_str(const char *s)
{
	json_t *j = json_string(s);
	char *copy;

	if (j)
		return j;
	/* Not valid UTF-8 (a plugin's health text, say): keep the ASCII. */
	copy = model_ascii(s);
	if (!copy)
		return NULL;
	j = json_string(copy);
	free(copy);
	return j;
}

void model_json_wipe(json_t *v)
{
	const char *key;
	json_t *item;
	size_t i;

	if (json_is_string(v)) {
		memset((char *)json_string_value(v), 0, json_string_length(v));
	} else if (json_is_object(v)) {
		json_object_foreach(v, key, item) model_json_wipe(item);
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, item) model_json_wipe(item);
	}
}

/* Sets o[k] = v; v is consumed even when o is NULL (jansson frees it on
 * failure); *ok turns false on failure. */
static void model_set(bool *ok, json_t *o, const char *k, json_t *v)
{
	if (json_object_set_new(o, k, v) != 0)
		*ok = false;
}

static void model_set_str(bool *ok, json_t *o, const char *k, const char *s)
{
	if (s)
		model_set(ok, o, k, model_json_str(s));
}

static void model_set_int(bool *ok, json_t *o, const char *k, int64_t n)
{
	model_set(ok, o, k, json_integer((json_int_t)n));
}

static void model_append(bool *ok, json_t *arr, json_t *v)
{
	if (json_array_append_new(arr, v) != 0)
		*ok = false;
}

static json_t *model_enc_map(const struct model_map *m)
{
	json_t *o = json_object();
	bool ok = true;

	for (size_t i = 0; i < m->n; i++) {
		char *key;

		if (json_object_set_new(o, m->kv[i].key, model_json_str(m->kv[i].value)) == 0)
			continue;
		/* A key that is not valid UTF-8 (from a plugin) is kept as ASCII. */
		key = model_ascii(m->kv[i].key);
		if (!key || json_object_set_new(o, key, model_json_str(m->kv[i].value)) != 0)
			ok = false;
		free(key);
	}
	if (!ok) {
		model_json_wipe(o);
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *model_enc_topologies(const struct model_topology *t, size_t n)
{
	json_t *arr = json_array();
	bool ok = true;

	for (size_t i = 0; i < n; i++)
		model_append(&ok, arr, model_enc_map(&t[i].segments));
	if (!ok) {
		json_decref(arr);
		return NULL;
	}
	return arr;
}

static void model_set_cap(bool *ok, json_t *o, const struct model_capability *c)
{
	model_set_str(ok, o, "access_mode", model_access_name(c->access));
	model_set_str(ok, o, "attachment_mode", model_attachment_name(c->attachment));
}

static json_t *model_enc_claim(const struct model_claim *c)
{
	json_t *o = json_object();
	bool ok = true;

	model_set_str(&ok, o, "alloc_id", c->alloc_id);
	model_set_str(&ok, o, "node_id", c->node_id);
	model_set_str(&ok, o, "plugin_node_id", c->plugin_node_id);
	model_set_str(&ok, o, "mode", model_claim_mode_name(c->mode));
	model_set_cap(&ok, o, &c->cap);
	model_set(&ok, o, "read_only", json_boolean(c->read_only));
	model_set_str(&ok, o, "state", model_claim_state_name(c->state));
	model_set_int(&ok, o, "claimed_ms", c->claimed_ms);
	model_set_int(&ok, o, "updated_ms", c->updated_ms);
	model_set_str(&ok, o, "note", c->note);
	model_set(&ok, o, "held_by_agent", json_boolean(c->held_by_agent));
	if (c->node_expanded)
		model_set(&ok, o, "node_expanded", json_true());
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *model_enc_claims(const struct model_claim *c, size_t n)
{
	json_t *arr = json_array();
	bool ok = true;

	for (size_t i = 0; i < n; i++)
		model_append(&ok, arr, model_enc_claim(&c[i]));
	if (!ok) {
		json_decref(arr);
		return NULL;
	}
	return arr;
}

static json_t *model_enc_pubs(const struct model_publication *p, size_t n)
{
	json_t *arr = json_array();
	bool ok = true;

	for (size_t i = 0; i < n; i++) {
		json_t *o = json_object();

		model_set_str(&ok, o, "node_id", p[i].node_id);
		model_set_str(&ok, o, "plugin_node_id", p[i].plugin_node_id);
		model_set(&ok, o, "read_only", json_boolean(p[i].read_only));
		model_set_cap(&ok, o, &p[i].cap);
		model_set_str(&ok, o, "state", model_pub_state_name(p[i].state));
		model_set(&ok, o, "context", model_enc_map(&p[i].context));
		model_append(&ok, arr, o);
	}
	if (!ok) {
		json_decref(arr);
		return NULL;
	}
	return arr;
}

static json_t *model_enc_status(const struct model_status *s)
{
	json_t *o = json_object();
	bool ok = true;

	model_set_str(&ok, o, "last_error", s->last_error);
	model_set_int(&ok, o, "attempts", s->attempts);
	model_set_int(&ok, o, "next_attempt_ms", s->next_attempt_ms);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* The spec keys of v into o. */
static void model_enc_volume_spec(bool *ok, json_t *o, const struct model_volume *v,
				  enum model_view view)
{
	json_t *caps = json_array(), *mo = json_object(), *tr = json_object();

	model_set_str(ok, o, "id", v->id);
	model_set_str(ok, o, "name", v->name);
	model_set_str(ok, o, "plugin_id", v->plugin_id);
	model_set_str(ok, o, "external_id", v->external_id);
	model_set_int(ok, o, "capacity_min", v->capacity_min);
	model_set_int(ok, o, "capacity_max", v->capacity_max);
	for (size_t i = 0; i < v->ncaps; i++) {
		json_t *c = json_object();

		model_set_cap(ok, c, &v->caps[i]);
		model_append(ok, caps, c);
	}
	model_set(ok, o, "capabilities", caps);
	model_set_str(ok, mo, "fs_type", v->fs_type);
	if (view == MODEL_VIEW_STORE) {
		json_t *flags = json_array();

		for (size_t i = 0; i < v->nmount_flags; i++)
			model_append(ok, flags, model_json_str(v->mount_flags[i]));
		model_set(ok, mo, "mount_flags", flags);
	}
	model_set(ok, o, "mount_options", mo);
	model_set(ok, o, "parameters", model_enc_map(&v->parameters));
	model_set(ok, o, "mutable_parameters", model_enc_map(&v->mutable_parameters));
	if (view == MODEL_VIEW_STORE)
		model_set(ok, o, "secrets", model_enc_map(&v->secrets));
	model_set(ok, o, "context", model_enc_map(&v->context));
	model_set(ok, tr, "requisite", model_enc_topologies(v->requisite, v->nrequisite));
	model_set(ok, tr, "preferred", model_enc_topologies(v->preferred, v->npreferred));
	model_set(ok, o, "topology_request", tr);
	model_set_str(ok, o, "snapshot_source", v->snapshot_source);
	model_set_str(ok, o, "clone_source", v->clone_source);
}

static json_t *model_enc_volume(const struct model_volume *v, enum model_view view)
{
	json_t *o = json_object(), *pending = json_object();
	bool ok = true;

	model_enc_volume_spec(&ok, o, v, view);
	model_set_str(&ok, o, "state", model_volume_state_name(v->state));
	if (v->failure)
		model_set_str(&ok, o, "failure", v->failure);
	model_set_int(&ok, o, "capacity", v->capacity);
	model_set(&ok, o, "accessible_topology",
		  model_enc_topologies(v->accessible, v->naccessible));
	model_set(&ok, o, "node_expansion_required", json_boolean(v->node_expansion_required));
	model_set_int(&ok, pending, "capacity_min", v->pending_capacity_min);
	model_set(&ok, pending, "mutable_parameters", model_enc_map(&v->pending_mutable));
	model_set(&ok, o, "pending", pending);
	model_set(&ok, o, "claims", model_enc_claims(v->claims, v->nclaims));
	model_set(&ok, o, "past_claims", model_enc_claims(v->past_claims, v->npast_claims));
	model_set(&ok, o, "publications", model_enc_pubs(v->pubs, v->npubs));
	model_set_int(&ok, o, "created_ms", v->created_ms);
	model_set_int(&ok, o, "updated_ms", v->updated_ms);
	if (view == MODEL_VIEW_API) {
		model_set(&ok, o, "status", model_enc_status(&v->status));
		model_set_int(&ok, o, "create_index", (int64_t)v->create_index);
		model_set_int(&ok, o, "modify_index", (int64_t)v->modify_index);
		model_set(&ok, o, "schedulable", json_boolean(v->schedulable));
		model_set_str(&ok, o, "plugin_health", v->plugin_health);
		model_set(&ok, o, "plugin_registered", json_boolean(v->plugin_registered));
	}
	if (!ok) {
		model_json_wipe(o);
		json_decref(o);
		return NULL;
	}
	return o;
}

/* Dumps o into *out (compact), wipes and frees o. */
static int model_dump(json_t *o, const char *what, char **out, size_t *len, struct err *e)
{
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;

	if (o) {
		model_json_wipe(o);
		json_decref(o);
	}
	if (!text)
		return err_set(e, CSID_ENOMEM, "%s: encode: out of memory", what);
	*out = text;
	*len = strlen(text);
	return 0;
}

int model_history_encode(const struct model_claim *c, size_t n, char **out, size_t *len,
			 struct err *e)
{
	json_t *o = json_object();
	bool ok = true;

	model_set(&ok, o, "past_claims", model_enc_claims(c, n));
	if (!ok) {
		json_decref(o);
		o = NULL;
	}
	return model_dump(o, "claim history", out, len, e);
}

int model_volume_encode(const struct model_volume *v, enum model_view view, char **out, size_t *len,
			struct err *e)
{
	return model_dump(model_enc_volume(v, view), "volume", out, len, e);
}

static json_t *model_enc_snapshot(const struct model_snapshot *s, enum model_view view)
{
	json_t *o = json_object();
	bool ok = true;

	model_set_str(&ok, o, "id", s->id);
	model_set_str(&ok, o, "volume_id", s->volume_id);
	model_set_str(&ok, o, "plugin_id", s->plugin_id);
	model_set_str(&ok, o, "external_id", s->external_id);
	model_set_str(&ok, o, "name", s->name);
	model_set(&ok, o, "parameters", model_enc_map(&s->parameters));
	if (view == MODEL_VIEW_STORE)
		model_set(&ok, o, "secrets", model_enc_map(&s->secrets));
	model_set_str(&ok, o, "state", model_snapshot_state_name(s->state));
	if (s->failure)
		model_set_str(&ok, o, "failure", s->failure);
	model_set(&ok, o, "ready_to_use", json_boolean(s->ready_to_use));
	model_set_int(&ok, o, "size_bytes", s->size_bytes);
	model_set_int(&ok, o, "creation_time_ms", s->creation_time_ms);
	model_set_int(&ok, o, "created_ms", s->created_ms);
	if (view == MODEL_VIEW_API) {
		model_set(&ok, o, "status", model_enc_status(&s->status));
		model_set_int(&ok, o, "create_index", (int64_t)s->create_index);
		model_set_int(&ok, o, "modify_index", (int64_t)s->modify_index);
	}
	if (!ok) {
		model_json_wipe(o);
		json_decref(o);
		return NULL;
	}
	return o;
}

int model_snapshot_encode(const struct model_snapshot *s, enum model_view view, char **out,
			  size_t *len, struct err *e)
{
	return model_dump(model_enc_snapshot(s, view), "snapshot", out, len, e);
}

static json_t *model_enc_node(const struct model_node *n, enum model_view view)
{
	json_t *o = json_object(), *plugins = json_array();
	char tag[MODEL_INSTANCE_TAG_LEN + 1];
	bool ok = true;

	model_set_str(&ok, o, "id", n->id);
	if (view == MODEL_VIEW_STORE) {
		model_set_str(&ok, o, "instance_id", n->instance_id);
	} else if (n->instance_id) {
		model_node_instance_tag(n->instance_id, tag);
		model_set_str(&ok, o, "instance_tag", tag);
	}
	model_set_str(&ok, o, "status", model_node_status_name(n->status));
	model_set_int(&ok, o, "registered_ms", n->registered_ms);
	model_set_int(&ok, o, "updated_ms", n->updated_ms);
	model_set_str(&ok, o, "address", n->address);
	for (size_t i = 0; i < n->nplugins; i++) {
		const struct model_node_plugin *p = &n->plugins[i];
		json_t *po = json_object(), *caps = json_array();

		model_set_str(&ok, po, "plugin_id", p->plugin_id);
		model_set_str(&ok, po, "type", model_plugin_type_name(p->type));
		model_set(&ok, po, "healthy", json_boolean(p->healthy));
		model_set_str(&ok, po, "health", p->health);
		model_set_str(&ok, po, "version", p->version);
		for (size_t j = 0; j < p->ncaps; j++)
			model_append(&ok, caps, model_json_str(p->caps[j]));
		model_set(&ok, po, "capabilities", caps);
		model_set_str(&ok, po, "plugin_node_id", p->plugin_node_id);
		model_set_int(&ok, po, "max_volumes", p->max_volumes);
		model_set(&ok, po, "topology", model_enc_map(&p->topology.segments));
		model_append(&ok, plugins, po);
	}
	model_set(&ok, o, "plugins", plugins);
	if (n->allocs_reported) {
		json_t *allocs = json_array();

		for (size_t i = 0; i < n->nallocs; i++) {
			json_t *ao = json_object();

			model_set_str(&ok, ao, "volume_id", n->allocs[i].volume_id);
			model_set_str(&ok, ao, "alloc_id", n->allocs[i].alloc_id);
			model_append(&ok, allocs, ao);
		}
		model_set(&ok, o, "allocations", allocs);
	}
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int model_node_encode(const struct model_node *n, char **out, size_t *len, struct err *e)
{
	return model_dump(model_enc_node(n, MODEL_VIEW_STORE), "node", out, len, e);
}

int model_node_encode_api(const struct model_node *n, char **out, size_t *len, struct err *e)
{
	return model_dump(model_enc_node(n, MODEL_VIEW_API), "node", out, len, e);
}

void model_node_instance_tag(const char *instance_id, char out[MODEL_INSTANCE_TAG_LEN + 1])
{
	uint64_t h = 14695981039346656037ULL;

	/* FNV-1a, folded to 32 bits: a tag tells at most 32 bits of a 128-bit ID. */
	for (const unsigned char *p = (const unsigned char *)instance_id; *p; p++) {
		h ^= *p;
		h *= 1099511628211ULL;
	}
	snprintf(out, MODEL_INSTANCE_TAG_LEN + 1, "%08x", (unsigned)((h >> 32) ^ h));
}

void model_wipe_free(char *text, size_t len)
{
	if (!text)
		return;
	/* A volatile pointer keeps the compiler from dropping the wipe. */
	for (volatile char *p = text; len--; p++)
		*p = 0;
	free(text);
}
