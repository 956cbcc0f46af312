/*
 * Request bodies of the server API: claim, release, detach, expand and
 * modify here; volume specs, snapshot specs and node fingerprints through
 * the model's strict decoders, with the ID of the path checked. Each is a strict JSON object: only
 * its documented keys (an unknown key is refused with its path), the right types, IDs checked by
 * the model, strings and maps within the CSI size limits. Messages never echo a value (it may be a
 * secret). Fuzzed by test/fuzz/fuzz_server_api.c.
 */
#include "api/server_api_int.h"

#include <string.h>

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

static int decode_bool(json_t *obj, const char *key, bool *out, struct err *e)
{
	json_t *v = json_object_get(obj, key);

	*out = false;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_boolean(v))
		return err_set(e, CSID_EINVAL, "%s: expected true or false", key);
	*out = json_is_true(v);
	return 0;
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
	static const char *const keys[] = {
	    "alloc_id", "node_id", "mode", "access_mode", "attachment_mode", "held_by_agent", NULL};
	char *alloc = NULL, *node = NULL, *mode = NULL, *access = NULL, *attach = NULL;
	int rc;
	json_t *root = decode_object(body, len, e);

	if (!root)
		return CSID_EINVAL;
	memset(out, 0, sizeof(*out));
	rc = decode_keys(root, "", keys, e);
	if (!rc)
		rc = decode_id(a, root, "alloc_id", "alloc_id", true, &alloc, e);
	if (!rc)
		rc = decode_id(a, root, "node_id", "node_id", true, &node, e);
	if (!rc)
		rc = decode_string(a, root, "mode", 16, false, &mode, e);
	if (!rc)
		rc = decode_string(a, root, "access_mode", 64, false, &access, e);
	if (!rc)
		rc = decode_string(a, root, "attachment_mode", 64, false, &attach, e);
	if (!rc)
		rc = decode_bool(root, "held_by_agent", &out->held_by_agent, e);
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
	json_decref(root);
	return rc;
}

int server_api_decode_release(struct arena *a, const char *body, size_t len, char **alloc_id,
			      bool *force, char **reason, struct err *e)
{
	static const char *const keys[] = {"alloc_id", "force", "reason", NULL};
	int rc;
	json_t *root = decode_object(body, len, e);

	if (!root)
		return CSID_EINVAL;
	rc = decode_keys(root, "", keys, e);
	if (!rc)
		rc = decode_id(a, root, "alloc_id", "alloc_id", true, alloc_id, e);
	if (!rc)
		rc = decode_bool(root, "force", force, e);
	if (!rc)
		rc = decode_string(a, root, "reason", SERVER_RELEASE_REASON_MAX, false, reason, e);
	/* It ends up in the claim's note and in events: one line of text. */
	for (const char *p = rc ? NULL : *reason; p && *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			rc = err_set(e, CSID_EINVAL, "reason: contains a control character");
	json_decref(root);
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
