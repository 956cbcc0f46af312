/*
 * Reconciler: drives every volume and snapshot of the store towards what
 * its record asks for, through the plugins' controller services. It keeps
 * a queue of pending (kind, ID) items, each with an attempt count and a
 * due time. Working an item re-reads the object from the store and
 * derives the next step from its stored state alone (level-triggered):
 * create, validate (register existing), controller publish to each node
 * that needs it, controller unpublish, move claims on, expand, modify,
 * delete; snapshot create (re-polled until ready to use) and delete. The
 * result is written back with compare-and-set on the index it read; a
 * conflict re-queues the item at once. Steps are idempotent, so an item
 * may be worked again from any state, after a crash too.
 *
 * Outcomes are classified by csi_rules_outcome (src/csi/csi_rules.c):
 * DONE moves on, RETRY re-queues with capped exponential backoff with
 * jitter (backoff_min_ms doubling to backoff_max_ms), FINAL is shown and
 * tried again only at the cap (so an operator's fix is picked up); a
 * create or register that fails for good (or that the plugin's
 * capabilities rule out) marks the volume or snapshot failed, which the
 * reconciler then leaves alone. Capabilities gate every optional RPC: a
 * plugin without PUBLISH_UNPUBLISH_VOLUME is never sent a controller
 * publish (its claims skip the controller steps), a missing capability
 * for a wanted step (expand, modify, delete, ...) is a final error. Every
 * RPC has a deadline (rpc_timeout_ms). A failing item shows its last
 * error, attempt count and next attempt time (reconciler_status, kept in
 * memory) and never delays other items: items are taken in due-time
 * order, never two workers on one item, and controller RPCs to one plugin
 * are limited to plugin_concurrency at a time (default 1, since some
 * providers race across volumes of one host); an item whose plugin is at
 * its limit waits aside and does not hold a worker. A store change to an
 * item makes it due at once, even while it backs off.
 *
 * Virtual time: reconciler_step() turns the store changes logged since
 * its last call into enqueues (without blocking), works every item due at
 * the clock's now on the calling thread and returns when the next item is
 * due; tests run it on a fake clock with a scripted fake plugin and the
 * memory store. When the change log was compacted past the reconciler's
 * position, everything is listed and enqueued again.
 * reconciler_start() runs the same core on worker threads, plus one thread
 * that follows the store's change log and enqueues every changed object.
 * At start (step or threads) every volume and snapshot is enqueued. A
 * caller that waits for an item's next step may work it on its own
 * thread instead of a worker's (reconciler_run), under the same rules.
 *
 * Thread-safety: reconciler_enqueue, reconciler_run and reconciler_status
 * may be called from any thread; reconciler_step from one thread, never
 * after start.
 */
#ifndef CSID_SERVER_RECONCILER_H
#define CSID_SERVER_RECONCILER_H

#include <stdbool.h>
#include <stdint.h>

#include "csi/csi_client.h"
#include "model/model.h"
#include "server/server_vcache.h"
#include "store/store.h"
#include "util/clock.h"
#include "util/err.h"

#define RECONCILER_BACKOFF_MIN_MS 100
#define RECONCILER_BACKOFF_MAX_MS (10 * 60 * 1000)
#define RECONCILER_WORKERS 4

/*
 * How the reconciler reaches a plugin's controller service: a seam, so the
 * server can use sockets on its own host (this issue) or an agent that
 * runs the controller plugin (next issue), and tests a scripted fake.
 * acquire gives a client for a healthy controller of plugin_id and its
 * ControllerGetCapabilities bits (indexed by the CSI enum values), or
 * CSID_EUNAVAIL ("no healthy controller for plugin X") / CSID_ENOTFOUND
 * ("no controller plugin X"); release gives it back. Both thread-safe.
 * The reconciler takes both errors as "not now": a step that needs the
 * controller is retried with backoff, the error shown (a plugin may still
 * be starting); only the capabilities of an acquired controller rule a
 * step out. CSID_ENOTFOUND also lets a registered volume become ready
 * without ValidateVolumeCapabilities (a node-only plugin has no
 * controller to ask).
 */
struct reconciler_controllers {
	int (*acquire)(void *ctx, const char *plugin_id, struct csi_client **client,
		       uint64_t *controller_caps, struct err *e);
	void (*release)(void *ctx, const char *plugin_id, struct csi_client *client);
	void *ctx;
};

struct reconciler_config {
	struct store *store; /* borrowed, required */
	struct reconciler_controllers controllers; /* required */
	struct clock *clock; /* borrowed; NULL: real clock */
	int workers; /* 0: RECONCILER_WORKERS */
	int64_t backoff_min_ms; /* 0: RECONCILER_BACKOFF_MIN_MS */
	int64_t backoff_max_ms; /* 0: RECONCILER_BACKOFF_MAX_MS */
	int64_t rpc_timeout_ms; /* 0: CSI_DEFAULT_TIMEOUT_MS */
	int plugin_concurrency; /* 0: 1 */
	uint64_t seed; /* jitter; 0: from the clock */
	struct server_vcache *vcache; /* borrowed; NULL: every pass decodes its volume */
};

struct reconciler;

/*
 * The delay before attempt `attempts` + 1 of an item that failed
 * `attempts` times in a row (>= 1): min_ms doubling per failure, capped at
 * max_ms, with jitter in [3/4 d, d] of that value d drawn from a hash of
 * seed, kind, id and attempts, so that items failing together spread out
 * and a run with the same seed repeats exactly. Pure.
 */
int64_t reconciler_backoff_ms(int attempts, int64_t min_ms, int64_t max_ms, uint64_t seed,
			      enum store_kind kind, const char *id);

int reconciler_new(const struct reconciler_config *cfg, struct reconciler **out, struct err *e);

/* Queues (kind, id) to be worked now (a no-op when it is queued already and due). */
void reconciler_enqueue(struct reconciler *r, enum store_kind kind, const char *id);
/*
 * reconciler_enqueue after the item was asked for something else (a
 * delete, an expand): its last error and attempt count, which were about
 * the old request, are dropped, so no one reads them as the new one's.
 */
void reconciler_restart(struct reconciler *r, enum store_kind kind, const char *id);
/*
 * reconciler_enqueue (restart: reconciler_restart) after the caller's own
 * write of (kind, id) at store index index: the change-log follower then
 * skips the changes of (kind, id) up to index instead of queueing an idle
 * pass for each (the queued pass reads that version or a later one).
 */
void reconciler_written(struct reconciler *r, enum store_kind kind, const char *id, uint64_t index,
			bool restart);
/*
 * reconciler_written, and then the item's pass on the calling thread at
 * once when a worker could take it now (the worker threads started, the
 * reconciler active, the item neither busy nor parked, fewer than
 * cfg.workers passes on callers' threads already): a caller that
 * waits for the step after its write (a claim waiting for its node's
 * publication) so spares the hand-off to a worker and the wake-up after
 * that step's write. Returns whether the pass ran here; when not, the
 * item was queued for a worker as by reconciler_written. A pass that
 * leaves the item queued again wakes an idle worker for it. It blocks
 * for the pass (plugin RPCs included, within their deadline).
 * Thread-safe.
 */
bool reconciler_run(struct reconciler *r, enum store_kind kind, const char *id, uint64_t index,
		    bool restart);

/*
 * What a pass on the caller's thread tells it before it writes: fn(ctx, v)
 * runs once ControllerPublishVolume to a node succeeded, with v the volume
 * as the pass is about to write it (that node's publication published, its
 * context set; v->modify_index still the index the pass read), on the
 * caller's thread, before the write. v is the pass's: fn may read it and
 * copy from it, never keep it. The write that follows may still fail (the
 * pass is then retried like any other): the publication stays publishing
 * in the store until a pass records it, and a publishing publication is
 * published again while its node is claimed, or unpublished once it is
 * not (reconcile_step.c), so what fn was told is never undone silently.
 */
struct reconciler_published {
	void (*fn)(void *ctx, struct model_volume *v);
	void *ctx;
};

/* reconciler_run, telling pub (NULL: nothing) as above when its pass publishes a volume. */
bool reconciler_run_published(struct reconciler *r, enum store_kind kind, const char *id,
			      uint64_t index, bool restart, const struct reconciler_published *pub);
/* The store index up to which the change-log follower has read. */
uint64_t reconciler_follow_index(struct reconciler *r);

/* Works every due item on this thread; returns when the next is due (CLOCK_NEVER: none). */
int64_t reconciler_step(struct reconciler *r);

/*
 * Whether the reconciler works items (true from reconciler_new). While
 * inactive (this server does not lead) no item is taken, by a worker or
 * by reconciler_step, though changes are still queued; steps in flight
 * finish. Made active again, it lists and enqueues everything, since
 * another server worked the store meanwhile. Any thread.
 */
void reconciler_set_active(struct reconciler *r, bool active);

/* Runs workers and the change-log follower on threads. */
int reconciler_start(struct reconciler *r, struct err *e);

/*
 * Copies what the reconciler last saw of (kind, id) into *out (strings in
 * a). Returns 0, or CSID_ENOTFOUND when it has nothing on it (nothing
 * pending, last attempt fine).
 */
int reconciler_status(struct reconciler *r, enum store_kind kind, const char *id, struct arena *a,
		      struct model_status *out);

/* One item's status as reconciler_statuses lists it (strings in the caller's arena). */
struct reconciler_status_entry {
	enum store_kind kind;
	const char *id;
	struct model_status st;
};

/*
 * The items reconciler_status would answer for (failed attempts or an
 * error), at most cap of them, into out (strings in a, each error cut to
 * err_max bytes). Returns how many; fewer when out of memory.
 */
size_t reconciler_statuses(struct reconciler *r, struct arena *a,
			   struct reconciler_status_entry *out, size_t cap, size_t err_max);

/* Pending items and items in backoff (for /v1/status/health and metrics). */
void reconciler_counts(struct reconciler *r, int *queued, int *failing);

/*
 * Stops taking items, waits for the steps in flight (each bounded by its
 * RPC deadline) and joins the threads. Idempotent.
 */
void reconciler_stop(struct reconciler *r);
/* Stops (if not yet) and frees. NULL is a no-op. */
void reconciler_free(struct reconciler *r);

#endif
