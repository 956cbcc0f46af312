/*
 * Unit tests of the reconciler's queue (src/server/reconciler.c) in
 * virtual time, with the memory store and the scripted fake controller
 * (test/lib/reconciler_fixture.h): the backoff function and its cap on
 * the fake clock, the CSI outcome rules (ABORTED retried, INVALID_ARGUMENT
 * final and shown), one failing volume not delaying 100 others, every
 * volume enqueued at start, store changes followed (and a compacted change
 * log listed again), per-plugin serialization on real threads, and a
 * pass run on the caller's thread (reconciler_run), and what such a pass
 * tells before its write (reconciler_published) surviving a crash before
 * that write.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "reconciler_fixture.h"
#include "util/metrics.h"
#include "util/strbuf.h"
#include "server/reconcile_int.h"
#include "server/server_pastclaims.h"

/* Volumes per plugin in the threaded tests. */
#define THREADS_VOLUMES 24
/* Volumes of one transaction (test_threads_wake_passed_on). */
#define PASSED_ON_VOLUMES 8

/* ---- backoff ---- */

static void test_backoff_function(void **state)
{
	/* Doubling from the minimum, jitter within [3/4 d, d], capped. */
	for (int attempt = 1; attempt <= 40; attempt++) {
		int64_t full = attempt >= 14 ? 600000 : (int64_t)100 << (attempt - 1);
		int64_t lo = INT64_MAX, hi = 0;

		if (full > 600000)
			full = 600000;
		for (int i = 0; i < 200; i++) {
			char id[16];
			int64_t d;

			snprintf(id, sizeof(id), "v%d", i);
			d = reconciler_backoff_ms(attempt, 100, 600000, 7, STORE_VOLUME, id);
			assert_true(d >= full - full / 4 && d <= full);
			lo = d < lo ? d : lo;
			hi = d > hi ? d : hi;
		}
		/* Items failing together spread out. */
		if (full >= 400)
			assert_true(hi > lo);
	}
	/* Pure: the same inputs give the same delay; another seed another one somewhere. */
	assert_int_equal(reconciler_backoff_ms(3, 100, 600000, 7, STORE_VOLUME, "a"),
			 reconciler_backoff_ms(3, 100, 600000, 7, STORE_VOLUME, "a"));
	assert_int_equal(
	    reconciler_backoff_ms(INT32_MAX, 100, 600000, 1, STORE_SNAPSHOT, "x") <= 600000, 1);
}

static void test_backoff_virtual_time(void **state)
{
	struct rfx *t = *state;
	struct model_status st;
	char err[512];
	int64_t prev_next = 0;

	rfx_new(t);
	rfx_add(t, "v1", MODEL_VOL_CREATING, NULL);
	csi_fake_script(&t->fake, CSI_RPC_CREATE_VOLUME, CSI_UNAVAILABLE, 12);
	for (int attempt = 1; attempt <= 12; attempt++) {
		int64_t next = reconciler_step(t->r), delay = next - rfx_now(t);
		int64_t full = (int64_t)RFX_MIN_MS << (attempt - 1);

		if (full > RFX_MAX_MS)
			full = RFX_MAX_MS;
		assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CREATE_VOLUME), attempt);
		assert_true(delay >= full - full / 4 && delay <= full);
		assert_int_equal(rfx_status(t, "v1", &st, err, sizeof(err)), 0);
		assert_int_equal(st.attempts, attempt);
		assert_non_null(strstr(err, "UNAVAILABLE"));
		assert_int_equal(st.next_attempt_ms, RFX_WALL0 + (next - RFX_T0));
		assert_true(st.next_attempt_ms > prev_next);
		prev_next = st.next_attempt_ms;
		/* Nothing happens before the due time. */
		clock_fake_set(&t->clock, next - 1);
		assert_int_equal(reconciler_step(t->r), next);
		assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CREATE_VOLUME), attempt);
		clock_fake_set(&t->clock, next);
	}
	/* The script is spent: the next attempt works and the status clears. */
	rfx_run(t, RFX_MAX_MS);
	assert_int_equal(rfx_status(t, "v1", &st, err, sizeof(err)), CSID_ENOTFOUND);
	{
		struct arena *a = arena_new();
		struct model_volume *v = rfx_get(t, a, "v1");

		assert_int_equal(v->state, MODEL_VOL_READY);
		arena_free(a);
	}
}

/* ---- outcome rules ---- */

static void test_create(void **state)
{
	struct rfx *t = *state;
	struct arena *a = arena_new();
	struct model_volume *v;
	char ext[64];

	rfx_new(t);
	rfx_add(t, "v1", MODEL_VOL_CREATING,
		"\"name\": \"data-1\", \"parameters\": {\"k\": \"x\"}");
	rfx_run(t, 0);
	v = rfx_get(t, a, "v1");
	csi_fake_volume_id(&t->fake, "data-1", ext, sizeof(ext));
	assert_int_equal(v->state, MODEL_VOL_READY);
	assert_string_equal(v->external_id, ext);
	assert_int_equal(v->capacity, 1048576);
	assert_string_equal(model_map_get(&v->context, "fake"), "1");
	assert_int_equal(v->naccessible, 1);
	assert_string_equal(model_map_get(&v->accessible[0].segments, "zone"), "z1");
	assert_int_equal(t->fake.log[0].nsecrets, 1);
	assert_int_equal(t->fake.log[0].required_bytes, 1048576);
	/* Converged: worked again, it asks nothing of the plugin. */
	reconciler_enqueue(t->r, STORE_VOLUME, "v1");
	rfx_run(t, 0);
	assert_int_equal(t->fake.nlog, 1);
	arena_free(a);
}

/* Inactive (another server leads): nothing is worked; active again: everything is. */
static void test_inactive_works_nothing(void **state)
{
	struct rfx *t = *state;
	struct arena *a = arena_new();

	rfx_new(t);
	reconciler_set_active(t->r, false);
	rfx_add(t, "v1", MODEL_VOL_CREATING, "\"name\": \"data-1\"");
	reconciler_enqueue(t->r, STORE_VOLUME, "v1");
	assert_int_equal(reconciler_step(t->r), CLOCK_NEVER);
	assert_int_equal(t->fake.nlog, 0);
	assert_int_equal(rfx_get(t, a, "v1")->state, MODEL_VOL_CREATING);
	reconciler_set_active(t->r, true);
	rfx_run(t, 0);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CREATE_VOLUME), 1);
	assert_int_equal(rfx_get(t, a, "v1")->state, MODEL_VOL_READY);
	arena_free(a);
}

static void test_aborted_retried(void **state)
{
	struct rfx *t = *state;
	struct arena *a = arena_new();
	struct model_status st;
	char err[512];
	int queued, failing;

	rfx_new(t);
	rfx_add(t, "v1", MODEL_VOL_CREATING, NULL);
	csi_fake_script(&t->fake, CSI_RPC_CREATE_VOLUME, CSI_ABORTED, 2);
	reconciler_step(t->r);
	assert_int_equal(rfx_status(t, "v1", &st, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "volume v1: CreateVolume: plugin " RFX_PLUGIN ": ABORTED"));
	reconciler_counts(t->r, &queued, &failing);
	assert_int_equal(queued, 1);
	assert_int_equal(failing, 1);
	rfx_run(t, 10 * RFX_MIN_MS);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CREATE_VOLUME), 3);
	assert_int_equal(rfx_get(t, a, "v1")->state, MODEL_VOL_READY);
	reconciler_counts(t->r, &queued, &failing);
	assert_int_equal(queued, 0);
	assert_int_equal(failing, 0);
	arena_free(a);
}

static void test_invalid_argument_final(void **state)
{
	struct rfx *t = *state;
	struct arena *a = arena_new();
	struct model_status st;
	char err[512];

	rfx_new(t);
	rfx_add(t, "v1", MODEL_VOL_CREATING, NULL);
	csi_fake_script(&t->fake, CSI_RPC_CREATE_VOLUME, CSI_INVALID_ARGUMENT, 1);
	rfx_run(t, 10 * RFX_MAX_MS);
	/* Failed for good: recorded, shown, never sent again unchanged. */
	assert_int_equal(rfx_get(t, a, "v1")->state, MODEL_VOL_FAILED);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CREATE_VOLUME), 1);
	assert_int_equal(rfx_status(t, "v1", &st, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "INVALID_ARGUMENT"));
	assert_null(strstr(err, "s3cret"));
	assert_int_equal(st.attempts, 1);

	/* INVALID_ARGUMENT on publish: final, shown, tried again only at the cap. */
	rfx_add(t, "v2", MODEL_VOL_CREATING, NULL);
	rfx_run(t, 0);
	rfx_claim(t, "v2", "a1", "n1", MODEL_CLAIM_WRITE);
	csi_fake_script(&t->fake, CSI_RPC_CONTROLLER_PUBLISH_VOLUME, CSI_INVALID_ARGUMENT, 1);
	assert_int_equal(reconciler_step(t->r), rfx_now(t) + RFX_MAX_MS);
	assert_int_equal(rfx_status(t, "v2", &st, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "ControllerPublishVolume"));
	assert_non_null(strstr(err, "INVALID_ARGUMENT"));
	rfx_run(t, RFX_MAX_MS);
	assert_int_equal(rfx_get(t, a, "v2")->pubs[0].state, MODEL_PUB_PUBLISHED);
	assert_int_equal(rfx_status(t, "v2", &st, err, sizeof(err)), CSID_ENOTFOUND);
	arena_free(a);
}

/* A store write that fails after the RPC: retried, the RPC repeated idempotently. */
static void test_store_write_fails(void **state)
{
	struct rfx *t = *state;
	struct arena *a = arena_new();
	struct model_status st;
	char err[512];

	rfx_new(t);
	rfx_add(t, "v1", MODEL_VOL_CREATING, NULL);
	store_mem_fail_txn(t->store, CSID_EIO, 1);
	reconciler_step(t->r);
	assert_int_equal(rfx_status(t, "v1", &st, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "volume v1: store: "));
	assert_int_equal(st.attempts, 1);
	assert_int_equal(rfx_get(t, a, "v1")->state, MODEL_VOL_CREATING);
	rfx_run(t, RFX_MAX_MS);
	assert_int_equal(rfx_get(t, a, "v1")->state, MODEL_VOL_READY);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CREATE_VOLUME), 2);
	assert_int_equal(t->fake.nvols, 1);
	arena_free(a);
}

/* ---- the queue ---- */

static void test_failing_volume_does_not_delay_others(void **state)
{
	struct rfx *t = *state;
	struct arena *a = arena_new();
	struct model_status st;
	char err[512];
	int queued, failing, bad_calls;

	rfx_new(t);
	csi_fake_fail_volume(&t->fake, "bad", CSI_UNAVAILABLE);
	rfx_add(t, "bad", MODEL_VOL_CREATING, NULL);
	for (int i = 0; i < 100; i++) {
		char id[16];

		snprintf(id, sizeof(id), "ok-%03d", i);
		rfx_add(t, id, MODEL_VOL_CREATING, NULL);
	}
	/* One step at the start time creates all 100; the bad one backs off. */
	reconciler_step(t->r);
	for (int i = 0; i < 100; i++) {
		char id[16];

		snprintf(id, sizeof(id), "ok-%03d", i);
		assert_int_equal(rfx_get(t, a, id)->state, MODEL_VOL_READY);
	}
	assert_int_equal(rfx_now(t), RFX_T0);
	rfx_run(t, 100 * RFX_MAX_MS);
	assert_int_equal(rfx_status(t, "bad", &st, err, sizeof(err)), 0);
	assert_true(st.attempts > 10);
	assert_true(st.next_attempt_ms > 0);
	reconciler_counts(t->r, &queued, &failing);
	assert_int_equal(queued, 1);
	assert_int_equal(failing, 1);
	/*
	 * Its retries are spaced by the capped backoff (at least 3/4 of the cap
	 * once there), not a tight loop: about 7 to reach the cap, then one per
	 * 7.5 to 10 s of the 1000 s run.
	 */
	bad_calls = csi_fake_calls(&t->fake, CSI_RPC_CREATE_VOLUME) - 100;
	assert_true(bad_calls >= 100 && bad_calls <= 8 + 100 * 4 / 3 + 1);
	arena_free(a);
}

static void test_change_log_and_start_enqueue(void **state)
{
	struct rfx *t = *state;
	struct arena *a = arena_new();

	/* Volumes stored before the reconciler exists are all worked at start. */
	rfx_add(t, "v1", MODEL_VOL_CREATING, NULL);
	rfx_add(t, "v2", MODEL_VOL_CREATING, NULL);
	rfx_put_snap(t, "s1", "v1", MODEL_SNAP_CREATING, NULL);
	rfx_new(t);
	rfx_run(t, 0);
	assert_int_equal(rfx_get(t, a, "v1")->state, MODEL_VOL_READY);
	assert_int_equal(rfx_get(t, a, "v2")->state, MODEL_VOL_READY);
	assert_int_equal(rfx_get_snap(t, a, "s1")->state, MODEL_SNAP_READY);
	/* A store change enqueues its volume without anyone calling enqueue. */
	rfx_add(t, "v3", MODEL_VOL_CREATING, NULL);
	rfx_run(t, 0);
	assert_int_equal(rfx_get(t, a, "v3")->state, MODEL_VOL_READY);
	arena_free(a);
}

/* A change log compacted past the reconciler's position: it lists everything again. */
static void test_change_log_compacted(void **state)
{
	struct rfx *t = *state;
	struct arena *a = arena_new();
	struct store_op op = {STORE_OP_PUT, STORE_NODE, "n1", "{}", 2, STORE_ANY};
	struct err e;

	rfx_new(t);
	rfx_add(t, "v1", MODEL_VOL_CREATING, NULL);
	rfx_run(t, 0);
	rfx_add(t, "v2", MODEL_VOL_CREATING, NULL);
	for (int i = 0; i < STORE_CHANGES_KEEP + 2048; i++)
		assert_int_equal(store_txn(t->store, &op, 1, NULL, &e), 0);
	rfx_run(t, 0);
	assert_int_equal(rfx_get(t, a, "v2")->state, MODEL_VOL_READY);
	/* And it follows the log again from there. */
	rfx_add(t, "v3", MODEL_VOL_CREATING, NULL);
	rfx_run(t, 0);
	assert_int_equal(rfx_get(t, a, "v3")->state, MODEL_VOL_READY);
	arena_free(a);
}

/* A server write that queued its volume itself: a later write of another writer is followed. */
static void test_written_then_other_writer(void **state)
{
	struct rfx *t = *state;
	struct arena *a = arena_new();
	int calls = csi_fake_calls(&t->fake, CSI_RPC_CREATE_VOLUME);

	rfx_new(t);
	rfx_add(t, "v1", MODEL_VOL_CREATING, NULL);
	reconciler_written(t->r, STORE_VOLUME, "v1", store_index(t->store), false);
	rfx_run(t, 0);
	assert_int_equal(rfx_get(t, a, "v1")->state, MODEL_VOL_READY);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CREATE_VOLUME), calls + 1);
	rfx_add(t, "v1", MODEL_VOL_CREATING, NULL);
	rfx_run(t, 0);
	assert_int_equal(rfx_get(t, a, "v1")->state, MODEL_VOL_READY);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CREATE_VOLUME), calls + 2);
	arena_free(a);
}

/* ---- threads ---- */

/* Waits (real time, bounded) until volumes <prefix>-0..n-1 are ready. */
static void t_wait_ready(struct rfx *t, const char *prefix, int n, int timeout_ms)
{
	struct timespec ts = {0, 2 * 1000000L};
	int64_t end = clock_now_ms(clock_real()) + timeout_ms;

	for (;;) {
		struct arena *a = arena_new();
		int ready = 0;

		for (int i = 0; i < n; i++) {
			char id[32];
			struct model_volume *v;

			snprintf(id, sizeof(id), "%s-%d", prefix, i);
			v = rfx_get(t, a, id);
			ready += v != NULL && v->state == MODEL_VOL_READY;
		}
		arena_free(a);
		if (ready == n)
			return;
		assert_true(clock_now_ms(clock_real()) < end);
		nanosleep(&ts, NULL);
	}
}

static void t_add_on(struct rfx *t, const char *id, const char *plugin)
{
	struct arena *a = arena_new();
	struct model_volume *v = rfx_spec(a, id, NULL);

	v->plugin_id = (char *)plugin;
	v->state = MODEL_VOL_CREATING;
	rfx_put_volume(t, v);
	arena_free(a);
}

/*
 * Workers on real threads: controller RPCs to one plugin never exceed its
 * concurrency, whatever the number of workers; volumes stored before the
 * start are enqueued by it, those stored after by the change-log follower.
 */
static void t_threads(struct rfx *t, int concurrency)
{
	struct err e;
	char id[32];

	t->cfg.clock = NULL;
	t->cfg.workers = 4;
	t->cfg.plugin_concurrency = concurrency;
	t->fake.delay_ms = 2;
	t->fake2.delay_ms = 2;
	rfx_new(t);
	for (int i = 0; i < THREADS_VOLUMES; i++) {
		snprintf(id, sizeof(id), "a-%d", i);
		t_add_on(t, id, RFX_PLUGIN);
	}
	assert_int_equal(reconciler_start(t->r, &e), 0);
	for (int i = 0; i < THREADS_VOLUMES; i++) {
		snprintf(id, sizeof(id), "b-%d", i);
		t_add_on(t, id, RFX_PLUGIN2);
	}
	t_wait_ready(t, "a", THREADS_VOLUMES, 20000);
	t_wait_ready(t, "b", THREADS_VOLUMES, 20000);
	reconciler_stop(t->r);
	assert_int_equal(t->fake.nlog, THREADS_VOLUMES);
	assert_int_equal(t->fake2.nlog, THREADS_VOLUMES);
	assert_true(t->fake.max_in_flight >= 1 && t->fake.max_in_flight <= concurrency);
	assert_true(t->fake2.max_in_flight >= 1 && t->fake2.max_in_flight <= concurrency);
	assert_int_equal(t->fake.in_flight, 0);
}

static void test_threads_serialized(void **state)
{
	t_threads(*state, 1);
}

static void test_threads_concurrency_two(void **state)
{
	t_threads(*state, 2);
}

/* Starts t's reconciler on the real clock: workers threads, the fake plugin's delay per call. */
static void t_start_threads(struct rfx *t, int workers, int concurrency, int delay_ms)
{
	struct err e;

	t->cfg.clock = NULL;
	t->cfg.workers = workers;
	t->cfg.plugin_concurrency = concurrency;
	t->fake.delay_ms = delay_ms;
	rfx_new(t);
	assert_int_equal(reconciler_start(t->r, &e), 0);
}

/*
 * Items queued together are worked in parallel: the follower queues the
 * volumes of one transaction with one wake (rec_signal sends none while
 * a worker woken is not back), and the worker that takes the first
 * passes the wake on. Without that, the others slept until the first
 * was done: one CreateVolume at a time.
 */
static void test_threads_wake_passed_on(void **state)
{
	struct rfx *t = *state;
	struct store_op ops[PASSED_ON_VOLUMES];
	char *json[PASSED_ON_VOLUMES];
	size_t len[PASSED_ON_VOLUMES];
	struct arena *a = arena_new();
	struct err e;

	t_start_threads(t, 4, 4, 50);
	for (int i = 0; i < PASSED_ON_VOLUMES; i++) {
		struct model_volume *v = rfx_spec(a, arena_printf(a, "p-%d", i), NULL);

		v->state = MODEL_VOL_CREATING;
		assert_int_equal(model_volume_encode(v, MODEL_VIEW_STORE, &json[i], &len[i], &e),
				 0);
		ops[i] = (struct store_op){STORE_OP_PUT, STORE_VOLUME, v->id,
					   json[i],      len[i],       STORE_ANY};
	}
	assert_int_equal(store_txn(t->store, ops, PASSED_ON_VOLUMES, NULL, &e), 0);
	t_wait_ready(t, "p", PASSED_ON_VOLUMES, 20000);
	reconciler_stop(t->r);
	assert_int_equal(t->fake.nlog, PASSED_ON_VOLUMES);
	assert_true(t->fake.max_in_flight >= 2);
	for (int i = 0; i < PASSED_ON_VOLUMES; i++)
		model_wipe_free(json[i], len[i]);
	arena_free(a);
}

/* Volume passes with outcome so far (csid_reconciler_steps_total, process-wide). */
static double t_passes(const char *outcome)
{
	struct strbuf b = {.max = 1 << 20};
	char key[128];
	const char *at;
	double n = 0;

	snprintf(key, sizeof(key), "csid_reconciler_steps_total{kind=\"volume\",outcome=\"%s\"} ",
		 outcome);
	assert_int_equal(metrics_render(metrics_default(), &b), 0);
	at = b.p ? strstr(b.p, key) : NULL;
	if (at)
		n = strtod(at + strlen(key), NULL);
	strbuf_free(&b);
	return n;
}

/* Idle volume passes so far. */
static double t_idle_passes(void)
{
	return t_passes("idle");
}

/*
 * Waits (real time, bounded) until the follower has read index and nothing is queued.
 * The follower's index first: the follower queues what it read in the
 * same hold of the lock that moves its index, so a queue read after is
 * one with those items (or their passes done). Read the other way round,
 * an empty queue from before the follower's read and its index from after
 * it passed for settled while the pass had not run (1 run in 48 of the
 * unit test on a loaded machine: one pass counted in the next phase).
 */
static void t_wait_settled(struct rfx *t, uint64_t index)
{
	struct timespec ts = {0, 1000000L};
	int64_t end = clock_now_ms(clock_real()) + 10000;
	int queued = 1;

	for (;;) {
		bool read = reconciler_follow_index(t->r) >= index;

		reconciler_counts(t->r, &queued, NULL);
		if (read && queued == 0)
			return;
		assert_true(clock_now_ms(clock_real()) < end);
		nanosleep(&ts, NULL);
	}
}

/* Starts t's reconciler on the real clock with one worker thread. */
static void t_start_real(struct rfx *t)
{
	struct err e;

	t->cfg.clock = NULL;
	t->cfg.workers = 1;
	rfx_new(t);
	assert_int_equal(reconciler_start(t->r, &e), 0);
}

/*
 * On threads: a write whose writer queued the volume and said so
 * (reconciler_written) costs one pass, however late the follower reads
 * it (without it, the follower queued the volume again after the pass).
 */
static void test_written_one_pass(void **state)
{
	struct rfx *t = *state;
	double idle;

	t_start_real(t);
	for (int i = 0; i < 20; i++) {
		rfx_add(t, "v1", MODEL_VOL_READY, NULL);
		t_wait_settled(t, store_index(t->store));
		idle = t_idle_passes();
		rfx_add(t, "v1", MODEL_VOL_READY, NULL);
		reconciler_written(t->r, STORE_VOLUME, "v1", store_index(t->store), false);
		t_wait_settled(t, store_index(t->store));
		assert_int_equal((int)(t_idle_passes() - idle), 1);
	}
	reconciler_stop(t->r);
}

/*
 * On threads: a step that leaves the volume needing nothing more (a
 * create) is its only pass; no second pass reads it back to find that
 * (rv_write's settled). A change afterwards still gets its pass.
 */
static void test_step_settled_one_pass(void **state)
{
	struct rfx *t = *state;
	struct timespec ts = {0, 1000000L};
	struct arena *a = arena_new();
	double idle, done;
	char id[16];

	t_start_real(t);
	for (int i = 0; i < 5; i++) {
		int64_t end = clock_now_ms(clock_real()) + 10000;

		snprintf(id, sizeof(id), "v%d", i);
		idle = t_idle_passes();
		done = t_passes("done");
		rfx_add(t, id, MODEL_VOL_CREATING, NULL);
		while (rfx_get(t, a, id)->state != MODEL_VOL_READY) {
			assert_true(clock_now_ms(clock_real()) < end);
			nanosleep(&ts, NULL);
		}
		t_wait_settled(t, store_index(t->store));
		assert_int_equal((int)(t_passes("done") - done), 1);
		assert_int_equal((int)(t_idle_passes() - idle), 0);
		/* Changed afterwards: worked again, and found converged. */
		rfx_add(t, id, MODEL_VOL_READY, NULL);
		t_wait_settled(t, store_index(t->store));
		assert_int_equal((int)(t_idle_passes() - idle), 1);
	}
	assert_int_equal(t->fake.nlog, 5);
	reconciler_stop(t->r);
	arena_free(a);
}

/* Waits (real time, bounded) until fake has n calls in flight. */
static void t_wait_in_flight(struct csi_fake *fake, int n)
{
	struct timespec ts = {0, 1000000L};
	int64_t end = clock_now_ms(clock_real()) + 10000;
	int in_flight = -1;

	while (in_flight != n) {
		pthread_mutex_lock(&fake->mu);
		in_flight = fake->in_flight;
		pthread_mutex_unlock(&fake->mu);
		assert_true(clock_now_ms(clock_real()) < end);
		nanosleep(&ts, NULL);
	}
}

/*
 * Keeps the only worker in a pass on the second plugin (its calls take a
 * second), so that what the test runs on its own threads is not taken
 * by the worker first.
 */
static void t_hold_worker(struct rfx *t, const char *id)
{
	t->fake2.delay_ms = 1000;
	t_add_on(t, id, RFX_PLUGIN2);
	t_wait_in_flight(&t->fake2, 1);
}

/*
 * reconciler_run: with the workers started, the pass runs on the calling
 * thread (the volume is created when the call returns) and the check
 * pass after it is left to a worker; without workers (virtual time), or
 * while inactive, nothing runs here and the item is queued as by
 * reconciler_written.
 */
static void test_run_here(void **state)
{
	struct rfx *t = *state;
	struct arena *a = arena_new();
	int calls = csi_fake_calls(&t->fake, CSI_RPC_CREATE_VOLUME);
	struct err e;

	t->cfg.clock = NULL;
	t->cfg.workers = 1;
	rfx_new(t);
	rfx_add(t, "v0", MODEL_VOL_CREATING, NULL);
	assert_false(reconciler_run(t->r, STORE_VOLUME, "v0", store_index(t->store), false));
	assert_int_equal(rfx_get(t, a, "v0")->state, MODEL_VOL_CREATING);
	assert_int_equal(reconciler_start(t->r, &e), 0);
	t_wait_settled(t, store_index(t->store));
	assert_int_equal(rfx_get(t, a, "v0")->state, MODEL_VOL_READY);
	reconciler_set_active(t->r, false);
	rfx_add(t, "v1", MODEL_VOL_CREATING, NULL);
	assert_false(reconciler_run(t->r, STORE_VOLUME, "v1", store_index(t->store), false));
	assert_int_equal(rfx_get(t, a, "v1")->state, MODEL_VOL_CREATING);
	reconciler_set_active(t->r, true);
	t_wait_settled(t, store_index(t->store));
	t_hold_worker(t, "block");
	rfx_add(t, "v2", MODEL_VOL_CREATING, NULL);
	assert_true(reconciler_run(t->r, STORE_VOLUME, "v2", store_index(t->store), false));
	assert_int_equal(rfx_get(t, a, "v2")->state, MODEL_VOL_READY);
	t_wait_settled(t, store_index(t->store));
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CREATE_VOLUME), calls + 3);
	reconciler_stop(t->r);
	arena_free(a);
}

struct t_run_arg {
	struct rfx *t;
	bool ran;
};

static void *t_run_thread(void *p)
{
	struct t_run_arg *arg = p;

	arg->ran =
	    reconciler_run(arg->t->r, STORE_VOLUME, "held", store_index(arg->t->store), false);
	return NULL;
}

/* Passes on callers' threads are bounded by cfg.workers: a hung plugin holds no more. */
static void test_run_here_bounded(void **state)
{
	struct rfx *t = *state;
	struct t_run_arg arg = {.t = t};
	struct arena *a = arena_new();
	pthread_t th;

	t_start_threads(t, 1, 2, 1000);
	t_hold_worker(t, "block");
	t_add_on(t, "held", RFX_PLUGIN);
	assert_int_equal(pthread_create(&th, NULL, t_run_thread, &arg), 0);
	t_wait_in_flight(&t->fake, 1);
	/* One caller's thread is in a pass already: this one is left to the worker. */
	t_add_on(t, "other", RFX_PLUGIN);
	assert_false(reconciler_run(t->r, STORE_VOLUME, "other", store_index(t->store), false));
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_true(arg.ran);
	t_wait_settled(t, store_index(t->store));
	assert_int_equal(rfx_get(t, a, "other")->state, MODEL_VOL_READY);
	assert_int_equal(rfx_get(t, a, "held")->state, MODEL_VOL_READY);
	reconciler_stop(t->r);
	arena_free(a);
}

/*
 * A pass on the caller's thread over a write the follower has read
 * already, with nothing to do: the item leaves the reconciler at the end
 * of the pass (nothing is left for the follower to see), and the caller
 * does not touch it after (under ASan, a use after free before).
 */
static void test_run_here_after_follower(void **state)
{
	struct rfx *t = *state;
	struct arena *a = arena_new();
	double idle;

	t_start_real(t);
	rfx_add(t, "v1", MODEL_VOL_READY, NULL);
	t_wait_settled(t, store_index(t->store));
	idle = t_idle_passes();
	assert_true(reconciler_run(t->r, STORE_VOLUME, "v1", store_index(t->store), false));
	assert_int_equal((int)(t_idle_passes() - idle), 1);
	assert_int_equal(rfx_get(t, a, "v1")->state, MODEL_VOL_READY);
	t_wait_settled(t, store_index(t->store));
	reconciler_stop(t->r);
	arena_free(a);
}

/*
 * The same when the follower reads the write before its writer says so
 * (a writer descheduled between the two): the follower's pass reads the
 * write, so the writer's word queues no second, idle one. A restart
 * still does (see reconciler_written).
 */
static void test_written_after_follower(void **state)
{
	struct rfx *t = *state;
	double idle;

	t_start_real(t);
	rfx_add(t, "v1", MODEL_VOL_READY, NULL);
	t_wait_settled(t, store_index(t->store));
	for (int i = 0; i < 5; i++) {
		idle = t_idle_passes();
		rfx_add(t, "v1", MODEL_VOL_READY, NULL);
		t_wait_settled(t, store_index(t->store));
		assert_int_equal((int)(t_idle_passes() - idle), 1);
		reconciler_written(t->r, STORE_VOLUME, "v1", store_index(t->store), false);
		t_wait_settled(t, store_index(t->store));
		assert_int_equal((int)(t_idle_passes() - idle), 1);
		reconciler_written(t->r, STORE_VOLUME, "v1", store_index(t->store), true);
		t_wait_settled(t, store_index(t->store));
		assert_int_equal((int)(t_idle_passes() - idle), 2);
	}
	reconciler_stop(t->r);
}

/* What a pass on the caller's thread told (reconciler_published), and what the store held then. */
struct t_told {
	struct rfx *t;
	int calls;
	int told; /* the node's publication state told, -1: none */
	int stored; /* the same in the store while it was told */
};

static void t_told_fn(void *ctx, struct model_volume *v)
{
	struct t_told *told = ctx;
	struct arena *a = arena_new();
	const struct model_publication *p = model_volume_pub(v, "n1");

	told->calls++;
	told->told = p ? (int)p->state : -1;
	p = model_volume_pub(rfx_get(told->t, a, "v1"), "n1");
	told->stored = p ? (int)p->state : -1;
	arena_free(a);
}

/*
 * A claim of v1 by a1 on n1, then a pass on this thread that tells
 * (reconciler_published) and whose write fails, as if the process died
 * between a claim's answer sent from what it told and the write: told
 * once, the publication published with ControllerPublishVolume done while
 * the store still shows it publishing, and after the failed write the
 * claim is claimed and the publication publishing. Then a new reconciler
 * over the same store, in virtual time (the restarted server).
 */
static void t_told_then_crash(struct rfx *t)
{
	struct arena *a = arena_new();
	struct t_told told = {.t = t};
	struct reconciler_published pub = {t_told_fn, &told};
	struct model_volume *v;

	t_start_real(t);
	rfx_add(t, "v1", MODEL_VOL_CREATING, NULL);
	t_wait_settled(t, store_index(t->store));
	assert_int_equal(rfx_get(t, a, "v1")->state, MODEL_VOL_READY);
	t_hold_worker(t, "block");
	rfx_claim(t, "v1", "a1", "n1", MODEL_CLAIM_WRITE);
	store_mem_fail_txn(t->store, CSID_EIO, 1);
	assert_true(
	    reconciler_run_published(t->r, STORE_VOLUME, "v1", store_index(t->store), false, &pub));
	assert_int_equal(told.calls, 1);
	assert_int_equal(told.told, MODEL_PUB_PUBLISHED);
	assert_int_equal(told.stored, MODEL_PUB_PUBLISHING);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_PUBLISH_VOLUME), 1);
	v = rfx_get(t, a, "v1");
	assert_int_equal(v->npubs, 1);
	assert_int_equal(v->pubs[0].state, MODEL_PUB_PUBLISHING);
	assert_int_equal(v->nclaims, 1);
	assert_int_equal(v->claims[0].state, MODEL_CLAIM_CLAIMED);
	/* The crash: nothing of this reconciler runs again. */
	reconciler_stop(t->r);
	reconciler_free(t->r);
	t->fake2.delay_ms = 0;
	t->cfg.clock = &t->clock.base;
	t->cfg.workers = 0;
	rfx_new(t);
	arena_free(a);
}

/*
 * After that crash the allocation releases its claim: the restarted
 * reconciler unpublishes the node (ControllerUnpublishVolume with the
 * plugin's node ID the claim recorded) and frees the claim, so a
 * publication that was answered but never recorded is not forgotten.
 */
static void test_published_told_then_crash_released(void **state)
{
	struct rfx *t = *state;
	struct arena *a = arena_new();
	struct model_volume *v;
	const struct csi_fake_call *last = NULL;

	t_told_then_crash(t);
	rfx_move(t, "v1", "a1", MODEL_CLAIM_NODE_UNPUBLISHED);
	rfx_run(t, RFX_MAX_MS);
	v = rfx_get(t, a, "v1");
	assert_int_equal(v->npubs, 0);
	assert_int_equal(v->nclaims, 0);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME), 1);
	for (int i = 0; i < t->fake.nlog; i++)
		if (t->fake.log[i].rpc == CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME)
			last = &t->fake.log[i];
	assert_non_null(last);
	assert_string_equal(last->node, "p-n1");
	/* Freed: in the volume's claim history. */
	assert_int_equal(server_pastclaims_read(t->store, v, a, NULL), 0);
	assert_true(v->npast_claims >= 1);
	assert_string_equal(v->past_claims[v->npast_claims - 1].alloc_id, "a1");
	assert_int_equal(v->past_claims[v->npast_claims - 1].state, MODEL_CLAIM_FREED);
	arena_free(a);
}

/*
 * After that crash the claim is still held: the restarted reconciler
 * publishes the node again (ControllerPublishVolume is idempotent) and
 * records it, the claim as it was.
 */
static void test_published_told_then_crash_kept(void **state)
{
	struct rfx *t = *state;
	struct arena *a = arena_new();
	struct model_volume *v;

	t_told_then_crash(t);
	rfx_run(t, RFX_MAX_MS);
	v = rfx_get(t, a, "v1");
	assert_int_equal(v->npubs, 1);
	assert_int_equal(v->pubs[0].state, MODEL_PUB_PUBLISHED);
	assert_int_equal(v->nclaims, 1);
	assert_int_equal(v->claims[0].state, MODEL_CLAIM_CLAIMED);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_PUBLISH_VOLUME), 2);
	assert_int_equal(csi_fake_calls(&t->fake, CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME), 0);
	arena_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_backoff_function),
	    cmocka_unit_test_setup_teardown(test_backoff_virtual_time, rfx_setup, rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_create, rfx_setup, rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_step_settled_one_pass, rfx_setup, rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_inactive_works_nothing, rfx_setup, rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_aborted_retried, rfx_setup, rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_invalid_argument_final, rfx_setup, rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_store_write_fails, rfx_setup, rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_failing_volume_does_not_delay_others, rfx_setup,
					    rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_change_log_and_start_enqueue, rfx_setup,
					    rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_change_log_compacted, rfx_setup, rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_written_then_other_writer, rfx_setup,
					    rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_written_one_pass, rfx_setup, rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_run_here, rfx_setup, rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_run_here_bounded, rfx_setup, rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_run_here_after_follower, rfx_setup, rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_written_after_follower, rfx_setup, rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_threads_serialized, rfx_setup, rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_threads_concurrency_two, rfx_setup, rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_threads_wake_passed_on, rfx_setup, rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_published_told_then_crash_released, rfx_setup,
					    rfx_teardown),
	    cmocka_unit_test_setup_teardown(test_published_told_then_crash_kept, rfx_setup,
					    rfx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
