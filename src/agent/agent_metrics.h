/*
 * The agent's metrics collector (util/metrics.h), added to the default
 * registry while the agent's API runs. At each scrape it reads:
 *
 *   csid_mounts{state}                 gauge: mount records by state (published, staging, ...)
 *   csid_owners_watched{kind}          gauge: claim owners watched (pid, cgroup, lease)
 *   csid_releases_pending              gauge: releases recorded, not yet taken by a server
 *
 * (csid_plugin_restarts_total is counted by the supervisor itself.)
 * Threading: start and stop from one thread; scrapes run on any.
 */
#ifndef CSID_AGENT_AGENT_METRICS_H
#define CSID_AGENT_AGENT_METRICS_H

#include <stddef.h>

#include "agent/claims.h"
#include "agent/mounter.h"
#include "util/err.h"

struct agent_metrics_config {
	struct mounter *mounter; /* borrowed, required */
	struct claims *claims; /* borrowed: owners and pending releases; NULL: none */
};

struct agent_metrics;

/* Adds the collector. Returns 0 and *out, or CSID_ENOMEM with e set. */
int agent_metrics_start(const struct agent_metrics_config *cfg, struct agent_metrics **out,
			struct err *e);
/* Removes the collector (waiting for a scrape in progress) and frees. NULL: no-op. */
void agent_metrics_stop(struct agent_metrics *m);

#endif
