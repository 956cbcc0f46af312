/*
 * Orphan mounts of the claim flow (claims.h): a node that comes back
 * after the servers released its claims (node down past node_grace,
 * server/server_gc.h) may still hold their mounts, while the volume was
 * controller-unpublished and may be claimed elsewhere now. A server
 * names such allocations in its answer to the node's fingerprint
 * (agent/server_link.h); held_allocs_released (agent/held_allocs.h)
 * passes each one here unless the answer may be stale, and claims_step
 * unmounts it through the normal unmount: unpublish, unstage when
 * unused, then the release, which finds no claim and is done.
 *
 * Only mounts the claim flow made are touched: the flow's mount record
 * carries the mark (mount_record.claimed), written with the mount's
 * intent, so it survives an agent restart, and a mount recovered after a
 * crash mid-mount keeps it; it goes with the record at the unmount, and a
 * mount repeated without a claim clears it (such a mount is never
 * unmounted for the servers). Older agents marked an allocation once
 * mounted in a row of their own (claims_state.h): such a row still
 * counts, goes with the release that follows the unmount (not before:
 * the release must reach the server right after the unmount), and with
 * a mount made without a claim (claims_mark_unclaimed). A row left by an
 * unmount whose release never went is harmless: only a reported
 * allocation (a mount record or a claim flow) is ever looked up. The queue is in
 * memory, under the module's lock: an agent that stops before it ran is
 * told again by the next answer.
 */
#include "agent/claims_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/array.h"
#include "util/log.h"

/*
 * Whether the claim flow mounted (vol, alloc): the mount record's mark,
 * else an older agent's row; false when it cannot tell (kept).
 */
static bool claims_orphan_marked(struct claims *c, const char *vol, const char *alloc)
{
	struct mount_record *rec = NULL;
	bool row = false;
	struct err e;
	char q[600];
	int rc;

	err_clear(&e);
	rc = mounter_get(c->cfg.mounter, vol, alloc, &rec, &e);
	row = rc == 0 && rec->claimed;
	mount_record_free(rec);
	if (rc && rc != CSID_ENOTFOUND) {
		log_error("msg=\"released allocation kept: cannot read its mount record\" "
			  "volume=%s alloc=%s error=%s",
			  vol, alloc, log_q(q, sizeof(q), e.msg));
		return false;
	}
	err_clear(&e);
	if (!row && claims_state_marked(c->state, vol, alloc, &row, &e)) {
		log_error("msg=\"released allocation kept: cannot read its claim mark\" volume=%s "
			  "alloc=%s error=%s",
			  vol, alloc, log_q(q, sizeof(q), e.msg));
		return false;
	}
	return row;
}

/*
 * held_allocs_released_fn: queues (vol, alloc) once and wakes the thread
 * (not as a poke: the pending releases keep their backoff). Quick: under
 * the held set's lock.
 */
static void claims_orphan_found(void *ctx, uint64_t seq, const char *vol, const char *alloc,
				const char *note)
{
	struct claims *c = ctx;
	struct claims_orphan *o;
	bool queued = false;

	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < c->norphans && !queued; i++) {
		o = &c->orphans[i];
		queued = strcmp(o->vol, vol) == 0 && strcmp(o->alloc, alloc) == 0;
		/* A newer answer may still hold: its report is the one checked at the unmount. */
		if (queued && o->seq < seq)
			o->seq = seq;
	}
	if (!queued && array_grow((void **)&c->orphans, &c->orphans_cap, c->norphans + 1,
				  sizeof(*c->orphans)) == 0) {
		o = &c->orphans[c->norphans++];
		snprintf(o->vol, sizeof(o->vol), "%s", vol);
		snprintf(o->alloc, sizeof(o->alloc), "%s", alloc);
		snprintf(o->note, sizeof(o->note), "%s", note);
		o->seq = seq;
		pthread_cond_broadcast(&c->cond);
	}
	pthread_mutex_unlock(&c->mu);
}

void claims_orphans_open(struct claims *c)
{
	held_allocs_on_released(c->cfg.held, claims_orphan_found, c);
	c->orphans_on = true;
}

void claims_orphans_close(struct claims *c)
{
	if (c->orphans_on)
		held_allocs_on_released(c->cfg.held, NULL, NULL);
	c->orphans_on = false;
	pthread_mutex_lock(&c->mu);
	free(c->orphans);
	c->orphans = NULL;
	c->norphans = c->orphans_cap = 0;
	pthread_mutex_unlock(&c->mu);
}

/* Unmounts one orphan the claim flow mounted; any other is left alone. */
static void claims_orphan_unmount(struct claims *c, const struct claims_orphan *o)
{
	char why[SERVER_LINK_NOTE_MAX + 100], q[700];
	struct claims_unmount_result res;
	struct err e;

	/* A claim flow of the pair ran since the answer's report: the answer is stale now. */
	if (!held_allocs_settled(c->cfg.held, o->seq, o->vol, o->alloc)) {
		log_debug("msg=\"released allocation kept: a claim flow ran since the report\" "
			  "volume=%s alloc=%s",
			  o->vol, o->alloc);
		return;
	}
	if (!claims_orphan_marked(c, o->vol, o->alloc)) {
		log_debug("msg=\"released allocation kept: not mounted by a claim\" volume=%s "
			  "alloc=%s",
			  o->vol, o->alloc);
		return;
	}
	snprintf(why, sizeof(why),
		 "claim released by the server while the node was away: %s; unmounting", o->note);
	log_warn("msg=%s volume=%s alloc=%s", log_q(q, sizeof(q), why), o->vol, o->alloc);
	snprintf(why, sizeof(why), "claim released by the server while the node was away: %s",
		 o->note);
	err_clear(&e);
	/* A failure is told again by the next answer, which asks for it again. */
	if (claims_unmount(c, o->vol, o->alloc, why, &res, &e))
		log_error("msg=\"cannot unmount a released allocation; retried at the next "
			  "heartbeat\" volume=%s alloc=%s error=%s",
			  o->vol, o->alloc, log_q(q, sizeof(q), e.msg));
}

void claims_orphans_run(struct claims *c)
{
	for (;;) {
		struct claims_orphan o;
		bool any;

		pthread_mutex_lock(&c->mu);
		any = c->norphans > 0;
		if (any)
			o = c->orphans[--c->norphans];
		pthread_mutex_unlock(&c->mu);
		if (!any || claims_stopping(c))
			return;
		claims_orphan_unmount(c, &o);
	}
}
