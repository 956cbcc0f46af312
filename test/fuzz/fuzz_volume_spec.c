/*
 * Fuzz target: the strict spec decoders (volume specs with and without
 * comment lines, snapshot specs, node fingerprints) and what runs on
 * their result. The first input byte picks the decoder; the rest is the
 * text. Any input gives either an object or a clear error; never a crash,
 * a leak or a hang. A decoded volume is validated both ways, encoded in
 * both views, and its store encoding must decode and encode again to the
 * same text; the API view must hold no secrets and no mount flags, and
 * no validation message may carry a secret value.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A message must be one printable line. */
static void fuzz_check_msg(const struct err *e)
{
	if (e->code == 0 || !e->msg[0])
		abort();
	for (const char *p = e->msg; *p; p++)
		if ((unsigned char)*p < 0x20)
			abort();
}

/* Secret values long enough to be told apart must stay out of text,
 * unless the same string also appears as a non-secret (api is the API
 * view, which holds only non-secrets). */
static void fuzz_no_secret(const struct model_volume *v, const char *text, const char *api)
{
	for (size_t i = 0; i < v->secrets.n; i++) {
		const char *s = v->secrets.kv[i].value;

		if (strlen(s) >= 8 && strstr(text, s) && !strstr(api, s))
			abort();
	}
}

static void fuzz_volume(struct arena *a, const struct model_volume *v)
{
	struct model_volume *back = NULL, *copy = NULL;
	char *store = NULL, *api = NULL, *again = NULL;
	size_t slen = 0, alen = 0, len2 = 0;
	json_t *root, *mo;
	struct err e;

	err_clear(&e);
	if (model_volume_encode(v, MODEL_VIEW_STORE, &store, &slen, &e) ||
	    model_volume_encode(v, MODEL_VIEW_API, &api, &alen, &e))
		abort();
	root = json_loadb(api, alen, 0, NULL);
	if (!root || json_object_get(root, "secrets"))
		abort();
	mo = json_object_get(root, "mount_options");
	if (!mo || json_object_get(mo, "mount_flags"))
		abort();
	json_decref(root);
	for (int create = 0; create < 2; create++) {
		err_clear(&e);
		if (model_volume_validate(v, create, &e) != 0) {
			fuzz_check_msg(&e);
			fuzz_no_secret(v, e.msg, api);
		}
	}
	/* A spec without an ID (it may come from the URL) is no store record. */
	if (!v->id || !v->id[0]) {
		model_wipe_free(store, slen);
		free(api);
		return;
	}
	if (model_volume_decode(a, store, slen, &back, &e) ||
	    model_volume_encode(back, MODEL_VIEW_STORE, &again, &len2, &e))
		abort();
	if (len2 != slen || memcmp(store, again, slen) != 0)
		abort();
	if (model_volume_copy(a, back, &copy, &e))
		abort();
	model_wipe_free(again, len2);
	again = NULL;
	if (model_volume_encode(copy, MODEL_VIEW_STORE, &again, &len2, &e) || len2 != slen ||
	    memcmp(store, again, slen) != 0)
		abort();
	model_wipe_free(store, slen);
	model_wipe_free(again, len2);
	free(api);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct arena *a;
	struct err e;

	if (size < 1)
		return 0;
	a = arena_new();
	if (!a)
		abort();
	err_clear(&e);
	switch (data[0] % 4) {
	case 0:
	case 1: {
		struct model_volume *v = NULL;

		if (model_volume_spec_decode(a, (const char *)data + 1, size - 1, data[0] % 4 == 1,
					     &v, &e) == 0)
			fuzz_volume(a, v);
		else
			fuzz_check_msg(&e);
		break;
	}
	case 2: {
		struct model_snapshot *s = NULL, *c = NULL;

		if (model_snapshot_spec_decode(a, (const char *)data + 1, size - 1, &s, &e) != 0) {
			fuzz_check_msg(&e);
			break;
		}
		if (model_snapshot_validate(s, &e) != 0)
			fuzz_check_msg(&e);
		if (model_snapshot_copy(a, s, &c, &e))
			abort();
		break;
	}
	case 3: {
		struct model_node *n = NULL, *back = NULL;
		char *text = NULL, *again = NULL;
		size_t len = 0, len2 = 0;

		if (model_node_spec_decode(a, (const char *)data + 1, size - 1, &n, &e) != 0) {
			fuzz_check_msg(&e);
			break;
		}
		if (model_node_validate(n, &e) != 0)
			fuzz_check_msg(&e);
		if (model_node_encode(n, &text, &len, &e))
			abort();
		/* A node the strict decoder took without an ID is no store record. */
		if (n->id && n->id[0] &&
		    (model_node_decode(a, text, len, &back, &e) ||
		     model_node_encode(back, &again, &len2, &e) || len != len2 ||
		     memcmp(text, again, len) != 0))
			abort();
		free(text);
		free(again);
		break;
	}
	}
	arena_free(a);
	return 0;
}
