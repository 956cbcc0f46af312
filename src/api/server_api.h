/*
 * The server's HTTP API (JSON; paths in the style of Nomad's), on
 * libmicrohttpd with a thread per connection, over TCP and optionally a
 * unix socket:
 *
 *   GET    /v1/volumes?plugin=&node=&prefix=&per_page=&next_token=
 *   PUT    /v1/volume/<id>              register an existing volume
 *   PUT    /v1/volume/<id>/create       create it through the plugin
 *   GET    /v1/volume/<id>
 *   DELETE /v1/volume/<id>[?force=true] deregister
 *   DELETE /v1/volume/<id>/delete       DeleteVolume, then deregister
 *   PUT    /v1/volume/<id>/claim        {"alloc_id","node_id","mode",
 *                                        "access_mode","attachment_mode"}
 *   PUT    /v1/volume/<id>/release      {"alloc_id","force"}
 *   PUT    /v1/volume/<id>/detach       {"node_id"}
 *   PUT    /v1/volume/<id>/expand       {"capacity_min"}
 *   PUT    /v1/volume/<id>/node-expanded {"node_id", "capacity"} (agents)
 *   PUT    /v1/volume/<id>/modify       {"mutable_parameters": {...}}
 *   GET    /v1/snapshots?volume=&prefix=&per_page=&next_token=
 *   PUT    /v1/snapshot/<id>            {"volume_id","name","parameters","secrets"}
 *   GET    /v1/snapshot/<id>
 *   DELETE /v1/snapshot/<id>
 *   GET    /v1/plugins, GET /v1/plugin/<id>
 *   GET    /v1/nodes, GET /v1/node/<id>, PUT /v1/node/<id> (register + heartbeat)
 *   GET    /v1/status/health
 *   GET    /v1/status/reconciler        the queue over the last 10 minutes
 *   GET    /v1/status/leader            who leads, since when; this server's ID
 *   GET    /v1/status/members           every server of the installation
 *   GET    /v1/event/stream?index=N     newline-delimited JSON events
 *   GET    /v1/operator/snapshot        the catalogue at one index (write token)
 *   POST   /v1/operator/snapshot        restore one batch into an empty store
 *   GET    /ui/                         the web console (no token: it asks for one)
 *
 * Every GET is a blocking query with ?index=N&wait=30s: it answers when
 * the store's index moves past N (or the wait ends); the answer carries
 * the index in X-Csid-Index. Errors are {"error": "...", "code": "..."}
 * with the HTTP status of include/csid.h's table; request bodies are
 * capped; unknown JSON keys are refused with their path. With ACL tokens
 * configured, a request without a valid X-Csid-Token (or "Authorization:
 * Bearer") gets 403; read tokens may only GET. Secrets and mount flags
 * never appear in a response, event or log line.
 */
#ifndef CSID_API_SERVER_API_H
#define CSID_API_SERVER_API_H

#include <stddef.h>

#include "api/http.h"
#include "server/server.h"
#include "util/err.h"

#define SERVER_API_BODY_MAX (1024 * 1024)

struct server_api_token {
	const char *secret;
	bool write; /* false: read-only */
};

struct server_api_config {
	struct server *server; /* borrowed, required */
	const char *tcp_addr; /* "host:port", default "127.0.0.1:4646"; "" for none */
	const char *socket_path; /* optional unix listener */
	const struct server_api_token *tokens; /* none: no ACL */
	size_t ntokens;
	struct http_limits limits; /* connections, timeouts, workers; zeros: defaults */
	struct http_tls tls; /* HTTPS on the TCP listener; zeros: plaintext */
	/*
	 * Whether node-stage secrets may go over plaintext TCP to a
	 * non-loopback peer (refused otherwise, with how to fix it).
	 */
	bool plaintext_secrets;
};

struct server_api;

/* Binds the listeners and starts serving. Returns 0 and *out, or a code with e set. */
int server_api_start(const struct server_api_config *cfg, struct server_api **out, struct err *e);
/* Stops accepting, ends event streams and blocking queries, waits for the
 * requests in flight, removes the socket file, frees. NULL is a no-op. */
void server_api_stop(struct server_api *a);

#endif
