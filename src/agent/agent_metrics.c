/*
 * The agent's metrics collector (see agent_metrics.h): counts computed at
 * scrape time from the mounter's records (a node holds at most a few
 * hundred), the owners watched and the pending releases.
 */
#include "agent/agent_metrics.h"

#include <stdlib.h>

#include "agent/mount_store.h"
#include "agent/owners.h"
#include "util/metrics.h"

struct agent_metrics {
	struct agent_metrics_config cfg;
	struct metrics_collector collector;
};

static void agent_metrics_collect(void *ctx, struct metrics_writer *w)
{
	static const enum owners_kind kinds[] = {OWNERS_PID, OWNERS_CGROUP, OWNERS_LEASE};
	struct agent_metrics *m = ctx;
	struct mount_record **rs = NULL;
	struct owners_entry *ov = NULL;
	double states[MOUNT_STATE_COUNT_] = {0}, owners[3] = {0};
	const char *label[] = {"state"}, *klabel[] = {"kind"};
	size_t n = 0, i;
	struct err e;

	if (mounter_list(m->cfg.mounter, &rs, &n, &e) == 0) {
		for (i = 0; i < n; i++)
			if ((unsigned)rs[i]->state < MOUNT_STATE_COUNT_)
				states[rs[i]->state]++;
		mount_records_free(rs, n);
	}
	metrics_write_header(w, "csid_mounts", "Mount records of this node, by state.",
			     METRICS_GAUGE);
	for (i = MOUNT_STATE_STAGING; i < MOUNT_STATE_GONE; i++) {
		const char *v[] = {mount_state_name((enum mount_state)i)};

		metrics_write_sample(w, "csid_mounts", label, v, 1, states[i]);
	}
	n = 0;
	if (m->cfg.claims && claims_owners_list(m->cfg.claims, &ov, &n) == 0) {
		for (i = 0; i < n; i++)
			for (size_t k = 0; k < 3; k++)
				if (ov[i].spec.kind == kinds[k])
					owners[k]++;
	}
	free(ov);
	metrics_write_header(w, "csid_owners_watched",
			     "Claim owners this agent watches, by kind (pid, cgroup, lease).",
			     METRICS_GAUGE);
	for (i = 0; i < 3; i++) {
		const char *v[] = {owners_kind_name(kinds[i])};

		metrics_write_sample(w, "csid_owners_watched", klabel, v, 1, owners[i]);
	}
	metrics_write_one(w, "csid_releases_pending",
			  "Claim releases recorded by this agent that no server has taken yet.",
			  METRICS_GAUGE,
			  m->cfg.claims ? (double)claims_releases_pending(m->cfg.claims) : 0);
}

int agent_metrics_start(const struct agent_metrics_config *cfg, struct agent_metrics **out,
			struct err *e)
{
	struct agent_metrics *m = calloc(1, sizeof(*m));

	*out = NULL;
	if (!m)
		return err_set(e, CSID_ENOMEM, "agent metrics: out of memory");
	m->cfg = *cfg;
	m->collector.collect = agent_metrics_collect;
	m->collector.ctx = m;
	metrics_collector_add(metrics_default(), &m->collector);
	*out = m;
	return 0;
}

void agent_metrics_stop(struct agent_metrics *m)
{
	if (!m)
		return;
	metrics_collector_remove(metrics_default(), &m->collector);
	free(m);
}
