/*
 * The store's read cache (store_cache.h): a chained hash table of entries
 * keyed by kind and ID (FNV-1a), doubled when it holds as many entries
 * as buckets.
 */
#include "store/store_cache.h"

#include <stdlib.h>
#include <string.h>

#include "store/store_int.h"

#define STORE_CACHE_BUCKETS_MIN 1024
/* What an entry costs beyond its ID and value bytes (the entry, allocator headers). */
#define STORE_CACHE_ENTRY_OVERHEAD 96

struct store_cache_entry {
	struct store_cache_entry *next;
	uint64_t hash;
	uint64_t known; /* the revision this state is true at */
	bool missing; /* a tombstone: obj has the kind and ID only */
	bool unknown; /* a mark: changes up to known are stale, the state is not cached */
	struct store_obj obj;
};

struct store_cache {
	struct store_cache_entry **b;
	size_t nb, n, bytes;
	size_t max_bytes;
	size_t cursor; /* the bucket store_cache_evict goes on from */
	/*
	 * floor: a key without an entry has had no change the cache applied
	 * and then lost after this revision (store_cache_fillable); top: the
	 * newest revision any entry ever knew, what a clear raises it to.
	 */
	uint64_t floor, top;
};

static uint64_t store_cache_hash(enum store_kind kind, const char *id)
{
	uint64_t h = 1469598103934665603ULL ^ (uint64_t)kind;

	for (const unsigned char *p = (const unsigned char *)id; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	return h;
}

struct store_cache *store_cache_new(size_t max_bytes)
{
	struct store_cache *c = calloc(1, sizeof(*c));

	if (c == NULL || (c->b = calloc(STORE_CACHE_BUCKETS_MIN, sizeof(*c->b))) == NULL) {
		free(c);
		return NULL;
	}
	c->nb = STORE_CACHE_BUCKETS_MIN;
	c->max_bytes = max_bytes;
	return c;
}

static size_t store_cache_cost(const struct store_cache_entry *en)
{
	return strlen(en->obj.id) + en->obj.len + STORE_CACHE_ENTRY_OVERHEAD;
}

static void store_cache_entry_free(struct store_cache_entry *en)
{
	store_obj_free(&en->obj);
	free(en);
}

/* What the cache forgets of en raises the floor (store_cache_fillable). */
static void store_cache_lose(struct store_cache *c, const struct store_cache_entry *en)
{
	if (en->known > c->floor)
		c->floor = en->known;
}

void store_cache_clear(struct store_cache *c)
{
	if (c->top > c->floor)
		c->floor = c->top;
	for (size_t i = 0; i < c->nb; i++) {
		while (c->b[i]) {
			struct store_cache_entry *en = c->b[i];

			c->b[i] = en->next;
			store_cache_entry_free(en);
		}
	}
	c->n = c->bytes = 0;
}

void store_cache_free(struct store_cache *c)
{
	if (c == NULL)
		return;
	store_cache_clear(c);
	free(c->b);
	free(c);
}

size_t store_cache_count(const struct store_cache *c)
{
	return c->n;
}

/* The link that points at kind/id's entry (*link NULL: none). */
static struct store_cache_entry **store_cache_find(struct store_cache *c, enum store_kind kind,
						   const char *id, uint64_t h)
{
	struct store_cache_entry **link = &c->b[h & (c->nb - 1)];

	while (*link && ((*link)->hash != h || (*link)->obj.kind != kind ||
			 strcmp((*link)->obj.id, id) != 0))
		link = &(*link)->next;
	return link;
}

/* Doubles the buckets; stays as is when out of memory (chains get longer). */
static void store_cache_grow(struct store_cache *c)
{
	size_t nb = c->nb * 2;
	struct store_cache_entry **b = calloc(nb, sizeof(*b));

	if (b == NULL)
		return;
	for (size_t i = 0; i < c->nb; i++) {
		while (c->b[i]) {
			struct store_cache_entry *en = c->b[i];

			c->b[i] = en->next;
			en->next = b[en->hash & (nb - 1)];
			b[en->hash & (nb - 1)] = en;
		}
	}
	free(c->b);
	c->b = b;
	c->nb = nb;
}

static void store_cache_unlink(struct store_cache *c, struct store_cache_entry **link)
{
	struct store_cache_entry *en = *link;

	*link = en->next;
	c->n--;
	c->bytes -= store_cache_cost(en);
	store_cache_entry_free(en);
}

/*
 * Makes room for need bytes past the bound: frees entries bucket by
 * bucket from where the last eviction stopped, until an eighth of the
 * bound is free. Buckets are in hash order, so what goes is a sample of
 * the whole cache: the entries read all the time are back at their next
 * read, the cold majority stays out. Marks stay (they keep stale changes
 * of the watch out); only when nothing else is left does it all go.
 */
static void store_cache_evict(struct store_cache *c, size_t need)
{
	const size_t goal = c->max_bytes - c->max_bytes / 8;

	for (size_t seen = 0; c->bytes + need > goal && seen < c->nb; seen++) {
		struct store_cache_entry **link = &c->b[c->cursor];

		while (*link)
			if ((*link)->unknown) {
				link = &(*link)->next;
			} else {
				store_cache_lose(c, *link);
				store_cache_unlink(c, link);
			}
		c->cursor = (c->cursor + 1) & (c->nb - 1);
	}
	if (c->bytes + need > c->max_bytes)
		store_cache_clear(c);
}

/*
 * Sets kind/id to value (NULL: missing; unknown: a mark) as of revision
 * known, unless the entry already knows a revision at least as new.
 */
static void store_cache_set(struct store_cache *c, enum store_kind kind, const char *id,
			    const struct store_obj *value, bool unknown, uint64_t known)
{
	uint64_t h = store_cache_hash(kind, id);
	struct store_cache_entry **link = store_cache_find(c, kind, id, h), *en;
	struct err e;

	/* A mark gives way to a state at its own revision: that is the truth there. */
	if (*link && ((*link)->unknown ? (*link)->known > known : (*link)->known >= known))
		return;
	if (*link)
		store_cache_unlink(c, link);
	en = calloc(1, sizeof(*en));
	if (en == NULL ||
	    (value ? store_obj_set(&en->obj, kind, id, strlen(id), value->value, value->len,
				   value->create_index, value->modify_index, &e)
		   : store_obj_set(&en->obj, kind, id, strlen(id), NULL, 0, 0, 0, &e)) != 0) {
		free(en);
		store_cache_clear(c);
		return;
	}
	en->hash = h;
	en->known = known;
	if (known > c->top)
		c->top = known;
	en->missing = value == NULL;
	en->unknown = unknown;
	if (c->bytes + store_cache_cost(en) > c->max_bytes)
		store_cache_evict(c, store_cache_cost(en));
	if (c->n >= c->nb)
		store_cache_grow(c);
	link = &c->b[h & (c->nb - 1)];
	en->next = *link;
	*link = en;
	c->n++;
	c->bytes += store_cache_cost(en);
}

void store_cache_apply(struct store_cache *c, const struct store_change *ch)
{
	store_cache_set(c, ch->obj.kind, ch->obj.id, ch->type == STORE_OP_PUT ? &ch->obj : NULL,
			false, ch->index);
}

void store_cache_fill(struct store_cache *c, enum store_kind kind, const char *id,
		      const struct store_obj *o, uint64_t rev)
{
	store_cache_set(c, kind, id, o, false, rev);
}

bool store_cache_fillable(const struct store_cache *c, enum store_kind kind, const char *id,
			  uint64_t rev)
{
	struct store_cache_entry *const *link =
	    store_cache_find((struct store_cache *)c, kind, id, store_cache_hash(kind, id));

	return *link != NULL || rev >= c->floor;
}

void store_cache_raise_floor(struct store_cache *c, uint64_t rev)
{
	if (rev > c->floor)
		c->floor = rev;
}

int store_cache_get(struct store_cache *c, enum store_kind kind, const char *id,
		    struct store_obj *out, struct err *e)
{
	struct store_cache_entry *en = *store_cache_find(c, kind, id, store_cache_hash(kind, id));

	if (en == NULL || en->unknown)
		return 1;
	if (en->missing)
		return err_set(e, CSID_ENOTFOUND, "%s %s: not found", store_kind_name(kind), id);
	return store_obj_set(out, kind, id, strlen(id), en->obj.value, en->obj.len,
			     en->obj.create_index, en->obj.modify_index, e);
}

bool store_cache_created(struct store_cache *c, enum store_kind kind, const char *id,
			 uint64_t *create_index)
{
	struct store_cache_entry *en = *store_cache_find(c, kind, id, store_cache_hash(kind, id));

	if (en == NULL || en->unknown || en->missing)
		return false;
	*create_index = en->obj.create_index;
	return true;
}

int store_cache_version(struct store_cache *c, enum store_kind kind, const char *id,
			uint64_t *modify_index, uint64_t *create_index)
{
	struct store_cache_entry *en = *store_cache_find(c, kind, id, store_cache_hash(kind, id));

	if (en == NULL || en->unknown)
		return -1;
	*modify_index = en->missing ? 0 : en->obj.modify_index;
	*create_index = en->missing ? 0 : en->obj.create_index;
	return !en->missing;
}

void store_cache_drop(struct store_cache *c, enum store_kind kind, const char *id, uint64_t rev)
{
	struct store_cache_entry **link = store_cache_find(c, kind, id, store_cache_hash(kind, id));

	if (*link && (*link)->known < rev) {
		/* Keep what was known only when it is newer than the mark would be. */
		store_cache_unlink(c, link);
	} else if (*link) {
		(*link)->unknown = true;
		return;
	}
	if (rev > 0)
		store_cache_set(c, kind, id, NULL, true, rev);
}
