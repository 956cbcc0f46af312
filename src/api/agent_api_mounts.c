/*
 * The mounts resource of the agent API: decoding and validating mount
 * requests (a separate, fuzzed function), and the handlers that drive the
 * volume mounter through the node plugin the plugin manager provides.
 *
 * A mount waits, bounded by plugin_wait_ms, for its plugin to be healthy
 * (it may be starting with the agent); a plugin nobody configured or
 * registered is refused at once. An unmount with ?force=true goes on
 * without a plugin it cannot have (mounter_unmount_force) and answers
 * what was skipped. Secrets and mount flags are passed to
 * the plugin only: they are zeroed when the request is freed and never
 * appear in a response, an error or a log line.
 */
#include "api/agent_api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "util/log.h"

#define AGENT_API_STR_MAX 1024
#define AGENT_API_MAP_MAX_BYTES 4096
#define AGENT_API_FLAGS_MAX 64

enum agent_api_map {
	AGENT_API_VOLUME_CONTEXT,
	AGENT_API_PUBLISH_CONTEXT,
	AGENT_API_SECRETS,
	AGENT_API_MAP_COUNT
};

static const char *const agent_api_map_keys[] = {"volume_context", "publish_context", "secrets"};

static const char *const agent_api_mount_keys[] = {
    "volume_id",       "external_id", "plugin_id", "alloc_id",    "read_only",
    "attachment_mode", "access_mode", "fs_type",   "mount_flags", "volume_context",
    "publish_context", "secrets",     NULL};

/* A short printable form of an untrusted name for a message. */
static const char *agent_api_sanitize(char *buf, size_t len, const char *s)
{
	size_t o = 0;

	for (; *s && o + 4 < len && o < 64; s++)
		buf[o++] = ((unsigned char)*s < 0x20 || *s == 0x7f || *s == '"') ? '?' : *s;
	if (*s)
		buf[o++] = '.', buf[o++] = '.', buf[o++] = '.';
	buf[o] = '\0';
	return buf;
}

void agent_api_mount_req_free(struct agent_api_mount_req *r)
{
	json_t *root;

	if (!r)
		return;
	root = r->json_;
	if (root) {
		model_json_wipe(json_object_get(root, "secrets"));
		model_json_wipe(json_object_get(root, "mount_flags"));
		json_decref(root);
	}
	free(r->kvs);
	free(r->flags);
	free(r);
}

/* An optional string member: NULL when absent; CSID_EINVAL when not a string or too long. */
static int agent_api_opt_string(json_t *root, const char *key, size_t max, const char **out,
				struct err *e)
{
	json_t *v = json_object_get(root, key);

	*out = NULL;
	if (!v)
		return 0;
	if (!json_is_string(v))
		return err_set(e, CSID_EINVAL, "%s: expected a string", key);
	if (json_string_length(v) > max)
		return err_set(e, CSID_EINVAL, "%s: longer than %zu bytes", key, max);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return err_set(e, CSID_EINVAL, "%s: contains a NUL byte", key);
	*out = json_string_value(v);
	return 0;
}

static int agent_api_name(json_t *root, const char *key, const char **out, struct err *e)
{
	int rc = agent_api_opt_string(root, key, MOUNT_NAME_MAX, out, e);

	if (rc)
		return rc;
	if (!*out)
		return err_set(e, CSID_EINVAL, "%s: required", key);
	return mount_name_check(key, *out, e);
}

static int agent_api_decode_map(json_t *root, enum agent_api_map which, struct mount_kv *kvs,
				size_t *n, struct err *e)
{
	const char *name = agent_api_map_keys[which];
	json_t *v = json_object_get(root, name), *item;
	size_t bytes = 0;
	const char *key;

	*n = 0;
	if (!v)
		return 0;
	if (!json_is_object(v))
		return err_set(e, CSID_EINVAL, "%s: expected an object of strings", name);
	json_object_foreach(v, key, item)
	{
		char q[80];

		/* Even the names of secrets stay out of messages. */
		if (!json_is_string(item) && which == AGENT_API_SECRETS)
			return err_set(e, CSID_EINVAL, "%s: every value must be a string", name);
		if (!json_is_string(item))
			return err_set(e, CSID_EINVAL, "%s.%s: expected a string", name,
				       agent_api_sanitize(q, sizeof(q), key));
		if (strlen(json_string_value(item)) != json_string_length(item) || !key[0])
			return err_set(e, CSID_EINVAL, "%s: empty key or NUL byte in a value",
				       name);
		bytes += strlen(key) + json_string_length(item);
		if (bytes > AGENT_API_MAP_MAX_BYTES)
			return err_set(e, CSID_EINVAL, "%s: larger than %d bytes", name,
				       AGENT_API_MAP_MAX_BYTES);
		kvs[*n].key = key;
		kvs[*n].value = json_string_value(item);
		(*n)++;
	}
	return 0;
}

static int agent_api_decode_flags(json_t *root, struct agent_api_mount_req *r, struct err *e)
{
	json_t *v = json_object_get(root, "mount_flags"), *item;
	size_t i;

	if (!v)
		return 0;
	if (!json_is_array(v))
		return err_set(e, CSID_EINVAL, "mount_flags: expected an array of strings");
	if (json_array_size(v) > AGENT_API_FLAGS_MAX)
		return err_set(e, CSID_EINVAL, "mount_flags: more than %d flags",
			       AGENT_API_FLAGS_MAX);
	r->flags = calloc(json_array_size(v) + 1, sizeof(*r->flags));
	if (!r->flags)
		return err_set(e, CSID_ENOMEM, "out of memory");
	json_array_foreach(v, i, item)
	{
		if (!json_is_string(item) || json_string_length(item) > AGENT_API_STR_MAX ||
		    strlen(json_string_value(item)) != json_string_length(item))
			return err_set(e, CSID_EINVAL,
				       "mount_flags[%zu]: expected a string of at most %d bytes", i,
				       AGENT_API_STR_MAX);
		r->flags[i] = json_string_value(item);
	}
	r->req.usage.mount_flags = r->flags;
	r->req.usage.n_mount_flags = json_array_size(v);
	return 0;
}

static int agent_api_decode_fields(json_t *root, struct agent_api_mount_req *r, struct err *e)
{
	struct mounter_request *q = &r->req;
	const char *attach = NULL, *access = NULL, *key;
	size_t nkv = 0, n;
	json_t *v;
	int rc;

	json_object_foreach(root, key, v)
	{
		bool ok = false;
		char s[80];

		for (int i = 0; agent_api_mount_keys[i]; i++)
			if (strcmp(key, agent_api_mount_keys[i]) == 0)
				ok = true;
		if (!ok)
			return err_set(e, CSID_EINVAL, "unknown field \"%s\"",
				       agent_api_sanitize(s, sizeof(s), key));
	}
	if ((rc = agent_api_name(root, "volume_id", &q->volume_id, e)) ||
	    (rc = agent_api_name(root, "plugin_id", &q->plugin_id, e)) ||
	    (rc = agent_api_name(root, "alloc_id", &q->alloc_id, e)) ||
	    (rc = agent_api_opt_string(root, "external_id", AGENT_API_STR_MAX, &q->external_id,
				       e)) ||
	    (rc = agent_api_opt_string(root, "fs_type", MOUNT_NAME_MAX, &q->usage.fs_type, e)) ||
	    (rc = agent_api_opt_string(root, "attachment_mode", 64, &attach, e)) ||
	    (rc = agent_api_opt_string(root, "access_mode", 64, &access, e)))
		return rc;
	if (q->external_id && !q->external_id[0])
		return err_set(e, CSID_EINVAL, "external_id: empty");
	if (!q->external_id)
		q->external_id = q->volume_id;
	v = json_object_get(root, "read_only");
	if (v && !json_is_boolean(v))
		return err_set(e, CSID_EINVAL, "read_only: expected true or false");
	q->usage.read_only = v && json_is_true(v);
	q->usage.attachment = MOUNT_ATTACH_FILE_SYSTEM;
	if (attach && (rc = mount_attachment_parse(attach, &q->usage.attachment, e)))
		return err_wrap(e, "attachment_mode");
	if (!access)
		return err_set(e, CSID_EINVAL,
			       "access_mode: required (e.g. \"single-node-writer\")");
	if ((rc = mount_access_parse(access, &q->usage.access, e)))
		return err_wrap(e, "access_mode");
	for (int m = 0; m < AGENT_API_MAP_COUNT; m++) {
		v = json_object_get(root, agent_api_map_keys[m]);
		nkv += json_is_object(v) ? json_object_size(v) : 0;
	}
	r->kvs = calloc(nkv + 1, sizeof(*r->kvs));
	if (!r->kvs)
		return err_set(e, CSID_ENOMEM, "out of memory");
	nkv = 0;
	if ((rc = agent_api_decode_map(root, AGENT_API_VOLUME_CONTEXT, r->kvs, &n, e)))
		return rc;
	q->volume_context = r->kvs;
	q->n_volume_context = n;
	nkv += n;
	if ((rc = agent_api_decode_map(root, AGENT_API_PUBLISH_CONTEXT, r->kvs + nkv, &n, e)))
		return rc;
	q->publish_context = r->kvs + nkv;
	q->n_publish_context = n;
	nkv += n;
	if ((rc = agent_api_decode_map(root, AGENT_API_SECRETS, r->kvs + nkv, &n, e)))
		return rc;
	q->secrets = r->kvs + nkv;
	q->n_secrets = n;
	return agent_api_decode_flags(root, r, e);
}

int agent_api_decode_mount(const char *body, size_t len, struct agent_api_mount_req **out,
			   struct err *e)
{
	struct agent_api_mount_req *r;
	json_error_t jerr;
	json_t *root;
	int rc;

	*out = NULL;
	if (len > AGENT_API_BODY_MAX)
		return err_set(e, CSID_ETOOBIG, "request body larger than %d bytes",
			       AGENT_API_BODY_MAX);
	if (len == 0)
		return err_set(e, CSID_EINVAL, "request body is empty: expected a JSON object");
	/* jansson's message may quote the input, which may hold a secret: give the position only.
	 */
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return err_set(e, CSID_EINVAL,
			       "request body is not valid JSON (line %d, column %d)", jerr.line,
			       jerr.column);
	if (!json_is_object(root)) {
		json_decref(root);
		return err_set(e, CSID_EINVAL, "request body must be a JSON object");
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		model_json_wipe(root);
		json_decref(root);
		return err_set(e, CSID_ENOMEM, "out of memory");
	}
	r->json_ = root;
	rc = agent_api_decode_fields(root, r, e);
	if (rc) {
		agent_api_mount_req_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

int agent_api_parse_mount_path(const char *url, char *vol, char *alloc, struct err *e)
{
	static const char prefix[] = "/v1/agent/mounts/";
	const char *p, *slash;
	size_t vlen, alen;
	int rc;

	if (strncmp(url, prefix, sizeof(prefix) - 1) != 0)
		return err_set(e, CSID_EINVAL, "expected /v1/agent/mounts/<volume>/<alloc>");
	p = url + sizeof(prefix) - 1;
	slash = strchr(p, '/');
	if (!slash || strchr(slash + 1, '/'))
		return err_set(e, CSID_EINVAL, "expected /v1/agent/mounts/<volume>/<alloc>");
	vlen = (size_t)(slash - p);
	alen = strlen(slash + 1);
	if ((rc = mount_name_check_len("volume id", p, vlen, e)) ||
	    (rc = mount_name_check_len("alloc id", slash + 1, alen, e)))
		return rc;
	memcpy(vol, p, vlen);
	vol[vlen] = '\0';
	memcpy(alloc, slash + 1, alen);
	alloc[alen] = '\0';
	return 0;
}

int agent_api_parse_force(const char *value, bool *out, struct err *e)
{
	*out = false;
	if (!value || strcmp(value, "false") == 0 || strcmp(value, "0") == 0)
		return 0;
	if (strcmp(value, "true") == 0 || strcmp(value, "1") == 0) {
		*out = true;
		return 0;
	}
	return err_set(e, CSID_EINVAL, "force: expected true or false");
}

int agent_api_mounts_put(struct agent_api *a, const char *body, size_t len, json_t **out,
			 struct err *e)
{
	struct agent_api_mount_req *r = NULL;
	struct plugin_ref ref = {0};
	struct mounter_plugin mp;
	struct mounter_result *res = NULL;
	int rc;

	rc = agent_api_decode_mount(body, len, &r, e);
	if (rc)
		return rc;
	rc = node_plugins_ref(&a->np, r->req.plugin_id, &ref, e);
	if (rc)
		goto out;
	res = calloc(1, sizeof(*res));
	if (!res) {
		rc = err_set(e, CSID_ENOMEM, "out of memory");
		goto out;
	}
	/* A mount made without a claim is never unmounted for the servers (agent/claims.h). */
	if ((rc = claims_mark_unclaimed(a->cfg.claims, r->req.volume_id, r->req.alloc_id, e)))
		goto out;
	mp.plugin_id = r->req.plugin_id;
	mp.client = ref.client;
	mp.has_stage_unstage = ref.fingerprint.stage_unstage;
	/* The mounter's messages name the volume and the allocation already. */
	rc = mounter_mount(a->cfg.mounter, &mp, &r->req, res, e);
	if (rc)
		goto out;
	*out = json_pack("{s:s, s:s, s:b}", "source", res->source, "target", res->target,
			 "is_device", res->is_device);
	if (!*out)
		rc = err_set(e, CSID_ENOMEM, "out of memory");
out:
	free(res);
	plugin_ref_release(&ref);
	agent_api_mount_req_free(r);
	return rc;
}

/* The answer of a forced unmount: what the agent did itself and what it skipped. */
static json_t *agent_api_force_json(const char *vol, const char *alloc,
				    const struct mounter_force_report *rep)
{
	json_t *skipped = json_array(), *detached = json_array(), *kept = json_array();

	for (int i = 0; skipped && i < rep->n_skipped; i++)
		json_array_append_new(skipped, json_string(rep->skipped[i]));
	for (int i = 0; detached && i < rep->n_detached; i++)
		json_array_append_new(detached, json_pack("{s:s, s:b}", "path", rep->detached[i],
							  "lazy", rep->lazy[i]));
	for (int i = 0; kept && i < rep->n_kept; i++)
		json_array_append_new(kept, json_string(rep->kept[i]));
	return json_pack("{s:s, s:s, s:b, s:b, s:o*, s:o*, s:o*}", "volume_id", vol, "alloc_id",
			 alloc, "unmounted", 1, "forced", rep->forced, "skipped", skipped,
			 "detached", detached, "kept", kept);
}

/*
 * DELETE ...?force=true: the plugin is waited for as for an unmount, but
 * one that cannot be had is no reason to stop; the mounter tries the
 * RPCs once and undoes the rest itself.
 */
static int agent_api_mounts_force(struct agent_api *a, const char *vol, const char *alloc,
				  const char *plugin, json_t **out, struct err *e)
{
	struct mounter_force_report *rep = calloc(1, sizeof(*rep));
	struct plugin_ref ref = {0};
	struct mounter_plugin mp;
	struct err pe;
	int rc;

	if (!rep)
		return err_set(e, CSID_ENOMEM, "out of memory");
	err_clear(&pe);
	mp.plugin_id = plugin;
	mp.has_stage_unstage = false;
	mp.client = NULL;
	if (node_plugins_ref(&a->np, plugin, &ref, &pe) == 0) {
		mp.client = ref.client;
		mp.has_stage_unstage = ref.fingerprint.stage_unstage;
	}
	rc = mounter_unmount_force(a->cfg.mounter, mp.client ? &mp : NULL, pe.msg, vol, alloc, rep,
				   e);
	plugin_ref_release(&ref);
	if (rc == 0) {
		*out = agent_api_force_json(vol, alloc, rep);
		if (!*out)
			rc = err_set(e, CSID_ENOMEM, "out of memory");
	}
	free(rep);
	return rc;
}

/* Unmounts vol for alloc through plugin (mounter_unmount). */
static int agent_api_unmount_plugin(struct agent_api *a, const char *vol, const char *alloc,
				    const char *plugin, struct err *e)
{
	struct plugin_ref ref = {0};
	struct mounter_plugin mp;
	int rc;

	rc = node_plugins_ref(&a->np, plugin, &ref, e);
	if (rc)
		return err_wrap(e, "unmount %s for %s", vol, alloc);
	mp.plugin_id = plugin;
	mp.client = ref.client;
	mp.has_stage_unstage = ref.fingerprint.stage_unstage;
	rc = mounter_unmount(a->cfg.mounter, &mp, vol, alloc, e);
	plugin_ref_release(&ref);
	return rc;
}

/* The plugin that mounted vol for alloc, in plugin (MOUNT_NAME_MAX + 1 bytes). */
static int agent_api_mount_plugin(struct agent_api *a, const char *vol, const char *alloc,
				  char *plugin, struct err *e)
{
	struct mount_record *rec = NULL;
	int rc;

	rc = mounter_get(a->cfg.mounter, vol, alloc, &rec, e);
	if (rc == CSID_ENOTFOUND)
		return err_set(e, CSID_ENOTFOUND, "no mount of volume %s for alloc %s", vol, alloc);
	if (rc)
		return rc;
	snprintf(plugin, MOUNT_NAME_MAX + 1, "%s", rec->plugin_id);
	mount_record_free(rec);
	return 0;
}

int agent_api_mounts_delete(struct agent_api *a, const char *url, const char *force, json_t **out,
			    struct err *e)
{
	char vol[MOUNT_NAME_MAX + 1], alloc[MOUNT_NAME_MAX + 1];
	char plugin[MOUNT_NAME_MAX + 1] = "";
	bool forced = false;
	int rc;

	rc = agent_api_parse_force(force, &forced, e);
	if (rc == 0)
		rc = agent_api_parse_mount_path(url, vol, alloc, e);
	if (rc)
		return rc;
	rc = agent_api_mount_plugin(a, vol, alloc, plugin, e);
	if (rc)
		return rc;
	if (forced)
		return agent_api_mounts_force(a, vol, alloc, plugin, out, e);
	rc = agent_api_unmount_plugin(a, vol, alloc, plugin, e);
	if (rc)
		return rc;
	*out = json_pack("{s:s, s:s, s:b}", "volume_id", vol, "alloc_id", alloc, "unmounted", 1);
	return *out ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
}

static json_t *agent_api_record_json(const struct mount_record *r)
{
	json_t *o, *pc, *vc;

	/* Contexts only: secrets and mount flags are never recorded. */
	pc = r->publish_context ? json_loads(r->publish_context, 0, NULL) : NULL;
	vc = r->volume_context ? json_loads(r->volume_context, 0, NULL) : NULL;
	o = json_pack(
	    "{s:s, s:s, s:s, s:s, s:b, s:s, s:s, s:s, s:s?, s:s, s:s, s:I, s:o, s:o}", "volume_id",
	    r->volume_id, "alloc_id", r->alloc_id, "plugin_id", r->plugin_id, "external_id",
	    r->external_id ? r->external_id : "", "read_only", r->read_only, "attachment_mode",
	    mount_attachment_name(r->attachment) ? mount_attachment_name(r->attachment) : "unknown",
	    "access_mode", mount_access_name(r->access) ? mount_access_name(r->access) : "unknown",
	    "fs_type", r->fs_type ? r->fs_type : "", "staging_path", r->staging_path, "target_path",
	    r->target_path ? r->target_path : "", "state", mount_state_name(r->state), "updated_ms",
	    (json_int_t)r->updated_ms, "publish_context", pc ? pc : json_object(), "volume_context",
	    vc ? vc : json_object());
	return o;
}

int agent_api_mounts_list(struct agent_api *a, json_t **out, struct err *e)
{
	struct mount_record **recs = NULL;
	json_t *arr;
	size_t n = 0;
	int rc;

	rc = mounter_list(a->cfg.mounter, &recs, &n, e);
	if (rc)
		return rc;
	arr = json_array();
	for (size_t i = 0; arr && i < n; i++) {
		json_t *o = agent_api_record_json(recs[i]);

		if (!o || json_array_append_new(arr, o) != 0) {
			json_decref(arr);
			arr = NULL;
		}
	}
	mount_records_free(recs, n);
	if (!arr)
		return err_set(e, CSID_ENOMEM, "out of memory");
	*out = json_pack("{s:o}", "mounts", arr);
	return *out ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
}
