/*
 * The reconciler on real threads and the real clock against the real
 * csi-hostpath over gRPC, with the SQLite store: create, register, controller
 * publish to a node (publish context recorded), snapshot, restore, clone,
 * expand (node expansion flagged), modify, unpublish and free, delete of
 * snapshots and volumes (the plugin's files go too); an ABORTED answer
 * retried with backoff and shown meanwhile; an INVALID_ARGUMENT answer
 * shown and not applied. The plugin process and its directory are removed
 * in teardown, even after a failure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "hostpath_proc.h"
#include "model/model.h"
#include "model/model_claim.h"
#include "server/reconciler.h"
#include "server/server_pastclaims.h"
#include "store/store.h"

#define PLUGIN "hostpath.csi.csid.dev"
#define WAIT_MS 20000

struct fx {
	struct hpp_proc h;
	struct csi_client *client;
	uint64_t caps;
	struct store *store;
	struct reconciler *r;
};

static int teardown(void **state);

/* The plugin's controller capabilities as reconciler bits. */
static int fx_caps(struct fx *f)
{
	Csi__V1__ControllerGetCapabilitiesRequest req =
	    CSI__V1__CONTROLLER_GET_CAPABILITIES_REQUEST__INIT;
	Csi__V1__ControllerGetCapabilitiesResponse *resp = NULL;
	struct csi_status st;

	if (csi_controller_get_capabilities(f->client, &req, &resp, 10000, &st) != 0)
		return -1;
	for (size_t i = 0; i < resp->n_capabilities; i++)
		if (resp->capabilities[i]->type_case ==
		    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC)
			f->caps |= 1ULL << resp->capabilities[i]->rpc->type;
	csi_msg_free(&resp->base);
	return 0;
}

static int fx_acquire(void *ctx, const char *plugin_id, struct csi_client **client, uint64_t *caps,
		      struct err *e)
{
	struct fx *f = ctx;

	if (strcmp(plugin_id, PLUGIN) != 0)
		return err_set(e, CSID_ENOTFOUND, "no controller plugin %s", plugin_id);
	*client = f->client;
	*caps = f->caps;
	return 0;
}

static void fx_release(void *ctx, const char *plugin_id, struct csi_client *client)
{
}

static int setup(void **state)
{
	static struct fx f;
	struct reconciler_config cfg = {0};
	char path[160];
	struct err e;

	memset(&f, 0, sizeof(f));
	*state = &f;
	/* cmocka skips a test's teardown when its setup fails: clean up here. */
	if (hpp_proc_start(&f.h, NULL) != 0 || csi_client_grpc_new(f.h.endpoint, &f.client, &e) ||
	    fx_caps(&f) != 0)
		goto fail;
	snprintf(path, sizeof(path), "%s/state.db", f.h.dir);
	if (store_sqlite_open(path, &f.store, &e) != 0)
		goto fail;
	cfg.store = f.store;
	cfg.controllers.acquire = fx_acquire;
	cfg.controllers.release = fx_release;
	cfg.controllers.ctx = &f;
	cfg.workers = 2;
	cfg.backoff_min_ms = 200;
	cfg.backoff_max_ms = 1000;
	cfg.rpc_timeout_ms = 5000;
	if (reconciler_new(&cfg, &f.r, &e) != 0 || reconciler_start(f.r, &e) != 0)
		goto fail;
	return 0;
fail:
	fprintf(stderr, "setup: %s\n", e.msg);
	teardown(state);
	return -1;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	reconciler_free(f->r);
	f->r = NULL;
	store_close(f->store);
	f->store = NULL;
	csi_client_free(f->client);
	f->client = NULL;
	hpp_proc_cleanup(&f->h);
	return 0;
}

/* ---- store helpers ---- */

/* The stored volume (in a); history: with its claim history in past_claims (to look at, not to
 * write). */
static struct model_volume *fx_get_as(struct fx *f, struct arena *a, const char *id,
				      uint64_t *index, bool history)
{
	struct model_volume *v = NULL;
	struct store_obj o;
	struct err e;

	if (store_get(f->store, STORE_VOLUME, id, &o, &e) != 0)
		return NULL;
	assert_int_equal(model_volume_decode(a, o.value, o.len, &v, &e), 0);
	if (index)
		*index = o.modify_index;
	store_obj_free(&o);
	if (history)
		assert_int_equal(server_pastclaims_read(f->store, v, a, &e), 0);
	return v;
}

static struct model_volume *fx_get(struct fx *f, struct arena *a, const char *id, uint64_t *index)
{
	return fx_get_as(f, a, id, index, true);
}

/* Writes v on index (0: new); returns the store's code (CSID_ECONFLICT: lost a race). */
static int fx_put(struct fx *f, enum store_kind kind, const char *id, const char *json, size_t len,
		  uint64_t index)
{
	struct store_op op = {STORE_OP_PUT, kind, id, json, len, index};
	struct err e;

	return store_txn(f->store, &op, 1, NULL, &e);
}

/* Read, change with fn, write on the index read; again on a conflict (as the server does). */
static void fx_update(struct fx *f, const char *id,
		      void (*fn)(struct arena *a, struct model_volume *v, void *arg), void *arg)
{
	for (int tries = 0; tries < 1000; tries++) {
		struct arena *a = arena_new();
		uint64_t index;
		struct model_volume *v = fx_get_as(f, a, id, &index, false);
		char *json;
		size_t len;
		struct err e;
		int rc;

		assert_non_null(v);
		fn(a, v, arg);
		assert_int_equal(model_volume_encode(v, MODEL_VIEW_STORE, &json, &len, &e), 0);
		rc = fx_put(f, STORE_VOLUME, id, json, len, index);
		model_wipe_free(json, len);
		arena_free(a);
		if (rc == 0)
			return;
		assert_int_equal(rc, CSID_ECONFLICT);
	}
	fail_msg("update %s: too many conflicts", id);
}

/* Stores a new volume on the plugin from a spec (1 MiB, single-node-writer). */
static void fx_add(struct fx *f, const char *id, const char *extra, enum model_volume_state state)
{
	struct arena *a = arena_new();
	struct model_volume *v;
	char text[1024], *json;
	size_t len;
	struct err e;

	snprintf(text, sizeof(text),
		 "{\"id\": \"%s\", \"plugin_id\": \"" PLUGIN "\", \"capacity_min\": \"1MiB\", "
		 "\"capabilities\": [{\"access_mode\": \"single-node-writer\"}]%s%s}",
		 id, extra ? ", " : "", extra ? extra : "");
	if (model_volume_spec_decode(a, text, strlen(text), false, &v, &e) != 0)
		fail_msg("spec: %s", e.msg);
	v->state = state;
	assert_int_equal(model_volume_encode(v, MODEL_VIEW_STORE, &json, &len, &e), 0);
	assert_int_equal(fx_put(f, STORE_VOLUME, id, json, len, 0), 0);
	model_wipe_free(json, len);
	arena_free(a);
}

static void fx_create(struct fx *f, const char *id, const char *extra)
{
	fx_add(f, id, extra, MODEL_VOL_CREATING);
}

static void fx_register(struct fx *f, const char *id, const char *extra)
{
	fx_add(f, id, extra, MODEL_VOL_REGISTERING);
}

static void fx_snapshot(struct fx *f, const char *id, const char *volume,
			enum model_snapshot_state st, const char *external_id, uint64_t index)
{
	struct model_snapshot s;
	char *json;
	size_t len;
	struct err e;

	memset(&s, 0, sizeof(s));
	s.id = (char *)id;
	s.volume_id = (char *)volume;
	s.plugin_id = PLUGIN;
	s.external_id = (char *)external_id;
	s.state = st;
	assert_int_equal(model_snapshot_encode(&s, MODEL_VIEW_STORE, &json, &len, &e), 0);
	assert_int_equal(fx_put(f, STORE_SNAPSHOT, id, json, len, index), 0);
	model_wipe_free(json, len);
}

typedef bool (*fx_pred)(const struct model_volume *v, const void *arg);

/* Polls (bounded) until pred holds for volume id (v NULL: gone); fails with what it saw. */
static void fx_wait(struct fx *f, const char *id, fx_pred pred, const void *arg, const char *what)
{
	int64_t end = hpp_now_ms() + WAIT_MS;

	for (;;) {
		struct arena *a = arena_new();
		struct model_volume *v = fx_get(f, a, id, NULL);
		bool ok = pred(v, arg);
		struct model_status st;

		if (!ok && hpp_now_ms() >= end) {
			reconciler_status(f->r, STORE_VOLUME, id, a, &st);
			fail_msg("volume %s: not %s (state %s, last error %s)", id, what,
				 v ? model_volume_state_name(v->state) : "gone",
				 st.last_error ? st.last_error : "none");
		}
		arena_free(a);
		if (ok)
			return;
		hpp_pause_ms(2);
	}
}

static bool fx_ready(const struct model_volume *v, const void *arg)
{
	return v && v->state == MODEL_VOL_READY;
}

static bool fx_gone(const struct model_volume *v, const void *arg)
{
	return v == NULL;
}

static bool fx_published(const struct model_volume *v, const void *arg)
{
	return v && v->npubs == 1 && v->pubs[0].state == MODEL_PUB_PUBLISHED;
}

static bool fx_freed(const struct model_volume *v, const void *arg)
{
	return v && v->nclaims == 0 && v->npubs == 0 && v->npast_claims == 1;
}

static bool fx_expanded(const struct model_volume *v, const void *arg)
{
	return v && v->pending_capacity_min == 0 && v->capacity >= *(const int64_t *)arg;
}

static bool fx_modified(const struct model_volume *v, const void *arg)
{
	return v && v->pending_mutable.n == 0;
}

static void fx_claim_fn(struct arena *a, struct model_volume *v, void *arg)
{
	struct model_claim_request req = {"alloc-1", "n1", MODEL_CLAIM_WRITE, v->caps[0], false};
	/* What csi-hostpath's NodeGetInfo reports for node-1. */
	struct model_kv seg = {"topology.hostpath.csi/node", "node-1"};
	struct model_topology topo = {{&seg, 1}};
	struct model_claim_env env = {.controller_required = true,
				      .controller_healthy = true,
				      .node_plugin_healthy = true,
				      .plugin_node_id = "node-1",
				      .node_topology = &topo};
	enum model_claim_verdict verdict;
	struct err e;

	if (model_claim_check(v, &req, &env, &verdict, &e) != 0)
		fail_msg("claim: %s", e.msg);
	assert_int_equal(model_claim_add(a, v, &req, &env, 0, &e), 0);
}

static void fx_release_fn(struct arena *a, struct model_volume *v, void *arg)
{
	struct err e;

	assert_int_equal(model_volume_claim_move(a, v, "alloc-1", MODEL_CLAIM_NODE_UNPUBLISHED,
						 "released", 0, &e),
			 0);
}

static void fx_expand_fn(struct arena *a, struct model_volume *v, void *arg)
{
	v->pending_capacity_min = *(const int64_t *)arg;
}

static void fx_modify_fn(struct arena *a, struct model_volume *v, void *arg)
{
	assert_int_equal(model_map_put(a, &v->pending_mutable, arg, "300", NULL), 0);
}

static void fx_delete_fn(struct arena *a, struct model_volume *v, void *arg)
{
	v->state = MODEL_VOL_DELETING;
}

static bool fx_exists(struct fx *f, const char *kind, const char *id)
{
	char path[256];
	struct stat sb;

	snprintf(path, sizeof(path), "%s/%s/%s", f->h.data, kind, id);
	return stat(path, &sb) == 0;
}

/* Waits until the reconciler shows an error containing text for volume id. */
static void fx_wait_error(struct fx *f, const char *id, const char *text, int *attempts)
{
	int64_t end = hpp_now_ms() + WAIT_MS;

	for (;;) {
		struct arena *a = arena_new();
		struct model_status st;
		bool seen = reconciler_status(f->r, STORE_VOLUME, id, a, &st) == 0 &&
			    st.last_error && strstr(st.last_error, text);

		if (seen && attempts)
			*attempts = st.attempts;
		arena_free(a);
		if (seen)
			return;
		assert_true(hpp_now_ms() < end);
		hpp_pause_ms(1);
	}
}

static void test_lifecycle(void **state)
{
	struct fx *f = *state;
	struct arena *a = arena_new();
	struct model_volume *v;
	int64_t size = 4 << 20;
	char snap_ext[128], vol_ext[128];
	struct store_obj o;
	struct model_snapshot *s;
	struct err e;

	/* Create. */
	fx_create(f, "vol", "\"mutable_parameters\": {\"tier\": \"standard\"}");
	fx_wait(f, "vol", fx_ready, NULL, "ready");
	v = fx_get(f, a, "vol", NULL);
	assert_non_null(v->external_id);
	snprintf(vol_ext, sizeof(vol_ext), "%s", v->external_id);
	assert_true(v->capacity >= 1 << 20);
	assert_int_equal(v->naccessible, 1);
	assert_true(fx_exists(f, "volumes", vol_ext));

	/* Register the same volume under another ID: validated, ready. */
	{
		char extra[200];

		snprintf(extra, sizeof(extra), "\"external_id\": \"%s\"", vol_ext);
		fx_register(f, "reg", extra);
		fx_wait(f, "reg", fx_ready, NULL, "registered");
	}

	/* Controller publish to the claiming node, with the plugin's node ID. */
	fx_update(f, "vol", fx_claim_fn, NULL);
	fx_wait(f, "vol", fx_published, NULL, "published");
	v = fx_get(f, a, "vol", NULL);
	assert_string_equal(v->pubs[0].plugin_node_id, "node-1");

	/* Snapshot, restore, clone. */
	fx_snapshot(f, "snap", "vol", MODEL_SNAP_CREATING, NULL, 0);
	fx_create(f, "restored", "\"snapshot_source\": \"snap\"");
	fx_create(f, "clone", "\"clone_source\": \"vol\"");
	fx_wait(f, "restored", fx_ready, NULL, "restored");
	fx_wait(f, "clone", fx_ready, NULL, "cloned");
	assert_int_equal(store_get(f->store, STORE_SNAPSHOT, "snap", &o, &e), 0);
	assert_int_equal(model_snapshot_decode(a, o.value, o.len, &s, &e), 0);
	assert_int_equal(s->state, MODEL_SNAP_READY);
	assert_true(s->ready_to_use);
	snprintf(snap_ext, sizeof(snap_ext), "%s", s->external_id);
	assert_true(fx_exists(f, "snapshots", snap_ext));

	/* Expand: a mount volume needs the node to grow its file system too. */
	fx_update(f, "vol", fx_expand_fn, &size);
	fx_wait(f, "vol", fx_expanded, &size, "expanded");
	assert_true(fx_get(f, a, "vol", NULL)->node_expansion_required);

	/* Modify. */
	fx_update(f, "vol", fx_modify_fn, "iops");
	fx_wait(f, "vol", fx_modified, NULL, "modified");
	v = fx_get(f, a, "vol", NULL);
	assert_string_equal(model_map_get(&v->mutable_parameters, "iops"), "300");
	assert_string_equal(model_map_get(&v->mutable_parameters, "tier"), "standard");

	/* Release: unpublished, then freed. */
	fx_update(f, "vol", fx_release_fn, NULL);
	fx_wait(f, "vol", fx_freed, NULL, "freed");

	/* Delete the snapshot, then every volume: the plugin's files go too. */
	fx_snapshot(f, "snap", "vol", MODEL_SNAP_DELETING, snap_ext, o.modify_index);
	store_obj_free(&o);
	for (int i = 0; i < WAIT_MS / 2; i++) {
		if (store_get(f->store, STORE_SNAPSHOT, "snap", &o, &e) == CSID_ENOTFOUND)
			break;
		store_obj_free(&o);
		hpp_pause_ms(2);
	}
	assert_int_equal(store_get(f->store, STORE_SNAPSHOT, "snap", &o, &e), CSID_ENOTFOUND);
	assert_false(fx_exists(f, "snapshots", snap_ext));
	fx_update(f, "vol", fx_delete_fn, NULL);
	fx_update(f, "restored", fx_delete_fn, NULL);
	fx_update(f, "clone", fx_delete_fn, NULL);
	fx_wait(f, "vol", fx_gone, NULL, "deleted");
	fx_wait(f, "restored", fx_gone, NULL, "deleted");
	fx_wait(f, "clone", fx_gone, NULL, "deleted");
	assert_false(fx_exists(f, "volumes", vol_ext));
	arena_free(a);
}

static void test_errors(void **state)
{
	struct fx *f = *state;
	struct arena *a = arena_new();
	int attempts = 0;
	struct model_volume *v;

	/* ABORTED: shown while backing off, retried, then done. */
	assert_int_equal(hpp_write_file(f->h.faults, "CreateVolume nth=1 times=2 code=ABORTED "
						     "msg=\"busy\"\n"),
			 0);
	fx_create(f, "v2", NULL);
	fx_wait_error(f, "v2", "CreateVolume: plugin " PLUGIN ": ABORTED: busy", &attempts);
	assert_true(attempts >= 1);
	fx_wait(f, "v2", fx_ready, NULL, "ready after ABORTED");

	/* INVALID_ARGUMENT: final, shown, nothing applied. */
	fx_update(f, "v2", fx_modify_fn, "color");
	fx_wait_error(f, "v2", "ControllerModifyVolume: plugin " PLUGIN ": INVALID_ARGUMENT", NULL);
	v = fx_get(f, a, "v2", NULL);
	assert_int_equal(v->pending_mutable.n, 1);
	assert_null(model_map_get(&v->mutable_parameters, "color"));
	arena_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_lifecycle, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
