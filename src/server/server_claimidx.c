/*
 * The active-claims index (rules in server_claimidx.h): entry IDs and
 * values, the per-write diff, and the rebuild. Values are tiny JSON
 * objects written and read here only.
 */
#include "server/server_claimidx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* Ops per rebuild transaction (a conflict retries that batch one op at a time). */
#define SERVER_CLAIMIDX_BATCH 64

int server_claimidx_of(const struct model_volume *v, struct arena *a,
		       struct server_claimidx_entry **out, size_t *n)
{
	struct server_claimidx_entry *x = arena_alloc(a, (v->nclaims + 1) * sizeof(*x));
	size_t k = 0;

	*out = NULL;
	*n = 0;
	if (!x)
		return CSID_ENOMEM;
	for (size_t i = 0; i < v->nclaims; i++) {
		const struct model_claim *c = &v->claims[i];

		if (c->state != MODEL_CLAIM_CLAIMED)
			continue;
		x[k++] = (struct server_claimidx_entry){c->node_id, v->id, c->alloc_id,
							c->updated_ms, c->held_by_agent};
	}
	*out = x;
	*n = k;
	return 0;
}

static char *server_claimidx_key(struct arena *a, const struct server_claimidx_entry *x)
{
	return arena_printf(a, "%s/%s/%s", x->node_id, x->volume_id, x->alloc_id);
}

static char *server_claimidx_value(struct arena *a, const struct server_claimidx_entry *x)
{
	return arena_printf(a, "{\"updated_ms\":%lld,\"held_by_agent\":%s}",
			    (long long)x->updated_ms, x->held_by_agent ? "true" : "false");
}

static bool server_claimidx_same_key(const struct server_claimidx_entry *x,
				     const struct server_claimidx_entry *y)
{
	return strcmp(x->node_id, y->node_id) == 0 && strcmp(x->alloc_id, y->alloc_id) == 0 &&
	       strcmp(x->volume_id, y->volume_id) == 0;
}

static const struct server_claimidx_entry *
server_claimidx_find(const struct server_claimidx_entry *v, size_t n,
		     const struct server_claimidx_entry *x)
{
	for (size_t i = 0; i < n; i++)
		if (server_claimidx_same_key(&v[i], x))
			return &v[i];
	return NULL;
}

/* Appends one op; CSID_ERANGE when full, CSID_ENOMEM. */
static int server_claimidx_op(const struct server_claimidx_entry *x, bool put, uint64_t expect,
			      struct arena *a, struct store_op *ops, size_t cap, size_t *n)
{
	char *id, *value = NULL;

	if (*n == cap)
		return CSID_ERANGE;
	id = server_claimidx_key(a, x);
	if (put)
		value = server_claimidx_value(a, x);
	if (!id || (put && !value))
		return CSID_ENOMEM;
	ops[(*n)++] = (struct store_op){put ? STORE_OP_PUT : STORE_OP_DELETE,
					STORE_CLAIM,
					id,
					value,
					value ? strlen(value) : 0,
					expect};
	return 0;
}

int server_claimidx_diff(const struct server_claimidx_entry *old, size_t nold,
			 const struct server_claimidx_entry *nw, size_t nnew, struct arena *a,
			 struct store_op *ops, size_t cap, size_t *n)
{
	int rc;

	for (size_t i = 0; i < nold; i++)
		if (!server_claimidx_find(nw, nnew, &old[i]) &&
		    (rc = server_claimidx_op(&old[i], false, STORE_ANY, a, ops, cap, n)))
			return rc;
	for (size_t i = 0; i < nnew; i++) {
		const struct server_claimidx_entry *was = server_claimidx_find(old, nold, &nw[i]);

		if (was && was->updated_ms == nw[i].updated_ms &&
		    was->held_by_agent == nw[i].held_by_agent)
			continue;
		if ((rc = server_claimidx_op(&nw[i], true, STORE_ANY, a, ops, cap, n)))
			return rc;
	}
	return 0;
}

char *server_claimidx_prefix(struct arena *a, const char *node_id)
{
	return arena_printf(a, "%s/", node_id);
}

int server_claimidx_parse(const struct store_obj *o, struct arena *a,
			  struct server_claimidx_entry *out, struct err *e)
{
	char *id = arena_strdup(a, o->id), *vol, *alloc;
	json_t *j, *u, *h;

	if (!id)
		return err_set(e, CSID_ENOMEM, "claim index: out of memory");
	vol = strchr(id, '/');
	alloc = vol ? strchr(vol + 1, '/') : NULL;
	if (!alloc || vol == id || alloc == vol + 1 || !alloc[1] || strchr(alloc + 1, '/'))
		return err_set(e, CSID_EPROTO, "claim index entry %.200s: not node/volume/alloc",
			       o->id);
	*vol++ = '\0';
	*alloc++ = '\0';
	j = json_loadb(o->value, o->len, 0, NULL);
	u = json_object_get(j, "updated_ms");
	h = json_object_get(j, "held_by_agent");
	if (!json_is_integer(u) || !json_is_boolean(h)) {
		json_decref(j);
		return err_set(e, CSID_EPROTO, "claim index entry %.200s: damaged value", o->id);
	}
	*out = (struct server_claimidx_entry){id, vol, alloc, (int64_t)json_integer_value(u),
					      json_is_true(h)};
	json_decref(j);
	return 0;
}

/* ---- rebuild ---- */

/* One listed entry and whether a volume backs it. */
struct server_claimidx_listed {
	char *id;
	char *value;
	uint64_t index;
	bool backed;
};

struct server_claimidx_rb {
	struct store *st;
	struct server_claimidx_listed *v; /* ID order */
	size_t n, cap;
	struct store_op ops[SERVER_CLAIMIDX_BATCH];
	size_t nops;
	struct arena *a; /* the batch's strings */
};

static int server_claimidx_listed_cmp(const void *k, const void *x)
{
	return strcmp(k, ((const struct server_claimidx_listed *)x)->id);
}

/* Writes the batch; on a conflict, each op alone (a failed condition skips it). */
static int server_claimidx_flush(struct server_claimidx_rb *rb, struct err *e)
{
	int rc = rb->nops ? store_txn(rb->st, rb->ops, rb->nops, NULL, e) : 0;

	if (rc == CSID_ECONFLICT) {
		rc = 0;
		for (size_t i = 0; !rc && i < rb->nops; i++)
			if ((rc = store_txn(rb->st, &rb->ops[i], 1, NULL, e)) == CSID_ECONFLICT)
				rc = 0;
	}
	rb->nops = 0;
	arena_free(rb->a);
	rb->a = arena_new();
	if (!rc && !rb->a)
		rc = err_set(e, CSID_ENOMEM, "claim index: out of memory");
	return rc;
}

static int server_claimidx_add(struct server_claimidx_rb *rb, const struct server_claimidx_entry *x,
			       bool put, uint64_t expect, struct err *e)
{
	int rc;

	if (rb->nops == SERVER_CLAIMIDX_BATCH && (rc = server_claimidx_flush(rb, e)))
		return rc;
	rc = server_claimidx_op(x, put, expect, rb->a, rb->ops, SERVER_CLAIMIDX_BATCH, &rb->nops);
	return rc ? err_set(e, rc, "claim index: out of memory") : 0;
}

/* Every entry of the index, with its index, into rb->v. */
static int server_claimidx_list_all(struct server_claimidx_rb *rb, struct err *e)
{
	char *after = NULL;
	bool more = true;
	int rc = 0;

	while (!rc && more) {
		struct store_list l = {0};

		rc = store_list(rb->st, STORE_CLAIM, NULL, after, 1000, &l, e);
		for (size_t i = 0; !rc && i < l.n; i++) {
			struct server_claimidx_listed *x;

			if (rb->n == rb->cap) {
				size_t cap = rb->cap ? 2 * rb->cap : 256;
				void *p = realloc(rb->v, cap * sizeof(*rb->v));

				if (!p) {
					rc = err_set(e, CSID_ENOMEM, "claim index: out of memory");
					break;
				}
				rb->v = p;
				rb->cap = cap;
			}
			x = &rb->v[rb->n];
			x->id = strdup(l.objs[i].id);
			x->value = strdup(l.objs[i].value);
			x->index = l.objs[i].modify_index;
			x->backed = false;
			if (!x->id || !x->value) {
				free(x->id);
				free(x->value);
				rc = err_set(e, CSID_ENOMEM, "claim index: out of memory");
				break;
			}
			rb->n++;
		}
		free(after);
		after = !rc && l.n ? strdup(l.objs[l.n - 1].id) : NULL;
		more = !rc && l.more && after;
		store_list_free(&l);
	}
	free(after);
	return rc;
}

/* Puts the entries of one volume record that the listed index lacks or has otherwise. */
static int server_claimidx_volume(struct server_claimidx_rb *rb, const struct store_obj *o,
				  struct err *e)
{
	struct arena *a = arena_new();
	struct server_claimidx_entry *x = NULL;
	struct model_volume *v = NULL;
	size_t n = 0;
	int rc = 0;

	if (!a)
		return err_set(e, CSID_ENOMEM, "claim index: out of memory");
	/* A damaged record is the reconciler's to report; it backs no entry. */
	if (model_volume_decode(a, o->value, o->len, &v, NULL) == 0 && strcmp(v->id, o->id) == 0 &&
	    server_claimidx_of(v, a, &x, &n) != 0)
		rc = err_set(e, CSID_ENOMEM, "claim index: out of memory");
	for (size_t i = 0; !rc && i < n; i++) {
		char *key = server_claimidx_key(a, &x[i]), *value = server_claimidx_value(a, &x[i]);
		struct server_claimidx_listed *l =
		    key ? bsearch(key, rb->v, rb->n, sizeof(*rb->v), server_claimidx_listed_cmp)
			: NULL;

		if (!key || !value) {
			rc = err_set(e, CSID_ENOMEM, "claim index: out of memory");
			break;
		}
		if (l)
			l->backed = true;
		if (!l || strcmp(l->value, value) != 0)
			rc = server_claimidx_add(rb, &x[i], true, l ? l->index : 0, e);
	}
	arena_free(a);
	return rc;
}

int server_claimidx_rebuild(struct store *st, struct err *e)
{
	struct server_claimidx_rb rb = {.st = st, .a = arena_new()};
	char *after = NULL;
	bool more = true;
	int rc = rb.a ? server_claimidx_list_all(&rb, e)
		      : err_set(e, CSID_ENOMEM, "claim index: out of memory");

	while (!rc && more) {
		struct store_list l = {0};

		rc = store_list(st, STORE_VOLUME, NULL, after, 1000, &l, e);
		for (size_t i = 0; !rc && i < l.n; i++) {
			rc = server_claimidx_volume(&rb, &l.objs[i], e);
			explicit_bzero(l.objs[i].value, l.objs[i].len);
		}
		free(after);
		after = !rc && l.n ? strdup(l.objs[l.n - 1].id) : NULL;
		more = !rc && l.more && after;
		store_list_free(&l);
	}
	/* Entries no claimed claim backs, unless rewritten since they were listed. */
	for (size_t i = 0; !rc && i < rb.n; i++) {
		struct store_obj o = {.kind = STORE_CLAIM,
				      .id = rb.v[i].id,
				      .value = rb.v[i].value,
				      .len = strlen(rb.v[i].value)};
		struct server_claimidx_entry x;

		if (rb.v[i].backed)
			continue;
		if (server_claimidx_parse(&o, rb.a, &x, e) != 0) {
			struct store_op del = {STORE_OP_DELETE, STORE_CLAIM, rb.v[i].id, NULL, 0,
					       rb.v[i].index};

			rc = store_txn(st, &del, 1, NULL, e);
			rc = rc == CSID_ECONFLICT ? 0 : rc;
			continue;
		}
		rc = server_claimidx_add(&rb, &x, false, rb.v[i].index, e);
	}
	if (!rc)
		rc = server_claimidx_flush(&rb, e);
	free(after);
	for (size_t i = 0; i < rb.n; i++) {
		free(rb.v[i].id);
		free(rb.v[i].value);
	}
	free(rb.v);
	arena_free(rb.a);
	return rc;
}
