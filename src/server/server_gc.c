/*
 * The lost-claim collector (rules in server_gc.h). server_gc_report keeps
 * each node's allocations report in the liveness map (memory only: a
 * report is worth something only next to the reports around it, and a
 * restarted server waits for two new ones). server_gc_pass, run by
 * server_tick every gc period and at once after a report changed, takes
 * a snapshot of the nodes (their records for the down times, the map for
 * liveness and reports), and for each node whose claims could be lost now
 * (down past the grace, or live with two reports) reads that node's
 * entries of the active-claims index (server_claimidx.h) instead of every
 * volume; it releases each lost claim with a compare-and-set write that
 * decides again on the volume it reads, so a claim the agent made again
 * meanwhile (a fresh updated_ms) is kept, and drops an entry whose claim
 * it finds gone. The first pass after a start (and one after a write whose
 * index changes did not fit its transaction) rebuilds the index first. A
 * pass never blocks heartbeats: the map's lock is held only to copy the
 * reports.
 */
#include "server/server_gc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_int.h"
#include "util/array.h"
#include "util/conf.h"
#include "util/log.h"

/* ---- the rules ---- */

static int server_gc_cmp(const char *va, const char *aa, const char *vb, const char *ab)
{
	int c = strcmp(va, vb);

	return c ? c : strcmp(aa, ab);
}

static int server_gc_alloc_cmp(const void *x, const void *y)
{
	const struct model_node_alloc *a = x, *b = y;

	return server_gc_cmp(a->volume_id, a->alloc_id, b->volume_id, b->alloc_id);
}

bool server_gc_has(const struct model_node_alloc *allocs, size_t n, const char *volume_id,
		   const char *alloc_id)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c =
		    server_gc_cmp(volume_id, alloc_id, allocs[mid].volume_id, allocs[mid].alloc_id);

		if (c == 0)
			return true;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return false;
}

bool server_gc_verdict(const char *volume_id, const struct model_claim *c,
		       const struct server_gc_node *node, int64_t now_ms, int64_t grace_ms,
		       char *note, size_t cap)
{
	if (!node || c->state != MODEL_CLAIM_CLAIMED)
		return false;
	if (node->down && now_ms - node->down_since_ms > grace_ms) {
		char d[32];

		conf_format_duration(grace_ms, d, sizeof(d));
		snprintf(note, cap, "released: node %s down for more than %s", node->id, d);
		return true;
	}
	if (!c->held_by_agent || !node->live || !node->reported || node->prev_report_ms <= 0 ||
	    c->updated_ms >= node->prev_report_ms ||
	    server_gc_has(node->allocs, node->nallocs, volume_id, c->alloc_id))
		return false;
	snprintf(note, cap, "released: allocation %s no longer held by the agent of node %s",
		 c->alloc_id, node->id);
	return true;
}

/* ---- returning nodes ---- */

bool server_gc_orphan(const struct model_volume *v, const char *volume_id, const char *node_id,
		      const char *alloc_id, char *note, size_t cap)
{
	if (!v) {
		snprintf(note, cap, "volume %s is gone", volume_id);
		return true;
	}
	for (size_t i = 0; i < v->nclaims; i++) {
		const struct model_claim *c = &v->claims[i];

		if (strcmp(c->alloc_id, alloc_id) != 0 || strcmp(c->node_id, node_id) != 0)
			continue;
		if (c->state == MODEL_CLAIM_CLAIMED || !c->held_by_agent)
			return false;
		if (c->note && c->note[0])
			snprintf(note, cap, "%s", c->note);
		else
			snprintf(note, cap, "claim %s", model_claim_state_name(c->state));
		return true;
	}
	/* Freed: the newest past claim of the allocation on the node says why. */
	for (size_t i = v->npast_claims; i-- > 0;) {
		const struct model_claim *c = &v->past_claims[i];

		if (strcmp(c->alloc_id, alloc_id) != 0 || strcmp(c->node_id, node_id) != 0)
			continue;
		if (c->note && c->note[0])
			snprintf(note, cap, "%s (claim freed)", c->note);
		else
			snprintf(note, cap, "claim freed");
		return true;
	}
	snprintf(note, cap, "no claim of allocation %s on node %s", alloc_id, node_id);
	return true;
}

bool server_gc_expand_wanted(const struct model_volume *v, const char *node_id)
{
	if (!v || !v->node_expansion_required)
		return false;
	for (size_t i = 0; i < v->nclaims; i++) {
		const struct model_claim *c = &v->claims[i];

		if (c->state == MODEL_CLAIM_CLAIMED && !c->node_expanded &&
		    strcmp(c->node_id, node_id) == 0)
			return true;
	}
	return false;
}

int server_gc_answer(struct server *s, const char *node_id, const struct model_node_alloc *allocs,
		     size_t n, struct arena *a, struct server_gc_answer *out, struct err *e)
{
	struct server_gc_released *r = n ? arena_alloc(a, n * sizeof(*r)) : NULL;
	struct server_gc_expand *x = n ? arena_alloc(a, n * sizeof(*x)) : NULL;
	size_t k = 0, nx = 0;

	memset(out, 0, sizeof(*out));
	if (n && (!r || !x))
		return err_set(e, CSID_ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		struct model_volume *v = NULL;
		char note[ERR_MSG_MAX];
		struct err ve;
		int rc = server_volume_get_history(s, allocs[i].volume_id, a, &v, &ve);

		if (rc == CSID_ENOMEM)
			return err_set(e, rc, "out of memory");
		/* Unreadable now: kept, asked again with the next heartbeat. */
		if (rc && rc != CSID_ENOTFOUND)
			continue;
		/* Sorted by volume: a volume's first allocation names its expansion. */
		if (!rc && (nx == 0 || strcmp(x[nx - 1].volume_id, v->id) != 0) &&
		    server_gc_expand_wanted(v, node_id)) {
			x[nx].volume_id = v->id;
			x[nx].plugin_id = v->plugin_id;
			x[nx].capacity = v->capacity;
			nx++;
		}
		if (!server_gc_orphan(rc ? NULL : v, allocs[i].volume_id, node_id,
				      allocs[i].alloc_id, note, sizeof(note)))
			continue;
		r[k].volume_id = arena_strdup(a, allocs[i].volume_id);
		r[k].alloc_id = arena_strdup(a, allocs[i].alloc_id);
		r[k].note = arena_strdup(a, note);
		if (!r[k].volume_id || !r[k].alloc_id || !r[k].note)
			return err_set(e, CSID_ENOMEM, "out of memory");
		k++;
	}
	out->released = k ? r : NULL;
	out->nreleased = k;
	out->expand = nx ? x : NULL;
	out->nexpand = nx;
	return 0;
}

/* ---- reports ---- */

void server_gc_live_free(struct server_live *l)
{
	for (size_t i = 0; i < l->nallocs; i++) {
		free(l->allocs[i].volume_id);
		free(l->allocs[i].alloc_id);
	}
	free(l->allocs);
	free(l->report_instance);
	l->allocs = NULL;
	l->nallocs = 0;
	l->report_instance = NULL;
}

void server_gc_forget(struct server_live *l)
{
	server_gc_live_free(l);
	l->reported = false;
	l->report_ms = l->prev_report_ms = 0;
}

/* A sorted malloc'd copy of node's report in *out; false when out of memory. */
static bool server_gc_copy(const struct model_node *node, struct model_node_alloc **out)
{
	struct model_node_alloc *c = calloc(node->nallocs ? node->nallocs : 1, sizeof(*c));
	bool ok = c != NULL;

	for (size_t i = 0; ok && i < node->nallocs; i++) {
		c[i].volume_id = strdup(node->allocs[i].volume_id);
		c[i].alloc_id = strdup(node->allocs[i].alloc_id);
		ok = c[i].volume_id && c[i].alloc_id;
	}
	if (!ok) {
		for (size_t i = 0; c && i < node->nallocs; i++) {
			free(c[i].volume_id);
			free(c[i].alloc_id);
		}
		free(c);
		return false;
	}
	qsort(c, node->nallocs, sizeof(*c), server_gc_alloc_cmp);
	*out = c;
	return true;
}

static bool server_gc_same(const struct server_live *l, const struct model_node_alloc *c, size_t n)
{
	if (!l->reported || l->nallocs != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (server_gc_alloc_cmp(&l->allocs[i], &c[i]) != 0)
			return false;
	return true;
}

void server_gc_report(struct server *s, const struct model_node *node, int64_t now_ms)
{
	struct model_node_alloc *copy = NULL;
	struct server_live *l;
	bool ok = node->allocs_reported && server_gc_copy(node, &copy);

	pthread_mutex_lock(&s->mu);
	l = server_live_find(s, node->id);
	if (!l) {
		/* Out of memory when the node was added: nothing to keep it in. */
		ok = false;
	} else if (!ok) {
		/*
		 * No report (or no memory to keep it): the node's claims are not
		 * collected by rule "report" until two reports came again.
		 */
		server_gc_forget(l);
	} else {
		bool same_agent = l->reported && l->report_instance && node->instance_id &&
				  strcmp(l->report_instance, node->instance_id) == 0;
		bool changed = !server_gc_same(l, copy, node->nallocs);
		int64_t prev = same_agent ? l->report_ms : 0;

		server_gc_live_free(l);
		l->allocs = copy;
		l->nallocs = node->nallocs;
		l->report_instance = node->instance_id ? strdup(node->instance_id) : NULL;
		/* Another agent instance (or none named): its reports start over. */
		l->prev_report_ms = l->report_instance ? prev : 0;
		l->report_ms = now_ms;
		l->reported = true;
		copy = NULL;
		if (changed) {
			s->gc_due_ms = clock_now_ms(s->clock);
			pthread_cond_broadcast(&s->cond);
		}
	}
	pthread_mutex_unlock(&s->mu);
	if (copy) {
		for (size_t i = 0; i < node->nallocs; i++) {
			free(copy[i].volume_id);
			free(copy[i].alloc_id);
		}
		free(copy);
	}
}

/* ---- the pass ---- */

struct server_gc_view {
	struct server_gc_node *nodes; /* sorted by id */
	size_t n;
	int64_t now_ms, grace_ms;
};

static int server_gc_node_cmp(const void *x, const void *y)
{
	const struct server_gc_node *a = x, *b = y;

	return strcmp(a->id, b->id);
}

static const struct server_gc_node *server_gc_node_find(const struct server_gc_view *w,
							const char *id)
{
	struct server_gc_node key = {.id = id};

	return w->n ? bsearch(&key, w->nodes, w->n, sizeof(key), server_gc_node_cmp) : NULL;
}

/* The nodes as the server knows them now (everything in a). */
static int server_gc_snapshot(struct server *s, struct arena *a, struct server_gc_view *w,
			      struct err *e)
{
	struct model_node **recs = NULL;
	size_t n = 0;
	int rc = server_all_nodes(s, a, &recs, &n, NULL, e);

	if (rc)
		return rc;
	w->nodes = arena_alloc(a, (n ? n : 1) * sizeof(*w->nodes));
	if (!w->nodes)
		return err_set(e, CSID_ENOMEM, "out of memory");
	w->n = 0;
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; !rc && i < n; i++) {
		struct server_gc_node *g = &w->nodes[w->n];
		const struct server_live *l = server_live_find(s, recs[i]->id);

		memset(g, 0, sizeof(*g));
		g->id = recs[i]->id;
		/* A heartbeat after the record went down wins: the node is back. */
		g->down = recs[i]->status == MODEL_NODE_DOWN && (!l || l->down);
		g->down_since_ms = recs[i]->updated_ms;
		g->live = l && !l->down && recs[i]->status == MODEL_NODE_READY;
		if (g->live && l->reported) {
			struct model_node_alloc *copy =
			    arena_alloc(a, (l->nallocs ? l->nallocs : 1) * sizeof(*copy));

			if (!copy) {
				rc = err_set(e, CSID_ENOMEM, "out of memory");
				break;
			}
			for (size_t j = 0; j < l->nallocs; j++) {
				copy[j].volume_id = arena_strdup(a, l->allocs[j].volume_id);
				copy[j].alloc_id = arena_strdup(a, l->allocs[j].alloc_id);
				if (!copy[j].volume_id || !copy[j].alloc_id)
					rc = err_set(e, CSID_ENOMEM, "out of memory");
			}
			g->allocs = copy;
			g->nallocs = l->nallocs;
			g->reported = true;
			g->prev_report_ms = l->prev_report_ms;
		}
		w->n++;
	}
	pthread_mutex_unlock(&s->mu);
	qsort(w->nodes, w->n, sizeof(*w->nodes), server_gc_node_cmp);
	return rc;
}

/* Whether node id is live in the map now (it came back since the snapshot). */
static bool server_gc_live_now(struct server *s, const char *id)
{
	const struct server_live *l;
	bool live;

	pthread_mutex_lock(&s->mu);
	l = server_live_find(s, id);
	live = l && !l->down;
	pthread_mutex_unlock(&s->mu);
	return live;
}

/* The compare-and-set step's argument: the view, and the index entry that led to it. */
struct server_gc_arg {
	const struct server_gc_view *w;
	const struct server_claimidx_entry *x;
	bool only; /* judge x's claim alone (another member's finding) */
	bool found; /* the volume as read has x's claim, claimed */
};

/* The compare-and-set step: decides again on the volume as read, releases what is lost. */
static int server_gc_fn(struct server *s, struct model_volume *v, void *arg, struct arena *scratch,
			char **skipped, struct err *e)
{
	struct server_gc_arg *ga = arg;
	const struct server_gc_view *w = ga->w;
	int64_t now = clock_wall_ms(s->clock);
	bool changed = false;

	(void)skipped;
	ga->found = false;
	for (size_t i = 0; i < v->nclaims; i++) {
		struct model_claim *c = &v->claims[i];
		const struct server_gc_node *g = server_gc_node_find(w, c->node_id);
		char note[ERR_MSG_MAX], q[ERR_MSG_MAX + 64];
		int rc;

		bool mine = strcmp(c->node_id, ga->x->node_id) == 0 &&
			    strcmp(c->alloc_id, ga->x->alloc_id) == 0;

		if (c->state == MODEL_CLAIM_CLAIMED && mine)
			ga->found = true;
		if (ga->only && !mine)
			continue;
		if (!server_gc_verdict(v->id, c, g, w->now_ms, w->grace_ms, note, sizeof(note)))
			continue;
		/* A down node that sent a heartbeat since the snapshot keeps its claims. */
		if (g->down && server_gc_live_now(s, g->id))
			continue;
		rc = model_claim_transition(scratch, v->id, c, MODEL_CLAIM_NODE_UNPUBLISHED, note,
					    now, e);
		if (rc)
			return rc;
		log_warn("msg=\"lost claim released\" volume=%s alloc=%s node=%s note=%s", v->id,
			 c->alloc_id, c->node_id, log_q(q, sizeof(q), note));
		changed = true;
	}
	if (!changed)
		return SERVER_KEEP;
	v->updated_ms = now;
	return SERVER_PUT;
}

/*
 * Whether the pass judges node g's claims at all: down past the grace, or
 * live with two reports (the rules of server_gc_verdict); otherwise none
 * of its claims can be lost now, and its index entries are not read.
 */
static bool server_gc_judged(const struct server_gc_view *w, const struct server_gc_node *g)
{
	return (g->down && w->now_ms - g->down_since_ms > w->grace_ms) ||
	       (g->live && g->reported && g->prev_report_ms > 0);
}

/* Acts on one index entry o of node g: releases its claim when lost, drops it when stale. */
static int server_gc_entry(struct server *s, const struct server_gc_view *w,
			   const struct server_gc_node *g, const struct store_obj *o, void *arg,
			   struct err *e)
{
	struct model_claim c = {.state = MODEL_CLAIM_CLAIMED};
	struct server_claimidx_entry x;
	struct arena *a = arena_new();
	char note[ERR_MSG_MAX], q[600];
	int rc;

	(void)arg;
	if (!a)
		return err_set(e, CSID_ENOMEM, "out of memory");
	rc = server_claimidx_parse(o, a, &x, e);
	if (!rc) {
		c.alloc_id = (char *)x.alloc_id;
		c.node_id = (char *)x.node_id;
		c.updated_ms = x.updated_ms;
		c.held_by_agent = x.held_by_agent;
	}
	if (!rc &&
	    server_gc_verdict(x.volume_id, &c, g, w->now_ms, w->grace_ms, note, sizeof(note))) {
		struct server_gc_arg ga = {.w = w, .x = &x};
		struct err we;

		err_clear(&we);
		/* One volume failing (a race, a damaged record) does not stop the pass. */
		if (server_volume_update(s, x.volume_id, server_gc_fn, &ga, a, NULL, NULL, &we) &&
		    we.code != CSID_ENOTFOUND) {
			log_error("msg=\"cannot release lost claims\" volume=%s error=%s",
				  x.volume_id, log_q(q, sizeof(q), we.msg));
			ga.found = true;
		}
		if (!ga.found) {
			/* Stale: no such claimed claim; unless rewritten since it was read. */
			struct store_op del = {STORE_OP_DELETE, STORE_CLAIM, o->id, NULL, 0,
					       o->modify_index};

			if (store_txn(server_wstore(s), &del, 1, NULL, &we) == CSID_EIO)
				log_error("msg=\"cannot drop a stale claim index entry\" error=%s",
					  log_q(q, sizeof(q), we.msg));
		}
	} else if (rc == CSID_EPROTO) {
		log_error("msg=\"damaged claim index entry; rebuilt next pass\" error=%s",
			  log_q(q, sizeof(q), e->msg));
		pthread_mutex_lock(&s->mu);
		s->claimidx_dirty = true;
		pthread_mutex_unlock(&s->mu);
		rc = 0;
	}
	arena_free(a);
	return rc;
}

/* What a pass does with one index entry o of node g (arg: the pass's). */
typedef int (*server_gc_entry_fn)(struct server *s, const struct server_gc_view *w,
				  const struct server_gc_node *g, const struct store_obj *o,
				  void *arg, struct err *e);

/* The index entries of node g, a page at a time, each to fn. */
static int server_gc_node_claims(struct server *s, const struct server_gc_view *w,
				 const struct server_gc_node *g, server_gc_entry_fn fn, void *arg,
				 struct err *e)
{
	struct arena *a = arena_new();
	char *prefix = a ? server_claimidx_prefix(a, g->id) : NULL, *after = NULL;
	bool more = true;
	int rc = prefix ? 0 : err_set(e, CSID_ENOMEM, "out of memory");

	while (!rc && more) {
		struct store_list l = {0};

		rc = store_list(s->cfg.store, STORE_CLAIM, prefix, after, SERVER_PER_PAGE_MAX, &l,
				e);
		if (rc)
			err_wrap(e, "claim index of node %s", g->id);
		for (size_t i = 0; !rc && i < l.n; i++)
			rc = fn(s, w, g, &l.objs[i], arg, e);
		free(after);
		after = !rc && l.n ? strdup(l.objs[l.n - 1].id) : NULL;
		more = !rc && l.more;
		if (more && !after)
			rc = err_set(e, CSID_ENOMEM, "out of memory");
		store_list_free(&l);
	}
	free(after);
	arena_free(a);
	return rc;
}

/* ---- reports taken by the other servers ---- */

void server_gc_lost_free(struct server_member_lost *lost, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(lost[i].node_id);
		free(lost[i].volume_id);
		free(lost[i].alloc_id);
	}
	free(lost);
}

bool server_gc_lost_add(struct server_member_lost **lost, size_t *n, size_t *cap,
			const struct server_member_lost *f)
{
	struct server_member_lost *c;

	if (array_grow((void **)lost, cap, *n + 1, sizeof(**lost)))
		return false;
	c = &(*lost)[*n];
	c->node_id = strdup(f->node_id);
	c->volume_id = strdup(f->volume_id);
	c->alloc_id = strdup(f->alloc_id);
	c->prev_report_ms = f->prev_report_ms;
	if (!c->node_id || !c->volume_id || !c->alloc_id) {
		free(c->node_id);
		free(c->volume_id);
		free(c->alloc_id);
		return false;
	}
	(*n)++;
	return true;
}

/*
 * The leader checks what another member found, on its own view w: the
 * node must be live here too, no report the leader took itself may hold
 * the allocation, and the volume as read decides again (a claim the agent
 * made since the member's report before the last keeps a newer
 * updated_ms). Only that one claim is judged.
 */
static void server_gc_told(struct server *s, const struct server_gc_view *w,
			   const struct server_member_lost *f)
{
	const struct server_gc_node *g = server_gc_node_find(w, f->node_id);
	struct server_claimidx_entry x = {0};
	struct server_gc_node told;
	struct server_gc_view one;
	struct server_gc_arg ga = {0};
	struct arena *a;
	struct err e;
	char q[600];

	if (!g || !g->live ||
	    (g->reported && server_gc_has(g->allocs, g->nallocs, f->volume_id, f->alloc_id)))
		return;
	told = *g;
	told.reported = true;
	told.allocs = NULL;
	told.nallocs = 0;
	told.prev_report_ms = f->prev_report_ms;
	one = (struct server_gc_view){
	    .nodes = &told, .n = 1, .now_ms = w->now_ms, .grace_ms = w->grace_ms};
	x.volume_id = f->volume_id;
	x.node_id = f->node_id;
	x.alloc_id = f->alloc_id;
	ga.w = &one;
	ga.x = &x;
	ga.only = true;
	if (!(a = arena_new()))
		return;
	err_clear(&e);
	if (server_volume_update(s, f->volume_id, server_gc_fn, &ga, a, NULL, NULL, &e) &&
	    e.code != CSID_ENOTFOUND)
		log_error("msg=\"cannot release a lost claim another server found\" volume=%s "
			  "error=%s",
			  f->volume_id, log_q(q, sizeof(q), e.msg));
	arena_free(a);
}

/* The leader's part: every claim the other members' records name. */
static void server_gc_told_all(struct server *s, const struct server_gc_view *w)
{
	struct server_member_lost *told = NULL;
	size_t n = 0, cap = 0;
	bool ok = true;

	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; ok && i < s->nlost_told; i++)
		ok = server_gc_lost_add(&told, &n, &cap, &s->lost_told[i]);
	pthread_mutex_unlock(&s->mu);
	for (size_t i = 0; i < n; i++)
		server_gc_told(s, w, &told[i]);
	server_gc_lost_free(told, n);
}

/* One node whose reports this server took, as server_gc_follower_pass judges it. */
struct server_gc_heard {
	struct server_gc_node g;
	char *id;
};

/* The claims a follower's pass found lost (malloc'd). */
struct server_gc_found {
	struct server_member_lost *lost;
	size_t n, cap;
};

/* server_gc_entry_fn of a follower's pass: a lost claim is kept for the leader. */
static int server_gc_follower_entry(struct server *s, const struct server_gc_view *w,
				    const struct server_gc_node *g, const struct store_obj *o,
				    void *arg, struct err *e)
{
	struct model_claim c = {.state = MODEL_CLAIM_CLAIMED};
	struct server_gc_found *found = arg;
	struct arena *a = arena_new();
	struct server_claimidx_entry x;
	struct server_member_lost f;
	char note[ERR_MSG_MAX];
	int rc = 0;

	(void)s;
	if (!a)
		return err_set(e, CSID_ENOMEM, "out of memory");
	/* A damaged entry is the leader's to rebuild. */
	if (server_claimidx_parse(o, a, &x, e) == 0) {
		c.alloc_id = (char *)x.alloc_id;
		c.node_id = (char *)x.node_id;
		c.updated_ms = x.updated_ms;
		c.held_by_agent = x.held_by_agent;
		f = (struct server_member_lost){(char *)x.node_id, (char *)x.volume_id,
						(char *)x.alloc_id, g->prev_report_ms};
		if (server_gc_verdict(x.volume_id, &c, g, w->now_ms, w->grace_ms, note,
				      sizeof(note)) &&
		    !server_gc_lost_add(&found->lost, &found->n, &found->cap, &f))
			rc = err_set(e, CSID_ENOMEM, "out of memory");
	}
	arena_free(a);
	return rc;
}

void server_gc_follower_pass(struct server *s)
{
	struct server_gc_view w = {.now_ms = clock_wall_ms(s->clock), .grace_ms = s->node_grace_ms};
	int64_t now = clock_now_ms(s->clock);
	struct server_gc_found found = {0};
	struct server_gc_heard *h = NULL;
	size_t nh = 0;
	struct err e;
	int rc = 0;

	err_clear(&e);
	pthread_mutex_lock(&s->mu);
	h = s->nlive ? calloc(s->nlive, sizeof(*h)) : NULL;
	for (size_t i = 0; h && i < s->nlive; i++) {
		const struct server_live *l = &s->live[i];
		struct model_node_alloc *allocs;

		/* Live by this server's own count: a heartbeat it took within the TTL. */
		if (!l->heard_ms || now - l->heard_ms >= s->node_ttl_ms || !l->reported ||
		    l->prev_report_ms <= 0)
			continue;
		allocs = calloc(l->nallocs ? l->nallocs : 1, sizeof(*allocs));
		h[nh].id = strdup(l->id);
		if (!allocs || !h[nh].id) {
			free(allocs);
			free(h[nh].id);
			continue;
		}
		/* Borrowed from the map while copied: the strings are copied below. */
		for (size_t j = 0; j < l->nallocs; j++) {
			allocs[j].volume_id = strdup(l->allocs[j].volume_id);
			allocs[j].alloc_id = strdup(l->allocs[j].alloc_id);
		}
		h[nh].g = (struct server_gc_node){.id = h[nh].id,
						  .live = true,
						  .reported = true,
						  .allocs = allocs,
						  .nallocs = l->nallocs,
						  .prev_report_ms = l->prev_report_ms};
		nh++;
	}
	pthread_mutex_unlock(&s->mu);
	for (size_t i = 0; !rc && i < nh; i++) {
		bool whole = true;

		for (size_t j = 0; j < h[i].g.nallocs; j++)
			whole = whole && h[i].g.allocs[j].volume_id && h[i].g.allocs[j].alloc_id;
		/* A report not copied whole proves nothing this pass. */
		if (whole)
			rc = server_gc_node_claims(s, &w, &h[i].g, server_gc_follower_entry, &found,
						   &e);
	}
	for (size_t i = 0; i < nh; i++) {
		struct model_node_alloc *allocs = (struct model_node_alloc *)h[i].g.allocs;

		for (size_t j = 0; j < h[i].g.nallocs; j++) {
			free(allocs[j].volume_id);
			free(allocs[j].alloc_id);
		}
		free(allocs);
		free(h[i].id);
	}
	free(h);
	if (rc) {
		char q[600];

		log_error("msg=\"report pass failed; retried next pass\" error=%s",
			  log_q(q, sizeof(q), e.msg));
		server_gc_lost_free(found.lost, found.n);
		return;
	}
	for (size_t i = 0; i < found.n; i++)
		log_info("msg=\"lost claim found; the leader releases it\" volume=%s alloc=%s "
			 "node=%s",
			 found.lost[i].volume_id, found.lost[i].alloc_id, found.lost[i].node_id);
	pthread_mutex_lock(&s->mu);
	server_gc_lost_free(s->lost_found, s->nlost_found);
	s->lost_found = found.lost;
	s->nlost_found = found.n;
	pthread_mutex_unlock(&s->mu);
}

void server_gc_pass(struct server *s)
{
	struct server_gc_view w = {.now_ms = clock_wall_ms(s->clock), .grace_ms = s->node_grace_ms};
	struct arena *a = arena_new();
	bool dirty;
	struct err e;
	int rc;

	err_clear(&e);
	pthread_mutex_lock(&s->mu);
	dirty = s->claimidx_dirty;
	s->claimidx_dirty = false;
	pthread_mutex_unlock(&s->mu);
	rc = dirty ? server_claimidx_rebuild(server_wstore(s), &e) : 0;
	if (rc) {
		pthread_mutex_lock(&s->mu);
		s->claimidx_dirty = true;
		pthread_mutex_unlock(&s->mu);
		err_wrap(&e, "rebuild the claim index");
	}
	if (!rc)
		rc = a ? server_gc_snapshot(s, a, &w, &e)
		       : err_set(&e, CSID_ENOMEM, "out of memory");
	for (size_t i = 0; !rc && i < w.n; i++)
		if (server_gc_judged(&w, &w.nodes[i]))
			rc = server_gc_node_claims(s, &w, &w.nodes[i], server_gc_entry, NULL, &e);
	if (!rc)
		server_gc_told_all(s, &w);
	if (rc) {
		char q[600];

		log_error("msg=\"lost-claim pass failed; retried next pass\" error=%s",
			  log_q(q, sizeof(q), e.msg));
	}
	arena_free(a);
}
