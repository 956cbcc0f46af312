/*
 * Unit tests of the agent's pull-reader decoders of server answers
 * (src/agent/claims_answer.c, src/agent/claims_stage.c): the claim that
 * waits, a volume alone, the node-stage read; what is kept, what is
 * skipped, and refusals that name the member and never quote a value.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "agent/claims_answer.h"

/* The answer of a claim that waited, for node-1, with a publication and node-stage data. */
static const char waited[] =
    "{\"volume\": {\"id\": \"v1\", \"plugin_id\": \"hp\", \"external_id\": \"ext-1\","
    " \"capacity\": 1048576, \"context\": {\"pool\": \"fast\", \"zone\": \"a\"},"
    " \"mount_options\": {\"fs_type\": \"ext4\", \"mount_flags\": [\"x\"]},"
    " \"node_expansion_required\": true, \"capabilities\": [{\"access_mode\": \"x\"}],"
    " \"claims\": [{\"node_id\": \"node-2\", \"node_expanded\": false},"
    " {\"node_id\": \"node-1\", \"node_expanded\": false}],"
    " \"publications\": [{\"node_id\": \"node-2\", \"state\": \"published\"},"
    " {\"node_id\": \"node-1\", \"state\": \"published\", \"access_mode\": \"single-node-writer\","
    " \"attachment_mode\": \"block-device\", \"context\": {\"device\": \"/dev/x\"}}],"
    " \"status\": {\"last_error\": \"busy\", \"health\": {\"ok\": true}}, \"modify_index\": 42,"
    " \"future_member\": {\"a\": [1, 2.5, null]}},"
    " \"claim\": {\"alloc_id\": \"a1\", \"access_mode\": \"single-node-writer\","
    " \"attachment_mode\": \"block-device\"},"
    " \"publication\": {\"node_id\": \"node-1\"}, \"publication_state\": \"published\","
    " \"node_stage\": {\"secrets\": {\"token\": \"SECRET-1\"}, \"mount_flags\": [\"nodev\"],"
    " \"fs_type\": \"xfs\"}}";

static void test_waited_answer(void **state)
{
	struct claims_answer *a = NULL;
	struct err e;

	(void)state;
	assert_int_equal(claims_answer_decode(waited, strlen(waited), "node-1", &a, &e), 0);
	assert_true(a->waited && a->has_volume && a->has_claim);
	assert_string_equal(a->plugin_id, "hp");
	assert_string_equal(a->external_id, "ext-1");
	assert_string_equal(a->fs_type, "ext4");
	assert_int_equal(a->capacity, 1048576);
	assert_int_equal(a->modify_index, 42);
	assert_int_equal(a->n_context, 2);
	assert_string_equal(a->context[1].key, "zone");
	assert_string_equal(a->context[1].value, "a");
	assert_true(a->node_expansion_required && a->expand_here);
	assert_string_equal(a->last_error, "busy");
	/* The publication kept is node-1's, not the first. */
	assert_non_null(a->pub);
	assert_string_equal(a->pub->state, "published");
	assert_string_equal(a->pub->attachment_mode, "block-device");
	assert_int_equal(a->pub->n_context, 1);
	assert_string_equal(a->pub->context[0].value, "/dev/x");
	assert_string_equal(a->publication_state, "published");
	assert_string_equal(a->claim_access_mode, "single-node-writer");
	assert_string_equal(a->claim_attachment_mode, "block-device");
	assert_non_null(a->stage);
	assert_int_equal(a->stage->n_secrets, 1);
	assert_string_equal(a->stage->secrets[0].value, "SECRET-1");
	assert_int_equal(a->stage->n_flags, 1);
	assert_string_equal(a->stage->fs_type, "xfs");
	claims_answer_free(a);
}

/*
 * A volume alone (a read, a blocking query, an older server's claim
 * answer): members at the top level, no publication for this node, a
 * claim of this node already expanded, nulls as absent.
 */
static void test_volume_alone(void **state)
{
	static const char vol[] =
	    "{\"plugin_id\": \"hp\", \"external_id\": null, \"capacity\": 5, \"context\": null,"
	    " \"claims\": [{\"node_id\": \"node-1\", \"node_expanded\": true}],"
	    " \"node_expansion_required\": true, \"status\": null,"
	    " \"publications\": [{\"node_id\": \"node-2\", \"state\": \"published\"}]}";
	struct claims_answer *a = NULL;
	struct err e;

	(void)state;
	assert_int_equal(claims_answer_decode(vol, strlen(vol), "node-1", &a, &e), 0);
	assert_false(a->waited);
	assert_false(a->has_volume);
	assert_null(a->pub);
	assert_null(a->external_id);
	assert_null(a->last_error);
	assert_false(a->expand_here);
	assert_int_equal(a->n_context, 0);
	assert_null(a->stage);
	assert_string_equal(a->publication_state, "");
	claims_answer_free(a);
}

/* Refusals name the member, never quote a value (the answer may hold secrets). */
static void test_refusals(void **state)
{
	static const char *const bad[] = {
	    "{\"volume\": {\"plugin_id\": 7}}",
	    "{\"volume\": {\"capacity\": 1.5}}",
	    "{\"volume\": {\"publications\": {}}}",
	    "{\"volume\": {\"context\": {\"k\": \"SECRET-2\", \"k\": \"SECRET-3\"}}}",
	    "{\"node_stage\": {\"secrets\": {\"k\": 1}}}",
	    "{\"node_stage\": {\"secrets\": {\"k\": \"SECRET-4\"}}",
	    "{\"volume\": {}, \"volume\": {}}",
	    "{\"volume\": {\"plugin_id\": \"a\\u0000SECRET-5\"}}",
	    "[\"SECRET-6\"]",
	    "",
	};
	struct claims_answer *a = NULL;
	struct err e;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err_clear(&e);
		assert_int_equal(claims_answer_decode(bad[i], strlen(bad[i]), "node-1", &a, &e),
				 CSID_EPROTO);
		assert_null(a);
		assert_non_null(strstr(e.msg, "the server's answer is malformed"));
		assert_null(strstr(e.msg, "SECRET"));
	}
	err_clear(&e);
	assert_int_equal(claims_answer_decode(bad[0], strlen(bad[0]), "node-1", &a, &e),
			 CSID_EPROTO);
	assert_non_null(strstr(e.msg, "plugin_id"));
}

/* The node-stage read alone: its three members, a key twice refused, nothing quoted. */
static void test_stage(void **state)
{
	static const char ok[] = "{\"secrets\": {\"a\": \"SECRET-7\", \"b\": \"2\"},"
				 " \"mount_flags\": [\"ro\", \"nodev\"], \"fs_type\": null,"
				 " \"other\": [true]}";
	static const char dup[] = "{\"secrets\": {}, \"secrets\": {\"a\": \"SECRET-8\"}}";
	struct claims_stage *st = NULL;
	struct err e;

	(void)state;
	assert_int_equal(claims_stage_decode(ok, strlen(ok), &st, &e), 0);
	assert_int_equal(st->n_secrets, 2);
	assert_string_equal(st->secrets[0].value, "SECRET-7");
	assert_int_equal(st->n_flags, 2);
	assert_string_equal(st->flags[1], "nodev");
	assert_null(st->fs_type);
	claims_stage_free(st);
	assert_int_equal(claims_stage_decode(dup, strlen(dup), &st, &e), CSID_EPROTO);
	assert_null(st);
	assert_null(strstr(e.msg, "SECRET"));
	assert_int_equal(claims_stage_decode(NULL, 0, &st, &e), CSID_EPROTO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_waited_answer),
	    cmocka_unit_test(test_volume_alone),
	    cmocka_unit_test(test_refusals),
	    cmocka_unit_test(test_stage),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
