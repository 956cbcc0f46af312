/*
 * Decoding of the model's JSON from outside: the helpers over a parsed
 * jansson tree that the strict decoders of specs and fingerprints
 * (model_spec.c) use, and the messages (model_dec_fail, model_dec_path)
 * that the store decoders (model_record.c, which read the text without a
 * tree) share with them. Everything decoded lives in the caller's arena.
 * No message names a secret's key or value or a mount flag.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/model_int.h"

/* ---- decoding helpers ---- */

int model_dec_fail(struct model_dec *d, const char *path, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (path && path[0])
		return err_set(d->e, d->strict ? CSID_EINVAL : CSID_EPROTO, "%s: %s: %s", d->what,
			       path, msg);
	return err_set(d->e, d->strict ? CSID_EINVAL : CSID_EPROTO, "%s: %s", d->what, msg);
}

static int model_dec_nomem(struct model_dec *d)
{
	return err_set(d->e, CSID_ENOMEM, "%s: out of memory", d->what);
}

/* Copies what fits of s (n bytes) to buf at *at (of MODEL_PATH_MAX), NUL-terminated. */
static void model_dec_path_put(char *buf, size_t *at, const char *s, size_t n)
{
	if (n > MODEL_PATH_MAX - 1 - *at)
		n = MODEL_PATH_MAX - 1 - *at;
	memcpy(buf + *at, s, n);
	*at += n;
	buf[*at] = '\0';
}

/* Runs for every member decoded, error or not: no printf here. */
const char *model_dec_path(char *buf, const char *parent, const char *key)
{
	size_t at = 0;

	buf[0] = '\0';
	if (parent && parent[0]) {
		model_dec_path_put(buf, &at, parent, strlen(parent));
		model_dec_path_put(buf, &at, ".", 1);
	}
	model_dec_path_put(buf, &at, key, strlen(key));
	return buf;
}

int model_dec_object(struct model_dec *d, json_t *v, const char *path, const char *const *allowed)
{
	const char *key;
	json_t *item;

	if (!json_is_object(v))
		return model_dec_fail(d, path, "expected an object");
	if (!d->strict || !allowed)
		return 0;
	json_object_foreach(v, key, item)
	{
		char q[48], sub[MODEL_PATH_MAX];
		bool ok = false;

		for (int i = 0; allowed[i] && !ok; i++)
			ok = strcmp(key, allowed[i]) == 0;
		if (!ok)
			return model_dec_fail(
			    d,
			    model_dec_path(sub, path,
					   model_sanitize(q, sizeof(q), key, strlen(key))),
			    "unknown key");
	}
	return 0;
}

/* The member key of obj, NULL when absent or null. */
static json_t *model_member(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	return json_is_null(v) ? NULL : v;
}

/* A JSON string value copied into d->a (sub names it). */
static int model_dec_strv(struct model_dec *d, json_t *v, const char *sub, size_t max, char **out)
{
	size_t len;

	if (!json_is_string(v))
		return model_dec_fail(d, sub, "expected a string");
	len = json_string_length(v);
	if (d->strict && max && len > max)
		return model_dec_fail(d, sub, "longer than %zu bytes", max);
	if (memchr(json_string_value(v), '\0', len))
		return model_dec_fail(d, sub, "contains a NUL byte");
	*out = arena_strdup(d->a, json_string_value(v));
	return *out ? 0 : model_dec_nomem(d);
}

int model_dec_str(struct model_dec *d, json_t *obj, const char *key, const char *path, size_t max,
		  char **out)
{
	json_t *v = model_member(obj, key);
	char sub[MODEL_PATH_MAX];

	*out = NULL;
	if (!v)
		return 0;
	return model_dec_strv(d, v, model_dec_path(sub, path, key), max, out);
}

int model_dec_str_req(struct model_dec *d, json_t *obj, const char *key, const char *path,
		      size_t max, char **out)
{
	char sub[MODEL_PATH_MAX];
	int rc = model_dec_str(d, obj, key, path, max, out);

	if (!rc && (!*out || !(*out)[0]))
		return model_dec_fail(d, model_dec_path(sub, path, key), "required");
	return rc;
}

int model_dec_bool(struct model_dec *d, json_t *obj, const char *key, const char *path, bool *out)
{
	json_t *v = model_member(obj, key);
	char sub[MODEL_PATH_MAX];

	*out = false;
	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return model_dec_fail(d, model_dec_path(sub, path, key), "expected true or false");
	*out = json_is_true(v);
	return 0;
}

int model_dec_int(struct model_dec *d, json_t *obj, const char *key, const char *path, int64_t *out)
{
	json_t *v = model_member(obj, key);
	char sub[MODEL_PATH_MAX];

	*out = 0;
	if (!v)
		return 0;
	if (!json_is_integer(v))
		return model_dec_fail(d, model_dec_path(sub, path, key), "expected an integer");
	if (json_integer_value(v) < 0)
		return model_dec_fail(d, model_dec_path(sub, path, key), "negative");
	*out = (int64_t)json_integer_value(v);
	return 0;
}

static int model_kv_cmp(const void *a, const void *b)
{
	return strcmp(((const struct model_kv *)a)->key, ((const struct model_kv *)b)->key);
}

/* A map from the JSON object v (sub names it). */
static int model_dec_mapv(struct model_dec *d, json_t *v, const char *sub, bool secret,
			  struct model_map *out)
{
	size_t n = json_object_size(v), bytes = 0;
	const char *key;
	json_t *item;

	if (!json_is_object(v))
		return model_dec_fail(d, sub, "expected an object of strings");
	if (!n)
		return 0;
	out->kv = arena_alloc(d->a, n * sizeof(*out->kv));
	if (!out->kv)
		return model_dec_nomem(d);
	json_object_foreach(v, key, item)
	{
		struct model_kv *kv = &out->kv[out->n];
		char q[48], ksub[MODEL_PATH_MAX];
		const char *where =
		    secret
			? sub
			: model_dec_path(ksub, sub, model_sanitize(q, sizeof(q), key, strlen(key)));

		if (!key[0])
			return model_dec_fail(d, sub, "empty key");
		if (!json_is_string(item))
			return model_dec_fail(d, where,
					      secret ? "every value must be a string"
						     : "expected a string");
		if (memchr(json_string_value(item), '\0', json_string_length(item)))
			return model_dec_fail(d, where, "contains a NUL byte");
		bytes += strlen(key) + json_string_length(item);
		if (d->strict && bytes > MODEL_MAP_BYTES_MAX)
			return model_dec_fail(d, sub, "more than %d bytes of keys and values",
					      MODEL_MAP_BYTES_MAX);
		kv->key = arena_strdup(d->a, key);
		kv->value = arena_strdup(d->a, json_string_value(item));
		if (!kv->key || !kv->value)
			return model_dec_nomem(d);
		out->n++;
	}
	qsort(out->kv, out->n, sizeof(*out->kv), model_kv_cmp);
	return 0;
}

int model_dec_map(struct model_dec *d, json_t *obj, const char *key, const char *path, bool secret,
		  struct model_map *out)
{
	json_t *v = model_member(obj, key);
	char sub[MODEL_PATH_MAX];

	memset(out, 0, sizeof(*out));
	if (!v)
		return 0;
	return model_dec_mapv(d, v, model_dec_path(sub, path, key), secret, out);
}

/* An array member: NULL when absent; fails when not an array or over max (strict). */
static int model_dec_array(struct model_dec *d, json_t *obj, const char *key, const char *path,
			   size_t max, json_t **out)
{
	json_t *v = model_member(obj, key);
	char sub[MODEL_PATH_MAX];

	*out = NULL;
	if (!v)
		return 0;
	model_dec_path(sub, path, key);
	if (!json_is_array(v))
		return model_dec_fail(d, sub, "expected an array");
	if (d->strict && max && json_array_size(v) > max)
		return model_dec_fail(d, sub, "more than %zu entries", max);
	*out = v;
	return 0;
}

/* n zeroed elements of size from the arena (NULL, fine, for n == 0). */
static int model_dec_alloc(struct model_dec *d, size_t n, size_t size, void **out)
{
	*out = NULL;
	if (!n)
		return 0;
	*out = arena_alloc(d->a, n * size);
	return *out ? 0 : model_dec_nomem(d);
}

static int model_dec_topologies(struct model_dec *d, json_t *obj, const char *key, const char *path,
				struct model_topology **out, size_t *n)
{
	char sub[MODEL_PATH_MAX], isub[MODEL_PATH_MAX];
	json_t *arr, *item;
	size_t i;
	int rc;

	*out = NULL;
	*n = 0;
	rc = model_dec_array(d, obj, key, path, MODEL_TOPOLOGIES_MAX, &arr);
	if (rc || !arr)
		return rc;
	rc = model_dec_alloc(d, json_array_size(arr), sizeof(**out), (void **)out);
	if (rc)
		return rc;
	model_dec_path(sub, path, key);
	json_array_foreach(arr, i, item)
	{
		snprintf(isub, sizeof(isub), "%s[%zu]", sub, i);
		rc = model_dec_mapv(d, item, isub, false, &(*out)[i].segments);
		if (rc)
			return rc;
		(*n)++;
	}
	return 0;
}

/* A name of one of the model's enums (t); *out its value. */
static int model_dec_enum(struct model_dec *d, json_t *obj, const char *key, const char *path,
			  const struct model_names *t, bool required, int *out)
{
	char sub[MODEL_PATH_MAX];
	json_t *v = model_member(obj, key);
	struct err pe;

	model_dec_path(sub, path, key);
	if (!v)
		return required ? model_dec_fail(d, sub, "required") : 0;
	if (!json_is_string(v))
		return model_dec_fail(d, sub, "expected a string");
	err_clear(&pe);
	if (model_names_parse(t, json_string_value(v), out, &pe))
		return model_dec_fail(d, sub, "%s", pe.msg);
	return 0;
}

/* Access and attachment mode of a capability, claim or publication. */
static int model_dec_cap(struct model_dec *d, json_t *obj, const char *path,
			 struct model_capability *c)
{
	int access = 0, attach = MODEL_ATTACH_FILE_SYSTEM;
	int rc = model_dec_enum(d, obj, "access_mode", path, &model_names_access, true, &access);

	if (!rc)
		rc = model_dec_enum(d, obj, "attachment_mode", path, &model_names_attachment, false,
				    &attach);
	c->access = (enum model_access)access;
	c->attachment = (enum model_attachment)attach;
	return rc;
}

/* A capacity: bytes as an integer, or a size string ("10GiB"). */
static int model_dec_size(struct model_dec *d, json_t *obj, const char *key, int64_t *out)
{
	json_t *v = model_member(obj, key);
	struct err sub;

	*out = 0;
	if (!v)
		return 0;
	if (json_is_string(v)) {
		err_clear(&sub);
		if (strlen(json_string_value(v)) != json_string_length(v) ||
		    model_parse_size(json_string_value(v), out, &sub))
			return model_dec_fail(d, key, "%s",
					      sub.msg[0] ? sub.msg : "size: contains a NUL byte");
		return 0;
	}
	if (!json_is_integer(v))
		return model_dec_fail(d, key,
				      "expected bytes as an integer or a string such as \"10GiB\"");
	if (json_integer_value(v) < 0)
		return model_dec_fail(d, key, "negative");
	*out = (int64_t)json_integer_value(v);
	return 0;
}

static const char *const model_cap_keys[] = {"access_mode", "attachment_mode", NULL};
static const char *const model_mount_keys[] = {"fs_type", "mount_flags", NULL};
static const char *const model_topo_keys[] = {"requisite", "preferred", NULL};

static int model_dec_caps(struct model_dec *d, json_t *obj, struct model_volume *v)
{
	char sub[MODEL_PATH_MAX];
	json_t *arr, *item;
	size_t i;
	int rc = model_dec_array(d, obj, "capabilities", "", MODEL_CAPS_MAX, &arr);

	if (rc || !arr)
		return rc;
	rc = model_dec_alloc(d, json_array_size(arr), sizeof(*v->caps), (void **)&v->caps);
	json_array_foreach(arr, i, item)
	{
		if (rc)
			break;
		snprintf(sub, sizeof(sub), "capabilities[%zu]", i);
		rc = model_dec_object(d, item, sub, model_cap_keys);
		if (!rc)
			rc = model_dec_cap(d, item, sub, &v->caps[i]);
		if (!rc)
			v->ncaps++;
	}
	return rc;
}

static int model_dec_mount(struct model_dec *d, json_t *obj, struct model_volume *v)
{
	json_t *mo = model_member(obj, "mount_options"), *flags, *item;
	size_t i;
	int rc;

	if (!mo)
		return 0;
	rc = model_dec_object(d, mo, "mount_options", model_mount_keys);
	if (!rc)
		rc =
		    model_dec_str(d, mo, "fs_type", "mount_options", MODEL_STRING_MAX, &v->fs_type);
	if (!rc)
		rc = model_dec_array(d, mo, "mount_flags", "mount_options", MODEL_MOUNT_FLAGS_MAX,
				     &flags);
	if (rc || !flags)
		return rc;
	rc = model_dec_alloc(d, json_array_size(flags), sizeof(*v->mount_flags),
			     (void **)&v->mount_flags);
	json_array_foreach(flags, i, item)
	{
		char sub[MODEL_PATH_MAX];

		if (rc)
			break;
		snprintf(sub, sizeof(sub), "mount_options.mount_flags[%zu]", i);
		rc = model_dec_strv(d, item, sub, MODEL_STRING_MAX, &v->mount_flags[i]);
		if (!rc)
			v->nmount_flags++;
	}
	return rc;
}

int model_dec_volume_spec(struct model_dec *d, json_t *obj, struct model_volume *v)
{
	json_t *tr;
	int rc;

	rc = model_dec_str(d, obj, "id", "", MODEL_ID_MAX, &v->id);
	if (!rc)
		rc = model_dec_str(d, obj, "name", "", MODEL_STRING_MAX, &v->name);
	if (!rc)
		rc = model_dec_str(d, obj, "plugin_id", "", MODEL_PLUGIN_ID_MAX, &v->plugin_id);
	if (!rc)
		rc = model_dec_str(d, obj, "external_id", "", MODEL_STRING_MAX, &v->external_id);
	if (!rc)
		rc = model_dec_size(d, obj, "capacity_min", &v->capacity_min);
	if (!rc)
		rc = model_dec_size(d, obj, "capacity_max", &v->capacity_max);
	if (!rc)
		rc = model_dec_caps(d, obj, v);
	if (!rc)
		rc = model_dec_mount(d, obj, v);
	if (!rc)
		rc = model_dec_map(d, obj, "parameters", "", false, &v->parameters);
	if (!rc)
		rc = model_dec_map(d, obj, "mutable_parameters", "", false, &v->mutable_parameters);
	if (!rc)
		rc = model_dec_map(d, obj, "secrets", "", true, &v->secrets);
	if (!rc)
		rc = model_dec_map(d, obj, "context", "", false, &v->context);
	tr = model_member(obj, "topology_request");
	if (!rc && tr)
		rc = model_dec_object(d, tr, "topology_request", model_topo_keys);
	if (!rc && tr)
		rc = model_dec_topologies(d, tr, "requisite", "topology_request", &v->requisite,
					  &v->nrequisite);
	if (!rc && tr)
		rc = model_dec_topologies(d, tr, "preferred", "topology_request", &v->preferred,
					  &v->npreferred);
	if (!rc)
		rc =
		    model_dec_str(d, obj, "snapshot_source", "", MODEL_ID_MAX, &v->snapshot_source);
	if (!rc)
		rc = model_dec_str(d, obj, "clone_source", "", MODEL_ID_MAX, &v->clone_source);
	return rc;
}

static const char *const model_node_plugin_keys[] = {
    "plugin_id",    "type",           "healthy",     "health",   "version",
    "capabilities", "plugin_node_id", "max_volumes", "topology", NULL};
static const char *const model_node_keys[] = {
    "id",      "instance_id", "status", "registered_ms", "updated_ms", "address",
    "plugins", "allocations", NULL};
static const char *const model_node_alloc_keys[] = {"volume_id", "alloc_id", NULL};

static int model_dec_node_plugin(struct model_dec *d, json_t *o, const char *path,
				 struct model_node_plugin *p)
{
	char sub[MODEL_PATH_MAX];
	json_t *caps, *item;
	int type = 0;
	size_t i;
	int rc = model_dec_object(d, o, path, model_node_plugin_keys);

	if (!rc)
		rc = model_dec_str_req(d, o, "plugin_id", path, MODEL_PLUGIN_ID_MAX, &p->plugin_id);
	if (!rc)
		rc = model_dec_enum(d, o, "type", path, &model_names_plugin_type, true, &type);
	p->type = (enum model_plugin_type)type;
	if (!rc)
		rc = model_dec_bool(d, o, "healthy", path, &p->healthy);
	if (!rc)
		rc = model_dec_str(d, o, "health", path, MODEL_HEALTH_MAX, &p->health);
	if (!rc)
		rc = model_dec_str(d, o, "version", path, MODEL_STRING_MAX, &p->version);
	if (!rc)
		rc = model_dec_str(d, o, "plugin_node_id", path, MODEL_NODE_ID_MAX,
				   &p->plugin_node_id);
	if (!rc)
		rc = model_dec_int(d, o, "max_volumes", path, &p->max_volumes);
	if (!rc)
		rc = model_dec_map(d, o, "topology", path, false, &p->topology.segments);
	if (!rc)
		rc = model_dec_array(d, o, "capabilities", path, MODEL_PLUGIN_CAPS_MAX, &caps);
	if (rc || !caps)
		return rc;
	rc = model_dec_alloc(d, json_array_size(caps), sizeof(*p->caps), (void **)&p->caps);
	json_array_foreach(caps, i, item)
	{
		if (rc)
			break;
		snprintf(sub, sizeof(sub), "%s.capabilities[%zu]", path, i);
		rc = model_dec_strv(d, item, sub, MODEL_STRING_MAX, &p->caps[i]);
		if (!rc)
			p->ncaps++;
	}
	return rc;
}

/* "allocations": [{"volume_id", "alloc_id"}], the agent's report (absent: not reported). */
static int model_dec_node_allocs(struct model_dec *d, json_t *root, struct model_node *n)
{
	char sub[MODEL_PATH_MAX];
	json_t *arr, *item;
	size_t i;
	int rc = model_dec_array(d, root, "allocations", "", MODEL_NODE_ALLOCS_MAX, &arr);

	if (rc || !arr)
		return rc;
	n->allocs_reported = true;
	rc = model_dec_alloc(d, json_array_size(arr), sizeof(*n->allocs), (void **)&n->allocs);
	json_array_foreach(arr, i, item)
	{
		struct model_node_alloc *al = &n->allocs[i];

		if (rc)
			break;
		snprintf(sub, sizeof(sub), "allocations[%zu]", i);
		rc = model_dec_object(d, item, sub, model_node_alloc_keys);
		if (!rc)
			rc = model_dec_str_req(d, item, "volume_id", sub, MODEL_ID_MAX,
					       &al->volume_id);
		if (!rc)
			rc = model_dec_str_req(d, item, "alloc_id", sub, MODEL_ID_MAX,
					       &al->alloc_id);
		if (!rc)
			n->nallocs++;
	}
	return rc;
}

int model_dec_node(struct model_dec *d, json_t *root, struct model_node *n)
{
	char sub[MODEL_PATH_MAX];
	json_t *arr, *item;
	int status = 0;
	size_t i;
	int rc = model_dec_object(d, root, "", model_node_keys);

	/* From outside the ID may come from the URL instead. */
	if (!rc)
		rc = model_dec_str(d, root, "id", "", MODEL_ID_MAX, &n->id);
	if (!rc)
		rc = model_dec_str(d, root, "instance_id", "", MODEL_ID_MAX, &n->instance_id);
	if (!rc)
		rc =
		    model_dec_enum(d, root, "status", "", &model_names_node_status, false, &status);
	n->status = (enum model_node_status)status;
	if (!rc)
		rc = model_dec_int(d, root, "registered_ms", "", &n->registered_ms);
	if (!rc)
		rc = model_dec_int(d, root, "updated_ms", "", &n->updated_ms);
	if (!rc)
		rc = model_dec_str(d, root, "address", "", MODEL_ADDRESS_MAX, &n->address);
	if (!rc)
		rc = model_dec_node_allocs(d, root, n);
	if (!rc)
		rc = model_dec_array(d, root, "plugins", "", MODEL_NODE_PLUGINS_MAX, &arr);
	if (rc || !arr)
		return rc;
	rc = model_dec_alloc(d, json_array_size(arr), sizeof(*n->plugins), (void **)&n->plugins);
	json_array_foreach(arr, i, item)
	{
		if (rc)
			break;
		snprintf(sub, sizeof(sub), "plugins[%zu]", i);
		rc = model_dec_node_plugin(d, item, sub, &n->plugins[i]);
		if (!rc)
			n->nplugins++;
	}
	return rc;
}
