/*
 * A server and N agents with csi-hostpath on one shared data dir, as real
 * processes (see cluster.h): configs, start, waiting for the plugins to
 * count on the server, csictl as on one node, cleanup.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostpath_proc.h"

static const char cluster_server_config[] =
    "{\"data_dir\": \"@DIR@/d\", \"listen\": \"@ADDR@\", \"node_ttl\": \"30s\","
    " \"acl_tokens\": [{\"secret\": \"" CLUSTER_TOKEN "\", \"write\": true}],"
    " \"agent_token\": \"" CLUSTER_TOKEN "\", \"backoff_min\": \"20ms\","
    " \"backoff_max\": \"300ms\"}";

/* Starts agent i: joined to the server, its own listener, the first agent's hostpath data. */
static int cluster_start_agent(struct cluster *c, int i)
{
	struct agent_proc *a = calloc(1, sizeof(*a));
	char node[128], servers[1536];
	const char *edits[] = {"\"--no-controller-publish\", ",
			       "",
			       "\"node_name\": \"node-e2e\",",
			       node,
			       "\"plugin_log_max_bytes\": 65536,",
			       servers,
			       "\"stop_grace\": \"3s\"}",
			       "\"stop_grace\": \"3s\", \"heartbeat\": \"300ms\"}",
			       NULL};
	int port = server_proc_free_port();

	c->a[i] = a;
	if (!a || port < 0 || agent_proc_init(a) != 0)
		return -1;
	if (i > 0)
		snprintf(a->hp_dir, sizeof(a->hp_dir), "%s", c->a[0]->hp_dir);
	snprintf(c->node[i], sizeof(c->node[i]), "node-%d", i + 1);
	snprintf(node, sizeof(node),
		 "\"node_name\": \"%s\", \"listener\": {\"addr\": \"127.0.0.1:%d\"},", c->node[i],
		 port);
	snprintf(servers, sizeof(servers),
		 "\"plugin_log_max_bytes\": 65536, \"servers\": [\"%s\"],"
		 " \"server_token\": \"" CLUSTER_TOKEN "\", %s",
		 c->s.base, c->agent_extra[i] ? c->agent_extra[i] : "");
	snprintf(c->agent_env[i], sizeof(c->agent_env[i]), "CSID_AGENT_ADDR=unix:%s", a->sock);
	return agent_proc_start_hostpath(a, edits);
}

struct cluster_count_ctx {
	struct cluster *c;
	int want;
};

static bool cluster_counted(void *ctx)
{
	struct cluster_count_ctx *w = ctx;
	json_t *doc = NULL;
	int controllers = 0, nodes = 0;
	bool ok = server_proc_http(&w->c->s, "GET", "/v1/plugins", NULL, &doc) == 200 &&
		  server_proc_plugin_counts(doc, AGENT_PROC_HP_ID, &controllers, &nodes) &&
		  controllers == w->want && nodes == w->want;

	json_decref(doc);
	return ok;
}

int cluster_start(struct cluster *c, int n)
{
	struct cluster_count_ctx w = {c, n};
	const char *extra[CLUSTER_NODES_MAX];

	memcpy(extra, c->agent_extra, sizeof(extra));
	memset(c, 0, sizeof(*c));
	memcpy(c->agent_extra, extra, sizeof(extra));
	if (n < 1 || n > CLUSTER_NODES_MAX || server_proc_init(&c->s) != 0)
		return -1;
	if (server_proc_write_config(&c->s, cluster_server_config, NULL) != 0 ||
	    server_proc_start(&c->s) != 0 || !server_proc_wait_ready(&c->s, CLUSTER_WAIT_MS)) {
		server_proc_dump_log(&c->s, "cluster: server setup failed");
		return -1;
	}
	http_client_token(c->s.http, CLUSTER_TOKEN);
	snprintf(c->server_env, sizeof(c->server_env), "CSID_ADDR=%s", c->s.base);
	c->rn.dir = c->s.dir;
	c->rn.deadline_ms = 120000;
	for (c->n = 0; c->n < n; c->n++)
		if (cluster_start_agent(c, c->n) != 0) {
			c->n++;
			cluster_dump_logs(c, "cluster: agent setup failed");
			return -1;
		}
	if (!agent_proc_poll(cluster_counted, &w, CLUSTER_WAIT_MS)) {
		cluster_dump_logs(c, "cluster: the server never counted every plugin healthy");
		return -1;
	}
	return 0;
}

int cluster_setup2(void **state)
{
	struct cluster *c = calloc(1, sizeof(*c));

	*state = c;
	return c && cluster_start(c, 2) == 0 ? 0 : -1;
}

int cluster_teardown(void **state)
{
	struct cluster *c = *state;

	if (c) {
		cluster_cleanup(c);
		free(c);
		*state = NULL;
	}
	return 0;
}

void cluster_csictl(struct cluster *c, int i, struct csictl_run *r, char *const *args)
{
	char *env[] = {c->server_env, c->agent_env[i], "CSID_TOKEN=" CLUSTER_TOKEN, NULL};

	assert_true(i >= 0 && i < c->n);
	csictl_runner_run(&c->rn, r, env, args);
}

void cluster_create_volume(struct cluster *c, const char *id, const char *access_mode)
{
	char path[SERVER_PROC_PATH + 80], spec[512];
	char *args[] = {"volume", "create", path, "-wait", NULL};
	struct csictl_run r;
	json_t *v;

	snprintf(path, sizeof(path), "%s/%s.json", c->s.dir, id);
	snprintf(spec, sizeof(spec),
		 "{\"id\": \"%s\", \"plugin_id\": \"" AGENT_PROC_HP_ID "\","
		 " \"capacity_min\": \"1MiB\", \"capabilities\": [{\"access_mode\": \"%s\","
		 " \"attachment_mode\": \"file-system\"}]}\n",
		 id, access_mode);
	assert_int_equal(hpp_write_file(path, spec), 0);
	cluster_csictl(c, 0, &r, args);
	csictl_expect_ok(&r);
	csictl_runner_free(&c->rn, &r);
	v = cluster_volume(c, id);
	assert_true(server_proc_volume_ready(v));
	json_decref(v);
}

json_t *cluster_volume(struct cluster *c, const char *id)
{
	char path[256];
	json_t *doc = NULL;

	snprintf(path, sizeof(path), "/v1/volume/%s", id);
	assert_int_equal(server_proc_http(&c->s, "GET", path, NULL, &doc), 200);
	return doc;
}

/* Whether past, a past_claims array, shows alloc freed. */
static bool cluster_past_freed(json_t *past, const char *alloc)
{
	json_t *p;
	size_t i;

	json_array_foreach(past, i, p)
	{
		const char *id = json_string_value(json_object_get(p, "alloc_id"));
		const char *state = json_string_value(json_object_get(p, "state"));

		if (id && state && strcmp(id, alloc) == 0 && strcmp(state, "freed") == 0)
			return true;
	}
	return false;
}

struct cluster_freed_ctx {
	struct cluster *c;
	const char *id;
	const char *const *allocs;
};

static bool cluster_freed(void *ctx)
{
	struct cluster_freed_ctx *w = ctx;
	char path[256];
	json_t *doc = NULL;
	bool ok;

	snprintf(path, sizeof(path), "/v1/volume/%s", w->id);
	ok = server_proc_http(&w->c->s, "GET", path, NULL, &doc) == 200 &&
	     json_array_size(json_object_get(doc, "claims")) == 0 &&
	     json_array_size(json_object_get(doc, "publications")) == 0;
	for (size_t i = 0; ok && w->allocs[i]; i++)
		ok = cluster_past_freed(json_object_get(doc, "past_claims"), w->allocs[i]);
	json_decref(doc);
	return ok;
}

bool cluster_wait_freed(struct cluster *c, const char *id, const char *const *allocs)
{
	struct cluster_freed_ctx w = {c, id, allocs};

	if (agent_proc_poll(cluster_freed, &w, CLUSTER_WAIT_MS))
		return true;
	cluster_dump_logs(c, "cluster: claims never freed");
	return false;
}

void cluster_dump_logs(struct cluster *c, const char *why)
{
	for (int i = 0; i < c->n; i++)
		if (c->a[i] && c->a[i]->dir[0])
			agent_proc_dump_log(c->a[i], c->node[i]);
	if (c->s.dir[0])
		server_proc_dump_log(&c->s, why);
}

void cluster_cleanup(struct cluster *c)
{
	csictl_runner_cleanup(&c->rn);
	for (int i = CLUSTER_NODES_MAX - 1; i >= 0; i--) {
		if (!c->a[i])
			continue;
		agent_proc_cleanup(c->a[i]);
		free(c->a[i]);
		c->a[i] = NULL;
	}
	c->n = 0;
	if (c->s.dir[0])
		server_proc_cleanup(&c->s);
}
