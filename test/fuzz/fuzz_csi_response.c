/*
 * Fuzz target for what a plugin (or a CO) may send us: the input is
 * decoded as every CSI request and response type, and each message that
 * decodes is formatted by the secret redactor and copied with
 * csi_msg_dup. Nothing may crash, leak or read out of bounds.
 */
#include <stddef.h>
#include <stdint.h>

#include "csi/csi_client.h"
#include "csi/csi_secret.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_csi_one(const ProtobufCMessageDescriptor *d, const uint8_t *data, size_t size)
{
	char text[2048];
	ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, size, data);
	ProtobufCMessage *copy;

	if (!m)
		return;
	csi_secret_format(m, text, sizeof(text));
	copy = csi_msg_dup(m);
	csi_msg_free(copy);
	csi_msg_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	for (int i = 0; i < CSI_RPC_COUNT; i++) {
		const struct csi_rpc_info *info = csi_rpc_info((enum csi_rpc)i);

		fuzz_csi_one(info->request, data, size);
		fuzz_csi_one(info->response, data, size);
	}
	fuzz_csi_one(&csi__v1__get_metadata_allocated_request__descriptor, data, size);
	fuzz_csi_one(&csi__v1__get_metadata_delta_response__descriptor, data, size);
	return 0;
}
