/*
 * Pending releases of the claim flow (claims.h): an unmount that took
 * the mount down records the release (claims_state.h) before sending it,
 * and forgets it once a server took it (or refused it for good). A
 * release no server answered, or one refused with 403 (a wrong token, a
 * node another agent instance took over: an operator's fix lets it
 * pass), stays recorded; claims_step retries every recorded release with
 * backoff (CLAIMS_RELEASE_MIN_MS doubling to CLAIMS_RELEASE_MAX_MS), and
 * at start, so an agent restarted meanwhile finishes it. A release that
 * found no server is retried at once when a server answers the agent
 * again (a request of the claim flow, or a heartbeat answer): the
 * backoff grown during an outage does not hold it back afterwards. Nothing is
 * freed on the server before the node's unpublish succeeded: a release
 * is recorded only after the unmount.
 *
 * claims_step is the whole background work on the clock; the thread
 * (not in manual mode) only runs it and waits until it is next due, a
 * poke, an orphan or the stop.
 */
#include "agent/claims_int.h"

#include <stdlib.h>

#include "util/log.h"

int claims_release_send(struct claims *c, const char *vol, const char *alloc, const char *reason,
			bool patient, struct err *e)
{
	char path[CLAIMS_PATH_MAX];
	json_t *body = json_pack("{s:s, s:s*}", "alloc_id", alloc, "reason", reason);
	int rc;

	if (!body)
		return err_set(e, CSID_ENOMEM, "out of memory");
	rc = claims_volume_path(vol, "/release", path, sizeof(path), e);
	if (rc == 0)
		/* Only its status counts: the answer (the whole volume) is not parsed. */
		rc = claims_server_try(c, "PUT", path, body, patient, NULL, e);
	json_decref(body);
	return rc;
}

int claims_release_done(struct claims *c, const char *vol, const char *alloc, struct err *e)
{
	int rc;

	if (!c->state)
		return 0;
	rc = claims_state_release_drop(c->state, vol, alloc, e);
	/* Released after the unmount: an older agent's claim mark goes too (claims_orphans.c). */
	return rc ? rc : claims_state_unmark(c->state, vol, alloc, e);
}

/* One pass over the recorded releases; whether one is still pending. */
static bool claims_release_pass(struct claims *c)
{
	struct claims_state_release *rows = c->rows;
	bool pending = false;
	size_t n = c->state ? claims_state_release_list(c->state, rows, CLAIMS_RELEASE_BATCH) : 0;

	for (size_t i = 0; i < n && !claims_stopping(c); i++) {
		struct err e;
		char q[600];
		int rc;

		err_clear(&e);
		rc = claims_release_send(c, rows[i].vol, rows[i].alloc,
					 rows[i].reason[0] ? rows[i].reason : NULL, false, &e);
		if (rc == CSID_EUNAVAIL) {
			pthread_mutex_lock(&c->mu);
			c->rel_unanswered = true;
			pthread_mutex_unlock(&c->mu);
			pending = true;
			continue;
		}
		/*
		 * Refused for who sent it (a wrong server_token, or a node now
		 * held by another agent instance): kept, since the claim is
		 * still held and an operator's fix makes the next try pass.
		 */
		if (rc == CSID_EPERM) {
			log_warn("msg=\"pending release refused: the agent is not allowed; kept "
				 "and retried\" volume=%s alloc=%s error=%s",
				 rows[i].vol, rows[i].alloc, log_q(q, sizeof(q), e.msg));
			pending = true;
			continue;
		}
		if (rc)
			log_warn("msg=\"pending release refused: dropped\" volume=%s alloc=%s "
				 "error=%s",
				 rows[i].vol, rows[i].alloc, log_q(q, sizeof(q), e.msg));
		else
			log_info("msg=\"pending release sent\" volume=%s alloc=%s", rows[i].vol,
				 rows[i].alloc);
		if (claims_release_done(c, rows[i].vol, rows[i].alloc, &e))
			pending = true;
	}
	return pending;
}

int64_t claims_step(struct claims *c)
{
	int64_t now;
	bool poked, pending;

	claims_orphans_run(c);
	claims_expand_step(c);
	pthread_mutex_lock(&c->mu);
	poked = c->poke;
	c->poke = false;
	pthread_mutex_unlock(&c->mu);
	now = clock_now_ms(c->clock);
	if (!poked && now < c->rel_due)
		return c->rel_due;
	pending = claims_release_pass(c);
	if (!pending)
		c->rel_delay = CLAIMS_RELEASE_MIN_MS;
	c->rel_due = clock_now_ms(c->clock) + (pending ? c->rel_delay : CLAIMS_RELEASE_MAX_MS);
	if (pending)
		c->rel_delay = c->rel_delay * 2 > CLAIMS_RELEASE_MAX_MS ? CLAIMS_RELEASE_MAX_MS
									: c->rel_delay * 2;
	return c->rel_due;
}

static void *claims_release_main(void *arg)
{
	struct claims *c = arg;

	for (;;) {
		int64_t due = claims_step(c);

		if (c->exp_due < due)
			due = c->exp_due;

		pthread_mutex_lock(&c->mu);
		/* Orphans and volumes to grow anew go at once; the backoff stays. */
		while (!claims_stopping(c) && !c->poke && !c->norphans && !c->exp_poke &&
		       clock_now_ms(c->clock) < due)
			clock_wait(c->clock, &c->cond, &c->mu, due);
		pthread_mutex_unlock(&c->mu);
		if (claims_stopping(c))
			break;
	}
	return NULL;
}

void claims_release_poke(struct claims *c)
{
	pthread_mutex_lock(&c->mu);
	c->poke = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->mu);
}

void claims_release_answered(struct claims *c)
{
	pthread_mutex_lock(&c->mu);
	if (c->rel_unanswered) {
		c->rel_unanswered = false;
		c->poke = true;
		pthread_cond_broadcast(&c->cond);
	}
	pthread_mutex_unlock(&c->mu);
}

int claims_release_start(struct claims *c, struct err *e)
{
	/* Only recorded releases are retried, and only then are orphans looked up. */
	if (!c->state)
		return 0;
	claims_orphans_open(c);
	claims_expand_open(c);
	if (c->cfg.manual)
		return 0;
	if (pthread_create(&c->thread, NULL, claims_release_main, c) != 0)
		return err_set(e, CSID_ENOMEM, "pending releases: cannot start a thread");
	c->started = true;
	return 0;
}

void claims_release_stop(struct claims *c)
{
	claims_orphans_close(c);
	claims_expand_close(c);
	if (c->started)
		pthread_join(c->thread, NULL);
	c->started = false;
}

size_t claims_releases_pending(struct claims *c)
{
	return c->state ? claims_state_release_count(c->state) : 0;
}
