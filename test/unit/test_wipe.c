/*
 * Secrets are zeroed after use where the server decodes requests: a
 * canary secret in a snapshot spec and in a volume spec, decoded by the
 * server API's decoders into an arena with jansson's allocator installed
 * as csid installs it. The wipe_free seam shows each released block
 * before and after zeroing: the canary did pass through jansson's blocks
 * (its lexer's token buffers, its strings) and the arena's chunks, and
 * every one of those blocks was all zeros when it went back to malloc.
 * The same for an HTTP answer gathered in a strbuf as it grows.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "api/server_api_int.h"
#include "model/model.h"
#include "util/arena.h"
#include "util/strbuf.h"
#include "util/wipe.h"

/*
 * Long, so that its tail outlives a parser's reuse of its buffer for the
 * shorter tokens after it: the tail is what the scan looks for.
 */
#define T_CANARY "canary-secret-0123456789abcdefghijklmnopqrstuvwxyz-7f1d9a5e3c"
#define T_TAIL "uvwxyz-7f1d9a5e3c"

struct seen {
	int blocks; /* released through wipe_free */
	int with_canary; /* ...that held the canary before zeroing */
	int dirty; /* ...with a non-zero byte after zeroing */
};

static bool has_canary(const unsigned char *p, size_t n)
{
	size_t k = strlen(T_TAIL);

	for (size_t i = 0; i + k <= n; i++)
		if (memcmp(p + i, T_TAIL, k) == 0)
			return true;
	return false;
}

static void observe(const void *p, size_t n, int zeroed, void *ctx)
{
	struct seen *s = ctx;
	const unsigned char *b = p;

	if (!zeroed) {
		s->blocks++;
		s->with_canary += has_canary(b, n);
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (b[i]) {
			s->dirty++;
			return;
		}
}

static int setup(void **state)
{
	wipe_json_install();
	return 0;
}

static int teardown(void **state)
{
	wipe_observe(NULL, NULL);
	return 0;
}

static void test_snapshot_spec(void **state)
{
	static const char body[] = "{\"volume_id\": \"v1\", \"secrets\": {\"password\": \"" T_CANARY
				   "\"}, \"parameters\": {\"p\": \"x\"}}";
	struct seen json = {0}, chunks = {0};
	struct arena *a = arena_new();
	struct model_snapshot *sn = NULL;
	struct err e;

	assert_non_null(a);
	wipe_observe(observe, &json);
	assert_int_equal(server_api_decode_snapshot(a, body, strlen(body), "s1", &sn, &e), 0);
	/* The parse went through jansson's blocks, the canary's copies among them. */
	assert_true(json.blocks > 0);
	assert_true(json.with_canary > 0);
	assert_int_equal(json.dirty, 0);
	/* The decoded spec holds it, in the arena... */
	assert_int_equal(sn->secrets.n, 1);
	assert_string_equal(sn->secrets.kv[0].value, T_CANARY);
	/* ...whose chunks are zeroed when it goes. */
	wipe_observe(observe, &chunks);
	arena_wipe_free(a);
	wipe_observe(NULL, NULL);
	assert_true(chunks.with_canary > 0);
	assert_int_equal(chunks.dirty, 0);
}

static void test_volume_spec(void **state)
{
	static const char body[] =
	    "{\"plugin_id\": \"hp\", \"capacity_min\": 1024, \"secrets\": {\"k\": \"" T_CANARY
	    "\"}, \"capabilities\": [{\"access_mode\": \"single-node-writer\", "
	    "\"attachment_mode\": \"file-system\"}]}";
	struct seen seen = {0};
	struct arena *a = arena_new();
	struct model_volume *v = NULL;
	struct err e;

	assert_non_null(a);
	wipe_observe(observe, &seen);
	assert_int_equal(model_volume_spec_decode(a, body, strlen(body), false, &v, &e), 0);
	assert_int_equal(v->secrets.n, 1);
	arena_wipe_free(a);
	wipe_observe(NULL, NULL);
	assert_true(seen.with_canary >= 2);
	assert_int_equal(seen.dirty, 0);
}

/* A refused body (malformed after the secret) leaves nothing either. */
static void test_refused_body(void **state)
{
	static const char body[] =
	    "{\"secrets\": {\"password\": \"" T_CANARY "\"}, \"volume_id\": ";
	struct seen seen = {0};
	struct arena *a = arena_new();
	struct model_snapshot *sn = NULL;
	struct err e;

	assert_non_null(a);
	wipe_observe(observe, &seen);
	assert_int_not_equal(server_api_decode_snapshot(a, body, strlen(body), "s1", &sn, &e), 0);
	assert_null(strstr(e.msg, T_CANARY));
	arena_wipe_free(a);
	wipe_observe(NULL, NULL);
	assert_true(seen.with_canary > 0);
	assert_int_equal(seen.dirty, 0);
}

/*
 * An HTTP answer gathered in a strbuf (the agent's claim answer carries
 * node-stage secrets): the canary lands in the first block, the buffer
 * grows past it twice, and every block it let go of was zeroed.
 */
static void test_strbuf_answer(void **state)
{
	static const char head[] = "{\"node_stage\": {\"secrets\": {\"k\": \"" T_CANARY "\"}}, ";
	struct strbuf b = {.max = 1 << 20};
	struct seen seen = {0};
	char pad[1500];

	memset(pad, ' ', sizeof(pad));
	wipe_observe(observe, &seen);
	assert_int_equal(strbuf_write((char *)head, 1, strlen(head), &b), strlen(head));
	for (int i = 0; i < 3; i++)
		assert_int_equal(strbuf_write(pad, 1, sizeof(pad), &b), sizeof(pad));
	assert_true(has_canary((const unsigned char *)b.p, b.len));
	strbuf_free(&b);
	wipe_observe(NULL, NULL);
	assert_null(b.p);
	assert_true(seen.blocks >= 3);
	assert_int_equal(seen.with_canary, seen.blocks);
	assert_int_equal(seen.dirty, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_snapshot_spec),
	    cmocka_unit_test(test_volume_spec),
	    cmocka_unit_test(test_refused_body),
	    cmocka_unit_test(test_strbuf_answer),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
