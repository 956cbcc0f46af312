/*
 * Fuzz target: the agent's decoding of a servers' volume answer for a
 * mount (agent/claims_answer.h: the claim that waits, or a volume alone)
 * with the pull reader, for node "node-1". It must decode or give a clear
 * error that quotes no input; a decoded answer is JSON that jansson reads
 * too, and what it kept is what that JSON says: the publication is one
 * to node-1, the node-stage data has as many secrets as its member.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "agent/claims_answer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether s (may be NULL) is the string member key of o, or both are absent. */
static bool fuzz_same(json_t *o, const char *key, const char *s)
{
	const char *j = json_string_value(json_object_get(o, key));

	return (!j && !s) || (j && s && strcmp(j, s) == 0);
}

/* Whether the text holds the escape \u0000 (any case). */
static bool fuzz_has_nul_escape(const uint8_t *data, size_t size)
{
	for (size_t i = 0; i + 6 <= size; i++)
		if (data[i] == '\\' && (data[i + 1] == 'u' || data[i + 1] == 'U') &&
		    memcmp(data + i + 2, "0000", 4) == 0)
			return true;
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct claims_answer *ans = NULL;
	json_t *doc, *vol;
	struct err e;

	err_clear(&e);
	if (claims_answer_decode((const char *)data, size, "node-1", &ans, &e) != 0) {
		if (!e.msg[0] || ans || strstr(e.msg, "CANARY"))
			abort();
		return 0;
	}
	doc = json_loadb((const char *)data, size, 0, NULL);
	/* jansson refuses \u0000 anywhere; the reader only in what it keeps. */
	if (!doc && fuzz_has_nul_escape(data, size)) {
		claims_answer_free(ans);
		return 0;
	}
	if (!json_is_object(doc) || !ans->plugin_id || !ans->publication_state ||
	    !ans->claim_access_mode)
		abort();
	if (ans->waited != (json_object_get(doc, "publication_state") != NULL))
		abort();
	vol = json_is_object(json_object_get(doc, "volume")) ? json_object_get(doc, "volume") : doc;
	/* Read from "volume" when the answer has no such member of its own. */
	if (vol != doc && !json_object_get(doc, "external_id") &&
	    !fuzz_same(vol, "external_id", ans->external_id))
		abort();
	if (ans->pub && (!ans->pub->state || !ans->pub->access_mode))
		abort();
	if (ans->stage) {
		json_t *sec = json_object_get(json_object_get(doc, "node_stage"), "secrets");

		if (json_object_size(sec) != ans->stage->n_secrets)
			abort();
	}
	json_decref(doc);
	claims_answer_free(ans);
	return 0;
}
