/*
 * Server link shell (see server_link.h): one thread runs the core on the
 * clock, builds the fingerprint from the plugin manager's snapshot and
 * sends it with libcurl (one easy handle, so a live connection is kept
 * between heartbeats). server_link_notify only wakes the thread; the
 * thread rebuilds the body and tells the core of a change only when the
 * body differs from the last one built, so plugin events that change
 * nothing the server sees send nothing. The plugin manager tells of every
 * change of a plugin's health, state or fingerprint; a plugin that is
 * removed altogether reaches the server with the next heartbeat.
 *
 * Stopping the link aborts a request in flight (curl's progress
 * callback), so an agent never waits on a silent server to shut down.
 *
 * Logging: every change of outcome or server is logged, and every failure
 * (at most one per server per backoff round, once a minute when refused);
 * the token is never in a log line nor a message. The caller runs
 * curl_global_init before starting the link.
 */
#include "agent/server_link.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "model/model.h"
#include "util/arena.h"
#include "util/curl_pool.h"
#include "util/curl_tls.h"
#include "util/log.h"

/* Bytes of a server's answer kept (the node, with its released allocations). */
#define SERVER_LINK_ANSWER_MAX (4 * 1024 * 1024)
/* A server URL (at most 256 bytes), "/v1/node/" and an escaped node name. */
#define SERVER_LINK_URL_MAX 1024

struct server_link {
	char **servers;
	size_t nservers;
	char *token;
	char *node;
	char *node_path; /* node, %-escaped for the URL (curl_free) */
	char *instance_id; /* a credential: sent in bodies, never logged (logs show the tag) */
	char instance_tag[MODEL_INSTANCE_TAG_LEN + 1];
	char *address; /* NULL: none */
	struct plugin_manager *pm;
	struct held_allocs *held; /* NULL: no allocations report */
	struct clock *clock;
	struct server_link_timing timing;

	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool poked; /* notify since the last rebuild */
	bool stop;
	pthread_t thread;
	bool started;

	/* Thread-only from here. */
	struct server_link_core core;
	char *body; /* the last body built */
	size_t body_len;
	uint64_t body_seq; /* held_allocs_seq when it was built */
	CURL *curl;
	size_t last_server;
	enum server_link_outcome last_logged;
	bool logged_once;
};

/* A server's answer, kept up to SERVER_LINK_ANSWER_MAX bytes (the rest dropped). */
struct server_link_answer {
	char *buf; /* malloc'd, NUL-terminated once anything came */
	size_t len, cap;
};

static size_t server_link_write(char *p, size_t size, size_t n, void *ud)
{
	struct server_link_answer *a = ud;
	size_t len = size * n, room = SERVER_LINK_ANSWER_MAX - a->len,
	       take = len < room ? len : room;

	if (a->len + take + 1 > a->cap) {
		size_t cap = a->cap ? a->cap : 4096;
		char *b;

		while (cap < a->len + take + 1)
			cap *= 2;
		if (!(b = realloc(a->buf, cap)))
			return 0; /* out of memory: curl fails the transfer */
		a->buf = b;
		a->cap = cap;
	}
	memcpy(a->buf + a->len, p, take);
	a->len += take;
	a->buf[a->len] = '\0';
	return len;
}

/* Ends an in-flight request early when the link stops. */
static int server_link_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut,
				curl_off_t un)
{
	struct server_link *l = ud;
	bool stop;

	(void)dt;
	(void)dn;
	(void)ut;
	(void)un;
	pthread_mutex_lock(&l->mu);
	stop = l->stop;
	pthread_mutex_unlock(&l->mu);
	return stop;
}

static void server_link_free_strings(struct server_link *l)
{
	for (size_t i = 0; i < l->nservers; i++)
		free(l->servers[i]);
	free(l->servers);
	if (l->token)
		model_wipe_free(l->token, strlen(l->token));
	free(l->node);
	if (l->node_path)
		curl_free(l->node_path);
	if (l->instance_id)
		explicit_bzero(l->instance_id, strlen(l->instance_id));
	free(l->instance_id);
	free(l->address);
}

int server_link_new(const struct server_link_config *cfg, struct server_link **out, struct err *e)
{
	struct server_link *l;

	*out = NULL;
	if (!cfg->nservers || !cfg->servers || !cfg->node_name || !cfg->instance_id || !cfg->pm)
		return err_set(
		    e, CSID_EINVAL,
		    "server link: servers, node, instance and plugin manager are required");
	l = calloc(1, sizeof(*l));
	if (!l)
		return err_set(e, CSID_ENOMEM, "server link: out of memory");
	l->servers = calloc(cfg->nservers, sizeof(*l->servers));
	l->node = strdup(cfg->node_name);
	l->instance_id = strdup(cfg->instance_id);
	model_node_instance_tag(cfg->instance_id, l->instance_tag);
	l->token = cfg->token ? strdup(cfg->token) : NULL;
	l->address = cfg->address ? strdup(cfg->address) : NULL;
	l->curl = curl_easy_init();
	/* Escaped: a '#' or '?' in a node name must not cut the path to another node's. */
	l->node_path = l->curl ? curl_easy_escape(l->curl, cfg->node_name, 0) : NULL;
	if (!l->servers || !l->node || !l->instance_id || (cfg->token && !l->token) ||
	    (cfg->address && !l->address) || !l->curl || !l->node_path)
		goto nomem;
	for (; l->nservers < cfg->nservers; l->nservers++)
		if (!(l->servers[l->nservers] = strdup(cfg->servers[l->nservers])))
			goto nomem;
	l->pm = cfg->pm;
	l->held = cfg->held;
	l->clock = cfg->clock ? cfg->clock : clock_real();
	l->timing = cfg->timing;
	pthread_mutex_init(&l->mu, NULL);
	clock_cond_init(&l->cond);
	server_link_core_init(&l->core, l->nservers, &l->timing, clock_now_ms(l->clock));
	*out = l;
	return 0;
nomem:
	if (l->curl)
		curl_easy_cleanup(l->curl);
	server_link_free_strings(l);
	free(l);
	return err_set(e, CSID_ENOMEM, "server link: out of memory");
}

/* Rebuilds the body; tells the core when it changed. */
static void server_link_rebuild(struct server_link *l)
{
	struct plugin_manager_snapshot snap = {0};
	struct server_link_allocs allocs = {0};
	struct arena *a = arena_new();
	char *body = NULL;
	size_t len = 0;
	bool ready = false;
	uint64_t seq = held_allocs_seq(l->held);
	struct err e;
	char q[600];

	err_clear(&e);
	/* The report before the snapshot: both are as of now or later than the flows they show. */
	if (!a ||
	    (l->held && held_allocs_list(l->held, a, &ready, (struct model_node_alloc **)&allocs.v,
					 &allocs.n, &e)) ||
	    plugin_manager_snapshot(l->pm, &snap, &e) ||
	    server_link_body(&snap, l->node, l->instance_id, l->address, ready ? &allocs : NULL,
			     &body, &len, &e)) {
		/*
		 * Out of memory, or the mounter's records unreadable: the last
		 * body goes out (never one that reports nothing held); the next
		 * heartbeat rebuilds.
		 */
		log_error("msg=\"server link: cannot build the node fingerprint\" error=%s",
			  log_q(q, sizeof(q), a ? e.msg : "out of memory"));
		plugin_manager_snapshot_free(&snap);
		arena_free(a);
		return;
	}
	plugin_manager_snapshot_free(&snap);
	arena_free(a);
	/* Taken before the report: an answer names flows begun since as stale. */
	l->body_seq = seq;
	if (l->body && len == l->body_len && memcmp(body, l->body, len) == 0) {
		free(body);
		return;
	}
	free(l->body);
	l->body = body;
	l->body_len = len;
	server_link_core_changed(&l->core, clock_now_ms(l->clock));
}

/* PUTs the body to server i; the outcome, with what went wrong in why, the answer in *ans. */
static enum server_link_outcome server_link_put(struct server_link *l, size_t i,
						struct server_link_answer *ans, char *why,
						size_t why_len)
{
	char url[SERVER_LINK_URL_MAX], path[SERVER_LINK_URL_MAX], errbuf[CURL_ERROR_SIZE] = "";
	char tok[1100];
	struct curl_slist *hdrs = NULL;
	const char *code = NULL, *msg = NULL;
	enum server_link_outcome o;
	json_t *doc = NULL;
	long status = 0;
	CURLcode cc;

	curl_easy_reset(l->curl);
	curl_tls_apply(l->curl);
	if ((size_t)snprintf(path, sizeof(path), "/v1/node/%s", l->node_path) >= sizeof(path) ||
	    curl_pool_target(l->curl, l->servers[i], path, url, sizeof(url)) != 0) {
		snprintf(why, why_len, "node name too long for a URL");
		return SERVER_LINK_REFUSED;
	}
	hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	hdrs = curl_slist_append(hdrs, "Expect:");
	if (l->token) {
		snprintf(tok, sizeof(tok), "X-Csid-Token: %s", l->token);
		hdrs = curl_slist_append(hdrs, tok);
		memset(tok, 0, sizeof(tok));
	}
	curl_easy_setopt(l->curl, CURLOPT_CUSTOMREQUEST, "PUT");
	curl_easy_setopt(l->curl, CURLOPT_POSTFIELDS, l->body ? l->body : "{}");
	curl_easy_setopt(l->curl, CURLOPT_POSTFIELDSIZE, (long)(l->body ? l->body_len : 2));
	curl_easy_setopt(l->curl, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(l->curl, CURLOPT_TIMEOUT_MS, (long)SERVER_LINK_REQUEST_TIMEOUT_MS);
	curl_easy_setopt(l->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)SERVER_LINK_CONNECT_TIMEOUT_MS);
	curl_easy_setopt(l->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(l->curl, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(l->curl, CURLOPT_WRITEFUNCTION, server_link_write);
	curl_easy_setopt(l->curl, CURLOPT_WRITEDATA, ans);
	curl_easy_setopt(l->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(l->curl, CURLOPT_XFERINFOFUNCTION, server_link_progress);
	curl_easy_setopt(l->curl, CURLOPT_XFERINFODATA, l);
	cc = curl_easy_perform(l->curl);
	curl_pool_headers_free(hdrs);
	if (cc != CURLE_OK) {
		snprintf(why, why_len, "%s", errbuf[0] ? errbuf : curl_easy_strerror(cc));
		return SERVER_LINK_UNREACHABLE;
	}
	curl_easy_getinfo(l->curl, CURLINFO_RESPONSE_CODE, &status);
	doc = ans->buf ? json_loadb(ans->buf, ans->len, 0, NULL) : NULL;
	if (json_is_object(doc)) {
		code = json_string_value(json_object_get(doc, "code"));
		msg = json_string_value(json_object_get(doc, "error"));
	}
	o = server_link_classify(status, code);
	snprintf(why, why_len, "HTTP %ld%s%s", status, msg ? ": " : "", msg ? msg : "");
	json_decref(doc);
	return o;
}

/* Logs the end of a send: every failure, and a success that changes something. */
static void server_link_log(struct server_link *l, size_t i, enum server_link_outcome o,
			    const char *why)
{
	const struct server_link_core *c = &l->core;
	char q[700];

	if (o == SERVER_LINK_OK) {
		if (!l->logged_once || l->last_logged != o || l->last_server != i)
			log_info("msg=\"joined server\" server=%s node=%s instance_tag=%s "
				 "heartbeat_ms=%lld",
				 l->servers[i], l->node, l->instance_tag,
				 (long long)c->t.heartbeat_ms);
	} else if (o == SERVER_LINK_UNAUTHORIZED) {
		log_error("msg=\"server refused the agent's token (check server_token)\" "
			  "server=%s node=%s error=%s retry_in_ms=%lld",
			  l->servers[i], l->node, log_q(q, sizeof(q), why), (long long)c->delay_ms);
	} else if (o == SERVER_LINK_DUPLICATE) {
		log_error("msg=\"server refused the node: another agent holds this node name\" "
			  "server=%s node=%s instance_tag=%s error=%s retry_in_ms=%lld",
			  l->servers[i], l->node, l->instance_tag, log_q(q, sizeof(q), why),
			  (long long)c->delay_ms);
	} else if (o == SERVER_LINK_REFUSED) {
		log_error("msg=\"server refused the node fingerprint\" server=%s node=%s "
			  "error=%s retry_in_ms=%lld",
			  l->servers[i], l->node, log_q(q, sizeof(q), why), (long long)c->delay_ms);
	} else if (c->round_done) {
		log_warn("msg=\"no server reachable; the agent keeps serving its mounts\" "
			 "server=%s node=%s error=%s servers=%zu retry_in_ms=%lld",
			 l->servers[i], l->node, log_q(q, sizeof(q), why), l->nservers,
			 (long long)c->delay_ms);
	} else {
		log_warn("msg=\"server unreachable, failing over\" server=%s next=%s node=%s "
			 "error=%s",
			 l->servers[i], l->servers[c->cur], l->node, log_q(q, sizeof(q), why));
	}
	l->logged_once = true;
	l->last_logged = o;
	l->last_server = i;
}

/*
 * Passes on what a server answered to the report sent (held_allocs.h):
 * the allocations released, and the volumes to expand (the request was
 * sent at sent_ms).
 */
static void server_link_answered(struct server_link *l, const struct server_link_answer *ans,
				 uint64_t seq, int64_t sent_ms)
{
	struct server_link_released *r = NULL;
	struct held_allocs_expand *x = NULL;
	struct arena *a = NULL;
	size_t n = 0, nx = 0;
	bool present = false;
	struct err e;

	if (!l->held)
		return;
	err_clear(&e);
	if (ans->buf && (a = arena_new()) &&
	    server_link_released_parse(ans->buf, ans->len, a, &r, &n, &e) == 0)
		for (size_t i = 0; i < n; i++)
			if (!held_allocs_released(l->held, seq, r[i].volume_id, r[i].alloc_id,
						  r[i].note))
				log_debug("msg=\"released allocation kept: a claim flow runs or "
					  "ran since the report\" volume=%s alloc=%s",
					  r[i].volume_id, r[i].alloc_id);
	if (a && server_link_expand_parse(ans->buf, ans->len, a, &x, &nx, &present, &e) == 0 &&
	    present)
		held_allocs_expand(l->held, sent_ms, x, nx);
	arena_free(a);
	held_allocs_answered(l->held, seq);
}

static void *server_link_main(void *arg)
{
	struct server_link *l = arg;

	pthread_mutex_lock(&l->mu);
	l->poked = true;
	while (!l->stop) {
		int64_t now = clock_now_ms(l->clock);
		struct server_link_answer ans = {0};
		enum server_link_outcome o;
		char why[600] = "";
		int64_t sent;
		size_t i;

		if (l->poked) {
			l->poked = false;
			pthread_mutex_unlock(&l->mu);
			server_link_rebuild(l);
			pthread_mutex_lock(&l->mu);
			continue;
		}
		if (now < server_link_core_next(&l->core)) {
			clock_wait(l->clock, &l->cond, &l->mu, server_link_core_next(&l->core));
			continue;
		}
		/* Every send carries the whole, current fingerprint: a heartbeat catches up. */
		pthread_mutex_unlock(&l->mu);
		server_link_rebuild(l);
		pthread_mutex_lock(&l->mu);
		if (l->stop || !server_link_core_begin(&l->core, clock_now_ms(l->clock), &i))
			continue;
		pthread_mutex_unlock(&l->mu);
		sent = clock_now_ms(l->clock);
		o = server_link_put(l, i, &ans, why, sizeof(why));
		if (o == SERVER_LINK_OK)
			server_link_answered(l, &ans, l->body_seq, sent);
		free(ans.buf);
		pthread_mutex_lock(&l->mu);
		server_link_core_end(&l->core, clock_now_ms(l->clock), o);
		server_link_log(l, i, o, why);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

int server_link_start(struct server_link *l, struct err *e)
{
	int rc = pthread_create(&l->thread, NULL, server_link_main, l);

	if (rc)
		return err_errno(e, rc, "server link: start thread");
	l->started = true;
	return 0;
}

void server_link_notify(struct server_link *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	l->poked = true;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->mu);
}

void server_link_stop(struct server_link *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	l->stop = true;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->mu);
}

void server_link_free(struct server_link *l)
{
	if (!l)
		return;
	server_link_stop(l);
	if (l->started)
		pthread_join(l->thread, NULL);
	curl_easy_cleanup(l->curl);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cond);
	free(l->body);
	server_link_free_strings(l);
	free(l);
}
