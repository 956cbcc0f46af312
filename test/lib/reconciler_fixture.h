/*
 * A fixture for the reconciler's unit tests: the memory store, a fake
 * clock, two scripted fake controllers (csi_fake.h: RFX_PLUGIN and
 * RFX_PLUGIN2) behind the controller seam, and a reconciler stepped in
 * virtual time; plus helpers that write volumes, snapshots and claims
 * into the store as the server would, and read them back. Helpers fail
 * the running cmocka test on any unexpected error.
 */
#ifndef CSID_TEST_RECONCILER_FIXTURE_H
#define CSID_TEST_RECONCILER_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "csi_fake.h"
#include "model/model.h"
#include "server/reconciler.h"
#include "store/store.h"
#include "util/clock.h"

#define RFX_T0 1000000
#define RFX_WALL0 1700000000000
#define RFX_PLUGIN "fake.csi.csid.dev"
#define RFX_PLUGIN2 "other.csi.csid.dev"
#define RFX_MIN_MS 100
#define RFX_MAX_MS 10000

/* What a test works with (rfx_setup makes it, cmocka's *state points at it). */
struct rfx {
	struct clock_fake clock;
	struct store *store;
	struct csi_fake fake;
	struct csi_fake fake2;
	struct reconciler *r;
	struct reconciler_config cfg;
	/* conflict hook: the store write to race with the next RPC of hook_rpc */
	enum csi_rpc hook_rpc;
	int hook_left;
	const char *hook_volume;
};

/* cmocka setup and teardown: a fixture without reconciler (rfx_new makes it). */
int rfx_setup(void **state);
/* Frees it all; checks every controller the reconciler acquired was released. */
int rfx_teardown(void **state);
/* Creates the reconciler from t->cfg (set fields of it first to change defaults). */
void rfx_new(struct rfx *t);
int64_t rfx_now(struct rfx *t);
/* Steps, moving the clock to each next due time, while that is within budget_ms. */
int64_t rfx_run(struct rfx *t, int64_t budget_ms);

/* Writes v (store encoding) over whatever is stored. */
void rfx_put_volume(struct rfx *t, const struct model_volume *v);
/* A volume spec on RFX_PLUGIN (1 MiB, single-node-writer, a secret) plus extra JSON keys. */
struct model_volume *rfx_spec(struct arena *a, const char *id, const char *extra);
/* Stores a new volume from rfx_spec in state st. */
void rfx_add(struct rfx *t, const char *id, enum model_volume_state st, const char *extra);
/* The stored volume / snapshot (in a), or NULL when there is none. */
struct model_volume *rfx_get(struct rfx *t, struct arena *a, const char *id);
struct model_snapshot *rfx_get_snap(struct rfx *t, struct arena *a, const char *id);
/* Stores snapshot id of volume on RFX_PLUGIN in state st. */
void rfx_put_snap(struct rfx *t, const char *id, const char *volume, enum model_snapshot_state st,
		  const char *external_id);
/* Adds alloc's claim on node (plugin node ID "p-<node>") with model_claim_add. */
void rfx_claim(struct rfx *t, const char *id, const char *alloc, const char *node,
	       enum model_claim_mode mode);
/* Moves alloc's claim to `to`, as the server's release or detach would. */
void rfx_move(struct rfx *t, const char *id, const char *alloc, enum model_claim_state to);
void rfx_set_state(struct rfx *t, const char *id, enum model_volume_state st);
/* reconciler_status of volume id; its last error copied to err ("" when none). */
int rfx_status(struct rfx *t, const char *id, struct model_status *st, char *err, size_t len);

#endif
