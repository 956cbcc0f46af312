/*
 * Plugin manager: keeps one instance manager (instance_manager.h) per
 * registered plugin (type, name), for the plugin's active instance. It is
 * driven by the registry's events and, to repair any missed event, by a
 * full resync on a timer (30 s default): both only mark names to look at;
 * a step then compares, for each marked name, the registry's active
 * instance with the managed one (level-triggered):
 *   - a name with an active instance and no manager: start one;
 *   - the active instance changed: stop the old manager, start a new one;
 *   - no instance left: stop the manager.
 *
 * Virtual time: plugin_manager_step() does everything that is due at the
 * clock's now (events, resync, and, unless the manager runs threads, the
 * instance managers' own work, whose RPCs block on the client) and returns
 * when the next work is due. Tests step it on a fake clock without
 * sleeping. plugin_manager_start() runs the same core on real threads: one
 * thread for the manager, plus one per instance manager so a hanging
 * plugin never delays the others.
 *
 * Thread-safety: the query functions (snapshot, wait_for_plugin,
 * mounter_for_plugin, plugin_manager_notify) may be called from any
 * thread. plugin_manager_step must be called from one thread only, and
 * not after plugin_manager_start.
 */
#ifndef CSID_PLUGINS_PLUGIN_MANAGER_H
#define CSID_PLUGINS_PLUGIN_MANAGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plugins/instance_manager.h"
#include "plugins/registry.h"
#include "util/clock.h"
#include "util/err.h"

#define PLUGIN_MANAGER_RESYNC_MS 30000

struct plugin_manager;

/*
 * Health (or state) of a managed plugin changed; for logging. Runs on the
 * thread that stepped the instance manager, with no lock held; old and
 * cur are copies valid during the call. Must not call
 * plugin_manager_shutdown/free.
 */
typedef void (*plugin_manager_health_cb)(void *ctx, const struct instance_manager_status *old,
					 const struct instance_manager_status *cur);

struct plugin_manager_config {
	struct registry *registry; /* borrowed, required */
	struct clock *clock; /* borrowed; NULL: real clock */
	/* How instance managers open a client; NULL: plugin_manager_connect_grpc. */
	instance_manager_connect_fn connect;
	void *connect_ctx;
	plugin_manager_health_cb on_health; /* optional */
	void *on_health_ctx;
	int64_t resync_ms; /* 0: PLUGIN_MANAGER_RESYNC_MS */
	int64_t probe_interval_ms; /* 0: instance manager default */
	int64_t fingerprint_interval_ms; /* 0: instance manager default */
	int64_t rpc_timeout_ms; /* 0: instance manager default */
	int64_t retry_max_ms; /* cap of the retry delay of a down plugin; 0: default */
	/* Randomness for the retry jitter; NULL: each manager's own generator. */
	uint64_t (*random)(void *ctx);
	void *random_ctx;
	/*
	 * Tests: do not subscribe to the registry; events come only from
	 * plugin_manager_notify (so a test can "lose" one), plus the resync.
	 */
	bool manual_events;
};

/* The real connect: csi_client_grpc_new(endpoint). ctx unused. */
int plugin_manager_connect_grpc(void *ctx, const char *endpoint, struct csi_client **out,
				struct err *e);

/* Default deadline of plugin_manager_probe_grpc (ms). */
#define PLUGIN_MANAGER_PROBE_MS 2000

/*
 * A registry_probe_cb for registry_prune() after registry_restore(): opens
 * a gRPC client on the instance's endpoint and sends Probe. Returns false
 * (dead) when the endpoint is invalid or the call fails at the transport
 * (UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED); any answer, even "not
 * ready", means the instance is alive and left to its instance manager.
 * ctx: NULL or a pointer to an int64_t deadline in ms
 * (default PLUGIN_MANAGER_PROBE_MS).
 */
bool plugin_manager_probe_grpc(void *ctx, enum registry_type type, const char *name,
			       const struct registry_instance *inst);

/*
 * Creates a manager and subscribes it to the registry (unless
 * manual_events). The first step does a full resync, so plugins restored
 * into the registry before are picked up. Returns 0 and *out or a negative
 * code with e set.
 */
int plugin_manager_new(const struct plugin_manager_config *cfg, struct plugin_manager **out,
		       struct err *e);

/*
 * Marks (type, name) to be reconciled at the next step, as a registry event
 * does. Thread-safe.
 */
void plugin_manager_notify(struct plugin_manager *pm, enum registry_type type, const char *name);

/*
 * Processes pending events, the resync when due, and (when not started)
 * the due work of every instance manager. Returns the clock time when the
 * next work is due (CLOCK_NEVER after shutdown).
 */
int64_t plugin_manager_step(struct plugin_manager *pm);

/*
 * Runs the manager on threads (see above), on the manager's clock.
 * Returns 0 or a negative code with e set.
 */
int plugin_manager_start(struct plugin_manager *pm, struct err *e);

/*
 * Stops every instance manager in parallel and blocks until all are done
 * (each finishes at most its RPC in flight, bounded by its deadline), and
 * stops the manager's thread. Unsubscribes from the registry. Afterwards
 * queries report no plugin. Idempotent.
 */
void plugin_manager_shutdown(struct plugin_manager *pm);

/* Shuts down (if not yet) and frees. NULL is a no-op. */
void plugin_manager_free(struct plugin_manager *pm);

/*
 * Blocks until plugin (type, name) is fingerprinted and healthy on the
 * instance the registry has active now (not while a replacement is still
 * on its way to its manager), or timeout_ms passed on the manager's
 * clock. Returns 0 (and a copy of its status in *out when out is not
 * NULL), or CSID_ETIMEDOUT with e naming the state it was last in
 * ("plugin node/hostpath: not registered", "...: instance i-2
 * fingerprinting: GetPluginInfo: DEADLINE_EXCEEDED ...", "...: unhealthy:
 * Probe: not ready", "...: instance i-1 is being replaced by i-2"), or
 * CSID_ECANCELED after shutdown.
 */
int plugin_manager_wait_for_plugin(struct plugin_manager *pm, enum registry_type type,
				   const char *name, int64_t timeout_ms,
				   struct instance_manager_status *out, struct err *e);

/*
 * For the mounter: a counted reference on the node plugin name's client
 * and a copy of its fingerprint (stage_unstage, node_caps, node_id, ...).
 * Returns 0, CSID_ENOTFOUND (no node plugin of that name is registered),
 * or CSID_EUNAVAIL (registered but not yet connected and fingerprinted, or
 * shut down), with e set. It does not wait: call
 * plugin_manager_wait_for_plugin first for a bounded wait. The reference
 * is given even while the plugin is unhealthy (ref.health says so).
 * Release with plugin_ref_release().
 */
int plugin_manager_mounter_for_plugin(struct plugin_manager *pm, const char *name,
				      struct plugin_ref *out, struct err *e);

/*
 * The same for any plugin type: a counted reference on the client of the
 * active instance of (type, name) and a copy of its fingerprint, e.g. a
 * controller plugin's for an RPC the server asks the agent to run.
 * Returns 0, CSID_ENOTFOUND or CSID_EUNAVAIL as above.
 */
int plugin_manager_ref(struct plugin_manager *pm, enum registry_type type, const char *name,
		       struct plugin_ref *out, struct err *e);

/* One plugin in a snapshot (for GET /v1/agent/plugins). */
struct plugin_manager_plugin {
	enum registry_type type;
	char name[REGISTRY_NAME_MAX];
	/* From the registry: oldest first; the last is active (may be empty). */
	struct registry_instance *instances;
	size_t ninstances;
	/* The instance manager of the active instance, if one runs. */
	bool managed;
	struct instance_manager_status status;
};

struct plugin_manager_snapshot {
	struct plugin_manager_plugin *plugins; /* sorted by type, then name */
	size_t nplugins;
};

/*
 * Copies every plugin known to the registry or managed, with its
 * instances, managed instance, health and fingerprint. Returns 0 and *out
 * (free with plugin_manager_snapshot_free) or CSID_ENOMEM.
 */
int plugin_manager_snapshot(struct plugin_manager *pm, struct plugin_manager_snapshot *out,
			    struct err *e);
void plugin_manager_snapshot_free(struct plugin_manager_snapshot *s);

#endif
