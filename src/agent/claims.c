/*
 * The claim flow (claims.h): the module object, the requests to the
 * servers through the client seam, the mount and the unmount. The
 * durable release queue is in claims_release.c, the orphans in
 * claims_orphans.c, the owners in claims_owners.c.
 *
 * A server request tries the servers in order (the client) and, while
 * none answers, again after a pause doubling from CLAIMS_RETRY_MIN_MS to
 * CLAIMS_RETRY_MAX_MS, within CLAIMS_SERVER_WAIT_MS; the pauses wait on
 * the module's clock and condition variable, so claims_shutdown ends
 * them at once and a fake clock makes them cost nothing.
 */
#include "agent/claims_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/claims_stage.h"
#include "util/log.h"
#include "util/wipe.h"

bool claims_stopping(struct claims *c)
{
	return __atomic_load_n(&c->stop, __ATOMIC_ACQUIRE);
}

void claims_pause_until(struct claims *c, int64_t until)
{
	pthread_mutex_lock(&c->mu);
	while (!claims_stopping(c) && clock_now_ms(c->clock) < until)
		clock_wait(c->clock, &c->cond, &c->mu, until);
	pthread_mutex_unlock(&c->mu);
}

/* The csid code an error answer names ("conflict"), else the one of its status. */
static int claims_server_code(long status, json_t *doc)
{
	const char *code = json_string_value(json_object_get(doc, "code"));

	for (int c = CSID_ERROR_BASE_ + 1; code && c < CSID_ERROR_END_; c++)
		if (strcmp(csid_err_code(c), code) == 0)
			return c;
	if (status == 404)
		return CSID_ENOTFOUND;
	if (status == 409)
		return CSID_ECONFLICT;
	if (status == 412)
		return CSID_EPRECOND;
	if (status == 401 || status == 403)
		return CSID_EPERM;
	return status >= 500 ? CSID_EUNAVAIL : CSID_EINVAL;
}

static int64_t claims_next_pause(int64_t pause)
{
	return pause * 2 > CLAIMS_RETRY_MAX_MS ? CLAIMS_RETRY_MAX_MS : pause * 2;
}

int claims_server_text(struct claims *c, const char *method, const char *path, json_t *body,
		       bool patient, bool want, char **text, size_t *len, struct err *e)
{
	int64_t deadline = clock_now_ms(c->clock) + (patient ? CLAIMS_SERVER_WAIT_MS : 0);
	int64_t pause = CLAIMS_RETRY_MIN_MS;
	struct claims_client *cl = c->cfg.client;
	char *out = NULL;
	long status = 0;
	int rc;

	*text = NULL;
	*len = 0;
	if (!cl)
		return err_set(e, CSID_EPRECOND,
			       "the agent joined no servers (config \"servers\")");
	if (body && !(out = json_dumps(body, JSON_COMPACT)))
		return err_set(e, CSID_ENOMEM, "out of memory");
	for (;;) {
		rc = claims_stopping(c)
			 ? err_set(e, CSID_EUNAVAIL, "the agent is stopping")
			 : cl->request(cl, method, path, out, want, &status, text, len, e);
		if (rc != CSID_EUNAVAIL || clock_now_ms(c->clock) + pause > deadline ||
		    claims_stopping(c))
			break;
		claims_pause_until(c, clock_now_ms(c->clock) + pause);
		pause = claims_next_pause(pause);
	}
	free(out);
	if (rc)
		return err_wrap(e, "no server answered");
	claims_release_answered(c);
	if (status < 200 || status > 299) {
		json_t *doc = *text ? json_loadb(*text, *len, 0, NULL) : NULL;
		const char *msg = json_string_value(json_object_get(doc, "error"));

		rc = err_set(e, claims_server_code(status, doc), "%.800s",
			     msg ? msg : "the server refused the request");
		json_decref(doc);
	}
	if (rc || !want) {
		wipe_free(*text);
		*text = NULL;
		*len = 0;
	}
	return rc;
}

int claims_server_try(struct claims *c, const char *method, const char *path, json_t *body,
		      bool patient, json_t **doc, struct err *e)
{
	char *text = NULL;
	size_t len = 0;
	int rc = claims_server_text(c, method, path, body, patient, doc != NULL, &text, &len, e);

	if (doc)
		*doc = rc == 0 && text ? json_loadb(text, len, 0, NULL) : NULL;
	wipe_free(text);
	return rc;
}

int claims_server_request(struct claims *c, const char *method, const char *path, json_t *body,
			  json_t **doc, struct err *e)
{
	return claims_server_try(c, method, path, body, true, doc, e);
}

/* Appends s percent-escaped (RFC 3986: all but unreserved characters) at out[*n]. */
static void claims_escape(const char *s, char *out, size_t len, size_t *n)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			     (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_' ||
			     ch == '~';

		if (*n + 4 > len) {
			*n = len;
			return;
		}
		if (plain) {
			out[(*n)++] = (char)ch;
		} else {
			out[(*n)++] = '%';
			out[(*n)++] = hex[ch >> 4];
			out[(*n)++] = hex[ch & 15];
		}
	}
}

/* prefix, escaped a, mid, escaped b (may be NULL), rest: into out, or CSID_EINVAL. */
static int claims_path(const char *prefix, const char *a, const char *mid, const char *b,
		       const char *rest, char *out, size_t len, struct err *e)
{
	size_t n = 0;
	int w;

	w = snprintf(out, len, "%s", prefix);
	n = w < 0 ? len : (size_t)w;
	if (n < len)
		claims_escape(a, out, len, &n);
	if (n < len && b) {
		w = snprintf(out + n, len - n, "%s", mid);
		n = w < 0 ? len : n + (size_t)w;
		if (n < len)
			claims_escape(b, out, len, &n);
	}
	if (n < len) {
		w = snprintf(out + n, len - n, "%s", rest);
		n = w < 0 ? len : n + (size_t)w;
	}
	if (n >= len)
		return err_set(e, CSID_EINVAL, "volume ID too long");
	return 0;
}

int claims_volume_path(const char *vol, const char *rest, char *out, size_t len, struct err *e)
{
	return claims_path("/v1/volume/", vol, NULL, NULL, rest, out, len, e);
}

/* ---- the mount ---- */

/* Whether the volume's plugin needs ControllerPublishVolume, as the server sees it. */
static int claims_controller_required(struct claims *c, const char *plugin, bool *out,
				      struct err *e)
{
	char path[CLAIMS_PATH_MAX];
	json_t *doc = NULL;
	int rc;

	if ((rc = claims_path("/v1/plugin/", plugin, NULL, NULL, "", path, sizeof(path), e)) ||
	    (rc = claims_server_request(c, "GET", path, NULL, &doc, e)))
		return err_wrap(e, "plugin %s", plugin);
	*out = json_is_true(json_object_get(doc, "controller_required"));
	json_decref(doc);
	return 0;
}

/*
 * One request whose answer is a volume (or the claim that waits), read
 * for this node into *ans (claims_answer.h). patient as
 * claims_server_try. Returns 0 or a code with e set.
 */
static int claims_answer_get(struct claims *c, const char *method, const char *path, json_t *body,
			     bool patient, struct claims_answer **ans, struct err *e)
{
	char *text = NULL;
	size_t len = 0;
	int rc;

	*ans = NULL;
	rc = claims_server_text(c, method, path, body, patient, true, &text, &len, e);
	if (rc == 0)
		rc = claims_answer_decode(text, len, c->node, ans, e);
	wipe_free(text);
	return rc;
}

/*
 * Follows volume *v (replaced as it changes) until its publication to
 * this node is published, or there is none and none is needed. Returns
 * 0 (the publication is (*v)->pub, NULL: none), or an error naming the
 * volume's last error.
 */
static int claims_wait_published(struct claims *c, const char *vol, struct claims_answer **v,
				 struct err *e)
{
	int64_t deadline = clock_now_ms(c->clock) + CLAIMS_WAIT_MS;
	char path[CLAIMS_PATH_MAX], rest[64];
	bool checked = false, required = true;
	int rc;

	for (;;) {
		const struct claims_answer_pub *p = (*v)->pub;
		const char *last = (*v)->last_error;
		struct claims_answer *next = NULL;

		if (p && strcmp(p->state, "published") == 0)
			return 0;
		if (!p && !checked) {
			rc = claims_controller_required(c, (*v)->plugin_id, &required, e);
			if (rc)
				return rc;
			checked = true;
		}
		if (!p && !required)
			return 0;
		if (clock_now_ms(c->clock) >= deadline)
			return err_set(e, CSID_ETIMEDOUT,
				       "volume %s: not published to node %s after %ds (%s): "
				       "last error: %.600s",
				       vol, c->node, CLAIMS_WAIT_MS / 1000,
				       p && *p->state ? p->state : "no publication",
				       last && *last ? last : "none");
		snprintf(rest, sizeof(rest), "?index=%lld&wait=" CLAIMS_BLOCK_WAIT,
			 (long long)(*v)->modify_index);
		if ((rc = claims_volume_path(vol, rest, path, sizeof(path), e)) ||
		    (rc = claims_answer_get(c, "GET", path, NULL, true, &next, e)))
			return err_wrap(e, "volume %s", vol);
		claims_answer_free(*v);
		*v = next;
	}
}

/*
 * GET /v1/volume/<vol>/node-stage?alloc_id=<alloc>: 0 and *out (free
 * with claims_stage_free), or a code with e set (never quoting a value).
 */
static int claims_stage_get(struct claims *c, const char *vol, const char *alloc,
			    struct claims_stage **out, struct err *e)
{
	char path[CLAIMS_PATH_MAX];
	char *text = NULL;
	size_t len = 0;
	int rc;

	*out = NULL;
	rc = claims_path("/v1/volume/", vol, "/node-stage?alloc_id=", alloc, "", path, sizeof(path),
			 e);
	if (rc == 0 &&
	    (rc = claims_server_text(c, "GET", path, NULL, true, true, &text, &len, e)) == 0)
		rc = claims_stage_decode(text, len, out, e);
	wipe_free(text);
	if (rc)
		err_wrap(e, "node-stage secrets of %s for %s", vol, alloc);
	return rc;
}

/*
 * A volume grown while on no node (node_expansion_required with this
 * node's new claim unmarked) is grown here before the mount is handed
 * out; a failure is logged and left to the node expansion passes.
 */
static void claims_expand_after_mount(struct claims *c, const char *vol,
				      const struct claims_answer *v)
{
	struct err e;
	char q[600];

	err_clear(&e);
	if (claims_expand_volume(c, vol, v, &e) != 0)
		log_warn("msg=\"node expansion after mount failed; retried\" volume=%s error=%s",
			 vol, log_q(q, sizeof(q), e.msg));
}

/*
 * Mounts volume v (published as v->pub, may be NULL) for alloc with st's
 * secrets, with the capability of the publication, else the claim's
 * (cl); fills res, and *had_record as mounter_request.had_record says.
 */
static int claims_do_mount(struct claims *c, const char *vol, const char *alloc,
			   const struct claims_mount_result *cl, const struct claims_answer *v,
			   const struct claims_stage *st, struct mounter_result *res,
			   int *had_record, struct err *e)
{
	const char *access = cl->access_mode, *attach = cl->attachment_mode;
	const struct claims_answer_pub *pub = v->pub;
	struct mounter_request req = {0};
	struct mounter_plugin mp = {0};
	int rc;

	if (pub) {
		access = pub->access_mode;
		attach = pub->attachment_mode ? pub->attachment_mode : "file-system";
		req.publish_context = pub->context;
		req.n_publish_context = pub->n_context;
	}
	req.volume_id = vol;
	req.alloc_id = alloc;
	req.plugin_id = v->plugin_id;
	req.external_id = v->external_id ? v->external_id : vol;
	req.usage.read_only = cl->read_only;
	req.usage.fs_type = v->fs_type && *v->fs_type ? v->fs_type : NULL;
	req.usage.fs_type = st->fs_type && *st->fs_type ? st->fs_type : req.usage.fs_type;
	req.usage.mount_flags = st->flags;
	req.usage.n_mount_flags = st->n_flags;
	req.secrets = st->secrets;
	req.n_secrets = st->n_secrets;
	req.volume_context = v->context;
	req.n_volume_context = v->n_context;
	/* A mount of the claim flow, unmounted if its claim is released (claims_orphans.c). */
	req.claimed = true;
	req.had_record = had_record;
	if ((rc = mount_access_parse(access, &req.usage.access, e)) ||
	    (rc = mount_attachment_parse(*attach ? attach : "file-system", &req.usage.attachment,
					 e)))
		return err_wrap(e, "volume %s", vol);
	rc = c->cfg.lookup(c->cfg.lookup_ctx, req.plugin_id, &mp, e);
	if (rc == 0) {
		rc = mounter_mount(c->cfg.mounter, &mp, &req, res, e);
		if (c->cfg.release)
			c->cfg.release(c->cfg.lookup_ctx, &mp);
	}
	if (rc == 0)
		claims_expand_after_mount(c, vol, v);
	return rc;
}

/* Waits for the volume's node plugin to be healthy here (the lookup's wait). */
static int claims_plugin_ready(struct claims *c, const char *plugin, struct err *e)
{
	struct mounter_plugin mp = {0};
	int rc = c->cfg.lookup(c->cfg.lookup_ctx, plugin, &mp, e);

	if (rc == 0 && c->cfg.release)
		c->cfg.release(c->cfg.lookup_ctx, &mp);
	return rc;
}

/*
 * The claim, retried with backoff for CLAIMS_WAIT_MS while the server
 * answers failed_precondition (the volume is not ready yet, or the
 * node's fingerprint has not shown its plugin healthy yet). An agent
 * that joined no servers is told so at once: that precondition never
 * changes.
 */
static int claims_claim_put(struct claims *c, const char *path, json_t *claim,
			    struct claims_answer **ans, struct err *e)
{
	int64_t deadline = clock_now_ms(c->clock) + CLAIMS_WAIT_MS;
	int64_t pause = CLAIMS_RETRY_MIN_MS;
	int rc;

	for (;;) {
		rc = claims_answer_get(c, "PUT", path, claim, true, ans, e);
		if (rc != CSID_EPRECOND || !c->cfg.client ||
		    clock_now_ms(c->clock) + pause > deadline || claims_stopping(c))
			return rc;
		claims_pause_until(c, clock_now_ms(c->clock) + pause);
		pause = claims_next_pause(pause);
	}
}

/* A string member of o, or dflt. */
static const char *claims_str(json_t *o, const char *key, const char *dflt)
{
	const char *str = json_string_value(json_object_get(o, key));

	return str ? str : dflt;
}

/*
 * The body of PUT /v1/volume/<vol>/claim for req. With the volume v its
 * capability defaults to v's first one, copied into out; without v (the
 * claim that waits) only what req names is sent, and the server takes the
 * volume's first capability for the rest (its answer tells which).
 */
static json_t *claims_claim_body(struct claims *c, const struct claims_mount_req *req, json_t *v,
				 struct claims_mount_result *out)
{
	json_t *cap = json_array_get(json_object_get(v, "capabilities"), 0);
	const char *access = req->access_mode ? req->access_mode
			     : v              ? claims_str(cap, "access_mode", "")
					      : NULL;
	const char *attach = req->attachment_mode ? req->attachment_mode
			     : v ? claims_str(cap, "attachment_mode", "file-system")
				 : NULL;

	snprintf(out->access_mode, sizeof(out->access_mode), "%s", access ? access : "");
	snprintf(out->attachment_mode, sizeof(out->attachment_mode), "%s", attach ? attach : "");
	out->read_only = req->read_only;
	return json_pack("{s:s, s:s, s:s, s:b, s:s*, s:s*}", "alloc_id", req->alloc_id, "node_id",
			 c->node, "mode", req->read_only ? "read" : "write", "held_by_agent", 1,
			 "access_mode", access, "attachment_mode", attach);
}

/* claims_unmount once the allocation is reported as held (below). */
static int claims_unmount_held(struct claims *c, const char *vol, const char *alloc,
			       const char *reason, struct claims_unmount_result *out,
			       struct err *e);

/*
 * "mount failed: <msg>" as a release reason: one line (control characters
 * become spaces) of at most OWNERS_REASON_MAX - 1 bytes, cut at a UTF-8
 * character boundary.
 */
static void claims_failure_reason(const char *msg, char *out, size_t len)
{
	size_t n = (size_t)snprintf(out, len, "mount failed: %s", msg);

	if (n >= len) {
		n = len - 1;
		while (n > 0 && ((unsigned char)out[n] & 0xC0) == 0x80)
			n--;
		out[n] = '\0';
	}
	for (char *p = out; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = ' ';
}

/*
 * A mount that failed after its claim (e holds why): whatever was mounted
 * is taken down and the claim released at once, recorded first like an
 * unmount's release, so a release no server answers is retried (the
 * release passes) and the volume is free for others or for its delete.
 * e is wrapped with what became of the claim.
 */
static void claims_mount_rollback(struct claims *c, const char *vol, const char *alloc,
				  struct err *e)
{
	struct claims_unmount_result ur;
	char reason[OWNERS_REASON_MAX];
	struct err re;

	claims_failure_reason(e->msg, reason, sizeof(reason));
	memset(&ur, 0, sizeof(ur));
	err_clear(&re);
	if (claims_unmount_held(c, vol, alloc, reason, &ur, &re))
		err_wrap(e, "claimed, not mounted; the claim is kept (unmount releases it): %.400s",
			 re.msg);
	else if (ur.release_pending)
		err_wrap(e, "not mounted; the claim's release is pending (retried in the "
			    "background)");
	else
		err_wrap(e, "not mounted; the claim was released");
}

/*
 * Whether vol is mounted for alloc already (a repeated mount): such a
 * mount holds the claim, so a repeat that fails leaves both alone.
 */
static bool claims_mounted_before(struct claims *c, const char *vol, const char *alloc)
{
	struct mount_record *rec = NULL;
	struct err ignored;
	int rc;

	err_clear(&ignored);
	/* Not known for sure (the mounter's store failed): left alone, as if mounted. */
	if ((rc = mounter_get(c->cfg.mounter, vol, alloc, &rec, &ignored)) == 0)
		mount_record_free(rec);
	return rc != CSID_ENOTFOUND;
}

/*
 * The claim of an older server's flow: the volume read first (its
 * capability and plugin), the node plugin waited for, then the claim.
 * *v: the claim's answer (the volume).
 */
static int claims_claim_follow(struct claims *c, const struct claims_mount_req *r,
			       struct claims_mount_result *out, struct claims_answer **v,
			       struct err *e)
{
	char path[CLAIMS_PATH_MAX];
	json_t *claim = NULL, *vol = NULL;
	int rc;

	if ((rc = claims_volume_path(r->volume_id, "", path, sizeof(path), e)) ||
	    (rc = claims_server_request(c, "GET", path, NULL, &vol, e)))
		return rc;
	if (!(claim = claims_claim_body(c, r, vol, out)))
		rc = err_set(e, CSID_ENOMEM, "out of memory");
	if (rc == 0)
		rc = claims_plugin_ready(c, claims_str(vol, "plugin_id", ""), e);
	json_decref(vol);
	if (rc == 0)
		rc = claims_volume_path(r->volume_id, "/claim", path, sizeof(path), e);
	if (rc == 0)
		rc = claims_claim_put(c, path, claim, v, e);
	json_decref(claim);
	return rc;
}

/*
 * The claim that waits server side for this node's publication and
 * answers it with the node-stage data (docs/server-api.md): one request.
 * Returns 0 with *ans, the answer ((*ans)->waited), or an older server's
 * (the volume alone: it took the claim, and the rest is followed);
 * CSID_EUNIMPL when an older server refused a claim without access_mode
 * (nothing was claimed: c->old_server is set); or the claim's error.
 */
static int claims_claim_wait(struct claims *c, const struct claims_mount_req *r,
			     struct claims_mount_result *out, struct claims_answer **ans,
			     struct err *e)
{
	char path[CLAIMS_PATH_MAX];
	json_t *claim = claims_claim_body(c, r, NULL, out);
	int rc;

	if (!claim)
		return err_set(e, CSID_ENOMEM, "out of memory");
	rc = claims_volume_path(r->volume_id, "/claim" CLAIMS_CLAIM_WAIT, path, sizeof(path), e);
	if (rc == 0)
		rc = claims_claim_put(c, path, claim, ans, e);
	json_decref(claim);
	/* Only an older server refuses a claim without access_mode ("access_mode: required"). */
	if (rc == CSID_EINVAL && !r->access_mode && strstr(e->msg, "access_mode")) {
		__atomic_store_n(&c->old_server, true, __ATOMIC_RELEASE);
		log_info("msg=\"the server does not wait on claims: following the volume\" "
			 "volume=%s",
			 r->volume_id);
		return err_set(e, CSID_EUNIMPL, "the server does not wait on claims");
	}
	if (rc == 0 && !(*ans)->waited)
		__atomic_store_n(&c->old_server, true, __ATOMIC_RELEASE);
	return rc;
}

/*
 * Takes what the claim that waited answered (ans): out's capability from
 * the claim; *published: the publication is done or not needed (else it
 * is followed).
 */
static int claims_claim_taken(const struct claims_answer *ans, struct claims_mount_result *out,
			      bool *published, struct err *e)
{
	const char *state = ans->publication_state;

	if (!ans->has_volume || !ans->has_claim)
		return err_set(e, CSID_EPROTO, "the server's claim answer is malformed");
	snprintf(out->access_mode, sizeof(out->access_mode), "%s", ans->claim_access_mode);
	snprintf(out->attachment_mode, sizeof(out->attachment_mode), "%s",
		 ans->claim_attachment_mode ? ans->claim_attachment_mode : "file-system");
	*published = strcmp(state, "published") == 0 || strcmp(state, "not-required") == 0;
	return 0;
}

/* claims_mount once the allocation is reported as held; owner checked (NULL: none). */
static int claims_mount_held(struct claims *c, const struct claims_mount_req *r,
			     struct owners_spec *owner, struct claims_mount_result *out,
			     struct err *e)
{
	const char *vol = r->volume_id, *alloc = r->alloc_id;
	struct mounter_result *res = NULL;
	struct claims_stage *own = NULL;
	const struct claims_stage *st = NULL;
	struct claims_answer *v = NULL;
	bool claimed = false, published = false;
	int rc = CSID_EUNIMPL, had_record = -1;

	if (!__atomic_load_n(&c->old_server, __ATOMIC_ACQUIRE))
		rc = claims_claim_wait(c, r, out, &v, e);
	if (rc == CSID_EUNIMPL) {
		err_clear(e);
		rc = claims_claim_follow(c, r, out, &v, e);
	}
	if (rc) {
		err_wrap(e, "claim %s for %s", vol, alloc);
		goto out;
	}
	claimed = true;
	log_info("msg=\"volume claimed\" volume=%s alloc=%s node=%s", vol, alloc, c->node);
	if (v->waited && (rc = claims_claim_taken(v, out, &published, e)))
		goto out;
	/* Answered with the publication: its node-stage data came along. */
	if (published)
		st = v->stage;
	/* Not published within the claim's wait (or a publish attempt failed): followed. */
	if (!published && (rc = claims_wait_published(c, vol, &v, e)))
		goto out;
	if (!st && (rc = claims_stage_get(c, vol, alloc, &own, e)))
		goto out;
	if (!st)
		st = own;
	/* Not zeroed (8 KB): the mounter fills it on success, and nothing reads it otherwise. */
	if (!(res = malloc(sizeof(*res)))) {
		rc = err_set(e, CSID_ENOMEM, "out of memory");
		goto out;
	}
	if ((rc = claims_do_mount(c, vol, alloc, out, v, st, res, &had_record, e)))
		goto out;
	if (owner && (rc = claims_owner_record(c, vol, alloc, owner, e))) {
		err_wrap(e, "mounted, but its owner is not recorded");
		goto out;
	}
	snprintf(out->path, sizeof(out->path), "%s", res->target);
	snprintf(out->source, sizeof(out->source), "%s", res->source);
	out->is_device = res->is_device;
out:
	/*
	 * A failure after the claim releases it, unless an earlier mount holds
	 * it: the mounter said whether one was recorded as it began, else
	 * (it failed before reading that, or was never reached) the store says.
	 */
	if (rc && claimed &&
	    (had_record == 0 || (had_record < 0 && !claims_mounted_before(c, vol, alloc))))
		claims_mount_rollback(c, vol, alloc, e);
	claims_stage_free(own);
	free(res);
	claims_answer_free(v);
	return rc;
}

int claims_mount(struct claims *c, const struct claims_mount_req *req,
		 struct claims_mount_result *out, struct err *e)
{
	struct owners_spec owner;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = mount_name_check("volume id", req->volume_id, e)) ||
	    (rc = mount_name_check("alloc_id", req->alloc_id, e)))
		return rc;
	/* The owner is checked before anything is claimed. */
	if (req->owner) {
		owner = *req->owner;
		if ((rc = claims_owner_check(c, &owner, e)))
			return rc;
	}
	/* Reported as held before the claim goes out (server/server_gc.h). */
	if ((rc = held_allocs_begin(c->cfg.held, req->volume_id, req->alloc_id, e)))
		return rc;
	rc = claims_mount_held(c, req, req->owner ? &owner : NULL, out, e);
	held_allocs_end(c->cfg.held, req->volume_id, req->alloc_id);
	return rc;
}

/* ---- the unmount ---- */

/* Unmounts vol for alloc through the plugin that mounted it; CSID_ENOTFOUND: no record. */
static int claims_unmount_record(struct claims *c, const char *vol, const char *alloc,
				 struct err *e)
{
	struct mounter_plugin mp = {0};
	struct mount_record *rec = NULL;
	char plugin[MOUNT_NAME_MAX + 1];
	int rc;

	rc = mounter_get(c->cfg.mounter, vol, alloc, &rec, e);
	if (rc == CSID_ENOTFOUND)
		return err_set(e, CSID_ENOTFOUND, "no mount of volume %s for alloc %s", vol, alloc);
	if (rc)
		return rc;
	snprintf(plugin, sizeof(plugin), "%s", rec->plugin_id);
	mount_record_free(rec);
	rc = c->cfg.lookup(c->cfg.lookup_ctx, plugin, &mp, e);
	if (rc)
		return err_wrap(e, "unmount %s for %s", vol, alloc);
	rc = mounter_unmount(c->cfg.mounter, &mp, vol, alloc, e);
	if (c->cfg.release)
		c->cfg.release(c->cfg.lookup_ctx, &mp);
	return rc;
}

static int claims_unmount_held(struct claims *c, const char *vol, const char *alloc,
			       const char *reason, struct claims_unmount_result *out, struct err *e)
{
	struct err ignored;
	char q[600];
	int rc;

	rc = claims_unmount_record(c, vol, alloc, e);
	if (rc && rc != CSID_ENOTFOUND)
		return err_wrap(e, "the claim is kept");
	out->unmounted = rc == 0;
	/* Recorded before it is sent: an agent that stops now still sends it. */
	if (c->state && (rc = claims_state_release_put(c->state, vol, alloc, reason, e)))
		return err_wrap(e, "%s", out->unmounted ? "unmounted" : "nothing mounted");
	/* Recorded: one try of each server, then the background backoff. */
	rc = claims_release_send(c, vol, alloc, reason, !c->state, e);
	/* Kept too when refused for who sent it (claims_release.c says why). */
	if ((rc == CSID_EUNAVAIL || rc == CSID_EPERM) && c->state) {
		log_warn("msg=\"release pending: retried in the background\" volume=%s alloc=%s "
			 "error=%s",
			 vol, alloc, log_q(q, sizeof(q), e->msg));
		claims_release_poke(c);
		claims_owner_forget(c, vol, alloc);
		out->release_pending = true;
		snprintf(out->release_error, sizeof(out->release_error), "%s", e->msg);
		err_clear(e);
		return 0;
	}
	err_clear(&ignored);
	claims_release_done(c, vol, alloc, &ignored);
	/*
	 * The server knows no claim of alloc (a mount stopped before its
	 * claim, or the volume is gone): nothing is held, the unmount is done.
	 */
	if (rc == CSID_ENOTFOUND) {
		log_info("msg=\"no claim to release\" volume=%s alloc=%s unmounted=%d error=%s",
			 vol, alloc, out->unmounted, log_q(q, sizeof(q), e->msg));
		claims_owner_forget(c, vol, alloc);
		err_clear(e);
		return 0;
	}
	if (rc)
		return err_wrap(e, "%s; release %s for %s (unmount again to retry)",
				out->unmounted ? "unmounted" : "nothing mounted", vol, alloc);
	log_info("msg=\"claim released\" volume=%s alloc=%s unmounted=%d", vol, alloc,
		 out->unmounted);
	claims_owner_forget(c, vol, alloc);
	out->released = true;
	return 0;
}

int claims_unmount(struct claims *c, const char *vol, const char *alloc, const char *reason,
		   struct claims_unmount_result *out, struct err *e)
{
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = mount_name_check("volume id", vol, e)) ||
	    (rc = mount_name_check("alloc id", alloc, e)))
		return rc;
	/*
	 * Reported as held until the release went (server/server_gc.h): a
	 * report without the allocation must not reach the server before
	 * the release, whose reason the claim is to keep.
	 */
	if ((rc = held_allocs_begin(c->cfg.held, vol, alloc, e)))
		return rc;
	rc = claims_unmount_held(c, vol, alloc, reason, out, e);
	held_allocs_end(c->cfg.held, vol, alloc);
	return rc;
}

int claims_mark_unclaimed(struct claims *c, const char *vol, const char *alloc, struct err *e)
{
	/* The mounter's record takes the mount's own mark; an older agent's mark goes here. */
	return c->state ? claims_state_unmark(c->state, vol, alloc, e) : 0;
}

/* ---- life cycle ---- */

int claims_new(const struct claims_config *cfg, struct claims **out, struct err *e)
{
	struct claims *c;
	int rc;

	*out = NULL;
	if (!cfg->node_name || !cfg->mounter || !cfg->lookup)
		return err_set(e, CSID_EINVAL, "claims: node name, mounter and lookup required");
	if (!(c = calloc(1, sizeof(*c))))
		return err_set(e, CSID_ENOMEM, "out of memory");
	c->cfg = *cfg;
	c->clock = cfg->clock ? cfg->clock : clock_real();
	pthread_mutex_init(&c->mu, NULL);
	clock_cond_init(&c->cond);
	c->rel_delay = CLAIMS_RELEASE_MIN_MS;
	c->exp_delay = CLAIMS_EXPAND_MIN_MS;
	c->rel_due = clock_now_ms(c->clock);
	c->node = strdup(cfg->node_name);
	c->cfg.node_name = c->node;
	c->cfg.db_path = NULL;
	c->rows = calloc(CLAIMS_RELEASE_BATCH, sizeof(*c->rows));
	if (!c->node || !c->rows) {
		rc = err_set(e, CSID_ENOMEM, "out of memory");
		goto fail;
	}
	/* Without servers nothing is claimed, so nothing is recorded or watched. */
	if (cfg->client && cfg->db_path && (rc = claims_state_open(cfg->db_path, &c->state, e)))
		goto fail;
	if (cfg->client &&
	    ((rc = claims_owners_open(c, cfg->db_path, e)) || (rc = claims_release_start(c, e))))
		goto fail;
	*out = c;
	return 0;
fail:
	claims_free(c);
	return rc;
}

void claims_shutdown(struct claims *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	__atomic_store_n(&c->stop, true, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->mu);
	if (c->cfg.client && c->cfg.client->cancel)
		c->cfg.client->cancel(c->cfg.client);
}

void claims_free(struct claims *c)
{
	if (!c)
		return;
	claims_shutdown(c);
	/* The thread may forget an owner: it goes first; the owner watch may poke it. */
	claims_release_stop(c);
	claims_owners_close(c);
	claims_state_close(c->state);
	free(c->rows);
	free(c->node);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->mu);
	free(c);
}
