/*
 * Held allocations (see held_allocs.h): a small counted set of the
 * (volume, allocation) pairs whose claim flow is running, and the
 * mounter's records, merged into one sorted list per report; and the
 * hand-over of released allocations and of volumes to expand to the
 * claim flow.
 *
 * Every begin and end of a flow takes the next generation and stamps it
 * on its pair. A pair whose flows all ended stays in the set (count 0,
 * not reported) until an answer to a report built at or after its stamp
 * was handled (held_allocs_answered): until then an answer to an older
 * report can still name it, and its stamp tells that answer is stale.
 */
#include "agent/held_allocs.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/array.h"

struct held_allocs_flow {
	char *volume_id;
	char *alloc_id;
	int count; /* flows running; 0: all ended, kept for its stamp */
	uint64_t gen; /* the generation of the pair's last begin or end */
};

struct held_allocs {
	held_allocs_changed_fn on_change;
	void *ctx;
	pthread_mutex_t mu; /* guards everything below */
	struct mounter *mounter;
	struct held_allocs_flow *flows;
	size_t nflows, flows_cap;
	uint64_t gen; /* begins and ends of claim flows so far */
	uint64_t forgot; /* the stamps up to this generation are forgotten */
	held_allocs_released_fn on_released;
	void *released_ctx;
	held_allocs_expand_fn on_expand;
	void *expand_ctx;
};

int held_allocs_new(held_allocs_changed_fn on_change, void *ctx, struct held_allocs **out,
		    struct err *e)
{
	struct held_allocs *h = calloc(1, sizeof(*h));

	*out = NULL;
	if (!h)
		return err_set(e, CSID_ENOMEM, "held allocations: out of memory");
	h->on_change = on_change;
	h->ctx = ctx;
	pthread_mutex_init(&h->mu, NULL);
	*out = h;
	return 0;
}

void held_allocs_free(struct held_allocs *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->nflows; i++) {
		free(h->flows[i].volume_id);
		free(h->flows[i].alloc_id);
	}
	free(h->flows);
	pthread_mutex_destroy(&h->mu);
	free(h);
}

void held_allocs_attach(struct held_allocs *h, struct mounter *m)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->mu);
	h->mounter = m;
	pthread_mutex_unlock(&h->mu);
	if (h->on_change)
		h->on_change(h->ctx);
}

/* The flow of the pair, or NULL; h->mu held. */
static struct held_allocs_flow *held_allocs_find(struct held_allocs *h, const char *volume_id,
						 const char *alloc_id)
{
	for (size_t i = 0; i < h->nflows; i++)
		if (strcmp(h->flows[i].volume_id, volume_id) == 0 &&
		    strcmp(h->flows[i].alloc_id, alloc_id) == 0)
			return &h->flows[i];
	return NULL;
}

int held_allocs_begin(struct held_allocs *h, const char *volume_id, const char *alloc_id,
		      struct err *e)
{
	struct held_allocs_flow *f;
	int rc = 0;

	if (!h)
		return 0;
	pthread_mutex_lock(&h->mu);
	f = held_allocs_find(h, volume_id, alloc_id);
	if (f) {
		f->count++;
		f->gen = ++h->gen;
	} else if (array_grow((void **)&h->flows, &h->flows_cap, h->nflows + 1,
			      sizeof(*h->flows)) != 0) {
		rc = CSID_ENOMEM;
	} else {
		f = &h->flows[h->nflows];
		f->volume_id = strdup(volume_id);
		f->alloc_id = strdup(alloc_id);
		f->count = 1;
		if (f->volume_id && f->alloc_id) {
			h->nflows++;
			f->gen = ++h->gen;
		} else {
			free(f->volume_id);
			free(f->alloc_id);
			rc = CSID_ENOMEM;
		}
	}
	pthread_mutex_unlock(&h->mu);
	if (rc)
		return err_set(e, rc, "held allocations: out of memory");
	return 0;
}

void held_allocs_end(struct held_allocs *h, const char *volume_id, const char *alloc_id)
{
	struct held_allocs_flow *f;

	if (!h)
		return;
	pthread_mutex_lock(&h->mu);
	f = held_allocs_find(h, volume_id, alloc_id);
	if (f && f->count > 0) {
		f->count--;
		f->gen = ++h->gen;
	}
	pthread_mutex_unlock(&h->mu);
}

/* Drops flows[i] (its slot takes the last one); h->mu held. */
static void held_allocs_drop(struct held_allocs *h, size_t i)
{
	free(h->flows[i].volume_id);
	free(h->flows[i].alloc_id);
	h->flows[i] = h->flows[--h->nflows];
}

void held_allocs_answered(struct held_allocs *h, uint64_t seq)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->mu);
	if (seq > h->forgot)
		h->forgot = seq;
	for (size_t i = h->nflows; i-- > 0;)
		if (h->flows[i].count == 0 && h->flows[i].gen <= seq)
			held_allocs_drop(h, i);
	pthread_mutex_unlock(&h->mu);
}

uint64_t held_allocs_seq(struct held_allocs *h)
{
	uint64_t seq;

	if (!h)
		return 0;
	pthread_mutex_lock(&h->mu);
	seq = h->gen;
	pthread_mutex_unlock(&h->mu);
	return seq;
}

void held_allocs_on_released(struct held_allocs *h, held_allocs_released_fn fn, void *ctx)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->mu);
	h->on_released = fn;
	h->released_ctx = ctx;
	pthread_mutex_unlock(&h->mu);
}

/*
 * Whether no flow of the pair runs now or began or ended after generation
 * seq; h->mu held. A pair not in the set had its last flow at or before
 * h->forgot (or none): settled for any seq from there on only.
 */
static bool held_allocs_settled_locked(struct held_allocs *h, uint64_t seq, const char *volume_id,
				       const char *alloc_id)
{
	const struct held_allocs_flow *f = held_allocs_find(h, volume_id, alloc_id);

	if (!f)
		return seq >= h->forgot;
	return f->count == 0 && f->gen <= seq;
}

bool held_allocs_settled(struct held_allocs *h, uint64_t seq, const char *volume_id,
			 const char *alloc_id)
{
	bool settled;

	if (!h)
		return false;
	pthread_mutex_lock(&h->mu);
	settled = held_allocs_settled_locked(h, seq, volume_id, alloc_id);
	pthread_mutex_unlock(&h->mu);
	return settled;
}

bool held_allocs_released(struct held_allocs *h, uint64_t seq, const char *volume_id,
			  const char *alloc_id, const char *note)
{
	bool passed = false;

	if (!h)
		return false;
	pthread_mutex_lock(&h->mu);
	if (h->on_released && held_allocs_settled_locked(h, seq, volume_id, alloc_id)) {
		h->on_released(h->released_ctx, seq, volume_id, alloc_id, note);
		passed = true;
	}
	pthread_mutex_unlock(&h->mu);
	return passed;
}

void held_allocs_on_expand(struct held_allocs *h, held_allocs_expand_fn fn, void *ctx)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->mu);
	h->on_expand = fn;
	h->expand_ctx = ctx;
	pthread_mutex_unlock(&h->mu);
}

void held_allocs_expand(struct held_allocs *h, int64_t sent_ms, const struct held_allocs_expand *v,
			size_t n)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->mu);
	if (h->on_expand)
		h->on_expand(h->expand_ctx, sent_ms, v, n);
	pthread_mutex_unlock(&h->mu);
}

static int held_allocs_cmp(const void *x, const void *y)
{
	const struct model_node_alloc *a = x, *b = y;
	int c = strcmp(a->volume_id, b->volume_id);

	return c ? c : strcmp(a->alloc_id, b->alloc_id);
}

int held_allocs_list(struct held_allocs *h, struct arena *a, bool *ready,
		     struct model_node_alloc **out, size_t *n, struct err *e)
{
	struct mount_record **recs = NULL;
	struct model_node_alloc *v = NULL;
	struct mounter *m;
	size_t nrecs = 0, count = 0, k = 0;
	int rc = 0;

	*ready = false;
	*out = NULL;
	*n = 0;
	/* The flows first, then the records: a flow ends only once its record exists. */
	pthread_mutex_lock(&h->mu);
	m = h->mounter;
	if (m && !(v = arena_alloc(a, (h->nflows + 1) * sizeof(*v))))
		rc = CSID_ENOMEM;
	for (size_t i = 0; m && !rc && i < h->nflows; i++) {
		if (h->flows[i].count == 0)
			continue;
		v[count].volume_id = arena_strdup(a, h->flows[i].volume_id);
		v[count].alloc_id = arena_strdup(a, h->flows[i].alloc_id);
		if (!v[count].volume_id || !v[count].alloc_id)
			rc = CSID_ENOMEM;
		count++;
	}
	pthread_mutex_unlock(&h->mu);
	if (rc)
		return err_set(e, rc, "held allocations: out of memory");
	if (!m)
		return 0;
	if ((rc = mounter_list(m, &recs, &nrecs, e)))
		return err_wrap(e, "held allocations");
	if (nrecs) {
		struct model_node_alloc *all = arena_alloc(a, (count + nrecs) * sizeof(*all));

		if (!all)
			rc = CSID_ENOMEM;
		else if (count)
			memcpy(all, v, count * sizeof(*all));
		for (size_t i = 0; !rc && i < nrecs; i++, count++) {
			all[count].volume_id = arena_strdup(a, recs[i]->volume_id);
			all[count].alloc_id = arena_strdup(a, recs[i]->alloc_id);
			if (!all[count].volume_id || !all[count].alloc_id)
				rc = CSID_ENOMEM;
		}
		v = all;
	}
	mount_records_free(recs, nrecs);
	if (rc)
		return err_set(e, rc, "held allocations: out of memory");
	qsort(v, count, sizeof(*v), held_allocs_cmp);
	for (size_t i = 0; i < count; i++)
		if (k == 0 || held_allocs_cmp(&v[k - 1], &v[i]) != 0)
			v[k++] = v[i];
	*ready = true;
	*out = v;
	*n = k;
	return 0;
}
