/*
 * The claim history of each volume (server_pastclaims.h): read, appended
 * to in the volume's write transaction, removed with the volume.
 */
#include "server/server_pastclaims.h"

#include <stdlib.h>
#include <string.h>

/* The history of id as stored: its claims (in a) and its index (0: none stored). */
static int server_pastclaims_get(struct store *st, const char *id, struct arena *a,
				 struct model_claim **out, size_t *n, uint64_t *index,
				 struct err *e)
{
	struct store_obj o;
	int rc;

	*out = NULL;
	*n = 0;
	*index = 0;
	memset(&o, 0, sizeof(o));
	rc = store_get(st, STORE_CLAIM_HISTORY, id, &o, e);
	if (rc == CSID_ENOTFOUND) {
		err_clear(e);
		return 0;
	}
	if (rc == 0) {
		rc = model_history_decode(a, o.value, o.len, out, n, e);
		*index = o.modify_index;
	}
	store_obj_free(&o);
	return rc ? err_wrap(e, "claim history of volume %s", id) : 0;
}

/* x[0..nx) then y[0..ny), the last MODEL_PAST_CLAIMS_MAX of them, in a; NULL: no memory. */
static struct model_claim *server_pastclaims_join(const struct model_claim *x, size_t nx,
						  const struct model_claim *y, size_t ny,
						  struct arena *a, size_t *n)
{
	size_t all = nx + ny, skip = all > MODEL_PAST_CLAIMS_MAX ? all - MODEL_PAST_CLAIMS_MAX : 0;
	struct model_claim *out = arena_alloc(a, (all - skip + 1) * sizeof(*out));

	*n = 0;
	if (!out)
		return NULL;
	for (size_t i = skip; i < all; i++)
		out[(*n)++] = i < nx ? x[i] : y[i - nx];
	return out;
}

int server_pastclaims_take(struct store *st, struct server_vcache *vc, struct model_volume *v,
			   struct arena *a, struct store_op *op, bool *have,
			   struct model_history_map *made, struct model_claim **taken,
			   size_t *ntaken, struct err *e)
{
	struct model_history_map known;
	struct store_obj o;
	uint64_t index = 0;
	size_t len = 0;
	char *text = NULL, *copy;
	bool mapped = false;
	int rc;

	*have = false;
	if (made)
		made->n = 0;
	*taken = v->past_claims;
	*ntaken = v->npast_claims;
	if (v->npast_claims == 0)
		return 0;
	/* Appended to the stored text: the kept claims are not decoded (model_history_append). */
	memset(&o, 0, sizeof(o));
	rc = store_get(st, STORE_CLAIM_HISTORY, v->id, &o, e);
	if (rc == CSID_ENOTFOUND) {
		err_clear(e);
		rc = 0;
	} else if (rc == 0) {
		index = o.modify_index;
		mapped = server_vcache_history(vc, v->id, index, o.len, &known);
	}
	if (rc == 0)
		rc = model_history_append(o.value, o.len, mapped ? &known : NULL, v->past_claims,
					  v->npast_claims, &text, &len, made, e);
	store_obj_free(&o);
	if (rc)
		return err_wrap(e, "claim history of volume %s", v->id);
	copy = arena_alloc(a, len + 1);
	if (copy)
		memcpy(copy, text, len + 1);
	free(text);
	if (!copy)
		return err_set(e, CSID_ENOMEM, "out of memory");
	*op = (struct store_op){.type = STORE_OP_PUT,
				.kind = STORE_CLAIM_HISTORY,
				.id = v->id,
				.value = copy,
				.len = len,
				.expect_index = index};
	*have = true;
	v->past_claims = NULL;
	v->npast_claims = 0;
	return 0;
}

struct store_op server_pastclaims_delete(const char *id)
{
	return (struct store_op){.type = STORE_OP_DELETE,
				 .kind = STORE_CLAIM_HISTORY,
				 .id = id,
				 .expect_index = STORE_ANY};
}

int server_pastclaims_read(struct store *st, struct model_volume *v, struct arena *a, struct err *e)
{
	struct model_claim *old = NULL, *all;
	size_t nold = 0, n = 0;
	uint64_t index = 0;
	int rc = server_pastclaims_get(st, v->id, a, &old, &nold, &index, e);

	if (rc || nold == 0)
		return rc;
	all = server_pastclaims_join(old, nold, v->past_claims, v->npast_claims, a, &n);
	if (!all)
		return err_set(e, CSID_ENOMEM, "out of memory");
	v->past_claims = all;
	v->npast_claims = n;
	return 0;
}
