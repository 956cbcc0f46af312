/*
 * The server's HTTP API: access control, routing to the resource handlers
 * (server_api_volumes.c, server_api_nodes.c, server_api_events.c) and to
 * the web console's files (server_api_ui.c), and blocking queries. The paths are listed in
 * server_api.h.
 *
 * ACL: with tokens configured every request must carry one, in
 * X-Csid-Token or "Authorization: Bearer <token>"; a missing or unknown
 * token gets 403, and a read-only token may only GET, and not the operator
 * endpoints (a snapshot holds secrets). Tokens are compared in constant
 * time and never logged.
 */
#include "api/server_api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/metrics_api.h"
#include "util/clock.h"
#include "util/log.h"

void server_api_set_index(struct http_reply *rep, uint64_t index)
{
	snprintf(rep->index, sizeof(rep->index), "%llu", (unsigned long long)index);
}

json_t *server_api_json(const char *text, size_t len)
{
	return json_loadb(text, len, 0, NULL);
}

/* The index an answer about (kind, id) depends on (see server_api_block). */
static uint64_t server_api_watched(struct server_api *api, enum store_kind kind, const char *id)
{
	struct store_obj o;
	uint64_t idx;

	memset(&o, 0, sizeof(o));
	if (!id || store_get(api->store, kind, id, &o, NULL) != 0)
		return store_index(api->store);
	idx = o.modify_index;
	store_obj_free(&o);
	return idx;
}

int server_api_block(struct server_api *api, const struct http_request *req, enum store_kind kind,
		     const char *id, struct err *e)
{
	struct clock *c = clock_real();
	uint64_t index, stamp, *memo;
	bool stamped;
	int64_t wait_ms, deadline;
	int rc;

	if (!http_query(req, "index"))
		return 0;
	rc = http_query_u64(req, "index", 0, &index, e);
	if (!rc)
		rc = http_query_duration(req, "wait", SERVER_API_WAIT_DEFAULT_MS, &wait_ms, e);
	if (rc)
		return rc;
	if (wait_ms > SERVER_API_WAIT_MAX_MS)
		wait_ms = SERVER_API_WAIT_MAX_MS;
	/*
	 * Parked until a change or the deadline, counted from the request's
	 * arrival. A retry that failed again writes nothing: the reconciler's
	 * status stamp of the object, kept from the first run, is looked at
	 * every tick too.
	 */
	deadline = http_request_start_ms(req) + wait_ms;
	/* Only what the reconciler works on (volumes, snapshots) has a status stamp. */
	stamped = id && (kind == STORE_VOLUME || kind == STORE_SNAPSHOT);
	stamp = stamped ? server_status_stamp(api->server, kind, id) : 0;
	memo = http_request_memo(req);
	if (!*memo)
		*memo = stamp + 1;
	if (atomic_load(&api->stopping) || server_api_watched(api, kind, id) > index ||
	    clock_now_ms(c) >= deadline || (stamped && *memo != stamp + 1))
		return 0;
	return stamped ? http_wait_polled(req, deadline) : http_wait(req, deadline);
}

/*
 * Answered on the I/O thread: health, so that no queue of slow requests
 * delays a probe; and, on a store this process holds alone (SQLite,
 * memory: a write takes tens of microseconds and waits on no network), a
 * claim that does not wait and a release, the two writes of a mount and
 * an unmount, for which the hand-off to a worker and back cost more than
 * the write (bench_server: about a third of the server's CPU per cycle).
 */
static bool server_api_at_once(void *ctx, const struct http_request *req)
{
	struct server_api *api = ctx;
	const char *rest;

	if (strcmp(req->url, "/v1/status/health") == 0)
		return true;
	if (strcmp(req->method, "PUT") != 0 || strncmp(req->url, "/v1/volume/", 11) != 0 ||
	    store_shared(api->store))
		return false;
	rest = strchr(req->url + 11, '/');
	return rest && ((strcmp(rest, "/claim") == 0 && !http_query(req, "wait")) ||
			strcmp(rest, "/release") == 0);
}

/* The wake source of parked requests: the store's change index. */
static uint64_t server_api_wake(void *ctx, uint64_t after, int64_t timeout_ms)
{
	struct server_api *api = ctx;

	return store_wait(api->store, after, timeout_ms);
}

/* Checks the request's token; write: a write token even for a GET. */
static int server_api_acl(struct server_api *api, const struct http_request *req, bool write,
			  struct err *e)
{
	const char *tok = http_request_token(req);
	size_t i;

	if (!api->ntokens)
		return 0;
	if (!tok || !tok[0])
		return err_set(e, CSID_EPERM, "a token is required (X-Csid-Token header)");
	for (i = 0; i < api->ntokens; i++) {
		if (!http_token_eq(tok, api->tokens[i].secret))
			continue;
		if (!api->tokens[i].write && (write || strcmp(req->method, "GET") != 0))
			return err_set(e, CSID_EPERM, "this token may only read");
		return 0;
	}
	return err_set(e, CSID_EPERM, "unknown token");
}

/* Route templates of the request metrics (http_route.h), as the handlers route. */
static const char *const server_api_routes[] = {
    "/v1/status/health",
    "/v1/volumes",
    "/v1/volume/{id}",
    "/v1/volume/{id}/create",
    "/v1/volume/{id}/delete",
    "/v1/volume/{id}/claim",
    "/v1/volume/{id}/release",
    "/v1/volume/{id}/detach",
    "/v1/volume/{id}/expand",
    "/v1/volume/{id}/modify",
    "/v1/volume/{id}/node-stage",
    "/v1/snapshots",
    "/v1/snapshot/{id}",
    "/v1/nodes",
    "/v1/node/{id}",
    "/v1/plugins",
    "/v1/plugin/{id}",
    "/v1/event/stream",
    "/v1/status/reconciler",
    "/v1/status/leader",
    "/v1/status/members",
    "/v1/status/installation",
    METRICS_API_PATH,
    "/ui",
    "/ui/",
    "/ui/{file}",
    NULL,
};

static int server_api_handler(void *ctx, const struct http_request *req, struct http_reply *rep,
			      struct err *e)
{
	struct server_api *api = ctx;
	const char *u = req->url;
	int rc;

	/* Health tells nothing secret: load balancers and probes need no token. */
	if (strcmp(u, "/v1/status/health") == 0)
		return server_api_health(api, req, rep, e);
	/* The console's files hold no data: its login page must load without a token. */
	if (strncmp(u, "/ui", 3) == 0 && (u[3] == '\0' || u[3] == '/'))
		return server_api_ui(api, req, rep, e);
	/* A snapshot of the catalogue holds secrets: operator endpoints need a write token. */
	rc = server_api_acl(api, req, strncmp(u, "/v1/operator/", 13) == 0, e);
	if (rc)
		return rc;
	if (strcmp(u, "/v1/volumes") == 0)
		return server_api_volumes(api, req, rep, e);
	if (strncmp(u, "/v1/volume/", 11) == 0)
		return server_api_volume(api, req, rep, e);
	if (strcmp(u, "/v1/snapshots") == 0)
		return server_api_snapshots(api, req, rep, e);
	if (strncmp(u, "/v1/snapshot/", 13) == 0)
		return server_api_snapshot(api, req, rep, e);
	if (strcmp(u, "/v1/nodes") == 0)
		return server_api_nodes(api, req, rep, e);
	if (strncmp(u, "/v1/node/", 9) == 0)
		return server_api_node(api, req, rep, e);
	if (strcmp(u, "/v1/plugins") == 0)
		return server_api_plugins(api, req, rep, e);
	if (strncmp(u, "/v1/plugin/", 11) == 0)
		return server_api_plugin(api, req, rep, e);
	if (strcmp(u, "/v1/event/stream") == 0)
		return server_api_events(api, req, rep, e);
	if (strcmp(u, "/v1/status/reconciler") == 0)
		return server_api_reconciler(api, req, rep, e);
	if (strcmp(u, "/v1/status/leader") == 0)
		return server_api_leader(api, req, rep, e);
	if (strcmp(u, "/v1/status/members") == 0)
		return server_api_members(api, req, rep, e);
	if (strcmp(u, "/v1/status/installation") == 0)
		return server_api_installation(api, req, rep, e);
	if (strcmp(u, METRICS_API_PATH) == 0)
		return metrics_api_reply(req, rep, e);
	if (strncmp(u, "/v1/operator/", 13) == 0)
		return server_api_operator(api, req, rep, e);
	return err_set(e, CSID_ENOTFOUND, "no such endpoint: %.200s", u);
}

int server_api_start(const struct server_api_config *cfg, struct server_api **out, struct err *e)
{
	struct http_server_config hc = {
	    .name = "server api",
	    .socket_path = cfg->socket_path,
	    .tcp_addr = cfg->tcp_addr ? cfg->tcp_addr : "127.0.0.1:4646",
	    .body_max = SERVER_API_BODY_MAX,
	    .handler = server_api_handler,
	    .routes = server_api_routes,
	};
	struct server_api *api;
	size_t i;
	int rc;

	*out = NULL;
	if (!cfg->server)
		return err_set(e, CSID_EINVAL, "server api: a server is required");
	api = calloc(1, sizeof(*api));
	if (!api)
		return err_set(e, CSID_ENOMEM, "out of memory");
	api->server = cfg->server;
	api->plaintext_secrets = cfg->plaintext_secrets;
	api->store = server_store(cfg->server);
	atomic_init(&api->stopping, false);
	if (cfg->ntokens) {
		api->tokens = calloc(cfg->ntokens, sizeof(*api->tokens));
		if (!api->tokens) {
			rc = err_set(e, CSID_ENOMEM, "out of memory");
			goto fail;
		}
		api->ntokens = cfg->ntokens;
		for (i = 0; i < cfg->ntokens; i++) {
			if (!cfg->tokens[i].secret || !cfg->tokens[i].secret[0]) {
				rc = err_set(e, CSID_EINVAL, "server api: token %zu is empty", i);
				goto fail;
			}
			api->tokens[i].write = cfg->tokens[i].write;
			api->tokens[i].secret = strdup(cfg->tokens[i].secret);
			if (!api->tokens[i].secret) {
				rc = err_set(e, CSID_ENOMEM, "out of memory");
				goto fail;
			}
		}
	}
	hc.ctx = api;
	hc.wake = server_api_wake;
	hc.wake_ctx = api;
	hc.at_once = server_api_at_once;
	hc.limits = cfg->limits;
	hc.tls = cfg->tls;
	rc = http_server_start(&hc, &api->http, e);
	if (rc)
		goto fail;
	if (!api->ntokens && hc.tcp_addr && hc.tcp_addr[0] &&
	    strncmp(hc.tcp_addr, "127.", 4) != 0 && strncmp(hc.tcp_addr, "localhost:", 10) != 0)
		log_warn("msg=\"the server api has no ACL tokens and listens beyond loopback\" "
			 "addr=%s",
			 hc.tcp_addr);
	*out = api;
	return 0;
fail:
	server_api_stop(api);
	return rc;
}

void server_api_stop(struct server_api *api)
{
	size_t i;

	if (!api)
		return;
	atomic_store(&api->stopping, true);
	http_server_stop(api->http);
	for (i = 0; i < api->ntokens; i++) {
		if (api->tokens[i].secret) {
			char *s = (char *)api->tokens[i].secret;

			memset(s, 0, strlen(s));
			free(s);
		}
	}
	free(api->tokens);
	free(api);
}
