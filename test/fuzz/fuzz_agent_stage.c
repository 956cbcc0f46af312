/*
 * Fuzz target: the agent's decoding of a servers' node-stage answer
 * (GET /v1/volume/<vol>/node-stage: the volume's secrets, mount flags and
 * fs_type) with the pull reader. It must decode or give a clear error
 * that quotes no input; a decoded answer is JSON that jansson reads too,
 * with as many secrets and flags as its members hold, every one set.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "agent/claims_stage.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct claims_stage *st = NULL;
	json_t *doc, *sec, *flags;
	struct err e;

	err_clear(&e);
	if (claims_stage_decode((const char *)data, size, &st, &e) != 0) {
		if (!e.msg[0] || st || strstr(e.msg, "CANARY"))
			abort();
		return 0;
	}
	doc = json_loadb((const char *)data, size, 0, NULL);
	if (!json_is_object(doc))
		abort();
	sec = json_object_get(doc, "secrets");
	flags = json_object_get(doc, "mount_flags");
	if (json_object_size(sec) != st->n_secrets || json_array_size(flags) != st->n_flags)
		abort();
	for (size_t i = 0; i < st->n_secrets; i++)
		if (!st->secrets[i].key || !st->secrets[i].value ||
		    strcmp(json_string_value(json_object_get(sec, st->secrets[i].key)),
			   st->secrets[i].value) != 0)
			abort();
	for (size_t i = 0; i < st->n_flags; i++)
		if (!st->flags[i] ||
		    strcmp(json_string_value(json_array_get(flags, i)), st->flags[i]) != 0)
			abort();
	json_decref(doc);
	claims_stage_free(st);
	return 0;
}
