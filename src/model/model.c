/*
 * The model's plain functions: names and parsers of its enums, ID checks,
 * string maps (sorted, unique keys), topology matching, the claim
 * lifecycle table and its one transition function, sizes, deep copies
 * and lookups. Validation is in model_validate.c.
 * No I/O except the log line of a claim transition.
 *
 * Claim lifecycle (model_claim_table below; see model.h):
 *   claimed                 -> node-unpublished, freed
 *   node-unpublished        -> controller-unpublished, freed
 *   controller-unpublished  -> freed
 *   freed                   -> removed
 *   removed                 -> (none)
 */
#include "model/model.h"
#include "model/model_int.h"

#include <stdio.h>
#include <string.h>

#include "util/log.h"

/* ---- names ---- */

#define MODEL_NAMES_N(t) (sizeof(t) / sizeof((t)[0]))
#define MODEL_NAMES(var, what, table) \
	const struct model_names var = {what, table, (int)MODEL_NAMES_N(table)}

static const char *const model_access_table[] = {
    [MODEL_ACCESS_SINGLE_NODE_WRITER] = "single-node-writer",
    [MODEL_ACCESS_SINGLE_NODE_READER_ONLY] = "single-node-reader-only",
    [MODEL_ACCESS_MULTI_NODE_READER_ONLY] = "multi-node-reader-only",
    [MODEL_ACCESS_MULTI_NODE_SINGLE_WRITER] = "multi-node-single-writer",
    [MODEL_ACCESS_MULTI_NODE_MULTI_WRITER] = "multi-node-multi-writer",
    [MODEL_ACCESS_SINGLE_NODE_SINGLE_WRITER] = "single-node-single-writer",
    [MODEL_ACCESS_SINGLE_NODE_MULTI_WRITER] = "single-node-multi-writer",
};
static const char *const model_attachment_table[] = {
    [MODEL_ATTACH_FILE_SYSTEM] = "file-system",
    [MODEL_ATTACH_BLOCK_DEVICE] = "block-device",
};
static const char *const model_claim_state_table[] = {
    [MODEL_CLAIM_CLAIMED] = "claimed",
    [MODEL_CLAIM_NODE_UNPUBLISHED] = "node-unpublished",
    [MODEL_CLAIM_CONTROLLER_UNPUBLISHED] = "controller-unpublished",
    [MODEL_CLAIM_FREED] = "freed",
    [MODEL_CLAIM_REMOVED] = "removed",
};
static const char *const model_claim_mode_table[] = {
    [MODEL_CLAIM_READ] = "read",
    [MODEL_CLAIM_WRITE] = "write",
};
static const char *const model_pub_state_table[] = {
    [MODEL_PUB_PUBLISHING] = "publishing",
    [MODEL_PUB_PUBLISHED] = "published",
    [MODEL_PUB_UNPUBLISHING] = "unpublishing",
};
static const char *const model_volume_state_table[] = {
    [MODEL_VOL_CREATING] = "creating", [MODEL_VOL_REGISTERING] = "registering",
    [MODEL_VOL_READY] = "ready",       [MODEL_VOL_DELETING] = "deleting",
    [MODEL_VOL_FAILED] = "failed",
};
static const char *const model_snapshot_state_table[] = {
    [MODEL_SNAP_CREATING] = "creating",
    [MODEL_SNAP_READY] = "ready",
    [MODEL_SNAP_DELETING] = "deleting",
    [MODEL_SNAP_FAILED] = "failed",
};
static const char *const model_plugin_type_table[] = {
    [MODEL_PLUGIN_CONTROLLER] = "controller",
    [MODEL_PLUGIN_NODE] = "node",
};
static const char *const model_node_status_table[] = {
    [MODEL_NODE_READY] = "ready",
    [MODEL_NODE_DOWN] = "down",
};

MODEL_NAMES(model_names_access, "access mode", model_access_table);
MODEL_NAMES(model_names_attachment, "attachment mode", model_attachment_table);
MODEL_NAMES(model_names_claim_state, "claim state", model_claim_state_table);
MODEL_NAMES(model_names_claim_mode, "claim mode", model_claim_mode_table);
MODEL_NAMES(model_names_pub_state, "publication state", model_pub_state_table);
MODEL_NAMES(model_names_volume_state, "volume state", model_volume_state_table);
MODEL_NAMES(model_names_snapshot_state, "snapshot state", model_snapshot_state_table);
MODEL_NAMES(model_names_plugin_type, "plugin type", model_plugin_type_table);
MODEL_NAMES(model_names_node_status, "node status", model_node_status_table);

const char *model_names_get(const struct model_names *t, int v)
{
	return v >= 0 && v < t->n ? t->names[v] : NULL;
}

int model_names_parse(const struct model_names *t, const char *s, int *out, struct err *e)
{
	char choices[256];
	size_t used = 0;

	for (int i = 0; i < t->n; i++)
		if (t->names[i] && s && strcmp(t->names[i], s) == 0) {
			*out = i;
			return 0;
		}
	choices[0] = '\0';
	for (int i = 0; i < t->n; i++) {
		int k;

		if (!t->names[i])
			continue;
		k = snprintf(choices + used, sizeof(choices) - used, "%s%s", used ? ", " : "",
			     t->names[i]);
		if (k < 0 || (size_t)k >= sizeof(choices) - used)
			break;
		used += (size_t)k;
	}
	return err_set(e, CSID_EINVAL, "unknown %s (expected one of: %s)", t->what, choices);
}

const char *model_access_name(enum model_access a)
{
	return model_names_get(&model_names_access, (int)a);
}

int model_access_parse(const char *s, enum model_access *out, struct err *e)
{
	int v = 0;
	int rc = model_names_parse(&model_names_access, s, &v, e);

	if (!rc)
		*out = (enum model_access)v;
	return rc;
}

const char *model_attachment_name(enum model_attachment a)
{
	return model_names_get(&model_names_attachment, (int)a);
}

int model_attachment_parse(const char *s, enum model_attachment *out, struct err *e)
{
	int v = 0;
	int rc = model_names_parse(&model_names_attachment, s, &v, e);

	if (!rc)
		*out = (enum model_attachment)v;
	return rc;
}

bool model_access_writable(enum model_access a)
{
	return model_access_name(a) && a != MODEL_ACCESS_SINGLE_NODE_READER_ONLY &&
	       a != MODEL_ACCESS_MULTI_NODE_READER_ONLY;
}

bool model_access_multi_node(enum model_access a)
{
	return a == MODEL_ACCESS_MULTI_NODE_READER_ONLY ||
	       a == MODEL_ACCESS_MULTI_NODE_SINGLE_WRITER ||
	       a == MODEL_ACCESS_MULTI_NODE_MULTI_WRITER;
}

const char *model_claim_state_name(enum model_claim_state s)
{
	return model_names_get(&model_names_claim_state, (int)s);
}

int model_claim_state_parse(const char *s, enum model_claim_state *out, struct err *e)
{
	int v = 0;
	int rc = model_names_parse(&model_names_claim_state, s, &v, e);

	if (!rc)
		*out = (enum model_claim_state)v;
	return rc;
}

const char *model_claim_mode_name(enum model_claim_mode m)
{
	return model_names_get(&model_names_claim_mode, (int)m);
}

int model_claim_mode_parse(const char *s, enum model_claim_mode *out, struct err *e)
{
	int v = 0;
	int rc = model_names_parse(&model_names_claim_mode, s, &v, e);

	if (!rc)
		*out = (enum model_claim_mode)v;
	return rc;
}

const char *model_pub_state_name(enum model_pub_state s)
{
	return model_names_get(&model_names_pub_state, (int)s);
}

const char *model_volume_state_name(enum model_volume_state s)
{
	return model_names_get(&model_names_volume_state, (int)s);
}

const char *model_snapshot_state_name(enum model_snapshot_state s)
{
	return model_names_get(&model_names_snapshot_state, (int)s);
}

const char *model_plugin_type_name(enum model_plugin_type t)
{
	return model_names_get(&model_names_plugin_type, (int)t);
}

const char *model_node_status_name(enum model_node_status s)
{
	return model_names_get(&model_names_node_status, (int)s);
}

/* ---- IDs ---- */

static bool model_id_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-';
}

const char *model_sanitize(char *buf, size_t cap, const char *s, size_t len)
{
	size_t o = 0, i;

	for (i = 0; i < len && o + 4 < cap && i < 32; i++)
		buf[o++] = model_id_char(s[i]) ? s[i] : '?';
	if (i < len)
		buf[o++] = '.', buf[o++] = '.', buf[o++] = '.';
	buf[o] = '\0';
	return buf;
}

int model_id_check(const char *what, const char *id, size_t len, struct err *e)
{
	char q[48];

	if (!id || len == 0)
		return err_set(e, CSID_EINVAL, "%s: missing", what);
	if (len > MODEL_ID_MAX)
		return err_set(e, CSID_EINVAL, "%s \"%s\": longer than %d bytes", what,
			       model_sanitize(q, sizeof(q), id, len), MODEL_ID_MAX);
	if (memchr(id, '\0', len))
		return err_set(e, CSID_EINVAL, "%s \"%s\": contains a NUL byte", what,
			       model_sanitize(q, sizeof(q), id, len));
	for (size_t i = 0; i < len; i++)
		if (!model_id_char(id[i]))
			return err_set(e, CSID_EINVAL,
				       "%s \"%s\": only letters, digits, '.', '_' and '-' allowed",
				       what, model_sanitize(q, sizeof(q), id, len));
	if ((len == 1 && id[0] == '.') || (len == 2 && id[0] == '.' && id[1] == '.'))
		return err_set(e, CSID_EINVAL, "%s \"%s\": not a valid ID", what,
			       model_sanitize(q, sizeof(q), id, len));
	return 0;
}

static bool model_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* CSI (GetPluginInfoResponse.name): at most 63 characters, domain name
 * notation; we also allow '_' and upper case as real plugins use them. */
int model_plugin_id_check(const char *id, struct err *e)
{
	size_t len = id ? strlen(id) : 0;
	char q[48];

	if (len == 0)
		return err_set(e, CSID_EINVAL, "plugin id: missing");
	if (len > MODEL_PLUGIN_ID_MAX)
		return err_set(e, CSID_EINVAL, "plugin id \"%s\": longer than %d bytes",
			       model_sanitize(q, sizeof(q), id, len), MODEL_PLUGIN_ID_MAX);
	for (size_t i = 0; i < len; i++)
		if (!model_id_char(id[i]) || (id[i] == '.' && id[i + 1] == '.'))
			return err_set(e, CSID_EINVAL,
				       "plugin id \"%s\": expected domain notation "
				       "(letters, digits, '.', '_', '-')",
				       model_sanitize(q, sizeof(q), id, len));
	if (!model_alnum(id[0]) || !model_alnum(id[len - 1]))
		return err_set(e, CSID_EINVAL,
			       "plugin id \"%s\": must start and end with a letter or digit",
			       model_sanitize(q, sizeof(q), id, len));
	return 0;
}

/* ---- maps and topology ---- */

const char *model_map_get(const struct model_map *m, const char *key)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(m->kv[mid].key, key);

		if (c == 0)
			return m->kv[mid].value;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

int model_map_put(struct arena *a, struct model_map *m, const char *key, const char *value,
		  struct err *e)
{
	size_t pos = 0;
	struct model_kv *kv;
	char *v = arena_strdup(a, value);

	if (!v)
		return err_set(e, CSID_ENOMEM, "map: out of memory");
	while (pos < m->n && strcmp(m->kv[pos].key, key) < 0)
		pos++;
	if (pos < m->n && strcmp(m->kv[pos].key, key) == 0) {
		m->kv[pos].value = v;
		return 0;
	}
	/* Arena memory is not reallocated: the grown array is a new copy. */
	kv = arena_alloc(a, (m->n + 1) * sizeof(*kv));
	if (!kv)
		return err_set(e, CSID_ENOMEM, "map: out of memory");
	if (pos)
		memcpy(kv, m->kv, pos * sizeof(*kv));
	if (m->n > pos)
		memcpy(kv + pos + 1, m->kv + pos, (m->n - pos) * sizeof(*kv));
	kv[pos].key = arena_strdup(a, key);
	kv[pos].value = v;
	if (!kv[pos].key)
		return err_set(e, CSID_ENOMEM, "map: out of memory");
	m->kv = kv;
	m->n++;
	return 0;
}

bool model_map_equal(const struct model_map *a, const struct model_map *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->kv[i].key, b->kv[i].key) != 0 ||
		    strcmp(a->kv[i].value, b->kv[i].value) != 0)
			return false;
	return true;
}

bool model_topology_match(const struct model_topology *t, const struct model_topology *node)
{
	for (size_t i = 0; i < t->segments.n; i++) {
		const char *v = node ? model_map_get(&node->segments, t->segments.kv[i].key) : NULL;

		if (!v || strcmp(v, t->segments.kv[i].value) != 0)
			return false;
	}
	return true;
}

bool model_volume_reachable(const struct model_volume *v, const struct model_topology *node)
{
	const struct model_topology *t = v->naccessible ? v->accessible : v->requisite;
	size_t n = v->naccessible ? v->naccessible : v->nrequisite;

	if (n == 0)
		return true;
	for (size_t i = 0; i < n; i++)
		if (model_topology_match(&t[i], node))
			return true;
	return false;
}

/* ---- claim lifecycle ---- */

/* Allowed next states of each state (see the table at the top). */
static const bool model_claim_table[MODEL_CLAIM_STATE_COUNT][MODEL_CLAIM_STATE_COUNT] = {
    [MODEL_CLAIM_CLAIMED] = {[MODEL_CLAIM_NODE_UNPUBLISHED] = true, [MODEL_CLAIM_FREED] = true},
    [MODEL_CLAIM_NODE_UNPUBLISHED] =
	{[MODEL_CLAIM_CONTROLLER_UNPUBLISHED] = true, [MODEL_CLAIM_FREED] = true},
    [MODEL_CLAIM_CONTROLLER_UNPUBLISHED] = {[MODEL_CLAIM_FREED] = true},
    [MODEL_CLAIM_FREED] = {[MODEL_CLAIM_REMOVED] = true},
};

bool model_claim_can_move(enum model_claim_state from, enum model_claim_state to)
{
	if ((unsigned)from >= MODEL_CLAIM_STATE_COUNT || (unsigned)to >= MODEL_CLAIM_STATE_COUNT)
		return false;
	return model_claim_table[from][to];
}

int model_claim_transition(struct arena *a, const char *volume_id, struct model_claim *c,
			   enum model_claim_state to, const char *note, int64_t now_ms,
			   struct err *e)
{
	const char *from_name = model_claim_state_name(c->state);
	const char *to_name = model_claim_state_name(to);
	char qv[48], qa[48], qn[256];
	char *n = NULL;

	if (!model_claim_can_move(c->state, to))
		return err_set(e, CSID_EPRECOND, "claim %s/%s: cannot move from %s to %s",
			       model_sanitize(qv, sizeof(qv), volume_id, strlen(volume_id)),
			       model_sanitize(qa, sizeof(qa), c->alloc_id, strlen(c->alloc_id)),
			       from_name ? from_name : "an unknown state",
			       to_name ? to_name : "an unknown state");
	if (note && !(n = arena_strdup(a, note)))
		return err_set(e, CSID_ENOMEM, "claim: out of memory");
	c->state = to;
	c->updated_ms = now_ms;
	c->note = n;
	log_info("msg=\"claim %s/%s: %s -> %s\" note=%s",
		 model_sanitize(qv, sizeof(qv), volume_id, strlen(volume_id)),
		 model_sanitize(qa, sizeof(qa), c->alloc_id, strlen(c->alloc_id)), from_name,
		 to_name, log_q(qn, sizeof(qn), note ? note : "-"));
	return 0;
}

struct model_claim *model_volume_claim(const struct model_volume *v, const char *alloc_id)
{
	for (size_t i = 0; i < v->nclaims; i++)
		if (strcmp(v->claims[i].alloc_id, alloc_id) == 0)
			return &v->claims[i];
	return NULL;
}

struct model_publication *model_volume_pub(const struct model_volume *v, const char *node_id)
{
	for (size_t i = 0; i < v->npubs; i++)
		if (strcmp(v->pubs[i].node_id, node_id) == 0)
			return &v->pubs[i];
	return NULL;
}

int model_volume_claim_move(struct arena *a, struct model_volume *v, const char *alloc_id,
			    enum model_claim_state to, const char *note, int64_t now_ms,
			    struct err *e)
{
	struct model_claim *c = model_volume_claim(v, alloc_id), moved, *past, *claims;
	size_t keep, idx;
	int rc;

	if (!c) {
		char q[48];

		return err_set(e, CSID_ENOTFOUND, "volume %s: no active claim of alloc %s", v->id,
			       model_sanitize(q, sizeof(q), alloc_id, strlen(alloc_id)));
	}
	moved = *c;
	rc = model_claim_transition(a, v->id, &moved, to, note, now_ms, e);
	if (rc)
		return rc;
	if (to != MODEL_CLAIM_FREED) {
		*c = moved;
		return 0;
	}
	idx = (size_t)(c - v->claims);
	keep =
	    v->npast_claims < MODEL_PAST_CLAIMS_MAX ? v->npast_claims : MODEL_PAST_CLAIMS_MAX - 1;
	past = arena_alloc(a, (keep + 1) * sizeof(*past));
	claims = v->nclaims > 1 ? arena_alloc(a, (v->nclaims - 1) * sizeof(*claims)) : NULL;
	if (!past || (v->nclaims > 1 && !claims))
		return err_set(e, CSID_ENOMEM, "volume %s: out of memory", v->id);
	for (size_t i = 0; i + keep < v->npast_claims; i++) {
		struct model_claim gone = v->past_claims[i];

		model_claim_transition(a, v->id, &gone, MODEL_CLAIM_REMOVED, "past claims full",
				       now_ms, NULL);
	}
	if (keep)
		memcpy(past, v->past_claims + (v->npast_claims - keep), keep * sizeof(*past));
	past[keep] = moved;
	if (idx)
		memcpy(claims, v->claims, idx * sizeof(*claims));
	if (v->nclaims > idx + 1)
		memcpy(claims + idx, v->claims + idx + 1, (v->nclaims - idx - 1) * sizeof(*claims));
	v->past_claims = past;
	v->npast_claims = keep + 1;
	v->claims = claims;
	v->nclaims--;
	return 0;
}

/* ---- sizes ---- */

int model_parse_size(const char *s, int64_t *out, struct err *e)
{
	static const struct {
		const char *suffix;
		int64_t mult;
	} units[] = {
	    {"", 1},
	    {"B", 1},
	    {"K", 1000},
	    {"KB", 1000},
	    {"Ki", 1024},
	    {"KiB", 1024},
	    {"M", 1000000},
	    {"MB", 1000000},
	    {"Mi", 1048576},
	    {"MiB", 1048576},
	    {"G", 1000000000},
	    {"GB", 1000000000},
	    {"Gi", 1073741824},
	    {"GiB", 1073741824},
	    {"T", 1000000000000},
	    {"TB", 1000000000000},
	    {"Ti", 1099511627776},
	    {"TiB", 1099511627776},
	    {"P", 1000000000000000},
	    {"PB", 1000000000000000},
	    {"Pi", 1125899906842624},
	    {"PiB", 1125899906842624},
	};
	int64_t n = 0;
	const char *p = s;

	if (!s || !*s)
		return err_set(e, CSID_EINVAL, "size: empty");
	if (*p < '0' || *p > '9')
		return err_set(e, CSID_EINVAL,
			       "size: expected a number of bytes with an optional unit "
			       "(e.g. 10GiB, 500M)");
	for (; *p >= '0' && *p <= '9'; p++) {
		if (n > (INT64_MAX - (*p - '0')) / 10)
			return err_set(e, CSID_ERANGE, "size: too large");
		n = n * 10 + (*p - '0');
	}
	for (size_t i = 0; i < MODEL_NAMES_N(units); i++) {
		if (strcmp(p, units[i].suffix) != 0)
			continue;
		if (n > INT64_MAX / units[i].mult)
			return err_set(e, CSID_ERANGE, "size: too large");
		*out = n * units[i].mult;
		return 0;
	}
	return err_set(e, CSID_EINVAL,
		       "size: unknown unit (use B, K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, TiB, "
		       "P, PB, PiB)");
}

/* ---- copies ---- */

/* Copies a string into a; *ok turns false when memory runs out. */
static char *model_dup(struct arena *a, const char *s, bool *ok)
{
	char *d;

	if (!s)
		return NULL;
	d = arena_strdup(a, s);
	if (!d)
		*ok = false;
	return d;
}

/* An array of n elements of size bytes copied into a (NULL for n == 0). */
static void *model_dup_array(struct arena *a, const void *src, size_t n, size_t size, bool *ok)
{
	void *d;

	if (!n || !src)
		return NULL;
	d = arena_alloc(a, n * size);
	if (!d) {
		*ok = false;
		return NULL;
	}
	memcpy(d, src, n * size);
	return d;
}

static void model_copy_map(struct arena *a, struct model_map *m, bool *ok)
{
	m->kv = model_dup_array(a, m->kv, m->n, sizeof(*m->kv), ok);
	for (size_t i = 0; *ok && i < m->n; i++) {
		m->kv[i].key = model_dup(a, m->kv[i].key, ok);
		m->kv[i].value = model_dup(a, m->kv[i].value, ok);
	}
	if (!*ok)
		m->n = 0;
}

static struct model_topology *model_copy_topologies(struct arena *a, const struct model_topology *t,
						    size_t n, bool *ok)
{
	struct model_topology *d = model_dup_array(a, t, n, sizeof(*t), ok);

	for (size_t i = 0; d && *ok && i < n; i++)
		model_copy_map(a, &d[i].segments, ok);
	return d;
}

static void model_copy_claims(struct arena *a, struct model_claim **claims, size_t n, bool *ok)
{
	struct model_claim *d = model_dup_array(a, *claims, n, sizeof(**claims), ok);

	for (size_t i = 0; d && *ok && i < n; i++) {
		d[i].alloc_id = model_dup(a, d[i].alloc_id, ok);
		d[i].node_id = model_dup(a, d[i].node_id, ok);
		d[i].plugin_node_id = model_dup(a, d[i].plugin_node_id, ok);
		d[i].note = model_dup(a, d[i].note, ok);
	}
	*claims = d;
}

int model_volume_copy(struct arena *a, const struct model_volume *v, struct model_volume **out,
		      struct err *e)
{
	struct model_volume *d = arena_alloc(a, sizeof(*d));
	bool ok = d != NULL;

	if (!ok)
		return err_set(e, CSID_ENOMEM, "volume copy: out of memory");
	*d = *v;
	d->id = model_dup(a, v->id, &ok);
	d->name = model_dup(a, v->name, &ok);
	d->plugin_id = model_dup(a, v->plugin_id, &ok);
	d->external_id = model_dup(a, v->external_id, &ok);
	d->caps = model_dup_array(a, v->caps, v->ncaps, sizeof(*v->caps), &ok);
	d->fs_type = model_dup(a, v->fs_type, &ok);
	d->mount_flags =
	    model_dup_array(a, v->mount_flags, v->nmount_flags, sizeof(*v->mount_flags), &ok);
	for (size_t i = 0; ok && i < v->nmount_flags; i++)
		d->mount_flags[i] = model_dup(a, v->mount_flags[i], &ok);
	model_copy_map(a, &d->parameters, &ok);
	model_copy_map(a, &d->mutable_parameters, &ok);
	model_copy_map(a, &d->secrets, &ok);
	model_copy_map(a, &d->context, &ok);
	d->requisite = model_copy_topologies(a, v->requisite, v->nrequisite, &ok);
	d->preferred = model_copy_topologies(a, v->preferred, v->npreferred, &ok);
	d->snapshot_source = model_dup(a, v->snapshot_source, &ok);
	d->clone_source = model_dup(a, v->clone_source, &ok);
	d->accessible = model_copy_topologies(a, v->accessible, v->naccessible, &ok);
	model_copy_map(a, &d->pending_mutable, &ok);
	model_copy_claims(a, &d->claims, v->nclaims, &ok);
	model_copy_claims(a, &d->past_claims, v->npast_claims, &ok);
	d->pubs = model_dup_array(a, v->pubs, v->npubs, sizeof(*v->pubs), &ok);
	for (size_t i = 0; ok && i < v->npubs; i++) {
		d->pubs[i].node_id = model_dup(a, v->pubs[i].node_id, &ok);
		d->pubs[i].plugin_node_id = model_dup(a, v->pubs[i].plugin_node_id, &ok);
		model_copy_map(a, &d->pubs[i].context, &ok);
	}
	d->failure = model_dup(a, v->failure, &ok);
	d->status.last_error = model_dup(a, v->status.last_error, &ok);
	d->plugin_health = model_dup(a, v->plugin_health, &ok);
	if (!ok)
		return err_set(e, CSID_ENOMEM, "volume copy: out of memory");
	*out = d;
	return 0;
}

int model_snapshot_copy(struct arena *a, const struct model_snapshot *s,
			struct model_snapshot **out, struct err *e)
{
	struct model_snapshot *d = arena_alloc(a, sizeof(*d));
	bool ok = d != NULL;

	if (!ok)
		return err_set(e, CSID_ENOMEM, "snapshot copy: out of memory");
	*d = *s;
	d->id = model_dup(a, s->id, &ok);
	d->volume_id = model_dup(a, s->volume_id, &ok);
	d->plugin_id = model_dup(a, s->plugin_id, &ok);
	d->external_id = model_dup(a, s->external_id, &ok);
	d->name = model_dup(a, s->name, &ok);
	model_copy_map(a, &d->parameters, &ok);
	model_copy_map(a, &d->secrets, &ok);
	d->failure = model_dup(a, s->failure, &ok);
	d->status.last_error = model_dup(a, s->status.last_error, &ok);
	if (!ok)
		return err_set(e, CSID_ENOMEM, "snapshot copy: out of memory");
	*out = d;
	return 0;
}

int model_node_copy(struct arena *a, const struct model_node *n, struct model_node **out,
		    struct err *e)
{
	struct model_node *d = arena_alloc(a, sizeof(*d));
	bool ok = d != NULL;

	if (!ok)
		return err_set(e, CSID_ENOMEM, "node copy: out of memory");
	*d = *n;
	d->id = model_dup(a, n->id, &ok);
	d->address = model_dup(a, n->address, &ok);
	d->plugins = model_dup_array(a, n->plugins, n->nplugins, sizeof(*n->plugins), &ok);
	for (size_t i = 0; ok && i < n->nplugins; i++) {
		struct model_node_plugin *p = &d->plugins[i];

		p->plugin_id = model_dup(a, p->plugin_id, &ok);
		p->health = model_dup(a, p->health, &ok);
		p->version = model_dup(a, p->version, &ok);
		p->plugin_node_id = model_dup(a, p->plugin_node_id, &ok);
		p->caps = model_dup_array(a, p->caps, p->ncaps, sizeof(*p->caps), &ok);
		for (size_t j = 0; ok && j < p->ncaps; j++)
			p->caps[j] = model_dup(a, p->caps[j], &ok);
		model_copy_map(a, &p->topology.segments, &ok);
	}
	d->allocs = model_dup_array(a, n->allocs, n->nallocs, sizeof(*n->allocs), &ok);
	for (size_t i = 0; ok && i < n->nallocs; i++) {
		d->allocs[i].volume_id = model_dup(a, n->allocs[i].volume_id, &ok);
		d->allocs[i].alloc_id = model_dup(a, n->allocs[i].alloc_id, &ok);
	}
	if (!ok)
		return err_set(e, CSID_ENOMEM, "node copy: out of memory");
	*out = d;
	return 0;
}
