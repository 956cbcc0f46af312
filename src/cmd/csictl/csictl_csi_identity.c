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

static int csictl_csi_identity_info(struct csictl_csi *c)
{
	Csi__V1__GetPluginInfoRequest req = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	Csi__V1__GetPluginInfoResponse *resp = NULL;
	struct csi_status st;
	struct csictl_table *t;
	char manifest[1024];
	int status;

	if (csi_get_plugin_info(c->client, &req, &resp, c->timeout_ms, &st))
		return csictl_csi_fail(c, &st);
	if (c->json) {
		status = csictl_csi_print_json(c, &resp->base);
		goto out;
	}
	t = csictl_table_new(2, NULL);
	if (t) {
		csictl_table_addv(t, "name:", resp->name);
		csictl_table_addv(t, "vendor version:", resp->vendor_version);
		csictl_table_addv(t, "manifest:",
				  csictl_out_map_join(&resp->base, "manifest", manifest,
						      sizeof(manifest)));
	}
	status = csictl_csi_print_table(c, t);
out:
	csi_msg_free(&resp->base);
	return status;
}

static int csictl_csi_identity_probe(struct csictl_csi *c)
{
	Csi__V1__ProbeRequest req = CSI__V1__PROBE_REQUEST__INIT;
	Csi__V1__ProbeResponse *resp = NULL;
	struct csi_status st;
	bool ready;

	if (csi_probe(c->client, &req, &resp, c->timeout_ms, &st))
		return csictl_csi_fail(c, &st);
	/* CSI: an absent "ready" means the plugin is ready. */
	ready = !resp->ready || resp->ready->value;
	if (c->json)
		fprintf(c->out, "{\n  \"ready\": %s\n}\n", ready ? "true" : "false");
	else
		fprintf(c->out, "ready: %s\n", ready ? "true" : "false");
	csi_msg_free(&resp->base);
	return CSICTL_EXIT_OK;
}

/* Collected capabilities: (service, name) pairs. */
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

static int csictl_csi_identity_caps_plugin(struct csictl_csi *c, struct csictl_csi_capset *s,
					   bool *controller, bool *group)
{
	Csi__V1__GetPluginCapabilitiesRequest req = CSI__V1__GET_PLUGIN_CAPABILITIES_REQUEST__INIT;
	Csi__V1__GetPluginCapabilitiesResponse *resp = NULL;
	struct csi_status st;

	if (csi_get_plugin_capabilities(c->client, &req, &resp, c->timeout_ms, &st))
		return csictl_csi_fail(c, &st);
	for (size_t i = 0; i < resp->n_capabilities; i++) {
		const Csi__V1__PluginCapability *pc = resp->capabilities[i];

		if (pc->type_case == CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE && pc->service) {
			int t = pc->service->type;

			*controller |= t == CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__CONTROLLER_SERVICE;
			*group |= t == CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__GROUP_CONTROLLER_SERVICE;
			csictl_csi_capset_add(s, "plugin",
					      &csi__v1__plugin_capability__service__type__descriptor,
					      t);
		} else if (pc->type_case == CSI__V1__PLUGIN_CAPABILITY__TYPE_VOLUME_EXPANSION &&
			   pc->volume_expansion) {
			csictl_csi_capset_add(
				s, "volume_expansion",
				&csi__v1__plugin_capability__volume_expansion__type__descriptor,
				pc->volume_expansion->type);
		}
	}
	csi_msg_free(&resp->base);
	return CSICTL_EXIT_OK;
}

static int csictl_csi_identity_caps_controller(struct csictl_csi *c, struct csictl_csi_capset *s)
{
	Csi__V1__ControllerGetCapabilitiesRequest req =
		CSI__V1__CONTROLLER_GET_CAPABILITIES_REQUEST__INIT;
	Csi__V1__ControllerGetCapabilitiesResponse *resp = NULL;
	struct csi_status st;

	if (csi_controller_get_capabilities(c->client, &req, &resp, c->timeout_ms, &st))
		return csictl_csi_fail(c, &st);
	for (size_t i = 0; i < resp->n_capabilities; i++) {
		const Csi__V1__ControllerServiceCapability *cc = resp->capabilities[i];

		if (cc->type_case == CSI__V1__CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC && cc->rpc)
			csictl_csi_capset_add(
				s, "controller",
				&csi__v1__controller_service_capability__rpc__type__descriptor,
				cc->rpc->type);
	}
	csi_msg_free(&resp->base);
	return CSICTL_EXIT_OK;
}

static int csictl_csi_identity_caps_node(struct csictl_csi *c, struct csictl_csi_capset *s)
{
	Csi__V1__NodeGetCapabilitiesRequest req = CSI__V1__NODE_GET_CAPABILITIES_REQUEST__INIT;
	Csi__V1__NodeGetCapabilitiesResponse *resp = NULL;
	struct csi_status st;

	if (csi_node_get_capabilities(c->client, &req, &resp, c->timeout_ms, &st)) {
		if (st.code == CSI_UNIMPLEMENTED)
			return CSICTL_EXIT_OK;
		return csictl_csi_fail(c, &st);
	}
	for (size_t i = 0; i < resp->n_capabilities; i++) {
		const Csi__V1__NodeServiceCapability *nc = resp->capabilities[i];

		if (nc->type_case == CSI__V1__NODE_SERVICE_CAPABILITY__TYPE_RPC && nc->rpc)
			csictl_csi_capset_add(s, "node",
					      &csi__v1__node_service_capability__rpc__type__descriptor,
					      nc->rpc->type);
	}
	csi_msg_free(&resp->base);
	return CSICTL_EXIT_OK;
}

static int csictl_csi_identity_caps_group(struct csictl_csi *c, struct csictl_csi_capset *s)
{
	Csi__V1__GroupControllerGetCapabilitiesRequest req =
		CSI__V1__GROUP_CONTROLLER_GET_CAPABILITIES_REQUEST__INIT;
	Csi__V1__GroupControllerGetCapabilitiesResponse *resp = NULL;
	struct csi_status st;

	if (csi_group_controller_get_capabilities(c->client, &req, &resp, c->timeout_ms, &st))
		return csictl_csi_fail(c, &st);
	for (size_t i = 0; i < resp->n_capabilities; i++) {
		const Csi__V1__GroupControllerServiceCapability *gc = resp->capabilities[i];

		if (gc->type_case == CSI__V1__GROUP_CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC &&
		    gc->rpc)
			csictl_csi_capset_add(
				s, "group_controller",
				&csi__v1__group_controller_service_capability__rpc__type__descriptor,
				gc->rpc->type);
	}
	csi_msg_free(&resp->base);
	return CSICTL_EXIT_OK;
}

static int csictl_csi_identity_caps(struct csictl_csi *c)
{
	static const char *const headers[] = {"SERVICE", "CAPABILITY"};
	struct csictl_csi_capset s = {NULL, json_object()};
	bool controller = false, group = false;
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
	status = csictl_csi_identity_caps_plugin(c, &s, &controller, &group);
	if (status == CSICTL_EXIT_OK && controller)
		status = csictl_csi_identity_caps_controller(c, &s);
	if (status == CSICTL_EXIT_OK)
		status = csictl_csi_identity_caps_node(c, &s);
	if (status == CSICTL_EXIT_OK && group)
		status = csictl_csi_identity_caps_group(c, &s);
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
