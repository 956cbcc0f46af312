/*
 * Unit tests of the server link core (src/agent/server_link.c) in virtual
 * time: times are plain numbers handed to the core, the jitter's
 * randomness is scripted, so every delay is exact. Also the outcome of
 * each HTTP answer, the fingerprint body the agent sends (read back with
 * the server's own decoder), the released allocations of an answer, and
 * the instance ID kept in the data_dir.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/server_link.h"
#include "model/model.h"
#include "util/arena.h"

#define T0 1000000
#define HB 10000
#define MIN 500
#define MAX 4000
#define SLOW 60000

struct t_env {
	struct server_link_core c;
	uint64_t rnd; /* what the jitter's random source returns */
	int64_t now;
};

static uint64_t t_random(void *ctx)
{
	return ((struct t_env *)ctx)->rnd;
}

static int t_setup_n(void **state, size_t n)
{
	struct t_env *t = calloc(1, sizeof(*t));
	struct server_link_timing tm = {.heartbeat_ms = HB,
					.retry_min_ms = MIN,
					.retry_max_ms = MAX,
					.slow_ms = SLOW,
					.random = t_random};

	assert_non_null(t);
	tm.random_ctx = t;
	t->now = T0;
	server_link_core_init(&t->c, n, &tm, t->now);
	*state = t;
	return 0;
}

static int t_setup(void **state)
{
	return t_setup_n(state, 3);
}

static int t_teardown(void **state)
{
	free(*state);
	return 0;
}

/* Moves to when the next send is due and runs it on server want with outcome o. */
static void t_send(struct t_env *t, size_t want, enum server_link_outcome o)
{
	size_t i = 99;

	assert_true(server_link_core_next(&t->c) != CLOCK_NEVER);
	if (server_link_core_next(&t->c) > t->now)
		t->now = server_link_core_next(&t->c);
	/* Nothing goes out a millisecond early. */
	assert_false(server_link_core_begin(&t->c, t->now - 1, &i));
	assert_true(server_link_core_begin(&t->c, t->now, &i));
	assert_int_equal(i, want);
	assert_int_equal(server_link_core_next(&t->c), CLOCK_NEVER);
	server_link_core_end(&t->c, t->now, o);
}

/* The delay chosen by the last outcome. */
static int64_t t_delay(struct t_env *t)
{
	return server_link_core_next(&t->c) - t->now;
}

static void test_register_and_heartbeat(void **state)
{
	struct t_env *t = *state;

	/* Registration is due at once, on the first server. */
	assert_int_equal(server_link_core_next(&t->c), T0);
	t_send(t, 0, SERVER_LINK_OK);
	assert_true(t->c.joined);
	assert_int_equal(t_delay(t), HB);
	for (int k = 1; k <= 5; k++) {
		t_send(t, 0, SERVER_LINK_OK);
		assert_int_equal(t->now, T0 + k * HB);
		assert_int_equal(t_delay(t), HB);
	}
}

static void test_change_sends_at_once(void **state)
{
	struct t_env *t = *state;
	size_t i;

	t_send(t, 0, SERVER_LINK_OK);
	t->now += 3000;
	server_link_core_changed(&t->c, t->now);
	assert_int_equal(server_link_core_next(&t->c), t->now);
	t_send(t, 0, SERVER_LINK_OK);
	assert_int_equal(t_delay(t), HB);
	/* A change while a send is in flight goes out right after it. */
	t->now += HB;
	assert_true(server_link_core_begin(&t->c, t->now, &i));
	server_link_core_changed(&t->c, t->now + 5);
	assert_int_equal(server_link_core_next(&t->c), CLOCK_NEVER);
	t->now += 20;
	server_link_core_end(&t->c, t->now, SERVER_LINK_OK);
	assert_int_equal(server_link_core_next(&t->c), t->now);
	t_send(t, 0, SERVER_LINK_OK);
	assert_int_equal(t_delay(t), HB);
}

static void test_failover_and_backoff(void **state)
{
	struct t_env *t = *state;
	int64_t want = MIN;

	/* Each server in list order, at once; then a backoff round. */
	t_send(t, 0, SERVER_LINK_UNREACHABLE);
	assert_int_equal(t_delay(t), 0);
	t_send(t, 1, SERVER_LINK_UNREACHABLE);
	assert_int_equal(t_delay(t), 0);
	t_send(t, 2, SERVER_LINK_UNREACHABLE);
	assert_true(t->c.round_done);
	/* rnd 0: the low end of the jitter, 3/4 of the delay. */
	assert_int_equal(t_delay(t), MIN * 3 / 4);
	/* The delay doubles per failed round up to the cap; rnd picks within [3/4 d, d]. */
	for (int round = 1; round < 6; round++) {
		want = want * 2 > MAX ? MAX : want * 2;
		t->rnd = (uint64_t)(want / 4); /* the high end */
		t_send(t, 0, SERVER_LINK_UNREACHABLE);
		t_send(t, 1, SERVER_LINK_UNREACHABLE);
		t_send(t, 2, SERVER_LINK_UNREACHABLE);
		assert_int_equal(t_delay(t), want);
	}
	assert_int_equal(want, MAX);
	t->rnd = 7;
	t_send(t, 0, SERVER_LINK_UNREACHABLE);
	t_send(t, 1, SERVER_LINK_UNREACHABLE);
	t_send(t, 2, SERVER_LINK_UNREACHABLE);
	assert_int_equal(t_delay(t), MAX * 3 / 4 + 7);
}

static void test_recovery(void **state)
{
	struct t_env *t = *state;
	int64_t wait;

	t_send(t, 0, SERVER_LINK_UNREACHABLE);
	t_send(t, 1, SERVER_LINK_UNREACHABLE);
	t_send(t, 2, SERVER_LINK_UNREACHABLE);
	t_send(t, 0, SERVER_LINK_UNREACHABLE);
	t_send(t, 1, SERVER_LINK_UNREACHABLE);
	t_send(t, 2, SERVER_LINK_UNREACHABLE);
	assert_int_equal(t_delay(t), MIN * 2 * 3 / 4);
	/* A change while every server fails does not cut the backoff short. */
	wait = server_link_core_next(&t->c);
	server_link_core_changed(&t->c, t->now + 1);
	assert_int_equal(server_link_core_next(&t->c), wait);
	/* The first server is back down, the second is up: the link stays on it. */
	t_send(t, 0, SERVER_LINK_UNREACHABLE);
	t_send(t, 1, SERVER_LINK_OK);
	assert_true(t->c.joined);
	assert_int_equal(t_delay(t), HB);
	t_send(t, 1, SERVER_LINK_OK);
	t_send(t, 1, SERVER_LINK_OK);
	/* The backoff starts from the minimum again. */
	t_send(t, 1, SERVER_LINK_UNREACHABLE);
	t_send(t, 2, SERVER_LINK_UNREACHABLE);
	t_send(t, 0, SERVER_LINK_UNREACHABLE);
	assert_int_equal(t_delay(t), MIN * 3 / 4);
	t_send(t, 1, SERVER_LINK_OK);
	assert_int_equal(t_delay(t), HB);
}

static void test_unauthorized_is_slow(void **state)
{
	struct t_env *t = *state;

	assert_int_equal(server_link_classify(401, NULL), SERVER_LINK_UNAUTHORIZED);
	assert_int_equal(server_link_classify(403, "permission_denied"), SERVER_LINK_UNAUTHORIZED);
	t_send(t, 0, SERVER_LINK_UNAUTHORIZED);
	assert_false(t->c.joined);
	assert_int_equal(t_delay(t), SLOW * 3 / 4);
	/* The next server may hold another token list; still slowly. */
	t->rnd = SLOW / 4;
	t_send(t, 1, SERVER_LINK_UNAUTHORIZED);
	assert_int_equal(t_delay(t), SLOW);
	/* A change does not hurry a refused link. */
	server_link_core_changed(&t->c, t->now + 1);
	assert_int_equal(t_delay(t), SLOW);
	t_send(t, 2, SERVER_LINK_OK);
	assert_int_equal(t_delay(t), HB);
}

static void test_duplicate_node(void **state)
{
	struct t_env *t = *state;

	assert_int_equal(server_link_classify(409, "conflict"), SERVER_LINK_DUPLICATE);
	/* 409 aborted (writers raced) is worth a retry elsewhere at once. */
	assert_int_equal(server_link_classify(409, "aborted"), SERVER_LINK_UNREACHABLE);
	t_send(t, 0, SERVER_LINK_OK);
	t_send(t, 0, SERVER_LINK_DUPLICATE);
	assert_false(t->c.joined);
	/* The same server again after about a heartbeat: the holder may stop meanwhile. */
	assert_int_equal(t_delay(t), HB * 3 / 4);
	t_send(t, 0, SERVER_LINK_DUPLICATE);
	t_send(t, 0, SERVER_LINK_OK);
	assert_int_equal(t_delay(t), HB);
}

static void test_classify(void **state)
{
	(void)state;
	assert_int_equal(server_link_classify(200, NULL), SERVER_LINK_OK);
	assert_int_equal(server_link_classify(204, NULL), SERVER_LINK_OK);
	assert_int_equal(server_link_classify(500, "internal"), SERVER_LINK_UNREACHABLE);
	assert_int_equal(server_link_classify(503, NULL), SERVER_LINK_UNREACHABLE);
	assert_int_equal(server_link_classify(429, NULL), SERVER_LINK_UNREACHABLE);
	assert_int_equal(server_link_classify(0, NULL), SERVER_LINK_UNREACHABLE);
	assert_int_equal(server_link_classify(301, NULL), SERVER_LINK_UNREACHABLE);
	assert_int_equal(server_link_classify(400, "invalid_argument"), SERVER_LINK_REFUSED);
	assert_int_equal(server_link_classify(404, NULL), SERVER_LINK_REFUSED);
	assert_string_equal(server_link_outcome_name(SERVER_LINK_DUPLICATE), "duplicate node");
}

static void test_refused_is_slow(void **state)
{
	struct t_env *t = *state;

	t_send(t, 0, SERVER_LINK_REFUSED);
	assert_int_equal(t_delay(t), SLOW * 3 / 4);
	t_send(t, 0, SERVER_LINK_OK);
}

static void test_one_server(void **state)
{
	struct t_env *t;

	t_setup_n(state, 1);
	t = *state;
	t_send(t, 0, SERVER_LINK_UNREACHABLE);
	assert_int_equal(t_delay(t), MIN * 3 / 4);
	t_send(t, 0, SERVER_LINK_UNREACHABLE);
	assert_int_equal(t_delay(t), MIN * 2 * 3 / 4);
	t_send(t, 0, SERVER_LINK_OK);
	assert_int_equal(t_delay(t), HB);
	t_teardown(state);
}

/* A snapshot of one healthy node plugin, one controller not yet fingerprinted. */
static void test_body(void **state)
{
	struct plugin_manager_plugin p[2];
	struct plugin_manager_snapshot snap = {.plugins = p, .nplugins = 2};
	struct plugin_fingerprint *fp = &p[1].status.fingerprint;
	struct model_node_alloc held[] = {{"data", "web-1"}, {"data", "web-2"}};
	struct server_link_allocs allocs = {held, 2};
	struct model_node *n = NULL;
	struct arena *a = arena_new();
	char *body = NULL;
	size_t len = 0;
	struct err e;

	(void)state;
	memset(p, 0, sizeof(p));
	p[0].type = REGISTRY_CONTROLLER;
	snprintf(p[0].name, sizeof(p[0].name), "ctl.example");
	p[1].type = REGISTRY_NODE;
	snprintf(p[1].name, sizeof(p[1].name), "hostpath.csi.csid.dev");
	p[1].managed = true;
	p[1].status.fingerprinted = true;
	p[1].status.state = INSTANCE_MANAGER_RUNNING;
	p[1].status.health.healthy = true;
	snprintf(p[1].status.health.description, PLUGIN_HEALTH_DESC_MAX, "healthy");
	snprintf(fp->vendor_version, sizeof(fp->vendor_version), "1.2.3");
	fp->node_caps = 1u << 1; /* STAGE_UNSTAGE_VOLUME */
	snprintf(fp->node_id, sizeof(fp->node_id), "csi-n1");
	fp->max_volumes = 12;
	snprintf(fp->topology[0].key, PLUGIN_TOPOLOGY_KEY_MAX, "zone");
	snprintf(fp->topology[0].value, PLUGIN_TOPOLOGY_VALUE_MAX, "z1");
	fp->ntopology = 1;
	err_clear(&e);
	assert_int_equal(
	    server_link_body(&snap, "n1", "abc", "http://10.0.0.5:4650", NULL, &body, &len, &e), 0);
	/* Read back by the server's own decoder of PUT /v1/node. */
	if (model_node_spec_decode(a, body, len, &n, &e) != 0)
		fail_msg("decode %s: %s", body, e.msg);
	assert_string_equal(n->instance_id, "abc");
	assert_string_equal(n->address, "http://10.0.0.5:4650");
	assert_int_equal(n->nplugins, 2);
	assert_string_equal(n->plugins[0].plugin_id, "ctl.example");
	assert_int_equal(n->plugins[0].type, MODEL_PLUGIN_CONTROLLER);
	assert_false(n->plugins[0].healthy);
	assert_string_equal(n->plugins[0].health, "not started");
	assert_int_equal(n->plugins[1].type, MODEL_PLUGIN_NODE);
	assert_true(n->plugins[1].healthy);
	assert_string_equal(n->plugins[1].version, "1.2.3");
	assert_int_equal(n->plugins[1].ncaps, 1);
	assert_string_equal(n->plugins[1].caps[0], "STAGE_UNSTAGE_VOLUME");
	assert_string_equal(n->plugins[1].plugin_node_id, "csi-n1");
	assert_int_equal(n->plugins[1].max_volumes, 12);
	assert_string_equal(model_map_get(&n->plugins[1].topology.segments, "zone"), "z1");
	/* Fingerprinted but failing its Probe: sent unhealthy with the reason. */
	p[1].status.health.healthy = false;
	snprintf(p[1].status.health.description, PLUGIN_HEALTH_DESC_MAX, "Probe: not ready");
	free(body);
	assert_int_equal(server_link_body(&snap, "n1", "abc", NULL, NULL, &body, &len, &e), 0);
	assert_int_equal(model_node_spec_decode(a, body, len, &n, &e), 0);
	assert_null(n->address);
	assert_false(n->plugins[1].healthy);
	assert_string_equal(n->plugins[1].health, "Probe: not ready");
	/* No report: the key is absent, not an empty list. */
	assert_false(n->allocs_reported);
	assert_null(strstr(body, "allocations"));
	free(body);
	/* A report, empty or not, is sent and read back as such. */
	assert_int_equal(server_link_body(&snap, "n1", "abc", NULL, &allocs, &body, &len, &e), 0);
	assert_int_equal(model_node_spec_decode(a, body, len, &n, &e), 0);
	assert_true(n->allocs_reported);
	assert_int_equal(n->nallocs, 2);
	assert_string_equal(n->allocs[1].volume_id, "data");
	assert_string_equal(n->allocs[1].alloc_id, "web-2");
	free(body);
	allocs.n = 0;
	assert_int_equal(server_link_body(&snap, "n1", "abc", NULL, &allocs, &body, &len, &e), 0);
	assert_int_equal(model_node_spec_decode(a, body, len, &n, &e), 0);
	assert_true(n->allocs_reported);
	assert_int_equal(n->nallocs, 0);
	free(body);
	arena_free(a);
}

static void test_instance_id(void **state)
{
	char dir[] = "/tmp/csid-link-XXXXXX", path[64], a[SERVER_LINK_INSTANCE_ID_LEN + 1],
	     b[SERVER_LINK_INSTANCE_ID_LEN + 1];
	struct err e;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/agent-instance-id", dir);
	err_clear(&e);
	assert_int_equal(server_link_instance_id(dir, a, &e), 0);
	assert_int_equal(strlen(a), SERVER_LINK_INSTANCE_ID_LEN);
	/* A restart reads the same ID back. */
	assert_int_equal(server_link_instance_id(dir, b, &e), 0);
	assert_string_equal(a, b);
	/* A damaged file makes a new one. */
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("not-an-id\n", f);
	fclose(f);
	assert_int_equal(server_link_instance_id(dir, b, &e), 0);
	assert_string_not_equal(a, b);
	assert_int_equal(strlen(b), SERVER_LINK_INSTANCE_ID_LEN);
	assert_int_equal(server_link_instance_id(dir, a, &e), 0);
	assert_string_equal(a, b);
	unlink(path);
	assert_int_equal(rmdir(dir), 0);
	/* A data_dir that is not there is an error, not a fresh ID each start. */
	assert_int_not_equal(server_link_instance_id("/nonexistent-csid-dir", a, &e), 0);
}

/* The volumes to expand of an answer: valid entries kept, the rest skipped; none vs no key. */
static void test_expand_parse(void **state)
{
	static const char answer[] =
	    "{\"id\": \"n1\", \"released\": [], \"expand\": ["
	    "{\"volume_id\": \"v\", \"plugin_id\": \"hp.csi\", \"capacity\": 3145728},"
	    "{\"volume_id\": \"../x\", \"plugin_id\": \"hp.csi\", \"capacity\": 1},"
	    "{\"volume_id\": \"w\", \"plugin_id\": \"hp.csi\", \"capacity\": 0},"
	    "{\"volume_id\": \"w\", \"plugin_id\": \"hp.csi\", \"capacity\": \"5\"},"
	    "{\"volume_id\": \"w\", \"capacity\": 5}, 7,"
	    "{\"volume_id\": \"w\", \"plugin_id\": \"other.csi\", \"capacity\": 5}]}";
	struct held_allocs_expand *x = NULL;
	struct arena *a = arena_new();
	bool present = false;
	size_t n = 9;
	struct err e;

	(void)state;
	assert_non_null(a);
	assert_int_equal(server_link_expand_parse(answer, strlen(answer), a, &x, &n, &present, &e),
			 0);
	assert_true(present);
	assert_int_equal(n, 2);
	assert_string_equal(x[0].volume_id, "v");
	assert_string_equal(x[0].plugin_id, "hp.csi");
	assert_int_equal(x[0].capacity, 3145728);
	assert_string_equal(x[1].volume_id, "w");
	assert_string_equal(x[1].plugin_id, "other.csi");
	assert_int_equal(x[1].capacity, 5);

	/* An empty list says "nothing to expand"; no key, or not an array, says nothing. */
	assert_int_equal(server_link_expand_parse("{\"expand\": []}", strlen("{\"expand\": []}"), a,
						  &x, &n, &present, &e),
			 0);
	assert_true(present);
	assert_int_equal(n, 0);
	assert_null(x);
	assert_int_equal(server_link_expand_parse("{\"id\": \"n1\"}", strlen("{\"id\": \"n1\"}"), a,
						  &x, &n, &present, &e),
			 0);
	assert_false(present);
	assert_int_equal(n, 0);
	assert_int_equal(server_link_expand_parse("{\"expand\": 1}", strlen("{\"expand\": 1}"), a,
						  &x, &n, &present, &e),
			 0);
	assert_false(present);
	assert_int_equal(
	    server_link_expand_parse("not json", strlen("not json"), a, &x, &n, &present, &e), 0);
	assert_false(present);
	arena_free(a);
}

static void test_released_parse(void **state)
{
	static const char answer[] =
	    "{\"id\": \"n1\", \"released\": ["
	    "{\"volume_id\": \"v\", \"alloc_id\": \"web-1\", \"note\": \"released: node n1 "
	    "down for more than 2s\"},"
	    "{\"volume_id\": \"v\", \"alloc_id\": \"web-2\"},"
	    "{\"volume_id\": \"../x\", \"alloc_id\": \"web-3\"},"
	    "{\"volume_id\": \"v\"}, 7, \"s\","
	    "{\"volume_id\": \"w\", \"alloc_id\": \"web-4\", \"note\": 5}]}";
	struct server_link_released *r = NULL;
	struct arena *a = arena_new();
	char longnote[SERVER_LINK_NOTE_MAX + 200], doc[SERVER_LINK_NOTE_MAX + 300];
	size_t n = 9;
	struct err e;

	(void)state;
	assert_non_null(a);
	assert_int_equal(server_link_released_parse(answer, strlen(answer), a, &r, &n, &e), 0);
	/* Malformed entries and hostile names skipped; a note that is not a string is "". */
	assert_int_equal(n, 3);
	assert_string_equal(r[0].alloc_id, "web-1");
	assert_string_equal(r[0].note, "released: node n1 down for more than 2s");
	assert_string_equal(r[1].volume_id, "v");
	assert_string_equal(r[1].note, "");
	assert_string_equal(r[2].volume_id, "w");
	assert_string_equal(r[2].note, "");

	/* None: no key, not an array, not an object, not JSON. */
	assert_int_equal(server_link_released_parse("{\"id\": \"n1\"}", 11, a, &r, &n, &e), 0);
	assert_int_equal(n, 0);
	assert_null(r);
	assert_int_equal(server_link_released_parse("{\"released\": 1}", 15, a, &r, &n, &e), 0);
	assert_int_equal(n, 0);
	assert_int_equal(server_link_released_parse("[]", 2, a, &r, &n, &e), 0);
	assert_int_equal(n, 0);
	assert_int_equal(server_link_released_parse("{\"rel", 5, a, &r, &n, &e), 0);
	assert_int_equal(n, 0);

	/* A long note is cut. */
	memset(longnote, 'x', sizeof(longnote) - 1);
	longnote[sizeof(longnote) - 1] = '\0';
	snprintf(doc, sizeof(doc),
		 "{\"released\": [{\"volume_id\": \"v\", \"alloc_id\": \"a\", \"note\": "
		 "\"%.*s\"}]}",
		 SERVER_LINK_NOTE_MAX + 100, longnote);
	assert_int_equal(server_link_released_parse(doc, strlen(doc), a, &r, &n, &e), 0);
	assert_int_equal(n, 1);
	assert_int_equal(strlen(r[0].note), SERVER_LINK_NOTE_MAX);
	arena_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_register_and_heartbeat, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_change_sends_at_once, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_failover_and_backoff, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_recovery, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_unauthorized_is_slow, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_duplicate_node, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_refused_is_slow, t_setup, t_teardown),
	    cmocka_unit_test(test_classify),
	    cmocka_unit_test(test_one_server),
	    cmocka_unit_test(test_body),
	    cmocka_unit_test(test_instance_id),
	    cmocka_unit_test(test_released_parse),
	    cmocka_unit_test(test_expand_parse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
