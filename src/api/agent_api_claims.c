/*
 * Claims from the node: the agent API's volume resource, which mounts a
 * volume of the csid servers for an allocation and unmounts it again.
 *
 *   PUT    /v1/agent/volumes/<vol>/mount          {"alloc_id", "read_only",
 *                                                 "access_mode", "attachment_mode",
 *                                                 "owner" (agent_api_owners.c)}
 *   DELETE /v1/agent/volumes/<vol>/mount/<alloc>
 *
 * A mount reads the volume on a server, claims it for the allocation on
 * this node (the server checks the claim rules), follows the volume with
 * blocking queries until its publication to this node is published (or
 * the plugin needs no ControllerPublishVolume), then mounts through the
 * mounter with the plugin, external ID, volume context, publish context
 * and fs_type of the volume, and the volume's secrets and mount flags,
 * which the servers' API view never shows: they come from the servers'
 * node-stage read, answered to this node's agent only (agent_api_stage.c;
 * every request to the servers carries the agent's instance ID in
 * HTTP_NODE_INSTANCE_HEADER). The allocation is in the agent's
 * report of held allocations (agent/held_allocs.h) from before the claim
 * goes out until its mount record exists; a mount that fails after the
 * claim leaves the claim, which the server releases once the report no
 * longer has it (server/server_gc.h), or an unmount releases at once.
 *
 * An unmount takes the mount down through the mounter (unpublish, then
 * unstage when unused) and only then releases the claim, so the server
 * drives ControllerUnpublishVolume only once the node is done; the
 * allocation stays in the report until the release went, so the server
 * never releases it as lost first (with another note). The
 * release is recorded durably first; one no server answers is retried in
 * the background (agent_api_release.c). Nothing mounted counts as done,
 * and so does a release the server answers not_found (the allocation
 * holds no claim: its mount stopped before claiming, or the volume is
 * gone), so an unmount may simply be repeated, or follow a mount that
 * never got its claim. Every server request tries the servers in order
 * and is retried with backoff while none can be reached, within a
 * deadline.
 * The agent presents its server_token; it never appears in a message.
 */
#include "api/agent_api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "util/clock.h"
#include "util/curl_pool.h"
#include "util/log.h"
#include "util/strbuf.h"

/* How long a mount waits for its publication, and a request for a reachable server (ms). */
#define AGENT_API_CLAIM_WAIT_MS 60000
#define AGENT_API_SERVER_WAIT_MS 30000
/* One server request, and the wait of one blocking query (ms). */
#define AGENT_API_SERVER_TIMEOUT_MS 10000
#define AGENT_API_BLOCK_WAIT "5s"
#define AGENT_API_RETRY_MIN_MS 200
#define AGENT_API_RETRY_MAX_MS 3000
#define AGENT_API_ANSWER_MAX (4 * 1024 * 1024)
#define AGENT_API_URL_MAX 2048

static const char *const agent_api_claim_keys[] = {"alloc_id", "read_only", "access_mode",
						   "attachment_mode", NULL};

/* The csid code an error answer names ("conflict"), else the one of its status. */
static int agent_api_server_code(long status, json_t *doc)
{
	const char *code = json_string_value(json_object_get(doc, "code"));

	for (int c = CSID_ERROR_BASE_ + 1; code && c < CSID_ERROR_END_; c++)
		if (strcmp(csid_err_code(c), code) == 0)
			return c;
	if (status == 404)
		return CSID_ENOTFOUND;
	if (status == 409)
		return CSID_ECONFLICT;
	if (status == 412)
		return CSID_EPRECOND;
	if (status == 401 || status == 403)
		return CSID_EPERM;
	return status >= 500 ? CSID_EUNAVAIL : CSID_EINVAL;
}

/* Ends a request early when the api stops. */
static int agent_api_server_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut,
				     curl_off_t un)
{
	(void)dt;
	(void)dn;
	(void)ut;
	(void)un;
	return agent_api_release_stopping(ud);
}

/* One request to one server: 0 with *status and *doc (NULL when no JSON), or CSID_EUNAVAIL. */
static int agent_api_server_once(struct agent_api *a, const char *base, const char *method,
				 const char *path, const char *body, long *status, json_t **doc,
				 struct err *e)
{
	struct strbuf ans = {.max = AGENT_API_ANSWER_MAX};
	struct curl_slist *hdrs = NULL;
	char url[AGENT_API_URL_MAX], tok[600];
	CURL *c = curl_pool_get(a->conns);
	CURLcode cc;
	int rc = 0;

	*doc = NULL;
	*status = 0;
	if (!c)
		return err_set(e, CSID_ENOMEM, "out of memory");
	snprintf(url, sizeof(url), "%s%s", base, path);
	hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	if (a->server_token) {
		snprintf(tok, sizeof(tok), "X-Csid-Token: %s", a->server_token);
		hdrs = curl_slist_append(hdrs, tok);
		explicit_bzero(tok, sizeof(tok));
	}
	if (a->instance_id) {
		snprintf(tok, sizeof(tok), HTTP_NODE_INSTANCE_HEADER ": %s", a->instance_id);
		hdrs = curl_slist_append(hdrs, tok);
		explicit_bzero(tok, sizeof(tok));
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)AGENT_API_SERVER_TIMEOUT_MS);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, strbuf_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &ans);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, agent_api_server_progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, a);
	if (body)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	cc = curl_easy_perform(c);
	if (cc != CURLE_OK) {
		rc = err_set(e, CSID_EUNAVAIL, "server %.256s: %s", base,
			     ans.too_big ? "answer too large" : curl_easy_strerror(cc));
		goto out;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
	if (ans.len)
		*doc = json_loadb(ans.p, ans.len, 0, NULL);
	if (*status >= 500) {
		const char *msg = json_string_value(json_object_get(*doc, "error"));

		rc = err_set(e, CSID_EUNAVAIL, "server %.256s: HTTP %ld: %.300s", base, *status,
			     msg ? msg : "no message");
		json_decref(*doc);
		*doc = NULL;
	}
out:
	curl_pool_headers_free(hdrs);
	curl_pool_put(a->conns, c);
	/* A node-stage answer holds secrets. */
	if (ans.p)
		explicit_bzero(ans.p, ans.len);
	strbuf_free(&ans);
	return rc;
}

static void agent_api_pause_ms(int64_t ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/*
 * One request to the servers: each in order, and (patient) again with a
 * doubling pause while none answers, for at most AGENT_API_SERVER_WAIT_MS.
 * A 2xx answer gives 0 and *doc (the caller's); another gives its code
 * with e holding the server's message; CSID_EUNAVAIL: none answered.
 */
static int agent_api_server_try(struct agent_api *a, const char *method, const char *path,
				json_t *body, bool patient, json_t **doc, struct err *e)
{
	int64_t deadline = clock_now_ms(clock_real()) + (patient ? AGENT_API_SERVER_WAIT_MS : 0);
	int64_t pause = AGENT_API_RETRY_MIN_MS;
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	long status = 0;
	int rc;

	*doc = NULL;
	if (!a->cfg.nservers) {
		free(text);
		return err_set(e, CSID_EPRECOND,
			       "the agent joined no servers (config \"servers\")");
	}
	if (body && !text)
		return err_set(e, CSID_ENOMEM, "out of memory");
	for (;;) {
		rc = CSID_EUNAVAIL;
		for (size_t i = 0; i < a->cfg.nservers && rc == CSID_EUNAVAIL; i++)
			rc = agent_api_server_once(a, a->cfg.servers[i], method, path, text,
						   &status, doc, e);
		if (rc != CSID_EUNAVAIL || clock_now_ms(clock_real()) + pause > deadline ||
		    agent_api_release_stopping(a))
			break;
		agent_api_pause_ms(pause);
		pause = pause * 2 > AGENT_API_RETRY_MAX_MS ? AGENT_API_RETRY_MAX_MS : pause * 2;
	}
	free(text);
	if (rc)
		return err_wrap(e, "no server answered");
	if (status < 200 || status > 299) {
		const char *msg = json_string_value(json_object_get(*doc, "error"));

		rc = err_set(e, agent_api_server_code(status, *doc), "%.800s",
			     msg ? msg : "the server refused the request");
		json_decref(*doc);
		*doc = NULL;
	}
	return rc;
}

int agent_api_server(struct agent_api *a, const char *method, const char *path, json_t *body,
		     json_t **doc, struct err *e)
{
	return agent_api_server_try(a, method, path, body, true, doc, e);
}

/* The escaped volume ID for a server path ("/v1/volume/<vol><rest>"). */
static int agent_api_volume_path(const char *vol, const char *rest, char *out, size_t len,
				 struct err *e)
{
	char *esc = curl_easy_escape(NULL, vol, 0);
	int n;

	if (!esc)
		return err_set(e, CSID_ENOMEM, "out of memory");
	n = snprintf(out, len, "/v1/volume/%s%s", esc, rest);
	curl_free(esc);
	if (n < 0 || (size_t)n >= len)
		return err_set(e, CSID_EINVAL, "volume ID too long");
	return 0;
}

/* The publication of v to node, or NULL. */
static json_t *agent_api_publication(json_t *v, const char *node)
{
	json_t *p;
	size_t i;

	json_array_foreach(json_object_get(v, "publications"), i, p)
	{
		const char *n = json_string_value(json_object_get(p, "node_id"));

		if (n && strcmp(n, node) == 0)
			return p;
	}
	return NULL;
}

/* Whether the volume's plugin needs ControllerPublishVolume, as the server sees it. */
static int agent_api_controller_required(struct agent_api *a, const char *plugin, bool *out,
					 struct err *e)
{
	char path[AGENT_API_URL_MAX];
	char *esc = curl_easy_escape(NULL, plugin, 0);
	json_t *doc = NULL;
	int rc;

	if (!esc)
		return err_set(e, CSID_ENOMEM, "out of memory");
	snprintf(path, sizeof(path), "/v1/plugin/%s", esc);
	curl_free(esc);
	rc = agent_api_server(a, "GET", path, NULL, &doc, e);
	if (rc)
		return err_wrap(e, "plugin %s", plugin);
	*out = json_is_true(json_object_get(doc, "controller_required"));
	json_decref(doc);
	return 0;
}

/*
 * Follows volume *v (replaced as it changes) until its publication to
 * this node is published, or there is none and none is needed. Returns
 * 0 with *pub (borrowed from *v, NULL: no publication), or an error
 * naming the volume's last error.
 */
static int agent_api_wait_published(struct agent_api *a, const char *vol, json_t **v, json_t **pub,
				    struct err *e)
{
	int64_t deadline = clock_now_ms(clock_real()) + AGENT_API_CLAIM_WAIT_MS;
	char path[AGENT_API_URL_MAX], rest[64];
	bool checked = false, required = true;
	int rc;

	for (;;) {
		const char *st, *last;
		json_t *p = agent_api_publication(*v, a->node_name), *next = NULL;

		st = json_string_value(json_object_get(p, "state"));
		if (st && strcmp(st, "published") == 0) {
			*pub = p;
			return 0;
		}
		if (!p && !checked) {
			rc = agent_api_controller_required(
			    a, json_string_value(json_object_get(*v, "plugin_id")), &required, e);
			if (rc)
				return rc;
			checked = true;
		}
		if (!p && !required) {
			*pub = NULL;
			return 0;
		}
		if (clock_now_ms(clock_real()) >= deadline) {
			last = json_string_value(
			    json_object_get(json_object_get(*v, "status"), "last_error"));
			return err_set(e, CSID_ETIMEDOUT,
				       "volume %s: not published to node %s after %ds (%s): "
				       "last error: %.600s",
				       vol, a->node_name, AGENT_API_CLAIM_WAIT_MS / 1000,
				       st ? st : "no publication", last && *last ? last : "none");
		}
		snprintf(rest, sizeof(rest), "?index=%lld&wait=" AGENT_API_BLOCK_WAIT,
			 (long long)json_integer_value(json_object_get(*v, "modify_index")));
		if ((rc = agent_api_volume_path(vol, rest, path, sizeof(path), e)) ||
		    (rc = agent_api_server(a, "GET", path, NULL, &next, e)))
			return err_wrap(e, "volume %s", vol);
		json_decref(*v);
		*v = next;
	}
}

/* A string member of o, or dflt. */
static const char *agent_api_str(json_t *o, const char *key, const char *dflt)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : dflt;
}

/* The string map m as kvs (borrowed from m), at most max. */
static size_t agent_api_kvs(json_t *m, struct mount_kv *kvs, size_t max)
{
	const char *key;
	json_t *val;
	size_t n = 0;

	json_object_foreach(m, key, val)
	{
		if (n < max && json_is_string(val)) {
			kvs[n].key = key;
			kvs[n].value = json_string_value(val);
			n++;
		}
	}
	return n;
}

/* Mounts volume v (published as pub, may be NULL) for alloc with st's secrets; fills res. */
static int agent_api_claim_mount(struct agent_api *a, const char *vol, const char *alloc,
				 bool read_only, json_t *v, json_t *pub,
				 const struct agent_api_stage *st, struct mounter_result *res,
				 struct err *e)
{
	json_t *cap = json_array_get(json_object_get(v, "capabilities"), 0);
	json_t *vctx = json_object_get(v, "context"), *pctx = json_object_get(pub, "context");
	size_t nv = json_object_size(vctx), np = json_object_size(pctx);
	struct mounter_request req = {0};
	struct plugin_ref ref = {0};
	struct mount_kv *kvs;
	struct mounter_plugin mp;
	const char *fs;
	int rc;

	if (pub)
		cap = pub;
	req.volume_id = vol;
	req.alloc_id = alloc;
	req.plugin_id = agent_api_str(v, "plugin_id", "");
	req.external_id = agent_api_str(v, "external_id", vol);
	req.usage.read_only = read_only;
	fs = agent_api_str(json_object_get(v, "mount_options"), "fs_type", "");
	req.usage.fs_type = *fs ? fs : NULL;
	req.usage.fs_type = st->fs_type && *st->fs_type ? st->fs_type : req.usage.fs_type;
	req.usage.mount_flags = st->flags;
	req.usage.n_mount_flags = st->n_flags;
	req.secrets = st->secrets;
	req.n_secrets = st->n_secrets;
	if ((rc =
		 mount_access_parse(agent_api_str(cap, "access_mode", ""), &req.usage.access, e)) ||
	    (rc = mount_attachment_parse(agent_api_str(cap, "attachment_mode", "file-system"),
					 &req.usage.attachment, e)))
		return err_wrap(e, "volume %s", vol);
	kvs = calloc(nv + np + 1, sizeof(*kvs));
	if (!kvs)
		return err_set(e, CSID_ENOMEM, "out of memory");
	req.volume_context = kvs;
	req.n_volume_context = agent_api_kvs(vctx, kvs, nv);
	req.publish_context = kvs + req.n_volume_context;
	req.n_publish_context = agent_api_kvs(pctx, kvs + req.n_volume_context, np);
	rc = agent_api_node_plugin(a, req.plugin_id, &ref, e);
	if (rc == 0) {
		mp.plugin_id = req.plugin_id;
		mp.client = ref.client;
		mp.has_stage_unstage = ref.fingerprint.stage_unstage;
		rc = mounter_mount(a->cfg.mounter, &mp, &req, res, e);
	}
	plugin_ref_release(&ref);
	free(kvs);
	return rc;
}

int agent_api_decode_claim(const char *node, const char *body, size_t len, json_t **claim,
			   bool *read_only, struct err *e)
{
	json_t *root = body ? json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL) : NULL, *v;
	const char *key, *alloc;
	int rc = 0;

	*claim = NULL;
	if (!json_is_object(root)) {
		json_decref(root);
		return err_set(e, CSID_EINVAL, "request body must be a JSON object");
	}
	json_object_foreach(root, key, v)
	{
		bool ok = strcmp(key, "owner") == 0; /* decoded by agent_api_owners.c */

		for (int i = 0; agent_api_claim_keys[i]; i++)
			ok = ok || strcmp(key, agent_api_claim_keys[i]) == 0;
		if (!ok) {
			rc = err_set(e, CSID_EINVAL, "unknown field \"%.64s\"", key);
			goto out;
		}
	}
	alloc = json_string_value(json_object_get(root, "alloc_id"));
	if (!alloc) {
		rc = err_set(e, CSID_EINVAL, "alloc_id: required");
		goto out;
	}
	if ((rc = mount_name_check("alloc_id", alloc, e)))
		goto out;
	v = json_object_get(root, "read_only");
	if (v && !json_is_boolean(v)) {
		rc = err_set(e, CSID_EINVAL, "read_only: expected true or false");
		goto out;
	}
	*read_only = json_is_true(v);
	*claim = json_pack("{s:s, s:s, s:s, s:b}", "alloc_id", alloc, "node_id", node, "mode",
			   *read_only ? "read" : "write", "held_by_agent", 1);
	for (int i = 2; *claim && agent_api_claim_keys[i]; i++) {
		v = json_object_get(root, agent_api_claim_keys[i]);
		if (v && !json_is_string(v)) {
			rc = err_set(e, CSID_EINVAL, "%s: expected a string",
				     agent_api_claim_keys[i]);
			goto out;
		}
		if (v)
			json_object_set(*claim, agent_api_claim_keys[i], v);
	}
	if (!*claim)
		rc = err_set(e, CSID_ENOMEM, "out of memory");
out:
	if (rc) {
		json_decref(*claim);
		*claim = NULL;
	}
	json_decref(root);
	return rc;
}

/* The claim's capability defaults to the volume's first one. */
static void agent_api_claim_defaults(json_t *claim, json_t *v)
{
	json_t *cap = json_array_get(json_object_get(v, "capabilities"), 0);

	if (!json_object_get(claim, "access_mode"))
		json_object_set_new(claim, "access_mode",
				    json_string(agent_api_str(cap, "access_mode", "")));
	if (!json_object_get(claim, "attachment_mode"))
		json_object_set_new(
		    claim, "attachment_mode",
		    json_string(agent_api_str(cap, "attachment_mode", "file-system")));
}

/* Waits (plugin_wait_ms) for the volume's node plugin to be healthy here. */
static int agent_api_plugin_ready(struct agent_api *a, const char *plugin, struct err *e)
{
	struct plugin_ref ref = {0};
	int rc = agent_api_node_plugin(a, plugin, &ref, e);

	plugin_ref_release(&ref);
	return rc;
}

/*
 * The claim, retried with backoff for AGENT_API_CLAIM_WAIT_MS while the
 * server answers failed_precondition (the volume is not ready yet, or
 * the node's fingerprint has not shown its plugin healthy yet).
 */
static int agent_api_claim_put(struct agent_api *a, const char *path, json_t *claim, json_t **v,
			       struct err *e)
{
	int64_t deadline = clock_now_ms(clock_real()) + AGENT_API_CLAIM_WAIT_MS;
	int64_t pause = AGENT_API_RETRY_MIN_MS;
	int rc;

	for (;;) {
		rc = agent_api_server(a, "PUT", path, claim, v, e);
		if (rc != CSID_EPRECOND || clock_now_ms(clock_real()) + pause > deadline ||
		    agent_api_release_stopping(a))
			return rc;
		agent_api_pause_ms(pause);
		pause = pause * 2 > AGENT_API_RETRY_MAX_MS ? AGENT_API_RETRY_MAX_MS : pause * 2;
	}
}

int agent_api_volume_mount(struct agent_api *a, const char *vol, const char *body, size_t len,
			   json_t **out, struct err *e)
{
	char path[AGENT_API_URL_MAX];
	struct mounter_result *res = NULL;
	struct agent_api_stage *st = NULL;
	json_t *claim = NULL, *v = NULL, *pub = NULL;
	struct owners_spec owner;
	bool read_only = false, owned = false, held = false;
	const char *alloc;
	int rc;

	if ((rc = mount_name_check("volume id", vol, e)) ||
	    (rc = agent_api_decode_claim(a->node_name, body, len, &claim, &read_only, e)))
		return rc;
	alloc = json_string_value(json_object_get(claim, "alloc_id"));
	/* The owner is checked before anything is claimed. */
	if ((rc = agent_api_owner_check(a, body, len, &owner, &owned, e)))
		goto out;
	/* Reported as held before the claim goes out (server/server_gc.h). */
	if ((rc = held_allocs_begin(a->cfg.held, vol, alloc, e)))
		goto out;
	held = true;
	if ((rc = agent_api_volume_path(vol, "", path, sizeof(path), e)) ||
	    (rc = agent_api_server(a, "GET", path, NULL, &v, e)))
		goto out;
	agent_api_claim_defaults(claim, v);
	rc = agent_api_plugin_ready(a, agent_api_str(v, "plugin_id", ""), e);
	json_decref(v);
	v = NULL;
	if (rc == 0)
		rc = agent_api_volume_path(vol, "/claim", path, sizeof(path), e);
	if (rc == 0)
		rc = agent_api_claim_put(a, path, claim, &v, e);
	if (rc) {
		err_wrap(e, "claim %s for %s", vol, alloc);
		goto out;
	}
	log_info("msg=\"volume claimed\" volume=%s alloc=%s node=%s", vol, alloc, a->node_name);
	if ((rc = agent_api_wait_published(a, vol, &v, &pub, e)) ||
	    (rc = agent_api_stage_get(a, vol, alloc, &st, e)))
		goto out;
	res = calloc(1, sizeof(*res));
	if (!res) {
		rc = err_set(e, CSID_ENOMEM, "out of memory");
		goto out;
	}
	rc = agent_api_claim_mount(a, vol, alloc, read_only, v, pub, st, res, e);
	if (rc) {
		err_wrap(e, "claimed, not mounted (unmount releases the claim)");
		goto out;
	}
	/* Once mounted: a mount of the claim flow, unmounted if its claim is released. */
	if ((rc = agent_api_claimed_mark(a, vol, alloc, true, e))) {
		err_wrap(e, "mounted, but not marked as claimed (unmount releases the claim)");
		goto out;
	}
	if (owned && (rc = agent_api_owner_record(a, vol, alloc, &owner, e))) {
		err_wrap(e, "mounted, but its owner is not recorded (unmount releases the claim)");
		goto out;
	}
	*out = json_pack("{s:s, s:s, s:s, s:s, s:s, s:b}", "volume_id", vol, "alloc_id", alloc,
			 "node_id", a->node_name, "path", res->target, "source", res->source,
			 "is_device", res->is_device);
	if (!*out)
		rc = err_set(e, CSID_ENOMEM, "out of memory");
out:
	if (held)
		held_allocs_end(a->cfg.held, vol, alloc);
	agent_api_stage_free(st);
	free(res);
	json_decref(claim);
	json_decref(v);
	return rc;
}

int agent_api_release_send(struct agent_api *a, const char *vol, const char *alloc,
			   const char *reason, bool patient, struct err *e)
{
	char path[AGENT_API_URL_MAX];
	json_t *body = json_pack("{s:s, s:s*}", "alloc_id", alloc, "reason", reason), *doc = NULL;
	int rc;

	if (!body)
		return err_set(e, CSID_ENOMEM, "out of memory");
	rc = agent_api_volume_path(vol, "/release", path, sizeof(path), e);
	if (rc == 0)
		rc = agent_api_server_try(a, "PUT", path, body, patient, &doc, e);
	json_decref(body);
	json_decref(doc);
	return rc;
}

/* agent_api_volume_unmount once the allocation is reported as held. */
static int agent_api_volume_unmount_held(struct agent_api *a, const char *vol, const char *alloc,
					 const char *reason, json_t **out, struct err *e)
{
	bool unmounted = false;
	struct err ignored;
	int rc;

	rc = agent_api_unmount_one(a, vol, alloc, e);
	if (rc && rc != CSID_ENOTFOUND)
		return err_wrap(e, "the claim is kept");
	unmounted = rc == 0;
	/* Recorded before it is sent: an agent that stops now still sends it. */
	if ((rc = agent_api_release_record(a, vol, alloc, reason, true, e)))
		return err_wrap(e, "%s", unmounted ? "unmounted" : "nothing mounted");
	/* Recorded: one try of each server, then the retry thread's backoff. */
	rc = agent_api_release_send(a, vol, alloc, reason, !a->rel_db, e);
	/* Kept too when refused for who sent it (agent_api_release.c says why). */
	if ((rc == CSID_EUNAVAIL || rc == CSID_EPERM) && a->rel_db) {
		char q[600];

		log_warn("msg=\"release pending: retried in the background\" volume=%s alloc=%s "
			 "error=%s",
			 vol, alloc, log_q(q, sizeof(q), e->msg));
		agent_api_release_poke(a);
		agent_api_owner_forget(a, vol, alloc);
		*out = json_pack("{s:s, s:s, s:b, s:b, s:b, s:s}", "volume_id", vol, "alloc_id",
				 alloc, "unmounted", unmounted, "released", 0, "release_pending", 1,
				 "release_error", e->msg);
		err_clear(e);
		return *out ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
	}
	agent_api_release_record(a, vol, alloc, NULL, false, &ignored);
	/*
	 * The server knows no claim of alloc (a mount stopped before its
	 * claim, or the volume is gone): nothing is held, the unmount is done.
	 */
	if (rc == CSID_ENOTFOUND) {
		char q[600];

		log_info("msg=\"no claim to release\" volume=%s alloc=%s unmounted=%d error=%s",
			 vol, alloc, unmounted, log_q(q, sizeof(q), e->msg));
		agent_api_owner_forget(a, vol, alloc);
		err_clear(e);
		*out = json_pack("{s:s, s:s, s:b, s:b, s:b}", "volume_id", vol, "alloc_id", alloc,
				 "unmounted", unmounted, "released", 0, "release_pending", 0);
		return *out ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
	}
	if (rc) {
		err_wrap(e, "%s; release %s for %s (unmount again to retry)",
			 unmounted ? "unmounted" : "nothing mounted", vol, alloc);
		return rc;
	}
	log_info("msg=\"claim released\" volume=%s alloc=%s unmounted=%d", vol, alloc, unmounted);
	agent_api_owner_forget(a, vol, alloc);
	*out = json_pack("{s:s, s:s, s:b, s:b, s:b}", "volume_id", vol, "alloc_id", alloc,
			 "unmounted", unmounted, "released", 1, "release_pending", 0);
	return *out ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
}

int agent_api_volume_unmount(struct agent_api *a, const char *vol, const char *alloc,
			     const char *reason, json_t **out, struct err *e)
{
	int rc;

	if ((rc = mount_name_check("volume id", vol, e)) ||
	    (rc = mount_name_check("alloc id", alloc, e)))
		return rc;
	/*
	 * Reported as held until the release went (server/server_gc.h): a
	 * report without the allocation must not reach the server before
	 * the release, whose reason the claim is to keep.
	 */
	if ((rc = held_allocs_begin(a->cfg.held, vol, alloc, e)))
		return rc;
	rc = agent_api_volume_unmount_held(a, vol, alloc, reason, out, e);
	held_allocs_end(a->cfg.held, vol, alloc);
	return rc;
}
