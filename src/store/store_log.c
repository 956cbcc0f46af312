/*
 * The in-memory change log of the memory and SQLite backends (contract in
 * store_log.h). The changes sit in one array used as a queue: appends go
 * at head + n, a trim moves head on, and the array is compacted (moved to
 * its start) when an append finds no room at its end. A read finds its
 * start by binary search on the index.
 */
#include "store/store_log.h"

#include <stdlib.h>
#include <string.h>

#include "store/store_int.h"
#include "util/array.h"

/* The log is trimmed once it holds this many changes beyond the minimum. */
#define STORE_LOG_TRIM_BATCH 1024

struct store_val *store_val_new(const char *value, size_t len)
{
	struct store_val *v = malloc(sizeof(*v) + len + 1);

	if (v == NULL)
		return NULL;
	v->refs = 1;
	v->len = len;
	if (len > 0)
		memcpy(v->data, value, len);
	v->data[len] = '\0';
	return v;
}

void store_val_put(struct store_val *v)
{
	if (v != NULL && --v->refs == 0)
		free(v);
}

void store_log_init(struct store_log *l, uint64_t index)
{
	memset(l, 0, sizeof(*l));
	l->compacted = index;
	l->index = index;
}

static void store_log_drop(struct store_log_change *c)
{
	free(c->id);
	store_val_put(c->val);
}

void store_log_fini(struct store_log *l)
{
	for (size_t i = 0; i < l->n; i++)
		store_log_drop(&l->log[l->head + i]);
	free(l->log);
	memset(l, 0, sizeof(*l));
}

int store_log_reserve(struct store_log *l, size_t n)
{
	if (l->head + l->n + n <= l->cap)
		return 0;
	if (l->head > 0) {
		memmove(l->log, l->log + l->head, l->n * sizeof(l->log[0]));
		l->head = 0;
	}
	return array_grow((void **)&l->log, &l->cap, l->n + n, sizeof(l->log[0]));
}

void store_log_append(struct store_log *l, uint64_t index, enum store_op_type type,
		      enum store_kind kind, char *id, struct store_val *val, uint64_t create_index)
{
	struct store_log_change *c = &l->log[l->head + l->n++];

	c->index = index;
	c->create_index = create_index;
	c->type = type;
	c->kind = kind;
	c->id = id;
	c->val = val;
}

void store_log_commit(struct store_log *l, uint64_t index)
{
	size_t drop;

	if (index > l->index)
		l->index = index;
	if (l->n < STORE_CHANGES_KEEP + STORE_LOG_TRIM_BATCH)
		return;
	/* Whole transactions only: keep every change of the first index kept. */
	drop = l->n - STORE_CHANGES_KEEP;
	while (drop > 1 && l->log[l->head + drop].index == l->log[l->head + drop - 1].index)
		drop--;
	for (size_t i = 0; i < drop; i++)
		store_log_drop(&l->log[l->head + i]);
	l->compacted = l->log[l->head + drop - 1].index;
	l->head += drop;
	l->n -= drop;
}

/* Position of the first change with index > after. */
static size_t store_log_find(const struct store_log *l, uint64_t after)
{
	size_t lo = 0, hi = l->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (l->log[l->head + mid].index <= after)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int store_log_read(const struct store_log *l, uint64_t after, size_t limit, bool values,
		   struct store_changes *out, struct err *e)
{
	const struct store_log_change *c;
	size_t i, end, cap = 0;
	int rc = 0;

	out->index = l->index;
	if (after < l->compacted)
		return err_set(e, CSID_ERANGE,
			       "changes after index %llu: compacted (the log starts after %llu)",
			       (unsigned long long)after, (unsigned long long)l->compacted);
	i = store_log_find(l, after);
	end = limit > 0 && l->n - i > limit ? i + limit : l->n;
	/* Never end a page inside a transaction. */
	while (end > i && end < l->n &&
	       l->log[l->head + end].index == l->log[l->head + end - 1].index)
		end++;
	if (end > i)
		rc = array_grow((void **)&out->changes, &cap, end - i, sizeof(out->changes[0]));
	for (; rc == 0 && i < end; i++) {
		struct store_change *o = &out->changes[out->n];
		bool val;

		c = &l->log[l->head + i];
		val = values && c->val != NULL;
		o->index = c->index;
		o->type = c->type;
		rc =
		    store_obj_set(&o->obj, c->kind, c->id, strlen(c->id), val ? c->val->data : NULL,
				  val ? c->val->len : 0, c->create_index, c->index, e);
		if (rc == 0)
			out->n++;
	}
	if (rc < 0) {
		store_changes_free(out);
		return err_set(e, CSID_ENOMEM, "changes: out of memory");
	}
	return 0;
}
