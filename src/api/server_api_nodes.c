/*
 * Node, plugin and health resources of the server API. PUT /v1/node/<id>
 * registers a node with its fingerprint and is its heartbeat; its answer
 * names, in "released", the reported allocations that hold no active
 * claim on the node any more (server/server_gc.h), for the agent to
 * unmount, and in "expand" the reported volumes that want
 * NodeExpandVolume on the node ({"volume_id", "plugin_id", "capacity"}),
 * for the agent to grow and report (PUT /v1/volume/<id>/node-expanded).
 * Plugins are the server's view derived from the fingerprints and its own
 * controller plugins. GET /v1/status/reconciler gives the
 * reconciler's queue over the last minutes (server_history.h) for the web
 * console's chart.
 */
#include "api/server_api_int.h"

#include <stdlib.h>
#include <string.h>

#include "server/server_gc.h"
#include "server/server_install.h"

static int nodes_json(const struct model_node *n, json_t **out, struct err *e)
{
	char *t;
	size_t len;
	int rc = model_node_encode_api(n, &t, &len, e);

	if (rc)
		return rc;
	*out = server_api_json(t, len);
	free(t);
	return *out ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
}

int server_api_nodes(struct server_api *api, const struct http_request *req, struct http_reply *rep,
		     struct err *e)
{
	struct model_node **nodes = NULL;
	struct arena *a;
	json_t *arr, *j;
	uint64_t index = 0;
	size_t n = 0, i;
	int rc;

	if (strcmp(req->method, "GET") != 0) {
		rep->allow = "GET";
		return HTTP_METHOD_NOT_ALLOWED;
	}
	rc = server_api_block(api, req, STORE_NODE, NULL, e);
	if (rc)
		return rc;
	a = arena_new();
	if (!a)
		return err_set(e, CSID_ENOMEM, "out of memory");
	rc = server_node_list(api->server, a, &nodes, &n, &index, e);
	arr = json_array();
	if (!rc && !arr)
		rc = err_set(e, CSID_ENOMEM, "out of memory");
	for (i = 0; i < n && !rc; i++) {
		rc = nodes_json(nodes[i], &j, e);
		if (!rc)
			json_array_append_new(arr, j);
	}
	if (!rc) {
		rep->doc = json_pack("{s:o}", "nodes", arr);
		arr = NULL;
		server_api_set_index(rep, index);
		rc = rep->doc ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
	}
	json_decref(arr);
	arena_free(a);
	return rc;
}

/*
 * Adds the answer to node n's report (server_gc_answer) to the doc of its
 * PUT: "released" allocations and the volumes to "expand" there.
 */
static int nodes_answer(struct server_api *api, const struct model_node *in, struct arena *a,
			json_t *doc, struct err *e)
{
	struct server_gc_answer ans;
	json_t *rel, *exp;
	int rc = server_gc_answer(api->server, in->id, in->allocs, in->nallocs, a, &ans, e);

	if (rc)
		return rc;
	rel = json_array();
	exp = json_array();
	for (size_t i = 0; rel && i < ans.nreleased; i++)
		if (json_array_append_new(rel, json_pack("{s:s, s:s, s:s}", "volume_id",
							 ans.released[i].volume_id, "alloc_id",
							 ans.released[i].alloc_id, "note",
							 ans.released[i].note)))
			break;
	for (size_t i = 0; exp && i < ans.nexpand; i++)
		if (json_array_append_new(exp, json_pack("{s:s, s:s, s:I}", "volume_id",
							 ans.expand[i].volume_id, "plugin_id",
							 ans.expand[i].plugin_id, "capacity",
							 (json_int_t)ans.expand[i].capacity)))
			break;
	rc = !rel || !exp || json_array_size(rel) != ans.nreleased ||
	     json_array_size(exp) != ans.nexpand;
	if (!rc)
		rc = json_object_set(doc, "released", rel) || json_object_set(doc, "expand", exp);
	json_decref(rel);
	json_decref(exp);
	return rc ? err_set(e, CSID_ENOMEM, "out of memory") : 0;
}

int server_api_node(struct server_api *api, const struct http_request *req, struct http_reply *rep,
		    struct err *e)
{
	struct model_node *n = NULL, *in = NULL;
	const char *rest;
	char id[MODEL_ID_MAX + 1];
	struct arena *a;
	int rc;

	rest = http_path_segment(req->url, "/v1/node/", id, sizeof(id));
	if (!rest)
		return err_set(e, CSID_EINVAL, "node id: empty or longer than %d bytes",
			       MODEL_ID_MAX);
	if (rest[0])
		return err_set(e, CSID_ENOTFOUND, "no such endpoint: %.200s", req->url);
	rc = model_id_check("node id", id, strlen(id), e);
	if (rc)
		return rc;
	a = arena_new();
	if (!a)
		return err_set(e, CSID_ENOMEM, "out of memory");
	if (strcmp(req->method, "GET") == 0) {
		rc = server_api_block(api, req, STORE_NODE, id, e);
		if (!rc)
			rc = server_node_get(api->server, id, a, &n, e);
	} else if (strcmp(req->method, "PUT") == 0) {
		rc = server_api_decode_node(a, req->body, req->len, id, &in, e);
		if (!rc)
			rc = server_node_put(api->server, in, a, &n, e);
	} else {
		rep->allow = "GET, PUT";
		rc = HTTP_METHOD_NOT_ALLOWED;
	}
	if (!rc && n) {
		rc = nodes_json(n, &rep->doc, e);
		server_api_set_index(rep, n->modify_index);
	}
	if (!rc && n && in && in->allocs_reported)
		rc = nodes_answer(api, in, a, rep->doc, e);
	arena_free(a);
	return rc;
}

static json_t *nodes_strings(char **v, size_t n)
{
	json_t *arr = json_array();
	size_t i;

	for (i = 0; arr && i < n; i++)
		json_array_append_new(arr, json_string(v[i]));
	return arr;
}

static json_t *nodes_plugin_json(const struct server_plugin *p)
{
	json_t *inst = json_array();
	size_t i;

	for (i = 0; inst && i < p->ninstances; i++) {
		const struct server_plugin_instance *x = &p->instances[i];

		json_array_append_new(
		    inst,
		    json_pack("{s:s?, s:s, s:b, s:s?, s:s?}", "node_id", x->node_id, "type",
			      x->type == MODEL_PLUGIN_CONTROLLER ? "controller" : "node", "healthy",
			      x->healthy, "health", x->health, "version", x->version));
	}
	return json_pack("{s:s, s:b, s:{s:i, s:i}, s:{s:i, s:i}, s:o, s:o, s:o, s:o}", "id", p->id,
			 "controller_required", p->controller_required, "controllers", "healthy",
			 p->controllers_healthy, "expected", p->controllers_expected, "nodes",
			 "healthy", p->nodes_healthy, "expected", p->nodes_expected, "versions",
			 nodes_strings(p->versions, p->nversions), "controller_capabilities",
			 nodes_strings(p->controller_caps, p->ncontroller_caps),
			 "node_capabilities", nodes_strings(p->node_caps, p->nnode_caps),
			 "instances", inst);
}

int server_api_plugins(struct server_api *api, const struct http_request *req,
		       struct http_reply *rep, struct err *e)
{
	struct server_plugin *ps = NULL;
	struct arena *a;
	json_t *arr;
	size_t n = 0, i;
	int rc;

	if (strcmp(req->method, "GET") != 0) {
		rep->allow = "GET";
		return HTTP_METHOD_NOT_ALLOWED;
	}
	rc = server_api_block(api, req, STORE_NODE, NULL, e);
	if (rc)
		return rc;
	a = arena_new();
	if (!a)
		return err_set(e, CSID_ENOMEM, "out of memory");
	rc = server_plugin_list(api->server, a, &ps, &n, e);
	arr = rc ? NULL : json_array();
	for (i = 0; arr && i < n; i++)
		json_array_append_new(arr, nodes_plugin_json(&ps[i]));
	if (!rc) {
		rep->doc = arr ? json_pack("{s:o}", "plugins", arr) : NULL;
		rc = rep->doc ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
		server_api_set_index(rep, store_index(api->store));
	}
	arena_free(a);
	return rc;
}

int server_api_plugin(struct server_api *api, const struct http_request *req,
		      struct http_reply *rep, struct err *e)
{
	struct server_plugin *p = NULL;
	const char *rest;
	char id[MODEL_PLUGIN_ID_MAX + 1];
	struct arena *a;
	int rc;

	if (strcmp(req->method, "GET") != 0) {
		rep->allow = "GET";
		return HTTP_METHOD_NOT_ALLOWED;
	}
	rest = http_path_segment(req->url, "/v1/plugin/", id, sizeof(id));
	if (!rest)
		return err_set(e, CSID_EINVAL, "plugin id: empty or longer than %d bytes",
			       MODEL_PLUGIN_ID_MAX);
	if (rest[0])
		return err_set(e, CSID_ENOTFOUND, "no such endpoint: %.200s", req->url);
	rc = model_plugin_id_check(id, e);
	if (!rc)
		rc = server_api_block(api, req, STORE_NODE, NULL, e);
	if (rc)
		return rc;
	a = arena_new();
	if (!a)
		return err_set(e, CSID_ENOMEM, "out of memory");
	rc = server_plugin_get(api->server, id, a, &p, e);
	if (!rc) {
		rep->doc = nodes_plugin_json(p);
		rc = rep->doc ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
		server_api_set_index(rep, store_index(api->store));
	}
	arena_free(a);
	return rc;
}

int server_api_health(struct server_api *api, const struct http_request *req,
		      struct http_reply *rep, struct err *e)
{
	struct server_health h;

	if (strcmp(req->method, "GET") != 0) {
		rep->allow = "GET";
		return HTTP_METHOD_NOT_ALLOWED;
	}
	server_health(api->server, &h);
	rep->doc =
	    json_pack("{s:b, s:s, s:I, s:s, s:{s:i, s:i}, s:{s:i, s:i}}", "ok", 1, "version",
		      CSID_VERSION, "index", (json_int_t)h.index, "store",
		      h.store_backend ? h.store_backend : "-", "reconciler", "queued", h.queued,
		      "failing", h.failing, "nodes", "ready", h.nodes_ready, "down", h.nodes_down);
	server_api_set_index(rep, h.index);
	return rep->doc ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
}

int server_api_reconciler(struct server_api *api, const struct http_request *req,
			  struct http_reply *rep, struct err *e)
{
	struct server_history_sample *samples;
	json_t *arr;
	int64_t now;
	size_t n;

	if (strcmp(req->method, "GET") != 0) {
		rep->allow = "GET";
		return HTTP_METHOD_NOT_ALLOWED;
	}
	samples = calloc(SERVER_HISTORY_SAMPLES, sizeof(*samples));
	if (!samples)
		return err_set(e, CSID_ENOMEM, "out of memory");
	n = server_reconciler_history(api->server, samples, &now);
	arr = json_array();
	for (size_t i = 0; arr && i < n; i++)
		json_array_append_new(arr,
				      json_pack("{s:I, s:i, s:i}", "age_ms",
						(json_int_t)(now - samples[i].time_ms), "queued",
						samples[i].queued, "failing", samples[i].failing));
	free(samples);
	rep->doc =
	    arr ? json_pack("{s:i, s:o}", "period_ms", SERVER_HISTORY_PERIOD_MS, "samples", arr)
		: NULL;
	return rep->doc ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
}

int server_api_leader(struct server_api *api, const struct http_request *req,
		      struct http_reply *rep, struct err *e)
{
	struct server_leader_status st;
	struct server_install inst;
	json_t *leader, *id;
	struct err ie;

	if (strcmp(req->method, "GET") != 0) {
		rep->allow = "GET";
		return HTTP_METHOD_NOT_ALLOWED;
	}
	server_leader_info(api->server, &st);
	id = server_installation(api->server, &inst, &ie) ? json_null() : json_string(inst.id);
	leader = st.leader_id[0] ? json_pack("{s:s, s:s, s:I, s:I}", "id", st.leader_id, "address",
					     st.leader_address, "since_ms", (json_int_t)st.since_ms,
					     "term", (json_int_t)st.term)
				 : json_null();
	if (leader && id) {
		/* "o" takes both references, also when the pack fails. */
		rep->doc = json_pack("{s:s, s:o, s:b, s:I, s:o, s:s?}", "server_id", st.server_id,
				     "installation", id, "leading", st.leading, "ttl_ms",
				     (json_int_t)st.ttl_ms, "leader", leader, "id_conflict",
				     st.id_conflict[0] ? st.id_conflict : NULL);
	} else {
		json_decref(leader);
		json_decref(id);
	}
	server_api_set_index(rep, store_index(api->store));
	return rep->doc ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
}

/* One setting: the installation's value beside the one this server runs with. */
static json_t *server_api_setting(const struct server_install_settings *stored,
				  const struct server_install_settings *mine, size_t i)
{
	bool agree;
	const char *key = server_install_key(i, &agree);

	return json_pack("{s:s, s:I, s:I, s:b}", "key", key, "installation_ms",
			 (json_int_t)server_install_value(stored, i), "server_ms",
			 (json_int_t)server_install_value(mine, i), "must_agree", agree);
}

int server_api_installation(struct server_api *api, const struct http_request *req,
			    struct http_reply *rep, struct err *e)
{
	struct server_install_settings mine;
	struct server_leader_status st;
	struct server_install inst;
	json_t *arr;
	int rc;

	if (strcmp(req->method, "GET") != 0) {
		rep->allow = "GET";
		return HTTP_METHOD_NOT_ALLOWED;
	}
	if ((rc = server_installation(api->server, &inst, e)))
		return rc;
	server_settings(api->server, &mine);
	server_leader_info(api->server, &st);
	arr = json_array();
	for (size_t i = 0; arr && i < server_install_nkeys(); i++)
		if (json_array_append_new(arr, server_api_setting(&inst.set, &mine, i))) {
			json_decref(arr);
			arr = NULL;
		}
	rep->doc =
	    arr ? json_pack("{s:s, s:I, s:s, s:o}", "installation", inst.id, "created_ms",
			    (json_int_t)inst.created_ms, "server_id", st.server_id, "settings", arr)
		: NULL;
	server_api_set_index(rep, store_index(api->store));
	return rep->doc ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
}

int server_api_members(struct server_api *api, const struct http_request *req,
		       struct http_reply *rep, struct err *e)
{
	struct server_member *m = NULL;
	struct arena *a;
	json_t *arr;
	size_t n = 0;
	int rc;

	if (strcmp(req->method, "GET") != 0) {
		rep->allow = "GET";
		return HTTP_METHOD_NOT_ALLOWED;
	}
	a = arena_new();
	if (!a)
		return err_set(e, CSID_ENOMEM, "out of memory");
	rc = server_members(api->server, a, &m, &n, e);
	arr = rc ? NULL : json_array();
	for (size_t i = 0; arr && i < n; i++)
		if (json_array_append_new(arr, json_pack("{s:s, s:s, s:I, s:b, s:I}", "id", m[i].id,
							 "address", m[i].address, "started_ms",
							 (json_int_t)m[i].started_ms, "leader",
							 m[i].leader, "nodes_heard",
							 (json_int_t)m[i].nseen))) {
			json_decref(arr);
			arr = NULL;
		}
	arena_free(a);
	if (rc)
		return rc;
	rep->doc = arr ? json_pack("{s:o}", "members", arr) : NULL;
	server_api_set_index(rep, store_index(api->store));
	return rep->doc ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
}
