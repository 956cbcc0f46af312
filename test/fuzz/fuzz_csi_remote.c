/*
 * Fuzz target for an agent's answer to a controller RPC the server ran
 * through it (csi_remote_answer_decode), read as the answer to every
 * Controller and Identity RPC, and for the deadline header value. A
 * decoded answer must hold a known code and, with OK, a response of the
 * RPC's type. Nothing may crash, leak or read out of bounds.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "csi/csi_remote.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	int64_t ms;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	for (int i = 0; i < CSI_RPC_COUNT; i++) {
		const struct csi_rpc_info *info = csi_rpc_info((enum csi_rpc)i);
		ProtobufCMessage *resp = NULL;
		struct csi_status st = {0};

		if (!csi_remote_allowed((enum csi_rpc)i))
			continue;
		if (csi_remote_answer_decode((enum csi_rpc)i, text, size, &resp, &st, NULL) == 0 &&
		    ((st.code == CSI_OK) != (resp != NULL) || st.code < 0 ||
		     st.code > CSI_UNAUTHENTICATED || (resp && resp->descriptor != info->response)))
			abort();
		csi_msg_free(resp);
	}
	if (csi_remote_deadline_parse(text, 1, &ms, NULL) == 0 &&
	    (ms <= 0 || ms > CSI_REMOTE_DEADLINE_MAX_MS))
		abort();
	free(text);
	return 0;
}
