/*
 * The reconciler's state (reconciler.c), shared with the code that turns
 * store changes into enqueues (reconciler_follow.c). Everything here is
 * internal to the two files.
 */
#ifndef CSID_SERVER_RECONCILER_INT_H
#define CSID_SERVER_RECONCILER_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/reconcile_int.h"
#include "server/reconciler_items.h"

struct rec_plugin {
	char *id;
	int inflight;
	struct rec_item **parked;
	size_t nparked, cparked;
};

/* An item waiting for another (a volume for its source not ready yet). */
struct rec_wait {
	enum store_kind kind; /* the source */
	char *id;
	enum store_kind waiter_kind;
	char *waiter_id;
};

struct reconciler {
	pthread_mutex_t mu;
	pthread_cond_t cond; /* workers: an item was queued, or stopping */
	pthread_cond_t fcond; /* the follower: active again, or stopping */
	struct reconciler_config cfg;
	struct clock *clock;
	struct reconcile_env env;

	struct rec_items q;
	int busy; /* items being worked */
	int callers; /* of them, worked on callers' threads (reconciler_run) */
	int idle; /* workers waiting on cond */
	int waking; /* of them, signalled and not back yet (rec_signal) */
	int signals; /* wakes owed to workers, sent at the unlock (rec_unlock) */
	int parked; /* items parked under a plugin */
	int failing; /* items with a last error */
	struct rec_plugin *plugins;
	size_t nplugins, cplugins;
	struct rec_wait *waits;
	size_t nwaits, cwaits;

	bool listed; /* everything was enqueued; follow_index is set */
	int64_t relist_due; /* while not listed: when to list (again) */
	uint64_t follow_index;

	bool stopping;
	bool stopped;
	bool inactive; /* reconciler_set_active(false): no item is taken */
	pthread_t *workers;
	int nworkers;
	bool follower_started;
	pthread_t follower;
};

/* Forgets it (in no queue), and its error. With mu held. */
void rec_drop(struct reconciler *r, struct rec_item *it);

/* Unlocks mu, then sends the wakes owed to workers. */
void rec_unlock(struct reconciler *r);

/* Queues a pass over (kind, id), or marks it again when busy. With mu held. */
void rec_enqueue_locked(struct reconciler *r, enum store_kind kind, const char *id);

/* Whether it is only kept for the follower (see rec_finish). With mu held. */
bool rec_lingers(const struct rec_item *it);

/*
 * Lists everything when that is due (first call, compacted log, failed
 * listing), else turns the changes logged since the last call into
 * enqueues. Does not block; takes mu.
 */
void rec_catch_up(struct reconciler *r);

/* The follower thread: waits for the change log to move (rec_follow_wait) and catches up (arg: r).
 */
void *rec_follower(void *arg);

#endif
