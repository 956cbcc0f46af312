/*
 * `csictl csi info|caps|probe`: the Identity service, plus the capability
 * RPCs of the other services gathered into one view. `caps` asks the
 * controller only when the plugin advertises CONTROLLER_SERVICE and the
 * group controller only with GROUP_CONTROLLER_SERVICE, as a CO must; a
 * node service that answers UNIMPLEMENTED (a controller-only plugin) is
 * shown as having no capabilities rather than failing the command.
 */
#include "csictl_csi.h"

#include <string.h>

static int csictl_csi_identity_info_show(struct csictl_csi *c, const ProtobufCMessage *m)
{
	const Csi__V1__GetPluginInfoResponse *resp = (const Csi__V1__GetPluginInfoResponse *)m;
	struct csictl_table *t = csictl_table_new(2, NULL);
	char manifest[1024];

	if (t) {
		csictl_table_addv(t, "name:", resp->name);
		csictl_table_addv(t, "vendor version:", resp->vendor_version);
		csictl_table_addv(
		    t, "manifest:", csictl_out_map_join(m, "manifest", manifest, sizeof(manifest)));
	}
	return csictl_csi_print_table(c, t);
}

static int csictl_csi_identity_info(struct csictl_csi *c)
{
	Csi__V1__GetPluginInfoRequest req = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;

	return csictl_csi_call_show(c, CSI_RPC_GET_PLUGIN_INFO, &req.base,
				    csictl_csi_identity_info_show);
}

static int csictl_csi_identity_probe(struct csictl_csi *c)
{
	Csi__V1__ProbeRequest req = CSI__V1__PROBE_REQUEST__INIT;
	Csi__V1__ProbeResponse *resp;
	int status = csictl_csi_call(c, CSI_RPC_PROBE, &req.base, (ProtobufCMessage **)&resp);
	bool ready;

	if (status != CSICTL_EXIT_OK)
		return status;
	/* CSI: an absent "ready" means the plugin is ready. */
	ready = !resp->ready || resp->ready->value;
	if (c->json)
		fprintf(c->out, "{\n  \"ready\": %s\n}\n", ready ? "true" : "false");
	else
		fprintf(c->out, "ready: %s\n", ready ? "true" : "false");
	csi_msg_free(&resp->base);
	return CSICTL_EXIT_OK;
}

/* Collected capabilities: a table (table mode) and {"service": [names]}. */
struct csictl_csi_capset {
	struct csictl_table *table;
	json_t *json;
};

static void csictl_csi_capset_add(struct csictl_csi_capset *s, const char *service,
				  const ProtobufCEnumDescriptor *ed, int value)
{
	const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(ed, value);
	char num[32];
	const char *name = v ? v->name : num;
	json_t *arr;

	snprintf(num, sizeof(num), "%d", value);
	if (s->table)
		csictl_table_addv(s->table, service, name);
	arr = json_object_get(s->json, service);
	if (!arr) {
		arr = json_array();
		json_object_set_new(s->json, service, arr);
	}
	json_array_append_new(arr, json_string(name));
}

static bool csictl_csi_capset_has(const struct csictl_csi_capset *s, const char *service,
				  const char *name)
{
	const json_t *v;
	size_t i;

	json_array_foreach(json_object_get(s->json, service), i,
			   v) if (strcmp(json_string_value(v), name) == 0) return true;
	return false;
}

/*
 * Calls one of the capability RPCs and adds what it lists. Every one of
 * them answers "repeated <X>Capability capabilities", each capability a
 * oneof of messages that hold an enum "type", so one walk over the
 * descriptors reads all four. The oneof member volume_expansion is listed
 * under its own name, every other one under service.
 */
static int csictl_csi_identity_caps_rpc(struct csictl_csi *c, struct csictl_csi_capset *s,
					enum csi_rpc rpc, const char *service, bool optional)
{
	const struct csi_rpc_info *info = csi_rpc_info(rpc);
	ProtobufCMessage *req = csictl_csi_msg_new(c, info->request), *resp = NULL;
	const ProtobufCFieldDescriptor *f;
	struct csi_status st;
	ProtobufCMessage **caps;
	size_t n;

	if (!req)
		return csictl_csi_nomem(c);
	if (c->client->call(c->client, rpc, req, &resp, c->timeout_ms, &st)) {
		/* A controller-only plugin may not serve the Node service at all. */
		if (optional && st.code == CSI_UNIMPLEMENTED)
			return CSICTL_EXIT_OK;
		return csictl_csi_fail(c, &st);
	}
	f = protobuf_c_message_descriptor_get_field_by_name(resp->descriptor, "capabilities");
	n = f ? *(size_t *)((char *)resp + f->quantifier_offset) : 0;
	caps = f ? *(ProtobufCMessage ***)((char *)resp + f->offset) : NULL;
	for (size_t i = 0; i < n; i++) {
		const ProtobufCMessageDescriptor *d = caps[i]->descriptor;

		for (unsigned k = 0; k < d->n_fields; k++) {
			const ProtobufCFieldDescriptor *fd = &d->fields[k];
			const ProtobufCMessage *inner;
			const ProtobufCFieldDescriptor *tf;

			if (fd->type != PROTOBUF_C_TYPE_MESSAGE ||
			    *(uint32_t *)((char *)caps[i] + fd->quantifier_offset) != fd->id)
				continue;
			inner = *(ProtobufCMessage **)((char *)caps[i] + fd->offset);
			tf = inner ? protobuf_c_message_descriptor_get_field_by_name(
					 inner->descriptor, "type")
				   : NULL;
			if (!tf || tf->type != PROTOBUF_C_TYPE_ENUM)
				continue;
			csictl_csi_capset_add(
			    s, strcmp(fd->name, "volume_expansion") == 0 ? fd->name : service,
			    tf->descriptor, *(const int *)((const char *)inner + tf->offset));
		}
	}
	csi_msg_free(resp);
	return CSICTL_EXIT_OK;
}

static int csictl_csi_identity_caps(struct csictl_csi *c)
{
	static const char *const headers[] = {"SERVICE", "CAPABILITY"};
	struct csictl_csi_capset s = {NULL, json_object()};
	int status;

	if (!s.json)
		return csictl_csi_nomem(c);
	if (!c->json) {
		s.table = csictl_table_new(2, headers);
		if (!s.table) {
			status = csictl_csi_nomem(c);
			goto out;
		}
	}
	/* As a CO must: ask a service only when the plugin says it offers it. */
	status =
	    csictl_csi_identity_caps_rpc(c, &s, CSI_RPC_GET_PLUGIN_CAPABILITIES, "plugin", false);
	if (status == CSICTL_EXIT_OK && csictl_csi_capset_has(&s, "plugin", "CONTROLLER_SERVICE"))
		status = csictl_csi_identity_caps_rpc(c, &s, CSI_RPC_CONTROLLER_GET_CAPABILITIES,
						      "controller", false);
	if (status == CSICTL_EXIT_OK)
		status = csictl_csi_identity_caps_rpc(c, &s, CSI_RPC_NODE_GET_CAPABILITIES, "node",
						      true);
	if (status == CSICTL_EXIT_OK &&
	    csictl_csi_capset_has(&s, "plugin", "GROUP_CONTROLLER_SERVICE"))
		status = csictl_csi_identity_caps_rpc(
		    c, &s, CSI_RPC_GROUP_CONTROLLER_GET_CAPABILITIES, "group_controller", false);
	if (status != CSICTL_EXIT_OK)
		goto out;
	if (c->json) {
		csictl_out_json_print(s.json, c->out);
	} else {
		status = csictl_csi_print_table(c, s.table);
		s.table = NULL;
	}
out:
	csictl_table_free(s.table);
	json_decref(s.json);
	return status;
}

const struct csictl_csi_cmd csictl_csi_identity_cmds[] = {
    {"info", 0, 0, "info", "plugin name, version and manifest (GetPluginInfo)",
     csictl_csi_identity_info},
    {"caps", 0, 0, "caps", "capabilities of every service the plugin offers",
     csictl_csi_identity_caps},
    {"probe", 0, 0, "probe", "is the plugin ready (Probe)", csictl_csi_identity_probe},
    {0},
};
