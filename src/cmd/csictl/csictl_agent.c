/*
 * `csictl agent`: drives a csid agent through its HTTP API (csictl_http.c).
 * One request per run: GET /v1/agent/plugins, GET /v1/agent/mounts,
 * PUT /v1/agent/mounts with a body built from flags, or
 * DELETE /v1/agent/mounts/<volume>/<alloc> (?force=true with -force). Answers are read into a
 * capped buffer, parsed with jansson, and printed as a table or passed
 * through as JSON. Renderers accept the documented field names and a few
 * close variants, so a table still shows what it can when the agent adds
 * or renames a field; -o json always shows everything the agent said.
 */
#include "csictl_agent.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "csictl_cmds.h"
#include "csictl_csi.h"
#include "csictl_out.h"

/* Default deadline of one request; a mount may wait for its plugin. */
#define CSICTL_AGENT_TIMEOUT_MS 120000

static json_t *csictl_agent_kv_json(const struct csictl_kv *kv)
{
	json_t *o = json_object();

	for (size_t i = 0; o && i < kv->n; i++)
		if (json_object_set_new(o, kv->pairs[i].key,
					csictl_out_json_str(kv->pairs[i].value))) {
			json_decref(o);
			return NULL;
		}
	return o;
}

int csictl_agent_context_parse(const char *text, size_t len, json_t **out, struct err *e)
{
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	json_t *ctx, *v;
	const char *key;
	int rc = 0;

	*out = NULL;
	if (!json_is_object(root)) {
		rc = err_set(e, CSID_EINVAL,
			     "expected a JSON object: a volume context, or the output of "
			     "csictl csi create-volume -o json");
		goto out;
	}
	if (json_is_object(json_object_get(root, "volume")))
		ctx = json_object_get(json_object_get(root, "volume"), "volume_context");
	else if (json_object_get(root, "volume_context"))
		ctx = json_object_get(root, "volume_context");
	else
		ctx = root;
	if (ctx && !json_is_object(ctx)) {
		rc = err_set(e, CSID_EINVAL, "volume_context: expected an object of strings");
		goto out;
	}
	json_object_foreach(ctx, key, v)
	{
		if (!json_is_string(v)) {
			char clean[80];

			rc = err_set(e, CSID_EINVAL, "volume context: \"%s\" is not a string",
				     csictl_out_clean(key, clean, sizeof(clean)));
			goto out;
		}
	}
	*out = ctx ? json_incref(ctx) : json_object();
	if (!*out)
		rc = err_set(e, CSID_ENOMEM, "out of memory");
out:
	json_decref(root);
	return rc;
}

/* Largest -context-file read. */
#define CSICTL_AGENT_CONTEXT_FILE_MAX (64 * 1024)

/* Reads o->context_file into o->context_doc. */
static int csictl_agent_context_load(struct csictl_agent_opts *o, struct err *e)
{
	char *buf = malloc(CSICTL_AGENT_CONTEXT_FILE_MAX + 1);
	FILE *f = fopen(o->context_file, "r");
	size_t n = 0;
	int rc = 0;

	if (!f) {
		rc = err_errno(e, errno, "-context-file %.200s", o->context_file);
		goto out;
	}
	if (!buf) {
		rc = err_set(e, CSID_ENOMEM, "out of memory");
		goto out;
	}
	n = fread(buf, 1, CSICTL_AGENT_CONTEXT_FILE_MAX + 1, f);
	if (n > CSICTL_AGENT_CONTEXT_FILE_MAX)
		rc = err_set(e, CSID_ETOOBIG, "is larger than %d bytes",
			     CSICTL_AGENT_CONTEXT_FILE_MAX);
	else
		rc = csictl_agent_context_parse(buf, n, &o->context_doc, e);
	if (rc)
		err_wrap(e, "-context-file %.200s", o->context_file);
out:
	if (f)
		fclose(f);
	free(buf);
	return rc;
}

/* The volume context of a mount: the -context-file's, then the -context pairs. */
static json_t *csictl_agent_context_json(const struct csictl_agent_opts *o)
{
	json_t *c = o->context_doc ? json_deep_copy(o->context_doc) : json_object();
	json_t *pairs = csictl_agent_kv_json(&o->context);

	if (!c || !pairs || json_object_update(c, pairs) != 0) {
		json_decref(c);
		json_decref(pairs);
		return NULL;
	}
	json_decref(pairs);
	return c;
}

int csictl_agent_mount_body(const struct csictl_agent_opts *o, const char *volume,
			    const char *alloc, json_t **out, struct err *e)
{
	const char *attach = "file-system", *access = "single-node-writer";
	json_t *j, *flags;

	*out = NULL;
	if (!o->plugin || !*o->plugin)
		return err_set(e, CSID_EINVAL, "mount needs -plugin ID");
	if (!*volume || !*alloc)
		return err_set(e, CSID_EINVAL, "volume and allocation IDs must not be empty");
	if (o->attachment_mode) {
		if (strcmp(o->attachment_mode, "file-system") != 0 &&
		    strcmp(o->attachment_mode, "block-device") != 0)
			return err_set(e, CSID_EINVAL,
				       "-attachment-mode must be file-system or block-device, "
				       "not \"%.64s\"",
				       o->attachment_mode);
		attach = o->attachment_mode;
	}
	if (o->block) {
		if (o->attachment_mode && strcmp(o->attachment_mode, "block-device") != 0)
			return err_set(e, CSID_EINVAL, "-block contradicts -attachment-mode");
		attach = "block-device";
	}
	if (strcmp(attach, "block-device") == 0 && (o->fs_type || o->mount_flags.n))
		return err_set(e, CSID_EINVAL,
			       "a block-device mount takes no -fs-type or -mount-flag");
	if (o->access_mode) {
		int mode = csictl_csi_access_mode_parse(o->access_mode);

		if (mode < 0)
			return err_set(e, CSID_EINVAL, "unknown access mode \"%.64s\"",
				       o->access_mode);
		access = csictl_csi_access_mode_name(mode);
	}
	flags = json_array();
	for (size_t i = 0; flags && i < o->mount_flags.n; i++)
		json_array_append_new(flags, csictl_out_json_str(o->mount_flags.items[i]));
	j = json_pack("{s:o, s:o, s:o, s:o, s:b, s:s, s:s, s:o, s:o, s:o, s:o, s:o}", "volume_id",
		      csictl_out_json_str(volume), "external_id",
		      csictl_out_json_str(o->external_id ? o->external_id : volume), "plugin_id",
		      csictl_out_json_str(o->plugin), "alloc_id", csictl_out_json_str(alloc),
		      "read_only", o->readonly, "attachment_mode", attach, "access_mode", access,
		      "fs_type", csictl_out_json_str(o->fs_type), "mount_flags", flags,
		      "volume_context", csictl_agent_context_json(o), "publish_context",
		      csictl_agent_kv_json(&o->publish_context), "secrets",
		      csictl_agent_kv_json(&o->secrets));
	if (!j)
		return err_set(e, CSID_ENOMEM, "out of memory building the request");
	*out = j;
	return 0;
}

static int csictl_agent_strcmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first of the keys that obj has, as text ("" when none). */
static const char *csictl_agent_field(const json_t *obj, char *buf, size_t len, ...)
{
	const char *key;
	va_list ap;

	buf[0] = '\0';
	va_start(ap, len);
	while ((key = va_arg(ap, const char *))) {
		const json_t *v = json_object_get(obj, key);

		if (!v || json_is_null(v))
			continue;
		if (json_is_string(v))
			snprintf(buf, len, "%s", json_string_value(v));
		else if (json_is_integer(v))
			snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		else if (json_is_boolean(v))
			snprintf(buf, len, "%s", json_is_true(v) ? "yes" : "no");
		else if (json_is_array(v))
			snprintf(buf, len, "%zu", json_array_size(v));
		else
			continue;
		break;
	}
	va_end(ap);
	return buf;
}

/* The list in j: j itself when it is an array, else j[key]. */
static const json_t *csictl_agent_list(const json_t *j, const char *key, struct err *e)
{
	const json_t *l = json_is_array(j) ? j : json_object_get(j, key);

	if (!json_is_array(l)) {
		err_set(e, CSID_EPROTO, "the agent's answer has no list of %s", key);
		return NULL;
	}
	return l;
}

/* The active instance: a string, or an object with an ID. */
static const char *csictl_agent_active(const json_t *p, char *buf, size_t len)
{
	const json_t *a = json_object_get(p, "active");

	if (!a)
		a = json_object_get(p, "active_instance");
	if (json_is_object(a))
		return csictl_agent_field(a, buf, len, "instance_id", "id", "alloc_id", NULL);
	if (json_is_string(a)) {
		snprintf(buf, len, "%s", json_string_value(a));
		return buf;
	}
	buf[0] = '\0';
	return buf;
}

/* Health: "healthy" as a bool, or a "health" object with healthy + description. */
static void csictl_agent_health(const json_t *p, char *healthy, char *desc, size_t len)
{
	const json_t *h = json_object_get(p, "health");
	const json_t *a = json_object_get(p, "active");

	if (!json_is_object(h) && json_is_object(a))
		h = json_object_get(a, "health");
	if (json_is_object(h)) {
		csictl_agent_field(h, healthy, len, "healthy", NULL);
		csictl_agent_field(h, desc, len, "description", "message", NULL);
		return;
	}
	csictl_agent_field(p, healthy, len, "healthy", NULL);
	csictl_agent_field(p, desc, len, "health_description", "description", NULL);
}

int csictl_agent_render_plugins(const json_t *j, FILE *out, struct err *e)
{
	static const char *const headers[] = {"PLUGIN",  "TYPE",      "ACTIVE",     "STATE",
					      "HEALTHY", "INSTANCES", "DESCRIPTION"};
	const json_t *l = csictl_agent_list(j, "plugins", e), *p;
	struct csictl_table *t;
	size_t i;

	if (!l)
		return e ? e->code : CSID_EPROTO;
	t = csictl_table_new(7, headers);
	if (!t)
		return err_set(e, CSID_ENOMEM, "out of memory");
	json_array_foreach(l, i, p)
	{
		char id[256], type[64], active[256], state[64], healthy[16], desc[512], inst[32];

		if (!json_is_object(p))
			continue;
		csictl_agent_field(p, id, sizeof(id), "id", "plugin_id", "name", NULL);
		csictl_agent_field(p, type, sizeof(type), "type", NULL);
		csictl_agent_active(p, active, sizeof(active));
		csictl_agent_field(p, state, sizeof(state), "state", NULL);
		csictl_agent_health(p, healthy, desc, sizeof(desc));
		csictl_agent_field(p, inst, sizeof(inst), "instances", "instance_count", NULL);
		csictl_table_addv(t, id, type, active, state, healthy, inst, desc);
	}
	csictl_table_print(t, out);
	csictl_table_free(t);
	return 0;
}

/* "rw-file-system-single-node-writer" from the mount's fields. */
static const char *csictl_agent_usage(const json_t *m, char *buf, size_t len)
{
	const json_t *u = json_object_get(m, "usage");
	char attach[64], access[64], ro[8];

	if (json_is_string(u)) {
		snprintf(buf, len, "%s", json_string_value(u));
		return buf;
	}
	if (!json_is_object(u))
		u = m;
	csictl_agent_field(u, attach, sizeof(attach), "attachment_mode", NULL);
	csictl_agent_field(u, access, sizeof(access), "access_mode", NULL);
	csictl_agent_field(u, ro, sizeof(ro), "read_only", NULL);
	if (!attach[0] && !access[0]) {
		buf[0] = '\0';
		return buf;
	}
	snprintf(buf, len, "%s-%s-%s", strcmp(ro, "yes") == 0 ? "ro" : "rw", attach, access);
	return buf;
}

/* "k=v,k2=v2" from the object member key of m (sorted keys), "" when none. */
static const char *csictl_agent_map(const json_t *m, const char *key, char *buf, size_t len)
{
	const json_t *o = json_object_get(m, key);
	const char **keys;
	size_t n = 0, used = 0;
	const char *k;
	json_t *v;

	buf[0] = '\0';
	if (!json_is_object(o) || json_object_size(o) == 0)
		return buf;
	keys = calloc(json_object_size(o), sizeof(*keys));
	if (!keys)
		return buf;
	json_object_foreach((json_t *)o, k, v) keys[n++] = k;
	qsort(keys, n, sizeof(*keys), csictl_agent_strcmp);
	for (size_t i = 0; i < n && used + 1 < len; i++) {
		const json_t *val = json_object_get(o, keys[i]);
		int w = snprintf(buf + used, len - used, "%s%s=%s", i ? "," : "", keys[i],
				 json_is_string(val) ? json_string_value(val) : "?");

		if (w < 0)
			break;
		used += (size_t)w;
	}
	free(keys);
	return buf;
}

int csictl_agent_render_mounts(const json_t *j, FILE *out, struct err *e)
{
	static const char *const headers[] = {"VOLUME", "ALLOC", "PLUGIN",  "EXTERNAL-ID",
					      "USAGE",  "STATE", "CONTEXT", "TARGET"};
	const json_t *l = csictl_agent_list(j, "mounts", e), *m;
	struct csictl_table *t;
	size_t i;

	if (!l)
		return e ? e->code : CSID_EPROTO;
	t = csictl_table_new(8, headers);
	if (!t)
		return err_set(e, CSID_ENOMEM, "out of memory");
	json_array_foreach(l, i, m)
	{
		char vol[256], alloc[256], plugin[256], usage[256], state[64], target[1024];
		char ext[1100], ctx[1024];

		if (!json_is_object(m))
			continue;
		csictl_agent_field(m, vol, sizeof(vol), "volume_id", "volume", NULL);
		csictl_agent_field(m, alloc, sizeof(alloc), "alloc_id", "alloc", NULL);
		csictl_agent_field(m, plugin, sizeof(plugin), "plugin_id", "plugin", NULL);
		csictl_agent_field(m, ext, sizeof(ext), "external_id", NULL);
		csictl_agent_usage(m, usage, sizeof(usage));
		csictl_agent_field(m, state, sizeof(state), "state", "status", NULL);
		csictl_agent_map(m, "volume_context", ctx, sizeof(ctx));
		csictl_agent_field(m, target, sizeof(target), "target", "target_path", NULL);
		csictl_table_addv(t, vol, alloc, plugin, ext, usage, state, ctx, target);
	}
	csictl_table_print(t, out);
	csictl_table_free(t);
	return 0;
}

/* Adds the scalar members of obj to t as "prefix.key:" rows, depth-first. */
static void csictl_agent_flatten(struct csictl_table *t, const json_t *obj, const char *prefix,
				 int depth)
{
	const char *key;
	const json_t *v;

	json_object_foreach((json_t *)obj, key, v)
	{
		char name[256], label[260], val[1024];

		snprintf(name, sizeof(name), "%s%s%s", prefix, prefix[0] ? "." : "", key);
		if (json_is_object(v) && depth < 8) {
			csictl_agent_flatten(t, v, name, depth + 1);
			continue;
		}
		if (json_is_string(v))
			snprintf(val, sizeof(val), "%s", json_string_value(v));
		else if (json_is_integer(v))
			snprintf(val, sizeof(val), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		else if (json_is_boolean(v))
			snprintf(val, sizeof(val), "%s", json_is_true(v) ? "yes" : "no");
		else if (json_is_array(v))
			snprintf(val, sizeof(val), "[%zu items]", json_array_size(v));
		else
			val[0] = '\0';
		snprintf(label, sizeof(label), "%s:", name);
		csictl_table_addv(t, label, val);
	}
}

int csictl_agent_render_object(const json_t *j, FILE *out, struct err *e)
{
	struct csictl_table *t;

	if (!json_is_object(j))
		return err_set(e, CSID_EPROTO, "the agent's answer is not a JSON object");
	t = csictl_table_new(2, NULL);
	if (!t)
		return err_set(e, CSID_ENOMEM, "out of memory");
	csictl_agent_flatten(t, j, "", 0);
	csictl_table_print(t, out);
	csictl_table_free(t);
	return 0;
}

int csictl_agent_render_mount(const json_t *j, FILE *out, struct err *e)
{
	struct csictl_table *t;
	char source[1024], target[1024], dev[16];

	if (!json_is_object(j))
		return err_set(e, CSID_EPROTO, "the agent's answer is not a JSON object");
	csictl_agent_field(j, source, sizeof(source), "source", NULL);
	csictl_agent_field(j, target, sizeof(target), "target", NULL);
	csictl_agent_field(j, dev, sizeof(dev), "is_device", NULL);
	t = csictl_table_new(2, NULL);
	if (!t)
		return err_set(e, CSID_ENOMEM, "out of memory");
	csictl_table_addv(t, "source:", source);
	csictl_table_addv(t, "target:", target);
	csictl_table_addv(t, "device:", dev[0] ? dev : "no");
	csictl_table_print(t, out);
	csictl_table_free(t);
	return 0;
}

/* A claim mount's answer: the path the allocation uses. */
static int csictl_agent_render_claim_mount(const json_t *j, FILE *out, struct err *e)
{
	char path[1024];

	if (!json_is_object(j))
		return err_set(e, CSID_EPROTO, "the agent's answer is not a JSON object");
	csictl_agent_field(j, path, sizeof(path), "path", NULL);
	fprintf(out, "%s\n", path);
	return 0;
}

/* A claim unmount's answer: what was done. */
static int csictl_agent_render_claim_unmount(const json_t *j, FILE *out, struct err *e)
{
	char vol[256], alloc[256];

	if (!json_is_object(j))
		return err_set(e, CSID_EPROTO, "the agent's answer is not a JSON object");
	csictl_agent_field(j, vol, sizeof(vol), "volume_id", NULL);
	csictl_agent_field(j, alloc, sizeof(alloc), "alloc_id", NULL);
	fprintf(out, "volume %s %s for allocation %s; %s\n", vol,
		json_is_true(json_object_get(j, "unmounted")) ? "unmounted" : "was not mounted",
		alloc,
		json_is_true(json_object_get(j, "release_pending"))
		    ? "no server answered: the agent keeps retrying the release"
		: json_is_true(json_object_get(j, "released")) ? "claim released"
							       : "it held no claim");
	return 0;
}

/* The text of a JSON string, "" for anything else. */
static const char *csictl_agent_str(const json_t *v)
{
	return json_is_string(v) ? json_string_value(v) : "";
}

int csictl_agent_render_unmount(const json_t *j, FILE *out, struct err *e)
{
	const json_t *l, *v;
	struct csictl_table *t;
	char vol[256], alloc[256], path[1024], lazy[16], msg[600];
	size_t i;

	if (!json_is_object(j))
		return err_set(e, CSID_EPROTO, "the agent's answer is not a JSON object");
	csictl_agent_field(j, vol, sizeof(vol), "volume_id", NULL);
	csictl_agent_field(j, alloc, sizeof(alloc), "alloc_id", NULL);
	snprintf(msg, sizeof(msg), "volume %s unmounted for allocation %s%s", vol, alloc,
		 json_is_true(json_object_get(j, "forced")) ? " (forced)" : "");
	t = csictl_table_new(2, NULL);
	if (!t)
		return err_set(e, CSID_ENOMEM, "out of memory");
	l = json_object_get(j, "skipped");
	json_array_foreach(l, i, v) csictl_table_addv(t, "skipped:", csictl_agent_str(v));
	l = json_object_get(j, "detached");
	json_array_foreach(l, i, v)
	{
		char cell[1100];

		csictl_agent_field(v, path, sizeof(path), "path", NULL);
		csictl_agent_field(v, lazy, sizeof(lazy), "lazy", NULL);
		snprintf(cell, sizeof(cell), "%s%s", path,
			 strcmp(lazy, "yes") == 0 ? " (lazily: it was busy)" : "");
		csictl_table_addv(t, "unmounted by the agent:", cell);
	}
	l = json_object_get(j, "kept");
	json_array_foreach(l, i, v) csictl_table_addv(t, "left in place:", csictl_agent_str(v));
	fprintf(out, "%s\n", csictl_out_clean(msg, path, sizeof(path)));
	csictl_table_print(t, out);
	csictl_table_free(t);
	return 0;
}

/* One run of one agent command. */
struct csictl_agent {
	struct csictl_agent_opts o;
	struct csictl_http http;
	struct csictl_args args;
	bool json;
	FILE *out;
	FILE *err;
};

typedef int (*csictl_agent_render_fn)(const json_t *j, FILE *out, struct err *e);

/*
 * Runs one request and prints its answer: the agent's JSON as is with
 * -o json, else through render (or done_msg when render is NULL).
 */
static int csictl_agent_request(struct csictl_agent *a, const char *method, const char *path,
				const char *body, csictl_agent_render_fn render,
				const char *done_msg)
{
	struct csictl_http_answer b;
	json_t *j = NULL;
	struct err e;
	int ret;

	err_clear(&e);
	ret = csictl_http_do(&a->http, method, path, body, &b);
	if (ret)
		return ret;
	if (b.status < 200 || b.status > 299) {
		char msg[1200];

		fprintf(a->err, "error: %s\n",
			csictl_http_error_text(b.status, b.data, b.len, msg, sizeof(msg)));
		ret = CSICTL_EXIT_FAIL;
		goto out;
	}
	if (b.len)
		j = json_loadb(b.data, b.len, 0, NULL);
	if (b.len && !j) {
		fputs("error: the agent's answer is not valid JSON\n", a->err);
		ret = CSICTL_EXIT_FAIL;
		goto out;
	}
	if (a->json) {
		if (j)
			csictl_out_json_print(j, a->out);
		else
			fputs("{}\n", a->out);
	} else if (render) {
		if (render(j, a->out, &e)) {
			fprintf(a->err, "error: %s\n", e.msg);
			ret = CSICTL_EXIT_FAIL;
		}
	} else {
		fprintf(a->out, "%s\n", done_msg);
	}
out:
	json_decref(j);
	csictl_http_answer_free(&b);
	return ret;
}

static int csictl_agent_mount(struct csictl_agent *a)
{
	json_t *body;
	char *text;
	struct err e;
	int ret;

	err_clear(&e);
	if (csictl_agent_mount_body(&a->o, a->args.v[1], a->args.v[2], &body, &e)) {
		fprintf(a->err, "error: %s\n", e.msg);
		return CSICTL_EXIT_USAGE;
	}
	text = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(body);
	if (!text) {
		fputs("error: out of memory\n", a->err);
		return CSICTL_EXIT_FAIL;
	}
	ret = csictl_agent_request(a, "PUT", "/v1/agent/mounts", text, csictl_agent_render_mount,
				   NULL);
	/* The body carries secrets: wipe it before releasing. */
	memset(text, 0, strlen(text));
	free(text);
	return ret;
}

static int csictl_agent_unmount(struct csictl_agent *a)
{
	char vol[1024], alloc[1024], path[2200];

	if (!*a->args.v[1] || !*a->args.v[2]) {
		fputs("error: volume and allocation IDs must not be empty\n", a->err);
		return CSICTL_EXIT_USAGE;
	}
	if (csictl_http_escape(a->args.v[1], vol, sizeof(vol)) ||
	    csictl_http_escape(a->args.v[2], alloc, sizeof(alloc))) {
		fputs("error: volume or allocation ID is too long\n", a->err);
		return CSICTL_EXIT_USAGE;
	}
	snprintf(path, sizeof(path), "/v1/agent/mounts/%s/%s%s", vol, alloc,
		 a->o.force ? "?force=true" : "");
	return csictl_agent_request(a, "DELETE", path, NULL, csictl_agent_render_unmount, NULL);
}

/* `csictl volume mount VOL -alloc A`: the agent claims the volume and mounts it. */
static int csictl_agent_claim_mount(struct csictl_agent *a)
{
	json_t *body = json_pack("{s:s, s:b}", "alloc_id", a->o.alloc, "read_only", a->o.readonly);
	json_t *owner = NULL;
	char vol[1024], path[1200];
	char *text;
	struct err e;
	int ret;

	err_clear(&e);
	if (csictl_agent_owner_json(&a->o, &owner, &e)) {
		json_decref(body);
		fprintf(a->err, "error: %s\n", e.msg);
		return CSICTL_EXIT_USAGE;
	}
	if (body && owner)
		json_object_set(body, "owner", owner);
	json_decref(owner);
	if (body && a->o.access_mode)
		json_object_set_new(body, "access_mode", json_string(a->o.access_mode));
	if (body && a->o.attachment_mode)
		json_object_set_new(body, "attachment_mode", json_string(a->o.attachment_mode));
	text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	if (!text) {
		fputs("error: out of memory\n", a->err);
		return CSICTL_EXIT_FAIL;
	}
	if (csictl_http_escape(a->args.v[1], vol, sizeof(vol))) {
		free(text);
		fputs("error: volume ID is too long\n", a->err);
		return CSICTL_EXIT_USAGE;
	}
	snprintf(path, sizeof(path), "/v1/agent/volumes/%s/mount", vol);
	ret = csictl_agent_request(a, "PUT", path, text, csictl_agent_render_claim_mount, NULL);
	free(text);
	return ret;
}

/* `csictl volume unmount VOL -alloc A`: the agent unmounts, then releases the claim. */
static int csictl_agent_claim_unmount(struct csictl_agent *a)
{
	char vol[1024], alloc[1024], path[2200];

	if (csictl_http_escape(a->args.v[1], vol, sizeof(vol)) ||
	    csictl_http_escape(a->o.alloc, alloc, sizeof(alloc))) {
		fputs("error: volume or allocation ID is too long\n", a->err);
		return CSICTL_EXIT_USAGE;
	}
	snprintf(path, sizeof(path), "/v1/agent/volumes/%s/mount/%s", vol, alloc);
	return csictl_agent_request(a, "DELETE", path, NULL, csictl_agent_render_claim_unmount,
				    NULL);
}

/* A lease renewal's answer. */
static int csictl_agent_render_renew(const json_t *j, FILE *out, struct err *e)
{
	char vol[256], alloc[256];

	if (!json_is_object(j))
		return err_set(e, CSID_EPROTO, "the agent's answer is not a JSON object");
	csictl_agent_field(j, vol, sizeof(vol), "volume_id", NULL);
	csictl_agent_field(j, alloc, sizeof(alloc), "alloc_id", NULL);
	fprintf(out, "lease of volume %s for allocation %s renewed for %llds\n", vol, alloc,
		(long long)json_integer_value(json_object_get(j, "lease_ms")) / 1000);
	return 0;
}

/* `csictl volume renew VOL -alloc A [-lease D]`: the lease owning the mount starts again. */
static int csictl_agent_claim_renew(struct csictl_agent *a)
{
	char vol[1024], alloc[1024], path[2300], body[64] = "{}";
	int64_t lease = 0;
	struct err e;

	err_clear(&e);
	if (a->o.owner_pid || a->o.owner_cgroup) {
		fputs("error: renew takes -lease only\n", a->err);
		return CSICTL_EXIT_USAGE;
	}
	if (a->o.lease) {
		if (csictl_agent_lease_parse(a->o.lease, &lease, &e)) {
			fprintf(a->err, "error: %s\n", e.msg);
			return CSICTL_EXIT_USAGE;
		}
		snprintf(body, sizeof(body), "{\"lease_ms\": %lld}", (long long)lease);
	}
	if (csictl_http_escape(a->args.v[1], vol, sizeof(vol)) ||
	    csictl_http_escape(a->o.alloc, alloc, sizeof(alloc))) {
		fputs("error: volume or allocation ID is too long\n", a->err);
		return CSICTL_EXIT_USAGE;
	}
	snprintf(path, sizeof(path), "/v1/agent/volumes/%s/mount/%s/renew", vol, alloc);
	return csictl_agent_request(a, "PUT", path, body, csictl_agent_render_renew, NULL);
}

/* A run of `csictl volume mount|unmount|renew VOL -alloc A`. */
static int csictl_agent_run_volume(struct csictl_agent *a)
{
	const char *cmd = a->args.v[0];

	if (strcmp(cmd, "renew") == 0 && a->args.n == 2 && a->o.alloc && *a->o.alloc &&
	    *a->args.v[1])
		return csictl_agent_claim_renew(a);
	if (strcmp(cmd, "mount") != 0 && strcmp(cmd, "unmount") != 0 && strcmp(cmd, "renew") != 0) {
		fprintf(a->err, "error: unknown command \"%.64s\"\n", cmd);
		return CSICTL_EXIT_USAGE;
	}
	if (a->args.n != 2 || !a->o.alloc || !*a->o.alloc || !*a->args.v[1]) {
		fprintf(a->err, "error: usage: csictl volume %s VOLUME -alloc ALLOC%s\n", cmd,
			strcmp(cmd, "mount") == 0
			    ? " [-read-only] [-access-mode M] [-attachment-mode M]"
			      " [-owner-pid PID | -owner-cgroup PATH | -lease DURATION]"
			: strcmp(cmd, "renew") == 0 ? " [-lease DURATION]"
						    : "");
		return CSICTL_EXIT_USAGE;
	}
	return strcmp(cmd, "mount") == 0 ? csictl_agent_claim_mount(a)
					 : csictl_agent_claim_unmount(a);
}

#define CSICTL_AGENT_FLAGS_MAX 28

static size_t csictl_agent_flags(struct csictl_agent_opts *o, struct csictl_flag *f)
{
	const struct csictl_flag table[] = {
	    {"address", CSICTL_FLAG_STRING, &o->address, "ADDR",
	     "unix:PATH or http://HOST:PORT (default $CSID_AGENT_ADDR, "
	     "else " CSICTL_AGENT_DEFAULT_ADDR ")"},
	    {"o", CSICTL_FLAG_STRING, &o->output, "table|json", "output format (default table)"},
	    {"timeout", CSICTL_FLAG_STRING, &o->timeout, "DURATION",
	     "deadline of the request (default 2m)"},
	    {"plugin", CSICTL_FLAG_STRING, &o->plugin, "ID", "mount: the node plugin"},
	    {"external-id", CSICTL_FLAG_STRING, &o->external_id, "ID",
	     "mount: the plugin's volume ID (default: the volume ID)"},
	    {"readonly", CSICTL_FLAG_BOOL, &o->readonly, NULL, "mount: read-only"},
	    {"block", CSICTL_FLAG_BOOL, &o->block, NULL, "mount: block-device attachment"},
	    {"attachment-mode", CSICTL_FLAG_STRING, &o->attachment_mode, "MODE",
	     "mount: block-device or file-system, the default"},
	    {"access-mode", CSICTL_FLAG_STRING, &o->access_mode, "MODE",
	     "mount: single-node-writer (default) or another of the seven modes"},
	    {"fs-type", CSICTL_FLAG_STRING, &o->fs_type, "TYPE", "mount: file system type"},
	    {"mount-flag", CSICTL_FLAG_LIST, &o->mount_flags, "FLAG",
	     "mount: mount option (repeatable)"},
	    {"context", CSICTL_FLAG_KV, &o->context, "K=V", "mount: volume context (repeatable)"},
	    {"publish-context", CSICTL_FLAG_KV, &o->publish_context, "K=V",
	     "mount: publish context (repeatable)"},
	    {"secret", CSICTL_FLAG_KV, &o->secrets, "K=V", "mount: secret (repeatable)"},
	    {"secrets-file", CSICTL_FLAG_STRING, &o->secrets_file, "FILE",
	     "mount: secrets from a JSON object of strings"},
	    {"context-file", CSICTL_FLAG_STRING, &o->context_file, "FILE",
	     "mount: volume context from a JSON file (an object of strings, or the output of "
	     "csictl csi create-volume -o json); -context wins"},
	    {"force", CSICTL_FLAG_BOOL, &o->force, NULL,
	     "unmount: when the plugin fails, unmount and drop the record anyway"},
	    {"alloc", CSICTL_FLAG_STRING, &o->alloc, "ID", "volume mount, unmount: the allocation"},
	    {"read-only", CSICTL_FLAG_BOOL, &o->readonly, NULL, "volume mount: a read claim"},
	    {"owner-pid", CSICTL_FLAG_STRING, &o->owner_pid, "PID",
	     "volume mount: the process owning the mount (released when it exits)"},
	    {"owner-cgroup", CSICTL_FLAG_STRING, &o->owner_cgroup, "PATH",
	     "volume mount: the cgroup v2 directory owning the mount (released when empty)"},
	    {"lease", CSICTL_FLAG_STRING, &o->lease, "DURATION",
	     "volume mount, renew: a lease (1s to 24h) owning the mount; renew before it "
	     "lapses"},
	    {"h", CSICTL_FLAG_BOOL, &o->help, NULL, "help"},
	    {"help", CSICTL_FLAG_BOOL, &o->help, NULL, "help"},
	};

	_Static_assert(sizeof(table) / sizeof(table[0]) <= CSICTL_AGENT_FLAGS_MAX,
		       "flag table too small");
	memcpy(f, table, sizeof(table));
	return sizeof(table) / sizeof(table[0]);
}

static int csictl_agent_run(struct csictl_agent *a)
{
	const char *cmd = a->args.v[0];
	int want = -1;

	if (a->o.volume)
		return csictl_agent_run_volume(a);
	if (strcmp(cmd, "self") == 0 || strcmp(cmd, "plugins") == 0 || strcmp(cmd, "mounts") == 0)
		want = 1;
	else if (strcmp(cmd, "mount") == 0 || strcmp(cmd, "unmount") == 0)
		want = 3;
	if (want < 0) {
		fprintf(a->err, "error: unknown command \"%.64s\" (see csictl agent -h)\n", cmd);
		return CSICTL_EXIT_USAGE;
	}
	if (a->args.n != want) {
		fprintf(a->err, "error: usage: csictl agent %s%s\n", cmd,
			want == 3 ? " VOLUME ALLOC" : "");
		return CSICTL_EXIT_USAGE;
	}
	if (strcmp(cmd, "self") == 0)
		return csictl_agent_request(a, "GET", "/v1/agent/self", NULL,
					    csictl_agent_render_object, NULL);
	if (strcmp(cmd, "plugins") == 0)
		return csictl_agent_request(a, "GET", "/v1/agent/plugins", NULL,
					    csictl_agent_render_plugins, NULL);
	if (strcmp(cmd, "mounts") == 0)
		return csictl_agent_request(a, "GET", "/v1/agent/mounts", NULL,
					    csictl_agent_render_mounts, NULL);
	if (strcmp(cmd, "mount") == 0)
		return csictl_agent_mount(a);
	return csictl_agent_unmount(a);
}

/* csictl agent, or csictl volume mount|unmount when volume. */
static int csictl_agent_main_as(int argc, char **argv, FILE *out, FILE *errf, bool volume)
{
	struct csictl_agent a = {
	    .out = out,
	    .err = errf,
	    .http = {.what = "agent",
		     .hint = "start csid agent or set CSID_AGENT_ADDR",
		     .timeout_ms = CSICTL_AGENT_TIMEOUT_MS,
		     .err = errf},
	};
	struct csictl_flag flags[CSICTL_AGENT_FLAGS_MAX];
	size_t nflags = csictl_agent_flags(&a.o, flags);
	const char *addr;
	struct err e;
	int status;

	err_clear(&e);
	a.o.volume = volume;
	for (int i = 0; i < argc; i++)
		if (!csictl_out_utf8_ok(argv[i])) {
			fprintf(errf, "error: argument %d is not valid UTF-8\n", i + 1);
			status = CSICTL_EXIT_USAGE;
			goto out;
		}
	if (csictl_flags_parse(flags, nflags, argc, argv, &a.args, &e)) {
		fprintf(errf, "error: %s (see csictl agent -h)\n", e.msg);
		status = CSICTL_EXIT_USAGE;
		goto out;
	}
	if (a.o.help || a.args.n == 0) {
		csictl_cmd_help(volume ? "volume" : "agent", &a.args, flags, nflags,
				a.o.help ? out : errf);
		status = a.o.help ? CSICTL_EXIT_OK : CSICTL_EXIT_USAGE;
		goto out;
	}
	if (a.o.output && strcmp(a.o.output, "json") != 0 && strcmp(a.o.output, "table") != 0) {
		fprintf(errf, "error: -o must be table or json\n");
		status = CSICTL_EXIT_USAGE;
		goto out;
	}
	a.json = a.o.output && strcmp(a.o.output, "json") == 0;
	addr = a.o.address ? a.o.address : getenv("CSID_AGENT_ADDR");
	/* The agent's TCP API wants its token (the agent's server_token) or a client certificate.
	 */
	a.http.token = getenv("CSID_AGENT_TOKEN");
	csictl_http_tls_env(&a.http);
	if (!addr || !*addr)
		addr = CSICTL_AGENT_DEFAULT_ADDR;
	if ((a.o.timeout && csictl_duration_parse(a.o.timeout, &a.http.timeout_ms, &e)) ||
	    csictl_http_addr_parse("agent", addr, &a.http.addr, &e) ||
	    (a.o.secrets_file && csictl_kv_load_file(&a.o.secrets, a.o.secrets_file, &e)) ||
	    (a.o.context_file && csictl_agent_context_load(&a.o, &e))) {
		fprintf(errf, "error: %s\n", e.msg);
		status = CSICTL_EXIT_USAGE;
		goto out;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	status = csictl_agent_run(&a);
	curl_global_cleanup();
out:
	csictl_kv_free(&a.o.context);
	csictl_kv_free(&a.o.publish_context);
	csictl_kv_free(&a.o.secrets);
	json_decref(a.o.context_doc);
	return status;
}

int csictl_agent_main(int argc, char **argv, FILE *out, FILE *errf)
{
	return csictl_agent_main_as(argc, argv, out, errf, false);
}

int csictl_agent_volume_main(int argc, char **argv, FILE *out, FILE *errf)
{
	return csictl_agent_main_as(argc, argv, out, errf, true);
}
