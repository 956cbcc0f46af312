/*
 * Decoding of the node-stage data (claims_stage.h): the answer is
 * checked before any pointer into it is kept, and wiped when freed.
 */
#include "agent/claims_stage.h"

#include <stdlib.h>

#include "model/model.h"

/* Checks the answer's shape; names only the field that is wrong, never a value. */
static int claims_stage_check(json_t *doc, struct err *e)
{
	json_t *sec = json_object_get(doc, "secrets"), *flags = json_object_get(doc, "mount_flags");
	json_t *fs = json_object_get(doc, "fs_type"), *v;
	const char *key;
	size_t i;

	if (!json_is_object(doc) || (sec && !json_is_object(sec)) ||
	    (flags && !json_is_array(flags)) || (fs && !json_is_string(fs) && !json_is_null(fs)))
		return err_set(e, CSID_EPROTO, "the server's node-stage answer is malformed");
	json_object_foreach(sec, key, v) if (!json_is_string(v)) return err_set(
	    e, CSID_EPROTO, "the server's node-stage answer: secrets: expected strings");
	json_array_foreach(flags, i, v) if (!json_is_string(v)) return err_set(
	    e, CSID_EPROTO, "the server's node-stage answer: mount_flags: expected strings");
	return 0;
}

int claims_stage_from(json_t *doc, struct claims_stage **out, struct err *e)
{
	struct claims_stage *st = calloc(1, sizeof(*st));
	json_t *sec, *flags, *v;
	const char *key;
	size_t i;
	int rc;

	*out = NULL;
	if (!st) {
		model_json_wipe(doc);
		json_decref(doc);
		return err_set(e, CSID_ENOMEM, "out of memory");
	}
	st->doc = doc;
	if ((rc = claims_stage_check(doc, e)))
		goto fail;
	sec = json_object_get(doc, "secrets");
	flags = json_object_get(doc, "mount_flags");
	st->secrets = calloc(json_object_size(sec) + 1, sizeof(*st->secrets));
	st->flags = calloc(json_array_size(flags) + 1, sizeof(*st->flags));
	if (!st->secrets || !st->flags) {
		rc = err_set(e, CSID_ENOMEM, "out of memory");
		goto fail;
	}
	json_object_foreach(sec, key, v)
	{
		st->secrets[st->n_secrets].key = key;
		st->secrets[st->n_secrets++].value = json_string_value(v);
	}
	json_array_foreach(flags, i, v) st->flags[st->n_flags++] = json_string_value(v);
	st->fs_type = json_string_value(json_object_get(doc, "fs_type"));
	*out = st;
	return 0;
fail:
	claims_stage_free(st);
	return rc;
}

int claims_stage_decode(const char *body, size_t len, struct claims_stage **out, struct err *e)
{
	json_t *doc = body ? json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL) : NULL;

	*out = NULL;
	/* jansson's message may quote the input, which holds secrets: none is given. */
	if (!doc)
		return err_set(e, CSID_EPROTO, "the server's node-stage answer is not JSON");
	return claims_stage_from(doc, out, e);
}

void claims_stage_free(struct claims_stage *st)
{
	if (!st)
		return;
	model_json_wipe(st->doc);
	json_decref(st->doc);
	free(st->secrets);
	free(st->flags);
	free(st);
}
