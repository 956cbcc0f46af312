/*
 * Instance manager: watches one registered plugin instance for the plugin
 * manager. It connects to the instance's endpoint through an injected
 * connect function, fingerprints it (GetPluginInfo, GetPluginCapabilities,
 * then ControllerGetCapabilities for a controller, or NodeGetCapabilities
 * and NodeGetInfo for a node plugin), probes its health (Probe), and
 * re-fingerprints on a timer. Every RPC has a deadline (rpc_timeout_ms).
 *
 * The core is stepped: instance_manager_step(im) does the work that is
 * due at the clock's current time (running blocking RPCs without holding
 * the manager's lock) and returns when the next work is due. Tests call it
 * directly on virtual time; instance_manager_start() runs the same loop on
 * a thread of its own, waiting on the clock until the next due time or a
 * stop request.
 *
 * The connection is shared by reference (struct plugin_ref): a holder can
 * keep running RPCs on it after the manager stopped or was replaced; the
 * client is freed when the manager and every holder released it.
 */
#ifndef CSID_PLUGINS_INSTANCE_MANAGER_H
#define CSID_PLUGINS_INSTANCE_MANAGER_H

#include <stdbool.h>
#include <stdint.h>

#include "plugins/registry.h"
#include "csi/csi_client.h"
#include "util/clock.h"
#include "util/err.h"

#define PLUGIN_TOPOLOGY_MAX 32 /* accessible topology segments kept */
#define PLUGIN_TOPOLOGY_KEY_MAX 256 /* segment key, including NUL */
#define PLUGIN_TOPOLOGY_VALUE_MAX 128
#define PLUGIN_VERSION_MAX 128
#define PLUGIN_NODE_ID_MAX 256
#define PLUGIN_HEALTH_DESC_MAX 512

/* Default timings (ms). */
#define INSTANCE_MANAGER_PROBE_INTERVAL_MS 30000
#define INSTANCE_MANAGER_FINGERPRINT_INTERVAL_MS 60000
#define INSTANCE_MANAGER_RPC_TIMEOUT_MS 15000
/*
 * While a plugin is down (a connect, fingerprint or Probe failed) it is
 * retried after a delay doubling from INSTANCE_MANAGER_RETRY_MIN_MS up to
 * a cap (default INSTANCE_MANAGER_RETRY_MAX_MS), each drawn in [3/4 d, d]
 * (jitter, so that plugins that failed together do not retry together),
 * and back to the minimum after a success.
 */
#define INSTANCE_MANAGER_RETRY_MIN_MS 100
#define INSTANCE_MANAGER_RETRY_MAX_MS 30000

struct plugin_topology_segment {
	char key[PLUGIN_TOPOLOGY_KEY_MAX];
	char value[PLUGIN_TOPOLOGY_VALUE_MAX];
};

/*
 * What a plugin told about itself. Capability sets are bit masks indexed by
 * the CSI enum values: bit (1 << CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__
 * STAGE_UNSTAGE_VOLUME) of node_caps, and so on.
 */
struct plugin_fingerprint {
	char plugin_name[REGISTRY_NAME_MAX]; /* GetPluginInfo name */
	char vendor_version[PLUGIN_VERSION_MAX];
	/* GetPluginCapabilities: bits of PluginCapability.Service.Type. */
	uint32_t plugin_caps;
	/* bits of PluginCapability.VolumeExpansion.Type */
	uint32_t expansion_caps;
	/* ControllerGetCapabilities (controller plugins): bits of its RPC.Type. */
	uint64_t controller_caps;
	/* NodeGetCapabilities (node plugins): bits of its RPC.Type. */
	uint64_t node_caps;
	/* Shorthand for node_caps & STAGE_UNSTAGE_VOLUME. */
	bool stage_unstage;
	/* Shorthand for node_caps & EXPAND_VOLUME. */
	bool node_expand;
	/* NodeGetInfo (node plugins). */
	char node_id[PLUGIN_NODE_ID_MAX];
	int64_t max_volumes; /* 0: no limit given */
	struct plugin_topology_segment topology[PLUGIN_TOPOLOGY_MAX];
	int ntopology; /* sorted by key */
};

/* Names of capability bits, for the API and logs ("STAGE_UNSTAGE_VOLUME"). */
const char *plugin_node_cap_name(int bit);
const char *plugin_controller_cap_name(int bit);
const char *plugin_service_cap_name(int bit);

struct plugin_health {
	bool healthy;
	char description[PLUGIN_HEALTH_DESC_MAX]; /* "healthy" or why not */
	int64_t changed_ms; /* wall clock of the last change of healthy */
};

enum instance_manager_state {
	INSTANCE_MANAGER_CONNECTING, /* no client yet (or connect failing) */
	INSTANCE_MANAGER_FINGERPRINTING, /* connected, no good fingerprint yet */
	INSTANCE_MANAGER_RUNNING, /* fingerprinted; health from Probe */
	INSTANCE_MANAGER_STOPPED, /* stop requested; does nothing more */
};

/* "connecting", "fingerprinting", "running", "stopped". */
const char *instance_manager_state_name(enum instance_manager_state s);

/* A copy of a manager's state. */
struct instance_manager_status {
	enum registry_type type;
	char name[REGISTRY_NAME_MAX];
	struct registry_instance instance;
	enum instance_manager_state state;
	bool fingerprinted; /* a fingerprint succeeded at least once */
	struct plugin_fingerprint fingerprint;
	struct plugin_health health;
	int64_t last_probe_ms; /* wall clock of the last Probe answer; 0: none */
	/* Failed attempts in a row (connect, fingerprint, Probe); 0 after a success. */
	unsigned attempts;
	int64_t retry_delay_ms; /* attempts > 0: the delay before the next attempt */
	int64_t next_attempt_ms; /* attempts > 0: wall clock of the next attempt */
};

/*
 * Opens a client for endpoint. Returns 0 and *out (owned by the caller,
 * freed with csi_client_free), or a negative code with e set.
 * The real one is plugin_manager's wrapper of csi_client_grpc_new.
 */
typedef int (*instance_manager_connect_fn)(void *ctx, const char *endpoint, struct csi_client **out,
					   struct err *e);

struct instance_manager;

/*
 * Called after a step changed the manager's health, fingerprint, state or
 * count of failed attempts (so once per failed retry while a plugin is down),
 * on the thread that ran the step, with no lock held. old and cur are
 * copies valid during the call. Must not free the manager.
 */
typedef void (*instance_manager_change_cb)(void *ctx, struct instance_manager *im,
					   const struct instance_manager_status *old,
					   const struct instance_manager_status *cur);

struct instance_manager_config {
	enum registry_type type;
	const char *name; /* copied */
	const struct registry_instance *instance; /* copied */
	struct clock *clock; /* borrowed; NULL: real clock */
	instance_manager_connect_fn connect; /* required */
	void *connect_ctx;
	instance_manager_change_cb on_change; /* optional */
	void *on_change_ctx;
	int64_t probe_interval_ms; /* 0: default */
	int64_t fingerprint_interval_ms; /* 0: default */
	int64_t rpc_timeout_ms; /* 0: default */
	int64_t retry_max_ms; /* cap of the retry delay; 0: INSTANCE_MANAGER_RETRY_MAX_MS */
	/* Randomness for the retry jitter; NULL: an internal generator. */
	uint64_t (*random)(void *ctx);
	void *random_ctx;
};

/*
 * Creates a manager in state CONNECTING; its first step is due at once.
 * Returns 0 and *out, or CSID_EINVAL / CSID_ENOMEM with e set.
 */
int instance_manager_new(const struct instance_manager_config *cfg, struct instance_manager **out,
			 struct err *e);

/*
 * Runs the work due at the clock's now: connect, fingerprint, probe.
 * Returns the clock time (now_ms) when the next work is due, CLOCK_NEVER
 * once stopped. Must not be called from two threads at once nor while the
 * manager's own thread runs.
 */
int64_t instance_manager_step(struct instance_manager *im);

/* Starts a thread that steps the manager until it is stopped. 0 or CSID_ENOMEM. */
int instance_manager_start(struct instance_manager *im, struct err *e);

/*
 * Asks the manager to stop: no new RPC starts afterwards (one in flight
 * finishes within its deadline). Does not block. Idempotent.
 */
void instance_manager_stop(struct instance_manager *im);

/* True when stopped and its thread (if any) has finished its last step. */
bool instance_manager_done(struct instance_manager *im);

/* Stops the manager and waits for its thread (if any) to finish. */
void instance_manager_join(struct instance_manager *im);

/*
 * Frees the manager (stops and joins it first). Clients handed out as
 * plugin_refs stay valid until released. NULL is a no-op.
 */
void instance_manager_free(struct instance_manager *im);

/* Copies the manager's state into *out. */
void instance_manager_status(struct instance_manager *im, struct instance_manager_status *out);

/*
 * A counted reference on a plugin instance's client, with a copy of its
 * fingerprint at the time of the call. Run RPCs on client while holding
 * it, even if the instance is replaced or stopped meanwhile; then
 * plugin_ref_release(). A zeroed plugin_ref holds nothing.
 */
struct plugin_ref {
	struct csi_client *client; /* valid until plugin_ref_release */
	enum registry_type type;
	char name[REGISTRY_NAME_MAX];
	struct registry_instance instance;
	struct plugin_fingerprint fingerprint;
	struct plugin_health health;
	void *conn_; /* internal: the counted connection */
};

/*
 * Takes a reference on the manager's client. Returns 0, or CSID_EUNAVAIL
 * with e naming the state when the manager is not connected and
 * fingerprinted (or is stopped).
 */
int instance_manager_ref(struct instance_manager *im, struct plugin_ref *out, struct err *e);

/* Releases what ref holds (client and connection become NULL: a second release is safe); safe on a
 * zeroed ref. */
void plugin_ref_release(struct plugin_ref *ref);

#endif
