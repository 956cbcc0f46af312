/*
 * Decoding of the node-stage data (claims_stage.h) with the pull reader:
 * the strings go into an arena that is wiped when freed. The arrays of
 * secrets and flags grow by doubling inside the arena (the old copy is
 * left there, holding pointers only).
 */
#include "agent/claims_stage.h"

#include <stdlib.h>
#include <string.h>

/* Longest key of the node-stage object worth matching. */
#define CLAIMS_STAGE_KEY_MAX 16

int claims_stage_str(struct jsonr *r, struct arena *a, const char **out)
{
	enum jsonr_kind k = jsonr_peek(r);
	char *s = NULL;
	size_t len;

	*out = NULL;
	if (k == JSONR_NULL)
		return jsonr_literal(r);
	if (k != JSONR_STRING)
		return jsonr_fail(r, "expected a string");
	if (jsonr_str(r, a, &s, &len))
		return -1;
	/* \u0000 inside: refused, as jansson refuses it. */
	if (strlen(s) != len)
		return jsonr_fail(r, "a string holds a NUL character");
	*out = s;
	return 0;
}

/* Room for need items of size in *arr (cap *cap), from a. 0 or -1 (r's error set). */
static int claims_stage_room(struct jsonr *r, struct arena *a, void **arr, size_t *cap, size_t need,
			     size_t size)
{
	size_t ncap = *cap ? *cap * 2 : 8;
	void *n;

	if (need <= *cap)
		return 0;
	if (ncap > ((size_t)1 << 24))
		return jsonr_fail(r, "too many members");
	if (!(n = arena_alloc(a, ncap * size)))
		return jsonr_fail(r, "out of memory");
	if (*arr)
		memcpy(n, *arr, *cap * size);
	*arr = n;
	*cap = ncap;
	return 0;
}

int claims_stage_map(struct jsonr *r, struct arena *a, struct mount_kv **kv, size_t *n)
{
	size_t cap = 0, seen = 0, klen;
	enum jsonr_kind k = jsonr_peek(r);
	char *key;
	int rc;

	*kv = NULL;
	*n = 0;
	if (k == JSONR_NULL)
		return jsonr_literal(r);
	if (k != JSONR_OBJECT)
		return jsonr_fail(r, "expected an object of strings");
	if (jsonr_open(r))
		return -1;
	while ((rc = jsonr_key_dup(r, &seen, a, &key, &klen)) == 1) {
		const char *val;

		if (strlen(key) != klen)
			return jsonr_fail(r, "a key holds a NUL character");
		for (size_t i = 0; i < *n; i++)
			if (strcmp((*kv)[i].key, key) == 0)
				return jsonr_fail(r, "duplicate key");
		if (jsonr_peek(r) != JSONR_STRING)
			return jsonr_fail(r, "expected strings");
		if (claims_stage_str(r, a, &val) ||
		    claims_stage_room(r, a, (void **)kv, &cap, *n + 1, sizeof(**kv)))
			return -1;
		(*kv)[*n].key = key;
		(*kv)[(*n)++].value = val;
	}
	return rc;
}

/* The array of strings at r's next value (null: none) into *out (*n items). */
static int claims_stage_list(struct jsonr *r, struct arena *a, const char ***out, size_t *n)
{
	size_t cap = 0, seen = 0;
	enum jsonr_kind k = jsonr_peek(r);
	int rc;

	*out = NULL;
	*n = 0;
	if (k == JSONR_NULL)
		return jsonr_literal(r);
	if (k != JSONR_ARRAY)
		return jsonr_fail(r, "expected an array of strings");
	if (jsonr_open(r))
		return -1;
	while ((rc = jsonr_item(r, &seen)) == 1) {
		const char *s;

		if (jsonr_peek(r) != JSONR_STRING)
			return jsonr_fail(r, "expected strings");
		if (claims_stage_str(r, a, &s) ||
		    claims_stage_room(r, a, (void **)out, &cap, *n + 1, sizeof(**out)))
			return -1;
		(*out)[(*n)++] = s;
	}
	return rc;
}

int claims_stage_read(struct jsonr *r, struct arena *a, struct claims_stage *st)
{
	char key[CLAIMS_STAGE_KEY_MAX];
	unsigned seen_keys = 0;
	size_t seen = 0, klen;
	int rc;

	if (jsonr_peek(r) != JSONR_OBJECT)
		return jsonr_fail(r, "expected an object");
	if (jsonr_open(r))
		return -1;
	while ((rc = jsonr_key(r, &seen, key, sizeof(key), &klen)) == 1) {
		unsigned bit = klen >= sizeof(key)               ? 0
			       : strcmp(key, "secrets") == 0     ? 1
			       : strcmp(key, "mount_flags") == 0 ? 2
			       : strcmp(key, "fs_type") == 0     ? 4
								 : 0;

		if (bit & seen_keys)
			return jsonr_fail(r, "duplicate key");
		seen_keys |= bit;
		if (bit == 1)
			rc = claims_stage_map(r, a, &st->secrets, &st->n_secrets);
		else if (bit == 2)
			rc = claims_stage_list(r, a, &st->flags, &st->n_flags);
		else if (bit == 4)
			rc = claims_stage_str(r, a, &st->fs_type);
		else
			rc = jsonr_skip(r);
		if (rc)
			return -1;
	}
	return rc;
}

int claims_stage_decode(const char *body, size_t len, struct claims_stage **out, struct err *e)
{
	struct claims_stage *st = calloc(1, sizeof(*st));
	struct jsonr r;

	*out = NULL;
	if (!st || !(st->a = arena_new())) {
		free(st);
		return err_set(e, CSID_ENOMEM, "out of memory");
	}
	jsonr_init(&r, body ? body : "", body ? len : 0);
	/* The reader's messages are static text: none quotes the input, which holds secrets. */
	if (claims_stage_read(&r, st->a, st) || jsonr_end(&r)) {
		err_set(e, strcmp(r.err, "out of memory") == 0 ? CSID_ENOMEM : CSID_EPROTO,
			"the server's node-stage answer: %s", r.err);
		claims_stage_free(st);
		return e->code;
	}
	*out = st;
	return 0;
}

void claims_stage_free(struct claims_stage *st)
{
	if (!st)
		return;
	arena_wipe_free(st->a);
	free(st);
}
