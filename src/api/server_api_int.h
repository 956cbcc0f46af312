/*
 * Private parts of the server API shared by its files: the API object,
 * the request decoders (server_api_decode.c, fuzzed), and the resource
 * handlers. A handler gets the request and answers through struct
 * http_reply; it never touches libmicrohttpd, so http.c alone speaks HTTP.
 */
#ifndef CSID_API_SERVER_API_INT_H
#define CSID_API_SERVER_API_INT_H

#include <stdatomic.h>

#include "api/http.h"
#include "api/server_api.h"

/* Longest wait of a blocking query, and its default. */
#define SERVER_API_WAIT_MAX_MS (10 * 60 * 1000)
#define SERVER_API_WAIT_DEFAULT_MS (5 * 60 * 1000)
/* Longest wait of a claim (PUT /v1/volume/<id>/claim?wait=): a longer one is cut to it. */
#define SERVER_API_CLAIM_WAIT_MAX_MS (60 * 1000)
/* How long the first run of a claim that waits holds its worker before it parks. */
#define SERVER_API_CLAIM_SPIN_MS 100

struct server_api {
	struct server *server;
	bool plaintext_secrets; /* node-stage secrets over plaintext TCP beyond loopback */
	struct store *store;
	struct server_api_token *tokens; /* copies */
	size_t ntokens;
	struct http_server *http;
	atomic_bool stopping;
};

/* --- server_api_decode.c: request bodies (strict JSON; unknown keys refused with their path) ---
 */

/*
 * {"alloc_id", "node_id", "mode": "read|write", "access_mode",
 * "attachment_mode", "held_by_agent"}; without access_mode (then mode is
 * required) out->cap.access is MODEL_ACCESS_UNKNOWN: the volume's first
 * capability; *attach_default: no attachment_mode was named
 * (server_volume_claim_default).
 */
int server_api_decode_claim(struct arena *a, const char *body, size_t len,
			    struct model_claim_request *out, bool *attach_default, struct err *e);
/* {"alloc_id", "force", "reason"}; *reason NULL when absent. */
int server_api_decode_release(struct arena *a, const char *body, size_t len, char **alloc_id,
			      bool *force, char **reason, struct err *e);
/* {"node_id"} */
int server_api_decode_detach(struct arena *a, const char *body, size_t len, char **node_id,
			     struct err *e);
/* {"capacity_min": bytes or "10GiB"} */
/* PUT /v1/volume/<id>/node-expanded {"node_id", "capacity"} (both required). */
int server_api_decode_node_expanded(struct arena *a, const char *body, size_t len, char **node_id,
				    int64_t *capacity, struct err *e);
int server_api_decode_expand(struct arena *a, const char *body, size_t len, int64_t *capacity,
			     struct err *e);
/* {"mutable_parameters": {...}} */
int server_api_decode_modify(struct arena *a, const char *body, size_t len, struct model_map *out,
			     struct err *e);
/* {"id", "volume_id", "name", "parameters", "secrets"}; id defaults to path_id and must match it.
 */
int server_api_decode_snapshot(struct arena *a, const char *body, size_t len, const char *path_id,
			       struct model_snapshot **out, struct err *e);
/* {"id", "plugins": [...]} (model.h's node shape, without status and times). */
int server_api_decode_node(struct arena *a, const char *body, size_t len, const char *path_id,
			   struct model_node **out, struct err *e);

/* --- resource handlers --- */

int server_api_volumes(struct server_api *api, const struct http_request *req,
		       struct http_reply *rep, struct err *e);
int server_api_volume(struct server_api *api, const struct http_request *req,
		      struct http_reply *rep, struct err *e);
int server_api_snapshots(struct server_api *api, const struct http_request *req,
			 struct http_reply *rep, struct err *e);
int server_api_snapshot(struct server_api *api, const struct http_request *req,
			struct http_reply *rep, struct err *e);
int server_api_nodes(struct server_api *api, const struct http_request *req, struct http_reply *rep,
		     struct err *e);
int server_api_node(struct server_api *api, const struct http_request *req, struct http_reply *rep,
		    struct err *e);
int server_api_plugins(struct server_api *api, const struct http_request *req,
		       struct http_reply *rep, struct err *e);
int server_api_plugin(struct server_api *api, const struct http_request *req,
		      struct http_reply *rep, struct err *e);
int server_api_health(struct server_api *api, const struct http_request *req,
		      struct http_reply *rep, struct err *e);
/* GET /v1/status/reconciler: {"period_ms", "samples": [{"age_ms", "queued", "failing"}]}. */
int server_api_reconciler(struct server_api *api, const struct http_request *req,
			  struct http_reply *rep, struct err *e);
/*
 * GET /v1/status/leader: {"server_id", "leading", "ttl_ms", "leader": {"id",
 * "address", "since_ms", "term"} or null}; GET /v1/status/members:
 * {"members": [{"id", "address", "started_ms", "leader", "nodes_heard"}]};
 * GET /v1/status/installation: {"installation", "created_ms", "server_id",
 * "settings": [{"key", "installation_ms", "server_ms", "must_agree"}]}.
 */
int server_api_leader(struct server_api *api, const struct http_request *req,
		      struct http_reply *rep, struct err *e);
int server_api_installation(struct server_api *api, const struct http_request *req,
			    struct http_reply *rep, struct err *e);
int server_api_members(struct server_api *api, const struct http_request *req,
		       struct http_reply *rep, struct err *e);
int server_api_events(struct server_api *api, const struct http_request *req,
		      struct http_reply *rep, struct err *e);
/* /v1/operator/snapshot: GET saves, POST restores one batch (server_api_operator.c). */
int server_api_operator(struct server_api *api, const struct http_request *req,
			struct http_reply *rep, struct err *e);
/* GET /ui/<file>: the web console's files (server_api_ui.c); no token needed. */
int server_api_ui(struct server_api *api, const struct http_request *req, struct http_reply *rep,
		  struct err *e);

/* --- shared helpers (server_api.c) --- */

/*
 * Blocking query: with ?index=N, waits (?wait=, bounded) until the index
 * the answer depends on is past N, the wait ends, or the API stops: the
 * modify index of object (kind, id), or the store's index when id is NULL
 * (lists) or the object is gone. Without ?index returns at once. Returns
 * 0 or CSID_EINVAL for bad arguments.
 */
int server_api_block(struct server_api *api, const struct http_request *req, enum store_kind kind,
		     const char *id, struct err *e);
/* Writes index to rep->index. */
void server_api_set_index(struct http_reply *rep, uint64_t index);
/* A JSON text (malloc'd) as a json_t, or NULL when out of memory. */
json_t *server_api_json(const char *text, size_t len);

#endif
