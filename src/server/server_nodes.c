/*
 * Nodes: registration, heartbeat and liveness. A node's record (its
 * fingerprint: the node and controller plugins it runs, their health,
 * capabilities, CSI node ID, max volumes and topology) is written to the
 * store only when it changes: at registration, when the fingerprint
 * changes, and on the transitions ready -> down (no heartbeat for the
 * TTL, server_tick) and down -> ready (a heartbeat again). A heartbeat
 * that changes nothing only refreshes the in-memory liveness map, whose
 * times are on the server's monotonic clock, so tests run it in virtual
 * time.
 */
#include "server/server_int.h"

#include <stdlib.h>
#include <string.h>

#include "util/array.h"
#include "util/log.h"

/* How soon a starting server tries its first member record again while it has no lease. */
#define SERVER_MEMBER_FIRST_MS 100

struct server_live *server_live_find(struct server *s, const char *id)
{
	for (size_t i = 0; i < s->nlive; i++)
		if (strcmp(s->live[i].id, id) == 0)
			return &s->live[i];
	return NULL;
}

/* The map entry of id, added when missing; NULL when out of memory (s->mu held). */
static struct server_live *server_live_get(struct server *s, const char *id)
{
	struct server_live *l = server_live_find(s, id);

	if (!l &&
	    array_grow((void **)&s->live, &s->live_cap, s->nlive + 1, sizeof(*s->live)) == 0) {
		char *copy = strdup(id);

		if (copy) {
			l = &s->live[s->nlive++];
			memset(l, 0, sizeof(*l));
			l->id = copy;
		}
	}
	return l;
}

/* A heartbeat at seen_ms (or down); heard: this server took it itself. */
static void server_live_set(struct server *s, const char *id, bool down, bool heard)
{
	struct server_live *l;

	pthread_mutex_lock(&s->mu);
	l = server_live_get(s, id);
	/* Out of memory: the node is simply not tracked; its next heartbeat retries. */
	if (l) {
		l->seen_ms = clock_now_ms(s->clock);
		l->down = down;
		if (heard)
			l->heard_ms = l->seen_ms;
	}
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->mu);
}

void server_live_seen(struct server *s, const char *id, bool down)
{
	server_live_set(s, id, down, false);
}

void server_live_heard(struct server *s, const char *id)
{
	server_live_set(s, id, false, true);
}

/*
 * Writes this server's member record with the heartbeats it took since
 * the last one, each with its age. Returns when the next is due.
 */
static int64_t server_members_publish(struct server *s, int64_t now)
{
	struct server_member_seen *seen = NULL;
	struct server_member_lost *lost = NULL;
	struct server_member_status *status = NULL;
	struct server_member_news news = {0};
	bool leading = server_leader_leading(s->leader);
	struct arena *sa;
	size_t n = 0, nlost = 0, lost_cap = 0;
	int64_t since;
	struct err e;
	int rc;

	pthread_mutex_lock(&s->mu);
	since = s->publish_ms;
	if (since && now < since + s->publish_period_ms) {
		pthread_mutex_unlock(&s->mu);
		return since + s->publish_period_ms;
	}
	seen = s->nlive ? calloc(s->nlive, sizeof(*seen)) : NULL;
	for (size_t i = 0; seen && i < s->nlive; i++) {
		const struct server_live *l = &s->live[i];

		if (l->heard_ms > since && (seen[n].node_id = strdup(l->id)))
			seen[n++].age_ms = now - l->heard_ms;
	}
	/* The leader judges its own reports; a follower tells what it found. */
	for (size_t i = 0; !leading && i < s->nlost_found &&
			   server_gc_lost_add(&lost, &nlost, &lost_cap, &s->lost_found[i]);
	     i++)
		;
	pthread_mutex_unlock(&s->mu);
	news.seen = seen;
	news.nseen = n;
	news.lost = lost;
	news.nlost = nlost;
	/* The leader shares the reconciler's statuses. */
	sa = leading ? arena_new() : NULL;
	if (leading && (!sa || server_status_share(s, sa, &status, &news.nstatus)))
		log_warn("msg=\"out of memory sharing the reconciler's statuses\"");
	news.status = status;
	rc = server_leader_publish(s->leader, &news, &e);
	for (size_t i = 0; i < n; i++)
		free(seen[i].node_id);
	free(seen);
	server_gc_lost_free(lost, nlost);
	arena_free(sa);
	if (rc == CSID_EUNAVAIL && !since)
		return now + SERVER_MEMBER_FIRST_MS; /* no lease yet: the first record soon after */
	if (rc)
		log_warn("msg=\"cannot write the member record; retried\" error=\"%s\"", e.msg);
	pthread_mutex_lock(&s->mu);
	/* A failure is tried again a period later, with what was heard since the last record. */
	if (!rc)
		s->publish_ms = now;
	pthread_mutex_unlock(&s->mu);
	return now + s->publish_period_ms;
}

/*
 * The leader counts the heartbeats the other servers took: each node of
 * a member record written since the last count was seen age_ms before
 * now (the record may be up to a period older than that: a node is
 * marked down at most a period late, never early).
 */
static void server_members_import(struct server *s, int64_t now)
{
	struct server_leader_status st;
	struct server_member *m = NULL;
	struct server_member_lost *told = NULL;
	struct arena *a = arena_new();
	size_t n = 0, ntold = 0, told_cap = 0;
	uint64_t newest;
	struct err e;

	if (!a)
		return;
	server_leader_status(s->leader, &st);
	if (server_members(s, a, &m, &n, &e)) {
		log_warn("msg=\"cannot read the member records\" error=\"%s\"", e.msg);
		arena_free(a);
		return;
	}
	/* The claims the others found lost, as their records say now. */
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; strcmp(m[i].id, st.server_id) != 0 && j < m[i].nlost; j++)
			if (!server_gc_lost_add(&told, &ntold, &told_cap, &m[i].lost[j]))
				log_warn("msg=\"out of memory keeping a lost claim another server "
					 "found; read again next period\"");
	pthread_mutex_lock(&s->mu);
	server_gc_lost_free(s->lost_told, s->nlost_told);
	s->lost_told = told;
	s->nlost_told = ntold;
	if (ntold)
		s->gc_due_ms = now;
	newest = s->members_index;
	for (size_t i = 0; i < n; i++) {
		if (m[i].modify_index <= s->members_index || strcmp(m[i].id, st.server_id) == 0)
			continue;
		if (m[i].modify_index > newest)
			newest = m[i].modify_index;
		for (size_t j = 0; j < m[i].nseen; j++) {
			struct server_live *l = server_live_get(s, m[i].seen[j].node_id);
			int64_t at = now - m[i].seen[j].age_ms;

			if (l && at > l->seen_ms) {
				l->seen_ms = at;
				l->down = false;
			}
		}
	}
	s->members_index = newest;
	pthread_mutex_unlock(&s->mu);
	arena_free(a);
}

/* A server that does not lead keeps the reconciler's statuses the leader's record shares. */
static void server_members_follow(struct server *s)
{
	struct server_member *m = NULL;
	struct arena *a = arena_new();
	size_t n = 0;
	struct err e;

	if (!a)
		return;
	if (server_members(s, a, &m, &n, &e))
		log_warn("msg=\"cannot read the member records\" error=\"%s\"", e.msg);
	else
		server_status_keep(s, m, n);
	arena_free(a);
}

int server_store_nodes(struct store *st, struct arena *a, struct model_node ***out, size_t *n,
		       uint64_t *index, struct err *e)
{
	struct model_node **nodes = NULL;
	size_t count = 0, cap = 0;
	char *after = NULL;
	int rc = 0;

	*out = NULL;
	*n = 0;
	for (bool more = true; more && !rc;) {
		struct store_list l = {0};

		rc = store_list(st, STORE_NODE, NULL, after, SERVER_PER_PAGE_MAX, &l, e);
		if (rc)
			return err_wrap(e, "list nodes");
		if (index && !after)
			*index = l.index;
		more = l.more && l.n > 0;
		for (size_t i = 0; !rc && i < l.n; i++) {
			struct model_node *node;

			if (count == cap) {
				struct model_node **grown;

				cap = cap ? cap * 2 : 16;
				grown = arena_alloc(a, cap * sizeof(*grown));
				if (!grown) {
					rc = err_set(e, CSID_ENOMEM, "list nodes: out of memory");
					break;
				}
				if (count)
					memcpy(grown, nodes, count * sizeof(*grown));
				nodes = grown;
			}
			rc = model_node_decode(a, l.objs[i].value, l.objs[i].len, &node, e);
			if (rc) {
				err_wrap(e, "node %s: stored record", l.objs[i].id);
				break;
			}
			node->create_index = l.objs[i].create_index;
			node->modify_index = l.objs[i].modify_index;
			nodes[count++] = node;
		}
		if (!rc && l.n && !(after = arena_strdup(a, l.objs[l.n - 1].id)))
			rc = err_set(e, CSID_ENOMEM, "list nodes: out of memory");
		store_list_free(&l);
	}
	if (!rc) {
		*out = nodes;
		*n = count;
	}
	return rc;
}

int server_all_nodes(struct server *s, struct arena *a, struct model_node ***out, size_t *n,
		     uint64_t *index, struct err *e)
{
	return server_store_nodes(s->cfg.store, a, out, n, index, e);
}

/* Whether a and b encode alike (their fingerprint and status are the same). */
static bool server_node_same(const struct model_node *a, const struct model_node *b)
{
	char *ta = NULL, *tb = NULL;
	size_t la = 0, lb = 0;
	bool same;

	if (model_node_encode(a, &ta, &la, NULL) || model_node_encode(b, &tb, &lb, NULL)) {
		free(ta);
		free(tb);
		return false;
	}
	same = la == lb && memcmp(ta, tb, la) == 0;
	free(ta);
	free(tb);
	return same;
}

/*
 * The duplicate-node rule. While a node is live (a heartbeat within the
 * TTL), only the agent instance that holds it may update it: a
 * fingerprint from another instance is refused with CSID_ECONFLICT naming
 * the holder, so two agents configured with one node name never take
 * turns overwriting each other's plugins (which would flap every volume
 * of the node). Once the holder is silent for the TTL (the node is down;
 * a restarted server counts the TTL from its start) any instance may take
 * the node over. The agent keeps its instance ID in its data_dir,
 * which one agent at a time holds, so a restarted agent is the same
 * instance and is never locked out of its own node. A fingerprint
 * without an instance ID (an operator's PUT) is not checked.
 */
static int server_node_owner_check(struct server *s, const struct model_node *old,
				   const struct model_node *node, struct err *e)
{
	char tag[MODEL_INSTANCE_TAG_LEN + 1], holder[MODEL_INSTANCE_TAG_LEN + 1];
	struct server_live *l;
	int64_t ago = 0;
	bool live;

	if (!old || !old->instance_id || !node->instance_id ||
	    strcmp(old->instance_id, node->instance_id) == 0)
		return 0;
	model_node_instance_tag(node->instance_id, tag);
	model_node_instance_tag(old->instance_id, holder);
	pthread_mutex_lock(&s->mu);
	l = server_live_find(s, node->id);
	live = old->status == MODEL_NODE_READY && l && !l->down;
	if (live)
		ago = clock_now_ms(s->clock) - l->seen_ms;
	pthread_mutex_unlock(&s->mu);
	if (!live) {
		log_warn("msg=\"node taken over by another agent instance\" node=%s "
			 "instance_tag=%s previous_instance_tag=%s",
			 node->id, tag, holder);
		return 0;
	}
	log_warn("msg=\"node refused: another agent instance holds it\" node=%s instance_tag=%s "
		 "holder_tag=%s last_heartbeat_ms_ago=%lld",
		 node->id, tag, holder, (long long)ago);
	return err_set(e, CSID_ECONFLICT,
		       "node %s is held by live agent instance %s (last heartbeat %lld ms ago); "
		       "this agent (instance %s) may take it over once that one is silent for "
		       "node_ttl (%lld ms)",
		       node->id, holder, (long long)ago, tag, (long long)s->node_ttl_ms);
}

/* Compares two instance IDs in a time that does not depend on where they differ. */
static bool server_instance_eq(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char d = la != lb;

	for (size_t i = 0; i < lb; i++)
		d |= (unsigned char)(a[i < la ? i : 0] ^ b[i]);
	return d == 0;
}

/* What an instance check copies out of the cached node record. */
struct server_instance_look {
	const char *instance; /* presented */
	bool found, held, down;
	char holder[MODEL_INSTANCE_TAG_LEN + 1];
};

/* server_node_use_fn of server_node_instance_check. */
static void server_instance_look(void *arg, const struct model_node *n)
{
	struct server_instance_look *l = arg;

	l->found = n != NULL;
	if (!n)
		return;
	l->held = n->instance_id && server_instance_eq(l->instance, n->instance_id);
	if (n->instance_id)
		model_node_instance_tag(n->instance_id, l->holder);
	l->down = n->status == MODEL_NODE_DOWN;
}

/*
 * The check's look at node_id's record read from the store itself: when
 * the cache cannot be built (another node's record does not decode), a
 * node's own requests still pass on its own record.
 */
static int server_instance_read(struct server *s, const char *node_id,
				struct server_instance_look *l, struct err *e)
{
	struct model_node *n = NULL;
	struct arena *a = arena_new();
	int rc;

	if (!a)
		return err_set(e, CSID_ENOMEM, "out of memory");
	rc = server_get_node(s, node_id, a, &n, e);
	if (rc == 0)
		server_instance_look(l, n);
	arena_free(a);
	return rc;
}

int server_node_instance_check(struct server *s, const char *node_id, const char *instance,
			       const char *what, bool live, struct err *e)
{
	struct server_instance_look l = {.instance = instance, .holder = "none"};
	char tag[MODEL_INSTANCE_TAG_LEN + 1];
	int rc;

	if (!instance)
		return 0;
	model_node_instance_tag(instance, tag);
	/* The cached record: every claim, release and node-stage read of an agent passes here. */
	rc = server_plugins_node_use(s, node_id, server_instance_look, &l, e);
	if (rc) {
		err_clear(e);
		rc = server_instance_read(s, node_id, &l, e);
	}
	if (rc == 0 && !l.found)
		rc = CSID_ENOTFOUND;
	if (rc == CSID_ENOTFOUND) {
		log_warn("msg=\"node request refused: node not registered\" node=%s "
			 "instance_tag=%s request=%s",
			 node_id, tag, what);
		rc = err_set(e, live ? CSID_EPRECOND : CSID_EPERM,
			     "%s for node %s: the node is not registered with this server; its "
			     "agent must join before it acts for the node",
			     what, node_id);
	} else if (rc) {
		err_wrap(e, "%s for node %s", what, node_id);
	} else if (!l.held) {
		log_warn("msg=\"node request refused: an agent acted for a node it does not "
			 "hold\" node=%s instance_tag=%s holder_tag=%s request=%s",
			 node_id, tag, l.holder, what);
		rc = err_set(e, CSID_EPERM,
			     "%s for node %s refused: a node may act only for itself, and node %s "
			     "is held by agent instance %s, not by this agent (instance %s)",
			     what, node_id, node_id, l.holder, tag);
	} else if (live && l.down) {
		rc = err_set(e, CSID_EPRECOND,
			     "%s for node %s: the node is down (no heartbeat within node_ttl, "
			     "%lld ms); its agent must heartbeat again first",
			     what, node_id, (long long)s->node_ttl_ms);
	}
	return rc;
}

int server_node_put(struct server *s, const struct model_node *node, struct arena *a,
		    struct model_node **out, struct err *e)
{
	int rc;

	if ((rc = model_node_validate(node, e)))
		return rc;
	for (int attempt = 0; attempt < SERVER_CAS_RETRIES; attempt++) {
		struct model_node *old = NULL, *cur;
		int64_t now = clock_wall_ms(s->clock);
		uint64_t index = 0;

		rc = server_get_node(s, node->id, a, &old, e);
		if (rc && rc != CSID_ENOTFOUND)
			return rc;
		if ((rc = server_node_owner_check(s, old, node, e)))
			return rc;
		cur = arena_alloc(a, sizeof(*cur));
		if (!cur)
			return err_set(e, CSID_ENOMEM, "node %s: out of memory", node->id);
		*cur = *node;
		/* The allocations report lives in memory only (server_gc_report). */
		cur->allocs_reported = false;
		cur->allocs = NULL;
		cur->nallocs = 0;
		cur->status = MODEL_NODE_READY;
		cur->registered_ms = old ? old->registered_ms : now;
		cur->updated_ms = old ? old->updated_ms : now;
		if (old && server_node_same(old, cur)) {
			cur->create_index = old->create_index;
			cur->modify_index = old->modify_index;
		} else {
			cur->updated_ms = now;
			rc = server_put_node(s, cur, old ? old->modify_index : 0, &index, e);
			if (rc == CSID_ECONFLICT)
				continue;
			if (rc)
				return rc;
			if (!old || old->status == MODEL_NODE_DOWN)
				log_info("msg=\"node %s\" node=%s plugins=%zu",
					 old ? "ready again" : "registered", cur->id,
					 cur->nplugins);
			cur->create_index = old ? old->create_index : index;
			cur->modify_index = index;
		}
		server_live_heard(s, cur->id);
		server_gc_report(s, node, clock_wall_ms(s->clock));
		if (out)
			*out = cur;
		return 0;
	}
	return err_set(e, CSID_EABORTED, "node %s: %d writers raced; try again", node->id,
		       SERVER_CAS_RETRIES);
}

int server_node_get(struct server *s, const char *id, struct arena *a, struct model_node **out,
		    struct err *e)
{
	return server_get_node(s, id, a, out, e);
}

int server_node_list(struct server *s, struct arena *a, struct model_node ***out, size_t *n,
		     uint64_t *index, struct err *e)
{
	return server_all_nodes(s, a, out, n, index, e);
}

/* Writes node id down unless a heartbeat came meanwhile (seen_ms moved). */
static void server_node_mark_down(struct server *s, const char *id, int64_t seen_ms)
{
	struct arena *a = arena_new();
	struct err e;
	int rc = CSID_ENOMEM;

	err_clear(&e);
	for (int attempt = 0; a && attempt < SERVER_CAS_RETRIES; attempt++) {
		struct model_node *n = NULL;
		struct server_live *l;
		bool fresh;

		rc = server_get_node(s, id, a, &n, &e);
		if (rc)
			break;
		pthread_mutex_lock(&s->mu);
		l = server_live_find(s, id);
		fresh = l && l->seen_ms != seen_ms;
		pthread_mutex_unlock(&s->mu);
		if (fresh || n->status == MODEL_NODE_DOWN) {
			rc = 0;
			break;
		}
		n->status = MODEL_NODE_DOWN;
		n->updated_ms = clock_wall_ms(s->clock);
		rc = server_put_node(s, n, n->modify_index, NULL, &e);
		if (rc == CSID_ECONFLICT)
			continue;
		if (!rc) {
			log_warn(
			    "msg=\"node down: no heartbeat within the TTL\" node=%s ttl_ms=%lld",
			    id, (long long)s->node_ttl_ms);
			pthread_mutex_lock(&s->mu);
			l = server_live_find(s, id);
			if (l && l->seen_ms == seen_ms) {
				l->down = true;
				server_gc_forget(l);
			}
			pthread_mutex_unlock(&s->mu);
		}
		break;
	}
	if (rc == CSID_ENOTFOUND) {
		/* The record is gone: nothing to mark; stop watching the node. */
		struct server_live *l;

		pthread_mutex_lock(&s->mu);
		l = server_live_find(s, id);
		if (l) {
			l->down = true;
			server_gc_forget(l);
		}
		pthread_mutex_unlock(&s->mu);
	} else if (rc) {
		char q[600];

		log_error("msg=\"cannot mark node down\" node=%s error=%s", id,
			  log_q(q, sizeof(q), e.msg));
	}
	arena_free(a);
}

int64_t server_tick(struct server *s)
{
	int64_t now = clock_now_ms(s->clock), next = CLOCK_NEVER, publish = CLOCK_NEVER, compact;
	struct server_live *due = NULL;
	size_t ndue = 0, nlive;
	bool gc;

	if (store_shared(s->cfg.store)) {
		publish = server_members_publish(s, now);
		if (!server_leader_leading(s->leader)) {
			int64_t pass;

			/* Rule "report" on the reports taken here; the leader releases. */
			pthread_mutex_lock(&s->mu);
			gc = s->gc_due_ms <= now;
			if (gc)
				s->gc_due_ms = now + s->gc_period_ms;
			pass = s->gc_due_ms;
			pthread_mutex_unlock(&s->mu);
			if (gc)
				server_gc_follower_pass(s);
			/* The leader's statuses, read as often as it writes them. */
			if (!s->import_ms || now >= s->import_ms + s->publish_period_ms) {
				server_members_follow(s);
				s->import_ms = now;
			}
			if (s->import_ms + s->publish_period_ms < pass)
				pass = s->import_ms + s->publish_period_ms;
			return pass < publish ? pass : publish;
		}
		/* Read once a period (records come no faster), not at every node's expiry. */
		if (!s->import_ms || now >= s->import_ms + s->publish_period_ms) {
			server_members_import(s, now);
			s->import_ms = now;
		}
		if (s->import_ms + s->publish_period_ms < publish)
			publish = s->import_ms + s->publish_period_ms;
		compact = server_leader_compact(s->leader, now);
		if (compact < publish)
			publish = compact;
	}
	/* What follows is the leader's: its writes are fenced. */
	server_fenced(true);
	pthread_mutex_lock(&s->mu);
	gc = s->gc_due_ms <= now;
	if (gc)
		s->gc_due_ms = now + s->gc_period_ms;
	next = s->gc_due_ms;
	nlive = s->nlive;
	if (nlive)
		due = calloc(nlive, sizeof(*due));
	for (size_t i = 0; i < s->nlive; i++) {
		const struct server_live *l = &s->live[i];
		int64_t expires = l->seen_ms + s->node_ttl_ms;

		if (l->down)
			continue;
		if (expires <= now && due && (due[ndue].id = strdup(l->id)))
			due[ndue++].seen_ms = l->seen_ms;
		else if (expires < next)
			next = expires;
	}
	pthread_mutex_unlock(&s->mu);
	/* Store writes run without the lock, so heartbeats are never held up. */
	for (size_t i = 0; i < ndue; i++) {
		server_node_mark_down(s, due[i].id, due[i].seen_ms);
		free(due[i].id);
	}
	free(due);
	/* After the TTL marks: a node that just went down is seen down by this pass. */
	if (gc)
		server_gc_pass(s);
	server_fenced(false);
	/* Out of memory: try again soon rather than never. */
	if (nlive && !due && next == CLOCK_NEVER)
		next = now + 1000;
	return next < publish ? next : publish;
}
