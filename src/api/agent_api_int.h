/*
 * Private parts of the agent API shared by its files: the server object
 * and the resource handlers. A handler gets the request, returns 0 with a
 * JSON document to send (status 200) or a negative code with e set; it
 * never touches libmicrohttpd, so http.c alone speaks HTTP.
 */
#ifndef CSID_API_AGENT_API_INT_H
#define CSID_API_AGENT_API_INT_H

#include <stdbool.h>

#include <jansson.h>

#include "agent/node_plugins.h"
#include "api/agent_api.h"
#include "api/http.h"

struct agent_api {
	struct agent_api_config cfg;
	struct node_plugins np; /* the node plugins of the low-level mounts */
	char *socket_path;
	char *tcp_addr;
	char *node_name;
	char *data_dir;
	char *server_token; /* NULL: controller RPCs refused; wiped on stop */
	int64_t started_ms; /* wall clock */
	struct http_server *http;
};

/* agent_api_mounts.c */
int agent_api_mounts_list(struct agent_api *a, json_t **out, struct err *e);
int agent_api_mounts_put(struct agent_api *a, const char *body, size_t len, json_t **out,
			 struct err *e);
/* force: the value of the "force" query parameter ("true", "false"), NULL when absent. */
int agent_api_mounts_delete(struct agent_api *a, const char *url, const char *force, json_t **out,
			    struct err *e);

/* agent_api_claims.c: PUT /v1/agent/volumes/<vol>/mount, through the claim flow. */
int agent_api_volume_mount(struct agent_api *a, const char *vol, const char *body, size_t len,
			   json_t **out, struct err *e);
/* DELETE /v1/agent/volumes/<vol>/mount/<alloc>. */
int agent_api_volume_unmount(struct agent_api *a, const char *vol, const char *alloc, json_t **out,
			     struct err *e);

/* agent_api_owners.c: PUT /v1/agent/volumes/<vol>/mount/<alloc>/renew. */
int agent_api_owner_renew(struct agent_api *a, const char *vol, const char *alloc, const char *body,
			  size_t len, json_t **out, struct err *e);
/* GET /v1/agent/owners. */
int agent_api_owners_list(struct agent_api *a, json_t **out, struct err *e);

/* agent_api_plugins.c */
int agent_api_plugins_list(struct agent_api *a, json_t **out, struct err *e);
int agent_api_self(struct agent_api *a, json_t **out, struct err *e);

/* agent_api_controller.c: POST /v1/agent/controller/<plugin>/<Method>. */
int agent_api_controller_call(struct agent_api *a, const struct http_request *req,
			      struct http_reply *rep, struct err *e);

#endif
