/*
 * POST /v1/agent/controller/<plugin>/<Method>: runs one controller RPC on
 * the active instance of a controller plugin this agent supervises, for
 * the server's reconciler (encodings in csi/csi_remote.h). The caller
 * must present the agent's server_token (constant-time comparison; an
 * agent without one refuses every such call); the token is checked
 * before anything of the request is looked at. Only Controller and
 * Identity RPCs run; the deadline is the caller's (X-Csid-Deadline-Ms,
 * capped), so the server's own deadline bounds the call. The client is
 * the plugin manager's (a counted reference), not a second connection.
 * The request may hold secrets: it is never logged nor echoed.
 */
#include "api/agent_api_int.h"

#include <stdlib.h>
#include <string.h>

#include "csi/csi_remote.h"

static int agent_api_controller_auth(struct agent_api *a, const struct http_request *req,
				     struct err *e)
{
	const char *tok = http_request_token(req);

	if (!a->server_token)
		return err_set(e, CSID_EPERM,
			       "controller RPCs through this agent are off: no server_token "
			       "configured");
	if (!tok || !tok[0])
		return err_set(e, CSID_EPERM, "a token is required (X-Csid-Token header)");
	if (!http_token_eq(tok, a->server_token))
		return err_set(e, CSID_EPERM, "unknown token");
	return 0;
}

int agent_api_controller_call(struct agent_api *a, const struct http_request *req,
			      struct http_reply *rep, struct err *e)
{
	char plugin[REGISTRY_NAME_MAX];
	struct plugin_ref ref; /* set by plugin_manager_ref before any use */
	ProtobufCMessage *in = NULL, *out = NULL;
	struct csi_status st = {0};
	const char *rest;
	int64_t deadline_ms;
	int rc, rpc;

	if ((rc = agent_api_controller_auth(a, req, e)))
		return rc;
	rest = http_path_segment(req->url, CSI_REMOTE_PREFIX, plugin, sizeof(plugin));
	if (!rest || rest[0] != '/' || !rest[1] || strchr(rest + 1, '/'))
		return err_set(e, CSID_ENOTFOUND,
			       "expected /v1/agent/controller/<plugin>/<Method>");
	rpc = csi_rpc_by_name(rest + 1);
	if (rpc < 0 || !csi_remote_allowed((enum csi_rpc)rpc))
		return err_set(e, CSID_EINVAL, "%.64s: not a Controller or Identity RPC", rest + 1);
	rc = csi_remote_deadline_parse(http_header(req, CSI_REMOTE_DEADLINE_HEADER),
				       a->cfg.rpc_timeout_ms, &deadline_ms, e);
	if (rc)
		return rc;
	rc = csi_remote_request_decode((enum csi_rpc)rpc, req->body, req->len, &in, e);
	if (rc)
		return rc;
	/* Its message names the plugin ("plugin controller/<id>: not registered"). */
	rc = plugin_manager_ref(a->cfg.plugins, REGISTRY_CONTROLLER, plugin, &ref, e);
	if (rc)
		goto out;
	rc = ref.client->call(ref.client, (enum csi_rpc)rpc, in, &out, deadline_ms, &st);
	if (rc && st.code == CSI_OK) {
		/* A failed call always names its code; keep the answer honest if one did not. */
		st.code = CSI_INTERNAL;
		snprintf(st.message, sizeof(st.message), "%s", csid_strerror(rc));
	}
	rc = csi_remote_answer_encode(&st, out, &rep->text, e);
out:
	csi_msg_free(out);
	plugin_ref_release(&ref);
	csi_msg_free(in);
	return rc;
}
