/*
 * End-to-end helpers for an agent that runs the csi-hostpath plugin: its
 * config, what the agent says about the plugin, creating a volume through
 * the plugin's endpoint, and mounting through the agent's API.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_proc.h"
#include "csi/csi_client.h"
#include "hostpath_proc.h"

/* Defined by the build when src/cmd/csi-hostpath exists. */
#ifndef CSI_HOSTPATH_BIN
#define CSI_HOSTPATH_BIN "csi-hostpath"
#endif

int agent_proc_hostpath_config(struct agent_proc *a, const char *extra_env, char *buf, size_t len)
{
	int n = snprintf(
	    buf, len,
	    "{\"data_dir\": \"%s\", \"node_name\": \"node-e2e\",\n"
	    " \"timings\": {\"probe_interval\": \"100ms\", \"health_timeout\": \"5s\",\n"
	    "   \"resync_period\": \"1s\", \"backoff_base\": \"100ms\", \"backoff_max\": "
	    "\"800ms\",\n"
	    "   \"unhealthy_threshold\": \"1500ms\", \"socket_timeout\": \"10s\",\n"
	    "   \"stop_grace\": \"3s\"},\n"
	    " \"plugin_log_max_bytes\": 65536,\n"
	    " \"plugins\": [{\"id\": \"%s\", \"type\": \"monolith\", \"command\": \"%s\",\n"
	    "   \"args\": [\"--endpoint\", \"${CSI_ENDPOINT}\", \"--data-dir\", \"%s\",\n"
	    "     \"--node-id\", \"${NODE_NAME}\", \"--mode\", \"monolith\", \"--faults\", "
	    "\"%s\",\n"
	    "     \"--no-controller-publish\", \"--threads\", \"4\"],\n"
	    "   \"env\": %s}]}\n",
	    a->data_dir, AGENT_PROC_HP_ID, CSI_HOSTPATH_BIN, a->hp_dir, a->faults, extra_env);

	return n > 0 && (size_t)n < len ? 0 : -1;
}

int agent_proc_plugin(struct agent_proc *a, const char *id, const char *type,
		      struct agent_proc_plugin *out)
{
	json_t *doc = NULL, *list, *p;
	size_t i;

	memset(out, 0, sizeof(*out));
	if (agent_proc_http(a, "GET", "/v1/agent/plugins", NULL, &doc) != 200 || !doc) {
		json_decref(doc);
		return -1;
	}
	list = json_object_get(doc, "plugins");
	json_array_foreach(list, i, p)
	{
		json_t *insts = json_object_get(p, "instances"),
		       *sv = json_object_get(p, "supervisor");
		const char *active = json_string_value(json_object_get(p, "active_instance"));

		if (!json_is_string(json_object_get(p, "id")) ||
		    strcmp(json_string_value(json_object_get(p, "id")), id) != 0 ||
		    strcmp(json_string_value(json_object_get(p, "type")), type) != 0)
			continue;
		out->found = true;
		out->healthy =
		    json_is_true(json_object_get(json_object_get(p, "health"), "healthy"));
		out->ninstances = (int)json_array_size(insts);
		snprintf(out->active, sizeof(out->active), "%s", active ? active : "");
		if (out->ninstances > 0) {
			json_t *last = json_array_get(insts, json_array_size(insts) - 1);

			snprintf(out->endpoint, sizeof(out->endpoint), "%s",
				 json_string_value(json_object_get(last, "endpoint")));
		}
		out->pid = (int)json_integer_value(json_object_get(sv, "pid"));
		out->restarts = (int)json_integer_value(json_object_get(sv, "restarts"));
		out->attempt = (int)json_integer_value(json_object_get(sv, "attempt"));
	}
	json_decref(doc);
	return 0;
}

struct agent_proc_wait_ctx {
	struct agent_proc *a;
	const char *id;
};

static bool agent_proc_is_healthy(void *ctx)
{
	struct agent_proc_wait_ctx *w = ctx;
	struct agent_proc_plugin p;

	return agent_proc_plugin(w->a, w->id, "node", &p) == 0 && p.healthy && p.endpoint[0];
}

bool agent_proc_wait_healthy(struct agent_proc *a, const char *id, int64_t timeout_ms)
{
	struct agent_proc_wait_ctx w = {a, id};

	return agent_proc_poll(agent_proc_is_healthy, &w, timeout_ms);
}

struct agent_proc_replaced_ctx {
	struct agent_proc *a;
	const char *old;
};

static bool agent_proc_is_replaced(void *ctx)
{
	struct agent_proc_replaced_ctx *w = ctx;
	struct agent_proc_plugin p;

	return agent_proc_plugin(w->a, AGENT_PROC_HP_ID, "node", &p) == 0 && p.healthy &&
	       strcmp(p.active, w->old) != 0 && p.ninstances == 1;
}

bool agent_proc_wait_replaced(struct agent_proc *a, const char *old, int64_t timeout_ms)
{
	struct agent_proc_replaced_ctx w = {a, old};

	return agent_proc_poll(agent_proc_is_replaced, &w, timeout_ms);
}

/*
 * Probes until the plugin answers on this client's channel (30 s at most),
 * so the call that follows does not race a busy plugin's HTTP/2 handshake.
 * A fault script making Probe answer UNAVAILABLE would keep it waiting.
 */
static int agent_proc_connect(struct csi_client *c)
{
	Csi__V1__ProbeRequest r = CSI__V1__PROBE_REQUEST__INIT;
	int64_t deadline = agent_proc_now_ms() + 30000;
	struct csi_status st;

	while (agent_proc_now_ms() < deadline) {
		ProtobufCMessage *resp = NULL;

		memset(&st, 0, sizeof(st));
		c->call(c, CSI_RPC_PROBE, &r.base, &resp, 5000, &st);
		csi_msg_free(resp);
		if (st.code != CSI_UNAVAILABLE && st.code != CSI_DEADLINE_EXCEEDED)
			return 0;
		hpp_pause_ms(20);
	}
	return -1;
}

int agent_proc_create_volume(struct agent_proc *a, const char *name, char *id)
{
	Csi__V1__CreateVolumeRequest req = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	Csi__V1__CreateVolumeResponse *resp = NULL;
	Csi__V1__VolumeCapability cap = CSI__V1__VOLUME_CAPABILITY__INIT;
	Csi__V1__VolumeCapability__MountVolume mv = CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
	Csi__V1__VolumeCapability__AccessMode am = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__INIT;
	Csi__V1__CapacityRange cr = CSI__V1__CAPACITY_RANGE__INIT;
	Csi__V1__VolumeCapability *caps[] = {&cap};
	struct agent_proc_plugin p;
	struct csi_client *c = NULL;
	struct csi_status st;
	struct err e;
	int rc = -1;

	if (agent_proc_plugin(a, AGENT_PROC_HP_ID, "controller", &p) != 0 || !p.endpoint[0])
		return -1;
	if (csi_client_grpc_new(p.endpoint, &c, &e) != 0)
		return -1;
	am.mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER;
	cap.access_mode = &am;
	cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
	cap.mount = &mv;
	cr.required_bytes = 1 << 20;
	req.name = (char *)name;
	req.capacity_range = &cr;
	req.n_volume_capabilities = 1;
	req.volume_capabilities = caps;
	if (agent_proc_connect(c) == 0 && csi_create_volume(c, &req, &resp, 10000, &st) == 0 &&
	    resp->volume) {
		snprintf(id, 64, "%s", resp->volume->volume_id);
		rc = 0;
	} else {
		fprintf(stderr, "CreateVolume: %s: %s\n", csi_code_name(st.code), st.message);
	}
	csi_msg_free(resp ? &resp->base : NULL);
	csi_client_free(c);
	return rc;
}

long agent_proc_mount(struct agent_proc *a, const char *vol, const char *alloc, json_t **out)
{
	return agent_proc_mount_with(a, AGENT_PROC_HP_ID, vol, alloc, out);
}

long agent_proc_mount_with(struct agent_proc *a, const char *plugin, const char *vol,
			   const char *alloc, json_t **out)
{
	char body[1024];

	snprintf(
	    body, sizeof(body),
	    "{\"volume_id\": \"%s\", \"external_id\": \"%s\", \"plugin_id\": \"%s\","
	    " \"alloc_id\": \"%s\", \"read_only\": false, \"attachment_mode\": \"file-system\","
	    " \"access_mode\": \"multi-node-multi-writer\", \"mount_flags\": [],"
	    " \"volume_context\": {}, \"publish_context\": {},"
	    " \"secrets\": {\"token\": \"e2e-secret-value\"}}",
	    vol, vol, plugin, alloc);
	return agent_proc_http(a, "PUT", "/v1/agent/mounts", body, out);
}

static void *agent_proc_call_main(void *arg)
{
	struct agent_proc_call *c = arg;
	int64_t t0 = agent_proc_now_ms();

	c->status = c->unmount ? agent_proc_unmount(c->a, c->vol, c->alloc)
			       : agent_proc_mount(c->a, c->vol, c->alloc, NULL);
	c->ms = agent_proc_now_ms() - t0;
	return NULL;
}

int agent_proc_call_start(struct agent_proc_call *c)
{
	c->status = 0;
	return pthread_create(&c->th_, NULL, agent_proc_call_main, c) == 0 ? 0 : -1;
}

void agent_proc_call_join(struct agent_proc_call *c)
{
	pthread_join(c->th_, NULL);
}

long agent_proc_unmount(struct agent_proc *a, const char *vol, const char *alloc)
{
	char path[512];

	snprintf(path, sizeof(path), "/v1/agent/mounts/%s/%s", vol, alloc);
	return agent_proc_http(a, "DELETE", path, NULL, NULL);
}

int agent_proc_mount_count(struct agent_proc *a)
{
	json_t *doc = NULL;
	int n = -1;

	if (agent_proc_http(a, "GET", "/v1/agent/mounts", NULL, &doc) == 200 && doc)
		n = (int)json_array_size(json_object_get(doc, "mounts"));
	json_decref(doc);
	return n;
}

/* Replaces the first `from` in buf (size len) with `to`; -1 when absent or too long. */
static int agent_proc_replace(char *buf, size_t len, const char *from, const char *to)
{
	char *p = strstr(buf, from);
	size_t fl = strlen(from), tl = strlen(to), rest;

	if (!p || strlen(buf) - fl + tl + 1 > len)
		return -1;
	rest = strlen(p + fl);
	memmove(p + tl, p + fl, rest + 1);
	memcpy(p, to, tl);
	return 0;
}

int agent_proc_start_hostpath(struct agent_proc *a, const char *const *edits)
{
	char cfg[8192];

	if (agent_proc_hostpath_config(a, "{}", cfg, sizeof(cfg)) != 0)
		return -1;
	for (size_t i = 0; edits && edits[i] && edits[i + 1]; i += 2)
		if (agent_proc_replace(cfg, sizeof(cfg), edits[i], edits[i + 1]) != 0)
			return -1;
	if (agent_proc_write_config(a, cfg) != 0 || agent_proc_write_faults(a, "") != 0 ||
	    agent_proc_start(a) != 0 || agent_proc_wait_ready(a, AGENT_PROC_HP_START_MS) != 0 ||
	    !agent_proc_wait_healthy(a, AGENT_PROC_HP_ID, AGENT_PROC_HP_START_MS))
		return -1;
	return 0;
}

int agent_proc_setup_hostpath(void **state, const char *const *edits)
{
	return agent_proc_setup_hostpath_dir(state, edits, NULL);
}

int agent_proc_setup_hostpath_dir(void **state, const char *const *edits, const char *hp_dir)
{
	struct agent_proc *a = calloc(1, sizeof(*a));

	*state = a;
	if (!a || agent_proc_init(a) != 0)
		goto fail;
	if (hp_dir)
		snprintf(a->hp_dir, sizeof(a->hp_dir), "%s", hp_dir);
	if (agent_proc_start_hostpath(a, edits) != 0)
		goto fail;
	return 0;
fail:
	/* cmocka skips a test's teardown when its setup fails: clean up here. */
	if (a && a->dir[0])
		agent_proc_dump_log(a, "agent setup failed");
	agent_proc_teardown(state);
	return -1;
}

int agent_proc_teardown(void **state)
{
	struct agent_proc *a = *state;

	if (a) {
		agent_proc_cleanup(a);
		free(a);
		*state = NULL;
	}
	return 0;
}
