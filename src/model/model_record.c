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
 * keys are unique. No message names a secret's key or value.
 *
 * Each object kind is a table of its members (key, type, where the value
 * goes in the struct, whether it is required), read by one loop
 * (rec_fields); arrays of objects and nested objects name the table of
 * theirs. Keys are looked up in a table starting where the last one
 * matched, since the encoders write them in table order.
 */
#include <stddef.h>
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
};

/* What a member's value is, and so how it is read (rec_value). */
enum rec_type {
	RT_STR,
	RT_BOOL,
	RT_INT, /* an integer >= 0 */
	RT_SIZE, /* a capacity: bytes, or a size string such as "10GiB" */
	RT_ENUM, /* a name of names: the value's int */
	RT_MAP,
	RT_SECRETS, /* a map whose keys and values no message names */
	RT_STRINGS, /* an array of strings */
	RT_TOPOLOGIES, /* an array of maps */
	RT_OBJECTS, /* an array of objects, each read by sub */
	RT_NESTED, /* an object read by sub into the same struct */
};

/* Whether a member must be there once its object is read. */
enum rec_need {
	RQ_OPTIONAL,
	RQ_PRESENT, /* there, and not null */
	RQ_NONEMPTY, /* a string there, not null and not "" */
};

struct rec_table;

/* One member of an object kind: its key, type and where its value goes. */
struct rec_field {
	const char *name;
	enum rec_type type;
	enum rec_need need;
	size_t off; /* of the value in the struct read into */
	size_t count_off; /* RT_STRINGS, RT_TOPOLOGIES, RT_OBJECTS: of the element count */
	const struct model_names *names; /* RT_ENUM */
	const struct rec_table *sub; /* RT_OBJECTS: each element's; RT_NESTED: the object's */
};

/* The members of one object kind, in the order the encoder writes them. */
struct rec_table {
	const struct rec_field *f;
	int n;
	size_t size; /* of the struct an element of an array fills */
};

/* One object being read: its members, which were seen, where the last matched. */
struct rec_obj {
	const struct rec_table *keys;
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
static int rec_open(struct rec *x, struct rec_obj *o, const struct rec_table *keys,
		    const char *path)
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

				if (strcmp(o->keys->f[at].name, key) == 0)
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
static int rec_size(struct rec *x, const char *path, const char *key, int64_t *out)
{
	char where[MODEL_PATH_MAX];
	struct err sub;
	char *s;

	if (jsonr_peek(&x->r) != JSONR_STRING)
		return rec_count(x, path, key,
				 "expected bytes as an integer or a string such as \"10GiB\"", out);
	if (rec_str(x, path, key, &s))
		return -1;
	err_clear(&sub);
	if (model_parse_size(s, out, &sub))
		return model_dec_fail(&x->d, model_dec_path(where, path, key), "%s", sub.msg);
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

static int rec_fields(struct rec *x, const char *path, const struct rec_table *t, void *base,
		      uint64_t *have);
static int rec_required(struct rec *x, const char *path, const struct rec_table *t,
			const void *base, uint64_t have);

/* Reads the objects of the array at path.key, each into an element of t->size by t. */
static int rec_objects(struct rec *x, const char *path, const char *key, const struct rec_table *t,
		       void **out, size_t *n)
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
		void *elem;
		uint64_t have;

		if (rec_grow(x, out, &cap, *n, t->size))
			return -1;
		elem = (char *)*out + *n * t->size;
		rec_index_path(isub, sub, *n);
		if (rec_fields(x, isub, t, elem, &have) || rec_required(x, isub, t, elem, have))
			return -1;
		(*n)++;
	}
	return rc;
}

/* Reads the value of member f of the object at path into base. */
static int rec_value(struct rec *x, const char *path, const struct rec_field *f, void *base)
{
	char *at = (char *)base + f->off, sub[MODEL_PATH_MAX];
	size_t *count = (size_t *)((char *)base + f->count_off);
	const char *k = f->name;

	switch (f->type) {
	case RT_STR:
		return rec_str(x, path, k, (char **)at);
	case RT_BOOL:
		return rec_bool(x, path, k, (bool *)at);
	case RT_INT:
		return rec_int(x, path, k, (int64_t *)at);
	case RT_SIZE:
		return rec_size(x, path, k, (int64_t *)at);
	case RT_ENUM:
		return rec_enum(x, path, k, f->names, (int *)at);
	case RT_MAP:
	case RT_SECRETS:
		return rec_map(x, path, k, f->type == RT_SECRETS, (struct model_map *)at);
	case RT_STRINGS:
		return rec_strings(x, path, k, (char ***)at, count);
	case RT_TOPOLOGIES:
		return rec_topologies(x, path, k, (struct model_topology **)at, count);
	case RT_OBJECTS:
		return rec_objects(x, path, k, f->sub, (void **)at, count);
	default: {
		uint64_t have;

		return rec_fields(x, model_dec_path(sub, path, k), f->sub, base, &have);
	}
	}
}

/*
 * Reads the object at path into base by t: *have gets bit i for each
 * member i there with a value (not null). Unknown members are skipped.
 */
static int rec_fields(struct rec *x, const char *path, const struct rec_table *t, void *base,
		      uint64_t *have)
{
	struct rec_obj o;
	int i = -1, rc = 0;

	*have = 0;
	if (rec_open(x, &o, t, path))
		return -1;
	while (!rc && !(rc = rec_member(x, &o, &i)) && i >= 0) {
		*have |= (uint64_t)1 << i;
		rc = rec_value(x, path, &t->f[i], base);
	}
	return rc;
}

/* Fails at path.key, as "required", on the first member of t that must be there and is not. */
static int rec_required(struct rec *x, const char *path, const struct rec_table *t,
			const void *base, uint64_t have)
{
	for (int i = 0; i < t->n; i++) {
		const struct rec_field *f = &t->f[i];
		const char *s =
		    f->need == RQ_NONEMPTY ? *(char *const *)((const char *)base + f->off) : NULL;

		if (f->need == RQ_OPTIONAL)
			continue;
		if (!(have & ((uint64_t)1 << i)) || (f->need == RQ_NONEMPTY && (!s || !s[0])))
			return rec_fail(x, path, f->name, "required");
	}
	return 0;
}

/*
 * Table rows, for the struct REC_T names: REC_M(member, type, need) for a
 * member whose key is its name, REC_K(member, key, type, need) for one
 * whose key differs, REC_E(member, key, names, need) for an enum, REC_A(
 * member, count member, key, type, table of the objects or NULL) for an
 * array, REC_N(key, table) for an object nested in the same struct.
 */
/* The table name of REC_T's members: the rows, then the table. */
#define REC_DEFINE(name, ...)                                          \
	static const struct rec_field name##_fields[] = {__VA_ARGS__}; \
	static const struct rec_table name = REC_TABLE(name##_fields, REC_T)
#define REC_TABLE(arr, type)                                           \
	{                                                              \
		arr, (int)(sizeof(arr) / sizeof(arr[0])), sizeof(type) \
	}
#define REC_K(m, key, type, need)                                  \
	{                                                          \
		key, type, need, offsetof(REC_T, m), 0, NULL, NULL \
	}
#define REC_M(m, type, need) REC_K(m, #m, type, need)
#define REC_E(m, key, names, need)                                      \
	{                                                               \
		key, RT_ENUM, need, offsetof(REC_T, m), 0, &names, NULL \
	}
#define REC_A(m, n, key, type, sub)                                                       \
	{                                                                                 \
		key, type, RQ_OPTIONAL, offsetof(REC_T, m), offsetof(REC_T, n), NULL, sub \
	}
#define REC_N(key, sub)                                      \
	{                                                    \
		key, RT_NESTED, RQ_OPTIONAL, 0, 0, NULL, sub \
	}
/* Optional members, the most common rows. */
#define REC_STR(m) REC_M(m, RT_STR, RQ_OPTIONAL)
#define REC_INT(m) REC_M(m, RT_INT, RQ_OPTIONAL)
#define REC_BOOL(m) REC_M(m, RT_BOOL, RQ_OPTIONAL)
#define REC_MAP(m) REC_M(m, RT_MAP, RQ_OPTIONAL)
/* A capability's two members, in claims and publications too (prefix: "cap."). */
#define REC_CAP(p)                                                      \
	REC_E(p access, "access_mode", model_names_access, RQ_PRESENT), \
	    REC_E(p attachment, "attachment_mode", model_names_attachment, RQ_OPTIONAL)

/* Enums are read as int (rec_enum) straight into the struct. */
_Static_assert(sizeof(enum model_access) == sizeof(int) &&
		   sizeof(enum model_attachment) == sizeof(int) &&
		   sizeof(enum model_claim_mode) == sizeof(int) &&
		   sizeof(enum model_claim_state) == sizeof(int) &&
		   sizeof(enum model_pub_state) == sizeof(int) &&
		   sizeof(enum model_volume_state) == sizeof(int) &&
		   sizeof(enum model_snapshot_state) == sizeof(int) &&
		   sizeof(enum model_plugin_type) == sizeof(int) &&
		   sizeof(enum model_node_status) == sizeof(int),
	       "an enum of the model is not an int");

/* clang-format off */

/* ---- claims, publications, capabilities ---- */

#define REC_T struct model_claim
REC_DEFINE(rec_claim,
	REC_M(alloc_id, RT_STR, RQ_NONEMPTY), REC_M(node_id, RT_STR, RQ_NONEMPTY),
	REC_STR(plugin_node_id),
	REC_E(mode, "mode", model_names_claim_mode, RQ_PRESENT),
	REC_CAP(cap.), REC_BOOL(read_only),
	REC_E(state, "state", model_names_claim_state, RQ_PRESENT),
	REC_INT(claimed_ms), REC_INT(updated_ms), REC_STR(note),
	REC_BOOL(held_by_agent), REC_BOOL(node_expanded)
);
#undef REC_T

#define REC_T struct model_publication
REC_DEFINE(rec_pub,
	REC_M(node_id, RT_STR, RQ_NONEMPTY), REC_STR(plugin_node_id), REC_BOOL(read_only),
	REC_CAP(cap.), REC_E(state, "state", model_names_pub_state, RQ_PRESENT), REC_MAP(context)
);
#undef REC_T

#define REC_T struct model_capability
REC_DEFINE(rec_cap, REC_CAP());
#undef REC_T

/* ---- volumes ---- */

#define REC_T struct model_volume
REC_DEFINE(rec_mount,
	REC_STR(fs_type), REC_A(mount_flags, nmount_flags, "mount_flags", RT_STRINGS, NULL)
);
REC_DEFINE(rec_topology,
	REC_A(requisite, nrequisite, "requisite", RT_TOPOLOGIES, NULL),
	REC_A(preferred, npreferred, "preferred", RT_TOPOLOGIES, NULL)
);
REC_DEFINE(rec_pending,
	REC_K(pending_capacity_min, "capacity_min", RT_INT, RQ_OPTIONAL),
	REC_K(pending_mutable, "mutable_parameters", RT_MAP, RQ_OPTIONAL)
);
REC_DEFINE(rec_volume,
	REC_M(id, RT_STR, RQ_PRESENT), REC_STR(name), REC_STR(plugin_id), REC_STR(external_id),
	REC_M(capacity_min, RT_SIZE, RQ_OPTIONAL), REC_M(capacity_max, RT_SIZE, RQ_OPTIONAL),
	REC_A(caps, ncaps, "capabilities", RT_OBJECTS, &rec_cap),
	REC_N("mount_options", &rec_mount),
	REC_MAP(parameters), REC_MAP(mutable_parameters), REC_M(secrets, RT_SECRETS, RQ_OPTIONAL),
	REC_MAP(context), REC_N("topology_request", &rec_topology),
	REC_STR(snapshot_source), REC_STR(clone_source),
	REC_E(state, "state", model_names_volume_state, RQ_PRESENT),
	REC_STR(failure), REC_INT(capacity),
	REC_A(accessible, naccessible, "accessible_topology", RT_TOPOLOGIES, NULL),
	REC_BOOL(node_expansion_required), REC_N("pending", &rec_pending),
	REC_A(claims, nclaims, "claims", RT_OBJECTS, &rec_claim),
	REC_A(past_claims, npast_claims, "past_claims", RT_OBJECTS, &rec_claim),
	REC_A(pubs, npubs, "publications", RT_OBJECTS, &rec_pub),
	REC_INT(created_ms), REC_INT(updated_ms)
);
#undef REC_T

/* A claim history record: {"past_claims": [...]}. */
struct rec_history {
	struct model_claim *past_claims;
	size_t n;
};
#define REC_T struct rec_history
REC_DEFINE(rec_history,
	REC_A(past_claims, n, "past_claims", RT_OBJECTS, &rec_claim)
);
#undef REC_T

/* ---- snapshots ---- */

#define REC_T struct model_snapshot
REC_DEFINE(rec_snapshot,
	REC_M(id, RT_STR, RQ_NONEMPTY), REC_STR(volume_id), REC_STR(plugin_id),
	REC_STR(external_id), REC_STR(name), REC_MAP(parameters),
	REC_M(secrets, RT_SECRETS, RQ_OPTIONAL),
	REC_E(state, "state", model_names_snapshot_state, RQ_PRESENT),
	REC_STR(failure), REC_BOOL(ready_to_use), REC_INT(size_bytes),
	REC_INT(creation_time_ms), REC_INT(created_ms)
);
#undef REC_T

/* ---- nodes ---- */

#define REC_T struct model_node_plugin
REC_DEFINE(rec_node_plugin,
	REC_M(plugin_id, RT_STR, RQ_NONEMPTY),
	REC_E(type, "type", model_names_plugin_type, RQ_PRESENT),
	REC_BOOL(healthy), REC_STR(health), REC_STR(version),
	REC_A(caps, ncaps, "capabilities", RT_STRINGS, NULL),
	REC_STR(plugin_node_id), REC_INT(max_volumes),
	REC_K(topology.segments, "topology", RT_MAP, RQ_OPTIONAL)
);
#undef REC_T

#define REC_T struct model_node_alloc
REC_DEFINE(rec_node_alloc,
	REC_M(volume_id, RT_STR, RQ_NONEMPTY), REC_M(alloc_id, RT_STR, RQ_NONEMPTY)
);
#undef REC_T

/* Index of "allocations" below: there (even empty) means the node reported them. */
#define REC_NODE_ALLOCS 7
#define REC_T struct model_node
REC_DEFINE(rec_node,
	REC_M(id, RT_STR, RQ_NONEMPTY), REC_STR(instance_id),
	REC_E(status, "status", model_names_node_status, RQ_OPTIONAL),
	REC_INT(registered_ms), REC_INT(updated_ms), REC_STR(address),
	REC_A(plugins, nplugins, "plugins", RT_OBJECTS, &rec_node_plugin),
	REC_A(allocs, nallocs, "allocations", RT_OBJECTS, &rec_node_alloc)
);
#undef REC_T

/* clang-format on */

/* ---- records ---- */

/*
 * Decodes one record (the object at the top of text) by t into a struct
 * of t->size made in a: the members, then nothing but white space after
 * the object, then the members t requires. *out gets the struct, *have
 * (may be NULL) as rec_fields. 0, or the error's code.
 */
static int rec_record(struct arena *a, struct err *e, const char *what, const char *text,
		      size_t len, const struct rec_table *t, void **out, uint64_t *have)
{
	void *base = arena_alloc(a, t->size);
	uint64_t seen = 0;
	struct rec x;

	memset(&x, 0, sizeof(x));
	x.d = (struct model_dec){.a = a, .e = e ? e : &x.own, .strict = false, .what = what};
	jsonr_init(&x.r, text, len);
	if (!base)
		return rec_nomem(&x);
	if (rec_fields(&x, "", t, base, &seen) || (jsonr_end(&x.r) && rec_syntax(&x)) ||
	    rec_required(&x, "", t, base, seen))
		return x.d.e->code ? x.d.e->code : CSID_EPROTO;
	*out = base;
	if (have)
		*have = seen;
	return 0;
}

int model_volume_decode(struct arena *a, const char *json, size_t len, struct model_volume **out,
			struct err *e)
{
	return rec_record(a, e, "volume record", json, len, &rec_volume, (void **)out, NULL);
}

int model_history_decode(struct arena *a, const char *json, size_t len, struct model_claim **out,
			 size_t *n, struct err *e)
{
	struct rec_history *h = NULL;
	int rc =
	    rec_record(a, e, "claim history record", json, len, &rec_history, (void **)&h, NULL);

	*out = rc ? NULL : h->past_claims;
	*n = rc ? 0 : h->n;
	return rc;
}

int model_snapshot_decode(struct arena *a, const char *json, size_t len,
			  struct model_snapshot **out, struct err *e)
{
	return rec_record(a, e, "snapshot record", json, len, &rec_snapshot, (void **)out, NULL);
}

int model_node_decode(struct arena *a, const char *json, size_t len, struct model_node **out,
		      struct err *e)
{
	uint64_t have = 0;
	int rc = rec_record(a, e, "node record", json, len, &rec_node, (void **)out, &have);

	if (rc == 0)
		(*out)->allocs_reported = (have >> REC_NODE_ALLOCS) & 1;
	return rc;
}
