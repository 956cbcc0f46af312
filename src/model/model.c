/*
 * The model's plain functions: names and parsers of its enums, ID checks,
 * string maps (sorted, unique keys), topology matching, the claim
 * lifecycle table and its one transition function, volume spec
 * validation (every problem at once), sizes, deep copies and lookups.
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

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/log.h"

/* ---- names ---- */

static const char *const model_access_names[] = {
    [MODEL_ACCESS_SINGLE_NODE_WRITER] = "single-node-writer",
    [MODEL_ACCESS_SINGLE_NODE_READER_ONLY] = "single-node-reader-only",
    [MODEL_ACCESS_MULTI_NODE_READER_ONLY] = "multi-node-reader-only",
    [MODEL_ACCESS_MULTI_NODE_SINGLE_WRITER] = "multi-node-single-writer",
    [MODEL_ACCESS_MULTI_NODE_MULTI_WRITER] = "multi-node-multi-writer",
    [MODEL_ACCESS_SINGLE_NODE_SINGLE_WRITER] = "single-node-single-writer",
    [MODEL_ACCESS_SINGLE_NODE_MULTI_WRITER] = "single-node-multi-writer",
};

#define MODEL_NAMES_N(t) (sizeof(t) / sizeof((t)[0]))

/* The name of v in table t (n entries), or NULL. */
static const char *model_name(const char *const *t, size_t n, int v)
{
	return v >= 0 && (size_t)v < n ? t[v] : NULL;
}

/* Finds s in table t; CSID_EINVAL naming what and the choices otherwise. */
static int model_parse(const char *const *t, size_t n, const char *what, const char *s, int *out,
		       struct err *e)
{
	char choices[256];
	size_t used = 0;

	for (size_t i = 0; i < n; i++)
		if (t[i] && s && strcmp(t[i], s) == 0) {
			*out = (int)i;
			return 0;
		}
	choices[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		int k;

		if (!t[i])
			continue;
		k = snprintf(choices + used, sizeof(choices) - used, "%s%s", used ? ", " : "",
			     t[i]);
		if (k < 0 || (size_t)k >= sizeof(choices) - used)
			break;
		used += (size_t)k;
	}
	return err_set(e, CSID_EINVAL, "unknown %s (expected one of: %s)", what, choices);
}

const char *model_access_name(enum model_access a)
{
	return model_name(model_access_names, MODEL_NAMES_N(model_access_names), (int)a);
}

int model_access_parse(const char *s, enum model_access *out, struct err *e)
{
	int v;
	int rc = model_parse(model_access_names, MODEL_NAMES_N(model_access_names), "access mode",
			     s, &v, e);

	if (!rc)
		*out = (enum model_access)v;
	return rc;
}

static const char *const model_attachment_names[] = {
    [MODEL_ATTACH_FILE_SYSTEM] = "file-system",
    [MODEL_ATTACH_BLOCK_DEVICE] = "block-device",
};

const char *model_attachment_name(enum model_attachment a)
{
	return model_name(model_attachment_names, MODEL_NAMES_N(model_attachment_names), (int)a);
}

int model_attachment_parse(const char *s, enum model_attachment *out, struct err *e)
{
	int v;
	int rc = model_parse(model_attachment_names, MODEL_NAMES_N(model_attachment_names),
			     "attachment mode", s, &v, e);

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

static const char *const model_claim_state_names[] = {
    [MODEL_CLAIM_CLAIMED] = "claimed",
    [MODEL_CLAIM_NODE_UNPUBLISHED] = "node-unpublished",
    [MODEL_CLAIM_CONTROLLER_UNPUBLISHED] = "controller-unpublished",
    [MODEL_CLAIM_FREED] = "freed",
    [MODEL_CLAIM_REMOVED] = "removed",
};

const char *model_claim_state_name(enum model_claim_state s)
{
	return model_name(model_claim_state_names, MODEL_NAMES_N(model_claim_state_names), (int)s);
}

int model_claim_state_parse(const char *s, enum model_claim_state *out, struct err *e)
{
	int v;
	int rc = model_parse(model_claim_state_names, MODEL_NAMES_N(model_claim_state_names),
			     "claim state", s, &v, e);

	if (!rc)
		*out = (enum model_claim_state)v;
	return rc;
}

const char *model_claim_mode_name(enum model_claim_mode m)
{
	switch (m) {
	case MODEL_CLAIM_READ:
		return "read";
	case MODEL_CLAIM_WRITE:
		return "write";
	}
	return NULL;
}

static const char *const model_pub_state_names[] = {
    [MODEL_PUB_PUBLISHING] = "publishing",
    [MODEL_PUB_PUBLISHED] = "published",
    [MODEL_PUB_UNPUBLISHING] = "unpublishing",
};

const char *model_pub_state_name(enum model_pub_state s)
{
	return model_name(model_pub_state_names, MODEL_NAMES_N(model_pub_state_names), (int)s);
}

static const char *const model_volume_state_names[] = {
    [MODEL_VOL_CREATING] = "creating", [MODEL_VOL_REGISTERING] = "registering",
    [MODEL_VOL_READY] = "ready",       [MODEL_VOL_DELETING] = "deleting",
    [MODEL_VOL_FAILED] = "failed",
};

const char *model_volume_state_name(enum model_volume_state s)
{
	return model_name(model_volume_state_names, MODEL_NAMES_N(model_volume_state_names),
			  (int)s);
}

static const char *const model_snapshot_state_names[] = {
    [MODEL_SNAP_CREATING] = "creating",
    [MODEL_SNAP_READY] = "ready",
    [MODEL_SNAP_DELETING] = "deleting",
    [MODEL_SNAP_FAILED] = "failed",
};

const char *model_snapshot_state_name(enum model_snapshot_state s)
{
	return model_name(model_snapshot_state_names, MODEL_NAMES_N(model_snapshot_state_names),
			  (int)s);
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

/* ---- validation ---- */

/* Every problem of one validation, joined with "; " into a bounded text. */
struct model_problems {
	char text[ERR_MSG_MAX - 32];
	size_t len;
	int n;
	int dropped;
};

static void model_problem(struct model_problems *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void model_problem(struct model_problems *p, const char *fmt, ...)
{
	char one[256];
	va_list ap;
	size_t need;

	va_start(ap, fmt);
	vsnprintf(one, sizeof(one), fmt, ap);
	va_end(ap);
	need = strlen(one) + (p->n ? 2 : 0);
	/* Leave room for the " (and N more)" tail. */
	if (p->len + need + 24 >= sizeof(p->text)) {
		p->dropped++;
		return;
	}
	p->len += (size_t)snprintf(p->text + p->len, sizeof(p->text) - p->len, "%s%s",
				   p->n ? "; " : "", one);
	p->n++;
}

/* An ID field through model_id_check, its message as a problem. */
static void model_check_id(struct model_problems *p, const char *what, const char *id)
{
	struct err e;

	err_clear(&e);
	if (model_id_check(what, id, id ? strlen(id) : 0, &e))
		model_problem(p, "%s", e.msg);
}

static bool model_has_ctl(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

/* A CSI string field: at most MODEL_STRING_MAX bytes, no control characters. */
static void model_check_string(struct model_problems *p, const char *what, const char *s,
			       bool secret)
{
	char q[48];

	if (strlen(s) > MODEL_STRING_MAX)
		model_problem(p, "%s: longer than %d bytes", what, MODEL_STRING_MAX);
	else if (model_has_ctl(s) && secret)
		model_problem(p, "%s: contains a control character", what);
	else if (model_has_ctl(s))
		model_problem(p, "%s \"%s\": contains a control character", what,
			      model_sanitize(q, sizeof(q), s, strlen(s)));
}

/* A map: keys non-empty, sorted and unique, at most MODEL_MAP_BYTES_MAX
 * bytes of keys and values. Names no key of a secret map. */
static void model_check_map(struct model_problems *p, const char *what, const struct model_map *m,
			    bool secret)
{
	size_t bytes = 0;
	char q[48];

	for (size_t i = 0; i < m->n; i++) {
		const struct model_kv *kv = &m->kv[i];

		if (!kv->key || !kv->value) {
			model_problem(p, "%s: a key or value is missing", what);
			return;
		}
		bytes += strlen(kv->key) + strlen(kv->value);
		if (!kv->key[0])
			model_problem(p, "%s: empty key", what);
		else if (i && strcmp(m->kv[i - 1].key, kv->key) >= 0 && secret)
			model_problem(p, "%s: keys not sorted or not unique", what);
		else if (i && strcmp(m->kv[i - 1].key, kv->key) >= 0)
			model_problem(p, "%s: key \"%s\" not sorted or not unique", what,
				      model_sanitize(q, sizeof(q), kv->key, strlen(kv->key)));
	}
	if (bytes > MODEL_MAP_BYTES_MAX)
		model_problem(p, "%s: more than %d bytes of keys and values", what,
			      MODEL_MAP_BYTES_MAX);
}

static bool model_topology_equal(const struct model_topology *a, const struct model_topology *b)
{
	return model_map_equal(&a->segments, &b->segments);
}

static void model_check_topologies(struct model_problems *p, const char *what,
				   const struct model_topology *t, size_t n)
{
	char path[64];

	if (n > MODEL_TOPOLOGIES_MAX)
		model_problem(p, "%s: more than %d topologies", what, MODEL_TOPOLOGIES_MAX);
	for (size_t i = 0; i < n && i < MODEL_TOPOLOGIES_MAX; i++) {
		snprintf(path, sizeof(path), "%s[%zu]", what, i);
		if (t[i].segments.n == 0)
			model_problem(p, "%s: no segments", path);
		model_check_map(p, path, &t[i].segments, false);
	}
}

static void model_check_caps(struct model_problems *p, const struct model_volume *v)
{
	if (v->ncaps == 0)
		model_problem(p, "capabilities: at least one is required");
	if (v->ncaps > MODEL_CAPS_MAX)
		model_problem(p, "capabilities: more than %d", MODEL_CAPS_MAX);
	for (size_t i = 0; i < v->ncaps && i < MODEL_CAPS_MAX; i++) {
		const struct model_capability *c = &v->caps[i];

		if (!model_access_name(c->access))
			model_problem(p, "capabilities[%zu].access_mode: unknown", i);
		if (!model_attachment_name(c->attachment))
			model_problem(p, "capabilities[%zu].attachment_mode: unknown", i);
		for (size_t j = 0; j < i; j++)
			if (v->caps[j].access == c->access &&
			    v->caps[j].attachment == c->attachment)
				model_problem(
				    p, "capabilities[%zu]: duplicate of capabilities[%zu]", i, j);
	}
}

static void model_check_mount(struct model_problems *p, const struct model_volume *v)
{
	bool fs = false;

	for (size_t i = 0; i < v->ncaps; i++)
		fs |= v->caps[i].attachment == MODEL_ATTACH_FILE_SYSTEM;
	/* CSI: mount options belong to MountVolume, the file-system access type. */
	if ((v->fs_type || v->nmount_flags) && v->ncaps && !fs)
		model_problem(p, "mount_options: only for file-system capabilities");
	if (v->fs_type)
		model_check_string(p, "mount_options.fs_type", v->fs_type, false);
	if (v->nmount_flags > MODEL_MOUNT_FLAGS_MAX)
		model_problem(p, "mount_options.mount_flags: more than %d flags",
			      MODEL_MOUNT_FLAGS_MAX);
	for (size_t i = 0; i < v->nmount_flags && i < MODEL_MOUNT_FLAGS_MAX; i++) {
		char what[64];

		snprintf(what, sizeof(what), "mount_options.mount_flags[%zu]", i);
		if (!v->mount_flags[i] || !v->mount_flags[i][0])
			model_problem(p, "%s: empty", what);
		else
			model_check_string(p, what, v->mount_flags[i], true);
	}
}

static void model_check_topology_request(struct model_problems *p, const struct model_volume *v)
{
	model_check_topologies(p, "topology_request.requisite", v->requisite, v->nrequisite);
	model_check_topologies(p, "topology_request.preferred", v->preferred, v->npreferred);
	/* CSI: "If requisite is specified, all topologies in preferred list
	 * MUST also be present in the list of requisite topologies." */
	if (!v->nrequisite)
		return;
	for (size_t i = 0; i < v->npreferred && i < MODEL_TOPOLOGIES_MAX; i++) {
		bool found = false;

		for (size_t j = 0; j < v->nrequisite && !found; j++)
			found = model_topology_equal(&v->preferred[i], &v->requisite[j]);
		if (!found)
			model_problem(p, "topology_request.preferred[%zu]: not in requisite", i);
	}
}

int model_volume_validate(const struct model_volume *v, bool for_create, struct err *e)
{
	struct model_problems p = {.len = 0};
	struct err sub;

	p.text[0] = '\0';
	model_check_id(&p, "id", v->id);
	if (v->name) {
		if (!v->name[0])
			model_problem(&p, "name: empty");
		model_check_string(&p, "name", v->name, false);
	}
	err_clear(&sub);
	if (model_plugin_id_check(v->plugin_id, &sub))
		model_problem(&p, "%s", sub.msg);
	if (for_create && v->external_id)
		model_problem(&p, "external_id: only for registering an existing volume");
	if (!for_create && (!v->external_id || !v->external_id[0]))
		model_problem(&p, "external_id: required to register an existing volume");
	else if (!for_create)
		model_check_string(&p, "external_id", v->external_id, false);
	if (v->capacity_min < 0)
		model_problem(&p, "capacity_min: negative");
	if (v->capacity_max < 0)
		model_problem(&p, "capacity_max: negative");
	if (v->capacity_min > 0 && v->capacity_max > 0 && v->capacity_max < v->capacity_min)
		model_problem(&p, "capacity_max: smaller than capacity_min");
	model_check_caps(&p, v);
	model_check_mount(&p, v);
	model_check_map(&p, "parameters", &v->parameters, false);
	model_check_map(&p, "mutable_parameters", &v->mutable_parameters, false);
	model_check_map(&p, "secrets", &v->secrets, true);
	model_check_map(&p, "context", &v->context, false);
	model_check_topology_request(&p, v);
	if (!for_create && (v->snapshot_source || v->clone_source))
		model_problem(&p, "snapshot_source, clone_source: only for creating a volume");
	if (for_create && v->snapshot_source && v->clone_source)
		model_problem(&p, "snapshot_source, clone_source: at most one of them");
	if (for_create && v->snapshot_source)
		model_check_id(&p, "snapshot_source", v->snapshot_source);
	if (for_create && v->clone_source)
		model_check_id(&p, "clone_source", v->clone_source);
	if (!p.n && !p.dropped)
		return 0;
	if (p.dropped)
		return err_set(e, CSID_EINVAL, "volume spec: %s; (and %d more)", p.text, p.dropped);
	return err_set(e, CSID_EINVAL, "volume spec: %s", p.text);
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
	d->status.last_error = model_dup(a, v->status.last_error, &ok);
	d->plugin_health = model_dup(a, v->plugin_health, &ok);
	if (!ok)
		return err_set(e, CSID_ENOMEM, "volume copy: out of memory");
	*out = d;
	return 0;
}
