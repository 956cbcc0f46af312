/*
 * The control plane's core: the catalogue of volumes, snapshots, nodes
 * and plugins, and every operation the HTTP API offers on it. The HTTP
 * layer (src/api/server_api*.c) only translates between HTTP/JSON and
 * these calls; `csid server` and `csid dev` build one with a store and a
 * controller seam.
 *
 * Writes are compare-and-set on the store: read the object, check the
 * rules on what was read (model_claim.h), write on the index read, and
 * on CSID_ECONFLICT re-read and check again; so of 100 clients racing to
 * claim a single-writer volume exactly one wins and the others get the
 * conflict naming the holder. Every write enqueues the object in the
 * reconciler (the change-log follower would too; enqueueing at once
 * saves its latency).
 *
 * Nodes: server_node_put registers a node with its fingerprint and is its
 * heartbeat. Liveness is kept in memory with a TTL; only transitions
 * (registration, a changed fingerprint, ready <-> down) are written to the
 * store. server_tick() marks nodes whose heartbeat is older than the TTL
 * down (virtual time in tests), and runs the lost-claim pass (server_gc.h):
 * it releases a claim whose allocation the node's agent no longer reports,
 * and every claim of a node down for longer than node_grace. Plugins are derived from the node
 * fingerprints and the server's own controller plugins.
 *
 * Operator exits answer what they skipped in *skipped (a sentence, in
 * the arena, NULL when nothing was skipped).
 *
 * Results are allocated in the caller's arena, in the model's structs,
 * with the reconciler's status, schedulable and plugin_health filled in.
 * Thread-safety: every function may be called from any thread.
 */
#ifndef CSID_SERVER_SERVER_H
#define CSID_SERVER_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "model/model_claim.h"
#include "server/reconciler.h"
#include "server/server_history.h"
#include "server/server_leader.h"
#include "store/store.h"
#include "util/clock.h"
#include "util/err.h"

#define SERVER_NODE_TTL_MS 30000
/* How long a node may stay down before its claims are released (server_gc.h). */
#define SERVER_NODE_GRACE_MS (5 * 60 * 1000)
/* Bounds of the period of the lost-claim pass. */
#define SERVER_GC_PERIOD_MIN_MS 100
#define SERVER_GC_PERIOD_MAX_MS 10000
#define SERVER_PER_PAGE_DEFAULT 100
#define SERVER_PER_PAGE_MAX 1000

/* Health of the server's own controller plugins (for the plugins view). */
struct server_local_controller {
	const char *plugin_id;
	bool healthy;
	const char *health;
	const char *version;
	uint64_t controller_caps;
};

struct server_config {
	struct store *store; /* borrowed, required */
	struct reconciler_controllers controllers; /* required */
	struct clock *clock; /* NULL: real */
	int workers; /* reconciler; 0: default */
	int64_t backoff_min_ms, backoff_max_ms, rpc_timeout_ms; /* 0: defaults */
	int plugin_concurrency; /* 0: 1 */
	int64_t node_ttl_ms; /* 0: SERVER_NODE_TTL_MS */
	int64_t node_grace_ms; /* 0: SERVER_NODE_GRACE_MS */
	/*
	 * Snapshot of the server's own controller plugins (optional): fills
	 * n entries of out (at most cap) and returns n. Thread-safe.
	 */
	size_t (*local_controllers)(void *ctx, struct server_local_controller *out, size_t cap,
				    struct arena *a);
	void *local_controllers_ctx;
	bool manual_reconciler; /* tests: the caller steps server_reconciler() */
	/* Leadership among the servers of one shared store (server_leader.h). */
	const char *server_id; /* NULL: "<hostname>-<random>" */
	const char *address; /* the API address members show; NULL: "" */
	int64_t leader_ttl_ms; /* 0: SERVER_LEADER_TTL_MS */
	int64_t compact_ms; /* the store history the leader keeps; 0: its default, < 0: all */
};

struct server;
struct server_install;
struct server_install_settings;

int server_new(const struct server_config *cfg, struct server **out, struct err *e);
/* Starts the reconciler threads (unless manual_reconciler). */
int server_start(struct server *s, struct err *e);
/* Stops the reconciler (drains steps in flight), then frees; NULL is a no-op. */
void server_free(struct server *s);
struct reconciler *server_reconciler(struct server *s);
struct store *server_store(struct server *s);
/*
 * The installation record as stored now (server_install.h): 0, or
 * CSID_ENOTFOUND / CSID_EPROTO / a store error with e set.
 */
int server_installation(struct server *s, struct server_install *out, struct err *e);
/*
 * The cluster-wide settings this server runs with, defaults resolved: the
 * record's when it started, so they differ from the record's only after
 * another server rewrote it (`csid server -update-settings`) and until
 * this one restarts.
 */
void server_settings(struct server *s, struct server_install_settings *out);
/*
 * Writes this server's member record when due (the heartbeats it took,
 * server_leader.h); on the leader only, also counts the other members'
 * heartbeats, marks nodes down whose heartbeat is older than the TTL and
 * runs the lost-claim pass when it is due, every write fenced. Returns
 * when next due (monotonic).
 */
int64_t server_tick(struct server *s);

/* Who leads (GET /v1/status/leader). */
void server_leader_info(struct server *s, struct server_leader_status *out);
/* Every server of the installation, which one leads (strings in a). */
int server_members(struct server *s, struct arena *a, struct server_member **out, size_t *n,
		   struct err *e);

/* --- volumes --- */

/* Registers an existing volume (spec->external_id set): validated, then
 * recorded in state registering. CSID_EEXIST when the ID is taken by a
 * different spec (the same spec again is idempotent). */
int server_volume_register(struct server *s, const struct model_volume *spec, struct arena *a,
			   struct model_volume **out, struct err *e);
/* Records a volume to create (state creating); idempotent as register. */
int server_volume_create(struct server *s, const struct model_volume *spec, struct arena *a,
			 struct model_volume **out, struct err *e);
int server_volume_get(struct server *s, const char *id, struct arena *a, struct model_volume **out,
		      struct err *e);
/*
 * server_volume_get with the volume's past claims in past_claims: its
 * claim history (server/server_pastclaims.h), the last MODEL_PAST_CLAIMS_MAX.
 */
int server_volume_get_history(struct server *s, const char *id, struct arena *a,
			      struct model_volume **out, struct err *e);

struct server_volume_filter {
	const char *plugin_id; /* NULL: any */
	const char *node_id; /* volumes with a claim or publication on this node */
	const char *prefix;
	size_t per_page; /* 0: SERVER_PER_PAGE_DEFAULT; capped at SERVER_PER_PAGE_MAX */
	const char *next_token; /* from a previous page, NULL: first */
};

/* One page, ID order; *next_token (in a) NULL on the last page; *index the
 * store index the page was read at. */
int server_volume_list(struct server *s, const struct server_volume_filter *f, struct arena *a,
		       struct model_volume ***out, size_t *n, char **next_token, uint64_t *index,
		       struct err *e);
/* DeleteVolume then deregister: state deleting. CSID_ECONFLICT naming the
 * holders while a claim is claimed; claims being released are let finish
 * first by the reconciler (so a delete right after an unmount works). */
int server_volume_delete(struct server *s, const char *id, struct arena *a,
			 struct model_volume **out, struct err *e);
/* Removes the record. Without force: CSID_ECONFLICT while claimed or
 * published. With force: removes it anyway, *skipped says what. */
int server_volume_deregister(struct server *s, const char *id, bool force, struct arena *a,
			     char **skipped, struct err *e);
/*
 * Claims volume id for req->alloc_id on req->node_id (model_claim.h's
 * rules; granted again when the allocation holds the same claim). A
 * request without an access mode (MODEL_ACCESS_UNKNOWN) takes the
 * volume's first capability. *out: the volume as written.
 */
int server_volume_claim(struct server *s, const char *id, const struct model_claim_request *req,
			struct arena *a, struct model_volume **out, struct err *e);
/*
 * server_volume_claim; attach_default: the request named no attachment
 * mode, so it takes the one of the volume's first capability with the
 * request's access mode (file-system when none has it). A request without
 * an access mode that names an attachment mode takes the access mode of
 * the volume's first capability with that attachment mode (else of its
 * first one).
 */
int server_volume_claim_default(struct server *s, const char *id,
				const struct model_claim_request *req, bool attach_default,
				struct arena *a, struct model_volume **out, struct err *e);

/*
 * server_volume_claim_default, then, when the claim was written, the
 * volume's next reconciler pass on the calling thread at once if a
 * reconciler worker would take it now (reconciler_run): a claim that
 * waits for its node's publication so has ControllerPublishVolume made
 * without a hand-off to a worker and back. *out is the volume as that
 * pass left it. When the pass cannot run here (this server does not
 * lead, a worker has the volume), a worker takes it as after any write.
 *
 * published (NULL: none) is called, with ctx, when that pass has made
 * ControllerPublishVolume succeed for the claim's node, before the
 * pass writes the publication: v is the volume as it is about to be
 * written, as server_volume_get shows it (the publication published,
 * with its context; modify_index the claim's write), in a, for the
 * call's time only. The caller may answer its client from it at once:
 * the write may fail afterwards, but the claim is written already and a
 * publication the store still shows publishing is published again while
 * the node is claimed and unpublished once it is not
 * (reconciler_published), so what the client was told holds.
 */
typedef void (*server_claim_published_fn)(void *ctx, struct model_volume *v);
int server_volume_claim_run(struct server *s, const char *id, const struct model_claim_request *req,
			    bool attach_default, server_claim_published_fn published, void *ctx,
			    struct arena *a, struct model_volume **out, struct err *e);

/* Where an active claim stands for its node's mount. */
enum server_claim_progress {
	SERVER_CLAIM_PUBLISHING, /* ControllerPublishVolume to the node not done yet */
	SERVER_CLAIM_PUBLISHED, /* published: the publish context is recorded */
	SERVER_CLAIM_NO_PUBLICATION, /* the plugin needs no ControllerPublishVolume */
};

/*
 * Where alloc_id's claim on v (a volume as read) stands for node_id.
 * Returns 0 and *out, or CSID_ENOTFOUND (with the claim's note) when
 * alloc_id holds no claimed claim on node_id any more, or another code.
 */
int server_volume_claim_progress(struct server *s, const struct model_volume *v,
				 const char *alloc_id, const char *node_id,
				 enum server_claim_progress *out, struct err *e);
/* The node side of alloc's claim is done: claimed -> node-unpublished. With
 * force: freed at once, skipping the controller unpublish (*skipped). */
int server_volume_release(struct server *s, const char *id, const char *alloc_id, bool force,
			  struct arena *a, struct model_volume **out, char **skipped,
			  struct err *e);
/* Longest reason of a release. */
#define SERVER_RELEASE_REASON_MAX 400
/*
 * server_volume_release with why the node released it (a claim owner
 * gone: "owner pid 1234 exited"; at most SERVER_RELEASE_REASON_MAX
 * bytes, one line; NULL: none): the claim's note reads "released: <reason>".
 */
int server_volume_release_why(struct server *s, const char *id, const char *alloc_id, bool force,
			      const char *reason, struct arena *a, struct model_volume **out,
			      char **skipped, struct err *e);
/* Every claim on node_id -> node-unpublished (the operator asserts the
 * node no longer uses it); the reconciler then unpublishes and frees. */
int server_volume_detach(struct server *s, const char *id, const char *node_id, struct arena *a,
			 struct model_volume **out, char **skipped, struct err *e);
/*
 * Asks for capacity_min bytes (ControllerExpandVolume by the reconciler).
 * CSID_EINVAL below the volume's capacity (volumes do not shrink) or over
 * capacity_max; CSID_EPRECOND when the volume is not ready, or when the
 * plugins view already shows that its plugin cannot expand (a controller
 * without EXPAND_VOLUME, or no controller service at all). The capacity it
 * has, or the change already pending, is a no-op.
 */
int server_volume_expand(struct server *s, const char *id, int64_t capacity_min, struct arena *a,
			 struct model_volume **out, struct err *e);
/*
 * Node node_id grew volume id on the node to capacity bytes
 * (NodeExpandVolume done, or not offered by its node plugin): its active
 * claims are marked node_expanded, and once every claimed claim is,
 * node_expansion_required is cleared (with the marks). A report while
 * nothing is required, or for less than the volume's capacity (an older
 * expand), changes nothing. CSID_EPRECOND when the node holds no claim.
 */
int server_volume_node_expanded(struct server *s, const char *id, const char *node_id,
				int64_t capacity, struct arena *a, struct model_volume **out,
				struct err *e);
/*
 * Drops the pending changes (expand and modify) the reconciler has not
 * done yet; *skipped says which. CSID_EPRECOND when none is pending. A
 * change whose RPC is in flight still lands: its outcome is recorded.
 */
int server_volume_cancel(struct server *s, const char *id, struct arena *a,
			 struct model_volume **out, char **skipped, struct err *e);
int server_volume_modify(struct server *s, const char *id, const struct model_map *mutable_params,
			 struct arena *a, struct model_volume **out, struct err *e);

/* --- snapshots --- */

/* spec: id, volume_id, optional name, parameters, secrets. */
int server_snapshot_create(struct server *s, const struct model_snapshot *spec, struct arena *a,
			   struct model_snapshot **out, struct err *e);
int server_snapshot_get(struct server *s, const char *id, struct arena *a,
			struct model_snapshot **out, struct err *e);
int server_snapshot_delete(struct server *s, const char *id, struct arena *a,
			   struct model_snapshot **out, struct err *e);
/* volume_id NULL: all; pagination as volumes. */
int server_snapshot_list(struct server *s, const char *volume_id, const char *prefix,
			 size_t per_page, const char *next_token, struct arena *a,
			 struct model_snapshot ***out, size_t *n, char **next_token_out,
			 uint64_t *index, struct err *e);

/* --- nodes and plugins --- */

/* Registration and heartbeat; node->id required. *out the stored view. */
int server_node_put(struct server *s, const struct model_node *node, struct arena *a,
		    struct model_node **out, struct err *e);
/*
 * Whether the agent that presented instance (its X-Csid-Node-Instance
 * header; NULL: an operator's request, not checked) may make request
 * `what` ("claim", "release", "node-stage") for node_id: the node must be
 * registered by that very instance (CSID_EPERM when another instance
 * holds it or it has none; when it is unknown, CSID_EPERM, or
 * CSID_EPRECOND with live). With live, the node must also be ready
 * (CSID_EPRECOND when down: its agent heartbeats again soon). Refusals
 * are logged and name instance tags, never instance IDs.
 */
int server_node_instance_check(struct server *s, const char *node_id, const char *instance,
			       const char *what, bool live, struct err *e);
int server_node_get(struct server *s, const char *id, struct arena *a, struct model_node **out,
		    struct err *e);
int server_node_list(struct server *s, struct arena *a, struct model_node ***out, size_t *n,
		     uint64_t *index, struct err *e);
/*
 * Every node record of store st (paged through), in ID order, decoded
 * into a; *index (when not NULL) the store's index at the first page. A
 * damaged record fails the call (CSID_EPROTO naming the node). Thread-safe
 * as the store is; for the server core and the controllers behind agents.
 */
int server_store_nodes(struct store *st, struct arena *a, struct model_node ***out, size_t *n,
		       uint64_t *index, struct err *e);

struct server_plugin_instance {
	char *node_id; /* NULL for the server's own controller */
	enum model_plugin_type type;
	bool healthy;
	char *health;
	char *version;
};

struct server_plugin {
	char *id;
	bool controller_required; /* a controller advertises PUBLISH_UNPUBLISH_VOLUME */
	int controllers_healthy, controllers_expected;
	/* Controllers not healthy that reported no capabilities (not fingerprinted yet). */
	int controllers_unknown;
	int nodes_healthy, nodes_expected;
	char **versions;
	size_t nversions;
	char **controller_caps; /* names */
	size_t ncontroller_caps;
	char **node_caps;
	size_t nnode_caps;
	struct server_plugin_instance *instances;
	size_t ninstances;
};

int server_plugin_list(struct server *s, struct arena *a, struct server_plugin **out, size_t *n,
		       struct err *e);
int server_plugin_get(struct server *s, const char *id, struct arena *a, struct server_plugin **out,
		      struct err *e);

/*
 * A value that changes whenever the reconciler's status of (kind, id)
 * changes (attempts, next attempt, last error), so a blocking query can
 * wake on a retry that failed again, which writes nothing to the store.
 */
uint64_t server_status_stamp(struct server *s, enum store_kind kind, const char *id);

/* Queued and failing reconciler items, store index, nodes ready/down. */
struct server_health {
	uint64_t index;
	int queued, failing;
	int nodes_ready, nodes_down;
	const char *store_backend;
};
void server_health(struct server *s, struct server_health *out);

/*
 * The reconciler's queue over the last minutes, as server_start's ticker
 * samples it (server_history.h): copies the samples into out (room for
 * SERVER_HISTORY_SAMPLES), oldest first, sets *now_ms to the server
 * clock's time they are measured against; returns how many. None before
 * server_start, nor with manual_reconciler.
 */
size_t server_reconciler_history(struct server *s, struct server_history_sample *out,
				 int64_t *now_ms);

#endif
