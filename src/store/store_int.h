/*
 * What the store backends share (not for callers of the store): the
 * condition check and its conflict message, copying objects out, and the
 * notifier that store_wait blocks on. store.c checks every argument
 * before a backend sees it, so backends trust theirs.
 */
#ifndef CSID_STORE_STORE_INT_H
#define CSID_STORE_STORE_INT_H

#include <pthread.h>

#include "store/store.h"

/*
 * Whether a condition holds for an object whose modify index is have (0:
 * the object does not exist).
 */
bool store_cond_holds(uint64_t expect, uint64_t have);

/*
 * Sets e to the conflict of op against an object whose modify index is
 * have (0: missing), naming kind and ID. Returns CSID_ECONFLICT.
 */
int store_conflict(struct err *e, const struct store_op *op, uint64_t have);

/*
 * Fills *o with copies of id and value (value may be NULL: a deleted
 * object, len 0). Returns 0 or CSID_ENOMEM with *o cleared.
 */
int store_obj_set(struct store_obj *o, enum store_kind kind, const char *id, size_t id_len,
		  const char *value, size_t len, uint64_t create_index, uint64_t modify_index,
		  struct err *e);

/*
 * The index and who waits on it. A backend publishes each new index after
 * its commit; store_wait blocks on it. Closing wakes every waiter and
 * waits until they have left, so the backend can then be freed.
 */
struct store_notify {
	pthread_mutex_t mu;
	pthread_cond_t cond; /* the index moved or closing */
	pthread_cond_t left; /* a waiter left while closing */
	uint64_t index;
	unsigned waiters;
	bool closing;
};

/* Returns 0 or CSID_ENOMEM. */
int store_notify_init(struct store_notify *n, uint64_t index);
/* Sets the index (never backwards) and wakes the waiters. */
void store_notify_publish(struct store_notify *n, uint64_t index);
uint64_t store_notify_index(struct store_notify *n);
/* store_wait for a backend. */
uint64_t store_notify_wait(struct store_notify *n, uint64_t after, int64_t timeout_ms);
/* Wakes every waiter, waits until none is left, and destroys n. */
void store_notify_fini(struct store_notify *n);

#endif
