/*
 * The CSI error rules: the spec's rows and the CO conventions, as
 * data-driven cases, plus the gRPC code -> csid error mapping and the code
 * names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "csi/csi_client.h"
#include "csi/csi_rules.h"

#define DONE CSI_OUTCOME_DONE
#define RETRY CSI_OUTCOME_RETRY
#define FINAL CSI_OUTCOME_FINAL

struct tr_case {
	enum csi_rpc rpc;
	int code;
	enum csi_outcome want;
};

static const struct tr_case tr_cases[] = {
    /* General table: the same for every RPC. */
    {CSI_RPC_CREATE_VOLUME, CSI_OK, DONE},
    {CSI_RPC_CREATE_VOLUME, CSI_INVALID_ARGUMENT, FINAL},
    {CSI_RPC_NODE_STAGE_VOLUME, CSI_INVALID_ARGUMENT, FINAL},
    {CSI_RPC_CONTROLLER_PUBLISH_VOLUME, CSI_ABORTED, RETRY},
    {CSI_RPC_NODE_PUBLISH_VOLUME, CSI_ABORTED, RETRY},
    {CSI_RPC_CREATE_SNAPSHOT, CSI_ABORTED, RETRY},
    {CSI_RPC_PROBE, CSI_UNIMPLEMENTED, FINAL},
    {CSI_RPC_GET_CAPACITY, CSI_UNIMPLEMENTED, FINAL},
    {CSI_RPC_NODE_EXPAND_VOLUME, CSI_UNIMPLEMENTED, FINAL},
    {CSI_RPC_DELETE_VOLUME, CSI_PERMISSION_DENIED, FINAL},
    {CSI_RPC_NODE_STAGE_VOLUME, CSI_UNAUTHENTICATED, FINAL},
    /* Outcome unknown: retry the same idempotent call. */
    {CSI_RPC_CREATE_VOLUME, CSI_DEADLINE_EXCEEDED, RETRY},
    {CSI_RPC_NODE_STAGE_VOLUME, CSI_DEADLINE_EXCEEDED, RETRY},
    {CSI_RPC_DELETE_VOLUME, CSI_UNAVAILABLE, RETRY},
    {CSI_RPC_NODE_UNPUBLISH_VOLUME, CSI_UNAVAILABLE, RETRY},
    {CSI_RPC_CONTROLLER_PUBLISH_VOLUME, CSI_CANCELLED, RETRY},
    /* NOT_FOUND on the undo calls is done (CO convention). */
    {CSI_RPC_NODE_UNPUBLISH_VOLUME, CSI_NOT_FOUND, DONE},
    {CSI_RPC_NODE_UNSTAGE_VOLUME, CSI_NOT_FOUND, DONE},
    {CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME, CSI_NOT_FOUND, DONE},
    {CSI_RPC_DELETE_VOLUME, CSI_NOT_FOUND, DONE},
    {CSI_RPC_DELETE_SNAPSHOT, CSI_NOT_FOUND, DONE},
    /* NOT_FOUND elsewhere: verify, then retry with backoff. */
    {CSI_RPC_CREATE_VOLUME, CSI_NOT_FOUND, RETRY},
    {CSI_RPC_CONTROLLER_PUBLISH_VOLUME, CSI_NOT_FOUND, RETRY},
    {CSI_RPC_NODE_STAGE_VOLUME, CSI_NOT_FOUND, RETRY},
    {CSI_RPC_VALIDATE_VOLUME_CAPABILITIES, CSI_NOT_FOUND, RETRY},
    /* ...except reads, where it is the answer. */
    {CSI_RPC_CONTROLLER_GET_VOLUME, CSI_NOT_FOUND, FINAL},
    {CSI_RPC_NODE_GET_VOLUME_STATS, CSI_NOT_FOUND, FINAL},
    /* FAILED_PRECONDITION by RPC. */
    {CSI_RPC_NODE_EXPAND_VOLUME, CSI_FAILED_PRECONDITION, FINAL},
    {CSI_RPC_NODE_PUBLISH_VOLUME, CSI_FAILED_PRECONDITION, FINAL},
    {CSI_RPC_NODE_STAGE_VOLUME, CSI_FAILED_PRECONDITION, FINAL},
    {CSI_RPC_CONTROLLER_EXPAND_VOLUME, CSI_FAILED_PRECONDITION, FINAL},
    {CSI_RPC_DELETE_VOLUME, CSI_FAILED_PRECONDITION, RETRY},
    {CSI_RPC_CONTROLLER_PUBLISH_VOLUME, CSI_FAILED_PRECONDITION, RETRY},
    {CSI_RPC_DELETE_SNAPSHOT, CSI_FAILED_PRECONDITION, RETRY},
    {CSI_RPC_DELETE_VOLUME_GROUP_SNAPSHOT, CSI_FAILED_PRECONDITION, RETRY},
    {CSI_RPC_CREATE_VOLUME_GROUP_SNAPSHOT, CSI_FAILED_PRECONDITION, FINAL},
    {CSI_RPC_PROBE, CSI_FAILED_PRECONDITION, RETRY},
    /* RESOURCE_EXHAUSTED: retry, except a snapshot without space. */
    {CSI_RPC_CREATE_VOLUME, CSI_RESOURCE_EXHAUSTED, RETRY},
    {CSI_RPC_CONTROLLER_PUBLISH_VOLUME, CSI_RESOURCE_EXHAUSTED, RETRY},
    {CSI_RPC_CREATE_SNAPSHOT, CSI_RESOURCE_EXHAUSTED, FINAL},
    /* A stale page token: restart the listing, not the same call. */
    {CSI_RPC_LIST_VOLUMES, CSI_ABORTED, FINAL},
    {CSI_RPC_LIST_SNAPSHOTS, CSI_ABORTED, FINAL},
    /* Fix the arguments. */
    {CSI_RPC_CREATE_VOLUME, CSI_ALREADY_EXISTS, FINAL},
    {CSI_RPC_CREATE_VOLUME, CSI_OUT_OF_RANGE, FINAL},
    {CSI_RPC_NODE_PUBLISH_VOLUME, CSI_ALREADY_EXISTS, FINAL},
    /* Plugin failures of its own: retried with backoff. */
    {CSI_RPC_NODE_STAGE_VOLUME, CSI_INTERNAL, RETRY},
    {CSI_RPC_CREATE_VOLUME, CSI_UNKNOWN, RETRY},
    {CSI_RPC_CREATE_VOLUME, CSI_DATA_LOSS, FINAL},
    /* Out of range inputs. */
    {CSI_RPC_CREATE_VOLUME, 17, FINAL},
    {CSI_RPC_CREATE_VOLUME, -1, FINAL},
    {(enum csi_rpc)CSI_RPC_COUNT, CSI_UNAVAILABLE, FINAL},
    {(enum csi_rpc)CSI_RPC_COUNT, CSI_OK, DONE},
};

static void test_outcomes(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(tr_cases) / sizeof(tr_cases[0]); i++) {
		const struct tr_case *c = &tr_cases[i];
		enum csi_outcome got = csi_rules_outcome(c->rpc, c->code);

		if (got != c->want)
			fail_msg("rpc %d code %s: got %s, want %s", (int)c->rpc,
				 csi_code_name(c->code), csi_outcome_name(got),
				 csi_outcome_name(c->want));
	}
}

/* Properties that hold for every RPC. */
static void test_every_rpc(void **state)
{
	(void)state;
	for (int r = 0; r < CSI_RPC_COUNT; r++) {
		assert_int_equal(csi_rules_outcome((enum csi_rpc)r, CSI_OK), DONE);
		assert_int_equal(csi_rules_outcome((enum csi_rpc)r, CSI_UNIMPLEMENTED), FINAL);
		assert_int_equal(csi_rules_outcome((enum csi_rpc)r, CSI_INVALID_ARGUMENT), FINAL);
		assert_int_equal(csi_rules_outcome((enum csi_rpc)r, CSI_DEADLINE_EXCEEDED), RETRY);
		assert_int_equal(csi_rules_outcome((enum csi_rpc)r, CSI_UNAVAILABLE), RETRY);
		for (int code = 1; code <= CSI_UNAUTHENTICATED; code++) {
			enum csi_outcome o = csi_rules_outcome((enum csi_rpc)r, code);

			assert_true(o == DONE || o == RETRY || o == FINAL);
			/* Only NOT_FOUND on an undo call counts as done. */
			if (o == DONE)
				assert_int_equal(code, CSI_NOT_FOUND);
		}
	}
}

static void test_uncertain(void **state)
{
	(void)state;
	assert_true(csi_rules_uncertain(CSI_DEADLINE_EXCEEDED));
	assert_true(csi_rules_uncertain(CSI_UNAVAILABLE));
	assert_true(csi_rules_uncertain(CSI_CANCELLED));
	assert_false(csi_rules_uncertain(CSI_OK));
	assert_false(csi_rules_uncertain(CSI_NOT_FOUND));
	assert_false(csi_rules_uncertain(CSI_ABORTED));
}

static void test_status_to_err(void **state)
{
	static const struct {
		int code;
		int err;
	} map[] = {
	    {CSI_OK, 0},
	    {CSI_CANCELLED, CSID_ECANCELED},
	    {CSI_INVALID_ARGUMENT, CSID_EINVAL},
	    {CSI_DEADLINE_EXCEEDED, CSID_ETIMEDOUT},
	    {CSI_NOT_FOUND, CSID_ENOTFOUND},
	    {CSI_ALREADY_EXISTS, CSID_EEXIST},
	    {CSI_PERMISSION_DENIED, CSID_EPERM},
	    {CSI_RESOURCE_EXHAUSTED, CSID_EEXHAUSTED},
	    {CSI_FAILED_PRECONDITION, CSID_EPRECOND},
	    {CSI_ABORTED, CSID_EABORTED},
	    {CSI_OUT_OF_RANGE, CSID_ERANGE},
	    {CSI_UNIMPLEMENTED, CSID_EUNIMPL},
	    {CSI_INTERNAL, CSID_EINTERNAL},
	    {CSI_UNAVAILABLE, CSID_EUNAVAIL},
	    {CSI_UNAUTHENTICATED, CSID_EUNAUTH},
	    {99, CSID_EINTERNAL},
	    {-3, CSID_EINTERNAL},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		assert_int_equal(csi_status_to_err(map[i].code), map[i].err);
	/* Every non-OK code is an error. */
	for (int code = 1; code <= CSI_UNAUTHENTICATED; code++)
		assert_true(csi_status_to_err(code) < 0);
}

static void test_code_names(void **state)
{
	(void)state;
	assert_string_equal(csi_code_name(CSI_NOT_FOUND), "NOT_FOUND");
	assert_string_equal(csi_code_name(CSI_OK), "OK");
	assert_string_equal(csi_code_name(CSI_UNAUTHENTICATED), "UNAUTHENTICATED");
	assert_string_equal(csi_code_name(17), "UNKNOWN_CODE");
	assert_string_equal(csi_code_name(-1), "UNKNOWN_CODE");
	for (int code = 0; code <= CSI_UNAUTHENTICATED; code++)
		assert_int_equal(csi_code_parse(csi_code_name(code)), code);
	assert_int_equal(csi_code_parse("not_found"), CSI_NOT_FOUND);
	assert_int_equal(csi_code_parse("Deadline_Exceeded"), CSI_DEADLINE_EXCEEDED);
	assert_int_equal(csi_code_parse("NOPE"), -1);
	assert_int_equal(csi_code_parse(""), -1);
	assert_int_equal(csi_code_parse(NULL), -1);
	assert_string_equal(csi_outcome_name(DONE), "done");
	assert_string_equal(csi_outcome_name(RETRY), "retry");
	assert_string_equal(csi_outcome_name(FINAL), "final");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_outcomes),   cmocka_unit_test(test_every_rpc),
	    cmocka_unit_test(test_uncertain),  cmocka_unit_test(test_status_to_err),
	    cmocka_unit_test(test_code_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
