/*
 * The reconciler's items (reconciler.c): one per (kind, id) it is busy
 * with, in a hash table, and the queued ones in a min-heap on (due,
 * sequence), so items are taken in due-time order and equal due times
 * first come, first served. No lock of its own: the reconciler calls it
 * with its mutex held.
 */
#ifndef CSID_SERVER_RECONCILER_ITEMS_H
#define CSID_SERVER_RECONCILER_ITEMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/* One object the reconciler is busy with (see reconciler.c for the flags). */
struct rec_item {
	struct rec_item *hnext;
	enum store_kind kind;
	int attempts; /* failures in a row */
	int polls; /* polls in a row (snapshot not ready) */
	int64_t due; /* monotonic; meaningful while in the heap */
	int64_t next_wall; /* wall-clock time of the next attempt, 0: none */
	uint64_t seq;
	size_t heap_pos; /* REC_NOT_QUEUED when not in the heap */
	bool busy;
	bool again;
	bool parked;
	/*
	 * The index of the last write of it after which a pass was queued
	 * (the reconciler's own, whose pass queued the item again (AGAIN), or
	 * a server write that queued it, reconciler_written): the follower
	 * skips the changes up to it, since that pass reads them all (a write
	 * of another writer before it either was read by the write's pass, or
	 * failed that write's compare-and-set); re-queueing would cost an
	 * idle pass.
	 */
	uint64_t own_index;
	char *last_error;
	char id[];
};

#define REC_NOT_QUEUED SIZE_MAX

struct rec_items {
	struct rec_item **buckets;
	size_t nbuckets, nitems;
	struct rec_item **heap; /* the queued items; heap[0] is due first */
	size_t nheap, cheap;
	uint64_t seq; /* of the next item queued */
};

/* An empty table. 0 or CSID_ENOMEM. */
int rec_items_init(struct rec_items *q);
/* Frees every item and the table; safe on a zeroed one. */
void rec_items_free(struct rec_items *q);
/* FNV-1a of a string. */
uint64_t rec_items_hash(const char *s);
/* The item of (kind, id), or NULL. */
struct rec_item *rec_items_find(struct rec_items *q, enum store_kind kind, const char *id);
/* A new item of (kind, id), in no queue (the caller checked it is not there); NULL: no memory. */
struct rec_item *rec_items_add(struct rec_items *q, enum store_kind kind, const char *id);
/* Frees it (in no queue) and its error. */
void rec_items_drop(struct rec_items *q, struct rec_item *it);
/* Queues it (in no queue) due at due. 0 or CSID_ENOMEM (left out). */
int rec_items_queue(struct rec_items *q, struct rec_item *it, int64_t due);
/* Takes it (queued) out of the queue. */
void rec_items_unqueue(struct rec_items *q, struct rec_item *it);

#endif
