/*
 * The server's metrics collector (util/metrics.h), added to the default
 * registry while the server runs:
 *
 *   csid_volumes{plugin, state}            gauge
 *   csid_claims{state, mode}               gauge (active claims)
 *   csid_snapshots{state}                  gauge
 *   csid_catalogue_index                   gauge: the store index the three above reflect
 *   csid_nodes{status}                     gauge: ready, down
 *   csid_plugin_controllers_healthy{plugin}, csid_plugin_controllers_expected{plugin},
 *   csid_plugin_nodes_healthy{plugin}, csid_plugin_nodes_expected{plugin}   gauges
 *   csid_reconciler_queue_depth, csid_reconciler_items_failing              gauges
 *
 * Catalogue counts are kept incrementally: a thread lists the volumes and
 * snapshots once, then follows the store's change log, keeping for each
 * object only what it adds to the counts (state, plugin, claims by state
 * and mode, modify index). When the log was compacted past it, it lists
 * again, but decodes only the objects whose modify index changed and
 * follows the log between pages, so a list never has to start over;
 * lists are spaced at least a second and ten times their length apart. A
 * scrape reads the totals under a lock, so its cost and memory do not
 * depend on the number of volumes. The thread takes the writes of about
 * 10 ms in one page and decodes only the last version of each object in
 * it, so the counts trail the store by that and the decoding. Plugin labels are bounded: past
 * SERVER_METRICS_PLUGINS_MAX distinct IDs, volumes count under "other".
 *
 * Threading: start and stop from one thread; the rest is internal.
 */
#ifndef CSID_SERVER_SERVER_METRICS_H
#define CSID_SERVER_SERVER_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "server/server.h"
#include "server/server_vcache.h"
#include "util/err.h"

#define SERVER_METRICS_PLUGINS_MAX 256

struct server_metrics;

/*
 * Starts following the store of s (decoding through vcache, which may be
 * NULL) and adds the collector. Returns 0 and *out, or a code with e set.
 */
int server_metrics_start(struct server *s, struct server_vcache *vcache,
			 struct server_metrics **out, struct err *e);
/* What the thread did so far (tests, benchmarks). */
struct server_metrics_stats {
	uint64_t lists; /* full lists of the catalogue begun (the first one included) */
	uint64_t decoded; /* stored versions of volumes and snapshots decoded */
};

void server_metrics_stats(struct server_metrics *m, struct server_metrics_stats *out);

/*
 * For tests: hold stops the thread between two pages (it returns once the
 * thread waits) until called again with false.
 */
void server_metrics_hold(struct server_metrics *m, bool hold);

/* The store index the catalogue counts reflect (0 until the first list ends). */
uint64_t server_metrics_index(struct server_metrics *m);
/* Removes the collector, stops the thread, frees. NULL is a no-op. */
void server_metrics_stop(struct server_metrics *m);

#endif
