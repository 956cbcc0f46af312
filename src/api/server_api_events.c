/*
 * GET /v1/event/stream[?index=N]: the store's change log as
 * newline-delimited JSON, from index N (default: now), one line per event:
 *   {"index": 42, "topic": "volume", "type": "upsert", "key": "data",
 *    "object": {...the API view...}}
 * Topics: volume, snapshot and node for every change of such an object
 * (type upsert or delete); claim for every claim of a volume whose state
 * changed (key "<volume>/<alloc>", type the new state: claimed,
 * node-unpublished, controller-unpublished, and freed when it reaches the
 * volume's claim history); plugin for every
 * plugin of a node whose health changed (key the plugin ID, type healthy
 * or unhealthy). Claim and plugin events are derived by comparing a
 * volume or node with its previous version seen by the same stream, so a
 * stream reports them for objects it saw before or that are new.
 * A client resumes with ?index=<last index seen>. An index older than the
 * log keeps answers 400 (out_of_range); a stream that falls that far
 * behind ends with an error line. "{}" lines are heartbeats (every 10 s).
 * Objects are decoded and re-encoded in the API view, so no secret or
 * mount flag is ever written.
 */
#include "api/server_api_int.h"

#include <stdlib.h>
#include <string.h>

#include "util/clock.h"

#define EV_BATCH 256
#define EV_HEARTBEAT_MS 10000
#define EV_SEEN_MAX 4096

/* What the stream saw last of an object: its claims' or plugins' states. */
struct ev_seen {
	char *key; /* "<kind>/<id>" */
	json_t *states; /* {"alloc": "state"} or {"plugin/type": "healthy"} */
};

struct ev_stream {
	struct server_api *api;
	uint64_t after;
	char *buf;
	size_t len, pos;
	bool ended;
	int64_t last_ms;
	struct ev_seen *seen;
	size_t nseen;
};

static void ev_seen_clear(struct ev_stream *s)
{
	size_t i;

	for (i = 0; i < s->nseen; i++) {
		free(s->seen[i].key);
		json_decref(s->seen[i].states);
	}
	s->nseen = 0;
}

static struct ev_seen *ev_seen_get(struct ev_stream *s, const char *key)
{
	size_t i;

	for (i = 0; i < s->nseen; i++)
		if (strcmp(s->seen[i].key, key) == 0)
			return &s->seen[i];
	return NULL;
}

/* Replaces the states remembered for key (takes states). */
static void ev_seen_put(struct ev_stream *s, const char *key, json_t *states)
{
	struct ev_seen *x = ev_seen_get(s, key);

	if (x) {
		json_decref(x->states);
		x->states = states;
		return;
	}
	if (s->nseen == EV_SEEN_MAX)
		ev_seen_clear(s);
	if (!s->seen) {
		s->seen = calloc(EV_SEEN_MAX, sizeof(*s->seen));
		if (!s->seen) {
			json_decref(states);
			return;
		}
	}
	s->seen[s->nseen].key = strdup(key);
	if (!s->seen[s->nseen].key) {
		json_decref(states);
		return;
	}
	s->seen[s->nseen++].states = states;
}

static void ev_line(json_t *list, uint64_t index, const char *topic, const char *type,
		    const char *key, json_t *obj)
{
	json_t *ev = json_pack("{s:I, s:s, s:s, s:s}", "index", (json_int_t)index, "topic", topic,
			       "type", type, "key", key);

	if (!ev) {
		json_decref(obj);
		return;
	}
	if (obj)
		json_object_set_new(ev, "object", obj);
	json_array_append_new(list, ev);
}

/*
 * Derived events: for each entry of now ({"k": "state"}) that differs from
 * before (NULL: the object is new to the stream, report all when fresh),
 * an event of topic with object from objs (keyed like now).
 */
static void ev_diff(json_t *list, uint64_t index, const char *topic, const char *prefix,
		    json_t *before, json_t *now, json_t *objs, bool fresh)
{
	const char *k;
	json_t *v;

	if (!before && !fresh)
		return;
	json_object_foreach(now, k, v)
	{
		json_t *old = before ? json_object_get(before, k) : NULL;
		char key[2 * MODEL_ID_MAX + 80];

		if (old && json_equal(old, v))
			continue;
		snprintf(key, sizeof(key), "%s%s", prefix, k);
		ev_line(list, index, topic, json_string_value(v), key,
			json_incref(json_object_get(objs, k)));
	}
}

/* Claim states of an API-view volume: {"alloc": "state"} and {"alloc": claim}. */
static void ev_claims(json_t *vol, json_t **states, json_t **objs)
{
	static const char *const lists[] = {"past_claims", "claims"};
	size_t l, i;
	json_t *c;

	*states = json_object();
	*objs = json_object();
	for (l = 0; l < 2; l++) {
		json_array_foreach(json_object_get(vol, lists[l]), i, c)
		{
			const char *alloc = json_string_value(json_object_get(c, "alloc_id"));
			json_t *st = json_object_get(c, "state");

			if (!alloc || !json_is_string(st))
				continue;
			json_object_set(*states, alloc, st);
			json_object_set(*objs, alloc, c);
		}
	}
}

/* Plugin health of an API-view node: {"plugin/type": "healthy|unhealthy"}. */
static void ev_plugins(json_t *node, json_t **states, json_t **objs)
{
	const char *nid = json_string_value(json_object_get(node, "id"));
	const char *status = json_string_value(json_object_get(node, "status"));
	size_t i;
	json_t *p;

	*states = json_object();
	*objs = json_object();
	json_array_foreach(json_object_get(node, "plugins"), i, p)
	{
		const char *id = json_string_value(json_object_get(p, "plugin_id"));
		const char *type = json_string_value(json_object_get(p, "type"));
		bool up = json_is_true(json_object_get(p, "healthy")) &&
			  !(status && strcmp(status, "down") == 0);
		char k[MODEL_PLUGIN_ID_MAX + 32];

		if (!id || !type)
			continue;
		snprintf(k, sizeof(k), "%s", id);
		json_object_set_new(*states, k, json_string(up ? "healthy" : "unhealthy"));
		json_object_set_new(*objs, k,
				    json_pack("{s:s?, s:s, s:O?}", "node_id", nid, "type", type,
					      "health", json_object_get(p, "health")));
	}
}

/* The API view of a stored object as JSON, or NULL. */
static json_t *ev_object(const struct store_change *ch)
{
	struct arena *a = arena_new();
	struct model_volume *v;
	struct model_snapshot *sn;
	struct model_node *n;
	char *t = NULL;
	size_t len = 0;
	json_t *out = NULL;
	int rc = CSID_EINVAL;

	if (!a)
		return NULL;
	if (ch->obj.kind == STORE_VOLUME &&
	    model_volume_decode(a, ch->obj.value, ch->obj.len, &v, NULL) == 0) {
		v->create_index = ch->obj.create_index;
		v->modify_index = ch->obj.modify_index;
		rc = model_volume_encode(v, MODEL_VIEW_API, &t, &len, NULL);
	} else if (ch->obj.kind == STORE_SNAPSHOT &&
		   model_snapshot_decode(a, ch->obj.value, ch->obj.len, &sn, NULL) == 0) {
		sn->create_index = ch->obj.create_index;
		sn->modify_index = ch->obj.modify_index;
		rc = model_snapshot_encode(sn, MODEL_VIEW_API, &t, &len, NULL);
	} else if (ch->obj.kind == STORE_NODE &&
		   model_node_decode(a, ch->obj.value, ch->obj.len, &n, NULL) == 0) {
		n->create_index = ch->obj.create_index;
		n->modify_index = ch->obj.modify_index;
		rc = model_node_encode_api(n, &t, &len, NULL);
	}
	if (!rc)
		out = server_api_json(t, len);
	free(t);
	/* A volume or snapshot record holds its secrets. */
	arena_wipe_free(a);
	return out;
}

/*
 * A volume's claim history changed (server/server_pastclaims.h): a freed
 * event (key "<volume>/<alloc>") for each claim in it the stream has not
 * seen there before, known by its claim and update times. A stream that
 * never saw the history reports the claims freed by this change: those
 * with its newest update time (one write frees its claims at one time).
 */
static void ev_history(struct ev_stream *s, const struct store_change *ch, json_t *list)
{
	char key[MODEL_ID_MAX + 32], ekey[2 * MODEL_ID_MAX + 8], stamp[48];
	json_t *doc, *past, *c, *states;
	struct ev_seen *seen;
	json_int_t newest = -1;
	size_t i;

	snprintf(key, sizeof(key), "claim-history/%.*s", MODEL_ID_MAX, ch->obj.id);
	seen = ev_seen_get(s, key);
	if (ch->type == STORE_OP_DELETE) {
		if (seen)
			ev_seen_put(s, key, json_object());
		return;
	}
	doc = server_api_json(ch->obj.value, ch->obj.len);
	past = json_object_get(doc, "past_claims");
	states = json_object();
	json_array_foreach(past, i, c)
	{
		json_int_t up = json_integer_value(json_object_get(c, "updated_ms"));

		newest = up > newest ? up : newest;
	}
	json_array_foreach(past, i, c)
	{
		const char *alloc = json_string_value(json_object_get(c, "alloc_id"));
		json_int_t up = json_integer_value(json_object_get(c, "updated_ms"));
		const char *was;

		if (!alloc || !states)
			continue;
		snprintf(stamp, sizeof(stamp), "%lld/%lld",
			 (long long)json_integer_value(json_object_get(c, "claimed_ms")),
			 (long long)up);
		was = seen ? json_string_value(json_object_get(seen->states, alloc)) : NULL;
		json_object_set_new(states, alloc, json_string(stamp));
		if (seen ? was && strcmp(was, stamp) == 0 : up != newest)
			continue;
		snprintf(ekey, sizeof(ekey), "%.*s/%s", MODEL_ID_MAX, ch->obj.id, alloc);
		ev_line(list, ch->index, "claim", "freed", ekey, json_incref(c));
	}
	if (states)
		ev_seen_put(s, key, states);
	json_decref(doc);
}

/* Appends the events of one change to list. */
static void ev_change(struct ev_stream *s, const struct store_change *ch, json_t *list)
{
	const char *topic = store_kind_name(ch->obj.kind);
	char key[MODEL_ID_MAX + 16];
	json_t *obj, *states = NULL, *objs = NULL;
	struct ev_seen *seen;
	bool fresh;

	/*
	 * The server's claim index mirrors volume writes: their claim events
	 * say it all. The installation record is no catalogue object.
	 */
	if (ch->obj.kind == STORE_CLAIM || ch->obj.kind == STORE_INSTALLATION)
		return;
	if (ch->obj.kind == STORE_CLAIM_HISTORY) {
		ev_history(s, ch, list);
		return;
	}
	snprintf(key, sizeof(key), "%s/%.*s", topic, MODEL_ID_MAX, ch->obj.id);
	if (ch->type == STORE_OP_DELETE) {
		ev_line(list, ch->index, topic, "delete", ch->obj.id, NULL);
		return;
	}
	obj = ev_object(ch);
	if (!obj)
		return;
	ev_line(list, ch->index, topic, "upsert", ch->obj.id, json_incref(obj));
	fresh = ch->obj.create_index == ch->index;
	seen = ev_seen_get(s, key);
	if (ch->obj.kind == STORE_VOLUME) {
		char prefix[MODEL_ID_MAX + 2];

		snprintf(prefix, sizeof(prefix), "%s/", ch->obj.id);
		ev_claims(obj, &states, &objs);
		ev_diff(list, ch->index, "claim", prefix, seen ? seen->states : NULL, states, objs,
			fresh);
	} else if (ch->obj.kind == STORE_NODE) {
		ev_plugins(obj, &states, &objs);
		ev_diff(list, ch->index, "plugin", "", seen ? seen->states : NULL, states, objs,
			fresh);
	}
	if (states)
		ev_seen_put(s, key, states);
	json_decref(objs);
	json_decref(obj);
}

static void ev_append(struct ev_stream *s, const char *text)
{
	size_t n = strlen(text);
	char *nb = realloc(s->buf, s->len + n + 2);

	if (!nb) {
		s->ended = true;
		return;
	}
	s->buf = nb;
	memcpy(s->buf + s->len, text, n);
	s->len += n;
	s->buf[s->len++] = '\n';
	s->buf[s->len] = '\0';
}

/* Fills the buffer with the next events; returns false when there were none. */
static bool ev_fill(struct ev_stream *s)
{
	struct store_changes chs;
	struct err e;
	json_t *list, *ev;
	size_t i;

	memset(&chs, 0, sizeof(chs));
	err_clear(&e);
	if (store_changes(s->api->store, s->after, EV_BATCH, &chs, &e) != 0) {
		json_t *doc = json_pack("{s:s, s:s}", "error", e.msg, "code",
					csid_err_code(e.code ? e.code : CSID_EIO));
		char *t = doc ? json_dumps(doc, JSON_COMPACT) : NULL;

		if (t)
			ev_append(s, t);
		free(t);
		json_decref(doc);
		s->ended = true;
		return true;
	}
	if (!chs.n)
		return false;
	list = json_array();
	for (i = 0; list && i < chs.n; i++)
		ev_change(s, &chs.changes[i], list);
	json_array_foreach(list, i, ev)
	{
		char *t = json_dumps(ev, JSON_COMPACT);

		if (t)
			ev_append(s, t);
		free(t);
	}
	s->after = chs.changes[chs.n - 1].index;
	json_decref(list);
	store_changes_free(&chs);
	return true;
}

static long ev_next(void *ctx, char *buf, size_t cap)
{
	struct ev_stream *s = ctx;
	size_t n;

	if (s->pos == s->len) {
		int64_t now;

		s->pos = s->len = 0;
		if (s->ended || atomic_load(&s->api->stopping))
			return -1;
		/* Nothing new: the HTTP layer calls again after the next change or tick. */
		if (!ev_fill(s)) {
			now = clock_now_ms(clock_real());
			if (now - s->last_ms < EV_HEARTBEAT_MS)
				return 0;
			ev_append(s, "{}");
		}
		s->last_ms = clock_now_ms(clock_real());
	}
	n = s->len - s->pos < cap ? s->len - s->pos : cap;
	memcpy(buf, s->buf + s->pos, n);
	s->pos += n;
	return (long)n;
}

static void ev_done(void *ctx)
{
	struct ev_stream *s = ctx;

	ev_seen_clear(s);
	free(s->seen);
	free(s->buf);
	free(s);
}

int server_api_events(struct server_api *api, const struct http_request *req,
		      struct http_reply *rep, struct err *e)
{
	struct store_changes probe;
	struct ev_stream *s;
	uint64_t index;
	int rc;

	if (strcmp(req->method, "GET") != 0) {
		rep->allow = "GET";
		return HTTP_METHOD_NOT_ALLOWED;
	}
	rc = http_query_u64(req, "index", store_index(api->store), &index, e);
	if (rc)
		return rc;
	/* Refuse at once a start the log no longer holds. */
	memset(&probe, 0, sizeof(probe));
	rc = store_changes(api->store, index, 1, &probe, e);
	if (rc)
		return rc;
	store_changes_free(&probe);
	s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(e, CSID_ENOMEM, "out of memory");
	s->api = api;
	s->after = index;
	s->last_ms = clock_now_ms(clock_real());
	rep->stream.next = ev_next;
	rep->stream.done = ev_done;
	rep->stream.ctx = s;
	server_api_set_index(rep, store_index(api->store));
	return 0;
}
