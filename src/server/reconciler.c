/*
 * Reconciler queue (see reconciler.h). State, all under mu:
 *   - items: one per (kind, id) the reconciler is busy with, in a hash
 *     table; an item lives while it is queued, being worked, parked, or
 *     shows an error. Each has its attempt count, due time (monotonic),
 *     last error and flags: busy (a worker has it: no other worker takes
 *     it), again (enqueued while busy: worked again at once after);
 *   - a min-heap of the queued items on (due, sequence), so items are
 *     taken in due-time order and equal due times first come, first served;
 *   - per plugin: how many controller RPCs are in flight, and the items
 *     parked until one of its slots frees;
 *   - the change-log position: the index up to which store changes have
 *     been turned into enqueues;
 *   - waits: items retrying because another is not ready yet (a volume
 *     and its snapshot or clone source), made due again as soon as that
 *     one moves on, rather than at the end of their backoff.
 *
 * A pass over an item (reconcile_volume / reconcile_snapshot) runs with
 * no lock held; its outcome decides where the item goes next: out of the
 * queue (idle), due now (a step was done), after a backoff (retry, poll),
 * after the capped backoff (final), or parked under its plugin (busy).
 * A failing item only ever waits in the heap, so it never delays others.
 */
#include "server/reconciler.h"

#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plugins/supervisor.h"
#include "server/reconcile_int.h"
#include "server/reconciler_int.h"
#include "server/reconciler_items.h"
#include "util/array.h"
#include "util/log.h"
#include "util/metrics.h"

/* Passes one reconciler_step runs at most before returning (a safety valve). */
#define REC_STEP_MAX_PASSES 100000

/* ---- backoff ---- */

/* splitmix64 finaliser: spreads every input bit over the output. */
static uint64_t rec_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

int64_t reconciler_backoff_ms(int attempts, int64_t min_ms, int64_t max_ms, uint64_t seed,
			      enum store_kind kind, const char *id)
{
	uint64_t rnd = rec_mix(seed ^ rec_mix(rec_items_hash(id ? id : "") + (uint64_t)kind) ^
			       (uint64_t)(unsigned)attempts);

	return supervisor_backoff_ms(attempts > 1 ? (unsigned)(attempts - 1) : 0, min_ms, max_ms,
				     rnd);
}

/* Forgets it (in no queue), and its error. */
void rec_drop(struct reconciler *r, struct rec_item *it)
{
	if (it->last_error != NULL)
		r->failing--;
	rec_items_drop(&r->q, it);
}

/*
 * Wakes one idle worker for the queue, unless one woken is not back yet:
 * that one passes the wake on when it takes an item and more are due
 * (rec_worker). With glibc's condition variables a second signal while
 * the first woken waiter has not left its wait blocks the signaller until
 * that waiter runs (the group switch): the API's I/O thread slept so on
 * about a fifth of its claims and releases (perf, futex waits in
 * __condvar_quiesce_and_switch_g1). A wake is never sent for nothing: a
 * woken worker takes an item or waits for the head's time.
 */
static void rec_signal(struct reconciler *r)
{
	if (r->waking == 0 && r->idle > 0 && r->q.nheap > 0) {
		r->waking++;
		r->signals++;
	}
}

/*
 * Unlocks mu, then sends the wakes owed (rec_signal). A worker woken
 * while mu is still held would block on it at once, a second sleep and
 * wake-up (1.6 per claim + release cycle, perf sched_switch).
 */
void rec_unlock(struct reconciler *r)
{
	int n = r->signals;

	r->signals = 0;
	pthread_mutex_unlock(&r->mu);
	while (n-- > 0)
		pthread_cond_signal(&r->cond);
}

/*
 * Queues it (not busy, not parked) due at `due`, or moves it there, and
 * wakes one worker when wake. 0 or CSID_ENOMEM.
 */
static int rec_schedule_wake(struct reconciler *r, struct rec_item *it, int64_t due, bool wake)
{
	int64_t now = clock_now_ms(r->clock);

	if (it->heap_pos != REC_NOT_QUEUED) {
		if (due >= it->due)
			return 0;
		rec_items_unqueue(&r->q, it);
	}
	if (rec_items_queue(&r->q, it, due) < 0)
		return CSID_ENOMEM;
	it->next_wall = due > now ? clock_wall_ms(r->clock) + (due - now) : 0;
	/*
	 * One worker: it takes the item or, when it is not due yet, waits
	 * for the new head's time. A broadcast woke every idle worker for
	 * each item (about 11 context switches per claim + release cycle).
	 */
	if (wake)
		rec_signal(r);
	return 0;
}

static int rec_schedule(struct reconciler *r, struct rec_item *it, int64_t due)
{
	return rec_schedule_wake(r, it, due, true);
}

static void rec_set_error(struct reconciler *r, struct rec_item *it, const char *msg)
{
	if (it->last_error != NULL && msg != NULL && strcmp(it->last_error, msg) == 0)
		return;
	if (it->last_error != NULL)
		r->failing--;
	free(it->last_error);
	it->last_error = msg ? strdup(msg) : NULL;
	if (msg != NULL && it->last_error == NULL)
		it->last_error = strdup("out of memory");
	if (it->last_error != NULL)
		r->failing++;
}

/* With mu held. */
void rec_enqueue_locked(struct reconciler *r, enum store_kind kind, const char *id)
{
	struct rec_item *it = rec_items_find(&r->q, kind, id);

	if (it == NULL)
		it = rec_items_add(&r->q, kind, id);
	if (it == NULL) {
		log_warn("msg=\"reconciler: out of memory, %s %s left for the next resync\"",
			 store_kind_name(kind), id);
		return;
	}
	if (it->busy) {
		it->again = true;
		return;
	}
	if (it->parked)
		return;
	if (rec_schedule(r, it, clock_now_ms(r->clock)) < 0)
		log_warn("msg=\"reconciler: out of memory queueing %s %s\"", store_kind_name(kind),
			 id);
}

void reconciler_restart(struct reconciler *r, enum store_kind kind, const char *id)
{
	struct rec_item *it;

	if (r == NULL || id == NULL)
		return;
	pthread_mutex_lock(&r->mu);
	it = rec_items_find(&r->q, kind, id);
	if (it != NULL) {
		rec_set_error(r, it, NULL);
		it->attempts = 0;
	}
	rec_unlock(r);
	reconciler_enqueue(r, kind, id);
}

uint64_t reconciler_follow_index(struct reconciler *r)
{
	uint64_t index;

	pthread_mutex_lock(&r->mu);
	index = r->follow_index;
	rec_unlock(r);
	return index;
}

void reconciler_enqueue(struct reconciler *r, enum store_kind kind, const char *id)
{
	if (r == NULL || id == NULL || id[0] == '\0' ||
	    (kind != STORE_VOLUME && kind != STORE_SNAPSHOT))
		return;
	pthread_mutex_lock(&r->mu);
	rec_enqueue_locked(r, kind, id);
	rec_unlock(r);
}

/* ---- plugin slots ---- */

static struct rec_plugin *rec_plugin(struct reconciler *r, const char *plugin_id, bool add)
{
	struct rec_plugin *p;

	for (size_t i = 0; i < r->nplugins; i++)
		if (strcmp(r->plugins[i].id, plugin_id) == 0)
			return &r->plugins[i];
	if (!add || array_grow((void **)&r->plugins, &r->cplugins, r->nplugins + 1,
			       sizeof(*r->plugins)) < 0)
		return NULL;
	p = &r->plugins[r->nplugins];
	memset(p, 0, sizeof(*p));
	p->id = strdup(plugin_id);
	if (p->id == NULL)
		return NULL;
	r->nplugins++;
	return p;
}

bool reconciler_plugin_enter(struct reconciler *r, const char *plugin_id)
{
	struct rec_plugin *p;
	bool ok = false;

	pthread_mutex_lock(&r->mu);
	p = rec_plugin(r, plugin_id, true);
	/* Out of memory: run the call unlimited rather than never. */
	if (p == NULL || p->inflight < r->cfg.plugin_concurrency) {
		if (p != NULL)
			p->inflight++;
		ok = true;
	}
	rec_unlock(r);
	return ok;
}

/*
 * Makes parked items due again, oldest first, one per free slot of their
 * plugin; with mu held. Called whenever a slot frees or a pass ends, so a
 * free slot never stays unused while items wait for it (a woken item that
 * no longer needs the plugin ends its pass, which wakes the next one).
 */
static void rec_wake(struct reconciler *r)
{
	int64_t now = clock_now_ms(r->clock);

	for (size_t i = 0; i < r->nplugins; i++) {
		struct rec_plugin *p = &r->plugins[i];
		size_t n = 0;

		while (n < p->nparked && p->inflight + (int)n < r->cfg.plugin_concurrency) {
			p->parked[n]->parked = false;
			r->parked--;
			if (rec_schedule(r, p->parked[n], now) < 0)
				log_warn("msg=\"reconciler: out of memory, %s %s left for the "
					 "next resync\"",
					 store_kind_name(p->parked[n]->kind), p->parked[n]->id);
			n++;
		}
		if (n > 0) {
			memmove(p->parked, p->parked + n, (p->nparked - n) * sizeof(*p->parked));
			p->nparked -= n;
		}
	}
}

void reconciler_plugin_leave(struct reconciler *r, const char *plugin_id)
{
	struct rec_plugin *p;

	pthread_mutex_lock(&r->mu);
	p = rec_plugin(r, plugin_id, false);
	if (p != NULL && p->inflight > 0)
		p->inflight--;
	rec_wake(r);
	rec_unlock(r);
}

/* Parks it until a slot of plugin_id frees (due now when one is free already). */
static void rec_park(struct reconciler *r, struct rec_item *it, const char *plugin_id)
{
	struct rec_plugin *p = rec_plugin(r, plugin_id, true);

	if (p == NULL || p->inflight < r->cfg.plugin_concurrency ||
	    array_grow((void **)&p->parked, &p->cparked, p->nparked + 1, sizeof(*p->parked)) < 0) {
		rec_schedule(r, it,
			     clock_now_ms(r->clock) + (p == NULL ? r->cfg.backoff_min_ms : 0));
		return;
	}
	p->parked[p->nparked++] = it;
	it->parked = true;
	r->parked++;
}

/* ---- working items ---- */

/* Marks it (in no queue) busy. */
static void rec_busy(struct reconciler *r, struct rec_item *it)
{
	it->busy = true;
	it->again = false;
	it->next_wall = 0;
	r->busy++;
}

/* Takes the queued item it out of the queue: busy from here. */
static void rec_take_item(struct reconciler *r, struct rec_item *it)
{
	rec_items_unqueue(&r->q, it);
	rec_busy(r, it);
}

/* Takes the first item due at now (busy from here); NULL when none. */
static struct rec_item *rec_take(struct reconciler *r, int64_t now)
{
	struct rec_item *it;

	if (r->stopping || r->inactive || r->q.nheap == 0 || r->q.heap[0]->due > now)
		return NULL;
	it = r->q.heap[0];
	rec_take_item(r, it);
	return it;
}

/* Remembers that it waits for res's wait object; with mu held. */
static void rec_wait_add(struct reconciler *r, const struct rec_item *it,
			 const struct reconcile_result *res)
{
	struct rec_wait *w;

	for (size_t i = 0; i < r->nwaits; i++)
		if (r->waits[i].kind == res->wait_kind &&
		    strcmp(r->waits[i].id, res->wait_id) == 0 &&
		    r->waits[i].waiter_kind == it->kind &&
		    strcmp(r->waits[i].waiter_id, it->id) == 0)
			return;
	/* Out of memory: the waiter still comes back after its backoff. */
	if (array_grow((void **)&r->waits, &r->cwaits, r->nwaits + 1, sizeof(*r->waits)) < 0)
		return;
	w = &r->waits[r->nwaits];
	w->kind = res->wait_kind;
	w->id = strdup(res->wait_id);
	w->waiter_kind = it->kind;
	w->waiter_id = strdup(it->id);
	if (w->id == NULL || w->waiter_id == NULL) {
		free(w->id);
		free(w->waiter_id);
		return;
	}
	r->nwaits++;
}

/* (kind, id) moved on or settled: its waiters are due now; with mu held. */
static void rec_wait_wake(struct reconciler *r, enum store_kind kind, const char *id)
{
	for (size_t i = 0; i < r->nwaits;) {
		struct rec_wait *w = &r->waits[i];

		if (w->kind != kind || strcmp(w->id, id) != 0) {
			i++;
			continue;
		}
		rec_enqueue_locked(r, w->waiter_kind, w->waiter_id);
		free(w->id);
		free(w->waiter_id);
		*w = r->waits[--r->nwaits];
	}
}

static struct metrics_family rec_steps = METRICS_FAMILY(
    "csid_reconciler_steps_total",
    "Reconciler attempts on an item, by kind and outcome (idle: nothing to do, done: a step "
    "succeeded, poll: waiting on the plugin, retry, final: failed, failed: left failed, busy: "
    "plugin at its concurrency limit).",
    METRICS_COUNTER, NULL, 0, "kind", "outcome");

static void rec_count(enum store_kind kind, enum reconcile_outcome outcome)
{
	static const char *const names[] = {
	    [RECONCILE_IDLE] = "idle",   [RECONCILE_IDLE_FAILED] = "failed",
	    [RECONCILE_AGAIN] = "done",  [RECONCILE_POLL] = "poll",
	    [RECONCILE_RETRY] = "retry", [RECONCILE_FINAL] = "final",
	    [RECONCILE_BUSY] = "busy",
	};
	const char *v[] = {store_kind_name(kind),
			   (unsigned)outcome < sizeof(names) / sizeof(names[0]) && names[outcome]
			       ? names[outcome]
			       : "other"};

	metrics_add(&rec_steps, v, 1);
}

/*
 * Puts it where its outcome says; with mu held. Returns whether it is
 * queued after; when not, it may be gone (freed).
 */
static bool rec_finish(struct reconciler *r, struct rec_item *it,
		       const struct reconcile_result *res)
{
	int64_t now = clock_now_ms(r->clock);
	int64_t due = CLOCK_NEVER;
	char q[ERR_MSG_MAX + 8];

	it->busy = false;
	r->busy--;
	rec_count(it->kind, res->outcome);
	if (res->wrote_index > it->own_index)
		it->own_index = res->wrote_index;
	if (res->outcome == RECONCILE_IDLE || res->outcome == RECONCILE_IDLE_FAILED ||
	    res->outcome == RECONCILE_AGAIN)
		rec_wait_wake(r, it->kind, it->id);
	else if (res->outcome == RECONCILE_RETRY && res->wait_id[0] != '\0' &&
		 (res->wait_kind != it->kind || strcmp(res->wait_id, it->id) != 0))
		rec_wait_add(r, it, res);
	switch (res->outcome) {
	case RECONCILE_IDLE:
		it->attempts = 0;
		it->polls = 0;
		rec_set_error(r, it, NULL);
		break;
	case RECONCILE_IDLE_FAILED:
		/* Failed for good: the error that made it so stays shown. */
		break;
	case RECONCILE_AGAIN:
		it->attempts = 0;
		it->polls = 0;
		rec_set_error(r, it, NULL);
		/* Settled: its next pass would find nothing to do (rv_write). */
		if (!res->settled)
			due = now;
		break;
	case RECONCILE_POLL:
		it->attempts = 0;
		rec_set_error(r, it, NULL);
		it->polls++;
		due = now + reconciler_backoff_ms(it->polls, r->cfg.backoff_min_ms,
						  r->cfg.backoff_max_ms, r->cfg.seed, it->kind,
						  it->id);
		break;
	case RECONCILE_RETRY:
	case RECONCILE_FINAL:
		if (it->attempts < INT32_MAX)
			it->attempts++;
		rec_set_error(r, it, res->e.msg[0] ? res->e.msg : csid_strerror(res->e.code));
		due = now + (res->outcome == RECONCILE_FINAL
				 ? r->cfg.backoff_max_ms
				 : reconciler_backoff_ms(it->attempts, r->cfg.backoff_min_ms,
							 r->cfg.backoff_max_ms, r->cfg.seed,
							 it->kind, it->id));
		log_msg(res->outcome == RECONCILE_FINAL ? LOG_WARN : LOG_INFO,
			"msg=\"reconciler: %s %s failed\" outcome=%s attempts=%d retry_ms=%lld "
			"error=%s",
			store_kind_name(it->kind), it->id,
			res->outcome == RECONCILE_FINAL ? "final" : "retry", it->attempts,
			(long long)(due - now), log_q(q, sizeof(q), it->last_error));
		break;
	case RECONCILE_BUSY:
		if (it->again) {
			due = now;
			break;
		}
		rec_park(r, it, res->plugin_id);
		return false;
	}
	/* A change arrived while it was worked: look at it again now. */
	if (it->again)
		due = now;
	it->again = false;
	if (due != CLOCK_NEVER) {
		/*
		 * The worker that ends this pass looks at the heap next: another
		 * is woken only when this item is not the one it takes (a pass
		 * that did a step is followed by one that checks it, so every
		 * step woke a second worker for nothing).
		 */
		if (rec_schedule_wake(r, it, due, false) == 0) {
			if (r->q.heap[0] != it)
				rec_signal(r);
			return true;
		}
		log_warn("msg=\"reconciler: out of memory, %s %s left for the next resync\"",
			 store_kind_name(it->kind), it->id);
	}
	/*
	 * Out of the queue: kept only to show its error, or until the
	 * follower has read past its own write (rec_catch_up drops it then),
	 * so that the follower knows that write was worked.
	 */
	if (it->last_error != NULL)
		it->next_wall = 0;
	else if (it->own_index <= r->follow_index)
		rec_drop(r, it);
	return false;
}

/* Whether it is only kept for the follower (see rec_finish). */
bool rec_lingers(const struct rec_item *it)
{
	return !it->busy && !it->parked && it->heap_pos == REC_NOT_QUEUED && it->last_error == NULL;
}

/*
 * Works it (taken), then puts it where the outcome says. worker: the
 * caller is a worker, which looks at the queue next; any other caller
 * (reconciler_run) leaves an item queued again to an idle worker.
 */
static void rec_work(struct reconciler *r, struct rec_item *it, bool worker,
		     const struct reconciler_published *pub)
{
	struct reconcile_result res;

	memset(&res, 0, sizeof(res));
	res.published = pub;
	if (it->kind == STORE_VOLUME)
		reconcile_volume(&r->env, it->id, &res);
	else if (it->kind == STORE_SNAPSHOT)
		reconcile_snapshot(&r->env, it->id, &res);
	else
		res.outcome = RECONCILE_IDLE;
	pthread_mutex_lock(&r->mu);
	/* Not it->heap_pos after: a pass that leaves nothing to follow frees it. */
	if (rec_finish(r, it, &res) && !worker)
		rec_signal(r);
	rec_wake(r);
	rec_unlock(r);
}

/*
 * reconciler_written, and with run the item is taken here and worked on
 * this thread when a worker could take it now (reconciler_run), and fewer
 * than cfg.workers callers' threads are in a pass: a plugin that hangs
 * holds at most that many of the callers' threads (HTTP workers). One hold
 * of mu: a pass that ends meanwhile must not drop the item unmarked.
 * Returns whether it was worked here.
 */
static bool rec_written(struct reconciler *r, enum store_kind kind, const char *id, uint64_t index,
			bool restart, bool run, const struct reconciler_published *pub)
{
	struct rec_item *it;

	if (r == NULL || id == NULL || id[0] == '\0' ||
	    (kind != STORE_VOLUME && kind != STORE_SNAPSHOT))
		return false;
	pthread_mutex_lock(&r->mu);
	/*
	 * The follower read the write first (the writer was slow to tell):
	 * it queued a pass after it, or skipped it for a later pass that
	 * reads it. Another would be idle. A restart still queues one: it
	 * drops an error that the follower's pass may have set about the
	 * new request, and the pass sets it again. A run goes on: it takes
	 * the follower's pass when no worker has it yet.
	 */
	if (!run && !restart && r->listed && r->follow_index >= index) {
		rec_unlock(r);
		return false;
	}
	it = rec_items_find(&r->q, kind, id);
	if (it != NULL && restart) {
		rec_set_error(r, it, NULL);
		it->attempts = 0;
	}
	if (run && it == NULL)
		it = rec_items_add(&r->q, kind, id);
	/* Only what a worker could take now (this write makes it due now). */
	run = run && it != NULL && r->workers != NULL && !r->stopping && !r->inactive &&
	      !it->busy && !it->parked && r->callers < r->cfg.workers;
	r->callers += run;
	if (run && it->heap_pos != REC_NOT_QUEUED)
		rec_take_item(r, it);
	else if (run)
		rec_busy(r, it);
	else
		rec_enqueue_locked(r, kind, id);
	it = rec_items_find(&r->q, kind, id);
	if (it != NULL && it->own_index < index)
		it->own_index = index;
	rec_unlock(r);
	if (run) {
		rec_work(r, it, false, pub);
		pthread_mutex_lock(&r->mu);
		r->callers--;
		pthread_mutex_unlock(&r->mu);
	}
	return run;
}

void reconciler_written(struct reconciler *r, enum store_kind kind, const char *id, uint64_t index,
			bool restart)
{
	rec_written(r, kind, id, index, restart, false, NULL);
}

bool reconciler_run(struct reconciler *r, enum store_kind kind, const char *id, uint64_t index,
		    bool restart)
{
	return rec_written(r, kind, id, index, restart, true, NULL);
}

bool reconciler_run_published(struct reconciler *r, enum store_kind kind, const char *id,
			      uint64_t index, bool restart, const struct reconciler_published *pub)
{
	return rec_written(r, kind, id, index, restart, true, pub);
}

/* ---- lifecycle ---- */

int reconciler_new(const struct reconciler_config *cfg, struct reconciler **out, struct err *e)
{
	struct reconciler *r;

	*out = NULL;
	if (cfg == NULL || cfg->store == NULL || cfg->controllers.acquire == NULL ||
	    cfg->controllers.release == NULL)
		return err_set(e, CSID_EINVAL, "reconciler: store and controllers are required");
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return err_set(e, CSID_ENOMEM, "reconciler: out of memory");
	if (rec_items_init(&r->q) < 0 || clock_cond_init(&r->cond) < 0) {
		rec_items_free(&r->q);
		free(r);
		return err_set(e, CSID_ENOMEM, "reconciler: out of memory");
	}
	if (clock_cond_init(&r->fcond) < 0) {
		pthread_cond_destroy(&r->cond);
		rec_items_free(&r->q);
		free(r);
		return err_set(e, CSID_ENOMEM, "reconciler: out of memory");
	}
	pthread_mutex_init(&r->mu, NULL);
	r->cfg = *cfg;
	r->clock = cfg->clock ? cfg->clock : clock_real();
	r->cfg.clock = r->clock;
	if (r->cfg.workers <= 0)
		r->cfg.workers = RECONCILER_WORKERS;
	if (r->cfg.backoff_min_ms <= 0)
		r->cfg.backoff_min_ms = RECONCILER_BACKOFF_MIN_MS;
	if (r->cfg.backoff_max_ms <= 0)
		r->cfg.backoff_max_ms = RECONCILER_BACKOFF_MAX_MS;
	if (r->cfg.backoff_max_ms < r->cfg.backoff_min_ms)
		r->cfg.backoff_max_ms = r->cfg.backoff_min_ms;
	if (r->cfg.rpc_timeout_ms <= 0)
		r->cfg.rpc_timeout_ms = CSI_DEFAULT_TIMEOUT_MS;
	if (r->cfg.plugin_concurrency <= 0)
		r->cfg.plugin_concurrency = 1;
	if (r->cfg.seed == 0)
		r->cfg.seed = rec_mix((uint64_t)clock_wall_ms(r->clock) ^ (uint64_t)(uintptr_t)r);
	r->env.r = r;
	r->env.store = cfg->store;
	r->env.controllers = cfg->controllers;
	r->env.clock = r->clock;
	r->env.rpc_timeout_ms = r->cfg.rpc_timeout_ms;
	r->env.vcache = cfg->vcache;
	*out = r;
	return 0;
}

int64_t reconciler_step(struct reconciler *r)
{
	bool stopping;
	int64_t next;

	pthread_mutex_lock(&r->mu);
	stopping = r->stopping;
	rec_unlock(r);
	if (stopping)
		return CLOCK_NEVER;
	for (int passes = 0; passes < REC_STEP_MAX_PASSES;) {
		int64_t now = clock_now_ms(r->clock);
		struct rec_item *it;
		int worked = 0;

		rec_catch_up(r);
		for (; passes < REC_STEP_MAX_PASSES; passes++, worked++) {
			pthread_mutex_lock(&r->mu);
			it = rec_take(r, now);
			rec_unlock(r);
			if (it == NULL)
				break;
			rec_work(r, it, true, NULL);
		}
		if (worked == 0)
			break;
	}
	pthread_mutex_lock(&r->mu);
	next = r->stopping || r->inactive || r->q.nheap == 0 ? CLOCK_NEVER : r->q.heap[0]->due;
	if (!r->listed && r->relist_due < next)
		next = r->relist_due;
	rec_unlock(r);
	return next;
}

static void *rec_worker(void *arg)
{
	struct reconciler *r = arg;

	/*
	 * Batch scheduling: a worker woken with an item does not preempt the
	 * thread that queued it (the API's I/O thread, in the middle of its
	 * requests); it runs on an idle core at once, or at the next tick.
	 * Preempted, the I/O thread paid two context switches per item.
	 */
	pthread_setschedparam(pthread_self(), SCHED_BATCH, &(struct sched_param){0});

	pthread_mutex_lock(&r->mu);
	while (!r->stopping) {
		int64_t now = clock_now_ms(r->clock);
		struct rec_item *it = rec_take(r, now);

		if (it == NULL) {
			r->idle++;
			clock_wait(r->clock, &r->cond, &r->mu,
				   r->q.nheap > 0 && !r->inactive ? r->q.heap[0]->due
								  : CLOCK_NEVER);
			r->idle--;
			/* Signalled or not (a timeout, a broadcast): never more than were sent. */
			if (r->waking > 0)
				r->waking--;
			continue;
		}
		/* The wake rec_signal held back while this worker was on its way. */
		if (r->q.nheap > 0 && r->q.heap[0]->due <= now && !r->inactive)
			rec_signal(r);
		rec_unlock(r);
		rec_work(r, it, true, NULL);
		pthread_mutex_lock(&r->mu);
	}
	rec_unlock(r);
	return NULL;
}

void reconciler_set_active(struct reconciler *r, bool active)
{
	pthread_mutex_lock(&r->mu);
	if (active && r->inactive) {
		/* Level-triggered: list everything again, as at a start. */
		r->listed = false;
		r->relist_due = 0;
	}
	r->inactive = !active;
	pthread_cond_broadcast(&r->cond);
	pthread_cond_broadcast(&r->fcond);
	rec_unlock(r);
}

int reconciler_start(struct reconciler *r, struct err *e)
{
	int rc = 0;

	pthread_mutex_lock(&r->mu);
	if (r->stopping || r->workers != NULL) {
		rc = err_set(e, CSID_EPRECOND, "reconciler: %s",
			     r->stopping ? "stopped" : "already started");
		rec_unlock(r);
		return rc;
	}
	r->workers = calloc((size_t)r->cfg.workers, sizeof(*r->workers));
	if (r->workers == NULL) {
		rec_unlock(r);
		return err_set(e, CSID_ENOMEM, "reconciler: out of memory");
	}
	rec_unlock(r);
	rec_catch_up(r);
	pthread_mutex_lock(&r->mu);
	for (int i = 0; i < r->cfg.workers; i++) {
		if (pthread_create(&r->workers[i], NULL, rec_worker, r) != 0) {
			rc = err_set(e, CSID_ENOMEM, "reconciler: cannot start a worker thread");
			break;
		}
		pthread_setname_np(r->workers[i], "rec-work");
		r->nworkers++;
	}
	if (rc == 0 && pthread_create(&r->follower, NULL, rec_follower, r) != 0)
		rc = err_set(e, CSID_ENOMEM, "reconciler: cannot start the follower thread");
	else if (rc == 0) {
		pthread_setname_np(r->follower, "rec-follow");
		r->follower_started = true;
	}
	rec_unlock(r);
	if (rc < 0)
		reconciler_stop(r);
	return rc;
}

void reconciler_stop(struct reconciler *r)
{
	if (r == NULL)
		return;
	pthread_mutex_lock(&r->mu);
	if (r->stopped) {
		rec_unlock(r);
		return;
	}
	r->stopping = true;
	r->stopped = true;
	pthread_cond_broadcast(&r->cond);
	pthread_cond_broadcast(&r->fcond);
	rec_unlock(r);
	for (int i = 0; i < r->nworkers; i++)
		pthread_join(r->workers[i], NULL);
	if (r->follower_started)
		pthread_join(r->follower, NULL);
	r->nworkers = 0;
	r->follower_started = false;
}

void reconciler_free(struct reconciler *r)
{
	if (r == NULL)
		return;
	reconciler_stop(r);
	rec_items_free(&r->q);
	for (size_t i = 0; i < r->nplugins; i++) {
		free(r->plugins[i].id);
		free(r->plugins[i].parked);
	}
	for (size_t i = 0; i < r->nwaits; i++) {
		free(r->waits[i].id);
		free(r->waits[i].waiter_id);
	}
	free(r->waits);
	free(r->plugins);
	free(r->workers);
	pthread_cond_destroy(&r->fcond);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

/* ---- status ---- */

int reconciler_status(struct reconciler *r, enum store_kind kind, const char *id, struct arena *a,
		      struct model_status *out)
{
	struct rec_item *it;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (id == NULL)
		return CSID_ENOTFOUND;
	pthread_mutex_lock(&r->mu);
	it = rec_items_find(&r->q, kind, id);
	if (it == NULL || (it->last_error == NULL && it->attempts == 0)) {
		rc = CSID_ENOTFOUND;
	} else {
		out->attempts = it->attempts;
		out->next_attempt_ms = it->heap_pos != REC_NOT_QUEUED ? it->next_wall : 0;
		if (it->last_error != NULL) {
			out->last_error = arena_strdup(a, it->last_error);
			if (out->last_error == NULL)
				rc = CSID_ENOMEM;
		}
	}
	rec_unlock(r);
	return rc;
}

size_t reconciler_statuses(struct reconciler *r, struct arena *a,
			   struct reconciler_status_entry *out, size_t cap, size_t err_max)
{
	size_t n = 0;

	pthread_mutex_lock(&r->mu);
	for (size_t b = 0; b < r->q.nbuckets && n < cap; b++)
		for (struct rec_item *it = r->q.buckets[b]; it && n < cap; it = it->hnext) {
			struct reconciler_status_entry *x = &out[n];

			if (it->last_error == NULL && it->attempts == 0)
				continue;
			x->kind = it->kind;
			x->id = arena_strdup(a, it->id);
			x->st.attempts = it->attempts;
			x->st.next_attempt_ms = it->heap_pos != REC_NOT_QUEUED ? it->next_wall : 0;
			x->st.last_error = NULL;
			if (it->last_error) {
				size_t len = strlen(it->last_error);

				/* Cut on a UTF-8 character boundary. */
				if (len > err_max)
					for (len = err_max;
					     len > 0 &&
					     ((unsigned char)it->last_error[len] & 0xc0) == 0x80;
					     len--)
						;
				x->st.last_error =
				    arena_printf(a, "%.*s", (int)len, it->last_error);
			}
			if (x->id && (!it->last_error || x->st.last_error))
				n++;
		}
	rec_unlock(r);
	return n;
}

void reconciler_counts(struct reconciler *r, int *queued, int *failing)
{
	pthread_mutex_lock(&r->mu);
	if (queued != NULL)
		*queued = (int)r->q.nheap + r->busy + r->parked;
	if (failing != NULL)
		*failing = r->failing;
	rec_unlock(r);
}
