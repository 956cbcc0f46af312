/*
 * Dynamic plugin registry of the agent: plugin type (controller | node) ->
 * plugin name -> instances. Each instance has an instance ID (unique per
 * type and name), the plugin's endpoint (its unix socket), the wall time it
 * registered and a sequence number that grows with every registration. The
 * instance with the highest sequence number (the most recently registered
 * one) is the active one; older instances stay listed until they
 * deregister, so that during an update the old and the new instance of a
 * plugin can overlap without one removing the other. Deregistering an
 * instance removes that instance only: removing an older instance never
 * touches the newer active one, and removing the active instance makes the
 * next newest (if any) active.
 *
 * A monolith plugin is two registrations with the same name and instance:
 * one controller, one node (registry_register_monolith).
 *
 * Persistence: when the registry has a database, every change is written
 * to the table registry_instances (schema module "registry") before it is
 * applied in memory; a change whose write fails is not applied and returns
 * the error. registry_restore() loads the table at start; the caller then
 * probes each restored instance (registry_prune) and drops the dead ones.
 *
 * Thread-safety: every function may be called from any thread. Snapshots
 * and lookups return copies owned by the caller.
 *
 * Events: subscribers (per type) get a Registered or Deregistered event
 * for each change of that type, in the order of the changes. Callbacks run
 * on the thread that called registry_register/registry_deregister (or the
 * monolith and prune helpers), after the change is complete and persisted,
 * with the registry's state lock released, and before that call returns.
 * Changes are serialized while their events are delivered, so a callback
 * may read the registry (registry_snapshot, registry_active) but must not
 * change it nor (un)subscribe, which would deadlock. Keep callbacks short
 * (queue the work and return).
 */
#ifndef CSID_PLUGINS_REGISTRY_H
#define CSID_PLUGINS_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "util/clock.h"
#include "util/err.h"

/* Limits, including the terminating NUL. */
#define REGISTRY_NAME_MAX 129 /* plugin name: 1..128 bytes */
#define REGISTRY_INSTANCE_MAX 129 /* instance ID: 1..128 bytes */
#define REGISTRY_ENDPOINT_MAX 256 /* endpoint: 1..255 bytes */

enum registry_type { REGISTRY_CONTROLLER = 0, REGISTRY_NODE = 1, REGISTRY_TYPE_COUNT };

/* "controller" or "node"; "unknown" out of range. */
const char *registry_type_name(enum registry_type type);
/* Parses "controller" or "node"; returns the type or -1. */
int registry_type_parse(const char *s);

struct registry_instance {
	char instance_id[REGISTRY_INSTANCE_MAX];
	char endpoint[REGISTRY_ENDPOINT_MAX];
	int64_t registered_ms; /* wall clock (Unix ms) from the registry's clock */
	uint64_t seq; /* registration order; the highest is active */
};

/* One plugin (type + name) in a snapshot. */
struct registry_plugin {
	enum registry_type type;
	char name[REGISTRY_NAME_MAX];
	/* Oldest first; the last one is the active instance. Never empty. */
	struct registry_instance *instances;
	size_t ninstances;
};

struct registry_snapshot {
	/* Sorted by type, then name. */
	struct registry_plugin *plugins;
	size_t nplugins;
};

enum registry_event_kind {
	REGISTRY_EVENT_REGISTERED,
	REGISTRY_EVENT_DEREGISTERED,
};

struct registry_event {
	enum registry_event_kind kind;
	enum registry_type type;
	const char *name; /* valid during the callback only */
	struct registry_instance instance; /* the instance (de)registered */
	/* Active instance of the plugin after the change, if any remains. */
	bool has_active;
	struct registry_instance active;
};

typedef void (*registry_event_cb)(void *ctx, const struct registry_event *ev);

struct registry;

/*
 * Creates an empty registry. clock: borrowed, for registration times
 * (NULL: the real clock). db: borrowed connection to the agent database
 * (agent_db_open), or NULL for a registry kept in memory only; the
 * registry creates its table at once (agent_db_migrate) and uses db under
 * its own lock, so give it a connection of its own.
 * Returns 0 and *out, or a negative code with e set.
 */
int registry_new(struct clock *clock, sqlite3 *db, struct registry **out, struct err *e);
/* Frees the registry (not the db nor the clock); NULL is a no-op. */
void registry_free(struct registry *r);

/*
 * Loads the persisted instances into an empty registry (no events are
 * sent: subscribers see them through registry_snapshot). Sequence numbers
 * continue after the highest restored one. Returns the number of restored
 * instances (>= 0) or a negative code with e set (the registry is then
 * left empty). CSID_EPRECOND when the registry is not empty or has no db.
 */
int registry_restore(struct registry *r, struct err *e);

/*
 * Registers instance_id of plugin (type, name) at endpoint; it becomes the
 * active instance. Registering an instance ID that is already listed
 * replaces its endpoint and makes it the newest again. Names, instance IDs
 * and endpoints must be non-empty, within the limits above and free of
 * control characters (CSID_EINVAL otherwise). Persists the change, then
 * sends a Registered event. Returns 0 or a negative code with e set.
 */
int registry_register(struct registry *r, enum registry_type type, const char *name,
		      const char *instance_id, const char *endpoint, struct err *e);

/*
 * Removes instance_id of plugin (type, name), only that instance. Persists,
 * then sends a Deregistered event. Returns 0, CSID_ENOTFOUND when that
 * instance is not registered, or another negative code with e set.
 */
int registry_deregister(struct registry *r, enum registry_type type, const char *name,
			const char *instance_id, struct err *e);

/*
 * A monolith: registers the instance as both controller and node plugin
 * (controller first). If the node registration fails, the controller one
 * is rolled back. Returns 0 or a negative code with e set.
 */
int registry_register_monolith(struct registry *r, const char *name, const char *instance_id,
			       const char *endpoint, struct err *e);

/*
 * Deregisters the instance from both types. Returns 0 when at least one
 * registration was removed, CSID_ENOTFOUND when neither existed, or the
 * first other error (having still tried both).
 */
int registry_deregister_monolith(struct registry *r, const char *name, const char *instance_id,
				 struct err *e);

/*
 * Copies the active instance of (type, name) into *out. Returns 0 or
 * CSID_ENOTFOUND (no instance of that plugin).
 */
int registry_active(struct registry *r, enum registry_type type, const char *name,
		    struct registry_instance *out);

/*
 * Copies the whole registry. Returns 0 and *out (free it with
 * registry_snapshot_free), or CSID_ENOMEM.
 */
int registry_snapshot(struct registry *r, struct registry_snapshot *out, struct err *e);
/* Frees the arrays of a snapshot and zeroes it; safe on a zeroed snapshot. */
void registry_snapshot_free(struct registry_snapshot *s);

/*
 * Subscribes cb(ctx, ev) to the events of type. Returns 0 and a
 * subscription id in *id (> 0), or CSID_ENOMEM.
 */
int registry_subscribe(struct registry *r, enum registry_type type, registry_event_cb cb, void *ctx,
		       uint64_t *id, struct err *e);
/*
 * Removes a subscription. When it returns, that callback is not running
 * and will not run again. Must not be called from a callback. Unknown ids
 * are ignored.
 */
void registry_unsubscribe(struct registry *r, uint64_t id);

/*
 * Returns true when the instance answers (e.g. GetPluginInfo or Probe
 * succeeded), false when it is dead. Called without any registry lock.
 */
typedef bool (*registry_probe_cb)(void *ctx, enum registry_type type, const char *name,
				  const struct registry_instance *inst);

/*
 * Probes every registered instance (normally right after registry_restore)
 * and deregisters, with events, each one for which probe returns false. An
 * instance re-registered while it was being probed is kept. Returns the
 * number of instances dropped (>= 0) or a negative code with e set.
 */
int registry_prune(struct registry *r, registry_probe_cb probe, void *ctx, struct err *e);

#endif
