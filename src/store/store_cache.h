/*
 * A store backend's read cache. The etcd backend's holds the objects
 * its watch has delivered (and those its reads fetched), each as of a
 * known revision, so a get is answered without a round trip to etcd. The
 * SQLite backend's holds its own commits and reads (store_sqlite.c): a
 * get there is a hash lookup instead of a statement under the
 * connection's lock.
 *
 * Each entry is an object, a tombstone (the key is known to be missing)
 * or a mark (its state is unknown up to `known`: a get misses) with
 * `known`, the revision its state is true at. A change of
 * the watch replaces an entry only when its revision is newer than what
 * the entry knows, so a read that came back after later events were
 * applied cannot roll the entry back, and events replayed after the watch
 * resumed change nothing twice. The backend decides when an entry may be
 * trusted (store_etcd.c): only while its watch runs, and a read's answer
 * enters only when it is at least as new as what the watch applied or
 * when nothing the watch applied to that key can have been forgotten
 * (store_cache_fillable).
 *
 * Size: at most max_bytes (store_cache_new) of entries (keys, values,
 * overhead); past that an eighth of it is freed, a sample of every entry but the
 * marks (store_cache.c), which costs reads, never correctness.
 *
 * Not thread-safe: the backend calls it under its own mutex.
 */
#ifndef CSID_STORE_STORE_CACHE_H
#define CSID_STORE_STORE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

#define STORE_CACHE_BYTES (64 * 1024 * 1024)

struct store_cache;

/* At most max_bytes of entries (STORE_CACHE_BYTES for etcd); NULL when out of memory. */
struct store_cache *store_cache_new(size_t max_bytes);
void store_cache_free(struct store_cache *c);

/*
 * Applies one change of the watch (a put or a delete at ch->index).
 * Out of memory empties the cache rather than leave a stale entry.
 */
void store_cache_apply(struct store_cache *c, const struct store_change *ch);

/*
 * Records what a read at revision rev found: the object o, or (o NULL)
 * that kind/id does not exist.
 */
void store_cache_fill(struct store_cache *c, enum store_kind kind, const char *id,
		      const struct store_obj *o, uint64_t rev);

/*
 * Whether a read of kind/id at revision rev may enter the cache (with
 * store_cache_fill) even though the watch applied later revisions: when
 * kind/id has an entry (the newer of the two stays), or when it has none
 * and rev is at least the floor. Below the floor a change the watch
 * applied may have been forgotten (evicted, cleared), so an older read
 * could put back a state the watch already replaced. The backend raises
 * the floor to the revision its watch starts after (store_cache_raise_floor);
 * evictions and clears raise it to what they forgot.
 */
bool store_cache_fillable(const struct store_cache *c, enum store_kind kind, const char *id,
			  uint64_t rev);
void store_cache_raise_floor(struct store_cache *c, uint64_t rev);

/*
 * Looks kind/id up. Returns 0 with a copy in *out, CSID_ENOTFOUND (known
 * missing), 1 (not cached), or CSID_ENOMEM.
 */
int store_cache_get(struct store_cache *c, enum store_kind kind, const char *id,
		    struct store_obj *out, struct err *e);

/*
 * Whether kind/id is cached as an object; then *create_index is its
 * create_index (the watch asks it of a key it sees deleted).
 */
bool store_cache_created(struct store_cache *c, enum store_kind kind, const char *id,
			 uint64_t *create_index);

/*
 * What is known of kind/id without a copy: 1 an object (its indexes in
 * *modify_index and *create_index), 0 known to be missing (both 0), -1
 * not known.
 */
int store_cache_version(struct store_cache *c, enum store_kind kind, const char *id,
			uint64_t *modify_index, uint64_t *create_index);

/*
 * Forgets kind/id: its next get reads etcd. rev is a revision its state
 * is known to be at least as new as (a failed compare's answer): changes
 * up to it that the watch still brings are ignored, so they cannot put
 * back what the compare just showed to be old. 0: none known.
 */
void store_cache_drop(struct store_cache *c, enum store_kind kind, const char *id, uint64_t rev);

/* Forgets everything (the watch lost changes). */
void store_cache_clear(struct store_cache *c);

/* The number of entries, objects and tombstones (tests). */
size_t store_cache_count(const struct store_cache *c);

#endif
