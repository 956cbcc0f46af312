/*
 * The store decoders of volumes, claim histories, snapshots and nodes
 * (model.h), reading the record's text with the pull reader
 * (util/jsonr.h) straight into the model's structs: no JSON tree is
 * built, each string is copied once, into the caller's arena. A volume
 * record is read on every claim, every reconciler pass that misses the
 * decoded cache and every metrics count, and by the agent's answers: a
 * tree parse cost about ten times this.
 *
 * The rules are those of a store record (model_decode.c's helpers make
 * the messages): trusted but checked, a damaged record is CSID_EPROTO
 * naming the JSON path of the first problem, never a crash; unknown keys
 * are skipped (an older program reads a newer record), a null member is
 * an absent one, a key the decoder knows may appear once, and a map's
 * keys are unique. No message names a secret's key or value. Keys are
 * looked up in each object's table starting where the last one matched,
 * since the encoders write them in table order.
 */
#include <string.h>

#include "model/model.h"
#include "model/model_int.h"
#include "util/jsonr.h"

/* Longest key the tables hold, with its NUL (longer ones are unknown). */
#define REC_KEY_MAX 32

/* One record's decoding. */
struct rec {
	struct model_dec d;
	struct jsonr r;
	struct err own; /* where errors go when the caller passed none */
	bool have_state; /* the record's "state" was there (not null) */
};

/* The keys of one object kind, in the order the encoder writes them. */
struct rec_keys {
	const char *const *names;
	int n;
};

/* One object being read: its keys, which were seen, where the last matched. */
struct rec_obj {
	const struct rec_keys *keys;
	const char *path; /* the object's JSON path ("" at the top) */
	uint64_t seen;
	int hint;
	size_t n;
};

static int rec_syntax(struct rec *x)
{
	int line, column;

	if (!x->r.err)
		return model_dec_fail(&x->d, NULL, "not valid JSON");
	if (strcmp(x->r.err, "out of memory") == 0)
		return err_set(x->d.e, CSID_ENOMEM, "%s: out of memory", x->d.what);
	jsonr_where(&x->r, &line, &column);
	return model_dec_fail(&x->d, NULL, "not valid JSON (line %d column %d: %s)", line, column,
			      x->r.err);
}

static int rec_nomem(struct rec *x)
{
	return err_set(x->d.e, CSID_ENOMEM, "%s: out of memory", x->d.what);
}

/* Fails at path.key. */
static int rec_fail(struct rec *x, const char *path, const char *key, const char *msg)
{
	char sub[MODEL_PATH_MAX];

	return model_dec_fail(&x->d, model_dec_path(sub, path, key), "%s", msg);
}

/* parent[i] into buf (MODEL_PATH_MAX), without printf: it runs for every element. */
static const char *rec_index_path(char *buf, const char *parent, size_t i)
{
	char digits[24];
	size_t at = sizeof(digits), n = strlen(parent);

	digits[--at] = '\0';
	do {
		digits[--at] = (char)('0' + i % 10);
		i /= 10;
	} while (i);
	if (n > MODEL_PATH_MAX - 26)
		n = MODEL_PATH_MAX - 26;
	memcpy(buf, parent, n);
	buf[n++] = '[';
	memcpy(buf + n, digits + at, sizeof(digits) - at - 1);
	n += sizeof(digits) - at - 1;
	buf[n++] = ']';
	buf[n] = '\0';
	return buf;
}

/* Takes the '{' of an object at path; fails when the value is no object. */
static int rec_open(struct rec *x, struct rec_obj *o, const struct rec_keys *keys, const char *path)
{
	memset(o, 0, sizeof(*o));
	o->keys = keys;
	o->path = path;
	switch (jsonr_peek(&x->r)) {
	case JSONR_OBJECT:
		return jsonr_open(&x->r) ? rec_syntax(x) : 0;
	case JSONR_BAD:
		return rec_syntax(x);
	default:
		return model_dec_fail(&x->d, path, "expected an object");
	}
}

/*
 * The next member of o whose key the table knows and whose value is not
 * null: *idx its index (the reader at its value), or -1 once the object
 * is closed. Unknown members and null values are passed over.
 */
static int rec_member(struct rec *x, struct rec_obj *o, int *idx)
{
	char key[REC_KEY_MAX];
	size_t klen;
	int rc;

	for (;;) {
		int i = -1;

		rc = jsonr_key(&x->r, &o->n, key, sizeof(key), &klen);
		if (rc < 0)
			return rec_syntax(x);
		if (rc == 0) {
			*idx = -1;
			return 0;
		}
		if (klen < sizeof(key)) {
			for (int k = 0; k < o->keys->n && i < 0; k++) {
				int at = (o->hint + k) % o->keys->n;

				if (strcmp(o->keys->names[at], key) == 0)
					i = at;
			}
		}
		if (i >= 0 && (o->seen & ((uint64_t)1 << i)))
			return rec_fail(x, o->path, key, "duplicate key");
		if (i >= 0) {
			o->seen |= (uint64_t)1 << i;
			o->hint = i + 1;
		}
		if (i >= 0 && jsonr_peek(&x->r) != JSONR_NULL) {
			*idx = i;
			return 0;
		}
		rc = i >= 0 ? jsonr_literal(&x->r) : jsonr_skip(&x->r);
		if (rc)
			return rec_syntax(x);
	}
}

/* Checks the kind of the value at path.key. */
static int rec_want(struct rec *x, const char *path, const char *key, enum jsonr_kind kind,
		    const char *msg)
{
	enum jsonr_kind k = jsonr_peek(&x->r);

	if (k == JSONR_BAD)
		return rec_syntax(x);
	return k == kind ? 0 : rec_fail(x, path, key, msg);
}

static int rec_str(struct rec *x, const char *path, const char *key, char **out)
{
	size_t len;

	if (rec_want(x, path, key, JSONR_STRING, "expected a string"))
		return -1;
	if (jsonr_str(&x->r, x->d.a, out, &len))
		return rec_syntax(x);
	if (memchr(*out, '\0', len))
		return rec_fail(x, path, key, "contains a NUL byte");
	return 0;
}

static int rec_bool(struct rec *x, const char *path, const char *key, bool *out)
{
	if (rec_want(x, path, key, JSONR_BOOL, "expected true or false"))
		return -1;
	return jsonr_bool(&x->r, out) ? rec_syntax(x) : 0;
}

/* An integer >= 0; msg says what else was expected. */
static int rec_count(struct rec *x, const char *path, const char *key, const char *msg,
		     int64_t *out)
{
	int rc;

	if (rec_want(x, path, key, JSONR_NUMBER, msg))
		return -1;
	rc = jsonr_int(&x->r, out);
	if (rc < 0)
		return rec_syntax(x);
	if (rc > 0)
		return rec_fail(x, path, key, msg);
	if (*out < 0)
		return rec_fail(x, path, key, "negative");
	return 0;
}

static int rec_int(struct rec *x, const char *path, const char *key, int64_t *out)
{
	return rec_count(x, path, key, "expected an integer", out);
}

/* A capacity: bytes as an integer, or a size string ("10GiB"). */
static int rec_size(struct rec *x, const char *key, int64_t *out)
{
	struct err sub;
	char *s;

	if (jsonr_peek(&x->r) != JSONR_STRING)
		return rec_count(x, "", key,
				 "expected bytes as an integer or a string such as \"10GiB\"", out);
	if (rec_str(x, "", key, &s))
		return -1;
	err_clear(&sub);
	if (model_parse_size(s, out, &sub))
		return model_dec_fail(&x->d, key, "%s", sub.msg);
	return 0;
}

/* A name of one of the model's enums (t). */
static int rec_enum(struct rec *x, const char *path, const char *key, const struct model_names *t,
		    int *out)
{
	char buf[48], sub[MODEL_PATH_MAX];
	struct err pe;
	size_t len;

	if (rec_want(x, path, key, JSONR_STRING, "expected a string"))
		return -1;
	if (jsonr_str_buf(&x->r, buf, sizeof(buf), &len))
		return rec_syntax(x);
	err_clear(&pe);
	if (len >= sizeof(buf) || memchr(buf, '\0', len) || model_names_parse(t, buf, out, &pe)) {
		if (!pe.msg[0])
			model_names_parse(t, "", out, &pe);
		return model_dec_fail(&x->d, model_dec_path(sub, path, key), "%s", pe.msg);
	}
	return 0;
}

/* Room for one more element of size in *arr (n used of *cap), from the arena. */
static int rec_grow(struct rec *x, void **arr, size_t *cap, size_t n, size_t size)
{
	size_t ncap = *cap ? *cap * 2 : 4;
	void *p;

	if (n < *cap)
		return 0;
	p = arena_alloc(x->d.a, ncap * size);
	if (!p)
		return rec_nomem(x);
	if (n)
		memcpy(p, *arr, n * size);
	*arr = p;
	*cap = ncap;
	return 0;
}

/* Sorts m by key (the encoders write maps sorted: insertion sort is one pass then). */
static void rec_map_sort(struct model_map *m)
{
	for (size_t i = 1; i < m->n; i++) {
		struct model_kv kv = m->kv[i];
		size_t j = i;

		while (j > 0 && strcmp(m->kv[j - 1].key, kv.key) > 0) {
			m->kv[j] = m->kv[j - 1];
			j--;
		}
		m->kv[j] = kv;
	}
}

/* A map of strings at sub; secret: neither keys nor values are named in errors. */
static int rec_mapv(struct rec *x, const char *sub, bool secret, struct model_map *out)
{
	size_t n = 0, cap = 0;
	enum jsonr_kind k = jsonr_peek(&x->r);
	int rc;

	memset(out, 0, sizeof(*out));
	if (k == JSONR_BAD)
		return rec_syntax(x);
	if (k != JSONR_OBJECT)
		return model_dec_fail(&x->d, sub, "expected an object of strings");
	if (jsonr_open(&x->r))
		return rec_syntax(x);
	for (;;) {
		char q[48], ksub[MODEL_PATH_MAX], *key;
		struct model_kv *kv;
		size_t klen, vlen;
		const char *where;

		rc = jsonr_key_dup(&x->r, &n, x->d.a, &key, &klen);
		if (rc < 0)
			return rec_syntax(x);
		if (rc == 0)
			break;
		where = secret ? sub
			       : model_dec_path(ksub, sub, model_sanitize(q, sizeof(q), key, klen));
		if (!klen)
			return model_dec_fail(&x->d, sub, "empty key");
		if (memchr(key, '\0', klen))
			return model_dec_fail(&x->d, where, "key contains a NUL byte");
		if (rec_grow(x, (void **)&out->kv, &cap, out->n, sizeof(*out->kv)))
			return -1;
		kv = &out->kv[out->n];
		kv->key = key;
		k = jsonr_peek(&x->r);
		if (k == JSONR_BAD)
			return rec_syntax(x);
		if (k != JSONR_STRING)
			return model_dec_fail(&x->d, where,
					      secret ? "every value must be a string"
						     : "expected a string");
		if (jsonr_str(&x->r, x->d.a, &kv->value, &vlen))
			return rec_syntax(x);
		if (memchr(kv->value, '\0', vlen))
			return model_dec_fail(&x->d, where, "contains a NUL byte");
		out->n++;
	}
	rec_map_sort(out);
	for (size_t i = 1; i < out->n; i++) {
		char q[48], ksub[MODEL_PATH_MAX];
		const char *key = out->kv[i].key;

		if (strcmp(out->kv[i - 1].key, key) == 0)
			return model_dec_fail(
			    &x->d,
			    secret ? sub
				   : model_dec_path(ksub, sub,
						    model_sanitize(q, sizeof(q), key, strlen(key))),
			    "duplicate key");
	}
	return 0;
}

static int rec_map(struct rec *x, const char *path, const char *key, bool secret,
		   struct model_map *out)
{
	char sub[MODEL_PATH_MAX];

	return rec_mapv(x, model_dec_path(sub, path, key), secret, out);
}

/* Takes the '[' of an array at path.key. */
static int rec_array(struct rec *x, const char *path, const char *key)
{
	if (rec_want(x, path, key, JSONR_ARRAY, "expected an array"))
		return -1;
	return jsonr_open(&x->r) ? rec_syntax(x) : 0;
}

/* The next item of an open array: 1 when one follows, 0 at its end, -1. */
static int rec_item(struct rec *x, size_t *n)
{
	int rc = jsonr_item(&x->r, n);

	return rc < 0 ? rec_syntax(x) : rc;
}

static int rec_topologies(struct rec *x, const char *path, const char *key,
			  struct model_topology **out, size_t *n)
{
	char sub[MODEL_PATH_MAX], isub[MODEL_PATH_MAX];
	size_t cap = 0, seen = 0;
	int rc;

	*out = NULL;
	*n = 0;
	if (rec_array(x, path, key))
		return -1;
	model_dec_path(sub, path, key);
	while ((rc = rec_item(x, &seen)) == 1) {
		if (rec_grow(x, (void **)out, &cap, *n, sizeof(**out)) ||
		    rec_mapv(x, rec_index_path(isub, sub, *n), false, &(*out)[*n].segments))
			return -1;
		(*n)++;
	}
	return rc;
}

/* An array of strings at path.key. */
static int rec_strings(struct rec *x, const char *path, const char *key, char ***out, size_t *n)
{
	char sub[MODEL_PATH_MAX], isub[MODEL_PATH_MAX];
	size_t cap = 0, seen = 0;
	int rc;

	*out = NULL;
	*n = 0;
	if (rec_array(x, path, key))
		return -1;
	model_dec_path(sub, path, key);
	while ((rc = rec_item(x, &seen)) == 1) {
		if (rec_grow(x, (void **)out, &cap, *n, sizeof(**out)) ||
		    rec_str(x, "", rec_index_path(isub, sub, *n), &(*out)[*n]))
			return -1;
		(*n)++;
	}
	return rc;
}

/* Reads the objects of the array at key, each with one (x, path, element) call. */
typedef int (*rec_elem_fn)(struct rec *x, const char *path, void *elem);

static int rec_objects(struct rec *x, const char *path, const char *key, size_t size,
		       rec_elem_fn fn, void **out, size_t *n)
{
	char sub[MODEL_PATH_MAX], isub[MODEL_PATH_MAX];
	size_t cap = 0, seen = 0;
	int rc;

	*out = NULL;
	*n = 0;
	if (rec_array(x, path, key))
		return -1;
	model_dec_path(sub, path, key);
	while ((rc = rec_item(x, &seen)) == 1) {
		if (rec_grow(x, out, &cap, *n, size) ||
		    fn(x, rec_index_path(isub, sub, *n), (char *)*out + *n * size))
			return -1;
		(*n)++;
	}
	return rc;
}

/* Fails at path.key as "required" when bit i of o was not seen with a value. */
static int rec_required(struct rec *x, const struct rec_obj *o, uint64_t have, int i)
{
	if (have & ((uint64_t)1 << i))
		return 0;
	return rec_fail(x, o->path, o->keys->names[i], "required");
}

/* A key list (X-macro) gives both an object's member indexes and its key table. */
#define REC_ENUM(id, name) id,
#define REC_NAME(id, name) name,
#define REC_KEYS(arr)                                    \
	{                                                \
		arr, (int)(sizeof(arr) / sizeof(arr[0])) \
	}

/* ---- claims and publications ---- */

/* A claim's keys, in the order the encoder writes them. */
/* clang-format off */
#define REC_CLAIM_KEYS(X) \
	X(RC_ALLOC, "alloc_id") X(RC_NODE, "node_id") X(RC_PNODE, "plugin_node_id") \
	X(RC_MODE, "mode") X(RC_ACCESS, "access_mode") X(RC_ATTACH, "attachment_mode") \
	X(RC_RO, "read_only") X(RC_STATE, "state") X(RC_CLAIMED, "claimed_ms") \
	X(RC_UPDATED, "updated_ms") X(RC_NOTE, "note") X(RC_HELD, "held_by_agent") \
	X(RC_EXPANDED, "node_expanded")
/* clang-format on */
enum { REC_CLAIM_KEYS(REC_ENUM) };
static const char *const rec_claim_names[] = {REC_CLAIM_KEYS(REC_NAME)};
static const struct rec_keys rec_claim_keys = REC_KEYS(rec_claim_names);

static int rec_claim(struct rec *x, const char *path, void *elem)
{
	struct model_claim *c = elem;
	int mode = 0, state = 0, access = 0, attach = MODEL_ATTACH_FILE_SYSTEM, i, rc = 0;
	uint64_t have = 0;
	struct rec_obj o;

	if (rec_open(x, &o, &rec_claim_keys, path))
		return -1;
	while (!rc && !(rc = rec_member(x, &o, &i)) && i >= 0) {
		const char *k = rec_claim_names[i];

		have |= (uint64_t)1 << i;
		switch (i) {
		case RC_ALLOC:
			rc = rec_str(x, path, k, &c->alloc_id);
			break;
		case RC_NODE:
			rc = rec_str(x, path, k, &c->node_id);
			break;
		case RC_PNODE:
			rc = rec_str(x, path, k, &c->plugin_node_id);
			break;
		case RC_MODE:
			rc = rec_enum(x, path, k, &model_names_claim_mode, &mode);
			break;
		case RC_ACCESS:
			rc = rec_enum(x, path, k, &model_names_access, &access);
			break;
		case RC_ATTACH:
			rc = rec_enum(x, path, k, &model_names_attachment, &attach);
			break;
		case RC_RO:
			rc = rec_bool(x, path, k, &c->read_only);
			break;
		case RC_STATE:
			rc = rec_enum(x, path, k, &model_names_claim_state, &state);
			break;
		case RC_CLAIMED:
			rc = rec_int(x, path, k, &c->claimed_ms);
			break;
		case RC_UPDATED:
			rc = rec_int(x, path, k, &c->updated_ms);
			break;
		case RC_NOTE:
			rc = rec_str(x, path, k, &c->note);
			break;
		case RC_HELD:
			rc = rec_bool(x, path, k, &c->held_by_agent);
			break;
		default:
			rc = rec_bool(x, path, k, &c->node_expanded);
			break;
		}
	}
	if (rc)
		return rc;
	if (!c->alloc_id || !c->alloc_id[0])
		have &= ~((uint64_t)1 << RC_ALLOC);
	if (!c->node_id || !c->node_id[0])
		have &= ~((uint64_t)1 << RC_NODE);
	c->mode = (enum model_claim_mode)mode;
	c->state = (enum model_claim_state)state;
	c->cap.access = (enum model_access)access;
	c->cap.attachment = (enum model_attachment)attach;
	if (rec_required(x, &o, have, RC_ALLOC) || rec_required(x, &o, have, RC_NODE) ||
	    rec_required(x, &o, have, RC_MODE) || rec_required(x, &o, have, RC_ACCESS) ||
	    rec_required(x, &o, have, RC_STATE))
		return -1;
	return 0;
}

static int rec_claims(struct rec *x, const char *key, struct model_claim **out, size_t *n)
{
	return rec_objects(x, "", key, sizeof(**out), rec_claim, (void **)out, n);
}

enum { RP_NODE, RP_PNODE, RP_RO, RP_ACCESS, RP_ATTACH, RP_STATE, RP_CONTEXT };
static const char *const rec_pub_names[] = {
    "node_id", "plugin_node_id", "read_only", "access_mode", "attachment_mode", "state", "context"};
static const struct rec_keys rec_pub_keys = REC_KEYS(rec_pub_names);

static int rec_pub(struct rec *x, const char *path, void *elem)
{
	struct model_publication *p = elem;
	int state = 0, access = 0, attach = MODEL_ATTACH_FILE_SYSTEM, i, rc = 0;
	uint64_t have = 0;
	struct rec_obj o;

	if (rec_open(x, &o, &rec_pub_keys, path))
		return -1;
	while (!rc && !(rc = rec_member(x, &o, &i)) && i >= 0) {
		const char *k = rec_pub_names[i];

		have |= (uint64_t)1 << i;
		if (i == RP_NODE)
			rc = rec_str(x, path, k, &p->node_id);
		else if (i == RP_PNODE)
			rc = rec_str(x, path, k, &p->plugin_node_id);
		else if (i == RP_RO)
			rc = rec_bool(x, path, k, &p->read_only);
		else if (i == RP_ACCESS)
			rc = rec_enum(x, path, k, &model_names_access, &access);
		else if (i == RP_ATTACH)
			rc = rec_enum(x, path, k, &model_names_attachment, &attach);
		else if (i == RP_STATE)
			rc = rec_enum(x, path, k, &model_names_pub_state, &state);
		else
			rc = rec_map(x, path, k, false, &p->context);
	}
	if (rc)
		return rc;
	if (!p->node_id || !p->node_id[0])
		have &= ~((uint64_t)1 << RP_NODE);
	p->state = (enum model_pub_state)state;
	p->cap.access = (enum model_access)access;
	p->cap.attachment = (enum model_attachment)attach;
	if (rec_required(x, &o, have, RP_NODE) || rec_required(x, &o, have, RP_ACCESS) ||
	    rec_required(x, &o, have, RP_STATE))
		return -1;
	return 0;
}

/* ---- volumes ---- */

static const char *const rec_cap_names[] = {"access_mode", "attachment_mode"};
static const struct rec_keys rec_cap_keys = REC_KEYS(rec_cap_names);

static int rec_cap(struct rec *x, const char *path, void *elem)
{
	struct model_capability *c = elem;
	int access = 0, attach = MODEL_ATTACH_FILE_SYSTEM, i, rc = 0;
	uint64_t have = 0;
	struct rec_obj o;

	if (rec_open(x, &o, &rec_cap_keys, path))
		return -1;
	while (!rc && !(rc = rec_member(x, &o, &i)) && i >= 0) {
		have |= (uint64_t)1 << i;
		rc = rec_enum(x, path, rec_cap_names[i],
			      i == 0 ? &model_names_access : &model_names_attachment,
			      i == 0 ? &access : &attach);
	}
	if (rc || rec_required(x, &o, have, 0))
		return -1;
	c->access = (enum model_access)access;
	c->attachment = (enum model_attachment)attach;
	return 0;
}

/* The volume's nested objects of two keys each, read by one loop. */
enum { RX_MOUNT, RX_TOPOLOGY, RX_PENDING };
static const char *const rec_nested_paths[] = {"mount_options", "topology_request", "pending"};
static const char *const rec_nested_names[][2] = {
    {"fs_type", "mount_flags"}, {"requisite", "preferred"}, {"capacity_min", "mutable_parameters"}};
static const struct rec_keys rec_nested_keys[] = {{rec_nested_names[RX_MOUNT], 2},
						  {rec_nested_names[RX_TOPOLOGY], 2},
						  {rec_nested_names[RX_PENDING], 2}};

/* Member i of nested object which (at path) into v. */
static int rec_nested_member(struct rec *x, int which, int i, const char *path,
			     struct model_volume *v)
{
	const char *k = rec_nested_names[which][i];

	switch (which * 2 + i) {
	case 0:
		return rec_str(x, path, k, &v->fs_type);
	case 1:
		return rec_strings(x, path, k, &v->mount_flags, &v->nmount_flags);
	case 2:
		return rec_topologies(x, path, k, &v->requisite, &v->nrequisite);
	case 3:
		return rec_topologies(x, path, k, &v->preferred, &v->npreferred);
	case 4:
		return rec_int(x, path, k, &v->pending_capacity_min);
	default:
		return rec_map(x, path, k, false, &v->pending_mutable);
	}
}

static int rec_nested(struct rec *x, int which, struct model_volume *v)
{
	struct rec_obj o;
	int i, rc = 0;

	if (rec_open(x, &o, &rec_nested_keys[which], rec_nested_paths[which]))
		return -1;
	while (!rc && !(rc = rec_member(x, &o, &i)) && i >= 0)
		rc = rec_nested_member(x, which, i, o.path, v);
	return rc;
}

/* A volume record's keys, in the order the encoder writes them. */
/* clang-format off */
#define REC_VOLUME_KEYS(X) \
	X(RV_ID, "id") X(RV_NAME, "name") X(RV_PLUGIN, "plugin_id") \
	X(RV_EXTERNAL, "external_id") X(RV_CAPMIN, "capacity_min") \
	X(RV_CAPMAX, "capacity_max") X(RV_CAPS, "capabilities") X(RV_MOUNT, "mount_options") \
	X(RV_PARAMS, "parameters") X(RV_MUTABLE, "mutable_parameters") \
	X(RV_SECRETS, "secrets") X(RV_CONTEXT, "context") X(RV_TOPOREQ, "topology_request") \
	X(RV_SNAPSRC, "snapshot_source") X(RV_CLONESRC, "clone_source") X(RV_STATE, "state") \
	X(RV_FAILURE, "failure") X(RV_CAPACITY, "capacity") \
	X(RV_ACCESSIBLE, "accessible_topology") X(RV_NODEEXP, "node_expansion_required") \
	X(RV_PENDING, "pending") X(RV_CLAIMS, "claims") X(RV_PAST, "past_claims") \
	X(RV_PUBS, "publications") X(RV_CREATED, "created_ms") X(RV_UPDATED, "updated_ms")
/* clang-format on */
enum { REC_VOLUME_KEYS(REC_ENUM) };
static const char *const rec_volume_names[] = {REC_VOLUME_KEYS(REC_NAME)};
static const struct rec_keys rec_volume_keys = REC_KEYS(rec_volume_names);

/* One top-level member i of a volume record. */
static int rec_volume_member(struct rec *x, int i, struct model_volume *v)
{
	const char *k = rec_volume_names[i];

	switch (i) {
	case RV_ID:
		return rec_str(x, "", k, &v->id);
	case RV_NAME:
		return rec_str(x, "", k, &v->name);
	case RV_PLUGIN:
		return rec_str(x, "", k, &v->plugin_id);
	case RV_EXTERNAL:
		return rec_str(x, "", k, &v->external_id);
	case RV_CAPMIN:
		return rec_size(x, k, &v->capacity_min);
	case RV_CAPMAX:
		return rec_size(x, k, &v->capacity_max);
	case RV_CAPS:
		return rec_objects(x, "", k, sizeof(*v->caps), rec_cap, (void **)&v->caps,
				   &v->ncaps);
	case RV_MOUNT:
		return rec_nested(x, RX_MOUNT, v);
	case RV_PARAMS:
		return rec_map(x, "", k, false, &v->parameters);
	case RV_MUTABLE:
		return rec_map(x, "", k, false, &v->mutable_parameters);
	case RV_SECRETS:
		return rec_map(x, "", k, true, &v->secrets);
	case RV_CONTEXT:
		return rec_map(x, "", k, false, &v->context);
	case RV_TOPOREQ:
		return rec_nested(x, RX_TOPOLOGY, v);
	case RV_SNAPSRC:
		return rec_str(x, "", k, &v->snapshot_source);
	case RV_CLONESRC:
		return rec_str(x, "", k, &v->clone_source);
	case RV_FAILURE:
		return rec_str(x, "", k, &v->failure);
	case RV_CAPACITY:
		return rec_int(x, "", k, &v->capacity);
	case RV_ACCESSIBLE:
		return rec_topologies(x, "", k, &v->accessible, &v->naccessible);
	case RV_NODEEXP:
		return rec_bool(x, "", k, &v->node_expansion_required);
	case RV_PENDING:
		return rec_nested(x, RX_PENDING, v);
	case RV_CLAIMS:
		return rec_claims(x, k, &v->claims, &v->nclaims);
	case RV_PAST:
		return rec_claims(x, k, &v->past_claims, &v->npast_claims);
	case RV_PUBS:
		return rec_objects(x, "", k, sizeof(*v->pubs), rec_pub, (void **)&v->pubs,
				   &v->npubs);
	case RV_CREATED:
		return rec_int(x, "", k, &v->created_ms);
	default:
		return rec_int(x, "", k, &v->updated_ms);
	}
}

/* Starts a decoding of text; a is where it goes. */
static void rec_init(struct rec *x, struct arena *a, struct err *e, const char *what,
		     const char *text, size_t len)
{
	memset(x, 0, sizeof(*x));
	x->d = (struct model_dec){.a = a, .e = e ? e : &x->own, .strict = false, .what = what};
	jsonr_init(&x->r, text, len);
}

/* The code of the error x failed with. */
static int rec_code(const struct rec *x)
{
	return x->d.e->code ? x->d.e->code : CSID_EPROTO;
}

/* After the root object: only white space may follow. */
static int rec_finish(struct rec *x)
{
	return jsonr_end(&x->r) ? rec_syntax(x) : 0;
}

int model_volume_decode(struct arena *a, const char *json, size_t len, struct model_volume **out,
			struct err *e)
{
	struct model_volume *v = arena_alloc(a, sizeof(*v));
	int state = 0, i, rc = 0;
	struct rec_obj o;
	struct rec x;

	rec_init(&x, a, e, "volume record", json, len);
	if (!v)
		return rec_nomem(&x);
	if (rec_open(&x, &o, &rec_volume_keys, ""))
		return rec_code(&x);
	while (!rc && !(rc = rec_member(&x, &o, &i)) && i >= 0) {
		x.have_state |= i == RV_STATE;
		rc = i == RV_STATE ? rec_enum(&x, "", "state", &model_names_volume_state, &state)
				   : rec_volume_member(&x, i, v);
	}
	if (!rc)
		rc = rec_finish(&x);
	if (!rc && !v->id)
		rc = model_dec_fail(&x.d, "id", "required");
	if (!rc && !x.have_state)
		rc = model_dec_fail(&x.d, "state", "required");
	if (rc)
		return rec_code(&x);
	v->state = (enum model_volume_state)state;
	*out = v;
	return 0;
}

static const char *const rec_history_names[] = {"past_claims"};
static const struct rec_keys rec_history_keys = REC_KEYS(rec_history_names);

int model_history_decode(struct arena *a, const char *json, size_t len, struct model_claim **out,
			 size_t *n, struct err *e)
{
	struct rec_obj o;
	struct rec x;
	int i, rc = 0;

	*out = NULL;
	*n = 0;
	rec_init(&x, a, e, "claim history record", json, len);
	if (rec_open(&x, &o, &rec_history_keys, ""))
		return rec_code(&x);
	while (!rc && !(rc = rec_member(&x, &o, &i)) && i >= 0)
		rc = rec_claims(&x, "past_claims", out, n);
	if (!rc)
		rc = rec_finish(&x);
	return rc ? rec_code(&x) : 0;
}

/* ---- snapshots ---- */

/* A snapshot record's keys, in the order the encoder writes them. */
/* clang-format off */
#define REC_SNAPSHOT_KEYS(X) \
	X(RS_ID, "id") X(RS_VOLUME, "volume_id") X(RS_PLUGIN, "plugin_id") \
	X(RS_EXTERNAL, "external_id") X(RS_NAME, "name") X(RS_PARAMS, "parameters") \
	X(RS_SECRETS, "secrets") X(RS_STATE, "state") X(RS_FAILURE, "failure") \
	X(RS_READY, "ready_to_use") X(RS_SIZE, "size_bytes") X(RS_CTIME, "creation_time_ms") \
	X(RS_CREATED, "created_ms")
/* clang-format on */
enum { REC_SNAPSHOT_KEYS(REC_ENUM) };
static const char *const rec_snapshot_names[] = {REC_SNAPSHOT_KEYS(REC_NAME)};
static const struct rec_keys rec_snapshot_keys = REC_KEYS(rec_snapshot_names);

static int rec_snapshot_member(struct rec *x, int i, struct model_snapshot *s, int *state)
{
	const char *k = rec_snapshot_names[i];

	switch (i) {
	case RS_ID:
		return rec_str(x, "", k, &s->id);
	case RS_VOLUME:
		return rec_str(x, "", k, &s->volume_id);
	case RS_PLUGIN:
		return rec_str(x, "", k, &s->plugin_id);
	case RS_EXTERNAL:
		return rec_str(x, "", k, &s->external_id);
	case RS_NAME:
		return rec_str(x, "", k, &s->name);
	case RS_PARAMS:
		return rec_map(x, "", k, false, &s->parameters);
	case RS_SECRETS:
		return rec_map(x, "", k, true, &s->secrets);
	case RS_STATE:
		return rec_enum(x, "", k, &model_names_snapshot_state, state);
	case RS_FAILURE:
		return rec_str(x, "", k, &s->failure);
	case RS_READY:
		return rec_bool(x, "", k, &s->ready_to_use);
	case RS_SIZE:
		return rec_int(x, "", k, &s->size_bytes);
	case RS_CTIME:
		return rec_int(x, "", k, &s->creation_time_ms);
	default:
		return rec_int(x, "", k, &s->created_ms);
	}
}

int model_snapshot_decode(struct arena *a, const char *json, size_t len,
			  struct model_snapshot **out, struct err *e)
{
	struct model_snapshot *s = arena_alloc(a, sizeof(*s));
	int state = 0, i, rc = 0;
	struct rec_obj o;
	struct rec x;

	rec_init(&x, a, e, "snapshot record", json, len);
	if (!s)
		return rec_nomem(&x);
	if (rec_open(&x, &o, &rec_snapshot_keys, ""))
		return rec_code(&x);
	while (!rc && !(rc = rec_member(&x, &o, &i)) && i >= 0) {
		x.have_state |= i == RS_STATE;
		rc = rec_snapshot_member(&x, i, s, &state);
	}
	if (!rc)
		rc = rec_finish(&x);
	if (!rc && (!s->id || !s->id[0]))
		rc = model_dec_fail(&x.d, "id", "required");
	if (!rc && !x.have_state)
		rc = model_dec_fail(&x.d, "state", "required");
	if (rc)
		return rec_code(&x);
	s->state = (enum model_snapshot_state)state;
	*out = s;
	return 0;
}

/* ---- nodes ---- */

enum { RN_PLUGIN, RN_TYPE, RN_HEALTHY, RN_HEALTH, RN_VERSION, RN_CAPS, RN_PNODE, RN_MAX, RN_TOPO };
static const char *const rec_node_plugin_names[] = {"plugin_id",      "type",        "healthy",
						    "health",         "version",     "capabilities",
						    "plugin_node_id", "max_volumes", "topology"};
static const struct rec_keys rec_node_plugin_keys = REC_KEYS(rec_node_plugin_names);

static int rec_node_plugin(struct rec *x, const char *path, void *elem)
{
	struct model_node_plugin *p = elem;
	int type = 0, i, rc = 0;
	uint64_t have = 0;
	struct rec_obj o;

	if (rec_open(x, &o, &rec_node_plugin_keys, path))
		return -1;
	while (!rc && !(rc = rec_member(x, &o, &i)) && i >= 0) {
		const char *k = rec_node_plugin_names[i];

		have |= (uint64_t)1 << i;
		if (i == RN_PLUGIN)
			rc = rec_str(x, path, k, &p->plugin_id);
		else if (i == RN_TYPE)
			rc = rec_enum(x, path, k, &model_names_plugin_type, &type);
		else if (i == RN_HEALTHY)
			rc = rec_bool(x, path, k, &p->healthy);
		else if (i == RN_HEALTH)
			rc = rec_str(x, path, k, &p->health);
		else if (i == RN_VERSION)
			rc = rec_str(x, path, k, &p->version);
		else if (i == RN_CAPS)
			rc = rec_strings(x, path, k, &p->caps, &p->ncaps);
		else if (i == RN_PNODE)
			rc = rec_str(x, path, k, &p->plugin_node_id);
		else if (i == RN_MAX)
			rc = rec_int(x, path, k, &p->max_volumes);
		else
			rc = rec_map(x, path, k, false, &p->topology.segments);
	}
	if (rc)
		return rc;
	if (!p->plugin_id || !p->plugin_id[0])
		have &= ~((uint64_t)1 << RN_PLUGIN);
	p->type = (enum model_plugin_type)type;
	return rec_required(x, &o, have, RN_PLUGIN) || rec_required(x, &o, have, RN_TYPE) ? -1 : 0;
}

static const char *const rec_alloc_names[] = {"volume_id", "alloc_id"};
static const struct rec_keys rec_alloc_keys = REC_KEYS(rec_alloc_names);

static int rec_node_alloc(struct rec *x, const char *path, void *elem)
{
	struct model_node_alloc *al = elem;
	struct rec_obj o;
	int i, rc = 0;

	if (rec_open(x, &o, &rec_alloc_keys, path))
		return -1;
	while (!rc && !(rc = rec_member(x, &o, &i)) && i >= 0)
		rc = rec_str(x, path, rec_alloc_names[i], i == 0 ? &al->volume_id : &al->alloc_id);
	if (rc)
		return rc;
	if (!al->volume_id || !al->volume_id[0])
		return rec_fail(x, path, "volume_id", "required");
	if (!al->alloc_id || !al->alloc_id[0])
		return rec_fail(x, path, "alloc_id", "required");
	return 0;
}

/* A node record's keys, in the order the encoder writes them. */
/* clang-format off */
#define REC_NODE_KEYS(X) \
	X(RD_ID, "id") X(RD_INSTANCE, "instance_id") X(RD_STATUS, "status") \
	X(RD_REGISTERED, "registered_ms") X(RD_UPDATED, "updated_ms") \
	X(RD_ADDRESS, "address") X(RD_PLUGINS, "plugins") X(RD_ALLOCS, "allocations")
/* clang-format on */
enum { REC_NODE_KEYS(REC_ENUM) };
static const char *const rec_node_names[] = {REC_NODE_KEYS(REC_NAME)};
static const struct rec_keys rec_node_keys = REC_KEYS(rec_node_names);

static int rec_node_member(struct rec *x, int i, struct model_node *n, int *status)
{
	const char *k = rec_node_names[i];

	switch (i) {
	case RD_ID:
		return rec_str(x, "", k, &n->id);
	case RD_INSTANCE:
		return rec_str(x, "", k, &n->instance_id);
	case RD_STATUS:
		return rec_enum(x, "", k, &model_names_node_status, status);
	case RD_REGISTERED:
		return rec_int(x, "", k, &n->registered_ms);
	case RD_UPDATED:
		return rec_int(x, "", k, &n->updated_ms);
	case RD_ADDRESS:
		return rec_str(x, "", k, &n->address);
	case RD_PLUGINS:
		return rec_objects(x, "", k, sizeof(*n->plugins), rec_node_plugin,
				   (void **)&n->plugins, &n->nplugins);
	default:
		n->allocs_reported = true;
		return rec_objects(x, "", k, sizeof(*n->allocs), rec_node_alloc,
				   (void **)&n->allocs, &n->nallocs);
	}
}

int model_node_decode(struct arena *a, const char *json, size_t len, struct model_node **out,
		      struct err *e)
{
	struct model_node *n = arena_alloc(a, sizeof(*n));
	int status = 0, i, rc = 0;
	struct rec_obj o;
	struct rec x;

	rec_init(&x, a, e, "node record", json, len);
	if (!n)
		return rec_nomem(&x);
	if (rec_open(&x, &o, &rec_node_keys, ""))
		return rec_code(&x);
	while (!rc && !(rc = rec_member(&x, &o, &i)) && i >= 0)
		rc = rec_node_member(&x, i, n, &status);
	if (!rc)
		rc = rec_finish(&x);
	if (!rc && (!n->id || !n->id[0]))
		rc = model_dec_fail(&x.d, "id", "required");
	if (rc)
		return rec_code(&x);
	n->status = (enum model_node_status)status;
	*out = n;
	return 0;
}
