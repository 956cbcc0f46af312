/*
 * The plugins and self resources of the agent API. GET /v1/agent/plugins
 * merges three views of each plugin: the registry's instances (oldest
 * first, the last one active), the plugin manager's health and
 * fingerprint of the active instance, and the supervisor's process state
 * (pid, restarts, backoff). A plugin the supervisor is still starting
 * appears with its configured type and no instance yet.
 */
#include "api/agent_api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"

static json_t *agent_api_caps(uint64_t bits, const char *(*name)(int bit))
{
	json_t *arr = json_array();

	for (int b = 1; arr && b < 64; b++) {
		const char *n;

		if (!(bits & (1ULL << b)))
			continue;
		n = name(b);
		json_array_append_new(arr, n ? json_string(n) : json_integer(b));
	}
	return arr;
}

static json_t *agent_api_fingerprint(const struct instance_manager_status *st)
{
	const struct plugin_fingerprint *f = &st->fingerprint;
	json_t *topo = json_object();

	for (int i = 0; topo && i < f->ntopology; i++)
		json_object_set_new(topo, f->topology[i].key, json_string(f->topology[i].value));
	return json_pack("{s:s, s:s, s:o, s:o, s:o, s:b, s:s, s:I, s:o}", "plugin_name",
			 f->plugin_name, "vendor_version", f->vendor_version, "plugin_capabilities",
			 agent_api_caps(f->plugin_caps, plugin_service_cap_name),
			 "controller_capabilities",
			 agent_api_caps(f->controller_caps, plugin_controller_cap_name),
			 "node_capabilities", agent_api_caps(f->node_caps, plugin_node_cap_name),
			 "stage_unstage", f->stage_unstage, "node_id", f->node_id, "max_volumes",
			 (json_int_t)f->max_volumes, "topology", topo ? topo : json_object());
}

static json_t *agent_api_supervisor_json(const struct supervisor_status *s)
{
	return json_pack("{s:s, s:s, s:s, s:i, s:b, s:i, s:i, s:I, s:s}", "mode",
			 s->external ? "external" : "supervised", "state", s->state, "instance_id",
			 s->instance_id, "pid", s->pid, "registered", s->registered, "restarts",
			 (int)s->restarts, "attempt", (int)s->attempt, "next_restart_ms",
			 (json_int_t)s->next_restart_ms, "message", s->message);
}

static const struct supervisor_status *agent_api_find_sv(const struct supervisor_status *ss,
							 size_t n, const char *id)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(ss[i].id, id) == 0)
			return &ss[i];
	return NULL;
}

static json_t *agent_api_plugin_json(const struct plugin_manager_plugin *p,
				     const struct supervisor_status *sv)
{
	const struct instance_manager_status *st = &p->status;
	json_t *insts = json_array(), *o;
	const char *active = p->ninstances ? p->instances[p->ninstances - 1].instance_id : "";

	for (size_t i = 0; insts && i < p->ninstances; i++) {
		const struct registry_instance *ri = &p->instances[i];

		json_array_append_new(insts,
				      json_pack("{s:s, s:s, s:I, s:b}", "instance_id",
						ri->instance_id, "endpoint", ri->endpoint,
						"registered_ms", (json_int_t)ri->registered_ms,
						"active", i + 1 == p->ninstances));
	}
	o = json_pack("{s:s, s:s, s:s, s:o, s:s, s:{s:b, s:s, s:I}, s:I}", "id", p->name, "type",
		      registry_type_name(p->type), "active_instance", active, "instances",
		      insts ? insts : json_array(), "state",
		      p->managed ? instance_manager_state_name(st->state) : "unmanaged", "health",
		      "healthy", p->managed && st->health.healthy, "description",
		      p->managed ? st->health.description : "no instance manager", "changed_ms",
		      (json_int_t)(p->managed ? st->health.changed_ms : 0), "last_probe_ms",
		      (json_int_t)(p->managed ? st->last_probe_ms : 0));
	if (!o)
		return NULL;
	if (p->managed && st->fingerprinted)
		json_object_set_new(o, "fingerprint", agent_api_fingerprint(st));
	if (sv)
		json_object_set_new(o, "supervisor", agent_api_supervisor_json(sv));
	return o;
}

/* A configured plugin with no registration yet (starting, or failing to start). */
static json_t *agent_api_pending_json(const struct supervisor_status *s, const char *type)
{
	json_t *o = json_pack("{s:s, s:s, s:s, s:[], s:s, s:{s:b, s:s, s:I}}", "id", s->id, "type",
			      type, "active_instance", "", "instances", "state", "not registered",
			      "health", "healthy", 0, "description",
			      s->message[0] ? s->message : s->state, "changed_ms", (json_int_t)0);

	if (o)
		json_object_set_new(o, "supervisor", agent_api_supervisor_json(s));
	return o;
}

static bool agent_api_listed(const struct plugin_manager_snapshot *snap, const char *id,
			     enum registry_type type)
{
	for (size_t i = 0; i < snap->nplugins; i++)
		if (snap->plugins[i].type == type && strcmp(snap->plugins[i].name, id) == 0)
			return true;
	return false;
}

int agent_api_plugins_list(struct agent_api *a, json_t **out, struct err *e)
{
	struct plugin_manager_snapshot snap = {0};
	struct supervisor_status *ss = NULL;
	size_t nss = 0;
	json_t *arr;
	int rc;

	rc = plugin_manager_snapshot(a->cfg.plugins, &snap, e);
	if (rc)
		return rc;
	if (a->cfg.supervisor && supervisor_snapshot(a->cfg.supervisor, &ss, &nss) != 0) {
		plugin_manager_snapshot_free(&snap);
		return err_set(e, CSID_ENOMEM, "out of memory");
	}
	arr = json_array();
	for (size_t i = 0; arr && i < snap.nplugins; i++) {
		const struct plugin_manager_plugin *p = &snap.plugins[i];

		json_array_append_new(
		    arr, agent_api_plugin_json(p, agent_api_find_sv(ss, nss, p->name)));
	}
	for (size_t i = 0; arr && i < nss; i++) {
		bool ctrl = ss[i].type != CONFIG_PLUGIN_NODE;
		bool node = ss[i].type != CONFIG_PLUGIN_CONTROLLER;

		if (ctrl && !agent_api_listed(&snap, ss[i].id, REGISTRY_CONTROLLER))
			json_array_append_new(arr, agent_api_pending_json(&ss[i], "controller"));
		if (node && !agent_api_listed(&snap, ss[i].id, REGISTRY_NODE))
			json_array_append_new(arr, agent_api_pending_json(&ss[i], "node"));
	}
	free(ss);
	plugin_manager_snapshot_free(&snap);
	*out = arr ? json_pack("{s:o}", "plugins", arr) : NULL;
	return *out ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
}

int agent_api_self(struct agent_api *a, json_t **out, struct err *e)
{
	struct plugin_manager_snapshot snap = {0};
	struct mount_record **recs = NULL;
	size_t nrec = 0, nplugins;
	int64_t now = clock_wall_ms(clock_real());
	int rc;

	rc = plugin_manager_snapshot(a->cfg.plugins, &snap, e);
	if (rc)
		return rc;
	nplugins = snap.nplugins;
	plugin_manager_snapshot_free(&snap);
	rc = mounter_list(a->cfg.mounter, &recs, &nrec, e);
	if (rc)
		return rc;
	mount_records_free(recs, nrec);
	*out = json_pack("{s:s, s:s, s:s, s:{s:s, s:s?}, s:I, s:I, s:i, s:i}", "node_name",
			 a->node_name, "data_dir", a->data_dir, "version", CSID_VERSION, "listener",
			 "socket", a->socket_path, "addr", a->tcp_addr, "started_ms",
			 (json_int_t)a->started_ms, "uptime_ms", (json_int_t)(now - a->started_ms),
			 "plugins", (int)nplugins, "mounts", (int)nrec);
	return *out ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
}
