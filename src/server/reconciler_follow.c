/*
 * The reconciler's follower (see reconciler_int.h): turns store changes
 * into enqueues, from the change log, or by listing every volume and
 * snapshot at a start, after a compaction of the log, or when the server
 * becomes active again.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/reconciler_int.h"
#include "util/log.h"

/* Items listed per store page when everything is enqueued. */
#define REC_LIST_PAGE 500
/* Changes read from the log at a time. */
#define REC_CHANGES_PAGE 1000
/* How long the follower waits between two reads of the change log, at most. */
#define REC_FOLLOW_WAIT_MS 250
/* How long the follower, woken by another server's write, waits for the writes after it. */
#define REC_FOLLOW_BATCH_MS 5

/* ---- enqueueing from the store ---- */

/* Enqueues every object of kind, page by page. */
static int rec_list_kind(struct reconciler *r, enum store_kind kind, struct err *e)
{
	char *after = NULL;
	int rc = 0;

	for (;;) {
		struct store_list l;

		rc = store_list(r->cfg.store, kind, NULL, after, REC_LIST_PAGE, &l, e);
		if (rc < 0)
			break;
		pthread_mutex_lock(&r->mu);
		for (size_t i = 0; i < l.n; i++)
			rec_enqueue_locked(r, kind, l.objs[i].id);
		rec_unlock(r);
		free(after);
		after = l.n > 0 && l.more ? strdup(l.objs[l.n - 1].id) : NULL;
		store_list_free(&l);
		if (after == NULL)
			break;
	}
	free(after);
	return rc;
}

/*
 * Enqueues every volume and snapshot and moves the change-log position to
 * the index read before listing (changes after it are followed, so
 * nothing written meanwhile is missed). On failure, tries again later.
 */
static void rec_list_all(struct reconciler *r)
{
	uint64_t index = store_index(r->cfg.store);
	struct err e;
	int rc;

	err_clear(&e);
	rc = rec_list_kind(r, STORE_VOLUME, &e);
	if (rc == 0)
		rc = rec_list_kind(r, STORE_SNAPSHOT, &e);
	pthread_mutex_lock(&r->mu);
	if (rc < 0) {
		r->relist_due = clock_now_ms(r->clock) + r->cfg.backoff_min_ms;
		log_warn("msg=\"reconciler: cannot list the store\" error=\"%s\"", e.msg);
	} else {
		r->listed = true;
		r->follow_index = index;
	}
	pthread_cond_broadcast(&r->cond);
	rec_unlock(r);
}

/*
 * Lists everything when that is due (first call, compacted log, failed
 * listing), else turns the changes logged since the last call into
 * enqueues. Does not block.
 */
void rec_catch_up(struct reconciler *r)
{
	struct store_changes ch;
	uint64_t after;
	bool listed;
	struct err e;
	int rc;

	pthread_mutex_lock(&r->mu);
	after = r->follow_index;
	listed = r->listed;
	rc = !listed && clock_now_ms(r->clock) < r->relist_due;
	rec_unlock(r);
	if (rc)
		return;
	if (!listed) {
		rec_list_all(r);
		return;
	}
	for (;;) {
		err_clear(&e);
		/* Keys only: a pass reads the object itself. */
		rc = store_change_keys(r->cfg.store, after, REC_CHANGES_PAGE, &ch, &e);
		if (rc == CSID_ERANGE) {
			log_warn("msg=\"reconciler: change log compacted, listing everything\" "
				 "after=%llu",
				 (unsigned long long)after);
			pthread_mutex_lock(&r->mu);
			r->listed = false;
			r->relist_due = 0;
			rec_unlock(r);
			rec_list_all(r);
			return;
		}
		if (rc < 0) {
			log_warn("msg=\"reconciler: cannot read the change log\" error=\"%s\"",
				 e.msg);
			return;
		}
		pthread_mutex_lock(&r->mu);
		for (size_t i = 0; i < ch.n; i++) {
			const struct store_change *c = &ch.changes[i];
			struct rec_item *own = rec_items_find(&r->q, c->obj.kind, c->obj.id);

			if ((c->obj.kind == STORE_VOLUME || c->obj.kind == STORE_SNAPSHOT) &&
			    !(own && own->own_index >= c->index))
				rec_enqueue_locked(r, c->obj.kind, c->obj.id);
			else if (own && own->own_index <= c->index && rec_lingers(own))
				rec_drop(r, own);
			if (ch.changes[i].index > after)
				after = ch.changes[i].index;
		}
		if (after > r->follow_index)
			r->follow_index = after;
		rec_unlock(r);
		rc = (int)ch.n;
		store_changes_free(&ch);
		if (rc < REC_CHANGES_PAGE)
			return;
	}
}

/*
 * Waits until the change log may hold what the follower has not read
 * (after). The server's own writes are queued by their writers at once
 * and the follower only sweeps up behind them, so it is not woken by
 * them: on a store this process holds alone (SQLite, memory) it reads the
 * log every REC_FOLLOW_WAIT_MS, or sooner when stopped; woken per write,
 * it cost every claim two thread wake-ups on its way (the store's
 * broadcast and this thread's, on a two-core node beside the claim's own
 * threads) for nothing. A shared store (etcd) also changes by the other
 * servers' writes, which nobody queued: the first one wakes the follower
 * and the writes right after it come along (one read of the log for a
 * burst). Bounded either way, so that a stop is noticed soon.
 */
static void rec_follow_wait(struct reconciler *r, uint64_t after)
{
	struct clock *c = clock_real();
	int64_t until = clock_now_ms(c) + REC_FOLLOW_WAIT_MS;

	if (store_shared(r->cfg.store)) {
		if (store_wait(r->cfg.store, after, REC_FOLLOW_WAIT_MS) > after)
			nanosleep(&(struct timespec){0, REC_FOLLOW_BATCH_MS * 1000000L}, NULL);
		return;
	}
	pthread_mutex_lock(&r->mu);
	while (!r->stopping && clock_now_ms(c) < until)
		clock_wait(c, &r->fcond, &r->mu, until);
	rec_unlock(r);
}

void *rec_follower(void *arg)
{
	struct reconciler *r = arg;
	uint64_t after;
	bool listed;

	pthread_mutex_lock(&r->mu);
	while (!r->stopping) {
		if (!r->listed && clock_now_ms(r->clock) < r->relist_due) {
			clock_wait(r->clock, &r->fcond, &r->mu, r->relist_due);
			continue;
		}
		after = r->follow_index;
		listed = r->listed;
		rec_unlock(r);
		if (listed)
			rec_follow_wait(r, after);
		rec_catch_up(r);
		pthread_mutex_lock(&r->mu);
	}
	rec_unlock(r);
	return NULL;
}
