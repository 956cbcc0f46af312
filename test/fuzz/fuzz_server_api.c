/*
 * Fuzz target: the server API's request decoders (server_api_decode.c).
 * The first byte picks the decoder (claim, release, detach, expand,
 * modify, snapshot, node, node-expanded), the rest is the body. Each must decode or fail
 * with a code and a message; what decodes must hold only checked IDs and
 * known modes, and never more than the documented limits.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/server_api_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_check_id(const char *id)
{
	if (id && model_id_check("id", id, strlen(id), NULL) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct arena *a;
	struct model_claim_request claim;
	struct model_snapshot *snap = NULL;
	struct model_node *node = NULL;
	struct model_map map;
	const char *body;
	char *id = NULL;
	char *reason = NULL;
	bool force;
	int64_t cap = 0;
	struct err e;
	size_t len, i;
	int rc;

	if (size < 1)
		return 0;
	body = (const char *)data + 1;
	len = size - 1;
	a = arena_new();
	if (!a)
		return 0;
	err_clear(&e);
	switch (data[0] % 8) {
	case 0:
		rc = server_api_decode_claim(a, body, len, &claim, &force, &e);
		if (!rc) {
			fuzz_check_id(claim.alloc_id);
			fuzz_check_id(claim.node_id);
			/* No access mode: the volume's first capability (UNKNOWN here). */
			if ((claim.cap.access != MODEL_ACCESS_UNKNOWN &&
			     !model_access_name(claim.cap.access)) ||
			    !model_attachment_name(claim.cap.attachment))
				abort();
		}
		break;
	case 1:
		rc = server_api_decode_release(a, body, len, &id, &force, &reason, &e);
		if (!rc)
			fuzz_check_id(id);
		for (const char *p = rc ? NULL : reason; p && *p; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				abort();
		break;
	case 2:
		rc = server_api_decode_detach(a, body, len, &id, &e);
		if (!rc)
			fuzz_check_id(id);
		break;
	case 3:
		rc = server_api_decode_expand(a, body, len, &cap, &e);
		if (!rc && cap <= 0)
			abort();
		break;
	case 4:
		rc = server_api_decode_modify(a, body, len, &map, &e);
		for (i = 1; !rc && i < map.n; i++)
			if (strcmp(map.kv[i - 1].key, map.kv[i].key) >= 0)
				abort();
		break;
	case 5:
		rc = server_api_decode_snapshot(a, body, len, "snap-1", &snap, &e);
		if (!rc) {
			fuzz_check_id(snap->id);
			fuzz_check_id(snap->volume_id);
		}
		break;
	case 7:
		rc = server_api_decode_node_expanded(a, body, len, &id, &cap, &e);
		if (!rc)
			fuzz_check_id(id);
		if (!rc && cap <= 0)
			abort();
		break;
	default:
		rc = server_api_decode_node(a, body, len, "node-1", &node, &e);
		if (!rc) {
			fuzz_check_id(node->id);
			fuzz_check_id(node->instance_id);
			for (i = 0; i < node->nplugins; i++)
				if (model_plugin_id_check(node->plugins[i].plugin_id, NULL) != 0)
					abort();
			for (i = 0; i < node->nallocs; i++) {
				fuzz_check_id(node->allocs[i].volume_id);
				fuzz_check_id(node->allocs[i].alloc_id);
			}
			if (node->nallocs && !node->allocs_reported)
				abort();
		}
		break;
	}
	if (rc && (e.code == 0 || !e.msg[0]))
		abort();
	arena_free(a);
	return 0;
}
