/*
 * The reconciler's items: hash table and heap (reconciler_items.h).
 */
#include "server/reconciler_items.h"

#include <stdlib.h>
#include <string.h>

#include "util/array.h"
#include "util/err.h"

int rec_items_init(struct rec_items *q)
{
	*q = (struct rec_items){.nbuckets = 64};
	q->buckets = calloc(q->nbuckets, sizeof(*q->buckets));
	return q->buckets ? 0 : CSID_ENOMEM;
}

void rec_items_free(struct rec_items *q)
{
	for (size_t i = 0; q->buckets && i < q->nbuckets; i++) {
		struct rec_item *it = q->buckets[i], *next;

		for (; it; it = next) {
			next = it->hnext;
			free(it->last_error);
			free(it);
		}
	}
	free(q->buckets);
	free(q->heap);
	*q = (struct rec_items){0};
}

uint64_t rec_items_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

static size_t rec_bucket(const struct rec_items *q, enum store_kind kind, const char *id)
{
	return (size_t)(rec_items_hash(id) ^ (uint64_t)kind) & (q->nbuckets - 1);
}

struct rec_item *rec_items_find(struct rec_items *q, enum store_kind kind, const char *id)
{
	for (struct rec_item *it = q->buckets[rec_bucket(q, kind, id)]; it; it = it->hnext)
		if (it->kind == kind && strcmp(it->id, id) == 0)
			return it;
	return NULL;
}

/* Doubles the table when it is full; keeps the old one when out of memory. */
static void rec_rehash(struct rec_items *q)
{
	size_t n = q->nbuckets * 2;
	struct rec_item **b = calloc(n, sizeof(*b));

	if (b == NULL)
		return;
	for (size_t i = 0; i < q->nbuckets; i++) {
		struct rec_item *it = q->buckets[i], *next;

		for (; it; it = next) {
			size_t j = (size_t)(rec_items_hash(it->id) ^ (uint64_t)it->kind) & (n - 1);

			next = it->hnext;
			it->hnext = b[j];
			b[j] = it;
		}
	}
	free(q->buckets);
	q->buckets = b;
	q->nbuckets = n;
}

struct rec_item *rec_items_add(struct rec_items *q, enum store_kind kind, const char *id)
{
	size_t len = strlen(id);
	struct rec_item *it;
	size_t b;

	if (q->nitems >= q->nbuckets)
		rec_rehash(q);
	it = calloc(1, sizeof(*it) + len + 1);
	if (it == NULL)
		return NULL;
	memcpy(it->id, id, len + 1);
	it->kind = kind;
	it->heap_pos = REC_NOT_QUEUED;
	b = rec_bucket(q, kind, id);
	it->hnext = q->buckets[b];
	q->buckets[b] = it;
	q->nitems++;
	return it;
}

void rec_items_drop(struct rec_items *q, struct rec_item *it)
{
	struct rec_item **p = &q->buckets[rec_bucket(q, it->kind, it->id)];

	while (*p != it)
		p = &(*p)->hnext;
	*p = it->hnext;
	q->nitems--;
	free(it->last_error);
	free(it);
}

static bool rec_before(const struct rec_item *a, const struct rec_item *b)
{
	return a->due < b->due || (a->due == b->due && a->seq < b->seq);
}

static void rec_heap_set(struct rec_items *q, size_t i, struct rec_item *it)
{
	q->heap[i] = it;
	it->heap_pos = i;
}

static void rec_sift_up(struct rec_items *q, size_t i)
{
	struct rec_item *it = q->heap[i];

	while (i > 0 && rec_before(it, q->heap[(i - 1) / 2])) {
		rec_heap_set(q, i, q->heap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	rec_heap_set(q, i, it);
}

static void rec_sift_down(struct rec_items *q, size_t i)
{
	struct rec_item *it = q->heap[i];

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= q->nheap)
			break;
		if (c + 1 < q->nheap && rec_before(q->heap[c + 1], q->heap[c]))
			c++;
		if (!rec_before(q->heap[c], it))
			break;
		rec_heap_set(q, i, q->heap[c]);
		i = c;
	}
	rec_heap_set(q, i, it);
}

void rec_items_unqueue(struct rec_items *q, struct rec_item *it)
{
	size_t i = it->heap_pos;
	struct rec_item *last = q->heap[--q->nheap];

	it->heap_pos = REC_NOT_QUEUED;
	if (last == it)
		return;
	rec_heap_set(q, i, last);
	rec_sift_down(q, i);
	rec_sift_up(q, last->heap_pos);
}

int rec_items_queue(struct rec_items *q, struct rec_item *it, int64_t due)
{
	if (array_grow((void **)&q->heap, &q->cheap, q->nheap + 1, sizeof(*q->heap)) < 0)
		return CSID_ENOMEM;
	it->due = due;
	it->seq = q->seq++;
	rec_heap_set(q, q->nheap++, it);
	rec_sift_up(q, it->heap_pos);
	return 0;
}
