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

#include "util/clock.h"
#include "util/wipe.h"

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
 * Whether node-stage data may go to this request: an agent's (the
 * X-Csid-Node-Instance header; whose node it holds is checked against the
 * claim) over a private transport (or the operator accepted the risk).
 */
static int vol_stage_allowed(struct server_api *api, const struct http_request *req, const char *id,
			     struct err *e)
{
	if (!http_request_private(req) && !api->plaintext_secrets) {
		char peer[48];

		return err_set(e, CSID_EPERM,
			       "volume %s: node-stage secrets are not sent over plaintext HTTP to "
			       "%s: serve the API over HTTPS (http.tls_cert_file and "
			       "http.tls_key_file in the server's config, https:// in the agents' "
			       "servers), or set http.allow_plaintext_secrets to accept the risk",
			       id, http_request_peer(req, peer, sizeof(peer)));
	}
	if (!vol_node_instance(req))
		return err_set(e, CSID_EPERM,
			       "volume %s: node-stage is only for the agent of the claim's node "
			       "(X-Csid-Node-Instance header)",
			       id);
	return 0;
}

/* v's node-stage data {"secrets", "mount_flags", "fs_type"}, or NULL; wipe it once used. */
static json_t *vol_stage_doc(const struct model_volume *v)
{
	json_t *sec = json_object(), *flags = json_array();

	for (size_t i = 0; sec && i < v->secrets.n; i++)
		json_object_set_new(sec, v->secrets.kv[i].key, json_string(v->secrets.kv[i].value));
	for (size_t i = 0; flags && i < v->nmount_flags; i++)
		json_array_append_new(flags, json_string(v->mount_flags[i]));
	return json_pack("{s:o, s:o, s:s?}", "secrets", sec, "mount_flags", flags, "fs_type",
			 v->fs_type);
}

/* Answers doc (taken) holding node-stage data: wiped once sent, and here. */
static int vol_answer_secret(json_t *doc, struct http_reply *rep, struct err *e)
{
	rep->text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	rep->wipe = true;
	model_json_wipe(doc);
	json_decref(doc);
	return rep->text ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
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
	int rc;

	if (strcmp(req->method, "GET") != 0) {
		rep->allow = "GET";
		return HTTP_METHOD_NOT_ALLOWED;
	}
	if ((rc = vol_stage_allowed(api, req, id, e)))
		return rc;
	if (!alloc || !alloc[0])
		return err_set(e, CSID_EINVAL, "alloc_id: required");
	if ((rc = model_id_check("alloc_id", alloc, strlen(alloc), e)))
		return rc;
	if ((rc = server_volume_get(api->server, id, a, &v, e)))
		return rc;
	c = vol_claim_of(v, alloc);
	if (!c || c->state != MODEL_CLAIM_CLAIMED)
		return err_set(e, CSID_ENOTFOUND, "volume %s: allocation %s holds no active claim",
			       id, alloc);
	if ((rc =
		 server_node_instance_check(api->server, c->node_id, inst, "node-stage", false, e)))
		return err_wrap(e, "volume %s", id);
	return vol_answer_secret(vol_stage_doc(v), rep, e);
}

static const char *vol_progress_name(enum server_claim_progress p)
{
	switch (p) {
	case SERVER_CLAIM_PUBLISHED:
		return "published";
	case SERVER_CLAIM_NO_PUBLICATION:
		return "not-required";
	default:
		return "publishing";
	}
}

/*
 * The node's view of v for a claim of node (?view=node): what an agent
 * mounts with (IDs, capacity, volume context, mount options, the expansion
 * flag, the status) and only node's claims and publication, in a. The
 * other nodes' claims, the spec's parameters and topology, and the past
 * claims are left out: an agent parses the answer of every mount. NULL
 * when out of memory.
 */
static struct model_volume *vol_node_view(const struct model_volume *v, const char *node,
					  struct arena *a)
{
	struct model_volume *b = arena_alloc(a, sizeof(*b));

	if (!b)
		return NULL;
	memset(b, 0, sizeof(*b));
	b->id = v->id;
	b->name = v->name;
	b->plugin_id = v->plugin_id;
	b->external_id = v->external_id;
	b->fs_type = v->fs_type;
	b->context = v->context;
	b->state = v->state;
	b->capacity = v->capacity;
	b->node_expansion_required = v->node_expansion_required;
	b->created_ms = v->created_ms;
	b->updated_ms = v->updated_ms;
	b->create_index = v->create_index;
	b->modify_index = v->modify_index;
	b->status = v->status;
	b->schedulable = v->schedulable;
	b->plugin_health = v->plugin_health;
	b->plugin_registered = v->plugin_registered;
	b->claims = v->nclaims ? arena_alloc(a, v->nclaims * sizeof(*b->claims)) : NULL;
	b->pubs = v->npubs ? arena_alloc(a, v->npubs * sizeof(*b->pubs)) : NULL;
	if ((v->nclaims && !b->claims) || (v->npubs && !b->pubs))
		return NULL;
	for (size_t i = 0; i < v->nclaims; i++)
		if (v->claims[i].node_id && strcmp(v->claims[i].node_id, node) == 0)
			b->claims[b->nclaims++] = v->claims[i];
	for (size_t i = 0; i < v->npubs; i++)
		if (v->pubs[i].node_id && strcmp(v->pubs[i].node_id, node) == 0)
			b->pubs[b->npubs++] = v->pubs[i];
	return b;
}

/*
 * The answer of a claim that waited: {"volume", "claim", "publication"
 * (null: none), "publication_state", "node_stage" (with stage: the
 * claim's node is published or needs no publication)}. checked: this
 * run of the request checked the node's instance already (the claim's
 * check, stricter than node-stage's), so node_stage needs no second read
 * of the node. node_view: the volume as vol_node_view shows it.
 */
static int vol_claim_answer(struct server_api *api, const struct http_request *req,
			    const struct model_volume *v, const struct model_claim_request *claim,
			    enum server_claim_progress prog, bool stage, bool checked,
			    bool node_view, struct arena *a, struct http_reply *rep, struct err *e)
{
	const struct model_volume *shown = v;
	char *text = NULL;
	size_t n = 0;
	int rc;

	if (node_view && !(shown = vol_node_view(v, claim->node_id, a)))
		return err_set(e, CSID_ENOMEM, "out of memory");
	if (stage && !checked &&
	    (rc = server_node_instance_check(api->server, claim->node_id, vol_node_instance(req),
					     "node-stage", false, e)))
		return err_wrap(e, "volume %s", v->id);
	/* Written in one go: no tree of the volume built, parsed and dumped again. */
	if ((rc = model_claim_answer_encode(shown, model_volume_claim(shown, claim->alloc_id),
					    model_volume_pub(shown, claim->node_id),
					    vol_progress_name(prog), stage ? v : NULL, &text, &n,
					    e)))
		return rc;
	server_api_set_index(rep, v->modify_index);
	rep->text = text;
	rep->wipe = stage;
	return 0;
}

/*
 * The first run of a claim that waits: the publication usually follows
 * the claim within milliseconds, so the worker waits for the store to
 * move, for at most SERVER_API_CLAIM_SPIN_MS (and not past deadline), before the request parks
 * (the wake-ups of parked requests are coalesced, HTTP_WAKE_GAP_MS apart,
 * which would add tens of milliseconds to most mounts). *v and *prog are
 * updated; it stops early when a publish attempt failed (stamp moved).
 */
static int vol_claim_spin(struct server_api *api, const char *id,
			  const struct model_claim_request *claim, struct arena *a, uint64_t stamp,
			  int64_t deadline, struct model_volume **v,
			  enum server_claim_progress *prog, struct err *e)
{
	struct clock *clk = clock_real();
	int64_t until = clock_now_ms(clk) + SERVER_API_CLAIM_SPIN_MS;
	uint64_t seen = (*v)->modify_index;
	int rc = 0;

	if (until > deadline)
		until = deadline;
	while (rc == 0 && *prog == SERVER_CLAIM_PUBLISHING && !atomic_load(&api->stopping) &&
	       clock_now_ms(clk) < until &&
	       (server_status_stamp(api->server, STORE_VOLUME, id) | 1) == stamp) {
		uint64_t now = store_wait(api->store, seen, until - clock_now_ms(clk));

		/* The wait ended (or the store closes). */
		if (now == seen)
			break;
		seen = now;
		rc = server_volume_get(api->server, id, a, v, e);
		if (rc == 0)
			rc = server_volume_claim_progress(api->server, *v, claim->alloc_id,
							  claim->node_id, prog, e);
	}
	return rc;
}

/* A claim that waits, as told by server_volume_claim_run when its node is published. */
struct vol_claim_now {
	struct server_api *api;
	const struct http_request *req;
	const struct model_claim_request *claim;
	struct http_reply *rep;
	struct arena *a;
	bool stage, node_view;
	bool sent; /* answered (http_answer_now): req, rep and the handler's err are gone */
};

/*
 * ControllerPublishVolume to the claim's node succeeded, not written yet
 * (server_claim_published_fn): the answer goes now, and the write after
 * it overlaps the agent's NodeStageVolume. A failure here changes
 * nothing: the request answers after the write, as it would have.
 */
static void vol_claim_published(void *ctx, struct model_volume *v)
{
	struct vol_claim_now *n = ctx;
	enum server_claim_progress prog;
	struct err e;

	err_clear(&e);
	if (server_volume_claim_progress(n->api->server, v, n->claim->alloc_id, n->claim->node_id,
					 &prog, &e) ||
	    prog == SERVER_CLAIM_PUBLISHING)
		return;
	if (vol_claim_answer(n->api, n->req, v, n->claim, prog, n->stage, true, n->node_view, n->a,
			     n->rep, &e))
		return;
	n->sent = http_answer_now(n->req);
	if (!n->sent) {
		/* Answered later from the written version: this one goes. */
		wipe_free(n->rep->text);
		memset(n->rep, 0, sizeof(*n->rep));
	}
}

/*
 * PUT /v1/volume/<id>/claim?wait=D[&node_stage=true]: the claim, then the
 * request parks (no thread held) until the claim's node is published or
 * needs no publication, a publish attempt failed (the reconciler's status
 * changed), the claim is gone (404 with its note), the wait ends or the
 * API stops; it then answers where the claim stands (vol_claim_answer).
 * The claim is made on the first run only (the memo holds the status
 * stamp seen then), and with it, on this thread, the reconciler's pass
 * that publishes it when this server leads and no worker has the volume
 * (server_volume_claim_run): no hand-off to a worker and no wake-up after
 * the publication's write. That pass answers as soon as
 * ControllerPublishVolume succeeded (vol_claim_published), before it
 * writes the publication: the write is no part of the mount's wait.
 * The runs after it read the volume. A client that
 * went away meanwhile loses nothing: the claim is kept, as granted, and
 * a claim again by the allocation is granted again (idempotent).
 */
static int vol_claim_wait(struct server_api *api, const struct http_request *req, const char *id,
			  struct http_reply *rep, struct arena *a, struct err *e)
{
	uint64_t *memo = http_request_memo(req), stamp;
	struct model_claim_request claim;
	enum server_claim_progress prog;
	struct model_volume *v = NULL;
	struct vol_claim_now now = {.api = api, .req = req, .claim = &claim, .rep = rep, .a = a};
	int64_t wait_ms;
	const char *view = http_query(req, "view");
	bool stage = false, attach_default = false, first;
	struct err le;
	int rc;

	if (view && strcmp(view, "node") != 0)
		return err_set(e, CSID_EINVAL, "view: \"node\" or none, not \"%.32s\"", view);
	if ((rc = http_query_duration(req, "wait", 0, &wait_ms, e)) ||
	    (rc = http_query_bool(req, "node_stage", &stage, e)) ||
	    (rc = server_api_decode_claim(a, req->body, req->len, &claim, &attach_default, e)))
		return rc;
	if (wait_ms > SERVER_API_CLAIM_WAIT_MAX_MS)
		wait_ms = SERVER_API_CLAIM_WAIT_MAX_MS;
	/* Checked before anything is claimed. */
	if (stage && (rc = vol_stage_allowed(api, req, id, e)))
		return rc;
	/* Never 0, which marks the first run. */
	stamp = server_status_stamp(api->server, STORE_VOLUME, id) | 1;
	first = !*memo;
	if (first) {
		rc = server_node_instance_check(api->server, claim.node_id, vol_node_instance(req),
						"claim", true, e);
		/* A claim that waits has its publication made on this thread when it can. */
		now.stage = stage;
		now.node_view = view != NULL;
		err_clear(&le);
		if (!rc && wait_ms > 0) {
			rc = server_volume_claim_run(api->server, id, &claim, attach_default,
						     vol_claim_published, &now, a, &v, &le);
			/*
			 * Answered already: req, rep and e are the I/O thread's. What
			 * failed after the answer (a read of the written version) is
			 * no part of it; the reconciler retries its own write.
			 */
			if (now.sent)
				return 0;
			if (rc)
				*e = le;
		} else if (!rc)
			rc = server_volume_claim_default(api->server, id, &claim, attach_default, a,
							 &v, e);
		if (rc)
			return rc;
		*memo = stamp;
	} else if ((rc = server_volume_get(api->server, id, a, &v, e))) {
		return rc;
	}
	rc = server_volume_claim_progress(api->server, v, claim.alloc_id, claim.node_id, &prog, e);
	if (rc == 0 && prog == SERVER_CLAIM_PUBLISHING && wait_ms > 0 && first)
		rc = vol_claim_spin(api, id, &claim, a, stamp, http_request_start_ms(req) + wait_ms,
				    &v, &prog, e);
	if (rc)
		return err_wrap(e, "claim volume %s", id);
	if (prog == SERVER_CLAIM_PUBLISHING && *memo == stamp && !atomic_load(&api->stopping) &&
	    clock_now_ms(clock_real()) < http_request_start_ms(req) + wait_ms)
		return http_wait_polled(req, http_request_start_ms(req) + wait_ms);
	return vol_claim_answer(api, req, v, &claim, prog, stage && prog != SERVER_CLAIM_PUBLISHING,
				first, view != NULL, a, rep, e);
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
	bool force = false, attach_default = false;
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
				rc = server_volume_get_history(api->server, id, a, &v, e);
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
	} else if (strcmp(rest, "/claim") == 0 && http_query(req, "wait")) {
		rc = vol_claim_wait(api, req, id, rep, a, e);
	} else if (strcmp(rest, "/claim") == 0) {
		rc = server_api_decode_claim(a, req->body, req->len, &claim, &attach_default, e);
		if (!rc)
			rc = server_node_instance_check(api->server, claim.node_id,
							vol_node_instance(req), "claim", true, e);
		if (!rc)
			rc = server_volume_claim_default(api->server, id, &claim, attach_default, a,
							 &v, e);
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
