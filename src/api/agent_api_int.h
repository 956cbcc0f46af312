/*
 * Private parts of the agent API shared by its files: the server object
 * and the resource handlers. A handler gets the request, returns 0 with a
 * JSON document to send (status 200) or a negative code with e set; it
 * never touches libmicrohttpd, so http.c alone speaks HTTP.
 */
#ifndef CSID_API_AGENT_API_INT_H
#define CSID_API_AGENT_API_INT_H

#include <pthread.h>
#include <stdbool.h>

#include <jansson.h>
#include <sqlite3.h>

#include "agent/agent_metrics.h"
#include "agent/owners_watch.h"
#include "agent/server_link.h"
#include "api/agent_api.h"
#include "api/http.h"

struct agent_api {
	struct agent_api_config cfg;
	char *socket_path;
	char *tcp_addr;
	char *node_name;
	char *data_dir;
	char *server_token; /* NULL: controller RPCs refused; wiped on stop */
	char *instance_id; /* NULL: none; wiped on stop */
	int64_t started_ms; /* wall clock */
	struct http_server *http;
	struct curl_pool *conns; /* keep-alive handles for the servers */
	/* Pending releases (agent_api_release.c); the db is used under rel_mu. */
	sqlite3 *rel_db; /* NULL: releases are not recorded */
	pthread_mutex_t rel_mu;
	pthread_cond_t rel_cond;
	pthread_t rel_thread;
	bool rel_init, rel_started, rel_poke;
	bool rel_stop; /* atomic */
	/* Orphans to unmount (agent_api_orphans.c), under rel_mu. */
	struct agent_api_orphan *orphans;
	size_t norphans, orphans_cap;
	struct owners_watch *owners; /* claim owners (agent_api_owners.c); NULL without servers */
	struct agent_metrics *metrics; /* the metrics collector */
};

/* agent_api_mounts.c */
int agent_api_mounts_list(struct agent_api *a, json_t **out, struct err *e);
int agent_api_mounts_put(struct agent_api *a, const char *body, size_t len, json_t **out,
			 struct err *e);
/* force: the value of the "force" query parameter ("true", "false"), NULL when absent. */
int agent_api_mounts_delete(struct agent_api *a, const char *url, const char *force, json_t **out,
			    struct err *e);

/* Waits (plugin_wait_ms) for the node plugin and takes a reference on its client. */
int agent_api_node_plugin(struct agent_api *a, const char *plugin_id, struct plugin_ref *ref,
			  struct err *e);
/* Unmounts vol for alloc through the plugin that mounted it; CSID_ENOTFOUND: no record. */
int agent_api_unmount_one(struct agent_api *a, const char *vol, const char *alloc, struct err *e);

/* agent_api_claims.c: a volume of the servers mounted for an allocation, and unmounted. */
int agent_api_volume_mount(struct agent_api *a, const char *vol, const char *body, size_t len,
			   json_t **out, struct err *e);
/* reason: why (a claim owner gone), carried by the release to the server; NULL: asked. */
int agent_api_volume_unmount(struct agent_api *a, const char *vol, const char *alloc,
			     const char *reason, json_t **out, struct err *e);

/*
 * One request to the servers (method, path, body may be NULL), retried
 * with backoff while none answers: 0 and *doc (the caller's) for a 2xx
 * answer, else the code of the server's error (CSID_EUNAVAIL: none
 * answered) with e holding its message.
 */
int agent_api_server(struct agent_api *a, const char *method, const char *path, json_t *body,
		     json_t **doc, struct err *e);

/*
 * PUT /v1/volume/<vol>/release {"alloc_id": alloc, "reason": reason
 * (omitted when NULL)} on the servers;
 * patient: retried with backoff for a bounded time while no server
 * answers, else one try of each. CSID_EUNAVAIL: no server answered.
 */
int agent_api_release_send(struct agent_api *a, const char *vol, const char *alloc,
			   const char *reason, bool patient, struct err *e);

/*
 * agent_api_stage.c: GET /v1/volume/<vol>/node-stage?alloc_id=<alloc> on
 * the servers, once alloc's claim on this node is granted. Returns 0 and
 * *out (free with agent_api_stage_free), or a code with e set (never
 * quoting a value).
 */
int agent_api_stage_get(struct agent_api *a, const char *vol, const char *alloc,
			struct agent_api_stage **out, struct err *e);

/* agent_api_release.c: releases recorded until a server took them, retried by a thread. */
/* Opens the table at db_path (NULL: none) and starts the thread when servers are set. */
int agent_api_release_open(struct agent_api *a, const char *db_path, struct err *e);
/* The number of releases recorded and not yet taken (a is the struct agent_api). */
size_t agent_api_release_pending(void *a);
void agent_api_release_close(struct agent_api *a);
/* Records (add, with its reason or NULL) or forgets the pending release of vol for alloc; no-op
 * without a db. */
int agent_api_release_record(struct agent_api *a, const char *vol, const char *alloc,
			     const char *reason, bool add, struct err *e);
/* Wakes the retry thread. */
void agent_api_release_poke(struct agent_api *a);
/* Whether the api is stopping (server requests give up). */
bool agent_api_release_stopping(struct agent_api *a);

/* agent_api_orphans.c: mounts of claims the servers released while the node was away. */
/* Marks (on) or forgets that the claim flow mounted vol for alloc; no-op without a db. */
int agent_api_claimed_mark(struct agent_api *a, const char *vol, const char *alloc, bool on,
			   struct err *e);
/* Starts taking released allocations (after the release thread started); close stops it. */
void agent_api_orphans_open(struct agent_api *a);
void agent_api_orphans_close(struct agent_api *a);
/* Unmounts the queued orphans the claim flow mounted (on the release thread). */
void agent_api_orphans_run(struct agent_api *a);

/* agent_api_owners.c: claim owners of the mounts of agent_api_claims.c. */
/* Starts the owner watch (with servers only); db_path NULL: owners are not persisted. */
int agent_api_owners_open(struct agent_api *a, const char *db_path, struct err *e);
void agent_api_owners_close(struct agent_api *a);
/*
 * Decodes the mount body's "owner" and checks it on the system (the pid
 * lives: its start time is filled in; the cgroup is a live cgroup v2
 * directory). Returns 0 with *present, or CSID_EINVAL / CSID_EPRECOND.
 */
int agent_api_owner_check(struct agent_api *a, const char *body, size_t len,
			  struct owners_spec *out, bool *present, struct err *e);
/* Records s (a lease starts now) as the owner of the mount of vol for alloc. */
int agent_api_owner_record(struct agent_api *a, const char *vol, const char *alloc,
			   struct owners_spec *s, struct err *e);
/* Forgets the owner of the mount of vol for alloc (it was unmounted). */
void agent_api_owner_forget(struct agent_api *a, const char *vol, const char *alloc);
/* PUT /v1/agent/volumes/<vol>/mount/<alloc>/renew. */
int agent_api_owner_renew(struct agent_api *a, const char *vol, const char *alloc, const char *body,
			  size_t len, json_t **out, struct err *e);
/* GET /v1/agent/owners. */
int agent_api_owners_list(struct agent_api *a, json_t **out, struct err *e);

/* agent_api_plugins.c */
int agent_api_plugins_list(struct agent_api *a, json_t **out, struct err *e);
int agent_api_self(struct agent_api *a, json_t **out, struct err *e);
/* Whether plugin_id is known here as a node plugin (registered or configured). */
int agent_api_node_plugin_known(struct agent_api *a, const char *plugin_id, struct err *e);

/* agent_api_controller.c: POST /v1/agent/controller/<plugin>/<Method>. */
int agent_api_controller_call(struct agent_api *a, const struct http_request *req,
			      struct http_reply *rep, struct err *e);

#endif
