/*
 * Controller plugins behind agents (controllers_remote.h). State: per
 * plugin ID, the node used last and the node whose agent last failed at
 * the transport (both under one mutex); nothing else is kept between
 * calls: each acquire reads the node records afresh, so a node that
 * goes down or whose plugin turns unhealthy stops being chosen at once.
 *
 * The node records are read through a cache of their decoded form
 * (server_pcache.h), rebuilt when a node record changed: a reconciler
 * pass acquires a client once, and decoding every node record on each
 * pass cost as much as the pass's own work with one node, and grew with
 * the cluster.
 *
 * A client is a small object per acquire (freed by release) that runs
 * each call as one libcurl request with an easy handle of its own while
 * the call lasts, so calls from several reconciler workers never share
 * one; the handles (and their keep-alive connections to the agents) are
 * kept idle between calls (util/curl_pool.h). The request bytes may
 * hold secrets: they are wiped after the request, and never logged.
 */
#include "server/controllers_remote.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "plugins/instance_manager.h"
#include "csi/csi_remote.h"
#include "csi/csi_rules.h"
#include "server/server.h"
#include "server/server_pcache.h"
#include "util/array.h"
#include "util/curl_pool.h"
#include "util/log.h"
#include "util/sched_wait.h"
#include "util/strbuf.h"

/* Time the agent gets beyond the RPC's own deadline to send its answer (ms). */
#define CONTROLLERS_REMOTE_SLACK_MS 2000
#define CONTROLLERS_REMOTE_CONNECT_MS 5000
/* Idle handles (keep-alive connections to agents) kept between calls. */
#define CONTROLLERS_REMOTE_CONNS 8

struct controllers_remote_pref {
	char plugin_id[MODEL_PLUGIN_ID_MAX + 1];
	char last[MODEL_ID_MAX + 1];
	char avoid[MODEL_ID_MAX + 1];
};

/* The cached view: the decoded node records (in the cache's arena). */
struct controllers_remote_view {
	struct model_node *const *nodes;
	size_t n;
};

struct controllers_remote {
	struct store *store;
	struct server_pcache *nodes; /* of controllers_remote_view */
	char *token;
	struct reconciler_controllers host;
	struct curl_pool *conns;
	pthread_mutex_t mu; /* guards prefs */
	struct controllers_remote_pref *prefs;
	size_t nprefs, prefs_cap;
};

struct controllers_remote_client {
	struct csi_client base;
	struct controllers_remote *owner; /* NULL: a bare client */
	const char *token;
	char plugin_id[MODEL_PLUGIN_ID_MAX + 1];
	char node_id[MODEL_ID_MAX + 1];
	char base_url[MODEL_ADDRESS_MAX + 16];
	char endpoint[MODEL_ID_MAX + MODEL_ADDRESS_MAX + 32];
};

/* The capability bits of the names a fingerprint lists. */
static uint64_t controllers_remote_caps(const struct model_node_plugin *p)
{
	uint64_t bits = 0;

	for (int bit = 0; bit < 64; bit++) {
		const char *name = plugin_controller_cap_name(bit);

		for (size_t i = 0; name && i < p->ncaps; i++)
			if (p->caps[i] && strcmp(p->caps[i], name) == 0)
				bits |= (uint64_t)1 << bit;
	}
	return bits;
}

/* The node's controller plugin plugin_id, or NULL. */
static const struct model_node_plugin *controllers_remote_plugin(const struct model_node *n,
								 const char *plugin_id)
{
	for (size_t i = 0; i < n->nplugins; i++)
		if (n->plugins[i].type == MODEL_PLUGIN_CONTROLLER && n->plugins[i].plugin_id &&
		    strcmp(n->plugins[i].plugin_id, plugin_id) == 0)
			return &n->plugins[i];
	return NULL;
}

int controllers_remote_choose(struct model_node *const *nodes, size_t n, const char *plugin_id,
			      const char *last, const char *avoid, size_t *chosen, uint64_t *caps,
			      struct err *e)
{
	size_t first = n, other = n, prev = n, why = 0, listed = 0;
	char reasons[ERR_MSG_MAX] = "";

	for (size_t i = 0; i < n; i++) {
		const struct model_node_plugin *p = controllers_remote_plugin(nodes[i], plugin_id);
		const char *no = NULL;

		if (!p)
			continue;
		listed++;
		if (nodes[i]->status != MODEL_NODE_READY)
			no = "node down";
		else if (!p->healthy)
			no = p->health && p->health[0] ? p->health : "unhealthy";
		else if (!nodes[i]->address || !nodes[i]->address[0])
			no = "node has no agent address";
		if (no) {
			if (why < sizeof(reasons))
				why +=
				    (size_t)snprintf(reasons + why, sizeof(reasons) - why,
						     "%s%s: %s", why ? "; " : "", nodes[i]->id, no);
			continue;
		}
		if (first == n)
			first = i;
		if (last && strcmp(nodes[i]->id, last) == 0)
			prev = i;
		if (other == n && !(avoid && strcmp(nodes[i]->id, avoid) == 0))
			other = i;
	}
	if (first == n && !listed)
		return err_set(e, CSID_ENOTFOUND, "no controller plugin %s on any node", plugin_id);
	if (first == n)
		return err_set(e, CSID_EUNAVAIL, "no healthy controller for plugin %s: %s",
			       plugin_id, reasons);
	if (prev != n && !(avoid && strcmp(nodes[prev]->id, avoid) == 0))
		*chosen = prev;
	else
		*chosen = other != n ? other : first;
	*caps = controllers_remote_caps(controllers_remote_plugin(nodes[*chosen], plugin_id));
	return 0;
}

/* The preference entry of plugin_id (added when absent), or NULL; r->mu held. */
static struct controllers_remote_pref *controllers_remote_pref(struct controllers_remote *r,
							       const char *plugin_id)
{
	struct controllers_remote_pref *p;

	for (size_t i = 0; i < r->nprefs; i++)
		if (strcmp(r->prefs[i].plugin_id, plugin_id) == 0)
			return &r->prefs[i];
	if (array_grow((void **)&r->prefs, &r->prefs_cap, r->nprefs + 1, sizeof(*r->prefs)))
		return NULL;
	p = &r->prefs[r->nprefs++];
	memset(p, 0, sizeof(*p));
	snprintf(p->plugin_id, sizeof(p->plugin_id), "%s", plugin_id);
	return p;
}

/* An agent failed at the transport: prefer another node for plugin_id. */
static void controllers_remote_failed(struct controllers_remote *r, const char *plugin_id,
				      const char *node_id)
{
	struct controllers_remote_pref *p;

	pthread_mutex_lock(&r->mu);
	p = controllers_remote_pref(r, plugin_id);
	if (p)
		snprintf(p->avoid, sizeof(p->avoid), "%s", node_id);
	pthread_mutex_unlock(&r->mu);
}

static void controllers_remote_status(struct csi_status *st, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void controllers_remote_status(struct csi_status *st, int code, const char *fmt, ...)
{
	va_list ap;

	st->code = code;
	va_start(ap, fmt);
	vsnprintf(st->message, sizeof(st->message), fmt, ap);
	va_end(ap);
}

/* An answer other than 200: the API's JSON error, as UNAVAILABLE (retried). */
static void controllers_remote_refused(struct controllers_remote_client *c, long status,
				       const struct strbuf *b, struct csi_status *st)
{
	json_t *doc = b->p ? json_loadb(b->p, b->len, 0, NULL) : NULL;
	const char *msg = json_string_value(json_object_get(doc, "error"));

	controllers_remote_status(st, CSI_UNAVAILABLE, "agent on node %s refused: HTTP %ld: %s",
				  c->node_id, status, msg ? msg : "no error message");
	json_decref(doc);
}

/* Points curl at the request's URL (into url) and builds its headers; 0 or CSID_ENOMEM. */
static int controllers_remote_prepare(struct controllers_remote_client *c, CURL *curl,
				      const struct csi_rpc_info *info, int64_t timeout_ms,
				      char *url, size_t cap, struct curl_slist **hdrs)
{
	char h[600];
	struct curl_slist *l = NULL, *t;

	/* The URL fits: the address, plugin ID and RPC name are bounded (url's size). */
	snprintf(h, sizeof(h), "%s%s/%s", CSI_REMOTE_PREFIX, c->plugin_id, info->name);
	if (curl_pool_target(curl, c->base_url, h, url, cap) != 0)
		return CSID_ENOMEM;
	snprintf(h, sizeof(h), "%s: %lld", CSI_REMOTE_DEADLINE_HEADER, (long long)timeout_ms);
	if (!(l = curl_slist_append(l, "Content-Type: application/x-protobuf")) ||
	    !(t = curl_slist_append(l, "Expect:")) || !(t = curl_slist_append(l, h)))
		goto fail;
	if (c->token) {
		snprintf(h, sizeof(h), "%s: %.512s", CSI_REMOTE_TOKEN_HEADER, c->token);
		t = curl_slist_append(l, h);
		explicit_bzero(h, sizeof(h));
		if (!t)
			goto fail;
	}
	*hdrs = l;
	return 0;
fail:
	curl_pool_headers_free(l);
	return CSID_ENOMEM;
}

/* One header holds the token: leave no copy behind. */
static void controllers_remote_headers_free(struct curl_slist *hdrs)
{
	curl_pool_headers_free(hdrs);
}

static int controllers_remote_call(struct csi_client *base, enum csi_rpc rpc,
				   const ProtobufCMessage *req, ProtobufCMessage **resp,
				   int64_t timeout_ms, struct csi_status *st)
{
	struct controllers_remote_client *c = (struct controllers_remote_client *)base;
	const struct csi_rpc_info *info = csi_rpc_info(rpc);
	struct strbuf b = {.max = CSI_REMOTE_ANSWER_MAX};
	struct curl_slist *hdrs = NULL;
	char url[MODEL_ADDRESS_MAX + 256], errbuf[CURL_ERROR_SIZE] = "";
	uint8_t *bytes = NULL;
	size_t n = 0;
	CURL *curl = NULL;
	CURLcode cc;
	long status = 0;
	struct sched_wait sw;
	struct err e;
	int rc = CSID_EINTERNAL;

	*resp = NULL;
	err_clear(&e);
	if (!info || !csi_remote_allowed(rpc)) {
		controllers_remote_status(st, CSI_INTERNAL, "%s: not a controller RPC",
					  info ? info->name : "unknown RPC");
		return CSID_EINVAL;
	}
	if (timeout_ms <= 0)
		timeout_ms = CSI_DEFAULT_TIMEOUT_MS;
	n = protobuf_c_message_get_packed_size(req);
	bytes = malloc(n ? n : 1);
	curl = curl_pool_get(c->owner ? c->owner->conns : NULL);
	if (!bytes || !curl ||
	    controllers_remote_prepare(c, curl, info, timeout_ms, url, sizeof(url), &hdrs)) {
		controllers_remote_status(st, CSI_INTERNAL, "%s: out of memory", info->name);
		rc = CSID_ENOMEM;
		goto out;
	}
	protobuf_c_message_pack(req, bytes);
	curl_easy_setopt(curl, CURLOPT_POST, 1L);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDS, (const char *)bytes);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)n);
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
			 (long)(timeout_ms + CONTROLLERS_REMOTE_SLACK_MS));
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)(timeout_ms < CONTROLLERS_REMOTE_CONNECT_MS
				    ? timeout_ms
				    : CONTROLLERS_REMOTE_CONNECT_MS));
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, strbuf_write);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, &b);
	/* The agent's answer should get the thread a CPU at once (util/sched_wait.h). */
	sched_wait_begin(&sw);
	cc = curl_easy_perform(curl);
	sched_wait_end(&sw);
	if (cc == CURLE_OK)
		curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
	if (cc != CURLE_OK && b.too_big) {
		controllers_remote_status(st, CSI_INTERNAL,
					  "agent on node %s: answer larger than %d bytes",
					  c->node_id, CSI_REMOTE_ANSWER_MAX);
		rc = CSID_EPROTO;
	} else if (cc != CURLE_OK) {
		controllers_remote_status(
		    st, cc == CURLE_OPERATION_TIMEDOUT ? CSI_DEADLINE_EXCEEDED : CSI_UNAVAILABLE,
		    "agent on node %s (%s): %s", c->node_id, c->base_url,
		    errbuf[0] ? errbuf : curl_easy_strerror(cc));
		if (c->owner)
			controllers_remote_failed(c->owner, c->plugin_id, c->node_id);
		rc = csi_status_to_err(st->code);
	} else if (status != 200) {
		controllers_remote_refused(c, status, &b, st);
		if (c->owner && status != 403)
			controllers_remote_failed(c->owner, c->plugin_id, c->node_id);
		rc = csi_status_to_err(st->code);
	} else if (csi_remote_answer_decode(rpc, b.p, b.len, resp, st, &e)) {
		controllers_remote_status(st, CSI_INTERNAL, "agent on node %s: %s", c->node_id,
					  e.msg);
		rc = CSID_EPROTO;
	} else {
		rc = st->code == CSI_OK ? 0 : csi_status_to_err(st->code);
	}
out:
	controllers_remote_headers_free(hdrs);
	curl_pool_put(c->owner ? c->owner->conns : NULL, curl);
	if (bytes) {
		explicit_bzero(bytes, n);
		free(bytes);
	}
	strbuf_free(&b);
	return rc;
}

static void controllers_remote_client_free(struct csi_client *base)
{
	free(base);
}

static int controllers_remote_client_make(const char *address, const char *node_id,
					  const char *plugin_id, const char *token,
					  struct controllers_remote_client **out, struct err *e)
{
	struct controllers_remote_client *c;
	size_t n;

	*out = NULL;
	if (!address || !address[0] || strlen(address) > MODEL_ADDRESS_MAX ||
	    strlen(node_id) > MODEL_ID_MAX || strlen(plugin_id) > MODEL_PLUGIN_ID_MAX)
		return err_set(e, CSID_EINVAL, "node %s: bad agent address", node_id);
	c = calloc(1, sizeof(*c));
	if (!c)
		return err_set(e, CSID_ENOMEM, "out of memory");
	c->base.call = controllers_remote_call;
	c->base.free = controllers_remote_client_free;
	c->base.endpoint = c->endpoint;
	c->token = token;
	snprintf(c->plugin_id, sizeof(c->plugin_id), "%s", plugin_id);
	snprintf(c->node_id, sizeof(c->node_id), "%s", node_id);
	snprintf(c->base_url, sizeof(c->base_url), "%s%s",
		 strstr(address, "://") || strncmp(address, "unix:", 5) == 0 ? "" : "http://",
		 address);
	for (n = strlen(c->base_url); n > 0 && c->base_url[n - 1] == '/'; n--)
		c->base_url[n - 1] = '\0';
	snprintf(c->endpoint, sizeof(c->endpoint), "agent on node %s (%s)", node_id, c->base_url);
	*out = c;
	return 0;
}

int controllers_remote_client_new(const char *address, const char *node_id, const char *plugin_id,
				  const char *token, struct csi_client **out, struct err *e)
{
	struct controllers_remote_client *c;
	int rc = controllers_remote_client_make(address, node_id, plugin_id, token, &c, e);

	*out = rc ? NULL : &c->base;
	return rc;
}

/* server_pcache_build_fn: the view is the decoded records themselves. */
static int controllers_remote_view_build(void *ctx, struct model_node *const *nodes, size_t n,
					 struct arena *a, void **view, struct err *e)
{
	struct controllers_remote_view *v = arena_alloc(a, sizeof(*v));

	(void)ctx;
	if (!v)
		return err_set(e, CSID_ENOMEM, "agent controllers: out of memory");
	v->nodes = nodes;
	v->n = n;
	*view = v;
	return 0;
}

/* One choice on the cached view: in, the plugin and preferences; out, the node. */
struct controllers_remote_pick {
	const char *plugin_id, *last, *avoid;
	int rc;
	struct err *e;
	uint64_t *caps;
	/* One byte more than allowed: client_make still refuses what is too long. */
	char node[MODEL_ID_MAX + 2];
	char address[MODEL_ADDRESS_MAX + 2];
};

/* server_pcache_use_fn: chooses among the view's nodes, copying out what outlives the lock. */
static void controllers_remote_view_pick(void *arg, const void *view)
{
	const struct controllers_remote_view *v = view;
	struct controllers_remote_pick *k = arg;
	size_t chosen = 0;

	k->rc = controllers_remote_choose(v->nodes, v->n, k->plugin_id, k->last, k->avoid, &chosen,
					  k->caps, k->e);
	if (k->rc)
		return;
	snprintf(k->node, sizeof(k->node), "%s", v->nodes[chosen]->id);
	snprintf(k->address, sizeof(k->address), "%s",
		 v->nodes[chosen]->address ? v->nodes[chosen]->address : "");
}

static int controllers_remote_acquire_agent(struct controllers_remote *r, const char *plugin_id,
					    struct csi_client **client, uint64_t *caps,
					    struct err *e)
{
	struct controllers_remote_client *c = NULL;
	struct controllers_remote_pref *pref;
	char last[MODEL_ID_MAX + 1] = "", avoid[MODEL_ID_MAX + 1] = "";
	struct controllers_remote_pick k = {.plugin_id = plugin_id, .e = e, .caps = caps};
	int rc;

	pthread_mutex_lock(&r->mu);
	pref = controllers_remote_pref(r, plugin_id);
	if (pref) {
		memcpy(last, pref->last, sizeof(last));
		memcpy(avoid, pref->avoid, sizeof(avoid));
	}
	pthread_mutex_unlock(&r->mu);
	k.last = last[0] ? last : NULL;
	k.avoid = avoid[0] ? avoid : NULL;
	if ((rc = server_pcache_use(r->nodes, controllers_remote_view_pick, &k, e)) || (rc = k.rc))
		return rc;
	rc = controllers_remote_client_make(k.address, k.node, plugin_id, r->token, &c, e);
	if (rc)
		return rc;
	c->owner = r;
	pthread_mutex_lock(&r->mu);
	pref = controllers_remote_pref(r, plugin_id);
	if (pref && strcmp(pref->last, k.node) != 0) {
		snprintf(pref->last, sizeof(pref->last), "%s", k.node);
		if (strcmp(pref->avoid, pref->last) == 0)
			pref->avoid[0] = '\0';
		log_info("msg=\"controller plugin through agent\" plugin=%s node=%s address=%s",
			 plugin_id, k.node, c->base_url);
	}
	pthread_mutex_unlock(&r->mu);
	*client = &c->base;
	return 0;
}

static int controllers_remote_acquire(void *ctx, const char *plugin_id, struct csi_client **client,
				      uint64_t *caps, struct err *e)
{
	struct controllers_remote *r = ctx;
	int rc;

	*client = NULL;
	if (r->host.acquire) {
		rc = r->host.acquire(r->host.ctx, plugin_id, client, caps, e);
		if (rc != CSID_ENOTFOUND)
			return rc;
		err_clear(e);
	}
	return controllers_remote_acquire_agent(r, plugin_id, client, caps, e);
}

static void controllers_remote_release(void *ctx, const char *plugin_id, struct csi_client *client)
{
	struct controllers_remote *r = ctx;

	if (!client)
		return;
	if (client->call == controllers_remote_call)
		csi_client_free(client);
	else if (r->host.release)
		r->host.release(r->host.ctx, plugin_id, client);
}

int controllers_remote_new(const struct controllers_remote_config *cfg,
			   struct controllers_remote **out, struct err *e)
{
	struct controllers_remote *r;

	*out = NULL;
	if (!cfg->store)
		return err_set(e, CSID_EINVAL, "agent controllers: a store is required");
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return err_set(e, CSID_EINTERNAL, "agent controllers: libcurl did not start");
	r = calloc(1, sizeof(*r));
	if (!r || (cfg->token && !(r->token = strdup(cfg->token))) ||
	    !(r->nodes = server_pcache_new(cfg->store, controllers_remote_view_build, NULL)) ||
	    curl_pool_new(CONTROLLERS_REMOTE_CONNS, &r->conns, e)) {
		if (r) {
			free(r->token);
			server_pcache_free(r->nodes);
		}
		free(r);
		curl_global_cleanup();
		return err_set(e, CSID_ENOMEM, "agent controllers: out of memory");
	}
	r->store = cfg->store;
	r->host = cfg->host;
	pthread_mutex_init(&r->mu, NULL);
	*out = r;
	return 0;
}

struct reconciler_controllers controllers_remote_seam(struct controllers_remote *r)
{
	struct reconciler_controllers seam = {
	    .acquire = controllers_remote_acquire, .release = controllers_remote_release, .ctx = r};

	return seam;
}

void controllers_remote_free(struct controllers_remote *r)
{
	if (!r)
		return;
	if (r->token) {
		explicit_bzero(r->token, strlen(r->token));
		free(r->token);
	}
	free(r->prefs);
	server_pcache_free(r->nodes);
	curl_pool_free(r->conns);
	pthread_mutex_destroy(&r->mu);
	free(r);
	curl_global_cleanup();
}
