/*
 * Unit tests of the claim and release bodies of the server API
 * (src/api/server_api_decode.c), read without a JSON tree: the fields
 * and their defaults, null as absent, and each body refused with its
 * reason (not JSON, with its place; not an object; an unknown or
 * repeated key; a wrong type; a NUL; an ID too long or malformed). The
 * random inputs are the fuzz target's (fuzz_server_api).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/server_api_int.h"

static int claim(struct arena *a, const char *body, struct model_claim_request *c, bool *dflt,
		 struct err *e)
{
	err_clear(e);
	return server_api_decode_claim(a, body, strlen(body), c, dflt, e);
}

static void test_claim_ok(void **state)
{
	const char *body = " {\"alloc_id\": \"a1\", \"node_id\": \"n1\", \"access_mode\": "
			   "\"single-node-writer\", \"held_by_agent\": true, \"mode\": null}\n";
	struct arena *a = arena_new();
	struct model_claim_request c;
	bool dflt = false;
	struct err e;

	(void)state;
	assert_int_equal(claim(a, body, &c, &dflt, &e), 0);
	assert_string_equal(c.alloc_id, "a1");
	assert_string_equal(c.node_id, "n1");
	assert_int_equal(c.cap.access, MODEL_ACCESS_SINGLE_NODE_WRITER);
	assert_int_equal(c.mode, MODEL_CLAIM_WRITE);
	assert_true(c.held_by_agent);
	assert_true(dflt);
	assert_int_equal(claim(a,
			       "{\"alloc_id\":\"a\",\"node_id\":\"n\",\"mode\":\"read\","
			       "\"attachment_mode\":\"block-device\"}",
			       &c, &dflt, &e),
			 0);
	assert_int_equal(c.mode, MODEL_CLAIM_READ);
	assert_int_equal(c.cap.attachment, MODEL_ATTACH_BLOCK_DEVICE);
	assert_false(dflt);
	assert_false(c.held_by_agent);
	arena_free(a);
}

static void test_claim_refused(void **state)
{
	static const struct {
		const char *body, *msg;
	} bad[] = {
	    {"", "request body: empty"},
	    {"[]", "request body: expected a JSON object"},
	    {"{\"alloc_id\":\"a\",\n \"node_id\" \"n\"}",
	     "request body: malformed JSON at line 2 column 12: expected ':'"},
	    {"{\"alloc_id\":\"a\",\"node_id\":\"n\",\"mode\":\"read\"} {}",
	     "request body: malformed JSON at line 1 column 46: end of text expected"},
	    {"{\"alloc_id\":\"a\",\"node_id\":\"n\",\"mode\":\"read\",\"color\":\"red\"}",
	     "color: unknown key"},
	    {"{\"alloc_id\":\"a\",\"alloc_id\":\"b\",\"node_id\":\"n\",\"mode\":\"read\"}",
	     "alloc_id: duplicate key"},
	    {"{\"node_id\":\"n\",\"mode\":\"read\"}", "alloc_id: required"},
	    {"{\"alloc_id\":null,\"node_id\":\"n\",\"mode\":\"read\"}", "alloc_id: required"},
	    {"{\"alloc_id\":7,\"node_id\":\"n\",\"mode\":\"read\"}", "alloc_id: expected a string"},
	    {"{\"alloc_id\":\"a\\u0000b\",\"node_id\":\"n\",\"mode\":\"read\"}",
	     "alloc_id: contains NUL"},
	    {"{\"alloc_id\":\"a/b\",\"node_id\":\"n\",\"mode\":\"read\"}", "alloc_id"},
	    {"{\"alloc_id\":\"a\",\"node_id\":\"n\",\"mode\":\"read\",\"held_by_agent\":1}",
	     "held_by_agent: expected true or false"},
	    {"{\"alloc_id\":\"a\",\"node_id\":\"n\",\"mode\":\"readwritereadwrite\"}",
	     "mode: longer than 16 bytes"},
	    {"{\"alloc_id\":\"a\",\"node_id\":\"n\",\"mode\":\"rw\"}",
	     "mode: expected read or write"},
	    {"{\"alloc_id\":\"a\",\"node_id\":\"n\"}", "access_mode: required without mode"},
	};
	struct arena *a = arena_new();
	struct model_claim_request c;
	bool dflt;
	struct err e;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(claim(a, bad[i].body, &c, &dflt, &e), CSID_EINVAL);
		if (strncmp(e.msg, bad[i].msg, strlen(bad[i].msg)) != 0)
			fail_msg("%s: got \"%s\", expected \"%s\"", bad[i].body, e.msg, bad[i].msg);
	}
	arena_free(a);
}

static void test_release(void **state)
{
	const char *ok = "{\"alloc_id\":\"a\",\"force\":true,\"reason\":\"node gone\"}";
	const char *ctl = "{\"alloc_id\":\"a\",\"reason\":\"two\\nlines\"}";
	const char *force = "{\"alloc_id\":\"a\",\"force\":\"yes\"}";
	struct arena *a = arena_new();
	char *alloc = NULL, *reason = NULL;
	bool f = false;
	struct err e;

	(void)state;
	err_clear(&e);
	assert_int_equal(server_api_decode_release(a, ok, strlen(ok), &alloc, &f, &reason, &e), 0);
	assert_string_equal(alloc, "a");
	assert_true(f);
	assert_string_equal(reason, "node gone");
	assert_int_equal(
	    server_api_decode_release(a, "{\"alloc_id\":\"b\"}", 16, &alloc, &f, &reason, &e), 0);
	assert_false(f);
	assert_null(reason);
	assert_int_equal(server_api_decode_release(a, ctl, strlen(ctl), &alloc, &f, &reason, &e),
			 CSID_EINVAL);
	assert_string_equal(e.msg, "reason: contains a control character");
	err_clear(&e);
	assert_int_equal(
	    server_api_decode_release(a, force, strlen(force), &alloc, &f, &reason, &e),
	    CSID_EINVAL);
	assert_string_equal(e.msg, "force: expected true or false");
	arena_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_claim_ok),
	    cmocka_unit_test(test_claim_refused),
	    cmocka_unit_test(test_release),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
