/*
 * Unit tests of the node's claim flow (src/agent/claims*.c) against a
 * fake csid server (test/lib/claims_fake.h), the mounter over the fake
 * node plugin (test/lib/mounter_test.h) and a fake clock in auto-advance
 * mode, so the flow's waits (a claim retried, a 60 s publication wait,
 * the releases' backoff) run in virtual time. The module runs without a
 * thread of its own: the tests step claims_step. The owner test uses the
 * real owner watch on a real child process.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include <sqlite3.h>

#include "agent/claims.h"
#include "child_proc.h"
#include "claims_fake.h"
#include "mounter_test.h"

#define T0 1000000
#define WALL0 1700000000000
#define NODE "node-1"

struct ct {
	struct clock_fake clock;
	struct mt_env env;
	struct claims_fake fake;
	struct held_allocs *held;
	struct claims *c;
	struct claims_fake_volume *vol;
	/* A fingerprint report taken as the next claim request arrives, if armed. */
	bool snap_armed;
	uint64_t snap_seq; /* its generation */
	bool snap_claimed; /* whether the fake server held the claim of alloc-1 then */
};

/*
 * The fake server's on_request: a claim arrives, not yet recorded, and the
 * armed report is built now (as a heartbeat of the server link may be).
 */
static void ct_claim_arrives(void *ctx, const char *method, const char *path)
{
	struct ct *t = ctx;

	if (!t->snap_armed || strcmp(method, "PUT") != 0 || !strstr(path, "/claim"))
		return;
	t->snap_armed = false;
	t->snap_seq = held_allocs_seq(t->held);
	t->snap_claimed = claims_fake_claimed(&t->fake, "vol-1", "alloc-1");
}

static void ct_open_claims(struct ct *t)
{
	struct claims_config cfg = {
	    .node_name = NODE,
	    .mounter = t->env.m,
	    .lookup = mt_lookup,
	    .lookup_ctx = &t->env,
	    .held = t->held,
	    .client = &t->fake.base,
	    .db_path = t->env.db,
	    .clock = &t->clock.base,
	    .manual = true,
	};
	struct err e;

	err_clear(&e);
	if (claims_new(&cfg, &t->c, &e))
		fail_msg("claims_new: %s", e.msg);
}

static int ct_setup(void **state)
{
	struct ct *t = calloc(1, sizeof(*t));
	struct err e;

	if (!t)
		return -1;
	clock_fake_init(&t->clock, T0, WALL0);
	clock_fake_set_auto_advance(&t->clock, true);
	mt_env_open(&t->env, true);
	claims_fake_init(&t->fake, NODE, &t->clock);
	t->vol = claims_fake_add(&t->fake, "vol-1", MT_PLUGIN, "single-node-writer");
	t->fake.on_request = ct_claim_arrives;
	t->fake.on_request_ctx = t;
	if (held_allocs_new(NULL, NULL, &t->held, &e))
		return -1;
	held_allocs_attach(t->held, t->env.m);
	ct_open_claims(t);
	*state = t;
	return 0;
}

static int ct_teardown(void **state)
{
	struct ct *t = *state;

	claims_free(t->c);
	held_allocs_free(t->held);
	mt_env_close(&t->env);
	claims_fake_destroy(&t->fake);
	clock_fake_destroy(&t->clock);
	free(t);
	return 0;
}

static int64_t ct_now(struct ct *t)
{
	return clock_now_ms(&t->clock.base);
}

static bool ct_mounted(struct ct *t, const char *vol, const char *alloc)
{
	bool on = false;
	struct err e;

	assert_int_equal(mounter_has_mount(t->env.m, vol, alloc, &on, &e), 0);
	return on;
}

/* Whether vol's mount record for alloc carries the claim flow's mark. */
static bool ct_marked(struct ct *t, const char *vol, const char *alloc)
{
	struct mount_record *rec = NULL;
	struct err e;
	bool on;

	assert_int_equal(mounter_get(t->env.m, vol, alloc, &rec, &e), 0);
	on = rec->claimed;
	mount_record_free(rec);
	return on;
}

static int ct_mount(struct ct *t, const char *alloc, struct claims_mount_result *res, struct err *e)
{
	struct claims_mount_req req = {.volume_id = "vol-1", .alloc_id = alloc};

	err_clear(e);
	return claims_mount(t->c, &req, res, e);
}

/* Mount: claimed, staged and published; unmount: unpublished, then released. */
static void test_mount_happy_path(void **state)
{
	struct ct *t = *state;
	struct claims_mount_result res;
	struct claims_unmount_result ur;
	struct err e;

	assert_int_equal(ct_mount(t, "alloc-1", &res, &e), 0);
	assert_true(claims_fake_claimed(&t->fake, "vol-1", "alloc-1"));
	/* One request: the claim that waits, answered with the node-stage data. */
	assert_int_equal(t->fake.requests, 1);
	assert_int_equal(t->fake.claim_waits, 1);
	assert_int_equal(t->fake.stage_answers, 1);
	assert_int_equal(t->fake.stage_reads, 0);
	assert_int_equal(t->fake.volume_reads, 0);
	assert_non_null(strstr(res.path, "alloc-1"));
	assert_false(res.is_device);
	assert_string_equal(res.access_mode, "single-node-writer");
	assert_string_equal(res.attachment_mode, "file-system");
	assert_true(ct_mounted(t, "vol-1", "alloc-1"));
	/* No time passed: nothing waited. */
	assert_int_equal(ct_now(t), T0);
	mt_check(&t->env, true);

	err_clear(&e);
	assert_int_equal(claims_unmount(t->c, "vol-1", "alloc-1", NULL, &ur, &e), 0);
	assert_true(ur.unmounted);
	assert_true(ur.released);
	assert_false(ur.release_pending);
	assert_true(t->fake.last_reason_null);
	assert_false(claims_fake_claimed(&t->fake, "vol-1", "alloc-1"));
	mt_check_empty(&t->env);

	/* Again: nothing mounted and no claim is done, not an error. */
	err_clear(&e);
	assert_int_equal(claims_unmount(t->c, "vol-1", "alloc-1", "why", &ur, &e), 0);
	assert_false(ur.unmounted);
	assert_false(ur.released);
	assert_false(ur.release_pending);
}

/*
 * A plugin that needs ControllerPublishVolume: the claim waits on the
 * server until published and brings the publication and the node-stage
 * data, in one request.
 */
static void test_mount_waits_for_publication(void **state)
{
	struct ct *t = *state;
	struct claims_mount_result res;
	struct err e;

	t->vol->controller_required = true;
	t->vol->auto_publish = true;
	assert_int_equal(ct_mount(t, "alloc-1", &res, &e), 0);
	assert_int_equal(t->fake.requests, 1);
	assert_int_equal(t->fake.claim_waits, 1);
	assert_int_equal(t->fake.blocking_queries, 0);
	assert_int_equal(t->fake.stage_answers, 1);
	assert_int_equal(ct_now(t), T0);
	assert_true(ct_mounted(t, "vol-1", "alloc-1"));
	/* The node-stage secrets and mount flags went to the plugin, never to the database. */
	mt_assert_no_secret_in_db(&t->env);
}

/*
 * Not published within the claim's wait: the mount follows the volume
 * with blocking queries, then reads the node-stage data, as before.
 */
static void test_mount_follows_after_claim_wait(void **state)
{
	struct ct *t = *state;
	struct claims_mount_result res;
	struct err e;

	t->vol->controller_required = true;
	t->vol->auto_publish = true;
	t->vol->publish_after = 1;
	assert_int_equal(ct_mount(t, "alloc-1", &res, &e), 0);
	assert_int_equal(t->fake.claims_put, 1);
	assert_int_equal(t->fake.claim_waits, 1);
	assert_int_equal(t->fake.stage_answers, 0);
	assert_int_equal(t->fake.blocking_queries, 1);
	assert_int_equal(t->fake.stage_reads, 1);
	assert_int_equal(t->fake.volume_reads, 1);
	assert_int_equal(ct_now(t), T0 + 10000);
	assert_string_equal(res.access_mode, "single-node-writer");
	assert_true(ct_mounted(t, "vol-1", "alloc-1"));
	mt_assert_no_secret_in_db(&t->env);
}

/*
 * A server from before the claim that waits refuses a claim without
 * access_mode: nothing was claimed, the mount reads the volume, claims
 * with its capability, follows and reads the node-stage data; the next
 * mount goes that way at once. A mount naming its access mode is
 * granted by such a server at the first claim, and followed the same way.
 */
static void test_old_server_fallback(void **state)
{
	struct ct *t = *state;
	struct claims_mount_req req = {
	    .volume_id = "vol-1", .alloc_id = "alloc-3", .access_mode = "single-node-writer"};
	struct claims_mount_result res;
	struct err e;

	t->fake.old_server = true;
	t->vol->controller_required = true;
	t->vol->auto_publish = true;
	assert_int_equal(ct_mount(t, "alloc-1", &res, &e), 0);
	assert_int_equal(t->fake.claims_put, 2);
	assert_int_equal(t->fake.claim_waits, 0);
	assert_int_equal(t->fake.volume_reads, 2); /* before the claim, then followed */
	assert_int_equal(t->fake.blocking_queries, 1);
	assert_int_equal(t->fake.stage_reads, 1);
	assert_string_equal(res.access_mode, "single-node-writer");
	assert_true(ct_mounted(t, "vol-1", "alloc-1"));

	/* Known now: one claim, the older flow. */
	assert_int_equal(ct_mount(t, "alloc-2", &res, &e), 0);
	assert_int_equal(t->fake.claims_put, 3);
	assert_int_equal(t->fake.stage_reads, 2);
	assert_true(ct_mounted(t, "vol-1", "alloc-2"));

	/* A module that has not learnt it yet, and a mount naming its mode. */
	claims_free(t->c);
	ct_open_claims(t);
	err_clear(&e);
	assert_int_equal(claims_mount(t->c, &req, &res, &e), 0);
	assert_int_equal(t->fake.claims_put, 4);
	assert_int_equal(t->fake.claim_waits, 0);
	assert_int_equal(t->fake.stage_reads, 3);
	assert_true(ct_mounted(t, "vol-1", "alloc-3"));
}

/* A refused claim is the server's code and message; nothing mounted. */
static void test_claim_refused(void **state)
{
	struct ct *t = *state;
	struct claims_mount_result res;
	struct err e;

	t->fake.claim_status = 409;
	snprintf(t->fake.claim_code, sizeof(t->fake.claim_code), "conflict");
	assert_int_equal(ct_mount(t, "alloc-1", &res, &e), CSID_ECONFLICT);
	assert_non_null(strstr(e.msg, "claim vol-1 for alloc-1"));
	assert_non_null(strstr(e.msg, "held by alloc other on node-9"));
	assert_int_equal(t->fake.claims_put, 1);
	assert_int_equal(t->fake.stage_reads, 0);
	assert_false(ct_mounted(t, "vol-1", "alloc-1"));
	mt_check_empty(&t->env);
}

/* failed_precondition (volume or fingerprint not ready) is retried with backoff. */
static void test_claim_retried_while_not_ready(void **state)
{
	struct ct *t = *state;
	struct claims_mount_result res;
	struct err e;

	t->fake.claim_precond = 3;
	assert_int_equal(ct_mount(t, "alloc-1", &res, &e), 0);
	assert_int_equal(t->fake.claims_put, 4);
	/* Pauses of 200, 400 and 800 ms, in virtual time. */
	assert_int_equal(ct_now(t), T0 + 1400);
	assert_true(ct_mounted(t, "vol-1", "alloc-1"));
}

/* One step at the clock's now: whether it sent a release request. */
static bool ct_step_sent(struct ct *t, int64_t *due)
{
	int before = claims_fake_releases(&t->fake);

	*due = claims_step(t->c);
	return claims_fake_releases(&t->fake) > before;
}

/*
 * The module restarts while the server is down, then the server comes
 * back: the first step sends the recorded release, which frees the claim.
 */
static void ct_restart_and_send(struct ct *t, int64_t *due)
{
	claims_free(t->c);
	t->c = NULL;
	ct_open_claims(t);
	claims_fake_set_down(&t->fake, false);
	assert_true(ct_step_sent(t, due));
	assert_int_equal(t->fake.releases_ok, 1);
	assert_false(claims_fake_claimed(&t->fake, "vol-1", "alloc-1"));
	/* A release needs only the answer's status: its body (the volume) is never parsed. */
	assert_true(t->fake.releases > 0);
	assert_int_equal(t->fake.unwanted, t->fake.releases);
}

/*
 * A publication that never comes: CSID_ETIMEDOUT after 60 s, with the
 * volume's last error; the claim is released at once.
 */
static void test_publication_wait_timeout(void **state)
{
	struct ct *t = *state;
	struct claims_mount_result res;
	struct err e;

	t->vol->controller_required = true;
	assert_int_equal(ct_mount(t, "alloc-1", &res, &e), CSID_ETIMEDOUT);
	assert_non_null(strstr(e.msg, "not published to node node-1 after 60s (pending)"));
	assert_non_null(strstr(e.msg, "controller busy"));
	/* The claim waited 5 s, then the volume was followed for 60 s. */
	assert_true(ct_now(t) >= T0 + 5000 + CLAIMS_WAIT_MS);
	assert_int_equal(t->fake.claim_waits, 1);
	assert_int_equal(t->fake.blocking_queries, CLAIMS_WAIT_MS / 5000);
	assert_int_equal(t->fake.stage_reads, 0);
	assert_false(ct_mounted(t, "vol-1", "alloc-1"));
	/* The claim is released at once, with why. */
	assert_non_null(strstr(e.msg, "the claim was released"));
	assert_false(claims_fake_claimed(&t->fake, "vol-1", "alloc-1"));
	assert_int_equal(t->fake.releases_ok, 1);
	assert_non_null(strstr(t->fake.last_reason, "mount failed: "));
	assert_non_null(strstr(t->fake.last_reason, "not published to node node-1"));
}

/*
 * The plugin fails after the claim: the claim is released at once with
 * the failure as its reason (one line), nothing stays pending; an
 * unmount afterwards finds nothing to do.
 */
static void test_mount_failure_after_claim(void **state)
{
	struct ct *t = *state;
	struct claims_mount_result res;
	struct claims_unmount_result ur;
	int64_t due;
	struct err e;

	t->env.fake.fail_at = 0;
	t->env.fake.fail_code = 13; /* INTERNAL */
	assert_int_not_equal(ct_mount(t, "alloc-1", &res, &e), 0);
	assert_non_null(strstr(e.msg, "not mounted; the claim was released"));
	assert_false(claims_fake_claimed(&t->fake, "vol-1", "alloc-1"));
	assert_int_equal(t->fake.releases, 1);
	assert_int_equal(t->fake.releases_ok, 1);
	assert_false(t->fake.last_reason_null);
	assert_int_equal(strncmp(t->fake.last_reason, "mount failed: ", 14), 0);
	assert_true(strlen(t->fake.last_reason) < OWNERS_REASON_MAX);
	for (const char *p = t->fake.last_reason; *p; p++)
		assert_true((unsigned char)*p >= 0x20);
	assert_false(ct_mounted(t, "vol-1", "alloc-1"));
	mt_check_empty(&t->env);
	/* Nothing pending: the next pass sends nothing. */
	assert_false(ct_step_sent(t, &due));

	err_clear(&e);
	assert_int_equal(claims_unmount(t->c, "vol-1", "alloc-1", NULL, &ur, &e), 0);
	assert_false(ur.unmounted);
	assert_false(ur.released);
	assert_false(ur.release_pending);
}

/*
 * The mount fails after the claim and no server answers the release: it
 * is recorded and retried by the release passes until a server takes it,
 * with the failure as its reason.
 */
static void test_mount_failure_release_retried(void **state)
{
	struct ct *t = *state;
	struct claims_mount_result res;
	int64_t due;
	struct err e;

	t->fake.down_after_claim = true;
	t->env.fake.fail_at = 0;
	t->env.fake.fail_code = 13; /* INTERNAL */
	assert_int_not_equal(ct_mount(t, "alloc-1", &res, &e), 0);
	assert_non_null(strstr(e.msg, "the claim's release is pending"));
	assert_true(claims_fake_claimed(&t->fake, "vol-1", "alloc-1"));
	assert_int_equal(t->fake.releases, 0);
	assert_false(ct_mounted(t, "vol-1", "alloc-1"));

	/* Still down: kept (a restart keeps it too, as for an unmount's release). */
	assert_false(ct_step_sent(t, &due));
	ct_restart_and_send(t, &due);
	assert_int_equal(strncmp(t->fake.last_reason, "mount failed: ", 14), 0);
	clock_fake_set(&t->clock, due);
	assert_false(ct_step_sent(t, &due));
}

/*
 * The servers are down at the unmount: the release is pending, recorded,
 * and retried by claims_step at 1 s, then 2 s, 4 s later; it survives a
 * restart of the module, and goes once a server answers.
 */
static void test_pending_release_backoff(void **state)
{
	struct ct *t = *state;
	struct claims_mount_result res;
	struct claims_unmount_result ur;
	struct err e;
	int64_t due, t1;

	assert_int_equal(ct_mount(t, "alloc-1", &res, &e), 0);
	claims_fake_set_down(&t->fake, true);
	err_clear(&e);
	assert_int_equal(claims_unmount(t->c, "vol-1", "alloc-1", "owner gone", &ur, &e), 0);
	assert_true(ur.unmounted);
	assert_false(ur.released);
	assert_true(ur.release_pending);
	assert_non_null(strstr(ur.release_error, "connection refused"));
	assert_false(ct_mounted(t, "vol-1", "alloc-1"));
	assert_int_equal(t->fake.releases, 0);

	/* Poked by the unmount: a pass at once, then 1 s, 2 s, 4 s apart. */
	t1 = ct_now(t);
	claims_step(t->c);
	assert_int_equal(t->fake.refused_down, 2);
	due = claims_step(t->c);
	assert_int_equal(due, t1 + CLAIMS_RELEASE_MIN_MS);
	assert_int_equal(t->fake.refused_down, 2);
	clock_fake_set(&t->clock, due - 1);
	assert_int_equal(claims_step(t->c), due);
	assert_int_equal(t->fake.refused_down, 2);
	clock_fake_set(&t->clock, due);
	due = claims_step(t->c);
	assert_int_equal(t->fake.refused_down, 3);
	assert_int_equal(due, t1 + 1000 + 2000);
	clock_fake_set(&t->clock, due);
	due = claims_step(t->c);
	assert_int_equal(t->fake.refused_down, 4);
	assert_int_equal(due, t1 + 1000 + 2000 + 4000);

	/* A restart: the recorded release is sent by the first step. */
	ct_restart_and_send(t, &due);
	assert_string_equal(t->fake.last_reason, "owner gone");
	/* Taken: nothing pending any more, the next pass is the idle one. */
	assert_int_equal(due, ct_now(t) + CLAIMS_RELEASE_MAX_MS);
	clock_fake_set(&t->clock, due);
	assert_false(ct_step_sent(t, &due));
}

/* A heartbeat answer sent at sent_ms names vol-1 at capacity cap (0: names nothing). */
static void ct_expand_answer(struct ct *t, int64_t sent_ms, int64_t cap)
{
	struct held_allocs_expand x = {
	    .volume_id = "vol-1", .plugin_id = MT_PLUGIN, .capacity = cap};

	held_allocs_expand(t->held, sent_ms, &x, cap ? 1 : 0);
}

/*
 * An outage grows the backoff of a pending release; once a server
 * answers the agent again (a request of the claim flow, or a heartbeat
 * answer), the next step sends it at once, not after the backoff.
 */
static void test_release_after_outage(void **state)
{
	struct ct *t = *state;
	struct claims_mount_result res;
	struct claims_unmount_result ur;
	json_t *doc = NULL;
	struct err e;
	int64_t due;

	for (int round = 0; round < 2; round++) {
		const char *alloc = round ? "alloc-2" : "alloc-1";

		assert_int_equal(ct_mount(t, alloc, &res, &e), 0);
		claims_fake_set_down(&t->fake, true);
		err_clear(&e);
		assert_int_equal(claims_unmount(t->c, "vol-1", alloc, NULL, &ur, &e), 0);
		assert_true(ur.release_pending);
		/* Passes at 0, 1, 3, 7 and 15 s: the next one 16 s later. */
		due = claims_step(t->c);
		for (int i = 0; i < 4; i++) {
			clock_fake_set(&t->clock, due);
			due = claims_step(t->c);
		}
		assert_int_equal(due - ct_now(t), 16000);
		assert_false(ct_step_sent(t, &due));
		claims_fake_set_down(&t->fake, false);
		if (round == 0) {
			err_clear(&e);
			assert_int_equal(
			    claims_server_request(t->c, "GET", "/v1/volume/vol-1", NULL, &doc, &e),
			    0);
			json_decref(doc);
		} else {
			ct_expand_answer(t, ct_now(t), 0);
		}
		assert_true(ct_step_sent(t, &due));
		assert_int_equal(t->fake.releases_ok, round + 1);
		assert_false(claims_fake_claimed(&t->fake, "vol-1", alloc));
		assert_int_equal(claims_releases_pending(t->c), 0);
	}
}

/*
 * Released while the node was away: the claim flow's mount is unmounted
 * by the next step, with the server's note as the reason; a mount made
 * without a claim is left alone.
 */
static void test_released_while_away(void **state)
{
	struct ct *t = *state;
	struct claims_mount_result res;
	struct mounter_result *mr = calloc(1, sizeof(*mr));
	struct mounter_request req;
	uint64_t seq;
	int64_t due;
	struct err e;

	assert_non_null(mr);
	assert_int_equal(ct_mount(t, "alloc-1", &res, &e), 0);
	mt_request(&req, "vol-2", "raw-1");
	assert_int_equal(claims_mark_unclaimed(t->c, "vol-2", "raw-1", &e), 0);
	assert_int_equal(mounter_mount(t->env.m, &t->env.plugin, &req, mr, &e), 0);
	free(mr);
	/* The claim flow's mark is its mount record's, written with the mount. */
	assert_true(ct_marked(t, "vol-1", "alloc-1"));
	assert_false(ct_marked(t, "vol-2", "raw-1"));

	/* The server released both (node down past node_grace) and forgot the claim. */
	pthread_mutex_lock(&t->fake.mu);
	t->vol->claims[0][0] = '\0';
	pthread_mutex_unlock(&t->fake.mu);
	seq = held_allocs_seq(t->held);
	assert_true(held_allocs_released(t->held, seq, "vol-1", "alloc-1", "node down"));
	assert_true(held_allocs_released(t->held, seq, "vol-2", "raw-1", "node down"));
	assert_true(ct_mounted(t, "vol-1", "alloc-1"));

	assert_true(ct_step_sent(t, &due));
	assert_false(ct_mounted(t, "vol-1", "alloc-1"));
	assert_true(ct_mounted(t, "vol-2", "raw-1"));
	assert_string_equal(t->fake.last_reason,
			    "claim released by the server while the node was away: node down");
	/* The server knew no claim: done, nothing pending. */
	assert_int_equal(t->fake.releases, 1);
	clock_fake_set(&t->clock, due);
	assert_false(ct_step_sent(t, &due));
	mt_check(&t->env, true);
}

/* sqlite3_exec callback: the first column of the row as a number in *ctx. */
static int ct_db_row(void *ctx, int n, char **vals, char **names)
{
	(void)names;
	*(long *)ctx = n > 0 && vals[0] ? atol(vals[0]) : -1;
	return 0;
}

/* Runs sql on the agent database of t (as an older agent would); the last row's first column. */
static long ct_db_count(struct ct *t, const char *sql)
{
	sqlite3 *db = NULL;
	long out = -1;

	assert_int_equal(sqlite3_open(t->env.db, &db), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	assert_int_equal(sqlite3_exec(db, sql, ct_db_row, &out, NULL), SQLITE_OK);
	sqlite3_close(db);
	return out;
}

/*
 * An older agent marked its claim flow's mounts in a row of their own,
 * not in the mount record: a mount with such a row is still the claim
 * flow's, unmounted once the server released it while the node was away,
 * and the row goes with the release.
 */
static void test_released_older_agent_mark(void **state)
{
	struct ct *t = *state;
	struct mounter_result *mr = calloc(1, sizeof(*mr));
	struct mounter_request req;
	uint64_t seq;
	struct err e;

	assert_non_null(mr);
	mt_request(&req, "vol-2", "old-1");
	assert_int_equal(mounter_mount(t->env.m, &t->env.plugin, &req, mr, &e), 0);
	free(mr);
	assert_false(ct_marked(t, "vol-2", "old-1"));
	ct_db_count(t, "INSERT INTO claims_mounted VALUES ('vol-2', 'old-1')");

	seq = held_allocs_seq(t->held);
	assert_true(held_allocs_released(t->held, seq, "vol-2", "old-1", "node down"));
	/* The fake server knows no vol-2: the release finds nothing held, and is done. */
	claims_step(t->c);
	assert_false(ct_mounted(t, "vol-2", "old-1"));
	assert_int_equal(claims_releases_pending(t->c), 0);
	/* The row went with the release: nothing left to mark another mount of the pair. */
	assert_int_equal(ct_db_count(t, "SELECT count(*) FROM claims_mounted"), 0);
	mt_check(&t->env, true);
}

/* A step keeps alloc-1 claimed and mounted; nothing was released. */
static void ct_step_kept(struct ct *t)
{
	int64_t due;

	ct_step_sent(t, &due);
	assert_true(ct_mounted(t, "vol-1", "alloc-1"));
	assert_true(claims_fake_claimed(&t->fake, "vol-1", "alloc-1"));
	assert_int_equal(t->fake.releases, 0);
}

/*
 * The race seen under load: the fingerprint report is built once the
 * claim flow began, before its claim was recorded by the server, so the server
 * answers "no claim"; the answer comes back after the flow claimed and
 * mounted. It is stale: the fresh mount stays, nothing is released.
 */
static void test_released_answer_to_report_mid_claim(void **state)
{
	struct ct *t = *state;
	struct claims_mount_result res;
	struct err e;

	t->snap_armed = true;
	assert_int_equal(ct_mount(t, "alloc-1", &res, &e), 0);
	assert_false(t->snap_armed);
	assert_false(t->snap_claimed);
	assert_true(claims_fake_claimed(&t->fake, "vol-1", "alloc-1"));
	assert_false(held_allocs_released(t->held, t->snap_seq, "vol-1", "alloc-1",
					  "no claim of allocation alloc-1 on node node-1"));
	ct_step_kept(t);
}

/*
 * A real orphan's answer is queued, but the allocation is claimed and
 * mounted again before the step unmounts it, and the next answer came
 * in meanwhile: that claim is kept.
 */
static void test_released_then_claimed_again(void **state)
{
	struct ct *t = *state;
	struct claims_mount_result res;
	uint64_t seq;
	struct err e;

	assert_int_equal(ct_mount(t, "alloc-1", &res, &e), 0);
	pthread_mutex_lock(&t->fake.mu);
	t->vol->claims[0][0] = '\0';
	pthread_mutex_unlock(&t->fake.mu);
	seq = held_allocs_seq(t->held);
	assert_true(held_allocs_released(t->held, seq, "vol-1", "alloc-1", "node down"));
	assert_int_equal(ct_mount(t, "alloc-1", &res, &e), 0);
	assert_true(claims_fake_claimed(&t->fake, "vol-1", "alloc-1"));
	/* The next report's answer (no release) came in before the step. */
	held_allocs_answered(t->held, held_allocs_seq(t->held));
	ct_step_kept(t);
}

/* The owner process dies: the owner watch unmounts and releases with the reason. */
static void test_owner_gone(void **state)
{
	struct ct *t = *state;
	struct owners_spec owner = {.kind = OWNERS_PID};
	struct claims_mount_req req = {.volume_id = "vol-1", .alloc_id = "alloc-1"};
	struct claims_mount_result res;
	struct owners_entry *list = NULL;
	struct timespec pause = {.tv_nsec = 10 * 1000 * 1000};
	struct timespec now, deadline;
	pid_t pid = child_proc_idle();
	size_t n = 0;
	struct err e;

	assert_true(pid > 0);
	owner.pid = (int)pid;
	req.owner = &owner;
	err_clear(&e);
	assert_int_equal(claims_mount(t->c, &req, &res, &e), 0);
	assert_int_equal(claims_owners_list(t->c, &list, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(list[0].spec.pid, (int)pid);
	assert_true(list[0].spec.start_time > 0);
	free(list);

	child_proc_kill(&pid);
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += 20;
	for (;;) {
		if (claims_fake_releases(&t->fake) > 0 && !ct_mounted(t, "vol-1", "alloc-1"))
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > deadline.tv_sec)
			fail_msg("the owner's mount was not released");
		nanosleep(&pause, NULL);
	}
	pthread_mutex_lock(&t->fake.mu);
	assert_non_null(strstr(t->fake.last_reason, "exited"));
	pthread_mutex_unlock(&t->fake.mu);
	assert_false(claims_fake_claimed(&t->fake, "vol-1", "alloc-1"));
}

/* A dead pid as owner is refused before anything is claimed. */
static void test_owner_checked_before_claim(void **state)
{
	struct ct *t = *state;
	struct owners_spec owner = {.kind = OWNERS_PID};
	struct claims_mount_req req = {.volume_id = "vol-1", .alloc_id = "alloc-1"};
	struct claims_mount_result res;
	struct err e;

	owner.pid = (int)child_proc_gone();
	assert_true(owner.pid > 0);
	req.owner = &owner;
	err_clear(&e);
	assert_int_equal(claims_mount(t->c, &req, &res, &e), CSID_EINVAL);
	assert_int_equal(t->fake.requests, 0);
}

/* Without servers: refused with a clear message; the path helper escapes. */
static void test_no_servers_and_paths(void **state)
{
	struct ct *t = *state;
	struct claims_config cfg = {
	    .node_name = NODE, .mounter = t->env.m, .lookup = mt_lookup, .lookup_ctx = &t->env};
	struct claims_mount_req req = {.volume_id = "vol-1", .alloc_id = "alloc-1"};
	struct claims_mount_result res;
	struct claims *alone = NULL;
	char path[64];
	json_t *doc = NULL;
	struct err e;

	err_clear(&e);
	assert_int_equal(claims_new(&cfg, &alone, &e), 0);
	assert_int_equal(claims_mount(alone, &req, &res, &e), CSID_EPRECOND);
	assert_non_null(strstr(e.msg, "joined no servers"));
	assert_int_equal(claims_server_request(alone, "GET", "/v1/volumes", NULL, &doc, &e),
			 CSID_EPRECOND);
	claims_free(alone);

	assert_int_equal(claims_volume_path("a b/c", "/claim", path, sizeof(path), &e), 0);
	assert_string_equal(path, "/v1/volume/a%20b%2Fc/claim");
	assert_int_equal(
	    claims_volume_path("0123456789012345678901234567890123456789012345678901234567",
			       "/claim", path, sizeof(path), &e),
	    CSID_EINVAL);

	/* A request of a front end through the same client: the server's code and message. */
	assert_int_equal(claims_server_request(t->c, "GET", "/v1/volume/nope", NULL, &doc, &e),
			 CSID_ENOTFOUND);
	assert_non_null(strstr(e.msg, "no such volume"));
	assert_int_equal(claims_server_request(t->c, "GET", "/v1/volume/vol-1", NULL, &doc, &e), 0);
	assert_string_equal(json_string_value(json_object_get(doc, "plugin_id")), MT_PLUGIN);
	json_decref(doc);

	/* No server answers: retried with backoff for CLAIMS_SERVER_WAIT_MS, in virtual time. */
	claims_fake_set_down(&t->fake, true);
	assert_int_equal(claims_server_request(t->c, "GET", "/v1/volume/vol-1", NULL, &doc, &e),
			 CSID_EUNAVAIL);
	assert_true(ct_now(t) > T0 + CLAIMS_SERVER_WAIT_MS - CLAIMS_RETRY_MAX_MS);
	assert_true(ct_now(t) <= T0 + CLAIMS_SERVER_WAIT_MS);
	assert_true(t->fake.refused_down > 5);
}

/*
 * A repeated mount of an allocation that has it mounted fails after its
 * claim: the earlier mount and its claim stay, nothing is released.
 */
/*
 * NodeExpandVolume online rides the heartbeat answers: no request of its
 * own, the volume grown and reported once an answer names it; an answer
 * sent before that report is stale for it and changes nothing, a later
 * one naming it again is followed; a report no server took is retried
 * with backoff while the answers name the volume, not at every answer.
 */
static void test_expand_from_answers(void **state)
{
	struct ct *t = *state;
	struct claims_mount_result res;
	int64_t before;
	struct err e;
	int requests;

	assert_int_equal(ct_mount(t, "alloc-1", &res, &e), 0);
	claims_step(t->c);
	requests = t->fake.requests;
	/* Nothing named: no pass asks the server anything. */
	ct_expand_answer(t, ct_now(t), 0);
	claims_step(t->c);
	assert_int_equal(t->fake.requests, requests);

	before = ct_now(t);
	ct_expand_answer(t, before, 2 << 20);
	claims_step(t->c);
	assert_int_equal(t->fake.node_expanded, 1);
	assert_int_equal(t->fake.last_expanded, 2 << 20);
	/* The answer to a heartbeat sent before the report still names it: stale. */
	clock_fake_advance(&t->clock, 100);
	ct_expand_answer(t, before, 2 << 20);
	claims_step(t->c);
	assert_int_equal(t->fake.node_expanded, 1);
	/* One sent after it names it again: the server still wants it (grown again). */
	ct_expand_answer(t, ct_now(t), 2 << 20);
	claims_step(t->c);
	assert_int_equal(t->fake.node_expanded, 2);

	/* No server takes the report: retried after the backoff, not at each answer. */
	claims_fake_set_down(&t->fake, true);
	ct_expand_answer(t, ct_now(t), 3 << 20);
	claims_step(t->c);
	requests = t->fake.refused_down;
	assert_true(requests >= 1);
	claims_fake_set_down(&t->fake, false);
	ct_expand_answer(t, ct_now(t), 3 << 20);
	claims_step(t->c);
	assert_int_equal(t->fake.node_expanded, 2);
	clock_fake_advance(&t->clock, CLAIMS_EXPAND_MIN_MS);
	claims_step(t->c);
	assert_int_equal(t->fake.node_expanded, 3);
	assert_int_equal(t->fake.last_expanded, 3 << 20);
	/* Done: the same answers again change nothing. */
	clock_fake_advance(&t->clock, 60000);
	ct_expand_answer(t, before, 3 << 20);
	claims_step(t->c);
	assert_int_equal(t->fake.node_expanded, 3);
}

static void test_repeat_mount_failure_keeps_mount(void **state)
{
	struct ct *t = *state;
	struct claims_mount_result res;
	struct err e;

	assert_int_equal(ct_mount(t, "alloc-1", &res, &e), 0);
	/* The repeat's claim is not published within its wait, and then no server answers. */
	t->vol->controller_required = true;
	t->fake.down_after_claim = true;
	assert_int_equal(ct_mount(t, "alloc-1", &res, &e), CSID_EUNAVAIL);
	assert_null(strstr(e.msg, "release"));
	assert_true(ct_mounted(t, "vol-1", "alloc-1"));
	assert_true(claims_fake_claimed(&t->fake, "vol-1", "alloc-1"));
	assert_int_equal(t->fake.releases, 0);
	assert_int_equal(t->fake.claims_put, 2);
	mt_check(&t->env, true);
}

/*
 * A repeat that the mounter refuses (another usage of the mounted volume):
 * the mounter saw the earlier mount's record, so the claim and the mount
 * are left to it, with no second read of the store.
 */
static void test_repeat_refused_by_mounter_keeps_claim(void **state)
{
	struct ct *t = *state;
	struct claims_mount_req req = {.volume_id = "vol-1", .alloc_id = "alloc-1"};
	struct claims_mount_result res;
	struct err e;

	assert_int_equal(ct_mount(t, "alloc-1", &res, &e), 0);
	req.read_only = true;
	err_clear(&e);
	assert_int_equal(claims_mount(t->c, &req, &res, &e), CSID_ECONFLICT);
	assert_non_null(strstr(e.msg, "already has volume vol-1 mounted with another usage"));
	assert_null(strstr(e.msg, "release"));
	assert_true(ct_mounted(t, "vol-1", "alloc-1"));
	assert_true(claims_fake_claimed(&t->fake, "vol-1", "alloc-1"));
	assert_int_equal(t->fake.releases, 0);
	mt_check(&t->env, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_mount_happy_path, ct_setup, ct_teardown),
	    cmocka_unit_test_setup_teardown(test_mount_waits_for_publication, ct_setup,
					    ct_teardown),
	    cmocka_unit_test_setup_teardown(test_mount_follows_after_claim_wait, ct_setup,
					    ct_teardown),
	    cmocka_unit_test_setup_teardown(test_old_server_fallback, ct_setup, ct_teardown),
	    cmocka_unit_test_setup_teardown(test_claim_refused, ct_setup, ct_teardown),
	    cmocka_unit_test_setup_teardown(test_claim_retried_while_not_ready, ct_setup,
					    ct_teardown),
	    cmocka_unit_test_setup_teardown(test_publication_wait_timeout, ct_setup, ct_teardown),
	    cmocka_unit_test_setup_teardown(test_mount_failure_after_claim, ct_setup, ct_teardown),
	    cmocka_unit_test_setup_teardown(test_mount_failure_release_retried, ct_setup,
					    ct_teardown),
	    cmocka_unit_test_setup_teardown(test_repeat_mount_failure_keeps_mount, ct_setup,
					    ct_teardown),
	    cmocka_unit_test_setup_teardown(test_repeat_refused_by_mounter_keeps_claim, ct_setup,
					    ct_teardown),
	    cmocka_unit_test_setup_teardown(test_pending_release_backoff, ct_setup, ct_teardown),
	    cmocka_unit_test_setup_teardown(test_released_while_away, ct_setup, ct_teardown),
	    cmocka_unit_test_setup_teardown(test_released_older_agent_mark, ct_setup, ct_teardown),
	    cmocka_unit_test_setup_teardown(test_released_answer_to_report_mid_claim, ct_setup,
					    ct_teardown),
	    cmocka_unit_test_setup_teardown(test_released_then_claimed_again, ct_setup,
					    ct_teardown),
	    cmocka_unit_test_setup_teardown(test_owner_gone, ct_setup, ct_teardown),
	    cmocka_unit_test_setup_teardown(test_owner_checked_before_claim, ct_setup, ct_teardown),
	    cmocka_unit_test_setup_teardown(test_no_servers_and_paths, ct_setup, ct_teardown),
	    cmocka_unit_test_setup_teardown(test_expand_from_answers, ct_setup, ct_teardown),
	    cmocka_unit_test_setup_teardown(test_release_after_outage, ct_setup, ct_teardown),
	};

	return cmocka_run_group_tests(tests, mt_scratch_setup, mt_scratch_teardown);
}
