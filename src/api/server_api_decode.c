/*
 * Request bodies of the server API: claim, release, detach, expand and
 * modify here; volume specs, snapshot specs and node fingerprints through
 * the model's strict decoders, with the ID of the path checked. Each is a
 * strict JSON object: only its documented keys (an unknown key is
 * refused with its path), the right types, IDs checked by the model,
 * strings and maps within the CSI size limits. The claim and release
 * bodies (one each per mount and unmount) are read with the pull reader,
 * the others through a jansson tree. Messages never echo a value (it may
 * be a secret). Fuzzed by test/fuzz/fuzz_server_api.c.
 */
#include "api/server_api_int.h"

#include <string.h>

#include "util/jsonr.h"

/* Parses body as a JSON object; returns it (owned) or NULL with e set. */
static json_t *decode_object(const char *body, size_t len, struct err *e)
{
	json_error_t je;
	json_t *root;

	if (len == 0) {
		err_set(e, CSID_EINVAL, "request body: empty, expected a JSON object");
		return NULL;
	}
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		err_set(e, CSID_EINVAL, "request body: malformed JSON at line %d column %d: %.100s",
			je.line, je.column, je.text);
		return NULL;
	}
	if (!json_is_object(root)) {
		json_decref(root);
		err_set(e, CSID_EINVAL, "request body: expected a JSON object");
		return NULL;
	}
	return root;
}

/*
 * The claim and release bodies, asked for on every mount and unmount,
 * are read without a JSON tree (util/jsonr.h): a flat object whose
 * members are strings and booleans, each key known and given once.
 */
struct flat_field {
	const char *key;
	bool is_bool;
	size_t max; /* strings: longest allowed */
	char *s; /* out: the string, or NULL (absent or null) */
	bool b; /* out: the boolean (absent or null: false) */
	bool seen;
};

static int flat_syntax(const struct jsonr *r, struct err *e)
{
	int line, column;

	if (r->err && strcmp(r->err, "out of memory") == 0)
		return err_set(e, CSID_ENOMEM, "out of memory");
	jsonr_where(r, &line, &column);
	return err_set(e, CSID_EINVAL, "request body: malformed JSON at line %d column %d: %s",
		       line, column, r->err ? r->err : "invalid");
}

/* One member's value into f. */
static int flat_value(struct jsonr *r, struct arena *a, struct flat_field *f, struct err *e)
{
	enum jsonr_kind k = jsonr_peek(r);
	size_t len;

	if (k == JSONR_BAD)
		return flat_syntax(r, e);
	if (k == JSONR_NULL)
		return jsonr_literal(r) ? flat_syntax(r, e) : 0;
	if (f->is_bool) {
		if (k != JSONR_BOOL)
			return err_set(e, CSID_EINVAL, "%s: expected true or false", f->key);
		return jsonr_bool(r, &f->b) ? flat_syntax(r, e) : 0;
	}
	if (k != JSONR_STRING)
		return err_set(e, CSID_EINVAL, "%s: expected a string", f->key);
	if (jsonr_str(r, a, &f->s, &len))
		return flat_syntax(r, e);
	if (len > f->max)
		return err_set(e, CSID_EINVAL, "%s: longer than %zu bytes", f->key, f->max);
	if (memchr(f->s, '\0', len))
		return err_set(e, CSID_EINVAL, "%s: contains NUL", f->key);
	return 0;
}

static int decode_flat(struct arena *a, const char *body, size_t len, struct flat_field *f,
		       size_t nf, struct err *e)
{
	struct jsonr r;
	size_t n = 0;
	int rc;

	if (len == 0)
		return err_set(e, CSID_EINVAL, "request body: empty, expected a JSON object");
	jsonr_init(&r, body, len);
	switch (jsonr_peek(&r)) {
	case JSONR_OBJECT:
		break;
	case JSONR_BAD:
		return flat_syntax(&r, e);
	default:
		return err_set(e, CSID_EINVAL, "request body: expected a JSON object");
	}
	if (jsonr_open(&r))
		return flat_syntax(&r, e);
	for (;;) {
		char key[128];
		size_t klen, i = nf;

		rc = jsonr_key(&r, &n, key, sizeof(key), &klen);
		if (rc < 0)
			return flat_syntax(&r, e);
		if (rc == 0)
			break;
		for (size_t j = 0; klen < sizeof(key) && j < nf && i == nf; j++)
			if (strcmp(f[j].key, key) == 0)
				i = j;
		if (i == nf)
			return err_set(e, CSID_EINVAL, "%.64s: unknown key",
				       klen < sizeof(key) ? key : "(a long key)");
		if (f[i].seen)
			return err_set(e, CSID_EINVAL, "%s: duplicate key", f[i].key);
		f[i].seen = true;
		rc = flat_value(&r, a, &f[i], e);
		if (rc)
			return rc;
	}
	return jsonr_end(&r) ? flat_syntax(&r, e) : 0;
}

/* An ID field of a flat object: required, checked by the model. */
static int flat_id(const struct flat_field *f, char **out, struct err *e)
{
	*out = f->s;
	if (!f->s)
		return err_set(e, CSID_EINVAL, "%s: required", f->key);
	return model_id_check(f->key, f->s, strlen(f->s), e);
}

/* Refuses keys of obj outside allowed (NULL-terminated). */
static int decode_keys(json_t *obj, const char *path, const char *const *allowed, struct err *e)
{
	const char *key;
	json_t *v;

	json_object_foreach(obj, key, v)
	{
		size_t i;

		for (i = 0; allowed[i]; i++)
			if (strcmp(key, allowed[i]) == 0)
				break;
		if (!allowed[i])
			return err_set(e, CSID_EINVAL, "%s%s%.64s: unknown key", path,
				       path[0] ? "." : "", key);
	}
	return 0;
}

/* An optional string of at most max bytes without NUL, copied into a. */
static int decode_string(struct arena *a, json_t *obj, const char *key, size_t max, bool required,
			 char **out, struct err *e)
{
	json_t *v = json_object_get(obj, key);

	*out = NULL;
	if (!v || json_is_null(v)) {
		if (required)
			return err_set(e, CSID_EINVAL, "%s: required", key);
		return 0;
	}
	if (!json_is_string(v))
		return err_set(e, CSID_EINVAL, "%s: expected a string", key);
	if (json_string_length(v) > max)
		return err_set(e, CSID_EINVAL, "%s: longer than %zu bytes", key, max);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return err_set(e, CSID_EINVAL, "%s: contains NUL", key);
	*out = arena_strdup(a, json_string_value(v));
	return *out ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
}

static int decode_id(struct arena *a, json_t *obj, const char *key, const char *what, bool required,
		     char **out, struct err *e)
{
	int rc = decode_string(a, obj, key, 16 * MODEL_ID_MAX, required, out, e);

	if (rc || !*out)
		return rc;
	return model_id_check(what, *out, strlen(*out), e);
}

static int decode_map(struct arena *a, json_t *obj, const char *key, struct model_map *out,
		      struct err *e)
{
	json_t *v = json_object_get(obj, key), *item;
	const char *k;
	size_t bytes = 0, n = 0;

	memset(out, 0, sizeof(*out));
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_object(v))
		return err_set(e, CSID_EINVAL, "%s: expected an object of strings", key);
	out->kv = arena_alloc(a, (json_object_size(v) + 1) * sizeof(*out->kv));
	if (!out->kv)
		return err_set(e, CSID_ENOMEM, "out of memory");
	json_object_foreach(v, k, item)
	{
		size_t i;

		if (!json_is_string(item))
			return err_set(e, CSID_EINVAL, "%s.%.64s: expected a string", key, k);
		if (!k[0] || strlen(json_string_value(item)) != json_string_length(item))
			return err_set(e, CSID_EINVAL, "%s: empty key or NUL in a value", key);
		bytes += strlen(k) + json_string_length(item);
		if (bytes > MODEL_MAP_BYTES_MAX)
			return err_set(e, CSID_EINVAL, "%s: larger than %d bytes", key,
				       MODEL_MAP_BYTES_MAX);
		/* Keep the map sorted by key (model.h). */
		for (i = n; i > 0 && strcmp(out->kv[i - 1].key, k) > 0; i--)
			out->kv[i] = out->kv[i - 1];
		out->kv[i].key = arena_strdup(a, k);
		out->kv[i].value = arena_strdup(a, json_string_value(item));
		if (!out->kv[i].key || !out->kv[i].value)
			return err_set(e, CSID_ENOMEM, "out of memory");
		n++;
	}
	out->n = n;
	return 0;
}

int server_api_decode_claim(struct arena *a, const char *body, size_t len,
			    struct model_claim_request *out, bool *attach_default, struct err *e)
{
	enum { F_ALLOC, F_NODE, F_MODE, F_ACCESS, F_ATTACH, F_HELD };
	struct flat_field f[] = {
	    {.key = "alloc_id", .max = 16 * MODEL_ID_MAX},
	    {.key = "node_id", .max = 16 * MODEL_ID_MAX},
	    {.key = "mode", .max = 16},
	    {.key = "access_mode", .max = 64},
	    {.key = "attachment_mode", .max = 64},
	    {.key = "held_by_agent", .is_bool = true},
	};
	const char *mode, *access, *attach;
	char *alloc = NULL, *node = NULL;
	int rc = decode_flat(a, body, len, f, sizeof(f) / sizeof(f[0]), e);

	memset(out, 0, sizeof(*out));
	if (!rc)
		rc = flat_id(&f[F_ALLOC], &alloc, e);
	if (!rc)
		rc = flat_id(&f[F_NODE], &node, e);
	mode = f[F_MODE].s;
	access = f[F_ACCESS].s;
	attach = f[F_ATTACH].s;
	out->held_by_agent = f[F_HELD].b;
	if (!rc && mode && strcmp(mode, "read") != 0 && strcmp(mode, "write") != 0)
		rc = err_set(e, CSID_EINVAL, "mode: expected read or write");
	/* Without access_mode the server takes the volume's first capability. */
	if (!rc && !access && !mode)
		rc = err_set(e, CSID_EINVAL, "access_mode: required without mode");
	if (!rc && access)
		rc = model_access_parse(access, &out->cap.access, e);
	if (!rc && attach)
		rc = model_attachment_parse(attach, &out->cap.attachment, e);
	if (!rc) {
		out->alloc_id = alloc;
		out->node_id = node;
		*attach_default = !attach;
		out->mode =
		    mode && strcmp(mode, "read") == 0 ? MODEL_CLAIM_READ : MODEL_CLAIM_WRITE;
		if (!mode && !model_access_writable(out->cap.access))
			out->mode = MODEL_CLAIM_READ;
	}
	return rc;
}

int server_api_decode_release(struct arena *a, const char *body, size_t len, char **alloc_id,
			      bool *force, char **reason, struct err *e)
{
	struct flat_field f[] = {
	    {.key = "alloc_id", .max = 16 * MODEL_ID_MAX},
	    {.key = "force", .is_bool = true},
	    {.key = "reason", .max = SERVER_RELEASE_REASON_MAX},
	};
	int rc = decode_flat(a, body, len, f, sizeof(f) / sizeof(f[0]), e);

	*force = f[1].b;
	*reason = f[2].s;
	if (!rc)
		rc = flat_id(&f[0], alloc_id, e);
	/* It ends up in the claim's note and in events: one line of text. */
	for (const char *p = rc ? NULL : *reason; p && *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			rc = err_set(e, CSID_EINVAL, "reason: contains a control character");
	return rc;
}

int server_api_decode_detach(struct arena *a, const char *body, size_t len, char **node_id,
			     struct err *e)
{
	static const char *const keys[] = {"node_id", NULL};
	int rc;
	json_t *root = decode_object(body, len, e);

	if (!root)
		return CSID_EINVAL;
	rc = decode_keys(root, "", keys, e);
	if (!rc)
		rc = decode_id(a, root, "node_id", "node_id", true, node_id, e);
	json_decref(root);
	return rc;
}

int server_api_decode_node_expanded(struct arena *a, const char *body, size_t len, char **node_id,
				    int64_t *capacity, struct err *e)
{
	static const char *const keys[] = {"node_id", "capacity", NULL};
	json_t *root = decode_object(body, len, e), *v;
	int rc;

	if (!root)
		return CSID_EINVAL;
	rc = decode_keys(root, "", keys, e);
	if (!rc)
		rc = decode_id(a, root, "node_id", "node_id", true, node_id, e);
	v = json_object_get(root, "capacity");
	if (!rc && (!json_is_integer(v) || json_integer_value(v) <= 0))
		rc = err_set(e, CSID_EINVAL, "capacity: required, a positive integer");
	if (!rc)
		*capacity = json_integer_value(v);
	json_decref(root);
	return rc;
}

int server_api_decode_expand(struct arena *a, const char *body, size_t len, int64_t *capacity,
			     struct err *e)
{
	static const char *const keys[] = {"capacity_min", NULL};
	json_t *v;
	int rc;
	json_t *root = decode_object(body, len, e);

	if (!root)
		return CSID_EINVAL;
	rc = decode_keys(root, "", keys, e);
	v = json_object_get(root, "capacity_min");
	if (!rc && !v)
		rc = err_set(e, CSID_EINVAL, "capacity_min: required");
	if (!rc && json_is_integer(v)) {
		*capacity = json_integer_value(v);
		if (*capacity <= 0)
			rc = err_set(e, CSID_EINVAL, "capacity_min: must be positive");
	} else if (!rc && json_is_string(v)) {
		rc = model_parse_size(json_string_value(v), capacity, e);
		if (!rc && *capacity <= 0)
			rc = err_set(e, CSID_EINVAL, "capacity_min: must be positive");
	} else if (!rc) {
		rc =
		    err_set(e, CSID_EINVAL, "capacity_min: expected bytes or a size such as 10GiB");
	}
	json_decref(root);
	return rc;
}

int server_api_decode_modify(struct arena *a, const char *body, size_t len, struct model_map *out,
			     struct err *e)
{
	static const char *const keys[] = {"mutable_parameters", NULL};
	int rc;
	json_t *root = decode_object(body, len, e);

	if (!root)
		return CSID_EINVAL;
	rc = decode_keys(root, "", keys, e);
	if (!rc)
		rc = decode_map(a, root, "mutable_parameters", out, e);
	if (!rc && out->n == 0)
		rc = err_set(e, CSID_EINVAL, "mutable_parameters: required, at least one");
	json_decref(root);
	return rc;
}

/* Checks that a decoded body's "id" (when given) matches the path, or fills it in. */
static int decode_path_id(struct arena *a, char **id, const char *path_id, struct err *e)
{
	if (*id && strcmp(*id, path_id) != 0)
		return err_set(e, CSID_EINVAL, "id: does not match the ID in the path");
	if (!*id)
		*id = arena_strdup(a, path_id);
	return *id ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
}

int server_api_decode_snapshot(struct arena *a, const char *body, size_t len, const char *path_id,
			       struct model_snapshot **out, struct err *e)
{
	int rc = model_snapshot_spec_decode(a, body, len, out, e);

	if (!rc)
		rc = decode_path_id(a, &(*out)->id, path_id, e);
	if (!rc)
		rc = model_snapshot_validate(*out, e);
	return rc;
}

int server_api_decode_node(struct arena *a, const char *body, size_t len, const char *path_id,
			   struct model_node **out, struct err *e)
{
	int rc = model_node_spec_decode(a, body, len, out, e);

	if (!rc)
		rc = decode_path_id(a, &(*out)->id, path_id, e);
	if (!rc)
		rc = model_node_validate(*out, e);
	return rc;
}
