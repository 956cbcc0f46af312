/*
 * Server facade: life cycle, the store helpers that turn model objects
 * into store values and back, and the compare-and-set loops every write
 * goes through. The operations live in server_volumes.c,
 * server_snapshots.c, server_nodes.c and server_plugins.c.
 *
 * A compare-and-set write reads the object into a scratch arena, lets the
 * operation decide on what it read, and writes on the modify_index it
 * read; a conflict (another writer came first) throws the scratch away
 * and starts over. Retries are bounded (SERVER_CAS_RETRIES), so a hot
 * object gives CSID_EABORTED (retryable) rather than a spin. Every write
 * enqueues the object in the reconciler at once.
 */
#include "server/server_int.h"

#include "server/server_install.h"

#include <stdlib.h>
#include <string.h>

#include "util/log.h"

/* Set on a thread while it works for the leader (server_fenced). */
static _Thread_local bool server_fenced_thread;

struct store *server_wstore(struct server *s)
{
	return server_fenced_thread ? server_leader_store(s->leader) : s->cfg.store;
}

void server_fenced(bool on)
{
	server_fenced_thread = on;
}

static int server_wrap_store(struct err *e, enum store_kind kind, const char *id, int rc)
{
	if (rc == CSID_ENOTFOUND)
		return err_set(e, CSID_ENOTFOUND, "%s %s not found", store_kind_name(kind), id);
	return err_wrap(e, "%s %s", store_kind_name(kind), id);
}

/* Reads (kind, id) and hands its value to decode; the value is wiped after. */
static int server_get_obj(struct server *s, enum store_kind kind, const char *id,
			  struct store_obj *o, struct err *e)
{
	int rc;

	memset(o, 0, sizeof(*o));
	rc = store_get(s->cfg.store, kind, id, o, e);
	if (rc)
		return server_wrap_store(e, kind, id, rc);
	return 0;
}

static void server_obj_wipe(struct store_obj *o)
{
	if (o->value)
		explicit_bzero(o->value, o->len);
	store_obj_free(o);
}

int server_get_volume(struct server *s, const char *id, struct arena *a, struct model_volume **out,
		      struct err *e)
{
	struct store_obj o;
	int rc = server_get_obj(s, STORE_VOLUME, id, &o, e);

	if (rc)
		return rc;
	rc = server_vcache_decode(s->vcache, id, o.value, o.len, o.create_index, o.modify_index, a,
				  out, e);
	if (rc)
		err_wrap(e, "volume %s: stored record", id);
	server_obj_wipe(&o);
	return rc;
}

int server_get_snapshot(struct server *s, const char *id, struct arena *a,
			struct model_snapshot **out, struct err *e)
{
	struct store_obj o;
	int rc = server_get_obj(s, STORE_SNAPSHOT, id, &o, e);

	if (rc)
		return rc;
	rc = model_snapshot_decode(a, o.value, o.len, out, e);
	if (rc)
		err_wrap(e, "snapshot %s: stored record", id);
	else {
		(*out)->create_index = o.create_index;
		(*out)->modify_index = o.modify_index;
	}
	server_obj_wipe(&o);
	return rc;
}

int server_get_node(struct server *s, const char *id, struct arena *a, struct model_node **out,
		    struct err *e)
{
	struct store_obj o;
	int rc = server_get_obj(s, STORE_NODE, id, &o, e);

	if (rc)
		return rc;
	rc = model_node_decode(a, o.value, o.len, out, e);
	if (rc)
		err_wrap(e, "node %s: stored record", id);
	else {
		(*out)->create_index = o.create_index;
		(*out)->modify_index = o.modify_index;
	}
	store_obj_free(&o);
	return rc;
}

/* Writes text (wiped and freed here) as (kind, id) on the condition expect. */
static int server_put_text(struct server *s, enum store_kind kind, const char *id, char *text,
			   size_t len, uint64_t expect, uint64_t *index, struct err *e)
{
	struct store_op op = {.type = STORE_OP_PUT,
			      .kind = kind,
			      .id = id,
			      .value = text,
			      .len = len,
			      .expect_index = expect};
	int rc = store_txn(server_wstore(s), &op, 1, index, e);

	model_wipe_free(text, len);
	if (rc && rc != CSID_ECONFLICT)
		err_wrap(e, "%s %s: write", store_kind_name(kind), id);
	return rc;
}

int server_put_volume(struct server *s, const struct model_volume *v, uint64_t expect,
		      uint64_t *index, struct err *e)
{
	size_t len;
	char *text;
	int rc = model_volume_encode(v, MODEL_VIEW_STORE, &text, &len, e);

	if (rc)
		return err_wrap(e, "volume %s", v->id);
	return server_put_text(s, STORE_VOLUME, v->id, text, len, expect, index, e);
}

int server_put_snapshot(struct server *s, const struct model_snapshot *snap, uint64_t expect,
			uint64_t *index, struct err *e)
{
	size_t len;
	char *text;
	int rc = model_snapshot_encode(snap, MODEL_VIEW_STORE, &text, &len, e);

	if (rc)
		return err_wrap(e, "snapshot %s", snap->id);
	return server_put_text(s, STORE_SNAPSHOT, snap->id, text, len, expect, index, e);
}

int server_put_node(struct server *s, const struct model_node *n, uint64_t expect, uint64_t *index,
		    struct err *e)
{
	size_t len;
	char *text;
	int rc = model_node_encode(n, &text, &len, e);

	if (rc)
		return err_wrap(e, "node %s", n->id);
	return server_put_text(s, STORE_NODE, n->id, text, len, expect, index, e);
}

static int server_delete(struct server *s, enum store_kind kind, const char *id, uint64_t expect,
			 struct err *e)
{
	struct store_op op = {
	    .type = STORE_OP_DELETE, .kind = kind, .id = id, .expect_index = expect};
	int rc = store_txn(server_wstore(s), &op, 1, NULL, e);

	if (rc && rc != CSID_ECONFLICT)
		err_wrap(e, "%s %s: delete", store_kind_name(kind), id);
	return rc;
}

/*
 * Writes what the update decided (SERVER_PUT: v; SERVER_DELETE: its
 * removal) on v's index, with the claim index changes from the claimed
 * claims old[0..nold) to v's (none after a delete) in the same
 * transaction. Changes that do not fit one transaction are left to the
 * next lost-claim pass's rebuild (claimidx_dirty). *index: the new index.
 */
static int server_volume_write(struct server *s, struct model_volume *v, int what,
			       const struct server_claimidx_entry *old, size_t nold,
			       struct arena *scratch, uint64_t *index, struct err *e)
{
	struct store_op ops[STORE_TXN_OPS_MAX];
	struct server_claimidx_entry *nw = NULL;
	struct model_claim *freed = NULL;
	size_t n = 1, nnew = 0, len = 0, nfreed = 0;
	char *text = NULL;
	bool history = false;
	int rc = 0;

	ops[0] = (struct store_op){.type = STORE_OP_DELETE,
				   .kind = STORE_VOLUME,
				   .id = v->id,
				   .expect_index = v->modify_index};
	if (what == SERVER_DELETE)
		ops[n++] = server_pastclaims_delete(v->id);
	/* Freed claims go to the volume's history, in this transaction. */
	if (what == SERVER_PUT &&
	    (rc = server_pastclaims_take(s->cfg.store, s->vcache, v, scratch, &ops[n], &history,
					 NULL, &freed, &nfreed, e)))
		return err_wrap(e, "volume %s", v->id);
	n += history;
	if (what == SERVER_PUT) {
		rc = model_volume_encode(v, MODEL_VIEW_STORE, &text, &len, e);
		/* The writer's answer shows the claims it freed. */
		v->past_claims = freed;
		v->npast_claims = nfreed;
		if (rc)
			return err_wrap(e, "volume %s", v->id);
		ops[0].type = STORE_OP_PUT;
		ops[0].value = text;
		ops[0].len = len;
		rc = server_claimidx_of(v, scratch, &nw, &nnew);
	}
	if (!rc)
		rc = server_claimidx_diff(old, nold, nw, nnew, scratch, ops, STORE_TXN_OPS_MAX, &n);
	if (rc == CSID_ERANGE) {
		pthread_mutex_lock(&s->mu);
		s->claimidx_dirty = true;
		pthread_mutex_unlock(&s->mu);
		rc = 0;
	}
	if (rc)
		rc = err_set(e, CSID_ENOMEM, "volume %s: out of memory", v->id);
	else
		rc = store_txn(server_wstore(s), ops, n, index, e);
	model_wipe_free(text, len);
	if (rc && rc != CSID_ECONFLICT)
		err_wrap(e, "volume %s: write", v->id);
	return rc;
}

/*
 * restart: reconciler_restart's rule; run: the pass runs here
 * (server_volume_update_run), telling pub (NULL: nothing).
 */
static int server_volume_update_do(struct server *s, const char *id, server_volume_fn fn, void *arg,
				   bool restart, bool run, const struct reconciler_published *pub,
				   struct arena *a, struct model_volume **out, char **skipped,
				   struct err *e)
{
	struct server_plugin *plugins = NULL;
	size_t nplugins = 0;
	int rc = CSID_EABORTED;

	if (out)
		*out = NULL;
	if (skipped)
		*skipped = NULL;
	for (int attempt = 0; attempt < SERVER_CAS_RETRIES; attempt++) {
		struct arena *scratch = arena_new();
		struct server_claimidx_entry *old = NULL;
		struct model_volume *v = NULL;
		char *note = NULL;
		uint64_t index = 0;
		size_t nold = 0;
		bool ran = false;
		int what;

		if (!scratch)
			return err_set(e, CSID_ENOMEM, "volume %s: out of memory", id);
		rc = server_get_volume(s, id, scratch, &v, e);
		if (!rc && server_claimidx_of(v, scratch, &old, &nold))
			rc = err_set(e, CSID_ENOMEM, "volume %s: out of memory", id);
		what = rc ? rc : fn(s, v, arg, scratch, &note, e);
		if (what == SERVER_PUT || what == SERVER_DELETE)
			rc = server_volume_write(s, v, what, old, nold, scratch, &index, e);
		else
			rc = what;
		if (rc == CSID_ECONFLICT && what > SERVER_KEEP) {
			arena_free(scratch);
			continue;
		}
		if (!rc && what == SERVER_PUT) {
			struct model_claim *freed = v->past_claims;
			size_t nfreed = v->npast_claims;

			/*
			 * The reconciler reads this version next: it need not parse
			 * it. Kept before the reconciler is told, or the worker it
			 * wakes may read the store first and parse it after all.
			 */
			v->past_claims = NULL;
			v->npast_claims = 0;
			server_vcache_put(s->vcache, v, index, NULL);
			v->past_claims = freed;
			v->npast_claims = nfreed;
			v->modify_index = index;
		}
		if (!rc && what != SERVER_KEEP && run)
			ran =
			    reconciler_run_published(s->rec, STORE_VOLUME, id, index, restart, pub);
		else if (!rc && what != SERVER_KEEP)
			reconciler_written(s->rec, STORE_VOLUME, id, index, restart);
		if (!rc && skipped && note && !(*skipped = arena_strdup(a, note)))
			rc = err_set(e, CSID_ENOMEM, "volume %s: out of memory", id);
		if (!rc && out && what != SERVER_DELETE) {
			/* After a pass here: the version that pass wrote. */
			rc = ran ? server_get_volume(s, id, a, out, e)
				 : model_volume_copy(a, v, out, e);
			if (!rc &&
			    !(rc = server_plugins_summary(s, scratch, &plugins, &nplugins, e)))
				server_volume_fill(s, *out, plugins, nplugins, a);
		}
		arena_free(scratch);
		return rc;
	}
	return err_set(e, CSID_EABORTED, "volume %s: %d writers raced; try again", id,
		       SERVER_CAS_RETRIES);
}

int server_volume_update(struct server *s, const char *id, server_volume_fn fn, void *arg,
			 struct arena *a, struct model_volume **out, char **skipped, struct err *e)
{
	return server_volume_update_do(s, id, fn, arg, false, false, NULL, a, out, skipped, e);
}

int server_volume_update_run(struct server *s, const char *id, server_volume_fn fn, void *arg,
			     const struct reconciler_published *pub, struct arena *a,
			     struct model_volume **out, struct err *e)
{
	return server_volume_update_do(s, id, fn, arg, false, true, pub, a, out, NULL, e);
}

int server_volume_request(struct server *s, const char *id, server_volume_fn fn, void *arg,
			  struct arena *a, struct model_volume **out, char **skipped, struct err *e)
{
	return server_volume_update_do(s, id, fn, arg, true, false, NULL, a, out, skipped, e);
}

int server_snapshot_update(struct server *s, const char *id, server_snapshot_fn fn, void *arg,
			   struct arena *a, struct model_snapshot **out, struct err *e)
{
	for (int attempt = 0; attempt < SERVER_CAS_RETRIES; attempt++) {
		struct model_snapshot *snap = NULL;
		uint64_t index = 0;
		int rc, what;

		rc = server_get_snapshot(s, id, a, &snap, e);
		what = rc ? rc : fn(s, snap, arg, a, e);
		if (what == SERVER_PUT)
			rc = server_put_snapshot(s, snap, snap->modify_index, &index, e);
		else if (what == SERVER_DELETE)
			rc = server_delete(s, STORE_SNAPSHOT, id, snap->modify_index, e);
		else
			rc = what;
		if (rc == CSID_ECONFLICT && what > SERVER_KEEP)
			continue;
		if (!rc && what != SERVER_KEEP)
			reconciler_enqueue(s->rec, STORE_SNAPSHOT, id);
		if (!rc && what == SERVER_PUT)
			snap->modify_index = index;
		if (!rc && out) {
			server_status_get(s, STORE_SNAPSHOT, id, a, &snap->status);
			*out = what == SERVER_DELETE ? NULL : snap;
		}
		return rc;
	}
	return err_set(e, CSID_EABORTED, "snapshot %s: %d writers raced; try again", id,
		       SERVER_CAS_RETRIES);
}

size_t server_per_page(size_t per_page)
{
	if (per_page == 0)
		return SERVER_PER_PAGE_DEFAULT;
	return per_page > SERVER_PER_PAGE_MAX ? SERVER_PER_PAGE_MAX : per_page;
}

/* ---- life cycle ---- */

/* Every node of the store starts its TTL now: a restarted server gives each a full TTL. */
static int server_live_load(struct server *s, struct err *e)
{
	struct arena *a = arena_new();
	struct model_node **nodes = NULL;
	size_t n = 0;
	int rc;

	if (!a)
		return err_set(e, CSID_ENOMEM, "out of memory");
	rc = server_all_nodes(s, a, &nodes, &n, NULL, e);
	for (size_t i = 0; !rc && i < n; i++)
		server_live_seen(s, nodes[i]->id, nodes[i]->status == MODEL_NODE_DOWN);
	arena_free(a);
	return rc;
}

/*
 * This server starts or stops leading. A new leader gives every node a
 * full TTL from now (their heartbeats may have gone to other servers)
 * and checks the claim index once, like a restarted server; the
 * reconciler lists everything again.
 */
static void server_leader_changed(void *arg, bool leading)
{
	struct server *s = arg;
	struct err e;

	if (!s->rec)
		return; /* server_new on an unshared store: leading from the start */
	if (leading && server_live_load(s, &e))
		log_warn("msg=\"new leader: cannot read the nodes; the next tick retries\" "
			 "error=\"%s\"",
			 e.msg);
	pthread_mutex_lock(&s->mu);
	if (leading) {
		s->claimidx_dirty = true;
		s->gc_due_ms = 0;
	}
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->mu);
	reconciler_set_active(s->rec, leading);
}

int server_new(const struct server_config *cfg, struct server **out, struct err *e)
{
	struct server_leader_config lc = {0};
	struct reconciler_config rc_cfg = {0};
	struct server *s;
	int rc;

	*out = NULL;
	if (!cfg->store || !cfg->controllers.acquire || !cfg->controllers.release)
		return err_set(e, CSID_EINVAL,
			       "server: a store and a controller seam are required");
	s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(e, CSID_ENOMEM, "server: out of memory");
	s->cfg = *cfg;
	s->clock = cfg->clock ? cfg->clock : clock_real();
	s->node_ttl_ms = cfg->node_ttl_ms > 0 ? cfg->node_ttl_ms : SERVER_NODE_TTL_MS;
	s->node_grace_ms = cfg->node_grace_ms > 0 ? cfg->node_grace_ms : SERVER_NODE_GRACE_MS;
	/*
	 * The lost-claim pass runs a few times per TTL and per grace period
	 * (so a release is late by at most half of the shorter), never more
	 * often than SERVER_GC_PERIOD_MIN_MS nor less than every
	 * SERVER_GC_PERIOD_MAX_MS; a changed allocations report runs it at once.
	 */
	s->gc_period_ms =
	    (s->node_ttl_ms < s->node_grace_ms ? s->node_ttl_ms : s->node_grace_ms) / 2;
	if (s->gc_period_ms < SERVER_GC_PERIOD_MIN_MS)
		s->gc_period_ms = SERVER_GC_PERIOD_MIN_MS;
	if (s->gc_period_ms > SERVER_GC_PERIOD_MAX_MS)
		s->gc_period_ms = SERVER_GC_PERIOD_MAX_MS;
	s->vcache = server_vcache_new();
	s->pcache = server_pcache_new(cfg->store, server_plugins_build, NULL);
	if (!s->vcache || !s->pcache) {
		server_vcache_free(s->vcache);
		server_pcache_free(s->pcache);
		free(s);
		return err_set(e, CSID_ENOMEM, "server: out of memory");
	}
	server_history_init(&s->history);
	pthread_mutex_init(&s->mu, NULL);
	if ((rc = clock_cond_init(&s->cond))) {
		pthread_mutex_destroy(&s->mu);
		server_vcache_free(s->vcache);
		server_pcache_free(s->pcache);
		free(s);
		return err_set(e, rc, "server: out of memory");
	}
	lc.store = cfg->store;
	lc.id = cfg->server_id;
	lc.address = cfg->address;
	lc.ttl_ms = cfg->leader_ttl_ms;
	lc.compact_ms = cfg->compact_ms;
	lc.on_change = server_leader_changed;
	lc.arg = s;
	s->publish_period_ms = s->node_ttl_ms / 4;
	rc = server_leader_new(&lc, &s->leader, e);
	if (rc) {
		server_free(s);
		return err_wrap(e, "server");
	}
	/* The reconciler is one of the leader's workers: it writes fenced. */
	rc_cfg.store = server_leader_store(s->leader);
	rc_cfg.controllers = cfg->controllers;
	rc_cfg.clock = s->clock;
	rc_cfg.workers = cfg->workers;
	rc_cfg.backoff_min_ms = cfg->backoff_min_ms;
	rc_cfg.backoff_max_ms = cfg->backoff_max_ms;
	rc_cfg.rpc_timeout_ms = cfg->rpc_timeout_ms;
	rc_cfg.plugin_concurrency = cfg->plugin_concurrency;
	rc_cfg.vcache = s->vcache;
	rc = reconciler_new(&rc_cfg, &s->rec, e);
	if (!rc)
		reconciler_set_active(s->rec, server_leader_leading(s->leader));
	if (!rc)
		rc = server_live_load(s, e);
	/* A store written before the claim index, or by a crashed writer: checked once. */
	s->claimidx_dirty = true;
	if (rc) {
		server_free(s);
		return err_wrap(e, "server");
	}
	*out = s;
	return 0;
}

static void *server_ticker_main(void *arg)
{
	struct server *s = arg;

	pthread_mutex_lock(&s->mu);
	while (!s->stopping) {
		int64_t next, sample;
		int queued, failing;

		pthread_mutex_unlock(&s->mu);
		next = server_tick(s);
		reconciler_counts(s->rec, &queued, &failing);
		pthread_mutex_lock(&s->mu);
		sample =
		    server_history_record(&s->history, clock_now_ms(s->clock), queued, failing);
		if (sample < next)
			next = sample;
		if (!s->stopping)
			clock_wait(s->clock, &s->cond, &s->mu, next);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

int server_start(struct server *s, struct err *e)
{
	int rc;

	if (s->cfg.manual_reconciler)
		return 0;
	rc = reconciler_start(s->rec, e);
	if (rc)
		return err_wrap(e, "server");
	if (pthread_create(&s->ticker, NULL, server_ticker_main, s) != 0)
		return err_set(e, CSID_ENOMEM, "server: cannot start the node TTL thread");
	s->ticker_started = true;
	rc = server_metrics_start(s, s->vcache, &s->metrics, e);
	if (!rc)
		rc = server_leader_start(s->leader, e);
	return rc ? err_wrap(e, "server") : 0;
}

void server_free(struct server *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	s->stopping = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->mu);
	if (s->ticker_started)
		pthread_join(s->ticker, NULL);
	server_metrics_stop(s->metrics);
	/* Steps in flight write through the leader's view: they end before it goes. */
	reconciler_stop(s->rec);
	server_leader_free(s->leader);
	reconciler_free(s->rec);
	for (size_t i = 0; i < s->nlive; i++) {
		free(s->live[i].id);
		server_gc_live_free(&s->live[i]);
	}
	free(s->live);
	server_gc_lost_free(s->lost_found, s->nlost_found);
	server_gc_lost_free(s->lost_told, s->nlost_told);
	arena_free(s->shared_arena);
	server_vcache_free(s->vcache);
	server_pcache_free(s->pcache);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

size_t server_reconciler_history(struct server *s, struct server_history_sample *out,
				 int64_t *now_ms)
{
	size_t n;

	pthread_mutex_lock(&s->mu);
	*now_ms = clock_now_ms(s->clock);
	n = server_history_list(&s->history, *now_ms, out);
	pthread_mutex_unlock(&s->mu);
	return n;
}

struct reconciler *server_reconciler(struct server *s)
{
	return s->rec;
}

void server_leader_info(struct server *s, struct server_leader_status *out)
{
	server_leader_status(s->leader, out);
}

int server_members(struct server *s, struct arena *a, struct server_member **out, size_t *n,
		   struct err *e)
{
	return server_leader_members(s->leader, a, out, n, e);
}

int server_installation(struct server *s, struct server_install *out, struct err *e)
{
	struct store_obj rec = {0};
	int rc = store_get(s->cfg.store, STORE_INSTALLATION, SERVER_INSTALL_RECORD, &rec, e);

	if (!rc)
		rc = server_install_decode(rec.value, rec.len, out, e);
	store_obj_free(&rec);
	return rc ? err_wrap(e, "installation record") : 0;
}

void server_settings(struct server *s, struct server_install_settings *out)
{
	struct server_leader_status st;

	server_leader_info(s, &st);
	out->node_ttl_ms = s->node_ttl_ms;
	out->node_grace_ms = s->node_grace_ms;
	out->leader_ttl_ms = st.ttl_ms;
	out->backoff_min_ms =
	    s->cfg.backoff_min_ms ? s->cfg.backoff_min_ms : RECONCILER_BACKOFF_MIN_MS;
	out->backoff_max_ms =
	    s->cfg.backoff_max_ms ? s->cfg.backoff_max_ms : RECONCILER_BACKOFF_MAX_MS;
}

struct store *server_store(struct server *s)
{
	return s->cfg.store;
}

uint64_t server_status_stamp(struct server *s, enum store_kind kind, const char *id)
{
	struct arena *a = arena_new();
	struct model_status st;
	uint64_t h = 1469598103934665603ULL;

	if (!a)
		return 0;
	if (server_status_get(s, kind, id, a, &st) == 0) {
		h = (h ^ (uint64_t)st.attempts) * 1099511628211ULL;
		h = (h ^ (uint64_t)st.next_attempt_ms) * 1099511628211ULL;
		for (const char *p = st.last_error; p && *p; p++)
			h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	}
	arena_free(a);
	return h;
}

void server_health(struct server *s, struct server_health *out)
{
	memset(out, 0, sizeof(*out));
	out->index = store_index(s->cfg.store);
	reconciler_counts(s->rec, &out->queued, &out->failing);
	out->store_backend = s->cfg.store->backend;
	/*
	 * The leader's liveness map is the truth it writes; another server's
	 * holds only the heartbeats it took: it counts the records.
	 */
	if (!server_leader_leading(s->leader)) {
		struct err e;

		if (server_plugins_node_counts(s, &out->nodes_ready, &out->nodes_down, &e) == 0)
			return;
		log_warn("msg=\"health: cannot count the node records; the liveness map is "
			 "shown\" error=\"%s\"",
			 e.msg);
	}
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->nlive; i++) {
		if (s->live[i].down)
			out->nodes_down++;
		else
			out->nodes_ready++;
	}
	pthread_mutex_unlock(&s->mu);
}
