/*
 * Volume and snapshot resources of the server API: translate each request
 * into one server_* call and its result into the model's API encoding
 * (which never holds a secret or a mount flag). Lists are written as
 * text from the encoded objects, without building a JSON tree of them.
 * The arenas that decoded volumes and snapshots held their secrets: they
 * are wiped when freed (arena_wipe_free).
 */
#include "api/server_api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growing text buffer for list answers. */
struct vol_buf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void vol_buf_put(struct vol_buf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *np;

		while (cap < b->len + n + 1)
			cap *= 2;
		np = realloc(b->p, cap);
		if (!np) {
			b->oom = true;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void vol_buf_str(struct vol_buf *b, const char *s)
{
	vol_buf_put(b, s, strlen(s));
}

/* Appends s as a JSON string (or null). */
static void vol_buf_json_str(struct vol_buf *b, const char *s)
{
	json_t *j;
	char *t;

	if (!s) {
		vol_buf_str(b, "null");
		return;
	}
	j = json_string(s);
	t = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
	if (t)
		vol_buf_str(b, t);
	else
		b->oom = true;
	free(t);
	json_decref(j);
}

static int vol_buf_finish(struct vol_buf *b, struct http_reply *rep, struct err *e)
{
	if (b->oom) {
		free(b->p);
		return err_set(e, CSID_ENOMEM, "out of memory");
	}
	rep->text = b->p;
	return 0;
}

static int vol_put_volume(struct vol_buf *b, const void *item, struct err *e)
{
	const struct model_volume *v = item;
	char *t;
	size_t n;
	int rc = model_volume_encode(v, MODEL_VIEW_API, &t, &n, e);

	if (rc)
		return rc;
	vol_buf_put(b, t, n);
	free(t);
	return 0;
}

static int vol_put_snapshot(struct vol_buf *b, const void *item, struct err *e)
{
	const struct model_snapshot *s = item;
	char *t;
	size_t n;
	int rc = model_snapshot_encode(s, MODEL_VIEW_API, &t, &n, e);

	if (rc)
		return rc;
	vol_buf_put(b, t, n);
	free(t);
	return 0;
}

/* Answers {"<key>": <volume>, "skipped": "..."} or the volume alone. */
static int vol_answer(const struct model_volume *v, const char *skipped, struct http_reply *rep,
		      struct err *e)
{
	struct vol_buf b = {0};
	int rc;

	if (skipped)
		vol_buf_str(&b, "{\"volume\":");
	rc = vol_put_volume(&b, v, e);
	if (rc) {
		free(b.p);
		return rc;
	}
	if (skipped) {
		vol_buf_str(&b, ",\"skipped\":");
		vol_buf_json_str(&b, skipped);
		vol_buf_str(&b, "}");
	}
	server_api_set_index(rep, v->modify_index);
	return vol_buf_finish(&b, rep, e);
}

static int vol_per_page(const struct http_request *req, size_t *out, struct err *e)
{
	uint64_t pp;
	int rc = http_query_u64(req, "per_page", SERVER_PER_PAGE_DEFAULT, &pp, e);

	if (rc)
		return rc;
	if (pp == 0 || pp > SERVER_PER_PAGE_MAX)
		return err_set(e, CSID_EINVAL, "per_page: between 1 and %d", SERVER_PER_PAGE_MAX);
	*out = (size_t)pp;
	return 0;
}

/* Checks an optional query argument that names an ID. */
static int vol_query_id(const struct http_request *req, const char *key, const char **out,
			struct err *e)
{
	*out = http_query(req, key);
	if (!*out || !(*out)[0]) {
		*out = NULL;
		return 0;
	}
	if (strcmp(key, "plugin") == 0)
		return model_plugin_id_check(*out, e);
	return model_id_check(key, *out, strlen(*out), e);
}

/* The paging arguments of a list: per_page, prefix, next_token. */
struct vol_page {
	size_t per_page;
	const char *prefix;
	const char *next_token;
};

static int vol_page_args(const struct http_request *req, struct vol_page *pg, struct err *e)
{
	int rc = vol_per_page(req, &pg->per_page, e);

	if (rc)
		return rc;
	pg->prefix = http_query(req, "prefix");
	pg->next_token = http_query(req, "next_token");
	if ((pg->prefix && strlen(pg->prefix) > MODEL_ID_MAX) ||
	    (pg->next_token && strlen(pg->next_token) > 4 * MODEL_ID_MAX))
		return err_set(e, CSID_EINVAL, "prefix or next_token: too long");
	return 0;
}

/* Writes {"<key>": [items...], "next_token": next} as the answer, at index. */
static int vol_page_answer(const char *key, void *const *items, size_t n,
			   int (*put)(struct vol_buf *b, const void *item, struct err *e),
			   const char *next, uint64_t index, struct http_reply *rep, struct err *e)
{
	struct vol_buf b = {0};
	int rc = 0;

	vol_buf_str(&b, "{\"");
	vol_buf_str(&b, key);
	vol_buf_str(&b, "\":[");
	for (size_t i = 0; i < n && !rc; i++) {
		if (i)
			vol_buf_str(&b, ",");
		rc = put(&b, items[i], e);
	}
	vol_buf_str(&b, "],\"next_token\":");
	vol_buf_json_str(&b, next);
	vol_buf_str(&b, "}");
	if (rc) {
		free(b.p);
		return rc;
	}
	server_api_set_index(rep, index);
	return vol_buf_finish(&b, rep, e);
}

int server_api_volumes(struct server_api *api, const struct http_request *req,
		       struct http_reply *rep, struct err *e)
{
	struct server_volume_filter f = {0};
	struct model_volume **vols = NULL;
	struct vol_page pg;
	struct arena *a;
	char *next = NULL;
	uint64_t index = 0;
	size_t n = 0;
	int rc;

	if (strcmp(req->method, "GET") != 0) {
		rep->allow = "GET";
		return HTTP_METHOD_NOT_ALLOWED;
	}
	rc = vol_query_id(req, "plugin", &f.plugin_id, e);
	if (!rc)
		rc = vol_query_id(req, "node", &f.node_id, e);
	if (!rc)
		rc = vol_page_args(req, &pg, e);
	if (!rc)
		rc = server_api_block(api, req, STORE_VOLUME, NULL, e);
	if (rc)
		return rc;
	f.per_page = pg.per_page;
	f.prefix = pg.prefix;
	f.next_token = pg.next_token;
	a = arena_new();
	if (!a)
		return err_set(e, CSID_ENOMEM, "out of memory");
	rc = server_volume_list(api->server, &f, a, &vols, &n, &next, &index, e);
	if (!rc)
		rc = vol_page_answer("volumes", (void *const *)vols, n, vol_put_volume, next, index,
				     rep, e);
	arena_wipe_free(a);
	return rc;
}

/* Decodes and validates the spec of PUT /v1/volume/<id>[/create]. */
static int vol_spec(struct arena *a, const struct http_request *req, const char *id,
		    bool for_create, struct model_volume **out, struct err *e)
{
	struct model_volume *v;
	int rc = model_volume_spec_decode(a, req->body, req->len, false, &v, e);

	if (rc)
		return rc;
	if (v->id && strcmp(v->id, id) != 0)
		return err_set(e, CSID_EINVAL, "id: does not match the ID in the path");
	if (!v->id) {
		v->id = arena_strdup(a, id);
		if (!v->id)
			return err_set(e, CSID_ENOMEM, "out of memory");
	}
	rc = model_volume_validate(v, for_create, e);
	if (!rc)
		*out = v;
	return rc;
}

/* The agent instance a request is made for (X-Csid-Node-Instance), or NULL: an operator's. */
static const char *vol_node_instance(const struct http_request *req)
{
	const char *inst = http_header(req, HTTP_NODE_INSTANCE_HEADER);

	return inst && inst[0] ? inst : NULL;
}

/* The active claim of alloc on v, or NULL. */
static const struct model_claim *vol_claim_of(const struct model_volume *v, const char *alloc)
{
	for (size_t i = 0; i < v->nclaims; i++)
		if (strcmp(v->claims[i].alloc_id, alloc) == 0)
			return &v->claims[i];
	return NULL;
}

/*
 * A release an agent sends for its node: the claim's node must be held
 * by the agent's instance. A claim that is gone, or a volume that is,
 * is left to the release itself (releasing nothing is done already).
 */
static int vol_release_check(struct server_api *api, const struct http_request *req, const char *id,
			     const char *alloc, struct arena *a, struct err *e)
{
	const char *inst = vol_node_instance(req);
	const struct model_claim *c;
	struct model_volume *v;
	int rc;

	if (!inst)
		return 0;
	rc = server_volume_get(api->server, id, a, &v, e);
	if (rc == CSID_ENOTFOUND) {
		err_clear(e);
		return 0;
	}
	if (rc)
		return rc;
	c = vol_claim_of(v, alloc);
	if (!c)
		return 0;
	return server_node_instance_check(api->server, c->node_id, inst, "release", false, e);
}

/*
 * GET /v1/volume/<id>/node-stage?alloc_id=A: what the node needs to stage
 * and publish, which the API view never shows: {"secrets", "mount_flags",
 * "fs_type"}. Only for the agent of the node where A holds an active
 * claim; the answer is wiped once sent and never logged.
 */
static int vol_node_stage(struct server_api *api, const struct http_request *req, const char *id,
			  struct http_reply *rep, struct arena *a, struct err *e)
{
	const char *inst = vol_node_instance(req), *alloc = http_query(req, "alloc_id");
	const struct model_claim *c;
	struct model_volume *v;
	json_t *doc, *sec, *flags;
	int rc;

	if (strcmp(req->method, "GET") != 0) {
		rep->allow = "GET";
		return HTTP_METHOD_NOT_ALLOWED;
	}
	if (!http_request_private(req) && !api->plaintext_secrets) {
		char peer[48];

		return err_set(e, CSID_EPERM,
			       "volume %s: node-stage secrets are not sent over plaintext HTTP to "
			       "%s: serve the API over HTTPS (http.tls_cert_file and "
			       "http.tls_key_file in the server's config, https:// in the agents' "
			       "servers), or set http.allow_plaintext_secrets to accept the risk",
			       id, http_request_peer(req, peer, sizeof(peer)));
	}
	if (!alloc || !alloc[0])
		return err_set(e, CSID_EINVAL, "alloc_id: required");
	if ((rc = model_id_check("alloc_id", alloc, strlen(alloc), e)))
		return rc;
	if (!inst)
		return err_set(e, CSID_EPERM,
			       "volume %s: node-stage is only for the agent of the claim's node "
			       "(X-Csid-Node-Instance header)",
			       id);
	if ((rc = server_volume_get(api->server, id, a, &v, e)))
		return rc;
	c = vol_claim_of(v, alloc);
	if (!c || c->state != MODEL_CLAIM_CLAIMED)
		return err_set(e, CSID_ENOTFOUND, "volume %s: allocation %s holds no active claim",
			       id, alloc);
	if ((rc =
		 server_node_instance_check(api->server, c->node_id, inst, "node-stage", false, e)))
		return err_wrap(e, "volume %s", id);
	sec = json_object();
	flags = json_array();
	for (size_t i = 0; sec && i < v->secrets.n; i++)
		json_object_set_new(sec, v->secrets.kv[i].key, json_string(v->secrets.kv[i].value));
	for (size_t i = 0; flags && i < v->nmount_flags; i++)
		json_array_append_new(flags, json_string(v->mount_flags[i]));
	doc = json_pack("{s:o, s:o, s:s?}", "secrets", sec, "mount_flags", flags, "fs_type",
			v->fs_type);
	rep->text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	rep->wipe = true;
	model_json_wipe(doc);
	json_decref(doc);
	return rep->text ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
}

/* Routes /v1/volume/<id>[/<action>]. */
int server_api_volume(struct server_api *api, const struct http_request *req,
		      struct http_reply *rep, struct err *e)
{
	const char *m = req->method, *rest;
	char id[MODEL_ID_MAX + 1], *skipped = NULL, *alloc = NULL, *node = NULL, *reason = NULL;
	struct model_volume *v = NULL, *spec;
	struct model_claim_request claim;
	struct model_map mut;
	struct arena *a;
	int64_t cap;
	bool force = false;
	int rc;

	rest = http_path_segment(req->url, "/v1/volume/", id, sizeof(id));
	if (!rest)
		return err_set(e, CSID_EINVAL, "volume id: empty or longer than %d bytes",
			       MODEL_ID_MAX);
	rc = model_id_check("volume id", id, strlen(id), e);
	if (rc)
		return rc;
	a = arena_new();
	if (!a)
		return err_set(e, CSID_ENOMEM, "out of memory");
	if (!rest[0]) {
		if (strcmp(m, "GET") == 0) {
			rc = server_api_block(api, req, STORE_VOLUME, id, e);
			if (!rc)
				rc = server_volume_get(api->server, id, a, &v, e);
		} else if (strcmp(m, "PUT") == 0) {
			rc = vol_spec(a, req, id, false, &spec, e);
			if (!rc)
				rc = server_volume_register(api->server, spec, a, &v, e);
		} else if (strcmp(m, "DELETE") == 0) {
			rc = http_query_bool(req, "force", &force, e);
			if (!rc)
				rc = server_volume_deregister(api->server, id, force, a, &skipped,
							      e);
			if (!rc) {
				json_t *doc = json_pack("{s:s, s:b, s:s?}", "id", id,
							"deregistered", 1, "skipped", skipped);

				rep->doc = doc;
				rc = doc ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
				arena_wipe_free(a);
				return rc;
			}
		} else {
			rep->allow = "GET, PUT, DELETE";
			rc = HTTP_METHOD_NOT_ALLOWED;
		}
	} else if (strcmp(rest, "/create") == 0) {
		if (strcmp(m, "PUT") == 0) {
			rc = vol_spec(a, req, id, true, &spec, e);
			if (!rc)
				rc = server_volume_create(api->server, spec, a, &v, e);
		} else {
			rep->allow = "PUT";
			rc = HTTP_METHOD_NOT_ALLOWED;
		}
	} else if (strcmp(rest, "/node-stage") == 0) {
		rc = vol_node_stage(api, req, id, rep, a, e);
	} else if (strcmp(rest, "/delete") == 0) {
		if (strcmp(m, "DELETE") == 0) {
			rc = server_volume_delete(api->server, id, a, &v, e);
		} else {
			rep->allow = "DELETE";
			rc = HTTP_METHOD_NOT_ALLOWED;
		}
	} else if (strcmp(m, "PUT") != 0 &&
		   (strcmp(rest, "/claim") == 0 || strcmp(rest, "/release") == 0 ||
		    strcmp(rest, "/detach") == 0 || strcmp(rest, "/expand") == 0 ||
		    strcmp(rest, "/modify") == 0 || strcmp(rest, "/cancel") == 0 ||
		    strcmp(rest, "/node-expanded") == 0)) {
		rep->allow = "PUT";
		rc = HTTP_METHOD_NOT_ALLOWED;
	} else if (strcmp(rest, "/claim") == 0) {
		rc = server_api_decode_claim(a, req->body, req->len, &claim, e);
		if (!rc)
			rc = server_node_instance_check(api->server, claim.node_id,
							vol_node_instance(req), "claim", true, e);
		if (!rc)
			rc = server_volume_claim(api->server, id, &claim, a, &v, e);
	} else if (strcmp(rest, "/release") == 0) {
		rc = server_api_decode_release(a, req->body, req->len, &alloc, &force, &reason, e);
		if (!rc)
			rc = vol_release_check(api, req, id, alloc, a, e);
		if (!rc)
			rc = server_volume_release_why(api->server, id, alloc, force, reason, a, &v,
						       &skipped, e);
	} else if (strcmp(rest, "/detach") == 0) {
		rc = server_api_decode_detach(a, req->body, req->len, &node, e);
		if (!rc)
			rc = server_volume_detach(api->server, id, node, a, &v, &skipped, e);
	} else if (strcmp(rest, "/expand") == 0) {
		rc = server_api_decode_expand(a, req->body, req->len, &cap, e);
		if (!rc)
			rc = server_volume_expand(api->server, id, cap, a, &v, e);
	} else if (strcmp(rest, "/node-expanded") == 0) {
		rc = server_api_decode_node_expanded(a, req->body, req->len, &node, &cap, e);
		if (!rc)
			rc = server_node_instance_check(api->server, node, vol_node_instance(req),
							"node expanded", false, e);
		if (!rc)
			rc = server_volume_node_expanded(api->server, id, node, cap, a, &v, e);
	} else if (strcmp(rest, "/modify") == 0) {
		rc = server_api_decode_modify(a, req->body, req->len, &mut, e);
		if (!rc)
			rc = server_volume_modify(api->server, id, &mut, a, &v, e);
	} else if (strcmp(rest, "/cancel") == 0) {
		rc = server_volume_cancel(api->server, id, a, &v, &skipped, e);
	} else {
		rc = err_set(e, CSID_ENOTFOUND, "no such endpoint: %.200s", req->url);
	}
	if (!rc && v)
		rc = vol_answer(v, skipped, rep, e);
	arena_wipe_free(a);
	return rc;
}

int server_api_snapshots(struct server_api *api, const struct http_request *req,
			 struct http_reply *rep, struct err *e)
{
	struct model_snapshot **snaps = NULL;
	const char *volume = NULL;
	struct vol_page pg;
	struct arena *a;
	char *next = NULL;
	uint64_t index = 0;
	size_t n = 0;
	int rc;

	if (strcmp(req->method, "GET") != 0) {
		rep->allow = "GET";
		return HTTP_METHOD_NOT_ALLOWED;
	}
	rc = vol_query_id(req, "volume", &volume, e);
	if (!rc)
		rc = vol_page_args(req, &pg, e);
	if (!rc)
		rc = server_api_block(api, req, STORE_SNAPSHOT, NULL, e);
	if (rc)
		return rc;
	a = arena_new();
	if (!a)
		return err_set(e, CSID_ENOMEM, "out of memory");
	rc = server_snapshot_list(api->server, volume, pg.prefix, pg.per_page, pg.next_token, a,
				  &snaps, &n, &next, &index, e);
	if (!rc)
		rc = vol_page_answer("snapshots", (void *const *)snaps, n, vol_put_snapshot, next,
				     index, rep, e);
	arena_wipe_free(a);
	return rc;
}

int server_api_snapshot(struct server_api *api, const struct http_request *req,
			struct http_reply *rep, struct err *e)
{
	const char *m = req->method, *rest;
	struct model_snapshot *s = NULL, *spec;
	struct vol_buf b = {0};
	char id[MODEL_ID_MAX + 1];
	struct arena *a;
	int rc;

	rest = http_path_segment(req->url, "/v1/snapshot/", id, sizeof(id));
	if (!rest)
		return err_set(e, CSID_EINVAL, "snapshot id: empty or longer than %d bytes",
			       MODEL_ID_MAX);
	if (rest[0])
		return err_set(e, CSID_ENOTFOUND, "no such endpoint: %.200s", req->url);
	rc = model_id_check("snapshot id", id, strlen(id), e);
	if (rc)
		return rc;
	a = arena_new();
	if (!a)
		return err_set(e, CSID_ENOMEM, "out of memory");
	if (strcmp(m, "GET") == 0) {
		rc = server_api_block(api, req, STORE_SNAPSHOT, id, e);
		if (!rc)
			rc = server_snapshot_get(api->server, id, a, &s, e);
	} else if (strcmp(m, "PUT") == 0) {
		rc = server_api_decode_snapshot(a, req->body, req->len, id, &spec, e);
		if (!rc)
			rc = server_snapshot_create(api->server, spec, a, &s, e);
	} else if (strcmp(m, "DELETE") == 0) {
		rc = server_snapshot_delete(api->server, id, a, &s, e);
	} else {
		rep->allow = "GET, PUT, DELETE";
		rc = HTTP_METHOD_NOT_ALLOWED;
	}
	if (!rc && s) {
		rc = vol_put_snapshot(&b, s, e);
		if (!rc) {
			server_api_set_index(rep, s->modify_index);
			rc = vol_buf_finish(&b, rep, e);
		} else {
			free(b.p);
		}
	}
	arena_wipe_free(a);
	return rc;
}
