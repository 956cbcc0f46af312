/*
 * Orphan mounts of the agent API's claims (agent_api_claims.c): a node
 * that comes back after the servers released its claims (node down past
 * node_grace, server/server_gc.h) may still hold their mounts, while the
 * volume was controller-unpublished and may be claimed elsewhere now. A
 * server names such allocations in its answer to the node's fingerprint
 * (agent/server_link.h); held_allocs_released (agent/held_allocs.h)
 * passes each one here unless the answer may be stale, and the release
 * thread (agent_api_release.c) unmounts it through the normal unmount
 * path: unpublish, unstage when unused, then the release, which finds no
 * claim and is done.
 *
 * Only mounts the claim flow made are touched: the flow marks its
 * allocation once mounted in the table claims_mounted(volume_id,
 * alloc_id) of the "claims" module, so the mark survives an agent
 * restart; it goes with the release that follows the unmount (not
 * before: the release must reach the server right after the unmount),
 * and with a mount through the low-level PUT /v1/agent/mounts (a mount
 * made without a claim is never unmounted for the servers). A mark left
 * by an unmount whose release never went is harmless: only a reported
 * allocation (a mount record or a claim flow) is ever looked up. The queue is in memory, under
 * rel_mu: an agent that stops before it ran is told again by the next answer.
 */
#include "api/agent_api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/state.h"
#include "util/array.h"
#include "util/log.h"

struct agent_api_orphan {
	char vol[MOUNT_NAME_MAX + 1];
	char alloc[MOUNT_NAME_MAX + 1];
	char note[SERVER_LINK_NOTE_MAX + 1];
};

/* Runs sql with (vol, alloc) bound on the claims table; *row whether a row came. Under rel_mu. */
static int agent_api_claimed_sql(struct agent_api *a, const char *sql, const char *vol,
				 const char *alloc, bool *row, struct err *e)
{
	sqlite3_stmt *st = NULL;
	int src = sqlite3_prepare_v2(a->rel_db, sql, -1, &st, NULL), rc = 0;

	if (src == SQLITE_OK) {
		sqlite3_bind_text(st, 1, vol, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, alloc, -1, SQLITE_STATIC);
		src = sqlite3_step(st);
	}
	if (row)
		*row = src == SQLITE_ROW;
	if (src != SQLITE_OK && src != SQLITE_DONE && src != SQLITE_ROW)
		rc = err_set(e, agent_db_err(src), "claim mark of %s for %s: %s", vol, alloc,
			     sqlite3_errmsg(a->rel_db));
	sqlite3_finalize(st);
	return rc;
}

int agent_api_claimed_mark(struct agent_api *a, const char *vol, const char *alloc, bool on,
			   struct err *e)
{
	int rc;

	if (!a->rel_db)
		return 0;
	pthread_mutex_lock(&a->rel_mu);
	rc = agent_api_claimed_sql(a,
				   on ? "INSERT OR IGNORE INTO claims_mounted VALUES (?, ?)"
				      : "DELETE FROM claims_mounted WHERE volume_id = ? AND "
					"alloc_id = ?",
				   vol, alloc, NULL, e);
	pthread_mutex_unlock(&a->rel_mu);
	return rc;
}

/* Whether the claim flow mounted (vol, alloc); false when it cannot tell (kept). */
static bool agent_api_claimed(struct agent_api *a, const char *vol, const char *alloc)
{
	bool row = false;
	struct err e;
	char q[600];
	int rc;

	pthread_mutex_lock(&a->rel_mu);
	rc = agent_api_claimed_sql(
	    a, "SELECT 1 FROM claims_mounted WHERE volume_id = ? AND alloc_id = ?", vol, alloc,
	    &row, &e);
	pthread_mutex_unlock(&a->rel_mu);
	if (rc)
		log_error("msg=\"released allocation kept: cannot read its claim mark\" volume=%s "
			  "alloc=%s error=%s",
			  vol, alloc, log_q(q, sizeof(q), e.msg));
	return row;
}

/*
 * held_allocs_released_fn: queues (vol, alloc) once and wakes the thread
 * (not as a poke: the pending releases keep their backoff). Quick: under
 * h's lock.
 */
static void agent_api_orphan_found(void *ctx, const char *vol, const char *alloc, const char *note)
{
	struct agent_api *a = ctx;
	struct agent_api_orphan *o;
	bool queued = false;

	pthread_mutex_lock(&a->rel_mu);
	for (size_t i = 0; i < a->norphans && !queued; i++)
		queued =
		    strcmp(a->orphans[i].vol, vol) == 0 && strcmp(a->orphans[i].alloc, alloc) == 0;
	if (!queued && array_grow((void **)&a->orphans, &a->orphans_cap, a->norphans + 1,
				  sizeof(*a->orphans)) == 0) {
		o = &a->orphans[a->norphans++];
		snprintf(o->vol, sizeof(o->vol), "%s", vol);
		snprintf(o->alloc, sizeof(o->alloc), "%s", alloc);
		snprintf(o->note, sizeof(o->note), "%s", note);
		pthread_cond_signal(&a->rel_cond);
	}
	pthread_mutex_unlock(&a->rel_mu);
}

void agent_api_orphans_open(struct agent_api *a)
{
	if (a->rel_started)
		held_allocs_on_released(a->cfg.held, agent_api_orphan_found, a);
}

void agent_api_orphans_close(struct agent_api *a)
{
	held_allocs_on_released(a->cfg.held, NULL, NULL);
	pthread_mutex_lock(&a->rel_mu);
	free(a->orphans);
	a->orphans = NULL;
	a->norphans = a->orphans_cap = 0;
	pthread_mutex_unlock(&a->rel_mu);
}

/* Unmounts one orphan the claim flow mounted; any other is left alone. */
static void agent_api_orphan_unmount(struct agent_api *a, const struct agent_api_orphan *o)
{
	char why[SERVER_LINK_NOTE_MAX + 100], q[700];
	json_t *out = NULL;
	struct err e;

	if (!agent_api_claimed(a, o->vol, o->alloc)) {
		log_debug("msg=\"released allocation kept: not mounted by a claim\" volume=%s "
			  "alloc=%s",
			  o->vol, o->alloc);
		return;
	}
	snprintf(why, sizeof(why),
		 "claim released by the server while the node was away: %s; unmounting", o->note);
	log_warn("msg=%s volume=%s alloc=%s", log_q(q, sizeof(q), why), o->vol, o->alloc);
	err_clear(&e);
	snprintf(why, sizeof(why), "claim released by the server while the node was away: %s",
		 o->note);
	/* A failure is told again by the next answer, which asks for it again. */
	if (agent_api_volume_unmount(a, o->vol, o->alloc, why, &out, &e))
		log_error("msg=\"cannot unmount a released allocation; retried at the next "
			  "heartbeat\" volume=%s alloc=%s error=%s",
			  o->vol, o->alloc, log_q(q, sizeof(q), e.msg));
	json_decref(out);
}

void agent_api_orphans_run(struct agent_api *a)
{
	for (;;) {
		struct agent_api_orphan o;
		bool any;

		pthread_mutex_lock(&a->rel_mu);
		any = a->norphans > 0;
		if (any)
			o = a->orphans[--a->norphans];
		pthread_mutex_unlock(&a->rel_mu);
		if (!any || agent_api_release_stopping(a))
			return;
		agent_api_orphan_unmount(a, &o);
	}
}
