/*
 * The agent's HTTP API: routing to the resource handlers of
 * agent_api_mounts.c, agent_api_claims.c, agent_api_owners.c and
 * agent_api_plugins.c. The HTTP plumbing
 * (listeners, bodies, answers, errors) is shared with the server's API in
 * http.c.
 */
#include "api/agent_api_int.h"

#include <stdlib.h>
#include <string.h>

#include "api/docker_plugin.h"
#include "api/metrics_api.h"
#include "csi/csi_remote.h"
#include "util/clock.h"
#include "util/log.h"

/*
 * /v1/agent/volumes/<vol>/mount (PUT), /v1/agent/volumes/<vol>/mount/<alloc> (DELETE) and
 * /v1/agent/volumes/<vol>/mount/<alloc>/renew (PUT).
 */
static int agent_api_route_volume(struct agent_api *a, const struct http_request *req,
				  struct http_reply *rep, struct err *e)
{
	const char *p = req->url + strlen("/v1/agent/volumes/"), *slash = strchr(p, '/');
	char vol[MOUNT_NAME_MAX + 1], alloc[MOUNT_NAME_MAX + 1];
	size_t vlen = slash ? (size_t)(slash - p) : 0;
	const char *renew =
	    slash && strncmp(slash, "/mount/", 7) == 0 ? strchr(slash + 7, '/') : NULL;

	if (renew && strcmp(renew, "/renew") == 0 && vlen <= MOUNT_NAME_MAX &&
	    (size_t)(renew - slash - 7) <= MOUNT_NAME_MAX) {
		snprintf(vol, sizeof(vol), "%.*s", (int)vlen, p);
		snprintf(alloc, sizeof(alloc), "%.*s", (int)(renew - slash - 7), slash + 7);
		rep->allow = "PUT";
		if (strcmp(req->method, "PUT") != 0)
			return HTTP_METHOD_NOT_ALLOWED;
		return agent_api_owner_renew(a, vol, alloc, req->body, req->len, &rep->doc, e);
	}

	if (!slash || strncmp(slash, "/mount", 6) != 0 || vlen > MOUNT_NAME_MAX ||
	    (slash[6] && (slash[6] != '/' || strlen(slash + 7) > MOUNT_NAME_MAX)))
		return err_set(e, CSID_ENOTFOUND, "no such endpoint: %.200s", req->url);
	memcpy(vol, p, vlen);
	vol[vlen] = '\0';
	if (!slash[6]) {
		rep->allow = "PUT";
		if (strcmp(req->method, "PUT") != 0)
			return HTTP_METHOD_NOT_ALLOWED;
		return agent_api_volume_mount(a, vol, req->body, req->len, &rep->doc, e);
	}
	snprintf(alloc, sizeof(alloc), "%s", slash + 7);
	rep->allow = "DELETE";
	if (strcmp(req->method, "DELETE") != 0)
		return HTTP_METHOD_NOT_ALLOWED;
	return agent_api_volume_unmount(a, vol, alloc, &rep->doc, e);
}

static int agent_api_dispatch(void *ctx, const struct http_request *req, struct http_reply *rep,
			      struct err *e)
{
	static const char mounts[] = "/v1/agent/mounts";
	static const char volumes[] = "/v1/agent/volumes/";
	struct agent_api *a = ctx;
	const char *url = req->url, *method = req->method;
	bool get = strcmp(method, "GET") == 0;

	if (strcmp(url, "/v1/agent/self") == 0) {
		rep->allow = "GET";
		return get ? agent_api_self(a, &rep->doc, e) : HTTP_METHOD_NOT_ALLOWED;
	}
	if (strcmp(url, "/v1/agent/plugins") == 0) {
		rep->allow = "GET";
		return get ? agent_api_plugins_list(a, &rep->doc, e) : HTTP_METHOD_NOT_ALLOWED;
	}
	if (strcmp(url, "/v1/agent/owners") == 0) {
		rep->allow = "GET";
		return get ? agent_api_owners_list(a, &rep->doc, e) : HTTP_METHOD_NOT_ALLOWED;
	}
	if (strcmp(url, mounts) == 0) {
		rep->allow = "GET, PUT";
		if (get)
			return agent_api_mounts_list(a, &rep->doc, e);
		if (strcmp(method, "PUT") == 0)
			return agent_api_mounts_put(a, req->body, req->len, &rep->doc, e);
		return HTTP_METHOD_NOT_ALLOWED;
	}
	if (strncmp(url, mounts, sizeof(mounts) - 1) == 0 && url[sizeof(mounts) - 1] == '/') {
		rep->allow = "DELETE";
		if (strcmp(method, "DELETE") == 0)
			return agent_api_mounts_delete(a, url, http_query(req, "force"), &rep->doc,
						       e);
		return HTTP_METHOD_NOT_ALLOWED;
	}
	if (strncmp(url, volumes, sizeof(volumes) - 1) == 0)
		return agent_api_route_volume(a, req, rep, e);
	if (strcmp(url, METRICS_API_PATH) == 0)
		return metrics_api_reply(req, rep, e);
	if (strncmp(url, CSI_REMOTE_PREFIX, sizeof(CSI_REMOTE_PREFIX) - 1) == 0) {
		rep->allow = "POST";
		if (strcmp(method, "POST") == 0)
			return agent_api_controller_call(a, req, rep, e);
		return HTTP_METHOD_NOT_ALLOWED;
	}
	return err_set(e, CSID_ENOTFOUND, "no such endpoint: %.200s", url);
}

/* Route templates of the request metrics (http_route.h), as agent_api_dispatch routes. */
static const char *const agent_api_routes[] = {
    "/v1/agent/self",
    "/v1/agent/plugins",
    "/v1/agent/owners",
    "/v1/agent/mounts",
    "/v1/agent/mounts/{volume}/{alloc}",
    "/v1/agent/volumes/{volume}/mount",
    "/v1/agent/volumes/{volume}/mount/{alloc}",
    "/v1/agent/volumes/{volume}/mount/{alloc}/renew",
    CSI_REMOTE_PREFIX "{plugin}/{method}",
    METRICS_API_PATH,
    NULL,
};

/*
 * On TCP, nothing is served without authentication: a client certificate
 * of the listener's client CA, or the agent's server_token (the unix
 * socket is guarded by its file mode). Controller RPCs check the token
 * again in their handler.
 */
static int agent_api_tcp_auth(struct agent_api *a, const struct http_request *req, struct err *e)
{
	const char *tok;

	if (!http_request_tcp(req) || http_request_client_cert(req))
		return 0;
	if (!a->server_token)
		return err_set(e, CSID_EPERM,
			       "agent api on TCP: no server_token nor http.tls_client_ca_file is "
			       "configured, so nothing is served here; use the unix socket");
	tok = http_request_token(req);
	if (!tok || !tok[0])
		return err_set(e, CSID_EPERM,
			       "agent api on TCP: a token (X-Csid-Token: the agent's server_token) "
			       "or a client certificate is required");
	if (!http_token_eq(tok, a->server_token))
		return err_set(e, CSID_EPERM, "unknown token");
	return 0;
}

/*
 * Dispatches. A mount or unmount changes the held allocations the node
 * reports; the change rides the next heartbeat (agent/held_allocs.h).
 */
static int agent_api_route(void *ctx, const struct http_request *req, struct http_reply *rep,
			   struct err *e)
{
	struct agent_api *a = ctx;
	int rc = agent_api_tcp_auth(a, req, e);

	if (rc)
		return rc;
	return agent_api_dispatch(ctx, req, rep, e);
}

static char *agent_api_dup(const char *s)
{
	return s ? strdup(s) : NULL;
}

int agent_api_start(const struct agent_api_config *cfg, struct agent_api **out, struct err *e)
{
	struct http_server_config hc = {
	    .name = "agent api",
	    .socket_path = cfg->socket_path,
	    .tcp_addr = cfg->tcp_addr,
	    .body_max = AGENT_API_BODY_MAX,
	    .handler = agent_api_route,
	    .routes = agent_api_routes,
	    /* Its handlers never park: each runs on its connection's thread (no hand-off). */
	    .threaded = true,
	};
	struct agent_metrics_config mc = {.mounter = cfg->mounter, .claims = cfg->claims};
	struct agent_api *a;
	int rc;

	*out = NULL;
	if (!cfg->socket_path || !cfg->plugins || !cfg->registry || !cfg->mounter || !cfg->claims)
		return err_set(e, CSID_EINVAL,
			       "agent api: socket, plugin manager, registry, mounter "
			       "and claim flow required");
	a = calloc(1, sizeof(*a));
	if (!a)
		return err_set(e, CSID_ENOMEM, "out of memory");
	a->cfg = *cfg;
	a->socket_path = agent_api_dup(cfg->socket_path);
	a->tcp_addr = agent_api_dup(cfg->tcp_addr);
	a->node_name = agent_api_dup(cfg->node_name ? cfg->node_name : "");
	a->data_dir = agent_api_dup(cfg->data_dir ? cfg->data_dir : "");
	a->started_ms = clock_wall_ms(clock_real());
	if (a->cfg.plugin_wait_ms <= 0)
		a->cfg.plugin_wait_ms = 30000;
	if (a->cfg.rpc_timeout_ms <= 0)
		a->cfg.rpc_timeout_ms = CSI_DEFAULT_TIMEOUT_MS;
	a->cfg.server_token = NULL;
	if (cfg->server_token && cfg->server_token[0])
		a->server_token = strdup(cfg->server_token);
	if (!a->socket_path || (cfg->tcp_addr && !a->tcp_addr) || !a->node_name || !a->data_dir ||
	    (cfg->server_token && cfg->server_token[0] && !a->server_token)) {
		rc = err_set(e, CSID_ENOMEM, "out of memory");
		goto fail;
	}
	a->np.plugins = cfg->plugins;
	a->np.registry = cfg->registry;
	a->np.supervisor = cfg->supervisor;
	a->np.wait_ms = a->cfg.plugin_wait_ms;
	hc.ctx = a;
	hc.limits = cfg->limits;
	hc.tls = cfg->tls;
	if ((rc = agent_metrics_start(&mc, &a->metrics, e)))
		goto fail;
	rc = http_server_start(&hc, &a->http, e);
	if (rc)
		goto fail;
	if (cfg->docker && cfg->docker->name &&
	    (rc = docker_plugin_start(a, cfg->docker, &a->docker, e))) {
		char q[600];

		if (!cfg->docker->optional)
			goto fail;
		log_warn("msg=\"docker volume plugin not started\" error=%s",
			 log_q(q, sizeof(q), e->msg));
		err_clear(e);
	}
	if (a->tcp_addr && !a->server_token && !cfg->tls.client_ca_file)
		log_warn("msg=\"the agent api on TCP refuses every request: it has no "
			 "server_token nor client CA\" addr=%s",
			 a->tcp_addr);
	*out = a;
	return 0;
fail:
	agent_api_stop(a);
	return rc;
}

void agent_api_stop(struct agent_api *a)
{
	if (!a)
		return;
	docker_plugin_stop(a->docker);
	http_server_stop(a->http);
	agent_metrics_stop(a->metrics);
	free(a->socket_path);
	free(a->tcp_addr);
	free(a->node_name);
	free(a->data_dir);
	if (a->server_token) {
		explicit_bzero(a->server_token, strlen(a->server_token));
		free(a->server_token);
	}
	free(a);
}
