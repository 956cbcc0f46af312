/*
 * Fuzz target: the agent's decoding of a servers' node-stage answer
 * (GET /v1/volume/<vol>/node-stage: the volume's secrets, mount flags and
 * fs_type). It must decode or give a clear error that quotes no input;
 * a decoded answer holds only strings, as many as the JSON has.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/claims_stage.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct claims_stage *st = NULL;
	struct err e;

	err_clear(&e);
	if (claims_stage_decode((const char *)data, size, &st, &e) != 0) {
		if (!e.msg[0] || st || strstr(e.msg, "CANARY"))
			abort();
		return 0;
	}
	if (json_object_size(json_object_get(st->doc, "secrets")) != st->n_secrets ||
	    json_array_size(json_object_get(st->doc, "mount_flags")) != st->n_flags)
		abort();
	for (size_t i = 0; i < st->n_secrets; i++)
		if (!st->secrets[i].key || !st->secrets[i].value)
			abort();
	for (size_t i = 0; i < st->n_flags; i++)
		if (!st->flags[i])
			abort();
	claims_stage_free(st);
	return 0;
}
