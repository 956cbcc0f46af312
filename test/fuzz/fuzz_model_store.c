/*
 * Fuzz target: the store decoders of volumes, snapshots, nodes and claim
 * histories. A
 * damaged record must give CSID_EPROTO (or CSID_ENOMEM) with a message,
 * never a crash, a leak or a hang; a record that decodes must encode to a
 * text that decodes and encodes to itself again, and its API view must
 * hold no secrets nor mount flags.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_failed(int rc, const struct err *e)
{
	if ((rc != CSID_EPROTO && rc != CSID_ENOMEM) || !e->msg[0])
		abort();
}

/* The two encodings must be the same text. */
static void fuzz_same(const char *a, size_t alen, const char *b, size_t blen)
{
	if (alen != blen || memcmp(a, b, alen) != 0)
		abort();
}

static void fuzz_volume(struct arena *a, const char *text, size_t len)
{
	struct model_volume *v = NULL, *back = NULL;
	char *once = NULL, *twice = NULL, *api = NULL;
	size_t l1 = 0, l2 = 0, la = 0;
	json_t *root;
	struct err e;
	int rc;

	err_clear(&e);
	rc = model_volume_decode(a, text, len, &v, &e);
	if (rc) {
		fuzz_failed(rc, &e);
		return;
	}
	if (model_volume_encode(v, MODEL_VIEW_STORE, &once, &l1, &e) ||
	    model_volume_decode(a, once, l1, &back, &e) ||
	    model_volume_encode(back, MODEL_VIEW_STORE, &twice, &l2, &e) ||
	    model_volume_encode(v, MODEL_VIEW_API, &api, &la, &e))
		abort();
	fuzz_same(once, l1, twice, l2);
	root = json_loadb(api, la, 0, NULL);
	if (!root || json_object_get(root, "secrets") ||
	    json_object_get(json_object_get(root, "mount_options"), "mount_flags"))
		abort();
	json_decref(root);
	model_wipe_free(once, l1);
	model_wipe_free(twice, l2);
	free(api);
}

static void fuzz_snapshot(struct arena *a, const char *text, size_t len)
{
	struct model_snapshot *s = NULL, *back = NULL;
	char *once = NULL, *twice = NULL;
	size_t l1 = 0, l2 = 0;
	struct err e;
	int rc;

	err_clear(&e);
	rc = model_snapshot_decode(a, text, len, &s, &e);
	if (rc) {
		fuzz_failed(rc, &e);
		return;
	}
	if (model_snapshot_encode(s, MODEL_VIEW_STORE, &once, &l1, &e) ||
	    model_snapshot_decode(a, once, l1, &back, &e) ||
	    model_snapshot_encode(back, MODEL_VIEW_STORE, &twice, &l2, &e))
		abort();
	fuzz_same(once, l1, twice, l2);
	model_wipe_free(once, l1);
	model_wipe_free(twice, l2);
}

static void fuzz_node(struct arena *a, const char *text, size_t len)
{
	struct model_node *n = NULL, *back = NULL;
	char *once = NULL, *twice = NULL;
	size_t l1 = 0, l2 = 0;
	struct err e;
	int rc;

	err_clear(&e);
	rc = model_node_decode(a, text, len, &n, &e);
	if (rc) {
		fuzz_failed(rc, &e);
		return;
	}
	if (model_node_encode(n, &once, &l1, &e) || model_node_decode(a, once, l1, &back, &e) ||
	    model_node_encode(back, &twice, &l2, &e))
		abort();
	fuzz_same(once, l1, twice, l2);
	free(once);
	free(twice);
}

/*
 * Claim histories: appending to the text (damaged or not) answers, never
 * crashes; to a history that decodes it keeps the claims and puts the new
 * one last. The decoded claims written again (to no history) decode to the
 * newest MODEL_PAST_CLAIMS_MAX of them, and the same text twice.
 */
static void fuzz_history(struct arena *a, const char *text, size_t len)
{
	struct model_claim *c = NULL, *back = NULL;
	char *once = NULL, *twice = NULL, *more = NULL;
	struct model_history_map map;
	size_t l1 = 0, l2 = 0, l3 = 0, n = 0, nb = 0, want;
	struct err e;
	int rc, arc;

	err_clear(&e);
	rc = model_history_decode(a, text, len, &c, &n, &e);
	arc = model_history_append(text, len, NULL, c, rc == 0 && n ? 1 : 0, &more, &l3, &map, &e);
	if (rc) {
		if (arc != 0 && arc != CSID_EPROTO)
			abort();
		free(more);
		fuzz_failed(rc, &e);
		return;
	}
	want = n + (n ? 1 : 0) < MODEL_PAST_CLAIMS_MAX ? n + (n ? 1 : 0) : MODEL_PAST_CLAIMS_MAX;
	if (arc || model_history_decode(a, more, l3, &back, &nb, &e) || nb != want ||
	    (n && strcmp(back[nb - 1].alloc_id, c[0].alloc_id) != 0))
		abort();
	/* Appending again with the map that append made, or reading the text through: the same. */
	if (model_history_append(more, l3, &map, back, nb ? 1 : 0, &once, &l1, NULL, &e) ||
	    model_history_append(more, l3, NULL, back, nb ? 1 : 0, &twice, &l2, NULL, &e))
		abort();
	fuzz_same(once, l1, twice, l2);
	free(once);
	free(twice);
	once = twice = NULL;
	free(more);
	want = n < MODEL_PAST_CLAIMS_MAX ? n : MODEL_PAST_CLAIMS_MAX;
	if (model_history_append(NULL, 0, NULL, c, n, &once, &l1, NULL, &e) ||
	    model_history_decode(a, once, l1, &back, &nb, &e) || nb != want ||
	    model_history_append(NULL, 0, NULL, back, nb, &twice, &l2, NULL, &e))
		abort();
	fuzz_same(once, l1, twice, l2);
	free(once);
	free(twice);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct arena *a = arena_new();

	if (!a)
		abort();
	/* Every decoder sees every input: a record of one kind is damage to another. */
	fuzz_volume(a, (const char *)data, size);
	fuzz_snapshot(a, (const char *)data, size);
	fuzz_node(a, (const char *)data, size);
	fuzz_history(a, (const char *)data, size);
	arena_free(a);
	return 0;
}
