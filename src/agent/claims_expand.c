/*
 * Node expansion of the volumes mounted here (claims.h). After a
 * ControllerExpandVolume that answered node_expansion_required, the
 * server keeps the flag on the volume until every node holding a claim
 * reported NodeExpandVolume done (PUT /v1/volume/<id>/node-expanded,
 * which marks the node's claims node_expanded). The server's answer to
 * each heartbeat names the reported volumes that want it on this node
 * (server/server_gc.h), and held_allocs hands the list to the claim flow
 * (claims_expand_found): no request of the agent's own asks for it. A
 * pass grows each listed volume through the mounter (mounter_expand; a
 * node plugin without EXPAND_VOLUME counts as done) and reports. An
 * answer that names a volume (or a capacity) the last one did not makes
 * the pass run at once; a failed volume makes the next pass come with a
 * doubling backoff (CLAIMS_EXPAND_MIN_MS to CLAIMS_RELEASE_MAX_MS) while
 * the answers keep naming it; otherwise the pass waits for the answers.
 * A volume reported done leaves the list and is remembered with the time
 * of the report: an answer to a heartbeat sent before then may still
 * name it, and is not taken for it.
 * A final refusal (FAILED_PRECONDITION: "Caller MUST NOT retry",
 * OUT_OF_RANGE, INVALID_ARGUMENT) is logged once and remembered in
 * memory for that volume and capacity: not retried until the volume
 * grows again (or the agent restarts).
 * A mount does the same for its volume right after it is mounted (the
 * offline case: the volume was on no node when it grew), from the
 * volume's record it read, so the allocation gets the grown file system;
 * a failure there is left to the passes, the mount stands.
 */
#include "agent/claims_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

/* Whether (vol, cap) was refused finally; with add, remembers it. */
static bool claims_expand_final(struct claims *c, const char *vol, int64_t cap, bool add)
{
	bool found = false;

	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < c->exp_nfinal && i < CLAIMS_EXPAND_FINAL_MAX; i++)
		if (c->exp_final[i].capacity == cap && strcmp(c->exp_final[i].vol, vol) == 0)
			found = true;
	if (add && !found) {
		struct claims_expand_final *f =
		    &c->exp_final[c->exp_nfinal++ % CLAIMS_EXPAND_FINAL_MAX];

		snprintf(f->vol, sizeof(f->vol), "%s", vol);
		f->capacity = cap;
	}
	pthread_mutex_unlock(&c->mu);
	return found;
}

/* The newest time (vol, cap) was reported done, or -1; mu held. */
static int64_t claims_expand_done_ms(struct claims *c, const char *vol, int64_t cap)
{
	int64_t at = -1;

	for (size_t i = 0; i < c->exp_ndone && i < CLAIMS_EXPAND_FINAL_MAX; i++)
		if (c->exp_done[i].capacity == cap && strcmp(c->exp_done[i].vol, vol) == 0 &&
		    c->exp_done[i].done_ms > at)
			at = c->exp_done[i].done_ms;
	return at;
}

/* (vol, cap) was reported done now: remembered, and off the list. */
static void claims_expand_mark_done(struct claims *c, const char *vol, int64_t cap)
{
	struct claims_expand_done *d;
	size_t k = 0;

	pthread_mutex_lock(&c->mu);
	d = &c->exp_done[c->exp_ndone++ % CLAIMS_EXPAND_FINAL_MAX];
	snprintf(d->vol, sizeof(d->vol), "%s", vol);
	d->capacity = cap;
	d->done_ms = clock_now_ms(c->clock);
	for (size_t i = 0; i < c->exp_nwant; i++)
		if (c->exp_want[i].capacity != cap || strcmp(c->exp_want[i].vol, vol) != 0)
			c->exp_want[k++] = c->exp_want[i];
	c->exp_nwant = k;
	pthread_mutex_unlock(&c->mu);
}

/*
 * NodeExpandVolume of vol at capacity cap through plugin, then the
 * report. 0 when done, or refused finally (remembered), else a code with
 * e set.
 */
static int claims_expand_do(struct claims *c, const char *vol, const char *plugin, int64_t cap,
			    struct err *e)
{
	struct mounter_plugin mp = {0};
	char path[CLAIMS_PATH_MAX];
	json_t *body, *doc = NULL;
	int rc;

	if (claims_expand_final(c, vol, cap, false))
		return 0;
	rc = c->cfg.lookup(c->cfg.lookup_ctx, plugin, &mp, e);
	if (rc == 0) {
		rc = mounter_expand(c->cfg.mounter, &mp, vol, cap, e);
		if (c->cfg.release)
			c->cfg.release(c->cfg.lookup_ctx, &mp);
		if (rc == CSID_EPRECOND || rc == CSID_ERANGE || rc == CSID_EINVAL) {
			char q[600];

			claims_expand_final(c, vol, cap, true);
			log_error("msg=\"node expansion refused finally; not retried for this "
				  "capacity\" volume=%s capacity=%lld error=%s",
				  vol, (long long)cap, log_q(q, sizeof(q), e->msg));
			return 0;
		}
	}
	if (rc == 0)
		rc = claims_volume_path(vol, "/node-expanded", path, sizeof(path), e);
	if (rc == 0) {
		body = json_pack("{s:s, s:I}", "node_id", c->node, "capacity", (json_int_t)cap);
		rc = body ? claims_server_try(c, "PUT", path, body, false, &doc, e)
			  : err_set(e, CSID_ENOMEM, "out of memory");
		json_decref(body);
		json_decref(doc);
		if (rc)
			err_wrap(e, "report node expansion of %s", vol);
	}
	if (rc == 0) {
		claims_expand_mark_done(c, vol, cap);
		log_info("msg=\"node expansion done\" volume=%s capacity=%lld", vol,
			 (long long)cap);
	}
	return rc;
}

int claims_expand_volume(struct claims *c, const char *vol, const struct claims_answer *v,
			 struct err *e)
{
	if (!v->node_expansion_required || !v->expand_here)
		return 0;
	if (!*v->plugin_id || v->capacity <= 0)
		return err_set(e, CSID_EINVAL, "volume %s: no plugin_id or capacity", vol);
	return claims_expand_do(c, vol, v->plugin_id, v->capacity, e);
}

/* Whether (vol, cap) is in w[0..n). */
static bool claims_expand_listed(const struct claims_expand_want *w, size_t n, const char *vol,
				 int64_t cap)
{
	for (size_t i = 0; i < n; i++)
		if (w[i].capacity == cap && strcmp(w[i].vol, vol) == 0)
			return true;
	return false;
}

/*
 * A server's answer to a heartbeat sent at sent_ms named v[0..n) (held_allocs.h;
 * called with its lock held): the new list, less what was reported done
 * since the heartbeat went.
 */
static void claims_expand_found(void *ctx, int64_t sent_ms, const struct held_allocs_expand *v,
				size_t n)
{
	struct claims *c = ctx;
	struct claims_expand_want *w = n ? calloc(n, sizeof(*w)) : NULL;
	size_t k = 0;
	bool anew = false;

	if (n && !w)
		return; /* out of memory: the next answer tells again */
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < n; i++) {
		if (strlen(v[i].volume_id) > MOUNT_NAME_MAX ||
		    strlen(v[i].plugin_id) > MOUNT_NAME_MAX ||
		    claims_expand_done_ms(c, v[i].volume_id, v[i].capacity) >= sent_ms ||
		    claims_expand_listed(w, k, v[i].volume_id, v[i].capacity))
			continue;
		snprintf(w[k].vol, sizeof(w[k].vol), "%s", v[i].volume_id);
		snprintf(w[k].plugin, sizeof(w[k].plugin), "%s", v[i].plugin_id);
		w[k].capacity = v[i].capacity;
		if (!claims_expand_listed(c->exp_want, c->exp_nwant, w[k].vol, w[k].capacity))
			anew = true;
		k++;
	}
	free(c->exp_want);
	c->exp_want = w;
	c->exp_nwant = k;
	if (anew) {
		c->exp_poke = true;
		pthread_cond_broadcast(&c->cond);
	}
	pthread_mutex_unlock(&c->mu);
	/* A server answered the heartbeat: a release that found none goes now. */
	claims_release_answered(c);
}

void claims_expand_open(struct claims *c)
{
	held_allocs_on_expand(c->cfg.held, claims_expand_found, c);
	c->exp_on = true;
}

void claims_expand_close(struct claims *c)
{
	if (c->exp_on)
		held_allocs_on_expand(c->cfg.held, NULL, NULL);
	c->exp_on = false;
	pthread_mutex_lock(&c->mu);
	free(c->exp_want);
	c->exp_want = NULL;
	c->exp_nwant = 0;
	pthread_mutex_unlock(&c->mu);
}

/* A pass over the listed volumes; whether one is left to retry. */
static bool claims_expand_pass(struct claims *c)
{
	struct claims_expand_want *w = NULL;
	bool pending = false;
	size_t n;

	pthread_mutex_lock(&c->mu);
	n = c->exp_nwant;
	if (n && (w = malloc(n * sizeof(*w))))
		memcpy(w, c->exp_want, n * sizeof(*w));
	pthread_mutex_unlock(&c->mu);
	if (n && !w)
		return true;
	for (size_t i = 0; i < n && !claims_stopping(c); i++) {
		char q[600];
		struct err e;

		err_clear(&e);
		if (claims_expand_do(c, w[i].vol, w[i].plugin, w[i].capacity, &e) == 0)
			continue;
		log_warn("msg=\"node expansion pending; retried\" volume=%s error=%s", w[i].vol,
			 log_q(q, sizeof(q), e.msg));
		pending = true;
	}
	free(w);
	return pending;
}

int64_t claims_expand_step(struct claims *c)
{
	int64_t now = clock_now_ms(c->clock);
	bool poked;

	if (!c->cfg.client)
		return INT64_MAX;
	pthread_mutex_lock(&c->mu);
	poked = c->exp_poke;
	c->exp_poke = false;
	pthread_mutex_unlock(&c->mu);
	if (!poked && now < c->exp_due)
		return c->exp_due;
	if (!claims_expand_pass(c)) {
		c->exp_delay = CLAIMS_EXPAND_MIN_MS;
		c->exp_due = INT64_MAX;
		return c->exp_due;
	}
	c->exp_due = clock_now_ms(c->clock) + c->exp_delay;
	c->exp_delay =
	    c->exp_delay * 2 > CLAIMS_RELEASE_MAX_MS ? CLAIMS_RELEASE_MAX_MS : c->exp_delay * 2;
	return c->exp_due;
}
