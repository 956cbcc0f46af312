/*
 * Node expansion of the volumes mounted here (claims.h). After a
 * ControllerExpandVolume that answered node_expansion_required, the
 * server keeps the flag on the volume until every node holding a claim
 * reported NodeExpandVolume done (PUT /v1/volume/<id>/node-expanded,
 * which marks the node's claims node_expanded). The agent is level
 * triggered: a pass reads each volume it has published here and, while
 * the flag is set and a claim of this node is not marked, grows the
 * volume through the mounter (mounter_expand; a node plugin without
 * EXPAND_VOLUME counts as done) and reports. A failed volume makes the
 * next pass come sooner with a doubling backoff (CLAIMS_EXPAND_MIN_MS to
 * CLAIMS_RELEASE_MAX_MS); otherwise a pass runs every CLAIMS_EXPAND_MS.
 * A final refusal (FAILED_PRECONDITION: "Caller MUST NOT retry",
 * OUT_OF_RANGE, INVALID_ARGUMENT) is logged once and remembered in
 * memory for that volume and capacity: not retried until the volume
 * grows again (or the agent restarts).
 * A mount does the same for its volume right after it is mounted (the
 * offline case: the volume was on no node when it grew), so the
 * allocation gets the grown file system; a failure there is left to the
 * passes, the mount stands.
 */
#include "agent/claims_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

/* Whether v wants NodeExpandVolume on this node: flagged, and a claim here is not marked. */
static bool claims_expand_wanted(struct claims *c, json_t *v)
{
	json_t *cl;
	size_t i;

	if (!json_is_true(json_object_get(v, "node_expansion_required")))
		return false;
	json_array_foreach(json_object_get(v, "claims"), i, cl)
	{
		const char *n = json_string_value(json_object_get(cl, "node_id"));

		if (n && strcmp(n, c->node) == 0 &&
		    !json_is_true(json_object_get(cl, "node_expanded")))
			return true;
	}
	return false;
}

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

int claims_expand_volume(struct claims *c, const char *vol, json_t *v, struct err *e)
{
	const char *plugin = json_string_value(json_object_get(v, "plugin_id"));
	json_int_t cap = json_integer_value(json_object_get(v, "capacity"));
	struct mounter_plugin mp = {0};
	char path[CLAIMS_PATH_MAX];
	json_t *body, *doc = NULL;
	int rc;

	if (!claims_expand_wanted(c, v) || claims_expand_final(c, vol, (int64_t)cap, false))
		return 0;
	if (!plugin || cap <= 0)
		return err_set(e, CSID_EINVAL, "volume %s: no plugin_id or capacity", vol);
	rc = c->cfg.lookup(c->cfg.lookup_ctx, plugin, &mp, e);
	if (rc == 0) {
		rc = mounter_expand(c->cfg.mounter, &mp, vol, (int64_t)cap, e);
		if (c->cfg.release)
			c->cfg.release(c->cfg.lookup_ctx, &mp);
		if (rc == CSID_EPRECOND || rc == CSID_ERANGE || rc == CSID_EINVAL) {
			char q[600];

			claims_expand_final(c, vol, (int64_t)cap, true);
			log_error("msg=\"node expansion refused finally; not retried for this "
				  "capacity\" volume=%s capacity=%lld error=%s",
				  vol, (long long)cap, log_q(q, sizeof(q), e->msg));
			return 0;
		}
	}
	if (rc == 0)
		rc = claims_volume_path(vol, "/node-expanded", path, sizeof(path), e);
	if (rc == 0) {
		body = json_pack("{s:s, s:I}", "node_id", c->node, "capacity", cap);
		rc = body ? claims_server_try(c, "PUT", path, body, false, &doc, e)
			  : err_set(e, CSID_ENOMEM, "out of memory");
		json_decref(body);
		json_decref(doc);
		if (rc)
			err_wrap(e, "report node expansion of %s", vol);
	}
	if (rc == 0)
		log_info("msg=\"node expansion done\" volume=%s capacity=%lld", vol,
			 (long long)cap);
	return rc;
}

/* One volume of the pass: read it, expand when wanted. Returns 0 when nothing is left. */
static int claims_expand_one(struct claims *c, const char *vol)
{
	char path[CLAIMS_PATH_MAX], q[600];
	json_t *v = NULL;
	struct err e;
	int rc;

	err_clear(&e);
	rc = claims_volume_path(vol, "", path, sizeof(path), &e);
	if (rc == 0)
		rc = claims_server_try(c, "GET", path, NULL, false, &v, &e);
	if (rc == 0)
		rc = claims_expand_volume(c, vol, v, &e);
	json_decref(v);
	if (rc == CSID_ENOTFOUND)
		return 0;
	if (rc)
		log_warn("msg=\"node expansion pending; retried\" volume=%s error=%s", vol,
			 log_q(q, sizeof(q), e.msg));
	return rc;
}

/* A pass over the volumes published here; whether one is left to retry. */
static bool claims_expand_pass(struct claims *c)
{
	struct mount_record **rs = NULL;
	bool pending = false;
	size_t n = 0;
	struct err e;

	err_clear(&e);
	if (mounter_list(c->cfg.mounter, &rs, &n, &e) != 0)
		return true;
	/* Ordered by volume: each volume once. */
	for (size_t i = 0; i < n && !claims_stopping(c); i++) {
		if (rs[i]->state != MOUNT_STATE_PUBLISHED ||
		    (i > 0 && strcmp(rs[i - 1]->volume_id, rs[i]->volume_id) == 0 &&
		     rs[i - 1]->state == MOUNT_STATE_PUBLISHED))
			continue;
		if (claims_expand_one(c, rs[i]->volume_id))
			pending = true;
	}
	mount_records_free(rs, n);
	return pending;
}

int64_t claims_expand_step(struct claims *c)
{
	int64_t now = clock_now_ms(c->clock);
	bool pending;

	if (!c->cfg.client)
		return INT64_MAX;
	if (now < c->exp_due)
		return c->exp_due;
	pending = claims_expand_pass(c);
	if (!pending) {
		c->exp_delay = CLAIMS_EXPAND_MIN_MS;
		c->exp_due = clock_now_ms(c->clock) + CLAIMS_EXPAND_MS;
		return c->exp_due;
	}
	c->exp_due = clock_now_ms(c->clock) + c->exp_delay;
	c->exp_delay =
	    c->exp_delay * 2 > CLAIMS_RELEASE_MAX_MS ? CLAIMS_RELEASE_MAX_MS : c->exp_delay * 2;
	return c->exp_due;
}
