/*
 * JSON encodings of the model (model.h gives the shapes): encoders for
 * the store view (everything a record needs, secrets and mount flags
 * included) and the API view (what a reader may see: no secrets, no mount
 * flags, plus the server's status fields). Decoders are in
 * model_decode.c and model_spec.c. The encoders write the text directly
 * (util/jsonw.h), the same bytes jansson's compact dump of the same tree
 * gave, without building the tree: a volume is encoded on every store
 * write and every API answer. The writer wipes what it frees, since a
 * store view holds secrets.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/model_int.h"
#include "util/jsonr.h"
#include "util/jsonw.h"

/* ---- encoding ---- */

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

/* The map m as an object. */
static void model_enc_map_object(struct jsonw *w, const struct model_map *m)
{
	jsonw_object_open(w);
	for (size_t i = 0; i < m->n; i++)
		jsonw_member_str(w, m->kv[i].key, m->kv[i].value);
	jsonw_object_close(w);
}

static void model_enc_map(struct jsonw *w, const char *key, size_t klen, const struct model_map *m)
{
	jsonw_lkey(w, key, klen);
	model_enc_map_object(w, m);
}

static void model_enc_topologies(struct jsonw *w, const char *key, size_t klen,
				 const struct model_topology *t, size_t n)
{
	jsonw_lkey(w, key, klen);
	jsonw_array_open(w);
	for (size_t i = 0; i < n; i++)
		model_enc_map_object(w, &t[i].segments);
	jsonw_array_close(w);
}

static void model_enc_cap(struct jsonw *w, const struct model_capability *c)
{
	jsonw_lmember_str(w, JSONW_KEY("access_mode"), model_access_name(c->access));
	jsonw_lmember_str(w, JSONW_KEY("attachment_mode"), model_attachment_name(c->attachment));
}

static void model_enc_claim(struct jsonw *w, const struct model_claim *c)
{
	jsonw_object_open(w);
	jsonw_lmember_str(w, JSONW_KEY("alloc_id"), c->alloc_id);
	jsonw_lmember_str(w, JSONW_KEY("node_id"), c->node_id);
	jsonw_lmember_str(w, JSONW_KEY("plugin_node_id"), c->plugin_node_id);
	jsonw_lmember_str(w, JSONW_KEY("mode"), model_claim_mode_name(c->mode));
	model_enc_cap(w, &c->cap);
	jsonw_lmember_bool(w, JSONW_KEY("read_only"), c->read_only);
	jsonw_lmember_str(w, JSONW_KEY("state"), model_claim_state_name(c->state));
	jsonw_lmember_int(w, JSONW_KEY("claimed_ms"), c->claimed_ms);
	jsonw_lmember_int(w, JSONW_KEY("updated_ms"), c->updated_ms);
	jsonw_lmember_str(w, JSONW_KEY("note"), c->note);
	jsonw_lmember_bool(w, JSONW_KEY("held_by_agent"), c->held_by_agent);
	if (c->node_expanded)
		jsonw_lmember_bool(w, JSONW_KEY("node_expanded"), true);
	jsonw_object_close(w);
}

static void model_enc_claims(struct jsonw *w, const char *key, size_t klen,
			     const struct model_claim *c, size_t n)
{
	jsonw_lkey(w, key, klen);
	jsonw_array_open(w);
	for (size_t i = 0; i < n; i++)
		model_enc_claim(w, &c[i]);
	jsonw_array_close(w);
}

static void model_enc_pub(struct jsonw *w, const struct model_publication *p)
{
	jsonw_object_open(w);
	jsonw_lmember_str(w, JSONW_KEY("node_id"), p->node_id);
	jsonw_lmember_str(w, JSONW_KEY("plugin_node_id"), p->plugin_node_id);
	jsonw_lmember_bool(w, JSONW_KEY("read_only"), p->read_only);
	model_enc_cap(w, &p->cap);
	jsonw_lmember_str(w, JSONW_KEY("state"), model_pub_state_name(p->state));
	model_enc_map(w, JSONW_KEY("context"), &p->context);
	jsonw_object_close(w);
}

static void model_enc_pubs(struct jsonw *w, const struct model_publication *p, size_t n)
{
	jsonw_lkey(w, JSONW_KEY("publications"));
	jsonw_array_open(w);
	for (size_t i = 0; i < n; i++)
		model_enc_pub(w, &p[i]);
	jsonw_array_close(w);
}

static void model_enc_status(struct jsonw *w, const struct model_status *s)
{
	jsonw_lkey(w, JSONW_KEY("status"));
	jsonw_object_open(w);
	jsonw_lmember_str(w, JSONW_KEY("last_error"), s->last_error);
	jsonw_lmember_int(w, JSONW_KEY("attempts"), s->attempts);
	jsonw_lmember_int(w, JSONW_KEY("next_attempt_ms"), s->next_attempt_ms);
	jsonw_object_close(w);
}

/* The spec keys of v. */
static void model_enc_volume_spec(struct jsonw *w, const struct model_volume *v,
				  enum model_view view)
{
	jsonw_lmember_str(w, JSONW_KEY("id"), v->id);
	jsonw_lmember_str(w, JSONW_KEY("name"), v->name);
	jsonw_lmember_str(w, JSONW_KEY("plugin_id"), v->plugin_id);
	jsonw_lmember_str(w, JSONW_KEY("external_id"), v->external_id);
	jsonw_lmember_int(w, JSONW_KEY("capacity_min"), v->capacity_min);
	jsonw_lmember_int(w, JSONW_KEY("capacity_max"), v->capacity_max);
	jsonw_lkey(w, JSONW_KEY("capabilities"));
	jsonw_array_open(w);
	for (size_t i = 0; i < v->ncaps; i++) {
		jsonw_object_open(w);
		model_enc_cap(w, &v->caps[i]);
		jsonw_object_close(w);
	}
	jsonw_array_close(w);
	jsonw_lkey(w, JSONW_KEY("mount_options"));
	jsonw_object_open(w);
	jsonw_lmember_str(w, JSONW_KEY("fs_type"), v->fs_type);
	if (view == MODEL_VIEW_STORE) {
		jsonw_lkey(w, JSONW_KEY("mount_flags"));
		jsonw_array_open(w);
		for (size_t i = 0; i < v->nmount_flags; i++)
			jsonw_str(w, v->mount_flags[i]);
		jsonw_array_close(w);
	}
	jsonw_object_close(w);
	model_enc_map(w, JSONW_KEY("parameters"), &v->parameters);
	model_enc_map(w, JSONW_KEY("mutable_parameters"), &v->mutable_parameters);
	if (view == MODEL_VIEW_STORE)
		model_enc_map(w, JSONW_KEY("secrets"), &v->secrets);
	model_enc_map(w, JSONW_KEY("context"), &v->context);
	jsonw_lkey(w, JSONW_KEY("topology_request"));
	jsonw_object_open(w);
	model_enc_topologies(w, JSONW_KEY("requisite"), v->requisite, v->nrequisite);
	model_enc_topologies(w, JSONW_KEY("preferred"), v->preferred, v->npreferred);
	jsonw_object_close(w);
	jsonw_lmember_str(w, JSONW_KEY("snapshot_source"), v->snapshot_source);
	jsonw_lmember_str(w, JSONW_KEY("clone_source"), v->clone_source);
}

static void model_enc_volume(struct jsonw *w, const struct model_volume *v, enum model_view view)
{
	jsonw_object_open(w);
	model_enc_volume_spec(w, v, view);
	jsonw_lmember_str(w, JSONW_KEY("state"), model_volume_state_name(v->state));
	jsonw_lmember_str(w, JSONW_KEY("failure"), v->failure);
	jsonw_lmember_int(w, JSONW_KEY("capacity"), v->capacity);
	model_enc_topologies(w, JSONW_KEY("accessible_topology"), v->accessible, v->naccessible);
	jsonw_lmember_bool(w, JSONW_KEY("node_expansion_required"), v->node_expansion_required);
	jsonw_lkey(w, JSONW_KEY("pending"));
	jsonw_object_open(w);
	jsonw_lmember_int(w, JSONW_KEY("capacity_min"), v->pending_capacity_min);
	model_enc_map(w, JSONW_KEY("mutable_parameters"), &v->pending_mutable);
	jsonw_object_close(w);
	model_enc_claims(w, JSONW_KEY("claims"), v->claims, v->nclaims);
	model_enc_claims(w, JSONW_KEY("past_claims"), v->past_claims, v->npast_claims);
	model_enc_pubs(w, v->pubs, v->npubs);
	jsonw_lmember_int(w, JSONW_KEY("created_ms"), v->created_ms);
	jsonw_lmember_int(w, JSONW_KEY("updated_ms"), v->updated_ms);
	if (view == MODEL_VIEW_API) {
		model_enc_status(w, &v->status);
		jsonw_lmember_int(w, JSONW_KEY("create_index"), (int64_t)v->create_index);
		jsonw_lmember_int(w, JSONW_KEY("modify_index"), (int64_t)v->modify_index);
		jsonw_lmember_bool(w, JSONW_KEY("schedulable"), v->schedulable);
		jsonw_lmember_str(w, JSONW_KEY("plugin_health"), v->plugin_health);
		jsonw_lmember_bool(w, JSONW_KEY("plugin_registered"), v->plugin_registered);
	}
	jsonw_object_close(w);
}

/* Hands w's text to *out; what names the object for the message. */
static int model_finish(struct jsonw *w, const char *what, char **out, size_t *len, struct err *e)
{
	if (jsonw_finish(w, out, len) != 0)
		return err_set(e, CSID_ENOMEM, "%s: encode: out of memory", what);
	return 0;
}

/* Volume records with a few claims fit; past claims take about 300 bytes each. */
#define MODEL_ENC_HINT 2048

/* Where each past claim of a history record's text starts and ends. */
struct model_hist_span {
	const char *start, *end;
};

/*
 * The claims' spans in the history record text (len bytes): at most cap
 * of them into spans (the newest cap), *n the number in the record.
 * Returns 0, or -1 when the text is not a history record.
 */
static int model_history_spans(const char *text, size_t len, struct model_hist_span *spans,
			       size_t cap, size_t *n)
{
	struct jsonr r;
	size_t keys = 0, items = 0;
	char key[16];
	size_t klen;
	bool seen = false;
	int k;

	*n = 0;
	jsonr_init(&r, text, len);
	if (jsonr_peek(&r) != JSONR_OBJECT || jsonr_open(&r))
		return -1;
	while ((k = jsonr_key(&r, &keys, key, sizeof(key), &klen)) == 1) {
		if (klen != 11 || strcmp(key, "past_claims") != 0) {
			if (jsonr_skip(&r))
				return -1;
			continue;
		}
		if (seen || jsonr_peek(&r) != JSONR_ARRAY || jsonr_open(&r))
			return -1;
		seen = true;
		while ((k = jsonr_item(&r, &items)) == 1) {
			struct model_hist_span *sp = &spans[*n % cap];

			if (jsonr_peek(&r) != JSONR_OBJECT)
				return -1;
			sp->start = r.p;
			if (jsonr_skip(&r))
				return -1;
			sp->end = r.p;
			(*n)++;
		}
		if (k < 0)
			return -1;
	}
	return k < 0 || jsonr_end(&r) ? -1 : 0;
}

/*
 * Whether map can be old's (len bytes): its length, and each claim an
 * object within it, in order. A map comes from the append that wrote the
 * text at that store index, so this only guards against a slip.
 */
static bool model_history_map_fits(const struct model_history_map *map, const char *old, size_t len)
{
	size_t at = 0;

	if (map->len != len || map->n > MODEL_PAST_CLAIMS_MAX)
		return false;
	for (size_t i = 0; i < map->n; i++) {
		if (map->start[i] < at || map->end[i] <= map->start[i] || map->end[i] > len ||
		    old[map->start[i]] != '{' || old[map->end[i] - 1] != '}')
			return false;
		at = map->end[i];
	}
	return true;
}

int model_history_append(const char *old, size_t old_len, const struct model_history_map *known,
			 const struct model_claim *c, size_t n, char **out, size_t *len,
			 struct model_history_map *made, struct err *e)
{
	struct model_hist_span spans[MODEL_PAST_CLAIMS_MAX];
	size_t nold = 0, keep, first, k = 0;
	struct jsonw w;
	int rc;

	if (known && old_len && model_history_map_fits(known, old, old_len)) {
		nold = known->n;
		for (size_t i = 0; i < nold; i++)
			spans[i] =
			    (struct model_hist_span){old + known->start[i], old + known->end[i]};
	} else if (old_len &&
		   model_history_spans(old, old_len, spans, MODEL_PAST_CLAIMS_MAX, &nold) != 0) {
		return err_set(e, CSID_EPROTO, "claim history record: damaged");
	}
	if (n > MODEL_PAST_CLAIMS_MAX) {
		c += n - MODEL_PAST_CLAIMS_MAX;
		n = MODEL_PAST_CLAIMS_MAX;
	}
	keep = nold < MODEL_PAST_CLAIMS_MAX - n ? nold : MODEL_PAST_CLAIMS_MAX - n;
	/* The spans ring holds the newest MODEL_PAST_CLAIMS_MAX; the oldest kept is first. */
	first = nold - keep;
	jsonw_init(&w, old_len + 64 + 320 * n);
	jsonw_object_open(&w);
	jsonw_lkey(&w, JSONW_KEY("past_claims"));
	jsonw_array_open(&w);
	for (size_t i = first; i < nold + n; i++, k++) {
		size_t at = w.len;

		if (i < nold) {
			const struct model_hist_span *sp = &spans[i % MODEL_PAST_CLAIMS_MAX];

			jsonw_raw_value(&w, sp->start, (size_t)(sp->end - sp->start));
		} else {
			model_enc_claim(&w, &c[i - nold]);
		}
		/* Past the comma before it, when there is one. */
		at += k > 0;
		if (made) {
			made->start[k] = (uint32_t)at;
			made->end[k] = (uint32_t)w.len;
		}
	}
	jsonw_array_close(&w);
	jsonw_object_close(&w);
	rc = model_finish(&w, "claim history", out, len, e);
	if (made) {
		/* None for a text whose offsets would not fit (never at 16 claims). */
		made->n = rc || *len > UINT32_MAX ? 0 : k;
		made->len = made->n ? *len : 0;
	}
	return rc;
}

int model_volume_encode(const struct model_volume *v, enum model_view view, char **out, size_t *len,
			struct err *e)
{
	struct jsonw w;

	jsonw_init(&w, MODEL_ENC_HINT + 320 * (v->nclaims + v->npast_claims));
	model_enc_volume(&w, v, view);
	return model_finish(&w, "volume", out, len, e);
}

int model_claim_answer_encode(const struct model_volume *v, const struct model_claim *c,
			      const struct model_publication *p, const char *state,
			      const struct model_volume *stage, char **out, size_t *len,
			      struct err *e)
{
	struct jsonw w;

	jsonw_init(&w, MODEL_ENC_HINT + 320 * (v->nclaims + v->npast_claims));
	jsonw_object_open(&w);
	jsonw_lkey(&w, JSONW_KEY("volume"));
	model_enc_volume(&w, v, MODEL_VIEW_API);
	jsonw_lkey(&w, JSONW_KEY("claim"));
	if (c)
		model_enc_claim(&w, c);
	else
		jsonw_str(&w, NULL);
	jsonw_lkey(&w, JSONW_KEY("publication"));
	if (p)
		model_enc_pub(&w, p);
	else
		jsonw_str(&w, NULL);
	jsonw_lmember_str(&w, JSONW_KEY("publication_state"), state);
	if (stage) {
		jsonw_lkey(&w, JSONW_KEY("node_stage"));
		jsonw_object_open(&w);
		model_enc_map(&w, JSONW_KEY("secrets"), &stage->secrets);
		jsonw_lkey(&w, JSONW_KEY("mount_flags"));
		jsonw_array_open(&w);
		for (size_t i = 0; i < stage->nmount_flags; i++)
			jsonw_str(&w, stage->mount_flags[i]);
		jsonw_array_close(&w);
		jsonw_lkey(&w, JSONW_KEY("fs_type"));
		jsonw_str(&w, stage->fs_type);
		jsonw_object_close(&w);
	}
	jsonw_object_close(&w);
	return model_finish(&w, "claim answer", out, len, e);
}

int model_snapshot_encode(const struct model_snapshot *s, enum model_view view, char **out,
			  size_t *len, struct err *e)
{
	struct jsonw w;

	jsonw_init(&w, 0);
	jsonw_object_open(&w);
	jsonw_lmember_str(&w, JSONW_KEY("id"), s->id);
	jsonw_lmember_str(&w, JSONW_KEY("volume_id"), s->volume_id);
	jsonw_lmember_str(&w, JSONW_KEY("plugin_id"), s->plugin_id);
	jsonw_lmember_str(&w, JSONW_KEY("external_id"), s->external_id);
	jsonw_lmember_str(&w, JSONW_KEY("name"), s->name);
	model_enc_map(&w, JSONW_KEY("parameters"), &s->parameters);
	if (view == MODEL_VIEW_STORE)
		model_enc_map(&w, JSONW_KEY("secrets"), &s->secrets);
	jsonw_lmember_str(&w, JSONW_KEY("state"), model_snapshot_state_name(s->state));
	jsonw_lmember_str(&w, JSONW_KEY("failure"), s->failure);
	jsonw_lmember_bool(&w, JSONW_KEY("ready_to_use"), s->ready_to_use);
	jsonw_lmember_int(&w, JSONW_KEY("size_bytes"), s->size_bytes);
	jsonw_lmember_int(&w, JSONW_KEY("creation_time_ms"), s->creation_time_ms);
	jsonw_lmember_int(&w, JSONW_KEY("created_ms"), s->created_ms);
	if (view == MODEL_VIEW_API) {
		model_enc_status(&w, &s->status);
		jsonw_lmember_int(&w, JSONW_KEY("create_index"), (int64_t)s->create_index);
		jsonw_lmember_int(&w, JSONW_KEY("modify_index"), (int64_t)s->modify_index);
	}
	jsonw_object_close(&w);
	return model_finish(&w, "snapshot", out, len, e);
}

static void model_enc_node(struct jsonw *w, const struct model_node *n, enum model_view view)
{
	char tag[MODEL_INSTANCE_TAG_LEN + 1];

	jsonw_object_open(w);
	jsonw_lmember_str(w, JSONW_KEY("id"), n->id);
	if (view == MODEL_VIEW_STORE) {
		jsonw_lmember_str(w, JSONW_KEY("instance_id"), n->instance_id);
	} else if (n->instance_id) {
		model_node_instance_tag(n->instance_id, tag);
		jsonw_lmember_str(w, JSONW_KEY("instance_tag"), tag);
	}
	jsonw_lmember_str(w, JSONW_KEY("status"), model_node_status_name(n->status));
	jsonw_lmember_int(w, JSONW_KEY("registered_ms"), n->registered_ms);
	jsonw_lmember_int(w, JSONW_KEY("updated_ms"), n->updated_ms);
	jsonw_lmember_str(w, JSONW_KEY("address"), n->address);
	jsonw_lkey(w, JSONW_KEY("plugins"));
	jsonw_array_open(w);
	for (size_t i = 0; i < n->nplugins; i++) {
		const struct model_node_plugin *p = &n->plugins[i];

		jsonw_object_open(w);
		jsonw_lmember_str(w, JSONW_KEY("plugin_id"), p->plugin_id);
		jsonw_lmember_str(w, JSONW_KEY("type"), model_plugin_type_name(p->type));
		jsonw_lmember_bool(w, JSONW_KEY("healthy"), p->healthy);
		jsonw_lmember_str(w, JSONW_KEY("health"), p->health);
		jsonw_lmember_str(w, JSONW_KEY("version"), p->version);
		jsonw_lkey(w, JSONW_KEY("capabilities"));
		jsonw_array_open(w);
		for (size_t j = 0; j < p->ncaps; j++)
			jsonw_str(w, p->caps[j]);
		jsonw_array_close(w);
		jsonw_lmember_str(w, JSONW_KEY("plugin_node_id"), p->plugin_node_id);
		jsonw_lmember_int(w, JSONW_KEY("max_volumes"), p->max_volumes);
		model_enc_map(w, JSONW_KEY("topology"), &p->topology.segments);
		jsonw_object_close(w);
	}
	jsonw_array_close(w);
	if (n->allocs_reported) {
		jsonw_lkey(w, JSONW_KEY("allocations"));
		jsonw_array_open(w);
		for (size_t i = 0; i < n->nallocs; i++) {
			jsonw_object_open(w);
			jsonw_lmember_str(w, JSONW_KEY("volume_id"), n->allocs[i].volume_id);
			jsonw_lmember_str(w, JSONW_KEY("alloc_id"), n->allocs[i].alloc_id);
			jsonw_object_close(w);
		}
		jsonw_array_close(w);
	}
	jsonw_object_close(w);
}

int model_node_encode(const struct model_node *n, char **out, size_t *len, struct err *e)
{
	struct jsonw w;

	jsonw_init(&w, 0);
	model_enc_node(&w, n, MODEL_VIEW_STORE);
	return model_finish(&w, "node", out, len, e);
}

int model_node_encode_api(const struct model_node *n, char **out, size_t *len, struct err *e)
{
	struct jsonw w;

	jsonw_init(&w, 0);
	model_enc_node(&w, n, MODEL_VIEW_API);
	return model_finish(&w, "node", out, len, e);
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
	explicit_bzero(text, len);
	free(text);
}
