/*
 * Encodings of a controller RPC run through an agent (csi_remote.h): the
 * request is the CSI message's protobuf bytes; the answer a JSON object
 * with the gRPC code name, the status message and the response bytes in
 * base64 (RFC 4648, with padding). The decoders take input from the
 * network and check everything: a known code name, a message that is a
 * string, base64 that decodes, a response of the RPC's type.
 */
#include "csi/csi_remote.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "util/base64.h"

bool csi_remote_allowed(enum csi_rpc rpc)
{
	const struct csi_rpc_info *info = csi_rpc_info(rpc);

	return info &&
	       (strcmp(info->service, "Controller") == 0 || strcmp(info->service, "Identity") == 0);
}

int csi_remote_deadline_parse(const char *value, int64_t dflt_ms, int64_t *out_ms, struct err *e)
{
	int64_t v = 0;

	if (!value) {
		*out_ms = dflt_ms;
		return 0;
	}
	if (!value[0] || strlen(value) > 18)
		return err_set(e, CSID_EINVAL, "%s: expected milliseconds",
			       CSI_REMOTE_DEADLINE_HEADER);
	for (const char *p = value; *p; p++) {
		if (*p < '0' || *p > '9')
			return err_set(e, CSID_EINVAL, "%s: expected milliseconds",
				       CSI_REMOTE_DEADLINE_HEADER);
		v = v * 10 + (*p - '0');
	}
	if (v <= 0)
		return err_set(e, CSID_EINVAL, "%s: must be positive", CSI_REMOTE_DEADLINE_HEADER);
	*out_ms = v > CSI_REMOTE_DEADLINE_MAX_MS ? CSI_REMOTE_DEADLINE_MAX_MS : v;
	return 0;
}

int csi_remote_request_decode(enum csi_rpc rpc, const void *body, size_t len,
			      ProtobufCMessage **out, struct err *e)
{
	const struct csi_rpc_info *info = csi_rpc_info(rpc);

	*out = NULL;
	if (!info)
		return err_set(e, CSID_EINVAL, "unknown CSI RPC");
	*out = protobuf_c_message_unpack(info->request, NULL, len, body);
	if (!*out)
		return err_set(e, CSID_EINVAL, "%s: body does not decode as %s (%zu bytes)",
			       info->name, info->request->name, len);
	return 0;
}

int csi_remote_answer_encode(const struct csi_status *st, const ProtobufCMessage *resp, char **out,
			     struct err *e)
{
	json_t *doc =
	    json_pack("{s:s, s:s}", "code", csi_code_name(st->code), "message", st->message);
	uint8_t *bytes = NULL;
	char *b64 = NULL;
	int rc = CSID_ENOMEM;

	*out = NULL;
	if (!doc)
		goto out;
	if (st->code == CSI_OK && resp) {
		size_t n = protobuf_c_message_get_packed_size(resp);

		bytes = malloc(n ? n : 1);
		if (!bytes)
			goto out;
		protobuf_c_message_pack(resp, bytes);
		b64 = base64_encode(bytes, n, NULL);
		if (!b64 || json_object_set_new(doc, "response", json_string(b64)))
			goto out;
	}
	*out = json_dumps(doc, JSON_COMPACT);
	rc = *out ? 0 : CSID_ENOMEM;
out:
	free(b64);
	free(bytes);
	json_decref(doc);
	return rc ? err_set(e, rc, "controller answer: out of memory") : 0;
}

int csi_remote_answer_decode(enum csi_rpc rpc, const char *body, size_t len,
			     ProtobufCMessage **resp, struct csi_status *st, struct err *e)
{
	const struct csi_rpc_info *info = csi_rpc_info(rpc);
	json_t *doc = NULL, *code, *msg, *r;
	char *bytes = NULL;
	size_t nbytes = 0;
	int rc = CSID_EPROTO, c;

	*resp = NULL;
	if (!info) {
		err_set(e, rc, "controller answer: unknown CSI RPC");
		goto out;
	}
	doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
	code = json_object_get(doc, "code");
	msg = json_object_get(doc, "message");
	r = json_object_get(doc, "response");
	if (!json_is_object(doc) || !json_is_string(code) || (msg && !json_is_string(msg)) ||
	    (r && !json_is_string(r))) {
		err_set(e, rc, "controller answer: not the expected JSON object");
		goto out;
	}
	c = csi_code_parse(json_string_value(code));
	if (c < 0) {
		err_set(e, rc, "controller answer: unknown code");
		goto out;
	}
	if (c == CSI_OK) {
		int brc;

		if (!r) {
			err_set(e, rc, "controller answer: OK without a response");
			goto out;
		}
		brc = base64_decode(json_string_value(r), json_string_length(r), &bytes, &nbytes);
		if (brc) {
			err_set(e, rc = brc, "controller answer: response is not base64");
			goto out;
		}
		*resp =
		    protobuf_c_message_unpack(info->response, NULL, nbytes, (const uint8_t *)bytes);
		if (!*resp) {
			err_set(e, rc, "controller answer: response does not decode as %s",
				info->response->name);
			goto out;
		}
	}
	st->code = c;
	snprintf(st->message, sizeof(st->message), "%s", msg ? json_string_value(msg) : "");
	rc = 0;
out:
	free(bytes);
	json_decref(doc);
	return rc;
}
