/*
 * Server link core (see server_link.h): the schedule of fingerprint sends,
 * failover and backoff, stepped with explicit times; the body of a send,
 * built from the plugin manager's snapshot through the model's node
 * encoder; the released allocations and the volumes to expand of an
 * answer; and the agent's
 * instance ID kept in its data_dir. No network here: server_link_http.c
 * is the shell.
 *
 * A fingerprint change bumps a generation counter; a successful send
 * acknowledges the generation it carried, so a change that lands while a
 * send is in flight is sent right after it.
 */
#include "agent/server_link.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <jansson.h>

#include "agent/mount_paths.h"
#include "plugins/supervisor.h"
#include "model/model.h"
#include "util/arena.h"
#include "util/file_replace.h"

const char *server_link_outcome_name(enum server_link_outcome o)
{
	switch (o) {
	case SERVER_LINK_OK:
		return "ok";
	case SERVER_LINK_UNREACHABLE:
		return "unreachable";
	case SERVER_LINK_UNAUTHORIZED:
		return "unauthorized";
	case SERVER_LINK_DUPLICATE:
		return "duplicate node";
	case SERVER_LINK_REFUSED:
		return "refused";
	}
	return "unknown";
}

enum server_link_outcome server_link_classify(long status, const char *code)
{
	if (status >= 200 && status < 300)
		return SERVER_LINK_OK;
	if (status == 401 || status == 403)
		return SERVER_LINK_UNAUTHORIZED;
	/* 409 "aborted" is writers racing on the record: worth an early retry elsewhere. */
	if (status == 409 && code && strcmp(code, "conflict") == 0)
		return SERVER_LINK_DUPLICATE;
	if (status < 400 || status >= 500 || status == 409 || status == 408 || status == 429)
		return SERVER_LINK_UNREACHABLE;
	return SERVER_LINK_REFUSED;
}

/* ---- the core ---- */

static uint64_t server_link_random(struct server_link_core *c)
{
	if (c->t.random)
		return c->t.random(c->t.random_ctx);
	/* xorshift64: jitter needs spread, not secrecy. */
	c->rng ^= c->rng << 13;
	c->rng ^= c->rng >> 7;
	c->rng ^= c->rng << 17;
	return c->rng;
}

/* A delay in [3/4 d, d]. */
static int64_t server_link_jitter(struct server_link_core *c, int64_t d)
{
	return supervisor_backoff_ms(0, d, d, server_link_random(c));
}

void server_link_core_init(struct server_link_core *c, size_t nservers,
			   const struct server_link_timing *t, int64_t now_ms)
{
	memset(c, 0, sizeof(*c));
	c->nservers = nservers ? nservers : 1;
	if (t)
		c->t = *t;
	if (c->t.heartbeat_ms <= 0)
		c->t.heartbeat_ms = SERVER_LINK_HEARTBEAT_MS;
	if (c->t.retry_min_ms <= 0)
		c->t.retry_min_ms = SERVER_LINK_RETRY_MIN_MS;
	if (c->t.retry_max_ms <= 0)
		c->t.retry_max_ms = SERVER_LINK_RETRY_MAX_MS;
	if (c->t.retry_max_ms < c->t.retry_min_ms)
		c->t.retry_max_ms = c->t.retry_min_ms;
	if (c->t.slow_ms <= 0)
		c->t.slow_ms = SERVER_LINK_SLOW_MS;
	c->rng = ((uint64_t)now_ms << 17) ^ (uint64_t)(uintptr_t)c ^ 0x9e3779b97f4a7c15ull;
	if (!c->rng)
		c->rng = 1;
	c->due_ms = now_ms;
	c->gen = 1;
}

void server_link_core_changed(struct server_link_core *c, int64_t now_ms)
{
	c->gen++;
	/* While failing, a change waits for the backoff: no hammering a server that is down. */
	if (c->joined && !c->sending && c->due_ms > now_ms)
		c->due_ms = now_ms;
}

int64_t server_link_core_next(const struct server_link_core *c)
{
	return c->sending ? CLOCK_NEVER : c->due_ms;
}

bool server_link_core_begin(struct server_link_core *c, int64_t now_ms, size_t *server)
{
	if (c->sending || now_ms < c->due_ms)
		return false;
	c->sending = true;
	c->sent_gen = c->gen;
	*server = c->cur;
	return true;
}

void server_link_core_end(struct server_link_core *c, int64_t now_ms, enum server_link_outcome o)
{
	int64_t d = 0;

	c->sending = false;
	c->joined = o == SERVER_LINK_OK;
	c->round_done = false;
	switch (o) {
	case SERVER_LINK_OK:
		c->acked_gen = c->sent_gen;
		c->failed = 0;
		c->rounds = 0;
		d = c->acked_gen == c->gen ? c->t.heartbeat_ms : 0;
		break;
	case SERVER_LINK_UNREACHABLE:
		c->cur = (c->cur + 1) % c->nservers;
		if (++c->failed < c->nservers)
			break;
		c->failed = 0;
		c->round_done = true;
		d = supervisor_backoff_ms(c->rounds, c->t.retry_min_ms, c->t.retry_max_ms,
					  server_link_random(c));
		if (c->rounds < 62)
			c->rounds++;
		break;
	case SERVER_LINK_UNAUTHORIZED:
		c->cur = (c->cur + 1) % c->nservers;
		c->failed = 0;
		d = server_link_jitter(c, c->t.slow_ms);
		break;
	case SERVER_LINK_DUPLICATE:
		d = server_link_jitter(c, c->t.heartbeat_ms);
		break;
	case SERVER_LINK_REFUSED:
		d = server_link_jitter(c, c->t.slow_ms);
		break;
	}
	c->delay_ms = d;
	c->due_ms = now_ms + d;
}

/* ---- the body ---- */

/* The names of the bits set in bits (into a); 0 or CSID_ENOMEM. */
static int server_link_caps(uint64_t bits, const char *(*name)(int), struct arena *a, char ***out,
			    size_t *n)
{
	*n = 0;
	*out = arena_alloc(a, 64 * sizeof(**out));
	if (!*out)
		return CSID_ENOMEM;
	for (int bit = 0; bit < 64; bit++) {
		const char *s;

		if (!(bits & ((uint64_t)1 << bit)) || !(s = name(bit)) || strcmp(s, "UNKNOWN") == 0)
			continue;
		if (!((*out)[(*n)++] = arena_strdup(a, s)))
			return CSID_ENOMEM;
	}
	return 0;
}

/* One snapshot plugin as the model's node plugin (strings in a). */
static int server_link_plugin(const struct plugin_manager_plugin *sp, struct arena *a,
			      struct model_node_plugin *p)
{
	const struct instance_manager_status *st = &sp->status;
	const struct plugin_fingerprint *fp = &st->fingerprint;
	bool node = sp->type == REGISTRY_NODE;
	bool known = sp->managed && st->fingerprinted;
	struct err e;
	int rc = 0;

	memset(p, 0, sizeof(*p));
	p->plugin_id = arena_strdup(a, sp->name);
	p->type = node ? MODEL_PLUGIN_NODE : MODEL_PLUGIN_CONTROLLER;
	p->healthy = known && st->state == INSTANCE_MANAGER_RUNNING && st->health.healthy;
	if (!sp->managed)
		p->health = arena_strdup(a, "not started");
	else if (!p->healthy && !st->health.description[0])
		p->health = arena_strdup(a, instance_manager_state_name(st->state));
	else
		p->health = arena_strdup(a, st->health.description);
	if (!p->plugin_id || !p->health)
		return CSID_ENOMEM;
	if (!known)
		return 0;
	if (fp->vendor_version[0] && !(p->version = arena_strdup(a, fp->vendor_version)))
		return CSID_ENOMEM;
	if (node)
		rc = server_link_caps(fp->node_caps, plugin_node_cap_name, a, &p->caps, &p->ncaps);
	else
		rc = server_link_caps(fp->controller_caps, plugin_controller_cap_name, a, &p->caps,
				      &p->ncaps);
	if (rc || !node)
		return rc;
	if (fp->node_id[0] && !(p->plugin_node_id = arena_strdup(a, fp->node_id)))
		return CSID_ENOMEM;
	p->max_volumes = fp->max_volumes;
	err_clear(&e);
	for (int i = 0; i < fp->ntopology && !rc; i++)
		rc = model_map_put(a, &p->topology.segments, fp->topology[i].key,
				   fp->topology[i].value, &e);
	return rc;
}

int server_link_body(const struct plugin_manager_snapshot *snap, const char *node,
		     const char *instance_id, const char *address,
		     const struct server_link_allocs *allocs, char **out, size_t *len,
		     struct err *e)
{
	struct arena *a = arena_new();
	struct model_node n = {0};
	int rc = 0;

	*out = NULL;
	*len = 0;
	if (!a)
		return err_set(e, CSID_ENOMEM, "node fingerprint: out of memory");
	n.id = (char *)node;
	n.instance_id = (char *)instance_id;
	n.address = (char *)address;
	if (allocs) {
		n.allocs_reported = true;
		n.allocs = (struct model_node_alloc *)allocs->v;
		n.nallocs = allocs->n;
	}
	n.plugins = arena_alloc(a, (snap->nplugins + 1) * sizeof(*n.plugins));
	if (!n.plugins)
		rc = CSID_ENOMEM;
	for (size_t i = 0; !rc && i < snap->nplugins; i++)
		if (!(rc = server_link_plugin(&snap->plugins[i], a, &n.plugins[n.nplugins])))
			n.nplugins++;
	if (rc)
		rc = err_set(e, CSID_ENOMEM, "node fingerprint: out of memory");
	else
		rc = model_node_encode(&n, out, len, e);
	arena_free(a);
	return rc;
}

/* ---- the instance ID ---- */

/* Whether s is SERVER_LINK_INSTANCE_ID_LEN lower-case hex digits. */
/* The first len bytes of s, NUL-terminated, in a; NULL when out of memory. */
static char *server_link_cut(struct arena *a, const char *s, size_t len)
{
	char *c = arena_alloc(a, len + 1);

	if (c) {
		memcpy(c, s, len);
		c[len] = '\0';
	}
	return c;
}

/*
 * The entries of the array at key of a server's answer (text, len bytes),
 * at most max: take(it, slot, a) fills the size-byte slot from entry it
 * and returns 1, or skips it (0), or is out of memory (-1). *out (in a,
 * NULL when none) and *n the entries taken; *present whether the answer
 * has such an array. Returns 0 or CSID_ENOMEM (what names the list).
 */
static int server_link_list(const char *text, size_t len, const char *key, size_t max, size_t size,
			    int (*take)(json_t *it, void *slot, struct arena *a), struct arena *a,
			    void **out, size_t *n, bool *present, const char *what, struct err *e)
{
	json_t *doc = json_loadb(text, len, 0, NULL);
	json_t *arr = json_object_get(doc, key);
	size_t total = json_array_size(arr), k = 0;
	char *v = NULL;
	int rc = 0;

	*out = NULL;
	*n = 0;
	*present = json_is_array(arr);
	if (total > max)
		total = max;
	if (total && !(v = arena_alloc(a, total * size)))
		rc = -1;
	for (size_t i = 0; rc >= 0 && i < total; i++) {
		rc = take(json_array_get(arr, i), v + k * size, a);
		if (rc > 0)
			k++;
	}
	json_decref(doc);
	if (rc < 0)
		return err_set(e, CSID_ENOMEM, "%s: out of memory", what);
	*out = k ? v : NULL;
	*n = k;
	return 0;
}

static int server_link_take_released(json_t *it, void *slot, struct arena *a)
{
	struct server_link_released *r = slot;
	const char *vol = json_string_value(json_object_get(it, "volume_id"));
	const char *alloc = json_string_value(json_object_get(it, "alloc_id"));
	const char *note = json_string_value(json_object_get(it, "note"));
	size_t nlen = note ? strnlen(note, SERVER_LINK_NOTE_MAX) : 0;
	struct err ignored;

	if (!vol || !alloc || mount_name_check("volume id", vol, &ignored) ||
	    mount_name_check("alloc id", alloc, &ignored))
		return 0;
	r->volume_id = arena_strdup(a, vol);
	r->alloc_id = arena_strdup(a, alloc);
	r->note = server_link_cut(a, note ? note : "", nlen);
	return r->volume_id && r->alloc_id && r->note ? 1 : -1;
}

int server_link_released_parse(const char *text, size_t len, struct arena *a,
			       struct server_link_released **out, size_t *n, struct err *e)
{
	bool present;

	return server_link_list(text, len, "released", SERVER_LINK_RELEASED_MAX, sizeof(**out),
				server_link_take_released, a, (void **)out, n, &present,
				"released allocations", e);
}

static int server_link_take_expand(json_t *it, void *slot, struct arena *a)
{
	struct held_allocs_expand *x = slot;
	const char *vol = json_string_value(json_object_get(it, "volume_id"));
	const char *plugin = json_string_value(json_object_get(it, "plugin_id"));
	json_t *cap = json_object_get(it, "capacity");
	struct err ignored;

	if (!vol || !plugin || !plugin[0] || !json_is_integer(cap) ||
	    json_integer_value(cap) <= 0 || mount_name_check("volume id", vol, &ignored))
		return 0;
	x->volume_id = arena_strdup(a, vol);
	x->plugin_id = arena_strdup(a, plugin);
	x->capacity = (int64_t)json_integer_value(cap);
	return x->volume_id && x->plugin_id ? 1 : -1;
}

int server_link_expand_parse(const char *text, size_t len, struct arena *a,
			     struct held_allocs_expand **out, size_t *n, bool *present,
			     struct err *e)
{
	return server_link_list(text, len, "expand", SERVER_LINK_EXPAND_MAX, sizeof(**out),
				server_link_take_expand, a, (void **)out, n, present,
				"volumes to expand", e);
}

static bool server_link_id_ok(const char *s, size_t n)
{
	if (n != SERVER_LINK_INSTANCE_ID_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

int server_link_instance_id(const char *data_dir, char *out, struct err *e)
{
	char path[4096], buf[SERVER_LINK_INSTANCE_ID_LEN + 2];
	unsigned char raw[SERVER_LINK_INSTANCE_ID_LEN / 2];
	ssize_t n = 0;
	int fd;

	if ((size_t)snprintf(path, sizeof(path), "%s/agent-instance-id", data_dir) >= sizeof(path))
		return err_set(e, CSID_EINVAL, "data_dir: too long for agent-instance-id");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf));
		close(fd);
		while (n > 0 && buf[n - 1] == '\n')
			n--;
		if (n > 0 && server_link_id_ok(buf, (size_t)n)) {
			memcpy(out, buf, (size_t)n);
			out[n] = '\0';
			return 0;
		}
		/* A torn or edited file: this agent becomes a new instance. */
	} else if (errno != ENOENT) {
		return err_errno(e, errno, "open %s", path);
	}
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return err_errno(e, errno, "instance id: getrandom");
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(out + 2 * i, 3, "%02x", raw[i]);
	snprintf(buf, sizeof(buf), "%s\n", out);
	return file_replace(path, buf, 0600, e);
}
