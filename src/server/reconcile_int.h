/*
 * Reconciler internals shared by the queue (reconciler.c) and the steps
 * (reconcile_step.c, reconcile_volume.c, reconcile_snapshot.c,
 * reconcile_rpc.c), and by the tests of their pure parts.
 *
 * One pass works one item: it reads the object, asks the plugin's
 * controller for its capabilities, derives the single next step from the
 * stored state alone, runs it (at most one controller RPC, under the
 * plugin's concurrency slot, with the deadline) and writes the result with
 * compare-and-set on the index it read. The pass reports what the queue
 * should do with the item next (struct reconcile_result).
 */
#ifndef CSID_SERVER_RECONCILE_INT_H
#define CSID_SERVER_RECONCILE_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "server/reconciler.h"
#include "util/arena.h"

/* Controller capability bit (CSI ControllerServiceCapability.RPC.Type value). */
#define RECONCILE_CAP(type) (1ULL << CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__##type)

/* What the queue does with an item after a pass. */
enum reconcile_outcome {
	RECONCILE_IDLE, /* nothing to do: leaves the queue, status cleared */
	RECONCILE_IDLE_FAILED, /* object in a failed state: leaves the queue, status kept */
	RECONCILE_AGAIN, /* a step was done (or a write conflicted): worked again now */
	RECONCILE_POLL, /* waiting on the plugin (snapshot not ready): again after backoff */
	RECONCILE_RETRY, /* failed: again after backoff; e says why */
	RECONCILE_FINAL, /* failed for good: again at the backoff cap; e says why */
	RECONCILE_BUSY, /* the plugin's slots are taken: parked until one frees */
};

struct reconcile_result {
	enum reconcile_outcome outcome;
	char plugin_id[MODEL_PLUGIN_ID_MAX + 1]; /* BUSY: the plugin */
	struct err e; /* RETRY, FINAL: why */
	/* RETRY: waiting for this object (a source not ready yet), "" none */
	enum store_kind wait_kind;
	char wait_id[MODEL_ID_MAX + 1];
	/* The store index of the write this pass made, 0: none (see rec_item.own_index). */
	uint64_t wrote_index;
	/*
	 * AGAIN only: the version this pass wrote needs no further step, so
	 * the pass that would read it back to find that is not run (a change
	 * made meanwhile still queues one, as for any busy item).
	 */
	bool settled;
	/*
	 * In, set by the caller and kept by the pass: told when the pass
	 * published a node, before it writes that (reconciler_published); NULL: none.
	 */
	const struct reconciler_published *published;
};

/* What a pass needs from the reconciler. */
struct reconcile_env {
	struct reconciler *r;
	struct store *store;
	struct reconciler_controllers controllers;
	struct clock *clock;
	int64_t rpc_timeout_ms;
	struct server_vcache *vcache; /* may be NULL */
};

/*
 * What the pass knows of the plugin's controller. Only an acquired
 * controller's capabilities rule a step out; without one, a step that
 * needs it is retried (the seam may not know a plugin yet that is still
 * starting). The one thing done without a controller: a volume of a
 * plugin that has none (NONE) is registered without validation.
 */
enum reconcile_ctrl {
	RECONCILE_CTRL_UP, /* acquired: caps known */
	RECONCILE_CTRL_NONE, /* acquire: CSID_ENOTFOUND, no controller plugin of that ID */
	RECONCILE_CTRL_DOWN, /* acquire: another error (not healthy now) */
};

/* One pass's hold on the plugin's controller. */
struct reconcile_pass {
	const struct reconcile_env *env;
	struct arena *a;
	const char *plugin_id;
	enum reconcile_ctrl ctrl;
	uint64_t caps;
	struct csi_client *client; /* CTRL_UP only */
	struct err ctrl_err; /* CTRL_DOWN / NONE: why */
};

/* Acquires the plugin's controller (never fails: the outcome is in p->ctrl). */
void reconcile_pass_begin(struct reconcile_pass *p, const struct reconcile_env *env,
			  struct arena *a, const char *plugin_id);
/* Releases the controller (idempotent). */
void reconcile_pass_end(struct reconcile_pass *p);

/*
 * Runs one controller RPC for the object `what` ("volume v1") under the
 * plugin's slot, with the deadline. Returns 0 when the outcome is DONE by
 * csi_rules_outcome (*resp set, or NULL when the plugin answered an error
 * that counts as done, such as NOT_FOUND on DeleteVolume). Otherwise
 * returns -1 with res set: BUSY when the plugin's slots are taken, RETRY
 * or FINAL with "<what>: <Method>: plugin <id>: <CODE>: <message>", or
 * RETRY with the controller's error when it is down.
 */
int reconcile_rpc(struct reconcile_pass *p, const char *what, enum csi_rpc rpc,
		  const ProtobufCMessage *req, ProtobufCMessage **resp,
		  struct reconcile_result *res);

/*
 * Sets the map field `field` of message m (any protobuf-c map of strings)
 * to the entries of map, allocated in a. Returns 0 or CSID_ENOMEM.
 */
int reconcile_map_set(struct arena *a, ProtobufCMessage *m, const char *field,
		      const struct model_map *map);

/*
 * Reads (kind, id) for a pass into *o (free with store_obj_free). Returns
 * 0, or -1 with res set: IDLE when it is gone (nothing left to do), RETRY
 * on a store error.
 */
int reconcile_read(const struct reconcile_env *env, enum store_kind kind, const char *id,
		   const char *what, struct store_obj *o, struct reconcile_result *res);
/* Writes value over (kind, id) on expect (0: must not exist); a conflict gives AGAIN. */
int reconcile_put(const struct reconcile_env *env, enum store_kind kind, const char *id,
		  const char *value, size_t len, uint64_t expect, struct reconcile_result *res);
/* Applies ops[0..n) in one store transaction; a conflict gives AGAIN. */
int reconcile_txn(const struct reconcile_env *env, const struct store_op *op, size_t n,
		  struct reconcile_result *res);
/* Deletes (kind, id) on expect; a conflict gives AGAIN. */
int reconcile_remove(const struct reconcile_env *env, enum store_kind kind, const char *id,
		     uint64_t expect, struct reconcile_result *res);

/* Sets res to outcome with a message; returns -1 (for `return reconcile_fail(...)`). */
int reconcile_fail(struct reconcile_result *res, enum reconcile_outcome outcome, int code,
		   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* --- volumes: the decision (reconcile_step.c), the pass (reconcile_volume.c) --- */

enum reconcile_step_kind {
	RSTEP_NONE, /* nothing to do */
	RSTEP_FAILED, /* the volume is failed: nothing to do, keep its status */
	RSTEP_CREATE, /* CreateVolume (deleting without a plugin ID: to find it by name) */
	RSTEP_CREATE_LACKS, /* the plugin cannot create it (missing): record failed */
	RSTEP_VALIDATE, /* ValidateVolumeCapabilities */
	RSTEP_REGISTERED, /* no controller service: nothing to validate, ready */
	RSTEP_CLAIM_FREE, /* claims[index]: controller-unpublished -> freed */
	RSTEP_CLAIM_CONTROLLER_DONE, /* claims[index]: node- -> controller-unpublished */
	RSTEP_PUB_UNPUBLISHING, /* pubs[index] -> unpublishing (no claim needs it) */
	RSTEP_PUB_REPUBLISH, /* pubs[index] unpublishing -> publishing (claimed again) */
	RSTEP_PUB_ADD, /* claims[index] needs a publication on its node: add one (ctrl UP) */
	RSTEP_UNPUBLISH, /* ControllerUnpublishVolume of pubs[index], then drop it */
	RSTEP_PUBLISH, /* ControllerPublishVolume of pubs[index] */
	RSTEP_EXPAND, /* ControllerExpandVolume to pending_capacity_min */
	RSTEP_MODIFY, /* ControllerModifyVolume with pending_mutable */
	RSTEP_DELETE, /* DeleteVolume, then remove the record */
	RSTEP_REMOVE, /* remove the record (nothing at the plugin) */
	RSTEP_LACKS, /* the step needs a capability the plugin lacks (missing): final */
};

struct reconcile_step {
	enum reconcile_step_kind kind;
	size_t index; /* claim or publication, as the kind says */
	const char *missing; /* RSTEP_LACKS, RSTEP_CREATE_LACKS: the capability's name */
	enum reconcile_step_kind blocked; /* RSTEP_LACKS: the step it blocks */
};

/* "create", "publish", ... */
const char *reconcile_step_name(enum reconcile_step_kind k);
/* Whether a step calls the controller (it then needs ctrl UP, else it is retried). */
bool reconcile_step_rpc(enum reconcile_step_kind k);

/*
 * The next step for v, a pure function of its stored state and what is
 * known of the controller (ctrl, caps). Store-only steps come first (so
 * claims move on while the controller is down), then unpublish before
 * publish, then expand and modify, then delete.
 */
void reconcile_volume_next(const struct model_volume *v, enum reconcile_ctrl ctrl, uint64_t caps,
			   struct reconcile_step *out);

/* One pass over volume id. */
void reconcile_volume(const struct reconcile_env *env, const char *id,
		      struct reconcile_result *res);

/* --- snapshots (reconcile_snapshot.c) --- */

void reconcile_snapshot(const struct reconcile_env *env, const char *id,
			struct reconcile_result *res);

/* --- the plugin slots (reconciler.c) --- */

/* Takes one of the plugin's slots; false when all are taken. */
bool reconciler_plugin_enter(struct reconciler *r, const char *plugin_id);
/* Gives the slot back; parked items of the plugin become due. */
void reconciler_plugin_leave(struct reconciler *r, const char *plugin_id);

#endif
