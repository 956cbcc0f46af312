/*
 * Node-stage data of a claimed volume: what the node plugin needs to
 * stage and publish it and the servers' API view never shows (the
 * volume's secrets map, its mount flags and fs_type). A mount reads it,
 * once its claim is granted, with
 *
 *   GET /v1/volume/<vol>/node-stage?alloc_id=<alloc>
 *
 * which the servers answer only to the agent of the node the claim is on
 * (the request carries the agent's instance ID, agent_api_claims.c). The
 * answer is checked (a map of strings, an array of strings, a string),
 * kept only for the mount, and every string of it is zeroed before it is
 * freed; no value of it ever reaches a message or a log line.
 */
#include "api/agent_api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "model/model.h"

/* Checks the answer's shape; names only the field that is wrong, never a value. */
static int agent_api_stage_check(json_t *doc, struct err *e)
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

/* Takes doc (a parsed answer): 0 and *out, or a code with e set (doc then wiped and freed). */
static int agent_api_stage_from(json_t *doc, struct agent_api_stage **out, struct err *e)
{
	struct agent_api_stage *st = calloc(1, sizeof(*st));
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
	if ((rc = agent_api_stage_check(doc, e)))
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
	agent_api_stage_free(st);
	return rc;
}

int agent_api_decode_stage(const char *body, size_t len, struct agent_api_stage **out,
			   struct err *e)
{
	json_t *doc = body ? json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL) : NULL;

	*out = NULL;
	/* jansson's message may quote the input, which holds secrets: none is given. */
	if (!doc)
		return err_set(e, CSID_EPROTO, "the server's node-stage answer is not JSON");
	return agent_api_stage_from(doc, out, e);
}

int agent_api_stage_get(struct agent_api *a, const char *vol, const char *alloc,
			struct agent_api_stage **out, struct err *e)
{
	char *ev = curl_easy_escape(NULL, vol, 0), *ea = curl_easy_escape(NULL, alloc, 0);
	json_t *doc = NULL;
	char path[2048];
	int rc, n;

	*out = NULL;
	if (!ev || !ea) {
		rc = err_set(e, CSID_ENOMEM, "out of memory");
		goto out;
	}
	n = snprintf(path, sizeof(path), "/v1/volume/%s/node-stage?alloc_id=%s", ev, ea);
	if (n < 0 || (size_t)n >= sizeof(path))
		rc = err_set(e, CSID_EINVAL, "volume or allocation ID too long");
	else if ((rc = agent_api_server(a, "GET", path, NULL, &doc, e)) == 0)
		rc = agent_api_stage_from(doc, out, e);
	if (rc)
		err_wrap(e, "node-stage secrets of %s for %s", vol, alloc);
out:
	curl_free(ev);
	curl_free(ea);
	return rc;
}

void agent_api_stage_free(struct agent_api_stage *st)
{
	if (!st)
		return;
	model_json_wipe(st->doc);
	json_decref(st->doc);
	free(st->secrets);
	free(st->flags);
	free(st);
}
