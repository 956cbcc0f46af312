/*
 * The server's metrics (see server_metrics.h). Data model: one open-
 * addressing hash table per kind (volumes, snapshots) from object ID to
 * what that object adds to the totals (its contribution), and the totals
 * themselves: volumes per (plugin, state), active claims per (state,
 * mode), snapshots per state. Applying a stored version of an object
 * subtracts its old contribution and adds the new one, only when the
 * version is newer than the one counted (modify index), so replaying the
 * change log over a list that already saw later versions is harmless,
 * and a version already counted is not even decoded.
 *
 * The follower thread decodes a page of objects or changes into summaries
 * without the lock, then applies them under it (mu covers the tables and
 * totals), so a scrape, which holds mu while it writes the totals out,
 * never waits for decoding. Only that thread changes the tables, so it
 * reads them without the lock.
 *
 * Resynchronising (at start, and when the change log was compacted past
 * the thread) keeps the tables: it lists every volume and snapshot, and
 * between two pages follows the change log from the index the list began
 * at, so the log it needs is one page old, never the whole list's time
 * (a list that takes longer than the log keeps does not start over). A
 * listed object whose modify index is the one counted is only marked
 * seen; an entry neither listed nor changed during the pass was deleted
 * before the pass and goes at its end. So a pass decodes what changed
 * and reads, but does not decode, the rest; and passes are spaced (see
 * sm_main), so a thread that cannot keep up with the writes does not
 * spend its time listing.
 */
#include "server/server_metrics.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "store/store.h"
#include "util/arena.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/metrics.h"

#define SM_PAGE 1000
/* The thread's reads of the change log: this far apart once it did not change (ms)... */
#define SM_WAKE_MS 100
/* ...and this far apart while it changes. */
#define SM_BATCH_MS 10
#define SM_RETRY_MS 1000
/*
 * Resynchronisations start at least SM_RESYNC_GAP_MS apart and at least
 * SM_RESYNC_SHARE times the last one's length after its start, so they
 * take at most about a tenth of the thread's time.
 */
#define SM_RESYNC_GAP_MS 1000
#define SM_RESYNC_SHARE 10
#define SM_VOL_STATES 5
#define SM_SNAP_STATES 4
/* Active claim states: claimed, node-unpublished, controller-unpublished. */
#define SM_CLAIM_STATES 3
#define SM_EMPTY UINT32_MAX

/* One counted object; id NULL: free slot; id == sm_tomb: deleted. */
struct sm_entry {
	char *id;
	uint64_t modify_index;
	uint8_t state;
	bool seen; /* listed or changed since the current resynchronisation began */
	uint16_t plugin;
	uint16_t claims[SM_CLAIM_STATES][2];
};

struct sm_table {
	struct sm_entry *slots;
	size_t cap; /* power of two */
	size_t used; /* live + tombstones */
	size_t live;
};

struct server_metrics {
	struct server *server;
	struct store *store;
	struct server_vcache *vcache;
	struct metrics_collector collector;
	pthread_t thread;
	atomic_bool stopping;

	pthread_cond_t stop; /* broadcast (under mu) when stopping, held or parked change */
	pthread_mutex_t mu; /* guards what follows */
	bool held, parked; /* server_metrics_hold */
	struct server_metrics_stats stats;
	struct sm_table vols, snaps;
	char *plugins[SERVER_METRICS_PLUGINS_MAX]; /* interned; the last is "other" */
	size_t nplugins;
	uint64_t vol_counts[SERVER_METRICS_PLUGINS_MAX][SM_VOL_STATES];
	uint64_t claim_counts[SM_CLAIM_STATES][2];
	uint64_t snap_counts[SM_SNAP_STATES];
	uint64_t index; /* of the counts; 0 before the first list */
};

static char sm_tomb[] = "";

static uint64_t sm_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static void sm_table_clear(struct sm_table *t)
{
	for (size_t i = 0; i < t->cap; i++)
		if (t->slots[i].id && t->slots[i].id != sm_tomb)
			free(t->slots[i].id);
	free(t->slots);
	memset(t, 0, sizeof(*t));
}

/* The live entry of id, or NULL. */
static struct sm_entry *sm_find(struct sm_table *t, const char *id)
{
	size_t i;

	if (!t->cap)
		return NULL;
	for (i = sm_hash(id) & (t->cap - 1); t->slots[i].id; i = (i + 1) & (t->cap - 1))
		if (t->slots[i].id != sm_tomb && strcmp(t->slots[i].id, id) == 0)
			return &t->slots[i];
	return NULL;
}

/* Rehashes into cap slots (tombstones dropped). Returns 0 or -1. */
static int sm_resize(struct sm_table *t, size_t cap)
{
	struct sm_entry *old = t->slots, *slots = calloc(cap, sizeof(*slots));
	size_t oldcap = t->cap;

	if (!slots)
		return -1;
	for (size_t k = 0; k < oldcap; k++) {
		size_t i;

		if (!old[k].id || old[k].id == sm_tomb)
			continue;
		for (i = sm_hash(old[k].id) & (cap - 1); slots[i].id; i = (i + 1) & (cap - 1))
			;
		slots[i] = old[k];
	}
	free(old);
	t->slots = slots;
	t->cap = cap;
	t->used = t->live;
	return 0;
}

/* A new zeroed entry for id (not in t). NULL when out of memory. */
static struct sm_entry *sm_insert(struct sm_table *t, const char *id)
{
	size_t i;

	/*
	 * Filled up to 7/8 (tombstones included), rehashed to at most 5/8
	 * live: 100,000 volumes fit 131,072 slots of 32 bytes.
	 */
	if ((t->used + 1) * 8 > t->cap * 7) {
		size_t cap = t->cap ? t->cap : 64;

		while ((t->live + 1) * 8 > cap * 5)
			cap *= 2;
		if (sm_resize(t, cap) != 0)
			return NULL;
	}
	for (i = sm_hash(id) & (t->cap - 1); t->slots[i].id && t->slots[i].id != sm_tomb;
	     i = (i + 1) & (t->cap - 1))
		;
	memset(&t->slots[i], 0, sizeof(t->slots[i]));
	t->slots[i].id = strdup(id);
	if (!t->slots[i].id)
		return NULL;
	t->used++;
	t->live++;
	return &t->slots[i];
}

static void sm_remove(struct sm_table *t, struct sm_entry *en)
{
	free(en->id);
	en->id = sm_tomb;
	t->live--;
}

/* The index of plugin id among the interned ones; the last slot is "other". */
static uint16_t sm_plugin(struct server_metrics *m, const char *id)
{
	size_t i;

	for (i = 0; i < m->nplugins; i++)
		if (strcmp(m->plugins[i], id) == 0)
			return (uint16_t)i;
	if (m->nplugins < SERVER_METRICS_PLUGINS_MAX - 1) {
		char *dup = strdup(id);

		if (dup) {
			m->plugins[m->nplugins] = dup;
			return (uint16_t)m->nplugins++;
		}
	}
	return SERVER_METRICS_PLUGINS_MAX - 1;
}

/* Adds (sign 1) or takes away (sign -1) what en contributes to the totals. */
static void sm_count_volume(struct server_metrics *m, const struct sm_entry *en, int sign)
{
	m->vol_counts[en->plugin][en->state] += (uint64_t)(int64_t)sign;
	for (int s = 0; s < SM_CLAIM_STATES; s++)
		for (int k = 0; k < 2; k++)
			m->claim_counts[s][k] += (uint64_t)(int64_t)(sign * en->claims[s][k]);
}

/* What one stored version adds to the counts: decoded without the lock. */
struct sm_summary {
	enum store_kind kind;
	const char *id;
	uint64_t index;
	bool gone; /* deleted, or a record that does not decode: counts as absent */
	bool decoded; /* its value was decoded (sm_page counts them) */
	uint8_t state;
	const char *plugin; /* volumes */
	uint16_t claims[SM_CLAIM_STATES][2];
};

/* The table of kind; NULL for a kind not counted. */
static struct sm_table *sm_table_of(struct server_metrics *m, enum store_kind kind)
{
	return kind == STORE_VOLUME ? &m->vols : kind == STORE_SNAPSHOT ? &m->snaps : NULL;
}

/* What the counts read of a volume, into a summary (strings in its arena). */
struct sm_volume_ctx {
	struct sm_summary *out;
	struct arena *a;
};

static void sm_summarize_volume(const struct model_volume *v, void *arg)
{
	struct sm_volume_ctx *x = arg;
	struct sm_summary *out = x->out;

	out->state = (uint8_t)((unsigned)v->state < SM_VOL_STATES ? v->state : 0);
	/* Out of memory: counted under no plugin. */
	out->plugin = v->plugin_id ? arena_strdup(x->a, v->plugin_id) : NULL;
	if (!out->plugin)
		out->plugin = "";
	for (size_t i = 0; i < v->nclaims; i++) {
		unsigned st = (unsigned)v->claims[i].state,
			 k = v->claims[i].mode == MODEL_CLAIM_WRITE;

		if (st < SM_CLAIM_STATES && out->claims[st][k] < UINT16_MAX)
			out->claims[st][k]++;
	}
}

/* Decodes object o (deleted: its delete at index) into *out, strings in a or o. */
static void sm_summarize(struct server_metrics *m, struct arena *a, const struct store_obj *o,
			 bool deleted, uint64_t index, struct sm_summary *out)
{
	struct sm_table *t = sm_table_of(m, o->kind);
	struct sm_volume_ctx x = {out, a};
	const struct sm_entry *en;
	struct model_volume *v = NULL;
	struct model_snapshot *snap = NULL;
	struct err e;

	memset(out, 0, sizeof(*out));
	out->kind = o->kind;
	out->id = o->id;
	out->index = index;
	out->gone = deleted;
	/*
	 * Only volumes and snapshots are counted (sm_apply): a node record or
	 * a volume's claim history (which has the volume's ID) is not parsed,
	 * least of all as a volume (one parse per claim + release cycle, and
	 * a miss of the decoded cache on the history's indexes). Nor is a
	 * version no newer than the one counted, which sm_apply only marks
	 * seen (a listed object that did not change).
	 */
	if (deleted || !t)
		return;
	en = sm_find(t, o->id);
	if (en && en->modify_index >= index)
		return;
	out->decoded = true;
	if (o->kind == STORE_SNAPSHOT) {
		out->gone = model_snapshot_decode(a, o->value, o->len, &snap, &e) != 0;
		if (!out->gone)
			out->state =
			    (uint8_t)((unsigned)snap->state < SM_SNAP_STATES ? snap->state : 0);
		return;
	}
	/* The version its writer kept decoded: read there, not copied out. */
	if (server_vcache_peek(m->vcache, o->id, o->create_index, index, sm_summarize_volume, &x))
		return;
	if (server_vcache_decode(m->vcache, o->id, o->value, o->len, o->create_index, index, a, &v,
				 &e) != 0) {
		log_debug("msg=\"metrics: volume record does not decode\" error=%s", e.msg);
		out->gone = true;
		return;
	}
	sm_summarize_volume(v, &x);
}

/* Adds (sign 1) or takes away (sign -1) what en, of kind, contributes. mu held. */
static void sm_count(struct server_metrics *m, enum store_kind kind, const struct sm_entry *en,
		     int sign)
{
	if (kind == STORE_VOLUME)
		sm_count_volume(m, en, sign);
	else
		m->snap_counts[en->state] += (uint64_t)(int64_t)sign;
}

/*
 * Counts a summarized version, unless the same or a newer one of the
 * object is counted; either way the object, when present, is seen. mu held.
 */
static void sm_apply(struct server_metrics *m, const struct sm_summary *sum)
{
	struct sm_table *t = sm_table_of(m, sum->kind);
	struct sm_entry *en, next;

	if (!t)
		return;
	en = sm_find(t, sum->id);
	if (en && en->modify_index >= sum->index) {
		en->seen = true;
		return;
	}
	if (en)
		sm_count(m, sum->kind, en, -1);
	if (sum->gone) {
		if (en)
			sm_remove(t, en);
		return;
	}
	if (!en && !(en = sm_insert(t, sum->id)))
		return;
	memset(&next, 0, sizeof(next));
	next.id = en->id;
	next.modify_index = sum->index;
	next.state = sum->state;
	next.seen = true;
	if (sum->kind == STORE_VOLUME) {
		next.plugin = sm_plugin(m, sum->plugin);
		memcpy(next.claims, sum->claims, sizeof(next.claims));
	}
	*en = next;
	sm_count(m, sum->kind, en, 1);
}

/*
 * Counts n objects: decoded first without the lock (so a scrape never
 * waits for a page's decoding), then applied under it; at the end, when
 * index is not 0, the counts reflect the store at index. Returns 0, or -1
 * when out of memory (nothing counted).
 */
static int sm_page(struct server_metrics *m, struct arena *a, const struct store_obj *const *objs,
		   const bool *deleted, const uint64_t *indexes, size_t n, uint64_t index)
{
	struct sm_summary *sums = n ? arena_alloc(a, n * sizeof(*sums)) : NULL;

	if (n && !sums)
		return -1;
	for (size_t i = 0; i < n; i++)
		sm_summarize(m, a, objs[i], deleted && deleted[i], indexes[i], &sums[i]);
	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < n; i++) {
		sm_apply(m, &sums[i]);
		m->stats.decoded += sums[i].decoded;
	}
	if (index)
		m->index = index;
	pthread_mutex_unlock(&m->mu);
	return 0;
}

/* Forgets every count (when stopping). mu held. */
static void sm_reset(struct server_metrics *m)
{
	sm_table_clear(&m->vols);
	sm_table_clear(&m->snaps);
	memset(m->vol_counts, 0, sizeof(m->vol_counts));
	memset(m->claim_counts, 0, sizeof(m->claim_counts));
	memset(m->snap_counts, 0, sizeof(m->snap_counts));
}

/* Counts one page of a list. Returns 0 or -1 (out of memory). */
static int sm_list_page(struct server_metrics *m, struct arena *a, const struct store_list *l)
{
	const struct store_obj **objs = l->n ? arena_alloc(a, l->n * sizeof(*objs)) : NULL;
	uint64_t *idx = l->n ? arena_alloc(a, l->n * sizeof(*idx)) : NULL;

	if (l->n && (!objs || !idx))
		return -1;
	for (size_t i = 0; i < l->n; i++) {
		objs[i] = &l->objs[i];
		idx[i] = l->objs[i].modify_index;
	}
	return sm_page(m, a, objs, NULL, idx, l->n, 0);
}

/* Marks every entry of t unseen (a resynchronisation begins). mu held. */
static void sm_unsee(struct sm_table *t)
{
	for (size_t i = 0; i < t->cap; i++)
		t->slots[i].seen = false;
}

/* Takes away every entry of t, of kind, not seen since sm_unsee. mu held. */
static void sm_sweep(struct server_metrics *m, struct sm_table *t, enum store_kind kind)
{
	for (size_t i = 0; i < t->cap; i++) {
		struct sm_entry *en = &t->slots[i];

		if (!en->id || en->id == sm_tomb || en->seen)
			continue;
		sm_count(m, kind, en, -1);
		sm_remove(t, en);
	}
}

/* Where a reader that read ch after pos goes on from. */
static uint64_t sm_next_pos(const struct store_changes *ch, uint64_t pos)
{
	return ch->n ? ch->changes[ch->n - 1].index : (ch->index > pos ? ch->index : pos);
}

/*
 * Whether change i of ch is the last one of its object in ch: only that
 * one is counted (the counts after the page are the same, and the
 * object's latest version is the one the decoded volume cache holds).
 * seen is a table of 2^bits slots (indexes + 1, 0 empty), filled from the
 * end of the page back.
 */
static bool sm_last_of(const struct store_changes *ch, size_t i, uint32_t *seen, unsigned bits)
{
	const struct store_obj *o = &ch->changes[i].obj;
	size_t mask = ((size_t)1 << bits) - 1, at = (size_t)(sm_hash(o->id) ^ o->kind) & mask;

	for (; seen[at]; at = (at + 1) & mask) {
		const struct store_obj *p = &ch->changes[seen[at] - 1].obj;

		if (p->kind == o->kind && strcmp(p->id, o->id) == 0)
			return false;
	}
	seen[at] = (uint32_t)i + 1;
	return true;
}

/*
 * Counts one page of the change log read after pos; publish: the counts
 * then reflect the store at the page's end (not during a
 * resynchronisation). Returns 0 or -1 (out of memory).
 */
static int sm_changes_page(struct server_metrics *m, struct arena *a,
			   const struct store_changes *ch, uint64_t pos, bool publish)
{
	size_t n = ch->n, k = 0;
	const struct store_obj **objs = n ? arena_alloc(a, n * sizeof(*objs)) : NULL;
	uint64_t *idx = n ? arena_alloc(a, n * sizeof(*idx)) : NULL;
	bool *del = n ? arena_alloc(a, n * sizeof(*del)) : NULL;
	unsigned bits = 4;
	uint32_t *seen;

	while (((size_t)1 << bits) < 2 * n)
		bits++;
	seen = n ? arena_alloc(a, ((size_t)1 << bits) * sizeof(*seen)) : NULL;
	if (n && (!objs || !idx || !del || !seen))
		return -1;
	if (n)
		memset(seen, 0, ((size_t)1 << bits) * sizeof(*seen));
	/* Newest first, so the last change of each object is the one kept. */
	for (size_t i = n; i-- > 0;) {
		if (!sm_last_of(ch, i, seen, bits))
			continue;
		objs[k] = &ch->changes[i].obj;
		idx[k] = ch->changes[i].index;
		del[k] = ch->changes[i].type == STORE_OP_DELETE;
		k++;
	}
	return sm_page(m, a, objs, del, idx, k, publish ? sm_next_pos(ch, pos) : 0);
}

/*
 * Counts the page of changes after *pos and moves *pos past it; publish as
 * for sm_changes_page. Returns 1 when the page held changes, 0 when it was
 * empty, or a code with e set (CSID_ERANGE: compacted past *pos).
 */
static int sm_follow(struct server_metrics *m, uint64_t *pos, bool publish, struct err *e)
{
	struct store_changes ch;
	struct arena *a;
	int rc;

	memset(&ch, 0, sizeof(ch));
	rc = store_changes(m->store, *pos, SM_PAGE, &ch, e);
	if (rc)
		return rc;
	a = arena_new();
	if (!a || sm_changes_page(m, a, &ch, *pos, publish) != 0) {
		rc = err_set(e, CSID_ENOMEM, "out of memory");
	} else {
		*pos = sm_next_pos(&ch, *pos);
		rc = ch.n > 0;
	}
	arena_free(a);
	store_changes_free(&ch);
	return rc;
}

/* Lists every object of kind, following the log from *pos between pages. */
static int sm_list_kind(struct server_metrics *m, enum store_kind kind, uint64_t *pos,
			struct err *e)
{
	char *after = NULL;
	bool more = true;
	int rc = 0;

	while (more && !rc && !atomic_load(&m->stopping)) {
		struct store_list l;
		struct arena *a = arena_new();

		memset(&l, 0, sizeof(l));
		rc = a ? store_list(m->store, kind, NULL, after, SM_PAGE, &l, e)
		       : err_set(e, CSID_ENOMEM, "out of memory");
		if (!rc && sm_list_page(m, a, &l) != 0)
			rc = err_set(e, CSID_ENOMEM, "out of memory");
		more = !rc && l.more && l.n;
		free(after);
		after = more ? strdup(l.objs[l.n - 1].id) : NULL;
		store_list_free(&l);
		arena_free(a);
		if (more && !after)
			rc = err_set(e, CSID_ENOMEM, "out of memory");
		while (!rc && (rc = sm_follow(m, pos, false, e)) == 1)
			rc = 0;
	}
	free(after);
	return rc;
}

/*
 * Resynchronises with the store (see the top of this file): on return 0,
 * the counts reflect the store at *pos, the index to follow the log from.
 * Otherwise a code with e set (CSID_ERANGE: the log was compacted past
 * the pass between two pages); the tables keep what the pass counted.
 */
static int sm_resync(struct server_metrics *m, uint64_t *pos, struct err *e)
{
	uint64_t at = store_index(m->store);
	int rc;

	pthread_mutex_lock(&m->mu);
	m->stats.lists++;
	sm_unsee(&m->vols);
	sm_unsee(&m->snaps);
	pthread_mutex_unlock(&m->mu);
	rc = sm_list_kind(m, STORE_VOLUME, &at, e);
	if (!rc)
		rc = sm_list_kind(m, STORE_SNAPSHOT, &at, e);
	if (rc || atomic_load(&m->stopping))
		return rc;
	pthread_mutex_lock(&m->mu);
	sm_sweep(m, &m->vols, STORE_VOLUME);
	sm_sweep(m, &m->snaps, STORE_SNAPSHOT);
	m->index = at;
	pthread_mutex_unlock(&m->mu);
	*pos = at;
	return 0;
}

/*
 * Waits until the real clock reads until (ms), or less when the thread is
 * being stopped (not on the store: every write wakes that).
 */
static void sm_pause_until(struct server_metrics *m, int64_t until)
{
	struct clock *c = clock_real();

	pthread_mutex_lock(&m->mu);
	while (!atomic_load(&m->stopping) && clock_now_ms(c) < until)
		clock_wait(c, &m->stop, &m->mu, until);
	pthread_mutex_unlock(&m->mu);
}

/* Waits while the thread is held (server_metrics_hold). */
static void sm_park(struct server_metrics *m)
{
	pthread_mutex_lock(&m->mu);
	while (m->held && !atomic_load(&m->stopping)) {
		if (!m->parked) {
			m->parked = true;
			pthread_cond_broadcast(&m->stop);
		}
		pthread_cond_wait(&m->stop, &m->mu);
	}
	m->parked = false;
	pthread_mutex_unlock(&m->mu);
}

static void *sm_main(void *arg)
{
	struct server_metrics *m = arg;
	struct clock *c = clock_real();
	int64_t next_resync = 0;
	bool synced = false, moved = false;
	uint64_t pos = 0;
	struct err e;

	while (!atomic_load(&m->stopping)) {
		int rc;

		sm_park(m);
		err_clear(&e);
		if (!synced) {
			int64_t began;

			sm_pause_until(m, next_resync);
			began = clock_now_ms(c);
			rc = sm_resync(m, &pos, &e);
			next_resync = began + SM_RESYNC_GAP_MS;
			if (next_resync < began + SM_RESYNC_SHARE * (clock_now_ms(c) - began))
				next_resync = began + SM_RESYNC_SHARE * (clock_now_ms(c) - began);
			if (rc) {
				log_warn("msg=\"metrics: cannot list the catalogue\" error=%s",
					 e.msg);
				continue;
			}
			synced = true;
		}
		rc = sm_follow(m, &pos, true, &e);
		if (rc == CSID_ERANGE) {
			log_info("msg=\"metrics: the change log was compacted past the catalogue "
				 "counts; listing again\" error=%s",
				 e.msg);
			synced = false;
		} else if (rc < 0) {
			store_wait(m->store, UINT64_MAX - 1, SM_RETRY_MS);
		} else if (rc == 0) {
			/*
			 * Not woken by writes: woken per burst, this thread cost
			 * each claim a wake-up on its way (the writer's broadcast,
			 * and one more thread on the node's cores beside the
			 * claim's). The counts lag the catalogue by SM_WAKE_MS at
			 * most, far below any scrape interval; a burst is taken in
			 * pages of SM_BATCH_MS of writes, after their writers kept
			 * their versions decoded (server_vcache.h).
			 */
			sm_pause_until(m, clock_now_ms(c) + (moved ? SM_BATCH_MS : SM_WAKE_MS));
			moved = false;
		} else {
			moved = true;
		}
	}
	return NULL;
}

static void sm_gauge(struct metrics_writer *w, const char *name, const char *label,
		     const char *value, double v)
{
	const char *l[] = {label}, *vals[] = {value};

	metrics_write_sample(w, name, l, vals, label ? 1 : 0, v);
}

static void sm_collect_plugins(struct server_metrics *m, struct metrics_writer *w)
{
	static const struct {
		const char *name, *help;
	} g[] = {
	    {"csid_plugin_controllers_healthy", "Healthy controller instances of a plugin."},
	    {"csid_plugin_controllers_expected", "Controller instances of a plugin known."},
	    {"csid_plugin_nodes_healthy", "Nodes with a healthy node instance of a plugin."},
	    {"csid_plugin_nodes_expected", "Nodes with a node instance of a plugin."},
	};
	struct arena *a = arena_new();
	struct server_plugin *p = NULL;
	size_t n = 0;
	struct err e;

	if (!a)
		return;
	if (server_plugin_list(m->server, a, &p, &n, &e) != 0)
		n = 0;
	if (n > SERVER_METRICS_PLUGINS_MAX)
		n = SERVER_METRICS_PLUGINS_MAX;
	for (size_t k = 0; k < 4; k++) {
		metrics_write_header(w, g[k].name, g[k].help, METRICS_GAUGE);
		for (size_t i = 0; i < n; i++) {
			int v = k == 0   ? p[i].controllers_healthy
				: k == 1 ? p[i].controllers_expected
				: k == 2 ? p[i].nodes_healthy
					 : p[i].nodes_expected;

			sm_gauge(w, g[k].name, "plugin", p[i].id, v);
		}
	}
	arena_free(a);
}

static void sm_collect(void *ctx, struct metrics_writer *w)
{
	struct server_metrics *m = ctx;
	static const char *const vl[] = {"plugin", "state"}, *const cl[] = {"state", "mode"};
	struct server_health h;
	size_t i;
	int s;

	pthread_mutex_lock(&m->mu);
	metrics_write_header(w, "csid_volumes", "Volumes in the catalogue, by plugin and state.",
			     METRICS_GAUGE);
	/* The interned plugins, then "other" once the table is full. */
	for (i = 0; i < SERVER_METRICS_PLUGINS_MAX; i++) {
		const char *plugin = i < m->nplugins ? m->plugins[i] : "other";

		if (i >= m->nplugins && (i != SERVER_METRICS_PLUGINS_MAX - 1 ||
					 m->nplugins < SERVER_METRICS_PLUGINS_MAX - 1))
			break;
		for (s = 0; s < SM_VOL_STATES; s++) {
			const char *v[] = {plugin,
					   model_volume_state_name((enum model_volume_state)s)};

			metrics_write_sample(w, "csid_volumes", vl, v, 2,
					     (double)m->vol_counts[i][s]);
		}
	}
	metrics_write_header(w, "csid_claims", "Active claims on volumes, by state and mode.",
			     METRICS_GAUGE);
	for (s = 0; s < SM_CLAIM_STATES; s++)
		for (int k = 0; k < 2; k++) {
			const char *v[] = {model_claim_state_name((enum model_claim_state)s),
					   model_claim_mode_name((enum model_claim_mode)k)};

			metrics_write_sample(w, "csid_claims", cl, v, 2,
					     (double)m->claim_counts[s][k]);
		}
	metrics_write_header(w, "csid_snapshots", "Snapshots in the catalogue, by state.",
			     METRICS_GAUGE);
	for (s = 0; s < SM_SNAP_STATES; s++)
		sm_gauge(w, "csid_snapshots", "state",
			 model_snapshot_state_name((enum model_snapshot_state)s),
			 (double)m->snap_counts[s]);
	metrics_write_one(w, "csid_catalogue_index",
			  "Store index the volume, claim and snapshot counts reflect.",
			  METRICS_GAUGE, (double)m->index);
	pthread_mutex_unlock(&m->mu);

	server_health(m->server, &h);
	metrics_write_header(w, "csid_nodes", "Nodes known to the server, by status.",
			     METRICS_GAUGE);
	sm_gauge(w, "csid_nodes", "status", "ready", h.nodes_ready);
	sm_gauge(w, "csid_nodes", "status", "down", h.nodes_down);
	metrics_write_one(
	    w, "csid_reconciler_queue_depth",
	    "Items (volumes, snapshots) pending in the reconciler, backing off included.",
	    METRICS_GAUGE, h.queued);
	metrics_write_one(w, "csid_reconciler_items_failing",
			  "Reconciler items whose last attempt failed.", METRICS_GAUGE, h.failing);
	sm_collect_plugins(m, w);
}

int server_metrics_start(struct server *s, struct server_vcache *vcache,
			 struct server_metrics **out, struct err *e)
{
	struct server_metrics *m = calloc(1, sizeof(*m));

	*out = NULL;
	if (!m)
		return err_set(e, CSID_ENOMEM, "metrics: out of memory");
	m->server = s;
	m->store = server_store(s);
	m->vcache = vcache;
	atomic_init(&m->stopping, false);
	if (clock_cond_init(&m->stop) != 0) {
		free(m);
		return err_set(e, CSID_ENOMEM, "metrics: out of memory");
	}
	pthread_mutex_init(&m->mu, NULL);
	if (pthread_create(&m->thread, NULL, sm_main, m) != 0) {
		pthread_mutex_destroy(&m->mu);
		pthread_cond_destroy(&m->stop);
		free(m);
		return err_set(e, CSID_ENOMEM, "metrics: cannot start the catalogue thread");
	}
	pthread_setname_np(m->thread, "metrics");
	m->collector.collect = sm_collect;
	m->collector.ctx = m;
	metrics_collector_add(metrics_default(), &m->collector);
	*out = m;
	return 0;
}

void server_metrics_hold(struct server_metrics *m, bool hold)
{
	pthread_mutex_lock(&m->mu);
	m->held = hold;
	pthread_cond_broadcast(&m->stop);
	while (hold && !m->parked && !atomic_load(&m->stopping))
		pthread_cond_wait(&m->stop, &m->mu);
	pthread_mutex_unlock(&m->mu);
}

void server_metrics_stats(struct server_metrics *m, struct server_metrics_stats *out)
{
	pthread_mutex_lock(&m->mu);
	*out = m->stats;
	pthread_mutex_unlock(&m->mu);
}

uint64_t server_metrics_index(struct server_metrics *m)
{
	uint64_t idx;

	pthread_mutex_lock(&m->mu);
	idx = m->index;
	pthread_mutex_unlock(&m->mu);
	return idx;
}

void server_metrics_stop(struct server_metrics *m)
{
	if (!m)
		return;
	metrics_collector_remove(metrics_default(), &m->collector);
	pthread_mutex_lock(&m->mu);
	atomic_store(&m->stopping, true);
	pthread_cond_broadcast(&m->stop);
	pthread_mutex_unlock(&m->mu);
	pthread_join(m->thread, NULL);
	pthread_cond_destroy(&m->stop);
	sm_reset(m);
	for (size_t i = 0; i < m->nplugins; i++)
		free(m->plugins[i]);
	pthread_mutex_destroy(&m->mu);
	free(m);
}
