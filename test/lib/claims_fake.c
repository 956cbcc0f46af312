/*
 * The fake csid server of the claim flow's tests (claims_fake.h). Paths
 * are matched on their shape; volume IDs in tests need no escaping.
 */
#include "claims_fake.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct claims_fake_volume *claims_fake_find(struct claims_fake *f, const char *id,
						   size_t len)
{
	for (int i = 0; i < f->nvols; i++)
		if (strlen(f->vols[i].id) == len && strncmp(f->vols[i].id, id, len) == 0)
			return &f->vols[i];
	return NULL;
}

static json_t *claims_fake_volume_json(struct claims_fake *f, struct claims_fake_volume *v)
{
	json_t *pubs = json_array();

	if (v->pub_state[0])
		json_array_append_new(
		    pubs, json_pack("{s:s, s:s, s:s, s:s, s:{s:s}}", "node_id", f->node, "state",
				    v->pub_state, "access_mode", v->access_mode, "attachment_mode",
				    "file-system", "context", "device", "/dev/fake0"));
	return json_pack("{s:s, s:s, s:s, s:[{s:s, s:s}], s:{s:s}, s:o, s:I, s:{s:s}, "
			 "s:{s:s}}",
			 "id", v->id, "plugin_id", v->plugin, "external_id", v->id, "capabilities",
			 "access_mode", v->access_mode, "attachment_mode", "file-system", "context",
			 "pool", "fast", "publications", pubs, "modify_index",
			 (json_int_t)v->modify_index, "status", "last_error", "controller busy",
			 "mount_options", "fs_type", "ext4");
}

static json_t *claims_fake_error(const char *code, const char *msg)
{
	return json_pack("{s:s, s:s}", "error", msg, "code", code);
}

static json_t *claims_fake_stage(void)
{
	return json_pack("{s:{s:s}, s:[s], s:s}", "secrets", "token", "s3cr3t-value", "mount_flags",
			 "nodev,key=flag-s3cr3t", "fs_type", "ext4");
}

/*
 * The answer of a claim that waits (docs/server-api.md): a pending
 * publication is published at once with auto_publish, else the wait (5 s)
 * passes on the clock and it is still publishing.
 */
static json_t *claims_fake_waited(struct claims_fake *f, struct claims_fake_volume *v,
				  const char *alloc)
{
	const char *state = "not-required";
	json_t *vol, *ans;

	f->claim_waits++;
	if (strcmp(v->pub_state, "pending") == 0 && v->auto_publish && v->publish_after-- <= 0) {
		snprintf(v->pub_state, sizeof(v->pub_state), "published");
		v->modify_index++;
	} else if (strcmp(v->pub_state, "pending") == 0 && f->clock) {
		clock_fake_advance(f->clock, 5000);
	}
	if (v->pub_state[0])
		state = strcmp(v->pub_state, "published") == 0 ? "published" : "publishing";
	vol = claims_fake_volume_json(f, v);
	ans = json_pack("{s:O, s:{s:s, s:s, s:s, s:s, s:s}, s:O?, s:s}", "volume", vol, "claim",
			"alloc_id", alloc, "node_id", f->node, "state", "claimed", "access_mode",
			v->access_mode, "attachment_mode", "file-system", "publication",
			json_array_get(json_object_get(vol, "publications"), 0),
			"publication_state", state);
	json_decref(vol);
	if (ans && strcmp(state, "publishing") != 0) {
		f->stage_answers++;
		json_object_set_new(ans, "node_stage", claims_fake_stage());
	}
	return ans;
}

static int claims_fake_claim(struct claims_fake *f, struct claims_fake_volume *v, const char *query,
			     const char *body, long *status, json_t **doc)
{
	json_t *b = json_loads(body ? body : "", 0, NULL);
	const char *alloc = json_string_value(json_object_get(b, "alloc_id"));
	bool wait = !f->old_server && query && strstr(query, "wait=");
	int slot = -1;

	f->claims_put++;
	if (f->old_server && !json_object_get(b, "access_mode")) {
		*status = 400;
		*doc = claims_fake_error("invalid_argument", "access_mode: required");
	} else if (f->claim_precond > 0) {
		f->claim_precond--;
		*status = 412;
		*doc = claims_fake_error("failed_precondition", "volume not ready");
	} else if (f->claim_status) {
		*status = f->claim_status;
		*doc = claims_fake_error(f->claim_code, "volume held by alloc other on node-9");
	} else if (!alloc) {
		*status = 400;
		*doc = claims_fake_error("invalid_argument", "alloc_id: required");
	} else {
		for (int i = 0; i < CLAIMS_FAKE_CLAIMS; i++)
			if ((slot < 0 && !v->claims[i][0]) || strcmp(v->claims[i], alloc) == 0)
				slot = i;
		snprintf(v->claims[slot], sizeof(v->claims[slot]), "%s", alloc);
		if (v->controller_required && !v->pub_state[0])
			snprintf(v->pub_state, sizeof(v->pub_state), "pending");
		v->modify_index++;
		*status = 200;
		*doc = wait ? claims_fake_waited(f, v, alloc) : claims_fake_volume_json(f, v);
		f->down = f->down || f->down_after_claim;
	}
	json_decref(b);
	return 0;
}

static int claims_fake_release(struct claims_fake *f, struct claims_fake_volume *v,
			       const char *body, long *status, json_t **doc)
{
	json_t *b = json_loads(body ? body : "", 0, NULL);
	const char *alloc = json_string_value(json_object_get(b, "alloc_id"));
	const char *reason = json_string_value(json_object_get(b, "reason"));
	bool found = false;

	if (f->releases < 16)
		f->release_times[f->releases] = f->clock ? clock_now_ms(&f->clock->base) : 0;
	f->releases++;
	snprintf(f->last_reason, sizeof(f->last_reason), "%s", reason ? reason : "");
	f->last_reason_null = !reason;
	for (int i = 0; alloc && i < CLAIMS_FAKE_CLAIMS; i++)
		if (strcmp(v->claims[i], alloc) == 0) {
			v->claims[i][0] = '\0';
			found = true;
		}
	json_decref(b);
	if (!found) {
		*status = 404;
		*doc = claims_fake_error("not_found", "no claim of that allocation");
		return 0;
	}
	f->releases_ok++;
	v->modify_index++;
	*status = 200;
	*doc = claims_fake_volume_json(f, v);
	return 0;
}

/* GET /v1/volume/<vol>[?index=...]: a blocking query with a current index waits 5 s. */
static int claims_fake_get(struct claims_fake *f, struct claims_fake_volume *v, const char *query,
			   long *status, json_t **doc)
{
	if (query && strncmp(query, "?index=", 7) == 0 &&
	    strtoll(query + 7, NULL, 10) >= v->modify_index) {
		f->blocking_queries++;
		if (f->clock)
			clock_fake_advance(f->clock, 5000);
		if (v->auto_publish && strcmp(v->pub_state, "pending") == 0 &&
		    v->publish_after-- <= 0) {
			snprintf(v->pub_state, sizeof(v->pub_state), "published");
			v->modify_index++;
		}
	}
	*status = 200;
	*doc = claims_fake_volume_json(f, v);
	return 0;
}

/* The answer of one request as a JSON document (claims_fake_request). */
static int claims_fake_answer(struct claims_fake *f, const char *method, const char *path,
			      const char *body, long *status, json_t **doc)
{
	const char *vp = "/v1/volume/", *pp = "/v1/plugin/", *rest;
	struct claims_fake_volume *v = NULL;
	int rc = 0;

	if (strncmp(path, pp, strlen(pp)) == 0) {
		bool req = false;

		for (int i = 0; i < f->nvols; i++)
			req = req || (strcmp(f->vols[i].plugin, path + strlen(pp)) == 0 &&
				      f->vols[i].controller_required);
		*status = 200;
		*doc = json_pack("{s:b}", "controller_required", req);
		goto out;
	}
	if (strncmp(path, vp, strlen(vp)) == 0) {
		const char *id = path + strlen(vp);

		rest = id + strcspn(id, "/?");
		v = claims_fake_find(f, id, (size_t)(rest - id));
	}
	if (!v) {
		*status = 404;
		*doc = claims_fake_error("not_found", "no such volume");
	} else if (strcmp(method, "GET") == 0 && (!*rest || *rest == '?')) {
		f->volume_reads++;
		rc = claims_fake_get(f, v, rest, status, doc);
	} else if (strcmp(method, "PUT") == 0 && strncmp(rest, "/claim", 6) == 0 &&
		   (!rest[6] || rest[6] == '?')) {
		rc = claims_fake_claim(f, v, rest + 6, body, status, doc);
	} else if (strcmp(method, "PUT") == 0 && strcmp(rest, "/release") == 0) {
		rc = claims_fake_release(f, v, body, status, doc);
	} else if (strcmp(method, "PUT") == 0 && strcmp(rest, "/node-expanded") == 0) {
		json_t *b = json_loads(body ? body : "", 0, NULL);

		f->node_expanded++;
		f->last_expanded = json_integer_value(json_object_get(b, "capacity"));
		json_decref(b);
		*status = 200;
		*doc = json_object();
	} else if (strcmp(method, "GET") == 0 && strncmp(rest, "/node-stage?", 12) == 0) {
		f->stage_reads++;
		*status = 200;
		*doc = claims_fake_stage();
	} else {
		*status = 404;
		*doc = claims_fake_error("not_found", "no such endpoint");
	}
out:
	return rc;
}

/* The seam's request: the answer's document as text, as a server sends it. */
static int claims_fake_request(struct claims_client *cl, const char *method, const char *path,
			       const char *body, bool want_ok, long *status, char **text,
			       size_t *len, struct err *e)
{
	struct claims_fake *f = (struct claims_fake *)cl;
	json_t *doc = NULL;
	int rc;

	*text = NULL;
	*len = 0;
	*status = 0;
	if (f->on_request)
		f->on_request(f->on_request_ctx, method, path);
	pthread_mutex_lock(&f->mu);
	f->requests++;
	if (f->down) {
		f->refused_down++;
		pthread_mutex_unlock(&f->mu);
		return err_set(e, CSID_EUNAVAIL, "server http://fake: connection refused");
	}
	f->unwanted += !want_ok;
	rc = claims_fake_answer(f, method, path, body, status, &doc);
	pthread_mutex_unlock(&f->mu);
	if (rc == 0 && doc && (want_ok || *status < 200 || *status > 299)) {
		*text = json_dumps(doc, JSON_COMPACT);
		*len = *text ? strlen(*text) : 0;
	}
	json_decref(doc);
	return rc;
}

static void claims_fake_cancel(struct claims_client *cl)
{
	struct claims_fake *f = (struct claims_fake *)cl;

	pthread_mutex_lock(&f->mu);
	f->cancels++;
	pthread_mutex_unlock(&f->mu);
}

void claims_fake_init(struct claims_fake *f, const char *node, struct clock_fake *clock)
{
	memset(f, 0, sizeof(*f));
	f->base.request = claims_fake_request;
	f->base.cancel = claims_fake_cancel;
	pthread_mutex_init(&f->mu, NULL);
	f->clock = clock;
	snprintf(f->node, sizeof(f->node), "%s", node);
}

void claims_fake_destroy(struct claims_fake *f)
{
	pthread_mutex_destroy(&f->mu);
}

struct claims_fake_volume *claims_fake_add(struct claims_fake *f, const char *id,
					   const char *plugin, const char *access_mode)
{
	struct claims_fake_volume *v = &f->vols[f->nvols++];

	memset(v, 0, sizeof(*v));
	snprintf(v->id, sizeof(v->id), "%s", id);
	snprintf(v->plugin, sizeof(v->plugin), "%s", plugin);
	snprintf(v->access_mode, sizeof(v->access_mode), "%s", access_mode);
	v->modify_index = 10;
	return v;
}

bool claims_fake_claimed(struct claims_fake *f, const char *vol, const char *alloc)
{
	struct claims_fake_volume *v;
	bool found = false;

	pthread_mutex_lock(&f->mu);
	v = claims_fake_find(f, vol, strlen(vol));
	for (int i = 0; v && i < CLAIMS_FAKE_CLAIMS; i++)
		found = found || strcmp(v->claims[i], alloc) == 0;
	pthread_mutex_unlock(&f->mu);
	return found;
}

void claims_fake_set_down(struct claims_fake *f, bool down)
{
	pthread_mutex_lock(&f->mu);
	f->down = down;
	pthread_mutex_unlock(&f->mu);
}

int claims_fake_releases(struct claims_fake *f)
{
	int n;

	pthread_mutex_lock(&f->mu);
	n = f->releases;
	pthread_mutex_unlock(&f->mu);
	return n;
}
