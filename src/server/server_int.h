/*
 * Internals shared by the files of the server facade (server.c: life
 * cycle, store helpers, the compare-and-set loop, health; server_nodes.c;
 * server_plugins.c: the plugins view and schedulability;
 * server_volumes.c; server_snapshots.c). Not a contract for anyone else.
 */
#ifndef CSID_SERVER_SERVER_INT_H
#define CSID_SERVER_SERVER_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "server/server.h"
#include "server/server_claimidx.h"
#include "server/server_history.h"
#include "server/server_metrics.h"
#include "server/server_pastclaims.h"
#include "server/server_pcache.h"
#include "server/server_vcache.h"

/* Attempts of one compare-and-set write before CSID_EABORTED. */
#define SERVER_CAS_RETRIES 256

/* In-memory liveness of one node: its last heartbeat on the monotonic clock. */
struct server_live {
	char *id;
	int64_t seen_ms;
	int64_t heard_ms; /* the last heartbeat this server took itself (0: none) */
	bool down; /* as last written to the store */
	/*
	 * The allocations report of the node's agent (server_gc.c): the last
	 * one (sorted by volume, then allocation; malloc'd strings), the
	 * instance that sent it, and when it and the one before it were
	 * received (wall clock; 0: none since this server started or since
	 * the node went down). reported false: the last PUT carried none.
	 */
	bool reported;
	char *report_instance;
	struct model_node_alloc *allocs;
	size_t nallocs;
	int64_t report_ms, prev_report_ms;
};

struct server {
	struct server_config cfg;
	struct clock *clock;
	struct reconciler *rec;
	int64_t node_ttl_ms;
	int64_t node_grace_ms;
	int64_t gc_period_ms; /* how often the lost-claim pass runs (server_gc.c) */
	int64_t gc_due_ms; /* monotonic; guarded by mu */
	struct server_vcache *vcache; /* decoded volume records; shared with the reconciler */
	struct server_pcache *pcache; /* the plugins view's node part (server_plugins.c) */
	/* The claim index may lack changes: the next lost-claim pass rebuilds it (guarded by mu).
	 */
	bool claimidx_dirty;
	struct server_metrics *metrics; /* the metrics collector (server_start) */
	struct server_leader *leader; /* the election; its fenced store view */
	int64_t publish_ms; /* monotonic: the member record's last write; guarded by mu */
	int64_t publish_period_ms;
	uint64_t members_index; /* the newest member record counted (leader) */
	/* Monotonic: the leader's last read of the member records (server_tick's). */
	int64_t import_ms;
	/*
	 * The report rule across servers (server_gc.c), guarded by mu: the
	 * claims this server's last report pass found lost on nodes whose
	 * reports it took (published in its member record while it does not
	 * lead), and those the other members' records named at the leader's
	 * last read of them (malloc'd strings).
	 */
	struct server_member_lost *lost_found, *lost_told;
	size_t nlost_found, nlost_told;
	/* Not leading: the reconciler statuses of the leader's last record read (server_status.c).
	 */
	struct arena *shared_arena;
	struct server_member_status *shared; /* sorted by kind, then ID; guarded by mu */
	size_t nshared;

	pthread_mutex_t mu; /* guards live, stopping */
	pthread_cond_t cond;
	struct server_live *live;
	size_t nlive, live_cap;
	bool stopping;
	pthread_t ticker; /* marks nodes down, samples the queue, on real time (server_start) */
	bool ticker_started;
	struct server_history history; /* the ticker's samples of the queue; guarded by mu */
};

/* What an update callback asks the compare-and-set loop to do. */
enum server_write { SERVER_KEEP, SERVER_PUT, SERVER_DELETE };

/*
 * Changes v (decoded in scratch, which it may allocate from) as the
 * operation asks. Returns a server_write (>= 0) or a negative code with e
 * set; *skipped (in scratch, may stay NULL) says what an operator exit
 * skipped. Called again on every retry with a freshly read v.
 */
typedef int (*server_volume_fn)(struct server *s, struct model_volume *v, void *arg,
				struct arena *scratch, char **skipped, struct err *e);
typedef int (*server_snapshot_fn)(struct server *s, struct model_snapshot *snap, void *arg,
				  struct arena *scratch, struct err *e);

/*
 * Reads volume id, calls fn, writes on the index read, and retries on a
 * conflict (at most SERVER_CAS_RETRIES times, then CSID_EABORTED). A
 * write enqueues the volume in the reconciler. *out (may be NULL) gets
 * the volume as written (API-view fields filled; NULL after a delete)
 * and *skipped (may be NULL) fn's note, both in a.
 */
int server_volume_update(struct server *s, const char *id, server_volume_fn fn, void *arg,
			 struct arena *a, struct model_volume **out, char **skipped, struct err *e);
/*
 * server_volume_update for a write that changes what the volume asks of
 * its plugin (delete, expand, modify, cancel): the reconciler's error and
 * attempt count, which were about the old request, are dropped before the
 * answer is made (reconciler_restart), so neither the answer nor a wait
 * shows a stale error as the new request's.
 */
int server_volume_request(struct server *s, const char *id, server_volume_fn fn, void *arg,
			  struct arena *a, struct model_volume **out, char **skipped,
			  struct err *e);
/*
 * server_volume_update, then the reconciler's pass of the volume written
 * on the calling thread at once, when a worker would take it now
 * (reconciler_run_published, telling pub: NULL for nothing); *out is
 * then the volume as that pass left it.
 */
int server_volume_update_run(struct server *s, const char *id, server_volume_fn fn, void *arg,
			     const struct reconciler_published *pub, struct arena *a,
			     struct model_volume **out, struct err *e);
int server_snapshot_update(struct server *s, const char *id, server_snapshot_fn fn, void *arg,
			   struct arena *a, struct model_snapshot **out, struct err *e);

/* Store reads and writes of model objects (decoded into a; store indexes set). */
int server_get_volume(struct server *s, const char *id, struct arena *a, struct model_volume **out,
		      struct err *e);
int server_get_snapshot(struct server *s, const char *id, struct arena *a,
			struct model_snapshot **out, struct err *e);
int server_get_node(struct server *s, const char *id, struct arena *a, struct model_node **out,
		    struct err *e);
/* Writes v with the condition expect (0: must not exist); *index the new index. */
int server_put_volume(struct server *s, const struct model_volume *v, uint64_t expect,
		      uint64_t *index, struct err *e);
int server_put_snapshot(struct server *s, const struct model_snapshot *snap, uint64_t expect,
			uint64_t *index, struct err *e);
int server_put_node(struct server *s, const struct model_node *n, uint64_t expect, uint64_t *index,
		    struct err *e);

/* Every node of the store (paged through), in ID order. */
int server_all_nodes(struct server *s, struct arena *a, struct model_node ***out, size_t *n,
		     uint64_t *index, struct err *e);

/* Sets the node's liveness: a heartbeat now (down false) or down. */
void server_live_seen(struct server *s, const char *id, bool down);
/* A heartbeat this server took itself (server_live_seen, and kept for the member record). */
void server_live_heard(struct server *s, const char *id);

/*
 * The store that writes go to: the leader's fenced view (server_leader.h)
 * on a thread inside server_fenced(true) ... (false) (server_tick,
 * the leader's workers), the store itself elsewhere (API requests, whose
 * writes any server may make).
 */
struct store *server_wstore(struct server *s);
void server_fenced(bool on);
/* The map entry of id, or NULL; s->mu held. */
struct server_live *server_live_find(struct server *s, const char *id);

/*
 * server_gc.c, the lost-claim collector. server_gc_report records the
 * allocations report a node's PUT carried (or that it carried none) at
 * the wall time now; call it after the PUT was accepted. A changed set
 * makes the next server_tick run a pass. server_gc_forget drops an
 * entry's report (the node went down; s->mu held); server_gc_live_free
 * frees what an entry's report holds. server_gc_pass runs one pass:
 * releases every claim the rules of server_gc.h say is lost.
 */
void server_gc_report(struct server *s, const struct model_node *node, int64_t now_ms);
void server_gc_forget(struct server_live *l);
void server_gc_live_free(struct server_live *l);
void server_gc_pass(struct server *s);
/*
 * The report rule on a server that does not lead: judges the claims of
 * the nodes whose reports it took itself and keeps those it finds lost in
 * s->lost_found (the member record carries them to the leader, whose
 * server_gc_pass checks each again before it releases it).
 */
void server_gc_follower_pass(struct server *s);
/* Frees lost[0..n) (malloc'd strings); NULL is a no-op. */
void server_gc_lost_free(struct server_member_lost *lost, size_t n);
/* Appends a malloc'd copy of f to *lost; false when out of memory. */
bool server_gc_lost_add(struct server_member_lost **lost, size_t *n, size_t *cap,
			const struct server_member_lost *f);

/*
 * The plugins view from every node and the local controllers (server_plugins.c),
 * sorted by ID; server_plugin_find looks one up (NULL: none).
 */
int server_plugins_collect(struct server *s, struct arena *a, struct server_plugin **out, size_t *n,
			   struct err *e);
const struct server_plugin *server_plugin_find(const struct server_plugin *p, size_t n,
					       const char *id);
/*
 * The plugins view's counts only (id, controller_required, the healthy,
 * expected and unknown counts; no instance, capability or version lists),
 * what schedulability needs: from the cached node part (s->pcache) plus
 * the local controllers, so no node record is decoded unless one changed.
 */
int server_plugins_summary(struct server *s, struct arena *a, struct server_plugin **out, size_t *n,
			   struct err *e);
/*
 * The nodes ready and down by their records' status (the leader writes
 * each transition), from the same cache: what a server that does not lead
 * counts, since its liveness map only knows the heartbeats it took.
 */
int server_plugins_node_counts(struct server *s, int *ready, int *down, struct err *e);
/* Reads node record n (NULL: none has the ID; borrowed, only during the call). */
typedef void (*server_node_use_fn)(void *arg, const struct model_node *n);
/*
 * Runs use(arg, record) on node id's record as the same cache holds it
 * decoded (as stored now: rebuilt first when a node changed), under the
 * cache's lock: a check of every node request reads no record. 0, or the
 * store's error (use is then not called).
 */
int server_plugins_node_use(struct server *s, const char *id, server_node_use_fn use, void *arg,
			    struct err *e);
/* server_pcache_build_fn of the plugins view (ctx unused). */
int server_plugins_build(void *ctx, struct model_node *const *nodes, size_t n, struct arena *a,
			 void **view, struct err *e);
/*
 * Fills the API-view fields of v: schedulable and plugin_health from the
 * plugins view p[0..n), status from the reconciler (strings in a).
 */
void server_volume_fill(struct server *s, struct model_volume *v, const struct server_plugin *p,
			size_t n, struct arena *a);

/*
 * server_status.c, the reconciler's statuses on every server. The status
 * of (kind, id): the reconciler's on the leader, else the leader's last
 * shared one (reconciler_status's contract). server_status_share: the
 * leader's statuses to share (at most SERVER_STATUS_SHARED_MAX, in a).
 * server_status_keep: a follower keeps those of the leader's record among
 * m[0..n).
 */
#define SERVER_STATUS_SHARED_MAX 500
#define SERVER_STATUS_ERR_MAX 256
int server_status_get(struct server *s, enum store_kind kind, const char *id, struct arena *a,
		      struct model_status *out);
int server_status_share(struct server *s, struct arena *a, struct server_member_status **out,
			size_t *n);
void server_status_keep(struct server *s, const struct server_member *m, size_t n);

/* Clamps a page size (0: default; at most SERVER_PER_PAGE_MAX). */
size_t server_per_page(size_t per_page);

#endif
