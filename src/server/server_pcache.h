/*
 * A cache of what the server derives from every node record (the plugins
 * view), so that a claim does not decode every node record: with 1,000
 * registered nodes that decoding was most of a claim's cost. The cached
 * view is rebuilt when a node record changed, as the store's change log
 * tells (so a node written by another server of a cluster invalidates it
 * too), or when the log was compacted past the cache. Between rebuilds a
 * use reads the changes since the last one it saw, which are the few
 * writes made meanwhile. Thread-safe: one lock, held while the view is
 * checked, rebuilt and used.
 */
#ifndef CSID_SERVER_SERVER_PCACHE_H
#define CSID_SERVER_SERVER_PCACHE_H

#include "model/model.h"
#include "store/store.h"
#include "util/arena.h"
#include "util/err.h"

struct server_pcache;

/*
 * Builds the view from the node records nodes[0..n) (decoded), in a (the
 * cache's arena, kept until the next rebuild). Returns 0 with *view set,
 * or a negative code with e set.
 */
typedef int (*server_pcache_build_fn)(void *ctx, struct model_node *const *nodes, size_t n,
				      struct arena *a, void **view, struct err *e);
/* Reads view (borrowed: only during the call, under the cache's lock). */
typedef void (*server_pcache_use_fn)(void *arg, const void *view);

/* An empty cache of the node records of st (borrowed), or NULL when out of memory. */
struct server_pcache *server_pcache_new(struct store *st, server_pcache_build_fn build, void *ctx);
/* Frees c and its view; NULL is a no-op. */
void server_pcache_free(struct server_pcache *c);
/*
 * Runs use(arg, view) on the view of the node records as stored now,
 * rebuilt first when a node changed. Returns 0, or the store's or the
 * builder's error (use is then not called).
 */
int server_pcache_use(struct server_pcache *c, server_pcache_use_fn use, void *arg, struct err *e);
/* How often the view was built (for tests and benchmarks). */
unsigned long server_pcache_builds(struct server_pcache *c);

#endif
