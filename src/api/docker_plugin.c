/*
 * The Docker volume plugin protocol (docker_plugin.h): decoding, the
 * answers, the listener, and the seam through which the bridge
 * (agent/docker_bridge.h) reaches the agent. That seam, the functions
 * docker_plugin_op_*, is the one place that calls the node's claim flow
 * and the servers: when the claim flow moves, only they change.
 */
#include "api/docker_plugin.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/docker_bridge.h"
#include "api/agent_api_int.h"
#include "api/http.h"
#include "util/log.h"

#define DOCKER_PLUGIN_STR_MAX 1024

struct docker_plugin {
	struct agent_api *api; /* borrowed */
	struct docker_bridge *bridge;
	struct http_server *http;
	char *spec_file; /* written by us: removed on stop; NULL: none */
};

/* ---- decoding ---- */

static const struct {
	const char *path;
	enum docker_plugin_op op;
	bool name, id, opts;
} docker_plugin_calls[] = {
    {"/Plugin.Activate", DOCKER_PLUGIN_ACTIVATE, false, false, false},
    {"/VolumeDriver.Create", DOCKER_PLUGIN_CREATE, true, false, true},
    {"/VolumeDriver.Remove", DOCKER_PLUGIN_REMOVE, true, false, false},
    {"/VolumeDriver.Mount", DOCKER_PLUGIN_MOUNT, true, true, false},
    {"/VolumeDriver.Unmount", DOCKER_PLUGIN_UNMOUNT, true, true, false},
    {"/VolumeDriver.Path", DOCKER_PLUGIN_PATH, true, false, false},
    {"/VolumeDriver.Get", DOCKER_PLUGIN_GET, true, false, false},
    {"/VolumeDriver.List", DOCKER_PLUGIN_LIST, false, false, false},
    {"/VolumeDriver.Capabilities", DOCKER_PLUGIN_CAPABILITIES, false, false, false},
};

/* A required string member: non-empty, no NUL, at most DOCKER_PLUGIN_STR_MAX bytes. */
static int docker_plugin_str(json_t *doc, const char *key, const char **out, struct err *e)
{
	json_t *v = json_object_get(doc, key);

	if (!v)
		return err_set(e, CSID_EINVAL, "%s: required", key);
	if (!json_is_string(v))
		return err_set(e, CSID_EINVAL, "%s: expected a string", key);
	if (json_string_length(v) == 0 || json_string_length(v) > DOCKER_PLUGIN_STR_MAX ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return err_set(e, CSID_EINVAL, "%s: must be 1 to %d bytes, without NUL", key,
			       DOCKER_PLUGIN_STR_MAX);
	*out = json_string_value(v);
	return 0;
}

int docker_plugin_decode(const char *url, const char *body, size_t len,
			 struct docker_plugin_req *out, struct err *e)
{
	size_t n = sizeof(docker_plugin_calls) / sizeof(docker_plugin_calls[0]), i;
	json_error_t jerr;
	const char *key;
	json_t *v;
	int rc;

	memset(out, 0, sizeof(*out));
	for (i = 0; i < n && strcmp(url, docker_plugin_calls[i].path) != 0; i++)
		;
	if (i == n)
		return err_set(e, CSID_ENOTFOUND, "no such call: %.100s", url);
	out->op = docker_plugin_calls[i].op;
	out->doc = len ? json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr) : json_object();
	if (!out->doc)
		return err_set(e, CSID_EINVAL, "request body: not JSON: %.100s", jerr.text);
	if (!json_is_object(out->doc)) {
		rc = err_set(e, CSID_EINVAL, "request body: expected a JSON object");
		goto fail;
	}
	if (docker_plugin_calls[i].name &&
	    (rc = docker_plugin_str(out->doc, "Name", &out->name, e)))
		goto fail;
	if (docker_plugin_calls[i].id && (rc = docker_plugin_str(out->doc, "ID", &out->id, e)))
		goto fail;
	out->opts = docker_plugin_calls[i].opts ? json_object_get(out->doc, "Opts") : NULL;
	if (json_is_null(out->opts))
		out->opts = NULL;
	if (out->opts && !json_is_object(out->opts)) {
		rc = err_set(e, CSID_EINVAL, "Opts: expected an object of strings");
		goto fail;
	}
	json_object_foreach(out->opts, key, v)
	{
		if (!json_is_string(v)) {
			rc = err_set(e, CSID_EINVAL, "Opts.%.64s: expected a string", key);
			goto fail;
		}
	}
	return 0;
fail:
	docker_plugin_req_clear(out);
	return rc;
}

void docker_plugin_req_clear(struct docker_plugin_req *r)
{
	json_decref(r->doc);
	memset(r, 0, sizeof(*r));
}

/* ---- the seam: every call into the agent's claim flow and the servers ---- */

static int docker_plugin_op_server(void *ctx, const char *method, const char *path, json_t *body,
				   json_t **doc, struct err *e)
{
	struct agent_api *a = ctx;

	return claims_server_request(a->cfg.claims, method, path, body, doc, e);
}

static int docker_plugin_op_mount(void *ctx, const char *vol, const char *alloc, char *path,
				  size_t cap, struct err *e)
{
	struct agent_api *a = ctx;
	struct claims_mount_req req = {.volume_id = vol, .alloc_id = alloc};
	struct claims_mount_result *res = malloc(sizeof(*res));
	int rc;

	if (!res)
		return err_set(e, CSID_ENOMEM, "out of memory");
	rc = claims_mount(a->cfg.claims, &req, res, e);
	if (rc == 0)
		snprintf(path, cap, "%s", res->path);
	free(res);
	return rc;
}

static int docker_plugin_op_unmount(void *ctx, const char *vol, const char *alloc,
				    const char *reason, struct err *e)
{
	struct agent_api *a = ctx;
	struct claims_unmount_result res;

	return claims_unmount(a->cfg.claims, vol, alloc, reason, &res, e);
}

static int docker_plugin_op_mounts(void *ctx, json_t **out, struct err *e)
{
	struct agent_api *a = ctx;
	struct mount_record **recs = NULL;
	size_t n = 0;
	int rc = mounter_list(a->cfg.mounter, &recs, &n, e);

	if (rc)
		return rc;
	*out = json_array();
	for (size_t i = 0; *out && i < n; i++)
		json_array_append_new(
		    *out, json_pack("{s:s, s:s, s:s, s:s}", "volume_id", recs[i]->volume_id,
				    "alloc_id", recs[i]->alloc_id, "target", recs[i]->target_path,
				    "state", mount_state_name(recs[i]->state)));
	mount_records_free(recs, n);
	return *out ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
}

static int docker_plugin_op_plugins(void *ctx, json_t **out, struct err *e)
{
	struct agent_api *a = ctx;
	struct plugin_manager_snapshot snap;
	int rc = plugin_manager_snapshot(a->cfg.plugins, &snap, e);

	if (rc)
		return rc;
	*out = json_array();
	for (size_t i = 0; *out && i < snap.nplugins; i++)
		if (snap.plugins[i].type == REGISTRY_NODE)
			json_array_append_new(*out, json_string(snap.plugins[i].name));
	plugin_manager_snapshot_free(&snap);
	return *out ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
}

static int docker_plugin_op_owner(void *ctx, const char *vol, const char *alloc, int pid,
				  struct err *e)
{
	struct agent_api *a = ctx;
	struct owners_spec s = {.kind = OWNERS_PID, .pid = pid};

	return claims_owner_set(a->cfg.claims, vol, alloc, &s, e);
}

/* ---- answers ---- */

static const char *docker_plugin_call_name(const char *url)
{
	return url[0] == '/' ? url + 1 : url;
}

/* Runs one decoded call: 0 with *doc, or a code with e set. */
static int docker_plugin_call(struct docker_plugin *p, const struct docker_plugin_req *r,
			      json_t **doc, struct err *e)
{
	char path[DOCKER_BRIDGE_PATH_MAX];
	json_t *v = NULL;
	int rc = 0;

	switch (r->op) {
	case DOCKER_PLUGIN_ACTIVATE:
		*doc = json_pack("{s:[s]}", "Implements", "VolumeDriver");
		break;
	case DOCKER_PLUGIN_CAPABILITIES:
		*doc = json_pack("{s:{s:s}}", "Capabilities", "Scope", "global");
		break;
	case DOCKER_PLUGIN_CREATE:
		rc = docker_bridge_create(p->bridge, r->name, r->opts, e);
		*doc = rc ? NULL : json_pack("{s:s}", "Err", "");
		break;
	case DOCKER_PLUGIN_REMOVE:
		rc = docker_bridge_remove(p->bridge, r->name, e);
		*doc = rc ? NULL : json_pack("{s:s}", "Err", "");
		break;
	case DOCKER_PLUGIN_MOUNT:
		rc = docker_bridge_mount(p->bridge, r->name, r->id, path, e);
		*doc = rc ? NULL : json_pack("{s:s, s:s}", "Mountpoint", path, "Err", "");
		break;
	case DOCKER_PLUGIN_UNMOUNT:
		rc = docker_bridge_unmount(p->bridge, r->name, r->id, e);
		*doc = rc ? NULL : json_pack("{s:s}", "Err", "");
		break;
	case DOCKER_PLUGIN_PATH:
		rc = docker_bridge_path(p->bridge, r->name, path, e);
		*doc = rc ? NULL : json_pack("{s:s, s:s}", "Mountpoint", path, "Err", "");
		break;
	case DOCKER_PLUGIN_GET:
		rc = docker_bridge_get(p->bridge, r->name, &v, e);
		*doc = rc ? NULL : json_pack("{s:o, s:s}", "Volume", v, "Err", "");
		break;
	case DOCKER_PLUGIN_LIST:
		rc = docker_bridge_list(p->bridge, &v, e);
		*doc = rc ? NULL : json_pack("{s:o, s:s}", "Volumes", v, "Err", "");
		break;
	}
	if (rc == 0 && !*doc)
		rc = err_set(e, CSID_ENOMEM, "out of memory");
	return rc;
}

static int docker_plugin_route(void *ctx, const struct http_request *req, struct http_reply *rep,
			       struct err *e)
{
	struct docker_plugin *p = ctx;
	struct docker_plugin_req r;
	int rc = docker_plugin_decode(req->url, req->body, req->len, &r, e);

	/* The protocol's error: {"Err"}, status 200 (404 for a call that does not exist). */
	if (rc == CSID_ENOTFOUND)
		rep->status = 404;
	if (rc == 0)
		rc = docker_plugin_call(p, &r, &rep->doc, e);
	docker_plugin_req_clear(&r);
	if (rc == 0)
		return 0;
	rep->doc = json_pack("{s:s+}", "Err", "csid: ", e->msg);
	if (!rep->doc)
		return err_set(e, CSID_ENOMEM, "out of memory");
	{
		char q[160];

		log_info("msg=\"docker plugin call failed\" call=%s code=%s",
			 log_q(q, sizeof(q), docker_plugin_call_name(req->url)), csid_err_code(rc));
	}
	return 0;
}

/* ---- listener ---- */

/* Makes the socket's directory (one level, as /run/docker/plugins needs). */
static int docker_plugin_mkdir(const char *socket, struct err *e)
{
	char dir[4096];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", socket);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	for (char *q = strchr(dir + 1, '/');; q = strchr(q + 1, '/')) {
		if (q)
			*q = '\0';
		if (mkdir(dir, 0755) != 0 && errno != EEXIST)
			return err_errno(e, errno, "docker plugin: directory %s", dir);
		if (!q)
			break;
		*q = '/';
	}
	return 0;
}

/* Writes "unix://<socket>" to path atomically. */
static int docker_plugin_write_spec(const char *path, const char *socket, struct err *e)
{
	char tmp[4200];
	FILE *f;
	int rc;

	if ((rc = docker_plugin_mkdir(path, e)))
		return rc;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return err_errno(e, errno, "docker plugin: spec file %s", tmp);
	fprintf(f, "unix://%s\n", socket);
	if (fclose(f) != 0 || rename(tmp, path) != 0) {
		rc = err_errno(e, errno, "docker plugin: spec file %s", path);
		unlink(tmp);
		return rc;
	}
	return 0;
}

int docker_plugin_start(struct agent_api *a, const struct config_docker *cfg,
			struct docker_plugin **out, struct err *e)
{
	struct docker_bridge_config bc = {
	    .ops = {.server = docker_plugin_op_server,
		    .mount = docker_plugin_op_mount,
		    .unmount = docker_plugin_op_unmount,
		    .mounts = docker_plugin_op_mounts,
		    .plugins = docker_plugin_op_plugins,
		    .owner = docker_plugin_op_owner,
		    .ctx = a},
	    .engine_socket = cfg->engine_socket,
	    .mounts_dir = mounter_mounts_dir(a->cfg.mounter),
	};
	struct http_server_config hc = {
	    .name = "docker plugin",
	    .socket_path = cfg->socket,
	    .body_max = DOCKER_PLUGIN_BODY_MAX,
	    .error_key = "Err",
	    .handler = docker_plugin_route,
	    .threaded = true,
	};
	struct docker_plugin *p = calloc(1, sizeof(*p));
	int rc;

	*out = NULL;
	if (!p)
		return err_set(e, CSID_ENOMEM, "out of memory");
	p->api = a;
	hc.ctx = p;
	if ((rc = docker_bridge_new(&bc, &p->bridge, e)) ||
	    (rc = docker_plugin_mkdir(cfg->socket, e)) ||
	    (rc = http_server_start(&hc, &p->http, e)))
		goto fail;
	if (cfg->spec_file) {
		if ((rc = docker_plugin_write_spec(cfg->spec_file, cfg->socket, e)))
			goto fail;
		p->spec_file = strdup(cfg->spec_file);
	}
	log_info("msg=\"docker volume plugin serving\" name=%s socket=%s", cfg->name, cfg->socket);
	*out = p;
	return 0;
fail:
	docker_plugin_stop(p);
	return err_wrap(e, "docker plugin %s", cfg->name);
}

void docker_plugin_stop(struct docker_plugin *p)
{
	if (!p)
		return;
	http_server_stop(p->http);
	if (p->spec_file)
		unlink(p->spec_file);
	free(p->spec_file);
	docker_bridge_free(p->bridge);
	free(p);
}
